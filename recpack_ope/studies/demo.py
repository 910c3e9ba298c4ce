"""The main job: which offline metric would have picked the model that wins online?

On a :class:`~recpack_ope.simulation.SimulatedWorld` that satisfies the assumptions of Jeunen
et al. (KDD'24, §4), a popularity-biased Plackett–Luce policy logs a training period and a
held-out period. A pool of recommenders is trained on the training clicks; every metric of the
package evaluates each model on the held-out clicks, and the world gives each model's exact
online reward. Per metric the demo reports Kendall's τ and Pearson's r with the online
reward, the probability of inverting a pair of models relative to it, and whether the metric
picks the online winner.

Run it with ``recpack-ope demo`` (see ``recpack-ope demo --help``) or :func:`run_demo`.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._plots import emptiest_corner, padded_limits, pyplot, save
from ..inference.agreement import agreement, steiger_test
from ..inference.diagnostics import ESS_MIN, ESS_RATIO_THRESHOLD, ReliabilityWarning
from ..inference.result import EstimateResult
from ..inference.sensitivity import SHOWN_GAMMA
from ..metrics.dcg import dcg, ips_dcg, ips_ndcg, ips_pn_dcg, ndcg, pn_dcg, snips_dcg
from ..metrics.doubly_robust import dr_dcg
from ..metrics.ranking import TopK
from ..propensity.discount import LogDiscount
from ..propensity.weights import VERDICT_CLIP
from ..simulation.world import PopularityPolicy, SimulatedWorld
from . import progress_bar, quiet_frameworks
from .reliability import paired_with_control, practitioners_reward_model

__all__ = [
    "DemoConfig",
    "DemoResult",
    "MetricSummary",
    "model_family",
    "model_pool",
    "run_demo",
    "scatter_panel",
    "write_report",
]

KNN_GRID = (5, 10, 25, 50, 100, 200, 400)
EASE_GRID = (1.0, 5.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 20000.0)
# The reference metric: unbiased under the world's assumptions (Eq. 11 with true exposure).
REFERENCE = "IPS-DCG (true p)"
# The reliability study's recommended procedure with estimated propensities: power-law IPS-DCG
# clipped at VERDICT_CLIP, a verdict trusted when its Γ* reaches SHOWN_GAMMA.
RECOMMENDED = f"IPS-DCG (power-law p, m={VERDICT_CLIP:g})"
# The metrics that ignore exposure; the closing line compares their inversions.
UNWEIGHTED = ("DCG", "nDCG", "pnDCG")
# Plot colour of each model family, in legend order; see model_family.
FAMILY_COLOURS = {
    "EASE": "tab:blue",
    "ItemKNN": "tab:green",
    "popularity": "tab:orange",
    "random": "tab:gray",
}
# Families drawn only in a scatter plot's inset: random recommendations earn a fraction of
# every trained model's reward and would squeeze the others into a corner.
INSET_FAMILIES = frozenset({"random"})
PICK_LABEL = "offline pick (metric's top model)"
WINNER_LABEL = "online winner"
# Marker styles of the two marks; the pick's ring is drawn over the winner's star, as the
# two often coincide.
PICK_STYLE = {"ls": "", "marker": "o", "mfc": "none", "mec": "black", "mew": 1.4, "zorder": 5}
WINNER_STYLE = {"ls": "", "marker": "*", "color": "red", "mec": "darkred", "zorder": 4}


def model_family(name: str) -> str:
    """The family of a demo model: its name up to the parameters, e.g. ``"EASE(l2=50)"`` →
    ``"EASE"``; one of ``FAMILY_COLOURS``.

    Parameters
    ----------
    name : str
        A model name of :func:`model_pool` (either backend).

    Returns
    -------
    str
    """
    family = name.split("(", 1)[0]
    if family not in FAMILY_COLOURS:
        raise ValueError(
            f"name must be a demo model of family {', '.join(FAMILY_COLOURS)} (parameters in "
            f"parentheses), got {name!r}"
        )
    return family


def _join(items) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True)
class DemoConfig:
    """Settings of the demo world and evaluation (the defaults run in about 30 s on 2 cores)."""

    n_users: int = 20000
    n_items: int = 2000
    feed_length: int = 50
    train_feeds: int = 5
    cutoff: int = 10
    temperature: float = 1.0
    seed: int = 0
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "numpy", "recpack"):
            raise ValueError(f"backend must be 'auto', 'numpy' or 'recpack', got {self.backend!r}")


@dataclass(frozen=True)
class MetricSummary:
    """How one offline metric tracks the online reward over the model pool.

    ``regret`` is the online reward lost by deploying the metric's pick instead of the online
    winner, relative to the winner's reward. ``ess_ratio`` is the smallest effective-sample-size
    ratio of the metric's IPS weights over the pool (NaN for unweighted metrics) and
    ``reliable`` whether it reaches the reliability threshold. ``verdict_p`` is the p-value
    of the paired comparison of the metric's pick with its runner-up, and ``verdict_gamma``
    that verdict's robustness Γ* (:meth:`~recpack_ope.inference.result.Comparison.robustness`;
    NaN for unweighted metrics).
    """

    metric: str
    kendall: float
    pearson: float
    p_inversion: float
    picks_winner: bool
    picked: str
    regret: float
    ess_ratio: float = math.nan
    reliable: bool = True
    verdict_p: float = math.nan
    verdict_gamma: float = math.nan


@dataclass(frozen=True, eq=False)
class DemoResult:
    """Everything the demo measured; :func:`write_report` turns it into files.

    ``values[metric][m]`` is model m's offline estimate and ``half_widths[metric][m]`` the
    half-width of its 95 % confidence interval over users; ``seconds`` is how long
    :func:`run_demo` took.
    """

    config: DemoConfig
    backend: str
    models: list[str]
    online: np.ndarray
    values: dict[str, np.ndarray]
    half_widths: dict[str, np.ndarray]
    summaries: list[MetricSummary]
    facts: dict[str, float | str] = field(default_factory=dict)
    seconds: float = math.nan

    def winner(self) -> str:
        """The model with the highest online reward."""
        return self.models[int(np.argmax(self.online))]

    def _agreement_signs(self, metric: str) -> np.ndarray:
        """+1 where ``metric`` orders model pair (j, k), j < k, as the online reward does, −1
        where it inverts it, 0 on ties and for j ≥ k."""
        if metric not in self.values:
            raise ValueError(f"metric must be one of {list(self.values)}, got {metric!r}")
        v = self.values[metric]
        truth = np.sign(self.online[:, None] - self.online[None, :])
        return np.triu(np.sign(v[:, None] - v[None, :]) * truth, 1)

    def inverted_pairs(self, metric: str) -> frozenset[tuple[int, int]]:
        """Model pairs ``(j, k)``, j < k, that ``metric`` orders opposite to the online reward
        (pairs tied under either are not inversions)."""
        j, k = np.nonzero(self._agreement_signs(metric) < 0)
        return frozenset(zip(j.tolist(), k.tolist(), strict=True))

    def inverted_but_reference_right(self, metric: str) -> int:
        """Pairs ``metric`` orders opposite to the online reward while IPS-DCG orders right."""
        wrong = self._agreement_signs(metric) < 0
        return int(np.count_nonzero(wrong & (self._agreement_signs(REFERENCE) > 0)))

    def inversion_note(
        self, metrics: tuple[str, ...] = UNWEIGHTED, reference: str = REFERENCE
    ) -> str:
        """One line: how many model pairs each of ``metrics`` inverts, whether they are the same
        pairs, and how many of them ``reference`` orders right.

        Parameters
        ----------
        metrics : tuple of str
            Metrics to compare (at least two); by default those that ignore exposure.
        reference : str
            The metric that should order the inverted pairs right.

        Returns
        -------
        str
        """
        if len(metrics) < 2:
            raise ValueError(f"metrics must name at least two metrics, got {metrics!r}")
        pairs = {m: self.inverted_pairs(m) for m in metrics}
        union = frozenset().union(*pairs.values())
        shared = frozenset.intersection(*pairs.values())
        n_pairs = len(self.models) * (len(self.models) - 1) // 2
        reference_signs = self._agreement_signs(reference)
        right = sum(int(reference_signs[j, k] > 0) for j, k in union)
        names = _join(metrics)
        if len(shared) == len(union):
            return (
                f"{names} each invert the same {len(union)} of {n_pairs} model pairs; "
                f"{reference} orders {right} of them right."
            )
        groups: dict[frozenset, list[str]] = {}
        for m in metrics:
            groups.setdefault(pairs[m], []).append(m)
        same = [_join(group) for group in groups.values() if len(group) > 1]
        return (
            f"{names} invert {_join([str(len(pairs[m])) for m in metrics])} of {n_pairs} model "
            f"pairs: {len(shared)} inverted by all, {len(union)} by any"
            + "".join(f" ({g} invert identical pairs)" for g in same)
            + f"; {reference} orders {right} of the {len(union)} right."
        )

    def correlation_note(self, gap: float = 0.2) -> str:
        """One line on why Kendall's τ and Pearson's r disagree, for the metric where they
        differ most.

        Pearson's covariance is a sum over model pairs of the product of their differences, so
        pairs far apart weigh most and one far-off model can set r; Kendall's τ counts every
        pair in order alike. When removing one model halves the gap between τ and r, the line
        names that model; otherwise it contrasts the inversion rate of the pairs far apart in
        online reward (above the median distance) with that of the close pairs.

        Parameters
        ----------
        gap : float
            Smallest |τ − r| worth explaining.

        Returns
        -------
        str
        """
        if not gap > 0:
            raise ValueError(f"gap must be positive, got {gap!r}")
        s = max(self.summaries, key=lambda s: abs(s.kendall - s.pearson))
        head = "Kendall vs Pearson: "
        if abs(s.kendall - s.pearson) < gap:
            return head + f"τ and r differ by less than {gap:g} for every metric."
        v = self.values[s.metric]
        # Leave each model out in turn: the one whose removal moves r most.
        without = [agreement(np.delete(self.online, m), np.delete(v, m)) for m in range(v.size)]
        m = int(np.argmax([abs(a.pearson - s.pearson) for a in without]))
        rest = without[m]
        head += f"{s.metric} has τ {s.kendall:.2f} but r {s.pearson:.2f}"
        if abs(rest.kendall - rest.pearson) <= abs(s.kendall - s.pearson) / 2:
            return head + (
                f" because Pearson weighs each pair of models by how far apart their values are "
                f"and the pairs with {self.models[m]}, far from the rest, dominate (without it "
                f"τ {rest.kendall:.2f}, r {rest.pearson:.2f}); Kendall counts every pair alike."
            )
        signs = self._agreement_signs(s.metric)
        j, k = np.triu_indices(v.size, 1)
        distance = np.abs(self.online[j] - self.online[k])
        far = distance > np.median(distance)
        return head + (
            f" and no single model explains it: it inverts {np.mean(signs[j, k][far] < 0):.0%} "
            f"of the pairs far apart online and {np.mean(signs[j, k][~far] < 0):.0%} of the "
            "close ones; Pearson weighs pairs by how far apart their values are, Kendall counts "
            "every pair alike."
        )

    def table(self) -> str:
        """The per-metric summary as an aligned text table."""
        width = max(len(s.metric) for s in self.summaries)
        lines = [
            f"{'metric':<{width}}  {'Kendall τ':>9}  {'Pearson r':>9}  {'P(invert)':>9}  "
            f"{'regret':>7}  {'ESS/n':>7}  {'pick vs 2nd: p, Γ*':>20}  picks online winner",
            "-" * (width + 101),
        ]
        for s in self.summaries:
            mark = "yes" if s.picks_winner else f"no ({s.picked})"
            ess = (
                "—"
                if math.isnan(s.ess_ratio)
                else f"{s.ess_ratio:.1%}" + ("" if s.reliable else "!")
            )
            verdict = f"{s.verdict_p:.2g}, " + (
                "—" if math.isnan(s.verdict_gamma) else f"{s.verdict_gamma:.3g}"
            )
            lines.append(
                f"{s.metric:<{width}}  {s.kendall:>9.3f}  {s.pearson:>9.3f}  "
                f"{s.p_inversion:>9.3f}  {s.regret:>7.1%}  {ess:>7}  {verdict:>20}  {mark}"
            )
        if not all(s.reliable for s in self.summaries):
            lines.append(
                "! a reliability criterion fired for some model (ESS/n below "
                f"{ESS_RATIO_THRESHOLD:g}, ESS below {ESS_MIN:g}, or few users carrying half "
                "the estimate): a few interactions decide its values (ReliabilityWarning)"
            )
        lines += [
            f"Recommended with estimated propensities ({RECOMMENDED}, docs/reliability.md): "
            f"trust a significant verdict only when its Γ* is at least {SHOWN_GAMMA:g}, the "
            "factor by which every propensity may be off before the verdict can flip.",
            self.correlation_note(),
            self.inversion_note(),
        ]
        return "\n".join(lines)


def model_pool(backend: str = "auto", n_items: int = 1000) -> tuple[str, list[tuple[str, object]]]:
    """The pool of recommenders: random, popularity, item-kNN and EASE grids (20 models).

    ``n_items`` is the catalogue size (RecPack's random and popularity models need it).

    ``backend="auto"`` uses RecPack's algorithms when RecPack is installed, the package's own
    closed forms (:mod:`recpack_ope.simulation.baselines`) otherwise. Returns
    ``(backend used, pool)``.
    """
    if backend == "auto":
        backend = "recpack" if importlib.util.find_spec("recpack") else "numpy"
    if backend == "recpack":
        from .recpack_models import recpack_pool

        return backend, recpack_pool(KNN_GRID, EASE_GRID, n_items)
    # imported on use: start-up time (docs/performance.md)
    from ..simulation.baselines import EASE, ItemKNN, Popularity, RandomScores

    pool = [("random", RandomScores(seed=0)), ("popularity", Popularity())]
    pool += [(f"ItemKNN(k={k})", ItemKNN(k=k)) for k in KNN_GRID]
    pool += [(f"EASE(l2={l2:g})", EASE(l2=l2)) for l2 in EASE_GRID]
    return backend, pool


def _metrics(held_out, train, log, cutoff: int) -> dict[str, Callable[[TopK], EstimateResult]]:
    """Every offline metric of the package, as functions of a model's top-k ranking; the
    doubly robust ones read the held-out log's impressions and a reward model calibrated on
    the training clicks (:func:`recpack_ope.studies.reliability.practitioners_reward_model`)."""
    # imported on use: start-up time (docs/performance.md)
    from ..propensity.models import PopularityPropensity, PowerLawPropensity

    disc = LogDiscount(cutoff)
    true_p = log.propensity_model()
    power_p = PowerLawPropensity().fit(train)
    popularity_p = PopularityPropensity().fit(train)
    impressions = log.impressions()
    reward_model = practitioners_reward_model(train, power_p)
    return {
        "DCG": lambda r: dcg(held_out, r, discount=disc),
        "nDCG": lambda r: ndcg(held_out, r, discount=disc),
        "pnDCG": lambda r: pn_dcg(held_out, r, discount=disc),
        REFERENCE: lambda r: ips_dcg(held_out, r, discount=disc, propensity=true_p, clip=None),
        "SNIPS-DCG (true p)": lambda r: snips_dcg(
            held_out, r, discount=disc, propensity=true_p, clip=None
        ),
        "IPS-nDCG (true p)": lambda r: ips_ndcg(
            held_out, r, discount=disc, propensity=true_p, clip=None
        ),
        "IPS-pnDCG (true p)": lambda r: ips_pn_dcg(
            held_out, r, discount=disc, propensity=true_p, clip=None
        ),
        "IPS-DCG (power-law p)": lambda r: ips_dcg(
            held_out, r, discount=disc, propensity=power_p, clip=None
        ),
        RECOMMENDED: lambda r: ips_dcg(
            held_out, r, discount=disc, propensity=power_p, clip=VERDICT_CLIP
        ),
        "IPS-DCG (popularity p)": lambda r: ips_dcg(
            held_out, r, discount=disc, propensity=popularity_p, clip=None
        ),
        "DR-DCG (true p)": lambda r: dr_dcg(
            held_out,
            r,
            discount=disc,
            reward_model=reward_model,
            propensity=true_p,
            impressions=impressions,
            clip=None,
        ),
        "DR-DCG (power-law p)": lambda r: dr_dcg(
            held_out,
            r,
            discount=disc,
            reward_model=reward_model,
            propensity=power_p,
            impressions=impressions,
            clip=None,
        ),
    }


def run_demo(
    config: DemoConfig | None = None, *, progress: bool = True, verbose: bool = False
) -> DemoResult:
    """Simulate, train the pool, evaluate every metric and compare with the online truth.

    Parameters
    ----------
    config : DemoConfig, optional
        World and evaluation settings; defaults to ``DemoConfig()``.
    progress : bool
        Show a progress bar while models train and are evaluated.
    verbose : bool
        Let RecPack's logs and third-party warnings through while the models train (the
        ``recpack`` backend); by default :func:`quiet_frameworks` keeps them off the terminal.

    Returns
    -------
    DemoResult
    """
    config = config or DemoConfig()
    start = time.perf_counter()
    world = SimulatedWorld(n_users=config.n_users, n_items=config.n_items, seed=config.seed)
    policy = PopularityPolicy(temperature=config.temperature)
    train_log = world.log(
        policy, feed_length=config.feed_length, n_feeds=config.train_feeds, seed=1
    )
    test_log = world.log(policy, feed_length=config.feed_length, n_feeds=1, seed=2)
    train = train_log.clicks.sign()
    held_out = test_log.clicks
    metrics = _metrics(held_out, train, test_log, config.cutoff)
    disc = LogDiscount(config.cutoff)

    backend, pool = model_pool(config.backend, config.n_items)
    online = np.empty(len(pool))
    values = {name: np.empty(len(pool)) for name in metrics}
    half_widths = {name: np.empty(len(pool)) for name in metrics}
    ess_ratio = {name: math.nan for name in metrics}
    reliable = {name: True for name in metrics}
    rankings = []
    bar = progress_bar(pool, desc="train + evaluate", show=progress)
    for m, (name, model) in enumerate(bar):
        bar.set_postfix_str(name)
        with quiet_frameworks(verbose):
            model.fit(train)
            scores = model.predict(train)
        ranking = TopK.from_scores(scores, config.cutoff)
        rankings.append(ranking)
        online[m] = world.online_reward(ranking, disc).value
        for metric, evaluate in metrics.items():
            with warnings.catch_warnings():
                # The report shows every weighted metric's diagnostics instead of 20 warnings.
                warnings.simplefilter("ignore", ReliabilityWarning)
                estimate = evaluate(ranking)
            if estimate.diagnostics is not None:
                ess_ratio[metric] = np.fmin(ess_ratio[metric], estimate.diagnostics.ess_ratio)
                reliable[metric] &= estimate.diagnostics.reliable
            values[metric][m] = estimate.value
            low, high = estimate.confidence_interval(0.95)
            half_widths[metric][m] = (high - low) / 2

    models = [name for name, _ in pool]
    summaries = []
    best = int(np.argmax(online))
    for metric, v in values.items():
        a = agreement(online, v)
        pick, second = np.argsort(-v, kind="stable")[:2]
        picked = models[pick]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            verdict = metrics[metric](rankings[pick]).compare(metrics[metric](rankings[second]))
        summaries.append(
            MetricSummary(
                metric=metric,
                kendall=a.kendall,
                pearson=a.pearson,
                p_inversion=a.disagreement,
                picks_winner=pick == best,
                picked=picked,
                regret=float(1.0 - online[pick] / online[best]),
                ess_ratio=float(ess_ratio[metric]),
                reliable=reliable[metric],
                verdict_p=verdict.p_value,
                verdict_gamma=_robustness(verdict),
            )
        )
    steiger = steiger_test(online, values[REFERENCE], values["nDCG"], method="kendall")
    # The online winner against the runner-up, by IPS-DCG (true p) over the served users:
    # the plain paired interval and the one with the Δ-OPE control variate.
    first, second = np.argsort(-online)[:2]
    plain, reduced = paired_with_control(
        held_out,
        test_log.impressions(),
        [rankings[first], rankings[second]],
        test_log.propensity_model(),
        disc,
    )
    facts = {
        "train clicks": int(train_log.clicks.sum()),
        "held-out clicks": int(held_out.sum()),
        "users with held-out clicks": int(np.count_nonzero(np.diff(held_out.indptr))),
        "logging exposure min": float(test_log.exposure.min()),
        "logging exposure max": float(test_log.exposure.max()),
        "Steiger z (IPS-DCG vs nDCG, Kendall)": steiger.z,
        "Steiger p": steiger.p_value,
        f"online {models[first]} − {models[second]}": float(online[first] - online[second]),
        f"  IPS-DCG {models[first]} − {models[second]} [95% CI]": _interval(plain),
        "  with the Δ-OPE control variate": _interval(reduced),
        "  variance removed by the control variate": f"{reduced.variance_reduction:.1%}",
    }
    return DemoResult(
        config,
        backend,
        models,
        online,
        values,
        half_widths,
        summaries,
        facts,
        time.perf_counter() - start,
    )


def _robustness(comparison) -> float:
    """Γ* of a comparison's sign, NaN when its estimates are not weighted."""
    if any(getattr(e, "weighting", None) is None for e in comparison.estimates):
        return math.nan
    return comparison.robustness()


