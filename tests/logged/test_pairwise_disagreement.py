"""Classic and counterfactual pairwise disagreement (Gilotte 2019) against loops and Algorithm 2."""

import numpy as np
import pytest
import scipy.sparse as sp
from test_banner_marginals import brute_force
from test_feed_log import small_log
from test_policies import CORRUPT_SCORES, corrupt_csr

from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.pairwise_disagreement import (
    Disagreement,
    counterfactual_disagreement,
    pairwise_disagreement,
)


def banner_log(
    seed: int,
    n_banners: int = 40,
    sizes=(2, 6),
    n_candidates_extra: int = 2,
    uniform: bool = False,
    click_rate: float = 0.3,
):
    """Banners drawn by PL from candidate sets; returns the log and each banner's candidates."""
    rng = np.random.default_rng(seed)
    sessions, items, ranks, rewards, weights, candidates = [], [], [], [], [], []
    for b in range(n_banners):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        cand = (
            np.ones(n + n_candidates_extra)
            if uniform
            else rng.lognormal(0, 1, n + n_candidates_extra)
        )
        cand = cand / cand.sum()
        order = np.argsort(rng.standard_exponential(cand.size) / cand)[:n]  # PL draw of the banner
        candidates.append((cand, order))
        clicks = (rng.random(n) < click_rate).astype(float)
        sessions += [b] * n
        items += list(order)
        ranks += list(range(1, n + 1))
        rewards += list(clicks)
        weights += list(cand[order])
    log = FeedLog.from_arrays(
        sessions,
        items,
        ranks,
        rewards,
        logging_weight=weights,
        n_items=sizes[1] + n_candidates_extra,
    )
    return log, candidates


def loops(log, scores, q_of_banner=None):
    """Σ num / Σ den by explicit loops over banners, clicks and non-clicked products."""
    num = den = 0.0
    for b in range(log.n_sessions):
        rows = np.arange(log.indptr[b], log.indptr[b + 1])
        clicked = rows[log.reward[rows] > 0]
        q = None if q_of_banner is None else q_of_banner(b)
        for i in clicked:
            for j in rows:
                if log.reward[j] > 0:
                    continue
                weight = 1.0 if q is None else q[log.rank[i] - 1, j - rows[0]]
                num += weight * (scores[i] < scores[j])
                den += weight * (scores[i] != scores[j])
    return num / den


def test_classic_equals_loop_over_clicked_non_clicked_pairs_with_ties_rejected():
    log, _ = banner_log(0)
    scores = np.round(np.random.default_rng(1).normal(size=log.n_rows), 1)  # some ties
    result = pairwise_disagreement(log, scores)
    assert result.value == pytest.approx(loops(log, scores), rel=1e-12)
    clicks = log.per_session(log.reward > 0)
    sizes = np.diff(log.indptr)
    assert result.n_users == int(((clicks > 0) & (clicks < sizes)).sum())
    assert result.n_excluded_users == log.n_sessions - result.n_users


def test_counterfactual_equals_loops_with_enumerated_rank_marginals():
    log, candidates = banner_log(2, sizes=(2, 5))
    scores = np.round(np.random.default_rng(3).normal(size=log.n_rows), 1)

    def q_of_banner(b):
        cand, order = candidates[b]
        n = order.size
        # brute_force conditions on the first n candidates; reorder so the banner comes first.
        rest = np.setdiff1d(np.arange(cand.size), order)
        return brute_force(np.concatenate([cand[order], cand[rest]]), n)

    result = counterfactual_disagreement(log, scores)
    assert result.value == pytest.approx(loops(log, scores, q_of_banner), rel=1e-12)
    assert result.approximation_error == 0


