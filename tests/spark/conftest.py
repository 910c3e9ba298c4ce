"""Shared by the Spark tests: one local Spark session (loopback, UI off, 16 shuffle
partitions), the small frames the bad-input tests edit, the world the equality tests compare
on, and the in-memory oracles they compare with. The helpers are fixtures: in this folder
``from conftest import …`` may reach tests/conftest.py instead of this file."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import recpack_ope as ro
from recpack_ope import metrics as core_metrics

#: The world's size, and the discount of the :func:`core` oracle (the equality tests pass the
#: same ``LogDiscount(5)`` to Spark).
N_USERS, N_ITEMS, D = 240, 40, ro.LogDiscount(5)


@pytest.fixture(scope="session")
def spark():
    from recpack_ope.spark import local_session

    session = local_session(2, shuffle_partitions=16)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def frames(spark):
    """Three users' held-out rewards, recommendation scores and item propensities (pandas), and
    ``make(frame, column=(row, value), …)``: a Spark copy with single cells changed."""
    held = pd.DataFrame(
        {"user": [1, 1, 2, 3], "item": [10, 11, 10, 12], "reward": [1.0, 0.0, 2.0, 1.0]}
    )
    recs = pd.DataFrame(
        {"user": [1, 1, 2, 3, 3], "item": [10, 12, 11, 12, 10], "score": [3.0, 2.0, 1.0, 5.0, 4.0]}
    )
    prop = pd.DataFrame({"item": [10, 11, 12], "propensity": [0.5, 0.2, 1.0]})

    def make(frame, **changes):
        frame = frame.copy()
        for column, (row, value) in changes.items():
            frame[column] = frame[column].astype(object)
            frame.loc[row, column] = value
        return spark.createDataFrame(frame)

    return {"held": held, "recs": recs, "prop": prop, "make": make, "spark": spark}


@pytest.fixture(scope="module")
def world(spark):
    """Graded held-out rewards (some users with only zero rewards), three models with tied
    integer scores over some of the items (the third given by ranks), item propensities;
    frames and matrices."""
    rng = np.random.default_rng(7)
    rewards = sp.random(
        N_USERS,
        N_ITEMS,
        density=0.12,
        random_state=3,
        format="csr",
        data_rvs=lambda n: rng.integers(1, 4, n).astype(float),
    )
    rows, cols = rewards.nonzero()
    held = pd.DataFrame(
        {
            "user": rows.astype(np.int64),
            "item": cols.astype(np.int64),
            "reward": np.asarray(rewards[rows, cols]).ravel(),
        }
    )
    users = np.unique(rows)
    # Users 0..9 keep their rows but every reward is 0: counted as excluded, never dropped.
    held.loc[held.user < 10, "reward"] = 0.0
    zero_users = int(np.unique(held.user[held.user < 10]).size)
    y_true = sp.csr_matrix(
        (held.reward, (np.searchsorted(users, held.user), held.item)), shape=(users.size, N_ITEMS)
    )
    scores, frames = {}, {}
    for m in range(3):
        dense = rng.integers(0, 4, size=(users.size, N_ITEMS)).astype(float)  # many ties
        dense[rng.random(dense.shape) < 0.4] = 0
        matrix = sp.csr_matrix(dense)
        scores[f"m{m}"] = matrix
        r, c = matrix.nonzero()
        frame = pd.DataFrame(
            {"user": users[r].astype(np.int64), "item": c.astype(np.int64), "score": matrix.data}
        )
        if m == 2:  # one model given by ranks: rank by score, ties to the lower item id
            frame = frame.sort_values(["user", "score", "item"], ascending=[True, False, True])
            frame["rank"] = frame.groupby("user").cumcount() + 1
            frame = frame.drop(columns="score")
        frames[f"m{m}"] = spark.createDataFrame(frame)
    propensity = rng.uniform(0.02, 1.0, N_ITEMS)
    return {
        "held": spark.createDataFrame(held),
        "frames": frames,
        "y_true": y_true,
        "scores": scores,
        "p": propensity,
        "zero_users": zero_users,
        "p_frame": spark.createDataFrame(
            pd.DataFrame({"item": np.arange(N_ITEMS, dtype=np.int64), "propensity": propensity})
        ),
    }


def _close(a, b, rel):
    assert a == pytest.approx(b, rel=rel, abs=rel * 1e-3), (a, b)


def _same(estimate, reference):
    """A summary estimate equals an in-memory estimate."""
    assert estimate.name == reference.name
    assert estimate.n_users == reference.n_users
    assert estimate.n_excluded_users == reference.n_excluded_users
    _close(estimate.value, reference.value, 1e-12)
    for ours, theirs in zip(
        estimate.confidence_interval(0.9), reference.confidence_interval(0.9), strict=True
    ):
        _close(ours, theirs, 1e-9)
    _close(estimate.standard_error, reference.standard_error, 1e-9)
    assert (estimate.diagnostics is None) == (reference.diagnostics is None)
    if reference.diagnostics is not None:
        for field in ("n_weights", "ess", "max_weight", "top_share", "n_clipped", "clipped_mass"):
            _close(
                getattr(estimate.diagnostics, field), getattr(reference.diagnostics, field), 1e-12
            )
        # The user share merges exactly: the partitions' users are disjoint.
        for field in ("n_users", "user_share", "reasons"):
            assert getattr(estimate.diagnostics, field) == getattr(reference.diagnostics, field)


def _core(metric, y_true, y_score, p, clip):
    """The in-memory estimate of the Spark estimator ``metric`` (its core function)."""
    weights = {"propensity": p, "clip": clip}
    calls = {
        "dcg": lambda: core_metrics.dcg(y_true, y_score, discount=D),
        "ndcg": lambda: core_metrics.ndcg(y_true, y_score, discount=D),
        "pn_dcg": lambda: core_metrics.pn_dcg(y_true, y_score, discount=D),
        "recall": lambda: core_metrics.recall(y_true, y_score, k=5),
        "ips_dcg": lambda: core_metrics.ips_dcg(y_true, y_score, discount=D, **weights),
        "snips_dcg": lambda: core_metrics.snips_dcg(y_true, y_score, discount=D, **weights),
        "ips_ndcg": lambda: core_metrics.ips_ndcg(y_true, y_score, discount=D, **weights),
        "ips_pn_dcg": lambda: core_metrics.ips_pn_dcg(y_true, y_score, discount=D, **weights),
        "ips_recall": lambda: core_metrics.ips_recall(y_true, y_score, k=5, **weights),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        return calls[metric]()


@pytest.fixture(scope="session")
def close():
    """``close(a, b, rel)``: ``a`` equals ``b`` to ``rel`` relative (``rel * 1e-3`` absolute
    near 0)."""
    return _close


@pytest.fixture(scope="session")
def same():
    """``same(estimate, reference)``: a summary estimate equals an in-memory estimate (value to
    1e-12 relative; interval, standard error to 1e-9; counts and weight diagnostics, the user
    share exactly)."""
    return _same


@pytest.fixture(scope="session")
def core():
    """``core(metric, y_true, y_score, p, clip)``: the in-memory estimate of the Spark
    estimator ``metric`` with ``LogDiscount(5)`` (recall at 5)."""
    return _core
