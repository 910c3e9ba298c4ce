"""Importance sampling of whole rankings on logged feeds, under three click models.

A session shows the ranking ``a = (a_1, …, a_K)`` in context x and records a reward ``r_k``
at every rank. The value of a target policy π is the expected position-weighted reward of
the rankings it would show, ``V(π) = E_x E_{a∼π(x)} [Σ_k α_k r_k]`` (``α_k`` the discount's
weights, 1 without one). The three estimators below re-weight the logged rewards by how much
more likely π is than the logging policy π0 to show what produced them; they differ in what
that is, which is what they assume about clicks (Kiyohara et al., WSDM 2022, §3;
McInerney et al., KDD 2020)::

    standard     V̂ = (1/n) Σ_s Σ_k α_k r_k · π(a_1:K | x) / π0(a_1:K | x)
    cascade      V̂ = (1/n) Σ_s Σ_k α_k r_k · π(a_1:k | x) / π0(a_1:k | x)
    independent  V̂ = (1/n) Σ_s Σ_k α_k r_k · π(a_k at k | x) / π0(a_k at k | x)

* **Standard IPS** (Kiyohara et al. 2022, Eq. 3) weights by the whole ranking: unbiased
  whatever the click model, as long as π0 shows every ranking π shows; the weights are
  products over the ranks, so its variance grows fast with K.
* **Cascade IPS** (reward-interaction IPS, McInerney et al. 2020, Eq. 7; Kiyohara et al.
  2022, Eq. 5) weights rank k by the prefix down to k: unbiased when the reward at rank k
  depends only on the items at ranks 1..k (the cascade model: users read down the list and
  may stop), biased when it also depends on items below.
* **Independent IPS** (Li et al., WSDM 2018, §4.2; Kiyohara et al. 2022, Eq. 4) weights
  rank k by the marginal probability of its item there: unbiased when the reward at rank k
  depends only on the item at k and on k (the position-based model, with no examination
  curve needed), biased as soon as clicks interact. It needs no whole rankings.

:func:`~recpack_ope.logged.logged_dcg.logged_dcg` is the estimator of the position-based model
that also pools an item's ranks through a known examination curve (Jeunen et al., KDD'24,
Eq. 10).

The probabilities come from the log's columns (``position_propensity``,
``prefix_propensity``, or the ``logging_weight`` of a Plackett–Luce logging policy) or from a
policy's ``position_probabilities`` / ``conditional_probabilities``
(:mod:`.policies`); prefix probabilities are products of the conditionals down a session.
The inverse logging probability is clipped as in logged DCG: ``π · min(m, 1/π0)``.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._validation import check_clip
from ..inference.clipping import clipped_estimate
from ..inference.diagnostics import ESS_RATIO_THRESHOLD, WeightDiagnostics, check_ess_threshold
from ..inference.result import LoggedEstimate
from ..inference.sensitivity import Linear, Weighting
from ..propensity.discount import Discount
from ..propensity.weights import clip_weights
from .feed_log import FeedLog, _label

__all__ = [
    "standard_ips",
    "cascade_ips",
    "independent_ips",
    "check_whole_rankings",
    "position_weights",
    "ranking_probabilities",
    "ranking_weights",
    "KINDS",
]

#: What each estimator weights a row by: the marginal of its item at its rank, the prefix
#: down to it, or the session's whole ranking.
KINDS = ("position", "prefix", "ranking")


def check_whole_rankings(log: FeedLog, estimator: str) -> None:
    """Refuse a log whose sessions do not each show ranks 1, 2, …, K (one item per rank).

    Raises
    ------
    ValueError
        Naming the first session with a missing rank, its ranks and the estimator.

    Examples
    --------
    >>> from recpack_ope.logged import FeedLog
    >>> log = FeedLog.from_arrays(["a", "a", "b"], [1, 2, 3], [1, 3, 2], [0, 1, 0])
    >>> try:
    ...     check_whole_rankings(log, "cascade_ips")
    ... except ValueError as error:
    ...     print(str(error).split(": ")[1])
    session 'a' shows ranks [1, 3], missing rank 2
    """
    expected = np.arange(log.n_rows) - log.indptr[log.session] + 1
    gap = np.flatnonzero(log.rank != expected)
    if gap.size:
        s = log.session[gap[0]]
        ranks = log.rank[log.indptr[s] : log.indptr[s + 1]]
        missing = int(np.setdiff1d(np.arange(1, ranks.max() + 1), ranks)[0])
        raise ValueError(
            f"{estimator} needs whole rankings (ranks 1..K in every session): session "
            f"{_label(log.session_labels, s)!r} shows ranks {ranks.tolist()}, missing rank "
            f"{missing}"
        )


def position_weights(log: FeedLog, discount: Discount | None) -> np.ndarray:
    """``α_k`` of every row: the discount at the logged rank, or 1 without a discount."""
    if discount is None:
        return np.ones(log.n_rows)
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model or None, got {type(discount).__name__}")
    return discount(log.rank)


def _prefix(conditional: np.ndarray, log: FeedLog) -> np.ndarray:
    """Products of per-row conditionals down each session (rows are in rank order)."""
    out = np.array(conditional, dtype=np.float64)
    # One step per rank rather than per session: sessions are many, ranks few.
    depth = np.arange(log.n_rows) - log.indptr[log.session]
    for j in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == j)
        out[rows] *= out[rows - 1]
    return out


def ranking_probabilities(policy, log: FeedLog, kind: str, role: str) -> np.ndarray:
    """Per-row probability of a policy, or of the log's columns when ``policy`` is None.

    Parameters
    ----------
    policy : object or None
        A policy with ``position_probabilities(log)`` and ``conditional_probabilities(log)``
        (:mod:`.policies`); None reads the log's ``position_propensity`` or
        ``prefix_propensity`` / ``logging_weight`` columns (logging policy only).
    log : FeedLog
    kind : {"position", "prefix", "ranking"}
        ``π(a_k at k | x)``, ``π(a_1:k | x)``, or the session's ``π(a_1:K | x)`` on each row.
    role : str
        ``"target"`` or ``"logging"``, for messages.

    Returns
    -------
    numpy.ndarray, shape (n_rows,)

    Examples
    --------
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
    >>> log = FeedLog.from_arrays([0, 0], [3, 1], [1, 2], [1, 0])
    >>> ranking_probabilities(PlackettLuceRanker.uniform(4), log, "prefix", "target").tolist()
    [0.25, 0.08333333333333333]
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if policy is None:
        values = _columns(log, kind)
    elif kind == "position":
        values = _policy_call(policy, "position_probabilities", log, role)
    else:
        values = _prefix(_policy_call(policy, "conditional_probabilities", log, role), log)
    if kind == "ranking":
        values = values[log.indptr[1:] - 1][log.session]
    return values


