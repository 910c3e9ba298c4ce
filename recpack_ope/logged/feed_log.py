"""Logged feedback: what a deployed ranking policy showed, where, and what the user did.

One row per shown (session, item): the session (trajectory) id, the item, its logged rank
(1-based), the observed reward, and optionally the logging policy's exposure propensity
``ε0`` (Jeunen et al. Eq. 8) and its Plackett–Luce selection weight (Gilotte App. A). This is
the input of the logged-feedback estimators: unbiased DCG on logs (:mod:`.logged_dcg`),
position-bias estimation (:mod:`.position_bias`) and pairwise disagreement
(:mod:`.pairwise_disagreement`).

Items and contexts index the columns and rows of the policies' score matrices. Integer ids
are used as those indices directly (like RecPack's and Cornac's internal indices); any other
ids (strings, say) are encoded in sorted order and kept in ``item_labels`` /
``context_labels``, so score matrices can be built in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validation import (
    check_float_exact,
    check_key_space,
    check_sparse,
    real_array,
)

__all__ = ["FeedLog", "ROW_RULES", "mixed_contexts_message", "row_message"]


# Ranks beyond this are refused: float64 no longer holds every integer above it.
MAX_RANK = 2**53


def _codes(values: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Non-negative integer ids as they are, anything else encoded: (codes, labels, size)."""
    if values.dtype.kind == "c":
        raise ValueError(
            f"{name} ids must be integers, text or reals, got complex dtype {values.dtype}"
        )
    if np.issubdtype(values.dtype, np.integer) or values.dtype == bool:
        if values.dtype.kind == "u" and values.size and values.max() > np.iinfo(np.int64).max:
            k = int(np.argmax(values))
            raise ValueError(
                f"{name} id of row {k} is {int(values[k])}, beyond the int64 indices ids are "
                "used as"
            )
        codes = values.astype(np.int64)
        if codes.size and codes.min() < 0:
            k = int(np.argmin(codes))
            raise ValueError(f"{name} ids must be >= 0, got {int(codes[k])} in row {k}")
        return codes, None, int(codes.max()) + 1 if codes.size else 0
    if np.issubdtype(values.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(f"{name} id of row {bad[0]} is {values[bad[0]]}")
    try:
        labels, codes = np.unique(values, return_inverse=True)
    except TypeError:  # objects that cannot be ordered: a missing id, or ids of mixed types
        _unorderable(values, name)
    if values.dtype.kind == "O":
        missing = np.flatnonzero(np.frompyfunc(_is_missing, 1, 1)(labels).astype(bool))
        if missing.size:
            row = int(np.flatnonzero(codes.ravel() == missing[0])[0])
            raise ValueError(f"{name} id of row {row} is missing ({labels[missing[0]]!r})")
    return codes.astype(np.int64).ravel(), labels, labels.size


def _is_missing(value) -> bool:
    """None, NaN or ``pd.NA`` (checked by name: the core does not import pandas)."""
    return (
        value is None
        or type(value).__name__ == "NAType"
        or (isinstance(value, float) and value != value)
    )


def _unorderable(values: np.ndarray, name: str):
    """Raise for object ids that numpy cannot sort, naming the first missing or odd one out.

    Only runs when sorting has failed, so its per-entry Python scan costs nothing otherwise."""
    for row, value in enumerate(values):
        if _is_missing(value):
            raise ValueError(f"{name} id of row {row} is missing ({value!r})") from None
    kinds = np.array([type(v).__name__ for v in values])
    other = int(np.flatnonzero(kinds != kinds[0])[0])
    raise ValueError(
        f"{name} ids mix types that cannot be ordered: row 0 is {kinds[0]} {values[0]!r}, row "
        f"{other} is {kinds[other]} {values[other]!r}; give ids of one type"
    ) from None


def _column(values, name: str, n: int, dtype=None) -> np.ndarray:
    """A 1-D column of n rows; with ``dtype`` (float64) a column of real numbers."""
    arr = np.asarray(values) if dtype is None else np.asarray(real_array(values, name), dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D column, got shape {arr.shape}")
    if arr.size != n:
        raise ValueError(f"{name} has {arr.size} rows but session has {n} (length mismatch)")
    return arr


@dataclass(frozen=True, eq=False)
class FeedLog:
    """Validated logged feedback, rows grouped by session and sorted by rank.

    Build it with :meth:`from_arrays` or :meth:`from_pandas`; the attributes are aligned
    arrays with one entry per row.

    Attributes
    ----------
    session : numpy.ndarray of int64
        Session (trajectory) code, ``0 .. n_sessions − 1``; ``session_labels[code]`` is the id.
    context : numpy.ndarray of int64
        Row of the policies' score matrices that scored this session (e.g. the user).
    item : numpy.ndarray of int64
        Column of the score matrices.
    rank : numpy.ndarray of int64
        Logged rank, 1-based.
    reward : numpy.ndarray of float64
        Observed reward ``c ≥ 0`` (click, watch, rating …).
    propensity : numpy.ndarray or None
        Logging exposure ``ε0`` in (0, 1] of the row's (context, item), if logged.
    position_propensity : numpy.ndarray or None
        ``π0(a_k at rank k | x)``: the probability that the logging policy puts the row's item
        at the row's rank, in (0, 1], if logged (the independent IPS of
        :mod:`.ranking_ips`).
    prefix_propensity : numpy.ndarray or None
        ``π0(a_1, …, a_k | x)``: the probability that the logging policy shows the session's
        items of ranks 1..k in that order, in (0, 1] and non-increasing down a session, if
        logged; at the last rank it is the whole ranking's probability (the cascade and
        standard IPS of :mod:`.ranking_ips`).
    logging_weight : numpy.ndarray or None
        Plackett–Luce weight of the item under the logging policy, scaled so that the weights
        of all of the session's *candidates* sum to 1 (the displayed ones sum to at most 1).
    indptr : numpy.ndarray
        Session s owns rows ``indptr[s]:indptr[s + 1]``.
    session_labels, item_labels, context_labels : numpy.ndarray or None
        Original ids of encoded sessions, items and contexts (None when ids were indices).
    n_items, n_contexts : int
        Columns and rows a score matrix for this log must have.
    """

    session: np.ndarray
    context: np.ndarray
    item: np.ndarray
    rank: np.ndarray
    reward: np.ndarray
    propensity: np.ndarray | None
    logging_weight: np.ndarray | None
    indptr: np.ndarray
    session_labels: np.ndarray
    item_labels: np.ndarray | None
    context_labels: np.ndarray | None
    n_items: int
    n_contexts: int
    position_propensity: np.ndarray | None = None
    prefix_propensity: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        session,
        item,
        rank,
        reward,
        *,
        context=None,
        propensity=None,
        logging_weight=None,
        position_propensity=None,
        prefix_propensity=None,
        n_items: int | None = None,
        n_contexts: int | None = None,
    ) -> FeedLog:
        """Validate and index aligned columns.

        Parameters
        ----------
        session, item, rank, reward : array_like, one entry per shown item
            Trajectory id, item id, logged 1-based rank and reward (finite, ``>= 0``).
        context : array_like, optional
            The id policies score the session by (e.g. the user); default: the session.
        propensity : array_like, optional
            Logging exposure ``ε0`` of each row, in (0, 1].
        logging_weight : array_like, optional
            Logging Plackett–Luce weights, normalised over each session's candidates (so in
            (0, 1] and summing to at most 1 over a session's rows).
        position_propensity : array_like, optional
            ``π0(a_k at rank k | x)`` of each row, in (0, 1].
        prefix_propensity : array_like, optional
            ``π0(a_1, …, a_k | x)`` of each row: the probability of the session's ranking down
            to the row's rank, in (0, 1] and non-increasing with the rank within a session.
        n_items, n_contexts : int, optional
            Size of the score matrices when ids are indices (default: largest id + 1).

        Raises
        ------
        ValueError
            On length mismatches, ranks that are not integers in 1..2**53, negative or
            non-finite rewards, propensities or weights outside (0, 1], prefix propensities that
            rise down a session, complex or text where
            numbers belong, missing ids, ids of mixed types, a session showing two items at one
            rank or one item twice, ids beyond ``n_items`` / ``n_contexts``, or integer ids so
            large that ``n_contexts × n_items`` reaches 2**63 (the int64 keys of (context,
            item) pairs).
        """
        session = np.asarray(session)
        if session.ndim != 1 or session.size == 0:
            raise ValueError(f"session must be a non-empty 1-D column, got shape {session.shape}")
        n = session.size
        item = _column(item, "item", n)
        rank = _column(real_array(rank, "rank"), "rank", n)
        reward = _column(reward, "reward", n, np.float64)
        if not (np.issubdtype(rank.dtype, np.integer) or np.issubdtype(rank.dtype, np.floating)):
            raise ValueError(f"rank must be numeric, got dtype {rank.dtype}")
        # The extremes decide most columns at once; the row-by-row test only names the culprit.
        if not (rank.dtype.kind in "iu" and rank.min() >= 1 and rank.max() <= MAX_RANK):
            bad = np.flatnonzero(
                ~np.isfinite(rank) | (rank < 1) | (rank > MAX_RANK) | (rank != np.round(rank))
            )
            if bad.size:
                raise ValueError(row_message("rank", f"row {bad[0]}", rank[bad[0]]))
        rank = rank.astype(np.int64)
        if not (reward.min() >= 0 and np.isfinite(reward.max())):  # NaN fails the first test
            bad = np.flatnonzero(~np.isfinite(reward) | (reward < 0))
            raise ValueError(row_message("reward", f"row {bad[0]}", reward[bad[0]]))
        codes, session_labels, _ = _codes(session, "session")
        if session_labels is None:  # integer session ids: still renumber them densely
            session_labels, codes = _dense(codes)
        items, item_labels, items_seen = _codes(item, "item")
        if context is None:
            contexts, context_labels, contexts_seen = codes, None, session_labels.size
        else:
            contexts, context_labels, contexts_seen = _codes(
                _column(context, "context", n), "context"
            )
        n_items = _size(n_items, items_seen, "n_items", "item")
        n_contexts = _size(n_contexts, contexts_seen, "n_contexts", "context")
        check_key_space((n_contexts, n_items), "the log's contexts × items")

        # Rows by session, then rank. Most logs arrive in that order already, which one pass
        # confirms without moving anything; many others show ranks 1..length in each session,
        # whose places follow without sorting.
        sizes = np.bincount(codes, minlength=session_labels.size)
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        order = _session_order(codes, rank, indptr)
        if order is None:
            reward = reward.copy()  # the log owns its columns
        else:
            items, rank, reward = (a[order] for a in (items, rank, reward))
            codes = np.repeat(np.arange(session_labels.size), sizes)  # = codes[order], in sequence
            contexts = codes if context is None else contexts[order]
            repeated = np.flatnonzero((codes[1:] == codes[:-1]) & (rank[1:] == rank[:-1]))
            if repeated.size:
                raise ValueError(
                    f"session {_label(session_labels, codes[repeated[0]])!r} shows two items "
                    f"at rank {rank[repeated[0]]}"
                )
        twice = _repeated_pair(codes, items, session_labels.size, items_seen)
        if twice is not None:
            raise ValueError(
                f"session {_label(session_labels, twice[0])!r} shows item "
                f"{_label(item_labels, twice[1])!r} twice"
            )
        if context is not None:
            mixed = np.flatnonzero((contexts[1:] != contexts[:-1]) & (codes[1:] == codes[:-1]))
            if mixed.size:
                s = codes[mixed[0] + 1]
                # Its smallest and largest context, as Spark's check names them.
                own = contexts[indptr[s] : indptr[s + 1]]
                raise ValueError(
                    mixed_contexts_message(
                        _label(session_labels, s),
                        _label(context_labels, own.min()),
                        _label(context_labels, own.max()),
                    )
                )
        if propensity is not None:
            propensity = _column(propensity, "propensity", n, np.float64)
            propensity = propensity.copy() if order is None else propensity[order]
            _check_probabilities(propensity, "propensity", order)
        if logging_weight is not None:
            logging_weight = _column(logging_weight, "logging_weight", n, np.float64)
            logging_weight = logging_weight.copy() if order is None else logging_weight[order]
            _check_probabilities(logging_weight, "logging_weight", order)
            totals = np.add.reduceat(logging_weight, indptr[:-1])
            over = np.flatnonzero(totals > 1 + 1e-9)
            if over.size:
                raise ValueError(
                    f"logging weights of session {_label(session_labels, over[0])!r} sum to "
                    f"{totals[over[0]]:.6g} > 1; normalise them over the session's candidates"
                )
        position_propensity = _probabilities(position_propensity, "position_propensity", n, order)
        prefix_propensity = _probabilities(prefix_propensity, "prefix_propensity", n, order)
        if prefix_propensity is not None:
            rising = np.flatnonzero(
                (codes[1:] == codes[:-1])
                & (prefix_propensity[1:] > prefix_propensity[:-1] * (1 + 1e-12))
            )
            if rising.size:
                k = rising[0]
                raise ValueError(
                    f"prefix_propensity of session {_label(session_labels, codes[k])!r} rises "
                    f"from {prefix_propensity[k]:.6g} at rank {rank[k]} to "
                    f"{prefix_propensity[k + 1]:.6g} at rank {rank[k + 1]}: a longer prefix of a "
                    "ranking cannot be more probable than a shorter one"
                )
        return cls(
            session=codes,
            context=contexts,
            item=items,
            rank=rank,
            reward=reward,
            propensity=propensity,
            logging_weight=logging_weight,
            indptr=indptr,
            session_labels=session_labels,
            item_labels=item_labels,
            context_labels=context_labels,
            n_items=n_items,
            n_contexts=n_contexts,
            position_propensity=position_propensity,
            prefix_propensity=prefix_propensity,
        )

    @classmethod
    def from_pandas(
        cls,
        frame,
        *,
        session: str = "session",
        item: str = "item",
        rank: str = "rank",
        reward: str = "reward",
        context: str | None = None,
        propensity: str | None = None,
        logging_weight: str | None = None,
        position_propensity: str | None = None,
        prefix_propensity: str | None = None,
        n_items: int | None = None,
        n_contexts: int | None = None,
    ) -> FeedLog:
        """Build from a DataFrame's columns, named by the keyword arguments.

        Missing columns raise a ``KeyError`` that lists the frame's columns; a column that
        appears twice, or has a missing value (NaN, None, ``pd.NA`` of a nullable dtype), a
        ``ValueError`` naming it. Nullable and categorical columns are read as their values;
        see :meth:`from_arrays` for the other checks.
        """
        if not hasattr(frame, "columns") or not hasattr(frame, "iloc"):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        wanted = {
            "session": session,
            "item": item,
            "rank": rank,
            "reward": reward,
            "context": context,
            "propensity": propensity,
            "logging_weight": logging_weight,
            "position_propensity": position_propensity,
            "prefix_propensity": prefix_propensity,
        }
        missing = [c for c in wanted.values() if c is not None and c not in frame.columns]
        if missing:
            raise KeyError(f"columns {missing} not in the frame; it has {list(frame.columns)}")
        cols = {k: (None if c is None else _series(frame, c, k)) for k, c in wanted.items()}
        return cls.from_arrays(
            cols.pop("session"),
            cols.pop("item"),
            cols.pop("rank"),
            cols.pop("reward"),
            **cols,
            n_items=n_items,
            n_contexts=n_contexts,
        )

    def __repr__(self) -> str:
        columns = [
            name
            for name in ("propensity", "logging_weight", "position_propensity", "prefix_propensity")
            if getattr(self, name) is not None
        ]
        return (
            f"FeedLog({self.n_rows:,} rows, {self.n_sessions:,} sessions, {self.n_items:,} items, "
            f"{self.n_contexts:,} contexts; probabilities: {', '.join(columns) or 'none'})"
        )

    @property
    def n_rows(self) -> int:
        """Number of logged impressions."""
        return int(self.item.size)

    @property
    def n_sessions(self) -> int:
        """Number of sessions (trajectories)."""
        return int(self.indptr.size - 1)

    @property
    def session_context(self) -> np.ndarray:
        """Context of every session."""
        return self.context[self.indptr[:-1]]

    def session_label(self, row: int):
        """Original id of the session that owns ``row`` (for messages)."""
        return _label(self.session_labels, self.session[row])

    def per_session(self, values: np.ndarray) -> np.ndarray:
        """Sum of a per-row quantity within each session."""
        return np.bincount(self.session, weights=values, minlength=self.n_sessions)

    def above(self, values: np.ndarray) -> np.ndarray:
        """Sum of a per-row quantity over the rows of the same session above each row (rows
        are in rank order within a session).

        Examples
        --------
        >>> log = FeedLog.from_arrays([0, 0, 0, 1], [0, 1, 2, 0], [1, 2, 3, 1], [0, 0, 0, 0])
        >>> log.above(np.array([0.5, 0.25, 0.125, 0.5])).tolist()
        [0.0, 0.5, 0.75, 0.0]
        """
        drawn = np.cumsum(values) - values
        return drawn - drawn[self.indptr[self.session]]

    def row_values(self, scores, name: str = "scores") -> np.ndarray:
        """Per-row values of a contexts × items matrix (or a per-row array, checked).

        A sparse matrix must store every logged (context, item); an unstored one raises.
        """
        if sp.issparse(scores) or np.ndim(scores) == 2:
            if scores.shape != (self.n_contexts, self.n_items):
                raise ValueError(
                    f"shape mismatch: {name} has shape {scores.shape}, the log needs "
                    f"({self.n_contexts} contexts, {self.n_items} items)"
                )
            if sp.issparse(scores):
                csr = sp.csr_matrix(check_sparse(scores, name))
                check_float_exact(csr.data, name, lambda k: f"stored entry {k}")
                csr = sp.csr_matrix(csr, dtype=np.float64)
                csr.sum_duplicates()  # canonical: sorted indices, so the keys are sorted
                stored = _lookup_csr(csr, self.context, self.item)
                missing = np.flatnonzero(stored < 0)
                if missing.size:
                    k = missing[0]
                    raise ValueError(
                        f"{name} does not score item {self.item[k]} for context {self.context[k]} "
                        f"(logged in session {self.session_label(k)!r})"
                    )
                values = csr.data[stored]
            else:
                logged = real_array(scores, name, axes=("context", "item"))[self.context, self.item]
                check_float_exact(logged, name, lambda k: f"row {k} of the log")
                values = np.asarray(logged, dtype=np.float64)
        else:
            given = real_array(scores, name)
            check_float_exact(given, name, lambda k: f"row {k} of the log")
            values = np.asarray(given, dtype=np.float64)
            if values.shape != (self.n_rows,):
                raise ValueError(
                    f"{name} must have one value per logged row ({self.n_rows}) or be a "
                    f"contexts × items matrix, got shape {values.shape}"
                )
        nan = np.flatnonzero(np.isnan(values))
        if nan.size:
            raise ValueError(
                f"{name} is NaN for item {self.item[nan[0]]} in session "
                f"{self.session_label(nan[0])!r}"
            )
        return values


def _probabilities(values, name: str, n: int, order: np.ndarray | None) -> np.ndarray | None:
    """An optional column of probabilities in (0, 1], in the log's row order."""
    if values is None:
        return None
    column = _column(values, name, n, np.float64)
    column = column.copy() if order is None else column[order]
    _check_probabilities(column, name, order)
    return column


def _series(frame, column, role: str) -> np.ndarray:
    """A frame column's values as numpy, refusing repeated columns and missing values."""
    values = frame[column]
    if getattr(values, "ndim", 1) != 1:
        raise ValueError(f"column {column!r} ({role}) appears {values.shape[1]} times in the frame")
    absent = np.flatnonzero(np.asarray(values.isna(), dtype=bool))
    if absent.size:
        k = int(absent[0])
        raise ValueError(
            f"column {column!r} ({role}) has a missing value at row {k} (index "
            f"{values.index[k]!r}); fill or drop it"
        )
    return values.to_numpy()


def _lookup_csr(csr: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Index into ``csr.data`` of each (row, col), −1 where nothing is stored."""
    rows_of = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    return find_keys(rows_of * csr.shape[1] + csr.indices, rows * np.int64(csr.shape[1]) + cols)


def find_keys(sorted_keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Position of each wanted key in a sorted key array, −1 where it is absent."""
    if sorted_keys.size == 0:
        return np.full(wanted.size, -1)
    pos = np.minimum(np.searchsorted(sorted_keys, wanted), sorted_keys.size - 1)
    return np.where(sorted_keys[pos] == wanted, pos, -1)


def _dense(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` of ids >= 0, in O(n) when they are already
    grouped in increasing order or when a table over the ids is small."""
    if np.all(codes[1:] >= codes[:-1]):
        new = np.empty(codes.size, dtype=bool)
        new[0] = True
        np.not_equal(codes[1:], codes[:-1], out=new[1:])
        return codes[new], np.cumsum(new) - 1
    if codes.max() < 4 * codes.size:
        present = np.zeros(int(codes.max()) + 1, dtype=bool)
        present[codes] = True
        return np.flatnonzero(present), (np.cumsum(present) - 1)[codes]
    labels, inverse = np.unique(codes, return_inverse=True)
    return labels, inverse.ravel()


def _session_order(codes: np.ndarray, rank: np.ndarray, indptr: np.ndarray) -> np.ndarray | None:
    """Row order that groups sessions by code and sorts each by rank (stable), or None when
    the rows are in that order with no rank repeated within a session."""
    if np.all((codes[1:] > codes[:-1]) | ((codes[1:] == codes[:-1]) & (rank[1:] > rank[:-1]))):
        return None
    # Ranks 1..length of every session: each row's place is indptr[session] + rank − 1.
    place = indptr[codes] + rank - 1
    if np.all(rank <= np.diff(indptr)[codes]) and np.all(
        np.bincount(place, minlength=codes.size) == 1
    ):
        order = np.empty(codes.size, dtype=np.int64)
        order[place] = np.arange(codes.size)
        return order
    return np.lexsort((rank, codes))


def _repeated_pair(sessions: np.ndarray, items: np.ndarray, n_sessions: int, n_items: int):
    """(session, item) of the first pair (in that order) that occurs twice, or None.

    Sorting the values of one int64 key is several times faster than sorting rows; where the
    key would overflow, rows are sorted by both columns."""
    if n_sessions * max(n_items, 1) < 2**63:
        key = np.sort(sessions * np.int64(max(n_items, 1)) + items)
        twice = np.flatnonzero(key[1:] == key[:-1])
        return None if not twice.size else divmod(int(key[twice[0]]), max(n_items, 1))
    order = np.lexsort((items, sessions))
    s, i = sessions[order], items[order]
    twice = np.flatnonzero((s[1:] == s[:-1]) & (i[1:] == i[:-1]))
    return None if not twice.size else (s[twice[0]], i[twice[0]])


def _size(given: int | None, seen: int, name: str, what: str) -> int:
    if given is None:
        return seen
    if isinstance(given, (bool, np.bool_)) or not isinstance(given, (int, np.integer)):
        raise ValueError(f"{name} must be an integer or None, got {given!r}")
    if given < seen:
        raise ValueError(f"{name}={given!r} but the log has {what} index {seen - 1}")
    return int(given)


def _check_probabilities(column: np.ndarray, name: str, order: np.ndarray | None) -> None:
    """Refuse the first value (in session and rank order) of ``column`` outside (0, 1]."""
    if not (column.min() > 0 and column.max() <= 1):  # NaN fails the first test
        k = int(np.flatnonzero(~(column > 0) | ~(column <= 1))[0])
        raise ValueError(row_message(name, f"row {k if order is None else order[k]}", column[k]))


#: What a row of a feed log must hold, by column (:func:`row_message`).
ROW_RULES = {
    "rank": "rank of {row} is {value}; ranks are integers >= 1 (at most 2**53)",
    "reward": "reward of {row} is {value}; rewards are finite and >= 0",
    "propensity": (
        "propensity {value} of {row} lies outside (0, 1]; propensities are exposure probabilities"
    ),
    "logging_weight": (
        "logging_weight {value} of {row} lies outside (0, 1]; weights are normalised over the "
        "session's candidates"
    ),
    "position_propensity": (
        "position_propensity {value} of {row} lies outside (0, 1]; it is a probability of the "
        "logging policy"
    ),
    "prefix_propensity": (
        "prefix_propensity {value} of {row} lies outside (0, 1]; it is a probability of the "
        "logging policy"
    ),
}


def row_message(column: str, row: str, value) -> str:
    """The refusal of a feed log's ``value`` of ``column`` in ``row`` (e.g. ``"row 3"``)
    outside :data:`ROW_RULES`, the same on every engine.

    Examples
    --------
    >>> from recpack_ope.logged.feed_log import row_message
    >>> row_message("rank", "row 3", 0.0)
    'rank of row 3 is 0.0; ranks are integers >= 1 (at most 2**53)'
    """
    return ROW_RULES[column].format(row=row, value=value)


def mixed_contexts_message(session, low, high) -> str:
    """The refusal of a session logged under two contexts (its smallest ``low`` and largest
    ``high``), the same on every engine.

    Examples
    --------
    >>> from recpack_ope.logged.feed_log import mixed_contexts_message
    >>> mixed_contexts_message("s", "u1", "u2")
    "session 's' has rows with different contexts ('u1' and 'u2'); a session is one context's"
    """
    return (
        f"session {session!r} has rows with different contexts ({low!r} and {high!r}); "
        "a session is one context's"
    )


def _label(labels: np.ndarray | None, code: int):
    """The original id behind a code, as a plain Python value for messages."""
    value = code if labels is None else labels[code]
    return value.item() if isinstance(value, np.generic) else value
