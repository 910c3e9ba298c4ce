"""Bad input on Spark: a ValueError that names the column and shows an example row, found in
Spark (the schema on the driver, rows inside the partitions), never a silent number."""

import numpy as np
import pandas as pd
import pytest

import recpack_ope as ro
from recpack_ope import spark as rs

D = ro.LogDiscount(3)


@pytest.fixture(scope="module")
def frames(spark):
    held = pd.DataFrame(
        {"user": [1, 1, 2, 3], "item": [10, 11, 10, 12], "reward": [1.0, 0.0, 2.0, 1.0]}
    )
    recs = pd.DataFrame(
        {"user": [1, 1, 2, 3, 3], "item": [10, 12, 11, 12, 10], "score": [3.0, 2.0, 1.0, 5.0, 4.0]}
    )
    prop = pd.DataFrame({"item": [10, 11, 12], "propensity": [0.5, 0.2, 1.0]})

    def make(frame, **changes):
        frame = frame.copy()
        for column, (row, value) in changes.items():
            frame[column] = frame[column].astype(object)
            frame.loc[row, column] = value
        return spark.createDataFrame(frame)

    return {"held": held, "recs": recs, "prop": prop, "make": make, "spark": spark}


def run(held, recs, **options):
    options.setdefault("discount", D)
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


def test_null_is_refused_with_its_row(frames):
    held = frames["make"](frames["held"], reward=(2, None))
    with pytest.raises(ValueError, match=r"null in column 'value'.*user=2, item=10"):
        run(held, frames["make"](frames["recs"]))


def test_negative_reward_is_refused_with_its_row(frames):
    held = frames["make"](frames["held"], reward=(3, -1.0))
    with pytest.raises(
        ValueError,
        match=r"'reward' must hold finite rewards >= 0, got \(user=3, item=12, value=-1.0\)",
    ):
        run(held, frames["make"](frames["recs"]))


def test_duplicate_pairs_are_refused(frames):
    held = frames["spark"].createDataFrame(pd.concat([frames["held"], frames["held"].iloc[[2]]]))
    with pytest.raises(
        ValueError, match=r"held_out has the \(user, item\) pair \(user=2, item=10\) more than once"
    ):
        run(held, frames["make"](frames["recs"]))
    recs = frames["spark"].createDataFrame(pd.concat([frames["recs"], frames["recs"].iloc[[0]]]))
    with pytest.raises(
        ValueError,
        match=r"recommendations of 'model' has the \(user, item\) pair \(user=1, item=10\)",
    ):
        run(frames["make"](frames["held"]), recs)


@pytest.mark.parametrize("value", [0.0, 1.5, float("nan")])
def test_propensity_outside_unit_interval_is_refused(frames, value):
    prop = frames["make"](frames["prop"], propensity=(1, value))
    with pytest.raises(ValueError, match=r"propensit.*item 11|item=11"):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="ips_dcg",
        )


def test_held_out_item_without_propensity_and_duplicate_propensity_rows(frames):
    prop = frames["spark"].createDataFrame(frames["prop"].iloc[[0, 2]])
    with pytest.raises(ValueError, match="propensity has no row for item 11"):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="ips_ndcg",
        )
    prop = frames["spark"].createDataFrame(pd.concat([frames["prop"], frames["prop"].iloc[[1]]]))
    with pytest.raises(ValueError, match="propensity has 2 rows for item 11"):
        run(
            frames["make"](frames["held"]),
            frames["make"](frames["recs"]),
            propensity=prop,
            metrics="ips_ndcg",
        )


def test_recommended_user_without_held_out_rows_is_refused(frames):
    recs = frames["spark"].createDataFrame(
        pd.concat([frames["recs"], pd.DataFrame({"user": [9], "item": [10], "score": [1.0]})])
    )
    with pytest.raises(
        ValueError, match=r"user 9 has recommendations of 'model' but no held-out rows"
    ):
        run(frames["make"](frames["held"]), recs)


def test_id_types_must_agree_and_options_are_checked(frames):
    recs = frames["spark"].createDataFrame(frames["recs"].astype({"user": str}))
    with pytest.raises(ValueError, match="column 'user' must have one type in every frame"):
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
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    for call in (rs.evaluate, rs.per_user):
        with pytest.raises(ValueError, match=rf"{name} needs propensity=.*'{plain}'"):
            call(held, recs, metrics=("dcg", name), discount=D)
    with pytest.raises(ValueError, match=rf"{name} needs propensity=.*'{plain}'"):
        rs.stratified(
            held, recs, stratify_by=frames["make"](frames["prop"]), metric=name, discount=D
        )


