"""``recpack-ope evaluate``'s two engines agree: :func:`recpack_ope.evaluation.files.evaluate_files`
(in memory) and :func:`recpack_ope.spark.files.evaluate_files` give the same table (values to
1e-12 relative, interval bounds to 1e-9, user counts exactly) or refuse with the same message,
on small random parquet files: held-out rewards, one or two models (scores with ties, or
ranks), optionally propensities; ids of every integer width (int8 … uint64, uint64 beyond
int64), whole real numbers or text; nulls, NaN, negative rewards, broken ranks, repeated rows,
propensities out of range or missing, users with recommendations but no held-out rows,
held-out rewards all 0 (DCG over every user 0, the ratios refused).

A second property does the same for feed logs (``--feed-log`` with one ``--target``): a few
sessions under contexts, ranks, clicks and logging propensities, a target ranking by score or
rank; nulls, NaN, ranks and propensities out of range, repeated (session, rank) or (session,
item) rows, a session under two contexts, ids of different integer widths, a log without
clicks.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recpack_ope.evaluation.files import evaluate_files as local_evaluate
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.io.tables import ID_COLUMNS
from recpack_ope.registry import ESTIMATORS
from recpack_ope.spark.files import evaluate_files as spark_evaluate

#: Every integer type of Arrow (the root conftest holds the same list; this folder has its own).
INTEGER_TYPES = [
    getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)
]

#: ids beyond int64: uint64 only (Spark reads them as decimal(20,0)).
BIG = 2**64 - 16
PLAIN = ["dcg", "ndcg", "pn_dcg", "recall"]
WEIGHTED = ["ips_dcg", "snips_dcg", "ips_ndcg"]


@pytest.fixture(scope="module")
def session(spark):
    """The tests' session with few shuffle partitions: the checks' own shuffles of tiny
    tables would otherwise run 16 tasks each."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


@st.composite
def inputs(draw):
    """Column dicts (name → (values, arrow type)) of held_out, the models and propensity,
    and the options of the evaluation."""
    mode = draw(st.sampled_from(["integer", "integer", "integer", "big", "real", "text"]))

    def id_type():
        if mode == "big":
            return pa.uint64()
        if mode == "real":
            return pa.float64()
        if mode == "text":
            return pa.string()
        return draw(st.sampled_from(INTEGER_TYPES))

    users, items = range(draw(st.integers(2, 5))), range(draw(st.integers(1, 6)))
    # A table without rows now and then (refused): otherwise at least one row.
    # (Hypothesis draws boundary values often: the rare case is the last of the list.)
    least = draw(st.sampled_from([1] * 19 + [0]))
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(users), st.sampled_from(items)),
            min_size=least,
            max_size=8,
            unique=True,
        )
    )
    reward_type = draw(st.sampled_from([pa.float64(), pa.int8()]))
    rewards = draw(st.lists(st.sampled_from([1, 0, 2]), min_size=len(pairs), max_size=len(pairs)))
    held = {"user": [p[0] for p in pairs], "item": [p[1] for p in pairs], "reward": rewards}
    types = {"held_out": {"user": id_type(), "item": id_type(), "reward": reward_type}}
    tables = {"held_out": held}
    for m in range(draw(st.integers(1, 2))):
        ranked = draw(st.booleans())
        rows = {"user": [], "item": [], "rank" if ranked else "score": []}
        recommended = draw(
            st.lists(st.sampled_from([*users, 5, 6]), min_size=least, max_size=5, unique=True)
        )
        for user in recommended:
            draw_ranking(draw, rows, "user", user, items, ranked)
        value = pa.int32() if ranked else pa.float64()
        tables[f"m{m}"] = rows
        types[f"m{m}"] = {"user": id_type(), "item": id_type(), list(rows)[2]: value}
    if draw(st.booleans()):
        listed = sorted({*held["item"], *draw(st.lists(st.sampled_from(items), max_size=3))})
        p = [draw(st.sampled_from([0.1, 0.5, 1.0])) for _ in listed]
        tables["propensity"] = {"item": listed, "propensity": p}
        types["propensity"] = {"item": id_type(), "propensity": pa.float64()}
    if mode == "integer" and draw(st.sampled_from([False] * 9 + [True])):  # text ids in one
        types[draw(st.sampled_from(sorted(tables)))]["item"] = pa.string()
    columns = {
        name: {
            c: (id_values(v, types[name][c], mode) if c in ("user", "item") else v, types[name][c])
            for c, v in table.items()
        }
        for name, table in tables.items()
    }
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        corrupt(draw, columns)
    metrics = draw(
        st.lists(
            st.sampled_from(PLAIN + (WEIGHTED if "propensity" in tables else [])),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    population = draw(st.sampled_from(["observed", "observed", "all"]))
    if population == "all":
        # The estimators with a value over every user; over held-out rewards all 0, plain and
        # IPS-DCG are 0 and the ratios (pnDCG, SNIPS-DCG) are refused.
        metrics = [m for m in metrics if "all" in ESTIMATORS[m].populations] or ["dcg"]
    return columns, {"metrics": metrics, "k": draw(st.integers(1, 3)), "population": population}


def corrupt(draw, columns) -> None:
    """One bad value in a table: a null, a NaN (a real id column for an id), a value out of
    range (a negative reward or score, rank 0, propensity 0 or 1.5, an id 1.5), or a repeated
    row."""
    name = draw(st.sampled_from(sorted(columns)))
    table = columns[name]
    column = draw(st.sampled_from(list(table)))
    values, kind = table[column]
    if not values:
        return
    row = draw(st.integers(0, len(values) - 1))
    what = draw(st.sampled_from(["null", "nan", "range", "repeat"]))
    if what == "repeat":
        for v, _ in table.values():
            v.append(v[row])
        return
    if what == "null":
        values[row] = None
        return
    if column in ID_COLUMNS:
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)) or kind == pa.uint64():
            return
        values[:] = [None if v is None else float(v) for v in values]
        table[column] = values, pa.float64()
        values[row] = float("nan") if what == "nan" else 1.5
    elif what == "nan":
        if pa.types.is_floating(kind):
            values[row] = float("nan")
    else:
        values[row] = draw(
            st.sampled_from({"propensity": [0.0, 1.5], "rank": [0, 9]}.get(column, [-1]))
        )


