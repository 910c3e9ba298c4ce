"""recpack-ope: evaluation that tells whether offline numbers track online reward.

The framework-free core. Every formula lives here; ``recpack_ope.adapters`` only translates
RecPack's and Cornac's data structures into these calls.

The top level is a starting kit: the estimators, the examination curves, the propensity
models, the result types, ``ReliabilityWarning``, ``leaderboard`` and the MovieLens loader with
its hold-out split. Everything else is imported from the subpackage that holds it (one
subpackage per concern; arrows only point down the list):

* ``inference``  – result objects and intervals (``result``), paired and multiple tests
  (``significance``), several systems on the same users (``systems``), MC4/Borda
  (``aggregation``), agreement between metrics and Steiger's test (``agreement``)
* ``propensity`` – exposure propensities (``models``: power law, popularity, fixed) and their
  diagnostics (``fit_report``), IPS weights (``weights``), examination curves δ(r)
  (``discount``)
* ``reward``     – reward models for doubly robust estimates: given probabilities, calibrated
  scores (``models``, ``calibration``)
* ``metrics``    – held-out estimators: scores → ranks (``ranking``), the DCG family
  (``dcg``), doubly robust DCG (``doubly_robust``), ``recall``, propensity-``stratified``
  evaluation and its ``simpsons_paradox`` report, recall-paired preference (``rpp``)
* ``logged``     – feed logs (``feed_log``), ranking policies and their exposure
  (``policies``, ``plackett_luce``), unbiased DCG on logs (``logged_dcg``) and its doubly
  robust form (``doubly_robust``), ``position_bias`` estimation, ``banner_marginals`` and
  ``pairwise_disagreement``
* ``simulation`` – a seeded world with exact online reward (``world``) and its baseline
  recommenders (``baselines``)
* ``io``         – MovieLens (``movielens``, ``recpack_datasets``), hold-out ``split``, trec
  files (``trec``), parquet/CSV tables (``tables``)
* ``registry``   – the table of estimators: one name, label, needs and core function per
  estimator, read by the CLI, the Spark engine and the framework adapters
* ``spark``      – the estimators on Spark DataFrames (``pip install ".[spark]"``)
* ``studies``    – the demo and every reproduction, one module per ``reproduce`` command
* ``cli``        – the ``recpack-ope`` command

Every formula is written out in ``docs/definitions.md``.
"""

from typing import TYPE_CHECKING

from ._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy): a light start-up
    from .inference.diagnostics import ReliabilityWarning
    from .inference.leaderboard import Leaderboard, leaderboard
    from .inference.result import Comparison, EstimateResult, LoggedEstimate
    from .io.movielens import load_movielens_100k
    from .io.split import holdout_split
    from .logged.logged_dcg import logged_dcg
    from .metrics.dcg import dcg, ips_dcg, ips_ndcg, ips_pn_dcg, ndcg, pn_dcg, snips_dcg
    from .metrics.doubly_robust import dr_dcg
    from .metrics.recall import ips_recall, recall
    from .metrics.rpp import rpp
    from .metrics.stratified import stratified
    from .propensity.discount import (
        CustomDiscount,
        ExponentialDiscount,
        LogDiscount,
        ReciprocalDiscount,
    )
    from .propensity.models import FixedPropensity, PopularityPropensity, PowerLawPropensity

export_lazily(__name__)

__version__ = "0.1.0"

__all__ = [
    # estimators on held-out data: plain, then weighted by inverse propensities
    "dcg",
    "ndcg",
    "pn_dcg",
    "recall",
    "ips_dcg",
    "snips_dcg",
    "ips_ndcg",
    "ips_pn_dcg",
    "ips_recall",
    "dr_dcg",
    "stratified",
    "rpp",
    # estimator on logged feeds
    "logged_dcg",
    # examination curves δ(r) with their cutoff
    "LogDiscount",
    "ExponentialDiscount",
    "ReciprocalDiscount",
    "CustomDiscount",
    # exposure propensities
    "PowerLawPropensity",
    "PopularityPropensity",
    "FixedPropensity",
    # results
    "EstimateResult",
    "LoggedEstimate",
    "Comparison",
    "ReliabilityWarning",
    # several models on several metrics: intervals, the best, paper-ready tables
    "leaderboard",
    "Leaderboard",
    # data to start with
    "load_movielens_100k",
    "holdout_split",
]
