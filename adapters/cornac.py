"""recpack-ope for Cornac (the ``cornac`` extra): the registry's estimators as Cornac metrics,
a propensity-stratified evaluation, the core's results (intervals, pnDCG) of a run experiment,
RPP and ties with the best. Translation only: Cornac's item indices, candidates, scores and
results. See docs/getting-started/cornac.md."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

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
from ..inference.leaderboard import Leaderboard, leaderboard_of
from ..inference.result import EstimateResult, PairedEstimate
from ..inference.significance import TiedWithBest
from ..inference.significance import tied_with_best as core_tied_with_best
from ..inference.systems import PreferenceMatrix, SystemScores, distinct_names
from ..io.id_maps import propensity_on_indices
from ..metrics.dcg import ideal_dcg
from ..metrics.ranking import ProductScores, TopK, rank_in_batches
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..registry import ESTIMATORS, Estimator, default

_OFFERED = [e for e in ESTIMATORS.values() if e.cornac_class]
__all__ = [e.camel for e in _OFFERED] + ["CornacAdapter", "PropensityStratifiedEvaluation"]
__all__ += ["StratifiedModelResult", "add_rpp", "item_counts", "rank_test_users"]
__all__ += ["leaderboard", "metric_results", "simpsons_paradox", "tied_with_best"]
_HINT = "evaluate it with recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"
#: The rows of a PropensityStratifiedEvaluation that :func:`metric_results` reads, the
#: experiment's own table showing the Stratified one.
ROWS = ("Closed", "IPS", "DR", "Stratified")


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

    def __init__(
        self,
        propensity=None,
        discount=None,
        clip: float | str | None = default("clip"),
        on="all",
        **inputs,
    ):
        self.check_options(inputs)
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

    def __init__(
        self, k=-1, propensity=None, clip: float | str | None = default("clip"), discount=None
    ):
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
        for name, items in (("gt_pos", gt_pos), ("pd_rank", pd_rank)):
            items = np.asarray(items)
            if items.size and items.dtype.kind not in "iu":
                raise TypeError(f"{name} must hold Cornac's item indices, got dtype {items.dtype}")
            if items.size and items.min() < 0:
                raise ValueError(f"{name} has item index {int(items.min())}; Cornac's are >= 0")
        instead = _HINT
        if self.estimator.name == "pn_dcg":  # the one ratio metric_results builds in any split
            k = self.k
            instead = (
                f"to keep your split, give PlainDCG(k={k}) or Cornac's NDCG(k={k}) instead and "
                f"read recpack_ope.adapters.cornac.metric_results(experiment, {self.name!r}) "
                f"after experiment.run(), or {_HINT}"
            )
        return self.inputs.one_user(self.estimator, gt_pos, pd_rank, self.cutoff, "Cornac", instead)


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


def _stratified_row(result: StratifiedModelResult, metric: str) -> PairedEstimate:
    """The row ``metric`` (``"<row> <column>"``, e.g. ``"Stratified NDCG@10"``) of one model's
    stratified evaluation, named so; a plain column name is refused, since the experiment's
    table shows the Stratified value under it."""
    row, _, column = metric.partition(" ")
    rows = {
        "Closed": {c: r.holdout for c, r in result.estimates.items()},
        "IPS": result.ips,
        "DR": result.dr,
        "Stratified": result.estimates,
    }
    if column not in rows.get(row, {}):
        known = [f"{r} {c}" for r in ROWS for c in result.estimates if c in rows[r]]
        raise ValueError(
            f"metric {metric!r} names no row of a PropensityStratifiedEvaluation, whose every "
            f"column has the rows {'/'.join(ROWS[:2])}(/DR)/Stratified (the experiment's table "
            f"shows the Stratified values under the plain column name): give one of {known}"
        )
    return replace(rows[row][column], name=metric)


def _post_normalised(method: BaseMethod, per_user: dict, metric: str) -> dict | None:
    """pnDCG@k of every model from its per-user ``DCG@k`` (PlainDCG) or Cornac's ``NDCG@k``
    (times the ideal DCG) and the ideal DCG of the test positives, as Cornac's NDCG defines it
    (binary gains, ``1/log2(rank + 1)`` up to k): the registry's terms ``(dcg, idcg)`` and
    exponents, combined by the core's EstimateResult. None if ``metric`` is not pnDCG."""
    estimator = ESTIMATORS["pn_dcg"]
    label, at, k = metric.partition("@")
    if label != estimator.label or (at and not k.isdigit()):
        return None
    k = int(k) if at else -1
    discount = LogDiscount(framework_cutoff(k, name=f"the cutoff of {metric!r}"))
    dcg_name, ndcg_name = ESTIMATORS["dcg"].display(discount), NDCG(k=k).name
    kept = [c for c in (dcg_name, ndcg_name) if all(v.get(c) for v in per_user.values())]
    if not kept:
        raise ValueError(
            f"{metric} is built from each user's DCG, which the experiment did not keep: give "
            f"PlainDCG(k={k}) or Cornac's NDCG(k={k}) in its metrics (known: "
            f"{sorted(next(iter(per_user.values())))})"
        )
    held = _positives(method, method.test_set)
    ideal = ideal_dcg((held > 0).astype(float), discount)
    results, source = {}, kept[0]
    for name, values in per_user.items():
        users = np.array(sorted(values[source]), dtype=np.int64)
        dcg_u = np.array([values[source][u] for u in users.tolist()], dtype=float)
        dcg_u = dcg_u * ideal[users] if source == ndcg_name else dcg_u
        terms = np.column_stack([dcg_u, ideal[users]])
        excluded = method.total_users - users.size
        results[name] = EstimateResult(metric, terms, estimator.exponents, users, excluded)
    return results


