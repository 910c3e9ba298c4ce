"""Standard, cascade and independent IPS of whole rankings against hand calculations."""

import math
import warnings

import numpy as np
import pytest

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.logged.feed_log import FeedLog
from recpack_ope.logged.policies import DeterministicRanker, PlackettLuceRanker
from recpack_ope.logged.ranking_ips import (
    cascade_ips,
    independent_ips,
    ranking_probabilities,
    ranking_weights,
    standard_ips,
)
from recpack_ope.propensity.discount import LogDiscount

# Tiny logs carry few weights: the reliability warnings are expected and not what is tested.
pytestmark = pytest.mark.filterwarnings(
    "ignore::recpack_ope.inference.diagnostics.ReliabilityWarning"
)

ESTIMATORS = (standard_ips, cascade_ips, independent_ips)

# Target Plackett–Luce weights 4, 2, 1 over items 0, 1, 2 (total 7); logging uniform over the
# three, so π0 = 1/3 at rank 1 and 1/2 at rank 2 given rank 1 (prefix 1/3, 1/6), and every
# item's marginal at every rank is 1/3.
TARGET = PlackettLuceRanker(np.log([4.0, 2.0, 1.0]))
UNIFORM = PlackettLuceRanker.uniform(3)
# Session 0 shows (0, 1) with rewards (1, 1); session 1 shows (2, 0) with rewards (0, 1).
# Target probabilities by hand:
#   session 0: prefix 4/7, 4/7·2/3 = 8/21; marginals P(0 at 1) = 4/7,
#              P(1 at 2) = 4/7·2/3 + 1/7·2/6 = 3/7
#   session 1: prefix 1/7, 1/7·4/6 = 2/21; marginals P(2 at 1) = 1/7,
#              P(0 at 2) = 2/7·4/5 + 1/7·4/6 = 34/105
PREFIX = [4 / 7, 8 / 21, 1 / 7, 2 / 21]
MARGINAL = [4 / 7, 3 / 7, 1 / 7, 34 / 105]
REWARD = [1.0, 1.0, 0.0, 1.0]
# Per-session terms Σ_k r_k π/π0:
#   standard:    2 · (8/21) · 6 = 32/7   and 1 · (2/21) · 6 = 4/7
#   cascade:     (4/7)·3 + (8/21)·6 = 4  and (2/21)·6 = 4/7
#   independent: (4/7)·3 + (3/7)·3 = 3   and (34/105)·3 = 34/35
TERMS = {
    standard_ips: [32 / 7, 4 / 7],
    cascade_ips: [4.0, 4 / 7],
    independent_ips: [3.0, 34 / 35],
}


def _log(**columns) -> FeedLog:
    return FeedLog.from_arrays(
        [0, 0, 1, 1], [0, 1, 2, 0], [1, 2, 1, 2], REWARD, n_items=3, **columns
    )


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_value_and_terms_match_the_hand_calculation(estimator):
    result = estimator(_log(), TARGET, logging=UNIFORM)
    np.testing.assert_allclose(result.terms[:, 0], TERMS[estimator], rtol=1e-12)
    assert result.value == pytest.approx(np.mean(TERMS[estimator]), rel=1e-12)
    # The standard error is that of a mean of two per-session terms.
    assert result.standard_error == pytest.approx(
        np.std(TERMS[estimator], ddof=1) / math.sqrt(2), rel=1e-12
    )


def test_the_target_probabilities_are_the_hand_ones():
    log = _log()
    np.testing.assert_allclose(ranking_probabilities(TARGET, log, "prefix", "target"), PREFIX)
    np.testing.assert_allclose(ranking_probabilities(TARGET, log, "position", "target"), MARGINAL)
    whole = ranking_probabilities(TARGET, log, "ranking", "target")
    np.testing.assert_allclose(whole, [8 / 21, 8 / 21, 2 / 21, 2 / 21])


