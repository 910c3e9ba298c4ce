"""The simulator: relevance model, logging process, exact exposure and online reward.

Independent references: hand-computed relevance, a per-user Python loop over the dense
relevance matrix, Monte Carlo replications of simulated users, and empirical frequencies of
the logging policy's feeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from recpack_ope.plackett_luce import rank_marginals

from recpack_ope import ExponentialDiscount, LogDiscount, TopK, unbiased_dcg
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld, UniformPolicy


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
    with pytest.raises(
        TypeError, match="policy must be a PopularityPolicy or UniformPolicy, got str"
    ):
        world.log("popularity", feed_length=2)
    with pytest.raises(TypeError, match="discount must be a Discount model, got int"):
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
        est = unbiased_dcg(log.clicks, top, discount=disc, propensity=log.propensity_model())
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
