"""Recall-paired preference against the reference implementation and the paper's definition."""

import importlib
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import S, Y
from hypothesis import given, settings
from hypothesis import strategies as st

from recpack_ope.io.trec import read_trec
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.rpp import RecallLevels, preference_matrix, rpp, win_rates

REFERENCE = Path(__file__).parents[1] / "data" / "rpp_reference"
WEIGHTING = {"rpp": "uniform", "dcgrpp": "dcg", "invrpp": "inverse"}


def brute_force_rpp(grades, order_a, order_b, weighting="uniform", graded=True):
    """Eq. 3–5 written out: full-corpus rankings with every omitted relevant item placed at
    the bottom in increasing grade order (§3), then search lengths per grade threshold. The
    corpus is taken larger than any list (padding of 1,000 unjudged items), as the reference
    does: an omitted item ranks below everything either ranking lists."""
    n = grades.size
    padding = [-1] * 1000

    def full(order):
        order = [int(i) for i in order if i >= 0]
        rest = [i for i in range(n) if i not in order]
        rest.sort(key=lambda i: (grades[i] > 0, grades[i]))  # non-relevant first, then by grade
        return order + padding + rest

    def weights(m):
        raw = {
            "uniform": [1.0] * m,
            "dcg": [1 / math.log2(i + 2) for i in range(m)],
            "inverse": [1 / (i + 1) for i in range(m)],
        }[weighting]
        return [w / sum(raw) for w in raw]

    a, b = full(order_a), full(order_b)
    levels = sorted(set(grades[grades > 0])) if graded else [grades[grades > 0].min()]
    total, mass = 0.0, 0
    for lam in levels:
        fa = [r + 1 for r, i in enumerate(a) if i >= 0 and grades[i] >= lam]
        fb = [r + 1 for r, i in enumerate(b) if i >= 0 and grades[i] >= lam]
        m = len(fa)
        total += m * sum(w * np.sign(y - x) for w, x, y in zip(weights(m), fa, fb, strict=False))
        mass += m
    return total / mass


def ranked(scores_row, k=None):
    """Items of one dense score row, best first, ties to the lower index, -inf excluded."""
    order = [
        i
        for i in sorted(range(scores_row.size), key=lambda i: (-scores_row[i], i))
        if scores_row[i] > -np.inf
    ]
    return order[:k]


def test_matches_reference_implementation_on_trec_files():
    """diazf/pref_eval's compute_preference per query and pair, recorded by generate.py:
    graded labels, tied scores, omitted relevant documents, missing queries, a NaN line."""
    expected = json.loads((REFERENCE / "expected.json").read_text())
    collection = read_trec(
        str(REFERENCE / "qrels.txt"), sorted(str(p) for p in REFERENCE.glob("input.run*"))
    )
    queries = list(collection.query_ids)
    checked = 0
    for variant, graded in (("published", False), ("per_grade", True)):
        for measure, weighting in WEIGHTING.items():
            matrix = preference_matrix(
                collection.qrels, collection.runs, weighting=weighting, graded=graded
            )
            assert matrix.user_ids.tolist() == list(range(len(queries)))
            for pair, by_query in expected[variant][measure].items():
                a, b = pair.split(":")
                s, t = matrix.index(a), matrix.index(b)
                assert set(by_query) == set(queries)
                for query, value in by_query.items():
                    assert matrix.per_user[queries.index(query), s, t] == pytest.approx(
                        value, abs=1e-9
                    )
                    checked += 1
    # Graded labels matter: the published (binary) and per-grade values differ somewhere.
    assert expected["published"]["rpp"] != expected["per_grade"]["rpp"]
    assert checked == 2 * 3 * 10 * 30


@pytest.mark.parametrize("weighting", ["uniform", "dcg", "inverse"])
@pytest.mark.parametrize("graded", [True, False])
def test_equals_brute_force_with_ties_and_omitted_items(weighting, graded):
    rng = np.random.default_rng(7)
    n_users, n_items = 25, 12
    grades = rng.choice([0, 0, 0, 1, 2, 3], size=(n_users, n_items)).astype(float)
    grades[np.arange(n_users), rng.integers(0, n_items, n_users)] = 2.0
    grades[3] = 0.0  # a user without relevant items is excluded, not scored
    # Coarse scores tie often; -inf items are not recommended (omitted).
    scores_a = np.round(rng.random((n_users, n_items)) * 3)
    scores_b = np.round(rng.random((n_users, n_items)) * 3)
    scores_a[rng.random(scores_a.shape) < 0.2] = -np.inf
    for k in (None, 4):
        result = rpp(grades, scores_a, scores_b, weighting=weighting, graded=graded, k=k)
        users = [u for u in range(n_users) if (grades[u] > 0).any()]
        expected = [
            brute_force_rpp(
                grades[u], ranked(scores_a[u], k), ranked(scores_b[u], k), weighting, graded
            )
            for u in users
        ]
        np.testing.assert_allclose(result.per_user, expected, atol=1e-12)
        assert result.user_ids.tolist() == users and result.n_excluded_users == 1


