"""``recpack-ope evaluate`` with the local engine: files in, the core's estimates out.

Expected values come by hand (three users, a three-session feed log) or from the core
functions called on matrices built here by hand, in sorted-id order, from the same random data
the test writes to files.
"""

import csv
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from conftest import hide_package
from scipy import stats

import recpack_ope as ro
from recpack_ope.cli import main

L = 1 / math.log2(3)  # δ(2) of the log discount


def write(path, columns: dict) -> str:
    """A CSV or parquet file of ``columns``, by the extension of ``path``."""
    table = pa.table(columns)
    if path.suffix == ".csv":
        pcsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return str(path)


def run(tmp_path, *argv: str) -> dict:
    """``recpack-ope evaluate … --output report.json`` → the JSON report."""
    out = tmp_path / "report.json"
    assert main(["evaluate", *argv, "--output", str(out)]) == 0
    return json.loads(out.read_text())


def rows(report: dict) -> dict:
    return {(row["model"], row["metric"]): row for row in report["rows"]}


def t_interval(values, level=0.95):
    """Student-t interval of a mean, by scipy."""
    values = np.asarray(values, dtype=float)
    half = (
        stats.t.ppf((1 + level) / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    )
    return values.mean() - half, values.mean() + half


# --- three users, by hand ---------------------------------------------------------------------


@pytest.fixture
def three_users(tmp_path):
    """User 1 holds items 10 (reward 1) and 11 (reward 2), user 2 only a 0 reward (excluded),
    user 3 items 12 and 10. Model A ranks by rank; model B scores items 10 and 11 equally for
    user 1 (the tie goes to the lower id, 10) and ranks item 13, never held out, first for
    user 3. Propensities 0.5, 0.25, 1 of items 10, 11, 12."""
    return {
        "held_out": write(
            tmp_path / "held_out.csv",
            {"user": [1, 1, 2, 3, 3], "item": [10, 11, 10, 12, 10], "reward": [1, 2, 0, 1, 1]},
        ),
        "A": write(
            tmp_path / "a.csv",
            {"user": [1, 1, 2, 3, 3], "item": [11, 13, 10, 12, 10], "rank": [1, 2, 1, 1, 2]},
        ),
        "B": write(
            tmp_path / "b.parquet",
            {"user": [1, 1, 3, 3], "item": [11, 10, 13, 10], "score": [0.5, 0.5, 1.0, 0.2]},
        ),
        "propensity": write(
            tmp_path / "propensity.pq",
            {"item": [12, 11, 10, 99], "propensity": [1.0, 0.25, 0.5, 0.0]},
        ),
    }


def _three_user_args(files, *extra):
    return [
        "--held-out",
        files["held_out"],
        "--recommendations",
        f"A={files['A']}",
        "--recommendations",
        f"B={files['B']}",
        "--k",
        "2",
        *extra,
    ]


def test_three_users_by_hand(three_users, tmp_path, capsys):
    report = run(tmp_path, *_three_user_args(three_users, "--compare", "A", "B"))
    got = rows(report)
    assert [r["metric"] for r in report["rows"][:4]] == ["dcg", "ndcg", "pn_dcg", "recall"]
    # Per-user DCG@2: A ranks user 1's item 11 (reward 2) first, user 3's 12 then 10; B puts
    # user 1's 10 before 11 (tie) and user 3's 10 second.
    dcg = {"A": [2, 1 + L], "B": [1 + 2 * L, L]}
    idcg = [2 + L, 1 + L]
    recall = {"A": [2 / 3, 1], "B": [1, 1 / 2]}
    for model in "AB":
        expected = {
            "dcg": np.mean(dcg[model]),
            "ndcg": np.mean(np.divide(dcg[model], idcg)),
            "pn_dcg": sum(dcg[model]) / sum(idcg),
            "recall": np.mean(recall[model]),
        }
        for metric, value in expected.items():
            row = got[model, metric]
            assert row["value"] == pytest.approx(value, rel=1e-12)
            assert (row["n_users"], row["n_excluded_users"]) == (2, 1)
        for metric, per_user in (("dcg", dcg[model]), ("recall", recall[model])):
            assert (got[model, metric]["ci_low"], got[model, metric]["ci_high"]) == pytest.approx(
                t_interval(per_user), rel=1e-12
            )
    assert got["A", "dcg"]["name"] == "DCG@2" and got["B", "recall"]["name"] == "Recall@2"
    # The paired DCG difference: a one-sample t-test of the per-user differences.
    differences = np.subtract(dcg["A"], dcg["B"])
    paired = {c["metric"]: c for c in report["comparisons"]}["dcg"]
    assert paired["difference"] == pytest.approx(1 - L, rel=1e-12)
    assert paired["p_value"] == pytest.approx(stats.ttest_1samp(differences, 0).pvalue, rel=1e-9)
    assert (paired["ci_low"], paired["ci_high"]) == pytest.approx(
        t_interval(differences), rel=1e-12
    )
    assert paired["name"] == "A − B (DCG@2)" and paired["n_users"] == 2

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| model | metric | value | 95% CI | n_users | excluded |"
    lo, hi = t_interval(dcg["A"])
    assert out[2] == f"| A | DCG@2 | {np.mean(dcg['A']):.4f} | [{lo:.4f}, {hi:.4f}] | 2 | 1 |"
    assert f"A − B (DCG@2) = {1 - L:.6g} [95% CI" in "\n".join(out)


def test_three_users_weighted_and_clipped_by_hand(three_users, tmp_path):
    # Weights min(3, 1/p): item 10 → 2, item 11 → 3 (clipped from 4), item 12 → 1; item 99's
    # propensity 0 is never used (no held-out row), as on Spark.
    report = run(
        tmp_path,
        *_three_user_args(
            three_users, "--propensity", three_users["propensity"], "--clip", "3", "--level", "0.9"
        ),
    )
    got = rows(report)
    assert [r["metric"] for r in report["rows"][:5]] == [
        "dcg",
        "unbiased_dcg",
        "ndcg",
        "pn_dcg",
        "recall",
    ]
    ips = {"A": [2 * 3, 1 + 2 * L], "B": [2 + 2 * 3 * L, 2 * L]}
    idcg = [6 + 2 * L, 2 + L]  # gains sorted: user 1 (6, 2), user 3 (2, 1)
    recall = {"A": [6 / 8, 1], "B": [1, 2 / 3]}
    for model in "AB":
        expected = {
            "dcg": np.mean({"A": [2, 1 + L], "B": [1 + 2 * L, L]}[model]),  # plain: unweighted
            "unbiased_dcg": np.mean(ips[model]),
            "ndcg": np.mean(np.divide(ips[model], idcg)),
            "pn_dcg": sum(ips[model]) / sum(idcg),
            "recall": np.mean(recall[model]),
        }
        for metric, value in expected.items():
            assert got[model, metric]["value"] == pytest.approx(value, rel=1e-12), (model, metric)
        row = got[model, "unbiased_dcg"]
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            t_interval(ips[model], 0.9), rel=1e-12
        )
        assert row["name"] == "IPS-DCG@2"
    assert report["clip"] == 3 and report["level"] == 0.9 and report["comparisons"] == []


