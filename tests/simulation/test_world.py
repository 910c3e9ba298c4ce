"""The simulator: relevance model, logging process, exact exposure and online reward.

Independent references: hand-computed relevance, a per-user Python loop over the dense
relevance matrix, Monte Carlo replications of simulated users, and empirical frequencies of
the logging policy's feeds. Worlds that break the IPS assumptions (cascade clicks,
personalised logging) against plain-Python loops over ranks, conditional Bernoulli expectations
of the logged feeds, the exact Plackett–Luce marginals and Monte Carlo over log seeds; the
two-stage affinity logging against enumeration of every retrieval set and Monte Carlo; log
digests pin the default (position-based, item-only) world bit for bit.
"""

from __future__ import annotations

import hashlib
import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged.plackett_luce import exposure, rank_marginals
from recpack_ope.metrics.dcg import ips_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.propensity.discount import CustomDiscount, ExponentialDiscount, LogDiscount
from recpack_ope.simulation.world import (
    AffinityPolicy,
    PersonalisedPolicy,
    PopularityPolicy,
    SimulatedWorld,
    UniformPolicy,
)


@pytest.fixture(scope="module")
def world():
    return SimulatedWorld(n_users=300, n_items=40, n_factors=4, seed=5)


def test_relevance_follows_the_stated_model(world):
    u, i = 7, 13
    logit = (
        world.base_logit
        + world.preference_strength * float(world.user_factors[u] @ world.item_factors[i])
        + world.popularity_strength * np.log(world.popularity[i])
    )
    assert world.relevance_of(u, i) == pytest.approx(1 / (1 + np.exp(-logit)), abs=1e-15)
    dense = world.relevance(np.arange(10, 20))
    users, items = np.meshgrid(np.arange(10, 20), np.arange(world.n_items), indexing="ij")
    np.testing.assert_allclose(dense, world.relevance_of(users, items), atol=1e-15)
    # Zipf popularity: the sorted values are rank^-a
    np.testing.assert_allclose(
        np.sort(world.popularity)[::-1],
        np.arange(1, world.n_items + 1) ** -world.popularity_exponent,
    )


def test_same_seed_same_world_and_log(world):
    again = SimulatedWorld(n_users=300, n_items=40, n_factors=4, seed=5)
    np.testing.assert_array_equal(again.user_factors, world.user_factors)
    a = world.log(PopularityPolicy(), feed_length=5, seed=3)
    b = again.log(PopularityPolicy(), feed_length=5, seed=3)
    c = world.log(PopularityPolicy(), feed_length=5, seed=4)
    np.testing.assert_array_equal(a.item, b.item)
    np.testing.assert_array_equal(a.click, b.click)
    assert (a.item != c.item).any()


def test_online_reward_equals_a_per_user_loop(world):
    scores = np.random.default_rng(0).random((world.n_users, world.n_items))
    disc = LogDiscount(cutoff=6)
    got = world.online_reward(scores, disc)
    rel = world.relevance()
    expected = [
        sum(rel[u, i] / np.log2(r + 2) for r, i in enumerate(np.argsort(-scores[u])[:6]))
        for u in range(world.n_users)
    ]
    np.testing.assert_allclose(got.per_user, expected, atol=1e-12)
    assert got.value == pytest.approx(np.mean(expected), abs=1e-12)
    assert got.n_users == world.n_users and got.n_excluded_users == 0
    # the same ranking given as TopK or as a sparse matrix of its top-6 scores
    top = TopK.from_scores(scores, 6)
    assert world.online_reward(top, disc).value == pytest.approx(got.value, abs=1e-12)
    sparse = sp.csr_matrix(
        (
            np.take_along_axis(scores, top.items, axis=1).ravel(),
            (np.repeat(np.arange(world.n_users), 6), top.items.ravel()),
        ),
        shape=scores.shape,
    )
    assert world.online_reward(sparse, disc).value == pytest.approx(got.value, abs=1e-12)


def test_online_reward_matches_monte_carlo_of_simulated_users(world):
    # Simulate the deployed ranking: each shown item is viewed with δ(r) and clicked if also
    # relevant. 4000 replications of all 300 users; the replication means are iid, so the
    # truth must lie within 3 standard errors of their average.
    disc = ExponentialDiscount(gamma=0.7, cutoff=8)
    top = TopK.from_scores(np.random.default_rng(1).random((world.n_users, world.n_items)), 8)
    q = world.relevance_of(np.arange(world.n_users)[:, None], top.items)
    delta = disc.weights(8)
    rng = np.random.default_rng(2)
    reps = 4000
    means = np.empty(reps)
    for k in range(reps):
        viewed = rng.random(q.shape) < delta
        clicked = viewed & (rng.random(q.shape) < q)
        means[k] = clicked.sum() / world.n_users
    se = means.std(ddof=1) / np.sqrt(reps)
    truth = world.online_reward(top, disc).value
    assert abs(means.mean() - truth) < 3 * se
    assert se < 0.002 * truth  # the check has power: 3 SE is under 1 % of the reward


def test_logged_table_is_consistent(world):
    log = world.log(PopularityPolicy(), feed_length=6, n_feeds=3, seed=1)
    rows = world.n_users * 3 * 6
    assert log.item.size == rows and log.rank.size == rows
    feeds = log.item.reshape(-1, 6)
    assert (np.sort(feeds, axis=1)[:, 1:] != np.sort(feeds, axis=1)[:, :-1]).all()
    np.testing.assert_array_equal(
        log.rank.reshape(-1, 6), np.tile(np.arange(1, 7), (feeds.shape[0], 1))
    )
    assert (log.user.reshape(-1, 18) == np.arange(world.n_users)[:, None]).all()
    assert (log.feed.reshape(world.n_users, 3, 6) == np.arange(3)[None, :, None]).all()
    counts = np.zeros((world.n_users, world.n_items))
    np.add.at(counts, (log.user, log.item), log.click)
    np.testing.assert_array_equal(log.clicks.toarray(), counts)
    np.testing.assert_array_equal(log.propensity, log.exposure[log.item])
    frame = log.to_pandas()
    assert list(frame.columns) == ["user", "feed", "item", "rank", "click", "propensity"]
    assert len(frame) == rows


