"""load_open_bandit and load_bts_prior: the Open Bandit Dataset's samples (obp wheel) and
small folders written here, against the CSV and YAML read by other means."""

from __future__ import annotations

import csv
from collections import Counter

import numpy as np
import pytest
from conftest import hide_package

from recpack_ope.io import load_bts_prior, load_open_bandit

HEADER = ",timestamp,item_id,position,click,propensity_score,user_feature_0\n"


def _csv_rows(path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("behavior", ["random", "bts"])
@pytest.mark.parametrize(("campaign", "n_items"), [("all", 80), ("men", 34), ("women", 46)])
def test_sample_matches_the_csv(open_bandit_sample, behavior, campaign, n_items):
    data = load_open_bandit(behavior, campaign)
    source = open_bandit_sample / behavior / campaign / f"{campaign}.csv"
    assert data.source == source
    rows = _csv_rows(source)
    log = data.log
    assert (log.n_rows, log.n_sessions, data.n_items, log.n_items) == (
        10_000,
        10_000,
        n_items,
        n_items,
    )
    np.testing.assert_array_equal(log.item, [int(r["item_id"]) for r in rows])
    np.testing.assert_array_equal(log.rank, [int(r["position"]) for r in rows])
    np.testing.assert_array_equal(log.reward, [float(r["click"]) for r in rows])
    np.testing.assert_array_equal(
        log.position_propensity, [float(r["propensity_score"]) for r in rows]
    )
    sizes = Counter(r["timestamp"] for r in rows)
    assert data.display_sizes.sum() == 10_000
    assert sorted(data.display_sizes) == sorted(sizes.values())
    assert data.rankings_reconstructable is False
    explanation = data.rankings_explanation
    assert f"share {len(sizes)} distinct timestamps" in explanation
    assert f"({sum(v == 1 for v in sizes.values())} of them hold a single row" in explanation


def test_the_measured_timestamp_counts_of_the_random_sample():
    # 9,982 of the 9,991 timestamps of random/all hold one row: no display can be rebuilt.
    sizes = load_open_bandit("random", "all").display_sizes
    assert (sizes.size, int(np.sum(sizes == 1)), int(sizes.max())) == (9991, 9982, 2)


def _folder(tmp_path, lines: list[str], behavior="random", campaign="men"):
    folder = tmp_path / behavior / campaign
    folder.mkdir(parents=True)
    (folder / f"{campaign}.csv").write_text(HEADER + "".join(lines))
    return tmp_path


def test_whole_displays_are_recognised(tmp_path):
    lines = [
        f"{i},2019-11-24 00:00:0{i // 3},{i % 4},{i % 3 + 1},{int(i == 4)},0.25,u\n"
        for i in range(6)
    ]
    data = load_open_bandit("random", "men", path=_folder(tmp_path, lines))
    assert data.rankings_reconstructable is True
    assert data.n_items == 4  # no item_context.csv: the largest id + 1
    assert data.log.reward.tolist() == [0, 0, 0, 0, 1, 0]
    assert "one ranking each" in data.rankings_explanation


def test_a_display_missing_a_position_is_not_whole(tmp_path):
    lines = [
        "0,t0,0,1,0,0.5,u\n",
        "1,t0,1,2,0,0.5,u\n",
        "2,t0,2,3,0,0.5,u\n",
        "3,t1,0,1,0,0.5,u\n",
        "4,t1,1,3,0,0.5,u\n",
    ]
    folder = _folder(tmp_path, lines)
    (folder / "random" / "men" / "item_context.csv").write_text("h\n" + "x\n" * 7)
    data = load_open_bandit("random", "men", path=folder)
    assert data.rankings_reconstructable is False
    assert data.n_items == 7  # the rows of item_context.csv
    assert data.display_sizes.tolist() == [3, 2]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"behavior": "epsilon"}, ValueError, "behavior must be one of"),
        ({"campaign": "kids"}, ValueError, "campaign must be one of"),
        ({"behavior": "bts", "campaign": "men"}, FileNotFoundError, r"bts/men/men.csv"),
    ],
)
def test_bad_choices_and_missing_files(tmp_path, kwargs, error, message):
    folder = _folder(tmp_path, ["0,t,0,1,0,0.5,u\n"])
    with pytest.raises(error, match=message):
        load_open_bandit(**{"behavior": "random", "campaign": "men", **kwargs}, path=folder)


