"""Held-out files evaluated as a stream of whole users, in memory bounded by a batch.

The held-out file and every recommendations file are read in batches of
:data:`BATCH_ROWS` rows (a background thread reads the next batches while the core computes).
When each file lists its rows sorted by user (ids in increasing order: numbers by value, text
by code point, as :mod:`recpack_ope.io.tables` orders them), the rows of the users below the
smallest last user of the batches in hand are complete in every file. They form a chunk that
:class:`~recpack_ope.evaluation.chunks.ChunkPlan` turns into the core's matrices and per-user
terms, and only the chunk's sufficient statistics are kept
(:class:`~recpack_ope.evaluation.chunks.Partial`), merged as the Spark engine merges its
partitions'. Memory then depends on the batch, not on the file.

Every check of the in-memory engine is made on every chunk: nulls, ids, rewards, scores and
ranks, repeated (user, item) pairs and propensities. A chunk with a problem is read by the
in-memory engine (:func:`~recpack_ope.io.tables.held_out_tables`, on that chunk's rows only),
so the message is the in-memory one, naming the file, the column and the row as it is
numbered in the file. When several problems lie in different chunks, the first chunk's is
named.

A file that is not sorted by user cannot be streamed: :class:`NotSorted` names its first row
out of order (:func:`~recpack_ope.evaluation.files.evaluate_files` then reads the files in
memory, or refuses with that message when streaming was asked for).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io.tables import TableSlice, csv_nulls, table_format, table_label, whole_ids
from .chunks import ChunkError, ChunkPlan, NoReward, Partial, names_without_rewards, plain

__all__ = [
    "BATCH_ROWS",
    "STREAM_ROWS",
    "InMemoryWarning",
    "NotSorted",
    "NotStreamable",
    "check_memory",
    "stream_held_out",
    "total_rows",
]

#: Rows read from each file at a time: small enough that a chunk's arrays are reused by the
#: allocator rather than mapped afresh.
BATCH_ROWS = 1 << 17

#: The number of rows in all (held-out and recommendations) above which
#: :func:`~recpack_ope.evaluation.files.evaluate_files` streams files sorted by user by
#: default; below it the in-memory engine's estimates carry every per-user value.
STREAM_ROWS = 5_000_000


#: Memory the in-memory engine takes per row of the input files, a measured upper bound.
BYTES_PER_ROW = 160


class InMemoryWarning(UserWarning):
    """Large files that are read in memory because they cannot be streamed."""


class NotStreamable(ValueError):
    """Files that the stream does not read (not an error in them): they are read in memory."""


class NotSorted(NotStreamable):
    """A file whose rows are not sorted by user; the message names its first row out of
    order."""


@dataclass
class _Rows:
    """Consecutive rows of one file as numpy columns (ids that compare across files, values
    as float64), and as the file holds them (``slice``, for messages)."""

    slice: TableSlice
    users: np.ndarray
    items: np.ndarray
    values: np.ndarray


@dataclass
class _Source:
    """One file read in batches: the rows in hand (from file row ``offset``) and the batches
    still to come."""

    label: str
    value: str
    batches: object
    ids: str
    item_ids: str
    table: object = None
    users: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    items: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    offset: int = 0
    done: bool = False

    def read(self) -> None:
        """Append the next batch to the rows in hand (or mark the file done); a batch the
        fast checks refuse raises :class:`_Problem` with its rows in hand."""
        import pyarrow as pa
        import pyarrow.compute as pc

        batch = next(self.batches, None)
        if batch is None:
            self.done = True
            return
        table = _numeric(pa.Table.from_batches([batch]), self.value)
        self.table = table if self.table is None else pa.concat_tables([self.table, table])
        users = _ids(table.column("user"), self.ids)
        items = _ids(table.column("item"), self.item_ids)
        column = table.column(self.value)
        numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
        if users is None or items is None or not numeric or column.null_count:
            raise _Problem(self)
        low = np.flatnonzero(users[1:] < users[:-1])
        if low.size or (self.users.size and users.size and users[0] < self.users[-1]):
            at = int(low[0]) + 1 if low.size else 0
            row = self.offset + self.users.size + at
            before = users[at - 1] if at else self.users[-1]
            raise NotSorted(
                f"{self.label} is not sorted by user: row {row} has user "
                f"{plain(users[at])!r} after user {plain(before)!r}"
            )
        values = pc.cast(column, pa.float64()).to_numpy()
        if self.users.size:
            users = np.concatenate([self.users, users])
            items = np.concatenate([self.items, items])
            values = np.concatenate([self.values, values])
        self.users, self.items, self.values = users, items, values

    def take(self, boundary) -> _Rows:
        """The rows in hand whose user is below ``boundary`` (all of them for None)."""
        cut = self.users.size if boundary is None else int(np.searchsorted(self.users, boundary))
        taken = _Rows(
            TableSlice(self.table.slice(0, cut), self.label, self.offset),
            self.users[:cut],
            self.items[:cut],
            self.values[:cut],
        )
        self.table = self.table.slice(cut)
        self.users, self.items, self.values = self.users[cut:], self.items[cut:], self.values[cut:]
        self.offset += cut
        return taken


def _numeric(table, name: str):
    """``table`` with its text column ``name`` (a CSV file's values, read as text) as float64
    numbers, the texts a CSV reader takes for a null as nulls; unchanged when a text is not a
    number, for the in-memory engine to refuse the column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column(name)
    if not pa.types.is_string(column.type):
        return table
    try:
        numbers = pc.cast(csv_nulls(column), pa.float64())
    except pa.ArrowInvalid:
        return table
    return table.set_column(table.column_names.index(name), name, numbers)


class _Problem(Exception):
    """Rows the fast checks refuse: the in-memory engine names the problem."""

    def __init__(self, source=None):
        super().__init__()
        self.source = source


def total_rows(paths) -> int | None:
    """The rows of the parquet files ``paths`` in all, from their footers; None when one is
    not a readable parquet file.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from recpack_ope.evaluation.streaming import total_rows
    >>> path = Path(tempfile.mkdtemp()) / "a.parquet"
    >>> pq.write_table(pa.table({"user": [1, 2, 3]}), path)
    >>> total_rows([path, path]), total_rows([path, "a.csv"])
    (6, None)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 0
    for path in paths:
        if table_format(path) != "parquet" or not Path(path).is_file():
            return None
        try:
            rows += pq.ParquetFile(path).metadata.num_rows
        except (pa.ArrowException, OSError):
            return None
    return rows


def check_memory(rows: int | None, why: str) -> None:
    """Refuse to read ``rows`` rows in memory when they would take more than the memory
    available, saying ``why`` they are not streamed, instead of running out of memory.

    Examples
    --------
    >>> from recpack_ope.evaluation.streaming import check_memory
    >>> check_memory(10**6, "file 'a.parquet' is not sorted by user")  # 160 MB: fine
    >>> check_memory(10**15, "file 'a.parquet' is not sorted by user")
    Traceback (most recent call last):
    ...
    ValueError: file 'a.parquet' is not sorted by user, and the files' 1000000000000000 rows ...
    """
    if rows is None:
        return
    import os

    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    need = rows * BYTES_PER_ROW
    if need > available:
        raise ValueError(
            f"{why}, and the files' {rows} rows would take about {need / 2**30:.1f} GiB in memory, "
            f"more than the {available / 2**30:.1f} GiB available: sort the files by user "
            "to stream them"
        )


def _id_kind(kind) -> str | None:
    """``"integer"`` or ``"text"`` for an Arrow type the stream reads as ids; None for the
    others (decimals, uint64 beyond int64 and non-ids are read in memory or refused there)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if (pa.types.is_integer(kind) and kind != pa.uint64()) or pa.types.is_floating(kind):
        return "integer"
    return None


def _ids(column, kind: str) -> np.ndarray | None:
    """The ids of an Arrow column as numpy values that compare across files: int64 for
    integers and whole reals up to 2**53, str objects for text; None when a value is not an id
    (a null, NaN, 1.5), for the in-memory engine to name."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        return None
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if kind == "text":
        return column.to_numpy(zero_copy_only=False)
    if pa.types.is_integer(column.type):
        return column.to_numpy().astype(np.int64, copy=False)
    real = pc.cast(column, pa.float64()).to_numpy()
    return real.astype(np.int64) if whole_ids(real).all() else None


def _ahead(batches):
    """``batches`` (an iterator of Arrow batches) read ahead on a thread: the file is parsed
    while the core computes."""
    ahead: queue.Queue = queue.Queue(maxsize=2)
    done = object()

    def fill() -> None:
        try:
            for batch in batches:
                ahead.put(batch)
        except BaseException as error:  # raised again on the reading side
            ahead.put(error)
        ahead.put(done)

    threading.Thread(target=fill, daemon=True).start()
    while (item := ahead.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item


#: Bytes of a CSV file parsed at a time.
CSV_BLOCK = 32 << 20


def _csv_reader(path: Path, columns: list[str] | None, types: dict):
    """A streaming reader of the CSV file's ``columns`` (every column for None)."""
    import pyarrow.csv as pcsv

    return pcsv.open_csv(
        path,
        read_options=pcsv.ReadOptions(block_size=CSV_BLOCK),
        convert_options=pcsv.ConvertOptions(include_columns=columns or [], column_types=types),
    )


def _csv_id_kinds(path: Path, label: str) -> list[str]:
    """``"integer"`` or ``"text"`` for the user and item columns of a CSV file, typed as the
    in-memory engine types them from every value (:func:`~recpack_ope.io.tables.csv_id_type`),
    in one pass over those columns; :class:`NotStreamable` for ids beyond int64."""
    import pyarrow as pa

    from ..io.tables import csv_id_facts, csv_id_type

    names = ["user", "item"]
    facts = dict.fromkeys(names, (True, True, True))
    for batch in _csv_reader(path, names, dict.fromkeys(names, pa.string())):
        for name in names:
            more = csv_id_facts(batch.column(name))
            facts[name] = tuple(a and b for a, b in zip(facts[name], more, strict=True))
    kinds = [csv_id_type(*facts[name]) for name in names]
    if "uint64" in kinds:
        raise NotStreamable(f"{label} has ids beyond int64, which the stream does not read")
    return ["text" if kind == "string" else "integer" for kind in kinds]


def _open(path: Path, role: str, values: tuple[str, ...]) -> _Source:
    """A parquet or CSV file of ``role`` as a :class:`_Source` of its ``user``, ``item`` and
    value column (the first of ``values`` it has); :class:`NotStreamable` for ids it does not
    read and :class:`_Problem` for a file the in-memory engine refuses as a whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    label = table_label(role, path)
    kind = table_format(path)
    if not Path(path).is_file():
        raise _Problem()
    try:
        if kind == "parquet":
            schema = pq.ParquetFile(path).schema_arrow
            empty = pq.ParquetFile(path).metadata.num_rows == 0
        else:
            reader = _csv_reader(path, None, {})
            schema, empty = reader.schema, reader.read_next_batch().num_rows == 0
    except (pa.ArrowException, OSError, StopIteration):
        raise _Problem() from None
    has = [v for v in values if v in schema.names]
    if empty or len(has) != 1 or not {"user", "item"} <= set(schema.names):
        raise _Problem()
    columns = ["user", "item", has[0]]
    if kind == "parquet":
        kinds = [_id_kind(schema.field(c).type) for c in ("user", "item")]
        if None in kinds:
            raise NotStreamable(f"{label} has ids the stream does not read (decimals, uint64)")
        # Pre-buffering keeps every row group read so far: memory would grow with the file.
        parquet = pq.ParquetFile(path, pre_buffer=False)
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    else:
        kinds = _csv_id_kinds(path, label)
        ids = zip(columns[:2], kinds, strict=True)
        types = {c: pa.int64() if k == "integer" else pa.string() for c, k in ids}
        batches = _csv_reader(path, columns, {**types, has[0]: pa.string()})
    return _Source(label, has[0], _ahead(iter(batches)), *kinds)


def _boundary(sources: list[_Source]):
    """The smallest last user in hand of the files not read to their end (None when every
    file is): every user below it has all its rows in hand."""
    last = [s.users[-1] for s in sources if not s.done and s.users.size]
    return min(last) if last else None


def stream_held_out(plan, chunk_plan: ChunkPlan, held_label: str, diagnose) -> Partial:
    """The merged :class:`~recpack_ope.evaluation.chunks.Partial` of the held-out file and the
    recommendations of ``plan`` (:class:`~recpack_ope.evaluation.files.FilePlan`), read as a
    stream of whole users.

    Parameters
    ----------
    plan : FilePlan
        Held-out parquet or CSV files sorted by user.
    chunk_plan : ChunkPlan
        What every chunk computes.
    held_label : str
        How messages name the held-out file.
    diagnose : callable
        ``diagnose(held, recommendations)`` on the :class:`~recpack_ope.io.tables.TableSlice`
        of a chunk with a problem: raises the in-memory engine's message.

    Returns
    -------
    Partial

    Raises
    ------
    NotSorted
        For a file whose users are not in increasing order, naming its first such row.
    NotStreamable
        For files with ids the stream does not read (decimals, integers beyond int64).
    ValueError
        For bad rows, with the in-memory engine's message (see ``diagnose``).
    """
    from ..io.tables import ROLES

    roles = [ROLES["held_out"]] + [ROLES["recommendations"].format(name=n) for n in plan.models]
    paths = [plan.data, *plan.models.values()]
    values = [("reward",)] + [("score", "rank")] * len(plan.models)
    try:
        sources = [_open(p, r, v) for p, r, v in zip(paths, roles, values, strict=True)]
    except _Problem:
        _diagnose_files(plan, diagnose)
        raise
    if len({s.ids for s in sources}) > 1 or len({s.item_ids for s in sources}) > 1:
        _diagnose_files(plan, diagnose)
        raise NotStreamable(f"{', '.join(s.label for s in sources)} hold ids of two kinds")
    weights = None if plan.propensity is None else _weights(plan, sources[0].item_ids)
    partial = None
    short = list(sources)  # the files whose rows in hand end with the boundary user
    while True:
        try:
            for source in sources:
                if not source.done and (source in short or source.users.size < BATCH_ROWS):
                    source.read()
        except _Problem as problem:
            held, *models = _in_hand(sources)
            diagnose(held, models)
            raise ChunkError(f"{problem.source.label} has a row the engine cannot read") from None
        boundary = _boundary(sources)
        if boundary is not None and not any(
            s.users.size and s.users[0] < boundary for s in sources
        ):
            # One user fills the rows in hand: read on in the files that end with it.
            short = [s for s in sources if s.users.size and s.users[-1] == boundary]
            continue
        short = []
        held, models = _slices(sources, boundary)
        if held.users.size or any(m.users.size for m in models):
            part = _chunk(chunk_plan, held, models, sources, weights, diagnose)
            partial = part if partial is None else partial.merge(part)
        if boundary is None:
            break
    if partial is None or not partial.names:
        n_users = 0 if partial is None else partial.moments.n + partial.n_excluded
        try:
            names = names_without_rewards(chunk_plan, n_users, held_label)
        except NoReward as error:
            raise ValueError(
                f"{held_label} with {plan.label(next(iter(plan.models)))}: {error.reason}"
            ) from None
        if partial is not None:
            partial.names = names
    return partial


def _slices(sources, boundary):
    """The held-out and recommendation slices of the users below ``boundary`` (None: every
    row in hand)."""
    taken = [s.take(boundary) for s in sources]
    return taken[0], taken[1:]


def _in_hand(sources) -> list[TableSlice]:
    """Every file's rows in hand as the file holds them, a batch refused by the fast checks
    included; a file not read yet gives its first batch."""
    for source in sources:
        if source.table is None and not source.done:
            try:
                source.read()
            except _Problem:
                pass
    return [TableSlice(s.table, s.label, s.offset) for s in sources]


def _diagnose_files(plan, diagnose) -> None:
    """Raise the in-memory engine's refusal of files refused as a whole (a missing column,
    ids of two kinds): their first rows show it."""
    import pyarrow.parquet as pq

    from ..io.tables import ROLES

    def first(path, role):
        label = table_label(role, path)
        if table_format(path) != "parquet":
            return path  # read whole: its ids are typed from every value
        try:
            table = next(pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS), None)
        except Exception:
            return path  # the in-memory engine names why it cannot be read
        if table is None:
            return path
        import pyarrow as pa

        return TableSlice(pa.Table.from_batches([table]), label)

    diagnose(
        first(plan.data, ROLES["held_out"]),
        [
            first(path, ROLES["recommendations"].format(name=name))
            for name, path in plan.models.items()
        ],
    )


@dataclass(frozen=True)
class _Weights:
    """The propensity file's items (sorted ids) and their propensities."""

    items: np.ndarray
    propensity: np.ndarray


