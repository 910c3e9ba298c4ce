"""Whether a weighted estimate can be trusted: diagnostics of its importance weights.

An IPS estimate is a weighted sum; when a few interactions carry most of the weight, its
standard error is itself unreliable and the value is driven by those few. The evaluated
interactions are those that contribute to the estimate: held-out (or rewarded logged)
interactions that the target exposes, ``δ(rank) > 0``. Weights of interactions the target
does not show cannot move its estimate, so they do not enter. The evaluated users are the
users (sessions, for logged data) of the evaluated interactions. The diagnostics of
docs/definitions.md ("Weight diagnostics"), over the n evaluated interactions with weights
``w_j`` (after clipping), raw inverse propensities ``v_j = 1/p_j`` (before clipping) and
contributions ``x_j ≥ 0`` to the estimate (e.g. ``c · w · δ(rank)``):

* Kish effective sample size ``ESS = (Σ_j w_j)² / Σ_j w_j²`` and its ratio ``ESS / n``;
* the largest weight ``max_j w_j``;
* the share of the estimate carried by the ``T = ⌈n / 100⌉`` largest weights,
  ``Σ_{j ∈ top} x_j / Σ_j x_j``; when the T-th largest weight is tied, the tied interactions
  enter pro rata (each with the share of T they fill), so the value depends on the weights and
  contributions only, not on the order of the interactions, and merges exactly across
  partitions of the data;
* how many weights the clipping changed, ``#{j : v_j > m}``, and the clipped mass
  ``Σ_j (v_j − w_j) / Σ_j v_j``, the share of the raw weight that clipping removed;
* the user share ``k / n_U``: with ``X_u = Σ_{j of u} x_j`` the contribution of each of the
  ``n_U`` evaluated users, k is the smallest number of users whose ``X_u`` sum to at least
  :data:`USER_MASS` of ``Σ_u X_u`` (the largest first);
* with impressions, the calibration of the propensities, :class:`PropensityCalibration`.

A :class:`ReliabilityWarning` is issued when any criterion fires
(:attr:`WeightDiagnostics.reasons`): ``ESS / n`` below a threshold (:data:`ESS_RATIO_THRESHOLD`
unless the estimator is given another), ``ESS`` below :data:`ESS_MIN`, the user share below
:data:`USER_SHARE_THRESHOLD`, or a calibration interval that excludes 1. Inside
:func:`naming` (a caller that evaluates several models: the file CLI, Spark, the adapters)
the warning names the model before the estimate, e.g. ``EASE: IPS-DCG@10: unreliable, …``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_fraction, real_array, shown
from . import _student

__all__ = [
    "CALIBRATION_BINS",
    "CALIBRATION_LEVEL",
    "CRITERIA",
    "ESS_MIN",
    "ESS_RATIO_THRESHOLD",
    "USER_MASS",
    "USER_SHARE_THRESHOLD",
    "PropensityCalibration",
    "ReliabilityWarning",
    "WeightDiagnostics",
    "WeightGroups",
    "check_ess_threshold",
    "named",
    "naming",
]

ESS_RATIO_THRESHOLD = 0.1

#: Smallest Kish effective sample size an estimate may rest on. An IPS estimate with ESS = n_e
#: varies like a mean of n_e equally weighted terms, and those terms are heavy-tailed (a click
#: times a weight). Below 50 terms the normal-theory interval of such a mean is too short: the
#: 95 % Student-t interval of a mean of n exponential terms (skewness 2, a lighter tail than
#: IPS terms have) covers 93.6 % at n = 50, 92.6 % at 30 and 90 % at 10 (Monte Carlo, 40,000
#: samples each), and heavier tails fall further short (a lognormal with σ = 1: 90 % at 50).
ESS_MIN = 50

#: The share of the estimate whose carriers the user share counts: half.
USER_MASS = 0.5

#: User share below which an estimate is flagged: fewer than 10 % of the evaluated users carry
#: half of it. Equal contributions give 0.5 and exponentially spread ones 0.187; 0.1 is what a
#: lognormal spread with σ = 1.28 gives (the share of users above the median-mass point is
#: ``1 − Φ(σ)``), whose skewness, 14.6, asks by Cochran's rule (n > 25·G1²; Sampling
#: Techniques, 1977, §2.15) for more than 5,000 users before a normal interval on their mean
#: holds.
USER_SHARE_THRESHOLD = 0.1

#: Family-wise confidence level of the calibration check: each of its ``1 + B`` intervals (all
#: items, then each of the B propensity bins) is at level ``1 − (1 − 0.95) / (1 + B)``
#: (Bonferroni), so with correct propensities all cover 1 with probability ≥ 0.95.
CALIBRATION_LEVEL = 0.95

#: Propensity bins of the calibration check: quartiles of the per-item propensities, so a
#: wrong shape (rare items over- and popular items under-weighted) shows even where the
#: overall mean is right.
CALIBRATION_BINS = 4

#: The criteria of :attr:`WeightDiagnostics.reasons`, in the order they are checked.
CRITERIA = ("ess_ratio", "ess", "user_share", "calibration")

# Rounding allowance when a cumulative sum of user contributions is compared with a share of
# their total: sums of the same numbers in another order differ by far less.
_ROUNDING = 2.0**-40


class ReliabilityWarning(UserWarning):
    """An estimate rests on too few effective interactions, or on miscalibrated propensities,
    to be trusted.

    Filter it like any warning, e.g.
    ``warnings.filterwarnings("ignore", category=ReliabilityWarning)``.
    """


# What the estimates computed in the current context belong to (e.g. a model), for warnings;
# a context variable, so threads and nested callers each see their own.
_SUBJECT: contextvars.ContextVar[str | None] = contextvars.ContextVar("subject", default=None)


@contextlib.contextmanager
def naming(subject: str) -> Iterator[None]:
    """Name ``subject`` (e.g. the model evaluated) in every reliability warning issued
    inside, before the estimate's own name (:func:`named`); nested, the names join.

    Examples
    --------
    >>> with naming("EASE"):
    ...     named("IPS-DCG@10")
    'EASE: IPS-DCG@10'
    >>> named("IPS-DCG@10")
    'IPS-DCG@10'
    """
    if not isinstance(subject, str):
        raise TypeError(f"subject must be a string, got {type(subject).__name__}")
    token = _SUBJECT.set(named(subject))
    try:
        yield
    finally:
        _SUBJECT.reset(token)


def named(name: str) -> str:
    """``name`` of an estimate as warnings spell it: after the subject of the enclosing
    :func:`naming`, if any."""
    subject = _SUBJECT.get()
    return name if subject is None else f"{subject}: {name}"


def share(part: float, total: float, empty: float = math.nan) -> float:
    """``part / total``; ``empty`` (NaN unless given) when ``total`` is 0, e.g. when the
    estimate's contributions sum to 0."""
    return part / total if total else empty


