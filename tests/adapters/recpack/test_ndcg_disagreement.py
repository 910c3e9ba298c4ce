"""Datasets for RecPack and the nDCG-disagreement reproduction (Jeunen et al. App. A).

Needs RecPack (legacy environment); the modern nox session excludes this folder explicitly.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pandas as pd
import pytest
from recpack.datasets import MovieLens1M, MovieLens100K
from scipy import stats

from recpack_ope.cli import main
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.studies.ndcg_disagreement import (
    PAPER_MODELS,
    DisagreementConfig,
    model_grid,
    run_disagreement,
    write_report,
)

pytestmark = pytest.mark.usefixtures("quiet_recpack")


def test_ml100k_equals_recpacks_own_loader_on_the_same_ratings(movielens, tmp_path):
    """Our route (widedeep file → RecPack's filters) vs RecPack reading a u.data of the same
    ratings."""
    u_data = tmp_path / "u.data"
    pd.DataFrame(
        {
            "u": movielens.user_ids[movielens.users],
            "i": movielens.item_ids[movielens.items],
            "r": movielens.ratings.astype(int),
            "t": movielens.timestamps,
        }
    ).to_csv(u_data, sep="\t", header=False, index=False)
    theirs = MovieLens100K(path=str(tmp_path), filename="u.data").load()
    ours = load_interactions("ml-100k", data_dir=tmp_path / "cache")
    from_file = load_interactions("ml-100k", path=u_data, data_dir=tmp_path / "cache")
    # ratings >= 4, items with >= 5 such users: 942 users x 1008 items after the filters
    assert ours.shape == theirs.shape == from_file.shape == (942, 1008)
    for im in (ours, from_file):
        assert (im.binary_values != theirs.binary_values).nnz == 0
    liked = movielens.items[movielens.ratings >= 4]
    per_item = np.bincount(liked)
    assert ours.num_interactions == int(per_item[per_item >= 5].sum()) == 54427


def _fake_ml1m(folder):
    """A tiny ml-1m.zip: 8 users rate items 1..6 (item 6 by too few users to survive)."""
    rng = np.random.default_rng(0)
    lines = []
    for user in range(1, 9):
        for item in range(1, 7):
            if item < 6 or user < 3:
                lines.append(f"{user}::{item}::{int(rng.integers(4, 6))}::{978300000 + user}")
    lines.append("1::7::2::978300760")  # a low rating: dropped by MinRating(4)
    archive = folder / "ml-1m.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ml-1m/ratings.dat", "\n".join(lines) + "\n")
    return archive


def test_ml1m_downloads_through_recpacks_loader(tmp_path, monkeypatch):
    server = tmp_path / "server"
    server.mkdir()
    _fake_ml1m(server)
    monkeypatch.setattr(MovieLens1M, "DATASETURL", server.as_uri())
    data_dir = tmp_path / "data"
    im = load_interactions("ml-1m", data_dir=data_dir)
    assert (data_dir / "ml-1m_ratings.dat").exists()  # downloaded and extracted
    assert im.shape == (8, 5) and im.num_interactions == 40  # item 6 (2 users) filtered out
    (server / "ml-1m.zip").unlink()  # a second load reads the cached file
    assert load_interactions("ml-1m", data_dir=data_dir).num_interactions == 40


def test_synthetic_is_seeded_and_errors_name_the_bad_option(tmp_path):
    a = load_interactions("synthetic", seed=3, data_dir=tmp_path)
    b = load_interactions("synthetic", seed=3, data_dir=tmp_path)
    assert a.shape == (3000, 600)
    assert (a.binary_values != b.binary_values).nnz == 0
    assert a.num_interactions == a.binary_values.nnz > 10_000
    with pytest.raises(ValueError, match="unknown dataset 'ml-20m'"):
        load_interactions("ml-20m")
    with pytest.raises(ValueError, match="not for 'ml-1m'"):
        load_interactions("ml-1m", path="u.data")


def test_paper_grid_and_scaled_grids():
    grid = model_grid()
    assert len(grid) == PAPER_MODELS == 192
    kunn = [p for name, p in grid if name == "KUNN"]
    ease = [p["l2"] for name, p in grid if name == "EASE"]
    side = np.linspace(70, 110, 9).astype(int)
    assert kunn == [{"Ku": int(u), "Ki": int(i)} for u in side for i in side]
    np.testing.assert_allclose(ease, np.linspace(500, 1600, 111))
    for n in (2, 3, 12, 20, 50):
        g = model_grid(n)
        families = [name for name, _ in g]
        assert len(g) == n and families.count("KUNN") >= 1 and families.count("EASE") >= 1
    assert [name for name, _ in model_grid(20)].count("KUNN") == 9  # 81/192 of 20, as a 3x3 grid
    with pytest.raises(ValueError, match="at least 2"):
        model_grid(1)


@pytest.fixture(scope="module")
def synthetic_run():
    return run_disagreement(DisagreementConfig(dataset="synthetic", n_models=6, K=20))


def test_reproduction_statistics(synthetic_run):
    r = synthetic_run
    v = r.values
    assert len(v) == 6 and set(v["family"]) == {"KUNN", "EASE"}
    assert list(r.agreements) == ["nDCG", "pnDCG", "IPS-DCG (power-law p)"]
    for name, a in r.agreements.items():
        assert a.pearson == pytest.approx(stats.pearsonr(v["DCG"], v[name])[0], abs=1e-12)
        assert a.kendall == pytest.approx(stats.kendalltau(v["DCG"], v[name])[0], abs=1e-12)
    # Lemma 5.1: iDCG does not depend on the model, so pnDCG orders models exactly like DCG
    assert (
        r.agreements["pnDCG"].kendall == pytest.approx(1.0)
        and r.agreements["pnDCG"].disagreement == 0
    )
    ratio = v["DCG"] / v["pnDCG"]
    np.testing.assert_allclose(ratio, ratio.iloc[0], rtol=1e-12)  # the common mean iDCG
    assert ((0 < v["nDCG"]) & (v["nDCG"] < 1)).all()
    assert r.n_users == 3000 and r.n_items == 600


def test_report_files(synthetic_run, tmp_path):
    folder = write_report(synthetic_run, tmp_path / "report")
    models = pd.read_csv(folder / "models.csv", index_col="model")
    np.testing.assert_allclose(models["nDCG"], synthetic_run.values["nDCG"], rtol=1e-12)
    agreement = pd.read_csv(folder / "agreement.csv", index_col=0)
    assert agreement.loc["nDCG", "disagreement"] == synthetic_run.agreements["nDCG"].disagreement
    assert "WeakGeneralization(0.5, seed=0)" in (folder / "summary.md").read_text()
    assert (folder / "figure2.png").stat().st_size > 10_000


def test_cli_reproduce_prints_the_table(tmp_path, capsys):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "reproduce",
                "ndcg-disagreement",
                "--dataset",
                "synthetic",
                "--models",
                "3",
                "--cutoff",
                "10",
                "--clip",
                "50",
                "--output",
                str(out),
                "--no-plots",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "3 models on synthetic" in printed and "pnDCG@10" in printed and "≈25%" in printed
    assert (out / "models.csv").exists() and not (out / "figure2.png").exists()
    assert "clip = 50.0" in (out / "summary.md").read_text()


def test_example_script(tmp_path, capsys):
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "examples" / "movielens_ndcg_disagreement.py"
    out = runpy.run_path(str(example))["main"](
        ["--dataset", "ml-100k", "--models", "4", "--cutoff", "20", "--output", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    values = out["result"].values
    assert len(values) == 4 and out["pick_dcg"] == values["DCG"].idxmax()
    assert out["pick_ndcg"] == values["nDCG"].idxmax()
    assert f"DCG picks  {out['pick_dcg']}" in printed and (tmp_path / "figure2.png").exists()
    same = out["pick_dcg"] == out["pick_ndcg"]
    assert ("both metrics pick the same model" in printed) == same == (out["paired"] is None)
    # every other model is paired with DCG's pick
    assert set(out["p_values"]) == set(values.index) - {out["pick_dcg"]}
    tied = sum(p >= 0.05 for p in out["p_values"].values())
    assert f"{tied} of 3 other models are not significantly worse" in printed
