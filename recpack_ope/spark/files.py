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

from ..evaluation.files import ArgumentError, FileEvaluation, check_log_columns, plan_files
from ..inference.diagnostics import naming
from ..io.tables import table_format
from ..registry import DEFAULT, default
from .held_out import evaluate
from .logged import FEED_LOG, feed_log_estimate
from .session import local_session

__all__ = ["evaluate_files", "read_table"]


def read_table(session, path: str | os.PathLike):
    """A parquet (``.parquet``, ``.pq``) or CSV (``.csv``, header line, types inferred) file
    as a Spark DataFrame.

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
    return session.read.csv(str(path), header=True, inferSchema=True)


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
        Partitions users (contexts) are spread over; default ``spark.sql.shuffle.partitions``.

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
    )
    if plan.kind == "feed-log" and plan.compare is not None:
        raise ArgumentError(
            "{compare} on a feed log needs the in-memory engine (Spark's feed-log estimators "
            "evaluate one target per pass, so the two cannot be paired)"
        )
    if plan.clip == "auto":
        raise ArgumentError(
            '{clip} "auto" selects the clipping from every weight at once: on Spark give a '
            "number, or none for the unclipped estimators"
        )
    local = [m for m in plan.metrics if plan.kind == "feed-log" and m not in FEED_LOG]
    if local:
        raise ArgumentError(
            "{metrics} {got} needs the in-memory engine: it chooses from every session at "
            "once (Spark computes {spark} on feed logs)",
            got=local[0],
            spark=", ".join(FEED_LOG),
        )
    import pyspark.sql  # noqa: F401  (missing pyspark: ImportError before looking for Java)

    if session is None:
        session = local_session()
    frames = {name: read_table(session, path) for name, path in plan.models.items()}
    options = {"discount": plan.discount, "clip": plan.clip, "n_partitions": n_partitions}
    data = read_table(session, plan.data)
    if plan.kind == "feed-log":
        check_log_columns(
            plan.metrics, data.columns, f"feed_log file {str(plan.data)!r}", list(FEED_LOG)
        )
        estimates = {}
        for name, frame in frames.items():
            with naming(name):
                estimates[name] = {
                    m: feed_log_estimate(data, frame, m, target_name=plan.label(name), **options)
                    for m in plan.metrics
                }
    else:
        propensity = None if plan.propensity is None else read_table(session, plan.propensity)
        estimates = evaluate(
            data,
            frames,
            metrics=plan.metrics,
            k=plan.k,
            propensity=propensity,
            population=plan.population,
            **options,
        ).estimates
    return plan.result(estimates, "spark")
