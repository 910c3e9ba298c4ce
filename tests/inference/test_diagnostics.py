"""Weight diagnostics of IPS-weighted estimates against hand computations from their definitions
(docs/definitions.md, "Weight diagnostics"), and the reliability warning."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.inference.diagnostics import (
    ESS_MIN,
    USER_SHARE_THRESHOLD,
    PropensityCalibration,
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
)
from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.policies import DeterministicRanker
from recpack_ope.metrics.dcg import dcg, ips_dcg, ips_ndcg, snips_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import ips_recall
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.simulation.world import PopularityPolicy, SimulatedWorld

# Held-out: u0 likes items 0 and 2, u1 likes item 1 (reward 2) and item 3.
Y = sp.csr_matrix(np.array([[1.0, 0, 1, 0], [0, 2, 0, 1]]))
P = np.array([0.5, 0.1, 0.02, 0.25])
SCORES = np.array([[0.9, 0.1, 0.5, 0.0], [0.0, 0.3, 0.2, 0.8]])
# ranks: u0 → i0 1, i2 2, i1 3, i3 4; u1 → i3 1, i1 2, i2 3, i0 4
RANK = {(0, 0): 1, (0, 2): 2, (1, 1): 2, (1, 3): 1}


def hand_diagnostics(entries, p_of, clip, cutoff):
    """ESS, ratio, max, top-1 % share, clipped count and mass by plain loops over the
    (user, item, reward, rank) entries the target shows (rank ≤ cutoff)."""
    entries = [e for e in entries if e[3] <= cutoff]
    raw = [1 / p_of(u, i) for u, i, _, _ in entries]
    w = [min(clip, v) for v in raw]
    delta = [1 / math.log2(r + 1) if r <= cutoff else 0.0 for _, _, _, r in entries]
    contrib = [c * wj * d for (_, _, c, _), wj, d in zip(entries, w, delta, strict=True)]
    n = len(w)
    ess = sum(w) ** 2 / sum(x * x for x in w)
    return {
        "ess": ess,
        "ess_ratio": ess / n,
        "max_weight": max(w),
        "top_share": pro_rata_top_share(w, contrib),
        "n_clipped": sum(v > m for v, m in zip(raw, w, strict=True)),
        "clipped_mass": sum(v - m for v, m in zip(raw, w, strict=True)) / sum(raw),
    }


def pro_rata_top_share(w, contrib):
    """Share of the contributions of the ⌈n/100⌉ largest weights, by a loop over the distinct
    weights from the largest: the group holding the ⌈n/100⌉-th weight enters pro rata."""
    left, carried = math.ceil(len(w) / 100), 0.0
    for weight in sorted(set(w), reverse=True):
        group = [c for wj, c in zip(w, contrib, strict=True) if wj == weight]
        take = min(left, len(group))
        carried += sum(group) * take / len(group)
        left -= take
    return carried / sum(contrib)


def held_out_entries(copies=1):
    """(user, item, reward, rank) of the held-out entries of :func:`tiled` data."""
    rows, cols = Y.nonzero()
    return [
        (u + 2 * k, i, Y[u, i], RANK[(u, i)])
        for k in range(copies)
        for u, i in zip(rows, cols, strict=True)
    ]


def tiled(copies):
    """Y and SCORES repeated for ``copies`` pairs of users: the same ESS ratio and user share,
    ``copies`` times the effective sample size."""
    return sp.vstack([Y] * copies).tocsr(), np.tile(SCORES, (copies, 1))


@pytest.mark.parametrize("clip", [math.inf, 20.0, 3.0])
def test_held_out_diagnostics_equal_hand_computation(clip):
    est = ips_dcg(
        Y,
        SCORES,
        discount=LogDiscount(3),
        propensity=P,
        clip=None if clip == math.inf else clip,
        ess_threshold=0.01,
    )
    expected = hand_diagnostics(held_out_entries(), lambda u, i: P[i], clip, 3)
    d = est.diagnostics
    assert d.n_weights == 4
    for key, value in expected.items():
        assert getattr(d, key) == pytest.approx(value, rel=1e-12), key


def test_every_weighted_held_out_estimator_carries_the_same_weight_diagnostics():
    base = ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=0.01)
    snips = snips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=0.01)
    assert snips.diagnostics == base.diagnostics
    # Per-user nDCG: the same weights, but each interaction carries its part of the user's
    # nDCG, x_j / iDCG_u (iDCG: u0's gains 50, 2 → 50 + 2/log2(3); u1's 20, 4 → 20 + 4/log2(3)).
    ndcg = ips_ndcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=0.01)
    for field in ("n_weights", "ess", "max_weight", "n_clipped", "clipped_mass", "n_users"):
        assert getattr(ndcg.diagnostics, field) == getattr(base.diagnostics, field), field
    d = 1 / math.log2(3)
    ideal = {0: 50 + 2 * d, 1: 20 + 4 * d}
    part = {(0, 0): 2 / ideal[0], (0, 2): 50 * d / ideal[0], (1, 1): 20 * d / ideal[1]}
    part[(1, 3)] = 4 / ideal[1]
    # The top ⌈4/100⌉ = 1 weight is item 2's (50).
    assert ndcg.diagnostics.top_share == pytest.approx(part[(0, 2)] / sum(part.values()))
    assert ndcg.diagnostics.user_share == 0.5  # u1's nDCG, 0.74 of 0.65 + 0.74, alone
    # Unweighted estimates have no weights to diagnose.
    assert dcg(Y, SCORES, discount=LogDiscount(3)).diagnostics is None


def test_recall_diagnostics_use_its_own_cutoff():
    est = ips_recall(Y, SCORES, k=1, propensity=P, clip=20, ess_threshold=0.01)
    # recall@1 is DCG with a flat discount of length 1: only rank-1 entries contribute, each
    # with its part of the user's recall, c·w over the user's total gain Σ_i c·w.
    entries = [(u, i, c, r) for u, i, c, r in held_out_entries()]
    raw = [1 / P[i] for _, i, _, _ in entries]
    w = [min(20, v) for v in raw]
    total = {
        u: sum(c * wj for (v, _, c, _), wj in zip(entries, w, strict=True) if v == u)
        for u in (0, 1)
    }
    contrib = [c * wj * (r <= 1) / total[u] for (u, _, c, r), wj in zip(entries, w, strict=True)]
    shown = [j for j in range(4) if entries[j][3] <= 1]  # (user 0, item 0) and (user 1, item 3)
    top = max(shown, key=lambda j: (w[j], -j))
    assert est.diagnostics.n_weights == len(shown) == 2
    assert est.diagnostics.top_share == pytest.approx(contrib[top] / sum(contrib), rel=1e-12)
    ws = [w[j] for j in shown]
    assert est.diagnostics.ess == pytest.approx(sum(ws) ** 2 / sum(x * x for x in ws), rel=1e-12)


def test_warning_fires_below_the_threshold_only_and_names_the_estimate():
    # 40 copies of the four entries: ESS 40 × 1.66 = 66.5 ≥ ESS_MIN, and 30 of the 80 users
    # carry half of the estimate (user share 0.375), so only the ESS ratio can fire.
    y, scores = tiled(40)
    hand = hand_diagnostics(held_out_entries(40), lambda u, i: P[i], math.inf, 3)
    assert hand["ess"] >= ESS_MIN
    ratio = hand["ess_ratio"]
    with pytest.warns(ReliabilityWarning, match=r"IPS-DCG@3: .*effective sample size") as caught:
        est = ips_dcg(y, scores, discount=LogDiscount(3), propensity=P, ess_threshold=ratio + 0.01)
    assert len(caught) == 1
    assert f"ESS/n {ratio:.3g} < {ratio + 0.01:g}" in str(caught[0].message)
    assert est.diagnostics.reasons == ("ess_ratio",)
    assert not est.diagnostics.reliable and "UNRELIABLE: weights: ESS" in repr(est)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReliabilityWarning)
        est = ips_dcg(y, scores, discount=LogDiscount(3), propensity=P, ess_threshold=ratio - 0.01)
    assert est.diagnostics.reliable and "\n  weights: ESS" in repr(est)
    assert est.diagnostics.reasons == ()
    assert issubclass(ReliabilityWarning, UserWarning)


def test_recall_warns_once_under_its_own_name():
    with pytest.warns(ReliabilityWarning) as caught:
        ips_recall(Y, SCORES, k=2, propensity=P, ess_threshold=1.0)
    assert [str(w.message).split(":")[0] for w in caught] == ["IPS-Recall@2"]


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), "high", None])
def test_ess_threshold_outside_unit_interval_is_refused(bad):
    with pytest.raises(ValueError, match=r"ess_threshold must be .*\(0, 1\]"):
        ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=bad)


def test_logged_diagnostics_equal_hand_computation():
    # Two sessions; ε0 from the log's propensity column; rewards on four rows.
    log = FeedLog.from_arrays(
        session=[0, 0, 0, 1, 1],
        item=[2, 0, 1, 1, 3],
        rank=[1, 2, 3, 1, 2],
        reward=[1.0, 0.0, 2.0, 1.0, 1.0],
        propensity=[0.5, 0.4, 0.05, 0.8, 0.01],
        n_items=4,
    )
    scores = np.array([[0.0, 3.0, 1.0, 2.0], [5.0, 1.0, 4.0, 3.0]])
    # target ranks: context 0 → items 1, 3, 2, 0; context 1 → 0, 2, 3, 1
    target_rank = {(0, 2): 3, (0, 1): 1, (1, 1): 4, (1, 3): 3}
    rewarded = [(0, 2, 1.0, 0.5), (0, 1, 2.0, 0.05), (1, 1, 1.0, 0.8), (1, 3, 1.0, 0.01)]
    entries = [(s, i, c, target_rank[(s, i)]) for s, i, c, _ in rewarded]
    eps0 = {(s, i): e for s, i, _, e in rewarded}
    est = logged_dcg(
        log, DeterministicRanker(scores), discount=LogDiscount(3), clip=30, ess_threshold=0.01
    )
    expected = hand_diagnostics(entries, lambda s, i: eps0[(s, i)], 30, 3)
    assert est.diagnostics.n_weights == 3  # item 1 of session 1 sits at target rank 4
    # Sessions are the users: session 0 carries 2·20·δ(1) + 1·2·δ(3) = 41 of 41 + 30·δ(3) alone.
    assert (est.diagnostics.n_users, est.diagnostics.user_share) == (2, 0.5)
    for key, value in expected.items():
        assert getattr(est.diagnostics, key) == pytest.approx(value, rel=1e-12), key
    assert "weights: ESS" in repr(est) and "sessions" in repr(est)
    with pytest.warns(ReliabilityWarning, match="logged DCG@3"):
        logged_dcg(log, DeterministicRanker(scores), discount=LogDiscount(3), ess_threshold=1.0)


def test_stratified_diagnostics_are_the_holdouts_and_warn_once():
    from recpack_ope.metrics.stratified import stratified

    # 60 copies of the four entries, so that every stratum's ESS reaches ESS_MIN and only the
    # ESS ratio (threshold 0.99) decides.
    y, scores = tiled(60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = stratified(
            ips_dcg,
            y,
            scores,
            stratify_by=P,
            n_strata=2,
            discount=LogDiscount(3),
            propensity=P,
            clip=20.0,
            ess_threshold=0.99,
        )
    expected = hand_diagnostics(held_out_entries(60), lambda u, i: P[i], 20.0, 3)
    d = result.diagnostics
    assert d is result.holdout.diagnostics
    assert d.ess == pytest.approx(expected["ess"], rel=1e-12)
    assert d.n_clipped == expected["n_clipped"] == 60
    assert d.clipped_mass == pytest.approx(expected["clipped_mass"], rel=1e-12)
    # Width strata over p ∈ [0.02, 0.5]: Q1 = (0.02, 0.26] holds items 2, 1, 3 (weights 20, 10, 4),
    # ESS = 60 · 34²/516 = 134 of 180; Q2 holds item 0 alone (ESS 60 of 60).
    q1 = result.strata[0].result.diagnostics
    assert q1.ess == pytest.approx(60 * 34**2 / 516, rel=1e-12)
    assert q1.reasons == ("ess_ratio",) and result.strata[1].result.diagnostics.reliable
    assert result.unreliable_strata == ["Q1"]
    reliability = [w for w in caught if issubclass(w.category, ReliabilityWarning)]
    assert len(reliability) == 1
    message = str(reliability[0].message)
    assert "the holdout: ESS/n 0.623 < 0.99" in message and "Q1: ESS/n 0.747 < 0.99" in message
    assert "UNRELIABLE: weights (holdout)" in repr(result) and "unreliable strata: Q1" in repr(
        result
    )


def test_an_estimate_without_evaluated_interactions_is_flagged():
    # The target shows items 1 and 3 to user 0 and items 0 and 2 to user 1: no held-out hit.
    scores = np.array([[0.0, 0.9, 0.0, 0.8], [0.9, 0.0, 0.8, 0.0]])
    with pytest.warns(ReliabilityWarning, match="no evaluated interaction"):
        est = ips_dcg(Y, scores, discount=LogDiscount(2), propensity=P)
    assert est.value == 0 and est.diagnostics.n_weights == 0 and est.diagnostics.ess_ratio == 0
    assert est.diagnostics.reasons == ("ess_ratio", "ess") and math.isnan(
        est.diagnostics.user_share
    )
    assert est.diagnostics.explain().endswith("ESS 0 < 50")


def test_few_evaluated_interactions_with_equal_huge_weights_warn():
    # MovieLens-100K shaped: 943 users hold one held-out item each; the target ranks first the
    # held-out item of only 10 of them, a rare item of weight 13,736. ESS/n = 1 cannot see it.
    n_users, hits = 943, np.arange(0, 900, 90)
    held = np.ones(n_users, dtype=int)  # item 1, p = 0.5, never ranked
    held[hits] = 0  # item 0, p = 1 / 13736
    y = sp.csr_matrix((np.ones(n_users), (np.arange(n_users), held)), shape=(n_users, 12))
    top = np.tile(np.arange(2, 12), (n_users, 1))
    top[hits, 0] = 0
    p = np.r_[1 / 13736, 0.5, np.full(10, 0.5)]
    with pytest.warns(ReliabilityWarning) as caught:
        est = ips_dcg(y, TopK(top), discount=LogDiscount(10), propensity=p, clip=None)
    assert est.value == pytest.approx(10 * 13736 / n_users, rel=1e-9)
    d = est.diagnostics
    assert (d.n_weights, d.ess_ratio) == (10, pytest.approx(1.0))
    assert d.ess == pytest.approx(10.0) and d.n_users == 10 and d.user_share == 0.5
    assert d.reasons == ("ess",) and not d.reliable
    message = str(caught[0].message)
    assert len(caught) == 1 and message.startswith("IPS-DCG@10: unreliable, ESS 10 < 50")


def brute_force_user_share(users, contributions):
    """k / n_U by a loop: users sorted by total contribution, largest first, added until they
    carry half of the total."""
    totals = {}
    for u, x in zip(users, contributions, strict=True):
        totals[u] = totals.get(u, 0.0) + x
    ordered = sorted(totals.values(), reverse=True)
    carried, k = 0.0, 0
    while carried < 0.5 * sum(ordered):
        carried += ordered[k]
        k += 1
    return k / len(ordered)


def test_user_share_equals_hand_computation():
    # Users a, b, c, d contribute 4, 2, 2, 0 of 8: a alone carries half.
    d = WeightDiagnostics.from_contributions(
        np.array([2.0, 2.0, 4.0, 4.0, 4.0]),
        np.array([2.0, 2.0, 4.0, 4.0, 4.0]),
        np.array([3.0, 1.0, 2.0, 2.0, 0.0]),
        users=np.array(["a", "a", "b", "c", "d"]),
    )
    assert (d.n_users, d.user_share) == (4, 0.25)
    # Equal contributions: exactly half of the users, ties on the boundary included.
    equal = WeightDiagnostics.from_contributions(
        np.ones(6), np.ones(6), np.ones(6), users=np.arange(6)
    )
    assert equal.user_share == 0.5
    # 3 + 1 + 1 of 10: three of eight users.
    d = WeightDiagnostics.from_contributions(
        np.ones(8), np.ones(8), np.array([3.0, 1, 1, 1, 1, 1, 1, 1]), users=np.arange(8)
    )
    assert d.user_share == 3 / 8
    assert "37.5% of 8 users carry 50%" in d.summary()


@pytest.mark.parametrize("seed", range(6))
def test_user_share_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    users = rng.integers(0, max(1, n // 3), n)
    # Integer contributions give many tied user totals; heavy tails concentrate them.
    contributions = (
        rng.integers(0, 4, n).astype(float) if seed % 2 else rng.pareto(0.8, n) * (users % 3)
    )
    if contributions.sum() == 0:
        contributions[0] = 1.0
    weights = rng.choice([1.0, 2.0, 5.0], n)
    d = WeightDiagnostics.from_contributions(weights, weights, contributions, users=users)
    assert d.n_users == np.unique(users).size
    assert d.user_share == brute_force_user_share(users, contributions)
    assert ("user_share" in d.reasons) == (d.user_share < USER_SHARE_THRESHOLD)


def test_diagnostics_of_disjoint_user_parts_merge_exactly():
    rng = np.random.default_rng(3)
    n = 2000
    users = np.sort(rng.integers(0, 400, n))
    raw = 1 / rng.choice([0.01, 0.02, 0.1, 0.5], n)  # few distinct weights: tied groups
    weights = np.minimum(raw, 60.0)
    contributions = rng.integers(0, 3, n) * weights
    whole = WeightDiagnostics.from_contributions(raw, weights, contributions, users=users)
    # Parts of whole users, as the Spark engine's partitions are; interleaved, in any order.
    part = rng.integers(0, 5, 400)[users]
    groups = [
        WeightGroups.from_interactions(
            raw[part == k], weights[part == k], contributions[part == k], users[part == k]
        )
        for k in (4, 1, 3, 0, 2)
    ]
    merged = WeightDiagnostics.from_groups(WeightGroups.concatenate(groups))
    assert merged == whole  # every field exactly
    for field in ("weight", "count", "contribution", "raw", "clipped", "user_total", "user_count"):
        np.testing.assert_array_equal(getattr(merged.groups, field), getattr(whole.groups, field))
    assert merged.n_users == np.unique(users).size and merged.reasons == whole.reasons


def test_bad_inputs_of_the_new_measures_are_refused():
    with pytest.raises(ValueError, match=r"users must name the user of every evaluated"):
        WeightDiagnostics.from_contributions(np.ones(3), np.ones(3), np.ones(3), users=[0, 1])
    sums = np.ones((3, 2))
    bounds = np.array([[0.1, 0.2], [0.5, 1.0]])
    with pytest.raises(ValueError, match=r"at least 2 users, got 1"):
        PropensityCalibration.from_sums(sums[:1], np.array([1, 1]), bounds)
    with pytest.raises(ValueError, match=r"level must lie in \(0, 1\), got 1.5"):
        PropensityCalibration.from_sums(sums, np.array([1, 1]), bounds, 1.5)
    with pytest.raises(ValueError, match=r"sums must be users × bins"):
        PropensityCalibration.from_sums(sums, np.array([1, 1, 1]))
    with pytest.raises(ValueError, match=r"bounds must hold \(smallest, largest\) of 2 bins"):
        PropensityCalibration.from_sums(sums, np.array([1, 1]), bounds[:1])


# Impressions of the two users of Y: where (and how attentively) each item was shown.
E = sp.csr_matrix(np.array([[1.0, 0.0, 0.63, 0.5], [0.0, 0.63, 0.0, 1.0]]))


def hand_calibration(e, p, level_each):
    """(ratio, interval) over all items, then per item (P's four values make four quartile
    bins of one item each), by numpy and scipy's Student-t interval."""
    from scipy import stats

    ratios = e / p  # users × items
    out = []
    for values in [ratios.mean(axis=1), *ratios.T]:
        mean, sem = values.mean(), stats.sem(values)
        out.append((mean, stats.t.interval(level_each, values.size - 1, loc=mean, scale=sem)))
    return out


