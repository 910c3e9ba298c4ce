"""The DCG family: DCG, unbiased (IPS) DCG, per-user nDCG and post-normalised DCG.

Jeunen, Potapov & Ustimenko, "On (Normalised) Discounted Cumulative Gain as an Off-Policy
Evaluation Metric for Top-n Recommendation", KDD 2024. Notation of docs/definitions.md
("DCG family"):

* ``DCG_u = Σ_i c_ui · w_ui · δ(r_u(i))`` with ``w_ui = min(m, 1/p_ui)`` (Eq. 10–11; the
  clipping of §6.2). With ``p ≡ 1`` and ``LogDiscount(K)`` this is RecPack's ``DCGK(K)``.
* ``iDCG_u = Σ_j d_u[j] · g_u[j]``, ``g_u`` the user's held-out gains ``c·w`` sorted descending
  and ``d_u`` the values of ``δ`` over the ranks a ranking can use (1 … min(cutoff, n_items))
  sorted descending: the ideal ranking puts the largest gains where the examination is
  highest. For the usual decreasing curves ``d_u[j] = δ(j)``; for a learnt curve that is not
  monotone this keeps ``DCG_u ≤ iDCG_u``, so nDCG and pnDCG stay in [0, 1].
* unbiased DCG ``= (1/|U|) Σ_u DCG_u`` (Eq. 11, one trajectory per user).
* self-normalised DCG ``= Σ_ui c·w·δ / Σ_ui w × (N / |U|)``, N = number of held-out
  interactions: SNIPS rescaled so that it equals DCG when all weights are equal.
* nDCG ``= (1/|U|) Σ_u DCG_u / iDCG_u`` (per-user normalisation, §5: can invert DCG's order).
* pnDCG ``= Σ_u DCG_u / Σ_u iDCG_u`` (post-normalisation, §5: consistent with DCG, Lemma 5.1).

Which users U the means run over decides what an estimate estimates (docs/definitions.md,
"Evaluated users and estimands"). ``population="observed"`` (the default): the users with at
least one non-zero held-out reward (with impressions, also those shown something); the others
are counted in ``n_excluded_users`` of the result, never silently dropped. Over them unbiased
DCG estimates the online reward per user divided by the share of users with a held-out reward.
``population="all"``: every row of ``y_true``, users without held-out rewards counting 0, as
in Eq. 10–11 (an average over every logged trajectory); unbiased DCG then estimates the online
reward per user.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import (
    as_csr,
    check_bool,
    check_choice,
    check_clip,
    check_impressions,
    check_positive_int,
    check_rewards,
    entry_position,
)
from ..inference.clipping import check_finite_inverse, inverse_propensities, select_clip
from ..inference.diagnostics import (
    CALIBRATION_BINS,
    ESS_RATIO_THRESHOLD,
    PropensityCalibration,
    WeightDiagnostics,
    check_ess_threshold,
)
from ..inference.result import EstimateResult
from ..inference.sensitivity import Linear, Weighting
from ..propensity.discount import Discount
from ..propensity.weights import (
    RECOMMENDED_CLIP,
    clip_weights,
    entry_propensities,
    item_propensities,
    resolve_propensity,
)
from .ranking import ScoreSource, padded_csr, score_source
from .stratified import StrataBins

__all__ = [
    "POPULATIONS",
    "check_population",
    "dcg",
    "ndcg",
    "pn_dcg",
    "ips_dcg",
    "snips_dcg",
    "ips_ndcg",
    "ips_pn_dcg",
    "ideal_dcg",
]

_NORMALISE = (None, "per_user", "post")

#: The users a held-out estimate averages over: those the held-out data observes (a reward, or
#: with impressions an impression) or every row of ``y_true`` (module docstring).
POPULATIONS = ("observed", "all")


def ideal_dcg(gains, discount: Discount) -> np.ndarray:
    """``iDCG_u`` for every row of a users×items gain matrix (module docstring).

    The largest gains are paired with the largest values of the examination curve over the
    ranks 1 … min(cutoff, n_items), so the ideal is the best DCG any ranking can reach even
    when the curve is not decreasing (a learnt :class:`~recpack_ope.propensity.CustomDiscount`).

    Parameters
    ----------
    gains : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out gains ``c_ui · w_ui``, finite and ≥ 0.
    discount : Discount
        The examination curve, including its cutoff.

    Returns
    -------
    numpy.ndarray
        One ideal DCG per row (0 for rows without gains).
    """
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    matrix = as_csr(gains, "gains")
    check_rewards(matrix, "gains", "gains must be finite and >= 0")
    most = int(np.diff(matrix.indptr).max(initial=0))
    return _ideal_dcg(matrix.data, matrix.indptr, ideal_discounts(discount, matrix.shape[1], most))


def ideal_discounts(discount: Discount, n_items: int, n_gains: int) -> np.ndarray:
    """The ``n_gains`` largest values of ``δ`` over the ranks 1 … min(cutoff, n_items) that a
    ranking of ``n_items`` can use, in descending order; for a non-increasing curve exactly
    ``δ(1), δ(2), …``. O(min(cutoff, n_items))."""
    n_ranks = n_items if discount.cutoff is None else min(discount.cutoff, n_items)
    curve = discount(np.arange(1, n_ranks + 1))
    take = min(n_gains, n_ranks)
    if take < n_ranks:
        curve = np.partition(curve, n_ranks - take)[n_ranks - take :] if take else curve[:0]
    return np.sort(curve)[::-1]


def _ideal_dcg(gains: np.ndarray, indptr: np.ndarray, discounts: np.ndarray) -> np.ndarray:
    """``Σ_j discounts[j] · g_u[j]`` for consecutive CSR rows of gains (``indptr`` may start
    past 0), ``g_u`` sorted descending (``discounts`` from :func:`ideal_discounts`)."""
    values, _ = padded_csr(gains, None, indptr)
    depth = min(values.shape[1], discounts.size)
    # Only the sorted gains matter, not which item holds them: a sort of values suffices.
    # Padding (-inf) sorts last and counts as a gain of 0.
    ordered = np.maximum(np.sort(values, axis=1)[:, values.shape[1] - depth :][:, ::-1], 0.0)
    total = np.zeros(values.shape[0])
    for j in range(depth):  # rank by rank: each user's terms are added in rank order
        total += ordered[:, j] * discounts[j]
    return total


def dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    chunk_users: int | None = None,
    population: str = "observed",
) -> EstimateResult:
    """Plain (unweighted) DCG: ``(1/|U|) Σ_u Σ_i c_ui · δ(r_u(i))`` (Jeunen et al. Eq. 11
    with ``p ≡ 1``). With ``LogDiscount(K)`` this is RecPack's ``DCGK(K)``.

    What it estimates (docs/definitions.md, "Evaluated users and estimands"): over
    ``population="all"``, ``D = (1/|U|) Σ_u Σ_i E[c_ui] · δ(r_u(i))``, the target's online
    reward per user with every item's reward scaled by the logging policy's exposure of it
    (``E[c_ui] = p_ui · ρ_ui`` under the examination hypothesis, Asm. 4): proportional to the
    online reward only when the logging policy exposes every item alike. Over the
    ``"observed"`` users, ``D / π`` with π the expected share of users with a held-out reward
    (a ratio: consistent, not unbiased).

    Parameters
    ----------
    y_true : scipy.sparse matrix, array_like or pandas.DataFrame, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0``, binary (bools count as 0 and 1) or graded; text is
        refused with a TypeError, never parsed. Explicit zeros are not interactions.
        An entry stored more than once (a COO matrix built from a log with repeated clicks)
        counts with the sum of its values, as in scipy. A DataFrame is aligned by its labels,
        which must be the user (index) and item (column) indices.
    y_score : array_like, scipy.sparse matrix, pandas.DataFrame or TopK
        The model's scores (users × items) or precomputed rankings. A dense matrix ranks every
        item (``-inf`` = not a candidate); a sparse one ranks only its stored entries, like
        RecPack's ``X_pred``, and must store each (user, item) once. Items a user saw in
        training must be masked by the caller. Ties go to the lower item index; 64-bit
        integer scores are ranked exactly, also beyond ±2**53.
    discount : Discount
        Examination curve ``δ(r)`` with its cutoff, e.g. ``LogDiscount(cutoff=10)``.
    chunk_users : int or None
        Users per chunk; None picks a size that keeps each chunk's dense work near 4M
        elements, so memory stays bounded for any number of users.
    population : {"observed", "all"}
        The users U the estimate averages over: ``"observed"``, those with a non-zero
        held-out reward (the others counted in ``n_excluded_users``); ``"all"``, every row of
        ``y_true``, users without held-out rewards counting 0. The rows must then be the users
        the held-out period logged (served), no more.

    Returns
    -------
    EstimateResult
        Value, per-user values, user ids, excluded-user count, intervals and comparisons.

    Raises
    ------
    ValueError
        On shape mismatches, NaN scores, negative or non-finite rewards, invalid options
        (``population`` not one of :data:`POPULATIONS`), or when no user has held-out
        interactions.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> round(dcg(y_true, scores, discount=LogDiscount(2)).value, 4)
    1.0
    >>> y_more = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0]])  # a third user, no reward
    >>> more = np.vstack([scores, [0.5, 0.4, 0.3]])
    >>> round(dcg(y_more, more, discount=LogDiscount(2), population="all").value, 4)
    0.6667
    """
    return _estimate(
        y_true, y_score, discount=discount, chunk_users=chunk_users, population=population
    )


def ips_dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    propensity=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    impressions=None,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Unbiased (IPS) DCG, an estimator of online reward (Jeunen et al. Eq. 10–11):
    ``(1/|U|) Σ_u Σ_i c_ui · w_ui · δ(r_u(i))`` with ``w_ui = min(m, 1/p_ui)``.

    What it estimates (docs/definitions.md, "Evaluated users and estimands"), when
    ``propensity`` holds the logging exposure ``p_ui``, Jeunen et al.'s Asm. 1–5 hold
    (independent trajectories, position-based model, independent ranks, examination
    hypothesis, full support) and no weight is clipped (``clip=None``):

    * ``population="all"``: the online reward per user ``V`` of the target ranking, without
      bias (Eq. 10–11 average over every logged trajectory);
    * ``population="observed"`` without impressions: ``V / π``, π the expected share of users
      with a held-out reward. The factor is the same for every model, so models are ordered
      as by ``V``, but the value and its interval are not a reward per user (a ratio:
      consistent, not unbiased);
    * ``population="observed"`` with impressions: ``V`` over the served users (an impression
      or a reward), the same as ``"all"`` when every row of ``y_true`` was served.

    Clipping lowers every term (rewards are ≥ 0), so a clipped estimate is of a lower bound
    of these.

    Parameters
    ----------
    y_true, y_score, discount, chunk_users
        As for :func:`dcg`.
    propensity : fitted propensity model, 1-D array or sparse matrix
        Logging exposure propensities ``p_ui`` in (0, 1]. Required: :func:`dcg` is the
        unweighted estimator.
    clip : float, "auto" or None
        Clip IPS weights at ``m``: ``w = min(m, 1/p)`` (the clipping of §6.2). The default,
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP` (100), is the recommended
        configuration (docs/reliability.md, "The default clipping"). None means no clipping
        (m = ∞): the papers' unbiased estimator of Eq. 10–11. ``"auto"`` selects m from the
        data by SLOPE (Su et al., ICML 2020; :mod:`recpack_ope.inference.clipping`); the
        result then carries the estimate-versus-m curve as ``clip_selection``.
    impressions : scipy.sparse matrix or array_like, optional
        Where the logging policy showed items, shape of ``y_true``: ``e_ui`` = the probability
        that the user examined item i at the position it was shown (``δ0(logged rank)``; 1 for
        a plain "shown" record when ``p_ui`` is the probability of being shown), 0 or unstored
        where it was not shown; a probability, so in [0, 1] (a count of impressions, NaN or
        a value above 1 is refused, named with its (user, item)). Its expectation under the
        logging policy is ``p_ui``
        (docs/definitions.md, "Impressions and control variates"). With impressions the
        estimate averages over the *served* users (an impression or a held-out reward), not
        only those with rewards, and the result carries the control variate that
        ``compare(..., control_variate=True)`` uses.
    ess_threshold : float
        A :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued when the
        Kish effective sample size of the IPS weights is below this share of the held-out
        interactions; in (0, 1].
    population : {"observed", "all"}
        As for :func:`dcg`; ``"observed"`` with impressions means the served users. ``"all"``
        with impressions also averages in the rows with neither a reward nor an impression
        (DCG 0, control variate ``−Σ_r δ(r)``): right when the propensities describe them
        too (they were served and saw nothing), wrong for users the logging policy never
        served.

    Returns
    -------
    EstimateResult
        As for :func:`dcg`, with the weight diagnostics (``diagnostics``).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> round(ips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p).value, 4)
    1.5
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        propensity=_required(propensity, "ips_dcg", "dcg"),
        clip=clip,
        impressions=impressions,
        ess_threshold=ess_threshold,
        population=population,
    )


def snips_dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    propensity=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Self-normalised IPS DCG: ``Σ_ui c·w·δ / Σ_ui w × (N / |U|)``, N the held-out
    interactions (SNIPS rescaled so that it equals DCG when all weights are equal).

    Parameters as for :func:`ips_dcg` (no impressions: the self-normalisation constant is
    over the rewarded entries): weights clipped at
    :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP` by default, ``clip=None`` for the
    papers' unclipped estimator.

    What it estimates, under the assumptions of :func:`ips_dcg`: over ``population="all"``,
    ``V · κ`` with ``κ = E[N] / E[Σ_ui w_ui]`` over the rewarded entries (for clicks, the
    expected clicks per expected relevant item, ``Σ p·ρ / Σ ρ``); over the ``"observed"``
    users, ``V · κ / π``. κ does not depend on the target, so it orders models as ``V`` does,
    but neither value is a reward per user (ratios: consistent, not unbiased).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import snips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> round(snips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p).value, 4)
    0.6429
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        propensity=_required(propensity, "snips_dcg", "dcg"),
        clip=clip,
        ess_threshold=ess_threshold,
        self_normalised=True,
        population=population,
    )


def ndcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    chunk_users: int | None = None,
    population: str = "observed",
) -> EstimateResult:
    """Per-user normalised DCG, ``(1/|U|) Σ_u DCG_u / iDCG_u`` (Jeunen et al. §5).

    The common definition; Lemma 5.2 shows it can order models differently from DCG.
    Parameters as for :func:`dcg`.

    What it estimates: the mean, over the users with a held-out reward, of each user's share
    of their ideal DCG; it has no online-reward reading. Only ``population="observed"``: a
    user without held-out rewards has ``iDCG_u = 0`` and no nDCG, and counting them as 0 (or
    1) would only multiply the value by a share of users that is the same for every model,
    a convention rather than an estimate, so ``"all"`` is refused with a ValueError.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ndcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> round(ndcg(y_true, scores, discount=LogDiscount(2)).value, 4)
    0.8066
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        normalise="per_user",
        population=population,
    )