def test_estimators_spark_does_not_compute_are_refused_with_what_to_use(frames):
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    prop = frames["make"](frames["prop"])
    with pytest.raises(ValueError, match=r"dr_dcg needs a reward model.*recpack_ope\.metrics"):
        run(held, recs, metrics="dr_dcg", propensity=prop)
    with pytest.raises(ValueError, match=r"stratified_ndcg.*spark\.stratified.*metric='ndcg'"):
        run(held, recs, metrics="stratified_ndcg", propensity=prop)
    with pytest.raises(ValueError, match=r"unknown estimator 'logged_dcg' on held-out data"):
        run(held, recs, metrics="logged_dcg")


def test_feed_log_errors_name_the_problem(frames):
    spark = frames["spark"]
    log = pd.DataFrame(
        {
            "session": [1, 1, 2],
            "context": [5, 5, 6],
            "item": [10, 11, 10],
            "rank": [1, 2, 1],
            "reward": [1.0, 0.0, 1.0],
            "propensity": [0.5, 0.5, 0.5],
        }
    )
    target = spark.createDataFrame(
        pd.DataFrame({"context": [5, 6], "item": [10, 10], "score": [1.0, 1.0]})
    )
    # hand value: session 1's click at target rank 1, ε0 = 0.5 → 2; session 2 the same → mean 2
    assert rs.logged_dcg(
        spark.createDataFrame(log), target, discount=D, n_partitions=4
    ).value == pytest.approx(2.0)
    bad = log.assign(propensity=[0.5, 0.5, 1.5])
    with pytest.raises(ValueError, match="propensit"):
        rs.logged_dcg(spark.createDataFrame(bad), target, discount=D, n_partitions=4)
    with pytest.raises(ValueError, match="feed_log has no column 'propensity'"):
        rs.logged_dcg(spark.createDataFrame(log.drop(columns="propensity")), target, discount=D)


def test_fit_propensity_equals_the_core_fit(frames):
    spark = frames["spark"]
    rng = np.random.default_rng(5)
    users = rng.integers(0, 400, 3000)
    items = np.minimum(rng.zipf(1.6, 3000), 60) - 1
    pairs = pd.DataFrame({"user": users, "item": items}).drop_duplicates()
    table = rs.fit_propensity(
        spark.createDataFrame(pairs),
        model := ro.PowerLawPropensity(),
        items=spark.createDataFrame(pd.DataFrame({"item": np.arange(60)})),
    )
    reference = ro.PowerLawPropensity().fit(np.bincount(pairs.item, minlength=60).astype(float))
    got = table.toPandas().sort_values("item")
    np.testing.assert_allclose(got.propensity, reference.propensity_, rtol=1e-12)
    np.testing.assert_allclose(model.propensity_, reference.propensity_, rtol=1e-12)


def test_session_ids_beyond_2_53_stay_distinct(frames):
    spark = frames["spark"]
    log = spark.createDataFrame(
        [(2**60, 1, 5, 1, 1.0, 0.5), (2**60 + 1, 1, 6, 2, 1.0, 0.5)],
        "session bigint, context bigint, item bigint, rank int, reward double, propensity double",
    )
    target = spark.createDataFrame(
        [(1, 5, 2.0), (1, 6, 1.0)], "context bigint, item bigint, score double"
    )
    # session 2**60: item 5 at target rank 1, weight 2 → 2; session 2**60 + 1: item 6 at target
    # rank 2, weight 2 → 2/log2(3). Merged into one session they would sum instead of average.
    est = rs.logged_dcg(log, target, discount=ro.LogDiscount(2), n_partitions=2)
    assert est.n_users == 2
    assert est.value == pytest.approx((2 + 2 / np.log2(3)) / 2, rel=1e-14)


def test_small_integer_columns_are_numeric(frames):
    from pyspark.sql import functions as F

    held = frames["make"](frames["held"]).withColumn("reward", F.col("reward").cast("tinyint"))
    recs = frames["make"](frames["recs"]).withColumn("score", F.col("score").cast("smallint"))
    est = run(held, recs, metrics="dcg")["model"]["dcg"]
    assert est.value == pytest.approx(
        2 / 3, rel=1e-15
    )  # as in test_valid_input_gives_the_hand_computed_dcg
