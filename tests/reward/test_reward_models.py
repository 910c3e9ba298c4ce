"""Reward models and score calibration against scikit-learn, Fisher-information standard errors,
Monte Carlo recovery, brute-force likelihood grids and dense fancy-indexing references."""

from __future__ import annotations

import inspect
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import corrupt_indptr
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from recpack_ope._validation import NonNumericError
from recpack_ope.reward import calibration as calibration_module
from recpack_ope.reward.calibration import ScoreCalibration, _bernoulli_ranks, _nonclick_keys
from recpack_ope.reward.models import CalibratedScores, RewardMatrix, RewardModel


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def unpenalised_logistic_regression() -> LogisticRegression:
    """scikit-learn's logistic regression without penalty, whatever its version spells it:
    ``C=np.inf`` from 1.8 (``penalty`` deprecated), ``penalty=None`` from 1.2, ``"none"``
    before."""
    kwargs = {"tol": 1e-12, "max_iter": 10_000}
    default = inspect.signature(LogisticRegression).parameters["penalty"].default
    if default == "deprecated":
        return LogisticRegression(C=np.inf, solver="newton-cholesky", **kwargs)
    try:
        model = LogisticRegression(penalty=None, solver="newton-cholesky", **kwargs)
        model.fit(np.array([[0.0], [1.0]]), np.array([0, 1]))
        return LogisticRegression(penalty=None, solver="newton-cholesky", **kwargs)
    except (ValueError, TypeError):
        return LogisticRegression(penalty="none", solver="lbfgs", **kwargs)


def simulate(n_users, n_items, a, b, seed, propensity=None):
    """Scores ~ N(0, 1) and clicks ~ Bernoulli(p · σ(a·s + b))."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_users, n_items))
    p = 1.0 if propensity is None else propensity
    clicks = rng.random((n_users, n_items)) < p * sigmoid(a * scores + b)
    return scores, clicks


def nll(a, b, s, y, p=None):
    """The examination-hypothesis negative log-likelihood, written out directly."""
    p = np.ones_like(s) if p is None else p
    q = p * sigmoid(a * s + b)
    return -np.sum(np.where(y, np.log(q), np.log1p(-q)))


def expected_information(a, b, s, p=None):
    """Fisher information of (a, b) for clicks ~ Bernoulli(π), π = p σ(a s + b):
    Σ x xᵀ (∂π/∂z)² / (π (1 − π)) with x = (s, 1), ∂π/∂z = p σ (1 − σ)."""
    p = np.ones_like(s) if p is None else p
    sig = sigmoid(a * s + b)
    pi = p * sig
    weight = (p * sig * (1 - sig)) ** 2 / (pi * (1 - pi))
    x = np.stack([s, np.ones_like(s)])
    return (x * weight) @ x.T


def sampling_covariance(a, b, s, y, q, p=None):
    """Extra covariance of (a, b) from keeping each non-click with probability q and weight 1/q:
    the weighted score changes by Σ_nonclicks (δ_k/q − 1) g_k with Var(δ_k/q) = (1 − q)/q, so
    Cov ≈ I⁻¹ [(1 − q)/q Σ g gᵀ] I⁻¹, g_k the non-click's gradient of −log(1 − p σ(z))."""
    p = np.ones_like(s) if p is None else p
    sig = sigmoid(a * s + b)
    g_z = p * sig * (1 - sig) / (1 - p * sig)
    x = np.stack([s, np.ones_like(s)])[:, ~y] * g_z[~y]
    extra = (1 - q) / q * (x @ x.T)
    # observed information of the full data (the Hessian of the NLL)
    info = observed_information(a, b, s, y, p)
    inv = np.linalg.inv(info)
    return inv @ extra @ inv


def observed_information(a, b, s, y, p):
    """Hessian of the NLL by central differences of its (numpy) gradient."""

    def grad(theta):
        sig = sigmoid(theta[0] * s + theta[1])
        g_z = np.where(y, -(1 - sig), p * sig * (1 - sig) / (1 - p * sig))
        return np.array([np.sum(g_z * s), np.sum(g_z)])

    h = 1e-5
    cols = [
        (grad(np.array([a, b]) + h * e) - grad(np.array([a, b]) - h * e)) / (2 * h)
        for e in np.eye(2)
    ]
    return np.array(cols).T


# --------------------------------------------------------------------------- against sklearn


