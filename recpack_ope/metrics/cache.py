"""What metrics that a framework evaluates one after another share.

Frameworks such as RecPack compute every metric of a pipeline separately, on the same
predictions matrix and on a new copy of the held-out data each time, and tell a metric
neither its pipeline nor its model.

* :func:`rank_ties_by` ranks predictions as the core does, except the rows with tied scores,
  which the framework's own ranking orders (so a metric sees the framework's lists);
* :class:`RankingCache` ranks the same predictions once per cutoff and prepares the held-out
  data (:func:`~recpack_ope.metrics.dcg.prepare_held_out`) once per held-out contents,
  discount and propensities, for the DCG family (``_dcg(..., held_out=...)``);
* :class:`WinRatePools` gathers the recall-paired-preference metrics of the models evaluated
  one after another on the same held-out data, whose win rates need each other.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import check_positive_int, check_sparse
from ..inference.result import EstimateResult
from ..propensity.discount import Discount
from ..propensity.weights import resolve_propensity
from .dcg import HeldOut, prepare_held_out
from .ranking import ScoreSource, TopK, exact_order, rank_rows

__all__ = ["RankingCache", "Snapshot", "WinRatePools", "rank_ties_by"]

#: Cells of the mask that checks a chunk of dense rows for repeated items: the mask and the
#: chunk's keys (8 bytes per entry) stay in the core's cache.
_MARK_CELLS = 1 << 16


def rank_ties_by(y_pred, K: int, rank_tied: Callable[[sp.csr_matrix, int], np.ndarray]) -> TopK:
    """Every user's top-K items of sparse scores, rows with tied scores ranked by a framework.

    The core ranks ties by the lower item index; a framework may order them otherwise (RecPack
    by whatever ``np.argpartition`` leaves). Rows whose top K+1 scores hold a tie are ranked
    by ``rank_tied``, the others by the vectorised core, so models with many ties (e.g.
    popularity) cost as much as the framework's own loop and no more.

    Parameters
    ----------
    y_pred : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Scores; only stored entries are candidates.
    K : int
        Cutoff.
    rank_tied : callable
        ``rank_tied(rows, K)``: the framework's top-K items (−1 past a row's candidates) of
        the CSR rows it is given, as an integer array of shape (rows, min(K, n_items)).

    Returns
    -------
    TopK

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recpack_ope.metrics.cache import rank_ties_by
    >>> y_pred = sp.csr_matrix([[0.9, 0.1, 0.5], [0.5, 0.5, 0.0]])
    >>> last_first = lambda rows, K: np.array([[1, 0]])  # a framework's order of the tie
    >>> rank_ties_by(y_pred, 2, last_first).items.tolist()
    [[0, 2], [1, 0]]
    """
    K = check_positive_int(K, "K")
    # Checked before scipy's compiled conversion reads a corrupt structure.
    scores = sp.csr_matrix(check_sparse(y_pred, "y_pred") if sp.issparse(y_pred) else y_pred)
    source, n_users = _StoredOrder.of(scores) or ScoreSource(scores, scores.shape), scores.shape[0]
    items = np.full((n_users, min(K, scores.shape[1])), -1, dtype=np.int64)
    tied, step = [np.zeros(0, dtype=np.int64)], rows_per_chunk(source.width)
    for start in range(0, n_users, step):
        users = np.arange(start, min(start + step, n_users))
        # The ranked scores come with the ranking: no second look-up in the sparse matrix.
        ranked_items, ranked, counts = source.top_scored(users, K + 1)
        candidate = np.arange(ranked.shape[1]) < counts[:, None]
        ties = ((ranked[:, 1:] == ranked[:, :-1]) & candidate[:, 1:]).any(axis=1)
        tied.append(start + np.flatnonzero(ties))
        top = np.where(candidate, ranked_items, -1)[:, :K]
        items[start : start + users.size, : top.shape[1]] = top
    tied = np.concatenate(tied)
    if tied.size:
        items[tied] = rank_tied(scores[tied], K)
    return TopK(items)


class _StoredOrder:
    """The rows of a CSR matrix that stores a score for most items, ranked in stored order.

    :func:`rank_ties_by` needs no row's items sorted: the framework orders the rows with a tie
    among their K+1 largest scores, and the other rows rank alike in any order. So such
    scores, e.g. RecPack's ``X @ B`` predictions (every row full, items unsorted), are ranked
    as one block of views of the matrix's arrays, where :class:`ScoreSource` would first sort
    every row's items into a copy.
    """

    def __init__(self, scores: sp.csr_matrix, values: np.ndarray, columns: np.ndarray) -> None:
        self._scores, self._values, self._columns = scores, values, columns
        self.width = values.shape[1]

    @classmethod
    def of(cls, scores: sp.csr_matrix) -> _StoredOrder | None:
        """The ranking of ``scores`` in stored order, or None for :class:`ScoreSource`: when
        the rows differ in length or store fewer than half the items, when the matrix is
        canonical (ranked as views already), or when it stores an entry twice (named there)."""
        n_rows, n_items = scores.shape
        width = scores.nnz // n_rows if n_rows else 0
        if (
            not width
            or 2 * width < n_items
            or scores.nnz != n_rows * width
            or scores.has_canonical_format
            or not np.array_equal(scores.indptr, np.arange(0, scores.nnz + 1, width))
        ):
            return None
        columns = scores.indices.reshape(n_rows, width)
        # Each row's items are distinct when marking them marks as many cells as it stores.
        # A chunk's mask (at most twice its entries) and keys stay in the core's cache.
        step = max(1, _MARK_CELLS // n_items)
        for start in range(0, n_rows, step):
            block = columns[start : start + step]
            seen = np.zeros(block.shape[0] * n_items, dtype=bool)
            # Index arrays of numpy's own integer type are not converted before scattering.
            seen[np.arange(0, seen.size, n_items, dtype=np.intp)[:, None] + block] = True
            if np.count_nonzero(seen) != block.size:
                return None
        return cls(scores, exact_order(scores.data).reshape(n_rows, width), columns)

    def top_scored(
        self, users: np.ndarray, cutoff: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`ScoreSource.top_scored` of consecutive ``users``, ties in any order."""
        rows = slice(int(users[0]), int(users[-1]) + 1)
        values = self._values[rows]
        try:
            entries, counts = rank_rows(values, min(cutoff, self.width))
        except ValueError:  # a NaN, which rank_rows always finds: named by its (user, item)
            ScoreSource(self._scores, self._scores.shape)
            raise
        return self._columns[rows].reshape(-1)[entries], values.reshape(-1)[entries], counts


