"""rank_ties_by on dense scores stored as CSR with each row's items unsorted (ranked in stored
order), against a brute-force ranking by the framework's tie rule."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.metrics.cache import _StoredOrder, rank_ties_by


def _brute(rows: sp.csr_matrix, K: int) -> np.ndarray:
    """Top-K items of every row by Python's sort: larger scores first, tied scores to the
    higher item (a rule unlike the core's), -1 past a row's stored items."""
    items = np.full((rows.shape[0], min(K, rows.shape[1])), -1)
    for u in range(rows.shape[0]):
        row = rows.getrow(u)
        pairs = zip(row.data.tolist(), row.indices.tolist(), strict=True)
        ranked = sorted(pairs, reverse=True)[:K]
        items[u, : len(ranked)] = [i for _, i in ranked]
    return items


def _stored_unsorted(dense: np.ndarray, keep: int, seed: int) -> sp.csr_matrix:
    """``keep`` entries of every row of ``dense`` (a random choice), in random order."""
    rng = np.random.default_rng(seed)
    n_rows, n_cols = dense.shape
    columns = np.argsort(rng.random((n_rows, n_cols)), axis=1)[:, :keep]
    data = np.take_along_axis(dense, columns, axis=1)
    indptr = np.arange(0, n_rows * keep + 1, keep)
    return sp.csr_matrix((data.ravel(), columns.ravel(), indptr), shape=dense.shape)


@pytest.mark.parametrize("keep", [30, 24, 15])
@pytest.mark.parametrize("K", [1, 4, 12, 29, 30, 50])
def test_unsorted_rows_rank_as_the_brute_force(keep, K):
    rng = np.random.default_rng(keep + K)
    dense = rng.random((50, 30))
    dense[::3] = rng.integers(0, 5, (17, 30))  # rows full of ties
    scores = _stored_unsorted(dense, keep, seed=K)
    assert (_StoredOrder.of(scores) is not None) == (2 * keep >= 30)
    ours = rank_ties_by(scores, K, _brute).items
    assert np.array_equal(ours, _brute(scores, K))


def test_nan_and_repeated_items_in_unsorted_rows_are_named_by_user_and_item():
    indptr, items = np.array([0, 3, 6]), np.array([2, 0, 1, 2, 1, 0])
    nan = sp.csr_matrix((np.array([0.5, 0.1, 0.7, np.nan, np.nan, 0.2]), items, indptr))
    assert _StoredOrder.of(nan) is not None  # NaN is found while ranking
    with pytest.raises(ValueError, match=r"NaN at \(user 1, item 1\)"):
        rank_ties_by(nan, 2, _brute)
    items[-1] = 1
    repeated = sp.csr_matrix((np.arange(6.0), items, indptr))
    with pytest.raises(ValueError, match=r"stores \(user 1, item 1\) more than once"):
        rank_ties_by(repeated, 2, _brute)
