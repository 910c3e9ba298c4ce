"""The framework-independent stratified held-out evaluation and its options, against the core
estimators run by hand on a brute-force ranking."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.evaluation.held_out import (
    StratifiedOptions,
    check_rating_split,
    check_relevant,
    report_cutoff,
    stratified_held_out,
)
from recpack_ope.evaluation.strata_report import ReportMetric, strata_report
from recpack_ope.metrics.ranking import TopK
from recpack_ope.propensity.discount import LogDiscount


def test_stratified_held_out_equals_strata_report_on_a_brute_force_ranking():
    rng = np.random.default_rng(0)
    dense = rng.random((9, 8)) < 0.25
    dense[4] = False  # a user without held-out positives is not evaluated
    held = sp.csr_matrix(dense)
    seen = sp.csr_matrix(rng.random((9, 8)) < 0.3)
    scores = rng.integers(0, 3, size=(9, 8)).astype(float)
    p = rng.uniform(0.05, 1.0, 8)
    metrics = {
        "nDCG": ReportMetric("ndcg", LogDiscount()),
        "Recall@3": ReportMetric("recall", LogDiscount(3)),
    }
    assert report_cutoff(metrics) is None and report_cutoff({"r": metrics["Recall@3"]}) == 3
    options = StratifiedOptions(clip=None, batch_users=2, keep_rankings=True)
    out = stratified_held_out(held, lambda u: scores[u], p, metrics, options, seen=seen)
    users = np.flatnonzero(np.diff(held.indptr) > 0)
    assert 4 not in out.user_ids and out.user_ids.tolist() == users.tolist()
    rows = []
    for u in users:
        candidates = [i for i in range(8) if not seen[u, i] or held[u, i]]
        order = sorted(candidates, key=lambda i: (-scores[u, i], i))
        rows.append(order + [-1] * (8 - len(order)))
    ranking = TopK(np.array(rows))
    np.testing.assert_array_equal(out.ranking.items, ranking.items)
    expected = strata_report(held[users], ranking, p, metrics, clip=None)
    for name in metrics:
        assert out.report.ips[name].value == pytest.approx(expected.ips[name].value, rel=1e-12)
        assert out.report.estimates[name].value == pytest.approx(
            expected.estimates[name].value, rel=1e-12
        )
    averages, per_user = out.values()
    assert averages == {name: r.value for name, r in expected.estimates.items()}
    r = expected.estimates["nDCG"]
    assert per_user["nDCG"] == dict(
        zip(users[r.user_ids].tolist(), r.per_user.tolist(), strict=True)
    )
    bare = stratified_held_out(held, lambda u: scores[u], p, metrics, StratifiedOptions(clip=None))
    assert bare.ranking is None and bare.y_true is None
    with pytest.raises(ValueError, match="metrics is empty: give ranking metrics"):
        stratified_held_out(held, lambda u: scores[u], p, {})


def test_dr_row_needs_the_reward_scores_of_the_evaluated_users():
    held = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 1]]))
    clicks = sp.csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 0, 1], [0, 1, 1, 0]]))
    scores = np.array([[0.9, 0.1, 0.4, 0.3], [0.2, 0.8, 0.5, 0.1], [0.3, 0.2, 0.7, 0.6]])
    asked = []

    def reward(users):
        asked.append(users.tolist())
        return scores[users]

    metrics = {"DCG@2": ReportMetric("dcg", LogDiscount(2))}
    out = stratified_held_out(
        held,
        lambda u: scores[u],
        np.full(4, 0.5),
        metrics,
        StratifiedOptions(clip=None, batch_users=2),
        reward=reward,
        clicks=clicks,
    )
    assert asked == [[0, 1], [2]]  # in batches of batch_users
    assert "DCG@2" in out.report.dr


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_strata": 0}, "n_strata must be a positive integer, got 0"),
        ({"binning": "quantile"}, r"binning must be one of \('width', 'mass'\), got 'quantile'"),
        ({"clip": 0}, "clip must be a finite number > 0"),
        ({"batch_users": -5}, "batch_users must be a positive integer, got -5"),
        ({"keep_rankings": "no"}, "keep_rankings must be True or False, got 'no'"),
    ],
)
def test_stratified_options_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StratifiedOptions(**kwargs)


def test_rating_split_counts_as_ratio_split_and_refuses_empty_training():
    data = [("u", "i", 5.0)] * 320
    assert check_rating_split(data, 0.2, 0.0, 4.0, 1) == (256, 0, 64)  # ceil(0.2 · 320)
    assert check_rating_split(data, 50, 20, 4.0, None) == (250, 20, 50)
    assert check_rating_split(data, 0.1, 0.25, 4.0, 7) == (320 - 32 - 80, 80, 32)
    for test, val in ((0.2, 0.9), (320, 0.0)):
        with pytest.raises(ValueError, match="leave no training data among the 320 ratings"):
            check_rating_split(data, test, val, 4.0, 1)
    with pytest.raises(ValueError, match="data must be a non-empty list"):
        check_rating_split("abc", 0.2, 0.0, 4.0, 1)
    with pytest.raises(ValueError, match="verbose must be True or False, got 1"):
        check_rating_split(data, 0.2, 0.0, 4.0, 1, verbose=1)
    with pytest.raises(ValueError, match="rating_threshold must be finite, got nan"):
        check_rating_split(data, 0.2, 0.0, float("nan"), 1)
    check_relevant([3.0, 4.0], 4.0)
    with pytest.raises(ValueError, match=r"no test rating reaches .*\(the largest is 3.0\)"):
        check_relevant([1.0, 3.0], 4.0)
