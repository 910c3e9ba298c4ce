"""Discount curves by hand, with cutoffs, and their validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

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
        (lambda: ExponentialDiscount(0.0), r"gamma must lie in \(0, 1\], got 0.0"),
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
