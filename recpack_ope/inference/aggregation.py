"""Aggregating per-user orders of M systems into one system ordering.

Each user (request) orders the systems by a per-user score (a metric value, or the system's
RPP win rate against the others); these functions combine the M-system orders of all users,
as Diaz & Ferraro (SIGIR'22 §5.4) do with RPP:

* :func:`borda` — Borda count: a system earns one point per system it beats in a user's
  order and half a point per tie; systems are ordered by mean points.
* :func:`mc4` — Dwork et al.'s (WWW'01) MC4 Markov chain: from system i, pick j uniformly
  among the M systems and move to j if a majority of users order j above i (users who tie
  them abstain), otherwise stay. Systems are ordered by the chain's stationary distribution.
  The chain is damped, ``P' = (1 − α)P + α/M``, so the distribution is unique; for any
  ``α ∈ (0, 1)`` a Condorcet winner (a system that beats every other by majority) keeps the
  largest stationary mass and is ranked first.

The reference implementation (github.com/diazf/pref_eval, ``aggregation/rank_aggregation.py``)
runs 10 undamped power iterations from an unnormalised start and breaks ties in a user's order
by run name; here ties abstain and the stationary distribution is solved exactly.
"""

from __future__ import annotations

import numpy as np

from .._chunks import CHUNK_ELEMENTS
from .._validation import check_fraction, real_array

__all__ = ["borda", "majority", "mc4", "order"]

METHODS = ("mc4", "borda", "mean")


def _scores(per_user) -> np.ndarray:
    scores = real_array(per_user, "per_user", axes=("user row", "system")).astype(
        np.float64, copy=False
    )
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(
            f"per-user scores must be users × systems with ≥ 2 systems, got shape {scores.shape}"
        )
    if np.isnan(scores).any():
        u, s = np.argwhere(np.isnan(scores))[0]
        raise ValueError(f"per-user score is NaN for user {u}, system {s}")
    return scores


def borda(per_user) -> np.ndarray:
    """Mean Borda points of each system (systems beaten + ½ per tie, in [0, M − 1])."""
    # imported on use: start-up time (docs/performance.md)
    from scipy import stats

    return (stats.rankdata(_scores(per_user), axis=1) - 1).mean(axis=0)


def majority(per_user) -> np.ndarray:
    """``wins[i, j]`` = number of users whose score of system i is strictly above j's."""
    scores = _scores(per_user)
    m = scores.shape[1]
    wins = np.zeros((m, m), dtype=np.int64)
    step = max(1, CHUNK_ELEMENTS // (m * m))
    for start in range(0, scores.shape[0], step):
        block = scores[start : start + step]
        wins += (block[:, :, None] > block[:, None, :]).sum(axis=0)
    return wins


def mc4(per_user, damping: float = 0.15) -> np.ndarray:
    """Stationary distribution of the damped MC4 chain (module docstring), one mass per system.

    Parameters
    ----------
    per_user : array_like, shape (n_users, M)
        Per-user scores; higher is better.
    damping : float
        Teleport probability α in (0, 1).
    """
    damping = check_fraction(damping, "damping")
    wins = majority(per_user)
    m = wins.shape[0]
    # Row i moves to each j that a majority prefers to i with probability 1/M, else stays.
    moves = (wins.T > wins).astype(np.float64) / m
    np.fill_diagonal(moves, 0.0)
    np.fill_diagonal(moves, 1.0 - moves.sum(axis=1))
    chain = (1.0 - damping) * moves + damping / m
    # π (I − P) = 0 with Σ π = 1: replace one balance equation by the normalisation.
    system = (np.eye(m) - chain).T
    system[-1] = 1.0
    rhs = np.zeros(m)
    rhs[-1] = 1.0
    return np.linalg.solve(system, rhs)


def order(per_user, method: str = "mc4", damping: float = 0.15) -> np.ndarray:
    """System indices, best first, by ``method`` ∈ {"mc4", "borda", "mean"}.

    Ties of the primary key are broken by Borda points, then by mean score, then by index.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    scores = _scores(per_user)
    points, means = borda(scores), scores.mean(axis=0)
    primary = {"mc4": lambda: mc4(scores, damping), "borda": lambda: points, "mean": lambda: means}[
        method
    ]()
    # np.lexsort sorts by the last key first; negate for "larger is better". Stationary masses
    # equal up to the linear solver's round-off count as ties.
    return np.lexsort((np.arange(scores.shape[1]), -means, -points, -np.round(primary, 12)))
