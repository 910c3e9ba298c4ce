"""Command line: ``recpack-ope demo``, ``recpack-ope rpp``, ``recpack-ope evaluate`` and
``recpack-ope reproduce …`` (also ``python -m recpack_ope``).

The module parses arguments and calls one function per command: the demo and the
reproductions are the studies of :data:`recpack_ope.studies.registry.STUDIES`, all run by
:func:`_run_study`; ``evaluate`` is :func:`recpack_ope.evaluation.files.evaluate_files` (or
:func:`recpack_ope.spark.files.evaluate_files` with ``--engine spark``) and ``rpp`` is
:func:`recpack_ope.evaluation.rpp_report.rpp_report`. Reports go to
``recpack-ope-reports/`` by default, one folder per study (and data set), so runs do not
overwrite each other. A missing optional package or data set that cannot be downloaded ends the
command with a one-line hint on standard error and exit status 2.

The parser gets the options of the subcommand on the command line only (:func:`build_parser`
with the words :func:`main` finds naming it), and the modules that commands and options read
are imported then: ``recpack-ope --help`` lists the commands with their one-line help and
imports none of them (nor numpy).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn

from .studies import quiet_frameworks
from .studies.registry import STUDIES, Study, from_clone

REPORTS = Path("recpack-ope-reports")
"""Where reports go by default: ``REPORTS/<study>`` or ``REPORTS/<study>-<dataset>``."""


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("recpack-ope")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        from . import __version__

        return __version__


class _Version(argparse.Action):
    """``--version``, which reads the installed version only when asked, as importlib.metadata
    is slow to import."""

    def __init__(self, option_strings: list[str], dest: str) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show program's version number and exit",
        )

    def __call__(self, parser, namespace, values, option_string=None) -> NoReturn:
        print(f"{parser.prog} {_version()}")
        parser.exit()


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with "(default: …)", except flags and options whose default
    (None) their help describes."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def _fail(message: str) -> NoReturn:
    """End the command with a one-line ``message`` on standard error and exit status 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def _hints(command: str, install: Mapping[str, str]) -> Iterator[None]:
    """Turn a failed download, or a missing package named in ``install`` (package → how to
    install it), into a one-line hint; any other error propagates."""
    from .io.movielens import DownloadError

    try:
        yield
    except DownloadError as error:
        _fail(f"recpack-ope {command}: {error}")
    except ImportError as error:
        package = (error.name or "").split(".")[0]
        if package not in install:
            raise
        _fail(f"recpack-ope {command} needs {package!r}: {install[package]}")


def _run_study(study: Study, args: argparse.Namespace) -> int:
    """Import the study's module (quietly: RecPack's pipelines import hyperopt, which warns
    about pkg_resources), run it, write its report and print its summary."""
    with _hints(study.command, study.install), quiet_frameworks(getattr(args, "verbose", False)):
        module = study.load()
    config = study.configure(module, args)
    with _hints(study.command, study.install):
        result = study.execute(module, config, args)
    folder = study.folder(args, config, REPORTS)
    folder = module.write_report(result, folder, plots=not args.no_plots)
    print(f"\n{study.headline(config, result)}")
    print(result.table())
    finding = "" if study.finding is None else f"\n{study.finding(result)}"
    print(f"{finding}\nreport in {folder}/")
    return 0


def _rpp(args: argparse.Namespace) -> int:
    from .evaluation.rpp_report import rpp_report

    try:
        with _hints("rpp", {"pandas": from_clone('".[trec]"')}):
            report = rpp_report(
                args.qrels,
                args.runs,
                measures=args.measure,
                graded=not args.binary,
                relevance_threshold=args.binary_relevance,
                depth=args.depth,
                test=args.test,
                n_resamples=args.resamples,
                seed=args.seed,
                alpha=args.alpha,
            )
    except (OSError, ValueError) as error:
        raise SystemExit(f"recpack-ope rpp: {error}") from None
    print(report.text())
    print(f"\nJSON in {report.write(args.output)}")
    return 0


# How to install what ``recpack-ope evaluate`` needs: pyarrow reads the files, pyspark (with
# pyarrow and pandas) runs the Spark engine.
_EVALUATE_INSTALL = {
    "local": {"pyarrow": from_clone('".[trec]"')},
    "spark": dict.fromkeys(("pyspark", "pyarrow", "pandas"), from_clone('".[spark]"')),
}


