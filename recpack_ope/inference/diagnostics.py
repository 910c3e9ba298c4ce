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
* the share of the estimate carried by the ``⌈n / 100⌉`` largest weights (ties in
  interaction order),
  ``Σ_{j ∈ top} x_j / Σ_j x_j`` with ``x_j`` the interaction's contribution (e.g.
  ``c · w · δ(rank)``);
* how many weights the clipping changed, ``#{j : v_j > m}``, and the clipped mass
  ``Σ_j (v_j − w_j) / Σ_j v_j``, the share of the raw weight that clipping removed.

A :class:`ReliabilityWarning` is issued when ``ESS / n`` falls below a threshold
(:data:`ESS_RATIO_THRESHOLD` unless the estimator is given another).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_fraction

__all__ = [
    "ESS_RATIO_THRESHOLD",
    "ReliabilityWarning",
    "WeightDiagnostics",
    "check_ess_threshold",
    "top_weights",
]

ESS_RATIO_THRESHOLD = 0.1


class ReliabilityWarning(UserWarning):
    """An estimate rests on too few effective interactions to be trusted.

    Filter it like any warning, e.g.
    ``warnings.filterwarnings("ignore", category=ReliabilityWarning)``.
    """


def top_weights(weights: np.ndarray) -> np.ndarray:
    """Positions of the ``⌈n/100⌉`` largest weights, ties in interaction order."""
    return np.argsort(-weights, kind="stable")[: math.ceil(weights.size / 100)]


def share(part: float, total: float) -> float:
    """``part / total``, NaN when the estimate's contributions sum to 0."""
    return part / total if total else math.nan


def check_ess_threshold(threshold: float) -> float:
    """The ESS-ratio threshold as a float in (0, 1]; the message names the argument."""
    try:
        return check_fraction(threshold, "ess_threshold", include_one=True)
    except ValueError:
        raise ValueError(f"ess_threshold must be a number in (0, 1], got {threshold!r}") from None


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

    @property
    def ess_ratio(self) -> float:
        """``ESS / n`` in (0, 1]: 1 when all weights are equal; 0 without interactions."""
        return self.ess / self.n_weights if self.n_weights else 0.0

    @property
    def reliable(self) -> bool:
        """Whether the ESS ratio reaches the threshold."""
        return self.ess_ratio >= self.threshold

    @classmethod
    def from_weights(
        cls,
        raw: np.ndarray,
        weights: np.ndarray,
        top_share: float,
        threshold: float = ESS_RATIO_THRESHOLD,
    ) -> WeightDiagnostics:
        """Diagnostics of one estimate.

        Parameters
        ----------
        raw : numpy.ndarray
            Inverse propensities ``1/p_j`` before clipping, one per evaluated interaction.
        weights : numpy.ndarray
            The weights the estimate used (``min(m, raw)``), aligned with ``raw``.
        top_share : float
            Share of the estimate carried by the interactions :func:`top_weights` picks.
        threshold : float
            ESS ratio below which the estimate is flagged, in (0, 1].
        """
        if weights.size == 0:
            # The estimate rests on no interaction at all: nothing supports it.
            return cls(0, 0.0, 0.0, math.nan, 0, 0.0, check_ess_threshold(threshold))
        return cls(
            n_weights=int(weights.size),
            ess=float(np.sum(weights) ** 2 / np.sum(weights**2)),
            max_weight=float(np.max(weights)),
            top_share=float(top_share),
            n_clipped=int(np.count_nonzero(raw > weights)),
            clipped_mass=float(np.sum(raw - weights) / np.sum(raw)),
            threshold=check_ess_threshold(threshold),
        )

    @classmethod
    def from_contributions(
        cls,
        raw: np.ndarray,
        weights: np.ndarray,
        contributions: np.ndarray,
        threshold: float = ESS_RATIO_THRESHOLD,
    ) -> WeightDiagnostics:
        """Diagnostics of the evaluated interactions of one estimate, each with its
        contribution ``x_j`` to it (aligned with ``raw`` and ``weights``); the top-1 % share
        is computed from them (:func:`top_weights`)."""
        top = top_weights(weights)
        return cls.from_weights(
            raw, weights, share(contributions[top].sum(), contributions.sum()), threshold
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