@pytest.mark.parametrize("form", ["dense", "sparse", "bool", "counts", "float32"])
def test_matches_unpenalised_logistic_regression(form):
    """Without propensities and subsampling the fit is one-feature logistic regression on the
    flattened (score, click) pairs; sparse scores miss entries that are score 0."""
    rng = np.random.default_rng(3)
    scores, clicks = simulate(150, 120, 1.3, -2.0, seed=3)
    if form == "sparse":
        scores[rng.random(scores.shape) < 0.6] = 0.0
        clicks = clicks & (rng.random(clicks.shape) < 0.9)
    reference_scores, reference_clicks = scores, clicks
    if form == "sparse":
        scores, clicks = sp.csr_matrix(scores), sp.coo_matrix(clicks.astype(np.float64))
    elif form == "counts":  # a click's size is ignored: any entry > 0 is one click
        clicks = clicks * rng.integers(1, 5, size=clicks.shape)
    elif form == "float32":
        scores = scores.astype(np.float32)
        reference_scores = scores.astype(np.float64)
    elif form == "dense":
        clicks = clicks.astype(np.float64)

    cal = ScoreCalibration().fit(scores, clicks)
    lr = unpenalised_logistic_regression().fit(
        reference_scores.reshape(-1, 1), reference_clicks.ravel()
    )
    assert cal.converged_
    assert cal.slope_ == pytest.approx(lr.coef_[0, 0], abs=1e-5, rel=1e-5)
    assert cal.intercept_ == pytest.approx(lr.intercept_[0], abs=1e-5, rel=1e-5)
    assert cal.n_pairs_ == 150 * 120
    assert cal.n_clicks_ == int(reference_clicks.sum())
    assert cal.sample_rate_ == 1.0


def test_predict_proba_and_reward_model_apply_the_fitted_sigmoid():
    scores, clicks = simulate(60, 50, 1.0, -1.0, seed=5)
    cal = ScoreCalibration().fit(scores, clicks)
    values = np.array([[-3.0, 0.0], [0.5, 7.0]])
    expected = sigmoid(cal.slope_ * values + cal.intercept_)
    np.testing.assert_allclose(cal.predict_proba(values), expected, rtol=1e-14)
    assert cal.predict_proba(2.0) == pytest.approx(sigmoid(2 * cal.slope_ + cal.intercept_))
    model = cal.reward_model(scores)
    assert isinstance(model, CalibratedScores) and isinstance(model, RewardModel)
    assert model.shape == (60, 50)
    u, i = np.array([0, 59, 3]), np.array([49, 0, 3])
    np.testing.assert_allclose(model.predict(u, i), cal.predict_proba(scores[u, i]), rtol=1e-14)


def test_sklearn_estimator_conventions():
    cal = ScoreCalibration(max_pairs=1000, seed=4)
    assert cal.get_params() == {"max_pairs": 1000, "seed": 4}
    twin = clone(cal)
    assert twin.get_params() == cal.get_params() and not hasattr(twin, "slope_")
    assert repr(cal) == "ScoreCalibration(max_pairs=1000, seed=4)"


# --------------------------------------------------------------------------- subsampling


def test_subsampled_fit_is_close_to_the_full_fit_and_seeded():
    """200k pairs, max_pairs = 40k: the ~16k clicks are all kept and about 24k of the ~184k
    non-clicks (q = (40k − n_clicks) / n0), weighted 1/q. The difference from the full fit has
    the covariance I⁻¹ V I⁻¹ (sampling_covariance); every seed must land within 4 of its
    standard deviations, the 20 seeds' mean difference within 4 standard errors of 0 (the 1/q
    weights make the sampled log-likelihood unbiased), and their spread must match the
    predicted standard deviation (the sd of 20 draws is uncertain by ~16 %, so 0.55–1.5 is
    > 2.8σ)."""
    a, b = 1.2, -3.0
    scores, clicks = simulate(400, 500, a, b, seed=8)
    full = ScoreCalibration().fit(scores, clicks)
    s, y = scores.ravel(), clicks.ravel()
    n_clicks = int(y.sum())
    assert n_clicks < 20_000  # fewer than half the budget: the rest goes to non-clicks
    q = (40_000 - n_clicks) / (y.size - n_clicks)
    sd = np.sqrt(np.diag(sampling_covariance(full.slope_, full.intercept_, s, y, q)))

    fits = [ScoreCalibration(max_pairs=40_000, seed=seed).fit(scores, clicks) for seed in range(20)]
    assert all(f.sample_rate_ == pytest.approx(q, rel=1e-12) for f in fits)
    assert all(f.n_clicks_ == n_clicks for f in fits)
    # the number of kept non-clicks is Binomial(n0, q)
    kept = np.array([f.n_pairs_ - n_clicks for f in fits])
    assert np.all(
        np.abs(kept - q * (y.size - n_clicks)) < 5 * np.sqrt(q * (1 - q) * (y.size - n_clicks))
    )
    delta = np.array([[f.slope_ - full.slope_, f.intercept_ - full.intercept_] for f in fits])
    assert np.all(np.abs(delta) < 4 * sd)
    assert np.all(np.abs(delta.mean(axis=0)) < 4 * sd / np.sqrt(20))
    assert np.all((0.55 < delta.std(axis=0, ddof=1) / sd) & (delta.std(axis=0, ddof=1) / sd < 1.5))

    again = ScoreCalibration(max_pairs=40_000, seed=0).fit(scores, clicks)
    assert (again.slope_, again.intercept_, again.n_pairs_) == (
        fits[0].slope_,
        fits[0].intercept_,
        fits[0].n_pairs_,
    )
    assert fits[0].slope_ != fits[1].slope_


