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
  offline estimates are compared with.

Nothing is stored densely over users × items: relevance is computed from the factors for the
(user, item) pairs needed, so worlds of 100k users × 20k items fit in a few GiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._validation import check_positive_int
from ..inference.result import EstimateResult
from ..logged.feed_log import FeedLog
from ..logged.plackett_luce import exposure, sample_rankings
from ..metrics.ranking import ScoreSource
from ..propensity.discount import Discount, LogDiscount
from ..propensity.models import FixedPropensity

__all__ = ["SimulatedWorld", "PopularityPolicy", "UniformPolicy", "LoggedFeedback"]



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
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"temperature must be finite and > 0, got {self.temperature!r}")

    def weights(self, world: "SimulatedWorld") -> np.ndarray:
        """Plackett–Luce weights ``π_i^(1/τ)`` of the world's items."""
        return np.exp(np.log(world.popularity) / self.temperature)


@dataclass(frozen=True)
class UniformPolicy:
    """Open-loop logging: every feed is a uniformly random ordering of the catalogue."""

    def weights(self, world: "SimulatedWorld") -> np.ndarray:
        """Equal Plackett–Luce weights."""
        return np.ones(world.n_items)


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
        shows *and* the user views the item (Eq. 8).
    exposure : numpy.ndarray, shape (n_items,)
        ``ε0(i)`` of every item, the same for every user (the logging score is not personal).
    logging_weights : numpy.ndarray, shape (n_items,)
        The logging policy's Plackett–Luce weights, normalised to sum to 1.
    discount : Discount
        The position-based view model of the log.
    feed_length, n_feeds : int
        Items per feed and feeds per user.
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
    logging_weights: np.ndarray

    def propensity_model(self) -> FixedPropensity:
        """The true per-feed logging exposure as a fitted propensity model for the estimators.

        With ``n_feeds == 1`` every click count is 0 or 1 and ``E[c_ui] = ε0(i) · P(Q=1|u,i)``,
        so IPS-DCG with these propensities is unbiased for the online reward per user.
        """
        return FixedPropensity(self.exposure).fit()

    def feed_log(self) -> FeedLog:
        """The log as a :class:`~recpack_ope.logged.feed_log.FeedLog`: one session per (user, feed),
        the user as context, clicks as rewards, the exact ``ε0`` as propensities and the
        logging Plackett–Luce weights (every item is a candidate)."""
        return FeedLog.from_arrays(
            self.user * self.n_feeds + self.feed,
            self.item,
            self.rank,
            self.click,
            context=self.user,
            propensity=self.propensity,
            logging_weight=self.logging_weights[self.item],
            n_items=self.exposure.size,
            n_contexts=int(self.clicks.shape[0]),
        )

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
        Seed of the world's factors and popularity.
    """

    n_users: int = 5000
    n_items: int = 1000
    n_factors: int = 16
    preference_strength: float = 2.0
    popularity_exponent: float = 1.0
    popularity_strength: float = 0.3
    base_logit: float = -1.5
    seed: int = 0
    user_factors: np.ndarray = field(init=False, repr=False)
    item_factors: np.ndarray = field(init=False, repr=False)
    popularity: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("n_users", "n_items", "n_factors"):
            check_positive_int(getattr(self, name), name)
        for name in ("preference_strength", "popularity_exponent", "popularity_strength", "base_logit"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)!r}")
        if self.popularity_exponent < 0:
            raise ValueError(f"popularity_exponent must be >= 0, got {self.popularity_exponent!r}")
        rng = np.random.default_rng(self.seed)
        scale = 1.0 / np.sqrt(self.n_factors)
        object.__setattr__(
            self, "user_factors", rng.standard_normal((self.n_users, self.n_factors)) * scale
        )
        object.__setattr__(self, "item_factors", rng.standard_normal((self.n_items, self.n_factors)))
        ranks = rng.permutation(self.n_items) + 1.0
        object.__setattr__(self, "popularity", ranks ** -self.popularity_exponent)

    def relevance(self, users=None) -> np.ndarray:
        """Dense ``P(Q=1 | u, i)`` for the given users (all by default) × every item."""
        users = self._users(users)
        logits = self.preference_strength * (self.user_factors[users] @ self.item_factors.T)
        logits += self.base_logit + self.popularity_strength * np.log(self.popularity)
        return _sigmoid(logits)

    def relevance_of(self, users, items) -> np.ndarray:
        """``P(Q=1 | u, i)`` for paired arrays of users and items (any matching shape)."""
        users, items = np.asarray(users), np.asarray(items)
        inner = np.einsum("...f,...f->...", self.user_factors[users], self.item_factors[items])
        logits = (
            self.base_logit
            + self.preference_strength * inner
            + self.popularity_strength * np.log(self.popularity[items])
        )
        return _sigmoid(logits)

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
        policy: PopularityPolicy | UniformPolicy,
        *,
        feed_length: int = 50,
        discount: Discount | None = None,
        n_feeds: int = 1,
        seed: int = 0,
    ) -> LoggedFeedback:
        """Deploy a logging policy: every user gets ``n_feeds`` feeds and clicks on some items.

        Parameters
        ----------
        policy : PopularityPolicy or UniformPolicy
            The deployed (logging) policy.
        feed_length : int
            Items per feed, n.
        discount : Discount, optional
            View model ``δ(r)``; default ``LogDiscount()`` (no cutoff besides the feed length).
        n_feeds : int
            Independent feeds per user (clicks are summed in ``clicks``). Use 1 for held-out
            logs that IPS estimators read: then the per-feed exposure is the propensity.
        seed : int
            Seed of this log (independent of the world's seed).

        Returns
        -------
        LoggedFeedback
        """
        discount = LogDiscount() if discount is None else discount
        if not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        if not isinstance(policy, (PopularityPolicy, UniformPolicy)):
            raise TypeError(
                f"policy must be a PopularityPolicy or UniformPolicy, got {type(policy).__name__}"
            )
        n = check_positive_int(feed_length, "feed_length")
        n_feeds = check_positive_int(n_feeds, "n_feeds")
        weights = policy.weights(self)
        eps0 = exposure(weights, discount, n)
        view_prob = discount.weights(n)
        rng = np.random.default_rng([self.seed, seed])
        n_rows = self.n_users * n_feeds
        feeds = sample_rankings(weights, n, n_rows, rng)
        user = np.repeat(np.arange(self.n_users), n_feeds * n)
        feed = np.tile(np.repeat(np.arange(n_feeds), n), self.n_users)
        item = feeds.ravel()
        rank = np.tile(np.arange(1, n + 1), n_rows)
        click = np.empty(item.size, dtype=np.int8)
        step = rows_per_chunk(1)
        for start in range(0, item.size, step):
            part = slice(start, start + step)
            viewed = rng.random(rank[part].size) < view_prob[rank[part] - 1]
            relevant = rng.random(viewed.size) < self.relevance_of(user[part], item[part])
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
            propensity=eps0[item],
            exposure=eps0,
            discount=discount,
            feed_length=n,
            n_feeds=n_feeds,
            logging_weights=weights / weights.sum(),
        )

    def online_reward(self, rankings, discount: Discount) -> EstimateResult:
        """Exact expected clicks per user when ``rankings`` is deployed (Eq. 5, no sampling).

        ``reward_u = Σ_r P(Q=1 | u, a_r) · δ(r)`` over the items ``a_1, a_2, …`` the target
        ranks for user u, cut off where ``δ`` is zero. This is the ground truth that an
        unbiased offline estimator targets.

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
            gain = self.relevance_of(users[local], items) * discount(ranks)
            reward[users] = np.bincount(local, weights=gain, minlength=users.size)
        return self._over_users(f"online reward{discount.label}", reward)

    def policy_reward(
        self, policy: PopularityPolicy | UniformPolicy, discount: Discount, feed_length: int
    ) -> EstimateResult:
        """Exact expected clicks per user when a stochastic logging policy is deployed:
        ``Σ_i ε(i) · P(Q=1 | u, i)`` with ``ε`` its exposure (Eq. 8), the truth behind the
        on-policy average reward of its logs."""
        eps = exposure(policy.weights(self), discount, check_positive_int(feed_length, "feed_length"))
        reward = np.empty(self.n_users)
        step = rows_per_chunk(self.n_items)
        for start in range(0, self.n_users, step):
            users = np.arange(start, min(start + step, self.n_users))
            reward[users] = self.relevance(users) @ eps
        return self._over_users(f"online reward of {type(policy).__name__}", reward)

    def _over_users(self, name: str, reward: np.ndarray) -> EstimateResult:
        """Exact per-user rewards as a mean over every user of the world."""
        return EstimateResult(
            name=name, terms=reward, exponents=(1,), user_ids=np.arange(self.n_users), n_excluded_users=0
        )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))
