"""Checks the doubly robust estimators run on any reward model before trusting its output.

A reward model is anything with ``predict(users, items)`` returning click probabilities of
examined items (:mod:`recpack_ope.reward.models`); these checks name what is wrong with one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_reward_model", "predict_rewards"]


def check_reward_model(model, shape: tuple[int, ...] | None = None) -> None:
    """A reward model must have ``predict``; one with a ``shape`` must match the data's
    ``(n_users, n_items)`` (or contexts × items) when ``shape`` is given."""
    if not callable(getattr(model, "predict", None)):
        raise TypeError(
            "reward_model must have a predict(users, items) method returning click "
            f"probabilities (e.g. a RewardMatrix or ScoreCalibration.reward_model(scores)), "
            f"got {type(model).__name__}"
        )
    model_shape = getattr(model, "shape", None)
    if shape is not None and model_shape is not None and tuple(model_shape) != tuple(shape):
        raise ValueError(
            f"reward_model has shape {tuple(model_shape)} but the data has {tuple(shape)} "
            "(users or contexts × items)"
        )


def predict_rewards(model, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """``model.predict(users, items)`` as float64, refused unless one finite value in [0, 1]
    per pair."""
    values = np.asarray(model.predict(users, items))
    if values.shape != users.shape:
        raise ValueError(
            f"reward_model.predict returned shape {values.shape} for {users.size} (user, item) "
            "pairs; it must return one probability per pair"
        )
    if np.iscomplexobj(values) or not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"reward_model.predict must return real probabilities, got {values.dtype}")
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 1))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"reward_model gives {values[k]} for (user {users[k]}, item {items[k]}); click "
            "probabilities must lie in [0, 1]"
        )
    return values
