"""``recpack_ope.spark.ranking_ips``: standard, cascade and independent IPS on Spark equal the
in-memory estimators (value to 1e-12 relative, interval bounds and standard error to 1e-9,
weight diagnostics) however the rows are spread, refuse the logs the core refuses, and the
file engine on Spark reports what the local one does."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import recpack_ope as ro
from recpack_ope import spark as rs
from recpack_ope.cli import main
from recpack_ope.logged import DeterministicRanker, FeedLog

RANKING = {
    "standard_ips": ro.logged.standard_ips,
    "cascade_ips": ro.logged.cascade_ips,
    "independent_ips": ro.logged.independent_ips,
}
KEYS = ["session", "context", "item", "rank", "reward"]
PROBABILITIES = ["prefix_propensity", "position_propensity"]


def _frames(spark, columns, scores, probabilities=PROBABILITIES):
    log = pd.DataFrame({k: columns[k] for k in KEYS + probabilities})
    c, i = np.nonzero(np.isfinite(scores))
    target = pd.DataFrame({"context": c, "item": i, "score": scores[c, i]})
    return spark.createDataFrame(log), spark.createDataFrame(target)


def _core(name, columns, scores, **options):
    log = FeedLog.from_arrays(
        *(columns[k] for k in ("session", "item", "rank", "reward")),
        context=columns["context"],
        **{k: columns[k] for k in PROBABILITIES},
        n_items=scores.shape[1],
        n_contexts=scores.shape[0],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        return RANKING[name](log, DeterministicRanker(scores), **options)


@pytest.mark.parametrize("name", RANKING)
def test_ranking_ips_equals_in_memory_however_the_rows_are_spread(spark, pl_feed, same, name):
    columns, _, scores = pl_feed(6, n_sessions=400, n_contexts=30)
    scores[0, :2] = -np.inf  # context 0 ranks only some items: the others get π = 0
    log, target = _frames(spark, columns, scores)
    options = {"discount": ro.LogDiscount(2), "clip": 40.0}
    reference = _core(name, columns, scores, **options)
    assert reference.value > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        # 7 partitions of shuffled input, and more partitions (64) than contexts (30): some
        # hold no context, some only target rows.
        for frame, n in ((log.repartition(7), 7), (log, 64)):
            same(
                rs.ranking_ips(frame, target, estimator=name, n_partitions=n, **options), reference
            )
        # Without a discount (α = 1) and unclipped.
        same(
            rs.ranking_ips(log, target, estimator=name, n_partitions=5),
            _core(name, columns, scores),
        )


def _missing_rank(columns):
    keep = np.ones(columns["rank"].size, dtype=bool)
    keep[1] = False  # the first session shows ranks 1 and 3
    return {k: v[keep] for k, v in columns.items()}


def _mixed_context(columns):
    context = columns["context"].copy()
    context[4] = (context[4] + 1) % 5  # row 4 of the second session moves to another context
    return {**columns, "context": context}


def _changed(column, row, value):
    def change(columns):
        changed = columns[column].astype(float)
        changed[row] = value
        return {**columns, column: changed}

    return change


#: A bad log, the estimators that refuse it, what both refusals name (``session``: the id of
#: the session at the changed row).
BAD_LOGS = [
    (_missing_rank, ("standard_ips", "cascade_ips"), ("missing rank 2", "session")),
    (_mixed_context, tuple(RANKING), ("has rows with different contexts", "session")),
    (_changed("prefix_propensity", 4, 0.99), tuple(RANKING), ("rises from", "session")),
    (_changed("position_propensity", 5, 1.5), tuple(RANKING), ("position_propensity", "1.5")),
    (_changed("prefix_propensity", 5, 0.0), tuple(RANKING), ("prefix_propensity", "0.0")),
]


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("corrupt, refused, names", BAD_LOGS)
def test_spark_refuses_the_logs_the_core_refuses(spark, pl_feed, corrupt, refused, names):
    columns, _, scores = pl_feed(7, n_sessions=20, n_contexts=5)
    bad = corrupt(columns)
    log, target = _frames(spark, bad, scores)
    # Rows 1 (missing rank) and 4, 5 belong to the first and the second session; a session
    # split over two contexts would be split over partitions, and is refused before.
    session = str(columns["session"][1 if corrupt is _missing_rank else 4])
    names = [session if n == "session" else n for n in names]
    for name in RANKING:
        if name not in refused:
            # Independent IPS weights items at their ranks: a session need not be whole.
            expected = _core(name, bad, scores).value
            ours = rs.ranking_ips(log, target, estimator=name, n_partitions=3).value
            assert ours == pytest.approx(expected, rel=1e-12)
            continue
        with pytest.raises(ValueError) as in_memory:
            _core(name, bad, scores)
        with pytest.raises(ValueError) as on_spark:
            rs.ranking_ips(log, target, estimator=name, n_partitions=3)
        for message in (str(in_memory.value), str(on_spark.value)):
            assert all(n in message for n in names), (names, message)


def test_spark_refuses_a_target_without_some_contexts_of_the_log(spark, pl_feed):
    columns, _, scores = pl_feed(7, n_sessions=20, n_contexts=5)
    partial = scores.copy()
    partial[[1, 3]] = -np.inf  # no row for contexts 1 and 3 in the target frame
    log, target = _frames(spark, columns, partial)
    first = columns["session"][columns["context"] == 1].min()
    # pl_feed's 20 sessions fall in all 5 contexts (checked); the message is the file engines'.
    assert np.unique(columns["context"]).size == 5
    expected = (
        f"target ranks no item for 2 of the feed log's 5 contexts, e.g. context 1 (session "
        f"{first}): the target would show nothing there and every estimate would fall; give "
        "the target a ranking for every context of the log"
    )
    for name in RANKING:
        with pytest.raises(ValueError) as refused:
            rs.ranking_ips(log, target, estimator=name, n_partitions=3)
        assert str(refused.value) == expected, name


def test_spark_refuses_missing_columns_and_names(spark, pl_feed):
    columns, _, scores = pl_feed(8, n_sessions=10, n_contexts=3)
    log, target = _frames(spark, columns, scores, probabilities=["position_propensity"])
    with pytest.raises(ValueError, match="'prefix_propensity' or 'logging_weight', which cascade"):
        rs.ranking_ips(log, target, estimator="cascade_ips")
    with pytest.raises(ValueError, match="estimator must be one of"):
        rs.ranking_ips(log, target, estimator="logged_dcg")
    with pytest.raises(ValueError, match='clip="auto"'):
        rs.ranking_ips(log, target, estimator="independent_ips", clip="auto")


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_the_cli_on_spark_reports_what_the_local_engine_does(tmp_path, pl_feed, write, capsys):
    columns, _, scores = pl_feed(9, n_sessions=200, n_contexts=20)
    log = write(tmp_path / "log.csv", {k: columns[k] for k in [*KEYS, "logging_weight"]})
    c, i = np.nonzero(np.isfinite(scores))
    target = write(tmp_path / "t.csv", {"context": c, "item": i, "score": scores[c, i]})
    reports = []
    base = ["evaluate", "--feed-log", log, "--target", f"T={target}", "--k", "3"]
    for engine in (["local"], ["spark", "--partitions", "7"]):
        out = tmp_path / f"{engine[0]}.json"
        argv = [*base, "--metrics", "standard_ips,cascade_ips", "--clip", "25", "--engine", *engine]
        assert main([*argv, "--output", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    local, on_spark = reports
    assert [r["name"] for r in on_spark["rows"]] == [r["name"] for r in local["rows"]]
    assert [r["name"] for r in local["rows"]] == ["standard IPS@3 (m=25)", "cascade IPS@3 (m=25)"]
    for ours, theirs in zip(on_spark["rows"], local["rows"], strict=True):
        assert ours["value"] == pytest.approx(theirs["value"], rel=1e-12)
        assert ours["standard_error"] == pytest.approx(theirs["standard_error"], rel=1e-9)
        assert ours["n_sessions"] == theirs["n_sessions"] == 200
    # Adaptive IPS chooses its behaviour from every session at once: in memory only.
    with pytest.raises(SystemExit) as stop:
        main([*base, "--metrics", "adaptive_ips", "--engine", "spark"])
    assert (
        stop.value.code == 2
        and "adaptive_ips needs the in-memory engine" in capsys.readouterr().err
    )
