"""Estimates that carry their per-user values, so intervals and paired tests need no recomputation.

Every estimator of the package is a ratio of per-user means,

    value = mean_u(a_u) / mean_u(b_u),

with ``b_u ≡ 1`` for plain means (DCG, unbiased DCG, per-user nDCG) and a genuine
denominator for the ratio estimators (pnDCG: ``b_u = iDCG_u``; self-normalised DCG:
``b_u`` = the user's summed IPS weights rescaled). Uncertainty is normal-theory over users:
the delta method linearises the ratio into per-user influence values

    z_u = (a_u − value · b_u) / mean(b),

whose mean is 0 and whose standard error is the estimate's; for plain means ``z_u`` is just
the centred per-user value. Intervals and tests use Student's t with ``n − 1`` degrees of
freedom, which for plain means reproduces ``scipy.stats.ttest_rel`` / ``t.interval`` exactly
and tends to the normal interval as the number of users grows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["EstimateResult", "Comparison"]


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")


@dataclass(frozen=True, eq=False)
class EstimateResult:
    """An estimate over users with everything needed to quantify its uncertainty.

    Attributes
    ----------
    name : str
        Estimator name, e.g. ``"pnDCG@10"``.
    numerator, denominator : numpy.ndarray
        Per-user ``a_u`` and ``b_u`` (see the module docstring), aligned with ``user_ids``.
    user_ids : numpy.ndarray
        Row indices (users) of ``y_true`` that were evaluated: those with at least one
        held-out interaction.
    n_excluded_users : int
        Users of ``y_true`` without held-out interactions, left out of the average.
    """

    name: str
    numerator: np.ndarray
    denominator: np.ndarray
    user_ids: np.ndarray
    n_excluded_users: int

    @property
    def n_users(self) -> int:
        """Number of evaluated users."""
        return int(self.user_ids.size)

    @property
    def value(self) -> float:
        """The estimate ``mean(a) / mean(b)``."""
        return float(self.numerator.mean() / self.denominator.mean())

    @property
    def per_user(self) -> np.ndarray:
        """Per-user contributions ``a_u / mean(b)``, whose mean is :attr:`value`.

        For plain means (DCG, unbiased DCG, nDCG) these are the per-user metric values.
        """
        return self.numerator / self.denominator.mean()

    @property
    def influence(self) -> np.ndarray:
        """Per-user influence values ``z_u`` of the delta method (mean 0)."""
        return (self.numerator - self.value * self.denominator) / self.denominator.mean()

    @property
    def standard_error(self) -> float:
        """Standard error over users (delta method for ratio estimators)."""
        if self.n_users < 2:
            raise ValueError(f"a standard error needs at least 2 users, {self.name} has {self.n_users}")
        return float(self.influence.std(ddof=1) / np.sqrt(self.n_users))

    def confidence_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided ``level`` confidence interval for :attr:`value`."""
        _check_level(level)
        half = stats.t.ppf(0.5 + level / 2, self.n_users - 1) * self.standard_error
        return self.value - half, self.value + half

    def compare(self, other: "EstimateResult", level: float = 0.95) -> "Comparison":
        """Paired comparison ``self − other`` over the same users.

        Parameters
        ----------
        other : EstimateResult
            The same estimator evaluated for another model on the same held-out data.
        level : float
            Confidence level of the interval on the difference.

        Returns
        -------
        Comparison
            Difference, its standard error, confidence interval and two-sided p-value.
        """
        _check_level(level)
        if not np.array_equal(self.user_ids, other.user_ids):
            raise ValueError(
                f"cannot pair {self.name} ({self.n_users} users) with {other.name} "
                f"({other.n_users} users): they were evaluated on different users"
            )
        if self.n_users < 2:
            raise ValueError("a paired comparison needs at least 2 users")
        diff = self.value - other.value
        z = self.influence - other.influence
        se = float(z.std(ddof=1) / np.sqrt(self.n_users))
        dof = self.n_users - 1
        if se > 0:
            p_value = float(2 * stats.t.sf(abs(diff) / se, dof))
        else:
            p_value = 1.0 if diff == 0 else 0.0
        half = stats.t.ppf(0.5 + level / 2, dof) * se
        return Comparison(
            name=f"{self.name} − {other.name}",
            difference=diff,
            standard_error=se,
            confidence_interval=(diff - half, diff + half),
            p_value=p_value,
            level=level,
            n_users=self.n_users,
        )

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:
        if self.n_users < 2:
            return f"{self.name} = {self.value:.6g} ({self.n_users} user)"
        lo, hi = self.confidence_interval()
        return (
            f"{self.name} = {self.value:.6g} [95% CI {lo:.6g}, {hi:.6g}] over {self.n_users} users"
            f" ({self.n_excluded_users} without held-out interactions excluded)"
        )


@dataclass(frozen=True)
class Comparison:
    """Paired difference of two estimates over the same users."""

    name: str
    difference: float
    standard_error: float
    confidence_interval: tuple[float, float]
    p_value: float
    level: float
    n_users: int

    def __repr__(self) -> str:
        lo, hi = self.confidence_interval
        return (
            f"{self.name} = {self.difference:.6g} [{self.level:.0%} CI {lo:.6g}, {hi:.6g}], "
            f"p = {self.p_value:.3g} over {self.n_users} paired users"
        )
