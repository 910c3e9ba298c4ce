"""Unbiased DCG on logged feedback (Jeunen, Potapov & Ustimenko, KDD'24, §4 and §6.2).

For a log of trajectories τ with rewards ``c_i`` on the items ``a_i`` they showed, the reward
a target policy would collect per trajectory is estimated by importance sampling (Eq. 10)::

    V̂ = (1/|D0|) Σ_τ Σ_i c_i · ε(x_τ, a_i) · min(m, 1 / ε0(x_τ, a_i)),

``ε`` the target's and ``ε0`` the logging policy's expected exposure of the item (Eq. 8; for
deterministic rankers ``δ(r_target) / δ(r_logged)``, the form after Eq. 10), and ``m`` the
clipping of §6.2 (``m = ∞``: none, unbiased under Asm. 1–5; ``m = 1``: every inverse
propensity is clipped to 1, leaving the naive DCG of the target on the raw rewards).
The sum is per trajectory, not divided by its length: V̂ estimates the expected reward per
session, the online metric of §6.1.

The normalised variants use the trajectory's ideal DCG over its gains
``g_i = c_i · min(m, 1/ε0)`` sorted descending (:func:`recpack_ope.metrics.dcg.ideal_dcg`):
``normalise="per_user"`` is the mean of per-trajectory ratios (nDCG), ``"post"`` the ratio of
means (pnDCG). Per-trajectory values, normal-theory intervals and paired comparisons come
with the result (:class:`recpack_ope.inference.result.EstimateResult`);
``Comparison.p_value_greater`` is the one-sided p-value of §6.2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from .._validation import check_bool, check_clip
from ..inference.clipping import clipped_estimate
from ..inference.diagnostics import (
    ESS_RATIO_THRESHOLD,
    WeightDiagnostics,
    check_ess_threshold,
)
from ..inference.result import LoggedEstimate
from ..inference.sensitivity import Linear, Weighting
from ..metrics.dcg import ideal_dcg, ideal_discounts
from ..propensity.discount import CustomDiscount, Discount
from ..propensity.weights import clip_weights
from .feed_log import FeedLog
from .policies import Exposure, candidate_sums

__all__ = ["logged_dcg", "logging_exposure", "SessionControl"]

_NORMALISE = (None, "per_user", "post")

#: The refusal of a normalised estimate on a log without a rewarded session, the same on every
#: engine: every session's ideal DCG is 0.
NO_REWARDED_SESSION = "no session has a positive reward: normalised DCG is undefined"


def _exposure(policy, log: FeedLog, discount: Discount, role: str, rows: np.ndarray) -> Exposure:
    """A policy's exposure of the log's ``rows``; an ``Exposure`` computed earlier for the
    whole log is reused, so sweeps over the clipping m rank each policy once."""
    if isinstance(policy, Exposure):
        if policy.values.shape != (log.n_rows,):
            raise ValueError(
                f"{role} exposure has shape {policy.values.shape}; the log has {log.n_rows} rows"
            )
        # ε = Σ_r P(rank = r) δ(r) (Eq. 8) is at most the curve's largest value over the ranks
        # an item can take; rounding of exact marginals may pass it by a few ulps.
        ranks = log.n_items if discount.cutoff is None else min(discount.cutoff, log.n_items)
        top = float(discount.weights(max(ranks, 1)).max())
        above = np.flatnonzero(policy.values > top * (1 + 1e-9))
        if above.size:
            k = above[0]
            raise ValueError(
                f"{role} exposure of row {k} is {policy.values[k]}, above {top:g}, the largest "
                f"view probability of the discount {discount!r} over {ranks} ranks: an exposure "
                "is the probability that the item is viewed (Eq. 8); was it computed for another "
                "discount or log?"
            )
        return policy.take(rows)
    if not hasattr(policy, "exposure"):
        raise TypeError(
            f"{role} must be a policy with an exposure(log, discount) method (LoggedRanking, "
            f"DeterministicRanker, PlackettLuceRanker) or an Exposure, got {type(policy).__name__}"
        )
    return policy.exposure(log, discount, rows)


def logging_exposure(
    log: FeedLog, discount: Discount, logging=None, logging_discount: Discount | None = None
) -> tuple[np.ndarray, Discount]:
    """``ε0`` of every logged row and the view model of the logged feeds.

    ``ε0`` comes from the log's propensity column, or from ``logging`` (a policy or an
    :class:`Exposure`) under ``logging_discount``; that defaults to ``discount`` extended to the
    deepest logged rank. A positive reward where ``ε0 = 0`` is refused.
    """
    if logging_discount is not None and not isinstance(logging_discount, Discount):
        raise TypeError(
            "logging_discount must be a Discount model or None, got "
            f"{type(logging_discount).__name__}"
        )
    if logging_discount is None:
        deepest = int(log.rank.max(initial=1))
        if isinstance(discount, CustomDiscount) and discount.cutoff < deepest:
            if logging is not None:
                raise ValueError(
                    f"discount is a curve of {discount.cutoff} ranks but the log shows ranks up to "
                    f"{deepest}: pass logging_discount=, the view curve over the logged ranks"
                )
        else:
            logging_discount = discount.with_cutoff(deepest)
    if logging is None:
        if log.propensity is None:
            raise ValueError(
                "the log has no propensity column; pass logging=LoggedRanking() for a "
                "deterministic logging policy or a PlackettLuceRanker for a stochastic one"
            )
        eps0 = log.propensity
    else:
        eps0 = _exposure(logging, log, logging_discount, "logging", np.arange(log.n_rows)).values
    unseen = np.flatnonzero((eps0 <= 0) & (log.reward > 0))
    if unseen.size:
        k = unseen[0]
        raise ValueError(
            f"reward {log.reward[k]} at rank {log.rank[k]} of session "
            f"{log.session_label(k)!r}, where the logging exposure is 0: the view "
            "model says that position is never examined"
        )
    return eps0, logging_discount


def logged_dcg(
    log: FeedLog,
    target,
    *,
    discount: Discount,
    logging=None,
    logging_discount: Discount | None = None,
    clip: float | str | None = None,
    normalise: str | None = None,
    control_variate: bool = False,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Unbiased (clipped) DCG of a target policy on logged feedback (Eq. 10, §6.2).

    Parameters
    ----------
    log : FeedLog
        The logged trajectories.
    target : policy or Exposure
        :class:`~recpack_ope.logged.policies.DeterministicRanker`,
        :class:`~recpack_ope.logged.policies.PlackettLuceRanker` or
        :class:`~recpack_ope.logged.policies.LoggedRanking` (the logging policy itself), or the
        :class:`~recpack_ope.logged.policies.Exposure` one of them returned for this log and
        ``discount`` (to evaluate many clippings without re-ranking).
    discount : Discount
        View model ``δ(r) = P(V=1 | R=r)`` of the target's feed, with its cutoff (the number of
        items the target shows), e.g. ``LogDiscount(cutoff=10)`` or a learnt
        :class:`~recpack_ope.propensity.discount.CustomDiscount`.
    logging : policy, optional
        Where ``ε0`` comes from. Default: the log's ``propensity`` column.
        ``LoggedRanking()`` for a deterministic logging policy (``ε0 = δ(logged rank)``).
    logging_discount : Discount, optional
        View model of the logged feeds; default ``discount`` extended to the deepest logged
        rank (the user's examination curve is the same, the logging feed may be longer). A
        :class:`~recpack_ope.propensity.discount.CustomDiscount` shorter than the logged
        feeds cannot be extended: pass the full curve here.
    clip : float, "auto" or None
        m of ``min(m, 1/ε0)``; None means m = ∞ (unbiased). ``"auto"`` selects m from the
        data by SLOPE (Su et al., ICML 2020; :mod:`recpack_ope.inference.clipping`) and keeps
        the estimate-versus-m curve as ``clip_selection``.
    normalise : {None, "per_user", "post"}
        DCG, per-trajectory nDCG, or post-normalised DCG.
    control_variate : bool
        Also compute every session's control variate
        ``Σ_i ε · min(m, 1/ε0) · δ0(k_i) − Σ_a ε(x, a)`` (expectation 0 unclipped), which
        ``compare(..., control_variate=True)`` uses (Δ-OPE, Jeunen & Ustimenko, RecSys 2024).
        It ranks every logged row, not only rewarded ones, and needs the target policy itself
        (not an :class:`Exposure`); only with ``normalise=None``.
    ess_threshold : float
        A :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued when the
        Kish effective sample size of the weights ``min(m, 1/ε0)`` of the rewarded rows is
        below this share of them; in (0, 1].

    Returns
    -------
    LoggedEstimate
        Value, per-trajectory values (``user_ids`` are session codes), intervals, paired
        comparisons, the Monte Carlo exposure error and the weight diagnostics.

    Raises
    ------
    ValueError
        Without a propensity column and logging policy, when a positive reward sits where the
        logging exposure is 0, or on invalid options.
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    if normalise not in _NORMALISE:
        raise ValueError(f"normalise must be one of {_NORMALISE}, got {normalise!r}")
    auto = check_clip(clip, allow_auto=True) == "auto"
    control_variate = check_bool(control_variate, "control_variate")
    ess_threshold = check_ess_threshold(ess_threshold)
    eps0, logging_discount = logging_exposure(log, discount, logging, logging_discount)
    # 1/ε0 of a subnormal ε0 overflows to inf: a finite clip caps it, unclipped it is refused.
    with np.errstate(divide="ignore", over="ignore"):
        raw = np.where(eps0 > 0, 1.0 / eps0, 0.0)
    # Only rows with a reward contribute (Eq. 10): the target ranks just those, once for all m.
    active = np.flatnonzero(log.reward * raw > 0)
    if control_variate:
        if normalise is not None:
            raise ValueError(
                "control_variate=True applies to logged DCG (normalise=None): normalised "
                f"estimates keep only sessions with a reward, got normalise={normalise!r}"
            )
        control = SessionControl.build(log, target, discount, logging_discount)
        target_exposure = control.exposure.take(active)
    else:
        control = None
        target_exposure = _exposure(target, log, discount, "target", active)
    # The evaluated rows: rewarded rows the target exposes (docs/definitions.md).
    shown = target_exposure.values > 0

    def mc_error(row_weights: np.ndarray, scale: float) -> float:
        """Bound on the Monte Carlo deviation of Σ_rows row_weight · ε̂ / scale over the active
        rows (:meth:`Exposure.error_bound`)."""
        return target_exposure.error_bound(row_weights[active], log.context[active]) / scale

    def estimate(m: float | None) -> LoggedEstimate:
        inverse = clip_weights(raw, m)
        gains = log.reward * inverse
        contributions = gains[active] * target_exposure.values
        dcg_s = np.bincount(log.session[active], weights=contributions, minlength=log.n_sessions)
        diagnostics = WeightDiagnostics.from_contributions(
            raw[active[shown]],
            inverse[active[shown]],
            contributions[shown],
            ess_threshold,
            users=log.session[active[shown]],
        )
        sessions = np.arange(log.n_sessions)
        label = discount.label + ("" if m is None else f" (m={m:g})")
        weighting = Weighting(
            raw=raw,
            clip=check_clip(m),
            units="row",
            base=np.zeros(log.n_sessions),
            numerator=Linear(
                log.session[active], active, log.reward[active] * target_exposure.values
            ),
        )
        if normalise is None:
            return LoggedEstimate(
                name=f"logged DCG{label}",
                terms=dcg_s,
                exponents=(1,),
                user_ids=sessions,
                n_excluded_users=0,
                approximation_error=mc_error(gains, log.n_sessions),
                diagnostics=diagnostics,
                control=None if control is None else control(inverse),
                weighting=weighting,
            )
        # Each session's gains in a CSR row (columns: positions in the session, so unique).
        positions = active - log.indptr[log.session[active]]
        indptr = np.concatenate(
            [[0], np.cumsum(np.bincount(log.session[active], minlength=log.n_sessions))]
        )
        idcg_s = ideal_dcg(
            sp.csr_matrix(
                (gains[active], positions, indptr),
                shape=(log.n_sessions, int(positions.max(initial=0)) + 1),
            ),
            discount,
        )
        kept = idcg_s > 0
        if not kept.any():
            raise ValueError(NO_REWARDED_SESSION)
        position = np.cumsum(kept) - 1  # every active row's session is kept: it has a reward
        user = position[log.session[active]]
        weighting = replace(
            weighting,
            base=np.zeros(int(kept.sum())),
            numerator=Linear(user, active, weighting.numerator.coef),
            denominator=Linear(user, active, log.reward[active]),
            discounts=ideal_discounts(
                discount, int(positions.max(initial=0)) + 1, int(np.diff(indptr).max())
            ),
            per_user=normalise == "per_user",
        )
        if normalise == "per_user":
            name, terms, exponents = "nDCG", dcg_s[kept] / idcg_s[kept], (1,)
            # Sessions without reward have no gains, so their rows weigh 0 here.
            scaled = gains / np.where(kept, idcg_s, 1.0)[log.session]
            error = mc_error(scaled, int(kept.sum()))
        else:
            name, terms, exponents = "pnDCG", np.column_stack([dcg_s, idcg_s])[kept], (1, -1)
            error = mc_error(gains, float(idcg_s.sum()))
        return LoggedEstimate(
            name=f"logged {name}{label}",
            terms=terms,
            exponents=exponents,
            user_ids=sessions[kept],
            n_excluded_users=int((~kept).sum()),
            approximation_error=error,
            diagnostics=diagnostics,
            weighting=weighting,
        )

    return clipped_estimate(
        estimate,
        "auto" if auto else clip,
        raw[active],
        needs="rewarded rows to select the clipping from; the log has none",
        unit="sessions",
        stacklevel=1,
    )


@dataclass(frozen=True, eq=False)
class SessionControl:
    """What the per-session control variate of a target on a feed log needs: the target's
    exposure ``ε`` of every row, the logged rows' examination ``δ0(k)`` and every session's
    total target exposure ``Σ_a ε(x_s, a)`` (docs/definitions.md, "Impressions and control
    variates"); built with a reward model, also every session's direct method
    ``Σ_a ε(x_s, a) ρ̂(x_s, a)`` (``direct``), from the same pass over the candidates."""

    exposure: Exposure
    view: np.ndarray
    total: np.ndarray
    session: np.ndarray
    n_sessions: int
    direct: np.ndarray | None = None

    @classmethod
    def build(
        cls,
        log: FeedLog,
        target,
        discount: Discount,
        logging_discount: Discount | None,
        reward_model=None,
    ) -> SessionControl:
        """Rank every row once and sum the target's exposure (and expected reward, given a
        reward model) over each context's candidates."""
        if logging_discount is None:
            raise ValueError(
                "the control variate needs the view curve of the logged ranks: pass "
                "logging_discount= (discount is a shorter CustomDiscount)"
            )
        total, direct = candidate_sums(target, log, discount, reward_model)
        contexts = log.context[log.indptr[:-1]]
        return cls(
            exposure=_exposure(target, log, discount, "target", np.arange(log.n_rows)),
            view=logging_discount(log.rank),
            total=total[contexts],
            session=log.session,
            n_sessions=log.n_sessions,
            direct=None if direct is None else direct[contexts],
        )

    def __call__(self, inverse: np.ndarray) -> np.ndarray:
        """``Σ_i ε_i · w_i · δ0(k_i) − Σ_a ε(x_s, a)`` per session, for weights
        ``w = min(m, 1/ε0)``."""
        shown = np.bincount(
            self.session,
            weights=self.exposure.values * inverse * self.view,
            minlength=self.n_sessions,
        )
        return shown - self.total
