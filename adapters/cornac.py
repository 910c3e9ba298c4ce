"""recpack-ope for Cornac (the ``cornac`` extra): the registry's estimators as Cornac metrics
(``PlainDCG``, ``IPSDCG``, …, named e.g. ``IPS-DCG@10``), a propensity-stratified evaluation
for ``cornac.Experiment``, and RPP and ties with the best between an experiment's models.

Translation only: Cornac's item indices (raw ids through ``global_iid_map``), candidates (every
known item but the user's positive training and validation items), ``rating_threshold`` and
results; the values and tables come from the core. See docs/getting-started/cornac.md.
"""

from __future__ import annotations

import time
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

from .. import _validation as check
from .._validation import check_positive_int, shown
from ..evaluation.inputs import EstimatorInputs
from ..evaluation.strata_report import ReportMetric, StrataReport, strata_report
from ..inference.significance import TiedWithBest
from ..inference.significance import tied_with_best as _tied_with_best
from ..inference.systems import PreferenceMatrix, SystemScores, distinct_names
from ..io.id_maps import propensity_on_indices
from ..metrics.ranking import TopK
from ..metrics.rpp import RecallLevels
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..propensity.discount import LogDiscount
from ..propensity.models import PowerLawPropensity
from ..propensity.weights import RECOMMENDED_CLIP
from ..registry import ESTIMATORS, Estimator
from ..reward.calibration import calibrated_reward_model

_OFFERED = [e for e in ESTIMATORS.values() if e.camel and e.data == "held_out"]
_OFFERED = [e for e in _OFFERED if e.needs in ((), ("propensity",)) and e.weighting != "stratified"]
__all__ = [e.camel for e in _OFFERED] + ["CornacAdapter", "PropensityStratifiedEvaluation"]
__all__ += ["StratifiedModelResult", "add_rpp", "item_counts", "rank_test_users"]
__all__ += ["simpsons_paradox", "tied_with_best"]
_INSTEAD = "evaluate it with recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"


def _cutoff(k) -> int | None:
    """Cornac's ``k`` (-1: the whole ranking) as the core's cutoff (None)."""
    if isinstance(k, (list, tuple, np.ndarray)):  # Cornac rebuilds those without propensities
        raise ValueError(f"k must be one cutoff, got {shown(k)}: make one metric per cutoff")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < -1 or k == 0:
        raise ValueError(f"k must be a positive integer or -1 (whole ranking), got {shown(k)}")
    return None if k == -1 else int(k)


def item_counts(eval_method: BaseMethod, on: str = "all") -> np.ndarray:
    """Ratings per Cornac item index: of train, validation and test (``"all"``, Cornac's
    propensity estimate) or of the training set (``"train"``).

    Examples
    --------
    >>> item_counts(RatioSplit(triplets, seed=1)).shape  # doctest: +SKIP
    (1682,)
    """
    check.check_choice(on, ("all", "train"), "on")
    if not isinstance(eval_method, BaseMethod) or eval_method.train_set is None:
        raise TypeError(
            "eval_method must be a Cornac eval method after its split (e.g. RatioSplit(data, "
            f"...)), got {type(eval_method).__name__}"
        )
    sets = [eval_method.train_set, eval_method.val_set, eval_method.test_set][
        : 3 if on == "all" else 1
    ]
    items = np.concatenate([np.asarray(s.uir_tuple[1]) for s in sets if s is not None])
    return np.bincount(items, minlength=eval_method.total_items).astype(np.float64)


