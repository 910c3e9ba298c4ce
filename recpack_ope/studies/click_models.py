"""Which ranking estimator is unbiased under which click model, measured in worlds that meet
and break each one.

Every ranking-level estimator is unbiased under a click model and biased outside it
(:mod:`recpack_ope.logged.ranking_ips`; Kiyohara et al., WSDM 2022, §3): standard IPS under
any, cascade IPS when the click at rank k depends only on the items at ranks 1..k, independent
IPS, logged DCG (Jeunen et al., KDD'24, Eq. 10, with the known view curve) and the
pseudo-inverse estimator (Swaminathan et al., NeurIPS 2017, additive rewards) only under the
position-based model, Cascade-DR (Kiyohara et al. 2022, §3.1; here with a deliberately
imperfect reward model) like cascade IPS; adaptive IPS with the behaviour chosen from the log
(Kiyohara et al., KDD 2023, §4, cross-fitted over two folds) trades bias for variance and is
unbiased under none by construction, and so is the choice among standard ⊃ cascade ⊃
independent IPS that :func:`~recpack_ope.logged.estimator_choice.choose_estimator` makes by
SLOPE (Su et al., ICML 2020, Algorithm 1). The study draws, per world seed, one tiny
:class:`~recpack_ope.simulation.world.SimulatedWorld` of each click model (``"pbm"``,
``"cascade"``, ``"choice"``), small enough that every ranking can be enumerated, so that both
the target's value and every estimator's expectation are exact:

* **truth** ``V(π) = (1/U) Σ_u Σ_a π(a | u) Σ_k P(C_k = 1 | u, a)`` over every ranking ``a``
  of ``feed_length`` items, with the Plackett–Luce probability ``π(a | u)`` (Plackett 1975,
  Eq. 1; Luce 1959) and the click probabilities of
  :meth:`~recpack_ope.simulation.world.SimulatedWorld.expected_clicks`;
* **exact bias** ``E[V̂] − V(π)``: every estimator here but the data-driven choices (adaptive
  IPS's behaviour, SLOPE's estimator) is a mean of per-session values, each affine in its
  session's rewards, so its expectation over the logged clicks is its value with every
  reward replaced by its click probability, and the expectation over the logged rankings the
  sum of those values weighted by the logging policy's probability of each ranking;
* **Monte Carlo**: ``n_replicates`` logs of one feed per user; the mean of the estimates minus
  the truth in units of its standard error, and relative to the truth, the root mean squared
  error relative to the truth, and the share of the estimates' intervals that cover the truth;
* **the choice** (SLOPE): per world, its RMSE over the logs divided by the smallest RMSE of
  the estimators it chooses among on the same logs (the best in hindsight), and how often it
  picked each (:meth:`ClickModelsResult.choice_table`).

Logging is Plackett–Luce over popularity (:class:`~recpack_ope.simulation.world.PopularityPolicy`),
the target Plackett–Luce over each user's true relevance log-odds. Every measure is reported
as min / median / max over the world seeds. Run it with ``recpack-ope reproduce click-models``
(``--quick`` for a small run, ``--estimators`` for some rows only).
"""

from __future__ import annotations

import itertools
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._plots import pyplot, save
from .._validation import check_finite_number, check_fraction, check_positive_int
from ..inference.clipping import slope_index
from ..inference.diagnostics import ReliabilityWarning
from ..inference.result import EstimateResult, LoggedEstimate
from ..logged.adaptive_ips import adaptive_ips
from ..logged.cascade_dr import cascade_dr
from ..logged.estimator_choice import FAMILY
from ..logged.feed_log import FeedLog
from ..logged.logged_dcg import logged_dcg
from ..logged.policies import PlackettLuceRanker
from ..logged.pseudo_inverse import pseudo_inverse
from ..logged.ranking_ips import cascade_ips, independent_ips, standard_ips
from ..propensity.discount import Discount, LogDiscount
from ..simulation.world import CLICK_MODELS, LoggedFeedback, PopularityPolicy, SimulatedWorld
from . import progress_bar
from .reliability import _format_spread, spread

