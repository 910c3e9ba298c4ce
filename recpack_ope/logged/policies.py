"""Ranking policies and the exposure they give the items of a feed log (Jeunen et al. Eq. 8).

The exposure ``ε(x, a) = E[V | X = x, A = a]`` of item a in context x is the probability that
the policy shows a *and* the user views it: ``Σ_r P(rank_a = r | x) · δ(r)`` under the
position-based model (Asm. 2). Unbiased DCG on logs weights every logged reward by the target
policy's exposure over the logging policy's (Eq. 10). Each policy here returns, for the rows
of a :class:`~recpack_ope.logged.feed_log.FeedLog` (all, or those asked for: estimators only need
the rows with a reward), that exposure:

* :class:`LoggedRanking` – the logging policy was deterministic: ``ε0 = δ(logged rank)``.
* :class:`DeterministicRanker` – a target that ranks each context's candidates by score:
  ``ε = δ(target rank)`` (the simplification after Eq. 10).
* :class:`PlackettLuceRanker` – a stochastic policy drawing a Plackett–Luce ranking over each
  context's candidates with weights ``exp(score / temperature)``: exact rank marginals
  (:func:`recpack_ope.logged.plackett_luce.rank_marginals`) where cheap, Monte Carlo with a
  per-row standard error otherwise (plain, or Rao–Blackwellised: far smaller errors per draw).

The ranking-level estimators (:mod:`.ranking_ips`) need, instead of exposure, the probability
of each logged row's item at its rank (``position_probabilities``, ``π(a_k at k | x)``) and
given the session's items above it (``conditional_probabilities``,
``π(a_k | x, a_1, …, a_{k−1})``, whose products down a session are the prefix and
whole-ranking probabilities); every policy here gives both, exactly. Cascade-DR
(:mod:`.cascade_dr`) also needs the whole next-item distribution after each logged prefix,
``π(· | x, a_1, …, a_{k−1})`` over every item (``conditional_distribution``).
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import (
    check_bool,
    check_finite_number,
    check_float_exact,
    check_positive_int,
    check_seed,
    check_sparse,
    real_array,
)
from ..metrics.ranking import ScoreSource, TopK
from ..propensity.discount import Discount
from ..reward.validation import predict_rewards
from .feed_log import FeedLog, find_keys
from .plackett_luce import (
    _TINY,
    _conditional_exposure,
    _TooCostly,
    rank_marginals,
    sample_rankings,
)

# Draws per context of the sampler that method="auto" falls back to: a few dozen put the
# Rao–Blackwellised error far below a log's sampling error (PlackettLuceRanker's docstring),
# and its memory grows with them (about 0.2 GiB for 64 draws of 1,000 items over 1,000 ranks).
_FALLBACK_DRAWS = 64

__all__ = [
    "Exposure",
    "LoggedRanking",
    "DeterministicRanker",
    "PlackettLuceRanker",
    "candidate_sums",
]


@dataclass(frozen=True, eq=False)
class Exposure:
    """Per-row exposure of a feed log under one policy.

    Attributes
    ----------
    values : numpy.ndarray
        ``ε`` of every logged row, in [0, 1] (above 1 only where a learnt view curve is).
    standard_error : numpy.ndarray or None
        Monte Carlo standard error of each value; None when the values are exact.
    groups : numpy.ndarray of int or None
        Which Monte Carlo draws each value came from: rows with the same code share draws,
        so their errors may be correlated, and different codes are independent. None: the
        rows of one log context share draws (a policy scored per context); a policy with one
        score per item draws once for the whole log (one group).

    Raises
    ------
    ValueError
        Unless ``values`` is a 1-D array of finite reals >= 0, ``standard_error`` is None or
        of the same shape, finite and >= 0, and ``groups`` None or integers >= 0 of that shape.
    """

    values: np.ndarray
    standard_error: np.ndarray | None = None
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("values", "standard_error"):
            given = getattr(self, name)
            if given is None and name == "standard_error":
                continue
            arr = np.asarray(real_array(given, f"Exposure {name}"), dtype=np.float64)
            if arr.ndim != 1:
                raise ValueError(
                    f"Exposure {name} must be 1-D with one value per logged row, got shape "
                    f"{arr.shape}"
                )
            if name == "standard_error" and arr.shape != self.values.shape:
                raise ValueError(
                    f"Exposure standard_error has shape {arr.shape}, values {self.values.shape}: "
                    "give one standard error per value"
                )
            bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
            if bad.size:
                raise ValueError(
                    f"Exposure {name} of row {bad[0]} is {arr[bad[0]]}; exposures and their "
                    "standard errors are finite and >= 0"
                )
            object.__setattr__(self, name, arr)
        if self.groups is not None:
            groups = np.asarray(self.groups)
            if (
                groups.shape != self.values.shape
                or not np.issubdtype(groups.dtype, np.integer)
                or (groups.size and groups.min() < 0)
            ):
                raise ValueError(
                    f"Exposure groups must be integers >= 0, one per value ({self.values.shape}), "
                    f"got dtype {groups.dtype} and shape {groups.shape}"
                )
            object.__setattr__(self, "groups", groups)

    def take(self, rows: np.ndarray) -> Exposure:
        """The exposure of some of the rows, with their standard errors and groups."""
        return Exposure(
            self.values[rows],
            None if self.standard_error is None else self.standard_error[rows],
            None if self.groups is None else self.groups[rows],
        )

    def error_bound(self, weights: np.ndarray, contexts: np.ndarray) -> float:
        """Bound on the Monte Carlo standard deviation of ``Σ_rows weights · values`` (0 for
        exact values): within a group of shared draws (``groups``, else the rows' log
        ``contexts``) the standard deviations add up (the triangle inequality, exact when the
        errors move together); independent groups add in quadrature."""
        if self.standard_error is None:
            return 0.0
        groups = contexts if self.groups is None else self.groups
        per_group = np.bincount(groups, weights=np.abs(weights) * self.standard_error)
        return float(np.sqrt(np.sum(per_group**2)))


def _check(log: FeedLog, discount: Discount, rows) -> np.ndarray:
    """Validated inputs of ``exposure``; returns the log rows asked for (all by default)."""
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    if rows is None:
        return np.arange(log.n_rows)
    rows = np.asarray(rows)
    if (
        rows.ndim != 1
        or not np.issubdtype(rows.dtype, np.integer)
        or (rows.size and (rows.min() < 0 or rows.max() >= log.n_rows))
    ):
        raise ValueError(f"rows must be 1-D integer indices of the log's {log.n_rows} rows")
    return rows


def _log(log) -> FeedLog:
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    return log


def _by_context(log: FeedLog, rows: np.ndarray):
    """Distinct contexts of ``rows``; positions ``order[starts[k]:ends[k]]`` of ``rows`` are
    context k's."""
    order = np.argsort(log.context[rows], kind="stable")
    contexts, starts = np.unique(log.context[rows][order], return_index=True)
    return contexts, order, starts, np.append(starts[1:], order.size)[: starts.size]