def ips_ndcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    propensity=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Per-user nDCG with IPS gains ``c·w`` in both DCG_u and iDCG_u (Jeunen et al. §5).

    Parameters as for :func:`ips_dcg` (no impressions): weights clipped at
    :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP` by default, ``clip=None`` for the
    papers' unclipped estimator. What it estimates: the mean over the
    users with a held-out reward of ``DCG_u / iDCG_u`` with IPS gains, a per-user ratio of
    two estimates that has no online-reward reading even with the true propensities
    (Lemma 5.2); only ``population="observed"``, for the reason given in :func:`ndcg`.
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        propensity=_required(propensity, "ips_ndcg", "ndcg"),
        clip=clip,
        ess_threshold=ess_threshold,
        normalise="per_user",
        population=population,
    )


def pn_dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    chunk_users: int | None = None,
    population: str = "observed",
) -> EstimateResult:
    """Post-normalised DCG, ``Σ_u DCG_u / Σ_u iDCG_u`` (Jeunen et al. §5).

    Normalising after aggregation keeps DCG's ordering of models (Lemma 5.1 applied to the
    aggregate), while staying in [0, 1]. Parameters as for :func:`dcg`.

    What it estimates: ``E[Σ_u DCG_u] / E[Σ_u iDCG_u]`` (a ratio: consistent, not unbiased),
    the plain DCG's estimand of :func:`dcg` over the mean ideal DCG. Users without held-out
    rewards add 0 to both sums, so both populations give the same value.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import pn_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> round(pn_dcg(y_true, scores, discount=LogDiscount(2)).value, 4)
    0.7602
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        normalise="post",
        population=population,
    )


def ips_pn_dcg(
    y_true,
    y_score,
    *,
    discount: Discount,
    propensity=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Post-normalised DCG with IPS gains, ``Σ_u DCG_u / Σ_u iDCG_u`` (Jeunen et al. §5).

    Parameters as for :func:`ips_dcg` (no impressions): weights clipped at
    :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP` by default, ``clip=None`` for the
    papers' unclipped estimator. What it estimates, unclipped, under the assumptions of
    :func:`ips_dcg`: ``V / E[iDCG_u]``, the online reward per user over the
    mean ideal DCG of the IPS gains (a ratio: consistent, not unbiased). The denominator does
    not depend on the target, so it orders models as ``V`` does (Lemma 5.1). Users without
    held-out rewards add 0 to both sums, so both populations give the same value.
    """
    return _estimate(
        y_true,
        y_score,
        discount=discount,
        chunk_users=chunk_users,
        propensity=_required(propensity, "ips_pn_dcg", "pn_dcg"),
        clip=clip,
        ess_threshold=ess_threshold,
        normalise="post",
        population=population,
    )


def _required(propensity, name: str, plain: str):
    """``propensity``, or an error naming the unweighted estimator to use without one."""
    if propensity is None:
        raise ValueError(
            f"{name} weights by inverse propensities: give propensity= (the logging exposure "
            f"p_ui), or use {plain} for the unweighted estimator"
        )
    return propensity


def _estimate(y_true, y_score, **options) -> EstimateResult:
    """:func:`_dcg` with the reliability warning of a weighted estimate."""
    result = _dcg(y_true, y_score, **options)
    if result.diagnostics is not None:
        result.diagnostics.warn(result.name)
    return result


def check_population(population: str, normalised: str | None = None) -> str:
    """``population`` if it is one of :data:`POPULATIONS`, else a ValueError naming the
    argument and the choices.

    ``normalised`` names an estimator that divides each user's DCG by a per-user total (nDCG,
    recall): it has no value for a user without held-out rewards, whose total is 0, so
    ``"all"`` is refused for it.

    Examples
    --------
    >>> check_population("all")
    'all'
    >>> check_population("everyone")
    Traceback (most recent call last):
    ...
    ValueError: population must be 'observed' or 'all', got 'everyone'
    """
    population = check_choice(population, POPULATIONS, "population")
    if population == "all" and normalised is not None:
        raise ValueError(
            f"population 'all' needs a value for every user, but {normalised} divides each "
            "user's DCG by a per-user total (the ideal DCG; for recall the held-out gain) that "
            "is 0 for users without held-out rewards: give population 'observed', or an "
            "estimator that averages DCG (dcg, ips_dcg, snips_dcg, pn_dcg, ips_pn_dcg, dr_dcg)"
        )
    return population


@dataclass(frozen=True, eq=False)
class HeldOut:
    """Held-out data prepared for one target: every stored entry with its reward, impression,
    inverse propensity and the target's examination of it.

    The entries are those of ``y_true`` and, when given, of ``impressions`` (their union, in
    CSR order); ``users`` are the evaluated rows (:data:`POPULATIONS`), and ``starts[k]`` is
    where user k's entries begin. Over ``population="all"`` a row without entries holds one
    placeholder (reward, impression, inverse propensity and examination 0), so that every sum
    over a user's entries (``np.add.reduceat`` at ``starts``) is defined, and 0 for them.
    """

    pattern: sp.csr_matrix
    reward: np.ndarray
    impression: np.ndarray | None
    raw: np.ndarray
    exposure: np.ndarray
    users: np.ndarray
    starts: np.ndarray
    total_exposure: np.ndarray
    n_held_out: np.ndarray
    step: int

    def control(self, weights: np.ndarray) -> np.ndarray | None:
        """Per-user control variate ``Σ_i δ(r_u(i)) · w_ui · e_ui − Σ_r δ(r)`` (None without
        impressions). Its expectation under the logging policy is 0 when no weight is
        clipped, since ``E[e_ui] = p_ui`` and ``w_ui = 1/p_ui`` (docs/definitions.md)."""
        if self.impression is None:
            return None
        return (
            np.add.reduceat(self.impression * weights * self.exposure, self.starts)
            - self.total_exposure
        )

    def entry_positions(self) -> np.ndarray:
        """The position in ``users`` of every stored entry's user."""
        return np.repeat(np.arange(self.users.size), np.diff(self.pattern.indptr)[self.users])

    def calibration(self, propensity) -> PropensityCalibration | None:
        """The check of ``propensity`` against the impressions (None without impressions or
        with fewer than 2 users): every user's ``Σ_i e_ui / p̂_ui`` over all items,
        and per quartile of the per-item propensities (docs/definitions.md, "Weight
        diagnostics"). Propensities per (user, item) cannot place the unshown items in bins:
        then only the overall mean, assuming every item has a propensity (full support)."""
        if self.impression is None or self.users.size < 2:
            return None
        p = resolve_propensity(propensity, self.pattern.shape)
        n_items = self.pattern.shape[1]
        if sp.issparse(p):
            item_bin, items, bounds = np.zeros(n_items, dtype=np.intp), np.array([n_items]), None
        else:
            bins = StrataBins.fit(p, min(CALIBRATION_BINS, n_items), "mass")
            item_bin = bins.index(p)
            items = np.bincount(item_bin, minlength=bins.n_strata)
            lowest = np.full(items.size, np.inf)
            np.minimum.at(lowest, item_bin, p)
            highest = np.zeros(items.size)
            np.maximum.at(highest, item_bin, p)
            bounds = np.column_stack([lowest, highest])
        cell = self.entry_positions() * items.size + item_bin[self.pattern.indices]
        sums = np.bincount(cell, self.impression * self.raw, minlength=self.users.size * items.size)
        return PropensityCalibration.from_sums(sums.reshape(-1, items.size), items, bounds)


