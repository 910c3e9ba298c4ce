"""Turning model scores into ranks, vectorised over a chunk of users.

Conventions (shared by every estimator):

* A **dense** score matrix ranks every item of a row; ``-inf`` marks an item that is not a
  candidate (e.g. one the user saw in training: the caller masks those).
* A **sparse** score matrix ranks only its stored entries, as RecPack does with ``X_pred``:
  an unstored entry is not recommended. Stored zeros are candidates with score 0.
* :class:`TopK` holds precomputed rankings (item indices, best first, ``-1`` padding). One
  of depth 0 ranks nothing: every user's DCG is 0.
* Scores are **numbers**: integers, floats or bools (True ranks above False). Text, even
  ``"0.9"``, is refused with a TypeError naming ``y_score`` and its dtype, never parsed.
* **Ties** are broken by the lower item index first, so results are deterministic and do not
  depend on the chunk size. (RecPack's ``get_top_K_ranks`` leaves ties to ``argpartition``;
  scikit-learn's ``dcg_score`` averages over tied orders by default.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._chunks import CHUNK_ELEMENTS, rows_per_chunk
from .._progress import progress_bar
from .._sparse import find_sorted
from .._validation import (
    EXACT_INTEGER_LIMIT,
    check_positive_int,
    check_sparse,
    entry_position,
    first_duplicate,
    real_array,
)

__all__ = [
    "TopK",
    "top_k_positions",
    "padded_rows",
    "ScoreSource",
    "rank_in_batches",
    "ProductScores",
]

_EMPTY = np.empty(0, dtype=np.int64)

# Rows at most this wide, or of which at least half is wanted, are ranked by one full argsort:
# numpy's vectorised argsort is then as fast as argpartition alone.
_FULL_SORT_WIDTH = 256

# Wide rows are filtered before they are ranked: their columns are dealt into this many groups
# per wanted entry, and only the entries at least as large as the (k+1)-th largest group maximum
# are ranked (about 1.1 (k+1) of them; see _filtered_top).
_GROUPS_PER_ENTRY = 4
# A row keeps at most this many candidates per wanted entry (else argpartition ranks it).
_CANDIDATES_PER_ENTRY = 8


@dataclass(frozen=True, eq=False)
class TopK:
    """Precomputed top-k rankings, one row per user.

    Parameters
    ----------
    items : array_like of int, shape (n_users, k)
        ``items[u, j]`` is the item shown to user u at rank ``j + 1``. Rows shorter than k are
        padded with ``-1`` at the end. An item may appear at most once per row.
    """

    items: np.ndarray

    def __post_init__(self) -> None:
        items = np.asarray(self.items)
        if items.ndim != 2 or not np.issubdtype(items.dtype, np.integer):
            raise ValueError(
                f"TopK items must be a 2-D integer array (users × k), got dtype {items.dtype} "
                f"and shape {items.shape}"
            )
        if items.dtype.kind == "u" and items.size and items.max() > np.iinfo(np.int64).max:
            u, j = np.argwhere(items > np.iinfo(np.int64).max)[0]
            raise ValueError(f"TopK has item index {items[u, j]} at (user {u}, rank {j + 1})")
        items = items.astype(np.int64)
        if items.size and items.min() < -1:
            u, j = np.argwhere(items < -1)[0]
            raise ValueError(f"TopK has item index {items[u, j]} at (user {u}, rank {j + 1})")
        valid = items >= 0
        if (valid[:, 1:] & ~valid[:, :-1]).any():
            u = int(np.flatnonzero((valid[:, 1:] & ~valid[:, :-1]).any(axis=1))[0])
            raise ValueError(f"TopK row of user {u} has an item after -1 padding")
        ordered = np.sort(np.where(valid, items, -np.arange(1, items.shape[1] + 1) - 1), axis=1)
        dup = ordered[:, 1:] == ordered[:, :-1]
        if dup.any():
            u, j = np.argwhere(dup)[0]
            raise ValueError(f"TopK row of user {u} lists item {ordered[u, j]} more than once")
        object.__setattr__(self, "items", items)

    @classmethod
    def from_scores(cls, y_score, k: int) -> TopK:
        """The top-k items of every row of a score matrix, ranked once for reuse.

        Evaluating several metrics (and the simulator's online reward) on one ``TopK``
        ranks each user once instead of once per metric. Follows the conventions of the
        module docstring (``-inf`` / unstored = not a candidate, ties to the lower index).
        The ranking has ``min(k, n_items)`` columns; rows with fewer candidates are padded
        with ``-1``.
        """
        k = check_positive_int(k, "k")
        shape = getattr(y_score, "shape", np.shape(y_score))
        if len(shape) != 2:
            raise ValueError(f"y_score must be a users×items matrix, got shape {shape}")
        source = ScoreSource(y_score, shape)
        items = np.empty((shape[0], min(k, shape[1])), dtype=np.int64)
        step = rows_per_chunk(source.width)
        for start in range(0, shape[0], step):
            users = np.arange(start, min(start + step, shape[0]))
            ranked, counts = source.top(users, k)
            block = items[start : start + users.size]
            block[:, : ranked.shape[1]] = ranked
            block[:, ranked.shape[1] :] = -1
            short = np.flatnonzero(counts < ranked.shape[1])
            block[short] = np.where(
                np.arange(block.shape[1]) < counts[short, None], block[short], -1
            )
        # Built from distinct positions of each row: the checks of __post_init__ cannot fail.
        return cls._trusted(items)

    @classmethod
    def stack(cls, parts) -> TopK:
        """The rows of several rankings of the same depth, one after another (e.g. batches of
        users ranked by :meth:`from_scores`), without checking the valid rows again."""
        parts = list(parts)
        if not parts or not all(isinstance(p, TopK) for p in parts):
            raise TypeError("parts must be a non-empty sequence of TopK")
        widths = sorted({p.items.shape[1] for p in parts})
        if len(widths) > 1:
            raise ValueError(f"parts must rank to the same depth, got depths {widths}")
        return cls._trusted(np.concatenate([p.items for p in parts]))

    @classmethod
    def _trusted(cls, items: np.ndarray) -> TopK:
        """A TopK of ``items`` known to pass :meth:`__post_init__`'s checks."""
        top = object.__new__(cls)
        object.__setattr__(top, "items", items)
        return top


def padded_rows(matrix: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Stored entries of each CSR row left-aligned in a dense block, ``-inf`` padded.

    Returns ``(values, columns)``, both of shape ``(n_rows, max stored per row)``. Within a
    row, entries keep the matrix's (sorted) column order, so "lower position" means
    "lower item index" for tie-breaking. When every row stores as many entries, the blocks
    are reshaped views of the matrix's own arrays (no copy): read them, never write.
    """
    values, columns = padded_csr(matrix.data, matrix.indices, matrix.indptr)
    return values.astype(np.float64, copy=False), columns.astype(np.int64, copy=False)


def padded_csr(data: np.ndarray, indices: np.ndarray | None, indptr: np.ndarray):
    """:func:`padded_rows` of the CSR arrays of consecutive rows (``indptr`` may start past 0);
    without ``indices``, the columns are None."""
    n_rows = indptr.size - 1
    lengths = np.diff(indptr)
    width = int(lengths.max()) if lengths.size else 0
    lo = int(indptr[0]) if indptr.size else 0
    nnz = int(indptr[-1]) - lo if indptr.size else 0
    if nnz == n_rows * width:
        columns = None if indices is None else indices[lo : lo + nnz].reshape(n_rows, width)
        return data[lo : lo + nnz].reshape(n_rows, width), columns
    # A boolean mask fills the block in row-major order, which is the CSR order.
    stored = np.arange(width) < lengths[:, None]
    values = np.full((n_rows, width), -np.inf)
    values[stored] = data[lo : lo + nnz]
    if indices is None:
        return values, None
    columns = np.zeros((n_rows, width), dtype=indices.dtype)
    columns[stored] = indices[lo : lo + nnz]
    return values, columns


def top_k_positions(values: np.ndarray, k: int | None):
    """The k largest finite entries of every row, in rank order.

    Parameters
    ----------
    values : numpy.ndarray, shape (n_rows, width)
        Scores; ``-inf`` entries are never returned. NaN is refused.
    k : int or None
        How many per row; None means all finite entries.

    Returns
    -------
    rows, positions, ranks : numpy.ndarray of int64
        One entry per returned (row, position), ``ranks`` 1-based. Larger values rank first,
        ties go to the lower position. Cost is O(n_rows × width) (:func:`rank_rows`).
    """
    n_rows, width = values.shape
    k = width if k is None else min(k, width)
    if n_rows == 0 or k == 0:
        return _EMPTY, _EMPTY, _EMPTY
    entries, counts = rank_rows(np.ascontiguousarray(values), k)
    keep = np.arange(k) < counts[:, None]
    rows = np.broadcast_to(np.arange(n_rows)[:, None], entries.shape)[keep]
    ranks = np.broadcast_to(np.arange(1, k + 1), entries.shape)[keep]
    return rows, entries[keep] - rows * width, ranks


class _NaNScore(ValueError):
    """A NaN among the scores being ranked, at ``(row, position)`` of the block."""

    def __init__(self, row: int, position: int):
        super().__init__(f"values is NaN at (row {row}, position {position})")
        self.row, self.position = row, position


def rank_rows(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest entries of every row, in rank order, as indices into the flat block.

    Parameters
    ----------
    values : numpy.ndarray, shape (n_rows, width), C-contiguous
        Scores; ``-inf`` marks a non-candidate.
    k : int
        1 ≤ k ≤ width.

    Returns
    -------
    entries : numpy.ndarray of int64, shape (n_rows, k)
        ``entries[u, j]`` is the index in ``values.reshape(-1)`` of the entry ranked ``j + 1``
        in row u (its position is ``entries[u, j] − u·width``): larger values first, ties
        to the lower position. Only the first ``counts[u]`` are candidates.
    counts : numpy.ndarray of int64
        How many of each row's k entries are candidates (``> -inf``).

    Raises
    ------
    _NaNScore
        At the first NaN of the block in row-major order.

    Notes
    -----
    One vectorised selection (an argsort of whole rows when they are narrow or half of them
    is wanted, else ``argpartition`` at the (k+1)-th largest value and an argsort of the k
    selected) ranks every row whose k+1 largest values hold no tie between candidates: that
    order is unique, so no tie rule applies. Only the other rows are ranked again, by
    :func:`_exact_ranking`. NaN sorts above everything, so a row holds one exactly when its
    first ranked value is NaN.
    """
    n_rows, width = values.shape
    flat = values.reshape(-1)
    base = _row_starts(n_rows, width)
    if width <= _FULL_SORT_WIDTH or 2 * k >= width:
        descending = np.argsort(values, axis=1)[:, ::-1]
        entries = descending[:, :k] + base
        after = descending[:, k] + base[:, 0] if k < width else None
    elif width >= 2 * _GROUPS_PER_ENTRY * (k + 1) and values.dtype.kind == "f":
        # (Its candidates are gathered as float64, which would round 64-bit integers.)
        entries, after = _filtered_top(values, k)
    else:
        entries, after = _partitioned_top(values, k)
    ranked = flat[entries]
    if np.isnan(ranked[:, 0]).any():
        row, position = np.argwhere(np.isnan(values))[0]
        raise _NaNScore(int(row), int(position))
    # Equal neighbours among the k+1 largest: a tie, unless both are non-candidates (-inf).
    tied = (ranked[:, 1:] == ranked[:, :-1]).any(axis=1)
    if after is not None:
        tied |= flat[after] == ranked[:, -1]
    rows = np.flatnonzero(tied)
    if rows.size:
        # A tie between candidates: all k+1 are candidates (the smallest is above -inf), or
        # two equal neighbours above -inf among the k.
        top = ranked[rows]
        smallest = top[:, -1] if after is None else np.minimum(top[:, -1], flat[after[rows]])
        inner_tie = ((top[:, 1:] == top[:, :-1]) & (top[:, 1:] > -np.inf)).any(axis=1)
        rows = rows[(smallest > -np.inf) | inner_tie]
    if rows.size:
        entries[rows] = _exact_ranking(values[rows], k) + base[rows]
    counts = np.full(n_rows, k)
    short = np.flatnonzero(ranked[:, -1] == -np.inf)
    counts[short] = (ranked[short] > -np.inf).sum(axis=1)
    return entries, counts


def _partitioned_top(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(entries, after)`` of :func:`rank_rows` before its tie check, by one argpartition at
    the (k+1)-th largest value: the k largest entries of every row in descending order and a
    (k+1)-th largest, as flat indices; tied values in any order, NaN first."""
    n_rows, width = values.shape
    base = _row_starts(n_rows, width)
    part = np.argpartition(values, width - k - 1, axis=1)
    after = part[:, width - k - 1] + base[:, 0]
    chosen = (part[:, width - k :] + base).reshape(-1)
    inner = np.argsort(values.reshape(-1)[chosen].reshape(n_rows, k), axis=1)[:, ::-1]
    return chosen[inner + np.arange(0, n_rows * k, k)[:, None]], after


def _filtered_top(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_partitioned_top` of rows much wider than k, ranking only a few candidates.

    The columns are dealt into G = 4 (k+1) groups and t is the (k+1)-th largest of the
    groups' maxima. At least k+1 groups hold an entry ≥ t, so the k+1 largest entries of the
    row are all ≥ t, and every entry below t can be dropped unseen: the candidates are the
    entries ≥ t, about 1.1 (k+1) per row on continuous scores. Rows with a NaN (its group's
    maximum is NaN), or whose candidates are too many (ties at t, fewer than k+1 finite
    entries), take the argpartition path. Exact for any values: only the cost depends on them.
    """
    n_rows, width = values.shape
    need = k + 1
    threshold, maxima = _group_threshold(values, need)
    candidate = values >= threshold[:, None]
    counts = np.count_nonzero(candidate, axis=1)
    rest = np.flatnonzero((counts > _CANDIDATES_PER_ENTRY * need) | np.isnan(maxima).any(axis=1))
    if rest.size:
        candidate[rest] = False
        counts[rest] = 0
    # The candidates, in row-major order, into a block of the widest row's count (-inf pads).
    found = np.flatnonzero(candidate)
    rows = found // width
    most = max(int(counts.max(initial=0)), need)
    slot = rows * most + np.arange(found.size) - (np.cumsum(counts) - counts)[rows]
    block = np.full(n_rows * most, -np.inf)
    block[slot] = values.reshape(-1)[found]
    where = np.zeros(n_rows * most, dtype=np.int64)
    where[slot] = found
    order = np.argsort(block.reshape(n_rows, most), axis=1)[:, ::-1][:, :need]
    top = np.take_along_axis(where.reshape(n_rows, most), order, axis=1)
    if rest.size:
        entries, after = _partitioned_top(values[rest], k)
        # Flat indices of the sub-block, moved to the rows they came from.
        shift = ((rest - np.arange(rest.size)) * width)[:, None]
        top[rest, :k], top[rest, k] = entries + shift, after + shift[:, 0]
    return top[:, :k], top[:, k]


def _group_threshold(values: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """``(threshold, maxima)``: the maxima of each row's G = 4 ``need`` groups of columns
    (:func:`_filtered_top`) and the ``need``-th largest of them, at most the row's
    ``need``-th largest value (NaN when a group holds one). Rows hold at least 2 G columns."""
    width = values.shape[1]
    groups = _GROUPS_PER_ENTRY * need
    size = width // groups
    # Group j holds the columns j, j + G, j + 2G, …: elementwise maxima of whole column slices,
    # which numpy runs faster than a reduction over a short middle axis.
    maxima = np.maximum(values[:, :groups], values[:, groups : 2 * groups])
    for j in range(2, size):
        np.maximum(maxima, values[:, j * groups : (j + 1) * groups], out=maxima)
    tail = width - groups * size
    if tail:
        np.maximum(maxima[:, :tail], values[:, groups * size :], out=maxima[:, :tail])
    return np.partition(maxima, groups - need, axis=1)[:, groups - need], maxima


def _exact_ranking(values: np.ndarray, k: int) -> np.ndarray:
    """Positions ranked 1 … k in rows with ties, by the rule itself: the k-th largest value
    decides which tied entries fit (the leftmost), then a stable sort orders them."""
    n_rows, width = values.shape
    if k < width:
        kth = np.partition(values, width - k, axis=1)[:, width - k : width - k + 1]
        above = values > kth
        tied = values == kth
        need = k - above.sum(axis=1, keepdims=True)
        take = above | (tied & (np.cumsum(tied, axis=1) <= need))
        pos = np.nonzero(take)[1].reshape(n_rows, k)
    else:
        pos = np.broadcast_to(np.arange(width), (n_rows, width))
    selected = np.take_along_axis(values, pos, axis=1)
    return np.take_along_axis(pos, np.argsort(-selected, axis=1, kind="stable"), axis=1)


def _counted_ranks(
    values: np.ndarray,
    structure: tuple[np.ndarray, np.ndarray, np.ndarray],
    rows: np.ndarray,
    items: np.ndarray,
    k: int,
    n_items: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each wanted ``(row, item)`` in its row, counted without ranking the rows.

    Parameters
    ----------
    values : numpy.ndarray of float64, shape (n_rows, width)
        Scores of a block of :func:`padded_csr`; ``-inf`` marks a non-candidate. No NaN.
    structure : tuple of numpy.ndarray
        ``(columns, indptr, indices)`` of the block (:meth:`ScoreSource._block`): the item at
        each position, ascending within a row's stored entries, and the rows' CSR structure.
    rows, items : numpy.ndarray of int
        The wanted entries, sorted by row, then item.
    k : int
        Last rank, 1 ≤ k ≤ width.
    n_items : int
        Item indices are below it.

    Returns
    -------
    ranks : numpy.ndarray of int64
        1-based rank of each wanted entry (larger values first, ties to the lower item), 0
        when it is not stored, not a candidate or ranked past k: as :func:`rank_rows` ranks.
    counts : numpy.ndarray of int64
        How many entries each row ranks: k, or its candidates when fewer.

    Notes
    -----
    Only the entries of a row at least as large as its k-th largest value can rank within k.
    On rows at least 8 (k+1) wide, the threshold t of the group maxima of
    :func:`_filtered_top` is at most that value, and the wanted entries are looked up among
    the few entries ≥ t (about 1.1 (k+1) per row). Narrower rows are sorted, values alone (no
    indices), which gives the k-th largest value, and the wanted entries are looked up among
    all stored ones. Each wanted entry that can rank within k is ranked by counting the
    entries of its row ranked before it: larger ones, and equal ones at lower positions (lower
    items). In sorted rows a binary search counts the larger ones, and only an entry with an
    equal value elsewhere in its row is counted over the whole row.
    """
    n_rows, width = values.shape
    columns = structure[0]
    counts = np.full(n_rows, k, dtype=np.int64)
    flat = values.reshape(-1)
    if width >= 2 * _GROUPS_PER_ENTRY * (k + 1):
        # At least k + 1 entries are ≥ the threshold: a row ranks k unless the threshold is -inf.
        threshold = _group_threshold(values, k + 1)[0]
        candidate = values >= threshold[:, None]
        short = np.flatnonzero(threshold == -np.inf)
        if short.size:
            candidate[short] &= values[short] > -np.inf
            counts[short] = np.minimum(np.count_nonzero(candidate[short], axis=1), k)
        # Row-major positions of a block whose rows list ascending items: keys ascend too.
        found = np.flatnonzero(candidate)
        found_rows = found // width
        keys = _row_keys(found_rows, columns.reshape(-1)[found], n_items, n_rows)
        at, hit = _matches(keys, _row_keys(rows, items, n_items, n_rows))
        row = rows[hit]
        # A row's candidates are found[first[r] : first[r + 1]], and hold every entry that
        # ranks before one of them.
        first = np.searchsorted(found_rows, np.arange(n_rows + 1))
        length = first[row + 1] - first[row]
        if length.sum() <= CHUNK_ELEMENTS:
            rank = _ranked_among(flat, found, at, first[row], length) + 1
        else:  # many tied candidates
            rank = _ranked_before(values, row, found[at] - row * width) + 1
    else:
        ascending = np.sort(values, axis=1)
        threshold = ascending[:, width - k]
        short = np.flatnonzero(threshold == -np.inf)
        if short.size:
            counts[short] = np.count_nonzero(ascending[short, width - k :] > -np.inf, axis=1)
        entry, stored = _stored_entries(structure, rows, items, width, n_items)
        score = flat[entry]
        hit = np.flatnonzero(stored & (score >= threshold[rows]) & (score > -np.inf))
        entry, row, score = entry[hit], rows[hit], score[hit]
        # Past the last value ≤ score in the sorted row: the entry itself or a tie before it.
        end = _upper_bounds(ascending, row, score, width - k + 1)
        rank = width - end + 1
        tied = ascending.reshape(-1)[row * width + np.maximum(end - 2, 0)] == score
        tied = np.flatnonzero(tied & (end >= 2))
        if tied.size:
            rank[tied] = _ranked_before(values, row[tied], entry[tied] - row[tied] * width) + 1
    ranks = np.zeros(rows.size, dtype=np.int64)
    ranks[hit] = np.where(rank <= k, rank, 0)
    return ranks, counts


def _matches(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(at, hit)``: ``wanted[hit]`` are the ``wanted`` found in ``keys``, at ``keys[at]``;
    both ascending without repeats. About as many keys as wanted ones are merged by a stable
    sort (of two sorted runs: one linear merge); many more keys are searched."""
    if keys.size > 4 * wanted.size:
        at, found = find_sorted(keys, wanted)
        hit = np.flatnonzero(found)
        return at[hit], hit
    both = np.concatenate([keys, wanted])
    order = np.argsort(both, kind="stable")
    merged = both[order]
    # A key equal to a wanted one sorts just before it.
    same = np.flatnonzero(merged[1:] == merged[:-1])
    return order[same], order[same + 1] - keys.size


def _upper_bounds(
    ascending: np.ndarray, rows: np.ndarray, scores: np.ndarray, start: int
) -> np.ndarray:
    """For each ``(row, score)``, how many values of the ascending ``row`` of ``ascending`` are
    ≤ score, known to be at least ``start``: one vectorised binary search of every row."""
    width = ascending.shape[1]
    flat = ascending.reshape(-1)
    base = rows * width - 1
    count = np.full(rows.size, start, dtype=np.int64)
    # Steps of 2^j, j descending, add up to every count from start to width.
    for j in reversed(range((width - start).bit_length())):
        longer = np.minimum(count + (1 << j), width)
        count = np.where(flat[base + longer] <= scores, longer, count)
    return count


def _ranked_among(
    flat: np.ndarray, found: np.ndarray, at: np.ndarray, start: np.ndarray, length: np.ndarray
) -> np.ndarray:
    """How many of the entries ``found[start[i] : start[i] + length[i]]`` of the flat block
    rank before ``found[at[i]]`` (larger, or equal at a lower index), which is one of them."""
    if not at.size:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(length) - length
    pair = np.arange(int(length.sum())) + np.repeat(start - offsets, length)
    other, own = found[pair], np.repeat(found[at], length)
    theirs, mine = flat[other], flat[own]
    before = (theirs > mine) | ((theirs == mine) & (other < own))
    return np.add.reduceat(before, offsets, dtype=np.int64)


def _ranked_before(values: np.ndarray, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """How many entries of each ``rows[i]`` rank before the one at ``positions[i]``: larger
    ones, and equal ones at lower positions; a few rows of the block at a time."""
    width = values.shape[1]
    before = np.empty(rows.size, dtype=np.int64)
    step = rows_per_chunk(width)
    for start in range(0, rows.size, step):
        part = slice(start, start + step)
        block = values[rows[part]]
        own = block[np.arange(block.shape[0]), positions[part], None]
        earlier = np.arange(width) < positions[part, None]
        before[part] = np.count_nonzero((block > own) | ((block == own) & earlier), axis=1)
    return before


def exact_order(values: np.ndarray) -> np.ndarray:
    """Scores as float64, in exactly their order. 64-bit integers beyond ±2**53, which float64
    would round into ties (2**53 + 1 becomes 2**53), are replaced by their rank among the
    distinct values (``np.unique``): float64 holds those exactly and they rank identically."""
    if (
        values.dtype.kind in "iu"
        and values.dtype.itemsize == 8
        and values.size
        and (values.max() > EXACT_INTEGER_LIMIT or values.min() < -EXACT_INTEGER_LIMIT)
    ):
        return np.unique(values, return_inverse=True)[1].reshape(values.shape).astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def _sorted_rows(matrix: sp.csr_matrix) -> tuple[sp.csr_matrix, tuple[int, int] | None]:
    """A copy of a CSR matrix whose rows list their items in ascending order (so ties go to
    the lower item index), and its first (row, item) stored more than once, None if none.

    Rows are sorted in chunks of blocks (rows × most entries per row) padded with an item
    index past the last, which sorts last: an argsort per row instead of one sort of every
    entry. Values move by their index, so any dtype keeps them exactly.
    """
    n_rows, n_items = matrix.shape
    lengths = np.diff(matrix.indptr)
    data, indices = np.empty_like(matrix.data), np.empty_like(matrix.indices)
    step = rows_per_chunk(int(lengths.max()) if lengths.size else 0)
    for start in range(0, n_rows, step):
        stop = min(start + step, n_rows)
        lo, hi = matrix.indptr[start], matrix.indptr[stop]
        width = int(lengths[start:stop].max())
        if hi - lo == (stop - start) * width:  # no padding: the block is a view
            stored, columns = None, matrix.indices[lo:hi].reshape(stop - start, width)
        else:
            stored = np.arange(width) < lengths[start:stop, None]
            columns = np.full(stored.shape, n_items, dtype=np.int64)
            columns[stored] = matrix.indices[lo:hi]
        base = _row_starts(*columns.shape)
        order = np.argsort(columns, axis=1) + base
        columns = columns.reshape(-1)[order]
        repeated = columns[:, 1:] == columns[:, :-1]
        if stored is not None:
            repeated &= columns[:, 1:] < n_items
        if repeated.any():
            row, j = np.argwhere(repeated)[0]
            return matrix, (start + int(row), int(columns[row, j]))
        # The entry each sorted position came from: its CSR index.
        source = order - base + matrix.indptr[start:stop, None]
        indices[lo:hi] = columns.reshape(-1) if stored is None else columns[stored]
        data[lo:hi] = matrix.data[source.reshape(-1) if stored is None else source[stored]]
    return sp.csr_matrix((data, indices, matrix.indptr), shape=matrix.shape), None


def _row_range(users: np.ndarray) -> slice | None:
    """``users`` as a slice when they are consecutive rows (their blocks are then views)."""
    if users.size and int(users[-1]) - int(users[0]) + 1 == users.size:
        return slice(int(users[0]), int(users[-1]) + 1)
    return None


def _row_starts(n_rows: int, width: int) -> np.ndarray:
    """Flat index of the first entry of every row of an (n_rows, width) block, as a column."""
    return np.arange(n_rows)[:, None] * width


class ScoreSource:
    """Validated view of ``y_score`` that yields the ranked items of a chunk of users.

    Parameters
    ----------
    y_score : numpy.ndarray, scipy.sparse matrix or TopK
        Scores (users × items) or precomputed rankings, see the module docstring.
    shape : tuple of int
        ``(n_users, n_items)`` of ``y_true``; ``y_score`` must match it.
    """

    def __init__(self, y_score, shape: tuple[int, int]):
        n_users, n_items = shape
        self.shape = (int(n_users), int(n_items))
        # Set by score_source() inside shared_ranking(): the first held-out ranks computed are
        # kept as (cutoff, their pattern valued rank + 1, ranked items per user).
        self._keep = False
        self._kept: tuple | None = None
        if isinstance(y_score, TopK):
            items = y_score.items
            if items.shape[0] != n_users:
                raise ValueError(
                    f"TopK has {items.shape[0]} users but y_true has {n_users} (shape mismatch)"
                )
            if items.size and items.max() >= n_items:
                u, j = np.argwhere(items >= n_items)[0]
                raise ValueError(
                    f"TopK lists unknown item {items[u, j]} for user {u} at rank {j + 1}; "
                    f"y_true has {n_items} items"
                )
            self._kind, self._data, self.width = "topk", items, items.shape[1]
        elif sp.issparse(y_score):
            if y_score.shape != shape:
                raise ValueError(
                    f"shape mismatch: y_score has shape {y_score.shape}, y_true has {shape}"
                )
            checked = check_sparse(y_score, "y_score")
            if checked.format == "csr":
                # May share the caller's buffers: never modified here.
                scores = sp.csr_matrix(checked)
                repeat = None
                if not scores.has_canonical_format:
                    scores, repeat = _sorted_rows(scores)
            else:
                # Checked before scipy's conversion would sum the repeated entries.
                repeat = first_duplicate(checked)
                scores = sp.csr_matrix(checked)  # a new matrix, sorted in place
                scores.sort_indices()
            if repeat is not None:
                raise ValueError(
                    f"y_score stores (user {repeat[0]}, item {repeat[1]}) more than once; scores "
                    "cannot be summed: give each (user, item) one score"
                )
            data = exact_order(scores.data)
            if data is not scores.data:
                scores = sp.csr_matrix((data, scores.indices, scores.indptr), shape=scores.shape)
            # numpy's maximum propagates NaN: the maximum, which needs no temporary as large as
            # the scores (and is faster than their sum), rules out the common case before the
            # search.
            suspect = scores.data.size and np.isnan(scores.data.max())
            nan = np.flatnonzero(np.isnan(scores.data)) if suspect else _EMPTY
            if nan.size:
                u, i = entry_position(scores, nan[0])
                raise ValueError(f"y_score is NaN at (user {u}, item {i})")
            lengths = np.diff(scores.indptr)
            self._kind, self._data = "sparse", scores
            self.width = int(lengths.max()) if lengths.size else 0
        else:
            scores = real_array(y_score, "y_score", axes=("user", "item"))
            if scores.ndim != 2:
                raise ValueError(
                    "y_score must be a users×items score matrix (dense or sparse) or a TopK "
                    f"ranking, got {type(y_score).__name__} with shape {np.shape(y_score)}"
                )
            if scores.shape != shape:
                raise ValueError(
                    f"shape mismatch: y_score has shape {scores.shape}, y_true has {shape}"
                )
            self._kind, self._data, self.width = "dense", scores, n_items

    def _block(self, users: np.ndarray):
        """Scores of ``users`` as a C-contiguous float64 block ``values`` (users × positions)
        and, for sparse scores, ``(columns, indptr, indices)``: the item at each position and
        the chunk's CSR structure (``indptr`` from 0). Dense scores have no such structure:
        their position is the item."""
        rows = _row_range(users)
        if self._kind == "dense":
            chunk = self._data[users] if rows is None else self._data[rows]
            return np.ascontiguousarray(exact_order(chunk)), None
        if rows is not None:
            # Consecutive rows: slices of the matrix's arrays, no copy.
            indptr = self._data.indptr[rows.start : rows.stop + 1]
            lo, hi = int(indptr[0]), int(indptr[-1])
            data, indices = self._data.data[lo:hi], self._data.indices[lo:hi]
            indptr = indptr - lo
        else:
            chunk = self._data[users]
            data, indices, indptr = chunk.data, chunk.indices, chunk.indptr
        values, columns = padded_csr(data, indices, indptr)
        return np.ascontiguousarray(values), (np.ascontiguousarray(columns), indptr, indices)

    def _rank(self, users: np.ndarray, cutoff: int | None):
        """``(values, structure, entries, counts)``: the chunk's :meth:`_block` and
        :func:`rank_rows` of it down to ``cutoff`` (no entries when nothing can be ranked)."""
        values, structure = self._block(users)
        n_rows, width = values.shape
        k = width if cutoff is None else min(cutoff, width)
        if n_rows == 0 or k == 0:
            return (
                values,
                structure,
                np.zeros((n_rows, 0), dtype=np.int64),
                np.zeros(n_rows, dtype=np.int64),
            )
        try:
            entries, counts = rank_rows(values, k)
        except _NaNScore as nan:
            raise ValueError(
                f"y_score is NaN at (user {users[nan.row]}, item {nan.position})"
            ) from None
        return values, structure, entries, counts

    @staticmethod
    def _items(values: np.ndarray, structure, entries: np.ndarray) -> np.ndarray:
        """The items at the ranked ``entries`` of a block (:func:`rank_rows`), in the integer
        type of the matrix's indices."""
        if structure is None:
            return entries - _row_starts(*values.shape)
        return structure[0].reshape(-1)[entries]

    def top(self, users: np.ndarray, cutoff: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Ranked items of ``users``: ``items`` (users × at most cutoff; integers, int32 for
        most sparse scores), best first, of which the first ``counts[u]`` are ranked and the
        rest is padding."""
        if self._kind == "topk":
            items = self._data[users][:, :cutoff]
            return items, (items >= 0).sum(axis=1)
        values, structure, entries, counts = self._rank(users, cutoff)
        return self._items(values, structure, entries), counts

    def top_scored(
        self, users: np.ndarray, cutoff: int | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`top` of score matrices with each ranked item's score: ``(items, scores,
        counts)``, ``scores`` aligned with ``items`` (as float64; ``-inf`` past ``counts[u]``
        unless the row is full). For callers with their own tie rule (the RecPack adapter)."""
        if self._kind == "topk":
            raise ValueError("a TopK ranking has no scores")
        values, structure, entries, counts = self._rank(users, cutoff)
        return self._items(values, structure, entries), values.reshape(-1)[entries], counts

    def ranked(self, users: np.ndarray, cutoff: int | None):
        """Ranked items of ``users``: ``(local_rows, items, ranks)`` for ranks ≤ cutoff."""
        items, counts = self.top(users, cutoff)
        keep = np.arange(items.shape[1]) < counts[:, None]
        local, pos = np.nonzero(keep)
        return local, items[keep].astype(np.int64, copy=False), pos + 1

    def held_out_ranks(
        self,
        pattern: sp.csr_matrix,
        users: np.ndarray,
        cutoff: int | None,
        step: int,
        on_ranked: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rank of every stored entry of ``pattern`` and how many items each user has ranked.

        Parameters
        ----------
        pattern : scipy.sparse.csr_matrix
            Canonical held-out entries (users × items), stored in the rows ``users`` only.
        users : numpy.ndarray
            The rows with entries, ascending.
        cutoff : int or None
            Last rank (None: every candidate is ranked).
        step : int
            Users per chunk.
        on_ranked : callable, optional
            Called per chunk with ``(positions, items, ranks)`` of every ranked item;
            ``positions`` index ``users``.

        Returns
        -------
        ranks : numpy.ndarray of int
            1-based rank of each stored entry, 0 where it is not ranked; int32 (half the
            memory per entry) unless a row can hold 2**31 items.
        counts : numpy.ndarray of int64
            Ranked items of each of ``users``.
        """
        dtype = np.int32 if self.shape[1] < 2**31 else np.int64
        if self._kept is not None and self._kept[0] == cutoff and on_ranked is None:
            _, kept, kept_counts = self._kept
            # Both patterns are canonical: scipy's elementwise product joins them row by row
            # (linear time). It holds every entry of ``pattern`` exactly when that is a part of
            # the kept one, valued rank + 1 (never 0, so none is dropped).
            ones = sp.csr_matrix(
                (np.ones(pattern.nnz), pattern.indices, pattern.indptr), shape=pattern.shape
            )
            joined = kept.multiply(ones)
            if joined.nnz == pattern.nnz:
                return joined.data.astype(dtype) - 1, kept_counts[users]
        lengths = np.diff(pattern.indptr)
        ranks = np.zeros(pattern.nnz, dtype=dtype)
        counts = np.zeros(users.size, dtype=np.int64)
        for start in range(0, users.size, step):
            chunk = users[start : start + step]
            # Rows between the chunk's users hold no entries, so this slice is exactly theirs.
            lo, hi = pattern.indptr[chunk[0]], pattern.indptr[chunk[-1] + 1]
            rows = np.repeat(np.arange(chunk.size), lengths[chunk])
            ranked = counts[start : start + chunk.size]
            ranks[lo:hi], ranked[:], top = self._chunk_ranks(
                chunk, rows, pattern.indices[lo:hi], cutoff, on_ranked is not None
            )
            if on_ranked is not None:
                keep = np.arange(top.shape[1]) < ranked[:, None]
                local, pos = np.nonzero(keep)
                on_ranked(start + local, top[keep].astype(np.int64, copy=False), pos + 1)
        if self._keep and self._kept is None:
            every = np.zeros(self.shape[0], dtype=np.int64)
            every[users] = counts
            kept = sp.csr_matrix(
                (ranks + 1.0, pattern.indices, pattern.indptr), shape=pattern.shape
            )
            self._kept = (cutoff, kept, every)
        return ranks, counts

    def _chunk_ranks(self, users, rows, items, cutoff, want_top: bool):
        """:meth:`held_out_ranks` of one chunk: ``(ranks, counts, top)`` for the entries
        ``(users[rows], items)``, sorted by row, then item; ``top`` as :meth:`top` (None
        unless ``want_top``). Sparse scores without ``want_top`` count each entry's rank
        (:func:`_counted_ranks`); otherwise each row's ranks are written at its ranked
        positions, then read at the positions of the entries, found among the row's stored
        (or listed) items."""
        n_items = self.shape[1]
        if self._kind == "topk":
            top, counts = self.top(users, cutoff)
            if top.shape[1] == 0:  # a ranking of depth 0 ranks nothing: every DCG term is 0
                return np.zeros(rows.size, dtype=np.int64), counts, top
            n_rows = top.shape[0]
            # Listed items sorted per row (the -1 padding first) with their ranks. Keys count
            # items from 1, so padding (key 0 of its row) is never found.
            by_item = np.argsort(top, axis=1)
            listed = np.take_along_axis(top, by_item, axis=1)
            keys = _row_keys(np.arange(n_rows)[:, None], listed + 1, n_items + 1, n_rows)
            at, found = find_sorted(
                keys.reshape(-1), _row_keys(rows, items + 1, n_items + 1, n_rows)
            )
            return np.where(found, by_item.reshape(-1)[at] + 1, 0), counts, top
        if self._kind == "sparse" and not want_top:
            values, structure = self._block(users)
            width = values.shape[1]
            k = width if cutoff is None else min(cutoff, width)
            if k == 0:  # no row stores a score
                return np.zeros(rows.size, dtype=np.int64), np.zeros(users.size, np.int64), None
            ranks, counts = _counted_ranks(values, structure, rows, items, k, n_items)
            return ranks, counts, None
        values, structure, entries, counts = self._rank(users, cutoff)
        top = self._items(values, structure, entries) if want_top else None
        if entries.size == 0:  # no row stores a score
            return np.zeros(rows.size, dtype=np.int64), counts, top
        n_rows, width = values.shape
        table = np.zeros(n_rows * width, dtype=np.int32)
        table[entries] = np.arange(1, entries.shape[1] + 1, dtype=np.int32)
        if structure is None:
            ranks = table[rows * width + items]
        else:
            entry, found = _stored_entries(structure, rows, items, width, n_items)
            ranks = np.where(found, table[entry], 0)
        # Positions ranked past a row's candidates hold -inf: not ranked.
        ranks = np.where(ranks <= counts[rows], ranks, 0).astype(np.int64)
        return ranks, counts, top


def _stored_entries(
    structure: tuple[np.ndarray, np.ndarray, np.ndarray],
    rows: np.ndarray,
    items: np.ndarray,
    width: int,
    n_items: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(entry, found)``: where each ``(rows, items)`` (sorted by row, then item) is stored in
    a sparse chunk's block of ``width`` columns, as an index into the flat block (0 where it is
    not stored), and whether it is; ``structure`` as :meth:`ScoreSource._block` gives it."""
    columns, indptr, indices = structure
    n_rows = indptr.size - 1
    if indices.size == n_rows * width:  # no padding: the block is the CSR data
        stored = _row_keys(np.arange(n_rows)[:, None], columns, n_items, n_rows).reshape(-1)
    else:
        stored = _row_keys(np.repeat(np.arange(n_rows), np.diff(indptr)), indices, n_items, n_rows)
    at, found = find_sorted(stored, _row_keys(rows, items, n_items, n_rows))
    return np.where(found, at + rows * width - indptr[rows], 0), found


def _row_keys(rows: np.ndarray, items: np.ndarray, span: int, n_rows: int) -> np.ndarray:
    """``rows · span + items``, which sort like ``(row, item)`` for items below ``span``; int32
    when the keys of ``n_rows`` rows fit in it, since searching those is twice as fast."""
    dtype = np.int32 if n_rows * span < 2**31 else np.int64
    return rows.astype(dtype) * dtype(span) + items.astype(dtype, copy=False)


_SHARED: ContextVar[list | None] = ContextVar("recpack_ope_shared_ranking", default=None)


@contextmanager
def shared_ranking(y_score) -> Iterator[None]:
    """Within the block, held-out estimators validate and rank ``y_score`` (this very object)
    once: every :func:`score_source` of it is one :class:`ScoreSource`, which keeps the ranks
    of the first held-out entries it ranks, and estimators on a part of those entries (a
    stratum) look their ranks up instead of ranking again."""
    token = _SHARED.set([y_score, None])
    try:
        yield
    finally:
        _SHARED.reset(token)


def score_source(y_score, shape: tuple[int, int]) -> ScoreSource:
    """``ScoreSource(y_score, shape)``, or the one shared inside :func:`shared_ranking`."""
    shared = _SHARED.get()
    if shared is None or shared[0] is not y_score:
        return ScoreSource(y_score, shape)
    source = shared[1]
    if source is None or source.shape != (int(shape[0]), int(shape[1])):
        source = shared[1] = ScoreSource(y_score, shape)
        source._keep = True
    return source


def rank_in_batches(
    score: Callable[[np.ndarray], np.ndarray],
    users,
    k: int | None,
    n_items: int,
    *,
    exclude=None,
    keep=None,
    batch_users: int = 1024,
    progress: str | None = None,
) -> TopK:
    """Top-``k`` items (None: all ``n_items``) of each of ``users``, scored ``batch_users`` at a
    time by ``score(batch) -> (batch size × n_items)`` dense scores.

    ``exclude`` and ``keep`` are sparse users × items matrices indexed by the values of
    ``users``: an item stored in a user's ``exclude`` row (e.g. seen in training) is not a
    candidate unless it is also stored in ``keep`` (e.g. held out). Ties go to the lower item
    index (:meth:`TopK.from_scores`), so the result does not depend on the batch size.
    ``progress`` is a progress bar's description (None: no bar).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.3, 0.2]])
    >>> seen = sp.csr_matrix([[0, 1, 0], [1, 0, 0]])
    >>> rank_in_batches(lambda u: scores[u], [0, 1], 2, 3, exclude=seen).items.tolist()
    [[2, 0], [1, 2]]
    """
    k = check_positive_int(k, "k", allow_none=True) or n_items
    batch_users = check_positive_int(batch_users, "batch_users")
    users, parts = np.asarray(users, dtype=np.int64), []
    starts = range(0, users.size, batch_users)
    for start in progress_bar(starts, desc=progress or "", show=progress is not None):
        rows = users[start : start + batch_users]
        scores = np.array(score(rows), dtype=np.float64)  # a copy: masked below
        if scores.shape != (rows.size, n_items):
            raise ValueError(
                f"score gave shape {scores.shape} for {rows.size} users, not ({rows.size}, "
                f"{n_items}): one score per item"
            )
        if exclude is not None:
            masked = exclude[rows].toarray() != 0
            if keep is not None:
                masked &= keep[rows].toarray() == 0
            scores[masked] = -np.inf
        parts.append(TopK.from_scores(scores, k))
    return TopK.stack(parts) if parts else TopK(np.empty((0, min(k, n_items)), np.int64))


class ProductScores:
    """Scores of a batch of users as one product ``factors[users] @ product``, checked on each
    batch's first user against ``one_user(user)`` (the model's own per-user score); the first
    of ``products`` that reproduces it is kept, and when none does every user is scored by
    ``one_user`` from then on (:attr:`batched` is False).

    Parameters
    ----------
    one_user : callable
        ``one_user(user) -> (n_items,)`` scores of one user.
    factors : 2-D array or sparse matrix, optional
        One row per user; None scores user by user.
    products : sequence of 2-D arrays
        Candidate right-hand sides, each (factor dimension × n_items): e.g. item factors
        transposed, or an item-item matrix.
    rtol, atol
        Tolerances of the check (float32 factors agree with a float64 score to about 1e-6).

    Examples
    --------
    >>> import numpy as np
    >>> U, V = np.array([[1.0, 0.0], [0.5, 2.0]]), np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
    >>> scores = ProductScores(lambda u: U[u] @ V, U, [V.T, V])
    >>> scores(np.array([1, 0])).tolist(), scores.batched
    ([[0.5, 3.0, 6.0], [1.0, 2.0, 0.0]], True)
    """

    def __init__(self, one_user, factors=None, products=(), rtol=1e-4, atol=1e-6):
        self.one_user, self.factors, self.rtol, self.atol = one_user, factors, rtol, atol
        width = None if factors is None else factors.shape[1]
        self.products = [p for p in products if np.ndim(p) == 2 and p.shape[0] == width]
        self.batched = bool(self.products)

    def __call__(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, dtype=np.int64)
        if self.batched and users.size and users.max() < self.factors.shape[0]:
            reference = np.asarray(self.one_user(int(users[0])), dtype=np.float64)
            for product in self.products:
                if product.shape[1] != reference.size:
                    continue
                scores = np.asarray(self.factors[users] @ product, dtype=np.float64)
                if np.allclose(scores[0], reference, rtol=self.rtol, atol=self.atol):
                    self.products = [product]
                    return scores
            self.batched = False
        return np.vstack([np.asarray(self.one_user(int(u)), dtype=np.float64) for u in users])
