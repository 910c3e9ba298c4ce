"""The fast RPP paths (a shared lookup table for search lengths, integer sign sums, the pyarrow
trec reader) against brute force written straight from the definitions."""

import gzip
import importlib
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import hide_package

from recpack_ope import TopK
from recpack_ope.io import trec
from recpack_ope.io.trec import read_trec
from recpack_ope.metrics.rpp import RecallLevels, preference_matrix, rpp, win_rates

# The package exports the function rpp, which shadows the module of the same name.
rpp_module = importlib.import_module("recpack_ope.metrics.rpp")


def definition_rpp(grades, list_a, list_b, weighting, graded):
    """DESIGN.md §3 for one user: each list completed to a ranking of the whole corpus (taken
    larger than any list) with the omitted items at the bottom in increasing grade order; f_i =
    rank of the i-th relevant item; per grade threshold λ (or one binary threshold)
    Σ_i p(i)·sgn(f'_i − f_i) with p(i) normalised over the m_λ levels, thresholds weighted by m_λ."""
    corpus = list(range(len(grades))) + [-1] * 500  # -1: unjudged documents no list shows

    def full(listed):
        rest = [i for i in corpus if i not in listed or i < 0]
        return listed + sorted(rest, key=lambda i: 0 if i < 0 else grades[i])

    relevant = [i for i in range(len(grades)) if grades[i] > 0]
    thresholds = (
        sorted({grades[i] for i in relevant}) if graded else [min(grades[i] for i in relevant)]
    )
    ranking_a, ranking_b = full(list_a), full(list_b)
    total, mass = 0.0, 0
    for lam in thresholds:
        items = [i for i in relevant if grades[i] >= lam]
        f_a = sorted(ranking_a.index(i) + 1 for i in items)
        f_b = sorted(ranking_b.index(i) + 1 for i in items)
        m = len(items)
        raw = [
            1.0
            if weighting == "uniform"
            else 1 / math.log2(i + 2)
            if weighting == "dcg"
            else 1 / (i + 1)
            for i in range(m)
        ]
        value = sum(w / sum(raw) * np.sign(b - a) for w, a, b in zip(raw, f_a, f_b, strict=True))
        total += m * value
        mass += m
    return total / mass


def top_list(scores, k):
    """Items by decreasing score, ties to the lower index, -inf not listed, cut at k."""
    order = sorted(
        (i for i in range(len(scores)) if scores[i] > -np.inf), key=lambda i: (-scores[i], i)
    )
    return order[:k]


def random_case(seed, n_users=23, n_items=17, n_systems=4, binary=False):
    rng = np.random.default_rng(seed)
    grades = rng.choice([0, 0, 0, 1, 2, 3], size=(n_users, n_items)).astype(float)
    if binary:
        grades = (grades > 0).astype(float)
    grades[[2, 9]] = 0.0  # users without relevant items: evaluated users are not consecutive rows
    grades[0, 0] = 1.0
    systems = []
    for _ in range(n_systems):
        scores = np.round(rng.random((n_users, n_items)) * 3)  # coarse: many ties
        scores[rng.random(scores.shape) < 0.25] = -np.inf
        systems.append(scores)
    return grades, systems


def as_inputs(scores, k):
    """The same system as dense scores, sparse scores and a TopK list (all fast paths)."""
    finite = np.where(np.isfinite(scores), scores + 1.0, 0.0)  # sparse: unstored = not listed
    return {
        "dense": scores,
        "sparse": sp.csr_matrix(finite),
        "topk": TopK.from_scores(scores, k or scores.shape[1]),
    }


