"""Evaluating many registry estimators at once, the way the framework adapters and the CLI do.

It sits above :mod:`recpack_ope.registry` and below the engines, adapters and studies:

* ``inputs``        – :class:`~recpack_ope.evaluation.inputs.EstimatorInputs`: propensities,
  discount, clipping, strata, reward model and impressions, checked once, and any held-out
  estimator of the registry computed from them (sharing one prepared ranking)
* ``strata_report`` – one model's Closed / IPS / DR / Q1…QS / Stratified report
  (Jadidinejad et al. TOIS'21 Table 2), with one reliability warning per model
"""

from .inputs import EstimatorInputs
from .strata_report import ESS_ROW, ReportMetric, StrataReport, strata_report

__all__ = ["ESS_ROW", "EstimatorInputs", "ReportMetric", "StrataReport", "strata_report"]
