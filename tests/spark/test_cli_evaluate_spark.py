"""``recpack-ope evaluate --engine spark`` reports what the local engine reports: values to
1e-12 relative, interval bounds, standard errors and p-values to 1e-9, over 16 partitions, on
held-out parquet files and on a CSV feed log (ties, users without positive rewards or without
recommendations, clipping, a target context the log does not hold)."""

import json

import numpy as np
import pytest

from recpack_ope.cli import main
from recpack_ope.inference import summary

#: The weight diagnostics' columns of a weighted row, and the criteria that fired.
DIAGNOSTICS = (*summary.DIAGNOSTICS, "flags")

#: The estimators both engines compute: every held-out one without a reward model or strata,
#: plain and weighted, and every feed-log one without a reward model.
HELD_OUT = (
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
FEED_LOG = ("logged_dcg", "logged_ndcg", "logged_pn_dcg")


def both_engines(tmp_path, *argv: str) -> tuple[dict, dict]:
    """The JSON reports of the local engine and of Spark on 16 partitions."""
    reports = []
    for engine in (["local"], ["spark", "--partitions", "16"]):
        out = tmp_path / f"{engine[0]}.json"
        assert main(["evaluate", *argv, "--engine", *engine, "--output", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    return reports[0], reports[1]


def close(a, b, rel):
    assert a == pytest.approx(b, rel=rel, abs=rel * 1e-3), (a, b)


def same_reports(local: dict, spark: dict) -> None:
    def counted(rows):
        """Names and counts (users, or sessions of a feed log) of every row."""
        return [
            (r["model"], r["metric"], r["name"], *(v for k, v in r.items() if k.startswith("n_")))
            for r in rows
        ]

    assert counted(spark["rows"]) == counted(local["rows"])
    for ours, theirs in zip(spark["rows"], local["rows"], strict=True):
        close(ours["value"], theirs["value"], 1e-12)
        for field in ("ci_low", "ci_high", "standard_error"):
            close(ours[field], theirs[field], 1e-9)
        # Spark merges the sensitivity bounds of ips_dcg and snips_dcg alone.
        bounded = ours["metric"] in ("ips_dcg", "snips_dcg")
        weighted = ours["metric"].startswith(("ips_", "snips_", "logged_"))
        assert ("sens_low" in ours) == bounded and ("sens_low" in theirs) == weighted
        for field in ("sens_low", "sens_high") if bounded else ():
            close(ours[field], theirs[field], 1e-9)
        # The weight diagnostics: Spark merges the per-partition weight groups exactly.
        diagnostics = [c for c in DIAGNOSTICS if c in theirs]
        assert diagnostics == ([*DIAGNOSTICS] if weighted else [])
        assert [c for c in DIAGNOSTICS if c in ours] == diagnostics
        for field in diagnostics:
            if isinstance(theirs[field], float):
                assert ours[field] == pytest.approx(theirs[field], rel=1e-9, nan_ok=True), field
            else:
                assert ours[field] == theirs[field], field
    assert [c["name"] for c in spark["comparisons"]] == [c["name"] for c in local["comparisons"]]
    for ours, theirs in zip(spark["comparisons"], local["comparisons"], strict=True):
        close(ours["difference"], theirs["difference"], 1e-12)
        for field in ("ci_low", "ci_high", "standard_error", "p_value"):
            close(ours[field], theirs[field], 1e-9)
        # Γ* of the sign where Spark has the bounds; its significance only in memory.
        if ours["metric"] in ("ips_dcg", "snips_dcg"):
            close(ours["robust_gamma"], theirs["robust_gamma"], 1e-6)
        assert "robust_gamma_95" not in ours and "robust_gamma_90" not in ours
    # The leaderboard: same values, intervals, best and corrected pairwise tests (the tied set
    # is Hsu's MCB in memory, the pairwise tests against the best on Spark's merged moments).
    if spark["leaderboard"] is None:  # several targets of a feed log: Spark cannot pair them
        assert spark["input"] == "feed-log" and len({r["model"] for r in spark["rows"]}) > 1
        assert local["leaderboard"] is not None
        return
    boards = spark["leaderboard"], local["leaderboard"]
    assert [(r["model"], r["metric"], r["best"]) for r in boards[0]["rows"]] == [
        (r["model"], r["metric"], r["best"]) for r in boards[1]["rows"]
    ]
    for ours, theirs in zip(boards[0]["rows"], boards[1]["rows"], strict=True):
        close(ours["value"], theirs["value"], 1e-12)
        close(ours["ci_low"], theirs["ci_low"], 1e-9)
        assert ours["better_than"] == theirs["better_than"]
    for metric, by_model in boards[1]["p_values"].items():
        for a, row in by_model.items():
            for b, p in row.items():
                close(boards[0]["p_values"][metric][a][b], p, 1e-9)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_held_out_files_give_the_same_report_on_spark(spark, tmp_path, write):
    rng = np.random.default_rng(3)
    n_users, n_items = 200, 30
    user_ids = rng.choice(10**6, n_users, replace=False)
    item_ids = rng.choice(10**5, n_items, replace=False)
    held = rng.random((n_users, n_items)) < 0.12
    held[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    rewards = np.where(held, rng.integers(1, 4, (n_users, n_items)), 0).astype(float)
    rewards[:8] = 0  # held-out rows, no positive reward: excluded
    u, i = np.nonzero(held)
    files = {
        "held_out": write(
            tmp_path / "held_out.parquet",
            {"user": user_ids[u], "item": item_ids[i], "reward": rewards[u, i]},
        )
    }
    args = ["--held-out", files["held_out"]]
    for m, column in enumerate(("score", "rank", "score")):
        scores = rng.integers(0, 4, (n_users, n_items)).astype(float)  # ties
        listed = (rng.random(scores.shape) < 0.5) & (np.arange(n_users) % 17 != m)[:, None]
        u, i = np.nonzero(listed)
        if column == "score":
            values = scores[u, i]
        else:  # each user's listed items in a random order, ranked 1..n (u is sorted)
            order = np.lexsort((rng.random(u.size), u))
            values = np.empty(u.size, dtype=np.int64)
            values[order] = np.arange(u.size) - np.searchsorted(u, u) + 1
        args += [
            "--recommendations",
            f"m{m}="
            + write(
                tmp_path / f"m{m}.parquet",
                {"user": user_ids[u], "item": item_ids[i], column: values},
            ),
        ]
    args += [
        "--propensity",
        write(
            tmp_path / "propensity.parquet",
            {"item": item_ids, "propensity": rng.uniform(0.02, 1.0, n_items)},
        ),
    ]
    local, spark_report = both_engines(
        tmp_path,
        *args,
        "--metrics",
        *HELD_OUT,
        "--k",
        "5",
        "--clip",
        "20",
        "--level",
        "0.9",
        "--compare",
        "m0",
        "m1",
    )
    assert len(local["rows"]) == 3 * len(HELD_OUT) and len(local["comparisons"]) == len(HELD_OUT)
    assert local["rows"][0]["n_excluded_users"] == 8
    same_reports(local, spark_report)
    # Over all users the 8 users without positive rewards count 0, on both engines alike.
    over_all = ("dcg", "pn_dcg", "ips_dcg", "snips_dcg", "ips_pn_dcg")
    local, spark_report = both_engines(
        tmp_path, *args, "--metrics", *over_all, "--k", "5", "--population", "all"
    )
    assert spark_report["population"] == local["population"] == "all"
    assert {(r["n_users"], r["n_excluded_users"]) for r in local["rows"]} == {(n_users, 0)}
    same_reports(local, spark_report)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_a_csv_feed_log_gives_the_same_report_on_spark(spark, tmp_path, write):
    rng = np.random.default_rng(4)
    n_sessions, n_contexts, n_items = 150, 40, 25
    contexts = np.array([f"u{c}" for c in range(n_contexts)])
    columns = {"session": [], "context": [], "item": [], "rank": [], "reward": [], "propensity": []}
    for s in range(n_sessions):
        context = contexts[rng.integers(0, n_contexts - 1)]  # the last context has no session
        for r, i in enumerate(rng.choice(20, 5, replace=False), start=1):
            row = (
                f"s{s}",
                context,
                int(i),
                r,
                int(rng.random() < 0.3),
                float(rng.uniform(0.05, 1.0)),
            )
            for name, value in zip(columns, row, strict=True):
                columns[name].append(value)
    args = ["--feed-log", write(tmp_path / "log.csv", columns)]
    for name in ("T1", "T2"):
        scores = rng.integers(0, 5, (n_contexts, n_items)).astype(float)
        c, i = np.nonzero(rng.random(scores.shape) < 0.7)
        args += [
            "--target",
            f"{name}="
            + write(
                tmp_path / f"{name}.csv", {"context": contexts[c], "item": i, "score": scores[c, i]}
            ),
        ]
    local, spark_report = both_engines(
        tmp_path, *args, "--metrics", *FEED_LOG, "--k", "3", "--clip", "10"
    )
    assert len(local["rows"]) == 6 and local["rows"][0]["n_sessions"] == n_sessions
    same_reports(local, spark_report)


def _refusals(argv: list[str], capsys) -> list[tuple[int, str]]:
    """(exit status, message) of ``recpack-ope evaluate argv`` on the local engine and on
    Spark."""
    refusals = []
    for engine in ("local", "spark"):
        with pytest.raises(SystemExit) as stop:
            main(["evaluate", *argv, "--engine", engine])
        code = stop.value.code
        # SystemExit("message") is status 1; a usage error prints its line, status 2.
        refusals.append((1, code) if isinstance(code, str) else (code, capsys.readouterr().err))
    return refusals


def test_both_engines_refuse_a_target_without_some_contexts_alike(spark, tmp_path, write, capsys):
    columns = {
        "session": [1, 1, 2, 3, 4, 4],
        "context": [7, 7, 8, 9, 8, 8],
        "item": [10, 11, 10, 11, 11, 10],
        "rank": [1, 2, 1, 1, 1, 2],
        "reward": [1, 0, 1, 1, 0, 1],
        "propensity": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
        "prefix_propensity": [0.5, 0.25, 0.5, 0.5, 0.5, 0.25],
        "position_propensity": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
    }
    log = write(tmp_path / "log.parquet", columns)
    # Contexts 8 (sessions 2 and 4) and 9 (session 3) left out.
    target = write(tmp_path / "new.parquet", {"context": [7, 7], "item": [10, 11], "rank": [1, 2]})
    expected = (
        f"recpack-ope evaluate: target 'new' (file {target!r}) ranks no item for 2 of the feed "
        "log's 3 contexts, e.g. context 8 (session 2): the target would show nothing there and "
        "every estimate would fall; give the target a ranking for every context of the log"
    )
    base = ["--feed-log", log, "--target", f"new={target}", "--metrics"]
    for metrics in ("standard_ips,cascade_ips,independent_ips", "logged_dcg"):
        assert _refusals([*base, metrics], capsys) == [(1, expected)] * 2
    # Without the exposure propensity the default logged_dcg names what the columns feed:
    # on Spark without adaptive IPS, which it does not compute.
    del columns["propensity"]
    log = write(tmp_path / "log.parquet", columns)
    local, on_spark = _refusals(["--feed-log", log, "--target", f"new={target}"], capsys)
    assert local[0] == on_spark[0] == 2
    assert "has no column 'propensity', which logged_dcg reads" in on_spark[1]
    suggestion = "it has position_propensity, prefix_propensity: try --metrics "
    assert (
        local[1]
        .rstrip()
        .endswith(suggestion + "standard_ips,cascade_ips,independent_ips,adaptive_ips")
    )
    assert on_spark[1].rstrip().endswith(suggestion + "standard_ips,cascade_ips,independent_ips")


def test_both_engines_name_the_model_and_the_metric_in_reliability_warnings(spark, tmp_path, write):
    from recpack_ope.inference.diagnostics import ReliabilityWarning

    # Two users, three held-out interactions: an ESS below 50 on both engines.
    files = {
        "held_out": write(
            tmp_path / "held_out.csv",
            {"user": [1, 1, 2], "item": [10, 11, 10], "reward": [1, 1, 1]},
        ),
        "EASE": write(
            tmp_path / "ease.csv", {"user": [1, 1, 2], "item": [10, 11, 10], "rank": [1, 2, 1]}
        ),
        "propensity": write(tmp_path / "p.csv", {"item": [10, 11], "propensity": [0.5, 0.2]}),
    }
    args = ["--held-out", files["held_out"], "--recommendations", f"EASE={files['EASE']}"]
    args += ["--propensity", files["propensity"], "--metrics", "ips_dcg", "--k", "2"]
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.json"
        with pytest.warns(ReliabilityWarning, match=r"^EASE: IPS-DCG@2: unreliable, ESS "):
            assert main(["evaluate", *args, "--engine", engine, "--output", str(out)]) == 0


def test_both_engines_refuse_ranks_that_are_not_positions_alike(spark, tmp_path, write, capsys):
    held = write(
        tmp_path / "held.csv", {"user": [1, 1, 2], "item": [10, 11, 10], "reward": [1, 1, 1]}
    )
    tail = (
        "gives user 1 ranks from 1 to 3 for 2 items: a user's n items need the ranks 1..n, each "
        "once (rank again after removing items, or give scores)"
    )
    recs = write(tmp_path / "gap.csv", {"user": [1, 1, 2], "item": [10, 11, 10], "rank": [1, 3, 1]})
    local, on_spark = _refusals(["--held-out", held, "--recommendations", f"A={recs}"], capsys)
    assert (
        local
        == on_spark
        == (1, f"recpack-ope evaluate: --recommendations 'A' file {recs!r} {tail}")
    )
    # A target of a feed log: its contexts' ranks, likewise.
    log = write(
        tmp_path / "log.csv",
        {
            "session": [1, 1],
            "context": [7, 7],
            "item": [10, 11],
            "rank": [1, 2],
            "reward": [1, 0],
            "propensity": [0.5, 0.5],
        },
    )
    target = write(tmp_path / "t.csv", {"context": [7, 7], "item": [10, 11], "rank": [2, 2]})
    refusals = _refusals(["--feed-log", log, "--target", f"new={target}"], capsys)
    shown = (
        "context 7 ranks from 2 to 2 for 2 items: a context's n items need the ranks 1..n, each "
        "once (rank again after removing items, or give scores)"
    )
    assert [(code, message.split(" gives ", 1)[1]) for code, message in refusals] == [
        (1, shown)
    ] * 2


def test_a_refusal_on_spark_is_one_line_on_a_quiet_terminal(tmp_path):
    """A new process (its own JVM, started as local_session starts it): the terminal shows the
    refusal's one line, without Spark's start-up notices, executor logs or a worker's
    traceback; the partition that found the null returns the refusal instead of failing."""
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    held, recs = tmp_path / "held.parquet", tmp_path / "recs.parquet"
    pq.write_table(pa.table({"user": [1, 2], "item": [10, 10], "reward": [1.0, None]}), held)
    pq.write_table(pa.table({"user": [1, 2], "item": [10, 10], "score": [1.0, 1.0]}), recs)
    argv = ["evaluate", "--engine", "spark", "--held-out", str(held)]
    done = subprocess.run(
        [sys.executable, "-m", "recpack_ope", *argv, "--recommendations", f"A={recs}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"recpack-ope evaluate: --held-out file {str(held)!r} has a null in column 'reward', "
        "e.g. row 1 (user=2, item=10, reward=None)\n"
    )
