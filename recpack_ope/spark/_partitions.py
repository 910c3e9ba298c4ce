"""Run the core on Spark partitions: rows grouped by a key, statistics merged on the driver.

The rows of one key (a user, a context) are sent to one partition and sorted there, so a
partition sees every key's rows together. Inside, the rows are cut into chunks of whole keys
(about ``CHUNK_ROWS`` rows each) that the plan turns into core calls; each partition returns
one pickled partial result (sufficient statistics), or per-key rows when asked. The driver
merges the partials: it never holds more than one partial per partition.

Bad input found inside a partition raises :class:`InputError`. The partition catches it and
returns its message instead of a partial, so the task does not fail (Spark would print the
worker's traceback to the terminal); the driver raises it as a plain ``ValueError``. Rows
that reach the driver as per-key rows have no such route: there the message crosses the JVM
inside Spark's exception.
"""

from __future__ import annotations

import contextlib
import pickle
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from .._progress import progress_bar
from ..evaluation.chunks import ChunkError
from ..io.tables import null_message

CHUNK_ROWS = 200_000
_MARK = "recpack-ope input error: "


class InputError(ChunkError):
    """Bad input found in a partition; its text is carried to the driver."""

    def __init__(self, message: str):
        super().__init__(_MARK + message + " :end")


def first_repeat(*codes: np.ndarray) -> int | None:
    """Row of the first repeated combination of non-negative integer codes, or None."""
    keys = np.zeros(codes[0].size, dtype=np.int64)
    for c in codes:
        keys = keys * (np.int64(c.max(initial=0)) + 1) + c.astype(np.int64)
    order = np.argsort(keys, kind="stable")
    twice = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    return int(order[twice[0] + 1]) if twice.size else None