@pytest.mark.parametrize("policy", [PopularityPolicy(temperature=0.7), UniformPolicy()])
def test_logged_exposure_matches_empirical_frequencies(policy):
    # Per item, the empirical exposure (1/S) Σ_feeds δ(rank) has mean ε0(i) and variance
    # (E[δ²] − ε0²)/S with E[δ²] = Σ_r P(rank = r) δ(r)² from the exact marginals. 30 items,
    # 40 000 feeds: the largest |z| exceeds 4.5 with probability < 30 · 6.8e-6 = 2e-4.
    world = SimulatedWorld(n_users=8000, n_items=30, n_factors=3, seed=2)
    disc = LogDiscount()
    log = world.log(policy, feed_length=8, n_feeds=5, seed=9)
    feeds = world.n_users * 5
    empirical = np.bincount(log.item, weights=disc(log.rank), minlength=30) / feeds
    marginals = rank_marginals(policy.weights(world), 8)
    second = marginals @ disc.weights(8) ** 2
    z = (empirical - log.exposure) / np.sqrt((second - log.exposure**2) / feeds)
    assert np.abs(z).max() < 4.5
    # clicks follow the examination hypothesis: E[clicks of i] = ε0(i) Σ_u q_ui per feed
    expected = log.exposure * world.relevance().sum(axis=0) * 5
    observed = np.asarray(log.clicks.sum(axis=0)).ravel()
    assert (
        np.abs((observed - expected) / np.sqrt(expected)).max() < 4.5
    )  # Poisson-binomial sd ≤ √mean


def test_unknown_policy_and_discount_are_named():
    world = SimulatedWorld(n_users=3, n_items=4)
    with pytest.raises(TypeError, match=r"policy.*\bstr\b"):
        world.log("popularity", feed_length=2)
    with pytest.raises(TypeError, match=r"discount.*\bint\b"):
        world.online_reward(np.ones((3, 4)), 10)


def test_uniform_logging_exposure_is_the_closed_form():
    world = SimulatedWorld(n_users=10, n_items=25, seed=1)
    log = world.log(UniformPolicy(), feed_length=5, seed=0)
    np.testing.assert_allclose(log.exposure, LogDiscount().weights(5).sum() / 25, atol=1e-15)


def test_ips_dcg_with_true_exposure_is_unbiased_for_online_reward():
    # Eq. 11 averages over every logged user (a user without clicks contributes 0), so the
    # estimator's mean over evaluated users is rescaled by |U| / n_users. Over 60 independent
    # held-out logs the replication mean must lie within 3 standard errors of the truth.
    world = SimulatedWorld(n_users=2000, n_items=60, n_factors=4, seed=3)
    disc = LogDiscount(cutoff=5)
    top = TopK.from_scores(world.relevance() + world.popularity, 5)
    truth = world.online_reward(top, disc).value
    estimates = []
    for seed in range(60):
        log = world.log(PopularityPolicy(), feed_length=10, seed=100 + seed)
        # Unclipped (clip=None): the unbiased estimator of Eq. 10–11.
        est = ips_dcg(log.clicks, top, discount=disc, propensity=log.propensity_model(), clip=None)
        estimates.append(est.value * est.n_users / world.n_users)
    estimates = np.array(estimates)
    se = estimates.std(ddof=1) / np.sqrt(estimates.size)
    assert abs(estimates.mean() - truth) < 3 * se
    assert se < 0.01 * truth


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SimulatedWorld(n_users=0), "n_users must be a positive integer"),
        (lambda: SimulatedWorld(popularity_exponent=-1.0), "popularity_exponent must be >= 0"),
        (lambda: SimulatedWorld(base_logit=np.nan), "base_logit must be finite"),
        (lambda: PopularityPolicy(temperature=0.0), "temperature must be finite and > 0"),
        (
            lambda: SimulatedWorld(n_items=5).log(UniformPolicy(), feed_length=6),
            "exceeds the number of items",
        ),
        (
            lambda: SimulatedWorld(n_items=5).log(UniformPolicy(), feed_length=2, n_feeds=0),
            "n_feeds",
        ),
        (lambda: SimulatedWorld(n_users=3).relevance([0, 3]), "unknown user 3"),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).online_reward(
                np.ones((2, 4)), LogDiscount(2)
            ),
            "shape mismatch",
        ),
    ],
)
def test_invalid_input_is_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _digest(log) -> str:
    h = hashlib.sha256()
    for column in (log.item, log.rank, log.click):
        h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(
    "policy, kwargs, clicks, digest, exposure_moment, propensity_sum",
    [
        (
            PopularityPolicy(0.8),
            dict(feed_length=7, n_feeds=3, seed=5),
            463,
            "5a48120af1d596df",
            54.63075609921418,
            1109.7562216147403,
        ),
        (
            UniformPolicy(),
            dict(feed_length=5, seed=2, discount=ExponentialDiscount(gamma=0.8)),
            132,
            "999f5a970485b9d6",
            48.74320000000001,
            112.05333333333336,
        ),
    ],
)
def test_default_world_logs_are_unchanged(
    policy, kwargs, clicks, digest, exposure_moment, propensity_sum
):
    # Values recorded with the simulator before click_model and PersonalisedPolicy existed
    # (identical in the modern and legacy environments for the integer columns).
    world = SimulatedWorld(n_users=200, n_items=30, n_factors=4, seed=11)
    assert world.click_model == "pbm"
    log = world.log(policy, **kwargs)
    assert int(log.click.sum()) == clicks
    assert _digest(log) == digest
    assert float(log.exposure @ np.arange(30)) == pytest.approx(exposure_moment, rel=1e-12)
    assert float(log.propensity.sum()) == pytest.approx(propensity_sum, rel=1e-12)
    assert log.segment is None and log.click_model == "pbm"


