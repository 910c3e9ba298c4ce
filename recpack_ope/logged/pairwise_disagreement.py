"""Classic and counterfactual pairwise disagreement of a scoring model on banner logs.

Gilotte, "Ranking metrics on non-shuffled traffic" (RecSys'19 workshop). Each session of a
:class:`~recpack_ope.logged.feed_log.FeedLog` is a banner; a product is clicked when its reward is
positive. A model with scores ``s`` *disagrees* with a (clicked P+, non-clicked P−) pair when
``s(P+) < s(P−)``; pairs with ``s(P+) = s(P−)`` are rejected (Algorithms 1 and 2, step 5).

* **Classic** (§2.2): the share of (clicked, non-clicked) pairs of the same banner that the
  model orders the other way, among pairs it does not tie (Algorithm 1 pooled over banners).
  On non-shuffled traffic it rewards models that copy the logging policy (§2.3).
* **Counterfactual** (§3.1, Algorithm 2 with the resampling integrated out; see
  docs/definitions.md, "Counterfactual pairwise disagreement"): for
  a click at rank r of banner D, the negative is the product the logging policy would have put
  at rank r in a re-draw of D's order, ``q(p) = P(P_r = p | D)``
  (:mod:`recpack_ope.logged.banner_marginals`). Per banner,
  ``num = Σ_{p} q(p) [s(P+) < s(p)]`` and ``den = Σ_{p} q(p) [s(p) ≠ s(P+)]`` over the
  banner's non-clicked products p; the metric is ``Σ num / Σ den``. With one click per
  banner a re-drawn clicked product is P+ itself, which step 5 rejects; with several clicks a
  re-drawn clicked product is not a negative either, so both definitions compare clicked with
  non-clicked products only.

Under uniformly shuffled banners ``q ≡ 1/n`` and the counterfactual disagreement equals the
classic one exactly when every banner has the same size (each banner's pairs then carry the
same weight, 1/n instead of 1; per banner the two always agree).

Both are ratios of per-banner sums; the result
(:class:`~recpack_ope.inference.result.LoggedEstimate`) carries the per-banner terms, a
delta-method standard error, paired comparisons between models, and the Monte Carlo error of
sampled rank marginals for banners over ``max_exact``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._chunks import rows_per_chunk
from .._progress import progress_bar
from .._validation import check_bool, check_positive_int, check_seed
from ..inference.result import LoggedEstimate
from .banner_marginals import MAX_EXACT, exact_marginals, sampled_banner_rank_marginals
from .feed_log import FeedLog

__all__ = ["Disagreement", "pairwise_disagreement", "counterfactual_disagreement"]


@dataclass(frozen=True, eq=False)
class Disagreement:
    """A disagreement metric bound to a log: the weighted (clicked, non-clicked) pairs.

    The weights do not depend on the model, so one object evaluates any number of models
    (:meth:`evaluate`). Build it with :meth:`classic` or :meth:`counterfactual`.

    Attributes
    ----------
    log : FeedLog
        The banners.
    name : str
        ``"pairwise disagreement"`` or ``"counterfactual disagreement"``.
    clicked, other : numpy.ndarray
        Log rows of the clicked product and of the non-clicked product of each pair.
    weight : numpy.ndarray
        Weight of each pair: 1 (classic) or ``q(other)`` at the click's rank.
    weight_error : numpy.ndarray or None
        Monte Carlo standard error of sampled weights (0 for exact ones).
    banners : numpy.ndarray
        Sessions with at least one clicked and one non-clicked product, in order.
    n_rejected : int
        Banners without a click or without a non-clicked product.
    """

    log: FeedLog
    name: str
    clicked: np.ndarray
    other: np.ndarray
    weight: np.ndarray
    weight_error: np.ndarray | None
    banners: np.ndarray
    n_rejected: int

    @classmethod
    def classic(cls, log: FeedLog) -> Disagreement:
        """Classic pairwise disagreement (§2.2): every (clicked, non-clicked) pair weighs 1."""
        clicked, other, banners, rejected = _pairs(log)
        return cls(
            log,
            "pairwise disagreement",
            clicked,
            other,
            np.ones(clicked.size),
            None,
            banners,
            rejected,
        )

    @classmethod
    def counterfactual(
        cls,
        log: FeedLog,
        *,
        max_exact: int = MAX_EXACT,
        n_samples: int = 10_000,
        seed: int = 0,
        progress: bool = False,
    ) -> Disagreement:
        """Counterfactual disagreement (§3.1, App. A) under the log's Plackett–Luce weights.

        Parameters
        ----------
        log : FeedLog
            Banners with ``logging_weight`` (PL weights normalised over each banner's
            candidates) and complete ranks 1..n.
        max_exact : int
            Banners of up to this many products get exact rank marginals (O(n·2ⁿ)); larger
            ones importance sampling with ``n_samples`` draws.
        seed : int
            Seed of the sampling.
        progress : bool
            Show a progress bar over banner sizes (on a terminal only).
        """
        if log.logging_weight is None:
            raise ValueError(
                "counterfactual disagreement needs the logging policy's Plackett–Luce weights: "
                "build the FeedLog with logging_weight=…"
            )
        max_exact = check_positive_int(max_exact, "max_exact")
        if max_exact > 20:
            raise ValueError(
                f"max_exact={max_exact} would need 2^{max_exact} floats per banner; use <= 20"
            )
        n_samples = check_positive_int(n_samples, "n_samples")
        seed = check_seed(seed)
        progress = check_bool(progress, "progress")
        sizes = np.diff(log.indptr)
        gaps = np.flatnonzero(log.rank[log.indptr[1:] - 1] != sizes)
        if gaps.size:
            s = gaps[0]
            raise ValueError(
                f"banner {log.session_label(log.indptr[s])!r} shows {sizes[s]} products but its "
                f"last rank is {log.rank[log.indptr[s + 1] - 1]}: counterfactual disagreement "
                "needs every displayed product (ranks 1..n)"
            )
        clicked, other, banners, rejected = _pairs(log)
        weight = np.empty(clicked.size)
        error = np.zeros(clicked.size)
        rng = np.random.default_rng(seed)
        session = log.session[clicked]
        pair_sizes = sizes[session]
        for n in progress_bar(
            np.unique(pair_sizes), desc="rank marginals by banner size", show=progress
        ):
            in_size = np.flatnonzero(pair_sizes == n)
            group = np.unique(session[in_size])  # banners of size n with pairs
            starts = log.indptr[group]
            w = log.logging_weight[starts[:, None] + np.arange(n)]
            outside = np.maximum(1.0 - w.sum(axis=1), 0.0)
            # Row of the banner in ``group`` and (rank of the click, position of the other).
            where = np.searchsorted(group, session[in_size])
            r = log.rank[clicked[in_size]] - 1
            p = other[in_size] - log.indptr[session[in_size]]
            if n <= max_exact:
                step = rows_per_chunk(1 << n)  # banners per batch: 2ⁿ masks each
                for lo in range(0, group.size, step):
                    q = exact_marginals(w[lo : lo + step], outside[lo : lo + step])
                    sel = (where >= lo) & (where < lo + step)
                    weight[in_size[sel]] = q[where[sel] - lo, r[sel], p[sel]]
            else:
                for b in range(group.size):
                    q, se = sampled_banner_rank_marginals(
                        w[b], outside[b], n_samples=n_samples, rng=rng
                    )
                    sel = where == b
                    weight[in_size[sel]] = q[r[sel], p[sel]]
                    error[in_size[sel]] = se[r[sel], p[sel]]
        return cls(
            log,
            "counterfactual disagreement",
            clicked,
            other,
            weight,
            error if error.any() else None,
            banners,
            rejected,
        )

    def evaluate(self, scores) -> LoggedEstimate:
        """Disagreement of a model: ``Σ num / Σ den`` over banners (lower is better).

        Parameters
        ----------
        scores : array_like or scipy.sparse matrix
            The model's score of every logged row (1-D), or a contexts × items matrix.

        Returns
        -------
        LoggedEstimate
            Value in [0, 1], per-banner terms (``user_ids`` are the banners' session codes),
            delta-method interval, paired comparisons, and the Monte Carlo error bound.
        """
        s = self.log.row_values(scores)
        plus, minus = s[self.clicked], s[self.other]
        banner = self.log.session[self.clicked]
        n = self.log.n_sessions
        num = np.bincount(banner, weights=self.weight * (plus < minus), minlength=n)[self.banners]
        den = np.bincount(banner, weights=self.weight * (plus != minus), minlength=n)[self.banners]
        if not den.sum() > 0:
            if not (self.weight > 0).any():  # the log's fault, not the model's
                raise ValueError(
                    f"no comparable pair for {self.name}: every (clicked, non-clicked) pair has "
                    "weight 0 (the logging policy never puts a non-clicked product at a click's "
                    "rank)"
                )
            raise ValueError(f"no comparable pair for {self.name}: the model ties every pair")
        error = 0.0
        if self.weight_error is not None:
            # num − value·den is linear in the weights; bound each banner by the triangle
            # inequality, banners are sampled independently.
            value = num.sum() / den.sum()
            coef = np.abs((plus < minus) - value * (plus != minus)) * self.weight_error
            per_banner = np.bincount(banner, weights=coef, minlength=n)
            error = float(np.sqrt(np.sum(per_banner**2)) / den.sum())
        return LoggedEstimate(
            name=self.name,
            terms=np.column_stack([num, den]),
            exponents=(1, -1),
            user_ids=self.banners,
            n_excluded_users=self.n_rejected,
            approximation_error=error,
        )


def _pairs(log: FeedLog):
    """Every (clicked row, non-clicked row) of the same banner; eligible banners; rejected count.

    A log without such a banner is refused, saying what its banners lack."""
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    click = log.reward > 0
    clicks = np.bincount(log.session, weights=click, minlength=log.n_sessions)
    sizes = np.diff(log.indptr)
    eligible = (clicks > 0) & (clicks < sizes)
    banners = np.flatnonzero(eligible)
    if not banners.size:
        without = int((clicks == 0).sum())
        raise ValueError(
            f"the log has no banner with both a clicked and a non-clicked product: of its "
            f"{log.n_sessions} banners, {without} have no click (reward > 0) and "
            f"{log.n_sessions - without} have every product clicked, so there is no pair to compare"
        )
    rows = np.flatnonzero(click & eligible[log.session])
    per_click = sizes[log.session[rows]]
    clicked = np.repeat(rows, per_click)
    offset = np.arange(clicked.size) - np.repeat(np.cumsum(per_click) - per_click, per_click)
    other = log.indptr[log.session[clicked]] + offset
    keep = ~click[other]
    return clicked[keep], other[keep], banners, int(log.n_sessions - banners.size)


def pairwise_disagreement(log: FeedLog, scores) -> LoggedEstimate:
    """Classic pairwise disagreement of ``scores`` on a banner log (Gilotte §2.2)."""
    return Disagreement.classic(log).evaluate(scores)


def counterfactual_disagreement(log: FeedLog, scores, **options) -> LoggedEstimate:
    """Counterfactual disagreement of ``scores`` (Gilotte §3.1, App. A); ``options`` go to
    :meth:`Disagreement.counterfactual`. Build the :class:`Disagreement` once to evaluate
    several models."""
    return Disagreement.counterfactual(log, **options).evaluate(scores)