def _interval(comparison) -> str:
    lo, hi = comparison.confidence_interval
    return f"{comparison.difference:.4g} [{lo:.4g}, {hi:.4g}]"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


def write_report(result: DemoResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``models.csv``, ``metrics.csv``, ``summary.md`` and scatter plots to ``folder``.

    Plots need matplotlib (the ``plot`` extra); without it they are skipped with a note in
    the summary.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    metric_names = list(result.values)
    with open(folder / "models.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["model", "online reward", *(c for k in metric_names for c in (k, f"{k} ±95%"))]
        )
        for m, model in enumerate(result.models):
            cells = (
                c for k in metric_names for c in (result.values[k][m], result.half_widths[k][m])
            )
            writer.writerow([model, result.online[m], *cells])
    with open(folder / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(result.summaries[0])))
        writer.writeheader()
        writer.writerows(asdict(s) for s in result.summaries)

    plt = pyplot(plots)
    made_plots = plt is not None
    if made_plots:
        _scatter_plots(result, folder, plt)
    cfg = result.config
    lines = [
        "# recpack-ope demo: which offline metric tracks online reward?",
        "",
        f"World: {cfg.n_users} users × {cfg.n_items} items (seed {cfg.seed}); logging policy "
        f"Plackett–Luce over popularity, temperature {cfg.temperature}; feeds of "
        f"{cfg.feed_length} items with log-discount views; {cfg.train_feeds} training feeds and "
        f"1 held-out feed per user. Metrics at cutoff {cfg.cutoff}; {len(result.models)} models "
        f"({result.backend} backend). Online winner: **{result.winner()}**.",
        "",
        "| metric | Kendall τ | Pearson r | P(invert a pair) | picks winner | regret of pick | "
        "pairs inverted that IPS-DCG (true p) orders right |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in result.summaries:
        lines.append(
            f"| {s.metric} | {s.kendall:.3f} | {s.pearson:.3f} | {s.p_inversion:.3f} | "
            f"{'yes' if s.picks_winner else 'no: ' + s.picked} | {s.regret:.1%} | "
            f"{result.inverted_but_reference_right(s.metric)} |"
        )
    lines += ["", result.correlation_note(), "", result.inversion_note()]
    lines += ["", "| fact | value |", "|---|---|"]
    lines += [
        f"| {k} | {v if isinstance(v, str) else f'{v:.6g}'} |" for k, v in result.facts.items()
    ]
    lines += ["", "Per-model values: `models.csv`; per-metric statistics: `metrics.csv`."]
    if made_plots:
        lines += ["", "![offline vs online](scatter_all.png)"]
    else:
        lines += [
            "",
            "Scatter plots skipped: install matplotlib (in a clone of recpack-ope: "
            '`pip install ".[plot]"`).',
        ]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def scatter_panel(result: DemoResult, metric: str, ax) -> None:
    """Draw ``metric`` against the online reward on ``ax``.

    Models are coloured by :func:`model_family`, with their 95 % intervals; the metric's pick
    (the model the table names) is ringed and the online winner starred. Models of
    ``INSET_FAMILIES`` are left out of the main axes, whose limits span the other models
    only, and drawn in an inset that shows every model, in the corner holding fewest points.

    Parameters
    ----------
    result : DemoResult
    metric : str
        One of ``result.values``.
    ax : matplotlib.axes.Axes
    """
    if metric not in result.values:
        raise ValueError(f"metric must be one of {list(result.values)}, got {metric!r}")
    summary = next(s for s in result.summaries if s.metric == metric)
    x, y, err = result.values[metric], result.online, result.half_widths[metric]
    families = np.array([model_family(m) for m in result.models])
    main = ~np.isin(families, list(INSET_FAMILIES))
    marks = (result.models.index(summary.picked), result.models.index(result.winner()))
    for family, colour in FAMILY_COLOURS.items():
        rows = main & (families == family)
        if rows.any():
            ax.errorbar(
                x[rows],
                y[rows],
                xerr=err[rows],
                fmt="o",
                ms=4,
                elinewidth=0.8,
                color=colour,
                label=family,
            )
    _mark(ax, x, y, marks, main, size=12)
    xlim, ylim = padded_limits(x[main]), padded_limits(y[main])
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)
    ax.set_xlabel(f"{metric}@{result.config.cutoff} (offline)")
    ax.set_ylabel("online reward")
    ax.set_title(
        f"{metric}\nτ={summary.kendall:.2f}  r={summary.pearson:.2f}  pick: {summary.picked}",
        fontsize=9,
    )
    if main.all():
        return
    size = 0.34
    corner = emptiest_corner(
        (x[main] - xlim[0]) / (xlim[1] - xlim[0]), (y[main] - ylim[0]) / (ylim[1] - ylim[0]), size
    )
    inset = ax.inset_axes([*corner, size, size])
    for family, colour in FAMILY_COLOURS.items():
        rows = families == family
        if rows.any():
            inset.plot(x[rows], y[rows], "o", ms=2.5, color=colour, label=family)
    _mark(inset, x, y, marks, np.ones_like(main), size=6)
    # The main axes' view, so the reader sees how far the inset models lie from it.
    inset.plot(
        [xlim[0], xlim[1], xlim[1], xlim[0], xlim[0]],
        [ylim[0], ylim[0], ylim[1], ylim[1], ylim[0]],
        "--",
        color="0.4",
        lw=0.6,
    )
    inset.tick_params(labelsize=5, length=2, pad=1)
    inset.locator_params(nbins=3)


