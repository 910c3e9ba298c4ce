"""recpack-ope for Cornac (the ``cornac`` extra): the registry's estimators as Cornac metrics
(``IPSDCG`` named ``IPS-DCG@10``, …), a propensity-stratified evaluation, RPP and ties with the
best. Translation only: Cornac's item indices, candidates (known items but the user's positive
training and validation ones), scores and results. See docs/getting-started/cornac.md."""

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

from .. import _validation as check
from .._validation import check_positive_int, shown
from ..evaluation import comparisons, held_out
from ..evaluation.inputs import EstimatorInputs
from ..evaluation.strata_report import ReportMetric
from ..inference.significance import TiedWithBest
from ..inference.systems import PreferenceMatrix, distinct_names
from ..io.id_maps import propensity_on_indices
from ..metrics.ranking import ProductScores, TopK, rank_in_batches
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..propensity.discount import LogDiscount
from ..propensity.models import PowerLawPropensity
from ..propensity.weights import RECOMMENDED_CLIP
from ..registry import ESTIMATORS, Estimator

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
    """Ratings per Cornac item index of train, validation and test (``"all"``, Cornac's
    propensity estimate) or of the training set (``"train"``), after the split."""
    check.check_choice(on, ("all", "train"), "on") and _known_items(eval_method)
    sets = [eval_method.train_set, eval_method.val_set, eval_method.test_set]
    items = [np.asarray(s.uir_tuple[1]) for s in sets[: 3 if on == "all" else 1] if s is not None]
    return np.bincount(np.concatenate(items), minlength=eval_method.total_items).astype(float)


class CornacAdapter(EstimatorInputs):
    """:class:`~recpack_ope.evaluation.inputs.EstimatorInputs` on a Cornac eval method's item
    indices: ``propensity`` is a model :meth:`fit` on the item counts of ``on`` (``"all"``, as
    Cornac, or ``"train"``), a mapping or Series keyed by raw item id, or one value per index."""

    fit_example, fit_argument = "CornacAdapter(...).fit(eval_method)", "counts"

    def __init__(self, propensity=None, discount=None, clip=RECOMMENDED_CLIP, on="all", **inputs):
        self.on, self.given = check.check_choice(on, ("all", "train"), "on"), propensity
        self.by_raw_id = isinstance(propensity, (Mapping, pd.Series))
        super().__init__(None if self.by_raw_id else propensity, discount, clip, **inputs)
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
        p = {} if self.propensity is None else {"propensity": self.propensity}
        return [_CLASSES[n](k, clip=self.clip, discount=self.discount, **p) for n in names]


class OPEMetric(RankingMetric):
    """A registry estimator as a Cornac ranking metric at cutoff ``k`` (-1: the whole ranking),
    with ``propensity``, ``clip``, ``discount`` as in :class:`CornacAdapter`. Cornac averages
    per-user values: other estimators and ``clip="auto"`` need the stratified evaluation."""

    estimator: Estimator

    def __init__(self, k=-1, propensity=None, clip=RECOMMENDED_CLIP, discount=None):
        cutoff, e, cls = _cutoff(k), self.estimator, type(self).__name__
        if cutoff is None and "recall" in e.name:
            raise ValueError(f"k must be a positive integer for {cls}, got -1")
        if isinstance(propensity, (Mapping, pd.Series)):
            raise ValueError(
                f"{cls} needs propensity= on Cornac's item indices; use "
                "CornacAdapter(...).fit(eval_method) for raw item ids"
            )
        self.inputs = CornacAdapter(propensity, discount, clip)
        self.inputs.check_weighting(e, lambda entry: entry.camel)
        self.inputs.require_fitted(f"making {cls}")
        self.propensity, self.clip = self.inputs.propensity, clip
        self.cutoff, self.discount = cutoff, self.inputs.at(cutoff)
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
    e.name: type(e.camel, (OPEMetric,), {"estimator": e, "__module__": __name__}) for e in _OFFERED
}
for _cls in _CLASSES.values():
    _cls.__doc__ = f"{_cls.estimator.label} ({_cls.estimator.reference}) as a Cornac metric."
globals().update({cls.__name__: cls for cls in _CLASSES.values()})


