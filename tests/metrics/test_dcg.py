"""The DCG family against hand calculations, the paper's Table 1, scikit-learn and brute force."""

from __future__ import annotations

import math
import re
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import (
    D,
    S,
    Y,
    brute_force_dcg,
    corrupt,
    delta,
    propensity_with_duplicate,
    random_case,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import dcg_score, ndcg_score

from recpack_ope._validation import as_csr
from recpack_ope.evaluation.inputs import EstimatorInputs
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.metrics.dcg import (
    POPULATIONS,
    _dcg,
    dcg,
    ideal_dcg,
    ips_dcg,
    ips_ndcg,
    ips_pn_dcg,
    ndcg,
    pn_dcg,
    prepare_held_out,
    snips_dcg,
)
from recpack_ope.metrics.doubly_robust import dr_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import recall
from recpack_ope.metrics.rpp import rpp
from recpack_ope.propensity.discount import (
    CustomDiscount,
    ExponentialDiscount,
    LogDiscount,
    ReciprocalDiscount,
)
from recpack_ope.propensity.weights import ips_weights
from recpack_ope.reward.models import RewardMatrix
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld


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
    r = ips_dcg(y, s, discount=LogDiscount(2), propensity=p)
    assert r.name == "IPS-DCG@2"
    assert r.per_user == pytest.approx([a0, a1], abs=1e-14)
    clipped = ips_dcg(y, s, discount=LogDiscount(2), propensity=p, clip=3.0)
    assert clipped.per_user == pytest.approx([2 + 3 * third, a1], abs=1e-14)
    sn = snips_dcg(y, s, discount=LogDiscount(2), propensity=p)
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
    if p is None:  # the plain estimators (no weight reaches the clip)
        plain, normalised, post = dcg, ndcg, pn_dcg
        kw = dict(discount=disc)
        sn = snips_dcg(y, s, discount=disc, propensity=np.ones(11), clip=clip).value
    else:
        plain, normalised, post = ips_dcg, ips_ndcg, ips_pn_dcg
        kw = dict(discount=disc, propensity=p, clip=clip)
        sn = snips_dcg(y, s, **kw).value
    assert plain(y, s, **kw).per_user == pytest.approx([ref[u][0] for u in users], abs=1e-12)
    assert normalised(y, s, **kw).per_user == pytest.approx(
        [ref[u][0] / ref[u][1] for u in users], abs=1e-12
    )
    total_dcg, total_idcg = (sum(ref[u][j] for u in users) for j in (0, 1))
    assert post(y, s, **kw).value == pytest.approx(total_dcg / total_idcg, abs=1e-12)
    total_w = sum(ref[u][2] for u in users)
    assert sn == pytest.approx(total_dcg / total_w * y.nnz / len(users), abs=1e-12)


@pytest.mark.parametrize("population", POPULATIONS)
def test_without_propensities_every_weight_is_one(population):
    # Over "observed" one read-only 1 stands for every weight (none is stored per entry);
    # over "all" the placeholder of the user without rewards weighs 0. The estimates match
    # brute force.
    rng = np.random.default_rng(17)
    y, s = random_case(rng, n_users=15, n_items=10, graded=True)
    y = sp.csr_matrix(y.toarray() * (np.arange(15) != 4)[:, None])
    held = prepare_held_out(
        y, s, discount=D, propensity=None, impressions=None, chunk_users=4, population=population
    )
    placeholder = held.pattern.indptr[4] if population == "all" else None
    expected_raw = np.ones(held.reward.size)
    if placeholder is None:
        assert held.raw.strides == (0,) and not held.raw.flags.writeable
    else:
        expected_raw[placeholder] = 0.0
    np.testing.assert_array_equal(held.raw, expected_raw)
    ref = brute_force_dcg(y, s, delta)
    users = sorted(ref)
    per_user = dcg(y, s, discount=D, chunk_users=4, population=population).per_user
    expected = [ref[u][0] if u in ref else 0.0 for u in range(15)]
    if placeholder is None:
        del expected[4]
    assert per_user == pytest.approx(expected)
    total_gain = [sum(sp.csr_matrix(y).getrow(u).data) for u in users]
    got = _dcg(y, s, discount=D, chunk_users=4, normalise="total").per_user
    assert got == pytest.approx([ref[u][0] / g for u, g in zip(users, total_gain, strict=True)])
    got = ndcg(y, s, discount=D, chunk_users=4).per_user
    assert got == pytest.approx([ref[u][0] / ref[u][1] for u in users])


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
    unclipped = ips_dcg(y, s, clip=None, **kw).per_user
    assert np.array_equal(ips_dcg(y, s, clip=1e3, **kw).per_user, unclipped)


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
    kw = dict(discount=LogDiscount(4), clip=None)  # the papers' unclipped estimator
    assert snips_dcg(y, s, propensity=p * scale, **kw).value == pytest.approx(
        snips_dcg(y, s, propensity=p, **kw).value, rel=1e-12
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
        ips_dcg(y, s, discount=LogDiscount(2), propensity=p)


def test_propensity_shape_and_missing_user_item_entries(small):
    y, s = small
    with pytest.raises(ValueError, match=r"propensity has shape \(2,\) but y_true has 3 items"):
        ips_dcg(y, s, discount=LogDiscount(2), propensity=np.array([0.5, 0.5]))
    p = sp.csr_matrix(np.array([[0.5, 0, 0.5], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"propensity 0.0 of held-out \(user 1, item 1\)"):
        ips_dcg(y, s, discount=LogDiscount(2), propensity=p)
    with pytest.raises(ValueError, match=r"propensity matrix has shape \(1, 3\)"):
        ips_dcg(y, s, discount=LogDiscount(2), propensity=sp.csr_matrix(np.ones((1, 3))))


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
            match=r'clip must be a finite number >= 1, None for no clipping or "auto", got '
            + re.escape(repr(bad)),
        ):
            ips_dcg(y, s, discount=LogDiscount(2), propensity=p, clip=bad)
    with pytest.raises(ValueError, match=r"clip.*got inf"):
        ips_weights(p, sp.csr_matrix(y), clip=np.inf)
    with pytest.raises(
        ValueError, match='clip="auto" selects the clipping of IPS weights; give a propensity'
    ):
        _dcg(y, s, discount=LogDiscount(2), clip="auto")
    with pytest.raises(ValueError, match="normalise must be one of"):
        _dcg(y, s, discount=LogDiscount(2), normalise="user")
    with pytest.raises(ValueError, match="self_normalised applies to unnormalised"):
        _dcg(y, s, discount=LogDiscount(2), normalise="post", self_normalised=True)
    with pytest.raises(ValueError, match="chunk_users must be a positive integer or None, got 0"):
        dcg(y, s, discount=LogDiscount(2), chunk_users=0)
    with pytest.raises(TypeError, match="discount must be a Discount model"):
        dcg(y, s, discount=10)
    with pytest.raises(ValueError, match="no non-zero held-out rewards"):
        dcg(sp.csr_matrix((2, 3)), s, discount=LogDiscount(2))
    with pytest.raises(ValueError, match="y_score must be a users×items score matrix"):
        dcg(y, [1, 2, 3], discount=LogDiscount(2))


@pytest.mark.parametrize("bad", [0.5, 0.999, 1e-9, np.float32(0.25), 1 - 2**-52])
def test_clip_below_one_is_refused_as_a_rescaling(small, bad):
    y, s = small
    p = np.array([0.5, 1.0, 0.25])
    message = rf"^clip = {re.escape(repr(float(bad)))} is below 1: inverse propensities 1/p are"
    for estimator in (ips_dcg, snips_dcg, ips_ndcg, ips_pn_dcg):
        with pytest.raises(ValueError, match=message + r".*None for no clipping or \"auto\"$"):
            estimator(y, s, discount=LogDiscount(2), propensity=p, clip=bad)
    with pytest.raises(ValueError, match=message + r".*None for no clipping$"):
        ips_weights(p, y, clip=bad)
    with pytest.raises(ValueError, match=message):
        EstimatorInputs(propensity=p, clip=bad)


@pytest.mark.parametrize("form", [np.zeros, sp.csr_matrix, "stored zeros"])
# the weighted ones warn that no interaction is evaluated, which is so
@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_all_zero_rewards_over_every_user_give_exactly_zero(form):
    shape, p = (4, 5), np.array([0.5, 0.25, 1.0, 0.125, 0.5])
    if form == "stored zeros":
        zeros = sp.csr_matrix((np.zeros(3), ([0, 1, 3], [2, 0, 4])), shape=shape)
    else:
        zeros = form(shape)
    s = np.random.default_rng(3).random(shape)
    disc = LogDiscount(3)
    # every user counts with population "all" and has DCG_u = Σ 0 · w · δ = 0: exactly 0,
    # with no spread, whatever the weights (reward model ρ̂ = 0.1 everywhere: DR is unclipped
    # IPS plus what clipping removed, nothing at m = 10 ≥ 1/p)
    estimates = [
        dcg(zeros, s, discount=disc, population="all"),
        ips_dcg(zeros, s, discount=disc, propensity=p, population="all"),
        ips_dcg(zeros, s, discount=disc, propensity=p, population="all", clip=None),
        ips_dcg(zeros, s, discount=disc, propensity=p, population="all", clip="auto"),
        dr_dcg(
            zeros,
            s,
            discount=disc,
            propensity=p,
            reward_model=RewardMatrix(np.full(shape, 0.1)),
            population="all",
            clip=10.0,
        ),
    ]
    for estimate in estimates:
        assert estimate.value == 0.0 and estimate.per_user.tolist() == [0.0] * 4
        assert estimate.confidence_interval() == (0.0, 0.0)
        assert estimate.n_excluded_users == 0
    # the ratios are 0/0: refused, saying so
    for estimator, name in ((pn_dcg, "pnDCG"), (ips_pn_dcg, "IPS-pnDCG"), (snips_dcg, "SNIPS")):
        kwargs = {} if estimator is pn_dcg else {"propensity": p}
        with pytest.raises(ValueError, match=rf"every held-out reward of y_true is 0, so {name}"):
            estimator(zeros, s, discount=disc, population="all", **kwargs)
    with pytest.raises(ValueError, match=r"population 'all' needs a value for every user, but nd"):
        ndcg(zeros, s, discount=disc, population="all")
    for estimator, name, kwargs in (
        (ndcg, "ndcg", {"discount": disc}),
        (ips_ndcg, "ips_ndcg", {"discount": disc, "propensity": p}),
        (recall, "recall", {"k": 2}),
    ):
        with pytest.raises(
            ValueError,
            match=rf"no user can be evaluated; {name} divides each user's DCG by a per-user "
            r"total \(the ideal DCG; for recall the held-out gain\) that is 0",
        ):
            estimator(zeros, s, **kwargs)
    # observed users: none; plain DCG keeps its message
    with pytest.raises(ValueError, match=r"^y_true has no non-zero held-out rewards: no user can"):
        dcg(zeros, s, discount=disc)
    with pytest.raises(ValueError, match=r"^y_true has no rows: no user can be evaluated$"):
        dcg(np.zeros((0, 5)), np.zeros((0, 5)), discount=disc, population="all")


@pytest.mark.parametrize("clip", [None, "auto"])
@pytest.mark.parametrize("kind", ["vector", "matrix"])
def test_a_propensity_whose_inverse_overflows_is_named_without_numpy_warnings(clip, kind):
    y = np.array([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1]])
    s = np.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    p = np.array([0.5, 1.0, 1e-320, 0.25])
    given = p if kind == "vector" else sp.csr_matrix(np.tile(p, (3, 1)))
    disc = LogDiscount(3)
    message = (
        r"^the inverse of propensity 1e-320 of item 2 \(user 0\) is inf, as 1/p is for a "
        r"propensity below about 5.6e-309: the unclipped estimate"
        + (r", clip=\"auto\"'s first candidate," if clip == "auto" else "")
        + r" is infinite; floor the propensities or pass a finite clip=$"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's overflow warning among them
        warnings.simplefilter("ignore", ReliabilityWarning)
        for estimator in (ips_dcg, snips_dcg, ips_ndcg, ips_pn_dcg):
            with pytest.raises(ValueError, match=message):
                estimator(y, s, discount=disc, propensity=given, clip=clip)
        with pytest.raises(ValueError, match=message):
            dr_dcg(
                y,
                s,
                discount=disc,
                propensity=given,
                reward_model=RewardMatrix(np.full(y.shape, 0.1)),
                clip=clip,
            )
        # a finite clip caps the weight: by hand, user 0 ranks items 0, 1, 2 (w 2, -, m = 8),
        # user 1 ranks 3, 2, 1 (w 4 at rank 1, item 1 at rank 3), user 2 ranks 0 (w 2, rank 1)
        clipped = ips_dcg(y, s, discount=disc, propensity=given, clip=8.0)
        assert clipped.per_user.tolist() == [2 + 8 / 2, 4 + 1 / 2, 2.0]


def test_clip_at_one_is_the_unweighted_metric(small):
    y, s = small
    # every 1/p >= 1 becomes 1: IPS-DCG clipped at 1 is plain DCG, per user and exactly
    clipped = ips_dcg(y, s, discount=LogDiscount(2), propensity=np.array([0.5, 1.0, 0.25]), clip=1)
    assert clipped.per_user.tolist() == dcg(y, s, discount=LogDiscount(2)).per_user.tolist()
    # by hand: user 0 has item 0 at rank 1 and item 2 at rank 3 (beyond k = 2); user 1 item 1
    # at rank 2
    assert clipped.per_user.tolist() == [1.0, 1 / math.log2(3)]


CORRUPTIONS = {
    "column out of range": r"stored entry 0 \(row 0\) has column index 100, outside 0\.\.3",
    "negative column": r"stored entry 1 \(row 0\) has column index -3, outside 0\.\.3",
    "indptr decreases": r"indptr decreases at row 1 \(5 → 1\)",
    "indptr starts at 1": r"indptr starts at 1, not 0",
    "indptr ends early": r"indptr ends at 3 stored entries but indices has 6",
    "indptr too short": r"indptr has 3 entries, expected one per row plus one \(4\)",
    "data shorter than indices": r"indices has 6 and data has shape \(5,\)",
    "float indices": r"indices array must be 1-D integers, got dtype float64",
    "CSC row out of range": r"stored entry 2 \(column 1\) has row index 7, outside 0\.\.2",
    "COO row out of range": r"stored entry 0 has row index 3, outside 0\.\.2",
    "COO column out of range": r"stored entry 5 \(row 2\) has column index 4, outside 0\.\.3",
    "COO lengths differ": r"row, col and data must have one entry per stored value, got 6, 6 and 4",
    "LIL column out of range": r"index 9",
}


ENTRY_POINTS = {
    "dcg y_true": ("y_true", lambda m: dcg(m, S, discount=D)),
    "ndcg y_score": ("y_score", lambda m: ndcg(Y, m, discount=D)),
    "dcg impressions": (
        "impressions",
        lambda m: ips_dcg(Y, S, discount=D, propensity=np.full(4, 0.5), impressions=m),
    ),
    "rpp y_true": ("y_true", lambda m: rpp(m, S, S[::-1])),
    "TopK.from_scores": ("y_score", lambda m: TopK.from_scores(m, 2)),
    "ideal_dcg gains": ("gains", lambda m: ideal_dcg(m, D)),
    "as_csr": ("x", lambda m: as_csr(m, "x")),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_sparse_structure_is_refused_before_compiled_code(kind, entry):
    name, call = ENTRY_POINTS[entry]
    with pytest.raises(ValueError, match=rf"{name} is a corrupt .*{CORRUPTIONS[kind]}"):
        call(corrupt(kind))


def test_huge_shape_whose_keys_overflow_int64_is_refused():
    m = sp.coo_matrix((2**32, 2**32))
    with pytest.raises(ValueError, match=r"n_users × n_items must stay below 2\*\*63"):
        as_csr(m, "y_true")


def test_dataframe_scores_and_rewards_are_aligned_by_label():
    expected = dcg(Y, S, discount=D).per_user
    perm = np.array([2, 0, 3, 1])
    scores = pd.DataFrame(S[:, perm], columns=perm)  # column label = item index
    rewards = pd.DataFrame(Y[::-1], index=[2, 1, 0])  # index label = user index
    np.testing.assert_array_equal(dcg(Y, scores, discount=D).per_user, expected)
    np.testing.assert_array_equal(dcg(rewards, S, discount=D).per_user, expected)
    # Used by position the permuted columns would give another value.
    assert not np.array_equal(dcg(Y, S[:, perm], discount=D).per_user, expected)


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (
            pd.DataFrame(S, columns=list("abcd")),
            r"column labels must be the item indices 0\.\.3: label 'a'",
        ),
        (pd.DataFrame(S, columns=[0, 1, 1, 2]), r"label 1 appears twice"),
        (pd.DataFrame(S, columns=[0, 1, 2, 9]), r"label 9 is outside 0\.\.3"),
        (
            pd.DataFrame(S, index=[5, 6, 7]),
            r"index labels must be the user indices 0\.\.2: label 5",
        ),
    ],
)
def test_dataframe_labels_that_are_not_indices_are_refused(frame, match):
    with pytest.raises(ValueError, match=match):
        dcg(Y, frame, discount=D)


def test_integer_rewards_beyond_2_53_are_refused_with_position():
    y = np.zeros((2, 3), dtype=np.int64)
    y[1, 2] = 2**53 + 1
    with pytest.raises(
        ValueError, match=r"y_true has integer 9007199254740993 at \(user 1, item 2\)"
    ):
        dcg(y, np.ones((2, 3)), discount=D)
    with pytest.raises(ValueError, match=r"at \(user 1, item 2\)"):
        rpp(sp.coo_matrix(y), np.ones((2, 3)), np.ones((2, 3)))


def test_pandas_missing_values_are_refused_with_labels():
    rewards = pd.DataFrame(Y).astype("Int64")
    rewards.iloc[1, 2] = pd.NA
    with pytest.raises(ValueError, match=r"y_true has a missing value at \(index 1, column 2\)"):
        dcg(rewards, S, discount=D)
    scores = pd.DataFrame(S).astype("Float64")
    scores.iloc[2, 0] = pd.NA
    with pytest.raises(ValueError, match=r"y_score has a missing value at \(index 2, column 0\)"):
        ndcg(Y, scores, discount=D)


def test_small_integer_duplicates_are_summed_without_overflow():
    # 200 clicks on (user 0, item 0) stored as int8 ones: int8 sums would wrap to -56.
    rows = np.zeros(200, dtype=np.int64)
    clicks = sp.coo_matrix((np.ones(200, dtype=np.int8), (rows, rows)), shape=(1, 4))
    assert as_csr(clicks, "y_true").toarray().tolist() == [[200.0, 0.0, 0.0, 0.0]]
    result = dcg(clicks, S[:1], discount=D)
    assert result.per_user[0] == 200 * delta(1)


def test_non_numeric_object_values_are_refused_with_position():
    y = np.array([[1, 0], [0, "x"]], dtype=object)
    with pytest.raises(
        TypeError, match=r"y_true has non-numeric value 'x' \(text\) at \(user 1, item 1\)"
    ):
        dcg(y, np.ones((2, 2)), discount=D)
    with pytest.raises(TypeError, match=r"y_score must hold real numbers, got dtype <U1"):
        dcg(Y, [["a"] * 4] * 3, discount=D)


def test_text_that_reads_as_numbers_is_refused_not_parsed():
    # Scores as strings ("0.9") would rank as text sorts, not as numbers: never parsed.
    text = S.astype(str).astype(object)
    with pytest.raises(
        TypeError,
        match=rf"y_score has non-numeric value '{S[0, 0]}' \(text\) at \(user 0, item 0\); "
        "y_score has dtype object",
    ):
        dcg(Y, text, discount=D)
    with pytest.raises(TypeError, match=r"y_score has non-numeric value .* \(text\) at \(user 0"):
        dcg(Y, pd.DataFrame(S.astype(str)), discount=D)
    with pytest.raises(TypeError, match=r"y_true must hold real numbers, got dtype <U"):
        dcg(Y.astype(str), S, discount=D)
    with pytest.raises(TypeError, match=r"propensity must hold real numbers, got dtype <U"):
        ips_dcg(Y, S, discount=D, propensity=np.full(4, "0.5"))


def test_bool_clicks_count_as_0_and_1():
    clicks = np.array([[True, False, True], [False, True, False]])
    scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    # user 0: items 0 and 2 at ranks 1 and 3 (past the cutoff 2); user 1: item 1 at rank 1
    assert dcg(clicks, scores, discount=LogDiscount(2)).per_user.tolist() == [1.0, 1.0]
    # bool scores rank True above False, ties to the lower index: user 0 ranks 0, 1, 2
    shown = np.array([[True, True, False], [False, True, False]])
    assert dcg(clicks, shown, discount=LogDiscount(3)).per_user == pytest.approx(
        [1 + 1 / math.log2(4), 1.0], abs=1e-15
    )


@pytest.mark.parametrize("estimator", [ips_dcg, snips_dcg, ips_ndcg, ips_pn_dcg])
def test_dense_users_by_items_propensity_is_refused_saying_what_is_accepted(estimator):
    with pytest.raises(
        ValueError,
        match=r"^propensity is a dense array of shape \(3, 4\): give one propensity per item \(a "
        r"1-D vector of 4\) or one per \(user, item\) as a 3×4 scipy sparse matrix",
    ):
        estimator(Y, S, discount=D, propensity=np.full((3, 4), 0.5))
    # What the message offers is accepted, and the two agree when they hold the same values.
    per_item = estimator(Y, S, discount=D, propensity=np.full(4, 0.5))
    per_entry = estimator(Y, S, discount=D, propensity=sp.csr_matrix(np.full((3, 4), 0.5)))
    assert per_entry.value == per_item.value


@pytest.mark.parametrize(
    ("value", "position"), [(2.0, (0, 1)), (1.5, (2, 3)), (np.nan, (1, 0)), (-0.5, (0, 0))]
)
def test_impressions_outside_0_1_are_refused_with_their_position(value, position):
    # Impressions are examination probabilities: a count of 2 impressions is not one.
    shown = np.zeros((3, 4))
    shown[position] = value
    with pytest.raises(
        ValueError,
        match=rf"^impressions has value {value} at \(user {position[0]}, item {position[1]}\); "
        r"impressions are examination probabilities: finite and in \[0, 1\]$",
    ):
        ips_dcg(Y, S, discount=D, propensity=np.full(4, 0.5), impressions=shown)


def test_valid_bool_and_object_scores_are_ranked():
    # Boolean scores are 0/1 and object arrays of numbers are numbers: both valid.
    as_bool = S > 0.45
    assert dcg(Y, as_bool, discount=D).value == dcg(Y, as_bool.astype(float), discount=D).value
    assert dcg(Y, S.astype(object), discount=D).value == dcg(Y, S, discount=D).value


def test_duplicate_reward_entries_are_summed():
    rows, cols = np.array([0, 0, 2, 2, 2]), np.array([2, 2, 1, 3, 1])
    coo = sp.coo_matrix((np.array([1.0, 2.0, 1.0, 1.0, 0.5]), (rows, cols)), shape=(3, 4))
    summed = np.zeros((3, 4))
    np.add.at(summed, (rows, cols), coo.data)  # by hand: (0, 2) = 3, (2, 1) = 1.5
    assert summed[0, 2] == 3.0 and summed[2, 1] == 1.5
    np.testing.assert_array_equal(
        dcg(coo, S, discount=D).per_user, dcg(summed, S, discount=D).per_user
    )
    # A non-canonical CSR with a repeated column is summed the same way.
    csr = sp.csr_matrix(
        (np.array([1.0, 2.0]), np.array([2, 2]), np.array([0, 2, 2, 2])), shape=(3, 4)
    )
    assert as_csr(csr, "y_true").toarray()[0].tolist() == [0.0, 0.0, 3.0, 0.0]


@pytest.mark.parametrize(
    "scores",
    [
        sp.coo_matrix(([0.5, 0.7, 0.1], ([1, 1, 0], [3, 3, 0])), shape=(3, 4)),
        sp.csr_matrix(
            (np.array([0.5, 0.7]), np.array([3, 3]), np.array([0, 0, 2, 2])), shape=(3, 4)
        ),
    ],
)
def test_duplicate_score_entries_are_refused(scores):
    with pytest.raises(ValueError, match=r"y_score stores \(user 1, item 3\) more than once"):
        dcg(Y, scores, discount=D)


def test_as_csr_refuses_duplicates_when_asked():
    coo = sp.coo_matrix(([0.2, 0.3], ([2, 2], [1, 1])), shape=(3, 4))
    with pytest.raises(ValueError, match=r"p stores \(user 2, item 1\) more than once"):
        as_csr(coo, "p", duplicates="refuse")
    with pytest.raises(ValueError, match="duplicates must be 'sum' or 'refuse', got 'max'"):
        as_csr(coo, "p", duplicates="max")
    assert as_csr(coo, "p").toarray()[2, 1] == 0.5


def test_a_custom_discount_over_the_catalogue_pairs_the_best_ranks_with_the_best_gains():
    # iDCG of gains (3, 1) over curve (0.2, 1.0, 0.5) on 3 items, by hand: 3·1.0 + 1·0.5.
    gains = sp.csr_matrix(np.array([[3.0, 0.0, 1.0]]))
    assert ideal_dcg(gains, CustomDiscount([0.2, 1.0, 0.5])).tolist() == [3.5]
    # With 2 items only ranks 1–2 exist: 3·1.0 + 1·0.2.
    assert ideal_dcg(gains[:, :2].toarray() + [[0, 1]], CustomDiscount([0.2, 1.0, 0.5]))[
        0
    ] == pytest.approx(3.2)
    with pytest.raises(
        ValueError,
        match=r"gains has value -1.0 at \(user 0, item 1\)",
    ):
        ideal_dcg(np.array([[1.0, -1.0]]), LogDiscount(2))
    assert pn_dcg(Y, S, discount=CustomDiscount([0.2, 1.0, 0.5])).value <= 1.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: dcg(Y + 1j, S, discount=D),
            r"y_true has complex dtype complex128 \(value \(1\+1j\) at \(user 0, item 0\)\)",
        ),
        (
            lambda: dcg(sp.csr_matrix(Y) * (1 + 0.5j), S, discount=D),
            r"y_true has complex dtype .* stored value 0 is \(1\+0\.5j\)",
        ),
        (lambda: dcg(Y, S + 2j, discount=D), r"y_score has complex dtype"),
    ],
)
def test_complex_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: _dcg(Y, S, discount=D, self_normalised="no"),
            "self_normalised must be True or False, got 'no'",
        ),
        (
            lambda: _dcg(Y, S, discount=D, propensity=np.full(4, 0.5), self_normalised=None),
            "self_normalised must be True or False, got None",
        ),
        (
            lambda: ips_dcg(Y, S, discount=D, propensity=np.full(4, 0.5), ess_threshold="0.5"),
            r"ess_threshold.*got '0.5'",
        ),
        (
            lambda: ips_dcg(Y, S, discount=D, propensity=np.full(4, 0.5), ess_threshold=True),
            r"ess_threshold.*got True",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# --- Monte Carlo: IPS-weighted DCG is unbiased for online reward (Jeunen et al. Eq. 10–11) ---
#
# World (satisfies Asm. 1–5): each user u is shown, per replication, one of three fixed logging
# rankings drawn uniformly; a position-based model views rank r with probability
# ``δ_log(r) = 0.85^(r−1)`` (no cutoff: full support); a viewed item is clicked with its
# quality ``q_ui``. The logging exposure of (u, i) is therefore exactly
# ``p_ui = mean over the three rankings of δ_log(rank of i)`` (Eq. 8). The target policy is a
# fixed ranking examined with ``LogDiscount(5)``; its true expected reward per user is
# ``Σ_i q_ui δ_t(r_t(i))`` (Eq. 5).

N_USERS, N_ITEMS, N_LOGGING, REPLICATIONS = 150, 10, 3, 400


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(2024)
    quality = rng.uniform(0.0, 0.9, size=(N_USERS, N_ITEMS))
    logging = np.array(
        [[rng.permutation(N_ITEMS) for _ in range(N_LOGGING)] for _ in range(N_USERS)]
    )
    delta_log = ExponentialDiscount(0.85)
    # rank of item i in logging ranking k of user u (1-based)
    log_rank = np.argsort(logging, axis=2) + 1
    propensity = delta_log(log_rank).mean(axis=1)  # exact exposure, Eq. 8
    target = TopK(np.argsort(-(quality + rng.normal(0, 0.3, quality.shape)), axis=1))
    target_rank = np.argsort(target.items, axis=1) + 1
    truth = (quality * LogDiscount(5)(target_rank)).sum(axis=1).mean()
    return dict(
        rng=rng,
        quality=quality,
        log_rank=log_rank,
        delta_log=delta_log,
        propensity=sp.csr_matrix(propensity),
        target=target,
        truth=truth,
    )


def test_unbiased_dcg_matches_online_reward_and_plain_dcg_is_biased(world):
    rng, disc = world["rng"], LogDiscount(5)
    unbiased, plain = [], []
    for _ in range(REPLICATIONS):
        shown = rng.integers(0, N_LOGGING, size=N_USERS)
        ranks = world["log_rank"][np.arange(N_USERS), shown]
        viewed = rng.random((N_USERS, N_ITEMS)) < world["delta_log"](ranks)
        clicks = sp.csr_matrix(
            (viewed & (rng.random((N_USERS, N_ITEMS)) < world["quality"])).astype(float)
        )
        ips = ips_dcg(
            clicks,
            world["target"],
            discount=disc,
            propensity=world["propensity"],
            population="all",
        )
        naive = dcg(clicks, world["target"], discount=disc, population="all")
        unbiased.append(ips.value)
        plain.append(naive.value)
    unbiased, plain = np.array(unbiased), np.array(plain)
    se = unbiased.std(ddof=1) / np.sqrt(REPLICATIONS)
    # 3 standard errors of the Monte Carlo mean: a correct estimator fails this 0.3 % of the time.
    assert abs(unbiased.mean() - world["truth"]) < 3 * se
    se_plain = plain.std(ddof=1) / np.sqrt(REPLICATIONS)
    assert world["truth"] - plain.mean() > 20 * max(se, se_plain)  # measurably biased (low)


# --- plain and IPS-weighted estimators are separate functions -------------------------------


WEIGHTED = {
    "ips_dcg": (ips_dcg, "dcg"),
    "snips_dcg": (snips_dcg, "dcg"),
    "ips_ndcg": (ips_ndcg, "ndcg"),
    "ips_pn_dcg": (ips_pn_dcg, "pn_dcg"),
}


@pytest.mark.parametrize("name", sorted(WEIGHTED))
@pytest.mark.parametrize("given", [{}, {"propensity": None}])
def test_weighted_estimators_without_propensity_name_the_plain_one(name, given):
    estimator, plain = WEIGHTED[name]
    # \b keeps "dcg" from matching inside "ips_dcg": the plain estimator itself must be named.
    with pytest.raises(ValueError, match=rf"^{name}\b.*propensity.*\b{plain}\b"):
        estimator(Y, S, discount=D, **given)


@pytest.mark.parametrize(
    ("weighted", "plain"), [(ips_dcg, dcg), (ips_ndcg, ndcg), (ips_pn_dcg, pn_dcg)]
)
@pytest.mark.parametrize("form", ["item", "user_item"])
def test_propensities_of_one_give_the_plain_estimate_exactly(weighted, plain, form):
    rng = np.random.default_rng(17)
    y, s = random_case(rng, n_users=30, n_items=12, graded=True)
    ones = np.ones(12) if form == "item" else sp.csr_matrix(np.ones((30, 12)))
    ips = weighted(y, s, discount=LogDiscount(5), propensity=ones)
    base = plain(y, s, discount=LogDiscount(5))
    np.testing.assert_array_equal(ips.per_user, base.per_user)
    assert ips.value == base.value
    assert ips.user_ids.tolist() == base.user_ids.tolist()
    assert ips.name == "IPS-" + base.name


def test_snips_dcg_by_hand():
    p = np.array([0.5, 0.25, 1.0, 0.8])  # w = 1/p = 2, 4, 1, 1.25
    # Ranks under S: user 0 holds items 0, 2 at ranks 1, 2; user 1 item 1 at rank 1; user 2
    # items 0, 1, 3 at ranks 2, 3, 4 (δ = 0 past the cutoff 3).
    third = 1 / math.log2(3)
    numerator = (2 * 1 + 1 * third) + (4 * 1) + (2 * third + 4 * 0.5 + 1.25 * 0)
    total_weight = (2 + 1) + 4 + (2 + 4 + 1.25)
    n_held_out, n_users = 6, 3
    expected = numerator / total_weight * n_held_out / n_users
    result = snips_dcg(Y, S, discount=D, propensity=p)
    assert result.value == pytest.approx(expected, rel=1e-14)
    assert result.name == "SNIPS-DCG@3"
    # Equal weights cancel: SNIPS equals plain DCG whatever the common propensity.
    assert snips_dcg(Y, S, discount=D, propensity=np.full(4, 0.3)).value == pytest.approx(
        dcg(Y, S, discount=D).value, rel=1e-14
    )


@pytest.mark.parametrize("plain", [dcg, ndcg, pn_dcg])
def test_plain_estimators_take_no_propensity(plain):
    with pytest.raises(TypeError, match="propensity"):
        plain(Y, S, discount=D, propensity=np.full(4, 0.5))


HELD_OUT = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1, 0]]))  # held-out (0,0), (0,2), (1,1)


