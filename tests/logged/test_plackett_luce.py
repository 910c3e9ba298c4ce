"""Exact Plackett–Luce rank marginals, exposure and sampling.

References: enumeration of every ordering (small catalogues), the closed form of a uniform
ordering, and Monte Carlo frequencies of the sampler.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from recpack_ope.plackett_luce import exposure, rank_marginals, sample_rankings

from recpack_ope import ExponentialDiscount, LogDiscount


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