class CornacAdapter(EstimatorInputs):
    """Propensities on a Cornac eval method's item indices, and the metrics using them.

    Parameters
    ----------
    propensity : None, propensity model, 1-D array, or mapping raw item id → propensity
        A model is fitted by :meth:`fit` on the item counts (``on``: ``"all"`` ratings, as
        Cornac does, or ``"train"``); a mapping or ``pandas.Series`` keyed by raw item id is
        placed through ``global_iid_map``; an array holds one value per item index.
    discount, clip, **inputs
        As for :class:`~recpack_ope.evaluation.inputs.EstimatorInputs`.

    Examples
    --------
    >>> metrics = CornacAdapter(PowerLawPropensity()).fit(split).metrics(k=10)  # doctest: +SKIP
    >>> [m.name for m in metrics]  # doctest: +SKIP
    ['IPS-DCG@10', 'IPS-nDCG@10']
    """

    fit_example, fit_argument = "CornacAdapter(...).fit(eval_method)", "counts"

    def __init__(self, propensity=None, discount=None, clip=RECOMMENDED_CLIP, on="all", **inputs):
        self.on, self.given = check.check_choice(on, ("all", "train"), "on"), propensity
        self.by_raw_id = isinstance(propensity, (Mapping, pd.Series))
        super().__init__(None if self.by_raw_id else propensity, discount, clip, **inputs)
        if self.fitted:
            self._one_per_item()

    def _one_per_item(self, n_items: int | None = None) -> None:
        shape = np.shape(getattr(self.propensity, "propensity_", ()))
        if sp.issparse(getattr(self.propensity, "propensity_", None)) or len(shape) != 1:
            raise ValueError(
                f"propensity must be one value per item (a 1-D vector), got shape {shape}: "
                "Cornac's metrics score one user at a time"
            )
        if n_items is not None and shape[0] != n_items:
            raise ValueError(
                f"propensity has {shape[0]} values but the eval method has {n_items} items: "
                "give one per Cornac item index"
            )

    def fit(self, eval_method: BaseMethod) -> CornacAdapter:
        """Fit or place the propensities on ``eval_method``'s items (after its split)."""
        counts = item_counts(eval_method, self.on)
        if self.by_raw_id:
            iids = eval_method.global_iid_map
            self.propensity = propensity_on_indices(self.given, iids, framework="the eval method")
        super().fit(counts)
        if self.propensity is not None:
            self._one_per_item(eval_method.total_items)
        self.propensity_ = self.propensity
        return self

    def metrics(self, k: int = 10) -> list[OPEMetric]:
        """IPS-DCG@k and IPS-nDCG@k (DCG@k and nDCG@k without propensities)."""
        if not hasattr(self, "propensity_"):
            raise ValueError("call adapter.fit(eval_method) before metrics()")
        names, p = ("dcg", "ndcg") if self.propensity is None else ("ips_dcg", "ips_ndcg"), {}
        p = {} if self.propensity is None else {"propensity": self.propensity}
        return [_CLASSES[n](k, clip=self.clip, discount=self.discount, **p) for n in names]


class OPEMetric(RankingMetric):
    """A registry estimator as a Cornac ranking metric, named by the registry (``IPS-DCG@10``).

    ``k`` is the cutoff (-1: the whole ranking); ``propensity`` (weighted estimators only) one
    value per Cornac item index or a model fitted by :class:`CornacAdapter`; ``clip`` and
    ``discount`` as there. Cornac's loop averages per-user values, so estimators that are not
    such means, and ``clip="auto"``, work only in :class:`PropensityStratifiedEvaluation`.
    """

    estimator: Estimator

    def __init__(self, k=-1, propensity=None, clip=RECOMMENDED_CLIP, discount=None):
        cutoff, e, cls = _cutoff(k), self.estimator, type(self).__name__
        if cutoff is None and "recall" in e.name:
            raise ValueError(f"k must be a positive integer for {cls}, got -1")
        self.inputs = CornacAdapter(propensity, discount, clip)
        if e.weighted and propensity is None or self.inputs.by_raw_id:
            plain = ESTIMATORS[e.plain].camel
            raise ValueError(
                f"{cls} needs propensity= on Cornac's item indices; use {plain} for the "
                "unweighted estimator, CornacAdapter(...).fit(eval_method) for raw item ids"
            )
        if not e.weighted and propensity is not None:
            weighted = next(w.camel for w in _OFFERED if w.plain == e.name and w.weighted)
            raise ValueError(f"{cls} is unweighted and takes no propensity; use {weighted}")
        self.inputs.require_fitted(f"making {cls}")
        self.propensity, self.clip, self.discount = (
            self.inputs.propensity,
            clip,
            self.inputs.at(cutoff),
        )
        self.cutoff = cutoff
        super().__init__(name=e.display(self.discount), k=k)

    def report_metric(self) -> ReportMetric:
        """This metric as a column of the core's :func:`~recpack_ope.evaluation.strata_report`."""
        return ReportMetric(self.estimator.name, self.discount, self.propensity, self.clip)

    def compute(self, gt_pos, pd_rank, **kwargs) -> float:
        """One user's value, as Cornac's ranking loop asks for it."""
        if np.size(gt_pos) and np.min(gt_pos) < 0:
            raise ValueError(f"gt_pos has item index {int(np.min(gt_pos))}; Cornac's are >= 0")
        return self.inputs.one_user(
            self.estimator, gt_pos, pd_rank, self.cutoff, "Cornac", _INSTEAD
        )


