"""A seeded closed-loop world in which the online reward of any ranking is known exactly.

Jeunen et al. (KDD'24) validate unbiased DCG against a platform's A/B tests and name
simulation as the open alternative (§6). This module is that simulation, built to satisfy
their assumptions exactly:

* **Relevance** ``P(Q=1 | u, i) = σ(b + s_pref · ⟨U_u, V_i⟩ + s_pop · log π_i)``: low-rank
  preferences plus a power-law (Zipf) item popularity ``π_i = rank_i^(−a)``.
* **Logging policy** (:class:`PopularityPolicy`, :class:`UniformPolicy`): each feed is a
  Plackett–Luce ranking of ``feed_length`` items over the popularity-biased score
  ``log π_i / temperature``, or a uniformly random one (open loop).
* **Views** follow the position-based model ``P(V=1 | R=r) = δ(r)`` of any discount of the core
  (Asm. 2) and **clicks** ``C = Q · V`` (examination hypothesis, Asm. 4), independently across
  users and ranks (Asm. 1 and 3). Every item has positive exposure (full support, Asm. 5).
* The logging exposure ``ε0(i) = Σ_r P(rank_i = r) δ(r)`` (Eq. 8) is computed exactly
  (:func:`recpack_ope.logged.plackett_luce.exposure`); it does not depend on the user because the
  logging score does not.
* :meth:`SimulatedWorld.online_reward` is the exact expected clicks per user of a target
  ranking, ``Σ_r P(Q=1 | u, a_r) δ(r)`` (Eq. 5 without sampling), the ground truth that
  offline estimates are compared with; :meth:`SimulatedWorld.expected_clicks` gives the click
  probability at every rank of given rankings under each click model below.

Two options build worlds that break these assumptions on purpose, to study how estimators
fail (the defaults keep the world above):

* ``SimulatedWorld(click_model="cascade")``: single-click cascade (Craswell et al., WSDM'08)
  with the position-based model's patience. The user examines rank 1 with probability
  ``δ(1)`` and, after examining rank r without clicking, rank r + 1 with probability
  ``δ(r+1)/δ(r)``; an examined item is clicked with ``P(Q=1 | u, i)``, and the first click
  ends the feed. Without clicks examination is ``δ(r)`` as before, but a click above stops it,
  so views depend on the items ranked higher (breaks Asm. 2) and clicks are dependent across
  ranks (breaks Asm. 3). The logged propensity stays the position-based ``ε0`` a practitioner
  would assume, which is no longer the probability of examination.
* ``SimulatedWorld(click_model="choice")``: multinomial-logit choice over the feed
  (McFadden 1974) with position visibilities, as in the MNL with position bias of Abeliuk
  et al. (4OR 2016, §2). The user clicks at most one item, rank k with probability ::

      P(C_k = 1) = δ(k) · v_k / (1 + Σ_j δ(j) · v_j),   v = P(Q=1 | u, i) / (1 − P(Q=1 | u, i)),

  the sum over every rank shown and 1 the weight of leaving without a click. ``v`` is the odds
  of relevance, so an item shown alone and seen for sure (δ = 1) is clicked with probability
  ``P(Q=1 | u, i)``, as under the other two models. Items compete for the one click, those
  below a rank as much as those above, so the click at rank k depends on every item shown
  (breaks Asm. 2 and 3, and the cascade's assumption that only the items above matter).
* :class:`PersonalisedPolicy`: users fall into segments and each segment logs with a
  Plackett–Luce policy over ``log π_i + λ · ⟨c_s, V_i⟩`` (``c_s`` the segment's mean user
  factor), so exposure correlates with relevance. The exact exposure ``ε0(s, i)`` is per
  segment; an item-only propensity (one value per item, like every popularity-based model) is
  misspecified and IPS with it is biased.
* :class:`AffinityPolicy`: two-stage logging (affinity-driven retrieval, then ranking) on a
  noisy copy of the user factors. The exact exposure ``ε0(u, i)`` is per user and follows the
  latent user–item affinity that relevance shares, so it correlates with relevance item by
  item and user by user; it is heavy-tailed (items far from a user's noisy taste are almost
  never shown), and no item-only propensity is right for it.

Nothing is stored densely over users × items: relevance is computed from the factors for the
(user, item) pairs needed, so worlds of 100k users × 20k items fit in a few GiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import as_csr, check_finite_number, check_positive_int
from ..inference.result import EstimateResult
from ..logged.feed_log import FeedLog
from ..logged.plackett_luce import exposure, sample_rankings
from ..metrics.ranking import ScoreSource
from ..propensity.discount import Discount, LogDiscount

if TYPE_CHECKING:
    from ..propensity.models import FixedPropensity

__all__ = [
    "SimulatedWorld",
    "PopularityPolicy",
    "UniformPolicy",
    "PersonalisedPolicy",
    "AffinityPolicy",
    "LoggedFeedback",
    "WorldRelevance",
]

CLICK_MODELS = ("pbm", "cascade", "choice")
# Worlds whose factors, and logs whose rows, would take more memory than this are refused.
MAX_BYTES = 8 * 2**30
# Memory of one logged row: its user, feed, item, rank, propensity and click, and temporaries.
_BYTES_PER_ROW = 64
# Spawn key of the random stream that segments users; distinct from the world's and the logs'
# streams, so segmenting does not change the factors or any log of a world.
_SEGMENT_STREAM = 0x5E6
# Spawn key of the random stream of an AffinityPolicy's noisy copy of the user factors.
_NOISE_STREAM = 0xAFF


@dataclass(frozen=True)
class PopularityPolicy:
    """Stochastic logging: Plackett–Luce over the popularity-biased score ``log π_i / τ``.

    Parameters
    ----------
    temperature : float
        τ > 0. Small τ concentrates feeds on the most popular items (strong exposure bias),
        large τ approaches uniformly random feeds.
    """

    temperature: float = 1.0

    def __post_init__(self) -> None:
        check_finite_number(self.temperature, "temperature", above=0)

    def weights(self, world: SimulatedWorld) -> np.ndarray:
        """Plackett–Luce weights ``π_i^(1/τ)`` of the world's items (0 where they underflow)."""
        return np.exp(self._log_weights(world))

    def _log_weights(self, world: SimulatedWorld) -> np.ndarray:
        return _finite_log_weights(np.log(world.popularity) / self.temperature, self.temperature)