def _policy_call(policy, method: str, log: FeedLog, role: str) -> np.ndarray:
    if not hasattr(policy, method):
        raise TypeError(
            f"{role} must be a policy with {method}(log) (LoggedRanking, DeterministicRanker, "
            f"PlackettLuceRanker), got {type(policy).__name__}"
        )
    return np.asarray(getattr(policy, method)(log), dtype=np.float64)


def _columns(log: FeedLog, kind: str) -> np.ndarray:
    """The logging probabilities the log's columns give."""
    if kind == "position":
        if log.position_propensity is None:
            raise ValueError(
                "the log has no position_propensity column (π0 of each item at its rank); "
                "pass logging=, the logging policy"
            )
        return log.position_propensity
    if log.prefix_propensity is not None:
        return log.prefix_propensity
    if log.logging_weight is not None:
        # Plackett–Luce weights normalised over the candidates: the mass left before rank k
        # is 1 minus the weights drawn above it.
        w = log.logging_weight
        return _prefix(np.minimum(w / np.maximum(1.0 - log.above(w), w), 1.0), log)
    raise ValueError(
        "the log has neither a prefix_propensity nor a logging_weight column (π0 of each "
        "ranking prefix); pass logging=, the logging policy"
    )


def _check_agreement(log: FeedLog, kind: str, pi0: np.ndarray, rows: np.ndarray) -> None:
    """Warn when a logging policy passed as ``logging=`` disagrees with the log's own column
    of the same probabilities: one of them is wrong, and ``logging=`` is what is used."""
    try:
        column = _columns(log, kind)
    except ValueError:  # the log has no such column: nothing to compare
        return
    if kind == "ranking":
        column = column[log.indptr[1:] - 1][log.session]
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.where(rows, np.abs(pi0 / column - 1.0), 0.0)
    k = int(np.argmax(gap))
    if gap[k] > 1e-6:
        where = "" if kind == "ranking" else f" at rank {log.rank[k]}"
        warnings.warn(
            f"logging= gives the {_WHAT[kind]}{where} of session {log.session_label(k)!r} "
            f"probability {pi0[k]:.6g}, the log's own column "
            f"{column[k]:.6g}: the estimate uses logging=; check which of the two describes "
            "the logging policy",
            UserWarning,
            stacklevel=5,
        )


