"""The pseudo-inverse estimator on feed logs.

References: ``numpy.linalg.pinv`` of ``Γ`` summed here over every ranking of the logging
policy (probabilities written out in the test), the exact expectation of the estimator over
every logged ranking and click vector of tiny worlds against the true value by enumeration,
and hand calculation.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from test_cascade_dr import enumerated_world, pl_probability, tiny_world, true_value

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged import (
    DeterministicRanker,
    FeedLog,
    LoggedRanking,
    PlackettLuceRanker,
    pseudo_inverse,
)
from recpack_ope.propensity.discount import ExponentialDiscount

module = importlib.import_module("recpack_ope.logged.pseudo_inverse")

pytestmark = pytest.mark.filterwarnings(
    "ignore::recpack_ope.inference.diagnostics.ReliabilityWarning"
)


def indicator(ranking, n_items):
    """``1_s``: index ``j · n_items + a`` for item a at rank j + 1."""
    v = np.zeros(len(ranking) * n_items)
    v[np.arange(len(ranking)) * n_items + np.asarray(ranking)] = 1
    return v


def weights_by_pinv(logging_scores, target_dist, rankings, n_items):
    """``q_πᵀ pinv(Γ) 1_s`` of each ranking, Γ and q summed over every ranking of k items."""
    k = len(rankings[0])
    everything = list(itertools.permutations(range(n_items), k))
    gamma = sum(
        pl_probability(logging_scores, s) * np.outer(indicator(s, n_items), indicator(s, n_items))
        for s in everything
    )
    q = sum(p * indicator(s, n_items) for s, p in target_dist.items())
    inverse = np.linalg.pinv(gamma)
    return np.array([q @ inverse @ indicator(s, n_items) for s in rankings])


def one_session_per_ranking(rankings, n_items, context=0, n_contexts=1):
    k = len(rankings[0])
    return FeedLog.from_arrays(
        np.repeat(np.arange(len(rankings)), k),
        np.concatenate(rankings),
        np.tile(np.arange(1, k + 1), len(rankings)),
        np.tile(np.eye(k)[0], len(rankings)),  # a reward of 1 at rank 1: V_s = 1
        context=np.full(len(rankings) * k, context),
        n_items=n_items,
        n_contexts=n_contexts,
    )


@pytest.mark.parametrize(("n_items", "k"), [(3, 2), (4, 2), (4, 3), (3, 3), (5, 2)])
@pytest.mark.parametrize("uniform", [True, False])
def test_session_weights_are_those_of_the_pseudo_inverse(n_items, k, uniform):
    rng = np.random.default_rng(n_items + 10 * k)
    logging_scores = np.zeros(n_items) if uniform else rng.normal(size=n_items)
    target_scores = rng.normal(size=n_items)
    rankings = [np.array(s) for s in itertools.permutations(range(n_items), k)]
    log = one_session_per_ranking(rankings, n_items)
    target_dist = {s: pl_probability(target_scores, s) for s in map(tuple, rankings)}
    est = pseudo_inverse(
        log, PlackettLuceRanker(target_scores[None, :]), logging=PlackettLuceRanker(logging_scores)
    )
    expected = weights_by_pinv(logging_scores, target_dist, rankings, n_items)
    np.testing.assert_allclose(est.terms.ravel(), expected, rtol=0, atol=1e-9)
    assert est.weighting is None and est.name == "pseudo-inverse"


@pytest.mark.parametrize(("n_items", "k"), [(4, 2), (5, 3), (3, 3)])
def test_uniform_closed_form_agrees_with_the_general_route(n_items, k):
    rng = np.random.default_rng(k)
    log = one_session_per_ranking(
        [np.array(s) for s in itertools.permutations(range(n_items), k)], n_items
    )
    target = DeterministicRanker(rng.normal(size=(1, n_items)))
    closed = module._session_weights(log, target, PlackettLuceRanker.uniform(n_items))
    # The general route: Γ of equal weights by enumeration, and its pseudo-inverse.
    inverse = np.linalg.pinv(module._gamma(np.zeros(n_items), k))
    top = np.argsort(-target.scores[0], kind="stable")[:k]
    q = indicator(top, n_items)
    general = [q @ inverse @ indicator(log.item[a : a + k], n_items) for a in log.indptr[:-1]]
    np.testing.assert_allclose(closed, general, rtol=0, atol=1e-9)


def test_one_logging_policy_is_enumerated_once(monkeypatch):
    calls = []
    gamma = module._gamma

    def counted(log_weights, k):
        calls.append(k)
        return gamma(log_weights, k)

    monkeypatch.setattr(module, "_gamma", counted)
    rng = np.random.default_rng(0)
    n_sessions = 12
    log = FeedLog.from_arrays(
        np.repeat(np.arange(n_sessions), 2),
        np.concatenate([rng.permutation(4)[:2] for _ in range(n_sessions)]),
        np.tile([1, 2], n_sessions),
        rng.integers(0, 2, 2 * n_sessions).astype(float),
        context=np.repeat(np.arange(n_sessions) % 3, 2),
        n_items=4,
    )
    target = PlackettLuceRanker(rng.normal(size=(3, 4)))
    pseudo_inverse(log, target, logging=PlackettLuceRanker(rng.normal(size=4)))
    assert calls == [2]  # three contexts, one policy
    calls.clear()
    pseudo_inverse(log, target, logging=PlackettLuceRanker(rng.normal(size=(3, 4))))
    assert calls == [2, 2, 2]  # one policy per context


def exact_expectation(world, k, click, deterministic, uniform, discount):
    logging_scores = np.zeros_like(world["logging_scores"]) if uniform else world["logging_scores"]
    log, probability = enumerated_world(logging_scores, world["rho"], world["theta"], k, click)
    target = (DeterministicRanker if deterministic else PlackettLuceRanker)(world["target_scores"])
    est = pseudo_inverse(log, target, logging=PlackettLuceRanker(logging_scores), discount=discount)
    value = true_value(
        world["target_scores"],
        world["rho"],
        world["theta"],
        k,
        click,
        discount.weights(3),
        deterministic,
    )
    return probability @ est.terms.ravel(), value


@pytest.mark.parametrize(
    ("n_items", "k", "deterministic", "uniform"),
    [(3, 2, True, True), (4, 3, False, True), (4, 2, True, False), (5, 3, False, False),
     (3, 3, False, False), (3, 3, True, True)],
)  # fmt: skip
def test_exactly_unbiased_under_position_based_clicks(n_items, k, deterministic, uniform):
    world = tiny_world(n_items + k, n_items, k)
    mean, value = exact_expectation(
        world, k, "pbm", deterministic, uniform, ExponentialDiscount(0.8)
    )
    assert mean == pytest.approx(value, abs=1e-10)


def test_exact_bias_under_cascade_clicks():
    # A cascade breaks additivity: a click above removes the reward below. With 5 items and
    # K = 3 the exact bias is +0.0173 on V = 0.836 (deterministic target, uniform logging) and
    # +0.0098 on V = 0.825 (Plackett–Luce both); over 20 worlds (seeds 0–19) the relative bias
    # ranged −2.1 % / +0.5 % / +3.2 % (min / median / max) and −0.8 % / +0.1 % / +2.5 %.
    world = tiny_world(8, 5, 3)
    one = ExponentialDiscount(1.0)
    for deterministic, uniform, bias, value in [
        (True, True, 0.01727836073187, 0.83629835360326),
        (False, False, 0.00978934315564, 0.82522574281710),
    ]:
        mean, true = exact_expectation(world, 3, "cascade", deterministic, uniform, one)
        assert true == pytest.approx(value, abs=1e-12)
        assert mean - true == pytest.approx(bias, abs=1e-12)
        mean, true = exact_expectation(world, 3, "pbm", deterministic, uniform, one)
        assert mean == pytest.approx(true, abs=1e-10)
    # With 4 items and K = 3 every function of the shown set is additive (4 sets, 4 item
    # terms), and the cascade's total reward 1 − Π(1 − ρ) depends on the set only: no bias.
    small = tiny_world(7, 4, 3)
    mean, true = exact_expectation(small, 3, "cascade", True, True, one)
    assert mean == pytest.approx(true, abs=1e-10)


def test_one_session_by_hand():
    # Uniform logging over 3 items, K = 2, target ranking (0, 1): S = Σ_j π(s_j at j) and
    # T = Σ_j P_π(s_j in the top 2). Session (0, 1): S = 2, T = 2, weight 1 + 2 (2 + 0) = 5;
    # session (2, 0): S = 0, T = 1, weight 1 + 2 (0 − 1) = −1. Rewards: 1 and 0 + 1.
    log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 2, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    target = DeterministicRanker(np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]))
    est = pseudo_inverse(log, target, logging=PlackettLuceRanker.uniform(3))
    assert est.terms.ravel().tolist() == pytest.approx([5.0, -1.0], abs=1e-12)
    assert est.value == pytest.approx(2.0, abs=1e-12)
    with pytest.raises(ValueError, match="pseudo-inverse is not weighted by inverse propensities"):
        est.sensitivity(2.0)


def test_its_reliability_warning_does_not_advise_clipping():
    # Two rewarded sessions, weights 5 and 1 (|−1|): ESS 36/26 < 50 fires; the
    # pseudo-inverse has no clip= to suggest.
    log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 2, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    target = DeterministicRanker(np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]))
    with pytest.warns(ReliabilityWarning, match="ESS 1.385 < 50") as caught:
        pseudo_inverse(log, target, logging=PlackettLuceRanker.uniform(3))
    message = str(caught[0].message)
    assert "use an estimator whose weights can be clipped" in message
    assert "clip=" not in message


def test_bad_input_is_refused():
    log = FeedLog.from_arrays([0, 0], [0, 1], [1, 2], [1.0, 0.0], n_items=3)
    target = DeterministicRanker(np.array([[3.0, 2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"pseudo_inverse needs logging="):
        pseudo_inverse(log, target)
    with pytest.raises(TypeError, match=r"PlackettLuceRanker logging policy.*got LoggedRanking"):
        pseudo_inverse(log, target, logging=LoggedRanking())
    with pytest.raises(TypeError, match=r"target must be a DeterministicRanker.*LoggedRanking"):
        pseudo_inverse(log, LoggedRanking(), logging=PlackettLuceRanker.uniform(3))
    gap = FeedLog.from_arrays([0, 0], [0, 1], [1, 3], [1.0, 0.0], n_items=3)
    with pytest.raises(ValueError, match=r"pseudo_inverse needs whole rankings.*missing rank 2"):
        pseudo_inverse(gap, target, logging=PlackettLuceRanker.uniform(3))
    few = PlackettLuceRanker(np.array([[0.0, 1.0, -np.inf]]))
    odd = FeedLog.from_arrays([0, 0], [0, 2], [1, 2], [1.0, 0.0], n_items=3)
    with pytest.raises(ValueError, match=r"session 0 shows item 2 that the logging policy cannot"):
        pseudo_inverse(odd, target, logging=few)
    big = FeedLog.from_arrays(np.zeros(5), np.arange(5), np.arange(1, 6), np.ones(5), n_items=30)
    cost = r"every ranking of 5 of the logging policy's 30 candidates to compute Γ: 17,100,720 "
    with pytest.raises(ValueError, match=cost + "rankings, above the 200,000"):
        pseudo_inverse(
            big, DeterministicRanker(np.ones((1, 30))), logging=PlackettLuceRanker(np.arange(30.0))
        )
    # The uniform policy needs no enumeration, whatever its size.
    assert np.isfinite(
        pseudo_inverse(
            big, DeterministicRanker(np.ones((1, 30))), logging=PlackettLuceRanker.uniform(30)
        ).value
    )
