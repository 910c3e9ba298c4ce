"""The Spark engine at scale: unbiased DCG on a 100M-impression feed log, and nDCG@100 of 1M
users against Spark's own ``RankingEvaluator``.

    python bench/bench_spark.py --dir DIR [--sessions 20000] [--feed 100] [--contexts 4000]
                                [--users 20000] [--depth 100] [--held 10] [--cores 2]
                                [--fractions 0.1,0.3,1] [--core-fraction 0.1] [--core-hour-usd 0.05]

Quick run (2M impressions, 20k users × 100; about a minute and a half on 2 cores)::

    python bench/bench_spark.py --dir /tmp/bench_spark

Full run (100M impressions, 1M users × 100 = 100M recommendations; 1.4 GiB of parquet and
about 15 minutes on 2 cores)::

    python bench/bench_spark.py --dir /tmp/bench_spark --sessions 1000000 --contexts 200000 \\
        --users 1000000

Needs pyspark and Java 17 (``pip install ".[spark]"``). The data are generated in numpy chunks
and written as parquet under ``--dir`` (20 files per table; reused when ``--dir`` already holds
data made with the same sizes), and read back by Spark on ``local[--cores]``.

1. **Feed log** (:func:`recpack_ope.spark.logged_dcg`): ``--sessions`` × ``--feed``
   impressions of ``--contexts`` users; each session shows ``--feed`` of its user's
   2·``--feed`` candidate items in random order, sparse binary rewards, propensities in (0, 1]
   (synthetic: they are not the generator's exposure, which does not matter for speed). The
   target ranks each user's candidates by a fixed random score, top ``--k`` (a (context,
   item, score) frame). Evaluated on the first 10 %, 30 % and 100 % of the log
   (``--fractions``): wall time, impressions per second, and the peak resident memory of the
   Python driver, of the JVM driver (in local mode also the executor; its heap is capped by
   ``--driver-memory``) and of the Python workers together — the driver's must not grow with
   the log. Then the in-memory core (``FeedLog.from_arrays`` + ``logged_dcg``, one core) on
   the ``--core-fraction`` slice: time ratio and the same value. Last, the cost of a billion
   impressions from the throughput per core at the largest size, at ``--core-hour-usd`` per
   core-hour (default $0.05, about an on-demand cloud vCPU).
2. **Held-out nDCG@``--depth``**: ``--users`` × top-``--depth`` recommendations (scores with
   ties) and ``--held`` ± 5 held-out binary items per user, drawn from the same candidates.
   Ours: :func:`recpack_ope.spark.evaluate` (``metrics=("ndcg",)``, value and 95 % interval);
   Spark's: per-user arrays built from the same long frames (``groupBy`` + ``collect_list``
   sorted by score, ties to the lower item id) and ``RankingEvaluator(metricName="ndcgAtK")``,
   which is what a user must write. Both read the same parquet; the ratio ours / theirs is
   printed (goal ≤ 1). Anchor: the same rows only brought together by user and handed to
   Python, the data movement ``evaluate`` cannot avoid in its design.

Partitions: ``--partitions`` (default: one per ~3M rows, at least 16).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
import warnings
from pathlib import Path

import numpy as np

N_FILES = 20
STRIDE = 97  # candidate pools step through the catalogue by a stride coprime with its size


def pools(ids: np.ndarray, n_items: int, size: int) -> np.ndarray:
    """``size`` distinct candidate items for each id (deterministic)."""
    return (ids[:, None] * 7919 + np.arange(size) * STRIDE) % n_items


def random_order(rng, n: int, size: int, take: int) -> np.ndarray:
    """``take`` positions out of ``size`` in random order, per row."""
    return np.argsort(rng.random((n, size)), axis=1)[:, :take]


def write_tables(root: Path, name: str, n: int, make, seed: int) -> int:
    """``make(start, stop, rng)`` → dict of columns, written as N_FILES parquet files; bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = root / name
    folder.mkdir(parents=True)
    edges = np.linspace(0, n, N_FILES + 1).astype(np.int64)
    for f in range(N_FILES):
        rng = np.random.default_rng([seed, f])
        pq.write_table(
            pa.table(make(edges[f], edges[f + 1], rng)), folder / f"part-{f:03d}.parquet"
        )
    return sum(p.stat().st_size for p in folder.iterdir())


