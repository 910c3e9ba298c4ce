"""Checks of Spark DataFrames' columns on the driver, and the long frames the plans read.

Column names and types are checked from the schema (no Spark job); row-level problems
(nulls, negative rewards, duplicates, propensities out of range, unknown users) are found in
the partitions by the plans, on the same pass that computes the estimates.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..io.tables import ranks_message
from . import _partitions

# Spark's simpleString names of numeric types (tinyint, smallint, int, bigint, float, double,
# decimal(p,s))
NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def require(frame, name: str, columns, numeric=()) -> None:
    """``frame`` (argument ``name``) has ``columns``; those in ``numeric`` are numbers."""
    if not hasattr(frame, "schema") or not hasattr(frame, "sparkSession"):
        raise TypeError(f"{name} must be a Spark DataFrame, got {type(frame).__name__}")
    present = frame.columns
    missing = [c for c in columns if c not in present]
    if missing:
        raise ValueError(f"{name} has no column {missing[0]!r}; its columns are {present}")
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


def ranked(frame, name: str, key: str = "user"):
    """``(user, item, value)`` of a recommendations frame (its ``key`` column as ``user``): its
    score, or minus its rank."""
    from pyspark.sql import functions as F

    require(frame, name, (key, "item"))
    has = [c for c in ("score", "rank") if c in frame.columns]
    if len(has) != 1:
        raise ValueError(
            f"{name} needs exactly one of the columns 'score' (higher is better) or 'rank' "
            f"(1 = top), got {frame.columns}"
        )
    require(frame, name, has, numeric=has)
    if has == ["rank"]:
        _check_ranks(frame, name, key)
    value = F.col("score") if has == ["score"] else -F.col("rank")
    return frame.select(F.col(key).alias("user"), "item", value.cast("double").alias("value"))


def _check_ranks(frame, name: str, key: str) -> None:
    """Ranks are positions: each ``key``'s n rows hold the ranks 1..n, each once (as in
    memory, :func:`recpack_ope.io.tables.ranks_message`). Checked in Spark."""
    from pyspark.sql import functions as F

    rank = F.col("rank").cast("double")
    # Nulls and non-finite ranks are refused where every value is checked.
    finite = rank.isNotNull() & ~F.isnan(rank) & (F.abs(rank) != float("inf"))
    per_key = (
        frame.where(finite)
        .groupBy(key)
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
        raise ValueError(ranks_message(name, key, row[key], row["n"], row["low"], row["high"]))


def single_row_per(frame, name: str, key: str) -> None:
    """A small table (e.g. propensities by item) has one row per ``key``: checked in Spark."""
    from pyspark.sql import functions as F

    twice = _partitions.collect(frame.groupBy(key).count().filter(F.col("count") > 1).limit(1))
    if twice:
        raise ValueError(
            f"{name} has {twice[0]['count']} rows for {key} {twice[0][key]!r}; one per {key}"
        )


def held_out_frame(held_out, recommendations, propensity, stratify_by=None):
    """(model names, the union of held-out and recommendation rows with a ``source`` column:
    −1 for held-out rows, m for model m; held-out rows carry their item's ``propensity`` and,
    for stratified estimates, the propensity they are stratified by, ``stratify``)."""
    from pyspark.sql import functions as F

    require(held_out, "held_out", ("user", "item", "reward"), numeric=("reward",))
    named = models(recommendations)
    frames = {"held_out": held_out}
    rows = []
    for m, (model, frame) in enumerate(named.items()):
        label = (
            f"recommendations[{model!r}]"
            if isinstance(recommendations, Mapping)
            else "recommendations"
        )
        frames[label] = frame
        rows.append(ranked(frame, label).withColumn("source", F.lit(m)))
    for column in ("user", "item"):
        same_type(frames, column)
    held = held_out.select(
        "user", "item", F.col("reward").cast("double").alias("value"), F.lit(-1).alias("source")
    )
    for column, name, table in (
        ("propensity", "propensity", propensity),
        ("stratify", "stratify_by", stratify_by),
    ):
        rows = [r.withColumn(column, F.lit(None).cast("double")) for r in rows]
        if table is None:
            held = held.withColumn(column, F.lit(None).cast("double"))
            continue
        require(table, name, ("item", "propensity"), numeric=("propensity",))
        same_type({"held_out": held_out, name: table}, "item")
        single_row_per(table, name, "item")
        values = table.select("item", F.col("propensity").cast("double").alias(column))
        held = held.join(F.broadcast(values), on="item", how="left")
    columns = ["user", "item", "value", "source", "propensity", "stratify"]
    frame = held.select(*columns)
    for part in rows:
        frame = frame.unionByName(part.select(*columns))
    return tuple(named), frame
