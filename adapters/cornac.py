"""recpack-ope for Cornac (the ``cornac`` extra): the registry's estimators as Cornac metrics
(``PlainDCG``, ``IPSDCG``, …, named e.g. ``IPS-DCG@10``), a propensity-stratified evaluation
for ``cornac.Experiment`` and RPP and ties with the best between an experiment's models.

Translation only: Cornac's item indices (raw ids through ``global_iid_map``), its candidates
(every known item but the user's positive training and validation items) and its
``rating_threshold``; every value and table comes from the core (:mod:`recpack_ope.registry`,
:mod:`recpack_ope.evaluation.strata_report`, :mod:`recpack_ope.inference.significance`).
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp
from cornac.eval_methods import CrossValidation, RatioSplit
from cornac.eval_methods.base_method import BaseMethod
from cornac.exception import ScoreException
from cornac.experiment.result import Result
from cornac.metrics import NDCG, RankingMetric, Recall
from tqdm.auto import tqdm

from .._validation import check_bool, check_clip, check_finite_number, check_positive_int, shown
from ..inference.diagnostics import ReliabilityWarning
from ..inference.significance import TiedWithBest
from ..inference.significance import tied_with_best as _tied_with_best
from ..inference.systems import PreferenceMatrix, SystemScores
from ..metrics.ranking import TopK
from ..metrics.rpp import RecallLevels
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..metrics.simpsons_paradox import simpsons_paradox as _simpsons_paradox
from ..evaluation.strata_report import ReportMetric, StrataReport, strata_report
from ..metrics.stratified import BINNINGS
from ..propensity.discount import Discount, LogDiscount
from ..propensity.models import FixedPropensity, PowerLawPropensity
from ..propensity.weights import RECOMMENDED_CLIP, propensities_by_raw_id
from ..registry import ESTIMATORS, Estimator
from ..reward import ScoreCalibration

_OFFERED = [
    e
    for e in ESTIMATORS.values()
    if e.camel
    and e.data == "held_out"
    and e.needs in ((), ("propensity",))
    and e.weighting != "stratified"
]
__all__ = [e.camel for e in _OFFERED] + [
    "CornacAdapter", "PropensityStratifiedEvaluation", "StratifiedModelResult", "add_rpp",
    "item_counts", "rank_test_users", "simpsons_paradox", "tied_with_best",
]  # fmt: skip


def _cutoff(k) -> int | None:
    """Cornac's ``k`` (-1: the whole ranking) as the core's cutoff (None)."""
    if isinstance(k, (list, tuple, np.ndarray)):  # Cornac rebuilds those without propensities
        raise ValueError(f"k must be one cutoff, got {shown(k)}: make one metric per cutoff")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < -1 or k == 0:
        raise ValueError(f"k must be a positive integer or -1 (whole ranking), got {shown(k)}")
    return None if k == -1 else int(k)


def _item_vector(fitted, n_items: int | None = None):
    """A fitted propensity model with one propensity per (Cornac internal) item."""
    p = fitted.propensity_
    if sp.issparse(p) or np.ndim(p) != 1:
        raise ValueError(
            f"propensity must be one value per item (a 1-D vector), got shape "
            f"{np.shape(p)}: Cornac's metrics score one user at a time"
        )
    if n_items is not None and np.shape(p)[0] != n_items:
        raise ValueError(
            f"propensity has {np.shape(p)[0]} values but the eval method has "
            f"{n_items} items: give one per Cornac internal item index"
        )
    return fitted


class OPEMetric(RankingMetric):
    """A registry estimator as a Cornac ranking metric, named by the registry (``IPS-DCG@10``).

    ``k`` is the cutoff (-1: the whole ranking); ``propensity`` (weighted estimators only) one
    value per Cornac internal item index (:class:`CornacAdapter` places raw-id mappings and
    fits models); ``clip`` clips its IPS weights; ``discount`` defaults to ``LogDiscount``.
    Cornac's loop calls :meth:`compute` once per user, so estimators that are not means of
    per-user values and ``clip="auto"`` work only in :class:`PropensityStratifiedEvaluation`.
    """

    estimator: Estimator

    def __init__(self, k=-1, propensity=None, clip=RECOMMENDED_CLIP, discount=None):
        cutoff, e, cls = _cutoff(k), self.estimator, type(self).__name__
        if discount is not None and not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        if cutoff is None and "recall" in e.name:
            raise ValueError(f"k must be a positive integer for {cls}, got -1")
        check_clip(clip, allow_auto=True)
        if e.weighted and propensity is None:
            raise ValueError(
                f"{cls} needs propensity=; use {ESTIMATORS[e.plain].camel} for the "
                "unweighted estimator"
            )
        if not e.weighted and propensity is not None:
            weighted = next(w.camel for w in _OFFERED if w.plain == e.name and w.weighted)
            raise ValueError(f"{cls} is unweighted and takes no propensity; use {weighted}")
        if hasattr(propensity, "fit") and not hasattr(propensity, "propensity_"):
            raise ValueError(
                f"{type(propensity).__name__} is not fitted: fit it through "
                "CornacAdapter(...).fit(eval_method)"
            )
        if propensity is not None and not hasattr(propensity, "propensity_"):
            propensity = FixedPropensity(propensity).fit()
        self.propensity = None if propensity is None else _item_vector(propensity)
        self.clip, discount = clip, discount or LogDiscount()
        self.discount = discount if cutoff is None else discount.with_cutoff(cutoff)
        super().__init__(name=e.display(self.discount), k=k)

    def report_metric(self) -> ReportMetric:
        """This metric as a column of the core's :func:`~recpack_ope.evaluation.strata_report`."""
        return ReportMetric(self.estimator.name, self.discount, self.propensity, self.clip)

    def compute(self, gt_pos, pd_rank, **kwargs) -> float:
        """One user's value, as Cornac's ranking loop asks for it (Cornac ≥ 2 arguments)."""
        where = "evaluate it with recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"
        if not self.estimator.per_user_mean:
            raise ValueError(
                f"{self.name} is not a mean of per-user values, which Cornac's "
                f"per-user averaging cannot produce; {where}"
            )
        if self.propensity is not None and isinstance(self.clip, str):
            raise ValueError(
                f"{self.name} has clip={self.clip!r}, chosen from all users at "
                f"once; Cornac's ranking loop computes one user at a time: give a "
                f"number or None, or {where}"
            )
        gt_pos = np.asarray(gt_pos, dtype=np.int64)
        ranked = np.asarray(pd_rank, dtype=np.int64)[: self.discount.cutoff]
        if gt_pos.size and gt_pos.min() < 0:
            raise ValueError(f"gt_pos has item index {int(gt_pos.min())}; Cornac's are >= 0")
        seen = np.concatenate([gt_pos, ranked, [-1]]).max() + 1
        n_items = seen if self.propensity is None else self.propensity.propensity_.shape[0]
        if seen > n_items:
            raise ValueError(
                f"item index {seen - 1} has no propensity: the propensities cover "
                f"{n_items} items (fit them on this eval method's data)"
            )
        y = sp.csr_matrix((np.ones(gt_pos.size), (np.zeros_like(gt_pos), gt_pos)), (1, n_items))
        with warnings.catch_warnings():  # one user's weights do not diagnose the average
            warnings.simplefilter("ignore", ReliabilityWarning)
            return self.report_metric().own(y, TopK(ranked[None, :])).value