def _clipped_mass(raw: np.ndarray, kept: np.ndarray, clipped: np.ndarray) -> float:
    """``Σ (v − w) / Σ v`` over groups of raw mass ``raw`` and kept mass ``kept``: exactly 0
    without raw mass (every weight 0), and 1, its limit, when an infinite raw weight (1/p
    overflowing) was clipped to a finite one."""
    total = float(raw.sum())
    if math.isinf(total):
        return 1.0
    # Only clipped groups lose mass: summing the others would leave rounding, not 0.
    return share(float(np.where(clipped > 0, raw - kept, 0.0).sum()), total, empty=0.0)


def _kish(weight: np.ndarray, count: np.ndarray) -> float:
    """Kish ``(Σ_j w_j)² / Σ_j w_j²`` of ``count`` interactions per distinct weight, on the
    weights divided by the largest so that weights near the float limit do not overflow the
    squares; 0 when every weight is 0 (no interaction carries weight)."""
    top = float(weight.max(initial=0.0))
    if top == 0:
        return 0.0
    scaled = weight / top
    return float((count @ scaled) ** 2 / (count @ scaled**2))


def check_ess_threshold(threshold: float) -> float:
    """The ESS-ratio threshold as a float in (0, 1]; the message names the argument."""
    try:
        return check_fraction(threshold, "ess_threshold", include_one=True)
    except ValueError:
        raise ValueError(f"ess_threshold must be a number in (0, 1], got {threshold!r}") from None


