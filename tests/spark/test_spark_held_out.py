"""``recpack_ope.spark.held_out``: :func:`evaluate` and :func:`per_user`.

* They equal the in-memory path: value to 1e-12 relative, interval bounds and p-values to
  1e-9, with ties, users without positive rewards, clipping and 16 partitions.
* Bad input raises a ValueError that names the column and shows an example row, found in
  Spark (the schema on the driver, rows inside the partitions), never a silent number.
* Binary nDCG@K equals Spark's own ``RankingEvaluator(metricName="ndcgAtK")``.

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
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from pyspark.ml.evaluation import RankingEvaluator

import recpack_ope as ro
from recpack_ope import spark as rs
from recpack_ope.registry import estimator, names

#: The discount of the equality tests (that of the ``core`` oracle, conftest.py).
D = ro.LogDiscount(5)
#: The discount of the bad-input tests on the ``frames`` fixture (hand values are DCG@3).
D3 = ro.LogDiscount(3)


# --- equal to the in-memory path ---------------------------------------------------------

#: Every held-out estimator of the registry that Spark computes: all but the doubly robust
#: (a reward model) and the stratified one (``rs.stratified``).
ON_SPARK = tuple(
    n for n in names("held_out") if estimator(n).weighting not in ("doubly_robust", "stratified")
)


def test_spark_computes_every_held_out_estimator_but_dr_and_stratified():
    assert ON_SPARK == (
        "dcg",
        "ndcg",
        "pn_dcg",
        "recall",
        "ips_dcg",
        "snips_dcg",
        "ips_ndcg",
        "ips_pn_dcg",
        "ips_recall",
    )


@pytest.mark.parametrize("clip", [None, 8.0])
def test_every_held_out_estimator_and_comparison_equals_in_memory(world, clip, same, close, core):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"],
            world["frames"],
            metrics=ON_SPARK,
            discount=D,
            propensity=world["p_frame"],
            clip=clip,
            n_partitions=16,
        )
    references = {}
    for model, y_score in world["scores"].items():
        for metric in ON_SPARK:
            # Plain estimators ignore the propensities given for the weighted ones.
            references[model, metric] = core(metric, world["y_true"], y_score, world["p"], clip)
            same(result[model][metric], references[model, metric])
            assert result[model][metric].n_excluded_users == world["zero_users"] > 0
    for metric in ON_SPARK:
        ours = result.compare("m0", "m2", metric, level=0.9)
        theirs = references["m0", metric].compare(references["m2", metric], 0.9, names=("m0", "m2"))
        assert ours.name == theirs.name
        close(ours.difference, theirs.difference, 1e-12)
        close(ours.p_value, theirs.p_value, 1e-9)
        for a, b in zip(ours.confidence_interval, theirs.confidence_interval, strict=True):
            close(a, b, 1e-9)
    # The leaderboard, its columns named as the estimates print: the in-memory one's values,
    # best and corrected pairwise p-values.
    board = result.leaderboard(level=0.9)
    memory = ro.leaderboard(
        {m: {references[m, k].name: references[m, k] for k in ON_SPARK} for m in world["scores"]},
        level=0.9,
    )
    assert board.metrics == memory.metrics
    assert any(m.startswith("IPS-DCG@5") for m in board.metrics)
    for ours, theirs in zip(board.standings, memory.standings, strict=True):
        assert ours.best == theirs.best
        np.testing.assert_allclose(ours.value, theirs.value, rtol=1e-12)
        np.testing.assert_allclose(ours.p_value, theirs.p_value, rtol=1e-9, atol=1e-12)


def test_single_frame_and_per_user_frame(world, same, core):
    one = rs.evaluate(
        world["held"], world["frames"]["m1"], metrics="pn_dcg", discount=D, n_partitions=16
    )
    reference = core("pn_dcg", world["y_true"], world["scores"]["m1"], None, None)
    assert list(one.estimates) == ["model"]
    same(one["model"]["pn_dcg"], reference)
    frame = rs.per_user(
        world["held"],
        world["frames"]["m1"],
        metrics=("pn_dcg", "ndcg"),
        discount=D,
        n_partitions=16,
    )
    table = frame.toPandas().sort_values("user")
    ndcg = core("ndcg", world["y_true"], world["scores"]["m1"], None, None)
    np.testing.assert_allclose(table["ndcg"], ndcg.terms[:, 0], rtol=1e-12)
    np.testing.assert_allclose(table[["pn_dcg_dcg", "pn_dcg_idcg"]], reference.terms, rtol=1e-12)
    assert set(table["model"]) == {"model"}


def test_plain_names_stay_plain_when_propensities_are_given(world, same, core):
    """``ndcg`` with ``propensity=`` is the plain nDCG (no weights, no diagnostics), in the
    estimates and the per-user frame; ``ips_ndcg`` is the weighted one (as a stratified base:
    test_spark_stratified.py)."""
    y_true, y_score = world["y_true"], world["scores"]["m0"]
    options = {"discount": D, "propensity": world["p_frame"], "n_partitions": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"], world["frames"]["m0"], metrics=("ndcg", "ips_ndcg"), **options
        )["model"]
        table = rs.per_user(
            world["held"], world["frames"]["m0"], metrics=("recall", "pn_dcg"), **options
        ).toPandas()
    plain = core("ndcg", y_true, y_score, None, None)
    same(result["ndcg"], plain)
    assert result["ndcg"].diagnostics is None
    same(result["ips_ndcg"], core("ips_ndcg", y_true, y_score, world["p"], None))
    assert result["ips_ndcg"].value != pytest.approx(plain.value, rel=1e-6)
    table = table.sort_values("user")
    pn = core("pn_dcg", y_true, y_score, None, None)
    np.testing.assert_allclose(table[["pn_dcg_dcg", "pn_dcg_idcg"]], pn.terms, rtol=1e-12)
    recall = core("recall", y_true, y_score, None, None)
    np.testing.assert_allclose(table["recall"], recall.terms[:, 0], rtol=1e-12)


# --- bad input ---------------------------------------------------------------------------


def run(held, recs, **options):
    """:func:`rs.evaluate` on 4 partitions, with ``D3`` unless told."""
    options.setdefault("discount", D3)
    return rs.evaluate(held, recs, n_partitions=4, **options)


def test_valid_input_gives_the_hand_computed_dcg(frames):
    make = frames["make"]
    # user 1: item 10 (reward 1) at rank 1 → 1; user 2: item 10 unranked → 0;
    # user 3: item 12 (reward 1) at rank 1 → 1. DCG@3 = 2/3.
    est = run(make(frames["held"]), make(frames["recs"]), metrics="dcg")["model"]["dcg"]
    assert est.value == pytest.approx(2 / 3, rel=1e-15)
    assert est.n_users == 3 and est.n_excluded_users == 0


@pytest.mark.parametrize(
    "frame, column", [("held", "reward"), ("held", "user"), ("recs", "score"), ("recs", "item")]
)
def test_missing_column_is_named(frames, frame, column):
    spark_frames = {k: frames["make"](frames[k]) for k in ("held", "recs")}
    spark_frames[frame] = spark_frames[frame].drop(column)
    with pytest.raises(ValueError, match=f"no column '{column}'|needs exactly one of the columns"):
        run(spark_frames["held"], spark_frames["recs"])


def test_misnamed_rank_and_score_both_present(frames):
    recs = frames["make"](frames["recs"].assign(rank=1))
    with pytest.raises(ValueError, match="exactly one of the columns 'score'"):
        run(frames["make"](frames["held"]), recs)


def test_text_reward_is_refused_from_the_schema(frames):
    held = frames["spark"].createDataFrame(frames["held"].astype({"reward": str}))
    with pytest.raises(ValueError, match="held_out column 'reward' must be numeric, got string"):
        run(held, frames["make"](frames["recs"]))


def test_null_is_refused_naming_the_users_column_and_row(frames):
    """A frame not read from a file has no row index: the row shows its values only."""
    held = frames["make"](frames["held"], reward=(2, None))
    with pytest.raises(
        ValueError,
        match=r"^held_out has a null in column 'reward', e.g. row "
        r"\(user=2, item=10, reward=None\)$",
    ):
        run(held, frames["make"](frames["recs"]))
    recs = frames["make"](frames["recs"], score=(3, None))
    with pytest.raises(
        ValueError,
        match=r"^recommendations has a null in column 'score', e.g. row "
        r"\(user=3, item=12, score=None\)$",
    ):
        run(frames["make"](frames["held"]), recs)


def test_negative_reward_is_refused_with_its_row(frames):
    held = frames["make"](frames["held"], reward=(3, -1.0))
    with pytest.raises(
        ValueError,
        match=r"^held_out column 'reward' must hold finite rewards >= 0, got row "
        r"\(user=3, item=12, reward=-1.0\)$",
    ):
        run(held, frames["make"](frames["recs"]))


def test_duplicate_pairs_are_refused(frames):
    held = frames["spark"].createDataFrame(pd.concat([frames["held"], frames["held"].iloc[[2]]]))
    with pytest.raises(
        ValueError,
        match=r"^held_out has the \(user, item\) pair \(2, 10\) more than once, in row "
        r"\(user=2, item=10, reward=2.0\) and row \(user=2, item=10, reward=2.0\): one row per "
        r"\(user, item\)$",
    ):
        run(held, frames["make"](frames["recs"]))
    recs = frames["spark"].createDataFrame(pd.concat([frames["recs"], frames["recs"].iloc[[0]]]))
    with pytest.raises(
        ValueError,
        match=r"^recommendations has the \(user, item\) pair \(1, 10\) more than once",
    ):
        run(frames["make"](frames["held"]), recs)


def nan_at(frame, column: str, key: str, at):
    """``frame`` with NaN in ``column`` where ``key`` is ``at`` (pandas would make it a null)."""
    from pyspark.sql import functions as F

    return frame.withColumn(
        column,
        F.when(F.col(key) == at, F.lit(float("nan"))).otherwise(F.col(column).cast("double")),
    )


@pytest.mark.parametrize("value", [0.0, 1.5, float("nan")])
def test_propensity_outside_unit_interval_is_refused(frames, value):
    """NaN too is a propensity outside (0, 1], not a missing row."""
    prop = frames["make"](frames["prop"], propensity=(1, value))
    if value != value:
        prop = nan_at(frames["make"](frames["prop"]), "propensity", "item", 11)
    with pytest.raises(
        ValueError,
        match=rf"^propensity column 'propensity' must lie in \(0, 1\] for every held-out item, "
        rf"got row \(item=11, propensity={value}\) for held_out row "
        r"\(user=1, item=11, reward=0.0\)$",
    ):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="ips_dcg",
        )


def test_held_out_item_without_propensity_and_duplicate_propensity_rows(frames):
    """Refused whenever a propensity table is given, as in memory, even to plain metrics."""
    prop = frames["spark"].createDataFrame(frames["prop"].iloc[[0, 2]])
    with pytest.raises(
        ValueError,
        match=r"^propensity has no row for item 11 of held_out row \(user=1, item=11, "
        r"reward=0.0\): every held-out item needs a propensity$",
    ):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="dcg",
        )
    prop = frames["spark"].createDataFrame(pd.concat([frames["prop"], frames["prop"].iloc[[1]]]))
    with pytest.raises(
        ValueError,
        match=r"^propensity has item 11 more than once, in row \(item=11, propensity=0.2\) and "
        r"row \(item=11, propensity=0.2\): one row per item$",
    ):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="ips_ndcg",
        )


@pytest.mark.parametrize("population", ["observed", "all"])
def test_recommended_user_without_held_out_rows_is_a_user_without_rewards(frames, population):
    """User 9 has recommendations only: excluded over the observed users, a 0 over all of them
    (DCG@3 2/3 over users 1–3, test_valid_input_gives_the_hand_computed_dcg; (1 + 0 + 1 + 0)
    / 4 over all four users)."""
    recs = frames["spark"].createDataFrame(
        pd.concat([frames["recs"], pd.DataFrame({"user": [9], "item": [10], "score": [1.0]})])
    )
    result = run(frames["make"](frames["held"]), recs, metrics="dcg", population=population)
    est = result["model"]["dcg"]
    assert result.n_users_without_held_out == 1
    if population == "observed":
        assert est.value == pytest.approx(2 / 3, rel=1e-15)
        assert (est.n_users, est.n_excluded_users) == (3, 1)
    else:
        assert est.value == pytest.approx(2 / 4, rel=1e-15)
        assert (est.n_users, est.n_excluded_users) == (4, 0)


def test_integer_ids_of_any_width_and_whole_real_ids_compare_by_value(frames):
    """int user ids with bigint ones (scipy's int32 indices), and float ids that are whole
    numbers, are the same users: the hand-computed DCG@3 2/3 of
    test_valid_input_gives_the_hand_computed_dcg."""
    from pyspark.sql import functions as F

    held = frames["make"](frames["held"]).withColumn("user", F.col("user").cast("int"))
    recs = frames["make"](frames["recs"]).withColumn("item", F.col("item").cast("tinyint"))
    assert run(held, recs, metrics="dcg")["model"]["dcg"].value == pytest.approx(2 / 3, rel=1e-15)
    recs = recs.withColumn("user", F.col("user").cast("double"))
    assert run(held, recs, metrics="dcg")["model"]["dcg"].value == pytest.approx(2 / 3, rel=1e-15)


def test_ids_beyond_int64_compare_exactly(frames):
    """uint64 ids (Spark reads them from parquet as decimal(20,0)) keep every digit: users
    2**64 − 1 and 2**64 − 2 stay two users (through a float they would merge)."""
    from pyspark.sql import functions as F

    big = {1: str(2**64 - 1), 2: str(2**64 - 2), 3: "3"}
    held = frames["make"](frames["held"].assign(user=frames["held"]["user"].map(big)))
    recs = frames["make"](frames["recs"].assign(user=frames["recs"]["user"].map(big)))
    held = held.withColumn("user", F.col("user").cast("decimal(20,0)"))
    recs = recs.withColumn("user", F.col("user").cast("decimal(20,0)"))
    est = run(held, recs, metrics="dcg")["model"]["dcg"]
    assert est.value == pytest.approx(2 / 3, rel=1e-15) and est.n_users == 3


@pytest.mark.parametrize("bad", [float("nan"), 1.5, 2.0**60])
def test_real_ids_that_are_not_ids_are_refused(frames, bad):
    """NaN (which would be two users: NaN ≠ NaN), 1.5 and a float beyond 2**53 (maybe a
    rounded id) are refused naming the column and row."""
    recs = frames["make"](frames["recs"].astype({"user": float}), user=(2, bad))
    if bad != bad:
        recs = nan_at(frames["make"](frames["recs"]), "user", "item", 11)
    with pytest.raises(
        ValueError,
        match=r"^recommendations column 'user' must hold ids: integers, text, or whole real "
        r"numbers of size at most 2\*\*53 \(a float beyond it may hold a rounded id\), got row "
        rf"\(user={re.escape(repr(bad))}, item=11, score=1.0\)$",
    ):
        run(frames["make"](frames["held"]), recs)


@pytest.mark.parametrize("n, error", [(0, ValueError), (-1, ValueError), (True, TypeError)])
def test_n_partitions_must_be_positive(frames, n, error):
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    with pytest.raises(error, match=rf"^n_partitions must be a positive integer .*, got {n!r}$"):
        rs.evaluate(held, recs, discount=D3, n_partitions=n)


def test_id_types_must_agree_and_options_are_checked(frames):
    recs = frames["spark"].createDataFrame(frames["recs"].astype({"user": str}))
    with pytest.raises(
        ValueError,
        match=r"^column 'user' must hold one kind of id in every table, got integer ids in "
        r"held_out, text ids in recommendations$",
    ):
        run(frames["make"](frames["held"]), recs)
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    with pytest.raises(ValueError, match=r"ips_dcg needs propensity=.*'dcg'"):
        run(held, recs, metrics="ips_dcg")
    with pytest.raises(ValueError, match=r"unknown estimator 'ndcg@10'.*'ndcg'"):
        run(held, recs, metrics="ndcg@10")
    with pytest.raises(ValueError, match=r"twice.*'dcg', 'dcg'"):
        run(held, recs, metrics=("dcg", "dcg"))
    with pytest.raises(ValueError, match='clip="auto"'):
        run(held, recs, clip="auto")
    with pytest.raises(TypeError, match="held_out must be a Spark DataFrame"):
        run(frames["held"], recs)


@pytest.mark.parametrize(
    "name, plain",
    [
        ("ips_dcg", "dcg"),
        ("snips_dcg", "dcg"),
        ("ips_ndcg", "ndcg"),
        ("ips_pn_dcg", "pn_dcg"),
        ("ips_recall", "recall"),
    ],
)
def test_weighted_name_without_propensity_is_refused_naming_the_plain_one(frames, name, plain):
    """By evaluate and per_user (by stratified as a base: test_spark_stratified.py)."""
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    for call in (rs.evaluate, rs.per_user):
        with pytest.raises(ValueError, match=rf"{name} needs propensity=.*'{plain}'"):
            call(held, recs, metrics=("dcg", name), discount=D3)


def test_estimators_spark_does_not_compute_are_refused_with_what_to_use(frames):
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    prop = frames["make"](frames["prop"])
    with pytest.raises(ValueError, match=r"dr_dcg needs a reward model.*recpack_ope\.metrics"):
        run(held, recs, metrics="dr_dcg", propensity=prop)
    with pytest.raises(ValueError, match=r"stratified_ndcg.*spark\.stratified.*metric='ndcg'"):
        run(held, recs, metrics="stratified_ndcg", propensity=prop)
    with pytest.raises(ValueError, match=r"unknown estimator 'logged_dcg' on held-out data"):
        run(held, recs, metrics="logged_dcg")


def test_small_integer_columns_are_numeric(frames):
    from pyspark.sql import functions as F

    held = frames["make"](frames["held"]).withColumn("reward", F.col("reward").cast("tinyint"))
    recs = frames["make"](frames["recs"]).withColumn("score", F.col("score").cast("smallint"))
    est = run(held, recs, metrics="dcg")["model"]["dcg"]
    assert est.value == pytest.approx(
        2 / 3, rel=1e-15
    )  # as in test_valid_input_gives_the_hand_computed_dcg


# --- equal to Spark's RankingEvaluator ---------------------------------------------------

ARRAYS = "prediction array<double>, label array<double>"


def our_ndcg(spark, held: pd.DataFrame, recs: pd.DataFrame, k: int):
    """Our nDCG@k estimate of the pandas frames on Spark (16 partitions)."""
    held_df = spark.createDataFrame(
        held.astype({"user": "int64", "item": "int64", "reward": "float64"})
    )
    recs_df = spark.createDataFrame(
        recs.astype({"user": "int64", "item": "int64", "score": "float64"}),
        "user bigint, item bigint, score double",
    )
    return rs.evaluate(
        held_df, recs_df, metrics=("ndcg",), discount=ro.LogDiscount(k), n_partitions=16
    )["model"]["ndcg"]


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

    estimate = our_ndcg(spark, held, recs, k)
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
    estimate = our_ndcg(spark, held, recs, k)
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
    with pytest.raises(ValueError, match=r"recommendations has the \(user, item\) pair"):
        our_ndcg(spark, held, recs, 2)


# --- populations ----------------------------------------------------------------------------

#: The Spark estimators with a value over all users (the others divide by a per-user total).
OVER_ALL = ("dcg", "pn_dcg", "ips_dcg", "snips_dcg", "ips_pn_dcg")


def test_all_users_equal_in_memory_and_the_per_user_frame_keeps_them(world, same):
    options = {"discount": D, "propensity": world["p_frame"], "clip": 8.0, "n_partitions": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"], world["frames"], metrics=OVER_ALL, population="all", **options
        )
        table = rs.per_user(
            world["held"], world["frames"]["m0"], metrics=("ips_dcg",), population="all", **options
        ).toPandas()
        for model, y_score in world["scores"].items():
            for metric in OVER_ALL:
                reference = estimator(metric)(
                    world["y_true"],
                    y_score,
                    discount=D,
                    propensity=world["p"],
                    clip=8.0,
                    population="all",
                )
                assert reference.n_excluded_users == 0
                same(result[model][metric], reference)
    # Every user of the held-out frame has a row, those with only zero rewards at 0.
    n_users = world["y_true"].shape[0]
    assert len(table) == n_users
    assert (table.sort_values("user")["ips_dcg"].to_numpy()[: world["zero_users"]] == 0).all()


@pytest.mark.parametrize("n_partitions", [1, 8])
def test_all_users_by_hand_with_a_user_without_rewards(frames, n_partitions):
    make = frames["make"]
    # User 2's only reward set to 0: DCG@3 of users 1, 2, 3 is 1, 0, 1 (as in the hand case).
    # On 8 partitions Spark's hash of the ids puts user 2 alone in one: a chunk without
    # rewards, whose users still count over all users.
    held = make(frames["held"], reward=(2, 0.0))
    options = {"metrics": ("dcg", "pn_dcg"), "discount": D3, "n_partitions": n_partitions}
    every = rs.evaluate(held, make(frames["recs"]), population="all", **options)["model"]
    assert every["dcg"].value == pytest.approx(2 / 3, rel=1e-15)
    assert (every["dcg"].n_users, every["dcg"].n_excluded_users) == (3, 0)
    observed = rs.evaluate(held, make(frames["recs"]), **options)["model"]
    assert observed["dcg"].value == pytest.approx(1.0, rel=1e-15)
    assert observed["dcg"].n_excluded_users == 1
    assert every["pn_dcg"].value == pytest.approx(observed["pn_dcg"].value, rel=1e-15)


def test_populations_are_checked_before_any_spark_job(frames):
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    for call in (rs.evaluate, rs.per_user):
        with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'any'"):
            call(held, recs, metrics="dcg", discount=D3, population="any")
        with pytest.raises(ValueError, match="population 'all' .* but recall divides each"):
            call(held, recs, metrics=("dcg", "recall"), discount=D3, population="all")


def test_partition_checks_word_their_rows_as_in_memory():
    """A partition's own checks (the fallback when the driver finds no problem first) use the
    file engines' wording, with the row as the partition holds it."""
    from recpack_ope.evaluation.chunks import ChunkPlan
    from recpack_ope.spark._partitions import _text

    plan = ChunkPlan(("m",), ("ips_dcg",), D3, 3, None, True, 1.0, checked=True)
    chunk = {
        "user": np.array([1, 1]),
        "item": np.array([10, 10]),
        "value": np.array([-1.0, 2.0]),
        "value:null": np.array([False, False]),
        "source": np.array([-1, 0]),
        "propensity": np.array([np.nan, np.nan]),
    }
    held = chunk["source"] == -1

    def refusal() -> str:
        with pytest.raises(ValueError) as refused:
            plan._check(chunk, held, None)
        return _text(str(refused.value))

    assert refusal() == (
        "held_out column 'reward' must hold finite rewards >= 0, got (user=1, item=10)"
    )
    chunk["value"][0] = 1.0
    assert refusal() == (
        "propensity has no row for item 10 of held_out (user=1, item=10): every held-out item "
        "needs a propensity"
    )
    chunk["propensity"][0] = 1.5
    assert refusal() == (
        "propensity column 'propensity' must lie in (0, 1] for every held-out item, got "
        "(propensity=1.5) for held_out (user=1, item=10)"
    )
    chunk["value:null"][0] = True
    assert refusal() == "held_out has a null in column 'reward', e.g. (user=1, item=10)"


# --- held-out rewards all 0 ------------------------------------------------------------------


def core_refusal(metric: str, population: str) -> str:
    """The in-memory estimator's refusal of three users without rewards."""
    with pytest.raises(ValueError) as refused:
        estimator(metric)(
            np.zeros((3, 3)),
            np.ones((3, 3)),
            discount=D3,
            propensity=np.full(3, 0.5),
            population=population,
        )
    return str(refused.value)


@pytest.fixture(scope="module")
def no_rewards(frames):
    """The hand case with every held-out reward 0 (row 1's already is)."""
    return frames["make"](frames["held"], reward=([0, 2, 3], 0.0))


@pytest.mark.parametrize("n_partitions", [1, 4])
def test_dcg_over_all_users_without_rewards_is_exactly_zero(frames, no_rewards, n_partitions):
    # Σ c·w·δ over rewards c all 0: every user's term is 0, so the mean and its standard
    # error are 0 exactly.
    result = rs.evaluate(
        no_rewards,
        frames["make"](frames["recs"]),
        metrics=("dcg", "ips_dcg"),
        discount=D3,
        propensity=frames["make"](frames["prop"]),
        population="all",
        n_partitions=n_partitions,
    )["model"]
    for metric, name in (("dcg", "DCG@3"), ("ips_dcg", "IPS-DCG@3")):
        assert (result[metric].name, result[metric].value) == (name, 0.0)
        assert result[metric].standard_error == 0.0
        assert (result[metric].n_users, result[metric].n_excluded_users) == (3, 0)


@pytest.mark.parametrize(
    ("metrics", "population", "reason"),
    [
        (("dcg", "ndcg"), "observed", "y_true has no non-zero held-out rewards"),
        (("ndcg", "dcg"), "observed", "ndcg divides each user's DCG by a per-user total"),
        (("recall",), "observed", "recall divides each user's DCG"),
        (("dcg", "pn_dcg"), "all", r"pnDCG = mean DCG / mean ideal DCG is 0/0"),
        (("ips_dcg", "snips_dcg"), "all", r"SNIPS-DCG = IPS-DCG · N / Σ w"),
        (("ips_pn_dcg",), "all", r"IPS-pnDCG = mean DCG / mean ideal DCG is 0/0"),
    ],
)
def test_estimators_without_a_value_refuse_with_the_core_message(
    frames, no_rewards, metrics, population, reason
):
    # The first estimator without a value is refused, as in memory, with its message.
    first = next(m for m in metrics if m not in ("dcg", "ips_dcg") or population == "observed")
    with pytest.raises(ValueError, match=reason) as refused:
        rs.evaluate(
            no_rewards,
            frames["make"](frames["recs"]),
            metrics=metrics,
            discount=D3,
            propensity=frames["make"](frames["prop"]),
            population=population,
            n_partitions=4,
        )
    assert str(refused.value) == f"held_out: {core_refusal(first, population)}"


def test_stratified_and_win_rates_without_rewards_refuse_with_the_core_message(frames, no_rewards):
    recs = frames["make"](frames["recs"])
    with pytest.raises(ValueError, match="held_out: y_true has no non-zero held-out rewards: "):
        rs.stratified(no_rewards, recs, stratify_by=frames["make"](frames["prop"]), discount=D3)
    with pytest.raises(ValueError, match=r"held_out: y_true has no relevant \(> 0\) labels"):
        rs.win_rates(no_rewards, {"a": recs, "b": recs})


# --- sensitivity to wrong propensities --------------------------------------------------------

#: The Spark estimators whose sensitivity bounds merge across partitions.
BOUNDED = ("ips_dcg", "snips_dcg")


@pytest.mark.parametrize(
    ("clip", "population", "n_partitions"),
    [(None, "observed", 16), (8.0, "observed", 5), (3.0, "all", 16)],
)
def test_bounds_and_robustness_equal_in_memory(world, clip, population, n_partitions):
    """The merged weighting of ``ips_dcg`` and ``snips_dcg`` is the in-memory
    ``weighting.collapsed()`` item by item (the world's item ids are its column indices), so
    the bounds of every estimate and comparison match to 1e-9 and Γ* of the sign to 1e-6."""
    options = {"discount": D, "propensity": world["p_frame"], "clip": clip}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"],
            world["frames"],
            metrics=BOUNDED,
            population=population,
            n_partitions=n_partitions,
            **options,
        )
        options.update(propensity=world["p"], population=population)
        core = {
            (model, metric): estimator(metric)(world["y_true"], y_score, **options)
            for model, y_score in world["scores"].items()
            for metric in BOUNDED
        }
    for key, reference in core.items():
        ours = result[key[0]][key[1]]
        collapsed = reference.weighting.collapsed()
        for part in ("numerator", "denominator"):
            theirs = getattr(collapsed, part)
            if theirs is None:
                assert getattr(ours.weighting, part) is None
                continue
            mine = getattr(ours.weighting, part)
            # Every unit the in-memory estimate uses, with its item id, coefficient and 1/p̂.
            np.testing.assert_array_equal(
                ours.weighting.raw[mine.unit], 1 / world["p"][theirs.unit]
            )
            np.testing.assert_allclose(mine.coef, theirs.coef, rtol=1e-12)
        if collapsed.fixed is None:
            assert ours.weighting.fixed is None
        else:
            np.testing.assert_allclose(ours.weighting.fixed, collapsed.fixed, rtol=1e-12)
        for gamma in (1.0, 1.5, 2.0, 7.0):
            got, want = ours.sensitivity(gamma), reference.sensitivity(gamma)
            assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-9)
            assert got.exact and got.estimate == pytest.approx(reference.value, rel=1e-12)
    stars = []
    for metric in BOUNDED:
        for a, b in (("m0", "m1"), ("m0", "m2"), ("m2", "m1")):
            ours = result.compare(a, b, metric)
            theirs = core[a, metric].compare(core[b, metric], names=(a, b))
            for gamma in (1.25, 2.0, 5.0):
                got, want = ours.sensitivity(gamma), theirs.sensitivity(gamma)
                assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-9)
            stars.append(theirs.robustness())
            assert ours.robustness() == pytest.approx(stars[-1], rel=1e-6)
            assert f"survives propensities off by up to ×{theirs.robustness():.3g}" in repr(ours)
    # Some verdicts flip within the searched range: Γ* is located, not only 1 or ∞.
    assert any(1 < star < math.inf for star in stars), stars


