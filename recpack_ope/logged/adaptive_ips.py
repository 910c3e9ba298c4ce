"""Adaptive IPS: importance weights that follow each session's user behaviour.

Kiyohara et al. (KDD 2023, "Off-Policy Evaluation of Ranking Policies under Diverse User
Behavior", §3) let every session carry a user behaviour ``c``: the reward at rank k depends on
the items at the ranks ``Φ_k(c)`` and on nothing else shown. Adaptive IPS (AIPS) weights it by
the ratio of the probabilities of exactly those items,

    V̂_AIPS = (1/n) Σ_s Σ_k α_k r_sk · π(a_{Φ_k(c_s)} | x_s) / π0(a_{Φ_k(c_s)} | x_s),

unbiased when ``Φ_k(c_s)`` holds every rank the reward depends on (a superset too, with more
variance), and of least variance among the unbiased IPS weightings when it is exactly the
true set (§3). Three behaviours are implemented, those whose probabilities the policies of
:mod:`.policies` give exactly:

* ``"independent"``: ``Φ_k = {k}``, the item at k (position-based model; independent IPS);
* ``"cascade"``: ``Φ_k = {1, …, k}``, the prefix down to k (cascade IPS);
* ``"standard"``: ``Φ_k = {1, …, K}``, the whole ranking (standard IPS, unbiased always).

A single behaviour for every session gives :func:`~.ranking_ips.independent_ips`,
:func:`~.ranking_ips.cascade_ips` or :func:`~.ranking_ips.standard_ips`; a behaviour per
session mixes their weights row by row (:func:`~.ranking_ips.ranking_weights`).

**Data-driven behaviour** (``behavior="auto"``, Kiyohara et al. §4). The true behaviour is
unknown, and the one that minimises the error is not always the true one: a smaller ``Φ``
than the truth adds bias but may remove more variance. The paper chooses the behaviour model
``ĉ`` that minimises the estimated mean squared error of AIPS,
``ĉ = argmin_c  Biaŝ(V̂_AIPS(c))² + Var̂(V̂_AIPS(c))``, the bias estimated against an estimator
that is unbiased whatever the behaviour (standard IPS, ``Φ_k = {1..K}``) and the variance from
the per-session terms. Here the behaviour is chosen per group of contexts (``groups=``): for
group g with per-session terms ``t_s(c) = 1[s ∈ g] Σ_k α_k r_sk w_sk(c)``,

    Biaŝ_g(c)  = mean_s (t_s(c) − t_s(standard)),
    Biaŝ²_g(c) = max(0, Biaŝ_g(c)² − var_s(t_s(c) − t_s(standard)) / n),
    Var̂_g(c)   = var_s(t_s(c)) / n,

and the group takes the behaviour of least ``Biaŝ²_g + Var̂_g`` (the smaller ``Φ`` on ties).
The variance of the difference is subtracted because the squared difference overstates the
squared bias by exactly that in expectation, which would penalise every behaviour but the
standard one for noise alone.

**Cross-fitting** (``n_folds``, default 2; Chernozhukov et al., Econometrics Journal 2018,
§3). Chosen on the sessions it then weights, the behaviour is not independent of their
rewards: the behaviour of least estimated variance tends to be the one whose weighted sum
came out small on this log, so the choice selects low estimates and the estimate is biased
downwards even when every behaviour is unbiased. The sessions are therefore split at random
(seeded) into ``n_folds`` folds of near-equal size; each group's behaviour is chosen, as
above, on the sessions of the other folds and applied to the sessions of this one. Every
session's term then uses a behaviour chosen without it, so it keeps the expectation of that
behaviour's term, and the per-session terms (intervals, ``compare``) are those of
:func:`~.ranking_ips.ranking_weights` with the chosen kinds. ``n_folds=1`` chooses on every
session and applies the choice to them all, the paper's §4 as written.

Not implemented, and why:

* **Arbitrary sets ``Φ_k(c)``** (the paper's general behaviour, any adjacency of ranks): the
  probability that a Plackett–Luce policy puts given items at an arbitrary set of ranks sums
  over every filling of the ranks between them, which no closed form gives; position, prefix
  and whole ranking are exact (:func:`~.ranking_ips.ranking_probabilities`).
* **The tree partition of the context space** (the paper's §4 search over splits of context
  features): a :class:`~.feed_log.FeedLog` carries context ids, not features, so the partition
  is the caller's ``groups``; the behaviour of each group is then chosen as above. Groups are
  chosen independently, so bias that cancels across groups is not credited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_seed
from ..inference.diagnostics import ESS_RATIO_THRESHOLD
from ..inference.result import LoggedEstimate
from ..propensity.discount import Discount
from .feed_log import FeedLog
from .ranking_ips import (
    KINDS,
    _ranking_ips,
    check_whole_rankings,
    position_weights,
    ranking_weights,
)

__all__ = ["BEHAVIORS", "BehaviorSelection", "select_behavior", "session_folds", "adaptive_ips"]

#: The user behaviours, from the smallest ``Φ_k`` to the largest, and the kind of probability
#: (:data:`~.ranking_ips.KINDS`) each weights by.
BEHAVIORS = ("independent", "cascade", "standard")
_KIND = dict(zip(BEHAVIORS, KINDS, strict=True))
AUTO = "auto"


@dataclass(frozen=True, eq=False)
class BehaviorSelection:
    """The data-driven choice of user behaviour per group of contexts (Kiyohara et al. §4).

    Attributes
    ----------
    groups : numpy.ndarray
        The distinct group labels, sorted.
    behaviors : tuple of str
        The behaviour chosen for each group.
    bias_squared, variance : numpy.ndarray, shape (n_groups, 3)
        Estimated squared bias and variance of each group's contribution to the value under
        each behaviour of :data:`BEHAVIORS` (module docstring).
    session_group : numpy.ndarray
        Position in ``groups`` of every session's group.
    """

    groups: np.ndarray
    behaviors: tuple[str, ...]
    bias_squared: np.ndarray
    variance: np.ndarray
    session_group: np.ndarray

    @property
    def mse(self) -> np.ndarray:
        """Estimated mean squared error, ``bias_squared + variance``, shape (n_groups, 3)."""
        return self.bias_squared + self.variance

    @property
    def session_behavior(self) -> np.ndarray:
        """The behaviour chosen for every session."""
        return np.asarray(self.behaviors, dtype=object)[self.session_group]

    @property
    def counts(self) -> str:
        """How many groups took each behaviour, e.g. ``"2 independent, 1 standard"``."""
        return ", ".join(f"{self.behaviors.count(b)} {b}" for b in BEHAVIORS if b in self.behaviors)

    def summary(self) -> str:
        """One line: how many groups took each behaviour."""
        return f"behaviour chosen by estimated MSE in {len(self.groups)} group(s): {self.counts}"


def _session_groups(log: FeedLog, groups) -> tuple[np.ndarray, np.ndarray]:
    """(distinct labels, position of every session's label) of a per-session or per-context
    ``groups`` array; None is one group."""
    if groups is None:
        return np.zeros(1, dtype=np.int64), np.zeros(log.n_sessions, dtype=np.int64)
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.size not in (log.n_sessions, log.n_contexts):
        raise ValueError(
            f"groups must be a 1-D array with one label per session ({log.n_sessions}) or per "
            f"context ({log.n_contexts}), got shape {groups.shape}"
        )
    if groups.size != log.n_sessions:
        groups = groups[log.session_context]
    labels, position = np.unique(groups, return_inverse=True)
    return labels, position.reshape(-1)


def _session_terms(log, target, discount, logging, behavior: str) -> np.ndarray:
    """Per-session ``Σ_k α_k r_k w_k`` with every session weighted as ``behavior``, unclipped."""
    kinds = np.full(log.n_rows, KINDS.index(_KIND[behavior]))
    pi, pi0 = ranking_weights(log, target, logging, kinds)
    gain = position_weights(log, discount) * log.reward
    return np.bincount(log.session, weights=pi / pi0 * gain, minlength=log.n_sessions)


def _behavior_terms(log: FeedLog, target, discount, logging) -> np.ndarray:
    """Per-session terms under every behaviour of :data:`BEHAVIORS`, shape (3, n_sessions)."""
    check_whole_rankings(log, "select_behavior")
    return np.stack([_session_terms(log, target, discount, logging, b) for b in BEHAVIORS])


def _select(
    terms: np.ndarray, labels: np.ndarray, position: np.ndarray, chosen_on: np.ndarray
) -> BehaviorSelection:
    """Each group's behaviour by the estimated MSE of the module docstring, computed on the
    sessions where ``chosen_on`` is True; a group without any of them takes the standard
    behaviour, unbiased whatever the truth."""
    terms, on = terms[:, chosen_on], position[chosen_on]
    n = on.size
    member = on[None, :] == np.arange(labels.size)[:, None]  # (groups, sessions)
    bias_squared = np.zeros((labels.size, len(BEHAVIORS)))
    variance = np.zeros((labels.size, len(BEHAVIORS)))
    ddof = 1 if n > 1 else 0
    for j in range(len(BEHAVIORS)):
        own = member * terms[j]
        gap = member * (terms[j] - terms[-1])
        variance[:, j] = own.var(axis=1, ddof=ddof) / n
        bias_squared[:, j] = np.maximum(0.0, gap.mean(axis=1) ** 2 - gap.var(axis=1, ddof=ddof) / n)
    chosen = np.argmin(bias_squared + variance, axis=1)
    chosen[~member.any(axis=1)] = len(BEHAVIORS) - 1
    return BehaviorSelection(
        groups=labels,
        behaviors=tuple(BEHAVIORS[j] for j in chosen),
        bias_squared=bias_squared,
        variance=variance,
        session_group=position,
    )


def session_folds(
    n_sessions: int, n_folds: int = 2, seed: int | np.random.Generator | None = 0
) -> np.ndarray:
    """A seeded random split of ``n_sessions`` sessions into ``n_folds`` folds whose sizes
    differ by at most one: the fold of every session.

    Parameters
    ----------
    n_sessions, n_folds : int
        At least 1 each, and ``n_folds <= n_sessions``.
    seed : int, numpy.random.Generator or None
        Seed of the split (None: unseeded).

    Returns
    -------
    numpy.ndarray of int, shape (n_sessions,)

    Raises
    ------
    ValueError
        For a non-positive count, more folds than sessions, or a bad seed.

    Examples
    --------
    >>> np.bincount(session_folds(7, 2, seed=3)).tolist()
    [4, 3]
    """
    n_sessions = check_positive_int(n_sessions, "n_sessions")
    if check_positive_int(n_folds, "n_folds") > n_sessions:
        raise ValueError(f"n_folds={n_folds} exceeds the number of sessions ({n_sessions})")
    return np.random.default_rng(check_seed(seed)).permutation(n_sessions) % n_folds


def select_behavior(
    log: FeedLog,
    target,
    *,
    groups=None,
    discount: Discount | None = None,
    logging=None,
    sessions=None,
) -> BehaviorSelection:
    """Choose each group's user behaviour by the estimated MSE of adaptive IPS (Kiyohara
    et al., KDD 2023, §4; the estimates of the module docstring).

    Parameters
    ----------
    log : FeedLog
        Sessions that each show whole rankings (ranks 1..K).
    target : policy
        As for :func:`~.ranking_ips.standard_ips`, with ``position_probabilities(log)`` too.
    groups : array_like, optional
        A group label per session, or per context (then read at each session's context; an
        array as long as both is read per session). Default: one group.
    discount : Discount, optional
        Position weights ``α_k`` of the value; default 1 at every rank.
    logging : policy, optional
        Where ``π0`` comes from; default the log's columns (``position_propensity`` for the
        independent behaviour, ``prefix_propensity`` or ``logging_weight`` for the others).
    sessions : array_like of bool, optional
        The sessions to choose on (a mask, one entry per session); default all. The chosen
        behaviours apply to every session of their group (``session_behavior``).

    Returns
    -------
    BehaviorSelection

    Raises
    ------
    ValueError
        For ``groups`` of the wrong shape, sessions without whole rankings, or missing or
        invalid probabilities (as the IPS estimators), or ``sessions`` of the wrong shape
        or selecting none.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 1, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> uniform = PlackettLuceRanker.uniform(2)
    >>> select_behavior(log, uniform, logging=uniform).behaviors
    ('independent',)
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    labels, position = _session_groups(log, groups)
    if sessions is None:
        chosen_on = np.ones(log.n_sessions, dtype=bool)
    else:
        chosen_on = np.asarray(sessions)
        if chosen_on.dtype != bool or chosen_on.shape != (log.n_sessions,) or not chosen_on.any():
            raise ValueError(
                f"sessions must be a boolean mask with one entry per session ({log.n_sessions}) "
                f"and at least one True, got {chosen_on.dtype} of shape {chosen_on.shape}"
            )
    terms = _behavior_terms(log, target, discount, logging)
    return _select(terms, labels, position, chosen_on)


