"""Which offline estimate, and which significant verdict, can be trusted over many worlds?

Each of ``n_seeds`` **world seeds** draws a new :class:`~recpack_ope.simulation.SimulatedWorld`
of every kind (new factors, so new relevance; new popularity, so new exposure), logs a training
period, trains a pool of recommenders on it and draws one held-out log. Every estimator ×
propensity source × clipping then evaluates every model of the pool, and the world gives each
model's exact online reward. Per configuration and world the study measures

* bias, RMSE (relative to the online reward) and the coverage of 95 % intervals, for the
  estimators of reward per user (DCG, IPS-DCG, SNIPS-DCG, DR-DCG over ``population="all"``);
* Kendall's τ between the estimates and the online rewards of the pool, and the regret of the
  model the estimate picks (online reward lost against the online winner);
* what the weight diagnostics said: the smallest ESS/n over the pool, and whether
  ``diagnostics.reliable`` was False for some model (``warned``, with the reasons that fired);
* over all model pairs, the paired comparison ``a.compare(b)``: the rate of **wrong-sign
  significant verdicts** (p < α while the other model is better online; share of all pairs)
  and the **power** (share of the pairs whose online rewards differ that are significant in
  the right direction);
* the same two rates for verdicts that also pass a robustness threshold Γ* ≥ Γ₀, with Γ* of
  :meth:`~recpack_ope.inference.result.Comparison.robustness`: of the sign (``robustness()``)
  or of the significance (``robustness(level=0.95)``, written Γ*₉₅), rounded down to
  :data:`GAMMA_GRID`. Γ* is how far every propensity may be off, by a factor either way,
  before the verdict can flip; it is NaN where the comparison cannot be perturbed (unweighted
  estimators, and ``clip="auto"`` when two models chose different thresholds);
* ``fragile``, the share of pairs whose Γ* of the sign is below Γ₀, and ``flagged``: a warning,
  or more than :data:`FRAGILE_SHARE` of the pairs fragile (enough discordant pairs to bring τ
  below 0.8).

Every measure is reported as min / median / max over the world seeds. Γ₀ is chosen from the
study's own distribution (:meth:`ReliabilityResult.gamma0`), and so are the recommended
procedure and clipping (:meth:`ReliabilityResult.recommendation`), on the first half of the
world seeds; the second half checks them.

Four world kinds: ``pbm`` satisfies the assumptions of Jeunen et al. (KDD'24, §4);
``cascade`` breaks the position-based model (clicks end the session, Craswell et al. 2008);
``personalised`` logs with a segment-personalised policy, so item-only propensity estimates are
misspecified; ``affinity`` logs in two stages on a noisy copy of the user factors
(:class:`~recpack_ope.simulation.AffinityPolicy`): exposure follows the latent user–item
affinity that relevance shares, and its weights are heavy-tailed.

Besides the IPS family it runs doubly robust DCG (:func:`~recpack_ope.metrics.doubly_robust.dr_dcg`)
with the held-out log's impressions and a reward model that a practitioner could build: the
scores of EASE(l2=200) fitted on the training period, Platt-calibrated on the training clicks
with the power-law propensities (:class:`~recpack_ope.reward.ScoreCalibration`). And, per
world, the paired comparison of the two models with the highest online reward by IPS-DCG with
impressions, plainly and with the Δ-OPE control variate (``compare(control_variate=True)``):
coverage of the true difference, interval width and the variance removed.

Run it with ``recpack-ope reproduce reliability`` (``--quick`` for a small run) or
:func:`run_reliability`.
"""

from __future__ import annotations

import contextlib
import csv
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .._plots import pyplot, save
from .._validation import check_fraction, check_positive_int
from ..inference.agreement import agreement
from ..inference.diagnostics import ESS_RATIO_THRESHOLD, ReliabilityWarning
from ..inference.result import Comparison, EstimateResult
from ..metrics.dcg import dcg, ips_dcg, ndcg, pn_dcg, snips_dcg
from ..metrics.doubly_robust import dr_dcg
from ..metrics.ranking import TopK
from ..propensity.discount import LogDiscount
from ..simulation.world import (
    AffinityPolicy,
    PersonalisedPolicy,
    PopularityPolicy,
    SimulatedWorld,
)
from . import progress_bar

__all__ = [
    "ReliabilityConfig",
    "ReliabilityResult",
    "run_reliability",
    "write_report",
    "make_world",
    "pair_verdicts",
    "verdict_rates",
    "spread",
    "WORLDS",
]

