"""Inverse-propensity weights of held-out interactions.

Turns any propensity source (a fitted model from :mod:`recpack_ope.propensity.models`, a
per-item vector, or a users×items sparse matrix) into one propensity ``p_ui`` and one clipped
weight ``w_ui = min(m, 1/p_ui)`` per stored held-out entry (docs/definitions.md, "Notation").
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._sparse import SparseLookup
from .._validation import as_csr, check_clip, check_propensities

__all__ = [
    "RECOMMENDED_CLIP", "entry_propensities", "item_propensities", "ips_weights", "clip_weights"
]

# The clipping that the adapters and PropensityStratifiedEvaluation use unless told otherwise.
# The reliability study (docs/reliability.md) supports one m shared by every model: with
# estimated propensities it ranked the pool well in every world (τ 0.82–1.00, regret ≤ 1.1 %),
# while the unclipped estimator picked the random model and per-model "auto" clipping, which
# gives each model its own m, inverted comparisons. The core estimators keep the papers'
# unclipped form (clip=None) as their default.
RECOMMENDED_CLIP = 100.0


def _resolve(propensity):
    """The propensity values behind a model, vector or matrix."""
    if hasattr(propensity, "fit") and not hasattr(propensity, "propensity_"):
        raise ValueError(
            f"{type(propensity).__name__} is not fitted: call fit(...) on the training "
            "interactions before evaluating"
        )
    return getattr(propensity, "propensity_", propensity)


def entry_propensities(propensity, y_true: sp.csr_matrix) -> np.ndarray:
    """The validated propensity ``p_ui`` of every stored entry of ``y_true``.

    Parameters
    ----------
    propensity : fitted model, 1-D array or sparse matrix
        A model contributes its ``propensity_``. A 1-D array holds one propensity per item;
        a users×items sparse matrix must store a propensity for every held-out (user, item).
    y_true : scipy.sparse.csr_matrix
        Canonical held-out matrix (sorted indices, no explicit zeros).

    Returns
    -------
    numpy.ndarray
        One propensity in (0, 1] per stored entry, aligned with ``y_true.data``.
    """
    p = _resolve(propensity)
    if sp.issparse(p):
        if p.shape != y_true.shape:
            raise ValueError(
                f"propensity matrix has shape {p.shape} but y_true has shape {y_true.shape}"
            )
        p = as_csr(p, "propensity")
        rows = np.repeat(np.arange(y_true.shape[0]), np.diff(y_true.indptr))
        values = np.asarray(p[rows, y_true.indices]).ravel()
        check_propensities(values, lambda k: f"held-out (user {rows[k]}, item {y_true.indices[k]})")
        return values
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.shape[0] != y_true.shape[1]:
        raise ValueError(
            f"propensity has shape {p.shape} but y_true has {y_true.shape[1]} items; "
            "give one propensity per item or a users×items matrix"
        )
    check_propensities(p, lambda k: f"item {k}")
    return p[y_true.indices]


def item_propensities(propensity, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The validated propensity ``p_ui`` of paired (user, item) arrays, e.g. a target's ranked
    items, which a held-out matrix need not store.

    A users×items sparse matrix must store every pair asked for; the message names the first
    it lacks.
    """
    p = _resolve(propensity)
    if sp.issparse(p):
        table = SparseLookup(as_csr(p, "propensity"))
        at, found = table.stored(users.astype(np.int64), items)
        missing = np.flatnonzero(~found)
        if missing.size:
            k = missing[0]
            raise ValueError(
                f"the propensity matrix stores no value for (user {users[k]}, item {items[k]}), "
                "which the target ranks; clipped estimates without impressions need the "
                "propensity of every ranked item: give a per-item propensity or impressions="
            )
        values = table.values[at]
        check_propensities(values, lambda k: f"(user {users[k]}, item {items[k]})")
        return values
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"propensity must be 1-D (one per item) or a sparse matrix, got shape {p.shape}")
    check_propensities(p, lambda k: f"item {k}")
    return p[items]


def ips_weights(propensity, y_true: sp.csr_matrix, clip: float | None = None) -> np.ndarray:
    """Clipped inverse-propensity weight ``w_ui = min(m, 1/p_ui)`` of every held-out entry.

    Jeunen et al. (KDD'24) Eq. 10 with the clipping of §6.2.

    Parameters
    ----------
    propensity : None, fitted model, 1-D array or sparse matrix
        ``None`` means ``p ≡ 1`` (all weights 1); otherwise see :func:`entry_propensities`.
    y_true : scipy.sparse.csr_matrix
        Canonical held-out matrix (sorted indices, no explicit zeros).
    clip : float or None
        Clipping threshold m, finite and > 0; None means no clipping.

    Returns
    -------
    numpy.ndarray
        One weight per stored entry of ``y_true``, aligned with ``y_true.data``.
    """
    check_clip(clip)
    if propensity is None:
        return np.ones(y_true.nnz)
    return clip_weights(1.0 / entry_propensities(propensity, y_true), clip)


def clip_weights(raw: np.ndarray, clip: float | None) -> np.ndarray:
    """``min(m, raw)`` for inverse propensities ``raw`` (Jeunen et al. §6.2); None means m = ∞."""
    return np.minimum(raw, check_clip(clip))