for _e in _OFFERED:
    globals()[_e.camel] = type(_e.camel, (OPEMetric,), {
        "estimator": _e, "__module__": __name__,
        "__doc__": f"{_e.label} ({_e.reference}) as a Cornac metric: :class:`OPEMetric`.",
    })  # fmt: skip


def item_counts(eval_method: BaseMethod, on: str = "all") -> np.ndarray:
    """Ratings per Cornac internal item index: of train, validation and test (``"all"``,
    Cornac's propensity estimate) or of the training set (``"train"``).

    Examples
    --------
    >>> item_counts(RatioSplit(triplets, seed=1)).shape  # doctest: +SKIP
    (1682,)
    """
    _check_on(on, "on")
    if not isinstance(eval_method, BaseMethod) or eval_method.train_set is None:
        raise TypeError(
            f"eval_method must be a Cornac eval method after its split (e.g. "
            f"RatioSplit(data, ...)), got {type(eval_method).__name__}"
        )
    sets = [eval_method.train_set] + (
        [s for s in (eval_method.val_set, eval_method.test_set) if s is not None]
        if on == "all"
        else []
    )
    items = np.concatenate([np.asarray(s.uir_tuple[1]) for s in sets])
    return np.bincount(items, minlength=eval_method.total_items).astype(np.float64)


