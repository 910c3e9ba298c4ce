"""Rank marginals of a Plackett–Luce banner given the set it displayed (Gilotte 2019, App. A).

A banner of n products is drawn from a candidate set C by a Plackett–Luce (PL) policy: rank i
takes product p with probability ``w_p / (W_C − w(first i − 1 products))`` (App. A.2, Eq. 1).
Counterfactual disagreement needs, for the displayed set D, ``q_r(p) = P(P_r = p | D_n = D)``:
where p would have landed had the banner been re-drawn with the same products (App. A.5).

Exact dynamic programme
-----------------------
For subsets S ⊆ D (bit masks), with ``W_S`` their weight and ``W_out = W_C − W_D``:

* forward ``F(S) = P(D_|S| = S) = Σ_{p∈S} F(S∖p) · w_p / (W_C − W_{S∖p})`` (Lemma 1);
* backward ``G(T) = Σ_{p∈T} G(T∖p) · w_p / (W_out + W_T)``: the probability that, once
  ``D∖T`` is drawn, the next ``|T|`` draws are exactly T (the remaining mass is
  ``W_C − W_{D∖T} = W_out + W_T``);
* ``P(P_r = p, D_n = D) = Σ_{S ⊆ D∖p, |S| = r−1} F(S) · w_p / (W_C − W_S) · G(D∖S∖p)``,
  and ``P(D_n = D) = F(D)``.

Lemma 2 of the paper reaches the same numbers in O(n²·2ⁿ) per rank; splitting every ordering
at rank r into the prefix S, the product p and the suffix gives all ranks at once in
O(n·2ⁿ).

Every ordering of D is a product of n factors ``w_p / m``, m the mass left before the draw.
The numerators multiply to ``Π_{p∈D} w_p`` in every ordering, so they cancel in q and are left
out; the factor of the draw with c products of D left is taken as ``m_c / m`` instead of
``1 / m``, where ``m_c = W_out + (the c lightest weights of D)`` is the least mass c products
can leave, a constant of the position that also cancels. Every factor then lies in (0, 1] and
the heaviest-first ordering has product 1, so nothing overflows and only orderings
negligible next to it underflow, whatever the spread of the weights. The masses left are sums
of weights (``W_out + W_T`` for the products T still to draw), never differences such as
``W_C − W_S``, which lose every digit when a heavy product has been drawn.

Approximation for large banners
-------------------------------
Beyond ``max_exact`` products (16 by default, Criteo's largest banner), orderings are drawn
from the PL policy restricted to D (proposal ``Π_i w_{σ_i} / (W_D − W_{σ<i})``) and
importance-weighted by ``Π_i (W_D − W_{σ<i}) / (W_C − W_{σ<i})``, the ratio of the true
conditional to the proposal up to a constant (computed as ``Π_i L_i / (L_i + W_out)`` in log
space, ``L_i`` the displayed weight still to draw, summed from the end). The self-normalised
estimate of ``q_r(p)`` comes with its delta-method standard error; with ``W_out = 0`` the
weights are all 1 and this is plain Monte Carlo.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from .._validation import check_finite_number, check_positive_int, check_seed, real_array
from .plackett_luce import sample_rankings

__all__ = ["banner_rank_marginals", "sampled_banner_rank_marginals", "exact_marginals", "MAX_EXACT"]

MAX_EXACT = 16
# An outside mass negative by at most this share of the displayed weight is rounding (a total
# minus the displayed weights, all candidates displayed) and taken as 0.
ROUNDING = 1e-12


def _check_banner(weights, outside) -> tuple[np.ndarray, float]:
    w = np.asarray(real_array(weights, "weights"), dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"weights must be a non-empty 1-D array, got shape {w.shape}")
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if bad.size:
        raise ValueError(
            f"Plackett–Luce weight of product {bad[0]} is {w[bad[0]]}; weights are > 0"
        )
    value = check_finite_number(outside, "outside_mass")
    if value < 0:
        if -value > ROUNDING * w.sum():
            raise ValueError(
                f"outside_mass must be finite and >= 0, got {outside!r}: more negative than the "
                f"rounding of a total minus the displayed weights ({ROUNDING:g} × {w.sum():.6g})"
            )
        value = 0.0
    return w, value


@cache
def _masks(n: int):
    """Bit-mask bookkeeping for n products.

    Returns ``layers[k]`` (masks of k products), ``containing[k][p]`` (those that contain
    product p) and ``without[p]`` (masks without p, ordered by size, so that the masks of
    size r start at ``starts[r]``).
    """
    masks = np.arange(1 << n, dtype=np.int64)
    popcount = np.zeros(1 << n, dtype=np.int64)
    for p in range(n):
        popcount += (masks >> p) & 1
    by_size = masks[np.argsort(popcount, kind="stable")]
    layers = np.split(by_size, np.cumsum(np.bincount(popcount, minlength=n + 1))[:-1])
    containing = [[layer[((layer >> p) & 1) == 1] for p in range(n)] for layer in layers]
    without = [by_size[((by_size >> p) & 1) == 0] for p in range(n)]
    # Masks without p have 0..n−1 products, C(n−1, r) of them with r.
    starts = np.concatenate([[0], np.cumsum([math.comb(n - 1, r) for r in range(n - 1)])]).astype(
        np.int64
    )
    return layers, containing, without, starts


def _subset_sums(w: np.ndarray) -> np.ndarray:
    """``W_S`` for every mask S (rows) and banner (columns): shape (2ⁿ, banners)."""
    n = w.shape[1]
    sums = np.zeros((1 << n, w.shape[0]))
    for p in range(n):
        sums[1 << p : 2 << p] = sums[: 1 << p] + w[:, p]
    return sums


def exact_marginals(w: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """``q[b, r, p] = P(P_{r+1} = p | D)`` for a batch of validated banners of one size n.

    Arrays are laid out masks × banners, so gathering the subsets of a layer moves whole
    contiguous rows. Factors are ``m_c / (W_out + W_T)`` (module docstring). Banners whose
    displayed weights are all equal are uniform over orderings whatever the outside mass
    (every ordering has the same factors), so they get exactly 1/n.
    """
    n_banners, n = w.shape
    layers, containing, without, starts = _masks(n)
    with np.errstate(over="ignore"):
        huge = ~np.isfinite(outside + w.sum(axis=1))
    if huge.any():  # scale by a power of two (exact) so that every sum of masses is finite
        scale = 2.0 ** -(math.ceil(math.log2(n + 1)) + 1)
        w = np.where(huge[:, None], w * scale, w)
        outside = np.where(huge, outside * scale, outside)
    left = _subset_sums(w)
    left += outside  # W_out + W_T: the mass left while the products of mask T are still to draw
    least = np.zeros((n + 1, n_banners))  # least[c] = m_c
    least[1:] = (outside[:, None] + np.cumsum(np.sort(w, axis=1), axis=1)).T
    full = (1 << n) - 1
    forward = np.zeros((1 << n, n_banners))
    backward = np.zeros((1 << n, n_banners))
    forward[0] = backward[0] = 1.0
    for k in range(1, n + 1):
        for p in range(n):
            sets = containing[k][p]
            before = sets ^ (1 << p)
            forward[sets] += forward[before] * _factor(least[n - k + 1], left[full ^ before])
            backward[sets] += backward[before]
        backward[layers[k]] *= _factor(least[k], left[layers[k]])
    drawn = np.repeat(np.arange(n), [math.comb(n - 1, r) for r in range(n)])  # |S| of without[p]
    joint = np.empty((n_banners, n, n))
    for p in range(n):
        prefix = without[p]
        terms = (
            forward[prefix]
            * _factor(least[n - drawn], left[full ^ prefix])
            * backward[full ^ prefix ^ (1 << p)]
        )
        joint[:, :, p] = np.add.reduceat(terms, starts, axis=0).T
    q = joint / forward[full][:, None, None]
    q[np.ptp(w, axis=1) == 0] = 1.0 / n
    return q


def _factor(least: np.ndarray, left: np.ndarray) -> np.ndarray:
    """``least / left`` in (0, 1]; 1 where both are 0 (weights below float range after scaling)."""
    return np.divide(
        least, left, out=np.ones(np.broadcast_shapes(least.shape, left.shape)), where=left > 0
    )


def banner_rank_marginals(weights, outside_mass: float = 0.0) -> np.ndarray:
    """Exact ``P(P_r = p | D)`` for a Plackett–Luce banner (Gilotte App. A.5).

    Parameters
    ----------
    weights : array_like of float, shape (n,)
        PL weights of the n displayed products (any positive scale), n ≤ ``MAX_EXACT``.
    outside_mass : float
        Total weight, on the same scale, of the candidates that were *not* displayed
        (``W_C − W_D``); 0 when the banner shows every candidate.

    Returns
    -------
    numpy.ndarray, shape (n, n)
        ``out[r − 1, p]``; every row (rank) and every column (product) sums to 1.
    """
    w, outside = _check_banner(weights, outside_mass)
    if w.size > MAX_EXACT:
        raise ValueError(
            f"the exact programme takes O(n·2ⁿ) time and memory; {w.size} products exceed "
            f"{MAX_EXACT}: use sampled_banner_rank_marginals"
        )
    return exact_marginals(w[None, :], np.array([outside]))[0]


def sampled_banner_rank_marginals(
    weights, outside_mass: float = 0.0, *, n_samples: int = 10_000, rng=None
) -> tuple[np.ndarray, np.ndarray]:
    """Importance-sampling estimate of ``P(P_r = p | D)`` with standard errors.

    For banners too large for :func:`banner_rank_marginals`; see the module docstring.

    Returns
    -------
    estimate, standard_error : numpy.ndarray, shape (n, n)
        Self-normalised estimate ``out[r − 1, p]`` (rows and columns sum to 1) and the
        delta-method standard error of each entry.
    """
    w, outside = _check_banner(weights, outside_mass)
    n_samples = check_positive_int(n_samples, "n_samples")
    rng = np.random.default_rng(check_seed(rng, "rng"))
    n = w.size
    order = sample_rankings(w, n, n_samples, rng)
    # log of the displayed weight still to draw before each draw, summed from the end in log
    # space: no cancellation, no overflow.
    to_draw = np.logaddexp.accumulate(np.log(w)[order][:, ::-1], axis=1)[:, ::-1]
    with np.errstate(divide="ignore"):  # log(0) = -inf: no outside mass, every ratio 1
        log_ratio = np.sum(to_draw - np.logaddexp(to_draw, np.log(outside)), axis=1)
    ratio = np.exp(log_ratio - log_ratio.max())
    cells = (np.arange(n) * n + order).ravel()  # (rank, product) of every draw
    per_draw = np.repeat(ratio, n)
    first = np.bincount(cells, weights=per_draw, minlength=n * n).reshape(n, n)
    second = np.bincount(cells, weights=per_draw**2, minlength=n * n).reshape(n, n)
    total = ratio.sum()
    estimate = first / total
    variance = second * (1 - 2 * estimate) + estimate**2 * np.sum(ratio**2)
    return estimate, np.sqrt(np.maximum(variance, 0.0)) / total
