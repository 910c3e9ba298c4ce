"""Unbiased DCG on logs (Jeunen et al. Eq. 10, §6.2) against hand formulas and the simulator."""

import warnings

import numpy as np
import pytest
from scipy import stats
from test_feed_log import small_log

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.plackett_luce import rank_marginals
from recpack_ope.logged.policies import (
    DeterministicRanker,
    Exposure,
    LoggedRanking,
    PlackettLuceRanker,
)
from recpack_ope.propensity.discount import CustomDiscount, ExponentialDiscount, LogDiscount
from recpack_ope.simulation.world import PopularityPolicy, SimulatedWorld


def _hand_log():
    # session 0 shows items 2, 0, 1; session 1 shows 1, 3 (contexts 0 and 1, 4 items)
    return FeedLog.from_arrays(
        session=[0, 0, 0, 1, 1],
        item=[2, 0, 1, 1, 3],
        rank=[1, 2, 3, 1, 2],
        reward=[1.0, 0.0, 2.0, 1.0, 1.0],
        n_items=4,
    )


def test_deterministic_target_and_logging_weights_are_delta_ratios_by_hand():
    log = _hand_log()
    scores = np.array([[0.0, 3.0, 1.0, 2.0], [5.0, 1.0, 4.0, 3.0]])
    # target ranks: context 0 → 1, 3, 2, 0; context 1 → 0, 2, 3, 1
    d = LogDiscount(cutoff=3)
    delta = lambda r: 0.0 if r > 3 else 1 / np.log2(r + 1)  # noqa: E731
    full = LogDiscount()
    s0 = 1.0 * delta(3) / full(1) + 2.0 * delta(1) / full(3)  # item 2 → rank 3, item 1 → rank 1
    s1 = 1.0 * delta(4) / full(1) + 1.0 * delta(3) / full(2)  # item 1 → rank 4, item 3 → rank 3
    est = logged_dcg(log, DeterministicRanker(scores), discount=d, logging=LoggedRanking())
    np.testing.assert_allclose(est.per_user, [s0, s1], rtol=1e-12)
    assert est.value == pytest.approx((s0 + s1) / 2, rel=1e-12)
    # clipping m = 2: min(2, 1/δ(3)) = 2 for the reward at logged rank 3
    c0 = 1.0 * delta(3) * 1 + 2.0 * delta(1) * 2
    c1 = 1.0 * delta(4) + 1.0 * delta(3) * min(2, 1 / full(2))
    clipped = logged_dcg(
        log, DeterministicRanker(scores), discount=d, logging=LoggedRanking(), clip=2
    )
    np.testing.assert_allclose(clipped.per_user, [c0, c1], rtol=1e-12)


def test_normalised_variants_by_brute_force():
    log = _hand_log()
    scores = np.array([[0.0, 3.0, 1.0, 2.0], [5.0, 1.0, 4.0, 3.0]])
    d, full = LogDiscount(cutoff=3), LogDiscount()
    kw = dict(discount=d, logging=LoggedRanking())
    dcg_s = logged_dcg(log, DeterministicRanker(scores), **kw).per_user
    gains = [np.array([1 / full(1), 2 / full(3)]), np.array([1 / full(1), 1 / full(2)])]
    idcg = np.array([sum(d(np.arange(1, g.size + 1)) * np.sort(g)[::-1]) for g in gains])
    ndcg = logged_dcg(log, DeterministicRanker(scores), normalise="per_user", **kw)
    np.testing.assert_allclose(ndcg.per_user, dcg_s / idcg, rtol=1e-12)
    pn = logged_dcg(log, DeterministicRanker(scores), normalise="post", **kw)
    assert pn.value == pytest.approx(dcg_s.sum() / idcg.sum(), rel=1e-12)
    assert ndcg.name == "logged nDCG@3" and pn.name == "logged pnDCG@3"


def test_m_1_is_the_naive_dcg_and_with_full_exposure_the_average_reward():
    world = SimulatedWorld(n_users=400, n_items=30, seed=3)
    feed = world.log(PopularityPolicy(0.7), feed_length=8, seed=1)
    log = feed.feed_log()
    scores = world.relevance()
    target = DeterministicRanker(scores)
    d = LogDiscount(cutoff=5)
    naive = logged_dcg(log, target, discount=d, clip=1)
    ranks = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1) + 1
    by_hand = np.zeros(world.n_users)
    for u, i, c in zip(feed.user, feed.item, feed.click, strict=True):
        by_hand[u] += c * d(ranks[u, i])
    np.testing.assert_allclose(naive.per_user, by_hand, rtol=1e-12)
    # A target that shows every item with certainty (δ ≡ 1) under m = 1: clicks per session.
    everything = logged_dcg(log, target, discount=CustomDiscount(np.ones(world.n_items)), clip=1)
    assert everything.value == pytest.approx(feed.click.sum() / world.n_users, rel=1e-12)
    # On-policy with a deterministic logging policy the weights are 1 for any m >= 1.
    on_policy = logged_dcg(log, LoggedRanking(), discount=LogDiscount(), logging=LoggedRanking())
    np.testing.assert_allclose(on_policy.per_user, log.per_session(log.reward), rtol=1e-12)