def _check_on(on, name: str) -> None:
    if on not in ("all", "train"):
        raise ValueError(f"{name} must be 'all' or 'train', got {shown(on)}")


def _fit_on_counts(model, eval_method: BaseMethod, on: str):
    fitted = model.fit(item_counts(eval_method, on))
    if not hasattr(fitted, "propensity_"):
        raise TypeError(
            f"{type(model).__name__}.fit(counts) returned {type(fitted).__name__}, "
            "not a fitted propensity model (set propensity_ and return self)"
        )
    return _item_vector(fitted, eval_method.total_items)


class CornacAdapter:
    """Builds the Cornac metrics with propensities on an eval method's item indices.

    ``propensity``: None (unweighted), a model fitted on the eval method's item counts
    (``on``: ``"all"`` or ``"train"``), a mapping or ``pandas.Series`` keyed by raw item id, or
    one value per internal index. ``clip`` and ``discount`` as in :class:`OPEMetric`.

    Examples
    --------
    >>> metrics = CornacAdapter(PowerLawPropensity()).fit(split).metrics(k=10)  # doctest: +SKIP
    >>> [m.name for m in metrics]  # doctest: +SKIP
    ['IPS-DCG@10', 'IPS-nDCG@10']
    """

    def __init__(self, propensity=None, discount=None, clip=RECOMMENDED_CLIP, on: str = "all"):
        _check_on(on, "on")
        check_clip(clip, allow_auto=True)
        if discount is not None and not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        self.given = not (
            propensity is None
            or hasattr(propensity, "fit")
            or isinstance(propensity, (Mapping, pd.Series))
        )
        if self.given or isinstance(propensity, FixedPropensity):
            values = getattr(propensity, "propensity", getattr(propensity, "propensity_", None))
            _item_vector(FixedPropensity(propensity if values is None else values).fit())
        self.propensity, self.discount, self.clip, self.on = propensity, discount, clip, on

    def fit(self, eval_method: BaseMethod) -> CornacAdapter:
        """Fit or place the propensities on ``eval_method``'s items (after its split)."""
        item_counts(eval_method)  # refuses anything but an eval method after its split
        p = self.propensity
        if isinstance(p, (Mapping, pd.Series)):
            raws = np.empty(len(eval_method.global_iid_map), dtype=object)
            for raw, index in eval_method.global_iid_map.items():
                raws[index] = raw
            p = FixedPropensity(propensities_by_raw_id(p, raws, "the eval method's"))
        elif self.given:
            p = FixedPropensity(getattr(p, "propensity_", p))
        self.propensity_ = None if p is None else _fit_on_counts(p, eval_method, self.on)
        return self

    def metrics(self, k: int = 10) -> list[OPEMetric]:
        """IPS-DCG@k and IPS-nDCG@k (DCG@k and nDCG@k without propensities)."""
        if not hasattr(self, "propensity_"):
            raise ValueError("call adapter.fit(eval_method) before metrics()")
        names = ("dcg", "ndcg") if self.propensity_ is None else ("ips_dcg", "ips_ndcg")
        kwargs = {} if self.propensity_ is None else {"propensity": self.propensity_}
        return [
            globals()[ESTIMATORS[n].camel](k, clip=self.clip, discount=self.discount, **kwargs)
            for n in names
        ]


def _one_user_scores(model, user: int, n_items: int) -> np.ndarray:
    """``model.score(user)`` over the first ``n_items`` items, as Cornac's ``rank`` gets it."""
    try:
        scores = np.asarray(model.score(user), dtype=np.float64).ravel()  # EASE: a 1×n row
    except ScoreException:
        return np.full(n_items, float(model.default_score()))
    return np.concatenate([scores, np.full(max(n_items - scores.size, 0), scores.min())])[:n_items]


