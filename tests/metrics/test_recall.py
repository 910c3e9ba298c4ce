"""Recall@k and IPS recall against brute force and hand calculations."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import S, Y, random_case

from recpack_ope.metrics.dcg import (
    ndcg,
)
from recpack_ope.metrics.recall import ips_recall, recall
from recpack_ope.propensity.discount import (
    LogDiscount,
)


def test_cutoffs_deeper_than_the_catalogue_cost_nothing_and_change_nothing():
    start = time.perf_counter()
    deep = recall(Y, S, k=10**12)
    assert deep.value == recall(Y, S, k=4).value == 1.0
    assert (
        ndcg(Y, S, discount=LogDiscount(10**12)).value == ndcg(Y, S, discount=LogDiscount()).value
    )
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: recall(Y, S, k=2.5), "k must be a positive integer, got 2.5"),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def brute_recall(y, scores, k):
    y = sp.csr_matrix(y).toarray()
    out = {}
    for u in range(y.shape[0]):
        if not y[u].any():
            continue
        top = sorted(range(y.shape[1]), key=lambda i: -scores[u, i])[:k]
        out[u] = sum(y[u, i] for i in top) / y[u].sum()
    return out


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("k", [1, 3, 20])
def test_recall_equals_brute_force(graded, k):
    y, scores = random_case(np.random.default_rng(k), graded=graded)
    expected = brute_recall(y, scores, k)
    result = recall(y, scores, k=k)
    assert result.user_ids.tolist() == sorted(expected)
    np.testing.assert_allclose(result.per_user, [expected[u] for u in sorted(expected)], atol=1e-12)
    assert result.name == f"Recall@{k}"


def test_recall_by_hand_and_excluded_users():
    y = sp.csr_matrix(np.array([[1, 0, 1, 1], [0, 0, 0, 0], [0, 2, 0, 0]], dtype=float))
    scores = np.array([[4.0, 3, 2, 1], [1, 2, 3, 4], [1, 2, 3, 4]])
    # user 0: top-2 = items 0, 1 → 1 of 3 relevant; user 2: top-2 = items 3, 2 → 0 of 1.
    result = recall(y, scores, k=2)
    np.testing.assert_allclose(result.per_user, [1 / 3, 0.0])
    assert result.n_excluded_users == 1
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        recall(y, scores, k=0)


# --- plain and IPS-weighted recall are separate functions -----------------------------------


@pytest.mark.parametrize("given", [{}, {"propensity": None}])
def test_ips_recall_without_propensity_names_recall(given):
    with pytest.raises(ValueError, match=r"^ips_recall\b.*propensity.*\brecall\b"):
        ips_recall(Y, S, k=2, **given)


def test_propensities_of_one_give_plain_recall_exactly():
    rng = np.random.default_rng(23)
    y, s = random_case(rng, n_users=30, n_items=12, graded=True)
    for ones in (np.ones(12), sp.csr_matrix(np.ones((30, 12)))):
        ips = ips_recall(y, s, k=4, propensity=ones)
        base = recall(y, s, k=4)
        np.testing.assert_array_equal(ips.per_user, base.per_user)
        assert ips.value == base.value


def test_ips_recall_by_hand():
    # Top 2 under S: user 0 items 0, 2; user 1 items 1, 3; user 2 items 2, 0. w = 1/p.
    p = np.array([0.5, 0.25, 1.0, 0.8])
    w = 1 / p
    expected = [
        (w[0] + w[2]) / (w[0] + w[2]),
        w[1] / w[1],
        w[0] / (w[0] + w[1] + w[3]),
    ]
    result = ips_recall(Y, S, k=2, propensity=p)
    np.testing.assert_allclose(result.per_user, expected, rtol=1e-14)


def test_plain_recall_takes_no_propensity():
    with pytest.raises(TypeError, match="propensity"):
        recall(Y, S, k=2, propensity=np.full(4, 0.5))


@pytest.mark.parametrize(("name", "weighted"), [("recall", False), ("ips_recall", True)])
def test_recall_has_no_value_over_all_users_and_says_why(name, weighted):
    # User 1 has no held-out reward: nothing to recall, 0 / 0.
    y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 0, 0]]))
    s = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    call = ips_recall if weighted else recall
    kw = {"propensity": np.array([0.5, 1.0, 0.25])} if weighted else {}
    with pytest.raises(
        ValueError,
        match=rf"population 'all' needs a value for every user, but {name} divides each user's "
        r"DCG by a per-user total \(the ideal DCG; for recall the held-out gain\)",
    ):
        call(y, s, k=1, population="all", **kw)
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'each'"):
        call(y, s, k=1, population="each", **kw)
    # The observed users: user 0 alone; with IPS gains 2 (item 0, in the top 1) and 4.
    assert call(y, s, k=1, population="observed", **kw).value == pytest.approx(
        2 / 6 if weighted else 1 / 2
    )
