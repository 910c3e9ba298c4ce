"""Bad and edge-case input to the logged-feedback estimators, trec reading and the simulator.

Numerical expectations come from an independent route: enumeration of every ordering in exact
rational arithmetic (``fractions.Fraction``; log-weights through ``decimal`` exponentials, which
have no exponent range limit), hand calculation, or the deterministic limit of a policy.
"""

from __future__ import annotations

import decimal
import gzip
import itertools
import time
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recpack_ope.io.trec import read_trec
from recpack_ope.logged.banner_marginals import banner_rank_marginals, sampled_banner_rank_marginals
from recpack_ope.logged.doubly_robust import logged_dr_dcg
from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.pairwise_disagreement import (
    Disagreement,
    counterfactual_disagreement,
    pairwise_disagreement,
)
from recpack_ope.logged.plackett_luce import exposure, rank_marginals, sample_rankings
from recpack_ope.logged.policies import (
    DeterministicRanker,
    Exposure,
    LoggedRanking,
    PlackettLuceRanker,
)
from recpack_ope.logged.position_bias import PositionBiasEM, ShuffledPositionBias
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.reward.models import RewardMatrix
from recpack_ope.simulation.world import (
    PersonalisedPolicy,
    PopularityPolicy,
    SimulatedWorld,
    UniformPolicy,
)

_EXACT = decimal.Context(prec=60, Emin=-(10**6), Emax=10**6)


def exact_weights(weights, log_weights=False) -> list[Fraction]:
    """Weights as exact rationals; log-weights exponentiated to 60 digits without range limit."""
    if log_weights:
        return [Fraction(_EXACT.exp(decimal.Decimal(float(x)))) for x in weights]
    return [Fraction(float(x)) for x in weights]


def enumerate_marginals(weights: list[Fraction], n_ranks: int) -> np.ndarray:
    """P(item i at rank r) summed over every partial ordering, exactly."""
    out = [[Fraction(0)] * n_ranks for _ in weights]
    total = sum(weights)
    for ordering in itertools.permutations(range(len(weights)), n_ranks):
        p, left = Fraction(1), total
        for item in ordering:
            p *= weights[item] / left
            left -= weights[item]
        for r, item in enumerate(ordering):
            out[item][r] += p
    return np.array([[float(x) for x in row] for row in out])


def enumerate_banner(weights: list[Fraction], outside: Fraction) -> np.ndarray:
    """P(P_r = p | D) of a PL banner drawn from D plus an outside mass, exactly."""
    n = len(weights)
    q = [[Fraction(0)] * n for _ in range(n)]
    total_c, shown = sum(weights) + outside, Fraction(0)
    for ordering in itertools.permutations(range(n)):
        p, left = Fraction(1), total_c
        for item in ordering:
            p *= weights[item] / left
            left -= weights[item]
        shown += p
        for r, item in enumerate(ordering):
            q[r][item] += p
    return np.array([[float(x / shown) for x in row] for row in q])


def small_log(**changes) -> FeedLog:
    cols = dict(
        session=[0, 0, 1, 1],
        item=[0, 1, 0, 2],
        rank=[1, 2, 1, 2],
        reward=[1.0, 0.0, 0.0, 1.0],
        propensity=[0.5, 0.5, 0.5, 0.5],
    )
    cols.update(changes)
    return FeedLog.from_arrays(**cols)


# ---------------------------------------------------------------------------------------------
# K6: Plackett–Luce weights across float range


@pytest.mark.parametrize(
    "weights, n_ranks, log_weights",
    [
        ([1e-300, 1.0, 1e300], 3, False),  # 600 orders of magnitude: used to loop forever
        ([1e300, 1.0, 1e-300, 2e-300], 3, False),  # the two lightest tie in their own group
        ([1.7e308, 1.7e308, 1.0], 2, False),  # the sum overflows
        ([5e-324, 1e-323, 1.7e308], 3, False),  # subnormal weights next to the largest float
        ([700.0, 0.0, -700.0], 3, True),  # log-weights ±700
        ([700.0, 699.0, 0.0, -700.0, -700.5], 4, True),  # groups, each with its own order
        (list(np.log(np.logspace(-300, 300, 5))), 5, True),  # a split inside the range
        ([0.0, -2000.0, -2001.0, -2001.0 + np.log(3.0)], 3, True),
    ],
)
def test_extreme_rank_marginals_equal_exact_enumeration(weights, n_ranks, log_weights):
    got = rank_marginals(weights, n_ranks, log_weights=log_weights)
    expected = enumerate_marginals(exact_weights(weights, log_weights), n_ranks)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=0), 1.0, atol=1e-12)