def test_propensity_series_is_aligned_by_item_label():
    p = np.array([0.2, 0.5, 0.8])
    shuffled = pd.Series(p[[2, 0, 1]], index=[2, 0, 1])
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.7, 0.3]])
    aligned = ips_dcg(HELD_OUT, scores, discount=LogDiscount(), propensity=shuffled).per_user
    np.testing.assert_array_equal(
        aligned, ips_dcg(HELD_OUT, scores, discount=LogDiscount(), propensity=p).per_user
    )


@pytest.mark.parametrize("length", [2, 4])
def test_propensity_vector_of_the_wrong_length_is_refused(length):
    with pytest.raises(ValueError, match=rf"propensity has shape \({length},\) but y_true has 3"):
        ips_dcg(HELD_OUT, np.ones((2, 3)), discount=LogDiscount(), propensity=np.full(length, 0.5))


@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_duplicate_propensity_entries_are_never_summed(form):
    m = propensity_with_duplicate(form)
    assert m.nnz == 5 and sp.csr_matrix(m)[0, 2] == pytest.approx(0.6)  # scipy would sum
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        ips_dcg(HELD_OUT, np.ones((2, 3)), discount=LogDiscount(), propensity=m)


# --- populations: which users the estimates average over ------------------------------------

# Four users, three items: users 1 and 3 have no held-out reward.
Y_POP = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 0, 0], [0, 2, 0], [0, 0, 0]]))
S_POP = np.array([[0.9, 0.1, 0.5], [0, 0, 0], [0.1, 0.9, 0.0], [0, 0, 1.0]])
P_POP = np.array([0.5, 0.25, 0.1])
D_POP = LogDiscount(2)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_population_all_averages_over_every_row_by_hand():
    third = 1 / math.log2(3)
    # c/p · δ: user 0 items 0 (rank 1, weight 2) and 2 (rank 2, weight 10); user 2 item 1
    # (rank 1, reward 2, weight 4); users 1 and 3 count 0.
    ips_u = np.array([2 + 10 * third, 0, 8, 0])
    kw = dict(discount=D_POP, propensity=P_POP)
    every = ips_dcg(Y_POP, S_POP, population="all", **kw)
    assert every.per_user == pytest.approx(ips_u, rel=1e-14)
    assert every.user_ids.tolist() == [0, 1, 2, 3] and every.n_excluded_users == 0
    assert every.standard_error == pytest.approx(ips_u.std(ddof=1) / 2, rel=1e-12)
    observed = ips_dcg(Y_POP, S_POP, **kw)
    assert observed.value == pytest.approx(ips_u.sum() / 2, rel=1e-14)
    assert observed.n_excluded_users == 2
    plain = dcg(Y_POP, S_POP, discount=D_POP, population="all")
    assert plain.per_user == pytest.approx([1 + third, 0, 2, 0], rel=1e-14)
    # SNIPS: mean(DCG) · mean(n) / mean(Σ w) over four users; Σ w = 2 + 10 + 4, N = 3.
    sn = snips_dcg(Y_POP, S_POP, population="all", **kw)
    assert sn.value == pytest.approx(ips_u.mean() * (3 / 4) / (16 / 4), rel=1e-14)
    assert sn.value == pytest.approx(snips_dcg(Y_POP, S_POP, **kw).value * 2 / 4, rel=1e-14)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize(("function", "weighted"), [(pn_dcg, False), (ips_pn_dcg, True)])