WORLDS = ("pbm", "cascade", "personalised", "affinity")
SOURCES = ("true", "popularity", "power-law")
ESTIMATED = ("popularity", "power-law")
#: The goals the study measures: wrong-sign significant verdicts of the recommended procedure
#: (share of all pairs) at most GOAL_WRONG_SIGN in every world kind and seed, and a warning or
#: a low Γ* on at least GOAL_FLAGGED of the weighted runs whose τ is below WARN_KENDALL.
GOAL_WRONG_SIGN, GOAL_FLAGGED, WARN_KENDALL = 0.05, 0.95, 0.8
#: An ordering with more than this share of discordant pairs has τ < WARN_KENDALL
#: (τ = 1 − 2 · discordant share without ties): the share of pairs with Γ* < Γ₀ that flags a run.
FRAGILE_SHARE = (1 - WARN_KENDALL) / 2
#: Candidate thresholds Γ₀ (1 = no threshold); Γ* is rounded down to this grid, so a Γ* of 10
#: means "at least 10".
GAMMA_GRID = (1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
#: Online rewards closer than this share of the pool's best are a tie (not "truly different").
TIE = 1e-9
# Presets: (sizes, world seeds) of the full study and of --quick.
_FULL = (((2000, 500),), 20)
_QUICK = (((300, 80),), 3)


@dataclass(frozen=True)
class ReliabilityConfig:
    """Settings of the reliability study.

    ``sizes`` are (users, items) of the worlds and ``n_seeds`` the world seeds per kind and
    size; both default to the full study (2000 × 500, 20 seeds) or, with ``quick``, to a
    small run (300 × 80, 3 seeds). ``clips`` are the fixed clippings m evaluated with
    estimated propensities (besides none and ``"auto"``); ``fixed_clip`` is the one also run
    with the true propensities, SNIPS and DR. World seeds are ``seed, seed + 1, …``; ``jobs``
    worlds are evaluated at a time, in separate processes (1: in this one). The results do
    not depend on ``jobs``.
    """

    sizes: tuple[tuple[int, int], ...] | None = None
    worlds: tuple[str, ...] = WORLDS
    n_seeds: int | None = None
    feed_length: int = 20
    train_feeds: int = 5
    cutoff: int = 10
    temperature: float = 1.0
    clips: tuple[float, ...] = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
    fixed_clip: float = 100.0
    alpha: float = 0.05
    seed: int = 0
    quick: bool = False
    jobs: int = 2

    def __post_init__(self) -> None:
        sizes, n_seeds = _QUICK if self.quick else _FULL
        if self.sizes is None:
            object.__setattr__(self, "sizes", sizes)
        if self.n_seeds is None:
            object.__setattr__(self, "n_seeds", n_seeds)
        check_positive_int(self.n_seeds, "n_seeds")
        unknown = [w for w in self.worlds if w not in WORLDS]
        if unknown or not self.worlds:
            raise ValueError(f"worlds must be a non-empty subset of {WORLDS}, got {self.worlds!r}")
        if not self.sizes:
            raise ValueError("sizes must hold at least one (users, items) pair")
        for users, items in self.sizes:
            check_positive_int(users, "users of a world size")
            check_positive_int(items, "items of a world size")
        for name in ("feed_length", "train_feeds", "cutoff", "jobs"):
            check_positive_int(getattr(self, name), name)
        bad = [m for m in (*self.clips, self.fixed_clip) if not (m >= 1 and math.isfinite(m))]
        if bad:
            raise ValueError(f"clips and fixed_clip must be finite numbers >= 1, got {bad[0]!r}")
        check_fraction(self.alpha, "alpha")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")

    @property
    def world_seeds(self) -> range:
        """The world seeds of every kind and size."""
        return range(self.seed, self.seed + self.n_seeds)


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


def _clip_label(clip: float | str | None) -> str:
    return "unclipped" if clip is None else "auto m" if clip == "auto" else f"m={clip:g}"


def configurations(config: ReliabilityConfig) -> list[Configuration]:
    """The unweighted metrics; IPS-DCG with the true propensities unclipped, at the fixed
    clipping and with ``"auto"``, and with estimated ones at every clipping of ``clips``
    too; SNIPS-DCG and DR-DCG (calibrated reward model) for every source, unclipped and at the
    fixed clipping; DR-DCG with estimated propensities and the true relevance."""
    out = [Configuration(name, name, None, None) for name in ("DCG", "nDCG", "pnDCG")]
    for source in SOURCES:
        fixed = sorted({*config.clips, config.fixed_clip}) if source != "true" else []
        for clip in (None, *(fixed or [config.fixed_clip]), "auto"):
            out.append(
                Configuration(f"IPS-DCG ({source} p, {_clip_label(clip)})", "IPS-DCG", source, clip)
            )
    for estimator in ("SNIPS-DCG", "DR-DCG"):
        for source in SOURCES:
            for clip in (None, config.fixed_clip):
                out.append(
                    Configuration(
                        f"{estimator} ({source} p, {_clip_label(clip)})",
                        estimator,
                        source,
                        clip,
                        "calibrated" if estimator == "DR-DCG" else None,
                    )
                )
    # The other half of double robustness: estimated propensities, the true reward model.
    for source in ESTIMATED:
        out.append(
            Configuration(
                f"DR-DCG ({source} p, unclipped, oracle ρ)", "DR-DCG", source, None, "oracle"
            )
        )
    return out


def model_pool() -> list[tuple[str, object]]:
    """Random, popularity, three item-kNN and four EASE models (closed forms of the package)."""
    # imported on use: start-up time (docs/performance.md)
    from ..simulation.baselines import EASE, ItemKNN, Popularity, RandomScores

    pool = [("random", RandomScores(seed=0)), ("popularity", Popularity())]
    pool += [(f"ItemKNN(k={k})", ItemKNN(k=k)) for k in (10, 50, 200)]
    pool += [(f"EASE(l2={l2:g})", EASE(l2=l2)) for l2 in (10.0, 200.0, 2000.0, 20000.0)]
    return pool


def make_world(
    kind: str, n_users: int, n_items: int, seed: int, temperature: float = 1.0
) -> tuple[SimulatedWorld, PopularityPolicy | PersonalisedPolicy | AffinityPolicy]:
    """The world and logging policy of one world kind and seed.

    Parameters
    ----------
    kind : {"pbm", "cascade", "personalised", "affinity"}
        Position-based clicks and popularity logging; cascade clicks; segment-personalised
        logging; two-stage logging on a noisy copy of the user factors.
    n_users, n_items : int
        Size of the world.
    seed : int
        World seed: factors, popularity and (for the personalised kinds) the policy's segments
        or noisy factors.
    temperature : float
        τ of the logging policy.

    Returns
    -------
    tuple
        ``(SimulatedWorld, policy)``.

    Examples
    --------
    >>> world, policy = make_world("affinity", 50, 20, seed=3)
    >>> type(policy).__name__, world.seed
    ('AffinityPolicy', 3)
    """
    if kind not in WORLDS:
        raise ValueError(f"kind must be one of {WORLDS}, got {kind!r}")
    world = SimulatedWorld(
        n_users=n_users,
        n_items=n_items,
        seed=seed,
        click_model="cascade" if kind == "cascade" else "pbm",
    )
    if kind == "personalised":
        return world, PersonalisedPolicy(temperature=temperature)
    if kind == "affinity":
        return world, AffinityPolicy(temperature=temperature)
    return world, PopularityPolicy(temperature=temperature)


def pair_verdicts(estimates: Sequence[EstimateResult], online: np.ndarray) -> list[dict]:
    """The paired comparison of every pair of models (``a < b``) by one configuration.

    Parameters
    ----------
    estimates : sequence of EstimateResult
        One configuration's estimate of every model, over the same users.
    online : numpy.ndarray
        The models' exact online rewards.

    Returns
    -------
    list of dict
        Per pair: ``a``, ``b``, the estimated ``difference`` (a − b) and its two-sided
        ``p_value`` (:meth:`~recpack_ope.inference.result.PairedEstimate.compare`), the online
        difference ``truth``, and Γ* of the sign (``gamma``) and of the 95 % significance
        (``gamma95``), NaN where the comparison cannot be perturbed.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]])
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> a = ips_dcg(y, np.eye(3)[[0, 1, 0]], discount=LogDiscount(1), propensity=p)
    >>> b = ips_dcg(y, np.eye(3)[[2, 0, 2]], discount=LogDiscount(1), propensity=p)
    >>> [(v["gamma"], v["gamma95"]) for v in pair_verdicts([a, b], np.array([1.0, 0.5]))]
    [(1.1, 1.0)]

    A's lead of 1/3 comes from items 0 and 1 (weights 2 and 1), B's from item 2 (weight 4);
    it survives propensities off by Γ while ``5/Γ > 4Γ``, up to Γ* = √(5/4) ≈ 1.118, which the
    grid rounds down to 1.1. With three users it is not significant: Γ*₉₅ = 1.
    """
    out = []
    for a in range(len(estimates)):
        for b in range(a + 1, len(estimates)):
            comparison = estimates[a].compare(estimates[b])
            gamma, gamma95 = _robustness(comparison)
            out.append(
                {
                    "a": a,
                    "b": b,
                    "difference": comparison.difference,
                    "p_value": comparison.p_value,
                    "truth": float(online[a] - online[b]),
                    "gamma": gamma,
                    "gamma95": gamma95,
                }
            )
    return out


def _robustness(comparison: Comparison) -> tuple[float, float]:
    """Γ* of the sign and of the 95 % significance, rounded down to :data:`GAMMA_GRID`;
    NaN for comparisons that cannot be perturbed (unweighted estimates, or two estimates
    clipped at different thresholds).

    :meth:`Comparison.robustness` locates Γ* to 1e-6 by bisection; the study only compares Γ*
    with thresholds on the grid, so it searches the grid for the largest Γ at which
    :meth:`Comparison.sensitivity` keeps the verdict (the same condition, monotone in Γ): a
    handful of evaluations instead of some thirty. The interval is wider than the bounds, so
    Γ*₉₅ ≤ Γ* and its search stops at Γ*.
    """
    sign = np.sign(comparison.difference)

    def holds(gamma: float, level: float | None) -> bool:
        bounds = comparison.sensitivity(gamma, level)
        low, high = (bounds.low, bounds.high) if level is None else bounds.interval
        return bool(low > 0) if sign > 0 else bool(high < 0)

    if sign == 0:
        return 1.0, 1.0
    try:
        gamma = _largest_on_grid(lambda g: holds(g, None), len(GAMMA_GRID))
    except ValueError:
        return math.nan, math.nan
    top = GAMMA_GRID.index(gamma) + 1
    return gamma, _largest_on_grid(lambda g: holds(g, 0.95), top)


def _largest_on_grid(holds: Callable[[float], bool], size: int) -> float:
    """The largest of the first ``size`` values of :data:`GAMMA_GRID` at which ``holds``
    (monotone: true up to some Γ, false beyond), by bisection; the first value (1) when it
    fails there already."""
    lo, hi = 0, size  # holds(grid[lo]) is assumed, grid[hi:] is unknown or false
    if not holds(GAMMA_GRID[0]):
        return GAMMA_GRID[0]
    while hi - lo > 1:
        middle = (lo + hi) // 2
        lo, hi = (middle, hi) if holds(GAMMA_GRID[middle]) else (lo, middle)
    return GAMMA_GRID[lo]


def verdict_rates(
    pairs: Iterable[dict],
    alpha: float = 0.05,
    *,
    gamma0: float = 1.0,
    robustness: str = "gamma95",
    tie: float = 0.0,
) -> tuple[float, float]:
    """Wrong-sign significant verdicts and power over the pairs of one run.

    A verdict counts when ``p_value < alpha`` and, with ``gamma0 > 1``, its Γ*
    (``robustness``: ``"gamma"`` of the sign, ``"gamma95"`` of the significance) is at least
    ``gamma0``; a NaN Γ* never passes a threshold.

    Parameters
    ----------
    pairs : iterable of dict
        Records of :func:`pair_verdicts`.
    alpha : float
        Significance level.
    gamma0 : float
        Γ₀ ≥ 1 (1: no threshold).
    robustness : {"gamma", "gamma95"}
        Which Γ* the threshold applies to.
    tie : float
        Online differences with ``|truth| <= tie`` are ties, not "truly different".

    Returns
    -------
    tuple of float
        ``(wrong_sign, power)``: verdicts whose sign contradicts the online difference, as a
        share of all pairs; verdicts with the right sign, as a share of the pairs that are not
        ties (NaN without any).

    Examples
    --------
    >>> pairs = [
    ...     {"difference": 0.2, "p_value": 0.01, "truth": -0.1, "gamma": 1.5, "gamma95": 1.2},
    ...     {"difference": 0.3, "p_value": 0.01, "truth": 0.2, "gamma": 3.0, "gamma95": 2.0},
    ...     {"difference": -0.1, "p_value": 0.4, "truth": -0.3, "gamma": 2.0, "gamma95": 1.0},
    ... ]
    >>> verdict_rates(pairs)
    (0.3333333333333333, 0.3333333333333333)
    >>> verdict_rates(pairs, gamma0=1.5)
    (0.0, 0.3333333333333333)
    """
    alpha = check_fraction(alpha, "alpha")
    if robustness not in ("gamma", "gamma95"):
        raise ValueError(f"robustness must be 'gamma' or 'gamma95', got {robustness!r}")
    n = wrong = right = different = 0
    for pair in pairs:
        n += 1
        real = abs(pair["truth"]) > tie
        different += real
        verdict = pair["p_value"] < alpha and (gamma0 <= 1 or pair[robustness] >= gamma0)
        if not verdict:
            continue
        agrees = np.sign(pair["difference"]) == np.sign(pair["truth"])
        wrong += not agrees
        right += bool(agrees and real)
    if n == 0:
        raise ValueError("pairs must hold at least one pair")
    return wrong / n, right / different if different else math.nan


def spread(values: Iterable[float]) -> tuple[float, float, float]:
    """``(min, median, max)`` of the finite values (NaN, NaN, NaN without any).

    Examples
    --------
    >>> spread([0.3, float("nan"), 0.1, 0.2])
    (0.1, 0.2, 0.3)
    """
    v = np.asarray(list(values), dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (math.nan, math.nan, math.nan)
    return float(v.min()), float(np.median(v)), float(v.max())


#: The measures of a run's estimates and of its paired verdicts in the printed tables.
ESTIMATE_MEASURES = ("kendall", "regret", "rel_bias", "rel_rmse", "coverage", "min_ess_ratio")
VERDICT_MEASURES = (
    "wrong_sign",
    "power",
    "wrong_sign_gamma",
    "power_gamma",
    "wrong_sign_gamma95",
    "power_gamma95",
    "fragile",
)
#: Measures of a run that are reported as min / median / max over world seeds, with their
#: column titles and formats.
MEASURES = {
    "kendall": ("Kendall τ", ".2f"),
    "regret": ("regret", ".1%"),
    "rel_bias": ("rel. bias", ".0%"),
    "rel_rmse": ("rel. RMSE", ".0%"),
    "coverage": ("95% coverage", ".0%"),
    "min_ess_ratio": ("min ESS/n", ".1%"),
    "wrong_sign": ("wrong-sign", ".1%"),
    "power": ("power", ".0%"),
    "wrong_sign_gamma": ("wrong-sign, Γ*≥Γ₀", ".1%"),
    "power_gamma": ("power, Γ*≥Γ₀", ".0%"),
    "wrong_sign_gamma95": ("wrong-sign, Γ*₉₅≥Γ₀", ".1%"),
    "power_gamma95": ("power, Γ*₉₅≥Γ₀", ".0%"),
    "fragile": ("share Γ*<Γ₀", ".0%"),
}


@dataclass(frozen=True, eq=False)
class ReliabilityResult:
    """Per-run records (``runs``: one per configuration and world), per-pair verdicts
    (``pairs``) and the two-best comparison (``comparisons``) of the study; everything
    reported is derived from them (:meth:`rows`, :meth:`gamma0`, :meth:`recommendation`)."""

    config: ReliabilityConfig
    models: list[str]
    runs: list[dict]
    pairs: list[dict]
    configurations: list[Configuration]
    examples: dict = field(default_factory=dict)
    seconds: float = 0.0
    comparisons: list[dict] = field(default_factory=list)

    # ----------------------------------------------------------------------------- selection

    @cached_property
    def _pairs_by_run(self) -> dict:
        by_run: dict = {}
        for p in self.pairs:
            by_run.setdefault(_run_key(p), []).append(p)
        return by_run

    @cached_property
    def _cache(self) -> dict:
        """Run measures and rows by Γ₀ (the reports ask for them many times)."""
        return {}

    def run_measures(self, gamma0: float | None = None) -> list[dict]:
        """Every run record with its Γ₀-dependent measures at ``gamma0`` (default
        :meth:`gamma0`): the gated wrong-sign and power rates and ``fragile``, the share of
        pairs whose Γ* of the sign is below Γ₀ (NaN where Γ* is), and ``flagged``: warned,
        or more than :data:`FRAGILE_SHARE` of the pairs fragile."""
        gamma0 = self.gamma0() if gamma0 is None else gamma0
        if ("runs", gamma0) in self._cache:
            return self._cache[("runs", gamma0)]
        by_run, out = self._pairs_by_run, []
        for run in self.runs:
            pairs = by_run[_run_key(run)]
            extra = {}
            extra["wrong_sign"], extra["power"] = verdict_rates(
                pairs, self.config.alpha, tie=run["tie"]
            )
            for key in ("gamma", "gamma95"):
                extra[f"wrong_sign_{key}"], extra[f"power_{key}"] = verdict_rates(
                    pairs,
                    self.config.alpha,
                    gamma0=gamma0,
                    robustness=key,
                    tie=run["tie"],
                )
            gammas = np.array([p["gamma"] for p in pairs])
            extra["fragile"] = (
                float(np.mean(gammas < gamma0)) if np.isfinite(gammas).all() else math.nan
            )
            extra["flagged"] = bool(run["warned"] is True) or extra["fragile"] > FRAGILE_SHARE
            out.append({**run, **extra})
        self._cache[("runs", gamma0)] = out
        return out

    @property
    def selection_seeds(self) -> tuple[int, ...]:
        """The first half of the world seeds (at least one): Γ₀, the recommended procedure and
        the default clipping are chosen on them."""
        seeds = tuple(self.config.world_seeds)
        return seeds[: max(1, len(seeds) // 2)]

    @property
    def evaluation_seeds(self) -> tuple[int, ...]:
        """The other world seeds, on which the chosen procedure is checked (empty for a
        single seed)."""
        return tuple(self.config.world_seeds)[len(self.selection_seeds) :]

    def gamma0(self) -> float:
        """Γ₀ from the study's distribution: the smallest Γ of :data:`GAMMA_GRID` at which,
        averaged over the runs of the selection seeds with estimated propensities (every world
        kind, size and configuration), the wrong-sign verdicts that pass Γ*₉₅ ≥ Γ are at most
        :data:`GOAL_WRONG_SIGN` of the pairs; the largest Γ of the grid if none is."""
        return self._gamma0

    @cached_property
    def _gamma0(self) -> float:
        chosen = set(self.selection_seeds)
        for gamma in GAMMA_GRID:
            rates = [
                r["wrong_sign_gamma95"]
                for r in self.run_measures(gamma)
                if r["source"] in ESTIMATED and r["seed"] in chosen
            ]
            if not rates or np.mean(rates) <= GOAL_WRONG_SIGN:
                return gamma
        return GAMMA_GRID[-1]

    def rows(self, gamma0: float | None = None, seeds: Iterable[int] | None = None) -> list[dict]:
        """Per (size, world kind, configuration): min, median and max over world seeds (all,
        or ``seeds``) of every measure of :data:`MEASURES` (``<measure>_min`` …), ``warned``
        and ``flagged`` as shares of the seeds, and the median auto threshold."""
        gamma0 = self.gamma0() if gamma0 is None else gamma0
        seeds = tuple(self.config.world_seeds if seeds is None else seeds)
        if ("rows", gamma0, seeds) in self._cache:
            return self._cache[("rows", gamma0, seeds)]
        groups: dict = {}
        for r in self.run_measures(gamma0):
            if r["seed"] in seeds:
                key = (r["users"], r["items"], r["world"], r["configuration"])
                groups.setdefault(key, []).append(r)
        out = []
        for (users, items, world, name), mine in groups.items():
            row = {
                "users": users,
                "items": items,
                "world": world,
                "configuration": name,
                "source": mine[0]["source"],
                "clip": mine[0]["clip"],
                "n_seeds": len(mine),
            }
            for key in MEASURES:
                values = [float(r[key]) for r in mine]
                row[f"{key}_min"], row[f"{key}_median"], row[f"{key}_max"] = spread(values)
            row["warned"] = float(np.mean([r["warned"] is True for r in mine]))
            row["flagged"] = float(np.mean([r["flagged"] for r in mine]))
            row["median_auto_clip"] = spread(r["median_auto_clip"] for r in mine)[1]
            out.append(row)
        self._cache[("rows", gamma0, seeds)] = out
        return out

    def procedures(self, seeds: Iterable[int] | None = None) -> list[dict]:
        """Every candidate procedure — a configuration with estimated propensities, its
        verdicts plain (``gate="none"``) or kept when Γ* of the sign (``"gamma"``) or of the
        significance (``"gamma95"``) reaches Γ₀ — with its worst case over world kinds and
        sizes on ``seeds`` (default: the selection seeds): the largest wrong-sign rate of any
        seed, the smallest median power and median τ, and whether the wrong-sign rate met
        :data:`GOAL_WRONG_SIGN` in every world and seed."""
        seeds = self.selection_seeds if seeds is None else tuple(seeds)
        by_config: dict = {}
        for r in self.rows(seeds=seeds):
            if r["source"] in ESTIMATED:
                by_config.setdefault(r["configuration"], []).append(r)
        out = []
        for name, mine in by_config.items():
            for gate, suffix in (("none", ""), ("gamma", "_gamma"), ("gamma95", "_gamma95")):
                worst_wrong = max(r[f"wrong_sign{suffix}_max"] for r in mine)
                out.append(
                    {
                        "configuration": name,
                        "gate": gate,
                        "worst_wrong_sign": worst_wrong,
                        "worst_power": min(r[f"power{suffix}_median"] for r in mine),
                        "worst_kendall": min(r["kendall_median"] for r in mine),
                        "meets_goal": worst_wrong <= GOAL_WRONG_SIGN,
                    }
                )
        return out

    def recommendation(self) -> dict:
        """The recommended procedure and clipping, chosen on the selection seeds.

        Of the :meth:`procedures` that meet the wrong-sign goal in every world and selection
        seed, the one with the highest power in its worst world kind, then the highest
        worst-kind median τ; if none meets it, the one with the smallest worst-case wrong-sign
        rate. ``held_out`` is the same procedure's worst case on the evaluation seeds. The
        default clipping is the fixed m at which IPS-DCG's median τ, in its worst world kind
        and estimated propensity source, is highest; ``auto_helps`` says per source whether
        ``clip="auto"`` beats both no clipping and that m on the same criterion.
        """
        candidates = self.procedures()
        meeting = [c for c in candidates if c["meets_goal"]]
        if meeting:
            best = max(meeting, key=lambda c: (c["worst_power"], c["worst_kendall"]))
        else:
            best = min(candidates, key=lambda c: (c["worst_wrong_sign"], -c["worst_power"]))
        held_out = None
        if self.evaluation_seeds:
            held_out = next(
                c
                for c in self.procedures(self.evaluation_seeds)
                if (c["configuration"], c["gate"]) == (best["configuration"], best["gate"])
            )
        worst: dict = {}
        for r in self.rows(seeds=self.selection_seeds):
            if r["source"] in ESTIMATED and r["configuration"].startswith("IPS-DCG"):
                key = (r["source"], str(r["clip"]))
                worst[key] = min(worst.get(key, math.inf), r["kendall_median"])
        fixed: dict = {}
        for (_, m), tau in worst.items():
            if m not in ("none", "auto"):
                fixed[m] = min(fixed.get(m, math.inf), tau)
        default_m = max(fixed, key=fixed.get)
        auto_helps = {
            source: worst[(source, "auto")]
            > max(worst[(source, "none")], worst[(source, default_m)])
            for source in ESTIMATED
            if (source, "auto") in worst
        }
        return {
            "gamma0": self.gamma0(),
            **best,
            "n_meeting": len(meeting),
            "held_out": held_out,
            "default_clip": float(default_m),
            "default_clip_worst_kendall": fixed[default_m],
            "auto_helps": auto_helps,
        }

    # ----------------------------------------------------------------------------- reports

    def default_world(self) -> tuple[int, int]:
        """(users, items) of the last (largest) size."""
        return tuple(self.config.sizes[-1])

    def select(self, world: str, size: tuple[int, int] | None = None) -> list[dict]:
        """Aggregated rows of one world kind and size (default: the last size)."""
        size = tuple(size or self.default_world())
        return [r for r in self.rows() if r["world"] == world and (r["users"], r["items"]) == size]

    def spread_table(
        self,
        configurations: Sequence[str] | None = None,
        measures: Sequence[str] = ESTIMATE_MEASURES,
        size: tuple[int, int] | None = None,
    ) -> str:
        """Markdown table, per world kind and configuration (default: the key ones of
        :meth:`key_configurations`), of min / median / max over world seeds of ``measures``,
        and the share of seeds in which a model was flagged unreliable (``warned``)."""
        names = list(configurations or self.key_configurations())
        head = ["world", "configuration", *(MEASURES[m][0] for m in measures), "warned"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for world in self.config.worlds:
            rows = {r["configuration"]: r for r in self.select(world, size)}
            for name in names:
                r = rows.get(name)
                if r is None:
                    continue
                cells = [_spread_cell(r, m) for m in measures]
                warned = "—" if r["source"] is None else f"{r['warned']:.0%}"
                lines.append(f"| {world} | {name} | " + " | ".join(cells) + f" | {warned} |")
        return "\n".join(lines)

    def key_configurations(self) -> list[str]:
        """The recommended configuration, then DCG and IPS-DCG unclipped, at the fixed
        clipping and with ``"auto"``, for each estimated propensity source."""
        fixed = _clip_label(self.config.fixed_clip)
        names = [self.recommendation()["configuration"], "DCG"]
        for source in ESTIMATED:
            names += [f"IPS-DCG ({source} p, {label})" for label in ("unclipped", fixed, "auto m")]
        return list(dict.fromkeys(names))

    def table(self) -> str:
        """What the command prints: the key configurations in every world kind (min / median
        / max over world seeds), Γ₀, the recommended procedure and clipping."""
        rec = self.recommendation()
        gate = {
            "none": "every significant verdict",
            "gamma": f"significant verdicts with Γ* (sign) ≥ Γ₀ = {rec['gamma0']:g}",
            "gamma95": f"significant verdicts with Γ*₉₅ ≥ Γ₀ = {rec['gamma0']:g}",
        }[rec["gate"]]
        held = rec["held_out"]
        held_text = (
            ""
            if held is None
            else f"; on the held-out seeds {_seed_range(self.evaluation_seeds)}: wrong-sign "
            f"≤ {held['worst_wrong_sign']:.1%}, median power {held['worst_power']:.0%}, "
            f"median τ {held['worst_kendall']:.2f}"
        )
        auto = [s for s, helps in rec["auto_helps"].items() if helps]
        return "\n".join(
            [
                "min / median / max over world seeds; the estimates:",
                self.spread_table(),
                "",
                f"and their paired verdicts (p < {self.config.alpha:g}; wrong-sign: share of "
                "all pairs, power: of the pairs that differ online), plain and kept when Γ* "
                "(of the sign) or Γ*₉₅ (of the significance) ≥ Γ₀:",
                self.spread_table(measures=VERDICT_MEASURES),
                "",
                f"Γ₀ = {rec['gamma0']:g}: the smallest Γ of {list(GAMMA_GRID)} at which the "
                f"wrong-sign verdicts passing Γ*₉₅ ≥ Γ average ≤ {GOAL_WRONG_SIGN:.0%} of the "
                "pairs over the runs with estimated propensities of the selection seeds "
                f"{_seed_range(self.selection_seeds)}.",
                f"Recommended procedure: {rec['configuration']}, {gate}. Chosen on the "
                "selection seeds, worst world kind: wrong-sign "
                f"≤ {rec['worst_wrong_sign']:.1%} in every seed, median power "
                f"{rec['worst_power']:.0%}, median τ {rec['worst_kendall']:.2f} "
                f"({rec['n_meeting']} candidates met the {GOAL_WRONG_SIGN:.0%} goal there)"
                f"{held_text}.",
                f"Default clipping: m = {rec['default_clip']:g} (highest median τ in the worst "
                f"world kind and estimated source, {rec['default_clip_worst_kendall']:.2f}); "
                f"clip='auto' beats it and no clipping with {' and '.join(auto) or 'neither'} "
                "estimated propensities.",
            ]
        )

    def goal(self) -> str:
        """Whether the goals hold: the recommended procedure's wrong-sign rate at most 5 % in
        every world kind and held-out seed, and a warning or low Γ* on at least 95 % of the
        weighted runs whose τ < 0.8."""
        rec = self.recommendation()
        checked = rec["held_out"] or rec
        seeds = self.evaluation_seeds or self.selection_seeds
        runs = self.run_measures()
        weighted = [r for r in runs if r["source"] is not None]
        low = [r for r in weighted if r["kendall"] < WARN_KENDALL]
        flagged = [r for r in low if r["flagged"]]
        warned = [r for r in low if r["warned"] is True]
        fragile = [r for r in low if r["fragile"] > FRAGILE_SHARE]
        missed = sorted({r["configuration"] for r in low if not r["flagged"]})
        unweighted = [r for r in runs if r["source"] is None and r["kendall"] < WARN_KENDALL]
        high = [r for r in weighted if r["kendall"] >= WARN_KENDALL]
        false_alarms = [r for r in high if r["flagged"]]
        first = (
            f"Goal 1 ({'met' if checked['meets_goal'] else 'missed'}): the recommended "
            f"procedure's wrong-sign significant verdicts reached at most "
            f"{checked['worst_wrong_sign']:.1%} of the pairs in any world kind and seed "
            f"{_seed_range(seeds)} (goal ≤ {GOAL_WRONG_SIGN:.0%})."
        )
        share = len(flagged) / len(low) if low else math.nan
        second = (
            f"Goal 2 ({'met' if low and share >= GOAL_FLAGGED else 'missed'}): of "
            f"{len(weighted)} weighted runs, {len(low)} had τ < {WARN_KENDALL}; "
            f"{len(flagged)} ({share:.0%}) were flagged (warning {len(warned)}, more than "
            f"{FRAGILE_SHARE:.0%} of pairs with Γ* < Γ₀ {len(fragile)}; goal ≥ "
            f"{GOAL_FLAGGED:.0%})"
            + (
                f"; unflagged: {', '.join(missed[:6])}{' …' if len(missed) > 6 else ''}"
                if missed
                else ""
            )
            + f". Unweighted metrics, which cannot warn, had τ < {WARN_KENDALL} in "
            f"{len(unweighted)} runs."
        )
        third = (
            f"The same flags fired in {len(false_alarms)} of the {len(high)} weighted runs with "
            f"τ ≥ {WARN_KENDALL} ({_share(len(false_alarms), len(high))}; warning "
            f"{sum(r['warned'] is True for r in high)}, Γ* "
            f"{sum(r['fragile'] > FRAGILE_SHARE for r in high)}). Reasons of the warnings, "
            f"τ < {WARN_KENDALL} / τ ≥ {WARN_KENDALL} runs: "
            + ", ".join(
                f"{reason} {_count_reason(low, reason)} / {_count_reason(high, reason)}"
                for reason in sorted({x for r in weighted for x in r["reasons"].split("; ") if x})
            )
            + "."
        )
        return "\n".join([first, second, third])

    def gamma_table(self) -> str:
        """Markdown table over :data:`GAMMA_GRID`: over the selection seeds' runs with
        estimated propensities (what :meth:`gamma0` reads), the mean wrong-sign rate and power
        of the verdicts kept by Γ*₉₅ ≥ Γ₀ and the worst run's wrong-sign rate; over all seeds'
        weighted runs, the shares flagged among those with τ < 0.8 and with τ ≥ 0.8."""
        lines = [
            "| Γ₀ | wrong-sign, mean (selection seeds) | power, mean | worst run's wrong-sign "
            f"| τ < {WARN_KENDALL} runs flagged | τ ≥ {WARN_KENDALL} runs flagged |",
            "|---|---|---|---|---|---|",
        ]
        chosen = set(self.selection_seeds)
        for g in GAMMA_GRID:
            runs = self.run_measures(g)
            est = [r for r in runs if r["source"] in ESTIMATED and r["seed"] in chosen]
            weighted = [r for r in runs if r["source"] is not None]
            low = [r["flagged"] for r in weighted if r["kendall"] < WARN_KENDALL]
            high = [r["flagged"] for r in weighted if r["kendall"] >= WARN_KENDALL]
            lines.append(
                f"| {g:g} | {np.mean([r['wrong_sign_gamma95'] for r in est]):.2%} | "
                f"{np.nanmean([r['power_gamma95'] for r in est]):.1%} | "
                f"{max(r['wrong_sign_gamma95'] for r in est):.1%} | "
                f"{_share(sum(low), len(low))} | {_share(sum(high), len(high))} |"
            )
        return "\n".join(lines)

    def clip_table(self, size: tuple[int, int] | None = None) -> str:
        """Markdown table: median τ (min–max over seeds) of IPS-DCG with estimated
        propensities at every clipping, per world kind; and the best m per kind."""
        labels = [
            "unclipped",
            *(_clip_label(m) for m in sorted({*self.config.clips, self.config.fixed_clip})),
            "auto m",
        ]
        lines = [
            "| world | propensities | " + " | ".join(labels) + " |",
            "|---|---|" + "---|" * len(labels),
        ]
        for world in self.config.worlds:
            rows = {r["configuration"]: r for r in self.select(world, size)}
            for source in ESTIMATED:
                cells = []
                for label in labels:
                    r = rows.get(f"IPS-DCG ({source} p, {label})")
                    cells.append("—" if r is None else _spread_cell(r, "kendall"))
                lines.append(f"| {world} | {source} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def comparison_table(self, size: tuple[int, int] | None = None) -> str:
        """Markdown table: the paired comparison of the two best models (best − second best
        by online reward; which two, in how many worlds) by IPS-DCG with impressions, plain
        and with the Δ-OPE control variate, per world kind and propensity source: share of
        worlds whose interval covers the true difference, and min / median / max of the
        interval width and of the variance removed."""
        size = tuple(size or self.default_world())
        lines = [
            "| world | propensities | difference | interval | 95% coverage | CI width "
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
                    and (c["users"], c["items"]) == size
                ]
                if not mine:
                    continue
                counts: dict = {}
                for c in mine:
                    counts[c["difference"]] = counts.get(c["difference"], 0) + 1
                ordered = sorted(counts, key=counts.get, reverse=True)
                difference = (
                    ordered[0]
                    if len(ordered) == 1
                    else "; ".join(f"{d} ({counts[d]} worlds)" for d in ordered)
                )
                for label, key in (("paired", "plain"), ("paired, Δ-OPE control variate", "cv")):
                    removed = (
                        _format_spread(spread(c["variance_removed"] for c in mine), ".0%")
                        if key == "cv"
                        else "—"
                    )
                    lines.append(
                        f"| {world} | {source} | {difference} | {label} | "
                        f"{np.mean([c[f'{key}_covered'] for c in mine]):.0%} | "
                        f"{_format_spread(spread(c[f'{key}_width'] for c in mine), '.4f')} | "
                        f"{removed} |"
                    )
        return "\n".join(lines)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "—"


def _count_reason(runs: list[dict], reason: str) -> int:
    return sum(reason in r["reasons"].split("; ") for r in runs)


def _seed_range(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else f"{seeds[0]}"


def _run_key(record: dict) -> tuple:
    return (
        record["users"],
        record["items"],
        record["world"],
        record["seed"],
        record["configuration"],
    )


def _format_spread(values: tuple[float, float, float], fmt: str) -> str:
    if any(math.isnan(v) for v in values):
        return "—"
    return " / ".join(format(v, fmt) for v in values)


def _spread_cell(row: dict, measure: str) -> str:
    return _format_spread(
        tuple(row[f"{measure}_{s}"] for s in ("min", "median", "max")), MEASURES[measure][1]
    )


# --------------------------------------------------------------------------------- the run


def run_reliability(
    config: ReliabilityConfig | None = None, *, progress: bool = True
) -> ReliabilityResult:
    """Run the study: per size, world kind and world seed, build the world, train the pool,
    draw a held-out log and evaluate every configuration and every pair of models against
    the exact online rewards.

    Parameters
    ----------
    config : ReliabilityConfig, optional
        Study settings; defaults to ``ReliabilityConfig()``.
    progress : bool
        Show a progress bar over (size, world kind, seed) on a terminal.

    Returns
    -------
    ReliabilityResult
    """
    config = config or ReliabilityConfig()
    start = time.perf_counter()
    tasks = [
        (config, kind, users, items, seed)
        for users, items in config.sizes
        for kind in config.worlds
        for seed in config.world_seeds
    ]
    runs, pairs, examples, comparisons = [], [], {}, []
    bar = progress_bar(total=len(tasks), desc="reliability worlds", show=progress)
    with contextlib.ExitStack() as stack:
        if config.jobs > 1:
            # imported on use: start-up time (docs/performance.md)
            from concurrent.futures import ProcessPoolExecutor

            executor = stack.enter_context(
                ProcessPoolExecutor(config.jobs, initializer=_single_threaded)
            )
            results = executor.map(_evaluate_task, tasks)
        else:
            results = map(_evaluate_task, tasks)
        # map keeps the order of the tasks, so the records do not depend on jobs.
        for task, world in zip(tasks, results, strict=True):
            runs += world["runs"]
            pairs += world["pairs"]
            comparisons += world["comparisons"]
            if task[-1] == config.seed:
                examples.update(world["examples"])
            bar.update()
    bar.close()
    return ReliabilityResult(
        config,
        [name for name, _ in model_pool()],
        runs,
        pairs,
        configurations(config),
        examples,
        time.perf_counter() - start,
        comparisons,
    )


def _single_threaded() -> None:
    """Worker set-up: one BLAS thread per process, as the processes share the cores."""
    # imported on use: start-up time (docs/performance.md)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _evaluate_task(task: tuple) -> dict:
    """:func:`_evaluate_world` of one (config, kind, users, items, seed)."""
    config, kind, users, items, seed = task
    return _evaluate_world(config, configurations(config), model_pool(), kind, users, items, seed)


@dataclass(frozen=True)
class _HeldOut:
    """One held-out log: clicks, impressions, and the study's reward models by kind."""

    clicks: object
    impressions: object
    reward_models: dict


def _evaluate_world(config, configs, pool, kind, users, items, seed) -> dict:
    """Every configuration and pair on one world: its run, pair and comparison records."""
    # imported on use: start-up time (docs/performance.md)
    from ..propensity.models import PopularityPropensity, PowerLawPropensity

    world, policy = make_world(kind, users, items, seed, config.temperature)
    discount = LogDiscount(config.cutoff)
    train = world.log(
        policy, feed_length=config.feed_length, n_feeds=config.train_feeds, seed=1
    ).clicks.sign()
    rankings = [
        TopK.from_scores(model.fit(train).predict(train), config.cutoff) for _, model in pool
    ]
    online = np.array([world.online_reward(r, discount).value for r in rankings])
    fitted = {
        "popularity": PopularityPropensity().fit(train),
        "power-law": PowerLawPropensity().fit(train),
    }
    log = world.log(policy, feed_length=config.feed_length, n_feeds=1, seed=100)
    held_out, impressions = log.clicks, log.impressions()
    # The true exposure at every held-out and impression entry.
    sources = {**fitted, "true": log.propensity_matrix(held_out + impressions)}
    data = _HeldOut(
        held_out,
        impressions,
        {
            "calibrated": practitioners_reward_model(train, fitted["power-law"]),
            "oracle": world.reward_model(),
        },
    )
    where = {"users": users, "items": items, "world": kind, "seed": seed}
    runs, pairs, examples = [], [], {}
    for c in configs:
        estimates = _evaluate(c, data, rankings, sources, discount)
        record = {**where, **_run_record(c, estimates, online)}
        runs.append(record)
        pairs += [{**where, "configuration": c.name, **p} for p in pair_verdicts(estimates, online)]
        if c.clip == "auto" and c.estimator == "IPS-DCG":
            examples[(users, items, kind, c.source)] = estimates[-1].clip_selection
    best_two = np.argsort(-online)[:2]
    comparisons = [
        {
            **where,
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
        for source in SOURCES
    ]
    return {"runs": runs, "pairs": pairs, "comparisons": comparisons, "examples": examples}


def practitioners_reward_model(train, propensity):
    """A reward model for DR-DCG built from training data only: EASE(l2=200)'s training-period
    scores, Platt-calibrated on the training clicks with the power-law propensities: the reward
    model a practitioner could build (module docstring)."""
    # imported on use: start-up time (docs/performance.md)
    from ..reward.calibration import ScoreCalibration
    from ..simulation.baselines import EASE

    scores = EASE(l2=200.0).fit(train).predict(train)
    return ScoreCalibration().fit(scores, train, propensity=propensity).reward_model(scores)


def paired_with_control(
    clicks, impressions, rankings, propensity, discount
) -> tuple[Comparison, Comparison]:
    """IPS-DCG with impressions of two models (``rankings``), compared plainly and with the
    Δ-OPE control variate: (plain, with control variate)."""
    # Estimated propensities do not match the logging policy, which the control variate's
    # check reports; the study measures what that does instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        a, b = (
            ips_dcg(
                clicks,
                r,
                discount=discount,
                propensity=propensity,
                impressions=impressions,
                clip=None,
            )
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


def _evaluate(
    c: Configuration, data: _HeldOut, rankings, sources, discount
) -> list[EstimateResult]:
    """One configuration's estimate of every model on one held-out log; the estimators of
    reward average over all users, those without held-out clicks counting 0, as the online
    reward does."""
    held_out = data.clicks
    kwargs = {} if c.source is None else {"propensity": sources[c.source], "clip": c.clip}
    if c.estimates_reward:
        kwargs["population"] = "all"
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
    # The diagnostics say what the warning would; the study reads them instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        return [estimator(held_out, ranking, discount=discount, **kwargs) for ranking in rankings]


def _run_record(c: Configuration, estimates: list[EstimateResult], online: np.ndarray) -> dict:
    """The Γ₀-independent measures of one configuration on one world."""
    values = np.array([e.value for e in estimates])
    a = agreement(online, values)
    pick = int(np.argmax(values))
    relative = (values - online) / online if c.estimates_reward else np.full(online.size, np.nan)
    if c.estimates_reward:
        low, high = np.array([e.confidence_interval(0.95) for e in estimates]).T
        coverage = float(np.mean((low <= online) & (online <= high)))
    else:
        coverage = math.nan
    diagnostics = [e.diagnostics for e in estimates if e.diagnostics is not None]
    reasons = sorted({reason for d in diagnostics for reason in d.reasons})
    chosen = [
        s.clip if s.clip is not None else math.inf
        for s in (e.clip_selection for e in estimates)
        if s is not None
    ]
    tie = TIE * float(np.abs(online).max())
    pairs = [(i, j) for i in range(values.size) for j in range(i + 1, values.size)]
    return {
        "configuration": c.name,
        "estimator": c.estimator,
        "source": c.source,
        "clip": "none" if c.clip is None else c.clip,
        "kendall": a.kendall,
        "regret": float(1 - online[pick] / online.max()),
        "picked": pick,
        "rel_bias": float(np.mean(relative)),
        "rel_rmse": float(np.sqrt(np.mean(relative**2))),
        "coverage": coverage,
        "min_ess_ratio": min((d.ess_ratio for d in diagnostics), default=math.nan),
        # None: an unweighted estimate, which has no diagnostics to warn with.
        "warned": None if not diagnostics else not all(d.reliable for d in diagnostics),
        "reasons": "; ".join(reasons),
        "median_auto_clip": float(np.median(chosen)) if chosen else math.nan,
        "tie": tie,
        "n_different": sum(abs(online[i] - online[j]) > tie for i, j in pairs),
    }


# --------------------------------------------------------------------------------- reports


def write_report(result: ReliabilityResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``results.csv`` (per world kind and configuration: min / median / max over
    world seeds), ``runs.csv`` (per configuration and world), ``pairs.csv`` (per pair of
    models), ``comparisons.csv``, ``summary.md`` and, with matplotlib, ``kendall.png``,
    ``ess_vs_kendall.png``, ``gamma.png`` and ``auto_clip.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tables = [
        ("results.csv", result.rows()),
        ("runs.csv", result.run_measures()),
        ("pairs.csv", result.pairs),
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
        _plot_gamma(result, folder, plt)
        _plot_auto_clip(result, folder, plt)
    cfg = result.config
    every = [c.name for c in result.configurations]
    lines = [
        "# Reliability of offline estimates and significant verdicts over many worlds",
        "",
        f"{cfg.n_seeds} world seeds per kind ({cfg.world_seeds.start}–"
        f"{cfg.world_seeds.stop - 1}); kinds {', '.join(cfg.worlds)}; sizes "
        f"{', '.join(f'{u}×{i}' for u, i in cfg.sizes)}; feeds of {cfg.feed_length} items, "
        f"{cfg.train_feeds} training feeds per user; {len(result.models)} models "
        f"({', '.join(result.models)}); cutoff {cfg.cutoff}; α = {cfg.alpha:g}; ESS/n warning "
        f"threshold {ESS_RATIO_THRESHOLD:g}; {result.seconds:.0f} s. Cells: min / median / "
        "max over world seeds.",
        "",
        result.table(),
        "",
        result.goal(),
        "",
        "## Choosing Γ₀",
        "",
        result.gamma_table(),
        "",
        "## Clipping with estimated propensities: Kendall τ",
        "",
        result.clip_table(),
        "",
        "## Paired comparison of the two best models (IPS-DCG with impressions)",
        "",
        result.comparison_table(),
    ]
    for users, items in cfg.sizes:
        lines += [
            "",
            f"## Every configuration, {users} users × {items} items: estimates",
            "",
            result.spread_table(every, size=(users, items)),
            "",
            f"## Every configuration, {users} users × {items} items: paired verdicts",
            "",
            result.spread_table(every, VERDICT_MEASURES, (users, items)),
        ]
    lines += [
        "",
        "Per configuration and world kind: `results.csv`; per world: `runs.csv`; per pair of "
        "models: `pairs.csv`.",
    ]
    if plt is not None:
        lines += [
            "",
            "![Kendall τ](kendall.png)",
            "",
            "![ESS/n vs τ](ess_vs_kendall.png)",
            "",
            "![Γ₀](gamma.png)",
            "",
            "![auto clipping](auto_clip.png)",
        ]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _plot_kendall(result: ReliabilityResult, folder: Path, plt) -> None:
    worlds = result.config.worlds
    fig, axes = plt.subplots(
        1, len(worlds), figsize=(4.5 * len(worlds), 10), sharey=True, squeeze=False
    )
    for ax, world in zip(axes[0], worlds, strict=True):
        rows = result.select(world)
        y = np.arange(len(rows))
        med = np.array([r["kendall_median"] for r in rows])
        lo = med - np.array([r["kendall_min"] for r in rows])
        hi = np.array([r["kendall_max"] for r in rows]) - med
        colours = ["0.6" if r["source"] is None else "C0" for r in rows]
        ax.barh(y, med, color=colours, xerr=[lo, hi], error_kw={"lw": 0.8})
        ax.axvline(WARN_KENDALL, color="k", lw=0.8, ls="--")
        ax.set_yticks(y, [r["configuration"] for r in rows], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlim(-1, 1)
        ax.set_xlabel("Kendall τ with online reward (median, min–max over worlds)")
        ax.set_title(world, fontsize=9)
    save(fig, folder / "kendall.png", dpi=100)


def _plot_ess(result: ReliabilityResult, folder: Path, plt) -> None:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for k, world in enumerate(result.config.worlds):
        runs = [r for r in result.runs if r["world"] == world and r["source"] is not None]
        ax.scatter(
            [max(r["min_ess_ratio"], 1e-6) for r in runs],
            [r["kendall"] for r in runs],
            s=6,
            alpha=0.4,
            color=f"C{k}",
            label=world,
        )
    ax.axvline(ESS_RATIO_THRESHOLD, color="k", lw=0.8, ls="--", label="ESS/n threshold")
    ax.axhline(WARN_KENDALL, color="0.4", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("smallest ESS/n over the pool (one world)")
    ax.set_ylabel("Kendall τ with online reward")
    ax.legend(fontsize=8)
    save(fig, folder / "ess_vs_kendall.png", dpi=110)


def _plot_gamma(result: ReliabilityResult, folder: Path, plt) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    wrong, power = [], []
    for g in GAMMA_GRID:
        est = [r for r in result.run_measures(g) if r["source"] in ESTIMATED]
        wrong.append(np.mean([r["wrong_sign_gamma95"] for r in est]))
        power.append(np.nanmean([r["power_gamma95"] for r in est]))
    ax.plot(GAMMA_GRID, wrong, "o-", label="wrong-sign significant (share of pairs)")
    ax.plot(GAMMA_GRID, power, "s-", label="power")
    ax.axvline(result.gamma0(), color="k", lw=0.8, ls="--", label=f"Γ₀ = {result.gamma0():g}")
    ax.set_xscale("log")
    ax.set_xlabel("Γ₀ (verdicts kept when Γ*₉₅ ≥ Γ₀)")
    ax.set_ylabel("mean over runs with estimated propensities")
    ax.legend(fontsize=8)
    save(fig, folder / "gamma.png", dpi=110)


def _plot_auto_clip(result: ReliabilityResult, folder: Path, plt) -> None:
    # The first world seed of the last size, one panel per world kind and propensity source.
    size = result.default_world()
    shown = [(key, s) for key, s in result.examples.items() if s is not None and key[:2] == size]
    if not shown:
        return
    cols = len(SOURCES)
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.ravel()[len(shown) :]:
        ax.set_visible(False)
    for ax, ((_, _, world, source), selection) in zip(axes.ravel(), shown, strict=False):
        selection.plot(ax, title=f"{world}, {source} p")
    save(fig, folder / "auto_clip.png", dpi=90)