def test_uniform_logging_gives_the_classic_disagreement_exactly():
    log, _ = banner_log(4, sizes=(6, 6), uniform=True)  # every banner shows 6 of 8 candidates
    scores = np.random.default_rng(5).normal(size=log.n_rows)
    classic = pairwise_disagreement(log, scores)
    counterfactual = counterfactual_disagreement(log, scores)
    assert counterfactual.value == pytest.approx(classic.value, rel=1e-12)
    # per banner the ratios agree too (num and den scale by 1/n)
    np.testing.assert_allclose(counterfactual.terms, classic.terms / 6, rtol=1e-12)


def test_expected_value_of_algorithm_2_by_simulation():
    """Run Algorithm 2 literally: re-draw the banner from the candidates by PL until it shows
    the same set (rejection sampling of π), take the product at the click's rank."""
    log, candidates = banner_log(6, n_banners=25, sizes=(3, 4), click_rate=0.25)
    scores = np.random.default_rng(7).normal(size=log.n_rows)
    rng = np.random.default_rng(8)
    returned = []
    for b in range(log.n_sessions):
        rows = np.arange(log.indptr[b], log.indptr[b + 1])
        clicked = rows[log.reward[rows] > 0]
        if clicked.size != 1 or clicked.size == rows.size:
            continue  # Algorithm 2 assumes one click; keep those banners
        cand, order = candidates[b]
        r = log.rank[clicked[0]] - 1
        for _ in range(400):
            while True:
                redraw = np.argsort(rng.standard_exponential(cand.size) / cand)[: order.size]
                if set(redraw) == set(order):
                    break
            negative = rows[np.flatnonzero(order == redraw[r])[0]]
            if scores[negative] != scores[clicked[0]]:
                returned.append(scores[clicked[0]] < scores[negative])
    single = np.array(
        [
            (log.reward[log.indptr[b] : log.indptr[b + 1]] > 0).sum() == 1
            for b in range(log.n_sessions)
        ]
    )
    keep = np.repeat(single, np.diff(log.indptr))
    sub = FeedLog.from_arrays(
        log.session[keep],
        log.item[keep],
        log.rank[keep],
        log.reward[keep],
        logging_weight=log.logging_weight[keep],
        n_items=log.n_items,
    )
    exact = counterfactual_disagreement(sub, scores[keep]).value
    returned = np.array(returned, dtype=float)
    # Binomial SE of the acceptance-conditional mean (draws within a banner are independent).
    se = returned.std() / np.sqrt(returned.size)
    assert abs(returned.mean() - exact) < 4 * se


def test_large_banners_use_importance_sampling_with_an_error_estimate():
    log, _ = banner_log(9, n_banners=15, sizes=(8, 8), n_candidates_extra=10)
    scores = np.random.default_rng(10).normal(size=log.n_rows)
    exact = Disagreement.counterfactual(log).evaluate(scores)
    sampled = Disagreement.counterfactual(log, max_exact=6, n_samples=20_000, seed=1).evaluate(
        scores
    )
    assert sampled.approximation_error > 0
    assert abs(sampled.value - exact.value) < 3 * sampled.approximation_error
    assert "approximation error" in repr(sampled)


def test_one_object_evaluates_many_models_and_compares_them():
    log, _ = banner_log(11, n_banners=200)
    metric = Disagreement.counterfactual(log)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=log.n_rows), rng.normal(size=log.n_rows)
    assert metric.evaluate(a).value == pytest.approx(
        counterfactual_disagreement(log, a).value, rel=1e-12
    )
    assert metric.evaluate(-a).value == pytest.approx(1 - metric.evaluate(a).value, rel=1e-12)
    comparison = metric.evaluate(a).compare(metric.evaluate(b))
    assert comparison.n_users == metric.banners.size


def test_errors():
    log, _ = banner_log(12)
    bare = FeedLog.from_arrays(log.session, log.item, log.rank, log.reward)
    with pytest.raises(ValueError, match="needs the logging policy's Plackett–Luce weights"):
        Disagreement.counterfactual(bare)
    gap = FeedLog.from_arrays([0, 0], [0, 1], [1, 3], [1, 0], logging_weight=[0.5, 0.5])
    with pytest.raises(ValueError, match="banner 0 .*2 products.*last rank is 3"):
        Disagreement.counterfactual(gap)
    with pytest.raises(ValueError, match="ties every pair"):
        pairwise_disagreement(log, np.zeros(log.n_rows))
    with pytest.raises(ValueError, match="one value per logged row"):
        pairwise_disagreement(log, np.zeros(3))


