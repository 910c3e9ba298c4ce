"""Paired t-tests, randomised Tukey HSD, discriminative power, Holm and Benjamini–Hochberg
adjustments and the systems tied with the best (Hsu's MCB by default).

Every expected value comes by another route: hand calculation, scipy, numerical quadrature,
brute force with the same draws, the step-down / step-up rejection procedures written out from
their definitions, or Monte Carlo over simulated pools with binomial tolerances.
"""

import itertools

import numpy as np
import pytest
from conftest import max_abs_t_cdf_three
from scipy import stats

from recpack_ope.inference.significance import (
    TiedWithBest,
    adjust_p_values,
    discriminative_power,
    paired_t_tests,
    randomised_tukey_hsd,
    tied_with_best,
)
from recpack_ope.inference.systems import PreferenceMatrix, SystemScores


def metric_sample(rng, n_users=40, shifts=(0.0, 0.05, 0.3, 0.31)):
    base = rng.random((n_users, 1))
    x = base + np.array(shifts) + 0.1 * rng.standard_normal((n_users, len(shifts)))
    return SystemScores(
        names=tuple(f"s{i}" for i in range(len(shifts))),
        per_user=x,
        user_ids=np.arange(n_users),
        name="metric",
    )


def preference_sample(rng, n_users, m):
    upper = np.triu(rng.uniform(-1, 1, size=(n_users, m, m)), 1)
    return PreferenceMatrix(
        names=tuple(f"s{i}" for i in range(m)),
        per_user=upper - np.transpose(upper, (0, 2, 1)),
        user_ids=np.arange(n_users),
        name="RPP",
        n_excluded_users=0,
    )


def test_bonferroni_t_tests_equal_scipy():
    sample = metric_sample(np.random.default_rng(0))
    tests = paired_t_tests(sample)
    for s, t in itertools.combinations(range(4), 2):
        p = stats.ttest_rel(sample.per_user[:, s], sample.per_user[:, t]).pvalue
        assert tests.p_value[s, t] == pytest.approx(min(1.0, 6 * p), rel=1e-9)
        assert tests.difference[s, t] == pytest.approx(sample.means[s] - sample.means[t])
    raw = paired_t_tests(sample, correction="none")
    assert raw.p_value[0, 2] == pytest.approx(
        stats.ttest_rel(sample.per_user[:, 0], sample.per_user[:, 2]).pvalue
    )

    prefs = preference_sample(np.random.default_rng(1), 30, 4)
    tests = paired_t_tests(prefs)
    for s, t in itertools.combinations(range(4), 2):
        p = stats.ttest_1samp(prefs.per_user[:, s, t], 0.0).pvalue
        assert tests.p_value[s, t] == pytest.approx(min(1.0, 6 * p), rel=1e-9)
        assert tests.p_value[t, s] == tests.p_value[s, t]


def exact_hsd(values, observed_pair, kind):
    """Every relabelling of every user (M!^U of them, equally likely under the null)."""
    n_users, m = values.shape[0], values.shape[1]
    perms = list(itertools.permutations(range(m)))
    hits = total = 0
    for choice in itertools.product(perms, repeat=n_users):
        if kind == "metric":
            means = np.mean([values[u, list(p)] for u, p in enumerate(choice)], axis=0)
            stat = means.max() - means.min()
        else:
            permuted = np.mean([values[u][np.ix_(p, p)] for u, p in enumerate(choice)], axis=0)
            stat = np.abs(permuted).max()
        hits += stat >= observed_pair - 1e-12
        total += 1
    return hits / total


@pytest.mark.parametrize("kind", ["metric", "preference"])
def test_randomised_hsd_matches_exact_permutation_distribution(kind):
    rng = np.random.default_rng(4)
    if kind == "metric":
        sample = SystemScores(
            names=("a", "b", "c"),
            per_user=rng.random((4, 3)) + [0, 0.2, 0.5],
            user_ids=np.arange(4),
            name="m",
        )
        observed = np.abs(sample.means[:, None] - sample.means[None, :])
    else:
        sample = preference_sample(rng, 4, 3)
        observed = np.abs(sample.mean)
    b = 20_000
    tests = randomised_tukey_hsd(sample, n_resamples=b, seed=1)
    for s, t in itertools.combinations(range(3), 2):
        exact = exact_hsd(sample.per_user, observed[s, t], kind)
        # Monte Carlo: p̂ = (1 + hits)/(1 + B); 4 binomial standard errors plus the +1 offset.
        tolerance = 4 * np.sqrt(exact * (1 - exact) / b) + 2 / b
        assert abs(tests.p_value[s, t] - exact) <= tolerance, (s, t, tests.p_value[s, t], exact)


def test_hsd_identical_systems_and_clear_winner():
    rng = np.random.default_rng(2)
    same = SystemScores(
        names=("a", "b"),
        per_user=np.repeat(rng.random((20, 1)), 2, axis=1),
        user_ids=np.arange(20),
        name="m",
    )
    assert randomised_tukey_hsd(same, 200).p_value[0, 1] == 1.0
    clear = SystemScores(
        names=("a", "b", "c"),
        per_user=rng.random((50, 3)) * 0.01 + [0, 0, 1],
        user_ids=np.arange(50),
        name="m",
    )
    tests = randomised_tukey_hsd(clear, 500, seed=3)
    assert tests.p_value[0, 2] == pytest.approx(1 / 501)
    assert tests.pairs()[0][0] == "c"
    assert tests.p_value[0, 1] > 0.05


