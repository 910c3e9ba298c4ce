"""Estimates that carry their per-user values, so intervals and paired tests need no recomputation.

Every estimator of the package is a product of powers of per-user means,

    value = Π_k mean_u(x_ku) ** e_k,    e_k ∈ {+1, −1},

e.g. a plain mean (DCG, unbiased DCG, per-user nDCG: one term), a ratio of means (pnDCG:
``mean(DCG_u) / mean(iDCG_u)``) or the self-normalised DCG
(``mean(DCG_u) · mean(n_u) / mean(Σ_i w_ui)``, n_u the user's held-out count). Uncertainty is
normal-theory over users: the delta method linearises the value into per-user influence
values

    z_u = Σ_k ∂value/∂m_k · (x_ku − m_k),    m_k = mean_u(x_ku),

whose mean is 0 and whose standard deviation / √n is the standard error; for a plain mean
``z_u`` is just the centred per-user value. Intervals and tests use Student's t with ``n − 1``
degrees of freedom, which for plain means reproduces ``scipy.stats.ttest_rel`` and
``scipy.stats.t.interval`` exactly and tends to the normal interval as users grow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import check_fraction, real_array, shown
from .clipping import ClipSelection
from .diagnostics import WeightDiagnostics

__all__ = ["PairedEstimate", "EstimateResult", "LoggedEstimate", "Comparison"]


def _standard_error(influence: np.ndarray, what: str) -> float:
    """Normal-theory standard error of a mean of per-user influence values."""
    if influence.size < 2:
        raise ValueError(f"{what} needs at least 2 users, got {influence.size}")
    return float(influence.std(ddof=1) / np.sqrt(influence.size))


def _half_width(se: float, n_users: int, level: float) -> float:
    """Half-width of the two-sided Student-t interval with ``n_users − 1`` degrees of freedom."""
    level = check_fraction(level, "level")
    return float(stats.t.ppf(0.5 + level / 2, n_users - 1) * se)


def t_test_p_value(difference, standard_error, n_users: int):
    """Two-sided Student-t p-value of ``difference`` / ``standard_error`` with ``n_users − 1``
    degrees of freedom (elementwise). Without spread the test is decided by the difference
    itself: 1 when it is 0, else 0."""
    difference, standard_error = np.asarray(difference, float), np.asarray(standard_error, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * stats.t.sf(np.abs(difference) / standard_error, n_users - 1)
    return np.where(standard_error > 0, p, np.where(difference == 0, 1.0, 0.0))


class PairedEstimate(ABC):
    """Uncertainty and paired comparisons for an estimate known through per-user influence values.

    Subclasses provide ``name``, ``user_ids``, :attr:`value` and :attr:`influence` (mean 0 over
    ``user_ids``); the standard error, interval and paired test follow from those alone, so
    any two estimates over the same users can be compared, whatever their form.
    """

    name: str
    user_ids: np.ndarray

    @property
    @abstractmethod
    def value(self) -> float:
        """The estimate."""

    @property
    @abstractmethod
    def influence(self) -> np.ndarray:
        """Per-user influence values (mean 0), aligned with ``user_ids``."""

    @property
    def n_users(self) -> int:
        """Number of evaluated users."""
        return int(self.user_ids.size)

    @property
    def standard_error(self) -> float:
        """Standard error over users (delta method for non-linear estimators)."""
        return _standard_error(self.influence, f"a standard error of {self.name}")

    def confidence_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided ``level`` confidence interval for :attr:`value`."""
        half = _half_width(self.standard_error, self.n_users, level)
        return self.value - half, self.value + half

    @property
    def control(self) -> np.ndarray | None:
        """Per-user control variate with expectation 0 under the logging policy, or None.

        Estimates from impressions (held-out) or feed logs carry one
        (docs/definitions.md, "Impressions and control variates"); ``compare`` can subtract
        it to shrink the variance of a paired difference.
        """
        return None

    def compare(
        self,
        other: PairedEstimate,
        level: float = 0.95,
        *,
        control_variate: bool = False,
        names: tuple[str, str] | None = None,
    ) -> Comparison:
        """Paired comparison ``self − other`` over the same users.

        Parameters
        ----------
        other : PairedEstimate
            The same estimator evaluated for another model on the same held-out data.
        level : float
            Confidence level of the interval on the difference.
        control_variate : bool
            Subtract the optimal multiple of the difference of the two estimates' control
            variates (Δ-OPE, Jeunen & Ustimenko, RecSys 2024, §3; the optimal baseline of
            Gupta et al., RecSys 2024): with per-user influence differences ``d_u`` and
            control differences ``k_u`` (expectation 0),
            ``Δ̂_β = Δ̂ − β̂ · mean(k)``, ``β̂ = Σ d_u (k_u − k̄) / Σ (k_u − k̄)²``, the
            least-squares coefficient, and the standard error is that of the residuals
            ``d_u − β̂ (k_u − k̄)`` (two degrees of freedom used). It is unbiased when the
            weights are unclipped; with clipping it equals the clipped doubly robust
            difference with the constant reward model β̂. Both estimates must carry a
            ``control`` (held-out estimates with ``impressions=``, logged DCG).
        names : tuple of two str, optional
            The two models' names, so the comparison's label says which is which:
            ``("EASE", "popularity")`` labels it ``"EASE − popularity (IPS-DCG@10)"``.

        Returns
        -------
        Comparison
            Difference, its standard error, confidence interval and two-sided p-value; with a
            control variate also ``control_coefficient`` (β̂) and ``variance_reduction``.
        """
        if not isinstance(other, PairedEstimate):
            raise TypeError(
                f"other must be an estimate (EstimateResult, StratifiedResult, …) to pair with "
                f"{self.name}, got {type(other).__name__}"
            )
        if not np.array_equal(self.user_ids, other.user_ids):
            raise ValueError(
                f"cannot pair {self.name} ({self.n_users} users) with {other.name} "
                f"({other.n_users} users): they were evaluated on different users"
            )
        if not isinstance(control_variate, (bool, np.bool_)):
            raise ValueError(f"control_variate must be True or False, got {control_variate!r}")
        name = self._comparison_name(other, names)
        diff = self.value - other.value
        residual = self.influence - other.influence
        beta = reduction = None
        if control_variate:
            missing = [e.name for e in (self, other) if e.control is None]
            if missing:
                raise ValueError(
                    f"control_variate=True needs a control on both estimates; {missing[0]} has "
                    "none: evaluate held-out data with impressions= (and a propensity) or use "
                    "logged_dcg on a feed log"
                )
            k = self.control - other.control
            centred = k - k.mean()
            spread = float(centred @ centred)
            beta = float(residual @ centred / spread) if spread > 0 else 0.0
            plain = float(residual @ residual)
            diff -= beta * float(k.mean())
            residual = residual - beta * centred
            reduction = 1.0 - float(residual @ residual) / plain if plain > 0 else 0.0
        if residual.size < 2 + int(control_variate):
            raise ValueError(f"a paired comparison needs at least {2 + int(control_variate)} users")
        se = float(
            np.sqrt(
                residual @ residual / (residual.size - 1 - int(control_variate)) / residual.size
            )
        )
        return Comparison.from_difference(
            name,
            diff,
            se,
            self.n_users,
            level,
            control_coefficient=beta,
            variance_reduction=reduction,
        )

    def _comparison_name(self, other: PairedEstimate, names) -> str:
        """``"A − B"``, or with ``names`` the models' names, e.g. ``"EASE − pop (DCG@10)"``."""
        if names is None:
            return f"{self.name} − {other.name}"
        if not (
            isinstance(names, tuple) and len(names) == 2 and all(isinstance(n, str) for n in names)
        ):
            raise ValueError(f"names must be a tuple of two model names, got {names!r}")
        if self.name == other.name:
            return f"{names[0]} − {names[1]} ({self.name})"
        return f"{names[0]} {self.name} − {names[1]} {other.name}"

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True, eq=False)
class EstimateResult(PairedEstimate):
    """An estimate over users with everything needed to quantify its uncertainty.

    Attributes
    ----------
    name : str
        Estimator name, e.g. ``"pnDCG@10"``.
    terms : numpy.ndarray, shape (n_users, k)
        Per-user quantities ``x_ku`` whose means make up the value (module docstring); the
        first column is the metric's numerator, e.g. ``DCG_u``.
    exponents : tuple of int
        ``e_k`` (+1 or −1) for each column of ``terms``.
    user_ids : numpy.ndarray
        Row indices (users) of ``y_true`` that were evaluated: those with at least one
        held-out interaction.
    n_excluded_users : int
        Users of ``y_true`` without held-out interactions, left out of the average.
    diagnostics : WeightDiagnostics or None
        For IPS-weighted estimates, the diagnostics of their weights (effective sample size,
        largest weight, share of the largest weights, clipping); None when unweighted.
    clip_selection : ClipSelection or None
        With ``clip="auto"``, the estimate-versus-threshold curve and the threshold SLOPE
        selected (:mod:`recpack_ope.inference.clipping`); None otherwise.
    control : numpy.ndarray or None
        Per-user control variate with expectation 0 under the logging policy (unclipped
        weights), aligned with ``user_ids``: ``Σ_i δ(r_u(i)) · w_ui · e_ui − Σ_r δ(r)`` for
        held-out data with impressions ``e``, and its per-session analogue on feed logs
        (docs/definitions.md, "Impressions and control variates"); None otherwise.
    """

    name: str
    terms: np.ndarray
    exponents: tuple[int, ...]
    user_ids: np.ndarray
    n_excluded_users: int
    diagnostics: WeightDiagnostics | None = None
    clip_selection: ClipSelection | None = None
    control: np.ndarray | None = None

    def __post_init__(self) -> None:
        exponents = self.exponents
        if not (
            isinstance(exponents, tuple)
            and exponents
            and all(not isinstance(e, bool) and e in (1, -1) for e in exponents)
        ):
            raise ValueError(f"exponents must be a non-empty tuple of +1 and -1, got {exponents!r}")
        user_ids = real_array(self.user_ids, "user_ids")
        if user_ids.ndim != 1 or user_ids.dtype.kind not in "iu":
            raise ValueError(
                f"user_ids must be a 1-D integer array, got dtype {user_ids.dtype} and shape "
                f"{user_ids.shape}"
            )
        n_excluded = self.n_excluded_users
        if (
            isinstance(n_excluded, bool)
            or not isinstance(n_excluded, (int, np.integer))
            or n_excluded < 0
        ):
            raise ValueError(f"n_excluded_users must be an integer >= 0, got {shown(n_excluded)}")
        terms = real_array(self.terms, f"terms of {self.name}")
        if terms.size != user_ids.size * len(exponents):
            raise ValueError(
                f"terms of {self.name} have shape {terms.shape}; expected one value per user and "
                f"exponent, ({user_ids.size}, {len(exponents)})"
            )
        terms = terms.astype(np.float64, copy=False).reshape(user_ids.size, len(exponents))
        bad = np.argwhere(~np.isfinite(terms))
        if bad.size:
            u, k = bad[0]
            raise ValueError(
                f"terms of {self.name} are not finite: {terms[u, k]} in column {k} for user "
                f"{user_ids[u]}; check the inputs (e.g. propensities so small that 1/p overflows)"
            )
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "user_ids", user_ids)
        if self.control is not None:
            control = real_array(self.control, "control").astype(np.float64, copy=False)
            if control.shape != (len(self.user_ids),):
                raise ValueError(
                    f"control has shape {control.shape}, expected one value per user "
                    f"({len(self.user_ids)},)"
                )
            object.__setattr__(self, "control", control)

    def _gradient(self) -> np.ndarray:
        """``∂value/∂m_k`` at the observed means, finite even when a numerator mean is 0."""
        means = self.terms.mean(axis=0)
        exps = np.asarray(self.exponents)
        grad = np.empty(means.size)
        for k in range(means.size):
            rest = np.prod(np.delete(means, k) ** np.delete(exps, k))
            grad[k] = exps[k] * means[k] ** (exps[k] - 1) * rest
        return grad

    @property
    def value(self) -> float:
        """The estimate ``Π_k mean(x_k) ** e_k``."""
        return float(np.prod(self.terms.mean(axis=0) ** np.asarray(self.exponents)))

    @property
    def per_user(self) -> np.ndarray:
        """Per-user contributions, whose mean is :attr:`value`: the first term scaled by the
        other terms' factors. For plain means (DCG, unbiased DCG, nDCG) these are the per-user
        metric values; for pnDCG they are ``DCG_u / mean(iDCG)``."""
        return self.terms[:, 0] * self._gradient()[0]

    @property
    def influence(self) -> np.ndarray:
        """Per-user influence values ``z_u`` of the delta method (mean 0)."""
        return (self.terms - self.terms.mean(axis=0)) @ self._gradient()

    def _headline(self) -> str:
        """Value, interval and the users behind them."""
        if self.n_users < 2:
            return f"{self.name} = {self.value:.6g} ({self.n_users} user)"
        lo, hi = self.confidence_interval()
        return (
            f"{self.name} = {self.value:.6g} [95% CI {lo:.6g}, {hi:.6g}] over {self.n_users} "
            f"users ({self.n_excluded_users} without held-out interactions excluded)"
        )

    def __repr__(self) -> str:
        text = self._headline()
        if self.diagnostics is not None:
            flag = "" if self.diagnostics.reliable else "UNRELIABLE: "
            text += f"\n  {flag}weights: {self.diagnostics.summary()}"
        if self.clip_selection is not None:
            text += f"\n  clipping: {self.clip_selection.summary()}"
        return text


