"""Plackett–Luce rankings: exact rank marginals, exposure and sampling.

A Plackett–Luce (PL) policy with positive weights ``w`` fills rank 1, 2, … by drawing, without
replacement, item ``i`` with probability ``w_i / Σ_{j not yet placed} w_j``. Its exposure
``ε(i) = Σ_r P(rank_i = r) · δ(r)`` is Jeunen et al.'s Eq. 8 for a policy without candidate
generation; it is the logging propensity that makes DCG unbiased (Eq. 10).

Exact rank marginals
--------------------
The PL order is the arrival order of independent exponential clocks ``T_j ~ Exp(w_j)``
(Luce's choice axiom as an exponential race). Item i lands at rank ``k + 1`` iff exactly k
other clocks ring before ``T_i``::

    P(rank_i = k + 1) = ∫_0^∞ w_i e^{−w_i t} · P(K_{−i}(t) = k) dt,

where ``K_{−i}(t)`` counts the other items arrived by time t, a Poisson-binomial variable with
success probabilities ``q_j(t) = 1 − e^{−w_j t}``. The integral is evaluated by composite
Gauss–Legendre quadrature on ``[0, T]``, with T large enough that fewer than ``n`` arrivals by
time T has probability below 1e-17 (Chernoff bound), and the Poisson-binomial probabilities are
propagated as polynomial coefficients truncated at degree ``n``. Leave-one-out distributions
come from dividing item i back out of the all-items polynomial, which is numerically stable
while ``q_i(t) ≤ 1/2``; the few items that pass 1/2 before T ("heavy", at most about ``2n +
O(√n)`` of them) get their leave-one-out products from prefix and suffix products instead.
Cost: O(N · n · nodes) time, O(nodes · n) memory per block of items; requests beyond a few
GiB or about a minute are refused with their cost named (ask for fewer ranks, or sample).

Weights across float range
--------------------------
Weights are accepted as they are or as logarithms (``log_weights=True``, e.g.
``score / temperature``). When the weights, scaled to sum to 1, reach below 1e-290 (they
span more orders of magnitude than the quadrature's time axis can hold, or underflow), the
items are sorted by weight and split where the lighter ones cannot overtake any of the
heavier ones within the ranks asked for, except with probability below 2⁻⁶⁴ (a union bound,
``min(k, n) · W_lighter / w_min(k, n)``): each group then fills its own ranks, computed on
weights rescaled by its heaviest, and items past the first such split after rank n are never
shown. Other splits are made only where a group would otherwise span too many orders of
magnitude; a probability lost to a split (returned as 0) is below 2⁻⁶⁴.

Sampled exposure
----------------
Exact marginals cost O(N · n · nodes) per context, too much for thousands of contexts. The
Rao–Blackwellised estimate behind ``PlackettLuceRanker(..., rao_blackwell=True)`` draws
rankings and credits every item with its exact expected exposure given the order of the
other items (deleting an item from a PL ranking leaves a PL ranking of the others), in
vectorised blocks of contexts: unbiased, with a reported standard error; see
``_conditional_exposure``.
"""

from __future__ import annotations

import math

import numpy as np

from .._chunks import rows_per_chunk
from .._validation import check_bool, check_positive_int, real_array
from ..propensity.discount import Discount

__all__ = ["rank_marginals", "exposure", "sample_rankings"]

# Gauss–Legendre rule used on every panel of the time axis.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)
# Light items are processed in blocks of this many columns (nodes × block floats per array).
_BLOCK = 2048


# Weights scaled to sum to 1 must stay above this for the quadrature (its horizon is 40 / the
# smallest weight); below it the log-space split of ``rank_marginals`` takes over.
_TINY = 1e-290
# A lighter group of items counts as never overtaking a heavier one below this probability.
_SPLIT = 2.0**-64
# Exact marginals costing more are refused: bytes of the largest arrays, and elementary steps
# (nodes × ranks × (4 · items + heavy items × ranks), about 1–2 ns each).
_MAX_BYTES = 4 * 2**30
_MAX_WORK = 5e10


