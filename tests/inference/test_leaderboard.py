"""The leaderboard against scipy.stats (t intervals, ttest_rel), Holm's and the other corrections
written out by hand, tied_with_best run directly, and exports written out by hand."""

import csv
import io
import json
import math
import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_hex
from scipy import stats

from recpack_ope.inference import (
    EstimateResult,
    Leaderboard,
    Moments,
    SummaryEstimate,
    SystemScores,
    leaderboard,
    tied_with_best,
)
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.inference.leaderboard import FORMATS, significant
from recpack_ope.metrics import dcg, ips_dcg
from recpack_ope.propensity import LogDiscount

matplotlib.use("Agg")

MODELS = ("EASE", "kNN_50", "pop")
METRICS = ("DCG@3", "Recall@3")
# Per-user values of 8 users: rows are models, one array per metric. Means 0.8, 0.75, 0.2
# (DCG@3) and 0.5, 0.625, 0.275 (Recall@3), none on a rounding boundary at 3 digits.
VALUES = {
    "DCG@3": np.array(
        [
            [1.0, 0.8, 0.6, 0.9, 0.7, 1.0, 0.6, 0.8],
            [0.9, 0.8, 0.7, 0.8, 0.6, 0.9, 0.6, 0.7],
            [0.2, 0.1, 0.3, 0.2, 0.0, 0.4, 0.1, 0.3],
        ]
    ),
    "Recall@3": np.array(
        [
            [0.5, 0.5, 0.4, 0.6, 0.5, 0.5, 0.3, 0.7],
            [0.6, 0.7, 0.5, 0.7, 0.6, 0.6, 0.5, 0.8],
            [0.3, 0.2, 0.4, 0.3, 0.2, 0.3, 0.2, 0.3],
        ]
    ),
}


def result(metric: str, values, users=None) -> EstimateResult:
    values = np.asarray(values, dtype=float)
    users = np.arange(values.size) if users is None else np.asarray(users)
    return EstimateResult(metric, values, (1,), users, 0)


def results() -> dict:
    return {
        model: {metric: result(metric, VALUES[metric][i]) for metric in METRICS}
        for i, model in enumerate(MODELS)
    }


def summaries() -> dict:
    """The same values as estimates from merged moments, all from one pass (Spark's form)."""
    columns = [VALUES[metric][i] for i in range(3) for metric in METRICS]
    moments = Moments.from_terms(np.column_stack(columns))
    return {
        model: {
            metric: SummaryEstimate.product(metric, moments, [2 * i + k], (1,))
            for k, metric in enumerate(METRICS)
        }
        for i, model in enumerate(MODELS)
    }


def corrected(p: np.ndarray, method: str) -> np.ndarray:
    """Bonferroni, Holm (step-down) and Benjamini–Hochberg (step-up), written out."""
    n = p.size
    order = list(np.argsort(p))
    out = np.empty(n)
    if method == "none":
        return p
    if method == "bonferroni":
        return np.minimum(n * p, 1.0)
    if method == "holm":
        running = 0.0
        for k, i in enumerate(order):
            running = max(running, (n - k) * p[i])
            out[i] = min(running, 1.0)
        return out
    running = 1.0
    for k in range(n - 1, -1, -1):
        i = order[k]
        running = min(running, n / (k + 1) * p[i])
        out[i] = running
    return out


def expected_p(metric: str, method: str) -> np.ndarray:
    pairs = [(0, 1), (0, 2), (1, 2)]
    raw = np.array([stats.ttest_rel(*VALUES[metric][[s, t]]).pvalue for s, t in pairs])
    p = np.ones((3, 3))
    for (s, t), q in zip(pairs, corrected(raw, method), strict=True):
        p[s, t] = p[t, s] = q
    return p


@pytest.fixture(scope="module")
def board() -> Leaderboard:
    return leaderboard(results())


