"""recpack-ope for Cornac (the ``cornac`` extra): the registry's estimators as Cornac metrics,
a propensity-stratified evaluation, RPP and ties with the best. Translation only: Cornac's item
indices, candidates, scores and results. See docs/getting-started/cornac.md."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp
from cornac.eval_methods import CrossValidation, RatioSplit
from cornac.eval_methods.base_method import BaseMethod
from cornac.exception import ScoreException
from cornac.experiment.result import Result
from cornac.metrics import NDCG, RankingMetric, Recall

from .. import LogDiscount, PowerLawPropensity
from .. import _validation as check
from ..evaluation import comparisons, held_out
from ..evaluation.inputs import EstimatorInputs, framework_cutoff
from ..evaluation.strata_report import ReportMetric, simpsons_paradox_of
from ..inference.significance import TiedWithBest
from ..inference.systems import PreferenceMatrix, distinct_names
from ..io.id_maps import propensity_on_indices
from ..metrics.ranking import ProductScores, TopK, rank_in_batches
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..propensity.weights import RECOMMENDED_CLIP
from ..registry import ESTIMATORS, Estimator

_OFFERED = [e for e in ESTIMATORS.values() if e.cornac_class]
__all__ = [e.camel for e in _OFFERED] + ["CornacAdapter", "PropensityStratifiedEvaluation"]
__all__ += ["StratifiedModelResult", "add_rpp", "item_counts", "rank_test_users"]
__all__ += ["simpsons_paradox", "tied_with_best"]
_HINT = "evaluate it with recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"


def item_counts(eval_method: BaseMethod, on: str = "all") -> np.ndarray:
    """Ratings per Cornac item index of train, validation and test (``"all"``, as Cornac's
    propensities) or of the training set (``"train"``): ``item_counts(RatioSplit(data))``."""
    check.check_choice(on, ("all", "train"), "on")
    _known_items(eval_method)  # refuses anything but an eval method after its split
    sets = [eval_method.train_set, eval_method.val_set, eval_method.test_set]
    items = [np.asarray(s.uir_tuple[1]) for s in sets[: 3 if on == "all" else 1] if s is not None]
    return np.bincount(np.concatenate(items), minlength=eval_method.total_items).astype(float)


class CornacAdapter(EstimatorInputs):
    """:class:`~recpack_ope.evaluation.inputs.EstimatorInputs` on a Cornac eval method's item
    indices (``propensity`` may be keyed by raw item id; a model is fitted on the counts of
    ``on``): ``CornacAdapter(propensity=PowerLawPropensity()).fit(ratio_split).metrics(k=10)``."""

    fit_example, fit_argument = "CornacAdapter(...).fit(eval_method)", "counts"

    def __init__(self, propensity=None, discount=None, clip=RECOMMENDED_CLIP, on="all", **inputs):
        self.on, self.given = check.check_choice(on, ("all", "train"), "on"), propensity
        self.by_raw_id = isinstance(propensity, (Mapping, pd.Series))
        super().__init__(None if self.by_raw_id else propensity, discount, clip, **inputs)
        if self.population != "observed":  # its metrics() would silently average differently
            raise ValueError(
                f"population={self.population!r} averages over every user, and Cornac's ranking "
                "loop scores only the users with test items: give population 'observed'"
            )
        if self.fitted and self.propensity is not None:
            self.require_vector(why=": Cornac's metrics score one user at a time")

    def fit(self, eval_method: BaseMethod) -> CornacAdapter:
        """Fit or place the propensities on ``eval_method``'s items (after its split)."""
        counts = item_counts(eval_method, self.on)
        if self.by_raw_id:
            iids = eval_method.global_iid_map
            self.propensity = propensity_on_indices(self.given, iids, framework="the eval method")
        super().fit(counts)
        if self.propensity is not None:
            self.require_vector(eval_method.total_items, "the eval method")
        self.propensity_ = self.propensity
        return self

    def metrics(self, k: int = 10) -> list[OPEMetric]:
        """IPS-DCG@k and IPS-nDCG@k (DCG@k and nDCG@k without propensities)."""
        if not hasattr(self, "propensity_"):
            raise ValueError("call adapter.fit(eval_method) before metrics()")
        names = ("dcg", "ndcg") if self.propensity is None else ("ips_dcg", "ips_ndcg")
        return [_CLASSES[n](k, self.propensity, self.clip, self.discount) for n in names]


