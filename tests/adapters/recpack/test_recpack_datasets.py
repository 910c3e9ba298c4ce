"""``load_interactions``: RecPack's item id mapping for propensities keyed by raw item id, and a
one-line hint when MovieLens-1M cannot be downloaded. Needs RecPack (legacy environment)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from recpack.matrix import InteractionMatrix
from recpack_ope.adapters.recpack import RecPackAdapter

from recpack_ope.cli import main
from recpack_ope.io.movielens import DownloadError
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.propensity.models import PopularityPropensity, PowerLawPropensity


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return load_interactions(
        "ml-100k", data_dir=tmp_path_factory.mktemp("data"), return_mapping=True
    )


def _raw_interactions(movielens) -> tuple[sp.csr_matrix, np.ndarray]:
    """Users × raw items after RecPack's MovieLens filters, applied by hand (ratings ≥ 4, then
    items with at least 5 users), and the raw item id of each column."""
    frame = pd.DataFrame(
        {
            "user": movielens.user_ids[movielens.users],
            "item": movielens.item_ids[movielens.items],
            "rating": movielens.ratings,
        }
    )
    liked = frame[frame.rating >= 4]
    users_per_item = liked.groupby("item").user.nunique()
    kept = liked[liked.item.isin(users_per_item.index[users_per_item >= 5])]
    users, rows = np.unique(kept.user, return_inverse=True)
    items, cols = np.unique(kept.item, return_inverse=True)
    matrix = sp.csr_matrix((np.ones(len(kept)), (rows, cols)), shape=(users.size, items.size))
    return matrix, items


def test_default_return_is_still_the_matrix(loaded, tmp_path):
    matrix = load_interactions("ml-100k", data_dir=tmp_path)
    assert isinstance(matrix, InteractionMatrix)
    assert (matrix.values != loaded[0].values).nnz == 0
    with pytest.raises(ValueError, match="return_mapping must be True or False, got 'yes'"):
        load_interactions("ml-100k", data_dir=tmp_path, return_mapping="yes")


@pytest.mark.parametrize("model", [PopularityPropensity, PowerLawPropensity])
def test_raw_id_propensities_through_the_mapping_equal_those_fitted_on_the_matrix(
    loaded, movielens, model
):
    matrix, mapping = loaded
    raw_matrix, raw_ids = _raw_interactions(movielens)
    assert len(mapping) == matrix.shape[1] == raw_ids.size
    # Fitted on the raw data, without RecPack: propensities keyed by raw item id.
    raw = dict(zip(raw_ids, model().fit(raw_matrix).propensity_, strict=True))
    through_mapping = RecPackAdapter(propensity=raw, item_id_mapping=mapping).propensity.propensity_
    direct = RecPackAdapter(propensity=model()).fit(matrix).propensity.propensity_
    np.testing.assert_allclose(through_mapping, direct, rtol=1e-12, atol=0)
    # Items differ in their counts, so a wrong mapping could not pass.
    assert np.unique(direct).size > 50


def test_synthetic_item_ids_are_the_columns():
    matrix, mapping = load_interactions("synthetic", return_mapping=True)
    np.testing.assert_array_equal(mapping[InteractionMatrix.ITEM_IX], np.arange(matrix.shape[1]))
    np.testing.assert_array_equal(mapping["item_id"], np.arange(matrix.shape[1]))


def test_ml_1m_without_network_is_a_one_line_hint(monkeypatch, capsys, tmp_path):
    def no_resolver(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))

    monkeypatch.setattr(urllib.request, "urlopen", no_resolver)
    with pytest.raises(DownloadError, match="ml-1m.zip failed"):
        load_interactions("ml-1m", data_dir=tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "ndcg-disagreement", "--dataset", "ml-1m", "--data-dir", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("recpack-ope reproduce ndcg-disagreement: downloading ")
    assert "Name or service not known" in err and str(tmp_path / "ml-1m_ratings.dat") in err
