"""``recpack_ope.spark.logged``: :func:`logged_dcg` on feed logs equals the in-memory
:func:`recpack_ope.logged_dcg` (value to 1e-12 relative, interval bounds to 1e-9, 16
partitions), names the problem of bad input, and keeps large session ids apart."""

import warnings

import numpy as np
import pandas as pd
import pytest

import recpack_ope as ro
from recpack_ope import spark as rs
from recpack_ope.logged import DeterministicRanker, FeedLog

D = ro.LogDiscount(5)


@pytest.mark.parametrize("normalise", [None, "per_user", "post"])
def test_logged_dcg_equals_in_memory(spark, normalise, same):
    rng = np.random.default_rng(11)
    n_contexts, n_items = 50, 25
    rows = []
    for session in range(300):
        context = int(rng.integers(n_contexts))
        for rank, item in enumerate(rng.choice(n_items, 6, replace=False)):
            rows.append(
                (
                    f"s{session}",
                    context,
                    int(item),
                    rank + 1,
                    float(rng.random() < 0.25) * float(rng.integers(1, 3)),
                    float(rng.uniform(0.05, 1)),
                )
            )
    log = pd.DataFrame(rows, columns=["session", "context", "item", "rank", "reward", "propensity"])
    scores = rng.integers(0, 3, size=(n_contexts, n_items)).astype(float)
    target = pd.DataFrame(
        [(c, i, scores[c, i]) for c in range(n_contexts) for i in range(n_items)],
        columns=["context", "item", "score"],
    )
    # rankings for contexts without sessions do not matter (some partitions hold only those)
    target = pd.concat(
        [target, pd.DataFrame({"context": np.arange(100, 140), "item": 0, "score": 1.0})]
    )
    feed = FeedLog.from_arrays(
        log.session,
        log.item,
        log["rank"],
        log.reward,
        context=log.context,
        propensity=log.propensity,
        n_items=n_items,
        n_contexts=n_contexts,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        reference = ro.logged_dcg(
            feed, DeterministicRanker(scores), discount=D, clip=6.0, normalise=normalise
        )
        ours = rs.logged_dcg(
            spark.createDataFrame(log),
            spark.createDataFrame(target),
            discount=D,
            clip=6.0,
            normalise=normalise,
            n_partitions=16,
        )
    same(ours, reference)


def two_sessions(reward: list) -> pd.DataFrame:
    """A feed log of two sessions (contexts 5 and 6) with the given rewards, propensity 0.5."""
    return pd.DataFrame(
        {
            "session": [1, 1, 2],
            "context": [5, 5, 6],
            "item": [10, 11, 10],
            "rank": [1, 2, 1],
            "reward": reward,
            "propensity": [0.5, 0.5, 0.5],
        }
    )


def test_feed_log_errors_name_the_problem(spark):
    d = ro.LogDiscount(3)
    log = two_sessions([1.0, 0.0, 1.0])
    target = spark.createDataFrame(
        pd.DataFrame({"context": [5, 6], "item": [10, 10], "score": [1.0, 1.0]})
    )
    # hand value: session 1's click at target rank 1, ε0 = 0.5 → 2; session 2 the same → mean 2
    assert rs.logged_dcg(
        spark.createDataFrame(log), target, discount=d, n_partitions=4
    ).value == pytest.approx(2.0)
    bad = log.assign(propensity=[0.5, 0.5, 1.5])
    with pytest.raises(ValueError, match="propensit"):
        rs.logged_dcg(spark.createDataFrame(bad), target, discount=d, n_partitions=4)
    with pytest.raises(ValueError, match="feed_log has no column 'propensity'"):
        rs.logged_dcg(spark.createDataFrame(log.drop(columns="propensity")), target, discount=d)
    # A target frame without context 6 would show nothing to session 2: the value would
    # halve (1 instead of 2) with nothing excluded. Refused, as by the file engines.
    partial = target.where("context = 5")
    with pytest.raises(ValueError) as refused:
        rs.logged_dcg(spark.createDataFrame(log), partial, discount=d, n_partitions=4)
    assert str(refused.value) == (
        "target ranks no item for 1 of the feed log's 2 contexts, e.g. context 6 (session 2): "
        "the target would show nothing there and every estimate would fall; give the target "
        "a ranking for every context of the log"
    )


@pytest.mark.parametrize("normalise", ["per_user", "post"])
def test_normalised_estimates_on_a_log_without_clicks_refuse_as_in_memory(spark, normalise):
    d = ro.LogDiscount(3)
    log = two_sessions([0.0, 0.0, 0.0])
    scores = np.zeros((7, 12))
    feed = FeedLog.from_arrays(
        log.session,
        log.item,
        log["rank"],
        log.reward,
        context=log.context,
        propensity=log.propensity,
        n_items=12,
        n_contexts=7,
    )
    with pytest.raises(ValueError) as in_memory:
        ro.logged_dcg(feed, DeterministicRanker(scores), discount=d, normalise=normalise)
    target = spark.createDataFrame(
        pd.DataFrame({"context": [5, 6], "item": [10, 10], "score": [1.0, 1.0]})
    )
    frame = spark.createDataFrame(log)
    with pytest.raises(ValueError, match="no session has a positive reward") as refused:
        rs.logged_dcg(frame, target, discount=d, normalise=normalise, n_partitions=4)
    assert str(refused.value) == f"feed_log: {in_memory.value}"
    # Unnormalised: every session's DCG is Σ c·w·δ with rewards c all 0, exactly 0.
    with pytest.warns(ro.ReliabilityWarning, match="no evaluated interaction"):
        assert rs.logged_dcg(frame, target, discount=d, n_partitions=4).value == 0.0


def test_partition_checks_of_the_target_word_its_rows_as_in_memory():
    """A partition's own check of the target (the fallback when the driver finds no problem
    first) names the target's column and rows as the file engines do."""
    from recpack_ope.spark._partitions import _text
    from recpack_ope.spark.logged import FEED_LOG, _LoggedPlan

    plan = _LoggedPlan(FEED_LOG["logged_dcg"], D, None, 1.0, (), target_column="rank")
    # One logged row, then the target's two rows of (context 5, item 10): ranks 1 and 2,
    # held as minus the rank.
    chunk = {
        "session": np.array([1, 0, 0]),
        "context": np.array([5, 5, 5]),
        "item": np.array([10, 10, 10]),
        "rank": np.array([1.0, np.nan, np.nan]),
        "value": np.array([1.0, -1.0, -2.0]),
        "value:null": np.zeros(3, dtype=bool),
        "source": np.array([-1, 0, 0]),
    }
    with pytest.raises(ValueError) as refused:
        plan._check(chunk, chunk["source"] == -1)
    assert _text(str(refused.value)) == (
        "target has the (context, item) pair (5, 10) more than once, in row (context=5, "
        "item=10, rank=1.0) and row (context=5, item=10, rank=2.0): one row per (context, item)"
    )
    chunk["value"][2] = np.nan
    with pytest.raises(ValueError) as refused:
        plan._check(chunk, chunk["source"] == -1)
    assert _text(str(refused.value)) == (
        "target column 'rank' must hold finite ranks, got row (context=5, item=10, rank=nan)"
    )


def test_session_ids_beyond_2_53_stay_distinct(spark):
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


def test_a_session_over_two_contexts_is_refused_and_context_widths_mix(spark):
    """Session 1 logged under contexts 5 and 6: they go to different partitions, where each
    half would look like a whole session; refused before the pass, naming both contexts. A
    target whose context ids are int while the log's are bigint ranks the same contexts:
    the hand value of test_feed_log_errors_name_the_problem, 2."""
    from pyspark.sql import functions as F

    schema = (
        "session bigint, context bigint, item bigint, rank int, reward double, propensity double"
    )
    log = spark.createDataFrame([(1, 5, 10, 1, 1.0, 0.5), (1, 6, 11, 2, 0.0, 0.5)], schema)
    target = spark.createDataFrame(
        [(5, 10, 1.0), (6, 10, 1.0)], "context int, item int, score double"
    )
    with pytest.raises(
        ValueError,
        match=r"^feed_log: session 1 has rows with different contexts \(5 and 6\); a session is "
        "one context's$",
    ):
        rs.logged_dcg(log, target, discount=ro.LogDiscount(3), n_partitions=8)
    one = log.withColumn("context", F.lit(5).cast("bigint"))
    assert rs.logged_dcg(one, target, discount=ro.LogDiscount(3)).value == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"^n_partitions must be a positive integer .*, got -1$"):
        rs.logged_dcg(one, target, discount=ro.LogDiscount(3), n_partitions=-1)
