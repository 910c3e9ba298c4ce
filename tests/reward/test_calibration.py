"""ScoreCalibration on bad and edge-case input: labelled pandas input aligned like the arrays
it labels, refusal of propensities and scores that do not fit, and bounded non-click sampling.

References: the fit on the equivalent unlabelled or float arrays, and the Binomial law of the
non-click subsample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import corrupt_indices, propensity_with_duplicate

from recpack_ope.reward.calibration import ScoreCalibration, _bernoulli_ranks


def simulate_clicks(seed=3, shape=(40, 6)):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=shape)
    clicks = (rng.random(shape) < 1 / (1 + np.exp(-(1.5 * scores - 1)))).astype(float)
    return scores, clicks


def test_corrupt_sparse_propensity_is_refused_before_use():
    with pytest.raises(ValueError, match=r"propensity is a corrupt sparse matrix"):
        ScoreCalibration().fit(*simulate_clicks(shape=(3, 3)), propensity=corrupt_indices())


@pytest.mark.parametrize("length", [2, 4])
def test_propensity_vector_of_the_wrong_length_is_refused(length):
    p = np.full(length, 0.5)
    with pytest.raises(
        ValueError, match=rf"propensity has shape \({length},\) but scores has 3 items"
    ):
        ScoreCalibration().fit(*simulate_clicks(shape=(30, 3)), propensity=p)


@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_duplicate_propensity_entries_are_never_summed(form):
    m = propensity_with_duplicate(form)
    assert m.nnz == 5 and sp.csr_matrix(m)[0, 2] == pytest.approx(0.6)  # scipy would sum
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        ScoreCalibration().fit(*simulate_clicks(shape=(2, 3)), propensity=m)


def test_calibration_aligns_pandas_inputs_like_the_arrays_they_label():
    scores, clicks = simulate_clicks(shape=(40, 6))
    p = np.linspace(0.3, 0.9, 6)
    order = [4, 1, 5, 0, 3, 2]
    reference = ScoreCalibration().fit(scores, clicks, propensity=p)
    labelled = ScoreCalibration().fit(
        pd.DataFrame(scores[:, order], columns=order),
        pd.DataFrame(clicks[::-1], index=np.arange(40)[::-1]),
        propensity=pd.Series(p[order], index=order),
    )
    assert (labelled.slope_, labelled.intercept_) == (reference.slope_, reference.intercept_)


def test_scores_beyond_2_53_are_refused_with_their_position():
    with pytest.raises(ValueError, match=r"scores.*9007199254740993 at \(user 0, item 0\)"):
        ScoreCalibration().fit(np.array([[2**53 + 1, 2**53], [2**53 + 2, 1]]), np.eye(2))


def test_missing_scores_are_refused_with_their_position():
    frame = pd.DataFrame({0: pd.array([0.5, None], dtype="Float64"), 1: [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"scores.*missing.*\(index 1, column 0\)"):
        ScoreCalibration().fit(frame, np.eye(2))


def test_small_integer_duplicate_clicks_are_summed_without_overflow():
    """int8 COO clicks 100 + 100 + 56 on one pair wrap to 0 in int8; summed in float64 the pair
    is a click, so the fit equals the one on the float clicks."""
    scores = np.array([[0.1, 0.9, 0.4], [0.2, 0.4, 0.8], [0.7, 0.3, 0.5]])
    rows, cols = np.array([0, 0, 0, 1, 2]), np.array([0, 0, 0, 2, 1])
    tiny = sp.coo_matrix(
        (np.array([100, 100, 56, 1, 1], dtype=np.int8), (rows, cols)), shape=(3, 3)
    )
    wide = sp.coo_matrix((np.array([256.0, 1.0, 1.0]), (rows[2:], cols[2:])), shape=(3, 3))
    a, b = ScoreCalibration().fit(scores, tiny), ScoreCalibration().fit(scores, wide)
    assert a.n_clicks_ == 3 and (a.slope_, a.intercept_) == (b.slope_, b.intercept_)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_pairs=0), r"max_pairs.*got 0"),
        (dict(max_pairs=1e6), r"max_pairs.*got 1000000\.0"),
        (dict(seed=-1), r"seed.*got -1"),
        (dict(seed=True), r"seed.*got True"),
        (dict(seed="0"), r"seed.*got '0'"),
    ],
)
def test_calibration_parameters_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScoreCalibration(**kwargs).fit(*simulate_clicks())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_non_click_subsample_of_a_huge_matrix_ends(seed):
    """Near n = 2**63 the running position used to wrap below 0 and the sampling loop never
    ended. Each of the n positions is kept with probability q, so the sample size is
    Binomial(n, q) ≈ Poisson(nq = 92.2): within ±6σ, increasing, inside [0, n)."""
    n, rate = 2**63 - 1, 1e-17
    ranks = _bernoulli_ranks(n, rate, seed)
    mean = n * rate
    assert abs(ranks.size - mean) < 6 * np.sqrt(mean)
    assert ranks[0] >= 0 and ranks[-1] < n and np.all(np.diff(ranks) > 0)


def test_calibrated_reward_model_reads_the_scores_through_the_fitted_calibration():
    from scipy.special import expit

    from recpack_ope.reward.calibration import calibrated_reward_model

    rng = np.random.default_rng(5)
    scores = rng.normal(size=(30, 8))
    clicks = rng.random((30, 8)) < expit(1.5 * scores - 1.0)
    p = np.linspace(0.2, 1.0, 8)
    rho = calibrated_reward_model(scores, clicks, p)
    fitted = ScoreCalibration().fit(scores, clicks, propensity=p)
    users, items = np.array([0, 4, 29]), np.array([7, 0, 3])
    expected = expit(fitted.slope_ * scores[users, items] + fitted.intercept_)
    np.testing.assert_allclose(rho.predict(users, items), expected, rtol=1e-12)