def test_unbiased_within_3_standard_errors_of_the_online_reward_across_replications():
    """Asm. 1–5 hold in the simulator: PL popularity logging, PBM views, clicks = Q·V."""
    world = SimulatedWorld(n_users=600, n_items=40, seed=11)
    scores = world.relevance() + np.random.default_rng(0).normal(0, 0.15, (600, 40))
    d = LogDiscount(cutoff=5)
    truth = world.online_reward(scores, d).value
    pl_scores = np.log(world.popularity) * 0.5 + world.relevance()[0]
    pl_exposure = rank_marginals(np.exp(pl_scores), 5) @ d.weights(5)  # Eq. 8, same for all users
    pl_truth = float((world.relevance() @ pl_exposure).mean())
    z_det, z_pl, ses, values = [], [], [], []
    for seed in range(40):
        log = world.log(PopularityPolicy(1.0), feed_length=12, seed=seed).feed_log()
        est = logged_dcg(log, DeterministicRanker(scores), discount=d)
        values.append(est.value)
        ses.append(est.standard_error)
        z_det.append((est.value - truth) / est.standard_error)
        pl = logged_dcg(log, PlackettLuceRanker(pl_scores), discount=d)
        z_pl.append((pl.value - pl_truth) / pl.standard_error)
    z_det, z_pl = np.array(z_det), np.array(z_pl)
    # A calibrated unbiased estimator has |z| > 3 with probability 0.27 %: allow 1 in 40.
    assert (np.abs(z_det) > 3).sum() <= 1 and (np.abs(z_pl) > 3).sum() <= 1
    # The mean z over 40 independent replications is N(0, 1/40) for an unbiased estimator.
    assert abs(z_det.mean()) < 3 / np.sqrt(40) and abs(z_pl.mean()) < 3 / np.sqrt(40)
    # The reported SE matches the spread across replications (sd of a 40-sample sd ≈ 11 %).
    assert 0.7 < np.std(values, ddof=1) / np.mean(ses) < 1.35


def test_monte_carlo_exposure_agrees_with_exact_within_its_error():
    rng = np.random.default_rng(5)
    n_ctx, n_items = 6, 12
    log = FeedLog.from_arrays(
        session=np.repeat(np.arange(n_ctx), 4),
        item=np.concatenate([rng.choice(n_items, 4, replace=False) for _ in range(n_ctx)]),
        rank=np.tile(np.arange(1, 5), n_ctx),
        reward=rng.integers(0, 2, n_ctx * 4),
        propensity=rng.uniform(0.2, 1.0, n_ctx * 4),
        n_items=n_items,
    )
    scores = rng.normal(size=(n_ctx, n_items))
    scores[0, :3] = -np.inf  # not candidates in context 0
    d = ExponentialDiscount(0.7, cutoff=4)
    exact = PlackettLuceRanker(scores, method="exact").exposure(log, d)
    for c in range(n_ctx):  # by the definition: marginals over that context's candidates
        cand = np.flatnonzero(scores[c] > -np.inf)
        eps = rank_marginals(np.exp(scores[c, cand]), 4) @ d.weights(4)
        rows = np.flatnonzero(log.context == c)
        pos = np.searchsorted(cand, log.item[rows])
        inside = (pos < cand.size) & (cand[np.minimum(pos, cand.size - 1)] == log.item[rows])
        want = np.where(inside, eps[np.minimum(pos, cand.size - 1)], 0.0)
        np.testing.assert_allclose(exact.values[rows], want, rtol=1e-12, atol=1e-15)
    mc = PlackettLuceRanker(scores, method="monte_carlo", n_samples=4000, seed=1).exposure(log, d)
    z = (mc.values - exact.values)[mc.standard_error > 0] / mc.standard_error[mc.standard_error > 0]
    assert np.abs(z).max() < 4.5  # 24 rows: P(max |z| > 4.5) < 2e-4
    assert z.size >= 20
    a = logged_dcg(log, PlackettLuceRanker(scores, method="exact"), discount=d)
    b = logged_dcg(
        log, PlackettLuceRanker(scores, method="monte_carlo", n_samples=4000, seed=1), discount=d
    )
    assert a.approximation_error == 0 and b.approximation_error > 0
    assert abs(a.value - b.value) < 3 * b.approximation_error
    assert "Monte Carlo approximation error" in repr(b)


