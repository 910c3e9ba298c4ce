"""Checks of Spark DataFrames' columns on the driver, and the long frames the plans read.

Column names and types are checked from the schema (no Spark job); row-level problems
(nulls, ids that are not ids, negative rewards, duplicates, propensities out of range) are found
in the partitions by the plans, on the same pass that computes the estimates. Only when some
check fails does :func:`diagnose` look for the first problem in the order the in-memory engine
checks (:func:`recpack_ope.io.tables.held_out_tables`), so both engines refuse an input with
the same message; good input costs no extra pass.

Ids follow the rules of :mod:`recpack_ope.io.tables`: integers of any width (a uint64 column
of a parquet file reads as ``decimal(20,0)``), and whole real numbers up to 2**53, compare by
value; text ids are text; a mix of integer and text ids is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from ..io.tables import (
    EXACT_FLOAT,
    file_message,
    id_message,
    missing_propensity_message,
    mixed_ids_message,
    null_message,
    propensity_range_message,
    ranks_message,
    repeat_message,
    value_message,
)
from . import _partitions

# Spark's simpleString names of numeric types (tinyint, smallint, int, bigint, float, double,
# decimal(p,s))
NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
#: Spark's integer types: ids of these compare exactly.
INTEGRAL = ("tinyint", "smallint", "int", "bigint")
#: The row index (from 0, in file order) that :mod:`recpack_ope.spark.files` adds to the frames
#: it reads, so messages name the row as the in-memory engine does; never shown as a column.
ROW = "__recpack_ope_row__"


def present(frame) -> list[str]:
    """The user's columns of ``frame`` (without :data:`ROW`)."""
    return [c for c in frame.columns if c != ROW]


def require(frame, name: str, columns, numeric=()) -> None:
    """``frame`` (argument ``name``) has ``columns``; those in ``numeric`` are numbers."""
    if not hasattr(frame, "schema") or not hasattr(frame, "sparkSession"):
        raise TypeError(f"{name} must be a Spark DataFrame, got {type(frame).__name__}")
    have = present(frame)
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"{name} has no column {missing[0]!r}; its columns are {have}")
    for column in numeric:
        kind = frame.schema[column].dataType.simpleString()
        if not kind.startswith(NUMERIC):
            raise ValueError(f"{name} column {column!r} must be numeric, got {kind}")


def same_type(frames: dict, column: str) -> None:
    """``column`` has one type in every frame (ids are compared, never converted)."""
    kinds = {name: f.schema[column].dataType.simpleString() for name, f in frames.items()}
    if len(set(kinds.values())) > 1:
        raise ValueError(
            f"column {column!r} must have one type in every frame, got "
            + ", ".join(f"{k} in {n}" for n, k in kinds.items())
        )


def models(recommendations) -> dict:
    """Model name → frame; one frame is the model ``"model"``."""
    if isinstance(recommendations, Mapping):
        if not recommendations:
            raise ValueError("recommendations maps no model")
        bad = [n for n in recommendations if not isinstance(n, str)]
        if bad:
            raise ValueError(f"model names must be strings, got {bad[0]!r}")
        return dict(recommendations)
    return {"model": recommendations}


def ranked(frame, name: str, key: str = "user", ids: Mapping[str, str] | None = None):
    """``(user, item, value)`` of a recommendations frame (its ``key`` column as ``user``): its
    score, or minus its rank; ``ids`` gives the Spark type the ``key`` and ``item`` ids are
    compared as (:func:`id_type`), default their own."""
    from pyspark.sql import functions as F

    if not hasattr(frame, "schema") or not hasattr(frame, "sparkSession"):
        raise TypeError(f"{name} must be a Spark DataFrame, got {type(frame).__name__}")
    has = [c for c in ("score", "rank") if c in frame.columns]
    if len(has) != 1:
        raise ValueError(
            f"{name} needs exactly one of the columns 'score' (higher is better) or 'rank' "
            f"(1 = top), got {present(frame)}"
        )
    require(frame, name, (key, "item", *has), numeric=has)
    ids = ids or {}
    if has == ["rank"]:
        _check_ranks(frame, name, key, ids.get(key))
    value = F.col("score") if has == ["score"] else -F.col("rank")
    return frame.select(
        id_column(frame, key, ids.get(key)).alias("user"),
        id_column(frame, "item", ids.get("item")),
        value.cast("double").alias("value"),
    )


