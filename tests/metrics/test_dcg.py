"""The DCG family against hand calculations, the paper's Table 1, scikit-learn and brute force."""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import brute_force_dcg, random_case
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import dcg_score, ndcg_score

from recpack_ope import (
    CustomDiscount,
    ExponentialDiscount,
    LogDiscount,
    ReciprocalDiscount,
    TopK,
    dcg,
    ndcg,
    pn_dcg,
    unbiased_dcg,
)
from recpack_ope.propensity.weights import ips_weights


def log_delta(cutoff):
    return lambda r: 1.0 / math.log2(r + 1) if r <= cutoff else 0.0


# --- hand calculations ---------------------------------------------------------------------


def test_hand_calculated_example():
    y = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 0, 0, 0], [0, 2, 0, 1]], dtype=float))
    s = np.array([[0.9, 0.1, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4], [0.2, 0.8, 0.1, 0.9]])
    third = 1 / math.log2(3)
    # user 0: items 0, 2 at ranks 1, 2; user 2: item 3 (gain 1) rank 1, item 1 (gain 2) rank 2
    dcg0, dcg2 = 1 + third, 1 + 2 * third
    idcg0, idcg2 = 1 + third, 2 + third
    r = dcg(y, s, discount=LogDiscount(2))
    assert r.value == pytest.approx((dcg0 + dcg2) / 2, abs=1e-15)
    assert r.user_ids.tolist() == [0, 2]
    assert r.n_excluded_users == 1
    assert r.name == "DCG@2"
    n = ndcg(y, s, discount=LogDiscount(2))
    assert n.per_user == pytest.approx([dcg0 / idcg0, dcg2 / idcg2], abs=1e-15)
    pn = pn_dcg(y, s, discount=LogDiscount(2))
    assert pn.value == pytest.approx((dcg0 + dcg2) / (idcg0 + idcg2), abs=1e-15)
    # cutoff 1: only the top item counts
    assert dcg(y, s, discount=LogDiscount(1)).per_user == pytest.approx([1.0, 1.0])


def test_ips_weights_and_self_normalisation_by_hand():
    y = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 2, 0, 1]], dtype=float))
    s = np.array([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.1, 0.9]])
    p = np.array([0.5, 1.0, 0.25, 1.0])
    third = 1 / math.log2(3)
    # user 0: 1·2·1 + 1·4·third; user 1: 1·1·1 + 2·1·third
    a0, a1 = 2 + 4 * third, 1 + 2 * third
    r = unbiased_dcg(y, s, discount=LogDiscount(2), propensity=p)
    assert r.name == "IPS-DCG@2"
    assert r.per_user == pytest.approx([a0, a1], abs=1e-14)
    clipped = unbiased_dcg(y, s, discount=LogDiscount(2), propensity=p, clip=3.0)
    assert clipped.per_user == pytest.approx([2 + 3 * third, a1], abs=1e-14)
    sn = unbiased_dcg(y, s, discount=LogDiscount(2), propensity=p, self_normalised=True)
    # Σ c·w·δ / Σ w × N/|U| with Σ w = 2 + 4 + 1 + 1 = 8, N = 4, |U| = 2
    assert sn.value == pytest.approx((a0 + a1) / 8 * 4 / 2, abs=1e-14)
    assert sn.name == "SNIPS-DCG@2"


def test_ties_go_to_lower_item_index():
    y = sp.csr_matrix(np.array([[0, 1, 0, 1.0]]))
    s = np.array([[0.5, 0.5, 0.5, 0.5]])
    # ranking 0, 1, 2, 3: relevant items 1 and 3 sit at ranks 2 and 4
    r = dcg(y, s, discount=LogDiscount(2))
    assert r.value == pytest.approx(1 / math.log2(3), abs=1e-15)
    assert dcg(y, s, discount=LogDiscount(4)).value == pytest.approx(
        1 / math.log2(3) + 1 / math.log2(5)
    )
    # ties straddling the cutoff keep the same rule in the partition step
    s2 = np.array([[0.9, 0.5, 0.5, 0.5]])
    assert dcg(y, s2, discount=LogDiscount(2)).value == pytest.approx(1 / math.log2(3))
    assert dcg(y, s2, discount=LogDiscount(3)).value == pytest.approx(1 / math.log2(3))