def test_csv_output_holds_the_json_rows_and_comparisons(three_users, tmp_path, capsys):
    report = run(
        tmp_path,
        *_three_user_args(three_users, "--compare", "B", "A", "--metrics", "dcg", "recall"),
    )
    out = tmp_path / "table.csv"
    assert (
        main(
            [
                "evaluate",
                *_three_user_args(three_users, "--compare", "B", "A", "--metrics", "dcg", "recall"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert f"CSV in {out} and {tmp_path / 'table-comparisons.csv'}" in capsys.readouterr().out
    with open(out) as handle:
        table = list(csv.DictReader(handle))
    assert [(r["model"], r["metric"]) for r in table] == [
        ("A", "dcg"),
        ("A", "recall"),
        ("B", "dcg"),
        ("B", "recall"),
    ]
    for written, row in zip(table, report["rows"]):
        assert (
            float(written["value"]) == row["value"] and float(written["ci_high"]) == row["ci_high"]
        )
        assert int(written["n_excluded_users"]) == row["n_excluded_users"]
    with open(tmp_path / "table-comparisons.csv") as handle:
        paired = list(csv.DictReader(handle))
    assert [p["name"] for p in paired] == ["B − A (DCG@2)", "B − A (Recall@2)"]
    assert float(paired[0]["difference"]) == pytest.approx(L - 1, rel=1e-12)


# --- random data against the core on hand-built matrices ---------------------------------------


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_held_out_files_match_the_core_on_matrices(tmp_path):
    rng = np.random.default_rng(11)
    n_users, n_items, k, clip = 60, 25, 5, 5.0
    user_ids = np.sort(rng.choice(10**6, n_users, replace=False))
    item_ids = np.sort(rng.choice(10**5, n_items, replace=False))  # columns in increasing id order
    # Every user has held-out rows; the first five only zero rewards (counted as excluded).
    held = rng.random((n_users, n_items)) < 0.15
    held[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    rewards = np.where(held, rng.integers(1, 4, (n_users, n_items)), 0).astype(float)
    rewards[:5] = 0
    y_true = sp.csr_matrix(rewards)
    # Integer scores with many ties; -inf where a model lists nothing; user 7 gets no rows.
    scores = {}
    for name in ("scored", "ranked"):
        s = rng.integers(0, 4, (n_users, n_items)).astype(float)
        s[rng.random(s.shape) < 0.4] = -np.inf
        s[7] = -np.inf
        scores[name] = s
    p = rng.uniform(0.05, 1.0, n_items)

    u, i = np.nonzero(held)
    order = rng.permutation(u.size)  # rows in no particular order
    files = {
        "held_out": write(
            tmp_path / "held_out.parquet",
            {
                "user": user_ids[u[order]],
                "item": item_ids[i[order]],
                "reward": rewards[u, i][order],
            },
        )
    }
    u, i = np.nonzero(np.isfinite(scores["scored"]))
    files["scored"] = write(
        tmp_path / "scored.csv",
        {"user": user_ids[u], "item": item_ids[i], "score": scores["scored"][u, i]},
    )
    # Ranks 1, 2, … by score, ties to the lower id: the same ranking as the scores.
    u, i = np.nonzero(np.isfinite(scores["ranked"]))
    rank = np.zeros(u.size, dtype=np.int64)
    for user in np.unique(u):
        mine = np.flatnonzero(u == user)
        best = sorted(mine, key=lambda r: (-scores["ranked"][user, i[r]], item_ids[i[r]]))
        rank[best] = np.arange(1, len(best) + 1)
    files["ranked"] = write(
        tmp_path / "ranked.parquet", {"user": user_ids[u], "item": item_ids[i], "rank": rank}
    )
    files["propensity"] = write(
        tmp_path / "propensity.csv",
        {"item": np.append(item_ids, 10**6), "propensity": np.append(p, 0.5)},
    )

    report = run(
        tmp_path,
        "--held-out",
        files["held_out"],
        "--recommendations",
        f"scored={files['scored']}",
        "--recommendations",
        f"ranked={files['ranked']}",
        "--propensity",
        files["propensity"],
        "--metrics",
        "dcg",
        "unbiased_dcg",
        "snips_dcg",
        "ndcg",
        "pn_dcg",
        "recall",
        "--k",
        str(k),
        "--clip",
        str(clip),
        "--compare",
        "scored",
        "ranked",
    )
    got = rows(report)
    D = ro.LogDiscount(k)
    core = {
        "dcg": lambda s: ro.dcg(y_true, s, discount=D),
        "unbiased_dcg": lambda s: ro.unbiased_dcg(y_true, s, discount=D, propensity=p, clip=clip),
        "snips_dcg": lambda s: ro.unbiased_dcg(
            y_true, s, discount=D, propensity=p, clip=clip, self_normalised=True
        ),
        "ndcg": lambda s: ro.ndcg(y_true, s, discount=D, propensity=p, clip=clip),
        "pn_dcg": lambda s: ro.pn_dcg(y_true, s, discount=D, propensity=p, clip=clip),
        "recall": lambda s: ro.recall(y_true, s, k=k, propensity=p, clip=clip),
    }
    expected = {(m, metric): f(scores[m]) for m in scores for metric, f in core.items()}
    for key, est in expected.items():
        row = got[key]
        assert row["name"] == est.name
        assert row["value"] == pytest.approx(est.value, rel=1e-12), key
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(est.confidence_interval(), rel=1e-9)
        assert (row["n_users"], row["n_excluded_users"]) == (n_users - 5, 5)
    assert len(report["comparisons"]) == 6
    for paired in report["comparisons"]:
        c = expected["scored", paired["metric"]].compare(expected["ranked", paired["metric"]])
        assert paired["difference"] == pytest.approx(c.difference, rel=1e-12)
        assert paired["p_value"] == pytest.approx(c.p_value, rel=1e-9)


# --- feed logs ---------------------------------------------------------------------------------


@pytest.fixture
def feed_log(tmp_path):
    """Sessions s1, s3 of context u1 and s2 of u2. T1 ranks u1's items 12, 10, 11 and u2's
    12 (and u3, which has no session); T2 puts item 14, never logged, first for u1 and ties 11
    with 10 (10 wins)."""
    return {
        "log": write(
            tmp_path / "log.csv",
            {
                "session": ["s1", "s1", "s1", "s2", "s2", "s3", "s3"],
                "context": ["u1", "u1", "u1", "u2", "u2", "u1", "u1"],
                "item": [10, 11, 12, 10, 12, 11, 13],
                "rank": [1, 2, 3, 1, 2, 1, 2],
                "reward": [1, 0, 1, 0, 1, 1, 0],
                "propensity": [1.0, 0.5, 0.25, 1.0, 0.5, 0.8, 0.4],
            },
        ),
        "T1": write(
            tmp_path / "t1.csv",
            {
                "context": ["u1", "u1", "u1", "u2", "u3"],
                "item": [12, 10, 11, 12, 10],
                "rank": [1, 2, 3, 1, 1],
            },
        ),
        "T2": write(
            tmp_path / "t2.parquet",
            {
                "context": ["u1", "u1", "u1", "u2"],
                "item": [14, 11, 10, 10],
                "score": [9.0, 5.0, 5.0, 1.0],
            },
        ),
    }


def test_feed_log_by_hand(feed_log, tmp_path, capsys):
    report = run(
        tmp_path,
        "--feed-log",
        feed_log["log"],
        "--target",
        f"T1={feed_log['T1']}",
        "--target",
        f"T2={feed_log['T2']}",
        "--k",
        "2",
        "--metrics",
        "dcg",
        "pn_dcg",
        "--compare",
        "T1",
        "T2",
    )
    got = rows(report)
    # Rewarded rows, gain c/ε0: s1 item 10 (1) and 12 (4), s2 item 12 (2), s3 item 11 (1.25).
    # T1: s1 = 4·δ(1) + 1·δ(2), s2 = 2·δ(1), s3 = 0 (rank 3 > K); T2: s1 = 1·δ(2), else 0.
    dcg = {"T1": [4 + L, 2, 0], "T2": [L, 0, 0]}
    idcg = 4 + L + 2 + 1.25
    for target in dcg:
        assert got[target, "dcg"]["value"] == pytest.approx(np.mean(dcg[target]), rel=1e-12)
        assert (got[target, "dcg"]["ci_low"], got[target, "dcg"]["ci_high"]) == pytest.approx(
            t_interval(dcg[target]), rel=1e-12
        )
        assert got[target, "pn_dcg"]["value"] == pytest.approx(sum(dcg[target]) / idcg, rel=1e-12)
        assert (got[target, "dcg"]["n_users"], got[target, "dcg"]["n_excluded_users"]) == (3, 0)
    assert got["T1", "dcg"]["name"] == "logged DCG@2"
    paired = {c["metric"]: c for c in report["comparisons"]}["dcg"]
    differences = np.subtract(dcg["T1"], dcg["T2"])
    assert paired["difference"] == pytest.approx(2.0, rel=1e-12)
    assert paired["p_value"] == pytest.approx(stats.ttest_1samp(differences, 0).pvalue, rel=1e-9)
    assert report["input"] == "feed-log"
    assert capsys.readouterr().out.startswith(
        "| model | metric | value | 95% CI | n_sessions | excluded |"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_feed_log_files_match_the_core_on_matrices(tmp_path):
    rng = np.random.default_rng(5)
    n_sessions, n_contexts, n_items, k, clip = 80, 30, 20, 3, 8.0
    context_ids = np.array(
        sorted(f"c{x}" for x in rng.choice(1000, n_contexts, replace=False)), dtype=object
    )
    item_ids = np.sort(rng.choice(10**4, n_items, replace=False))
    session_ids = rng.choice(10**6, n_sessions, replace=False)
    context_of = rng.integers(0, n_contexts, n_sessions)
    # Feeds of four distinct items out of the first 15: items 15..19 only appear in targets.
    columns = {"session": [], "context": [], "item": [], "rank": [], "reward": [], "propensity": []}
    for s in range(n_sessions):
        for r, i in enumerate(rng.choice(15, 4, replace=False), start=1):
            for name, value in zip(
                columns,
                (
                    session_ids[s],
                    context_ids[context_of[s]],
                    i,
                    r,
                    float(rng.random() < 0.4),
                    rng.uniform(0.1, 1.0),
                ),
            ):
                columns[name].append(value)
    order = rng.permutation(len(columns["item"]))
    cols = {name: np.asarray(values)[order] for name, values in columns.items()}
    log_file = write(
        tmp_path / "log.parquet",
        {
            **cols,
            "context": cols["context"].astype(str),
            "item": item_ids[cols["item"].astype(int)],
        },
    )
    targets, files = {}, {}
    for name in ("T1", "T2"):
        s = rng.integers(0, 5, (n_contexts, n_items)).astype(float)  # ties
        s[rng.random(s.shape) < 0.3] = -np.inf
        targets[name] = s
        c, i = np.nonzero(np.isfinite(s))
        files[name] = write(
            tmp_path / f"{name}.csv",
            {"context": context_ids[c].astype(str), "item": item_ids[i], "score": s[c, i]},
        )
    report = run(
        tmp_path,
        "--feed-log",
        log_file,
        "--target",
        f"T1={files['T1']}",
        "--target",
        f"T2={files['T2']}",
        "--metrics",
        "dcg",
        "ndcg",
        "pn_dcg",
        "--k",
        str(k),
        "--clip",
        str(clip),
        "--compare",
        "T1",
        "T2",
    )
    got = rows(report)
    log = ro.FeedLog.from_arrays(
        cols["session"],
        cols["item"].astype(int),
        cols["rank"],
        cols["reward"],
        context=np.searchsorted(context_ids, cols["context"]),
        propensity=cols["propensity"],
        n_items=n_items,
        n_contexts=n_contexts,
    )
    normalise = {"dcg": None, "ndcg": "per_user", "pn_dcg": "post"}
    expected = {
        (name, metric): ro.logged_dcg(
            log,
            ro.DeterministicRanker(s),
            discount=ro.LogDiscount(k),
            clip=clip,
            normalise=normalise[metric],
        )
        for name, s in targets.items()
        for metric in normalise
    }
    for key, est in expected.items():
        row = got[key]
        assert row["name"] == est.name
        assert row["value"] == pytest.approx(est.value, rel=1e-12), key
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(est.confidence_interval(), rel=1e-9)
        assert (row["n_users"], row["n_excluded_users"]) == (est.n_users, est.n_excluded_users)
    assert len(report["comparisons"]) == 3
    for paired in report["comparisons"]:
        c = expected["T1", paired["metric"]].compare(expected["T2", paired["metric"]])
        assert paired["difference"] == pytest.approx(c.difference, rel=1e-12)
        assert paired["p_value"] == pytest.approx(c.p_value, rel=1e-9)


# --- bad input -------------------------------------------------------------------------------


def _stop(argv, capsys) -> tuple[int, str]:
    """Exit status and the one line on standard error of a command that stops."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    code = stop.value.code
    if isinstance(code, str):  # SystemExit("message"): Python prints it, status 1
        return 1, code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err.strip()


BAD_TABLES = [
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 10, 12], "reward": [1, 2, 1]},
        "has the (user, item) pair (1, 10) more than once, in row 0 (user=1, item=10, reward=1) and row 1",
    ),
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 11, 12], "reward": [1.0, None, 1.0]},
        "has a null in column 'reward', e.g. row 1 (user=1, item=11, reward=None)",
    ),
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 11, 12], "reward": [1.0, -2.0, 1.0]},
        "column 'reward' must hold finite rewards >= 0, got row 1 (user=1, item=11, reward=-2)",
    ),
    ("held_out", {"user": [1, 3], "item": [10, 12], "grade": [1, 1]}, "has no column 'reward'"),
    (
        "A",
        {"user": [1, 9], "item": [11, 10], "rank": [1, 1]},
        "user 9 of recommendations['A'] file",
    ),
    (
        "A",
        {"user": [1, 3], "item": [11, 10], "rank": [1, 1], "score": [1.0, 2.0]},
        "needs exactly one of the columns 'score' (higher is better) or 'rank'",
    ),
    (
        "A",
        {"user": ["u1", "u3"], "item": [11, 10], "rank": [1, 1]},
        "column 'user' must hold one kind of id in every table, got integer ids in held_out file",
    ),
    (
        "propensity",
        {"item": [10, 11], "propensity": [0.5, 0.25]},
        "has no row for item 12 of held_out file",
    ),
    (
        "propensity",
        {"item": [10, 11, 12], "propensity": [0.5, 0.25, 1.5]},
        "column 'propensity' must lie in (0, 1] for every held-out item, got row 2 (item=12, propensity=1.5)",
    ),
    (
        "propensity",
        {"item": [10, 11, 12, 10], "propensity": [0.5, 0.25, 1.0, 0.5]},
        "has item 10 more than once, in row 0 (item=10, propensity=0.5) and row 3",
    ),
]


@pytest.mark.parametrize("which, columns, message", BAD_TABLES)
def test_bad_tables_are_refused_naming_file_column_and_row(
    three_users, tmp_path, capsys, which, columns, message
):
    files = dict(three_users)
    files[which] = write(tmp_path / f"bad_{which}.csv", columns)
    argv = ["evaluate", *_three_user_args(files, "--propensity", files["propensity"])]
    code, err = _stop(argv, capsys)
    assert code == 1 and err.startswith("recpack-ope evaluate: ") and message in err, err
    assert repr(files[which]) in err


def test_bad_feed_logs_are_refused(feed_log, tmp_path, capsys):
    log = pcsv.read_csv(feed_log["log"]).to_pydict()
    log["item"][2] = 10  # session s1 shows item 10 at ranks 1 and 3
    bad = write(tmp_path / "bad_log.csv", log)
    code, err = _stop(["evaluate", "--feed-log", bad, "--target", f"T1={feed_log['T1']}"], capsys)
    assert (
        code == 1
        and f"feed_log file {bad!r} has the (session, item) pair ('s1', 10) more than once" in err
    )
    log = pcsv.read_csv(feed_log["log"]).to_pydict()
    log["propensity"][4] = 0.0
    bad = write(tmp_path / "bad_log.csv", log)
    code, err = _stop(["evaluate", "--feed-log", bad, "--target", f"T1={feed_log['T1']}"], capsys)
    assert (
        code == 1 and f"feed_log file {bad!r}: propensity 0.0 of row 4 lies outside (0, 1]" in err
    )


def test_bad_options_say_what_to_give(three_users, feed_log, capsys):
    files = three_users
    cases = [
        ([], "give --held-out PATH with --recommendations NAME=PATH"),
        (
            ["--held-out", files["held_out"], "--recommendations", files["A"]],
            f"--recommendations takes NAME=PATH, got {files['A']!r}",
        ),
        (
            _three_user_args(files, "--metrics", "unbiased_dcg"),
            "unbiased_dcg weights by inverse propensities: give --propensity PATH",
        ),
        (
            _three_user_args(files, "--compare", "A", "C"),
            "--compare names 'C', which is none of ['A', 'B']",
        ),
        (
            _three_user_args(files, "--partitions", "4"),
            "--partitions takes a positive number of Spark partitions",
        ),
        (
            _three_user_args(files, "--output", "x.txt"),
            "--output must end in .json or .csv, got 'x.txt'",
        ),
        (_three_user_args(files, "--level", "95"), "--level must lie in (0, 1), got 95.0"),
        (
            ["--held-out", "missing.csv", "--recommendations", f"A={files['A']}"],
            "--held-out file 'missing.csv' does not exist",
        ),
        (
            [
                "--feed-log",
                feed_log["log"],
                "--target",
                f"T1={feed_log['T1']}",
                "--metrics",
                "recall",
            ],
            "on a feed log the metrics are dcg, ndcg, pn_dcg, got recall",
        ),
        (
            [
                "--feed-log",
                feed_log["log"],
                "--target",
                f"T1={feed_log['T1']}",
                "--held-out",
                files["held_out"],
            ],
            "not both",
        ),
        (
            [
                "--feed-log",
                feed_log["log"],
                "--target",
                f"T1={feed_log['T1']}",
                "--target",
                f"T2={feed_log['T2']}",
                "--compare",
                "T1",
                "T2",
                "--engine",
                "spark",
            ],
            "--compare on a feed log needs --engine local",
        ),
    ]
    for argv, message in cases:
        code, err = _stop(["evaluate", *argv], capsys)
        assert code == 2 and err.startswith("recpack-ope evaluate: ") and message in err, (
            argv,
            err,
        )


def test_missing_pyarrow_or_pyspark_is_named_with_the_extra(three_users, monkeypatch, capsys):
    hide_package(monkeypatch, "pyarrow")
    code, err = _stop(["evaluate", *_three_user_args(three_users)], capsys)
    assert (
        code == 2
        and "recpack-ope evaluate needs 'pyarrow'" in err
        and 'pip install ".[trec]"' in err
    )
    hide_package(monkeypatch, "pyspark")
    code, err = _stop(["evaluate", "--engine", "spark", *_three_user_args(three_users)], capsys)
    assert (
        code == 2
        and "recpack-ope evaluate needs 'pyspark'" in err
        and 'pip install ".[spark]"' in err
    )
