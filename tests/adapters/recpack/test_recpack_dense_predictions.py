"""Dense predictions stored as CSR, as RecPack's EASE returns them (``X @ B``: a score for every
item with training data, each row's items unsorted), ranked in their stored order.

The values equal the core's on the dense array and RecPack's own metrics, the top-K lists equal
those of the same matrix with sorted rows (another code path) bit for bit, and repeated or NaN
entries and in-place edits are caught as for any other predictions. Needs RecPack.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from recpack.algorithms import EASE
from recpack.metrics import DCGK, NDCGK
from recpack.util import get_top_K_ranks
from recpack_ope.adapters.recpack import RecPackAdapter, recpack_ranking

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.metrics import cache
from recpack_ope.metrics.dcg import dcg, ips_dcg, ips_ndcg, ndcg, pn_dcg, snips_dcg
from recpack_ope.propensity.discount import LogDiscount

pytestmark = pytest.mark.usefixtures("quiet_recpack")

N_USERS, N_ITEMS, UNSEEN = 60, 40, 7


@pytest.fixture(scope="module")
def ease():
    """EASE's predictions for 60 users with at least two training items each (so every row
    scores every item but ``UNSEEN``, which has no training data), held-out data and
    propensities."""
    rng = np.random.default_rng(5)
    train = (rng.random((N_USERS, N_ITEMS)) < 0.15).astype(float)
    train[np.arange(N_USERS), rng.integers(0, 20, N_USERS)] = 1.0
    train[np.arange(N_USERS), rng.integers(20, N_ITEMS, N_USERS)] = 1.0
    train[:, UNSEEN] = 0.0
    X = sp.csr_matrix(train)
    with warnings.catch_warnings():  # module-scoped: before the quiet_recpack fixture
        warnings.filterwarnings("ignore", message=".*missing similar items")
        X_pred = EASE(l2=10.0).fit(X).predict(X)
    held_out = (rng.random((N_USERS, N_ITEMS)) < 0.1).astype(float)
    held_out[np.arange(N_USERS), np.arange(N_USERS) % N_ITEMS] = 1.0
    p = rng.uniform(0.05, 1.0, N_ITEMS)
    return X_pred, sp.csr_matrix(held_out), p


def _dense(X_pred: sp.csr_matrix) -> np.ndarray:
    """The predictions as an array, ``-inf`` (no candidate) where RecPack stores no score."""
    coo = X_pred.tocoo()
    dense = np.full(X_pred.shape, -np.inf)
    dense[coo.row, coo.col] = coo.data
    return dense


def test_eases_predictions_are_ranked_in_stored_order(ease):
    X_pred = ease[0]
    assert not X_pred.has_sorted_indices
    assert set(np.diff(X_pred.indptr)) == {N_ITEMS - 1}
    assert cache._StoredOrder.of(sp.csr_matrix(X_pred)) is not None


@pytest.mark.parametrize("K", [1, 5, N_ITEMS - 1, N_ITEMS, 100])
def test_values_equal_the_cores_on_the_dense_array_and_recpacks(ease, K):
    X_pred, y_true, p = ease
    adapter = RecPackAdapter(propensity=p, clip=None)
    core = {
        "PlainNDCGK": ndcg,
        "PlainDCGK": dcg,
        "PostNormalisedDCGK": pn_dcg,
        "IPSDCGK": ips_dcg,
        "SNIPSDCGK": snips_dcg,
        "IPSNDCGK": ips_ndcg,
    }
    dense = _dense(X_pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for name, function in core.items():
            ours = adapter.evaluate(name, y_true.copy(), X_pred, K)  # a new y_true, as RecPack
            weighted = name.startswith(("IPS", "SNIPS"))
            given = {"propensity": p, "clip": None} if weighted else {}
            expected = function(y_true, dense, discount=LogDiscount(K), **given)
            assert ours.value == pytest.approx(expected.value, rel=1e-12, abs=1e-15), name
            np.testing.assert_allclose(ours.per_user, expected.per_user, rtol=1e-12, atol=1e-15)
    for name, theirs in (("PlainNDCGK", NDCGK(K=K)), ("PlainDCGK", DCGK(K=K))):
        theirs.calculate(y_true, X_pred)
        ours = adapter.evaluate(name, y_true, X_pred, K)
        np.testing.assert_allclose(ours.per_user, theirs.results["score"], rtol=0, atol=1e-12)


def _shuffled(dense: np.ndarray, seed: int) -> sp.csr_matrix:
    """Every entry of ``dense`` stored, each row's items in a random order."""
    rng = np.random.default_rng(seed)
    n_rows, n_cols = dense.shape
    columns = np.argsort(rng.random((n_rows, n_cols)), axis=1)
    data = np.take_along_axis(dense, columns, axis=1)
    indptr = np.arange(0, dense.size + 1, n_cols)
    return sp.csr_matrix((data.ravel(), columns.ravel(), indptr), shape=dense.shape)


def _with_data(X_pred: sp.csr_matrix, data: np.ndarray) -> sp.csr_matrix:
    """``X_pred``'s structure, unsorted rows included, with other stored scores."""
    return sp.csr_matrix((data, X_pred.indices, X_pred.indptr), shape=X_pred.shape)


