"""A seeded world with exact online reward, and baseline recommenders to evaluate in it.

* ``world``     – ``SimulatedWorld`` (true click probabilities, position-based or cascade
  clicks), logging policies (popularity, uniform, segment-personalised), ``LoggedFeedback``
  with its impressions, the true relevance as a reward model (``WorldRelevance``)
* ``baselines`` – popularity, random, item-kNN and EASE recommenders on numpy/scipy
"""

from .baselines import EASE, ItemKNN, Popularity, RandomScores
from .world import (
    LoggedFeedback,
    PersonalisedPolicy,
    PopularityPolicy,
    SimulatedWorld,
    UniformPolicy,
    WorldRelevance,
)

__all__ = [
    "SimulatedWorld",
    "PopularityPolicy",
    "UniformPolicy",
    "PersonalisedPolicy",
    "LoggedFeedback",
    "WorldRelevance",
    "Popularity",
    "RandomScores",
    "ItemKNN",
    "EASE",
]
