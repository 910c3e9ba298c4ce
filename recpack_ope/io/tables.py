"""Long tables — parquet or CSV files with one row per (user, item) — as the core's inputs.

* held-out evaluation: ``held_out`` (user, item, reward), one ``recommendations`` table per
  model (user, item and score or rank) and optionally ``propensity`` (item, propensity) become
  a users × items ``y_true``, one sparse score matrix per model and a per-item propensity
  vector (:func:`held_out_tables`), ready for :func:`recpack_ope.dcg` and its relatives;
* logged feedback: a ``feed_log`` (session, context, item, rank, reward, and the logging
  probabilities it has: propensity, position_propensity, prefix_propensity, logging_weight) and
  one ``target`` table per target ranking (context, item and score or rank) become a
  :class:`~recpack_ope.logged.feed_log.FeedLog` and contexts × items score matrices for
  :class:`~recpack_ope.logged.policies.DeterministicRanker` (:func:`feed_log_tables`).

Ids are indexed in increasing order (numbers by value, text by code point), so tied scores go
to the lower item id, as on Spark (:mod:`recpack_ope.spark`); a rank r becomes the score −r.
Bad rows are refused with the same rules as the Spark engine, and every message names the
table (file) and column and shows an offending row. Files are read with pyarrow
(``.parquet``/``.pq`` with ``pyarrow.parquet``, ``.csv`` with ``pyarrow.csv``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..logged.feed_log import FeedLog

__all__ = [
    "FORMATS",
    "FeedLogTables",
    "HeldOutTables",
    "feed_log_tables",
    "held_out_tables",
    "read_table",
    "table_format",
]

#: The optional columns of a feed log: the logging policy's probabilities, each read when
#: the log has it (:class:`~recpack_ope.logged.feed_log.FeedLog`).
LOG_PROBABILITIES = ("propensity", "position_propensity", "prefix_propensity", "logging_weight")

#: File extensions and the format they are read as.
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def table_format(path: str | os.PathLike) -> str:
    """``"parquet"`` or ``"csv"``, from the extension of ``path``.

    Raises
    ------
    ValueError
        For any other extension.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"cannot tell the format of {str(path)!r} from its extension {suffix!r}: "
            f"use one of {', '.join(FORMATS)}"
        )
    return FORMATS[suffix]


def read_table(path: str | os.PathLike):
    """A parquet (``.parquet``, ``.pq``) or CSV (``.csv``, with a header line) file as a
    ``pyarrow.Table``.

    Raises
    ------
    ValueError
        For an unknown extension or a file pyarrow cannot parse.
    FileNotFoundError
        When the file does not exist.
    """
    if table_format(path) == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    import pyarrow.csv as pcsv

    return pcsv.read_csv(path)


@dataclass(frozen=True, eq=False)
class HeldOutTables:
    """Held-out data and recommendations as the core's matrices.

    Attributes
    ----------
    users : numpy.ndarray
        Ids of the held-out users in increasing order: the rows of every matrix.
    items : numpy.ndarray
        Ids of the items of the held-out data and the recommendations, increasing: the columns.
    y_true : scipy.sparse.csr_matrix
        Held-out rewards, users × items.
    scores : dict
        Model name → sparse users × items scores (``-rank`` for ranked tables); an unstored
        item is not ranked.
    propensity : numpy.ndarray or None
        Propensity of every item; 1 for items without held-out rows, whose propensity is
        never used.
    """

    users: np.ndarray
    items: np.ndarray
    y_true: sp.csr_matrix
    scores: dict
    propensity: np.ndarray | None