def test_table_carries_the_bounds_and_the_robustness_to_the_best(world):
    metrics = ("dcg", "ips_dcg", "snips_dcg", "ips_ndcg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"],
            world["frames"],
            metrics=metrics,
            discount=D,
            propensity=world["p_frame"],
            clip=8.0,
            n_partitions=16,
        )
        core = {
            (model, metric): estimator(metric)(
                world["y_true"], y_score, discount=D, propensity=world["p"], clip=8.0
            )
            for model, y_score in world["scores"].items()
            for metric in BOUNDED
        }
    rows = result.table()
    assert len(rows) == 3 * len(metrics)
    for row in rows:
        if row["metric"] not in BOUNDED:
            assert not {"sens_low", "sens_high", "robust_gamma"} & set(row), row["metric"]
            continue
        reference = core[row["model"], row["metric"]]
        bounds = reference.sensitivity(2.0)
        assert (row["sens_low"], row["sens_high"]) == pytest.approx(
            (bounds.low, bounds.high), rel=1e-9
        )
        best = max(world["scores"], key=lambda m: core[m, row["metric"]].value)
        if row["model"] == best:
            assert "robust_gamma" not in row
        else:
            star = core[best, row["metric"]].compare(reference).robustness()
            assert row["robust_gamma"] == pytest.approx(star, rel=1e-6)
        assert "robust_gamma_95" not in row  # the significance needs the in-memory path


