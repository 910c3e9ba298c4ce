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
import scipy.sparse as sp

from .. import registry
from .._validation import (
    as_csr,
    check_bool,
    check_choice,
    check_clip,
    check_finite_number,
    check_held_out_size,
    check_model,
    check_positive_int,
    check_random_state,
    shown,
)
from ..metrics.ranking import TopK, rank_in_batches
from ..metrics.stratified import BINNINGS
from ..reward.calibration import calibrated_reward_model
from .strata_report import ReportMetric, StrataReport, strata_report

__all__ = [
    "HeldOutReport",
    "HeldOutResult",
    "StratifiedOptions",
    "check_models",
    "check_rating_split",
    "check_relevant",
    "positives",
    "report_cutoff",
    "stratified_held_out",
    "user_scores",
]


@dataclass(frozen=True)
class StratifiedOptions:
    """Options of a propensity-stratified evaluation, checked at construction.

    Attributes
    ----------
    n_strata, binning
        Number of propensity strata (the paper: 2); ``"width"`` (the paper's) or ``"mass"``.
    clip : float, "auto" or None
        Clipping of the IPS and DR rows' weights: default the held-out estimators' own
        (:func:`recpack_ope.registry.default`); None: the paper's unclipped IPS.
    batch_users : int
        Users scored per batch.
    keep_rankings : bool
        Keep the held-out matrix, ranking and propensities in the :class:`HeldOutReport`.
    fit_on : {"all", "train"}
        The ratings whose item counts a propensity model is fitted on: every split's (as
        Cornac's propensities) or the training split's.

    Examples
    --------
    >>> StratifiedOptions(n_strata=3).binning
    'width'
    >>> options, others = StratifiedOptions.split({"n_strata": 3, "fmt": "UIR"})
    >>> options.n_strata, others
    (3, {'fmt': 'UIR'})
    >>> StratifiedOptions(binning="quantile")
    Traceback (most recent call last):
    ...
    ValueError: binning must be one of ('width', 'mass'), got 'quantile'
    """

    n_strata: int = registry.default("n_strata")
    binning: str = registry.default("binning")
    clip: float | str | None = registry.default("clip")
    batch_users: int = 1024
    keep_rankings: bool = False
    fit_on: str = "all"

    def __post_init__(self) -> None:
        check_clip(self.clip, allow_auto=True)
        check_positive_int(self.n_strata, "n_strata")
        if not isinstance(self.binning, str) or self.binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {shown(self.binning)}")
        check_positive_int(self.batch_users, "batch_users")
        check_bool(self.keep_rankings, "keep_rankings")
        check_choice(self.fit_on, ("all", "train"), "fit_on")

    @classmethod
    def split(cls, options: Mapping) -> tuple[StratifiedOptions, dict]:
        """These options, checked, from the keyword arguments ``options``, and the others (a
        framework's own): how an evaluation takes both as ``**options``."""
        fields = cls.__dataclass_fields__
        ours = {name: value for name, value in options.items() if name in fields}
        return cls(**ours), {name: v for name, v in options.items() if name not in fields}


def check_models(propensity, reward_model, recommender: str, example: str) -> None:
    """Refuse a ``propensity`` model without ``fit`` and a ``reward_model`` without ``score``
    (None is either's default), naming the framework's ``recommender`` and an ``example``.

    Examples
    --------
    >>> check_models(None, "MostPop", "a Cornac recommender", "MostPop()")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: reward_model must be a Cornac recommender (with fit and score, ...) or None, got str
    """
    what = "a propensity model fitted on the item counts (e.g. PowerLawPropensity(), "
    check_model(propensity, "fit", "propensity", what + "FixedPropensity(values))")
    what = f"{recommender} (with fit and score, e.g. {example})"
    check_model(reward_model, "score", "reward_model", what)


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


