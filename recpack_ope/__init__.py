"""recpack-ope: evaluation that tells whether offline numbers track online reward.

The framework-free core. Every formula lives here; ``recpack_ope.adapters`` only translates
RecPack's and Cornac's data structures into these calls.

Where things are (one subpackage per concern; arrows only point down the list):

* ``inference``  – result objects and intervals (``result``), paired and multiple tests
  (``significance``), several systems on the same users (``systems``), MC4/Borda
  (``aggregation``), agreement between metrics and Steiger's test (``agreement``)
* ``propensity`` – exposure propensities (``models``: power law, popularity, fixed) and their
  diagnostics (``fit_report``), IPS weights (``weights``), examination curves δ(r)
  (``discount``)
* ``reward``     – reward models for doubly robust estimates: given probabilities, calibrated
  scores (``models``, ``calibration``)
* ``metrics``    – held-out estimators: scores → ranks (``ranking``), the DCG family
  (``dcg``), doubly robust DCG (``doubly_robust``), ``recall``, propensity-``stratified`` evaluation and its ``simpsons_paradox``
  report, recall-paired preference (``rpp``)
* ``logged``     – feed logs (``feed_log``), ranking policies and their exposure
  (``policies``, ``plackett_luce``), unbiased DCG on logs (``logged_dcg``) and its doubly
  robust form (``doubly_robust``),
  ``position_bias`` estimation, ``banner_marginals`` and ``pairwise_disagreement``
* ``simulation`` – a seeded world with exact online reward (``world``) and its baseline
  recommenders (``baselines``)
* ``io``         – MovieLens (``movielens``, ``recpack_datasets``), trec files (``trec``),
  parquet/CSV tables (``tables``)
* ``spark``      – the estimators on Spark DataFrames (``pip install ".[spark]"``)
* ``studies``    – the demo and every reproduction, one module per ``reproduce`` command
* ``cli``        – the ``recpack-ope`` command

Every formula is written out in ``docs/definitions.md``. The modules of the earlier flat layout
(``recpack_ope.dcg``, ``recpack_ope.datasets``, …) stay importable under their old names.
"""

from . import _moved
from .inference.agreement import agreement, disagreement_probability, steiger_test, steiger_z
from .inference.clipping import ClipSelection
from .inference.diagnostics import ReliabilityWarning, WeightDiagnostics
from .inference.result import Comparison, EstimateResult, LoggedEstimate, PairedEstimate
from .inference.significance import (
    TiedWithBest,
    adjust_p_values,
    discriminative_power,
    paired_t_tests,
    randomised_tukey_hsd,
    tied_with_best,
)
from .inference.systems import PreferenceMatrix, SystemScores
from .io.movielens import load_movielens_100k
from .io.split import holdout_split
from .logged.doubly_robust import logged_dr_dcg
from .logged.feed_log import FeedLog
from .logged.logged_dcg import logged_dcg
from .logged.pairwise_disagreement import (
    Disagreement,
    counterfactual_disagreement,
    pairwise_disagreement,
)
from .logged.policies import DeterministicRanker, Exposure, LoggedRanking, PlackettLuceRanker
from .logged.position_bias import PositionBiasEM, ShuffledPositionBias
from .metrics.dcg import dcg, ideal_dcg, ips_dcg, ndcg, pn_dcg
from .metrics.doubly_robust import dr_dcg
from .metrics.ranking import TopK
from .metrics.recall import recall
from .metrics.rpp import preference_matrix, rpp, win_rates
from .metrics.simpsons_paradox import SimpsonsParadoxReport, simpsons_paradox
from .metrics.stratified import StratifiedResult, Stratum, stratified
from .propensity.discount import (
    CustomDiscount,
    Discount,
    ExponentialDiscount,
    LogDiscount,
    ReciprocalDiscount,
)
from .propensity.fit_report import PropensityFitReport
from .propensity.models import (
    FixedPropensity,
    PopularityPropensity,
    PowerLawPropensity,
    item_counts,
)
from .reward import CalibratedScores, RewardMatrix, ScoreCalibration

_moved.install()

__version__ = "0.1.0"

__all__ = [
    "dcg",
    "ips_dcg",
    "ndcg",
    "pn_dcg",
    "ideal_dcg",
    "dr_dcg",
    "logged_dr_dcg",
    "RewardMatrix",
    "CalibratedScores",
    "ScoreCalibration",
    "recall",
    "stratified",
    "StratifiedResult",
    "Stratum",
    "simpsons_paradox",
    "SimpsonsParadoxReport",
    "FeedLog",
    "logged_dcg",
    "LoggedRanking",
    "DeterministicRanker",
    "PlackettLuceRanker",
    "Exposure",
    "ShuffledPositionBias",
    "PositionBiasEM",
    "Disagreement",
    "pairwise_disagreement",
    "counterfactual_disagreement",
    "LoggedEstimate",
    "rpp",
    "preference_matrix",
    "win_rates",
    "PreferenceMatrix",
    "SystemScores",
    "paired_t_tests",
    "randomised_tukey_hsd",
    "discriminative_power",
    "adjust_p_values",
    "tied_with_best",
    "TiedWithBest",
    "Discount",
    "LogDiscount",
    "ExponentialDiscount",
    "ReciprocalDiscount",
    "CustomDiscount",
    "PowerLawPropensity",
    "PopularityPropensity",
    "FixedPropensity",
    "item_counts",
    "PropensityFitReport",
    "TopK",
    "EstimateResult",
    "WeightDiagnostics",
    "ReliabilityWarning",
    "ClipSelection",
    "PairedEstimate",
    "Comparison",
    "agreement",
    "disagreement_probability",
    "steiger_test",
    "steiger_z",
    "holdout_split",
    "load_movielens_100k",
]


def __getattr__(name: str):
    # Old flat-layout modules as attributes (``recpack_ope.io.movielens``) when not shadowed.
    return _moved.old_module(__name__, name)
