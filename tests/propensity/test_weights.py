"""Per-entry propensities and IPS weights: alignment of labelled input, refusal of vectors and
matrices that do not fit the held-out data, and of duplicate sparse entries.

References: held-out entries and their propensities read off by hand, and the unlabelled
arrays a labelled Series stands for.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import coo_with_duplicate, corrupt_indptr, propensity_with_duplicate
from hypothesis import given, settings
from hypothesis import strategies as st

from recpack_ope.propensity.models import FixedPropensity
from recpack_ope.propensity.weights import entry_propensities, ips_weights, item_propensities

Y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1, 0]]))  # held-out (0,0), (0,2), (1,1)


def test_corrupt_sparse_propensity_is_refused_before_use():
    with pytest.raises(ValueError, match=r"propensity is a corrupt"):
        entry_propensities(corrupt_indptr(), sp.csr_matrix(np.eye(3)))


def test_propensity_series_is_aligned_by_item_label():
    p = np.array([0.2, 0.5, 0.8])
    shuffled = pd.Series(p[[2, 0, 1]], index=[2, 0, 1])
    # held-out entries (0,0), (0,2), (1,1) by hand
    np.testing.assert_array_equal(entry_propensities(shuffled, Y), [0.2, 0.8, 0.5])
    np.testing.assert_array_equal(ips_weights(shuffled, Y), 1 / np.array([0.2, 0.8, 0.5]))
    np.testing.assert_array_equal(
        item_propensities(shuffled, np.array([1, 0]), np.array([0, 2])), [0.2, 0.8]
    )


@pytest.mark.parametrize(
    "series, message",
    [
        (pd.Series([0.5, 0.2, 0.9], index=[0, 0, 1]), r"propensity has item 0 more than once"),
        (pd.Series([0.5, 0.2, 0.9], index=[2, 1, 2]), r"propensity has item 2 more than once"),
        (
            pd.Series([0.5, 0.2, 0.9], index=["a", "b", "c"]),
            r"propensity.*Series indexed by labels such as 'a'",
        ),
        (pd.Series([0.5, 0.2], index=[2, 0]), r"propensity has no value for item 1"),
        (pd.Series([0.5, 0.2], index=[0, 1]), r"propensity has no value for item 2"),
        (pd.Series([0.5, 0.2, 0.9, 0.4], index=[0, 1, 5, 2]), r"propensity has item 5, outside"),
        (pd.Series([0.5, 0.2, 0.9], index=[-1, 0, 1]), r"propensity has item -1, outside"),
        (
            pd.Series([0.5, None, 0.9], dtype="Float64", index=[2, 1, 0]),
            r"propensity has a missing value at label (np\.int64\()?1\b",
        ),
    ],
)
def test_propensity_series_with_bad_labels_is_refused(series, message):
    with pytest.raises(ValueError, match=message):
        entry_propensities(series, Y)


@pytest.mark.parametrize("length", [2, 4])
def test_propensity_vector_of_the_wrong_length_is_refused(length):
    p = np.full(length, 0.5)
    expected = rf"propensity has shape \({length},\) but y_true has 3 items"
    with pytest.raises(ValueError, match=expected):
        entry_propensities(p, Y)
    with pytest.raises(ValueError, match=expected):
        ips_weights(FixedPropensity(p).fit(), Y, clip=10)
    with pytest.raises(ValueError, match=expected):
        item_propensities(p, np.array([0]), np.array([1]), shape=(2, 3))


def test_messages_name_the_argument_the_propensities_came_from():
    with pytest.raises(ValueError, match=r"stratify_by has shape \(2,\) but y_true has 3 items"):
        entry_propensities(np.full(2, 0.5), Y, name="stratify_by")
    with pytest.raises(ValueError, match=r"stratify_by has item 0 more than once"):
        entry_propensities(pd.Series([0.5, 0.5, 0.5], index=[0, 0, 1]), Y, name="stratify_by")
    with pytest.raises(ValueError, match=r"stratify_by stores \(user 0, item 2\) more than once"):
        entry_propensities(coo_with_duplicate(), Y, name="stratify_by")


@pytest.mark.parametrize("bad", [np.nan, -0.5, 0.0, 1.5, np.inf])
def test_a_value_outside_the_unit_interval_names_the_argument_it_came_from(bad):
    values = np.array([0.5, bad, 0.25])
    # stratify_by: named; propensity: the message it always had
    for name, prefix in (("stratify_by", "stratify_by: "), ("propensity", "")):
        with pytest.raises(ValueError, match=rf"^{prefix}propensity {bad} of item 1 lies outside"):
            entry_propensities(values, Y, name=name)
    matrix = sp.csr_matrix(np.array([[0.5, 0.5, bad], [0.5, 0.5, 0.5]]))
    with pytest.raises(
        ValueError, match=rf"^stratify_by: propensity {bad} of held-out \(user 0, item 2\)"
    ):
        entry_propensities(matrix, Y, name="stratify_by")


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"p": [0.5, 0.5, 0.25]}),
        pd.DataFrame({"item": [0, 1, 2], "propensity": [0.5, 0.5, 0.25]}),
        pd.DataFrame(np.full((2, 3), 0.5)),
    ],
)
def test_a_propensity_dataframe_is_refused_with_the_forms_a_propensity_may_take(frame):
    columns = re.escape(str(list(frame.columns)))
    message = (
        rf"^propensity is a pandas DataFrame of shape \({frame.shape[0]}, {frame.shape[1]}\) "
        rf"with columns {columns}: give one propensity per item as a 1-D vector, a pandas "
        r"Series indexed by item .* or a fitted propensity model, or one per \(user, item\) as "
        r"a users×items scipy sparse matrix$"
    )
    for use in (
        lambda: entry_propensities(frame, Y),
        lambda: ips_weights(frame, Y, clip=10),
        lambda: FixedPropensity(frame).fit(),
    ):
        with pytest.raises(ValueError, match=message):
            use()
    # the forms it names work: the Series of the item-indexed frame gives the vector's weights
    if "item" in frame:
        series = frame.set_index("item")["propensity"]
        assert ips_weights(series, Y).tolist() == ips_weights(series.to_numpy(), Y).tolist()


def test_an_overflowing_inverse_propensity_is_refused_unclipped_and_capped_when_clipped():
    p = np.array([0.5, 1e-320, 0.25])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning on any path
        with pytest.raises(
            ValueError,
            match=r"^the inverse of propensity 1e-320 of \(user 1, item 1\) is inf, as 1/p is "
            r"for a propensity below about 5.6e-309: the unclipped estimate is infinite",
        ):
            ips_weights(p, Y)
        # clipped at 3, by hand: (0, 0) min(3, 2), (0, 2) min(3, 4), (1, 1) min(3, inf)
        assert ips_weights(p, Y, clip=3.0).tolist() == [2.0, 3.0, 3.0]


def test_item_propensities_refuse_items_the_vector_does_not_cover():
    with pytest.raises(ValueError, match=r"\(user 0, item 3\) has no propensity.*cover 3 items"):
        item_propensities(np.full(3, 0.5), np.array([0, 0]), np.array([1, 3]))
    matrix = sp.csr_matrix(np.full((2, 3), 0.5))
    with pytest.raises(ValueError, match=r"\(user 2, item 0\) has no propensity.*cover 2 users"):
        item_propensities(matrix, np.array([2]), np.array([0]))


def test_complex_propensities_are_refused():
    with pytest.raises(ValueError, match=r"propensity has complex dtype"):
        entry_propensities(np.array([0.5, 0.5, 0.5 + 0j]), Y)


@pytest.mark.parametrize(
    "use",
    [
        lambda m: entry_propensities(m, Y),
        lambda m: ips_weights(m, Y, clip=10),
        lambda m: item_propensities(m, np.array([0]), np.array([0])),
    ],
    ids=["entry", "ips", "item"],
)
@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_duplicate_propensity_entries_are_never_summed(use, form):
    m = propensity_with_duplicate(form)
    assert m.nnz == 5 and sp.csr_matrix(m)[0, 2] == pytest.approx(0.6)  # scipy would sum
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        use(m)


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(6)), st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6))
def test_relabelling_items_of_a_propensity_series_changes_nothing(order, values):
    """A Series carries its item labels: reordering its entries leaves every weight unchanged."""
    y = sp.csr_matrix(np.array([[1.0, 0, 1, 0, 0, 1], [0, 1, 1, 1, 0, 0], [1, 0, 0, 0, 1, 1]]))
    p = np.array(values)
    series = pd.Series(p, index=range(6)).iloc[list(order)]
    np.testing.assert_array_equal(entry_propensities(series, y), p[y.indices])
