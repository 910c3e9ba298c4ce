"""Ranking policies and their exposure: the Rao–Blackwellised exposure of a Plackett–Luce
target and the per-context candidate sums.

References: exposures by enumerating every partial ordering of the candidates (in exact
rational arithmetic for scores thousands apart), hand calculation, and the closed form of
equal scores.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import scipy.sparse as sp
from test_feed_log import small_log
from test_plackett_luce import exact_marginals, exact_weights

from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.policies import (
    DeterministicRanker,
    Exposure,
    LoggedRanking,
    PlackettLuceRanker,
    candidate_sums,
)
from recpack_ope.propensity.discount import ExponentialDiscount, LogDiscount


def enumerated_exposure(log_weights, delta):
    """ε(i) = Σ_r P(item i at rank r) δ(r), summing the PL probability of every ordering of
    the first len(delta) ranks."""
    w = np.exp(np.asarray(log_weights, dtype=float))
    out = np.zeros(w.size)
    for ordering in itertools.permutations(range(w.size), len(delta)):
        p, remaining = 1.0, w.sum()
        for item in ordering:
            p *= w[item] / remaining
            remaining -= w[item]
        out[list(ordering)] += p * np.asarray(delta)
    return out


def every_item_log(n_contexts, n_items, rng):
    """One session per context showing every item, so that exposure() covers them all."""
    return FeedLog.from_arrays(
        session=np.repeat(np.arange(n_contexts), n_items),
        item=np.concatenate([rng.permutation(n_items) for _ in range(n_contexts)]),
        rank=np.tile(np.arange(1, n_items + 1), n_contexts),
        reward=rng.integers(0, 2, n_contexts * n_items).astype(float),
        propensity=rng.uniform(0.2, 1.0, n_contexts * n_items),
        n_items=n_items,
    )


def rao_blackwell(scores, n_samples, seed=0, **kw):
    return PlackettLuceRanker(
        scores, method="monte_carlo", rao_blackwell=True, n_samples=n_samples, seed=seed, **kw
    )


def test_rao_blackwellised_exposure_is_within_its_standard_error_of_enumeration():
    rng = np.random.default_rng(0)
    n_contexts, n_items = 150, 6
    log = every_item_log(n_contexts, n_items, rng)
    scores = rng.normal(size=(n_contexts, n_items))
    d = ExponentialDiscount(0.7, cutoff=3)
    exact = np.stack([enumerated_exposure(s / 0.7, d.weights(3)) for s in scores])[
        log.context, log.item
    ]
    est = rao_blackwell(scores, 128, temperature=0.7).exposure(log, d)
    z = (est.values - exact) / est.standard_error
    # Each z is about Student t with 127 degrees of freedom; contexts are independent.
    per_context = np.bincount(log.context, weights=z) / n_items
    assert abs(per_context.mean()) < 4 * per_context.std() / np.sqrt(n_contexts)
    assert 0.8 < z.std() < 1.25
    assert np.mean(np.abs(z) > 3) < 0.02  # 0.3 % expected
    # With few draws a row's standard error is noisy (all 8 draws of a rare order can agree),
    # but its square still estimates the variance without bias: over the 150 contexts the mean
    # squared error and the mean squared standard error agree (ratio 1.0 ± 0.1 over seeds).
    few = rao_blackwell(scores, 8, temperature=0.7).exposure(log, d)
    assert 0.6 < np.mean((few.values - exact) ** 2) / np.mean(few.standard_error**2) < 1.5
    # The estimate's error: approximation_error bounds its standard deviation (triangle
    # inequality within a context), so 4 of it is exceeded with probability below 1e-4.
    exact_dcg = logged_dcg(
        log, PlackettLuceRanker(scores, temperature=0.7, method="exact"), discount=d
    )
    sampled = logged_dcg(log, rao_blackwell(scores, 32, temperature=0.7), discount=d)
    assert exact_dcg.approximation_error == 0 < sampled.approximation_error
    assert abs(sampled.value - exact_dcg.value) < 4 * sampled.approximation_error
    assert "Monte Carlo approximation error" in repr(sampled)
    # As many plain draws err several times more (each sees one rank per item; about 9× here,
    # with 6 candidates, and more the more candidates there are).
    plain = logged_dcg(
        log,
        PlackettLuceRanker(scores, temperature=0.7, method="monte_carlo", n_samples=32),
        discount=d,
    )
    assert plain.approximation_error > 5 * sampled.approximation_error


@pytest.mark.parametrize("rows", ["few", "all"])
@pytest.mark.parametrize("spread", [0.5, 3.0])
def test_rao_blackwellised_exposure_is_unbiased(rows, spread):
    # 40 candidates and 3 ranks (59,280 orderings). spread 0.5: every weight light (the
    # total exceeds 2n); 3.0: a few heavy items hold most of the weight. Asked for "all" rows,
    # light items go through the summed polynomial; asked for one row at a time, every item
    # is evaluated draw by draw.
    rng = np.random.default_rng(1)
    n_items, n_seeds = 40, 300
    scores = np.sort(rng.normal(size=n_items) * spread)[::-1]
    d = LogDiscount(cutoff=3)
    exact = enumerated_exposure(scores, d.weights(3))
    log = every_item_log(1, n_items, rng)
    if rows == "all":
        asked = [np.arange(n_items)]
    else:
        asked = [np.flatnonzero(log.item == i) for i in (0, 1, 20, 39)]
    for at in asked:
        draws = np.array(
            [
                rao_blackwell(scores[None, :], 4, seed=s).exposure(log, d, at).values
                for s in range(n_seeds)
            ]
        )
        # The mean of 300 independent estimates is within 4.5 of its standard errors of the
        # truth (probability of failing anywhere among the 40 items below 3e-4).
        se = draws.std(axis=0, ddof=1) / np.sqrt(n_seeds)
        np.testing.assert_array_less(
            np.abs(draws.mean(axis=0) - exact[log.item[at]]), 4.5 * se + 1e-15
        )


@pytest.mark.parametrize("rao_blackwell", [True, False])
def test_approximation_error_covers_draws_shared_by_every_context(rao_blackwell):
    """One score per item is one policy, drawn once for the whole log: every row's error moves
    with the same draws, so the reported error adds them up (it summed them in quadrature per
    context, 17x below the actual spread with Rao-Blackwellisation). Over 30 seeds the RMS
    deviation from the exact value must stay within the mean reported error; 30 deviations
    estimate an RMS to about 13 % (1/sqrt(60)), hence the margin of 1.4. The
    Rao-Blackwellised error is also no looser than 3x the spread (plain Monte Carlo's bound
    is, since its errors partly cancel)."""
    rng = np.random.default_rng(0)
    n_sessions, n_items, depth = 1000, 200, 10
    session = np.repeat(np.arange(n_sessions), depth)
    item = np.concatenate([rng.choice(n_items, depth, replace=False) for _ in range(n_sessions)])
    rank = np.tile(np.arange(1, depth + 1), n_sessions)
    reward = (rng.random(session.size) < 0.3 / rank).astype(float)
    log = FeedLog.from_arrays(
        session, item, rank, reward, propensity=np.full(session.size, 0.05), n_items=n_items
    )
    scores, discount = rng.normal(size=n_items), LogDiscount(10)
    exact = logged_dcg(log, PlackettLuceRanker(scores, method="exact"), discount=discount).value
    deviations, errors = [], []
    for seed in range(30):
        target = PlackettLuceRanker(
            scores, method="monte_carlo", n_samples=8, rao_blackwell=rao_blackwell, seed=seed
        )
        estimate = logged_dcg(log, target, discount=discount)
        deviations.append(estimate.value - exact)
        errors.append(estimate.approximation_error)
    rms, reported = np.sqrt(np.mean(np.square(deviations))), np.mean(errors)
    assert rms <= 1.4 * reported
    if rao_blackwell:
        assert reported <= 3 * rms


def test_rank_one_and_weights_beyond_float_range_are_exact():
    rng = np.random.default_rng(2)
    log = every_item_log(5, 6, rng)
    scores = rng.normal(size=(5, 6))
    one = rao_blackwell(scores, 8).exposure(log, LogDiscount(cutoff=1))
    w = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        one.values, (w / w.sum(axis=1, keepdims=True))[log.context, log.item], rtol=1e-14
    )
    assert not one.standard_error.any()
    # Scores 1,000 apart at temperature 1: ratios of e^-1000 leave float range, computed exactly.
    wide = scores.copy()
    wide[:, 0] += 1000.0
    wide[:, 1] -= 1000.0
    d = LogDiscount(cutoff=3)
    est = rao_blackwell(wide, 8).exposure(log, d)
    # Item 0 takes rank 1; item 1 never reaches rank 3 (probability ~e^-1000); the other four
    # share ranks 2 and 3.
    exact = np.zeros((5, 6))
    exact[:, 0] = d.weights(1)[0]
    for c in range(5):
        exact[c, 2:] = enumerated_exposure(scores[c, 2:], d.weights(3)[1:])
    np.testing.assert_allclose(est.values, exact[log.context, log.item], atol=1e-12)
    assert not est.standard_error.any()


@pytest.mark.parametrize("kind", ["dense", "sparse", "one policy"])
def test_candidate_sums_agree_with_enumeration(kind):
    rng = np.random.default_rng(3)
    n_contexts, n_items = 20, 7
    log = every_item_log(n_contexts, n_items, rng)
    scores = rng.normal(size=(n_contexts, n_items))
    candidates = rng.random((n_contexts, n_items)) < 0.8
    candidates[:, :3] = True  # at least the 3 ranks
    if kind == "dense":
        given = np.where(candidates, scores, -np.inf)
    elif kind == "sparse":
        given = sp.csr_matrix(np.where(candidates, scores, 0.0))
        candidates = given.toarray() != 0
    else:
        given, scores, candidates = (
            scores[0],
            np.tile(scores[0], (n_contexts, 1)),
            np.ones_like(candidates),
        )
    d = LogDiscount(cutoff=3)
    exact = np.zeros((n_contexts, n_items))
    for c in range(n_contexts):
        exact[c, candidates[c]] = enumerated_exposure(scores[c, candidates[c]], d.weights(3))
    policy = rao_blackwell(given, 400)
    total, _ = candidate_sums(policy, log, d)
    # The same policy's standard errors on the logged rows bound those of the candidates'
    # exposures; the sum over ≤ 7 candidates errs by at most the sum of theirs.
    se = np.bincount(
        log.context, weights=policy.exposure(log, d).standard_error, minlength=n_contexts
    )
    np.testing.assert_array_less(np.abs(total - exact.sum(axis=1)), 5 * se + 1e-12)
    entries = {
        int(c): (items, eps) for cs, items, eps in policy.candidate_exposures(log, d) for c in cs
    }
    for c, (items, eps) in entries.items():
        np.testing.assert_array_equal(items, np.flatnonzero(candidates[c]))
        assert np.all((eps >= 0) & (eps <= 1))


def test_bad_scores_are_named_as_one_context_at_a_time_would():
    rng = np.random.default_rng(4)
    log = every_item_log(4, 5, rng)
    d = LogDiscount(cutoff=3)
    cases = {
        "Plackett–Luce scores are NaN in context 2": (2, 1, np.nan),
        "context 1 has no candidate with a finite score": (1, slice(None), -np.inf),
        "Plackett–Luce scores must be finite or -inf; context 3 has \\+inf": (3, 0, np.inf),
    }
    for message, (row, col, value) in cases.items():
        scores = rng.normal(size=(4, 5))
        scores[row, col] = value
        for policy in (PlackettLuceRanker(scores, method="monte_carlo"), rao_blackwell(scores, 4)):
            with pytest.raises(ValueError, match=message):
                policy.exposure(log, d)
    spread = np.zeros((4, 5))
    spread[2, 0] = 1e300
    with pytest.raises(
        ValueError, match="scores / temperature overflows in context 2: scores spanning 1e\\+300"
    ):
        rao_blackwell(spread, 4, temperature=1e-10).exposure(log, d)
    stored = sp.csr_matrix(np.ones((4, 5)))
    stored.data[7] = np.nan  # context 1
    with pytest.raises(ValueError, match="NaN in context 1"):
        rao_blackwell(stored, 4).exposure(log, d)
    with pytest.raises(ValueError, match="rao_blackwell must be True or False, got 'yes'"):
        PlackettLuceRanker(np.zeros((4, 5)), rao_blackwell="yes")


def test_exposure_error_bound_adds_shared_draws_and_squares_independent_ones():
    exposure = Exposure(np.array([0.5, 0.2, 0.1]), np.array([0.1, 0.2, 0.3]), np.array([0, 0, 1]))
    # groups {0, 1} share draws: 1·0.1 + 2·0.2 = 0.5; group 2 alone: 0.3 (weights' signs ignored)
    assert exposure.error_bound(np.array([1.0, -2.0, 1.0]), np.array([4, 5, 6])) == pytest.approx(
        0.34**0.5
    )
    by_context = Exposure(exposure.values, exposure.standard_error)
    assert by_context.error_bound(np.ones(3), np.array([0, 1, 2])) == pytest.approx(0.14**0.5)
    part = exposure.take(np.array([2, 0]))
    assert part.values.tolist() == [0.1, 0.5] and part.groups.tolist() == [1, 0]
    assert Exposure(np.ones(2)).error_bound(np.ones(2), np.zeros(2, dtype=int)) == 0.0
    for bad in (np.array([0, -1, 0]), np.array([0.0, 1.0, 0.0]), np.array([0, 1])):
        with pytest.raises(ValueError, match="Exposure groups must be integers >= 0"):
            Exposure(exposure.values, exposure.standard_error, bad)


def test_plackett_luce_ranker_with_scores_thousands_apart():
    # Used to be refused ("weight 0.0"): exp(-2000) underflows, the ranking is still defined.
    scores = np.array([0.0, -2000.0, -2001.0])
    log = FeedLog.from_arrays(
        [0, 0, 0], [0, 1, 2], [1, 2, 3], [1.0, 0.0, 0.0], propensity=[1.0, 1.0, 1.0]
    )
    disc = LogDiscount(cutoff=3)
    got = PlackettLuceRanker(scores, method="exact").exposure(log, disc).values
    expected = exact_marginals(exact_weights(scores, True), 3) @ disc.weights(3)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_exact_exposure_over_a_huge_catalogue_refuses_with_its_cost():
    log = FeedLog.from_arrays([0], [0], [1], [1.0], n_items=200_000, propensity=[1.0])
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"200000 items over 200000 ranks .* 298\.0 GiB"):
        PlackettLuceRanker(np.linspace(0.0, 1.0, 200_000), method="exact").exposure(
            log, LogDiscount()
        )
    assert time.perf_counter() - start < 5
    # With a cutoff (the feed length) the same catalogue is cheap: equal scores show every
    # item at each of the 3 ranks with probability 1/200,000.
    cut = PlackettLuceRanker(np.zeros(200_000), method="exact").exposure(log, LogDiscount(cutoff=3))
    assert cut.values[0] == pytest.approx((1 + 1 / np.log2(3) + 1 / 2) / 200_000, rel=1e-12)


def pl(**kwargs):
    return PlackettLuceRanker(np.zeros(3), **kwargs)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pl(temperature="1"), "temperature.*'1'"),
        (lambda: pl(temperature=None), "temperature.*None"),
        (lambda: pl(temperature=True), "temperature.*True"),
        (lambda: pl(temperature=1j), "temperature.*1j"),
        (lambda: pl(temperature=np.inf), "temperature.*inf"),
        (lambda: pl(n_samples=1), r"n_samples.*\b1\b"),
        (lambda: pl(seed="a"), "seed.*'a'"),
        (lambda: pl(seed=-1), "seed.*-1"),
        (lambda: pl(seed=1.5), r"seed.*1\.5"),
        (lambda: pl(method=["exact"]), r"method.*\['exact'\]"),
    ],
)
def test_plackett_luce_ranker_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def corrupt_csr(kind: str) -> sp.csr_matrix:
    """A 2 × 3 CSR matrix whose arrays were edited into an inconsistent state."""
    m = sp.csr_matrix(np.arange(1.0, 7.0).reshape(2, 3))
    if kind == "index":
        m.indices[4] = 7
    else:
        m.indptr[1] = 7
    return m


CORRUPT_SCORES = [
    ("index", r"scores is a corrupt sparse matrix.*entry 4 \(row 1\).*column index 7"),
    ("indptr", r"scores is a corrupt CSR matrix.*indptr.*row 1 \(7 → 6\)"),
]


@pytest.mark.parametrize("kind, message", CORRUPT_SCORES)
def test_corrupt_sparse_scores_are_refused_before_ranking(kind, message):
    with pytest.raises(ValueError, match=message):
        PlackettLuceRanker(corrupt_csr(kind)).exposure(small_log(), LogDiscount())


def test_plackett_luce_scores_are_checked_when_ranking():
    log = small_log()
    disc = LogDiscount()
    with pytest.raises(ValueError, match=r"scores.*complex.*1j at position 0"):
        PlackettLuceRanker(np.array([1j, 0, 0])).exposure(log, disc)
    with pytest.raises(ValueError, match=r"scores.*1152921504606846976 at item 0"):
        PlackettLuceRanker(np.array([2**60, 2**60 + 1, 0])).exposure(log, disc)
    with pytest.raises(ValueError, match=r"scores.*1152921504606846976 at context 1 item 0"):
        PlackettLuceRanker(np.array([[0, 1, 2], [2**60, 0, 1]])).exposure(log, disc)
    with pytest.raises(ValueError, match=r"scores has complex dtype"):
        PlackettLuceRanker(sp.csr_matrix(np.ones((2, 3)) * 1j)).exposure(log, disc)
    with pytest.raises(ValueError, match=r"scores / temperature overflows.*spanning inf"):
        PlackettLuceRanker(np.array([1e308, -1e308, 0.0])).exposure(log, disc)


def test_exposure_objects_are_checked():
    for values, message in [
        (np.array([np.nan, 1, 1, 1]), "Exposure values of row 0 is nan"),
        (np.array([-5.0, 1, 1, 1]), "Exposure values of row 0 is -5.0"),
        (np.ones((4, 1)), r"Exposure values.*1-D.*\(4, 1\)"),
        (np.array([1j, 1, 1, 1]), "Exposure values has complex dtype"),
    ]:
        with pytest.raises(ValueError, match=message):
            Exposure(values)
    with pytest.raises(
        ValueError, match=r"Exposure standard_error has shape \(2,\), values \(4,\)"
    ):
        Exposure(np.ones(4), np.ones(2))
    with pytest.raises(ValueError, match="Exposure standard_error of row 1 is -1.0"):
        Exposure(np.ones(4), np.array([0.0, -1.0, 0.0, 0.0]))


def next_item_by_hand(scores, prefix, temperature=1.0):
    """Plackett–Luce next-item distribution after ``prefix``, candidates = finite scores."""
    w = np.where(np.isfinite(scores), np.exp(np.asarray(scores, dtype=float) / temperature), 0)
    w[list(prefix)] = 0
    return w / w.sum() if w.sum() > 0 else w


def test_plackett_luce_conditional_distribution_by_hand_and_at_the_logged_items():
    # Context 1 has two candidates, so its session's third row (after both) is empty.
    scores = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, -np.inf, -np.inf, 0.3]])
    log = FeedLog.from_arrays(
        session=[0, 0, 0, 1, 1, 1, 2],
        item=[2, 0, 3, 3, 0, 1, 1],
        rank=[1, 2, 3, 1, 2, 3, 1],
        reward=np.zeros(7),
        context=[0, 0, 0, 1, 1, 1, 0],
        n_items=4,
    )
    policy = PlackettLuceRanker(scores, temperature=0.7)
    dist = policy.conditional_distribution(log)
    assert sp.isspmatrix_csr(dist) and dist.shape == (7, 4)
    prefixes = [[], [2], [2, 0], [], [3], [3, 0], []]
    expected = np.stack(
        [next_item_by_hand(scores[c], p, 0.7) for c, p in zip(log.context, prefixes, strict=True)]
    )
    np.testing.assert_allclose(dist.toarray(), expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(dist.sum(axis=1).A1, [1, 1, 1, 1, 1, 0, 1], rtol=1e-12)
    np.testing.assert_allclose(
        dist[np.arange(7), log.item].A1, policy.conditional_probabilities(log), rtol=1e-12
    )
    # One score per item: the same policy in every context.
    uniform = PlackettLuceRanker.uniform(4).conditional_distribution(log).toarray()
    np.testing.assert_allclose(uniform[2], [0, 0.5, 0, 0.5])


def test_deterministic_and_logged_conditional_distributions():
    # Target order in context 0: 2, 0, 3 (item 1 not a candidate); context 1: 3, 0.
    scores = np.array([[1.0, -np.inf, 3.0, 0.5], [0.0, -np.inf, -np.inf, 2.0]])
    log = FeedLog.from_arrays(
        session=[0, 0, 0, 0, 1, 1, 1],
        item=[2, 0, 3, 1, 0, 3, 2],
        rank=[1, 2, 3, 4, 1, 2, 3],
        reward=np.zeros(7),
        context=[0, 0, 0, 0, 1, 1, 1],
        n_items=4,
    )
    target = DeterministicRanker(scores)
    dist = target.conditional_distribution(log).toarray()
    expected = np.zeros((7, 4))
    for row, item in [(0, 2), (1, 0), (2, 3), (4, 3), (5, 0)]:
        expected[row, item] = 1
    np.testing.assert_array_equal(dist, expected)  # rows 3 and 6: fewer candidates than k
    np.testing.assert_array_equal(
        dist[np.arange(7), log.item], target.conditional_probabilities(log)
    )
    logged = LoggedRanking().conditional_distribution(log).toarray()
    np.testing.assert_array_equal(logged, np.eye(4)[log.item])
