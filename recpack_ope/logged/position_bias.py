"""Position-bias (examination) curves ``δ(r) = P(V=1 | R=r)`` learnt from logged clicks.

Jeunen et al. (KDD'24) obtain their best offline–online correlation with a *learnt*
position-based model instead of ``1/log2(r+1)`` (Table 2, "pbm"). Two estimators, both
returning a :class:`~recpack_ope.propensity.discount.CustomDiscount` usable by every DCG estimator:

* :class:`ShuffledPositionBias`: on randomised (uniformly shuffled) traffic every item is
  equally likely at every rank, so the click-through rate at rank r is ``δ(r) · E[Q]`` and
  ``CTR(r) / CTR(1)`` is the curve (Joachims et al. 2017; Gilotte §2.4, Fig. 2).
* :class:`PositionBiasEM`: on non-randomised logs, the position-based model
  ``P(C=1 | x, a, r) = θ_r · γ_{x,a}`` is fitted by expectation–maximisation (Wang et al.,
  "Position Bias Estimation for Unbiased Learning to Rank in Personal Search", WSDM 2018,
  §4.2). With ``E`` (examined) and ``R`` (relevant) hidden, an unclicked impression is
  examined-but-irrelevant with probability ``θ(1−γ)/(1−θγ)`` and relevant-but-unexamined with
  ``(1−θ)γ/(1−θγ)``; the M-step averages these posteriors (clicks count 1 for both) by rank
  and by relevance key. The key is the item (``relevance="item"``: right whenever the logging
  policy places items independently of the context's relevance, e.g. non-personalised
  logging), or the (context, item) pair.

The PBM identifies the curve only up to a factor (``θ·c``, ``γ/c`` fit equally well), so
curves are reported relative to rank 1 (``δ(1) = 1``), the convention of ``LogDiscount``.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_finite_number, check_positive_int
from ..propensity.discount import CustomDiscount
from .feed_log import FeedLog

__all__ = ["ShuffledPositionBias", "PositionBiasEM"]

# Iterations beyond this are refused: each one is a pass over the log, and EM that has not
# met a sensible tolerance by then is not converging.
MAX_ITERATIONS = 100_000


def _ranks(log: FeedLog, n_ranks: int | None) -> tuple[np.ndarray, int]:
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    n = int(log.rank.max()) if n_ranks is None else check_positive_int(n_ranks, "n_ranks")
    return log.rank <= n, n


def _check_clicks(log: FeedLog, keep: np.ndarray, n: int) -> None:
    bad = np.flatnonzero((log.reward != 0) & (log.reward != 1))
    if bad.size:
        raise ValueError(
            f"position-bias estimation needs binary clicks; reward {log.reward[bad[0]]} at rank "
            f"{log.rank[bad[0]]} of session {log.session_label(bad[0])!r}"
        )
    if not log.reward[keep].any():
        raise ValueError(
            f"the log has no click (reward 1) at ranks 1..{n}: position bias is estimated from "
            "clicks, so this log cannot give one"
        )


def _counts(rank: np.ndarray, n: int, what: str) -> np.ndarray:
    if n > rank.size:  # some rank is empty; find it without counting up to a huge n
        present = np.unique(rank)
        gap = np.flatnonzero(present != np.arange(1, present.size + 1))
        first = int(gap[0]) + 1 if gap.size else present.size + 1
        raise ValueError(f"no impression at rank {first}: cannot estimate {what} there")
    counts = np.bincount(rank - 1, minlength=n)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise ValueError(f"no impression at rank {empty[0] + 1}: cannot estimate {what} there")
    return counts


class ShuffledPositionBias:
    """Examination curve from uniformly shuffled traffic: ``δ(r) = CTR(r) / CTR(1)``.

    Parameters
    ----------
    n_ranks : int, optional
        Ranks to estimate (default: the deepest logged rank).

    Attributes
    ----------
    ctr_ : numpy.ndarray
        Click-through rate by rank.
    standard_error_ : numpy.ndarray
        Delta-method standard error of each ``CTR(r) / CTR(1)`` (binomial counts, ranks
        independent).
    discount_ : CustomDiscount
        The relative curve.
    """

    def __init__(self, n_ranks: int | None = None):
        self.n_ranks = check_positive_int(n_ranks, "n_ranks", allow_none=True)

    def fit(self, log: FeedLog) -> ShuffledPositionBias:
        """Estimate the curve from a log of shuffled banners (binary clicks)."""
        keep, n = _ranks(log, self.n_ranks)
        _check_clicks(log, keep, n)
        counts = _counts(log.rank[keep], n, "a click-through rate")
        clicks = np.bincount(log.rank[keep] - 1, weights=log.reward[keep], minlength=n)
        ctr = clicks / counts
        if ctr[0] <= 0:
            raise ValueError("no click at rank 1: the curve cannot be scaled to δ(1) = 1")
        relative = ctr / ctr[0]
        # Var(a/b) ≈ (a/b)² (Var a / a² + Var b / b²), binomial variances.
        rel_var = (1 - ctr) / (counts * np.maximum(ctr, 1e-300))
        self.ctr_ = ctr
        self.standard_error_ = relative * np.sqrt(rel_var + rel_var[0] * (np.arange(n) > 0))
        self.discount_ = CustomDiscount(np.maximum(relative, 0.0))
        return self


class PositionBiasEM:
    """Position-based click model fitted by EM (Wang et al. WSDM'18, §4.2).

    Parameters
    ----------
    relevance : {"item", "context_item"}
        What ``γ`` is keyed by.
    n_ranks : int, optional
        Ranks to estimate (default: the deepest logged rank); deeper rows are ignored.
    max_iter : int
        Iteration limit, at most ``MAX_ITERATIONS`` (100,000).
    tol : float
        Stop when the log-likelihood per impression improves by less than this (finite, >= 0).

    Attributes
    ----------
    theta_ : numpy.ndarray
        Fitted examination probabilities by rank (absolute scale as fitted).
    relevance_ : numpy.ndarray
        Fitted ``γ`` per key (items, or (context, item) pairs in ``keys_`` order).
    keys_ : numpy.ndarray
        The key of each ``relevance_`` entry: item ids, or ``context * n_items + item``.
    discount_ : CustomDiscount
        ``theta_ / theta_[0]``.
    n_iter_ : int
        Iterations run.
    log_likelihood_ : float
        Final mean log-likelihood per impression.
    """

    def __init__(
        self,
        relevance: str = "item",
        *,
        n_ranks: int | None = None,
        max_iter: int = 500,
        tol: float = 1e-10,
    ):
        if relevance not in ("item", "context_item"):
            raise ValueError(f"relevance must be 'item' or 'context_item', got {relevance!r}")
        self.relevance = relevance
        self.n_ranks = check_positive_int(n_ranks, "n_ranks", allow_none=True)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        if self.max_iter > MAX_ITERATIONS:
            raise ValueError(
                f"max_iter={max_iter} exceeds {MAX_ITERATIONS} passes over the log; loosen tol "
                "instead (EM that has not converged by then will not)"
            )
        self.tol = check_finite_number(tol, "tol", minimum=0)

    def fit(self, log: FeedLog) -> PositionBiasEM:
        """Fit θ (by rank) and γ (by key) to the log's binary clicks."""
        keep, n = _ranks(log, self.n_ranks)
        _check_clicks(log, keep, n)
        rank = log.rank[keep] - 1
        click = log.reward[keep]
        key = log.item[keep]
        if self.relevance == "context_item":
            key = log.context[keep] * np.int64(log.n_items) + key
        keys, key = np.unique(key, return_inverse=True)
        key = key.ravel()
        per_rank = _counts(rank + 1, n, "the examination probability")
        per_key = np.bincount(key, minlength=keys.size)
        ctr = np.bincount(rank, weights=click, minlength=n) / per_rank
        if ctr[0] <= 0:
            raise ValueError("no click at rank 1: the curve cannot be scaled to δ(1) = 1")
        # Start from the click-through rates: θ ∝ CTR(r), γ = 1/2 (any interior start works).
        theta = np.clip(ctr / ctr.max(), 1e-6, 1 - 1e-6)
        gamma = np.full(keys.size, 0.5)
        previous = -np.inf
        eps = 1e-12
        iteration = 0
        while iteration < self.max_iter:
            iteration += 1
            t, g = theta[rank], gamma[key]
            p_click = np.clip(t * g, eps, 1 - eps)
            unclicked = 1 - click
            examined = click + unclicked * t * (1 - g) / (1 - p_click)
            relevant = click + unclicked * (1 - t) * g / (1 - p_click)
            theta = np.clip(np.bincount(rank, weights=examined, minlength=n) / per_rank, eps, 1.0)
            gamma = np.clip(
                np.bincount(key, weights=relevant, minlength=keys.size) / per_key, eps, 1.0
            )
            p = np.clip(theta[rank] * gamma[key], eps, 1 - eps)
            likelihood = float(np.mean(click * np.log(p) + (1 - click) * np.log1p(-p)))
            if likelihood - previous < self.tol:
                break
            previous = likelihood
        self.theta_, self.relevance_, self.keys_ = theta, gamma, keys
        self.discount_ = CustomDiscount(theta / theta[0])
        self.n_iter_, self.log_likelihood_ = iteration, likelihood
        return self
