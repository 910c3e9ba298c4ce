"""Exact Plackett–Luce rank marginals, exposure and sampling.

References: enumeration of every ordering (small catalogues; for weights across the float range
in exact rational arithmetic, ``fractions.Fraction``, with log-weights through ``decimal``
exponentials, which have no exponent range limit), the closed form of a uniform ordering, and
Monte Carlo frequencies of the sampler.
"""

from __future__ import annotations

import decimal
import itertools
import time
from fractions import Fraction

import numpy as np
import pytest

from recpack_ope.logged.plackett_luce import exposure, rank_marginals, sample_rankings
from recpack_ope.propensity.discount import ExponentialDiscount, LogDiscount


def enumerate_marginals(weights, n_ranks):
    """P(item i at rank r) by summing the PL probability of every partial ordering."""
    w = np.asarray(weights, dtype=float)
    out = np.zeros((w.size, n_ranks))
    for ordering in itertools.permutations(range(w.size), n_ranks):
        p, remaining = 1.0, w.sum()
        for item in ordering:
            p *= w[item] / remaining
            remaining -= w[item]
        out[list(ordering), np.arange(n_ranks)] += p
    return out


_EXACT = decimal.Context(prec=60, Emin=-(10**6), Emax=10**6)


def exact_weights(weights, log_weights=False) -> list[Fraction]:
    """Weights as exact rationals; log-weights exponentiated to 60 digits without range limit."""
    if log_weights:
        return [Fraction(_EXACT.exp(decimal.Decimal(float(x)))) for x in weights]
    return [Fraction(float(x)) for x in weights]


def exact_marginals(weights: list[Fraction], n_ranks: int) -> np.ndarray:
    """P(item i at rank r) summed over every partial ordering, exactly."""
    out = [[Fraction(0)] * n_ranks for _ in weights]
    total = sum(weights)
    for ordering in itertools.permutations(range(len(weights)), n_ranks):
        p, left = Fraction(1), total
        for item in ordering:
            p *= weights[item] / left
            left -= weights[item]
        for r, item in enumerate(ordering):
            out[item][r] += p
    return np.array([[float(x) for x in row] for row in out])


@pytest.mark.parametrize(
    "weights, n_ranks",
    [
        ([1.0, 2.0, 3.0], 3),
        ([5.0, 1.0, 1.0, 0.5, 0.1], 2),
        ([1e-3, 1.0, 30.0, 2.0, 2.0, 0.4], 4),  # four orders of magnitude, a tie
        (1.0 / np.arange(1, 8), 7),  # Zipf over 7 items, full ordering
        (np.exp(np.linspace(0, 6, 7)), 1),  # rank 1 only: w_i / Σ w
        ([1.0, 1.0, 1.0, 1.0, 2.0], 3),
    ],
)
def test_rank_marginals_equal_enumeration(weights, n_ranks):
    expected = enumerate_marginals(weights, n_ranks)
    np.testing.assert_allclose(rank_marginals(weights, n_ranks), expected, rtol=0, atol=1e-12)


def test_weights_are_scale_free_and_top_rank_is_the_choice_probability():
    w = np.random.default_rng(3).pareto(1.5, 40) + 0.05
    m = rank_marginals(w, 5)
    np.testing.assert_allclose(m, rank_marginals(w * 1e6, 5), atol=1e-12)
    np.testing.assert_allclose(m[:, 0], w / w.sum(), atol=1e-13)


def test_large_catalogue_marginals_are_distributions():
    w = 1.0 / np.arange(1, 3001) ** 1.2
    m = rank_marginals(w, 30)
    np.testing.assert_allclose(m.sum(axis=0), 1.0, atol=1e-11)  # each rank holds one item
    assert (m.sum(axis=1) <= 1 + 1e-12).all()
    # heavier items are shown more often at the top
    assert (np.diff(m[:, 0]) < 0).all()


def test_uniform_weights_give_uniform_ranks():
    m = rank_marginals(np.full(9, 2.5), 4)
    np.testing.assert_array_equal(m, np.full((9, 4), 1 / 9))


def test_exposure_is_marginals_times_discount():
    w = np.array([3.0, 1.0, 0.5, 0.2, 0.1])
    disc = ExponentialDiscount(gamma=0.5)
    expected = enumerate_marginals(w, 3) @ np.array([1.0, 0.5, 0.25])
    np.testing.assert_allclose(exposure(w, disc, 3), expected, atol=1e-12)
    # a cutoff inside the feed zeroes the later ranks
    cut = enumerate_marginals(w, 3)[:, :2] @ (1 / np.log2([2.0, 3.0]))
    np.testing.assert_allclose(exposure(w, LogDiscount(cutoff=2), 3), cut, atol=1e-12)


def test_sampler_frequencies_match_exact_marginals():
    # 200k feeds; each cell's frequency has sd sqrt(p(1-p)/S). Over the 240 cells the
    # largest |z| exceeds 5 with probability < 240 · 5.7e-7 ≈ 1.4e-4.
    w = 1.0 / np.arange(1, 61)
    n, samples = 4, 200_000
    feeds = sample_rankings(w, n, samples, np.random.default_rng(11))
    assert feeds.shape == (samples, n)
    assert (np.sort(feeds, axis=1)[:, 1:] != np.sort(feeds, axis=1)[:, :-1]).all()  # no repeats
    freq = np.zeros((w.size, n))
    np.add.at(freq, (feeds, np.arange(n)), 1.0)
    freq /= samples
    m = rank_marginals(w, n)
    z = (freq - m) / np.sqrt(m * (1 - m) / samples)
    assert np.abs(z).max() < 5