def test_values_and_intervals_are_the_means_and_student_t_intervals():
    board = leaderboard(results(), level=0.9)
    for metric in METRICS:
        standing = board[metric]
        assert standing.models == MODELS
        x = VALUES[metric]
        np.testing.assert_allclose(standing.value, x.mean(axis=1), rtol=1e-12)
        for i in range(3):
            low, high = stats.t.interval(0.9, df=7, loc=x[i].mean(), scale=stats.sem(x[i]))
            np.testing.assert_allclose(standing.interval[i], [low, high], rtol=1e-12)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "none"])
def test_pairwise_p_values_are_ttest_rel_corrected_over_the_metrics_pairs(method):
    board = leaderboard(results(), correction=method, alpha=0.001)
    for metric in METRICS:
        p = expected_p(metric, method)
        np.testing.assert_allclose(board[metric].p_value, p, rtol=1e-10)
        means = VALUES[metric].mean(axis=1)
        better = (p < 0.001) & (means[:, None] > means[None, :])
        np.testing.assert_array_equal(board[metric].better, better)


def test_holm_at_alpha_decides_which_model_beats_which(board):
    # Holm over 3 pairs (raw p from ttest_rel): DCG@3 EASE − kNN_50 0.104 stays above 0.05;
    # every other pair is below 0.002.
    assert board["DCG@3"].better_than("EASE") == ("pop",)
    assert board["DCG@3"].better_than("kNN_50") == ("pop",)
    assert board["Recall@3"].better_than("kNN_50") == ("EASE", "pop")
    assert board["Recall@3"].better_than("EASE") == ("pop",)
    assert board["Recall@3"].better_than("pop") == ()
    assert (board["DCG@3"].best, board["Recall@3"].best) == ("EASE", "kNN_50")


def test_tied_set_is_hsus_mcb_run_directly(board):
    for metric in METRICS:
        direct = tied_with_best(SystemScores(MODELS, VALUES[metric].T, np.arange(8), metric))
        assert set(board[metric].tied) == set(direct.tied)
        assert board[metric].tied_by == "Hsu's MCB, α=0.05"
    assert board["DCG@3"].tied == ("EASE", "kNN_50")
    assert board["Recall@3"].tied == ("kNN_50",)


def test_summaries_give_the_same_numbers_and_tie_by_the_pairwise_tests():
    memory, merged = leaderboard(results()), leaderboard(summaries())
    for metric in METRICS:
        a, b = memory[metric], merged[metric]
        np.testing.assert_allclose(b.value, a.value, rtol=1e-12)
        np.testing.assert_allclose(b.interval, a.interval, rtol=1e-10)
        np.testing.assert_allclose(b.p_value, a.p_value, rtol=1e-8)
        # Without per-user values the tie is "not significantly worse than the best" by the
        # Holm-corrected pairwise test: DCG@3's kNN_50 has p = 0.104 against EASE.
        p = expected_p(metric, "holm")[MODELS.index(b.best)]
        assert b.tied == tuple(m for m, q in zip(MODELS, p, strict=True) if q >= 0.05)
        assert b.tied_by == "paired t-tests against the best, Holm over all pairs, α=0.05"
    assert merged["DCG@3"].tied == ("EASE", "kNN_50")


def test_one_model_is_its_own_best():
    board = leaderboard({"only": {"DCG@3": result("DCG@3", [1.0, 2.0, 3.0])}})
    standing = board["DCG@3"]
    assert (standing.best, standing.tied, standing.better_than("only")) == ("only", ("only",), ())
    assert standing.p_value.tolist() == [[1.0]]


def test_to_markdown_is_the_table_written_by_hand(board):
    assert board.to_markdown() == (
        "| # | model | DCG@3 | Recall@3 |\n"
        "|---|---|---|---|\n"
        "| a | EASE | **0.800**^c | 0.500^c |\n"
        "| b | kNN_50 | 0.750^c | **0.625**^ac |\n"
        "| c | pop | 0.200 | 0.275 |\n"
        "\n"
        "Bold: the best model of each metric. ^xy: significantly better than models x and y "
        "(two-sided paired t-tests over users, Holm-corrected over each metric's 3 pairs, "
        "p < 0.05)."
    )