def _check_weights(
    weights, log_weights: bool = False
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Validated Plackett–Luce weights: (weights scaled to sum to 1, None) when every scaled
    weight is at least ``_TINY``, else (None, log-weights) for the log-space route."""
    given = np.asarray(real_array(weights, "weights"), dtype=np.float64)
    if given.ndim != 1 or given.size == 0:
        raise ValueError(f"weights must be a non-empty 1-D array, got shape {given.shape}")
    if log_weights:
        bad = np.flatnonzero(~np.isfinite(given))
        if bad.size:
            raise ValueError(
                f"Plackett–Luce log-weights must be finite; item {bad[0]} has "
                f"{float(given[bad[0]])}"
            )
        w = np.exp(given - given.max())
    else:
        bad = np.flatnonzero(~np.isfinite(given) | (given <= 0))
        if bad.size:
            raise ValueError(
                f"Plackett–Luce weights must be finite and > 0; item {bad[0]} has "
                f"{float(given[bad[0]])}"
            )
        w = given
    with np.errstate(over="ignore"):  # an overflowing sum takes the log-space route
        total = w.sum()
    if np.isfinite(total):
        w = w / total
        if w.min() >= _TINY:
            return w, None
    return None, given if log_weights else np.log(given)


def _check_n_ranks(n_ranks: int, n_items: int) -> int:
    n_ranks = check_positive_int(n_ranks, "n_ranks")
    if n_ranks > n_items:
        raise ValueError(f"n_ranks={n_ranks} exceeds the number of items ({n_items})")
    return n_ranks


def _horizon(w: np.ndarray, n: int) -> float:
    """Time T after which the integrands are below ~1e-17 for every rank ≤ n.

    Either the expected number of arrivals reaches ``μ* = n + 10√n + 80`` (then fewer than n
    arrivals has probability ≤ exp(−(μ*−n)²/2μ*) < 1e-17) or, when the catalogue is too small
    for that, every clock has rung with probability 1 − e^{−40}.
    """
    target = n + 10.0 * math.sqrt(n) + 80.0
    t_all = 40.0 / w.min()
    if target >= w.size - 1:
        return t_all
    lo, hi = 0.0, t_all
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.sum(-np.expm1(-w * mid)) < target:
            lo = mid
        else:
            hi = mid
    return min(hi, t_all)


def _quadrature(w: np.ndarray, horizon: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on [0, horizon]: 64 even panels, refined geometrically near 0.

    The geometric panels resolve the fast decay ``w_i e^{−w_i t}`` of the heaviest items, the
    even ones the slower evolution of the arrival counts.
    """
    edges = list(np.linspace(0.0, horizon, 65))
    t = horizon / 64
    while t > 0.05 / w.max():
        t /= 2
        edges.append(t)
    edges = np.unique(edges)
    lo, hi = edges[:-1, None], edges[1:, None]
    nodes = (0.5 * (hi - lo) * _GL_NODES + 0.5 * (hi + lo)).ravel()
    weights = (0.5 * (hi - lo) * _GL_WEIGHTS).ravel()
    return nodes, weights


def _times_linear(poly: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``poly(z) · (1 − q + q z)`` truncated to poly's degree; q broadcasts over leading axes."""
    out = poly * (1.0 - q)[..., None]
    out[..., 1:] += poly[..., :-1] * q[..., None]
    return out


def _times_poly(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncated product of polynomial coefficient arrays (last axis = degree)."""
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape))
    n = a.shape[-1]
    for k in range(n):
        out[..., k:] += a[..., k : k + 1] * b[..., : n - k]
    return out


def rank_marginals(weights, n_ranks: int, *, log_weights: bool = False) -> np.ndarray:
    """Exact probabilities ``P(rank_i = r)`` of a Plackett–Luce ranking, for ranks 1..n_ranks.

    Parameters
    ----------
    weights : array_like of float, shape (n_items,)
        Positive PL weights (any scale; e.g. ``exp(score / temperature)``), or their
        logarithms with ``log_weights=True``.
    n_ranks : int
        Number of ranks filled (the feed length), at most ``n_items``.
    log_weights : bool
        ``weights`` are logarithms (any finite reals), for weights beyond float range.

    Returns
    -------
    numpy.ndarray, shape (n_items, n_ranks)
        ``out[i, r-1] = P(item i at rank r)``. Every column sums to 1; each row sums to the
        probability that the item is shown at all. Accurate to ~1e-12 (tested against
        enumeration of all orderings in exact arithmetic), also for weights spanning hundreds
        of orders of magnitude; see the module docstring for the method.

    Raises
    ------
    ValueError
        For weights that are not finite and positive, ``n_ranks`` outside ``1..n_items``, or
        a computation beyond a few GiB or about a minute (the message names its cost).
    """
    w, logw = _check_weights(weights, check_bool(log_weights, "log_weights"))
    n = _check_n_ranks(n_ranks, (w if logw is None else logw).size)
    return _marginals(w, n) if logw is None else _split_marginals(logw, n)


def _split_marginals(logw: np.ndarray, n: int) -> np.ndarray:
    """Rank marginals for log-weights too spread for one quadrature (module docstring)."""
    order = np.argsort(-logw, kind="stable")
    lw = logw[order]
    size = lw.size
    # Split after the first k items when the lighter ones overtake one of them within the
    # first min(k, n) draws with probability below _SPLIT: before each of those draws one of
    # the top min(k, n) items is left, so the chance is at most min(k, n) · W_lighter / w_min(k, n).
    k = np.arange(1, size)
    j = np.minimum(k, n)
    lighter = np.logaddexp.accumulate(lw[::-1])[::-1][1:]
    splittable = np.log(j) + lighter - lw[j - 1] < math.log(_SPLIT)
    # Items past the first split point after rank n are never shown: leave them out.
    past = np.flatnonzero(splittable[n - 1 :])
    end = n + int(past[0]) if past.size else size
    # Nats a group may span and still have every weight, scaled to sum 1, above _TINY.
    span = -math.log(_TINY) - math.log(size)
    out = np.zeros((size, n))
    start = 0
    while start < n:
        # Split only where needed: at the last split point within ``span`` of the group's top.
        reach = min(int(np.searchsorted(-lw, span - lw[start], side="right")), end)
        stop = end
        if reach < end:
            points = np.flatnonzero(splittable[start:reach]) + start + 1
            if not points.size:
                raise ValueError(
                    f"Plackett–Luce weights of items {order[start]} and {order[reach]} differ by a "
                    f"factor of e^{lw[start] - lw[reach]:.0f}, with no gap between them wide "
                    "enough "
                    "to rank the heavier and lighter items separately; shrink their range"
                )
            stop = int(points[-1])
        group = np.exp(lw[start:stop] - lw[start])
        ranks = min(stop, n) - start
        out[order[start:stop], start : start + ranks] = _marginals(group / group.sum(), ranks)
        start = stop
    return out


def _check_cost(n_bytes: float, work: float, n_items: int, n_ranks: int) -> None:
    """Refuse exact marginals beyond ``_MAX_BYTES`` of memory or ``_MAX_WORK`` steps (0: not
    yet estimated)."""
    if n_bytes > _MAX_BYTES or work > _MAX_WORK:
        steps = f" and {work:.1e} steps" if work else ""
        cost = (
            f"exact rank marginals of {n_items} items over {n_ranks} ranks would need about "
            f"{n_bytes / 2**30:.1f} GiB{steps} (limits {_MAX_BYTES / 2**30:.0f} GiB and "
            f"{_MAX_WORK:.0e} steps, about a minute)"
        )
        raise _TooCostly(
            f"{cost}: ask for fewer ranks (an exposure needs only the ranks up to its discount's "
            "cutoff, the feed length) or sample rankings",
            cost,
        )


class _TooCostly(ValueError):
    """Exact rank marginals refused for their cost; ``cost`` says what they would need."""

    def __init__(self, message: str, cost: str):
        super().__init__(message)
        self.cost = cost


def _marginals(w: np.ndarray, n: int) -> np.ndarray:
    """Rank marginals of weights that sum to 1, each at least ``_TINY`` (module docstring)."""
    _check_cost(8.0 * w.size * n, 0.0, w.size, n)
    if np.ptp(w) == 0:  # uniform random order: every item equally likely at every rank
        return np.full((w.size, n), 1.0 / w.size)
    horizon = _horizon(w, n)
    t, tw = _quadrature(w, horizon)
    heavy = np.flatnonzero(w * horizon > math.log(2.0))
    light = np.setdiff1d(np.arange(w.size), heavy)
    _check_cost(
        8.0 * n * (w.size + t.size * (heavy.size + 4)),
        t.size * n * (4.0 * w.size + heavy.size * n),
        w.size,
        n,
    )

    # Poisson-binomial polynomial of the light items, at every node: shape (nodes, n).
    base = np.zeros((t.size, n))
    base[:, 0] = 1.0
    for i in light:
        base = _times_linear(base, -np.expm1(-w[i] * t))

    # Heavy items: the others' polynomial is (light · heavy before i) · (heavy after i). Keep
    # the prefix products and build the suffix product while walking back.
    qh = -np.expm1(-np.outer(t, w[heavy]))  # (nodes, h)
    prefix = np.empty((heavy.size + 1, t.size, n))
    prefix[0] = base
    for j in range(heavy.size):
        prefix[j + 1] = _times_linear(prefix[j], qh[:, j])
    every = prefix[heavy.size]  # all items
    out = np.empty((w.size, n))
    suffix = np.zeros((t.size, n))
    suffix[:, 0] = 1.0
    for j in range(heavy.size - 1, -1, -1):
        i = heavy[j]
        others = _times_poly(prefix[j], suffix)
        out[i] = ((w[i] * np.exp(-w[i] * t) * tw)[:, None] * others).sum(axis=0)
        suffix = _times_linear(suffix, qh[:, j])

    # Light items: divide (1 − q_i + q_i z) back out of ``every``; stable for q_i ≤ 1/2.
    for start in range(0, light.size, _BLOCK):
        items = light[start : start + _BLOCK]
        wt = np.outer(t, w[items])
        q, stay = -np.expm1(-wt), np.exp(-wt)
        scale = tw[:, None] * w[items]
        previous = np.zeros_like(q)
        for k in range(n):
            # (1 − q_i) · P(K_{−i} = k) = P(K = k) − q_i · P(K_{−i} = k − 1)
            joint = every[:, k : k + 1] - q * previous
            out[items, k] = (scale * joint).sum(axis=0)
            previous = joint / stay
    return np.clip(out, 0.0, 1.0)


def exposure(weights, discount: Discount, n_ranks: int, *, log_weights: bool = False) -> np.ndarray:
    """Expected exposure ``ε(i) = Σ_{r ≤ n} P(rank_i = r) · δ(r)`` of every item (Eq. 8).

    Parameters
    ----------
    weights : array_like of float, shape (n_items,)
        Positive Plackett–Luce weights, or their logarithms with ``log_weights=True``.
    discount : Discount
        Examination curve ``δ(r) = P(V=1 | R=r)`` of the position-based model.
    n_ranks : int
        Feed length; ranks past it are never shown.
    log_weights : bool
        ``weights`` are logarithms, as in :func:`rank_marginals`.

    Returns
    -------
    numpy.ndarray, shape (n_items,)
        Per-item exposure probabilities.
    """
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    return rank_marginals(weights, n_ranks, log_weights=log_weights) @ discount.weights(n_ranks)


def sample_rankings(
    weights, n_ranks: int, n_samples: int, rng: np.random.Generator, *, log_weights: bool = False
) -> np.ndarray:
    """Draw ``n_samples`` independent Plackett–Luce rankings of length ``n_ranks``.

    Uses the exponential race (the smallest ``E_j / w_j`` with ``E_j ~ Exp(1)`` fill the
    ranks in order), which is exact and vectorised; memory is bounded by drawing in blocks.
    Weights too spread for float ratios race in log space (``log E_j − log w_j``, the same
    order).

    Parameters
    ----------
    weights : array_like of float, shape (n_items,)
        Positive Plackett–Luce weights, or their logarithms with ``log_weights=True``.
    n_ranks : int
        Length of each ranking, at most ``n_items``.
    n_samples : int
        Number of rankings, >= 1.
    rng : numpy.random.Generator
        Source of the draws.
    log_weights : bool
        ``weights`` are logarithms, as in :func:`rank_marginals`.

    Returns
    -------
    numpy.ndarray of int64, shape (n_samples, n_ranks)
        Item indices, rank 1 first.
    """
    w, logw = _check_weights(weights, check_bool(log_weights, "log_weights"))
    size = (w if logw is None else logw).size
    n = _check_n_ranks(n_ranks, size)
    n_samples = check_positive_int(n_samples, "n_samples")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    out = np.empty((n_samples, n), dtype=np.int64)
    step = rows_per_chunk(size)
    for start in range(0, n_samples, step):
        rows = min(step, n_samples - start)
        draws = rng.standard_exponential((rows, size))
        clocks = draws / w if logw is None else np.log(draws) - logw
        if n < size:
            first = np.argpartition(clocks, n - 1, axis=1)[:, :n]
        else:
            first = np.broadcast_to(np.arange(size), (rows, size))
        order = np.argsort(np.take_along_axis(clocks, first, axis=1), axis=1)
        out[start : start + rows] = np.take_along_axis(first, order, axis=1)
    return out


def _conditional_exposure(
    log_weights: np.ndarray,
    delta: np.ndarray,
    n_samples: int,
    rng: np.random.Generator,
    rows: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rao–Blackwellised Monte Carlo exposure ``ε(a) = Σ_r δ(r) P(rank_a = r)`` under a block
    of Plackett–Luce policies.

    Deleting item a from a PL ranking leaves a PL ranking of the others, and given the others'
    order a's rank has a closed form. So every drawn ranking contributes, for every item, its
    exact expected exposure given the order of the *other* items::

        g_a = Σ_r δ(r) · x / (Q_r + x) · Π_{i<r} Q_i / (Q_i + x),   x = w_a,

    ``Q_i`` the others' weight still unplaced at rank i. ``E[g_a] = ε(a)`` (unbiased), and as
    only the others' order is random its variance is small. The standard error is the draws'
    standard deviation over √n_samples.

    Parameters
    ----------
    log_weights : numpy.ndarray, shape (n_policies, width)
        Log-weights of each policy's candidates, ``-inf`` for padding (no candidate); each
        row's largest 0, its finite ones at least ``log(_TINY)``, and at least n_ranks finite.
    delta : numpy.ndarray, shape (n_ranks,)
        View probabilities of ranks 1..n_ranks.
    n_samples : int
        Rankings drawn per policy, >= 2.
    rng : numpy.random.Generator
        Source of the draws.
    rows, cols : numpy.ndarray of int
        The (policy, column) pairs whose exposure is returned.

    Returns
    -------
    (exposure, standard_error) : numpy.ndarray, aligned with ``rows``

    Notes
    -----
    Asked for many items per policy (at least n/2), those at most ``L / 2n`` heavy (``L`` a
    lower bound on the weight a draw leaves unplaced) are *light*: for them ``g_a = y ·
    p_s(y)``, ``y = x / L``, with ``p_s`` a polynomial of degree n − 1 per draw whose
    coefficients are summed over the draws, so a light item costs O(n) (well conditioned:
    every ``x / R ≤ 1/2n``). Draws that placed a light item, the heavier items (at most 3n per
    policy) and every item when fewer are asked for, are evaluated one by one, O(n) per
    draw. The weight a draw leaves unplaced is ``(L − placed items outside the n heaviest) +
    unplaced items among the n heaviest``, accurate to ~width·eps relative even when the
    placed items hold almost all the weight (each unplaced heavy item outweighs every light
    one).
    """
    n_blocks, width = log_weights.shape
    n, count = delta.size, n_samples
    ws = np.exp(log_weights)
    cum = np.cumsum(ws, axis=1)
    total = cum[:, -1]
    if n == 1:  # rank 1 is one draw ∝ w: exact
        return delta[0] * ws[rows, cols] / total[rows], np.zeros(rows.size)
    # Every weight is at most 1 (the largest log-weight is 0): where the total is at least 2n,
    # the n heaviest hold at most half of it, so L = W − n bounds every unplaced weight from
    # below and W − Σ placed loses at most a factor 2 of precision. Elsewhere ("tight") find
    # the n heaviest, L the weight outside them.
    low = total - n
    left = total[:, None] - np.arange(n)  # bounds W − (r heaviest) from below
    tight = np.flatnonzero(total < 2 * n)
    if tight.size:
        top = np.argpartition(ws[tight], width - n, axis=1)[:, width - n :]
        top_w = np.take_along_axis(ws[tight], top, axis=1)
        is_top = np.zeros((tight.size, width), dtype=bool)
        np.put_along_axis(is_top, top, True, axis=1)
        low[tight] = np.where(is_top, 0.0, ws[tight]).sum(axis=1)
        left[tight] = low[tight, None] + np.cumsum(np.sort(top_w, axis=1), axis=1)[:, ::-1]
    picks = _first_ranks(ws, cum, left, n, count, rng)

    b = np.arange(n_blocks)[:, None, None]
    wp = ws[b, picks]  # (policies, draws, n)
    # remaining[..., r]: weight not yet placed before rank r + 1; remaining[..., n]: after all
    remaining = np.empty((n_blocks, count, n + 1))
    remaining[..., n] = np.maximum(total[:, None] - wp.sum(axis=2), 0.0)
    if tight.size:
        # (L − placed light items) + unplaced heavy items: each unplaced heavy item outweighs
        # every light one, so this stays accurate to ~width·eps relative.
        placed = picks[tight]
        light_placed = np.where(
            is_top[np.arange(tight.size)[:, None, None], placed], 0.0, wp[tight]
        ).sum(axis=2)
        heavy_left = (
            top_w[:, None, :] * ~(placed[..., None] == top[:, None, None, :]).any(axis=2)
        ).sum(axis=2)
        remaining[tight, :, n] = np.maximum(low[tight, None] - light_placed, 0.0) + heavy_left
    remaining[..., :n] = remaining[..., n:] + np.cumsum(wp[..., ::-1], axis=2)[..., ::-1]

    x = ws[rows, cols]
    # Heavy items, and every item when there are fewer than n/2 per policy (cheaper than the
    # polynomial's n²/2 per draw), are evaluated one by one.
    if n == width or 2 * rows.size < n * n_blocks:
        heavy = np.ones(rows.size, dtype=bool)
    else:
        heavy = x > low[rows] / (2 * n)
    first, second = np.zeros(rows.size), np.zeros(rows.size)
    # Draws that placed a wanted item: g with the others' order skipping it.
    wanted = np.zeros(ws.shape, dtype=bool)
    wanted[rows, cols] = True
    pb, ps, pr = np.nonzero(wanted[b, picks])
    keys = rows * np.int64(width) + cols
    order = np.argsort(keys)
    at = order[np.searchsorted(keys[order], pb * np.int64(width) + picks[pb, ps, pr])]
    own = _placed_exposure(delta, remaining[pb, ps], wp[pb, ps, pr], pr)
    first += np.bincount(at, weights=own, minlength=rows.size)
    second += np.bincount(at, weights=own**2, minlength=rows.size)
    if not heavy.all():
        # Light items: Σ_s y p_s(y) in y = x / L, coefficients scaled by L to stay in float
        # range: p_s(y) = Σ_r δ_r L/R_r · Π_{i<r} (1 − y L/R_i).
        scaled = np.moveaxis(low[:, None, None] / remaining, 2, 0)  # (n + 1, policies, draws)
        coef = np.zeros((n, n_blocks, count))  # coef[j]: of y^j
        prod = np.zeros((n, n_blocks, count))
        prod[0] = 1.0
        for i in range(n):
            coef[: i + 1] += (delta[i] * scaled[i]) * prod[: i + 1]
            if i + 1 < n:
                prod[1 : i + 2] -= prod[: i + 1] * scaled[i]
        outer = np.einsum("jbs,kbs->bjk", coef, coef)
        squares = np.zeros((n_blocks, 2 * n - 1))
        for j in range(n):
            squares[:, j : j + n] += outer[:, j]
        coef = np.moveaxis(coef, 0, 2)
        light = np.flatnonzero(~heavy)
        y = x[light] / low[rows[light]]
        first[light] += y * _horner(coef.sum(axis=1)[rows[light]], y)
        second[light] += y**2 * _horner(squares[rows[light]], y)
        # ... less the draws that placed the item (their g is added above)
        keep = ~heavy[at]
        pb, ps, at = pb[keep], ps[keep], at[keep]
        y = x[at] / low[pb]
        poly = y * _horner(coef[pb, ps], y)
        first -= np.bincount(at, weights=poly, minlength=rows.size)
        second -= np.bincount(at, weights=poly**2, minlength=rows.size)
    if heavy.any():
        # Heavy items one by one, from each draw's own R where it did not place them.
        hv = np.flatnonzero(heavy)
        xh = x[hv][:, None]
        g = np.zeros((hv.size, count))
        factor = np.ones_like(g)
        for i in range(n):
            at = remaining[rows[hv], :, i]
            g += delta[i] * factor * xh / at
            factor *= np.maximum(at - xh, 0.0) / at
        g[(picks[rows[hv]] == cols[hv][:, None, None]).any(axis=2)] = 0.0
        first[hv] += g.sum(axis=1)
        second[hv] += (g**2).sum(axis=1)
    mean = first / count
    return mean, np.sqrt(np.maximum(second / count - mean**2, 0.0) / (count - 1))


def _placed_exposure(
    delta: np.ndarray, remaining: np.ndarray, x: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """``g`` of items of weight x that a draw placed at rank k + 1 (0-based k), from the draw's
    unplaced weights ``remaining`` (rows, n + 1): the others' order is the draw's without it."""
    g = np.zeros(x.size)
    factor = np.ones(x.size)
    for r in range(delta.size):
        before = r <= k
        seen = np.where(before, remaining[:, r], remaining[:, r + 1] + x)
        others = np.where(before, np.maximum(remaining[:, r] - x, 0.0), remaining[:, r + 1])
        g += delta[r] * factor * x / seen
        factor *= others / seen
    return g


def _horner(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Σ_j coef[..., j] · x^j``, coefficients broadcast against x."""
    out = np.zeros(np.broadcast_shapes(coef.shape[:-1], x.shape))
    for j in range(coef.shape[-1] - 1, -1, -1):
        out = out * x + coef[..., j]
    return out


def _first_ranks(
    ws: np.ndarray, cum: np.ndarray, left: np.ndarray, n: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """Columns placed at ranks 1..n by ``count`` PL rankings per row of weights ``ws`` (0 for
    padding; ``cum`` their cumulative sums), given lower bounds ``left[:, r]`` on the weight
    outside the r heaviest.

    The first n distinct items of i.i.d. draws ∝ w are a PL ranking. They take on average
    at most ``Σ_{r<n} W / left[r]`` draws; where that nears the number of columns the
    exponential race of :func:`sample_rankings` is cheaper.
    """
    n_blocks, width = ws.shape
    picks = np.empty((n_blocks, count, n), dtype=np.int64)
    expected = (cum[:, -1:] / left).sum(axis=1)
    race = 4 * expected > width
    for b in np.flatnonzero(race):
        candidates = np.flatnonzero(ws[b] > 0)
        picks[b] = candidates[sample_rankings(ws[b, candidates], n, count, rng)]
    rest = np.flatnonzero(~race)
    if not rest.size:
        return picks
    # About as many draws per ranking as it needs on average, then more for those short of n.
    first_per = int(math.ceil(expected[rest].max())) + 1
    more_per = int(3 * math.sqrt(expected[rest].max()) + 2)
    cum = cum[rest]
    owner = np.repeat(np.arange(rest.size), count)
    draws = _inverse_cdf(cum, owner, rng.random((owner.size, first_per)))
    found, short = _first_distinct(draws, n)
    draws = draws[short]
    while short.size:  # extend the draws of rankings still short of n distinct items
        extra = _inverse_cdf(cum, owner[short], rng.random((short.size, more_per)))
        draws = np.concatenate([draws, extra], axis=1)
        more, still = _first_distinct(draws, n)
        found[short] = more
        short, draws = short[still], draws[still]
    picks[rest] = found.reshape(rest.size, count, n)
    return picks


def _inverse_cdf(cum: np.ndarray, owner: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Draws ∝ the weights whose cumulative sums are the rows of ``cum``: for each row k of
    ``u`` (uniform in [0, 1), rows sorted by ``owner``), the first i with
    ``cum[owner[k], i] > u[k, ·] · cum[owner[k], -1]``."""
    total = cum[:, -1]
    # u · total stays below the total, so the item drawn has a positive weight.
    target = np.minimum(u * total[owner, None], np.nextafter(total, 0.0)[owner, None])
    out = np.empty(u.shape, dtype=np.int64)
    bounds = np.searchsorted(owner, np.arange(cum.shape[0] + 1))
    for b in np.flatnonzero(np.diff(bounds)):  # a row of ``cum`` at a time stays in cache
        out[bounds[b] : bounds[b + 1]] = cum[b].searchsorted(
            target[bounds[b] : bounds[b + 1]], side="right"
        )
    return out


def _first_distinct(draws: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first n distinct values in order of appearance, and the rows with fewer
    (whose picks are incomplete)."""
    width = draws.shape[1]
    keys = np.sort(draws * width + np.arange(width), axis=1)  # by value, then by column
    new = np.ones(draws.shape, dtype=bool)
    repeat = keys[:, 1:] // width == keys[:, :-1] // width
    r, c = np.nonzero(repeat)
    new[r, keys[r, c + 1] % width] = False
    seen = np.cumsum(new, axis=1)
    picks = np.zeros((draws.shape[0], n), dtype=np.int64)
    r, c = np.nonzero(new & (seen <= n))
    picks[r, seen[r, c] - 1] = draws[r, c]
    return picks, np.flatnonzero(seen[:, -1] < n)