def test_full_length_sample_is_a_permutation():
    feeds = sample_rankings(np.arange(1.0, 6.0), 5, 100, np.random.default_rng(0))
    assert (np.sort(feeds, axis=1) == np.arange(5)).all()


@pytest.mark.parametrize(
    "weights, n_ranks, message",
    [
        ([1.0, 0.0, 2.0], 2, "item 1 has 0.0"),
        ([1.0, np.nan], 1, "item 1 has nan"),
        ([[1.0, 2.0]], 1, "1-D"),
        ([1.0, 2.0], 3, "n_ranks=3 exceeds the number of items"),
        ([1.0, 2.0], 0, "n_ranks must be a positive integer"),
    ],
)
def test_invalid_input_is_named(weights, n_ranks, message):
    with pytest.raises(ValueError, match=message):
        rank_marginals(weights, n_ranks)


@pytest.mark.parametrize(
    "weights, n_ranks, log_weights",
    [
        ([1e-300, 1.0, 1e300], 3, False),  # 600 orders of magnitude: used to loop forever
        ([1e300, 1.0, 1e-300, 2e-300], 3, False),  # the two lightest tie in their own group
        ([1.7e308, 1.7e308, 1.0], 2, False),  # the sum overflows
        ([5e-324, 1e-323, 1.7e308], 3, False),  # subnormal weights next to the largest float
        ([700.0, 0.0, -700.0], 3, True),  # log-weights ±700
        ([700.0, 699.0, 0.0, -700.0, -700.5], 4, True),  # groups, each with its own order
        (list(np.log(np.logspace(-300, 300, 5))), 5, True),  # a split inside the range
        ([0.0, -2000.0, -2001.0, -2001.0 + np.log(3.0)], 3, True),
    ],
)
def test_extreme_rank_marginals_equal_exact_enumeration(weights, n_ranks, log_weights):
    got = rank_marginals(weights, n_ranks, log_weights=log_weights)
    expected = exact_marginals(exact_weights(weights, log_weights), n_ranks)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=0), 1.0, atol=1e-12)


def test_large_catalogue_spanning_thousands_of_nats():
    # 5,000 log-weights 0.6 nats apart over 3,000 nats: only the heaviest items can reach the
    # 20 ranks. The items past the top 200 (at least e^-120 lighter than the 200th) are never
    # shown, so the top 200 alone (an ordinary range) give the same marginals.
    log_w = np.linspace(-3000.0, 0.0, 5000)
    start = time.perf_counter()
    got = rank_marginals(log_w, 20, log_weights=True)
    assert time.perf_counter() - start < 10
    np.testing.assert_allclose(got[-200:], rank_marginals(np.exp(log_w[-200:]), 20), atol=1e-12)
    assert not got[:-200].any()


def test_log_weights_of_ordinary_range_match_the_weights():
    w = np.random.default_rng(3).pareto(1.5, 40) + 0.05
    np.testing.assert_allclose(
        rank_marginals(np.log(w), 5, log_weights=True), rank_marginals(w, 5), atol=1e-12
    )
    disc = LogDiscount()
    np.testing.assert_allclose(
        exposure([0.0, -900.0, -901.0], disc, 3, log_weights=True),
        exact_marginals(exact_weights([0.0, -900.0, -901.0], True), 3) @ disc.weights(3),
        atol=1e-12,
    )


def test_sampler_keeps_the_order_of_weights_beyond_float_range():
    # Items 0 and 1 are always first and second; 2 and 3 (weights 1 : 2 between them,
    # e^-1400 below item 0) follow in PL order: 3 before 2 with probability 2/3.
    draws = sample_rankings(
        [700.0, 0.0, -700.0, -700.0 + np.log(2.0)],
        4,
        20_000,
        np.random.default_rng(0),
        log_weights=True,
    )
    assert (draws[:, :2] == [0, 1]).all()
    share = np.mean(draws[:, 2] == 3)
    assert abs(share - 2 / 3) < 5 * np.sqrt(2 / 9 / 20_000)
    subnormal = sample_rankings([5e-324, 1e-323, 1.7e308], 3, 20_000, np.random.default_rng(1))
    assert (subnormal[:, 0] == 2).all()
    assert abs(np.mean(subnormal[:, 1] == 1) - 2 / 3) < 5 * np.sqrt(2 / 9 / 20_000)


def test_exact_marginals_of_a_huge_catalogue_refuse_with_their_cost():
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"20000 items over 20000 ranks .* GiB"):
        rank_marginals(np.arange(1.0, 20_001.0), 20_000)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: rank_marginals([1.0, 2.0], 1, log_weights="yes"),
            ValueError,
            "log_weights.*'yes'",
        ),
        (lambda: rank_marginals([1.0, 2j], 1), ValueError, r"weights.*complex.*2j.*position 1"),
        (lambda: rank_marginals(["a", "b"], 1), ValueError, "weights.*real numbers.*<U1"),
        (
            lambda: rank_marginals([0.0, np.inf], 1, log_weights=True),
            ValueError,
            "log-weights.*item 1 has inf",
        ),
        (
            lambda: sample_rankings([1.0, 2.0], 2, 0, np.random.default_rng()),
            ValueError,
            r"n_samples.*\b0\b",
        ),
        (
            lambda: sample_rankings([1.0, 2.0], 2, 2.5, np.random.default_rng()),
            ValueError,
            r"n_samples.*2\.5",
        ),
        (lambda: sample_rankings([1.0, 2.0], 2, 3, 0), TypeError, r"rng.*Generator.*\bint\b"),
        (lambda: exposure([1.0, 2.0], "log", 2), TypeError, r"discount.*Discount.*\bstr\b"),
    ],
)
def test_arguments_are_checked(make, error, message):
    with pytest.raises(error, match=message):
        make()