def test_discriminative_power_is_share_of_separated_pairs():
    rng = np.random.default_rng(5)
    metric = metric_sample(rng, shifts=(0.0, 0.002, 0.3, 0.302))
    prefs = preference_sample(rng, 40, 4)
    power = discriminative_power({"metric": metric, "RPP": prefs}, alpha=0.05, n_resamples=300)
    assert power.n_pairs == 6
    for name, sample in (("metric", metric), ("RPP", prefs)):
        assert power.power["bonferroni"][name] == paired_t_tests(sample).power(0.05)
        assert power.power["tukey"][name] == randomised_tukey_hsd(sample, 300, 0).power(0.05)
    # The metric sample separates s0/s1 from s2/s3 (4 of 6 pairs) and not s0–s1 or s2–s3.
    assert power.power["bonferroni"]["metric"] == pytest.approx(4 / 6)
    assert "| t-test, Bonferroni |" in power.table() and "66.67" in power.table()
    with pytest.raises(ValueError, match="unknown test 'wilcoxon'"):
        discriminative_power({"m": metric}, tests=("wilcoxon",))
    with pytest.raises(ValueError, match="different systems"):
        other = SystemScores(
            names=("x", "y"), per_user=np.zeros((3, 2)), user_ids=np.arange(3), name="o"
        )
        discriminative_power({"m": metric, "o": other})
    with pytest.raises(TypeError, match="SystemScores .* or a PreferenceMatrix"):
        paired_t_tests(np.zeros((3, 2)))


def _scores():
    rng = np.random.default_rng(0)
    return SystemScores(
        names=("a", "b", "c"), per_user=rng.random((6, 3)), user_ids=np.arange(6), name="m"
    )


def test_tukey_refuses_a_request_beyond_its_budget_and_counts_like_before():
    scores = _scores()
    with pytest.raises(
        ValueError,
        match=r"n_resamples=1000000000000 .*1.8e\+13 values",
    ):
        randomised_tukey_hsd(scores, 10**12)
    # The streaming count equals keeping every maximum: brute force with the same draws.
    rng = np.random.default_rng(3)
    maxima = []
    for _ in range(200):
        perm = np.argsort(rng.random((1, 6, 3)), axis=2)[0]
        means = np.take_along_axis(scores.per_user, perm, axis=1).mean(axis=0)
        maxima.append(means.max() - means.min())
    observed = np.abs(scores.means[:, None] - scores.means[None, :])
    expected = (
        1 + (np.array(maxima)[None, None, :] >= observed[:, :, None] * (1 - 1e-12)).sum(axis=2)
    ) / 201
    np.fill_diagonal(expected, 1.0)
    np.testing.assert_array_equal(randomised_tukey_hsd(scores, 200, seed=3).p_value, expected)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: adjust_p_values([0.1, 0.2j], "holm"), r"p has complex dtype"),
    ],
)
def test_complex_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: paired_t_tests(
                SystemScores(("a", "b"), [[1.0, np.nan], [1.0, 2.0]], np.arange(2), "m")
            ),
            r"sample\.per_user has nan for user row 0, system 'b'",
        ),
        (
            lambda: randomised_tukey_hsd(
                SystemScores(("a", "b"), [[1.0, 2.0], [np.inf, 2.0]], np.arange(2), "m")
            ),
            r"sample\.per_user has inf for user row 1, system 'a'",
        ),
        (
            lambda: tied_with_best(_scores(), seed=-1),
            "seed must be None, an integer >= 0 or a numpy Generator, got -1",
        ),
        (
            lambda: tied_with_best(_scores(), test="tukey", seed="x"),
            "seed must be None, an integer >= 0",
        ),
        (
            lambda: tied_with_best(_scores(), n_resamples=0),
            "n_resamples must be a positive integer, got 0",
        ),
        (
            lambda: randomised_tukey_hsd(_scores(), 10, seed=1.5),
            "seed must be None, an integer >= 0 or a numpy Generator, got 1.5",
        ),
        (lambda: paired_t_tests(_scores(), "sidak"), "correction must be one of"),
        (
            lambda: discriminative_power({"m": _scores()}, tests="tukey"),
            "tests must be a tuple of test names",
        ),
        (lambda: discriminative_power([_scores()]), "samples must map measure names"),
        (
            lambda: discriminative_power({"m": _scores()}, alpha="0.05"),
            r"alpha.*got '0.05'",
        ),
        (lambda: discriminative_power({"m": [[1.0]]}), "sample must be a SystemScores"),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def holm_by_definition(p):
    """p̃_(k) = min(1, max_{j ≤ k} (n − j + 1) · p_(j)), one sorted p at a time."""
    n = len(p)
    ranked = sorted(range(n), key=lambda i: p[i])
    out, running = [0.0] * n, 0.0
    for j, i in enumerate(ranked, 1):
        running = max(running, (n - j + 1) * p[i])
        out[i] = min(1.0, running)
    return np.array(out)


def holm_rejects(p, alpha):
    """Holm's step-down procedure at level alpha: reject p_(1), p_(2), … while
    p_(k) ≤ α/(n − k + 1)."""
    n = len(p)
    rejected = set()
    for k, i in enumerate(sorted(range(n), key=lambda i: p[i]), 1):
        if p[i] > alpha / (n - k + 1):
            break
        rejected.add(i)
    return rejected