def test_to_latex_is_the_booktabs_table_written_by_hand(board):
    assert board.to_latex() == (
        "\\begin{table}[t]\n"
        "\\centering\n"
        "\\caption{Bold: the best model of each metric. A superscript lists the models (by "
        "letter) a model is significantly better than (two-sided paired t-tests over users, "
        "Holm-corrected over each metric's 3 pairs, $p < 0.05$).}\n"
        "\\label{tab:leaderboard}\n"
        "\\begin{tabular}{llll}\n"
        "\\toprule\n"
        "\\# & Model & DCG@3 & Recall@3 \\\\\n"
        "\\midrule\n"
        "a & EASE & \\textbf{0.800}\\textsuperscript{c} & 0.500\\textsuperscript{c} \\\\\n"
        "b & kNN\\_50 & 0.750\\textsuperscript{c} & \\textbf{0.625}\\textsuperscript{ac} \\\\\n"
        "c & pop & 0.200 & 0.275 \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n"
        "\\end{table}"
    )


def test_digits_are_significant_not_decimals(board):
    assert "**0.8000**^c" in board.to_markdown(digits=4)
    assert "| c | pop | 0.2 | 0.3 |" in board.to_markdown(digits=1)
    cases = {0.41234: "0.412", 0.0981234: "0.0981", 12.345: "12.3", 0.99961: "1.00", 0.0: "0.00"}
    assert {v: significant(v) for v in cases} == cases
    assert significant(-0.0412345, 2) == "-0.041"
    with pytest.raises(ValueError, match="digits"):
        significant(0.5, 0)


def test_to_pandas_is_the_tidy_table(board):
    frame = board.to_pandas()
    assert list(frame.columns) == [
        "model",
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "best",
        "tied_with_best",
        "better_than",
        "reliable",
    ]
    assert frame["reliable"].all()  # plain means: no weights to flag
    assert list(zip(frame["model"], frame["metric"], strict=True)) == [
        (m, k) for m in MODELS for k in METRICS
    ]
    row = frame[(frame["model"] == "kNN_50") & (frame["metric"] == "Recall@3")].iloc[0]
    x = VALUES["Recall@3"][1]
    low, high = stats.t.interval(0.95, df=7, loc=x.mean(), scale=stats.sem(x))
    assert row["value"] == pytest.approx(0.625, rel=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-12)
    assert bool(row["best"]) and bool(row["tied_with_best"])
    assert row["better_than"] == ("EASE", "pop")
    assert frame["best"].sum() == 2
    assert frame["tied_with_best"].tolist() == [True, False, True, True, False, False]


def test_html_json_and_csv_carry_the_same_content(board):
    page = board._repr_html_()
    assert board.to("html") == page
    assert "<td><b>0.800</b><sup>c</sup></td>" in page
    assert "<td><b>0.625</b><sup>ac</sup></td>" in page
    assert page.count("<tr>") == 4
    document = json.loads(board.to("json"))
    assert (document["models"], document["metrics"]) == (list(MODELS), list(METRICS))
    p = expected_p("Recall@3", "holm")
    assert document["p_values"]["Recall@3"]["EASE"]["pop"] == pytest.approx(p[0, 2], rel=1e-10)
    assert document["rows"][3]["better_than"] == ["EASE", "pop"]
    rows = list(csv.DictReader(io.StringIO(board.to("csv"))))
    assert [r["better_than"] for r in rows] == ["pop", "pop", "pop", "EASE;pop", "", ""]
    assert float(rows[0]["value"]) == pytest.approx(0.8, rel=1e-12)