def _scorer(model, n_items: int) -> ProductScores:
    """``users → scores`` of a fitted Cornac model over its first ``n_items`` items: one product
    of its vectors when Cornac documents the scores as dot products (items in rows, ``U @ V.T``,
    or in columns, EASE's ``U @ B``), checked against ``model.score``; else user by user."""
    from cornac.models.recommender import MEASURE_DOT

    model = getattr(model, "best_model", None) or model  # hyperopt searches wrap it

    def one_user(user: int) -> np.ndarray:  # unknown items (past the model's) rank last
        try:
            scores = np.asarray(model.score(user), dtype=np.float64).ravel()  # EASE: a 1×n row
        except ScoreException:
            return np.full(n_items, float(model.default_score()))
        return np.pad(scores, (0, max(n_items - scores.size, 0)), constant_values=scores.min())[
            :n_items
        ]

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
        raise TypeError(
            "eval_method must be a Cornac eval method after its split (e.g. RatioSplit(data, "
            f"...)), got {type(eval_method).__name__}"
        )
    unknowns = not eval_method.exclude_unknowns
    return eval_method.total_items if unknowns else eval_method.train_set.num_items


def _positives(eval_method: BaseMethod, *datasets) -> sp.csr_matrix:
    """users × known items of the datasets' ratings ≥ the eval method's rating_threshold."""
    shape = (eval_method.total_users, n_items := _known_items(eval_method))
    found = sp.csr_matrix(shape)
    for users, items, ratings in (map(np.asarray, d.uir_tuple) for d in datasets if d is not None):
        keep = (ratings >= eval_method.rating_threshold) & (items < n_items)
        found += sp.csr_matrix((np.ones(keep.sum()), (users[keep], items[keep])), shape=shape)
    return found


def rank_test_users(eval_method, model, users, cutoff, batch_users=1024, verbose=False) -> TopK:
    """Top-``cutoff`` (None: all) of Cornac's candidates for ``users`` (Cornac user indices),
    scored in batches; ties go to the lower item index, as in Cornac's ``rank``."""
    owner, n = "the eval method's users", _known_items(eval_method)
    users = check.check_index_vector(users, "users", eval_method.total_users, "Cornac user", owner)
    cutoff = check_positive_int(cutoff, "cutoff", allow_none=True)
    seen = _positives(eval_method, eval_method.train_set, eval_method.val_set)
    held, desc = _positives(eval_method, eval_method.test_set), f"Ranking [{model.name}]"
    score, progress = _scorer(model, n), desc if verbose else None
    return rank_in_batches(
        score, users, cutoff, n, exclude=seen, keep=held, batch_users=batch_users, progress=progress
    )


class StratifiedModelResult(Result):
    """A model's :class:`~recpack_ope.evaluation.held_out.HeldOutReport` as a Cornac ``Result``
    (``metric_avg_results``: the Stratified values), printed as its table; ``user_index`` is
    the Cornac user of every evaluated row."""

    def __init__(self, model_name, evaluation: held_out.HeldOutReport):
        super().__init__(model_name, *evaluation.values())
        self.report, self.user_index = evaluation.report, evaluation.user_ids
        self.estimates, self.ips, self.dr = self.report.estimates, self.report.ips, self.report.dr
        self.y_true, self.ranking = evaluation.y_true, evaluation.ranking  # keep_rankings=True
        self.propensity = evaluation.propensity

    def rows(self) -> pd.DataFrame:
        """The table: Closed, IPS, IPS ESS/n, (DR,) Q1…QS, Stratified × metrics and SIZE."""
        return pd.DataFrame.from_dict(self.report.rows(), orient="index")

    def unreliable_ips(self) -> dict:
        """Metric → diagnostics of the IPS values whose ESS ratio is below threshold."""
        return self.report.unreliable_ips()

    def __str__(self) -> str:
        return f"[{self.model_name}]\n{self.report.table()}"


