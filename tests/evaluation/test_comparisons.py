"""Comparisons of a framework's models, against scipy and the core RPP computed directly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from recpack_ope.evaluation.comparisons import check_new_column, rpp_of_models, tied_with_best_of
from recpack_ope.inference.significance import tied_with_best
from recpack_ope.inference.systems import SystemScores
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.rpp import rpp


def test_tied_with_best_of_pairs_users_and_runs_scipys_paired_t_test():
    rng = np.random.default_rng(1)
    a = {u: float(v) for u, v in enumerate(rng.random(30))}
    b = {u: float(v) for u, v in enumerate(rng.random(30) * 0.8)}
    b[99] = 1.0  # a user only b has: not paired
    ties = tied_with_best_of({"a": {"m": a}, "b": {"m": b}}, "m")
    users = sorted(set(a) & set(b))
    x, y = np.array([a[u] for u in users]), np.array([b[u] for u in users])
    assert ties.best == ("a" if x.mean() >= y.mean() else "b")
    other = 1 - ties.names.index(ties.best)
    assert ties.p_value[other] == pytest.approx(stats.ttest_rel(x, y).pvalue, rel=1e-9)
    # The default is Hsu's MCB, which for two models is the paired t-test; the other
    # procedures pass through by name.
    assert ties.test == "mcb" and ties.label == "Hsu's MCB, α=0.05"
    holm = tied_with_best_of({"a": {"m": a}, "b": {"m": b}}, "m", test="t")
    assert holm.test == "t" and holm.correction == "holm"
    assert holm.p_value[other] == pytest.approx(stats.ttest_rel(x, y).pvalue, rel=1e-9)
    with pytest.raises(ValueError, match="test must be one of \\('mcb', 't', 'tukey'\\), got 'z'"):
        tied_with_best_of({"a": {"m": a}, "b": {"m": b}}, "m", test="z")
    with pytest.raises(
        ValueError, match="no per-user results for metric 'n' of a; known: \\['m'\\]"
    ):
        tied_with_best_of({"a": {"m": a}, "b": {"m": b}}, "n")
    with pytest.raises(ValueError, match="of b; known: \\[\\]"):
        tied_with_best_of({"a": {"m": a}, "b": None}, "m")


def test_rpp_of_models_equals_core_rpp_on_the_rows_with_positives():
    rng = np.random.default_rng(2)
    held = (rng.random((8, 10)) < 0.2).astype(float)
    held[3] = 0
    tops = {n: np.argsort(rng.random((8, 10)), axis=1)[:, :4] for n in "abc"}
    rank = {n: (lambda users, t=t: TopK(t[users])) for n, t in tops.items()}
    matrix = rpp_of_models(held, rank, k=4, weighting="dcg")
    users = np.flatnonzero(held.sum(axis=1) > 0)
    expected = rpp(
        held[users],
        TopK(tops["a"][users]),
        TopK(tops["c"][users]),
        weighting="dcg",
        graded=False,
        k=4,
    )
    np.testing.assert_allclose(matrix.pair("a", "c").per_user, expected.per_user, atol=1e-12)
    assert matrix.name == "dcgRPP"
    with pytest.raises(ValueError, match="the experiment has 1, add at least one more"):
        rpp_of_models(held, {"a": rank["a"]})
    called = []
    with pytest.raises(ValueError, match="weighting must be one of"):
        rpp_of_models(held, {n: (lambda u, n=n: called.append(n)) for n in "ab"}, weighting="x")
    assert not called  # refused before any model ranks


def test_check_new_column_refuses_what_would_overwrite():
    assert check_new_column(None, {"a"}) is None and check_new_column("b", {"a"}) == "b"
    with pytest.raises(ValueError, match="column must be a non-empty name or None, got ''"):
        check_new_column("", set())
    with pytest.raises(ValueError, match="column 'a' would overwrite the experiment's own"):
        check_new_column("a", {"a"})


def test_add_win_rates_writes_each_models_mean_win_rate():
    from recpack_ope.evaluation.comparisons import add_win_rates

    held = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    top = {"a": np.array([[0, 1], [2, 0], [0, 2]]), "b": np.array([[1, 2], [0, 2], [1, 0]])}
    rank = {name: (lambda users, t=t: TopK(t[users])) for name, t in top.items()}
    matrix = rpp_of_models(held, rank, k=2)
    averages = [{"NDCG@2": 0.5}, {}]
    assert add_win_rates(matrix, averages, 2) == "RPP@2 win"
    # one held-out item per user: the model ranking it higher wins (+1), else loses or ties
    wins = {name: [] for name in top}
    for u, item in enumerate(held.argmax(axis=1)):
        rank_a, rank_b = (list(top[n][u]).index(item) if item in top[n][u] else 2 for n in "ab")
        wins["a"].append(float(np.sign(rank_b - rank_a)))
        wins["b"].append(float(np.sign(rank_a - rank_b)))
    assert averages[0]["NDCG@2"] == 0.5
    assert averages[0]["RPP@2 win"] == pytest.approx(np.mean(wins["a"]))
    assert averages[1]["RPP@2 win"] == pytest.approx(np.mean(wins["b"]))
    assert add_win_rates(matrix, averages, None, "mine") == "mine" and "mine" in averages[1]


def test_tied_with_best_of_three_models_is_the_core_mcb_on_the_shared_users():
    rng = np.random.default_rng(3)
    values = rng.random((40, 3)) + [0.0, -0.02, -0.3]
    results = {n: {"m": dict(enumerate(values[:, k]))} for k, n in enumerate("abc")}
    results["c"]["m"][40] = 0.0  # a user only c has: not paired
    ties = tied_with_best_of(results, "m")
    core = tied_with_best(SystemScores(("a", "b", "c"), values, np.arange(40), "m"))
    assert ties.names == core.names and ties.tied == core.tied == ("a", "b")
    np.testing.assert_array_equal(ties.p_value, core.p_value)
    np.testing.assert_array_equal(ties.interval, core.interval)
