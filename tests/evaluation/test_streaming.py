"""The streaming path of ``evaluate_files``: files sorted by user, read in batches of whole
users, give the in-memory engine's estimates and refusals.

The in-memory engine, whose estimates are tested against the core on matrices built by hand
(``test_files.py``), is the reference: batches of a few rows force users across batch and
chunk boundaries.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recpack_ope.evaluation import evaluate_files, streaming
from recpack_ope.evaluation.chunks import MERGED_BOUNDS

pytestmark = pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")

#: Columns the streamed rows lack: sensitivity bounds of estimators normalised per user.
UNMERGED = ("sens_low", "sens_high")


def sorted_files(folder: Path, seed: int = 0, n_users: int = 60, ids: str = "int") -> dict:
    """Held-out rewards (graded, some users all 0, some absent), model A scores with ties,
    model B ranks for every other user, and item propensities; every file sorted by user."""
    rng = np.random.default_rng(seed)
    n_items = 25

    def user_ids(u):
        return [f"u{v:04d}" for v in u] if ids == "text" else u.astype(np.int64)

    def rows(users, per):
        u = np.repeat(users, per)
        items = np.concatenate([rng.choice(n_items, n, replace=False) for n in per])
        return u, items

    per = rng.integers(1, 6, n_users)
    u, i = rows(np.arange(n_users), per)
    held = {"user": user_ids(u), "item": i, "reward": rng.integers(0, 3, u.size).astype(float)}
    users_a = np.arange(3, n_users + 5)  # five users without held-out rows
    u, i = rows(users_a, rng.integers(1, 12, users_a.size))
    model_a = {"user": user_ids(u), "item": i, "score": rng.integers(0, 4, u.size) / 2}
    users_b = np.arange(0, n_users, 2)
    per_b = rng.integers(1, 9, users_b.size)
    u, i = rows(users_b, per_b)
    ranks = np.concatenate([rng.permutation(n) + 1 for n in per_b])
    model_b = {"user": user_ids(u), "item": i, "rank": ranks}
    weights = {"item": np.arange(n_items), "propensity": rng.uniform(0.05, 1.0, n_items)}
    paths = {}
    for name, columns in [("held", held), ("A", model_a), ("B", model_b), ("p", weights)]:
        paths[name] = folder / f"{name}.parquet"
        pq.write_table(pa.table(columns), paths[name], row_group_size=1_000)
    return paths


def run(paths: dict, stream, **options):
    return evaluate_files(
        paths["held"], {"A": paths["A"], "B": paths["B"]}, paths.get("p"), stream=stream, **options
    )


def assert_same_rows(streamed, in_memory) -> None:
    """Every row of the two engines equal: values and intervals to 1e-12 (the streamed ones
    are sums merged chunk by chunk, in another order), counts exactly."""
    assert len(streamed.rows()) == len(in_memory.rows())
    for mine, theirs in zip(streamed.rows(), in_memory.rows(), strict=True):
        for key, expected in theirs.items():
            got = mine.get(key)
            if key in UNMERGED and mine["metric"] not in MERGED_BOUNDS:
                assert got is None, (mine["metric"], key)
            elif isinstance(expected, float):
                assert got == pytest.approx(expected, rel=1e-12, abs=1e-15), (mine["metric"], key)
            else:
                assert got == expected, (mine["metric"], key)
    assert streamed.n_users_without_held_out == in_memory.n_users_without_held_out
    assert streamed.n_users_without_recommendations == in_memory.n_users_without_recommendations


@pytest.mark.parametrize("batch", [3, 7, 50, 10**6])
@pytest.mark.parametrize("population", ["observed", "all"])
def test_streamed_estimates_equal_the_in_memory_ones(tmp_path, monkeypatch, batch, population):
    """Batches of 3 rows cut users over several batches (users with up to 11 rows); one
    batch of 10**6 reads every file at once."""
    monkeypatch.setattr(streaming, "BATCH_ROWS", batch)
    paths = sorted_files(tmp_path)
    metrics = (
        ["dcg", "ndcg", "pn_dcg", "recall", "ips_dcg", "snips_dcg", "ips_ndcg", "ips_pn_dcg"]
        if population == "observed"
        else ["dcg", "ips_dcg", "snips_dcg"]
    )
    options = {"metrics": metrics, "k": 4, "population": population, "compare": ("A", "B")}
    streamed, in_memory = run(paths, True, **options), run(paths, False, **options)
    assert streamed.engine == in_memory.engine == "local"
    assert_same_rows(streamed, in_memory)
    for metric in metrics:
        mine, theirs = streamed.comparisons[metric], in_memory.comparisons[metric]
        assert mine.difference == pytest.approx(theirs.difference, rel=1e-12, abs=1e-15)
        assert mine.p_value == pytest.approx(theirs.p_value, rel=1e-9, abs=1e-15)
    # Merged sums give the sign's Γ* of ips_dcg and snips_dcg comparisons, not that of their
    # significance, which needs every user's terms.
    for mine, theirs in zip(streamed.comparison_rows(), in_memory.comparison_rows(), strict=True):
        assert "robust_gamma_95" not in mine
        if mine["metric"] in MERGED_BOUNDS:
            assert mine["robust_gamma"] == pytest.approx(theirs["robust_gamma"], rel=1e-9)
        else:
            assert "robust_gamma" not in mine
    assert json.loads(streamed.report("json"))["comparisons"]
    assert "| A − B (" in streamed.report("markdown")


def test_text_ids_and_whole_real_ids_stream(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "BATCH_ROWS", 5)
    paths = sorted_files(tmp_path, seed=3, ids="text")
    assert_same_rows(run(paths, True, k=3), run(paths, False, k=3))
    paths = sorted_files(tmp_path, seed=4)
    table = pq.read_table(paths["held"])
    real = table.set_column(0, "user", table.column("user").cast(pa.float64()))
    pq.write_table(real, paths["held"])
    assert_same_rows(run(paths, True, k=3), run(paths, False, k=3))


def test_large_files_stream_by_default_and_small_ones_are_read_in_memory(tmp_path, monkeypatch):
    paths = sorted_files(tmp_path)
    in_memory = run(paths, False)
    small = run(paths, None)
    assert small.rows() == in_memory.rows()  # every column, sensitivity bounds included
    monkeypatch.setattr(streaming, "STREAM_ROWS", 10)
    streamed = run(paths, None)
    assert "sens_low" not in streamed.rows()[5]  # ips_pn_dcg: merged sums, no bounds
    assert "sens_low" in in_memory.rows()[5]
    assert_same_rows(streamed, in_memory)


def test_a_file_not_sorted_by_user_is_named_and_read_in_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "BATCH_ROWS", 4)
    paths = sorted_files(tmp_path)
    table = pq.read_table(paths["A"])
    swapped = np.r_[np.arange(10), table.num_rows - 1, np.arange(10, table.num_rows - 1)]
    pq.write_table(table.take(swapped), paths["A"])
    last, after = table.column("user")[-1].as_py(), table.column("user")[10].as_py()
    with pytest.raises(
        ValueError,
        match=(
            rf"recommendations\['A'\] file '.*A.parquet' is not sorted by user: row 11 has user "
            rf"{after} after user {last}: sort the files by user to stream them"
        ),
    ):
        run(paths, True)
    monkeypatch.setattr(streaming, "STREAM_ROWS", 10)
    with pytest.warns(streaming.InMemoryWarning, match="is not sorted by user: row"):
        fallback = run(paths, None)
    assert fallback.rows() == run(paths, False).rows()


def test_files_too_large_for_memory_and_not_sorted_are_refused(tmp_path, monkeypatch):
    paths = sorted_files(tmp_path)
    table = pq.read_table(paths["held"])
    pq.write_table(table.take(np.arange(table.num_rows)[::-1]), paths["held"])
    monkeypatch.setattr(streaming, "STREAM_ROWS", 10)
    monkeypatch.setattr(streaming, "BYTES_PER_ROW", 2**50)
    refused = r"not sorted by user: row \d+ has user .* GiB available: sort"
    with pytest.raises(ValueError, match=refused):
        run(paths, None)


def corrupt(paths: dict, name: str, row: int, column: str, value) -> None:
    """Set one value of a file, keeping its types (nulls with ``value`` None)."""
    table = pq.read_table(paths[name])
    values = table.column(column).to_pylist()
    values[row] = value
    kind = pa.float64() if isinstance(value, float) else table.schema.field(column).type
    column_at = table.column_names.index(column)
    pq.write_table(table.set_column(column_at, column, pa.array(values, kind)), paths[name])


BAD = [
    ("held", "reward", None),
    ("held", "reward", -1.0),
    ("held", "reward", float("nan")),
    ("A", "score", float("inf")),
    ("A", "score", None),
    ("B", "rank", 99),
    ("held", "item", None),
    ("A", "user", 1.5),
    ("A", "item", 10**6),  # an item without a propensity is fine: not held out
    ("p", "propensity", 0.0),
    ("p", "propensity", None),
    ("p", "item", 3),  # an item listed twice, and item 40 without a propensity
]


@pytest.mark.parametrize("name, column, value", BAD)
@pytest.mark.parametrize("row", [2, -3])
def test_bad_rows_get_the_in_memory_message_naming_the_file_row(
    tmp_path, monkeypatch, name, column, value, row
):
    """A problem in the first chunk or in the last: the message is the in-memory engine's,
    with the row numbered as in the file."""
    monkeypatch.setattr(streaming, "BATCH_ROWS", 4)
    paths = sorted_files(tmp_path)
    size = pq.ParquetFile(paths[name]).metadata.num_rows
    corrupt(paths, name, row % size, column, value)
    metrics = ["dcg", "ips_dcg"]
    try:
        expected = run(paths, False, metrics=metrics)
    except ValueError as error:
        with pytest.raises(ValueError) as refused:
            run(paths, True, metrics=metrics)
        assert str(refused.value) == str(error)
        assert f"row {row % size}" in str(error) or name == "p" or column == "rank"
    else:
        assert_same_rows(run(paths, True, metrics=metrics), expected)


def test_a_repeated_pair_in_a_later_chunk_is_named_with_its_file_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "BATCH_ROWS", 4)
    paths = sorted_files(tmp_path)
    table = pq.read_table(paths["A"])
    at = table.num_rows - 2
    user = table.column("user")[at].as_py()
    item = table.column("item")[at].as_py()
    rows = np.r_[np.arange(at + 1), at, np.arange(at + 1, table.num_rows)]
    pq.write_table(table.take(rows), paths["A"])
    with pytest.raises(ValueError) as in_memory:
        run(paths, False)
    with pytest.raises(ValueError) as streamed:
        run(paths, True)
    assert str(streamed.value) == str(in_memory.value)
    assert f"row {at} (user={user}, item={item}," in str(streamed.value)
    assert f"row {at + 1} (user={user}, item={item}," in str(streamed.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.drop(["reward"]),
        lambda t: t.set_column(
            0, "user", pa.array([f"x{v}" for v in t.column("user").to_pylist()])
        ),
        lambda t: t.slice(0, 0),
    ],
    ids=["missing column", "text ids next to integers", "no rows"],
)
def test_files_refused_as_a_whole_get_the_in_memory_message(tmp_path, change):
    paths = sorted_files(tmp_path)
    pq.write_table(change(pq.read_table(paths["held"])), paths["held"])
    with pytest.raises(ValueError) as in_memory:
        run(paths, False)
    with pytest.raises(ValueError) as streamed:
        run(paths, True)
    assert str(streamed.value) == str(in_memory.value)


@pytest.mark.parametrize("ids", ["int", "text"])
def test_csv_files_stream_with_ids_typed_from_every_value(tmp_path, monkeypatch, ids):
    """CSV ids are integers only when every value of the file is a canonical integer, as in
    memory: text ids stream, and a file whose last user id is ``010`` has text ids (never the
    user 10), refused next to integer ids with the in-memory message."""
    monkeypatch.setattr(streaming, "BATCH_ROWS", 6)
    monkeypatch.setattr(streaming, "CSV_BLOCK", 64)  # a few rows per parsed block
    paths = sorted_files(tmp_path, seed=5, ids=ids)
    for name in ("held", "A", "B"):
        csv = tmp_path / f"{name}.csv"
        csv.write_text(pq.read_table(paths[name]).to_pandas().to_csv(index=False))
        paths[name] = csv
    assert_same_rows(run(paths, True, k=3), run(paths, False, k=3))
    with paths["A"].open("a") as file:
        file.write("u9999,3,1.0\n" if ids == "text" else "010,3,1.0\n")
    if ids == "int":  # text user ids in A now, integers in the other files
        with pytest.raises(ValueError) as in_memory:
            run(paths, False, k=3)
        with pytest.raises(ValueError) as streamed:
            run(paths, True, k=3)
        assert "must hold one kind of id in every table" in str(in_memory.value)
        assert str(streamed.value) == str(in_memory.value)
    else:
        assert_same_rows(run(paths, True, k=3), run(paths, False, k=3))


def test_a_csv_value_that_is_not_a_number_gets_the_in_memory_message(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "BATCH_ROWS", 6)
    paths = sorted_files(tmp_path)
    csv = tmp_path / "held.csv"
    text = pq.read_table(paths["held"]).to_pandas().to_csv(index=False).splitlines()
    text[5] = text[5].rsplit(",", 1)[0] + ",lots"
    csv.write_text("\n".join(text) + "\n")
    paths["held"] = csv
    with pytest.raises(ValueError) as in_memory:
        run(paths, False)
    with pytest.raises(ValueError) as streamed:
        run(paths, True)
    assert "column 'reward' must be numeric" in str(in_memory.value)
    assert str(streamed.value) == str(in_memory.value)


def test_memory_is_bounded_by_the_batch_not_the_file(tmp_path, monkeypatch):
    """For files 8 times larger (8 times the row groups), numpy's peak (tracemalloc sees its
    buffers) and Arrow's largest allocation after a batch is read stay within 1.5 times the
    smaller files': only batches and a chunk's matrices are held, whatever was read before."""
    monkeypatch.setattr(streaming, "BATCH_ROWS", 500)
    read = streaming._Source.read
    arrow: list[int] = []

    def reading(source) -> None:
        read(source)
        arrow.append(pa.total_allocated_bytes())

    monkeypatch.setattr(streaming._Source, "read", reading)
    numpy_peaks, arrow_peaks = [], []
    for n_users in (1_000, 8_000):
        folder = tmp_path / str(n_users)
        folder.mkdir()
        paths = sorted_files(folder, n_users=n_users)
        arrow.clear()
        tracemalloc.start()
        run(paths, True, metrics=["dcg", "ndcg"])
        numpy_peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        arrow_peaks.append(max(arrow))
    assert numpy_peaks[1] < 1.5 * numpy_peaks[0], numpy_peaks
    assert arrow_peaks[1] < 1.5 * arrow_peaks[0], arrow_peaks