@dataclass(frozen=True)
class UniformPolicy:
    """Open-loop logging: every feed is a uniformly random ordering of the catalogue."""

    def weights(self, world: SimulatedWorld) -> np.ndarray:
        """Equal Plackett–Luce weights."""
        return np.ones(world.n_items)

    def _log_weights(self, world: SimulatedWorld) -> np.ndarray:
        return np.zeros(world.n_items)


@dataclass(frozen=True)
class PersonalisedPolicy:
    """Segment-personalised logging: exposure that correlates with relevance.

    Users are split into ``n_segments`` segments: ``n_segments`` distinct users, drawn from a
    random stream of the world's seed, anchor the segments, and every user joins the segment
    of the anchor nearest in factor space (Euclidean; each anchor is nearest to itself, so no
    segment is empty). Segment s logs Plackett–Luce feeds with weights ::

        w_si ∝ exp((log π_i + λ · ⟨c_s, V_i⟩ + σ · z_si) / τ)

    where ``c_s`` is the mean factor of the segment's users, ``λ`` the personalisation and
    ``z_si ~ N(0, 1)`` fixed per world (editorial choices unrelated to relevance). With
    ``λ = σ = 0`` this is :class:`PopularityPolicy` in every segment.

    Parameters
    ----------
    temperature : float
        τ > 0, as in :class:`PopularityPolicy`.
    personalisation : float
        λ, how strongly a segment's feeds follow its taste (0 = popularity only).
    n_segments : int
        Number of segments S ≥ 1, at most the number of users. The exposure is computed
        exactly for every segment, so cost grows linearly in S (a hundred is cheap).
    noise : float
        σ ≥ 0, standard deviation of the per-(segment, item) perturbation of the score.
    """

    temperature: float = 1.0
    personalisation: float = 1.0
    n_segments: int = 20
    noise: float = 0.0

    def __post_init__(self) -> None:
        check_finite_number(self.temperature, "temperature", above=0)
        check_finite_number(self.personalisation, "personalisation")
        check_positive_int(self.n_segments, "n_segments")
        if check_finite_number(self.noise, "noise") < 0:
            raise ValueError(f"noise must be finite and >= 0, got {self.noise!r}")

    def segments(self, world: SimulatedWorld) -> np.ndarray:
        """Segment of every user of the world, shape (n_users,)."""
        return self._segmentation(world)[0]

    def weights(self, world: SimulatedWorld) -> np.ndarray:
        """Plackett–Luce weights of every segment, shape (n_segments, n_items), rows sum to 1."""
        return _normalised(self._segmentation(world)[1])

    def _log_weights(self, world: SimulatedWorld) -> np.ndarray:
        return self._segmentation(world)[1]

    def _segmentation(self, world: SimulatedWorld) -> tuple[np.ndarray, np.ndarray]:
        """(segment of every user, PL log-weights of every segment, each row's largest 0)."""
        if self.n_segments > world.n_users:
            raise ValueError(
                f"n_segments={self.n_segments} exceeds the number of users ({world.n_users})"
            )
        stream = np.random.SeedSequence(world.seed, spawn_key=(_SEGMENT_STREAM,))
        rng = np.random.default_rng(stream)
        factors = world.user_factors
        anchors = factors[rng.choice(world.n_users, self.n_segments, replace=False)]
        segment = np.empty(world.n_users, dtype=np.int64)
        step = rows_per_chunk(self.n_segments * world.n_factors)
        for start in range(0, world.n_users, step):
            part = factors[start : start + step]
            # Direct differences (not |u|² − 2u·c + |c|²): an anchor's distance to itself is
            # then exactly 0, which keeps every segment non-empty.
            distance = ((part[:, None, :] - anchors[None]) ** 2).sum(axis=2)
            segment[start : start + step] = distance.argmin(axis=1)
        members = sp.csr_matrix(
            (np.ones(world.n_users), (segment, np.arange(world.n_users))),
            shape=(self.n_segments, world.n_users),
        )
        centroids = (members @ factors) / np.asarray(members.sum(axis=1))
        scores = (
            np.log(world.popularity)
            + self.personalisation * (centroids @ world.item_factors.T)
            + self.noise * rng.standard_normal((self.n_segments, world.n_items))
        ) / self.temperature
        # Shift each row by its maximum: the same PL policy, and no overflow when exponentiated.
        return segment, _finite_log_weights(
            scores - scores.max(axis=1, keepdims=True), self.temperature
        )


