"""Which ranking estimator to trust on a log, chosen by the data.

The IPS estimators of :mod:`.ranking_ips` form a nested family of assumptions about how the
reward at a rank depends on the ranking (Kiyohara et al., WSDM 2022, §3; KDD 2023, §3):

    independent (the item at k)  ⊂  cascade (the items at 1..k)  ⊂  standard (all items)

Each weaker assumption is unbiased in more worlds and pays for it in variance: standard IPS
is unbiased under any click model, independent IPS has the smallest weights. SLOPE (Su,
Srinath & Krishnamurthy, ICML 2020, "Adaptive estimator selection for off-policy
evaluation", Algorithm 1) chooses along such a family by Lepski's principle: order the
estimates from the least biased (largest variance) to the most biased, standard → cascade →
independent, give each the interval ``V̂_j ± 2·SE_j``, and keep the last estimate whose
interval meets those of all before it — the most assumption-heavy estimate the data cannot
tell apart from the less assumption-heavy ones. Its error is within a constant factor of the
best bias-plus-deviation trade-off of the family when the bias grows and the deviation
shrinks along the order (Su et al., Theorem 3): the weights cover fewer ranks along it, so
the deviation usually shrinks and the bias usually grows, though neither is guaranteed. The
constant is not small: where a biased estimate sits about two standard errors from the
unbiased one, SLOPE keeps it in part of the logs. The rule is
:func:`~recpack_ope.inference.clipping.slope_index`, the one behind ``clip="auto"``.

Next to the family, :func:`choose_estimator` reports every other estimator whose needs the
inputs meet — adaptive IPS with its behaviour chosen by estimated MSE, cross-fitted
(:mod:`.adaptive_ips`),
Cascade-DR with a reward model (:mod:`.cascade_dr`), the pseudo-inverse estimator with a
Plackett–Luce logging policy (:mod:`.pseudo_inverse`), and logged DCG under the
position-based model when the log has exposure propensities and the view curve is given
(:mod:`.logged_dcg`) — and lists those that cannot run with the reason.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_fraction
from ..inference.clipping import slope_index
from ..inference.diagnostics import ReliabilityWarning
from ..inference.result import LoggedEstimate
from ..propensity.discount import Discount
from .adaptive_ips import adaptive_ips
from .cascade_dr import cascade_dr
from .feed_log import FeedLog
from .logged_dcg import logged_dcg
from .pseudo_inverse import pseudo_inverse
from .ranking_ips import cascade_ips, independent_ips, standard_ips

__all__ = ["FAMILY", "EstimatorRow", "EstimatorChoice", "choose_estimator"]

#: The nested family in SLOPE's order: least biased (most variable) first.
FAMILY = ("standard IPS", "cascade IPS", "independent IPS")

_ASSUMPTIONS = {
    "standard IPS": "none: every ranking the target shows has logging probability > 0",
    "cascade IPS": "the reward at rank k depends only on the items at ranks 1..k (cascade)",
    "independent IPS": "the reward at rank k depends only on the item at k (position-based)",
    "adaptive IPS": "the behaviour chosen by estimated MSE holds every rank a reward depends on",
    "cascade DR": "cascade (as cascade IPS), whatever the reward model",
    "pseudo-inverse": "the expected reward is additive over the (item, rank) pairs shown",
    "logged DCG": "position-based views with the given curve δ and clicks = relevance × view",
}


@dataclass(frozen=True, eq=False)
class EstimatorRow:
    """One estimator's result on the log, or why it could not run.

    Attributes
    ----------
    name : str
        ``"standard IPS"``, ``"cascade IPS"``, ``"independent IPS"``, ``"adaptive IPS"``,
        ``"cascade DR"``, ``"pseudo-inverse"`` or ``"logged DCG"``.
    assumption : str
        What the estimator needs to be unbiased.
    estimate : LoggedEstimate or None
        The result; None when it could not run.
    error : str or None
        Why it could not run (the error's message); None when it ran.
    level : float
        Confidence level of :attr:`interval`.
    """

    name: str
    assumption: str
    estimate: LoggedEstimate | None
    error: str | None
    level: float

    @property
    def value(self) -> float:
        """The estimate; NaN when it could not run."""
        return np.nan if self.estimate is None else self.estimate.value

    @property
    def standard_error(self) -> float:
        """Its standard error over sessions; NaN when it could not run."""
        return np.nan if self.estimate is None else self.estimate.standard_error

    @property
    def interval(self) -> tuple[float, float]:
        """Its Student-t interval at :attr:`level`; NaNs when it could not run."""
        if self.estimate is None:
            return (np.nan, np.nan)
        return self.estimate.confidence_interval(self.level)

    @property
    def ess(self) -> float:
        """Kish effective sample size of its weights; NaN when it could not run."""
        return np.nan if self.estimate is None else self.estimate.diagnostics.ess

    @property
    def reasons(self) -> tuple[str, ...]:
        """The reliability criteria that fired on its weights
        (:attr:`~recpack_ope.inference.diagnostics.WeightDiagnostics.reasons`)."""
        return () if self.estimate is None else self.estimate.diagnostics.reasons


@dataclass(frozen=True, eq=False)
class EstimatorChoice:
    """Every applicable estimator on one log and the one SLOPE chose among the nested family.

    Attributes
    ----------
    table : tuple of EstimatorRow
        One row per estimator, the family first in SLOPE's order.
    chosen_name : str
        Name of the chosen estimator.
    """

    table: tuple[EstimatorRow, ...]
    chosen_name: str

    @property
    def chosen(self) -> LoggedEstimate:
        """The chosen estimate."""
        return self.row(self.chosen_name).estimate

    def row(self, name: str) -> EstimatorRow:
        """The row of estimator ``name``.

        Raises
        ------
        KeyError
            For a name not in the table.
        """
        for r in self.table:
            if r.name == name:
                return r
        raise KeyError(f"no estimator {name!r}; the table has {[r.name for r in self.table]}")

    def to_pandas(self):
        """The table as a pandas DataFrame, one row per estimator (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "estimator": [r.name for r in self.table],
                "value": [r.value for r in self.table],
                "standard_error": [r.standard_error for r in self.table],
                "lower": [r.interval[0] for r in self.table],
                "upper": [r.interval[1] for r in self.table],
                "ess": [r.ess for r in self.table],
                "reasons": [", ".join(r.reasons) for r in self.table],
                "chosen": [r.name == self.chosen_name for r in self.table],
                "assumption": [r.assumption for r in self.table],
                "error": [r.error or "" for r in self.table],
            }
        )

    def __repr__(self) -> str:
        level = self.table[0].level
        lines = [
            f"{'estimator':<16} {'value':>10} {'SE':>9} {f'{level:.0%} interval':>23} "
            f"{'ESS':>9}  notes"
        ]
        for r in self.table:
            mark = "*" if r.name == self.chosen_name else " "
            if r.estimate is None:
                lines.append(f"{mark}{r.name:<15} {'—':>10} {'':>9} {'':>23} {'':>9}  {r.error}")
                continue
            lo, hi = r.interval
            notes = ", ".join(r.reasons) or "reliable"
            lines.append(
                f"{mark}{r.name:<15} {r.value:>10.5g} {r.standard_error:>9.3g} "
                f"{f'[{lo:.5g}, {hi:.5g}]':>23} {r.ess:>9.4g}  {notes}"
            )
        lines.append(
            f"* chosen by SLOPE along {' → '.join(FAMILY)}: {self.chosen_name} "
            f"({_ASSUMPTIONS[self.chosen_name]})"
        )
        return "\n".join(lines)


