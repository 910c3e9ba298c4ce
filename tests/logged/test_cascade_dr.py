"""Cascade-DR on feed logs.

References: the exact expectation of the estimator over every logged ranking and every click
vector of tiny worlds (their probabilities written out here, not taken from the package),
the true value by enumerating the target's rankings, the paper's sum-over-ranks form
evaluated session by session, cascade IPS (the estimator with Q̂ = 0), and hand calculation.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from recpack_ope.logged import (
    DeterministicRanker,
    FeedLog,
    LoggedRanking,
    PlackettLuceRanker,
    cascade_dr,
    cascade_ips,
)
from recpack_ope.propensity.discount import ExponentialDiscount, LogDiscount

# Tiny logs carry few weights: the reliability warnings are expected and not what is tested.
pytestmark = pytest.mark.filterwarnings(
    "ignore::recpack_ope.inference.diagnostics.ReliabilityWarning"
)


def pl_probability(scores, ranking, temperature=1.0):
    """Probability that a Plackett–Luce policy with these scores shows ``ranking`` on top."""
    w = np.exp(np.asarray(scores, dtype=float) / temperature)
    p, left = 1.0, w.sum()
    for item in ranking:
        p *= w[item] / left
        left -= w[item]
    return p


def ranking_distribution(policy_scores, n_items, k, deterministic=False):
    """{ranking: probability} over every ranking of k of the items."""
    rankings = list(itertools.permutations(range(n_items), k))
    if deterministic:
        top = tuple(np.argsort(-np.asarray(policy_scores), kind="stable")[:k].tolist())
        return {top: 1.0}
    return {s: pl_probability(policy_scores, s) for s in rankings}


def click_probabilities(click, rho, theta, ranking):
    """{click vector: probability} and the expected reward per rank of one shown ranking.

    ``pbm``: rank j is clicked with probability θ_j ρ(a_j), independently; ``cascade``: the
    user reads down and clicks the first item that attracts them (probability ρ), then stops.
    """
    r = rho[list(ranking)]
    k = len(ranking)
    out = {}
    for c in itertools.product((0, 1), repeat=k):
        c = np.array(c)
        if click == "pbm":
            p = np.prod(np.where(c == 1, theta[:k] * r, 1 - theta[:k] * r))
        elif c.sum() > 1:
            continue
        elif c.sum() == 0:
            p = np.prod(1 - r)
        else:
            j = int(np.argmax(c))
            p = r[j] * np.prod(1 - r[:j])
        out[tuple(c)] = p
    if click == "pbm":
        mean = theta[:k] * r
    else:
        mean = r * np.concatenate([[1.0], np.cumprod(1 - r)[:-1]])
    return out, mean


def enumerated_world(logging_scores, rho, theta, k, click):
    """A feed log with one session per (context, logged ranking, click vector) and each
    session's probability: the contexts equally likely, rankings by the logging policy."""
    n_contexts, n_items = logging_scores.shape
    sessions, items, ranks, rewards, contexts, probability = [], [], [], [], [], []
    s = 0
    for x in range(n_contexts):
        for ranking, p0 in ranking_distribution(logging_scores[x], n_items, k).items():
            clicks, _ = click_probabilities(click, rho[x], theta, ranking)
            for c, pc in clicks.items():
                sessions += [s] * k
                items += list(ranking)
                ranks += list(range(1, k + 1))
                rewards += list(c)
                contexts += [x] * k
                probability.append(p0 * pc / n_contexts)
                s += 1
    log = FeedLog.from_arrays(
        sessions, items, ranks, np.array(rewards, dtype=float), context=contexts,
        n_items=n_items, n_contexts=n_contexts,
    )  # fmt: skip
    return log, np.array(probability)


def true_value(target_scores, rho, theta, k, click, alpha, deterministic=False):
    """V(π) = E_x E_{s∼π} Σ_j α_j E[r_j | x, s], by enumeration."""
    n_contexts, n_items = target_scores.shape
    total = 0.0
    for x in range(n_contexts):
        dist = ranking_distribution(target_scores[x], n_items, k, deterministic)
        for ranking, p in dist.items():
            _, mean = click_probabilities(click, rho[x], theta, ranking)
            total += p * alpha[:k] @ mean / n_contexts
    return total


