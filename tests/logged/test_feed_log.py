import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recpack_ope.logged.feed_log import FeedLog


def small_log(**changes) -> FeedLog:
    """Two sessions of two products, one click each, propensity 0.5 everywhere."""
    cols = dict(
        session=[0, 0, 1, 1],
        item=[0, 1, 0, 2],
        rank=[1, 2, 1, 2],
        reward=[1.0, 0.0, 0.0, 1.0],
        propensity=[0.5, 0.5, 0.5, 0.5],
    )
    cols.update(changes)
    return FeedLog.from_arrays(**cols)


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


def reference_log(session, item, rank, reward, context, propensity):
    """The log by the definition: sessions and contexts encoded in sorted order, rows sorted
    by (session, rank) with a lexsort."""
    labels, codes = np.unique(session, return_inverse=True)
    order = np.lexsort((rank, codes))
    contexts = codes if context is None else np.asarray(context)
    return dict(
        session=codes[order],
        item=np.asarray(item)[order],
        rank=np.asarray(rank)[order],
        reward=np.asarray(reward, dtype=float)[order],
        context=contexts[order],
        propensity=np.asarray(propensity)[order],
        indptr=np.concatenate([[0], np.cumsum(np.bincount(codes))]),
        session_labels=labels,
    )


@pytest.mark.parametrize("layout", ["sorted", "ranks shuffled", "rows shuffled", "ranks with gaps"])
@pytest.mark.parametrize("ids", ["dense", "sparse", "huge"])
@pytest.mark.parametrize("with_context", [False, True])
def test_feed_log_equals_the_lexsort_reference(layout, ids, with_context):
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 7, 300)
    base = {"dense": 0, "sparse": 10, "huge": 2**40}[ids]
    session = np.repeat(np.arange(lengths.size) * (1 if ids == "dense" else 7) + base, lengths)
    rank = np.concatenate([np.arange(1, k + 1) for k in lengths])
    if layout == "ranks with gaps":
        rank = rank * 2 + np.repeat(rng.integers(0, 3, lengths.size), lengths)
    order = np.arange(rank.size)
    if layout == "ranks shuffled":
        order = np.concatenate(
            [
                s + rng.permutation(k)
                for s, k in zip(np.cumsum(lengths) - lengths, lengths, strict=True)
            ]
        )
    elif layout != "sorted":
        order = rng.permutation(rank.size)
    item = np.concatenate([rng.choice(50, k, replace=False) for k in lengths])
    columns = dict(
        session=session[order],
        item=item[order],
        rank=rank[order],
        reward=rng.integers(0, 3, rank.size)[order].astype(float),
        context=(
            np.repeat(rng.integers(0, 40, lengths.size), lengths)[order] if with_context else None
        ),
        propensity=rng.uniform(0.1, 1.0, rank.size),
    )
    log = FeedLog.from_arrays(**columns)
    want = reference_log(**columns)
    for name, value in want.items():
        np.testing.assert_array_equal(getattr(log, name), value, err_msg=name)
    # The log owns its columns: changing the input afterwards leaves it as built.
    before = log.reward.copy(), log.propensity.copy()
    columns["reward"][:] = 7.0
    columns["propensity"][:] = 0.5
    np.testing.assert_array_equal(log.reward, before[0])
    np.testing.assert_array_equal(log.propensity, before[1])


