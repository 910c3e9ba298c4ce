"""Speed of recall-paired preference against the pure-Python reference, and at scale.

    python bench/bench_rpp.py --reference /path/to/pref_eval [--systems 21] [--queries 943]
                              [--depth 100] [--big-systems 200] [--big-users 6000]

1. **Pairwise matrix vs the reference** (github.com/diazf/pref_eval, ``git clone`` it): the
   same trec files (``--queries`` queries over 1,682 documents, ~20 graded judgements per
   query, ``--systems`` runs of depth ``--depth`` with tied scores) are evaluated by the
   reference's ``get_prefs`` (RPP for every pair of runs) and by :func:`preference_matrix`.
   Reported separately: reading the files, computing the preferences, and both together.
2. **Win rates at scale**: ``--big-systems`` top-``--depth`` rankings of ``--big-users`` users
   over 3,701 items (ML-1M-sized), ~30 relevant items per user, timed end to end (search
   lengths of every system + per-level ranks) with :func:`win_rates`; peak memory under
   ``tracemalloc`` in a separate run.

Times are the best of ``--repeat`` runs (the reference runs once: it takes seconds).
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

from recpack_ope import TopK  # noqa: E402
from recpack_ope.io.trec import read_trec  # noqa: E402
from recpack_ope.metrics.rpp import preference_matrix, win_rates  # noqa: E402


def write_trec(folder: Path, n_queries: int, n_systems: int, depth: int, seed: int = 0) -> tuple[str, list[str]]:
    """Qrels with graded labels and runs whose scores favour relevant documents, with ties."""
    rng = np.random.default_rng(seed)
    n_docs = 1682
    popularity = rng.zipf(1.5, n_docs).astype(float)
    popularity /= popularity.sum()
    relevance = np.zeros((n_queries, n_docs))
    lines = []
    for q in range(n_queries):
        judged = rng.choice(n_docs, size=rng.integers(5, 40), replace=False, p=popularity)
        relevance[q, judged] = rng.integers(1, 6, judged.size)
        lines += [f"{q} 0 d{d} {int(relevance[q, d])}\n" for d in judged]
    qrels = folder / "qrels.txt"
    qrels.write_text("".join(lines))
    runs = []
    for s in range(n_systems):
        noise = rng.gumbel(size=(n_queries, n_docs)) * (1 + s / n_systems)
        scores = np.round(np.log(popularity) + 2 * (relevance >= 4) + noise, 1)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
        path = folder / f"input.sys{s:03d}"
        with open(path, "w") as out:
            for q in range(n_queries):
                out.writelines(f"{q} Q0 d{d} {r + 1} {scores[q, d]} sys{s}\n" for r, d in enumerate(top[q]))
        runs.append(str(path))
    return str(qrels), runs


def reference_pairwise(reference: str, qrels: str, runs: list[str]) -> tuple[float, float, dict]:
    sys.path.insert(0, reference)
    import pref_eval
    from util import trec_io

    start = time.perf_counter()
    judged = trec_io.read_qrels(qrels, None, None)
    loaded = dict(trec_io.read_run(path, judged, None) for path in runs)
    read = time.perf_counter() - start
    start = time.perf_counter()
    summary = pref_eval.get_prefs(0, loaded, ["rpp"], False)
    return read, time.perf_counter() - start, summary


def big_case(n_systems: int, n_users: int, depth: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    n_items = 3701  # prime: (a·j + b) mod n lists `depth` distinct items for any a ≠ 0
    rows = [rng.choice(n_items, 30, replace=False) for _ in range(n_users)]
    y_true = sp.csr_matrix((np.ones(30 * n_users), np.concatenate(rows), np.arange(0, 30 * n_users + 1, 30)),
                           shape=(n_users, n_items))
    j = np.arange(depth)
    rankings = {}
    for s in range(n_systems):
        a = rng.integers(1, n_items, (n_users, 1))
        b = rng.integers(0, n_items, (n_users, 1))
        rankings[f"s{s}"] = TopK((a * j + b) % n_items)
    return y_true, rankings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", help="path of a pref_eval checkout (part 1 is skipped without it)")
    parser.add_argument("--systems", type=int, default=21)
    parser.add_argument("--queries", type=int, default=943)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--big-systems", type=int, default=200)
    parser.add_argument("--big-users", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    if args.reference:
        with tempfile.TemporaryDirectory() as tmp:
            qrels, runs = write_trec(Path(tmp), args.queries, args.systems, args.depth)
            ref_read, ref_prefs, summary = reference_pairwise(args.reference, qrels, runs)
            collection = read_trec(qrels, runs)
            ours_read = best_time(lambda: read_trec(qrels, runs), args.repeat)
            ours_prefs = best_time(lambda: preference_matrix(collection.qrels, collection.runs, graded=False),
                                   args.repeat)
            matrix = preference_matrix(collection.qrels, collection.runs, graded=False)
            worst = max(abs(matrix.mean[matrix.index(p.split(":")[0]), matrix.index(p.split(":")[1])] - v["rpp"])
                        for p, v in summary.items())
        pairs = args.systems * (args.systems - 1) // 2
        print(f"{args.systems} runs × {args.queries} queries × depth {args.depth} ({pairs} pairs); "
              f"max |ours − reference| = {worst:.1e}")
        print(f"{'':24}{'reference':>12}{'ours':>10}{'speed-up':>10}")
        for label, ref, ours in (("read trec files", ref_read, ours_read),
                                 ("pairwise RPP matrix", ref_prefs, ours_prefs),
                                 ("both", ref_read + ref_prefs, ours_read + ours_prefs)):
            print(f"{label:24}{ref:>11.3f}s{ours:>9.3f}s{ref / ours:>9.0f}×")

    y_true, rankings = big_case(args.big_systems, args.big_users, args.depth)
    seconds = best_time(lambda: win_rates(y_true, rankings), 1)
    peak = peak_mib(lambda: win_rates(y_true, rankings))
    print(f"\nwin rates of {args.big_systems} systems × {args.big_users} users (depth {args.depth}, "
          f"{y_true.nnz:,} relevant): {seconds:.1f} s, peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
