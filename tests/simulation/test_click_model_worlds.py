"""Every ranking estimator in worlds that meet and break its click model, by Monte Carlo.

Tiny worlds (7 items, feeds of 3, 40 users) under the position-based, cascade and
multinomial-logit choice click models; logging is Plackett–Luce over popularity
(``PopularityPolicy``), the target Plackett–Luce over each user's relevance log-odds. The
truth ``V(π)`` enumerates the target's 210 rankings per user in a plain loop (Plackett–Luce
probability times the summed ``expected_clicks``). The simulator's clicks are checked against
``expected_clicks`` first, so that the estimators are judged on clicks that follow the model.

Each world logs ``R`` feeds per user in one call; the feeds numbered f of every user form
replicate log f (independent by construction: every feed is drawn afresh). Every estimator
here is a mean of per-session values, each depending on its own session only, so the
estimate of replicate log f is the mean of its sessions' values (checked on one replicate).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged import (
    FeedLog,
    PlackettLuceRanker,
    cascade_dr,
    cascade_ips,
    independent_ips,
    logged_dcg,
    pseudo_inverse,
    standard_ips,
)
from recpack_ope.logged.adaptive_ips import adaptive_ips
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.simulation.world import PopularityPolicy, SimulatedWorld
from recpack_ope.studies.click_models import RankingEstimator, expected_estimate

N_USERS, N_ITEMS, K = 40, 7, 3
# R replicate logs: the replicate mean is compared with the truth at 4 standard errors. Its
# standard error, from R replicates, is itself within ~1/√(2R) ≈ 5 % of the true one, and
# each log averages 40 sessions, so the replicate mean is close to normal: |z| > 4 then has
# probability ~6e-5 per comparison, ~1e-3 over the ~20 comparisons of this file, while a
# bias of 8 % of the truth or more is detected (measured in the breaking worlds below).
R = 250
VIEW = LogDiscount(cutoff=K)
LOGGING = PopularityPolicy(temperature=2.0)
TARGET_TEMPERATURE = 2.0


class _ViewedRelevance:
    """Q̂_k(x, a) = P(Q=1 | x, a) · δ(k): an imperfect reward model (it ignores the ranks
    below k), with which Cascade-DR stays unbiased wherever cascade IPS is."""

    def __init__(self, world):
        self.world = world

    def predict(self, contexts, items, ranks):
        return self.world.relevance_of(contexts, items) * VIEW(ranks)


def _behaviours(allowed, log):
    """A behaviour per session for adaptive IPS, fixed by the session's user."""
    return np.asarray(allowed, dtype=object)[log.session_context % len(allowed)]


# name → (estimate(log, target, logging, world), click models under which it is unbiased)
ESTIMATORS = {
    "standard IPS": (
        lambda log, t, lg, w: standard_ips(log, t, logging=lg),
        {"pbm", "cascade", "choice"},
    ),
    "cascade IPS": (lambda log, t, lg, w: cascade_ips(log, t, logging=lg), {"pbm", "cascade"}),
    "independent IPS": (lambda log, t, lg, w: independent_ips(log, t, logging=lg), {"pbm"}),
    # The position-based estimator with the known view curve and the exact exposure ε0.
    "logged DCG": (lambda log, t, lg, w: logged_dcg(log, t, discount=VIEW), {"pbm"}),
    "pseudo-inverse": (lambda log, t, lg, w: pseudo_inverse(log, t, logging=lg), {"pbm"}),
    "cascade DR": (
        lambda log, t, lg, w: cascade_dr(log, t, reward_model=_ViewedRelevance(w), logging=lg),
        {"pbm", "cascade"},
    ),
    # Each session weighted by the ranks a random one of these behaviours names: every one
    # holds the ranks the reward depends on only under the cascade and position-based models.
    "adaptive IPS (cascade or standard)": (
        lambda log, t, lg, w: adaptive_ips(
            log, t, behavior=_behaviours(["cascade", "standard"], log), logging=lg
        ),
        {"pbm", "cascade"},
    ),
    "adaptive IPS (all three)": (
        lambda log, t, lg, w: adaptive_ips(
            log,
            t,
            behavior=_behaviours(["independent", "cascade", "standard"], log),
            logging=lg,
        ),
        {"pbm"},
    ),
}
WORLD_SEEDS = {"pbm": 21, "cascade": 22, "choice": 23}


def _pl_probability(weights, ranking):
    """Plackett–Luce probability of a ranking, one draw after another."""
    left, p = weights.sum(), 1.0
    for item in ranking:
        p *= weights[item] / left
        left -= weights[item]
    return p


def _truth(world, scores):
    """V(π): mean over users of Σ over the target's rankings of π(ranking) · expected clicks."""
    total = 0.0
    for u in range(world.n_users):
        weights = np.exp((scores[u] - scores[u].max()) / TARGET_TEMPERATURE)
        rankings = list(itertools.permutations(range(world.n_items), K))
        clicks = world.expected_clicks(np.full(len(rankings), u), np.array(rankings), VIEW)
        total += sum(
            _pl_probability(weights, r) * c
            for r, c in zip(rankings, clicks.sum(axis=1), strict=True)
        )
    return total / world.n_users