def _check_ranks(frame, name: str, key: str, kind: str | None = None) -> None:
    """Ranks are positions: each ``key``'s n rows hold the ranks 1..n, each once (as in
    memory, :func:`recpack_ope.io.tables.ranks_message`, naming the smallest such key as an
    id of type ``kind``). Checked in Spark."""
    from pyspark.sql import functions as F

    rank = F.col("rank").cast("double")
    # Nulls and non-finite ranks are refused where every value is checked.
    finite = rank.isNotNull() & ~F.isnan(rank) & (F.abs(rank) != float("inf"))
    per_key = (
        frame.where(finite)
        .groupBy(id_column(frame, key, kind))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.countDistinct(rank).alias("distinct"),
            F.min(rank).alias("low"),
            F.max(rank).alias("high"),
            F.min((rank == F.floor(rank)).cast("int")).alias("whole"),
        )
    )
    bad = per_key.where(
        (F.col("whole") == 0)
        | (F.col("low") != 1)
        | (F.col("high") != F.col("n"))
        | (F.col("distinct") != F.col("n"))
    )
    first = _partitions.collect(bad.orderBy(key).limit(1))
    if first:
        row = first[0]
        raise ValueError(
            ranks_message(name, key, _python(row[key]), row["n"], row["low"], row["high"])
        )


def _id_kind(frame, label: str, column: str) -> str:
    """``"integer"`` or ``"text"``: the kind of id ``column`` of ``frame`` holds; refuses any
    other type, naming the table by ``label``."""
    kind = frame.schema[column].dataType.simpleString()
    if kind == "string":
        return "text"
    if kind.startswith(NUMERIC):
        return "integer"
    raise ValueError(f"{label} column {column!r} must hold integer or text ids, got {kind}")


def id_type(frames: Mapping, column: str) -> str:
    """The Spark type the ids of ``column`` are compared as in every one of ``frames`` (label
    → frame): ``string`` for text, ``bigint`` for integers (and whole real numbers), or
    ``decimal(20,0)`` when a frame holds decimals (uint64 ids beyond int64). Refuses a mix of
    integer and text ids, as the in-memory engine does
    (:func:`recpack_ope.io.tables.mixed_ids_message`)."""
    kinds = {label: _id_kind(frame, label, column) for label, frame in frames.items()}
    if len(set(kinds.values())) > 1:
        raise ValueError(mixed_ids_message(column, kinds))
    if "text" in kinds.values():
        return "string"
    wide = any(
        f.schema[column].dataType.simpleString().startswith("decimal") for f in frames.values()
    )
    return "decimal(20,0)" if wide else "bigint"


def _is_id(frame, column: str):
    """Spark condition: the value of ``column`` is an id (null for a null): any integer or
    text; a real number only when whole and of size at most 2**53; a decimal only when whole
    and within 64 bits."""
    from pyspark.sql import functions as F

    kind = frame.schema[column].dataType.simpleString()
    c = F.col(column)
    if kind.startswith("decimal"):
        low, high = F.lit(Decimal(-(2**63))), F.lit(Decimal(2**64 - 1))
        return (c == F.floor(c)) & (c >= low) & (c <= high)
    if kind in ("float", "double"):
        # NaN equals itself in Spark but is larger than every number: refused by the bound.
        return (c == F.floor(c)) & (F.abs(c) <= EXACT_FLOAT)
    return F.lit(True)


def id_column(frame, column: str, kind: str | None):
    """Column ``column`` of ``frame`` as ids of Spark type ``kind`` (None: as it is), null
    where the value is not an id (:func:`_is_id`): partitions refuse nulls, and
    :func:`diagnose` then names the row."""
    from pyspark.sql import functions as F

    if kind is None:
        return F.col(column)
    return F.when(_is_id(frame, column), F.col(column).cast(kind)).alias(column)


