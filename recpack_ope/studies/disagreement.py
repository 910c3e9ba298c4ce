"""A simulated Criteo-like banner study reproducing Gilotte (2019), Figure 3.

Criteo draws banners of 2–16 products by Plackett–Luce from a candidate set and shuffles a
small share of them uniformly (§4). Gilotte scores about 40 models by pairwise disagreement on
non-shuffled banners, by counterfactual disagreement on non-shuffled banners, and by pairwise
disagreement on shuffled banners (free of position bias), and finds that the first correlates
poorly with the shuffled reference while the counterfactual one correlates well (Fig. 3a/b).

The simulation: products have a quality ``q_p``; the logging model scores ``ℓ_p = q_p + noise``
and draws each banner's products and order by PL with weights ``exp(ℓ_p / τ)`` from
``n_candidates`` random candidates; a product at rank r is clicked with probability
``θ_r · σ(b + q_p + ε)`` (position-based model, strongly decreasing ``θ_r = r^(−η)``, as in
Fig. 2). The models score ``(1 − λ)(q_p + noise) + λ ℓ_p`` with random copy share λ and noise: those
that copy the logging model (large λ) look better than they are on non-shuffled traffic,
because the products the logging model puts on top get the position's clicks.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._plots import pyplot, save
from ..logged.feed_log import FeedLog
from ..logged.pairwise_disagreement import Disagreement

__all__ = [
    "BannerStudyConfig",
    "BannerStudyResult",
    "simulate_banners",
    "run_banner_study",
    "write_report",
]


@dataclass(frozen=True)
class BannerStudyConfig:
    """Settings of the study (the defaults run in under a minute)."""

    n_products: int = 1000
    n_banners: int = 40_000
    n_shuffled: int = 40_000
    n_candidates: int = 30
    min_size: int = 2
    max_size: int = 12
    temperature: float = 0.5
    position_exponent: float = 1.0
    base_logit: float = -2.0
    n_models: int = 40
    seed: int = 0


def simulate_banners(
    config: BannerStudyConfig, shuffled: bool, seed: int, quality, logging
) -> FeedLog:
    """One log of banners (see the module docstring); ``shuffled`` reorders each uniformly."""
    rng = np.random.default_rng(seed)
    n_banners = config.n_shuffled if shuffled else config.n_banners
    k = config.n_candidates
    candidates = np.argsort(rng.random((n_banners, config.n_products)), axis=1)[:, :k]
    weights = np.exp(logging[candidates] / config.temperature)
    order = np.argsort(rng.standard_exponential((n_banners, k)) / weights, axis=1)
    sizes = rng.integers(config.min_size, config.max_size + 1, n_banners)
    shown = np.arange(k) < sizes[:, None]
    if shuffled:  # same products, uniformly random order among the shown ones
        keys = np.where(shown, rng.random((n_banners, k)), np.inf)
        order[:, :] = np.take_along_axis(order, np.argsort(keys, axis=1), axis=1)
    items = np.take_along_axis(candidates, order, axis=1)[shown]
    pl_weight = (np.take_along_axis(weights, order, axis=1) / weights.sum(axis=1, keepdims=True))[
        shown
    ]
    banner = np.repeat(np.arange(n_banners), sizes)
    rank = np.broadcast_to(np.arange(1, k + 1), (n_banners, k))[shown]
    relevance = 1 / (
        1 + np.exp(-(config.base_logit + quality[items] + rng.normal(0, 0.5, items.size)))
    )
    click = rng.random(items.size) < rank**-config.position_exponent * relevance
    return FeedLog.from_arrays(
        banner,
        items,
        rank,
        click.astype(float),
        logging_weight=pl_weight,
        n_items=config.n_products,
    )


@dataclass(frozen=True, eq=False)
class BannerStudyResult:
    """Per-model disagreements and their correlation with the shuffled reference."""

    config: BannerStudyConfig
    models: list
    reference: np.ndarray = field(repr=False)
    classic: np.ndarray = field(repr=False)
    counterfactual: np.ndarray = field(repr=False)
    n_clicked: dict
    seconds: float

    def correlation(self, metric: str) -> tuple[float, float]:
        """Pearson r and two-sided p of ``metric`` ("classic"/"counterfactual") with the
        reference."""
        # imported on use: start-up time (docs/performance.md)
        from scipy import stats

        r = stats.pearsonr(self.reference, getattr(self, metric))
        return float(r.statistic), float(r.pvalue)

    def table(self) -> str:
        """Markdown table: correlation of each non-shuffled metric with the shuffled reference."""
        # imported on use: start-up time (docs/performance.md)
        from scipy import stats

        lines = [
            "| metric on non-shuffled banners | Pearson r with shuffled PD | p | Spearman ρ |",
            "|---|---|---|---|",
        ]
        for metric, label in (
            ("classic", "pairwise disagreement"),
            ("counterfactual", "counterfactual disagreement"),
        ):
            r, p = self.correlation(metric)
            rho = stats.spearmanr(self.reference, getattr(self, metric)).statistic
            lines.append(f"| {label} | {r:.3f} | {p:.2g} | {rho:.3f} |")
        return "\n".join(lines)


def run_banner_study(
    config: BannerStudyConfig = BannerStudyConfig(), *, progress: bool = True
) -> BannerStudyResult:
    """Simulate both logs, score ``n_models`` models by the three disagreements."""
    start = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    quality = rng.normal(0.0, 1.0, config.n_products)
    logging = quality + rng.normal(0.0, 1.0, config.n_products)
    live = simulate_banners(config, False, config.seed + 1, quality, logging)
    shuffled = simulate_banners(config, True, config.seed + 2, quality, logging)
    classic = Disagreement.classic(live)
    counterfactual = Disagreement.counterfactual(live, progress=progress)
    reference = Disagreement.classic(shuffled)
    models, values = [], {"reference": [], "classic": [], "counterfactual": []}
    for _ in range(config.n_models):
        copy, noise = rng.uniform(0, 1), rng.uniform(0.2, 1.0)
        own = quality + noise * rng.normal(0, 1, config.n_products)
        score = (1 - copy) * own + copy * logging
        models.append({"copy": copy, "noise": noise})
        values["reference"].append(reference.evaluate(score[shuffled.item]).value)
        values["classic"].append(classic.evaluate(score[live.item]).value)
        values["counterfactual"].append(counterfactual.evaluate(score[live.item]).value)
    return BannerStudyResult(
        config,
        models,
        *(np.array(values[k]) for k in ("reference", "classic", "counterfactual")),
        n_clicked={
            "non-shuffled": int(classic.banners.size),
            "shuffled": int(reference.banners.size),
        },
        seconds=time.perf_counter() - start,
    )


def write_report(result: BannerStudyResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``disagreement.md``, ``disagreement.json`` and (with matplotlib)
    ``disagreement.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "disagreement.json").write_text(
        json.dumps(
            {
                "config": asdict(result.config),
                "models": result.models,
                "shuffled_pairwise": result.reference.tolist(),
                "pairwise": result.classic.tolist(),
                "counterfactual": result.counterfactual.tolist(),
                "pearson": {m: result.correlation(m) for m in ("classic", "counterfactual")},
            },
            indent=1,
        )
    )
    cfg = result.config
    lines = [
        "# Pairwise disagreement on non-shuffled banners (Gilotte 2019, Figure 3)",
        "",
        f"{cfg.n_models} models; {cfg.n_banners} Plackett–Luce banners of "
        f"{cfg.min_size}–{cfg.max_size} products ({result.n_clicked['non-shuffled']} with a click "
        f"and a non-click) and {cfg.n_shuffled} uniformly shuffled ones "
        f"({result.n_clicked['shuffled']}); {result.seconds:.0f} s.",
        "",
        result.table(),
    ]
    plt = pyplot(plots)
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, metric, title in zip(
            axes,
            ("classic", "counterfactual"),
            ("(a) pairwise disagreement, non-shuffled", "(b) counterfactual disagreement"),
            strict=True,
        ):
            ax.scatter(result.reference, getattr(result, metric), s=14)
            ax.set_xlabel("pairwise disagreement on shuffled banners")
            ax.set_ylabel(title.split(") ")[1])
            ax.set_title(f"{title}: r = {result.correlation(metric)[0]:.2f}")
        save(fig, folder / "disagreement.png")
        lines += ["", "![Figure 3](disagreement.png)"]
    (folder / "disagreement.md").write_text("\n".join(lines) + "\n")
    return folder
