"""Inverse-propensity weights of held-out interactions.

Turns any propensity source (a fitted model from :mod:`recpack_ope.propensity.models`, a
per-item vector, or a users×items sparse matrix) into one propensity ``p_ui`` and one clipped
weight ``w_ui = min(m, 1/p_ui)`` per stored held-out entry (docs/definitions.md, "Notation").
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._sparse import SparseLookup
from .._validation import (
    _is_pandas,
    as_csr,
    check_clip,
    check_propensities,
    entry_position,
    item_values,
    real_array,
    shown,
)
from ..inference.clipping import check_finite_inverse, inverse_propensities

__all__ = [
    "RECOMMENDED_CLIP",
    "VERDICT_CLIP",
    "resolve_propensity",
    "entry_propensities",
    "item_propensities",
    "ips_weights",
    "clip_weights",
    "propensities_by_raw_id",
]

# The clipping that the adapters and PropensityStratifiedEvaluation use unless told otherwise.
# The reliability study (docs/reliability.md, 20 world seeds of four world kinds) chose one m
# shared by every model: of the fixed clippings, m = 100 had the highest median Kendall τ with
# the online ranking in its worst world kind and propensity source. The core estimators keep
# the papers' unclipped form (clip=None) as their default.
RECOMMENDED_CLIP = 100.0

# The clipping of the study's recommended procedure for paired verdicts: power-law IPS-DCG at
# m = 30, trusting a significant verdict only when its robustness Γ* reaches 2; its wrong-sign
# verdicts stayed at or below 2.8 % of the pairs in every world kind and held-out seed.
VERDICT_CLIP = 30.0


def _resolve(propensity):
    """The propensity values behind a model, vector or matrix."""
    if hasattr(propensity, "fit") and not hasattr(propensity, "propensity_"):
        raise ValueError(
            f"{type(propensity).__name__} is not fitted: call fit(...) on the training "
            "interactions before evaluating"
        )
    return getattr(propensity, "propensity_", propensity)


def resolve_propensity(
    propensity, shape: tuple[int, int] | None, data: str = "y_true", name: str = "propensity"
) -> np.ndarray | sp.csr_matrix:
    """The propensities behind a model, vector or matrix, checked against data of ``shape``.

    Parameters
    ----------
    propensity : fitted model, array_like, pandas Series or sparse matrix
        A model contributes its ``propensity_``. A 1-D vector holds one propensity per item;
        a Series is aligned by its item labels (:func:`~recpack_ope._validation.item_values`).
        A users×items sparse matrix may not store an entry twice: propensities are never
        summed.
    shape : (n_users, n_items) or None
        Shape of the data the propensities meet; None checks the propensities alone.
    data, name : str
        Names of that data and of the propensity argument, for messages.

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix
        A float64 vector of ``n_items`` propensities, each in (0, 1], or a canonical CSR
        matrix of ``shape`` whose values are checked where they are looked up.
    """
    p = _resolve(propensity)
    if sp.issparse(p):
        if shape is not None and tuple(p.shape) != tuple(shape):
            raise ValueError(
                f"{name} matrix has shape {p.shape} but {data} has shape {tuple(shape)}"
            )
        return as_csr(p, name, duplicates="refuse")
    if _is_pandas(p, "columns"):
        columns = list(p.columns)
        raise ValueError(
            f"{name} is a pandas DataFrame of shape {p.shape} with columns {columns[:5]}"
            f"{'…' if len(columns) > 5 else ''}: give one propensity per item as a 1-D vector, "
            "a pandas Series indexed by item (e.g. frame.set_index('item')['propensity']) or a "
            "fitted propensity model, or one per (user, item) as a users×items scipy sparse "
            "matrix"
        )
    n_items = None if shape is None else shape[1]
    p = np.asarray(item_values(p, name, n_items), dtype=np.float64)
    if p.ndim != 1:
        users_items = "a users×items" if shape is None else f"a {shape[0]}×{shape[1]}"
        raise ValueError(
            f"{name} is a dense array of shape {p.shape}: give one propensity per item (a 1-D "
            f"vector{'' if shape is None else f' of {shape[1]}'}) or one per (user, item) as "
            f"{users_items} scipy sparse matrix (e.g. scipy.sparse.csr_matrix({name}))"
        )
    if p.size == 0 or (shape is not None and p.shape[0] != shape[1]):
        given = "and holds no propensity" if shape is None else f"but {data} has {shape[1]} items"
        raise ValueError(
            f"{name} has shape {p.shape} {given}; give one propensity per item, or one per "
            "(user, item) as a scipy sparse users×items matrix"
        )
    check_propensities(p, lambda k: f"item {k}", name)
    return p


def entry_propensities(propensity, y_true: sp.csr_matrix, name: str = "propensity") -> np.ndarray:
    """The validated propensity ``p_ui`` of every stored entry of ``y_true``.

    Parameters
    ----------
    propensity : fitted model, 1-D array, pandas Series or sparse matrix
        A model contributes its ``propensity_``. A 1-D array holds one propensity per item
        (a Series is aligned by its item labels); a users×items sparse matrix must store a
        propensity for every held-out (user, item), each once.
    y_true : scipy.sparse.csr_matrix
        Canonical held-out matrix (sorted indices, no explicit zeros).
    name : str
        The propensity argument's name in messages (e.g. ``"stratify_by"``).

    Returns
    -------
    numpy.ndarray
        One propensity in (0, 1] per stored entry, aligned with ``y_true.data``.
    """
    p = resolve_propensity(propensity, y_true.shape, name=name)
    if sp.issparse(p):
        rows = np.repeat(np.arange(y_true.shape[0]), np.diff(y_true.indptr))
        values = np.asarray(p[rows, y_true.indices]).ravel()
        check_propensities(
            values, lambda k: f"held-out (user {rows[k]}, item {y_true.indices[k]})", name
        )
        return values
    return p[y_true.indices]


def item_propensities(
    propensity, users: np.ndarray, items: np.ndarray, shape: tuple[int, int] | None = None
) -> np.ndarray:
    """The validated propensity ``p_ui`` of paired (user, item) arrays, e.g. a target's ranked
    items, which a held-out matrix need not store.

    ``shape`` is that of the data the pairs index; without it the propensities' own extent
    is used, and a pair outside it is refused. A users×items sparse matrix must store every
    pair asked for; the message names the first it lacks.
    """
    p = resolve_propensity(propensity, shape)
    n_users, n_items = p.shape if sp.issparse(p) else (None, p.shape[0])
    outside = (items < 0) | (items >= n_items)
    if n_users is not None:
        outside |= (users < 0) | (users >= n_users)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"(user {users[k]}, item {items[k]}) has no propensity: the propensities cover "
            f"{'' if n_users is None else f'{n_users} users and '}{n_items} items"
        )
    if sp.issparse(p):
        table = SparseLookup(p)
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
        Clipping threshold m, finite and >= 1; None means no clipping.

    Returns
    -------
    numpy.ndarray
        One weight per stored entry of ``y_true``, aligned with ``y_true.data``.
    """
    check_clip(clip)
    if propensity is None:
        return np.ones(y_true.nnz)
    p = entry_propensities(propensity, y_true)
    raw = inverse_propensities(p)
    check_finite_inverse(
        raw,
        clip,
        lambda k: "propensity {!r} of (user {}, item {})".format(
            float(p[k]), *entry_position(y_true, k)
        ),
    )
    return clip_weights(raw, clip)


