"""Speed of a stratified nDCG against plain nDCG on the same sparse scores.

    python bench/bench_stratified.py [--users 100000] [--items 20000] [--candidates 200]
                                     [--K 100] [--strata 2 3] [--repeat 3]

Case of bench_scaling.py (20M scores, 1M held-out entries at the defaults), strata of the
held-out entries by item propensity (equal width, as Jadidinejad et al. and Cornac). The
anchor, measured in this process, is ``ndcg`` on all held-out entries: the stratified
estimate computes that holdout value plus one value per stratum, ranking the users once.
Times are the best of ``--repeat`` runs; the printed ratio is stratified / ndcg.
"""

from __future__ import annotations

import argparse
import time

from bench_dcg import print_against_anchor
from bench_scaling import sparse_case


def main() -> None:
    from recpack_ope import LogDiscount, ndcg, stratified

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--strata", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    y_true, y_pred, propensity = sparse_case(args.users, args.items, args.candidates)
    print(
        f"case: {args.users:,} users × {args.items:,} items, {y_pred.nnz:,} scores, "
        f"{y_true.nnz:,} held-out, K = {args.K} (built in {time.perf_counter() - start:.1f} s)"
    )
    disc = LogDiscount(args.K)
    runs = {"ndcg (anchor)": lambda: ndcg(y_true, y_pred, discount=disc)}
    for n in args.strata:
        runs[f"stratified, {n} strata"] = lambda n=n: stratified(
            ndcg, y_true, y_pred, stratify_by=propensity, n_strata=n, discount=disc
        )
    print_against_anchor(runs, args.repeat)


if __name__ == "__main__":
    main()
