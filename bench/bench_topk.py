"""Speed of TopK.from_scores and sparse nDCG@K against one per-row top-k selection pass.

    python bench/bench_topk.py [--users 100000] [--items 20000] [--candidates 200] [--k 100]
                               [--cutoffs 10 100] [--repeat 5]

Case of bench_scaling.py: every user has ``--candidates`` scored items (20M entries at the
defaults) and 10 held-out items, 5 of them scored. The anchor, measured in this process, is
the floor of any top-k: one ``np.argpartition`` of the same rows, reshaped (a view, no
padding), at the k-th largest value. It neither orders the k selected entries nor maps
positions to items, both of which ``from_scores`` must do, and it validates nothing. The
second table times ``ndcg`` at each of ``--cutoffs`` against the floor of a held-out
evaluation (``bench_dcg.held_out_floor``): that argpartition at the K-th largest plus the
gather of the held-out hits, whose places among the scores it is given. Times are the best
of ``--repeat`` rounds, each running every case once in turn; the printed ratios are ours /
anchor. Last, the peak memory ``ndcg`` allocates (tracemalloc) per held-out entry; it
includes the buffers of one chunk of scores, which do not grow with the held-out entries.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import numpy as np
from bench_dcg import held_out_floor, interleaved_best, peak_mib, print_against_anchor
from bench_scaling import sparse_case


def main() -> None:
    from recpack_ope import LogDiscount, ndcg
    from recpack_ope.metrics import TopK

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--cutoffs", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    start = time.perf_counter()
    y_true, y_pred, _ = sparse_case(args.users, args.items, args.candidates)
    print(
        f"case: {args.users:,} users × {args.items:,} items, {y_pred.nnz:,} scores, "
        f"{y_true.nnz:,} held-out, k = {args.k} (built in {time.perf_counter() - start:.1f} s), "
        f"numpy {np.__version__}, load average {os.getloadavg()[0]:.2f}"
    )
    rows = y_pred.data.reshape(args.users, args.candidates)
    kth = args.candidates - args.k
    runs = {
        "np.argpartition (anchor)": lambda: np.argpartition(rows, kth, axis=1),
        "TopK.from_scores": lambda: TopK.from_scores(y_pred, args.k),
    }
    print_against_anchor(runs, args.repeat)

    runs = {}
    for K in args.cutoffs:
        discount = LogDiscount(K)
        runs[f"floor@{K}"] = held_out_floor(y_true, y_pred, K)
        runs[f"ndcg@{K}"] = partial(ndcg, y_true, y_pred, discount=discount)
    seconds = interleaved_best(runs, args.repeat)
    print(f"{'':>10} {'floor (s)':>10} {'ndcg (s)':>9} {'× floor':>8}")
    for K in args.cutoffs:
        floor, ours = seconds[f"floor@{K}"], seconds[f"ndcg@{K}"]
        print(f"{f'nDCG@{K}':>10} {floor:10.3f} {ours:9.3f} {ours / floor:8.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    for K in args.cutoffs:
        peak = peak_mib(runs[f"ndcg@{K}"]) * 2**20
        print(
            f"nDCG@{K} peak memory {peak / 2**20:.1f} MiB = {peak / y_true.nnz:.1f} B per "
            "held-out entry"
        )


if __name__ == "__main__":
    main()