def test_default_world_rewards_are_unchanged():
    world = SimulatedWorld(n_users=500, n_items=50, n_factors=4, seed=11)
    top = TopK.from_scores(world.relevance(), 6)
    assert world.online_reward(top, LogDiscount(cutoff=6)).value == pytest.approx(
        2.1776847252571305, rel=1e-13
    )
    assert world.policy_reward(PopularityPolicy(0.8), LogDiscount(), 7).value == pytest.approx(
        0.8441714067000557, rel=1e-13
    )


@pytest.fixture(scope="module")
def cascade_world():
    return SimulatedWorld(
        n_users=60, n_items=20, n_factors=3, base_logit=0.0, seed=4, click_model="cascade"
    )


@pytest.mark.parametrize(
    "discount", [LogDiscount(cutoff=6), ExponentialDiscount(gamma=0.7, cutoff=8)]
)
def test_cascade_online_reward_equals_a_loop_over_ranks(cascade_world, discount):
    world = cascade_world
    scores = np.random.default_rng(0).random((world.n_users, world.n_items))
    got = world.online_reward(scores, discount)
    rel = world.relevance()
    expected = []
    for u in range(world.n_users):
        total, no_click_yet = 0.0, 1.0
        for r, i in enumerate(np.argsort(-scores[u])[: discount.cutoff], start=1):
            total += rel[u, i] * float(discount(r)) * no_click_yet
            no_click_yet *= 1.0 - rel[u, i]
        expected.append(total)
    np.testing.assert_allclose(got.per_user, expected, atol=1e-12, rtol=0)
    # the same ranking as TopK and as a sparse matrix of the shown items' scores
    top = TopK.from_scores(scores, discount.cutoff)
    np.testing.assert_allclose(world.online_reward(top, discount).per_user, expected, atol=1e-12)
    rows = np.repeat(np.arange(world.n_users), discount.cutoff)
    sparse = sp.csr_matrix(
        (np.take_along_axis(scores, top.items, axis=1).ravel(), (rows, top.items.ravel())),
        shape=scores.shape,
    )
    np.testing.assert_allclose(world.online_reward(sparse, discount).per_user, expected, atol=1e-12)
    # a cascade never earns more than the position-based model on the same ranking
    pbm = SimulatedWorld(n_users=60, n_items=20, n_factors=3, base_logit=0.0, seed=4)
    assert (got.per_user <= pbm.online_reward(scores, discount).per_user + 1e-15).all()
    assert got.value < pbm.online_reward(scores, discount).value


def test_cascade_equals_pbm_for_a_single_shown_item(cascade_world):
    pbm = SimulatedWorld(n_users=60, n_items=20, n_factors=3, base_logit=0.0, seed=4)
    scores = np.random.default_rng(1).random((60, 20))
    disc = LogDiscount(cutoff=1)
    np.testing.assert_array_equal(
        cascade_world.online_reward(scores, disc).per_user, pbm.online_reward(scores, disc).per_user
    )


@pytest.mark.parametrize("policy", [PopularityPolicy(), PersonalisedPolicy(n_segments=3)])
def test_cascade_logging_matches_the_exact_click_probabilities(policy):
    # Given the logged feeds, the click at rank r of feed f is Bernoulli with
    # p_fr = q_fr δ(r) Π_{s<r} (1 − q_fs), independently across feeds. Per rank, the total
    # click count then has mean Σ_f p_fr and variance Σ_f p_fr (1 − p_fr): the standard
    # error of the comparison. 8 ranks at 4 SE: a false alarm has probability < 8 · 6.3e-5.
    world = SimulatedWorld(
        n_users=400, n_items=15, n_factors=3, base_logit=0.0, seed=6, click_model="cascade"
    )
    disc = LogDiscount()
    n, n_feeds = 8, 100
    log = world.log(policy, feed_length=n, n_feeds=n_feeds, seed=3)
    items = log.item.reshape(-1, n)
    users = log.user.reshape(-1, n)[:, 0]
    clicks = log.click.reshape(-1, n)
    assert clicks.sum(axis=1).max() == 1  # a single-click cascade
    q = world.relevance()[users[:, None], items]
    delta = disc.weights(n)
    p = np.empty_like(q)
    no_click_yet = np.ones(q.shape[0])
    for r in range(n):
        p[:, r] = q[:, r] * delta[r] * no_click_yet
        no_click_yet = no_click_yet * (1.0 - q[:, r])
    observed = clicks.sum(axis=0)
    se = np.sqrt((p * (1 - p)).sum(axis=0))
    assert (np.abs(observed - p.sum(axis=0)) < 4 * se).all()
    # Power: the position-based prediction Σ_f q δ(r) is off by far more at the last rank.
    pbm = (q * delta).sum(axis=0)
    assert pbm[-1] - observed[-1] > 20 * se[-1]
    # The same feeds as the position-based world (only clicks differ), and the same ε0.
    plain = SimulatedWorld(n_users=400, n_items=15, n_factors=3, base_logit=0.0, seed=6)
    same = plain.log(policy, feed_length=n, n_feeds=n_feeds, seed=3)
    np.testing.assert_array_equal(same.item, log.item)
    np.testing.assert_array_equal(same.propensity, log.propensity)
    assert log.click_model == "cascade" and same.click_model == "pbm"


