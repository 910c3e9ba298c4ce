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

Ids (``user``, ``item``, ``session``, ``context``) are integers or text, compared exactly:

* integer ids of any width and signedness (int8 … int64, uint8 … uint64) compare by value
  across tables, so a user of a uint64 column is the same user in an int32 one;
* float ids (e.g. a column pandas wrote with a null) are accepted when every value is a whole
  number of size at most 2**53, the largest range in which a float holds every integer, and
  then compare as those integers (1.0 is the id 1); any other value, NaN included, is refused
  (:func:`id_message`), as is a null; decimal ids must be whole, and are exact at any size;
* a CSV id column is read as 64-bit integers (signed, or unsigned beyond 2**63 − 1) when every
  value is a canonical decimal integer (:data:`INTEGER_ID`: no sign '+', spaces, leading
  zeros, exponent or decimal point) of that size, and as text otherwise, compared as written
  (``010``, ``1e1``, ``10.0``, ``1.5``, ids beyond 64 bits): never rounded through a float or
  read in another spelling, so two ids never merge (:func:`csv_id_type`, which the Spark
  engine applies too);
* integer ids in one table and text ids in another are refused: they never match.

Ids are indexed in increasing order (numbers by value, text by code point), so tied scores go
to the lower item id, as on Spark (:mod:`recpack_ope.spark`); a rank r becomes the score −r.
The users of a held-out evaluation are those of the held-out table and of every
recommendations table: a user with recommendations but no held-out rows is a user without
held-out rewards, an empty row of ``y_true``, as in the Python API (counted 0 over
``population="all"``, excluded over ``"observed"``).
Bad rows are refused with the same rules as the Spark engine, and every message names the
table (file) and column and shows an offending row (by its index label when the table came
from pandas with an index). Files are read with pyarrow (``.parquet``/``.pq`` with
``pyarrow.parquet``, ``.csv`` with ``pyarrow.csv``); a file that cannot be read, is empty or
has no rows is refused naming it (:func:`read_table`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..logged.feed_log import FeedLog, mixed_contexts_message

__all__ = [
    "FORMATS",
    "ID_COLUMNS",
    "INTEGER_ID",
    "ROLES",
    "FeedLogTables",
    "HeldOutTables",
    "FILE_PROBLEMS",
    "TableSlice",
    "csv_id_facts",
    "csv_nulls",
    "csv_id_type",
    "feed_log_tables",
    "file_message",
    "held_out_tables",
    "id_message",
    "missing_propensity_message",
    "mixed_ids_message",
    "null_message",
    "propensity_range_message",
    "read_table",
    "repeat_message",
    "table_format",
    "table_label",
    "value_message",
    "whole_ids",
]

#: The optional columns of a feed log: the logging policy's probabilities, each read when
#: the log has it (:class:`~recpack_ope.logged.feed_log.FeedLog`).
LOG_PROBABILITIES = ("propensity", "position_propensity", "prefix_propensity", "logging_weight")

#: How messages name each input table (:func:`table_label`), by the argument that gives it;
#: ``{name}`` is the model's or target's name.
ROLES = {
    "held_out": "held_out",
    "recommendations": "recommendations[{name!r}]",
    "propensity": "propensity",
    "feed_log": "feed_log",
    "targets": "target[{name!r}]",
}

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


def read_table(path: str | os.PathLike, label: str | None = None):
    """A parquet (``.parquet``, ``.pq``) or CSV (``.csv``, with a header line) file as a
    ``pyarrow.Table``, with the CSV id columns of :data:`ID_COLUMNS` read exactly (module
    docstring).

    Parameters
    ----------
    path : path
        The file; its extension says its format.
    label : str, optional
        How messages name the file (default ``file '<path>'``).

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    ValueError
        For an unknown extension, a file pyarrow cannot parse (a ragged CSV row, a damaged
        parquet file), an empty file or one without rows, naming it.
    FileNotFoundError, IsADirectoryError
        When the file does not exist, or is a directory.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from recpack_ope.io.tables import read_table
    >>> path = Path(tempfile.mkdtemp()) / "held_out.csv"
    >>> _ = path.write_text("user,item,reward\\n18446744073709551615,1,1\\n7,1,0\\n")
    >>> read_table(path).column("user").to_pylist()  # uint64: no rounding through a float
    [18446744073709551615, 7]
    >>> _ = path.write_text("user,item,reward\\n")
    >>> read_table(path, "held_out file 'held_out.csv'")
    Traceback (most recent call last):
    ...
    ValueError: held_out file 'held_out.csv' has no rows, only a header line
    """
    import pyarrow as pa

    label = label or f"file {str(path)!r}"
    kind = table_format(path)
    if Path(path).is_dir():
        raise IsADirectoryError(file_message(label, "directory", kind))
    if not Path(path).exists():
        raise FileNotFoundError(file_message(label, "missing", kind))
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            table = _read_csv(path)
    except (pa.ArrowException, OSError) as error:
        if kind == "csv" and Path(path).stat().st_size == 0:
            raise ValueError(file_message(label, "empty", kind)) from None
        raise ValueError(file_message(label, "unreadable", kind, str(error))) from None
    if table.num_rows == 0:
        raise ValueError(file_message(label, "no_rows", kind))
    return table


#: What can be wrong with an input file as a whole (:func:`file_message`).
FILE_PROBLEMS = {
    "missing": "does not exist",
    "directory": "is a directory, not a {kind} file",
    "empty": "is empty: a CSV file needs a header line",
    "no_rows": "has no rows",
    "unreadable": "cannot be read as {kind}: {reason}",
}


def file_message(label: str, problem: str, kind: str, reason: str = "") -> str:
    """The refusal of a whole input file (``label`` names it, :func:`table_label`) for one of
    :data:`FILE_PROBLEMS`, the same on every engine; ``kind`` is its format and ``reason``
    what the reader said.

    Examples
    --------
    >>> from recpack_ope.io.tables import file_message
    >>> file_message("held_out file 'h.csv'", "no_rows", "csv")
    "held_out file 'h.csv' has no rows, only a header line"
    """
    text = FILE_PROBLEMS[problem].format(kind=kind, reason=reason)
    if problem == "no_rows" and kind == "csv":
        text += ", only a header line"
    return f"{label} {text}"


#: The columns that hold ids, read exactly from CSV files.
ID_COLUMNS = ("user", "item", "session", "context")

#: Real numbers are whole up to this size exactly: a float id beyond it may be a rounded one.
EXACT_FLOAT = 2**53


#: The text of a CSV id read as an integer: a canonical decimal integer, without sign '+',
#: spaces, leading zeros, exponent or decimal point, and not ``-0``, so that ids equal as
#: integers are equal as written. One pattern for pyarrow (RE2) and Spark (Java regex).
INTEGER_ID = "^(0|-?[1-9][0-9]*)$"


def csv_id_type(canonical: bool, int64: bool, uint64: bool) -> str:
    """How a CSV id column is read, on every engine, from what holds for each of its values
    (those that are not null): ``"int64"`` when every one is a canonical decimal integer
    (:data:`INTEGER_ID`) of int64, ``"uint64"`` when every one is such an integer of uint64,
    ``"string"`` otherwise: text, compared as written (``010``, ``1e1``, ``10.0``, `` 10``,
    ids beyond 64 bits).

    Parameters
    ----------
    canonical : bool
        Every value matches :data:`INTEGER_ID`.
    int64, uint64 : bool
        Every value is an integer of that type.

    Returns
    -------
    str

    Examples
    --------
    >>> from recpack_ope.io.tables import csv_id_type
    >>> csv_id_type(True, True, False), csv_id_type(True, False, True)
    ('int64', 'uint64')
    >>> csv_id_type(False, True, True)  # e.g. 010: int64 would read it as 10
    'string'
    """
    if canonical and int64:
        return "int64"
    if canonical and uint64:
        return "uint64"
    return "string"


def csv_nulls(texts):
    """``texts`` (a pyarrow array of a CSV column read as text) with the texts pyarrow reads
    as a null in a numeric column (empty, ``NA``, ``nan``, …) made nulls, so that a cast to a
    number keeps them as nulls for the null checks to name their rows.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from recpack_ope.io.tables import csv_nulls
    >>> csv_nulls(pa.array(["10", "", "NA"])).to_pylist()
    ['10', None, None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    missing = pc.is_in(texts, value_set=pa.array(list(pcsv.ConvertOptions().null_values)))
    return pc.if_else(missing, pa.scalar(None, pa.string()), texts)


def whole_ids(real: np.ndarray) -> np.ndarray:
    """Which real numbers are ids: finite, whole and at most 2**53 in size, where a float
    holds every integer exactly (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.io.tables import whole_ids
    >>> whole_ids(np.array([1.0, 1.5, np.nan, 2.0**54])).tolist()
    [True, False, False, False]
    """
    with np.errstate(invalid="ignore"):
        return np.isfinite(real) & (real == np.trunc(real)) & (np.abs(real) <= EXACT_FLOAT)


def csv_id_facts(texts) -> tuple[bool, bool, bool]:
    """What holds for every value of a CSV id column read as text (``texts``, a pyarrow
    array; the texts a numeric column reads as a null left out): every one a canonical
    decimal integer (:data:`INTEGER_ID`), an int64, a uint64 — the arguments of
    :func:`csv_id_type`, which the facts of parts of a file combine into with ``and``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from recpack_ope.io.tables import csv_id_facts
    >>> csv_id_facts(pa.array(["10", "18446744073709551615", ""]))
    (True, False, True)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    given = pc.drop_null(csv_nulls(texts))

    def fits(kind) -> bool:
        try:
            pc.cast(given, kind)
        except pa.ArrowInvalid:
            return False
        return True

    canonical = pc.all(pc.match_substring_regex(given, INTEGER_ID)).as_py() is not False
    return canonical, canonical and fits(pa.int64()), canonical and fits(pa.uint64())


def _read_csv(path):
    """A CSV file with its id columns read as text, then typed by :func:`csv_id_type`:
    pyarrow alone would read ``010`` as 10 and round integers beyond int64 through a float."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    table = pcsv.read_csv(
        path,
        convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(ID_COLUMNS, pa.string())),
    )
    for name in (c for c in ID_COLUMNS if c in table.column_names):
        texts = table[name]
        kind = csv_id_type(*csv_id_facts(texts))
        if kind != "string":
            typed = pc.cast(csv_nulls(texts), kind)
            table = table.set_column(table.column_names.index(name), name, typed)
    return table


@dataclass(frozen=True, eq=False)
class HeldOutTables:
    """Held-out data and recommendations as the core's matrices.

    Attributes
    ----------
    users : numpy.ndarray
        Ids of the users of the held-out table and of the recommendations, in increasing
        order: the rows of every matrix.
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
    n_users_without_held_out : int
        Users with recommendations but no held-out rows: rows of ``y_true`` without entries.
    n_users_without_recommendations : dict
        Model name → users of the held-out table without any of its recommendations: rows
        of its score matrix without entries, which earn 0 (a truncated export shows here).
    """

    users: np.ndarray
    items: np.ndarray
    y_true: sp.csr_matrix
    scores: dict
    propensity: np.ndarray | None
    n_users_without_held_out: int = 0
    n_users_without_recommendations: dict = field(default_factory=dict)


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
class TableSlice:
    """Consecutive rows of an input file, read in parts: ``table`` holds the file's rows from
    row ``offset`` on, and messages name them by their row in the file, as if it were read
    whole (``label`` names the file, :func:`table_label`)."""

    table: object
    label: str
    offset: int = 0


@dataclass(frozen=True, eq=False)
class _Frame:
    """The checked columns of one input table and how messages name it."""

    label: str
    table: object
    columns: dict
    index: object = None
    offset: int = 0

    def value(self, k: int, name: str):
        """Row ``k``'s value of column ``name`` as the table holds it (for messages)."""
        return self.table.column(name)[int(k)].as_py()

    def row(self, k: int) -> str:
        """``row k (name=value, …)`` of the table, for messages; ``row with index label x``
        when the table came from pandas with an index other than 0..n−1, the label its user
        knows the row by."""
        where = (
            f"row {int(k) + self.offset}"
            if self.index is None
            else f"row with index label {self.index[int(k)].as_py()!r}"
        )
        return f"{where} (" + ", ".join(f"{n}={self.value(k, n)!r}" for n in self.columns) + ")"

    def ranked_values(self) -> np.ndarray:
        """The score, or minus the rank."""
        return self.columns["score"] if "score" in self.columns else -self.columns["rank"]


def _frame(source, role: str, required, numeric=(), ranked: bool = False, optional=()) -> _Frame:
    """Read ``source`` (a path or a ``pyarrow.Table``; ``role`` names it) and check its
    columns: present, numbers where numbers belong, no nulls. The ``optional`` columns (numeric)
    are read and checked when the table has them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offset = 0
    if isinstance(source, (str, os.PathLike)):
        label = table_label(role, source)
        table = read_table(source, label)
    elif isinstance(source, pa.Table):
        table, label = source, table_label(role)
    elif isinstance(source, TableSlice):
        table, label, offset = source.table, source.label, source.offset
    else:
        raise TypeError(
            f"{role} must be a file path or a pyarrow Table, got {type(source).__name__}"
        )
    index = _index_labels(table)
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
    frame = _Frame(label, table, {name: None for name in required}, index, offset)
    for name in required:
        column = table.column(name)
        if column.null_count:
            row = pc.index(pc.is_null(column), True).as_py()
            raise ValueError(null_message(label, name, frame.row(row)))
        if pa.types.is_dictionary(column.type):  # categorical ids: their values
            column = column.cast(column.type.value_type)
        if name in numeric:
            column = pc.cast(column, pa.float64(), safe=False)
        frame.columns[name] = column
    for name in numeric:
        frame.columns[name] = frame.columns[name].to_numpy()
    return frame


def table_label(role: str, path: str | os.PathLike | None = None) -> str:
    """How messages of both engines name an input table: its argument (``role``, e.g.
    ``held_out`` or ``recommendations['A']``) and its file, if it was read from one.

    Examples
    --------
    >>> from recpack_ope.io.tables import table_label
    >>> table_label("recommendations['A']", "a.csv"), table_label("held_out")
    ("recommendations['A'] file 'a.csv'", 'held_out table')
    """
    return f"{role} table" if path is None else f"{role} file {str(path)!r}"


def _index_labels(table):
    """The labels of a table's rows when it came from a pandas DataFrame with an index other
    than 0..n−1 (``pyarrow.Table.from_pandas`` keeps it), else None."""
    import pyarrow as pa

    index = (table.schema.pandas_metadata or {}).get("index_columns") or []
    if len(index) != 1:
        return None
    if isinstance(index[0], str):
        return table.column(index[0]) if index[0] in table.column_names else None
    start, step = index[0].get("start", 0), index[0].get("step", 1)
    if (start, step) == (0, 1):
        return None
    return pa.array(range(start, start + step * table.num_rows, step))


def id_message(label: str, column: str, row: str) -> str:
    """The refusal of an id that is neither an integer nor text (NaN, 1.5, or a float beyond
    2**53 that may be a rounded id), the same on every engine; ``row`` shows it.

    Examples
    --------
    >>> from recpack_ope.io.tables import id_message
    >>> id_message("held_out table", "user", "row 2 (user=nan)")[:62]
    "held_out table column 'user' must hold ids: integers, text, or"
    """
    return (
        f"{label} column {column!r} must hold ids: integers, text, or whole real numbers of "
        f"size at most 2**53 (a float beyond it may hold a rounded id), got {row}"
    )


def mixed_ids_message(column: str, kinds: Mapping[str, str]) -> str:
    """The refusal of integer ids in one table and text ids in another (``kinds``: table
    label → ``"integer"`` or ``"text"``), the same on every engine: they never match.

    Examples
    --------
    >>> from recpack_ope.io.tables import mixed_ids_message
    >>> mixed_ids_message("user", {"held_out table": "integer", "propensity table": "text"})
    "column 'user' must hold one kind of id in every table, got integer ids in held_out \
table, text ids in propensity table"
    """
    return f"column {column!r} must hold one kind of id in every table, got " + ", ".join(
        f"{k} ids in {label}" for label, k in kinds.items()
    )


#: What a column of a table must hold, by column, for :func:`value_message`.
VALUE_RULES = {
    "reward": "finite rewards >= 0",
    "score": "finite scores",
    "rank": "finite ranks",
}


def null_message(label: str, column: str, row: str) -> str:
    """The refusal of a null in ``column`` of the table ``label``, the same on every engine;
    ``row`` shows it.

    Examples
    --------
    >>> from recpack_ope.io.tables import null_message
    >>> null_message("held_out table", "item", "row 3 (user=1, item=None, reward=1.0)")
    "held_out table has a null in column 'item', e.g. row 3 (user=1, item=None, reward=1.0)"
    """
    return f"{label} has a null in column {column!r}, e.g. {row}"


def value_message(label: str, column: str, row: str) -> str:
    """The refusal of a value of ``column`` outside :data:`VALUE_RULES` (a negative or
    non-finite reward, a non-finite score or rank), the same on every engine.

    Examples
    --------
    >>> from recpack_ope.io.tables import value_message
    >>> value_message("held_out table", "reward", "row 0 (user=1, item=2, reward=-1.0)")
    "held_out table column 'reward' must hold finite rewards >= 0, got row 0 (user=1, \
item=2, reward=-1.0)"
    """
    return f"{label} column {column!r} must hold {VALUE_RULES[column]}, got {row}"


def repeat_message(label: str, names, values, first: str, second: str, per: str) -> str:
    """The refusal of a key (``values`` of the columns ``names``) that two rows of the table
    ``label`` share, shown as ``first`` and ``second``, the same on every engine; ``per`` says
    what must be unique.

    Examples
    --------
    >>> from recpack_ope.io.tables import repeat_message
    >>> repeat_message("held_out table", ("user", "item"), (1, 2), "row 0 (…)", "row 4 (…)",
    ...                "(user, item)")
    'held_out table has the (user, item) pair (1, 2) more than once, in row 0 (…) and \
row 4 (…): one row per (user, item)'
    """
    key = (
        f"{names[0]} {values[0]!r}"
        if len(names) == 1
        else f"the ({', '.join(names)}) pair ({', '.join(repr(v) for v in values)})"
    )
    return f"{label} has {key} more than once, in {first} and {second}: one row per {per}"


def missing_propensity_message(label: str, item, held_label: str, held_row: str) -> str:
    """The refusal of a held-out item (``held_row`` of ``held_label``) without a row in the
    propensity table ``label``, the same on every engine.

    Examples
    --------
    >>> from recpack_ope.io.tables import missing_propensity_message
    >>> missing_propensity_message("propensity table", 7, "held_out table", "row 2 (…)")
    'propensity table has no row for item 7 of held_out table row 2 (…): every held-out item \
needs a propensity'
    """
    return (
        f"{label} has no row for item {item!r} of {held_label} {held_row}: every held-out item "
        "needs a propensity"
    )


def propensity_range_message(label: str, row: str, held_label: str, held_row: str) -> str:
    """The refusal of a propensity outside (0, 1] (``row`` of ``label``) for a held-out item
    (``held_row`` of ``held_label``), the same on every engine.

    Examples
    --------
    >>> from recpack_ope.io.tables import propensity_range_message
    >>> propensity_range_message("propensity table", "row 0 (…)", "held_out table", "row 1 (…)")
    "propensity table column 'propensity' must lie in (0, 1] for every held-out item, got \
row 0 (…) for held_out table row 1 (…)"
    """
    return (
        f"{label} column 'propensity' must lie in (0, 1] for every held-out item, got {row} "
        f"for {held_label} {held_row}"
    )


def _exact_ids(frames, column: str) -> None:
    """Put every frame's ``column`` (as read) as numpy ids that compare exactly across the
    frames (module docstring): integers of any width, signedness and whole real numbers up to
    2**53 as one integer type (int64, uint64 beyond it, Python ints for a mix of negative ids
    and ids beyond 2**63 − 1), or text; refuses anything else, and a mix of the two."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kinds, values = {}, []
    for frame in frames:
        read = frame.columns[column]
        kind = read.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            kinds[frame.label] = "text"
            values.append(np.asarray(read.to_numpy(), dtype=object))
            continue
        if not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        ):
            raise ValueError(
                f"{frame.label} column {column!r} must hold integer or text ids, got {kind}"
            )
        kinds[frame.label] = "integer"
        for exact in (pa.int64(), pa.uint64()) if pa.types.is_decimal(kind) else ():
            try:
                read = pc.cast(read, exact)
                break
            except pa.ArrowInvalid:
                continue
        if pa.types.is_integer(read.type):
            values.append(read.to_numpy())
            continue
        if pa.types.is_decimal(kind):
            # Beyond both casts: exact in Python, whole values as ints of any size.
            whole = [int(v) if v == v.to_integral_value() else None for v in read.to_pylist()]
            bad = np.array([v is None for v in whole])
            ids = np.array(whole, dtype=object)
        else:
            real = pc.cast(read, pa.float64()).to_numpy()
            bad = ~whole_ids(real)
            ids = np.where(bad, 0, real).astype(np.int64)
        if bad.any():
            raise ValueError(id_message(frame.label, column, frame.row(np.flatnonzero(bad)[0])))
        values.append(ids)
    if len(set(kinds.values())) > 1:
        raise ValueError(mixed_ids_message(column, kinds))
    if "integer" in kinds.values():
        big = any(
            v.dtype == np.uint64 and v.size and v.max() > np.iinfo(np.int64).max for v in values
        )
        negative = any(v.dtype.kind == "i" and v.size and v.min() < 0 for v in values)
        # Python ints hold every id exactly: for a mix of negative ids and ids beyond int64,
        # or decimals beyond 64 bits.
        exact = any(v.dtype == object for v in values) or big and negative
        common = object if exact else np.uint64 if big else np.int64
        values = [v.astype(common) for v in values]
    for frame, ids in zip(frames, values, strict=True):
        frame.columns[column] = ids


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
        values = [frame.value(first, n) for n in names]
        raise ValueError(
            repeat_message(frame.label, names, values, frame.row(first), frame.row(second), per)
        )


def _refuse(frame: _Frame, bad: np.ndarray, column: str) -> None:
    """Refuse the first row where ``bad`` holds, saying what ``column`` must hold."""
    rows = np.flatnonzero(bad)
    if rows.size:
        raise ValueError(value_message(frame.label, column, frame.row(rows[0])))


def _score_matrix(frame: _Frame, key: str, keys: np.ndarray, items: np.ndarray) -> sp.csr_matrix:
    """Sparse ``keys × items`` scores of a ranked table (``key``: user or context); rows whose
    key is not in ``keys`` (contexts a feed log does not hold) are left out."""
    values = frame.ranked_values()
    column = "score" if "score" in frame.columns else "rank"
    _refuse(frame, ~np.isfinite(values), column)
    rows = _positions(keys, frame.columns[key])
    cols = _positions(items, frame.columns["item"])
    own_keys, own = np.unique(frame.columns[key], return_inverse=True)  # unknown keys too
    own = own.ravel()
    if column == "rank":
        _check_ranks(frame.label, key, own_keys, own, frame.columns["rank"])
    _refuse_repeats(frame, (own, cols), (key, "item"), f"({key}, item)")
    known = rows >= 0
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
        raise ValueError(ranks_message(label, key, _plain(keys[k]), n[k], low[k], high[k]))


def _plain(value):
    """An id of a numpy array as a Python value, for messages."""
    return value.item() if isinstance(value, np.generic) else value


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
        Users whose rewards are all 0 are kept (the estimators count them as excluded over
        ``population="observed"``).
    recommendations : mapping of model name → path or pyarrow.Table
        Columns ``user``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top), one
        row per (user, item). A user with recommendations but no held-out rows is a user
        without held-out rewards: an empty row of ``y_true``, counted as
        :attr:`HeldOutTables.n_users_without_held_out`.
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
        ranks of a user other than 1..n, a held-out item without a propensity or with one
        outside (0, 1], an item listed twice in ``propensity``, an id that is neither an integer
        nor text (NaN, 1.5), ids of different kinds (integer, text) across tables; a file that
        cannot be read, is empty or has no rows (:func:`read_table`).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from recpack_ope.io.tables import held_out_tables
    >>> big = pa.array([2**64 - 1, 5], pa.uint64())  # ids compare by value across types
    >>> held = pa.table({"user": big, "item": [1, 1], "reward": [1.0, 0.0]})
    >>> recs = pa.table({"user": pa.array([7, 5], pa.int8()), "item": [1, 1], "rank": [1, 1]})
    >>> tables = held_out_tables(held, {"A": recs})
    >>> tables.users.tolist(), tables.y_true.toarray().ravel().tolist()
    ([5, 7, 18446744073709551615], [0.0, 0.0, 1.0])
    >>> tables.n_users_without_held_out  # user 7: recommended, no held-out rows
    1
    """
    held = _frame(held_out, "held_out", ("user", "item", "reward"), numeric=("reward",))
    models = {
        name: _frame(
            source, ROLES["recommendations"].format(name=name), ("user", "item"), ranked=True
        )
        for name, source in _models(recommendations, "recommendations").items()
    }
    weights = (
        None
        if propensity is None
        else _frame(propensity, "propensity", ("item", "propensity"), numeric=("propensity",))
    )
    _exact_ids([held, *models.values()], "user")
    _exact_ids([held, *models.values(), *([weights] if weights else [])], "item")

    reward = held.columns["reward"]
    _refuse(held, ~(np.isfinite(reward) & (reward >= 0)), "reward")
    # The users of the evaluation: held-out users and recommended ones, as in the Python API,
    # where a row of y_true without entries is a user without held-out rewards.
    held_users = np.unique(held.columns["user"])
    users = np.unique(np.concatenate([held_users, *(m.columns["user"] for m in models.values())]))
    items = np.unique(
        np.concatenate([held.columns["item"], *(m.columns["item"] for m in models.values())])
    )
    u = _positions(users, held.columns["user"])
    i = _positions(items, held.columns["item"])
    _refuse_repeats(held, (u, i), ("user", "item"), "(user, item)")
    y_true = sp.csr_matrix((reward, (u, i)), shape=(users.size, items.size))
    scores = {name: _score_matrix(frame, "user", users, items) for name, frame in models.items()}

    vector = None
    if weights is not None:
        listed = weights.columns["item"]
        order = np.argsort(listed, kind="stable")
        _refuse_repeats(weights, (_positions(np.unique(listed), listed),), ("item",), "item")
        at = _positions(listed[order], held.columns["item"])
        if (at < 0).any():
            k = int(np.flatnonzero(at < 0)[0])
            raise ValueError(
                missing_propensity_message(
                    weights.label, held.value(k, "item"), held.label, held.row(k)
                )
            )
        p = weights.columns["propensity"][order][at]
        outside = np.flatnonzero(~((p > 0) & (p <= 1)))
        if outside.size:
            k = int(outside[0])
            raise ValueError(
                propensity_range_message(
                    weights.label, weights.row(order[at[k]]), held.label, held.row(k)
                )
            )
        vector = np.ones(items.size)
        vector[i] = p
    return HeldOutTables(
        users=users,
        items=items,
        y_true=y_true,
        scores=scores,
        propensity=vector,
        n_users_without_held_out=users.size - held_users.size,
        n_users_without_recommendations={
            name: int((_positions(np.unique(frame.columns["user"]), held_users) < 0).sum())
            for name, frame in models.items()
        },
    )


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
        twice in a target, a non-finite score or rank, a target's ranks of a context other
        than 1..n, an id that is neither an integer nor text, ids of different kinds across
        tables, a file that cannot be read, is empty or has no rows (:func:`read_table`), and
        what :meth:`FeedLog.from_arrays` refuses (ranks below 1, rewards, propensities,
        sessions with several contexts). Session ids are labels: negative ones and ones beyond
        int64 are kept, in increasing order.
    """
    log = _frame(
        feed_log,
        "feed_log",
        ("session", "context", "item", "rank", "reward"),
        numeric=("rank", "reward"),
        optional=LOG_PROBABILITIES,
    )
    ranked = {
        name: _frame(source, ROLES["targets"].format(name=name), ("context", "item"), ranked=True)
        for name, source in _models(targets, "targets").items()
    }
    _exact_ids([log], "session")
    for column in ("context", "item"):
        _exact_ids([log, *ranked.values()], column)
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
    session = log.columns["session"]
    if (
        session.dtype.kind == "u"
        or session.dtype.kind == "i"
        and session.size
        and session.min() < 0
    ):
        # Session ids are labels here: as Python ints FeedLog encodes them, where it would take
        # non-negative int64 ids as they are and refuse negative ones or ones beyond int64.
        session = session.astype(object)
    _refuse_repeats(
        log,
        (sessions, rank),
        ("session", "rank"),
        "(session, rank): a feed shows one item per rank",
    )
    context = _positions(contexts, log.columns["context"])
    n_sessions = int(sessions.max(initial=-1)) + 1
    low, high = np.full(n_sessions, contexts.size), np.full(n_sessions, -1)
    np.minimum.at(low, sessions, context)
    np.maximum.at(high, sessions, context)
    mixed = np.flatnonzero(low != high)
    if mixed.size:
        # Named here by their ids: FeedLog sees the contexts' positions.
        s = int(np.flatnonzero(sessions == mixed[0])[0])
        raise ValueError(
            f"{log.label}: "
            + mixed_contexts_message(
                _plain(log.columns["session"][s]),
                _plain(contexts[low[mixed[0]]]),
                _plain(contexts[high[mixed[0]]]),
            )
        )
    try:
        feeds = FeedLog.from_arrays(
            session,
            item,
            rank,
            log.columns["reward"],
            context=context,
            **{c: log.columns.get(c) for c in LOG_PROBABILITIES},
            n_items=items.size,
            n_contexts=contexts.size,
        )
    except ValueError as error:
        raise ValueError(f"{log.label}: {error}") from None
    scores = {
        name: _score_matrix(frame, "context", contexts, items) for name, frame in ranked.items()
    }
    return FeedLogTables(log=feeds, contexts=contexts, items=items, scores=scores)
