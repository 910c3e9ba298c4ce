"""Speed and memory of ndcg / unbiased_dcg against RecPack's NDCGK on identical inputs.

    python bench/bench_dcg.py [--users 100000] [--items 20000] [--candidates 200] [--K 100]

Needs RecPack (legacy environment). Synthetic case: every user has ~10 held-out items and a
sparse prediction row of ``--candidates`` scored items, i.e. RecPack's ``X_pred`` after
pruning (full 100k × 20k predictions would not fit RecPack's CSR input). Times are the best
of ``--repeat`` runs; peak memory is measured in a separate run under ``tracemalloc``
(numpy reports its buffers to it), so tracing does not distort the timings. Printed ratios
are ours / RecPack's, measured in this process.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp


def synthetic(n_users: int, n_items: int, candidates: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    popularity = rng.zipf(1.8, size=n_items).astype(float)
    popularity /= popularity.sum()

    def rows(per_user: int, values):
        cols = np.concatenate(
            [rng.choice(n_items, per_user, replace=False, p=popularity) for _ in range(n_users)]
        )
        indptr = np.arange(0, n_users * per_user + 1, per_user)
        return sp.csr_matrix((values(cols.size), cols, indptr), shape=(n_users, n_items))

    y_true = rows(10, np.ones)
    y_pred = rows(candidates, rng.random)
    return y_true, y_pred, popularity


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    from recpack.metrics import NDCGK

    from recpack_ope import LogDiscount, ndcg, unbiased_dcg

    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    t0 = time.perf_counter()
    y_true, y_pred, popularity = synthetic(args.users, args.items, args.candidates)
    propensity = np.clip(popularity / popularity.max(), 1e-6, 1.0)
    print(
        f"case: {args.users:,} users × {args.items:,} items, {y_true.nnz:,} held-out, "
        f"{y_pred.nnz:,} predictions, K = {args.K} (built in {time.perf_counter() - t0:.1f} s)"
    )
    disc = LogDiscount(args.K)
    runs = {
        "RecPack NDCGK": lambda: NDCGK(K=args.K).calculate(y_true, y_pred),
        "ndcg": lambda: ndcg(y_true, y_pred, discount=disc),
        "unbiased_dcg": lambda: unbiased_dcg(y_true, y_pred, discount=disc, propensity=propensity),
    }
    recpack = NDCGK(K=args.K)
    recpack.calculate(y_true, y_pred)
    assert abs(ndcg(y_true, y_pred, discount=disc).value - recpack.value) < 1e-9
    seconds = {name: best_time(fn, args.repeat) for name, fn in runs.items()}
    memory = {name: peak_mib(fn) for name, fn in runs.items()}
    anchor = "RecPack NDCGK"
    print(f"{'':>14} {'time (s)':>9} {'× anchor':>9} {'peak MiB':>9} {'× anchor':>9}")
    for name in runs:
        print(
            f"{name:>14} {seconds[name]:9.2f} {seconds[name] / seconds[anchor]:9.2f} "
            f"{memory[name]:9.0f} {memory[name] / memory[anchor]:9.2f}"
        )


if __name__ == "__main__":
    main()