def bh_rejects(p, alpha):
    """BH step-up procedure at level alpha: reject the k smallest, k the largest with
    p_(k) ≤ kα/n."""
    n = len(p)
    ranked = sorted(range(n), key=lambda i: p[i])
    k_max = max((k for k, i in enumerate(ranked, 1) if p[i] <= k * alpha / n), default=0)
    return set(ranked[:k_max])


def seeded_metric_sample(seed, n_users=30, shifts=(0.0, 0.04, 0.08, 0.3)):
    rng = np.random.default_rng(seed)
    x = (
        rng.random((n_users, 1))
        + np.array(shifts)
        + 0.1 * rng.standard_normal((n_users, len(shifts)))
    )
    return SystemScores(
        names=tuple(f"s{i}" for i in range(len(shifts))),
        per_user=x,
        user_ids=np.arange(n_users),
        name="metric",
    )


def test_hand_worked_adjustments():
    p = [0.01, 0.04, 0.03, 0.005]
    # Sorted: 0.005 (p[3]), 0.01 (p[0]), 0.03 (p[2]), 0.04 (p[1]); n = 4.
    # Holm: 4·0.005 = 0.02, 3·0.01 = 0.03, 2·0.03 = 0.06, 1·0.04 = 0.04 → running max 0.06.
    np.testing.assert_allclose(adjust_p_values(p, "holm"), [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    # BH: 4/1·0.005 = 0.02, 4/2·0.01 = 0.02, 4/3·0.03 = 0.04, 4/4·0.04 = 0.04 → running min
    # from the top.
    np.testing.assert_allclose(adjust_p_values(p, "bh"), [0.02, 0.04, 0.04, 0.02], rtol=1e-12)
    np.testing.assert_allclose(
        adjust_p_values(p, "bonferroni"), [0.04, 0.16, 0.12, 0.02], rtol=1e-12
    )
    np.testing.assert_array_equal(adjust_p_values(p, "none"), p)

    # Ties and the cap at 1: p = [0.02, 0.02, 0.2, 0.6].
    # Holm: 0.08, 3·0.02 = 0.06 → 0.08, 2·0.2 = 0.4, 0.6.  BH: 0.08, 0.04, 4/3·0.2 = 0.2667, 0.6
    # → running min from the top: 0.6, 0.2667, 0.04, 0.04.
    p = [0.02, 0.02, 0.2, 0.6]
    np.testing.assert_allclose(adjust_p_values(p, "holm"), [0.08, 0.08, 0.4, 0.6], rtol=1e-12)
    np.testing.assert_allclose(adjust_p_values(p, "bh"), [0.04, 0.04, 0.8 / 3, 0.6], rtol=1e-12)
    # 3·0.4 = 1.2 is capped, and the running max carries the cap to the larger p-values.
    np.testing.assert_array_equal(adjust_p_values([0.4, 0.45, 0.9], "holm"), [1.0, 1.0, 1.0])
    assert adjust_p_values([], "holm").shape == (0,)
    assert adjust_p_values([0.3], "bh") == pytest.approx([0.3])


def test_bh_equals_scipy_and_holm_equals_its_definition():
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        p = rng.random(n) ** rng.uniform(0.5, 4)
        if trial % 4 == 0:
            p = np.round(p, 2)  # ties
        if trial % 10 == 0:
            p[: n // 3] = 0.0
            p[-1] = 1.0
        np.testing.assert_allclose(
            adjust_p_values(p, "bh"),
            stats.false_discovery_control(p, method="bh"),
            rtol=1e-12,
            atol=0,
        )
        np.testing.assert_allclose(
            adjust_p_values(p, "holm"), holm_by_definition(p), rtol=1e-12, atol=0
        )


def test_adjusted_p_values_are_the_smallest_level_that_rejects():
    """``adjusted < α`` is exactly the step-down (Holm) / step-up (BH) rejection set at α."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        p = rng.random(int(rng.integers(2, 25))) ** 3
        holm, bh = adjust_p_values(p, "holm"), adjust_p_values(p, "bh")
        for alpha in rng.uniform(0.001, 0.3, size=5):
            assert set(np.flatnonzero(holm <= alpha)) == holm_rejects(p, alpha)
            assert set(np.flatnonzero(bh <= alpha)) == bh_rejects(p, alpha)
        # Holm rejects everything Bonferroni rejects, BH everything Holm rejects.
        assert np.all(holm <= adjust_p_values(p, "bonferroni") + 1e-15)
        assert np.all(bh <= holm + 1e-15)


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_paired_t_tests_adjust_the_uncorrected_pairs(correction):
    sample = seeded_metric_sample(3)
    raw = paired_t_tests(sample, correction="none")
    tests = paired_t_tests(sample, correction=correction)
    upper = np.triu_indices(4, 1)
    by_hand = (
        holm_by_definition(raw.p_value[upper])
        if correction == "holm"
        else stats.false_discovery_control(raw.p_value[upper], method="bh")
    )
    np.testing.assert_allclose(tests.p_value[upper], by_hand, rtol=1e-12)
    np.testing.assert_array_equal(tests.p_value, tests.p_value.T)
    np.testing.assert_array_equal(np.diag(tests.p_value), 1.0)
    np.testing.assert_array_equal(tests.difference, raw.difference)
    assert tests.test == correction and raw.test == "t"
    # The uncorrected p-values are scipy's paired t-test.
    for s, t in itertools.combinations(range(4), 2):
        p = stats.ttest_rel(sample.per_user[:, s], sample.per_user[:, t]).pvalue
        assert raw.p_value[s, t] == pytest.approx(p, rel=1e-9)


def test_bonferroni_is_unchanged_and_holm_between_it_and_bh():
    sample = seeded_metric_sample(3)
    upper = np.triu_indices(4, 1)
    raw = paired_t_tests(sample, correction="none").p_value[upper]
    bonferroni = paired_t_tests(sample)
    assert bonferroni.test == "bonferroni"
    np.testing.assert_array_equal(bonferroni.p_value[upper], np.minimum(raw * 6, 1.0))
    for s, t in itertools.combinations(range(4), 2):
        p = stats.ttest_rel(sample.per_user[:, s], sample.per_user[:, t]).pvalue
        assert bonferroni.p_value[s, t] == pytest.approx(min(1.0, 6 * p), rel=1e-9)
    holm = paired_t_tests(sample, "holm").p_value[upper]
    bh = paired_t_tests(sample, "bh").p_value[upper]
    assert np.all(bh <= holm + 1e-15) and np.all(holm <= bonferroni.p_value[upper] + 1e-15)


def test_paired_t_tests_on_preferences_with_holm():
    rng = np.random.default_rng(4)
    upper_values = np.triu(rng.uniform(-1, 1, size=(25, 4, 4)) + 0.3, 1)
    prefs = PreferenceMatrix(
        names=("a", "b", "c", "d"),
        per_user=upper_values - upper_values.transpose(0, 2, 1),
        user_ids=np.arange(25),
        name="RPP",
        n_excluded_users=0,
    )
    upper = np.triu_indices(4, 1)
    raw = [
        stats.ttest_1samp(prefs.per_user[:, s, t], 0.0).pvalue for s, t in zip(*upper, strict=True)
    ]
    tests = paired_t_tests(prefs, "holm")
    np.testing.assert_allclose(tests.p_value[upper], holm_by_definition(raw), rtol=1e-9)
    np.testing.assert_array_equal(tests.p_value, tests.p_value.T)


def test_discriminative_power_with_holm_and_bh():
    sample = seeded_metric_sample(5, n_users=40, shifts=(0.0, 0.03, 0.3, 0.33))
    power = discriminative_power({"metric": sample}, tests=("bonferroni", "holm", "bh"))
    for test in ("bonferroni", "holm", "bh"):
        assert power.power[test]["metric"] == paired_t_tests(sample, test).power(0.05)
    table = power.table()
    assert "| t-test, Holm |" in table and "| t-test, Benjamini–Hochberg |" in table
    # The default runs the same two tests as before.
    assert set(discriminative_power({"metric": sample}, n_resamples=50).power) == {
        "tukey",
        "bonferroni",
    }


def tied_pool(seed=11, n_users=60):
    """a, b, c equal in distribution; d far worse (a shift of 5 per-user standard deviations)."""
    rng = np.random.default_rng(seed)
    base = rng.random((n_users, 1))
    x = base + [0.0, 0.0, 0.0, -0.7] + 0.1 * rng.standard_normal((n_users, 4))
    return SystemScores(
        names=("a", "b", "c", "d"), per_user=x, user_ids=np.arange(n_users), name="nDCG@10"
    )


def test_tied_with_best_t_tests_equal_scipy_holm_adjusted_by_hand():
    sample = tied_pool()
    result = tied_with_best(sample, test="t")
    assert isinstance(result, TiedWithBest)
    means = sample.per_user.mean(axis=0)
    expected_order = sorted(sample.names, key=lambda name: -means[sample.names.index(name)])
    assert list(result.names) == expected_order
    assert result.best == expected_order[0] == sample.names[int(np.argmax(means))]
    assert set(result.tied) == {"a", "b", "c"} and "d" not in result.tied
    assert result.tied == tuple(n for n in result.names if n in result.tied)  # mean order
    assert (result.alpha, result.correction, result.test, result.measure) == (
        0.05,
        "holm",
        "t",
        "nDCG@10",
    )
    assert result.interval is None and result.critical_value is None
    assert result.procedure.startswith("paired t-tests against the best, Holm over the 3 tests")

    best = sample.per_user[:, sample.index(result.best)]
    others = result.names[1:]
    raw = [stats.ttest_rel(best, sample.per_user[:, sample.index(name)]).pvalue for name in others]
    np.testing.assert_allclose(result.p_value[1:], holm_by_definition(raw), rtol=1e-9)
    assert result.p_value[0] == 1.0  # the best is not tested against itself
    np.testing.assert_allclose(
        result.difference,
        [best.mean() - sample.per_user[:, sample.index(n)].mean() for n in result.names],
        rtol=1e-12,
        atol=1e-15,
    )
    np.testing.assert_allclose(result.mean, [means[sample.index(n)] for n in result.names])
    assert result.p_value[result.names.index("d")] < 1e-10

    # Other corrections adjust the same M − 1 raw p-values.
    none = tied_with_best(sample, correction="none", test="t")
    np.testing.assert_allclose(none.p_value[1:], raw, rtol=1e-9)
    bh = tied_with_best(sample, correction="bh", test="t")
    np.testing.assert_allclose(
        bh.p_value[1:], stats.false_discovery_control(raw, method="bh"), rtol=1e-9
    )
    bonferroni = tied_with_best(sample, correction="bonferroni", test="t")
    np.testing.assert_allclose(bonferroni.p_value[1:], np.minimum(3 * np.array(raw), 1), rtol=1e-9)


@pytest.mark.parametrize("test", ["mcb", "t"])
def test_tied_set_follows_alpha(test):
    sample = tied_pool()
    result = tied_with_best(sample, alpha=0.2, test=test)
    assert result.tied == tuple(
        n for n, p in zip(result.names, result.p_value, strict=True) if p >= 0.2
    )
    assert set(tied_with_best(sample, alpha=1e-4, test=test).tied) == {"a", "b", "c"}


def test_tied_set_of_the_t_tests_follows_alpha():
    sample = tied_pool()
    # At a level above every uncorrected p-value only the best is left (Holm's are capped at 1
    # here, so they stay tied); at a tiny level all but d stay tied.
    uncorrected = tied_with_best(sample, alpha=0.999, correction="none", test="t")
    assert max(uncorrected.p_value[1:]) < 0.999 and uncorrected.tied == (uncorrected.best,)
    assert set(tied_with_best(sample, alpha=0.999, test="t").tied) == {"a", "b", "c"}
    assert set(tied_with_best(sample, alpha=1e-6, test="t").tied) == {"a", "b", "c"}


def test_tied_with_best_tukey_is_the_best_row_of_the_hsd():
    sample = tied_pool()
    result = tied_with_best(sample, test="tukey", n_resamples=400, seed=5)
    hsd = randomised_tukey_hsd(sample, 400, 5)
    b = sample.index(result.best)
    np.testing.assert_array_equal(
        result.p_value, hsd.p_value[b, [sample.index(n) for n in result.names]]
    )
    assert result.p_value[0] == 1.0
    assert result.correction == "none" and result.test == "tukey"
    assert (
        result.procedure
        == "best's row of the randomised Tukey HSD over all 6 pairs (400 relabellings)"
    )
    assert set(result.tied) == {"a", "b", "c"}
    assert result.p_value[result.names.index("d")] == pytest.approx(1 / 401)
    assert (
        tied_with_best(sample, correction="none", test="tukey", n_resamples=400, seed=5).tied
        == result.tied
    )


def test_table_and_repr():
    sample = tied_pool()
    result = tied_with_best(sample, test="t")
    text = result.table()
    lines = text.splitlines()
    assert (
        lines[0]
        == "| rank | system | nDCG@10 | difference to best | p (Holm, α=0.05) | tied with best |"
    )
    assert len(lines) == 2 + 4
    assert lines[2].startswith(f"| 1 | {result.best} | ") and lines[2].endswith("| – | = |")
    assert lines[-1].startswith("| 4 | d | ") and lines[-1].endswith(" |  |")
    assert repr(result).startswith(
        f"3 of 4 systems tied with the best, {result.best} (Holm, α=0.05):\n"
        "paired t-tests against the best, Holm over the 3 tests (the best taken as given)\n"
    )
    assert text in repr(result)
    # The default names Hsu's MCB, with how its null distribution was computed.
    mcb = tied_with_best(sample, n_draws=500)
    assert repr(mcb).startswith(
        f"{len(mcb.tied)} of 4 systems tied with the best, {mcb.best} (Hsu's MCB, α=0.05):\n"
        "Hsu's multiple comparisons with the best (unconstrained): simultaneous intervals from "
        "the largest |t| over all 6 paired differences, multivariate t with 59 df and the "
        "users' covariance (500 Monte Carlo draws)\n| rank | system | nDCG@10 |"
    )
    assert "| p (Hsu's MCB, α=0.05) |" in mcb.table()
    assert "randomised Tukey HSD" in tied_with_best(sample, test="tukey", n_resamples=20).table()

    # SystemScores.table: unchanged without ``tied``, one more column with it.
    plain = sample.table()
    assert plain.splitlines()[0] == "| rank | system | nDCG@10 | 95% CI | Borda |"
    marked = sample.table(tied=result).splitlines()
    assert marked[0] == plain.splitlines()[0] + " tied with best (Holm, α=0.05) |"
    assert marked[1] == "|---|---|---|---|---|---|"
    for old, new in zip(plain.splitlines()[2:], marked[2:], strict=True):
        name = old.split(" | ")[1]
        assert new == old + (" = |" if name in result.tied else "  |")
    assert sum(line.endswith(" = |") for line in marked[2:]) == 3
    other = SystemScores(
        names=("x", "y"), per_user=np.arange(6.0).reshape(3, 2), user_ids=np.arange(3), name="o"
    )
    with pytest.raises(ValueError, match=r"\btied covers systems \['x', 'y'\]"):
        sample.table(tied=tied_with_best(other))


@pytest.mark.parametrize(
    "p, method, name",
    [
        ([0.1, 1.2], "holm", "p"),
        ([0.1, -0.01], "bh", "p"),
        ([0.1, np.nan], "bh", "p"),
        ([0.1, np.inf], "bonferroni", "p"),
        ([[0.1, 0.2]], "holm", "p"),
        (0.1, "holm", "p"),
        ([0.1], "hommel", "method"),
        ([0.1], None, "method"),
    ],
)
def test_adjust_p_values_rejects_bad_input(p, method, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b") as info:
        adjust_p_values(p, method)
    if name == "method":
        assert repr(method) in str(info.value)


def test_paired_t_tests_rejects_unknown_correction():
    with pytest.raises(ValueError, match=r"correction .*'sidak'"):
        paired_t_tests(seeded_metric_sample(0), correction="sidak")
    with pytest.raises(ValueError, match="unknown test 'sidak'"):
        discriminative_power({"m": seeded_metric_sample(0)}, tests=("sidak",))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"alpha": "0.05"}, "alpha"),
        ({"alpha": True}, "alpha"),
        ({"correction": "sidak"}, "correction"),
        ({"correction": "holm", "test": "tukey"}, "correction"),
        ({"correction": "holm"}, "correction"),
        ({"correction": "bonferroni", "test": "mcb"}, "correction"),
        ({"correction": "sidak", "test": "t"}, "correction"),
        ({"test": "MCB"}, "test"),
        ({"test": None}, "test"),
        ({"n_draws": 0}, "n_draws"),
        ({"n_draws": 1.5}, "n_draws"),
        ({"correction": "bh", "test": "tukey"}, "correction"),
        ({"test": "wilcoxon"}, "test"),
        ({"test": "tukey", "n_resamples": 0}, "n_resamples"),
    ],
)
def test_tied_with_best_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b") as info:
        tied_with_best(tied_pool(), **kwargs)
    assert repr(kwargs[name]) in str(info.value) or name == "alpha"


def test_tied_with_best_rejects_bad_samples():
    one_system = SystemScores(
        names=("a",), per_user=np.zeros((5, 1)), user_ids=np.arange(5), name="m"
    )
    with pytest.raises(ValueError, match=r"sample.*2 systems.*got 1"):
        tied_with_best(one_system)
    one_user = SystemScores(
        names=("a", "b"), per_user=np.zeros((1, 2)), user_ids=np.arange(1), name="m"
    )
    with pytest.raises(ValueError, match=r"sample.*2 users.*got 1"):
        tied_with_best(one_user)
    nan = SystemScores(
        names=("a", "b"), per_user=[[0.1, 0.2], [np.nan, 0.3]], user_ids=np.arange(2), name="m"
    )
    with pytest.raises(ValueError, match=r"sample\.per_user has nan for user row 1, system 'a'"):
        tied_with_best(nan)
    prefs = PreferenceMatrix(
        names=("a", "b"),
        per_user=np.zeros((3, 2, 2)),
        user_ids=np.arange(3),
        name="RPP",
        n_excluded_users=0,
    )
    with pytest.raises(TypeError, match="sample must be a SystemScores"):
        tied_with_best(prefs)


@pytest.mark.parametrize("test", ["mcb", "t"])
def test_two_systems_without_spread(test):
    """Identical systems are tied (p = 1); a constant shift is decided by the difference (p = 0)."""
    x = np.arange(10.0)[:, None] / 8  # dyadic: x + 0.5 − x is exactly 0.5
    same = SystemScores(
        names=("a", "b"), per_user=np.hstack([x, x]), user_ids=np.arange(10), name="m"
    )
    result = tied_with_best(same, test=test)
    assert result.best == "a" and result.tied == ("a", "b") and list(result.p_value) == [1.0, 1.0]
    shifted = SystemScores(
        names=("a", "b"), per_user=np.hstack([x, x + 0.5]), user_ids=np.arange(10), name="m"
    )
    result = tied_with_best(shifted, test=test)
    assert result.best == "b" and result.tied == ("b",) and result.p_value[1] == 0.0


def test_mcb_pairs_without_spread_among_three_systems():
    """a and b identical (their pair has no spread and leaves the null distribution), c = a +
    0.5 exactly: c is best; a and b lie exactly 0.5 below it (p = 0, intervals of width 0)."""
    rng = np.random.default_rng(4)
    x = np.round(rng.random((30, 1)) * 64) / 64  # dyadic, so c − a is exactly 0.5
    sample = SystemScores(
        names=("a", "b", "c"), per_user=np.hstack([x, x, x + 0.5]), user_ids=np.arange(30), name="m"
    )
    result = tied_with_best(sample)
    assert result.names == ("c", "a", "b") and result.tied == ("c",)
    assert list(result.p_value) == [1.0, 0.0, 0.0]
    expected = [[0.5, 0.5], [-0.5, -0.5], [-0.5, -0.5]]  # means: exact up to rounding
    np.testing.assert_allclose(result.interval, expected, rtol=0, atol=1e-15)


def two_systems(seed, n_users=25):
    rng = np.random.default_rng(seed)
    x = rng.random((n_users, 1)) + [0.0, -0.04] + 0.1 * rng.standard_normal((n_users, 2))
    return SystemScores(("a", "b"), x, np.arange(n_users), "m")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mcb_of_two_systems_is_scipys_paired_t_test_and_interval(seed):
    """One pair: the largest |t| is Student's |t|, so MCB's p-value and intervals are those of
    scipy's paired t-test (exactly, no Monte Carlo)."""
    sample = two_systems(seed)
    result = tied_with_best(sample)
    best, other = (sample.per_user[:, sample.index(n)] for n in result.names)
    t = stats.ttest_rel(best, other)
    assert result.p_value[1] == pytest.approx(t.pvalue, rel=1e-9) and result.p_value[0] == 1.0
    lo, hi = t.confidence_interval(0.95)
    np.testing.assert_allclose(result.interval, [[lo, hi], [-hi, -lo]], rtol=1e-9)
    assert result.critical_value == pytest.approx(stats.t.ppf(0.975, 24), rel=1e-12)
    assert (result.names[1] in result.tied) == (t.pvalue >= 0.05) == (hi >= 0)


def test_mcb_intervals_of_three_systems_match_a_quadrature_by_hand():
    """A 3-system pool with unequal variances and correlations: the critical value, p-values
    and simultaneous intervals of Hsu's MCB equal those computed from the formulas (module
    docstring) with the law of the largest |t| integrated numerically, up to the Monte Carlo
    error of the 100,000 draws."""
    from scipy import optimize

    rng = np.random.default_rng(21)
    n = 40
    mix = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.3, 0.5, 1.2]])
    x = rng.standard_normal((n, 3)) @ mix.T + [0.0, -0.12, -0.8]
    sample = SystemScores(("a", "b", "c"), x, np.arange(n), "m")
    result = tied_with_best(sample)
    cov, means = np.cov(x, rowvar=False), x.mean(axis=0)

    c = optimize.brentq(lambda q: max_abs_t_cdf_three(cov, n - 1, q) - 0.95, 1.5, 4.0, xtol=1e-6)
    density = (
        max_abs_t_cdf_three(cov, n - 1, c + 0.01) - max_abs_t_cdf_three(cov, n - 1, c - 0.01)
    ) / 0.02
    # Standard error of a Monte Carlo (1 − α) quantile: sqrt(α(1 − α)/B) / density; 4 of them.
    tol_c = 4 * np.sqrt(0.05 * 0.95 / 100_000) / density
    assert result.critical_value == pytest.approx(c, abs=tol_c)

    se = np.sqrt((np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov) / n)
    expected, p = np.empty((3, 2)), np.empty(3)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        expected[i] = [
            min(means[i] - means[j] - c * se[i, j] for j in others),
            min(means[i] - means[j] + c * se[i, j] for j in others),
        ]
        t_worst = max((means[j] - means[i]) / se[i, j] for j in others)
        p[i] = 1.0 if t_worst <= 0 else 1 - max_abs_t_cdf_three(cov, n - 1, t_worst)
    order = [sample.index(name) for name in result.names]
    assert result.names == ("a", "b", "c")
    np.testing.assert_allclose(result.interval, expected[order], atol=tol_c * se.max())
    # p-values: Monte Carlo estimates, 4 binomial standard errors (+ the 1/(B + 1) offset).
    tol_p = 4 * np.sqrt(p * (1 - p) / 100_000) + 1 / 100_001
    assert np.all(np.abs(result.p_value - p[order]) <= tol_p)
    assert 0.05 < p[1] < 0.95 and p[2] < 0.01  # b undecided, c clearly worse
    assert result.tied == ("a", "b")