def prepare_held_out(
    y_true,
    y_score,
    *,
    discount,
    propensity,
    impressions,
    chunk_users,
    on_ranked=None,
    population: str = "observed",
    ratio: str | None = None,
) -> HeldOut:
    """Validate the inputs of a held-out estimator and rank the target once.

    ``on_ranked(positions, items, delta)``, when given, sees every ranked (user, item) of the
    target with ``δ(rank)``; ``positions`` index the evaluated ``users``, which are those of
    ``population`` (:data:`POPULATIONS`). ``ratio`` names an estimator that divides each
    user's DCG by a per-user total (nDCG, recall), for the refusal of a ``y_true`` without
    rewards.
    """
    population = check_population(population)
    chunk_users = check_positive_int(chunk_users, "chunk_users", allow_none=True)
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    rewards = as_csr(y_true, "y_true")
    check_rewards(rewards)
    rewards.eliminate_zeros()
    scores = score_source(y_score, rewards.shape)
    n_held_out = np.diff(rewards.indptr)
    impression = None
    pattern = rewards
    if impressions is not None:
        if propensity is None:
            raise ValueError(
                "impressions need propensity=: the control variate compares what was shown "
                "with its expected exposure p_ui"
            )
        shown = check_impressions(impressions, rewards.shape)
        shown.eliminate_zeros()
        pattern, impression = _union(rewards, shown)
    counts = np.diff(pattern.indptr)
    users = np.flatnonzero(counts > 0)
    # Over population "all" every row is a user, rewarded or not: all rows without rewards
    # give DCG 0, and only a y_true without rows leaves no user.
    if users.size == 0 and (population == "observed" or pattern.shape[0] == 0):
        raise ValueError(
            "y_true has no rows: no user can be evaluated"
            if population == "all"
            else "y_true has no non-zero held-out rewards: no user can be evaluated"
            + (
                ""
                if ratio is None
                else f"; {ratio} divides each user's DCG by a per-user total (the ideal DCG; "
                "for recall the held-out gain) that is 0 for a user without rewards, so it has "
                "no value for any user"
            )
        )
    # Without propensities every weight is 1: one read-only value seen at every entry.
    raw = (
        np.broadcast_to(1.0, pattern.nnz)
        if propensity is None
        else inverse_propensities(entry_propensities(propensity, pattern))
    )
    placeholders = None
    if population == "all":
        pattern, impression, raw, placeholders = _with_placeholders(pattern, impression, raw)
        users = np.arange(pattern.shape[0])
    step = chunk_users or rows_per_chunk(max(scores.width, int(counts.max()), 1))
    exposure, total = _held_out_exposure(pattern, users, scores, discount, step, on_ranked)
    if placeholders is not None:
        exposure[placeholders] = 0.0
    return HeldOut(
        pattern=pattern,
        reward=pattern.data,
        impression=impression,
        raw=raw,
        exposure=exposure,
        users=users,
        starts=pattern.indptr[users],
        total_exposure=total,
        n_held_out=n_held_out[users],
        step=step,
    )


