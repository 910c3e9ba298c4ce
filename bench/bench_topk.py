"""Speed of TopK.from_scores on sparse scores against one per-row top-k selection pass.

    python bench/bench_topk.py [--users 100000] [--items 20000] [--candidates 200] [--k 100]
                               [--repeat 5]

Case of bench_scaling.py: every user has ``--candidates`` scored items (20M entries at the
defaults). The anchor, measured in this process, is the floor of any top-k: one
``np.argpartition`` of the same rows, reshaped (a view, no padding), at the k-th largest
value. It neither orders the k selected entries nor maps positions to items, both of which
``from_scores`` must do, and it validates nothing. Times are the best of ``--repeat`` runs;
the printed ratio is ours / anchor.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_dcg import print_against_anchor
from bench_scaling import sparse_case


def main() -> None:
    from recpack_ope.metrics import TopK

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    start = time.perf_counter()
    _, y_pred, _ = sparse_case(args.users, args.items, args.candidates)
    print(
        f"case: {args.users:,} users × {args.items:,} items, {y_pred.nnz:,} scores, k = {args.k} "
        f"(built in {time.perf_counter() - start:.1f} s), numpy {np.__version__}"
    )
    rows = y_pred.data.reshape(args.users, args.candidates)
    kth = args.candidates - args.k
    runs = {
        "np.argpartition (anchor)": lambda: np.argpartition(rows, kth, axis=1),
        "TopK.from_scores": lambda: TopK.from_scores(y_pred, args.k),
    }
    print_against_anchor(runs, args.repeat)


if __name__ == "__main__":
    main()
