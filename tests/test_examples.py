"""Every example runs at small size and prints results in their valid ranges.

The estimators' values are checked against independent references in the core tests; here
the point is that the example runs end to end and reports what it promises.
"""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np

from recpack_ope.inference.significance import tied_with_best
from recpack_ope.inference.systems import SystemScores

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_dcg_family_example(capsys):
    module = runpy.run_path(str(EXAMPLES / "dcg_family_movielens.py"))
    out = module["main"](["--users", "150", "--cutoff", "5"])
    printed = capsys.readouterr().out
    assert "power-law exponent" in printed and "item-kNN − popularity" in printed
    for metric in ("DCG", "nDCG", "pnDCG", "IPS-DCG"):
        assert set(out[metric]) == {"popularity", "item-kNN", "p_value"}
        assert 0.0 <= out[metric]["p_value"] <= 1.0
    # normalised values lie in [0, 1] without propensities; DCG at cutoff 5 is at most Σδ
    for metric in ("nDCG", "pnDCG"):
        assert all(0.0 <= out[metric][m] <= 1.0 for m in ("popularity", "item-kNN"))
    assert out["DCG"]["item-kNN"] <= sum(1 / math.log2(r + 1) for r in range(1, 6))


def test_simpsons_paradox_example(capsys, tmp_path):
    module = runpy.run_path(str(EXAMPLES / "simpsons_paradox.py"))
    out = module["main"](["--max-strata", "3", "--output", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "paper BPR10" in printed and "| 3 | mass |" in printed
    assert set(out["sensitivity"]) == {(b, n) for b in ("width", "mass") for n in (2, 3)}
    # Two equal-width strata re-computed from the kept rankings are the evaluation's own.
    again = out["sensitivity"][("width", 2)].row("Stratified")
    assert again.value_a == out["table2"].report.row("Stratified").value_a
    for report in out["sensitivity"].values():
        assert abs(sum(r.share for r in report.strata) - 1) < 1e-12


def test_logged_feedback_example(capsys):
    module = runpy.run_path(str(EXAMPLES / "logged_feedback.py"))
    out = module["main"](["--users", "800", "--items", "80", "--feed", "10"])
    assert "EM position bias" in capsys.readouterr().out
    assert out["em_max_error"] < 0.1  # 24k impressions: the EM spread per rank is ≈ 0.02
    for curve in ("true curve", "learnt curve"):
        for target in ("sharp", "blurred"):
            row = out[curve][target]
            assert abs(row["estimate"] - row["online"]) < 3 * row["se"]
        assert out[curve]["p_value_greater"] < 0.01  # the sharper ranker wins online by 0.76


def test_cornac_sweep_picks_by_its_target_and_fits_propensities_on_training(capsys):
    module = runpy.run_path(str(EXAMPLES / "sweep_cornac.py"))
    out = module["main"](["--users", "100"])
    printed = capsys.readouterr().out
    assert "fitted on the training interactions only" in printed
    metric = out["target"].measure
    assert metric == "IPS-DCG@10"
    per_user = {r.model_name: r.metric_user_results for r in out["experiment"].result}
    # The pick is the argmax of the target's averages as Cornac reports them.
    averages = {r.model_name: r.metric_avg_results[metric] for r in out["experiment"].result}
    assert out["pick"] == max(averages, key=averages.get)
    assert out["pick_plain"] == max(out["plain"], key=out["plain"].get)
    # Ties recomputed from the per-user values, outside the adapter.
    scores = SystemScores.from_user_values({n: r[metric] for n, r in per_user.items()}, metric)
    assert set(out["tied"]) == set(tied_with_best(scores).tied)
    # Propensities saw the training ratings only: their counts are the training matrix's
    # per-item nonzeros, and differ from the counts over training and test ratings.
    split = out["split"]
    train = split.train_set.matrix.tocsc()
    expected = np.zeros(split.total_items)
    expected[: train.shape[1]] = np.diff(train.indptr)
    np.testing.assert_array_equal(out["propensity"].counts_, expected)
    test_items = np.bincount(split.test_set.uir_tuple[1], minlength=split.total_items)
    assert not np.array_equal(out["propensity"].counts_, expected + test_items)
