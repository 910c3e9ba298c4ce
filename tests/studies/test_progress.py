"""Every study's progress bar: drawn on a terminal, silent elsewhere, one step per work item.

Each study runs at a small size with ``progress=True`` under pytest's captured (non-terminal)
standard error; the bar it made is recorded to compare its total with a count of the work
items made by hand.
"""

from __future__ import annotations

import importlib
import os
import pty
import select
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import Terminal, record_bars

import recpack_ope.studies as studies
from recpack_ope.studies import (
    click_models,
    demo,
    disagreement,
    open_bandit,
    reliability,
    rpp_power,
    sensitivity,
    simpsons_paradox,
)


def only_bar(bars: list, capsys):
    """The one bar a study made, after checking that nothing of it reached standard error."""
    err = capsys.readouterr().err
    assert "it/s" not in err and "%|" not in err, err
    (bar,) = bars
    assert bar.disable
    return bar


def test_the_bar_draws_on_a_terminal_and_nowhere_else(capsys):
    screen = Terminal()
    assert sum(studies.progress_bar(range(4), desc="worlds", file=screen)) == 6
    assert "worlds: 100%" in screen.getvalue() and "4/4" in screen.getvalue()
    bar = studies.progress_bar(range(4), desc="worlds")  # standard error is captured here
    assert bar.total == 4 and bar.disable and sum(bar) == 6
    assert studies.progress_bar(range(4), desc="worlds", file=Terminal(), show=False).disable
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="show must be True or False, got 'yes'"):
        studies.progress_bar(range(4), desc="worlds", show="yes")


_MUTED = """
import os, sys
from recpack_ope.studies import progress_bar, quiet_frameworks
with quiet_frameworks() as terminal:
    os.write(2, b"C++ banner\\n")
    sys.stderr.write("framework log\\n")
    for _ in progress_bar(range(3), desc="models", file=terminal):
        pass
"""


def test_quiet_frameworks_yield_the_terminal_for_the_study_bar():
    # A pseudo-terminal on standard error, as when a user runs the CLI: the frameworks' output
    # stays muted while the study's bar reaches the screen.
    main, child = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _MUTED], stderr=child, stdout=subprocess.PIPE, timeout=120
        )
        assert done.returncode == 0
        screen = b""
        while select.select([main], [], [], 1)[0]:
            chunk = os.read(main, 65536)
            if not chunk:
                break
            screen += chunk
    finally:
        os.close(child)
        os.close(main)
    text = screen.decode()
    assert "models: 100%" in text and "3/3" in text
    assert "C++ banner" not in text and "framework log" not in text


def test_click_models_bar_counts_worlds(monkeypatch, capsys):
    bars = record_bars(monkeypatch, click_models)
    config = click_models.ClickModelsConfig(
        worlds=("pbm", "choice"), n_seeds=2, n_replicates=2, n_users=10
    )
    click_models.run_click_models(config)
    assert only_bar(bars, capsys).total == 2 * 2  # two world kinds × two seeds


def test_sensitivity_bar_counts_settings(monkeypatch, capsys):
    bars = record_bars(monkeypatch, sensitivity)
    config = sensitivity.SensitivityConfig(
        n_users=300, n_items=40, feed_length=5, logging_temperatures=(1.0,), clips=(4,)
    )
    result = sensitivity.run_sensitivity(config)
    # The settings are the (temperature, noise) pairs whose target beats logging online.
    assert only_bar(bars, capsys).total == len(result.settings) == result.online.size


def test_reliability_bar_counts_worlds(monkeypatch, capsys):
    bars = record_bars(monkeypatch, reliability)
    config = reliability.ReliabilityConfig(
        sizes=((100, 30),), worlds=("pbm",), n_seeds=2, feed_length=6, train_feeds=2, jobs=1
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small worlds: unreliable weights, on purpose
        reliability.run_reliability(config)
    assert only_bar(bars, capsys).total == 2  # one size × one world kind × two seeds


def test_demo_bar_counts_models(monkeypatch, capsys):
    bars = record_bars(monkeypatch, demo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        demo.run_demo(demo.DemoConfig(n_users=400, n_items=60, backend="numpy"))
    # random, popularity, 8 item-kNN and 10 EASE (README: "20 models")
    assert only_bar(bars, capsys).total == 20


def test_open_bandit_bar_counts_campaigns(monkeypatch, capsys):
    bars = record_bars(monkeypatch, open_bandit)
    open_bandit.run_open_bandit(open_bandit.OpenBanditConfig(campaigns=("men", "women")))
    assert only_bar(bars, capsys).total == 2


@pytest.fixture(scope="module")
def small_u_data(movielens, tmp_path_factory):
    """MovieLens-100K's first 200 users as a u.data file."""
    keep = movielens.users < 200
    columns = [
        movielens.user_ids[movielens.users[keep]],
        movielens.item_ids[movielens.items[keep]],
        movielens.ratings[keep].astype(int),
        movielens.timestamps[keep],
    ]
    path = tmp_path_factory.mktemp("ml") / "u.data"
    np.savetxt(path, np.column_stack(columns), fmt="%d", delimiter="\t")
    return str(path)


def test_rpp_power_bar_counts_models(monkeypatch, capsys, small_u_data):
    bars = record_bars(monkeypatch, rpp_power)
    config = rpp_power.RPPPowerConfig(depth=20, n_resamples=20, path=small_u_data)
    rpp_power.run_rpp_power(config)
    # 10 EASE, item-kNN over k, popularity and random: the study's 21 recommenders
    assert only_bar(bars, capsys).total == 21


def test_simpsons_paradox_bar_counts_its_two_models(monkeypatch, capsys, small_u_data):
    bars = record_bars(monkeypatch, simpsons_paradox)
    simpsons_paradox.run_table2(simpsons_paradox.Table2Config(path=small_u_data))
    assert only_bar(bars, capsys).total == 2  # BPR and WMF


def test_banner_study_bar_counts_banner_sizes(monkeypatch, capsys):
    made = record_bars(
        monkeypatch, importlib.import_module("recpack_ope.logged.pairwise_disagreement")
    )
    config = disagreement.BannerStudyConfig(
        n_products=200, n_banners=3000, n_shuffled=3000, max_size=6, n_models=4
    )
    disagreement.run_banner_study(config)
    # Banner sizes 2..6, each drawn for about 600 of the 3000 banners: all have clicked pairs.
    assert only_bar(made, capsys).total == 5
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    disagreement.run_banner_study(config)
    assert "5/5" in screen.getvalue()
