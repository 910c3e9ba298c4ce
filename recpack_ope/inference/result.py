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

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._validation import check_fraction, real_array, shown
from . import _student
from .clipping import ClipSelection
from .diagnostics import ReliabilityWarning, WeightDiagnostics, named
from .sensitivity import (
    SHOWN_GAMMA,
    ExponentRange,
    SensitivityBounds,
    Weighting,
    check_gamma,
    exponent_range,
    largest_gamma,
)

__all__ = ["PairedEstimate", "EstimateResult", "LoggedEstimate", "Comparison"]


_GAMMA_TICKS = (1, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000)


def _slope(d: np.ndarray, k: np.ndarray) -> float:
    """Least-squares slope of ``d`` on ``k`` (0 when ``k`` does not vary)."""
    centred = k - k.mean()
    spread = float(centred @ centred)
    return float(d @ centred / spread) if spread > 0 else 0.0


def _warn_if_biased_control(control: np.ndarray, name: str) -> None:
    """A reliability warning when the control's mean is significantly non-zero (two-sided
    t-test at the 1 % level): then the propensities are not those of the logging policy."""
    se = _student.standard_error(control, "a control variate")
    p = float(_student.t_test_p_value(control.mean(), se, control.size))
    if p < 0.01:
        warnings.warn(
            f"{named(name)}: the control variate's mean is {control.mean():.3g} (standard error "
            f"{se:.2g}, p = {p:.2g}), not 0: the propensities do not match the logging policy, "
            "so control_variate=True adds a bias; compare without it",
            ReliabilityWarning,
            stacklevel=4,
        )


def _unpaired(estimate, summary) -> str:
    """Why a per-user estimate and a summary from merged moments cannot be compared."""
    return (
        f"cannot pair {estimate.name} with {summary.name}: {summary.name} is known only through "
        "merged moments (e.g. from Spark), whose per-user values stayed with the engine, and a "
        "paired test needs every user's values of both estimates; evaluate both in one pass of "
        "the same engine (both in memory, or both in one Spark call)"
    )


def _weighting(estimate: PairedEstimate) -> Weighting:
    """The estimate's :class:`Weighting`, or an error saying that it has none."""
    weighting = getattr(estimate, "weighting", None)
    if weighting is None:
        raise ValueError(
            f"{estimate.name} is not weighted by inverse propensities: sensitivity to wrong "
            "propensities applies to IPS-weighted estimates (ips_dcg, snips_dcg, ips_pn_dcg, "
            "dr_dcg, logged_dcg, the ranking IPS, cascade_dr, …), not to unweighted ones or "
            "the pseudo-inverse, whose weights are not inverse propensities"
        )
    return weighting


def _sensitivity(name, value, weighting, gamma, level, influence_at) -> SensitivityBounds:
    """The bounds of ``weighting`` at ``gamma``; with ``level`` also the interval whose
    standard errors are taken at the weights attaining each extreme (at the given weights
    where an outer bound has no single attaining point)."""
    gamma = check_gamma(gamma)
    low, high, exact, raw_low, raw_high = weighting.bounds(gamma)
    interval = None
    if level is not None:
        level = check_fraction(level, "level")

        def half(raw) -> float:
            influence = influence_at(weighting.raw if raw is None else raw)
            return _student.mean_half_width(influence, name, level)

        interval = (low - half(raw_low), high + half(raw_high))
    return SensitivityBounds(name, gamma, value, low, high, exact, interval, level)


