"""A seeded world with exact online reward, and baseline recommenders to evaluate in it.

* ``world``     – ``SimulatedWorld`` (true click probabilities), logging policies,
  ``LoggedFeedback``
* ``baselines`` – popularity, random, item-kNN and EASE recommenders on numpy/scipy
"""

from .world import LoggedFeedback, PopularityPolicy, SimulatedWorld, UniformPolicy

__all__ = ["SimulatedWorld", "PopularityPolicy", "UniformPolicy", "LoggedFeedback"]
