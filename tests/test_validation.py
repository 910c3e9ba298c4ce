"""Argument checks shared by the adapters (recpack_ope._validation), on valid and bad values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recpack_ope._validation import (
    NonNumericError,
    check_choice,
    check_held_out_size,
    check_impressions,
    check_index_vector,
    check_model,
    check_random_state,
    check_rewards,
    real_array,
)


def test_check_choice():
    assert check_choice("train", ("all", "train"), "on") == "train"
    for bad, shown in (("test", "'test'"), (1, "1"), (None, "None")):
        with pytest.raises(ValueError, match=f"^on must be 'all' or 'train', got {shown}$"):
            check_choice(bad, ("all", "train"), "on")


def test_check_model():
    check_model(None, "fit", "propensity", "a model")
    check_model(np.random.default_rng(0), "random", "rng", "a generator")
    with pytest.raises(TypeError, match="^propensity must be a model or None, got ndarray$"):
        check_model(np.ones(3), "fit", "propensity", "a model")


@pytest.mark.parametrize("size", [0.2, 1, 50, np.int64(3), np.float32(0.5)])
def test_check_held_out_size_keeps_fractions_and_counts(size):
    assert check_held_out_size(size, "test_size") is size


@pytest.mark.parametrize("size", [0, 0.0, 1.0, 1.5, -0.1, math.nan, "0.2", None, True])
def test_check_held_out_size_refuses_what_a_splitter_misreads(size):
    with pytest.raises(ValueError, match=r"test_size must be a fraction .* in \(0, 1\) .*>= 1\)"):
        check_held_out_size(size, "test_size")


def test_check_held_out_size_allows_zero_when_asked():
    assert check_held_out_size(0, "val_size", allow_zero=True) == 0
    assert check_held_out_size(0.0, "val_size", allow_zero=True) == 0.0
    with pytest.raises(ValueError, match=r"val_size .* in \[0, 1\) .*>= 0\), got -1"):
        check_held_out_size(-1, "val_size", allow_zero=True)


def test_check_random_state():
    state = np.random.RandomState(1)
    for seed in (None, 0, 2**32 - 1, np.uint32(7), state):
        assert check_random_state(seed) is seed
    for bad in (-1, 2**32, 1.5, True, np.random.default_rng(1)):
        with pytest.raises(ValueError, match=r"0..2\*\*32 − 1 or a numpy RandomState \(Cornac's\)"):
            check_random_state(bad)


def test_check_index_vector():
    out = check_index_vector([3, 0, 2], "users", 4, "Cornac user", "the users")
    assert out.dtype == np.int64 and out.tolist() == [3, 0, 2]
    assert check_index_vector(np.array([], dtype=float), "users", 4, "user", "x").size == 0
    with pytest.raises(
        ValueError, match=r"users has user index 4 at position 1, outside the users 0..3"
    ):
        check_index_vector([0, 4], "users", 4, "Cornac user", "the users")
    with pytest.raises(ValueError, match=r"1-D array of Cornac user indices, got dtype float64"):
        check_index_vector([0.5], "users", 4, "Cornac user", "the users")
    with pytest.raises(ValueError, match=r"got dtype int64 and shape \(1, 1\)"):
        check_index_vector(np.array([[1]]), "users", 4, "Cornac user", "the users")


TEXT = r"has dtype object and must hold numbers: convert the text to numbers first"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # Object arrays of text would be parsed by astype(float): "0.9" must not become 0.9.
        (
            np.array([[0.5, "0.9"]], dtype=object),
            rf"y_score has non-numeric value '0\.9' \(text\) "
            rf"at \(user 0, item 1\); y_score {TEXT}",
        ),
        (
            np.array([[b"1", 2.0]], dtype=object),
            r"y_score has non-numeric value b'1' \(text\) "
            r"at \(user 0, item 0\)",
        ),
        (np.array([["0.5", "0.9"]]), r"^y_score must hold real numbers, got dtype <U3$"),
        (np.array([["2024-01-01"]], dtype="datetime64[D]"), r"got dtype datetime64\[D\]$"),
        (
            np.array([[0.5, {"score": 1}]], dtype=object),
            r"non-numeric value \{'score': 1\} at \(user 0, item 1\) \(dtype object\)",
        ),
    ],
)
def test_real_array_refuses_non_numbers_with_a_type_error(values, message):
    with pytest.raises(TypeError, match=message) as raised:
        real_array(values, "y_score", axes=("user", "item"))
    # Also a ValueError, which callers that report refused inputs catch.
    assert isinstance(raised.value, NonNumericError) and isinstance(raised.value, ValueError)


def test_real_array_refuses_a_data_frame_of_text():
    frame = pd.DataFrame([["1", "0"], ["0", "1"]])
    with pytest.raises(
        NonNumericError,
        match=rf"y_true has non-numeric value '1' \(text\) at "
        rf"\(user 0, item 0\); y_true {TEXT}",
    ):
        real_array(frame, "y_true", axes=("user", "item"))


def test_real_array_keeps_bools_and_converts_object_numbers():
    clicks = real_array([[True, False]], "y_true")
    assert clicks.dtype == bool and clicks.tolist() == [[True, False]]
    numbers = real_array(np.array([[1, 0.5]], dtype=object), "y_score")
    assert numbers.dtype == np.float64 and numbers.tolist() == [[1.0, 0.5]]


def test_real_array_names_a_ragged_argument():
    with pytest.raises(ValueError, match=r"^y_true is not a rectangular array: "):
        real_array([[1, 0], [1]], "y_true")


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (2.0, r"\(user 0, item 1\)"),
        (np.nan, r"\(user 0, item 1\)"),
        (-0.5, r"\(user 0, item 1\)"),
        (np.inf, r"\(user 0, item 1\)"),
    ],
)
def test_check_impressions_refuses_values_outside_0_1(value, where):
    with pytest.raises(
        ValueError,
        match=rf"^impressions has value {value} at {where}; impressions are examination "
        r"probabilities: finite and in \[0, 1\]$",
    ):
        check_impressions(sp.csr_matrix(np.array([[0.0, value, 1.0]])), (1, 3))


def test_check_impressions_accepts_probabilities_and_shown_records():
    # A bool "shown" record is e = 1 where shown (its examination when p is P(shown)).
    shown = check_impressions(np.array([[True, False, True]]))
    assert shown.toarray().tolist() == [[1.0, 0.0, 1.0]]
    assert check_impressions([[0.0, 0.25, 1.0]], (1, 3)).toarray().tolist() == [[0, 0.25, 1]]
    with pytest.raises(
        ValueError, match=r"^impressions has shape \(1, 3\) but y_true has \(2, 3\)$"
    ):
        check_impressions([[0.0, 0.25, 1.0]], (2, 3))


def test_check_rewards_upper_bound_names_the_first_entry_above_it():
    rewards = sp.csr_matrix(np.array([[0.0, 1.0], [3.0, 5.0]]))
    check_rewards(rewards)  # no upper bound: graded rewards are fine
    with pytest.raises(
        ValueError, match=r"^gains has value 3\.0 at \(user 1, item 0\); at most 2$"
    ):
        check_rewards(rewards, "gains", "at most 2", upper=2.0)


def test_real_array_refuses_none_in_an_object_array_as_missing():
    # numpy's astype(float) would turn None into NaN.
    with pytest.raises(
        ValueError, match=r"^y_true has a missing value \(None\) at \(user 1, item 0\)"
    ):
        real_array(np.array([[1, 0], [None, 1]], dtype=object), "y_true", axes=("user", "item"))
