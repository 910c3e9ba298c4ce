"""Argument checks shared by the adapters (recpack_ope._validation), on valid and bad values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recpack_ope._validation import (
    check_choice,
    check_held_out_size,
    check_index_vector,
    check_model,
    check_random_state,
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