@dataclass(frozen=True, eq=False)
class FeedLogTables:
    """A feed log and target rankings as the core's inputs.

    Attributes
    ----------
    log : FeedLog
        The logged feeds, with contexts and items as indices into ``contexts`` and ``items``.
    contexts : numpy.ndarray
        Context ids of the log in increasing order: the rows of every score matrix.
    items : numpy.ndarray
        Item ids of the log and the targets, increasing: the columns.
    scores : dict
        Target name → sparse contexts × items scores (``-rank`` for ranked tables), for
        :class:`~recpack_ope.logged.policies.DeterministicRanker`. Rows of contexts the log
        does not hold are left out: they cannot change the estimate.
    """

    log: FeedLog
    contexts: np.ndarray
    items: np.ndarray
    scores: dict


@dataclass(frozen=True, eq=False)
class _Frame:
    """The checked columns of one input table and how messages name it."""

    label: str
    table: object
    columns: dict

    def value(self, k: int, name: str):
        """Row ``k``'s value of column ``name`` as the table holds it (for messages)."""
        return self.table.column(name)[int(k)].as_py()

    def row(self, k: int) -> str:
        """``row k (name=value, …)`` of the table, for messages."""
        return (
            f"row {int(k)} (" + ", ".join(f"{n}={self.value(k, n)!r}" for n in self.columns) + ")"
        )

    def ranked_values(self) -> np.ndarray:
        """The score, or minus the rank."""
        return self.columns["score"] if "score" in self.columns else -self.columns["rank"]


def _frame(source, role: str, required, numeric=(), ranked: bool = False, optional=()) -> _Frame:
    """Read ``source`` (a path or a ``pyarrow.Table``; ``role`` names it) and check its
    columns: present, numbers where numbers belong, no nulls. The ``optional`` columns (numeric)
    are read and checked when the table has them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(source, (str, os.PathLike)):
        table, label = read_table(source), f"{role} file {str(source)!r}"
    elif isinstance(source, pa.Table):
        table, label = source, f"{role} table"
    else:
        raise TypeError(
            f"{role} must be a file path or a pyarrow Table, got {type(source).__name__}"
        )
    present = table.column_names
    required = list(required)
    if ranked:
        has = [c for c in ("score", "rank") if c in present]
        if len(has) != 1:
            raise ValueError(
                f"{label} needs exactly one of the columns 'score' (higher is better) or 'rank' "
                f"(1 = top), got {present}"
            )
        required.append(has[0])
        numeric = (*numeric, has[0])
    missing = [c for c in required if c not in present]
    if missing:
        raise ValueError(f"{label} has no column {missing[0]!r}; its columns are {present}")
    given = [c for c in optional if c in present]
    required += given
    numeric = (*numeric, *given)
    table = table.select(required)
    for name in numeric:
        kind = table.schema.field(name).type
        if not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        ):
            raise ValueError(f"{label} column {name!r} must be numeric, got {kind}")
    frame = _Frame(label, table, {name: None for name in required})
    for name in required:
        column = table.column(name)
        if column.null_count:
            row = pc.index(pc.is_null(column), True).as_py()
            raise ValueError(f"{label} has a null in column {name!r}, e.g. {frame.row(row)}")
        if pa.types.is_dictionary(column.type):  # categorical ids: their values
            column = column.cast(column.type.value_type)
        if name in numeric:
            column = pc.cast(column, pa.float64(), safe=False)
        frame.columns[name] = column.to_numpy()
    return frame


def _same_ids(frames, column: str) -> None:
    """``column`` holds one kind of id (integer, real, text) in every table: ids of different
    kinds never match, so a mix is a mistake (Spark refuses it too)."""
    import pyarrow as pa

    def kind(t) -> str:
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_integer(t):
            return "integer"
        if pa.types.is_floating(t):
            return "real"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "text"
        return str(t)

    kinds = {f.label: kind(f.table.schema.field(column).type) for f in frames}
    if len(set(kinds.values())) > 1:
        raise ValueError(
            f"column {column!r} must hold one kind of id in every table, got "
            + ", ".join(f"{k} ids in {label}" for label, k in kinds.items())
        )


def _positions(known: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Index of every id in the sorted unique ``known`` ids; −1 where it is not there."""
    if known.size == 0:
        return np.full(ids.size, -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(known, ids), known.size - 1)
    return np.where(known[at] == ids, at, -1).astype(np.int64)


