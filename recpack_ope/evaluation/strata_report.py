"""One model's propensity-stratified report (Jadidinejad, Macdonald & Ounis, TOIS 2021, §5–7).

For every metric: the holdout value (``Closed``), the IPS-weighted value with the IPS weights'
effective sample size (``IPS``, ``IPS ESS/n``), optionally the doubly robust DCG (``DR``), the
value per propensity stratum (``Q1`` … ``QS``) and their recombination by Eq. 4
(``Stratified``). Framework adapters rank, this module evaluates and renders; two models'
reports compare with :func:`recpack_ope.metrics.simpsons_paradox.simpsons_paradox`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..inference.diagnostics import ReliabilityWarning, WeightDiagnostics
from ..inference.result import EstimateResult
from ..inference.sensitivity import SHOWN_GAMMA
from ..metrics.simpsons_paradox import SimpsonsParadoxReport, simpsons_paradox
from ..metrics.stratified import StratifiedResult, stratified
from ..propensity.discount import Discount
from ..registry import ESTIMATORS, Estimator, default, estimator

__all__ = ["ESS_ROW", "ReportMetric", "StrataReport", "simpsons_paradox_of", "strata_report"]

#: Row with the Kish effective sample size, over n, of the IPS row's weights.
ESS_ROW = "IPS ESS/n"


@dataclass(frozen=True)
class ReportMetric:
    """One column of a :class:`StrataReport`.

    Attributes
    ----------
    estimator : str or callable
        A held-out estimator of :data:`recpack_ope.registry.ESTIMATORS` (``"ndcg"``,
        ``"ips_dcg"``, …) or a base metric ``metric(y_true, ranking, propensity=None,
        clip=None) -> EstimateResult`` that is unweighted without ``propensity``.
    discount : Discount
        Curve and cutoff of a registry estimator (recall reads the cutoff only).
    propensity : optional
        The estimator's own propensities, for a weighted registry estimator: its Closed and
        stratum rows are weighted by them.
    clip : float, "auto" or None
        Clipping of those own weights (default as for :func:`strata_report`).
    """

    estimator: str | Callable[..., EstimateResult]
    discount: Discount | None = None
    propensity: object = None
    clip: float | str | None = default("clip")

    def entry(self) -> Estimator | None:
        """The registry entry, None for a callable."""
        return estimator(self.estimator, "held_out") if isinstance(self.estimator, str) else None

    def own(self, y_true, ranking, **_) -> EstimateResult:
        """The estimate with the metric's own weights (Closed and stratum rows)."""
        entry = self.entry()
        if entry is None:
            return self.estimator(y_true, ranking)
        return entry(
            y_true, ranking, discount=self.discount, propensity=self.propensity, clip=self.clip
        )

    def ips(self, y_true, ranking, propensity, clip) -> EstimateResult:
        """The IPS row: the weighted counterpart of the estimator with ``propensity``."""
        entry = self.entry()
        if entry is None:
            return self.estimator(y_true, ranking, propensity=propensity, clip=clip)
        if not entry.weighted:
            entry = next(
                e for e in ESTIMATORS.values() if e.weighting == "ips" and e.plain == entry.name
            )
        return entry(y_true, ranking, discount=self.discount, propensity=propensity, clip=clip)

    @property
    def doubly_robust(self) -> Estimator | None:
        """The doubly robust estimator of the same base estimator, if the registry has one."""
        entry = self.entry()
        base = None if entry is None else (entry.plain or entry.name)
        return next(
            (
                e
                for e in ESTIMATORS.values()
                if e.data == "held_out" and e.weighting == "doubly_robust" and e.plain == base
            ),
            None,
        )