def test_post_normalised_dcg_is_the_same_over_both_populations(function, weighted):
    kw = dict(discount=D_POP, **({"propensity": P_POP} if weighted else {}))
    every = function(Y_POP, S_POP, population="all", **kw)
    observed = function(Y_POP, S_POP, **kw)
    assert every.value == pytest.approx(observed.value, rel=1e-14)
    # Delta method: a user without rewards has influence 0 and the n others' scale by N/n, so
    # the variances differ only through their n − 1 and N − 1: ratio N(n − 1) / (n(N − 1)).
    n, total = 2, 4
    assert every.standard_error**2 == pytest.approx(
        observed.standard_error**2 * total * (n - 1) / (n * (total - 1)), rel=1e-12
    )


@pytest.mark.parametrize(("name", "function"), [("ndcg", ndcg), ("ips_ndcg", ips_ndcg)])
def test_per_user_normalised_dcg_refuses_all_users_saying_why(name, function):
    kw = {"propensity": P_POP} if name.startswith("ips") else {}
    with pytest.raises(
        ValueError,
        match=rf"population 'all' needs a value for every user, but {name} divides each user's "
        r"DCG by a per-user total .* 0 for users without held-out rewards: give population "
        r"'observed'",
    ):
        function(Y_POP, S_POP, discount=D_POP, population="all", **kw)


