"""Speed and memory of logged-feedback evaluation: unbiased DCG on 10M impressions, and
Gilotte's rank-marginal programme for banners of 16 products.

    python bench/bench_logged.py [--sessions 200000] [--feed 50] [--contexts 20000] [--items 5000]

1. **Unbiased DCG on logs**: ``--sessions`` × ``--feed`` impressions (10M by default) of
   ``--contexts`` users over ``--items`` items with propensities, a deterministic target given
   as precomputed top-``--feed`` rankings (``TopK``). Timed separately: building the validated
   :class:`FeedLog` from columns and :func:`logged_dcg` (target ranks + Eq. 10); throughput in
   impressions per second on one core; peak memory under ``tracemalloc``. Anchors in the same
   process: ``np.bincount`` of the rewards per session (the floor: one pass over the rows), and
   a pure-Python loop computing the same estimate, timed on 1 % of the sessions and scaled.
   The build is also set against a plain copy of the six input columns (the floor for a
   log that owns its columns: every value read and written once) and against
   ``np.unique(session, return_inverse=True)`` (the encoding step alone of a sort-based
   build), and timed on the same rows shuffled (sessions no longer grouped) against
   gathering the six columns in a random order (what reordering them costs at least).
2. **Rank marginals of a 16-product banner**: :func:`banner_rank_marginals` per banner, alone
   and batched (64 banners), against enumerating every ordering (Eq. 2) for 8 products, the
   largest size enumeration handles in about a second.
3. **Logged DCG of a Plackett–Luce target**: ``--pl-sessions`` × ``--pl-feed`` impressions
   (100k by default), every session its own context, dense scores over ``--pl-items`` items,
   ``LogDiscount(cutoff=--pl-feed)``. Anchor in the same process: :func:`logged_dcg` of the
   deterministic target on the same scores. Timed: the Rao–Blackwellised Monte Carlo exposure
   (``rao_blackwell=True``, ``--pl-samples`` draws per context), with the approximation error
   the result reports next to its standard error; the exposure as sampled before
   (``method="auto"``, which samples 2,000 plain draws per context here) timed on
   ``--pl-probe`` contexts and scaled; and, on the sessions of those contexts, the exact
   estimate against the Rao–Blackwellised one in units of its reported error.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_dcg import best_time, peak_mib  # noqa: E402

from recpack_ope import LogDiscount  # noqa: E402
from recpack_ope.logged.banner_marginals import banner_rank_marginals, exact_marginals  # noqa: E402
from recpack_ope.logged.feed_log import FeedLog  # noqa: E402
from recpack_ope.logged.logged_dcg import logged_dcg  # noqa: E402
from recpack_ope.logged.policies import DeterministicRanker, PlackettLuceRanker  # noqa: E402
from recpack_ope.metrics import TopK  # noqa: E402


def make_columns(n_sessions: int, feed: int, n_contexts: int, n_items: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    context = rng.integers(0, n_contexts, n_sessions)
    # distinct items per feed (97·k < n_items for k < feed), arbitrary offsets per session
    items = (rng.integers(0, n_items, (n_sessions, 1)) + np.arange(feed) * 97) % n_items
    rank = np.tile(np.arange(1, feed + 1), n_sessions)
    propensity = (1 / np.log2(rank + 1)) * rng.uniform(0.2, 1.0, rank.size)
    reward = (rng.random(rank.size) < 0.05).astype(np.float64)
    target = TopK((rng.integers(0, n_items, (n_contexts, 1)) + np.arange(feed) * 89) % n_items)
    return dict(
        session=np.repeat(np.arange(n_sessions), feed),
        item=items.ravel(),
        rank=rank,
        reward=reward,
        context=np.repeat(context, feed),
        propensity=propensity,
    ), target


def python_loop(columns: dict, target: TopK, discount, n_sessions: int) -> float:
    """Eq. 10 written plainly: dict of target ranks per context, one pass over the rows."""
    ranks = {}
    total = 0.0
    for c, i, r, p in zip(
        columns["context"], columns["item"], columns["reward"], columns["propensity"], strict=True
    ):
        if r == 0:
            continue
        if c not in ranks:
            ranks[c] = {int(item): k + 1 for k, item in enumerate(target.items[c])}
        k = ranks[c].get(int(i))
        if k is not None and k <= discount.cutoff:
            total += r * (1 / np.log2(k + 1)) / p
    return total / n_sessions


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--feed", type=int, default=50)
    parser.add_argument("--contexts", type=int, default=20_000)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pl-sessions", type=int, default=10_000)
    parser.add_argument("--pl-feed", type=int, default=10)
    parser.add_argument("--pl-items", type=int, default=1000)
    parser.add_argument("--pl-samples", type=int, default=16)
    parser.add_argument("--pl-probe", type=int, default=40)
    parser.add_argument(
        "--skip", choices=["1", "2", "3"], nargs="*", default=[], help="sections to skip"
    )
    args = parser.parse_args()
    if "1" not in args.skip:
        logged_unbiased_dcg(args)
    if "2" not in args.skip:
        banners(args)
    if "3" not in args.skip:
        plackett_luce_target(args)


def logged_unbiased_dcg(args) -> None:

    columns, target = make_columns(args.sessions, args.feed, args.contexts, args.items)
    n_rows = columns["rank"].size
    discount = LogDiscount(cutoff=args.feed)
    print(
        f"1. unbiased DCG on {n_rows:,} impressions ({args.sessions:,} sessions × {args.feed}, "
        f"{args.contexts:,} contexts, {args.items:,} items)"
    )
    build = best_time(
        lambda: FeedLog.from_arrays(**columns, n_items=args.items, n_contexts=args.contexts),
        args.repeat,
    )
    log = FeedLog.from_arrays(**columns, n_items=args.items, n_contexts=args.contexts)
    ranker = DeterministicRanker(target)
    estimate = best_time(lambda: logged_dcg(log, ranker, discount=discount), args.repeat)
    floor = best_time(lambda: np.bincount(log.session, weights=log.reward).mean(), args.repeat)
    value = logged_dcg(log, ranker, discount=discount).value

    sub = max(1, args.sessions // 100)
    part = {k: v[: sub * args.feed] for k, v in columns.items()}
    start = time.perf_counter()
    loop_value = python_loop(part, target, discount, sub)
    loop = (time.perf_counter() - start) * args.sessions / sub
    check = logged_dcg(
        FeedLog.from_arrays(**part, n_items=args.items, n_contexts=args.contexts),
        ranker,
        discount=discount,
    ).value
    assert abs(check - loop_value) < 1e-9 * max(1.0, abs(loop_value)), (check, loop_value)

    copy = best_time(lambda: [np.array(v, copy=True) for v in columns.values()], args.repeat)
    encode = best_time(lambda: np.unique(columns["session"], return_inverse=True), args.repeat)
    shuffle = np.random.default_rng(1).permutation(n_rows)
    shuffled = {k: v[shuffle] for k, v in columns.items()}
    unsorted = best_time(
        lambda: FeedLog.from_arrays(**shuffled, n_items=args.items, n_contexts=args.contexts),
        args.repeat,
    )
    print(
        f"   building the FeedLog:   {build:7.2f} s  ({n_rows / build / 1e6:.1f} M rows/s; "
        f"{build / copy:.1f}× a plain copy of the columns ({copy:.3f} s), "
        f"{build / encode:.2f}× np.unique(session, return_inverse=True) ({encode:.3f} s))"
    )
    reorder = best_time(lambda: [v[shuffle] for v in columns.values()], args.repeat)
    print(
        f"   ... rows shuffled:      {unsorted:7.2f} s  ({n_rows / unsorted / 1e6:.1f} M rows/s; "
        f"{unsorted / reorder:.1f}× gathering the six columns in a random order ({reorder:.3f} s), "
        "the floor of putting them back in order)"
    )
    print(
        f"   logged_dcg:             {estimate:7.2f} s  ({n_rows / estimate / 1e6:.1f} M "
        "impressions/s "
        f"on one core; value {value:.4f})"
    )
    print(
        f"   anchor np.bincount:     {floor:7.3f} s  → logged_dcg is {estimate / floor:.0f}× the "
        "floor"
    )
    print(
        f"   anchor Python loop:     {loop:7.1f} s (scaled from 1 %) → {loop / estimate:.0f}× "
        f"slower than logged_dcg (equal on the 1 %: {check:.6f})"
    )

    def build_and_estimate():
        log = FeedLog.from_arrays(**columns, n_items=args.items, n_contexts=args.contexts)
        return logged_dcg(log, ranker, discount=discount)

    print(
        f"   peak memory, build + estimate: {peak_mib(build_and_estimate):.0f} MiB "
        f"(input columns {sum(v.nbytes for v in columns.values()) / 2**20:.0f} MiB)"
    )


def banners(args) -> None:
    print("\n2. rank marginals of a Plackett–Luce banner given its displayed set (Gilotte App. A)")
    rng = np.random.default_rng(1)
    w16 = rng.lognormal(0, 1, 16)
    single = best_time(lambda: banner_rank_marginals(w16, 2.0), args.repeat)
    batch = rng.lognormal(0, 1, (64, 16))
    batched = best_time(lambda: exact_marginals(batch, np.full(64, 2.0)), args.repeat) / 64
    w8 = rng.lognormal(0, 1, 8)
    dp8 = best_time(lambda: banner_rank_marginals(w8, 2.0), args.repeat)

    def enumerate8():
        total = w8.sum() + 2.0
        joint = np.zeros((8, 8))
        for order in itertools.permutations(range(8)):
            w = w8[list(order)]
            joint[np.arange(8), list(order)] += np.prod(
                w / (total - np.concatenate([[0.0], np.cumsum(w)[:-1]]))
            )
        return joint / joint[0].sum()

    start = time.perf_counter()
    brute = enumerate8()
    enum8 = time.perf_counter() - start
    assert np.abs(brute - banner_rank_marginals(w8, 2.0)).max() < 1e-12
    print(f"   n = 16, one banner:     {1e3 * single:7.1f} ms")
    print(f"   n = 16, batch of 64:    {1e3 * batched:7.1f} ms per banner")
    print(
        f"   n = 8: programme {1e3 * dp8:.2f} ms vs enumerating 8! orderings {enum8:.2f} s "
        f"({enum8 / dp8:.0f}×); 16! orderings would take "
        f"~{enum8 * 16 * 15 * 14 * 13 * 12 * 11 * 10 * 9 / 86400 / 365:.0f} years"
    )


def plackett_luce_target(args) -> None:
    n_sessions, feed, n_items = args.pl_sessions, args.pl_feed, args.pl_items
    rng = np.random.default_rng(2)
    items = (rng.integers(0, n_items, (n_sessions, 1)) + np.arange(feed) * 97) % n_items
    rank = np.tile(np.arange(1, feed + 1), n_sessions)
    columns = dict(
        session=np.repeat(np.arange(n_sessions), feed),
        item=items.ravel(),
        rank=rank,
        reward=(rng.random(rank.size) < 0.05).astype(np.float64),
        propensity=(1 / np.log2(rank + 1)) * rng.uniform(0.2, 1.0, rank.size),
    )
    log = FeedLog.from_arrays(**columns, n_items=n_items)
    scores = rng.normal(size=(n_sessions, n_items))
    discount = LogDiscount(cutoff=feed)
    active = np.unique(log.context[log.reward > 0])
    print(
        f"\n3. logged DCG of a Plackett–Luce target: {log.n_rows:,} impressions ({n_sessions:,} "
        "sessions × "
        f"{feed}, one context each, {active.size:,} with a reward), {n_items:,} items, cutoff "
        f"{feed}"
    )
    deterministic = best_time(
        lambda: logged_dcg(log, DeterministicRanker(scores), discount=discount), args.repeat
    )
    target = PlackettLuceRanker(
        scores, method="monte_carlo", rao_blackwell=True, n_samples=args.pl_samples
    )
    sampled = best_time(lambda: logged_dcg(log, target, discount=discount), args.repeat)
    result = logged_dcg(log, target, discount=discount)
    print(f"   deterministic target:   {deterministic:7.3f} s  (anchor)")
    print(
        f"   Rao–Blackwellised, {args.pl_samples} draws per context: {sampled:.3f} s = "
        f"{sampled / deterministic:.1f}× the deterministic target; value {result.value:.6f}, "
        "standard error "
        f"{result.standard_error:.2e}, approximation error {result.approximation_error:.2e} "
        f"({result.approximation_error / result.standard_error:.1e} of the standard error)"
    )

    probe = active[: args.pl_probe]
    rows = np.flatnonzero(np.isin(log.context, probe) & (log.reward > 0))
    start = time.perf_counter()  # what method="auto" does beyond 100 contexts
    PlackettLuceRanker(scores, method="monte_carlo").exposure(log, discount, rows)
    before = (time.perf_counter() - start) * active.size / probe.size
    print(
        f"   as sampled before (method='auto': 2,000 plain draws per context): ~{before:.0f} s "
        "(scaled from "
        f"{probe.size} contexts) = {before / deterministic:.0f}× the deterministic target"
    )

    sub = np.flatnonzero(np.isin(columns["session"], probe))
    small = FeedLog.from_arrays(**{k: v[sub] for k, v in columns.items()}, n_items=n_items)
    small_scores = scores[small.session_labels]
    exact = logged_dcg(
        small, PlackettLuceRanker(small_scores, method="exact"), discount=discount
    ).value
    check = logged_dcg(
        small,
        PlackettLuceRanker(
            small_scores, method="monte_carlo", rao_blackwell=True, n_samples=args.pl_samples
        ),
        discount=discount,
    )
    print(
        f"   on those {probe.size} sessions: exact {exact:.8f}, Rao–Blackwellised "
        f"{check.value:.8f}, "
        f"difference {(check.value - exact) / check.approximation_error:+.2f}× its reported "
        "approximation error"
    )


if __name__ == "__main__":
    main()