class PropensityStratifiedEvaluation(RatioSplit):
    """Propensity-stratified evaluation (Jadidinejad et al., TOIS 2021) for ``cornac.Experiment``:
    a ``RatioSplit`` reporting each model as a :class:`StratifiedModelResult`.

    ``n_strata``, ``binning``, ``clip``, ``batch_users``, ``keep_rankings``: as in
    :class:`~recpack_ope.evaluation.held_out.StratifiedOptions`; ``propensity`` is fitted on the
    item counts of ``fit_on`` (``"all"`` or ``"train"``); a ``reward_model`` (a Cornac
    recommender) adds the DR row. See docs/getting-started/cornac.md."""

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
        self.options = held_out.StratifiedOptions(
            n_strata, binning, clip, batch_users, keep_rankings
        )
        propensity = PowerLawPropensity(variant="cornac") if propensity is None else propensity
        on = check.check_choice(fit_on, ("all", "train"), "fit_on")
        self.inputs = CornacAdapter(propensity, None, clip, on)
        flags = {"exclude_unknowns": exclude_unknowns, "verbose": verbose}
        held_out.check_rating_split(data, test_size, val_size, rating_threshold, seed, **flags)
        args = (test_size, val_size, rating_threshold, seed, exclude_unknowns, verbose)
        super().__init__(data, *args, **kwargs)
        held_out.check_relevant(self.test_set.uir_tuple[2], rating_threshold)
        self.propensity_ = self.inputs.fit(self).propensity.propensity_
        self.clip, self.keep_rankings, self.reward_model = clip, keep_rankings, reward_model
        self.batch_users, self.n_items_ = batch_users, _known_items(self)

    def rank(self, model, users: np.ndarray, cutoff: int | None) -> TopK:
        """Top-``cutoff`` candidates of ``users`` (rows of the result), batched."""
        return rank_test_users(self, model, users, cutoff, self.batch_users, self.verbose)

    def evaluate(self, model, metrics, user_based, show_validation=True):
        """Fit ``model`` and report ``metrics`` on the test set (and the validation set):
        Cornac's ``Experiment`` contract, returning (test result, validation result or None)."""
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
        p, reward, clicks = self.propensity_[: self.n_items_], None, None
        if reward_model is not None:
            reward_model = reward_model.clone() if hasattr(reward_model, "clone") else reward_model
            reward_model.fit(self.train_set, self.val_set)
            reward = _scorer(reward_model, self.n_items_)
            clicks = _positives(self, self.train_set if self.val_set is None else self.val_set)
        evaluation = held_out.stratified_held_out(
            _positives(self, held_set),
            _scorer(model, self.n_items_),
            p,
            columns,
            self.options,
            seen=_positives(self, self.train_set, seen_set),
            reward=reward,
            clicks=clicks,
            model=model.name,
            progress=f"Ranking [{model.name}]" if self.verbose else None,
        )
        return StratifiedModelResult(model.name, evaluation)


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
    on ``metric`` (default: the first): :meth:`StrataReport.simpsons_paradox`."""
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
    """Models of a run ``cornac.Experiment`` statistically tied with the best on ``metric``, over
    Cornac's per-user results (:func:`~recpack_ope.evaluation.comparisons.tied_with_best_of`)."""
    results, names = _run(experiment)
    if any(not hasattr(r, "metric_user_results") for r in results):
        raise ValueError(
            "tied_with_best needs per-user results of one train/test split; "
            "cross-validation keeps only each fold's averages"
        )
    per_model = {n: r.metric_user_results for n, r in zip(names, results, strict=True)}
    return comparisons.tied_with_best_of(per_model, metric, alpha, correction, test)


def add_rpp(experiment, k=10, weighting="uniform", column=None) -> PreferenceMatrix:
    """Recall-paired preference between the fitted models of a run ``cornac.Experiment``
    (single split) on its test positives (:func:`~recpack_ope.evaluation.comparisons.
    rpp_of_models`); adds each model's win rate as ``column`` (default ``"RPP@k win"``) to
    ``experiment.result``. ``k=None`` compares whole rankings."""
    results, names = _run(experiment)
    method = experiment.eval_method
    if isinstance(method, CrossValidation) or getattr(method, "test_set", None) is None:
        raise ValueError("add_rpp needs a single train/test split (e.g. RatioSplit)")
    k = check_positive_int(k, "k", allow_none=True)
    taken = {"Train (s)", "Test (s)", *(results[0].metric_user_results or {})}
    column = comparisons.check_new_column(column, taken)
    models = zip(names, experiment.models, strict=True)
    rank = {n: (lambda users, m=m: rank_test_users(method, m, users, k)) for n, m in models}
    matrix = comparisons.rpp_of_models(_positives(method, method.test_set), rank, k, weighting)
    column = column or f"{matrix.name}{'' if k is None else f'@{k}'} win"
    for result, value in zip(results, matrix.win_rates().means, strict=True):
        result.metric_avg_results[column] = float(value)
    return matrix