def ranking_weights(
    log: FeedLog, target, logging, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Validated per-row ``(π, π0)`` of each row's ``kind`` (``kinds`` indexes :data:`KINDS`).

    Raises
    ------
    ValueError
        Naming the session and rank of a logging probability outside (0, 1] or a target
        probability outside [0, 1].

    Examples
    --------
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
    >>> log = FeedLog.from_arrays([0, 0], [3, 1], [1, 2], [1, 0])
    >>> uniform = PlackettLuceRanker.uniform(4)
    >>> pi, pi0 = ranking_weights(log, uniform, uniform, np.array([1, 2]))  # prefix, ranking
    >>> pi0.tolist()
    [0.25, 0.08333333333333333]
    """
    pi0, pi = np.empty(log.n_rows), np.empty(log.n_rows)
    for k in np.unique(kinds):
        rows = kinds == k
        pi0[rows] = ranking_probabilities(logging, log, KINDS[k], "logging")[rows]
        pi[rows] = ranking_probabilities(target, log, KINDS[k], "target")[rows]
        if logging is not None:
            _check_agreement(log, KINDS[k], pi0, rows)
    bad = np.flatnonzero(~(pi0 > 0) | ~(pi0 <= 1))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"the logging probability of the {_WHAT[KINDS[kinds[k]]]} at rank {log.rank[k]} of "
            f"session {log.session_label(k)!r} is {pi0[k]}, outside (0, 1]: the log shows it, "
            "so the logging policy gave it a positive probability"
        )
    bad = np.flatnonzero(~(pi >= 0) | ~(pi <= 1 + 1e-12))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"the target probability of the {_WHAT[KINDS[kinds[k]]]} at rank {log.rank[k]} of "
            f"session {log.session_label(k)!r} is {pi[k]}, outside [0, 1]"
        )
    return pi, pi0


def _check_length(log: FeedLog, target, sessions: np.ndarray, estimator: str) -> None:
    """Refuse whole-ranking weights where the target ranks fewer items than a session shows:
    it gives every such logged ranking probability 0, so the estimate would count those
    sessions' rewards as 0 instead of estimating the target's shorter ranking."""
    length = np.diff(log.indptr)
    ranked = target.n_ranked(log, int(length[sessions].max()))
    short = sessions[ranked[sessions] < length[sessions]]
    if short.size:
        s = short[0]
        raise ValueError(
            f"{estimator}: the target ranks {ranked[s]} item(s) in the context of session "
            f"{_label(log.session_labels, s)!r}, which shows {length[s]}, so it gives every "
            f"such logged ranking probability 0; give the target at least {length[s]} "
            "candidates per context, or use cascade_ips or independent_ips, which weight only "
            "the ranks it fills"
        )


def _ranking_ips(
    log: FeedLog,
    target,
    *,
    kind: str | np.ndarray,
    name: str,
    discount: Discount | None,
    logging,
    clip,
    ess_threshold: float,
) -> LoggedEstimate:
    """The estimators of the module docstring: one weight per row of ``kind``, one of
    :data:`KINDS` for every row or an array of their indices, one per row (adaptive IPS)."""
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    auto = check_clip(clip, allow_auto=True) == "auto"
    ess_threshold = check_ess_threshold(ess_threshold)
    kinds = np.full(log.n_rows, KINDS.index(kind)) if isinstance(kind, str) else kind
    estimator = name.split(" (")[0].lower().replace(" ", "_")
    if (kinds != KINDS.index("position")).any():
        check_whole_rankings(log, estimator)
    whole = np.unique(log.session[kinds == KINDS.index("ranking")])
    if whole.size and hasattr(target, "n_ranked"):
        _check_length(log, target, whole, estimator)
    alpha = position_weights(log, discount)
    pi, pi0 = ranking_weights(log, target, logging, kinds)
    raw = 1.0 / pi0
    gain = alpha * log.reward
    # The propensity unit of each row: the row itself, or the session's last row, whose
    # probability is the whole ranking's.
    last = log.indptr[1:][log.session] - 1
    unit = np.where(kinds == KINDS.index("ranking"), last, np.arange(log.n_rows))
    evaluated = (gain > 0) & (pi > 0)
    sessions = np.arange(log.n_sessions)
    # Diagnosed units: evaluated rows, or with one weight per session the sessions with one.
    diagnosed = np.unique(unit[evaluated])

    def estimate(m: float | None) -> LoggedEstimate:
        inverse = clip_weights(raw, m)
        contributions = pi * inverse * gain
        terms = np.bincount(log.session, weights=contributions, minlength=log.n_sessions)
        shares = np.bincount(unit, weights=contributions, minlength=log.n_rows)[diagnosed]
        label = ("" if discount is None else discount.label) + ("" if m is None else f" (m={m:g})")
        return LoggedEstimate(
            name=f"{name}{label}",
            terms=terms,
            exponents=(1,),
            user_ids=sessions,
            n_excluded_users=0,
            diagnostics=WeightDiagnostics.from_contributions(
                raw[diagnosed],
                inverse[diagnosed],
                shares,
                ess_threshold,
                users=log.session[diagnosed],
            ),
            weighting=Weighting(
                raw=raw,
                clip=check_clip(m),
                units="row",
                base=np.zeros(log.n_sessions),
                numerator=Linear(log.session[evaluated], unit[evaluated], (pi * gain)[evaluated]),
            ),
        )

    return clipped_estimate(
        estimate,
        "auto" if auto else clip,
        raw[evaluated],
        needs="rewarded rows to select the clipping from; the log has none",
        unit="sessions",
        stacklevel=2,
    )


_WHAT = {"position": "item", "prefix": "ranking prefix", "ranking": "whole ranking"}


def standard_ips(
    log: FeedLog,
    target,
    *,
    discount: Discount | None = None,
    logging=None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Standard IPS: every reward weighted by the whole ranking's probability ratio
    (Kiyohara et al., WSDM 2022, Eq. 3). Unbiased under any click model.

    Parameters
    ----------
    log : FeedLog
        Sessions that each show whole rankings (ranks 1..K).
    target : policy
        :class:`~recpack_ope.logged.policies.DeterministicRanker`,
        :class:`~recpack_ope.logged.policies.PlackettLuceRanker` or any object with
        ``conditional_probabilities(log)``.
    discount : Discount, optional
        Position weights ``α_k`` of the value (``LogDiscount(cutoff=K)`` for DCG); default
        1 at every rank, the expected total reward per session.
    logging : policy, optional
        Where ``π0`` comes from; default the log's ``prefix_propensity`` column, or its
        ``logging_weight`` column (Plackett–Luce).
    clip : float, "auto" or None
        m of ``min(m, 1/π0)``; None for none; ``"auto"`` selects it by SLOPE.
    ess_threshold : float
        Share of the evaluated sessions below which the Kish ESS raises a ReliabilityWarning.

    Returns
    -------
    LoggedEstimate
        Per-session values, intervals, paired comparisons, diagnostics and sensitivity
        bounds (one propensity per session).

    Raises
    ------
    ValueError
        For sessions without whole rankings, logging probabilities outside (0, 1] or target
        probabilities outside [0, 1] (naming the session and rank), or missing propensities.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker, DeterministicRanker
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 1, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> target = DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))
    >>> standard_ips(log, target, logging=PlackettLuceRanker.uniform(2)).value
    1.0
    """
    return _ranking_ips(
        log,
        target,
        kind="ranking",
        name="standard IPS",
        discount=discount,
        logging=logging,
        clip=clip,
        ess_threshold=ess_threshold,
    )


def cascade_ips(
    log: FeedLog,
    target,
    *,
    discount: Discount | None = None,
    logging=None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Cascade (reward-interaction) IPS: the reward at rank k weighted by the probability
    ratio of the prefix down to k (McInerney et al., KDD 2020, Eq. 7; Kiyohara et al.,
    WSDM 2022, Eq. 5). Unbiased when rewards depend only on the items at or above their rank.

    Parameters and result as :func:`standard_ips` (sensitivity bounds: one propensity per
    row, the prefix's).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker, DeterministicRanker
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 1, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> target = DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))
    >>> cascade_ips(log, target, logging=PlackettLuceRanker.uniform(2)).value
    1.0
    """
    return _ranking_ips(
        log,
        target,
        kind="prefix",
        name="cascade IPS",
        discount=discount,
        logging=logging,
        clip=clip,
        ess_threshold=ess_threshold,
    )


def independent_ips(
    log: FeedLog,
    target,
    *,
    discount: Discount | None = None,
    logging=None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Independent IPS: the reward at rank k weighted by the ratio of the probabilities of
    its item at k (Li et al., WSDM 2018, §4.2; Kiyohara et al., WSDM 2022, Eq. 4). Unbiased
    when the reward at rank k depends only on that item and k. Sessions need not hold whole
    rankings: a log of single impressions with their rank works.

    Parameters and result as :func:`standard_ips`, except that ``logging`` defaults to the
    log's ``position_propensity`` column and ``target`` needs
    ``position_probabilities(log)``.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, DeterministicRanker
    >>> log = FeedLog.from_arrays([0, 1], [0, 1], [1, 1], [1, 1], position_propensity=[0.5, 0.5])
    >>> independent_ips(log, DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))).value
    1.0
    """
    return _ranking_ips(
        log,
        target,
        kind="position",
        name="independent IPS",
        discount=discount,
        logging=logging,
        clip=clip,
        ess_threshold=ess_threshold,
    )