class _Scorer:
    """Scores of a batch of users: one product of the model's vectors when Cornac documents
    its scores as dot products and the product reproduces ``model.score`` on the batch's first
    user (items in rows, ``U @ V.T``, or in columns, EASE's ``U @ B``); else user by user."""

    def __init__(self, model, n_items: int):
        from cornac.models.recommender import MEASURE_DOT

        self.model = getattr(model, "best_model", None) or model  # hyperopt searches wrap it
        self.n_items, self.products = n_items, []
        try:
            self.batched = self.model.get_vector_measure() == MEASURE_DOT
        except (AttributeError, NotImplementedError):
            self.batched = False
        if self.batched:
            users = self.model.get_user_vectors()
            self.users_ = sp.csr_matrix(users) if sp.issparse(users) else np.asarray(users)
            items = np.asarray(self.model.get_item_vectors())
            self.products = [items[:n_items].T]
            if items.ndim == 2 and items.shape[0] == self.users_.shape[1]:
                self.products.append(items[:, :n_items])

    def __call__(self, users: np.ndarray) -> np.ndarray:
        if self.batched and users.max() < self.users_.shape[0]:
            reference = _one_user_scores(self.model, int(users[0]), self.n_items)
            for product in self.products:
                if product.shape != (self.users_.shape[1], self.n_items):
                    continue
                scores = np.asarray(self.users_[users] @ product, dtype=np.float64)
                if np.allclose(scores[0], reference, rtol=1e-4, atol=1e-6):
                    self.products = [product]
                    return scores
            self.batched = False
        return np.vstack([_one_user_scores(self.model, int(u), self.n_items) for u in users])


def _known_items(eval_method: BaseMethod) -> int:
    """Items Cornac ranks: the training items, or every item when unknowns are kept."""
    return eval_method.train_set.num_items if eval_method.exclude_unknowns else (
        eval_method.total_items)  # fmt: skip


def _positives(eval_method: BaseMethod, dataset, n_items: int) -> sp.csr_matrix:
    """users × known items of a dataset's ratings ≥ the eval method's rating_threshold."""
    users, items, ratings = (np.asarray(a) for a in dataset.uir_tuple)
    keep = (ratings >= eval_method.rating_threshold) & (items < n_items)
    shape = (eval_method.total_users, n_items)
    return sp.csr_matrix((np.ones(keep.sum()), (users[keep], items[keep])), shape=shape)


def rank_test_users(eval_method, model, users, cutoff, batch_users=1024, verbose=False) -> TopK:
    """Top-``cutoff`` (None: all) of Cornac's candidates for ``users`` (Cornac user indices),
    scored in batches; ties go to the lower item index, as in Cornac's ``rank``.

    Examples
    --------
    >>> model = MostPop().fit(split.train_set)  # doctest: +SKIP
    >>> rank_test_users(split, model, np.array([0, 1]), 5).items.shape  # doctest: +SKIP
    (2, 5)
    """
    item_counts(eval_method)
    users = np.asarray(users)
    if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):
        raise ValueError(
            f"users must be a 1-D array of Cornac user indices, got dtype "
            f"{users.dtype} and shape {users.shape}"
        )
    outside = np.flatnonzero((users < 0) | (users >= eval_method.total_users))
    if outside.size:
        raise ValueError(
            f"users has user index {int(users[outside[0]])} at position "
            f"{int(outside[0])}, outside the eval method's users "
            f"0..{eval_method.total_users - 1}"
        )
    n = _known_items(eval_method)
    seen = [
        _positives(eval_method, s, n)
        for s in (eval_method.train_set, eval_method.val_set)
        if s is not None
    ]
    held = _positives(eval_method, eval_method.test_set, n)
    return _rank(model, users.astype(np.int64), cutoff, held, sum(seen), batch_users, verbose)