def _clip(text: str) -> float | str | None:
    """``--clip``: a number >= 1, ``none`` (unclipped), ``auto`` or ``default``, as typed
    otherwise, so that :func:`~recpack_ope.evaluation.files.plan_files` refuses every bad
    value with one message showing it as given."""
    from .registry import DEFAULT

    word = text.lower()
    if word == "none":
        return None
    if word in ("auto", DEFAULT):
        return word
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def _clip_defaults() -> str:
    """The estimators' defaults of ``clip``, by kind of data, for ``--clip``'s help."""
    from .registry import default

    held_out, feed_log = default("clip", "held_out"), default("clip", "feed_log")

    def spelled(m: float | None) -> str:
        return "do not clip" if m is None else f"clip at {m:g}"

    return f"held-out IPS estimators {spelled(held_out)}, feed-log ones {spelled(feed_log)}"


def _named_paths(given: list[str] | None, option: str) -> dict[str, str] | None:
    """``NAME=PATH`` arguments of a repeatable option → {name: path} (None if not given)."""
    named: dict[str, str] = {}
    for entry in given or []:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            _fail(f"recpack-ope evaluate: {option} takes NAME=PATH, got {entry!r}")
        if name in named:
            _fail(f"recpack-ope evaluate: {option} names {name!r} twice")
        named[name] = path
    return named or None


class _Names(argparse.Action):
    """``--metrics``: names separated by spaces, commas or both, each one of ``names`` or of
    ``later`` (checked here, name by name: argparse would check whole comma-separated words).
    Names of ``later`` pass, for :func:`evaluate_files` to refuse with the reason (an
    estimator the files cannot feed: it needs a reward model or the logging policy)."""

    def __init__(self, option_strings, dest, *, names, later=(), **kwargs) -> None:
        super().__init__(option_strings, dest, nargs="+", **kwargs)
        self.names = tuple(names)
        self.later = tuple(later)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        given = [name for value in values for name in value.split(",") if name]
        for name in given:
            if name not in self.names + self.later:
                parser.error(
                    f"argument {option_string}: invalid choice: {name!r} (choose from "
                    f"{', '.join(self.names)})"
                )
        setattr(namespace, self.dest, given)


def _without_held_out_note(n: int, population: str) -> str:
    """The note, on standard error, of ``n`` users with recommendations but no held-out rows:
    users without held-out rewards, as in the Python API."""
    fate = (
        "counted with reward 0 (--population all)"
        if population == "all"
        else "excluded, counted in n_excluded_users (--population observed)"
    )
    users = "user" if n == 1 else "users"
    return (
        f"recpack-ope evaluate: note: {n} {users} had recommendations but no held-out rows: "
        f"evaluated as users without held-out rewards, {fate}"
    )


def _without_recommendations_note(model: str, n: int) -> str:
    """The note, on standard error, of ``n`` held-out users without recommendations of
    ``model``: they count as 0, which a truncated export would make every metric do."""
    users = "user" if n == 1 else "users"
    return (
        f"recpack-ope evaluate: note: model {model!r} has no recommendations for {n} held-out "
        f"{users}: they count as 0 (a model that recommends nothing to a user earns nothing "
        "from them), in n_users_without_recommendations; check that its file is complete"
    )