class OPEMetric(RankingMetric):
    """A registry estimator as a Cornac metric at cutoff ``k`` (-1: the whole ranking), with
    ``propensity`` on Cornac's item indices: ``IPSDCG(k=10, propensity=p)``."""

    estimator: Estimator

    def __init__(self, k=-1, propensity=None, clip=RECOMMENDED_CLIP, discount=None):
        cutoff, cls = framework_cutoff(k), type(self).__name__
        if isinstance(propensity, (Mapping, pd.Series)):  # CornacAdapter(...).fit maps raw ids
            raise ValueError(f"{cls} needs propensity= on Cornac's item indices, not raw ids")
        self.inputs = CornacAdapter(propensity, discount, clip)
        self.inputs.check_metric(self.estimator, cutoff, lambda e: e.camel, f"making {cls}")
        self.propensity, self.clip = self.inputs.propensity, clip
        self.cutoff, self.discount = cutoff, self.inputs.at(cutoff)
        super().__init__(name=self.estimator.display(self.discount), k=k)

    def compute(self, gt_pos, pd_rank, **kwargs) -> float:
        """One user's value, as Cornac's ranking loop asks for it."""
        if np.size(gt_pos) and np.min(gt_pos) < 0:
            raise ValueError(f"gt_pos has item index {int(np.min(gt_pos))}; Cornac's are >= 0")
        return self.inputs.one_user(self.estimator, gt_pos, pd_rank, self.cutoff, "Cornac", _HINT)


_CLASSES = {
    e.name: type(e.camel, (OPEMetric,), {"estimator": e, "__module__": __name__}) for e in _OFFERED
}
for _cls in _CLASSES.values():
    _cls.__doc__ = f"{_cls.estimator.label} ({_cls.estimator.reference}) as a Cornac metric."
globals().update({cls.__name__: cls for cls in _CLASSES.values()})


def _scorer(model, n_items: int) -> ProductScores:
    """``users → scores`` of ``n_items`` items: the vectors' product if Cornac measures by dot."""
    from cornac.models.recommender import MEASURE_DOT

    model = getattr(model, "best_model", None) or model  # hyperopt searches wrap it
    one_user = held_out.user_scores(model.score, n_items, model.default_score, ScoreException)
    try:
        if model.get_vector_measure() != MEASURE_DOT:
            return ProductScores(one_user)
    except (AttributeError, NotImplementedError):
        return ProductScores(one_user)
    users, items = model.get_user_vectors(), np.asarray(model.get_item_vectors())
    users = sp.csr_matrix(users) if sp.issparse(users) else np.asarray(users)
    products = [items[:n_items].T] + ([items[:, :n_items]] if items.ndim == 2 else [])
    return ProductScores(one_user, users, products)


def _known_items(eval_method: BaseMethod) -> int:
    """Items Cornac ranks: the training items, or every item when unknowns are kept."""
    if not isinstance(eval_method, BaseMethod) or eval_method.train_set is None:
        what = "a Cornac eval method after its split (e.g. RatioSplit(data, ...))"
        raise TypeError(f"eval_method must be {what}, got {type(eval_method).__name__}")
    unknowns = not eval_method.exclude_unknowns
    return eval_method.total_items if unknowns else eval_method.train_set.num_items


def _positives(eval_method: BaseMethod, *datasets) -> sp.csr_matrix:
    """users × known items of the datasets' ratings ≥ the eval method's rating_threshold."""
    shape = (eval_method.total_users, _known_items(eval_method))
    triplets = [d.uir_tuple for d in datasets if d is not None]
    return held_out.positives(triplets, shape, eval_method.rating_threshold)


def rank_test_users(eval_method, model, users, cutoff, batch_users=1024, verbose=False) -> TopK:
    """Top-``cutoff`` (None: all) of Cornac's candidates for ``users`` (Cornac user indices),
    ties to the lower item index as in Cornac: ``rank_test_users(split, bpr, [0, 5], 10).items``."""
    owner, n = "the eval method's users", _known_items(eval_method)
    users = check.check_index_vector(users, "users", eval_method.total_users, "Cornac user", owner)
    cutoff = check.check_positive_int(cutoff, "cutoff", allow_none=True)
    seen = _positives(eval_method, eval_method.train_set, eval_method.val_set)
    held, desc = _positives(eval_method, eval_method.test_set), f"Ranking [{model.name}]"
    score, progress = _scorer(model, n), desc if verbose else None
    return rank_in_batches(
        score, users, cutoff, n, exclude=seen, keep=held, batch_users=batch_users, progress=progress
    )


