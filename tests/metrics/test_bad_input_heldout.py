"""Bad and edge-case input to the held-out estimators and the inference layer (issue 19).

Every case either gets a clear error from our code that names the argument and the offending
value or position, or, where the input is valid, the number an independent route gives.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recpack_ope import (
    CustomDiscount,
    LogDiscount,
    SystemScores,
    TopK,
    agreement,
    dcg,
    ideal_dcg,
    ndcg,
    pn_dcg,
    recall,
    rpp,
    simpsons_paradox,
    stratified,
    unbiased_dcg,
)
from recpack_ope._validation import as_csr
from recpack_ope.inference import (
    ClipSelection,
    EstimateResult,
    adjust_p_values,
    aggregation,
    discriminative_power,
    paired_t_tests,
    randomised_tukey_hsd,
    steiger_test,
    steiger_z,
    tied_with_best,
)
from recpack_ope.metrics import RecallLevels, preference_matrix, win_rates
from recpack_ope.metrics.stratified import stratum_index

D = LogDiscount(3)
Y = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
S = np.array([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.1, 0.4], [0.3, 0.2, 0.9, 0.1]])


def delta(rank: int) -> float:
    return 1.0 / math.log2(rank + 1) if rank <= 3 else 0.0


# --- K1: structurally corrupt sparse matrices ----------------------------------------------


def corrupt(kind: str):
    """A copy of ``sp.csr_matrix(Y)`` (or another format) broken in one way."""
    m = sp.csr_matrix(Y)
    if kind == "column out of range":
        m.indices[0] = 100
    elif kind == "negative column":
        m.indices[1] = -3
    elif kind == "indptr decreases":
        m.indptr[1], m.indptr[2] = 5, 1
    elif kind == "indptr starts at 1":
        m.indptr[0] = 1
    elif kind == "indptr ends early":
        m.indptr[-1] = 3
    elif kind == "indptr too short":
        m.indptr = m.indptr[:-1]
    elif kind == "data shorter than indices":
        m.data = m.data[:-1]
    elif kind == "float indices":
        m.indices = m.indices.astype(float)
    elif kind == "CSC row out of range":
        m = m.tocsc()
        m.indices[2] = 7
    elif kind == "COO row out of range":
        m = m.tocoo()
        m.row[0] = 3
    elif kind == "COO column out of range":
        m = m.tocoo()
        m.col[-1] = 4
    elif kind == "COO lengths differ":
        m = m.tocoo()
        m.data = m.data[:-2]
    elif kind == "LIL column out of range":
        m = m.tolil()
        m.rows[1].append(9)
        m.data[1].append(1.0)
    return m


CORRUPTIONS = {
    "column out of range": r"stored entry 0 \(row 0\) has column index 100, outside 0\.\.3",
    "negative column": r"stored entry 1 \(row 0\) has column index -3, outside 0\.\.3",
    "indptr decreases": r"indptr decreases at row 1 \(5 → 1\)",
    "indptr starts at 1": r"indptr starts at 1, not 0",
    "indptr ends early": r"indptr ends at 3 stored entries but indices has 6",
    "indptr too short": r"indptr has 3 entries, expected one per row plus one \(4\)",
    "data shorter than indices": r"indices has 6 and data has shape \(5,\)",
    "float indices": r"indices array must be 1-D integers, got dtype float64",
    "CSC row out of range": r"stored entry 2 \(column 1\) has row index 7, outside 0\.\.2",
    "COO row out of range": r"stored entry 0 has row index 3, outside 0\.\.2",
    "COO column out of range": r"stored entry 5 \(row 2\) has column index 4, outside 0\.\.3",
    "COO lengths differ": r"row, col and data must have one entry per stored value, got 6, 6 and 4",
    "LIL column out of range": r"index 9",
}

ENTRY_POINTS = {
    "dcg y_true": ("y_true", lambda m: dcg(m, S, discount=D)),
    "ndcg y_score": ("y_score", lambda m: ndcg(Y, m, discount=D)),
    "dcg impressions": (
        "impressions",
        lambda m: dcg(Y, S, discount=D, propensity=np.full(4, 0.5), impressions=m),
    ),
    "rpp y_true": ("y_true", lambda m: rpp(m, S, S[::-1])),
    "TopK.from_scores": ("y_score", lambda m: TopK.from_scores(m, 2)),
    "ideal_dcg gains": ("gains", lambda m: ideal_dcg(m, D)),
    "as_csr": ("x", lambda m: as_csr(m, "x")),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_sparse_structure_is_refused_before_compiled_code(kind, entry):
    name, call = ENTRY_POINTS[entry]
    with pytest.raises(ValueError, match=rf"{name} is a corrupt .*{CORRUPTIONS[kind]}"):
        call(corrupt(kind))


def test_corrupt_propensity_matrix_of_stratified_is_refused():
    p = corrupt("column out of range")
    p.data = np.full(p.data.size, 0.5)
    with pytest.raises(ValueError, match="stratify_by is a corrupt sparse matrix"):
        stratified(dcg, Y, S, stratify_by=p, discount=D)


def test_huge_shape_whose_keys_overflow_int64_is_refused():
    m = sp.coo_matrix((2**32, 2**32))
    with pytest.raises(ValueError, match=r"n_users × n_items must stay below 2\*\*63"):
        as_csr(m, "y_true")


# --- K2: pandas labels are aligned, never used by position ---------------------------------


def test_dataframe_scores_and_rewards_are_aligned_by_label():
    expected = dcg(Y, S, discount=D).per_user
    perm = np.array([2, 0, 3, 1])
    scores = pd.DataFrame(S[:, perm], columns=perm)  # column label = item index
    rewards = pd.DataFrame(Y[::-1], index=[2, 1, 0])  # index label = user index
    np.testing.assert_array_equal(dcg(Y, scores, discount=D).per_user, expected)
    np.testing.assert_array_equal(dcg(rewards, S, discount=D).per_user, expected)
    # Used by position the permuted columns would give another value.
    assert not np.array_equal(dcg(Y, S[:, perm], discount=D).per_user, expected)


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (
            pd.DataFrame(S, columns=list("abcd")),
            r"column labels must be the item indices 0\.\.3: label 'a'",
        ),
        (pd.DataFrame(S, columns=[0, 1, 1, 2]), r"label 1 appears twice"),
        (pd.DataFrame(S, columns=[0, 1, 2, 9]), r"label 9 is outside 0\.\.3"),
        (
            pd.DataFrame(S, index=[5, 6, 7]),
            r"index labels must be the user indices 0\.\.2: label 5",
        ),
    ],
)
def test_dataframe_labels_that_are_not_indices_are_refused(frame, match):
    with pytest.raises(ValueError, match=match):
        dcg(Y, frame, discount=D)


def test_series_of_metric_values_are_paired_by_model_label():
    a = pd.Series([0.1, 0.4, 0.2, 0.9], index=["m1", "m2", "m3", "m4"])
    b = pd.Series([0.8, 0.1, 0.3, 0.5], index=["m4", "m1", "m3", "m2"])
    by_label = agreement(a, b)
    # b in a's order, by hand: m1 0.1, m2 0.5, m3 0.3, m4 0.8: the same order as a.
    assert by_label.kendall == pytest.approx(1.0) and by_label.disagreement == 0.0
    assert agreement(a.to_numpy(), b.to_numpy()).kendall < 1.0  # position would disagree
    with pytest.raises(ValueError, match="second metric vector has no model 'm2'"):
        agreement(a, b.rename({"m2": "x"}))
    with pytest.raises(ValueError, match="labels model 'm1' more than once"):
        agreement(a.rename({"m2": "m1"}), b)


def test_steiger_test_pairs_series_by_label():
    truth = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], index=list("abcdef"))
    y = pd.Series([1.1, 2.5, 2.0, 4.2, 6.0, 5.0], index=list("abcdef"))
    z = pd.Series([3.0, 1.0, 2.0, 6.0, 4.0, 5.0], index=list("abcdef"))
    shuffled = steiger_test(truth, y.iloc[::-1], z.iloc[[3, 1, 5, 0, 2, 4]])
    assert shuffled.z == steiger_test(truth, y, z).z


def test_system_scores_dataframe_columns_follow_the_names():
    values = np.array([[0.1, 0.5], [0.2, 0.7], [0.4, 0.6]])
    frame = pd.DataFrame(values, columns=["b", "a"])
    scores = SystemScores(names=("a", "b"), per_user=frame, user_ids=np.arange(3), name="m")
    np.testing.assert_array_equal(scores.per_user, values[:, ::-1])
    with pytest.raises(ValueError, match=r"columns \['b', 'c'\] but names are \['a', 'b'\]"):
        SystemScores(
            names=("a", "b"),
            per_user=frame.rename(columns={"a": "c"}),
            user_ids=np.arange(3),
            name="m",
        )


# --- K3: dtypes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: dcg(Y + 1j, S, discount=D),
            r"y_true has complex dtype complex128 \(value \(1\+1j\) at \(user 0, item 0\)\)",
        ),
        (
            lambda: dcg(sp.csr_matrix(Y) * (1 + 0.5j), S, discount=D),
            r"y_true has complex dtype .* stored value 0 is \(1\+0\.5j\)",
        ),
        (lambda: dcg(Y, S + 2j, discount=D), r"y_score has complex dtype"),
        (lambda: TopK.from_scores(sp.csr_matrix(S * 1j), 2), r"y_score has complex dtype"),
        (
            lambda: stratum_index(np.array([0.2, 0.5 + 1j]), 2),
            r"propensities has complex dtype .* at position 1",
        ),
        (lambda: adjust_p_values([0.1, 0.2j], "holm"), r"p has complex dtype"),
    ],
)
def test_complex_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_integer_scores_beyond_2_53_rank_exactly():
    big = 2**53
    scores = np.array(
        [[big, big + 1, 3, big + 3], [-big - 2, -big - 1, -7, 5], [2**62, 2**62 + 1, 2**62 - 1, 1]],
        dtype=np.int64,
    )
    unsigned = np.array(
        [[2**63, 2**63 + 1, 5], [2**64 - 1, 2**64 - 2, 2**63 + 2048]], dtype=np.uint64
    )

    def brute(matrix, k):  # on Python ints (exact), ties to the lower item index
        return [
            sorted(range(len(row)), key=lambda i, row=row: (-int(row[i]), i))[:k] for row in matrix
        ]

    # float64 would tie big with big + 1 and 2**62 ± 1 with 2**62, and rank by item index.
    assert brute(scores, 3) == [[3, 1, 0], [3, 2, 1], [1, 0, 2]]
    assert TopK.from_scores(scores, 3).items.tolist() == brute(scores, 3)
    assert TopK.from_scores(sp.csr_matrix(scores), 3).items.tolist() == brute(scores, 3)
    assert TopK.from_scores(unsigned, 2).items.tolist() == brute(unsigned, 2)
    # DCG follows the exact ranking: user 0's relevant item 0 is at rank 3, not 2.
    assert dcg(Y, scores, discount=D).per_user[0] == delta(3)


def test_integer_rewards_beyond_2_53_are_refused_with_position():
    y = np.zeros((2, 3), dtype=np.int64)
    y[1, 2] = 2**53 + 1
    with pytest.raises(
        ValueError, match=r"y_true has integer 9007199254740993 at \(user 1, item 2\)"
    ):
        dcg(y, np.ones((2, 3)), discount=D)
    with pytest.raises(ValueError, match=r"at \(user 1, item 2\)"):
        rpp(sp.coo_matrix(y), np.ones((2, 3)), np.ones((2, 3)))


def test_pandas_missing_values_are_refused_with_labels():
    rewards = pd.DataFrame(Y).astype("Int64")
    rewards.iloc[1, 2] = pd.NA
    with pytest.raises(ValueError, match=r"y_true has a missing value at \(index 1, column 2\)"):
        dcg(rewards, S, discount=D)
    scores = pd.DataFrame(S).astype("Float64")
    scores.iloc[2, 0] = pd.NA
    with pytest.raises(ValueError, match=r"y_score has a missing value at \(index 2, column 0\)"):
        ndcg(Y, scores, discount=D)
    with pytest.raises(ValueError, match="first metric vector has a missing value at label 2"):
        agreement(pd.Series([1, 2, None, 4], dtype="Int64"), [1.0, 2.0, 3.0, 4.0])


def test_small_integer_duplicates_are_summed_without_overflow():
    # 200 clicks on (user 0, item 0) stored as int8 ones: int8 sums would wrap to -56.
    rows = np.zeros(200, dtype=np.int64)
    clicks = sp.coo_matrix((np.ones(200, dtype=np.int8), (rows, rows)), shape=(1, 4))
    assert as_csr(clicks, "y_true").toarray().tolist() == [[200.0, 0.0, 0.0, 0.0]]
    result = dcg(clicks, S[:1], discount=D)
    assert result.per_user[0] == 200 * delta(1)


def test_non_numeric_object_values_are_refused_with_position():
    y = np.array([[1, 0], [0, "x"]], dtype=object)
    with pytest.raises(ValueError, match=r"y_true has non-numeric value 'x' at \(user 1, item 1\)"):
        dcg(y, np.ones((2, 2)), discount=D)
    with pytest.raises(ValueError, match=r"y_score must hold real numbers, got dtype <U"):
        dcg(Y, [["a"] * 4] * 3, discount=D)


def test_valid_bool_and_object_scores_are_ranked():
    # Boolean scores are 0/1 and object arrays of numbers are numbers: both valid.
    as_bool = S > 0.45
    assert dcg(Y, as_bool, discount=D).value == dcg(Y, as_bool.astype(float), discount=D).value
    assert dcg(Y, S.astype(object), discount=D).value == dcg(Y, S, discount=D).value


# --- K4: duplicates -------------------------------------------------------------------------


def test_duplicate_reward_entries_are_summed():
    rows, cols = np.array([0, 0, 2, 2, 2]), np.array([2, 2, 1, 3, 1])
    coo = sp.coo_matrix((np.array([1.0, 2.0, 1.0, 1.0, 0.5]), (rows, cols)), shape=(3, 4))
    summed = np.zeros((3, 4))
    np.add.at(summed, (rows, cols), coo.data)  # by hand: (0, 2) = 3, (2, 1) = 1.5
    assert summed[0, 2] == 3.0 and summed[2, 1] == 1.5
    np.testing.assert_array_equal(
        dcg(coo, S, discount=D).per_user, dcg(summed, S, discount=D).per_user
    )
    # A non-canonical CSR with a repeated column is summed the same way.
    csr = sp.csr_matrix(
        (np.array([1.0, 2.0]), np.array([2, 2]), np.array([0, 2, 2, 2])), shape=(3, 4)
    )
    assert as_csr(csr, "y_true").toarray()[0].tolist() == [0.0, 0.0, 3.0, 0.0]


@pytest.mark.parametrize(
    "scores",
    [
        sp.coo_matrix(([0.5, 0.7, 0.1], ([1, 1, 0], [3, 3, 0])), shape=(3, 4)),
        sp.csr_matrix(
            (np.array([0.5, 0.7]), np.array([3, 3]), np.array([0, 0, 2, 2])), shape=(3, 4)
        ),
    ],
)
def test_duplicate_score_entries_are_refused(scores):
    with pytest.raises(ValueError, match=r"y_score stores \(user 1, item 3\) more than once"):
        dcg(Y, scores, discount=D)


def test_as_csr_refuses_duplicates_when_asked():
    coo = sp.coo_matrix(([0.2, 0.3], ([2, 2], [1, 1])), shape=(3, 4))
    with pytest.raises(ValueError, match=r"p stores \(user 2, item 1\) more than once"):
        as_csr(coo, "p", duplicates="refuse")
    with pytest.raises(ValueError, match="duplicates must be 'sum' or 'refuse', got 'max'"):
        as_csr(coo, "p", duplicates="max")
    assert as_csr(coo, "p").toarray()[2, 1] == 0.5


# --- K5: every argument -----------------------------------------------------------------------


def _stratified_pair():
    a = stratified(ndcg, Y, S, stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), discount=D)
    b = stratified(ndcg, Y, S[:, ::-1], stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), discount=D)
    return a, b


def _scores():
    rng = np.random.default_rng(0)
    return SystemScores(
        names=("a", "b", "c"), per_user=rng.random((6, 3)), user_ids=np.arange(6), name="m"
    )


LEVELS = RecallLevels.from_y_true(Y)
ESTIMATE = dcg(Y, S, discount=D)

ARGUMENTS = [
    (
        lambda: dcg(Y, S, discount=D, self_normalised="no"),
        "self_normalised must be True or False, got 'no'",
    ),
    (
        lambda: unbiased_dcg(Y, S, discount=D, self_normalised=None),
        "self_normalised must be True or False, got None",
    ),
    (
        lambda: dcg(Y, S, discount=D, ess_threshold="0.5"),
        r"ess_threshold must be a number in \(0, 1\], got '0.5'",
    ),
    (
        lambda: dcg(Y, S, discount=D, ess_threshold=True),
        r"ess_threshold must be a number in \(0, 1\], got True",
    ),
    (lambda: recall(Y, S, k=2.5), "k must be a positive integer, got 2.5"),
    (lambda: stratified(3, Y, S, stratify_by=np.ones(4)), "metric must be a metric function"),
    (
        lambda: stratum_index(np.array([0.1, np.nan]), 2),
        "propensities must be finite, got nan at position 1",
    ),
    (
        lambda: rpp(LEVELS, S, S, weighting="dcg"),
        "weighting='dcg' would be ignored: y_true is a RecallLevels built with weighting='uniform'",
    ),
    (lambda: win_rates(LEVELS, {"a": S, "b": S}, graded=False), "graded=False would be ignored"),
    (
        lambda: preference_matrix(Y, {"a": S, "b": S}, graded="yes"),
        "graded must be True or False, got 'yes'",
    ),
    (
        lambda: simpsons_paradox(*_stratified_pair(), names="AB"),
        "names must hold two model names, got 'AB'",
    ),
    (
        lambda: simpsons_paradox(*_stratified_pair(), alpha="0.1"),
        r"alpha must be a number in \(0, 1\), got '0.1'",
    ),
    (lambda: simpsons_paradox(ESTIMATE, _stratified_pair()[1]), "a must be the StratifiedResult"),
    (
        lambda: simpsons_paradox(*_stratified_pair(), ips=(1, 2)),
        r"ips must be a pair of estimates .* got \['int', 'int'\]",
    ),
    (lambda: ESTIMATE.confidence_interval("0.9"), r"level must be a number in \(0, 1\), got '0.9'"),
    (lambda: ESTIMATE.compare(3), "other must be an estimate"),
    (
        lambda: EstimateResult("x", np.ones(2), (2,), np.arange(2), 0),
        r"exponents must be a non-empty tuple of \+1 and -1, got \(2,\)",
    ),
    (
        lambda: EstimateResult("x", np.ones(2), (1,), np.arange(2), -1),
        "n_excluded_users must be an integer >= 0, got -1",
    ),
    (
        lambda: EstimateResult("x", np.array([1.0, np.inf]), (1,), np.array([4, 7]), 0),
        "terms of x are not finite: inf in column 0 for user 7",
    ),
    (
        lambda: EstimateResult("x", np.ones(3), (1,), np.arange(2), 0),
        r"terms of x have shape \(3,\); expected .* \(2, 1\)",
    ),
    (
        lambda: SystemScores(("a", "a"), np.ones((2, 2)), np.arange(2), "m"),
        "'a' appears more than once",
    ),
    (
        lambda: SystemScores("ab", np.ones((2, 2)), np.arange(2), "m"),
        "names must be a sequence of system names, got 'ab'",
    ),
    (
        lambda: paired_t_tests(
            SystemScores(("a", "b"), [[1.0, np.nan], [1.0, 2.0]], np.arange(2), "m")
        ),
        r"sample\.per_user has nan for user row 0, system 'b'",
    ),
    (
        lambda: randomised_tukey_hsd(
            SystemScores(("a", "b"), [[1.0, 2.0], [np.inf, 2.0]], np.arange(2), "m")
        ),
        r"sample\.per_user has inf for user row 1, system 'a'",
    ),
    (
        lambda: SystemScores.from_estimates([ESTIMATE, ESTIMATE]),
        "results must map at least two system names",
    ),
    (
        lambda: SystemScores.from_estimates({"a": ESTIMATE, "b": 2}),
        r"results\['b'\] is a int, not an estimate",
    ),
    (lambda: _scores().ordering("mc4", "x"), r"damping must be a number in \(0, 1\), got 'x'"),
    (lambda: aggregation.mc4(np.ones((2, 2)), np.nan), r"damping must lie in \(0, 1\), got nan"),
    (
        lambda: tied_with_best(_scores(), seed=-1),
        "seed must be None, an integer >= 0 or a numpy Generator, got -1",
    ),
    (
        lambda: tied_with_best(_scores(), test="tukey", seed="x"),
        "seed must be None, an integer >= 0",
    ),
    (
        lambda: tied_with_best(_scores(), n_resamples=0),
        "n_resamples must be a positive integer, got 0",
    ),
    (
        lambda: randomised_tukey_hsd(_scores(), 10, seed=1.5),
        "seed must be None, an integer >= 0 or a numpy Generator, got 1.5",
    ),
    (lambda: paired_t_tests(_scores(), "sidak"), "correction must be one of"),
    (
        lambda: discriminative_power({"m": _scores()}, tests="tukey"),
        "tests must be a tuple of test names",
    ),
    (lambda: discriminative_power([_scores()]), "samples must map measure names"),
    (
        lambda: discriminative_power({"m": _scores()}, alpha="0.05"),
        r"alpha must be a number in \(0, 1\), got '0.05'",
    ),
    (lambda: discriminative_power({"m": [[1.0]]}), "sample must be a SystemScores"),
    (lambda: steiger_z(0.5, 0.4, 0.3, 10.5), r"integer n > 3 observations, got 10.5"),
    (lambda: steiger_z("0.5", 0.4, 0.3, 10), r"r_xy must lie strictly inside \(-1, 1\), got '0.5'"),
    (
        lambda: steiger_test([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [2, 1, 3, 5, 4]),
        "kendall correlation of truth and y is .*strictly inside",
    ),
    (
        lambda: ClipSelection(np.array([np.inf, 1.0]), np.ones(2), np.ones(2), 5),
        "chosen must index one of the 2 thresholds, got 5",
    ),
    (
        lambda: ClipSelection(np.ones(2), np.ones(3), np.ones(2), 0),
        "must be 1-D arrays of one length",
    ),
]


@pytest.mark.parametrize(("call", "match"), ARGUMENTS, ids=[m[:40] for _, m in ARGUMENTS])
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_levels_accept_their_own_weighting_and_graded():
    levels = RecallLevels.from_y_true(Y, weighting="dcg", graded=False)
    assert (levels.weighting, levels.graded) == ("dcg", False)
    direct = rpp(Y, S, S[:, ::-1], weighting="dcg", graded=False).per_user
    np.testing.assert_array_equal(
        rpp(levels, S, S[:, ::-1], weighting="dcg", graded=False).per_user, direct
    )
    np.testing.assert_array_equal(rpp(levels, S, S[:, ::-1]).per_user, direct)


# --- K7: bounded work -----------------------------------------------------------------------


def test_millions_of_strata_for_a_handful_of_interactions_are_refused_at_once():
    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"n_strata=5000000 exceeds the 6 held-out interactions: at least 4999994 strata",
    ):
        stratified(
            dcg, Y, S, stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), n_strata=5_000_000, discount=D
        )
    with pytest.raises(ValueError, match=r"n_strata=1000000000 exceeds the 3 values to stratify"):
        stratum_index(np.array([0.1, 0.2, 0.3]), 10**9)
    assert time.perf_counter() - start < 5


def test_stratified_with_as_many_strata_as_interactions_matches_brute_force():
    # Six interactions with six distinct propensities: one per stratum, each stratum's nDCG
    # is the user's single-item nDCG (by hand from the ranking).
    p = np.array([[0.1, 0, 0.3, 0], [0, 0.45, 0, 0], [0.6, 0.8, 0, 1.0]])
    result = stratified(dcg, Y, S, stratify_by=sp.csr_matrix(p), n_strata=6, discount=D)
    sizes = [s.n_interactions for s in result.strata]
    # Width (1 − 0.1)/6 = 0.15: edges 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0.
    assert sizes == [1, 1, 1, 1, 1, 1]
    ranks = {(0, 0): 1, (0, 2): 2, (1, 1): 1, (2, 0): 2, (2, 1): 3, (2, 3): 4}
    for stratum, entry in zip(
        result.strata, [(0, 0), (0, 2), (1, 1), (2, 0), (2, 1), (2, 3)], strict=True
    ):
        assert stratum.result.value == pytest.approx(delta(ranks[entry]))


def test_tukey_refuses_a_request_beyond_its_budget_and_counts_like_before():
    scores = _scores()
    with pytest.raises(
        ValueError,
        match=r"n_resamples=1000000000000 would permute 1.8e\+13 values \(6 users × 3 systems per resample\)",
    ):
        randomised_tukey_hsd(scores, 10**12)
    # The streaming count equals keeping every maximum: brute force with the same draws.
    rng = np.random.default_rng(3)
    maxima = []
    for _ in range(200):
        perm = np.argsort(rng.random((1, 6, 3)), axis=2)[0]
        means = np.take_along_axis(scores.per_user, perm, axis=1).mean(axis=0)
        maxima.append(means.max() - means.min())
    observed = np.abs(scores.means[:, None] - scores.means[None, :])
    expected = (
        1 + (np.array(maxima)[None, None, :] >= observed[:, :, None] * (1 - 1e-12)).sum(axis=2)
    ) / 201
    np.fill_diagonal(expected, 1.0)
    np.testing.assert_array_equal(randomised_tukey_hsd(scores, 200, seed=3).p_value, expected)


def test_cutoffs_deeper_than_the_catalogue_cost_nothing_and_change_nothing():
    start = time.perf_counter()
    deep = recall(Y, S, k=10**12)
    assert deep.value == recall(Y, S, k=4).value == 1.0
    assert (
        ndcg(Y, S, discount=LogDiscount(10**12)).value == ndcg(Y, S, discount=LogDiscount()).value
    )
    assert time.perf_counter() - start < 5


def test_a_custom_discount_over_the_catalogue_pairs_the_best_ranks_with_the_best_gains():
    # iDCG of gains (3, 1) over curve (0.2, 1.0, 0.5) on 3 items, by hand: 3·1.0 + 1·0.5.
    gains = sp.csr_matrix(np.array([[3.0, 0.0, 1.0]]))
    assert ideal_dcg(gains, CustomDiscount([0.2, 1.0, 0.5])).tolist() == [3.5]
    # With 2 items only ranks 1–2 exist: 3·1.0 + 1·0.2.
    assert ideal_dcg(gains[:, :2].toarray() + [[0, 1]], CustomDiscount([0.2, 1.0, 0.5]))[
        0
    ] == pytest.approx(3.2)
    with pytest.raises(
        ValueError,
        match=r"gains has value -1.0 at \(user 0, item 1\); gains must be finite and >= 0",
    ):
        ideal_dcg(np.array([[1.0, -1.0]]), LogDiscount(2))
    assert pn_dcg(Y, S, discount=CustomDiscount([0.2, 1.0, 0.5])).value <= 1.0


@pytest.mark.parametrize("value", [object(), {"a": 1}, {1, 2}])
def test_a_single_non_numeric_value_is_refused_by_name(value):
    from recpack_ope import FixedPropensity
    from recpack_ope._validation import real_array

    with pytest.raises(ValueError, match=r"x has non-numeric value .* at a 0-d position"):
        real_array(value, "x")
    with pytest.raises(ValueError, match=r"propensity has non-numeric value .* at a 0-d position"):
        FixedPropensity(value).fit()