__all__ = [
    "ClickModelsConfig",
    "ClickModelsResult",
    "RankingEstimator",
    "ESTIMATORS",
    "all_rankings",
    "plackett_luce_probabilities",
    "policy_value",
    "expected_estimate",
    "run_click_models",
    "write_report",
]

#: Measures of a run, each reported as min / median / max over world seeds, with its format.
MEASURES = {
    "bias_se": ("bias / SE", "+.1f"),
    "rel_bias": ("bias", "+.1%"),
    "exact_rel_bias": ("exact bias", "+.1%"),
    "rel_rmse": ("RMSE", ".1%"),
    "coverage": ("coverage", ".2f"),
}


@dataclass(frozen=True)
class RankingEstimator:
    """A ranking estimator as the study runs it.

    Attributes
    ----------
    name : str
    estimate : callable
        ``estimate(log, target, logging, world, view)`` → LoggedEstimate, with the target and
        logging Plackett–Luce policies, the simulated world and its view curve ``δ``; for a
        choice among ``candidates``, ``estimate(*their_estimates)`` → the chosen one.
    unbiased_under : tuple of str or None
        The click models under which its assumption holds; None for a data-driven choice
        that trades bias for variance (unbiased under none by construction).
    per_log : bool
        Whether a session's value depends on the other sessions of its log (a choice made on
        the log): then every replicate log is estimated on its own and the estimator has no
        exact expectation here. Otherwise the estimate is a mean of per-session values, each
        affine in its session's rewards.
    candidates : tuple of str
        For a choice among other estimators of :data:`ESTIMATORS` (then ``per_log``): their
        names, in the order ``estimate`` takes them.
    """

    name: str
    estimate: Callable[..., LoggedEstimate]
    unbiased_under: tuple[str, ...] | None
    per_log: bool = False
    candidates: tuple[str, ...] = ()


def _standard(log, target, logging, world, view):
    return standard_ips(log, target, logging=logging)


def _cascade(log, target, logging, world, view):
    return cascade_ips(log, target, logging=logging)


def _independent(log, target, logging, world, view):
    return independent_ips(log, target, logging=logging)


def _dcg(log, target, logging, world, view):
    # The view curve δ pools an item's ranks; its logging exposure ε0 is the log's column.
    return logged_dcg(log, target, discount=view)


def _pseudo_inverse(log, target, logging, world, view):
    return pseudo_inverse(log, target, logging=logging)


def _adaptive(log, target, logging, world, view):
    return adaptive_ips(log, target, logging=logging)


@dataclass(frozen=True, eq=False)
class _ViewedRelevance:
    """``Q̂_k(x, a) = P(Q=1 | x, a) · δ(k)``: the click probability at rank k alone under the
    position-based model, a deliberately imperfect reward model for Cascade-DR (the best
    one also counts the clicks below rank k), which is unbiased with any."""

    world: SimulatedWorld
    view: Discount

    def predict(self, contexts, items, ranks) -> np.ndarray:
        return self.world.relevance_of(contexts, items) * self.view(ranks)


def _cascade_dr(log, target, logging, world, view):
    return cascade_dr(log, target, reward_model=_ViewedRelevance(world, view), logging=logging)


def _slope(*family: LoggedEstimate) -> LoggedEstimate:
    """SLOPE's choice along the family, the rule of
    :func:`~recpack_ope.logged.estimator_choice.choose_estimator`."""
    return family[
        slope_index(
            np.array([e.value for e in family]), np.array([e.standard_error for e in family])
        )
    ]