def generate(root: Path, args) -> None:
    """The feed log, the target and the held-out data, unless ``root`` holds them already."""
    sizes = {
        k: getattr(args, k)
        for k in ("sessions", "feed", "contexts", "items", "k", "users", "depth", "held")
    }
    meta = root / "sizes.json"
    if meta.exists() and json.loads(meta.read_text()) == sizes:
        print(f"reusing the data in {root}")
        return
    if args.items % STRIDE == 0 or args.items < 3 * max(args.feed, args.depth):
        raise ValueError(
            f"--items must not be a multiple of {STRIDE} and at least 3 × feed/depth, "
            f"got {args.items}"
        )
    for name in ("feed", "target", "recommendations", "held_out"):
        shutil.rmtree(root / name, ignore_errors=True)
    feed, pool = args.feed, 2 * args.feed

    def feed_rows(start, stop, rng):
        n = stop - start
        context = rng.integers(0, args.contexts, n)
        items = np.take_along_axis(
            pools(context, args.items, pool), random_order(rng, n, pool, feed), axis=1
        )
        rank = np.tile(np.arange(1, feed + 1, dtype=np.int32), n)
        examined = 1 / np.log2(rank + 1.0)
        return {
            "session": np.repeat(np.arange(start, stop), feed),
            "context": np.repeat(context, feed),
            "item": items.ravel(),
            "rank": rank,
            "reward": (rng.random(rank.size) < 0.1 * examined).astype(np.float32),
            "propensity": examined * rng.uniform(0.2, 1.0, rank.size),
        }

    def target_rows(start, stop, rng):
        contexts = np.arange(start, stop)
        top = random_order(rng, contexts.size, pool, args.k)
        return {
            "context": np.repeat(contexts, args.k),
            "item": np.take_along_axis(pools(contexts, args.items, pool), top, axis=1).ravel(),
            "score": 1 + rng.random(top.size),
        }

    def recommendation_rows(start, stop, rng):
        users = np.arange(start, stop)
        items = np.take_along_axis(
            pools(users, args.items, 3 * args.depth),
            random_order(rng, users.size, 3 * args.depth, args.depth),
            axis=1,
        )
        # Scores on a grid of 1000 values: a top-100 list has ties.
        return {
            "user": np.repeat(users, args.depth),
            "item": items.ravel(),
            "score": np.round(rng.random(items.size), 3),
        }

    def held_out_rows(start, stop, rng):
        users = np.arange(start, stop)
        most = args.held + 5
        count = rng.integers(max(1, args.held - 5), most + 1, users.size)
        items = np.take_along_axis(
            pools(users, args.items, 3 * args.depth),
            random_order(rng, users.size, 3 * args.depth, most),
            axis=1,
        )
        keep = np.arange(most) < count[:, None]
        return {
            "user": np.repeat(users, count),
            "item": items[keep],
            "reward": np.ones(int(count.sum())),
        }

    start = time.perf_counter()
    size = write_tables(root, "feed", args.sessions, feed_rows, 0)
    size += write_tables(root, "target", args.contexts, target_rows, 1)
    size += write_tables(root, "recommendations", args.users, recommendation_rows, 2)
    size += write_tables(root, "held_out", args.users, held_out_rows, 3)
    meta.write_text(json.dumps(sizes))
    seconds = time.perf_counter() - start
    print(f"generated {size / 2**30:.2f} GiB of parquet in {root} in {seconds:.0f} s")


def files(root: Path, name: str, fraction: float = 1.0) -> list[str]:
    """The first ``fraction`` of a table's files."""
    return [str(p) for p in sorted((root / name).iterdir())[: max(1, round(fraction * N_FILES))]]