def _python(value):
    """A value of a collected row as the in-memory engine shows it: whole decimals (uint64 ids
    read by Spark) as integers."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value


def single_row_per(frame, name: str, key: str) -> None:
    """A small table (e.g. propensities by item) has one row per ``key``: checked in Spark."""
    from pyspark.sql import functions as F

    twice = _partitions.collect(frame.groupBy(key).count().filter(F.col("count") > 1).limit(1))
    if twice:
        raise ValueError(
            f"{name} has {twice[0]['count']} rows for {key} {twice[0][key]!r}; one per {key}"
        )


class FileLabel(str):
    """How messages name a table read from a file (a ``str``), with the file's format
    (``"parquet"`` or ``"csv"``): a file without rows is refused as in memory."""

    file_format: str

    def __new__(cls, label: str, file_format: str) -> FileLabel:
        made = super().__new__(cls, label)
        made.file_format = file_format
        return made


@dataclass(frozen=True)
class Table:
    """An input frame, how messages name it (``label``, as
    :func:`recpack_ope.io.tables.table_label` for a file) and the columns it needs."""

    label: str
    frame: object
    required: tuple[str, ...]
    numeric: tuple[str, ...] = ()
    ranked: bool = False

    def columns(self) -> list[str]:
        """The columns read, which messages show; refuses a frame without them or with text
        where numbers belong, as the in-memory engine does."""
        if not hasattr(self.frame, "schema") or not hasattr(self.frame, "sparkSession"):
            raise TypeError(
                f"{self.label} must be a Spark DataFrame, got {type(self.frame).__name__}"
            )
        required, numeric = list(self.required), tuple(self.numeric)
        if self.ranked:
            has = [c for c in ("score", "rank") if c in self.frame.columns]
            if len(has) != 1:
                ranked(self.frame, self.label)  # raises the refusal
            required.append(has[0])
            numeric = (*numeric, has[0])
        require(self.frame, self.label, required, numeric=numeric)
        return required

    @property
    def indexed(self) -> bool:
        """Whether the frame carries the index of its rows in its file."""
        return ROW in self.frame.columns

    def numbered(self):
        """The frame with a :data:`ROW` column (for a frame not read from a file, an id that
        only orders its rows)."""
        from pyspark.sql import functions as F

        if self.indexed:
            return self.frame
        return self.frame.withColumn(ROW, F.monotonically_increasing_id())

    def show(self, record) -> str:
        """``row k (name=value, …)`` of a collected record, as the in-memory engine shows it;
        ``row (…)`` for a frame not read from a file, whose rows have no index."""
        values = ", ".join(f"{n}={_python(record[n])!r}" for n in self.columns())
        return f"row {record[ROW]} ({values})" if self.indexed else f"row ({values})"


def held_out_inputs(held_out, recommendations, propensity, labels: Mapping | None = None):
    """(model names, the held-out and recommendations :class:`Table` objects, the propensity
    table or None); ``labels`` says how messages name them: ``"held_out"`` and
    ``"propensity"`` map to a label, ``"recommendations"`` to a label per model (default the
    arguments' names)."""
    labels = labels or {}
    named = models(recommendations)
    tables = [
        Table(labels.get("held_out", "held_out"), held_out, ("user", "item", "reward"), ("reward",))
    ]
    for model, frame in named.items():
        default = (
            f"recommendations[{model!r}]"
            if isinstance(recommendations, Mapping)
            else "recommendations"
        )
        label = labels.get("recommendations", {}).get(model, default)
        tables.append(Table(label, frame, ("user", "item"), ranked=True))
    weights = (
        None
        if propensity is None
        else Table(
            labels.get("propensity", "propensity"),
            propensity,
            ("item", "propensity"),
            ("propensity",),
        )
    )
    return tuple(named), tables, weights


def held_out_frame(tables, weights, stratify_by=None):
    """The union of held-out and recommendation rows (:func:`held_out_inputs`) with a
    ``source`` column: −1 for held-out rows, m for model m; with a propensity table, held-out
    rows carry their item's ``propensity``, and with ``stratify_by`` the propensity they are
    stratified by, ``stratify`` (a column only when its table is given). Ids are cast to the
    type they compare as (:func:`id_type`); a propensity table is checked here (nulls, an item
    twice): its rows reach partitions only through held-out items."""
    from pyspark.sql import functions as F

    every = [*tables, *([weights] if weights is not None else [])]
    for table in every:
        table.columns()
    files = [t for t in every if getattr(t.label, "file_format", None) is not None]
    if files:
        # One job tells which files have a row: a file without rows is refused, as in memory.
        found = files[0].frame.select(F.lit(0).alias("table")).limit(1)
        for j, table in enumerate(files[1:], start=1):
            found = found.unionByName(table.frame.select(F.lit(j).alias("table")).limit(1))
        if len(_partitions.collect(found)) < len(files):
            raise ValueError("an input file has no rows")
    held, *recommended = tables
    every = {t.label: t.frame for t in tables}
    ids = {
        "user": id_type(every, "user"),
        "item": id_type({**every, **({weights.label: weights.frame} if weights else {})}, "item"),
    }
    rows = [
        ranked(t.frame, t.label, ids=ids).withColumn("source", F.lit(m))
        for m, t in enumerate(recommended)
    ]
    frame = held.frame
    held_rows = frame.select(
        id_column(frame, "user", ids["user"]),
        id_column(frame, "item", ids["item"]),
        F.col("reward").cast("double").alias("value"),
        F.lit(-1).alias("source"),
    )
    columns = ["user", "item", "value", "source"]
    for column, table in (("propensity", weights), ("stratify", stratify_by)):
        if table is None:
            # Every column is shuffled and handed to Python: none that no estimator reads.
            continue
        columns.append(column)
        rows = [r.withColumn(column, F.lit(None).cast("double")) for r in rows]
        if column == "propensity":
            _refuse_bad_weights(table)
            table = table.frame
        else:
            require(table, "stratify_by", ("item", "propensity"), numeric=("propensity",))
            same_type({"held_out": frame, "stratify_by": table}, "item")
            single_row_per(table, "stratify_by", "item")
        values = table.select(
            id_column(table, "item", ids["item"]), F.col("propensity").cast("double").alias(column)
        )
        held_rows = held_rows.join(F.broadcast(values), on="item", how="left")
    long = held_rows.select(*columns)
    for part in rows:
        long = long.unionByName(part.select(*columns))
    return long


def _refuse_bad_weights(weights: Table) -> None:
    """Refuse a propensity table with a null, an id that is not one, or an item twice; the
    message may name a later problem than the in-memory engine's first: callers
    :func:`diagnose` on refusal."""
    from pyspark.sql import functions as F

    found = weights.frame.agg(
        F.max(
            (
                F.col("item").isNull()
                | F.col("propensity").isNull()
                | ~_is_id(weights.frame, "item")
            ).cast("int")
        ).alias("bad"),
        (F.count(F.lit(1)) - F.countDistinct("item")).alias("twice"),
    )
    row = _partitions.collect(found)[0]
    if row["bad"] or row["twice"]:
        raise ValueError(f"{weights.label} has a null, a value that is not an id or an item twice")


def _first_rows(table: Table, conditions: Mapping) -> dict:
    """For each named Spark condition, the first row of ``table`` (by its index) where it
    holds, as a record with :data:`ROW` and the table's columns, or None; one Spark job."""
    from pyspark.sql import functions as F

    frame = table.numbered()
    record = F.struct(F.col(ROW), *table.columns())
    found = frame.agg(
        *(F.min(F.when(c, record)).alias(f"c{j}") for j, c in enumerate(conditions.values()))
    )
    row = _partitions.collect(found)[0]
    return {name: row[f"c{j}"] for j, name in enumerate(conditions)}


def _refuse_repeats(table: Table, keys: tuple[str, ...], per: str) -> None:
    """Refuse the smallest key (the values of the columns ``keys``) that occurs in two rows of
    ``table``, naming its first two rows, as the in-memory engine does."""
    from pyspark.sql import functions as F

    record = F.struct(F.col(ROW), *table.columns())
    twice = (
        table.numbered()
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("n"), F.array_sort(F.collect_list(record)).alias("rows"))
        .where(F.col("n") > 1)
        .orderBy(*keys)
        .limit(1)
    )
    found = _partitions.collect(twice)
    if found:
        first, second = found[0]["rows"][:2]
        values = [_python(first[k]) for k in keys]
        raise ValueError(
            repeat_message(table.label, keys, values, table.show(first), table.show(second), per)
        )


