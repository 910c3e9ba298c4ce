"""Bonferroni t-tests, randomised Tukey HSD and discriminative power."""

import itertools

import numpy as np
import pytest
from recpack_ope.rpp import PreferenceMatrix
from recpack_ope.significance import discriminative_power, paired_t_tests, randomised_tukey_hsd
from recpack_ope.systems import SystemScores
from scipy import stats


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
