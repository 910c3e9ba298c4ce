"""Unbiased DCG on feed logs in Spark: the core's :func:`~recpack_ope.logged.logged_dcg.logged_dcg`
per partition of contexts (Jeunen et al. Eq. 10 with the clipping of §6.2).

The rows of one context — its logged sessions and the target's ranking for it — meet in one
partition; a chunk of contexts becomes a :class:`~recpack_ope.logged.feed_log.FeedLog` and a
:class:`~recpack_ope.logged.policies.DeterministicRanker`, and the core returns every
session's terms. A session belongs to one context.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..inference.diagnostics import (
    ESS_RATIO_THRESHOLD,
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
)
from ..inference.moments import Moments, SummaryEstimate
from ..logged.feed_log import FeedLog
from ..logged.logged_dcg import logged_dcg as _core_logged_dcg
from ..logged.policies import DeterministicRanker
from ..propensity.discount import Discount
from ..registry import ESTIMATORS
from . import _frames, _partitions
from .held_out import _Partial

__all__ = ["logged_dcg"]

#: ``normalise`` → the registry's estimator (logged_dcg, logged_ndcg, logged_pn_dcg): its
#: terms are the columns each session ships, its exponents combine their means.
_NORMALISED = {
    e.options.get("normalise"): e for e in ESTIMATORS.values() if e.function is _core_logged_dcg
}


@dataclass(frozen=True)
class _LoggedPlan:
    discount: Discount
    clip: float | None
    normalise: str | None
    ess_threshold: float
    key: str = "context"
    nullable: tuple[str, ...] = ("session", "rank", "propensity")
    what: str = "the feed log or target"
    shown: tuple[str, ...] = ("session", "context", "item", "rank", "value", "source")

    def chunk(self, chunk: dict) -> _Partial:
        context, item, source = chunk["context"], chunk["item"], chunk["source"]
        logged = source == -1
        self._check(chunk, logged)
        width = len(_NORMALISED[self.normalise].terms)
        if not logged.any():
            # Only the target's rankings of contexts without sessions: nothing to evaluate.
            return _Partial(Moments.empty(width), 0, {})
        if self.normalise is not None and not (chunk["value"][logged] > 0).any():
            # Normalised estimates leave out sessions without reward; here that is all of them.
            return _Partial(Moments.empty(width), int(np.unique(chunk["session"][logged]).size), {})
        contexts, c = np.unique(context, return_inverse=True)
        items, i = np.unique(item, return_inverse=True)
        log = FeedLog.from_arrays(
            chunk["session"][logged],
            i[logged],
            chunk["rank"][logged],
            chunk["value"][logged],
            context=c[logged],
            propensity=chunk["propensity"][logged],
            n_items=items.size,
            n_contexts=contexts.size,
        )
        target = ~logged
        scores = sp.csr_matrix(
            (chunk["value"][target], (c[target], i[target])), shape=(contexts.size, items.size)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            result = _core_logged_dcg(
                log,
                DeterministicRanker(scores),
                discount=self.discount,
                clip=self.clip,
                normalise=self.normalise,
                ess_threshold=self.ess_threshold,
            )
        return _Partial(
            Moments.from_terms(result.terms),
            result.n_excluded_users,
            {"logged": result.name},
            {"logged": [result.diagnostics.groups]},
        )

    def _check(self, chunk: dict, logged: np.ndarray) -> None:
        names = ("context", "item", "value")
        for column in ("session", "rank", "propensity"):
            values = chunk[column][logged]
            if column + ":null" in chunk:
                missing = np.flatnonzero(chunk[column + ":null"][logged])
            elif values.dtype.kind == "f":
                missing = np.flatnonzero(np.isnan(values))
            else:
                missing = np.flatnonzero(np.array([v is None for v in values], dtype=bool))
            if missing.size:
                row = np.flatnonzero(logged)[missing[0]]
                raise _partitions.InputError(
                    f"feed_log has a null in column {column!r}, e.g. row "
                    f"{_partitions.example(chunk, row, ('session', 'context', 'item'))}"
                )
        target = np.flatnonzero(~logged)
        bad = target[~np.isfinite(chunk["value"][target])]
        if bad.size:
            raise _partitions.InputError(
                "target must hold finite scores or ranks, got "
                f"{_partitions.example(chunk, bad[0], names)}"
            )
        _, c = np.unique(chunk["context"][target], return_inverse=True)
        _, i = np.unique(chunk["item"][target], return_inverse=True)
        row = _partitions.first_repeat(c, i) if target.size else None
        if row is not None:
            raise _partitions.InputError(
                "target has the (context, item) pair "
                f"{_partitions.example(chunk, target[row], ('context', 'item'))} more than once"
            )


def logged_dcg(
    feed_log,
    target,
    *,
    discount: Discount,
    clip: float | None = None,
    normalise: str | None = None,
    n_partitions: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> SummaryEstimate:
    """Unbiased (clipped) DCG of a deterministic target ranking on a feed log in Spark.

    Parameters
    ----------
    feed_log : pyspark.sql.DataFrame
        Columns ``session``, ``context`` (what the target ranks for, e.g. the user),
        ``item``, ``rank`` (logged, 1-based), ``reward`` (``>= 0``) and ``propensity`` (the
        logging exposure ``ε0`` of the row, in (0, 1]).
    target : pyspark.sql.DataFrame
        Columns ``context``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top):
        the target's ranking per context; unlisted items are not shown. Contexts without
        logged sessions do not matter.
    discount : Discount
        View model of the target's feed with its cutoff, e.g. ``LogDiscount(cutoff=10)``.
    clip : float, optional
        m of ``min(m, 1/ε0)``; None for the unbiased estimator.
    normalise : {None, "per_user", "post"}
        DCG, per-session nDCG or post-normalised DCG, as in the core: the registry's
        ``logged_dcg``, ``logged_ndcg`` and ``logged_pn_dcg``.
    n_partitions : int, optional
        Partitions contexts are spread over; default ``spark.sql.shuffle.partitions``.
    ess_threshold : float
        ESS ratio below which the estimate warns (``ReliabilityWarning``).

    Returns
    -------
    SummaryEstimate
        The estimate over sessions, equal to the core's :func:`recpack_ope.logged_dcg`.

    Examples
    --------
    >>> from recpack_ope import LogDiscount
    >>> from recpack_ope.spark import logged_dcg
    >>> estimate = logged_dcg(log, target, discount=LogDiscount(10), clip=100.0)  # doctest: +SKIP
    >>> estimate.name  # doctest: +SKIP
    'logged DCG@10'
    """
    from pyspark.sql import functions as F

    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    if clip == "auto":
        raise ValueError(
            'clip="auto" selects the clipping from every weight at once; on Spark give a number'
        )
    if normalise not in _NORMALISED:
        raise ValueError(f"normalise must be one of {list(_NORMALISED)}, got {normalise!r}")
    _frames.require(
        feed_log,
        "feed_log",
        ("session", "context", "item", "rank", "reward", "propensity"),
        numeric=("rank", "reward", "propensity"),
    )
    ranked = _frames.ranked(
        target.withColumnRenamed("context", "user"), "target"
    ).withColumnRenamed("user", "context")
    for column in ("context", "item"):
        _frames.same_type({"feed_log": feed_log, "target": target}, column)
    session_type = feed_log.schema["session"].dataType.simpleString()
    logged = feed_log.select(
        "session",
        "context",
        "item",
        F.col("rank").cast("double").alias("rank"),
        F.col("reward").cast("double").alias("value"),
        F.col("propensity").cast("double").alias("propensity"),
        F.lit(-1).alias("source"),
    )
    ranking = ranked.select(
        F.lit(None).cast(session_type).alias("session"),
        "context",
        "item",
        F.lit(None).cast("double").alias("rank"),
        "value",
        F.lit(None).cast("double").alias("propensity"),
        F.lit(0).alias("source"),
    )
    plan = _LoggedPlan(discount, clip, normalise, ess_threshold)
    partial = _partitions.run(logged.unionByName(ranking), plan, n_partitions)
    if partial is None or partial.moments.n == 0:
        raise ValueError("feed_log has no session to evaluate")
    diagnostics = WeightDiagnostics.from_groups(
        WeightGroups.concatenate(partial.groups["logged"]), ess_threshold
    )
    estimate = SummaryEstimate.product(
        partial.names["logged"],
        partial.moments,
        range(partial.moments.dim),
        _NORMALISED[normalise].exponents,
        n_excluded_users=partial.n_excluded,
        diagnostics=diagnostics,
    )
    diagnostics.warn(estimate.name)
    return estimate
