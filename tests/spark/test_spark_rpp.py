"""``recpack_ope.spark.rpp``: :func:`win_rates` equals the in-memory
:func:`recpack_ope.metrics.win_rates` (means to 1e-12 relative, standard errors and the paired
t-test's p-value to 1e-9)."""

import math

from scipy import stats

from recpack_ope import metrics as core_metrics
from recpack_ope import spark as rs


def test_win_rates_equal_in_memory(world, close):
    ours = rs.win_rates(world["held"], world["frames"], weighting="dcg", n_partitions=16)
    theirs = core_metrics.win_rates(world["y_true"], world["scores"], weighting="dcg")
    for m, name in enumerate(theirs.names):
        assert ours[name].n_users == theirs.per_user.shape[0]
        assert ours[name].n_excluded_users == theirs.n_excluded_users
        close(ours[name].value, theirs.means[m], 1e-12)
        se = theirs.per_user[:, m].std(ddof=1) / math.sqrt(theirs.per_user.shape[0])
        close(ours[name].standard_error, se, 1e-9)
    diff = theirs.per_user[:, 0] - theirs.per_user[:, 1]
    close(
        ours["m0"].compare(ours["m1"]).p_value,
        stats.ttest_rel(theirs.per_user[:, 0], theirs.per_user[:, 1]).pvalue,
        1e-9,
    )
    close(ours["m0"].compare(ours["m1"]).difference, diff.mean(), 1e-12)