#: The estimators of the study, with the click models under which each is unbiased.
ESTIMATORS = (
    RankingEstimator("standard IPS", _standard, ("pbm", "cascade", "choice")),
    RankingEstimator("cascade IPS", _cascade, ("pbm", "cascade")),
    RankingEstimator("independent IPS", _independent, ("pbm",)),
    RankingEstimator("logged DCG", _dcg, ("pbm",)),
    RankingEstimator("pseudo-inverse", _pseudo_inverse, ("pbm",)),
    RankingEstimator("cascade DR", _cascade_dr, ("pbm", "cascade")),
    RankingEstimator("adaptive IPS (auto)", _adaptive, None, per_log=True),
    RankingEstimator("SLOPE choice", _slope, None, per_log=True, candidates=FAMILY),
)
_BY_NAME = {e.name: e for e in ESTIMATORS}


@dataclass(frozen=True)
class ClickModelsConfig:
    """Settings of the study. ``n_seeds`` world seeds (``seed, seed + 1, …``) per click model
    and ``n_replicates`` logs per world; both default to the full study (10 seeds, 100 logs)
    or, with ``quick``, to 3 seeds and 20 logs. Worlds have ``n_items`` items, so
    ``n_items! / (n_items − feed_length)!`` rankings are enumerated per user. ``estimators``
    names the rows of :data:`ESTIMATORS` to run (default all)."""

    worlds: tuple[str, ...] = CLICK_MODELS
    estimators: tuple[str, ...] | None = None
    n_seeds: int | None = None
    n_replicates: int | None = None
    n_users: int = 100
    n_items: int = 8
    n_factors: int = 2
    base_logit: float = 0.0
    feed_length: int = 3
    logging_temperature: float = 1.0
    target_temperature: float = 1.0
    level: float = 0.95
    seed: int = 0
    quick: bool = False

    def __post_init__(self) -> None:
        seeds, replicates = (3, 20) if self.quick else (10, 100)
        if self.n_seeds is None:
            object.__setattr__(self, "n_seeds", seeds)
        if self.n_replicates is None:
            object.__setattr__(self, "n_replicates", replicates)
        unknown = [w for w in self.worlds if w not in CLICK_MODELS]
        if unknown or not self.worlds:
            raise ValueError(
                f"worlds must be a non-empty subset of {CLICK_MODELS}, got {self.worlds!r}"
            )
        if self.estimators is not None and (
            not self.estimators or any(e not in _BY_NAME for e in self.estimators)
        ):
            raise ValueError(
                f"estimators must be a non-empty subset of {tuple(_BY_NAME)}, "
                f"got {self.estimators!r}"
            )
        for name in ("n_seeds", "n_users", "n_items", "n_factors", "feed_length"):
            check_positive_int(getattr(self, name), name)
        if check_positive_int(self.n_replicates, "n_replicates") < 2:
            raise ValueError(
                f"n_replicates must be >= 2 (a standard error needs two), got {self.n_replicates}"
            )
        if self.feed_length > self.n_items:
            raise ValueError(
                f"feed_length={self.feed_length} exceeds the number of items ({self.n_items})"
            )
        if math.perm(self.n_items, self.feed_length) > 10_000:
            raise ValueError(
                f"{self.n_items} items in feeds of {self.feed_length} make "
                f"{math.perm(self.n_items, self.feed_length)} rankings to enumerate per user; "
                "keep it at most 10,000"
            )
        check_finite_number(self.base_logit, "base_logit")
        check_finite_number(self.logging_temperature, "logging_temperature", above=0)
        check_finite_number(self.target_temperature, "target_temperature", above=0)
        check_fraction(self.level, "level")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")

    @property
    def world_seeds(self) -> range:
        """The world seeds of every click model."""
        return range(self.seed, self.seed + self.n_seeds)

    @property
    def selected(self) -> tuple[RankingEstimator, ...]:
        """The estimators to run, in the order of :data:`ESTIMATORS`."""
        return tuple(e for e in ESTIMATORS if self.estimators is None or e.name in self.estimators)


def all_rankings(n_items: int, length: int) -> np.ndarray:
    """Every ranking of ``length`` distinct items out of ``n_items``, one per row.

    Examples
    --------
    >>> all_rankings(3, 2).tolist()
    [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]
    """
    check_positive_int(n_items, "n_items")
    if check_positive_int(length, "length") > n_items:
        raise ValueError(f"length={length} exceeds n_items={n_items}")
    return np.array(list(itertools.permutations(range(n_items), length)), dtype=np.int64)


