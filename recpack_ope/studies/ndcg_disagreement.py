"""Reproduction of Jeunen et al. (KDD'24) Appendix A / Figure 2 in a RecPack pipeline.

Do DCG and nDCG disagree when ranking recommendation models in a standard offline setup?
The paper trains 192 models on MovieLens-1M with RecPack — 81 KUNN (Ku, Ki ∈
linspace(70, 110, 9)) and 111 EASE (l2 ∈ linspace(500, 1600, 111)) — on a fixed 50 % of the
interactions (``WeakGeneralization(0.5)``), evaluates DCG@100 and nDCG@100 on the other 50 %
and reports Pearson ≈ 0.6, Kendall ≈ 0.5 and ≈ 25 % disagreement (probability that nDCG
inverts the DCG order of a random pair of models).

Besides nDCG this reports, against the same DCG@100, post-normalised DCG (Lemma 5.1: never
inverts DCG) and unbiased DCG with power-law propensities (Jadidinejad Eq. 7), all computed
by recpack-ope metrics registered in the same pipeline. The statistics are the core's
:func:`~recpack_ope.inference.agreement.agreement`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from recpack.pipelines import Pipeline, PipelineBuilder
from recpack.scenarios import WeakGeneralization

from .._plots import pyplot, save
from .._validation import check_positive_int
from ..adapters.recpack import RecPackAdapter
from ..inference.agreement import MetricAgreement, agreement
from ..io.recpack_datasets import load_interactions
from ..propensity.models import PowerLawPropensity
from . import progress_bar, quiet_frameworks

__all__ = [
    "DisagreementConfig",
    "DisagreementResult",
    "model_grid",
    "run_disagreement",
    "write_report",
]

PAPER = {"pearson": 0.6, "kendall": 0.5, "disagreement": 0.25}
"""The paper's ML-1M figures (Appendix A, approximate as printed)."""

PAPER_MODELS = 192
REFERENCE = "DCG"
# Display name -> registered metric (recpack's DCGK/NDCGK, recpack-ope's others).
_METRICS = {
    "DCG": "DCGK",
    "nDCG": "NDCGK",
    "pnDCG": "PostNormalisedDCGK",
    "IPS-DCG (power-law p)": "PowerLawIPSDCGK",
}


def model_grid(n_models: int = PAPER_MODELS) -> list[tuple[str, dict]]:
    """The paper's KUNN and EASE grid, or a proportionally scaled one.

    ``n_models = 192`` gives the paper's grid exactly. Otherwise KUNN keeps its share
    (81/192) as an m×m grid over the same range and EASE fills the rest of the range
    [500, 1600]; at least one model of each family.
    """
    n_models = check_positive_int(n_models, "n_models")
    if n_models < 2:
        raise ValueError(f"n_models must be at least 2 (one KUNN and one EASE), got {n_models}")
    side = max(1, round(np.sqrt(n_models * 81 / PAPER_MODELS)))
    while side > 1 and side * side >= n_models:
        side -= 1
    grid = [
        ("KUNN", {"Ku": int(ku), "Ki": int(ki)})
        for ku in np.linspace(70, 110, side)
        for ki in np.linspace(70, 110, side)
    ]
    grid += [("EASE", {"l2": float(l2)}) for l2 in np.linspace(500, 1600, n_models - side * side)]
    return grid


@dataclass(frozen=True)
class DisagreementConfig:
    """Settings of the reproduction (defaults: the paper's, on MovieLens-100K)."""

    dataset: str = "ml-100k"
    n_models: int = PAPER_MODELS
    K: int = 100
    seed: int = 0
    clip: float | None = None
    path: str | None = None
    data_dir: str | None = None


@dataclass(frozen=True)
class DisagreementResult:
    """Per-model metric values, their agreement with DCG, and the run RecPack pipeline
    (for :func:`recpack_ope.adapters.recpack.compare` and ``summary``)."""

    config: DisagreementConfig
    pipeline: Pipeline
    values: pd.DataFrame
    agreements: dict[str, MetricAgreement]
    n_users: int
    n_items: int
    n_interactions: int
    seconds: float

    def table(self) -> str:
        """Agreement of each metric with DCG@K, next to the paper's ML-1M figures."""
        K = self.config.K
        lines = [
            f"{'metric vs DCG@' + str(K):<28} {'Pearson':>8} {'Kendall':>8} {'P(disagree)':>12}",
            f"{'paper, nDCG on ML-1M':<28} {'≈' + format(PAPER['pearson'], 'g'):>8} "
            f"{'≈' + format(PAPER['kendall'], 'g'):>8} "
            f"{'≈' + format(PAPER['disagreement'], '.0%'):>12}",
        ]
        for name, a in self.agreements.items():
            lines.append(
                f"{name + '@' + str(K):<28} {a.pearson:>8.3f} {a.kendall:>8.3f} "
                f"{a.disagreement:>12.1%}"
            )
        return "\n".join(lines)