# --- Jeunen et al. Table 1 and Lemma 5.1 -----------------------------------------------------


TABLE1_REWARDS = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 2.5]]))  # contexts x1, x2; items a1, a2
R = TopK(np.array([[0], [0]]))  # R(x) = a1
R_PRIME = TopK(np.array([[1], [1]]))  # R'(x) = a2


def test_table1_dcg_and_ndcg_disagree_pndcg_agrees():
    top1 = LogDiscount(cutoff=1)
    d, d_prime = dcg(TABLE1_REWARDS, R, discount=top1), dcg(TABLE1_REWARDS, R_PRIME, discount=top1)
    assert d.value == pytest.approx(1.00, abs=1e-15)
    assert d_prime.value == pytest.approx(1.25, abs=1e-15)
    n, n_prime = (
        ndcg(TABLE1_REWARDS, R, discount=top1),
        ndcg(TABLE1_REWARDS, R_PRIME, discount=top1),
    )
    assert n.value == pytest.approx((1 + 1 / 2.5) / 2, abs=1e-15)
    assert n_prime.value == pytest.approx((0 + 1) / 2, abs=1e-15)
    assert d_prime.value > d.value and n.value > n_prime.value  # Lemma 5.2: inverted
    pn, pn_prime = (
        pn_dcg(TABLE1_REWARDS, R, discount=top1),
        pn_dcg(TABLE1_REWARDS, R_PRIME, discount=top1),
    )
    assert pn.value == pytest.approx(2 / 3.5, abs=1e-15)
    assert pn_prime.value == pytest.approx(2.5 / 3.5, abs=1e-15)
    assert pn_prime.value > pn.value  # post-normalisation keeps DCG's order


def test_table1_printed_ndcg_columns():
    """The paper's nDCG columns (1.00 0.29 | 0.00 0.71 | 0.64 0.36) normalise by the sum of all
    gains, i.e. an ideal list that examines both items: CustomDiscount([1, 1])."""
    both = CustomDiscount([1.0, 1.0])
    n, n_prime = (
        ndcg(TABLE1_REWARDS, R, discount=both),
        ndcg(TABLE1_REWARDS, R_PRIME, discount=both),
    )
    assert n.per_user == pytest.approx([1.0, 1 / 3.5], abs=1e-15)
    assert n_prime.per_user == pytest.approx([0.0, 2.5 / 3.5], abs=1e-15)
    assert round(n.value, 2) == 0.64 and round(n_prime.value, 2) == 0.36
    assert dcg(TABLE1_REWARDS, R_PRIME, discount=both).value == pytest.approx(1.25)


@settings(max_examples=200, deadline=None)
@given(
    gains=st.lists(st.integers(0, 4), min_size=2, max_size=8).filter(any),
    seed=st.integers(0, 2**32 - 1),
    cutoff=st.integers(1, 8),
)
def test_lemma_5_1_single_user_orders_agree(gains, seed, cutoff):
    rng = np.random.default_rng(seed)
    y = sp.csr_matrix(np.array([gains], dtype=float))
    a = TopK(rng.permutation(len(gains))[None, :])
    b = TopK(rng.permutation(len(gains))[None, :])
    disc = LogDiscount(cutoff)
    signs = {
        np.sign(round(f(y, a, discount=disc).value - f(y, b, discount=disc).value, 12))
        for f in (dcg, ndcg, pn_dcg)
    }
    assert len(signs) == 1


# --- scikit-learn and brute force -----------------------------------------------------------


@pytest.mark.parametrize("k", [None, 1, 3, 7])
@pytest.mark.parametrize("graded", [False, True])
def test_equals_sklearn_on_tie_free_dense_inputs(k, graded):
    y, s = random_case(np.random.default_rng(7 + (k or 0)), n_users=30, n_items=15, graded=graded)
    dense = y.toarray()
    disc = LogDiscount(k)
    assert dcg(y, s, discount=disc).value == pytest.approx(dcg_score(dense, s, k=k), abs=1e-12)
    assert ndcg(y, s, discount=disc).value == pytest.approx(ndcg_score(dense, s, k=k), abs=1e-12)