@dataclass(frozen=True)
class AffinityPolicy:
    """Two-stage logging personalised on a noisy copy of the user factors: every user's
    exposure follows a latent user–item affinity.

    The logging system knows user u only through a noisy copy of the world's factors,
    ``Ũ_u = U_u + σ · ξ_u`` with ``ξ_u`` distributed like ``U_u`` (standard normal /
    √n_factors, drawn from a random stream of the world's seed), and scores every item by ::

        s_ui = (log π_i + λ · ⟨Ũ_u, V_i⟩) / τ.

    Each feed is made in two stages, as candidate generation and ranking are in practice:

    1. **Retrieval.** A Poisson(c) number of draws, with replacement, from the user's
       softmax ``p_ui = exp(s_ui) / Σ_j exp(s_uj)``. By Poisson thinning the items are then
       retrieved independently, item i with probability ``q_ui = 1 − exp(−c · p_ui)``.
    2. **Ranking.** The retrieved items in decreasing ``s_ui``; when fewer than the feed
       length were retrieved, the feed is filled with the best-scored other items.

    With the items in decreasing score, ``A_i`` of them above item i, and ``R↑_i``, ``R↓_i``
    the numbers of retrieved items above and below it (independent Poisson-binomial counts),
    a retrieved item lands at rank ``1 + R↑_i`` and a filler at ``A_i + 1 + R↓_i``, so the
    exact exposure of Eq. 8 (Jeunen et al., KDD'24) is ::

        ε0(u, i) = q_ui · E[δ(1 + R↑_i)] + (1 − q_ui) · E[δ(A_i + 1 + R↓_i)],

    with ``δ(r) = 0`` past the feed. Both expectations come from one pass over the items in
    score order that carries the count's distribution up to the feed length: O(n_items ·
    feed_length) per user (two passes: down the score order for ``R↑``, up it for ``R↓``).

    Every item can be retrieved with every other item left out, so every exposure is positive
    (full support; it underflows to 0 only at extreme temperatures). But the exposure of
    items far from the user's noisy taste is tiny, so IPS weights are heavy-tailed, and an
    item-only propensity is misspecified: exposure correlates with relevance through the
    factors they share.

    Parameters
    ----------
    temperature : float
        τ > 0, as in :class:`PopularityPolicy`.
    personalisation : float
        λ, how strongly the score follows the noisy affinity (0 = popularity only).
    noise : float
        σ ≥ 0, the noise of the logging system's copy of the user factors relative to their
        spread (0 = it knows the true factors).
    candidates : float
        c > 0, the expected number of retrieval draws per feed.

    Examples
    --------
    >>> world = SimulatedWorld(n_users=3, n_items=6, n_factors=2, seed=0)
    >>> log = world.log(AffinityPolicy(candidates=2.0), feed_length=2, seed=1)
    >>> log.exposure.shape  # one exposure per (user, item)
    (3, 6)
    >>> bool((log.exposure > 0).all())
    True
    """

    temperature: float = 1.0
    personalisation: float = 2.0
    noise: float = 1.0
    candidates: float = 100.0

    def __post_init__(self) -> None:
        check_finite_number(self.temperature, "temperature", above=0)
        check_finite_number(self.personalisation, "personalisation")
        check_finite_number(self.noise, "noise", minimum=0)
        check_finite_number(self.candidates, "candidates", above=0)

    def noisy_factors(self, world: SimulatedWorld) -> np.ndarray:
        """The logging system's copy of the user factors ``Ũ = U + σ · ξ``, (n_users,
        n_factors); a function of the world's seed only.

        Examples
        --------
        >>> world = SimulatedWorld(n_users=4, n_items=5, n_factors=2, seed=0)
        >>> np.array_equal(AffinityPolicy(noise=0.0).noisy_factors(world), world.user_factors)
        True
        """
        stream = np.random.SeedSequence(world.seed, spawn_key=(_NOISE_STREAM,))
        noise = np.random.default_rng(stream).standard_normal(world.user_factors.shape)
        return world.user_factors + self.noise * noise / np.sqrt(world.n_factors)

    def scores(self, world: SimulatedWorld, users=None) -> np.ndarray:
        """Logging scores ``s_ui`` of the given users (all by default) × every item.

        Examples
        --------
        >>> world = SimulatedWorld(n_users=4, n_items=5, n_factors=2, seed=0)
        >>> AffinityPolicy().scores(world, np.array([0, 3])).shape
        (2, 5)
        """
        users = world._users(users)
        affinity = self.noisy_factors(world)[users] @ world.item_factors.T
        scores = (np.log(world.popularity) + self.personalisation * affinity) / self.temperature
        return _finite_log_weights(scores, self.temperature)

    def retrieval_probabilities(self, world: SimulatedWorld, users=None) -> np.ndarray:
        """``q_ui = 1 − exp(−c · p_ui)``, the probability that a feed's retrieval stage picks
        item i for user u, for the given users (all by default) × every item.

        Examples
        --------
        >>> world = SimulatedWorld(n_users=4, n_items=5, n_factors=2, seed=0)
        >>> q = AffinityPolicy(candidates=3.0).retrieval_probabilities(world)
        >>> bool(q.sum(axis=1).max() <= 3.0)  # fewer distinct items than draws, on average
        True
        """
        scores = self.scores(world, users)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return -np.expm1(-self.candidates * p)

    def _ordered(self, world: SimulatedWorld, users: np.ndarray):
        """(items in decreasing score, their retrieval probabilities), each (users, n_items)."""
        scores = self.scores(world, users)
        order = np.argsort(-scores, axis=1, kind="stable")
        q = self.retrieval_probabilities(world, users)
        return order, np.take_along_axis(q, order, axis=1)

    def _exposure(self, world: SimulatedWorld, discount: Discount, n: int) -> np.ndarray:
        """Exact ``ε0(u, i)`` of feeds of ``n`` items (class docstring), (n_users, n_items)."""
        nbytes = 8.0 * world.n_users * world.n_items
        if nbytes > MAX_BYTES:
            raise ValueError(
                f"the exposure of an AffinityPolicy is one value per (user, item): "
                f"{world.n_users} × {world.n_items} take {nbytes / 2**30:.1f} GiB (limit "
                f"{MAX_BYTES / 2**30:.0f} GiB)"
            )
        view = discount.weights(n)
        eps = np.empty((world.n_users, world.n_items))
        step = rows_per_chunk(4 * world.n_items)
        for start in range(0, world.n_users, step):
            users = np.arange(start, min(start + step, world.n_users))
            order, q = self._ordered(world, users)
            ordered = np.zeros(order.shape)
            # P(R↑ = k), k < n, going down the score order: retrieved items at rank 1 + R↑.
            count = np.zeros((users.size, n))
            count[:, 0] = 1.0
            for j in range(world.n_items):
                qj = q[:, j : j + 1]
                ordered[:, j] = q[:, j] * (count @ view)
                count[:, 1:] = count[:, 1:] * (1 - qj) + count[:, :-1] * qj
                count[:, 0] *= 1 - q[:, j]
            # P(R↓ = k) going up: only the n best-scored items can fill a feed, at A + 1 + R↓.
            count = np.zeros((users.size, n))
            count[:, 0] = 1.0
            for j in range(world.n_items - 1, -1, -1):
                if j < n:
                    ordered[:, j] += (1 - q[:, j]) * (count[:, : n - j] @ view[j:])
                qj = q[:, j : j + 1]
                count[:, 1:] = count[:, 1:] * (1 - qj) + count[:, :-1] * qj
                count[:, 0] *= 1 - q[:, j]
            np.put_along_axis(eps[users[0] : users[-1] + 1], order, ordered, axis=1)
        return eps

    def _feeds(
        self, world: SimulatedWorld, n: int, n_feeds: int, rng: np.random.Generator
    ) -> np.ndarray:
        """``n_feeds`` sampled feeds of ``n`` items per user, (n_users · n_feeds, n)."""
        feeds = np.empty((world.n_users * n_feeds, n), dtype=np.int64)
        step = rows_per_chunk(4 * world.n_items * n_feeds)
        for start in range(0, world.n_users, step):
            users = np.arange(start, min(start + step, world.n_users))
            order, q = (np.repeat(a, n_feeds, axis=0) for a in self._ordered(world, users))
            retrieved = rng.random(q.shape) < q
            # Retrieved items first, each group in score order; the first n make the feed.
            key = np.where(retrieved, 0, world.n_items) + np.arange(world.n_items)
            first = np.argsort(key, axis=1)[:, :n]
            rows = slice(start * n_feeds, (start + users.size) * n_feeds)
            feeds[rows] = np.take_along_axis(order, first, axis=1)
        return feeds


