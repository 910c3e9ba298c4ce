"""Models evaluated from parquet or CSV files on Spark: ``recpack-ope evaluate --engine spark``.

:func:`evaluate_files` takes the arguments of
:func:`recpack_ope.evaluation.files.evaluate_files`, checks them the same way, reads the files
as Spark DataFrames (:func:`read_table`) and computes the estimates with :func:`evaluate`,
:func:`logged_dcg` or :func:`ranking_ips`: the same
:class:`~recpack_ope.evaluation.files.FileEvaluation`, to rounding, as the in-memory engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from decimal import Decimal

from ..evaluation.chunks import NoReward
from ..evaluation.files import ArgumentError, FileEvaluation, check_log_columns, plan_files
from ..inference.diagnostics import naming
from ..io.tables import (
    ID_COLUMNS,
    INTEGER_ID,
    ROLES,
    csv_id_type,
    table_format,
    table_label,
)
from ..registry import DEFAULT, default
from . import _partitions
from ._frames import ROW, FileLabel
from .held_out import evaluate
from .logged import FEED_LOG, feed_log_estimate
from .session import local_session

__all__ = ["evaluate_files", "read_table"]


def read_table(session, path: str | os.PathLike):
    """A parquet (``.parquet``, ``.pq``) or CSV (``.csv``, header line, types inferred) file
    as a Spark DataFrame; a CSV file's id columns (:data:`~recpack_ope.io.tables.ID_COLUMNS`)
    are typed as :func:`recpack_ope.io.tables.read_table` types them (:func:`_csv_id_types`):
    int64, uint64 beyond it (``decimal(20,0)``), or text compared as written (``1.5``,
    ``010``, ids beyond 64 bits).

    Parameters
    ----------
    session : pyspark.sql.SparkSession
        The session that reads it.
    path : path
        The file; its extension says its format.

    Returns
    -------
    pyspark.sql.DataFrame

    Raises
    ------
    ValueError
        For another extension.

    Examples
    --------
    >>> from recpack_ope.spark import local_session
    >>> from recpack_ope.spark.files import read_table
    >>> read_table(local_session(1), "held_out.parquet").columns  # doctest: +SKIP
    ['user', 'item', 'reward']
    """
    if table_format(path) == "parquet":
        return session.read.parquet(str(path))
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    inferred = session.read.csv(str(path), header=True, inferSchema=True)
    ids = [c for c in ID_COLUMNS if c in inferred.columns]
    if not ids:
        return inferred
    # Spark's inference reads 010 as 10, 1.5 as a real number and ids beyond uint64 as
    # decimals it then refuses, where the in-memory engine reads text: read the ids as text,
    # then type them by the in-memory engine's rule.
    schema = T.StructType(
        [
            T.StructField(f.name, T.StringType() if f.name in ids else f.dataType)
            for f in inferred.schema
        ]
    )
    frame = session.read.csv(str(path), header=True, schema=schema)
    kinds = _csv_id_types(frame, ids)

    def typed(name: str):
        if kinds.get(name, "string") == "string":
            return F.col(f"`{name}`")
        return F.when(~_null(name), F.col(f"`{name}`")).cast(kinds[name]).alias(name)

    return frame.select(*(typed(c) for c in frame.columns))


def _null(name: str):
    """Spark condition: the text of CSV column ``name`` is one pyarrow reads as a null in a
    numeric column (``nan``, ``NA``, ``null``, …; Spark reads an empty field as a null)."""
    from pyarrow import csv
    from pyspark.sql import functions as F

    return F.col(f"`{name}`").isin(list(csv.ConvertOptions().null_values))


def _csv_id_types(frame, columns) -> dict[str, str]:
    """The Spark type of every id column of a CSV file read as text, by the in-memory
    engine's rule (:func:`recpack_ope.io.tables.csv_id_type`): ``bigint`` (int64),
    ``decimal(20,0)`` (uint64 beyond int64) or ``string``. Nulls (empty fields, and pyarrow's
    null texts: :func:`_null`) are not looked at; one Spark job."""
    from pyspark.sql import functions as F

    def every(name: str, condition):
        return F.min(F.when(F.col(f"`{name}`").isNull() | _null(name) | condition, 1).otherwise(0))

    checks = []
    for name in columns:
        wide = F.expr(f"try_cast(`{name}` AS decimal(20,0))")
        checks += [
            every(name, F.col(f"`{name}`").rlike(INTEGER_ID)),
            every(name, F.expr(f"try_cast(`{name}` AS bigint)").isNotNull()),
            every(name, (wide >= 0) & (wide <= F.lit(Decimal(2**64 - 1)))),
        ]
    facts = frame.agg(*checks).first()
    spark = {"int64": "bigint", "uint64": "decimal(20,0)", "string": "string"}
    kinds = {}
    for i, name in enumerate(columns):
        canonical, int64, uint64 = (bool(v) for v in facts[3 * i : 3 * i + 3])
        kinds[name] = spark[csv_id_type(canonical, canonical and int64, canonical and uint64)]
    return kinds


def _numbered(session, path: str | os.PathLike):
    """:func:`read_table` with the index of every row in its file (column
    :data:`~recpack_ope.spark._frames.ROW`), so messages name rows as the in-memory engine
    does: parquet's own row index; for CSV, the row's position in its split plus the rows of
    the splits before it in the file (counted in one Spark job when the file is read in more
    than one split), exact at any size."""
    from pyspark.sql import functions as F

    frame = read_table(session, path)
    if table_format(path) == "parquet":
        return frame.withColumn(ROW, F.col("_metadata.row_index"))
    # Spark's row id counts rows in file order within a partition: the index itself when one
    # partition reads the whole file.
    frame = frame.withColumn(ROW, F.monotonically_increasing_id())
    if frame.rdd.getNumPartitions() == 1:
        return frame
    # A split's rows are consecutive in one partition: shift each split's row ids by its
    # first one and by the rows of the splits before it in the file.
    start = "__recpack_ope_split__"
    frame = frame.withColumn(start, F.input_file_block_start())
    splits = frame.groupBy(start).agg(F.count("*").alias("n"), F.min(ROW).alias("first"))
    shift, before = [], 0
    for split in sorted(splits.collect()):
        shift += [F.lit(split[start]), F.lit(before - split["first"])]
        before += split["n"]
    return frame.withColumn(ROW, F.col(ROW) + F.create_map(*shift)[F.col(start)]).drop(start)


def evaluate_files(
    held_out: str | os.PathLike | None = None,
    recommendations: Mapping[str, str | os.PathLike] | None = None,
    propensity: str | os.PathLike | None = None,
    *,
    feed_log: str | os.PathLike | None = None,
    targets: Mapping[str, str | os.PathLike] | None = None,
    metrics: Sequence[str] | None = None,
    k: int = 10,
    clip: float | str | None = DEFAULT,
    level: float = 0.95,
    compare: Sequence[str] | None = None,
    population: str = default("population"),
    session=None,
    n_partitions: int | None = None,
) -> FileEvaluation:
    """Evaluate models from parquet or CSV files on Spark.

    Parameters
    ----------
    held_out, recommendations, propensity, feed_log, targets, metrics, k, clip, level
        As for :func:`recpack_ope.evaluation.files.evaluate_files` (``clip`` defaults to each
        estimator's own; ``"auto"`` is refused: it needs every weight at once). Spark computes
        every held-out estimator but ``stratified_ndcg`` (:func:`recpack_ope.spark.stratified`).
    compare, population
        As for :func:`recpack_ope.evaluation.files.evaluate_files`; Spark compares targets on
        a feed log only in memory.
    session : pyspark.sql.SparkSession, optional
        Default :func:`recpack_ope.spark.local_session`.
    n_partitions : int, optional
        Partitions users (contexts) are spread over (a positive integer); default
        ``spark.sql.shuffle.partitions``.

    Returns
    -------
    FileEvaluation
        The estimates, as the in-memory engine's (``engine="spark"``).

    Raises
    ------
    ArgumentError
        On a bad argument, before any file is read; also for ``compare`` on a feed log and
        for ``adaptive_ips``, whose choice of behaviour needs every session at once.
    ValueError
        On bad rows, naming the column and an offending row; on a target without rows for
        a context of the feed log, naming the context and one of its sessions, as in memory.
    ImportError
        Without pyspark.
    RuntimeError
        When no Java is found for a local session.

    Examples
    --------
    >>> from recpack_ope.spark.files import evaluate_files
    >>> result = evaluate_files(
    ...     "held_out.parquet", {"EASE": "ease.parquet"}, k=10, n_partitions=4
    ... )  # doctest: +SKIP
    >>> print(result.table())  # doctest: +SKIP
    """
    plan = plan_files(
        held_out,
        recommendations,
        propensity,
        feed_log=feed_log,
        targets=targets,
        metrics=metrics,
        k=k,
        clip=clip,
        level=level,
        compare=compare,
        population=population,
        auto_clip=False,
    )
    if plan.kind == "feed-log" and plan.compare is not None:
        raise ArgumentError(
            "{compare} on a feed log needs the in-memory engine (Spark's feed-log estimators "
            "evaluate one target per pass, so the two cannot be paired)"
        )
    local = [m for m in plan.metrics if plan.kind == "feed-log" and m not in FEED_LOG]
    if local:
        raise ArgumentError(
            "{metrics} {got} needs the in-memory engine: it chooses from every session at "
            "once (Spark computes {spark} on feed logs)",
            got=local[0],
            spark=", ".join(FEED_LOG),
        )
    _partitions.check_partitions(n_partitions)
    import pyspark.sql  # noqa: F401  (missing pyspark: ImportError before looking for Java)

    if session is None:
        session = local_session()
    frames = {name: _numbered(session, path) for name, path in plan.models.items()}
    options = {"discount": plan.discount, "clip": plan.clip, "n_partitions": n_partitions}
    if plan.kind == "feed-log":
        data = _numbered(session, plan.data)
        log_label = table_label(ROLES["feed_log"], plan.data)
        check_log_columns(plan.metrics, data.columns, log_label, list(FEED_LOG))
        estimates = {}
        for name, frame in frames.items():
            labels = {
                "target_name": plan.label(name),
                "log_label": log_label,
                "target_label": table_label(ROLES["targets"].format(name=name), plan.models[name]),
            }
            with naming(name):
                estimates[name] = {
                    m: feed_log_estimate(data, frame, m, **labels, **options) for m in plan.metrics
                }
    else:
        data = _numbered(session, plan.data)
        propensity = None if plan.propensity is None else _numbered(session, plan.propensity)

        def label(role: str, path) -> FileLabel:
            return FileLabel(table_label(role, path), table_format(path))

        labels = {
            "held_out": label(ROLES["held_out"], plan.data),
            "recommendations": {
                name: label(ROLES["recommendations"].format(name=name), path)
                for name, path in plan.models.items()
            },
        }
        if plan.propensity is not None:
            labels["propensity"] = label(ROLES["propensity"], plan.propensity)
        try:
            result = evaluate(
                data,
                frames,
                metrics=plan.metrics,
                k=plan.k,
                propensity=propensity,
                population=plan.population,
                labels=labels,
                **options,
            )
        except NoReward as error:
            # As the in-memory engine names the core's refusal, for its first model.
            raise ValueError(
                f"{labels['held_out']} with {plan.label(next(iter(plan.models)))}: {error.reason}"
            ) from None
        return plan.result(
            result.estimates,
            "spark",
            result.n_users_without_held_out,
            result.n_users_without_recommendations,
        )
    return plan.result(estimates, "spark")