@pytest.mark.parametrize("layout", ["sorted", "shuffled"])
def test_feed_log_errors_name_the_row_on_every_path(layout):
    session = np.repeat([3, 5, 8], 3)
    rank = np.tile([1, 2, 3], 3)
    order = np.arange(9) if layout == "sorted" else np.array([4, 0, 8, 2, 6, 1, 3, 7, 5])

    def build(**change):
        cols = dict(session=session, item=np.tile([0, 1, 2], 3), rank=rank, reward=np.ones(9))
        cols.update(change)
        return FeedLog.from_arrays(**{k: np.asarray(v)[order] for k, v in cols.items()})

    row = int(np.flatnonzero(order == 4)[0])  # where the input row 4 lands
    with pytest.raises(ValueError, match=f"reward of row {row} is -1.0"):
        build(reward=np.where(np.arange(9) == 4, -1.0, 1.0))
    with pytest.raises(ValueError, match=f"reward of row {row} is inf"):
        build(reward=np.where(np.arange(9) == 4, np.inf, 1.0))
    with pytest.raises(ValueError, match=f"rank of row {row} is 0"):
        build(rank=np.where(np.arange(9) == 4, 0, rank))
    with pytest.raises(ValueError, match="session 5 shows two items at rank 1"):
        build(rank=np.where(np.arange(9) == 4, 1, rank))
    with pytest.raises(ValueError, match="session 5 shows item 0 twice"):
        build(item=np.where(np.arange(9) == 4, 0, np.tile([0, 1, 2], 3)))
    with pytest.raises(ValueError, match="session 8 has rows with different contexts"):
        build(context=[0, 0, 0, 1, 1, 1, 2, 2, 3])
    with pytest.raises(ValueError, match=rf"propensity 1.5 of row {row} lies outside \(0, 1\]"):
        build(propensity=np.where(np.arange(9) == 4, 1.5, 0.5))
    with pytest.raises(ValueError, match=f"logging_weight nan of row {row} lies outside"):
        build(logging_weight=np.where(np.arange(9) == 4, np.nan, 0.1))
    # Items so large that (session, item) no longer fits one int64 key: rows sorted instead.
    big = np.tile([0, 2**62, 2**62], 3)
    with pytest.raises(ValueError, match=f"session 3 shows item {2**62} twice"):
        build(item=big, context=np.zeros(9, dtype=int))


BASE = dict(session=[0, 0, 1, 1], item=[0, 1, 0, 2], rank=[1, 2, 1, 2], reward=[1.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(rank=[1, -1, 1, 2]), "rank of row 1 is -1"),
        (dict(rank=[1, 2.0**60, 1, 2]), r"rank of row 1 is 1\.15\d*e\+18"),
        (
            dict(rank=np.array([1, 2**63 + 5, 1, 2], dtype=np.uint64)),
            r"rank of row 1 is 9223372036854775813",
        ),
        (dict(rank=np.array([1, 2j, 1, 2])), r"rank.*complex.*2j at position 1"),
        (dict(rank=["1", "2", "1", "2"]), "rank.*real numbers.*<U1"),
        (dict(rank=[1, 1, 1, 2]), "session 0 shows two items at rank 1"),
        (dict(item=[0, 0, 0, 2]), "session 0 shows item 0 twice"),
        (dict(reward=np.array([1, 1j, 0, 1])), r"reward.*complex.*1j at position 1"),
        (dict(reward=np.array([1, 0j, 0, 1])), "reward has complex dtype"),
        (dict(reward=["1", "0", "0", "1"]), "reward.*real numbers.*<U1"),
        (dict(reward=[1.0, -0.5, 0.0, 1.0]), "reward of row 1 is -0.5"),
        (dict(propensity=np.array([0.5, 0.5j, 0.5, 0.5])), "propensity has complex dtype"),
        (dict(propensity=[0.5, 1.5, 0.5, 0.5]), r"propensity 1\.5 of row 1"),
        (dict(propensity=[0.5, np.nan, 0.5, 0.5]), r"propensity nan of row 1"),
        (dict(logging_weight=np.array([0.1, 0.1j, 0.1, 0.1])), "logging_weight has complex dtype"),
        (dict(item=np.array([0, 1j, 0, 2])), "item ids.*complex"),
        (
            dict(item=np.array([0, "a", 0, "b"], dtype=object)),
            r"item ids.*row 0 is int 0, row 1 is str 'a'",
        ),
        (dict(item=np.array(["a", None, "a", "b"], dtype=object)), r"item id of row 1.*None"),
        (dict(item=np.array(["a", pd.NA, "a", "b"], dtype=object)), r"item id of row 1.*<NA>"),
        (dict(item=np.array([1.0, np.nan, 1.0, 2.0], dtype=object)), r"item id of row 1.*nan"),
        (dict(session=np.array([0, "a", 1, 1], dtype=object)), "session ids mix types"),
        (
            dict(item=np.array([0, 2**63 + 5, 0, 2], dtype=np.uint64)),
            "item id of row 1 is 9223372036854775813",
        ),
        (dict(item=[0, -3, 0, 2]), "item ids.*-3 in row 1"),
        (
            dict(item=[0, 2**40, 0, 2], context=[2**30, 2**30, 7, 7]),
            r"contexts × items.*\(1073741825, 1099511627777\)",
        ),
        (dict(n_items=3.0), r"n_items.*3\.0"),
        (dict(n_contexts="5"), "n_contexts.*'5'"),
        (dict(n_items=2), "n_items=2.*item index 2"),
        (dict(propensity=[0.5, 0.5, 0.5]), "propensity has 3 rows.*4"),
        (dict(propensity=[[0.5, 0.5, 0.5, 0.5]]), r"propensity.*1-D.*\(1, 4\)"),
        (dict(session=[[0, 0, 1, 1]]), r"session.*1-D.*\(1, 4\)"),
        (dict(reward=[1.0, 0.0]), "reward has 2 rows.*4"),
    ],
)
def test_feed_log_columns_are_checked(change, message):
    cols = dict(BASE)
    cols.update(change)
    with pytest.raises(ValueError, match=message):
        FeedLog.from_arrays(**cols)