@dataclass(frozen=True)
class StrataReport:
    """Closed, IPS, (DR,) per-stratum and stratified results of one model, per metric.

    Attributes
    ----------
    estimates : dict
        Column name → :class:`~recpack_ope.metrics.stratified.StratifiedResult` (its
        ``holdout`` is the Closed row, its ``strata`` the Q rows).
    ips : dict
        Column name → the IPS row's :class:`~recpack_ope.EstimateResult`.
    dr : dict
        Column name → doubly robust DCG, for the columns whose estimator has one, when a
        reward model was given.
    """

    estimates: dict[str, StratifiedResult]
    ips: dict[str, EstimateResult]
    dr: dict[str, EstimateResult] = field(default_factory=dict)

    def rows(self) -> dict[str, dict[str, float]]:
        """Row label → {column → value, ``"SIZE"`` → interactions}: ``Closed``, ``IPS``,
            ``IPS ESS/n``, ``DR`` (with a reward model; NaN in columns without DR), ``Q1`` …
            ``QS``, ``Stratified``.

            Examples
            --------
            >>> import numpy as np
            >>> from recpack_ope.metrics.ranking import TopK
        >>> from recpack_ope.propensity.discount import LogDiscount
            >>> from recpack_ope.evaluation.strata_report import ReportMetric, strata_report
            >>> y = np.array([[1, 0, 1], [0, 1, 0]])
            >>> report = strata_report(y, TopK(np.array([[0, 1, 2], [1, 0, 2]])),
            ...                        np.array([0.2, 1.0, 1.0]), {"DCG": ReportMetric("dcg",
            ...                        LogDiscount(2))}, clip=None)
            >>> {label: row["DCG"] for label, row in report.rows().items()}["IPS"]
            3.0
        """
        first = next(iter(self.estimates.values()))
        n = first.n_interactions
        labels = ["Closed", "IPS", ESS_ROW, *(["DR"] if self.dr else [])]
        rows = {label: {} for label in labels}
        rows |= {s.label: {} for s in first.strata} | {"Stratified": {}}
        for name, r in self.estimates.items():
            d = self.ips[name].diagnostics
            rows["Closed"][name], rows["IPS"][name] = r.holdout.value, self.ips[name].value
            rows[ESS_ROW][name] = np.nan if d is None else d.ess_ratio
            if self.dr:
                rows["DR"][name] = self.dr[name].value if name in self.dr else np.nan
            for s in r.strata:
                rows[s.label][name] = s.value
            rows["Stratified"][name] = r.value
        sizes = {s.label: s.n_interactions for s in first.strata}
        for label, row in rows.items():
            row["SIZE"] = sizes.get(label, n)
        return rows

    def simpsons_paradox(
        self,
        other: StrataReport,
        metric: str | None = None,
        alpha: float = 0.05,
        names: tuple[str, str] = ("a", "b"),
    ) -> SimpsonsParadoxReport:
        """Jadidinejad et al. Table 2 of this model against ``other`` on the column ``metric``
        (default: the first): :func:`recpack_ope.metrics.simpsons_paradox.simpsons_paradox` of
        the two stratified results, with their IPS rows."""
        metric = next(iter(self.estimates)) if metric is None else metric
        if metric not in self.estimates or metric not in other.estimates:
            raise ValueError(f"no metric {metric!r}; the results have {list(self.estimates)}")
        return simpsons_paradox(
            self.estimates[metric],
            other.estimates[metric],
            alpha=alpha,
            names=names,
            ips=(self.ips[metric], other.ips[metric]),
        )

    def unreliable_ips(self) -> dict[str, WeightDiagnostics]:
        """Column → diagnostics of the IPS values that a reliability criterion flags
        (:attr:`~recpack_ope.inference.diagnostics.WeightDiagnostics.reasons`)."""
        return {
            name: r.diagnostics
            for name, r in self.ips.items()
            if r.diagnostics is not None and not r.diagnostics.reliable
        }

    def unreliable(self) -> list[str]:
        """Every unreliable weighted value with what flagged it, e.g.
        ``"IPS nDCG (ESS 12 < 50)"``: the IPS row, and the Closed and stratum rows of columns
        with their own weights."""
        found = []
        for name, r in self.estimates.items():
            rows = [("IPS", self.ips[name]), ("Closed", r.holdout)]
            for row, result in rows + [(s.label, s.result) for s in r.strata]:
                d = getattr(result, "diagnostics", None)
                if d is not None and not d.reliable:
                    found.append(f"{row} {name} ({d.explain()})")
        return found

    def table(self) -> str:
        """The rows as text (values to 4 significant digits), with notes on unreliable IPS
        values, the IPS values' sensitivity bounds at Γ =
        :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` and clippings selected by
        SLOPE."""
        rows = self.rows()
        columns = list(next(iter(rows.values())))
        cells = [["", *columns]] + [
            [label, *(f"{v:.4g}" if c != "SIZE" else f"{v:d}" for c, v in row.items())]
            for label, row in rows.items()
        ]
        widths = [max(len(line[j]) for line in cells) for j in range(len(columns) + 1)]
        text = "\n".join(
            "  ".join(
                [
                    line[0].ljust(widths[0]),
                    *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)),
                ]
            )
            for line in cells
        )
        unreliable = self.unreliable_ips()
        if unreliable:
            listed = "; ".join(f"{name} ({d.explain()})" for name, d in unreliable.items())
            text += (
                f"\nIPS rows marked unreliable: {listed}; clip the weights (clip=...) or read "
                "the IPS row with caution"
            )
        bounds = {
            name: r.sensitivity(SHOWN_GAMMA)
            for name, r in self.ips.items()
            if getattr(r, "weighting", None) is not None and r.n_users > 1
        }
        if bounds:
            text += f"\nIPS rows with propensities off by up to ×{SHOWN_GAMMA:g}: " + ", ".join(
                f"{name} [{b.low:.4g}, {b.high:.4g}]" + ("" if b.exact else " (outer bounds)")
                for name, b in bounds.items()
            )
        selected = {
            name: r.clip_selection.clip
            for name, r in self.ips.items()
            if getattr(r, "clip_selection", None) is not None
        }
        if selected:
            text += "\nIPS clipping selected by SLOPE: " + ", ".join(
                f"{name} m={'∞' if m is None else f'{m:g}'}" for name, m in selected.items()
            )
        return text