def write(folder: Path, columns: dict) -> dict:
    """Each table as a parquet file (its arrow types kept); name → path."""
    paths = {}
    for name, table in columns.items():
        arrays = {c: pa.array(values, type=kind) for c, (values, kind) in table.items()}
        paths[name] = folder / f"{name}.parquet"
        pq.write_table(pa.table(arrays), paths[name])
    return paths


def attempt(run):
    """``("evaluated", run())``, or ``("refused", whether a ValueError, its message)``; the
    reliability warnings of small random tables are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        try:
            return "evaluated", run()
        except (ValueError, TypeError) as error:
            return "refused", isinstance(error, ValueError), str(error)


def outcome(evaluate, paths, options, **extra):
    """The evaluation's rows and users without held-out rows, or its refusal."""
    models = {n: p for n, p in paths.items() if n.startswith("m")}
    found = attempt(
        lambda: evaluate(
            paths["held_out"], models, paths.get("propensity"), clip=None, **options, **extra
        )
    )
    if found[0] == "refused":
        return found
    return "evaluated", found[1].rows(), getattr(found[1], "n_users_without_held_out", None)


#: Hypothesis settings of both properties: one Spark job per example is slow, by design.
SLOW = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


def on_both_engines(outcome_of, case, session, n_partitions: int):
    """``outcome_of`` the local and the Spark engine on the generated tables ``case``,
    written as parquet files."""
    columns, options = case
    with tempfile.TemporaryDirectory() as folder:
        paths = write(Path(folder), columns)
        local = outcome_of(local_evaluate, paths, options)
        spark = outcome_of(
            spark_evaluate, paths, options, session=session, n_partitions=n_partitions
        )
    return local, spark


def draw_ranking(draw, rows: dict, key: str, value, items, ranked: bool) -> None:
    """Append to ``rows`` a ranking of 1-4 of ``items`` for ``key`` = ``value``: ranks 1..n
    in a random order, or scores of few values (ties, broken by the lower item id)."""
    chosen = draw(st.lists(st.sampled_from(items), min_size=1, max_size=4, unique=True))
    rows[key] += [value] * len(chosen)
    rows["item"] += chosen
    if ranked:
        rows["rank"] += list(draw(st.permutations(range(1, len(chosen) + 1))))
    else:
        rows["score"] += [draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in chosen]


def id_values(values, kind, mode: str) -> list:
    """Small integer ids (None for a null) written as ids of Arrow type ``kind``: text,
    uint64 beyond int64 (``mode`` "big"), whole reals, or the integers themselves."""
    if kind == pa.string():
        return [None if v is None else f"id{v}" for v in values]
    if mode == "big":
        return [None if v is None else BIG + v for v in values]
    if kind == pa.float64():
        return [None if v is None else float(v) for v in values]
    return values