def _weights(plan, kind: str) -> _Weights | None:
    """The propensity file's items and propensities (it is small: one row per item), or None
    when the in-memory engine would refuse it: every held-out item then lacks a propensity, and
    the first chunk's diagnosis names the problem in the in-memory engine's order."""
    import pyarrow as pa

    from ..io.tables import read_table

    table = read_table(plan.propensity, table_label("propensity", plan.propensity))
    if "item" not in table.column_names or "propensity" not in table.column_names:
        return None
    if _id_kind(table.schema.field("item").type) != kind:
        return None
    items = _ids(table.column("item"), kind)
    p = table.column("propensity")
    numeric = pa.types.is_floating(p.type) or pa.types.is_integer(p.type)
    if items is None or p.null_count or not numeric:
        return None
    p = p.cast(pa.float64()).to_numpy()
    order = np.argsort(items, kind="stable")
    items = items[order]
    if (items[1:] == items[:-1]).any():
        return None
    return _Weights(items, p[order])


def _chunk(plan: ChunkPlan, held: _Rows, models, sources, weights, diagnose) -> Partial:
    """The partial of one chunk of whole users, or the in-memory engine's refusal."""
    try:
        return plan.chunk(_columns([held, *models], sources, weights, plan.checked))
    except (_Problem, ValueError):
        diagnose(held.slice, [m.slice for m in models])
        raise


