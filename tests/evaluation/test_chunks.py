"""``ChunkPlan.matrices`` on chunks coded by an engine (each file's rows together, sorted by
user) against the same rows grouped by user as a Spark partition holds them, and against
scipy's COO → CSR conversion."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope import LogDiscount
from recpack_ope.evaluation.chunks import ChunkError, ChunkPlan, item_columns

PLAN = ChunkPlan(("A", "B"), ("dcg",), LogDiscount(5), 5, None, False, 0.5)


def rows_of(rng, users, per, n_items, spread=1):
    """Rows of each user in ``users`` (``per`` items each, distinct), sorted by user."""
    u = np.repeat(users, per)
    items = np.concatenate([rng.choice(n_items, n, replace=False) for n in per]) * spread
    return u, items


def coded_chunk(parts):
    """An engine-coded chunk: each part (held-out, A, B) together, users coded in order."""
    users = np.unique(np.concatenate([u for u, _, _ in parts]))
    return {
        "user": np.concatenate([u for u, _, _ in parts]),
        "users": users,
        "u": np.searchsorted(users, np.concatenate([u for u, _, _ in parts])),
        "item": np.concatenate([i for _, i, _ in parts]),
        "value": np.concatenate([v for _, _, v in parts]),
        "source": np.concatenate([np.full(u.size, s - 1) for s, (u, _, _) in enumerate(parts)]),
        "value:null": np.zeros(sum(u.size for u, _, _ in parts), dtype=bool),
    }


def grouped_chunk(chunk):
    """The same rows interleaved by user, as a Spark partition sorts them."""
    order = np.argsort(chunk["user"], kind="stable")
    return {k: chunk[k][order] for k in ("user", "item", "value", "source", "value:null")}


def expected_matrix(u, items, values, shape, known):
    """scipy's CSR of the rows, columns indexed by the ids' positions in ``known``."""
    return sp.csr_matrix((values, (u, np.searchsorted(known, items))), shape=shape).toarray()


@pytest.mark.parametrize(
    "layout",
    ["top-k", "ragged", "sparse users", "wide ids"],
)
def test_engine_coded_chunks_give_the_grouped_chunks_matrices(layout):
    """Top-K blocks (one users × K array), ragged blocks (padded), few long users among many
    short ones (one sort by user and column) and ids spread wider than the rows (sorted
    ids): the same matrices as the Spark route and as scipy."""
    rng = np.random.default_rng(7)
    n_users, n_items = 40, 60
    spread = 10**9 if layout == "wide ids" else 1
    held_per = rng.integers(1, 5, n_users)
    if layout == "top-k":
        per_a = np.full(n_users, 8)
    elif layout == "sparse users":
        per_a = np.where(np.arange(n_users) % 13 == 0, 50, 1)
    else:
        per_a = rng.integers(1, 12, n_users)
    parts = []
    for per in (held_per, per_a, np.full(n_users // 2, 6)):
        users = np.arange(per.size) * (2 if per.size < n_users else 1)
        u, i = rows_of(rng, users * 3 + 100, per, n_items, spread)
        parts.append((u, i, rng.integers(0, 4, u.size) / 2))
    chunk = coded_chunk(parts)
    mine, theirs = PLAN.matrices(chunk), PLAN.matrices(grouped_chunk(chunk))
    assert np.array_equal(mine.users, theirs.users)
    known = np.unique(chunk["item"])
    shape = (mine.users.size, known.size)
    for m, (u, i, v) in enumerate(parts):
        got = mine.y_true if m == 0 else mine.scores[m - 1]
        assert got.has_sorted_indices
        dense = got.toarray()[:, np.searchsorted(mine.items, known)]
        assert np.array_equal(
            dense, expected_matrix(np.searchsorted(mine.users, u), i, v, shape, known)
        )
        other = theirs.y_true if m == 0 else theirs.scores[m - 1]
        assert np.array_equal(dense, other.toarray()[:, np.searchsorted(theirs.items, known)])
    # Every column is an id absent from the chunk or a used one, in increasing id order.
    assert np.all(np.diff(mine.items) > 0) and np.isin(known, mine.items).all()


@pytest.mark.parametrize("layout", ["top-k", "ragged", "sparse users"])
def test_a_repeated_pair_is_found_at_its_second_row(layout):
    rng = np.random.default_rng(3)
    per = {"top-k": np.full(20, 5), "ragged": rng.integers(2, 7, 20)}.get(
        layout, np.where(np.arange(20) == 4, 60, 2)
    )
    u, i = rows_of(rng, np.arange(20), per, 80)
    held = rows_of(rng, np.arange(20), np.full(20, 2), 80)
    k = int(np.flatnonzero(u == 4)[1])
    i[k] = i[k - 1]  # user 4's second row repeats its first item
    chunk = coded_chunk(
        [(*held, np.ones(40)), (u, i, np.ones(u.size)), (u, i + 1, np.ones(u.size))]
    )
    plan = ChunkPlan(("A", "B"), ("dcg",), LogDiscount(5), 5, None, False, 0.5)
    with pytest.raises(ChunkError, match=r"recommendations of 'A' has the \(user, item\) pair"):
        plan.matrices(chunk)
    with pytest.raises(ChunkError, match=rf"\(user=4, item={i[k]}\)"):
        plan.matrices(chunk)


def test_item_columns_index_small_ranges_directly_and_sort_the_others():
    items, column = item_columns(np.array([7, 5, 7, 9]))
    assert items.tolist() == [5, 6, 7, 8, 9] and column.tolist() == [2, 0, 2, 4]
    wide = np.array([2**40, 5, 2**40])
    items, column = item_columns(wide)
    assert items.tolist() == [5, 2**40] and column.tolist() == [1, 0, 1]
    extreme = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    assert item_columns(extreme)[0].tolist() == extreme.tolist()  # no overflow of the range
