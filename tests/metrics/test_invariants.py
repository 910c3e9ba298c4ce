"""Invariants of the held-out estimators, checked by hypothesis.

Relabelling users or items, rescaling propensities or stratification values, and the form of
the scores (dense, CSR, TopK) must not change what is measured; normalised DCG stays in
[0, 1] for every valid examination curve, whose ideal is found here by brute force.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recpack_ope.metrics.dcg import (
    dcg,
    ideal_dcg,
    ips_dcg,
    ips_ndcg,
    ips_pn_dcg,
    ndcg,
    pn_dcg,
    snips_dcg,
)
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import ips_recall, recall
from recpack_ope.metrics.rpp import rpp
from recpack_ope.metrics.stratified import stratum_index
from recpack_ope.propensity.discount import CustomDiscount, ExponentialDiscount, LogDiscount

SETTINGS = settings(max_examples=50, deadline=None)
# Random targets sometimes rank no held-out item within a short cutoff; that warning is
# expected here and says nothing about the invariants.
pytestmark = pytest.mark.filterwarnings(
    "ignore::recpack_ope.inference.diagnostics.ReliabilityWarning"
)


def case(seed: int, n_users: int = 7, n_items: int = 6, masked: float = 0.0):
    """Graded rewards (every user has one) and tie-free scores, ``-inf`` where masked."""
    rng = np.random.default_rng(seed)
    y = (rng.random((n_users, n_items)) < 0.4) * rng.integers(1, 4, (n_users, n_items))
    y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 2
    s = rng.permutation(n_users * n_items).reshape(n_users, n_items) / (n_users * n_items)
    s[rng.random(s.shape) < masked] = -np.inf
    p = rng.uniform(0.05, 1.0, n_items)
    return y.astype(float), s, p


def estimates(y, s, p, discount):
    """Per-user values of every held-out estimator, keyed by estimator."""
    reverse = np.where(np.isinf(s), -np.inf, -s)  # a second system for RPP, masked alike
    return {
        "dcg": dcg(y, s, discount=discount).per_user,
        "ips": ips_dcg(y, s, discount=discount, propensity=p, clip=8.0).per_user,
        "snips": snips_dcg(y, s, discount=discount, propensity=p).per_user,
        "ndcg": ips_ndcg(y, s, discount=discount, propensity=p).per_user,
        "pndcg": ips_pn_dcg(y, s, discount=discount, propensity=p).per_user,
        "recall": ips_recall(y, s, k=3, propensity=p).per_user,
        "rpp": rpp(y, s, reverse, weighting="dcg").per_user,
    }


DISCOUNTS = st.one_of(
    st.integers(1, 6).map(LogDiscount),
    st.floats(0.3, 1.0).map(lambda g: ExponentialDiscount(g, cutoff=4)),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=7).map(
        lambda v: CustomDiscount([1.0, *v])  # rank 1 examined, the rest any shape
    ),
)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), discount=DISCOUNTS, data=st.data())
def test_permuting_users_permutes_per_user_values(seed, discount, data):
    y, s, p = case(seed)
    perm = np.array(data.draw(st.permutations(range(y.shape[0]))))
    before, after = estimates(y, s, p, discount), estimates(y[perm], s[perm], p, discount)
    # Every user is evaluated (each has a reward); new row r is old user perm[r].
    for name in before:
        assert after[name] == pytest.approx(before[name][perm], rel=1e-12, abs=1e-15), name


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), discount=DISCOUNTS, data=st.data())
def test_relabelling_items_changes_nothing(seed, discount, data):
    y, s, p = case(seed, masked=0.2)
    perm = np.array(data.draw(st.permutations(range(y.shape[1]))))
    before, after = (
        estimates(y, s, p, discount),
        estimates(y[:, perm], s[:, perm], p[perm], discount),
    )
    for name in before:
        assert after[name] == pytest.approx(before[name], rel=1e-12, abs=1e-15), name


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.floats(1e-3, 1.0),
    discount=DISCOUNTS,
)
def test_self_normalised_and_post_normalised_ignore_the_scale_of_propensities(
    seed, scale, discount
):
    y, s, p = case(seed)
    # Unclipped (clip=None): clipping at a fixed m does not scale with the propensities.
    for metric in (
        lambda q: snips_dcg(y, s, discount=discount, propensity=q, clip=None),
        lambda q: ips_pn_dcg(y, s, discount=discount, propensity=q, clip=None),
        lambda q: ips_ndcg(y, s, discount=discount, propensity=q, clip=None),
    ):
        assert metric(p * scale).value == pytest.approx(metric(p).value, rel=1e-9)
    # IPS itself scales by exactly 1 / scale.
    ips = ips_dcg(y, s, discount=discount, propensity=p, clip=None).value
    assert ips_dcg(y, s, discount=discount, propensity=p * scale, clip=None).value == pytest.approx(
        ips / scale, rel=1e-9
    )


def brute_force_ideal(gains: np.ndarray, curve) -> float:
    """Best DCG over every placement of the items on distinct ranks 1..n_items."""
    n = gains.size
    return max(
        sum(g * curve(r) for g, r in zip(gains, ranks, strict=True))
        for ranks in itertools.permutations(range(1, n + 1))
    )


@SETTINGS
@given(
    gains=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=1, max_size=6),
    values=st.lists(st.floats(0.0, 1.0), min_size=0, max_size=7),
)
def test_ideal_dcg_is_the_best_any_ranking_reaches(gains, values):
    discount = CustomDiscount([1.0, *values])
    g = np.array([gains])
    expected = brute_force_ideal(g[0], lambda r: float(discount(np.array([r]))[0]))
    assert ideal_dcg(sp.csr_matrix(g), discount)[0] == pytest.approx(expected, rel=1e-12, abs=1e-15)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), discount=DISCOUNTS, clip=st.sampled_from([None, 2.0, 50.0]))
def test_normalised_dcg_lies_in_the_unit_interval_for_any_curve(seed, discount, clip):
    y, s, p = case(seed, masked=0.3)
    weighted = {"propensity": p, "clip": clip}
    for normalised, post, kw in ((ndcg, pn_dcg, {}), (ips_ndcg, ips_pn_dcg, weighted)):
        per_user = normalised(y, s, discount=discount, **kw).per_user
        assert np.all((per_user >= 0) & (per_user <= 1 + 1e-12))
        assert 0 <= post(y, s, discount=discount, **kw).value <= 1 + 1e-12
    # A ranking of the items by their gains reaches the ideal exactly: nDCG = 1 for every user.
    best = y + np.arange(y.shape[1]) * 1e-6  # break ties by item index, largest gain first
    if isinstance(discount, CustomDiscount) and np.any(np.diff(discount.values) > 0):
        return  # a non-monotone curve's ideal does not follow the gain order
    assert ndcg(y, best, discount=discount).per_user == pytest.approx(1.0, rel=1e-12)


def exact_width_strata(counts: list[int], n_strata: int) -> list[int]:
    """Equal-width strata of integer values by exact rational arithmetic, right-closed."""
    lo, hi = min(counts), max(counts)
    if lo == hi:
        return [0] * len(counts)
    out = []
    for c in counts:
        position = Fraction(n_strata * (c - lo), hi - lo)
        out.append(max(0, math.ceil(position) - 1))
    return out


SCALES = [1e-300, 3.0, 1e300, 0.1, 1 / 7, 1.0]

#: Item counts (each a stratification value) and a number of strata.
COUNTS_AND_STRATA = given(
    counts=st.lists(st.integers(1, 60), min_size=2, max_size=30),
    n_strata=st.integers(1, 8),
)


@SETTINGS
@COUNTS_AND_STRATA
def test_equal_width_strata_are_exact_on_edges_and_invariant_under_rescaling(counts, n_strata):
    n_strata = min(n_strata, len(counts))
    expected = exact_width_strata(counts, n_strata)
    values = np.array(counts, dtype=np.float64)
    for scale in SCALES:
        for scaled in (values * scale, values / (values.sum() / scale)):
            assert np.all(np.isfinite(scaled))
            index, _ = stratum_index(scaled, n_strata, "width")
            assert index.tolist() == expected, scale


@SETTINGS
@COUNTS_AND_STRATA
def test_equal_mass_strata_depend_only_on_the_order(counts, n_strata):
    n_strata = min(n_strata, len(counts))
    values = np.array(counts, dtype=np.float64)
    expected, _ = stratum_index(values, n_strata, "mass")
    # Equal values share a stratum and larger values never fall in a lower one.
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(expected[order]) >= 0)
    for scale in SCALES:
        assert stratum_index(values * scale, n_strata, "mass")[0].tolist() == expected.tolist()
        assert (
            stratum_index(np.sqrt(values) * scale, n_strata, "mass")[0].tolist()
            == expected.tolist()
        )


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 7), discount=DISCOUNTS)
def test_dense_sparse_and_topk_scores_agree(seed, k, discount):
    y, s, p = case(seed, masked=0.3)
    # Sparse: stored entries are the candidates, exactly the finite ones of the dense matrix.
    sparse = sp.csr_matrix(np.where(np.isinf(s), 0.0, s + 1.0))
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    topk = TopK(np.where(np.take_along_axis(s, order, axis=1) > -np.inf, order, -1))
    assert np.array_equal(TopK.from_scores(s, k).items, topk.items)
    assert np.array_equal(TopK.from_scores(sparse, k).items, topk.items)
    cut = discount.with_cutoff(min(k, discount.cutoff or k))
    for metric in (
        lambda x: ips_dcg(y, x, discount=cut, propensity=p).per_user,
        lambda x: ndcg(y, x, discount=cut).per_user,
        lambda x: ips_pn_dcg(y, x, discount=cut, propensity=p).per_user,
        lambda x: recall(y, x, k=k).per_user,
        lambda x: rpp(y, x, s[::-1], k=k).per_user,
    ):
        dense = metric(s)
        np.testing.assert_array_equal(metric(sparse), dense)
        np.testing.assert_array_equal(metric(topk), dense)
