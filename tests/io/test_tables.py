"""Long tables as the core's matrices: ids read and compared exactly, bad files and bad ids
refused naming the file (table), the column and the row.

Expected matrices are written out by hand from the few rows each test builds.
"""

from __future__ import annotations

import decimal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import INTEGER_TYPES
from conftest import write_table as write

from recpack_ope.io.tables import feed_log_tables, held_out_tables, read_table


def test_csv_ids_beyond_int64_are_two_users(tmp_path):
    # pyarrow alone reads both as the float 1.8446744073709552e19: one user.
    held = tmp_path / "held.csv"
    held.write_text("user,item,reward\n18446744073709551615,1,1\n18446744073709551614,1,2\n")
    recs = tmp_path / "a.csv"
    recs.write_text("user,item,rank\n18446744073709551614,1,1\n")
    assert read_table(held).schema.field("user").type == pa.uint64()
    tables = held_out_tables(held, {"A": recs})
    assert tables.users.tolist() == [2**64 - 2, 2**64 - 1]
    assert tables.y_true.toarray().tolist() == [[2.0], [1.0]]
    assert tables.scores["A"].toarray().tolist() == [[-1.0], [0.0]]


def test_csv_ids_beyond_64_bits_or_not_whole_are_text(tmp_path):
    held = tmp_path / "held.csv"
    held.write_text(
        "user,item,reward\n100000000000000000000001,1,1\n100000000000000000000002,1,1\n"
    )
    recs = tmp_path / "a.csv"
    recs.write_text("user,item,rank\n100000000000000000000002,1,1\n")
    tables = held_out_tables(held, {"A": recs})
    assert tables.users.tolist() == ["100000000000000000000001", "100000000000000000000002"]
    assert tables.scores["A"].toarray().tolist() == [[0.0], [-1.0]]
    # 1.0 and 1.5 are text in a CSV file: compared as written, they never meet the integer 2.
    recs.write_text("user,item,rank\n2,1,1\n")
    for text in ("1.0,1,1\n2.0,1,1\n", "1.5,1,1\n2.0,1,1\n"):
        held.write_text("user,item,reward\n" + text)
        with pytest.raises(ValueError) as refused:
            held_out_tables(held, {"A": recs})
        assert str(refused.value) == (
            f"column 'user' must hold one kind of id in every table, got text ids in held_out "
            f"file {str(held)!r}, integer ids in recommendations['A'] file {str(recs)!r}"
        )


@pytest.mark.parametrize(
    ("texts", "kind"),
    [
        (["0", "-7", "9223372036854775807"], pa.int64()),
        (["0", "18446744073709551615"], pa.uint64()),
        (["-1", "18446744073709551615"], pa.string()),  # neither int64 nor uint64
        (["010", "11"], pa.string()),  # a leading zero
        (["1e1", "11"], pa.string()),  # an exponent
        (["10.0", "11"], pa.string()),  # a decimal point
        ([" 10", "11"], pa.string()),  # a space
        (["+10", "11"], pa.string()),  # a sign '+'
        (["-0", "11"], pa.string()),  # -0 would be the integer 0
    ],
)
def test_csv_id_column_is_integer_only_when_every_value_is_canonical(tmp_path, texts, kind):
    held = tmp_path / "held.csv"
    held.write_text("user,item,reward\n" + "".join(f'"{t}",1,1\n' for t in texts))
    column = read_table(held).column("user")
    assert column.type == kind
    expected = texts if kind == pa.string() else [int(t) for t in texts]
    assert column.to_pylist() == expected


def test_csv_text_ids_that_look_numeric_never_match_integers_or_other_spellings(tmp_path):
    held, recs = tmp_path / "held.csv", tmp_path / "a.csv"
    held.write_text("user,item,reward\n1,010,1\n1,011,1\n2,012,1\n")
    recs.write_text("user,item,score\n1,10,2\n1,99,1\n2,12,1\n")
    # 010 is text, 10 an integer: refused naming both files, not matched as 10.
    with pytest.raises(ValueError) as refused:
        held_out_tables(held, {"A": recs})
    assert str(refused.value) == (
        f"column 'item' must hold one kind of id in every table, got text ids in held_out file "
        f"{str(held)!r}, integer ids in recommendations['A'] file {str(recs)!r}"
    )
    # Both text: compared as written, so 010 is not 10 and 1e1 is not 10.
    recs.write_text("user,item,score\n1,10,2\n1,1e1,1\n2,012,1\n")
    tables = held_out_tables(held, {"A": recs})
    assert tables.items.tolist() == ["010", "011", "012", "10", "1e1"]
    assert tables.y_true.toarray().tolist() == [[1, 1, 0, 0, 0], [0, 0, 1, 0, 0]]
    assert tables.scores["A"].toarray().tolist() == [[0, 0, 0, 2, 1], [0, 0, 1, 0, 0]]


