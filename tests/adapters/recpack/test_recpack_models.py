"""The demo's RecPack pool: same models as the numpy baselines, and the demo runs on it.

Needs RecPack (legacy environment); excluded explicitly in the modern session.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.simulation.baselines import EASE, ItemKNN
from recpack_ope.studies.demo import EASE_GRID, KNN_GRID, DemoConfig, model_pool, run_demo
from recpack_ope.studies.recpack_models import recpack_pool


@pytest.fixture(scope="module")
def X():
    # binary, as RecPack binarises its input; with 3000 users and item-specific densities the
    # cosine similarities have no ties at any k-th neighbour (asserted in the kNN test)
    rng = np.random.default_rng(4)
    density = rng.uniform(0.05, 0.4, size=40)
    return sp.csr_matrix((rng.random((3000, 40)) < density).astype(float))


def test_recpack_and_numpy_pools_hold_the_same_models():
    backend, pool = model_pool("auto")
    assert backend == "recpack"  # RecPack is installed here, so auto picks it
    _, numpy_pool = model_pool("numpy")
    assert [n for n, _ in pool] == [n for n, _ in numpy_pool]
    assert [type(m).__module__.split(".")[0] for _, m in pool] == ["recpack"] * len(pool)


def test_recpack_ease_equals_ours(X):
    ours = EASE(l2=30.0).fit(X).predict(X)
    theirs = (
        dict(recpack_pool(KNN_GRID, (30.0,), X.shape[1]))["EASE(l2=30)"].fit(X).predict(X).toarray()
    )
    np.testing.assert_allclose(theirs, ours, atol=1e-10)


def test_recpack_item_knn_equals_ours(X):
    ours = ItemKNN(k=5).fit(X)
    full = ItemKNN(k=39).fit(X).similarity_
    kth = -np.sort(-full, axis=1)[:, 4:6]
    assert (kth[:, 0] > kth[:, 1]).all()  # the 5 neighbours of every item are unique
    theirs = dict(recpack_pool((5,), EASE_GRID, X.shape[1]))["ItemKNN(k=5)"].fit(X)
    np.testing.assert_allclose(theirs.similarity_matrix_.toarray(), ours.similarity_, atol=1e-12)
    np.testing.assert_allclose(theirs.predict(X).toarray(), ours.predict(X), atol=1e-10)


def test_demo_runs_on_recpack_models():
    result = run_demo(DemoConfig(n_users=1500, n_items=150, backend="recpack"), progress=False)
    assert result.backend == "recpack" and len(result.models) == 20
    numpy_result = run_demo(DemoConfig(n_users=1500, n_items=150, backend="numpy"), progress=False)
    # same world and EASE models: identical online rewards for every EASE configuration
    ease = [k for k, name in enumerate(result.models) if name.startswith("EASE")]
    np.testing.assert_allclose(result.online[ease], numpy_result.online[ease], rtol=1e-9)