def test_every_model_tied_exactly_for_the_best_is_bold_in_every_export():
    shared = result("dcg", [1.0, 0.5, 0.25, 0.75])
    # C is the same per-user values in another order: the same mean, 0.625, by hand
    board = leaderboard(
        {
            "A": {"dcg": shared, "r": result("r", [0.5, 0.5, 0.5, 0.5])},
            "B": {"dcg": shared, "r": result("r", [0.25, 0.5, 0.5, 0.5])},
            "C": {"dcg": result("dcg", [0.75, 0.25, 0.5, 1.0]), "r": result("r", [0, 0, 0, 1.0])},
            "D": {"dcg": result("dcg", [0.0, 0.5, 0.25, 0.75]), "r": result("r", [0, 0, 0, 0.5])},
        }
    )
    assert board["dcg"].value.tolist() == [0.625, 0.625, 0.625, 0.375]
    assert board["dcg"].best == "A" and board["dcg"].best_models == ("A", "B", "C")
    assert board["r"].best_models == ("A",)
    caption = "Bold: the best model(s) of each metric, every one with the highest value."
    markdown = board.to_markdown()
    assert markdown.splitlines()[2:6] == [
        "| a | A | **0.625** | **0.500** |",
        "| b | B | **0.625** | 0.438 |",
        "| c | C | **0.625** | 0.250 |",
        "| d | D | 0.375 | 0.125 |",
    ]
    assert markdown.splitlines()[7].startswith(caption)
    latex = board.to_latex()
    assert r"b & B & \textbf{0.625} & 0.438 \\" in latex and "\\caption{" + caption in latex
    assert r"c & C & \textbf{0.625} & 0.250 \\" in latex
    assert latex.count(r"\textbf{") == 4
    page = board.to_html()
    assert page.count("<b>0.625</b>") == 3 and page.count("<b>") == 4 and caption in page
    rows = json.loads(board.to("json"))["rows"]
    assert [(r["model"], r["metric"]) for r in rows if r["best"]] == [
        ("A", "dcg"),
        ("A", "r"),
        ("B", "dcg"),
        ("C", "dcg"),
    ]
    table = list(csv.DictReader(io.StringIO(board.to("csv"))))
    assert [r["best"] for r in table] == ["True", "True", "True", "False", "True", "False"] + [
        "False"
    ] * 2
    assert board.to_pandas()["best"].tolist() == [r["best"] == "True" for r in table]
    ax = board.plot_forest("dcg")
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["A", "B", "C"]
    # a difference in the last bit is not a tie: only the exact best is bold
    # (B's mean is 0.5 + 2**-53, exactly representable, so its sum rounds nothing)
    nudged = leaderboard(
        {
            "A": {"dcg": result("dcg", [0.5, 0.5])},
            "B": {"dcg": result("dcg", [0.5, 0.5 + 2**-52])},
        }
    )
    assert nudged["dcg"].value[1] - nudged["dcg"].value[0] > 0
    assert nudged["dcg"].best_models == ("B",)
    assert nudged.to_markdown().startswith(
        "| # | model | dcg |\n|---|---|---|\n| a | A | 0.500 |\n| b | B | **0.500** |\n\n"
        "Bold: the best model of each metric."
    )


def test_export_writes_the_text_and_refuses_an_unknown_format(board, tmp_path):
    path = tmp_path / "board.tex"
    text = board.export("latex", path)
    assert text == board.to_latex() and path.read_text(encoding="utf-8") == text + "\n"
    for format in ("pdf", None, "LaTeX"):
        with pytest.raises(ValueError, match=r"format must be one of .*'latex'.*'csv'") as error:
            board.to(format)
        assert repr(format) in str(error.value)
        with pytest.raises(ValueError, match="format"):
            board.export(format, tmp_path / "x")
    assert FORMATS == ("latex", "markdown", "html", "json", "csv")