def test_paired_difference_one_sided_p_equals_scipy():
    world = SimulatedWorld(n_users=300, n_items=25, seed=2)
    log = world.log(PopularityPolicy(1.0), feed_length=10, seed=0).feed_log()
    good, bad = world.relevance(), -world.relevance()
    d = LogDiscount(cutoff=5)
    a = logged_dcg(log, DeterministicRanker(good), discount=d, clip=10)
    b = logged_dcg(log, DeterministicRanker(bad), discount=d, clip=10)
    comparison = a.compare(b)
    assert comparison.p_value_greater == pytest.approx(
        stats.ttest_rel(a.per_user, b.per_user, alternative="greater").pvalue, rel=1e-10
    )
    assert b.compare(a).p_value_greater == pytest.approx(1 - comparison.p_value_greater, abs=1e-12)


def test_errors_name_the_problem():
    log = _hand_log()
    target = DeterministicRanker(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="no propensity column"):
        logged_dcg(log, target, discount=LogDiscount(3))
    with pytest.raises(ValueError, match="reward 2.0 at rank 3 of session 0"):
        logged_dcg(
            log,
            target,
            discount=LogDiscount(3),
            logging=LoggedRanking(),
            logging_discount=CustomDiscount([1.0, 0.5]),
        )
    with pytest.raises(ValueError, match="a curve of 2 ranks but the log shows ranks up to 3"):
        logged_dcg(log, target, discount=CustomDiscount([1.0, 0.5]), logging=LoggedRanking())
    with pytest.raises(TypeError, match="target must be a policy"):
        logged_dcg(log, np.zeros((2, 4)), discount=LogDiscount(3), logging=LoggedRanking())
    with pytest.raises(ValueError, match=r"shape \(2, 3\), the log needs \(2 contexts, 4 items\)"):
        logged_dcg(
            log,
            DeterministicRanker(np.zeros((2, 3))),
            discount=LogDiscount(3),
            logging=LoggedRanking(),
        )
    with pytest.raises(ValueError, match="normalise must be one of"):
        logged_dcg(log, target, discount=LogDiscount(3), logging=LoggedRanking(), normalise="max")
    with pytest.raises(ValueError, match="context 1 has no candidate"):
        scores = np.zeros((2, 4))
        scores[1] = -np.inf
        PlackettLuceRanker(scores).exposure(log, LogDiscount(3))


def test_exposure_of_a_subset_of_rows_equals_the_full_computation():
    world = SimulatedWorld(n_users=200, n_items=30, seed=4)
    log = world.log(PopularityPolicy(1.0), feed_length=6, seed=0).feed_log()
    rows = np.flatnonzero(log.reward > 0)
    d = LogDiscount(cutoff=4)
    scores = world.relevance()
    for policy in (
        DeterministicRanker(scores),
        PlackettLuceRanker(scores[:, :], method="exact", max_exact_contexts=10**6),
        LoggedRanking(),
    ):
        full = policy.exposure(log, d).values
        np.testing.assert_array_equal(policy.exposure(log, d, rows).values, full[rows])
    with pytest.raises(ValueError, match="rows must be 1-D integer indices"):
        LoggedRanking().exposure(log, d, [log.n_rows])


@pytest.mark.parametrize("normalise", [None, "post"])
def test_auto_clip_on_logs_equals_the_fixed_clip_it_selects(normalise):
    world = SimulatedWorld(n_users=400, n_items=40, seed=5)
    log = world.log(PopularityPolicy(0.4), feed_length=10, seed=2).feed_log()
    target = DeterministicRanker(world.relevance())
    kw = dict(discount=LogDiscount(cutoff=5), normalise=normalise)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        auto = logged_dcg(log, target, clip="auto", **kw)
        selection = auto.clip_selection
        for m, value in zip(selection.thresholds, selection.values, strict=True):
            fixed = logged_dcg(log, target, clip=None if np.isinf(m) else m, **kw)
            assert value == pytest.approx(fixed.value, rel=1e-12)
        chosen = logged_dcg(log, target, clip=selection.clip, **kw)
    assert selection.thresholds[0] == np.inf and np.all(np.diff(selection.thresholds[1:]) < 0)
    assert auto.value == pytest.approx(chosen.value, rel=1e-12)
    stem = "logged DCG@5" if normalise is None else "logged pnDCG@5"
    assert auto.name.startswith(f"{stem} (auto m=")
    with pytest.raises(
        ValueError,
        match=r'clip must be a finite number >= 1, None for no clipping or "auto", got -1',
    ):
        logged_dcg(log, target, clip=-1, **kw)