class TableQ:
    """Q̂_k(x, a) from a contexts × items × ranks table."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=float)

    def predict(self, contexts, items, ranks):
        return self.table[contexts, items, ranks - 1]


def right_q(target_scores, rho, theta, k, click, alpha, deterministic=False):
    """Q̂_k(x, a) = E_π[Σ_{j≥k} α_j r_j | a at rank k], by enumerating the target's rankings
    (0 where the target never puts a at k)."""
    n_contexts, n_items = target_scores.shape
    num = np.zeros((n_contexts, n_items, k))
    den = np.zeros((n_contexts, n_items, k))
    for x in range(n_contexts):
        dist = ranking_distribution(target_scores[x], n_items, k, deterministic)
        for ranking, p in dist.items():
            _, mean = click_probabilities(click, rho[x], theta, ranking)
            tail = np.cumsum((alpha[:k] * mean)[::-1])[::-1]
            for j, a in enumerate(ranking):
                num[x, a, j] += p * tail[j]
                den[x, a, j] += p
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def tiny_world(seed, n_items, k, n_contexts=2):
    rng = np.random.default_rng(seed)
    return dict(
        logging_scores=rng.normal(size=(n_contexts, n_items)),
        target_scores=2 * rng.normal(size=(n_contexts, n_items)),
        rho=rng.uniform(0.1, 0.9, size=(n_contexts, n_items)),
        theta=np.array([1.0, 0.7, 0.5]),
    )


@pytest.mark.parametrize("click", ["pbm", "cascade"])
@pytest.mark.parametrize("q", ["wrong", "right"])
@pytest.mark.parametrize(
    ("n_items", "k", "deterministic"), [(3, 2, False), (4, 3, True), (5, 2, False), (3, 3, True)]
)
def test_exact_expectation_equals_the_true_value(click, q, n_items, k, deterministic):
    world = tiny_world(n_items * 10 + k, n_items, k)
    discount = ExponentialDiscount(0.8)
    alpha = discount.weights(3)
    log, probability = enumerated_world(
        world["logging_scores"], world["rho"], world["theta"], k, click
    )
    args = (world["target_scores"], world["rho"], world["theta"], k, click, alpha, deterministic)
    if q == "right":
        model = TableQ(right_q(*args))
    else:
        model = TableQ(np.random.default_rng(1).uniform(-2, 3, size=(2, n_items, k)))
    target = (DeterministicRanker if deterministic else PlackettLuceRanker)(world["target_scores"])
    est = cascade_dr(
        log,
        target,
        reward_model=model,
        discount=discount,
        logging=PlackettLuceRanker(world["logging_scores"]),
    )
    expectation = probability @ est.terms.ravel()
    assert expectation == pytest.approx(true_value(*args), abs=1e-10)


def exact_moments(estimate_terms, probability):
    """Exact mean and per-session variance of an estimator over an enumerated world."""
    t = estimate_terms.ravel()
    mean = probability @ t
    return mean, probability @ (t - mean) ** 2


def test_the_right_reward_model_reduces_the_exact_variance_of_cascade_ips():
    # Position-based clicks, a Plackett–Luce target, 4 items, K = 3: every estimator below is
    # unbiased, and the exact per-session variances order as the module docstring says.
    world = tiny_world(7, 4, 3)
    alpha = np.ones(3)
    log, probability = enumerated_world(
        world["logging_scores"], world["rho"], world["theta"], 3, "pbm"
    )
    args = (world["target_scores"], world["rho"], world["theta"], 3, "pbm", alpha)
    target, logging = (
        PlackettLuceRanker(world["target_scores"]),
        PlackettLuceRanker(world["logging_scores"]),
    )
    ips = exact_moments(cascade_ips(log, target, logging=logging).terms, probability)
    right = exact_moments(
        cascade_dr(log, target, reward_model=TableQ(right_q(*args)), logging=logging).terms,
        probability,
    )
    wrong = exact_moments(
        cascade_dr(
            log, target, reward_model=TableQ(np.full((2, 4, 3), 5.0)), logging=logging
        ).terms,
        probability,
    )
    value = true_value(*args)
    for mean, _ in (ips, right, wrong):
        assert mean == pytest.approx(value, abs=1e-10)
    # Measured: variance 1.95 (cascade IPS), 0.39 (right Q̂), 5.5 (Q̂ = 2, far off).
    # Exact variances: 7.43 (cascade IPS), 2.75 (right Q̂), 68.7 (Q̂ = 5, far off).
    assert ips[1] == pytest.approx(7.4313, abs=1e-4)
    assert right[1] == pytest.approx(2.7549, abs=1e-4)
    assert wrong[1] > 2 * ips[1]


def random_log(rng, n_sessions=30, n_items=5, k=3, n_contexts=3):
    contexts = rng.integers(0, n_contexts, n_sessions)
    items = np.concatenate([rng.permutation(n_items)[:k] for _ in range(n_sessions)])
    return FeedLog.from_arrays(
        np.repeat(np.arange(n_sessions), k),
        items,
        np.tile(np.arange(1, k + 1), n_sessions),
        rng.integers(0, 2, n_sessions * k).astype(float),
        context=np.repeat(contexts, k),
        n_items=n_items,
        n_contexts=n_contexts,
    )


def paper_form(log, target_scores, logging_scores, table, alpha, inverse_of, clip):
    """The sum-over-ranks form, session by session, with π and π0 from the scores and the
    row's inverse prefix propensity ``inverse_of(row, π0)`` clipped at ``clip``."""
    total = 0.0
    for s in range(log.n_sessions):
        rows = range(log.indptr[s], log.indptr[s + 1])
        x = log.context[rows[0]]
        prefix, w_before, pi, pi0 = [], 1.0, 1.0, 1.0
        for row in rows:
            k, a = log.rank[row] - 1, log.item[row]
            weights = np.exp(target_scores[x]).copy()
            weights[prefix] = 0
            next_item = weights / weights.sum()
            pi *= next_item[a]
            pi0 *= _conditional(logging_scores[x], prefix, a)
            w = pi * min(clip, inverse_of(row, pi0))
            total += w * (alpha[k] * log.reward[row] - table[x, a, k])
            total += w_before * next_item @ table[x, :, k]
            prefix.append(a)
            w_before = w
    return total / log.n_sessions


