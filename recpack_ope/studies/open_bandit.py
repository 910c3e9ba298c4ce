"""Off-policy estimates of Bernoulli Thompson sampling on the Open Bandit Dataset.

The Open Bandit Dataset (Saito et al., NeurIPS 2021 Datasets and Benchmarks, §5) logged the
same ZOZOTOWN banner under two behaviour policies at once: uniform random and Bernoulli
Thompson sampling (BTS). That gives a real check of off-policy evaluation: estimate the BTS
policy's click rate from the *random* log and compare it with the click rate the *bts* log
observed on-policy. Per campaign (all, men, women), the target is
:class:`~recpack_ope.logged.thompson_sampling.ThompsonSamplingRanker` with the prior the BTS
policy started the week with (:func:`~recpack_ope.io.open_bandit.load_bts_prior`), three
positions, and its exact position probabilities.

Every row of the data is one impression, so the value is the click rate per impression,
``(1/3) Σ_k E_π[r_k]``: the mean click of the bts log on-policy; off-policy, the mean over
the random log's impressions (a third at each position) of

* **independent IPS** (:func:`~recpack_ope.logged.ranking_ips.independent_ips`):
  ``r · π(a at k) / π0(a at k)`` with the logged ``propensity_score`` as ``π0``; unbiased if
  the click at a position depends only on the item and the position;
* **logged DCG with a flat view curve** (:func:`~recpack_ope.logged.logged_dcg.logged_dcg`,
  ``δ = (1, 1, 1)``): ``r · ε(a) / ε0(a)`` with the exposures ``ε(a) = Σ_k π(a at k)`` and
  ``ε0(a) = 3 / n_items``; it pools an item's three positions, so it also assumes that the
  position does not change the click probability.

Estimators of whole rankings or ranking prefixes (standard and cascade IPS, cascade DR, the
pseudo-inverse, adaptive IPS) would need each display's three impressions together; the data
records each impression with its own timestamp, which almost never groups them, so the study
reports them as not applicable, with the library's refusal and the timestamp counts.

The comparison has a limit the data sets: the BTS policy updated its posterior during the
week, so the bts log's click rate is that of a moving policy, while the target is the policy
at its starting prior (as in obp's examples); "covered" says whether the on-policy click rate
lies in the estimate's interval.
"""

from __future__ import annotations

import csv
import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._plots import pyplot, save
from ..inference.diagnostics import ReliabilityWarning
from ..inference.result import EstimateResult
from ..io.open_bandit import CAMPAIGNS, load_bts_prior, load_open_bandit
from ..logged.logged_dcg import logged_dcg
from ..logged.policies import PlackettLuceRanker
from ..logged.ranking_ips import check_whole_rankings, independent_ips
from ..logged.thompson_sampling import ThompsonSamplingRanker
from ..propensity.discount import CustomDiscount
from . import progress_bar

__all__ = ["OpenBanditConfig", "OpenBanditResult", "run_open_bandit", "write_report"]

#: Estimators that weight whole rankings or prefixes: not applicable to single impressions.
RANKING_LEVEL = ("standard_ips", "cascade_ips", "cascade_dr", "pseudo_inverse", "adaptive_ips")
_FIELDS = (
    "campaign",
    "estimator",
    "estimate",
    "low",
    "high",
    "on_policy",
    "on_policy_low",
    "on_policy_high",
    "relative_error",
    "covered",
    "ess",
)


@dataclass(frozen=True)
class OpenBanditConfig:
    """Settings of the study: the campaigns, the data folder (default the ``obp`` sample),
    the interval level and the clipping of the inverse propensities (None: unclipped)."""

    campaigns: tuple[str, ...] = CAMPAIGNS
    path: str | None = None
    level: float = 0.95
    clip: float | None = None


@dataclass(frozen=True, eq=False)
class OpenBanditResult:
    """Per campaign and estimator, the estimate against the on-policy click rate.

    Attributes
    ----------
    rows : list of dict
        One per (campaign, applicable estimator), with the keys of the CSV report.
    not_applicable : dict
        Campaign → {estimator: the library's reason for refusing the random log}.
    logs : dict
        ``"<campaign>/<behavior>"`` → counts of each log (impressions, items, clicks and
        clicks per position, distinct timestamps, timestamps with a single row, whether whole
        rankings can be rebuilt).
    """

    config: OpenBanditConfig
    rows: list = field(repr=False)
    not_applicable: dict = field(repr=False)
    logs: dict = field(repr=False)
    seconds: float

    def table(self) -> str:
        """Plain-text table of every estimate against the on-policy click rate."""
        level = f"{self.config.level:.0%}"
        head = (
            f"{'campaign':<8} {'estimator':<22} {'estimate':>9} {level + ' interval':>22} "
            f"{'on-policy':>9} {'on-policy interval':>22} {'rel. err':>8} {'covered':>7} "
            f"{'ESS':>5}"
        )
        lines = [head, "-" * len(head)]
        for r in self.rows:
            lines.append(
                f"{r['campaign']:<8} {r['estimator']:<22} {r['estimate']:>9.5f} "
                f"{_interval(r['low'], r['high']):>22} {r['on_policy']:>9.5f} "
                f"{_interval(r['on_policy_low'], r['on_policy_high']):>22} "
                f"{r['relative_error']:>+8.1%} {'yes' if r['covered'] else 'no':>7} "
                f"{r['ess']:>5.0f}"
            )
        return "\n".join(lines)

    def findings(self) -> str:
        """The estimators that could not run, and why (once: the reason is the data's)."""
        counts = "; ".join(
            f"{c.split('/')[0]}: {v['impressions']} impressions, {v['timestamps']} timestamps, "
            f"{v['single']} with one row"
            for c, v in self.logs.items()
            if v["behavior"] == "random"
        )
        return (
            f"not applicable: {', '.join(RANKING_LEVEL)} (they weight whole rankings or "
            f"prefixes; each row is one impression and timestamps do not group a display's "
            f"three: {counts})"
        )