def test_large_integer_ids_stay_exact():
    # 2**53 and 2**53 + 1 would be one float; as int64 (also from a nullable Int64 column)
    # they stay two items.
    frame = pd.DataFrame(
        dict(
            BASE,
            item=pd.array([2**53, 2**53 + 1, 0, 2], dtype="Int64"),
            session=["a", "a", "b", "b"],
        )
    )
    log = FeedLog.from_pandas(frame)
    assert log.item.dtype == np.int64 and log.n_items == 2**53 + 2
    np.testing.assert_array_equal(np.sort(log.item[:2]), [2**53, 2**53 + 1])


@pytest.mark.parametrize(
    "column, values, message",
    [
        ("rank", pd.array([1, None, 1, 2], dtype="Int64"), r"'rank' \(rank\).*missing.*row 1"),
        (
            "reward",
            pd.array([1.0, None, 0.0, 1.0], dtype="Float64"),
            r"'reward' \(reward\).*missing.*row 1",
        ),
        (
            "reward",
            pd.array([True, None, False, True], dtype="boolean"),
            r"'reward' \(reward\).*missing",
        ),
        (
            "item",
            pd.array(["a", None, "a", "b"], dtype="string"),
            r"'item' \(item\).*missing.*row 1",
        ),
        ("item", pd.Categorical(["b", None, "b", "c"]), r"'item' \(item\).*missing.*row 1"),
        (
            "session",
            pd.array([0, None, 1, 1], dtype="Int64"),
            r"'session' \(session\).*missing",
        ),
        ("p", pd.array([0.5, None, 0.5, 0.5], dtype="Float64"), r"'p' \(propensity\).*missing"),
    ],
)
def test_nullable_columns_with_missing_values_are_named(column, values, message):
    frame = pd.DataFrame(BASE).assign(p=0.5)
    frame[column] = values
    with pytest.raises(ValueError, match=message):
        FeedLog.from_pandas(frame, propensity="p")