def test_bernoulli_ranks_and_nonclick_keys():
    """The sample is sorted, distinct, inside [0, n), of Binomial(n, q) size and uniform;
    ranks map onto exactly the non-clicked linear indices."""
    n, q = 10_000_000, 0.003
    ranks = _bernoulli_ranks(n, q, seed=1)
    assert np.all(np.diff(ranks) > 0) and ranks[0] >= 0 and ranks[-1] < n
    assert abs(ranks.size - n * q) < 5 * np.sqrt(n * q * (1 - q))
    # uniform positions: mean n/2 with sd n/√(12 m)
    assert abs(ranks.mean() - n / 2) < 5 * n / np.sqrt(12 * ranks.size)
    np.testing.assert_array_equal(_bernoulli_ranks(50, 1.0, seed=0), np.arange(50))

    rng = np.random.default_rng(2)
    total = 1000
    clicks = np.sort(rng.choice(total, size=137, replace=False))
    nonclicks = np.setdiff1d(np.arange(total), clicks)
    np.testing.assert_array_equal(_nonclick_keys(np.arange(nonclicks.size), clicks), nonclicks)
    np.testing.assert_array_equal(
        _nonclick_keys(np.array([0, 5]), np.array([], dtype=np.int64)), [0, 5]
    )


def test_huge_sparse_problem_samples_indices_without_dense_masks():
    """10^10 pairs (a dense boolean mask alone would take 10 GB) from sparse scores and clicks:
    the sample is drawn as indices, so this runs in well under a second of work."""
    rng = np.random.default_rng(4)
    n = 100_000
    stored = rng.integers(0, n, size=(2, 300_000))
    scores = sp.csr_matrix((rng.normal(size=300_000), (stored[0], stored[1])), shape=(n, n))
    scores.sum_duplicates()
    clicked = rng.integers(0, n, size=(2, 20_000))
    # clicks more likely where the score is high
    s_at = np.asarray(scores[clicked[0], clicked[1]]).ravel()
    keep = rng.random(20_000) < sigmoid(2 * s_at - 1)
    clicks = sp.coo_matrix(
        (np.ones(keep.sum()), (clicked[0][keep], clicked[1][keep])), shape=(n, n)
    )
    cal = ScoreCalibration(max_pairs=200_000, seed=1).fit(scores, clicks)
    n_clicks = sp.csr_matrix(clicks).nnz
    assert cal.n_clicks_ == n_clicks
    q = (200_000 - n_clicks) / (n * n - n_clicks)
    assert cal.sample_rate_ == pytest.approx(q, rel=1e-12)
    assert abs(cal.n_pairs_ - 200_000) < 5 * np.sqrt(200_000)
    assert cal.converged_ and cal.slope_ > 0 and np.isfinite(cal.intercept_)


# --------------------------------------------------------------------------- propensities

A, B = 1.5, -1.0


@pytest.fixture(scope="module")
def examined_clicks():
    """200k pairs with clicks ~ Bernoulli(p · σ(1.5 s − 1)), p ~ U(0.05, 1) per pair."""
    rng = np.random.default_rng(21)
    p = rng.uniform(0.05, 1.0, size=(400, 500))
    scores, clicks = simulate(400, 500, A, B, seed=22, propensity=p)
    se = np.sqrt(np.diag(np.linalg.inv(expected_information(A, B, scores.ravel(), p.ravel()))))
    return scores, clicks, p, se


