"""Doubly robust DCG on logged feedback (feed logs with the logged rank of every shown item).

Per session s with context x, the direct method over every candidate the target can show plus
the weighted residual of every logged row (Dudík et al., ICML 2011, Eq. 4; for clicks under
the position-based model Oosterhuis, TOIS 2023, Eq. 27; Kiyohara et al., WSDM 2022, for
ranking policies)::

    DR_s = Σ_a ε(x, a) · ρ̂(x, a)
           + Σ_{i ∈ s} ε(x, a_i) · min(m, 1/ε0(x, a_i)) · (c_i − δ0(k_i) · ρ̂(x, a_i))

``ε`` is the target's exposure (Eq. 8 of Jeunen et al., KDD'24), ``ε0`` the logging policy's,
``δ0(k_i)`` the examination probability of the logged rank ``k_i`` (so the reward model
expects ``δ0(k_i) ρ̂`` clicks on the row) and ``ρ̂`` the reward model's click probability of an
examined item. With the logging propensities (m = ∞) the residual has expectation
``Σ_a ε (ρ − ρ̂)``, so DR is unbiased for any reward model; with the true reward model the
residual has expectation 0 for any propensities. The control variate for paired comparisons
is ``Σ_{i ∈ s} ε · min(m, 1/ε0) · δ0(k_i) − Σ_a ε(x, a)`` (expectation 0 unclipped).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_clip
from ..inference.clipping import clipped_estimate
from ..inference.diagnostics import (
    ESS_RATIO_THRESHOLD,
    WeightDiagnostics,
    check_ess_threshold,
)
from ..inference.result import LoggedEstimate
from ..inference.sensitivity import Linear, Weighting
from ..propensity.discount import Discount
from ..propensity.weights import clip_weights
from ..reward.validation import check_reward_model, predict_rewards
from .feed_log import FeedLog
from .logged_dcg import SessionControl, logging_exposure

__all__ = ["logged_dr_dcg"]


def logged_dr_dcg(
    log: FeedLog,
    target,
    *,
    discount: Discount,
    reward_model,
    logging=None,
    logging_discount: Discount | None = None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Doubly robust DCG of a target policy on a feed log (module docstring).

    Parameters
    ----------
    log : FeedLog
        The logged sessions, every shown item a row with its logged rank.
    target : DeterministicRanker or PlackettLuceRanker
        The policy to evaluate; the direct method sums over every candidate it can show, so
        the policy itself is needed (not an ``Exposure``).
    discount : Discount
        View model of the target's feed, with its cutoff.
    reward_model : object with ``predict(contexts, items)``
        ``ρ̂(x, a)`` in [0, 1], the click probability of an examined item; rows are the log's
        context codes (e.g. :meth:`~recpack_ope.simulation.SimulatedWorld.reward_model`, a
        :class:`~recpack_ope.reward.RewardMatrix` or calibrated scores).
    logging, logging_discount
        Where ``ε0`` and the logged ranks' examination ``δ0`` come from, as in
        :func:`~recpack_ope.logged.logged_dcg.logged_dcg`.
    clip : float, "auto" or None
        m of ``min(m, 1/ε0)``; None for none; ``"auto"`` selects it by SLOPE.
    ess_threshold : float
        Share of the evaluated rows below which the Kish ESS raises a ReliabilityWarning.

    Returns
    -------
    LoggedEstimate
        Named ``logged DR-DCG…``: per-session values, intervals, diagnostics, the Monte Carlo
        error bound of a sampled target exposure, and the control variate.

    Raises
    ------
    ValueError
        For reward-model values outside [0, 1] or of the wrong shape, and as
        :func:`~recpack_ope.logged.logged_dcg.logged_dcg`.
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    auto = check_clip(clip, allow_auto=True) == "auto"
    ess_threshold = check_ess_threshold(ess_threshold)
    check_reward_model(reward_model, (log.n_contexts, log.n_items))
    eps0, logging_discount = logging_exposure(log, discount, logging, logging_discount)
    # 1/ε0 of a subnormal ε0 overflows to inf: a finite clip caps it, unclipped it is refused.
    with np.errstate(divide="ignore", over="ignore"):
        raw = np.where(eps0 > 0, 1.0 / eps0, 0.0)
    control = SessionControl.build(log, target, discount, logging_discount, reward_model)
    eps = control.exposure.values
    expected = control.view * predict_rewards(reward_model, log.context, log.item)
    residual = log.reward - expected
    # The evaluated rows: those the target exposes with a reward or an expected click.
    evaluated = (eps > 0) & (raw > 0) & ((log.reward > 0) | (expected > 0))

    def estimate(m: float | None) -> LoggedEstimate:
        inverse = clip_weights(raw, m)
        contributions = eps * inverse * residual
        dr_s = control.direct + np.bincount(
            log.session, weights=contributions, minlength=log.n_sessions
        )
        diagnostics = WeightDiagnostics.from_contributions(
            raw[evaluated],
            inverse[evaluated],
            np.abs(contributions[evaluated]),
            ess_threshold,
            users=log.session[evaluated],
        )
        # Bound on the Monte Carlo error of the sampled exposures in the residual (the direct
        # method's exposures carry the same draws), as in logged_dcg.
        error = control.exposure.error_bound(inverse * residual, log.context) / log.n_sessions
        label = discount.label + ("" if m is None else f" (m={m:g})")
        return LoggedEstimate(
            name=f"logged DR-DCG{label}",
            terms=dr_s,
            exponents=(1,),
            user_ids=np.arange(log.n_sessions),
            n_excluded_users=0,
            approximation_error=error,
            diagnostics=diagnostics,
            control=control(inverse),
            doubly_robust=True,
            weighting=Weighting(
                raw=raw,
                clip=check_clip(m),
                units="row",
                base=control.direct,
                numerator=Linear(log.session, np.arange(log.n_rows), eps * residual),
            ),
        )

    return clipped_estimate(
        estimate,
        "auto" if auto else clip,
        raw[evaluated],
        needs="rows with a reward or an expected click that the target exposes",
        unit="sessions",
        stacklevel=1,
    )