def strata_report(
    y_true,
    ranking,
    propensity,
    metrics: Mapping[str, ReportMetric],
    *,
    n_strata: int = default("n_strata"),
    binning: str = default("binning"),
    clip: float | str | None = default("clip"),
    reward_model=None,
    model: str = "the model",
) -> StrataReport:
    """Evaluate one model's ranking Closed / IPS / (DR /) per stratum / Stratified.

    Parameters
    ----------
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards.
    ranking : TopK or scores
        The model's ranking of the same rows (as for :func:`recpack_ope.metrics.dcg.dcg`).
    propensity : 1-D array or fitted propensity model
        Exposure propensities: the strata and the IPS (and DR) rows' weights.
    metrics : mapping of str to ReportMetric
        Column name → metric.
    n_strata, binning
        As in :func:`recpack_ope.metrics.stratified.stratified`.
    clip : float, "auto" or None
        Clipping of the IPS and DR rows' weights: default the held-out estimators' own
        (:func:`recpack_ope.registry.default`); None for the unclipped estimators.
    reward_model : optional
        A reward model (:mod:`recpack_ope.reward`) over the same rows: adds the ``DR`` row
        (:func:`recpack_ope.metrics.doubly_robust.dr_dcg`) to the columns of DCG estimators.
    model : str
        Names the model in the one :class:`~recpack_ope.ReliabilityWarning` issued when any
        weighted value is unreliable (instead of one per metric and row).

    Returns
    -------
    StrataReport

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics.ranking import TopK
    >>> from recpack_ope.propensity.discount import LogDiscount
    >>> from recpack_ope.evaluation.strata_report import ReportMetric, strata_report
    >>> y = np.array([[1, 0, 1], [0, 1, 0]])
    >>> ranking = TopK(np.array([[0, 1, 2], [1, 0, 2]]))
    >>> p = np.array([0.2, 1.0, 1.0])
    >>> report = strata_report(y, ranking, p, {"Recall@1": ReportMetric("recall", LogDiscount(1))},
    ...                        clip=None)
    >>> report.estimates["Recall@1"].holdout.value, report.ips["Recall@1"].value
    (0.75, 0.9166666666666667)
    """
    estimates, ips, dr = {}, {}, {}
    with warnings.catch_warnings():
        # One warning for the whole report (below), not one per metric and row.
        warnings.simplefilter("ignore", ReliabilityWarning)
        for name, metric in metrics.items():
            estimates[name] = stratified(
                metric.own,
                y_true,
                ranking,
                stratify_by=propensity,
                n_strata=n_strata,
                binning=binning,
            )
            ips[name] = metric.ips(y_true, ranking, propensity, clip)
            robust = metric.doubly_robust
            if reward_model is not None and robust is not None:
                dr[name] = robust(
                    y_true,
                    ranking,
                    discount=metric.discount,
                    propensity=propensity,
                    clip=clip,
                    reward_model=reward_model,
                )
    report = StrataReport(estimates, ips, dr)
    found = report.unreliable()
    if found:
        warnings.warn(
            f"{model}: unreliable weighted estimates, flagged by their weight diagnostics: "
            f"{'; '.join(found)}. Clip the weights (clip=...) or check the "
            f"propensities; the table's {ESS_ROW!r} row shows the IPS ratios.",
            ReliabilityWarning,
            stacklevel=3,
        )
    return report


def simpsons_paradox_of(
    a, b, kind: type, where: str, metric: str | None = None, alpha: float = 0.05
) -> SimpsonsParadoxReport:
    """:meth:`StrataReport.simpsons_paradox` of two models' framework results, instances of
    ``kind`` holding the report as ``report`` and the name as ``model_name``; any other result
    is refused with a TypeError saying ``where`` such results are found.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> simpsons_paradox_of("BPR", None, SimpleNamespace, "experiment.result[i]")
    Traceback (most recent call last):
    ...
    TypeError: a must be a SimpleNamespace (experiment.result[i]), got str
    """
    for name, result in (("a", a), ("b", b)):
        if not isinstance(result, kind):
            raise TypeError(
                f"{name} must be a {kind.__name__} ({where}), got {type(result).__name__}"
            )
    return a.report.simpsons_paradox(b.report, metric, alpha, (a.model_name, b.model_name))