def test_large_catalogue_spanning_thousands_of_nats():
    # 5,000 log-weights 0.6 nats apart over 3,000 nats: only the heaviest items can reach the
    # 20 ranks. The items past the top 200 (at least e^-120 lighter than the 200th) are never
    # shown, so the top 200 alone (an ordinary range) give the same marginals.
    log_w = np.linspace(-3000.0, 0.0, 5000)
    start = time.perf_counter()
    got = rank_marginals(log_w, 20, log_weights=True)
    assert time.perf_counter() - start < 10
    np.testing.assert_allclose(got[-200:], rank_marginals(np.exp(log_w[-200:]), 20), atol=1e-12)
    assert not got[:-200].any()


def test_log_weights_of_ordinary_range_match_the_weights():
    w = np.random.default_rng(3).pareto(1.5, 40) + 0.05
    np.testing.assert_allclose(
        rank_marginals(np.log(w), 5, log_weights=True), rank_marginals(w, 5), atol=1e-12
    )
    disc = LogDiscount()
    np.testing.assert_allclose(
        exposure([0.0, -900.0, -901.0], disc, 3, log_weights=True),
        enumerate_marginals(exact_weights([0.0, -900.0, -901.0], True), 3) @ disc.weights(3),
        atol=1e-12,
    )


def test_sampler_keeps_the_order_of_weights_beyond_float_range():
    # Items 0 and 1 are always first and second; 2 and 3 (weights 1 : 2 between them,
    # e^-1400 below item 0) follow in PL order: 3 before 2 with probability 2/3.
    draws = sample_rankings(
        [700.0, 0.0, -700.0, -700.0 + np.log(2.0)],
        4,
        20_000,
        np.random.default_rng(0),
        log_weights=True,
    )
    assert (draws[:, :2] == [0, 1]).all()
    share = np.mean(draws[:, 2] == 3)
    assert abs(share - 2 / 3) < 5 * np.sqrt(2 / 9 / 20_000)
    subnormal = sample_rankings([5e-324, 1e-323, 1.7e308], 3, 20_000, np.random.default_rng(1))
    assert (subnormal[:, 0] == 2).all()
    assert abs(np.mean(subnormal[:, 1] == 1) - 2 / 3) < 5 * np.sqrt(2 / 9 / 20_000)


def test_plackett_luce_ranker_with_scores_thousands_apart():
    # Used to be refused ("weight 0.0"): exp(-2000) underflows, the ranking is still defined.
    scores = np.array([0.0, -2000.0, -2001.0])
    log = FeedLog.from_arrays(
        [0, 0, 0], [0, 1, 2], [1, 2, 3], [1.0, 0.0, 0.0], propensity=[1.0, 1.0, 1.0]
    )
    disc = LogDiscount(cutoff=3)
    got = PlackettLuceRanker(scores, method="exact").exposure(log, disc).values
    expected = enumerate_marginals(exact_weights(scores, True), 3) @ disc.weights(3)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_world_with_a_tiny_temperature_logs_the_popularity_order():
    # τ = 1e-3: consecutive popularity ranks differ by (r / (r+1))^1000 ≤ 1e-79, so the
    # feeds are the popularity order up to float precision (the weights underflow to 0).
    world = SimulatedWorld(n_users=4, n_items=6, seed=0)
    log = world.log(PopularityPolicy(temperature=1e-3), feed_length=3)
    by_popularity = np.argsort(-world.popularity)
    np.testing.assert_array_equal(log.item.reshape(4, 3), np.tile(by_popularity[:3], (4, 1)))
    expected = np.zeros(6)
    expected[by_popularity[:3]] = LogDiscount().weights(3)
    np.testing.assert_allclose(log.exposure, expected, atol=1e-12)
    personal = world.log(PersonalisedPolicy(temperature=1e-4, n_segments=2), feed_length=2)
    assert np.isfinite(personal.exposure).all() and (personal.exposure.sum(axis=1) > 0).all()


@pytest.mark.parametrize(
    "weights, outside",
    [
        ([1e-10, 1.0, 1.0], 0.0),  # was off by 4e-8: W_C − W_S lost its digits
        ([1e-16, 1.0, 1.0, 2.0], 0.0),  # was NaN
        ([1e-300, 1.0, 1e300], 0.0),  # was NaN
        ([1.0, 2.0, 3.0], 1e300),  # was NaN
        ([1e308, 1e308, 5e307], 1e308),  # the masses overflow unless scaled
        ([0.3, 0.2, 0.1], 0.4),
    ],
)
def test_banner_marginals_equal_exact_enumeration(weights, outside):
    got = banner_rank_marginals(weights, outside)
    expected = enumerate_banner(exact_weights(weights), Fraction(outside))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_outside_mass_negative_by_rounding_is_zero():
    w = [0.1, 0.2, 0.3]
    outside = 0.6 - sum(w)  # every candidate shown: −1.1e-16 by rounding
    assert outside < 0
    np.testing.assert_array_equal(banner_rank_marginals(w, outside), banner_rank_marginals(w, 0.0))
    np.testing.assert_array_equal(
        sampled_banner_rank_marginals(w, outside, n_samples=100, rng=1)[0],
        sampled_banner_rank_marginals(w, 0.0, n_samples=100, rng=1)[0],
    )
    with pytest.raises(
        ValueError, match=r"outside_mass must be finite and >= 0, got -0.001: more negative"
    ):
        banner_rank_marginals(w, -1e-3)


