"""Simpson's-paradox report for two models (Jadidinejad, Macdonald & Ounis, TOIS 2021, §4, §7.1).

The layout of the paper's Tables 2–5: the holdout value, optionally an IPS value, the
stratified value (Eq. 4) and every stratum Q1…QS, each with both models' values, a paired
t-test over users and the number of interactions and items behind it. The report flags a
paradox when the holdout comparison points one way (or nowhere) while the strata that hold
the majority of the held-out feedback point the other way, as in Table 1b, where model B wins
the stratum holding 99 % of the feedback but model A wins the aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_fraction
from ..inference.result import EstimateResult, PairedEstimate
from .stratified import StratifiedResult

__all__ = ["ParadoxRow", "SimpsonsParadoxReport", "simpsons_paradox"]


@dataclass(frozen=True)
class ParadoxRow:
    """One row of the report: both models' values on one evaluation of the same feedback.

    ``p_value`` is the two-sided paired t-test (delta method for ratio and stratified
    estimates) of ``value_a − value_b`` over users; NaN when the row cannot be tested.
    """

    label: str
    value_a: float
    value_b: float
    p_value: float
    n_interactions: int
    n_items: int
    share: float

    @property
    def direction(self) -> int:
        """+1 when model A has the higher value, −1 when B has, 0 for a tie or an empty row."""
        diff = self.value_a - self.value_b
        return 0 if not np.isfinite(diff) else int(np.sign(diff))


def _p_value(a: PairedEstimate | None, b: PairedEstimate | None) -> float:
    """Paired p-value of ``a − b``; NaN when fewer than two users make a test impossible."""
    if a is None or b is None or a.n_users < 2:
        return np.nan
    return a.compare(b).p_value


@dataclass(frozen=True)
class SimpsonsParadoxReport:
    """Holdout, IPS, stratified and per-stratum comparison of two models.

    Attributes
    ----------
    names : tuple of str
        Display names of model A and model B.
    metric : str
        The base metric, e.g. ``"nDCG@10"``.
    rows : tuple of ParadoxRow
        ``Holdout``, ``IPS`` (when given), ``Stratified``, then ``Q1 … QS``.
    alpha : float
        Significance level of the stars in :meth:`table`.
    """

    names: tuple[str, str]
    metric: str
    rows: tuple[ParadoxRow, ...]
    alpha: float

    def row(self, label: str) -> ParadoxRow:
        """The row called ``label`` (``"Holdout"``, ``"IPS"``, ``"Stratified"``, ``"Q1"`` …)."""
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(f"no row {label!r}; rows are {[r.label for r in self.rows]}")

    @property
    def strata(self) -> tuple[ParadoxRow, ...]:
        """The per-stratum rows."""
        fixed = ("Holdout", "IPS", "Stratified")
        return tuple(r for r in self.rows if r.label not in fixed)

    @property
    def aggregate_direction(self) -> int:
        """Direction of the holdout comparison (+1: A better, −1: B better, 0: tie)."""
        return self.row("Holdout").direction

    @property
    def majority_direction(self) -> int:
        """Direction shared by strata holding more than half of the held-out feedback, else 0."""
        for direction in (1, -1):
            if sum(r.share for r in self.strata if r.direction == direction) > 0.5:
                return direction
        return 0

    @property
    def majority_share(self) -> float:
        """Share of the feedback in the strata that follow :attr:`majority_direction`."""
        if self.majority_direction == 0:
            return 0.0
        return float(sum(r.share for r in self.strata if r.direction == self.majority_direction))

    @property
    def paradox(self) -> bool:
        """True when the holdout direction differs from the majority strata's direction."""
        return self.majority_direction != 0 and self.aggregate_direction != self.majority_direction

    def _better(self, direction: int) -> str:
        return {1: self.names[0], -1: self.names[1], 0: "neither model"}[direction]

    def _compared(self, row: ParadoxRow, one: str, both: str) -> str:
        """``one`` favours the better model when the row's paired test is significant at
        :attr:`alpha`; otherwise ``both`` (of A and B) do not differ significantly: a
        direction without significance is no finding."""
        p = f"(p = {row.p_value:.3g})"
        if row.p_value < self.alpha and row.direction:  # NaN (untestable) compares False
            return f"{one} favours {self._better(row.direction)} {p}"
        return f"{both} of {self.names[0]} and {self.names[1]} do not differ significantly {p}"

    def verdict(self) -> str:
        """One sentence saying whether the paradox appears, with the numbers behind it; the
        holdout and stratified comparisons are worded by their significance at :attr:`alpha`
        ("favours A (p = 0.003)" or "do not differ significantly (p = 0.859)")."""
        holdout, strat = self.row("Holdout"), self.row("Stratified")
        majority = (
            f"{self._better(self.majority_direction)} is better in strata holding "
            f"{self.majority_share:.1%} of the held-out feedback"
        )
        if self.majority_direction == 0:
            majority = "no model is better in strata holding a majority of the feedback"
        head = "Simpson's paradox" if self.paradox else "No reversal"
        holdout_is, strat_is = f"the holdout {self.metric}", "the stratified estimate"
        return (
            f"{head}: {self._compared(holdout, holdout_is, f'{holdout_is} values')}; "
            f"{majority}; {self._compared(strat, strat_is, f'{strat_is}s')}."
        )

    def table(self) -> str:
        """The report as a Markdown table; ``*`` marks the better model where p < alpha."""
        a, b = self.names
        lines = [
            f"| {self.metric} | {a} | {b} | p-value | interactions | items |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            star = np.isfinite(r.p_value) and r.p_value < self.alpha
            cells = []
            for value, direction in ((r.value_a, 1), (r.value_b, -1)):
                mark = "*" if star and r.direction == direction else ""
                cells.append("–" if np.isnan(value) else f"{value:.4g}{mark}")
            size = f"{r.n_interactions:,}"
            if r.label not in ("Holdout", "IPS", "Stratified"):
                size += f" ({r.share:.1%})"
            p = "–" if np.isnan(r.p_value) else f"{r.p_value:.3g}"
            lines.append(f"| {r.label} | {cells[0]} | {cells[1]} | {p} | {size} | {r.n_items:,} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"{self.table()}\n\n{self.verdict()}"


def simpsons_paradox(
    a: StratifiedResult,
    b: StratifiedResult,
    *,
    names: tuple[str, str] = ("A", "B"),
    ips: tuple[EstimateResult, EstimateResult] | None = None,
    alpha: float = 0.05,
) -> SimpsonsParadoxReport:
    """Compare two models' stratified evaluations in the layout of Jadidinejad et al. Table 2.

    Parameters
    ----------
    a, b : StratifiedResult
        :func:`recpack_ope.metrics.stratified` of the same base metric, held-out data and strata for
        model A and model B.
    names : tuple of str
        Display names of A and B.
    ips : tuple of EstimateResult, optional
        The IPS-weighted base metric of A and B (e.g. ``ips_ndcg(..., propensity=p)``), shown as
        the paper's "IPS" row.
    alpha : float
        Significance level for the stars of the table.

    Returns
    -------
    SimpsonsParadoxReport
    """
    alpha = check_fraction(alpha, "alpha")
    for arg, value in (("a", a), ("b", b)):
        if not isinstance(value, StratifiedResult):
            raise TypeError(
                f"{arg} must be the StratifiedResult of recpack_ope.metrics.stratified, got "
                f"{type(value).__name__}"
            )
    if (
        not isinstance(names, (tuple, list))
        or len(names) != 2
        or not all(isinstance(n, str) for n in names)
    ):
        raise ValueError(f"names must hold two model names, got {names!r}")
    if ips is not None and (
        not isinstance(ips, (tuple, list))
        or len(ips) != 2
        or not all(isinstance(e, PairedEstimate) for e in ips)
    ):
        kinds = (
            [type(e).__name__ for e in ips]
            if isinstance(ips, (tuple, list))
            else type(ips).__name__
        )
        raise ValueError(
            f"ips must be a pair of estimates (EstimateResult of A, of B), got {kinds}"
        )
    if a.holdout.name != b.holdout.name:
        raise ValueError(
            f"cannot compare {a.holdout.name} with {b.holdout.name}: different metrics"
        )
    if not (
        np.array_equal(a.user_ids, b.user_ids)
        and np.array_equal(a.counts, b.counts)
        and [(s.lower, s.upper) for s in a.strata] == [(s.lower, s.upper) for s in b.strata]
    ):
        raise ValueError(
            "the two results were stratified differently (users, strata or stratum sizes "
            "differ): evaluate both models on the same y_true with the same stratify_by"
        )
    total = a.n_interactions
    rows = [
        ParadoxRow(
            "Holdout",
            a.holdout.value,
            b.holdout.value,
            _p_value(a.holdout, b.holdout),
            total,
            a.n_items,
            1.0,
        )
    ]
    if ips is not None:
        ips_a, ips_b = ips
        rows.append(
            ParadoxRow(
                "IPS", ips_a.value, ips_b.value, _p_value(ips_a, ips_b), total, a.n_items, 1.0
            )
        )
    rows.append(ParadoxRow("Stratified", a.value, b.value, _p_value(a, b), total, a.n_items, 1.0))
    for sa, sb in zip(a.strata, b.strata, strict=True):
        rows.append(
            ParadoxRow(
                sa.label,
                sa.value,
                sb.value,
                _p_value(sa.result, sb.result),
                sa.n_interactions,
                sa.n_items,
                sa.share,
            )
        )
    return SimpsonsParadoxReport(
        names=tuple(names), metric=a.holdout.name, rows=tuple(rows), alpha=alpha
    )
