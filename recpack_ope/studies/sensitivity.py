"""Offline–online sensitivity of clipped (n)DCG on logs (Jeunen et al. KDD'24, §6.2, Figure 1).

The paper takes 20 (logging, target) pairs whose online A/B tests showed significant
improvements and asks, for IPS clipping ``min(m, 1/ε0)`` with m ∈ {1, 2, 4, …, ∞}: how often
does the offline metric also call the improvement significant (true-positive rate at
p < 0.01, one-sided paired test per trajectory), and how confident is it (mean p-value)?
Findings: any IPS (m > 1) beats none; DCG beats nDCG over a wide range of m; unclipped DCG
(m = ∞) loses sensitivity to variance while nDCG, bounded, does not.

Here the online truths are exact, from :class:`~recpack_ope.simulation.SimulatedWorld`.
Logging policies are Plackett–Luce over popularity (temperatures ``logging_temperatures``);
targets are deterministic rankers of the true relevance logits plus Gaussian noise
(``target_noise``). Every (logging, target) pair whose exact online reward improves on the
logging policy's is one setting, evaluated on its own log; the offline difference per
trajectory is target minus logging (the logging policy evaluated with its own exposure and
the same clipping).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._plots import pyplot, save
from ..logged.logged_dcg import logged_dcg
from ..logged.policies import DeterministicRanker, PlackettLuceRanker
from ..propensity.discount import LogDiscount
from ..simulation.world import PopularityPolicy, SimulatedWorld
from . import progress_bar

__all__ = ["SensitivityConfig", "SensitivityResult", "run_sensitivity", "write_report"]

_METRICS = {"DCG": None, "nDCG": "per_user"}


def _clip_label(m: float | None) -> str:
    return "∞" if m is None else f"{m:g}"


@dataclass(frozen=True)
class SensitivityConfig:
    """Settings of the study (the defaults run in about a minute)."""

    n_users: int = 2000
    n_items: int = 200
    feed_length: int = 10
    logging_temperatures: tuple[float, ...] = (0.5, 1.0)
    target_noise: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
    clips: tuple[float | None, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, None)
    alpha: float = 0.01
    seed: int = 0


@dataclass(frozen=True, eq=False)
class SensitivityResult:
    """One-sided p-values per setting, metric and clipping, and the exact online differences.

    Attributes
    ----------
    p_values : dict
        ``p_values[metric]`` has shape (settings, clips).
    differences : dict
        Offline differences (target − logging), same shapes.
    online : numpy.ndarray
        Exact online improvement of every setting.
    settings : list of tuple
        (logging temperature, target noise) of every setting.
    """

    config: SensitivityConfig
    p_values: dict = field(repr=False)
    differences: dict = field(repr=False)
    online: np.ndarray = field(repr=False)
    settings: list
    seconds: float

    def tpr(self, metric: str) -> np.ndarray:
        """True-positive rate at p < alpha, per clipping."""
        return (self.p_values[metric] < self.config.alpha).mean(axis=0)

    def mean_p(self, metric: str) -> np.ndarray:
        """Mean one-sided p-value, per clipping."""
        return self.p_values[metric].mean(axis=0)

    def sign_agreement(self, metric: str) -> np.ndarray:
        """Share of settings whose offline difference is positive, per clipping."""
        return (self.differences[metric] > 0).mean(axis=0)

    def table(self) -> str:
        """Markdown table of TPR, mean p and sign agreement by clipping m."""
        head = "| m | " + " | ".join(f"TPR {k} | mean p {k} | sign {k}" for k in _METRICS) + " |"
        lines = [head, "|" + "---|" * (1 + 3 * len(_METRICS))]
        for j, m in enumerate(self.config.clips):
            cells = []
            for k in _METRICS:
                cells += [
                    f"{self.tpr(k)[j]:.2f}",
                    f"{self.mean_p(k)[j]:.3g}",
                    f"{self.sign_agreement(k)[j]:.2f}",
                ]
            lines.append(f"| {_clip_label(m)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def findings(self) -> str:
        """The paper's three observations, checked on this run."""
        dcg, ndcg = self.tpr("DCG"), self.tpr("nDCG")
        p_dcg = self.mean_p("DCG")
        best = int(np.argmax(dcg - 1e-9 * p_dcg))
        return "; ".join(
            [
                f"IPS helps: DCG TPR {dcg[0]:.2f} at m = 1 vs {dcg.max():.2f} at best "
                f"(m = {_clip_label(self.config.clips[best])})",
                f"DCG ≥ nDCG in TPR for {int(np.sum(dcg >= ndcg))} of {dcg.size} clippings",
                f"unclipped DCG: TPR {dcg[-1]:.2f}, mean p {p_dcg[-1]:.3g} "
                f"(best mean p {p_dcg.min():.3g})"
                if self.config.clips[-1] is None
                else "no m = ∞ in this run",
            ]
        )