def test_sampled_banner_marginals_with_overflowing_masses():
    w, outside = [1e308, 1e308, 5e307], 1e308
    estimate, se = sampled_banner_rank_marginals(w, outside, n_samples=40_000, rng=0)
    exact = enumerate_banner(exact_weights(w), Fraction(outside))
    assert np.isfinite(estimate).all() and (se > 0).all()
    assert np.abs((estimate - exact) / se).max() < 4.5


def test_counterfactual_disagreement_with_extreme_logging_weights():
    # Banner 0: weights 1e-300 and ~1, no outside mass: a re-draw puts product 1 first with
    # probability 1, so the click at rank 1 (score 0) meets score 1: one disagreement.
    # Banner 1: weights 1e-300 and 1e-310 with outside mass ~1: both orders equally likely
    # (ratio (W − 1e-300)/(W − 1e-310)), so the click at rank 2 (score 3) meets product 0
    # (score 2) with weight 1/2, no disagreement. Value 1 / (1 + 1/2).
    log = FeedLog.from_arrays(
        [0, 0, 1, 1],
        [0, 1, 0, 2],
        [1, 2, 1, 2],
        [1.0, 0.0, 0.0, 1.0],
        logging_weight=[1e-300, 1 - 1e-300, 1e-300, 1e-310],
    )
    result = counterfactual_disagreement(log, np.arange(4.0))
    assert result.value == pytest.approx(2 / 3, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# K7: bounded work


def test_exact_exposure_over_a_huge_catalogue_refuses_with_its_cost():
    log = FeedLog.from_arrays([0], [0], [1], [1.0], n_items=200_000, propensity=[1.0])
    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"exact rank marginals of 200000 items over 200000 ranks would need about 298.0 GiB",
    ):
        PlackettLuceRanker(np.linspace(0.0, 1.0, 200_000), method="exact").exposure(
            log, LogDiscount()
        )
    with pytest.raises(
        ValueError, match=r"20000 items over 20000 ranks .* GiB and .* steps .* fewer ranks"
    ):
        rank_marginals(np.arange(1.0, 20_001.0), 20_000)
    assert time.perf_counter() - start < 5
    # With a cutoff (the feed length) the same catalogue is cheap: equal scores show every
    # item at each of the 3 ranks with probability 1/200,000.
    cut = PlackettLuceRanker(np.zeros(200_000), method="exact").exposure(log, LogDiscount(cutoff=3))
    assert cut.values[0] == pytest.approx((1 + 1 / np.log2(3) + 1 / 2) / 200_000, rel=1e-12)


def test_em_iterations_and_tolerance_are_bounded():
    with pytest.raises(ValueError, match="max_iter=1000000000000 exceeds 100000 passes"):
        PositionBiasEM(max_iter=10**12)
    for tol, message in [
        (-1.0, "tol must be >= 0, got -1.0"),
        (np.nan, "tol must be finite, got nan"),
        (np.inf, "tol must be finite, got inf"),
        ("1e-6", "tol must be a finite real number"),
    ]:
        with pytest.raises(ValueError, match=message):
            PositionBiasEM(tol=tol)


def test_a_rank_of_a_trillion_is_refused_without_counting_to_it():
    log = FeedLog.from_arrays([0, 0, 1, 1], [0, 1, 0, 1], [1, 10**12, 1, 2], [1, 0, 1, 0])
    start = time.perf_counter()
    for model in (PositionBiasEM(), ShuffledPositionBias()):
        with pytest.raises(ValueError, match="no impression at rank 3"):
            model.fit(log)
    assert time.perf_counter() - start < 5


def test_simulator_refuses_worlds_and_logs_beyond_memory():
    with pytest.raises(ValueError, match=r"1000000000 users .* 238.4 GiB for its factors alone"):
        SimulatedWorld(n_users=10**9, n_items=10**9)
    with pytest.raises(ValueError, match=r"has 300000000 rows, about 18 GiB"):
        SimulatedWorld(n_users=1_000_000, n_items=50).log(
            UniformPolicy(), feed_length=50, n_feeds=6
        )


def test_banners_beyond_the_exact_limit_are_sampled():
    with pytest.raises(
        ValueError, match="17 products exceed 16: use sampled_banner_rank_marginals"
    ):
        banner_rank_marginals(np.ones(17))
    estimate, se = sampled_banner_rank_marginals(np.ones(17), 0.5, n_samples=500, rng=0)
    np.testing.assert_allclose(estimate.sum(axis=0), 1.0)
    assert se.shape == (17, 17)


