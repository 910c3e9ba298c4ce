"""Which offline estimate can be trusted, and does the reliability warning say so?

On :class:`~recpack_ope.simulation.SimulatedWorld` worlds of two sizes, a pool of recommenders
is trained once on a logged training period; then ``n_seeds`` independent held-out logs are
drawn, and every estimator × propensity source × clipping evaluates every model on each. The
world gives each model's exact online reward, so per configuration the study measures

* bias, RMSE (both relative to the online reward) and the coverage of 95 % intervals, for the
  estimators of reward (DCG, IPS-DCG, SNIPS-DCG: users without held-out clicks count as 0,
  so the estimate is of reward per user, like the online reward);
* Kendall's τ between the estimates and the online rewards of the pool, and the regret of the
  model the estimate picks (online reward lost relative to the online winner);
* what the weight diagnostics said: the smallest ESS/n over the pool and whether a
  :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` fired.

Besides the IPS family it runs doubly robust DCG (:func:`~recpack_ope.metrics.doubly_robust.dr_dcg`)
with the held-out log's impressions and a reward model that a practitioner could build: the
scores of EASE(l2=200) fitted on the training period, Platt-calibrated on the training clicks
with the power-law propensities (:class:`~recpack_ope.reward.ScoreCalibration`). And, per log,
the paired comparison of the two models with the highest online reward by IPS-DCG with
impressions, plainly and with the Δ-OPE control variate (``compare(control_variate=True)``):
coverage of the true difference, interval width and the variance removed.

Three worlds: ``pbm`` satisfies the assumptions of Jeunen et al. (KDD'24, §4); ``cascade``
breaks the position-based model (clicks end the session, Craswell et al. 2008);
``personalised`` logs with a segment-personalised policy, so item-only propensity estimates
are misspecified.

Run it with ``recpack-ope reproduce reliability`` or :func:`run_reliability`.
"""

from __future__ import annotations

import csv
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .._plots import pyplot, save
from .._validation import check_positive_int
from ..inference.agreement import agreement
from ..inference.diagnostics import ESS_RATIO_THRESHOLD, ReliabilityWarning
from ..inference.result import Comparison, EstimateResult
from ..metrics.dcg import dcg, ips_dcg, ndcg, pn_dcg, snips_dcg
from ..metrics.doubly_robust import dr_dcg
from ..metrics.ranking import TopK
from ..propensity.discount import LogDiscount
from ..propensity.models import PopularityPropensity, PowerLawPropensity
from ..reward import ScoreCalibration
from ..simulation.baselines import EASE, ItemKNN, Popularity, RandomScores
from ..simulation.world import PersonalisedPolicy, PopularityPolicy, SimulatedWorld

__all__ = ["ReliabilityConfig", "ReliabilityResult", "run_reliability", "write_report", "WORLDS"]

WORLDS = ("pbm", "cascade", "personalised")
SOURCES = ("true", "popularity", "power-law")
# τ and regret that the issue sets as the goal for estimated propensities in the default world.
GOAL_KENDALL, GOAL_REGRET, WARN_KENDALL = 0.9, 0.01, 0.8


@dataclass(frozen=True)
class ReliabilityConfig:
    """Settings of the reliability study.

    ``sizes`` are (users, items) of the worlds; the last is the default world of
    ``recpack-ope demo``. ``fixed_clip`` is the clipped configuration's m.
    """

    sizes: tuple[tuple[int, int], ...] = ((4000, 1000), (20000, 2000))
    worlds: tuple[str, ...] = WORLDS
    n_seeds: int = 20
    feed_length: int = 50
    train_feeds: int = 5
    cutoff: int = 10
    temperature: float = 1.0
    fixed_clip: float = 100.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_positive_int(self.n_seeds, "n_seeds")
        unknown = [w for w in self.worlds if w not in WORLDS]
        if unknown or not self.worlds:
            raise ValueError(f"worlds must be a non-empty subset of {WORLDS}, got {self.worlds!r}")
        if not self.sizes:
            raise ValueError("sizes must hold at least one (users, items) pair")
        for users, items in self.sizes:
            check_positive_int(users, "users of a world size")
            check_positive_int(items, "items of a world size")


