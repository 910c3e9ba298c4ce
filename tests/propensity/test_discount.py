"""Discount curves by hand, with cutoffs, and their validation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recpack_ope.propensity.discount import (
    CustomDiscount,
    ExponentialDiscount,
    LogDiscount,
    ReciprocalDiscount,
)


def test_values_by_hand():
    assert LogDiscount(3).weights(5) == pytest.approx([1, 1 / math.log2(3), 0.5, 0, 0], abs=1e-15)
    assert LogDiscount()(np.array([7])) == pytest.approx([1 / 3], abs=1e-15)
    assert ExponentialDiscount(0.5).weights(4) == pytest.approx([1, 0.5, 0.25, 0.125])
    assert ExponentialDiscount(0.5, cutoff=2).weights(3) == pytest.approx([1, 0.5, 0])
    assert ReciprocalDiscount(2).weights(3) == pytest.approx([1, 0.5, 0])
    c = CustomDiscount([0.9, 0.3, 0.4])
    assert c.cutoff == 3 and c.weights(5) == pytest.approx([0.9, 0.3, 0.4, 0, 0])
    assert c(np.array([[1, 3], [2, 9]])) == pytest.approx(np.array([[0.9, 0.4], [0.3, 0.0]]))
    assert LogDiscount(10).label == "@10" and LogDiscount().label == ""
    assert CustomDiscount([1.0, 0.5]) == CustomDiscount(np.array([1.0, 0.5]))


def test_with_cutoff_keeps_the_curve_and_moves_the_cutoff():
    assert LogDiscount().with_cutoff(2).weights(4) == pytest.approx([1, 1 / math.log2(3), 0, 0])
    assert LogDiscount(2).with_cutoff(4) == LogDiscount(4)
    assert ExponentialDiscount(0.5, cutoff=9).with_cutoff(3) == ExponentialDiscount(0.5, cutoff=3)
    assert ReciprocalDiscount().with_cutoff(1).weights(2) == pytest.approx([1, 0])
    learnt = CustomDiscount([0.9, 0.3, 0.4])
    assert learnt.with_cutoff(2) == CustomDiscount([0.9, 0.3])
    # past the learnt curve's end the examination probability stays 0
    assert learnt.with_cutoff(5).weights(6) == pytest.approx([0.9, 0.3, 0.4, 0, 0, 0])
    assert learnt.with_cutoff(5).label == "@5"
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        LogDiscount().with_cutoff(0)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: LogDiscount(0), "cutoff must be a positive integer or None, got 0"),
        (lambda: LogDiscount(2.5), "cutoff must be a positive integer"),
        (lambda: ExponentialDiscount(0.0), r"gamma.*got 0.0"),
        (lambda: ExponentialDiscount(1.5), r"gamma must lie in \(0, 1\]"),
        (lambda: CustomDiscount([1.0, -0.1]), "rank 2 has -0.1"),
        (lambda: CustomDiscount([1.0, np.nan]), "rank 2 has nan"),
        (lambda: CustomDiscount([0.0, 1.0]), "rank 1 must be > 0"),
        (lambda: CustomDiscount([]), "non-empty 1-D array"),
        (lambda: LogDiscount(3)(np.array([0, 1])), "ranks must be integers >= 1"),
        (lambda: LogDiscount(3)(np.array([1.5])), "ranks must be integers >= 1"),
    ],
)
def test_invalid_discounts(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "values, expected",
    [
        (pd.Series([1.0, 0.6, 0.3]), [1.0, 0.6, 0.3]),
        (pd.Series([1.0, 0.6, 0.3], index=[1, 2, 3]), [1.0, 0.6, 0.3]),
    ],
    ids=["positions", "ranks"],
)
def test_custom_discount_series_in_rank_order(values, expected):
    np.testing.assert_array_equal(CustomDiscount(values).values, expected)


def test_custom_discount_series_out_of_rank_order_is_refused():
    with pytest.raises(ValueError, match=r"values is a pandas Series indexed by \[3, 1, 2\]"):
        CustomDiscount(pd.Series([0.3, 1.0, 0.6], index=[3, 1, 2]))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ExponentialDiscount(gamma="0.5"), r"gamma.*got '0\.5'"),
        (lambda: ExponentialDiscount(gamma=None), r"gamma.*got None"),
        (lambda: ExponentialDiscount(gamma=0.5 + 0j), r"gamma must be a number in \(0, 1\]"),
        (lambda: ExponentialDiscount(gamma=True), r"gamma.*got True"),
        (
            lambda: ExponentialDiscount(gamma=np.array([0.5, 0.6])),
            r"gamma must be a number in \(0, 1\]",
        ),
        (lambda: ExponentialDiscount(gamma=np.nan), r"gamma.*got nan"),
        (lambda: ReciprocalDiscount(cutoff=-1), r"cutoff.*got -1"),
        (lambda: LogDiscount(cutoff="3"), r"cutoff.*got '3'"),
        (lambda: CustomDiscount(None), r"values.*1-D.*got shape \(\)"),
        (lambda: CustomDiscount([[1.0, 0.5]]), r"values.*1-D.*got shape \(1, 2\)"),
        (lambda: CustomDiscount(sp.csr_matrix([[1.0, 0.5]])), r"values.*1-D.*got a sparse matrix"),
        (lambda: CustomDiscount(["a"]), r"values must hold real numbers"),
        (lambda: CustomDiscount([1.0, -0.5]), r"rank 2 has -0\.5"),
        (lambda: LogDiscount().weights(-1), r"\bn must.*got -1"),
        (lambda: LogDiscount().weights(2.5), r"\bn must.*got 2\.5"),
        (lambda: LogDiscount().weights(True), r"\bn must.*got True"),
        (lambda: LogDiscount()(np.array(["a"])), r"ranks.*dtype <U1"),
        (lambda: LogDiscount()(np.array([1, None], dtype=object)), r"ranks.*dtype object"),
        (lambda: LogDiscount()(np.array([3, 0])), r"ranks.*minimum 0"),
        (lambda: CustomDiscount(np.array([1 + 1j, 0.5])), r"values has complex dtype"),
        (lambda: CustomDiscount(pd.array([1.0, None], dtype="Float64")), r"rank 2 has nan"),
    ],
)
def test_discount_parameters_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_discount_parameters_are_stored_as_plain_numbers():
    assert repr(LogDiscount(cutoff=np.int64(3))) == "LogDiscount(cutoff=3)"
    assert type(ExponentialDiscount(gamma=np.float32(0.5)).gamma) is float
    assert LogDiscount().weights(0).shape == (0,)
    # a rank beyond int64 is past any cutoff, not wrapped around to a valid index
    huge = np.array([2**64 - 1, 1], dtype=np.uint64)
    np.testing.assert_array_equal(CustomDiscount([1.0, 0.5])(huge), [0.0, 1.0])