def _columns(batch, names, nullable) -> dict:
    """numpy columns of an Arrow batch. A nullable column comes with a mask ``name + ":null"``;
    an integer one keeps its integers (nulls read as 0, never through float64, which would
    merge ids beyond 2**53). Nulls elsewhere are refused by the caller beforehand."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    for name in names:
        column = batch.column(name)
        if name in nullable:
            out[name + ":null"] = column.is_null().to_numpy(zero_copy_only=False)
            if pa.types.is_integer(column.type):
                column = pc.fill_null(column, 0)
        if pa.types.is_decimal(column.type):
            # Integer ids beyond int64 (uint64 read from parquet): exact Python integers.
            out[name] = np.array([int(v) for v in column.to_pylist()], dtype=object)
            continue
        out[name] = column.to_numpy(zero_copy_only=False)
    return out


def _first_null(batch, names, what: str, shown) -> None:
    import pyarrow.compute as pc

    for name in names:
        column = batch.column(name)
        if column.null_count:
            row = pc.index(pc.is_null(column), True).as_py()
            values = {n: batch.column(n)[row].as_py() for n in shown}
            shown_row = "row (" + ", ".join(f"{n}={v!r}" for n, v in values.items()) + ")"
            raise InputError(null_message(what, name, shown_row))


def _chunks(batches, key: str, names, nullable, what, shown):
    """Column dicts holding whole keys, about CHUNK_ROWS rows each, from sorted batches."""
    pending: list[dict] = []
    size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        _first_null(batch, [n for n in names if n not in nullable], what, shown)
        pending.append(_columns(batch, names, nullable))
        size += batch.num_rows
        if size < CHUNK_ROWS:
            continue
        cols = {n: np.concatenate([p[n] for p in pending]) for n in pending[0]}
        keys = cols[key]
        cut = int(np.flatnonzero(keys != keys[-1])[-1]) + 1 if (keys != keys[-1]).any() else 0
        if cut == 0:
            pending, size = [cols], keys.size
            continue
        yield {n: v[:cut] for n, v in cols.items()}
        pending = [{n: v[cut:] for n, v in cols.items()}]
        size = keys.size - cut
    if size:
        yield {n: np.concatenate([p[n] for p in pending]) for n in pending[0]}


def check_partitions(n_partitions) -> None:
    """Refuse an ``n_partitions`` that is neither None (Spark's default) nor a positive
    integer.

    Examples
    --------
    >>> from recpack_ope.spark._partitions import check_partitions
    >>> check_partitions(0)
    Traceback (most recent call last):
    ...
    ValueError: n_partitions must be a positive integer or None (the default), got 0
    """
    if n_partitions is None:
        return
    if isinstance(n_partitions, bool) or not isinstance(n_partitions, (int, np.integer)):
        raise TypeError(
            f"n_partitions must be a positive integer or None (the default), got {n_partitions!r}"
        )
    if n_partitions < 1:
        raise ValueError(
            f"n_partitions must be a positive integer or None (the default), got {n_partitions!r}"
        )


def run(frame, plan, n_partitions: int | None, *, per_key_schema: str | None = None):
    """Evaluate ``plan`` on ``frame`` grouped by ``plan.key``.

    Returns the merged partial (``per_key_schema`` None) or a lazy DataFrame of the plan's
    per-key rows.
    """
    check_partitions(n_partitions)
    n = (
        int(n_partitions)
        if n_partitions is not None
        else int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    )
    grouped = frame.repartition(n, plan.key).sortWithinPartitions(plan.key)
    names = list(frame.columns)

    def partition(batches):
        import pyarrow as pa

        if per_key_schema is not None:
            for chunk in _chunks(batches, plan.key, names, plan.nullable, plan.what, plan.shown):
                yield plan.per_key(chunk)
            return
        partial = None
        try:
            for chunk in _chunks(batches, plan.key, names, plan.nullable, plan.what, plan.shown):
                part = plan.chunk(chunk)
                partial = part if partial is None else partial.merge(part)
        except InputError as error:
            partial = _Refusal(str(error))
        except ChunkError as error:
            partial = _Refusal(_MARK + str(error) + " :end")
        except ValueError as error:
            # The core refused the chunk: its message names the problem.
            partial = _Refusal(_MARK + f"{plan.what}: {error} :end")
        if partial is not None:
            yield pa.RecordBatch.from_pydict({"payload": [pickle.dumps(partial)]})

    if per_key_schema is not None:
        return grouped.mapInArrow(partition, per_key_schema)
    with progress(frame.sparkSession.sparkContext, f"Spark: {plan.what}"):
        rows = collect(grouped.mapInArrow(partition, "payload binary"))
    partials = [pickle.loads(r.payload) for r in rows]
    refused = [p for p in partials if isinstance(p, _Refusal)]
    if refused:
        raise ValueError(_text(refused[0].message))
    if not partials:
        return None
    merged = partials[0]
    for part in partials[1:]:
        merged = merged.merge(part)
    return merged


@contextlib.contextmanager
def progress(context, desc: str, file: TextIO | None = None) -> Iterator[None]:
    """A tqdm bar over the tasks of the Spark jobs run inside, read from the context's status
    tracker; silent when ``file`` (standard error by default) is not a terminal."""
    bar = progress_bar(desc=desc, total=0, unit="task", file=file)
    if bar.disable:
        yield
        return
    tracker, stages, stop = context.statusTracker(), {}, threading.Event()

    def poll() -> None:
        while not stop.wait(0.1):
            for stage in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage)
                if info is not None:
                    stages[stage] = (info.numCompletedTasks, info.numTasks)
            bar.total = sum(total for _, total in stages.values())
            bar.n = sum(done for done, _ in stages.values())
            bar.refresh()

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        yield
        stop.set()
        watcher.join()
        bar.n = bar.total  # stages that ended between two polls
    finally:
        stop.set()
        bar.close()


@dataclass(frozen=True)
class _Refusal:
    """What a partition returns instead of its partial when it found bad input."""

    message: str


def _text(marked: str) -> str:
    """The message of an :class:`InputError` inside ``marked``, or ``marked`` itself."""
    found = re.search(re.escape(_MARK) + r"(.*?) :end", marked, re.S)
    return found.group(1) if found else marked


def collect(frame):
    """``frame.collect()``, with input errors found in partitions raised as ``ValueError``."""
    try:
        return frame.collect()
    except Exception as error:  # Spark wraps worker errors in its own exception types
        if _MARK in str(error):
            raise ValueError(_text(str(error))) from None
        raise