def positives(triplets, shape: tuple[int, int], threshold: float) -> sp.csr_matrix:
    """The users × items matrix of the ratings >= ``threshold`` among ``triplets`` (``(users,
    items, ratings)`` arrays, e.g. a split's training and validation sets), a repeated rating
    counted each time; items past ``shape`` (unknown to the models) are dropped.

    Examples
    --------
    >>> triplets = [([0, 1, 1], [0, 2, 5], [5.0, 3.0, 4.0]), ([0], [0], [4.0])]
    >>> positives(triplets, (2, 3), 4.0).toarray().tolist()
    [[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    found = sp.csr_matrix(shape)
    for users, items, ratings in (map(np.asarray, t) for t in triplets):
        keep = (ratings >= threshold) & (items < shape[1])
        found += sp.csr_matrix((np.ones(keep.sum()), (users[keep], items[keep])), shape=shape)
    return found


def user_scores(score, n_items: int, default: Callable[[], float], fails=()) -> Callable:
    """``user → scores`` of ``n_items`` items from a model's ``score(user)``: a longer row is
    cut, a shorter one padded with its minimum (items the model does not know rank last), and
    a user whose scoring raises one of ``fails`` gets ``default()`` for every item.

    Examples
    --------
    >>> one_user = user_scores(lambda u: [[0.5, 0.9]] if u else 1 / 0, 3, lambda: 0.1,
    ...                        ZeroDivisionError)
    >>> one_user(1).tolist(), one_user(0).tolist()
    ([0.5, 0.9, 0.5], [0.1, 0.1, 0.1])
    """

    def one_user(user: int) -> np.ndarray:
        try:
            scores = np.asarray(score(user), dtype=np.float64).ravel()
        except fails:
            return np.full(n_items, float(default()))
        missing = max(n_items - scores.size, 0)
        return np.pad(scores, (0, missing), constant_values=scores.min())[:n_items]

    return one_user


class HeldOutResult:
    """A :class:`HeldOutReport` in a framework's result class (mixed in, filled by
    :meth:`keep`): the report, its rows as a table, its unreliable IPS values; printed as
    ``[model_name]`` (the framework result's) and the report's table.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.propensity.discount import LogDiscount
    >>> metrics = {"nDCG": ReportMetric("ndcg", LogDiscount())}
    >>> out = stratified_held_out(np.eye(2), lambda u: np.eye(2)[u], np.ones(2), metrics)
    >>> result = HeldOutResult()
    >>> result.keep(out)
    >>> float(result.rows().loc["Closed", "nDCG"]), result.user_index.tolist()
    (1.0, [0, 1])
    >>> result.model_name = "Identity"
    >>> print(result)  # doctest: +ELLIPSIS
    [Identity]
                nDCG  SIZE
    Closed         1     2
    IPS            1     2
    IPS ESS/n      1     2
    Q1             1     2
    Q2           nan     0
    Stratified     1     2
    IPS rows marked unreliable: nDCG (ESS 2 < 50); clip the weights ... with caution
    IPS rows with propensities off by up to ×2: nDCG [1, 1]
    """

    def keep(self, evaluation: HeldOutReport) -> None:
        """Hold ``evaluation``: ``report`` (and its ``estimates``, ``ips``, ``dr``),
        ``user_index`` (its ``user_ids``), ``y_true``, ``ranking`` and ``propensity``."""
        self.report, self.user_index = evaluation.report, evaluation.user_ids
        self.estimates, self.ips, self.dr = self.report.estimates, self.report.ips, self.report.dr
        self.y_true, self.ranking = evaluation.y_true, evaluation.ranking  # keep_rankings=True
        self.propensity = evaluation.propensity

    def rows(self):
        """The table as a pandas DataFrame: Closed, IPS, IPS ESS/n, (DR,) Q1…QS, Stratified ×
        metrics and SIZE."""
        import pandas as pd

        return pd.DataFrame.from_dict(self.report.rows(), orient="index")

    def unreliable_ips(self) -> dict:
        """Metric → diagnostics of the IPS values whose ESS ratio is below threshold."""
        return self.report.unreliable_ips()

    def __str__(self) -> str:
        return f"[{self.model_name}]\n{self.report.table()}"


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
