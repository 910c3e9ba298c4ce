"""Chunks of whole users: per-user terms of the registry's held-out estimators and their
sufficient statistics, which any engine that reads data in parts merges.

Rows of every user (held-out rewards and each model's recommendations) arrive together in a
chunk; :class:`ChunkPlan` turns the chunk into the sparse matrices that the core function
behind each :data:`recpack_ope.registry.ESTIMATORS` entry takes, and returns every user's terms
(:attr:`~recpack_ope.registry.Estimator.terms`) as a :class:`Partial`: their moments, the weight
groups of IPS estimates and, for the estimators whose sensitivity bounds merge, the summed
weight coefficients per item (:class:`~recpack_ope.inference.moments.WeightSums`). Partials
merge exactly, and :func:`summary_estimates` combines the merged one with each entry's
:attr:`~recpack_ope.registry.Estimator.exponents` into the value, interval and paired tests of
the in-memory estimate. The streaming file engine (:mod:`recpack_ope.evaluation.streaming`) and
the Spark engine (:mod:`recpack_ope.spark`) both compute through this module.

Items are indexed in increasing id order within each chunk, so tied scores go to the lower
item id, as the core's rankings break ties by the lower item index.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import scipy.sparse as sp

from ..inference.diagnostics import ReliabilityWarning, WeightDiagnostics, WeightGroups, naming
from ..inference.moments import Moments, SummaryEstimate, WeightSums
from ..io.tables import (
    missing_propensity_message,
    null_message,
    propensity_range_message,
    value_message,
)
from ..propensity.discount import Discount
from ..registry import ESTIMATORS, Estimator

__all__ = [
    "MERGED_BOUNDS",
    "ChunkError",
    "ChunkMatrices",
    "ChunkPlan",
    "NoReward",
    "Partial",
    "core_refusal",
    "item_columns",
    "names_without_rewards",
    "summary_estimates",
    "term_columns",
]


class ChunkError(ValueError):
    """Bad rows found in a chunk; the message names the table, the column and a row."""


def example(columns: dict, row: int, names) -> str:
    """``(name=value, …)`` of one row of a chunk's columns, for messages."""
    return "(" + ", ".join(f"{n}={plain(columns[n][row])}" for n in names) + ")"


def plain(value):
    """A numpy scalar as a Python value, for messages."""
    return value.item() if isinstance(value, np.generic) else value


#: The weighted estimators whose sensitivity bounds merge across partitions: the linear and
#: linear-ratio forms of per-item weights (docs/sensitivity.md).
MERGED_BOUNDS = ("ips_dcg", "snips_dcg")


def no_bounds(metric: str, name: str) -> str | None:
    """Why the weighted estimator ``metric`` (results named ``name``) has no sensitivity bounds
    when computed from merged chunks, and what gives them; None when it has them or is
    unweighted."""
    if metric in MERGED_BOUNDS or "propensity" not in ESTIMATORS[metric].needs:
        return None
    return (
        f"{name} has no sensitivity bounds when computed in parts (on Spark, or streamed from "
        "files): its normaliser (per user, or the ideal DCG "
        "of the weighted gains) makes them depend on every user's terms, and only sums reach "
        f"the driver; compute it in memory with recpack_ope.metrics.{metric} for its bounds, "
        f"or use {' or '.join(MERGED_BOUNDS)}, whose bounds merge"
    )


def cut_at_k(entry: Estimator) -> bool:
    """Whether the core function takes a cutoff ``k`` (recall) rather than a discount."""
    return "k" in inspect.signature(entry.function).parameters


