"""Evaluating many registry estimators at once, the way the framework adapters and the CLI do.

It sits above :mod:`recpack_ope.registry` and below the engines, adapters and studies:

* ``inputs``        – :class:`~recpack_ope.evaluation.inputs.EstimatorInputs`: propensities,
  discount, clipping, strata, reward model and impressions, checked once, and any held-out
  estimator of the registry computed from them (sharing one prepared ranking)
* ``strata_report`` – one model's Closed / IPS / DR / Q1…QS / Stratified report
  (Jadidinejad et al. TOIS'21 Table 2), with one reliability warning per model
* ``files``         – :func:`~recpack_ope.evaluation.files.evaluate_files`: models evaluated
  from parquet or CSV files (``recpack-ope evaluate``), rows, table, comparisons, JSON or CSV
* ``rpp_report``    – :func:`~recpack_ope.evaluation.rpp_report.rpp_report`: trec_eval-format
  runs compared by RPP, dcgRPP and invRPP (``recpack-ope rpp``)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .files import FileEvaluation, evaluate_files
    from .inputs import EstimatorInputs
    from .rpp_report import RPPReport, rpp_report
    from .strata_report import ESS_ROW, ReportMetric, StrataReport, strata_report

export_lazily(__name__)

__all__ = [
    "ESS_ROW",
    "EstimatorInputs",
    "FileEvaluation",
    "RPPReport",
    "ReportMetric",
    "StrataReport",
    "evaluate_files",
    "rpp_report",
    "strata_report",
]
