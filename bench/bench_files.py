"""The local file engine on big parquet files, against DuckDB, polars and a plain pyarrow read.

    python bench/bench_files.py [--rows 10000000[,100000000,...]] [--dir DIR] [--repeat 3]
                                [--cases ours,duckdb,polars,pyarrow] [--before SRC]
                                [--generate-only]

Measured: nDCG@100 of one model from two parquet files, ``recommendations.parquet`` (user,
item, score; 100 items per user) and ``held_out.parquet`` (user, item, reward = 1; 5–15
items per user, each drawn from the user's recommendations with probability 0.3 and from the
popularity otherwise), both sorted by user, then item. ``--rows`` is the number of
recommendation rows (10M: 100k users; 100M: 1M users; 300M: 3M users). The cases, each run
in its own fresh interpreter so that its peak resident memory (the child's own
``ru_maxrss``) is its alone:

1. **ours**: :func:`recpack_ope.evaluation.evaluate_files` with ``metrics=["ndcg"]``,
   ``k=100``, the engine of ``recpack-ope evaluate``;
2. **DuckDB**: one SQL query straight from the parquet files: ranks by ``row_number() over
   (partition by user order by score desc, item asc)``, DCG@100 of the held-out rewards with
   the discount ``1/log2(rank + 1)``, the ideal DCG over a user's ``min(#held-out, 100)``
   largest rewards, and the mean of DCG / ideal DCG over the users with a positive reward;
3. **polars**: the same computation as a lazy query (``scan_parquet`` … ``collect`` on the
   streaming engine);
4. **pyarrow read**: ``pyarrow.parquet.read_table`` of both files, the floor of reading them,
   and the memory anchor (every column in memory once);
5. with ``--before SRC``, **before**: case 1 run from the package source in the folder
   ``SRC`` instead of the installed package, e.g. an earlier commit unpacked by
   ``mkdir SRC && git archive COMMIT recpack_ope | tar -x -C SRC``.

The cases run in turns (``--repeat`` rounds after one round that checks the values and warms
the page cache); each time is the wall time of the computation inside the child, imports
excluded, and the best of the rounds; memory is the largest peak of the rounds. The
nDCG values must agree to 1e-9, else the script exits with status 1 before timing. Every
case runs with its library's defaults: DuckDB, polars and pyarrow use every core. Below the
table, the CPU time (user + system, every thread) of each case, the best of the rounds, is
less sensitive to other jobs on the machine than the wall time. A warning is printed when
the package's source changed between the rounds of a case.

The files are generated in bounded memory (blocks of 10,000 users, row groups of about 1M
rows) under ``--dir`` (default ``/tmp/recpack-ope-bench-files``), one folder per size, and
reused when their row counts and generation parameters match: 10M rows take about 0.11 GB of
disk, 100M 1.1 GB, 300M 3.2 GB, and about 6 s per 10M rows to write on one idle core. Items
are drawn from 20,000 with a Zipf popularity (exponent 0.8), distinct within a user; scores
are distinct within a user.

Install the anchors into the benchmark's environment only::

    pip install duckdb polars
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_DIR = Path("/tmp/recpack-ope-bench-files")
N_ITEMS = 20_000
DEPTH = 100  # recommendations per user, also the cutoff k
HELD = (5, 15)  # held-out items per user, inclusive range
HIT = 0.3  # chance that a held-out draw is one of the user's recommendations
ZIPF = 0.8
BLOCK_USERS = 10_000  # users per generated block: one row group of DEPTH × 10,000 rows
HELD_GROUP_ROWS = 1_000_000
SEED = 0
CASES = ("ours", "duckdb", "polars", "pyarrow")
TOLERANCE = 1e-9


def parameters(rows: int) -> dict:
    """Everything the generated files depend on; stored in their metadata and compared when
    they are reused."""
    return {
        "rows": rows,
        "items": N_ITEMS,
        "depth": DEPTH,
        "held": list(HELD),
        "hit": HIT,
        "zipf": ZIPF,
        "block_users": BLOCK_USERS,
        "seed": SEED,
    }


def first_distinct(draws: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first ``keep[u]`` distinct items of each row of ``draws``, as ``(row, item)``
    sorted by row, then item; raises ``RuntimeError`` when a row has fewer.

    Examples
    --------
    >>> rows, items = first_distinct(np.array([[3, 3, 1, 2], [5, 4, 5, 6]]), np.array([2, 3]))
    >>> rows.tolist(), items.tolist()
    ([0, 0, 1, 1, 1], [1, 3, 4, 5, 6])
    """
    n, width = draws.shape
    keys = np.arange(n, dtype=np.int64)[:, None] * N_ITEMS + draws
    _, first = np.unique(keys.ravel(), return_index=True)
    first.sort()  # back to draw order, rows in turn
    row = first // width
    starts = np.searchsorted(row, np.arange(n))
    counts = np.diff(np.append(starts, row.size))
    if (counts < keep).any():
        raise RuntimeError("too few distinct draws for a user; raise the number of draws")
    chosen = first[np.arange(row.size) - starts[row] < keep[row]]
    keys = np.sort(keys.ravel()[chosen])
    return keys // N_ITEMS, keys % N_ITEMS