def test_cascade_has_no_exact_policy_reward(cascade_world):
    with pytest.raises(NotImplementedError, match="click_model='pbm'"):
        cascade_world.policy_reward(PopularityPolicy(), LogDiscount(), 5)


def test_segment_exposures_sum_to_the_expected_views_per_feed():
    world = SimulatedWorld(n_users=300, n_items=30, n_factors=4, seed=1)
    policy = PersonalisedPolicy(temperature=0.8, personalisation=2.0, n_segments=5, noise=0.5)
    disc = ExponentialDiscount(gamma=0.8)
    log = world.log(policy, feed_length=7, discount=disc)
    assert log.exposure.shape == (5, 30) and log.logging_weights.shape == (5, 30)
    np.testing.assert_allclose(log.exposure.sum(axis=1), disc.weights(7).sum(), atol=1e-10)
    np.testing.assert_allclose(log.logging_weights.sum(axis=1), 1.0, atol=1e-12)
    assert np.bincount(log.segment, minlength=5).min() > 0  # every segment has users
    np.testing.assert_array_equal(log.propensity, log.exposure[log.segment[log.user], log.item])
    # exposure of each segment = exact PL marginals of that segment's weights
    for s in range(5):
        np.testing.assert_allclose(
            log.exposure[s], rank_marginals(log.logging_weights[s], 7) @ disc.weights(7), atol=1e-12
        )
    # segments are a function of the world's seed, not of the log's
    np.testing.assert_array_equal(world.log(policy, feed_length=7, seed=9).segment, log.segment)
    np.testing.assert_array_equal(policy.segments(world), log.segment)
    other = SimulatedWorld(n_users=300, n_items=30, n_factors=4, seed=2)
    assert (policy.segments(other) != log.segment).any()


def test_personalised_weights_follow_the_stated_formula():
    world = SimulatedWorld(n_users=200, n_items=25, n_factors=3, seed=7)
    policy = PersonalisedPolicy(temperature=0.6, personalisation=1.5, n_segments=6)
    segment = policy.segments(world)
    # every user is in the segment whose anchor is nearest: recomputing the segment means
    # and scoring by them must reproduce the weights
    for s in range(6):
        centroid = world.user_factors[segment == s].mean(axis=0)
        score = (np.log(world.popularity) + 1.5 * world.item_factors @ centroid) / 0.6
        expected = np.exp(score) / np.exp(score).sum()
        np.testing.assert_allclose(policy.weights(world)[s], expected, rtol=1e-12)
    # without personalisation (and noise) every segment logs like PopularityPolicy
    flat = PersonalisedPolicy(temperature=0.6, personalisation=0.0, n_segments=6)
    log = world.log(flat, feed_length=5)
    popular = exposure(PopularityPolicy(0.6).weights(world), LogDiscount(), 5)
    np.testing.assert_allclose(log.exposure, np.tile(popular, (6, 1)), atol=1e-14)


def test_personalised_exposure_matches_empirical_frequencies():
    # Per (segment, item), the empirical exposure (1/S_s) Σ_feeds δ(rank) has mean ε0(s, i) and
    # variance (E[δ²] − ε0²)/S_s, E[δ²] from the exact marginals. Checked for the 5 most
    # exposed items of each of 4 segments: 20 z-scores, |z| > 4 with probability < 1.3e-3.
    world = SimulatedWorld(n_users=2000, n_items=30, n_factors=3, seed=2)
    policy = PersonalisedPolicy(temperature=1.0, personalisation=2.0, n_segments=4)
    disc = LogDiscount()
    n, n_feeds = 8, 10
    log = world.log(policy, feed_length=n, n_feeds=n_feeds, seed=9)
    row_segment = log.segment[log.user]
    z = []
    for s in range(4):
        rows = row_segment == s
        feeds = rows.sum() / n
        empirical = np.bincount(log.item[rows], weights=disc(log.rank[rows]), minlength=30) / feeds
        second = rank_marginals(log.logging_weights[s], n) @ disc.weights(n) ** 2
        top = np.argsort(-log.exposure[s])[:5]
        se = np.sqrt((second[top] - log.exposure[s, top] ** 2) / feeds)
        z.extend((empirical[top] - log.exposure[s, top]) / se)
    assert np.abs(z).max() < 4
    # the segments really log differently: their top items are not all the same
    assert len({tuple(np.argsort(-e)[:5]) for e in log.exposure}) > 1


def test_personalised_policy_reward_is_exact():
    world = SimulatedWorld(n_users=300, n_items=20, n_factors=3, seed=8)
    policy = PersonalisedPolicy(temperature=1.0, personalisation=2.0, n_segments=3)
    disc = LogDiscount()
    got = world.policy_reward(policy, disc, 6)
    n_feeds = 200
    log = world.log(policy, feed_length=6, n_feeds=n_feeds, seed=4)
    rel = world.relevance()
    expected = [rel[u] @ log.exposure[log.segment[u]] for u in range(world.n_users)]
    np.testing.assert_allclose(got.per_user, expected, atol=1e-12)
    # On-policy Monte Carlo: the mean clicks per user of feed number f (f = 0..199) are iid
    # replicates with expectation policy_reward; 4 standard errors of their mean.
    per_feed = np.bincount(log.feed, weights=log.click, minlength=n_feeds) / world.n_users
    se = per_feed.std(ddof=1) / np.sqrt(n_feeds)
    assert abs(per_feed.mean() - got.value) < 4 * se
    assert se < 0.01 * got.value


