"""Framework-free baseline recommenders for the simulator's model pool.

Small closed-form models with the interface the demo needs — ``fit(X)`` on a users×items
interaction matrix, ``predict(X)`` returning users×items scores — so the main job runs
without RecPack. With the ``recpack`` extra installed, the demo uses RecPack's own
implementations instead (:mod:`recpack_ope.studies.recpack_models`).

Each keeps an items×items dense matrix, so they suit catalogues of up to a few thousand items.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from .._validation import as_csr, check_positive_int

__all__ = ["Popularity", "ItemKNN", "EASE", "RandomScores"]


def _interactions(X) -> sp.csr_matrix:
    X = as_csr(X, "X")
    bad = np.flatnonzero(~np.isfinite(X.data) | (X.data < 0))
    if bad.size:
        raise ValueError(
            f"X has value {float(X.data[bad[0]])}; interactions must be finite and >= 0"
        )
    return X


class Popularity(BaseEstimator):
    """Scores every item by its number of interactions in the training data."""

    def fit(self, X, y=None) -> Popularity:
        self.counts_ = np.asarray(_interactions(X).sum(axis=0)).ravel()
        return self

    def predict(self, X) -> np.ndarray:
        return np.broadcast_to(self.counts_, (as_csr(X, "X").shape[0], self.counts_.size)).copy()


class RandomScores(BaseEstimator):
    """Independent uniform scores: the floor of the pool."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, X, y=None) -> RandomScores:
        self.n_items_ = as_csr(X, "X").shape[1]
        return self

    def predict(self, X) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        return rng.random((as_csr(X, "X").shape[0], self.n_items_))


class ItemKNN(BaseEstimator):
    """Item-based k-nearest neighbours with cosine similarity (Sarwar et al. 2001).

    ``score(u, i) = Σ_j x_uj · s_ji`` where row ``s_j·`` keeps only the k items most similar
    to j (RecPack's ``ItemKNN`` convention: every history item votes for its k neighbours).
    Among neighbours tied with the k-th largest similarity, the lowest item indices are kept.

    Parameters
    ----------
    k : int
        Neighbours kept per item, >= 1.
    """

    def __init__(self, k: int = 50):
        self.k = k

    def fit(self, X, y=None) -> ItemKNN:
        k = check_positive_int(self.k, "k")
        X = _interactions(X)
        gram = (X.T @ X).toarray()
        norms = np.sqrt(np.diag(gram))
        norms[norms == 0] = 1.0
        sim = gram / norms[:, None] / norms[None, :]
        np.fill_diagonal(sim, 0.0)
        n = sim.shape[1]
        k = min(k, n - 1)
        if k < n - 1:
            # Not argpartition: which of the values tied with the k-th largest it keeps depends
            # on its selection algorithm, which changed in numpy 2 (binary data ties a lot).
            kth = np.partition(sim, n - k, axis=1)[:, n - k, None]
            above = sim > kth
            tied = sim == kth
            room = k - above.sum(axis=1, keepdims=True)
            sim[~(above | (tied & (np.cumsum(tied, axis=1) <= room)))] = 0.0
        self.similarity_ = sim
        return self

    def predict(self, X) -> np.ndarray:
        return np.asarray(as_csr(X, "X") @ self.similarity_)


class EASE(BaseEstimator):
    """Embarrassingly shallow autoencoder (Steck 2019): a closed-form item-item model.

    ``B = I − P · diag(1 / diag(P))`` with ``P = (XᵀX + λI)⁻¹``, so ``diag(B) = 0``.

    Parameters
    ----------
    l2 : float
        Ridge penalty λ > 0.
    """

    def __init__(self, l2: float = 100.0):
        self.l2 = l2

    def fit(self, X, y=None) -> EASE:
        if not self.l2 > 0:
            raise ValueError(f"l2 must be > 0, got {self.l2!r}")
        X = _interactions(X)
        gram = (X.T @ X).toarray()
        gram[np.diag_indices_from(gram)] += self.l2
        p = np.linalg.inv(gram)
        b = -p / np.diag(p)[None, :]
        np.fill_diagonal(b, 0.0)
        self.coefficients_ = b
        return self

    def predict(self, X) -> np.ndarray:
        return np.asarray(as_csr(X, "X") @ self.coefficients_)