def test_calibration_equals_hand_computation():
    e = E.toarray()
    with pytest.warns(ReliabilityWarning):
        est = ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, impressions=E)
    c = est.diagnostics.calibration
    assert (c.n_users, c.n_items, c.level, c.interval_level) == (2, 4, 0.95, 1 - 0.05 / 5)
    expected = hand_calibration(e, P, 1 - 0.05 / 5)
    assert c.ratio == pytest.approx(expected[0][0], rel=1e-12)
    np.testing.assert_allclose(c.interval, expected[0][1], rtol=1e-12)
    # Bins from the least to the most exposed item: items 2, 1, 3, 0.
    order = [2, 1, 3, 0]
    assert c.bin_items == (1, 1, 1, 1)
    np.testing.assert_allclose(c.bin_ratios, [expected[1 + i][0] for i in order], rtol=1e-12)
    np.testing.assert_allclose(c.bin_intervals, [expected[1 + i][1] for i in order], rtol=1e-12)
    assert c.bin_bounds == tuple((q, q) for q in sorted(P))
    assert "calibration: mean e/p̂" in est.diagnostics.summary() and "calibration:" in repr(est)
    # Per-(user, item) propensities cannot bin the unshown items: the overall check only.
    rows, cols = (E + Y).nonzero()
    matrix = sp.csr_matrix((P[cols], (rows, cols)), shape=Y.shape)
    with pytest.warns(ReliabilityWarning):
        c = ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=matrix, impressions=E)
    c = c.diagnostics.calibration
    assert c.bin_ratios == () and c.interval_level == 0.95
    assert c.ratio == pytest.approx(expected[0][0], rel=1e-12)
    np.testing.assert_allclose(c.interval, hand_calibration(e, P, 0.95)[0][1], rtol=1e-12)
    # Without impressions there is nothing to check against.
    with pytest.warns(ReliabilityWarning):
        assert (
            ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P).diagnostics.calibration
            is None
        )