def _evaluate(args: argparse.Namespace) -> int:
    if args.partitions is not None and (args.engine != "spark" or args.partitions < 1):
        _fail(
            f"recpack-ope evaluate: --partitions takes a positive number of Spark partitions "
            f"with --engine spark, got {args.partitions} with --engine {args.engine}"
        )
    if args.compare is not None and args.feed_log is not None and args.engine == "spark":
        _fail(
            "recpack-ope evaluate: --compare on a feed log needs --engine local (Spark's "
            "feed-log estimators evaluate one target per pass, so the two cannot be paired)"
        )
    several = args.target is not None and len(args.target) > 1
    if args.format == "latex" and several and args.feed_log is not None and args.engine == "spark":
        _fail(
            "recpack-ope evaluate: --format latex of several targets of a feed log needs "
            "--engine local (its leaderboard pairs the targets, which Spark's feed-log "
            "estimators evaluate one per pass)"
        )
    if args.output is not None and Path(args.output).suffix.lower() not in (".json", ".csv"):
        _fail(f"recpack-ope evaluate: --output must end in .json or .csv, got {args.output!r}")
    arguments = {
        "held_out": args.held_out,
        "recommendations": _named_paths(args.recommendations, "--recommendations"),
        "propensity": args.propensity,
        "feed_log": args.feed_log,
        "targets": _named_paths(args.target, "--target"),
        **{
            name: getattr(args, name)
            for name in ("metrics", "k", "clip", "level", "compare", "population")
        },
    }
    from .evaluation.files import PARAMETERS, ArgumentError, evaluate_files, plan_files

    # The options of ``evaluate`` that spell the arguments of evaluate_files.
    options = {p: "--" + p.replace("_", "-") for p in PARAMETERS} | {"targets": "--target"}
    options["none"] = "'none'"
    plan = None
    try:
        plan = plan_files(**arguments, auto_clip=args.engine != "spark")
        with _hints("evaluate", _EVALUATE_INSTALL[args.engine]):
            if args.engine == "spark":
                from .spark.files import evaluate_files as on_spark

                result = on_spark(**arguments, n_partitions=args.partitions)
            else:
                result = evaluate_files(**arguments)
        # Inside the error handling: showing or writing the result can refuse it too.
        report = result.report(args.format)
        try:
            written = None if args.output is None else result.write(args.output)
        except OSError as error:
            _fail(
                f"recpack-ope evaluate: --output {args.output!r} cannot be written: "
                f"{error.strerror or error}"
            )
    except ArgumentError as error:
        message = error.spelled(options)
        _fail(
            f"recpack-ope evaluate: {message if plan is None else plan.spelled(message, options)}"
        )
    except RuntimeError as error:  # no Java for Spark: a hint, like a missing package
        if args.engine != "spark":
            raise
        _fail(f"recpack-ope evaluate: {error}")
    except (OSError, ValueError) as error:
        message = str(error) if plan is None else plan.spelled(str(error), options)
        raise SystemExit(f"recpack-ope evaluate: {message}") from None
    print(report, end="" if args.format == "csv" else "\n")
    if result.n_users_without_held_out:
        note = _without_held_out_note(result.n_users_without_held_out, plan.population)
        print(note, file=sys.stderr)
    for name, n in (result.n_users_without_recommendations or {}).items():
        if n:
            print(_without_recommendations_note(name, n), file=sys.stderr)
    if written is not None:
        kind = "JSON" if written[0].suffix.lower() == ".json" else "CSV"
        # The file's name goes to standard error when standard output is the report itself.
        where = sys.stdout if args.format == "markdown" else sys.stderr
        print(f"\n{kind} in " + " and ".join(map(str, written)), file=where)
    return 0


def _study_parser(
    add_parser: Callable[..., argparse.ArgumentParser], study: Study, options: bool
) -> None:
    """The subcommand of ``study``, added by ``add_parser`` (its parent's); with ``options``,
    its options, where its report goes and how much it shows."""
    parser = add_parser(
        study.name,
        formatter_class=_HelpFormatter,
        help=study.help,
        description=study.description,
    )
    if options:
        study.add_arguments(parser, reports=REPORTS)
    parser.set_defaults(run=functools.partial(_run_study, study))


