"""Estimates from mergeable sufficient statistics, for data that never fits in one process.

Every estimator of the package is a smooth function of per-user means (``result`` module), so
its value, delta-method standard error and paired tests need only the first two moments of
the per-user terms: the number of users ``n``, the mean vector ``m`` and the co-moment matrix
``C = Σ_u (x_u − m)(x_u − m)ᵀ``. Those merge exactly across partitions (Chan, Golub &
LeVeque 1979, the pairwise update)::

    n = n_a + n_b,   δ = m_b − m_a,   m = m_a + δ · n_b / n,
    C = C_a + C_b + δ δᵀ · n_a n_b / n,

so a distributed engine computes per-user terms inside its partitions with the core's own
estimators, ships ``(n, m, C)`` per partition (C as its factor F, below), and the driver builds a
:class:`SummaryEstimate` whose numbers equal the in-memory :class:`EstimateResult`'s up to
rounding. With the delta-method gradient ``g = ∂value/∂m`` the influence of user u is
``z_u = gᵀ (x_u − m)``, hence ``Var(z) = gᵀ C g / (n − 1)`` and the standard error
``√(Var(z) / n)``; a paired difference of two estimates over the same users uses
``g_a − g_b`` on their joint moments.

``C`` is kept as a square root ``F`` with ``FᵀF = C``: the R factor of the centred terms'
QR decomposition, merged as the R factor of ``F_a``, ``F_b`` and ``δᵀ √(n_a n_b / n)``
stacked (the identity above, term by term). ``gᵀ C g`` is then ``‖F g‖²``: ``F g`` has an
absolute error of about ``ε ‖F‖ ‖g‖``, so the variance's is about ``ε² ‖C‖ ‖g‖²``, where
``gᵀ C g`` formed from ``C`` errs by ``ε ‖C‖ ‖g‖²``. A spread that is 0 in exact arithmetic
(a pnDCG with every user ranked ideally, whose DCG and ideal DCG are proportional) thus
gives a standard error near ``ε`` of the value, as the per-user influences do, not near
``√ε``.

An estimate over a subset of the users (a propensity stratum) stores its terms as
``x_u · 1[u ∈ S]`` next to the indicator ``1[u ∈ S]``; its count and means within S follow
from the joint ones: ``n_S = n π`` and ``m_S = a / π`` with ``a`` the mean of ``x · 1_S``
and ``π`` the mean of the indicator. Its influences are ``hᵀ y_u`` for the joint terms
``y_u = (x_u · 1_S, 1_S)`` and ``h = (g, −m_Sᵀ g)``, which are ``z_u`` in S and 0 outside,
and ``hᵀ`` of the joint mean is 0, so ``Σ_{u∈S} z_u² = ‖F h‖²`` on the joint factor.

The sensitivity bounds to wrong propensities (:mod:`~recpack_ope.inference.sensitivity`)
merge the same way for the linear and linear-ratio forms (IPS-DCG, SNIPS-DCG): their extremes
depend on the users only through every propensity unit's summed coefficients, the summed
weight-free terms and the number of users
(:meth:`~recpack_ope.inference.sensitivity.Weighting.collapsed`). :class:`WeightSums` holds those
sums keyed by the units' identifiers (item ids), adds them across partitions, and gives the
driver the collapsed :class:`~recpack_ope.inference.sensitivity.Weighting` of a
:class:`SummaryEstimate`, whose bounds equal the in-memory estimate's. The standard errors at
the extreme propensities need every user's terms there, so summaries give bounds without a
confidence level.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._validation import check_positive_int, real_array, shown
from .diagnostics import WeightDiagnostics
from .result import (
    Comparison,
    EstimateResult,
    PairedEstimate,
    _sensitivity,
    _unpaired,
    _weighting,
)
from .sensitivity import Linear, SensitivityBounds, Weighting

__all__ = ["Moments", "SummaryEstimate", "SummaryComparison", "WeightSums", "product_gradient"]

_PARTS = ("numerator", "kept", "denominator")


def _no_level(name: str) -> str:
    """Why a summary estimate refuses a confidence level on its sensitivity bounds."""
    return (
        f"level= on the sensitivity of {name} needs its standard errors at the propensities "
        "that attain each extreme, i.e. every user's terms there, which stay where the summary "
        "was computed (e.g. in Spark's partitions): call it without level for the bounds and "
        "the sign's Γ*, or compute the estimate in memory (recpack_ope.metrics) for the "
        "interval and the significance's Γ*"
    )


@dataclass(frozen=True, eq=False)
class Moments:
    """Count, means and the co-moment matrix's square root of per-user term vectors (module
    docstring).

    Attributes
    ----------
    n : int
        Number of users.
    mean : numpy.ndarray, shape (d,)
        Mean of every term over the users.
    factor : numpy.ndarray, shape (r, d)
        Any ``F`` with ``FᵀF = Σ_u (x_u − mean)(x_u − mean)ᵀ`` (the R factor of the centred
        terms, ``r ≤ d``).
    """

    n: int
    mean: np.ndarray
    factor: np.ndarray

    def __post_init__(self) -> None:
        n = self.n
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"Moments n must be an integer >= 0 (users), got {shown(n)}")
        mean = real_array(self.mean, "Moments mean").astype(np.float64, copy=False)
        factor = real_array(self.factor, "Moments factor").astype(np.float64, copy=False)
        if mean.ndim != 1 or factor.ndim != 2 or factor.shape[1] != mean.size:
            raise ValueError(
                f"Moments mean must be 1-D (d,) and factor (r, d), got shapes {mean.shape} "
                f"and {factor.shape}"
            )
        for name, values in (("mean", mean), ("factor", factor)):
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                at = np.unravel_index(bad[0], values.shape)
                raise ValueError(
                    f"Moments {name} is {values[at]} at {tuple(int(i) for i in at)}: moments "
                    "of per-user terms are finite (a NaN or infinite term has no mean)"
                )
        object.__setattr__(self, "n", int(n))
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "factor", factor)

    @classmethod
    def from_terms(cls, terms: np.ndarray) -> Moments:
        """Moments of the rows of ``terms`` (users × d), which must be finite.

        Examples
        --------
        >>> m = Moments.from_terms([[1.0, 2.0], [3.0, 2.0]])
        >>> m.n, m.mean.tolist(), m.comoment.round(12).tolist()
        (2, [2.0, 2.0], [[2.0, 0.0], [0.0, 0.0]])
        """
        terms = real_array(terms, "terms").astype(np.float64, copy=False)
        if terms.ndim != 2:
            raise ValueError(f"terms must be a users × terms matrix, got shape {terms.shape}")
        bad = np.argwhere(~np.isfinite(terms))
        if bad.size:
            u, k = bad[0]
            raise ValueError(
                f"terms are not finite: {terms[u, k]} in row {u}, column {k}; moments need "
                "finite per-user terms"
            )
        if terms.shape[0] == 0:
            return cls.empty(terms.shape[1])
        mean = terms.mean(axis=0)
        return cls(terms.shape[0], mean, _r_factor(terms - mean))

    @classmethod
    def empty(cls, d: int) -> Moments:
        """Moments of no users."""
        return cls(0, np.zeros(d), np.zeros((0, d)))

    @property
    def dim(self) -> int:
        """Number of terms d."""
        return int(self.mean.size)

    @property
    def comoment(self) -> np.ndarray:
        """``Σ_u (x_u − mean)(x_u − mean)ᵀ``, shape (d, d)."""
        return self.factor.T @ self.factor

    def scatter(self, weights: np.ndarray) -> float:
        """``Σ_u (wᵀ(x_u − mean))²`` for ``weights`` w over the d terms, as ``‖F w‖²``: its
        error is about ``ε²`` of ``‖C‖ ‖w‖²``, not ``ε`` (module docstring), which matters when
        every deviation is nearly orthogonal to w.

        Examples
        --------
        >>> m = Moments.from_terms([[1.0, 2.0], [3.0, 6.0], [2.0, 4.0]])
        >>> round(m.scatter(np.array([1.0, 0.0])), 12)  # (1 − 2)² + (3 − 2)² + 0²
        2.0
        >>> m.scatter(np.array([2.0, -1.0])) < 1e-30  # 2 x_0 − x_1 is 0 for every user
        True
        """
        return float(np.sum(np.square(self.factor @ weights)))

    def merge(self, other: Moments) -> Moments:
        """Moments of the union of two disjoint sets of users (Chan et al.'s pairwise update).

        Raises
        ------
        TypeError, ValueError
            Unless ``other`` is a :class:`Moments` of as many terms.
        """
        if not isinstance(other, Moments):
            raise TypeError(f"other must be Moments, got {type(other).__name__}")
        if other.dim != self.dim:
            raise ValueError(f"cannot merge moments of {self.dim} and {other.dim} terms")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        shift = delta[None] * np.sqrt(self.n * other.n / n)
        return Moments(n, mean, _r_factor(np.vstack([self.factor, other.factor, shift])))

    @classmethod
    def combine(cls, parts, d: int) -> Moments:
        """Merge any number of moments of ``d`` terms, pairwise so rounding stays balanced.

        Raises
        ------
        TypeError, ValueError
            For a part that is not :class:`Moments` or whose number of terms is not ``d``
            (empty parts included).

        Examples
        --------
        >>> parts = [Moments.from_terms([[1.0]]), Moments.from_terms([[3.0]]), Moments.empty(1)]
        >>> merged = Moments.combine(parts, 1)
        >>> merged.n, merged.mean.tolist(), merged.comoment.round(12).tolist()
        (2, [2.0], [[2.0]])
        """
        d = check_positive_int(d, "d")
        parts = list(parts)
        for k, part in enumerate(parts):
            if not isinstance(part, Moments):
                raise TypeError(f"parts[{k}] must be Moments, got {type(part).__name__}")
            if part.dim != d:
                raise ValueError(f"parts[{k}] has {part.dim} terms, but d = {d} were declared")
        parts = [p for p in parts if p.n]
        if not parts:
            return cls.empty(d)
        while len(parts) > 1:
            # An odd last part has no partner: it is carried to the next round.
            parts = [a.merge(b) for a, b in zip(parts[::2], parts[1::2], strict=False)] + (
                [parts[-1]] if len(parts) % 2 else []
            )
        return parts[0]

    def within(self, columns: np.ndarray, indicator: int | None) -> tuple[int, np.ndarray]:
        """``(n, mean)`` of ``columns`` over all users, or over the users whose ``indicator``
        column is 1 when the columns hold ``x · 1_S`` (module docstring)."""
        mean = self.mean[columns]
        if indicator is None:
            return self.n, mean
        share = self.mean[indicator]
        n = int(round(self.n * share))
        if n == 0:
            return 0, np.zeros(mean.size)
        return n, mean / share


def _r_factor(rows: np.ndarray) -> np.ndarray:
    """The R factor of ``rows`` (at most d × d): ``RᵀR = rowsᵀ rows``."""
    return np.linalg.qr(rows, mode="r")


@dataclass(frozen=True, eq=False)
class WeightSums:
    """Per-unit sums of an IPS-weighted estimate's linear or linear-ratio
    :class:`~recpack_ope.inference.sensitivity.Weighting` over some users, mergeable across
    disjoint sets of users (module docstring).

    Attributes
    ----------
    ids : numpy.ndarray
        Sorted identifiers of the propensity units some term uses (e.g. item ids).
    raw : numpy.ndarray
        Each unit's nominal raw inverse weight ``v̂ = 1/p̂``.
    numerator : numpy.ndarray
        Each unit's numerator coefficients summed over the users.
    kept, denominator : numpy.ndarray or None
        The same for the clipped doubly robust terms and for a ratio's denominator.
    base : float
        ``Σ_u b_u``, the users' weight-free numerator terms.
    fixed : numpy.ndarray or None
        ``Σ_u`` of each weight-free factor (SNIPS's held-out counts).
    clip, units, fixed_exponents
        As for the weighting.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true, p = np.array([[1, 0, 1], [0, 1, 0]]), np.array([0.5, 1.0, 0.25])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> options = dict(discount=LogDiscount(2), propensity=p)
    >>> ids = np.array([10, 11, 12])  # the items' identifiers
    >>> first, second = (
    ...     WeightSums.from_weighting(ips_dcg(y_true[u], scores[u], **options).weighting, ids)
    ...     for u in ([0], [1])
    ... )
    >>> both = first.merge(second)
    >>> both.ids.tolist(), both.numerator.tolist(), both.raw.tolist()
    ([10, 11], [1.0, 1.0], [2.0, 1.0])
    >>> both.weighting(n_users=2).bounds(2.0)[:2]  # as ips_dcg(y_true, ...).sensitivity(2.0)
    (0.75, 3.0)
    """

    ids: np.ndarray
    raw: np.ndarray
    numerator: np.ndarray
    kept: np.ndarray | None
    denominator: np.ndarray | None
    base: float
    fixed: np.ndarray | None
    clip: float
    units: str
    fixed_exponents: tuple[int, ...] = ()

    @classmethod
    def from_weighting(cls, weighting: Weighting, ids) -> WeightSums:
        """The sums of ``weighting`` over its users; ``ids[j]`` identifies its unit ``j``.

        Raises
        ------
        ValueError
            For a per-user ratio or an ideal-DCG normaliser, which need every user's terms
            (:meth:`~recpack_ope.inference.sensitivity.Weighting.collapsed`), or ``ids`` not
            naming every unit.
        """
        ids = np.asarray(ids)
        if ids.shape != weighting.raw.shape:
            raise ValueError(
                f"ids must identify each of the weighting's {weighting.raw.size} units, got shape "
                f"{ids.shape}"
            )
        mean = weighting.collapsed()
        n = weighting.n_users
        parts = {name: getattr(mean, name) for name in _PARTS}
        used = np.unique(np.concatenate([p.unit for p in parts.values() if p is not None]))
        used = used[np.argsort(ids[used], kind="stable")]
        at = np.zeros(ids.size, dtype=np.intp)
        at[used] = np.arange(used.size)

        def summed(part: Linear | None) -> np.ndarray | None:
            if part is None:
                return None
            return n * np.bincount(at[part.unit], weights=part.coef, minlength=used.size)

        return cls(
            ids=ids[used],
            raw=weighting.raw[used],
            **{name: summed(part) for name, part in parts.items()},
            base=n * float(mean.base[0]),
            fixed=None if mean.fixed is None else n * mean.fixed[0],
            clip=weighting.clip,
            units=weighting.units,
            fixed_exponents=weighting.fixed_exponents,
        )

    def merge(self, other: WeightSums) -> WeightSums:
        """The sums over the users of both (disjoint sets of users of the same estimator)."""
        for attribute in ("clip", "units", "fixed_exponents"):
            if getattr(self, attribute) != getattr(other, attribute):
                raise ValueError(
                    f"cannot merge the weight sums of two estimators: their {attribute} differ "
                    f"({getattr(self, attribute)!r} and {getattr(other, attribute)!r})"
                )
        ids = np.union1d(self.ids, other.ids)
        mine, theirs = np.searchsorted(ids, self.ids), np.searchsorted(ids, other.ids)

        def added(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
            if a is None and b is None:
                return None
            total = np.zeros(ids.size)
            for at, values in ((mine, a), (theirs, b)):
                if values is not None:
                    total[at] += values
            return total

        # Both hold the same propensity for a unit they share.
        raw = np.ones(ids.size)
        raw[theirs], raw[mine] = other.raw, self.raw
        fixed = None if self.fixed is None else self.fixed + other.fixed
        return WeightSums(
            ids=ids,
            raw=raw,
            **{name: added(getattr(self, name), getattr(other, name)) for name in _PARTS},
            base=self.base + other.base,
            fixed=fixed,
            clip=self.clip,
            units=self.units,
            fixed_exponents=self.fixed_exponents,
        )

    @staticmethod
    def shared_units(sums: Iterable[WeightSums]) -> tuple[np.ndarray, np.ndarray]:
        """The union of the identifiers of ``sums`` and each one's raw inverse weight: the
        units every estimate of one pass is placed on by :meth:`weighting`, so that two of them
        pair in a comparison."""
        ids, raw = np.empty(0), np.empty(0)
        for s in sums:
            ids, raw = (
                np.concatenate([ids.astype(s.ids.dtype, copy=False), s.ids]),
                np.concatenate([raw, s.raw]),
            )
        ids, first = np.unique(ids, return_index=True)
        return ids, raw[first]

    def weighting(self, n_users: int, ids=None, raw=None) -> Weighting:
        """The collapsed weighting of the estimate over ``n_users`` users: those whose sums
        these are, and any whose terms are all 0 (users without a positive reward over
        ``population="all"``). Its bounds equal those of the in-memory estimate's weighting.

        Parameters
        ----------
        n_users : int
            Users the estimate averages over.
        ids, raw : numpy.ndarray, optional
            Sorted identifiers of the units to place the sums on, and their raw inverse
            weights (default :attr:`ids` and :attr:`raw`); :meth:`shared_units` of all the
            estimates that will be compared.
        """
        if isinstance(n_users, bool) or not isinstance(n_users, (int, np.integer)) or n_users < 1:
            raise ValueError(f"n_users must be a positive integer, got {n_users!r}")
        if ids is None:
            ids, raw = self.ids, self.raw
        if not np.isin(self.ids, ids).all():
            raise ValueError("ids must hold every identifier of these sums (shared_units)")
        at = np.searchsorted(ids, self.ids)

        def linear(values: np.ndarray | None) -> Linear | None:
            if values is None:
                return None
            keep = values != 0
            users = np.zeros(int(keep.sum()), dtype=np.int64)
            return Linear(users, at[keep].astype(np.int64), values[keep] / n_users)

        return Weighting(
            raw=np.asarray(raw, dtype=np.float64),
            clip=self.clip,
            units=self.units,
            base=np.array([self.base / n_users]),
            **{name: linear(getattr(self, name)) for name in _PARTS},
            fixed=None if self.fixed is None else (self.fixed / n_users)[None],
            fixed_exponents=self.fixed_exponents,
        )


def product_gradient(means: np.ndarray, exponents: tuple[int, ...]) -> tuple[float, np.ndarray]:
    """Value ``Π_k m_k ** e_k`` and its gradient, finite when a numerator mean is 0."""
    exps = np.asarray(exponents)
    grad = np.empty(means.size)
    for k in range(means.size):
        rest = np.prod(np.delete(means, k) ** np.delete(exps, k))
        grad[k] = exps[k] * means[k] ** (exps[k] - 1) * rest
    return float(np.prod(means**exps)), grad


@dataclass(frozen=True, eq=False)
class SummaryEstimate(PairedEstimate):
    """An estimate known through the moments of its users' terms, not the terms themselves.

    It answers like an :class:`~recpack_ope.inference.result.EstimateResult` — ``value``,
    ``standard_error``, ``confidence_interval``, ``compare`` — with the same numbers, while the
    per-user values stay where they were computed (e.g. in Spark, written back as a
    DataFrame). Two estimates can be compared when they share one :class:`Moments` object,
    i.e. were computed over the same users in one pass.

    Attributes
    ----------
    name : str
        Estimator name, e.g. ``"pnDCG@10"``.
    estimate : float
        The value.
    gradient : numpy.ndarray, shape (d,)
        ``∂value/∂mean`` over all of ``moments``' terms (0 for terms it does not use).
    moments : Moments
        The joint moments of every term computed in the same pass.
    n_excluded_users : int
        Users without held-out interactions (or sessions without reward), left out.
    diagnostics : WeightDiagnostics or None
        Weight diagnostics of an IPS-weighted estimate.
    indicator : int or None
        For an estimate over a subset of the users, the term holding ``1[u ∈ S]``.
    weighting : Weighting or None
        For an IPS-weighted estimate of the linear or linear-ratio form, its collapsed
        weighting merged from :class:`WeightSums`, which :meth:`sensitivity` perturbs.
    no_bounds : str or None
        For an IPS-weighted estimate without a weighting, why it has none and what gives its
        bounds: the error :meth:`sensitivity` raises.
    """

    name: str
    estimate: float
    gradient: np.ndarray
    moments: Moments
    n_excluded_users: int = 0
    diagnostics: WeightDiagnostics | None = None
    indicator: int | None = None
    weighting: Weighting | None = None
    no_bounds: str | None = None

    @classmethod
    def product(
        cls,
        name: str,
        moments: Moments,
        columns,
        exponents: tuple[int, ...],
        *,
        indicator: int | None = None,
        **attributes,
    ) -> SummaryEstimate:
        """``Π_k mean(x_k) ** e_k`` over ``columns`` of ``moments`` (over the users of
        ``indicator`` when given), the form of every estimator in ``result``."""
        columns = np.asarray(columns, dtype=np.intp)
        _, means = moments.within(columns, indicator)
        value, grad = product_gradient(means, exponents)
        gradient = np.zeros(moments.dim)
        gradient[columns] = grad
        return cls(name, value, gradient, moments, indicator=indicator, **attributes)

    @property
    def value(self) -> float:
        """The estimate; refused over no users (:class:`PairedEstimate`)."""
        self._check_users()
        return float(self.estimate)

    @property
    def n_users(self) -> int:
        """Number of evaluated users."""
        return self.moments.within(np.zeros(0, dtype=np.intp), self.indicator)[0]

    @property
    def influence(self) -> np.ndarray:
        """Not available: only the moments of the per-user terms reached this process."""
        raise AttributeError(
            f"{self.name} was computed from merged moments; its per-user values stay with the "
            "engine that computed them (e.g. recpack_ope.spark's per_user frames)"
        )

    def _variance(self, gradient: np.ndarray) -> float:
        """``Var(z)`` of the influence ``gradientᵀ (x − m)`` over this estimate's users."""
        used = np.flatnonzero(gradient)
        n, means = self.moments.within(used, self.indicator)
        if n < 2:
            raise ValueError(f"a standard error of {self.name} needs at least 2 users, got {n}")
        if self.indicator is None:
            return self.moments.scatter(gradient) / (n - 1)
        weights = gradient.copy()
        weights[self.indicator] -= means @ gradient[used]
        return self.moments.scatter(weights) / (n - 1)

    @property
    def standard_error(self) -> float:
        """Standard error over users (delta method), from the moments."""
        return float(np.sqrt(self._variance(self.gradient) / self.n_users))

    def compare(
        self,
        other,
        level: float = 0.95,
        *,
        control_variate: bool = False,
        names: tuple[str, str] | None = None,
    ) -> Comparison:
        """Paired comparison ``self − other`` over the same users (see
        :meth:`PairedEstimate.compare`); both estimates must come from the same pass.
        Control variates need per-user controls, which summaries do not carry."""
        if isinstance(other, PairedEstimate) and not isinstance(other, SummaryEstimate):
            raise ValueError(_unpaired(other, self))
        if (
            not isinstance(other, SummaryEstimate)
            or other.moments is not self.moments
            or (other.indicator != self.indicator)
        ):
            raise ValueError(
                f"cannot pair {self.name} with {getattr(other, 'name', other)!r}: a summary "
                "estimate pairs only with estimates computed over the same users in the same "
                "pass (evaluate both models in one call)"
            )
        if control_variate:
            raise ValueError(
                "control_variate=True needs per-user control variates, which estimates from "
                "merged moments do not carry"
            )
        n = self.n_users
        if n < 2:
            raise ValueError("a paired comparison needs at least 2 users")
        se = float(np.sqrt(self._variance(self.gradient - other.gradient) / n))
        return SummaryComparison.from_difference(
            self._comparison_name(other, names),
            self.value - other.value,
            se,
            n,
            level,
            estimates=(self, other),
        )

    def sensitivity(self, gamma: float, level: float | None = None) -> SensitivityBounds:
        """The smallest and largest value of this estimate when every propensity may be off by
        a factor up to ``gamma`` either way, from its merged weighting: the same bounds as
        :meth:`~recpack_ope.inference.result.EstimateResult.sensitivity` in memory.

        Raises
        ------
        ValueError
            With ``level`` (its standard errors need every user's terms), or for an estimate
            without a weighting: unweighted, or one whose bounds need every user's terms
            (:attr:`no_bounds` says which and what to use).
        """
        if level is not None:
            raise ValueError(_no_level(self.name))
        return _sensitivity(self.name, self.value, self._weighting(), gamma, None, None)

    def _weighting(self) -> Weighting:
        """:attr:`weighting`, or the error saying why there is none."""
        if self.weighting is None and self.no_bounds is not None:
            raise ValueError(self.no_bounds)
        if self.weighting is None and self.diagnostics is not None:
            raise ValueError(
                f"{self.name} is IPS-weighted, but its sensitivity bounds did not merge: only "
                "per-item propensities of linear and linear-ratio estimators (ips_dcg, "
                "snips_dcg) reduce to sums over the users, while per-row or per-(user, item) "
                "propensities (feed logs), per-user ratios and ideal-DCG normalisers need every "
                "user's terms; compute it in memory (recpack_ope.metrics, recpack_ope.logged) "
                "for its bounds"
            )
        return _weighting(self)

    def _influence_at(self, raw: np.ndarray) -> np.ndarray:
        """Not available: the per-user terms at other weights stayed with the engine."""
        raise ValueError(_no_level(self.name))

    # Clipping on summaries is a given m, never selected from the data ("auto").
    clip_selection = None

    # Printed like an EstimateResult: the same headline and weight diagnostics.
    _headline = EstimateResult._headline
    __repr__ = EstimateResult.__repr__


class SummaryComparison(Comparison):
    """A :class:`~recpack_ope.inference.result.Comparison` of two :class:`SummaryEstimate`:
    :meth:`sensitivity` and the sign's :meth:`robustness` (Γ*) come from their merged
    weightings and equal the in-memory ones; a confidence level is refused (the standard
    errors at the extreme propensities need every user's terms).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]])
    >>> p, ids = np.array([0.5, 1.0, 0.25]), np.arange(3)
    >>> options = dict(discount=LogDiscount(1), propensity=p)
    >>> a = ips_dcg(y_true, np.eye(3)[[0, 1, 0, 0]], **options)
    >>> b = ips_dcg(y_true, np.eye(3)[[2, 2, 1, 1]], **options)
    >>> sums = [WeightSums.from_weighting(e.weighting, ids) for e in (a, b)]
    >>> units = WeightSums.shared_units(sums)
    >>> moments = Moments.from_terms(np.column_stack([a.terms, b.terms]))
    >>> summaries = [
    ...     SummaryEstimate.product(e.name, moments, [k], (1,), weighting=s.weighting(4, *units))
    ...     for k, (e, s) in enumerate(zip((a, b), sums))
    ... ]
    >>> comparison = summaries[0].compare(summaries[1])
    >>> round(comparison.robustness(), 4), round(a.compare(b).robustness(), 4)
    (1.2247, 1.2247)
    """

    def sensitivity(self, gamma: float, level: float | None = None) -> SensitivityBounds:
        """The bounds of the paired difference
        (:meth:`~recpack_ope.inference.result.Comparison.sensitivity`), without ``level``."""
        self._check(level)
        return super().sensitivity(gamma)

    def robustness(self, level: float | None = None) -> float:
        """Γ* of the difference's sign
        (:meth:`~recpack_ope.inference.result.Comparison.robustness`), without ``level``."""
        self._check(level)
        return super().robustness()

    def _check(self, level) -> None:
        """Refuse ``level`` and estimates without a weighting, saying why."""
        if level is not None:
            raise ValueError(_no_level(self.name))
        for estimate in self.estimates:
            estimate._weighting()

    @cached_property
    def _robustness_shown(self) -> str:
        """``Γ* …`` of the sign for the repr, when both estimates carry a weighting."""
        if any(e.weighting is None for e in self.estimates):
            return ""
        return f"; its sign survives propensities off by up to ×{self.robustness():.3g}"