@pytest.fixture(scope="module")
def calibration_runs():
    """The calibration check of IPS-DCG with impressions on 200 held-out logs of one world:
    with the true propensities, half of them (a factor 2 off; twice them would exceed 1 for
    the most exposed item), and a power law of them with exponent 0.8 scaled so that the mean
    over items of p / p̂ is 1 (only the shape is wrong)."""
    # 2,000 users: with fewer, the heavy tail of e/p̂ (rare items shown) makes the intervals
    # of the mean over users cover visibly less than their level (600 users: 98.2 %, not 99 %).
    world = SimulatedWorld(n_users=2000, n_items=200, seed=0)
    target = TopK(np.random.default_rng(0).integers(0, 200, (2000, 1)))
    runs = {"true": [], "half": [], "shape": []}
    for seed in range(200):
        log = world.log(PopularityPolicy(), feed_length=30, seed=100 + seed)
        p = log.exposure
        shape = p**0.8 * np.mean(p**0.2)
        sources = {"true": p} if seed >= 50 else {"true": p, "half": p / 2, "shape": shape}
        for name, propensity in sources.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ReliabilityWarning)
                est = ips_dcg(
                    log.clicks,
                    target,
                    discount=LogDiscount(10),
                    propensity=propensity,
                    impressions=log.impressions(),
                )
            runs[name].append((est.diagnostics, [str(w.message) for w in caught]))
    return runs


