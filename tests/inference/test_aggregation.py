"""Borda and MC4 aggregation of per-user system orders."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from recpack_ope.inference import aggregation
from recpack_ope.inference.aggregation import borda, majority, mc4, order
from recpack_ope.inference.systems import SystemScores


def test_borda_by_hand_with_ties():
    scores = np.array([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0], [5.0, 5.0, 0.0]])
    # user 0: 2,1,0; user 1: 0,2,1; user 2 ties s0 and s1: 1.5,1.5,0.
    np.testing.assert_allclose(borda(scores), [3.5 / 3, 4.5 / 3, 1 / 3])
    assert majority(scores).tolist() == [[0, 1, 2], [1, 0, 3], [1, 0, 0]]


def brute_force_stationary(scores, damping):
    """The damped MC4 chain built with loops from Dwork et al.'s rule, iterated to convergence."""
    n_users, m = scores.shape
    chain = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            above = sum(scores[u, j] > scores[u, i] for u in range(n_users))
            below = sum(scores[u, j] < scores[u, i] for u in range(n_users))
            if above > below:
                chain[i, j] = 1 / m
        chain[i, i] = 1 - chain[i].sum()
    chain = (1 - damping) * chain + damping / m
    pi = np.full(m, 1 / m)
    for _ in range(20_000):
        pi = pi @ chain
    return pi


@pytest.mark.parametrize("damping", [0.05, 0.15, 0.5])
def test_mc4_stationary_distribution_equals_iterated_chain(damping):
    scores = np.random.default_rng(1).integers(0, 4, size=(15, 6)).astype(float)
    np.testing.assert_allclose(
        mc4(scores, damping), brute_force_stationary(scores, damping), atol=1e-10
    )


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    m=st.integers(3, 9),
    n_users=st.integers(1, 25),
    damping=st.sampled_from([0.01, 0.15, 0.6]),
)
def test_mc4_ranks_a_condorcet_winner_first(seed, m, n_users, damping):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, size=(n_users, m)).astype(float)
    winner = int(rng.integers(m))
    boost = rng.random(n_users) < 0.75
    scores[boost, winner] = scores.max() + 1
    wins = majority(scores)
    others = [j for j in range(m) if j != winner]
    assume(all(wins[winner, j] > wins[j, winner] for j in others))
    assert order(scores, "mc4", damping)[0] == winner
    assert mc4(scores, damping).argmax() == winner


def test_orderings_and_errors():
    scores = np.array([[0.9, 0.5, 0.1], [0.8, 0.6, 0.7], [0.2, 0.9, 0.3]])
    sample = SystemScores(
        names=("a", "b", "c"), per_user=scores, user_ids=np.arange(3), name="nDCG"
    )
    np.testing.assert_allclose(sample.means, [19 / 30, 2 / 3, 11 / 30])
    assert sample.ordering("mean") == ["b", "a", "c"]
    # Per-user orders: a>b>c, a>c>b, b>c>a. Borda points 4/3, 1, 2/3; a beats b and c by
    # majority (a Condorcet winner) and b beats c, so both aggregations put a first.
    np.testing.assert_allclose(borda(scores), [4 / 3, 1, 2 / 3])
    assert sample.ordering("borda") == ["a", "b", "c"]
    assert sample.ordering("mc4") == ["a", "b", "c"]
    with pytest.raises(ValueError, match="method must be one of"):
        order(scores, "kemeny")
    with pytest.raises(ValueError, match="damping must lie in"):
        mc4(scores, damping=1.0)
    with pytest.raises(ValueError, match="NaN for user 1, system 2"):
        borda(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, np.nan]]))
    with pytest.raises(ValueError, match="per_user has shape"):
        SystemScores(names=("a", "b"), per_user=scores, user_ids=np.arange(3), name="x")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: aggregation.mc4(np.ones((2, 2)), np.nan),
            r"damping.*got nan",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