def _t_interval(values: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean of ``values`` (one per user) and its two-sided Student-t interval, as every
    interval over users of the package."""
    mean = float(values.mean())
    half = _student.mean_half_width(values, "a calibration interval", level)
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class PropensityCalibration:
    """Do the propensities match the impressions? The mean of ``e_ui / p̂_ui`` against 1.

    Under the logging policy the impression of a served user u and item i has expectation
    ``E[e_ui] = p_ui`` (docs/definitions.md, "Impressions and control variates"), for every
    item, shown or not (``e_ui = 0`` where it was not shown). So over the served users and all
    ``|I|`` items of the catalogue,

        R_u = (1/|I|) Σ_{i ∈ I} e_ui / p̂_ui,    E[R_u] = (1/|I|) Σ_i p_ui / p̂_ui,

    which is exactly 1 when ``p̂ = p`` (with full support, ``p_ui > 0`` for every item,
    Asm. 5). Only shown items enter the sum, but the denominator counts every item: items
    not shown still have ``E[e_ui] = p_ui`` and belong to the average. The same holds within
    each bin ``I_b`` of items by propensity (quantiles of the per-item ``p̂_i``), with
    ``R_ub = (1/|I_b|) Σ_{i ∈ I_b} e_ui / p̂_ui``: a wrong scale moves every bin, a wrong
    shape (e.g. a wrong power-law exponent) moves the low and high bins apart. Each mean over
    users gets a Student-t interval (``n − 1`` degrees of freedom) at the Bonferroni level
    :attr:`interval_level`; the check flags when any interval excludes 1.

    Attributes
    ----------
    ratio : float
        ``mean_u R_u``, 1 for calibrated propensities; below 1 when they are too large.
    interval : tuple of float
        Its interval at :attr:`interval_level`.
    n_users : int
        Served users averaged over.
    n_items : int
        Items per user, ``|I|``.
    level : float
        Family-wise confidence level of all intervals together.
    bin_bounds : tuple of (float, float)
        Smallest and largest propensity of each bin's items; empty when the propensities are
        per (user, item) and so cannot place the unshown items in bins.
    bin_items : tuple of int
        ``|I_b|`` of each bin.
    bin_ratios : tuple of float
        ``mean_u R_ub`` of each bin.
    bin_intervals : tuple of (float, float)
        Their intervals.
    """

    ratio: float
    interval: tuple[float, float]
    n_users: int
    n_items: int
    level: float = CALIBRATION_LEVEL
    bin_bounds: tuple[tuple[float, float], ...] = ()
    bin_items: tuple[int, ...] = ()
    bin_ratios: tuple[float, ...] = ()
    bin_intervals: tuple[tuple[float, float], ...] = ()

    @classmethod
    def from_sums(
        cls,
        sums: np.ndarray,
        items: np.ndarray,
        bounds: np.ndarray | None = None,
        level: float = CALIBRATION_LEVEL,
    ) -> PropensityCalibration:
        """The check from every served user's sums of ``e_ui / p̂_ui`` per propensity bin.

        Parameters
        ----------
        sums : numpy.ndarray, shape (n_users, B)
            ``Σ_{i ∈ I_b} e_ui / p̂_ui`` of every served user (row) and bin (column); one
            column when there are no bins.
        items : numpy.ndarray of int, shape (B,)
            ``|I_b|``, the items of each bin. Empty bins (possible when propensities are tied)
            are left out.
        bounds : numpy.ndarray, shape (B, 2), optional
            Smallest and largest propensity of each bin's items; None for a single column
            without bins.
        level : float
            Family-wise confidence level, in (0, 1).

        Returns
        -------
        PropensityCalibration

        Examples
        --------
        >>> import numpy as np
        >>> sums = np.array([[2.0, 1.0], [1.0, 2.0], [3.0, 3.0]])
        >>> bounds = np.array([[0.1, 0.2], [0.3, 0.5]])
        >>> check = PropensityCalibration.from_sums(sums, np.array([2, 2]), bounds)
        >>> check.ratio, check.bin_ratios
        (1.0, (1.0, 1.0))
        >>> check.flagged
        False
        """
        sums = real_array(sums, "sums").astype(np.float64, copy=False)
        items = np.asarray(items)
        if sums.ndim != 2 or items.shape != (sums.shape[1],) or items.dtype.kind not in "iu":
            raise ValueError(
                f"sums must be users × bins and items one integer count per bin, got shapes "
                f"{sums.shape} and {items.shape}"
            )
        if bounds is not None and np.shape(bounds) != (items.size, 2):
            raise ValueError(
                f"bounds must hold (smallest, largest) of {items.size} bins, got shape "
                f"{np.shape(bounds)}"
            )
        level = check_fraction(level, "level")
        kept = np.flatnonzero(items > 0)
        binned = bounds is not None
        individual = 1 - (1 - level) / (1 + kept.size) if binned else level
        ratio, low, high = _t_interval(sums[:, kept].sum(axis=1) / items[kept].sum(), individual)
        per_bin = [_t_interval(sums[:, b] / items[b], individual) for b in kept] if binned else []
        return cls(
            ratio=ratio,
            interval=(low, high),
            n_users=int(sums.shape[0]),
            n_items=int(items.sum()),
            level=level,
            bin_bounds=tuple((float(bounds[b, 0]), float(bounds[b, 1])) for b in kept)
            if binned
            else (),
            bin_items=tuple(int(items[b]) for b in kept) if binned else (),
            bin_ratios=tuple(m for m, _, _ in per_bin),
            bin_intervals=tuple((lo, hi) for _, lo, hi in per_bin),
        )

    @property
    def interval_level(self) -> float:
        """Confidence level of each interval: ``1 − (1 − level) / (1 + B)``."""
        return 1 - (1 - self.level) / (1 + len(self.bin_ratios))

    @property
    def flagged(self) -> bool:
        """Whether any interval (all items or a bin) excludes 1."""
        return any(not lo <= 1.0 <= hi for lo, hi in (self.interval, *self.bin_intervals))

    def summary(self) -> str:
        """One line: the overall ratio and each bin's, with their intervals.

        Examples
        --------
        >>> check = PropensityCalibration(0.5, (0.45, 0.55), 100, 20)
        >>> check.summary()
        'mean e/p̂ 0.5 [0.45, 0.55] over 100 users × 20 items (95% level): does not match 1'
        """
        text = (
            f"mean e/p̂ {self.ratio:.3g} [{self.interval[0]:.3g}, {self.interval[1]:.3g}] "
            f"over {self.n_users} users × {self.n_items} items"
        )
        if self.bin_ratios:
            bins = ", ".join(
                f"{r:.3g} [{lo:.3g}, {hi:.3g}]"
                for r, (lo, hi) in zip(self.bin_ratios, self.bin_intervals, strict=True)
            )
            text += f"; by propensity bin, lowest first: {bins}"
        text += f" ({self.level:.0%} level)"
        return text + (": does not match 1" if self.flagged else "")


_WEIGHT_FIELDS = ("weight", "count", "contribution", "raw", "clipped")
_USER_FIELDS = ("user_total", "user_count")


@dataclass(frozen=True, eq=False)
class WeightGroups:
    """The evaluated interactions grouped by weight, and the evaluated users grouped by their
    contribution: everything the diagnostics need, in a form that merges across partitions of
    the data whose users are disjoint (concatenate, then :meth:`merged`), as the Spark
    engine's partitions are.

    Attributes
    ----------
    weight : numpy.ndarray
        Distinct weights after clipping, in decreasing order.
    count : numpy.ndarray
        Interactions with that weight.
    contribution : numpy.ndarray
        Sum of their contributions ``x_j``.
    raw : numpy.ndarray
        Sum of their raw inverse propensities ``1/p_j``.
    clipped : numpy.ndarray
        How many of them clipping lowered.
    user_total : numpy.ndarray
        Distinct per-user contributions ``X_u = Σ_{j of u} x_j``, in decreasing order.
    user_count : numpy.ndarray
        Evaluated users with that contribution.
    """

    weight: np.ndarray
    count: np.ndarray
    contribution: np.ndarray
    raw: np.ndarray
    clipped: np.ndarray
    user_total: np.ndarray
    user_count: np.ndarray

    def __post_init__(self) -> None:
        for fields in (_WEIGHT_FIELDS, _USER_FIELDS):
            shapes = {np.shape(getattr(self, f)) for f in fields}
            if len(shapes) != 1 or len(next(iter(shapes))) != 1:
                raise ValueError(
                    f"WeightGroups {', '.join(fields)} must be 1-D arrays of one length, got "
                    f"shapes {[np.shape(getattr(self, f)) for f in fields]}"
                )
        for f in _WEIGHT_FIELDS + _USER_FIELDS:
            _check_nonnegative(getattr(self, f), f"WeightGroups {f}", infinite=f == "raw")

    @classmethod
    def from_interactions(
        cls, raw: np.ndarray, weights: np.ndarray, contributions: np.ndarray, users: np.ndarray
    ) -> WeightGroups:
        """Group aligned per-interaction arrays by weight, and the interactions' users (any
        labels) by their total contribution.

        Raises
        ------
        ValueError
            Unless ``raw``, ``weights`` and ``contributions`` are 1-D, of one length, finite
            and >= 0, with every weight at most its raw inverse propensity (clipping only
            lowers weights); the message names the argument, position and value.
        """
        arrays = {"raw": raw, "weights": weights, "contributions": contributions}
        for name, values in arrays.items():
            values = real_array(values, name).astype(np.float64, copy=False)
            if values.ndim != 1 or values.shape != np.shape(raw):
                raise ValueError(
                    f"raw, weights and contributions must be 1-D with one value per evaluated "
                    f"interaction, got shapes {[np.shape(v) for v in arrays.values()]}"
                )
            _check_nonnegative(values, name, infinite=name == "raw")
            arrays[name] = values
        raw, weights, contributions = arrays.values()
        above = np.flatnonzero(weights > raw)
        if above.size:
            k = above[0]
            raise ValueError(
                f"weights[{k}] is {shown(weights[k])}, above its raw inverse propensity raw[{k}] = "
                f"{shown(raw[k])}: a kept weight is min(m, 1/p), never more than 1/p"
            )
        users = np.asarray(users)
        if users.shape != np.shape(contributions):
            raise ValueError(
                f"users must name the user of every evaluated interaction: got {users.shape} "
                f"users for {np.shape(contributions)} contributions"
            )
        _, user = np.unique(users, return_inverse=True)
        totals = np.bincount(user.ravel(), weights=contributions)
        return cls(
            weights,
            np.ones(weights.size, dtype=np.int64),
            contributions,
            raw,
            (raw > weights).astype(np.int64),
            totals,
            np.ones(totals.size, dtype=np.int64),
        ).merged()

    @classmethod
    def concatenate(cls, groups) -> WeightGroups:
        """All groups of several tables in one (merge them with :meth:`merged`); the tables
        must hold disjoint users."""
        groups = list(groups)
        return cls(
            *(
                np.concatenate([getattr(g, f) for g in groups])
                for f in _WEIGHT_FIELDS + _USER_FIELDS
            )
        ).merged()

    def merged(self) -> WeightGroups:
        """Equal weights summed into one group, in decreasing order of weight, and users with
        equal contributions counted in one group, in decreasing order of contribution."""
        weight = _grouped(self.weight, [getattr(self, f) for f in _WEIGHT_FIELDS[1:]])
        users = _grouped(self.user_total, [self.user_count])
        return WeightGroups(*weight, *users)


def _check_nonnegative(values: np.ndarray, name: str, *, infinite: bool = False) -> None:
    """Refuse a NaN, negative or (unless ``infinite``) infinite entry of ``values``, naming
    ``name`` and where. Raw inverse propensities may be infinite: 1/p overflows for a
    propensity below about 5.6e-309, whose clipped weight is still finite."""
    values = np.asarray(values)
    bad = ~(values >= 0)  # NaN too
    if not infinite:
        bad |= ~np.isfinite(values)
    bad = np.flatnonzero(bad)
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"{name}[{k}] is {shown(values[k])}: weights and contributions are finite and >= 0, "
            "raw inverse propensities >= 0"
        )


def _grouped(key: np.ndarray, sums: list[np.ndarray]) -> list[np.ndarray]:
    """The distinct values of ``key`` in decreasing order, each with the sums of ``sums`` over
    its members."""
    order = np.argsort(-key, kind="stable")
    key = key[order]
    if key.size == 0:
        return [key, *sums]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return [key[starts], *(np.add.reduceat(s[order], starts) for s in sums)]


def _carriers(total: np.ndarray, count: np.ndarray, mass: float) -> int:
    """The smallest number of users whose contributions (grouped: ``count`` users of
    contribution ``total``, decreasing) sum to at least ``mass`` of all of them."""
    target = mass * float(total @ count)
    # Users of one group are interchangeable: enough of the first group that reaches the
    # target, after every larger group in full.
    reached = np.cumsum(total * count)
    g = int(np.searchsorted(reached, target * (1 - _ROUNDING)))
    before = reached[g] - total[g] * count[g]
    needed = math.ceil((target - before) / total[g] * (1 - _ROUNDING))
    return int(count[:g].sum()) + max(needed, 1)


@dataclass(frozen=True)
class WeightDiagnostics:
    """Diagnostics of the importance weights behind one estimate (module docstring).

    Attributes
    ----------
    n_weights : int
        Evaluated (weighted) interactions n.
    ess : float
        Kish effective sample size of the weights.
    max_weight : float
        Largest weight after clipping.
    top_share : float
        Share of the estimate carried by the ``⌈n/100⌉`` largest weights; NaN when the
        estimate's contributions sum to 0.
    n_clipped : int
        Weights that clipping lowered.
    clipped_mass : float
        Share of the raw inverse-propensity mass that clipping removed.
    threshold : float
        ESS ratio below which the estimate is flagged.
    n_users : int
        Evaluated users ``n_U``: those with an evaluated interaction.
    user_share : float
        ``k / n_U``, k the fewest evaluated users carrying :data:`USER_MASS` of the estimate;
        NaN when the contributions sum to 0.
    calibration : PropensityCalibration or None
        The check of the propensities against the impressions, for held-out estimates given
        ``impressions=``; None otherwise.
    """

    n_weights: int
    ess: float
    max_weight: float
    top_share: float
    n_clipped: int
    clipped_mass: float
    threshold: float = ESS_RATIO_THRESHOLD
    n_users: int = 0
    user_share: float = math.nan
    calibration: PropensityCalibration | None = None
    groups: WeightGroups | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("n_weights", "n_clipped", "n_users"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
                raise ValueError(f"WeightDiagnostics {name} must be an integer >= 0, got {count!r}")
        # ESS lies in [0, n] (Cauchy–Schwarz), up to rounding; the clipped mass is a share.
        for name, high in (("ess", self.n_weights * (1 + 1e-9)), ("max_weight", math.inf)):
            value = getattr(self, name)
            if not 0 <= value <= high:
                raise ValueError(
                    f"WeightDiagnostics {name} must be in [0, {high:g}], got {value!r}"
                )
        for name, nan in (("clipped_mass", False), ("top_share", True), ("user_share", True)):
            value = getattr(self, name)
            if not (0 <= value <= 1 or (nan and math.isnan(value))):
                raise ValueError(
                    f"WeightDiagnostics {name} is a share, in [0, 1]"
                    + (" or NaN" if nan else "")
                    + f", got {value!r}"
                )

    @property
    def ess_ratio(self) -> float:
        """``ESS / n`` in (0, 1]: 1 when all weights are equal; 0 without interactions."""
        return self.ess / self.n_weights if self.n_weights else 0.0

    @property
    def reasons(self) -> tuple[str, ...]:
        """The criteria of :data:`CRITERIA` that fired: ``"ess_ratio"`` (``ESS / n`` below
        :attr:`threshold`), ``"ess"`` (``ESS`` below :data:`ESS_MIN`), ``"user_share"``
        (below :data:`USER_SHARE_THRESHOLD`) and ``"calibration"`` (an interval of
        :attr:`calibration` excludes 1)."""
        fired = {
            "ess_ratio": self.ess_ratio < self.threshold,
            "ess": self.ess < ESS_MIN,
            "user_share": self.user_share < USER_SHARE_THRESHOLD,
            "calibration": self.calibration is not None and self.calibration.flagged,
        }
        return tuple(c for c in CRITERIA if fired[c])

    @property
    def reliable(self) -> bool:
        """Whether no criterion fired (:attr:`reasons` is empty)."""
        return not self.reasons

    @classmethod
    def from_groups(
        cls,
        groups: WeightGroups,
        threshold: float = ESS_RATIO_THRESHOLD,
        calibration: PropensityCalibration | None = None,
    ) -> WeightDiagnostics:
        """Diagnostics of the interactions in ``groups`` (module docstring); the ``T``-th
        largest weight's group enters the top share pro rata."""
        threshold = check_ess_threshold(threshold)
        n = int(groups.count.sum())
        if n == 0:
            # The estimate rests on no interaction at all: nothing supports it.
            return cls(0, 0.0, 0.0, math.nan, 0, 0.0, threshold, 0, math.nan, calibration, groups)
        top = math.ceil(n / 100)
        before = np.cumsum(groups.count) - groups.count
        filled = np.clip(top - before, 0, groups.count) / groups.count
        weighted = groups.count * groups.weight
        n_users = int(groups.user_count.sum())
        total = float(groups.user_total @ groups.user_count)
        return cls(
            n_weights=n,
            ess=_kish(groups.weight, groups.count),
            max_weight=float(groups.weight[0]),
            top_share=share(float(filled @ groups.contribution), float(groups.contribution.sum())),
            n_clipped=int(groups.clipped.sum()),
            clipped_mass=_clipped_mass(groups.raw, weighted, groups.clipped),
            threshold=threshold,
            n_users=n_users,
            user_share=_carriers(groups.user_total, groups.user_count, USER_MASS) / n_users
            if total > 0
            else math.nan,
            calibration=calibration,
            groups=groups,
        )

    @classmethod
    def from_contributions(
        cls,
        raw: np.ndarray,
        weights: np.ndarray,
        contributions: np.ndarray,
        threshold: float = ESS_RATIO_THRESHOLD,
        *,
        users: np.ndarray,
        calibration: PropensityCalibration | None = None,
    ) -> WeightDiagnostics:
        """Diagnostics of the evaluated interactions of one estimate: raw inverse
        propensities ``1/p_j``, the weights used (``min(m, 1/p_j)``), each interaction's
        contribution ``x_j ≥ 0`` to the estimate and its user (any label; sessions for logged
        data), aligned; and, with impressions, the propensities' calibration.

        Examples
        --------
        >>> import numpy as np
        >>> d = WeightDiagnostics.from_contributions(
        ...     np.array([2.0, 2.0, 8.0]), np.array([2.0, 2.0, 8.0]), np.array([1.0, 1.0, 6.0]),
        ...     users=np.array([0, 1, 2]),
        ... )
        >>> round(d.ess, 4), d.user_share, d.reasons
        (2.0, 0.3333333333333333, ('ess',))
        """
        return cls.from_groups(
            WeightGroups.from_interactions(raw, weights, contributions, users),
            threshold,
            calibration,
        )

    def explain(self, unit: str = "users") -> str:
        """What fired, one clause per criterion of :attr:`reasons` with its value and
        threshold (the user share counted in ``unit``); empty when none did.

        Examples
        --------
        >>> d = WeightDiagnostics(200, 12.0, 40.0, 0.3, 0, 0.0, n_users=150, user_share=0.2)
        >>> d.explain()
        'ESS/n 0.06 < 0.1 (effective sample size 12 of 200 interactions); ESS 12 < 50'
        """
        return "; ".join(self._clause(c, unit) for c in self.reasons)

    def _clause(self, criterion: str, unit: str) -> str:
        """One criterion of :data:`CRITERIA` with its value and threshold."""
        if criterion == "ess_ratio":
            return (
                f"ESS/n {self.ess_ratio:.3g} < {self.threshold:g} (effective sample size "
                f"{self.ess:.4g} of {self.n_weights} interactions)"
            )
        if criterion == "ess":
            return f"ESS {self.ess:.4g} < {ESS_MIN}"
        if criterion == "user_share":
            return (
                f"user share {self.user_share:.3g} < {USER_SHARE_THRESHOLD:g} "
                f"({round(self.user_share * self.n_users)} of the {self.n_users} {unit} with a "
                f"reward the ranking exposes carry {USER_MASS:.0%} of the estimate)"
            )
        return f"calibration: {self.calibration.summary()}"

    def warn(
        self, name: str, stacklevel: int = 3, *, clippable: bool = True, unit: str = "users"
    ) -> None:
        """Issue a :class:`ReliabilityWarning` for estimate ``name`` naming every criterion
        that fired (:meth:`explain`), if any did, after the subject of the enclosing
        :func:`naming`; its advice suggests clipping only for estimates that can clip their
        weights (``clippable``); ``unit`` names what the estimate averages over (``"sessions"``
        for feed logs).

        Examples
        --------
        >>> import pytest
        >>> d = WeightDiagnostics(200, 12.0, 40.0, 0.3, 0, 0.0, n_users=150, user_share=0.2)
        >>> with naming("EASE"), pytest.warns(ReliabilityWarning, match="^EASE: IPS-DCG@10: "):
        ...     d.warn("IPS-DCG@10")
        """
        name = named(name)
        if not self.n_weights:
            warnings.warn(
                f"{name}: {self.summary(unit)}", ReliabilityWarning, stacklevel=stacklevel
            )
        elif not self.reliable:
            advice = (
                "The propensities do not match the impressions: refit them."
                if self.reasons == ("calibration",)
                else "Clip the weights (clip=...) or check the propensities."
                if clippable
                else "Check the propensities, or use an estimator whose weights can be clipped."
            )
            warnings.warn(
                f"{name}: unreliable, {self.explain(unit)}; the top 1 % of weights carry "
                f"{self.top_share:.0%} of the estimate. {advice}",
                ReliabilityWarning,
                stacklevel=stacklevel,
            )

    def summary(self, unit: str = "users") -> str:
        """One line: ESS (ratio), largest weight, top-1 % share, clipping, user share (of
        ``unit``) and the calibration check."""
        if not self.n_weights:
            text = (
                "no evaluated interaction: no positive held-out reward is ranked by the "
                "target (or there is none)"
            )
        else:
            text = (
                f"ESS {self.ess:.4g} of {self.n_weights} ({self.ess_ratio:.1%}), max weight "
                f"{self.max_weight:.4g}, top 1% of weights carry {self.top_share:.0%}, "
                f"{self.n_clipped} clipped ({self.clipped_mass:.1%} of weight mass)"
            )
            if not math.isnan(self.user_share):
                text += f", {self.user_share:.1%} of {self.n_users} {unit} carry {USER_MASS:.0%}"
        if self.calibration is not None:
            text += f"; calibration: {self.calibration.summary()}"
        return text
