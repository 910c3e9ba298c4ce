"""Recall-paired preference (Diaz & Ferraro, SIGIR'22): compare two rankings directly.

For one user with m relevant items, ``f_i`` is the rank of the i-th relevant item a ranking
reaches. A user who wants exactly i relevant items prefers the ranking that reaches the i-th
sooner, so (Eq. 3–4)

    RPP(π, π′) = Σ_{i=1..m} p(i) · sgn(f′_i − f_i)

with the pseudo-population weights ``p(i)`` uniform (RPP), ∝ 1/log2(i+1) (dcgRPP) or ∝ 1/i
(invRPP) (§5.3), normalised over the user's m levels. With graded labels (Eq. 5), every grade
λ the user has defines a population that counts items with grade ≥ λ as relevant:

    RPP(π, π′) = Σ_λ p(λ) Σ_{i=1..m_λ} p(i | λ) · sgn(f′_{i,λ} − f_{i,λ}),  p(λ) ∝ m_λ.

A relevant item a top-k list omits is placed at the bottom of the corpus, in increasing grade
order (§3, worst case), below everything either ranking lists (the corpus is taken larger than
any list, as in the reference). For any threshold λ the omitted λ-relevant items then occupy
the corpus's last positions, so an item both rankings omit is a tie and an item only one omits
is a win for the other: omitted items get one sentinel rank past the catalogue. An item a
score matrix excludes (``-inf`` or unstored) counts as omitted.

RPP is antisymmetric, lies in [−1, 1] and is 0 for identical rankings. For M systems the win
rate of π (Eq. 7) is ``Σ_{π′} RPP(π, π′)``; :func:`win_rates` reports it divided by M − 1 (the
mean preference over the other systems, in [−1, 1]) and computes it from per-column ranks of
the search lengths, ``Σ_t sgn(f_t − f_s) = M + 1 − 2·rank(f_s)``, without forming the M² pairs.

Reference implementation: github.com/diazf/pref_eval (``measures/rpp.py``). As published
(commit 28d7bd3) its ``RelevanceVector.vector(grade)`` returns the first vector it cached
whatever the grade, so its graded RPP equals binary RPP (every positive grade relevant);
``graded=False`` reproduces it, ``graded=True`` computes Eq. 5.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._chunks import CHUNK_ELEMENTS, rows_per_chunk
from .._validation import as_csr, check_bool, check_positive_int, check_rewards
from ..inference.result import EstimateResult
from ..inference.systems import PreferenceMatrix, SystemScores
from .ranking import ScoreSource, TopK

__all__ = [
    "WEIGHTINGS",
    "RecallLevels",
    "PreferenceMatrix",
    "rpp",
    "preference_matrix",
    "win_rates",
]

#: p(i) of §5.3 by name, and the measure name the paper gives it.
WEIGHTINGS = {"uniform": "RPP", "dcg": "dcgRPP", "inverse": "invRPP"}


def _level_weights(level: np.ndarray, weighting: str) -> np.ndarray:
    """Unnormalised p(i) at 1-based recall levels ``level``."""
    if weighting == "uniform":
        return np.ones(level.size)
    if weighting == "dcg":
        return 1.0 / np.log2(level + 1.0)
    return 1.0 / level


@dataclass(frozen=True, eq=False)
class RecallLevels:
    """Every evaluated user's recall levels (i, λ) with their weights p(λ)·p(i | λ).

    Built once from ``y_true`` and shared by all systems: a system is then represented by its
    search lengths, one rank per level (:meth:`search_lengths`).

    Attributes
    ----------
    shape : tuple of int
        ``(n_users, n_items)`` of ``y_true``.
    user_ids : numpy.ndarray
        Rows of ``y_true`` with at least one relevant item, in increasing order.
    user_starts : numpy.ndarray
        Offset of each evaluated user's first level in the level arrays.
    segment : numpy.ndarray
        Per level, the (user, grade threshold) population it belongs to; levels of one
        population are contiguous and ordered by i.
    source : numpy.ndarray
        Per level, the index of a relevant entry of ``y_true`` (CSR order) in that population;
        sorting a population's ranks turns these into the levels' search lengths.
    weights : numpy.ndarray
        ``p(λ)·p(i | λ)`` per level; each user's weights sum to 1.
    name : str
        ``"RPP"``, ``"dcgRPP"`` or ``"invRPP"``.
    n_excluded_users : int
        Users of ``y_true`` without relevant items (no preference is defined for them).
    graded : bool
        Whether the levels follow Eq. 5 (grade thresholds) or binary relevance.
    """

    shape: tuple[int, int]
    user_ids: np.ndarray
    user_starts: np.ndarray
    segment: np.ndarray
    source: np.ndarray
    weights: np.ndarray
    name: str
    n_excluded_users: int
    _entries: sp.csr_matrix
    _entry_user: np.ndarray
    _entry_segment: np.ndarray
    _entry_thresholds: np.ndarray | None
    _segment_starts: np.ndarray
    _user_sizes: np.ndarray
    graded: bool = True

    @property
    def weighting(self) -> str:
        """The p(i) the levels were built with: ``"uniform"``, ``"dcg"`` or ``"inverse"``."""
        return next(key for key, name in WEIGHTINGS.items() if name == self.name)

    @classmethod
    def from_y_true(
        cls, y_true, *, weighting: str = "uniform", graded: bool = True
    ) -> RecallLevels:
        """Recall levels of held-out relevance labels.

        Parameters
        ----------
        y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
            Relevance grades ``≥ 0``; an item is relevant when its grade is > 0.
        weighting : {"uniform", "dcg", "inverse"}
            p(i): RPP, dcgRPP or invRPP (§5.3).
        graded : bool
            Eq. 5 (one population per grade threshold, p(λ) ∝ m_λ) when True; binary
            relevance (Eq. 4, every positive grade relevant) when False.
        """
        if not isinstance(weighting, str) or weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {sorted(WEIGHTINGS)}, got {weighting!r}")
        graded = check_bool(graded, "graded")
        rewards = as_csr(y_true, "y_true")
        check_rewards(rewards)
        rewards.eliminate_zeros()
        counts = np.diff(rewards.indptr)
        user_ids = np.flatnonzero(counts > 0)
        if user_ids.size == 0:
            raise ValueError("y_true has no relevant (> 0) labels: no user can be evaluated")
        entry_user = np.repeat(np.arange(user_ids.size), counts[user_ids])
        entries = np.arange(rewards.nnz)
        if graded:
            # Thresholds a user has = the user's distinct grades; an entry of grade g belongs
            # to every threshold λ ≤ g, i.e. to thresholds 0..d where d is g's index.
            order = np.lexsort((rewards.data, entry_user))
            grade, user = rewards.data[order], entry_user[order]
            first_of_user = np.r_[True, user[1:] != user[:-1]]
            distinct = np.cumsum(first_of_user | np.r_[True, grade[1:] != grade[:-1]])
            index = np.empty(order.size, dtype=np.int64)
            index[order] = distinct - np.maximum.accumulate(np.where(first_of_user, distinct, 0))
            repeats = index + 1
            source = np.repeat(entries, repeats)
            threshold = np.arange(source.size) - np.repeat(np.cumsum(repeats) - repeats, repeats)
            n_thresholds = np.maximum.reduceat(index, rewards.indptr[user_ids]) + 1
            offset = np.concatenate([[0], np.cumsum(n_thresholds)[:-1]])
            entry_segment = offset[entry_user]
            segment = entry_segment[source] + threshold
            order = np.argsort(segment, kind="stable")
            source, segment = source[order], segment[order]
            entry_thresholds = None if (repeats == 1).all() else repeats
        else:
            source, segment = entries, entry_user
            entry_segment, entry_thresholds = entry_user, None
        seg_sizes = np.bincount(segment)
        seg_starts = np.concatenate([[0], np.cumsum(seg_sizes)[:-1]])
        level = np.arange(source.size) - seg_starts[segment] + 1
        raw = _level_weights(level.astype(np.float64), weighting)
        p_level = raw / np.add.reduceat(raw, seg_starts)[segment]
        seg_user = entry_user[source[seg_starts]]
        user_total = np.bincount(seg_user, weights=seg_sizes)
        p_threshold = seg_sizes / user_total[seg_user]
        user_starts = np.searchsorted(entry_user[source], np.arange(user_ids.size))
        return cls(
            shape=rewards.shape,
            user_ids=user_ids,
            user_starts=user_starts,
            segment=segment,
            source=source,
            weights=p_level * p_threshold[segment],
            name=WEIGHTINGS[weighting],
            n_excluded_users=int(rewards.shape[0] - user_ids.size),
            _entries=rewards,
            _entry_user=entry_user,
            _entry_segment=entry_segment,
            _entry_thresholds=entry_thresholds,
            _segment_starts=seg_starts,
            _user_sizes=np.diff(np.append(user_starts, source.size)),
            graded=graded,
        )

    @property
    def n_levels(self) -> int:
        """Number of (user, threshold, i) levels."""
        return int(self.source.size)

    @property
    def omitted(self) -> int:
        """The rank given to relevant items a ranking omits: past the last catalogue item."""
        return self.shape[1] + 1

    def search_lengths(self, y_score, k: int | None = None) -> np.ndarray:
        """Rank ``f_{i,λ}`` of every level under one system's ranking.

        Parameters
        ----------
        y_score : array_like, scipy.sparse matrix or TopK
            The system's scores (users × items) or precomputed rankings, as for
            :func:`recpack_ope.metrics.dcg`: ``-inf`` (dense) or unstored (sparse) items are not
            recommended; ties go to the lower item index.
        k : int or None
            Depth of the ranking; relevant items below it count as omitted. None = the whole
            ranking.

        Returns
        -------
        numpy.ndarray of int64, shape (n_levels,)
            Search lengths, :attr:`omitted` for items the ranking omits.
        """
        return self._lengths_of([y_score], k, np.int64)[0]

    def _lengths_of(self, y_scores: list, k: int | None = None, dtype=np.int64) -> np.ndarray:
        """:meth:`search_lengths` of several systems, one row each (``dtype`` must hold
        :attr:`omitted`); a chunk's lookup table serves them all."""
        k = check_positive_int(k, "k", allow_none=True)
        sources = [
            (ScoreSource(y_score, self.shape), y_score.items if isinstance(y_score, TopK) else None)
            for y_score in y_scores
        ]
        lengths = np.full((len(sources), self.n_levels), self.omitted, dtype=dtype)
        rewards, users = self._entries, self.user_ids
        # Only items some user finds relevant can be hits: a chunk's table over those columns
        # holds the relevant entry (+1) at (user, item) and serves every system. Items no user
        # finds relevant, and TopK's -1 padding, land in each row's last column, which stays 0.
        columns, entry_column = np.unique(rewards.indices, return_inverse=True)
        n_columns = columns.size + 1
        step = min(
            users.size, rows_per_chunk(max(n_columns, *(source.width for source, _ in sources)))
        )
        # Small integers keep the lookups in cache: a cell (row × n_columns + column) fits int32
        # as a chunk holds a few million cells, and the table only a chunk's entry numbers.
        cell = np.int32 if step * n_columns < np.iinfo(np.int32).max else np.int64
        column_of_item = np.full(self.shape[1] + 1, columns.size, dtype=cell)
        column_of_item[columns] = np.arange(columns.size)
        firsts = np.arange(0, users.size, step)
        lasts = users[np.minimum(firsts + step, users.size) - 1]
        most = np.max(rewards.indptr[lasts + 1] - rewards.indptr[users[firsts]])
        # One table for all chunks: a chunk's entries are cleared after use, so the zeroing
        # costs O(relevant entries), not O(users × columns).
        table = np.zeros(
            step * n_columns,
            dtype=next(t for t in (np.int16, np.int32, np.int64) if most < np.iinfo(t).max),
        )
        positions = {}  # 1..width for every row of a chunk, by width: a TopK hit's rank
        for start in firsts:
            chunk = users[start : start + step]
            lo, hi = rewards.indptr[chunk[0]], rewards.indptr[chunk[-1] + 1]
            # Consecutive users (the usual case): their TopK rows are a view, not a copy.
            rows = (
                slice(chunk[0], chunk[-1] + 1) if chunk[-1] - chunk[0] + 1 == chunk.size else chunk
            )
            filled = (self._entry_user[lo:hi] - start) * n_columns + entry_column[lo:hi]
            table[filled] = np.arange(1, hi - lo + 1)
            for row, (source, items) in enumerate(sources):
                if items is None:
                    local, ranked, ranks = source.ranked(chunk, k)
                    found = table.take(local * n_columns + column_of_item.take(ranked))
                    hit = np.flatnonzero(
                        found > 0
                    )  # a boolean mask: nonzero() is much faster on it
                    self._place(
                        lengths[row],
                        found.take(hit).astype(np.intp) + (lo - 1),
                        ranks.take(hit),
                        ordered=False,
                    )
                    continue
                cells = column_of_item.take(items[rows, :k])
                cells += np.arange(0, chunk.size * n_columns, n_columns, dtype=cell)[:, None]
                found = table.take(cells).ravel()
                hit = np.flatnonzero(found > 0)
                width = cells.shape[1]
                if width not in positions:
                    positions[width] = np.tile(np.arange(1, width + 1), chunk.size)
                # Read row by row in rank order, the hits come sorted by (user, rank).
                self._place(
                    lengths[row],
                    found.take(hit).astype(np.intp) + (lo - 1),
                    positions[width].take(hit),
                    ordered=True,
                )
            table[filled] = 0
            positions.clear()  # the last chunk may have fewer rows
        return lengths

    def _place(
        self, lengths: np.ndarray, entry: np.ndarray, rank: np.ndarray, *, ordered: bool
    ) -> None:
        """Write the ranks of relevant entries a ranking reaches into ``lengths``: the j-th
        smallest rank of a population is its j-th level's search length. ``ordered``: the
        entries come by (user, rank)."""
        segment = self._entry_segment.take(entry)
        if self._entry_thresholds is not None:
            # An entry of grade index d counts in the populations of thresholds 0..d.
            repeats = self._entry_thresholds[entry]
            first = np.repeat(np.cumsum(repeats) - repeats, repeats)
            segment = np.repeat(segment, repeats) + np.arange(first.size) - first
            rank = np.repeat(rank, repeats)
            ordered = False
        if segment.size == 0:
            return
        if not ordered:
            order = np.argsort(segment * (self.omitted + 1) + rank)
            segment, rank = segment[order], rank[order]
        # The j-th hit of a population goes to its j-th level.
        base = int(segment[0])
        local = segment - base
        counts = np.bincount(local)
        level = (
            self._segment_starts[base : base + counts.size] - (np.cumsum(counts) - counts)
        ).take(local)
        level += np.arange(local.size)
        np.put(lengths, level, rank)

    def per_user(self, signed: np.ndarray, users: slice = slice(None)) -> np.ndarray:
        """Σ over each user's levels of ``weights × signed`` (last axis = levels).

        With ``users`` (a slice of evaluated users), ``signed`` holds only their levels.
        """
        starts = self.user_starts[users]
        lo = starts[0] if starts.size else 0
        if self.name == "RPP":
            # Uniform p(i): every level of a user weighs 1 / (the user's levels), so one sum of
            # the signs (exact for integers) and one division per user suffice.
            # Integer signs (the pairwise matrix) add up exactly, and faster, as integers.
            exact = np.int64 if signed.dtype.kind in "iub" else np.float64
            sums = np.add.reduceat(signed, starts - lo, axis=-1, dtype=exact)
            return sums / self._user_sizes[users]
        return np.add.reduceat(
            signed * self.weights[lo : lo + signed.shape[-1]], starts - lo, axis=-1
        )

    def user_blocks(self, max_levels: int):
        """Consecutive slices of evaluated users holding about ``max_levels`` levels each
        (a user is never split), with the slice of their levels."""
        # The user holding every max_levels-th level starts a block.
        cuts = np.unique(
            np.searchsorted(self.user_starts, np.arange(0, self.n_levels, max_levels), "right") - 1
        )
        bounds = np.append(cuts, self.user_ids.size)
        for a, b in zip(bounds[:-1], bounds[1:], strict=False):
            end = self.user_starts[b] if b < self.user_ids.size else self.n_levels
            yield slice(a, b), slice(self.user_starts[a], end)

    def preference_matrix(self, names, lengths: np.ndarray) -> PreferenceMatrix:
        """Per-user RPP between every pair of systems given their search lengths
        (``lengths[s]`` = :meth:`search_lengths` of system ``names[s]``)."""
        m = len(names)
        out = np.zeros((self.user_ids.size, m, m))
        for s in range(m - 1):
            # RPP(s, t) for every t > s at once; the lower triangle follows by antisymmetry.
            prefs = self.per_user(np.sign(lengths[s + 1 :] - lengths[s]))
            out[:, s, s + 1 :] = prefs.T
            out[:, s + 1 :, s] = -prefs.T
        return PreferenceMatrix(
            names=tuple(names),
            per_user=out,
            user_ids=self.user_ids,
            name=self.name,
            n_excluded_users=self.n_excluded_users,
        )

    def win_rates(self, names, lengths: np.ndarray) -> SystemScores:
        """Per-user win rates of systems given their search lengths (see :func:`win_rates`)."""
        # imported on use: start-up time (docs/performance.md)
        from scipy import stats

        m = len(names)
        if m < 2:
            raise ValueError(f"a win rate needs at least two systems, got {m}")
        per_user = np.empty((self.user_ids.size, m))
        for users, block in self.user_blocks(max(1, CHUNK_ELEMENTS // m)):
            signed = m + 1 - 2 * stats.rankdata(lengths[:, block], axis=0)
            per_user[users] = self.per_user(signed, users).T / (m - 1)
        return SystemScores(
            names=tuple(names),
            per_user=per_user,
            user_ids=self.user_ids,
            name=f"{self.name} win rate",
            n_excluded_users=self.n_excluded_users,
        )


def _levels(y_true, weighting: str | None, graded: bool | None) -> RecallLevels:
    """Levels built from ``y_true``, or ``y_true`` itself when it already is levels; then a
    ``weighting`` or ``graded`` other than the levels' own would be ignored, so it is refused."""
    if isinstance(y_true, RecallLevels):
        for arg, given, own in (
            ("weighting", weighting, y_true.weighting),
            ("graded", graded, y_true.graded),
        ):
            if given is not None and given != own:
                raise ValueError(
                    f"{arg}={given!r} would be ignored: y_true is a RecallLevels built with "
                    f"{arg}={own!r}; build the levels with RecallLevels.from_y_true(..., "
                    f"{arg}={given!r}) or leave {arg} out"
                )
        return y_true
    return RecallLevels.from_y_true(
        y_true,
        weighting="uniform" if weighting is None else weighting,
        graded=True if graded is None else graded,
    )


def _search_lengths(
    levels: RecallLevels, rankings: Mapping, k: int | None
) -> tuple[list[str], np.ndarray]:
    if not isinstance(rankings, Mapping) or len(rankings) < 2:
        raise ValueError(
            "rankings must map at least two system names to their scores or TopK rankings, got "
            f"{type(rankings).__name__} with "
            f"{len(rankings) if hasattr(rankings, '__len__') else '?'} entries"
        )
    names = [str(name) for name in rankings]
    if len(set(names)) != len(names):
        raise ValueError(f"system names must be distinct, got {names}")
    # The smallest integers that hold every rank: int16 halves the memory of int32 (hundreds
    # of systems × millions of levels) and the traffic of the pairwise sign comparisons; a
    # difference of two ranks in [1, omitted] still fits.
    dtype = next(t for t in (np.int16, np.int32, np.int64) if levels.omitted <= np.iinfo(t).max)
    return names, levels._lengths_of(list(rankings.values()), k, dtype)


def rpp(
    y_true,
    y_score_a,
    y_score_b,
    *,
    weighting: str | None = None,
    graded: bool | None = None,
    k: int | None = None,
) -> EstimateResult:
    """Recall-paired preference of system A over system B, per user and on average.

    Parameters
    ----------
    y_true : scipy.sparse matrix, array_like or RecallLevels
        Relevance grades (users × items), or levels already built from them.
    y_score_a, y_score_b : array_like, scipy.sparse matrix or TopK
        The two systems' scores or rankings (see :meth:`RecallLevels.search_lengths`).
    weighting : {"uniform", "dcg", "inverse"} or None
        p(i): RPP, dcgRPP or invRPP; None means ``"uniform"``. With ``y_true`` given as
        :class:`RecallLevels` the levels' own weighting applies: leave it None (a different
        one is refused rather than ignored).
    graded : bool or None
        Eq. 5 over grade thresholds (True, the default for None) or binary relevance (False);
        with :class:`RecallLevels`, as for ``weighting``.
    k : int or None
        Ranking depth; None = whole ranking.

    Returns
    -------
    EstimateResult
        Mean preference (> 0: A preferred) with per-user values and a t interval; 0 means
        indifference. ``result.compare`` is not needed: the value is already a paired
        difference, so a one-sample test of it against 0 is the paired test.
    """
    levels = _levels(y_true, weighting, graded)
    a = levels.search_lengths(y_score_a, k)
    b = levels.search_lengths(y_score_b, k)
    return EstimateResult(
        name=levels.name,
        terms=levels.per_user(np.sign(b - a)),
        exponents=(1,),
        user_ids=levels.user_ids,
        n_excluded_users=levels.n_excluded_users,
    )


def preference_matrix(
    y_true,
    rankings: Mapping,
    *,
    weighting: str | None = None,
    graded: bool | None = None,
    k: int | None = None,
) -> PreferenceMatrix:
    """RPP between every pair of systems, per user.

    Parameters
    ----------
    y_true : scipy.sparse matrix, array_like or RecallLevels
        Relevance grades (users × items), or levels built from them.
    rankings : mapping of str to array_like, scipy.sparse matrix or TopK
        System name → scores or rankings over the same users and items.
    weighting, graded, k
        As for :func:`rpp`.

    Returns
    -------
    PreferenceMatrix
        ``per_user[u, s, t]`` for all pairs; cost O(M² × levels), memory O(users × M²).
        For hundreds of systems use :func:`win_rates`, which never forms the pairs.
    """
    levels = _levels(y_true, weighting, graded)
    return levels.preference_matrix(*_search_lengths(levels, rankings, k))


def win_rates(
    y_true,
    rankings: Mapping,
    *,
    weighting: str | None = None,
    graded: bool | None = None,
    k: int | None = None,
) -> SystemScores:
    """Every system's per-user win rate against all the others, without forming the pairs.

    ``win_rate_u(s) = Σ_{t≠s} RPP_u(s, t) / (M − 1)`` (Eq. 7 divided by M − 1). For each
    recall level, ``Σ_t sgn(f_t − f_s) = M + 1 − 2·rank(f_s)`` with average ranks over the M
    systems, so the cost is one sort of M values per level: O(M log M × levels).

    Parameters
    ----------
    y_true, rankings, weighting, graded, k
        As for :func:`preference_matrix`.

    Returns
    -------
    SystemScores
        Per-user win rates (users × M); ``.means`` are the systems' win rates and
        ``.ordering()`` aggregates the per-user orders (MC4, Borda or mean).
    """
    levels = _levels(y_true, weighting, graded)
    return levels.win_rates(*_search_lengths(levels, rankings, k))