def close(a, b, rtol: float, atol: float = 0.0) -> bool:
    if a is None or b is None or isinstance(a, str):
        return a == b
    return bool(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


@settings(max_examples=60, **SLOW)
@given(inputs())
def test_local_and_spark_engines_agree(session, case):
    local, spark = on_both_engines(outcome, case, session, n_partitions=3)
    assert local[0] == spark[0], (local, spark)
    if local[0] == "refused":
        assert local[2] == spark[2]
        return
    assert local[2] == spark[2]  # users with recommendations but no held-out rows
    assert len(local[1]) == len(spark[1])
    for ours, theirs in zip(local[1], spark[1], strict=True):
        assert (ours["model"], ours["metric"]) == (theirs["model"], theirs["metric"])
        assert (ours["n_users"], ours["n_excluded_users"]) == (
            theirs["n_users"],
            theirs["n_excluded_users"],
        )
        assert close(ours["value"], theirs["value"], 1e-12), (ours, theirs)
        # A spread that is 0 in exact arithmetic (pnDCG with every user ranked ideally: DCG
        # proportional to ideal DCG) holds the terms' rounding, about 1e-17 of the value on
        # both engines, which round it differently.
        scale = 1e-12 * max(abs(ours["value"]), 1e-300)
        for bound in ("ci_low", "ci_high", "standard_error"):
            assert close(ours[bound], theirs[bound], 1e-9, scale), (bound, ours, theirs)


@st.composite
def feed_logs(draw):
    """Column dicts (name → (values, arrow type)) of a feed log and one target, and the
    options of the evaluation."""
    mode = draw(st.sampled_from(["integer", "integer", "integer", "big", "real", "text"]))

    def id_type():
        if mode == "big":
            return pa.uint64()
        return {"real": pa.float64(), "text": pa.string()}.get(mode) or draw(
            st.sampled_from(INTEGER_TYPES)
        )

    contexts, items = range(draw(st.integers(1, 3))), range(draw(st.integers(1, 4)))
    log = {"session": [], "context": [], "item": [], "rank": [], "reward": [], "propensity": []}
    for session in range(draw(st.integers(1, 4))):
        context = draw(st.sampled_from(contexts))
        shown = draw(st.lists(st.sampled_from(items), min_size=1, max_size=3, unique=True))
        log["session"] += [session] * len(shown)
        log["context"] += [context] * len(shown)
        log["item"] += shown
        log["rank"] += list(draw(st.permutations(range(1, len(shown) + 1))))
        log["reward"] += [draw(st.sampled_from([0, 1])) for _ in shown]
        log["propensity"] += [draw(st.sampled_from([0.2, 0.5, 1.0])) for _ in shown]
    if draw(st.sampled_from([True] * 4 + [False])):
        log["reward"][0] = 1  # otherwise now and then a log without clicks (normalised: refused)
    ranked = draw(st.booleans())
    target = {"context": [], "item": [], "rank" if ranked else "score": []}
    for context in contexts:
        draw_ranking(draw, target, "context", context, items, ranked)
    types = {
        "feed_log": {
            "session": id_type(),
            "context": id_type(),
            "item": id_type(),
            "rank": draw(st.sampled_from([pa.int32(), pa.float64()])),
            "reward": draw(st.sampled_from([pa.float64(), pa.int8()])),
            "propensity": pa.float64(),
        },
        "target": {
            "context": id_type(),
            "item": id_type(),
            list(target)[2]: pa.int32() if ranked else pa.float64(),
        },
    }
    columns = {
        name: {
            c: (id_values(v, types[name][c], mode) if c in ID_COLUMNS else v, types[name][c])
            for c, v in table.items()
        }
        for name, table in (("feed_log", log), ("target", target))
    }
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        if draw(st.sampled_from([False] * 4 + [True])):
            two_contexts(draw, columns["feed_log"])
        else:
            corrupt(draw, columns)
    metrics = draw(
        st.lists(
            st.sampled_from(["logged_dcg", "logged_ndcg", "logged_pn_dcg"]),
            min_size=1,
            max_size=2,
            unique=True,
        )
    )
    return columns, {"metrics": metrics, "k": draw(st.integers(1, 3))}


def two_contexts(draw, log) -> None:
    """One row of a session moved to another context (refused: a session is one context's),
    or to another rank (a repeated (session, rank) when the session has that rank)."""
    values, kind = log["context" if draw(st.booleans()) else "rank"]
    row = draw(st.integers(0, len(values) - 1))
    other = draw(st.sampled_from(values))
    values[row] = other


def feed_log_outcome(evaluate, paths, options, **extra):
    """The evaluation's (model, metric, value, sessions, excluded sessions) rows, or its
    refusal."""
    found = attempt(
        lambda: evaluate(
            feed_log=paths["feed_log"],
            targets={"T": paths["target"]},
            clip=None,
            **options,
            **extra,
        ).rows()
    )
    if found[0] == "refused":
        return found
    return "evaluated", [
        (r["model"], r["metric"], r["value"], r["n_sessions"], r["n_excluded_sessions"])
        for r in found[1]
    ]


@settings(max_examples=40, **SLOW)
@given(feed_logs())
def test_local_and_spark_engines_agree_on_feed_logs(session, case):
    local, spark = on_both_engines(feed_log_outcome, case, session, n_partitions=2)
    assert local[0] == spark[0], (local, spark)
    if local[0] == "refused":
        assert local[1:] == spark[1:]
        return
    assert len(local[1]) == len(spark[1])
    for ours, theirs in zip(local[1], spark[1], strict=True):
        assert ours[:2] == theirs[:2] and ours[3:] == theirs[3:], (ours, theirs)
        assert close(ours[2], theirs[2], 1e-12), (ours, theirs)
