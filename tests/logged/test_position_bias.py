"""Position-bias estimation recovers a known examination curve from simulated PBM clicks."""

import time

import numpy as np
import pytest
from test_feed_log import small_log

from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.position_bias import PositionBiasEM, ShuffledPositionBias

THETA = np.array([1.0, 0.75, 0.6, 0.5, 0.42, 0.36, 0.3, 0.26, 0.22, 0.2])
N_ITEMS = 30
_world = np.random.default_rng(0)
GAMMA = _world.uniform(0.02, 0.9, N_ITEMS)
# The logging policy puts relevant items on top, as a deployed recommender does.
POPULARITY = np.exp(8 * GAMMA + _world.normal(0.0, 0.5, N_ITEMS))


def simulate(seed: int, shuffled: bool, sessions: int = 15_000) -> FeedLog:
    """PL feeds of 10 items (uniform when shuffled), clicks ~ Bernoulli(θ_r · γ_item)."""
    rng = np.random.default_rng(seed)
    weights = np.ones(N_ITEMS) if shuffled else POPULARITY
    order = np.argsort(rng.standard_exponential((sessions, N_ITEMS)) / weights, axis=1)[:, :10]
    item, rank = order.ravel(), np.tile(np.arange(1, 11), sessions)
    click = (rng.random(item.size) < THETA[rank - 1] * GAMMA[item]).astype(float)
    return FeedLog.from_arrays(
        np.repeat(np.arange(sessions), 10), item, rank, click, n_items=N_ITEMS
    )


def test_shuffled_traffic_ctr_ratio_is_within_its_standard_errors():
    fit = ShuffledPositionBias().fit(simulate(1, shuffled=True))
    z = (fit.discount_.values - THETA)[1:] / fit.standard_error_[1:]
    assert np.abs(z).max() < 4  # 9 ranks: P(max |z| > 4) ≈ 6e-4 for calibrated SEs
    assert fit.discount_.values[0] == 1.0 and fit.discount_.cutoff == 10


def test_em_recovers_the_curve_on_non_shuffled_logs_where_ctr_by_rank_is_biased():
    fits = np.array(
        [PositionBiasEM().fit(simulate(seed, shuffled=False)).discount_.values for seed in range(6)]
    )
    spread = fits.std(axis=0, ddof=1)[1:]
    # Unbiased: the mean of 6 independent fits is within 4 of its standard errors of θ.
    assert np.all(np.abs(fits.mean(axis=0)[1:] - THETA[1:]) < 4 * spread / np.sqrt(6))
    # Precise: with 150k impressions a fit is within 0.05 of θ (measured spread ≈ 0.01).
    assert spread.max() < 0.02 and np.abs(fits - THETA).max() < 0.05
    # The naive curve (CTR by rank on the same kind of log) is off by far more: the top ranks
    # hold the more relevant items, which EM's γ separates from θ.
    naive = ShuffledPositionBias().fit(simulate(0, shuffled=False))
    assert np.abs(naive.discount_.values - THETA).max() > 3 * spread.max()


def test_em_and_ctr_agree_on_shuffled_traffic_and_context_keys_work():
    log = simulate(3, shuffled=True)
    em = PositionBiasEM().fit(log)
    ctr = ShuffledPositionBias().fit(log)
    np.testing.assert_allclose(
        em.discount_.values, ctr.discount_.values, atol=4 * ctr.standard_error_.max()
    )
    both = PositionBiasEM("context_item", max_iter=5).fit(log)
    assert both.keys_.size == np.unique(log.context * N_ITEMS + log.item).size
    assert both.n_iter_ <= 5


def test_bad_input():
    log = FeedLog.from_arrays([0, 0, 1], [0, 1, 0], [1, 2, 1], [1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="binary clicks; reward 2.0 at rank 2 of session 0"):
        PositionBiasEM().fit(log)
    gap = FeedLog.from_arrays([0, 0], [0, 1], [1, 3], [1.0, 0.0])
    with pytest.raises(ValueError, match="no impression at rank 2"):
        ShuffledPositionBias().fit(gap)
    with pytest.raises(ValueError, match="relevance must be"):
        PositionBiasEM("user")


def test_em_iterations_and_tolerance_are_bounded():
    with pytest.raises(ValueError, match="max_iter=1000000000000 exceeds 100000"):
        PositionBiasEM(max_iter=10**12)
    for tol, message in [
        (-1.0, "tol.*-1.0"),
        (np.nan, "tol.*nan"),
        (np.inf, "tol.*inf"),
        ("1e-6", "tol.*'1e-6'"),
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


def test_position_bias_on_a_log_without_clicks_says_so():
    log = small_log(reward=[0, 0, 0, 0])
    for model in (PositionBiasEM(), ShuffledPositionBias()):
        with pytest.raises(ValueError, match=r"no click \(reward 1\) at ranks 1..2"):
            model.fit(log)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PositionBiasEM(n_ranks=0), r"n_ranks.*\b0\b"),
        (lambda: ShuffledPositionBias(n_ranks=2.5), r"n_ranks.*2\.5"),
        (lambda: PositionBiasEM(relevance=["item"]), r"relevance.*\['item'\]"),
    ],
)
def test_arguments_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()