def plackett_luce_probabilities(log_weights, rankings) -> np.ndarray:
    """Probability of each ranking under Plackett–Luce with weights ``exp(log_weights)``:
    ``Π_k w_{a_k} / (Σ_i w_i − Σ_{j<k} w_{a_j})`` (Plackett 1975, Eq. 1).

    Parameters
    ----------
    log_weights : array_like, shape (n_items,) or (n_contexts, n_items)
        Log-weights of one policy, or of one policy per context.
    rankings : array_like of int, shape (n_rankings, K)

    Returns
    -------
    numpy.ndarray, shape (n_rankings,) or (n_contexts, n_rankings)

    Examples
    --------
    >>> plackett_luce_probabilities(np.log([1.0, 2.0, 1.0]), [[1, 0], [0, 2]]).round(12).tolist()
    [0.25, 0.083333333333]
    """
    # imported on use: start-up time (docs/performance.md)
    from scipy.special import logsumexp

    lw = np.asarray(log_weights, dtype=np.float64)
    rankings = np.asarray(rankings)
    n, k = rankings.shape
    # drawn[r, j, i]: item i is drawn above rank j + 1 of ranking r. In log space, so that
    # weights far apart (a near-deterministic policy) neither underflow nor divide 0 by 0.
    drawn = np.zeros((n, k, lw.shape[-1]), dtype=bool)
    for j in range(1, k):
        drawn[:, j] = drawn[:, j - 1]
        drawn[np.arange(n), j, rankings[:, j - 1]] = True
    left = logsumexp(np.where(drawn, -np.inf, lw[..., None, None, :]), axis=-1)
    return np.exp((lw[..., rankings] - left).sum(axis=-1))


def policy_value(
    world: SimulatedWorld, log_weights, feed_length: int, discount: Discount
) -> np.ndarray:
    """Exact expected clicks per user of a Plackett–Luce policy under the world's click model,
    by enumerating its rankings: ``Σ_a π(a | u) Σ_k P(C_k = 1 | u, a)``.

    Parameters
    ----------
    world : SimulatedWorld
    log_weights : array_like, shape (n_items,) or (n_users, n_items)
        The policy's Plackett–Luce log-weights (scores / temperature).
    feed_length : int
        K, items per feed.
    discount : Discount
        The world's view curve ``δ``.

    Returns
    -------
    numpy.ndarray, shape (n_users,)

    Examples
    --------
    >>> world = SimulatedWorld(n_users=2, n_items=4, n_factors=2, click_model="choice")
    >>> policy_value(world, np.zeros(4), 2, LogDiscount()).shape
    (2,)
    """
    rankings = all_rankings(world.n_items, feed_length)
    n = rankings.shape[0]
    probability = np.broadcast_to(
        plackett_luce_probabilities(log_weights, rankings), (world.n_users, n)
    )
    users = np.repeat(np.arange(world.n_users), n)
    clicks = world.expected_clicks(users, np.tile(rankings, (world.n_users, 1)), discount)
    return (probability * clicks.sum(axis=1).reshape(world.n_users, n)).sum(axis=1)


