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

import inspect
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal

import numpy as np
import scipy.sparse as sp

from .. import registry
from ..evaluation.files import estimate_rows
from ..inference.diagnostics import (
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
    naming,
)
from ..inference.leaderboard import Leaderboard, labelled, leaderboard
from ..inference.moments import Moments, SummaryComparison, SummaryEstimate, WeightSums
from ..inference.summary import robustness_columns
from ..io.tables import (
    missing_propensity_message,
    null_message,
    propensity_range_message,
    value_message,
)
from ..metrics.dcg import check_population
from ..propensity.discount import Discount
from ..registry import ESTIMATORS, Estimator, estimator
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


#: The weighted estimators whose sensitivity bounds merge across partitions: the linear and
#: linear-ratio forms of per-item weights (docs/sensitivity.md).
_MERGED_BOUNDS = ("ips_dcg", "snips_dcg")


def _no_bounds(metric: str, name: str) -> str | None:
    """Why the weighted estimator ``metric`` (results named ``name``) has no sensitivity bounds
    on Spark, and what gives them; None when it has them or is unweighted."""
    if metric in _MERGED_BOUNDS or "propensity" not in ESTIMATORS[metric].needs:
        return None
    return (
        f"{name} has no sensitivity bounds on Spark: its normaliser (per user, or the ideal DCG "
        "of the weighted gains) makes them depend on every user's terms, and only sums reach "
        f"the driver; compute it in memory with recpack_ope.metrics.{metric} for its bounds, "
        f"or use {' or '.join(_MERGED_BOUNDS)}, whose bounds Spark merges"
    )


def _cut_at_k(entry: Estimator) -> bool:
    """Whether the core function takes a cutoff ``k`` (recall) rather than a discount."""
    return "k" in inspect.signature(entry.function).parameters