DISCOUNTS = {
    "log@3": (LogDiscount(3), log_delta(3)),
    "log": (LogDiscount(), log_delta(math.inf)),
    "rbp0.7": (ExponentialDiscount(0.7), lambda r: 0.7 ** (r - 1)),
    "rbp0.5@4": (ExponentialDiscount(0.5, cutoff=4), lambda r: 0.5 ** (r - 1) if r <= 4 else 0.0),
    "reciprocal@5": (ReciprocalDiscount(5), lambda r: 1 / r if r <= 5 else 0.0),
    "custom": (
        CustomDiscount([1.0, 0.6, 0.7, 0.2]),
        lambda r: [1.0, 0.6, 0.7, 0.2][r - 1] if r <= 4 else 0.0,
    ),
}


@pytest.mark.parametrize("name", sorted(DISCOUNTS))
@pytest.mark.parametrize("propensity_kind", ["none", "item", "user_item"])
def test_matches_brute_force(name, propensity_kind):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{propensity_kind}".encode()))
    y, s = random_case(rng, n_users=25, n_items=11, graded=True)
    s[rng.random(s.shape) < 0.15] = -np.inf  # masked (e.g. seen in training) items
    disc, delta = DISCOUNTS[name]
    p = None
    if propensity_kind == "item":
        p = rng.uniform(0.05, 1.0, size=11)
    elif propensity_kind == "user_item":
        p = sp.csr_matrix(rng.uniform(0.05, 1.0, size=(25, 11)))
    clip = 6.0
    ref = brute_force_dcg(y, s, delta, p, clip=clip)
    users = sorted(ref)
    kw = dict(discount=disc, propensity=p, clip=clip)
    assert dcg(y, s, **kw).per_user == pytest.approx([ref[u][0] for u in users], abs=1e-12)
    assert ndcg(y, s, **kw).per_user == pytest.approx(
        [ref[u][0] / ref[u][1] for u in users], abs=1e-12
    )
    total_dcg, total_idcg = (sum(ref[u][j] for u in users) for j in (0, 1))
    assert pn_dcg(y, s, **kw).value == pytest.approx(total_dcg / total_idcg, abs=1e-12)
    sn = dcg(y, s, self_normalised=True, **kw).value
    total_w = sum(ref[u][2] for u in users)
    assert sn == pytest.approx(total_dcg / total_w * y.nnz / len(users), abs=1e-12)


def test_sparse_dense_topk_and_chunking_agree():
    rng = np.random.default_rng(3)
    y, s = random_case(rng, n_users=40, n_items=20)
    s[rng.random(s.shape) < 0.3] = -np.inf
    disc = LogDiscount(6)
    expected = dcg(y, s, discount=disc).per_user
    # sparse: unstored entries are not candidates, exactly like -inf in the dense matrix
    sparse = sp.csr_matrix(np.where(np.isinf(s), 0.0, s + 1.0))
    assert dcg(y, sparse, discount=disc).per_user == pytest.approx(expected, abs=1e-15)
    order = np.argsort(-s, axis=1, kind="stable")[:, :6]
    ranked = np.where(np.take_along_axis(s, order, axis=1) > -np.inf, order, -1)
    # TopK padding (-1) must stay at the end of a row
    ranked = np.array([np.concatenate([r[r >= 0], r[r < 0]]) for r in ranked])
    assert dcg(y, TopK(ranked), discount=disc).per_user == pytest.approx(expected, abs=1e-15)
    for chunk in (1, 7, 1000):
        assert dcg(y, s, discount=disc, chunk_users=chunk).per_user == pytest.approx(
            expected, abs=1e-15
        )
        assert ndcg(y, sparse, discount=disc, chunk_users=chunk).value == pytest.approx(
            ndcg(y, s, discount=disc).value, abs=1e-15
        )