def build_parser(command: tuple[str, ...] | None = None) -> argparse.ArgumentParser:
    """The ``recpack-ope`` argument parser.

    Every subcommand is listed with its help, but only those of ``command`` get their options,
    so that listing the commands imports none of the modules the options read.

    Parameters
    ----------
    command : tuple of str, optional
        The subcommand to add the options of, as typed: ``("evaluate",)``, ``("reproduce",
        "sensitivity")``; ``("reproduce",)`` adds the reproductions without their options and
        ``()`` no subcommand's options. Default: every subcommand's options.

    Returns
    -------
    argparse.ArgumentParser
        The parser of ``recpack-ope`` and its subcommands.

    Examples
    --------
    >>> args = build_parser().parse_args(["rpp", "run.txt", "--qrels", "qrels.txt"])
    >>> args.command, args.runs, args.test
    ('rpp', ['run.txt'], 'bonferroni')
    >>> build_parser(("reproduce", "rpp-power")).parse_args(["reproduce", "rpp-power"]).experiment
    'rpp-power'
    """

    def built(*words: str) -> bool:
        """Whether the subcommand ``words`` gets its options."""
        return command is None or command[: len(words)] == words

    parser = argparse.ArgumentParser(
        prog="recpack-ope",
        formatter_class=_HelpFormatter,
        description="Evaluation that tells whether offline numbers track online reward.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _study_parser(sub.add_parser, STUDIES["demo"], built("demo"))
    rpp = sub.add_parser(
        "rpp",
        formatter_class=_HelpFormatter,
        help="recall-paired preference between trec_eval-format runs (Diaz & Ferraro, SIGIR'22)",
        description=(
            "Compare runs directly with RPP, dcgRPP and invRPP: the pairwise preference matrix, "
            "each run's win rate, the MC4 and Borda orderings over queries and pairwise "
            "significance. Qrels: 'query subtopic doc grade'; runs: 'query iter doc rank score "
            "[run]', ranked by score (ties by doc id, descending)."
        ),
    )
    rpp.set_defaults(run=_rpp)
    if built("rpp"):
        _rpp_options(rpp)
    evaluate = sub.add_parser(
        "evaluate",
        formatter_class=_HelpFormatter,
        help="evaluate recommendations (or target rankings on a feed log) from parquet or CSV "
        "files",
        description=(
            "Evaluate models from long tables (.parquet/.pq or .csv with a header line): "
            "held-out rewards with one recommendations file per model, or a feed log with one "
            "target ranking per model. Prints every model's estimates with confidence "
            "intervals (IPS-weighted ones also with their bounds when every propensity may be "
            "off by a factor of 2 either way), and optionally a paired comparison with Γ*, the "
            "factor of propensity error that could flip it (docs/sensitivity.md); --engine "
            "spark runs the same estimators on a local Spark session. Ties go to the lower "
            "item id."
        ),
    )
    evaluate.set_defaults(run=_evaluate)
    if built("evaluate"):
        _evaluate_options(evaluate)
    reproduce = sub.add_parser(
        "reproduce", formatter_class=_HelpFormatter, help="reproduce a paper's result"
    )
    if built("reproduce"):
        papers = reproduce.add_subparsers(dest="experiment", required=True)
        for study in STUDIES.values():
            if study.reproduction:
                _study_parser(papers.add_parser, study, built("reproduce", study.name))
    return parser


def _rpp_options(rp: argparse.ArgumentParser) -> None:
    """The options of ``rpp``."""
    from .evaluation.rpp_report import MEASURES, TESTS

    rp.add_argument(
        "runs", nargs="+", metavar="RUN", help="run files (one system each; .gz allowed)"
    )
    rp.add_argument("--qrels", required=True, help="relevance judgements in trec_eval format")
    rp.add_argument(
        "--measure",
        action="append",
        choices=tuple(MEASURES),
        help="rpp, dcgrpp or invrpp; repeat for several (default: all three)",
    )
    rp.add_argument(
        "--binary",
        action="store_true",
        help="binary RPP (Eq. 4: any grade > 0 relevant) instead of graded (Eq. 5)",
    )
    rp.add_argument(
        "--binary-relevance",
        type=float,
        default=None,
        metavar="GRADE",
        help="grade ≥ GRADE is relevant, below is not (the reference's -b; default: the grades "
        "as judged)",
    )
    rp.add_argument(
        "--depth",
        type=int,
        default=None,
        help="keep each run's top DEPTH documents (default: all of them)",
    )
    rp.add_argument(
        "--test",
        choices=tuple(TESTS),
        default="bonferroni",
        help="pairwise test: t-test with Bonferroni correction or randomised Tukey HSD",
    )
    rp.add_argument("--resamples", type=int, default=1000, help="Tukey HSD relabellings")
    rp.add_argument("--alpha", type=float, default=0.05, help="significance level")
    rp.add_argument("--seed", type=int, default=0, help="Tukey HSD seed")
    rp.add_argument("--output", default=str(REPORTS / "rpp.json"), help="JSON report")


def _evaluate_options(ev: argparse.ArgumentParser) -> None:
    """The options of ``evaluate``, whose names, defaults and help read the registry."""
    from .evaluation.files import FILE_METRICS, REPORT_FORMATS, offered
    from .evaluation.streaming import STREAM_ROWS
    from .registry import DEFAULT, ESTIMATORS, default

    # The feed-log estimators of whole rankings: the file engines pass them the discount of --k,
    # where their Python functions default to none.
    ranking = [m for m in offered("feed-log").split(", ") if not m.startswith("logged_")]
    ev.add_argument(
        "--held-out",
        metavar="PATH",
        help="held-out rewards: columns user, item, reward (>= 0), one row per (user, item) "
        "(default: none; or give --feed-log)",
    )
    ev.add_argument(
        "--recommendations",
        action="append",
        metavar="NAME=PATH",
        help="one model's recommendations: columns user, item and score (higher is better) or "
        "rank (1 = top; a user's n items ranked 1..n, each once); a user without held-out rows "
        "is a user without held-out rewards (see --population); repeat per model (default: "
        "none)",
    )
    ev.add_argument(
        "--propensity",
        metavar="PATH",
        help="exposure propensities: columns item, propensity in (0, 1] for every held-out "
        "item, read by the weighted estimators (ips_…, snips_dcg, stratified_ndcg) and adding "
        "ips_dcg and ips_pn_dcg to the default ones (default: none, plain estimators only)",
    )
    ev.add_argument(
        "--feed-log",
        metavar="PATH",
        help="logged feeds: columns session, context, item, rank, reward and the logging "
        "probabilities the metrics read: propensity (the logging exposure, logged_…), "
        "prefix_propensity or logging_weight (standard_ips, cascade_ips), position_propensity "
        "(independent_ips) (default: none; or give --held-out)",
    )
    ev.add_argument(
        "--target",
        action="append",
        metavar="NAME=PATH",
        help="a deterministic target ranking for the feed log: columns context, item and score "
        "or rank; repeat per target (default: none)",
    )
    ev.add_argument(
        "--metrics",
        action=_Names,
        names=FILE_METRICS,
        later=tuple(ESTIMATORS),
        metavar="METRIC",
        help="estimators, separated by spaces or commas; "
        f"of held-out data: {offered('held-out')} (default: dcg ndcg pn_dcg "
        "recall, and ips_dcg ips_pn_dcg with --propensity; --engine spark computes all but "
        f"stratified_ndcg); of a feed log: {offered('feed-log')} (default: logged_dcg). Those "
        "needing a reward model or the logging policy "
        f"({', '.join(n for n in ESTIMATORS if n not in FILE_METRICS)}) are for Python only",
    )
    ev.add_argument(
        "--k",
        "--cutoff",
        dest="k",
        type=int,
        default=10,
        help="cutoff K of the discount 1/log2(rank + 1) and of recall; the feed-log ranking "
        f"estimators ({', '.join(ranking)}) weight the reward at rank k by that discount "
        "too, 0 past K (their results are named '…@K'), while their Python functions default "
        "to weight 1 at every rank",
    )
    ev.add_argument(
        "--clip",
        type=_clip,
        default=DEFAULT,
        metavar="M",
        help="clip inverse propensities at M; 'none' for the unclipped estimators, 'auto' to "
        f"select M from the data by SLOPE, {DEFAULT!r} for each estimator's own "
        f"({_clip_defaults()})",
    )
    ev.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    ev.add_argument(
        "--population",
        default=default("population"),
        metavar="USERS",
        help="users held-out estimates average over: 'observed' (those with a positive reward) "
        "or 'all' (every user of --held-out and of the recommendations, those with only 0 "
        "rewards or no held-out rows counting 0, so that ips_dcg estimates the online reward "
        "per user; ndcg, recall and their IPS forms refuse it)",
    )
    ev.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="paired comparison A − B of every metric over the same users (default: none)",
    )
    ev.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help=(
            f"on this machine (held-out files of more than {STREAM_ROWS:,} rows in all, sorted "
            "by user, are streamed in memory bounded by a batch; others are read whole) or on "
            "a local Spark session"
        ),
    )
    ev.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help="Spark partitions users are spread over (default: spark.sql.shuffle.partitions, 16)",
    )
    ev.add_argument(
        "--format",
        choices=REPORT_FORMATS,
        default="markdown",
        help="what is printed: 'markdown' (the table with intervals, sensitivity bounds and "
        "weight diagnostics, the comparisons and, with several models, a leaderboard: the best "
        "model per metric and which models are significantly better than which), 'latex' (that "
        "leaderboard as a booktabs table for a paper), 'json' (everything) or 'csv' (the table)",
    )
    ev.add_argument(
        "--output",
        default=None,
        metavar="PATH",
        help="also write the table to PATH, which ends in .json (with the comparisons) or .csv "
        "(default: print only)",
    )


def _command(argv: list[str]) -> tuple[str, ...]:
    """The subcommand ``argv`` names, as :func:`build_parser` takes it: its first word that is
    not an option (no option before it takes a value) and, after ``reproduce``, the next."""
    words = [word for word in argv if not word.startswith("-")][:2]
    return tuple(words if words[:1] == ["reproduce"] else words[:1])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recpack-ope`` console script.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``recpack-ope``; default the command line's.

    Returns
    -------
    int
        Exit status: 0 on success (failures raise SystemExit with status 1 or 2).
    """
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_command(argv)).parse_args(argv)
    with warnings.catch_warnings():
        warnings.formatwarning = _format_warning
        return args.run(args)


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the command's own line (``recpack-ope: ReliabilityWarning: EASE: …``),
    without the library's source file and line, which say nothing to a command-line user."""
    return f"recpack-ope: {category.__name__}: {message}\n"


if __name__ == "__main__":
    sys.exit(main())