def _contexts_in_blocks(log: FeedLog, rows: np.ndarray, width: int):
    """Yield (contexts, positions in ``rows`` of those contexts) in memory-bounded blocks."""
    contexts, order, starts, ends = _by_context(log, rows)
    step = rows_per_chunk(width)
    for lo in range(0, contexts.size, step):
        hi = min(lo + step, contexts.size)
        yield contexts[lo:hi], order[starts[lo] : ends[hi - 1]]


@dataclass(frozen=True)
class LoggedRanking:
    """The deterministic logging policy that produced the log: ``ε0 = δ(logged rank)``."""

    def exposure(self, log: FeedLog, discount: Discount, rows=None) -> Exposure:
        """Exposure of the logged rows (all, or ``rows``): the view probability of the rank."""
        return Exposure(discount(log.rank[_check(log, discount, rows)]))

    def position_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k at k | x) = 1`` for every logged row: the policy showed exactly the log."""
        return np.ones(_log(log).n_rows)

    def conditional_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k | x, a_1, …, a_{k−1}) = 1`` for every logged row."""
        return np.ones(_log(log).n_rows)

    def n_ranked(self, log: FeedLog, depth: int) -> np.ndarray:
        """How many items the policy ranks, up to ``depth``, in each session: its length."""
        return np.minimum(np.diff(_log(log).indptr), depth)

    def conditional_distribution(self, log: FeedLog) -> sp.csr_matrix:
        """``π(a | x, a_1, …, a_{k−1})`` over every item a, for every logged row k: the logged
        item with probability 1.

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog, LoggedRanking
        >>> log = FeedLog.from_arrays([0, 0], [2, 0], [1, 2], [1, 0], n_items=3)
        >>> LoggedRanking().conditional_distribution(log).toarray().tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """
        log = _log(log)
        return sp.csr_matrix(
            (np.ones(log.n_rows), (np.arange(log.n_rows), log.item)),
            shape=(log.n_rows, log.n_items),
        )