@dataclass(frozen=True, eq=False)
class LoggedFeedback:
    """What a logging policy recorded: one row per shown (user, feed, item).

    Attributes
    ----------
    clicks : scipy.sparse.csr_matrix, shape (n_users, n_items)
        Number of clicks per (user, item) over the user's feeds.
    user, feed, item, rank, click : numpy.ndarray
        The long table: user index, the user's feed number (0-based), item index, logged rank
        (1-based), click (0/1).
    propensity : numpy.ndarray
        Logging exposure ``ε0`` of each row's (user, item): the probability that one feed
        shows *and* the user views the item (Eq. 8) under the position-based model.
    exposure : numpy.ndarray, shape (n_items,), (n_segments, n_items) or (n_users, n_items)
        ``ε0(i)`` of every item, the same for every user when the logging score is not
        personal; ``ε0(s, i)`` of every segment for a :class:`PersonalisedPolicy`;
        ``ε0(u, i)`` of every user for an :class:`AffinityPolicy`.
    logging_weights : numpy.ndarray, shape (n_items,) or (n_segments, n_items), or None
        The logging policy's Plackett–Luce weights, normalised to sum to 1 (per segment);
        None for an :class:`AffinityPolicy`, which is not a Plackett–Luce policy.
    discount : Discount
        The position-based view model of the log.
    feed_length, n_feeds : int
        Items per feed and feeds per user.
    segment : numpy.ndarray of int64, shape (n_users,), or None
        Logging segment of every user (:class:`PersonalisedPolicy`; every user is a segment
        of its own under an :class:`AffinityPolicy`); None otherwise.
    click_model : str
        The world's click model. Under ``"cascade"`` and ``"choice"`` the recorded
        ``propensity`` and ``exposure`` are still the position-based ``ε0`` — what a
        practitioner would assume — and *not* what drives a click, which also depends on the
        items ranked above it (and, under ``"choice"``, below it): IPS with them is biased (the
        world breaks Asm. 2 and 3).
    """

    clicks: sp.csr_matrix
    user: np.ndarray
    feed: np.ndarray
    item: np.ndarray
    rank: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    exposure: np.ndarray
    discount: Discount
    feed_length: int
    n_feeds: int
    logging_weights: np.ndarray | None
    segment: np.ndarray | None = None
    click_model: str = "pbm"

    def propensity_model(self) -> FixedPropensity:
        """The true per-feed logging exposure as a fitted propensity model for the estimators.

        With ``n_feeds == 1`` every click count is 0 or 1 and ``E[c_ui] = ε0(i) · P(Q=1|u,i)``,
        so IPS-DCG with these propensities is unbiased for the online reward per user (under
        the position-based click model).

        Raises
        ------
        ValueError
            For a personalised log, whose exposure depends on the user: use
            :meth:`propensity_matrix` instead.
        """
        if self.segment is not None:
            raise ValueError(
                "the logging exposure of a PersonalisedPolicy or AffinityPolicy depends on the "
                "user; pass propensity_matrix(y_true) to the estimators instead of "
                "propensity_model()"
            )
        # imported on use: start-up time (docs/performance.md)
        from ..propensity.models import FixedPropensity

        return FixedPropensity(self.exposure).fit()

    def propensity_matrix(self, y_true) -> sp.csr_matrix:
        """The true logging exposure at every stored entry of ``y_true``, for any policy.

        Parameters
        ----------
        y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
            Held-out rewards (e.g. this log's ``clicks``); only its stored entries matter.

        Returns
        -------
        scipy.sparse.csr_matrix, shape (n_users, n_items)
            ``ε0(u, i)`` — ``ε0(segment(u), i)`` for a personalised log — at exactly the
            stored entries of ``y_true``; the estimators' ``propensity`` argument accepts it.
        """
        held_out = as_csr(y_true, "y_true")
        if held_out.shape != self.clicks.shape:
            raise ValueError(
                f"y_true has shape {held_out.shape} but the log has {self.clicks.shape} "
                "(users, items)"
            )
        if self.segment is None:
            values = self.exposure[held_out.indices]
        else:
            users = np.repeat(np.arange(held_out.shape[0]), np.diff(held_out.indptr))
            values = self.exposure[self.segment[users], held_out.indices]
        return sp.csr_matrix((values, held_out.indices, held_out.indptr), shape=held_out.shape)

    def impressions(self) -> sp.csr_matrix:
        """Where the log showed items: ``e_ui = δ(logged rank)``, the probability that the user
        examined item i where it was shown (0 where it was not), users × items.

        Its expectation over the logging policy is the propensity ``ε0`` (Eq. 8), which makes
        it the ``impressions=`` of the held-out estimators (:func:`~recpack_ope.metrics.dcg.dcg`,
        :func:`~recpack_ope.metrics.doubly_robust.dr_dcg`): it enables their control variate
        and the doubly robust residual.

        Raises
        ------
        ValueError
            For logs of several feeds per user: held-out impressions, like the propensities,
            describe one feed (use :meth:`feed_log` for the per-feed form).
        """
        if self.n_feeds != 1:
            raise ValueError(
                f"impressions describe one feed per user, the log has n_feeds={self.n_feeds}; "
                "use feed_log() and the logged estimators for several feeds"
            )
        shown = sp.csr_matrix(
            (self.discount(self.rank), (self.user, self.item)), shape=self.clicks.shape
        )
        shown.sum_duplicates()
        return shown

    def feed_log(self) -> FeedLog:
        """The log as a :class:`~recpack_ope.logged.feed_log.FeedLog`: one session per (user, feed),
        the user as context, clicks as rewards, the exact ``ε0`` as propensities and the
        logging Plackett–Luce weights (every item is a candidate; none for an
        :class:`AffinityPolicy`)."""
        return FeedLog.from_arrays(
            self.user * self.n_feeds + self.feed,
            self.item,
            self.rank,
            self.click,
            context=self.user,
            propensity=self.propensity,
            logging_weight=(
                None if self.logging_weights is None else self._row_values(self.logging_weights)
            ),
            n_items=self.exposure.shape[-1],
            n_contexts=int(self.clicks.shape[0]),
        )

    def _row_values(self, per_item: np.ndarray) -> np.ndarray:
        """A per-item (or per-segment × item) quantity at every logged row."""
        if self.segment is None:
            return per_item[self.item]
        return per_item[self.segment[self.user], self.item]

    def to_pandas(self):
        """The long table as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "user": self.user,
                "feed": self.feed,
                "item": self.item,
                "rank": self.rank,
                "click": self.click,
                "propensity": self.propensity,
            }
        )


@dataclass(frozen=True, eq=False)
class SimulatedWorld:
    """Users × items with known relevance, a logging process, and exact online reward.

    Parameters
    ----------
    n_users, n_items : int
        Size of the world (tested up to 100k × 20k).
    n_factors : int
        Rank of the preference model.
    preference_strength : float
        ``s_pref``: scale of ``⟨U_u, V_i⟩`` (factors are standard normal / √n_factors, so the
        inner products have unit variance).
    popularity_exponent : float
        Zipf exponent ``a`` of item popularity ``π_i = rank_i^(−a)`` (ranks in random order).
    popularity_strength : float
        ``s_pop``: how much popularity raises relevance (0 = popularity only biases exposure).
    base_logit : float
        ``b``: sets the overall click-through rate.
    seed : int
        Seed of the world's factors and popularity, an integer >= 0.
    click_model : {"pbm", "cascade", "choice"}
        ``"pbm"``: position-based views, clicks independent across ranks (Asm. 1–5 hold).
        ``"cascade"``: single-click cascade with the same examination curve (see the module
        docstring); needs a non-increasing discount. ``"choice"``: at most one click, a
        multinomial-logit choice among every item shown weighted by ``δ`` (module
        docstring). Used by :meth:`log`, :meth:`expected_clicks` and :meth:`online_reward`
        alike; it does not change the factors or popularity.

    Raises
    ------
    ValueError
        For sizes that are not positive integers, strengths or a base logit that are not
        finite reals, a negative popularity exponent or one so large that the least popular
        item's popularity underflows to 0, a seed that is not an integer >= 0, an unknown
        click model, or factors beyond ``MAX_BYTES`` (8 GiB) of memory.
    """

    n_users: int = 5000
    n_items: int = 1000
    n_factors: int = 16
    preference_strength: float = 2.0
    popularity_exponent: float = 1.0
    popularity_strength: float = 0.3
    base_logit: float = -1.5
    seed: int = 0
    click_model: str = "pbm"
    user_factors: np.ndarray = field(init=False, repr=False)
    item_factors: np.ndarray = field(init=False, repr=False)
    popularity: np.ndarray = field(init=False, repr=False)
    # Exact logging exposures by (policy, feed length, view curve): repeated logs of one policy
    # (held-out replications) pay the Plackett–Luce exposure integral once.
    _exposures: dict = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("n_users", "n_items", "n_factors"):
            check_positive_int(getattr(self, name), name)
        for name in ("preference_strength", "popularity_strength", "base_logit"):
            check_finite_number(getattr(self, name), name)
        exponent = check_finite_number(self.popularity_exponent, "popularity_exponent", minimum=0)
        if exponent * math.log(self.n_items) > 700:
            raise ValueError(
                f"popularity_exponent={self.popularity_exponent!r} makes the popularity "
                f"{self.n_items}^-{exponent:g} of the least popular item underflow to 0; use an "
                f"exponent below {700 / math.log(self.n_items):.4g} for {self.n_items} items"
            )
        _check_int_seed(self.seed, "seed")
        if not isinstance(self.click_model, str) or self.click_model not in CLICK_MODELS:
            raise ValueError(f"click_model must be one of {CLICK_MODELS}, got {self.click_model!r}")
        factor_bytes = 8.0 * (self.n_users + self.n_items) * self.n_factors
        if factor_bytes > MAX_BYTES:
            raise ValueError(
                f"a world of {self.n_users} users and {self.n_items} items with {self.n_factors} "
                f"factors needs {factor_bytes / 2**30:.1f} GiB for its factors alone (limit "
                f"{MAX_BYTES / 2**30:.0f} GiB)"
            )
        rng = np.random.default_rng(self.seed)
        scale = 1.0 / np.sqrt(self.n_factors)
        object.__setattr__(
            self, "user_factors", rng.standard_normal((self.n_users, self.n_factors)) * scale
        )
        object.__setattr__(
            self, "item_factors", rng.standard_normal((self.n_items, self.n_factors))
        )
        ranks = rng.permutation(self.n_items) + 1.0
        object.__setattr__(self, "popularity", ranks**-self.popularity_exponent)

    def relevance(self, users=None) -> np.ndarray:
        """Dense ``P(Q=1 | u, i)`` for the given users (all by default) × every item."""
        users = self._users(users)
        logits = self.preference_strength * (self.user_factors[users] @ self.item_factors.T)
        logits += self.base_logit + self.popularity_strength * np.log(self.popularity)
        return _sigmoid(logits)

    def relevance_of(self, users, items) -> np.ndarray:
        """``P(Q=1 | u, i)`` for paired arrays of users and items (any matching shape).

        Raises
        ------
        ValueError
            For indices that are not integers or lie outside the world's users and items.
        """
        users = _indices(users, self.n_users, "users")
        items = _indices(items, self.n_items, "items")
        return self._relevance_of(users, items)

    def _relevance_of(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """:meth:`relevance_of` of checked indices (the simulation's own calls)."""
        return _sigmoid(self._logit_of(users, items))

    def _logit_of(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Log-odds of ``P(Q=1 | u, i)`` of checked indices: ``log v`` of the choice model."""
        inner = np.einsum("...f,...f->...", self.user_factors[users], self.item_factors[items])
        return (
            self.base_logit
            + self.preference_strength * inner
            + self.popularity_strength * np.log(self.popularity[items])
        )

    def expected_clicks(self, users, rankings, discount: Discount | None = None) -> np.ndarray:
        """Exact probability of a click at every rank when ``rankings`` are shown to ``users``,
        under the world's click model (module docstring), with ``q_k = P(Q=1 | u, a_k)``:

        * ``"pbm"``: ``q_k · δ(k)``;
        * ``"cascade"``: ``q_k · δ(k) · Π_{j<k} (1 − q_j)``;
        * ``"choice"``: ``δ(k) · v_k / (1 + Σ_j δ(j) · v_j)`` with ``v = q / (1 − q)``.

        Summed over the ranks, the expected clicks of a feed: its online reward.

        Parameters
        ----------
        users : array_like of int, shape (n,)
            The user shown each ranking.
        rankings : array_like of int, shape (n, K)
            Item shown at ranks 1..K of each feed, distinct within a row.
        discount : Discount, optional
            View model ``δ``; default ``LogDiscount()``, as in :meth:`log`.

        Returns
        -------
        numpy.ndarray, shape (n, K)

        Raises
        ------
        ValueError
            For users or items outside the world, rankings that are not (n, K) with an item
            repeated in a row, or a discount that rises with rank under ``"cascade"``.
        TypeError
            For a discount that is not a Discount model.

        Examples
        --------
        >>> world = SimulatedWorld(n_users=2, n_items=5, n_factors=2, seed=0, click_model="choice")
        >>> p = world.expected_clicks([0, 1], [[0, 1, 2], [4, 3, 2]])
        >>> p.shape
        (2, 3)
        >>> bool((p.sum(axis=1) < 1).all())  # at most one click per feed
        True
        """
        discount = LogDiscount() if discount is None else discount
        if not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        users = _indices(users, self.n_users, "users")
        rankings = _indices(rankings, self.n_items, "rankings")
        if users.ndim != 1 or rankings.ndim != 2 or rankings.shape[0] != users.size:
            raise ValueError(
                f"users must have shape (n,) and rankings (n, K), got {users.shape} and "
                f"{rankings.shape}"
            )
        ordered = np.sort(rankings, axis=1)
        repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if repeated.size:
            row = int(repeated[0])
            raise ValueError(
                f"rankings must show each item once per row; row {row} is {rankings[row].tolist()}"
            )
        logits = self._logit_of(users[:, None], rankings)
        return self._click_probabilities(logits, discount.weights(rankings.shape[1]))

    def _click_probabilities(self, logits: np.ndarray, view_prob: np.ndarray) -> np.ndarray:
        """:meth:`expected_clicks` from the log-odds of the shown items, rows × ranks; ``-inf``
        marks a rank that shows nothing (no click, no competition for one)."""
        if self.click_model == "choice":
            with np.errstate(divide="ignore"):
                z = logits + np.log(view_prob)
            # Softmax over the ranks and the no-click option (z = 0), shifted against overflow.
            top = np.maximum(z.max(axis=1, keepdims=True), 0.0)
            weight = np.exp(z - top)
            return weight / (np.exp(-top) + weight.sum(axis=1, keepdims=True))
        relevance = _sigmoid(logits)
        if self.click_model == "cascade":
            _cascade_continuation(view_prob)
            above = np.ones_like(relevance)
            above[:, 1:] = np.cumprod(1.0 - relevance[:, :-1], axis=1)
            relevance = relevance * above
        return relevance * view_prob

    def reward_model(self) -> WorldRelevance:
        """The world's true click probability of an examined item, ``P(Q=1 | u, i)``, as a
        reward model for the doubly robust estimators (the oracle a learnt one approximates).
        Rows are users for held-out data and contexts (= users) for this world's feed logs."""
        return WorldRelevance(self)

    def _users(self, users) -> np.ndarray:
        if users is None:
            return np.arange(self.n_users)
        users = np.asarray(users)
        if users.ndim != 1 or not np.issubdtype(users.dtype, np.integer):
            raise ValueError(f"users must be a 1-D integer array, got {users.dtype} {users.shape}")
        bad = np.flatnonzero((users < 0) | (users >= self.n_users))
        if bad.size:
            raise ValueError(f"unknown user {users[bad[0]]}; the world has {self.n_users} users")
        return users

    def log(
        self,
        policy: PopularityPolicy | UniformPolicy | PersonalisedPolicy | AffinityPolicy,
        *,
        feed_length: int = 50,
        discount: Discount | None = None,
        n_feeds: int = 1,
        seed: int = 0,
    ) -> LoggedFeedback:
        """Deploy a logging policy: every user gets ``n_feeds`` feeds and clicks on some items.

        Clicks follow the world's ``click_model``; the recorded propensities are the
        position-based exposure ``ε0`` in either case.

        Parameters
        ----------
        policy : PopularityPolicy, UniformPolicy, PersonalisedPolicy or AffinityPolicy
            The deployed (logging) policy; a personalised one samples every segment's feeds
            with that segment's weights, an affinity one every user's own.
        feed_length : int
            Items per feed, n.
        discount : Discount, optional
            View model ``δ(r)``; default ``LogDiscount()`` (no cutoff besides the feed length).
        n_feeds : int
            Independent feeds per user (clicks are summed in ``clicks``). Use 1 for held-out
            logs that IPS estimators read: then the per-feed exposure is the propensity.
        seed : int
            Seed of this log (independent of the world's seed), an integer >= 0.

        Returns
        -------
        LoggedFeedback

        Raises
        ------
        ValueError
            For a feed length outside 1..n_items, ``n_feeds < 1``, a seed that is not an
            integer >= 0, or a log beyond ``MAX_BYTES`` (8 GiB) of memory.
        TypeError
            For a policy or discount of the wrong type.
        """
        discount = LogDiscount() if discount is None else discount
        n = self._check_deployment(policy, discount, feed_length)
        n_feeds = check_positive_int(n_feeds, "n_feeds")
        _check_int_seed(seed, "seed")
        log_bytes = float(_BYTES_PER_ROW) * self.n_users * n_feeds * n
        if log_bytes > MAX_BYTES:
            raise ValueError(
                f"a log of {self.n_users} users × {n_feeds} feeds × {n} items has "
                f"{self.n_users * n_feeds * n} rows, about {log_bytes / 2**30:.0f} GiB (limit "
                f"{MAX_BYTES / 2**30:.0f} GiB): use fewer feeds, shorter feeds or fewer users"
            )
        view_prob = discount.weights(n)
        cascade = self.click_model == "cascade"
        continuation = _cascade_continuation(view_prob) if cascade else None
        rng = np.random.default_rng([self.seed, seed])
        n_rows = self.n_users * n_feeds
        segment, weights, log_weights, eps0 = self._policy_exposure(policy, discount, n)
        if isinstance(policy, AffinityPolicy):
            feeds = policy._feeds(self, n, n_feeds, rng)
            propensity = eps0[np.repeat(segment, n_feeds * n), feeds.ravel()]
        elif segment is not None:
            feeds = np.empty((n_rows, n), dtype=np.int64)
            for s in range(weights.shape[0]):
                members = np.flatnonzero(segment == s)
                rows = (members[:, None] * n_feeds + np.arange(n_feeds)).ravel()
                feeds[rows] = sample_rankings(
                    **_pl(weights[s], log_weights[s]), n_ranks=n, n_samples=rows.size, rng=rng
                )
            propensity = eps0[np.repeat(segment, n_feeds * n), feeds.ravel()]
        else:
            feeds = sample_rankings(
                **_pl(weights, log_weights), n_ranks=n, n_samples=n_rows, rng=rng
            )
            propensity = eps0[feeds.ravel()]
        user = np.repeat(np.arange(self.n_users), n_feeds * n)
        feed = np.tile(np.repeat(np.arange(n_feeds), n), self.n_users)
        item = feeds.ravel()
        rank = np.tile(np.arange(1, n + 1), n_rows)
        click = np.empty(item.size, dtype=np.int8)
        feed_user = np.repeat(np.arange(self.n_users), n_feeds)
        by_feed = click.reshape(n_rows, n)
        if self.click_model == "choice":
            step = rows_per_chunk(n)
            for start in range(0, n_rows, step):
                part = slice(start, start + step)
                shown = feeds[part]
                p = self._click_probabilities(
                    self._logit_of(feed_user[part, None], shown), view_prob
                )
                # One uniform per feed picks the clicked rank k where it falls between the
                # cumulative probabilities of ranks k − 1 and k; past them, no click.
                below = np.cumsum(p, axis=1)
                u = rng.random((shown.shape[0], 1))
                by_feed[part] = (below - p <= u) & (u < below)
        elif cascade:
            step = rows_per_chunk(n)
            for start in range(0, n_rows, step):
                part = slice(start, start + step)
                shown = feeds[part]
                # Examined through rank r: every continuation up to r succeeded (prob. δ(r)).
                examined = np.logical_and.accumulate(rng.random(shown.shape) < continuation, axis=1)
                relevant = rng.random(shown.shape) < self._relevance_of(
                    feed_user[part, None], shown
                )
                # The first examined relevant item is clicked and ends the feed, so rank r can
                # only be clicked if no rank above it was relevant.
                clear = np.ones(shown.shape, dtype=bool)
                clear[:, 1:] = np.logical_and.accumulate(~relevant[:, :-1], axis=1)
                by_feed[part] = examined & relevant & clear
        else:
            step = rows_per_chunk(1)
            for start in range(0, item.size, step):
                part = slice(start, start + step)
                viewed = rng.random(rank[part].size) < view_prob[rank[part] - 1]
                relevant = rng.random(viewed.size) < self._relevance_of(user[part], item[part])
                click[part] = viewed & relevant
        hit = click == 1
        clicks = sp.csr_matrix(
            (np.ones(int(hit.sum())), (user[hit], item[hit])), shape=(self.n_users, self.n_items)
        )
        clicks.sum_duplicates()
        return LoggedFeedback(
            clicks=clicks,
            user=user,
            feed=feed,
            item=item,
            rank=rank,
            click=click,
            propensity=propensity,
            exposure=eps0,
            discount=discount,
            feed_length=n,
            n_feeds=n_feeds,
            logging_weights=(
                None if weights is None else weights / weights.sum(axis=-1, keepdims=True)
            ),
            segment=segment,
            click_model=self.click_model,
        )

    def online_reward(self, rankings, discount: Discount) -> EstimateResult:
        """Exact expected clicks per user when ``rankings`` is deployed (Eq. 5, no sampling).

        ``reward_u = Σ_r P(Q=1 | u, a_r) · δ(r)`` over the items ``a_1, a_2, …`` the target
        ranks for user u, cut off where ``δ`` is zero. This is the ground truth that an
        unbiased offline estimator targets. Under the other click models it is the sum over
        the ranks of :meth:`expected_clicks`: under the cascade
        ``Σ_r q(a_r) · δ(r) · Π_{s<r} (1 − q(a_s))`` with ``q = P(Q=1 | u, ·)`` (rank r is
        clicked if it is examined and relevant and no rank above it was clicked), under the
        choice model ``Σ_r δ(r) v(a_r) / (1 + Σ_s δ(s) v(a_s))`` with ``v = q / (1 − q)``.

        Parameters
        ----------
        rankings : numpy.ndarray, scipy.sparse matrix or TopK
            The target's scores (users × items) or precomputed rankings, with the conventions
            of the estimators (:mod:`recpack_ope.metrics.ranking`).
        discount : Discount
            View model of the deployed ranking, with its cutoff (the number of items shown).

        Returns
        -------
        EstimateResult
            Mean over all users of the exact per-user reward; its interval reflects only the
            sampling of users from the population.
        """
        if not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        source = ScoreSource(rankings, (self.n_users, self.n_items))
        reward = np.zeros(self.n_users)
        step = rows_per_chunk(source.width)
        for start in range(0, self.n_users, step):
            users = np.arange(start, min(start + step, self.n_users))
            local, items, ranks = source.ranked(users, discount.cutoff)
            if not ranks.size:
                continue
            # Rows rank items 1, 2, … without gaps; a shorter row's empty ranks show nothing.
            logits = np.full((users.size, int(ranks.max())), -np.inf)
            logits[local, ranks - 1] = self._logit_of(users[local], items)
            clicks = self._click_probabilities(logits, discount.weights(logits.shape[1]))
            reward[users] = clicks.sum(axis=1)
        return self._over_users(f"online reward{discount.label}", reward)

    def policy_reward(
        self,
        policy: PopularityPolicy | UniformPolicy | PersonalisedPolicy | AffinityPolicy,
        discount: Discount,
        feed_length: int,
    ) -> EstimateResult:
        """Exact expected clicks per user when a stochastic logging policy is deployed:
        ``Σ_i ε(i) · P(Q=1 | u, i)`` with ``ε`` its exposure (Eq. 8), the truth behind the
        on-policy average reward of its logs; ``ε(segment(u), i)`` for a personalised policy.

        Raises
        ------
        NotImplementedError
            Under the cascade and choice click models: a click's probability then depends on
            other items of the feed, so the expectation over Plackett–Luce rankings has no
            cheap exact form. The mean clicks per user of its logs (:meth:`log`) estimate it
            unbiasedly.
        """
        if self.click_model != "pbm":
            raise NotImplementedError(
                f"policy_reward is exact only for click_model='pbm'; under "
                f"{self.click_model!r} estimate a stochastic policy's reward by the mean clicks "
                "per user of its logs"
            )
        n = self._check_deployment(policy, discount, feed_length)
        segment, _, _, eps = self._policy_exposure(policy, discount, n)
        reward = np.empty(self.n_users)
        step = rows_per_chunk(self.n_items)
        for start in range(0, self.n_users, step):
            users = np.arange(start, min(start + step, self.n_users))
            relevance = self.relevance(users)
            if segment is None:
                reward[users] = relevance @ eps
            else:
                reward[users] = np.einsum("ui,ui->u", relevance, eps[segment[users]])
        return self._over_users(f"online reward of {type(policy).__name__}", reward)

    def _check_deployment(self, policy, discount, feed_length) -> int:
        """The feed length of a valid (policy, discount, feed length) for this world."""
        if not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        if not isinstance(
            policy, (PopularityPolicy, UniformPolicy, PersonalisedPolicy, AffinityPolicy)
        ):
            raise TypeError(
                f"policy must be a PopularityPolicy or UniformPolicy, got {type(policy).__name__}"
                " (or a PersonalisedPolicy or AffinityPolicy)"
            )
        n = check_positive_int(feed_length, "feed_length")
        if n > self.n_items:
            raise ValueError(f"feed_length={n} exceeds the number of items ({self.n_items})")
        return n

    def _policy_exposure(self, policy, discount: Discount, n: int):
        """(segment of every user or None, Plackett–Luce weights, their logarithms, exact
        exposure ε0) of a logging policy with feeds of ``n`` items under ``discount``, cached
        per world; every user is a segment of an :class:`AffinityPolicy`, which has no
        Plackett–Luce weights (None)."""
        key = (policy, n, tuple(discount.weights(n)))
        if key not in self._exposures:
            if isinstance(policy, AffinityPolicy):
                segment = np.arange(self.n_users)
                weights = log_weights = None
                eps0 = policy._exposure(self, discount, n)
            elif isinstance(policy, PersonalisedPolicy):
                segment, log_weights = policy._segmentation(self)
                weights = _normalised(log_weights)
                eps0 = np.stack(
                    [
                        exposure(**_pl(w, lw), discount=discount, n_ranks=n)
                        for w, lw in zip(weights, log_weights, strict=True)
                    ]
                )
            else:
                segment, weights, log_weights = (
                    None,
                    policy.weights(self),
                    policy._log_weights(self),
                )
                eps0 = exposure(**_pl(weights, log_weights), discount=discount, n_ranks=n)
            self._exposures[key] = (segment, weights, log_weights, eps0)
        return self._exposures[key]

    def _over_users(self, name: str, reward: np.ndarray) -> EstimateResult:
        """Exact per-user rewards as a mean over every user of the world."""
        return EstimateResult(
            name=name,
            terms=reward,
            exponents=(1,),
            user_ids=np.arange(self.n_users),
            n_excluded_users=0,
        )


@dataclass(frozen=True, eq=False)
class WorldRelevance:
    """A world's relevance ``P(Q=1 | u, i)`` behind the reward-model interface
    (``predict(users, items)``, ``shape``), computed from the factors for the pairs asked."""

    world: SimulatedWorld

    @property
    def shape(self) -> tuple[int, int]:
        """(n_users, n_items) of the world."""
        return (self.world.n_users, self.world.n_items)

    def predict(self, users, items) -> np.ndarray:
        """``P(Q=1 | u, i)`` of paired user and item indices."""
        return self.world.relevance_of(users, items)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _check_int_seed(seed, name: str) -> None:
    """Worlds and logs are reproducible: their seeds are integers >= 0."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(
            f"{name} must be an integer >= 0 (worlds and logs are reproducible), got {seed!r}"
        )


def _indices(values, size: int, name: str) -> np.ndarray:
    """Integer indices into ``size`` users or items (any shape)."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integer indices, got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr >= size))
    if bad.size:
        raise ValueError(f"unknown index {arr.ravel()[bad[0]]} in {name}; the world has {size}")
    return arr


def _finite_log_weights(log_weights: np.ndarray, temperature: float) -> np.ndarray:
    """Plackett–Luce log-weights, refused when dividing by the temperature overflowed."""
    if not np.isfinite(log_weights).all():
        raise ValueError(
            f"temperature={temperature!r} is too small: log-popularity / temperature overflows"
        )
    return log_weights


def _normalised(log_weights: np.ndarray) -> np.ndarray:
    """Weights ``exp(log_weights)`` scaled to sum to 1 along the last axis."""
    weights = np.exp(log_weights)
    return weights / weights.sum(axis=-1, keepdims=True)


def _pl(weights: np.ndarray, log_weights: np.ndarray) -> dict:
    """Arguments of the Plackett–Luce functions: the weights while none underflows to 0 (so
    results stay those of the plain weights, bit for bit), else their logarithms."""
    if weights.min() > 0:
        return {"weights": weights}
    return {"weights": log_weights, "log_weights": True}


def _cascade_continuation(view_prob: np.ndarray) -> np.ndarray:
    """``P(examine r | examined r − 1 without a click)``: ``δ(1)``, then ``δ(r) / δ(r − 1)``.

    The product up to r is ``δ(r)``, so without clicks the cascade examines like the
    position-based model. Ranks after one with ``δ = 0`` are never reached (ratio 0).

    Raises
    ------
    ValueError
        If ``δ`` rises with rank somewhere: a cascade cannot examine a lower rank more often.
    """
    rises = np.flatnonzero(np.diff(view_prob) > 0)
    if rises.size:
        r = int(rises[0]) + 1
        raise ValueError(
            f"click_model='cascade' needs a non-increasing discount, but δ({r + 1}) = "
            f"{view_prob[r]:.6g} > δ({r}) = {view_prob[r - 1]:.6g}"
        )
    previous = np.concatenate([[1.0], view_prob[:-1]])
    return np.divide(view_prob, previous, out=np.zeros_like(view_prob), where=previous > 0)