# ---------------------------------------------------------------------------------------------
# K8: messages that blame the right thing


@pytest.mark.parametrize("rewards", [[0, 0, 0, 0], [1, 1, 1, 1]])
def test_disagreement_on_a_log_without_comparable_banners_says_so(rewards):
    log = small_log(reward=rewards, logging_weight=[0.3] * 4)
    with pytest.raises(
        ValueError, match="the log has no banner with both a clicked and a non-clicked product"
    ):
        pairwise_disagreement(log, np.arange(4.0))
    with pytest.raises(ValueError, match=r"of its 2 banners, \d have no click"):
        counterfactual_disagreement(log, np.arange(4.0))


def test_pairs_of_weight_zero_blame_the_log_not_the_model():
    log = small_log()
    classic = Disagreement.classic(log)
    zero = Disagreement(
        log,
        "counterfactual disagreement",
        classic.clicked,
        classic.other,
        np.zeros(classic.weight.size),
        None,
        classic.banners,
        classic.n_rejected,
    )
    with pytest.raises(ValueError, match="every \\(clicked, non-clicked\\) pair has weight 0"):
        zero.evaluate(np.arange(4.0))
    with pytest.raises(ValueError, match="the model ties every pair"):
        classic.evaluate(np.zeros(4))


def test_position_bias_on_a_log_without_clicks_says_so():
    log = small_log(reward=[0, 0, 0, 0])
    for model in (PositionBiasEM(), ShuffledPositionBias()):
        with pytest.raises(ValueError, match=r"the log has no click \(reward 1\) at ranks 1..2"):
            model.fit(log)


