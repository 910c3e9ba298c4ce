"""``evaluate_files`` and ``rpp_report``: files in, the core functions' results out.

Expected values come from the core functions called on matrices built here, in sorted-id
order, from the same random data the tests write to CSV and parquet files.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from conftest import plackett_luce_feed

import recpack_ope as ro
from recpack_ope.evaluation import FileEvaluation, evaluate_files, rpp_report
from recpack_ope.evaluation.files import ArgumentError, check_log_columns, offered, plan_files
from recpack_ope.inference.significance import paired_t_tests, randomised_tukey_hsd
from recpack_ope.io.trec import read_trec
from recpack_ope.logged import DeterministicRanker, FeedLog
from recpack_ope.metrics.rpp import preference_matrix
from recpack_ope.registry import ESTIMATORS

RPP_DATA = Path(__file__).parents[1] / "data" / "rpp_reference"


def write(path: Path, columns: dict) -> Path:
    table = pa.table(columns)
    if path.suffix == ".csv":
        pcsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return path


@pytest.fixture
def held_out(tmp_path):
    """40 users × 15 items with ids out of order, two models (scores with ties; ranks), item
    propensities; the first three users hold only zero rewards."""
    rng = np.random.default_rng(2)
    n_users, n_items = 40, 15
    user_ids = np.sort(rng.choice(10**5, n_users, replace=False))
    item_ids = np.sort(rng.choice(10**4, n_items, replace=False))
    held = rng.random((n_users, n_items)) < 0.2
    held[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    rewards = np.where(held, rng.integers(1, 3, held.shape), 0).astype(float)
    rewards[:3] = 0
    u, i = np.nonzero(held)
    order = rng.permutation(u.size)
    files = {
        "held_out": write(
            tmp_path / "held_out.parquet",
            {
                "user": user_ids[u][order],
                "item": item_ids[i][order],
                "reward": rewards[u, i][order],
            },
        )
    }
    scores = {}
    for name, column in (("A", "score"), ("B", "rank")):
        s = rng.integers(0, 4, held.shape).astype(float)
        s[rng.random(s.shape) < 0.3] = -np.inf
        u, i = np.nonzero(np.isfinite(s))
        if column == "rank":  # ranks 1, 2, … of distinct scores: the same ranking
            s[u, i] = rng.permutation(u.size)
            rank = np.empty(u.size, dtype=np.int64)
            for user in np.unique(u):
                mine = np.flatnonzero(u == user)
                rank[mine[np.argsort(-s[user, i[mine]])]] = np.arange(1, mine.size + 1)
            values = rank
        else:
            values = s[u, i]
        scores[name] = s
        files[name] = write(
            tmp_path / f"{name}.csv", {"user": user_ids[u], "item": item_ids[i], column: values}
        )
    p = rng.uniform(0.1, 1.0, n_items)
    files["propensity"] = write(tmp_path / "p.csv", {"item": item_ids, "propensity": p})
    return files, sp.csr_matrix(rewards), scores, p


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_held_out_files_give_the_core_estimates(held_out, tmp_path):
    files, y_true, scores, p = held_out
    metrics = ("dcg", "ndcg", "recall", "ips_dcg", "snips_dcg", "ips_recall")
    result = evaluate_files(
        files["held_out"],
        {"A": files["A"], "B": files["B"]},
        files["propensity"],
        metrics=metrics,
        k=4,
        clip=6.0,
        level=0.9,
        compare=("A", "B"),
    )
    assert isinstance(result, FileEvaluation)
    d, w = ro.LogDiscount(4), {"propensity": p, "clip": 6.0}
    core = {
        "dcg": lambda s: ro.dcg(y_true, s, discount=d),
        "ndcg": lambda s: ro.ndcg(y_true, s, discount=d),
        "recall": lambda s: ro.recall(y_true, s, k=4),
        "ips_dcg": lambda s: ro.ips_dcg(y_true, s, discount=d, **w),
        "snips_dcg": lambda s: ro.snips_dcg(y_true, s, discount=d, **w),
        "ips_recall": lambda s: ro.ips_recall(y_true, s, k=4, **w),
    }
    expected = {(m, name): f(scores[m]) for m in "AB" for name, f in core.items()}
    rows = {(r["model"], r["metric"]): r for r in result.rows()}
    assert list(rows) == list(expected)
    for key, est in expected.items():
        row = rows[key]
        assert row["name"] == est.name and row["value"] == pytest.approx(est.value, rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            est.confidence_interval(0.9), rel=1e-9
        )
        assert (row["n_users"], row["n_excluded_users"]) == (37, 3)
        # Weighted rows carry the bounds at Γ = 2 (of the core's estimate), the others none.
        if est.weighting is None:
            assert "sens_low" not in row and "sens_high" not in row
        else:
            bounds = est.sensitivity(2.0)
            assert (row["sens_low"], row["sens_high"]) == (bounds.low, bounds.high)
            assert row["sens_low"] < row["value"] < row["sens_high"]
    paired = {r["metric"]: r for r in result.comparison_rows()}
    for metric, c in result.comparisons.items():
        want = expected["A", metric].compare(expected["B", metric], 0.9)
        assert c.difference == pytest.approx(want.difference, rel=1e-12)
        assert c.p_value == pytest.approx(want.p_value, rel=1e-9)
        assert c.name.startswith("A − B (")
        # Γ* of the sign and of the significance at the evaluation's level (90 %).
        if expected["A", metric].weighting is None:
            assert "robust_gamma" not in paired[metric]
        else:
            assert paired[metric]["robust_gamma"] == want.robustness()
            assert paired[metric]["robust_gamma_90"] == want.robustness(0.9)
    assert list(result.comparisons) == list(metrics)
    assert any(1 < r.get("robust_gamma", 1) < np.inf for r in paired.values())

    # The JSON and CSV files hold the rows and the comparisons.
    (path,) = result.write(tmp_path / "out" / "report.json")
    report = json.loads(path.read_text())
    assert {k: report[k] for k in ("engine", "input", "k", "clip", "level")} == {
        "engine": "local",
        "input": "held-out",
        "k": 4,
        "clip": 6.0,
        "level": 0.9,
    }
    assert report["rows"] == result.rows()
    assert report["comparisons"] == result.comparison_rows()
    assert [c["metric"] for c in report["comparisons"]] == list(metrics)
    table, paired_file = result.write(tmp_path / "report.csv")
    assert paired_file.name == "report-comparisons.csv"
    with open(table) as handle:
        written = list(csv.DictReader(handle))
    assert [float(r["value"]) for r in written] == [r["value"] for r in result.rows()]
    # One header for all rows: the unweighted rows leave the bounds empty.
    for got, row in zip(written, result.rows(), strict=True):
        assert got["sens_high"] == ("" if "sens_high" not in row else repr(row["sens_high"]))
    with open(paired_file) as handle:
        written = list(csv.DictReader(handle))
    assert [r["robust_gamma_90"] != "" for r in written] == [
        "robust_gamma_90" in r for r in result.comparison_rows()
    ]
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        result.write(tmp_path / "report.txt")

    lines = result.table().splitlines()
    header = "| model | metric | value | 90% CI | Γ=2 bounds | n_users | excluded | ESS | flags |"
    assert lines[0] == header
    dcg, ips = expected["A", "dcg"], expected["A", "ips_dcg"]
    lo, hi = dcg.confidence_interval(0.9)
    line = f"| A | DCG@4 | {dcg.value:.4g} | [{lo:.4g}, {hi:.4g}] | – | 37 | 3 | – | – |"
    assert lines[2] == line
    bounds = ips.sensitivity(2.0)
    assert f"| {ips.value:.4g} | " in lines[5]
    assert (
        f"| [{bounds.low:.4g}, {bounds.high:.4g}] | 37 | 3 | {ips.diagnostics.ess:.4g} | "
        in lines[5]
    )
    lines = result.comparison_table().splitlines()
    assert lines[0] == "| comparison | difference | 90% CI | p | Γ* (sign) | Γ* (90%) |"
    for line, row in zip(lines[2:], result.comparison_rows(), strict=True):
        stars = [f"{row[c]:.4g}" if c in row else "–" for c in ("robust_gamma", "robust_gamma_90")]
        assert line.endswith(f"| {row['p_value']:.4g} | {stars[0]} | {stars[1]} |")


def test_default_metrics_and_no_comparison(held_out):
    files, y_true, scores, _ = held_out
    plain = evaluate_files(files["held_out"], {"A": files["A"]})
    assert list(plain.estimates["A"]) == ["dcg", "ndcg", "pn_dcg", "recall"]
    assert plain.comparisons == {} and plain.comparison_rows() == []
    assert plain.estimates["A"]["pn_dcg"].value == pytest.approx(
        ro.pn_dcg(y_true, scores["A"], discount=ro.LogDiscount(10)).value, rel=1e-12
    )
    weighted = plan_files(files["held_out"], {"A": files["A"]}, files["propensity"])
    assert weighted.metrics[-2:] == ("ips_dcg", "ips_pn_dcg") and weighted.kind == "held-out"


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_a_feed_log_file_gives_the_core_logged_estimates(tmp_path):
    rng = np.random.default_rng(9)
    n_sessions, n_contexts, n_items = 60, 12, 10
    columns = {k: [] for k in ("session", "context", "item", "rank", "reward", "propensity")}
    for s in range(n_sessions):
        context = int(rng.integers(0, n_contexts))
        for r, i in enumerate(rng.choice(n_items, 3, replace=False), start=1):
            row = (s, context, int(i), r, float(rng.random() < 0.4), float(rng.uniform(0.1, 1)))
            for name, value in zip(columns, row, strict=True):
                columns[name].append(value)
    log_file = write(tmp_path / "log.csv", columns)
    targets, files = {}, {}
    for name in ("T1", "T2"):
        s = rng.integers(0, 5, (n_contexts, n_items)).astype(float)
        targets[name] = s
        c, i = np.nonzero(s >= 0)
        files[name] = write(
            tmp_path / f"{name}.parquet", {"context": c, "item": i, "score": s[c, i]}
        )
    result = evaluate_files(
        feed_log=log_file,
        targets=files,
        metrics=["logged_dcg", "logged_ndcg"],
        k=3,
        clip=5.0,
        compare=["T2", "T1"],
    )
    cols = {k: np.asarray(v) for k, v in columns.items()}
    log = FeedLog.from_arrays(
        cols["session"],
        cols["item"],
        cols["rank"],
        cols["reward"],
        context=cols["context"],
        propensity=cols["propensity"],
        n_items=n_items,
        n_contexts=n_contexts,
    )
    for name, s in targets.items():
        for metric, normalise in (("logged_dcg", None), ("logged_ndcg", "per_user")):
            est = ro.logged_dcg(
                log,
                DeterministicRanker(s),
                discount=ro.LogDiscount(3),
                clip=5.0,
                normalise=normalise,
            )
            got = result.estimates[name][metric]
            assert got.value == pytest.approx(est.value, rel=1e-12)
            assert got.standard_error == pytest.approx(est.standard_error, rel=1e-9)
            row = next(r for r in result.rows() if (r["model"], r["metric"]) == (name, metric))
            bounds = est.sensitivity(2.0)  # one propensity per logged row
            assert (row["sens_low"], row["sens_high"]) == pytest.approx(
                (bounds.low, bounds.high), rel=1e-12
            )
    assert result.comparisons["logged_dcg"].name == "T2 − T1 (logged DCG@3 (m=5))"
    assert result.table().startswith(
        "| model | metric | value | 95% CI | Γ=2 bounds | n_sessions |"
    )
    assert result.to_dict()["input"] == "feed-log"


RANKING = {
    "standard_ips": ro.logged.standard_ips,
    "cascade_ips": ro.logged.cascade_ips,
    "independent_ips": ro.logged.independent_ips,
}
KEYS = ("session", "context", "item", "rank", "reward")


def _target_file(path: Path, scores: np.ndarray) -> Path:
    c, i = np.nonzero(np.isfinite(scores))
    return write(path, {"context": c, "item": i, "score": scores[c, i]})


def _core_log(columns: dict, **probabilities) -> FeedLog:
    return FeedLog.from_arrays(
        *(columns[k] for k in ("session", "item", "rank", "reward")),
        context=columns["context"],
        **probabilities,
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_ranking_estimators_of_a_feed_log_file_equal_the_core_with_the_logging_policy(tmp_path):
    columns, policy, scores = plackett_luce_feed(4)
    log_file = write(
        tmp_path / "log.parquet",
        {k: columns[k] for k in (*KEYS, "prefix_propensity", "position_propensity")},
    )
    target = {"T": _target_file(tmp_path / "t.csv", scores)}
    result = evaluate_files(
        feed_log=log_file, targets=target, metrics=list(RANKING), k=2, clip=30.0
    )
    # The core reads the logging policy itself instead of the file's columns.
    log = _core_log(columns, n_items=scores.shape[1], n_contexts=scores.shape[0])
    for name, function in RANKING.items():
        expected = function(
            log, DeterministicRanker(scores), discount=ro.LogDiscount(2), clip=30.0, logging=policy
        )
        got = result.estimates["T"][name]
        assert got.name == expected.name == f"{ESTIMATORS[name].label}@2 (m=30)"
        assert got.value == pytest.approx(expected.value, rel=1e-9), name
        assert got.value > 0 and got.n_users == 300
        assert got.standard_error == pytest.approx(expected.standard_error, rel=1e-9)
        row = next(r for r in result.rows() if r["metric"] == name)
        bounds = expected.sensitivity(2.0)
        assert (row["sens_low"], row["sens_high"]) == pytest.approx((bounds.low, bounds.high))
    # Plackett–Luce weights instead of prefix propensities: the same prefix probabilities by
    # the weights' route (the mass left after the items drawn above).
    weights_file = write(
        tmp_path / "weights.csv", {k: columns[k] for k in (*KEYS, "logging_weight")}
    )
    again = evaluate_files(
        feed_log=weights_file, targets=target, metrics=["standard_ips", "cascade_ips"], k=2
    )
    for name in ("standard_ips", "cascade_ips"):
        expected = RANKING[name](
            log, DeterministicRanker(scores), discount=ro.LogDiscount(2), logging=policy
        )
        assert again.estimates["T"][name].value == pytest.approx(expected.value, rel=1e-9)
    # Adaptive IPS reads both kinds of columns and chooses its behaviour as the core does.
    both = write(
        tmp_path / "both.csv", {k: v for k, v in columns.items() if k != "prefix_propensity"}
    )
    chosen = evaluate_files(feed_log=both, targets=target, metrics=["adaptive_ips"], k=2)
    expected = ro.logged.adaptive_ips(
        log, DeterministicRanker(scores), discount=ro.LogDiscount(2), logging=policy
    )
    got = chosen.estimates["T"]["adaptive_ips"]
    assert (got.name, got.value) == (expected.name, pytest.approx(expected.value, rel=1e-9))
    for name, needs in (("cascade_dr", "a reward model"), ("pseudo_inverse", "the logging policy")):
        with pytest.raises(ArgumentError) as refused:
            plan_files(feed_log=both, targets=target, metrics=[name])
        assert str(refused.value) == (
            f"metrics {name!r} is for Python only (recpack_ope.logged.{name}): it needs "
            f"{needs}, which files cannot give; from files, metrics of feed-log data are "
            "logged_dcg, logged_ndcg, logged_pn_dcg, standard_ips, cascade_ips, "
            "independent_ips, adaptive_ips"
        )
    with pytest.raises(ValueError, match=r"'position_propensity', which independent_ips reads"):
        evaluate_files(feed_log=weights_file, targets=target, metrics=["independent_ips"])
    with pytest.raises(ValueError, match=r"'propensity', which logged_dcg reads"):
        evaluate_files(feed_log=weights_file, targets=target, metrics=["logged_dcg"])


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_a_target_file_leaving_out_contexts_of_the_log_is_refused(tmp_path):
    columns, _, scores = plackett_luce_feed(4)
    # Every file estimator reads one of these; the exposure propensity is any value in (0, 1].
    log_file = write(
        tmp_path / "log.csv",
        {
            **{k: columns[k] for k in (*KEYS, "prefix_propensity", "position_propensity")},
            "propensity": columns["position_propensity"],
        },
    )
    left_out = np.arange(5, 10)
    partial = scores.copy()
    partial[left_out] = -np.inf
    target = {"new": _target_file(tmp_path / "new.csv", partial)}
    contexts = np.unique(columns["context"])
    in_log = np.intersect1d(left_out, contexts)
    first = in_log[0]
    session = columns["session"][columns["context"] == first].min()
    expected = (
        f"target 'new' (file {str(target['new'])!r}) ranks no item for {in_log.size} of the "
        f"feed log's {contexts.size} contexts, e.g. context {first} (session {session}): the "
        "target would show nothing there and every estimate would fall; give the target a "
        "ranking for every context of the log"
    )
    assert in_log.size == 5 and contexts.size == 30  # 300 sessions over 30 contexts
    for name in offered("feed-log").split(", "):
        with pytest.raises(ValueError) as refused:
            evaluate_files(feed_log=log_file, targets=target, metrics=[name], k=2)
        assert str(refused.value) == expected, name
    # In Python a context row without finite score is a target that shows nothing there:
    # those sessions' terms are 0, the others' those of the whole target.
    log = _core_log(
        columns,
        prefix_propensity=columns["prefix_propensity"],
        n_items=scores.shape[1],
        n_contexts=scores.shape[0],
    )
    whole = ro.logged.cascade_ips(log, DeterministicRanker(scores))
    session_context = log.context[np.unique(log.session, return_index=True)[1]]
    kept = ~np.isin(session_context, left_out)
    empty = ro.logged.cascade_ips(log, DeterministicRanker(partial))
    assert empty.value == pytest.approx(np.mean(whole.per_user * kept), rel=1e-12)
    assert empty.value < whole.value and empty.n_excluded_users == 0


def test_a_log_without_the_columns_of_a_metric_names_those_it_feeds():
    # What each estimator reads (docs/definitions.md): logged_… the exposure propensity,
    # standard and cascade IPS prefix_propensity or logging_weight, independent IPS
    # position_propensity, adaptive IPS one of each of the last two.
    cases = [
        (["propensity"], "independent_ips", "logged_dcg,logged_ndcg,logged_pn_dcg", None),
        (["logging_weight"], "logged_dcg", "standard_ips,cascade_ips", None),
        (
            ["position_propensity", "logging_weight"],
            "logged_pn_dcg",
            "standard_ips,cascade_ips,independent_ips,adaptive_ips",
            None,
        ),
        # Spark computes no adaptive IPS: its engine offers the others.
        (
            ["position_propensity", "prefix_propensity"],
            "logged_dcg",
            "standard_ips,cascade_ips,independent_ips",
            ["logged_dcg", "standard_ips", "cascade_ips", "independent_ips"],
        ),
    ]
    for has, metric, suggested, available in cases:
        present = [*KEYS, *has]
        with pytest.raises(ArgumentError) as refused:
            check_log_columns([metric], present, "log", available)
        message = str(refused.value)
        assert f"which {metric} reads; its columns are {present}" in message
        assert message.endswith(f"; it has {', '.join(has)}: try metrics {suggested}")
        assert refused.value.spelled({"metrics": "--metrics"}).endswith(
            f"try --metrics {suggested}"
        )
    with pytest.raises(ArgumentError, match="it has none of the logging probabilities"):
        check_log_columns(["logged_dcg"], list(KEYS), "log")


def _missing_rank(columns):
    keep = np.ones(columns["rank"].size, dtype=bool)
    keep[1] = False  # the first session shows ranks 1 and 3
    return {k: v[keep] for k, v in columns.items()}


def _rising(columns):
    prefix = columns["prefix_propensity"].copy()
    prefix[4] = prefix[3] * 1.5  # the second session's prefix of two ranks above that of one
    return {**columns, "prefix_propensity": np.minimum(prefix, 1.0)}


def _outside(column, value):
    def change(columns):
        changed = columns[column].copy()
        changed[5] = value
        return {**columns, column: changed}

    return change


#: A bad log, the estimators that refuse it, and what the refusal names.
BAD_LOGS = [
    (_missing_rank, ("standard_ips", "cascade_ips"), "shows ranks [1, 3], missing rank 2"),
    (_rising, RANKING, "prefix_propensity of session"),
    (_outside("position_propensity", 1.5), RANKING, "position_propensity 1.5 of row 5 lies"),
    (_outside("prefix_propensity", 0.0), RANKING, "prefix_propensity 0.0 of row 5 lies outside"),
]


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("corrupt, refused, names", BAD_LOGS)
def test_files_and_memory_refuse_the_same_logs(tmp_path, corrupt, refused, names):
    columns, _, scores = plackett_luce_feed(5, n_sessions=20)
    bad = corrupt(columns)
    log_file = write(tmp_path / "bad.csv", {k: bad[k] for k in bad if k != "logging_weight"})
    target = {"T": _target_file(tmp_path / "t.csv", scores)}
    probabilities = {k: bad[k] for k in ("prefix_propensity", "position_propensity")}
    for name in RANKING:
        try:
            RANKING[name](_core_log(bad, **probabilities), DeterministicRanker(scores))
        except ValueError as error:
            in_memory = str(error)
        else:
            in_memory = None
        if name not in refused:
            # Independent IPS weights items at their ranks: a session need not be whole.
            assert in_memory is None
            assert evaluate_files(feed_log=log_file, targets=target, metrics=[name]).estimates
            continue
        assert names in in_memory
        with pytest.raises(ValueError) as from_file:
            evaluate_files(feed_log=log_file, targets=target, metrics=[name])
        assert str(from_file.value) == f"feed_log file {str(log_file)!r}: {in_memory}"


def test_bad_arguments_name_the_argument_before_reading(held_out, tmp_path):
    files, *_ = held_out
    models = {"A": files["A"]}
    cases = [
        ({}, "give held_out with recommendations"),
        (
            {"held_out": files["held_out"], "feed_log": files["held_out"]},
            "or feed_log with targets, not both",
        ),
        ({"feed_log": files["held_out"]}, "feed_log needs at least one target ranking"),
        (
            {"recommendations": "a.csv", "held_out": files["held_out"]},
            "recommendations must map model names to files, got str",
        ),
        ({"metrics": ["ips_ndcg"]}, "ips_ndcg weights by inverse propensities: give propensity"),
        (
            {"metrics": ["dr_dcg"]},
            r"metrics 'dr_dcg' is for Python only \(recpack_ope.metrics.dr_dcg\): it needs a "
            "reward model",
        ),
        ({"metrics": ["logged_dcg"]}, "metrics of held-out data are dcg, ndcg"),
        ({"metrics": ["dcg", "dcg"]}, "metrics lists a metric twice: dcg dcg"),
        ({"k": 0}, "k must be a positive integer, got 0"),
        ({"k": 2.0}, "k must be a positive integer, got 2.0"),
        ({"clip": -1}, "clip must be a number >= 1 \\(weights 1/p .* got -1"),
        ({"clip": 0.5}, "clip must be a number >= 1 \\(weights 1/p .* got 0.5"),
        ({"level": 95}, r"level must lie in \(0, 1\), got 95"),
        ({"compare": ("A", "C")}, "compare names 'C', which is none of \\['A'\\]"),
        ({"population": "everyone"}, "population must be 'observed' or 'all', got 'everyone'"),
        (
            {"population": "all", "metrics": ["dcg", "recall"]},
            "population 'all' needs a value for every user, but recall divides each user's DCG",
        ),
        ({"compare": ("A",)}, "compare takes two model names"),
        ({"compare": ("A", "A")}, "compare takes two different models, got 'A' twice"),
        ({"propensity": tmp_path / "none.csv"}, "propensity file '.*none.csv' does not exist"),
        (
            {"recommendations": {"A": files["A"], "Z": tmp_path / "z.csv"}},
            "recommendations 'Z' file '.*z.csv' does not exist",
        ),
    ]
    for given, message in cases:
        arguments = {"held_out": files["held_out"], "recommendations": models, **given}
        if given == {} or "feed_log" in given:
            arguments = dict(given)
        with pytest.raises(ArgumentError, match=message):
            evaluate_files(**arguments)
    with pytest.raises(ArgumentError, match="population 'all' applies to held-out data"):
        plan_files(feed_log=files["held_out"], targets=models, population="all")
    # The command line spells the arguments as its options.
    with pytest.raises(ArgumentError) as error:
        evaluate_files(files["held_out"], models, metrics=["ips_dcg"])
    spelled = error.value.spelled({"metrics": "--metrics", "propensity": "--propensity"})
    assert spelled.startswith(
        "--metrics ips_dcg weights by inverse propensities: give --propensity"
    )
    assert isinstance(error.value, ValueError)
    # Bad rows are a ValueError naming the file, not an ArgumentError.
    bad = write(tmp_path / "bad.csv", {"user": [1], "item": [2], "reward": [-1.0]})
    with pytest.raises(ValueError, match="reward") as error:
        evaluate_files(bad, {"A": files["A"]})
    assert not isinstance(error.value, ArgumentError)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_all_users_of_the_held_out_table_are_averaged_over(held_out, tmp_path):
    files, y_true, scores, p = held_out
    metrics = ("dcg", "pn_dcg", "ips_dcg", "snips_dcg", "ips_pn_dcg")
    arguments = dict(recommendations={"A": files["A"]}, propensity=files["propensity"])
    every = evaluate_files(files["held_out"], **arguments, metrics=metrics, population="all")
    observed = evaluate_files(files["held_out"], **arguments, metrics=metrics)
    # The first three of the 40 users hold only zero rewards: over all users they count 0, so
    # every mean of per-user terms is 37/40 of the observed users' one.
    for metric in metrics:
        a, o = every.estimates["A"][metric], observed.estimates["A"][metric]
        assert (a.n_users, a.n_excluded_users, o.n_excluded_users) == (40, 0, 3)
        exponents = ESTIMATORS[metric].exponents
        assert a.value == pytest.approx(o.value * (37 / 40) ** sum(exponents), rel=1e-12)
    out = every.write(tmp_path / "every.json")[0]
    assert json.loads(out.read_text())["population"] == "all"
    assert observed.to_dict()["population"] == "observed"


def test_rpp_report_is_the_preference_matrix_and_its_tests(tmp_path):
    runs = sorted(str(p) for p in RPP_DATA.glob("input.run*"))[:4]
    qrels = RPP_DATA / "qrels.txt"
    report = rpp_report(qrels, runs, measures=["dcgrpp"], test="tukey", n_resamples=200, seed=3)
    collection = read_trec(str(qrels), runs)
    matrix = preference_matrix(collection.qrels, collection.runs, weighting="dcg")
    measure = report.measures["dcgRPP"]
    np.testing.assert_allclose(measure.matrix.mean, matrix.mean, rtol=1e-12)
    tukey = randomised_tukey_hsd(matrix, 200, 3)
    np.testing.assert_allclose(measure.tests.p_value, tukey.p_value)
    data = report.to_dict()
    assert data["runs"] == list(collection.runs) and data["queries"] == 30
    assert data["graded"] is True and data["test"] == "tukey"
    assert data["measures"]["dcgRPP"]["ordering"]["mc4"] == matrix.win_rates().ordering("mc4")
    text = report.text()
    assert "## dcgRPP over 30 queries (graded relevance), MC4 order" in text
    assert "dcgRPP preference matrix (dcg weights over recall levels)" in text
    assert "(randomised Tukey HSD)" in text
    path = report.write(tmp_path / "sub" / "rpp.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(data))

    binary = rpp_report(qrels, runs, graded=False, depth=5)
    assert list(binary.measures) == ["RPP", "dcgRPP", "invRPP"]
    shallow = read_trec(str(qrels), runs, depth=5)
    matrix = preference_matrix(shallow.qrels, shallow.runs, graded=False)
    np.testing.assert_allclose(binary.measures["RPP"].matrix.mean, matrix.mean, rtol=1e-12)
    t = paired_t_tests(matrix)
    np.testing.assert_allclose(binary.measures["RPP"].tests.p_value, t.p_value, rtol=1e-12)
    assert binary.to_dict()["graded"] is False and binary.to_dict()["depth"] == 5
    assert "(binary relevance)" in binary.text() and "(t-test, Bonferroni)" in binary.text()
    for bad, message in (
        ({"runs": runs[:1]}, "at least two run files"),
        ({"measures": ["ndcg"]}, "measures must name some of"),
        ({"test": "wilcoxon"}, "test must be one of"),
    ):
        with pytest.raises(ValueError, match=message):
            rpp_report(qrels, **{"runs": runs, **bad})


def test_tiny_values_print_with_significant_digits():
    # IPS-pnDCG = mean(dcg) / mean(idcg) = 1.234e-4 / 1: four fixed decimals would show 0.0001.
    terms = np.array([[1.234e-4, 1.0], [1.234e-4, 1.0], [1.234e-4, 1.0]])
    estimate = ro.EstimateResult("IPS-pnDCG@10", terms, (1, -1), np.arange(3), 0)
    table = FileEvaluation({"A": {"ips_pn_dcg": estimate}}, "held-out", 10, None).table()
    assert "| A | IPS-pnDCG@10 | 0.0001234 | [0.0001234, 0.0001234] | 3 | 0 |" in table


def test_reliability_warnings_name_the_model_and_the_metric(held_out):
    files, *_ = held_out
    models = {"A": files["A"], "B": files["B"]}
    # 40 users give an ESS far below 50: both models' IPS-DCG@4 warn, each naming its model.
    with pytest.warns(ro.ReliabilityWarning) as record:
        evaluate_files(files["held_out"], models, files["propensity"], metrics=["ips_dcg"], k=4)
    named = sorted(str(w.message).split(": unreliable")[0] for w in record)
    assert named == ["A: IPS-DCG@4", "B: IPS-DCG@4"]


@pytest.mark.parametrize(
    ("ranks", "shown"),
    [
        ([1, 3, 1], "user 1 ranks from 1 to 3 for 2 items"),  # a gap: items removed after ranking
        ([1, 1, 1], "user 1 ranks from 1 to 1 for 2 items"),  # two items at one rank
        ([2, 1, 1], None),  # user 1's items the other way round: a ranking, evaluated
        ([1.5, 2, 1], "user 1 ranks from 1.5 to 2 for 2 items"),
        ([0, 1, 1], "user 1 ranks from 0 to 1 for 2 items"),
        ([-1, 0, 1], "user 1 ranks from -1 to 0 for 2 items"),
        ([1, 2, -1], "user 2 ranks from -1 to -1 for 1 item"),
        ([1, 2, 0], "user 2 ranks from 0 to 0 for 1 item"),
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_ranks_are_positions_1_to_n_or_the_file_is_refused(tmp_path, ranks, shown, suffix):
    # A rank is where the item is shown: compacting a gap (5 → 1) or tie-breaking a repeated
    # rank would evaluate a list nobody gave; user 1 holds two items, user 2 one.
    held = write(
        tmp_path / "held.csv", {"user": [1, 1, 2], "item": [10, 11, 10], "reward": [1, 1, 1]}
    )
    recs = write(tmp_path / f"a{suffix}", {"user": [1, 1, 2], "item": [10, 11, 10], "rank": ranks})
    if shown is None:  # item 11 first for user 1: DCG@2 of user 1 is 1/log2(3) + 1
        result = evaluate_files(held_out=held, recommendations={"A": recs}, metrics=["dcg"], k=2)
        assert result.estimates["A"]["dcg"].value == pytest.approx((1 + 1 / np.log2(3) + 1) / 2)
        return
    with pytest.raises(ValueError) as refused:
        evaluate_files(held_out=held, recommendations={"A": recs}, metrics=["dcg"], k=2)
    assert str(refused.value) == (
        f"recommendations['A'] file {str(recs)!r} gives {shown}: a user's n items need "
        "the ranks 1..n, each once (rank again after removing items, or give scores)"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("population", ["observed", "all"])
def test_recommended_users_without_held_out_rows_are_users_without_rewards(tmp_path, population):
    # Users 3, 5 and 8 have held-out rows (user 5 only a 0 reward); the models also recommend
    # to users 1 and 9, which have none: rows of y_true without entries, as in the Python API.
    held = write(
        tmp_path / "held.csv",
        {"user": [3, 3, 5, 8, 8], "item": [10, 11, 10, 12, 10], "reward": [1, 2, 0, 1, 1]},
    )
    a_rows = {"user": [1, 3, 3, 5, 8, 8, 9], "item": [10, 11, 12, 10, 10, 12, 11]}
    a = write(tmp_path / "a.parquet", {**a_rows, "rank": [1, 1, 2, 1, 1, 2, 1]})
    b = write(
        tmp_path / "b.csv", {"user": [3, 8, 9], "item": [10, 12, 12], "score": [0.3, 0.2, 0.9]}
    )
    y_true = sp.csr_matrix(
        np.array([[0, 0, 0], [1, 2, 0], [0, 0, 0], [1, 0, 1], [0, 0, 0]], dtype=float)
    )  # users 1, 3, 5, 8, 9 × items 10, 11, 12
    inf = -np.inf
    scores = {
        "A": np.array(
            [[-1, inf, inf], [inf, -1, -2], [-1, inf, inf], [-1, inf, -2], [inf, -1, inf]]
        ),
        "B": np.array([[inf] * 3, [0.3, inf, inf], [inf] * 3, [inf, inf, 0.2], [inf, inf, 0.9]]),
    }
    p = write(tmp_path / "p.csv", {"item": [10, 11, 12], "propensity": [0.5, 0.25, 1.0]})
    metrics = ("dcg", "pn_dcg", "ips_dcg") + (
        ("ndcg", "recall") if population == "observed" else ()
    )
    result = evaluate_files(
        held, {"A": a, "B": b}, p, metrics=metrics, k=2, population=population, compare=("A", "B")
    )
    assert result.n_users_without_held_out == 2
    assert result.to_dict()["n_users_without_held_out"] == 2
    options = {
        "discount": ro.LogDiscount(2),
        "propensity": np.array([0.5, 0.25, 1.0]),
        "clip": result.clip,
        "population": population,
    }
    for model, s in scores.items():
        for metric in metrics:
            est = ESTIMATORS[metric](y_true, s, **options)
            got = result.estimates[model][metric]
            assert got.value == pytest.approx(est.value, rel=1e-12), (model, metric)
            assert (got.n_users, got.n_excluded_users) == (est.n_users, est.n_excluded_users)
            # Over "observed", users 1, 5 and 9 hold no positive reward; over "all" all 5 count.
            assert (got.n_users, got.n_excluded_users) == (
                (2, 3) if population == "observed" else (5, 0)
            )
    # By hand, DCG@2 of A: user 3 has item 11 (reward 2) at rank 1 and item 10 unranked: 2;
    # user 8 items 10 and 12 (reward 1 each) at ranks 1 and 2: 1 + 1/log2(3); the others 0.
    total = 2 + 1 + 1 / np.log2(3)
    n = 2 if population == "observed" else 5
    assert result.estimates["A"]["dcg"].value == pytest.approx(total / n, rel=1e-12)


def test_an_estimate_over_one_user_keeps_its_value_without_an_interval(tmp_path):
    held = write(tmp_path / "held.csv", {"user": [1, 2], "item": [10, 11], "reward": [1, 0]})
    a = write(
        tmp_path / "a.csv", {"user": [1, 1, 2], "item": [11, 10, 10], "score": [2.0, 1.0, 1.0]}
    )
    b = write(tmp_path / "b.csv", {"user": [1, 2], "item": [10, 10], "rank": [1, 1]})
    # One user with a positive reward. By hand, DCG@10 of user 1: A ranks item 10 (reward
    # 1) at rank 2, 1/log2(3); B at rank 1, 1. The Python API gives the same value and
    # refuses only its interval.
    result = evaluate_files(held, {"A": a, "B": b}, metrics=["dcg"])
    assert result.estimates["A"]["dcg"].value == pytest.approx(1 / np.log2(3), rel=1e-12)
    with pytest.raises(ValueError, match="needs at least 2 users, got 1"):
        result.estimates["A"]["dcg"].confidence_interval()
    row = result.rows()[0]
    assert (row["value"], row["ci_low"], row["ci_high"], row["standard_error"]) == (
        result.estimates["A"]["dcg"].value,
        None,
        None,
        None,
    )
    assert result.table().splitlines()[2] == "| A | DCG@10 | 0.6309 | – | 1 | 1 |"  # user 2: 0 only
    # No leaderboard: its tests need 2 users; the report says so, JSON holds null.
    assert result.report().endswith(
        "No leaderboard: its intervals and tests need at least 2 users per estimate, and "
        "DCG@10 of model 'A' is over 1 user."
    )
    assert result.to_dict()["leaderboard"] is None
    with pytest.raises(ValueError, match="a leaderboard needs at least 2 users per estimate"):
        result.report("latex")
    written = result.write(tmp_path / "report.csv")[0]
    cells = next(csv.DictReader(written.open()))
    assert (cells["value"], cells["ci_low"], cells["ci_high"]) == (str(row["value"]), "", "")
    # A comparison pairs users: refused, naming compare, the model and the estimator.
    with pytest.raises(ArgumentError) as refused:
        evaluate_files(held, {"A": a, "B": b}, metrics=["dcg"], compare=("A", "B"))
    assert str(refused.value) == (
        f"compare 'A' 'B' needs at least 2 users to pair, got 1 for DCG@10 of model 'A' (file "
        f"{str(a)!r}) over population='observed'; without compare the values are shown "
        "without intervals"
    )
    # Over both users the interval exists: DCG 1/log2(3) and 0 for A.
    every = evaluate_files(held, {"A": a}, metrics=["dcg"], population="all")
    assert every.estimates["A"]["dcg"].value == pytest.approx(0.5 / np.log2(3), rel=1e-12)
    assert every.rows()[0]["ci_low"] is not None


def test_held_out_users_without_recommendations_count_as_zero_and_are_counted(tmp_path):
    users = [1, 2, 3, 4]
    held = write(tmp_path / "held.csv", {"user": users, "item": [10] * 4, "reward": [1] * 4})
    full = write(tmp_path / "full.csv", {"user": users, "item": [10] * 4, "rank": [1] * 4})
    half = write(tmp_path / "half.csv", {"user": [3, 4], "item": [10, 10], "rank": [1, 1]})
    result = evaluate_files(held, {"full": full, "half": half}, metrics=["dcg", "recall"])
    # By hand: every user's item at rank 1 earns 1; "half" recommends nothing to users 1 and
    # 2, who count as 0 (not excluded): DCG 2/4, recall 2/4, over 4 users.
    assert [r["value"] for r in result.rows()] == [1.0, 1.0, 0.5, 0.5]
    assert [r["n_users"] for r in result.rows()] == [4] * 4
    assert [r["n_users_without_recommendations"] for r in result.rows()] == [0, 0, 2, 2]
    assert result.n_users_without_recommendations == {"full": 0, "half": 2}
    assert result.to_dict()["n_users_without_recommendations"] == {"full": 0, "half": 2}
    written = result.write(tmp_path / "report.csv")[0]
    cells = list(csv.DictReader(written.open()))
    assert [c["n_users_without_recommendations"] for c in cells] == ["0", "0", "2", "2"]
    assert list(cells[0])[8:10] == ["n_excluded_users", "n_users_without_recommendations"]


def test_clip_refusals_offer_what_the_engine_accepts_spelled_for_the_caller(tmp_path):
    held = write(tmp_path / "held.csv", {"user": [1], "item": [10], "reward": [1]})
    with pytest.raises(ArgumentError) as refused:
        plan_files(held, {"A": held}, clip=float("inf"))
    assert str(refused.value) == (
        "clip inf would clip nothing: give None for the unclipped estimators"
    )
    assert refused.value.spelled({"clip": "--clip", "none": "'none'"}) == (
        "--clip inf would clip nothing: give 'none' for the unclipped estimators"
    )
    for auto_clip, options in (
        (True, "None (unclipped), 'auto' or 'default'"),
        (False, "None (unclipped) or 'default'"),
    ):
        with pytest.raises(ArgumentError) as refused:
            plan_files(held, {"A": held}, clip=0, auto_clip=auto_clip)
        assert str(refused.value) == (
            "clip must be a number >= 1 (weights 1/p are at least 1, so a smaller one only "
            f"rescales the metric), {options} (each estimator's default), got 0"
        )
    with pytest.raises(ArgumentError) as refused:
        plan_files(held, {"A": held}, clip="auto", auto_clip=False)
    assert str(refused.value) == (
        'clip "auto" selects the clipping from every weight at once, which this engine cannot: '
        "give a number, or None for the unclipped estimators"
    )
    assert plan_files(held, {"A": held}, clip="auto").clip == "auto"


def test_a_directory_given_as_a_file_is_named_as_such(tmp_path):
    folder = tmp_path / "held.csv"
    folder.mkdir()
    a = write(tmp_path / "a.csv", {"user": [1], "item": [10], "rank": [1]})
    with pytest.raises(ArgumentError) as refused:
        plan_files(folder, {"A": a})
    assert str(refused.value) == f"held_out file {str(folder)!r} is a directory, not a file"
    assert refused.value.spelled({"held_out": "--held-out"}).startswith("--held-out file ")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("rank", [0, -2])
def test_a_feed_log_rank_below_1_is_refused_naming_the_file_and_row(tmp_path, suffix, rank):
    log = write(
        tmp_path / f"log{suffix}",
        {
            "session": [1, 1, 2],
            "context": [1, 1, 1],
            "item": [1, 2, 1],
            "rank": [1, rank, 1],
            "reward": [1, 0, 1],
            "propensity": [0.5, 0.5, 0.5],
        },
    )
    target = write(tmp_path / "t.csv", {"context": [1, 1], "item": [1, 2], "rank": [1, 2]})
    with pytest.raises(ValueError) as refused:
        evaluate_files(feed_log=log, targets={"T": target})
    assert str(refused.value) == (
        f"feed_log file {str(log)!r}: rank of row 1 is {float(rank)}; ranks are integers >= 1 "
        "(at most 2**53)"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_uint64_parquet_ids_match_signed_csv_ids(tmp_path):
    # Past 2**53 the ids would meet as float64 and collapse; they compare exactly instead.
    big = 2**62 + 1
    held = tmp_path / "held.parquet"
    pq.write_table(
        pa.table(
            {
                "user": pa.array([big, big + 1, big + 2], pa.uint64()),
                "item": pa.array([big, big, big + 1], pa.uint64()),
                "reward": [1.0, 2.0, 1.0],
            }
        ),
        held,
    )
    recs = write(
        tmp_path / "a.csv",
        {"user": [big, big + 1, big + 2], "item": [big + 1, big, big + 1], "rank": [1, 1, 1]},
    )
    result = evaluate_files(held, {"A": recs}, metrics=["dcg"], k=1)
    # DCG@1 by hand: user big ranks item big+1 (reward 0) first: 0; the others their rewarded
    # item: 2 and 1.
    assert result.estimates["A"]["dcg"].value == pytest.approx(1.0, rel=1e-12)
    assert result.estimates["A"]["dcg"].n_users == 3 and result.n_users_without_held_out == 0