def test_ips_needs_per_segment_propensities_under_personalised_logging():
    # Over 100 held-out logs (one feed per user), IPS-DCG with the true per-(user, item)
    # exposure is unbiased for the online reward (Eq. 11, rescaled by |U| / n_users as users
    # without clicks contribute 0): the replication mean lies within 3 SE of the truth. An
    # item-only propensity — the segment-size-weighted mean exposure of each item, what any
    # popularity-based model estimates at best — ignores that segments see the items they
    # like more often, and the same estimator is then biased by far more than 5 SE.
    world = SimulatedWorld(n_users=2000, n_items=40, n_factors=4, seed=3)
    policy = PersonalisedPolicy(temperature=1.0, personalisation=1.0, n_segments=4)
    disc = LogDiscount(cutoff=5)
    top = TopK.from_scores(world.relevance() + world.popularity, 5)
    truth = world.online_reward(top, disc).value
    per_user, item_only = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for seed in range(100):
            log = world.log(policy, feed_length=6, seed=100 + seed)
            for propensity, out in (
                (log.propensity_matrix(log.clicks), per_user),
                (log.exposure[log.segment].mean(axis=0), item_only),
            ):
                est = ips_dcg(log.clicks, top, discount=disc, propensity=propensity, clip=None)
                out.append(est.value * est.n_users / world.n_users)
    per_user, item_only = np.array(per_user), np.array(item_only)
    se = per_user.std(ddof=1) / np.sqrt(per_user.size)
    se_item = item_only.std(ddof=1) / np.sqrt(item_only.size)
    assert abs(per_user.mean() - truth) < 3 * se
    assert se < 0.01 * truth
    assert abs(item_only.mean() - truth) > 5 * max(se, se_item)
    with pytest.raises(ValueError, match="propensity_matrix"):
        log.propensity_model()


def test_propensity_matrix_and_feed_log_carry_the_row_exposure():
    world = SimulatedWorld(n_users=50, n_items=12, n_factors=3, base_logit=1.0, seed=5)
    for policy in (PersonalisedPolicy(n_segments=3), PopularityPolicy()):
        log = world.log(policy, feed_length=4, n_feeds=2, seed=1)
        y_true = log.clicks.tocoo()
        matrix = log.propensity_matrix(log.clicks)
        assert matrix.nnz == log.clicks.nnz
        segment = np.zeros(50, dtype=int) if log.segment is None else log.segment
        eps = np.atleast_2d(log.exposure)
        np.testing.assert_array_equal(
            np.asarray(matrix[y_true.row, y_true.col]).ravel(), eps[segment[y_true.row], y_true.col]
        )
        if log.segment is None:  # item-only logs: the same numbers as propensity_model()
            np.testing.assert_array_equal(log.propensity_model().propensity_, log.exposure)
        feed_log = log.feed_log()
        np.testing.assert_array_equal(feed_log.propensity, log.propensity)
        weights = np.atleast_2d(log.logging_weights)
        np.testing.assert_array_equal(feed_log.logging_weight, weights[segment[log.user], log.item])
        assert feed_log.n_sessions == 100 and feed_log.n_items == 12
    with pytest.raises(ValueError, match=r"y_true has shape \(49, 12\)"):
        log.propensity_matrix(np.ones((49, 12)))


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: SimulatedWorld(click_model="dbn"),
            ValueError,
            "click_model must be one of .* got 'dbn'",
        ),
        (
            lambda: PersonalisedPolicy(temperature=0.0),
            ValueError,
            "temperature.*got 0.0",
        ),
        (
            lambda: PersonalisedPolicy(temperature=-1.0),
            ValueError,
            "temperature.*got -1.0",
        ),
        (
            lambda: PersonalisedPolicy(n_segments=0),
            ValueError,
            "n_segments must be a positive integer, got 0",
        ),
        (
            lambda: PersonalisedPolicy(personalisation=np.inf),
            ValueError,
            "personalisation must be finite, got inf",
        ),
        (
            lambda: PersonalisedPolicy(personalisation=np.nan),
            ValueError,
            "personalisation must be finite, got nan",
        ),
        (
            lambda: PersonalisedPolicy(noise=-0.5),
            ValueError,
            "noise must be finite and >= 0, got -0.5",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=6).log(
                PersonalisedPolicy(n_segments=4), feed_length=2
            ),
            ValueError,
            r"n_segments=4 exceeds the number of users \(3\)",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=6, click_model="cascade").log(
                UniformPolicy(), feed_length=3, discount=CustomDiscount([0.5, 0.8, 0.2])
            ),
            ValueError,
            r"click_model='cascade'.*δ\(2\) = 0.8 > δ\(1\) = 0.5",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=6, click_model="cascade").online_reward(
                np.ones((3, 6)), CustomDiscount([0.5, 0.8])
            ),
            ValueError,
            "needs a non-increasing discount",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=6).log("segments", feed_length=2),
            TypeError,
            "or a PersonalisedPolicy",
        ),
    ],
)
def test_invalid_world_options_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_world_with_a_tiny_temperature_logs_the_popularity_order():
    # τ = 1e-3: consecutive popularity ranks differ by (r / (r+1))^1000 ≤ 1e-79, so the
    # feeds are the popularity order up to float precision (the weights underflow to 0).
    world = SimulatedWorld(n_users=4, n_items=6, seed=0)
    log = world.log(PopularityPolicy(temperature=1e-3), feed_length=3)
    by_popularity = np.argsort(-world.popularity)
    np.testing.assert_array_equal(log.item.reshape(4, 3), np.tile(by_popularity[:3], (4, 1)))
    expected = np.zeros(6)
    expected[by_popularity[:3]] = LogDiscount().weights(3)
    np.testing.assert_allclose(log.exposure, expected, atol=1e-12)
    personal = world.log(PersonalisedPolicy(temperature=1e-4, n_segments=2), feed_length=2)
    assert np.isfinite(personal.exposure).all() and (personal.exposure.sum(axis=1) > 0).all()