def test_calibration_covers_one_with_the_true_propensities(calibration_runs):
    checks = [d.calibration for d, _ in calibration_runs["true"]]
    level = checks[0].interval_level
    assert level == 1 - 0.05 / 5 and all(len(c.bin_ratios) == 4 for c in checks)
    covered = np.array(
        [[lo <= 1 <= hi for lo, hi in (c.interval, *c.bin_intervals)] for c in checks]
    )
    # Each interval covers 1 at its nominal 99 %, within 3 binomial standard errors of 200
    # replicates (0.021); all five together at least 95 % less 3 of theirs (0.046).
    tolerance = 3 * math.sqrt(level * (1 - level) / len(checks))
    assert np.all(np.abs(covered.mean(axis=0) - level) <= tolerance), covered.mean(axis=0)
    assert covered.all(axis=1).mean() >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / len(checks))
    assert np.mean([c.ratio for c in checks]) == pytest.approx(1.0, abs=0.01)


def test_calibration_flags_a_wrong_scale_and_a_wrong_shape(calibration_runs):
    for name in ("half", "shape"):
        runs = calibration_runs[name]
        flagged = [d for d, _ in runs if "calibration" in d.reasons]
        # A correct check flags at most 5 % of logs; these wrong propensities nearly all.
        assert len(flagged) >= 0.9 * len(runs), (name, len(flagged))
        assert all(
            any("calibration: mean e/p̂" in m for m in messages)
            for d, messages in runs
            if "calibration" in d.reasons
        )
    # Half the propensities double every ratio; the wrong shape keeps the overall mean at 1
    # (by construction) and only the bins see it: rare items over-, popular under-weighted.
    half = [d.calibration for d, _ in calibration_runs["half"]]
    assert np.mean([c.ratio for c in half]) == pytest.approx(2.0, abs=0.02)
    shape = [d.calibration for d, _ in calibration_runs["shape"]]
    assert np.mean([c.ratio for c in shape]) == pytest.approx(1.0, abs=0.02)
    lowest, highest = (np.mean([c.bin_ratios[b] for c in shape]) for b in (0, -1))
    assert lowest < 0.9 and highest > 1.1