def _per_user_mean(method, name, values: Mapping, average: float, metric: str) -> EstimateResult:
    """A column of Cornac's per-user results as the core's mean, checked against its average."""
    users = np.array(sorted(values), dtype=np.int64)
    terms = np.array([values[u] for u in users.tolist()], dtype=float)
    if users.size and not np.isclose(terms.mean(), average, rtol=1e-9, atol=1e-12):
        raise ValueError(
            f"{metric} of {name} is {average:.6g} in the experiment's table but its per-user "
            f"values average {terms.mean():.6g}: not a mean of per-user values"
        )
    return EstimateResult(metric, terms, (1,), users, method.total_users - users.size)


def metric_results(experiment, metric: str) -> dict[str, PairedEstimate]:
    """Model name → the core's estimate of ``metric`` in a run ``cornac.Experiment`` with one
    train/test split, with its interval (``.confidence_interval()``), standard error and paired
    tests (``.compare``).

    * Any column of Cornac's per-user results (``result.metric_user_results``: ``NDCG@10``,
      ``Recall@10``, ``IPS-DCG@10``, …) is the mean of its per-user values, as in Cornac's table.
    * ``"pnDCG@k"`` (``"pnDCG"``: whole rankings), which Cornac's per-user loop cannot average
      (Jeunen et al. KDD'24 §5: a ratio of means), is built in the user's own split from the
      per-user ``DCG@k`` (:class:`PlainDCG`) or Cornac's ``NDCG@k`` and the test set's ideal DCG.
    * After a :class:`PropensityStratifiedEvaluation`, ``metric`` names the row:
      ``"Stratified NDCG@10"`` (the experiment's table), ``"Closed NDCG@10"`` (the holdout),
      ``"IPS NDCG@10"`` or ``"DR DCG@10"``; a plain column name is refused.

    Each estimate carries ``metric`` as its name; its ``user_ids`` are Cornac's user indices
    (after a stratified evaluation, the rows of ``experiment.result[i].user_index``).

    Examples
    --------
    >>> import tempfile
    >>> import cornac
    >>> from cornac.eval_methods import RatioSplit
    >>> from cornac.metrics import NDCG
    >>> from cornac.models import BPR
    >>> data = [(f"u{u}", f"i{(u + i) % 9}", 5.0) for u in range(30) for i in range(5)]
    >>> split = RatioSplit(data, test_size=0.3, seed=1, verbose=False)
    >>> logs = tempfile.mkdtemp()  # Cornac saves its log and the models there
    >>> bpr = BPR(k=2, max_iter=20, seed=1)
    >>> experiment = cornac.Experiment(split, [bpr], [NDCG(k=3)], save_dir=logs)
    >>> experiment.run()  # doctest: +ELLIPSIS
    <BLANKLINE>
    TEST:
    ...
    >>> pn = metric_results(experiment, "pnDCG@3")["BPR"]
    >>> pn.name, pn.n_users, round(pn.value, 4), [round(x, 4) for x in pn.confidence_interval()]
    ('pnDCG@3', 27, 0.5103, [0.3683, 0.6522])
    """
    results, names = _run(experiment)
    if not isinstance(metric, str):
        raise TypeError(
            f"metric must be a column name such as 'NDCG@10', got {check.shown(metric)}"
        )
    if any(not hasattr(r, "metric_user_results") for r in results):  # CVResult: fold averages
        raise ValueError(
            "metric_results, tied_with_best and leaderboard need per-user results of one "
            "train/test split, not cross-validation's fold averages"
        )
    if all(isinstance(r, StratifiedModelResult) for r in results):
        return {n: _stratified_row(r, metric) for n, r in zip(names, results, strict=True)}
    per_user = {n: r.metric_user_results or {} for n, r in zip(names, results, strict=True)}
    method = experiment.eval_method
    pn_dcg = _post_normalised(method, per_user, metric)
    if pn_dcg is not None:
        return pn_dcg
    for name, values in per_user.items():
        if not values.get(metric):
            raise ValueError(
                f"no per-user results for metric {metric!r} of {name}; known: {sorted(values)}"
                " (and pnDCG@k, from DCG@k or NDCG@k)"
            )
    return {
        name: _per_user_mean(
            method, name, per_user[name][metric], r.metric_avg_results[metric], metric
        )
        for name, r in zip(names, results, strict=True)
    }