def _interval(low: float, high: float) -> str:
    return f"[{low:.5f}, {high:.5f}]"


def on_policy(clicks: np.ndarray) -> EstimateResult:
    """The mean click of a log with its Student-t interval (one term per impression)."""
    clicks = np.asarray(clicks, dtype=np.float64)
    return EstimateResult(
        name="on-policy click rate",
        terms=clicks[:, None],
        exponents=(1,),
        user_ids=np.arange(clicks.size),
        n_excluded_users=0,
    )


def run_open_bandit(
    config: OpenBanditConfig = OpenBanditConfig(), *, progress: bool = True
) -> OpenBanditResult:
    """Run the study; see the module docstring."""
    start = time.perf_counter()
    rows, refused, logs = [], {}, {}
    for campaign in progress_bar(config.campaigns, desc="campaigns", show=progress):
        random = load_open_bandit("random", campaign, path=config.path)
        bts = load_open_bandit("bts", campaign, path=config.path)
        alpha, beta = load_bts_prior(campaign)
        if alpha.size != random.n_items:
            raise ValueError(
                f"the bts prior of campaign {campaign!r} has {alpha.size} items, its log "
                f"{random.n_items}"
            )
        for data in (random, bts):
            logs[f"{campaign}/{data.behavior}"] = {
                "behavior": data.behavior,
                "impressions": data.log.n_rows,
                "items": data.n_items,
                "clicks": int(data.log.reward.sum()),
                "timestamps": int(data.display_sizes.size),
                "single": int(np.sum(data.display_sizes == 1)),
                "rankings_reconstructable": data.rankings_reconstructable,
                "clicks_by_position": np.bincount(
                    data.log.rank - 1, weights=data.log.reward, minlength=3
                ).tolist(),
            }
        target = ThompsonSamplingRanker(alpha, beta, n_ranks=3)
        flat = CustomDiscount(np.ones(3))
        # A few dozen clicks make every weighted estimate "unreliable" by the package's
        # criteria: the table shows each one's effective sample size instead of a warning.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            estimates = {
                "independent IPS": independent_ips(random.log, target, clip=config.clip),
                "logged DCG (flat view)": logged_dcg(
                    random.log,
                    target,
                    discount=flat,
                    logging=PlackettLuceRanker.uniform(random.n_items),
                    clip=config.clip,
                ),
            }
        truth = on_policy(bts.log.reward)
        t_low, t_high = truth.confidence_interval(config.level)
        for name, estimate in estimates.items():
            low, high = estimate.confidence_interval(config.level)
            rows.append(
                {
                    "campaign": campaign,
                    "estimator": name,
                    "estimate": estimate.value,
                    "low": low,
                    "high": high,
                    "on_policy": truth.value,
                    "on_policy_low": t_low,
                    "on_policy_high": t_high,
                    "relative_error": (
                        estimate.value / truth.value - 1.0 if truth.value > 0 else float("nan")
                    ),
                    "covered": bool(low <= truth.value <= high),
                    "ess": estimate.diagnostics.ess,
                }
            )
        refused[campaign] = {name: _refusal(random.log, name) for name in RANKING_LEVEL}
    return OpenBanditResult(config, rows, refused, logs, time.perf_counter() - start)


def _refusal(log, name: str) -> str:
    """The library's reason for not running a ranking-level estimator on ``log``."""
    try:
        check_whole_rankings(log, name)
    except ValueError as error:
        return str(error)
    return ""


def write_report(result: OpenBanditResult, folder: str | Path, *, plots: bool = True) -> Path:
    """Write ``open-bandit.csv``, ``open-bandit.json``, ``open-bandit.md`` and (with
    matplotlib) ``open-bandit.png``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "open-bandit.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=_FIELDS)
        writer.writeheader()
        writer.writerows(result.rows)
    (folder / "open-bandit.json").write_text(
        json.dumps(
            {
                "config": asdict(result.config),
                "estimates": result.rows,
                "not_applicable": result.not_applicable,
                "logs": result.logs,
            },
            indent=1,
        )
    )
    lines = [
        "# Bernoulli Thompson sampling on the Open Bandit Dataset, off-policy from the random log",
        "",
        f"Campaigns {', '.join(result.config.campaigns)}; {result.seconds:.0f} s.",
        "",
        "```text",
        result.table(),
        "```",
        "",
        result.findings() + ".",
    ]
    plt = pyplot(plots)
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for i, r in enumerate(result.rows):
            ax.errorbar(
                i,
                r["estimate"],
                yerr=[[r["estimate"] - r["low"]], [r["high"] - r["estimate"]]],
                fmt="o",
                color="C0",
            )
            ax.errorbar(
                i + 0.2,
                r["on_policy"],
                yerr=[
                    [r["on_policy"] - r["on_policy_low"]],
                    [r["on_policy_high"] - r["on_policy"]],
                ],
                fmt="s",
                color="C1",
            )
        ax.set_xticks(
            np.arange(len(result.rows)) + 0.1,
            [f"{r['campaign']}\n{r['estimator'].split(' (')[0]}" for r in result.rows],
            fontsize=7,
        )
        ax.set_ylabel("click rate per impression")
        ax.legend(["off-policy estimate", "on-policy (bts log)"], fontsize=8, loc="upper left")
        save(fig, folder / "open-bandit.png")
        lines += ["", "![estimates](open-bandit.png)"]
    (folder / "open-bandit.md").write_text("\n".join(lines) + "\n")
    return folder
