"""Propensity-stratified evaluation of one model on a random held-out split, for any framework.

A framework adapter gives the held-out positives, the items each user saw in training, a
``users → scores`` callable of the fitted model and the propensities;
:func:`stratified_held_out` ranks the held-out users in batches (seen items excluded unless
held out), adds a calibrated reward model for the DR row when asked, and returns the
:class:`~recpack_ope.evaluation.strata_report.StrataReport` with the rows it evaluated.
:class:`StratifiedOptions` and :func:`check_rating_split` check the evaluation's arguments
when they are given, before any split or training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .._validation import (
    as_csr,
    check_bool,
    check_clip,
    check_finite_number,
    check_held_out_size,
    check_positive_int,
    check_random_state,
    shown,
)
from ..metrics.ranking import TopK, rank_in_batches
from ..metrics.stratified import BINNINGS
from ..propensity.weights import RECOMMENDED_CLIP
from ..reward.calibration import calibrated_reward_model
from .strata_report import ReportMetric, StrataReport, strata_report

__all__ = [
    "HeldOutReport",
    "StratifiedOptions",
    "check_rating_split",
    "check_relevant",
    "report_cutoff",
    "stratified_held_out",
]


@dataclass(frozen=True)
class StratifiedOptions:
    """Options of a propensity-stratified evaluation, checked at construction.

    Attributes
    ----------
    n_strata, binning
        Number of propensity strata (the paper: 2); ``"width"`` (the paper's) or ``"mass"``.
    clip : float, "auto" or None
        Clipping of the IPS and DR rows' weights (None: the paper's unclipped IPS).
    batch_users : int
        Users scored per batch.
    keep_rankings : bool
        Keep the held-out matrix, ranking and propensities in the :class:`HeldOutReport`.

    Examples
    --------
    >>> StratifiedOptions(n_strata=3).binning
    'width'
    >>> StratifiedOptions(binning="quantile")
    Traceback (most recent call last):
    ...
    ValueError: binning must be one of ('width', 'mass'), got 'quantile'
    """

    n_strata: int = 2
    binning: str = "width"
    clip: float | str | None = RECOMMENDED_CLIP
    batch_users: int = 1024
    keep_rankings: bool = False

    def __post_init__(self) -> None:
        check_clip(self.clip, allow_auto=True)
        check_positive_int(self.n_strata, "n_strata")
        if not isinstance(self.binning, str) or self.binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {shown(self.binning)}")
        check_positive_int(self.batch_users, "batch_users")
        check_bool(self.keep_rankings, "keep_rankings")


def check_rating_split(
    data, test_size, val_size, rating_threshold, seed, framework: str = "Cornac", **flags
) -> tuple[int, int, int]:
    """Check the arguments of a random split of ``data`` (rating triplets) into training,
    validation and test ratings, as Cornac's ``RatioSplit`` reads them, and return the three
    counts: a fraction f of n ratings holds out ceil(f·n), an integer that many. ``flags``
    (e.g. ``verbose=False``) must be True or False; ``seed`` seeds a RandomState.

    Examples
    --------
    >>> check_rating_split([("u", "i", 5.0)] * 10, 0.2, 0.1, 4.0, seed=1, verbose=False)
    (7, 1, 2)
    """
    if isinstance(data, (str, bytes)) or not hasattr(data, "__len__") or not len(data):
        raise ValueError("data must be a non-empty list of (user, item, rating) triplets")
    check_held_out_size(test_size, "test_size")
    check_held_out_size(val_size, "val_size", allow_zero=True)
    check_finite_number(rating_threshold, "rating_threshold")
    check_random_state(seed, framework=framework)
    for name, flag in flags.items():
        check_bool(flag, name)
    n = len(data)
    val, test = (math.ceil(s * n) if s < 1 else int(s) for s in (val_size, test_size))
    if val + test >= n:
        raise ValueError(
            f"test_size={shown(test_size)} and val_size={shown(val_size)} leave no training "
            f"data among the {n} ratings: they hold out {test} and {val}"
        )
    return n - val - test, val, test


def check_relevant(ratings, rating_threshold, where: str = "test") -> None:
    """Refuse held-out ``ratings`` none of which reaches ``rating_threshold``.

    Examples
    --------
    >>> check_relevant([1.0, 3.0], 4.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: no test rating reaches rating_threshold=4.0 (the largest is 3.0): ...
    """
    ratings = np.asarray(ratings, dtype=np.float64)
    if not (ratings >= rating_threshold).any():
        largest = shown(ratings.max()) if ratings.size else "none: there are no ratings"
        raise ValueError(
            f"no {where} rating reaches rating_threshold={shown(rating_threshold)} (the largest "
            f"is {largest}): nothing is relevant"
        )


@dataclass(frozen=True)
class HeldOutReport:
    """A :func:`stratified_held_out` evaluation.

    Attributes
    ----------
    report : StrataReport
        Closed, IPS, (DR,) per-stratum and stratified rows of every metric.
    user_ids : numpy.ndarray
        The row of the held-out matrix of every evaluated user (the report's user 0, 1, …).
    y_true, ranking, propensity
        The evaluated rows, their ranking and the propensities, with ``keep_rankings``; else
        None.
    """

    report: StrataReport
    user_ids: np.ndarray
    y_true: object = None
    ranking: TopK | None = None
    propensity: np.ndarray | None = None

    def values(self) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
        """Column → stratified value, and column → {row of the held-out matrix → the user's
        value}: the averages and per-user results a framework's result keeps."""
        estimates = self.report.estimates.items()
        averages = {name: r.value for name, r in estimates}
        per_user = {
            name: dict(zip(self.user_ids[r.user_ids].tolist(), r.per_user.tolist(), strict=True))
            for name, r in estimates
        }
        return averages, per_user


def report_cutoff(metrics: Mapping[str, ReportMetric]) -> int | None:
    """How deep the metrics read a ranking: the largest cutoff, None when any reads it all."""
    cutoffs = [m.discount.cutoff if m.discount is not None else None for m in metrics.values()]
    return None if None in cutoffs else max(cutoffs)


def stratified_held_out(
    held,
    score: Callable[[np.ndarray], np.ndarray],
    propensity,
    metrics: Mapping[str, ReportMetric],
    options: StratifiedOptions | None = None,
    *,
    seen=None,
    reward: Callable[[np.ndarray], np.ndarray] | None = None,
    clicks=None,
    model: str = "the model",
    progress: str | None = None,
) -> HeldOutReport:
    """Evaluate one fitted model on the users with held-out positives.

    Parameters
    ----------
    held : scipy.sparse matrix, shape (n_users, n_items)
        Held-out positives of every user (rows without any are not evaluated).
    score : callable
        ``score(users) -> (len(users), n_items)`` scores of the model.
    propensity : 1-D array, shape (n_items,)
        Exposure propensities: the strata and the IPS (and DR) rows' weights.
    metrics : mapping of str to ReportMetric
        Column name → metric; the ranking is as deep as the deepest (:func:`report_cutoff`).
    options : StratifiedOptions
        Strata, clipping, batch size, whether to keep the ranking.
    seen : scipy.sparse matrix, optional
        Items each user saw (e.g. in training): not candidates unless held out.
    reward, clicks
        A reward model's ``users → scores`` and the positives (all users × items) its scores
        are calibrated on (e.g. the validation set's) with the propensities: adds the DR row.
    model, progress
        The model's name in the reliability warning; the ranking's progress bar (None: none).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from recpack_ope.propensity.discount import LogDiscount
    >>> held = sp.csr_matrix([[1, 0, 0], [0, 0, 0], [0, 1, 1]])
    >>> scores = np.array([[0.2, 0.9, 0.5], [0.0, 0.0, 0.0], [0.1, 0.3, 0.2]])
    >>> seen = sp.csr_matrix([[0, 1, 0], [0, 0, 0], [0, 0, 0]])
    >>> metrics = {"Recall@1": ReportMetric("recall", LogDiscount(1))}
    >>> out = stratified_held_out(held, lambda u: scores[u], np.array([0.5, 1.0, 1.0]), metrics,
    ...                           StratifiedOptions(clip=None), seen=seen)
    >>> out.user_ids.tolist(), out.report.estimates["Recall@1"].holdout.value
    ([0, 2], 0.25)
    """
    options = StratifiedOptions() if options is None else options
    if not isinstance(metrics, Mapping) or not metrics:
        raise ValueError("metrics is empty: give ranking metrics")
    held = as_csr(held, "held")
    users = np.flatnonzero(np.diff(held.indptr) > 0)
    ranking = rank_in_batches(
        score,
        users,
        report_cutoff(metrics),
        held.shape[1],
        exclude=seen,
        keep=held,
        batch_users=options.batch_users,
        progress=progress,
    )
    y_true, p = held[users], np.asarray(propensity)
    rewards = None
    if reward is not None:
        step = options.batch_users
        scores = np.vstack([reward(users[s : s + step]) for s in range(0, users.size, step)])
        rewards = calibrated_reward_model(scores, as_csr(clicks, "clicks")[users], p)
    report = strata_report(
        y_true,
        ranking,
        p,
        metrics,
        n_strata=options.n_strata,
        binning=options.binning,
        clip=options.clip,
        reward_model=rewards,
        model=model,
    )
    kept = (y_true, ranking, p) if options.keep_rankings else ()
    return HeldOutReport(report, users, *kept)
