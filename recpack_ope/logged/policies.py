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
  per-row standard error otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import (
    check_finite_number,
    check_float_exact,
    check_positive_int,
    check_seed,
    check_sparse,
    real_array,
)
from ..metrics.ranking import ScoreSource
from ..propensity.discount import Discount
from ..reward.validation import predict_rewards
from .feed_log import FeedLog, find_keys
from .plackett_luce import rank_marginals, sample_rankings

__all__ = ["Exposure", "LoggedRanking", "DeterministicRanker", "PlackettLuceRanker", "candidate_sums"]


@dataclass(frozen=True, eq=False)
class Exposure:
    """Per-row exposure of a feed log under one policy.

    Attributes
    ----------
    values : numpy.ndarray
        ``ε`` of every logged row, in [0, 1] (above 1 only where a learnt view curve is).
    standard_error : numpy.ndarray or None
        Monte Carlo standard error of each value; None when the values are exact.

    Raises
    ------
    ValueError
        Unless ``values`` is a 1-D array of finite reals >= 0 and ``standard_error`` is None
        or of the same shape, finite and >= 0.
    """

    values: np.ndarray
    standard_error: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("values", "standard_error"):
            given = getattr(self, name)
            if given is None and name == "standard_error":
                continue
            arr = np.asarray(real_array(given, f"Exposure {name}"), dtype=np.float64)
            if arr.ndim != 1:
                raise ValueError(f"Exposure {name} must be 1-D with one value per logged row, got shape {arr.shape}")
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


def _check(log: FeedLog, discount: Discount, rows) -> np.ndarray:
    """Validated inputs of ``exposure``; returns the log rows asked for (all by default)."""
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    if rows is None:
        return np.arange(log.n_rows)
    rows = np.asarray(rows)
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer) or (
        rows.size and (rows.min() < 0 or rows.max() >= log.n_rows)
    ):
        raise ValueError(f"rows must be 1-D integer indices of the log's {log.n_rows} rows")
    return rows


def _by_context(log: FeedLog, rows: np.ndarray):
    """Distinct contexts of ``rows``; positions ``order[starts[k]:ends[k]]`` of ``rows`` are
    context k's."""
    order = np.argsort(log.context[rows], kind="stable")
    contexts, starts = np.unique(log.context[rows][order], return_index=True)
    return contexts, order, starts, np.append(starts[1:], order.size)


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