@pytest.fixture
def trec_files(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n")
    run = tmp_path / "input.run1"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n")
    return qrels, run


def test_truncated_gzip_names_the_file(trec_files, tmp_path):
    qrels, run = trec_files
    for source, name in ((run, "input.cut.gz"), (qrels, "qrels.gz")):
        data = gzip.compress(source.read_bytes() * 40)
        (tmp_path / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(
        ValueError, match=r"run file '.*input.cut.gz' is a truncated or corrupt gzip file"
    ):
        read_trec(str(qrels), [str(tmp_path / "input.cut.gz")])
    with pytest.raises(
        ValueError, match=r"qrels file '.*qrels.gz' is a truncated or corrupt gzip file"
    ):
        read_trec(str(tmp_path / "qrels.gz"), [str(run)])


def test_a_run_list_given_as_one_path_is_refused(trec_files):
    qrels, run = trec_files
    for runs in (str(run), run):
        with pytest.raises(
            ValueError,
            match=r"runs must be a list of run file paths, got the single path .*input.run1.*pass \[path\]",
        ):
            read_trec(str(qrels), runs)
    with pytest.raises(
        TypeError, match="runs must be a list of run file paths: 'NoneType' object is not iterable"
    ):
        read_trec(str(qrels), None)
    with pytest.raises(TypeError, match="a run file path must be a str or os.PathLike, got int"):
        read_trec(str(qrels), [3])
    collection = read_trec(qrels, [run])  # paths as Path objects are fine
    np.testing.assert_array_equal(collection.runs["run1"].items, [[0, 1], [2, -1]])


@pytest.mark.parametrize(
    "qrels_text, kwargs, error, message",
    [
        ("q1 0 d1 nan\nq2 0 d3 2\n", {}, ValueError, "has grade nan on line 1; grades are finite"),
        ("q1 0 d1 1\nq2 0 d3 inf\n", {}, ValueError, "has grade inf on line 2"),
        (
            "q1 0 d1 1\n",
            dict(depth=np.inf),
            ValueError,
            "depth must be a positive integer or None, got inf",
        ),
        (
            "q1 0 d1 1\n",
            dict(depth=np.nan),
            ValueError,
            "depth must be a positive integer or None, got nan",
        ),
        (
            "q1 0 d1 1\n",
            dict(relevance_threshold="1"),
            ValueError,
            "relevance_threshold must be a finite real number, got '1'",
        ),
        (
            "q1 0 d1 1\n",
            dict(relevance_threshold=1j),
            ValueError,
            "relevance_threshold must be a finite real number, got 1j",
        ),
        (
            "q1 0 d1 1\n",
            dict(relevance_threshold=np.nan),
            ValueError,
            "relevance_threshold must be finite, got nan",
        ),
    ],
)
def test_trec_values_and_options(tmp_path, trec_files, qrels_text, kwargs, error, message):
    qrels = tmp_path / "bad_qrels"
    qrels.write_text(qrels_text)
    with pytest.raises(error, match=message):
        read_trec(str(qrels), [str(trec_files[1])], **kwargs)


def test_trec_paths_that_are_not_files(trec_files, tmp_path):
    with pytest.raises(ValueError, match=r"qrels file '.*' is a directory, not a file"):
        read_trec(str(tmp_path), [str(trec_files[1])])
    with pytest.raises(TypeError, match="a qrels file path must be a str or os.PathLike, got list"):
        read_trec([str(trec_files[0])], [str(trec_files[1])])


# ---------------------------------------------------------------------------------------------
# K1/K3/K4: FeedLog columns


BASE = dict(session=[0, 0, 1, 1], item=[0, 1, 0, 2], rank=[1, 2, 1, 2], reward=[1.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(rank=[1, -1, 1, 2]), "rank of row 1 is -1; ranks are integers >= 1"),
        (
            dict(rank=[1, 2.0**60, 1, 2]),
            r"rank of row 1 is 1.15\d*e\+18; ranks are integers >= 1 \(at most 2\*\*53\)",
        ),
        (
            dict(rank=np.array([1, 2**63 + 5, 1, 2], dtype=np.uint64)),
            r"rank of row 1 is 9223372036854775813",
        ),
        (
            dict(rank=np.array([1, 2j, 1, 2])),
            r"rank has complex dtype complex128 \(value 2j at position 1\)",
        ),
        (dict(rank=["1", "2", "1", "2"]), "rank must hold real numbers, got dtype <U1"),
        (dict(rank=[1, 1, 1, 2]), "session 0 shows two items at rank 1"),
        (dict(item=[0, 0, 0, 2]), "session 0 shows item 0 twice"),
        (
            dict(reward=np.array([1, 1j, 0, 1])),
            r"reward has complex dtype complex128 \(value 1j at position 1\)",
        ),
        (dict(reward=np.array([1, 0j, 0, 1])), "reward has complex dtype complex128"),
        (dict(reward=["1", "0", "0", "1"]), "reward must hold real numbers, got dtype <U1"),
        (dict(reward=[1.0, -0.5, 0.0, 1.0]), "reward of row 1 is -0.5"),
        (dict(propensity=np.array([0.5, 0.5j, 0.5, 0.5])), "propensity has complex dtype"),
        (dict(propensity=[0.5, 1.5, 0.5, 0.5]), r"propensity 1.5 of row 1 lies outside \(0, 1\]"),
        (
            dict(propensity=[0.5, np.nan, 0.5, 0.5]),
            r"propensity nan of row 1 lies outside \(0, 1\]",
        ),
        (dict(logging_weight=np.array([0.1, 0.1j, 0.1, 0.1])), "logging_weight has complex dtype"),
        (
            dict(item=np.array([0, 1j, 0, 2])),
            "item ids must be integers, text or reals, got complex dtype",
        ),
        (
            dict(item=np.array([0, "a", 0, "b"], dtype=object)),
            r"item ids mix types that cannot be ordered: row 0 is int 0, row 1 is str 'a'",
        ),
        (
            dict(item=np.array(["a", None, "a", "b"], dtype=object)),
            r"item id of row 1 is missing \(None\)",
        ),
        (
            dict(item=np.array(["a", pd.NA, "a", "b"], dtype=object)),
            r"item id of row 1 is missing \(<NA>\)",
        ),
        (
            dict(item=np.array([1.0, np.nan, 1.0, 2.0], dtype=object)),
            r"item id of row 1 is missing \(nan\)",
        ),
        (dict(session=np.array([0, "a", 1, 1], dtype=object)), "session ids mix types"),
        (
            dict(item=np.array([0, 2**63 + 5, 0, 2], dtype=np.uint64)),
            "item id of row 1 is 9223372036854775813, beyond the int64",
        ),
        (dict(item=[0, -3, 0, 2]), "item ids must be >= 0, got -3 in row 1"),
        (
            dict(item=[0, 2**40, 0, 2], context=[2**30, 2**30, 7, 7]),
            r"contexts × items has shape \(1073741825, 1099511627777\).*below 2\*\*63",
        ),
        (dict(n_items=3.0), "n_items must be an integer or None, got 3.0"),
        (dict(n_contexts="5"), "n_contexts must be an integer or None, got '5'"),
        (dict(n_items=2), "n_items=2 but the log has item index 2"),
        (dict(propensity=[0.5, 0.5, 0.5]), "propensity has 3 rows but session has 4"),
        (
            dict(propensity=[[0.5, 0.5, 0.5, 0.5]]),
            r"propensity must be a 1-D column, got shape \(1, 4\)",
        ),
        (
            dict(session=[[0, 0, 1, 1]]),
            r"session must be a non-empty 1-D column, got shape \(1, 4\)",
        ),
        (dict(reward=[1.0, 0.0]), "reward has 2 rows but session has 4"),
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
        (
            "rank",
            pd.array([1, None, 1, 2], dtype="Int64"),
            r"column 'rank' \(rank\) has a missing value at row 1",
        ),
        (
            "reward",
            pd.array([1.0, None, 0.0, 1.0], dtype="Float64"),
            r"column 'reward' \(reward\) has a missing value at row 1",
        ),
        (
            "reward",
            pd.array([True, None, False, True], dtype="boolean"),
            r"column 'reward' \(reward\) has a missing value",
        ),
        (
            "item",
            pd.array(["a", None, "a", "b"], dtype="string"),
            r"column 'item' \(item\) has a missing value at row 1",
        ),
        (
            "item",
            pd.Categorical(["b", None, "b", "c"]),
            r"column 'item' \(item\) has a missing value at row 1",
        ),
        (
            "session",
            pd.array([0, None, 1, 1], dtype="Int64"),
            r"column 'session' \(session\) has a missing value",
        ),
        (
            "p",
            pd.array([0.5, None, 0.5, 0.5], dtype="Float64"),
            r"column 'p' \(propensity\) has a missing value",
        ),
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
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame, got dict"):
        FeedLog.from_pandas(dict(BASE))
    frame = pd.DataFrame(BASE)
    with pytest.raises(ValueError, match=r"column 'rank' \(rank\) appears 2 times in the frame"):
        FeedLog.from_pandas(pd.concat([frame, frame[["rank"]]], axis=1))


def test_scores_of_logged_rows_must_be_real_and_exact():
    log = small_log()
    with pytest.raises(
        ValueError, match=r"scores has complex dtype complex128 \(value 1j at position 0\)"
    ):
        pairwise_disagreement(log, np.array([1j, 1, 1, 1]))
    with pytest.raises(
        ValueError,
        match=r"scores has integer 1152921504606846976 at row 0 of the log, beyond ±2\*\*53",
    ):
        pairwise_disagreement(log, np.array([2**60, 2**60 + 1, 0, 1]))
    with pytest.raises(ValueError, match=r"scores has complex dtype"):
        pairwise_disagreement(log, sp.csr_matrix(np.ones((2, 3)) * 1j))
    # Below 2**53 integers are exact. Session 0: the click (score 0) is below the other
    # product (1), a disagreement; session 1: the click (3) is above (2). Value 1/2.
    assert pairwise_disagreement(log, np.array([0, 1, 2, 3])).value == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------
# K5: every argument


def pl(**kwargs):
    return PlackettLuceRanker(np.zeros(3), **kwargs)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: pl(temperature="1"),
            ValueError,
            "temperature must be a finite real number > 0, got '1'",
        ),
        (
            lambda: pl(temperature=None),
            ValueError,
            "temperature must be a finite real number > 0, got None",
        ),
        (
            lambda: pl(temperature=True),
            ValueError,
            "temperature must be a finite real number > 0, got True",
        ),
        (
            lambda: pl(temperature=1j),
            ValueError,
            "temperature must be a finite real number > 0, got 1j",
        ),
        (lambda: pl(temperature=np.inf), ValueError, "temperature must be finite and > 0, got inf"),
        (
            lambda: pl(n_samples=1),
            ValueError,
            "n_samples must be >= 2: the Monte Carlo standard error needs two draws",
        ),
        (
            lambda: pl(seed="a"),
            ValueError,
            "seed must be None, an integer >= 0 or a numpy Generator, got 'a'",
        ),
        (
            lambda: pl(seed=-1),
            ValueError,
            "seed must be None, an integer >= 0 or a numpy Generator, got -1",
        ),
        (
            lambda: pl(seed=1.5),
            ValueError,
            "seed must be None, an integer >= 0 or a numpy Generator, got 1.5",
        ),
        (
            lambda: pl(method=["exact"]),
            ValueError,
            r"method must be 'auto', 'exact' or 'monte_carlo', got \['exact'\]",
        ),
        (
            lambda: rank_marginals([1.0, 2.0], 1, log_weights="yes"),
            ValueError,
            "log_weights must be True or False",
        ),
        (
            lambda: rank_marginals([1.0, 2j], 1),
            ValueError,
            r"weights has complex dtype complex128 \(value 2j at position 1\)",
        ),
        (
            lambda: rank_marginals(["a", "b"], 1),
            ValueError,
            "weights must hold real numbers, got dtype <U1",
        ),
        (
            lambda: rank_marginals([0.0, np.inf], 1, log_weights=True),
            ValueError,
            "log-weights must be finite; item 1 has inf",
        ),
        (
            lambda: sample_rankings([1.0, 2.0], 2, 0, np.random.default_rng()),
            ValueError,
            "n_samples must be a positive integer, got 0",
        ),
        (
            lambda: sample_rankings([1.0, 2.0], 2, 2.5, np.random.default_rng()),
            ValueError,
            "n_samples must be a positive integer, got 2.5",
        ),
        (
            lambda: sample_rankings([1.0, 2.0], 2, 3, 0),
            TypeError,
            "rng must be a numpy.random.Generator, got int",
        ),
        (
            lambda: exposure([1.0, 2.0], "log", 2),
            TypeError,
            "discount must be a Discount model, got str",
        ),
        (
            lambda: banner_rank_marginals([1.0, 2.0], "a"),
            ValueError,
            "outside_mass must be a finite real number, got 'a'",
        ),
        (
            lambda: banner_rank_marginals([1.0, 2.0], [0.1]),
            ValueError,
            r"outside_mass must be a finite real number, got \[0.1\]",
        ),
        (
            lambda: banner_rank_marginals([1.0, 2.0], 1j),
            ValueError,
            "outside_mass must be a finite real number, got 1j",
        ),
        (
            lambda: banner_rank_marginals([1.0, 2.0], np.nan),
            ValueError,
            "outside_mass must be finite, got nan",
        ),
        (lambda: banner_rank_marginals([1.0, 2j]), ValueError, "weights has complex dtype"),
        (
            lambda: sampled_banner_rank_marginals([1.0, 2.0], rng="a"),
            ValueError,
            "rng must be None, an integer >= 0 or a numpy Generator, got 'a'",
        ),
        (
            lambda: PositionBiasEM(n_ranks=0),
            ValueError,
            "n_ranks must be a positive integer or None, got 0",
        ),
        (
            lambda: ShuffledPositionBias(n_ranks=2.5),
            ValueError,
            "n_ranks must be a positive integer or None, got 2.5",
        ),
        (
            lambda: PositionBiasEM(relevance=["item"]),
            ValueError,
            "relevance must be 'item' or 'context_item'",
        ),
    ],
)
def test_arguments_of_the_logged_modules(make, error, message):
    with pytest.raises(error, match=message):
        make()


