"""Comparisons of a framework's models, against scipy and the core RPP computed directly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from recpack_ope.evaluation.comparisons import check_new_column, rpp_of_models, tied_with_best_of
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