def run_sensitivity(
    config: SensitivityConfig = SensitivityConfig(), *, progress: bool = True
) -> SensitivityResult:
    """Run the study; see the module docstring."""
    start = time.perf_counter()
    world = SimulatedWorld(n_users=config.n_users, n_items=config.n_items, seed=config.seed)
    discount = LogDiscount(cutoff=config.feed_length)
    rng = np.random.default_rng(config.seed)
    logits = np.log(world.relevance()) - np.log1p(-world.relevance())
    targets = [logits + rng.normal(0.0, sigma, logits.shape) for sigma in config.target_noise]
    online_targets = [world.online_reward(t, discount).value for t in targets]
    settings, online = [], []
    for temperature in config.logging_temperatures:
        logging_reward = world.policy_reward(
            PopularityPolicy(temperature), discount, config.feed_length
        ).value
        for sigma, reward in zip(config.target_noise, online_targets, strict=True):
            if reward > logging_reward:
                settings.append((temperature, sigma))
                online.append(reward - logging_reward)
    if not settings:
        raise ValueError("no target improves on a logging policy online; add less noisy targets")
    shape = (len(settings), len(config.clips))
    p_values = {k: np.empty(shape) for k in _METRICS}
    differences = {k: np.empty(shape) for k in _METRICS}
    noise_index = {s: j for j, s in enumerate(config.target_noise)}
    bar = progress_bar(settings, desc="settings", show=progress)
    for i, (temperature, sigma) in enumerate(bar):
        policy = PopularityPolicy(temperature)
        log = world.log(
            policy, feed_length=config.feed_length, discount=discount, seed=1000 + i
        ).feed_log()
        target = DeterministicRanker(targets[noise_index[sigma]]).exposure(log, discount)
        logging = PlackettLuceRanker(np.log(policy.weights(world))).exposure(log, discount)
        for j, m in enumerate(config.clips):
            for metric, normalise in _METRICS.items():
                ours = logged_dcg(log, target, discount=discount, clip=m, normalise=normalise)
                theirs = logged_dcg(log, logging, discount=discount, clip=m, normalise=normalise)
                comparison = ours.compare(theirs)
                p_values[metric][i, j] = comparison.p_value_greater
                differences[metric][i, j] = comparison.difference
    return SensitivityResult(
        config, p_values, differences, np.array(online), settings, time.perf_counter() - start
    )


def write_report(result: SensitivityResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``sensitivity.md``, ``sensitivity.json`` and (with matplotlib) ``sensitivity.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    clips = [_clip_label(m) for m in result.config.clips]
    (folder / "sensitivity.json").write_text(
        json.dumps(
            {
                "config": asdict(result.config),
                "settings": [
                    {"logging_temperature": t, "target_noise": s, "online_improvement": float(d)}
                    for (t, s), d in zip(result.settings, result.online, strict=True)
                ],
                "clips": clips,
                **{
                    k: {
                        "tpr": result.tpr(k).tolist(),
                        "mean_p": result.mean_p(k).tolist(),
                        "sign_agreement": result.sign_agreement(k).tolist(),
                        "p_values": result.p_values[k].tolist(),
                    }
                    for k in _METRICS
                },
            },
            indent=1,
        )
    )
    cfg = result.config
    lines = [
        "# Sensitivity of clipped (n)DCG on logs (Jeunen et al., KDD'24, §6.2, Figure 1)",
        "",
        f"{len(result.settings)} (logging, target) settings with exact online improvements "
        f"(simulated world: {cfg.n_users} users × {cfg.n_items} items, "
        f"feeds of {cfg.feed_length}); "
        f"one-sided paired test of target − logging per trajectory at p < {cfg.alpha}; "
        f"sign: share of settings where target − logging > 0; {result.seconds:.0f} s.",
        "",
        result.table(),
        "",
        result.findings() + ".",
    ]
    plt = pyplot(plots)
    if plt is not None:
        x = np.arange(len(clips))
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for metric in _METRICS:
            axes[0].plot(x, result.tpr(metric), marker="o", label=metric)
            axes[1].plot(x, result.mean_p(metric), marker="o", label=metric)
        axes[0].set_ylabel(f"true-positive rate (p < {cfg.alpha}) ↑")
        axes[1].set_ylabel("mean p ↓")
        axes[1].set_yscale("log")
        for ax in axes:
            ax.set_xticks(x, clips)
            ax.set_xlabel("clipping m")
            ax.legend()
        save(fig, folder / "sensitivity.png")
        lines += ["", "![sensitivity](sensitivity.png)"]
    (folder / "sensitivity.md").write_text("\n".join(lines) + "\n")
    return folder