def test_topk_sparse_and_dense_inputs_agree():
    rng = np.random.default_rng(3)
    grades = sp.random(
        30, 40, density=0.15, random_state=4, data_rvs=lambda n: rng.integers(1, 4, n)
    ).tocsr()
    scores = rng.random((30, 40))
    top = TopK.from_scores(scores, 10)
    dense_cut = np.where(scores >= np.sort(scores, axis=1)[:, [-10]], scores, -np.inf)
    sparse_cut = sp.csr_matrix(np.where(np.isfinite(dense_cut), dense_cut, 0.0))
    other = rng.random((30, 40))
    values = [rpp(grades, y, other).per_user for y in (top, dense_cut, sparse_cut)]
    np.testing.assert_array_equal(values[0], values[1])
    np.testing.assert_array_equal(values[0], values[2])
    # k cuts both systems: the same as giving both as top-10 lists.
    np.testing.assert_array_equal(
        rpp(grades, top, TopK.from_scores(other, 10)).per_user,
        rpp(grades, scores, other, k=10).per_user,
    )


def test_worst_case_example_of_the_paper():
    """§3: X and Y omit items; graded thresholds λ = 1 (4 items), 2 (2), 3 (1) by hand."""
    grades = np.array([[1.0, 2.0, 3.0, 1.0, 0.0, 0.0]])
    a = TopK(np.array([[2, 4, 0, 1]]))  # d3 d5 d1 d2, d4 omitted
    b = TopK(np.array([[1, 0, 5, 2]]))  # d2 d1 d6 d3, d4 omitted
    # λ=1: f_a = 1,3,4,∞ vs f_b = 1,2,4,∞ → -1/4; λ=2: 1,4 vs 1,4 → 0; λ=3: 1 vs 4 → +1.
    assert rpp(grades, a, b, graded=False).value == pytest.approx(-0.25)
    assert rpp(grades, a, b).value == pytest.approx((4 * -0.25 + 2 * 0 + 1 * 1) / 7)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    weighting=st.sampled_from(["uniform", "dcg", "inverse"]),
    graded=st.booleans(),
    k=st.sampled_from([None, 1, 3]),
)
def test_antisymmetric_zero_on_identical_and_bounded(seed, weighting, graded, k):
    rng = np.random.default_rng(seed)
    grades = rng.choice([0, 1, 2], size=(6, 7)).astype(float)
    grades[:, 0] += 1.0
    a, b = np.round(rng.random((6, 7)) * 2), rng.random((6, 7))
    ab = rpp(grades, a, b, weighting=weighting, graded=graded, k=k).per_user
    ba = rpp(grades, b, a, weighting=weighting, graded=graded, k=k).per_user
    np.testing.assert_allclose(ab, -ba, atol=1e-15)
    assert np.all(rpp(grades, a, a, weighting=weighting, graded=graded, k=k).per_user == 0)
    assert np.all(np.abs(ab) <= 1 + 1e-12)


def test_levels_weights_sum_to_one_per_user():
    rng = np.random.default_rng(0)
    grades = rng.choice([0, 1, 2, 5], size=(50, 20)).astype(float)
    for weighting in ("uniform", "dcg", "inverse"):
        levels = RecallLevels.from_y_true(grades, weighting=weighting)
        sums = np.add.reduceat(levels.weights, levels.user_starts)
        np.testing.assert_allclose(sums, 1.0, atol=1e-12)
        # Σ_λ m_λ levels per user: each item counts once per threshold at or below its grade.
        expected = [
            sum((g[g > 0] >= lam).sum() for lam in np.unique(g[g > 0]))
            for g in grades
            if (g > 0).any()
        ]
        assert np.diff(np.append(levels.user_starts, levels.n_levels)).tolist() == expected


def test_preference_matrix_and_win_rates():
    rng = np.random.default_rng(11)
    grades = sp.csr_matrix(rng.choice([0, 0, 1, 2], size=(40, 15)).astype(float))
    systems = {f"s{j}": np.round(rng.random((40, 15)) * 4) for j in range(6)}
    matrix = preference_matrix(grades, systems, k=8)
    for (a, ya), (b, yb) in itertools.combinations(systems.items(), 2):
        pair = rpp(grades, ya, yb, k=8)
        np.testing.assert_allclose(
            matrix.per_user[:, matrix.index(a), matrix.index(b)], pair.per_user, atol=1e-15
        )
        assert matrix.pair(a, b).value == pytest.approx(pair.value, abs=1e-15)
    np.testing.assert_allclose(
        matrix.per_user, -np.transpose(matrix.per_user, (0, 2, 1)), atol=1e-15
    )
    direct = win_rates(grades, systems, k=8)
    np.testing.assert_allclose(direct.per_user, matrix.win_rates().per_user, atol=1e-12)
    # Eq. 7 by hand for one system: Σ_t RPP(s, t) / (M − 1).
    s = matrix.index("s2")
    expected = (
        sum(rpp(grades, systems["s2"], y, k=8).value for n, y in systems.items() if n != "s2") / 5
    )
    assert direct.means[s] == pytest.approx(expected, abs=1e-12)
    # With two systems the win rate is RPP itself.
    two = win_rates(grades, {"a": systems["s0"], "b": systems["s1"]})
    np.testing.assert_allclose(
        two.per_user[:, 0], rpp(grades, systems["s0"], systems["s1"]).per_user, atol=1e-15
    )


