"""Intervals and paired comparisons: scipy for means, Monte Carlo coverage for the ratios."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_case
from scipy import stats

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.inference.result import EstimateResult
from recpack_ope.metrics.dcg import dcg, ndcg, pn_dcg, snips_dcg
from recpack_ope.propensity.discount import LogDiscount


@pytest.fixture(scope="module")
def two_models():
    rng = np.random.default_rng(5)
    y, s = random_case(rng, n_users=80, n_items=20, graded=True)
    s2 = s + rng.normal(0, 0.3, s.shape)
    return y, s, s2


def test_mean_estimator_interval_equals_scipy_t_interval(two_models):
    y, s, _ = two_models
    r = ndcg(y, s, discount=LogDiscount(5))
    v = r.per_user
    for level in (0.9, 0.95, 0.99):
        lo, hi = stats.t.interval(level, v.size - 1, loc=v.mean(), scale=stats.sem(v))
        assert r.confidence_interval(level) == pytest.approx((lo, hi), abs=1e-12)


def test_paired_comparison_equals_scipy_ttest_rel(two_models):
    y, s, s2 = two_models
    a, b = dcg(y, s, discount=LogDiscount(5)), dcg(y, s2, discount=LogDiscount(5))
    c = a.compare(b)
    ref = stats.ttest_rel(a.per_user, b.per_user)
    assert c.difference == pytest.approx(a.value - b.value, abs=1e-15)
    assert c.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert c.difference / c.standard_error == pytest.approx(ref.statistic, rel=1e-9)
    d = a.per_user - b.per_user
    lo, hi = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    assert c.confidence_interval == pytest.approx((lo, hi), abs=1e-12)
    same = a.compare(a)
    assert same.difference == 0 and same.p_value == 1.0


def test_ratio_intervals_cover_at_nominal_rate():
    """Delta-method intervals for pnDCG and self-normalised DCG over 1,000 independent data
    sets of 300 users drawn from one population. The population value is the ratio of the
    expectations, approximated by one data set of 300,000 users. Coverage must be 95 % within
    3 binomial standard errors (√(.95·.05/1000) ≈ 0.007)."""
    rng = np.random.default_rng(9)
    n_items, disc = 12, LogDiscount(4)
    scores = np.tile(np.arange(n_items, 0, -1, dtype=float), (1, 1))
    base_rate = np.linspace(0.45, 0.03, n_items)
    propensity = np.linspace(1.0, 0.2, n_items)

    def draw(n_users):
        y = (rng.random((n_users, n_items)) < base_rate).astype(float)
        y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0
        return sp.csr_matrix(y), np.repeat(scores, n_users, axis=0)

    big_y, big_s = draw(300_000)
    truth_pn = pn_dcg(big_y, big_s, discount=disc).value
    truth_sn = snips_dcg(big_y, big_s, discount=disc, propensity=propensity).value
    hits_pn = hits_sn = 0
    reps = 1000
    for _ in range(reps):
        y, s = draw(300)
        lo, hi = pn_dcg(y, s, discount=disc).confidence_interval()
        hits_pn += lo <= truth_pn <= hi
        lo, hi = snips_dcg(y, s, discount=disc, propensity=propensity).confidence_interval()
        hits_sn += lo <= truth_sn <= hi
    tol = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert abs(hits_pn / reps - 0.95) < tol
    assert abs(hits_sn / reps - 0.95) < tol


def test_per_user_contributions_average_to_value(two_models):
    y, s, _ = two_models
    r = pn_dcg(y, s, discount=LogDiscount(5))
    assert r.per_user.mean() == pytest.approx(r.value, rel=1e-12)
    assert r.influence.mean() == pytest.approx(0.0, abs=1e-12)
    assert float(r) == r.value
    assert "pnDCG@5 = " in repr(r) and "over 80 users" in repr(r)


def test_comparisons_need_the_same_users(two_models):
    y, s, _ = two_models
    a = dcg(y, s, discount=LogDiscount(5))
    b = dcg(y[:40], s[:40], discount=LogDiscount(5))
    with pytest.raises(ValueError, match="evaluated on different users"):
        a.compare(b)
    with pytest.raises(ValueError, match=r"level must lie in \(0, 1\)"):
        a.confidence_interval(95)
    one = dcg(sp.csr_matrix(np.array([[1.0, 0]])), np.array([[0.5, 0.1]]), discount=LogDiscount(1))
    with pytest.raises(ValueError, match="needs at least 2 users, got 1"):
        one.confidence_interval()


def test_compare_labels_name_the_two_models():
    users = np.arange(4)
    a = EstimateResult("DCG@10", np.array([[1.0], [2.0], [3.0], [4.0]]), (1,), users, 0)
    b = EstimateResult("DCG@10", np.array([[0.0], [2.0], [1.0], [1.0]]), (1,), users, 0)
    assert a.compare(b).name == "DCG@10 difference"
    assert a.compare(b, names=("EASE", "kNN")).name == "EASE − kNN (DCG@10)"
    c = EstimateResult("nDCG@10", np.array([[0.0], [2.0], [1.0], [1.0]]), (1,), users, 0)
    assert a.compare(c, names=("EASE", "kNN")).name == "EASE DCG@10 − kNN nDCG@10"
    assert a.compare(c).name == "DCG@10 − nDCG@10"
    for bad in (("EASE",), ["EASE", "kNN"], ("EASE", 3)):
        with pytest.raises(ValueError, match="names must be a tuple of two model names"):
            a.compare(b, names=bad)


D = LogDiscount(3)


Y = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])


S = np.array([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.1, 0.4], [0.3, 0.2, 0.9, 0.1]])


ESTIMATE = dcg(Y, S, discount=D)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: ESTIMATE.confidence_interval("0.9"),
            r"level.*got '0.9'",
        ),
        (lambda: ESTIMATE.compare(3), "other must be an estimate"),
        (
            lambda: EstimateResult("x", np.ones(2), (2,), np.arange(2), 0),
            r"exponents.*got \(2,\)",
        ),
        (
            lambda: EstimateResult("x", np.ones(2), (1,), np.arange(2), -1),
            "n_excluded_users.*-1",
        ),
        (
            lambda: EstimateResult("x", np.array([1.0, np.inf]), (1,), np.array([4, 7]), 0),
            "terms of x are not finite: inf in column 0 for user 7",
        ),
        (
            lambda: EstimateResult("x", np.ones(3), (1,), np.arange(2), 0),
            r"terms of x have shape \(3,\); expected .* \(2, 1\)",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_cross_fitted_control_variate_by_hand():
    rng = np.random.default_rng(0)
    x, y, k1, k2 = (rng.standard_normal(50) for _ in range(4))
    a = EstimateResult("a", x + k1, (1,), np.arange(50), 0, control=k1)
    b = EstimateResult("b", y, (1,), np.arange(50), 0, control=k2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # this control's mean is compatible with 0
        c = a.compare(b, control_variate=True)
    d, k = (x + k1) - y, k1 - k2
    fold = np.random.default_rng(0).permutation(50) % 2
    # Each fold's least-squares slope (numpy's polyfit, an independent route) applied to the
    # other fold's users.
    slopes = [np.polyfit(k[fold == f], d[fold == f], 1)[0] for f in (0, 1)]
    applied = np.where(fold == 0, slopes[1], slopes[0]) * k
    assert c.control_coefficient == pytest.approx(np.mean(slopes))
    assert c.difference == pytest.approx(d.mean() - applied.mean())
    resid = (d - applied) - (d - applied).mean()
    assert c.standard_error == pytest.approx(np.sqrt(resid @ resid / 49 / 50))
    assert c.variance_reduction == pytest.approx(1 - resid.var() / d.var())
    with pytest.raises(ValueError, match="control_variate=True needs a control"):
        a.compare(EstimateResult("c", y, (1,), np.arange(50), 0), control_variate=True)
    with pytest.raises(ValueError, match="at least 4 paired users"):
        EstimateResult("a", x[:3], (1,), np.arange(3), 0, control=k1[:3]).compare(
            EstimateResult("b", y[:3], (1,), np.arange(3), 0, control=k2[:3]),
            control_variate=True,
        )


def test_control_variate_reports_a_measured_reduction_where_the_control_does_not_help():
    """A control unrelated to the difference cannot reduce its variance; the in-sample R² of
    the least-squares fit is positive all the same (its mean is about 1/n). Over 2,000
    replicates of 60 users, the out-of-fold reduction must average ≤ 0 and the replicate
    variance of the adjusted difference must not be smaller than the plain one's (the
    standard error of a variance ratio over 2,000 replicates is about 3 %)."""
    rng = np.random.default_rng(5)
    plain, adjusted, reported = [], [], []
    for _ in range(2000):
        d, k = rng.standard_normal(60), rng.standard_normal(60)
        a = EstimateResult("a", d, (1,), np.arange(60), 0, control=k)
        b = EstimateResult("b", np.zeros(60), (1,), np.arange(60), 0, control=np.zeros(60))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # some replicates' controls look biased by chance
            c = a.compare(b, control_variate=True)
        plain.append(d.mean())
        adjusted.append(c.difference)
        reported.append(c.variance_reduction)
    assert np.mean(reported) < 0
    assert np.var(adjusted) / np.var(plain) > 1 - 3 * 0.03


def test_control_variate_refuses_doubly_robust_and_warns_on_a_biased_control():
    rng = np.random.default_rng(1)
    d, k = rng.standard_normal(200), rng.standard_normal(200)
    dr = EstimateResult("DR-DCG@10", d, (1,), np.arange(200), 0, control=k, doubly_robust=True)
    other = EstimateResult("DR-DCG@10", d[::-1], (1,), np.arange(200), 0, control=k[::-1])
    with pytest.raises(ValueError, match="does not apply to DR-DCG@10"):
        dr.compare(other, control_variate=True)
    # A control whose mean is far from 0 (propensities that do not match the logging policy).
    a = EstimateResult("a", d, (1,), np.arange(200), 0, control=k + 1.0)
    b = EstimateResult("b", d[::-1], (1,), np.arange(200), 0, control=np.zeros(200))
    with pytest.warns(ReliabilityWarning, match="control variate's mean is"):
        a.compare(b, control_variate=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.compare(b)


def test_an_estimate_over_no_users_has_no_value():
    empty = EstimateResult("IPS-DCG@5", np.zeros((0, 1)), (1,), np.zeros(0, dtype=int), 3)
    with pytest.raises(ValueError, match=r"IPS-DCG@5 has no evaluated user \(3 excluded"):
        _ = empty.value
    for statistic in ("standard_error", "influence", "per_user"):
        with pytest.raises(ValueError, match="IPS-DCG@5 has no evaluated user"):
            getattr(empty, statistic)
    assert repr(empty) == "IPS-DCG@5: no evaluated user (3 excluded), no value"


def test_a_paired_comparison_near_the_float_limit_equals_the_rescaled_one():
    # Means and squared deviations of values near 1e308 overflow; the estimate, its standard
    # error and the paired test must not. Divided by 1e300 (far from the limit) the same
    # comparison is scipy's paired t-test.
    rng = np.random.default_rng(0)
    big = rng.random((30, 2)) * 0.8e308 + np.array([0.0, 0.05e308])
    a, b = (EstimateResult("m", big[:, k], (1,), np.arange(30), 0) for k in (0, 1))
    assert a.value == pytest.approx((big[:, 0] / 1e300).mean() * 1e300, rel=1e-14)
    assert a.standard_error == pytest.approx(stats.sem(big[:, 0] / 1e300) * 1e300, rel=1e-12)
    comparison = a.compare(b)
    small = big / 1e300
    assert comparison.p_value == pytest.approx(
        stats.ttest_rel(small[:, 0], small[:, 1]).pvalue, rel=1e-10
    )
    assert comparison.difference == pytest.approx((small[:, 0] - small[:, 1]).mean() * 1e300)