@pytest.mark.parametrize("m", [3, 5, 10])
def test_mcb_critical_value_is_the_studentised_range_for_exchangeable_scores(m):
    """With a compound-symmetric sample covariance (built exactly, from orthonormal centred
    columns) every pair has the same standard error and the largest |t| is the studentised
    range of m means divided by √2: scipy's studentized_range gives c."""
    rng = np.random.default_rng(m)
    n = 50
    g = rng.standard_normal((n, m + 1))
    q, _ = np.linalg.qr(g - g.mean(axis=0))
    x = 0.3 * q[:, :m] + 0.5 * q[:, [m]] + np.linspace(0, 0.01, m)
    cov = np.cov(x, rowvar=False)
    np.testing.assert_allclose(cov, (0.09 * np.eye(m) + 0.25) / (n - 1), atol=1e-15)
    result = tied_with_best(SystemScores(tuple(f"s{i}" for i in range(m)), x, np.arange(n), "m"))
    c = stats.studentized_range.ppf(0.95, m, n - 1) / np.sqrt(2)
    h = 1e-3
    density = (
        stats.studentized_range.cdf(np.sqrt(2) * (c + h), m, n - 1)
        - stats.studentized_range.cdf(np.sqrt(2) * (c - h), m, n - 1)
    ) / (2 * h)
    tol_c = 4 * np.sqrt(0.05 * 0.95 / 100_000) / density
    assert result.critical_value == pytest.approx(c, abs=tol_c)


