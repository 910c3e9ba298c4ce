"""Feed-log estimators in Spark: the core's per-session estimators per partition of contexts.

:func:`logged_dcg` is :func:`~recpack_ope.logged.logged_dcg.logged_dcg` (Jeunen et al. Eq. 10
with the clipping of §6.2); :func:`ranking_ips` the standard, cascade and independent IPS of
:mod:`recpack_ope.logged.ranking_ips` (Kiyohara et al., WSDM 2022, Eq. 3–5), all with a
deterministic target and the logging probabilities of the log's columns
(:data:`~recpack_ope.io.tables.LOG_PROBABILITIES`, those the registry entry reads).

The rows of one context — its logged sessions and the target's ranking for it — meet in one
partition; a chunk of contexts becomes a :class:`~recpack_ope.logged.feed_log.FeedLog` and a
:class:`~recpack_ope.logged.policies.DeterministicRanker`, and the core returns every
session's terms. A session belongs to one context, so every session's terms, hence their
moments and weight groups, are those of the whole log.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import registry
from ..evaluation.chunks import Partial, example, plain
from ..evaluation.files import no_ranking_message
from ..inference.diagnostics import (
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
)
from ..inference.moments import Moments, SummaryEstimate
from ..io.tables import LOG_PROBABILITIES, id_message, null_message, repeat_message, value_message
from ..logged import ranking_ips as _ranking
from ..logged.feed_log import MAX_RANK, FeedLog, mixed_contexts_message, row_message
from ..logged.logged_dcg import NO_REWARDED_SESSION
from ..logged.logged_dcg import logged_dcg as _core_logged_dcg
from ..logged.policies import DeterministicRanker
from ..propensity.discount import Discount
from ..registry import ESTIMATORS, Estimator
from . import _frames, _partitions

__all__ = ["logged_dcg", "ranking_ips"]

#: ``normalise`` → the registry's estimator (logged_dcg, logged_ndcg, logged_pn_dcg): its
#: terms are the columns each session ships, its exponents combine their means.
_NORMALISED = {
    e.options.get("normalise"): e for e in ESTIMATORS.values() if e.function is _core_logged_dcg
}
#: The registry's ranking-level IPS estimators, by name.
RANKING = {
    e.name: e
    for e in ESTIMATORS.values()
    if e.function in (_ranking.standard_ips, _ranking.cascade_ips, _ranking.independent_ips)
}
#: The feed-log estimators Spark computes, by name: every one of the two families above.
FEED_LOG = {**{e.name: e for e in _NORMALISED.values()}, **RANKING}
_KEYS = ("session", "context", "item", "rank", "reward")


@dataclass(frozen=True)
class _LoggedPlan:
    entry: Estimator
    discount: Discount | None
    clip: float | None
    ess_threshold: float
    probabilities: tuple[str, ...]
    log_label: str = "feed_log"
    target_label: str = "target"
    key: str = "context"
    nullable: tuple[str, ...] = ("session", "rank", "value", *LOG_PROBABILITIES)
    what: str = "the feed log or target"
    shown: tuple[str, ...] = ("session", "context", "item")
    #: The target's column its values come from, for messages.
    target_column: str = "score"

    def chunk(self, chunk: dict) -> Partial:
        context, item, source = chunk["context"], chunk["item"], chunk["source"]
        logged = source == -1
        self._check(chunk, logged)
        width = len(self.entry.terms)
        if not logged.any():
            # Only the target's rankings of contexts without sessions: nothing to evaluate.
            return Partial(Moments.empty(width), 0, {})
        contexts, c = np.unique(context, return_inverse=True)
        items, i = np.unique(item, return_inverse=True)
        log = FeedLog.from_arrays(
            chunk["session"][logged],
            i[logged],
            chunk["rank"][logged],
            chunk["value"][logged],
            context=c[logged],
            **{name: chunk[name][logged] for name in self.probabilities},
            n_items=items.size,
            n_contexts=contexts.size,
        )
        # After the log's own checks (a NaN reward is refused before a missing click).
        if self.entry.options.get("normalise") is not None and not (log.reward > 0).any():
            # Normalised estimates leave out sessions without reward; here that is all of them.
            return Partial(Moments.empty(width), int(log.n_sessions), {})
        target = ~logged
        scores = sp.csr_matrix(
            (chunk["value"][target], (c[target], i[target])), shape=(contexts.size, items.size)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            result = self.entry.function(
                log,
                DeterministicRanker(scores),
                discount=self.discount,
                clip=self.clip,
                ess_threshold=self.ess_threshold,
                **self.entry.options,
            )
        return Partial(
            Moments.from_terms(result.terms),
            result.n_excluded_users,
            {"logged": result.name},
            {"logged": [result.diagnostics.groups]},
        )

    def _check(self, chunk: dict, logged: np.ndarray) -> None:
        for column in ("session", "rank", "value", *self.probabilities):
            values = chunk[column][logged]
            if column + ":null" in chunk:
                missing = np.flatnonzero(chunk[column + ":null"][logged])
            elif values.dtype.kind == "f":
                missing = np.flatnonzero(np.isnan(values))
            else:
                missing = np.flatnonzero(np.array([v is None for v in values], dtype=bool))
            if missing.size:
                row = np.flatnonzero(logged)[missing[0]]
                name = "reward" if column == "value" else column
                shown = example(chunk, row, ("session", "context", "item"))
                raise _partitions.InputError(null_message(self.log_label, name, f"row {shown}"))
        for column in self.probabilities:
            values = chunk[column][logged]
            outside = np.flatnonzero(~(values > 0) | ~(values <= 1))
            if outside.size:
                row = np.flatnonzero(logged)[outside[0]]
                shown = example(chunk, row, ("session", "context", "item"))
                raise _partitions.InputError(
                    f"{self.log_label}: " + row_message(column, f"row {shown}", chunk[column][row])
                )
        target = np.flatnonzero(~logged)
        # The target's rows as its table holds them: a ranking's value is minus its rank.
        column = self.target_column
        shown = {**chunk, column: chunk["value"] if column == "score" else -chunk["value"]}
        names = ("context", "item", column)

        def row_of(k: int) -> str:
            return f"row {example(shown, k, names)}"

        bad = target[chunk["value:null"][target]]
        if bad.size:
            raise _partitions.InputError(null_message(self.target_label, column, row_of(bad[0])))
        bad = target[~np.isfinite(chunk["value"][target])]
        if bad.size:
            raise _partitions.InputError(value_message(self.target_label, column, row_of(bad[0])))
        _, c = np.unique(chunk["context"][target], return_inverse=True)
        _, i = np.unique(chunk["item"][target], return_inverse=True)
        row = _partitions.first_repeat(c, i) if target.size else None
        if row is not None:
            first = np.flatnonzero((c == c[row]) & (i == i[row]))[0]
            pair = [plain(chunk[n][target[row]]) for n in ("context", "item")]
            rows = (row_of(target[first]), row_of(target[row]))
            raise _partitions.InputError(
                repeat_message(self.target_label, names[:2], pair, *rows, "(context, item)")
            )


def logged_dcg(
    feed_log,
    target,
    *,
    discount: Discount,
    clip: float | None = registry.default("clip", "feed_log"),
    normalise: str | None = None,
    n_partitions: int | None = None,
    ess_threshold: float = registry.default("ess_threshold", "feed_log"),
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
        the target's ranking per context; unlisted items are not shown. Every context of the
        log needs at least one row (a context without any is refused: more likely left out of
        the frame than shown an empty feed); contexts without logged sessions do not matter.
    discount : Discount
        View model of the target's feed with its cutoff, e.g. ``LogDiscount(cutoff=10)``.
    clip : float, optional
        m of ``min(m, 1/ε0)``; None for the unbiased estimator. Default the feed-log
        estimators' own (:func:`recpack_ope.registry.default`): unclipped.
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
    if not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
    if normalise not in _NORMALISED:
        raise ValueError(f"normalise must be one of {list(_NORMALISED)}, got {normalise!r}")
    return feed_log_estimate(
        feed_log,
        target,
        _NORMALISED[normalise].name,
        discount=discount,
        clip=clip,
        n_partitions=n_partitions,
        ess_threshold=ess_threshold,
    )


def ranking_ips(
    feed_log,
    target,
    *,
    estimator: str,
    discount: Discount | None = None,
    clip: float | None = registry.default("clip", "feed_log"),
    n_partitions: int | None = None,
    ess_threshold: float = registry.default("ess_threshold", "feed_log"),
) -> SummaryEstimate:
    """Standard, cascade or independent IPS of a deterministic target on a feed log in Spark.

    Each reward is weighted by the target's over the logging policy's probability of the whole
    ranking (``standard_ips``, Kiyohara et al. WSDM'22 Eq. 3), of the prefix down to its rank
    (``cascade_ips``, Eq. 5) or of its item at its rank (``independent_ips``, Eq. 4), the
    logging probabilities read from the log's columns; see
    :mod:`recpack_ope.logged.ranking_ips` for when each is unbiased.

    Parameters
    ----------
    feed_log : pyspark.sql.DataFrame
        Columns ``session``, ``context`` (what the target ranks for), ``item``, ``rank``
        (logged, 1-based) and ``reward`` (``>= 0``), and the logging probabilities the
        estimator reads: ``prefix_propensity`` (``π0(a_1..a_k | x)``) or ``logging_weight``
        (Plackett–Luce weights normalised over the candidates) for ``standard_ips`` and
        ``cascade_ips``, ``position_propensity`` (``π0(a_k at k | x)``) for
        ``independent_ips``. Every one of :data:`~recpack_ope.io.tables.LOG_PROBABILITIES`
        the frame has is checked, as in memory.
    target : pyspark.sql.DataFrame
        Columns ``context``, ``item`` and ``score`` (higher is better) or ``rank`` (1 = top),
        at least one row for every context of the log, as for :func:`logged_dcg`.
    estimator : {"standard_ips", "cascade_ips", "independent_ips"}
        The registry's name of the estimator.
    discount : Discount, optional
        Position weights ``α_k``; default 1 at every rank.
    clip : float, optional
        m of ``min(m, 1/π0)``; None for the unbiased estimator. Default the feed-log
        estimators' own (:func:`recpack_ope.registry.default`): unclipped.
    n_partitions : int, optional
        Partitions contexts are spread over; default ``spark.sql.shuffle.partitions``.
    ess_threshold : float
        ESS ratio below which the estimate warns (``ReliabilityWarning``).

    Returns
    -------
    SummaryEstimate
        The estimate over sessions, equal to the core's to rounding.

    Raises
    ------
    ValueError
        For an unknown estimator, a frame without the columns it reads, ``clip="auto"``, a
        target without rows for a context of the log, and what the core refuses (naming the
        session): a session missing a rank for the ranking-level estimators, prefix
        propensities that rise down a session, probabilities outside (0, 1].

    Examples
    --------
    >>> from recpack_ope.spark import ranking_ips
    >>> ranking_ips(log, target, estimator="cascade_ips").value  # doctest: +SKIP
    0.41
    """
    if estimator not in RANKING:
        raise ValueError(f"estimator must be one of {list(RANKING)}, got {estimator!r}")
    if discount is not None and not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model or None, got {type(discount).__name__}")
    return feed_log_estimate(
        feed_log,
        target,
        estimator,
        discount=discount,
        clip=clip,
        n_partitions=n_partitions,
        ess_threshold=ess_threshold,
    )


def feed_log_estimate(
    feed_log,
    target,
    name: str,
    *,
    discount: Discount | None,
    clip: float | None,
    n_partitions: int | None,
    ess_threshold: float = registry.default("ess_threshold", "feed_log"),
    target_name: str = "target",
    log_label: str = "feed_log",
    target_label: str = "target",
) -> SummaryEstimate:
    """The estimate of the feed-log estimator ``name`` of :data:`FEED_LOG` on Spark frames
    (:func:`logged_dcg` and :func:`ranking_ips` check their own arguments, then call this);
    messages name the target ``target_name`` where it lacks contexts, and the frames
    ``log_label`` and ``target_label`` (their files, :func:`recpack_ope.io.tables.table_label`)
    where they hold bad rows."""
    from pyspark.sql import functions as F

    entry = FEED_LOG[name]
    _partitions.check_partitions(n_partitions)
    if clip == "auto":
        raise ValueError(
            'clip="auto" selects the clipping from every weight at once; on Spark give a number'
        )

    def evaluate():
        _frames.require(feed_log, log_label, _KEYS, numeric=("rank", "reward"))
        probabilities = tuple(c for c in LOG_PROBABILITIES if c in feed_log.columns)
        _frames.require(feed_log, log_label, probabilities, numeric=probabilities)
        entry.check_log_columns(_frames.present(feed_log), log_label)
        # Ids compare by value across the two frames, as in memory (integers of any width).
        ids = {
            c: _frames.id_type({log_label: feed_log, target_label: target}, c)
            for c in ("context", "item")
        }
        session_type = _frames.id_type({log_label: feed_log}, "session")
        ranked = _frames.ranked(target, target_label, key="context", ids=ids).withColumnRenamed(
            "user", "context"
        )
        logged = feed_log.select(
            _frames.id_column(feed_log, "session", session_type),
            _frames.id_column(feed_log, "context", ids["context"]),
            _frames.id_column(feed_log, "item", ids["item"]),
            F.col("rank").cast("double").alias("rank"),
            F.col("reward").cast("double").alias("value"),
            *(F.col(c).cast("double").alias(c) for c in probabilities),
            F.lit(-1).alias("source"),
        )
        ranking = ranked.select(
            # Not null: partitions read sessions beyond int64 as Python integers, never null.
            F.lit(0).cast(session_type).alias("session"),
            "context",
            "item",
            F.lit(None).cast("double").alias("rank"),
            "value",
            *(F.lit(None).cast("double").alias(c) for c in probabilities),
            F.lit(0).alias("source"),
        )
        # Contexts decide the partitions: a session over two contexts would be split, not refused.
        _refuse_mixed_contexts(logged, log_label)
        _refuse_contexts_without_ranking(feed_log, target, target_name)
        plan = _LoggedPlan(
            entry,
            discount,
            clip,
            ess_threshold,
            probabilities,
            log_label,
            target_label,
            what=log_label,
            target_column="rank" if "rank" in target.columns else "score",
        )
        return _partitions.run(logged.unionByName(ranking), plan, n_partitions)

    try:
        partial = evaluate()
    except ValueError:
        # Some check refused the input: the first problem in the in-memory engine's order.
        diagnose(feed_log, target, log_label, target_label)
        raise
    if partial is not None and partial.moments.n == 0 and entry.options.get("normalise"):
        # Every partition left out all its sessions, none of which has a reward.
        raise ValueError(f"{log_label}: {NO_REWARDED_SESSION}")
    if partial is None or partial.moments.n == 0:
        raise ValueError(f"{log_label} has no session to evaluate")
    diagnostics = WeightDiagnostics.from_groups(
        WeightGroups.concatenate(partial.groups["logged"]), ess_threshold
    )
    estimate = SummaryEstimate.product(
        partial.names["logged"],
        partial.moments,
        range(partial.moments.dim),
        entry.exponents,
        n_excluded_users=partial.n_excluded,
        diagnostics=diagnostics,
    )
    diagnostics.warn(estimate.name, unit="sessions")
    return estimate


def _refuse_contexts_without_ranking(feed_log, target, name: str) -> None:
    """Refuse a target frame without rows for a context of the feed log, naming the first such
    context, its first session and how many there are, as the in-memory file engine does
    (:func:`~recpack_ope.evaluation.files.no_ranking_message`)."""
    ranked = target.select("context").distinct()
    missing = feed_log.select("context", "session").join(ranked, "context", "left_anti")
    first = _partitions.collect(missing.orderBy("context", "session").limit(1))
    if first:
        raise ValueError(
            no_ranking_message(
                name,
                first[0]["context"],
                first[0]["session"],
                missing.select("context").distinct().count(),
                feed_log.select("context").distinct().count(),
            )
        )


def _refuse_mixed_contexts(logged, log_label: str) -> None:
    """Refuse the smallest session of ``logged`` (ids as compared) with rows under two
    contexts, naming its smallest and largest, as in memory
    (:func:`~recpack_ope.logged.feed_log.mixed_contexts_message`)."""
    from pyspark.sql import functions as F

    mixed = _partitions.collect(
        logged.groupBy("session")
        .agg(
            F.countDistinct("context").alias("n"),
            F.min("context").alias("low"),
            F.max("context").alias("high"),
        )
        .where((F.col("n") > 1) | F.col("session").isNull())
        .orderBy("session")
        .limit(1)
    )
    if mixed and mixed[0]["session"] is None:
        # Refused here, on the pass this check makes anyway: partitions read sessions beyond
        # int64 as Python integers, which cannot be null. The caller names the row.
        raise ValueError(f"{log_label} has a null session or one that is not an id")
    if mixed:
        row = mixed[0]
        raise ValueError(
            f"{log_label}: "
            + mixed_contexts_message(*(_frames._python(row[c]) for c in ("session", "low", "high")))
        )


def diagnose(feed_log, target, log_label: str = "feed_log", target_label: str = "target") -> None:
    """Raise the first problem of a feed log and a target in the order the in-memory engine
    checks them (:func:`recpack_ope.io.tables.feed_log_tables`), with its message; return when
    there is none. Called only after some check refused the inputs: it runs a few small Spark
    jobs."""
    from pyspark.sql import functions as F

    probabilities = tuple(c for c in LOG_PROBABILITIES if c in feed_log.columns)
    log = _frames.Table(
        log_label, feed_log, (*_KEYS, *probabilities), ("rank", "reward", *probabilities)
    )
    ranking = _frames.Table(target_label, target, ("context", "item"), ranked=True)
    rank, reward = F.col("rank").cast("double"), F.col("reward").cast("double")
    found = {}
    for table in (log, ranking):
        columns = table.columns()
        conditions = {("null", c): F.col(c).isNull() for c in columns}
        for column in ("session", "context", "item"):
            kind = table.frame.schema[column].dataType.simpleString() if column in columns else ""
            if kind.startswith(_frames.NUMERIC):
                conditions["id", column] = ~_frames._is_id(table.frame, column)
        if table is log:
            conditions["rank"] = ~(
                _frames._finite(rank) & (rank >= 1) & (rank <= MAX_RANK) & (rank == F.round(rank))
            )
            conditions["reward"] = ~(_frames._finite(reward) & (reward >= 0))
        else:
            conditions["bad"] = ~_frames._finite(F.col(columns[-1]))
        found[id(table)] = first = _frames._first_rows(table, conditions)
        for column in columns:
            if first["null", column] is not None:
                raise ValueError(
                    null_message(table.label, column, table.show(first["null", column]))
                )
    for column, group in (
        ("session", [log]),
        ("context", [log, ranking]),
        ("item", [log, ranking]),
    ):
        for table in group:
            _frames._id_kind(table.frame, table.label, column)
            bad = found[id(table)].get(("id", column))
            if bad is not None:
                raise ValueError(id_message(table.label, column, table.show(bad)))
        _frames.id_type({t.label: t.frame for t in group}, column)
    _frames._refuse_repeats(log, ("session", "item"), "(session, item): a feed shows an item once")
    _frames._refuse_repeats(
        log, ("session", "rank"), "(session, rank): a feed shows one item per rank"
    )
    ids = {
        "session": _frames.id_type({log_label: feed_log}, "session"),
        "context": _frames.id_type({log_label: feed_log, target_label: target}, "context"),
    }
    _refuse_mixed_contexts(
        feed_log.select(*(_frames.id_column(feed_log, c, ids[c]) for c in ("session", "context"))),
        log_label,
    )

    def refuse(column: str, record) -> None:
        where = f"row {record[_frames.ROW]}" if log.indexed else log.show(record)
        raise ValueError(f"{log_label}: " + row_message(column, where, float(record[column])))

    for column in ("rank", "reward"):
        if found[id(log)][column] is not None:
            refuse(column, found[id(log)][column])
    for column in probabilities:
        # The core checks probabilities in session and rank order.
        p = F.col(column).cast("double")
        first = _partitions.collect(
            log.numbered()
            # NaN named apart: a filter on the range alone reaches parquet, whose statistics
            # leave NaN out, so that a row group holding one would be skipped.
            .where(F.isnan(p) | ~((p > 0) & (p <= 1)))
            .orderBy(_frames.id_column(feed_log, "session", ids["session"]), rank)
            .select(_frames.ROW, *log.columns())
            .limit(1)
        )
        if first:
            refuse(column, first[0])
    value = ranking.columns()[-1]
    bad = found[id(ranking)]["bad"]
    if bad is not None:
        raise ValueError(value_message(ranking.label, value, ranking.show(bad)))
    if value == "rank":
        _frames._check_ranks(
            target, target_label, "context", _frames.id_type({"": target}, "context")
        )
    _frames._refuse_repeats(ranking, ("context", "item"), "(context, item)")
