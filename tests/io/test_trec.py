"""trec_eval-format reading and the ``recpack-ope rpp`` command."""

import gzip
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import hide_package, rpp_without_pandas

from recpack_ope.cli import main
from recpack_ope.io import trec
from recpack_ope.io.trec import read_trec, run_name
from recpack_ope.metrics.rpp import preference_matrix

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
    stop = rpp_without_pandas(monkeypatch, tmp_path)
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


def line_parser(qrels_path, run_paths, depth=None):
    """The module docstring of recpack_ope.io.trec, one line at a time."""

    def lines(path):
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return [line.split() for line in raw.decode("utf-8-sig").splitlines() if line.split()]

    judged = {}
    for fields in lines(qrels_path):
        grade = float(fields[3])
        if grade > 0:
            key = (fields[0], fields[2])
            judged[key] = max(grade, judged.get(key, grade))
    queries = list(dict.fromkeys(query for query, _ in judged))
    docs = {doc for _, doc in judged}
    listed = {}
    for path in run_paths:
        by_query = {}
        for fields in lines(path):
            score = float(fields[4])
            if fields[0] in queries and not math.isnan(score):
                by_query.setdefault(fields[0], []).append((score, fields[2]))
                docs.add(fields[2])
        listed[trec.run_name(path)] = by_query
    doc_ids = sorted(docs)
    runs = {}
    for name, by_query in listed.items():
        rows = [
            [doc for _, doc in sorted(by_query.get(q, []), reverse=True)][:depth] for q in queries
        ]
        runs[name] = [[doc_ids.index(doc) for doc in row] for row in rows]
    qrels = np.zeros((len(queries), len(doc_ids)))
    for (query, doc), grade in judged.items():
        qrels[queries.index(query), doc_ids.index(doc)] = grade
    return queries, doc_ids, qrels, runs