def test_propensities_recover_relevance_parameters(examined_clicks):
    """The fit recovers (a, b) within 4 standard errors of the expected Fisher information of
    the same likelihood (computed above by its own formula); the Hessian of the numpy
    likelihood at the fit agrees with that information; and a fit that ignores the
    propensities estimates the logged click rate p·σ, its intercept many standard errors
    low (log E[p] ≈ −0.64 off)."""
    scores, clicks, p, se = examined_clicks
    cal = ScoreCalibration().fit(scores, clicks, propensity=p)
    assert cal.converged_ and cal.n_pairs_ == 200_000
    assert abs(cal.slope_ - A) < 4 * se[0]
    assert abs(cal.intercept_ - B) < 4 * se[1]
    observed = observed_information(
        cal.slope_, cal.intercept_, scores.ravel(), clicks.ravel(), p.ravel()
    )
    np.testing.assert_allclose(np.sqrt(np.diag(np.linalg.inv(observed))), se, rtol=0.1)

    naive = ScoreCalibration().fit(scores, clicks)
    assert abs(naive.intercept_ - B) > 20 * se[1]
    assert naive.intercept_ < B - 0.3
    # and its relevance estimates are far too low on average
    relevance = sigmoid(A * scores + B).mean()
    assert naive.predict_proba(scores).mean() < 0.75 * relevance
    assert cal.predict_proba(scores).mean() == pytest.approx(relevance, rel=0.03)


def test_propensity_forms_give_the_same_fit():
    """A per-item vector, a fitted model's propensity_, the dense users×items matrix it
    implies and a sparse matrix storing every pair are one and the same likelihood."""
    rng = np.random.default_rng(31)
    item_p = rng.uniform(0.05, 1.0, size=80)
    scores, clicks = simulate(120, 80, A, B, seed=32, propensity=item_p)
    fits = [
        ScoreCalibration().fit(scores, clicks, propensity=form)
        for form in (
            item_p,
            SimpleNamespace(propensity_=item_p),
            np.tile(item_p, (120, 1)),
            sp.csr_matrix(np.tile(item_p, (120, 1))),
        )
    ]
    for fit in fits[1:]:
        assert fit.slope_ == pytest.approx(fits[0].slope_, rel=1e-9)
        assert fit.intercept_ == pytest.approx(fits[0].intercept_, rel=1e-9)


def test_propensities_with_subsampling_recover_parameters(examined_clicks):
    """Subsampled to 100k of the 200k pairs (all ~35k clicks, ~65k of ~165k non-clicks), the
    fit's error has the covariance of the full fit plus that of the sampling; it must lie
    within 4 of that total standard error."""
    scores, clicks, p, se = examined_clicks
    s, y, pp = scores.ravel(), clicks.ravel(), p.ravel()
    cal = ScoreCalibration(max_pairs=100_000, seed=3).fit(scores, clicks, propensity=p)
    n_clicks = int(y.sum())
    assert n_clicks < 50_000
    q = (100_000 - n_clicks) / (y.size - n_clicks)
    assert cal.sample_rate_ == pytest.approx(q)
    total = np.sqrt(se**2 + np.diag(sampling_covariance(A, B, s, y, q, pp)))
    assert abs(cal.slope_ - A) < 4 * total[0]
    assert abs(cal.intercept_ - B) < 4 * total[1]


@pytest.mark.parametrize("with_propensity", [False, True])
def test_solution_minimises_the_likelihood_on_a_grid(with_propensity):
    """Brute force: the numpy NLL at the fit is no larger than at any point of grids of
    half-widths 1e-3, 1e-2 and 0.1 around it."""
    rng = np.random.default_rng(41)
    p = rng.uniform(0.1, 1.0, size=(100, 80)) if with_propensity else None
    scores, clicks = simulate(100, 80, 0.8, -0.5, seed=42, propensity=p)
    cal = ScoreCalibration().fit(scores, clicks, propensity=p)
    s, y = scores.ravel(), clicks.ravel()
    pp = None if p is None else p.ravel()
    best = nll(cal.slope_, cal.intercept_, s, y, pp)
    for h in (1e-3, 1e-2, 0.1):
        for da in np.linspace(-h, h, 5):
            for db in np.linspace(-h, h, 5):
                assert best <= nll(cal.slope_ + da, cal.intercept_ + db, s, y, pp) + 1e-9 * best


def test_warns_when_the_optimiser_does_not_converge(monkeypatch):
    def stalled(fun, x0, **kwargs):
        return SimpleNamespace(
            x=np.asarray(x0, dtype=float),
            success=False,
            nit=1000,
            message="STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT",
        )

    monkeypatch.setattr(calibration_module, "minimize", stalled)
    scores, clicks = simulate(50, 40, 1.0, -1.0, seed=6)
    with pytest.warns(ConvergenceWarning, match="did not converge.*ITERATIONS"):
        cal = ScoreCalibration().fit(scores, clicks)
    assert cal.converged_ is False


# --------------------------------------------------------------------------- reward models


def random_pairs(shape, n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, shape[0], size=n), rng.integers(0, shape[1], size=n)