def _columns(parts, sources, weights, checked: bool) -> dict:
    """The chunk's rows as the columns :class:`ChunkPlan` reads: users coded in increasing
    order across the files, values as scores (minus ranks), sources (−1 held-out, m model m)."""
    values = []
    for part, src in zip(parts, sources, strict=True):
        if src.value == "rank":
            _check_ranks(part.users, part.values)
            values.append(-part.values)
        else:
            values.append(part.values)
    heads = [np.flatnonzero(np.r_[p.users.size > 0, p.users[1:] != p.users[:-1]]) for p in parts]
    keys = np.unique(np.concatenate([p.users[h] for p, h in zip(parts, heads, strict=True)]))
    codes = [
        np.repeat(np.searchsorted(keys, p.users[h]), np.diff(np.r_[h, p.users.size]))
        for p, h in zip(parts, heads, strict=True)
    ]
    size = sum(p.users.size for p in parts)
    chunk = {
        "user": np.concatenate([p.users for p in parts]),
        "users": keys,
        "u": np.concatenate(codes),
        "item": np.concatenate([p.items for p in parts]),
        "value": np.concatenate(values),
        "source": np.repeat(
            np.arange(-1, len(parts) - 1, dtype=np.int8), [p.users.size for p in parts]
        ),
        "value:null": np.zeros(size, dtype=bool),
    }
    if checked:
        propensity = np.full(size, np.nan)
        held_items = parts[0].items
        if weights is not None and weights.items.size:
            at = np.minimum(np.searchsorted(weights.items, held_items), weights.items.size - 1)
            found = weights.items[at] == held_items
            propensity[: held_items.size] = np.where(found, weights.propensity[at], np.nan)
        chunk["propensity"] = propensity
    return chunk


def _check_ranks(users: np.ndarray, rank: np.ndarray) -> None:
    """Raise :class:`_Problem` unless every user's n ranks are 1..n, each once (rows sorted
    by user)."""
    if rank.size == 0:
        return
    head = np.r_[True, users[1:] != users[:-1]]
    start = np.flatnonzero(head)
    position = np.arange(rank.size) - np.repeat(start, np.diff(np.r_[start, rank.size])) + 1
    if np.array_equal(rank, position):
        return
    run = np.cumsum(head)
    order = np.lexsort((rank, run))
    if not np.array_equal(rank[order], position):
        raise _Problem()