def _conditional(scores, prefix, a):
    """Plackett–Luce probability of item a after the items of ``prefix``."""
    w = np.exp(np.asarray(scores, dtype=float))
    return w[a] / (w.sum() - w[prefix].sum())


@pytest.mark.parametrize("clip", [None, 2.5])
def test_weighting_is_the_paper_form_at_any_propensities(clip):
    # The sensitivity weighting rewrites the estimator as linear in the rows' inverse prefix
    # propensities; at the nominal ones and at random others it must equal the paper's form.
    rng = np.random.default_rng(3)
    log = random_log(rng)
    target_scores, logging_scores = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    table = rng.uniform(-1, 2, size=(3, 5, 3))
    discount = LogDiscount()
    est = cascade_dr(
        log,
        PlackettLuceRanker(target_scores),
        reward_model=TableQ(table),
        discount=discount,
        logging=PlackettLuceRanker(logging_scores),
        clip=clip,
    )
    m = np.inf if clip is None else clip
    alpha = discount.weights(3)
    nominal = paper_form(log, target_scores, logging_scores, table, alpha, lambda r, p: 1 / p, m)
    assert est.value == pytest.approx(nominal, rel=1e-12)
    assert est.weighting.value(est.weighting.raw) == pytest.approx(nominal, rel=1e-12)
    for _ in range(3):
        raw = est.weighting.raw * rng.uniform(0.5, 2.0, log.n_rows)
        expected = paper_form(
            log, target_scores, logging_scores, table, alpha, lambda r, p, v=raw: v[r], m
        )
        assert est.weighting.value(raw) == pytest.approx(expected, rel=1e-12)
    bounds = est.sensitivity(1.5)
    assert bounds.low <= est.value <= bounds.high


def test_one_session_by_hand():
    # Uniform logging over 3 items, K = 2; a Plackett–Luce target with weights (2, 1, 1). The
    # session shows items 1, 0 with rewards 0, 1. π0 prefixes 1/3, 1/6; π prefixes 1/4,
    # 1/4 · 2/3 = 1/6, so w_1:1 = 3/4 and w_1:2 = 1 (clip 4: 2/3). D_1 = 0.5·0.6 + 0.25·0.2
    # + 0.25·0.4 = 0.45; after item 1 the target draws 0 or 2 with 2/3, 1/3:
    # D_2 = 2/3·0.3 + 1/3·0.5 = 11/30.
    # V̂ = 0.75 (0 − 0.2) + 0.45 + 1 (1 − 0.3) + 0.75 · 11/30 = 1.275.
    log = FeedLog.from_arrays([0, 0], [1, 0], [1, 2], [0.0, 1.0], n_items=3)
    table = np.array([[[0.6, 0.3], [0.2, 0.1], [0.4, 0.5]]])
    target = PlackettLuceRanker(np.log([2.0, 1.0, 1.0]))
    uniform = PlackettLuceRanker.uniform(3)
    est = cascade_dr(log, target, reward_model=TableQ(table), logging=uniform)
    assert est.value == pytest.approx(1.275, abs=1e-12)
    assert est.name == "cascade DR" and est.doubly_robust
    clipped = cascade_dr(log, target, reward_model=TableQ(table), logging=uniform, clip=4)
    assert clipped.value == pytest.approx(-0.15 + 0.45 + 0.7 * 2 / 3 + 0.275, abs=1e-12)
    assert clipped.name == "cascade DR (m=4)"
    # The log's prefix propensity column gives the same as the logging policy.
    with_column = FeedLog.from_arrays(
        [0, 0], [1, 0], [1, 2], [0.0, 1.0], n_items=3, prefix_propensity=[1 / 3, 1 / 6]
    )
    assert cascade_dr(with_column, target, reward_model=TableQ(table)).value == pytest.approx(
        1.275, abs=1e-12
    )