def test_latex_and_markdown_escape_names():
    board = leaderboard(
        {
            "A&B | 50%": {"nDCG_10": result("nDCG", [1.0, 2.0, 3.0])},
            "c": {"nDCG_10": result("nDCG", [0.0, 1.0, 1.0])},
        }
    )
    latex, markdown = board.to_latex(), board.to_markdown()
    assert r"a & A\&B | 50\% & \textbf{2.00}" in latex and r"Model & nDCG\_10 \\" in latex
    assert r"| a | A&B \| 50% | **2.00** |" in markdown


def test_more_than_26_models_get_two_letter_labels_separated_by_commas():
    n = 28
    columns = np.column_stack([np.arange(5) + 10 * i + 0.1 * (i % 3) for i in range(n)])
    moments = Moments.from_terms(columns)
    names = [f"m{i}" for i in range(n)]
    board = leaderboard(
        {
            name: {"x": SummaryEstimate.product("x", moments, [i], (1,))}
            for i, name in enumerate(names)
        }
    )
    assert [board.letters[name] for name in ("m0", "m25", "m26", "m27")] == ["a", "z", "aa", "ab"]
    # Every difference is a constant shift: infinitely significant, so m2 beats m0 and m1.
    assert "| c | m2 | 22.2^a,b |" in board.to_markdown()


def test_bad_input_is_refused_with_the_argument_named():
    good = results()
    with pytest.raises(ValueError, match="results must map model names .* empty mapping"):
        leaderboard({})
    with pytest.raises(ValueError, match="results must map"):
        leaderboard([("EASE", good["EASE"])])
    missing = {**good, "pop": {"DCG@3": good["pop"]["DCG@3"]}}
    with pytest.raises(ValueError, match="model 'pop' has no metric 'Recall@3'"):
        leaderboard(missing)
    extra = {**good, "pop": {**good["pop"], "MRR": good["pop"]["DCG@3"]}}
    with pytest.raises(ValueError, match="model 'EASE' has no metric 'MRR', which 'pop' has"):
        leaderboard(extra)
    shifted = {**good, "pop": {**good["pop"], "Recall@3": result("R", np.ones(8), np.arange(1, 9))}}
    with pytest.raises(
        ValueError, match="metric 'Recall@3' of models 'EASE' and 'pop' cannot be paired"
    ):
        leaderboard(shifted)
    other_pass = summaries()
    other_pass["pop"] = summaries()["pop"]
    with pytest.raises(ValueError, match="metric 'DCG@3' of models 'EASE' and 'pop'"):
        leaderboard(other_pass)
    with pytest.raises(ValueError, match=r"correction must be one of .*'holm'.*got 'sidak'"):
        leaderboard(good, correction="sidak")
    for bad in (0, 1, 1.5, -0.1, math.nan, "0.95"):
        with pytest.raises(ValueError, match="level must"):
            leaderboard(good, level=bad)
        with pytest.raises(ValueError, match="alpha must"):
            leaderboard(good, alpha=bad)
    with pytest.raises(TypeError, match=r"results\['EASE'\]\['DCG@3'\] is a float"):
        leaderboard({**good, "EASE": {"DCG@3": 0.8, "Recall@3": 0.5}})
    with pytest.raises(ValueError, match="model names must be strings, got 3"):
        leaderboard({3: good["EASE"]})
    board = leaderboard(good)
    with pytest.raises(ValueError, match="metric: no metric 'MRR'; the metrics are"):
        board.plot_significance("MRR")
    with pytest.raises(ValueError, match="model: no model 'x'"):
        board["DCG@3"].better_than("x")


