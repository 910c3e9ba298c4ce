"""The progress bar over a Spark job's tasks: drawn on a terminal, silent elsewhere."""

from __future__ import annotations

import io
import time

from recpack_ope.spark._partitions import progress


def _slow_job(spark, partitions: int) -> int:
    # Each task sleeps, so that the bar's watcher sees the stage while it runs.
    rdd = spark.sparkContext.parallelize(range(partitions), partitions)
    return rdd.map(lambda x: time.sleep(0.4) or x).count()


def test_the_bar_counts_the_job_s_tasks_on_a_terminal(spark, terminal):
    with progress(spark.sparkContext, "Spark: held_out", file=terminal):
        assert _slow_job(spark, 4) == 4
    shown = terminal.getvalue()
    assert "Spark: held_out" in shown and "4/4" in shown


def test_the_bar_is_silent_off_a_terminal(spark):
    stream = io.StringIO()
    with progress(spark.sparkContext, "Spark: held_out", file=stream):
        assert _slow_job(spark, 2) == 2
    assert stream.getvalue() == ""
