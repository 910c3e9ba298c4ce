"""Bernoulli Thompson sampling as a ranking policy, with exact position and prefix probabilities.

Each time it ranks, the policy draws one click rate per item from its Beta posterior,
``θ_a ∼ Beta(α_a, β_a)`` independently, and shows the ``n_ranks`` items with the largest
draws, best first (Bernoulli TS, Chapelle & Li, NeurIPS 2011; the behaviour policy of the
Open Bandit Dataset, Saito et al., NeurIPS 2021 Datasets and Benchmarks, §3). It ignores the
context, so every probability below is the same in every context.

Its probabilities are one-dimensional integrals over the value ``t`` of a draw, with ``f_a``,
``F_a`` and ``S_a = 1 − F_a`` the density, distribution and survival function of
``Beta(α_a, β_a)``::

    P(a at rank k)                 = ∫ f_a(t) · P(exactly k − 1 of the θ_b, b ≠ a, exceed t) dt
    P(a_1 > … > a_k > all others)  = ∫ f_{a_k}(t) · H_{k−1}(t) · Π_{b ∉ {a_1..a_k}} F_b(t) dt,
    H_1(t) = S_{a_1}(t),   H_j(t) = ∫_t^1 f_{a_j}(u) H_{j−1}(u) du = P(θ_{a_1} > … > θ_{a_j} > t)

The count of draws above ``t`` is Poisson-binomial over the other items (a recursion over the
items, kept stable by combining the counts of the items before and after a, never dividing
one out). The integrals run over one grid shared by all items: the union of every item's
Beta quantiles at levels from 1e-14 to 1 − 1e-14, each interval holding ``nodes`` Chebyshev
points, integrated by Fejér's first rule and, for ``H_j``, by integrating the interval's
Chebyshev interpolant from each point to the interval's end. Every density varies smoothly
within an interval (its quantiles bound the interval), so the rule converges spectrally;
what lies beyond the extreme quantiles weighs at most ~1e-13.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev

from .._validation import check_positive_int, real_array
from ..propensity.discount import Discount
from .feed_log import FeedLog
from .policies import Exposure
from .policies import _check as _exposure_rows

__all__ = ["ThompsonSamplingRanker"]

# Quantile levels of every item's Beta distribution that bound the integration intervals.
_TAILS = np.array([1e-14, 1e-11, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 0.05])
_LEVELS = np.concatenate([_TAILS, np.linspace(0.1, 0.9, 9), 1.0 - _TAILS[::-1]])
# log F below this is treated as this: the products of distribution functions it enters are
# then below 1e-300, and dividing an item out of a product stays finite.
_LOG_FLOOR = -700.0
# Prefixes, or intervals of the grid, handled at once (bounds memory).
_BLOCK = 64


def _chebyshev_rules(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chebyshev points of the first kind on [-1, 1], Fejér's weights for ∫_{-1}^{1}, and the
    matrix that maps values at the points to ``∫_{x_j}^{1}`` of their interpolant."""
    x = np.cos(np.pi * (np.arange(m) + 0.5) / m)
    to_coefficients = np.linalg.inv(chebyshev.chebvander(x, m - 1))
    antiderivative = np.stack([chebyshev.chebint(np.eye(m)[k]) for k in range(m)], axis=1)
    at_one = chebyshev.chebval(1.0, antiderivative)
    upper = (at_one[None, :] - chebyshev.chebvander(x, m) @ antiderivative) @ to_coefficients
    weights = (at_one - chebyshev.chebval(-1.0, antiderivative)) @ to_coefficients
    return x, weights, upper