_CLASSES = {
    e.name: type(
        e.camel,
        (OPEMetric,),
        {
            "estimator": e,
            "__module__": __name__,
            "__doc__": f"{e.label} ({e.reference}) as a Cornac metric: :class:`OPEMetric`.",
        },
    )
    for e in _OFFERED
}
globals().update({cls.__name__: cls for cls in _CLASSES.values()})


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


def _batches(scorer, users, batch_users, desc="", verbose=False):
    batch_users = check_positive_int(batch_users, "batch_users")
    for start in tqdm(range(0, users.size, batch_users), desc=desc, disable=not verbose):
        yield users[start : start + batch_users], scorer(users[start : start + batch_users])


def _known_items(eval_method: BaseMethod) -> int:
    """Items Cornac ranks: the training items, or every item when unknowns are kept."""
    unknowns = not eval_method.exclude_unknowns
    return eval_method.total_items if unknowns else eval_method.train_set.num_items


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
    owner, n = "the eval method's users", _known_items(eval_method)
    users = check.check_index_vector(users, "users", eval_method.total_users, "Cornac user", owner)
    seen = [eval_method.train_set, eval_method.val_set]
    seen = sum(_positives(eval_method, s, n) for s in seen if s is not None)
    held = _positives(eval_method, eval_method.test_set, n)
    return _rank(model, users, cutoff, held, seen, batch_users, verbose)


def _rank(model, users, cutoff, held, seen, batch_users, verbose) -> TopK:
    """Top ``cutoff`` of ``users`` with ``seen`` items excluded unless ``held`` out."""
    k = check_positive_int(cutoff, "cutoff", allow_none=True) or held.shape[1]
    parts, desc = [], f"Ranking [{model.name}]"
    for rows, scores in _batches(_Scorer(model, held.shape[1]), users, batch_users, desc, verbose):
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
            for name, r in report.estimates.items()
        )
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