@pytest.mark.parametrize("weighting", ["uniform", "dcg", "inverse"])
@pytest.mark.parametrize("graded, binary", [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize("k", [None, 3])
def test_preference_matrix_equals_the_definition(weighting, graded, binary, k):
    grades, systems = random_case(seed=5 + (k or 0), binary=binary)
    users = [u for u in range(grades.shape[0]) if (grades[u] > 0).any()]
    kinds = ["dense", "sparse", "topk", "topk"]
    rankings = {
        f"s{j}": as_inputs(scores, k)[kind]
        for j, (scores, kind) in enumerate(zip(systems, kinds, strict=True))
    }
    matrix = preference_matrix(grades, rankings, weighting=weighting, graded=graded, k=k)
    lists = [[top_list(scores[u], k) for u in range(grades.shape[0])] for scores in systems]
    for s in range(len(systems)):
        for t in range(len(systems)):
            expected = [
                definition_rpp(grades[u], lists[s][u], lists[t][u], weighting, graded)
                for u in users
            ]
            np.testing.assert_allclose(matrix.per_user[:, s, t], expected, atol=1e-12)
    wins = win_rates(grades, rankings, weighting=weighting, graded=graded, k=k)
    np.testing.assert_allclose(
        wins.per_user, matrix.per_user.sum(axis=2) / (len(systems) - 1), atol=1e-12
    )
    pair = rpp(grades, rankings["s0"], rankings["s3"], weighting=weighting, graded=graded, k=k)
    np.testing.assert_allclose(pair.per_user, matrix.per_user[:, 0, 3], atol=1e-12)


@pytest.mark.parametrize("graded", [True, False])
def test_search_lengths_do_not_depend_on_the_input_form_or_the_chunking(monkeypatch, graded):
    grades, systems = random_case(seed=11, n_users=40, n_items=25)
    levels = RecallLevels.from_y_true(grades, graded=graded)
    for scores in systems:
        for k in (None, 1, 4):
            forms = as_inputs(scores, k)
            whole = {kind: levels.search_lengths(y, k) for kind, y in forms.items()}
            # Per population (user, threshold): sorted ranks of its items, omitted last, by hand.
            expected = []
            for u in range(grades.shape[0]):
                relevant = np.flatnonzero(grades[u] > 0)
                listed = top_list(scores[u], k)
                cuts = sorted(set(grades[u, relevant])) if graded else [None]
                for lam in cuts:
                    members = relevant if lam is None else relevant[grades[u, relevant] >= lam]
                    expected += sorted(
                        listed.index(i) + 1 if i in listed else levels.omitted for i in members
                    )
            for kind, lengths in whole.items():
                assert lengths.tolist() == expected, kind
            # A few users per chunk: the lookup table is rebuilt per chunk, the values are not.
            monkeypatch.setattr(rpp_module, "rows_per_chunk", lambda width: 3)
            for kind, y in forms.items():
                np.testing.assert_array_equal(levels.search_lengths(y, k), whole[kind])
            monkeypatch.undo()


def test_uniform_sums_are_exact_and_equal_the_weighted_sums():
    # 1/3 is not exact in binary: three levels of weight 1/3 summed in floating point can differ
    # from 1 by an ulp; the integer count divided once gives exactly 1.
    grades = np.array([[1.0, 1.0, 1.0, 0.0]])
    a, b = TopK(np.array([[0, 1, 2]])), TopK(np.array([[3, 2, 1]]))
    assert rpp(grades, a, b).per_user.tolist() == [1.0]
    assert preference_matrix(grades, {"a": a, "b": b}).per_user[0].tolist() == [
        [0.0, 1.0],
        [-1.0, 0.0],
    ]


# ---------------------------------------------------------------------------------------------
# trec files


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


def test_search_lengths_of_many_entries_in_several_chunks(monkeypatch):
    # 60,000 relevant entries, 20,000 per chunk: each chunk's table holds 16-bit entry numbers
    # while the entries themselves run past 32,767.
    rng = np.random.default_rng(2)
    n_users, n_items = 3000, 400
    relevant = np.array([rng.choice(n_items, 20, replace=False) for _ in range(n_users)])
    y_true = sp.csr_matrix(
        (np.ones(relevant.size), relevant.ravel(), np.arange(0, relevant.size + 1, 20)),
        shape=(n_users, n_items),
    )
    top = TopK(np.argsort(rng.random((n_users, n_items)), axis=1)[:, :50])
    levels = RecallLevels.from_y_true(y_true, graded=False)
    expected = []
    for u in range(n_users):
        listed = top.items[u].tolist()
        expected += sorted(
            listed.index(i) + 1 if i in listed else levels.omitted for i in relevant[u]
        )
    monkeypatch.setattr(rpp_module, "rows_per_chunk", lambda width: 1000)
    assert levels.search_lengths(top).tolist() == expected
