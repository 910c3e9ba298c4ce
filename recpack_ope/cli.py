"""Command line: ``recpack-ope demo``, ``recpack-ope rpp``, ``recpack-ope evaluate`` and
``recpack-ope reproduce …`` (also ``python -m recpack_ope``).

The demo and the reproductions are the studies of :data:`recpack_ope.studies.registry.STUDIES`,
all run by :func:`_run_study`; ``evaluate`` computes the estimators of
:data:`recpack_ope.registry.ESTIMATORS` named by ``--metrics``. Reports go to
``recpack-ope-reports/`` by default, one folder per study (and data set), so runs do not
overwrite each other. A missing optional package or data set that cannot be downloaded ends the
command with a one-line hint on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import importlib.metadata
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NoReturn

from .io.movielens import DownloadError
from .metrics.rpp import WEIGHTINGS
from .registry import ESTIMATORS
from .studies import quiet_frameworks
from .studies.registry import STUDIES, Study, from_clone

REPORTS = Path("recpack-ope-reports")
"""Where reports go by default: ``REPORTS/<study>`` or ``REPORTS/<study>-<dataset>``."""


def _version() -> str:
    try:
        return importlib.metadata.version("recpack-ope")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        from . import __version__

        return __version__


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
    if args.output is not None:
        folder = Path(args.output)
    else:  # studies of a data set: one folder per data set
        folder = REPORTS / f"{study.name}-{config.dataset}"
    folder = module.write_report(result, folder, plots=not args.no_plots)
    print(f"\n{study.headline(config, result)}")
    print(result.table())
    finding = "" if study.finding is None else f"\n{study.finding(result)}"
    print(f"{finding}\nreport in {folder}/")
    return 0


# The reference's measure names (rpp, dcgrpp, invrpp) → p(i) of recpack_ope.metrics.rpp.
_RPP_MEASURES = {name.lower(): weighting for weighting, name in WEIGHTINGS.items()}


def _by_name(systems: list[str], rows) -> dict[str, dict[str, float]]:
    """A matrix of systems as {row name: {column name: value}}."""
    return {
        a: dict(zip(systems, map(float, row), strict=True))
        for a, row in zip(systems, rows, strict=True)
    }


def _rpp(args: argparse.Namespace) -> int:
    from .inference.significance import paired_t_tests, randomised_tukey_hsd
    from .io.trec import read_trec
    from .metrics.rpp import RecallLevels, preference_matrix

    if len(args.runs) < 2:
        raise SystemExit("recpack-ope rpp needs at least two run files to compare")
    try:
        with _hints("rpp", {"pandas": from_clone('".[trec]"')}):
            collection = read_trec(
                args.qrels, args.runs, relevance_threshold=args.binary_relevance, depth=args.depth
            )
    except (OSError, ValueError) as error:
        raise SystemExit(f"recpack-ope rpp: {error}") from None
    report = {
        "qrels": args.qrels,
        "runs": list(collection.runs),
        "queries": int(collection.qrels.shape[0]),
        "graded": not args.binary,
        "depth": args.depth,
        "test": args.test,
        "measures": {},
    }
    test_name = "t-test, Bonferroni" if args.test == "bonferroni" else "randomised Tukey HSD"
    for measure in args.measure or list(_RPP_MEASURES):
        weighting = _RPP_MEASURES[measure]
        levels = RecallLevels.from_y_true(
            collection.qrels, weighting=weighting, graded=not args.binary
        )
        matrix = preference_matrix(levels, collection.runs)
        wins = matrix.win_rates()
        if args.test == "bonferroni":
            tests = paired_t_tests(matrix)
        else:
            tests = randomised_tukey_hsd(matrix, args.resamples, args.seed)
        systems = list(matrix.names)
        report["measures"][matrix.name] = {
            "preferences": _by_name(systems, matrix.mean),
            "p_values": _by_name(systems, tests.p_value),
            "win_rate": dict(zip(systems, map(float, wins.means), strict=True)),
            "ordering": {method: wins.ordering(method) for method in ("mc4", "borda", "mean")},
            "separated_pairs": tests.power(args.alpha),
        }
        relevance = "binary" if args.binary else "graded"
        print(
            f"\n## {matrix.name} over {matrix.per_user.shape[0]} queries ({relevance} "
            f"relevance), MC4 order\n\n{wins.table('mc4')}"
        )
        if len(systems) <= 12:
            print(
                f"\n{matrix.name} preference matrix ({weighting} weights over recall levels): "
                f"mean {matrix.name}(row, column) over the queries, > 0 where the row is "
                f"preferred\n\n{matrix.table()}"
            )
        print(
            f"\n{tests.power(args.alpha):.1%} of {tests.n_pairs} pairs differ at "
            f"p < {args.alpha} ({test_name})"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as handle:
        json.dump(report, handle, indent=1)
    print(f"\nJSON in {args.output}")
    return 0


# How to install what ``recpack-ope evaluate`` needs: pyarrow reads the files, pyspark (with
# pyarrow and pandas) runs the Spark engine.
_EVALUATE_INSTALL = {
    "local": {"pyarrow": from_clone('".[trec]"')},
    "spark": dict.fromkeys(("pyspark", "pyarrow", "pandas"), from_clone('".[spark]"')),
}
# Estimators ``evaluate`` offers: every one of the registry but those needing a reward model,
# which a table of rewards cannot give.
_METRICS = tuple(n for n, e in ESTIMATORS.items() if "reward_model" not in e.needs)


def _offered(kind: str) -> str:
    """The estimators ``evaluate`` offers for ``"held-out"`` or ``"feed-log"`` data."""
    return ", ".join(m for m in _METRICS if ESTIMATORS[m].data == kind.replace("-", "_"))


_DEFAULT_METRICS = {"held-out": ("dcg", "ndcg", "pn_dcg", "recall"), "feed-log": ("logged_dcg",)}


def _named_paths(given: list[str] | None, option: str) -> dict[str, Path]:
    """``NAME=PATH`` arguments of a repeatable option → {name: path}."""
    named: dict[str, Path] = {}
    for entry in given or []:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            _fail(f"recpack-ope evaluate: {option} takes NAME=PATH, got {entry!r}")
        if name in named:
            _fail(f"recpack-ope evaluate: {option} names {name!r} twice")
        named[name] = Path(path)
    return named


def _evaluate_plan(args: argparse.Namespace) -> tuple[str, dict[str, Path], tuple[str, ...]]:
    """Check the options of ``evaluate``: (``"held-out"`` or ``"feed-log"``, the named
    inputs, the estimators)."""
    models = _named_paths(args.recommendations, "--recommendations")
    targets = _named_paths(args.target, "--target")
    held_out = args.held_out is not None or models or args.propensity is not None
    if args.feed_log is not None or targets:
        if held_out:
            _fail(
                "recpack-ope evaluate: give --held-out with --recommendations (and --propensity), "
                "or --feed-log with --target, not both"
            )
        if args.feed_log is None or not targets:
            _fail(
                "recpack-ope evaluate: --feed-log needs at least one --target NAME=PATH, "
                "and --target a --feed-log"
            )
        kind, named = "feed-log", targets
    else:
        if args.held_out is None or not models:
            _fail(
                "recpack-ope evaluate: give --held-out PATH with --recommendations NAME=PATH "
                "(repeatable), or --feed-log PATH with --target NAME=PATH"
            )
        kind, named = "held-out", models
    weighted = ("ips_dcg", "ips_pn_dcg") if args.propensity is not None else ()
    metrics = tuple(args.metrics or _DEFAULT_METRICS[kind] + weighted)
    other = [m for m in metrics if ESTIMATORS[m].data != kind.replace("-", "_")]
    if other:
        _fail(
            f"recpack-ope evaluate: --metrics of {kind} data are {_offered(kind)}, got {other[0]}"
        )
    for entry in map(ESTIMATORS.get, metrics):
        if kind == "held-out" and entry.missing(propensity=args.propensity):
            _fail(
                f"recpack-ope evaluate: --metrics {entry.name} weights by inverse propensities: "
                f"give --propensity PATH, or use {entry.plain!r} for the unweighted estimator"
            )
    if len(set(metrics)) != len(metrics):
        _fail(f"recpack-ope evaluate: --metrics lists a metric twice: {' '.join(metrics)}")
    if args.k < 1:
        _fail(f"recpack-ope evaluate: --k must be a positive integer, got {args.k}")
    if args.clip is not None and not args.clip > 0:
        _fail(f"recpack-ope evaluate: --clip must be a number > 0, got {args.clip}")
    if not 0 < args.level < 1:
        _fail(f"recpack-ope evaluate: --level must lie in (0, 1), got {args.level}")
    if args.partitions is not None and (args.engine != "spark" or args.partitions < 1):
        _fail(
            f"recpack-ope evaluate: --partitions takes a positive number of Spark partitions "
            f"with --engine spark, got {args.partitions} with --engine {args.engine}"
        )
    if args.compare is not None:
        unknown = [name for name in args.compare if name not in named]
        if unknown:
            known = list(named)
            _fail(f"recpack-ope evaluate: --compare names {unknown[0]!r}, which is none of {known}")
        if kind == "feed-log" and args.engine == "spark":
            _fail(
                "recpack-ope evaluate: --compare on a feed log needs --engine local (Spark's "
                "logged_dcg evaluates one target per pass, so the two cannot be paired)"
            )
    if args.output is not None and Path(args.output).suffix.lower() not in (".json", ".csv"):
        _fail(f"recpack-ope evaluate: --output must end in .json or .csv, got {args.output!r}")
    inputs = {
        "--held-out": args.held_out,
        "--propensity": args.propensity,
        "--feed-log": args.feed_log,
    }
    files = [(option, Path(path)) for option, path in inputs.items() if path is not None]
    files += [(f"--recommendations {name}=", path) for name, path in models.items()]
    files += [(f"--target {name}=", path) for name, path in targets.items()]
    for option, path in files:
        if not path.is_file():
            _fail(f"recpack-ope evaluate: {option} file {str(path)!r} does not exist")
    return kind, named, metrics


def _local_estimates(args, kind: str, named: Mapping[str, Path], metrics, discount) -> dict:
    """model → estimator name → estimate, by the registry's estimators on matrices built from
    the files."""
    from .io.tables import feed_log_tables, held_out_tables
    from .logged.policies import DeterministicRanker

    if kind == "feed-log":
        tables = feed_log_tables(args.feed_log, named)
        return {
            name: {
                m: ESTIMATORS[m].function(
                    tables.log,
                    DeterministicRanker(scores),
                    discount=discount,
                    clip=args.clip,
                    **ESTIMATORS[m].options,
                )
                for m in metrics
            }
            for name, scores in tables.scores.items()
        }
    tables = held_out_tables(args.held_out, named, args.propensity)
    options = {"discount": discount, "propensity": tables.propensity, "clip": args.clip}
    return {
        name: {m: ESTIMATORS[m](tables.y_true, scores, **options) for m in metrics}
        for name, scores in tables.scores.items()
    }


def _spark_read(spark, path: Path):
    """A parquet or CSV file (header line, types inferred) as a Spark DataFrame."""
    from .io.tables import table_format

    if table_format(path) == "parquet":
        return spark.read.parquet(str(path))
    return spark.read.csv(str(path), header=True, inferSchema=True)


def _spark_estimates(args, kind: str, named: Mapping[str, Path], metrics, discount) -> dict:
    """model → estimator name → estimate from recpack_ope.spark on a local Spark session."""
    import pyspark.sql  # noqa: F401  (missing pyspark: the install hint, before looking for Java)

    from . import spark as engine

    try:
        session = engine.local_session()
    except RuntimeError as error:  # no Java: a hint, like a missing package
        _fail(f"recpack-ope evaluate: {error}")
    frames = {name: _spark_read(session, path) for name, path in named.items()}
    options = {"discount": discount, "clip": args.clip, "n_partitions": args.partitions}
    if kind == "feed-log":
        log = _spark_read(session, Path(args.feed_log))
        return {
            name: {
                m: engine.logged_dcg(log, frame, **options, **ESTIMATORS[m].options)
                for m in metrics
            }
            for name, frame in frames.items()
        }
    propensity = None if args.propensity is None else _spark_read(session, Path(args.propensity))
    held_out = _spark_read(session, Path(args.held_out))
    return engine.evaluate(
        held_out, frames, metrics=metrics, k=args.k, propensity=propensity, **options
    ).estimates


def _evaluate(args: argparse.Namespace) -> int:
    from .propensity.discount import LogDiscount

    kind, named, metrics = _evaluate_plan(args)
    compute = _spark_estimates if args.engine == "spark" else _local_estimates
    try:
        with _hints("evaluate", _EVALUATE_INSTALL[args.engine]):
            estimates = compute(args, kind, named, metrics, LogDiscount(args.k))
    except (OSError, ValueError) as error:
        raise SystemExit(f"recpack-ope evaluate: {error}") from None
    # One row per model and estimator (the columns of recpack_ope.spark's ``table()``).
    rows = []
    for model, by_metric in estimates.items():
        for metric, est in by_metric.items():
            lo, hi = est.confidence_interval(args.level)
            rows.append(
                {
                    "model": model,
                    "metric": metric,
                    "name": est.name,
                    "value": est.value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "standard_error": est.standard_error,
                    "n_users": est.n_users,
                    "n_excluded_users": est.n_excluded_users,
                }
            )
    paired = []
    if args.compare is not None:
        a, b = args.compare
        paired = [
            (m, estimates[a][m].compare(estimates[b][m], args.level, names=(a, b))) for m in metrics
        ]
    what = "users" if kind == "held-out" else "sessions"
    print(f"| model | metric | value | {args.level * 100:g}% CI | n_{what} | excluded |")
    print("|---|---|---:|---|---:|---:|")
    for row in rows:
        print(
            f"| {row['model']} | {row['name']} | {row['value']:.4f} | [{row['ci_low']:.4f}, "
            f"{row['ci_high']:.4f}] | {row['n_users']} | {row['n_excluded_users']} |"
        )
    if paired:
        print("\n" + "\n".join(repr(c) for _, c in paired))
    if args.output is not None:
        comparisons = [
            {
                "a": args.compare[0],
                "b": args.compare[1],
                "metric": m,
                "name": c.name,
                "difference": c.difference,
                "standard_error": c.standard_error,
                "ci_low": c.confidence_interval[0],
                "ci_high": c.confidence_interval[1],
                "p_value": c.p_value,
                "n_users": c.n_users,
            }
            for m, c in paired
        ]
        settings = {"engine": args.engine, "input": kind, "k": args.k, "clip": args.clip}
        _write_evaluation(Path(args.output), rows, comparisons, {**settings, "level": args.level})
    return 0


def _write_evaluation(
    path: Path, rows: list[dict], comparisons: list[dict], settings: dict
) -> None:
    """JSON (settings, rows and comparisons) or CSV (the rows; comparisons, if any, in
    ``<stem>-comparisons.csv`` beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        with open(path, "w") as handle:
            json.dump({**settings, "rows": rows, "comparisons": comparisons}, handle, indent=1)
        print(f"\nJSON in {path}")
        return
    written = [(path, rows)]
    if comparisons:
        written.append((path.with_name(f"{path.stem}-comparisons.csv"), comparisons))
    for target, table in written:
        with open(target, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    print("\nCSV in " + " and ".join(str(target) for target, _ in written))


def _study_parser(commands, study: Study) -> None:
    """The subcommand of ``study``: its options, then where its report goes and how much it
    shows."""
    parser = commands.add_parser(
        study.name, formatter_class=_HelpFormatter, help=study.help, description=study.description
    )
    study.add_arguments(parser)
    if study.per_dataset:  # resolved by _run_study once the data set is known
        help_ = f"report folder (default: {REPORTS / study.name}-DATASET)"
        parser.add_argument("--output", default=None, help=help_)
    else:
        parser.add_argument("--output", default=str(REPORTS / study.name), help="report folder")
    parser.add_argument("--no-plots", action="store_true", help=f"skip {study.plots}")
    if study.progress:
        parser.add_argument("--quiet", action="store_true", help="no progress bar")
    if study.verbose is not None:
        parser.add_argument("--verbose", action="store_true", help=study.verbose)
    parser.set_defaults(run=functools.partial(_run_study, study))


def build_parser() -> argparse.ArgumentParser:
    """The ``recpack-ope`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="recpack-ope",
        formatter_class=_HelpFormatter,
        description="Evaluation that tells whether offline numbers track online reward.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _study_parser(sub, STUDIES["demo"])

    rp = sub.add_parser(
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
    rp.add_argument(
        "runs", nargs="+", metavar="RUN", help="run files (one system each; .gz allowed)"
    )
    rp.add_argument("--qrels", required=True, help="relevance judgements in trec_eval format")
    rp.add_argument(
        "--measure",
        action="append",
        choices=tuple(_RPP_MEASURES),
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
        choices=("bonferroni", "tukey"),
        default="bonferroni",
        help="pairwise test: t-test with Bonferroni correction or randomised Tukey HSD",
    )
    rp.add_argument("--resamples", type=int, default=1000, help="Tukey HSD relabellings")
    rp.add_argument("--alpha", type=float, default=0.05, help="significance level")
    rp.add_argument("--seed", type=int, default=0, help="Tukey HSD seed")
    rp.add_argument("--output", default=str(REPORTS / "rpp.json"), help="JSON report")
    rp.set_defaults(run=_rpp)

    ev = sub.add_parser(
        "evaluate",
        formatter_class=_HelpFormatter,
        help="evaluate recommendations (or target rankings on a feed log) from parquet or CSV "
        "files",
        description=(
            "Evaluate models from long tables (.parquet/.pq or .csv with a header line): "
            "held-out rewards with one recommendations file per model, or a feed log with one "
            "target ranking per model. Prints every model's estimates with confidence "
            "intervals, and optionally a paired comparison; --engine spark runs the same "
            "estimators on a local Spark session. Ties go to the lower item id."
        ),
    )
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
        help="one model's recommendations for held-out users: columns user, item and score "
        "(higher is better) or rank (1 = top); repeat per model (default: none)",
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
        help="logged feeds: columns session, context, item, rank, reward, propensity (the "
        "logging exposure) (default: none; or give --held-out)",
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
        nargs="+",
        choices=_METRICS,
        metavar="METRIC",
        help=f"estimators of held-out data: {_offered('held-out')} (default: dcg ndcg pn_dcg "
        "recall, and ips_dcg ips_pn_dcg with --propensity; --engine spark computes all but "
        f"stratified_ndcg); of a feed log: {_offered('feed-log')} (default: logged_dcg). Those "
        "needing a reward model (dr_dcg, logged_dr_dcg) are for Python only",
    )
    ev.add_argument(
        "--k",
        "--cutoff",
        dest="k",
        type=int,
        default=10,
        help="cutoff K of the discount 1/log2(rank + 1) and of recall",
    )
    ev.add_argument(
        "--clip",
        type=float,
        default=None,
        metavar="M",
        help="clip inverse propensities at m (default: unclipped)",
    )
    ev.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
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
        help="in memory (pyarrow reads the files) or on a local Spark session",
    )
    ev.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help="Spark partitions users are spread over (default: spark.sql.shuffle.partitions, 16)",
    )
    ev.add_argument(
        "--output",
        default=None,
        metavar="PATH",
        help="also write the table as JSON (PATH.json, with the comparisons) or CSV (PATH.csv) "
        "(default: print only)",
    )
    ev.set_defaults(run=_evaluate)

    reproduce = sub.add_parser(
        "reproduce", help="reproduce a paper's result", formatter_class=_HelpFormatter
    )
    papers = reproduce.add_subparsers(dest="experiment", required=True)
    for study in STUDIES.values():
        if study.reproduction:
            _study_parser(papers, study)
    return parser


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
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
