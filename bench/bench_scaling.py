"""How time and memory of ndcg / ips_dcg grow with the number of users.

    python bench/bench_scaling.py [--users 10000 30000 100000 300000] [--items 20000]
                                  [--candidates 200] [--K 100] [--repeat 3]

Synthetic case per size: every user has a sparse prediction row of ``--candidates`` scored
items (RecPack's pruned ``X_pred``) and 10 held-out items, half of them scored. Times are the
best of ``--repeat`` runs; peak memory is measured in a separate run under ``tracemalloc``
(numpy reports its buffers to it), so it counts what the call allocates beyond its inputs.
The fitted exponent is the slope of log(time) (or log(peak)) against log(users): 1 is linear.
Peak memory splits into the chunk work, bounded by ``CHUNK_ELEMENTS`` whatever the number of
users, and a part proportional to the held-out entries (the per-entry arrays an estimate
keeps: ranks, weights, contributions); the last line fits that split, the last column is peak
/ held-out entries. Neither grows with the score matrix.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import scipy.sparse as sp
from bench_dcg import best_time, peak_mib


def sparse_case(
    n_users: int, n_items: int = 20_000, candidates: int = 200, held: int = 10, seed: int = 0
) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """``(y_true, y_pred, propensity)``, built vectorised in seconds even for 300k users.

    Each user's scored items are an arithmetic progression modulo ``n_items`` with a random
    start and a stride coprime to ``n_items`` (so distinct); half of the held-out items are
    the first scored ones, half the next terms of the progression (unscored). Scores are
    uniform, so ties are as rare as in real model output. Propensities are per item, a power
    law as in popularity-biased logs.
    """
    rng = np.random.default_rng(seed)
    start = rng.integers(0, n_items, n_users)
    coprime = np.flatnonzero(np.gcd(np.arange(n_items), n_items) == 1)
    stride = rng.choice(coprime, n_users)
    steps = np.arange(candidates + held - held // 2, dtype=np.int64)
    items = (start[:, None] + steps * stride[:, None]) % n_items
    scored = np.sort(items[:, :candidates], axis=1)
    kept = np.sort(np.concatenate([items[:, : held // 2], items[:, candidates:]], axis=1), axis=1)

    def csr(columns: np.ndarray, values: np.ndarray) -> sp.csr_matrix:
        width = columns.shape[1]
        indptr = np.arange(0, n_users * width + 1, width)
        return sp.csr_matrix(
            (values, columns.ravel().astype(np.int32), indptr), shape=(n_users, n_items)
        )

    y_true = csr(kept, np.ones(kept.size))
    y_pred = csr(scored, rng.random(scored.size))
    propensity = np.clip(1.0 / np.arange(1, n_items + 1) ** 0.7, 1e-3, 1.0)[
        rng.permutation(n_items)
    ]
    return y_true, y_pred, propensity


def main() -> None:
    from recpack_ope import LogDiscount, ips_dcg, ndcg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[10_000, 30_000, 100_000, 300_000])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    disc = LogDiscount(args.K)
    seconds: dict[str, list[float]] = {"ndcg": [], "ips_dcg": []}
    memory: dict[str, list[float]] = {"ndcg": [], "ips_dcg": []}
    print(
        f"{args.items:,} items, {args.candidates} scored and 10 held-out items per user, K = "
        f"{args.K}"
    )
    print(
        f"{'users':>8} {'metric':>13} {'time (s)':>9} {'µs/user':>8} {'peak MiB':>9} "
        f"{'input MiB':>9} {'B/held-out':>10}"
    )
    for n_users in args.users:
        y_true, y_pred, propensity = sparse_case(n_users, args.items, args.candidates)
        inputs = sum(a.nbytes for m in (y_true, y_pred) for a in (m.data, m.indices, m.indptr))
        runs = {
            "ndcg": partial(ndcg, y_true, y_pred, discount=disc),
            "ips_dcg": partial(ips_dcg, y_true, y_pred, discount=disc, propensity=propensity),
        }
        for name, fn in runs.items():
            seconds[name].append(best_time(fn, args.repeat))
            memory[name].append(peak_mib(fn))
            print(
                f"{n_users:>8,} {name:>13} {seconds[name][-1]:9.3f} "
                f"{seconds[name][-1] / n_users * 1e6:8.2f} {memory[name][-1]:9.0f} "
                f"{inputs / 2**20:9.0f} {memory[name][-1] * 2**20 / y_true.nnz:10.1f}"
            )
    if len(args.users) > 1:
        log_users = np.log(args.users)
        held_out = 10 * np.array(args.users)
        for name in runs:
            time_exp = np.polyfit(log_users, np.log(seconds[name]), 1)[0]
            memory_exp = np.polyfit(log_users, np.log(memory[name]), 1)[0]
            per_entry, fixed = np.polyfit(held_out, np.array(memory[name]) * 2**20, 1)
            print(
                f"{name}: time ∝ users^{time_exp:.2f}, peak memory ∝ users^{memory_exp:.2f} "
                f"≈ {fixed / 2**20:.0f} MiB + {per_entry:.0f} B per held-out entry"
            )


if __name__ == "__main__":
    main()