def correlated_pool(rng, m, replicates, n_users, shift=None):
    """Per-user scores (replicates × users × m): a user effect shared by all systems, a
    two-factor term and system noise of unequal variance, so that neither the variances nor
    the correlations of the pairs are equal (no exchangeability)."""
    loadings = 0.5 * rng.standard_normal((m, 2))
    sd = rng.uniform(0.5, 1.5, m)
    cov = 0.6 + loadings @ loadings.T + np.diag(sd**2)
    x = rng.standard_normal((replicates, n_users, m)) @ np.linalg.cholesky(cov).T
    return x if shift is None else x + shift


#: Replicates and users of the Monte Carlo checks of the family-wise error.
REPLICATES, USERS = 2000, 200


@pytest.mark.parametrize("m", [2, 3, 5, 10])
def test_mcb_keeps_the_family_wise_error_when_all_systems_are_equal(m):
    """Under the global null every system is tied with the true best, so any exclusion is an
    error. Over 2,000 pools of 200 users MCB excludes one in at most α + 3 binomial standard
    errors of the pools; the old default, Holm over the t-tests against the best the data
    chose, exceeds α by more than 3 of its standard errors at M = 10. MCB runs with 2,000 draws
    and a seed per pool: its p-value (1 + #{max ≥ t}) / (1 + B) has level α for any B when the
    draws follow the statistic's law, so fewer draws cost power, not level."""
    rng = np.random.default_rng(100 + m)
    pools = correlated_pool(rng, m, REPLICATES, USERS)
    names = tuple(f"s{i}" for i in range(m))
    mcb = holm = 0
    for r, x in enumerate(pools):
        sample = SystemScores(names, x, np.arange(USERS), "m")
        mcb += len(tied_with_best(sample, seed=r, n_draws=2000).tied) < m
        holm += len(tied_with_best(sample, test="t").tied) < m
    alpha, binomial_se = 0.05, np.sqrt(0.05 * 0.95 / REPLICATES)
    assert mcb / REPLICATES <= alpha + 3 * binomial_se
    if m == 10:
        rate = holm / REPLICATES
        assert rate - 3 * np.sqrt(rate * (1 - rate) / REPLICATES) > alpha