@pytest.mark.parametrize("clip", [None, 3.0])
def test_a_zero_reward_model_is_cascade_ips(clip):
    rng = np.random.default_rng(5)
    log = random_log(rng, n_sessions=40)
    target = DeterministicRanker(rng.normal(size=(3, 5)))
    logging = PlackettLuceRanker(rng.normal(size=(3, 5)))
    zero = TableQ(np.zeros((3, 5, 3)))
    dr = cascade_dr(log, target, reward_model=zero, logging=logging, clip=clip)
    ips = cascade_ips(log, target, logging=logging, clip=clip)
    np.testing.assert_allclose(dr.terms, ips.terms, rtol=0, atol=1e-14)


def test_clip_auto_selects_by_slope():
    rng = np.random.default_rng(6)
    log = random_log(rng, n_sessions=60)
    scores = rng.normal(size=(3, 5))
    est = cascade_dr(
        log,
        PlackettLuceRanker(3 * scores),
        reward_model=TableQ(np.full((3, 5, 3), 0.3)),
        logging=PlackettLuceRanker(scores),
        clip="auto",
    )
    chosen = est.clip_selection.clip
    assert "auto m=" in est.name
    again = cascade_dr(
        log,
        PlackettLuceRanker(3 * scores),
        reward_model=TableQ(np.full((3, 5, 3), 0.3)),
        logging=PlackettLuceRanker(scores),
        clip=None if np.isinf(chosen) else chosen,
    )
    assert est.value == pytest.approx(again.value, rel=1e-12)


class Returns:
    def __init__(self, make):
        self.make = make

    def predict(self, contexts, items, ranks):
        return self.make(np.asarray(items, dtype=float))


@pytest.mark.parametrize(
    ("model", "error", "message"),
    [
        (Returns(lambda v: np.append(v, 0.0)), ValueError, r"reward_model.predict returned shape"
         r" \(3,\) for 2 \(context, item, rank\) triples \(the first is of session 0\)"),
        (Returns(lambda v: np.where(v == 0, np.nan, v)), ValueError,
         r"reward_model gives nan for item 0 at rank 2 of session 0"),
        (Returns(lambda v: v.astype(complex)), ValueError, "must return real values"),
        (object(), TypeError, r"reward_model must have a predict\(contexts, items, ranks\)"),
    ],
)  # fmt: skip
def test_bad_reward_models_are_refused(model, error, message):
    log = FeedLog.from_arrays([0, 0], [1, 0], [1, 2], [0.0, 1.0], n_items=2)
    target = DeterministicRanker(np.array([[1.0, 2.0]]))
    with pytest.raises(error, match=message):
        cascade_dr(log, target, reward_model=model, logging=PlackettLuceRanker.uniform(2))


def test_bad_logs_and_targets_are_refused():
    model = TableQ(np.zeros((2, 3, 3)))
    gap = FeedLog.from_arrays([0, 0, 1], [1, 0, 2], [1, 3, 1], [0.0, 1.0, 0.0], n_items=3)
    with pytest.raises(ValueError, match=r"cascade_dr needs whole rankings.*session 0"):
        cascade_dr(gap, LoggedRanking(), reward_model=model, logging=LoggedRanking())
    log = FeedLog.from_arrays([0, 0], [1, 0], [1, 2], [0.0, 1.0], n_items=3)
    with pytest.raises(TypeError, match=r"target must be a policy with conditional_distribution"):
        cascade_dr(log, object(), reward_model=model, logging=PlackettLuceRanker.uniform(3))
    with pytest.raises(ValueError, match=r"neither a prefix_propensity nor a logging_weight"):
        cascade_dr(log, LoggedRanking(), reward_model=model)
    with pytest.raises(TypeError, match=r"log must be a FeedLog"):
        cascade_dr("log", LoggedRanking(), reward_model=model)


def test_the_logging_policy_as_target_gives_the_logged_reward_whatever_the_model():
    # π = π0 = the logged ranking: every weight is 1 and the Q̂ terms cancel row by row.
    rng = np.random.default_rng(9)
    log = random_log(rng)
    discount = LogDiscount()
    est = cascade_dr(
        log,
        LoggedRanking(),
        reward_model=TableQ(rng.normal(size=(3, 5, 3))),
        discount=discount,
        logging=LoggedRanking(),
    )
    expected = np.bincount(log.session, weights=discount(log.rank) * log.reward) / log.n_sessions
    assert est.value == pytest.approx(expected.sum(), rel=1e-12)
