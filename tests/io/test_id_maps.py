"""Frameworks' id maps inverted: a bad entry is named by its raw item id, the label the map's
user knows it by, never by its position."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recpack_ope.io.id_maps import raw_ids_by_index


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (
            pd.DataFrame({"movieId": [50, 7, 300], "iid": [2, 0, "x"]}),
            "item_id_mapping has non-numeric value 'x' for raw item id 300, not an integer "
            "item index",
        ),
        (
            {"a": 0, "b": "1"},
            "item_id_mapping has non-numeric value '1' for raw item id 'b', not an integer "
            "item index",
        ),
        (
            pd.DataFrame({"movieId": [50, np.nan, 300], "iid": [2, 0, 1]}),
            "item_id_mapping has a missing raw item id (nan) for item index 0: every index needs "
            "the raw id of its item",
        ),
        (
            pd.Series([1, 0], index=pd.Index(["b", None], dtype=object)),
            "item_id_mapping has a missing raw item id (None) for item index 0: every index "
            "needs the raw id of its item",
        ),
    ],
)
def test_bad_entries_are_named_by_their_raw_id(mapping, message):
    with pytest.raises(ValueError) as refused:
        raw_ids_by_index(mapping)
    assert str(refused.value) == message


def test_raw_ids_beyond_int64_keep_their_value():
    mapping = pd.DataFrame(
        {"movieId": pd.array([2**64 - 1, 2**64 - 2], dtype="uint64"), "iid": [0, 1]}
    )
    assert raw_ids_by_index(mapping).tolist() == [2**64 - 1, 2**64 - 2]
