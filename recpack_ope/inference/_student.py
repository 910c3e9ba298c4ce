"""Student-t intervals and tests over users: every interval and paired test of the package
uses ``n − 1`` degrees of freedom over ``n`` users (the result module's docstring)."""

from __future__ import annotations

import numpy as np

from .._validation import check_fraction


def t_quantile(q, df):
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom (elementwise); the package's
    Student-t quantiles and p-values all come from here and :func:`t_survival`. They are
    scipy.special's functions behind ``scipy.stats.t.ppf`` and ``t.sf``, which give the same
    values: scipy.stats alone takes longer to import than numpy and scipy.sparse."""
    from scipy import special

    return special.stdtrit(df, q)


def t_survival(x, df):
    """Survival function ``P(T > x)`` of Student's t with ``df`` degrees of freedom
    (elementwise)."""
    from scipy import special

    return special.stdtr(df, np.negative(x))


def standard_error(values: np.ndarray, what: str) -> float:
    """Normal-theory standard error of a mean of per-user values (influence values, or any
    quantity observed once per user); ``what`` names it in the error for fewer than 2 users."""
    if values.size < 2:
        raise ValueError(f"{what} needs at least 2 users, got {values.size}")
    scale = power_of_two_scale(values)
    return float((values / scale).std(ddof=1) / np.sqrt(values.size) * scale)


def power_of_two_scale(values: np.ndarray) -> float:
    """The largest power of two at most the largest ``|value|`` (1 for all zeros or non-finite
    values, which the callers refuse). Dividing by it is exact, but for values below 2^-1021
    of the largest (negligible next to it), and leaves values in (−2, 2), whose means over
    users, pairwise differences and squares cannot overflow float64 as those of values near
    1e308 do; means, standard deviations and t statistics scale back exactly.

    Examples
    --------
    >>> power_of_two_scale(np.array([3.0, -1e308])) == 2.0**1023
    True
    """
    with np.errstate(invalid="ignore"):
        largest = float(np.max(np.abs(values), initial=0.0))
    if not (np.isfinite(largest) and largest > 0):
        return 1.0
    return float(np.ldexp(1.0, np.frexp(largest)[1] - 1))


def mean(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``values.mean(axis)`` computed on the values divided by :func:`power_of_two_scale`, so
    that the sum of values near the float limit does not overflow.

    Examples
    --------
    >>> float(mean(np.array([1e308, 1.5e308])))
    1.25e+308
    """
    scale = power_of_two_scale(values)
    return (values / scale).mean(axis=axis) * scale


def half_width(se: float, n_users: int, level: float) -> float:
    """Half-width of the two-sided Student-t interval with ``n_users − 1`` degrees of freedom."""
    level = check_fraction(level, "level")
    return float(t_quantile(0.5 + level / 2, n_users - 1) * se)


def t_test_p_value(difference, standard_error, n_users: int):
    """Two-sided Student-t p-value of ``difference`` / ``standard_error`` with ``n_users − 1``
    degrees of freedom (elementwise). Without spread the test is decided by the difference
    itself: 1 when it is 0, else 0."""
    difference, standard_error = np.asarray(difference, float), np.asarray(standard_error, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * t_survival(np.abs(difference) / standard_error, n_users - 1)
    return np.where(standard_error > 0, p, np.where(difference == 0, 1.0, 0.0))


def mean_half_width(values: np.ndarray, what: str, level: float) -> float:
    """Half-width of the ``level`` Student-t interval of the mean of per-user ``values``."""
    return half_width(standard_error(values, what), values.size, level)
