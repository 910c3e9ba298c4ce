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


def test_feed_log_errors_name_the_problem(spark):
    d = ro.LogDiscount(3)
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
