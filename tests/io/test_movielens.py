"""MovieLens-100K loading from every supported source (the download with a local fake file)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from recpack_ope.io.movielens import load_movielens_100k

U_DATA = b"196\t242\t3\t881250949\n186\t302\t3\t891717742\n196\t377\t1\t878887116\n"


def test_shipped_copy_has_the_published_size(movielens):
    assert movielens.users.size == 100_000
    assert movielens.user_ids.size == 943 and movielens.item_ids.size == 1682
    assert movielens.matrix().nnz == 100_000
    assert set(np.unique(movielens.ratings)) == {1, 2, 3, 4, 5}


def test_local_u_data(tmp_path):
    path = tmp_path / "u.data"
    path.write_bytes(U_DATA)
    data = load_movielens_100k(path)
    assert data.user_ids.tolist() == [186, 196] and data.item_ids.tolist() == [242, 302, 377]
    assert data.matrix(binary=False).toarray().tolist() == [[0, 3, 0], [3, 0, 1]]


def test_download_path_with_a_local_fake_archive(tmp_path, monkeypatch):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ml-100k/u.data", U_DATA)
    (tmp_path / "ml-100k.zip").write_bytes(archive.getvalue())
    monkeypatch.setattr("recpack_ope.io.movielens._widedeep_file", lambda: None)
    url = (tmp_path / "ml-100k.zip").as_uri()
    data = load_movielens_100k(cache_dir=tmp_path / "cache", url=url)
    assert data.users.size == 3 and data.source.endswith("ml-100k/u.data")
    # cached: a second call must not download again
    data2 = load_movielens_100k(cache_dir=tmp_path / "cache", url="file:///nonexistent.zip")
    assert np.array_equal(data2.items, data.items)
    with pytest.raises(FileNotFoundError, match="MovieLens-100K not found"):
        load_movielens_100k(download=False)
