"""Doubly robust DCG on held-out data: a reward model's DCG plus the IPS-weighted residual.

The doubly robust estimator of Dudík, Langford & Li (ICML 2011, Eq. 4) adds to the direct
method's prediction the importance-weighted error of that prediction on what was logged. For
position-biased clicks the error of an item is its click minus the click the reward model
expects *where the item was shown* (Oosterhuis, TOIS 2023, Eq. 27 and §4.2, for the
position-based model; Kiyohara et al., WSDM 2022, for rankings in general). In the notation of
docs/definitions.md ("Doubly robust DCG"), with the target's ranking ``r_u``, reward model
``ρ̂_ui`` (click probability of an examined item), impressions ``e_ui`` (examination
probability at the logged position; ``E[e_ui] = p_ui``) and weights ``w_ui = min(m, 1/p_ui)``::

    DR_u = Σ_r δ(r) · ρ̂_u,a_r  +  Σ_i δ(r_u(i)) · w_ui · (c_ui − e_ui · ρ̂_ui)

The first sum is the direct method over the items the target ranks, the second the residual
over the held-out rewards and impressions. Given the logging propensities (``w = 1/p``) the
residual's expectation is ``Σ_i δ(r_u(i)) (ρ_ui − ρ̂_ui)``, so the estimate is unbiased for
any reward model; given the true reward model (``ρ̂ = ρ``) the residual's expectation is 0
whatever the weights, so it is unbiased for any propensities. Its variance is below IPS's
when ``ρ̂`` is close to ``ρ``: the residual removes the part of the clicks the reward model
explains.

Without impressions the estimator can only use their expectation ``e_ui = p_ui``. Then the
residual weights cancel and, unclipped, DR equals IPS exactly; with clipping at m it is
clipped IPS plus the reward model's DCG of the part clipping removed,
``Σ_r δ(r) ρ̂ (1 − min(1, m·p))``. Double robustness needs to know where items were shown.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_clip
from ..inference.clipping import select_clip
from ..inference.diagnostics import (
    ESS_RATIO_THRESHOLD,
    WeightDiagnostics,
    check_ess_threshold,
)
from ..inference.result import EstimateResult
from ..propensity.discount import Discount
from ..propensity.weights import RECOMMENDED_CLIP, clip_weights, item_propensities
from ..reward.validation import check_reward_model, predict_rewards
from .dcg import check_finite_weights, held_out_weighting, prepare_held_out

__all__ = ["dr_dcg"]


def dr_dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    reward_model=None,
    propensity=None,
    impressions=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Doubly robust DCG of a model's rankings on held-out rewards (module docstring).

    What it estimates (docs/definitions.md, "Evaluated users and estimands"), under Jeunen
    et al.'s Asm. 1–5, unclipped, when the propensities are the logging exposure **or** the
    reward model is the true click probability of an examined item (Dudík et al. 2011):

    * ``population="all"``: the online reward per user ``V``, without bias;
    * ``population="observed"`` without impressions: DR then equals IPS, and estimates
      ``V / π``, π the expected share of users with a held-out reward (with the true
      propensities only: without impressions nothing corrects wrong ones). Clipped, it also
      leaves out the reward model's part of the users without held-out rewards, which
      ``"all"`` keeps;
    * ``population="observed"`` with impressions: ``V`` over the served users, the same as
      ``"all"`` when every row of ``y_true`` was served.

    Parameters
    ----------
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0`` (clicks).
    y_score : array_like, scipy.sparse matrix or TopK
        The target's scores or rankings, with the conventions of :func:`~.dcg.dcg`.
    discount : Discount
        Examination curve ``δ(r)`` of the target's ranking, with its cutoff.
    reward_model : object with ``predict(users, items)``
        ``ρ̂_ui``: click probability of an examined item, in [0, 1]. A
        :class:`~recpack_ope.reward.RewardMatrix` of given probabilities, a model's scores
        mapped by a fitted :class:`~recpack_ope.reward.ScoreCalibration`
        (``calibration.reward_model(scores)``), or any object with that method.
    propensity : fitted propensity model, 1-D array or sparse matrix
        Logging exposure ``p_ui`` in (0, 1] of every held-out and impression entry (and, when
        clipping without impressions, of every item the target ranks).
    impressions : scipy.sparse matrix or array_like, optional
        ``e_ui``, the examination probability where the logging policy showed the item (see
        :func:`~.dcg.dcg`). Without it DR equals IPS unless the weights are clipped.
    clip : float, "auto" or None
        m of ``w = min(m, 1/p)``; default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`, the recommended
        configuration; None for none (the unclipped estimator of Dudík et al.); ``"auto"``
        selects m by SLOPE (Su et al., ICML 2020, who designed it for clipped doubly robust
        estimators).
    chunk_users : int or None
        Users per chunk (memory bound), None for automatic.
    ess_threshold : float
        A :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued when the
        Kish ESS of the weights of the evaluated entries is below this share of them.
    population : {"observed", "all"}
        The users averaged over, as for :func:`~.dcg.ips_dcg`: ``"observed"``, those with a
        held-out reward or, given impressions, an impression; ``"all"``, every row of
        ``y_true``. A user with neither then contributes the direct method alone: with
        impressions ``Σ_r δ(r) ρ̂``, without them the reward model's DCG of what clipping
        removed, ``Σ_r δ(r) ρ̂ (1 − min(1, m·p))`` (0 unclipped).

    Returns
    -------
    EstimateResult
        Named ``DR-DCG…``; per-user values ``DR_u``, intervals, diagnostics, and with
        impressions the control variate for ``compare(..., control_variate=True)``. Users are
        those of ``population``.

    Raises
    ------
    ValueError
        Without propensities, for a reward model whose values leave [0, 1] or whose shape does
        not match ``y_true``, and for the inputs :func:`~.dcg.dcg` refuses (``population``
        not one of :data:`~.dcg.POPULATIONS`), impressions outside [0, 1] among them.
    TypeError
        For a reward model without ``predict``, and for text or other non-numeric inputs or
        predictions (:class:`~recpack_ope._validation.NonNumericError`, also a ValueError).
    """
    ess_threshold = check_ess_threshold(ess_threshold)
    auto = check_clip(clip, allow_auto=True) == "auto"
    missing = [
        n for n, v in (("propensity", propensity), ("reward_model", reward_model)) if v is None
    ]
    if missing:
        raise ValueError(
            f"dr_dcg needs {' and '.join(missing)}=: a reward model's DCG plus its residual "
            "weighted by 1/p (use dcg for the unweighted estimator, ips_dcg without a reward "
            "model)"
        )
    check_reward_model(reward_model)  # before any ranking; its shape once y_true is checked
    clipped = auto or np.isfinite(check_clip(clip))
    ranked: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def on_ranked(positions: np.ndarray, items: np.ndarray, delta: np.ndarray) -> None:
        ranked.append((positions, items, delta))

    data = prepare_held_out(
        y_true,
        y_score,
        discount=discount,
        propensity=propensity,
        impressions=impressions,
        chunk_users=chunk_users,
        on_ranked=on_ranked,
        population=population,
    )
    check_reward_model(reward_model, data.pattern.shape, "y_true")
    users = data.users
    positions, items, delta = (np.concatenate(parts) for parts in zip(*ranked, strict=True))
    # Direct method: Σ_r δ(r) ρ̂ over the ranked items, per user.
    direct = predict_rewards(reward_model, users[positions], items) * delta
    if data.impression is None:
        # e = p everywhere: the residual's expected-click part is Σ_ranked δ w p ρ̂, which
        # cancels the direct method except where w·p = min(1, m p) < 1.
        p_ranked = (
            item_propensities(propensity, users[positions], items, shape=data.pattern.shape)
            if clipped
            else None
        )
    else:
        rows = np.repeat(np.arange(data.pattern.shape[0]), np.diff(data.pattern.indptr))
        expected = data.impression * predict_rewards(reward_model, rows, data.pattern.indices)
        # With impressions the direct method does not depend on the clipping.
        direct_u = np.bincount(positions, weights=direct, minlength=users.size)
    # The evaluated entries: those the target shows (δ > 0) with a reward or an expected
    # click, whose weights move the estimate (docs/definitions.md, "Weight diagnostics").
    evaluated = (data.exposure > 0) & (
        (data.reward > 0) if data.impression is None else (data.reward > 0) | (expected > 0)
    )
    evaluated_users, calibration = data.entry_positions()[evaluated], data.calibration(propensity)

    def estimate(m: float | None) -> EstimateResult:
        weights = clip_weights(data.raw, m)
        if data.impression is None:
            residual = data.reward * weights * data.exposure
            kept = 0.0 if p_ranked is None else 1.0 - np.minimum(1.0, check_clip(m) * p_ranked)
            dm = np.bincount(positions, weights=direct * kept, minlength=users.size)
        else:
            residual = (data.reward - expected) * weights * data.exposure
            dm = direct_u
        dr_u = dm + np.add.reduceat(residual, data.starts)
        diagnostics = WeightDiagnostics.from_contributions(
            data.raw[evaluated],
            weights[evaluated],
            np.abs(residual[evaluated]),
            ess_threshold,
            users=evaluated_users,
            calibration=calibration,
        )
        return EstimateResult(
            name=f"DR-DCG{discount.label}",
            terms=dr_u,
            exponents=(1,),
            user_ids=users,
            n_excluded_users=int(data.pattern.shape[0] - users.size),
            diagnostics=diagnostics,
            control=data.control(weights),
            doubly_robust=True,
            weighting=held_out_weighting(
                data,
                propensity,
                m,
                discount,
                base=None if data.impression is None else direct_u,
                numerator=data.exposure
                * (data.reward if data.impression is None else data.reward - expected),
                kept=None
                if data.impression is not None or p_ranked is None
                else (positions, items, direct, p_ranked),
            ),
        )

    check_finite_weights(data, propensity, clip)
    if auto:
        result = select_clip(estimate, data.raw)
    else:
        result = estimate(clip)
    result.diagnostics.warn(result.name)
    return result