@dataclass(frozen=True)
class _Plan:
    """What every partition computes: models × estimators (registry names) on chunks of
    users."""

    models: tuple[str, ...]
    metrics: tuple[str, ...]
    discount: Discount
    k: int
    clip: float | None
    weighted: bool
    ess_threshold: float
    population: str = "observed"
    checked: bool = False
    key: str = "user"
    nullable: tuple[str, ...] = ("value", "propensity", "stratify")
    what: str = "the held-out data or recommendations"
    shown: tuple[str, ...] = ("user", "item")
    #: The Spark type of the users of :meth:`per_key`'s rows (None: as the chunk holds them).
    user_type: str | None = None

    def call(self, metric: str, y_true, y_score, propensity):
        """The registry's estimator ``metric`` on one chunk, over the plan's population; a
        plain one ignores ``propensity``, and recall is cut at ``k``."""
        entry = ESTIMATORS[metric]
        discount = self.discount.with_cutoff(self.k) if _cut_at_k(entry) else self.discount
        return entry(
            y_true,
            y_score,
            discount=discount,
            propensity=propensity,
            clip=self.clip,
            ess_threshold=self.ess_threshold,
            population=self.population,
        )

    def matrices(self, chunk: dict):
        """Validated chunk → (user ids, y_true, propensity per item, y_score per model)."""
        user, item, value, source = chunk["user"], chunk["item"], chunk["value"], chunk["source"]
        # The partition's rows arrive grouped by user: users are coded at their boundaries.
        first = np.r_[True, user[1:] != user[:-1]]
        u = np.cumsum(first) - 1
        users = user[first]
        items, i = np.unique(item, return_inverse=True)
        held = source == -1
        # One sort by (source, user, item) puts every matrix's entries in CSR order and brings
        # repeated pairs together.
        key = ((source.astype(np.int64) + 1) * users.size + u) * np.int64(items.size) + i
        order = np.argsort(key)
        ordered = key[order]
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        self._check(chunk, held, None if twice.size == 0 else order[twice[0] + 1])
        shape = (users.size, items.size)
        bounds = np.searchsorted(
            ordered, np.arange(len(self.models) + 2) * (users.size * np.int64(items.size))
        )
        matrices = []
        for s in range(len(self.models) + 1):
            rows = order[bounds[s] : bounds[s + 1]]
            indptr = np.r_[0, np.cumsum(np.bincount(u[rows], minlength=users.size))]
            matrices.append(
                sp.csr_matrix((value[rows].astype(np.float64), i[rows], indptr), shape=shape)
            )
        propensity = np.ones(items.size)
        if self.weighted:
            propensity[i[held]] = chunk["propensity"][held]
        return users, matrices[0], propensity, matrices[1:]

    def _check(self, chunk, held, repeated) -> None:
        """Refuse a chunk with bad rows; the driver then names the in-memory engine's first
        problem (:func:`~recpack_ope.spark._frames.diagnose`)."""
        value, source = chunk["value"], chunk["source"]
        names = ("user", "item")
        bad = np.flatnonzero(chunk["value:null"])
        if bad.size:
            example = _partitions.example(chunk, bad[0], names)
            if held[bad[0]]:
                raise _partitions.InputError(null_message("held_out", "reward", example))
            raise _partitions.InputError(
                f"recommendations of {self.models[int(source[bad[0]])]!r} have a null score or "
                f"rank, e.g. {example}"
            )
        bad = np.flatnonzero(held & ~(np.isfinite(value) & (value >= 0)))
        if bad.size:
            raise _partitions.InputError(
                value_message("held_out", "reward", _partitions.example(chunk, bad[0], names))
            )
        bad = np.flatnonzero(~held & ~np.isfinite(value))
        if bad.size:
            model = self.models[int(source[bad[0]])]
            raise _partitions.InputError(
                f"recommendations of {model!r} must hold finite scores or ranks, got "
                f"{_partitions.example(chunk, bad[0], names)}"
            )
        if self.checked:
            p = chunk["propensity"]
            bad = np.flatnonzero(held & np.isnan(p))
            if bad.size:
                item = _partitions._plain(chunk["item"][bad[0]])
                held_row = _partitions.example(chunk, bad[0], names)
                raise _partitions.InputError(
                    missing_propensity_message("propensity", item, "held_out", held_row)
                )
            bad = np.flatnonzero(held & ~((p > 0) & (p <= 1)))
            if bad.size:
                row = f"(propensity={_partitions._plain(p[bad[0]])})"
                held_row = _partitions.example(chunk, bad[0], names)
                raise _partitions.InputError(
                    propensity_range_message("propensity", row, "held_out", held_row)
                )
        if repeated is not None:
            row = repeated
            where = (
                "held_out"
                if source[row] == -1
                else f"recommendations of {self.models[int(source[row])]!r}"
            )
            pair = _partitions.example(chunk, row, ("user", "item"))
            raise _partitions.InputError(f"{where} has the (user, item) pair {pair} more than once")

    def evaluate(self, chunk: dict):
        """The chunk's users, which of them are evaluated, and their per-user terms of every
        model and metric (None if none is), with names, weight diagnostics and the weight sums
        of the estimators whose bounds merge. A user with recommendations but no held-out rows
        is a user without held-out rewards (an empty row of ``y_true``), as in memory."""
        users, y_true, propensity, scores = self.matrices(chunk)
        positive = np.diff(sp.csr_matrix(y_true > 0).indptr) > 0
        evaluated = positive if self.population == "observed" else np.ones_like(positive)
        if not positive.any():
            # Over all users a chunk without rewards still counts: every term of its users
            # (DCG, ideal DCG, interactions, weights) is 0, and so are their weight sums.
            width = _width(self.metrics) * len(self.models)
            terms = np.zeros((users.size, width)) if evaluated.any() else None
            return users, evaluated, terms, {}, {}, {}
        items = np.unique(chunk["item"])  # the item of each column of the chunk's matrices
        blocks, names, groups, sums = [], {}, {}, {}
        with warnings.catch_warnings():
            # The merged diagnostics decide on the driver whether to warn.
            warnings.simplefilter("ignore", ReliabilityWarning)
            for model, y_score in zip(self.models, scores, strict=True):
                for metric in self.metrics:
                    result = self.call(metric, y_true, y_score, propensity)
                    blocks.append(result.terms)
                    names[metric] = result.name
                    if result.diagnostics is not None:
                        groups[model, metric] = result.diagnostics.groups
                    if metric in _MERGED_BOUNDS:
                        sums[model, metric] = WeightSums.from_weighting(result.weighting, items)
        return users, evaluated, np.hstack(blocks), names, groups, sums

    def chunk(self, chunk: dict) -> _Partial:
        users, evaluated, terms, names, groups, sums = self.evaluate(chunk)
        d = _width(self.metrics) * len(self.models)
        moments = Moments.empty(d) if terms is None else Moments.from_terms(terms)
        held = chunk["user"][chunk["source"] == -1]
        held_users = np.unique(held)
        return _Partial(
            moments,
            int((~evaluated).sum()),
            names,
            {k: [g] for k, g in groups.items()},
            sums,
            # Rows arrive grouped by user: a user's held-out rows are one run of ``held``.
            users.size - int(np.sum(np.r_[True, held[1:] != held[:-1]]) if held.size else 0),
            {
                model: int(
                    held_users.size - np.isin(held_users, chunk["user"][chunk["source"] == m]).sum()
                )
                for m, model in enumerate(self.models)
            },
        )

    def per_key(self, chunk: dict):
        import pyarrow as pa

        users, members, terms = self.evaluate(chunk)[:3]
        evaluated = users[members]
        columns = {
            "user": np.repeat(evaluated, len(self.models)) if terms is not None else evaluated[:0],
            "model": np.tile(np.asarray(self.models, dtype=object), evaluated.size),
        }
        if terms is None:
            terms = np.zeros((0, _width(self.metrics) * len(self.models)))
        per_model = terms.reshape(evaluated.size * len(self.models), -1)
        for j, name in enumerate(_term_columns(self.metrics)):
            columns[name] = per_model[:, j]
        if self.user_type == "decimal(20,0)":
            # Ids beyond int64 arrive as Python ints: exact as decimals, as Spark holds them.
            columns["user"] = pa.array(
                [Decimal(int(u)) for u in columns["user"]], pa.decimal128(20, 0)
            )
        return pa.RecordBatch.from_pydict(columns)


