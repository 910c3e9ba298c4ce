"""Estimates from mergeable sufficient statistics, for data that never fits in one process.

Every estimator of the package is a smooth function of per-user means (``result`` module), so
its value, delta-method standard error and paired tests need only the first two moments of
the per-user terms: the number of users ``n``, the mean vector ``m`` and the co-moment matrix
``C = Σ_u (x_u − m)(x_u − m)ᵀ``. Those merge exactly across partitions (Chan, Golub &
LeVeque 1979, the pairwise update)::

    n = n_a + n_b,   δ = m_b − m_a,   m = m_a + δ · n_b / n,
    C = C_a + C_b + δ δᵀ · n_a n_b / n,

so a distributed engine computes per-user terms inside its partitions with the core's own
estimators, ships ``(n, m, C)`` per partition, and the driver builds a
:class:`SummaryEstimate` whose numbers equal the in-memory :class:`EstimateResult`'s up to
rounding. With the delta-method gradient ``g = ∂value/∂m`` the influence of user u is
``z_u = gᵀ (x_u − m)``, hence ``Var(z) = gᵀ C g / (n − 1)`` and the standard error
``√(Var(z) / n)``; a paired difference of two estimates over the same users uses
``g_a − g_b`` on their joint moments.

An estimate over a subset of the users (a propensity stratum) stores its terms as
``x_u · 1[u ∈ S]`` next to the indicator ``1[u ∈ S]``; its means, co-moments and degrees of
freedom within S follow from the joint ones: ``n_S = n π``, ``m_S = a / π`` and
``C_S = C_xx + n a aᵀ (1 − 1/π)`` with ``a`` the mean of ``x · 1_S`` and ``π`` the mean of the
indicator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .diagnostics import WeightDiagnostics
from .result import Comparison, EstimateResult, PairedEstimate

__all__ = ["Moments", "SummaryEstimate", "product_gradient"]


@dataclass(frozen=True, eq=False)
class Moments:
    """Count, means and co-moment matrix of per-user term vectors (module docstring).

    Attributes
    ----------
    n : int
        Number of users.
    mean : numpy.ndarray, shape (d,)
        Mean of every term over the users.
    comoment : numpy.ndarray, shape (d, d)
        ``Σ_u (x_u − mean)(x_u − mean)ᵀ``.
    """

    n: int
    mean: np.ndarray
    comoment: np.ndarray

    @classmethod
    def from_terms(cls, terms: np.ndarray) -> Moments:
        """Moments of the rows of ``terms`` (users × d)."""
        terms = np.asarray(terms, dtype=np.float64)
        if terms.ndim != 2:
            raise ValueError(f"terms must be a users × terms matrix, got shape {terms.shape}")
        if terms.shape[0] == 0:
            return cls.empty(terms.shape[1])
        mean = terms.mean(axis=0)
        centred = terms - mean
        return cls(terms.shape[0], mean, centred.T @ centred)

    @classmethod
    def empty(cls, d: int) -> Moments:
        """Moments of no users."""
        return cls(0, np.zeros(d), np.zeros((d, d)))

    @property
    def dim(self) -> int:
        """Number of terms d."""
        return int(self.mean.size)

    def merge(self, other: Moments) -> Moments:
        """Moments of the union of two disjoint sets of users (Chan et al.'s pairwise update)."""
        if other.dim != self.dim:
            raise ValueError(f"cannot merge moments of {self.dim} and {other.dim} terms")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        comoment = self.comoment + other.comoment + np.outer(delta, delta) * (self.n * other.n / n)
        return Moments(n, mean, comoment)

    @classmethod
    def combine(cls, parts, d: int) -> Moments:
        """Merge any number of moments of ``d`` terms, pairwise so rounding stays balanced."""
        parts = [p for p in parts if p.n]
        if not parts:
            return cls.empty(d)
        while len(parts) > 1:
            # An odd last part has no partner: it is carried to the next round.
            parts = [a.merge(b) for a, b in zip(parts[::2], parts[1::2], strict=False)] + (
                [parts[-1]] if len(parts) % 2 else []
            )
        return parts[0]

    def within(
        self, columns: np.ndarray, indicator: int | None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """``(n, mean, comoment)`` of ``columns`` over all users, or over the users whose
        ``indicator`` column is 1 when the columns hold ``x · 1_S`` (module docstring)."""
        mean = self.mean[columns]
        comoment = self.comoment[np.ix_(columns, columns)]
        if indicator is None:
            return self.n, mean, comoment
        share = self.mean[indicator]
        n = int(round(self.n * share))
        if n == 0:
            return 0, np.zeros(mean.size), np.zeros_like(comoment)
        return n, mean / share, comoment + np.outer(mean, mean) * (self.n * (1 - 1 / share))


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
    """

    name: str
    estimate: float
    gradient: np.ndarray
    moments: Moments
    n_excluded_users: int = 0
    diagnostics: WeightDiagnostics | None = None
    indicator: int | None = None

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
        _, means, _ = moments.within(columns, indicator)
        value, grad = product_gradient(means, exponents)
        gradient = np.zeros(moments.dim)
        gradient[columns] = grad
        return cls(name, value, gradient, moments, indicator=indicator, **attributes)

    @property
    def value(self) -> float:
        """The estimate."""
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
        n, _, comoment = self.moments.within(used, self.indicator)
        if n < 2:
            raise ValueError(f"a standard error of {self.name} needs at least 2 users, got {n}")
        g = gradient[used]
        return max(float(g @ comoment @ g), 0.0) / (n - 1)

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
        return Comparison.from_difference(
            self._comparison_name(other, names), self.value - other.value, se, n, level
        )

    # Clipping on summaries is a given m, never selected from the data ("auto").
    clip_selection = None

    # Printed like an EstimateResult: the same headline and weight diagnostics.
    _headline = EstimateResult._headline
    __repr__ = EstimateResult.__repr__