class StratifiedModelResult(held_out.HeldOutResult, Result):
    """A :class:`~recpack_ope.evaluation.held_out.HeldOutResult` as a Cornac ``Result`` (averages:
    the Stratified values; ``user_index``: Cornac users): ``experiment.result[0].rows()``."""

    def __init__(self, model_name, evaluation: held_out.HeldOutReport):
        super().__init__(model_name, *evaluation.values())
        self.keep(evaluation)


class PropensityStratifiedEvaluation(RatioSplit):
    """Propensity-stratified evaluation (Jadidinejad et al., TOIS 2021): a ``RatioSplit``
    reporting each model as a :class:`StratifiedModelResult`. ``propensity`` (default: Cornac's
    power law) is fitted on the item counts; ``reward_model`` adds the DR row; ``options`` are
    :class:`~recpack_ope.evaluation.held_out.StratifiedOptions`' or RatioSplit's. Usage:
    ``cornac.Experiment(PropensityStratifiedEvaluation(triplets, n_strata=2), models, metrics)``.
    """

    def __init__(
        self,
        data,
        test_size=0.2,
        val_size=0.0,
        rating_threshold=1.0,
        seed=None,
        exclude_unknowns=True,
        verbose=False,
        *,
        propensity=None,
        reward_model=None,
        **options,
    ):
        held_out.check_models(propensity, reward_model, "a Cornac recommender", "MostPop()")
        self.options, cornac_options = held_out.StratifiedOptions.split(options)
        propensity = PowerLawPropensity(variant="cornac") if propensity is None else propensity
        self.inputs = CornacAdapter(propensity, None, self.options.clip, self.options.fit_on)
        args = (test_size, val_size, rating_threshold, seed)
        flags = {"exclude_unknowns": exclude_unknowns, "verbose": verbose}
        held_out.check_rating_split(data, *args, **flags)
        super().__init__(data, *args, **flags, **cornac_options)
        held_out.check_relevant(self.test_set.uir_tuple[2], rating_threshold)
        self.propensity_ = self.inputs.fit(self).propensity.propensity_
        self.reward_model, self.clip = reward_model, self.options.clip
        self.n_items_ = _known_items(self)

    def rank(self, model, users: np.ndarray, cutoff: int | None) -> TopK:
        """Top-``cutoff`` candidates of ``users`` (rows of the result), batched."""
        return rank_test_users(self, model, users, cutoff, self.options.batch_users, self.verbose)

    def evaluate(self, model, metrics, user_based, show_validation=True):
        """Fit ``model``; its test and validation results (or None), as Cornac's Experiment asks."""
        if not callable(getattr(model, "fit", None)):
            raise TypeError(f"model must be a Cornac recommender, got {type(model).__name__}")
        rating, ranking = self.organize_metrics(metrics)
        if rating:
            names = ", ".join(m.name for m in rating)
            raise ValueError(f"rating metrics ({names}) are not stratified: give ranking metrics")
        columns = {m.name: _report_metric(m, self.n_items_) for m in ranking}
        start = time.time()
        model.fit(self.train_set, self.val_set)
        train_time, start = time.time() - start, time.time()
        result = self._report(model, columns, self.test_set, self.val_set, self.reward_model)
        result.metric_avg_results.update({"Train (s)": train_time, "Test (s)": time.time() - start})
        print(result)
        if not show_validation or self.val_set is None:
            return result, None
        start, validation = time.time(), self._report(model, columns, self.val_set, None, None)
        validation.metric_avg_results["Time (s)"] = time.time() - start
        return result, validation

    def _report(self, model, columns, held_set, seen_set, reward_model) -> StratifiedModelResult:
        dr, name, n, p = {}, model.name, self.n_items_, self.propensity_[: self.n_items_]
        if reward_model is not None:
            reward_model = reward_model.clone() if hasattr(reward_model, "clone") else reward_model
            reward_model.fit(self.train_set, self.val_set)
            clicks = _positives(self, self.train_set if self.val_set is None else self.val_set)
            dr = {"reward": _scorer(reward_model, n), "clicks": clicks}
        held, seen = _positives(self, held_set), _positives(self, self.train_set, seen_set)
        score, progress = _scorer(model, n), f"Ranking [{name}]" if self.verbose else None
        evaluation = held_out.stratified_held_out(
            held, score, p, columns, self.options, seen=seen, model=name, progress=progress, **dr
        )
        return StratifiedModelResult(name, evaluation)


