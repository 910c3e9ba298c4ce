"""trec_eval-format reading and the ``recpack-ope rpp`` command."""

import gzip
import json
import time
from pathlib import Path

import pytest
from conftest import hide_package
from recpack_ope.rpp import preference_matrix
from recpack_ope.trec import read_trec, run_name

from recpack_ope.cli import main
from recpack_ope.io import trec

REFERENCE = Path(__file__).parents[1] / "data" / "rpp_reference"


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_ranking_by_score_with_ties_by_doc_id_descending(tmp_path):
    qrels = write(tmp_path / "qrels", "q1 0 a 1\nq1 0 c 2\nq2 0 b 1\nq3 0 a 0\n")
    # Rank column deliberately wrong: ranks come from scores; ties go to the larger doc id.
    run = write(tmp_path / "input.sys.gz", "")
    with gzip.open(run, "wt") as handle:
        handle.write(
            "q1 Q0 a 1 0.5 s\nq1 Q0 c 2 0.5 s\nq1 Q0 b 3 0.9 s\nq9 Q0 a 1 1 s\nq1 Q0 d 4 nan s\n"
        )
    collection = read_trec(qrels, [run])
    assert list(collection.runs) == ["sys"] and run_name(run) == "sys"
    assert collection.query_ids.tolist() == ["q1", "q2"]  # q3 has no relevant document
    docs = collection.doc_ids.tolist()
    assert [docs[i] for i in collection.runs["sys"].items[0] if i >= 0] == ["b", "c", "a"]
    assert (collection.runs["sys"].items[1] == -1).all()  # q2 missing from the run
    assert collection.qrels[0, docs.index("c")] == 2.0
    binary = read_trec(qrels, [run], relevance_threshold=2)
    assert binary.query_ids.tolist() == ["q1"] and binary.qrels.sum() == 1.0
    top = read_trec(qrels, [run], depth=1)
    assert top.runs["sys"].items.shape == (2, 1)


def test_bad_files_are_named(tmp_path):
    qrels = write(tmp_path / "qrels", "q1 0 a 1\n")
    good = write(tmp_path / "good", "q1 Q0 a 1 1.0 s\n")
    with pytest.raises(FileNotFoundError, match="run file .*missing.* does not exist"):
        read_trec(qrels, [str(tmp_path / "missing")])
    dup = write(tmp_path / "dup", "q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n")
    with pytest.raises(ValueError, match="run 'dup' .* lists document 'a' twice for query 'q1'"):
        read_trec(qrels, [dup])
    text = write(tmp_path / "text", "q1 Q0 a 1 high s\n")
    with pytest.raises(ValueError, match="non-numeric value 'high' on line 1"):
        read_trec(qrels, [text])
    short = write(tmp_path / "short", "q1 Q0 a\n")
    with pytest.raises(ValueError, match="run file .*short.* (too few columns|not in trec format)"):
        read_trec(qrels, [short])
    with pytest.raises(ValueError, match="two run files are both named 'good'"):
        read_trec(qrels, [good, good])
    empty = write(tmp_path / "empty", "q1 0 a 0\n")
    with pytest.raises(ValueError, match="no relevant"):
        read_trec(empty, [good])
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        read_trec(qrels, [good], depth=0)


