"""How far an IPS-weighted estimate can move when its propensities are wrong.

The sensitivity model bounds the error of every propensity by a factor Γ ≥ 1: the true
propensity of unit j (an item when the propensities are per item, else a held-out entry or a
logged row) lies in ``[p̂_j / Γ, Γ · p̂_j]``. It is the marginal sensitivity model of Tan
(JASA 2006, §4.1), written on the propensity rather than on its odds, as Kallus & Zhou
(NeurIPS 2018, §3.1) use it for policy evaluation. The raw inverse weight ``v_j = 1/p_j`` then
lies in ``[v̂_j / Γ, Γ · v̂_j]`` (``π_j / p_j`` for logged feeds) and the estimator uses
``w_j = min(m, v_j)``: clipping applies to the perturbed weights.

Every weighted estimator of the package has one of three forms in the weights
(:class:`Weighting`), each with its own solution:

1. **Linear** (IPS-DCG, doubly robust DCG, logged DCG):
   ``c · mean_u(b_u + Σ_e a_e · w_j(e) + Σ_e k_e · max(0, 1 − m / v_j(e)))``; the last sum is
   the clipped doubly robust estimator's correction of its direct method. Each unit's share
   is a function of its own weight, so the extremes are exact in closed form: each unit sits
   at the end of its interval (or at the clipping kink ``v = m``) that its summed coefficient
   calls for.
2. **Ratio of means** (SNIPS-DCG, pnDCG): ``c · Σ_u N_u(w) / Σ_u D_u(w)``. With a linear
   denominator this is a linear-fractional program over a box. Its optimum is a vertex at
   which exactly the units with ``Δn_j − λ* Δd_j > 0`` sit at their upper end (Charnes &
   Cooper, Naval Res. Logist. Q. 1962; Dinkelbach, Manag. Sci. 1967), so sorting the units by
   ``Δn_j / Δd_j`` and scanning the prefixes finds it exactly, in ``O(J log J)``. For pnDCG the
   denominator is the ideal DCG of the weighted gains, a convex function of the weights (the
   ideal order itself moves), and the extremes are not a linear-fractional program. The
   bounds then use two linear functions that enclose it on the box: the ideal DCG in the
   nominal order (never larger) and the sum that gives every gain the highest rank it can
   reach in the box (never smaller). The bounds stay valid; ``exact`` says whether the
   extreme is attained, which it is whenever the box cannot reorder a user's ideal ranking.
3. **Per-user ratios** (IPS-nDCG, IPS-recall): ``mean_u N_u(w) / D_u(w)``. Each user's ratio is
   bounded alone, as in 2. The mean of the per-user extremes is exact when no unit is shared
   between users (per-entry propensities, logged rows). With per-item propensities, one
   item's weight moves several users' ratios together; the bound is then an outer one
   (``exact=False``).

A paired difference of two estimates of the same estimator (:meth:`Weighting.minus`) has
the same form; its units are shared, so one item's propensity moves both models' terms
together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from .._validation import check_fraction

__all__ = ["ExponentRange", "Linear", "SensitivityBounds", "Weighting"]

#: The Γ at which results show their bounds: Γ₀ of the reliability study, the robustness a
#: significant verdict needed to keep wrong-sign verdicts at most 5 % of the pairs.
SHOWN_GAMMA = 2.0

# Γ beyond which a verdict that still holds is reported as robust to any error (Γ* = ∞):
# a propensity off by a factor of a million either way.
GAMMA_LIMIT = 1e6


def check_gamma(gamma) -> float:
    """Γ as a float ≥ 1; the message names the argument."""
    if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, (int, float, np.number)):
        raise ValueError(f"gamma must be a number >= 1, got {gamma!r}")
    value = float(gamma)
    if not math.isfinite(value) or value < 1:
        raise ValueError(
            f"gamma must be a finite number >= 1 (the factor by which every propensity may be "
            f"off), got {value!r}"
        )
    return value


@dataclass(frozen=True, eq=False)
class Linear:
    """``Σ_e coef_e · f(v_unit(e))`` per user: one entry per (user, unit) term.

    Attributes
    ----------
    user : numpy.ndarray
        Position of the entry's user among the estimate's users.
    unit : numpy.ndarray
        The propensity unit whose weight the entry is multiplied by.
    coef : numpy.ndarray
        The entry's coefficient.
    """

    user: np.ndarray
    unit: np.ndarray
    coef: np.ndarray

    def per_user(self, values: np.ndarray, n_users: int) -> np.ndarray:
        """Each user's sum of ``coef · values[unit]``."""
        return np.bincount(self.user, weights=self.coef * values[self.unit], minlength=n_users)

    def per_unit(self, n_units: int) -> np.ndarray:
        """Each unit's summed coefficient."""
        return np.bincount(self.unit, weights=self.coef, minlength=n_units)

    def minus(self, other: Linear) -> Linear:
        """The entries of ``self`` and those of ``other`` negated."""
        return Linear(
            np.concatenate([self.user, other.user]),
            np.concatenate([self.unit, other.unit]),
            np.concatenate([self.coef, -other.coef]),
        )

    def same(self, other: Linear) -> bool:
        """Whether both hold the same entries in the same order."""
        return all(
            np.array_equal(getattr(self, a), getattr(other, a)) for a in ("user", "unit", "coef")
        )