def generate_block(rng: np.random.Generator, users: np.ndarray, cdf, ids) -> tuple[dict, dict]:
    """The recommendation and held-out columns of ``users``."""
    n = users.size

    def popular(shape) -> np.ndarray:
        return ids[np.searchsorted(cdf, rng.random(shape), side="right")]

    rows, items = first_distinct(popular((n, 2 * DEPTH)), np.full(n, DEPTH))
    # a random permutation of 0..DEPTH-1 per user plus a fraction: distinct within a user
    order = np.argsort(rng.random((n, DEPTH)), axis=1).ravel()
    recommendations = {
        "user": users[rows],
        "item": items,
        "score": (order + rng.random(order.size)) / DEPTH,
    }
    pick = rng.integers(0, DEPTH, (n, 3 * HELD[1]))
    recommended = items.reshape(n, DEPTH)[np.arange(n)[:, None], pick]
    draws = np.where(rng.random(pick.shape) < HIT, recommended, popular(pick.shape))
    rows, items = first_distinct(draws, rng.integers(HELD[0], HELD[1] + 1, n))
    held_out = {"user": users[rows], "item": items, "reward": np.ones(rows.size)}
    return recommendations, held_out


def paths(root: Path, rows: int) -> tuple[Path, Path]:
    """``(held_out, recommendations)`` of the files of ``rows`` recommendation rows."""
    folder = root / f"rows-{rows}"
    return folder / "held_out.parquet", folder / "recommendations.parquet"


def cached(rows: int, files: tuple[Path, Path]) -> bool:
    """Whether ``files`` exist and were generated with :func:`parameters` ``(rows)``."""
    import pyarrow.parquet as pq

    if not all(p.exists() for p in files):
        return False
    held_out, recommendations = (pq.ParquetFile(p).metadata for p in files)
    stored = (recommendations.metadata or {}).get(b"recpack_ope_bench")
    return (
        stored is not None
        and json.loads(stored) == parameters(rows)
        and recommendations.num_rows == rows
        and held_out.num_rows > 0
    )