def test_rpp_command_writes_matrix_orderings_and_tests(tmp_path, capsys):
    runs = sorted(str(p) for p in REFERENCE.glob("input.run*"))
    out = tmp_path / "rpp.json"
    assert (
        main(
            [
                "rpp",
                "--qrels",
                str(REFERENCE / "qrels.txt"),
                *runs,
                "--measure",
                "rpp",
                "--measure",
                "invrpp",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    collection = read_trec(str(REFERENCE / "qrels.txt"), runs)
    for name, weighting in (("RPP", "uniform"), ("invRPP", "inverse")):
        matrix = preference_matrix(collection.qrels, collection.runs, weighting=weighting)
        got = report["measures"][name]
        assert got["preferences"]["run0"]["run3"] == pytest.approx(matrix.mean[0, 3], abs=1e-12)
        wins = matrix.win_rates()
        assert got["win_rate"] == pytest.approx(
            dict(zip(wins.names, wins.means, strict=False)), abs=1e-12
        )
        assert got["ordering"]["mc4"] == wins.ordering("mc4")
        assert sorted(got["ordering"]["borda"]) == sorted(matrix.names)
        assert got["p_values"]["run1"]["run1"] == 1.0
    printed = capsys.readouterr().out
    assert (
        "## RPP over 30 queries (graded relevance), MC4 order" in printed
        and "| RPP(row, col) |" in printed
    )
    with pytest.raises(SystemExit, match="at least two run files"):
        main(["rpp", "--qrels", str(REFERENCE / "qrels.txt"), runs[0]])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["rpp", "--qrels", str(tmp_path / "nope"), *runs[:2], "--output", str(out)])


def test_without_pandas_the_command_says_what_to_install(monkeypatch, tmp_path, capsys):
    hide_package(monkeypatch, "pandas")
    runs = sorted(str(p) for p in REFERENCE.glob("input.run*"))[:2]
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "rpp",
                "--qrels",
                str(REFERENCE / "qrels.txt"),
                *runs,
                "--output",
                str(tmp_path / "x.json"),
            ]
        )
    assert stop.value.code == 2
    assert (
        "needs 'pandas': in a clone of recpack-ope (it is not on PyPI), pip install \".[trec]\""
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("cores", [1, 4])
def test_runs_read_in_parallel_name_the_first_bad_file_in_the_given_order(
    tmp_path, monkeypatch, cores
):
    """Runs are read on up to one thread per core; the result and the file an error names do
    not depend on which thread finishes first."""
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    qrels = write(tmp_path / "qrels", "q1 0 a 1\nq2 0 b 1\n")
    good = write(
        tmp_path / "input.good", "q1 Q0 b 1 2 s\nq1 Q0 a 2 2 s\nq2 Q0 c 1 0.5 s\nq2 Q0 b 2 0.7 s\n"
    )
    other = write(tmp_path / "input.other", "q2 Q0 a 1 1 s\nq1 Q0 c 1 3 s\n")
    collection = read_trec(qrels, [good, other])
    ids = collection.doc_ids.tolist()
    assert ids == ["a", "b", "c"]
    # good: q1's tie goes to the larger id (b), q2 by score; other: one document per query,
    # its lines not grouped in qrels order
    assert collection.runs["good"].items.tolist() == [[1, 0], [1, 2]]
    assert collection.runs["other"].items.tolist() == [[2], [0]]
    dup = write(tmp_path / "input.dup", "q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n")
    text = write(tmp_path / "input.text", "q1 Q0 a 1 high s\n")
    for order, named in (
        ([good, dup, text], "run 'dup' .* lists document 'a' twice"),
        ([good, text, dup], "non-numeric value 'high' on line 1"),
    ):
        with pytest.raises(ValueError, match=named):
            read_trec(qrels, order)


def test_a_bad_qrels_file_is_reported_without_reading_the_queued_runs(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    read = []
    columns = trec._read_columns

    def slow(path, columns_wanted, what, threads=True):
        if what == "run":
            read.append(path)
            time.sleep(0.05)  # long enough for the qrels' error to cancel the runs still queued
        return columns(path, columns_wanted, what, threads)

    monkeypatch.setattr(trec, "_read_columns", slow)
    runs = [write(tmp_path / f"input.r{k}", "q1 Q0 a 1 1 s\n") for k in range(20)]
    with pytest.raises(FileNotFoundError, match="qrels file .*missing.* does not exist"):
        read_trec(tmp_path / "missing", runs)
    assert len(read) <= 2  # the runs the two threads had started, at most


@pytest.mark.parametrize("together", [True, False])
def test_a_document_listed_twice_is_named_whether_a_querys_lines_are_together_or_not(
    tmp_path, together
):
    # Apart, q0's lines are grouped by a sort before the check; the repeat is refused either way.
    qrels = write(tmp_path / "qrels", "q0 0 a 1\nq1 0 a 1\n")
    lines = ["q0 Q0 x 1 1.0 s\n", "q0 Q0 x 2 0.5 s\n", "q1 Q0 y 1 1 s\n"]
    run = write(
        tmp_path / "input.twice", "".join(lines if together else [lines[0], lines[2], lines[1]])
    )
    with pytest.raises(ValueError, match="run 'twice' .* lists document 'x' twice for query 'q0'"):
        read_trec(qrels, [run])
    once = write(tmp_path / "input.once", "q0 Q0 x 1 0.5 s\nq1 Q0 y 1 1 s\nq0 Q0 y 2 1.0 s\n")
    # a, x, y: codes 0, 1, 2; q0 by score: y, x
    assert read_trec(qrels, [once]).runs["once"].items.tolist() == [[2, 1], [2, -1]]
