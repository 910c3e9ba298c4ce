"""Logged feedback: what a deployed policy showed, where, and what users did.

* ``feed_log``              – ``FeedLog``: validated trajectories (session, item, rank, reward)
* ``policies``              – ranking policies and their exposure of logged items (Eq. 8)
* ``plackett_luce``         – exact Plackett–Luce rank marginals and exposure, sampling
* ``logged_dcg``            – unbiased DCG on logs, clipped, normalised (Jeunen et al. Eq. 10)
* ``doubly_robust``         – doubly robust DCG on logs: direct method + weighted residual
* ``ranking_ips``           – standard, cascade and independent IPS of whole rankings
* ``adaptive_ips``          – adaptive IPS: weights that follow each session's user behaviour
* ``estimator_choice``      – every ranking estimator on a log, one chosen by SLOPE
* ``cascade_dr``            – Cascade-DR: cascade IPS with a reward model at every rank
* ``pseudo_inverse``        – the pseudo-inverse estimator of additive ranking rewards
* ``thompson_sampling``     – Bernoulli Thompson sampling's exact rank and prefix probabilities
* ``position_bias``         – examination curves from shuffled traffic or by EM (Wang et al.)
* ``banner_marginals``      – P(P_r = p | displayed set) of a Plackett–Luce banner (Gilotte App. A)
* ``pairwise_disagreement`` – classic and counterfactual pairwise disagreement (Gilotte 2019)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .adaptive_ips import BehaviorSelection, adaptive_ips, select_behavior
    from .banner_marginals import banner_rank_marginals, sampled_banner_rank_marginals
    from .cascade_dr import cascade_dr
    from .doubly_robust import logged_dr_dcg
    from .estimator_choice import EstimatorChoice, EstimatorRow, choose_estimator
    from .feed_log import FeedLog
    from .logged_dcg import logged_dcg
    from .pairwise_disagreement import (
        Disagreement,
        counterfactual_disagreement,
        pairwise_disagreement,
    )
    from .plackett_luce import exposure, rank_marginals, sample_rankings
    from .policies import DeterministicRanker, Exposure, LoggedRanking, PlackettLuceRanker
    from .position_bias import PositionBiasEM, ShuffledPositionBias
    from .pseudo_inverse import pseudo_inverse
    from .ranking_ips import cascade_ips, independent_ips, standard_ips
    from .thompson_sampling import ThompsonSamplingRanker

export_lazily(__name__)

__all__ = [
    "FeedLog",
    "logged_dcg",
    "logged_dr_dcg",
    "standard_ips",
    "cascade_ips",
    "independent_ips",
    "adaptive_ips",
    "select_behavior",
    "BehaviorSelection",
    "choose_estimator",
    "EstimatorChoice",
    "EstimatorRow",
    "cascade_dr",
    "pseudo_inverse",
    "LoggedRanking",
    "DeterministicRanker",
    "PlackettLuceRanker",
    "ThompsonSamplingRanker",
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
