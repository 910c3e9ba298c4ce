"""Weight diagnostics of IPS-weighted estimates against hand computations from their definitions
(docs/definitions.md, "Weight diagnostics"), and the reliability warning."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.policies import DeterministicRanker
from recpack_ope.metrics.dcg import dcg, ips_dcg, ips_ndcg, snips_dcg
from recpack_ope.metrics.recall import ips_recall
from recpack_ope.propensity.discount import LogDiscount

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


def held_out_entries():
    rows, cols = Y.nonzero()
    return [(u, i, Y[u, i], RANK[(u, i)]) for u, i in zip(rows, cols, strict=True)]


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
    for est in (
        ips_ndcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=0.01),
        snips_dcg(
            Y,
            SCORES,
            discount=LogDiscount(3),
            propensity=P,
            ess_threshold=0.01,
        ),
    ):
        assert est.diagnostics == base.diagnostics
    # Unweighted estimates have no weights to diagnose.
    assert dcg(Y, SCORES, discount=LogDiscount(3)).diagnostics is None


def test_recall_diagnostics_use_its_own_cutoff():
    est = ips_recall(Y, SCORES, k=1, propensity=P, clip=20, ess_threshold=0.01)
    # recall@1 is DCG with a flat discount of length 1: only rank-1 entries contribute.
    entries = [(u, i, c, r) for u, i, c, r in held_out_entries()]
    raw = [1 / P[i] for _, i, _, _ in entries]
    w = [min(20, v) for v in raw]
    contrib = [c * wj * (r <= 1) for (_, _, c, r), wj in zip(entries, w, strict=True)]
    shown = [j for j in range(4) if entries[j][3] <= 1]  # (user 0, item 0) and (user 1, item 3)
    top = max(shown, key=lambda j: (w[j], -j))
    assert est.diagnostics.n_weights == len(shown) == 2
    assert est.diagnostics.top_share == pytest.approx(contrib[top] / sum(contrib), rel=1e-12)
    ws = [w[j] for j in shown]
    assert est.diagnostics.ess == pytest.approx(sum(ws) ** 2 / sum(x * x for x in ws), rel=1e-12)


def test_warning_fires_below_the_threshold_only_and_names_the_estimate():
    ratio = hand_diagnostics(held_out_entries(), lambda u, i: P[i], math.inf, 3)["ess_ratio"]
    with pytest.warns(ReliabilityWarning, match=r"IPS-DCG@3: .*effective sample size") as caught:
        est = ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=ratio + 0.01)
    assert len(caught) == 1
    assert not est.diagnostics.reliable and "UNRELIABLE: weights: ESS" in repr(est)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReliabilityWarning)
        est = ips_dcg(Y, SCORES, discount=LogDiscount(3), propensity=P, ess_threshold=ratio - 0.01)
    assert est.diagnostics.reliable and "\n  weights: ESS" in repr(est)
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
    for key, value in expected.items():
        assert getattr(est.diagnostics, key) == pytest.approx(value, rel=1e-12), key
    assert "weights: ESS" in repr(est) and "sessions" in repr(est)
    with pytest.warns(ReliabilityWarning, match="logged DCG@3"):
        logged_dcg(log, DeterministicRanker(scores), discount=LogDiscount(3), ess_threshold=1.0)


def test_stratified_diagnostics_are_the_holdouts_and_warn_once():
    from recpack_ope.metrics.stratified import stratified

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = stratified(
            ips_dcg,
            Y,
            SCORES,
            stratify_by=P,
            n_strata=2,
            discount=LogDiscount(3),
            propensity=P,
            clip=20.0,
            ess_threshold=0.99,
        )
    expected = hand_diagnostics(held_out_entries(), lambda u, i: P[i], 20.0, 3)
    d = result.diagnostics
    assert d is result.holdout.diagnostics
    assert d.ess == pytest.approx(expected["ess"], rel=1e-12)
    assert d.n_clipped == expected["n_clipped"] == 1
    assert d.clipped_mass == pytest.approx(expected["clipped_mass"], rel=1e-12)
    # Width strata over p ∈ [0.02, 0.5]: Q1 = (0.02, 0.26] holds items 2, 1, 3 (weights 20, 10, 4),
    # ESS = 34²/516 = 2.24 of 3; Q2 holds item 0 alone (ESS 1 of 1).
    q1 = result.strata[0].result.diagnostics
    assert q1.ess == pytest.approx(34**2 / 516, rel=1e-12)
    assert result.unreliable_strata == ["Q1"]
    reliability = [w for w in caught if issubclass(w.category, ReliabilityWarning)]
    assert len(reliability) == 1 and "Q1" in str(reliability[0].message)
    assert "UNRELIABLE: weights (holdout)" in repr(result) and "unreliable strata: Q1" in repr(
        result
    )


def test_an_estimate_without_evaluated_interactions_is_flagged():
    # The target shows items 1 and 3 to user 0 and items 0 and 2 to user 1: no held-out hit.
    scores = np.array([[0.0, 0.9, 0.0, 0.8], [0.9, 0.0, 0.8, 0.0]])
    with pytest.warns(ReliabilityWarning, match="no evaluated interaction"):
        est = ips_dcg(Y, scores, discount=LogDiscount(2), propensity=P)
    assert est.value == 0 and est.diagnostics.n_weights == 0 and est.diagnostics.ess_ratio == 0