def test_mcb_power_excludes_systems_worse_by_three_tenths_of_a_standard_deviation():
    """Five systems, compound-symmetric per-user scores (variance 1, correlation 0.5, so each
    paired difference has standard deviation 1) over 200 users; s0 is better than the other
    four by δ = 0.3. A worse system is excluded at least when its t against s0, noncentral t
    with 199 df and noncentrality 0.3·√200 = 4.24, passes c (the studentised range's 95 %
    quantile / √2, 2.75): probability 0.930 by scipy's nct. Over 1,000 pools the worse systems
    are excluded at that rate or more on average (3 binomial standard errors of one system's
    rate), and s0 is never excluded (its exclusion is the family-wise error)."""
    m, replicates, delta = 5, 1000, 0.3
    rng = np.random.default_rng(7)
    common = rng.standard_normal((replicates, USERS, 1))
    x = np.sqrt(0.5) * (common + rng.standard_normal((replicates, USERS, m)))
    x[:, :, 0] += delta
    names = tuple(f"s{i}" for i in range(m))
    excluded = np.zeros(m)
    for r, pool in enumerate(x):
        tied = tied_with_best(
            SystemScores(names, pool, np.arange(USERS), "m"), seed=r, n_draws=2000
        )
        excluded += [name not in tied.tied for name in names]
    rate = excluded / replicates
    c = stats.studentized_range.ppf(0.95, m, USERS - 1) / np.sqrt(2)
    expected = stats.nct.sf(c, USERS - 1, delta * np.sqrt(USERS))
    assert 0.925 < expected < 0.935
    assert rate[1:].mean() >= expected - 3 * np.sqrt(expected * (1 - expected) / replicates)
    assert rate[0] == 0.0