def _mark(ax, x, y, marks: tuple[int, int], shown: np.ndarray, size: float) -> None:
    """Star the online winner and ring the metric's pick where ``shown``."""
    pick, best = marks
    if shown[best]:
        ax.plot(x[best], y[best], ms=size, label=WINNER_LABEL, **WINNER_STYLE)
    if shown[pick]:
        ax.plot(x[pick], y[pick], ms=size * 1.15, label=PICK_LABEL, **PICK_STYLE)


def _legend_key(result: DemoResult) -> list:
    """Legend handles shared by every panel, at main-axes marker sizes."""
    from matplotlib.lines import Line2D

    families = {model_family(m) for m in result.models}
    key = [
        Line2D([], [], ms=12, label=WINNER_LABEL, **WINNER_STYLE),
        Line2D([], [], ms=12, label=PICK_LABEL, **PICK_STYLE),
    ]
    key += [
        Line2D([], [], ls="-", lw=0.8, marker="o", ms=4, color=colour, label=family)
        for family, colour in FAMILY_COLOURS.items()
        if family in families
    ]
    if families & INSET_FAMILIES:
        inset = _join(sorted(families & INSET_FAMILIES))
        label = f"inset: all models, with {inset}; dashed: main view"
        key.append(Line2D([], [], ls="--", lw=0.6, color="0.4", label=label))
    return key


def _scatter_plots(result: DemoResult, folder: Path, plt) -> None:
    names = list(result.values)
    cols = 4
    rows = -(-(len(names) + 1) // cols)  # one spare cell for the shared legend
    grid, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.ravel()[len(names) :]:
        ax.set_axis_off()
    for ax_grid, name in zip(axes.ravel()[: len(names)], names, strict=True):
        scatter_panel(result, name, ax_grid)
        single, ax_single = plt.subplots(figsize=(6.4, 4))
        scatter_panel(result, name, ax_single)
        ax_single.legend(
            handles=_legend_key(result),
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.02, 1),
            title="bars: 95% CI",
            title_fontsize=7,
        )
        save(single, folder / f"scatter_{_slug(name)}.png", dpi=110)
    axes.ravel()[-1].legend(
        handles=_legend_key(result),
        loc="center",
        fontsize=9,
        title="bars: 95% CI",
        title_fontsize=9,
    )
    save(grid, folder / "scatter_all.png", dpi=100)