def corrupt_csr(kind: str) -> sp.csr_matrix:
    """A 2 × 3 CSR matrix whose arrays were edited into an inconsistent state."""
    m = sp.csr_matrix(np.arange(1.0, 7.0).reshape(2, 3))
    if kind == "index":
        m.indices[4] = 7
    else:
        m.indptr[1] = 7
    return m


@pytest.mark.parametrize(
    "kind, message",
    [
        (
            "index",
            r"corrupt sparse matrix: stored entry 4 \(row 1\) has column index 7, outside 0..2",
        ),
        ("indptr", r"corrupt CSR matrix: indptr decreases at row 1 \(7 → 6\)"),
    ],
)
def test_corrupt_sparse_scores_are_refused_before_use(kind, message):
    log = small_log()
    with pytest.raises(ValueError, match="scores is a " + message):
        PlackettLuceRanker(corrupt_csr(kind)).exposure(log, LogDiscount())
    with pytest.raises(ValueError, match="scores is a " + message):
        pairwise_disagreement(log, corrupt_csr(kind))


def test_plackett_luce_scores_are_checked_when_ranking():
    log = small_log()
    disc = LogDiscount()
    with pytest.raises(
        ValueError, match=r"scores has complex dtype complex128 \(value 1j at position 0\)"
    ):
        PlackettLuceRanker(np.array([1j, 0, 0])).exposure(log, disc)
    with pytest.raises(
        ValueError, match=r"scores has integer 1152921504606846976 at item 0, beyond ±2\*\*53"
    ):
        PlackettLuceRanker(np.array([2**60, 2**60 + 1, 0])).exposure(log, disc)
    with pytest.raises(
        ValueError, match=r"scores has integer 1152921504606846976 at context 1 item 0"
    ):
        PlackettLuceRanker(np.array([[0, 1, 2], [2**60, 0, 1]])).exposure(log, disc)
    with pytest.raises(ValueError, match=r"scores has complex dtype"):
        PlackettLuceRanker(sp.csr_matrix(np.ones((2, 3)) * 1j)).exposure(log, disc)
    with pytest.raises(
        ValueError, match=r"scores / temperature overflows in every context: scores spanning inf"
    ):
        PlackettLuceRanker(np.array([1e308, -1e308, 0.0])).exposure(log, disc)