def test_scores_near_the_float_limit_test_as_the_same_scores_rescaled():
    # Sums over users of scores near 1e308 overflow; the tests must not. Their t statistics do
    # not depend on the scale, so the same scores divided by 1e300 (an independent route, far
    # from the limit) give the same p-values, and scipy's paired t-test gives them too.
    rng = np.random.default_rng(0)
    big = rng.random((30, 3)) * 0.8e308 + np.array([0.0, 0.05e308, 0.1e308])
    small = big / 1e300
    names = ("a", "b", "c")
    at_limit, rescaled = (SystemScores(names, x, np.arange(30), "m") for x in (big, small))
    np.testing.assert_allclose(at_limit.means, rescaled.means * 1e300, rtol=1e-14)
    t_big, t_small = paired_t_tests(at_limit, "none"), paired_t_tests(rescaled, "none")
    np.testing.assert_allclose(t_big.p_value, t_small.p_value, rtol=1e-10)
    np.testing.assert_allclose(t_big.difference, t_small.difference * 1e300, rtol=1e-10)
    scipy_p = stats.ttest_rel(small[:, 0], small[:, 2]).pvalue
    assert t_big.p_value[0, 2] == pytest.approx(scipy_p, rel=1e-10)
    for test in ("mcb", "t", "tukey"):
        b, s = tied_with_best(at_limit, test=test), tied_with_best(rescaled, test=test)
        np.testing.assert_allclose(b.p_value, s.p_value, rtol=1e-10)
        np.testing.assert_allclose(b.difference, s.difference * 1e300, rtol=1e-10)
        assert b.names == s.names and b.tied == s.tied
    mcb = tied_with_best(at_limit)
    np.testing.assert_allclose(mcb.interval, tied_with_best(rescaled).interval * 1e300, rtol=1e-10)
    np.testing.assert_allclose(
        randomised_tukey_hsd(at_limit).p_value, randomised_tukey_hsd(rescaled).p_value
    )


def test_a_mean_difference_beyond_the_float_range_is_refused():
    # mean(a) − mean(b) = 2.7e308 has no float64.
    scores = SystemScores(
        ("a", "b"), np.array([[1e308, -1e308], [1.7e308, -1.7e308]]), np.arange(2), "m"
    )
    with pytest.raises(ValueError, match=r"mean difference of systems 'a' and 'b' .*beyond"):
        paired_t_tests(scores)