def test_no_clipping_removes_exactly_no_mass():
    # Seven weights 10/3 summed are not 7 · 10/3 in floating point (they differ by 1.5e-16
    # relative): without clipping the removed mass is 0 by definition, and must be computed
    # as exactly 0, not as that rounding ("-0.0%").
    raw = np.full(7, 10 / 3)
    assert raw.sum() != 7 * raw[0]
    groups = WeightGroups.from_interactions(raw, raw, np.ones(7), np.arange(7))
    d = WeightDiagnostics.from_groups(groups)
    assert d.n_clipped == 0 and d.clipped_mass == 0.0
    assert not math.copysign(1.0, d.clipped_mass) < 0  # not a negative zero
    clipped = WeightDiagnostics.from_groups(
        WeightGroups.from_interactions(
            np.array([4.0, 1.0]), np.array([2.0, 1.0]), np.ones(2), [0, 1]
        )
    )
    assert clipped.clipped_mass == pytest.approx((4 - 2) / 5, rel=1e-15)


def test_warnings_count_the_units_an_estimate_averages_over():
    # 6 of 150 units carry half the estimate: a user share of 0.04 < 0.1.
    d = WeightDiagnostics(200, 120.0, 4.0, 0.3, 0, 0.0, n_users=150, user_share=0.04)
    with pytest.warns(
        ReliabilityWarning,
        match=r"\(6 of the 150 sessions with a reward the ranking exposes carry 50%",
    ):
        d.warn("logged DCG@10", unit="sessions")
    with pytest.warns(
        ReliabilityWarning,
        match=r"\(6 of the 150 users with a reward the ranking exposes carry 50%",
    ):
        d.warn("IPS-DCG@10")
    assert "of 150 sessions carry" in d.summary("sessions")