def test_missing_folder_bad_columns_and_positions(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_open_bandit(path=tmp_path / "nowhere")
    folder = tmp_path / "a" / "random" / "men"
    folder.mkdir(parents=True)
    (folder / "men.csv").write_text(",timestamp,item_id,click\n0,t,1,0\n")
    with pytest.raises(ValueError, match=r"missing columns \['position', 'propensity_score'\]"):
        load_open_bandit("random", "men", path=tmp_path / "a")
    path = _folder(tmp_path / "b", ["0,t,0,4,0,0.5,u\n"])
    with pytest.raises(ValueError, match="position of row 0 is 4;"):
        load_open_bandit("random", "men", path=path)
    path = _folder(tmp_path / "c", ["0,t,0,top,0,0.5,u\n"])
    with pytest.raises(ValueError, match="position of row 0 is 'top'"):
        load_open_bandit("random", "men", path=path)


def test_without_pandas_the_error_names_it(monkeypatch, tmp_path):
    folder = _folder(tmp_path, ["0,t,0,1,0,0.5,u\n"])
    hide_package(monkeypatch, "pandas")
    with pytest.raises(ModuleNotFoundError, match="needs pandas") as error:
        load_open_bandit("random", "men", path=folder)
    assert error.value.name == "pandas"


def test_without_obp_the_error_names_it(monkeypatch):
    hide_package(monkeypatch, "obp")
    with pytest.raises(ModuleNotFoundError, match="comes with obp") as error:
        load_open_bandit()
    assert error.value.name == "obp"
    with pytest.raises(ModuleNotFoundError, match="prior_bts.yaml comes with obp"):
        load_bts_prior()


def test_the_prior_of_the_wheel(open_bandit_sample):
    # Values read off obp/policy/conf/prior_bts.yaml by eye: its first and last entries.
    alpha, beta = load_bts_prior("all")
    assert (alpha.size, alpha[0], alpha[-1], beta[0]) == (80, 47.0, 246.0, 12198.0)
    text = (open_bandit_sample.parent.parent / "policy" / "conf" / "prior_bts.yaml").read_text()
    # Every "- number" line of the file is one of the three campaigns' 2 × n_items numbers.
    assert text.count("- ") == 2 * (80 + 34 + 46)
    for campaign, n in (("men", 34), ("women", 46)):
        a, b = load_bts_prior(campaign)
        assert a.shape == b.shape == (n,) and np.all(a > 0) and np.all(b > 0)


def test_a_prior_file_is_parsed_and_checked(tmp_path):
    path = tmp_path / "prior.yaml"
    path.write_text("# prior\nmen:\n  alpha:\n    - 1.5\n    - 2\n  beta:\n    - 3.0\n    - 4e1\n")
    alpha, beta = load_bts_prior("men", path=path)
    assert alpha.tolist() == [1.5, 2.0] and beta.tolist() == [3.0, 40.0]
    with pytest.raises(
        ValueError, match=r"no alpha and beta lists for campaign 'all'; it has \['men'\]"
    ):
        load_bts_prior("all", path=path)
    path.write_text("men:\n  alpha:\n    - 1\n  beta:\n    - 1\n    - 2\n")
    with pytest.raises(ValueError, match="1 alphas and 2 betas"):
        load_bts_prior("men", path=path)
    path.write_text("men:\n  alpha:\n    - one\n")
    with pytest.raises(ValueError, match="'one' is not a number"):
        load_bts_prior("men", path=path)
    path.write_text("    - 1\n")
    with pytest.raises(ValueError, match="no key above it"):
        load_bts_prior("men", path=path)
    with pytest.raises(FileNotFoundError, match="no file"):
        load_bts_prior("men", path=tmp_path / "absent.yaml")
    with pytest.raises(ValueError, match="campaign must be one of"):
        load_bts_prior("kids", path=path)