@dataclass(frozen=True)
class SensitivityBounds:
    """The smallest and largest value of an estimate over propensities off by up to Γ.

    Attributes
    ----------
    name : str
        The estimate's (or the comparison's) name.
    gamma : float
        Γ: every propensity lies in ``[p̂/Γ, Γ·p̂]``.
    estimate : float
        The value at the given propensities (Γ = 1).
    low, high : float
        The extremes over that box.
    exact : bool
        True when ``low`` and ``high`` are attained by propensities in the box; False for
        the valid outer bounds of the non-linear forms (module docstring).
    interval : tuple of float or None
        With a confidence level: ``(low − t·se_low, high + t·se_high)``, the standard errors
        evaluated at the propensities that attain each extreme.
    level : float or None
        That confidence level.
    """

    name: str
    gamma: float
    estimate: float
    low: float
    high: float
    exact: bool
    interval: tuple[float, float] | None = None
    level: float | None = None

    def __repr__(self) -> str:
        text = (
            f"{self.name} = {self.estimate:.4g}; with propensities off by up to ×{self.gamma:.4g}:"
            f" [{self.low:.4g}, {self.high:.4g}]"
        )
        if self.interval is not None:
            text += f", {self.level:.0%} interval [{self.interval[0]:.4g}, {self.interval[1]:.4g}]"
        return text + ("" if self.exact else " (outer bounds)")


