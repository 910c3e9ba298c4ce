"""Baseline recommenders against independent closed forms and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import cosine_similarity

from recpack_ope.simulation.baselines import EASE, ItemKNN, Popularity, RandomScores


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return sp.csr_matrix((rng.random((60, 25)) < 0.2).astype(float))


def test_popularity_scores_are_item_counts(X):
    scores = Popularity().fit(X).predict(X[:3])
    np.testing.assert_array_equal(scores, np.tile(X.toarray().sum(axis=0), (3, 1)))


def test_item_knn_keeps_the_k_most_similar_neighbours(X):
    sim = cosine_similarity(X.T.toarray())
    np.fill_diagonal(sim, 0)
    model = ItemKNN(k=4).fit(X)
    for j in range(X.shape[1]):
        row = model.similarity_[j]
        kept = np.flatnonzero(row)
        assert kept.size <= 4
        np.testing.assert_allclose(row[kept], sim[j, kept], atol=1e-12)
        # nothing dropped is more similar to j than what was kept
        dropped = np.setdiff1d(np.arange(X.shape[1]), np.append(kept, j))
        assert sim[j, dropped].max(initial=0) <= row[kept].min() + 1e-12
    np.testing.assert_allclose(model.predict(X), X.toarray() @ model.similarity_, atol=1e-12)


def test_ease_columns_solve_the_constrained_ridge_regression(X):
    # Steck (2019): column j of B regresses item j on all other items with penalty λ and
    # B_jj = 0. Solve each column's reduced system directly.
    lam = 7.0
    model = EASE(l2=lam).fit(X)
    dense = X.toarray()
    for j in range(X.shape[1]):
        others = np.delete(np.arange(X.shape[1]), j)
        A = dense[:, others]
        beta = np.linalg.solve(A.T @ A + lam * np.eye(others.size), A.T @ dense[:, j])
        np.testing.assert_allclose(model.coefficients_[others, j], beta, atol=1e-10)
        assert model.coefficients_[j, j] == 0.0


def test_random_scores_are_seeded(X):
    a = RandomScores(seed=3).fit(X).predict(X)
    np.testing.assert_array_equal(a, RandomScores(seed=3).fit(X).predict(X))
    assert a.shape == X.shape


def test_bad_input_is_named(X):
    with pytest.raises(ValueError, match="l2 must be > 0"):
        EASE(l2=0).fit(X)
    with pytest.raises(ValueError, match="X has value -1.0"):
        Popularity().fit(sp.csr_matrix(np.array([[1.0, -1.0]])))
