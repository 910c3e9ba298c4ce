"""Data-driven clipping (SLOPE, Su et al. ICML 2020): candidates, the selection rule by hand,
the curve against independent fixed-threshold estimates, and a Monte Carlo on known truth."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.inference.clipping import ClipSelection, clip_candidates, slope_index
from recpack_ope.metrics.dcg import ips_dcg, ips_pn_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import ips_recall
from recpack_ope.propensity.discount import LogDiscount


def test_candidates_are_powers_of_two_below_the_largest_weight():
    assert clip_candidates(np.array([1.0, 3.0, 10.0])).tolist() == [math.inf, 8, 4, 2, 1]
    # m = 8 would clip nothing when the largest weight is 8, so it repeats m = ∞.
    assert clip_candidates(np.array([2.0, 8.0])).tolist() == [math.inf, 4, 2, 1]
    assert clip_candidates(np.ones(5)).tolist() == [math.inf]


def test_slope_rule_by_hand():
    # Intervals value ± 2·cnf: [-2, 2], [-0.9, 1.1], [4.8, 5.2]: the third leaves the others.
    assert slope_index(np.array([0.0, 0.1, 5.0]), np.array([1.0, 0.5, 0.1])) == 1
    # [-2, 2], [1.6, 2.4], [1.9, 2.1]: all share [1.9, 2.0].
    assert slope_index(np.array([0.0, 2.0, 2.0]), np.array([1.0, 0.2, 0.05])) == 2
    # [-0.2, 0.2], [0.8, 1.2]: disjoint, the least clipped estimate stays.
    assert slope_index(np.array([0.0, 1.0]), np.array([0.1, 0.1])) == 0
    # Pairwise overlaps are not enough: [-1, 1], [0.5, 2.5], [-2.5, -0.5] have no common point.
    assert slope_index(np.array([0.0, 1.5, -1.5]), np.array([0.5, 0.5, 0.5])) == 1


@pytest.fixture
def case():
    rng = np.random.default_rng(4)
    users, items = 300, 40
    p = np.clip(rng.uniform(size=items) ** 3, 1e-3, 1)
    y = sp.csr_matrix(
        (rng.random((users, items)) < 0.1) * rng.integers(1, 3, (users, items)), dtype=float
    )
    scores = rng.normal(size=(users, items))
    return y, scores, p


@pytest.mark.parametrize("estimator", [ips_dcg, ips_pn_dcg])
def test_auto_curve_equals_fixed_threshold_estimates(case, estimator):
    y, scores, p = case
    kw = dict(discount=LogDiscount(5), propensity=p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = estimator(y, scores, clip="auto", **kw)
        selection = auto.clip_selection
        assert isinstance(selection, ClipSelection)
        assert selection.thresholds.tolist() == clip_candidates(1 / p[y.indices]).tolist()
        for m, value, se in zip(
            selection.thresholds, selection.values, selection.standard_errors, strict=True
        ):
            fixed = estimator(y, scores, clip=None if math.isinf(m) else m, **kw)
            assert value == pytest.approx(fixed.value, rel=1e-12)
            assert se == pytest.approx(fixed.standard_error, rel=1e-12)
        chosen = estimator(y, scores, clip=selection.clip, **kw)
    assert selection.chosen == slope_index(selection.values, selection.standard_errors)
    assert auto.value == pytest.approx(chosen.value, rel=1e-12)
    assert np.allclose(auto.per_user, chosen.per_user, rtol=1e-12)
    assert auto.diagnostics.max_weight == chosen.diagnostics.max_weight
    label = "∞" if selection.clip is None else f"{selection.clip:g}"
    assert auto.name == f"{chosen.name} (auto m={label})"
    assert "clipping: SLOPE chose" in repr(auto)


def test_auto_recall_and_plot(case):
    y, scores, p = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = ips_recall(y, scores, k=5, propensity=p, clip="auto")
        fixed = ips_recall(y, scores, k=5, propensity=p, clip=auto.clip_selection.clip)
    assert auto.value == pytest.approx(fixed.value, rel=1e-12)
    ax = auto.clip_selection.plot()
    line = ax.lines[0]
    assert np.allclose(line.get_ydata(), auto.clip_selection.values)
    x = line.get_xdata()
    assert x[0] == 2 * x[1]  # m = ∞ is drawn one doubling beyond the largest finite m
    assert np.array_equal(x[1:], auto.clip_selection.thresholds[1:])


def test_auto_rmse_is_within_a_factor_of_the_best_fixed_threshold():
    """Monte Carlo on a world with known truth: items are exposed independently with known
    propensities p_i (down to 1e-4, weights up to 1e4), clicked when exposed and relevant, so
    IPS-DCG with p estimates ``mean_u Σ_i q_ui δ(rank_ui)`` exactly (unbiased when unclipped).

    Over 200 logs the candidates' RMSEs come from the selections' own curves (the same
    estimates a fixed clip gives, as tested above). Su et al.'s guarantee is an oracle
    inequality up to a constant factor; measured here: auto 0.72, best fixed (m = 1024) 0.37,
    ratio 1.94, unclipped 0.92. The bound 2.5 leaves more than 5 Monte Carlo standard errors
    of the ratio (each RMSE is known to about 5 % from 200 replications).
    """
    rng = np.random.default_rng(0)
    users, items, reps = 2000, 200, 200
    p = np.maximum(np.sort(rng.uniform(size=items) ** 3)[::-1], 1e-4)
    q = 1 / (1 + np.exp(-(rng.normal(size=(users, 4)) @ rng.normal(size=(4, items)) - 1.0)))
    discount = LogDiscount(10)
    target = TopK.from_scores(q + 0.3 * rng.normal(size=q.shape), 10)
    delta = np.zeros((users, items))
    np.put_along_axis(delta, target.items, discount(np.arange(1, 11))[None, :], axis=1)
    truth = (q * delta).sum(axis=1).mean()
    selected, curves = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            clicks = sp.csr_matrix(
                (rng.random((users, items)) < p) & (rng.random((users, items)) < q), dtype=float
            )
            r = ips_dcg(clicks, target, discount=discount, propensity=p, clip="auto")
            # Per-user mean over evaluated users → expected reward per user of the world.
            scale = r.n_users / users
            selected.append(r.value * scale)
            curve = dict(
                zip(
                    r.clip_selection.thresholds.tolist(),
                    r.clip_selection.values * scale,
                    strict=True,
                )
            )
            curves.append(curve)
    common = set.intersection(*(set(c) for c in curves))
    rmse = {m: np.sqrt(np.mean([(c[m] - truth) ** 2 for c in curves])) for m in common}
    auto = np.sqrt(np.mean((np.array(selected) - truth) ** 2))
    best = min(rmse.values())
    assert abs(np.mean([c[math.inf] for c in curves]) - truth) < 3 * rmse[math.inf] / np.sqrt(reps)
    assert auto <= 2.5 * best
    assert auto < rmse[math.inf] and auto < rmse[1.0] / 3


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: ClipSelection(np.array([np.inf, 1.0]), np.ones(2), np.ones(2), 5),
            "chosen must index one of the 2 thresholds, got 5",
        ),
        (
            lambda: ClipSelection(np.ones(2), np.ones(3), np.ones(2), 0),
            "must be 1-D arrays of one length",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_candidates_refuse_inverse_propensities_that_are_not_finite():
    for raw, shown in ((np.array([2.0, 1 / 5e-324]), "inf"), (np.array([np.nan]), "nan")):
        with pytest.raises(ValueError, match=rf'clip="auto": inverse propensity {shown} '):
            clip_candidates(raw)
    # The largest finite inverse propensity still gives doublings below it: 2^0 … 2^1023.
    candidates = clip_candidates(np.array([1e308]))
    assert candidates[0] == np.inf and candidates[1] == 2.0**1023 and candidates.size == 1025