@dataclass(frozen=True, eq=False)
class Weighting:
    """How an estimate depends on its importance weights (module docstring).

    The value at raw inverse weights ``v`` (one per unit) is
    ``Π_k mean(fixed_k) ** e_k × mean(N) / mean(D)``, or ``mean(N / D)`` with ``per_user``, or
    ``Π_k mean(fixed_k) ** e_k × mean(N)`` without a denominator, where
    ``N_u = base_u + numerator_u(w) + kept_u(max(0, 1 − m / v))`` and ``w = min(m, v)``.

    Attributes
    ----------
    raw : numpy.ndarray
        The nominal raw inverse weight ``v̂_j`` of every unit (1 for units no entry uses).
    clip : float
        m (``inf`` without clipping).
    units : str
        What one propensity belongs to: ``"item"``, ``"entry"`` or ``"row"``.
    base : numpy.ndarray
        ``b_u``, the weight-free part of every user's numerator.
    numerator : Linear
        The numerator's coefficients of ``w``.
    kept : Linear or None
        The numerator's coefficients of ``max(0, 1 − m / v)``.
    denominator : Linear or None
        The denominator's coefficients of ``w`` (the gains, with ``discounts``).
    discounts : numpy.ndarray or None
        With it, ``D_u`` is the ideal DCG: the user's gains ``coef · w`` sorted descending
        against these non-increasing values.
    per_user : bool
        Whether the ratio is per user (then averaged) rather than of means.
    fixed : numpy.ndarray, shape (n_users, k)
        Weight-free terms of the value, with ``fixed_exponents``.
    fixed_exponents : tuple of int
    ratio_range : tuple of float
        With ``per_user``, the range every user's ratio is known to lie in whatever the
        weights (``[0, 1]`` for nDCG and recall, ``[−1, 1]`` for a difference of two); the
        per-user bounds are clipped to it.
    keys : numpy.ndarray or None
        Sorted identifiers of the units (e.g. ``user · n_items + item``) when the units are
        not shared by construction between two estimates on the same data: :meth:`minus`
        then aligns the two estimates' units by them.
    """

    raw: np.ndarray
    clip: float
    units: str
    base: np.ndarray
    numerator: Linear
    kept: Linear | None = None
    denominator: Linear | None = None
    discounts: np.ndarray | None = None
    per_user: bool = False
    fixed: np.ndarray | None = None
    fixed_exponents: tuple[int, ...] = ()
    keys: np.ndarray | None = None
    ratio_range: tuple[float, float] = (0.0, 1.0)

    @property
    def n_users(self) -> int:
        """Number of users (rows of the terms)."""
        return int(self.base.size)

    def terms(self, raw: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        """Per-user terms and exponents of the estimate at raw inverse weights ``raw``."""
        w = np.minimum(raw, self.clip)
        numerator = self.base + self.numerator.per_user(w, self.n_users)
        if self.kept is not None:
            with np.errstate(divide="ignore"):
                numerator += self.kept.per_user(
                    np.maximum(0.0, 1.0 - self.clip / raw), self.n_users
                )
        fixed = np.empty((self.n_users, 0)) if self.fixed is None else self.fixed
        if self.denominator is None:
            return np.column_stack([numerator, fixed]), (1, *self.fixed_exponents)
        denominator = self._denominator(w)
        if self.per_user:
            return (numerator / denominator)[:, None], (1,)
        return (
            np.column_stack([numerator, fixed, denominator]),
            (1, *self.fixed_exponents, -1),
        )

    def value(self, raw: np.ndarray) -> float:
        """The estimate at raw inverse weights ``raw``."""
        terms, exponents = self.terms(raw)
        return float(np.prod(terms.mean(axis=0) ** np.asarray(exponents)))

    def minus(self, other: Weighting) -> Weighting:
        """The weighting of ``self − other`` for two estimates of one estimator on the same
        users, units and denominator (a paired difference)."""
        if self.clip != other.clip:
            raise ValueError(
                "the sensitivity of a difference needs both estimates clipped alike; theirs "
                f"clip at m = {self.clip:g} and m = {other.clip:g} (clip='auto' picks m per "
                "estimate: give one m)"
            )
        for attribute, what in (
            ("units", "propensities of the same kind (per item or per entry)"),
            ("per_user", "the same estimator"),
            ("fixed_exponents", "the same estimator"),
        ):
            if getattr(self, attribute) != getattr(other, attribute):
                raise ValueError(
                    f"the sensitivity of a difference needs two estimates of {what} and the "
                    "same options; these differ"
                )
        if self.keys is not None and other.keys is not None:
            self, other = _aligned(self, other)
        if not np.array_equal(self.raw, other.raw):
            raise ValueError(
                "the sensitivity of a difference needs both estimates computed with the same "
                "propensities; theirs differ"
            )
        same_denominator = (self.denominator is None) == (other.denominator is None) and (
            self.denominator is None
            or (
                self.denominator.same(other.denominator)
                and (self.discounts is None) == (other.discounts is None)
                and (self.discounts is None or np.array_equal(self.discounts, other.discounts))
            )
        )
        fixed_equal = (self.fixed is None and other.fixed is None) or (
            self.fixed is not None
            and other.fixed is not None
            and np.array_equal(self.fixed, other.fixed)
        )
        if self.n_users != other.n_users or not same_denominator or not fixed_equal:
            raise ValueError(
                "the sensitivity of a difference needs two estimates of the same estimator on "
                "the same held-out data (the same users and normalisers)"
            )
        kept = self.kept
        if other.kept is not None:
            none = np.empty(0, dtype=np.int64)
            kept = (kept or Linear(none, none, np.empty(0))).minus(other.kept)
        return replace(
            self,
            base=self.base - other.base,
            numerator=self.numerator.minus(other.numerator),
            kept=kept,
            ratio_range=(
                self.ratio_range[0] - other.ratio_range[1],
                self.ratio_range[1] - other.ratio_range[0],
            ),
        )

    def collapsed(self) -> Weighting:
        """The same value and bounds from per-unit sums alone: one pseudo-user holding every
        unit's mean coefficient. What a distributed engine merges across partitions; only for
        the linear form and ratios of means with a linear denominator (the others need each
        user's terms), and without per-user values it carries no standard error."""
        if self.per_user or self.discounts is not None:
            raise ValueError(
                "only linear estimates and ratios of means with a linear denominator reduce to "
                "per-unit sums; per-user ratios and ideal-DCG normalisers need every user's terms"
            )
        n_units, n = self.raw.size, self.n_users

        def summed(part: Linear | None) -> Linear | None:
            if part is None:
                return None
            total = part.per_unit(n_units) / n
            units = np.flatnonzero(total)
            return Linear(np.zeros(units.size, dtype=np.int64), units, total[units])

        return replace(
            self,
            base=np.array([self.base.mean()]),
            numerator=summed(self.numerator),
            kept=summed(self.kept),
            denominator=summed(self.denominator),
            fixed=None if self.fixed is None else self.fixed.mean(axis=0)[None],
        )

    def bounds(
        self, gamma: float
    ) -> tuple[float, float, bool, np.ndarray | None, np.ndarray | None]:
        """``(low, high, exact, raw_low, raw_high)`` over the box of ``gamma``: the extremes,
        whether both are attained, and raw weights attaining them (None where the bound is an
        outer one without a single attaining point)."""
        lo, hi = self.raw / gamma, self.raw * gamma
        factor = self._factor()
        if self.denominator is None:
            (low, raw_low), (high, raw_high) = self._linear(lo, hi, -1), self._linear(lo, hi, 1)
            return factor * low, factor * high, True, raw_low, raw_high
        if self.per_user:
            return self._per_user(lo, hi)
        (low, raw_low, exact_low), (high, raw_high, exact_high) = (
            self._fractional(lo, hi, sign) for sign in (-1, 1)
        )
        return factor * low, factor * high, exact_low and exact_high, raw_low, raw_high

    def _factor(self) -> float:
        if self.fixed is None:
            return 1.0
        return float(np.prod(self.fixed.mean(axis=0) ** np.asarray(self.fixed_exponents)))

    def _linear(self, lo: np.ndarray, hi: np.ndarray, sign: int) -> tuple[float, np.ndarray]:
        """Extreme of ``mean(N)`` (largest for sign +1, smallest for −1), unit by unit: each
        unit's share is largest at an end of its interval or at the kink ``v = m``."""
        a, b = self._unit_shares
        kink = np.clip(self.clip, lo, hi)
        candidates = np.stack([lo, hi, kink])
        with np.errstate(divide="ignore"):
            share = a * np.minimum(candidates, self.clip) + b * np.maximum(
                0.0, 1.0 - self.clip / candidates
            )
        pick = np.argmax(sign * share, axis=0)
        chosen = np.take_along_axis(candidates, pick[None], axis=0)[0]
        best = np.take_along_axis(share, pick[None], axis=0)[0]
        return (float(self.base.sum()) + float(best.sum())) / self.n_users, chosen

    @cached_property
    def _unit_shares(self) -> tuple[np.ndarray, np.ndarray]:
        """Every unit's summed coefficient of ``w`` and of ``max(0, 1 − m / v)`` in the
        numerator."""
        n_units = self.raw.size
        kept = np.zeros(n_units) if self.kept is None else self.kept.per_unit(n_units)
        return self.numerator.per_unit(n_units), kept

    def _denominator(self, w: np.ndarray) -> np.ndarray:
        """``D_u`` at clipped weights ``w``."""
        d = self.denominator
        if self.discounts is None:
            return d.per_user(w, self.n_users)
        gains = d.coef * w[d.unit]
        return np.bincount(
            d.user,
            weights=gains * _discount_at(self.discounts, _descending_rank(d.user, gains)),
            minlength=self.n_users,
        )

    def _enclosing(self, w_lo: np.ndarray, w_hi: np.ndarray) -> list[np.ndarray]:
        """Per-entry coefficients of the linear denominators that enclose ``D`` on the box:
        one (exact when there are no discounts) or two (the nominal ideal order, and the
        highest rank every gain can reach)."""
        d = self.denominator
        if self.discounts is None:
            return [d.coef]
        nominal = _descending_rank(d.user, d.coef * np.minimum(self.raw, self.clip)[d.unit])
        return [
            d.coef * _discount_at(self.discounts, nominal),
            d.coef
            * _discount_at(
                self.discounts, _ranks_above(d.user, d.coef * w_lo[d.unit], d.coef * w_hi[d.unit])
            ),
        ]

    def _fractional(
        self, lo: np.ndarray, hi: np.ndarray, sign: int
    ) -> tuple[float, np.ndarray, bool]:
        """Extreme of ``Σ N / Σ D`` over the box: the sorting solution of the
        linear-fractional program for every enclosing linear denominator."""
        w_lo, w_hi = np.minimum(lo, self.clip), np.minimum(hi, self.clip)
        n_units = self.raw.size
        step = w_hi - w_lo
        a = self.numerator.per_unit(n_units)
        n0 = float(self.base.sum() + a @ w_lo)
        group = np.zeros(n_units, dtype=np.int64)
        best, take = None, None
        for coef in self._enclosing(w_lo, w_hi):
            dd = np.bincount(self.denominator.unit, weights=coef, minlength=n_units)
            value, chosen = _fractional_max(
                group, np.array([sign * n0]), np.array([dd @ w_lo]), sign * a * step, dd * step
            )
            if best is None or value[0] > best:
                best, take = float(value[0]), chosen
        raw = np.where(take, hi, lo)
        exact = self.discounts is None or math.isclose(
            sign * self.value(raw) / self._factor(), best, rel_tol=1e-9, abs_tol=1e-300
        )
        return sign * best, raw, exact

    def _per_user(self, lo: np.ndarray, hi: np.ndarray):
        """Each user's ratio bounded alone; the mean of the per-user extremes."""
        w_lo, w_hi = np.minimum(lo, self.clip), np.minimum(hi, self.clip)
        num, den = self.numerator, self.denominator
        n_units = np.int64(self.raw.size)
        # One element per (user, unit), carrying both its numerator and denominator shares.
        keys, element = np.unique(
            np.concatenate([num.user * n_units + num.unit, den.user * n_units + den.unit]),
            return_inverse=True,
        )
        group, unit = keys // n_units, keys % n_units
        step = (w_hi - w_lo)[unit]
        dn = np.bincount(element[: num.unit.size], weights=num.coef, minlength=keys.size)
        n0 = self.base + num.per_user(w_lo, self.n_users)
        shared = np.bincount(unit, minlength=int(n_units)).max(initial=0) > 1
        results = []
        for sign in (-1, 1):
            best, take = None, None
            for coef in self._enclosing(w_lo, w_hi):
                dd = np.bincount(element[num.unit.size :], weights=coef, minlength=keys.size)
                d0 = np.bincount(group, weights=dd * w_lo[unit], minlength=self.n_users)
                value, chosen = _fractional_max(group, sign * n0, d0, sign * dn * step, dd * step)
                if best is None:
                    best, take = value, chosen
                else:
                    better = value > best
                    take = np.where(better[group], chosen, take)
                    best = np.where(better, value, best)
            bound = float(np.clip(sign * best, *self.ratio_range).mean())
            raw = None
            exact = False
            if not shared:
                raw = self.raw.copy()
                raw[unit] = np.where(take, hi[unit], lo[unit])
                exact = math.isclose(self.value(raw), bound, rel_tol=1e-9, abs_tol=1e-300)
            results.append((bound, raw, exact))
        (low, raw_low, exact_low), (high, raw_high, exact_high) = results
        return low, high, exact_low and exact_high, raw_low, raw_high


def _aligned(a: Weighting, b: Weighting) -> tuple[Weighting, Weighting]:
    """Both weightings on the union of their units' keys, each unit with its own raw weight
    (where both have a unit, each keeps its own, so that differing propensities stay
    visible)."""
    keys = np.union1d(a.keys, b.keys)
    at_a, at_b = np.searchsorted(keys, a.keys), np.searchsorted(keys, b.keys)

    def moved(w: Weighting, at: np.ndarray, other: Weighting, other_at: np.ndarray) -> Weighting:
        raw = np.ones(keys.size)
        raw[other_at] = other.raw
        raw[at] = w.raw
        parts = {
            name: Linear(part.user, at[part.unit], part.coef)
            for name in ("numerator", "kept", "denominator")
            if (part := getattr(w, name)) is not None
        }
        return replace(w, raw=raw, keys=keys, **parts)

    return moved(a, at_a, b, at_b), moved(b, at_b, a, at_a)


def _fractional_max(
    group: np.ndarray, n0: np.ndarray, d0: np.ndarray, dn: np.ndarray, dd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For every group g, the largest ``(n0_g + Σ_S dn) / (d0_g + Σ_S dd)`` over subsets S of
    its elements (``dd ≥ 0``, ``d0 > 0``), and which elements the best subset takes.

    The optimum takes exactly the elements with ``dn − λ* dd > 0``: every element with
    ``dd = 0`` and ``dn > 0``, and a prefix of the others sorted by ``dn / dd`` descending.
    """
    n_groups = n0.size
    take = np.zeros(dn.size, dtype=bool)
    free = dd <= 0
    take[free & (dn > 0)] = True
    n0 = n0 + np.bincount(group[take], weights=dn[take], minlength=n_groups)
    best = n0 / d0
    rest = np.flatnonzero(~free)
    if rest.size == 0:
        return best, take
    order = rest[np.lexsort((-(dn[rest] / dd[rest]), group[rest]))]
    g = group[order]
    cn, cd = np.cumsum(dn[order]), np.cumsum(dd[order])
    first = np.searchsorted(g, g)  # the first element of each element's group
    before_n = np.concatenate([[0.0], cn])[first]
    before_d = np.concatenate([[0.0], cd])[first]
    prefix = (n0[g] + cn - before_n) / (d0[g] + cd - before_d)
    # The best prefix of each group: the first element of the group in descending order.
    ranked = np.lexsort((-prefix, g))
    present = np.unique(g)
    top = ranked[np.searchsorted(g[ranked], present)]
    improves = prefix[top] > best[present]
    best[present[improves]] = prefix[top[improves]]
    cut = np.full(n_groups, -1)
    cut[present[improves]] = top[improves] - first[top[improves]]
    take[order] = (np.arange(order.size) - first) <= cut[g]
    return best, take


def _descending_rank(user: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """0-based rank of every entry among its user's entries by gain, descending."""
    order = np.lexsort((-gains, user))
    rank = np.empty(user.size, dtype=np.int64)
    sorted_user = user[order]
    rank[order] = np.arange(user.size) - np.searchsorted(sorted_user, sorted_user)
    return rank


def _ranks_above(user: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """For every entry, how many of its user's entries are certainly above it in any ideal
    order on the box: those whose smallest gain exceeds its largest."""
    _, dense = np.unique(np.concatenate([low, high]), return_inverse=True)
    span = np.int64(dense.max(initial=0) + 2)
    user = user.astype(np.int64)
    key_low = np.sort(user * span + dense[: low.size])
    key_high = user * span + dense[low.size :]
    return np.searchsorted(key_low, user * span + span - 1, side="right") - np.searchsorted(
        key_low, key_high, side="right"
    )


def _discount_at(discounts: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """``discounts[rank]``, 0 past the ranks a ranking can use."""
    padded = np.concatenate([discounts, [0.0]])
    return padded[np.minimum(rank, discounts.size)]


def largest_gamma(holds: Callable[[float], bool], limit: float = GAMMA_LIMIT) -> float:
    """The largest Γ ≥ 1 up to which ``holds`` stays true: 1.0 when it fails at Γ = 1,
    ``inf`` when it still holds at ``limit``.

    The first failure is bracketed on a grid of Γ that doubles, then located by bisection on
    log Γ to a relative precision of 1e-6; for a condition that is monotone in Γ (the sign of
    a bound) this is the exact crossing.
    """
    if not holds(1.0):
        return 1.0
    good, bad = 1.0, 2.0
    while holds(bad):
        if bad >= limit:
            return math.inf
        good, bad = bad, min(2 * bad, limit)
    while bad / good > 1 + 1e-6:
        middle = math.sqrt(good * bad)
        good, bad = (middle, bad) if holds(middle) else (good, middle)
    return good


def check_level(level) -> float:
    """A confidence level in (0, 1)."""
    return check_fraction(level, "level")


@dataclass(frozen=True)
class ExponentRange:
    """The exponents of a power-law propensity model over which a verdict holds.

    Attributes
    ----------
    name : str
        The comparison's name.
    fitted : float
        The fitted exponent γ̂.
    low, high : float
        The connected range of γ around γ̂ in which the verdict holds (NaN when it does not
        hold at γ̂); an end equal to the searched range's end means it holds up to there.
    search : tuple of float
        The range of γ searched.
    """

    name: str
    fitted: float
    low: float
    high: float
    search: tuple[float, float]

    def __repr__(self) -> str:
        if math.isnan(self.low):
            return (
                f"{self.name}: the verdict does not hold at the fitted exponent "
                f"γ = {self.fitted:.4g}"
            )
        ends = [
            f"{value:.4g}" + (" (searched end)" if value in self.search else "")
            for value in (self.low, self.high)
        ]
        return (
            f"{self.name}: the verdict holds for power-law exponents γ in [{ends[0]}, {ends[1]}]"
            f" (fitted γ = {self.fitted:.4g})"
        )


def exponent_range(
    holds: Callable[[float], bool], fitted: float, search: tuple[float, float], name: str
) -> ExponentRange:
    """The connected range of exponents around ``fitted`` where ``holds``: a grid of 201
    exponents over ``search`` locates the first failure on each side, and bisection refines
    each end to 1e-6."""
    lo, hi = search
    if not holds(fitted):
        return ExponentRange(name, fitted, math.nan, math.nan, search)
    ends = []
    for edge in (lo, hi):
        grid = np.linspace(fitted, edge, 101)[1:]
        good = fitted
        bad = None
        for gamma in grid:
            if not holds(float(gamma)):
                bad = float(gamma)
                break
            good = float(gamma)
        if bad is None:
            ends.append(edge)
            continue
        while abs(bad - good) > 1e-6:
            middle = (good + bad) / 2
            good, bad = (middle, bad) if holds(middle) else (good, middle)
        ends.append(good)
    return ExponentRange(name, fitted, ends[0], ends[1], search)