def _processes() -> dict:
    """pid → (parent pid, command name) of every process."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                text = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            close = text.rindex(")")
            out[int(entry.name)] = (
                int(text[close + 2 :].split()[1]),
                text[text.index("(") + 1 : close],
            )
    return out


def _descendants(root: int, procs: dict) -> list[int]:
    found, frontier = [], [root]
    while frontier:
        frontier = [p for p, (parent, _) in procs.items() if parent in frontier]
        found += frontier
    return found


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Peaks:
    """Peak resident memory (MiB) while a block runs: the Python driver and the JVM (their
    kernel high-water marks, reset on entry; sampled every 0.2 s where they cannot be reset)
    and the Python workers, whose RSS is summed and sampled."""

    def __init__(self):
        procs = _processes()
        java = [p for p in _descendants(os.getpid(), procs) if procs[p][1] == "java"]
        self.jvm_pid = max(java, key=lambda p: _status_kib(p, "VmRSS")) if java else None

    def __enter__(self) -> Peaks:
        pids = [os.getpid()] + ([self.jvm_pid] if self.jvm_pid else [])
        self.reset = {}
        for pid in pids:
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")
                self.reset[pid] = True
            except OSError:
                self.reset[pid] = False
        self.sampled = dict.fromkeys(pids, 0)
        self.driver_start = _status_kib(os.getpid(), "VmRSS") / 1024
        self.workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while True:
            for pid in self.sampled:
                self.sampled[pid] = max(self.sampled[pid], _status_kib(pid, "VmRSS"))
            if self.jvm_pid:
                procs = _processes()
                workers = [
                    p for p in _descendants(self.jvm_pid, procs) if procs[p][1].startswith("python")
                ]
                self.workers = max(self.workers, sum(_status_kib(p, "VmRSS") for p in workers))
            if self._stop.wait(0.2):
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        peak = {
            pid: max(self.sampled[pid], _status_kib(pid, "VmHWM") if self.reset[pid] else 0) / 1024
            for pid in self.sampled
        }
        self.driver = peak[os.getpid()]
        self.jvm = peak.get(self.jvm_pid, float("nan"))
        self.workers /= 1024

    def __str__(self) -> str:
        return (
            f"driver py {self.driver:5.0f} MiB (at start {self.driver_start:5.0f}), "
            f"JVM {self.jvm:5.0f} MiB, "
            f"py workers {self.workers:4.0f} MiB"
        )


def timed(fn):
    """(result, seconds, Peaks) of ``fn()``."""
    with Peaks() as peaks:
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
    return result, seconds, peaks


def partitions(args, rows: int) -> int:
    return args.partitions or max(16, round(rows / 3e6))


def in_memory(root: Path, args, discount):
    """The core on the ``--core-fraction`` slice read into numpy: (timed(...), read seconds)."""
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    from recpack_ope.logged.feed_log import FeedLog
    from recpack_ope.logged.logged_dcg import logged_dcg
    from recpack_ope.logged.policies import DeterministicRanker

    start = time.perf_counter()
    table = pq.ParquetDataset(files(root, "feed", args.core_fraction)).read()
    columns = {name: table.column(name).to_numpy() for name in table.column_names}
    target = pq.ParquetDataset(files(root, "target")).read()
    scores = sp.csr_matrix(
        (
            target.column("score").to_numpy(),
            (target.column("context").to_numpy(), target.column("item").to_numpy()),
        ),
        shape=(args.contexts, args.items),
    )
    del table, target
    read = time.perf_counter() - start

    def core():
        log = FeedLog.from_arrays(
            columns["session"],
            columns["item"],
            columns["rank"],
            columns["reward"],
            context=columns["context"],
            propensity=columns["propensity"],
            n_items=args.items,
            n_contexts=args.contexts,
        )
        return logged_dcg(log, DeterministicRanker(scores), discount=discount)

    return timed(core), read


def bench_feed_log(spark, root: Path, args) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from recpack_ope import LogDiscount
    from recpack_ope.spark import logged_dcg

    discount = LogDiscount(cutoff=args.k)
    target = spark.read.parquet(*files(root, "target"))
    fractions = sorted({*args.fractions, args.core_fraction})
    print(
        f"\n1. unbiased DCG@{args.k} on a feed log: {args.sessions:,} sessions × {args.feed} "
        f"= {args.sessions * args.feed:,} impressions, {args.contexts:,} contexts, "
        f"{args.items:,} items, "
        f"local[{args.cores}]"
    )
    # Untimed first pass on one file: JVM compilation and Python worker start-up.
    logged_dcg(
        spark.read.parquet(files(root, "feed")[0]),
        target,
        discount=discount,
        n_partitions=args.cores,
    )
    runs = {}
    for fraction in fractions:
        log = spark.read.parquet(*files(root, "feed", fraction))
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files(root, "feed", fraction))
        n_partitions = partitions(args, rows)
        estimate, seconds, peaks = timed(
            lambda log=log, n=n_partitions: logged_dcg(
                log, target, discount=discount, n_partitions=n
            )
        )
        runs[fraction] = (rows, seconds, estimate.value)
        lo, hi = estimate.confidence_interval(0.95)
        print(
            f"   {rows / 1e6:7.1f}M rows: {seconds:7.1f} s  {rows / seconds / 1e6:5.2f} M rows/s  "
            f"value {estimate.value:.5f} [{lo:.5f}, {hi:.5f}]  peaks: {peaks}"
        )

    rows, spark_seconds, spark_value = runs[args.core_fraction]
    (estimate, seconds, peaks), read = in_memory(root, args, discount)
    # Arrow keeps the freed columns in its pool: hand them back, so that the driver's memory
    # in part 2 is not this slice's.
    pa.default_memory_pool().release_unused()
    same = abs(estimate.value - spark_value) <= 1e-12 * max(1.0, abs(spark_value))
    print(
        f"   in-memory core, {rows / 1e6:.1f}M rows "
        f"(reading parquet into numpy {read:.1f} s, not counted): "
        f"{seconds:.2f} s  {rows / seconds / 1e6:.2f} M rows/s on one core; peaks: {peaks}"
    )
    print(
        f"   Spark / core time {spark_seconds / seconds:.2f}×; values {spark_value:.12f} vs "
        f"{estimate.value:.12f} ({'equal' if same else 'DIFFERENT'}, "
        f"|Δ| {abs(estimate.value - spark_value):.1e})"
    )

    print("   scaling with rows (Spark):")
    small_rows, small_seconds, _ = runs[fractions[0]]
    for fraction in fractions:
        n, s, _ = runs[fraction]
        print(
            f"     {n / 1e6:7.1f}M rows  {s:7.1f} s  {s / (n / 1e7):6.2f} s per 10M rows  "
            f"time ×{s / small_seconds:5.2f} for rows ×{n / small_rows:5.2f}"
        )
    big_rows, big_seconds, _ = runs[fractions[-1]]
    per_core = {"Spark": big_rows / big_seconds / args.cores, "in-memory core": rows / seconds}
    for name, throughput in per_core.items():
        core_hours = 1e9 / throughput / 3600
        print(
            f"   cost per billion impressions, {name}: {throughput / 1e6:.2f} M rows/s per core → "
            f"{core_hours:.2f} core-hours → ${core_hours * args.core_hour_usd:.3f} at "
            f"${args.core_hour_usd}/core-hour"
        )


def ranking_evaluator_ndcg(held_out, recommendations, k: int) -> float:
    """Spark's nDCG@k from long frames: per-user arrays, items by score descending, ties to the
    lower item id (ours), users without a relevant item left out (as ours does)."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import functions as F

    ranked = recommendations.groupBy("user").agg(
        F.sort_array(
            F.collect_list(F.struct((-F.col("score")).alias("negative_score"), "item"))
        ).alias("ranked")
    )
    prediction = ranked.select(
        "user", F.col("ranked.item").cast("array<double>").alias("prediction")
    )
    labels = (
        held_out.filter(F.col("reward") > 0)
        .groupBy("user")
        .agg(F.collect_list(F.col("item").cast("double")).alias("label"))
    )
    frame = labels.join(prediction, "user", "left").select(
        F.coalesce("prediction", F.array().cast("array<double>")).alias("prediction"), "label"
    )
    return RankingEvaluator(metricName="ndcgAtK", k=k).evaluate(frame)


