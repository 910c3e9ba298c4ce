"""Evaluation time of our PropensityStratifiedEvaluation against Cornac's ``ranking_eval``.

    python bench/bench_cornac_eval.py [--dataset ml-100k|synthetic] [--repeats 3]

Same split, same fitted BPR (10 factors), same metrics (nDCG over the whole ranking and
Recall@10), measured in the same process:

* anchor: Cornac's ``ranking_eval`` on the test set, once per metric (Cornac ranks only up to
  the largest positive k when metrics are mixed, which would cut nDCG's ranking short);
* ours: the full stratified evaluation, i.e. Closed, IPS, two strata and the Stratified
  value for both metrics, which Cornac's own ``PropensityStratifiedEvaluation`` would compute
  with four ``ranking_eval`` passes (Closed, IPS, Q1, Q2).

``synthetic`` is MovieLens-1M sized (6,040 users × 3,706 items, 1M ratings, popularity-skewed)
for machines without the ML-1M download. Times are the best of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_dcg import best_time  # run as a script: bench/ is on sys.path
from cornac.eval_methods.base_method import ranking_eval
from cornac.metrics import NDCG, Recall
from cornac.models import BPR
from recpack_ope.adapters.cornac import PropensityStratifiedEvaluation

from recpack_ope.studies.simpsons_paradox import load_triplets


def synthetic_triplets(seed: int = 0) -> list[tuple[str, str, float]]:
    """ML-1M-sized ratings with Zipf-like item popularity."""
    rng = np.random.default_rng(seed)
    n_users, n_items, n = 6040, 3706, 1_000_000
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.9
    items = rng.choice(n_items, size=n, p=popularity / popularity.sum())
    users = rng.integers(0, n_users, size=n)
    pairs = np.unique(np.column_stack([users, items]), axis=0)
    ratings = rng.integers(1, 6, size=len(pairs)).astype(float)
    return [
        (f"u{u}", f"i{i}", r) for (u, i), r in zip(pairs.tolist(), ratings.tolist(), strict=True)
    ]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("ml-100k", "synthetic"), default="ml-100k")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    data = load_triplets("ml-100k") if args.dataset == "ml-100k" else synthetic_triplets()
    method = PropensityStratifiedEvaluation(data, rating_threshold=4.0, seed=123)
    model = BPR(k=10, seed=123, verbose=False).fit(method.train_set)
    model.fit = lambda *a, **k: model  # evaluate() refits; keep the same model for both sides
    metrics = [NDCG(), Recall(k=10)]

    def cornac_once():
        for metric in metrics:
            ranking_eval(model, [metric], method.train_set, method.test_set, rating_threshold=4.0)

    anchor = best_time(cornac_once, args.repeats)
    ours = best_time(lambda: method.evaluate(model, metrics, user_based=True), args.repeats)
    users = len(set(method.test_set.uir_tuple[0]))
    print(f"{args.dataset}: {users} test users × {method.n_items_} items, BPR(k=10)")
    print(f"Cornac ranking_eval, Closed only:            {anchor:7.2f} s  (anchor)")
    print(
        f"ours, Closed + IPS + 2 strata + Stratified:  {ours:7.2f} s  = "
        f"{ours / anchor:.2f}× the anchor, {ours / (4 * anchor):.2f}× Cornac's four passes"
    )
    return {"anchor": anchor, "ours": ours}


if __name__ == "__main__":
    main()
