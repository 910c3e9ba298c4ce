"""Gilotte App. A rank marginals against enumeration of Eq. 2 (in floats, and in exact rational
arithmetic for weights across the float range) and the exponential-race quadrature."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from test_plackett_luce import exact_weights

from recpack_ope.logged.banner_marginals import banner_rank_marginals, sampled_banner_rank_marginals
from recpack_ope.logged.plackett_luce import rank_marginals


def brute_force(candidates: np.ndarray, n: int) -> np.ndarray:
    """P(P_r = p | D = first n candidates) by enumerating every ordered n-tuple of candidates
    (App. A.2, Eq. 2) and keeping those whose set is D."""
    total = candidates.sum()
    joint = np.zeros((n, n))
    for draw in itertools.permutations(range(candidates.size), n):
        if max(draw) >= n:
            continue
        w = candidates[list(draw)]
        prob = np.prod(w / (total - np.concatenate([[0.0], np.cumsum(w)[:-1]])))
        joint[np.arange(n), list(draw)] += prob
    return joint / joint[0].sum()


def enumerate_banner(weights: list[Fraction], outside: Fraction) -> np.ndarray:
    """P(P_r = p | D) of a PL banner drawn from D plus an outside mass, exactly."""
    n = len(weights)
    q = [[Fraction(0)] * n for _ in range(n)]
    total_c, shown = sum(weights) + outside, Fraction(0)
    for ordering in itertools.permutations(range(n)):
        p, left = Fraction(1), total_c
        for item in ordering:
            p *= weights[item] / left
            left -= weights[item]
        shown += p
        for r, item in enumerate(ordering):
            q[r][item] += p
    return np.array([[float(x / shown) for x in row] for row in q])


@pytest.mark.parametrize("n", range(1, 8))
def test_dynamic_programme_equals_enumeration_for_every_banner_size(n):
    rng = np.random.default_rng(n)
    candidates = rng.lognormal(0.0, 1.0, n + 2)  # two candidates that were not displayed
    q = banner_rank_marginals(candidates[:n], outside_mass=candidates[n:].sum())
    np.testing.assert_allclose(q, brute_force(candidates, n), rtol=0, atol=1e-12)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)  # every rank holds a product
    np.testing.assert_allclose(q.sum(axis=0), 1.0, atol=1e-12)  # every product has a rank


def test_without_outside_candidates_it_equals_the_quadrature_of_the_exponential_race():
    w = np.random.default_rng(3).lognormal(0.0, 1.5, 12)
    np.testing.assert_allclose(banner_rank_marginals(w), rank_marginals(w, 12).T, atol=1e-12)


def test_tiny_weights_do_not_underflow_and_equal_weights_are_uniform():
    w = np.full(16, 1e-30) * np.linspace(1, 2, 16)
    q = banner_rank_marginals(w, outside_mass=1.0)
    assert np.isfinite(q).all()
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    # With W_out ≫ W_D the conditional order is PL over D with weights w_p·(nothing else):
    # every factor's denominator is ≈ 1, so P(σ | D) ∝ Π w_σ(i) = const: uniform.
    np.testing.assert_allclose(q, 1 / 16, atol=1e-12)
    np.testing.assert_array_equal(banner_rank_marginals(np.full(5, 0.1), 0.5), np.full((5, 5), 0.2))


def test_importance_sampling_is_within_its_standard_errors_of_the_exact_programme():
    rng = np.random.default_rng(8)
    w = rng.lognormal(0.0, 1.0, 8)
    exact = banner_rank_marginals(w, outside_mass=3.0)
    estimate, se = sampled_banner_rank_marginals(w, 3.0, n_samples=50_000, rng=0)
    z = (estimate - exact) / se
    assert np.abs(z).max() < 4.5  # 64 cells: P(max |z| > 4.5) < 5e-4 for a calibrated SE
    assert 0.6 < np.sqrt(np.mean(z**2)) < 1.5  # and the SEs are not wildly inflated
    np.testing.assert_allclose(estimate.sum(axis=1), 1.0, atol=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="17 products exceed 16"):
        banner_rank_marginals(np.ones(17))
    with pytest.raises(ValueError, match="weight of product 1 is 0.0"):
        banner_rank_marginals([1.0, 0.0])
    with pytest.raises(ValueError, match="outside_mass must be finite and >= 0"):
        banner_rank_marginals([1.0, 2.0], outside_mass=-1)


@pytest.mark.parametrize(
    "weights, outside",
    [
        ([1e-10, 1.0, 1.0], 0.0),  # was off by 4e-8: W_C − W_S lost its digits
        ([1e-16, 1.0, 1.0, 2.0], 0.0),  # was NaN
        ([1e-300, 1.0, 1e300], 0.0),  # was NaN
        ([1.0, 2.0, 3.0], 1e300),  # was NaN
        ([1e308, 1e308, 5e307], 1e308),  # the masses overflow unless scaled
        ([0.3, 0.2, 0.1], 0.4),
    ],
)
def test_banner_marginals_equal_exact_enumeration(weights, outside):
    got = banner_rank_marginals(weights, outside)
    expected = enumerate_banner(exact_weights(weights), Fraction(outside))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_outside_mass_negative_by_rounding_is_zero():
    w = [0.1, 0.2, 0.3]
    outside = 0.6 - sum(w)  # every candidate shown: −1.1e-16 by rounding
    assert outside < 0
    np.testing.assert_array_equal(banner_rank_marginals(w, outside), banner_rank_marginals(w, 0.0))
    np.testing.assert_array_equal(
        sampled_banner_rank_marginals(w, outside, n_samples=100, rng=1)[0],
        sampled_banner_rank_marginals(w, 0.0, n_samples=100, rng=1)[0],
    )
    with pytest.raises(ValueError, match=r"outside_mass.*-0\.001"):
        banner_rank_marginals(w, -1e-3)


def test_sampled_banner_marginals_with_overflowing_masses():
    w, outside = [1e308, 1e308, 5e307], 1e308
    estimate, se = sampled_banner_rank_marginals(w, outside, n_samples=40_000, rng=0)
    exact = enumerate_banner(exact_weights(w), Fraction(outside))
    assert np.isfinite(estimate).all() and (se > 0).all()
    assert np.abs((estimate - exact) / se).max() < 4.5


def test_banners_beyond_the_exact_limit_are_sampled():
    with pytest.raises(ValueError, match="17 products exceed 16"):
        banner_rank_marginals(np.ones(17))
    estimate, se = sampled_banner_rank_marginals(np.ones(17), 0.5, n_samples=500, rng=0)
    np.testing.assert_allclose(estimate.sum(axis=0), 1.0)
    assert se.shape == (17, 17)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: banner_rank_marginals([1.0, 2.0], "a"), "outside_mass.*'a'"),
        (lambda: banner_rank_marginals([1.0, 2.0], [0.1]), r"outside_mass.*\[0\.1\]"),
        (lambda: banner_rank_marginals([1.0, 2.0], 1j), "outside_mass.*1j"),
        (lambda: banner_rank_marginals([1.0, 2.0], np.nan), "outside_mass.*nan"),
        (lambda: banner_rank_marginals([1.0, 2j]), "weights has complex dtype"),
        (lambda: sampled_banner_rank_marginals([1.0, 2.0], rng="a"), "rng.*'a'"),
    ],
)
def test_arguments_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()
