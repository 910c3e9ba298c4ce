"""Held-out estimators on Spark DataFrames: the registry's estimators, per partition.

Rows of every user — held-out rewards and each model's recommendations — meet in one
partition (``_partitions``); a chunk of users becomes the sparse matrices that the core's
function behind each :data:`recpack_ope.registry.ESTIMATORS` entry takes, and it returns
every user's terms (:attr:`~recpack_ope.registry.Estimator.terms`). Only the terms' moments
and the weight groups of IPS estimates reach the driver, where
:class:`~recpack_ope.inference.moments.SummaryEstimate` combines them with the entry's
:attr:`~recpack_ope.registry.Estimator.exponents` into the same value, interval and paired
tests as the in-memory estimate.

Items are indexed in increasing id order within each chunk, so tied scores go to the lower
item id, as the core's rankings break ties by the lower item index.

The sensitivity bounds to wrong propensities merge for ``ips_dcg`` and ``snips_dcg``: every
partition also ships, per item id, the estimate's summed coefficients
(:class:`~recpack_ope.inference.moments.WeightSums`), and the driver gives each estimate the
collapsed weighting of the in-memory one, so ``sensitivity(gamma)`` and a comparison's
``sensitivity(gamma)`` and ``robustness()`` equal the in-memory values. The other weighted
estimators are normalised per user or by the ideal DCG, whose bounds need every user's terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .. import registry
from ..evaluation.chunks import (
    ChunkPlan,
    cut_at_k,
    names_without_rewards,
    summary_estimates,
    term_columns,
)
from ..evaluation.files import estimate_rows
from ..inference.leaderboard import Leaderboard, labelled, leaderboard
from ..inference.moments import Moments, SummaryComparison
from ..inference.summary import robustness_columns
from ..metrics.dcg import check_population
from ..propensity.discount import Discount
from ..registry import ESTIMATORS, estimator
from . import _frames, _partitions
from ._frames import diagnose, held_out_frame, held_out_inputs

__all__ = ["HeldOutEvaluation", "evaluate", "per_user"]

#: Why Spark refuses the held-out estimators of these weightings, and what to use instead.
_NOT_ON_SPARK = {
    "doubly_robust": (
        "{name} needs a reward model's prediction for every (user, item), which the Spark "
        "engine does not carry: use recpack_ope.metrics.{name} in memory ({plain!r} is the "
        "unweighted estimator)"
    ),
    "stratified": (
        "{name} fixes its strata from every held-out interaction at once: use "
        "recpack_ope.spark.stratified(..., metric={plain!r})"
    ),
}


@dataclass(frozen=True, eq=False)
class HeldOutEvaluation:
    """Estimates of several models and metrics over the same users, from one Spark pass.

    Attributes
    ----------
    estimates : dict
        ``estimates[model][metric]`` is a :class:`~recpack_ope.inference.moments.SummaryEstimate`.
    moments : Moments
        The joint moments of every model's and metric's per-user terms.
    n_users_without_held_out : int
        Users with recommendations but no held-out rows: users without held-out rewards.
    n_users_without_recommendations : dict
        Model → held-out users without any of its recommendations, who count as 0 for it
        (as :attr:`recpack_ope.io.tables.HeldOutTables.n_users_without_recommendations`).
    """

    estimates: dict
    moments: Moments
    n_users_without_held_out: int = 0
    n_users_without_recommendations: dict = field(default_factory=dict)

    def __getitem__(self, model: str) -> dict:
        return self.estimates[model]

    def compare(self, a: str, b: str, metric: str, level: float = 0.95) -> SummaryComparison:
        """Paired comparison ``a − b`` of one metric over the same users; for ``ips_dcg`` and
        ``snips_dcg`` its ``sensitivity(gamma)`` and ``robustness()`` (Γ* of the sign) equal
        the in-memory comparison's (without a ``level``, which needs every user's terms)."""
        for model in (a, b):
            if model not in self.estimates:
                raise KeyError(f"no model {model!r}; evaluated: {list(self.estimates)}")
        return self.estimates[a][metric].compare(self.estimates[b][metric], level, names=(a, b))

    def leaderboard(self, **options) -> Leaderboard:
        """The models side by side, one column per metric named as its estimates print
        (``"IPS-DCG@10"``): :func:`~recpack_ope.inference.leaderboard.leaderboard` with
        ``options`` (``level``, ``alpha``, ``correction``); tied with the best by the pairwise
        tests against the best, as merged moments allow."""
        return leaderboard(labelled(self.estimates), **options)

    def table(self, level: float = 0.95) -> list[dict]:
        """One row per model and metric: value, interval, standard error, users; for
        ``ips_dcg`` and ``snips_dcg`` also ``sens_low`` and ``sens_high`` (the bounds when every
        propensity may be off by a factor up to
        :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` either way) and, on every row
        but the metric's best model, ``robust_gamma``: Γ* of the sign of best − model; and for
        every weighted estimate its weight diagnostics (``ess``, …, ``reliable``, ``flags``:
        :func:`~recpack_ope.inference.summary.diagnostic_columns`), merged exactly from the
        partitions. These are the columns of
        :func:`~recpack_ope.inference.summary.summary_rows` Spark can compute;
        ``robust_gamma_95`` needs the in-memory path."""
        rows = estimate_rows(self.estimates, level)
        for row in rows:
            by_model = {model: metrics[row["metric"]] for model, metrics in self.estimates.items()}
            best = max(by_model, key=lambda model: by_model[model].value)
            if row["model"] != best:
                row.update(robustness_columns(by_model[best], by_model[row["model"]], None))
        return rows


def _estimators(metrics, propensity, population) -> tuple[str, ...]:
    """The registry names ``metrics`` asks for, refused when unknown, repeated, not computable
    on Spark, weighted without ``propensity`` (naming the plain estimator), or without a value
    over ``population``."""
    metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one held-out estimator")
    if len(set(metrics)) != len(metrics):
        raise ValueError(f"metrics lists an estimator twice: {list(metrics)}")
    for name in metrics:
        entry = estimator(name, "held_out")
        if entry.weighting in _NOT_ON_SPARK:
            raise ValueError(_NOT_ON_SPARK[entry.weighting].format(name=name, plain=entry.plain))
        entry.check(propensity=propensity)
        entry.check_population(population)
    return metrics


def _plan(metrics, models, discount, k, propensity, clip, ess_threshold, population) -> ChunkPlan:
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    population = check_population(population)
    metrics = _estimators(metrics, propensity, population)
    if clip == "auto":
        raise ValueError(
            'clip="auto" selects the clipping from every weight at once; on Spark give a '
            "number (recpack_ope.propensity.weights.RECOMMENDED_CLIP is the recommended one)"
        )
    if k is None:
        k = discount.cutoff
    cut = [m for m in metrics if cut_at_k(ESTIMATORS[m])]
    if cut and k is None:
        raise ValueError(f"{cut[0]} needs a cutoff: give k= or a discount with a cutoff")
    return ChunkPlan(
        models=tuple(models),
        metrics=metrics,
        discount=discount,
        k=k,
        clip=clip,
        weighted=any("propensity" in ESTIMATORS[m].needs for m in metrics),
        ess_threshold=ess_threshold,
        population=population,
    )


def evaluate(
    held_out,
    recommendations,
    *,
    metrics=("dcg", "ndcg", "pn_dcg", "recall"),
    discount: Discount,
    k: int | None = None,
    propensity=None,
    clip: float | None = registry.default("clip"),
    n_partitions: int | None = None,
    ess_threshold: float = registry.default("ess_threshold"),
    population: str = registry.default("population"),
    labels: Mapping[str, str] | None = None,
) -> HeldOutEvaluation:
    """Held-out estimates of one or more models on Spark, in one pass over the data.

    Parameters
    ----------
    held_out : pyspark.sql.DataFrame
        Columns ``user``, ``item``, ``reward`` (``>= 0``; binary or graded), one row per
        (user, item). Users whose rewards are all 0 are counted as excluded, or over
        ``population="all"`` evaluated with reward 0.
    recommendations : pyspark.sql.DataFrame or mapping of name → DataFrame
        Columns ``user``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top),
        one row per (user, item); unlisted items are not ranked. A user without held-out
        rows is a user without held-out rewards. One frame is evaluated as the model
        ``"model"``.
    metrics : str or sequence of str
        Names of held-out estimators of :data:`recpack_ope.registry.ESTIMATORS`, each the
        core function of the same name: ``"dcg"``, ``"ndcg"``, ``"pn_dcg"``, ``"recall"``
        (plain, whether or not ``propensity`` is given) and ``"ips_dcg"``, ``"snips_dcg"``,
        ``"ips_ndcg"``, ``"ips_pn_dcg"``, ``"ips_recall"`` (weighted, need ``propensity``).
        ``"dr_dcg"`` (a reward model) and ``"stratified_ndcg"``
        (:func:`recpack_ope.spark.stratified`) are refused.
    discount : Discount
        Examination curve with its cutoff, e.g. ``LogDiscount(cutoff=10)``.
    k : int, optional
        Cutoff of ``recall`` and ``ips_recall``; default the discount's cutoff.
    propensity : pyspark.sql.DataFrame, optional
        Columns ``item``, ``propensity`` in (0, 1], one row per item; every held-out item
        needs one. Checked whenever given, read only by the weighted estimators.
        :func:`recpack_ope.spark.fit_propensity` fits one from interactions.
    clip : float, optional
        Clip IPS weights at m; None for the unclipped estimators. Default the held-out
        estimators' own (:func:`recpack_ope.registry.default`, their core functions'
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`).
    n_partitions : int, optional
        Partitions users are spread over (a positive integer); default
        ``spark.sql.shuffle.partitions``.
    ess_threshold : float
        ESS ratio below which a weighted estimate warns (``ReliabilityWarning``).
    population : {"observed", "all"}
        The users estimates average over (:data:`~recpack_ope.metrics.dcg.POPULATIONS`):
        ``"observed"``, those with a positive reward; ``"all"``, every user of ``held_out``
        and of the recommendations, as the core's estimators with that ``population`` over
        the same matrix. Estimators normalised per user refuse ``"all"``.
    labels : mapping, optional
        How messages name the inputs (:func:`recpack_ope.io.tables.table_label`):
        ``{"held_out": label, "propensity": label, "recommendations": {model: label}}``;
        default the arguments' names.

    Returns
    -------
    HeldOutEvaluation
        ``result[model][metric]`` estimates, pairable with ``compare``.

    Raises
    ------
    ValueError
        On an unknown estimator name, a weighted one without ``propensity`` (naming the plain
        one), an estimator Spark does not compute or without a value over ``population``, an
        unknown ``population``, an ``n_partitions`` below 1, or bad rows: the first problem
        the in-memory engine would name, with its message (column and an example row).

    Examples
    --------
    >>> import pandas as pd
    >>> from recpack_ope import LogDiscount
    >>> from recpack_ope.spark import evaluate, local_session
    >>> spark = local_session(1)  # doctest: +SKIP
    >>> held = spark.createDataFrame(
    ...     pd.DataFrame({"user": [1, 1, 2], "item": [10, 12, 11], "reward": [1.0, 1.0, 1.0]})
    ... )  # doctest: +SKIP
    >>> recs = spark.createDataFrame(
    ...     pd.DataFrame({"user": [1, 1, 2, 2], "item": [10, 11, 11, 12], "rank": [1, 2, 1, 2]})
    ... )  # doctest: +SKIP
    >>> p = spark.createDataFrame(
    ...     pd.DataFrame({"item": [10, 11, 12], "propensity": [0.5, 1.0, 0.25]})
    ... )  # doctest: +SKIP
    >>> result = evaluate(
    ...     held, recs, metrics=("dcg", "ips_dcg"), discount=LogDiscount(2), propensity=p
    ... )  # doctest: +SKIP
    >>> result["model"]["dcg"].value, result["model"]["ips_dcg"].value  # doctest: +SKIP
    (1.0, 1.5)
    """
    _partitions.check_partitions(n_partitions)
    plan, frame, inputs = _prepare(
        held_out,
        recommendations,
        metrics,
        discount,
        k,
        propensity,
        clip,
        ess_threshold,
        population=population,
        labels=labels,
    )

    def summed():
        partial = _partitions.run(frame, plan, n_partitions)
        # Only chunks with a positive reward call the estimators and name their results.
        if partial is None:
            names_without_rewards(plan, 0, inputs[0][0].label)
        if not partial.names:
            n_users = partial.moments.n + partial.n_excluded
            partial.names = names_without_rewards(plan, n_users, inputs[0][0].label)
        return partial

    partial = _diagnosed(summed, inputs)
    estimates = summary_estimates(plan, partial)
    return HeldOutEvaluation(
        estimates,
        partial.moments,
        partial.n_without_held_out,
        # Every chunk counts every model: a model without a key had no chunk, and no user.
        {model: partial.n_without_recommendations.get(model, 0) for model in plan.models},
    )


def per_user(
    held_out,
    recommendations,
    *,
    metrics=("dcg", "ndcg", "pn_dcg", "recall"),
    discount: Discount,
    k: int | None = None,
    propensity=None,
    clip: float | None = registry.default("clip"),
    n_partitions: int | None = None,
    population: str = registry.default("population"),
):
    """Per-user terms of every model and estimator as a lazy Spark DataFrame (never
    collected).

    One row per evaluated user and model: ``user``, ``model`` and the
    :attr:`~recpack_ope.registry.Estimator.terms` of each estimator, named after it for a
    single term (``dcg``, ``ndcg``, ``recall``, ``ips_dcg``) and ``name_term`` otherwise
    (``pn_dcg_dcg`` and ``pn_dcg_idcg``; ``snips_dcg_dcg``, ``snips_dcg_n_held_out``,
    ``snips_dcg_weight_sum``). Their means make up the estimates of :func:`evaluate`. Write
    it with ``.write.parquet(...)``. Parameters as for :func:`evaluate`.

    ``user`` has the type the users are compared as: ``bigint``, ``string`` for text ids, or
    ``decimal(20,0)`` when some are uint64 ids beyond int64, which it holds exactly (a parquet
    file of it reads back as decimals; ``int(value)`` gives the id). The input rows are
    checked before the frame is returned (a few Spark jobs), so bad rows are refused here with
    :func:`evaluate`'s ValueError, not inside Spark's exception when the frame is written.

    Examples
    --------
    >>> from recpack_ope import LogDiscount
    >>> from recpack_ope.spark import per_user
    >>> frame = per_user(held, recs, metrics=("pn_dcg",), discount=LogDiscount(2))  # doctest: +SKIP
    >>> frame.columns  # doctest: +SKIP
    ['user', 'model', 'pn_dcg_dcg', 'pn_dcg_idcg']
    """
    _partitions.check_partitions(n_partitions)
    plan, frame, inputs = _prepare(
        held_out,
        recommendations,
        metrics,
        discount,
        k,
        propensity,
        clip,
        registry.default("ess_threshold"),
        population=population,
    )
    # The frame is lazy: a refusal found in its partitions would reach the caller inside
    # Spark's exception, so its rows are checked first, with evaluate's messages.
    diagnose(*inputs)
    user_type = frame.schema["user"].dataType.simpleString()
    plan = replace(plan, user_type=user_type)
    schema = ", ".join(
        [f"user {user_type}", "model string", *(f"{c} double" for c in term_columns(plan.metrics))]
    )
    return _partitions.run(frame, plan, n_partitions, per_key_schema=schema)


def _prepare(
    held_out,
    recommendations,
    metrics,
    discount,
    k,
    propensity,
    clip,
    ess_threshold,
    stratify_by=None,
    population="observed",
    labels=None,
):
    """(plan, long frame, the input tables for :func:`_diagnosed`); a propensity table is
    checked whenever given, as in memory."""
    plan = _plan(
        metrics,
        _frames.models(recommendations),
        discount,
        k,
        propensity,
        clip,
        ess_threshold,
        population,
    )
    plan = replace(plan, checked=propensity is not None)
    names, tables, weights = held_out_inputs(held_out, recommendations, propensity, labels)
    frame = _diagnosed(lambda: held_out_frame(tables, weights, stratify_by), (tables, weights))
    return plan, frame, (tables, weights)


def _diagnosed(step, inputs):
    """``step()``; when it refuses the inputs, the first problem in the in-memory engine's
    order, with its message (:func:`~recpack_ope.spark._frames.diagnose`)."""
    try:
        return step()
    except ValueError:
        diagnose(*inputs)
        raise