class Snapshot:
    """A copy of an array's or sparse matrix's buffers, to tell whether another matrix (or the
    same one, edited in place) has the same contents.

    Comparing with a copy is exact, so an edit is never missed, and costs less than a checksum
    of the buffers; the price is one more copy in memory.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recpack_ope.metrics.cache import Snapshot
    >>> m = sp.csr_matrix([[0.0, 1.0], [2.0, 0.0]])
    >>> snapshot = Snapshot(m)
    >>> snapshot.matches(m.copy())
    True
    >>> m.data[0] = 5.0
    >>> snapshot.matches(m)
    False
    """

    def __init__(self, matrix) -> None:
        self._shape, self._arrays = matrix.shape, tuple(a.copy() for a in self._buffers(matrix))

    @staticmethod
    def _buffers(matrix) -> tuple[np.ndarray, ...]:
        if sp.issparse(matrix):
            csr = matrix.tocsr()
            return csr.data, csr.indices, csr.indptr
        return (np.asarray(matrix),)

    def matches(self, matrix) -> bool:
        """Whether ``matrix`` has the shape, format, dtypes and values of the copy."""
        if matrix.shape != self._shape or sp.issparse(matrix) != (len(self._arrays) == 3):
            return False
        return all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            for a, b in zip(self._buffers(matrix), self._arrays, strict=True)
        )