def _check_search(search, fitted: float) -> tuple[float, float]:
    """The exponents to search: default ``(−1, 2γ̂ + 1)``; two finite numbers around γ̂."""
    if search is None:
        return (-1.0, 2 * fitted + 1)
    try:
        lo, hi = (float(v) for v in search)
    except (TypeError, ValueError):
        raise ValueError(f"search must be two numbers (low, high), got {search!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < fitted < hi):
        raise ValueError(
            f"search must be two finite numbers around the fitted exponent {fitted:.4g}, got "
            f"{search!r}"
        )
    return lo, hi


class PairedEstimate(ABC):
    """Uncertainty and paired comparisons for an estimate known through per-user influence values.

    Subclasses provide ``name``, ``user_ids``, :attr:`value` and :attr:`influence` (mean 0 over
    ``user_ids``); the standard error, interval and paired test follow from those alone, so
    any two estimates over the same users can be compared, whatever their form.

    An estimate over no users has no value: a mean over no users is undefined, so
    :attr:`value` raises a ValueError naming the estimate rather than report 0 or NaN (and
    the standard error, interval and tests, which need at least 2 users, raise too).
    """

    name: str
    user_ids: np.ndarray

    def _check_users(self) -> None:
        """Refuse the value of an estimate over no users (the class docstring's rule)."""
        if self.n_users == 0:
            excluded = getattr(self, "n_excluded_users", 0)
            raise ValueError(
                f"{self.name} has no evaluated user ({excluded} excluded for lack of held-out "
                "interactions or reward): a mean over no users is undefined, so the estimate "
                "has no value"
            )

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
        return _student.standard_error(self.influence, f"a standard error of {self.name}")

    def confidence_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided ``level`` confidence interval for :attr:`value`."""
        half = _student.half_width(self.standard_error, self.n_users, level)
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
            Subtract a multiple of the difference of the two estimates' control variates
            (Δ-OPE, Jeunen & Ustimenko, RecSys 2024, §3; the optimal baseline of Gupta et al.,
            RecSys 2024), cross-fitted (Chernozhukov et al., Econom. J. 2018, §3): with
            per-user influence differences ``d_u`` and control differences ``k_u``
            (expectation 0 under the logging policy), the users are split into two folds at
            random (seed 0), each fold's least-squares coefficient
            ``β̂_f = Σ_{u∈f} d_u (k_u − k̄_f) / Σ_{u∈f} (k_u − k̄_f)²`` is applied to the other
            fold's users, ``Δ̂_CF = Δ̂ − mean_u(β̂_{−f(u)} k_u)``, and the standard error is that
            of the residuals ``d_u − β̂_{−f(u)} k_u``. No user's coefficient depends on its own
            data, so the estimate stays unbiased whenever the control's mean is 0 (unclipped
            weights and the true propensities) and ``variance_reduction`` is measured on users
            the coefficient did not see: it is negative when the control adds variance. Both
            estimates must carry a ``control`` (held-out estimates with ``impressions=``,
            logged DCG). Doubly robust estimates are refused: they stay unbiased with wrong
            propensities, which the control's zero mean needs to be right. A
            :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued when the
            control's mean differs significantly from 0 (two-sided t-test at the 1 % level), a
            sign that the propensities are wrong and the adjustment adds a bias.
        names : tuple of two str, optional
            The two models' names, so the comparison's label says which is which:
            ``("EASE", "popularity")`` labels it ``"EASE − popularity (IPS-DCG@10)"``.

        Returns
        -------
        Comparison
            Difference, its standard error, confidence interval and two-sided p-value; with a
            control variate also ``control_coefficient`` (the mean of the two folds' β̂) and
            ``variance_reduction`` (measured out of fold).
        """
        if not isinstance(other, PairedEstimate):
            raise TypeError(
                f"other must be an estimate (EstimateResult, StratifiedResult, …) to pair with "
                f"{self.name}, got {type(other).__name__}"
            )
        if getattr(other, "user_ids", None) is None:
            raise ValueError(_unpaired(self, other))
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
            robust = [e.name for e in (self, other) if getattr(e, "doubly_robust", False)]
            if robust:
                raise ValueError(
                    f"control_variate=True does not apply to {robust[0]}: a doubly robust "
                    "estimate stays unbiased with wrong propensities, while the control's zero "
                    "mean needs the true ones, so subtracting it would add a bias; compare "
                    "without it"
                )
            if residual.size < 4:
                raise ValueError("a cross-fitted control variate needs at least 4 paired users")
            k = self.control - other.control
            _warn_if_biased_control(k, name)
            fold = np.random.default_rng(0).permutation(k.size) % 2
            betas = [_slope(residual[fold == f], k[fold == f]) for f in (0, 1)]
            adjustment = np.where(fold == 0, betas[1], betas[0]) * k
            plain = float(residual @ residual)
            diff -= float(adjustment.mean())
            residual = residual - (adjustment - adjustment.mean())
            beta = float(np.mean(betas))
            reduction = 1.0 - float(residual @ residual) / plain if plain > 0 else 0.0
        if residual.size < 2:
            raise ValueError("a paired comparison needs at least 2 users")
        # On the residuals scaled by a power of two: squares of values near 1e308 overflow.
        scale = _student.power_of_two_scale(residual)
        scaled = residual / scale
        se = float(np.sqrt(scaled @ scaled / (residual.size - 1) / residual.size)) * scale
        return Comparison.from_difference(
            name,
            diff,
            se,
            self.n_users,
            level,
            control_coefficient=beta,
            variance_reduction=reduction,
            estimates=(self, other),
        )

    def _comparison_name(self, other: PairedEstimate, names) -> str:
        """With ``names`` the models' names, e.g. ``"EASE − pop (DCG@10)"``; without, the two
        estimators (``"DCG@10 − nDCG@10"``) or, for one estimator of two unnamed models,
        ``"DCG@10 difference"``."""
        if names is None:
            if self.name == other.name:
                return f"{self.name} difference"
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
    weighting : Weighting or None
        For IPS-weighted estimates, how the value depends on every propensity's weight, which
        :meth:`sensitivity` perturbs; None when unweighted.
    doubly_robust : bool
        Whether the estimate is doubly robust, which ``compare(control_variate=True)``
        refuses.
    """

    name: str
    terms: np.ndarray
    exponents: tuple[int, ...]
    user_ids: np.ndarray
    n_excluded_users: int
    diagnostics: WeightDiagnostics | None = None
    clip_selection: ClipSelection | None = None
    control: np.ndarray | None = None
    weighting: Weighting | None = None
    doubly_robust: bool = False

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
        self._check_users()
        means = _student.mean(self.terms, axis=0)
        exps = np.asarray(self.exponents)
        grad = np.empty(means.size)
        for k in range(means.size):
            rest = np.prod(np.delete(means, k) ** np.delete(exps, k))
            grad[k] = exps[k] * means[k] ** (exps[k] - 1) * rest
        return grad

    @property
    def value(self) -> float:
        """The estimate ``Π_k mean(x_k) ** e_k``; refused over no users
        (:class:`PairedEstimate`)."""
        self._check_users()
        return float(np.prod(_student.mean(self.terms, axis=0) ** np.asarray(self.exponents)))

    @property
    def per_user(self) -> np.ndarray:
        """Per-user contributions, whose mean is :attr:`value`: the first term scaled by the
        other terms' factors. For plain means (DCG, unbiased DCG, nDCG) these are the per-user
        metric values; for pnDCG they are ``DCG_u / mean(iDCG)``."""
        return self.terms[:, 0] * self._gradient()[0]

    @property
    def influence(self) -> np.ndarray:
        """Per-user influence values ``z_u`` of the delta method (mean 0)."""
        gradient = self._gradient()  # refuses no users before their means are taken
        return (self.terms - _student.mean(self.terms, axis=0)) @ gradient

    def sensitivity(self, gamma: float, level: float | None = None) -> SensitivityBounds:
        """The smallest and largest value of this estimate when every propensity may be off by
        a factor up to ``gamma`` either way (:mod:`recpack_ope.inference.sensitivity`).

        Parameters
        ----------
        gamma : float
            Γ ≥ 1: the true propensities lie in ``[p̂/Γ, Γ·p̂]``; clipping applies to the
            perturbed weights.
        level : float, optional
            Also the interval ``(low − t·se, high + t·se)`` at this confidence level, each
            standard error taken at the propensities that attain that extreme.

        Returns
        -------
        SensitivityBounds
            ``.low`` and ``.high`` (exact for IPS, SNIPS and doubly robust DCG and logged
            DCG; ``exact`` says when they are valid outer bounds instead).

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.metrics import ips_dcg
        >>> from recpack_ope.propensity import LogDiscount
        >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
        >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
        >>> p = np.array([0.5, 1.0, 0.25])
        >>> est = ips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p)
        >>> bounds = est.sensitivity(2.0)
        >>> round(bounds.low, 4), round(bounds.high, 4)
        (0.75, 3.0)
        """
        return _sensitivity(
            self.name, self.value, _weighting(self), gamma, level, self._influence_at
        )

    def _influence_at(self, raw: np.ndarray) -> np.ndarray:
        """Per-user influence values of this estimate at raw inverse weights ``raw``."""
        terms, exponents = self.weighting.terms(raw)
        return EstimateResult(self.name, terms, exponents, self.user_ids, 0).influence

    def _headline(self) -> str:
        """Value, interval and the users behind them."""
        if self.n_users == 0:
            return f"{self.name}: no evaluated user ({self.n_excluded_users} excluded), no value"
        if self.n_users < 2:
            return f"{self.name} = {self.value:.6g} ({self.n_users} user)"
        lo, hi = self.confidence_interval()
        return (
            f"{self.name} = {self.value:.6g} [95% CI {lo:.6g}, {hi:.6g}] over {self.n_users} "
            f"users ({self.n_excluded_users} without held-out interactions excluded)"
        )

    def __repr__(self) -> str:
        text = self._headline()
        if self.weighting is not None and self.n_users >= 2:
            bounds = self.sensitivity(SHOWN_GAMMA)
            text += (
                f"\n  with propensities off by up to ×{SHOWN_GAMMA:g}: "
                f"[{bounds.low:.6g}, {bounds.high:.6g}]"
                + ("" if bounds.exact else " (outer bounds)")
            )
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

    def __repr__(self) -> str:
        # The weight diagnostics count the units they group by as users: here, sessions.
        return super().__repr__().replace(" users", " sessions")


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
    estimates: tuple[PairedEstimate, PairedEstimate] | None = None

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
        half = _student.half_width(standard_error, n_users, level)
        return cls(
            name=name,
            difference=difference,
            standard_error=standard_error,
            confidence_interval=(difference - half, difference + half),
            p_value=float(_student.t_test_p_value(difference, standard_error, n_users)),
            level=level,
            n_users=n_users,
            **extra,
        )

    @property
    def p_value_greater(self) -> float:
        """One-sided p-value of H0 "difference ≤ 0" against "difference > 0" (the test of an
        improvement, Jeunen et al. §6.2), Student-t with ``n_users − 1`` degrees of freedom."""
        if self.standard_error > 0:
            return float(
                _student.t_survival(self.difference / self.standard_error, self.n_users - 1)
            )
        return 0.0 if self.difference > 0 else 1.0

    def sensitivity(self, gamma: float, level: float | None = None) -> SensitivityBounds:
        """The smallest and largest paired difference when every propensity may be off by a
        factor up to ``gamma`` either way; one item's propensity moves both models' terms
        together. Parameters and result as for :meth:`EstimateResult.sensitivity`.

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.metrics import ips_dcg
        >>> from recpack_ope.propensity import LogDiscount
        >>> y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]])
        >>> p = np.array([0.5, 1.0, 0.25])
        >>> a = ips_dcg(y_true, np.eye(3)[[0, 1, 0, 0]], discount=LogDiscount(1), propensity=p)
        >>> b = ips_dcg(y_true, np.eye(3)[[2, 2, 1, 1]], discount=LogDiscount(1), propensity=p)
        >>> bounds = a.compare(b).sensitivity(1.5)
        >>> round(bounds.low, 4), round(bounds.high, 4)
        (-0.5, 1.5833)
        """
        weighting, influence_at = self._perturbable()
        return _sensitivity(self.name, self.difference, weighting, gamma, level, influence_at)

    def robustness(self, level: float | None = None) -> float:
        """Γ*: the largest factor by which every propensity may be off, either way, before
        the verdict can flip.

        Without ``level`` the verdict is the difference's sign: Γ* is where the worst-case
        difference over the box reaches 0. With ``level`` it is the significance of the
        difference: Γ* is the largest Γ at which the worst-case side of the interval
        :meth:`sensitivity` gives at that level still excludes 0 — the extreme minus
        (plus) ``t`` standard errors, the standard error taken at the propensities that
        attain the extreme. Returns 1.0 when the verdict fails at the given propensities
        already, ``inf`` when it holds for propensities off by any factor up to a million.

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.metrics import ips_dcg
        >>> from recpack_ope.propensity import LogDiscount
        >>> y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]])
        >>> p = np.array([0.5, 1.0, 0.25])
        >>> a = ips_dcg(y_true, np.eye(3)[[0, 1, 0, 0]], discount=LogDiscount(1), propensity=p)
        >>> b = ips_dcg(y_true, np.eye(3)[[2, 2, 1, 1]], discount=LogDiscount(1), propensity=p)
        >>> round(a.compare(b).robustness(), 4)  # a − b = (3 w0 − w2) / 4: 6/Γ − 4Γ = 0
        1.2247
        """
        if level is not None:
            level = check_fraction(level, "level")
        weighting, influence_at = self._perturbable()
        if level in self._robustness:
            return self._robustness[level]
        sign = np.sign(self.difference)
        if sign == 0:
            return 1.0

        def holds(gamma: float) -> bool:
            bounds = _sensitivity(self.name, self.difference, weighting, gamma, level, influence_at)
            low, high = (bounds.low, bounds.high) if level is None else bounds.interval
            return bool(low > 0) if sign > 0 else bool(high < 0)

        self._robustness[level] = largest_gamma(holds)
        return self._robustness[level]

    @cached_property
    def _robustness(self) -> dict:
        """Γ* already found, by level (None for the sign)."""
        return {}

    def exponent_range(
        self, model, level: float | None = None, search: tuple[float, float] | None = None
    ) -> ExponentRange:
        """The power-law exponents over which the verdict holds, for estimates computed with a
        fitted :class:`~recpack_ope.propensity.PowerLawPropensity`: the comparison is
        recomputed with the propensities the model gives at every exponent γ
        (``propensity_at``), and the connected range around the fitted γ̂ where the
        difference keeps its sign (with ``level``: stays significant) is returned.

        Parameters
        ----------
        model : PowerLawPropensity
            The fitted model whose ``propensity_`` the estimates used.
        level : float, optional
            Require significance at this confidence level rather than only the sign.
        search : tuple of two floats, optional
            The exponents searched; default ``(−1, 2γ̂ + 1)``: propensity exponents
            ``(γ + 1)/2`` from 0 (all items equal, the unweighted estimator) to twice the
            fitted one.

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.metrics import ips_dcg
        >>> from recpack_ope.propensity import LogDiscount, PowerLawPropensity
        >>> model = PowerLawPropensity(xmin=1).fit(np.repeat(np.eye(4), [40, 9, 3, 1], axis=0))
        >>> y = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [1, 0, 0, 1]])
        >>> a = ips_dcg(y, np.eye(4)[[0, 1, 0, 0]], discount=LogDiscount(1), propensity=model)
        >>> b = ips_dcg(y, np.eye(4)[[2, 3, 1, 3]], discount=LogDiscount(1), propensity=model)
        >>> found = a.compare(b).exponent_range(model)
        >>> round(found.low, 3), round(found.high, 3), round(2 * model.gamma_ + 1, 3)
        (-1.0, 3.889, 3.889)
        """
        if level is not None:
            level = check_fraction(level, "level")
        if not callable(getattr(model, "propensity_at", None)) or not hasattr(model, "gamma_"):
            raise TypeError(
                "model must be a fitted PowerLawPropensity (with propensity_at and gamma_), got "
                f"{type(model).__name__}"
            )
        weighting, influence_at = self._perturbable()
        if weighting.units != "item":
            raise ValueError(
                "exponent_range needs estimates computed with per-item propensities of the "
                f"model; these have one propensity per {weighting.units}"
            )
        fitted = float(model.gamma_)
        search = _check_search(search, fitted)
        nominal = 1.0 / model.propensity_at(fitted)
        used = np.unique(
            np.concatenate(
                [f.unit for f in (weighting.numerator, weighting.kept, weighting.denominator) if f]
            )
        )
        if nominal.shape != weighting.raw.shape or not np.allclose(
            nominal[used], weighting.raw[used], rtol=1e-9
        ):
            raise ValueError(
                "the estimates were not computed with this model's propensities: pass the "
                "PowerLawPropensity they were given as propensity="
            )
        sign = np.sign(self.difference)

        def holds(gamma: float) -> bool:
            raw = 1.0 / model.propensity_at(gamma)
            value = weighting.value(raw)
            if level is not None:
                influence = influence_at(raw)
                half = _student.mean_half_width(influence, self.name, level)
                value = value - half if sign > 0 else value + half
            return bool(sign * value > 0)

        return exponent_range(holds, fitted, search, self.name)

    def plot_sensitivity(self, gammas=None, level: float = 0.95, ax=None):
        """Draw the paired difference's bounds against Γ: the band of the worst and best
        case (:meth:`sensitivity`), the wider band of their ``level`` interval, zero, and the
        two Γ* of :meth:`robustness`.

        Parameters
        ----------
        gammas : array_like, optional
            The Γ values to draw; by default 60 from 1 to twice the sign's Γ* (at least 4,
            at most 1,000), spaced evenly on a log scale.
        level : float
            Confidence level of the outer band and of the second Γ*.
        ax : matplotlib Axes, optional
            Where to draw; a new figure by default.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from .._plots import axes

        level = check_fraction(level, "level")
        stars = self.robustness(), self.robustness(level)
        if gammas is None:
            top = min(max(4.0, 2 * stars[0]), 1e3)
            gammas = np.geomspace(1.0, top, 60)
        gammas = np.asarray(gammas, dtype=float)
        ax = axes(ax, "Comparison.plot_sensitivity", figsize=(6, 3.5))
        bounds = [self.sensitivity(g, level) for g in gammas]
        low, high = (np.array([getattr(b, side) for b in bounds]) for side in ("low", "high"))
        outer = np.array([b.interval for b in bounds])
        ax.fill_between(
            gammas,
            outer[:, 0],
            outer[:, 1],
            color="C0",
            alpha=0.15,
            label=f"{level:.0%} interval of the extremes",
        )
        ax.plot(gammas, low, color="C0", label="smallest difference")
        ax.plot(gammas, high, color="C0", ls="--", label="largest difference")
        ax.axhline(0.0, color="black", lw=0.8)
        if gammas.min() <= SHOWN_GAMMA <= gammas.max():
            ax.axvline(SHOWN_GAMMA, color="grey", ls="--", lw=0.8, label=f"Γ₀ = {SHOWN_GAMMA:g}")
        for star, style, what in zip(
            stars, (":", "-."), ("sign", f"{level:.0%} significance"), strict=True
        ):
            # Γ* = 1 means the verdict fails at the given propensities: nothing to mark.
            if 1 < star <= gammas.max():
                ax.axvline(star, color="C3", ls=style, label=f"Γ* ({what}) = {star:.3g}")
        ax.set_xscale("log")
        ticks = [t for t in _GAMMA_TICKS if gammas.min() <= t <= gammas.max()]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("Γ: propensities off by up to this factor either way")
        ax.set_ylabel("difference" + ("" if all(b.exact for b in bounds) else " (outer bounds)"))
        ax.set_title(self.name, fontsize=9)
        ax.legend(fontsize=7)
        ax.figure.tight_layout()
        return ax

    def _perturbable(self):
        """The weighting of the paired difference and its influence values at any weights
        (built once per comparison)."""
        return self._pair_weighting

    @cached_property
    def _pair_weighting(self):
        if self.estimates is None:
            raise ValueError(
                f"{self.name} was not made by compare() of two estimates: there are no weights "
                "to perturb"
            )
        if self.control_coefficient is not None:
            raise ValueError(
                "sensitivity bounds apply to the plain paired difference: compare without "
                "control_variate=True"
            )
        a, b = self.estimates
        weighting = _weighting(a).minus(_weighting(b))

        def influence_at(raw: np.ndarray) -> np.ndarray:
            return a._influence_at(raw) - b._influence_at(raw)

        return weighting, influence_at

    @cached_property
    def _robustness_shown(self) -> str:
        """``Γ* …`` for the repr, when the comparison can be perturbed."""
        if self.estimates is None or self.control_coefficient is not None:
            return ""
        if any(getattr(e, "weighting", None) is None for e in self.estimates):
            return ""
        try:
            sign, significance = self.robustness(), self.robustness(self.level)
        except ValueError:
            return ""
        if self.difference == 0:
            return ""
        text = f"; its sign survives propensities off by up to ×{sign:.3g}"
        if significance > 1:
            return text + f", its {self.level:.0%} significance up to ×{significance:.3g}"
        return text + f" (not significant at {self.level:.0%})"

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
        return text + self._robustness_shown