@pytest.mark.parametrize("form", ["dense", "csr", "coo_with_duplicates", "csc", "list"])
def test_reward_matrix_predicts_like_dense_indexing(form):
    rng = np.random.default_rng(51)
    dense = rng.random((70, 90)) * (rng.random((70, 90)) < 0.3)
    if form == "dense":
        given = dense
    elif form == "list":
        given = dense.tolist()
    elif form == "csr":
        given = sp.csr_matrix(dense)
        given.data[0] = 0.0  # an explicit zero
        dense = given.toarray()
    elif form == "csc":
        given = sp.csc_matrix(dense)
    else:  # each stored value split into two halves: scipy sums duplicates
        rows, cols = np.nonzero(dense)
        half = dense[rows, cols] / 2
        given = sp.coo_matrix(
            (
                np.concatenate([half, half]),
                (np.concatenate([rows, rows]), np.concatenate([cols, cols])),
            ),
            shape=dense.shape,
        )
    model = RewardMatrix(given)
    assert isinstance(model, RewardModel) and model.shape == (70, 90)
    users, items = random_pairs(dense.shape, 20_000, seed=52)
    predicted = model.predict(users, items)
    assert predicted.dtype == np.float64
    np.testing.assert_allclose(predicted, dense[users, items], rtol=1e-15, atol=0)
    for dtype in (np.int32, np.uint16):
        np.testing.assert_array_equal(
            model.predict(users.astype(dtype), items.astype(dtype)), predicted
        )
    assert model.predict(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).shape == (0,)
    assert model.predict([], []).shape == (0,)


def test_reward_matrix_is_a_copy():
    dense = np.array([[0.2, 0.4]])
    model = RewardMatrix(dense)
    dense[0, 0] = 5.0
    assert model.predict(np.array([0]), np.array([0]))[0] == 0.2


def test_reward_matrix_of_an_empty_sparse_matrix_predicts_zero():
    model = RewardMatrix(sp.csr_matrix((3, 4)))
    np.testing.assert_array_equal(model.predict(np.array([0, 2]), np.array([3, 1])), [0.0, 0.0])


@pytest.mark.parametrize("form", ["dense", "csr", "coo"])
def test_calibrated_scores_predict_like_dense_indexing(form):
    rng = np.random.default_rng(61)
    dense = rng.normal(size=(80, 60)) * (rng.random((80, 60)) < 0.4)
    given = {"dense": dense, "csr": sp.csr_matrix(dense), "coo": sp.coo_matrix(dense)}[form]
    cal = SimpleNamespace(slope_=1.7, intercept_=-0.4)
    model = CalibratedScores(given, cal)
    assert model.shape == (80, 60)
    users, items = random_pairs(dense.shape, 20_000, seed=62)
    expected = 1 / (1 + np.exp(-(1.7 * dense[users, items] - 0.4)))
    np.testing.assert_allclose(model.predict(users, items), expected, rtol=1e-13)
    # missing sparse entries are score 0
    if form != "dense":
        zero = np.argwhere(dense == 0)[0]
        assert model.predict(zero[:1], zero[1:]) == pytest.approx(sigmoid(-0.4))


def test_calibrated_scores_check_only_the_looked_up_scores():
    scores = np.array([[0.0, np.nan], [1.0, np.inf]])
    model = CalibratedScores(scores, SimpleNamespace(slope_=1.0, intercept_=0.0))
    assert model.predict(np.array([0, 1]), np.array([0, 0])) == pytest.approx([0.5, sigmoid(1.0)])
    with pytest.raises(ValueError, match=r"scores has value nan at \(user 0, item 1\)"):
        model.predict(np.array([1, 0]), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"scores has value inf at \(user 1, item 1\)"):
        model.predict(np.array([1]), np.array([1]))


# --------------------------------------------------------------------------- bad inputs

GOOD_SCORES, GOOD_CLICKS = simulate(6, 5, 1.0, 0.0, seed=71)
GOOD_CLICKS[0, :2] = [True, False]  # at least one click and one non-click, not separated


def fit(scores=None, clicks=None, propensity=None, **params):
    scores = GOOD_SCORES if scores is None else scores
    clicks = GOOD_CLICKS if clicks is None else clicks
    return ScoreCalibration(**params).fit(scores, clicks, propensity=propensity)


def with_value(matrix, position, value):
    out = np.array(matrix, dtype=np.float64)
    out[position] = value
    return out


class Unfitted:
    def fit(self, X):
        return self