@pytest.mark.parametrize(
    "options",
    [
        {"method": "exact"},
        {"method": "monte_carlo", "n_samples": 4},
        {"method": "monte_carlo", "n_samples": 4, "rao_blackwell": True},
    ],
)
def test_a_log_without_rewards_has_zero_dcg_under_a_per_context_policy(options):
    # No row is rewarded, so no row is evaluated: every session's DCG is 0 (by hand). Per-
    # context scores met an empty set of rows and crashed before.
    session = np.repeat(np.arange(10), 4)
    log = FeedLog.from_arrays(
        session,
        np.tile(np.arange(4), 10),
        np.tile(np.arange(1, 5), 10),
        np.zeros(40),
        propensity=np.full(40, 0.5),
        n_items=6,
    )
    scores = np.random.default_rng(0).normal(size=(log.n_contexts, 6))
    with pytest.warns(ReliabilityWarning, match="no evaluated interaction"):
        estimate = logged_dcg(log, PlackettLuceRanker(scores, **options), discount=LogDiscount(3))
    assert estimate.value == 0.0 and estimate.approximation_error == 0.0


def test_exposure_arrays_must_match_the_log():
    log = small_log()
    disc = LogDiscount()
    with pytest.raises(ValueError, match=r"target exposure has shape \(3,\); the log has 4 rows"):
        logged_dcg(log, Exposure(np.ones(3)), discount=disc)
    with pytest.raises(ValueError, match=r"logging exposure has shape \(2,\)"):
        logged_dcg(log, LoggedRanking(), discount=disc, logging=Exposure(np.ones(2)))
    # A list is an array: the unbiased DCG by hand, Σ c · ε / ε0 per session
    # = (1·1/0.5 + 1·1/0.5) / 2.
    assert logged_dcg(log, Exposure([1.0, 1.0, 1.0, 1.0]), discount=disc).value == pytest.approx(
        2.0
    )


def test_options_of_logged_dcg():
    log = small_log()
    disc = LogDiscount()
    target = DeterministicRanker(np.ones((2, 3)))
    with pytest.raises(ValueError, match="control_variate.*'yes'"):
        logged_dcg(log, target, discount=disc, control_variate="yes")
    with pytest.raises(TypeError, match=r"logging_discount.*\bstr\b"):
        logged_dcg(log, target, discount=disc, logging=LoggedRanking(), logging_discount="log")