def _rank(model, users, cutoff, held, seen, batch_users, verbose) -> TopK:
    """Top ``cutoff`` of ``users`` with ``seen`` items excluded unless ``held`` out."""
    cutoff = check_positive_int(cutoff, "cutoff", allow_none=True)
    batch_users = check_positive_int(batch_users, "batch_users")
    scorer, k, parts = _Scorer(model, held.shape[1]), cutoff or held.shape[1], []
    for start in tqdm(range(0, users.size, batch_users), desc=f"Ranking [{model.name}]",
                      disable=not verbose):  # fmt: skip
        rows = users[start : start + batch_users]
        scores = scorer(rows)
        scores[(seen[rows].toarray() > 0) & ~(held[rows].toarray() > 0)] = -np.inf
        parts.append(TopK.from_scores(scores, k))
    return TopK.stack(parts) if parts else TopK(np.empty((0, min(k, held.shape[1])), np.int64))


class StratifiedModelResult(Result):
    """A model's :class:`~recpack_ope.evaluation.strata_report.StrataReport` as a Cornac
    ``Result`` (``metric_avg_results``: the Stratified values), printed as its table.

    ``estimates``, ``ips`` and ``dr`` are the report's; ``user_index`` the Cornac user of
    every held-out row; ``y_true``, ``ranking`` and ``propensity`` are kept with
    ``keep_rankings=True`` for re-analysis without retraining.
    """

    def __init__(self, model_name, report: StrataReport, user_index, kept=(None, None, None)):
        averages = OrderedDict((name, r.value) for name, r in report.estimates.items())
        per_user = OrderedDict(
            (name, dict(zip(user_index[r.user_ids].tolist(), r.per_user.tolist(), strict=True)))
            for name, r in report.estimates.items())  # fmt: skip
        super().__init__(model_name, averages, per_user)
        self.report, self.user_index = report, user_index
        self.estimates, self.ips, self.dr = report.estimates, report.ips, report.dr
        self.y_true, self.ranking, self.propensity = kept

    def rows(self) -> pd.DataFrame:
        """The table: Closed, IPS, IPS ESS/n, (DR,) Q1…QS, Stratified × metrics and SIZE."""
        return pd.DataFrame.from_dict(self.report.rows(), orient="index")

    def unreliable_ips(self) -> dict:
        """Metric → diagnostics of the IPS values whose ESS ratio is below threshold."""
        return self.report.unreliable_ips()

    def __str__(self) -> str:
        return f"[{self.model_name}]\n{self.report.table()}"


def _size(size, name: str, zero: bool):
    """A held-out size as RatioSplit reads it: a fraction in (0, 1) or a count >= 1 (0 too
    where ``zero``); Cornac would read 0 as every rating and 1.5 as a count."""
    whole = isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_))
    real = isinstance(size, (float, np.floating))
    if (whole and size >= 1 - zero) or (real and (0 < size < 1 or (zero and size == 0))):
        return size
    raise ValueError(
        f"{name} must be a fraction of the ratings in {'[' if zero else '('}0, 1) "
        f"or a number of ratings (an integer >= {1 - zero}), got {shown(size)}"
    )


