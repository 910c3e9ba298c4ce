"""recpack-ope: evaluation that tells whether offline numbers track online reward.

The framework-free core. Every formula lives here; ``recpack_ope.adapters`` only translates
RecPack's and Cornac's data structures into these calls.

Where things are:

* ``discount``   – position-bias curves δ(r) (``LogDiscount``, ``ExponentialDiscount``, …)
* ``propensity`` – exposure propensities (``PowerLawPropensity``, ``PopularityPropensity``)
* ``dcg``        – DCG, unbiased DCG, nDCG, pnDCG (Jeunen et al. KDD'24)
* ``recall``     – recall@k
* ``stratified`` – propensity-stratified evaluation of any metric (Jadidinejad et al. TOIS'21)
* ``simpsons_paradox`` – the two-model holdout / IPS / stratified / per-stratum report
* ``rpp``        – recall-paired preference: pairwise matrix, win rates (Diaz & Ferraro SIGIR'22)
* ``systems``    – ``SystemScores``: per-user scores of several systems, ordered and tested
* ``aggregation`` – MC4 and Borda aggregation of per-user system orders
* ``significance`` – Bonferroni t-tests, randomised Tukey HSD, discriminative power
* ``trec``       – trec_eval-format qrels and runs
* ``rpp_power``  – the ``reproduce rpp-power`` experiment
* ``ranking``    – scores → ranks (``TopK`` for precomputed rankings)
* ``feed_log``   – ``FeedLog``: logged trajectories (session, item, rank, reward, propensity)
* ``policies``   – ranking policies and their exposure of logged items (Eq. 8)
* ``logged_dcg`` – unbiased DCG on logs, clipped, normalised (Jeunen et al. Eq. 10, §6.2)
* ``position_bias`` – examination curves from shuffled traffic or by EM (Wang et al. 2018)
* ``banner_marginals`` – P(P_r = p | displayed set) of a Plackett–Luce banner (Gilotte App. A)
* ``pairwise_disagreement`` – classic and counterfactual pairwise disagreement (Gilotte 2019)
* ``sensitivity`` – the ``reproduce sensitivity`` experiment (Jeunen et al. Figure 1)
* ``disagreement_study`` – the ``reproduce disagreement`` experiment (Gilotte Figure 3)
* ``result``     – ``EstimateResult``: value, per-user values, intervals, paired comparisons
* ``stats``      – metric agreement, disagreement probability, Steiger's test
* ``datasets``   – MovieLens-100K loading
* ``simulation`` – a seeded world with exact online reward (``SimulatedWorld``, logging policies)
* ``plackett_luce`` – exact Plackett–Luce rank marginals and exposure, sampling
* ``baselines``  – popularity, item-kNN and EASE recommenders for the simulator's model pool
* ``demo``, ``cli`` – the ``recpack-ope demo`` main job
"""

from .datasets import load_movielens_100k
from .dcg import dcg, ideal_dcg, ndcg, pn_dcg, unbiased_dcg
from .discount import CustomDiscount, Discount, ExponentialDiscount, LogDiscount, ReciprocalDiscount
from .feed_log import FeedLog
from .logged_dcg import logged_dcg
from .pairwise_disagreement import Disagreement, counterfactual_disagreement, pairwise_disagreement
from .policies import DeterministicRanker, Exposure, LoggedRanking, PlackettLuceRanker
from .position_bias import PositionBiasEM, ShuffledPositionBias
from .propensity import FixedPropensity, PopularityPropensity, PowerLawPropensity, item_counts
from .ranking import TopK
from .recall import recall
from .result import Comparison, EstimateResult, LoggedEstimate, PairedEstimate
from .rpp import PreferenceMatrix, preference_matrix, rpp, win_rates
from .significance import discriminative_power, paired_t_tests, randomised_tukey_hsd
from .simpsons_paradox import SimpsonsParadoxReport, simpsons_paradox
from .stats import agreement, disagreement_probability, steiger_test, steiger_z
from .stratified import StratifiedResult, Stratum, stratified
from .systems import SystemScores

__version__ = "0.1.0"

__all__ = [
    "dcg",
    "unbiased_dcg",
    "ndcg",
    "pn_dcg",
    "ideal_dcg",
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
    "Discount",
    "LogDiscount",
    "ExponentialDiscount",
    "ReciprocalDiscount",
    "CustomDiscount",
    "PowerLawPropensity",
    "PopularityPropensity",
    "FixedPropensity",
    "item_counts",
    "TopK",
    "EstimateResult",
    "PairedEstimate",
    "Comparison",
    "agreement",
    "disagreement_probability",
    "steiger_test",
    "steiger_z",
    "load_movielens_100k",
]
