"""Sensitivity bounds against brute force: linear programs over the box of weights
(``scipy.optimize.linprog``; the Charnes–Cooper transformation for ratios), enumeration of
the box's vertices through the public estimators, and a Monte Carlo of the level bound."""

import itertools
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize

from recpack_ope.logged import DeterministicRanker, logged_dcg, logged_dr_dcg
from recpack_ope.metrics import (
    dcg,
    dr_dcg,
    ips_dcg,
    ips_ndcg,
    ips_pn_dcg,
    ips_recall,
    snips_dcg,
)
from recpack_ope.propensity import LogDiscount, PowerLawPropensity
from recpack_ope.reward import RewardMatrix
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld

pytestmark = pytest.mark.filterwarnings(
    "ignore::recpack_ope.inference.diagnostics.ReliabilityWarning"
)

D3 = LogDiscount(3)


def case(seed: int, n_users: int = 12, n_items: int = 6):
    """Small random held-out data: every user has a held-out reward, two models' scores and
    per-item propensities in [0.1, 1]."""
    rng = np.random.default_rng(seed)
    y = (rng.random((n_users, n_items)) < 0.35).astype(float)
    y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0
    return (
        y,
        rng.random((n_users, n_items)),
        rng.random((n_users, n_items)),
        rng.uniform(0.1, 1, n_items),
    )


def box(p: np.ndarray, gamma: float, clip: float | None):
    """The box of clipped weights for propensities off by up to ``gamma``."""
    m = math.inf if clip is None else clip
    return np.minimum(1 / (gamma * p), m), np.minimum(gamma / p, m)


def linear_coefficients(value_at, n_units: int) -> tuple[float, np.ndarray]:
    """``(c0, a)`` of a function linear in the weights, ``c0 + a·w``, identified from its values
    at w = 1 and w = 1 + e_j (weights ≥ 1 are valid propensities ≤ 1)."""
    ones = np.ones(n_units)
    at_one = value_at(ones)
    a = np.array([value_at(ones + np.eye(n_units)[j]) - at_one for j in range(n_units)])
    return at_one - a.sum(), a