class PropensityStratifiedEvaluation(RatioSplit):
    """Propensity-stratified evaluation (Jadidinejad et al., TOIS 2021) for ``cornac.Experiment``.

    A ``RatioSplit`` (same arguments and split) whose ``evaluate`` fits the model, ranks the
    held-out users and returns the core's :func:`~recpack_ope.evaluation.strata_report` of each
    metric as a :class:`StratifiedModelResult`, printing its Closed / IPS / IPS ESS/n / (DR /)
    Q1…QS / Stratified table; the experiment's table holds the Stratified values.

    Parameters
    ----------
    n_strata, binning
        Number of strata (the paper: 2); ``"width"`` (the paper's) or ``"mass"`` bins.
    propensity : propensity model or None
        Fitted on the item counts (``fit_on``: ``"all"``, Cornac's, or ``"train"``); default
        ``PowerLawPropensity(variant="cornac")``.
    clip : float, "auto" or None
        Clipping of the IPS and DR rows' weights (None: the paper's unclipped IPS).
    reward_model : Cornac recommender, optional
        Adds the DR row: fitted on the training set, its scores Platt-calibrated on the
        validation positives (else the training ones) with the propensities.
    batch_users, keep_rankings
        Users scored per batch; keep the held-out matrix, ranking and propensities.

    Notes
    -----
    Stratum shares count the positive held-out feedback the metrics evaluate (Cornac's code
    counts every test rating). With ``show_validation`` and a validation set, ``evaluate``
    also returns the report on the validation positives (without DR).

    Examples
    --------
    >>> pse = PropensityStratifiedEvaluation(triplets, rating_threshold=4, seed=1)  # doctest: +SKIP
    >>> cornac.Experiment(pse, [BPR(k=10)], metrics=[NDCG(k=10)]).run()  # doctest: +SKIP
    """

    def __init__(self, data, test_size=0.2, val_size=0.0, n_strata=2, binning="width",
                 propensity=None, fit_on="all", rating_threshold=1.0, seed=None,
                 exclude_unknowns=True, verbose=False, batch_users=1024, keep_rankings=False,
                 clip=RECOMMENDED_CLIP, reward_model=None, **kwargs):  # fmt: skip
        if binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
        check_clip(clip, allow_auto=True)
        self.n_strata, self.batch_users = (check_positive_int(v, n) for v, n in (
            (n_strata, "n_strata"), (batch_users, "batch_users")))  # fmt: skip
        _check_on(fit_on, "fit_on")
        check_finite_number(rating_threshold, "rating_threshold")
        integer = isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_))
        if not (seed is None or isinstance(seed, np.random.RandomState) or (
                integer and 0 <= seed < 2**32)):  # fmt: skip
            raise ValueError(
                "seed must be None, an integer in 0..2**32 − 1 or a numpy "
                f"RandomState (Cornac's), got {shown(seed)}"
            )
        for name, flag in (("exclude_unknowns", exclude_unknowns), ("verbose", verbose),
                           ("keep_rankings", keep_rankings)):  # fmt: skip
            check_bool(flag, name)
        if propensity is not None and not callable(getattr(propensity, "fit", None)):
            raise TypeError(
                "propensity must be a propensity model fitted on the item counts "
                "(e.g. PowerLawPropensity(), FixedPropensity(values)) or None, got "
                f"{type(propensity).__name__}"
            )
        if reward_model is not None and not callable(getattr(reward_model, "score", None)):
            raise TypeError(
                "reward_model must be a Cornac recommender (with fit and score, e.g."
                f" MostPop()) or None, got {type(reward_model).__name__}"
            )
        if isinstance(data, (str, bytes)) or not hasattr(data, "__len__") or not len(data):
            raise ValueError("data must be a non-empty list of (user, item, rating) triplets")
        sizes = _size(val_size, "val_size", True), _size(test_size, "test_size", False)
        try:
            RatioSplit.validate_size(*sizes, len(data))
        except ValueError as error:
            raise ValueError(
                f"test_size={shown(test_size)} and val_size={shown(val_size)} "
                f"leave no training data among the {len(data)} ratings: "
                f"{error}"
            ) from None
        super().__init__(data, test_size, val_size, rating_threshold, seed, exclude_unknowns,
                         verbose, **kwargs)  # fmt: skip
        ratings = np.asarray(self.test_set.uir_tuple[2])
        if not (ratings >= rating_threshold).any():
            raise ValueError(
                f"no test rating reaches rating_threshold={shown(rating_threshold)}"
                f" (the largest is {shown(ratings.max())}): nothing is relevant"
            )
        self.binning, self.keep_rankings, self.clip = binning, keep_rankings, clip
        self.propensity = propensity or PowerLawPropensity(variant="cornac")
        self.propensity_ = _fit_on_counts(self.propensity, self, fit_on).propensity_
        self.n_items_, self.reward_model = _known_items(self), reward_model

    def _positives(self, dataset) -> sp.csr_matrix:
        return _positives(self, dataset, self.n_items_)

    def rank(self, model, users: np.ndarray, cutoff: int | None) -> TopK:
        """Top-``cutoff`` candidates of ``users`` (rows of the result), batched."""
        return rank_test_users(self, model, users, cutoff, self.batch_users, self.verbose)

    def evaluate(self, model, metrics, user_based, show_validation=True):
        """Fit ``model`` and report ``metrics`` on the test set (and the validation set):
        Cornac's ``Experiment`` contract, returning (test result, validation result or None).
        """
        if not callable(getattr(model, "fit", None)):
            raise TypeError(f"model must be a Cornac recommender, got {type(model).__name__}")
        rating, ranking = self.organize_metrics(metrics)
        if rating or not ranking:
            raise ValueError(
                f"give ranking metrics, e.g. [NDCG(k=10)]: rating metrics "
                f"({', '.join(m.name for m in rating)}) are not stratified"
                if rating
                else "metrics is empty: give ranking metrics"
            )
        columns = {m.name: _report_metric(m, self.n_items_) for m in ranking}
        start = time.time()
        model.fit(self.train_set, self.val_set)
        train_time, start = time.time() - start, time.time()
        result = self._report(model, columns, self.test_set, self.val_set, self.reward_model)
        result.metric_avg_results["Train (s)"] = train_time
        result.metric_avg_results["Test (s)"] = time.time() - start
        print(result)
        if not show_validation or self.val_set is None:
            return result, None
        start, validation = time.time(), self._report(model, columns, self.val_set, None, None)
        validation.metric_avg_results["Time (s)"] = time.time() - start
        return result, validation

    def _report(self, model, columns, held_set, seen_set, reward_model):
        seen = [self._positives(s) for s in (self.train_set, seen_set) if s is not None]
        held = self._positives(held_set)
        users = np.flatnonzero(np.diff(held.indptr) > 0)
        cutoffs = [c.discount.cutoff for c in columns.values()]
        cutoff = None if None in cutoffs else max(cutoffs)
        ranking = _rank(model, users, cutoff, held, sum(seen), self.batch_users, self.verbose)
        y_true, p = held[users], self.propensity_[: self.n_items_]
        rewards = None if reward_model is None else self._rewards(reward_model, users)
        report = strata_report(y_true, ranking, p, columns, n_strata=self.n_strata,
                               binning=self.binning, clip=self.clip, reward_model=rewards,
                               model=model.name)  # fmt: skip
        kept = (y_true, ranking, p) if self.keep_rankings else (None, None, None)
        return StratifiedModelResult(model.name, report, users, kept)

    def _rewards(self, reward_model, users: np.ndarray):
        """The reward model's scores of ``users`` calibrated to click probabilities."""
        model = reward_model.clone() if hasattr(reward_model, "clone") else reward_model
        model.fit(self.train_set, self.val_set)
        scorer = _Scorer(model, self.n_items_)
        scores = np.vstack([scorer(users[i : i + self.batch_users])
                            for i in range(0, users.size, self.batch_users)])  # fmt: skip
        clicks = self._positives(self.train_set if self.val_set is None else self.val_set)[users]
        p = self.propensity_[: self.n_items_]
        return ScoreCalibration().fit(scores, clicks, propensity=p).reward_model(scores)


