"""Speed of recall-paired preference against the pure-Python reference, and at scale.

    python bench/bench_rpp.py --reference /path/to/pref_eval [--systems 21] [--queries 943]
                              [--depth 100] [--big-systems 200] [--big-users 6000]

The reference is Diaz & Ferraro's implementation, github.com/diazf/pref_eval: clone it
(``git clone https://github.com/diazf/pref_eval``) and pass the clone's folder; it is read and
run, never copied. Without ``--reference`` parts 1 and 2 are skipped.

1. **Binary qrels vs the reference and pyarrow** (the performance goal's row): ``--queries``
   queries over 1,682 documents with 5–60 relevant documents each (grade 1), ``--systems`` runs
   of depth ``--depth`` with tied scores. Reported, each against its anchor measured in this
   process: reading the files with :func:`read_trec` vs a plain ``pyarrow.csv.read_csv`` of the
   same files (every column, types inferred), and :func:`preference_matrix` (levels, search
   lengths of every run, RPP of every pair) vs the reference's ``get_prefs`` (RPP for every pair
   of runs) on its own parsed files.
2. **Graded qrels vs the reference**: ~20 judgements of grades 1–5 per query, otherwise as in 1;
   reading and the pairwise matrix against the reference's reader and ``get_prefs``.
3. **Win rates at scale**: ``--big-systems`` top-``--depth`` rankings of ``--big-users`` users
   over 3,701 items (ML-1M-sized), ~30 relevant items per user, timed end to end (search
   lengths of every system + per-level ranks) with :func:`win_rates`; peak memory under
   ``tracemalloc`` in a separate run.

Times are the best of ``--repeat`` runs, ours and the anchor taken in turn so that load from
other processes hits both; the reference's reader runs once and ``get_prefs`` ``--ref-repeat``
times (they take seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))
from bench_dcg import best_time, peak_mib  # noqa: E402

from recpack_ope.io.trec import read_trec  # noqa: E402
from recpack_ope.metrics import TopK  # noqa: E402
from recpack_ope.metrics.rpp import preference_matrix, win_rates  # noqa: E402


def write_trec(
    folder: Path, n_queries: int, n_systems: int, depth: int, *, binary: bool = False, seed: int = 0
) -> tuple[str, list[str]]:
    """Qrels (graded 1–5, or binary with 5–60 relevant documents per query) and runs whose
    scores favour relevant documents, rounded so that they tie."""
    rng = np.random.default_rng(seed)
    n_docs = 1682
    popularity = rng.zipf(1.5, n_docs).astype(float)
    popularity /= popularity.sum()
    relevance = np.zeros((n_queries, n_docs))
    lines = []
    for q in range(n_queries):
        judged = rng.choice(
            n_docs, size=rng.integers(5, 61 if binary else 40), replace=False, p=popularity
        )
        relevance[q, judged] = 1 if binary else rng.integers(1, 6, judged.size)
        lines += [f"{q} 0 d{d} {int(relevance[q, d])}\n" for d in judged]
    qrels = folder / "qrels.txt"
    qrels.write_text("".join(lines))
    favoured = relevance >= (1 if binary else 4)
    runs = []
    for s in range(n_systems):
        noise = rng.gumbel(size=(n_queries, n_docs)) * (1 + s / n_systems)
        scores = np.round(np.log(popularity) + 2 * favoured + noise, 1)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
        path = folder / f"input.sys{s:03d}"
        with open(path, "w") as out:
            for q in range(n_queries):
                out.writelines(
                    f"{q} Q0 d{d} {r + 1} {scores[q, d]} sys{s}\n" for r, d in enumerate(top[q])
                )
        runs.append(str(path))
    return str(qrels), runs


def best_in_turn(fns, repeat: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each function's fastest run over ``repeat`` rounds, the functions
    run in turn each round. CPU counts every thread: CPU / wall is the cores a run kept busy."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, got in zip(fns, times, strict=True):
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            got.append((time.perf_counter() - start, time.process_time() - cpu))
    return [min(got) for got in times]


def pyarrow_read(paths: list[str]) -> None:
    """The anchor for reading: a plain pyarrow.csv read of every file (all columns, inferred
    types)."""
    import pyarrow.csv

    for path in paths:
        pyarrow.csv.read_csv(
            path,
            read_options=pyarrow.csv.ReadOptions(autogenerate_column_names=True),
            parse_options=pyarrow.csv.ParseOptions(delimiter=" "),
        )


def reference_pairwise(
    reference: str, qrels: str, runs: list[str], repeat: int
) -> tuple[float, float, dict]:
    """The reference's reading time, its best ``get_prefs`` time (RPP of every pair) and its
    result."""
    if reference not in sys.path:
        sys.path.insert(0, reference)
    import pref_eval
    from util import trec_io

    start = time.perf_counter()
    judged = trec_io.read_qrels(qrels, None, None)
    loaded = dict(trec_io.read_run(path, judged, None) for path in runs)
    read = time.perf_counter() - start
    summary = pref_eval.get_prefs(0, loaded, ["rpp"], False)
    prefs = best_time(lambda: pref_eval.get_prefs(0, loaded, ["rpp"], False), repeat)
    return read, prefs, summary


def worst_difference(matrix, summary: dict) -> float:
    """Largest |ours − reference| over the pairs' mean RPP."""
    return max(
        abs(
            matrix.mean[matrix.index(pair.split(":")[0]), matrix.index(pair.split(":")[1])]
            - value["rpp"]
        )
        for pair, value in summary.items()
    )