class DeterministicRanker:
    """A target policy that ranks each context's candidates by score, best first.

    Parameters
    ----------
    scores : numpy.ndarray, scipy.sparse matrix or TopK
        Contexts × items scores (rows indexed by the log's ``context``, columns by ``item``)
        or precomputed rankings, with the conventions of :mod:`recpack_ope.metrics.ranking`
        (``-inf`` / unstored = not a candidate, ties to the lower item index).
    """

    def __init__(self, scores):
        self.scores = scores

    def ranks(self, log: FeedLog, cutoff: int | None, rows=None) -> np.ndarray:
        """Target rank of the logged rows' items (all rows, or ``rows``) in their contexts; 0
        past ``cutoff`` or when the item is not a candidate."""
        rows = np.arange(log.n_rows) if rows is None else rows
        source = ScoreSource(self.scores, (log.n_contexts, log.n_items))
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
        ``"auto"``: exact for 1-D scores or at most ``max_exact_contexts`` contexts.
    n_samples : int
        Rankings drawn per context by Monte Carlo, >= 2 (for the standard error).
    max_exact_contexts : int
        Contexts up to which ``"auto"`` stays exact.
    seed : int, numpy.random.Generator or None
        Seed of the Monte Carlo draws (an integer >= 0 makes them reproducible).

    Raises
    ------
    ValueError
        For a temperature that is not finite and > 0, an unknown method, ``n_samples < 2``
        or an invalid seed; when ranking, for complex scores, integer scores beyond ±2**53
        (float64 would merge them), or an exact computation too costly (its cost named: give
        the discount a cutoff or use ``"monte_carlo"``).
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
    ):
        self.temperature = check_finite_number(temperature, "temperature", above=0)
        if not isinstance(method, str) or method not in ("auto", "exact", "monte_carlo"):
            raise ValueError(f"method must be 'auto', 'exact' or 'monte_carlo', got {method!r}")
        self.scores = scores
        self.method = method
        self.n_samples = check_positive_int(n_samples, "n_samples")
        if self.n_samples < 2:
            raise ValueError(
                f"n_samples must be >= 2: the Monte Carlo standard error needs two draws, got {n_samples!r}"
            )
        self.max_exact_contexts = check_positive_int(max_exact_contexts, "max_exact_contexts")
        self.seed = check_seed(seed)

    def _candidates(self, log: FeedLog, rows: np.ndarray):
        """Yield (positions in ``rows``, candidate items, PL log-weights), one policy at a time."""
        scores = self.scores
        if not sp.issparse(scores) and np.ndim(scores) == 1:
            s = _real_scores(real_array(scores, "scores"), ("item",))
            if s.size != log.n_items:
                raise ValueError(f"scores has {s.size} items but the log needs {log.n_items}")
            yield np.arange(rows.size), *_weights(np.arange(s.size), s, self.temperature, "every context")
            return
        shape = getattr(scores, "shape", np.shape(scores))
        if shape != (log.n_contexts, log.n_items):
            raise ValueError(
                f"shape mismatch: scores has shape {shape}, the log needs "
                f"({log.n_contexts} contexts, {log.n_items} items)"
            )
        if sp.issparse(scores):
            matrix = sp.csr_matrix(check_sparse(scores, "scores"))
            _real_scores(matrix.data, ("stored entry",))
            matrix = sp.csr_matrix(matrix, dtype=np.float64)
        else:
            matrix = None
            dense = _real_scores(real_array(scores, "scores", axes=("context", "item")), ("context", "item"))
        contexts, order, starts, ends = _by_context(log, rows)
        for c, lo, hi in zip(contexts, starts, ends, strict=True):
            if matrix is not None:
                row = matrix[c]
                row.sum_duplicates()
                items, s = row.indices, row.data
            else:
                s = np.asarray(dense[c], dtype=np.float64)
                items = np.flatnonzero(s > -np.inf)
                s = s[items]
            yield order[lo:hi], *_weights(items, s, self.temperature, f"context {c}")

    def exposure(self, log: FeedLog, discount: Discount, rows=None) -> Exposure:
        """Expected exposure (Eq. 8) of the logged rows (all, or ``rows``), exact or Monte Carlo."""
        rows = _check(log, discount, rows)
        n_contexts = 1 if self._one_policy else np.unique(log.context[rows]).size
        exact, rng = self._exact(n_contexts), np.random.default_rng(self.seed)
        values = np.zeros(rows.size)
        se = None if exact else np.zeros(rows.size)
        for at, items, weights in self._candidates(log, rows):
            eps, err = self._candidate_exposure(weights, discount, exact, rng)
            pos = find_keys(items, log.item[rows[at]])  # candidates are sorted item indices
            found = pos >= 0
            values[at[found]] = eps[pos[found]]
            if err is not None:
                se[at[found]] = err[pos[found]]
        return Exposure(np.clip(values, 0.0, 1.0), se)

    def candidate_exposures(self, log: FeedLog, discount: Discount):
        """Exposure of *every* candidate in the log's contexts, for estimators that sum over
        what the policy could show (the direct method of doubly robust DCG).

        Yields
        ------
        (contexts, items, exposure)
            The contexts (codes of the log) the entry holds for, the candidate items and
            their exposure ``ε(x, a)`` (exact or Monte Carlo, as :meth:`exposure` decides).
            One entry for all contexts when the scores are 1-D.
        """
        _check(log, discount, None)
        contexts = np.unique(log.context)
        exact, rng = self._exact(1 if self._one_policy else contexts.size), np.random.default_rng(self.seed)
        first = _first_rows(log, contexts)
        for at, items, weights in self._candidates(log, first):
            eps, _ = self._candidate_exposure(weights, discount, exact, rng)
            yield (contexts if self._one_policy else log.context[first[at]]), items, np.clip(eps, 0.0, 1.0)

    @property
    def _one_policy(self) -> bool:
        return not sp.issparse(self.scores) and np.ndim(self.scores) == 1

    def _exact(self, n_contexts: int) -> bool:
        return self.method == "exact" or (self.method == "auto" and n_contexts <= self.max_exact_contexts)

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
            drawn = sample_rankings(log_weights, n, min(step, self.n_samples - start), rng, log_weights=True)
            view = np.broadcast_to(delta, drawn.shape).ravel()
            first += np.bincount(drawn.ravel(), weights=view, minlength=size)
            second += np.bincount(drawn.ravel(), weights=view**2, minlength=size)
        eps = first / self.n_samples
        return eps, np.sqrt(np.maximum(second / self.n_samples - eps**2, 0.0) / (self.n_samples - 1))


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
                rho = predict_rewards(reward_model, np.repeat(chunk, items.size), np.tile(items, chunk.size))
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
        values, "scores", lambda k: " ".join(f"{a} {int(i)}" for a, i in zip(axes, np.unravel_index(k, values.shape)))
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
