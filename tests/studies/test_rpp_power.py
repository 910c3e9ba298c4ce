"""The rpp-power reproduction on MovieLens-100K: counts checked against scipy's tests."""

from __future__ import annotations

import itertools
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from recpack_ope.cli import main
from recpack_ope.studies.rpp_power import RPPPowerConfig, run_rpp_power

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def result(movielens):
    return run_rpp_power(RPPPowerConfig(depth=50, n_resamples=100), progress=False)


def test_pool_and_bonferroni_counts_equal_scipy(result):
    assert len(result.samples["RPP"].names) == 21 and result.power.n_pairs == 210
    n_pairs = 210
    for measure, sample in result.samples.items():
        separated = 0
        for s, t in itertools.combinations(range(21), 2):
            if measure.endswith("RPP"):
                p = stats.ttest_1samp(sample.per_user[:, s, t], 0.0).pvalue
            else:
                p = stats.ttest_rel(sample.per_user[:, s], sample.per_user[:, t]).pvalue
            p = 1.0 if np.isnan(p) else p
            separated += min(1.0, p * n_pairs) < 0.05
        assert result.power.power["bonferroni"][measure] == pytest.approx(separated / n_pairs)
    # Every measure puts an EASE model first and random scores last.
    for measure in result.samples:
        order = result.ordering(measure)
        assert order[0].startswith("EASE") and order[-1] == "Random"
    assert result.kendall_tau("nDCG@50")["nDCG@50"] == pytest.approx(1.0)


def test_reproduce_command_writes_the_report(tmp_path, capsys, movielens):
    assert (
        main(
            [
                "reproduce",
                "rpp-power",
                "--depth",
                "50",
                "--resamples",
                "100",
                "--quiet",
                "--output",
                str(tmp_path),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "paper ml-1M | 94.29" in printed and "21 models on ml-100k" in printed
    report = json.loads((tmp_path / "power.json").read_text())
    assert set(report["power"]) == {"tukey", "bonferroni"}
    assert set(report["power"]["tukey"]) == {
        "RPP",
        "dcgRPP",
        "invRPP",
        "nDCG@50",
        "DCG@50",
        "Recall@50",
    }
    assert (tmp_path / "power.md").read_text().count("|") > 40


def test_rpp_power_example(capsys, tmp_path, movielens):
    module = runpy.run_path(str(EXAMPLES / "rpp_power.py"))
    out = module["main"](
        ["--depth", "30", "--resamples", "50", "--shallow", "10", "--output", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    assert "pairs separated by RPP but not by nDCG@30" in printed and "depth 10:" in printed
    assert set(out["orderings"]) == {"mc4", "borda", "mean", "nDCG@30"}
    assert all(0.0 <= v <= 1.0 for v in out["shallow"][10].values())