class RankingCache:
    """The ranking of the last sparse predictions matrix seen, and the held-out data prepared
    against it.

    Parameters
    ----------
    rank : callable
        ``rank(y_pred, K) -> TopK``: how the framework ranks its predictions (e.g. with its
        own order of tied scores).

    Notes
    -----
    A ranking is served again only for the same matrix object (held weakly), the same K and
    the same contents: an edit in place ranks again. Dense predictions are ranked every time.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recpack_ope.metrics.cache import RankingCache
    >>> from recpack_ope.metrics.ranking import TopK
    >>> cache = RankingCache(TopK.from_scores)
    >>> y_pred = sp.csr_matrix([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    >>> first = cache.ranking(y_pred, 2)
    >>> first.items.tolist()
    [[0, 2], [1, 2]]
    >>> cache.ranking(y_pred, 2) is first
    True
    """

    def __init__(self, rank: Callable[..., TopK]) -> None:
        self._rank = rank
        self._ref, self._K, self._scores, self._ranking = None, None, None, None
        self._held_out: list[tuple[Discount, Snapshot, Snapshot | None, HeldOut]] = []

    def ranking(self, y_pred, K: int) -> TopK:
        """The top-K lists of ``y_pred``, ranked once while the matrix and K stay the same."""
        if not sp.issparse(y_pred):
            return self._rank(y_pred, K)
        csr = y_pred if y_pred.format == "csr" else check_sparse(y_pred, "y_pred").tocsr()
        if (
            self._ref is None
            or self._ref() is not y_pred
            or self._K != K
            or not self._scores.matches(csr)
        ):
            self._ranking = self._rank(y_pred, K)
            self._ref, self._K, self._scores = weakref.ref(y_pred), K, Snapshot(csr)
            self._held_out = []
        return self._ranking

    def held_out(self, y_true, ranking: TopK, *, discount: Discount, propensity) -> HeldOut:
        """:func:`~recpack_ope.metrics.dcg.prepare_held_out` of ``y_true`` against
        ``ranking`` (without impressions), prepared once per held-out contents, discount and
        propensities met on the cached ranking."""
        cached = ranking is self._ranking and sp.issparse(y_true) and y_true.format == "csr"
        if cached:
            p = None if propensity is None else resolve_propensity(propensity, y_true.shape)
            for curve, truth, given, prepared in self._held_out:
                if (
                    curve == discount
                    and truth.matches(y_true)
                    and (p is None if given is None else p is not None and given.matches(p))
                ):
                    return prepared
        prepared = prepare_held_out(
            y_true,
            ranking,
            discount=discount,
            propensity=propensity,
            impressions=None,
            chunk_users=None,
        )
        if cached:
            self._held_out.append(
                (discount, Snapshot(y_true), None if p is None else Snapshot(p), prepared)
            )
        return prepared


class _Pool:
    """Members of one pool in evaluation order, held weakly, and their win rates once read."""

    def __init__(self) -> None:
        self.members: list[weakref.ref] = []
        self.closed = False
        self._rates: tuple[list[int], object] | None = None

    def win_rate(self, member, name: str) -> EstimateResult:
        self.closed = True
        members = [m for m in (ref() for ref in self.members) if m is not None]
        if len(members) < 2:
            raise ValueError(
                f"{name} is a win rate against the other models evaluated with it, but only one "
                "model was evaluated when it was read: add at least one more. An RPP metric "
                "cannot be an optimisation metric (a win rate depends on the pool); optimise "
                "e.g. NDCGK and add the RPP metric to the evaluation"
            )
        key = [id(m) for m in members]
        if self._rates is None or self._rates[0] != key:
            lengths = np.vstack([m.search_lengths_ for m in members])
            self._rates = (key, member.levels_.win_rates([f"#{i}" for i in key], lengths))
        return replace(self._rates[1].estimate(f"#{id(member)}"), name=name)


class WinRatePools:
    """Pools of recall-paired-preference metrics whose win rates are computed against each
    other (Diaz & Ferraro SIGIR'22, Eq. 7 / (M − 1)).

    A member (any object with ``levels_``, the :class:`~recpack_ope.metrics.rpp.RecallLevels`
    of its held-out data, and ``search_lengths_`` of its model) joins the open pool of its key
    (e.g. metric name, cutoff and a fingerprint of the held-out data). Reading a member's win
    rate closes its pool, so members that join later start a new one: a pool is the models
    evaluated between two reads. Members are held weakly.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics.cache import WinRatePools
    >>> from recpack_ope.metrics.ranking import TopK
    >>> from recpack_ope.metrics.rpp import RecallLevels
    >>> class Member:
    ...     def __init__(self, levels, items):
    ...         self.levels_ = levels
    ...         self.search_lengths_ = levels.search_lengths(TopK(np.array(items)), 2)
    >>> levels = RecallLevels.from_y_true(np.array([[1, 0, 1], [0, 1, 0]]))
    >>> a, b = Member(levels, [[0, 2], [1, 0]]), Member(levels, [[1, 0], [2, 1]])
    >>> pools = WinRatePools()
    >>> for member in (a, b):
    ...     member.pool = pools.join("RPPK_2", member)
    >>> a.pool.win_rate(a, "RPPK_2").value, b.pool.win_rate(b, "RPPK_2").value
    (1.0, -1.0)
    """

    def __init__(self) -> None:
        self._open: dict[Hashable, _Pool] = {}

    def join(self, key: Hashable, member) -> _Pool:
        """Add ``member`` to the open pool of ``key``; the pool's ``win_rate(member, name)``
        is the member's per-user win rates, named ``name``."""
        for closed in [k for k, pool in self._open.items() if pool.closed]:
            del self._open[closed]
        pool = self._open.setdefault(key, _Pool())
        pool.members.append(weakref.ref(member))
        return pool