def test_mixed_kinds_take_each_row_from_its_own_kind():
    log = _log()
    pi, pi0 = ranking_weights(log, TARGET, UNIFORM, np.array([0, 1, 2, 2]))
    np.testing.assert_allclose(pi, [4 / 7, 8 / 21, 2 / 21, 2 / 21])
    np.testing.assert_allclose(pi0, [1 / 3, 1 / 6, 1 / 6, 1 / 6])


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_discount_weights_every_rank(estimator):
    alpha = [1.0, 1 / math.log2(3)] * 2
    plain = estimator(_log(), TARGET, logging=UNIFORM)
    # Rewarding each row α_k instead of 1 with α the log discount: rescale per row by hand.
    scaled = estimator(
        FeedLog.from_arrays(
            [0, 0, 1, 1], [0, 1, 2, 0], [1, 2, 1, 2], np.multiply(REWARD, alpha), n_items=3
        ),
        TARGET,
        logging=UNIFORM,
    )
    discounted = estimator(_log(), TARGET, logging=UNIFORM, discount=LogDiscount())
    assert discounted.value == pytest.approx(scaled.value, rel=1e-12)
    assert discounted.value < plain.value


def test_clipping_caps_the_inverse_logging_probability():
    # m = 2 < 6: both sessions' whole-ranking weights become π · 2.
    result = standard_ips(_log(), TARGET, logging=UNIFORM, clip=2.0)
    assert result.value == pytest.approx((2 * (8 / 21) * 2 + (2 / 21) * 2) / 2, rel=1e-12)
    assert result.diagnostics.n_clipped == 2


def test_logging_from_the_columns_equals_the_policy():
    # Uniform Plackett–Luce weights normalised over the three candidates, and the prefix and
    # position propensities written by hand: the same values as the policy gives.
    for estimator, column in (
        (standard_ips, {"logging_weight": [1 / 3] * 4}),
        (cascade_ips, {"prefix_propensity": [1 / 3, 1 / 6, 1 / 3, 1 / 6]}),
        (independent_ips, {"position_propensity": [1 / 3] * 4}),
    ):
        result = estimator(_log(**column), TARGET)
        assert result.value == pytest.approx(np.mean(TERMS[estimator]), rel=1e-12)


@pytest.mark.parametrize(
    ("estimator", "ess", "n"),
    [
        # Weights of the evaluated units: one per session (6, 6); rows (3, 6, 6); rows (3, 3, 3).
        (standard_ips, 2.0, 2),
        (cascade_ips, 15**2 / (9 + 36 + 36), 3),
        (independent_ips, 3.0, 3),
    ],
)
def test_diagnostics_count_the_weights_by_hand(estimator, ess, n):
    d = estimator(_log(), TARGET, logging=UNIFORM).diagnostics
    assert d.n_weights == n
    assert d.ess == pytest.approx(ess, rel=1e-12)
    assert d.max_weight == pytest.approx(6.0 if estimator is not independent_ips else 3.0)


def test_a_small_effective_sample_warns():
    with pytest.warns(ReliabilityWarning, match="standard IPS"):
        standard_ips(_log(), TARGET, logging=UNIFORM)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("clip", [None, 4.0])
def test_sensitivity_bounds_move_every_weight_to_its_extreme(estimator, clip):
    # Rewards are non-negative, so the value rises with every inverse propensity: the
    # extremes put every 1/π0 at its bound 1/(Γ·π0) or Γ/π0, clipped at m.
    gamma = 1.5
    log = _log()
    kind = {standard_ips: "ranking", cascade_ips: "prefix", independent_ips: "position"}
    pi0 = ranking_probabilities(UNIFORM, log, kind[estimator], "logging")
    pi = ranking_probabilities(TARGET, log, kind[estimator], "target")
    m = math.inf if clip is None else clip

    def value(factor):
        per_row = pi * np.minimum(m, factor / pi0) * np.array(REWARD)
        return np.bincount(log.session, per_row).mean()

    bounds = estimator(log, TARGET, logging=UNIFORM, clip=clip).sensitivity(gamma)
    assert bounds.low == pytest.approx(value(1 / gamma), rel=1e-12)
    assert bounds.high == pytest.approx(value(gamma), rel=1e-12)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_auto_clipping_is_one_of_the_candidates(estimator):
    result = estimator(_log(), TARGET, logging=UNIFORM, clip="auto")
    again = estimator(_log(), TARGET, logging=UNIFORM, clip=result.clip_selection.clip)
    assert result.value == pytest.approx(again.value, rel=1e-12)


