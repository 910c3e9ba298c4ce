"""Models evaluated from files: long tables in, every model's estimates out.

:func:`evaluate_files` reads parquet or CSV tables with :mod:`recpack_ope.io.tables` —
held-out rewards with one recommendations table per model, or a feed log with one target
ranking per target — and computes the estimators of :data:`recpack_ope.registry.ESTIMATORS`
named by ``metrics``. Its :class:`FileEvaluation` holds every model's estimates: one row per
model and estimator with its confidence interval, the paired comparison of two models, a
Markdown table, and JSON or CSV files. ``recpack-ope evaluate`` prints and writes it;
:func:`recpack_ope.spark.files.evaluate_files` builds the same result on Spark.

Arguments are checked by :func:`plan_files` before any file is read; a bad one raises
:class:`ArgumentError`, whose message the command line spells with its option names.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import numbers
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import shown
from ..inference.diagnostics import naming
from ..inference.leaderboard import Leaderboard, labelled, leaderboard
from ..inference.moments import SummaryEstimate
from ..inference.result import Comparison
from ..inference.sensitivity import SHOWN_GAMMA
from ..inference.summary import (
    diagnostic_columns,
    flag_cell,
    robustness_columns,
    sensitivity_columns,
)
from ..io.tables import LOG_PROBABILITIES, ROLES, feed_log_tables, held_out_tables, table_label
from ..logged.policies import DeterministicRanker
from ..metrics.dcg import check_population
from ..propensity.discount import LogDiscount
from ..registry import DEFAULT, ESTIMATORS, default

__all__ = [
    "DEFAULT_METRICS",
    "FILE_METRICS",
    "ArgumentError",
    "FileEvaluation",
    "FilePlan",
    "REPORT_FORMATS",
    "check_log_columns",
    "evaluate_files",
    "no_ranking_message",
    "offered",
    "plan_files",
]

#: Estimators files can feed: every one of the registry but those needing a reward model or
#: the logging policy itself, which tables cannot give.
FILE_METRICS = tuple(n for n, e in ESTIMATORS.items() if set(e.needs) <= {"propensity"})
#: How the ``needs`` files cannot give are named in messages.
_PYTHON_ONLY = {"reward_model": "a reward model", "logging": "the logging policy"}

#: Estimators computed when ``metrics`` is None, by input; propensities add ``ips_dcg`` and
#: ``ips_pn_dcg`` to those of held-out data.
DEFAULT_METRICS = {"held-out": ("dcg", "ndcg", "pn_dcg", "recall"), "feed-log": ("logged_dcg",)}

#: What :meth:`FileEvaluation.report` (``recpack-ope evaluate --format``) writes.
REPORT_FORMATS = ("markdown", "latex", "json", "csv")

#: The arguments an :class:`ArgumentError` may name.
PARAMETERS = (
    "held_out",
    "recommendations",
    "propensity",
    "feed_log",
    "targets",
    "metrics",
    "k",
    "clip",
    "level",
    "compare",
    "population",
)


def offered(kind: str) -> str:
    """The estimators of :data:`FILE_METRICS` for ``"held-out"`` or ``"feed-log"`` data, as
    a comma-separated list.

    Examples
    --------
    >>> from recpack_ope.evaluation.files import offered
    >>> offered("feed-log").split(", ")
    ['logged_dcg', 'logged_ndcg', 'logged_pn_dcg', 'standard_ips', 'cascade_ips', \
'independent_ips', 'adaptive_ips']
    """
    return ", ".join(m for m in FILE_METRICS if ESTIMATORS[m].data == kind.replace("-", "_"))


class ArgumentError(ValueError):
    """A bad argument of :func:`evaluate_files` (not bad data in a file).

    Parameters
    ----------
    template : str
        The message, naming arguments of :data:`PARAMETERS` as ``{name}`` and values as
        ``{value}`` placeholders; ``{none}`` is the spelling of no value (``None`` in Python,
        ``'none'`` on the command line).
    **values
        The values the template shows.

    Examples
    --------
    >>> from recpack_ope.evaluation.files import ArgumentError
    >>> error = ArgumentError("{k} must be a positive integer, got {got}", got=0)
    >>> str(error)
    'k must be a positive integer, got 0'
    >>> error.spelled({"k": "--k"})
    '--k must be a positive integer, got 0'
    """

    def __init__(self, template: str, **values: Any) -> None:
        self.template = template
        self.values = values
        super().__init__(self.spelled())

    def spelled(self, names: Mapping[str, str] | None = None) -> str:
        """The message with the arguments (and ``"none"``) named by ``names`` (argument →
        spelling), e.g. as options of a command line; those it lacks keep their Python
        spelling."""
        names = names or {}
        spelling = {p: names.get(p, p) for p in PARAMETERS}
        return self.template.format(**spelling, none=names.get("none", "None"), **self.values)


@dataclass(frozen=True)
class FilePlan:
    """The checked arguments of one evaluation of files (see :func:`plan_files`).

    Attributes
    ----------
    kind : {"held-out", "feed-log"}
        Held-out rewards with recommendations, or a feed log with target rankings.
    data : pathlib.Path
        The held-out rewards or the feed log.
    models : dict
        Model (target) name → its recommendations (ranking) file.
    propensity : pathlib.Path or None
        Exposure propensities of held-out items.
    metrics : tuple of str
        Estimators of :data:`recpack_ope.registry.ESTIMATORS`, in the order rows list them.
    k : int
        Cutoff of the discount ``1/log2(rank + 1)`` and of recall.
    clip : float, "auto" or None
        Clipping of the inverse propensities: the estimators' default
        (:func:`recpack_ope.registry.default`) when :data:`~recpack_ope.registry.DEFAULT`
        was given.
    level : float
        Confidence level of the intervals.
    compare : tuple of two str, or None
        The models of the paired comparison ``a − b``.
    population : {"observed", "all"}
        The users held-out estimates average over
        (:data:`~recpack_ope.metrics.dcg.POPULATIONS`).
    """

    kind: str
    data: Path
    models: dict
    propensity: Path | None
    metrics: tuple[str, ...]
    k: int
    clip: float | str | None
    level: float
    compare: tuple[str, str] | None
    population: str = "observed"

    @property
    def discount(self) -> LogDiscount:
        """The discount ``1/log2(rank + 1)`` cut off at :attr:`k`."""
        return LogDiscount(self.k)

    def label(self, name: str) -> str:
        """How messages of both engines name model (target) ``name``: its name and file."""
        what = "target" if self.kind == "feed-log" else "model"
        return f"{what} {name!r} (file {str(self.models[name])!r})"

    def tables(self) -> list[tuple[str, str, Path]]:
        """``(argument, role, path)`` of every input file: the argument of
        :data:`PARAMETERS` that gives it and how messages name it
        (:data:`~recpack_ope.io.tables.ROLES`, :func:`~recpack_ope.io.tables.table_label`)."""
        data = "feed_log" if self.kind == "feed-log" else "held_out"
        models = "targets" if self.kind == "feed-log" else "recommendations"
        given = [(data, ROLES[data], self.data)]
        if self.propensity is not None:
            given.append(("propensity", ROLES["propensity"], self.propensity))
        return given + [
            (models, ROLES[models].format(name=name), path) for name, path in self.models.items()
        ]

    def spelled(self, message: str, names: Mapping[str, str]) -> str:
        """``message`` with every input table named by ``names`` (argument → spelling, e.g.
        the command line's options) instead of its argument: ``--recommendations 'A' file
        'a.csv'`` for ``recommendations['A'] file 'a.csv'``.

        Examples
        --------
        >>> from pathlib import Path
        >>> from recpack_ope.evaluation.files import FilePlan
        >>> plan = FilePlan(
        ...     "held-out", Path("h.csv"), {"A": Path("a.csv")}, None, ("dcg",), 10, None, 0.95,
        ...     None
        ... )
        >>> plan.spelled("recommendations['A'] file 'a.csv' has no rows", {"recommendations": "-r"})
        "-r 'A' file 'a.csv' has no rows"
        """
        for argument, role, path in self.tables():
            name = role.partition("[")[2].removesuffix("]")
            option = names.get(argument, argument) + (f" {name}" if name else "")
            message = message.replace(table_label(role, path), table_label(option, path))
        return message

    def result(
        self,
        estimates: Mapping,
        engine: str,
        n_users_without_held_out: int | None = None,
        n_users_without_recommendations: Mapping[str, int] | None = None,
    ) -> FileEvaluation:
        """The :class:`FileEvaluation` of ``estimates`` (model → metric → estimate), with the
        users that had recommendations but no held-out rows and, per model, the held-out
        users without its recommendations (held-out data only).

        An estimate over a single user keeps its value and has no interval
        (:meth:`FileEvaluation.rows`).

        Raises
        ------
        ArgumentError
            When ``compare`` pairs estimates over fewer than 2 users, naming the models, the
            estimator and the population, here rather than when the comparison is shown.
        """
        if self.compare is not None:
            for name in self.compare:
                for est in estimates[name].values():
                    if est.n_users < 2:
                        raise ArgumentError(
                            "{compare} {a!r} {b!r} needs at least 2 {unit} to pair, got "
                            "{n} for {what} of {model} over {over}; without {compare} the "
                            "values are shown without intervals",
                            a=self.compare[0],
                            b=self.compare[1],
                            unit="sessions" if self.kind == "feed-log" else "users",
                            n=est.n_users,
                            what=est.name,
                            model=self.label(name),
                            over=self._over,
                        )
        return FileEvaluation(
            estimates,
            self.kind,
            self.k,
            self.clip,
            self.level,
            self.compare,
            engine,
            self.population,
            n_users_without_held_out if self.kind == "held-out" else None,
            (
                None
                if self.kind == "feed-log" or n_users_without_recommendations is None
                else dict(n_users_without_recommendations)
            ),
        )

    @property
    def _over(self) -> str:
        """What the estimates average over, for messages."""
        return (
            "the log's sessions" if self.kind == "feed-log" else f"population={self.population!r}"
        )


def _named(given, option: str, what: str) -> dict[str, Path]:
    if not isinstance(given, Mapping):
        raise ArgumentError(
            "{" + option + "} must map {what} names to files, got {got}",
            what=what,
            got=type(given).__name__,
        )
    bad = [name for name in given if not isinstance(name, str)]
    if bad:
        raise ArgumentError("{" + option + "} names must be strings, got {got!r}", got=bad[0])
    return {name: Path(path) for name, path in given.items()}


def plan_files(
    held_out: str | os.PathLike | None = None,
    recommendations: Mapping[str, str | os.PathLike] | None = None,
    propensity: str | os.PathLike | None = None,
    *,
    feed_log: str | os.PathLike | None = None,
    targets: Mapping[str, str | os.PathLike] | None = None,
    metrics: Sequence[str] | None = None,
    k: int = 10,
    clip: float | str | None = DEFAULT,
    level: float = 0.95,
    compare: Sequence[str] | None = None,
    population: str = default("population"),
    auto_clip: bool = True,
) -> FilePlan:
    """Check the arguments of :func:`evaluate_files` without reading the files.

    Parameters and defaults are those of :func:`evaluate_files`; ``auto_clip=False`` is for an
    engine that cannot select the clip from every weight at once (Spark), which then refuses
    ``clip="auto"`` and does not offer it.

    Returns
    -------
    FilePlan
        The input kind, the files, the estimators (the defaults filled in) and the settings.

    Raises
    ------
    ArgumentError
        Naming the argument: both or neither of held-out data and a feed log, an estimator
        of the other kind of data, one needing a reward model or the logging policy, or a
        weighted one without
        ``propensity`` (naming the plain one), an estimator listed twice, ``k`` < 1,
        ``clip`` below 1, ``level`` outside (0, 1), ``compare`` naming an unknown model,
        ``population`` not one of :data:`~recpack_ope.metrics.dcg.POPULATIONS` (or ``"all"``
        with a feed log or with an estimator normalised per user), a file that does not exist.

    Examples
    --------
    >>> from recpack_ope.evaluation.files import plan_files
    >>> plan_files("held_out.csv", {"A": "a.csv"}, k=0)
    Traceback (most recent call last):
    ...
    recpack_ope.evaluation.files.ArgumentError: k must be a positive integer, got 0
    """
    on_log = feed_log is not None or bool(targets)
    if on_log and (held_out is not None or recommendations or propensity is not None):
        raise ArgumentError(
            "give {held_out} with {recommendations} (and {propensity}), or {feed_log} with "
            "{targets}, not both"
        )
    if on_log and (feed_log is None or not targets):
        raise ArgumentError(
            "{feed_log} needs at least one target ranking in {targets}, and {targets} a {feed_log}"
        )
    if not on_log and (held_out is None or not recommendations):
        raise ArgumentError(
            "give {held_out} with {recommendations} (one file per model), or {feed_log} with "
            "{targets} (one file per target)"
        )
    kind = "feed-log" if on_log else "held-out"
    models = (
        _named(targets, "targets", "target")
        if on_log
        else _named(recommendations, "recommendations", "model")
    )
    if metrics is None:
        weighted = ("ips_dcg", "ips_pn_dcg") if propensity is not None else ()
        metrics = DEFAULT_METRICS[kind] + weighted
    metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    for m in metrics:
        entry = ESTIMATORS.get(m)
        needs = [_PYTHON_ONLY[n] for n in entry.needs if n in _PYTHON_ONLY] if entry else []
        if needs:
            function = entry.function
            raise ArgumentError(
                "{metrics} {got!r} is for Python only ({call}): it needs {needs}, which files "
                "cannot give; from files, {metrics} of {kind} data are {offered}",
                got=m,
                call=f"{'.'.join(function.__module__.split('.')[:2])}.{function.__name__}",
                needs=" and ".join(needs),
                kind=kind,
                offered=offered(kind),
            )
        if m not in FILE_METRICS or entry.data != kind.replace("-", "_"):
            raise ArgumentError(
                "{metrics} of {kind} data are {offered}, got {got!r}",
                kind=kind,
                offered=offered(kind),
                got=m,
            )
        if kind == "held-out" and entry.missing(propensity=propensity):
            raise ArgumentError(
                "{metrics} {got} weights by inverse propensities: give {propensity}, or use "
                "{plain!r} for the unweighted estimator",
                got=m,
                plain=entry.plain,
            )
    if len(set(metrics)) != len(metrics):
        raise ArgumentError("{metrics} lists a metric twice: {got}", got=" ".join(metrics))
    try:
        check_population(population)
        for m in metrics if kind == "held-out" else ():
            ESTIMATORS[m].check_population(population)
    except ValueError as error:  # the core's message, with the argument spelled by the caller
        raise ArgumentError(
            "{population}{why}", why=str(error).removeprefix("population")
        ) from None
    if kind == "feed-log" and population != "observed":
        raise ArgumentError(
            "{population} {got!r} applies to held-out data: feed-log estimates average over "
            "the log's sessions",
            got=population,
        )
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ArgumentError("{k} must be a positive integer, got {got}", got=k)
    if isinstance(clip, str) and clip == DEFAULT:
        clip = default("clip", kind.replace("-", "_"))
    elif isinstance(clip, numbers.Real) and clip == math.inf:
        raise ArgumentError(
            "{clip} inf would clip nothing: give {none} for the unclipped estimators"
        )
    elif clip == "auto" and not auto_clip:
        raise ArgumentError(
            '{clip} "auto" selects the clipping from every weight at once, which this engine '
            "cannot: give a number, or {none} for the unclipped estimators"
        )
    elif not (
        clip is None
        or clip == "auto"
        or isinstance(clip, numbers.Real)
        and not isinstance(clip, bool)
        and 1 <= clip < math.inf
    ):
        raise ArgumentError(
            "{clip} must be a number >= 1 (weights 1/p are at least 1, so a smaller one only "
            "rescales the metric), {none} (unclipped){auto}{default!r} (each estimator's "
            "default), got {got!r}",
            auto=", 'auto' or " if auto_clip else " or ",
            default=DEFAULT,
            got=clip,
        )
    if not 0 < level < 1:
        raise ArgumentError("{level} must lie in (0, 1), got {got}", got=level)
    if compare is not None:
        compare = tuple(compare)
        if len(compare) != 2:
            raise ArgumentError("{compare} takes two model names, got {got!r}", got=compare)
        unknown = [name for name in compare if name not in models]
        if unknown:
            raise ArgumentError(
                "{compare} names {got!r}, which is none of {known}",
                got=unknown[0],
                known=list(models),
            )
        if compare[0] == compare[1]:
            raise ArgumentError(
                "{compare} takes two different models, got {got!r} twice", got=compare[0]
            )
    data = Path(feed_log if on_log else held_out)
    files = [("feed_log" if on_log else "held_out", "", data)]
    if propensity is not None:
        files.append(("propensity", "", Path(propensity)))
    files += [("targets" if on_log else "recommendations", f" {n!r}", p) for n, p in models.items()]
    for argument, name, path in files:
        if not path.is_file():
            state = "is a directory, not a file" if path.is_dir() else "does not exist"
            raise ArgumentError(
                "{" + argument + "}{name} file {path!r} {state}",
                name=name,
                path=str(path),
                state=state,
            )
    return FilePlan(
        kind,
        data,
        models,
        None if propensity is None else Path(propensity),
        metrics,
        k,
        clip,
        level,
        compare,
        population,
    )


def evaluate_files(
    held_out: str | os.PathLike | None = None,
    recommendations: Mapping[str, str | os.PathLike] | None = None,
    propensity: str | os.PathLike | None = None,
    *,
    feed_log: str | os.PathLike | None = None,
    targets: Mapping[str, str | os.PathLike] | None = None,
    metrics: Sequence[str] | None = None,
    k: int = 10,
    clip: float | str | None = DEFAULT,
    level: float = 0.95,
    compare: Sequence[str] | None = None,
    population: str = default("population"),
    stream: bool | None = None,
) -> FileEvaluation:
    """Evaluate models from parquet or CSV files with the registry's estimators, in memory
    or as a stream of whole users.

    Give ``held_out`` with ``recommendations`` (and optionally ``propensity``), or
    ``feed_log`` with ``targets``. Files are ``.parquet``/``.pq`` or ``.csv`` with a header
    line (read with pyarrow); ids are integers or text, compared exactly (integers of any
    width and signedness by value, whole real numbers of parquet columns up to 2**53 as
    integers; a CSV id column is integers only when every value is a canonical decimal
    integer, and text compared as written otherwise, so ``010``, ``1e1`` and ``10.0`` are not
    ``10``: :mod:`recpack_ope.io.tables`) and sorted, so tied scores go to the
    lower item id, as on Spark. The estimators are the core functions of
    :data:`recpack_ope.registry.ESTIMATORS` with the discount ``1/log2(rank + 1)`` cut off at
    ``k``.

    The users of a held-out evaluation are those of ``held_out`` and of every
    ``recommendations`` file, in one sorted order. A user with recommendations but no
    held-out rows is a user without held-out rewards, as a row of ``y_true`` without entries
    is in the Python API: excluded (and counted in ``n_excluded_users``) over
    ``population="observed"``, counted with 0 over ``"all"``; how many there were is
    :attr:`FileEvaluation.n_users_without_held_out`. The other way round, a held-out user
    without recommendations of a model is one the model recommends nothing to, and counts
    as 0 in its estimates (as a row of scores without entries does in the Python API): a
    truncated export lowers every value, so how many there were, per model, is
    :attr:`FileEvaluation.n_users_without_recommendations`.

    An estimate over a single user has its value and no standard error or interval (None in
    the rows); ``compare`` then is refused, and the leaderboard is left out.

    Parameters
    ----------
    held_out : path, optional
        Held-out rewards: columns ``user``, ``item``, ``reward`` (>= 0), one row per
        (user, item).
    recommendations : mapping of model name → path, optional
        One model's recommendations per file: columns ``user``, ``item`` and ``score``
        (higher is better) or ``rank`` (1 = top; a user's n items ranked 1..n, each once).
    propensity : path, optional
        Exposure propensities: columns ``item``, ``propensity`` in (0, 1] for every held-out
        item, read by the weighted estimators.
    feed_log : path, optional
        Logged feeds: columns ``session``, ``context``, ``item``, ``rank``, ``reward`` and the
        logging probabilities the estimators read (``log_columns`` of their registry entry):
        ``propensity`` (the logging exposure ε0, for ``logged_…``), ``prefix_propensity``
        (``π0(a_1..a_k | x)``, non-increasing down a session) or ``logging_weight``
        (Plackett–Luce) for ``standard_ips`` and ``cascade_ips``, ``position_propensity``
        (``π0(a_k at k | x)``) for ``independent_ips``; each is read and checked when present.
        The ranking-level ``standard_ips`` and ``cascade_ips`` need every session to show
        ranks 1..K.
    targets : mapping of target name → path, optional
        Deterministic target rankings of the feed log: columns ``context``, ``item`` and
        ``score`` or ``rank``, with rows for every context of the log (a context left out is
        refused, not evaluated as an empty feed).
    metrics : sequence of str, optional
        Estimators of :data:`FILE_METRICS` for the kind of data; default
        :data:`DEFAULT_METRICS` (with ``ips_dcg`` and ``ips_pn_dcg`` when ``propensity`` is
        given).
    k : int
        Cutoff of the discount and of recall.
    clip : float, "auto", None or "default"
        Clip inverse propensities at ``clip``; None for the unclipped estimators, ``"auto"``
        to select the clipping by SLOPE. The default, :data:`~recpack_ope.registry.DEFAULT`,
        is each estimator's own (:attr:`~recpack_ope.registry.Estimator.defaults`): held-out
        IPS estimators clip at :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`,
        feed-log ones do not (their logging probabilities are logged, not fitted).
    level : float
        Confidence level of the intervals and comparisons.
    compare : (str, str), optional
        Two models (targets) whose paired differences ``a − b`` over the same users are
        reported for every estimator.
    population : {"observed", "all"}
        The users held-out estimates average over: ``"observed"``, those with a positive
        reward; ``"all"``, every user (those of ``held_out`` with only 0 rewards and those
        with recommendations but no held-out rows included), so that ``ips_dcg`` estimates
        the online reward per user
        (:data:`~recpack_ope.metrics.dcg.POPULATIONS`). Estimators normalised per user
        (``ndcg``, ``recall``, …) take only ``"observed"``.
    stream : bool, optional
        Read held-out parquet files as a stream of whole users, in memory bounded by a batch
        (:mod:`~recpack_ope.evaluation.streaming`; every file sorted by user). The default,
        None, streams files of more than :data:`~recpack_ope.evaluation.streaming.STREAM_ROWS`
        rows in all and reads smaller ones in memory; True streams whatever the size,
        refusing files that are not sorted by user; False reads in memory. Streamed
        estimates are computed from merged sums, as on Spark: their values and intervals are
        the in-memory ones, but ``ips_ndcg``, ``ips_pn_dcg`` and ``ips_recall`` carry no
        sensitivity bounds. Large files that are not sorted by user are read in memory with
        an :class:`~recpack_ope.evaluation.streaming.InMemoryWarning` (refused, naming the
        first row out of order, when they would not fit). ``clip="auto"`` reads in memory.

    Returns
    -------
    FileEvaluation
        Every model's estimates, with rows, table, comparisons and JSON or CSV output.

    Raises
    ------
    ArgumentError
        On a bad argument (see :func:`plan_files`), before any file is read; on ``metrics``
        reading a column the feed log lacks, naming those its columns feed
        (:func:`check_log_columns`); on ``compare`` of estimates over fewer than 2 users,
        naming the model and the estimator.
    ValueError
        On bad rows, naming the file, the column and an offending row; on a file that cannot
        be read, is empty or has no rows, naming it; on an estimate over no user (none with
        a positive reward over ``population="observed"``), naming the model; on a feed log
        without
        the columns an estimator reads, or that the core refuses (a session missing a rank
        for a ranking-level estimator, prefix propensities that rise down a session,
        probabilities outside (0, 1]), naming the file and the session; on a target without
        rows for a context of the log, naming the target, the context and one of its sessions.
    ImportError
        Without pyarrow.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from recpack_ope.evaluation import evaluate_files
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "held_out.csv").write_text("user,item,reward\\n1,10,1\\n2,11,1\\n")
    >>> _ = (folder / "a.csv").write_text("user,item,rank\\n1,10,1\\n2,12,1\\n2,11,2\\n")
    >>> _ = (folder / "b.csv").write_text("user,item,score\\n1,11,0.9\\n1,10,0.4\\n")
    >>> result = evaluate_files(
    ...     folder / "held_out.csv",
    ...     {"A": folder / "a.csv", "B": folder / "b.csv"},
    ...     metrics=["dcg", "recall"],
    ...     k=2,
    ...     compare=("A", "B"),
    ... )
    >>> round(result.estimates["A"]["dcg"].value, 4), result.estimates["B"]["recall"].value
    (0.8155, 0.5)
    >>> round(result.comparisons["dcg"].difference, 4)  # A − B over the same users
    0.5
    >>> print(result.table())
    | model | metric | value | 95% CI | n_users | excluded |
    |---|---|---:|---|---:|---:|
    | A | DCG@2 | 0.8155 | [-1.529, 3.16] | 2 | 0 |
    | A | Recall@2 | 1 | [1, 1] | 2 | 0 |
    | B | DCG@2 | 0.3155 | [-3.693, 4.324] | 2 | 0 |
    | B | Recall@2 | 0.5 | [-5.853, 6.853] | 2 | 0 |
    >>> print(result.comparison_table())
    | comparison | difference | 95% CI | p |
    |---|---:|---|---:|
    | A − B (DCG@2) | 0.5 | [-1.164, 2.164] | 0.163 |
    | A − B (Recall@2) | 0.5 | [-5.853, 6.853] | 0.5 |
    >>> [p.name for p in result.write(folder / "report.csv")]
    ['report.csv', 'report-comparisons.csv']
    """
    plan = plan_files(
        held_out,
        recommendations,
        propensity,
        feed_log=feed_log,
        targets=targets,
        metrics=metrics,
        k=k,
        clip=clip,
        level=level,
        compare=compare,
        population=population,
    )
    if plan.kind == "feed-log":
        tables = feed_log_tables(plan.data, plan.models)
        label = table_label(ROLES["feed_log"], plan.data)
        check_log_columns(plan.metrics, _log_columns(tables.log), label)
        for name, scores in tables.scores.items():
            _refuse_contexts_without_ranking(tables, scores, plan.label(name))
        try:
            estimates = {}
            for name, scores in tables.scores.items():
                with naming(name):
                    estimates[name] = {
                        m: ESTIMATORS[m].function(
                            tables.log,
                            DeterministicRanker(scores),
                            discount=plan.discount,
                            clip=plan.clip,
                            **ESTIMATORS[m].options,
                        )
                        for m in plan.metrics
                    }
        except ValueError as error:  # the core refused the log: name the file
            raise ValueError(f"{label}: {error}") from None
    else:
        if stream is not False:
            streamed = _streamed(plan, stream)
            if streamed is not None:
                return streamed
        tables = held_out_tables(plan.data, plan.models, plan.propensity)
        return plan.result(
            _in_memory(plan, tables),
            "local",
            tables.n_users_without_held_out,
            tables.n_users_without_recommendations,
        )
    return plan.result(estimates, "local")


def _in_memory(plan: FilePlan, tables) -> dict:
    """Every model's estimates on the matrices of :func:`held_out_tables`; the core's refusal
    names the held-out file and the model."""
    options = {
        "discount": plan.discount,
        "propensity": tables.propensity,
        "clip": plan.clip,
        "population": plan.population,
    }
    estimates = {}
    for name, scores in tables.scores.items():
        try:
            with naming(name):
                estimates[name] = {
                    m: ESTIMATORS[m](tables.y_true, scores, **options) for m in plan.metrics
                }
        except ValueError as error:  # the core refused the data: name the files
            held = table_label(ROLES["held_out"], plan.data)
            raise ValueError(f"{held} with {plan.label(name)}: {error}") from None
    return estimates


def _streamed(plan: FilePlan, stream: bool | None) -> FileEvaluation | None:
    """The evaluation of held-out files read as a stream of whole users
    (:mod:`~recpack_ope.evaluation.streaming`), or None when they are to be read in memory:
    ``stream`` None and at most :data:`~recpack_ope.evaluation.streaming.STREAM_ROWS` rows,
    ``clip="auto"``, or files the stream does not read (a note says why for large files)."""
    from .chunks import ChunkPlan, summary_estimates
    from .streaming import (
        STREAM_ROWS,
        InMemoryWarning,
        NotSorted,
        NotStreamable,
        check_memory,
        stream_held_out,
        total_rows,
    )

    rows = total_rows([plan.data, *plan.models.values()])
    if plan.clip == "auto" or (stream is None and (rows is None or rows <= STREAM_ROWS)):
        return None
    chunk_plan = ChunkPlan(
        models=tuple(plan.models),
        metrics=plan.metrics,
        discount=plan.discount,
        k=plan.k,
        clip=plan.clip,
        weighted=any("propensity" in ESTIMATORS[m].needs for m in plan.metrics),
        ess_threshold=default("ess_threshold"),
        population=plan.population,
        checked=plan.propensity is not None,
    )

    def diagnose(held, recommendations) -> None:
        models = dict(zip(plan.models, recommendations, strict=True))
        tables = held_out_tables(held, models, plan.propensity)
        _in_memory(plan, tables)

    try:
        partial = stream_held_out(
            plan, chunk_plan, table_label(ROLES["held_out"], plan.data), diagnose
        )
    except NotStreamable as why:
        if stream:
            hint = (
                "sort the files by user to stream them, or read them in memory (stream=False)"
                if isinstance(why, NotSorted)
                else "read them in memory (stream=False)"
            )
            raise ValueError(f"{why}: {hint}") from None
        check_memory(rows, str(why))
        warnings.warn(
            f"{why}: reading the files in memory (sort them by user to stream them in "
            "memory bounded by a batch)",
            InMemoryWarning,
            stacklevel=3,
        )
        return None
    return plan.result(
        summary_estimates(chunk_plan, partial),
        "local",
        partial.n_without_held_out,
        {model: partial.n_without_recommendations.get(model, 0) for model in plan.models},
    )


def no_ranking_message(
    target: str, context: Any, session: Any, n_missing: int, n_contexts: int
) -> str:
    """The refusal of a target ranking without rows for ``n_missing`` of the ``n_contexts``
    contexts of a feed log, the first of them ``context`` (logged in ``session``), on both
    engines.

    A file (or frame) lists the target's ranking of every context; a context it leaves out
    would be one where the target shows nothing, and its sessions would add zero terms to
    every feed-log estimate: far more often an incomplete export than a policy that shows an
    empty feed. (A score matrix in Python can say so explicitly with a row without finite
    score.)

    Examples
    --------
    >>> from recpack_ope.evaluation.files import no_ranking_message
    >>> no_ranking_message("target 'new'", 5, "s17", 5, 10)[:78]
    "target 'new' ranks no item for 5 of the feed log's 10 contexts, e.g. context 5"
    """
    return (
        f"{target} ranks no item for {n_missing} of the feed log's {n_contexts} contexts, "
        f"e.g. context {context!r} (session {session!r}): the target would show nothing "
        "there and every estimate would fall; give the target a ranking for every context "
        "of the log"
    )


def _refuse_contexts_without_ranking(tables, scores, target: str) -> None:
    """Refuse a target whose score matrix (rows: the log's contexts) has a row without any
    entry, naming its first context and that context's first session
    (:func:`no_ranking_message`)."""
    log = tables.log
    empty = sp.csr_matrix(scores).getnnz(axis=1) == 0
    if not empty.any():
        return
    context = int(np.flatnonzero(empty)[0])
    codes = log.session[log.context == context]
    labels = codes if log.session_labels is None else log.session_labels[codes]
    raise ValueError(
        no_ranking_message(
            target,
            _plain(tables.contexts[context]),
            _plain(np.min(labels)),
            int(empty.sum()),
            tables.contexts.size,
        )
    )


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value Spark returns, for messages alike on both engines."""
    return value.item() if isinstance(value, np.generic) else value


def _log_columns(log) -> list[str]:
    """The columns a feed log was built from: its keys and the logging probabilities it has."""
    keys = ["session", "context", "item", "rank", "reward"]
    return keys + [c for c in LOG_PROBABILITIES if getattr(log, c) is not None]


def check_log_columns(
    metrics: Sequence[str],
    present: Sequence[str],
    table: str,
    available: Sequence[str] | None = None,
) -> None:
    """Refuse a feed log (named ``table``, with the columns ``present``) that lacks the logging
    probabilities one of the feed-log ``metrics`` reads
    (:meth:`~recpack_ope.registry.Estimator.check_log_columns`), naming those of ``available``
    (default: every feed-log estimator of :data:`FILE_METRICS`) its columns do feed; the
    Spark engine checks its frames the same way, with the estimators it computes.

    Raises
    ------
    ArgumentError
        Naming the missing column, the estimator, the logging probabilities the table has and
        the estimators to give in ``metrics`` instead.

    Examples
    --------
    >>> from recpack_ope.evaluation.files import check_log_columns
    >>> check_log_columns(["logged_dcg"], ["rank", "prefix_propensity"], "log")
    Traceback (most recent call last):
    ...
    recpack_ope.evaluation.files.ArgumentError: log has no column 'propensity', which \
logged_dcg reads; its columns are ['rank', 'prefix_propensity']; it has prefix_propensity: try \
metrics standard_ips,cascade_ips
    """
    available = offered("feed-log").split(", ") if available is None else available
    for m in metrics:
        try:
            ESTIMATORS[m].check_log_columns(present, table)
        except ValueError as error:
            fed = [n for n in available if _feeds(n, present)]
            has = [c for c in LOG_PROBABILITIES if c in present]
            hint = (
                f"it has {', '.join(has)}: try {{metrics}} {','.join(fed)}"
                if fed
                else f"it has none of the logging probabilities {', '.join(LOG_PROBABILITIES)} "
                "that the feed-log estimators read"
            )
            raise ArgumentError("{problem}; " + hint, problem=str(error)) from None


def _feeds(metric: str, present: Sequence[str]) -> bool:
    """Whether columns ``present`` hold what the feed-log estimator ``metric`` reads."""
    return all(set(group) & set(present) for group in ESTIMATORS[metric].log_columns)


def estimate_rows(
    estimates: Mapping[str, Mapping[str, Any]], level: float, unit: str = "users"
) -> list[dict]:
    """One row per model and estimator of ``estimates`` (model → estimator → estimate):
    ``model``, ``metric``, ``name``, ``value``, ``ci_low``, ``ci_high`` (the interval at
    ``level``), ``standard_error`` (both None for an estimate over a single user, which has a
    value but no spread), ``n_users``, ``n_excluded_users`` (``n_sessions``,
    ``n_excluded_sessions`` with ``unit="sessions"``: feed-log estimates average over
    sessions), and for an estimate with
    a weighting ``sens_low`` and ``sens_high``, its bounds when every propensity may be off by
    a factor up to :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` either way
    (:func:`~recpack_ope.inference.summary.sensitivity_columns`), and for an estimate with
    weight diagnostics their columns (``ess``, ``ess_ratio``, …, ``reliable``, ``flags``:
    :func:`~recpack_ope.inference.summary.diagnostic_columns`); the rows of
    :meth:`FileEvaluation.rows` and :meth:`recpack_ope.spark.HeldOutEvaluation.table`."""
    rows = []
    for model, by_metric in estimates.items():
        for metric, est in by_metric.items():
            # One user gives a value but no spread: its standard error and interval are None.
            lone = est.n_users < 2
            lo, hi = (None, None) if lone else est.confidence_interval(level)
            rows.append(
                {
                    "model": model,
                    "metric": metric,
                    "name": est.name,
                    "value": est.value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "standard_error": None if lone else est.standard_error,
                    f"n_{unit}": est.n_users,
                    f"n_excluded_{unit}": est.n_excluded_users,
                    **sensitivity_columns(est),
                    **diagnostic_columns(est),
                }
            )
    return rows


def _interval(low: float | None, high: float | None) -> str:
    """``[low, high]`` with 4 significant digits; – without an interval (a single user)."""
    return "–" if low is None else f"[{low:.4g}, {high:.4g}]"


def _markdown(header: list[str], align: list[str], lines: list[list[str]]) -> str:
    """A Markdown table: ``align`` holds ``---`` or ``---:`` per column."""
    text = ["| " + " | ".join(row) + " |" for row in (header, *lines)]
    return "\n".join([text[0], "|" + "|".join(align) + "|", *text[1:]])


@dataclass(frozen=True, eq=False)
class FileEvaluation:
    """Every model's estimates from files (:func:`evaluate_files`).

    Attributes
    ----------
    estimates : mapping
        Model (target) name → estimator name → its estimate (an
        :class:`~recpack_ope.inference.result.EstimateResult`, or a summary estimate of the
        Spark engine), pairable with ``compare``.
    input : {"held-out", "feed-log"}
        What was evaluated: held-out rewards (estimates over users) or a feed log (over
        sessions).
    k : int
        Cutoff of the discount and of recall.
    clip : float, "auto" or None
        Clipping of the inverse propensities (the estimators' default resolved).
    level : float
        Confidence level of the intervals and comparisons.
    compare : (str, str) or None
        The two models of :attr:`comparisons`.
    engine : {"local", "spark"}
        What computed the estimates.
    population : {"observed", "all"}
        The users held-out estimates average over.
    n_users_without_held_out : int or None
        Users with recommendations but no held-out rows, evaluated as users without held-out
        rewards (excluded over ``population="observed"``, counted 0 over ``"all"``); None for
        a feed log.
    n_users_without_recommendations : dict or None
        Model name → held-out users without any of its recommendations, who count as users
        it recommends nothing to (0 in every estimate they are averaged in); None for a
        feed log.
    """

    estimates: Mapping[str, Mapping[str, Any]]
    input: str
    k: int
    clip: float | str | None
    level: float = 0.95
    compare: tuple[str, str] | None = None
    engine: str = "local"
    population: str = "observed"
    n_users_without_held_out: int | None = None
    n_users_without_recommendations: Mapping[str, int] | None = None

    @property
    def unit(self) -> str:
        """What the estimates average over: ``"users"`` (held-out data) or ``"sessions"``."""
        return "users" if self.input == "held-out" else "sessions"

    def rows(self) -> list[dict]:
        """One row per model and estimator: ``model``, ``metric``, ``name``, ``value``,
        ``ci_low``, ``ci_high``, ``standard_error``, ``n_users``, ``n_excluded_users`` (on a
        feed log ``n_sessions``, ``n_excluded_sessions``), on held-out data
        ``n_users_without_recommendations`` (the model's, :attr:`n_users_without_recommendations`),
        and ``sens_low``, ``sens_high`` for the IPS-weighted estimates that carry their
        weighting (on Spark ``ips_dcg`` and ``snips_dcg``), and the weight diagnostics
        ``ess``, …, ``reliable``, ``flags`` of every weighted estimate
        (:func:`estimate_rows`)."""
        rows = estimate_rows(self.estimates, self.level, self.unit)
        missing = self.n_users_without_recommendations
        if missing is None:
            return rows
        placed = []
        for row in rows:
            cells = list(row.items())
            at = list(row).index("n_excluded_users") + 1
            count = [("n_users_without_recommendations", missing[row["model"]])]
            placed.append(dict(cells[:at] + count + cells[at:]))
        return placed

    @functools.cached_property
    def comparisons(self) -> dict[str, Comparison]:
        """Estimator name → the paired comparison ``a − b`` of :attr:`compare` over the same
        users; empty without ``compare``."""
        if self.compare is None:
            return {}
        a, b = self.compare
        return {
            m: est.compare(self.estimates[b][m], self.level, names=(a, b))
            for m, est in self.estimates[a].items()
        }

    def comparison_rows(self) -> list[dict]:
        """One row per comparison: ``a``, ``b``, ``metric``, ``name``, ``difference``,
        ``standard_error``, ``ci_low``, ``ci_high``, ``p_value``, ``n_users`` (on a feed log
        ``n_sessions``); for IPS-weighted
        estimates also ``robust_gamma`` and ``robust_gamma_95`` (the suffix is
        ``100 · level``): Γ*, the largest factor by which every propensity may be off, either
        way, before the difference can change sign or stop being significant at ``level``
        (:func:`~recpack_ope.inference.summary.robustness_columns`; ``inf`` when it never
        does, 1.0 when it fails at the given propensities). Estimates merged from sums (on
        Spark, or streamed from files) give the sign's Γ* alone: the significance needs every
        user's terms at the extreme propensities."""
        if self.compare is None:
            return []
        a, b = self.compare
        merged = any(isinstance(e, SummaryEstimate) for e in self.estimates[a].values())
        level = None if merged else self.level
        return [
            {
                "a": a,
                "b": b,
                "metric": m,
                "name": c.name,
                "difference": c.difference,
                "standard_error": c.standard_error,
                "ci_low": c.confidence_interval[0],
                "ci_high": c.confidence_interval[1],
                "p_value": c.p_value,
                f"n_{self.unit}": c.n_users,
                **robustness_columns(self.estimates[a][m], self.estimates[b][m], level),
            }
            for m, c in self.comparisons.items()
        ]

    def table(self) -> str:
        """The rows as a Markdown table: value, interval, the bounds at Γ =
        :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` (when an estimate has them; –
        for the others), users (sessions), excluded and, when an estimate is weighted, the
        Kish ESS of its weights and its flags ("ok", or "⚠" and the reliability criteria that
        fired: :func:`~recpack_ope.inference.summary.flag_cell`); 4 significant digits."""
        rows = self.rows()
        bounds = any("sens_low" in r for r in rows)
        weighted = any("flags" in r for r in rows)
        what = self.unit
        gamma = [f"Γ={SHOWN_GAMMA:g} bounds"] if bounds else []
        header = ["model", "metric", "value", f"{self.level * 100:g}% CI", *gamma]
        header += [f"n_{what}", "excluded", *(["ESS", "flags"] if weighted else [])]
        align = ["---", "---", "---:", "---"] + ["---"] * len(gamma) + ["---:", "---:"]
        align += ["---:", "---"] if weighted else []
        lines = []
        for r in rows:
            line = [
                r["model"],
                r["name"],
                f"{r['value']:.4g}",
                _interval(r["ci_low"], r["ci_high"]),
            ]
            if bounds:
                line.append(_interval(r["sens_low"], r["sens_high"]) if "sens_low" in r else "–")
            line += [str(r[f"n_{what}"]), str(r[f"n_excluded_{what}"])]
            if weighted:
                line += [f"{r['ess']:.4g}" if "ess" in r else "–", flag_cell(r)]
            lines.append(line)
        return _markdown(header, align, lines)

    def comparison_table(self) -> str:
        """The comparisons as a Markdown table: difference, interval, p-value and, when the
        estimates are IPS-weighted, Γ* of the sign and of the significance at ``level``
        (:meth:`comparison_rows`; – where an estimator has none); 4 significant digits. Empty
        without comparisons."""
        rows = self.comparison_rows()
        if not rows:
            return ""
        percent = f"{self.level * 100:g}"
        stars = [
            c for c in ("robust_gamma", f"robust_gamma_{percent}") if any(c in r for r in rows)
        ]
        labels = {"robust_gamma": "Γ* (sign)", f"robust_gamma_{percent}": f"Γ* ({percent}%)"}
        header = ["comparison", "difference", f"{percent}% CI", "p", *map(labels.get, stars)]
        align = ["---", "---:", "---", "---:"] + ["---:"] * len(stars)
        lines = [
            [
                r["name"],
                f"{r['difference']:.4g}",
                _interval(r["ci_low"], r["ci_high"]),
                f"{r['p_value']:.4g}",
                *(f"{r[c]:.4g}" if c in r else "–" for c in stars),
            ]
            for r in rows
        ]
        return _markdown(header, align, lines)

    @property
    def pairable(self) -> bool:
        """Whether the models' estimates pair (:attr:`comparisons`, :attr:`leaderboard`): not
        for several targets of a feed log on Spark, which evaluates one target per pass."""
        return not (self.engine == "spark" and self.input == "feed-log" and len(self.estimates) > 1)

    @functools.cached_property
    def leaderboard(self) -> Leaderboard:
        """The models side by side, one column per estimator (named as the rows' ``name``):
        values, intervals, the best model, the models tied with it and the corrected pairwise
        tests (:func:`~recpack_ope.inference.leaderboard.leaderboard` at :attr:`level`).

        Raises
        ------
        ValueError
            When the estimates do not pair (:attr:`pairable`), or one is over a single user
            (:attr:`single`): its intervals and tests need 2.
        """
        if not self.pairable:
            raise ValueError(
                "a leaderboard of several targets of a feed log needs the local engine: Spark "
                "evaluates one target per pass, so the targets' estimates cannot be paired"
            )
        if self.single is not None:
            raise ValueError(
                f"a leaderboard needs at least 2 {self.unit} per estimate for its intervals "
                f"and tests; {self.single}"
            )
        return leaderboard(labelled(self.estimates), level=self.level)

    @property
    def single(self) -> str | None:
        """Which estimate is over fewer than 2 users (sessions), e.g. ``"DCG@10 of model 'A'
        is over 1 user"``: it has a value but no interval, comparison or leaderboard; None
        when every estimate has 2 or more."""
        for model, by_metric in self.estimates.items():
            for est in by_metric.values():
                if est.n_users < 2:
                    unit = self.unit if est.n_users != 1 else self.unit[:-1]
                    what = "target" if self.input == "feed-log" else "model"
                    return f"{est.name} of {what} {model!r} is over {est.n_users} {unit}"
        return None

    def to_dict(self) -> dict:
        """The settings, ``n_users_without_held_out``, ``n_users_without_recommendations``,
        :meth:`rows`, :meth:`comparison_rows` and the :attr:`leaderboard`'s JSON document
        (None when the estimates do not pair or one is over a single user, :attr:`single`),
        as JSON writes them."""
        return {
            "engine": self.engine,
            "input": self.input,
            "k": self.k,
            "clip": self.clip,
            "level": self.level,
            "population": self.population,
            "n_users_without_held_out": self.n_users_without_held_out,
            "n_users_without_recommendations": self.n_users_without_recommendations,
            "rows": self.rows(),
            "comparisons": self.comparison_rows(),
            "leaderboard": (
                json.loads(self.leaderboard.to_json())
                if self.pairable and self.single is None
                else None
            ),
        }

    def report(self, format: str = "markdown") -> str:
        """What ``recpack-ope evaluate --format`` prints.

        Parameters
        ----------
        format : {"markdown", "latex", "json", "csv"}
            ``"markdown"``: :meth:`table`, the :meth:`comparison_table` when there are
            comparisons and, with several models that pair (:attr:`pairable`), the
            :attr:`leaderboard`; ``"latex"``: the
            leaderboard as a booktabs table for a paper; ``"json"``: :meth:`to_dict`;
            ``"csv"``: :meth:`rows`.

        Returns
        -------
        str
        """
        if not isinstance(format, str) or format not in REPORT_FORMATS:
            raise ValueError(f"format must be one of {REPORT_FORMATS}, got {shown(format)}")
        if format == "latex":
            return self.leaderboard.to_latex()
        if format == "json":
            return json.dumps(self.to_dict(), indent=1)
        if format == "csv":
            return _csv(self.rows())
        parts = [self.table()]
        if self.comparisons:
            parts.append(self.comparison_table())
        if len(self.estimates) > 1 and self.pairable:
            parts.append(
                self.leaderboard.to_markdown()
                if self.single is None
                else f"No leaderboard: its intervals and tests need at least 2 {self.unit} per "
                f"estimate, and {self.single}."
            )
        return "\n\n".join(parts)

    def write(self, path: str | os.PathLike) -> tuple[Path, ...]:
        """Write ``path``: JSON (``.json``, :meth:`to_dict`; Γ* that never flips is written
        ``Infinity``, as Python's ``json`` reads it) or CSV (``.csv``, the rows; the
        comparisons, if any, in ``<stem>-comparisons.csv`` beside it; a column a row lacks is
        an empty cell).

        Returns
        -------
        tuple of pathlib.Path
            The files written.
        """
        path = Path(path)
        if path.suffix.lower() not in (".json", ".csv"):
            raise ValueError(f"path must end in .json or .csv, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".json":
            with open(path, "w") as handle:
                json.dump(self.to_dict(), handle, indent=1)
            return (path,)
        written = [(path, self.rows())]
        if self.comparisons:
            written.append((path.with_name(f"{path.stem}-comparisons.csv"), self.comparison_rows()))
        for target, table in written:
            with open(target, "w", newline="") as handle:
                handle.write(_csv(table))
        return tuple(target for target, _ in written)


def _csv(rows: list[dict]) -> str:
    """``rows`` as CSV: every column of any row, in order; an empty cell where a row has none
    (the bounds and Γ* of unweighted estimates)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(dict.fromkeys(c for row in rows for c in row)))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
