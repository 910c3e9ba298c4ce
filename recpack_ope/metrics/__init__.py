"""Held-out estimators: a users×items matrix of rewards against a model's scores or rankings.

* ``ranking``          – scores → ranks, ``TopK`` precomputed rankings
* ``dcg``              – DCG, nDCG, pnDCG and their IPS-weighted forms, self-normalised IPS
  DCG (Jeunen et al.)
* ``doubly_robust``    – doubly robust DCG: a reward model's DCG plus the IPS-weighted residual
* ``recall``           – recall@k and its IPS-weighted form (``ips_recall``)
* ``stratified``       – propensity-stratified evaluation of any metric (Jadidinejad et al. Eq. 4)
* ``simpsons_paradox`` – the two-model holdout / IPS / stratified / per-stratum report
* ``rpp``              – recall-paired preference, pairwise matrix, win rates (Diaz & Ferraro)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .dcg import dcg, ideal_dcg, ips_dcg, ips_ndcg, ips_pn_dcg, ndcg, pn_dcg, snips_dcg
    from .doubly_robust import dr_dcg
    from .ranking import TopK
    from .recall import ips_recall, recall
    from .rpp import RecallLevels, preference_matrix, rpp, win_rates
    from .simpsons_paradox import SimpsonsParadoxReport, simpsons_paradox
    from .stratified import StratifiedResult, Stratum, stratified

export_lazily(__name__)

__all__ = [
    "dcg",
    "ips_dcg",
    "snips_dcg",
    "ips_ndcg",
    "ips_pn_dcg",
    "ips_recall",
    "ndcg",
    "pn_dcg",
    "ideal_dcg",
    "dr_dcg",
    "TopK",
    "recall",
    "stratified",
    "StratifiedResult",
    "Stratum",
    "simpsons_paradox",
    "SimpsonsParadoxReport",
    "rpp",
    "preference_matrix",
    "win_rates",
    "RecallLevels",
]