BAD = {
    # reward matrix
    "probability above 1": (
        lambda: RewardMatrix(with_value(np.full((3, 4), 0.5), (1, 2), 1.5)),
        r"probabilities has value 1\.5 at \(user 1, item 2\).*\[0, 1\]",
    ),
    "negative probability": (
        lambda: RewardMatrix(with_value(np.full((3, 4), 0.5), (2, 0), -0.1)),
        r"probabilities has value -0\.1 at \(user 2, item 0\)",
    ),
    "nan probability": (
        lambda: RewardMatrix(with_value(np.full((3, 4), 0.5), (0, 3), np.nan)),
        r"probabilities has value nan at \(user 0, item 3\)",
    ),
    "sparse probability above 1": (
        lambda: RewardMatrix(sp.csr_matrix(with_value(np.zeros((3, 4)), (2, 3), 2.0))),
        r"probabilities has value 2\.0 at \(user 2, item 3\)",
    ),
    "complex probabilities": (
        lambda: RewardMatrix(np.full((2, 2), 0.5 + 0j)),
        r"probabilities has complex dtype complex128 \(value \(0\.5\+0j\) at \(user 0, item 0\)\)",
    ),
    "sparse complex probabilities": (
        lambda: RewardMatrix(sp.csr_matrix(np.full((2, 2), 0.5 + 0j))),
        r"probabilities has complex dtype complex128",
    ),
    "1-D probabilities": (
        lambda: RewardMatrix(np.full(4, 0.5)),
        r"probabilities.*got shape \(4,\)",
    ),
    "user out of range": (
        lambda: RewardMatrix(np.full((3, 4), 0.5)).predict(
            np.array([0, 1, 3]), np.array([0, 0, 0])
        ),
        r"users\[2\] = 3 lies outside \[0, 3\) \(n_users = 3\)",
    ),
    "negative item": (
        lambda: RewardMatrix(sp.csr_matrix((3, 4))).predict(np.array([0]), np.array([-1])),
        r"items\[0\] = -1 lies outside \[0, 4\) \(n_items = 4\)",
    ),
    "float indices": (
        lambda: RewardMatrix(np.full((3, 4), 0.5)).predict(np.array([0.0]), np.array([0])),
        r"users.*got dtype float64",
    ),
    "2-D indices": (
        lambda: RewardMatrix(np.full((3, 4), 0.5)).predict(np.zeros((1, 1), int), np.array([0])),
        r"users.*got shape \(1, 1\)",
    ),
    "unpaired indices": (
        lambda: RewardMatrix(np.full((3, 4), 0.5)).predict(np.array([0, 1]), np.array([0])),
        r"users and items must be paired arrays of equal length, got 2 users and 1 items",
    ),
    # calibrated scores
    "unfitted calibration": (
        lambda: CalibratedScores(GOOD_SCORES, ScoreCalibration()),
        r"calibration ScoreCalibration is not fitted.*call fit",
    ),
    "complex scores for a reward model": (
        lambda: CalibratedScores(GOOD_SCORES + 0j, SimpleNamespace(slope_=1.0, intercept_=0.0)),
        r"scores has complex dtype complex128",
    ),
    "non-finite calibration": (
        lambda: CalibratedScores(GOOD_SCORES, SimpleNamespace(slope_=np.nan, intercept_=0.0)),
        r"calibration has slope_ nan",
    ),
    # calibration: parameters
    "max_pairs zero": (lambda: fit(max_pairs=0), r"max_pairs.*got 0"),
    "max_pairs negative": (
        lambda: fit(max_pairs=-5),
        r"max_pairs.*got -5",
    ),
    "max_pairs float": (
        lambda: fit(max_pairs=2.5),
        r"max_pairs.*got 2\.5",
    ),
    "max_pairs bool": (
        lambda: fit(max_pairs=True),
        r"max_pairs.*got True",
    ),
    "seed negative": (lambda: fit(seed=-1), r"seed.*got -1"),
    "seed string": (lambda: fit(seed="0"), r"seed.*got '0'"),
    # calibration: clicks
    "no click": (
        lambda: fit(clicks=np.zeros((6, 5))),
        r"clicks holds no click",
    ),
    "no click, sparse": (
        lambda: fit(clicks=sp.csr_matrix((6, 5))),
        r"at least one click \(positive\)",
    ),
    "no non-click": (
        lambda: fit(clicks=np.ones((6, 5))),
        r"clicks holds no non-click",
    ),
    "negative click": (
        lambda: fit(clicks=with_value(GOOD_CLICKS, (0, 3), -1)),
        r"clicks has value -1\.0 at \(user 0, item 3\).*>= 0",
    ),
    "nan click": (
        lambda: fit(clicks=with_value(GOOD_CLICKS, (4, 1), np.nan)),
        r"clicks has value nan at \(user 4, item 1\)",
    ),
    "clicks shape": (
        lambda: fit(clicks=np.ones((6, 4))),
        r"clicks has shape \(6, 4\) but scores has shape \(6, 5\)",
    ),
    "sparse clicks shape": (
        lambda: fit(clicks=sp.csr_matrix((5, 5))),
        r"clicks has shape \(5, 5\) but scores has shape \(6, 5\)",
    ),
    "1-D clicks": (
        lambda: fit(clicks=np.ones(30)),
        r"clicks.*got shape \(30,\)",
    ),
    "complex clicks": (
        lambda: fit(clicks=GOOD_CLICKS + 0j),
        r"clicks has complex dtype complex128",
    ),
    # calibration: scores
    "nan score": (
        lambda: fit(scores=with_value(GOOD_SCORES, (1, 2), np.nan)),
        r"scores has value nan at \(user 1, item 2\)",
    ),
    "inf score, sparse": (
        lambda: fit(scores=sp.csr_matrix(with_value(GOOD_SCORES, (5, 4), -np.inf))),
        r"scores has value -inf at \(user 5, item 4\)",
    ),
    "complex scores": (
        lambda: fit(scores=GOOD_SCORES + 0j),
        r"scores has complex dtype complex128",
    ),
    "1-D scores": (
        lambda: fit(scores=np.ones(30)),
        r"scores.*got shape \(30,\)",
    ),
    "constant scores": (
        lambda: fit(scores=np.full((6, 5), 2.0)),
        r"scores take the single value 2",
    ),
    "separating scores": (
        lambda: fit(scores=GOOD_CLICKS.astype(float)),
        r"scores separate the clicks from the non-clicks.*slope is infinite",
    ),
    # calibration: propensities
    "zero item propensity": (
        lambda: fit(propensity=with_value(np.ones(5), 2, 0.0)),
        r"propensity 0\.0 of item 2 lies outside \(0, 1\]",
    ),
    "item propensity above 1": (
        lambda: fit(propensity=SimpleNamespace(propensity_=with_value(np.ones(5), 4, 1.5))),
        r"propensity 1\.5 of item 4 lies outside \(0, 1\]",
    ),
    "pair propensity above 1": (
        lambda: fit(propensity=with_value(np.ones((6, 5)), (1, 0), 1.5)),
        r"propensity 1\.5 of \(user 1, item 0\) lies outside \(0, 1\]",
    ),
    "nan pair propensity": (
        lambda: fit(propensity=with_value(np.ones((6, 5)), (3, 3), np.nan)),
        r"propensity nan of \(user 3, item 3\) lies outside \(0, 1\]",
    ),
    "sparse propensity missing a pair": (
        lambda: fit(propensity=sp.csr_matrix(with_value(np.ones((6, 5)), (2, 1), 0.0))),
        r"propensity 0\.0 of \(user 2, item 1\) lies outside \(0, 1\]",
    ),
    "item propensity length": (
        lambda: fit(propensity=np.ones(4)),
        r"propensity has shape \(4,\) but scores has 5 items",
    ),
    "pair propensity shape": (
        lambda: fit(propensity=np.ones((5, 5))),
        r"propensity has shape \(5, 5\) but scores has shape \(6, 5\)",
    ),
    "unfitted propensity model": (
        lambda: fit(propensity=Unfitted()),
        r"propensity Unfitted is not fitted: call fit",
    ),
    "complex propensity": (
        lambda: fit(propensity=np.ones(5) + 0j),
        r"propensity has complex dtype complex128",
    ),
    # calibration: use before fit
    "predict_proba before fit": (
        lambda: ScoreCalibration().predict_proba(np.zeros(3)),
        r"ScoreCalibration is not fitted: call fit\(scores, clicks\)",
    ),
    "reward_model before fit": (
        lambda: ScoreCalibration().reward_model(GOOD_SCORES),
        r"ScoreCalibration is not fitted: call fit\(scores, clicks\)",
    ),
    "predict_proba of nan": (
        lambda: fit().predict_proba(np.array([[0.0, 1.0], [np.nan, 2.0]])),
        r"values has nan at index \(1, 0\)",
    ),
    # fitted on nothing
    "calibration on no users": (
        lambda: fit(scores=np.empty((0, 5)), clicks=np.empty((0, 5))),
        r"^scores has shape \(0, 5\): no \(user, item\) pair to fit the calibration on",
    ),
    "calibration on no items": (
        lambda: fit(scores=np.empty((6, 0)), clicks=np.empty((6, 0))),
        r"^scores has shape \(6, 0\): no \(user, item\) pair to fit the calibration on",
    ),
}