def test_held_out_users_without_recommendations_are_counted_per_model(tmp_path):
    held = pa.table({"user": [1, 2, 3, 3], "item": [5, 5, 5, 6], "reward": [1.0, 0.0, 1.0, 1.0]})
    full = pa.table({"user": [1, 2, 3, 4], "item": [5, 5, 6, 5], "rank": [1, 1, 1, 1]})
    half = pa.table({"user": [3, 4], "item": [5, 5], "rank": [1, 1]})
    tables = held_out_tables(held, {"full": full, "half": half, "none": half.slice(1)})
    # By hand: held-out users 1, 2, 3; "half" lists 3 (and 4, not held out), "none" only 4.
    assert tables.n_users_without_recommendations == {"full": 0, "half": 2, "none": 3}
    assert tables.n_users_without_held_out == 1  # user 4
    assert tables.scores["half"].toarray()[:2].tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("held_type", INTEGER_TYPES)
@pytest.mark.parametrize("recs_type", [pa.int8(), pa.uint64(), pa.int64(), pa.uint8()])
def test_integer_ids_compare_by_value_across_widths_and_signedness(held_type, recs_type):
    held = pa.table(
        {
            "user": pa.array([3, 1, 2], held_type),
            "item": pa.array([7, 7, 9], held_type),
            "reward": [1.0, 2.0, 1.0],
        }
    )
    recs = pa.table(
        {
            "user": pa.array([1, 1, 2], recs_type),
            "item": pa.array([9, 7, 9], recs_type),
            "rank": [1, 2, 1],
        }
    )
    tables = held_out_tables(held, {"A": recs})
    assert tables.users.tolist() == [1, 2, 3] and tables.items.tolist() == [7, 9]
    assert tables.y_true.toarray().tolist() == [[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    assert tables.scores["A"].toarray().tolist() == [[-2.0, -1.0], [0.0, -1.0], [0.0, 0.0]]
    assert tables.n_users_without_held_out == 0


def test_unsigned_ids_beyond_int64_and_negative_ids_stay_distinct():
    # As float64, 2**63 + 1 and 2**63 + 2 are one number, and every id past 2**53 collapses.
    held = pa.table(
        {
            "user": pa.array([2**63 + 1, 2**63 + 2, 5], pa.uint64()),
            "item": [1, 1, 1],
            "reward": [1.0, 2.0, 3.0],
        }
    )
    recs = pa.table({"user": pa.array([-4, 5], pa.int64()), "item": [1, 1], "rank": [1, 1]})
    tables = held_out_tables(held, {"A": recs})
    assert tables.users.tolist() == [-4, 5, 2**63 + 1, 2**63 + 2]
    assert tables.y_true.toarray().ravel().tolist() == [0.0, 3.0, 1.0, 2.0]
    assert tables.scores["A"].toarray().ravel().tolist() == [-1.0, -1.0, 0.0, 0.0]
    assert tables.n_users_without_held_out == 1  # user -4


def test_whole_real_ids_are_integers():
    held = pa.table({"user": [1.0, 2.0], "item": [10.0, 10.0], "reward": [1.0, 1.0]})
    recs = pa.table({"user": [2, 1], "item": [10, 10], "score": [0.5, 0.5]})
    tables = held_out_tables(held, {"A": recs})
    assert tables.users.tolist() == [1, 2] and tables.items.tolist() == [10]
    assert tables.scores["A"].toarray().tolist() == [[0.5], [0.5]]


@pytest.mark.parametrize(
    ("user", "shown"),
    [
        (float("nan"), "user=nan"),
        (1.5, "user=1.5"),
        (float("inf"), "user=inf"),
        (2.0**60, "user=1.152921504606847e+18"),  # may be a rounded id
    ],
)
def test_ids_that_are_neither_integers_nor_text_are_refused(user, shown):
    held = pa.table({"user": [1.0, user], "item": [1, 1], "reward": [1.0, 1.0]})
    recs = pa.table({"user": [1.0], "item": [1], "rank": [1]})
    with pytest.raises(ValueError) as refused:
        held_out_tables(held, {"A": recs})
    assert str(refused.value) == (
        "held_out table column 'user' must hold ids: integers, text, or whole real numbers of "
        "size at most 2**53 (a float beyond it may hold a rounded id), got "
        f"row 1 ({shown}, item=1, reward=1.0)"
    )


def test_nan_and_null_ids_of_files_are_refused_naming_file_column_and_row(tmp_path):
    recs = write(tmp_path / "a.csv", {"user": [1], "item": [1], "rank": [1]})
    held = tmp_path / "held.csv"
    # pyarrow reads "nan" and an empty field of a CSV as nulls.
    for row in ("nan,1,1", ",1,1"):
        held.write_text(f"user,item,reward\n1,1,1\n{row}\n")
        with pytest.raises(ValueError) as refused:
            held_out_tables(held, {"A": recs})
        assert str(refused.value) == (
            f"held_out file {str(held)!r} has a null in column 'user', e.g. row 1 (user=None, "
            "item=1, reward=1)"
        )
    nan = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"user": [1.0, float("nan")], "item": [1, 1], "reward": [1, 1]}), nan)
    with pytest.raises(ValueError) as refused:
        held_out_tables(nan, {"A": recs})
    assert str(refused.value).startswith(f"held_out file {str(nan)!r} column 'user' must hold ids")
    assert str(refused.value).endswith("got row 1 (user=nan, item=1, reward=1)")


