"""A framework's raw item ids, in the order of its item indices.

Frameworks number their items 0..n−1 and keep a map from the raw ids of the data (RecPack's
``dataset.preprocessor.item_id_mapping``, Cornac's ``global_iid_map``).
:func:`raw_ids_by_index` inverts such a map, checking that it is one-to-one, so that values
keyed by raw id (propensities, :func:`~recpack_ope.propensity.weights.propensities_by_raw_id`)
can be placed on the framework's indices.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from .._validation import NonNumericError, first_outside, real_array, shown

__all__ = ["raw_ids_by_index", "propensity_on_indices"]


def raw_ids_by_index(
    item_id_mapping, index_column: str = "iid", framework: str = "RecPack"
) -> np.ndarray:
    """The raw item id of every item index 0..n−1 of an id map.

    Parameters
    ----------
    item_id_mapping : pandas.DataFrame, pandas.Series or mapping
        A DataFrame with the item index column ``index_column`` and one raw item id column
        (RecPack's ``item_id_mapping``), or a Series or mapping raw item id → item index.
    index_column : str
        The DataFrame's item index column (RecPack's ``InteractionMatrix.ITEM_IX``).
    framework : str
        Whose indices these are, for messages.

    Returns
    -------
    numpy.ndarray of object
        Raw item id of each index, in index order.

    Raises
    ------
    ValueError
        When the map is empty or not one-to-one onto 0..n−1 for its n rows: a raw id given
        twice, two raw ids with one index, an index that is not an integer in 0..n−1, a
        missing raw id (None, NaN) — each with the raw id or index named.
    TypeError
        When ``item_id_mapping`` is none of the accepted types.

    Examples
    --------
    >>> import pandas as pd
    >>> from recpack_ope.io.id_maps import raw_ids_by_index
    >>> raw_ids_by_index(pd.DataFrame({"movieId": [50, 7, 300], "iid": [2, 0, 1]})).tolist()
    [7, 300, 50]
    >>> raw_ids_by_index({"b": 1, "a": 0}).tolist()
    ['a', 'b']
    """
    import pandas as pd  # the frameworks bring pandas; the core does not need it

    if isinstance(item_id_mapping, pd.DataFrame):
        others = [c for c in item_id_mapping.columns if c != index_column]
        if index_column not in item_id_mapping.columns or len(others) != 1:
            raise ValueError(
                f"item_id_mapping must have the item index column {index_column!r} and one raw "
                f"item id column; got columns {list(item_id_mapping.columns)}"
            )
        raw_ids = item_id_mapping[others[0]].to_numpy(dtype=object)
        index = item_id_mapping[index_column].set_axis(pd.Index(raw_ids, dtype=object))
    elif isinstance(item_id_mapping, pd.Series):
        raw_ids, index = item_id_mapping.index.to_numpy(dtype=object), item_id_mapping
    elif isinstance(item_id_mapping, Mapping):
        raw_ids = np.array(list(item_id_mapping), dtype=object)
        index = pd.Series(list(item_id_mapping.values()), index=pd.Index(raw_ids, dtype=object))
    else:
        raise TypeError(
            f"item_id_mapping must be {framework}'s id map DataFrame, or a Series or mapping raw "
            f"item id → item index, got {type(item_id_mapping).__name__}"
        )
    n = raw_ids.size
    if n == 0:
        raise ValueError("item_id_mapping is empty: it must map every item's raw id to its index")
    missing = np.flatnonzero(pd.isna(pd.Index(raw_ids, dtype=object)))
    if missing.size:
        k = int(missing[0])
        raise ValueError(
            f"item_id_mapping has a missing raw item id ({raw_ids[k]!r}) for item index "
            f"{shown(index.iloc[k])}: every index needs the raw id of its item"
        )
    try:
        values = real_array(index, "item_id_mapping")
    except NonNumericError:
        # Name the entry by its raw id, the label the map's user knows it by (a scan of the
        # map only once it is refused).
        text = np.flatnonzero([not isinstance(v, (numbers.Number, np.number)) for v in index])
        if not text.size:
            raise
        k = int(text[0])
        raise ValueError(
            f"item_id_mapping has non-numeric value {index.iloc[k]!r} for raw item id "
            f"{raw_ids[k]!r}, not an integer item index"
        ) from None
    if values.dtype.kind not in "iu":
        whole = np.zeros(n, dtype=bool)
        if values.dtype.kind == "f":
            whole = np.isfinite(values) & (values == np.trunc(values))
        bad = np.flatnonzero(~whole)
        if bad.size:
            raise ValueError(
                f"item_id_mapping maps raw item id {raw_ids[bad[0]]!r} to {shown(values[bad[0]])}, "
                "not an integer item index"
            )
    index = values.astype(np.int64)
    repeated = np.flatnonzero(pd.Index(raw_ids, dtype=object).duplicated())
    if repeated.size:
        k = int(repeated[0])
        # The ids before the first repeat are distinct, so the earlier one is found once.
        earlier = pd.Index(raw_ids[:k], dtype=object).get_loc(raw_ids[k])
        raise ValueError(
            f"item_id_mapping maps raw item id {raw_ids[k]!r} to item indices {index[earlier]} "
            f"and {index[k]}; each raw id has one index"
        )
    k = first_outside(index, n)
    if k is not None:
        raise ValueError(
            f"item_id_mapping maps raw item id {raw_ids[k]!r} to item index {index[k]}, outside "
            f"0..{n - 1}: {framework} numbers the {n} items of the map 0..{n - 1}"
        )
    order = np.argsort(index, kind="stable")
    shared = np.flatnonzero(index[order][1:] == index[order][:-1])
    if shared.size:
        first, second = order[shared[0]], order[shared[0] + 1]
        raise ValueError(
            f"item_id_mapping gives item index {index[first]} to raw item ids {raw_ids[first]!r} "
            f"and {raw_ids[second]!r}; each index belongs to one raw id"
        )
    return raw_ids[order]


def propensity_on_indices(
    propensity, item_id_mapping, index_column: str = "iid", framework: str = "RecPack"
):
    """``propensity`` on a framework's item indices: a mapping or Series keyed by raw item id
    is placed through ``item_id_mapping`` (:func:`raw_ids_by_index`) as a fitted
    :class:`~recpack_ope.propensity.models.FixedPropensity`; anything else is returned as it is,
    and then ``item_id_mapping`` must be None (it would be ignored).

    Parameters
    ----------
    propensity : mapping, pandas.Series, propensity model, array_like or None
        Propensities; keyed by raw item id when a mapping or Series.
    item_id_mapping : pandas.DataFrame, pandas.Series, mapping or None
        The framework's id map, as for :func:`raw_ids_by_index`.
    index_column, framework : str
        As for :func:`raw_ids_by_index`.

    Returns
    -------
    FixedPropensity or the given ``propensity``

    Examples
    --------
    >>> from recpack_ope.io.id_maps import propensity_on_indices
    >>> propensity_on_indices({"b": 0.5, "a": 0.25}, {"a": 0, "b": 1}).propensity_.tolist()
    [0.25, 0.5]
    """
    import pandas as pd

    from ..propensity.models import FixedPropensity
    from ..propensity.weights import propensities_by_raw_id

    if isinstance(propensity, (Mapping, pd.Series)):
        if item_id_mapping is None:
            raise ValueError(
                f"propensities keyed by raw item id need item_id_mapping, {framework}'s id map, "
                "to be placed on its item indices"
            )
        raw_ids = raw_ids_by_index(item_id_mapping, index_column, framework)
        return FixedPropensity(propensities_by_raw_id(propensity, raw_ids, f"{framework}'s")).fit()
    if item_id_mapping is not None:
        raise ValueError(
            "item_id_mapping only places propensities keyed by raw item id (a mapping or "
            f"Series); with propensity={type(propensity).__name__} it would be ignored: drop it"
        )
    return propensity