def _report_metric(metric: RankingMetric, n_items: int) -> ReportMetric:
    """A Cornac metric as a column of the core's report."""
    if isinstance(metric, OPEMetric):
        return metric.report_metric()
    if type(metric) in (NDCG, Recall):
        name = "ndcg" if type(metric) is NDCG else "recall"
        cutoff = _cutoff(metric.k) or (None if name == "ndcg" else n_items)
        return ReportMetric(name, LogDiscount(cutoff))
    raise ValueError(
        f"{metric.name} is not supported by PropensityStratifiedEvaluation; it "
        f"evaluates Cornac's NDCG and Recall and {', '.join(__all__[:9])}"
    )


def simpsons_paradox(a, b, metric: str | None = None, alpha: float = 0.05) -> SimpsonsParadoxReport:
    """Jadidinejad et al. Table 2 for two :class:`StratifiedModelResult` (``experiment.result[i]``)
    on ``metric`` (default: the first): :func:`recpack_ope.metrics.simpsons_paradox`.

    Examples
    --------
    >>> print(simpsons_paradox(experiment.result[0], experiment.result[1]))  # doctest: +SKIP
    """
    for name, result in (("a", a), ("b", b)):
        if not isinstance(result, StratifiedModelResult):
            raise TypeError(
                f"{name} must be a StratifiedModelResult (experiment.result[i] of a "
                f"PropensityStratifiedEvaluation), got {type(result).__name__}"
            )
    metric = next(iter(a.estimates)) if metric is None else metric
    if metric not in a.estimates or metric not in b.estimates:
        raise ValueError(f"no metric {metric!r}; the results have {list(a.estimates)}")
    return _simpsons_paradox(
        a.estimates[metric],
        b.estimates[metric],
        alpha=alpha,
        names=(a.model_name, b.model_name),
        ips=(a.ips[metric], b.ips[metric]),
    )