def test_session_ids_beyond_int64_or_negative_are_labels(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text(
        "session,context,item,rank,reward\n"
        "18446744073709551615,1,1,1,1\n18446744073709551614,1,1,1,0\n"
    )
    target = write(tmp_path / "t.csv", {"context": [1], "item": [1], "rank": [1]})
    tables = feed_log_tables(log, {"T": target})
    assert tables.log.session_labels.tolist() == [2**64 - 2, 2**64 - 1]
    assert tables.log.reward[tables.log.session == 1].tolist() == [1.0]
    log.write_text("session,context,item,rank,reward\n-3,1,1,1,1\n4,1,1,1,0\n")
    assert feed_log_tables(log, {"T": target}).log.session_labels.tolist() == [-3, 4]


def test_unreadable_files_are_refused_naming_the_file(tmp_path):
    recs = write(tmp_path / "a.csv", {"user": [1], "item": [1], "rank": [1]})
    empty, header, ragged = (tmp_path / f"{n}.csv" for n in ("empty", "header", "ragged"))
    empty.write_text("")
    header.write_text("user,item,reward\n")
    ragged.write_text("user,item,reward\n1,1,1\n2,1\n")
    ragged.with_name("good.csv").write_text("user,item,reward\n1,1,1\n")
    damaged = tmp_path / "damaged.parquet"
    damaged.write_text("not parquet")
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    no_rows = tmp_path / "no_rows.parquet"
    pq.write_table(pa.table({"user": pa.array([], pa.int64())}), no_rows)
    for path, problem in [
        (empty, "is empty: a CSV file needs a header line"),
        (header, "has no rows, only a header line"),
        (ragged, "cannot be read as csv: CSV parse error: Expected 3 columns, got 2: 2,1"),
        (damaged, "cannot be read as parquet: "),
        (no_rows, "has no rows"),
    ]:
        with pytest.raises(ValueError) as refused:
            held_out_tables(path, {"A": recs})
        assert str(refused.value).startswith(f"held_out file {str(path)!r} {problem}")
    with pytest.raises(IsADirectoryError, match=f"held_out file '{folder}' is a directory"):
        held_out_tables(folder, {"A": recs})
    with pytest.raises(FileNotFoundError, match="recommendations\\['A'\\] file '.*nowhere.csv'"):
        held_out_tables(ragged.with_name("good.csv"), {"A": tmp_path / "nowhere.csv"})


def test_rows_of_tables_from_pandas_are_named_by_their_index_label():
    frame = pd.DataFrame(
        {"user": [1, 2, 3], "item": [1, 1, 1], "reward": [1.0, -1.0, 1.0]},
        index=pd.Index(["x", "y", "z"], name="event"),
    )
    recs = pa.table({"user": [1], "item": [1], "rank": [1]})
    with pytest.raises(ValueError) as refused:
        held_out_tables(pa.Table.from_pandas(frame), {"A": recs})
    assert str(refused.value) == (
        "held_out table column 'reward' must hold finite rewards >= 0, got row with index label "
        "'y' (user=2, item=1, reward=-1.0)"
    )
    # A range index other than 0..n−1 (e.g. a slice of a larger frame) labels rows too.
    with pytest.raises(ValueError, match=r"row with index label 11 \(user=2"):
        held_out_tables(
            pa.Table.from_pandas(frame.reset_index(drop=True).set_axis([10, 11, 12])), {"A": recs}
        )
    with pytest.raises(ValueError, match=r"row with index label 11 \(user=2"):
        held_out_tables(
            pa.Table.from_pandas(frame.iloc[:].set_axis(pd.RangeIndex(10, 13))), {"A": recs}
        )
    # The default index: the label is the position.
    with pytest.raises(ValueError, match=r"got row 1 \(user=2"):
        held_out_tables(pa.Table.from_pandas(frame.reset_index(drop=True)), {"A": recs})


def test_recommended_users_without_held_out_rows_are_empty_rows_of_y_true():
    held = pa.table({"user": [2, 4], "item": [1, 2], "reward": [1.0, 1.0]})
    a = pa.table({"user": [1, 2, 4], "item": [1, 1, 2], "rank": [1, 1, 1]})
    b = pa.table({"user": [5, 4], "item": [3, 1], "score": [1.0, 2.0]})
    tables = held_out_tables(held, {"A": a, "B": b})
    assert tables.users.tolist() == [1, 2, 4, 5] and tables.items.tolist() == [1, 2, 3]
    assert tables.y_true.toarray().tolist() == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]]
    assert tables.scores["A"].toarray().tolist() == [[-1, 0, 0], [-1, 0, 0], [0, -1, 0], [0, 0, 0]]
    assert tables.scores["B"].toarray().tolist() == [[0, 0, 0], [0, 0, 0], [2, 0, 0], [0, 0, 1]]
    assert tables.n_users_without_held_out == 2  # users 1 and 5