def test_nullable_and_categorical_columns_without_missing_values_are_read():
    frame = pd.DataFrame(
        dict(
            session=pd.array([0, 0, 1, 1], dtype="Int64"),
            item=pd.Categorical(["y", "x", "y", "z"]),
            rank=pd.array([1, 2, 1, 2], dtype="Int64"),
            reward=pd.array([True, False, False, True], dtype="boolean"),
            p=pd.array([0.5, 0.25, 0.5, 1.0], dtype="Float64"),
        )
    )
    log = FeedLog.from_pandas(frame, propensity="p")
    np.testing.assert_array_equal(log.item_labels, ["x", "y", "z"])
    np.testing.assert_array_equal(log.item, [1, 0, 1, 2])
    np.testing.assert_array_equal(log.reward, [1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(log.propensity, [0.5, 0.25, 0.5, 1.0])


def test_frames_that_are_not_frames_or_repeat_columns():
    with pytest.raises(TypeError, match=r"frame.*DataFrame.*\bdict\b"):
        FeedLog.from_pandas(dict(BASE))
    frame = pd.DataFrame(BASE)
    with pytest.raises(ValueError, match=r"'rank' \(rank\) appears 2 times"):
        FeedLog.from_pandas(pd.concat([frame, frame[["rank"]]], axis=1))


def test_position_and_prefix_propensities_follow_the_rows_into_rank_order():
    # Session "a" arrives as ranks 2, 1, 3 and "b" as 1, 2 (see _columns); the columns move
    # with their rows.
    log = FeedLog.from_arrays(
        **_columns(),
        position_propensity=[0.3, 0.2, 0.1, 0.4, 0.5],
        prefix_propensity=[0.05, 0.02, 0.1, 0.4, 0.01],
    )
    np.testing.assert_array_equal(log.position_propensity, [0.1, 0.2, 0.5, 0.4, 0.3])
    np.testing.assert_array_equal(log.prefix_propensity, [0.1, 0.02, 0.01, 0.4, 0.05])
    frame = pd.DataFrame(
        {**_columns(), "pos": [0.3, 0.2, 0.1, 0.4, 0.5], "pre": [0.05, 0.02, 0.1, 0.4, 0.01]}
    )
    read = FeedLog.from_pandas(frame, position_propensity="pos", prefix_propensity="pre")
    np.testing.assert_array_equal(read.position_propensity, log.position_propensity)
    np.testing.assert_array_equal(read.prefix_propensity, log.prefix_propensity)


@pytest.mark.parametrize("column", ["position_propensity", "prefix_propensity"])
@pytest.mark.parametrize("bad", [0.0, 1.5, np.nan, -0.1])
def test_ranking_propensities_outside_the_unit_interval_are_refused(column, bad):
    values = [0.5, 0.25, bad, 0.125]  # row 2 is the first row of session 1
    with pytest.raises(ValueError, match=rf"{column} {bad} of row 2 lies outside \(0, 1\]"):
        small_log(**{column: values})


def test_a_prefix_propensity_that_rises_down_a_session_is_refused():
    with pytest.raises(
        ValueError,
        match=r"prefix_propensity of session 1 rises from 0.2 at rank 1 to 0.3 at rank 2",
    ):
        small_log(prefix_propensity=[0.5, 0.25, 0.2, 0.3])
    # Equal prefixes are probabilities (the second item was certain), and a new session
    # starts afresh.
    log = small_log(prefix_propensity=[0.5, 0.5, 0.9, 0.3])
    np.testing.assert_array_equal(log.prefix_propensity, [0.5, 0.5, 0.9, 0.3])


def test_repr_is_one_line_of_counts_and_the_probability_columns():
    log = small_log(position_propensity=[0.5, 0.25, 0.5, 0.25])
    assert repr(log) == (
        "FeedLog(4 rows, 2 sessions, 3 items, 2 contexts; probabilities: propensity, "
        "position_propensity)"
    )
    bare = FeedLog.from_arrays([0], [0], [1], [1.0])
    assert repr(bare).endswith("probabilities: none)")


def test_a_session_over_two_contexts_names_both():
    with pytest.raises(
        ValueError, match=r"session 's' has rows with different contexts \('u1' and 'u2'\)"
    ):
        FeedLog.from_arrays(["s", "s"], [1, 2], [1, 2], [0, 1], context=["u1", "u2"])