def _count_rows(batches):
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})


def movement_floor(held_out, recommendations, n_partitions: int) -> int:
    """The data movement of ``evaluate`` without its computation: held-out and recommended rows
    brought together by user (repartition + sort) and passed to Python as Arrow batches."""
    from pyspark.sql import functions as F

    rows = held_out.select(
        "user", "item", F.col("reward").cast("double").alias("value"), F.lit(-1).alias("source")
    )
    rows = rows.unionByName(
        recommendations.select("user", "item", "score", F.lit(0)).toDF(*rows.columns)
    )
    grouped = rows.repartition(n_partitions, "user").sortWithinPartitions("user")
    return sum(r.rows for r in grouped.mapInArrow(_count_rows, "rows long").collect())


def bench_held_out(spark, root: Path, args) -> None:
    from recpack_ope import LogDiscount
    from recpack_ope.spark import evaluate

    held = spark.read.parquet(*files(root, "held_out"))
    recs = spark.read.parquet(*files(root, "recommendations"))
    rows = args.users * args.depth
    print(
        f"\n2. nDCG@{args.depth}: {args.users:,} users × top-{args.depth} = "
        f"{rows:,} recommendations, "
        f"{args.held} ± 5 held-out items per user, local[{args.cores}]"
    )
    # Untimed first pass of both on the users of one file: neither pays for starting up.
    first = (
        spark.read.parquet(files(root, "held_out")[0]),
        spark.read.parquet(files(root, "recommendations")[0]),
    )
    ranking_evaluator_ndcg(*first, args.depth)
    evaluate(
        *first, metrics=("ndcg",), discount=LogDiscount(cutoff=args.depth), n_partitions=args.cores
    )
    theirs, their_seconds, their_peaks = timed(
        lambda: ranking_evaluator_ndcg(held, recs, args.depth)
    )
    print(
        f"   Spark RankingEvaluator (arrays built from the long frames): {their_seconds:7.1f} s  "
        f"value {theirs:.12f}  peaks: {their_peaks}"
    )
    result, our_seconds, our_peaks = timed(
        lambda: evaluate(
            held,
            recs,
            metrics=("ndcg",),
            discount=LogDiscount(cutoff=args.depth),
            n_partitions=partitions(args, rows),
        )["model"]["ndcg"]
    )
    lo, hi = result.confidence_interval(0.95)
    print(
        f"   recpack_ope.spark.evaluate:                               {our_seconds:7.1f} s  "
        f"value {result.value:.12f} [{lo:.5f}, {hi:.5f}]  peaks: {our_peaks}"
    )
    _, floor_seconds, floor_peaks = timed(
        lambda: movement_floor(held, recs, partitions(args, rows))
    )
    print(
        "   anchor: the same rows only grouped by user and handed to Python: "
        f"{floor_seconds:7.1f} s  "
        f"peaks: {floor_peaks}"
    )
    print(
        f"   ours / theirs time {our_seconds / their_seconds:.2f}×; "
        f"ours / anchor {our_seconds / floor_seconds:.2f}×; "
        f"|Δ value| {abs(result.value - theirs):.1e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", type=Path, required=True, help="where the parquet data are written"
    )
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--feed", type=int, default=100)
    parser.add_argument("--contexts", type=int, default=4_000)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--k", type=int, default=20, help="cutoff of the target's feed")
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--held", type=int, default=10)
    parser.add_argument(
        "--fractions", type=lambda s: [float(x) for x in s.split(",")], default=[0.1, 0.3, 1.0]
    )
    parser.add_argument("--core-fraction", type=float, default=0.1)
    parser.add_argument("--core-hour-usd", type=float, default=0.05)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--partitions", type=int, default=0, help="0: one per ~3M rows, at least 16"
    )
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--only", choices=("feed", "held_out"), help="run one part")
    args = parser.parse_args()
    for name in ("sessions", "feed", "contexts", "items", "k", "users", "depth", "held", "cores"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.held + 5 > 3 * args.depth:
        raise ValueError(
            f"--held + 5 must be at most 3 × --depth (the candidates), got {args.held}"
        )
    bad = [f for f in [*args.fractions, args.core_fraction] if not 0 < f <= 1]
    if bad:
        raise ValueError(f"--fractions and --core-fraction must lie in (0, 1], got {bad[0]}")

    from recpack_ope.inference.diagnostics import ReliabilityWarning
    from recpack_ope.spark import local_session

    # The synthetic propensities make IPS weights spread; the warning says nothing about speed.
    warnings.simplefilter("ignore", ReliabilityWarning)
    args.dir.mkdir(parents=True, exist_ok=True)
    generate(args.dir, args)
    spark = local_session(args.cores, shuffle_partitions=16, driver_memory=args.driver_memory)
    if args.only != "held_out":
        bench_feed_log(spark, args.dir, args)
    if args.only != "feed":
        bench_held_out(spark, args.dir, args)
    spark.stop()


if __name__ == "__main__":
    main()
