"""The main job: `recpack-ope demo` on the simulator.

Statistics are recomputed here from the per-model values with scipy; the Jeunen et al.
claims are checked on a world that satisfies their assumptions.
"""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
from conftest import hide_package
from scipy import stats

from recpack_ope.cli import main
from recpack_ope.studies.demo import REFERENCE, DemoConfig, model_pool, run_demo, write_report

SMALL = DemoConfig(n_users=3000, n_items=300, backend="numpy")


@pytest.fixture(scope="module")
def result():
    return run_demo(SMALL, progress=False)


def test_pool_has_at_least_20_models_of_varied_quality(result):
    assert len(result.models) >= 20 and len(set(result.models)) == len(result.models)
    assert {"random", "popularity"} <= set(result.models)
    # varied quality: the best model earns over twice what random recommendations do, and
    # the trained models spread between random and the best
    assert result.online.max() > 2 * result.online[result.models.index("random")]
    assert (
        np.ptp(np.delete(result.online, result.models.index("random"))) > 0.3 * result.online.max()
    )


def test_intervals_are_the_estimators_own(result):
    # recompute one model's nDCG interval from its per-user values with scipy's t interval
    from recpack_ope import LogDiscount, ndcg
    from recpack_ope.metrics.ranking import TopK
    from recpack_ope.simulation import PopularityPolicy, SimulatedWorld
    from recpack_ope.simulation.baselines import Popularity

    world = SimulatedWorld(n_users=SMALL.n_users, n_items=SMALL.n_items, seed=SMALL.seed)
    policy = PopularityPolicy(temperature=SMALL.temperature)
    train = world.log(policy, feed_length=SMALL.feed_length, n_feeds=SMALL.train_feeds, seed=1)
    test = world.log(policy, feed_length=SMALL.feed_length, seed=2)
    top = TopK.from_scores(
        Popularity().fit(train.clicks.sign()).predict(train.clicks), SMALL.cutoff
    )
    per_user = ndcg(test.clicks, top, discount=LogDiscount(SMALL.cutoff)).per_user
    low, high = stats.t.interval(0.95, per_user.size - 1, per_user.mean(), stats.sem(per_user))
    m = result.models.index("popularity")
    assert result.values["nDCG"][m] == pytest.approx(per_user.mean(), abs=1e-12)
    assert result.half_widths["nDCG"][m] == pytest.approx((high - low) / 2, rel=1e-9)


def test_summary_statistics_match_scipy(result):
    best = int(np.argmax(result.online))
    for s in result.summaries:
        v = result.values[s.metric]
        assert s.kendall == pytest.approx(stats.kendalltau(result.online, v)[0], abs=1e-12)
        assert s.pearson == pytest.approx(stats.pearsonr(result.online, v)[0], abs=1e-12)
        pairs = [(j, k) for j in range(v.size) for k in range(j + 1, v.size)]
        inverted = sum((result.online[j] - result.online[k]) * (v[j] - v[k]) < 0 for j, k in pairs)
        assert s.p_inversion == pytest.approx(inverted / len(pairs), abs=1e-12)
        assert s.picks_winner == (int(np.argmax(v)) == best)
        assert s.regret == pytest.approx(1 - result.online[int(np.argmax(v))] / result.online[best])


def test_unbiased_dcg_tracks_online_reward_best(result):
    # Jeunen et al. §4–5 on a world satisfying Asm. 1–5: IPS-DCG with the true exposure has
    # the highest Kendall τ in the DCG family (ratios of DCG with a model-independent
    # denominator, pnDCG and SNIPS, order models identically and tie with it), and per-user
    # normalisation inverts pairs that IPS-DCG orders correctly (Lemma 5.2).
    tau = {s.metric: s.kendall for s in result.summaries}
    family = (
        "DCG",
        "nDCG",
        "pnDCG",
        "IPS-nDCG (true p)",
        "IPS-pnDCG (true p)",
        "SNIPS-DCG (true p)",
    )
    assert all(tau[REFERENCE] >= tau[m] - 1e-12 for m in family)
    assert tau[REFERENCE] > max(tau["DCG"], tau["nDCG"], tau["IPS-nDCG (true p)"])
    assert tau["IPS-pnDCG (true p)"] == pytest.approx(tau[REFERENCE], abs=1e-12)
    assert result.inverted_but_reference_right("nDCG") >= 1
    assert result.inverted_but_reference_right("IPS-nDCG (true p)") >= 1