def _finite(column):
    from pyspark.sql import functions as F

    value = column.cast("double")
    return ~F.isnan(value) & (F.abs(value) != float("inf"))


def diagnose(tables, weights) -> None:
    """Raise the first problem of held-out inputs (:func:`held_out_inputs`) in the order the
    in-memory engine checks them (:func:`recpack_ope.io.tables.held_out_tables`), with its
    message; return when there is none. Called only after some check refused the inputs: it
    runs a few small Spark jobs."""
    from pyspark.sql import functions as F

    held, *recommended = tables
    every = [*tables, *([weights] if weights is not None else [])]
    found = {}
    for table in every:
        file_format = getattr(table.label, "file_format", None)
        if file_format is not None and not table.frame.limit(1).count():
            raise ValueError(file_message(table.label, "no_rows", file_format))
        columns = table.columns()
        conditions = {("null", c): F.col(c).isNull() for c in columns}
        for column in ("user", "item"):
            if column in columns and table.frame.schema[column].dataType.simpleString().startswith(
                NUMERIC
            ):
                conditions["id", column] = ~_is_id(table.frame, column)
        if table is held:
            conditions["bad"] = ~(_finite(F.col("reward")) & (F.col("reward") >= 0))
        elif table is not weights:
            conditions["bad"] = ~_finite(F.col(columns[-1]))
        found[table.label, id(table)] = first = _first_rows(table, conditions)
        for column in columns:
            if first["null", column] is not None:
                raise ValueError(
                    null_message(table.label, column, table.show(first["null", column]))
                )
    for column, group in (("user", tables), ("item", every)):
        for table in group:
            _id_kind(table.frame, table.label, column)
            bad = found[table.label, id(table)].get(("id", column))
            if bad is not None:
                raise ValueError(id_message(table.label, column, table.show(bad)))
        id_type({t.label: t.frame for t in group}, column)
    bad = found[held.label, id(held)]["bad"]
    if bad is not None:
        raise ValueError(value_message(held.label, "reward", held.show(bad)))
    _refuse_repeats(held, ("user", "item"), "(user, item)")
    for table in recommended:
        column = table.columns()[-1]
        bad = found[table.label, id(table)]["bad"]
        if bad is not None:
            raise ValueError(value_message(table.label, column, table.show(bad)))
        if column == "rank":
            _check_ranks(table.frame, table.label, "user", id_type({"": table.frame}, "user"))
        _refuse_repeats(table, ("user", "item"), "(user, item)")
    if weights is not None:
        _refuse_weights(held, weights)


