import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from recpack_ope.feed_log import FeedLog


def _columns():
    return dict(
        session=np.array(["b", "a", "a", "b", "a"]),
        item=np.array(["x", "y", "x", "z", "z"]),
        rank=np.array([2, 2, 1, 1, 3]),
        reward=np.array([1.0, 0.0, 2.0, 0.0, 1.0]),
    )


def test_sessions_are_grouped_sorted_by_rank_and_labels_encoded():
    log = FeedLog.from_arrays(**_columns(), propensity=[0.5, 0.2, 1.0, 0.4, 0.1])
    assert list(log.session_labels) == ["a", "b"]
    assert list(log.item_labels) == ["x", "y", "z"]
    np.testing.assert_array_equal(log.indptr, [0, 3, 5])
    np.testing.assert_array_equal(log.rank, [1, 2, 3, 1, 2])
    np.testing.assert_array_equal(log.item, [0, 1, 2, 2, 0])  # a: x y z, b: z x
    np.testing.assert_array_equal(log.reward, [2, 0, 1, 0, 1])
    np.testing.assert_array_equal(log.propensity, [1.0, 0.2, 0.1, 0.4, 0.5])
    np.testing.assert_array_equal(log.context, log.session)  # default context = session
    np.testing.assert_array_equal(log.per_session(log.reward), [3.0, 1.0])
    assert (log.n_rows, log.n_sessions, log.n_items, log.n_contexts) == (5, 2, 3, 2)


def test_from_pandas_equals_from_arrays_and_names_missing_columns():
    cols = _columns()
    frame = pd.DataFrame(
        {"s": cols["session"], "i": cols["item"], "r": cols["rank"], "c": cols["reward"]}
    )
    a = FeedLog.from_pandas(frame, session="s", item="i", rank="r", reward="c")
    b = FeedLog.from_arrays(**cols)
    for name in ("session", "item", "rank", "reward", "indptr"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    with pytest.raises(KeyError, match=r"\['click'\].*\['s', 'i', 'r', 'c'\]"):
        FeedLog.from_pandas(frame, session="s", item="i", rank="r", reward="click")


def test_integer_ids_index_score_matrices_and_row_values_look_them_up():
    log = FeedLog.from_arrays(
        [7, 7, 9], [4, 1, 4], [1, 2, 1], [1, 0, 0], context=[2, 2, 0], n_items=6
    )
    assert (log.n_items, log.n_contexts) == (6, 3)
    np.testing.assert_array_equal(log.session_context, [2, 0])
    scores = np.arange(18.0).reshape(3, 6)
    np.testing.assert_array_equal(log.row_values(scores), [16, 13, 4])
    np.testing.assert_array_equal(log.row_values(sp.csr_matrix(scores)), [16, 13, 4])
    sparse = sp.csr_matrix(scores)
    sparse[2, 1] = 0
    sparse.eliminate_zeros()
    with pytest.raises(ValueError, match="does not score item 1 for context 2"):
        log.row_values(sparse)
    with pytest.raises(ValueError, match=r"shape mismatch.*\(3 contexts, 6 items\)"):
        log.row_values(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN for item 4"):
        log.row_values(np.full((3, 6), np.nan))


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(rank=[1, 0, 1, 2, 3]), "rank of row 1 is 0"),
        (dict(rank=[1, 1.5, 1, 2, 3]), "rank of row 1 is 1.5"),
        (dict(reward=[0, -1, 0, 0, 0]), "reward of row 1 is -1"),
        (dict(reward=[0, np.nan, 0, 0, 0]), "reward of row 1 is nan"),
        (dict(rank=[1, 1, 1, 2, 2]), "session 'a' shows two items at rank 2"),
        (dict(item=["x", "y", "x", "x", "z"]), "session 'a' shows item 'x' twice"),
        (dict(propensity=[1, 1, 0, 1, 1]), r"propensity 0.0 of row 2 lies outside \(0, 1\]"),
        (dict(propensity=[1, 1, 1.5, 1, 1]), r"propensity 1.5 of row 2"),
        (dict(logging_weight=[0.5, 0.6, 0.1, 0.1, 0.1]), "session 'b' sum to 1.1 > 1"),
        (dict(logging_weight=[0.5, 0.0, 0.1, 0.1, 0.1]), r"logging_weight 0.0 of row 1"),
        (dict(context=[1, 2, 1, 1, 1]), "session 'b' has rows with different contexts"),
        (dict(item=["x", "y"]), "item has 2 rows but session has 5"),
    ],
)
def test_bad_input_names_the_offending_value(change, message):
    cols = dict(
        session=["b", "b", "a", "a", "a"],
        item=["x", "y", "x", "y", "z"],
        rank=[2, 1, 1, 3, 2],
        reward=[1.0, 0.0, 2.0, 0.0, 1.0],
    )
    cols.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        FeedLog.from_arrays(**cols)


def test_declared_sizes_must_cover_the_ids():
    with pytest.raises(ValueError, match="n_items=3 but the log has item index 4"):
        FeedLog.from_arrays([0], [4], [1], [0], n_items=3)