class ThompsonSamplingRanker:
    """Bernoulli Thompson sampling: rank items by independent draws ``θ_a ∼ Beta(α_a, β_a)``.

    Parameters
    ----------
    alpha, beta : array_like of float, shape (n_items,)
        Beta parameters of every item (item ``a`` of a feed log is entry ``a``), finite > 0;
        e.g. the Open Bandit Dataset's prior (:func:`recpack_ope.io.load_bts_prior`).
    n_ranks : int
        Items shown per ranking (the ``n_ranks`` largest draws), 1..n_items.
    nodes : int
        Chebyshev points per integration interval, >= 4; the default 16 gives probabilities
        within ~1e-12 of their exact values (see the module docstring).

    Raises
    ------
    ValueError
        For parameters that are not 1-D, of equal length, finite and > 0, or ``n_ranks``
        outside 1..n_items.

    Examples
    --------
    Two items with Beta(2, 1) and Beta(1, 1): ``P(θ_0 > θ_1) = ∫ 2t · t dt = 2/3``.

    >>> policy = ThompsonSamplingRanker([2.0, 1.0], [1.0, 1.0], n_ranks=2)
    >>> policy.rank_marginals().round(10).tolist()
    [[0.6666666667, 0.3333333333], [0.3333333333, 0.6666666667]]
    """

    def __init__(self, alpha, beta, n_ranks: int, *, nodes: int = 16):
        alpha = np.asarray(real_array(alpha, "alpha"), dtype=np.float64)
        beta = np.asarray(real_array(beta, "beta"), dtype=np.float64)
        for name, values in (("alpha", alpha), ("beta", beta)):
            if values.ndim != 1 or values.size == 0:
                raise ValueError(f"{name} must be a non-empty 1-D array, got shape {values.shape}")
            bad = np.flatnonzero(~np.isfinite(values) | ~(values > 0))
            if bad.size:
                raise ValueError(
                    f"{name}[{bad[0]}] is {values[bad[0]]}; Beta parameters are finite and > 0"
                )
        if alpha.shape != beta.shape:
            raise ValueError(
                f"alpha has {alpha.size} items but beta {beta.size}: give one pair per item"
            )
        self.alpha, self.beta = alpha, beta
        self.n_ranks = check_positive_int(n_ranks, "n_ranks")
        if self.n_ranks > alpha.size:
            raise ValueError(f"n_ranks={n_ranks!r} exceeds the {alpha.size} items")
        self.nodes = check_positive_int(nodes, "nodes")
        if self.nodes < 4:
            raise ValueError(f"nodes must be >= 4, got {nodes!r}")
        self._grid = None
        self._marginals = None

    @property
    def n_items(self) -> int:
        """Number of items the policy ranks."""
        return int(self.alpha.size)

    def _prepare(self):
        """The integration grid and every item's density and log distribution on it."""
        # imported on use: start-up time (docs/performance.md)
        from scipy import special, stats

        if self._grid is None:
            x, weights, upper = _chebyshev_rules(self.nodes)
            ends = stats.beta.ppf(_LEVELS[None, :], self.alpha[:, None], self.beta[:, None])
            ends = np.unique(np.concatenate([[0.0, 1.0], ends.ravel()]))
            lo, half = ends[:-1], np.diff(ends) / 2
            half, lo = half[half > 0], lo[half > 0]
            t = lo[:, None] + half[:, None] * (x[None, :] + 1.0)  # (intervals, nodes)
            a, b = self.alpha[:, None, None], self.beta[:, None, None]
            cdf = special.betainc(a, b, t)
            with np.errstate(divide="ignore"):
                log_cdf = np.maximum(np.log(cdf), _LOG_FLOOR)
            self._grid = {
                "weights": half[:, None] * weights[None, :],
                "upper": upper,
                "half": half,
                "density": stats.beta.pdf(t, a, b),
                "cdf": cdf,
                "sf": special.betaincc(a, b, t),
                "log_cdf": log_cdf,
            }
        return self._grid

    def rank_marginals(self) -> np.ndarray:
        """``P(a at rank k)`` of every item and rank, shape (n_items, n_ranks).

        Examples
        --------
        >>> policy = ThompsonSamplingRanker([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], n_ranks=3)
        >>> policy.rank_marginals().round(12).tolist()[0]
        [0.333333333333, 0.333333333333, 0.333333333333]
        """
        if self._marginals is None:
            grid = self._prepare()
            n, k = self.n_items, self.n_ranks
            out = np.zeros((n, k))
            # Blocks of intervals bound the memory of the counts before and after each item.
            for block in range(0, grid["half"].size, _BLOCK):
                part = slice(block, block + _BLOCK)
                cdf, sf = grid["cdf"][:, part], grid["sf"][:, part]
                weighted = grid["weights"][part] * grid["density"][:, part]
                # before[a, j]: P(exactly j of the items before a exceed t), j < n_ranks;
                # after[a, j] the same of the items from a on.
                before = np.zeros((n + 1, k) + sf.shape[1:])
                before[0, 0] = 1.0
                for a in range(n):
                    before[a + 1] = _add_item(before[a], cdf[a], sf[a])
                after = np.zeros_like(before)
                after[n, 0] = 1.0
                for a in range(n - 1, -1, -1):
                    after[a] = _add_item(after[a + 1], cdf[a], sf[a])
                for j in range(k):
                    others = sum(before[:n, i] * after[1:, j - i] for i in range(j + 1))
                    out[:, j] += np.sum(weighted * others, axis=(1, 2))
            self._marginals = np.clip(out, 0.0, 1.0)
        return self._marginals

    def prefix_probabilities(self, prefixes) -> np.ndarray:
        """``P(θ_{a_1} > … > θ_{a_k} > every other θ)``: the probability that the policy shows
        ``a_1, …, a_k`` at ranks 1..k, for rankings of equal length k.

        Parameters
        ----------
        prefixes : array_like of int, shape (n_prefixes, k)
            Distinct items per row, ``1 <= k <= n_ranks``.

        Returns
        -------
        numpy.ndarray, shape (n_prefixes,)

        Examples
        --------
        Three exchangeable items: every ordering has probability 1/6.

        >>> policy = ThompsonSamplingRanker([3.0] * 3, [2.0] * 3, n_ranks=3)
        >>> policy.prefix_probabilities([[0, 1, 2], [2, 0, 1]]).round(12).tolist()
        [0.166666666667, 0.166666666667]
        """
        prefixes = np.asarray(prefixes)
        if (
            prefixes.ndim != 2
            or not np.issubdtype(prefixes.dtype, np.integer)
            or not 1 <= prefixes.shape[1] <= self.n_ranks
        ):
            raise ValueError(
                f"prefixes must be integer rankings of shape (n, k) with 1 <= k <= n_ranks="
                f"{self.n_ranks}, got dtype {prefixes.dtype} and shape {prefixes.shape}"
            )
        if prefixes.size and (prefixes.min() < 0 or prefixes.max() >= self.n_items):
            raise ValueError(f"prefixes hold items outside 0..{self.n_items - 1}")
        ordered = np.sort(prefixes, axis=1)
        if np.any(ordered[:, 1:] == ordered[:, :-1]):
            raise ValueError("prefixes must not repeat an item within a ranking")
        grid = self._prepare()
        density, sf, log_cdf = grid["density"], grid["sf"], grid["log_cdf"]
        log_all = log_cdf.sum(axis=0)
        out = np.empty(prefixes.shape[0])
        for start in range(0, prefixes.shape[0], _BLOCK):
            block = prefixes[start : start + _BLOCK]
            held = sf[block[:, 0]] if block.shape[1] > 1 else 1.0  # H_1
            for j in range(1, block.shape[1] - 1):
                held = self._upper_integral(density[block[:, j]] * held)  # H_{j+1}
            rest = np.exp(log_all[None] - log_cdf[block].sum(axis=1))
            last = density[block[:, -1]]
            out[start : start + _BLOCK] = np.sum(grid["weights"] * last * held * rest, axis=(1, 2))
        return np.clip(out, 0.0, 1.0)

    def _upper_integral(self, values: np.ndarray) -> np.ndarray:
        """``∫_t^1`` of a function given at the grid points, at every grid point (…, intervals,
        nodes): the interval's own part from its Chebyshev interpolant plus the intervals
        above."""
        grid = self._prepare()
        within = grid["half"][:, None] * (values @ grid["upper"].T)
        whole = np.sum(grid["weights"] * values, axis=-1)
        above = np.cumsum(whole[..., ::-1], axis=-1)[..., ::-1] - whole
        return within + above[..., None]

    def position_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k at k)`` of every logged row (the same in every context); 0 at ranks beyond
        ``n_ranks``.

        Raises
        ------
        ValueError
            When the log holds items beyond the policy's ``n_items``.

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog
        >>> log = FeedLog.from_arrays([0, 1], [1, 0], [1, 2], [1, 0])
        >>> policy = ThompsonSamplingRanker([2.0, 1.0], [1.0, 1.0], n_ranks=2)
        >>> policy.position_probabilities(log).round(10).tolist()
        [0.3333333333, 0.3333333333]
        """
        log = self._check(log)
        out = np.zeros(log.n_rows)
        shown = log.rank <= self.n_ranks
        out[shown] = self.rank_marginals()[log.item[shown], log.rank[shown] - 1]
        return out

    def conditional_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k | a_1, …, a_{k−1})`` of every logged row, the session's rows above it being
        the prefix: the ratio of the prefix probabilities down to k and down to k − 1
        (:meth:`prefix_probabilities`); 0 at ranks beyond ``n_ranks``.

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog
        >>> log = FeedLog.from_arrays([0, 0], [0, 1], [1, 2], [1, 0])
        >>> policy = ThompsonSamplingRanker([2.0, 1.0], [1.0, 1.0], n_ranks=2)
        >>> policy.conditional_probabilities(log).round(10).tolist()
        [0.6666666667, 1.0]
        """
        log = self._check(log)
        depth = np.arange(log.n_rows) - log.indptr[log.session] + 1  # rows down to this one
        prefix = np.zeros(log.n_rows)
        for k in np.unique(depth[depth <= self.n_ranks]):
            rows = np.flatnonzero(depth == k)
            items = log.item[rows[:, None] - np.arange(k - 1, -1, -1)[None, :]]
            unique, inverse = np.unique(items, axis=0, return_inverse=True)
            prefix[rows] = self.prefix_probabilities(unique)[inverse.ravel()]
        shorter = np.where(depth > 1, np.roll(prefix, 1), 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(shorter > 0, prefix / shorter, 0.0)
        return np.where(depth <= self.n_ranks, np.clip(ratio, 0.0, 1.0), 0.0)

    def exposure(self, log: FeedLog, discount: Discount, rows=None) -> Exposure:
        """Exposure ``ε(a) = Σ_k P(a at rank k) · δ(k)`` of the logged rows (all, or ``rows``)
        under the position-based model (Jeunen et al., KDD'24, Eq. 8), for
        :func:`~recpack_ope.logged.logged_dcg.logged_dcg`.

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog
        >>> from recpack_ope.propensity.discount import CustomDiscount
        >>> log = FeedLog.from_arrays([0], [1], [1], [1])
        >>> policy = ThompsonSamplingRanker([2.0, 1.0, 1.0], [1.0, 1.0, 1.0], n_ranks=2)
        >>> float(policy.exposure(log, CustomDiscount([1.0, 1.0])).values[0].round(10))
        0.5833333333
        """
        rows = _exposure_rows(self._check(log), discount, rows)
        values = self.rank_marginals() @ discount(np.arange(1, self.n_ranks + 1))
        return Exposure(values[log.item[rows]])

    def _check(self, log) -> FeedLog:
        if not isinstance(log, FeedLog):
            raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
        if log.n_items > self.n_items:
            raise ValueError(
                f"the log has items up to index {log.n_items - 1} but the policy ranks "
                f"{self.n_items} items (alpha and beta need one entry per item)"
            )
        return log


def _add_item(counts: np.ndarray, cdf: np.ndarray, survival: np.ndarray) -> np.ndarray:
    """Counts of draws above t after one more item, below t with probability ``cdf`` and above
    with probability ``survival`` (truncated at the counts kept)."""
    out = counts * cdf
    out[1:] += counts[:-1] * survival
    return out
