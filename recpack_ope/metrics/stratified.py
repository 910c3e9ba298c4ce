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
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .._validation import as_csr, check_positive_int, check_rewards, real_array
from ..inference.diagnostics import ReliabilityWarning, WeightDiagnostics
from ..inference.result import EstimateResult, PairedEstimate
from ..propensity.weights import entry_propensities

__all__ = ["BINNINGS", "Stratum", "StratifiedResult", "stratum_index", "stratified"]

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
    n_strata = check_positive_int(n_strata, "n_strata")
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    values = real_array(propensities, "propensities").astype(np.float64, copy=False)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"need a non-empty 1-D array of propensities, got shape {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"propensities must be finite, got {values[bad[0]]} at position {bad[0]}")
    if n_strata > values.size:
        raise ValueError(
            f"n_strata={n_strata} exceeds the {values.size} values to stratify: at least "
            f"{n_strata - values.size} strata would be empty, and every stratum costs a record "
            f"and a metric evaluation; use at most {values.size} strata"
        )
    levels = np.linspace(0.0, 1.0, n_strata + 1)
    if binning == "width":
        edges = values.min() + levels * (values.max() - values.min())
        edges[-1] = values.max()
        return _width_index(values, n_strata), edges
    ordered = np.sort(values)
    thresholds = ordered[(values.size - 1) * np.arange(1, n_strata, dtype=np.int64) // n_strata]
    return np.searchsorted(thresholds, values, side="left"), np.quantile(values, levels)


# Relative tolerance of the on-edge test of equal-width binning (stratum_index, Notes).
_EDGE_TOLERANCE = 2.0**-40


def _width_index(values: np.ndarray, n_strata: int) -> np.ndarray:
    """Equal-width stratum of every value, right-closed, with values on an edge placed below
    it whatever the scale of the values (:func:`stratum_index`, Notes). O(N)."""
    lo, hi = values.min(), values.max()
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


@dataclass(frozen=True, eq=False)
class StratifiedResult(PairedEstimate):
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
    def diagnostics(self) -> WeightDiagnostics | None:
        """Weight diagnostics of an IPS-weighted base metric over all held-out interactions
        (the holdout's); each stratum's own are on ``strata[s].result.diagnostics``."""
        return self.holdout.diagnostics

    @property
    def unreliable_strata(self) -> list[str]:
        """Labels of the strata whose weighted estimate is flagged unreliable."""
        return [
            s.label for s in self.strata
            if s.result is not None and s.result.diagnostics is not None
            and not s.result.diagnostics.reliable
        ]

    @property
    def n_interactions(self) -> int:
        """N, the number of held-out interactions."""
        return int(self.counts.sum())

    @property
    def shares(self) -> np.ndarray:
        """``P(s)`` of every stratum."""
        return np.array([s.share for s in self.strata])

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

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{s.label} {s.value:.4g} ({s.share:.1%})" for s in self.strata
        )
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


def stratified(
    metric: Callable[..., EstimateResult],
    y_true,
    y_score,
    *,
    stratify_by,
    n_strata: int = 2,
    binning: str = "width",
    **metric_kwargs,
) -> StratifiedResult:
    """Propensity-stratified evaluation of any base metric (Jadidinejad et al. §5, Eq. 4).

    Parameters
    ----------
    metric : callable
        A metric of the core returning an :class:`EstimateResult`: ``ndcg``, ``dcg``,
        ``unbiased_dcg``, ``pn_dcg``, ``recall``, …; called as
        ``metric(y_true_s, y_score, **metric_kwargs)`` on every stratum.
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0``.
    y_score : array_like, scipy.sparse matrix or TopK
        Scores or rankings, as for :func:`recpack_ope.metrics.dcg`. A :class:`~recpack_ope.TopK`
        ranks the users once instead of once per stratum.
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
        raise ValueError("y_true has no non-zero held-out rewards: nothing to stratify")
    if n_strata > rewards.nnz:
        raise ValueError(
            f"n_strata={n_strata} exceeds the {rewards.nnz} held-out interactions: at least "
            f"{n_strata - rewards.nnz} strata would be empty, and every stratum costs a record "
            f"and a metric evaluation; use at most {rewards.nnz} strata"
        )
    index, edges = stratum_index(entry_propensities(stratify_by, rewards, name="stratify_by"), n_strata, binning)
    # One warning for the whole stratified estimate instead of one per stratum (below).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        result = _stratified(metric, rewards, y_score, index, edges, binning, metric_kwargs)
    if result.diagnostics is not None and (not result.diagnostics.reliable or result.unreliable_strata):
        where = ", ".join(result.unreliable_strata) or "the holdout"
        warnings.warn(
            f"{result.name}: the IPS weights of {where} have an effective sample size below "
            f"{result.diagnostics.threshold:g} of their interactions ({result.diagnostics.summary()}). "
            "Clip the weights (clip=...) or check the propensities.",
            ReliabilityWarning,
            stacklevel=2,
        )
    return result


def _stratified(metric, rewards, y_score, index, edges, binning, metric_kwargs) -> StratifiedResult:
    """:func:`stratified` on validated inputs and strata, without reliability warnings."""
    holdout = metric(rewards, y_score, **metric_kwargs)
    if not isinstance(holdout, EstimateResult):
        raise TypeError(
            f"metric must return an EstimateResult, {getattr(metric, '__name__', metric)!r} "
            f"returned {type(holdout).__name__}"
        )
    rows = np.repeat(np.arange(rewards.shape[0]), np.diff(rewards.indptr))
    n_strata = edges.size - 1
    counts = np.zeros((rewards.shape[0], n_strata), dtype=np.int64)
    np.add.at(counts, (rows, index), 1)
    # Each stratum's entries, in CSR order: only non-empty strata cost a pass, so the work is
    # proportional to the data, not to the number of strata.
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(n_strata + 1))
    strata = []
    for s in range(n_strata):
        entries = order[bounds[s] : bounds[s + 1]]
        result = None
        if entries.size:
            indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[entries], minlength=rewards.shape[0]))])
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
                n_items=int(np.unique(rewards.indices[entries]).size),
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
        n_items=int(np.unique(rewards.indices).size),
    )