def test_caller_matrices_are_not_modified():
    y = sp.csr_matrix((np.array([1.0, 1.0]), np.array([2, 0]), np.array([0, 2, 2])), shape=(2, 3))
    s = sp.csr_matrix(
        (np.array([0.1, 0.9, 0.5]), np.array([2, 0, 1]), np.array([0, 3, 3])), shape=(2, 3)
    )
    assert not s.has_sorted_indices
    before = (s.data.copy(), s.indices.copy(), y.data.copy(), y.indices.copy())
    # sorted, user 0 ranks items 0, 1, 2; relevant items 0 and 2 sit at ranks 1 and 3
    assert dcg(y, s, discount=LogDiscount(3)).value == pytest.approx(1 + 0.5)
    after = (s.data, s.indices, y.data, y.indices)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_explicit_zero_rewards_are_not_interactions():
    y = sp.csr_matrix((np.array([0.0, 1.0]), (np.array([0, 1]), np.array([0, 1]))), shape=(2, 2))
    r = dcg(y, np.array([[0.9, 0.1], [0.1, 0.9]]), discount=LogDiscount(2))
    assert r.user_ids.tolist() == [1] and r.n_excluded_users == 1 and r.value == 1.0


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cutoff=st.integers(1, 10))
def test_clip_above_every_weight_equals_no_clipping(seed, cutoff):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng)
    p = rng.uniform(1e-3, 1.0, size=y.shape[1])
    kw = dict(discount=LogDiscount(cutoff), propensity=p)
    assert np.array_equal(dcg(y, s, clip=1e3, **kw).per_user, dcg(y, s, **kw).per_user)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cutoff=st.integers(1, 10), graded=st.booleans())
def test_pndcg_at_most_one_without_propensities(seed, cutoff, graded):
    y, s = random_case(np.random.default_rng(seed), graded=graded)
    assert 0.0 <= pn_dcg(y, s, discount=LogDiscount(cutoff)).value <= 1.0 + 1e-12


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.floats(1e-3, 1.0))
def test_self_normalised_invariant_to_rescaling_propensities(seed, scale):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng)
    p = rng.uniform(0.01, 1.0, size=y.shape[1])
    kw = dict(discount=LogDiscount(4), self_normalised=True)
    assert dcg(y, s, propensity=p * scale, **kw).value == pytest.approx(
        dcg(y, s, propensity=p, **kw).value, rel=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_per_user_values_permute_with_users(seed):
    rng = np.random.default_rng(seed)
    y, s = random_case(rng, n_users=15)
    perm = rng.permutation(15)
    for f in (dcg, ndcg, pn_dcg):
        base = f(y, s, discount=LogDiscount(3))
        moved = f(y[perm], s[perm], discount=LogDiscount(3))
        # row j of the permuted data is user perm[j]; pnDCG's per-user values divide by a mean
        # over users, whose summation order follows the permutation (last-bit differences)
        np.testing.assert_allclose(moved.per_user, base.per_user[perm], rtol=1e-13, atol=0)
        assert moved.value == pytest.approx(base.value, rel=1e-12)


# --- bad input ------------------------------------------------------------------------------


@pytest.fixture
def small():
    y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1.0, 0]]))
    s = np.array([[0.3, 0.2, 0.1], [0.1, 0.2, 0.3]])
    return y, s


def test_shape_mismatch(small):
    y, s = small
    with pytest.raises(ValueError, match=r"shape mismatch.*\(2, 2\).*\(2, 3\)"):
        dcg(y, s[:, :2], discount=LogDiscount(2))
    with pytest.raises(ValueError, match=r"shape mismatch.*\(3, 3\)"):
        dcg(y, sp.csr_matrix(np.ones((3, 3))), discount=LogDiscount(2))
    with pytest.raises(ValueError, match="TopK has 1 users but y_true has 2"):
        dcg(y, TopK(np.array([[0, 1]])), discount=LogDiscount(2))


