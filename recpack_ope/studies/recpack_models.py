"""RecPack's algorithms as the demo's model pool (needs the ``recpack`` extra).

Translation only: RecPack models already have ``fit(X)`` / ``predict(X)`` on users×items
CSR matrices; ``predict`` returns a sparse matrix whose unstored entries are "not
recommended", which the core's rankers read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from recpack.algorithms import EASE, ItemKNN, Popularity, Random

__all__ = ["recpack_pool"]


def recpack_pool(
    knn_grid: Sequence[int], ease_grid: Sequence[float], n_items: int
) -> list[tuple[str, object]]:
    """Random, popularity, ItemKNN (cosine) and EASE models named like the numpy pool.

    Random and Popularity score ``K = n_items`` items, i.e. the whole catalogue, like the
    numpy baselines.
    """
    pool: list[tuple[str, object]] = [
        ("random", Random(K=n_items, seed=0)),
        ("popularity", Popularity(K=n_items)),
    ]
    pool += [(f"ItemKNN(k={k})", ItemKNN(K=k)) for k in knn_grid]
    pool += [(f"EASE(l2={l2:g})", EASE(l2=l2)) for l2 in ease_grid]
    return pool