def _refuse_weights(held: Table, weights: Table) -> None:
    """The propensity checks of :func:`diagnose`: an item twice, a held-out item without a
    propensity or with one outside (0, 1]."""
    from pyspark.sql import functions as F

    _refuse_repeats(weights, ("item",), "item")
    kind = id_type({held.label: held.frame, weights.label: weights.frame}, "item")
    left = held.numbered().select(
        id_column(held.frame, "item", kind).alias("key"),
        F.struct(F.col(ROW), *held.columns()).alias("held"),
    )
    right = weights.numbered().select(
        id_column(weights.frame, "item", kind).alias("key"),
        F.struct(F.col(ROW), *weights.columns()).alias("weights"),
        F.col("propensity").cast("double").alias("p"),
    )
    p = F.col("p")
    found = _partitions.collect(
        left.join(right, on="key", how="left").agg(
            F.min(F.when(F.col("weights").isNull(), F.col("held"))).alias("missing"),
            F.min(
                F.when(
                    F.col("weights").isNotNull() & ~((p > 0) & (p <= 1)),
                    F.struct(F.col("held"), F.col("weights")),
                )
            ).alias("outside"),
        )
    )[0]
    if found["missing"] is not None:
        row = found["missing"]
        raise ValueError(
            missing_propensity_message(
                weights.label, _python(row["item"]), held.label, held.show(row)
            )
        )
    if found["outside"] is not None:
        row = found["outside"]
        raise ValueError(
            propensity_range_message(
                weights.label, weights.show(row["weights"]), held.label, held.show(row["held"])
            )
        )
