"""Cascade doubly robust (Cascade-DR) estimation of ranking policies on feed logs.

Kiyohara et al. (WSDM 2022, §3.1, the Cascade-DR estimator) combine cascade IPS
(:func:`~recpack_ope.logged.ranking_ips.cascade_ips`) with a reward model as a control
variate at every rank. Per session with context x and logged ranking ``a_1, …, a_K``::

    V̂ = (1/n) Σ_s Σ_k [ w_1:k (α_k r_k − Q̂_k(x, a_k)) + w_1:k−1 Σ_a π(a | x, a_1:k−1) Q̂_k(x, a) ]

    w_1:k = π(a_1:k | x) · min(m, 1/π0(a_1:k | x)),   w_1:0 = 1

This is the paper's sum-over-ranks form of Cascade-DR with clipped prefix weights, the
reward model restricted to ``Q̂_k(x, a)`` (the paper's ``Q̂_k`` may also depend on the items
above rank k). ``α_k`` are the discount's weights (1 without one), so the value estimated is
:mod:`.ranking_ips`'s ``V(π) = E_x E_{a∼π}[Σ_k α_k r_k]``.

* Unbiased for any ``Q̂`` when the reward at rank k depends only on the items at ranks 1..k
  (the cascade model; the position-based model is a special case) and ``π0`` is right,
  unclipped: given the prefix above rank k, the two ``Q̂_k`` terms have equal expectations
  under ``π0``, and what is left is cascade IPS.
* It reduces the variance of cascade IPS most when ``Q̂_k(x, a)`` is the expected
  α-weighted reward from rank k to the end with item a at rank k (the target choosing the
  ranks below); a far-off ``Q̂`` can raise it instead.

The estimate is linear in the rows' clipped inverse prefix propensities
``v_k = min(m, 1/π0(a_1:k | x))``: session s contributes
``D_1 + Σ_k v_k · π(a_1:k | x) · (α_k r_k − Q̂_k(x, a_k) + D_{k+1})`` with
``D_k = Σ_a π(a | x, a_1:k−1) Q̂_k(x, a)`` and ``D_{K+1} = 0``, which is what its sensitivity
bounds perturb (one propensity per row, the prefix's).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_clip
from ..inference.clipping import clipped_estimate
from ..inference.diagnostics import ESS_RATIO_THRESHOLD, WeightDiagnostics, check_ess_threshold
from ..inference.result import LoggedEstimate
from ..inference.sensitivity import Linear, Weighting
from ..propensity.discount import Discount
from ..propensity.weights import clip_weights
from .feed_log import FeedLog
from .ranking_ips import KINDS, check_whole_rankings, position_weights, ranking_weights

__all__ = ["cascade_dr"]


def cascade_dr(
    log: FeedLog,
    target,
    *,
    reward_model,
    discount: Discount | None = None,
    logging=None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Cascade-DR value of a target ranking policy on a feed log (module docstring).

    Parameters
    ----------
    log : FeedLog
        Sessions that each show whole rankings (ranks 1..K).
    target : policy
        :class:`~recpack_ope.logged.policies.DeterministicRanker`,
        :class:`~recpack_ope.logged.policies.PlackettLuceRanker` or any object with
        ``conditional_probabilities(log)`` and ``conditional_distribution(log)``.
    reward_model : object with ``predict(contexts, items, ranks)``
        ``Q̂_k(x, a)``: the expected α-weighted reward from rank k to the end with item a at
        rank k, one finite real per (context code, item, rank) triple.
    discount : Discount, optional
        Position weights ``α_k`` of the value; default 1 at every rank.
    logging : policy, optional
        Where ``π0`` comes from; default the log's ``prefix_propensity`` column, or its
        ``logging_weight`` column (Plackett–Luce).
    clip : float, "auto" or None
        m of ``min(m, 1/π0)``; None for none; ``"auto"`` selects it by SLOPE.
    ess_threshold : float
        Share of the evaluated rows below which the Kish ESS raises a ReliabilityWarning.

    Returns
    -------
    LoggedEstimate
        Named ``cascade DR…``, doubly robust: per-session values, intervals, paired
        comparisons, diagnostics of the rows' prefix weights and sensitivity bounds (one
        propensity per row, the prefix's).

    Raises
    ------
    TypeError
        For a reward model without ``predict`` or a target without the methods above.
    ValueError
        For reward-model values of the wrong shape or not finite (naming a session), and as
        :func:`~recpack_ope.logged.ranking_ips.cascade_ips`.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker, DeterministicRanker
    >>> class Constant:
    ...     def predict(self, contexts, items, ranks):
    ...         return np.full(len(items), 0.5)
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 1, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> target = DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))
    >>> cascade_dr(
    ...     log, target, reward_model=Constant(), logging=PlackettLuceRanker.uniform(2)
    ... ).value
    1.0
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if not callable(getattr(reward_model, "predict", None)):
        raise TypeError(
            "reward_model must have a predict(contexts, items, ranks) method returning "
            f"Q̂_k(x, a), got {type(reward_model).__name__}"
        )
    if not callable(getattr(target, "conditional_distribution", None)):
        raise TypeError(
            "target must be a policy with conditional_distribution(log) (LoggedRanking, "
            f"DeterministicRanker, PlackettLuceRanker), got {type(target).__name__}"
        )
    auto = check_clip(clip, allow_auto=True) == "auto"
    ess_threshold = check_ess_threshold(ess_threshold)
    check_whole_rankings(log, "cascade_dr")
    gain = position_weights(log, discount) * log.reward
    pi, pi0 = ranking_weights(log, target, logging, np.full(log.n_rows, KINDS.index("prefix")))
    raw = 1.0 / pi0

    q_logged = _predict(reward_model, log, np.arange(log.n_rows), log.item)
    direct = _expected_q(reward_model, log, target.conditional_distribution(log))
    # D_{k+1} on row k: the next row's direct term, 0 on a session's last row.
    last = log.indptr[1:] - 1
    following = np.append(direct[1:], 0.0)
    following[last] = 0.0
    coef = pi * (gain - q_logged + following)
    base = direct[log.indptr[:-1]]
    evaluated = (pi > 0) & (coef != 0)
    rows = np.arange(log.n_rows)

    def estimate(m: float | None) -> LoggedEstimate:
        inverse = clip_weights(raw, m)
        contributions = coef * inverse
        terms = base + np.bincount(log.session, weights=contributions, minlength=log.n_sessions)
        label = ("" if discount is None else discount.label) + ("" if m is None else f" (m={m:g})")
        return LoggedEstimate(
            name=f"cascade DR{label}",
            terms=terms,
            exponents=(1,),
            user_ids=np.arange(log.n_sessions),
            n_excluded_users=0,
            doubly_robust=True,
            diagnostics=WeightDiagnostics.from_contributions(
                raw[evaluated],
                inverse[evaluated],
                np.abs(contributions[evaluated]),
                ess_threshold,
                users=log.session[evaluated],
            ),
            weighting=Weighting(
                raw=raw,
                clip=check_clip(m),
                units="row",
                base=base,
                numerator=Linear(log.session[evaluated], rows[evaluated], coef[evaluated]),
            ),
        )

    return clipped_estimate(
        estimate,
        "auto" if auto else clip,
        raw[evaluated],
        needs="rows with a weighted term to select the clipping from; the target gives no "
        "logged prefix a positive probability, or every term is 0",
        unit="sessions",
        stacklevel=1,
    )


def _predict(model, log: FeedLog, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
    """``Q̂`` of ``items`` at the rank and context of log ``rows``: one finite real each."""
    values = np.asarray(model.predict(log.context[rows], items, log.rank[rows]))
    if values.shape != rows.shape:
        example = (
            "" if rows.size == 0 else f" (the first is of session {log.session_label(rows[0])!r})"
        )
        raise ValueError(
            f"reward_model.predict returned shape {values.shape} for {rows.size} (context, "
            f"item, rank) triples{example}; it must return one Q̂_k(x, a) per triple"
        )
    if np.iscomplexobj(values) or not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"reward_model.predict must return real values, got {values.dtype}")
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"reward_model gives {values[k]} for item {items[k]} at rank {log.rank[rows[k]]} of "
            f"session {log.session_label(rows[k])!r}; Q̂_k(x, a) must be finite"
        )
    return values


def _expected_q(model, log: FeedLog, distribution) -> np.ndarray:
    """``D_k = Σ_a π(a | x, a_1:k−1) Q̂_k(x, a)`` of every row from the target's next-item
    distribution (rows × items)."""
    if not sp.issparse(distribution):
        distribution = np.asarray(distribution, dtype=np.float64)
    if distribution.shape != (log.n_rows, log.n_items):
        raise ValueError(
            f"target.conditional_distribution returned shape {distribution.shape}; the log "
            f"needs ({log.n_rows} rows, {log.n_items} items)"
        )
    coo = sp.coo_matrix(distribution)
    bad = np.flatnonzero(~(coo.data >= 0) | ~(coo.data <= 1 + 1e-12))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"target.conditional_distribution gives {coo.data[k]} to item {coo.col[k]} after "
            f"the prefix above rank {log.rank[coo.row[k]]} of session "
            f"{log.session_label(coo.row[k])!r}; probabilities lie in [0, 1]"
        )
    q = _predict(model, log, coo.row.astype(np.int64), coo.col.astype(np.int64))
    return np.bincount(coo.row, weights=coo.data * q, minlength=log.n_rows)