def test_exposures_above_the_discounts_largest_view_probability_are_refused():
    log, disc = small_log(), LogDiscount(cutoff=2)
    too_high = Exposure([2.0, 0.5, 1.0, 0.5])
    with pytest.raises(
        ValueError, match=r"target exposure of row 0 is 2.0, above 1, .*LogDiscount"
    ):
        logged_dcg(log, too_high, discount=disc, logging=LoggedRanking())
    with pytest.raises(ValueError, match=r"logging exposure of row 0 is 2.0, above 1, "):
        logged_dcg(log, LoggedRanking(), discount=disc, logging=too_high)
    # A learnt curve may pass 1 (it is relative to rank 1): exposures up to its largest value
    # stand, and the estimate is Eq. 10 by hand: Σ_rewarded c · ε / ε0, ε0 = 0.5.
    curve = CustomDiscount([1.0, 1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        value = logged_dcg(log, Exposure([1.5, 0.5, 1.0, 0.5]), discount=curve).value
    assert value == pytest.approx((1.5 / 0.5 + 0.5 / 0.5) / 2)
    with pytest.raises(ValueError, match=r"target exposure of row 0 is 1.6, above 1.5, "):
        logged_dcg(log, Exposure([1.6, 0.5, 1.0, 0.5]), discount=curve)


def test_a_propensity_whose_inverse_overflows_gets_a_clear_outcome():
    # 1/5e-324 overflows float64. SLOPE's first candidate (no clipping) would be infinite.
    log = small_log(propensity=[5e-324, 0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r'is inf, .*5.6e-309: .*clip="auto"\'s first candidate'):
        logged_dcg(log, LoggedRanking(), discount=LogDiscount(cutoff=2), clip="auto")
    with pytest.raises(ValueError, match=r"is inf, .*the unclipped estimate is infinite"):
        logged_dcg(log, LoggedRanking(), discount=LogDiscount(cutoff=2))
    # A finite clip caps that weight at m: (1 · 1 · 4 + 1 · δ(2) · 2) / 2 sessions.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        value = logged_dcg(log, LoggedRanking(), discount=LogDiscount(cutoff=2), clip=4.0).value
    assert value == pytest.approx((4.0 + 2.0 / np.log2(3.0)) / 2)


def _pl_log(n_items: int, n_sessions: int, depth: int, seed: int) -> FeedLog:
    rng = np.random.default_rng(seed)
    return FeedLog.from_arrays(
        session=np.repeat(np.arange(n_sessions), depth),
        item=np.concatenate([rng.choice(n_items, depth, replace=False) for _ in range(n_sessions)]),
        rank=np.tile(np.arange(1, depth + 1), n_sessions),
        reward=(rng.random(n_sessions * depth) < 0.3).astype(float),
        n_items=n_items,
    )


def test_too_costly_exact_marginals_fall_back_to_rao_blackwell_sampling(monkeypatch):
    from recpack_ope.logged import plackett_luce

    log = _pl_log(n_items=30, n_sessions=300, depth=4, seed=3)
    scores = np.random.default_rng(4).normal(size=30)
    options = dict(discount=LogDiscount(), logging=LoggedRanking())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        exact = logged_dcg(log, PlackettLuceRanker(scores, method="exact"), **options)
        # Limits this small refuse the exact marginals of 30 items over 30 ranks.
        monkeypatch.setattr(plackett_luce, "_MAX_BYTES", 1000)
        with pytest.raises(ValueError, match=r"30 items over 30 ranks would need about"):
            logged_dcg(log, PlackettLuceRanker(scores, method="exact"), **options)
        with pytest.warns(UserWarning, match=r"30 items over 30 ranks.*sampled instead.*64 rank"):
            sampled = logged_dcg(log, PlackettLuceRanker(scores), **options)
    assert exact.approximation_error == 0 and sampled.approximation_error > 0
    # The approximation error bounds the Monte Carlo standard deviation of the value (a sum
    # over 30 items of means of 64 independent draws each, close to normal): 4 of them hold
    # with probability above 0.9999.
    assert abs(sampled.value - exact.value) < 4 * sampled.approximation_error
    assert "Monte Carlo approximation error" in repr(sampled)


def test_the_fallback_over_a_large_catalogue_without_cutoff_stays_small():
    import tracemalloc

    log = _pl_log(n_items=1000, n_sessions=200, depth=5, seed=0)
    scores = np.random.default_rng(1).normal(size=1000)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            with pytest.warns(UserWarning, match=r"1000 items over 1000 ranks would need about 9"):
                result = logged_dcg(
                    log, PlackettLuceRanker(scores), discount=LogDiscount(), logging=LoggedRanking()
                )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**30  # the exact marginals would need 9 GiB
    # Exposures are probabilities and every rewarded row has one: the value is a mean of
    # Σ c · ε / δ(rank) per session, at most Σ_k 1 / δ(k) over a session's 5 ranks.
    assert 0 < result.value <= np.sum(np.log2(np.arange(2, 7)))
    assert 0 < result.approximation_error < 0.01 * result.standard_error


def test_sums_over_every_candidate_fall_back_as_the_exposures_do(monkeypatch):
    from recpack_ope.logged import plackett_luce
    from recpack_ope.logged.policies import candidate_sums

    log = _pl_log(n_items=30, n_sessions=50, depth=4, seed=3)
    scores = np.random.default_rng(4).normal(size=30)
    monkeypatch.setattr(plackett_luce, "_MAX_BYTES", 1000)
    with pytest.warns(UserWarning, match=r"sampled instead.*64 rankings per context"):
        total, _ = candidate_sums(PlackettLuceRanker(scores), log, LogDiscount())
    # The fallback is the sampler the warning names, chosen explicitly.
    chosen = PlackettLuceRanker(scores, method="monte_carlo", rao_blackwell=True, n_samples=64)
    np.testing.assert_array_equal(total, candidate_sums(chosen, log, LogDiscount())[0])
    # Every item is shown at one of the 30 ranks, so the total exposure is Σ_r δ(r) exactly;
    # the sampled one is off by at most 4 times the sum of the items' standard errors (a
    # bound on the standard deviation of the sum, whatever their correlation).
    every = FeedLog.from_arrays(
        np.zeros(30, dtype=int), np.arange(30), np.arange(1, 31), np.zeros(30), n_items=30
    )
    errors = chosen.exposure(every, LogDiscount()).standard_error
    assert abs(total[0] - LogDiscount().weights(30).sum()) < 4 * errors.sum()