def item_columns(item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The items of a chunk's columns, in increasing id order, and each row's column.

    Integer ids that span a range of at most a few times the rows index the columns directly
    (``id − smallest id``; an id absent from the chunk is an empty column), which needs no
    sort; other ids (text, or integers spread wide) are sorted. Either way columns follow the
    ids' order, so tied scores go to the lower item id.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.evaluation.chunks import item_columns
    >>> items, column = item_columns(np.array([12, 10, 12]))
    >>> items.tolist(), column.tolist()
    ([10, 11, 12], [2, 0, 2])
    >>> item_columns(np.array(["b", "a"], dtype=object))[1].tolist()
    [1, 0]
    """
    if item.dtype.kind in "iu" and item.size:
        low, high = item.min(), item.max()
        if int(high) - int(low) < max(4 * item.size, 1 << 16):
            column = item - low
            # scipy keeps 32-bit indices as given: no copy when the matrices are built.
            return np.arange(low, high + 1, dtype=item.dtype), column.astype(_index(column.size))
    items, column = np.unique(item, return_inverse=True)
    return items, column.ravel()


def _index(n: int):
    """The index type of scipy's sparse matrices for ``n`` entries."""
    return np.int32 if n < 2**31 else np.int64


def _sorted_block(u: np.ndarray, i: np.ndarray, n_users: int, start: int):
    """One source's rows of a chunk (rows ``start`` on, sorted by user code ``u``) in CSR
    order: (their chunk rows sorted by user, then column ``i``; those rows' columns; the CSR
    indptr; the chunk row of a repeated (user, column), or None).

    Rows are sorted within each user only: users' rows laid out in a 2-D array (padded when
    users have different numbers of rows, if that at most doubles them) and sorted along it,
    one short sort per user; else one sort of the block by (user, column)."""
    counts = np.bincount(u, minlength=n_users)
    indptr = np.r_[0, np.cumsum(counts)].astype(_index(u.size))
    n = u.size
    longest = int(counts.max(initial=0))
    if n and n_users * longest == n:
        # Every user has as many rows (a top-K export): the block is a users × K array.
        grid = i.reshape(n_users, longest)
        order = np.argsort(grid, axis=1)
        columns = np.take_along_axis(grid, order, axis=1)
        twice = np.flatnonzero(columns[:, 1:] == columns[:, :-1])
        order += indptr[:-1, None]
        rows, columns = order.ravel(), columns.ravel()
        # The k-th repeat in a users × (K − 1) layout is after row k // (K − 1), column k.
        twice = twice // (longest - 1) * longest + twice % (longest - 1) if twice.size else twice
    else:
        if n and n_users * longest <= 2 * n:
            padded = np.full((n_users, longest), np.iinfo(np.int64).max)
            padded[u, np.arange(n) - indptr[u]] = i
            order = np.argsort(padded, axis=1)
            rows = (order + indptr[:-1, None])[np.arange(longest) < counts[:, None]]
        else:
            rows = np.argsort(u.astype(np.int64) * (np.int64(i.max(initial=0)) + 1) + i)
        # Sorted within each user, the rows keep the users' order: u[rows] is u.
        columns = i[rows]
        twice = np.flatnonzero((columns[1:] == columns[:-1]) & (u[1:] == u[:-1]))
    repeated = None if twice.size == 0 else int(rows[twice[0] + 1]) + start
    return rows + start if start else rows, columns, indptr, repeated


@dataclass(frozen=True)
class ChunkMatrices:
    """A chunk's users as the core's matrices: the rows are ``users`` (ids, increasing) and the
    columns ``items`` (ids, increasing); ``column`` is each chunk row's column."""

    users: np.ndarray
    y_true: sp.csr_matrix
    propensity: np.ndarray
    scores: list
    items: np.ndarray
    column: np.ndarray


@dataclass(frozen=True)
class ChunkPlan:
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
        discount = self.discount.with_cutoff(self.k) if cut_at_k(entry) else self.discount
        return entry(
            y_true,
            y_score,
            discount=discount,
            propensity=propensity,
            clip=self.clip,
            ess_threshold=self.ess_threshold,
            population=self.population,
        )

    def matrices(self, chunk: dict) -> ChunkMatrices:
        """Validated chunk → its users' held-out rewards, scores and propensities as the core's
        matrices (:class:`ChunkMatrices`).

        A chunk's rows are either grouped by user (a Spark partition's: users are coded at
        their boundaries) or coded by the engine, with sorted ``users`` and each row's
        position ``u`` among them, each source's rows together in the order −1, 0, 1, … and
        sorted by user (a stream of sorted files)."""
        value, source = chunk["value"], chunk["source"]
        items, i = item_columns(chunk["item"])
        held = source == -1
        if "u" in chunk:
            users, u = chunk["users"], chunk["u"]
            ends = np.cumsum(
                np.bincount(source.astype(np.int64) + 1, minlength=len(self.models) + 1)
            )
            blocks = [
                _sorted_block(u[a:b], i[a:b], users.size, a)
                for a, b in zip(np.r_[0, ends[:-1]], ends, strict=True)
            ]
            repeats = [r for *_, r in blocks if r is not None]
            self._check(chunk, held, repeats[0] if repeats else None)
        else:
            user = chunk["user"]
            first = np.r_[True, user[1:] != user[:-1]]
            u = np.cumsum(first) - 1
            users = user[first]
            # One sort by (source, user, item) puts every matrix's entries in CSR order and
            # brings repeated pairs together.
            key = ((source.astype(np.int64) + 1) * users.size + u) * np.int64(items.size) + i
            order = np.argsort(key)
            ordered = key[order]
            twice = np.flatnonzero(ordered[1:] == ordered[:-1])
            self._check(chunk, held, None if twice.size == 0 else order[twice[0] + 1])
            bounds = np.searchsorted(
                ordered, np.arange(len(self.models) + 2) * (users.size * np.int64(items.size))
            )
            blocks = []
            for s in range(len(self.models) + 1):
                rows = order[bounds[s] : bounds[s + 1]]
                counts = np.bincount(u[rows], minlength=users.size)
                blocks.append((rows, i[rows], np.r_[0, np.cumsum(counts)], None))
        shape = (users.size, items.size)
        matrices = [
            sp.csr_matrix((value[rows].astype(np.float64, copy=False), columns, indptr), shape)
            for rows, columns, indptr, _ in blocks
        ]
        propensity = np.ones(items.size)
        if self.weighted:
            propensity[i[held]] = chunk["propensity"][held]
        return ChunkMatrices(users, matrices[0], propensity, matrices[1:], items, i)

    def _check(self, chunk, held, repeated) -> None:
        """Refuse a chunk with bad rows (:class:`ChunkError`); the engine then names the
        in-memory engine's first problem."""
        value, source = chunk["value"], chunk["source"]
        names = ("user", "item")
        bad = np.flatnonzero(chunk["value:null"])
        if bad.size:
            shown = example(chunk, bad[0], names)
            if held[bad[0]]:
                raise ChunkError(null_message("held_out", "reward", shown))
            raise ChunkError(
                f"recommendations of {self.models[int(source[bad[0]])]!r} have a null score or "
                f"rank, e.g. {shown}"
            )
        bad = np.flatnonzero(held & ~(np.isfinite(value) & (value >= 0)))
        if bad.size:
            raise ChunkError(value_message("held_out", "reward", example(chunk, bad[0], names)))
        bad = np.flatnonzero(~held & ~np.isfinite(value))
        if bad.size:
            model = self.models[int(source[bad[0]])]
            raise ChunkError(
                f"recommendations of {model!r} must hold finite scores or ranks, got "
                f"{example(chunk, bad[0], names)}"
            )
        if self.checked:
            p = chunk["propensity"]
            bad = np.flatnonzero(held & np.isnan(p))
            if bad.size:
                item = plain(chunk["item"][bad[0]])
                held_row = example(chunk, bad[0], names)
                raise ChunkError(
                    missing_propensity_message("propensity", item, "held_out", held_row)
                )
            bad = np.flatnonzero(held & ~((p > 0) & (p <= 1)))
            if bad.size:
                row = f"(propensity={plain(p[bad[0]])})"
                held_row = example(chunk, bad[0], names)
                raise ChunkError(propensity_range_message("propensity", row, "held_out", held_row))
        if repeated is not None:
            row = repeated
            where = (
                "held_out"
                if source[row] == -1
                else f"recommendations of {self.models[int(source[row])]!r}"
            )
            pair = example(chunk, row, ("user", "item"))
            raise ChunkError(f"{where} has the (user, item) pair {pair} more than once")

    def evaluate(self, chunk: dict):
        """The chunk's users, which of them are evaluated, and their per-user terms of every
        model and metric (None if none is), with names, weight diagnostics, the weight sums
        of the estimators whose bounds merge and the chunk's :class:`ChunkMatrices`. A user
        with recommendations but no held-out rows is a user without held-out rewards (an empty
        row of ``y_true``), as in memory."""
        coded = self.matrices(chunk)
        users, y_true = coded.users, coded.y_true
        positive = np.diff(sp.csr_matrix(y_true > 0).indptr) > 0
        evaluated = positive if self.population == "observed" else np.ones_like(positive)
        if not positive.any():
            # Over all users a chunk without rewards still counts: every term of its users
            # (DCG, ideal DCG, interactions, weights) is 0, and so are their weight sums.
            width = term_width(self.metrics) * len(self.models)
            terms = np.zeros((users.size, width)) if evaluated.any() else None
            return users, evaluated, terms, {}, {}, {}, coded
        blocks, names, groups, sums = [], {}, {}, {}
        with warnings.catch_warnings():
            # The merged diagnostics decide on the driver whether to warn.
            warnings.simplefilter("ignore", ReliabilityWarning)
            for model, y_score in zip(self.models, coded.scores, strict=True):
                for metric in self.metrics:
                    result = self.call(metric, y_true, y_score, coded.propensity)
                    blocks.append(result.terms)
                    names[metric] = result.name
                    if result.diagnostics is not None:
                        groups[model, metric] = result.diagnostics.groups
                    if metric in MERGED_BOUNDS:
                        sums[model, metric] = WeightSums.from_weighting(
                            result.weighting, coded.items
                        )
        return users, evaluated, np.hstack(blocks), names, groups, sums, coded

    def chunk(self, chunk: dict) -> Partial:
        users, evaluated, terms, names, groups, sums, coded = self.evaluate(chunk)
        d = term_width(self.metrics) * len(self.models)
        moments = Moments.empty(d) if terms is None else Moments.from_terms(terms)
        # A user has held-out rows (rewards 0 included) when its row of y_true stores entries.
        held = np.diff(coded.y_true.indptr) > 0
        return Partial(
            moments,
            int((~evaluated).sum()),
            names,
            {k: [g] for k, g in groups.items()},
            sums,
            users.size - int(held.sum()),
            {
                model: int((held & (np.diff(scores.indptr) == 0)).sum())
                for model, scores in zip(self.models, coded.scores, strict=True)
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
            terms = np.zeros((0, term_width(self.metrics) * len(self.models)))
        per_model = terms.reshape(evaluated.size * len(self.models), -1)
        for j, name in enumerate(term_columns(self.metrics)):
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
    ``label``: engines that merge chunks raise the core's own message, so that every engine
    words it alike."""
    try:
        call()
    except ValueError as error:
        return NoReward(label, str(error))
    raise AssertionError(f"the core accepted held-out rewards all 0 in {label}")


def names_without_rewards(plan: ChunkPlan, n_users: int, label: str) -> dict:
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


def term_width(metrics) -> int:
    """Per-user terms of ``metrics`` (one model)."""
    return sum(len(ESTIMATORS[m].terms) for m in metrics)


def term_columns(metrics) -> list[str]:
    """Column names of the per-user terms of ``metrics`` (one model): the estimator's name
    for one term, ``name_term`` for several."""
    return [
        m if len(ESTIMATORS[m].terms) == 1 else f"{m}_{t}"
        for m in metrics
        for t in ESTIMATORS[m].terms
    ]


@dataclass
class Partial:
    """Sufficient statistics of the users of some partitions."""

    moments: Moments
    n_excluded: int
    names: dict
    groups: dict = field(default_factory=dict)
    sums: dict = field(default_factory=dict)
    n_without_held_out: int = 0
    #: Model → held-out users without any of its recommendations.
    n_without_recommendations: dict = field(default_factory=dict)

    def merge(self, other: Partial) -> Partial:
        groups = {
            k: self.groups.get(k, []) + other.groups.get(k, [])
            for k in {*self.groups, *other.groups}
        }
        sums = {**self.sums, **other.sums}
        for k in self.sums.keys() & other.sums.keys():
            sums[k] = self.sums[k].merge(other.sums[k])
        return Partial(
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


def summary_estimates(plan: ChunkPlan, partial: Partial) -> dict:
    """``estimates[model][metric]``: the :class:`~recpack_ope.inference.moments.SummaryEstimate`
    of every model and metric of ``plan`` from the merged ``partial``, with weight diagnostics
    merged exactly (warning, naming the model, when unreliable) and, for
    :data:`MERGED_BOUNDS`, the collapsed weighting that gives the in-memory sensitivity bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope import LogDiscount
    >>> from recpack_ope.evaluation.chunks import ChunkPlan, summary_estimates
    >>> plan = ChunkPlan(("A",), ("dcg",), LogDiscount(2), 2, None, False, 0.5)
    >>> chunk = {
    ...     "user": np.array([1, 1, 2, 2]), "item": np.array([10, 10, 11, 11]),
    ...     "value": np.array([1.0, 0.9, 1.0, 0.8]), "source": np.array([-1, 0, -1, 0]),
    ...     "value:null": np.zeros(4, dtype=bool),
    ... }
    >>> summary_estimates(plan, plan.chunk(chunk))["A"]["dcg"].value
    1.0
    """
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
                else WeightDiagnostics.from_groups(
                    WeightGroups.concatenate(groups), plan.ess_threshold
                )
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
                no_bounds=no_bounds(metric, partial.names[metric]),
            )
            if diagnostics is not None:
                with naming(model):
                    diagnostics.warn(partial.names[metric])
            column += width
    return estimates