def _refuse_repeats(frame: _Frame, codes, names: tuple[str, ...], per: str) -> None:
    """Refuse a key (the integer ``codes`` of the columns ``names``) that occurs in two rows,
    naming both; ``per`` says what must be unique."""
    order = np.lexsort(tuple(reversed(codes)))
    same = np.ones(order.size - 1 if order.size else 0, dtype=bool)
    for code in codes:
        same &= code[order][1:] == code[order][:-1]
    twice = np.flatnonzero(same)
    if twice.size:
        first, second = order[twice[0]], order[twice[0] + 1]
        key = (
            f"{names[0]} {frame.value(first, names[0])!r}"
            if len(names) == 1
            else f"the ({', '.join(names)}) pair "
            f"({', '.join(repr(frame.value(first, n)) for n in names)})"
        )
        raise ValueError(
            f"{frame.label} has {key} more than once, in {frame.row(first)} and "
            f"{frame.row(second)}: one row per {per}"
        )


def _refuse(frame: _Frame, bad: np.ndarray, what: str) -> None:
    """Refuse the first row where ``bad`` holds, saying what its column must hold."""
    rows = np.flatnonzero(bad)
    if rows.size:
        raise ValueError(f"{frame.label} {what}, got {frame.row(rows[0])}")


def _score_matrix(
    frame: _Frame, key: str, keys: np.ndarray, items: np.ndarray, *, unknown_keys: str
) -> sp.csr_matrix:
    """Sparse ``keys × items`` scores of a ranked table (``key``: user or context).

    ``unknown_keys``: ``"refuse"`` rows whose key is not in ``keys``, or ``"drop"`` them.
    """
    values = frame.ranked_values()
    column = "score" if "score" in frame.columns else "rank"
    _refuse(frame, ~np.isfinite(values), f"column {column!r} must hold finite {column}s")
    rows = _positions(keys, frame.columns[key])
    cols = _positions(items, frame.columns["item"])
    own_keys, own = np.unique(frame.columns[key], return_inverse=True)  # unknown keys too
    own = own.ravel()
    if column == "rank":
        _check_ranks(frame.label, key, own_keys, own, frame.columns["rank"])
    _refuse_repeats(frame, (own, cols), (key, "item"), f"({key}, item)")
    known = rows >= 0
    if unknown_keys == "refuse" and not known.all():
        k = int(np.flatnonzero(~known)[0])
        raise ValueError(
            f"{key} {frame.value(k, key)!r} of {frame.label} has no held-out rows, e.g. "
            f"{frame.row(k)}: filter the recommendations to the held-out users"
        )
    return sp.csr_matrix((values[known], (rows[known], cols[known])), shape=(keys.size, items.size))


def _check_ranks(label: str, key: str, keys: np.ndarray, own: np.ndarray, rank) -> None:
    """Refuse a ranked table whose ranks of some key (user or context) are not 1..n, each
    once: a rank is a position, and a gap or a repeat would otherwise be compacted or tied
    silently. Names the smallest such key, as :func:`recpack_ope.spark._frames.ranked` does."""
    rank = np.asarray(rank, dtype=np.float64)
    n = np.bincount(own, minlength=keys.size)
    low, high = np.full(keys.size, np.inf), np.full(keys.size, -np.inf)
    np.minimum.at(low, own, rank)
    np.maximum.at(high, own, rank)
    whole = np.ones(keys.size, dtype=bool)
    np.logical_and.at(whole, own, rank == np.floor(rank))
    distinct = np.unique(np.stack([own, rank]), axis=1)[0]
    n_distinct = np.bincount(distinct.astype(np.int64), minlength=keys.size)
    bad = np.flatnonzero(~(whole & (low == 1) & (high == n) & (n_distinct == n)))
    if bad.size:
        k = int(bad[0])  # keys are sorted: the smallest
        raise ValueError(ranks_message(label, key, keys[k].item(), n[k], low[k], high[k]))