def _report_metric(metric: RankingMetric, n_items: int) -> ReportMetric:
    """A Cornac metric as a column of the core's report."""
    if isinstance(metric, OPEMetric):
        return ReportMetric(metric.estimator.name, metric.discount, metric.propensity, metric.clip)
    if type(metric) in (NDCG, Recall):
        name = "ndcg" if type(metric) is NDCG else "recall"
        cutoff = framework_cutoff(metric.k) or (None if name == "ndcg" else n_items)
        return ReportMetric(name, LogDiscount(cutoff))
    offered = ", ".join(e.camel for e in _OFFERED)
    raise ValueError(f"{metric.name} is not supported: give Cornac's NDCG or Recall, or {offered}")


def simpsons_paradox(a, b, metric: str | None = None, alpha: float = 0.05) -> SimpsonsParadoxReport:
    """Jadidinejad et al. Table 2 for two :class:`StratifiedModelResult` on ``metric`` (default:
    the first). Usage: ``simpsons_paradox(experiment.result[0], experiment.result[1])``."""
    where = "experiment.result[i] of a PropensityStratifiedEvaluation"
    return simpsons_paradox_of(a, b, StratifiedModelResult, where, metric, alpha)


def _run(experiment) -> tuple[list, tuple[str, ...]]:
    """A run ``cornac.Experiment``'s results and distinct model names."""
    if not all(hasattr(experiment, a) for a in ("result", "models", "eval_method")):
        raise TypeError(f"experiment must be a cornac.Experiment, got {type(experiment).__name__}")
    if experiment.result is None:
        raise ValueError("the experiment has no results yet: call experiment.run() first")
    return list(experiment.result), distinct_names(r.model_name for r in experiment.result)


def tied_with_best(
    experiment, metric: str, alpha=0.05, correction=None, test="mcb"
) -> TiedWithBest:
    """Models of a run ``cornac.Experiment`` statistically tied with the best on ``metric``, over
    Cornac's per-user results. Usage: ``tied_with_best(experiment, "NDCG@10").tied``."""
    results, names = _run(experiment)
    if any(not hasattr(r, "metric_user_results") for r in results):  # CVResult: fold averages
        raise ValueError("tied_with_best needs per-user results of one train/test split (not CV)")
    per_model = {n: r.metric_user_results for n, r in zip(names, results, strict=True)}
    return comparisons.tied_with_best_of(per_model, metric, alpha, correction, test)


def add_rpp(experiment, k=10, weighting="uniform", column=None) -> PreferenceMatrix:
    """Recall-paired preference between the models of a run ``cornac.Experiment`` (single
    split) on its test positives at ``k`` (None: whole rankings); adds each model's win rate as
    ``column`` (default ``"RPP@k win"``) to ``experiment.result``: ``add_rpp(experiment)``."""
    results, names = _run(experiment)
    method = experiment.eval_method
    if isinstance(method, CrossValidation) or getattr(method, "test_set", None) is None:
        raise ValueError("add_rpp needs a single train/test split (e.g. RatioSplit)")
    k = check.check_positive_int(k, "k", allow_none=True)
    taken = {"Train (s)", "Test (s)", *(results[0].metric_user_results or {})}
    column = comparisons.check_new_column(column, taken)
    models = zip(names, experiment.models, strict=True)
    rank = {n: (lambda users, m=m: rank_test_users(method, m, users, k)) for n, m in models}
    matrix = comparisons.rpp_of_models(_positives(method, method.test_set), rank, k, weighting)
    comparisons.add_win_rates(matrix, [r.metric_avg_results for r in results], k, column)
    return matrix