def expected_estimate(
    world: SimulatedWorld,
    logged: LoggedFeedback,
    estimator: RankingEstimator,
    target: PlackettLuceRanker,
    logging: PlackettLuceRanker,
) -> float:
    """Exact expectation of an estimator over logs of one feed per user of ``logged``'s
    Plackett–Luce logging policy (module docstring): every (user, ranking) is one session
    whose rewards are its click probabilities, and the sessions' values are averaged with
    the logging probabilities of their rankings. Valid for estimators linear in the rewards
    whose session values depend only on their own session and are affine in its rewards, as
    every one of :data:`ESTIMATORS` but the per-log ones is (unclipped).

    Examples
    --------
    >>> from recpack_ope.logged import PlackettLuceRanker
    >>> world = SimulatedWorld(n_users=3, n_items=4, n_factors=2, seed=1)
    >>> logged = world.log(PopularityPolicy(), feed_length=2, discount=LogDiscount(cutoff=2))
    >>> logging = PlackettLuceRanker(np.log(world.popularity), method="exact")
    >>> target = PlackettLuceRanker(np.zeros(4), method="exact")
    >>> truth = policy_value(world, np.zeros(4), 2, logged.discount).mean()
    >>> bool(abs(expected_estimate(world, logged, ESTIMATORS[0], target, logging) - truth) < 1e-12)
    True
    """
    if logged.segment is not None or logged.logging_weights is None:
        raise ValueError("expected_estimate needs a log of one Plackett–Luce policy for every user")
    k = logged.feed_length
    rankings = all_rankings(world.n_items, k)
    n, users = rankings.shape[0], world.n_users
    items = np.tile(rankings, (users, 1))
    user = np.repeat(np.arange(users), n)
    clicks = world.expected_clicks(user, items, logged.discount)
    log = FeedLog.from_arrays(
        np.repeat(np.arange(users * n), k),
        items.ravel(),
        np.tile(np.arange(1, k + 1), users * n),
        clicks.ravel(),
        context=np.repeat(user, k),
        propensity=logged.exposure[items.ravel()],
        logging_weight=logged.logging_weights[items.ravel()],
        n_items=world.n_items,
        n_contexts=users,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        terms = estimator.estimate(log, target, logging, world, logged.discount).terms
    probability = plackett_luce_probabilities(np.log(logged.logging_weights), rankings)
    return float((terms.reshape(users, n) @ probability).mean())


@dataclass(frozen=True, eq=False)
class ClickModelsResult:
    """One record per (click model, world seed, estimator): the truth, the exact expectation
    and the Monte Carlo measures of the module docstring."""

    config: ClickModelsConfig
    records: list = field(repr=False)
    seconds: float

    def summary(self) -> list[dict]:
        """Per (estimator, click model): whether its assumption holds and min / median / max
        over world seeds of every measure of :data:`MEASURES`."""
        rows = []
        for estimator in self.config.selected:
            for world in self.config.worlds:
                mine = [
                    r
                    for r in self.records
                    if r["estimator"] == estimator.name and r["world"] == world
                ]
                row = {
                    "estimator": estimator.name,
                    "world": world,
                    "unbiased": None
                    if estimator.unbiased_under is None
                    else world in estimator.unbiased_under,
                }
                for key in MEASURES:
                    row[key] = spread(r[key] for r in mine)
                rows.append(row)
        return rows

    def table(self) -> str:
        """Markdown table of :meth:`summary` (cells: min / median / max over world seeds)."""
        head = [
            "estimator",
            "world",
            "assumption holds",
            *(label for label, _ in MEASURES.values()),
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.summary():
            holds = {True: "yes", False: "no", None: "—"}[row["unbiased"]]
            cells = [row["estimator"], row["world"], holds]
            cells += [_format_spread(row[key], fmt) for key, (_, fmt) in MEASURES.items()]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def finding(self) -> str:
        """Largest |bias / SE| where the assumptions hold, smallest where they break."""
        rows = self.summary()
        held = [
            max(abs(row["bias_se"][0]), abs(row["bias_se"][2]))
            for row in rows
            if row["unbiased"] is True
        ]
        broken = [row for row in rows if row["unbiased"] is False]
        ratios = [r["rmse_ratio"] for r in self.records if r["estimator"] == "SLOPE choice"]
        parts = []
        if held:
            parts.append(
                f"Where an estimator's click model holds, |bias| ≤ {max(held):.1f} SE in every "
                f"world seed (exact bias {self._largest_exact(True):.1e} of the truth at most)"
            )
        if broken:
            least = min(broken, key=lambda row: min(abs(row["bias_se"][0]), abs(row["bias_se"][2])))
            parts.append(
                f"where it breaks, the least detectable bias is {least['estimator']} in the "
                f"{least['world']} world: {_format_spread(least['bias_se'], '+.1f')} SE"
            )
        if ratios:
            parts.append(
                f"SLOPE's choice had {_format_spread(spread(ratios), '.2f')} (min / median / "
                f"max over {len(ratios)} worlds) times the RMSE of the best of "
                f"{', '.join(FAMILY)} in hindsight"
            )
        text = "; ".join(parts)
        return text[:1].upper() + text[1:] + "."

    def choice_table(self) -> str:
        """Markdown table of SLOPE's choice per click model and over all of them: min /
        median / max over world seeds of its RMSE ÷ the best RMSE of its candidates on the
        same logs, and the share of the logs in which it picked each candidate."""
        head = ["world", "RMSE ÷ best in hindsight", *(f"picked {c}" for c in FAMILY)]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        mine = [r for r in self.records if r["estimator"] == "SLOPE choice"]
        for world in (*self.config.worlds, "all"):
            rows = [r for r in mine if world in ("all", r["world"])]
            picks = sum(r["picked"][c] for r in rows for c in FAMILY)
            cells = [world, _format_spread(spread(r["rmse_ratio"] for r in rows), ".2f")]
            cells += [f"{sum(r['picked'][c] for r in rows) / picks:.0%}" for c in FAMILY]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def _largest_exact(self, unbiased: bool) -> float:
        by_name = {e.name: e.unbiased_under for e in ESTIMATORS}
        return max(
            abs(r["exact_rel_bias"])
            for r in self.records
            if by_name[r["estimator"]] is not None
            and (r["world"] in by_name[r["estimator"]]) == unbiased
        )


def run_click_models(
    config: ClickModelsConfig = ClickModelsConfig(), *, progress: bool = True
) -> ClickModelsResult:
    """Run the study; see the module docstring."""
    start = time.perf_counter()
    tasks = [(world, seed) for world in config.worlds for seed in config.world_seeds]
    records = []
    for world, seed in progress_bar(tasks, desc="worlds", show=progress):
        records += _evaluate_world(config, world, seed)
    return ClickModelsResult(config, records, time.perf_counter() - start)


def _evaluate_world(config: ClickModelsConfig, kind: str, seed: int) -> list[dict]:
    """The records of every estimator in one world."""
    world = SimulatedWorld(
        n_users=config.n_users,
        n_items=config.n_items,
        n_factors=config.n_factors,
        base_logit=config.base_logit,
        seed=seed,
        click_model=kind,
    )
    view = LogDiscount(cutoff=config.feed_length)
    relevance = world.relevance()
    scores = np.log(relevance) - np.log1p(-relevance)
    target = PlackettLuceRanker(scores, temperature=config.target_temperature, method="exact")
    logging = PlackettLuceRanker(
        np.log(world.popularity), temperature=config.logging_temperature, method="exact"
    )
    truth = float(
        policy_value(world, scores / config.target_temperature, config.feed_length, view).mean()
    )
    r = config.n_replicates
    policy = PopularityPolicy(config.logging_temperature)
    logged = world.log(policy, feed_length=config.feed_length, discount=view, n_feeds=r, seed=0)
    log = logged.feed_log()
    # Per-log estimators see logs of their own, drawn with further seeds of the world's stream.
    own_logs = [
        world.log(policy, feed_length=config.feed_length, discount=view, seed=1 + f).feed_log()
        for f in range(r)
    ]
    records = []
    for estimator in config.selected:
        extra = {"rmse_ratio": math.nan, "picked": None}
        with warnings.catch_warnings():
            # Small logs trip the reliability criteria; the study measures the bias itself.
            warnings.simplefilter("ignore", ReliabilityWarning)
            if estimator.candidates:
                pool = [
                    [_BY_NAME[c].estimate(one, target, logging, world, view) for one in own_logs]
                    for c in estimator.candidates
                ]
                families = list(zip(*pool, strict=True))
                estimates = [estimator.estimate(*family) for family in families]
                picks = [
                    [e is c for c in family].index(True)
                    for e, family in zip(estimates, families, strict=True)
                ]
                best = min(_rmse([e.value for e in p], truth) for p in pool)
                extra = {
                    "rmse_ratio": _rmse([e.value for e in estimates], truth) / best,
                    "picked": {c: picks.count(j) for j, c in enumerate(estimator.candidates)},
                }
                expected = math.nan
            elif estimator.per_log:
                estimates = [
                    estimator.estimate(one, target, logging, world, view) for one in own_logs
                ]
                expected = math.nan
            else:
                estimates = _split(estimator.estimate(log, target, logging, world, view), r)
                expected = expected_estimate(world, logged, estimator, target, logging)
        values = np.array([e.value for e in estimates])
        covered = sum(
            low <= truth <= high
            for low, high in (e.confidence_interval(config.level) for e in estimates)
        )
        se = float(values.std(ddof=1) / math.sqrt(r))
        records.append(
            {
                "world": kind,
                "seed": seed,
                "estimator": estimator.name,
                "truth": truth,
                "expected": expected,
                "mean": float(values.mean()),
                "standard_error": se,
                "bias_se": float((values.mean() - truth) / se),
                "rel_bias": float((values.mean() - truth) / truth),
                "exact_rel_bias": (expected - truth) / truth,
                "rel_rmse": _rmse(values, truth) / truth,
                "coverage": covered / r,
                **extra,
            }
        )
    return records


def _rmse(values, truth: float) -> float:
    return float(np.sqrt(np.mean((np.asarray(values) - truth) ** 2)))


def _split(whole: LoggedEstimate, r: int) -> list[EstimateResult]:
    """The estimates of the ``r`` replicate logs inside a log of ``r`` feeds per user.

    Session ``user · r + feed``: the feeds numbered f of every user form replicate log f. The
    split is valid for estimates that are means of per-session values, which is checked.
    """
    terms = np.asarray(whole.terms, dtype=np.float64).ravel()
    if not np.isclose(whole.value, terms.mean(), rtol=1e-12, atol=1e-15):
        raise ValueError(f"{whole.name} is not a mean of per-session values")
    by_log = terms.reshape(-1, r).T
    return [
        EstimateResult(
            name=whole.name,
            terms=values,
            exponents=(1,),
            user_ids=np.arange(values.size),
            n_excluded_users=0,
        )
        for values in by_log
    ]


def write_report(result: ClickModelsResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``click_models.md``, ``click_models.json`` and (with matplotlib)
    ``click_models.png``, the bias in standard errors of every estimator and world seed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = result.config
    (folder / "click_models.json").write_text(
        json.dumps(
            {"config": asdict(cfg), "summary": result.summary(), "records": result.records},
            indent=1,
        )
    )
    lines = [
        "# Ranking estimators under three click models",
        "",
        f"{cfg.n_seeds} world seeds per click model ({cfg.n_users} users × {cfg.n_items} items, "
        f"feeds of {cfg.feed_length}), {cfg.n_replicates} logs of one feed per user per world; "
        f"min / median / max over world seeds; {result.seconds:.0f} s.",
        "",
        result.table(),
        "",
        result.finding(),
    ]
    if any(e.candidates for e in cfg.selected):
        lines += ["", "SLOPE's choice per click model:", "", result.choice_table()]
    plt = pyplot(plots)
    if plt is not None:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        labels = []
        for j, row in enumerate(result.summary()):
            mine = [
                r["bias_se"]
                for r in result.records
                if r["estimator"] == row["estimator"] and r["world"] == row["world"]
            ]
            ax.scatter(
                np.full(len(mine), j),
                mine,
                s=12,
                color="tab:blue" if row["unbiased"] else "tab:red",
            )
            labels.append(f"{row['estimator']}\n{row['world']}")
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        ax.set_ylabel("bias / SE (blue: assumption holds)")
        save(fig, folder / "click_models.png")
        lines += ["", "![bias](click_models.png)"]
    (folder / "click_models.md").write_text("\n".join(lines) + "\n")
    return folder