def test_bad_input_is_refused_with_the_argument_named():
    log = _log()
    with pytest.raises(TypeError, match="log must be a FeedLog"):
        standard_ips("log", TARGET, logging=UNIFORM)
    with pytest.raises(TypeError, match="target must be a policy"):
        standard_ips(log, object(), logging=UNIFORM)
    with pytest.raises(TypeError, match="discount must be a Discount"):
        cascade_ips(log, TARGET, logging=UNIFORM, discount=2)
    with pytest.raises(ValueError, match="clip"):
        standard_ips(log, TARGET, logging=UNIFORM, clip=-1.0)
    with pytest.raises(ValueError, match="neither a prefix_propensity nor a logging_weight"):
        standard_ips(log, TARGET)
    with pytest.raises(ValueError, match="no position_propensity column"):
        independent_ips(log, TARGET)
    gap = FeedLog.from_arrays([0, 0], [0, 1], [1, 3], [1.0, 0.0], n_items=3)
    with pytest.raises(ValueError, match="missing rank 2"):
        cascade_ips(gap, TARGET, logging=UNIFORM)
    # A deterministic logging policy never showed item 1 first, as session 1 claims.
    shown = FeedLog.from_arrays([0, 1], [0, 1], [1, 1], [1.0, 1.0], n_items=3)
    always_first = DeterministicRanker(np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]))
    with pytest.raises(ValueError, match="session 1 is 0.0, outside \\(0, 1\\]"):
        standard_ips(shown, TARGET, logging=always_first)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_errors_spell_the_estimator_as_its_function(estimator):
    gap = FeedLog.from_arrays([0, 0], [0, 1], [1, 3], [1.0, 0.0], n_items=3)
    if estimator is independent_ips:  # weights items at their ranks: needs no whole ranking
        return
    with pytest.raises(ValueError, match=rf"^{estimator.__name__} needs whole rankings"):
        estimator(gap, TARGET, logging=UNIFORM)


@pytest.mark.parametrize(
    "short",
    [
        DeterministicRanker(np.array([[1.0, -np.inf, -np.inf], [1.0, -np.inf, -np.inf]])),
        PlackettLuceRanker(np.array([[0.0, -np.inf, -np.inf], [0.0, 0.0, 0.0]])),
    ],
)
def test_standard_ips_refuses_a_target_that_ranks_fewer_items_than_a_session_shows(short):
    # The target ranks one item in session 0's context, which shows two: every logged whole
    # ranking there has probability 0 under it, so standard IPS would count its rewards as 0.
    with pytest.raises(ValueError, match="ranks 1 item\\(s\\) in the context of session 0"):
        standard_ips(_log(), short, logging=UNIFORM)
    # Cascade IPS weights only the ranks the target fills: session 0's item 0 at rank 1 is
    # the target's one item (prefix probability 1, π0 = 1/3, reward 1): term 3.
    terms = cascade_ips(_log(), short, logging=UNIFORM).terms.ravel()
    assert terms[0] == pytest.approx(3.0, rel=1e-12)


def test_a_target_of_the_wrong_shape_names_the_log_codes():
    with pytest.raises(ValueError, match=r"target scores have shape \(2, 4\), the log needs"):
        standard_ips(_log(), DeterministicRanker(np.zeros((2, 4))), logging=UNIFORM)


def test_a_logging_policy_that_disagrees_with_the_log_column_warns():
    # The column says uniform (1/3 at rank 1); logging= says Plackett–Luce 4, 2, 1.
    log = _log(logging_weight=[1 / 3] * 4)
    with pytest.warns(UserWarning, match="logging= gives the whole ranking of session 0"):
        standard_ips(log, TARGET, logging=TARGET)
    # Agreement (the uniform policy and its own column) stays silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ReliabilityWarning)
        assert standard_ips(log, TARGET, logging=UNIFORM).value == pytest.approx(
            np.mean(TERMS[standard_ips]), rel=1e-12
        )


def test_the_repr_counts_sessions_not_users():
    text = repr(standard_ips(_log(), TARGET, logging=UNIFORM))
    assert "over 2 sessions" in text
    assert "of 2 sessions carry" in text
    assert "users" not in text