def lp_extremes(c0: float, a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """min and max of ``c0 + a·w`` over ``lo ≤ w ≤ hi`` by linprog."""
    bounds = list(zip(lo, hi, strict=False))
    low = optimize.linprog(a, bounds=bounds, method="highs")
    high = optimize.linprog(-a, bounds=bounds, method="highs")
    assert low.status == 0 and high.status == 0
    return c0 + low.fun, c0 - high.fun


def lfp_extremes(a, b, lo, hi) -> tuple[float, float]:
    """min and max of ``a·w / b·w`` over the box (b·w > 0) by the Charnes–Cooper linear
    program: variables ``y = t·w`` and ``t ≥ 0`` with ``b·y = 1`` and ``lo·t ≤ y ≤ hi·t``."""
    n = a.size
    a_ub = np.vstack([np.hstack([-np.eye(n), lo[:, None]]), np.hstack([np.eye(n), -hi[:, None]])])
    out = []
    for sign in (1, -1):
        res = optimize.linprog(
            np.append(sign * a, 0.0),
            A_ub=a_ub,
            b_ub=np.zeros(2 * n),
            A_eq=np.append(b, 0.0)[None],
            b_eq=[1.0],
            bounds=[(None, None)] * n + [(0, None)],
            method="highs",
        )
        assert res.status == 0
        out.append(sign * res.fun)
    return out[0], out[1]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clip", [None, 3.0])
@pytest.mark.parametrize("gamma", [1.3, 2.5])
def test_ips_dcg_and_its_difference_equal_a_linear_program(seed, clip, gamma):
    y, sa, sb, p = case(seed)

    def value(scores, w):
        return ips_dcg(y, scores, discount=D3, propensity=1 / w, clip=None).value

    for estimate, coefficients in [
        (
            ips_dcg(y, sa, discount=D3, propensity=p, clip=clip),
            linear_coefficients(lambda w: value(sa, w), p.size),
        ),
    ]:
        lo, hi = box(p, gamma, clip)
        bounds = estimate.sensitivity(gamma)
        assert bounds.exact
        assert (bounds.low, bounds.high) == pytest.approx(
            lp_extremes(*coefficients, lo, hi), rel=1e-9
        )
    a = ips_dcg(y, sa, discount=D3, propensity=p, clip=clip)
    b = ips_dcg(y, sb, discount=D3, propensity=p, clip=clip)
    c0, coef = linear_coefficients(lambda w: value(sa, w) - value(sb, w), p.size)
    lo, hi = box(p, gamma, clip)
    bounds = a.compare(b).sensitivity(gamma)
    assert (bounds.low, bounds.high) == pytest.approx(
        lp_extremes(c0, coef, lo, hi), rel=1e-9, abs=1e-12
    )
    assert bounds.estimate == pytest.approx(a.value - b.value)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("clip", [None, 4.0])
def test_per_entry_propensities_make_every_entry_its_own_unit(seed, clip):
    y, sa, sb, p = case(seed, n_users=5, n_items=4)
    rng = np.random.default_rng(seed + 10)
    entries = sp.csr_matrix(y)
    entries.data = rng.uniform(0.1, 1, entries.nnz)
    gamma = 1.7
    a = ips_dcg(y, sa, discount=D3, propensity=entries, clip=clip)
    b = ips_dcg(y, sb, discount=D3, propensity=entries, clip=clip)

    def value(scores, w):
        prop = entries.copy()
        prop.data = 1 / w
        return ips_dcg(y, scores, discount=D3, propensity=prop).value

    lo, hi = box(entries.data, gamma, clip)
    c0, coef = linear_coefficients(lambda w: value(sa, w) - value(sb, w), entries.nnz)
    bounds = a.compare(b).sensitivity(gamma)
    assert (bounds.low, bounds.high) == pytest.approx(
        lp_extremes(c0, coef, lo, hi), rel=1e-9, abs=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clip", [None, 3.0])
def test_snips_dcg_equals_the_charnes_cooper_program(seed, clip):
    y, sa, sb, p = case(seed)
    gamma = 1.8
    lo, hi = box(p, gamma, clip)
    n_users = y.shape[0]
    # SNIPS = Σ_ui c·w·δ / Σ_ui w × N/|U|: numerator from IPS-DCG's coefficients, denominator
    # the held-out count of every item, by hand.
    held_out_per_item = (y > 0).sum(axis=0).astype(float)
    scale = (y > 0).sum() / n_users
    _, a = linear_coefficients(
        lambda w: ips_dcg(y, sa, discount=D3, propensity=1 / w).value * n_users, p.size
    )
    low, high = lfp_extremes(a, held_out_per_item, lo, hi)
    bounds = snips_dcg(y, sa, discount=D3, propensity=p, clip=clip).sensitivity(gamma)
    assert bounds.exact
    assert (bounds.low, bounds.high) == pytest.approx((scale * low, scale * high), rel=1e-9)
    _, a = linear_coefficients(
        lambda w: (
            (
                ips_dcg(y, sa, discount=D3, propensity=1 / w).value
                - ips_dcg(y, sb, discount=D3, propensity=1 / w).value
            )
            * n_users
        ),
        p.size,
    )
    low, high = lfp_extremes(a, held_out_per_item, lo, hi)
    pair = snips_dcg(y, sa, discount=D3, propensity=p, clip=clip).compare(
        snips_dcg(y, sb, discount=D3, propensity=p, clip=clip)
    )
    bounds = pair.sensitivity(gamma)
    assert (bounds.low, bounds.high) == pytest.approx(
        (scale * low, scale * high), rel=1e-9, abs=1e-12
    )


def vertex_values(estimator, y, scores, p, gamma, clip, **options) -> np.ndarray:
    """The public estimator at every vertex of the box of propensities."""
    values = []
    for corner in itertools.product((0, 1), repeat=p.size):
        q = np.where(np.array(corner, bool), p * gamma, p / gamma)
        values.append(estimator(y, scores, discount=D3, propensity=q, clip=clip, **options).value)
    return np.array(values)


@pytest.mark.parametrize("estimator", [ips_pn_dcg, ips_ndcg, ips_recall])
@pytest.mark.parametrize("gamma", [1.05, 1.6])
@pytest.mark.parametrize("seed", range(3))
def test_normalised_estimates_enclose_every_point_of_the_box(estimator, gamma, seed):
    y, sa, _, p = case(seed, n_users=8, n_items=5)
    # Propensities above 1/gamma would leave (0, 1] at the upper corner; keep them inside.
    p = np.minimum(p, 1 / gamma)
    options = {"k": 3} if estimator is ips_recall else {"discount": D3}

    def run(q):
        kwargs = dict(options)
        if estimator is ips_recall:
            return ips_recall(y, sa, propensity=q, **kwargs).value
        return estimator(y, sa, propensity=q, **kwargs).value

    bounds = (
        ips_recall(y, sa, propensity=p, k=3)
        if estimator is ips_recall
        else estimator(y, sa, discount=D3, propensity=p)
    ).sensitivity(gamma)
    corners = np.array(
        [
            run(np.where(np.array(c, bool), p * gamma, p / gamma))
            for c in itertools.product((0, 1), repeat=p.size)
        ]
    )
    rng = np.random.default_rng(seed)
    inside = np.array([run(p * gamma ** rng.uniform(-1, 1, p.size)) for _ in range(200)])
    everything = np.concatenate([corners, inside])
    assert bounds.low <= everything.min() + 1e-12
    assert bounds.high >= everything.max() - 1e-12
    if bounds.exact:
        # The minimum of these quasi-concave ratios sits at a vertex; attained bounds are the
        # extremes themselves.
        assert bounds.low == pytest.approx(corners.min(), rel=1e-9)
        # The maximum may be interior: the best of a multi-start search cannot beat it.
        best = max(
            -optimize.minimize(
                lambda z: -run(p * gamma**z), x0, bounds=[(-1, 1)] * p.size, method="L-BFGS-B"
            ).fun
            for x0 in rng.uniform(-1, 1, (5, p.size))
        )
        assert bounds.high >= best - 1e-9
        assert bounds.high == pytest.approx(max(best, everything.max()), rel=1e-6)


def test_a_box_too_small_to_reorder_the_ideal_gives_exact_pn_dcg_bounds():
    y, sa, _, p = case(3, n_users=8, n_items=5)
    bounds = ips_pn_dcg(y, sa, discount=D3, propensity=p).sensitivity(1.0001)
    assert bounds.exact
    # At Γ = 1 the box is a point.
    point = ips_pn_dcg(y, sa, discount=D3, propensity=p).sensitivity(1.0)
    assert point.low == pytest.approx(point.estimate, rel=1e-12)
    assert point.high == pytest.approx(point.estimate, rel=1e-12)


@pytest.mark.parametrize("impressions", [False, True])
@pytest.mark.parametrize("clip", [None, 2.5])
@pytest.mark.parametrize("seed", range(2))
def test_dr_dcg_bounds_equal_brute_force(impressions, clip, seed):
    y, sa, sb, p = case(seed, n_users=10, n_items=5)
    rng = np.random.default_rng(seed)
    model = RewardMatrix(rng.uniform(0, 1, y.shape))
    shown = sp.csr_matrix((rng.random(y.shape) < 0.5) * 1.0) if impressions else None
    gamma = 1.5
    p = np.minimum(p, 1 / gamma)

    def diff(q):
        def run(s):
            options = dict(clip=clip, reward_model=model, impressions=shown)
            return dr_dcg(y, s, discount=D3, propensity=q, **options).value

        return run(sa) - run(sb)

    # Each item's share is a function of its own propensity, largest at an end of its
    # interval or where 1/p = m: enumerate those candidates for every item.
    candidates = [
        sorted(
            {pi / gamma, pi * gamma}
            | ({1 / clip} if clip and pi / gamma < 1 / clip < pi * gamma else set())
        )
        for pi in p
    ]
    values = np.array([diff(np.array(q)) for q in itertools.product(*candidates)])
    a = dr_dcg(y, sa, discount=D3, propensity=p, clip=clip, reward_model=model, impressions=shown)
    b = dr_dcg(y, sb, discount=D3, propensity=p, clip=clip, reward_model=model, impressions=shown)
    bounds = a.compare(b).sensitivity(gamma)
    assert (bounds.low, bounds.high) == pytest.approx(
        (values.min(), values.max()), rel=1e-9, abs=1e-12
    )


@pytest.mark.parametrize("normalise", [None, "post"])
@pytest.mark.parametrize("clip", [None, 6.0])
def test_logged_dcg_bounds_equal_a_linear_program(normalise, clip):
    world = SimulatedWorld(n_users=30, n_items=8, seed=3)
    log = world.log(PopularityPolicy(), feed_length=4, seed=4).feed_log()
    rng = np.random.default_rng(0)
    a, b = (DeterministicRanker(rng.random((30, 8))) for _ in range(2))
    gamma = 1.4
    ea = logged_dcg(log, a, discount=D3, clip=clip, normalise=normalise)
    eb = logged_dcg(log, b, discount=D3, clip=clip, normalise=normalise)
    rewarded = np.flatnonzero(log.reward > 0)
    eps0 = log.propensity[rewarded]

    def value(target, w):
        propensity = log.propensity.copy()
        propensity[rewarded] = 1 / w
        return logged_dcg(
            replace(log, propensity=propensity), target, discount=D3, normalise=normalise
        ).value

    lo, hi = box(eps0, gamma, clip)
    bounds = ea.compare(eb).sensitivity(gamma)
    if normalise is None:
        c0, coef = linear_coefficients(lambda w: value(a, w) - value(b, w), rewarded.size)
        assert (bounds.low, bounds.high) == pytest.approx(
            lp_extremes(c0, coef, lo, hi), rel=1e-9, abs=1e-12
        )
    else:
        assert bounds.low <= bounds.estimate <= bounds.high


def test_logged_dr_dcg_bounds_equal_a_linear_program():
    world = SimulatedWorld(n_users=30, n_items=8, seed=5)
    log = world.log(PopularityPolicy(), feed_length=4, seed=6).feed_log()
    rng = np.random.default_rng(1)
    target = DeterministicRanker(rng.random((30, 8)))
    model = world.reward_model()
    estimate = logged_dr_dcg(log, target, discount=D3, reward_model=model, clip=5.0)

    def value(w):
        return logged_dr_dcg(
            replace(log, propensity=1 / w), target, discount=D3, reward_model=model
        ).value

    gamma = 1.3
    lo, hi = box(log.propensity, gamma, 5.0)
    c0, coef = linear_coefficients(value, log.n_rows)
    bounds = estimate.sensitivity(gamma)
    assert (bounds.low, bounds.high) == pytest.approx(lp_extremes(c0, coef, lo, hi), rel=1e-9)


def test_robustness_is_where_the_worst_case_difference_reaches_zero():
    y, sa, sb, p = case(7, n_users=40, n_items=8)
    a = ips_dcg(y, sa, discount=D3, propensity=p)
    b = ips_dcg(y, sb, discount=D3, propensity=p)
    pair = a.compare(b)
    star = pair.robustness()
    assert 1 < star < math.inf
    side = "low" if pair.difference > 0 else "high"
    assert getattr(pair.sensitivity(star), side) == pytest.approx(
        0, abs=1e-6 * abs(pair.difference)
    )
    beyond = getattr(pair.sensitivity(star * 1.001), side)
    assert np.sign(beyond) != np.sign(pair.difference)
    # The significance version: the worst-case interval's side touches 0 there, and it can
    # only be smaller than the sign's Γ*.
    level_star = pair.robustness(level=0.5)
    assert 1 <= level_star <= star
    if level_star > 1:
        interval = pair.sensitivity(level_star, level=0.5).interval
        edge = interval[0] if pair.difference > 0 else interval[1]
        assert edge == pytest.approx(0, abs=1e-5 * abs(pair.difference))


def test_a_verdict_that_no_weight_can_flip_is_robust_to_any_error():
    y = np.array([[1, 0], [1, 0], [1, 1]], dtype=float)
    good = np.array([[1.0, 0.0]] * 3)
    bad = np.array([[0.0, 1.0]] * 3)
    p = np.array([0.5, 0.5])
    pair = ips_dcg(y, good, discount=LogDiscount(1), propensity=p).compare(
        ips_dcg(y, bad, discount=LogDiscount(1), propensity=p)
    )
    # a finds item 0 for all 3 users, b item 1 for 1 user: Δ = w0 − w1/3, nominal w = 2; the
    # worst case 2/Γ − 2Γ/3 reaches 0 at Γ = √3.
    assert pair.robustness() == pytest.approx(math.sqrt(3), rel=1e-6)
    only_a = np.array([[1, 0], [1, 0], [1, 0]], dtype=float)
    dominant = ips_dcg(only_a, good, discount=LogDiscount(1), propensity=p).compare(
        ips_dcg(only_a, bad, discount=LogDiscount(1), propensity=p)
    )
    assert dominant.robustness() == math.inf


def test_the_level_bound_covers_the_true_difference_when_the_truth_is_in_the_box():
    """Monte Carlo: true propensities p, estimates p̂ = p·Γ^U (U uniform in [−1, 1]) so the
    truth is in the box of Γ; clicks y ~ Bernoulli(p·r). An item clicked by every user with
    p = 1 and never ranked puts every user in the average, so the estimand is the fixed
    users' mean Σ_i δ r_ui. 400 replicates: the 95 % sensitivity interval must cover the true
    difference in at least 95 % − 3 binomial standard errors (1.1 %) of them."""
    rng = np.random.default_rng(2024)
    n_users, n_items, gamma, replicates = 150, 10, 1.5, 400
    p = rng.uniform(0.15, 0.6, n_items)
    relevance = rng.uniform(0, 0.8, (n_users, n_items))
    scores = [rng.random((n_users, n_items)) for _ in range(2)]
    discount = LogDiscount(3)
    padded = [np.hstack([s, np.full((n_users, 1), -np.inf)]) for s in scores]

    def true_value(s):
        ranks = np.argsort(np.argsort(-s, axis=1), axis=1) + 1
        return float((discount(ranks) * relevance).sum(axis=1).mean())

    truth = true_value(scores[0]) - true_value(scores[1])
    covered = 0
    for _ in range(replicates):
        clicks = (rng.random((n_users, n_items)) < p * relevance).astype(float)
        y = np.hstack([clicks, np.ones((n_users, 1))])
        estimated = np.append(p * gamma ** rng.uniform(-1, 1, n_items), 1.0)
        a, b = (ips_dcg(y, s, discount=discount, propensity=estimated) for s in padded)
        low, high = a.compare(b).sensitivity(gamma, level=0.95).interval
        covered += low <= truth <= high
    assert covered / replicates >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / replicates)


def test_exponent_range_brackets_where_the_recomputed_verdict_flips():
    rng = np.random.default_rng(11)
    n_items = 12
    counts = np.round(200 * np.arange(1, n_items + 1, dtype=float) ** -1.2).astype(int) + 1
    train = np.repeat(np.eye(n_items), counts, axis=0)
    model = PowerLawPropensity(xmin=1).fit(train)
    y = (rng.random((60, n_items)) < 0.3).astype(float)
    y[:, 0] = 1
    # a ranks the popular items first, b the rare ones: weighting by rarity helps b.
    sa = np.tile(-np.arange(n_items, dtype=float), (60, 1))
    sb = -sa

    def run(s, q):
        return ips_dcg(y, s, discount=D3, propensity=q).value

    pair = ips_dcg(y, sa, discount=D3, propensity=model).compare(
        ips_dcg(y, sb, discount=D3, propensity=model)
    )
    found = pair.exponent_range(model)
    sign = np.sign(pair.difference)
    for g in np.linspace(found.low, found.high, 9):
        assert sign * (run(sa, model.propensity_at(g)) - run(sb, model.propensity_at(g))) > 0
    for end, outside in ((found.low, found.low - 1e-3), (found.high, found.high + 1e-3)):
        if end not in found.search:
            q = model.propensity_at(outside)
            assert sign * (run(sa, q) - run(sb, q)) <= 0


def test_exponent_range_refuses_estimates_not_made_with_the_model():
    y, sa, sb, p = case(1)
    model = PowerLawPropensity(xmin=1).fit(np.repeat(np.eye(6), [30, 10, 5, 3, 2, 1], axis=0))
    pair = ips_dcg(y, sa, discount=D3, propensity=p).compare(
        ips_dcg(y, sb, discount=D3, propensity=p)
    )
    with pytest.raises(ValueError, match="not computed with this model's propensities"):
        pair.exponent_range(model)
    with pytest.raises(TypeError, match="PowerLawPropensity"):
        pair.exponent_range(p)
    with pytest.raises(ValueError, match="search must be two finite numbers"):
        ips_dcg(y, sa, discount=D3, propensity=model).compare(
            ips_dcg(y, sb, discount=D3, propensity=model)
        ).exponent_range(model, search=(5.0, 6.0))


@pytest.mark.parametrize("gamma", [0.5, 0.999, math.nan, math.inf, "2", True, None])
def test_bad_gamma_is_refused_naming_it(gamma):
    y, sa, sb, p = case(0)
    estimate = ips_dcg(y, sa, discount=D3, propensity=p)
    with pytest.raises(ValueError, match="gamma must be"):
        estimate.sensitivity(gamma)
    with pytest.raises(ValueError, match="gamma must be"):
        estimate.compare(ips_dcg(y, sb, discount=D3, propensity=p)).sensitivity(gamma)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, math.nan, "0.9"])