class NoReward(ValueError):
    """No held-out reward is positive and an estimator has no value: ``reason`` is the core's
    own refusal, ``str`` names the held-out table before it."""

    def __init__(self, label: str, reason: str):
        super().__init__(f"{label}: {reason}")
        self.reason = reason


def core_refusal(label: str, call) -> NoReward:
    """The core's refusal by ``call()`` of held-out rewards all 0, naming the held-out table
    ``label``: Spark raises the core's own message, so that both engines word it alike."""
    try:
        call()
    except ValueError as error:
        return NoReward(label, str(error))
    raise AssertionError(f"the core accepted held-out rewards all 0 in {label}")


def _names_without_rewards(plan: _Plan, n_users: int, label: str) -> dict:
    """The estimators' names when no held-out reward is positive (each user's terms are then
    0), or the core's refusal as :class:`NoReward`: the core itself runs on ``n_users`` (at
    most one kept) users without rewards, so that both engines give the same value (plain and
    IPS-DCG over population "all" are exactly 0) or the same message."""
    y_true = sp.csr_matrix((min(n_users, 1), 1))
    names = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for metric in plan.metrics:
            try:
                names[metric] = plan.call(metric, y_true, y_true, np.ones(1)).name
            except ValueError as error:
                raise NoReward(label, str(error)) from None
    return names


def _width(metrics) -> int:
    """Per-user terms of ``metrics`` (one model)."""
    return sum(len(ESTIMATORS[m].terms) for m in metrics)


def _term_columns(metrics) -> list[str]:
    """Column names of the per-user terms of ``metrics`` (one model): the estimator's name
    for one term, ``name_term`` for several."""
    return [
        m if len(ESTIMATORS[m].terms) == 1 else f"{m}_{t}"
        for m in metrics
        for t in ESTIMATORS[m].terms
    ]


@dataclass
class _Partial:
    """Sufficient statistics of the users of some partitions."""

    moments: Moments
    n_excluded: int
    names: dict
    groups: dict = field(default_factory=dict)
    sums: dict = field(default_factory=dict)
    n_without_held_out: int = 0
    #: Model → held-out users without any of its recommendations.
    n_without_recommendations: dict = field(default_factory=dict)

    def merge(self, other: _Partial) -> _Partial:
        groups = {
            k: self.groups.get(k, []) + other.groups.get(k, [])
            for k in {*self.groups, *other.groups}
        }
        sums = {**self.sums, **other.sums}
        for k in self.sums.keys() & other.sums.keys():
            sums[k] = self.sums[k].merge(other.sums[k])
        return _Partial(
            self.moments.merge(other.moments),
            self.n_excluded + other.n_excluded,
            {**self.names, **other.names},
            groups,
            sums,
            self.n_without_held_out + other.n_without_held_out,
            {
                model: self.n_without_recommendations.get(model, 0)
                + other.n_without_recommendations.get(model, 0)
                for model in {**self.n_without_recommendations, **other.n_without_recommendations}
            },
        )


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


def _plan(metrics, models, discount, k, propensity, clip, ess_threshold, population) -> _Plan:
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
    cut = [m for m in metrics if _cut_at_k(ESTIMATORS[m])]
    if cut and k is None:
        raise ValueError(f"{cut[0]} needs a cutoff: give k= or a discount with a cutoff")
    return _Plan(
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
            _names_without_rewards(plan, 0, inputs[0][0].label)
        if not partial.names:
            n_users = partial.moments.n + partial.n_excluded
            partial.names = _names_without_rewards(plan, n_users, inputs[0][0].label)
        return partial

    partial = _diagnosed(summed, inputs)
    ids, raw = WeightSums.shared_units(partial.sums.values())
    estimates, column = {}, 0
    for model in plan.models:
        estimates[model] = {}
        for metric in plan.metrics:
            entry = ESTIMATORS[metric]
            width = len(entry.terms)
            groups = partial.groups.get((model, metric))
            diagnostics = (
                None
                if groups is None
                else WeightDiagnostics.from_groups(WeightGroups.concatenate(groups), ess_threshold)
            )
            sums = partial.sums.get((model, metric))
            estimates[model][metric] = SummaryEstimate.product(
                partial.names[metric],
                partial.moments,
                range(column, column + width),
                entry.exponents,
                n_excluded_users=partial.n_excluded,
                diagnostics=diagnostics,
                weighting=None if sums is None else sums.weighting(partial.moments.n, ids, raw),
                no_bounds=_no_bounds(metric, partial.names[metric]),
            )
            if diagnostics is not None:
                with naming(model):
                    diagnostics.warn(partial.names[metric])
            column += width
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
        [f"user {user_type}", "model string", *(f"{c} double" for c in _term_columns(plan.metrics))]
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