class PropensityStratifiedEvaluation(RatioSplit):
    """Propensity-stratified evaluation (Jadidinejad et al., TOIS 2021) for ``cornac.Experiment``.

    A ``RatioSplit`` (same arguments and split) whose ``evaluate`` fits the model, ranks the
    held-out users and returns the core's :func:`~recpack_ope.evaluation.strata_report` of each
    metric as a :class:`StratifiedModelResult` (Closed, IPS, IPS ESS/n, DR, Q1…QS, Stratified);
    the experiment's table holds the Stratified values. See docs/getting-started/cornac.md.

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
        Adds the DR row: fitted on the training set, its scores calibrated on the validation
        positives (else the training ones) with the propensities.
    batch_users, keep_rankings
        Users scored per batch; keep the held-out matrix, ranking and propensities.

    Examples
    --------
    >>> pse = PropensityStratifiedEvaluation(triplets, rating_threshold=4, seed=1)  # doctest: +SKIP
    >>> cornac.Experiment(pse, [BPR(k=10)], metrics=[NDCG(k=10)]).run()  # doctest: +SKIP
    """

    def __init__(
        self,
        data,
        test_size=0.2,
        val_size=0.0,
        n_strata=2,
        binning="width",
        propensity=None,
        fit_on="all",
        rating_threshold=1.0,
        seed=None,
        exclude_unknowns=True,
        verbose=False,
        batch_users=1024,
        keep_rankings=False,
        clip=RECOMMENDED_CLIP,
        reward_model=None,
        **kwargs,
    ):
        what = "a propensity model fitted on the item counts (e.g. PowerLawPropensity(), "
        check.check_model(propensity, "fit", "propensity", what + "FixedPropensity(values))")
        what = "a Cornac recommender (with fit and score, e.g. MostPop())"
        check.check_model(reward_model, "score", "reward_model", what)
        propensity = PowerLawPropensity(variant="cornac") if propensity is None else propensity
        on = check.check_choice(fit_on, ("all", "train"), "fit_on")
        self.inputs = CornacAdapter(propensity, None, clip, on, n_strata=n_strata, binning=binning)
        self.batch_users = check_positive_int(batch_users, "batch_users")
        check.check_finite_number(rating_threshold, "rating_threshold")
        check.check_random_state(seed)
        flags = {"exclude_unknowns": exclude_unknowns, "verbose": verbose}
        for name, flag in (flags | {"keep_rankings": keep_rankings}).items():
            check.check_bool(flag, name)
        if isinstance(data, (str, bytes)) or not hasattr(data, "__len__") or not len(data):
            raise ValueError("data must be a non-empty list of (user, item, rating) triplets")
        val = check.check_held_out_size(val_size, "val_size", allow_zero=True)
        try:
            RatioSplit.validate_size(
                val, check.check_held_out_size(test_size, "test_size"), len(data)
            )
        except ValueError as error:
            raise ValueError(
                f"test_size={shown(test_size)} and val_size={shown(val_size)} leave no training "
                f"data among the {len(data)} ratings: {error}"
            ) from None
        args = (test_size, val_size, rating_threshold, seed, exclude_unknowns, verbose)
        super().__init__(data, *args, **kwargs)
        ratings = np.asarray(self.test_set.uir_tuple[2])
        if not (ratings >= rating_threshold).any():
            raise ValueError(
                f"no test rating reaches rating_threshold={shown(rating_threshold)} (the largest "
                f"is {shown(ratings.max())}): nothing is relevant"
            )
        self.propensity_ = self.inputs.fit(self).propensity.propensity_
        self.clip, self.keep_rankings, self.reward_model = clip, keep_rankings, reward_model
        self.n_items_ = _known_items(self)

    def _positives(self, dataset) -> sp.csr_matrix:
        return _positives(self, dataset, self.n_items_)

    def rank(self, model, users: np.ndarray, cutoff: int | None) -> TopK:
        """Top-``cutoff`` candidates of ``users`` (rows of the result), batched."""
        return rank_test_users(self, model, users, cutoff, self.batch_users, self.verbose)

    def evaluate(self, model, metrics, user_based, show_validation=True):
        """Fit ``model`` and report ``metrics`` on the test set (and the validation set):
        Cornac's ``Experiment`` contract, returning (test result, validation result or None)."""
        if not callable(getattr(model, "fit", None)):
            raise TypeError(f"model must be a Cornac recommender, got {type(model).__name__}")
        rating, ranking = self.organize_metrics(metrics)
        if rating or not ranking:
            names = ", ".join(m.name for m in rating)
            raise ValueError(
                f"give ranking metrics, e.g. [NDCG(k=10)]: rating metrics ({names}) are not "
                "stratified"
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
        seen = sum(self._positives(s) for s in (self.train_set, seen_set) if s is not None)
        held = self._positives(held_set)
        users = np.flatnonzero(np.diff(held.indptr) > 0)
        cutoffs = [c.discount.cutoff for c in columns.values()]
        cutoff = None if None in cutoffs else max(cutoffs)
        ranking = _rank(model, users, cutoff, held, seen, self.batch_users, self.verbose)
        y_true, p = held[users], self.propensity_[: self.n_items_]
        rewards = None if reward_model is None else self._rewards(reward_model, users)
        options = {"n_strata": self.inputs.n_strata, "binning": self.inputs.binning}
        report = strata_report(
            y_true,
            ranking,
            p,
            columns,
            **options,
            clip=self.clip,
            reward_model=rewards,
            model=model.name,
        )
        kept = (y_true, ranking, p) if self.keep_rankings else (None, None, None)
        return StratifiedModelResult(model.name, report, users, kept)

    def _rewards(self, reward_model, users: np.ndarray):
        """The reward model's scores of ``users`` calibrated to click probabilities."""
        model = reward_model.clone() if hasattr(reward_model, "clone") else reward_model
        model.fit(self.train_set, self.val_set)
        batches = _batches(_Scorer(model, self.n_items_), users, self.batch_users)
        clicks = self._positives(self.train_set if self.val_set is None else self.val_set)[users]
        scores = np.vstack([s for _, s in batches])
        return calibrated_reward_model(scores, clicks, self.propensity_[: self.n_items_])


def _report_metric(metric: RankingMetric, n_items: int) -> ReportMetric:
    """A Cornac metric as a column of the core's report."""
    if isinstance(metric, OPEMetric):
        return metric.report_metric()
    if type(metric) in (NDCG, Recall):
        name = "ndcg" if type(metric) is NDCG else "recall"
        cutoff = _cutoff(metric.k) or (None if name == "ndcg" else n_items)
        return ReportMetric(name, LogDiscount(cutoff))
    raise ValueError(
        f"{metric.name} is not supported by PropensityStratifiedEvaluation; it evaluates "
        f"Cornac's NDCG and Recall and {', '.join(e.camel for e in _OFFERED)}"
    )


def simpsons_paradox(a, b, metric: str | None = None, alpha: float = 0.05) -> SimpsonsParadoxReport:
    """Jadidinejad et al. Table 2 for two :class:`StratifiedModelResult` (``experiment.result[i]``)
    on ``metric`` (default: the first): :meth:`StrataReport.simpsons_paradox`.

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
    return a.report.simpsons_paradox(b.report, metric, alpha, (a.model_name, b.model_name))


def _run(experiment) -> tuple[list, tuple[str, ...]]:
    """A run ``cornac.Experiment``'s results and distinct model names."""
    if not all(hasattr(experiment, a) for a in ("result", "models", "eval_method")):
        raise TypeError(f"experiment must be a cornac.Experiment, got {type(experiment).__name__}")
    if experiment.result is None:
        raise ValueError("the experiment has no results yet: call experiment.run() first")
    return list(experiment.result), distinct_names(r.model_name for r in experiment.result)


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
    for r in results:
        if metric not in (r.metric_user_results or {}):
            raise ValueError(
                f"no per-user results for metric {metric!r} of {r.model_name}; "
                f"known: {sorted(r.metric_user_results or {})}"
            )
    per_model = {n: r.metric_user_results[metric] for n, r in zip(names, results, strict=True)}
    scores = SystemScores.from_user_values(per_model, metric)
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
    rankings = [rank_test_users(method, m, users, k) for m in experiment.models]
    matrix = levels.preference_matrix(
        names, np.vstack([levels.search_lengths(r, k) for r in rankings])
    )
    column = column or f"{matrix.name}{'' if k is None else f'@{k}'} win"
    for result, value in zip(results, matrix.win_rates().means, strict=True):
        result.metric_avg_results[column] = float(value)
    return matrix
