"""Turning model scores into ranks, vectorised over a chunk of users.

Conventions (shared by every estimator):

* A **dense** score matrix ranks every item of a row; ``-inf`` marks an item that is not a
  candidate (e.g. one the user saw in training: the caller masks those).
* A **sparse** score matrix ranks only its stored entries, as RecPack does with ``X_pred``:
  an unstored entry is not recommended. Stored zeros are candidates with score 0.
* :class:`TopK` holds precomputed rankings (item indices, best first, ``-1`` padding).
* **Ties** are broken by the lower item index first, so results are deterministic and do not
  depend on the chunk size. (RecPack's ``get_top_K_ranks`` leaves ties to ``argpartition``;
  scikit-learn's ``dcg_score`` averages over tied orders by default.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import (
    EXACT_INTEGER_LIMIT,
    check_positive_int,
    check_sparse,
    entry_position,
    first_duplicate,
    real_array,
)

__all__ = ["TopK", "top_k_positions", "padded_rows", "ScoreSource"]

_EMPTY = np.empty(0, dtype=np.int64)


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
    def from_scores(cls, y_score, k: int) -> "TopK":
        """The top-k items of every row of a score matrix, ranked once for reuse.

        Evaluating several metrics (and the simulator's online reward) on one ``TopK``
        ranks each user once instead of once per metric. Follows the conventions of the
        module docstring (``-inf`` / unstored = not a candidate, ties to the lower index);
        rows with fewer than k candidates are padded with ``-1``.
        """
        k = check_positive_int(k, "k")
        shape = getattr(y_score, "shape", np.shape(y_score))
        if len(shape) != 2:
            raise ValueError(f"y_score must be a users×items matrix, got shape {shape}")
        source = ScoreSource(y_score, shape)
        items = np.full((shape[0], min(k, shape[1])), -1, dtype=np.int64)
        step = rows_per_chunk(source.width)
        for start in range(0, shape[0], step):
            users = np.arange(start, min(start + step, shape[0]))
            local, ranked, ranks = source.ranked(users, k)
            items[users[local], ranks - 1] = ranked
        return cls(items)


def padded_rows(matrix: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Stored entries of each CSR row left-aligned in a dense block, ``-inf`` padded.

    Returns ``(values, columns)``, both of shape ``(n_rows, max stored per row)``. Within a
    row, entries keep the matrix's (sorted) column order, so "lower position" means
    "lower item index" for tie-breaking.
    """
    lengths = np.diff(matrix.indptr)
    width = int(lengths.max()) if lengths.size else 0
    rows = np.repeat(np.arange(matrix.shape[0]), lengths)
    pos = np.arange(matrix.nnz) - matrix.indptr[rows]
    values = np.full((matrix.shape[0], width), -np.inf)
    values[rows, pos] = matrix.data
    columns = np.zeros((matrix.shape[0], width), dtype=np.int64)
    columns[rows, pos] = matrix.indices
    return values, columns


def top_k_positions(values: np.ndarray, k: int | None):
    """The k largest finite entries of every row, in rank order.

    Parameters
    ----------
    values : numpy.ndarray, shape (n_rows, width)
        Scores; ``-inf`` entries are never returned.
    k : int or None
        How many per row; None means all finite entries.

    Returns
    -------
    rows, positions, ranks : numpy.ndarray of int64
        One entry per returned (row, position), ``ranks`` 1-based. Larger values rank first,
        ties go to the lower position. Cost is O(n_rows × width): ``np.partition`` finds each
        row's k-th value, then only the k selected entries are sorted.
    """
    n_rows, width = values.shape
    k = width if k is None else min(k, width)
    if n_rows == 0 or k == 0:
        return _EMPTY, _EMPTY, _EMPTY
    if k < width:
        kth = np.partition(values, width - k, axis=1)[:, width - k : width - k + 1]
        above = values > kth
        tied = values == kth
        # Of the entries tied with the k-th value, keep the leftmost ones that still fit.
        need = k - above.sum(axis=1, keepdims=True)
        take = above | (tied & (np.cumsum(tied, axis=1) <= need))
        pos = np.nonzero(take)[1].reshape(n_rows, k)
    else:
        pos = np.broadcast_to(np.arange(width), (n_rows, width))
    selected = np.take_along_axis(values, pos, axis=1)
    # An unstable sort is ~3× faster than a stable one; rows where it met a tie between
    # finite scores are sorted again stably, so ties still go to the lower position.
    order = np.argsort(-selected, axis=1)
    ranked = np.take_along_axis(selected, order, axis=1)
    tied = np.flatnonzero(
        ((ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] > -np.inf)).any(axis=1)
    )
    if tied.size:
        order[tied] = np.argsort(-selected[tied], axis=1, kind="stable")
        ranked[tied] = np.take_along_axis(selected[tied], order[tied], axis=1)
    pos = np.take_along_axis(pos, order, axis=1)
    keep = ranked > -np.inf
    rows = np.broadcast_to(np.arange(n_rows)[:, None], pos.shape)[keep]
    ranks = np.broadcast_to(np.arange(1, k + 1), pos.shape)[keep]
    return rows, pos[keep].astype(np.int64), ranks


def exact_order(values: np.ndarray) -> np.ndarray:
    """Scores as float64, in exactly their order. 64-bit integers beyond ±2**53, which float64
    would round into ties (2**53 + 1 becomes 2**53), are replaced by their rank among the
    distinct values (``np.unique``): float64 holds those exactly and they rank identically."""
    if (
        values.dtype.kind in "iu" and values.dtype.itemsize == 8 and values.size
        and (values.max() > EXACT_INTEGER_LIMIT or values.min() < -EXACT_INTEGER_LIMIT)
    ):
        return np.unique(values, return_inverse=True)[1].reshape(values.shape).astype(np.float64)
    return np.asarray(values, dtype=np.float64)


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
            canonical = checked.format == "csr" and checked.has_canonical_format
            repeat = None if canonical else first_duplicate(checked)
            if repeat is not None:
                raise ValueError(
                    f"y_score stores (user {repeat[0]}, item {repeat[1]}) more than once; scores "
                    "cannot be summed: give each (user, item) one score"
                )
            # May share the caller's buffers: never modified here; chunks are canonicalised
            # in ranked(), on the copies that row indexing makes anyway.
            scores = sp.csr_matrix(checked)
            data = exact_order(scores.data)
            if data is not scores.data:
                scores = sp.csr_matrix((data, scores.indices, scores.indptr), shape=scores.shape)
            nan = np.flatnonzero(np.isnan(scores.data))
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

    def ranked(self, users: np.ndarray, cutoff: int | None):
        """Ranked items of ``users``: ``(local_rows, items, ranks)`` for ranks ≤ cutoff."""
        if self._kind == "topk":
            items = self._data[users][:, :cutoff]
            local, pos = np.nonzero(items >= 0)
            return local, items[local, pos], pos + 1
        if self._kind == "sparse":
            chunk = self._data[users]
            chunk.sum_duplicates()  # sorts indices: ties then go to the lower item index
            values, columns = padded_rows(chunk)
            local, pos, ranks = top_k_positions(values, cutoff)
            return local, columns[local, pos], ranks
        values = exact_order(self._data[users])
        nan = np.argwhere(np.isnan(values))
        if nan.size:
            raise ValueError(f"y_score is NaN at (user {users[nan[0, 0]]}, item {nan[0, 1]})")
        return top_k_positions(values, cutoff)