def test_bad_level_is_refused_naming_it(level):
    y, sa, sb, p = case(0)
    pair = ips_dcg(y, sa, discount=D3, propensity=p).compare(
        ips_dcg(y, sb, discount=D3, propensity=p)
    )
    with pytest.raises(ValueError, match="level"):
        pair.robustness(level=level)
    with pytest.raises(ValueError, match="level"):
        pair.sensitivity(2.0, level=level)


def test_unweighted_and_mismatched_estimates_are_refused():
    y, sa, sb, p = case(0)
    plain = dcg(y, sa, discount=D3)
    with pytest.raises(ValueError, match="DCG@3 is not weighted by inverse propensities"):
        plain.sensitivity(2.0)
    with pytest.raises(ValueError, match="not weighted by inverse propensities"):
        plain.compare(dcg(y, sb, discount=D3)).robustness()
    # Unclipped (clip=None), so that only the estimator or the propensities differ.
    ips = ips_dcg(y, sa, discount=D3, propensity=p, clip=None)
    with pytest.raises(ValueError, match="same estimator"):
        ips.compare(snips_dcg(y, sb, discount=D3, propensity=p, clip=None)).sensitivity(2.0)
    with pytest.raises(ValueError, match="same propensities"):
        ips.compare(ips_dcg(y, sb, discount=D3, propensity=p / 2, clip=None)).sensitivity(2.0)
    with pytest.raises(ValueError, match="clip at m = inf and m = 2"):
        ips.compare(ips_dcg(y, sb, discount=D3, propensity=p, clip=2.0)).sensitivity(2.0)