def clip_weights(raw: np.ndarray, clip: float | None) -> np.ndarray:
    """``min(m, raw)`` for inverse propensities ``raw`` (Jeunen et al. §6.2); None means m = ∞."""
    return np.minimum(raw, check_clip(clip))


def propensities_by_raw_id(propensity, raw_ids: np.ndarray, items: str) -> np.ndarray:
    """Propensities keyed by raw item id, placed on a framework's item indices.

    Parameters
    ----------
    propensity : Mapping or pandas.Series
        One propensity per raw item id (ids the framework does not know are ignored).
    raw_ids : numpy.ndarray of object
        The framework's raw item id of every item index ``0..n−1`` (RecPack's
        ``item_id_mapping``, Cornac's ``global_iid_map``, inverted).
    items : str
        Whose items these are, for messages (e.g. ``"RecPack's"``).

    Returns
    -------
    numpy.ndarray
        The propensity of every item index, in (0, 1].

    Raises
    ------
    ValueError
        A raw id given twice, an item without a propensity, a non-numeric value or one
        outside (0, 1], each with the raw id named.
    """
    import pandas as pd  # the adapters' frameworks bring pandas; the core does not need it

    by_raw = propensity if isinstance(propensity, pd.Series) else pd.Series(dict(propensity))
    repeated = by_raw.index[by_raw.index.duplicated()]
    if repeated.size:
        raise ValueError(
            f"propensity has raw item id {shown(repeated[0])} more than once; give one "
            "propensity per item"
        )
    position = by_raw.index.get_indexer(pd.Index(raw_ids, dtype=object))
    missing = np.flatnonzero(position < 0)
    if missing.size:
        raise ValueError(
            f"no propensity for raw item id {raw_ids[missing[0]]!r} "
            f"({missing.size} of {items} {raw_ids.size} items have none)"
        )
    # Labelled by raw id and ordered by item index: messages name the raw id or the index.
    values = real_array(by_raw.iloc[position], "propensity", axes=("item index",)).astype(
        np.float64
    )
    check_propensities(values, lambda k: f"raw item id {raw_ids[k]!r} (item index {k})")
    return values