# Text where numbers are needed: a TypeError (NonNumericError, also a ValueError) naming the
# argument and the dtype, or the text and its position; numbers as text are never parsed.
NON_NUMERIC = {
    "text probabilities": (
        lambda: RewardMatrix(np.full((2, 2), "0.5")),
        r"^probabilities must hold real numbers, got dtype <U3$",
    ),
    "a DataFrame of text probabilities": (
        lambda: RewardMatrix(pd.DataFrame([["0.5", "0.1"]])),
        r"^probabilities has non-numeric value '0\.5' \(text\) at \(user 0, item 0\)",
    ),
    "text scores": (
        lambda: fit(scores=GOOD_SCORES.astype(str)),
        r"^scores must hold real numbers, got dtype <U",
    ),
    "text clicks": (
        lambda: fit(clicks=GOOD_CLICKS.astype(str)),
        r"^clicks must hold real numbers, got dtype <U",
    ),
    "text propensity": (
        lambda: fit(propensity=np.full(5, "1.0", dtype=object)),
        r"^propensity has non-numeric value '1\.0' \(text\) at position 0",
    ),
    "text values to calibrate": (
        lambda: fit().predict_proba(np.array(["0.5"], dtype=object)),
        r"^values has non-numeric value '0\.5' \(text\) at position 0",
    ),
}