def test_what_spark_cannot_bound_is_refused_with_what_to_use(world, frames, spark):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"],
            world["frames"],
            metrics=("dcg", "ips_dcg", "ips_ndcg", "ips_pn_dcg", "ips_recall"),
            discount=D,
            propensity=world["p_frame"],
            n_partitions=4,
        )
    estimate, comparison = result["m0"]["ips_dcg"], result.compare("m0", "m1", "ips_dcg")
    for call in (
        lambda: estimate.sensitivity(2.0, level=0.95),
        lambda: comparison.sensitivity(2.0, level=0.95),
        lambda: comparison.robustness(level=0.95),
    ):
        with pytest.raises(ValueError, match=r"level= .*every user's terms.*in memory"):
            call()
    for metric in ("ips_ndcg", "ips_pn_dcg", "ips_recall"):
        name = result["m0"][metric].name
        expected = (
            rf"{name} has no sensitivity bounds when computed in parts \(on Spark"
            rf".*recpack_ope\.metrics\.{metric}"
        )
        with pytest.raises(ValueError, match=expected):
            result["m0"][metric].sensitivity(2.0)
        with pytest.raises(ValueError, match=expected):
            result.compare("m0", "m1", metric).robustness()
    with pytest.raises(ValueError, match="DCG@5 is not weighted by inverse propensities"):
        result["m0"]["dcg"].sensitivity(2.0)
    # Feed logs carry a propensity per logged row: nothing to sum per item.
    log = pd.DataFrame(
        {
            "session": [1, 1, 2, 2],
            "context": [1, 1, 2, 2],
            "item": [10, 11, 10, 12],
            "rank": [1, 2, 1, 2],
            "reward": [1.0, 0.0, 1.0, 1.0],
            "propensity": [0.5, 0.4, 0.9, 0.3],
        }
    )
    target = pd.DataFrame({"context": [1, 2, 2], "item": [10, 12, 10], "rank": [1, 1, 2]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        logged = rs.logged_dcg(
            spark.createDataFrame(log), spark.createDataFrame(target), discount=D3
        )
    with pytest.raises(ValueError, match=r"per-row or per-\(user, item\) propensities.*in memory"):
        logged.sensitivity(2.0)


def test_per_user_frame_holds_ids_beyond_int64_exactly(frames, tmp_path):
    """Users 2**64 − 1, 2**64 − 2 and 3 keep their ids in the per-user frame and in a parquet
    file of it; their DCG@3 terms are those of the hand calculation in
    test_valid_input_gives_the_hand_computed_dcg (1, 0, 1)."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    big = {1: str(2**64 - 1), 2: str(2**64 - 2), 3: "3"}
    held = frames["make"](frames["held"].assign(user=frames["held"]["user"].map(big)))
    recs = frames["make"](frames["recs"].assign(user=frames["recs"]["user"].map(big)))
    held = held.withColumn("user", F.col("user").cast("decimal(20,0)"))
    recs = recs.withColumn("user", F.col("user").cast("decimal(20,0)"))
    frame = rs.per_user(held, recs, metrics="dcg", discount=D3, n_partitions=4)
    assert frame.schema["user"].dataType.simpleString() == "decimal(20,0)"
    terms = {int(r["user"]): r["dcg"] for r in frame.collect()}
    assert terms == {2**64 - 1: 1.0, 2**64 - 2: 0.0, 3: 1.0}
    frame.write.parquet(str(tmp_path / "per_user"))
    written = pq.read_table(tmp_path / "per_user").column("user").to_pylist()
    assert sorted(int(u) for u in written) == [3, 2**64 - 2, 2**64 - 1]


@pytest.mark.parametrize(
    "change",
    [
        {"held": {"reward": (2, None)}},
        {"held": {"reward": (3, -1.0)}},
        {"recs": {"user": (2, 1.5)}},
        {"recs": {"item": (1, 10)}},
    ],
    ids=["null", "negative reward", "id 1.5", "repeated pair"],
)
def test_per_user_refuses_bad_rows_with_evaluates_one_line_message(frames, change):
    """Refused when the frame is made, not inside Spark's exception when it is written."""
    make = frames["make"]
    held = make(frames["held"], **change.get("held", {}))
    recs = make(frames["recs"], **change.get("recs", {}))
    with pytest.raises(ValueError) as evaluated:
        run(held, recs, metrics="dcg")
    message = str(evaluated.value)
    assert "\n" not in message and re.search(r"column '(reward|user)'|pair \(1, 10\)", message)
    with pytest.raises(ValueError) as per_user:
        rs.per_user(held, recs, metrics="dcg", discount=D3, n_partitions=4)
    assert type(per_user.value) is ValueError and str(per_user.value) == message