def test_exposure_objects_are_checked():
    log = small_log()
    disc = LogDiscount()
    for values, message in [
        (np.array([np.nan, 1, 1, 1]), "Exposure values of row 0 is nan"),
        (np.array([-5.0, 1, 1, 1]), "Exposure values of row 0 is -5.0"),
        (
            np.ones((4, 1)),
            r"Exposure values must be 1-D with one value per logged row, got shape \(4, 1\)",
        ),
        (np.array([1j, 1, 1, 1]), "Exposure values has complex dtype"),
    ]:
        with pytest.raises(ValueError, match=message):
            Exposure(values)
    with pytest.raises(
        ValueError,
        match=r"Exposure standard_error has shape \(2,\), values \(4,\): give one standard error per value",
    ):
        Exposure(np.ones(4), np.ones(2))
    with pytest.raises(ValueError, match="Exposure standard_error of row 1 is -1.0"):
        Exposure(np.ones(4), np.array([0.0, -1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"target exposure has shape \(3,\); the log has 4 rows"):
        logged_dcg(log, Exposure(np.ones(3)), discount=disc)
    with pytest.raises(ValueError, match=r"logging exposure has shape \(2,\)"):
        logged_dcg(log, LoggedRanking(), discount=disc, logging=Exposure(np.ones(2)))
    with pytest.raises(
        TypeError, match="target must be a DeterministicRanker or PlackettLuceRanker, got Exposure"
    ):
        logged_dr_dcg(
            log,
            Exposure(np.ones(4)),
            discount=disc,
            reward_model=RewardMatrix(np.full((2, 3), 0.5)),
        )
    # A list is an array: the unbiased DCG by hand, Σ c · ε / ε0 per session = (1·1/0.5 + 1·1/0.5) / 2.
    assert logged_dcg(log, Exposure([1.0, 1.0, 1.0, 1.0]), discount=disc).value == pytest.approx(
        2.0
    )


def test_options_of_logged_dcg_and_disagreement():
    log = small_log()
    disc = LogDiscount()
    target = DeterministicRanker(np.ones((2, 3)))
    with pytest.raises(ValueError, match="control_variate must be True or False, got 'yes'"):
        logged_dcg(log, target, discount=disc, control_variate="yes")
    with pytest.raises(
        TypeError, match="logging_discount must be a Discount model or None, got str"
    ):
        logged_dcg(log, target, discount=disc, logging=LoggedRanking(), logging_discount="log")
    weighted = small_log(logging_weight=[0.3] * 4)
    with pytest.raises(
        ValueError, match="seed must be None, an integer >= 0 or a numpy Generator, got 'a'"
    ):
        counterfactual_disagreement(weighted, np.arange(4.0), seed="a")
    with pytest.raises(ValueError, match="progress must be True or False, got 'yes'"):
        counterfactual_disagreement(weighted, np.arange(4.0), progress="yes")


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: SimulatedWorld(seed=-1),
            ValueError,
            r"seed must be an integer >= 0 \(worlds and logs are reproducible\), got -1",
        ),
        (lambda: SimulatedWorld(seed=1.5), ValueError, "seed must be an integer >= 0 .* got 1.5"),
        (lambda: SimulatedWorld(seed=None), ValueError, "seed must be an integer >= 0 .* got None"),
        (lambda: SimulatedWorld(seed="a"), ValueError, "seed must be an integer >= 0 .* got 'a'"),
        (
            lambda: SimulatedWorld(preference_strength="a"),
            ValueError,
            "preference_strength must be a finite real number, got 'a'",
        ),
        (
            lambda: SimulatedWorld(base_logit=1j),
            ValueError,
            "base_logit must be a finite real number, got 1j",
        ),
        (
            lambda: SimulatedWorld(n_items=4, popularity_exponent=1e6),
            ValueError,
            r"popularity 4\^-1e\+06 of the least popular item underflow",
        ),
        (
            lambda: SimulatedWorld(click_model=["pbm"]),
            ValueError,
            r"click_model must be one of \('pbm', 'cascade'\), got \['pbm'\]",
        ),
        (
            lambda: PopularityPolicy(temperature="1"),
            ValueError,
            "temperature must be a finite real number > 0, got '1'",
        ),
        (lambda: PersonalisedPolicy(noise=np.inf), ValueError, "noise must be finite, got inf"),
        (
            lambda: PersonalisedPolicy(personalisation=True),
            ValueError,
            "personalisation must be a finite real number, got True",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).log(
                UniformPolicy(), feed_length=2, seed=-1
            ),
            ValueError,
            "seed must be an integer >= 0",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).log(
                UniformPolicy(), feed_length=2, seed="a"
            ),
            ValueError,
            "seed must be an integer >= 0 .* got 'a'",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).log(UniformPolicy(), feed_length=5),
            ValueError,
            r"feed_length=5 exceeds the number of items \(4\)",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).policy_reward(UniformPolicy(), "log", 2),
            TypeError,
            "discount must be a Discount model, got str",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).policy_reward("pop", LogDiscount(), 2),
            TypeError,
            "policy must be a PopularityPolicy",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).policy_reward(
                UniformPolicy(), LogDiscount(), 6
            ),
            ValueError,
            "feed_length=6 exceeds",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).relevance_of([-1], [0]),
            ValueError,
            "unknown index -1 in users; the world has 3",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).relevance_of([0], [4]),
            ValueError,
            "unknown index 4 in items; the world has 4",
        ),
        (
            lambda: SimulatedWorld(n_users=3, n_items=4).reward_model().predict([0.5], [0]),
            ValueError,
            "users must be integer indices, got dtype float64",
        ),
    ],
)
def test_simulator_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_relevance_of_valid_indices_is_unchanged():
    world = SimulatedWorld(n_users=3, n_items=4, seed=2)
    np.testing.assert_array_equal(
        world.relevance_of([2, 0], [3, 1]), world.relevance([2, 0])[[0, 1], [3, 1]]
    )
