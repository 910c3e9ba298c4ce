"""Input checks shared by the estimators and propensity models.

Every message names the offending value and where it sits, so a user can find it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp


def as_csr(matrix, name: str) -> sp.csr_matrix:
    """Canonical float64 CSR copy of a users×items matrix (dense or sparse)."""
    if sp.issparse(matrix):
        out = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    else:
        arr = np.asarray(matrix, dtype=np.float64)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D users×items matrix, got shape {arr.shape}")
        out = sp.csr_matrix(arr)
    out.sum_duplicates()
    out.sort_indices()
    return out


def entry_position(matrix: sp.csr_matrix, k: int) -> tuple[int, int]:
    """(row, column) of the k-th stored entry of a CSR matrix."""
    row = int(np.searchsorted(matrix.indptr, k, side="right") - 1)
    return row, int(matrix.indices[k])


def check_rewards(
    y_true: sp.csr_matrix, name: str = "y_true", what: str = "rewards must be finite and >= 0"
) -> None:
    """Rewards must be finite and non-negative (Jeunen et al. Eq. 10 needs ``c ≥ 0``); the
    message names the matrix (``name``) and the rule (``what``)."""
    bad = np.flatnonzero(~np.isfinite(y_true.data) | (y_true.data < 0))
    if bad.size:
        u, i = entry_position(y_true, bad[0])
        raise ValueError(
            f"{name} has {'reward' if name == 'y_true' else 'value'} {float(y_true.data[bad[0]])} "
            f"at (user {u}, item {i}); {what}"
        )


def check_propensities(values: np.ndarray, describe: Callable[[int], str]) -> None:
    """Propensities are probabilities of exposure: finite and in (0, 1].

    ``describe(k)`` names the k-th value for the error message, e.g. ``"item 17"``.
    """
    bad = ~np.isfinite(values) | (values <= 0) | (values > 1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"propensity {float(values[k])} of {describe(k)} lies outside (0, 1]; "
            "propensities are exposure probabilities"
        )


def check_positive_int(value, name: str, *, allow_none: bool = False) -> int | None:
    """``value`` as an int >= 1 (or None where allowed); the message names the parameter."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        options = " or None" if allow_none else ""
        raise ValueError(f"{name} must be a positive integer{options}, got {value!r}")
    return int(value)


def check_clip(clip, *, allow_auto: bool = False) -> float | str:
    """Clipping threshold m of ``w = min(m, 1/p)`` (Jeunen et al. §6.2).

    None means no clipping (m = ∞, returned as ``inf``); ``"auto"``, where the estimator can
    select m from the data, is returned as is. Anything else must be a finite number > 0.
    """
    options = "a finite number > 0, None for no clipping" + (' or "auto"' if allow_auto else "")
    if clip is None:
        return np.inf
    if isinstance(clip, str) and allow_auto and clip == "auto":
        return clip
    if isinstance(clip, (bool, str)) or not isinstance(clip, (int, float, np.integer, np.floating)):
        raise ValueError(f"clip must be {options}, got {clip!r}")
    m = float(clip)
    if not (np.isfinite(m) and m > 0):
        raise ValueError(f"clip must be {options}, got {clip!r}")
    return m
