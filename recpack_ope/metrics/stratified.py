"""Propensity-stratified evaluation (Jadidinejad, Macdonald & Ounis, TOIS 2021, §5).

Held-out interactions are partitioned into S strata by the propensity ``p_ui`` with which the
deployed system exposed them (Definition 5.1): equal-width bins in propensity value (the
paper's and Cornac's choice) or equal-mass quantiles. Any base metric ``M`` of the core is
evaluated per stratum, where only that stratum's interactions count as relevant and the
ranking is unchanged, and the strata are recombined by Eq. 4::

    M_stratified = Σ_s P(s) · M_s,    P(s) = n_s / N,

``n_s`` being the stratum's share of the N held-out interactions. With one stratum this is the
plain (holdout) value of the metric.

Uncertainty is by the delta method over users, as for every estimate of the package: with
``U`` the evaluated users, ``U_s ⊆ U`` those with interactions in stratum s, ``π_s = |U_s|/|U|``,
``n_su`` user u's interactions in s and ``n̄ = N/|U|``, the influence of user u is

    z_u = Σ_s [ P(s)/π_s · 1[u ∈ U_s] · z_su  +  M_s · (n_su − P(s) · n_u) / n̄ ],

where ``z_su`` is u's influence on ``M_s``. The second term is the uncertainty of the stratum
shares themselves; it vanishes with one stratum.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validation import as_csr, check_positive_int, check_rewards, real_array
from ..inference.diagnostics import ReliabilityWarning, WeightDiagnostics
from ..inference.moments import Moments, SummaryEstimate
from ..inference.result import EstimateResult, PairedEstimate
from ..propensity.weights import entry_propensities
from .ranking import shared_ranking

__all__ = [
    "BINNINGS",
    "Stratum",
    "StrataBins",
    "StratifiedResult",
    "StratifiedSummary",
    "stratum_index",
    "stratified",
]

BINNINGS = ("width", "mass")


def stratum_index(
    propensities: np.ndarray, n_strata: int, binning: str = "width"
) -> tuple[np.ndarray, np.ndarray]:
    """Assign each propensity to one of ``n_strata`` strata.

    Parameters
    ----------
    propensities : numpy.ndarray
        One finite value per held-out interaction.
    n_strata : int
        Number of strata S, at most the number of values (more would leave strata empty by
        construction, each still costing a stratum record).
    binning : {"width", "mass"}
        ``"width"``: S equal-width bins between the smallest and largest propensity (the
        paper's and Cornac's stratification). ``"mass"``: bins at the empirical quantiles, so
        each stratum holds about N/S interactions; interactions with equal propensity always
        share a stratum, so ties can leave strata uneven or empty.

    Returns
    -------
    index : numpy.ndarray of int
        Stratum ``0 … S−1`` of every propensity; stratum 0 holds the least exposed.
    edges : numpy.ndarray
        The S+1 bin edges. Bins are closed on the right, ``(e_s, e_{s+1}]`` (the first also
        holds ``e_0``), as in ``pandas.cut`` and ``pandas.qcut``.

    Notes
    -----
    A value on an edge belongs to the bin below it, decided without rounding the edge:

    * ``"width"``: ``v`` lies on edge j when ``S·(v − min) = j·(max − min)``. The test allows
      a relative tolerance of 2**-40 of the magnitudes involved, far above the rounding of
      values that were computed or rescaled in floating point (2**-53 each) and far below
      any real gap between distinct propensities. Only the ratios ``(v − min)/(max − min)``
      matter, so multiplying every value by the same positive constant (without overflow or
      underflow) leaves every stratum unchanged, also for values on edges (e.g. counts
      ``[1, 2, 3]`` and the same counts divided by 7 both put 2 in the first stratum).
    * ``"mass"``: edge j is the quantile at level j/S, linearly interpolated between the
      sorted values at virtual position ``h = (N − 1)·j/S``; a value lies at or below it
      exactly when it is at most the sorted value at ``⌊h⌋`` (computed in integers). The
      strata depend only on the order of the values, so any increasing transformation keeps
      them.
    """
    bins = StrataBins.fit(propensities, n_strata, binning)
    return bins.index(bins.values), bins.edges


@dataclass(frozen=True, eq=False)
class StrataBins:
    """The strata of :func:`stratum_index`, fitted once and applied to any values.

    Fitted on the propensities of all held-out interactions (given as distinct values with
    their counts when the data is large or distributed), the bins stratify any subset — a
    chunk of users, a Spark partition — exactly as the whole is stratified.

    Attributes
    ----------
    binning : str
        ``"width"`` or ``"mass"``.
    n_strata : int
        Number of strata S.
    edges : numpy.ndarray
        The S+1 bin edges (:func:`stratum_index`).
    lo, hi : float
        Smallest and largest propensity (what equal-width bins are decided on).
    thresholds : numpy.ndarray
        Equal-mass bins: the sorted value at virtual position ``⌊(N − 1)·j/S⌋``, j = 1 … S−1;
        a value belongs below edge j when it is at most threshold j.
    values : numpy.ndarray
        The values the bins were fitted on.
    """

    binning: str
    n_strata: int
    edges: np.ndarray
    lo: float
    hi: float
    thresholds: np.ndarray
    values: np.ndarray

    @classmethod
    def fit(cls, propensities, n_strata: int, binning: str = "width", *, counts=None) -> StrataBins:
        """Bins of ``n_strata`` strata for ``propensities`` (each counted ``counts`` times)."""
        n_strata = check_positive_int(n_strata, "n_strata")
        if binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
        values = real_array(propensities, "propensities").astype(np.float64, copy=False)
        if values.ndim != 1 or values.size == 0:
            raise ValueError(
                f"need a non-empty 1-D array of propensities, got shape {values.shape}"
            )
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(
                f"propensities must be finite, got {values[bad[0]]} at position {bad[0]}"
            )
        if counts is None:
            weights = np.ones(values.size, dtype=np.int64)
        else:
            weights = real_array(counts, "counts")
            if (
                weights.shape != values.shape
                or weights.dtype.kind not in "iu"
                or (weights < 1).any()
            ):
                raise ValueError("counts must hold one positive integer count per propensity value")
        total = int(weights.sum())
        if n_strata > total:
            raise ValueError(
                f"n_strata={n_strata} exceeds the {total} values to stratify: at least "
                f"{n_strata - total} strata would be empty, and every stratum costs a record "
                f"and a metric evaluation; use at most {total} strata"
            )
        levels = np.linspace(0.0, 1.0, n_strata + 1)
        lo, hi = float(values.min()), float(values.max())
        if binning == "width":
            edges = lo + levels * (hi - lo)
            edges[-1] = hi
            return cls(binning, n_strata, edges, lo, hi, np.empty(0), values)
        order = np.argsort(values, kind="stable")
        ordered, cumulative = values[order], np.cumsum(weights[order])

        def at(position: np.ndarray) -> np.ndarray:
            """The sorted (expanded) value at 0-based ``position``."""
            return ordered[np.searchsorted(cumulative, position, side="right")]

        thresholds = at((total - 1) * np.arange(1, n_strata, dtype=np.int64) // n_strata)
        # np.quantile's linear interpolation at virtual position h = (N − 1)·level.
        h = (total - 1) * levels
        below, above, t = at(np.floor(h)), at(np.ceil(h)), h - np.floor(h)
        edges = np.where(t >= 0.5, above - (above - below) * (1 - t), below + (above - below) * t)
        return cls(binning, n_strata, edges, lo, hi, thresholds, values)

    def index(self, propensities) -> np.ndarray:
        """Stratum ``0 … S−1`` of every value (values within the fitted range)."""
        values = np.asarray(propensities, dtype=np.float64)
        if self.binning == "width":
            return _width_index(values, self.n_strata, self.lo, self.hi)
        return np.searchsorted(self.thresholds, values, side="left")


# Relative tolerance of the on-edge test of equal-width binning (stratum_index, Notes).
_EDGE_TOLERANCE = 2.0**-40


def _width_index(values: np.ndarray, n_strata: int, lo: float, hi: float) -> np.ndarray:
    """Equal-width stratum of every value between ``lo`` and ``hi``, right-closed, with values
    on an edge placed below it whatever the scale of the values (:func:`stratum_index`,
    Notes). O(N)."""
    if not np.isfinite(hi - lo):
        # Halving is exact for the huge magnitudes whose difference overflows.
        values, lo, hi = values / 2, lo / 2, hi / 2
    spread = hi - lo
    if spread == 0:
        return np.zeros(values.size, dtype=np.intp)
    position = (values - lo) / spread * n_strata
    edge = np.rint(position)
    # |S·(v − lo) − j·(hi − lo)| relative to the magnitudes that rounding acts on.
    magnitude = n_strata * (np.abs(values) / spread + abs(lo) / spread) + edge * (
        abs(hi) / spread + abs(lo) / spread
    )
    on_edge = np.abs(position - edge) <= _EDGE_TOLERANCE * magnitude
    index = np.where(on_edge, edge - 1, np.ceil(position) - 1)
    return np.clip(index, 0, n_strata - 1).astype(np.intp)


@dataclass(frozen=True, eq=False)
class Stratum:
    """One propensity stratum of the held-out interactions.

    Attributes
    ----------
    label : str
        ``"Q1"`` (least exposed) … ``"QS"`` (most exposed), the paper's naming.
    lower, upper : float
        Propensity range ``(lower, upper]`` of the stratum.
    n_interactions : int
        Held-out interactions in the stratum, ``n_s``.
    n_items : int
        Distinct items among them.
    share : float
        ``P(s) = n_s / N``.
    result : EstimateResult or None
        The base metric on the stratum's interactions; None for an empty stratum.
    """

    label: str
    lower: float
    upper: float
    n_interactions: int
    n_items: int
    share: float
    result: EstimateResult | None

    @property
    def value(self) -> float:
        """``M_s``, NaN for an empty stratum."""
        return np.nan if self.result is None else self.result.value


class _StrataReport:
    """What a stratified estimate reports about its strata, whether it holds per-user values
    (:class:`StratifiedResult`) or their moments (:class:`StratifiedSummary`)."""

    @property
    def diagnostics(self) -> WeightDiagnostics | None:
        """Weight diagnostics of an IPS-weighted base metric over all held-out interactions
        (the holdout's); each stratum's own are on ``strata[s].result.diagnostics``."""
        return self.holdout.diagnostics

    @property
    def unreliable_strata(self) -> list[str]:
        """Labels of the strata whose weighted estimate is flagged unreliable."""
        return [
            s.label
            for s in self.strata
            if s.result is not None
            and s.result.diagnostics is not None
            and not s.result.diagnostics.reliable
        ]

    @property
    def shares(self) -> np.ndarray:
        """``P(s)`` of every stratum."""
        return np.array([s.share for s in self.strata])

    def __repr__(self) -> str:
        parts = ", ".join(f"{s.label} {s.value:.4g} ({s.share:.1%})" for s in self.strata)
        text = (
            f"{self.name} = {self.value:.6g} over {self.n_users} users "
            f"[holdout {self.holdout.value:.6g}; {parts}]"
        )
        if self.diagnostics is not None:
            flag = "" if self.diagnostics.reliable else "UNRELIABLE: "
            text += f"\n  {flag}weights (holdout): {self.diagnostics.summary()}"
            if self.unreliable_strata:
                text += f"\n  unreliable strata: {', '.join(self.unreliable_strata)}"
        return text


@dataclass(frozen=True, eq=False, repr=False)
class StratifiedResult(_StrataReport, PairedEstimate):
    """A stratified estimate ``Σ_s P(s) · M_s`` with its strata and the holdout value.

    Attributes
    ----------
    name : str
        E.g. ``"Stratified nDCG@10"``.
    holdout : EstimateResult
        The base metric on all held-out interactions (the paper's "Holdout" row).
    strata : tuple of Stratum
        Per-stratum sizes, shares, ranges and results.
    counts : numpy.ndarray, shape (n_users, n_strata)
        Held-out interactions of every evaluated user in every stratum.
    binning : str
        ``"width"`` or ``"mass"``.
    n_items : int
        Distinct items among all held-out interactions.
    """

    name: str
    holdout: EstimateResult
    strata: tuple[Stratum, ...]
    counts: np.ndarray
    binning: str
    n_items: int

    @property
    def user_ids(self) -> np.ndarray:
        """Evaluated users: those with at least one held-out interaction."""
        return self.holdout.user_ids

    @property
    def n_excluded_users(self) -> int:
        """Users of ``y_true`` without held-out interactions."""
        return self.holdout.n_excluded_users

    @property
    def n_interactions(self) -> int:
        """N, the number of held-out interactions."""
        return int(self.counts.sum())

    @property
    def value(self) -> float:
        """``Σ_s P(s) · M_s`` over the non-empty strata (Jadidinejad et al. Eq. 4)."""
        return float(sum(s.share * s.value for s in self.strata if s.result is not None))

    def _scattered(self, attribute: str) -> np.ndarray:
        """``Σ_s P(s)/π_s · 1[u ∈ U_s] · x_su`` for a per-user attribute of the strata."""
        total = np.zeros(self.n_users)
        for stratum in self.strata:
            if stratum.result is None:
                continue
            where = np.searchsorted(self.user_ids, stratum.result.user_ids)
            coverage = stratum.result.n_users / self.n_users
            total[where] += stratum.share / coverage * getattr(stratum.result, attribute)
        return total

    @property
    def per_user(self) -> np.ndarray:
        """Per-user contributions whose mean over :attr:`user_ids` is :attr:`value`."""
        return self._scattered("per_user")

    @property
    def influence(self) -> np.ndarray:
        """Per-user influence values of the delta method (module docstring)."""
        n_u = self.counts.sum(axis=1)
        shares = self.shares
        values = np.nan_to_num(np.array([s.value for s in self.strata]))
        share_terms = (self.counts - np.outer(n_u, shares)) / n_u.mean()
        return self._scattered("influence") + share_terms @ values


def stratified(
    metric: Callable[..., EstimateResult],
    y_true,
    y_score,
    *,
    stratify_by,
    n_strata: int = 2,
    binning: str = "width",
    bins: StrataBins | None = None,
    **metric_kwargs,
) -> StratifiedResult:
    """Propensity-stratified evaluation of any base metric (Jadidinejad et al. §5, Eq. 4).

    Parameters
    ----------
    metric : callable
        A metric of the core returning an :class:`EstimateResult`: ``ndcg``, ``dcg``,
        ``ips_dcg``, ``pn_dcg``, ``recall``, …; called as
        ``metric(y_true_s, y_score, **metric_kwargs)`` on every stratum.
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0``.
    y_score : array_like, scipy.sparse matrix or TopK
        Scores or rankings, as for :func:`recpack_ope.metrics.dcg`. A
        :class:`~recpack_ope.metrics.TopK` ranks the users once instead of once per stratum.
    stratify_by : fitted propensity model, 1-D array or sparse matrix
        Exposure propensities the strata are built from: per item, or per (user, item) as a
        users×items matrix storing every held-out entry. Only their order and spacing
        matter, so any positive scale gives the same strata, also for values on a bin edge
        (:func:`stratum_index`).
    n_strata : int
        Number of strata S (the paper uses 2), at most the number of held-out interactions.
    binning : {"width", "mass"}
        Equal-width bins in propensity value or equal-mass quantiles, see
        :func:`stratum_index`.
    bins : StrataBins, optional
        Strata fitted beforehand (on a larger set of interactions, of which ``y_true`` is a
        part), with this ``n_strata`` and ``binning``; default: fitted on ``y_true``'s.
    **metric_kwargs
        Passed to ``metric``, e.g. ``discount=LogDiscount(10)`` or ``k=20``.

    Returns
    -------
    StratifiedResult
        The combined value, the holdout value, per-stratum results, per-user values and
        influence for intervals and paired comparisons.
    """
    if not callable(metric):
        raise TypeError(
            f"metric must be a metric function such as ndcg or recall, got {type(metric).__name__}"
        )
    n_strata = check_positive_int(n_strata, "n_strata")
    rewards = as_csr(y_true, "y_true")
    check_rewards(rewards)
    rewards.eliminate_zeros()
    if rewards.nnz == 0:
        raise ValueError(
            "y_true has no non-zero held-out rewards: nothing to stratify (Eq. 4 builds the "
            "strata from the held-out interactions and weighs each by its share of them, 0/0 "
            "without any)"
        )
    values = entry_propensities(stratify_by, rewards, name="stratify_by")
    if bins is None:
        if n_strata > rewards.nnz:
            raise ValueError(
                f"n_strata={n_strata} exceeds the {rewards.nnz} held-out interactions: at least "
                f"{n_strata - rewards.nnz} strata would be empty, and every stratum costs a record "
                f"and a metric evaluation; use at most {rewards.nnz} strata"
            )
        bins = StrataBins.fit(values, n_strata, binning)
    elif not isinstance(bins, StrataBins) or (bins.n_strata, bins.binning) != (n_strata, binning):
        raise ValueError(
            f"bins must be StrataBins with n_strata={n_strata} and binning={binning!r}, got "
            f"{bins if not isinstance(bins, StrataBins) else (bins.n_strata, bins.binning)!r}"
        )
    index, edges = bins.index(values), bins.edges
    # One warning for the whole stratified estimate instead of one per stratum (below).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        result = _stratified(metric, rewards, y_score, index, edges, binning, metric_kwargs)
    if result.diagnostics is not None and (
        not result.diagnostics.reliable or result.unreliable_strata
    ):
        parts = [("the holdout", result.diagnostics)] + [
            (s.label, s.result.diagnostics)
            for s in result.strata
            if s.label in result.unreliable_strata
        ]
        found = "; ".join(f"{where}: {d.explain()}" for where, d in parts if not d.reliable)
        warnings.warn(
            f"{result.name}: unreliable IPS weights in {found}. "
            "Clip the weights (clip=...) or check the propensities.",
            ReliabilityWarning,
            stacklevel=2,
        )
    return result


def _stratified(metric, rewards, y_score, index, edges, binning, metric_kwargs) -> StratifiedResult:
    """:func:`stratified` on validated inputs and strata, without reliability warnings.

    The holdout and every stratum are evaluated inside :func:`shared_ranking`: the core's
    metrics validate and rank ``y_score`` once, for the holdout, and each stratum looks its
    entries' ranks up instead of ranking again.
    """
    n_users, n_strata = rewards.shape[0], edges.size - 1
    rows = np.repeat(np.arange(n_users), np.diff(rewards.indptr))
    counts = np.bincount(rows * n_strata + index, minlength=n_users * n_strata).reshape(
        n_users, n_strata
    )
    # Each stratum's entries, in CSR order: only non-empty strata cost a pass, so the work is
    # proportional to the data, not to the number of strata.
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(n_strata + 1))
    strata = []
    with shared_ranking(y_score):
        holdout = metric(rewards, y_score, **metric_kwargs)
        if not isinstance(holdout, EstimateResult):
            raise TypeError(
                f"metric must return an EstimateResult, {getattr(metric, '__name__', metric)!r} "
                f"returned {type(holdout).__name__}"
            )
        for s in range(n_strata):
            entries = order[bounds[s] : bounds[s + 1]]
            result = None
            if entries.size:
                indptr = np.concatenate([[0], np.cumsum(counts[:, s])])
                part = sp.csr_matrix(
                    (rewards.data[entries], rewards.indices[entries], indptr), shape=rewards.shape
                )
                result = metric(part, y_score, **metric_kwargs)
            strata.append(
                Stratum(
                    label=f"Q{s + 1}",
                    lower=float(edges[s]),
                    upper=float(edges[s + 1]),
                    n_interactions=int(entries.size),
                    n_items=_distinct(rewards.indices[entries], rewards.shape[1]),
                    share=entries.size / rewards.nnz,
                    result=result,
                )
            )
    return StratifiedResult(
        name=f"Stratified {holdout.name}",
        holdout=holdout,
        strata=tuple(strata),
        counts=counts[holdout.user_ids],
        binning=binning,
        n_items=_distinct(rewards.indices, rewards.shape[1]),
    )


def _distinct(items: np.ndarray, n_items: int) -> int:
    """Number of distinct values among item indices ``0 … n_items−1``: counted per item when
    the catalogue is not much larger than ``items`` (faster than sorting), else sorted."""
    if n_items <= 8 * items.size:
        return int(np.count_nonzero(np.bincount(items, minlength=n_items)))
    return int(np.unique(items).size)


@dataclass(frozen=True, eq=False, repr=False)
class StratifiedSummary(_StrataReport, PairedEstimate):
    """A stratified estimate known through the moments of its users' terms (e.g. computed on
    Spark): the numbers of :class:`StratifiedResult` without the per-user values.

    Every user contributes the terms :meth:`user_terms` lists; the estimate
    ``Σ_s P(s) · M_s`` with ``P(s) = mean(n_su) / mean(n_u)`` and ``M_s`` the base metric over
    the users with interactions in s is a smooth function of their means, and its gradient
    gives the influence of the module docstring.

    Attributes
    ----------
    summary : SummaryEstimate
        Value, standard error and paired comparisons of the combined estimate.
    holdout : SummaryEstimate
        The base metric on all held-out interactions.
    strata : tuple of Stratum
        Per-stratum sizes, shares, ranges and results (summaries over the stratum's users).
    binning : str
        ``"width"`` or ``"mass"``.
    n_items : int
        Distinct items among all held-out interactions.
    """

    summary: SummaryEstimate
    holdout: SummaryEstimate
    strata: tuple[Stratum, ...]
    binning: str
    n_items: int

    @staticmethod
    def user_terms(result: StratifiedResult) -> tuple[np.ndarray, np.ndarray]:
        """The terms of every evaluated user of ``result``: the shared ones
        ``[n_u, (1[u ∈ U_s], n_su) for each s]`` and the model's
        ``[holdout terms, (stratum s terms, 0 outside U_s) for each s]``."""
        users, counts = result.holdout.user_ids, result.counts
        shared = [counts.sum(axis=1)]
        own = [result.holdout.terms]
        for s, stratum in enumerate(result.strata):
            shared += [counts[:, s] > 0, counts[:, s]]
            block = np.zeros_like(result.holdout.terms)
            if stratum.result is not None:
                block[np.searchsorted(users, stratum.result.user_ids)] = stratum.result.terms
            own.append(block)
        return np.column_stack(shared).astype(np.float64), np.hstack(own)

    @classmethod
    def from_moments(
        cls,
        name: str,
        moments: Moments,
        *,
        model: int,
        n_models: int,
        n_terms: int,
        exponents: tuple[int, ...],
        bins: StrataBins,
        n_items_per_stratum: np.ndarray,
        n_items: int,
        n_excluded_users: int = 0,
        diagnostics: dict | None = None,
    ) -> StratifiedSummary:
        """The estimate of model ``model`` from the joint moments of the shared terms and
        every model's terms (:meth:`user_terms`, models in order)."""
        n_strata, k = bins.n_strata, n_terms
        offset = 1 + 2 * n_strata + model * k * (1 + n_strata)
        diagnostics = diagnostics or {}
        base = name.removeprefix("Stratified ")
        holdout = SummaryEstimate.product(
            base,
            moments,
            range(offset, offset + k),
            exponents,
            n_excluded_users=n_excluded_users,
            diagnostics=diagnostics.get("holdout"),
        )
        mean_n = moments.mean[0]
        total = round(mean_n * moments.n)
        value, gradient, strata = 0.0, np.zeros(moments.dim), []
        for s in range(n_strata):
            indicator, count = 1 + 2 * s, 2 + 2 * s
            n_s = round(moments.mean[count] * moments.n)
            share = n_s / total
            result = None
            if n_s:
                columns = np.arange(offset + k * (1 + s), offset + k * (2 + s))
                # As in memory, a stratum's estimate leaves out every user without interactions
                # in it.
                outside = moments.n - moments.within(columns[:0], indicator)[0]
                result = SummaryEstimate.product(
                    base,
                    moments,
                    columns,
                    exponents,
                    indicator=indicator,
                    n_excluded_users=n_excluded_users + outside,
                    diagnostics=diagnostics.get(s),
                )
                within = moments.within(columns, indicator)[1]
                coverage = moments.mean[indicator]
                value += share * result.value
                # The module docstring's
                # z_u = P(s)/π_s · 1_s · g_sᵀ(x − m_s) + M_s (n_su − P(s) n_u) / n̄
                gradient[columns] += share / coverage * result.gradient[columns]
                gradient[indicator] -= share / coverage * (result.gradient[columns] @ within)
                gradient[count] += result.value / mean_n
                gradient[0] -= share * result.value / mean_n
            strata.append(
                Stratum(
                    label=f"Q{s + 1}",
                    lower=float(bins.edges[s]),
                    upper=float(bins.edges[s + 1]),
                    n_interactions=int(n_s),
                    n_items=int(n_items_per_stratum[s]),
                    share=share,
                    result=result,
                )
            )
        summary = SummaryEstimate(name, value, gradient, moments, n_excluded_users=n_excluded_users)
        return cls(summary, holdout, tuple(strata), bins.binning, int(n_items))

    @property
    def name(self) -> str:
        return self.summary.name

    @property
    def value(self) -> float:
        """``Σ_s P(s) · M_s`` over the non-empty strata (Jadidinejad et al. Eq. 4)."""
        return self.summary.value

    @property
    def n_users(self) -> int:
        return self.summary.n_users

    @property
    def n_excluded_users(self) -> int:
        return self.summary.n_excluded_users

    @property
    def n_interactions(self) -> int:
        """N, the number of held-out interactions."""
        return int(sum(s.n_interactions for s in self.strata))

    @property
    def influence(self) -> np.ndarray:
        return self.summary.influence

    @property
    def standard_error(self) -> float:
        return self.summary.standard_error

    def compare(
        self,
        other,
        level: float = 0.95,
        *,
        control_variate: bool = False,
        names: tuple[str, str] | None = None,
    ):
        """Paired comparison with another stratified summary of the same pass."""
        other = other.summary if isinstance(other, StratifiedSummary) else other
        return self.summary.compare(other, level, control_variate=control_variate, names=names)
