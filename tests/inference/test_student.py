import numpy as np
from scipy import stats

from recpack_ope.inference._student import t_quantile, t_survival


def test_t_quantile_and_survival_equal_scipy_stats_t():
    """The quantiles and survival values every interval and paired test uses are the
    values of ``scipy.stats.t``, bit for bit, over levels, tails and degrees of freedom from
    1 to beyond a million users."""
    rng = np.random.default_rng(0)
    q = np.r_[rng.random(500), 0.5, 0.975, 0.995, 0.025, 1e-12, 1 - 1e-12]
    df = np.r_[rng.integers(1, 10**7, q.size - 6), 1, 2, 3, 10**9, 5, 7].astype(float)
    assert np.array_equal(t_quantile(q, df), stats.t.ppf(q, df))
    x = np.r_[rng.normal(0, 5, 500), 0.0, np.inf, -np.inf, 40.0, 1e-300, -3.0]
    df = np.r_[rng.integers(1, 10**6, 500), 1, 2, 3, 4, 5, 6].astype(float)
    assert np.array_equal(t_survival(x, df), stats.t.sf(x, df))
    assert t_quantile(0.975, 1) == stats.t.ppf(0.975, 1)