def test_report_files(result, tmp_path):
    folder = write_report(result, tmp_path / "report")
    with open(folder / "models.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["model"] for r in rows] == result.models
    assert float(rows[3]["online reward"]) == pytest.approx(result.online[3])
    assert float(rows[3]["nDCG"]) == pytest.approx(result.values["nDCG"][3])
    assert float(rows[3]["nDCG ±95%"]) == pytest.approx(result.half_widths["nDCG"][3])
    with open(folder / "metrics.csv") as fh:
        metrics = list(csv.DictReader(fh))
    assert [m["metric"] for m in metrics] == list(result.values)
    summary = (folder / "summary.md").read_text()
    assert f"Online winner: **{result.winner()}**" in summary
    # the two lines printed under the table (tested in test_demo_output.py) are in it too
    assert (
        f"\n{result.correlation_note()}\n" in summary
        and f"\n{result.inversion_note()}\n" in summary
    )
    assert summary.count("\n| ") >= len(result.values)
    pngs = {p.name for p in folder.glob("*.png")}
    assert "scatter_all.png" in pngs and "scatter_ips_dcg__true_p.png" in pngs
    assert len(pngs) == len(result.values) + 1
    assert all((folder / p).stat().st_size > 10_000 for p in pngs)


def test_report_without_plots(result, tmp_path):
    folder = write_report(result, tmp_path, plots=False)
    assert not list(folder.glob("*.png"))
    assert "Scatter plots skipped" in (folder / "summary.md").read_text()


def test_cli_prints_the_table_and_writes_the_report(tmp_path, capsys):
    code = main(
        [
            "demo",
            "--users",
            "800",
            "--items",
            "120",
            "--backend",
            "numpy",
            "--quiet",
            "--no-plots",
            "--output",
            str(tmp_path / "out"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "online winner:" in out and "IPS-DCG (true p)" in out and "Kendall τ" in out
    assert (tmp_path / "out" / "summary.md").exists()


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "recpack_ope", "demo", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--users" in done.stdout


def test_numpy_pool_names_and_bad_backend():
    backend, pool = model_pool("numpy")
    assert backend == "numpy" and len(pool) == 20
    with pytest.raises(ValueError, match="backend must be"):
        DemoConfig(backend="torch")


def test_reproduce_without_recpack_says_what_to_install(monkeypatch, capsys):
    # Simulate a machine without RecPack (the modern environment is one): the command must
    # name the missing package and the extra that provides it, not print a traceback.
    hide_package(monkeypatch, "recpack")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "ndcg-disagreement", "--dataset", "synthetic"])
    assert stop.value.code == 2
    assert (
        "needs 'recpack': in a clone of recpack-ope (it is not on PyPI), pip install \".[recpack]\""
        in capsys.readouterr().err
    )


def test_each_verdict_carries_its_p_value_and_robustness(result):
    from recpack_ope.studies.demo import RECOMMENDED, UNWEIGHTED

    by_metric = {s.metric: s for s in result.summaries}
    assert RECOMMENDED in by_metric
    for s in result.summaries:
        assert 0 <= s.verdict_p <= 1
        if s.metric in UNWEIGHTED:
            assert np.isnan(s.verdict_gamma)
        else:
            assert s.verdict_gamma >= 1
    recommended = by_metric[RECOMMENDED]
    table = result.table()
    assert f"{recommended.verdict_p:.2g}, {recommended.verdict_gamma:.3g}" in table
    assert "Γ* is at least 2" in table
