"""CSV files on Spark (``recpack_ope.spark.files``): id columns are typed by the in-memory
engine's rule, so both engines accept, merge and refuse the same ids with the same messages,
and name the same rows."""

import re

import pytest

from recpack_ope.evaluation import files as local_files
from recpack_ope.spark import files as spark_files

#: Users 2**64 − 1 and 2**64 − 2 (uint64 beyond int64), and ids beyond 64 bits (text).
UINT64, BEYOND = ("18446744073709551615", "18446744073709551614"), ("18446744073709551616", "2")

#: Case → the held-out users of two rows and the recommendations' users of those two users,
#: as written in the CSV files, and what both engines do: the DCG@2 of each of two users
#: whose held-out item is ranked first (1.0, by hand), or a refusal matching the pattern.
CASES = {
    "uint64 beyond int64": (UINT64, UINT64, 1.0),
    "beyond uint64: text": (BEYOND, BEYOND, 1.0),
    "negative ids": (("-1", "-2"), ("-1", "-2"), 1.0),
    "negative and beyond int64: text": (("-1", UINT64[0]), ("-1", UINT64[0]), 1.0),
    "leading zeros are text": (("010", "011"), ("010", "011"), 1.0),
    "1.0 is text": (
        ("1.0", "2"),
        ("1", "2"),
        r"^column 'user' must hold one kind of id in every table, got text ids in held_out",
    ),
    "1.5 is text": (
        ("1.5", "2"),
        ("1", "2"),
        r"^column 'user' must hold one kind of id in every table, got text ids in held_out "
        r"file '[^']*held\.csv', integer ids in recommendations\['A'\] file '[^']*recs\.csv'$",
    ),
    "text against integers": (
        ("7", "8"),
        ("a", "b"),
        r"got integer ids in held_out file '[^']*', text ids in recommendations\['A'\] file",
    ),
    "empty field": (
        ("", "2"),
        ("1", "2"),
        r"held\.csv' has a null in column 'user', e\.g\. row 0 \(user=None, item=10, reward=1\)$",
    ),
    # pyarrow reads "nan" (and "NA", "null", ...) in a numeric column as a null.
    "nan": (
        ("1", "nan"),
        ("1", "2"),
        r"held\.csv' has a null in column 'user', e\.g\. row 1 \(user=None, item=11, reward=1\)$",
    ),
    "inf": (
        ("inf", "2"),
        ("1", "2"),
        r"^column 'user' must hold one kind of id in every table, got text ids in held_out",
    ),
}


def _files(tmp_path, held: tuple, recs: tuple) -> tuple[str, str]:
    held_path, recs_path = tmp_path / "held.csv", tmp_path / "recs.csv"
    held_path.write_text(f"user,item,reward\n{held[0]},10,1\n{held[1]},11,1\n")
    recs_path.write_text(
        f"user,item,score\n{recs[0]},10,2\n{recs[0]},11,1\n{recs[1]},11,2\n{recs[1]},10,1\n"
    )
    return str(held_path), str(recs_path)


def _outcome(engine, held: str, recs: str, **options):
    """(DCG@2 estimate, users) of model ``A``, or the refusal's message."""
    try:
        result = engine.evaluate_files(
            held, {"A": recs}, metrics=["dcg"], k=2, population="all", **options
        )
    except ValueError as error:
        return str(error)
    dcg = result.estimates["A"]["dcg"]
    return dcg.value, dcg.n_users


@pytest.mark.parametrize("case", list(CASES))
def test_csv_ids_are_read_as_the_local_engine_reads_them(spark, tmp_path, case):
    held, recs, expected = CASES[case]
    paths = _files(tmp_path, held, recs)
    local = _outcome(local_files, *paths)
    on_spark = _outcome(spark_files, *paths, session=spark, n_partitions=4)
    assert on_spark == local
    if isinstance(expected, float):
        # Two users, never merged (a merge would repeat (user, item) rows and be refused).
        assert local == (pytest.approx(expected), 2)
    else:
        assert isinstance(local, str)
        assert re.search(expected, local), local


def test_csv_messages_name_the_row_of_a_file_read_in_many_splits(spark, tmp_path):
    held_path, recs_path = tmp_path / "held.csv", tmp_path / "recs.csv"
    users = [str(u) for u in range(500)]
    users[377] = ""
    held_path.write_text("user,item,reward\n" + "".join(f"{u},10,1\n" for u in users))
    recs_path.write_text("user,item,score\n" + "".join(f"{u},10,1\n" for u in range(500)))
    expected = r"held\.csv' has a null in column 'user', e\.g\. row 377 \(user=None, "
    local = _outcome(local_files, str(held_path), str(recs_path))
    assert re.search(expected, local), local
    # Splits of 256 bytes: the held-out file (about 4.5 kB) is read by many tasks.
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
    saved = {key: spark.conf.get(key) for key in keys}
    spark.conf.set(keys[0], "256")
    spark.conf.set(keys[1], "0")
    try:
        assert spark_files.read_table(spark, held_path).rdd.getNumPartitions() > 10
        on_spark = _outcome(spark_files, str(held_path), str(recs_path), session=spark)
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    assert on_spark == local


def test_spark_refuses_clip_auto_and_does_not_offer_it(spark, tmp_path):
    held, recs = _files(tmp_path, ("1", "2"), ("1", "2"))
    with pytest.raises(local_files.ArgumentError) as refused:
        spark_files.evaluate_files(held, {"A": recs}, clip="auto", session=spark)
    assert str(refused.value) == (
        'clip "auto" selects the clipping from every weight at once, which this engine cannot: '
        "give a number, or None for the unclipped estimators"
    )
    with pytest.raises(local_files.ArgumentError, match=r"None \(unclipped\) or 'default'"):
        spark_files.evaluate_files(held, {"A": recs}, clip=0.5, session=spark)