def test_counterfactual_disagreement_with_extreme_logging_weights():
    # Banner 0: weights 1e-300 and ~1, no outside mass: a re-draw puts product 1 first with
    # probability 1, so the click at rank 1 (score 0) meets score 1: one disagreement.
    # Banner 1: weights 1e-300 and 1e-310 with outside mass ~1: both orders equally likely
    # (ratio (W − 1e-300)/(W − 1e-310)), so the click at rank 2 (score 3) meets product 0
    # (score 2) with weight 1/2, no disagreement. Value 1 / (1 + 1/2).
    log = FeedLog.from_arrays(
        [0, 0, 1, 1],
        [0, 1, 0, 2],
        [1, 2, 1, 2],
        [1.0, 0.0, 0.0, 1.0],
        logging_weight=[1e-300, 1 - 1e-300, 1e-300, 1e-310],
    )
    result = counterfactual_disagreement(log, np.arange(4.0))
    assert result.value == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize("rewards", [[0, 0, 0, 0], [1, 1, 1, 1]])
def test_disagreement_on_a_log_without_comparable_banners_says_so(rewards):
    log = small_log(reward=rewards, logging_weight=[0.3] * 4)
    with pytest.raises(ValueError, match="no banner with both a clicked and a non-clicked"):
        pairwise_disagreement(log, np.arange(4.0))
    with pytest.raises(ValueError, match=r"of its 2 banners, \d have no click"):
        counterfactual_disagreement(log, np.arange(4.0))


def test_pairs_of_weight_zero_blame_the_log_not_the_model():
    log = small_log()
    classic = Disagreement.classic(log)
    zero = Disagreement(
        log,
        "counterfactual disagreement",
        classic.clicked,
        classic.other,
        np.zeros(classic.weight.size),
        None,
        classic.banners,
        classic.n_rejected,
    )
    with pytest.raises(ValueError, match=r"every \(clicked, non-clicked\) pair has weight 0"):
        zero.evaluate(np.arange(4.0))
    with pytest.raises(ValueError, match="the model ties every pair"):
        classic.evaluate(np.zeros(4))


def test_scores_of_logged_rows_must_be_real_and_exact():
    log = small_log()
    with pytest.raises(ValueError, match=r"scores.*complex.*1j at position 0"):
        pairwise_disagreement(log, np.array([1j, 1, 1, 1]))
    with pytest.raises(ValueError, match=r"scores.*1152921504606846976 at row 0"):
        pairwise_disagreement(log, np.array([2**60, 2**60 + 1, 0, 1]))
    with pytest.raises(ValueError, match=r"scores has complex dtype"):
        pairwise_disagreement(log, sp.csr_matrix(np.ones((2, 3)) * 1j))
    # Below 2**53 integers are exact. Session 0: the click (score 0) is below the other
    # product (1), a disagreement; session 1: the click (3) is above (2). Value 1/2.
    assert pairwise_disagreement(log, np.array([0, 1, 2, 3])).value == pytest.approx(0.5)


@pytest.mark.parametrize("kind, message", CORRUPT_SCORES)
def test_corrupt_sparse_scores_are_refused_before_comparing(kind, message):
    with pytest.raises(ValueError, match=message):
        pairwise_disagreement(small_log(), corrupt_csr(kind))


def test_options_of_counterfactual_disagreement():
    weighted = small_log(logging_weight=[0.3] * 4)
    with pytest.raises(ValueError, match="seed.*'a'"):
        counterfactual_disagreement(weighted, np.arange(4.0), seed="a")
    with pytest.raises(ValueError, match="progress.*'yes'"):
        counterfactual_disagreement(weighted, np.arange(4.0), progress="yes")
