"""Off-policy evaluation on a feed log: learn the position bias, estimate two target rankers'
online reward with unbiased DCG (Jeunen et al. Eq. 10), and test the difference one-sided.

    python examples/logged_feedback.py [--users 5000] [--items 300] [--feed 20]

The simulator knows the truth: its examination curve is ``1/log2(r+1)`` and its online reward
of any ranking is exact, so every offline number is printed next to what it estimates.
"""

from __future__ import annotations

import argparse

import numpy as np

from recpack_ope import LogDiscount, logged_dcg
from recpack_ope.logged import DeterministicRanker, PlackettLuceRanker, PositionBiasEM
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--feed", type=int, default=20)
    args = parser.parse_args(argv)

    world = SimulatedWorld(n_users=args.users, n_items=args.items, seed=0)
    policy = PopularityPolicy(temperature=1.0)
    # Three feeds per user: the same (user, item) pairs reappear at other ranks.
    log = world.log(policy, feed_length=args.feed, n_feeds=3, seed=1).feed_log()
    print(
        f"{log.n_rows:,} impressions in {log.n_sessions:,} sessions, {int(log.reward.sum()):,} "
        "clicks"
    )

    truth = LogDiscount().weights(args.feed)
    em = PositionBiasEM(relevance="item").fit(log)
    learnt = em.discount_
    print(f"EM position bias after {em.n_iter_} iterations (rank: learnt / true):")
    print(
        "  "
        + "  ".join(
            f"{r + 1}: {v:.2f}/{t:.2f}"
            for r, (v, t) in enumerate(zip(learnt.values, truth, strict=True))
            if r < 8
        )
    )

    rng = np.random.default_rng(2)
    logits = np.log(world.relevance()) - np.log1p(-world.relevance())
    targets = {
        "sharp": logits + rng.normal(0, 0.5, logits.shape),
        "blurred": logits + rng.normal(0, 2.0, logits.shape),
    }
    logging = PlackettLuceRanker(np.log(policy.weights(world)))  # the logging policy, exactly
    out = {"em_max_error": float(np.abs(learnt.values - truth).max())}
    for label, view in (("true curve", LogDiscount(cutoff=args.feed)), ("learnt curve", learnt)):
        discount = view.with_cutoff(10)  # the targets show 10 items; the logged feeds were longer
        print(f"\nlogged DCG@10 with the {label} (m = ∞ and m = 100) vs exact online reward:")
        results = {}
        for name, scores in targets.items():
            online = world.online_reward(scores, LogDiscount(cutoff=10)).value
            est = logged_dcg(
                log,
                DeterministicRanker(scores),
                discount=discount,
                logging=logging,
                logging_discount=view,
            )
            clipped = logged_dcg(
                log,
                DeterministicRanker(scores),
                discount=discount,
                logging=logging,
                logging_discount=view,
                clip=100,
            )
            lo, hi = est.confidence_interval()
            print(
                f"  {name:8s} {est.value:.4f} [{lo:.4f}, {hi:.4f}]  clipped {clipped.value:.4f}  "
                f"online {online:.4f}"
            )
            results[name] = {"estimate": est.value, "online": online, "se": est.standard_error}
            results[name + " estimate"] = est
        comparison = results.pop("sharp estimate").compare(results.pop("blurred estimate"))
        print(
            f"  sharp − blurred: {comparison.difference:.4f}, one-sided p = "
            f"{comparison.p_value_greater:.2g}"
        )
        out[label] = dict(results, p_value_greater=comparison.p_value_greater)
    return out


if __name__ == "__main__":
    main()
