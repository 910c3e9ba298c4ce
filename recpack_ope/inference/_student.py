"""Student-t intervals and tests over users: every interval and paired test of the package
uses ``n − 1`` degrees of freedom over ``n`` users (the result module's docstring)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from .._validation import check_fraction


def standard_error(values: np.ndarray, what: str) -> float:
    """Normal-theory standard error of a mean of per-user values (influence values, or any
    quantity observed once per user); ``what`` names it in the error for fewer than 2 users."""
    if values.size < 2:
        raise ValueError(f"{what} needs at least 2 users, got {values.size}")
    return float(values.std(ddof=1) / np.sqrt(values.size))


def half_width(se: float, n_users: int, level: float) -> float:
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


def mean_half_width(values: np.ndarray, what: str, level: float) -> float:
    """Half-width of the ``level`` Student-t interval of the mean of per-user ``values``."""
    return half_width(standard_error(values, what), values.size, level)