MATRICES = {
    "ease": lambda X_pred: X_pred,
    # rounded to one decimal: most rows tie within their top K
    "ease with ties": lambda X_pred: _with_data(X_pred, np.round(X_pred.data, 1)),
    "ease as float32": lambda X_pred: _with_data(X_pred, X_pred.data.astype(np.float32)),
    "full rows, shuffled": lambda X_pred: _shuffled(np.random.default_rng(1).random((30, 25)), 2),
    "full integer rows with ties, shuffled": lambda X_pred: _shuffled(
        np.random.default_rng(3).integers(0, 4, (30, 25)), 4
    ),
}


@pytest.mark.parametrize("make", MATRICES.values(), ids=MATRICES)
@pytest.mark.parametrize("K", [1, 3, 10, 24, 25, 39, 100])
def test_top_k_lists_are_recpacks_and_the_sorted_matrixs(ease, make, K):
    """The lists are RecPack's own (``get_top_K_ranks`` of the same matrix: its order of tied
    scores depends on the stored order). Rows without a tie in their top K+1 also equal, bit
    for bit, those of the matrix with sorted rows, which is canonical and so ranked the other
    way (the core's sorted rows)."""
    scores = make(ease[0])
    assert not scores.has_sorted_indices and cache._StoredOrder.of(scores) is not None
    ours = recpack_ranking(scores, K).items
    ranks = get_top_K_ranks(scores, K).tocoo()
    expected = np.full(ours.shape, -1)
    expected[ranks.row, ranks.data.astype(int) - 1] = ranks.col
    assert np.array_equal(ours, expected)
    top = -np.sort(-_dense(scores), axis=1)[:, : K + 1]
    tie_free = ~(top[:, 1:] == top[:, :-1]).any(axis=1)
    sorted_rows = recpack_ranking(scores.sorted_indices(), K).items
    assert np.array_equal(ours[tie_free], sorted_rows[tie_free])


def _unsorted(rows: list[list[tuple[int, float]]], n_items: int) -> sp.csr_matrix:
    """A CSR matrix of ``(item, score)`` entries per row, stored as listed."""
    items = [[i for i, _ in row] for row in rows]
    scores = [[s for _, s in row] for row in rows]
    indptr = np.arange(0, len(rows) * len(rows[0]) + 1, len(rows[0]))
    return sp.csr_matrix((np.ravel(scores), np.ravel(items), indptr), shape=(len(rows), n_items))


def test_repeated_and_nan_entries_are_refused_as_for_sorted_rows():
    """The messages name the first bad entry by (user, item), as for any other predictions."""
    first = [(2, 0.5), (0, 0.1), (1, 0.7)]
    repeated = _unsorted([first, [(2, 0.3), (1, 0.2), (1, 0.9)]], 3)
    with pytest.raises(ValueError, match=r"stores \(user 1, item 1\) more than once"):
        recpack_ranking(repeated, 2)
    nan = _unsorted([first, [(2, np.nan), (0, 0.2), (1, np.nan)]], 3)
    with pytest.raises(ValueError, match=r"NaN at \(user 1, item 1\)"):
        recpack_ranking(nan, 2)


def test_predictions_edited_in_place_are_ranked_again(ease):
    """The adapter reuses a ranking for the next metric only while the predictions are
    unchanged: after each edit in place, both metrics equal the core's on the edited scores."""
    X_pred, y_true, p = ease
    X_pred = X_pred.copy()
    adapter = RecPackAdapter(propensity=p, clip=None)

    def check() -> list[float]:
        values, dense = [], _dense(X_pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            for name, function, given in (
                ("PlainNDCGK", ndcg, {}),
                ("IPSDCGK", ips_dcg, {"propensity": p, "clip": None}),
            ):
                ours = adapter.evaluate(name, y_true.copy(), X_pred, 5)
                expected = function(y_true, dense, discount=LogDiscount(5), **given)
                np.testing.assert_allclose(ours.per_user, expected.per_user, rtol=1e-12)
                values.append(ours.value)
        return values

    before = check()
    user = int(np.flatnonzero(y_true[:, 0].toarray().ravel())[0])
    lo, hi = X_pred.indptr[user], X_pred.indptr[user + 1]
    # The user's held-out item 0 takes their best score: its rank, hence the values, change.
    stored = lo + int(np.flatnonzero(X_pred.indices[lo:hi] == 0)[0])
    X_pred.data[stored] = X_pred.data[lo:hi].max() + 1.0
    edited = check()
    assert edited != before
    # Item 0 swaps columns with the user's worst-scored item that is not held out: the
    # scores stay, item 0 leaves the top 5.
    held_out = y_true[user].toarray().ravel()[X_pred.indices[lo:hi]] > 0
    worst = lo + int(np.argmin(np.where(held_out, np.inf, X_pred.data[lo:hi])))
    X_pred.indices[[stored, worst]] = X_pred.indices[[worst, stored]]
    assert check() != edited