def _run(name: str, call, level: float) -> EstimatorRow:
    """The row of one estimator: its result, or the message of the error that stopped it.
    Reliability warnings are kept out: the row's :attr:`EstimatorRow.reasons` carry them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        try:
            estimate, error = call(), None
        except (ValueError, TypeError) as failure:
            estimate, error = None, str(failure)
    return EstimatorRow(name, _ASSUMPTIONS[name], estimate, error, level)


def choose_estimator(
    log: FeedLog,
    target,
    *,
    discount: Discount | None = None,
    logging=None,
    reward_model=None,
    clip: float | str | None = None,
    view_discount: Discount | None = None,
    level: float = 0.95,
) -> EstimatorChoice:
    """Run every applicable ranking estimator and choose among standard, cascade and
    independent IPS by SLOPE (Su et al., ICML 2020, Algorithm 1; module docstring).

    Parameters
    ----------
    log : FeedLog
        The logged sessions.
    target : policy
        :class:`~recpack_ope.logged.policies.PlackettLuceRanker`,
        :class:`~recpack_ope.logged.policies.DeterministicRanker` or any object with
        ``position_probabilities(log)`` and ``conditional_probabilities(log)``.
    discount : Discount, optional
        Position weights ``α_k`` of the value ``E Σ_k α_k r_k``; default 1 at every rank.
    logging : policy, optional
        Where ``π0`` comes from; default the log's columns (as the IPS estimators). The
        pseudo-inverse estimator runs only with a Plackett–Luce one.
    reward_model : object with ``predict(contexts, items, ranks)``, optional
        ``Q̂_k(x, a)`` of :func:`~recpack_ope.logged.cascade_dr.cascade_dr`, which runs only
        with it.
    clip : float, "auto" or None
        Clipping of every IPS and DR estimator (``"auto"``: each by SLOPE over thresholds).
    view_discount : Discount, optional
        The examination curve ``δ`` of the position-based model, with the target's cutoff;
        logged DCG runs only with it, on the log's ``propensity`` column, and only when the
        value is the expected reward per session (``discount=None``), which it then estimates.
    level : float
        Confidence level of the table's intervals, in (0, 1). SLOPE's own intervals are
        ``± 2·SE`` whatever the level.

    Returns
    -------
    EstimatorChoice

    Raises
    ------
    TypeError
        For a log that is not a FeedLog.
    ValueError
        For a level outside (0, 1), or when no estimator of the family can run (every error
        is quoted).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.logged import FeedLog, PlackettLuceRanker
    >>> rng = np.random.default_rng(0)
    >>> uniform = PlackettLuceRanker.uniform(4)
    >>> rankings = np.argsort(rng.random((200, 4)), axis=1)[:, :2]
    >>> log = FeedLog.from_arrays(
    ...     np.repeat(np.arange(200), 2), rankings.ravel(), np.tile([1, 2], 200),
    ...     (rng.random(400) < 0.3).astype(float), n_items=4)
    >>> target = PlackettLuceRanker(np.array([2.0, 1.0, 0.0, 0.0]))
    >>> choice = choose_estimator(log, target, logging=uniform)
    >>> choice.chosen_name
    'independent IPS'
    >>> for row in choice.table[3:]:
    ...     print(f"{row.name}: {row.error or 'ran'}")
    adaptive IPS: ran
    cascade DR: cascade DR needs reward_model=, the model Q̂_k(x, a)
    pseudo-inverse: ran
    logged DCG: logged DCG needs the view curve δ of the position-based model: pass view_discount=
    """
    if not isinstance(log, FeedLog):
        raise TypeError(f"log must be a FeedLog, got {type(log).__name__}")
    level = check_fraction(level, "level")
    shared = {"discount": discount, "logging": logging, "clip": clip}
    family = dict(zip(FAMILY, (standard_ips, cascade_ips, independent_ips), strict=True))
    rows = [_run(name, lambda f=family[name]: f(log, target, **shared), level) for name in FAMILY]
    rows.append(_run("adaptive IPS", lambda: adaptive_ips(log, target, **shared), level))
    rows.append(_run("cascade DR", lambda: _cascade_dr(log, target, reward_model, shared), level))
    rows.append(
        _run(
            "pseudo-inverse",
            lambda: pseudo_inverse(log, target, logging=logging, discount=discount),
            level,
        )
    )
    rows.append(
        _run("logged DCG", lambda: _logged_dcg(log, target, discount, view_discount, clip), level)
    )
    ran = [r for r in rows[: len(FAMILY)] if r.estimate is not None]
    if not ran:
        raise ValueError(
            "no estimator of the family could run: "
            + "; ".join(f"{r.name}: {r.error}" for r in rows[: len(FAMILY)])
        )
    chosen = ran[
        slope_index(np.array([r.value for r in ran]), np.array([r.standard_error for r in ran]))
    ]
    chosen.estimate.diagnostics.warn(chosen.estimate.name, stacklevel=3, unit="sessions")
    return EstimatorChoice(tuple(rows), chosen.name)


def _cascade_dr(log, target, reward_model, shared: dict) -> LoggedEstimate:
    """Cascade-DR, refused without a reward model."""
    if reward_model is None:
        raise ValueError("cascade DR needs reward_model=, the model Q̂_k(x, a)")
    return cascade_dr(log, target, reward_model=reward_model, **shared)


def _logged_dcg(log, target, discount, view_discount, clip) -> LoggedEstimate:
    """Logged DCG of the position-based model, refused where it estimates another value."""
    if view_discount is None:
        raise ValueError(
            "logged DCG needs the view curve δ of the position-based model: pass view_discount="
        )
    if discount is not None:
        raise ValueError(
            "logged DCG estimates the expected reward per session (α_k = 1), not the "
            f"value discounted by {type(discount).__name__}: pass discount=None"
        )
    if log.propensity is None:
        raise ValueError("logged DCG needs the log's propensity column (exposure ε0)")
    return logged_dcg(log, target, discount=view_discount, clip=clip)