@pytest.mark.parametrize("function", [dcg, ips_dcg, snips_dcg, ndcg, ips_ndcg, pn_dcg, ips_pn_dcg])
@pytest.mark.parametrize("bad", ["everyone", "All", None, 1])
def test_an_unknown_population_names_the_argument_and_the_choices(function, bad):
    kw = {"propensity": P_POP} if function.__name__.startswith(("ips", "snips")) else {}
    assert POPULATIONS == ("observed", "all")
    with pytest.raises(
        ValueError, match=rf"population must be 'observed' or 'all', got {re.escape(repr(bad))}"
    ):
        function(Y_POP, S_POP, discount=D_POP, population=bad, **kw)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_all_users_with_impressions_counts_the_unserved_with_their_control():
    # User 0 is rewarded, user 1 only shown item 0 (e = 0.5), users 2 and 3 neither.
    y = sp.csr_matrix(np.array([[0, 1.0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]))
    shown = sp.csr_matrix(np.array([[0, 1.0, 0], [0.5, 0, 0], [0, 0, 0], [0, 0, 0]]))
    p = np.array([0.5, 0.25, 1.0])
    scores = np.array([[0.1, 0.9, 0.5], [0.9, 0.5, 0.1], [0.5, 0.4, 0.3], [0.3, 0.4, 0.5]])
    kw = dict(discount=D_POP, propensity=p, impressions=shown)
    third = 1 / math.log2(3)
    every = ips_dcg(y, scores, population="all", **kw)
    # DCG: user 0's item 1 at rank 1, weight 4; the others 0.
    assert every.per_user == pytest.approx([4, 0, 0, 0], rel=1e-14)
    # Control Σ_i δ(r_u(i)) w e − Σ_r δ(r): user 0 item 1 (rank 1, w 4, e 1), user 1 item 0
    # (rank 1, w 2, e 0.5); users 2 and 3 were shown nothing: −(δ(1) + δ(2)).
    assert every.control == pytest.approx(
        [4 - (1 + third), 1 - (1 + third), -(1 + third), -(1 + third)]
    )
    served = ips_dcg(y, scores, **kw)
    assert served.user_ids.tolist() == [0, 1] and served.value == pytest.approx(2.0)


# --- Monte Carlo: the all-users interval covers the online reward per user ------------------
#
# A small SimulatedWorld (Asm. 1–5 hold by construction), a fixed target (the world's relevance
# plus noise, top 10) and R held-out logs of a popularity-biased feed, each evaluated by
# IPS-DCG with the true propensities (propensity_model()) over both populations. The world's
# online_reward is the exact target: the mean over all users of their expected clicks.

MC_USERS, MC_ITEMS, MC_FEED, MC_LOGS = 2000, 200, 20, 300


@pytest.fixture(scope="module")
def replicated():
    world = SimulatedWorld(n_users=MC_USERS, n_items=MC_ITEMS, seed=0)
    disc = LogDiscount(10)
    noise = np.random.default_rng(0).normal(0.0, 0.1, (MC_USERS, MC_ITEMS))
    target = TopK.from_scores(world.relevance() + noise, 10)
    truth = world.online_reward(target, disc).value
    out = {p: {"covered": [], "value": []} for p in POPULATIONS}
    share = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for seed in range(MC_LOGS):
            log = world.log(PopularityPolicy(1.0), feed_length=MC_FEED, seed=seed)
            for population in POPULATIONS:
                r = ips_dcg(
                    log.clicks,
                    target,
                    discount=disc,
                    propensity=log.propensity_model(),
                    clip=None,
                    population=population,
                )
                lo, hi = r.confidence_interval(0.95)
                out[population]["covered"].append(lo <= truth <= hi)
                out[population]["value"].append(r.value)
            share.append(np.mean(np.diff(log.clicks.indptr) > 0))
    return truth, {p: {k: np.array(v) for k, v in d.items()} for p, d in out.items()}, share


# Tolerance: 3 binomial standard errors of a 95 % coverage over MC_LOGS logs,
# sqrt(0.95 · 0.05 / 300) = 0.0126, so ±0.038; a correct interval fails this 0.3 % of the time.
COVERAGE_TOLERANCE = 3 * math.sqrt(0.95 * 0.05 / MC_LOGS)


def test_all_users_ips_dcg_interval_covers_online_reward_at_the_nominal_rate(replicated):
    truth, by, _ = replicated
    every = by["all"]
    # Measured 0.927 (world seed 0; 0.927–0.957, median 0.937, over world seeds 0–5).
    assert abs(every["covered"].mean() - 0.95) <= COVERAGE_TOLERANCE
    # Unbiased: the mean over the logs within 3 Monte Carlo standard errors of the truth.
    se = every["value"].std(ddof=1) / math.sqrt(MC_LOGS)
    assert abs(every["value"].mean() - truth) < 3 * se


def test_observed_users_ips_dcg_estimates_reward_over_the_share_of_users_with_a_click(
    replicated,
):
    truth, by, share = replicated
    observed = by["observed"]
    # About 74 % of the users click in a log, so the observed users' mean is about 1.35 times
    # the online reward: measured coverage 0.017 (0.003–0.017 over world seeds 0–5), a gap of
    # 0.93 below the nominal 0.95.
    assert 0.95 - observed["covered"].mean() > 0.85
    assert observed["covered"].mean() < 0.95 - COVERAGE_TOLERANCE
    # What it estimates instead: V / π, π the share of users with a held-out click (a ratio
    # estimator; its bias is far below the Monte Carlo error here).
    se = observed["value"].std(ddof=1) / math.sqrt(MC_LOGS)
    assert abs(observed["value"].mean() - truth / np.mean(share)) < 3 * se


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("function", [ips_dcg, snips_dcg, ips_pn_dcg])
def test_the_weighting_of_an_all_users_estimate_reproduces_it(function):
    # The sensitivity analysis re-evaluates the estimate from its weighting: the users without
    # rewards add nothing to it, to the weight sum of SNIPS included.
    for propensity in (P_POP, sp.csr_matrix(np.tile(P_POP, (4, 1)))):
        result = function(Y_POP, S_POP, discount=D_POP, propensity=propensity, population="all")
        weighting = result.weighting
        assert weighting.value(weighting.raw) == pytest.approx(result.value, rel=1e-12)