class DeterministicRanker:
    """A target policy that ranks each context's candidates by score, best first.

    Parameters
    ----------
    scores : numpy.ndarray, scipy.sparse matrix or TopK
        Contexts × items scores (rows indexed by the log's ``context``, columns by ``item``)
        or precomputed rankings, with the conventions of :mod:`recpack_ope.metrics.ranking`
        (``-inf`` / unstored = not a candidate, ties to the lower item index). Rows and
        columns are the log's context and item codes: ids that are not integers are coded in
        sorted order (``log.context_labels[code]``, ``log.item_labels[code]``).
    """

    def __init__(self, scores):
        self.scores = scores

    def _source(self, log: FeedLog) -> ScoreSource:
        """The validated scores, their shape checked against the log's codes."""
        shape = getattr(self.scores, "shape", None)
        if not isinstance(self.scores, TopK) and shape is not None:
            if tuple(shape) != (log.n_contexts, log.n_items):
                raise ValueError(
                    f"target scores have shape {tuple(shape)}, the log needs ({log.n_contexts} "
                    f"contexts, {log.n_items} items): rows are the log's context codes and "
                    "columns its item codes (ids that are not integers are coded in sorted "
                    "order: log.context_labels, log.item_labels)"
                )
        return ScoreSource(self.scores, (log.n_contexts, log.n_items))

    def n_ranked(self, log: FeedLog, depth: int) -> np.ndarray:
        """How many items the policy ranks, up to ``depth``, in each session's context."""
        source = self._source(_log(log))
        contexts, inverse = np.unique(log.session_context, return_inverse=True)
        counts = np.empty(contexts.size, dtype=np.int64)
        step = rows_per_chunk(depth)
        for start in range(0, contexts.size, step):
            counts[start : start + step] = source.top(contexts[start : start + step], depth)[1]
        return counts[inverse]

    def ranks(self, log: FeedLog, cutoff: int | None, rows=None) -> np.ndarray:
        """Target rank of the logged rows' items (all rows, or ``rows``) in their contexts; 0
        past ``cutoff`` or when the item is not a candidate."""
        rows = np.arange(log.n_rows) if rows is None else rows
        source = self._source(log)
        out = np.zeros(rows.size, dtype=np.int64)
        for contexts, at in _contexts_in_blocks(log, rows, source.width):
            local, items, ranks = source.ranked(contexts, cutoff)
            keys = contexts[local] * np.int64(log.n_items) + items
            order = np.argsort(keys)
            wanted = log.context[rows[at]] * np.int64(log.n_items) + log.item[rows[at]]
            pos = find_keys(keys[order], wanted)
            found = pos >= 0
            out[at[found]] = ranks[order][pos[found]]
        return out

    def exposure(self, log: FeedLog, discount: Discount, rows=None) -> Exposure:
        """``ε = δ(target rank)`` of the logged rows (all, or ``rows``); 0 for items the target
        does not show within the cutoff."""
        rows = _check(log, discount, rows)
        ranks = self.ranks(log, discount.cutoff, rows)
        values = np.zeros(rows.size)
        shown = ranks > 0
        values[shown] = discount(ranks[shown])
        return Exposure(values)

    def position_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k at k | x)``: 1 where the target ranks the row's item at the logged rank."""
        log = _log(log)
        return (self.ranks(log, int(log.rank.max())) == log.rank).astype(np.float64)

    def conditional_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k | x, a_1, …, a_{k−1})``, taken as 1 where the target ranks the row's item at
        the logged rank and 0 elsewhere: the products down a session are then 1 exactly for
        the prefixes the target shows (the conditional after a prefix it never shows does
        not matter, its weight being 0)."""
        return self.position_probabilities(log)

    def conditional_distribution(self, log: FeedLog) -> sp.csr_matrix:
        """``π(a | x, a_1, …, a_{k−1})`` over every item a, for every logged row k: 1 at the
        item the target ranks k-th in the row's context.

        This is the target's next-item distribution exactly where the logged prefix above
        row k is the target's own top k − 1; after any other prefix the target never reaches
        row k (its prefix probability is 0), so what the row holds does not matter. It agrees
        with :meth:`conditional_probabilities` at the logged items. A row is all zero where
        the target ranks fewer than k candidates.

        Returns
        -------
        scipy.sparse.csr_matrix, shape (n_rows, n_items)

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.logged import FeedLog, DeterministicRanker
        >>> log = FeedLog.from_arrays([0, 0], [2, 0], [1, 2], [1, 0], n_items=3)
        >>> target = DeterministicRanker(np.array([[1.0, 3.0, 2.0]]))
        >>> target.conditional_distribution(log).toarray().tolist()
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        """
        log = _log(log)
        source = ScoreSource(self.scores, (log.n_contexts, log.n_items))
        depth = np.int64(log.rank.max()) + 1
        found_rows, found_items = [], []
        for contexts, at in _contexts_in_blocks(log, np.arange(log.n_rows), source.width):
            local, items, ranks = source.ranked(contexts, int(depth - 1))
            # (context, rank) keys of the target's rankings, ascending as ranked() gives them.
            pos = find_keys(
                local * depth + ranks,
                np.searchsorted(contexts, log.context[at]) * depth + log.rank[at],
            )
            found_rows.append(at[pos >= 0])
            found_items.append(items[pos[pos >= 0]])
        rows = np.concatenate(found_rows)
        return sp.csr_matrix(
            (np.ones(rows.size), (rows, np.concatenate(found_items))),
            shape=(log.n_rows, log.n_items),
        )


class PlackettLuceRanker:
    """A stochastic policy: a Plackett–Luce ranking of each context's candidates.

    Rank r is filled by drawing, without replacement, candidate i with probability
    proportional to ``exp(score_i / temperature)`` (Gilotte App. A.2, Eq. 1).

    Parameters
    ----------
    scores : array_like or scipy.sparse matrix
        Either one score per item (1-D: the same policy in every context, e.g. popularity)
        or contexts × items (dense: ``-inf`` = not a candidate; sparse: stored entries are
        the candidates).
    temperature : float
        τ > 0; small τ approaches the deterministic ranking by score.
    method : {"auto", "exact", "monte_carlo"}
        ``"exact"`` computes rank marginals to ~1e-12 (cost ~0.05 s for 100 candidates and
        10 ranks, ~0.5 s for 1,000 and 50, per distinct context); ``"monte_carlo"`` draws
        ``n_samples`` rankings per context and reports each value's standard error.
        ``"auto"``: exact for 1-D scores or at most ``max_exact_contexts`` contexts, unless
        that is too costly (Warns).
    n_samples : int
        Rankings drawn per context by Monte Carlo, >= 2 (for the standard error). The
        standard error is estimated from the draws: a variation that none of them shows (a
        near-deterministic policy, with a very low temperature, reordering its top items
        once in thousands of draws) is not in it.
    rao_blackwell : bool
        Where exposures are sampled, let each drawn ranking contribute every item's exact
        expected exposure given the order of the *other* items (deleting an item from a PL
        ranking leaves a PL ranking of the others), instead of the view probability of the
        rank it drew. Unbiased, with standard errors several (a handful of candidates) to
        hundreds (a thousand) of times smaller for as many draws, so a few dozen draws
        (``n_samples=16`` to ``64``) usually put the Monte Carlo error far below the sampling
        error of a log; the result reports it (``approximation_error``). The squared
        standard error estimates the variance without bias, reliable summed over many rows;
        a single row's, from few draws, can understate its error. Contexts are processed in
        vectorised blocks, under 0.1 ms per context of 1,000 candidates and 10 ranks at 16
        draws; those whose weights span beyond float range (ratios below 1e-290) are computed
        exactly. False (default): the plain Monte Carlo above.
    max_exact_contexts : int
        Contexts up to which ``"auto"`` stays exact.
    seed : int, numpy.random.Generator or None
        Seed of the Monte Carlo draws (an integer >= 0 makes them reproducible).

    Raises
    ------
    ValueError
        For a temperature that is not finite and > 0, an unknown method, ``n_samples < 2``
        or an invalid seed; when ranking, for complex scores, integer scores beyond ±2**53
        (float64 would merge them), or, with ``method="exact"``, an exact computation too
        costly (its cost named: give the discount a cutoff or use ``"monte_carlo"``).

    Warns
    -----
    UserWarning
        When ``method="auto"`` meets an exact computation too costly and samples instead (the
        Rao–Blackwellised Monte Carlo, at most 64 draws per context): the warning names the
        cost and the draws, and the estimators report the sampling error.
    """

    def __init__(
        self,
        scores,
        *,
        temperature: float = 1.0,
        method: str = "auto",
        n_samples: int = 2000,
        max_exact_contexts: int = 100,
        seed: int = 0,
        rao_blackwell: bool = False,
    ):
        self.temperature = check_finite_number(temperature, "temperature", above=0)
        if not isinstance(method, str) or method not in ("auto", "exact", "monte_carlo"):
            raise ValueError(f"method must be 'auto', 'exact' or 'monte_carlo', got {method!r}")
        self.scores = scores
        self.method = method
        self.n_samples = check_positive_int(n_samples, "n_samples")
        if self.n_samples < 2:
            raise ValueError(
                "n_samples must be >= 2: the Monte Carlo standard error needs two draws, got "
                f"{n_samples!r}"
            )
        self.max_exact_contexts = check_positive_int(max_exact_contexts, "max_exact_contexts")
        self.seed = check_seed(seed)
        self.rao_blackwell = check_bool(rao_blackwell, "rao_blackwell")

    def _scores(self, log: FeedLog):
        """The validated scores: 1-D float array, float64 CSR matrix or dense array."""
        scores = self.scores
        if self._one_policy:
            s = _real_scores(real_array(scores, "scores"), ("item",))
            if s.size != log.n_items:
                raise ValueError(f"scores has {s.size} items but the log needs {log.n_items}")
            return s
        shape = getattr(scores, "shape", np.shape(scores))
        if shape != (log.n_contexts, log.n_items):
            raise ValueError(
                f"shape mismatch: scores has shape {shape}, the log needs "
                f"({log.n_contexts} contexts, {log.n_items} items)"
            )
        if sp.issparse(scores):
            matrix = sp.csr_matrix(check_sparse(scores, "scores"))
            _real_scores(matrix.data, ("stored entry",))
            return sp.csr_matrix(matrix, dtype=np.float64)
        return _real_scores(
            real_array(scores, "scores", axes=("context", "item")), ("context", "item")
        )

    def _candidates(self, log: FeedLog, rows: np.ndarray):
        """Yield (positions in ``rows``, candidate items, PL log-weights), one policy at a time."""
        scores = self._scores(log)
        if self._one_policy:
            yield (
                np.arange(rows.size),
                *_weights(np.arange(scores.size), scores, self.temperature, "every context"),
            )
            return
        contexts, order, starts, ends = _by_context(log, rows)
        for c, lo, hi in zip(contexts, starts, ends, strict=True):
            if sp.issparse(scores):
                row = scores[c]
                row.sum_duplicates()
                items, s = row.indices, row.data
            else:
                s = np.asarray(scores[c], dtype=np.float64)
                items = np.flatnonzero(~(s == -np.inf))  # NaN too, for _weights to refuse
                s = s[items]
            yield order[lo:hi], *_weights(items, s, self.temperature, f"context {c}")

    def _weight_blocks(self, log: FeedLog, contexts: np.ndarray, per_row: int):
        """Yield (contexts, items, log-weights, candidates, lowest log-weight) for blocks of
        ``contexts`` of about ``CHUNK_ELEMENTS / per_row`` rows: log-weights ``-inf`` where
        column j is not a candidate, ``items[b, j]`` the item of column j (-1: none; None:
        column j is item j), per row its number of candidates and their lowest log-weight.
        Contexts None: the one policy of 1-D scores. Same checks and messages as
        :meth:`_candidates`, which meets the contexts one at a time."""
        scores = self._scores(log)
        if self._one_policy:
            items, weights = _weights(
                np.arange(scores.size), scores, self.temperature, "every context"
            )
            row = np.full((1, scores.size), -np.inf)
            row[0, items] = weights
            yield None, None, row, np.array([items.size]), np.array([weights.min()])
            return
        step = rows_per_chunk(per_row if sp.issparse(scores) else max(per_row, log.n_items))
        for lo in range(0, contexts.size, step):
            chunk = contexts[lo : lo + step]
            if sp.issparse(scores):
                block = scores[chunk]
                block.sum_duplicates()
                lengths = np.diff(block.indptr)
                row = np.repeat(np.arange(chunk.size), lengths)
                col = np.arange(block.indices.size) - np.repeat(block.indptr[:-1], lengths)
                items = np.full((chunk.size, max(1, int(lengths.max(initial=0)))), -1)
                items[row, col] = block.indices
                s = np.full(items.shape, -np.inf)
                s[row, col] = block.data
            else:
                items, s = None, np.asarray(scores[chunk], dtype=np.float64)
            # Non-candidates are -inf, so the row maximum is the top candidate's (NaN if any
            # score is NaN, -inf without candidates, +inf with one) and they stay -inf below;
            # the lowest log-weight is that of the least candidate (-inf where it overflows).
            top, least = s.max(axis=1), s.min(axis=1)
            sizes = np.full(chunk.size, s.shape[1])
            some = np.flatnonzero(least == -np.inf)  # rows with non-candidates
            candidate = s[some] > -np.inf
            sizes[some] = np.count_nonzero(candidate, axis=1)
            least[some] = np.where(candidate, s[some], np.inf).min(axis=1)
            with np.errstate(invalid="ignore", over="ignore"):
                lowest = (least - top) / self.temperature
            bad = ~np.isfinite(top) | ~np.isfinite(lowest)
            if bad.any():  # the first such context raises, as one context at a time would
                k = int(np.flatnonzero(bad)[0])
                given = (s[k] > -np.inf) | np.isnan(s[k])
                _weights(
                    np.flatnonzero(given) if items is None else items[k][given],
                    s[k][given],
                    self.temperature,
                    f"context {chunk[k]}",
                )
            weights = np.subtract(s, top[:, None], out=s)  # s is this block's own copy
            if self.temperature != 1.0:
                weights /= self.temperature
            yield chunk, items, weights, sizes, lowest

    def exposure(self, log: FeedLog, discount: Discount, rows=None) -> Exposure:
        """Expected exposure (Eq. 8) of the logged rows (all, or ``rows``), exact or Monte Carlo.

        With ``method="auto"``, exact marginals too costly to compute (a discount without
        cutoff over a large catalogue: the cost is named) fall back to the Rao–Blackwellised
        Monte Carlo with at most 64 draws per context, with a warning; its standard errors
        travel with the exposure, and estimators report them (``approximation_error``).
        """
        rows = _check(log, discount, rows)
        n_contexts = 1 if self._one_policy else np.unique(log.context[rows]).size
        if self.rao_blackwell and not self._exact(n_contexts):
            return self._rao_blackwell_exposure(log, discount, rows)
        exact = self._exact(n_contexts)
        if exact and self.method == "auto":
            try:
                return self._exposure(log, discount, rows, exact)
            except _TooCostly as refusal:
                return self._fallback(refusal)._rao_blackwell_exposure(log, discount, rows)
        return self._exposure(log, discount, rows, exact)

    def _fallback(self, refusal: _TooCostly) -> PlackettLuceRanker:
        """The Rao–Blackwellised sampler that ``method="auto"`` uses where exact marginals
        were refused (at most :data:`_FALLBACK_DRAWS` draws per context), after a warning
        saying why and how large it is."""
        sampler = copy.copy(self)
        sampler.n_samples = min(self.n_samples, _FALLBACK_DRAWS)
        warnings.warn(
            f"PlackettLuceRanker(method='auto'): {refusal.cost}, so the exposures are sampled "
            f"instead, by the Rao–Blackwellised Monte Carlo with {sampler.n_samples} rankings "
            f"per context (seed {self.seed!r}): unbiased, its error is reported "
            "(approximation_error); give the discount a cutoff for exact values, or pass "
            "method='monte_carlo', rao_blackwell=True to choose the sampling and its n_samples",
            UserWarning,
            stacklevel=3,
        )
        return sampler

    def _rao_blackwell_exposure(self, log: FeedLog, discount: Discount, rows: np.ndarray):
        """Rao–Blackwellised exposure of ``rows`` with its standard errors."""
        # Each distinct (context, item) once; one context for 1-D scores.
        contexts = np.zeros(rows.size, dtype=np.int64) if self._one_policy else log.context[rows]
        keys, inverse = np.unique(
            contexts * np.int64(log.n_items) + log.item[rows], return_inverse=True
        )
        contexts, items = keys // log.n_items, keys % log.n_items
        blocks = self._weight_blocks(log, np.unique(contexts), self._per_row(discount, log))
        values, se = self._conditional(
            log, discount, contexts, items, blocks, np.random.default_rng(self.seed)
        )
        return Exposure(
            np.clip(values, 0.0, 1.0)[inverse.ravel()], se[inverse.ravel()], self._groups(rows)
        )

    def _exposure(self, log: FeedLog, discount: Discount, rows: np.ndarray, exact: bool):
        """Exposure of ``rows`` from each context's candidates: exact, or plain Monte Carlo."""
        rng = np.random.default_rng(self.seed)
        values = np.zeros(rows.size)
        se = None if exact else np.zeros(rows.size)
        for at, items, weights in self._candidates(log, rows):
            eps, err = self._candidate_exposure(weights, discount, exact, rng)
            pos = find_keys(items, log.item[rows[at]])  # candidates are sorted item indices
            found = pos >= 0
            values[at[found]] = eps[pos[found]]
            if err is not None:
                se[at[found]] = err[pos[found]]
        return Exposure(np.clip(values, 0.0, 1.0), se, None if exact else self._groups(rows))

    def candidate_exposures(self, log: FeedLog, discount: Discount):
        """Exposure of *every* candidate in the log's contexts, for estimators that sum over
        what the policy could show (the direct method of doubly robust DCG).

        Yields
        ------
        (contexts, items, exposure)
            The contexts (codes of the log) the entry holds for, the candidate items and
            their exposure ``ε(x, a)`` (exact or Monte Carlo, as :meth:`exposure` decides,
            falling back to the Rao–Blackwellised Monte Carlo as it does).
            One entry for all contexts when the scores are 1-D.
        """
        _check(log, discount, None)
        contexts = np.unique(log.context)
        exact = self._exact(1 if self._one_policy else contexts.size)
        if self.rao_blackwell and not exact:
            yield from self._rao_blackwell_candidates(log, discount, contexts)
            return
        if exact and self.method == "auto":
            # At most max_exact_contexts entries: computed before any is yielded, so that a
            # refusal of one can still switch all of them to sampling.
            try:
                entries = list(self._candidate_entries(log, discount, contexts, exact))
            except _TooCostly as refusal:
                yield from self._fallback(refusal)._rao_blackwell_candidates(
                    log, discount, contexts
                )
                return
            yield from entries
            return
        yield from self._candidate_entries(log, discount, contexts, exact)

    def _rao_blackwell_candidates(self, log: FeedLog, discount: Discount, contexts: np.ndarray):
        """:meth:`candidate_exposures` by the Rao–Blackwellised Monte Carlo."""
        rng = np.random.default_rng(self.seed)
        for block in self._weight_blocks(log, contexts, self._per_row(discount, log)):
            chunk, cols, weights = block[:3]
            b, j = np.nonzero(weights > -np.inf)
            items = j if cols is None else cols[b, j]
            which = np.zeros(b.size, dtype=np.int64) if chunk is None else chunk[b]
            eps, _ = self._conditional(log, discount, which, items, [block], rng)
            eps = np.clip(eps, 0.0, 1.0)
            if chunk is None:
                yield contexts, items, eps
                continue
            bounds = np.searchsorted(b, np.arange(chunk.size + 1))
            for k, c in enumerate(chunk):
                yield (
                    np.array([c]),
                    items[bounds[k] : bounds[k + 1]],
                    eps[bounds[k] : bounds[k + 1]],
                )

    def _candidate_entries(
        self, log: FeedLog, discount: Discount, contexts: np.ndarray, exact: bool
    ):
        """:meth:`candidate_exposures` from each context's candidates: exact, or plain Monte
        Carlo."""
        first = _first_rows(log, contexts)
        rng = np.random.default_rng(self.seed)
        for at, items, weights in self._candidates(log, first):
            eps, _ = self._candidate_exposure(weights, discount, exact, rng)
            yield (
                (contexts if self._one_policy else log.context[first[at]]),
                items,
                np.clip(eps, 0.0, 1.0),
            )

    @classmethod
    def uniform(cls, n_items: int) -> PlackettLuceRanker:
        """The uniformly random ranking of ``n_items`` items: every ordering of every prefix
        equally likely, ``π(a_k | x, a_1, …, a_{k−1}) = 1 / (n_items − k + 1)``.

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
        >>> log = FeedLog.from_arrays([0, 0], [3, 1], [1, 2], [1, 0])
        >>> PlackettLuceRanker.uniform(4).conditional_probabilities(log).round(4).tolist()
        [0.25, 0.3333]
        """
        return cls(np.zeros(check_positive_int(n_items, "n_items")), method="exact")

    def n_ranked(self, log: FeedLog, depth: int) -> np.ndarray:
        """How many items the policy ranks, up to ``depth``, in each session's context: its
        candidates."""
        log = _log(log)
        out = np.zeros(log.n_sessions, dtype=np.int64)
        for at, items, _ in self._candidates(log, log.indptr[:-1]):
            out[at] = min(items.size, depth)
        return out

    def position_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k at k | x)`` of every logged row, from the exact rank marginals of each
        context's Plackett–Luce ranking (:func:`~recpack_ope.logged.plackett_luce.rank_marginals`);
        0 for items that are not candidates or ranks beyond the candidates."""
        log = _log(log)
        out = np.zeros(log.n_rows)
        rows = np.arange(log.n_rows)
        for at, items, log_weights in self._candidates(log, rows):
            pos = find_keys(items, log.item[at])
            ranks = log.rank[at]
            found = (pos >= 0) & (ranks <= items.size)
            if not found.any():
                continue
            marginals = rank_marginals(log_weights, int(ranks[found].max()), log_weights=True)
            out[at[found]] = marginals[pos[found], ranks[found] - 1]
        return np.clip(out, 0.0, 1.0)

    def conditional_probabilities(self, log: FeedLog) -> np.ndarray:
        """``π(a_k | x, a_1, …, a_{k−1}) = w_{a_k} / Σ_{a ∉ {a_1, …, a_{k−1}}} w_a`` of every
        logged row, the session's rows above it being the prefix (Gilotte App. A.2, Eq. 1);
        0 for items that are not candidates."""
        log = _log(log)
        weight, total = np.zeros(log.n_rows), np.zeros(log.n_rows)
        block = np.zeros(log.n_rows, dtype=np.int64)
        blocks = []
        for at, items, log_weights in self._candidates(log, np.arange(log.n_rows)):
            pos = find_keys(items, log.item[at])
            found = pos >= 0
            w = np.exp(log_weights)  # the largest is 1: no overflow
            weight[at[found]] = w[pos[found]]
            total[at] = w.sum()
            block[at] = len(blocks)
            blocks.append((items, log_weights))
        remaining = total - log.above(weight)
        # A heavy item drawn above leaves a mass that the difference of sums loses: take it
        # as the sum of the weights still to draw, in log space.
        for k in np.flatnonzero((weight > 0) & (remaining <= 1e-9 * total)):
            items, log_weights = blocks[block[k]]
            left = ~np.isin(items, log.item[log.indptr[log.session[k]] : k])
            remaining[k] = np.exp(np.logaddexp.reduce(log_weights[left]))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(weight > 0, np.minimum(weight / remaining, 1.0), 0.0)

    def conditional_distribution(self, log: FeedLog) -> sp.csr_matrix:
        """``π(a | x, a_1, …, a_{k−1}) = w_a / Σ_{b ∉ {a_1, …, a_{k−1}}} w_b`` over every
        candidate a not in the prefix, for every logged row k, the session's rows above it
        being the prefix (Gilotte App. A.2, Eq. 1). Rows sum to 1, or hold nothing where the
        prefix has used up the candidates; at the logged items they are
        :meth:`conditional_probabilities`.

        Returns
        -------
        scipy.sparse.csr_matrix, shape (n_rows, n_items)

        Examples
        --------
        >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
        >>> log = FeedLog.from_arrays([0, 0], [2, 0], [1, 2], [1, 0], n_items=3)
        >>> PlackettLuceRanker.uniform(3).conditional_distribution(log).toarray().tolist()
        [[0.3333333333333333, 0.3333333333333333, 0.3333333333333333], [0.5, 0.5, 0.0]]
        """
        log = _log(log)
        first = log.indptr[log.session]
        parts = []
        for at, items, log_weights in self._candidates(log, np.arange(log.n_rows)):
            # ``at`` lists a context's rows in log order, so a session's rows are adjacent
            # and the prefix of the row at position i sits at positions i − 1, i − 2, ….
            depth = at - first[at]
            pos = find_keys(items, log.item[at])
            step = rows_per_chunk(items.size)
            for lo in range(0, at.size, step):
                i = np.arange(lo, min(lo + step, at.size))
                w = np.tile(log_weights, (i.size, 1))
                for d in range(1, int(depth[i].max()) + 1):
                    above = np.flatnonzero(depth[i] >= d)
                    drawn = pos[i[above] - d]
                    w[above[drawn >= 0], drawn[drawn >= 0]] = -np.inf
                top = w.max(axis=1, keepdims=True)
                # The largest remaining weight is 1 after the shift: no overflow, and a row
                # whose candidates are used up (top = -inf) stays empty.
                with np.errstate(invalid="ignore"):
                    p = np.nan_to_num(np.exp(w - top), nan=0.0)
                totals = p.sum(axis=1, keepdims=True)
                p = np.divide(p, totals, out=np.zeros_like(p), where=totals > 0)
                r, c = np.nonzero(p)
                parts.append((at[i[r]], items[c], p[r, c]))
        rows, cols, values = (np.concatenate(a) for a in zip(*parts, strict=True))
        return sp.csr_matrix((values, (rows, cols)), shape=(log.n_rows, log.n_items))

    def _groups(self, rows: np.ndarray) -> np.ndarray | None:
        """:attr:`Exposure.groups` of sampled exposures: one score per item is one policy,
        drawn once for every context; otherwise each context draws its own (None)."""
        return np.zeros(rows.size, dtype=np.int64) if self._one_policy else None

    @property
    def _one_policy(self) -> bool:
        return not sp.issparse(self.scores) and np.ndim(self.scores) == 1

    def _exact(self, n_contexts: int) -> bool:
        return self.method == "exact" or (
            self.method == "auto" and n_contexts <= self.max_exact_contexts
        )

    def _per_row(self, discount: Discount, log: FeedLog) -> int:
        """Elements per context of the Rao–Blackwellised draws, for the size of blocks."""
        return 4 * self.n_samples * min(discount.cutoff or log.n_items, log.n_items)

    def _conditional(
        self, log: FeedLog, discount: Discount, contexts: np.ndarray, items: np.ndarray, blocks, rng
    ):
        """Rao–Blackwellised (ε, standard error) of distinct (context, item) pairs, sorted by
        context (0 for items that are not candidates), over ``blocks`` of
        :meth:`_weight_blocks` that cover the contexts."""
        eps, se = np.zeros(items.size), np.zeros(items.size)
        for chunk, cols, weights, sizes, lowest in blocks:
            if chunk is None:
                where, pair_row = np.arange(items.size), np.zeros(items.size, dtype=np.int64)
            else:
                where = np.arange(
                    np.searchsorted(contexts, chunk[0]),
                    np.searchsorted(contexts, chunk[-1], side="right"),
                )
                pair_row = np.searchsorted(chunk, contexts[where])
            if cols is None:
                pair_col = items[where]
            else:  # find the column of each item among its context's candidates
                keys = np.where(
                    cols >= 0, np.arange(chunk.size)[:, None] * np.int64(log.n_items) + cols, -1
                ).ravel()
                order = np.argsort(keys)
                pos = find_keys(keys[order], pair_row * np.int64(log.n_items) + items[where])
                where, pair_row, pair_col = (
                    where[pos >= 0],
                    pair_row[pos >= 0],
                    order[pos[pos >= 0]] % cols.shape[1],
                )
            shown = weights[pair_row, pair_col] > -np.inf
            where, pair_row, pair_col = where[shown], pair_row[shown], pair_col[shown]
            n_row = sizes if discount.cutoff is None else np.minimum(discount.cutoff, sizes)
            # Weights beyond float range (the draws and sums need them as floats): exact.
            wide = lowest < math.log(_TINY)
            for n in np.unique(n_row):
                delta = discount.weights(int(n))
                for r in np.flatnonzero(wide & (n_row == n)):
                    at = pair_row == r
                    candidates = np.flatnonzero(weights[r] > -np.inf)
                    exact = rank_marginals(weights[r, candidates], int(n), log_weights=True) @ delta
                    eps[where[at]] = exact[np.searchsorted(candidates, pair_col[at])]
                group = np.flatnonzero(~wide & (n_row == n))
                local = np.full(weights.shape[0], -1)
                local[group] = np.arange(group.size)
                at = np.flatnonzero(local[pair_row] >= 0)
                if at.size:
                    eps[where[at]], se[where[at]] = _conditional_exposure(
                        weights if group.size == weights.shape[0] else weights[group],
                        delta,
                        self.n_samples,
                        rng,
                        local[pair_row[at]],
                        pair_col[at],
                    )
        return eps, se

    def _candidate_exposure(self, log_weights: np.ndarray, discount: Discount, exact: bool, rng):
        """(ε of every candidate, its Monte Carlo standard error or None) for one candidate set."""
        size = log_weights.size
        n = size if discount.cutoff is None else min(discount.cutoff, size)
        delta = discount.weights(n)
        if exact:
            return rank_marginals(log_weights, n, log_weights=True) @ delta, None
        # Draw in blocks so that memory stays bounded for long rankings of large catalogues.
        first, second = np.zeros(size), np.zeros(size)
        step = rows_per_chunk(n)
        for start in range(0, self.n_samples, step):
            drawn = sample_rankings(
                log_weights, n, min(step, self.n_samples - start), rng, log_weights=True
            )
            view = np.broadcast_to(delta, drawn.shape).ravel()
            first += np.bincount(drawn.ravel(), weights=view, minlength=size)
            second += np.bincount(drawn.ravel(), weights=view**2, minlength=size)
        eps = first / self.n_samples
        return eps, np.sqrt(
            np.maximum(second / self.n_samples - eps**2, 0.0) / (self.n_samples - 1)
        )


def candidate_sums(
    target, log: FeedLog, discount: Discount, reward_model=None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per context of the log: the target's total exposure ``Σ_a ε(x, a)`` and, with a reward
    model, its expected reward ``Σ_a ε(x, a) ρ̂(x, a)`` over every candidate it can show.

    Parameters
    ----------
    target : DeterministicRanker or PlackettLuceRanker
        The policy; its exposure of the logged rows alone cannot give these sums.
    log : FeedLog
        Whose contexts are summed over.
    discount : Discount
        The target's view model with its cutoff.
    reward_model : object with ``predict(contexts, items)``, optional
        ``ρ̂(x, a)`` in [0, 1].

    Returns
    -------
    (total, direct) : numpy.ndarray, shape (n_contexts,)
        Zero for contexts absent from the log; ``direct`` is None without a reward model.
    """
    total = np.zeros(log.n_contexts)
    direct = None if reward_model is None else np.zeros(log.n_contexts)
    contexts = np.unique(log.context)
    if isinstance(target, DeterministicRanker):
        source = ScoreSource(target.scores, (log.n_contexts, log.n_items))
        step = rows_per_chunk(max(source.width, 1))
        for lo in range(0, contexts.size, step):
            chunk = contexts[lo : lo + step]
            local, items, ranks = source.ranked(chunk, discount.cutoff)
            eps = discount(ranks)
            total[chunk] = np.bincount(local, weights=eps, minlength=chunk.size)
            if direct is not None:
                rho = predict_rewards(reward_model, chunk[local], items)
                direct[chunk] = np.bincount(local, weights=eps * rho, minlength=chunk.size)
    elif isinstance(target, PlackettLuceRanker):
        for which, items, eps in target.candidate_exposures(log, discount):
            total[which] = eps.sum()
            if direct is None:
                continue
            step = rows_per_chunk(items.size)
            for lo in range(0, which.size, step):
                chunk = which[lo : lo + step]
                rho = predict_rewards(
                    reward_model, np.repeat(chunk, items.size), np.tile(items, chunk.size)
                )
                direct[chunk] = rho.reshape(chunk.size, items.size) @ eps
    else:
        raise TypeError(
            "sums over every item the target can show need the policy itself: target must be "
            f"a DeterministicRanker or PlackettLuceRanker, got {type(target).__name__}"
        )
    return total, direct