def test_a_control_variate_comparison_is_refused():
    y, sa, sb, p = case(0)
    shown = sp.csr_matrix(np.ones_like(y) * 0.5)
    a = ips_dcg(y, sa, discount=D3, propensity=p, impressions=shown)
    b = ips_dcg(y, sb, discount=D3, propensity=p, impressions=shown)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pair = a.compare(b, control_variate=True)
    with pytest.raises(ValueError, match="control_variate"):
        pair.robustness()


def test_reprs_show_the_bounds_and_the_robustness():
    y, sa, sb, p = case(4, n_users=40, n_items=8)
    a = ips_dcg(y, sa, discount=D3, propensity=p)
    b = ips_dcg(y, sb, discount=D3, propensity=p)
    bounds = a.sensitivity(2.0)
    assert f"with propensities off by up to ×2: [{bounds.low:.6g}, {bounds.high:.6g}]" in repr(a)
    pair = a.compare(b)
    assert f"its sign survives propensities off by up to ×{pair.robustness():.3g}" in repr(pair)
    assert "survives" not in repr(dcg(y, sa, discount=D3).compare(dcg(y, sb, discount=D3)))
    # No verdict, no robustness: a difference of 0, and a difference that is not significant.
    assert "survives" not in repr(a.compare(a))
    assert pair.p_value < 0.05
    assert repr(pair).endswith(f"its 95% significance up to ×{pair.robustness(0.95):.3g}")
    y, sa, sb, p = case(0, n_users=40, n_items=8)
    weak = ips_dcg(y, sa, discount=D3, propensity=p).compare(
        ips_dcg(y, sb, discount=D3, propensity=p)
    )
    assert weak.p_value > 0.05
    assert repr(weak).endswith("(not significant at 95%)")


