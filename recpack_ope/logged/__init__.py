"""Logged feedback: what a deployed policy showed, where, and what users did.

* ``feed_log``              – ``FeedLog``: validated trajectories (session, item, rank, reward)
* ``policies``              – ranking policies and their exposure of logged items (Eq. 8)
* ``plackett_luce``         – exact Plackett–Luce rank marginals and exposure, sampling
* ``logged_dcg``            – unbiased DCG on logs, clipped, normalised (Jeunen et al. Eq. 10)
* ``doubly_robust``         – doubly robust DCG on logs: direct method + weighted residual
* ``ranking_ips``           – standard, cascade and independent IPS of whole rankings
* ``position_bias``         – examination curves from shuffled traffic or by EM (Wang et al.)
* ``banner_marginals``      – P(P_r = p | displayed set) of a Plackett–Luce banner (Gilotte App. A)
* ``pairwise_disagreement`` – classic and counterfactual pairwise disagreement (Gilotte 2019)
"""

from .banner_marginals import banner_rank_marginals, sampled_banner_rank_marginals
from .doubly_robust import logged_dr_dcg
from .feed_log import FeedLog
from .logged_dcg import logged_dcg
from .pairwise_disagreement import Disagreement, counterfactual_disagreement, pairwise_disagreement
from .plackett_luce import exposure, rank_marginals, sample_rankings
from .policies import DeterministicRanker, Exposure, LoggedRanking, PlackettLuceRanker
from .position_bias import PositionBiasEM, ShuffledPositionBias
from .ranking_ips import cascade_ips, independent_ips, standard_ips

__all__ = [
    "FeedLog",
    "logged_dcg",
    "logged_dr_dcg",
    "standard_ips",
    "cascade_ips",
    "independent_ips",
    "LoggedRanking",
    "DeterministicRanker",
    "PlackettLuceRanker",
    "Exposure",
    "rank_marginals",
    "exposure",
    "sample_rankings",
    "ShuffledPositionBias",
    "PositionBiasEM",
    "banner_rank_marginals",
    "sampled_banner_rank_marginals",
    "Disagreement",
    "pairwise_disagreement",
    "counterfactual_disagreement",
]