@dataclass(frozen=True)
class Configuration:
    """One offline estimate: estimator, propensity source and clipping."""

    name: str
    estimator: str
    source: str | None
    clip: float | str | None
    #: DR's reward model: "calibrated" (from training data) or "oracle" (the world's relevance)
    reward: str | None = None

    @property
    def estimates_reward(self) -> bool:
        """Whether it estimates reward per user (so bias, RMSE and coverage apply)."""
        return self.estimator in ("DCG", "IPS-DCG", "SNIPS-DCG", "DR-DCG")


def configurations(fixed_clip: float) -> list[Configuration]:
    """The unweighted metrics, then IPS- and SNIPS-DCG for every source and clipping, and DR-DCG
    for every source, unclipped and at the fixed clipping."""
    out = [Configuration(name, name, None, None) for name in ("DCG", "nDCG", "pnDCG")]
    for source in SOURCES:
        for estimator in ("IPS-DCG", "SNIPS-DCG"):
            for clip, label in (
                (None, "unclipped"),
                (fixed_clip, f"m={fixed_clip:g}"),
                ("auto", "auto m"),
            ):
                out.append(
                    Configuration(f"{estimator} ({source} p, {label})", estimator, source, clip)
                )
    for source in SOURCES:
        for clip, label in ((None, "unclipped"), (fixed_clip, f"m={fixed_clip:g}")):
            out.append(
                Configuration(f"DR-DCG ({source} p, {label})", "DR-DCG", source, clip, "calibrated")
            )
    # The other half of double robustness: estimated propensities, the true reward model.
    for source in ("popularity", "power-law"):
        out.append(
            Configuration(
                f"DR-DCG ({source} p, unclipped, oracle ρ)", "DR-DCG", source, None, "oracle"
            )
        )
    return out


def model_pool() -> list[tuple[str, object]]:
    """Random, popularity, three item-kNN and four EASE models (closed forms of the package)."""
    pool = [("random", RandomScores(seed=0)), ("popularity", Popularity())]
    pool += [(f"ItemKNN(k={k})", ItemKNN(k=k)) for k in (10, 50, 200)]
    pool += [(f"EASE(l2={l2:g})", EASE(l2=l2)) for l2 in (10.0, 200.0, 2000.0, 20000.0)]
    return pool


def over_all_users(result: EstimateResult, n_users: int) -> EstimateResult:
    """The estimate as a mean over all ``n_users`` users, those without held-out clicks
    counting 0: every per-user term is padded with zeros. A mean (DCG) becomes
    ``value · |U| / n_users`` and so does the self-normalised product
    ``mean(DCG)·mean(n)/mean(Σw)``; the delta-method interval follows exactly."""
    padding = np.zeros((n_users - result.n_users, result.terms.shape[1]))
    return EstimateResult(
        name=result.name,
        terms=np.vstack([result.terms, padding]),
        exponents=result.exponents,
        user_ids=np.arange(n_users),
        n_excluded_users=0,
        diagnostics=result.diagnostics,
        clip_selection=result.clip_selection,
    )


@dataclass
class _Run:
    """One configuration on one held-out log: values over the pool and what they said."""

    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    min_ess_ratio: float
    warned: bool
    clips: list


