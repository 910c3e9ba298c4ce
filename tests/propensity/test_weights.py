"""Per-entry propensities and IPS weights: alignment of labelled input, refusal of vectors and
matrices that do not fit the held-out data, and of duplicate sparse entries.

References: held-out entries and their propensities read off by hand, and the unlabelled
arrays a labelled Series stands for.
"""

from __future__ import annotations

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
