"""Held-out estimators: a users×items matrix of rewards against a model's scores or rankings.

* ``ranking``          – scores → ranks, ``TopK`` precomputed rankings
* ``dcg``              – DCG, unbiased (IPS) and self-normalised DCG, nDCG, pnDCG (Jeunen et al.)
* ``doubly_robust``    – doubly robust DCG: a reward model's DCG plus the IPS-weighted residual
* ``recall``           – recall@k, optionally IPS-weighted
* ``stratified``       – propensity-stratified evaluation of any metric (Jadidinejad et al. Eq. 4)
* ``simpsons_paradox`` – the two-model holdout / IPS / stratified / per-stratum report
* ``rpp``              – recall-paired preference, pairwise matrix, win rates (Diaz & Ferraro)
"""

from .dcg import dcg, ideal_dcg, ndcg, pn_dcg, unbiased_dcg
from .doubly_robust import dr_dcg
from .ranking import TopK
from .recall import recall
from .rpp import RecallLevels, preference_matrix, rpp, win_rates
from .simpsons_paradox import SimpsonsParadoxReport, simpsons_paradox
from .stratified import StratifiedResult, Stratum, stratified

__all__ = [
    "dcg", "unbiased_dcg", "ndcg", "pn_dcg", "ideal_dcg", "dr_dcg", "TopK", "recall",
    "stratified", "StratifiedResult", "Stratum", "simpsons_paradox", "SimpsonsParadoxReport",
    "rpp", "preference_matrix", "win_rates", "RecallLevels",
]