def test_whole_decimal_ids_are_exact_integers_of_any_size():
    def held(values):
        return pa.table(
            {
                "user": pa.array([decimal.Decimal(v) for v in values], pa.decimal128(38, 1)),
                "item": [1, 1],
                "reward": [1.0, 2.0],
            }
        )

    recs = pa.table({"user": [3], "item": [1], "rank": [1]})
    # -1 and 2**63 + 1 fit neither int64 nor uint64 together; 2**70 fits neither.
    for values in (["-1", str(2**63 + 1)], [str(2**70), "5"]):
        tables = held_out_tables(held(values), {"A": recs})
        assert tables.users.tolist() == sorted([*map(int, values), 3])
        assert tables.n_users_without_held_out == 1
    with pytest.raises(
        ValueError, match=r"column 'user' must hold ids: .*row 1 \(user=Decimal\('2.5'\)"
    ):
        held_out_tables(held(["1", "2.5"]), {"A": recs})


def test_a_session_under_two_contexts_is_refused_naming_the_context_ids():
    # Contexts 50 and 70 are the log's contexts 0 and 1: the message names the ids, the
    # session's smallest and largest of its three, as Spark's check does.
    log = pa.table(
        {
            "session": [9, 9, 9, 4],
            "context": [70, 60, 50, 60],
            "item": [1, 2, 3, 1],
            "rank": [1, 2, 3, 1],
            "reward": [1.0, 0.0, 0.0, 1.0],
        }
    )
    target = pa.table({"context": [50, 60, 70], "item": [1, 1, 1], "score": [1.0, 1.0, 1.0]})
    with pytest.raises(
        ValueError,
        match=r"^feed_log table: session 9 has rows with different contexts \(50 and 70\); a "
        r"session is one context's$",
    ):
        feed_log_tables(log, {"T": target})