def _first_rows(log: FeedLog, contexts: np.ndarray) -> np.ndarray:
    """One log row of each of ``contexts`` (the first in log order)."""
    order = np.argsort(log.context, kind="stable")
    return order[np.searchsorted(log.context[order], contexts)]


def _real_scores(values: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
    """Real scores that float64 holds exactly (integers beyond ±2**53 would merge)."""
    check_float_exact(
        values,
        "scores",
        lambda k: " ".join(
            f"{a} {int(i)}" for a, i in zip(axes, np.unravel_index(k, values.shape), strict=True)
        ),
    )
    return values


def _weights(items: np.ndarray, scores: np.ndarray, temperature: float, where: str):
    """Candidates with finite scores and their PL log-weights, the largest 0."""
    if np.isnan(scores).any():
        raise ValueError(f"Plackett–Luce scores are NaN in {where}")
    keep = scores > -np.inf
    items, scores = items[keep], scores[keep]
    if items.size == 0:
        raise ValueError(f"{where} has no candidate with a finite score")
    if np.isinf(scores).any():
        raise ValueError(f"Plackett–Luce scores must be finite or -inf; {where} has +inf")
    with np.errstate(over="ignore"):
        log_weights = (scores - scores.max()) / temperature
        if not np.isfinite(log_weights).all():
            raise ValueError(
                f"scores / temperature overflows in {where}: scores spanning {np.ptp(scores):.3g} "
                f"need a temperature above {temperature!r}"
            )
    return items, log_weights