def write_files(folder, seed, layout):
    """Qrels with repeated judgements (subtopics) and runs with tied and long scores, NaN lines,
    unknown queries, one query missing, doc ids whose text order is not their number order."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(30)] + ["dé", "D7", "d-1"]
    queries = [f"{q:03d}" for q in rng.permutation(9)]

    def line(fields):
        if layout == "single":
            return " ".join(fields) + "\n"
        seps = [str(rng.choice([" ", "  ", "\t", " \t "])) for _ in fields[1:]]
        text = fields[0] + "".join(sep + field for sep, field in zip(seps, fields[1:], strict=True))
        around = [
            str(rng.choice(options))
            for options in (["", " ", "\t"], ["", " ", "\t"], ["\n", "\r\n", "\n\n"])
        ]
        return around[0] + text + around[1] + around[2]

    qrels = []
    for query in queries[:-1]:
        for doc in rng.choice(docs, size=8):  # repeats: the same document judged twice
            qrels.append(line([query, str(rng.integers(0, 3)), str(doc), str(rng.integers(0, 4))]))
    qrels.append(line([queries[-1], "0", "d1", "0"]))  # a query without relevant documents
    (folder / "qrels").write_text("".join(qrels), encoding="utf-8")
    paths = []
    for s in range(3):
        out = []
        for query in [*queries[1:], "unknown"]:  # queries[0] is missing from every run
            # NaN lines only in sys1: pyarrow leaves files with NaN to pandas.
            scores = [
                str(
                    rng.choice(
                        [
                            "1",
                            "0.5",
                            "2.25",
                            repr(float(rng.random())),
                            "nan" if s == 1 else "3",
                            "1e-3",
                        ]
                    )
                )
                for _ in range(12)
            ]
            if s != 1:  # the usual layout: by decreasing score, ties in any order
                scores.sort(key=float, reverse=True)
            for rank, (doc, score) in enumerate(
                zip(rng.choice(docs, size=12, replace=False), scores, strict=True)
            ):
                out.append(line([query, "Q0", str(doc), str(rank + 1), score, f"sys{s}"]))
        path = folder / f"input.sys{s}{'.gz' if s == 2 else ''}"
        data = "".join(out).encode()
        path.write_bytes(gzip.compress(data) if s == 2 else data)
        paths.append(str(path))
    return str(folder / "qrels"), paths


def check_equal(collection, expected):
    queries, doc_ids, qrels, runs = expected
    assert collection.query_ids.tolist() == queries
    assert collection.doc_ids.tolist() == doc_ids
    np.testing.assert_array_equal(collection.qrels.toarray(), qrels)
    assert list(collection.runs) == list(runs)
    for name, rows in runs.items():
        got = [[int(i) for i in row if i >= 0] for row in collection.runs[name].items]
        assert got == rows, name


def without_pyarrow(monkeypatch):
    """The reader as on a machine without pyarrow. (Hiding the package itself would also break
    pandas 3, whose string columns use pyarrow when it is importable.)"""
    hide_package(monkeypatch, "pyarrow")
    assert trec._pyarrow() is None
    monkeypatch.undo()
    monkeypatch.setattr(trec, "_pyarrow", lambda: None)


@pytest.mark.parametrize("with_pyarrow", [True, False])
@pytest.mark.parametrize("layout", ["single", "odd"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reader_equals_a_line_by_line_parser(tmp_path, monkeypatch, with_pyarrow, layout, seed):
    qrels, runs = write_files(tmp_path, seed, layout)
    if not with_pyarrow:
        without_pyarrow(monkeypatch)
    for depth in (None, 4):
        check_equal(read_trec(qrels, runs, depth=depth), line_parser(qrels, runs, depth))
    check_equal(
        read_trec(qrels, runs, depth=4.0), line_parser(qrels, runs, 4)
    )  # a whole float is a depth
    pa = trec._pyarrow()
    if pa is not None:  # which files the fast parser takes
        taken = [
            trec._arrow_columns(pa, trec._file_bytes(path, "run"), [0, 2, 4]) is not None
            for path in runs
        ]
        assert taken == ([True, False, True] if layout == "single" else [False] * 3)


def test_single_spaced_files_take_the_pyarrow_path_and_odd_ones_do_not(tmp_path):
    pa = pytest.importorskip("pyarrow") and trec._pyarrow()
    plain = "q1 Q0 d1 1 0.5 r\nq1 Q0 dé 2 0.25 r\nq2 Q0 d1 1 3 r".encode()
    assert trec._arrow_columns(pa, plain, [0, 2, 4]) is not None
    for odd in (
        b"q1  Q0 d1 1 0.5 r\n",
        b" q1 Q0 d1 1 0.5 r\n",
        b"q1 Q0 d1 1 0.5 r \n",
        b"q1\tQ0 d1 1 0.5 r\n",
        b"q1 Q0 d1 1 0.5 r\r\n",
        b'q1 Q0 "d1" 1 0.5 r\n',
        b"q1 Q0 d1 1 0.5 r\n\nq2 Q0 d1 1 3 r\n",
        b"q1 Q0 d1 1 nan r\n",
        b"q1 Q0 d1 1 0,5 r\n",
        b"q1 Q0 d1 1 0.5 r\nq2 Q0 d1 1\n",
        b"q1 Q0 d\x001 1 0.5 r\n",
        b"q1 Q0 d1 1 0.5 r\xe9\n",
    ):  # ...and invalid UTF-8 in a column not read
        assert trec._arrow_columns(pa, odd, [0, 2, 4]) is None, odd
    # Ties go to the larger document id, whichever way the file orders them.
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    (tmp_path / "input.a").write_text(
        "q1 Q0 d1 1 0.5 r\nq1 Q0 d3 2 0.5 r\nq1 Q0 d2 3 0.5 r\nq1 Q0 d0 4 0.7 r\n"
    )
    collection = read_trec(str(tmp_path / "qrels"), [str(tmp_path / "input.a")])
    assert [collection.doc_ids[i] for i in collection.runs["a"].items[0]] == [
        "d0",
        "d3",
        "d2",
        "d1",
    ]


@pytest.mark.parametrize("with_pyarrow", [True, False])
def test_scores_are_parsed_as_python_floats(tmp_path, monkeypatch, with_pyarrow):
    if not with_pyarrow:
        without_pyarrow(monkeypatch)
    # Adjacent doubles: pandas' default parser before pandas 3 reads the first as the second,
    # which would tie them and put 'b' (the larger id) first; Python's float (the reference's
    # parser) keeps 'a' ahead.
    assert float("0.9504636963259353") > float("0.9504636963259352")
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    (tmp_path / "input.r").write_text(
        "q1 Q0 b 1 0.9504636963259352 r\nq1 Q0 a 2 0.9504636963259353 r\n"
    )
    collection = read_trec(str(tmp_path / "qrels"), [str(tmp_path / "input.r")])
    assert [collection.doc_ids[i] for i in collection.runs["r"].items[0]] == ["a", "b"]


@pytest.mark.parametrize("with_pyarrow", [True, False])
def test_duplicate_documents_are_named_on_both_paths(tmp_path, monkeypatch, with_pyarrow):
    if not with_pyarrow:
        without_pyarrow(monkeypatch)
    (tmp_path / "qrels").write_text("q1 0 a 1\nq2 0 b 1\n")
    # Listed twice with different scores (not adjacent once ranked): q2's 'c' is the first by
    # (query, document), as the message has always reported.
    (tmp_path / "input.dup").write_text(
        "q2 Q0 d 1 0.9 r\nq2 Q0 c 2 0.8 r\nq2 Q0 d 3 0.7 r\nq2 Q0 c 4 0.1 r\nq1 Q0 a 1 1 r\n"
    )
    for depth in (None, 1):  # a repeat below the depth is refused too
        with pytest.raises(
            ValueError, match=r"run 'dup' \(.*input.dup\) lists document 'c' twice for query 'q2'"
        ):
            read_trec(str(tmp_path / "qrels"), [str(tmp_path / "input.dup")], depth=depth)


def test_invalid_utf8_in_a_column_not_read_gets_the_same_answer_on_both_paths(
    tmp_path, monkeypatch
):
    # pandas before 3 refuses the file, pandas 3 reads it: the pyarrow path must do as pandas.
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    (tmp_path / "input.r").write_bytes(b"q1 Q0 a 1 0.5 r\xe9\n")

    def outcome():
        try:
            return (
                read_trec(str(tmp_path / "qrels"), [str(tmp_path / "input.r")])
                .runs["r"]
                .items.tolist()
            )
        except ValueError as exc:
            return str(exc)

    fast = outcome()
    without_pyarrow(monkeypatch)
    assert fast == outcome()


@pytest.fixture
def trec_files(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n")
    run = tmp_path / "input.run1"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n")
    return qrels, run


def test_truncated_gzip_names_the_file(trec_files, tmp_path):
    qrels, run = trec_files
    for source, name in ((run, "input.cut.gz"), (qrels, "qrels.gz")):
        data = gzip.compress(source.read_bytes() * 40)
        (tmp_path / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"run file '.*input\.cut\.gz'.*truncated"):
        read_trec(str(qrels), [str(tmp_path / "input.cut.gz")])
    with pytest.raises(ValueError, match=r"qrels file '.*qrels\.gz'.*truncated"):
        read_trec(str(tmp_path / "qrels.gz"), [str(run)])


def test_a_run_list_given_as_one_path_is_refused(trec_files):
    qrels, run = trec_files
    for runs in (str(run), run):
        with pytest.raises(ValueError, match=r"runs.*single path .*input\.run1"):
            read_trec(str(qrels), runs)
    with pytest.raises(TypeError, match="runs.*'NoneType'"):
        read_trec(str(qrels), None)
    with pytest.raises(TypeError, match=r"run file path.*\bint\b"):
        read_trec(str(qrels), [3])
    collection = read_trec(qrels, [run])  # paths as Path objects are fine
    np.testing.assert_array_equal(collection.runs["run1"].items, [[0, 1], [2, -1]])


@pytest.mark.parametrize(
    "qrels_text, kwargs, error, message",
    [
        ("q1 0 d1 nan\nq2 0 d3 2\n", {}, ValueError, "grade nan on line 1"),
        ("q1 0 d1 1\nq2 0 d3 inf\n", {}, ValueError, "grade inf on line 2"),
        ("q1 0 d1 1\n", dict(depth=np.inf), ValueError, "depth.*inf"),
        ("q1 0 d1 1\n", dict(depth=np.nan), ValueError, "depth.*nan"),
        ("q1 0 d1 1\n", dict(relevance_threshold="1"), ValueError, "relevance_threshold.*'1'"),
        ("q1 0 d1 1\n", dict(relevance_threshold=1j), ValueError, "relevance_threshold.*1j"),
        ("q1 0 d1 1\n", dict(relevance_threshold=np.nan), ValueError, "relevance_threshold.*nan"),
    ],
)
def test_trec_values_and_options(tmp_path, trec_files, qrels_text, kwargs, error, message):
    qrels = tmp_path / "bad_qrels"
    qrels.write_text(qrels_text)
    with pytest.raises(error, match=message):
        read_trec(str(qrels), [str(trec_files[1])], **kwargs)


def test_trec_paths_that_are_not_files(trec_files, tmp_path):
    with pytest.raises(ValueError, match=r"qrels file '.*' is a directory"):
        read_trec(str(tmp_path), [str(trec_files[1])])
    with pytest.raises(TypeError, match=r"qrels file path.*\blist\b"):
        read_trec([str(trec_files[0])], [str(trec_files[1])])
