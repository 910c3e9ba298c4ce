"""TopK.from_scores: one ranking per model, reused by every metric."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope import TopK


def brute_force_top(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row: finite scores sorted descending, ties to the lower index, -1 padded."""
    out = np.full((scores.shape[0], k), -1)
    for u, row in enumerate(scores):
        order = sorted(
            (i for i in range(row.size) if np.isfinite(row[i])), key=lambda i: (-row[i], i)
        )
        out[u, : min(k, len(order))] = order[:k]
    return out


def test_from_dense_scores_with_ties_and_masked_items():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(30, 12)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.3] = -np.inf
    np.testing.assert_array_equal(TopK.from_scores(scores, 5).items, brute_force_top(scores, 5))


def test_from_sparse_scores_ranks_only_stored_entries():
    # row 1 stores an explicit zero at item 2: a candidate with score 0
    scores = sp.csr_matrix(([2.0, 1.0, 0.0], ([0, 0, 1], [1, 3, 2])), shape=(2, 4))
    top = TopK.from_scores(scores, 3)
    np.testing.assert_array_equal(top.items, [[1, 3, -1], [2, -1, -1]])


def test_k_larger_than_catalogue_is_truncated():
    assert TopK.from_scores(np.array([[0.1, 0.3]]), 5).items.tolist() == [[1, 0]]


@pytest.mark.parametrize("k", [0, 2.5, True])
def test_invalid_k(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        TopK.from_scores(np.ones((2, 3)), k)
