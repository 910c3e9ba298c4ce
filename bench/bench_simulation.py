"""Speed and memory of the simulator at the largest advertised size (100k users × 20k items).

    python bench/bench_simulation.py [--users 100000] [--items 20000] [--feed 50]

Measures, in one process: exact Plackett–Luce exposure of every item, logging one feed per
user, and the exact online reward of a top-10 ranking for every user. The anchor is the
obvious sampler, ``numpy.random.Generator.choice(n_items, feed, replace=False, p=w)`` called
once per user, timed on ``--anchor-users`` users and scaled per feed; the printed ratio is
ours / anchor per feed. Peak memory is the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from recpack_ope import LogDiscount
from recpack_ope.logged.plackett_luce import exposure
from recpack_ope.metrics import TopK
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--feed", type=int, default=50)
    parser.add_argument("--anchor-users", type=int, default=2_000)
    args = parser.parse_args()

    world = SimulatedWorld(n_users=args.users, n_items=args.items, seed=0)
    policy = PopularityPolicy()
    weights = policy.weights(world)

    start = time.perf_counter()
    exposure(weights, LogDiscount(), args.feed)
    t_exposure = time.perf_counter() - start

    start = time.perf_counter()
    log = world.log(policy, feed_length=args.feed, seed=1)
    t_log = time.perf_counter() - start

    rng = np.random.default_rng(0)
    p = weights / weights.sum()
    start = time.perf_counter()
    for _ in range(args.anchor_users):
        rng.choice(args.items, args.feed, replace=False, p=p)
    t_anchor_feed = (time.perf_counter() - start) / args.anchor_users

    top = TopK(np.argsort(rng.random((args.users, args.items // 100)), axis=1)[:, :10])
    start = time.perf_counter()
    reward = world.online_reward(top, LogDiscount(10))
    t_reward = time.perf_counter() - start

    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    ours_feed = t_log / args.users
    print(f"world {args.users} users × {args.items} items, feeds of {args.feed}")
    print(f"exact exposure of {args.items} items:     {t_exposure:8.2f} s")
    print(f"log one feed per user (incl. exposure): {t_log:8.2f} s  ({log.click.sum()} clicks)")
    print(f"online reward of a top-10 per user:     {t_reward:8.2f} s  (value {reward.value:.4f})")
    print(
        f"per feed: ours {ours_feed * 1e6:.1f} µs, anchor Generator.choice "
        f"{t_anchor_feed * 1e6:.1f} µs"
        f" -> ratio {ours_feed / t_anchor_feed:.3f}"
    )
    print(f"peak resident memory: {peak_gib:.2f} GiB (limit of this machine: 24 GiB)")


if __name__ == "__main__":
    main()
