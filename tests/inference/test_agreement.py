"""Metric agreement, disagreement probability and Steiger's test."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from recpack_ope.inference.agreement import (
    agreement,
    disagreement_probability,
    steiger_test,
    steiger_z,
)


def test_disagreement_probability_by_hand_and_brute_force():
    # one inverted pair (models 1, 2) out of 6
    assert disagreement_probability([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(1 / 6)
    assert disagreement_probability([1, 2, 3], [3, 2, 1]) == 1.0
    # ties are not inversions
    assert disagreement_probability([1, 1, 2], [2, 1, 3]) == 0.0
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=60), rng.normal(size=60)
    b[::7] = b[0]
    inverted = sum(
        (a[j] - a[k]) * (b[j] - b[k]) < 0 for j, k in itertools.combinations(range(60), 2)
    )
    assert disagreement_probability(a, b) == pytest.approx(inverted / (60 * 59 / 2), abs=1e-15)


def test_agreement_reports_pearson_kendall_and_disagreement():
    a, b = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    m = agreement(a, b)
    assert m.kendall == pytest.approx((5 - 1) / 6)  # 5 concordant, 1 discordant pair
    assert m.pearson == pytest.approx(0.8)  # Σ dx·dy = 4, Σ dx² = Σ dy² = 5
    assert m.disagreement == pytest.approx(1 / 6)
    assert m.n_models == 4
    assert m.kendall_p == pytest.approx(stats.kendalltau(a, b).pvalue)
    with pytest.raises(ValueError, match=r"equal length, got \(4,\) and \(3,\)"):
        agreement(a, b[:3])
    with pytest.raises(ValueError, match="second metric vector has nan at model 2"):
        agreement(a, [1.0, 2.0, np.nan, 3.0])


def _trivariate(rng, n, r_xy, r_xz, r_yz, reps):
    cov = np.array([[1, r_xy, r_xz], [r_xy, 1, r_yz], [r_xz, r_yz, 1]])
    return rng.multivariate_normal(np.zeros(3), cov, size=(reps, n))


def test_steiger_variance_matches_monte_carlo():
    """Under H0 (ρ_xy = ρ_xz) √(n−3)·(atanh r_xy − atanh r_xz) has variance 2 − 2c; the test's
    statistic must therefore have unit variance. 4,000 samples of n = 200 give the sample
    variance a relative standard error of √(2/3999) ≈ 2.2 %; a formula without the
    dependence term c would be off by a factor 2 − 2c ≈ 0.7 here. (The mean is 0 by the
    symmetry of y and z for any such formula, so it is not a check.)"""
    rng = np.random.default_rng(1)
    data = _trivariate(rng, 200, 0.5, 0.5, 0.7, 4000)
    zs = []
    for d in data:
        r = np.corrcoef(d.T)
        zs.append(steiger_z(r[0, 1], r[0, 2], r[1, 2], 200)[0])
    zs = np.array(zs)
    assert abs(zs.var(ddof=1) - 1.0) < 3 * np.sqrt(2 / 3999)
    # and the level of the two-sided test is 5 % within 3 binomial standard errors
    p = 2 * stats.norm.sf(np.abs(zs))
    assert abs(np.mean(p < 0.05) - 0.05) < 3 * np.sqrt(0.05 * 0.95 / 4000)


def test_steiger_test_on_vectors_detects_the_better_metric():
    rng = np.random.default_rng(2)
    truth = rng.normal(size=60)
    good = truth + rng.normal(0, 0.3, 60)
    poor = truth + rng.normal(0, 1.5, 60)
    res = steiger_test(truth, good, poor, method="kendall", alternative="greater")
    assert res.r_truth_y == pytest.approx(stats.kendalltau(truth, good)[0])
    assert res.r_truth_z == pytest.approx(stats.kendalltau(truth, poor)[0])
    assert res.z > 0 and res.p_value < 0.01
    flipped = steiger_test(truth, poor, good, method="pearson")
    assert flipped.z < 0 and flipped.p_value < 0.01
    z, p_less = steiger_z(0.3, 0.6, 0.5, 50, alternative="less")
    assert p_less == pytest.approx(stats.norm.cdf(z)) and z < 0


def test_steiger_rejects_bad_input():
    with pytest.raises(ValueError, match="n > 3"):
        steiger_z(0.1, 0.2, 0.3, 3)
    with pytest.raises(ValueError, match=r"r_yz.*got 1.0"):
        steiger_z(0.1, 0.2, 1.0, 10)
    with pytest.raises(ValueError, match="method must be one of"):
        steiger_test([1, 2, 3, 4], [1, 2, 3, 4], [4, 3, 2, 1], method="spearman")
    with pytest.raises(ValueError, match="alternative must be"):
        steiger_z(0.1, 0.2, 0.3, 10, alternative="bigger")


def test_series_of_metric_values_are_paired_by_model_label():
    a = pd.Series([0.1, 0.4, 0.2, 0.9], index=["m1", "m2", "m3", "m4"])
    b = pd.Series([0.8, 0.1, 0.3, 0.5], index=["m4", "m1", "m3", "m2"])
    by_label = agreement(a, b)
    # b in a's order, by hand: m1 0.1, m2 0.5, m3 0.3, m4 0.8: the same order as a.
    assert by_label.kendall == pytest.approx(1.0) and by_label.disagreement == 0.0
    assert agreement(a.to_numpy(), b.to_numpy()).kendall < 1.0  # position would disagree
    with pytest.raises(ValueError, match="second metric vector has no model 'm2'"):
        agreement(a, b.rename({"m2": "x"}))
    with pytest.raises(ValueError, match="labels model 'm1' more than once"):
        agreement(a.rename({"m2": "m1"}), b)


def test_steiger_test_pairs_series_by_label():
    truth = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], index=list("abcdef"))
    y = pd.Series([1.1, 2.5, 2.0, 4.2, 6.0, 5.0], index=list("abcdef"))
    z = pd.Series([3.0, 1.0, 2.0, 6.0, 4.0, 5.0], index=list("abcdef"))
    shuffled = steiger_test(truth, y.iloc[::-1], z.iloc[[3, 1, 5, 0, 2, 4]])
    assert shuffled.z == steiger_test(truth, y, z).z


def test_pandas_missing_metric_values_are_refused_with_labels():
    with pytest.raises(ValueError, match="first metric vector has a missing value at label 2"):
        agreement(pd.Series([1, 2, None, 4], dtype="Int64"), [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: steiger_z(0.5, 0.4, 0.3, 10.5), r"integer n > 3 observations, got 10.5"),
        (
            lambda: steiger_z("0.5", 0.4, 0.3, 10),
            r"r_xy.*got '0.5'",
        ),
        (
            lambda: steiger_test([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [2, 1, 3, 5, 4]),
            "kendall correlation of truth and y is .*strictly inside",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