@dataclass(frozen=True, eq=False, repr=False)
class LoggedEstimate(EstimateResult):
    """An :class:`EstimateResult` over sessions (trajectories or banners), plus the error of
    Monte Carlo approximations inside it.

    Attributes
    ----------
    approximation_error : float
        Upper bound on the standard deviation that Monte Carlo approximations (exposures of a
        :class:`~recpack_ope.logged.policies.PlackettLuceRanker` with ``method="monte_carlo"``,
        sampled rank marginals of large banners) add to :attr:`value`; 0 when everything is
        exact. It is not part of :attr:`standard_error`, which reflects the sampling of
        sessions only.
    """

    approximation_error: float = 0.0

    def _headline(self) -> str:
        text = (
            super()
            ._headline()
            .replace(" users", " sessions")
            .replace("without held-out interactions", "without reward")
        )
        if self.approximation_error:
            text += f"; Monte Carlo approximation error ≤ {self.approximation_error:.2g}"
        return text


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
    control_coefficient: float | None = None
    variance_reduction: float | None = None

    @classmethod
    def from_difference(
        cls,
        name: str,
        difference: float,
        standard_error: float,
        n_users: int,
        level: float,
        **extra,
    ) -> Comparison:
        """The Student-t interval and two-sided p-value of a paired difference over
        ``n_users`` users (``n_users − 1`` degrees of freedom)."""
        half = _half_width(standard_error, n_users, level)
        return cls(
            name=name,
            difference=difference,
            standard_error=standard_error,
            confidence_interval=(difference - half, difference + half),
            p_value=float(t_test_p_value(difference, standard_error, n_users)),
            level=level,
            n_users=n_users,
            **extra,
        )

    @property
    def p_value_greater(self) -> float:
        """One-sided p-value of H0 "difference ≤ 0" against "difference > 0" (the test of an
        improvement, Jeunen et al. §6.2), Student-t with ``n_users − 1`` degrees of freedom."""
        if self.standard_error > 0:
            return float(stats.t.sf(self.difference / self.standard_error, self.n_users - 1))
        return 0.0 if self.difference > 0 else 1.0

    def __repr__(self) -> str:
        lo, hi = self.confidence_interval
        text = (
            f"{self.name} = {self.difference:.6g} [{self.level:.0%} CI {lo:.6g}, {hi:.6g}], "
            f"p = {self.p_value:.3g} over {self.n_users} paired users"
        )
        if self.control_coefficient is not None:
            text += (
                f"; control variate β = {self.control_coefficient:.4g} removed "
                f"{self.variance_reduction:.0%} of the variance"
            )
        return text
