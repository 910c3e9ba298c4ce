"""Reward models ``ρ̂(u, i)``: the probability that user u clicks item i once it is examined,
the relevance that doubly robust estimates add to their importance-weighted residual.

* ``models``      – the ``RewardModel`` protocol (``predict(users, items)``), given
  probabilities (``RewardMatrix``) and calibrated scores read lazily (``CalibratedScores``)
* ``calibration`` – Platt scaling of a model's scores to click probabilities given
  examination, with or without exposure propensities (``ScoreCalibration``)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .calibration import ScoreCalibration
    from .models import CalibratedScores, RewardMatrix, RewardModel

export_lazily(__name__)

__all__ = ["CalibratedScores", "RewardMatrix", "RewardModel", "ScoreCalibration"]
