"""Reward models: the estimated relevance ``ρ̂(u, i)`` that doubly robust estimates need.

``ρ̂(u, i)`` is the probability that user u clicks item i *given that the item is examined*:
under the examination hypothesis ``P(click) = exposure · relevance`` it is the relevance
factor, not the logged click rate (Oosterhuis, TOIS 2023; the direct-method term of Dudík et
al., ICML 2011). A reward model is any object with ``predict(users, items)`` (the
:class:`RewardModel` protocol); this module gives two:

* :class:`RewardMatrix` – given probabilities, one per (user, item), dense or sparse.
* :class:`CalibratedScores` – a recommender's scores mapped to probabilities by a fitted
  :class:`~recpack_ope.reward.calibration.ScoreCalibration`, computed only at the pairs asked
  for.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from .._chunks import rows_per_chunk
from .._sparse import SparseLookup
from .._validation import as_csr, check_float_exact, entry_position, real_array

__all__ = ["CalibratedScores", "RewardMatrix", "RewardModel"]


@runtime_checkable
class RewardModel(Protocol):
    """What the doubly robust estimators need from a reward model.

    ``predict(users, items)`` takes paired 1-D integer arrays of equal length (any length,
    repeats allowed) and returns one float64 probability in [0, 1] per pair: the estimated
    probability ``ρ̂(u, i)`` that user u clicks item i when it is examined. A model that also
    has a ``shape`` attribute ``(n_users, n_items)`` has it checked against the data's shape.
    """

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:  # pragma: no cover
        ...


# --------------------------------------------------------------------------- shared helpers


def check_real(matrix, name: str, *, axes: tuple[str, ...] | None = ("user", "item")):
    """``matrix`` as a sparse matrix or an ndarray of real numbers (bool, int or float).

    A dense one goes through :func:`~recpack_ope._validation.real_array`: a DataFrame is
    aligned by its user and item labels, missing values are refused with their labels, and
    text is refused (never parsed) with its position. A sparse one is returned as given; its
    structure and dtype are checked where it is converted
    (:func:`~recpack_ope._validation.as_csr`). ``axes`` name the dimensions in messages.
    """
    return matrix if sp.issparse(matrix) else real_array(matrix, name, axes=axes)


def check_matrix(matrix, name: str):
    """A real users×items matrix: a canonical float64 CSR copy if sparse, else the 2-D ndarray
    as given (not copied). Integers beyond ±2**53, which float64 would round and so reorder,
    are refused with their (user, item)."""
    matrix = check_real(matrix, name)
    if sp.issparse(matrix):
        return as_csr(matrix, name)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a 2-D users×items matrix, got shape {matrix.shape}")
    check_float_exact(
        matrix, name, lambda k: "(user {}, item {})".format(*np.unravel_index(k, matrix.shape))
    )
    return matrix


def first_bad(matrix, is_bad) -> tuple[int, int] | None:
    """(row, column) of the first entry of a CSR matrix (stored entries) or a 2-D ndarray
    where ``is_bad(float64 values)`` holds, or None when every entry is fine."""
    return (_first_bad_sparse if sp.issparse(matrix) else _first_bad_dense)(matrix, is_bad)


def _first_bad_dense(matrix: np.ndarray, is_bad) -> tuple[int, int] | None:
    """(row, column) of the first entry where ``is_bad(float64 block)`` holds, scanning in row
    chunks so no full-size boolean mask is built; None when every entry is fine."""
    step = rows_per_chunk(matrix.shape[1])
    for start in range(0, matrix.shape[0], step):
        block = np.asarray(matrix[start : start + step], dtype=np.float64)
        bad = np.flatnonzero(is_bad(block))
        if bad.size:
            row, col = divmod(int(bad[0]), matrix.shape[1])
            return start + row, col
    return None


def _first_bad_sparse(matrix: sp.csr_matrix, is_bad) -> tuple[int, int] | None:
    """(row, column) of the first stored entry where ``is_bad(data)`` holds, or None."""
    bad = np.flatnonzero(is_bad(matrix.data))
    return entry_position(matrix, int(bad[0])) if bad.size else None


def check_pairs(users, items, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``users`` and ``items`` as int64 arrays of equal length, every index inside ``shape``."""
    out = []
    for name, values, size, what in (
        ("users", users, shape[0], "n_users"),
        ("items", items, shape[1], "n_items"),
    ):
        arr = np.asarray(values)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of indices, got shape {arr.shape}")
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{name} must hold integer indices, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= size))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"{name}[{k}] = {int(arr[k])} lies outside [0, {size}) ({what} = {size})"
            )
        out.append(arr.astype(np.int64, copy=False))
    if out[0].shape != out[1].shape:
        raise ValueError(
            f"users and items must be paired arrays of equal length, got {out[0].size} users "
            f"and {out[1].size} items"
        )
    return out[0], out[1]


