"""``recpack-ope reproduce open-bandit`` on the obp sample: every number recomputed from the
CSV files with numpy and scipy."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from conftest import hide_package
from scipy import stats

from recpack_ope.cli import main
from recpack_ope.io import load_bts_prior
from recpack_ope.logged import ThompsonSamplingRanker
from recpack_ope.studies.open_bandit import (
    RANKING_LEVEL,
    OpenBanditConfig,
    run_open_bandit,
    write_report,
)


def _by_hand(folder, campaign: str, level: float = 0.95) -> dict:
    """The estimates and the on-policy click rate from the CSVs, with Student-t intervals."""
    random = pd.read_csv(folder / "random" / campaign / f"{campaign}.csv")
    bts = pd.read_csv(folder / "bts" / campaign / f"{campaign}.csv")
    m = ThompsonSamplingRanker(*load_bts_prior(campaign), n_ranks=3).rank_marginals()
    item, position = random.item_id.to_numpy(), random.position.to_numpy()
    click = random.click.to_numpy()
    n_items = m.shape[0]
    terms = {
        # r · π(a at k) / π0(a at k), π0 the logged propensity (1 / n_items)
        "independent IPS": click * m[item, position - 1] / random.propensity_score.to_numpy(),
        # r · ε(a) / ε0(a): the probability that either policy shows a, anywhere in 3 positions
        "logged DCG (flat view)": click * m[item].sum(axis=1) / (3 / n_items),
        "on-policy": bts.click.to_numpy().astype(float),
    }
    out = {}
    for name, x in terms.items():
        half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
        out[name] = (x.mean(), x.mean() - half, x.mean() + half)
    return out


@pytest.fixture(scope="module")
def men():
    return run_open_bandit(OpenBanditConfig(campaigns=("men",)), progress=False)


def test_estimates_and_truth_match_a_hand_computation(men, open_bandit_sample):
    expected = _by_hand(open_bandit_sample, "men")
    truth = expected.pop("on-policy")
    assert [r["estimator"] for r in men.rows] == list(expected)
    for row in men.rows:
        value, low, high = expected[row["estimator"]]
        assert (row["estimate"], row["low"], row["high"]) == pytest.approx(
            (value, low, high), rel=1e-10
        )
        assert (row["on_policy"], row["on_policy_low"], row["on_policy_high"]) == pytest.approx(
            truth, rel=1e-10
        )
        assert row["relative_error"] == pytest.approx(value / truth[0] - 1, rel=1e-10)
        assert row["covered"] == (low <= truth[0] <= high)
    # 69 clicks in 10,000 bts impressions (counted in the CSV).
    assert truth[0] == 0.0069
    random = pd.read_csv(open_bandit_sample / "random" / "men" / "men.csv")
    by_position = random.groupby("position").click.sum().tolist()
    assert men.logs["men/random"]["clicks_by_position"] == by_position == [10, 22, 14]


def test_ranking_level_estimators_are_refused_with_the_reason(men):
    refused = men.not_applicable["men"]
    assert list(refused) == list(RANKING_LEVEL)
    # The first impression of random/men is at position 3 (row 0 of the CSV): a session
    # without ranks 1 and 2.
    for name, reason in refused.items():
        assert reason.startswith(f"{name} needs whole rankings")
        assert "missing rank 1" in reason
    counts = men.logs["men/random"]
    assert (counts["timestamps"], counts["single"]) == (9989, 9978)
    assert "men: 10000 impressions, 9989 timestamps, 9978 with one row" in men.findings()


def test_report_files_hold_the_rows(men, tmp_path):
    folder = write_report(men, tmp_path / "report", plots=False)
    with (folder / "open-bandit.csv").open() as handle:
        written = list(csv.DictReader(handle))
    assert [float(r["estimate"]) for r in written] == [r["estimate"] for r in men.rows]
    assert [r["covered"] for r in written] == [str(r["covered"]) for r in men.rows]
    saved = json.loads((folder / "open-bandit.json").read_text())
    assert saved["estimates"] == men.rows
    assert saved["not_applicable"] == men.not_applicable
    assert men.table() in (folder / "open-bandit.md").read_text()


def test_the_command_prints_the_table(capsys, tmp_path, men):
    code = main(
        [
            "reproduce",
            "open-bandit",
            "--campaigns",
            "men",
            "--output",
            str(tmp_path / "out"),
            "--no-plots",
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert men.table() in printed
    assert "not applicable: standard_ips" in printed
    assert (tmp_path / "out" / "open-bandit.csv").is_file()


def test_without_obp_the_command_says_what_to_install(monkeypatch, capsys):
    hide_package(monkeypatch, "obp")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "open-bandit", "--quiet", "--no-plots"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "recpack-ope reproduce open-bandit needs 'obp': pip install --no-deps obp==0.4.1" in err


def test_an_unknown_campaign_is_refused():
    with pytest.raises(ValueError, match="campaign must be one of"):
        run_open_bandit(OpenBanditConfig(campaigns=("kids",)), progress=False)