@pytest.fixture(scope="module", params=["pbm", "cascade", "choice"])
def setting(request):
    model = request.param
    world = SimulatedWorld(
        n_users=N_USERS,
        n_items=N_ITEMS,
        n_factors=2,
        base_logit=0.0,
        seed=WORLD_SEEDS[model],
        click_model=model,
    )
    relevance = world.relevance()
    scores = np.log(relevance) - np.log1p(-relevance)
    target = PlackettLuceRanker(scores, temperature=TARGET_TEMPERATURE, method="exact")
    logging = PlackettLuceRanker(
        np.log(world.popularity), temperature=LOGGING.temperature, method="exact"
    )
    logged = world.log(LOGGING, feed_length=K, discount=VIEW, n_feeds=R, seed=1)
    return model, world, target, logging, logged, _truth(world, scores)


def test_logged_clicks_follow_expected_clicks(setting):
    # Given the logged feeds, the clicks at rank k of different feeds are independent
    # Bernoulli(p_fk), p from expected_clicks: their total has mean Σ_f p_fk and variance
    # Σ_f p_fk (1 − p_fk). 3 ranks (and, for the single-click models, the feeds without a
    # click) at 4 SE: a false alarm has probability < 4 · 6.3e-5 per world.
    model, world, _, _, logged, _ = setting
    items = logged.item.reshape(-1, K)
    users = logged.user.reshape(-1, K)[:, 0]
    clicks = logged.click.reshape(-1, K)
    p = world.expected_clicks(users, items, VIEW)
    se = np.sqrt((p * (1 - p)).sum(axis=0))
    z = (clicks.sum(axis=0) - p.sum(axis=0)) / se
    assert np.abs(z).max() < 4, z
    if model != "pbm":
        assert clicks.sum(axis=1).max() == 1
        none = 1 - p.sum(axis=1)
        observed = (clicks.sum(axis=1) == 0).sum()
        assert abs(observed - none.sum()) < 4 * np.sqrt((none * (1 - none)).sum())


# Where a click model breaks an estimator, its bias is detectable at R replicates of 40
# sessions only when large: measured z = (mean − truth) / SE of these seeded runs. The others
# (pseudo-inverse: z 3.1 in the cascade and 2.9 in the choice world, 5 % of the truth; the
# adaptive mixtures: 4.1, 2.6 and 3.7, too close to 4 to rely on) are checked through their
# exact expectation only.
DETECTED = {
    ("cascade", "independent IPS"),  # z 15.2
    ("cascade", "logged DCG"),  # z 16.6
    ("choice", "cascade IPS"),  # z 5.6
    ("choice", "independent IPS"),  # z 24.5
    ("choice", "logged DCG"),  # z 33.8
    ("choice", "cascade DR"),  # z 6.2
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimators_are_unbiased_exactly_where_their_click_model_holds(setting, name):
    model, world, target, logging, logged, truth = setting
    estimate, unbiased_under = ESTIMATORS[name]
    # The exact expectation over logs (every ranking enumerated with its logging probability,
    # rewards replaced by their click probabilities; valid as each session's value is affine
    # in its rewards), tested against Monte Carlo in tests/studies/test_click_models_study.py.
    wrapped = RankingEstimator(name, lambda log, t, lg, w, v: estimate(log, t, lg, w), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        whole = estimate(logged.feed_log(), target, logging, world)
        # Session user · R + feed; replicate 0 estimated on a log of its own sessions.
        first = _replicate(logged, 0)
        alone = estimate(first, target, logging, world).value
        expected = expected_estimate(world, logged, wrapped, target, logging)
    terms = np.asarray(whole.terms, dtype=np.float64).reshape(N_USERS, R)
    assert whole.value == pytest.approx(terms.mean(), rel=1e-12)
    assert alone == pytest.approx(terms[:, 0].mean(), rel=1e-10)
    replicates = terms.mean(axis=0)
    se = replicates.std(ddof=1) / np.sqrt(R)
    assert abs(replicates.mean() - expected) <= 4 * se, (name, model, replicates.mean(), expected)
    z = (replicates.mean() - truth) / se
    if model in unbiased_under:
        assert abs(z) <= 4, (name, model, z, truth)
        assert expected == pytest.approx(truth, rel=1e-9)
    else:
        # Every breaking world here makes the estimator overestimate, by 4 % or more.
        assert expected > 1.04 * truth, (name, model, expected, truth)
        if (model, name) in DETECTED:
            assert z > 4, (name, model, z)


def _replicate(logged, f):
    """Replicate log f: the feeds numbered f of every user."""
    rows = logged.feed == f
    return FeedLog.from_arrays(
        logged.user[rows],
        logged.item[rows],
        logged.rank[rows],
        logged.click[rows],
        context=logged.user[rows],
        propensity=logged.propensity[rows],
        logging_weight=logged.logging_weights[logged.item[rows]],
        n_items=N_ITEMS,
        n_contexts=N_USERS,
    )