def test_nan_scores(small):
    y, s = small
    s[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"y_score is NaN at \(user 1, item 2\)"):
        dcg(y, s, discount=LogDiscount(2))
    with pytest.raises(ValueError, match=r"y_score is NaN at \(user 1, item 2\)"):
        dcg(y, sp.csr_matrix(s), discount=LogDiscount(2))


@pytest.mark.parametrize("bad", [0.0, 1.5, np.nan, -0.2])
def test_propensity_outside_unit_interval(small, bad):
    y, s = small
    p = np.array([0.5, bad, 1.0])
    with pytest.raises(ValueError, match=r"propensity .* of item 1 lies outside \(0, 1\]"):
        dcg(y, s, discount=LogDiscount(2), propensity=p)


def test_propensity_shape_and_missing_user_item_entries(small):
    y, s = small
    with pytest.raises(ValueError, match=r"propensity has shape \(2,\) but y_true has 3 items"):
        dcg(y, s, discount=LogDiscount(2), propensity=np.array([0.5, 0.5]))
    p = sp.csr_matrix(np.array([[0.5, 0, 0.5], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"propensity 0.0 of held-out \(user 1, item 1\)"):
        dcg(y, s, discount=LogDiscount(2), propensity=p)
    with pytest.raises(ValueError, match=r"propensity matrix has shape \(1, 3\)"):
        dcg(y, s, discount=LogDiscount(2), propensity=sp.csr_matrix(np.ones((1, 3))))


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_negative_or_non_finite_rewards(small, bad):
    y, s = small
    y = y.tolil()
    y[1, 1] = bad
    with pytest.raises(ValueError, match=r"y_true has reward .* at \(user 1, item 1\)"):
        dcg(y.tocsr(), s, discount=LogDiscount(2))


def test_unknown_items_in_rankings(small):
    y, _ = small
    with pytest.raises(ValueError, match="unknown item 7 for user 1 at rank 2"):
        dcg(y, TopK(np.array([[0, 1], [2, 7]])), discount=LogDiscount(2))
    with pytest.raises(ValueError, match="lists item 2 more than once"):
        TopK(np.array([[2, 2], [0, 1]]))
    with pytest.raises(ValueError, match="item after -1 padding"):
        TopK(np.array([[-1, 2], [0, 1]]))
    with pytest.raises(ValueError, match="2-D integer array"):
        TopK(np.array([[0.5, 1.0]]))


def test_invalid_options(small):
    y, s = small
    p = np.full(y.shape[1], 0.5)
    for bad in (0, -2.0, np.nan, np.inf, "none", True, [3.0]):
        with pytest.raises(
            ValueError,
            match=r'clip must be a finite number > 0, None for no clipping or "auto", got '
            + re.escape(repr(bad)),
        ):
            dcg(y, s, discount=LogDiscount(2), propensity=p, clip=bad)
    with pytest.raises(
        ValueError, match=r"clip must be a finite number > 0, None for no clipping, got inf"
    ):
        ips_weights(p, sp.csr_matrix(y), clip=np.inf)
    with pytest.raises(
        ValueError, match='clip="auto" selects the clipping of IPS weights; give a propensity'
    ):
        dcg(y, s, discount=LogDiscount(2), clip="auto")
    with pytest.raises(ValueError, match="normalise must be one of"):
        dcg(y, s, discount=LogDiscount(2), normalise="user")
    with pytest.raises(ValueError, match="self_normalised applies to unnormalised DCG only"):
        dcg(y, s, discount=LogDiscount(2), normalise="post", self_normalised=True)
    with pytest.raises(ValueError, match="chunk_users must be a positive integer or None, got 0"):
        dcg(y, s, discount=LogDiscount(2), chunk_users=0)
    with pytest.raises(TypeError, match="discount must be a Discount model"):
        dcg(y, s, discount=10)
    with pytest.raises(ValueError, match="no non-zero held-out rewards"):
        dcg(sp.csr_matrix((2, 3)), s, discount=LogDiscount(2))
    with pytest.raises(ValueError, match="y_score must be a users×items score matrix"):
        dcg(y, [1, 2, 3], discount=LogDiscount(2))