def test_simulator_refuses_worlds_and_logs_beyond_memory():
    with pytest.raises(ValueError, match=r"1000000000 users .* 238\.4 GiB"):
        SimulatedWorld(n_users=10**9, n_items=10**9)
    with pytest.raises(ValueError, match=r"has 300000000 rows, about 18 GiB"):
        SimulatedWorld(n_users=1_000_000, n_items=50).log(
            UniformPolicy(), feed_length=50, n_feeds=6
        )


def small_world():
    return SimulatedWorld(n_users=3, n_items=4)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: SimulatedWorld(seed=-1), ValueError, "seed.*-1"),
        (lambda: SimulatedWorld(seed=1.5), ValueError, r"seed.*1\.5"),
        (lambda: SimulatedWorld(seed=None), ValueError, "seed.*None"),
        (lambda: SimulatedWorld(seed="a"), ValueError, "seed.*'a'"),
        (lambda: SimulatedWorld(preference_strength="a"), ValueError, "preference_strength.*'a'"),
        (lambda: SimulatedWorld(base_logit=1j), ValueError, "base_logit.*1j"),
        (
            lambda: SimulatedWorld(n_items=4, popularity_exponent=1e6),
            ValueError,
            r"popularity 4\^-1e\+06 of the least popular item",
        ),
        (lambda: SimulatedWorld(click_model=["pbm"]), ValueError, r"click_model.*\['pbm'\]"),
        (lambda: PopularityPolicy(temperature="1"), ValueError, "temperature.*'1'"),
        (lambda: PersonalisedPolicy(noise=np.inf), ValueError, "noise.*inf"),
        (lambda: PersonalisedPolicy(personalisation=True), ValueError, "personalisation.*True"),
        (
            lambda: small_world().log(UniformPolicy(), feed_length=2, seed=-1),
            ValueError,
            "seed.*-1",
        ),
        (
            lambda: small_world().log(UniformPolicy(), feed_length=2, seed="a"),
            ValueError,
            "seed.*'a'",
        ),
        (
            lambda: small_world().log(UniformPolicy(), feed_length=5),
            ValueError,
            r"feed_length=5 exceeds the number of items \(4\)",
        ),
        (
            lambda: small_world().policy_reward(UniformPolicy(), "log", 2),
            TypeError,
            r"discount.*\bstr\b",
        ),
        (
            lambda: small_world().policy_reward("pop", LogDiscount(), 2),
            TypeError,
            r"policy must be a PopularityPolicy.*\bstr\b",
        ),
        (
            lambda: small_world().policy_reward(UniformPolicy(), LogDiscount(), 6),
            ValueError,
            "feed_length=6 exceeds",
        ),
        (lambda: small_world().relevance_of([-1], [0]), ValueError, "index -1 in users"),
        (lambda: small_world().relevance_of([0], [4]), ValueError, "index 4 in items"),
        (
            lambda: small_world().reward_model().predict([0.5], [0]),
            ValueError,
            "users.*float64",
        ),
    ],
)
def test_simulator_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_relevance_of_valid_indices_is_unchanged():
    world = SimulatedWorld(n_users=3, n_items=4, seed=2)
    np.testing.assert_array_equal(
        world.relevance_of([2, 0], [3, 1]), world.relevance([2, 0])[[0, 1], [3, 1]]
    )


def _affinity_by_hand(world, policy, users):
    """Scores and retrieval probabilities of an AffinityPolicy from its stated formula."""
    noisy = policy.noisy_factors(world)[users]
    scores = (
        np.log(world.popularity) + policy.personalisation * noisy @ world.item_factors.T
    ) / policy.temperature
    p = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    # 1 − e^(−x) by expm1: the subtraction would lose the digits of small probabilities
    return scores, -np.expm1(-policy.candidates * p)


@pytest.mark.parametrize(
    "discount, n", [(ExponentialDiscount(gamma=0.7), 3), (LogDiscount(cutoff=2), 4)]
)
def test_affinity_exposure_equals_brute_force_over_retrieval_sets(discount, n):
    # Every subset of the 8 items is a possible retrieval; its probability is
    # Π q^[in] (1 − q)^[out] and its feed the retrieved items by score, then the others.
    world = SimulatedWorld(n_users=4, n_items=8, n_factors=3, seed=4)
    policy = AffinityPolicy(temperature=0.7, personalisation=1.5, noise=0.5, candidates=3.0)
    log = world.log(policy, feed_length=n, discount=discount, seed=0)
    scores, q = _affinity_by_hand(world, policy, np.arange(4))
    np.testing.assert_allclose(policy.scores(world), scores, rtol=1e-12)
    np.testing.assert_allclose(policy.retrieval_probabilities(world), q, rtol=1e-12)
    view = discount.weights(n)
    for u in range(4):
        order = np.argsort(-scores[u])
        expected = np.zeros(8)
        for subset in itertools.product((False, True), repeat=8):
            chosen = np.array(subset)
            probability = np.prod(np.where(chosen, q[u], 1 - q[u]))
            feed = [i for i in order if chosen[i]] + [i for i in order if not chosen[i]]
            expected[feed[:n]] += probability * view
        np.testing.assert_allclose(log.exposure[u], expected, rtol=1e-12, atol=1e-15)
    assert log.exposure.shape == (4, 8) and (log.exposure > 0).all()
    assert log.logging_weights is None and log.feed_log().logging_weight is None
    np.testing.assert_array_equal(log.segment, np.arange(4))
    np.testing.assert_array_equal(log.propensity, log.exposure[log.user, log.item])