def test_the_sensitivity_plot_draws_the_bounds_it_reports():
    y, sa, sb, p = case(4, n_users=40, n_items=8)
    pair = ips_dcg(y, sa, discount=D3, propensity=p).compare(
        ips_dcg(y, sb, discount=D3, propensity=p)
    )
    gammas = np.array([1.0, 1.5, 2.0, 3.0])
    ax = pair.plot_sensitivity(gammas=gammas, level=0.9)
    low, high = ax.lines[0].get_ydata(), ax.lines[1].get_ydata()
    for g, lo, hi in zip(gammas, low, high, strict=True):
        bounds = pair.sensitivity(g)
        assert (lo, hi) == pytest.approx((bounds.low, bounds.high))
    assert list(ax.lines[0].get_xdata()) == list(gammas)


@pytest.mark.parametrize("estimator", [ips_dcg, snips_dcg])
def test_per_unit_sums_give_the_same_bounds(estimator):
    y, sa, sb, p = case(5, n_users=30, n_items=7)
    a = estimator(y, sa, discount=D3, propensity=p, clip=4.0)
    b = estimator(y, sb, discount=D3, propensity=p, clip=4.0)
    for weighting in (a.weighting, a.weighting.minus(b.weighting)):
        full, collapsed = weighting.bounds(1.7), weighting.collapsed().bounds(1.7)
        assert collapsed[:2] == pytest.approx(full[:2], rel=1e-12)
        assert weighting.collapsed().value(weighting.raw) == pytest.approx(
            weighting.value(weighting.raw), rel=1e-12
        )
    with pytest.raises(ValueError, match="reduce to per-unit sums"):
        ips_pn_dcg(y, sa, discount=D3, propensity=p).weighting.collapsed()