def ranks_message(label: str, key: str, value, n: int, low: float, high: float) -> str:
    """The refusal of ranks that are not 1..n, the same on every engine."""
    return (
        f"{label} gives {key} {value!r} ranks from {low:g} to {high:g} for {n} "
        f"item{'s' if n != 1 else ''}: a "
        f"{key}'s n items need the ranks 1..n, each once (rank again after removing items, or "
        "give scores)"
    )


def _models(given: Mapping, what: str) -> dict:
    """Name → table of one or more models (or targets)."""
    if not isinstance(given, Mapping) or not given:
        raise ValueError(f"{what} must map at least one name to a table, got {given!r}")
    bad = [name for name in given if not isinstance(name, str)]
    if bad:
        raise ValueError(f"{what} names must be strings, got {bad[0]!r}")
    return dict(given)


def held_out_tables(held_out, recommendations: Mapping, propensity=None) -> HeldOutTables:
    """Held-out rewards, recommendations and propensities from long tables.

    Parameters
    ----------
    held_out : path or pyarrow.Table
        Columns ``user``, ``item``, ``reward`` (finite, ``>= 0``), one row per (user, item).
        Its users are the rows of every matrix; users whose rewards are all 0 are kept (the
        estimators count them as excluded).
    recommendations : mapping of model name → path or pyarrow.Table
        Columns ``user``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top), one
        row per (user, item), only for held-out users.
    propensity : path or pyarrow.Table, optional
        Columns ``item``, ``propensity``, one row per item; every held-out item needs one in
        (0, 1].

    Returns
    -------
    HeldOutTables
        ``y_true``, the score matrix of every model and the propensity vector, with the ids of
        their rows and columns.

    Raises
    ------
    ValueError
        Naming the table and an offending row: a missing or non-numeric column, a null,
        a (user, item) pair twice, a negative or non-finite reward, a non-finite score or rank,
        recommendations for a user without held-out rows, a held-out item without a
        propensity or with one outside (0, 1], an item listed twice in ``propensity``, ids of
        different kinds (integer, text) across tables.
    """
    held = _frame(held_out, "held_out", ("user", "item", "reward"), numeric=("reward",))
    models = {
        name: _frame(source, f"recommendations[{name!r}]", ("user", "item"), ranked=True)
        for name, source in _models(recommendations, "recommendations").items()
    }
    weights = (
        None
        if propensity is None
        else _frame(propensity, "propensity", ("item", "propensity"), numeric=("propensity",))
    )
    _same_ids([held, *models.values()], "user")
    _same_ids([held, *models.values(), *([weights] if weights else [])], "item")

    reward = held.columns["reward"]
    _refuse(
        held,
        ~(np.isfinite(reward) & (reward >= 0)),
        "column 'reward' must hold finite rewards >= 0",
    )
    users = np.unique(held.columns["user"])
    items = np.unique(
        np.concatenate([held.columns["item"], *(m.columns["item"] for m in models.values())])
    )
    u = _positions(users, held.columns["user"])
    i = _positions(items, held.columns["item"])
    _refuse_repeats(held, (u, i), ("user", "item"), "(user, item)")
    y_true = sp.csr_matrix((reward, (u, i)), shape=(users.size, items.size))
    scores = {
        name: _score_matrix(frame, "user", users, items, unknown_keys="refuse")
        for name, frame in models.items()
    }

    vector = None
    if weights is not None:
        listed = weights.columns["item"]
        order = np.argsort(listed, kind="stable")
        _refuse_repeats(weights, (_positions(np.unique(listed), listed),), ("item",), "item")
        at = _positions(listed[order], held.columns["item"])
        if (at < 0).any():
            k = int(np.flatnonzero(at < 0)[0])
            raise ValueError(
                f"{weights.label} has no row for item {held.value(k, 'item')!r} of "
                f"{held.label} {held.row(k)}: every held-out item needs a propensity"
            )
        p = weights.columns["propensity"][order][at]
        outside = np.flatnonzero(~((p > 0) & (p <= 1)))
        if outside.size:
            k = int(outside[0])
            raise ValueError(
                f"{weights.label} column 'propensity' must lie in (0, 1] for every held-out "
                f"item, got {weights.row(order[at[k]])} for {held.label} {held.row(k)}"
            )
        vector = np.ones(items.size)
        vector[i] = p
    return HeldOutTables(users=users, items=items, y_true=y_true, scores=scores, propensity=vector)


