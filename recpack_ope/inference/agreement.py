"""Statistics for comparing metrics across a pool of models.

* :func:`agreement`: Pearson r, Kendall τ and the pairwise disagreement probability between
  two metrics' values for the same models (Jeunen et al. KDD'24, Appendix A / Figure 2).
* :func:`disagreement_probability`: the share of model pairs that one metric orders opposite
  to the other ("when randomly choosing two observations, the empirical probability of nDCG
  inverting the ordering implied by DCG").
* :func:`steiger_test`: Steiger's (1980) test for the difference of two dependent
  correlations that share one variable, used by Jadidinejad et al. (TOIS'21, §6, Fig. 2) to
  ask whether evaluation method Z tracks ground truth X better than method Y does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import real_array, shown

__all__ = [
    "MetricAgreement",
    "agreement",
    "disagreement_probability",
    "SteigerResult",
    "steiger_z",
    "steiger_test",
]

#: Steiger's test's correlations: method → the scipy.stats function computing it.
_CORRELATIONS = {"pearson": "pearsonr", "kendall": "kendalltau"}


def _aligned(a, b, names: tuple[str, str]):
    """``b`` in the order of ``a`` when both are pandas Series labelled by model: values are
    paired by label, never by position. Repeated or unmatched labels are refused."""
    if not all(hasattr(v, "index") and hasattr(v, "reindex") and np.ndim(v) == 1 for v in (a, b)):
        return a, b
    for name, v in zip(names, (a, b), strict=True):
        repeated = v.index[v.index.duplicated()]
        if repeated.size:
            raise ValueError(
                f"{name} metric vector labels model {shown(repeated[0])} more than once"
            )
    for lacking, (name, v, other) in zip(
        names[::-1], ((names[0], a, b), (names[1], b, a)), strict=True
    ):
        unmatched = v.index[~v.index.isin(other.index)]
        if unmatched.size:
            raise ValueError(
                f"the metric vectors label different models: the {lacking} metric vector has "
                f"no model {shown(unmatched[0])}, which the {name} has"
            )
    return a, b.reindex(a.index)


def _paired_vectors(
    a, b, min_size: int = 2, names: tuple[str, str] = ("first", "second")
) -> tuple[np.ndarray, np.ndarray]:
    """Two metrics' values for the same models as float arrays (pandas Series aligned by
    label), finite and of equal length."""
    a, b = _aligned(a, b, names)
    x = real_array(a, f"{names[0]} metric vector").astype(np.float64)
    y = real_array(b, f"{names[1]} metric vector").astype(np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"metric vectors must be 1-D of equal length, got {x.shape} and {y.shape}")
    if x.size < min_size:
        raise ValueError(f"need at least {min_size} models, got {x.size}")
    for name, v in zip(names, (x, y), strict=True):
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            raise ValueError(f"{name} metric vector has {float(v[bad[0]])} at model {bad[0]}")
    return x, y


def disagreement_probability(a, b) -> float:
    """Share of model pairs that metric ``b`` orders opposite to metric ``a``.

    Counts unordered pairs ``{j, k}`` with ``(a_j − a_k)(b_j − b_k) < 0`` over all
    ``M(M−1)/2`` pairs; pairs tied under either metric are not inversions.

    Parameters
    ----------
    a, b : array_like, shape (M,)
        Values of two metrics for the same M models.

    Returns
    -------
    float
        Empirical probability that a random pair of models is inverted.
    """
    x, y = _paired_vectors(a, b)
    inverted = 0
    # Blocks of rows keep memory at O(block × M) for large pools.
    for start in range(0, x.size, 1024):
        dx = np.sign(x[start : start + 1024, None] - x[None, :])
        dy = np.sign(y[start : start + 1024, None] - y[None, :])
        inverted += int(np.count_nonzero(dx * dy < 0))
    return inverted / (x.size * (x.size - 1))


@dataclass(frozen=True)
class MetricAgreement:
    """How closely two metrics agree on a pool of models."""

    pearson: float
    pearson_p: float
    kendall: float
    kendall_p: float
    disagreement: float
    n_models: int


def agreement(a, b) -> MetricAgreement:
    """Pearson r, Kendall τ-b (with p-values) and disagreement probability of two metrics.

    Parameters
    ----------
    a, b : array_like, shape (M,)
        Values of two metrics (e.g. DCG@100 and nDCG@100) for the same M models.

    Returns
    -------
    MetricAgreement
        The correlations are NaN, with scipy's ``ConstantInputWarning``, when either metric is
        constant over the models (they are undefined); the disagreement probability is
        defined for any values. Two pandas Series are paired by their model labels.
    """
    # imported on use: start-up time (docs/performance.md)
    from scipy import stats

    x, y = _paired_vectors(a, b, min_size=3)
    r, r_p = stats.pearsonr(x, y)
    tau, tau_p = stats.kendalltau(x, y)
    return MetricAgreement(
        pearson=float(r),
        pearson_p=float(r_p),
        kendall=float(tau),
        kendall_p=float(tau_p),
        disagreement=disagreement_probability(x, y),
        n_models=int(x.size),
    )


@dataclass(frozen=True)
class SteigerResult:
    """Steiger's Z for ``corr(truth, y)`` vs ``corr(truth, z)``."""

    r_truth_y: float
    r_truth_z: float
    r_y_z: float
    z: float
    p_value: float
    n: int


