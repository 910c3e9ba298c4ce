"""ThompsonSamplingRanker: exact rank marginals and prefix probabilities of Bernoulli Thompson
sampling, against closed forms, brute-force integration, Monte Carlo races and the Open
Bandit Dataset's logged propensities."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, special

from recpack_ope.io import load_bts_prior, load_open_bandit
from recpack_ope.logged import (
    FeedLog,
    PlackettLuceRanker,
    ThompsonSamplingRanker,
    cascade_ips,
    standard_ips,
)
from recpack_ope.propensity.discount import CustomDiscount, LogDiscount


def _p_greater(a1, b1, a2, b2) -> float:
    """P(θ_1 > θ_2) for θ_i ∼ Beta(a_i, b_i) with integer a_1, in closed form:
    Σ_{i < a_1} B(a_2 + i, b_1 + b_2) / ((b_1 + i) B(1 + i, b_1) B(a_2, b_2))."""
    i = np.arange(int(a1))
    log_terms = (
        special.betaln(a2 + i, b1 + b2)
        - np.log(b1 + i)
        - special.betaln(1 + i, b1)
        - special.betaln(a2, b2)
    )
    return float(np.sum(np.exp(log_terms)))


def _pdf(a, b):
    return lambda t: np.exp((a - 1) * np.log(t) + (b - 1) * np.log1p(-t) - special.betaln(a, b))


def _ordering(params, order) -> float:
    """P(θ_{o1} > θ_{o2} > θ_{o3}) by nested adaptive quadrature (scipy), the brute force."""
    (a1, b1), (a2, b2), (a3, b3) = (params[o] for o in order)

    def inner(t):
        value, _ = integrate.quad(
            lambda u: _pdf(a2, b2)(u) * special.betaincc(a1, b1, u), t, 1, epsabs=1e-13
        )
        return value

    value, _ = integrate.quad(lambda t: _pdf(a3, b3)(t) * inner(t), 0, 1, epsabs=1e-12, limit=200)
    return value


def test_two_items_match_the_closed_form_of_two_betas():
    # The first two items of the Open Bandit prior ("all"): integer parameters in the
    # hundreds and thousands, densities concentrated within ~1e-3. The closed form's float64
    # sum of Beta-function ratios is itself only good to ~1e-11 there (40-digit arithmetic
    # agrees with the quadrature to 1e-16), hence the tolerance.
    for a1, b1, a2, b2 in (
        (47.0, 12198.0, 8.0, 3566.0),
        (3.0, 2.0, 5.0, 4.0),
        (1.0, 1.0, 2.0, 1.0),
    ):
        policy = ThompsonSamplingRanker([a1, a2], [b1, b2], n_ranks=2)
        expected = _p_greater(a1, b1, a2, b2)
        np.testing.assert_allclose(policy.rank_marginals()[0, 0], expected, rtol=0, atol=1e-10)
        np.testing.assert_allclose(policy.prefix_probabilities([[0, 1]]), [expected], atol=1e-10)


def test_three_items_match_brute_force_orderings():
    # α < 1 puts an integrable singularity at 0; the rest differ in location and spread.
    params = [(0.7, 1.5), (2.0, 5.0), (3.0, 3.0)]
    policy = ThompsonSamplingRanker(*zip(*params, strict=True), n_ranks=3)
    orders = list(itertools.permutations(range(3)))
    brute = {order: _ordering(params, order) for order in orders}
    assert sum(brute.values()) == pytest.approx(1.0, abs=1e-10)
    marginals = np.zeros((3, 3))
    for order, p in brute.items():
        for k, a in enumerate(order):
            marginals[a, k] += p
    np.testing.assert_allclose(policy.rank_marginals(), marginals, atol=1e-9)
    np.testing.assert_allclose(
        policy.prefix_probabilities(np.array(orders)), [brute[o] for o in orders], atol=1e-9
    )
    pairs = [(0, 1), (2, 0), (1, 2)]
    two = [sum(p for o, p in brute.items() if o[:2] == pair) for pair in pairs]
    np.testing.assert_allclose(policy.prefix_probabilities(pairs), two, atol=1e-9)


def test_rank_marginals_are_distributions_and_prefixes_add_up():
    alpha, beta = load_bts_prior("men")
    policy = ThompsonSamplingRanker(alpha, beta, n_ranks=3)
    m = policy.rank_marginals()
    np.testing.assert_allclose(m.sum(axis=0), 1.0, atol=1e-12)  # one item at every rank
    assert m.sum(axis=1).max() <= 1.0 + 1e-12  # an item at most once
    top = int(np.argmax(m[:, 0]))
    others = np.delete(np.arange(alpha.size), top)
    pairs = np.column_stack([np.full(others.size, top), others])
    # Summing the second item out of P(top, b) leaves P(top at rank 1).
    assert policy.prefix_probabilities(pairs).sum() == pytest.approx(m[top, 0], abs=1e-12)
    second = others[np.argmax(policy.prefix_probabilities(pairs))]
    rest = np.delete(np.arange(alpha.size), [top, second])
    triples = np.column_stack([np.full(rest.size, top), np.full(rest.size, second), rest])
    assert policy.prefix_probabilities(triples).sum() == pytest.approx(
        policy.prefix_probabilities([[top, second]])[0], abs=1e-12
    )


def test_more_nodes_change_nothing_beyond_1e_12():
    alpha, beta = load_bts_prior("men")
    coarse = ThompsonSamplingRanker(alpha, beta, n_ranks=3)
    fine = ThompsonSamplingRanker(alpha, beta, n_ranks=3, nodes=32)
    assert np.abs(coarse.rank_marginals() - fine.rank_marginals()).max() < 1e-12
    # The likeliest first items, in the orders that carry the most probability.
    top = np.argsort(-coarse.rank_marginals()[:, 0])[:4]
    prefixes = np.array(list(itertools.permutations(top, 3)))
    assert coarse.prefix_probabilities(prefixes).max() > 0.005
    np.testing.assert_allclose(
        coarse.prefix_probabilities(prefixes), fine.prefix_probabilities(prefixes), atol=1e-12
    )


def test_marginals_and_prefixes_match_a_monte_carlo_race():
    alpha, beta = load_bts_prior("men")
    policy = ThompsonSamplingRanker(alpha, beta, n_ranks=3)
    rng = np.random.default_rng(7)
    n, counts = 400_000, np.zeros((alpha.size, 3))
    prefixes = np.array([[21, 5, 30], [5, 21, 30], [30, 21, 5]])
    hits = np.zeros(len(prefixes))
    for _ in range(4):
        draws = rng.beta(alpha, beta, size=(n // 4, alpha.size))
        top = np.argsort(-draws, axis=1)[:, :3]
        for k in range(3):
            counts[:, k] += np.bincount(top[:, k], minlength=alpha.size)
        hits += [(top == p).all(axis=1).sum() for p in prefixes]
    exact = policy.rank_marginals()
    # Binomial standard errors of the frequencies; 5 of them over 102 + 3 cells leave a false
    # alarm probability of ~6e-5.
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(counts / n - exact) <= 5 * se + 1e-9)
    pre = policy.prefix_probabilities(prefixes)
    assert np.all(np.abs(hits / n - pre) <= 5 * np.sqrt(pre * (1 - pre) / n) + 1e-9)


def _whole_rankings() -> FeedLog:
    return FeedLog.from_arrays(
        [0, 0, 0, 1, 1, 2], [2, 0, 3, 1, 3, 0], [1, 2, 3, 1, 2, 1], [1, 0, 1, 0, 1, 1]
    )


def test_exchangeable_items_rank_uniformly():
    # Equal parameters: every ordering equally likely, the uniform Plackett–Luce ranking.
    policy = ThompsonSamplingRanker([2.5] * 4, [4.0] * 4, n_ranks=3)
    log = _whole_rankings()
    uniform = PlackettLuceRanker.uniform(4)
    np.testing.assert_allclose(policy.position_probabilities(log), 0.25, atol=1e-12)
    np.testing.assert_allclose(
        policy.conditional_probabilities(log), uniform.conditional_probabilities(log), atol=1e-12
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.inference.ReliabilityWarning")  # 6 rows
def test_conditionals_multiply_to_prefixes_and_feed_the_ranking_estimators():
    params = ([2.0, 1.0, 4.0, 1.5], [3.0, 1.0, 2.0, 5.0])
    policy = ThompsonSamplingRanker(*params, n_ranks=3)
    log = _whole_rankings()
    conditional = policy.conditional_probabilities(log)
    sessions = [[2, 0, 3], [1, 3], [0]]
    starts = [0, 3, 5]
    for start, items in zip(starts, sessions, strict=True):
        for k in range(1, len(items) + 1):
            expected = policy.prefix_probabilities([items[:k]])[0]
            assert np.prod(conditional[start : start + k]) == pytest.approx(expected, abs=1e-13)
    uniform = PlackettLuceRanker.uniform(4)
    # Standard IPS by hand: Σ_rows r · π(ranking) / π0(ranking), per session, over 3 sessions.
    ranking = [policy.prefix_probabilities([s])[0] for s in sessions]
    uniform_ranking = [1 / 24, 1 / 12, 1 / 4]
    by_hand = (
        sum(
            r * ranking[s] / uniform_ranking[s]
            for s, r in zip([0, 0, 0, 1, 1, 2], log.reward, strict=True)
        )
        / 3
    )
    assert standard_ips(log, policy, logging=uniform).value == pytest.approx(by_hand, rel=1e-12)
    cascade = cascade_ips(log, policy, logging=uniform).value
    by_hand = (
        sum(policy.prefix_probabilities([[2, 0, 3]])) * 24  # rank 3 of session 0
        + policy.prefix_probabilities([[2]])[0] * 4  # rank 1 of session 0
        + policy.prefix_probabilities([[1, 3]])[0] * 12
        + policy.prefix_probabilities([[0]])[0] * 4
    ) / 3
    assert cascade == pytest.approx(by_hand, rel=1e-12)


def test_ranks_beyond_the_policy_and_exposure():
    policy = ThompsonSamplingRanker([2.0, 1.0, 1.0], [1.0, 1.0, 1.0], n_ranks=2)
    log = FeedLog.from_arrays([0, 0, 0], [0, 1, 2], [1, 2, 3], [1, 1, 1])
    m = policy.rank_marginals()
    assert policy.position_probabilities(log)[2] == 0.0
    assert policy.conditional_probabilities(log)[2] == 0.0
    curve = LogDiscount(cutoff=2)
    np.testing.assert_allclose(
        policy.exposure(log, curve).values, m @ curve(np.arange(1, 3)), atol=1e-15
    )
    # P(item 0 first) = ∫ 2t · t² dt = 1/2 against two Beta(1, 1): by hand.
    assert m[0, 0] == pytest.approx(0.5, abs=1e-12)
    flat = policy.exposure(log, CustomDiscount([1.0, 1.0]), rows=np.array([0])).values
    np.testing.assert_allclose(flat, [m[0].sum()], atol=1e-15)


def test_random_log_propensities_are_the_exchangeable_marginals():
    # Real data: the uniform-random log's propensity_score is P(a at k) of a ranking whose
    # items are exchangeable, 1 / n_items (to the 16 digits the CSV stores).
    for campaign, n in (("all", 80), ("men", 34), ("women", 46)):
        data = load_open_bandit("random", campaign)
        policy = ThompsonSamplingRanker(np.ones(n), np.ones(n), n_ranks=3)
        np.testing.assert_allclose(
            policy.position_probabilities(data.log), data.log.position_propensity, atol=1e-15
        )


def test_bts_log_propensities_left_the_starting_prior():
    # Real data: the bts log's propensity_score is the authors' Monte Carlo of P(a at k) at
    # the time of the impression, in steps of 1e-6 (1e6 races: standard error at most 5e-4;
    # a handful of rows hold 1 / n_items instead).
    # The prior is where the policy started the week; it updated its posterior every few
    # minutes, so the exact marginals of the prior differ from the logged propensities by far
    # more than that Monte Carlo error in almost every row.
    for campaign, worst in (("all", 0.9467), ("men", 0.6860), ("women", 0.9578)):
        data = load_open_bandit("bts", campaign)
        policy = ThompsonSamplingRanker(*load_bts_prior(campaign), n_ranks=3)
        logged = data.log.position_propensity
        assert np.mean(np.abs(logged * 1e6 - np.round(logged * 1e6)) < 1e-6) > 0.999
        exact = policy.position_probabilities(data.log)
        se = np.sqrt(exact * (1 - exact) / 1e6)
        beyond = np.abs(logged - exact) > 5 * np.maximum(se, 1e-6)
        assert beyond.mean() > 0.98
        assert np.abs(logged - exact).max() == pytest.approx(worst, abs=1e-4)


@pytest.mark.parametrize(
    ("alpha", "beta", "n_ranks", "message"),
    [
        ([1.0, -1.0], [1.0, 1.0], 1, r"alpha\[1\] is -1.0"),
        ([1.0, 1.0], [1.0, np.nan], 1, r"beta\[1\] is nan"),
        ([[1.0]], [[1.0]], 1, "1-D"),
        ([1.0, 1.0], [1.0], 1, "one pair per item"),
        ([1.0, 1.0], [1.0, 1.0], 3, "n_ranks=3 exceeds the 2 items"),
    ],
)
def test_bad_parameters_are_refused(alpha, beta, n_ranks, message):
    with pytest.raises(ValueError, match=message):
        ThompsonSamplingRanker(alpha, beta, n_ranks)


def test_bad_inputs_name_the_problem():
    policy = ThompsonSamplingRanker([1.0, 1.0], [1.0, 1.0], n_ranks=2)
    with pytest.raises(ValueError, match="nodes must be >= 4"):
        ThompsonSamplingRanker([1.0], [1.0], 1, nodes=3)
    with pytest.raises(ValueError, match="items up to index 2"):
        policy.position_probabilities(FeedLog.from_arrays([0], [2], [1], [1]))
    with pytest.raises(TypeError, match="log must be a FeedLog"):
        policy.conditional_probabilities("log")
    with pytest.raises(ValueError, match="repeat an item"):
        policy.prefix_probabilities([[1, 1]])
    with pytest.raises(ValueError, match="outside 0..1"):
        policy.prefix_probabilities([[0, 2]])
    with pytest.raises(ValueError, match="1 <= k <= n_ranks=2"):
        policy.prefix_probabilities([[0, 1, 0]])