def test_weights_outside_their_domain_are_refused_by_name():
    users = np.array([0, 1])
    for raw, weights, contributions, message in [
        ([1.0, np.nan], [1.0, 1.0], [1.0, 1.0], r"raw\[1\] is nan"),
        ([1.0, 2.0], [1.0, np.nan], [1.0, 1.0], r"weights\[1\] is nan"),
        ([1.0, 2.0], [-1.0, 2.0], [1.0, 1.0], r"weights\[0\] is -1.0"),
        ([1.0, 2.0], [1.0, np.inf], [1.0, 1.0], r"weights\[1\] is inf"),
        ([1.0, 2.0], [1.0, 2.0], [1.0, -0.5], r"contributions\[1\] is -0.5"),
        ([1.0, 2.0], [3.0, 2.0], [1.0, 1.0], r"weights\[0\] is 3.0, above .* raw\[0\] = 1.0"),
    ]:
        with pytest.raises(ValueError, match=message):
            WeightDiagnostics.from_contributions(
                np.array(raw), np.array(weights), np.array(contributions), users=users
            )
    with pytest.raises(ValueError, match=r"shapes \[\(2,\), \(3,\), \(2,\)\]"):
        WeightDiagnostics.from_contributions(np.ones(2), np.ones(3), np.ones(2), users=users)
    with pytest.raises(ValueError, match=r"WeightGroups weight\[0\] is -2.0"):
        WeightGroups(*(np.array([-2.0]),) * 5, np.array([1.0]), np.array([1]))
    # Built field by field, the diagnostics' own domains hold: ESS in [0, n], shares in [0, 1].
    for fields, message in [
        ((10, math.nan, 2.0, 0.1, 0, 0.0), r"ess must be in \[0, 10\], got nan"),
        ((10, 11.0, 2.0, 0.1, 0, 0.0), r"ess must be in \[0, 10\], got 11.0"),
        ((10, 5.0, 2.0, 0.1, 0, 1.5), r"clipped_mass is a share, in \[0, 1\], got 1.5"),
        ((10, 5.0, 2.0, -0.1, 0, 0.0), r"top_share is a share, in \[0, 1\] or NaN, got -0.1"),
        ((-1, 0.0, 0.0, 0.1, 0, 0.0), r"n_weights must be an integer >= 0, got -1"),
    ]:
        with pytest.raises(ValueError, match=message):
            WeightDiagnostics(*fields)


