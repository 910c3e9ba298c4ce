"""The pseudo-inverse (PI) estimator of ranking policies on feed logs.

Swaminathan et al. (NeurIPS 2017, §3, the PI estimator) assume that the expected reward of a
ranking is additive over its (item, rank) pairs, ``E[Σ_k α_k r_k | x, s] = 1_sᵀ φ_x`` with
``1_s`` the indicator of the ranking's ``K · m`` (rank, candidate) pairs. The position-based
click model is additive (``E[r_k] = θ_k ρ(x, a_k)``); the cascade model is not (a click above
ends the session). Per session with context x and logged ranking s::

    V̂ = (1/n) Σ_s (Σ_k α_k r_k) · q_π(x)ᵀ Γ_π0(x)^† 1_s

``Γ_π0(x) = E_{π0}[1_s 1_sᵀ | x]`` holds the logging policy's pairwise marginals
``π0(a at j, b at k | x)`` and ``q_π(x) = E_π[1_s | x]`` the target's position marginals
``π(a at j | x)``. It is unbiased under additivity when the target shows only what the logging
policy can (then ``q_π`` lies in the range of ``Γ_π0``), needs no reward model, and its
session weights ``q_πᵀ Γ^† 1_s`` are linear in the target's marginals rather than products
over ranks: Swaminathan et al. show it needs exponentially less data than standard IPS as K
grows. The weights can be negative: the estimate is not clipped and has no sensitivity
bounds.

``Γ_π0`` comes from a Plackett–Luce logging policy
(:class:`~recpack_ope.logged.policies.PlackettLuceRanker`):

* **uniform** (equal weights over m candidates): the closed form below, from ``Γ``'s
  eigenspaces (the rank-wise and item-wise constant vectors and their complements).
  The familiar uniform form ``m Σ_j π(s_j at j | x) − K + 1`` holds when the slots are
  filled independently (an item may repeat); a ranking shows K distinct items, and then::

      q_πᵀ Γ^† 1_s = 1 + (m − 1) (S − 1)                      K = m
      q_πᵀ Γ^† 1_s = 1 + (m − 1) (S + (T − K) / (m − K))      K < m

  with ``S = Σ_j π(s_j at j | x)`` and ``T = Σ_j Σ_k π(s_j at k | x)`` (how often π shows the
  logged items anywhere in its top K).
* **any other** weights: ``Γ`` by enumerating every ranking of K of the m candidates with
  its probability, for at most :data:`MAX_RANKINGS` rankings, and its pseudo-inverse (SVD,
  ``numpy.linalg.pinv``); contexts that share one policy (one score per item) share it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..inference.diagnostics import ESS_RATIO_THRESHOLD, WeightDiagnostics, check_ess_threshold
from ..inference.result import LoggedEstimate
from ..metrics.ranking import ScoreSource
from ..propensity.discount import Discount
from .feed_log import FeedLog, find_keys
from .plackett_luce import rank_marginals
from .policies import DeterministicRanker, PlackettLuceRanker, _first_rows
from .ranking_ips import check_whole_rankings, position_weights

__all__ = ["pseudo_inverse", "MAX_RANKINGS"]

#: Rankings of K of the logging policy's candidates up to which ``Γ`` is enumerated: the sum
#: costs about K² operations per ranking and the pseudo-inverse ``(K m)³``.
MAX_RANKINGS = 200_000


def pseudo_inverse(
    log: FeedLog,
    target,
    *,
    logging=None,
    discount: Discount | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Pseudo-inverse value of a target ranking policy on a feed log (module docstring).

    Parameters
    ----------
    log : FeedLog
        Sessions that each show whole rankings (ranks 1..K; K may differ between sessions).
    target : DeterministicRanker or PlackettLuceRanker
        The policy to evaluate; its position marginals over every candidate are needed.
    logging : PlackettLuceRanker
        The logging policy; required (``Γ`` needs the probability of every ranking it could
        show, which no column of the log holds).
    discount : Discount, optional
        Position weights ``α_k`` of the value; default 1 at every rank.
    ess_threshold : float
        Share of the rewarded sessions below which the Kish ESS of the absolute session
        weights raises a ReliabilityWarning.

    Returns
    -------
    LoggedEstimate
        Named ``pseudo-inverse…``: per-session values, intervals, paired comparisons and
        diagnostics of the absolute session weights; no sensitivity bounds
        (``weighting=None``: the weights are not inverse propensities and can be negative).

    Raises
    ------
    TypeError
        For a logging policy that is not a PlackettLuceRanker or a target that is neither a
        DeterministicRanker nor a PlackettLuceRanker.
    ValueError
        Without a logging policy, for sessions without whole rankings, a logged item the
        logging policy cannot show, or a non-uniform logging policy whose rankings are too
        many to enumerate (their number named).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker, DeterministicRanker
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 2, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> target = DeterministicRanker(np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]))
    >>> est = pseudo_inverse(log, target, logging=PlackettLuceRanker.uniform(3))
    >>> # m = 3, K = 2: S = 2, T = 2 and S = 0, T = 1 give 1 + 2 (S + (T − 2) / 1)
    >>> est.terms.ravel().tolist()
    [5.0, -1.0]
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if logging is None:
        raise ValueError(
            "pseudo_inverse needs logging=, the logging policy: Γ = E[1_s 1_sᵀ] needs the "
            "probability of every ranking it could show, which the log's columns do not hold"
        )
    if not isinstance(logging, PlackettLuceRanker):
        raise TypeError(
            "pseudo_inverse supports a PlackettLuceRanker logging policy (uniform in closed "
            f"form, any other by enumeration), got {type(logging).__name__}"
        )
    if not isinstance(target, (DeterministicRanker, PlackettLuceRanker)):
        raise TypeError(
            "target must be a DeterministicRanker or PlackettLuceRanker: the pseudo-inverse "
            f"needs its position marginals over every candidate, got {type(target).__name__}"
        )
    ess_threshold = check_ess_threshold(ess_threshold)
    check_whole_rankings(log, "pseudo_inverse")
    value = log.per_session(position_weights(log, discount) * log.reward)
    weight = _session_weights(log, target, logging)
    sessions = np.arange(log.n_sessions)
    rewarded = value > 0
    result = LoggedEstimate(
        name="pseudo-inverse" + ("" if discount is None else discount.label),
        terms=value * weight,
        exponents=(1,),
        user_ids=sessions,
        n_excluded_users=0,
        diagnostics=WeightDiagnostics.from_contributions(
            np.abs(weight[rewarded]),
            np.abs(weight[rewarded]),
            np.abs(weight * value)[rewarded],
            ess_threshold,
            users=sessions[rewarded],
        ),
    )
    result.diagnostics.warn(result.name, clippable=False, unit="sessions")
    return result


def _session_weights(log: FeedLog, target, logging: PlackettLuceRanker) -> np.ndarray:
    """``q_π(x)ᵀ Γ_π0(x)^† 1_s`` of every session (module docstring)."""
    first = log.indptr[:-1]
    lengths = np.diff(log.indptr)
    marginals = _target_marginals(target, log, np.unique(log.context), int(lengths.max()))
    out = np.zeros(log.n_sessions)
    cache: dict = {}
    for at, items, log_weights in logging._candidates(log, first):
        m = items.size
        for k in np.unique(lengths[at]):
            k = int(k)
            sessions = at[lengths[at] == k]
            rows = first[sessions][:, None] + np.arange(k)
            pos = find_keys(items, log.item[rows].ravel()).reshape(rows.shape)
            if (pos < 0).any():
                s, j = np.argwhere(pos < 0)[0]
                raise ValueError(
                    f"session {log.session_label(rows[s, j])!r} shows item {log.item[rows[s, j]]} "
                    "that the logging policy cannot show (not one of its candidates): the log "
                    "was not produced by this logging policy"
                )
            uniform = not log_weights.any()
            if not uniform:
                key = (items.tobytes(), log_weights.tobytes(), k)
                if key not in cache:
                    cache[key] = np.linalg.pinv(_gamma(log_weights, k), hermitian=True)
                inverse = cache[key]
            contexts = log.context[first[sessions]]
            order = np.argsort(contexts, kind="stable")
            starts = np.flatnonzero(np.r_[True, np.diff(contexts[order]) != 0])
            # Contexts that share the target's marginals (one score per item) share q.
            per_target: dict = {}
            for lo, hi in zip(starts, np.append(starts[1:], order.size), strict=True):
                mine = order[lo:hi]
                shared = marginals[contexts[mine[0]]]
                if id(shared) not in per_target:
                    q = _on_candidates(shared, items, k)
                    if uniform:
                        per_target[id(shared)] = (q, q.sum(axis=0))
                    else:
                        per_target[id(shared)] = ((inverse @ q.ravel()).reshape(k, m), None)
                q, shown = per_target[id(shared)]
                p = pos[mine]
                picked = q[np.arange(k), p].sum(axis=1)
                if not uniform:
                    w = picked
                elif k == m:
                    w = 1 + (m - 1) * (picked - 1)
                else:
                    w = 1 + (m - 1) * (picked + (shown[p].sum(axis=1) - k) / (m - k))
                out[sessions[mine]] = w
    return out


def _gamma(log_weights: np.ndarray, k: int) -> np.ndarray:
    """``Γ = E[1_s 1_sᵀ]`` of a Plackett–Luce ranking of k of the candidates, index
    ``j · m + i`` for candidate i at rank j + 1, by enumerating every ranking."""
    m = log_weights.size
    count = math.perm(m, k)
    if count > MAX_RANKINGS:
        raise ValueError(
            f"pseudo_inverse enumerates every ranking of {k} of the logging policy's {m} "
            f"candidates to compute Γ: {count:,} rankings, above the {MAX_RANKINGS:,} it "
            "computes; log with a uniform policy (closed form), fewer candidates or shorter "
            "rankings"
        )
    rankings = np.array(list(itertools.permutations(range(m), k)), dtype=np.int64)
    w = np.exp(log_weights)
    drawn = w[rankings]
    left = w.sum() - np.cumsum(drawn, axis=1) + drawn
    p = np.prod(drawn / left, axis=1)
    cells = rankings + m * np.arange(k)
    gamma = np.zeros((k * m, k * m))
    for a in range(k):
        for b in range(k):
            np.add.at(gamma, (cells[:, a], cells[:, b]), p)
    return gamma


def _target_marginals(target, log: FeedLog, contexts: np.ndarray, depth: int) -> dict:
    """``{context: (items, P)}`` with ``P[i, j] = π(items[i] at rank j + 1 | x)``, j < depth."""
    out = {}
    if isinstance(target, DeterministicRanker):
        source = ScoreSource(target.scores, (log.n_contexts, log.n_items))
        local, items, ranks = source.ranked(contexts, depth)
        bounds = np.searchsorted(local, np.arange(contexts.size + 1))  # local is ascending
        for i, c in enumerate(contexts):
            mine = slice(bounds[i], bounds[i + 1])
            shown = np.zeros((bounds[i + 1] - bounds[i], depth))
            shown[np.arange(shown.shape[0]), ranks[mine] - 1] = 1.0
            out[c] = (items[mine], shown)
        return out
    rows = _first_rows(log, contexts)
    for at, items, log_weights in target._candidates(log, rows):
        n = min(depth, items.size)
        p = np.zeros((items.size, depth))
        p[:, :n] = rank_marginals(log_weights, n, log_weights=True)
        for c in log.context[rows[at]]:
            out[c] = (items, p)
    return out


def _on_candidates(marginals: tuple, items: np.ndarray, k: int) -> np.ndarray:
    """The target's marginals as a (k, m) array over the logging policy's candidates; items
    outside them get no weight (π0 never shows them, so no estimate can see their reward)."""
    target_items, p = marginals
    q = np.zeros((k, items.size))
    pos = find_keys(items, target_items)
    q[:, pos[pos >= 0]] = p[pos >= 0, :k].T
    return q