def test_forest_plot_draws_every_interval_and_marks_best_and_tied(board):
    panels = board.plot_forest()
    assert [ax.get_title() for ax in panels] == list(METRICS)
    for ax, metric in zip(panels, METRICS, strict=True):
        standing = board[metric]
        bars = ax.containers
        assert len(bars) == 3
        for i, bar in enumerate(bars):
            (segment,) = bar.lines[2][0].get_segments()
            np.testing.assert_allclose(segment[:, 0], standing.interval[i], rtol=1e-12)
            assert segment[0, 1] == 2 - i  # first model on top
            np.testing.assert_allclose(
                np.asarray(bar.lines[0].get_xdata(), float), [standing.value[i]]
            )
        colours = [to_hex(bar.lines[0].get_color()) for bar in bars]
        kinds = [
            "C3" if m == standing.best else "C1" if m in standing.tied else "C0" for m in MODELS
        ]
        assert colours == [to_hex(k) for k in kinds]
        bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
        assert bold == [standing.best]
    assert [to_hex(b.lines[0].get_color()) for b in panels[1].containers] == [
        to_hex("C0"),
        to_hex("C3"),
        to_hex("C0"),
    ]
    one = board.plot_forest("Recall@3")
    assert one.get_title() == "Recall@3" and len(one.containers) == 3


def test_significance_heatmap_is_the_corrected_matrix_with_stars(board):
    ax = board.plot_significance("DCG@3")
    (image,) = ax.get_images()
    shown = np.asarray(image.get_array(), dtype=float)
    expected = expected_p("DCG@3", "holm")
    np.fill_diagonal(expected, np.nan)
    np.testing.assert_allclose(shown, expected, rtol=1e-10)
    starred = sorted(t.get_text() for t in ax.texts if t.get_text().endswith("*"))
    # Four of the six off-diagonal cells (both orders of EASE–pop and kNN_50–pop).
    assert len(starred) == 4 and len(ax.texts) == 6
    assert "0.1" in [t.get_text() for t in ax.texts]


def test_an_estimate_its_weights_flag_is_marked_in_every_export():
    # 60 users click item 1; user 0 also item 0, of propensity 0.001. At cutoff 1, A shows
    # user 0 item 0 (weight min(100, 1000) = 100) and the others item 1 (weight 1): Kish ESS
    # 159² / (100² + 59) = 2.5 < 50, flagged. B shows everyone item 1: ESS 60 of 60, reliable.
    y_true = np.zeros((60, 2))
    y_true[:, 1], y_true[0, 0] = 1, 1
    b_scores = np.tile([0.0, 1.0], (60, 1))
    a_scores = b_scores.copy()
    a_scores[0] = [1.0, 0.0]
    p = np.array([0.001, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        results = {
            name: {
                "IPS-DCG@1": ips_dcg(y_true, s, discount=LogDiscount(1), propensity=p),
                "DCG@1": dcg(y_true, s, discount=LogDiscount(1)),
            }
            for name, s in (("A", a_scores), ("B", b_scores))
        }
    a_ips = results["A"]["IPS-DCG@1"].diagnostics
    assert a_ips.ess == pytest.approx(159**2 / (100**2 + 59), rel=1e-12) and not a_ips.reliable
    assert results["B"]["IPS-DCG@1"].diagnostics.reliable
    board = leaderboard(results)
    assert board["IPS-DCG@1"].reliable.tolist() == [False, True]
    assert board["DCG@1"].reliable.tolist() == [True, True]
    # A's IPS-DCG: (100 + 59) / 60 = 2.65, the best, bold, then the dagger.
    markdown = board.to_markdown()
    assert "| a | A | **2.65**† | " in markdown
    assert markdown.count("†") == 2  # the cell and the legend
    assert "†: the weights' diagnostics flag the estimate as unreliable" in markdown
    latex = board.to_latex()
    assert r"\textbf{2.65}\dag" in latex and r"\dag: the weights' diagnostics" in latex
    assert "<b>2.65</b>†" in board.to_html()
    frame = board.to_pandas()
    assert frame["reliable"].tolist() == [False, True, True, True]
    # Without flagged estimates nothing says so, and one model has no tests to describe.
    alone = leaderboard({"B": results["B"]}).to_markdown()
    assert alone.endswith("\n\nBold: the best model of each metric.")
