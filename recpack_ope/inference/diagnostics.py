"""Whether a weighted estimate can be trusted: diagnostics of its importance weights.

An IPS estimate is a weighted sum; when a few interactions carry most of the weight, its
standard error is itself unreliable and the value is driven by those few. The evaluated
interactions are those that contribute to the estimate: held-out (or rewarded logged)
interactions that the target exposes, ``δ(rank) > 0``. Weights of interactions the target
does not show cannot move its estimate, so they do not enter. The diagnostics of
docs/definitions.md ("Weight diagnostics"), over the n evaluated interactions with weights
``w_j`` (after clipping) and raw inverse propensities ``v_j = 1/p_j`` (before clipping):

* Kish effective sample size ``ESS = (Σ_j w_j)² / Σ_j w_j²`` and its ratio ``ESS / n``;
* the largest weight ``max_j w_j``;
* the share of the estimate carried by the ``T = ⌈n / 100⌉`` largest weights,
  ``Σ_{j ∈ top} x_j / Σ_j x_j`` with ``x_j`` the interaction's contribution (e.g.
  ``c · w · δ(rank)``); when the T-th largest weight is tied, the tied interactions enter
  pro rata (each with the share of T they fill), so the value depends on the weights and
  contributions only, not on the order of the interactions, and merges exactly across
  partitions of the data;
* how many weights the clipping changed, ``#{j : v_j > m}``, and the clipped mass
  ``Σ_j (v_j − w_j) / Σ_j v_j``, the share of the raw weight that clipping removed.

A :class:`ReliabilityWarning` is issued when ``ESS / n`` falls below a threshold
(:data:`ESS_RATIO_THRESHOLD` unless the estimator is given another).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_fraction

__all__ = [
    "ESS_RATIO_THRESHOLD",
    "ReliabilityWarning",
    "WeightDiagnostics",
    "WeightGroups",
    "check_ess_threshold",
]

ESS_RATIO_THRESHOLD = 0.1


class ReliabilityWarning(UserWarning):
    """An estimate rests on too few effective interactions to be trusted.

    Filter it like any warning, e.g.
    ``warnings.filterwarnings("ignore", category=ReliabilityWarning)``.
    """


def share(part: float, total: float) -> float:
    """``part / total``, NaN when the estimate's contributions sum to 0."""
    return part / total if total else math.nan


def check_ess_threshold(threshold: float) -> float:
    """The ESS-ratio threshold as a float in (0, 1]; the message names the argument."""
    try:
        return check_fraction(threshold, "ess_threshold", include_one=True)
    except ValueError:
        raise ValueError(f"ess_threshold must be a number in (0, 1], got {threshold!r}") from None


@dataclass(frozen=True, eq=False)
class WeightGroups:
    """The evaluated interactions grouped by weight: everything the diagnostics need, in a
    form that merges across partitions of the data (concatenate, then :meth:`merged`).

    Attributes
    ----------
    weight : numpy.ndarray
        Distinct weights after clipping, in decreasing order.
    count : numpy.ndarray
        Interactions with that weight.
    contribution : numpy.ndarray
        Sum of their contributions ``x_j``.
    raw : numpy.ndarray
        Sum of their raw inverse propensities ``1/p_j``.
    clipped : numpy.ndarray
        How many of them clipping lowered.
    """

    weight: np.ndarray
    count: np.ndarray
    contribution: np.ndarray
    raw: np.ndarray
    clipped: np.ndarray

    @classmethod
    def from_interactions(
        cls, raw: np.ndarray, weights: np.ndarray, contributions: np.ndarray
    ) -> WeightGroups:
        """Group aligned per-interaction arrays by weight."""
        return cls(
            weights,
            np.ones(weights.size, dtype=np.int64),
            contributions,
            raw,
            (raw > weights).astype(np.int64),
        ).merged()

    @classmethod
    def concatenate(cls, groups) -> WeightGroups:
        """All groups of several tables in one (merge them with :meth:`merged`)."""
        groups = list(groups)
        return cls(
            *(
                np.concatenate([getattr(g, f) for g in groups])
                for f in ("weight", "count", "contribution", "raw", "clipped")
            )
        ).merged()

    def merged(self) -> WeightGroups:
        """Equal weights summed into one group, in decreasing order of weight."""
        order = np.argsort(-self.weight, kind="stable")
        weight = self.weight[order]
        if weight.size == 0:
            return self
        starts = np.flatnonzero(np.r_[True, weight[1:] != weight[:-1]])
        return WeightGroups(
            weight[starts],
            *(
                np.add.reduceat(getattr(self, f)[order], starts)
                for f in ("count", "contribution", "raw", "clipped")
            ),
        )


