"""Inference: result objects with intervals, paired and multiple tests, aggregation of systems.

The bottom layer: it knows per-user values and their statistics, nothing about rankings or
propensities.

* ``result``       – ``EstimateResult`` / ``LoggedEstimate``: value, per-user terms, delta-method
  intervals, paired ``compare``
* ``systems``      – ``SystemScores`` and ``PreferenceMatrix``: M systems on the same users
* ``significance`` – paired t-tests with Bonferroni, Holm or Benjamini–Hochberg, randomised
  Tukey HSD, discriminative power, systems tied with the best (Hsu's MCB)
* ``aggregation``  – MC4, Borda and majority orderings of per-user system scores
* ``agreement``    – agreement between two metrics over models, Steiger's test
* ``leaderboard``  – ``Leaderboard``: models × metrics with intervals, the best, the models tied
  with it, corrected pairwise tests; LaTeX, Markdown, HTML, JSON and CSV exports and plots
* ``moments``      – ``Moments`` and ``SummaryEstimate``: estimates from merged sufficient
  statistics (what distributed engines return)
* ``diagnostics``  – weight diagnostics of IPS estimates, the propensities' calibration
  against impressions, ``ReliabilityWarning``
* ``clipping``     – ``clip="auto"``: SLOPE selection of the clipping threshold, ``ClipSelection``
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .aggregation import borda, majority, mc4, order
    from .agreement import (
        MetricAgreement,
        SteigerResult,
        agreement,
        disagreement_probability,
        steiger_test,
        steiger_z,
    )
    from .clipping import ClipSelection
    from .diagnostics import PropensityCalibration, ReliabilityWarning, WeightDiagnostics
    from .leaderboard import Leaderboard, leaderboard
    from .moments import Moments, SummaryEstimate
    from .result import Comparison, EstimateResult, LoggedEstimate, PairedEstimate
    from .significance import (
        DiscriminativePower,
        PairwiseTests,
        TiedWithBest,
        adjust_p_values,
        discriminative_power,
        paired_t_tests,
        randomised_tukey_hsd,
        tied_with_best,
    )
    from .systems import PreferenceMatrix, SystemScores

export_lazily(__name__)

__all__ = [
    "EstimateResult",
    "LoggedEstimate",
    "PairedEstimate",
    "Comparison",
    "Moments",
    "SummaryEstimate",
    "WeightDiagnostics",
    "PropensityCalibration",
    "ReliabilityWarning",
    "ClipSelection",
    "SystemScores",
    "PreferenceMatrix",
    "PairwiseTests",
    "paired_t_tests",
    "randomised_tukey_hsd",
    "DiscriminativePower",
    "discriminative_power",
    "adjust_p_values",
    "TiedWithBest",
    "tied_with_best",
    "order",
    "mc4",
    "borda",
    "majority",
    "MetricAgreement",
    "agreement",
    "disagreement_probability",
    "SteigerResult",
    "steiger_test",
    "steiger_z",
    "Leaderboard",
    "leaderboard",
]
