"""The framework-independent stratified held-out evaluation and its options, against the core
estimators run by hand on a brute-force ranking."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.evaluation.held_out import (
    HeldOutResult,
    StratifiedOptions,
    check_models,
    check_rating_split,
    check_relevant,
    positives,
    report_cutoff,
    stratified_held_out,
    user_scores,
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
        ({"clip": 0}, "clip must be a finite number >= 1"),
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


def test_options_split_takes_their_fields_and_check_fit_on():
    options, others = StratifiedOptions.split({"n_strata": 3, "fit_on": "train", "fmt": "UIR"})
    assert options == StratifiedOptions(n_strata=3, fit_on="train") and others == {"fmt": "UIR"}
    assert StratifiedOptions.split({}) == (StratifiedOptions(), {})
    with pytest.raises(ValueError, match="fit_on must be 'all' or 'train', got 'test'"):
        StratifiedOptions.split({"fit_on": "test"})


def test_positives_count_the_ratings_at_the_threshold_of_known_items():
    rng = np.random.default_rng(3)
    triplets = [
        (rng.integers(0, 4, 30), rng.integers(0, 7, 30), rng.integers(1, 6, 30).astype(float))
        for _ in range(2)
    ]
    expected = np.zeros((4, 5))
    for users, items, ratings in triplets:
        for u, i, r in zip(users, items, ratings, strict=True):
            if r >= 4.0 and i < 5:  # items 5 and 6 are unknown to a 5-item model
                expected[u, i] += 1
    found = positives(triplets, (4, 5), 4.0)
    assert sp.issparse(found) and found.shape == (4, 5)
    np.testing.assert_array_equal(found.toarray(), expected)


def test_user_scores_pad_cut_and_default():
    rows = {0: [0.3, 0.7], 1: [[0.1, 0.9, 0.4, 0.8]], 2: [0.5, 0.2, 0.6]}

    def score(user):
        if user == 3:
            raise KeyError(user)  # a user the model cannot score
        return rows[user]

    one_user = user_scores(score, 3, lambda: -1.0, KeyError)
    assert one_user(0).tolist() == [0.3, 0.7, 0.3]  # an unknown item ranks last
    assert one_user(1).tolist() == [0.1, 0.9, 0.4]  # a 1 × n row, cut to the items evaluated
    assert one_user(2).tolist() == [0.5, 0.2, 0.6]
    assert one_user(3).tolist() == [-1.0, -1.0, -1.0]
    with pytest.raises(KeyError):
        user_scores(score, 3, lambda: -1.0)(3)  # only the failures named are defaulted


def test_check_models_names_what_each_must_be():
    class Recommender:
        def fit(self):
            return self

        def score(self, user):
            return [0.0]

    check_models(None, None, "a Cornac recommender", "MostPop()")
    check_models(Recommender(), Recommender(), "a Cornac recommender", "MostPop()")
    with pytest.raises(TypeError, match=r"propensity must be a propensity model .* got str"):
        check_models("powerlaw", None, "a Cornac recommender", "MostPop()")
    with pytest.raises(
        TypeError, match=r"reward_model must be an R model \(with fit and score, e.g. R\(\)\) or"
    ):
        check_models(None, object(), "an R model", "R()")


def test_held_out_result_holds_the_report_and_prints_its_table():
    metrics = {"Recall@1": ReportMetric("recall", LogDiscount(1))}
    held = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 0], [0, 1, 1]]))
    scores = np.array([[0.2, 0.9, 0.5], [0.0, 0.0, 0.0], [0.1, 0.3, 0.2]])
    options = StratifiedOptions(clip=None, keep_rankings=True)
    out = stratified_held_out(
        held, lambda u: scores[u], np.array([0.5, 1.0, 1.0]), metrics, options
    )

    class Result(HeldOutResult):
        model_name = "M"

    result = Result()
    result.keep(out)
    assert result.report is out.report and result.user_index is out.user_ids
    assert result.estimates is out.report.estimates and result.ips is out.report.ips
    assert result.y_true is out.y_true and result.ranking is out.ranking
    assert result.propensity is out.propensity and result.dr == {}
    table = result.rows()
    assert table.to_dict(orient="index") == out.report.rows()
    # user 0 ranks item 1 first (held out: item 0), user 2 item 1 (held out): recall@1 0 and 1/2
    assert table.loc["Closed", "Recall@1"] == pytest.approx(0.25)
    assert result.unreliable_ips() == out.report.unreliable_ips()
    assert str(result) == f"[M]\n{out.report.table()}"