def test_extreme_weights_give_the_diagnostics_their_limits():
    # Weights near the float limit: their squares overflow, Kish's ESS does not. Two weights
    # 1e300 and one 2e300: (1 + 1 + 2)² / (1 + 1 + 4) = 16/6, by hand.
    d = WeightDiagnostics.from_contributions(
        np.array([1e300, 1e300, 2e300]),
        np.array([1e300, 1e300, 2e300]),
        np.ones(3),
        users=np.arange(3),
    )
    assert d.ess == pytest.approx(16 / 6, rel=1e-15) and d.clipped_mass == 0.0
    # No weight at all (e.g. a pseudo-inverse weight of 0 on every rewarded session): no
    # effective sample and no raw mass to clip, exactly 0 rather than 0 / 0.
    zero = WeightDiagnostics.from_contributions(
        np.zeros(2), np.zeros(2), np.zeros(2), users=np.arange(2)
    )
    assert (zero.ess, zero.clipped_mass, zero.ess_ratio) == (0.0, 0.0, 0.0)
    # A propensity whose inverse overflows (1/5e-324 = inf), clipped to m = 4: the clipped
    # share of the raw mass is its limit, 1.
    clipped = WeightDiagnostics.from_contributions(
        np.array([np.inf, 2.0]), np.array([4.0, 2.0]), np.ones(2), users=np.arange(2)
    )
    assert (clipped.clipped_mass, clipped.n_clipped, clipped.max_weight) == (1.0, 1, 4.0)
