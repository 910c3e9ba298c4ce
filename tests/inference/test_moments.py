"""Merged moments give the in-memory estimates' numbers (recpack_ope.inference.moments)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from recpack_ope.inference.diagnostics import (
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
)
from recpack_ope.inference.moments import Moments, SummaryEstimate, WeightSums
from recpack_ope.inference.result import EstimateResult
from recpack_ope.propensity import LogDiscount
from recpack_ope.registry import estimator
from recpack_ope.reward import RewardMatrix


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


def test_a_spread_that_is_zero_in_exact_arithmetic_rounds_like_the_influences():
    # pnDCG with every user ranked ideally: each user's DCG is c times its ideal DCG, so every
    # influence g·(x_u − m) is 0 in exact arithmetic. Summed from per-user influences it
    # rounds to about 1e-17 of the value; from gᵀCg it would come out near 1e-9 (√ε).
    rng = np.random.default_rng(3)
    ideal = rng.integers(1, 4, size=500) * (1 + 1 / np.log2(np.arange(2, 502)))
    terms = np.column_stack([ideal / np.log2(3), ideal])
    reference = EstimateResult("pnDCG@2", terms, (1, -1), np.arange(500), 0)
    assert reference.standard_error < 1e-15
    for cuts in ([1], [1, 2, 3], list(range(7, 500, 7))):
        summary = SummaryEstimate.product("pnDCG@2", split_moments(terms, cuts), [0, 1], (1, -1))
        assert summary.value == pytest.approx(1 / np.log2(3), rel=1e-14)
        assert summary.standard_error < 1e-15
    # The same over a subset stored as x · 1_S next to 1_S (a propensity stratum).
    inside = rng.random(500) < 0.4
    joint = np.column_stack([terms * inside[:, None], inside])
    stratum = SummaryEstimate.product(
        "pnDCG@2", split_moments(joint, [100, 101, 300]), [0, 1], (1, -1), indicator=2
    )
    assert stratum.n_users == inside.sum()
    assert stratum.value == pytest.approx(1 / np.log2(3), rel=1e-14)
    assert stratum.standard_error < 1e-15


def test_a_stratum_summary_equals_the_estimate_over_its_users():
    rng = np.random.default_rng(4)
    terms = rng.gamma(1.5, 1.0, size=(300, 2))
    inside = rng.random(300) < 0.3
    reference = EstimateResult("m", terms[inside], (1, -1), np.flatnonzero(inside), 0)
    joint = np.column_stack([terms * inside[:, None], inside])
    stratum = SummaryEstimate.product(
        "m", split_moments(joint, [50, 51, 250]), [0, 1], (1, -1), indicator=2
    )
    assert stratum.n_users == reference.n_users
    assert stratum.value == pytest.approx(reference.value, rel=1e-13)
    assert stratum.standard_error == pytest.approx(reference.standard_error, rel=1e-10)


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
    users = np.arange(150)  # one interaction each
    d = WeightDiagnostics.from_contributions(raw, weights, contributions, users=users)
    assert d.top_share == pytest.approx((4 + 9 / 3) / contributions.sum(), rel=1e-14)
    assert d.n_clipped == 1 and d.max_weight == 9.0
    assert d.ess == pytest.approx(weights.sum() ** 2 / (weights**2).sum(), rel=1e-14)
    # in any order and split anywhere, the same diagnostics
    order = np.random.default_rng(4).permutation(150)
    parts = [
        WeightGroups.from_interactions(
            raw[order][s], weights[order][s], contributions[order][s], users[order][s]
        )
        for s in (slice(0, 70), slice(70, 150))
    ]
    merged = WeightDiagnostics.from_groups(WeightGroups.concatenate(parts))
    assert merged == d


# --- sensitivity bounds from merged weight sums -----------------------------------------------


def _held_out(seed: int = 5, n_users: int = 60, n_items: int = 12):
    """Graded rewards (users 0–4 without any), sparse scores listing some items, item
    propensities, a reward model and string item ids sorted like the columns."""
    rng = np.random.default_rng(seed)
    y = sp.random(n_users, n_items, density=0.25, random_state=seed, format="csr")
    y.data = rng.integers(1, 4, y.nnz).astype(float)
    y = sp.csr_matrix(y.toarray() * (np.arange(n_users) >= 5)[:, None])
    scores = sp.csr_matrix(rng.integers(1, 5, (n_users, n_items)) * (rng.random(y.shape) < 0.6))
    ids = np.array([f"item{j:02d}" for j in range(n_items)], dtype=object)
    return y, scores, rng.uniform(0.05, 1.0, n_items), rng.random(y.shape) * 0.3, ids


def _estimate(metric, y, scores, p, reward, **options):
    extra = {"reward_model": RewardMatrix(reward)} if metric == "dr_dcg" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        return estimator(metric)(
            y, scores, discount=LogDiscount(4), propensity=p, **extra, **options
        )


def _merged_sums(metric, cuts, **options):
    """The in-memory estimate on all users, and its weight sums merged over blocks of users,
    each block indexing only its own items (as a Spark chunk does); a block without a positive
    reward is skipped, as Spark skips it."""
    y, scores, p, reward, ids = _held_out()
    whole = _estimate(metric, y, scores, p, reward, **options)
    merged = None
    for rows in np.split(np.arange(y.shape[0]), cuts):
        if not (y[rows] > 0).nnz:
            continue
        cols = np.flatnonzero(np.asarray((y[rows] != 0).sum(0) + (scores[rows] != 0).sum(0)))
        part = _estimate(
            metric,
            y[rows][:, cols],
            scores[rows][:, cols],
            p[cols],
            reward[rows][:, cols],
            **options,
        )
        sums = WeightSums.from_weighting(part.weighting, ids[cols])
        merged = sums if merged is None else merged.merge(sums)
    return whole, merged, ids


@pytest.mark.parametrize(
    ("metric", "options"),
    [
        ("ips_dcg", {}),
        ("ips_dcg", {"clip": 4.0, "population": "all"}),
        ("snips_dcg", {"clip": 6.0}),
        ("snips_dcg", {"population": "all"}),
        ("dr_dcg", {"clip": 3.0}),
    ],
)
def test_merged_weight_sums_are_the_collapsed_weighting(metric, options):
    whole, sums, ids = _merged_sums(metric, [5, 17, 18, 44], **options)
    merged, collapsed = sums.weighting(whole.n_users), whole.weighting.collapsed()
    parts = ("numerator", "kept", "denominator")
    assert [getattr(merged, x) is None for x in parts] == [
        getattr(collapsed, x) is None for x in parts
    ]
    for name in parts:
        ours, theirs = getattr(merged, name), getattr(collapsed, name)
        if theirs is None:
            continue
        # The same units (by item id), coefficients and raw weights 1/p̂.
        np.testing.assert_array_equal(sums.ids[ours.unit], ids[theirs.unit])
        np.testing.assert_allclose(ours.coef, theirs.coef, rtol=1e-12)
        np.testing.assert_array_equal(merged.raw[ours.unit], collapsed.raw[theirs.unit])
    assert merged.base == pytest.approx(collapsed.base, rel=1e-12, abs=1e-15)
    if collapsed.fixed is not None:
        np.testing.assert_allclose(merged.fixed, collapsed.fixed, rtol=1e-12)
    assert merged.value(merged.raw) == pytest.approx(whole.value, rel=1e-12)
    for gamma in (1.0, 1.3, 2.0, 10.0):
        low, high, exact, _, _ = merged.bounds(gamma)
        bounds = whole.sensitivity(gamma)
        assert (low, high) == pytest.approx((bounds.low, bounds.high), rel=1e-9)
        assert exact and bounds.exact


def test_weight_sums_refuse_what_does_not_reduce_to_sums():
    y, scores, p, reward, ids = _held_out()
    ndcg = _estimate("ips_ndcg", y, scores, p, reward)
    with pytest.raises(ValueError, match="per-user ratios and ideal-DCG normalisers"):
        WeightSums.from_weighting(ndcg.weighting, ids)
    ips = _estimate("ips_dcg", y, scores, p, reward, clip=None)
    with pytest.raises(ValueError, match=r"ids must identify each of the weighting's 12 units"):
        WeightSums.from_weighting(ips.weighting, ids[:3])
    clipped = _estimate("ips_dcg", y, scores, p, reward, clip=2.0)
    sums = WeightSums.from_weighting(ips.weighting, ids)
    with pytest.raises(ValueError, match=r"their clip differ \(inf and 2.0\)"):
        sums.merge(WeightSums.from_weighting(clipped.weighting, ids))
    with pytest.raises(ValueError, match="n_users must be a positive integer, got 0"):
        sums.weighting(0)
    with pytest.raises(ValueError, match="ids must hold every identifier"):
        sums.weighting(10, ids[:2], np.ones(2))


def _summaries(metrics=("ips_dcg",), **options):
    """In-memory estimates of two models, and summary estimates built from their moments and
    weight sums merged over blocks of users, on shared units."""
    y, scores, p, reward, ids = _held_out()
    other = sp.csr_matrix(scores.multiply(scores > 2))
    found, summaries, sums = {}, {}, {}
    for model, s in (("a", scores), ("b", other)):
        for metric in metrics:
            found[model, metric] = _estimate(metric, y, s, p, reward, **options)
            if metric in ("ips_dcg", "snips_dcg"):
                sums[model, metric] = WeightSums.from_weighting(found[model, metric].weighting, ids)
    terms = np.column_stack([e.terms for e in found.values()])
    moments, column = Moments.from_terms(terms), 0
    units = WeightSums.shared_units(sums.values())
    for key, e in found.items():
        width = e.terms.shape[1]
        weighting = sums[key].weighting(e.n_users, *units) if key in sums else None
        summaries[key] = SummaryEstimate.product(
            e.name,
            moments,
            range(column, column + width),
            e.exponents,
            diagnostics=e.diagnostics,
            weighting=weighting,
            no_bounds=None
            if key in sums or e.weighting is None
            else f"{e.name}: use the in-memory path",
        )
        column += width
    return found, summaries


def test_summaries_bound_and_compare_as_in_memory():
    found, summaries = _summaries(("ips_dcg", "snips_dcg"), clip=5.0)
    for key, e in found.items():
        got, want = summaries[key].sensitivity(1.7), e.sensitivity(1.7)
        assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-9)
        assert "with propensities off by up to ×2: [" in repr(summaries[key])
        ours = summaries["a", key[1]].compare(summaries["b", key[1]], names=("a", "b"))
        theirs = found["a", key[1]].compare(found["b", key[1]], names=("a", "b"))
        got, want = ours.sensitivity(1.7), theirs.sensitivity(1.7)
        assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-9)
        assert ours.robustness() == pytest.approx(theirs.robustness(), rel=1e-6)
        assert repr(ours).endswith(
            f"its sign survives propensities off by up to ×{ours.robustness():.3g}"
        )


def test_summaries_refuse_a_level_and_say_why_they_have_no_bounds():
    found, summaries = _summaries(("dcg", "ips_dcg", "ips_ndcg"))
    ips = summaries["a", "ips_dcg"]
    comparison = ips.compare(summaries["b", "ips_dcg"])
    for call in (
        lambda: ips.sensitivity(2.0, level=0.95),
        lambda: comparison.sensitivity(2.0, level=0.9),
        lambda: comparison.robustness(level=0.95),
        lambda: comparison.plot_sensitivity(),
    ):
        with pytest.raises(ValueError, match=r"level= on the sensitivity of .*in memory"):
            call()
    ndcg = summaries["a", "ips_ndcg"]
    with pytest.raises(ValueError, match="IPS-nDCG@4: use the in-memory path"):
        ndcg.sensitivity(2.0)
    with pytest.raises(ValueError, match="IPS-nDCG@4: use the in-memory path"):
        ndcg.compare(summaries["b", "ips_ndcg"]).robustness()
    assert "robust" not in repr(ndcg.compare(summaries["b", "ips_ndcg"]))
    with pytest.raises(ValueError, match="DCG@4 is not weighted by inverse propensities"):
        summaries["a", "dcg"].sensitivity(2.0)
    # Weighted, without a weighting and without a reason: the engine could not merge it.
    bare = SummaryEstimate.product(ndcg.name, ndcg.moments, [0], (1,), diagnostics=ndcg.diagnostics)
    with pytest.raises(ValueError, match=r"per-row or per-\(user, item\) propensities"):
        bare.sensitivity(2.0)


def test_moments_refuse_non_finite_terms_and_other_term_counts():
    with pytest.raises(ValueError, match=r"terms are not finite: nan in row 1, column 0"):
        Moments.from_terms(np.array([[1.0, 2.0], [np.nan, 2.0]]))
    with pytest.raises(ValueError, match=r"Moments mean is inf at \(0,\)"):
        Moments(2, np.array([np.inf]), np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"Moments n must be an integer >= 0 \(users\), got -1"):
        Moments(-1, np.zeros(1), np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"mean must be 1-D \(d,\) and factor \(r, d\).*\(2, 1\)"):
        Moments(2, np.zeros(2), np.zeros((2, 1)))
    three = Moments.from_terms(np.ones((4, 3)))
    with pytest.raises(ValueError, match=r"parts\[1\] has 3 terms, but d = 2 were declared"):
        Moments.combine([Moments.from_terms(np.ones((2, 2))), three], 2)
    # An empty part of the wrong width is as wrong as a full one.
    with pytest.raises(ValueError, match=r"parts\[0\] has 3 terms, but d = 2"):
        Moments.combine([Moments.empty(3)], 2)
    with pytest.raises(ValueError, match="cannot merge moments of 2 and 3 terms"):
        Moments.from_terms(np.ones((2, 2))).merge(three)
    with pytest.raises(TypeError, match="other must be Moments, got ndarray"):
        three.merge(np.ones((4, 3)))
    # Combined parts equal the moments of all rows at once (numpy's mean and scatter).
    rows = np.random.default_rng(0).normal(size=(9, 2))
    merged = Moments.combine([Moments.from_terms(rows[:4]), Moments.from_terms(rows[4:])], 2)
    centred = rows - rows.mean(axis=0)
    np.testing.assert_allclose(merged.mean, rows.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(merged.comoment, centred.T @ centred, rtol=1e-13)


def test_a_summary_over_no_users_has_no_value():
    empty = SummaryEstimate.product("DCG@5", Moments.empty(1), [0], (1,))
    with pytest.raises(ValueError, match="DCG@5 has no evaluated user .*undefined"):
        _ = empty.value
    with pytest.raises(ValueError, match="DCG@5 has no evaluated user"):
        float(empty)
    assert "DCG@5: no evaluated user (0 excluded), no value" in repr(empty)
    # One user: the value is that user's term.
    assert SummaryEstimate.product("DCG@5", Moments.from_terms([[0.25]]), [0], (1,)).value == 0.25


def test_in_memory_and_summary_estimates_refuse_to_pair_saying_why():
    terms = np.arange(4.0)[:, None]
    in_memory = EstimateResult("DCG@5", terms, (1,), np.arange(4), 0)
    summary = SummaryEstimate.product("DCG@5", Moments.from_terms(terms), [0], (1,))
    for a, b in ((in_memory, summary), (summary, in_memory)):
        with pytest.raises(ValueError, match=r"known only through merged moments .*per-user"):
            a.compare(b)