def steiger_z(
    r_xy: float, r_xz: float, r_yz: float, n: int, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Steiger's (1980) Z for two dependent correlations with a common variable X.

    Fisher-transform both correlations and compare them with the asymptotic covariance of
    Steiger (1980, Eq. 11–15), evaluated at the pooled ``r̄ = (r_xy + r_xz)/2`` under H0::

        ψ = r_yz (1 − 2 r̄²) − ½ r̄² (1 − 2 r̄² − r_yz²)
        c = ψ / (1 − r̄²)²
        Z = (atanh r_xy − atanh r_xz) · √(n − 3) / √(2 − 2c)

    Parameters
    ----------
    r_xy, r_xz : float
        The two correlations with the common variable X (e.g. ground truth).
    r_yz : float
        Correlation between Y and Z.
    n : int
        Number of observations (models) the correlations were computed on; > 3.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"`` tests ``ρ_xy > ρ_xz``.

    Returns
    -------
    (z, p_value) : tuple of float
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 3:
        raise ValueError(f"Steiger's test needs an integer n > 3 observations, got {n!r}")
    for name, r in (("r_xy", r_xy), ("r_xz", r_xz), ("r_yz", r_yz)):
        if (
            isinstance(r, bool)
            or not isinstance(r, (int, float, np.integer, np.floating))
            or not -1.0 < r < 1.0
        ):
            raise ValueError(f"{name} must lie strictly inside (-1, 1), got {r!r}")
    rbar2 = ((r_xy + r_xz) / 2) ** 2
    psi = r_yz * (1 - 2 * rbar2) - 0.5 * rbar2 * (1 - 2 * rbar2 - r_yz**2)
    c = psi / (1 - rbar2) ** 2
    z = (np.arctanh(r_xy) - np.arctanh(r_xz)) * np.sqrt(n - 3) / np.sqrt(2 - 2 * c)
    # imported on use: start-up time (docs/performance.md)
    from scipy import stats

    if alternative == "two-sided":
        p = 2 * stats.norm.sf(abs(z))
    elif alternative == "greater":
        p = stats.norm.sf(z)
    elif alternative == "less":
        p = stats.norm.cdf(z)
    else:
        raise ValueError(
            f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}"
        )
    return float(z), float(p)


def steiger_test(
    truth, y, z, *, method: str = "kendall", alternative: str = "two-sided"
) -> SteigerResult:
    """Does metric ``y`` or metric ``z`` correlate better with ``truth``?

    Jadidinejad et al. (TOIS'21, §6) compare Kendall's τ of two offline evaluation methods
    with the open-loop (ground-truth) evaluation of the same models this way.

    Parameters
    ----------
    truth, y, z : array_like, shape (M,)
        Ground-truth values and two metrics' values for the same M models.
    method : {"kendall", "pearson"}
        Correlation coefficient plugged into :func:`steiger_z`.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"`` tests ``corr(truth, y) > corr(truth, z)``.

    Returns
    -------
    SteigerResult
    """
    if method not in _CORRELATIONS:
        raise ValueError(f"method must be one of {sorted(_CORRELATIONS)}, got {method!r}")
    t, a = _paired_vectors(truth, y, min_size=4, names=("truth", "y"))
    _, b = _paired_vectors(truth, z, min_size=4, names=("truth", "z"))
    # imported on use: start-up time (docs/performance.md)
    from scipy import stats

    correlation = getattr(stats, _CORRELATIONS[method])
    r_ty, r_tz, r_yz = (correlation(*pair)[0] for pair in ((t, a), (t, b), (a, b)))
    for label, r in (("truth and y", r_ty), ("truth and z", r_tz), ("y and z", r_yz)):
        # A perfect correlation computed in floating point can miss ±1 by one rounding; its
        # Fisher transform is infinite either way, so Steiger's Z is undefined.
        if not abs(r) < 1 - 1e-12:
            raise ValueError(
                f"the {method} correlation of {label} is {r!r}: Steiger's test needs "
                "correlations strictly inside (-1, 1) (a constant or perfectly (anti-)correlated "
                "metric has none)"
            )
    stat, p = steiger_z(r_ty, r_tz, r_yz, t.size, alternative)
    return SteigerResult(
        r_truth_y=float(r_ty),
        r_truth_z=float(r_tz),
        r_y_z=float(r_yz),
        z=stat,
        p_value=p,
        n=int(t.size),
    )