def _session_behaviors(log: FeedLog, behavior) -> np.ndarray:
    """Index in :data:`BEHAVIORS` of every session's behaviour."""
    if isinstance(behavior, str):
        if behavior not in BEHAVIORS:
            raise ValueError(
                f"behavior must be one of {BEHAVIORS}, {AUTO!r} or one of them per session, "
                f"got {behavior!r}"
            )
        return np.full(log.n_sessions, BEHAVIORS.index(behavior))
    values = np.asarray(behavior, dtype=object)
    if values.shape != (log.n_sessions,):
        raise ValueError(
            f"behavior must be a behaviour name or one per session ({log.n_sessions}), got an "
            f"array of shape {values.shape}"
        )
    unknown = [v for v in values if not (isinstance(v, str) and v in BEHAVIORS)]
    if unknown:
        raise ValueError(f"behavior holds {unknown[0]!r}, not one of {BEHAVIORS}")
    return np.array([BEHAVIORS.index(v) for v in values], dtype=np.int64)


def adaptive_ips(
    log: FeedLog,
    target,
    *,
    behavior="auto",
    groups=None,
    n_folds: int = 2,
    seed: int | np.random.Generator | None = 0,
    discount: Discount | None = None,
    logging=None,
    clip: float | str | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> LoggedEstimate:
    """Adaptive IPS (Kiyohara et al., KDD 2023, §3): the reward at rank k weighted by the
    probability ratio of the items at the ranks ``Φ_k(c)`` that the session's user behaviour
    ``c`` makes it depend on (module docstring).

    Parameters
    ----------
    log : FeedLog
        Sessions that each show whole rankings (ranks 1..K).
    target : policy
        As for :func:`~.ranking_ips.standard_ips`; with ``position_probabilities(log)`` when
        a session is ``"independent"``.
    behavior : str or array_like of str
        ``"independent"``, ``"cascade"`` or ``"standard"`` for every session, one of them per
        session, or ``"auto"`` (default): each group's behaviour chosen by the estimated MSE
        (:func:`select_behavior`, §4 of the paper), cross-fitted over ``n_folds`` folds.
    groups : array_like, optional
        With ``behavior="auto"``, the groups of contexts (per session or per context) that each
        get one behaviour; default one group.
    n_folds : int
        With ``behavior="auto"``: the sessions of each fold are weighted with the behaviours
        chosen on the other folds (module docstring); 1 chooses on every session and weights
        them all with that choice. At most the number of sessions.
    seed : int, numpy.random.Generator or None
        With ``behavior="auto"``: seed of the random split into folds
        (:func:`session_folds`).
    discount : Discount, optional
        Position weights ``α_k`` of the value; default 1 at every rank.
    logging : policy, optional
        Where ``π0`` comes from; default the log's columns, as :func:`select_behavior`.
    clip : float, "auto" or None
        m of ``min(m, 1/π0)``; None for none; ``"auto"`` selects it by SLOPE. The behaviour is
        chosen on unclipped weights.
    ess_threshold : float
        Share of the evaluated units below which the Kish ESS raises a ReliabilityWarning.

    Returns
    -------
    LoggedEstimate
        Named after the behaviours used; per-session terms, intervals, diagnostics and
        sensitivity bounds (one propensity per row, or per session where the whole ranking
        is weighted).

    Raises
    ------
    ValueError
        For an unknown behaviour, ``groups`` without ``behavior="auto"`` or of the wrong
        shape, ``n_folds`` not in 1..n_sessions, a bad ``seed``, sessions without whole
        rankings, or missing or invalid probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker, DeterministicRanker
    >>> log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 1, 0], [1, 2, 1, 2], [1, 0, 0, 1])
    >>> target = DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))
    >>> uniform = PlackettLuceRanker.uniform(2)
    >>> adaptive_ips(log, target, behavior=["cascade", "standard"], logging=uniform).value
    1.0
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    if isinstance(behavior, str) and behavior == AUTO:
        folds = session_folds(log.n_sessions, n_folds, seed)
        labels, position = _session_groups(log, groups)
        terms = _behavior_terms(log, target, discount, logging)
        per_session = np.empty(log.n_sessions, dtype=np.int64)
        chosen = []
        for fold in range(n_folds):
            held = folds == fold
            # With one fold the choice is made on the sessions it weights (no cross-fitting).
            selection = _select(terms, labels, position, ~held if n_folds > 1 else held)
            per_session[held] = _session_behaviors(log, selection.session_behavior)[held]
            chosen += selection.behaviors
        counts = ", ".join(f"{chosen.count(b)} {b}" for b in BEHAVIORS if b in chosen)
        label = f"auto: {counts}" if n_folds == 1 else f"auto, {n_folds} folds: {counts}"
    else:
        if groups is not None:
            raise ValueError(f'groups is only used with behavior="auto", got behavior={behavior!r}')
        per_session = _session_behaviors(log, behavior)
        used = [b for j, b in enumerate(BEHAVIORS) if (per_session == j).any()]
        label = ", ".join(used)
    kinds = np.array([KINDS.index(_KIND[b]) for b in BEHAVIORS])[per_session][log.session]
    return _ranking_ips(
        log,
        target,
        kind=kinds,
        name=f"adaptive IPS ({label})",
        discount=discount,
        logging=logging,
        clip=clip,
        ess_threshold=ess_threshold,
    )
