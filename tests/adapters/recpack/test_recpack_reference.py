"""Our estimators with p ≡ 1 and LogDiscount(K) against RecPack's own DCGK / NDCGK.

Needs RecPack (legacy environment). The modern nox session excludes this folder explicitly;
it is never skipped.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import brute_force_dcg
from recpack.algorithms import EASE, ItemKNN
from recpack.metrics import DCGK, NDCGK
from recpack.metrics.ips import IPSMetric

from recpack_ope.metrics.dcg import dcg, ndcg
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.propensity.models import PopularityPropensity


@pytest.fixture(scope="module")
def split(movielens):
    """A seeded 50/50 split of MovieLens-100K interactions (binary), as in Jeunen et al. App. A."""
    X = movielens.matrix()
    rng = np.random.default_rng(0)
    keep = rng.random(X.nnz) < 0.5
    coo = X.tocoo()
    train = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=X.shape)
    test = sp.csr_matrix((coo.data[~keep], (coo.row[~keep], coo.col[~keep])), shape=X.shape)
    return train, test


@pytest.fixture(scope="module", params=["EASE", "ItemKNN"])
def predictions(request, split):
    train, test = split
    algo = EASE(l2=200.0) if request.param == "EASE" else ItemKNN(K=100)
    algo.fit(train)
    X_pred = sp.csr_matrix(algo.predict(train))
    X_pred = X_pred - X_pred.multiply(
        train.astype(bool)
    )  # mask history, as RecPack's pipeline does
    X_pred.eliminate_zeros()
    return test, X_pred


def tied_users(y_pred, K):
    """Users whose top-(K+1) predicted scores contain a tie: there RecPack's argpartition and
    our lower-index-first rule may legitimately rank differently."""
    tied = []
    for u in range(y_pred.shape[0]):
        top = np.sort(y_pred.data[y_pred.indptr[u] : y_pred.indptr[u + 1]])[::-1][: K + 1]
        if np.any(np.diff(top) == 0):
            tied.append(u)
    return np.array(tied, dtype=int)


@pytest.mark.parametrize("K", [10, 100])
def test_equals_recpack_dcgk_and_ndcgk(predictions, K):
    y_true, y_pred = predictions
    tied = tied_users(y_pred, K)
    assert tied.size < y_pred.shape[0] // 2  # most users are compared with RecPack itself
    for ours, theirs_cls, normalised in ((dcg, DCGK, False), (ndcg, NDCGK, True)):
        theirs = theirs_cls(K=K)
        theirs.calculate(y_true, y_pred)
        result = ours(y_true, y_pred, discount=LogDiscount(K))
        per_user = theirs.results
        assert result.user_ids.tolist() == per_user["user_id"].tolist()
        assert result.n_users == theirs.num_users
        untied = ~np.isin(result.user_ids, tied)
        assert result.per_user[untied] == pytest.approx(
            per_user["score"].to_numpy()[untied], abs=1e-12
        )
        if not tied.size:
            assert result.value == pytest.approx(theirs.value, abs=1e-12)
        # tied users: the brute-force reference with our documented tie rule
        dense = np.where(y_pred[tied].toarray() != 0, y_pred[tied].toarray(), -np.inf)
        ref = brute_force_dcg(
            y_true[tied], dense, lambda r: 1 / math.log2(r + 1) if r <= K else 0.0
        )
        expected = [ref[j][0] / ref[j][1] if normalised else ref[j][0] for j in range(tied.size)]
        assert result.per_user[~untied] == pytest.approx(expected, abs=1e-12)


def test_popularity_propensity_equals_recpack_ips_fit(split):
    train, _ = split
    theirs = IPSMetric()
    theirs.fit(train)
    ours = PopularityPropensity().fit(train)
    seen = ours.counts_ > 0  # RecPack leaves unseen items at probability 0 (weight ignored)
    assert ours.propensity_[seen] == pytest.approx(
        np.asarray(theirs.item_prob_).ravel()[seen], rel=1e-12
    )