def _run(experiment) -> tuple[list, list[str]]:
    """A run ``cornac.Experiment``'s results and model names (``BPR (1)``, ``BPR (2)`` where
    names repeat)."""
    if not all(hasattr(experiment, a) for a in ("result", "models", "eval_method")):
        raise TypeError(f"experiment must be a cornac.Experiment, got {type(experiment).__name__}")
    if experiment.result is None:
        raise ValueError("the experiment has no results yet: call experiment.run() first")
    names = [r.model_name for r in experiment.result]
    return list(experiment.result), [
        f"{n} ({names[:i].count(n) + 1})" if names.count(n) > 1 else n for i, n in enumerate(names)
    ]


def tied_with_best(experiment, metric: str, alpha=0.05, correction=None, test="t") -> TiedWithBest:
    """Models of a run ``cornac.Experiment`` statistically tied with the best on ``metric``:
    :func:`recpack_ope.inference.significance.tied_with_best` over Cornac's per-user results
    of the users every model was evaluated on.

    Examples
    --------
    >>> tied_with_best(experiment, "Recall@10").tied  # doctest: +SKIP
    ('BPR', 'MostPop')
    """
    results, names = _run(experiment)
    if any(not hasattr(r, "metric_user_results") for r in results):
        raise ValueError(
            "tied_with_best needs per-user results of one train/test split; "
            "cross-validation keeps only each fold's averages"
        )
    per_model = {}
    for name, r in zip(names, results, strict=True):
        if metric not in (r.metric_user_results or {}):
            raise ValueError(
                f"no per-user results for metric {metric!r} of {r.model_name}; "
                f"known: {sorted(r.metric_user_results or {})}"
            )
        per_model[name] = r.metric_user_results[metric]
    users = sorted(set.intersection(*(set(v) for v in per_model.values())))
    values = np.array([[v[u] for v in per_model.values()] for u in users])
    scores = SystemScores(tuple(per_model), values, np.asarray(users), metric)
    return _tied_with_best(scores, alpha=alpha, correction=correction, test=test)


def add_rpp(experiment, k=10, weighting="uniform", column=None) -> PreferenceMatrix:
    """Recall-paired preference between the fitted models of a run ``cornac.Experiment``
    (single split) on its test positives; adds each model's win rate as ``column`` (default
    ``"RPP@k win"``) to ``experiment.result``. ``k=None`` compares whole rankings.

    Examples
    --------
    >>> add_rpp(experiment, k=10).win_rates().ordering("mc4")  # doctest: +SKIP
    ['BPR', 'MostPop']
    """
    results, names = _run(experiment)
    method = experiment.eval_method
    if isinstance(method, CrossValidation) or getattr(method, "test_set", None) is None:
        raise ValueError("add_rpp needs a single train/test split (e.g. RatioSplit)")
    if len(results) < 2:
        raise ValueError(
            f"RPP compares models: the experiment has {len(results)}, add at least one more"
        )
    k = check_positive_int(k, "k", allow_none=True)
    if column is not None and (not isinstance(column, str) or not column):
        raise ValueError(f"column must be a non-empty name or None, got {shown(column)}")
    if column in {"Train (s)", "Test (s)", *(results[0].metric_user_results or {})}:
        raise ValueError(
            f"column {column!r} would overwrite the experiment's own {column!r} values"
        )
    positives = _positives(method, method.test_set, _known_items(method))
    users = np.flatnonzero(np.diff(positives.indptr) > 0)
    levels = RecallLevels.from_y_true(positives[users], weighting=weighting, graded=False)
    lengths = [levels.search_lengths(rank_test_users(method, m, users, k), k)
               for m in experiment.models]  # fmt: skip
    matrix = levels.preference_matrix(names, np.vstack(lengths))
    column = column or f"{matrix.name}{'' if k is None else f'@{k}'} win"
    for result, value in zip(results, matrix.win_rates().means, strict=True):
        result.metric_avg_results[column] = float(value)
    return matrix