def feed_log_tables(feed_log, targets: Mapping) -> FeedLogTables:
    """A feed log and deterministic target rankings from long tables.

    Parameters
    ----------
    feed_log : path or pyarrow.Table
        Columns ``session``, ``context``, ``item``, ``rank`` (1-based) and ``reward`` (finite,
        ``>= 0``), one row per shown item, and those of :data:`LOG_PROBABILITIES` it has:
        ``propensity`` (the logging exposure ε0 of the row), ``position_propensity``,
        ``prefix_propensity`` and ``logging_weight``, as
        :meth:`~recpack_ope.logged.feed_log.FeedLog.from_arrays` takes them.
    targets : mapping of target name → path or pyarrow.Table
        Columns ``context``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top),
        one row per (context, item): the target's ranking of each context's candidates.

    Returns
    -------
    FeedLogTables
        The :class:`~recpack_ope.logged.feed_log.FeedLog` and every target's score matrix.

    Raises
    ------
    ValueError
        Naming the table and an offending row: a missing or non-numeric column, a null, a
        session showing one item twice or two items at one rank, a (context, item) pair
        twice in a target, a non-finite score or rank, ids of different kinds across tables,
        and what :meth:`FeedLog.from_arrays` refuses (ranks, rewards, propensities, sessions
        with several contexts).
    """
    log = _frame(
        feed_log,
        "feed_log",
        ("session", "context", "item", "rank", "reward"),
        numeric=("rank", "reward"),
        optional=LOG_PROBABILITIES,
    )
    ranked = {
        name: _frame(source, f"target[{name!r}]", ("context", "item"), ranked=True)
        for name, source in _models(targets, "targets").items()
    }
    for column in ("context", "item"):
        _same_ids([log, *ranked.values()], column)
    contexts = np.unique(log.columns["context"])
    items = np.unique(
        np.concatenate([log.columns["item"], *(t.columns["item"] for t in ranked.values())])
    )
    item = _positions(items, log.columns["item"])
    sessions = np.unique(log.columns["session"], return_inverse=True)[1].ravel().astype(np.int64)
    _refuse_repeats(
        log, (sessions, item), ("session", "item"), "(session, item): a feed shows an item once"
    )
    rank = log.columns["rank"]
    _refuse_repeats(
        log,
        (sessions, rank),
        ("session", "rank"),
        "(session, rank): a feed shows one item per rank",
    )
    try:
        feeds = FeedLog.from_arrays(
            log.columns["session"],
            item,
            rank,
            log.columns["reward"],
            context=_positions(contexts, log.columns["context"]),
            **{c: log.columns.get(c) for c in LOG_PROBABILITIES},
            n_items=items.size,
            n_contexts=contexts.size,
        )
    except ValueError as error:
        raise ValueError(f"{log.label}: {error}") from None
    scores = {
        name: _score_matrix(frame, "context", contexts, items, unknown_keys="drop")
        for name, frame in ranked.items()
    }
    return FeedLogTables(log=feeds, contexts=contexts, items=items, scores=scores)
