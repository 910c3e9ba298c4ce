"""A seeded world with exact online reward, and baseline recommenders to evaluate in it.

* ``world``     – ``SimulatedWorld`` (true click probabilities; position-based, cascade or
  multinomial-logit choice clicks), logging policies (popularity, uniform,
  segment-personalised, two-stage on noisy user factors), ``LoggedFeedback`` with its
  impressions, the true relevance as a reward model (``WorldRelevance``)
* ``baselines`` – popularity, random, item-kNN and EASE recommenders on numpy/scipy
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .baselines import EASE, ItemKNN, Popularity, RandomScores
    from .world import (
        AffinityPolicy,
        LoggedFeedback,
        PersonalisedPolicy,
        PopularityPolicy,
        SimulatedWorld,
        UniformPolicy,
        WorldRelevance,
    )

export_lazily(__name__)

__all__ = [
    "SimulatedWorld",
    "PopularityPolicy",
    "UniformPolicy",
    "PersonalisedPolicy",
    "AffinityPolicy",
    "LoggedFeedback",
    "WorldRelevance",
    "Popularity",
    "RandomScores",
    "ItemKNN",
    "EASE",
]
