"""Several systems on the same users: SystemScores' inputs, labels and argument checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recpack_ope.inference.systems import SystemScores
from recpack_ope.metrics.dcg import dcg
from recpack_ope.propensity.discount import LogDiscount

D = LogDiscount(3)


Y = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])


S = np.array([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.1, 0.4], [0.3, 0.2, 0.9, 0.1]])


def _scores():
    rng = np.random.default_rng(0)
    return SystemScores(
        names=("a", "b", "c"), per_user=rng.random((6, 3)), user_ids=np.arange(6), name="m"
    )


def test_system_scores_dataframe_columns_follow_the_names():
    values = np.array([[0.1, 0.5], [0.2, 0.7], [0.4, 0.6]])
    frame = pd.DataFrame(values, columns=["b", "a"])
    scores = SystemScores(names=("a", "b"), per_user=frame, user_ids=np.arange(3), name="m")
    np.testing.assert_array_equal(scores.per_user, values[:, ::-1])
    with pytest.raises(ValueError, match=r"columns \['b', 'c'\] but names are \['a', 'b'\]"):
        SystemScores(
            names=("a", "b"),
            per_user=frame.rename(columns={"a": "c"}),
            user_ids=np.arange(3),
            name="m",
        )


ESTIMATE = dcg(Y, S, discount=D)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: SystemScores(("a", "a"), np.ones((2, 2)), np.arange(2), "m"),
            "'a' appears more than once",
        ),
        (
            lambda: SystemScores("ab", np.ones((2, 2)), np.arange(2), "m"),
            "names must be a sequence of system names, got 'ab'",
        ),
        (
            lambda: SystemScores.from_estimates([ESTIMATE, ESTIMATE]),
            "results must map at least two system names",
        ),
        (
            lambda: SystemScores.from_estimates({"a": ESTIMATE, "b": 2}),
            r"results\['b'\] is a int, not an estimate",
        ),
        (lambda: _scores().ordering("mc4", "x"), r"damping.*got 'x'"),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_from_user_values_pairs_the_users_every_system_has():
    from scipy import stats

    from recpack_ope.inference.significance import tied_with_best

    per_system = {
        "a": {"u3": 1.0, "u1": 0.0, "u2": 0.5, "u9": 1.0},
        "b": {"u2": 0.25, "u1": 0.5, "u3": 0.0},
    }
    scores = SystemScores.from_user_values(per_system, "Recall@5")
    assert scores.names == ("a", "b") and scores.name == "Recall@5"
    assert scores.user_ids.tolist() == ["u1", "u2", "u3"]  # u9: only a has it
    np.testing.assert_array_equal(scores.per_user, [[0.0, 0.5], [0.5, 0.25], [1.0, 0.0]])
    ties = tied_with_best(scores)
    p = stats.ttest_rel([0.0, 0.5, 1.0], [0.5, 0.25, 0.0]).pvalue
    assert ties.p_value[ties.names.index("b")] == pytest.approx(p, rel=1e-9)
    with pytest.raises(ValueError, match="per_system must map system names"):
        SystemScores.from_user_values({}, "Recall@5")


def test_distinct_names_numbers_repeated_names_in_order():
    from recpack_ope.inference.systems import distinct_names

    assert distinct_names(["BPR", "MostPop", "BPR", "BPR"]) == (
        "BPR (1)",
        "MostPop",
        "BPR (2)",
        "BPR (3)",
    )
    assert distinct_names(iter(["a", "b"])) == ("a", "b")
