"""Merged moments give the in-memory estimates' numbers (recpack_ope.inference.moments)."""

import numpy as np
import pytest
from scipy import stats

from recpack_ope.inference.diagnostics import WeightDiagnostics, WeightGroups
from recpack_ope.inference.moments import Moments, SummaryEstimate
from recpack_ope.inference.result import EstimateResult


def split_moments(terms, cuts):
    """Moments of ``terms`` merged from the row blocks between ``cuts``."""
    parts = [Moments.from_terms(block) for block in np.split(terms, cuts)]
    return Moments.combine(parts, terms.shape[1])


def test_merged_moments_equal_the_moments_of_all_rows():
    rng = np.random.default_rng(0)
    terms = (
        rng.gamma(2.0, 3.0, size=(1000, 3)) + 1e6
    )  # a large offset: sums of squares would cancel
    merged = split_moments(terms, [1, 2, 300, 301, 999])
    np.testing.assert_allclose(merged.mean, terms.mean(axis=0), rtol=1e-14)
    centred = terms - terms.mean(axis=0)
    np.testing.assert_allclose(merged.comoment, centred.T @ centred, rtol=1e-9)
    assert merged.n == 1000
    assert Moments.combine([], 3).n == 0


@pytest.mark.parametrize("exponents", [(1,), (1, -1), (1, 1, -1)])
def test_summary_equals_estimate_result(exponents):
    rng = np.random.default_rng(1)
    terms = rng.gamma(1.5, 1.0, size=(400, len(exponents)))
    reference = EstimateResult("m", terms, exponents, np.arange(400), 0)
    moments = split_moments(terms, [17, 200, 201])
    summary = SummaryEstimate.product("m", moments, range(len(exponents)), exponents)
    assert summary.value == pytest.approx(reference.value, rel=1e-13)
    assert summary.standard_error == pytest.approx(reference.standard_error, rel=1e-10)
    assert summary.confidence_interval(0.8) == pytest.approx(
        reference.confidence_interval(0.8), rel=1e-10
    )
    assert summary.n_users == 400


def test_paired_comparison_is_the_paired_t_test():
    rng = np.random.default_rng(2)
    a = rng.normal(1.0, 1.0, 300)
    b = a + rng.normal(0.1, 0.5, 300)
    moments = split_moments(np.column_stack([a, b]), [100, 150])
    ea = SummaryEstimate.product("A", moments, [0], (1,))
    eb = SummaryEstimate.product("B", moments, [1], (1,))
    comparison = ea.compare(eb, names=("a", "b"))
    assert comparison.p_value == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-10)
    assert comparison.difference == pytest.approx((a - b).mean(), rel=1e-12)
    assert comparison.name == "a A − b B"
    other = SummaryEstimate.product("B", Moments.from_terms(np.column_stack([a, b])), [1], (1,))
    with pytest.raises(ValueError, match="same pass"):
        ea.compare(other)
    with pytest.raises(ValueError, match="control_variate"):
        ea.compare(eb, control_variate=True)
    with pytest.raises(AttributeError, match="per-user values stay"):
        _ = ea.influence


def test_estimate_over_a_subset_equals_the_estimate_on_that_subset():
    rng = np.random.default_rng(3)
    terms = rng.gamma(2.0, 1.0, size=(500, 2))
    inside = rng.random(500) < 0.3
    joint = np.column_stack([terms * inside[:, None], inside])
    summary = SummaryEstimate.product(
        "s", split_moments(joint, [50, 400]), [0, 1], (1, -1), indicator=2
    )
    reference = EstimateResult("s", terms[inside], (1, -1), np.flatnonzero(inside), 0)
    assert summary.n_users == inside.sum()
    assert summary.value == pytest.approx(reference.value, rel=1e-12)
    assert summary.standard_error == pytest.approx(reference.standard_error, rel=1e-9)


def test_top_share_takes_the_tied_boundary_group_pro_rata():
    # 150 interactions: ⌈150/100⌉ = 2 largest weights; the largest (9) is one interaction, the
    # next (5) is shared by three, so the top holds 9's contribution and a third of the 5s'.
    weights = np.array([9.0, 5.0, 5.0, 5.0] + [1.0] * 146)
    contributions = np.array([4.0, 1.0, 2.0, 6.0] + [0.5] * 146)
    raw = weights * np.r_[[2.0], np.ones(149)]
    d = WeightDiagnostics.from_contributions(raw, weights, contributions)
    assert d.top_share == pytest.approx((4 + 9 / 3) / contributions.sum(), rel=1e-14)
    assert d.n_clipped == 1 and d.max_weight == 9.0
    assert d.ess == pytest.approx(weights.sum() ** 2 / (weights**2).sum(), rel=1e-14)
    # in any order and split anywhere, the same diagnostics
    order = np.random.default_rng(4).permutation(150)
    parts = [
        WeightGroups.from_interactions(raw[order][s], weights[order][s], contributions[order][s])
        for s in (slice(0, 70), slice(70, 150))
    ]
    merged = WeightDiagnostics.from_groups(WeightGroups.concatenate(parts))
    assert merged == d