def _with_placeholders(
    pattern: sp.csr_matrix, impression: np.ndarray | None, raw: np.ndarray
) -> tuple[sp.csr_matrix, np.ndarray | None, np.ndarray, np.ndarray]:
    """``pattern`` with one stored 0 in column 0 of every row without entries, the impressions
    and inverse propensities aligned with it (0 at the placeholders), and where the
    placeholders are."""
    empty = np.diff(pattern.indptr) == 0
    indptr = np.concatenate([[0], np.cumsum(np.diff(pattern.indptr) + empty)])
    placeholders = indptr[:-1][empty]
    kept = np.ones(indptr[-1], dtype=bool)
    kept[placeholders] = False

    def spread(values: np.ndarray) -> np.ndarray:
        out = np.zeros(indptr[-1], dtype=values.dtype)
        out[kept] = values
        return out

    # Built directly so the placeholders stay stored entries.
    padded = sp.csr_matrix(
        (spread(pattern.data), spread(pattern.indices), indptr), shape=pattern.shape
    )
    return padded, None if impression is None else spread(impression), spread(raw), placeholders


def _union(rewards: sp.csr_matrix, shown: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """The union of two canonical CSR patterns: (rewards on it, impressions aligned with it)."""
    n_items = rewards.shape[1]

    def keys(m: sp.csr_matrix) -> np.ndarray:
        return (
            np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr)) * n_items
            + m.indices
        )

    union, inverse = np.unique(np.concatenate([keys(rewards), keys(shown)]), return_inverse=True)
    reward = np.zeros(union.size)
    reward[inverse[: rewards.nnz]] = rewards.data
    impression = np.zeros(union.size)
    impression[inverse[rewards.nnz :]] = shown.data
    indptr = np.concatenate(
        [[0], np.cumsum(np.bincount(union // n_items, minlength=rewards.shape[0]))]
    )
    # Built directly so the explicit zeros (impressions without reward) stay stored entries.
    pattern = sp.csr_matrix(
        (reward, (union % n_items).astype(np.int32), indptr), shape=rewards.shape
    )
    return pattern, impression


def _dcg(
    y_true,
    y_score,
    *,
    discount,
    propensity=None,
    clip=None,
    normalise=None,
    self_normalised=False,
    chunk_users=None,
    ess_threshold=ESS_RATIO_THRESHOLD,
    impressions=None,
    name: str | None = None,
    held_out: HeldOut | None = None,
    population="observed",
) -> EstimateResult:
    """:func:`dcg` without the reliability warning, for estimators built on it.

    ``normalise="total"`` (recall) divides each user's DCG by their total gain ``Σ_i c·w``;
    ``name`` replaces the estimator's name (its ``IPS-`` prefix is kept). ``held_out``, when
    given, is :func:`prepare_held_out` of these same ``y_true``, ``y_score``, ``discount``,
    ``propensity``, ``impressions`` and ``chunk_users``, reused by a caller that evaluates
    several estimators on one ranking (the RecPack adapter), prepared over ``population``.
    """
    if normalise not in (*_NORMALISE, "total"):
        raise ValueError(f"normalise must be one of {_NORMALISE}, got {normalise!r}")
    per_user = {"per_user": "ndcg", "total": "recall"}.get(normalise)
    if per_user is not None and propensity is not None:
        per_user = "ips_" + per_user
    check_population(population, per_user)
    ess_threshold = check_ess_threshold(ess_threshold)
    auto = check_clip(clip, allow_auto=True) == "auto"
    self_normalised = check_bool(self_normalised, "self_normalised")
    if self_normalised and normalise is not None:
        raise ValueError(
            f"self_normalised applies to unnormalised DCG only, got normalise={normalise!r}: "
            "the self-normalisation constant cancels in a normalised ratio"
        )
    if impressions is not None and (normalise is not None or self_normalised):
        raise ValueError(
            "impressions apply to (IPS-)DCG only: served users without rewards have no ideal "
            f"DCG to normalise by (normalise={normalise!r}, self_normalised={self_normalised!r})"
        )
    data = held_out
    if data is None:
        data = prepare_held_out(
            y_true,
            y_score,
            discount=discount,
            propensity=propensity,
            impressions=impressions,
            chunk_users=chunk_users,
            population=population,
            ratio=per_user,
        )
    rewards, users, starts, step = data.pattern, data.users, data.starts, data.step
    if (normalise == "post" or self_normalised) and not (data.reward > 0).any():
        ips = "" if propensity is None else "IPS-"
        ratio = (
            f"{ips}pnDCG = mean DCG / mean ideal DCG"
            if normalise == "post"
            else "SNIPS-DCG = IPS-DCG · N / Σ w over the rewarded entries"
        )
        raise ValueError(
            f"every held-out reward of y_true is 0, so {ratio} is 0/0 and has no value; "
            f"{ips or 'plain '}DCG over population 'all' is exactly 0"
        )
    # The evaluated interactions: rewarded entries the target ranks where δ > 0, whose weights
    # make up the estimate (docs/definitions.md, "Weight diagnostics").
    # Only the weight diagnostics read them: none without propensities.
    evaluated = position = calibration = None
    if propensity is not None:
        evaluated = (data.exposure > 0) & (data.reward > 0)
        calibration = data.calibration(propensity)
        position = data.entry_positions()[evaluated]

    def estimate(m: float | None) -> EstimateResult:
        # min(raw, ∞) is raw itself: no copy of a weight per entry.
        weights = data.raw if m is None else clip_weights(data.raw, m)
        # Without propensities a weight is 1 (0 only at a placeholder, whose reward is 0): the
        # gains c·w are the rewards themselves.
        gains = data.reward if propensity is None else data.reward * weights
        dcg_u = _user_sums(gains, data.exposure, starts, step)
        prefix = "" if propensity is None else "IPS-"
        if normalise == "per_user":
            label, terms, exponents = (
                "nDCG",
                dcg_u / _ideal(rewards, gains, users, discount, step),
                (1,),
            )
        elif normalise == "post":
            idcg_u = _ideal(rewards, gains, users, discount, step)
            label, terms, exponents = "pnDCG", np.column_stack([dcg_u, idcg_u]), (1, -1)
        elif normalise == "total":
            label, terms, exponents = (
                "",
                dcg_u / np.add.reduceat(gains, starts),
                (1,),
            )
        elif self_normalised:
            # Σ c·w·δ / Σ w × N/|U| = mean(DCG_u) · mean(n_u) / mean(Σ_i w_ui)
            # (docs/definitions.md, "DCG family").
            prefix = "SN" + (prefix or "IPS-")
            label, exponents = "DCG", (1, 1, -1)
            terms = np.column_stack([dcg_u, data.n_held_out, np.add.reduceat(weights, starts)])
        else:
            label, terms, exponents = "DCG", dcg_u, (1,)
        diagnostics = None
        if propensity is not None:
            part = gains[evaluated] * data.exposure[evaluated]
            if normalise in ("per_user", "total"):
                # A per-user ratio: each interaction's part of its user's term is its share of
                # the user's DCG times that term.
                with np.errstate(divide="ignore", invalid="ignore"):
                    part = part * np.where(dcg_u > 0, terms / dcg_u, 0.0)[position]
            diagnostics = WeightDiagnostics.from_contributions(
                data.raw[evaluated],
                weights[evaluated],
                part,
                ess_threshold,
                users=position,
                calibration=calibration,
            )
        return EstimateResult(
            name=prefix + (name or f"{label}{discount.label}"),
            terms=terms,
            exponents=exponents,
            user_ids=users,
            n_excluded_users=int(rewards.shape[0] - users.size),
            diagnostics=diagnostics,
            control=data.control(weights),
            weighting=None
            if propensity is None
            else held_out_weighting(
                data, propensity, m, discount, normalise=normalise, self_normalised=self_normalised
            ),
        )

    if propensity is not None:
        check_finite_weights(data, propensity, clip)
    if not auto:
        return estimate(clip)
    if propensity is None:
        raise ValueError('clip="auto" selects the clipping of IPS weights; give a propensity')
    return select_clip(estimate, data.raw)


def check_finite_weights(data: HeldOut, propensity, clip: float | str | None) -> None:
    """Refuse a held-out entry whose inverse propensity overflows where ``clip`` does not cap
    it (:func:`~recpack_ope.inference.clipping.check_finite_inverse`), naming the propensity,
    its value and its (user, item)."""

    def describe(k: int) -> str:
        user, item = entry_position(data.pattern, k)
        value = item_propensities(propensity, np.array([user]), np.array([item]))[0]
        return f"propensity {float(value)!r} of item {item} (user {user})"

    check_finite_inverse(data.raw, clip, describe)


def held_out_weighting(
    data: HeldOut,
    propensity,
    clip: float | None,
    discount: Discount,
    *,
    normalise: str | None = None,
    self_normalised: bool = False,
    base: np.ndarray | None = None,
    numerator: np.ndarray | None = None,
    kept: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Weighting:
    """How a held-out estimate depends on the weight of each propensity
    (:class:`~recpack_ope.inference.sensitivity.Weighting`): the numerator's coefficients are
    ``c_ui · δ(r_u(i))`` (or ``numerator``, per stored entry, over a weight-free ``base``), the
    denominator's those of :func:`_dcg`'s normaliser. ``kept`` is ``(positions, items,
    coefficients, propensities)`` of the terms in ``max(0, 1 − m p_ui)`` that the clipped
    doubly robust estimator adds for (user position, item) pairs the target ranks."""
    pattern, users = data.pattern, data.users
    kind, unit, raw = propensity_units(propensity, pattern, data.raw)
    counts = np.diff(pattern.indptr)
    user = np.repeat(np.arange(users.size), counts[users])
    kept_linear = keys = None
    if kind == "entry":
        n_items = np.int64(pattern.shape[1])
        keys = np.repeat(np.arange(pattern.shape[0]), counts) * n_items + pattern.indices
    if kept is not None:
        positions, items, kept_coef, kept_p = kept
        kept_unit = items.astype(np.int64)
        if kind == "entry":
            # Ranked pairs need not be stored entries: one unit per distinct (user, item).
            keys, inverse = np.unique(
                np.concatenate([keys, users[positions] * n_items + items]), return_inverse=True
            )
            unit, kept_unit = inverse[: pattern.nnz], inverse[pattern.nnz :]
            raw = np.empty(keys.size)
            # Ranked pairs last: a placeholder entry of population="all" holds raw 0.
            raw[unit] = data.raw
            raw[kept_unit] = inverse_propensities(kept_p)
        kept_linear = Linear(positions, kept_unit, kept_coef)
    coef = data.reward * data.exposure if numerator is None else numerator
    nonzero = coef != 0
    weighting = Weighting(
        raw=raw,
        clip=check_clip(clip),
        units=kind,
        base=np.zeros(users.size) if base is None else base,
        numerator=Linear(user[nonzero], unit[nonzero], coef[nonzero]),
        kept=kept_linear,
        keys=keys,
    )
    if self_normalised:
        return replace(
            weighting,
            # Σ w over the rewarded entries (not the placeholders of population="all").
            denominator=Linear(user, unit, (data.reward > 0).astype(float)),
            fixed=data.n_held_out[:, None].astype(float),
            fixed_exponents=(1,),
        )
    if normalise is None:
        return weighting
    discounts = None
    if normalise != "total":
        discounts = ideal_discounts(discount, pattern.shape[1], int(counts.max()))
    return replace(
        weighting,
        denominator=Linear(user, unit, data.reward),
        discounts=discounts,
        per_user=normalise != "post",
    )


def propensity_units(propensity, pattern: sp.csr_matrix, raw: np.ndarray):
    """What one propensity belongs to (``"item"`` or ``"entry"``), the unit of every stored
    entry of ``pattern``, and every unit's raw inverse weight (``raw`` holds the entries')."""
    p = resolve_propensity(propensity, pattern.shape)
    if sp.issparse(p):
        return "entry", np.arange(pattern.nnz), raw
    inverse = inverse_propensities(p)
    # Items no entry uses never enter the bounds; give them a finite weight.
    inverse[~np.isfinite(inverse)] = 1.0
    return "item", pattern.indices.astype(np.int64), inverse


def _held_out_exposure(
    pattern: sp.csr_matrix,
    users: np.ndarray,
    scores: ScoreSource,
    discount: Discount,
    step: int,
    on_ranked=None,
) -> tuple[np.ndarray, np.ndarray]:
    """``δ(rank)`` of every stored entry in the target's ranking (0 when unranked), and each
    user's total examination ``Σ_r δ(r)`` over the items the target ranks.

    ``δ`` is looked up in its values over the ranks a ranking can reach, computed once.
    """
    depth = scores.width if discount.cutoff is None else min(discount.cutoff, scores.width)
    delta = np.concatenate([[0.0], discount.weights(depth)])  # delta[0]: not ranked
    report = None
    if on_ranked is not None:

        def report(positions: np.ndarray, items: np.ndarray, ranks: np.ndarray) -> None:
            on_ranked(positions, items, delta[ranks])

    ranks, counts = scores.held_out_ranks(pattern, users, discount.cutoff, step, report)
    # Ranks run 1 … counts[u] without gaps, so a user's total is a prefix sum of δ.
    return delta[ranks], np.cumsum(delta)[counts]


def _user_sums(
    gains: np.ndarray, exposure: np.ndarray, starts: np.ndarray, step: int
) -> np.ndarray:
    """``np.add.reduceat(gains * exposure, starts)``, the products formed for ``step`` users at a
    time rather than for every entry at once; each user's terms are added in the same order,
    so the sums are the same.

    Examples
    --------
    >>> gains, exposure = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 0.5, 0.0, 2.0])
    >>> _user_sums(gains, exposure, starts=np.array([0, 2, 3]), step=2)
    array([2., 0., 8.])
    """
    sums = np.empty(starts.size)
    for start in range(0, starts.size, step):
        first = starts[start]
        stop = starts[start + step] if start + step < starts.size else gains.size
        part = gains[first:stop] * exposure[first:stop]
        sums[start : start + step] = np.add.reduceat(part, starts[start : start + step] - first)
    return sums


def _ideal(
    rewards: sp.csr_matrix, gains: np.ndarray, users: np.ndarray, discount: Discount, step: int
) -> np.ndarray:
    """``iDCG_u`` of the evaluated users over their ``gains`` ``c·w`` (one per stored entry of
    ``rewards``), in chunks of users."""
    lengths = np.diff(rewards.indptr)
    discounts = ideal_discounts(discount, rewards.shape[1], int(lengths.max()))
    ideal = np.empty(users.size)
    for start in range(0, users.size, step):
        chunk = users[start : start + step]
        # Rows between the chunk's users hold no entries: their gains are one slice.
        indptr = np.concatenate([[0], np.cumsum(lengths[chunk])]) + rewards.indptr[chunk[0]]
        ideal[start : start + chunk.size] = _ideal_dcg(gains, indptr, discounts)
    return ideal