def lookup(matrix, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """float64 ``matrix[users, items]`` of a dense ndarray or a :class:`SparseLookup`."""
    if isinstance(matrix, SparseLookup):
        return matrix(users, items)
    return np.asarray(matrix[users, items], dtype=np.float64)


# --------------------------------------------------------------------------- reward models


class RewardMatrix:
    """Given click probabilities ``ρ̂(u, i)``, one per (user, item).

    Parameters
    ----------
    probabilities : array_like or sparse matrix, shape (n_users, n_items)
        Probability that each user clicks each item when examined, every value finite and in
        [0, 1]. A sparse matrix's missing entries are probability 0 (duplicates are summed,
        as scipy does). Validated and copied (as float64) at construction.

    Examples
    --------
    >>> import numpy as np
    >>> rho = RewardMatrix(np.array([[0.1, 0.5], [0.9, 0.0]]))
    >>> rho.predict(np.array([0, 1, 1]), np.array([1, 0, 1]))
    array([0.5, 0.9, 0. ])
    """

    def __init__(self, probabilities):
        matrix = check_matrix(probabilities, "probabilities")
        bad = first_bad(matrix, lambda v: ~np.isfinite(v) | (v < 0) | (v > 1))
        if bad is not None:
            u, i = bad
            value = float(matrix[u, i])
            raise ValueError(
                f"probabilities has value {value} at (user {u}, item {i}); every reward "
                "probability must be finite and in [0, 1]"
            )
        self._shape = (int(matrix.shape[0]), int(matrix.shape[1]))
        if sp.issparse(matrix):
            self._values = SparseLookup(matrix)
        else:
            self._values = np.array(matrix, dtype=np.float64, copy=True)
            self._values.setflags(write=False)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_users, n_items)``."""
        return self._shape

    def predict(self, users, items) -> np.ndarray:
        """``ρ̂(users[k], items[k])`` for every k, as float64.

        Raises
        ------
        ValueError
            When the arrays are not paired 1-D integer arrays or an index lies outside
            ``shape`` (the message names the first such index).
        """
        users, items = check_pairs(users, items, self._shape)
        return lookup(self._values, users, items)

    def __repr__(self) -> str:
        kind = "sparse" if isinstance(self._values, SparseLookup) else "dense"
        return f"RewardMatrix({kind}, shape={self._shape})"


class CalibratedScores:
    """A score matrix read as probabilities through a calibration: ``σ(a·s_ui + b)``.

    Nothing is computed up front: :meth:`predict` looks up the scores of the pairs asked for
    and maps only those, so a large dense score matrix is neither copied nor transformed.

    Parameters
    ----------
    scores : array_like or sparse matrix, shape (n_users, n_items)
        A recommender's scores. A sparse matrix's missing entries are score 0, as in RecPack's
        CSR predictions (it is copied into canonical CSR form; a dense ndarray is kept as is,
        so changing it later changes the predictions).
    calibration : fitted ScoreCalibration
        Anything with fitted ``slope_`` (a) and ``intercept_`` (b); their values are read once,
        here.

    Raises
    ------
    ValueError
        From :meth:`predict`, when a looked-up score is NaN or infinite (named with its pair).
    """

    def __init__(self, scores, calibration):
        if not (hasattr(calibration, "slope_") and hasattr(calibration, "intercept_")):
            raise ValueError(
                f"calibration {type(calibration).__name__} is not fitted (it has no slope_ and "
                "intercept_): call fit(scores, clicks) on held-out clicks first"
            )
        try:
            slope, intercept = float(calibration.slope_), float(calibration.intercept_)
        except (TypeError, ValueError):
            raise ValueError(
                f"calibration has slope_ {calibration.slope_!r} and intercept_ "
                f"{calibration.intercept_!r}; both must be finite numbers"
            ) from None
        if not (np.isfinite(slope) and np.isfinite(intercept)):
            raise ValueError(
                f"calibration has slope_ {slope} and intercept_ {intercept}; both must be finite"
            )
        matrix = check_matrix(scores, "scores")
        self.slope, self.intercept = slope, intercept
        self._shape = (int(matrix.shape[0]), int(matrix.shape[1]))
        self._scores = SparseLookup(matrix) if sp.issparse(matrix) else matrix

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_users, n_items)``."""
        return self._shape

    def predict(self, users, items) -> np.ndarray:
        """``σ(a · scores[users[k], items[k]] + b)`` for every k, as float64 in [0, 1]."""
        users, items = check_pairs(users, items, self._shape)
        s = lookup(self._scores, users, items)
        bad = np.flatnonzero(~np.isfinite(s))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"scores has value {float(s[k])} at (user {users[k]}, item {items[k]}); scores "
                "must be finite to be calibrated"
            )
        # imported on use: start-up time (docs/performance.md)
        from scipy.special import expit

        return expit(self.slope * s + self.intercept)

    def __repr__(self) -> str:
        return (
            f"CalibratedScores(shape={self._shape}, slope={self.slope:.6g}, "
            f"intercept={self.intercept:.6g})"
        )
