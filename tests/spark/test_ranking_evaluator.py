"""Binary nDCG@K on Spark against Spark's own ``RankingEvaluator(metricName="ndcgAtK")``.

Spark (``mllib.evaluation.RankingMetrics.ndcgAt``, binary case) scores a row by
``Σ_{i < min(|pred|, K)} [pred_i ∈ labels] / ln(i + 2)`` over the ideal
``Σ_{i < min(|labels|, K)} 1 / ln(i + 2)`` (the base of the logarithm cancels), 0 for a row
with no labels, and averages over every row. Ours averages ``DCG_u / iDCG_u`` over the users
with a positive reward and counts the others as excluded. So the two coincide on the users
with a relevant item once the prediction array lists the items in our order (score
descending, ties to the lower item id), and Spark's mean over all rows is ours × |U| /
(|U| + rows without labels).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pyspark.ml.evaluation import RankingEvaluator

from recpack_ope import LogDiscount
from recpack_ope.spark import evaluate

ARRAYS = "prediction array<double>, label array<double>"


def ours(spark, held: pd.DataFrame, recs: pd.DataFrame, k: int):
    held_df = spark.createDataFrame(
        held.astype({"user": "int64", "item": "int64", "reward": "float64"})
    )
    recs_df = spark.createDataFrame(
        recs.astype({"user": "int64", "item": "int64", "score": "float64"}),
        "user bigint, item bigint, score double",
    )
    return evaluate(held_df, recs_df, metrics=("ndcg",), discount=LogDiscount(k), n_partitions=16)[
        "model"
    ]["ndcg"]


def spark_ndcg(spark, rows: list, k: int) -> float:
    """RankingEvaluator's nDCG@k of (prediction array, label array) rows."""
    frame = spark.createDataFrame(
        [([float(p) for p in pred], [float(x) for x in lab]) for pred, lab in rows], ARRAYS
    )
    return RankingEvaluator(metricName="ndcgAtK", k=k).evaluate(frame)


def arrays(held: pd.DataFrame, recs: pd.DataFrame, users, tie_to_lower: bool = True) -> list:
    """Per user: items by score descending (ties to the lower or the higher id), and the
    items with a positive reward."""
    rows = []
    for user in users:
        mine = recs[recs.user == user]
        order = np.lexsort(
            (mine.item.to_numpy() * (1 if tie_to_lower else -1), -mine.score.to_numpy())
        )
        labels = held[(held.user == user) & (held.reward > 0)].item.tolist()
        rows.append((mine.item.to_numpy()[order].tolist(), labels))
    return rows


def random_frames(seed: int = 7, n_users: int = 300, n_items: int = 60, n_zero: int = 40):
    """Held-out binary rewards and tied scores; the last ``n_zero`` users have only zero rewards."""
    rng = np.random.default_rng(seed)
    held, recs = [], []
    for user in range(n_users):
        n_held = int(rng.integers(1, 26))
        items = rng.choice(n_items, n_held, replace=False)
        reward = (rng.random(n_held) < 0.7).astype(float)
        if user >= n_users - n_zero:
            reward[:] = 0.0
        else:
            reward[0] = 1.0
        held += [(user, int(i), r) for i, r in zip(items, reward, strict=True)]
        n_pred = 0 if user % 10 == 0 else int(rng.integers(1, 31))
        # Five score levels: most users have ties inside their top K.
        recs += [
            (user, int(i), float(rng.integers(0, 5)))
            for i in rng.choice(n_items, n_pred, replace=False)
        ]
    return (
        pd.DataFrame(held, columns=["user", "item", "reward"]),
        pd.DataFrame(recs, columns=["user", "item", "score"]),
    )


def test_binary_ndcg_equals_ranking_evaluator(spark):
    k, n_zero = 10, 40
    held, recs = random_frames(n_zero=n_zero)
    n_relevant = held[held.reward > 0].groupby("user").size()
    n_pred = recs.groupby("user").size().reindex(range(300), fill_value=0)
    # The cases where the definitions could part: more relevant items than K, no predictions,
    # fewer and more predictions than K.
    assert (n_relevant > k).sum() > 20 and (n_pred == 0).sum() == 30
    assert ((n_pred > 0) & (n_pred < k)).sum() > 20 and (n_pred > k).sum() > 100

    estimate = ours(spark, held, recs, k)
    evaluated = n_relevant.index.to_numpy()
    assert (
        estimate.n_users == evaluated.size == 300 - n_zero and estimate.n_excluded_users == n_zero
    )
    spark_value = spark_ndcg(spark, arrays(held, recs, evaluated), k)
    assert estimate.value == pytest.approx(spark_value, abs=1e-12)

    # Spark averages over every row: rows without labels count as 0.
    every = spark_ndcg(spark, arrays(held, recs, range(300)), k)
    assert every == pytest.approx(estimate.value * (300 - n_zero) / 300, abs=1e-12)

    # Ties matter here: broken the other way, Spark's value moves far beyond the tolerance.
    flipped = spark_ndcg(spark, arrays(held, recs, evaluated, tie_to_lower=False), k)
    assert abs(flipped - spark_value) > 1e-5


def test_differences_on_a_hand_case(spark):
    k = 3
    held = pd.DataFrame(
        [
            (1, 10, 1.0),
            (2, 20, 0.0),
            (3, 30, 1.0),
            (3, 31, 1.0),
            (3, 32, 1.0),
            (3, 33, 1.0),
            (4, 50, 1.0),
        ],
        columns=["user", "item", "reward"],
    )
    recs = pd.DataFrame(
        [
            (1, 12, 0.5),
            (1, 10, 0.5),
            (2, 20, 1.0),
            (3, 30, 3.0),
            (3, 40, 2.0),
            (3, 31, 1.0),
            (3, 32, 0.5),
        ],
        columns=["user", "item", "score"],
    )
    # user 1: the tie puts item 10 first → 1; listed as [12, 10] (the insertion order) it is
    # at rank 2 → 1/log2(3). user 2: no positive reward. user 3: 4 relevant > K = 3, hits at
    # ranks 1 and 3 (32 is at rank 4, past K) → 1.5 / (1 + 1/log2(3) + 1/2). user 4: nothing
    # recommended → 0.
    user3 = 1.5 / (1.5 + 1 / math.log2(3))
    estimate = ours(spark, held, recs, k)
    assert estimate.value == pytest.approx((1 + user3 + 0) / 3, abs=1e-12)
    assert (estimate.n_users, estimate.n_excluded_users) == (3, 1)

    ordered = spark_ndcg(spark, arrays(held, recs, [1, 2, 3, 4]), k)
    assert ordered == pytest.approx((1 + 0 + user3 + 0) / 4, abs=1e-12)
    as_listed = spark_ndcg(
        spark, [([12, 10], [10]), ([20], []), ([30, 40, 31, 32], [30, 31, 32, 33]), ([], [50])], k
    )
    assert as_listed == pytest.approx((1 / math.log2(3) + 0 + user3 + 0) / 4, abs=1e-12)


def test_duplicate_recommendations(spark):
    """Spark counts an item listed twice twice (nDCG above 1); ours refuses the repeated pair."""
    assert spark_ndcg(spark, [([7, 7], [7])], 2) == pytest.approx(1 + 1 / math.log2(3), abs=1e-12)
    held = pd.DataFrame([(1, 7, 1.0)], columns=["user", "item", "reward"])
    recs = pd.DataFrame([(1, 7, 0.9), (1, 7, 0.8)], columns=["user", "item", "score"])
    with pytest.raises(ValueError, match=r"recommendations of 'model' has the \(user, item\) pair"):
        ours(spark, held, recs, 2)