@pytest.mark.parametrize("case", list(NON_NUMERIC), ids=list(NON_NUMERIC))
def test_non_numeric_input_raises_a_named_type_error(case):
    make, message = NON_NUMERIC[case]
    with pytest.raises(NonNumericError, match=message) as raised:
        make()
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_raises_a_named_value_error(case):
    make, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        make()


def test_good_inputs_of_the_bad_input_table_fit():
    """The bad-input cases differ from a fit that works only in the named defect."""
    cal = fit(propensity=np.ones(5))
    assert cal.converged_ and np.isfinite(cal.slope_)
    assert re.search("ScoreCalibration", repr(cal))


def test_a_subsample_without_non_clicks_is_refused():
    """max_pairs = 1 keeps each non-click with probability 1/n0: for some seed none at all
    (chance ≈ e⁻¹ per seed), which the fit must refuse rather than fit clicks alone."""
    scores, clicks = simulate(50, 40, 1.0, -1.0, seed=81)
    n0 = clicks.size - int(clicks.sum())
    seed = next(k for k in range(100) if _bernoulli_ranks(n0, 1 / n0, seed=k).size == 0)
    with pytest.raises(ValueError, match=r"subsample kept no non-click.*max_pairs = 1"):
        ScoreCalibration(max_pairs=1, seed=seed).fit(scores, clicks)


def test_any_object_with_predict_is_a_reward_model():
    class Constant:
        def predict(self, users, items):
            return np.full(len(users), 0.3)

    assert isinstance(Constant(), RewardModel)
    assert not isinstance(object(), RewardModel)


def test_corrupt_sparse_probabilities_are_refused_before_use():
    with pytest.raises(ValueError, match=r"probabilities is a corrupt CSR matrix"):
        RewardMatrix(corrupt_indptr())


def test_reward_and_score_frames_are_aligned_by_labels():
    probabilities = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    frame = pd.DataFrame(probabilities[::-1, [1, 2, 0]], index=[1, 0], columns=[1, 2, 0])
    users, items = np.array([0, 1, 1]), np.array([2, 0, 1])
    np.testing.assert_array_equal(RewardMatrix(frame).predict(users, items), [0.3, 0.4, 0.5])
    cal = SimpleNamespace(slope_=2.0, intercept_=-1.0)
    np.testing.assert_allclose(
        CalibratedScores(frame, cal).predict(users, items),
        1 / (1 + np.exp(-(2.0 * probabilities[users, items] - 1.0))),
        rtol=1e-15,
    )
    with pytest.raises(ValueError, match=r"probabilities is a DataFrame.*label (np\.int64\()?5\b"):
        RewardMatrix(pd.DataFrame(probabilities, columns=[0, 5, 1]))


def test_scores_beyond_2_53_are_refused_with_their_position():
    with pytest.raises(ValueError, match=r"scores.*-1152921504606846976 at \(user 0, item 1\)"):
        CalibratedScores(np.array([[1, -(2**60)]]), SimpleNamespace(slope_=1.0, intercept_=0.0))


def test_missing_probabilities_are_refused_with_their_position():
    frame = pd.DataFrame({0: pd.array([0.5, None], dtype="Float64"), 1: [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"probabilities.*missing.*\(index 1, column 0\)"):
        RewardMatrix(frame)


def test_reward_matrix_sums_duplicates_as_documented():
    m = sp.coo_matrix(([0.25, 0.5], ([0, 0], [1, 1])), shape=(1, 2))
    np.testing.assert_array_equal(
        RewardMatrix(m).predict(np.array([0, 0]), np.array([1, 0])), [0.75, 0.0]
    )


def test_calibrated_scores_refuse_a_non_numeric_calibration():
    with pytest.raises(ValueError, match=r"calibration has slope_ 'a' and intercept_ 0\.0"):
        CalibratedScores(np.zeros((2, 2)), SimpleNamespace(slope_="a", intercept_=0.0))