def test_win_rates_chunking_does_not_change_values(monkeypatch):
    # The package exports the function rpp, which shadows the module of the same name.
    module = importlib.import_module("recpack_ope.metrics.rpp")

    rng = np.random.default_rng(5)
    grades = sp.csr_matrix(rng.choice([0, 1, 3], size=(60, 30), p=[0.7, 0.2, 0.1]).astype(float))
    grades[0, 0] = 1.0
    systems = {f"s{j}": rng.random((60, 30)) for j in range(7)}
    whole = win_rates(grades, systems).per_user
    blocks = []
    original = RecallLevels.user_blocks

    def recording(self, max_levels):
        for users, levels in original(self, max_levels):
            blocks.append(users)
            yield users, levels

    monkeypatch.setattr(RecallLevels, "user_blocks", recording)
    monkeypatch.setattr(module, "CHUNK_ELEMENTS", 50)  # a handful of users per block
    np.testing.assert_array_equal(win_rates(grades, systems).per_user, whole)
    assert len(blocks) > 10 and blocks[0].start == 0 and blocks[-1].stop == whole.shape[0]


def test_bad_input_is_named():
    grades = np.array([[1.0, 0.0], [0.0, 2.0]])
    scores = np.array([[0.3, 0.1], [0.2, 0.4]])
    with pytest.raises(ValueError, match="weighting must be one of"):
        rpp(grades, scores, scores, weighting="linear")
    with pytest.raises(ValueError, match="no relevant"):
        rpp(np.zeros((2, 2)), scores, scores)
    with pytest.raises(ValueError, match="reward -1.0 at \\(user 0, item 1\\)"):
        rpp(np.array([[1.0, -1.0], [0.0, 1.0]]), scores, scores)
    with pytest.raises(ValueError, match="shape mismatch"):
        rpp(grades, scores[:, :1], scores)
    with pytest.raises(ValueError, match="NaN at \\(user 1, item 0\\)"):
        rpp(grades, np.array([[0.3, 0.1], [np.nan, 0.4]]), scores)
    with pytest.raises(ValueError, match="at least two system"):
        preference_matrix(grades, {"only": scores})
    with pytest.raises(ValueError, match="k must be a positive integer"):
        rpp(grades, scores, scores, k=0)
    matrix = preference_matrix(grades, {"a": scores, "b": -scores})
    with pytest.raises(ValueError, match="no system 'c'; the matrix has \\['a', 'b'\\]"):
        matrix.pair("a", "c")


def test_matrix_table_names_its_measure():
    y = sp.csr_matrix(np.array([[1.0, 0, 1, 0], [0, 1, 0, 1]]))
    runs = {"a": np.array([[4.0, 3, 2, 1]] * 2), "b": np.array([[1.0, 2, 3, 4]] * 2)}
    for weighting, name in (("uniform", "RPP"), ("dcg", "dcgRPP"), ("inverse", "invRPP")):
        table = preference_matrix(y, runs, weighting=weighting).table()
        assert table.splitlines()[0] == f"| {name}(row, col) | a | b |"


LEVELS = RecallLevels.from_y_true(Y)


def test_levels_accept_their_own_weighting_and_graded():
    levels = RecallLevels.from_y_true(Y, weighting="dcg", graded=False)
    assert (levels.weighting, levels.graded) == ("dcg", False)
    direct = rpp(Y, S, S[:, ::-1], weighting="dcg", graded=False).per_user
    np.testing.assert_array_equal(
        rpp(levels, S, S[:, ::-1], weighting="dcg", graded=False).per_user, direct
    )
    np.testing.assert_array_equal(rpp(levels, S, S[:, ::-1]).per_user, direct)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: rpp(LEVELS, S, S, weighting="dcg"),
            "weighting='dcg'.*RecallLevels.*weighting='uniform'",
        ),
        (
            lambda: win_rates(LEVELS, {"a": S, "b": S}, graded=False),
            "graded=False would be ignored",
        ),
        (
            lambda: preference_matrix(Y, {"a": S, "b": S}, graded="yes"),
            "graded must be True or False, got 'yes'",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# The package exports the function rpp, which shadows the module of the same name.
rpp_module = importlib.import_module("recpack_ope.metrics.rpp")


def definition_rpp(grades, list_a, list_b, weighting, graded):
    """Recall-paired preference (docs/definitions.md) for one user: each list completed to a
    ranking of the whole corpus (taken larger than any list) with the omitted items at the bottom
    in increasing grade order; f_i = rank of the i-th relevant item; per grade threshold λ (or one
    binary threshold) Σ_i p(i)·sgn(f'_i − f_i) with p(i) normalised over the m_λ levels,
    thresholds weighted by m_λ."""
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