def test_affinity_feeds_and_retrieval_match_monte_carlo():
    world = SimulatedWorld(n_users=5, n_items=10, n_factors=3, seed=6)
    policy = AffinityPolicy(temperature=1.0, personalisation=2.0, noise=1.0, candidates=4.0)
    disc = LogDiscount()
    n, n_feeds = 3, 20_000
    log = world.log(policy, feed_length=n, discount=disc, n_feeds=n_feeds, seed=2)
    # Sampled feeds: the empirical exposure (1/F) Σ_feeds δ(rank) of each (user, item) has mean
    # ε0 and, as 0 ≤ δ ≤ 1, variance at most ε0 (1 − ε0) / F. 50 cells: the largest |z|
    # exceeds 4.5 with probability < 50 · 6.8e-6 = 3.4e-4.
    empirical = np.zeros((5, 10))
    np.add.at(empirical, (log.user, log.item), disc(log.rank) / n_feeds)
    bound = np.sqrt(log.exposure * (1 - log.exposure) / n_feeds)
    assert np.abs((empirical - log.exposure) / bound).max() < 4.5
    feeds = log.item.reshape(5 * n_feeds, n)
    assert (np.sort(feeds, axis=1)[:, 1:] != np.sort(feeds, axis=1)[:, :-1]).all()
    # Retrieval by its definition: Poisson(c) draws with replacement from the softmax, an item
    # retrieved when drawn at least once; against q with the same 4.5-SE bound over 50 cells.
    _, q = _affinity_by_hand(world, policy, np.arange(5))
    rng = np.random.default_rng(0)
    for u in range(5):
        p = np.exp(policy.scores(world)[u]) / np.exp(policy.scores(world)[u]).sum()
        counts = rng.multinomial(rng.poisson(policy.candidates, n_feeds), p)
        share = (counts > 0).mean(axis=0)
        z = (share - q[u]) / np.sqrt(q[u] * (1 - q[u]) / n_feeds)
        assert np.abs(z).max() < 4.5
    # The noisy copy U + σ ξ, ξ ~ N(0, 1/d) independent of U: over 12 000 entries the sd of
    # √d ξ is 1 within 0.03 (its SE ≈ 0.0065) and its correlation with U within 0.04 (SE ≈
    # 0.009). It is fixed by the world's seed: another log keeps the exposure, another world
    # draws other noise.
    big = SimulatedWorld(n_users=4000, n_items=3, n_factors=3, seed=6)
    xi = (policy.noisy_factors(big) - big.user_factors) * np.sqrt(3)
    assert xi.std() == pytest.approx(1.0, abs=0.03)
    assert abs(stats.pearsonr(xi.ravel(), big.user_factors.ravel())[0]) < 0.04
    again = world.log(policy, feed_length=n, discount=disc, seed=5)
    np.testing.assert_array_equal(again.exposure, log.exposure)
    other = SimulatedWorld(n_users=5, n_items=10, n_factors=3, seed=7)
    noise = policy.noisy_factors(world) - world.user_factors
    assert (policy.noisy_factors(other) - other.user_factors != noise).all()
    np.testing.assert_array_equal(
        AffinityPolicy(noise=0.0).noisy_factors(world), world.user_factors
    )


def test_ips_needs_per_user_propensities_under_affinity_logging():
    # As for segment-personalised logging: IPS-DCG with the true per-(user, item) exposure is
    # unbiased for the online reward over 100 held-out logs (3 SE of the replication mean);
    # the item-only mean exposure, the best any popularity-based model can do, is not (> 5 SE).
    world = SimulatedWorld(n_users=2000, n_items=40, n_factors=4, seed=3)
    policy = AffinityPolicy(personalisation=1.0, noise=0.5, candidates=10.0)
    disc = LogDiscount(cutoff=5)
    top = TopK.from_scores(world.relevance() + world.popularity, 5)
    truth = world.online_reward(top, disc).value
    per_user, item_only = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for seed in range(100):
            log = world.log(policy, feed_length=6, seed=100 + seed)
            for propensity, out in (
                (log.propensity_matrix(log.clicks), per_user),
                (log.exposure.mean(axis=0), item_only),
            ):
                est = ips_dcg(log.clicks, top, discount=disc, propensity=propensity, clip=None)
                out.append(est.value * est.n_users / world.n_users)
    per_user, item_only = np.array(per_user), np.array(item_only)
    se = per_user.std(ddof=1) / np.sqrt(per_user.size)
    se_item = item_only.std(ddof=1) / np.sqrt(item_only.size)
    assert abs(per_user.mean() - truth) < 3 * se
    assert se < 0.02 * truth
    assert abs(item_only.mean() - truth) > 5 * max(se, se_item)
    with pytest.raises(ValueError, match="AffinityPolicy depends on the user"):
        log.propensity_model()


def test_affinity_policy_reward_is_exact():
    world = SimulatedWorld(n_users=300, n_items=20, n_factors=3, seed=8)
    policy = AffinityPolicy(candidates=8.0)
    disc = LogDiscount()
    got = world.policy_reward(policy, disc, 6)
    n_feeds = 200
    log = world.log(policy, feed_length=6, n_feeds=n_feeds, seed=4)
    expected = np.einsum("ui,ui->u", world.relevance(), log.exposure)
    np.testing.assert_allclose(got.per_user, expected, atol=1e-12)
    # the mean clicks per user of each feed number are iid replicates of the policy's reward
    per_feed = np.bincount(log.feed, weights=log.click, minlength=n_feeds) / world.n_users
    se = per_feed.std(ddof=1) / np.sqrt(n_feeds)
    assert abs(per_feed.mean() - got.value) < 4 * se
    assert se < 0.01 * got.value


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: AffinityPolicy(temperature=0.0), "temperature.*got 0.0"),
        (lambda: AffinityPolicy(personalisation="2"), "personalisation.*'2'"),
        (lambda: AffinityPolicy(noise=-0.1), "noise must be >= 0, got -0.1"),
        (lambda: AffinityPolicy(noise=np.nan), "noise must be finite, got nan"),
        (lambda: AffinityPolicy(candidates=0), "candidates must be finite and > 0, got 0"),
        (lambda: AffinityPolicy(candidates=np.inf), "candidates must be finite and > 0, got inf"),
    ],
)
def test_affinity_policy_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _clicks_by_hand(q: np.ndarray, delta: np.ndarray, model: str) -> np.ndarray:
    """Click probability at every rank of one feed from the module docstring's formulas, a
    plain loop over ranks (q: relevance of the shown items, delta: view probabilities)."""
    out = np.empty(q.size)
    no_click_yet = 1.0
    odds = [x / (1.0 - x) for x in q]
    total = 1.0 + sum(d * v for d, v in zip(delta, odds, strict=True))
    for r in range(q.size):
        if model == "pbm":
            out[r] = q[r] * delta[r]
        elif model == "cascade":
            out[r] = q[r] * delta[r] * no_click_yet
            no_click_yet *= 1.0 - q[r]
        else:
            out[r] = delta[r] * odds[r] / total
    return out


