"""Speed and memory of ndcg / ips_dcg against RecPack's NDCGK on identical inputs.

    python bench/bench_dcg.py [--users 100000] [--items 20000] [--candidates 200] [--K 100]
    python bench/bench_dcg.py --dense [--users 943] [--items 1682] [--K 10]

Needs RecPack (legacy environment). Sparse case (default): every user has ~10 held-out items
and a sparse prediction row of ``--candidates`` scored items, i.e. RecPack's ``X_pred`` after
pruning (full 100k × 20k predictions would not fit RecPack's CSR input). Dense case
(``--dense``, MovieLens-100K-sized by default): every item of every user is scored, 20
held-out items per user; RecPack gets the scores as a CSR matrix storing every entry (its
``X_pred``), ours both the dense array and that CSR matrix. Times are the best of
``--repeat`` interleaved rounds; peak memory is measured in a separate run under
``tracemalloc`` (numpy reports its buffers to it), so tracing does not distort the timings.
Printed ratios are
ours / RecPack's, measured in this process, and in the sparse case ours / the floor of any
top-K evaluation (``held_out_floor``), timed in the same rounds.
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


def dense_case(n_users: int, n_items: int, held: int = 20, seed: int = 0):
    """Dense tie-free scores, ``held`` random held-out items per user and uniform item
    propensities in [0.05, 1]."""
    rng = np.random.default_rng(seed)
    scores = rng.random((n_users, n_items))
    chosen = np.argpartition(rng.random((n_users, n_items)), held, axis=1)[:, :held]
    indptr = np.arange(0, n_users * held + 1, held)
    y_true = sp.csr_matrix(
        (np.ones(chosen.size), np.sort(chosen, axis=1).ravel(), indptr), shape=(n_users, n_items)
    )
    return y_true, scores, rng.uniform(0.05, 1.0, n_items)


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved_best(runs: dict, repeat: int) -> dict:
    """Best time of every run over ``repeat`` rounds, each round running every run once in
    turn, so that a change of the machine's load touches them alike."""
    seconds = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            seconds[name] = min(seconds[name], time.perf_counter() - start)
    return seconds


def print_against_anchor(runs: dict, repeat: int) -> dict:
    """Time every run (best of ``repeat`` interleaved rounds), print it with its ratio to the
    first, the anchor, and return the times."""
    seconds = interleaved_best(runs, repeat)
    anchor, width = next(iter(seconds.values())), max(map(len, seconds))
    print(f"{'':>{width}} {'time (s)':>9} {'× anchor':>9}")
    for name, t in seconds.items():
        print(f"{name:>{width}} {t:9.3f} {t / anchor:9.2f}")
    return seconds


def held_out_floor(y_true: sp.csr_matrix, y_pred: sp.csr_matrix, K: int):
    """The floor of a sparse top-K evaluation, as a function to time: one per-row
    ``np.argpartition`` at the K-th largest score of the rows (a reshaped view of the scores,
    no padding; every row stores as many) and the gather of the held-out hits, each scored
    held-out entry's score compared with its row's K-th largest. Where the held-out entries
    sit among the scores is found here, outside the timing."""
    n_users, n_items = y_pred.shape
    width = y_pred.nnz // n_users
    rows = y_pred.data.reshape(n_users, width)
    users = np.repeat(np.arange(n_users, dtype=np.int64), width)
    keys = users * n_items + y_pred.indices
    order = np.argsort(keys)
    wanted = np.repeat(np.arange(n_users, dtype=np.int64), np.diff(y_true.indptr))
    wanted = wanted * n_items + y_true.indices
    at = np.minimum(np.searchsorted(keys[order], wanted), keys.size - 1)
    scored = keys[order[at]] == wanted
    held_at, held_row = order[at[scored]], wanted[scored] // n_items
    kth = width - K

    def floor() -> np.ndarray:
        part = np.argpartition(rows, kth, axis=1)
        threshold = np.take_along_axis(rows, part[:, kth : kth + 1], axis=1)[:, 0]
        return y_pred.data[held_at] >= threshold[held_row]

    return floor


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    from recpack.metrics import NDCGK

    from recpack_ope import LogDiscount, ips_dcg, ndcg

    parser = argparse.ArgumentParser()
    parser.add_argument("--dense", action="store_true", help="dense scores (ML-100K-sized)")
    parser.add_argument("--users", type=int)
    parser.add_argument("--items", type=int)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--K", type=int)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    defaults = (943, 1682, 10) if args.dense else (100_000, 20_000, 100)
    args.users, args.items, args.K = (
        given or default
        for given, default in zip((args.users, args.items, args.K), defaults, strict=True)
    )

    t0 = time.perf_counter()
    if args.dense:
        y_true, scores, propensity = dense_case(args.users, args.items)
        y_pred = sp.csr_matrix(scores)
    else:
        y_true, y_pred, popularity = synthetic(args.users, args.items, args.candidates)
        scores, propensity = y_pred, np.clip(popularity / popularity.max(), 1e-6, 1.0)
    print(
        f"case: {args.users:,} users × {args.items:,} items, {y_true.nnz:,} held-out, "
        f"{y_pred.nnz:,} predictions, K = {args.K} (built in {time.perf_counter() - t0:.1f} s)"
    )
    disc = LogDiscount(args.K)
    runs = {
        "RecPack NDCGK": lambda: NDCGK(K=args.K).calculate(y_true, y_pred),
        "ndcg": lambda: ndcg(y_true, scores, discount=disc),
        "ips_dcg": lambda: ips_dcg(y_true, scores, discount=disc, propensity=propensity),
    }
    if args.dense:
        runs["ndcg on the CSR"] = lambda: ndcg(y_true, y_pred, discount=disc)
    else:
        runs["floor"] = held_out_floor(y_true, y_pred, args.K)
    recpack = NDCGK(K=args.K)
    recpack.calculate(y_true, y_pred)
    assert abs(ndcg(y_true, y_pred, discount=disc).value - recpack.value) < 1e-9
    seconds = interleaved_best(runs, args.repeat)
    memory = {name: peak_mib(fn) for name, fn in runs.items()}
    anchor = "RecPack NDCGK"
    floor = seconds.get("floor", np.nan)
    print(
        f"{'':>15} {'time (s)':>9} {'× anchor':>9} {'× floor':>8} {'peak MiB':>9} {'× anchor':>9}"
    )
    for name in runs:
        print(
            f"{name:>15} {seconds[name]:9.4f} {seconds[name] / seconds[anchor]:9.2f} "
            f"{seconds[name] / floor:8.2f} {memory[name]:9.1f} {memory[name] / memory[anchor]:9.2f}"
        )


if __name__ == "__main__":
    main()