def tied_with_best(
    experiment, metric: str, alpha=0.05, correction=None, test="mcb"
) -> TiedWithBest:
    """Models of a run ``cornac.Experiment`` statistically tied with the best on ``metric``
    (:func:`metric_results`: a column, ``"pnDCG@k"``, or after a stratified evaluation a named
    row such as ``"Stratified NDCG@10"``), over the users every model was evaluated on
    (:func:`~recpack_ope.inference.significance.tied_with_best`; ``measure`` of the result is
    ``metric``). Usage: ``tied_with_best(experiment, "NDCG@10").tied``."""
    scores = SystemScores.from_estimates(metric_results(experiment, metric), name=metric)
    return core_tied_with_best(scores, alpha=alpha, correction=correction, test=test)


def leaderboard(experiment, metrics=None, **options) -> Leaderboard:
    """:func:`~recpack_ope.inference.leaderboard.leaderboard` of a run ``cornac.Experiment``
    on ``metrics`` (names as for :func:`metric_results`; default: every column with per-user
    results, or after a stratified evaluation every column's Stratified row); ``options`` are
    its ``level``, ``alpha`` and ``correction``. Usage: ``leaderboard(experiment).to("latex")``.
    """
    results = _run(experiment)[0]
    if metrics is None:
        first = results[0]
        if isinstance(first, StratifiedModelResult):
            metrics = [f"Stratified {c}" for c in first.estimates]
        else:
            metrics = [
                c for c, v in (getattr(first, "metric_user_results", None) or {}).items() if v
            ]
    return leaderboard_of(metrics, lambda metric: metric_results(experiment, metric), **options)


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