@dataclass(frozen=True, eq=False)
class ReliabilityResult:
    """Per-run records (``runs``) and per-configuration aggregates (``rows``) of the study."""

    config: ReliabilityConfig
    models: list[str]
    rows: list[dict]
    runs: list[dict]
    examples: dict = field(default_factory=dict)
    seconds: float = 0.0
    comparisons: list[dict] = field(default_factory=list)

    def default_world(self) -> tuple[int, int]:
        """(users, items) of the largest world, the demo's default."""
        return tuple(self.config.sizes[-1])

    def select(self, world: str, size: tuple[int, int]) -> list[dict]:
        """Aggregated rows of one world and size."""
        return [
            r for r in self.rows if r["world"] == world and (r["users"], r["items"]) == tuple(size)
        ]

    def table(self, world: str = "pbm", size: tuple[int, int] | None = None) -> str:
        """Markdown table of one world and size (default: pbm, default world)."""
        size = size or self.default_world()
        lines = [
            "| configuration | Kendall τ | regret | rel. bias | rel. RMSE | 95% coverage | "
            "min ESS/n | warned | auto m |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in self.select(world, size):
            rel_bias, rel_rmse, coverage = (
                "—" if math.isnan(r[key]) else f"{r[key]:.1%}"
                for key in ("rel_bias", "rel_rmse", "coverage")
            )
            ess = "—" if math.isnan(r["min_ess_ratio"]) else f"{r['min_ess_ratio']:.1%}"
            warned = "—" if r["source"] is None else f"{r['warned']:.0%}"
            clip = "—" if math.isnan(r["median_auto_clip"]) else f"{r['median_auto_clip']:g}"
            lines.append(
                f"| {r['configuration']} | {r['kendall']:.3f} | {r['regret']:.1%} | {rel_bias} "
                f"| {rel_rmse} | {coverage} | {ess} | {warned} | {clip} |"
            )
        return "\n".join(lines)

    def comparison_table(self, size: tuple[int, int] | None = None) -> str:
        """Markdown table: the paired comparison of the two best models (best − second best by
        online reward), plain and with the Δ-OPE control variate, per world and propensity
        source (means over the logs)."""
        size = size or self.default_world()
        lines = [
            "| world | propensities | difference | interval | 95% coverage | mean CI width "
            "| variance removed |",
            "|---|---|---|---|---|---|---|",
        ]
        for world in self.config.worlds:
            for source in SOURCES:
                mine = [
                    c
                    for c in self.comparisons
                    if c["world"] == world
                    and c["source"] == source
                    and (c["users"], c["items"]) == tuple(size)
                ]
                for label, key in (("paired", "plain"), ("paired, Δ-OPE control variate", "cv")):
                    removed = (
                        np.mean([c["variance_removed"] for c in mine]) if key == "cv" else None
                    )
                    lines.append(
                        f"| {world} | {source} | {mine[0]['difference']} | {label} | "
                        f"{np.mean([c[f'{key}_covered'] for c in mine]):.0%} | "
                        f"{np.mean([c[f'{key}_width'] for c in mine]):.4f} | "
                        f"{'—' if removed is None else f'{removed:.1%}'} |"
                    )
        return "\n".join(lines)

    def dr_verdict(self) -> str:
        """DR against IPS with the same estimated propensities, per world (default size): with
        the calibrated reward model (unclipped and clipped) and with the true relevance."""
        size, lines = self.default_world(), []
        fixed = f"m={self.config.fixed_clip:g}"
        for world in self.config.worlds:
            rows = {r["configuration"]: r for r in self.select(world, size)}
            for source in ("popularity", "power-law"):
                pairs = [
                    (
                        label,
                        "calibrated EASE",
                        f"DR-DCG ({source} p, {label})",
                        f"IPS-DCG ({source} p, {label})",
                    )
                    for label in ("unclipped", fixed)
                ]
                pairs.append(
                    (
                        "unclipped",
                        "true relevance",
                        f"DR-DCG ({source} p, unclipped, oracle ρ)",
                        f"IPS-DCG ({source} p, unclipped)",
                    )
                )
                for label, reward, dr_name, ips_name in pairs:
                    dr, ips = rows.get(dr_name), rows.get(ips_name)
                    if dr is None or ips is None:
                        continue
                    cells = [
                        f"{dr[k]:{f}} vs {ips[k]:{f}}"
                        for k, f in (
                            ("kendall", ".3f"),
                            ("regret", ".1%"),
                            ("coverage", ".0%"),
                            ("rel_rmse", ".1%"),
                        )
                    ]
                    lines.append(
                        f"| {world} | {source}, {label} | {reward} | " + " | ".join(cells) + " |"
                    )
        head = [
            "| world | estimated propensities | DR's reward model | τ (DR vs IPS) | regret | "
            "95% coverage | rel. RMSE |",
            "|---|---|---|---|---|---|---|",
        ]
        return "\n".join(head + lines)

    def goal(self) -> str:
        """Whether the issue's goals hold: a configuration with estimated propensities reaching
        τ ≥ 0.9 and regret ≤ 1 % in the default world, and a warning wherever τ < 0.8."""
        size = self.default_world()
        estimated = [
            r for r in self.select("pbm", size) if r["source"] in ("popularity", "power-law")
        ]
        good = [r for r in estimated if r["kendall"] >= GOAL_KENDALL and r["regret"] <= GOAL_REGRET]
        lines = []
        if not estimated:
            lines.append("Goal not assessed: the study did not include the pbm world.")
        elif good:
            best = max(good, key=lambda r: r["kendall"])
            lines.append(
                f"Goal met in the default world ({size[0]}×{size[1]}, pbm): {len(good)} "
                f"configurations with estimated propensities reach τ ≥ {GOAL_KENDALL} and regret "
                f"≤ {GOAL_REGRET:.0%}; best {best['configuration']} (τ = {best['kendall']:.3f}, "
                f"regret {best['regret']:.1%})."
            )
        else:
            best = max(estimated, key=lambda r: (r["kendall"], -r["regret"]))
            lines.append(
                f"Goal NOT met in the default world ({size[0]}×{size[1]}, pbm): the best "
                f"configuration with estimated propensities is {best['configuration']} with "
                f"τ = {best['kendall']:.3f} and regret {best['regret']:.1%}."
            )
        weighted = [r for r in self.runs if r["source"] is not None]
        low = [r for r in weighted if r["kendall"] < WARN_KENDALL]
        silent = [r for r in low if not r["warned"]]
        lines.append(
            f"Of {len(weighted)} weighted runs, {len(low)} had τ < {WARN_KENDALL}; the warning "
            f"fired in {len(low) - len(silent)} of them"
            + (
                "."
                if not silent
                else f" and stayed silent in {len(silent)} (in "
                f"{', '.join(sorted({r['world'] for r in silent}))} worlds: "
                f"{', '.join(sorted({r['configuration'] for r in silent})[:6])}"
                f"{' …' if len({r['configuration'] for r in silent}) > 6 else ''})."
            )
        )
        return "\n".join(lines)


def run_reliability(
    config: ReliabilityConfig | None = None, *, progress: bool = True
) -> ReliabilityResult:
    """Run the study: per world size and world, train the pool once, then evaluate every
    configuration on ``n_seeds`` held-out logs against the exact online rewards.

    Parameters
    ----------
    config : ReliabilityConfig, optional
        Study settings; defaults to ``ReliabilityConfig()``.
    progress : bool
        Show a progress bar over (size, world, seed).

    Returns
    -------
    ReliabilityResult
    """
    config = config or ReliabilityConfig()
    start = time.perf_counter()
    configs = configurations(config.fixed_clip)
    pool = model_pool()
    discount = LogDiscount(config.cutoff)
    runs, examples, comparisons = [], {}, []
    total = len(config.sizes) * len(config.worlds) * config.n_seeds
    bar = tqdm(total=total, desc="reliability", disable=not progress)
    for users, items in config.sizes:
        for world_name in config.worlds:
            world = SimulatedWorld(
                n_users=users,
                n_items=items,
                seed=config.seed,
                click_model="cascade" if world_name == "cascade" else "pbm",
            )
            policy = (
                PersonalisedPolicy(temperature=config.temperature)
                if world_name == "personalised"
                else PopularityPolicy(temperature=config.temperature)
            )
            train = world.log(
                policy, feed_length=config.feed_length, n_feeds=config.train_feeds, seed=1
            ).clicks.sign()
            rankings = [
                TopK.from_scores(model.fit(train).predict(train), config.cutoff)
                for _, model in pool
            ]
            online = np.array([world.online_reward(r, discount).value for r in rankings])
            fitted = {
                "popularity": PopularityPropensity().fit(train),
                "power-law": PowerLawPropensity().fit(train),
            }
            reward_model = practitioners_reward_model(train, fitted["power-law"])
            best_two = np.argsort(-online)[:2]
            for seed in range(config.n_seeds):
                bar.set_postfix_str(f"{users}×{items} {world_name} seed {seed}")
                log = world.log(policy, feed_length=config.feed_length, n_feeds=1, seed=100 + seed)
                held_out, impressions = log.clicks, log.impressions()
                # The true exposure at every held-out and impression entry.
                sources = {**fitted, "true": log.propensity_matrix(held_out + impressions)}
                data = _HeldOut(
                    held_out,
                    impressions,
                    {"calibrated": reward_model, "oracle": world.reward_model()},
                )
                for c in configs:
                    run = _evaluate(c, data, rankings, sources, discount, users)
                    runs.append(_run_record(c, run, online, users, items, world_name, seed))
                    if seed == 0 and c.clip == "auto" and c.estimator == "IPS-DCG":
                        examples[(users, items, world_name, c.source)] = run.clips[-1]
                for source in SOURCES:
                    comparisons.append(
                        {
                            "users": users,
                            "items": items,
                            "world": world_name,
                            "seed": seed,
                            "source": source,
                            "difference": f"{pool[best_two[0]][0]} − {pool[best_two[1]][0]}",
                            **_paired(
                                data,
                                [rankings[k] for k in best_two],
                                sources[source],
                                discount,
                                online[best_two[0]] - online[best_two[1]],
                            ),
                        }
                    )
                bar.update()
    bar.close()
    rows = _aggregate(runs, configs, config)
    return ReliabilityResult(
        config,
        [name for name, _ in pool],
        rows,
        runs,
        examples,
        time.perf_counter() - start,
        comparisons,
    )


@dataclass(frozen=True)
class _HeldOut:
    """One held-out log: clicks, impressions, and the study's reward models by kind."""

    clicks: object
    impressions: object
    reward_models: dict


def practitioners_reward_model(train, propensity):
    """A reward model for DR-DCG built from training data only: EASE(l2=200)'s training-period
    scores, Platt-calibrated on the training clicks with the power-law propensities: the reward
    model a practitioner could build (module docstring)."""
    scores = EASE(l2=200.0).fit(train).predict(train)
    return ScoreCalibration().fit(scores, train, propensity=propensity).reward_model(scores)


def paired_with_control(
    clicks, impressions, rankings, propensity, discount
) -> tuple[Comparison, Comparison]:
    """IPS-DCG with impressions of two models (``rankings``), compared plainly and with the
    Δ-OPE control variate: (plain, with control variate)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        a, b = (
            ips_dcg(clicks, r, discount=discount, propensity=propensity, impressions=impressions)
            for r in rankings
        )
    return a.compare(b), a.compare(b, control_variate=True)


def _paired(data: _HeldOut, rankings, propensity, discount, truth: float) -> dict:
    """Coverage of ``truth`` and interval widths of :func:`paired_with_control`."""
    out = {}
    comparisons = paired_with_control(data.clicks, data.impressions, rankings, propensity, discount)
    for key, comparison in zip(("plain", "cv"), comparisons, strict=True):
        lo, hi = comparison.confidence_interval
        out[f"{key}_covered"] = bool(lo <= truth <= hi)
        out[f"{key}_width"] = hi - lo
        if key == "cv":
            out["variance_removed"] = comparison.variance_reduction
    return out


def _evaluate(c: Configuration, data: _HeldOut, rankings, sources, discount, n_users) -> _Run:
    """One configuration over the pool on one held-out log."""
    held_out = data.clicks
    kwargs = {} if c.source is None else {"propensity": sources[c.source], "clip": c.clip}
    if c.estimator == "DR-DCG":
        kwargs.update(reward_model=data.reward_models[c.reward], impressions=data.impressions)
    estimator: Callable[..., EstimateResult] = {
        "DCG": dcg,
        "nDCG": ndcg,
        "pnDCG": pn_dcg,
        "IPS-DCG": ips_dcg,
        "SNIPS-DCG": snips_dcg,
        "DR-DCG": dr_dcg,
    }[c.estimator]
    values, low, high, ess, clips = [], [], [], [], []
    warned = False
    for ranking in rankings:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ReliabilityWarning)
            result = estimator(held_out, ranking, discount=discount, **kwargs)
        warned |= any(issubclass(w.category, ReliabilityWarning) for w in caught)
        if c.estimates_reward:
            result = over_all_users(result, n_users)
        values.append(result.value)
        lo, hi = result.confidence_interval(0.95)
        low.append(lo)
        high.append(hi)
        if result.diagnostics is not None:
            ess.append(result.diagnostics.ess_ratio)
        clips.append(result.clip_selection)
    return _Run(
        np.array(values),
        np.array(low),
        np.array(high),
        min(ess) if ess else math.nan,
        warned,
        clips,
    )


def _run_record(c: Configuration, run: _Run, online, users, items, world, seed) -> dict:
    a = agreement(online, run.values)
    pick = int(np.argmax(run.values))
    relative = (
        (run.values - online) / online if c.estimates_reward else np.full(online.size, np.nan)
    )
    covered = (run.low <= online) & (online <= run.high)
    chosen = [s.clip if s.clip is not None else math.inf for s in run.clips if s is not None]
    return {
        "users": users,
        "items": items,
        "world": world,
        "seed": seed,
        "configuration": c.name,
        "estimator": c.estimator,
        "source": c.source,
        "clip": "none" if c.clip is None else c.clip,
        "kendall": a.kendall,
        "regret": float(1 - online[pick] / online.max()),
        "picked": pick,
        "rel_bias": float(np.mean(relative)),
        "rel_mse": float(np.mean(relative**2)),
        "coverage": float(np.mean(covered)) if c.estimates_reward else math.nan,
        "min_ess_ratio": run.min_ess_ratio,
        "warned": run.warned,
        "median_auto_clip": float(np.median(chosen)) if chosen else math.nan,
    }


def _aggregate(
    runs: list[dict], configs: list[Configuration], config: ReliabilityConfig
) -> list[dict]:
    rows = []
    for users, items in config.sizes:
        for world in config.worlds:
            for c in configs:
                mine = [
                    r
                    for r in runs
                    if r["configuration"] == c.name
                    and r["world"] == world
                    and (r["users"], r["items"]) == (users, items)
                ]

                def mean(key, mine=mine):
                    return float(np.mean([r[key] for r in mine]))

                rows.append(
                    {
                        "users": users,
                        "items": items,
                        "world": world,
                        "configuration": c.name,
                        "estimator": c.estimator,
                        "source": c.source,
                        "clip": "none" if c.clip is None else c.clip,
                        "kendall": mean("kendall"),
                        "regret": mean("regret"),
                        "rel_bias": mean("rel_bias"),
                        "rel_rmse": math.sqrt(mean("rel_mse")),
                        "coverage": mean("coverage"),
                        "min_ess_ratio": float(np.median([r["min_ess_ratio"] for r in mine])),
                        "warned": mean("warned"),
                        "median_auto_clip": float(np.median([r["median_auto_clip"] for r in mine])),
                        "n_runs": len(mine),
                    }
                )
    return rows


def write_report(result: ReliabilityResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``results.csv`` (per configuration), ``runs.csv`` (per held-out log),
    ``summary.md`` and, with matplotlib, ``kendall.png``, ``ess_vs_kendall.png`` and
    ``auto_clip.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tables = [
        ("results.csv", result.rows),
        ("runs.csv", result.runs),
        ("comparisons.csv", result.comparisons),
    ]
    for name, records in (t for t in tables if t[1]):
        with open(folder / name, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    plt = pyplot(plots)
    if plt is not None:
        _plot_kendall(result, folder, plt)
        _plot_ess(result, folder, plt)
        _plot_auto_clip(result, folder, plt)
    cfg = result.config
    lines = [
        "# Reliability of offline estimates against exact online reward",
        "",
        f"{cfg.n_seeds} held-out logs per world; worlds {', '.join(cfg.worlds)}; sizes "
        f"{', '.join(f'{u}×{i}' for u, i in cfg.sizes)}; {len(result.models)} models "
        f"({', '.join(result.models)}); cutoff {cfg.cutoff}; ESS/n warning threshold "
        f"{ESS_RATIO_THRESHOLD:g}; {result.seconds:.0f} s.",
        "",
        result.goal(),
        "",
        "## Doubly robust against IPS, with estimated propensities",
        "",
        f"DR-DCG with the held-out impressions and a calibrated EASE reward model against IPS-DCG, "
        f"{result.default_world()[0]}×{result.default_world()[1]}:",
        "",
        result.dr_verdict(),
        "",
        "## Paired comparison of the two best models (IPS-DCG with impressions)",
        "",
        result.comparison_table(),
    ]
    for users, items in cfg.sizes:
        for world in cfg.worlds:
            lines += [
                "",
                f"## {world} world, {users} users × {items} items",
                "",
                result.table(world, (users, items)),
            ]
    lines += ["", "Per configuration: `results.csv`; per held-out log: `runs.csv`."]
    if plt is not None:
        lines += [
            "",
            "![Kendall τ](kendall.png)",
            "",
            "![ESS/n vs τ](ess_vs_kendall.png)",
            "",
            "![auto clipping](auto_clip.png)",
        ]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _plot_kendall(result: ReliabilityResult, folder: Path, plt) -> None:
    size = result.default_world()
    worlds = result.config.worlds
    fig, axes = plt.subplots(
        1, len(worlds), figsize=(5 * len(worlds), 8), sharey=True, squeeze=False
    )
    for ax, world in zip(axes[0], worlds, strict=True):
        rows = result.select(world, size)
        y = np.arange(len(rows))
        colours = [
            "0.6" if r["source"] is None else ("C3" if r["warned"] >= 0.5 else "C0") for r in rows
        ]
        ax.barh(y, [r["kendall"] for r in rows], color=colours)
        ax.axvline(WARN_KENDALL, color="k", lw=0.8, ls="--")
        ax.set_yticks(y, [r["configuration"] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(-1, 1)
        ax.set_xlabel("mean Kendall τ with online reward")
        ax.set_title(f"{world} ({size[0]}×{size[1]}); red: warned in most logs", fontsize=9)
    save(fig, folder / "kendall.png", dpi=100)


def _plot_ess(result: ReliabilityResult, folder: Path, plt) -> None:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for k, world in enumerate(result.config.worlds):
        runs = [r for r in result.runs if r["world"] == world and r["source"] is not None]
        ax.scatter(
            [r["min_ess_ratio"] for r in runs],
            [r["kendall"] for r in runs],
            s=6,
            alpha=0.4,
            color=f"C{k}",
            label=world,
        )
    ax.axvline(ESS_RATIO_THRESHOLD, color="k", lw=0.8, ls="--", label="warning threshold")
    ax.axhline(WARN_KENDALL, color="0.4", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("smallest ESS/n over the pool (one held-out log)")
    ax.set_ylabel("Kendall τ with online reward")
    ax.legend(fontsize=8)
    save(fig, folder / "ess_vs_kendall.png", dpi=110)


def _plot_auto_clip(result: ReliabilityResult, folder: Path, plt) -> None:
    # The default world with the assumptions met, one panel per propensity source.
    size = result.default_world()
    shown = [
        (key, s)
        for key, s in result.examples.items()
        if s is not None and key[:3] == (*size, "pbm")
    ]
    if not shown:
        return
    fig, axes = plt.subplots(1, len(shown), figsize=(4.5 * len(shown), 3.5), squeeze=False)
    for ax, ((users, items, world, source), selection) in zip(axes[0], shown, strict=True):
        selection.plot(ax, title=f"{world} {users}×{items}, {source} p")
    save(fig, folder / "auto_clip.png", dpi=100)
