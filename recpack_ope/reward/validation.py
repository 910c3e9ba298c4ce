"""Checks the doubly robust estimators run on any reward model before trusting its output.

A reward model is anything with ``predict(users, items)`` returning click probabilities of
examined items (:mod:`recpack_ope.reward.models`); these checks name what is wrong with one.
"""

from __future__ import annotations

import numpy as np

from .._validation import real_array

__all__ = ["check_reward_model", "predict_rewards"]


def check_reward_model(model, shape: tuple[int, ...] | None = None, data: str = "the data") -> None:
    """A reward model must have ``predict``; one with a ``shape`` must match the data's
    ``(n_users, n_items)`` (or contexts × items) when ``shape`` is given (``data`` names that
    data in messages, e.g. ``"y_true"``).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.reward import RewardMatrix
    >>> check_reward_model(RewardMatrix(np.full((3, 2), 0.5)), (2, 2), "y_true")
    Traceback (most recent call last):
    ...
    ValueError: reward_model has shape (3, 2) but y_true has (2, 2) (users or contexts × items)
    """
    if not callable(getattr(model, "predict", None)):
        raise TypeError(
            "reward_model must have a predict(users, items) method returning click "
            f"probabilities (e.g. a RewardMatrix or ScoreCalibration.reward_model(scores)), "
            f"got {type(model).__name__}"
        )
    model_shape = getattr(model, "shape", None)
    if shape is not None and model_shape is not None and tuple(model_shape) != tuple(shape):
        raise ValueError(
            f"reward_model has shape {tuple(model_shape)} but {data} has {tuple(shape)} "
            "(users or contexts × items)"
        )


def predict_rewards(model, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """``model.predict(users, items)`` as float64, refused unless one finite value in [0, 1]
    per pair; text or other non-numbers are refused with a TypeError naming the dtype
    (:class:`~recpack_ope._validation.NonNumericError`), bools read as 0 and 1."""
    values = real_array(model.predict(users, items), "the output of reward_model.predict")
    if values.shape != users.shape:
        raise ValueError(
            f"reward_model.predict returned shape {values.shape} for {users.size} (user, item) "
            "pairs; it must return one probability per pair"
        )
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 1))
    if bad.size:
        k = bad[0]
        raise ValueError(
            f"reward_model gives {values[k]} for (user {users[k]}, item {items[k]}); click "
            "probabilities must lie in [0, 1]"
        )
    return values