def generate(rows: int, files: tuple[Path, Path]) -> None:
    """Write the two files block by block (written under temporary names, renamed last, so
    an interrupted run leaves nothing that looks complete)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows % DEPTH:
        raise SystemExit(f"--rows must be a multiple of {DEPTH}, got {rows}")
    n_users = rows // DEPTH
    files[0].parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    weights = np.arange(1, N_ITEMS + 1, dtype=np.float64) ** -ZIPF
    cdf = np.cumsum(weights) / weights.sum()
    cdf[-1] = 1.0
    ids = rng.permutation(N_ITEMS)  # popularity unrelated to item id
    meta = {"recpack_ope_bench": json.dumps(parameters(rows))}
    schemas = (
        pa.schema([("user", pa.int64()), ("item", pa.int64()), ("reward", pa.float64())]),
        pa.schema([("user", pa.int64()), ("item", pa.int64()), ("score", pa.float64())]),
    )
    temporary = [p.with_suffix(".partial") for p in files]
    writers = [
        pq.ParquetWriter(t, s.with_metadata(meta)) for t, s in zip(temporary, schemas, strict=True)
    ]
    pending, pending_rows = [], 0
    start = time.perf_counter()
    for first in range(0, n_users, BLOCK_USERS):
        users = np.arange(first, min(first + BLOCK_USERS, n_users), dtype=np.int64)
        recommendations, held_out = generate_block(rng, users, cdf, ids)
        writers[1].write_table(pa.table(recommendations, schema=schemas[1]))
        pending.append(pa.table(held_out, schema=schemas[0]))
        pending_rows += pending[-1].num_rows
        if pending_rows >= HELD_GROUP_ROWS or first + BLOCK_USERS >= n_users:
            writers[0].write_table(pa.concat_tables(pending), row_group_size=pending_rows)
            pending, pending_rows = [], 0
        if first and first % (10 * BLOCK_USERS) == 0 and n_users >= 100 * BLOCK_USERS:
            done = first * DEPTH
            print(f"  generated {done:,} of {rows:,} rows, {time.perf_counter() - start:.0f} s")
    for writer in writers:
        writer.close()
    for t, p in zip(temporary, files, strict=True):
        t.replace(p)
    print(f"  generated {rows:,} rows in {time.perf_counter() - start:.0f} s")


DUCKDB_QUERY = """
with ranked as (
    select "user", item,
           row_number() over (partition by "user" order by score desc, item asc) as rank
    from read_parquet('{recommendations}')
), held as (
    select "user", item, reward,
           row_number() over (partition by "user" order by reward desc) as rank
    from read_parquet('{held_out}')
), ideal as (
    select "user", sum(reward / log2(rank + 1)) as idcg
    from held where rank <= {k} group by "user" having sum(reward) > 0
), dcg as (
    select r."user", sum(h.reward / log2(r.rank + 1)) as dcg
    from ranked r join held h on r."user" = h."user" and r.item = h.item
    where r.rank <= {k} group by r."user"
)
select avg(coalesce(d.dcg, 0) / i.idcg) from ideal i left join dcg d on i."user" = d."user"
"""


def run_ours(held_out: Path, recommendations: Path) -> float:
    from recpack_ope.evaluation import evaluate_files

    result = evaluate_files(held_out, {"model": recommendations}, metrics=["ndcg"], k=DEPTH)
    return float(result.estimates["model"]["ndcg"].value)


def run_duckdb(held_out: Path, recommendations: Path) -> float:
    import duckdb

    query = DUCKDB_QUERY.format(held_out=held_out, recommendations=recommendations, k=DEPTH)
    return float(duckdb.connect().execute(query).fetchone()[0])


def run_polars(held_out: Path, recommendations: Path) -> float:
    import polars as pl

    # the files list a user's items in ascending order, so an ordinal rank (ties in order of
    # occurrence) breaks tied scores to the lower item id, as the other cases do
    ranked = (
        pl.scan_parquet(recommendations)
        .with_columns(rank=pl.col("score").rank("ordinal", descending=True).over("user"))
        .filter(pl.col("rank") <= DEPTH)
    )
    held = pl.scan_parquet(held_out).with_columns(
        rank=pl.col("reward").rank("ordinal", descending=True).over("user")
    )
    ideal = (
        held.filter(pl.col("rank") <= DEPTH)
        .group_by("user")
        .agg(
            idcg=(pl.col("reward") / (pl.col("rank") + 1).log(2)).sum(),
            total=pl.col("reward").sum(),
        )
        .filter(pl.col("total") > 0)
    )
    dcg = (
        ranked.join(held.select("user", "item", "reward"), on=["user", "item"])
        .group_by("user")
        .agg(dcg=(pl.col("reward") / (pl.col("rank") + 1).log(2)).sum())
    )
    value = (
        ideal.join(dcg, on="user", how="left")
        .select((pl.col("dcg").fill_null(0.0) / pl.col("idcg")).mean())
        .collect(engine="streaming")
    )
    return float(value.item())


def run_pyarrow(held_out: Path, recommendations: Path) -> float:
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in (held_out, recommendations)]
    return float(sum(t.num_rows for t in tables))  # rows read; not an nDCG


RUNS = {
    "ours": run_ours,
    "before": run_ours,
    "duckdb": run_duckdb,
    "polars": run_polars,
    "pyarrow": run_pyarrow,
}
IMPORTS = {
    "ours": ("recpack_ope.evaluation.files", "pyarrow.parquet"),
    "before": ("recpack_ope.evaluation.files", "pyarrow.parquet"),
    "duckdb": ("duckdb",),
    "polars": ("polars",),
    "pyarrow": ("pyarrow.parquet",),
}


def child(case: str, held_out: Path, recommendations: Path, source: str | None) -> None:
    """Run one case in this fresh interpreter and print its value, time and peak memory;
    ``source`` is the folder holding the package source of case ``before``."""
    import importlib
    import resource

    if source is not None:
        # an editable install's finder maps recpack_ope to the working tree before sys.path
        sys.meta_path[:] = [
            f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable")
        ]
        sys.path.insert(0, source)
    for module in IMPORTS[case]:
        importlib.import_module(module)
    start, cpu = time.perf_counter(), time.process_time()
    value = RUNS[case](held_out, recommendations)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    run = {"value": value, "seconds": seconds, "cpu": cpu, "peak": peak, "source": digest()}
    print(json.dumps(run))


def digest() -> str | None:
    """A digest of the package's modules this run imported, so that a run whose source was
    edited between rounds is noticed; None when the package was not imported."""
    import hashlib

    found = sorted(
        m.__file__
        for name, m in sys.modules.items()
        if name.split(".")[0] == "recpack_ope" and getattr(m, "__file__", None)
    )
    if not found:
        return None
    sha = hashlib.sha1()
    for path in found:
        sha.update(Path(path).read_bytes())
    return sha.hexdigest()[:12]


def measure(case: str, files: tuple[Path, Path], before: Path | None) -> dict:
    """One run of ``case`` in a fresh interpreter (``before``: see :func:`child`)."""
    source = [str(before)] if case == "before" else []
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, str(files[0]), str(files[1]), *source],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(f"case {case} failed (exit status {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("numpy", "pyarrow", "duckdb", "polars"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} missing")
    return ", ".join(found)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def bench(rows: int, root: Path, cases: list[str], repeat: int, before: Path | None) -> dict:
    """Best time and largest peak of every case on the files of ``rows`` rows, and the load
    average at the end."""
    files = paths(root, rows)
    if not cached(rows, files):
        print(f"generating {rows:,} rows under {files[0].parent}")
        generate(rows, files)
    print(f"{rows:,} rows: checking values (load average {load()})")
    values = {}
    for case in cases:
        run = measure(case, files, before)
        values[case] = run["value"]
        what = " rows read" if case == "pyarrow" else ""
        source = f" (package source {run['source']})" if run["source"] else ""
        print(f"  {case:8} {values[case]!r}{what}{source}")
    checked = [values[c] for c in cases if c != "pyarrow"]
    if checked and max(checked) - min(checked) > TOLERANCE:
        sys.exit(f"the nDCG values disagree by more than {TOLERANCE:g}")
    best = {c: {"seconds": float("inf"), "cpu": float("inf"), "peak": 0} for c in cases}
    sources = {c: set() for c in cases}
    for round_ in range(repeat):
        for case in cases:
            run = measure(case, files, before)
            best[case]["seconds"] = min(best[case]["seconds"], run["seconds"])
            best[case]["cpu"] = min(best[case]["cpu"], run["cpu"])
            best[case]["peak"] = max(best[case]["peak"], run["peak"])
            sources[case].add(run["source"])
        times = ", ".join(f"{c} {best[c]['seconds']:.2f} s" for c in cases)
        print(f"  round {round_ + 1}/{repeat}: best so far {times} (load average {load()})")
    for case, seen in sources.items():
        if len(seen) > 1:
            print(f"  warning: the source of {case} changed between rounds ({len(seen)} versions)")
    return {"best": best, "load": load()}


NAMES = {
    "ours": "ours",
    "before": "before",
    "duckdb": "DuckDB",
    "polars": "polars",
    "pyarrow": "pyarrow read",
}
#: Ratio columns: (numerator case, denominator case, "seconds" or "peak").
RATIOS = (
    ("ours", "duckdb", "seconds"),
    ("ours", "pyarrow", "peak"),
    ("ours", "before", "seconds"),
    ("ours", "before", "peak"),
)


def table(results: dict[int, dict], cases: list[str]) -> str:
    """The Markdown table of every size: seconds and peak GiB per case, then the ratios."""
    ratios = [r for r in RATIOS if {r[0], r[1]} <= set(cases)]
    what = {"seconds": "time", "peak": "memory"}
    header = ["rows"] + [f"{NAMES[c]} s, GiB" for c in cases]
    header += [f"{NAMES[a]}/{NAMES[b]} {what[m]}" for a, b, m in ratios] + ["load average"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rows, result in results.items():
        best = result["best"]
        cells = [f"{rows:,}"]
        cells += [f"{best[c]['seconds']:.2f}, {best[c]['peak'] / 2**30:.2f}" for c in cases]
        cells += [f"{best[a][m] / best[b][m]:.2f}×" for a, b, m in ratios]
        lines.append("| " + " | ".join(cells + [result["load"]]) + " |")
    lines.append("\nCPU seconds (user + system, all threads; best of the rounds):")
    for rows, result in results.items():
        cpu = ", ".join(f"{NAMES[c]} {result['best'][c]['cpu']:.2f}" for c in cases)
        lines.append(f"  {rows:,} rows: {cpu}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--child":
        source = sys.argv[5] if len(sys.argv) == 6 else None
        child(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), source)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows",
        default="10000000",
        help="recommendation rows, comma-separated sizes (multiples of 100)",
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the files live")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (best of)")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="also run case 'before': evaluate_files from the package source in this folder",
    )
    parser.add_argument(
        "--generate-only", action="store_true", help="write the files and measure nothing"
    )
    args = parser.parse_args()
    sizes = [int(r) for r in args.rows.split(",")]
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose among {','.join(CASES)}")
    if args.before is not None:
        if not (args.before / "recpack_ope" / "__init__.py").exists():
            parser.error(f"--before: no recpack_ope package in {args.before}")
        cases.insert(cases.index("ours") + 1 if "ours" in cases else 0, "before")
    if args.generate_only:
        for rows in sizes:
            files = paths(args.dir, rows)
            if not cached(rows, files):
                generate(rows, files)
        return
    results = {rows: bench(rows, args.dir, cases, args.repeat, args.before) for rows in sizes}
    print()
    print(table(results, cases))
    print(
        f"\nbest of {args.repeat}; {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"{versions()}"
    )


if __name__ == "__main__":
    main()