def big_case(n_systems: int, n_users: int, depth: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    n_items = 3701  # prime: (a·j + b) mod n lists `depth` distinct items for any a ≠ 0
    rows = [rng.choice(n_items, 30, replace=False) for _ in range(n_users)]
    y_true = sp.csr_matrix(
        (np.ones(30 * n_users), np.concatenate(rows), np.arange(0, 30 * n_users + 1, 30)),
        shape=(n_users, n_items),
    )
    j = np.arange(depth)
    rankings = {}
    for s in range(n_systems):
        a = rng.integers(1, n_items, (n_users, 1))
        b = rng.integers(0, n_items, (n_users, 1))
        rankings[f"s{s}"] = TopK((a * j + b) % n_items)
    return y_true, rankings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reference", help="path of a pref_eval clone (parts 1 and 2 are skipped without it)"
    )
    parser.add_argument("--systems", type=int, default=21)
    parser.add_argument("--queries", type=int, default=943)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--big-systems", type=int, default=200)
    parser.add_argument("--big-users", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument(
        "--ref-repeat", type=int, default=2, help="times get_prefs runs (best taken)"
    )
    args = parser.parse_args()

    if args.reference:
        pairs = args.systems * (args.systems - 1) // 2
        shape = f"{args.systems} runs × {args.queries} queries × depth {args.depth} ({pairs} pairs)"
        with tempfile.TemporaryDirectory() as tmp:
            qrels, runs = write_trec(Path(tmp), args.queries, args.systems, args.depth, binary=True)
            ref_read, ref_prefs, summary = reference_pairwise(
                args.reference, qrels, runs, args.ref_repeat
            )
            collection = read_trec(qrels, runs)
            (ours_read, ours_cpu), (arrow_read, arrow_cpu) = best_in_turn(
                [lambda: read_trec(qrels, runs), lambda: pyarrow_read([qrels, *runs])], args.repeat
            )
            ours_prefs = best_time(
                lambda: preference_matrix(collection.qrels, collection.runs, graded=False),
                args.repeat,
            )
            worst = worst_difference(
                preference_matrix(collection.qrels, collection.runs, graded=False), summary
            )
        print(
            f"1. binary qrels, 5–60 relevant per query: {shape}; max |ours − reference| = "
            f"{worst:.1e}"
        )
        print(f"{'':22}{'anchor':>28}{'ours':>10}{'ratio':>18}")
        print(
            f"{'read trec files':22}{'pyarrow.csv.read_csv':>19}{arrow_read:>8.3f}s"
            f"{ours_read:>9.3f}s{ours_read / arrow_read:>8.2f}× anchor"
        )
        print(
            f"{'pairwise RPP matrix':22}{'get_prefs':>19}{ref_prefs:>8.3f}s{ours_prefs:>9.4f}s"
            f"{ref_prefs / ours_prefs:>8.0f}× faster"
        )
        print(
            f"(reading: pyarrow kept {arrow_cpu / arrow_read:.1f} cores busy, ours "
            f"{ours_cpu / ours_read:.1f}; "
            f"our CPU time is {ours_cpu / arrow_cpu:.2f}× the anchor's. "
            f"The reference reads the files in {ref_read:.2f} s.)"
        )

        with tempfile.TemporaryDirectory() as tmp:
            qrels, runs = write_trec(Path(tmp), args.queries, args.systems, args.depth)
            ref_read, ref_prefs, summary = reference_pairwise(
                args.reference, qrels, runs, args.ref_repeat
            )
            collection = read_trec(qrels, runs)
            ours_read = best_time(lambda: read_trec(qrels, runs), args.repeat)
            ours_prefs = best_time(
                lambda: preference_matrix(collection.qrels, collection.runs, graded=False),
                args.repeat,
            )
            worst = worst_difference(
                preference_matrix(collection.qrels, collection.runs, graded=False), summary
            )
        print(f"\n2. graded qrels: {shape}; max |ours − reference| = {worst:.1e}")
        print(f"{'':24}{'reference':>12}{'ours':>10}{'speed-up':>10}")
        for label, ref, ours in (
            ("read trec files", ref_read, ours_read),
            ("pairwise RPP matrix", ref_prefs, ours_prefs),
            ("both", ref_read + ref_prefs, ours_read + ours_prefs),
        ):
            print(f"{label:24}{ref:>11.3f}s{ours:>9.3f}s{ref / ours:>9.0f}×")

    y_true, rankings = big_case(args.big_systems, args.big_users, args.depth)
    seconds = best_time(lambda: win_rates(y_true, rankings), 1)
    peak = peak_mib(lambda: win_rates(y_true, rankings))
    print(
        f"\n3. win rates of {args.big_systems} systems × {args.big_users} users (depth "
        f"{args.depth}, "
        f"{y_true.nnz:,} relevant): {seconds:.1f} s, peak {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