@pytest.mark.parametrize("model", ["pbm", "cascade", "choice"])
@pytest.mark.parametrize("discount", [LogDiscount(), ExponentialDiscount(gamma=0.6, cutoff=3)])
def test_expected_clicks_follow_each_click_models_formula(model, discount):
    world = SimulatedWorld(
        n_users=30, n_items=12, n_factors=3, base_logit=0.0, seed=3, click_model=model
    )
    rng = np.random.default_rng(0)
    users = rng.integers(0, 30, size=25)
    rankings = np.stack([rng.permutation(12)[:5] for _ in users])
    got = world.expected_clicks(users, rankings, discount)
    rel = world.relevance()
    delta = discount.weights(5)
    for n, (u, ranking) in enumerate(zip(users, rankings, strict=True)):
        np.testing.assert_allclose(
            got[n], _clicks_by_hand(rel[u, ranking], delta, model), rtol=1e-12, atol=1e-15
        )
    # online_reward is their sum over the ranks of the target's ranking
    scores = rng.random((30, 12))
    top = TopK.from_scores(scores, 5)
    by_rank = world.expected_clicks(np.arange(30), top.items, discount)
    np.testing.assert_allclose(
        world.online_reward(scores, discount).per_user
        if discount.cutoff
        else world.online_reward(top, discount).per_user,
        by_rank.sum(axis=1),
        rtol=1e-12,
    )


def test_choice_clicks_depend_on_the_items_below():
    # Changing only the item at rank 3 moves the click probability at rank 1 under the choice
    # model (it competes for the one click), never under the position-based or cascade models.
    first, second = np.array([[0, 1, 2]]), np.array([[0, 1, 7]])
    top = {}
    for model in ("pbm", "cascade", "choice"):
        world = SimulatedWorld(
            n_users=2, n_items=8, n_factors=2, base_logit=0.0, seed=1, click_model=model
        )
        a, b = (world.expected_clicks([0], r)[0, 0] for r in (first, second))
        top[model] = abs(a - b)
    assert top["pbm"] == 0.0 and top["cascade"] == 0.0 and top["choice"] > 1e-3


def test_choice_equals_pbm_for_one_item_seen_for_sure():
    # v / (1 + v) with v the odds of q is q: a lone item viewed with probability 1.
    choice = SimulatedWorld(n_users=40, n_items=9, n_factors=3, seed=2, click_model="choice")
    pbm = SimulatedWorld(n_users=40, n_items=9, n_factors=3, seed=2)
    scores = np.random.default_rng(3).random((40, 9))
    disc = CustomDiscount([1.0])
    np.testing.assert_allclose(
        choice.online_reward(scores, disc).per_user,
        pbm.online_reward(scores, disc).per_user,
        rtol=1e-12,
    )


def test_choice_logs_one_click_at_most_on_the_position_based_feeds():
    choice = SimulatedWorld(n_users=50, n_items=10, n_factors=3, seed=8, click_model="choice")
    pbm = SimulatedWorld(n_users=50, n_items=10, n_factors=3, seed=8)
    log = choice.log(PopularityPolicy(), feed_length=4, n_feeds=20, seed=1)
    same = pbm.log(PopularityPolicy(), feed_length=4, n_feeds=20, seed=1)
    assert log.click.reshape(-1, 4).sum(axis=1).max() == 1
    np.testing.assert_array_equal(log.item, same.item)
    np.testing.assert_array_equal(log.propensity, same.propensity)
    assert log.click_model == "choice"
    with pytest.raises(NotImplementedError, match="'choice'"):
        choice.policy_reward(PopularityPolicy(), LogDiscount(), 4)


@pytest.mark.parametrize(
    "users, rankings, discount, error, message",
    [
        ([0, 1], [[0, 1]], None, ValueError, r"users must have shape \(n,\).*\(2,\) and \(1, 2\)"),
        ([0], [[0, 3, 0]], None, ValueError, r"each item once per row; row 0 is \[0, 3, 0\]"),
        ([0], [[0, 9]], None, ValueError, "unknown index 9 in rankings"),
        ([0.5], [[0, 1]], None, ValueError, "users must be integer indices"),
        ([0], [[0, 1]], "log", TypeError, "discount must be a Discount model, got str"),
        ([0], [[0, 1]], CustomDiscount([0.5, 0.8]), ValueError, "non-increasing discount"),
    ],
)
def test_expected_clicks_arguments(users, rankings, discount, error, message):
    world = SimulatedWorld(n_users=3, n_items=5, n_factors=2, seed=0, click_model="cascade")
    with pytest.raises(error, match=message):
        world.expected_clicks(users, rankings, discount)


def test_unknown_click_model_names_the_three():
    with pytest.raises(ValueError, match=r"\('pbm', 'cascade', 'choice'\), got 'dbn'"):
        SimulatedWorld(n_users=2, n_items=3, click_model="dbn")