def run_disagreement(
    config: DisagreementConfig | None = None, *, progress: bool = True, verbose: bool = False
) -> DisagreementResult:
    """Train the model grid in one RecPack pipeline and measure how each metric agrees with DCG.

    Registers recpack-ope's metrics (``PostNormalisedDCGK`` with ``p ≡ 1``, and
    ``PowerLawIPSDCGK`` with power-law propensities fitted on the training half) next to
    RecPack's ``DCGK`` and ``NDCGK``.

    Parameters
    ----------
    config : DisagreementConfig, optional
        The reproduction's settings (default: the paper's, on MovieLens-100K).
    progress : bool
        Show a progress bar over the models on a terminal (``verbose`` shows RecPack's own).
    verbose : bool
        Let RecPack talk: its per-fit logs, progress bars and warnings
        (:func:`~recpack_ope.studies.quiet_frameworks`).
    """
    config = config or DisagreementConfig()
    K = check_positive_int(config.K, "K")
    grid = model_grid(config.n_models)
    start = time.perf_counter()
    with quiet_frameworks(verbose) as terminal:
        data = load_interactions(
            config.dataset, path=config.path, data_dir=config.data_dir, seed=config.seed
        )
        scenario = WeakGeneralization(0.5, validation=False, seed=config.seed)
        scenario.split(data)
        RecPackAdapter().register()
        RecPackAdapter(propensity=PowerLawPropensity(), clip=config.clip).fit(
            scenario.full_training_data
        ).register(prefix="PowerLaw")

        builder = PipelineBuilder()
        for name, params in grid:
            builder.add_algorithm(name, params=params)
        for metric in _METRICS.values():
            builder.add_metric(metric, K=K)
        builder.set_data_from_scenario(scenario)
        pipeline = builder.build()
        # RecPack's run() iterates algorithm_entries behind its own bar, muted here: iterating
        # ours instead draws one on the terminal.
        entries = pipeline.algorithm_entries
        pipeline.algorithm_entries = progress_bar(
            entries, desc="models", show=progress and not verbose, file=terminal
        )
        try:
            pipeline.run()
        finally:
            pipeline.algorithm_entries.close()
            pipeline.algorithm_entries = entries
        table = pipeline.get_metrics()

    values = pd.DataFrame(
        {name: table[f"{metric}_{K}"].to_numpy(dtype=float) for name, metric in _METRICS.items()},
        index=pd.Index(table.index, name="model"),
    )
    values.insert(0, "family", [identifier.split("(")[0] for identifier in table.index])
    agreements = {
        name: agreement(values[REFERENCE], values[name]) for name in _METRICS if name != REFERENCE
    }
    return DisagreementResult(
        config=config,
        pipeline=pipeline,
        values=values,
        agreements=agreements,
        n_users=int(data.shape[0]),
        n_items=int(data.shape[1]),
        n_interactions=int(data.num_interactions),
        seconds=time.perf_counter() - start,
    )


def write_report(result: DisagreementResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``models.csv``, ``agreement.csv``, ``summary.md`` and the Figure-2 scatter plots."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    result.values.to_csv(folder / "models.csv")
    pd.DataFrame({name: vars(a) for name, a in result.agreements.items()}).T.rename_axis(
        "metric vs DCG"
    ).to_csv(folder / "agreement.csv")
    c = result.config
    (folder / "summary.md").write_text(
        f"# nDCG disagreement (Jeunen et al. KDD'24, Appendix A)\n\n"
        f"{c.dataset}: {result.n_users} users × {result.n_items} items, "
        f"{result.n_interactions} interactions after RecPack's filters; "
        f"WeakGeneralization(0.5, seed={c.seed}); {len(result.values)} models "
        f"({(result.values['family'] == 'KUNN').sum()} KUNN, "
        f"{(result.values['family'] == 'EASE').sum()} EASE); K = {c.K}; "
        f"power-law IPS clip = {c.clip}; {result.seconds:.0f} s.\n\n"
        f"```\n{result.table()}\n```\n"
    )
    plt = pyplot(plots)
    if plt is not None:
        _figure(result, folder, plt)
    return folder


def _figure(result: DisagreementResult, folder: Path, plt) -> None:
    K = result.config.K
    others = list(result.agreements)
    fig, axes = plt.subplots(1, len(others), figsize=(5.2 * len(others), 4), squeeze=False)
    x = result.values[REFERENCE].to_numpy()
    for ax, name in zip(axes[0], others, strict=True):
        y = result.values[name].to_numpy()
        for family, style in (
            ("EASE", dict(marker="x", color="maroon")),
            ("KUNN", dict(marker="o", color="darkgreen")),
        ):
            rows = (result.values["family"] == family).to_numpy()
            ax.scatter(x[rows], y[rows], s=30, alpha=0.75, label=family, **style)
        slope, intercept = np.polyfit(x, y, 1)
        xs = np.array([x.min(), x.max()])
        ax.plot(xs, intercept + slope * xs, "k--", lw=1, label="trend")
        a = result.agreements[name]
        ax.set_xlabel(f"DCG@{K}")
        ax.set_ylabel(f"{name}@{K}")
        ax.set_title(
            f"P(disagreement) ≈ {a.disagreement:.1%}\nr = {a.pearson:.2f}, τ = {a.kendall:.2f}",
            fontsize=10,
        )
        ax.grid(True, ls="--", lw=0.5, alpha=0.4)
        ax.legend(fontsize=8)
    save(fig, folder / "figure2.png", dpi=110)