@dataclass(frozen=True)
class WeightDiagnostics:
    """Diagnostics of the importance weights behind one estimate (module docstring).

    Attributes
    ----------
    n_weights : int
        Evaluated (weighted) interactions n.
    ess : float
        Kish effective sample size of the weights.
    max_weight : float
        Largest weight after clipping.
    top_share : float
        Share of the estimate carried by the ``⌈n/100⌉`` largest weights; NaN when the
        estimate's contributions sum to 0.
    n_clipped : int
        Weights that clipping lowered.
    clipped_mass : float
        Share of the raw inverse-propensity mass that clipping removed.
    threshold : float
        ESS ratio below which the estimate is flagged.
    """

    n_weights: int
    ess: float
    max_weight: float
    top_share: float
    n_clipped: int
    clipped_mass: float
    threshold: float = ESS_RATIO_THRESHOLD
    groups: WeightGroups | None = field(default=None, compare=False, repr=False)

    @property
    def ess_ratio(self) -> float:
        """``ESS / n`` in (0, 1]: 1 when all weights are equal; 0 without interactions."""
        return self.ess / self.n_weights if self.n_weights else 0.0

    @property
    def reliable(self) -> bool:
        """Whether the ESS ratio reaches the threshold."""
        return self.ess_ratio >= self.threshold

    @classmethod
    def from_groups(
        cls, groups: WeightGroups, threshold: float = ESS_RATIO_THRESHOLD
    ) -> WeightDiagnostics:
        """Diagnostics of the interactions in ``groups`` (module docstring); the ``T``-th
        largest weight's group enters the top share pro rata."""
        threshold = check_ess_threshold(threshold)
        n = int(groups.count.sum())
        if n == 0:
            # The estimate rests on no interaction at all: nothing supports it.
            return cls(0, 0.0, 0.0, math.nan, 0, 0.0, threshold, groups)
        top = math.ceil(n / 100)
        before = np.cumsum(groups.count) - groups.count
        filled = np.clip(top - before, 0, groups.count) / groups.count
        weighted = groups.count * groups.weight
        return cls(
            n_weights=n,
            ess=float(weighted.sum() ** 2 / (weighted * groups.weight).sum()),
            max_weight=float(groups.weight[0]),
            top_share=share(float(filled @ groups.contribution), float(groups.contribution.sum())),
            n_clipped=int(groups.clipped.sum()),
            clipped_mass=float((groups.raw.sum() - weighted.sum()) / groups.raw.sum()),
            threshold=threshold,
            groups=groups,
        )

    @classmethod
    def from_contributions(
        cls,
        raw: np.ndarray,
        weights: np.ndarray,
        contributions: np.ndarray,
        threshold: float = ESS_RATIO_THRESHOLD,
    ) -> WeightDiagnostics:
        """Diagnostics of the evaluated interactions of one estimate: raw inverse
        propensities ``1/p_j``, the weights used (``min(m, 1/p_j)``) and each interaction's
        contribution ``x_j`` to the estimate, aligned."""
        return cls.from_groups(
            WeightGroups.from_interactions(raw, weights, contributions), threshold
        )

    def warn(self, name: str, stacklevel: int = 3) -> None:
        """Issue a :class:`ReliabilityWarning` for estimate ``name`` if it is unreliable."""
        if not self.n_weights:
            warnings.warn(f"{name}: {self.summary()}", ReliabilityWarning, stacklevel=stacklevel)
        elif not self.reliable:
            warnings.warn(
                f"{name}: the weights' effective sample size is {self.ess:.4g} of "
                f"{self.n_weights} interactions (ratio {self.ess_ratio:.3g} < "
                f"{self.threshold:g}); the top 1 % of weights carry {self.top_share:.0%} of the "
                "estimate. Clip the weights (clip=...) or check the propensities.",
                ReliabilityWarning,
                stacklevel=stacklevel,
            )

    def summary(self) -> str:
        """One line: ESS (ratio), largest weight, top-1 % share, clipping."""
        if not self.n_weights:
            return "no evaluated interaction: the target ranks none of the held-out ones"
        return (
            f"ESS {self.ess:.4g} of {self.n_weights} ({self.ess_ratio:.1%}), max weight "
            f"{self.max_weight:.4g}, top 1% of weights carry {self.top_share:.0%}, "
            f"{self.n_clipped} clipped ({self.clipped_mass:.1%} of weight mass)"
        )