@pytest.mark.parametrize("clip", [None, 2.5])
def test_per_entry_units_widen_the_per_item_box(clip):
    """One propensity per (user, item) may move each user's copy of an item alone; the
    per-item box is the part of that box where all copies move together, so its extremes lie
    inside the per-entry ones (the clipped doubly robust path, with ranked pairs outside the
    held-out entries, included)."""
    y, sa, sb, p = case(2, n_users=10, n_items=5)
    model = RewardMatrix(np.random.default_rng(2).uniform(0, 1, y.shape))
    per_entry = sp.csr_matrix(np.tile(p, (y.shape[0], 1)))
    options = dict(discount=D3, clip=clip, reward_model=model)
    item = [dr_dcg(y, s, propensity=p, **options) for s in (sa, sb)]
    entry = [dr_dcg(y, s, propensity=per_entry, **options) for s in (sa, sb)]
    for a, b in ((item[0], entry[0]), (item[0].compare(item[1]), entry[0].compare(entry[1]))):
        narrow, wide = a.sensitivity(1.7), b.sensitivity(1.7)
        assert wide.estimate == pytest.approx(narrow.estimate, rel=1e-12)
        assert wide.low <= narrow.low + 1e-12 and wide.high >= narrow.high - 1e-12
    assert entry[0].compare(entry[1]).sensitivity(1.0).low == pytest.approx(
        entry[0].value - entry[1].value, rel=1e-12, abs=1e-12
    )
