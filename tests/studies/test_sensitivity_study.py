import json

import numpy as np
import pytest
from scipy import stats

from recpack_ope import LogDiscount
from recpack_ope.logged.logged_dcg import logged_dcg
from recpack_ope.logged.plackett_luce import exposure
from recpack_ope.logged.policies import DeterministicRanker
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld
from recpack_ope.studies.sensitivity import SensitivityConfig, run_sensitivity, write_report

CONFIG = SensitivityConfig(
    n_users=600,
    n_items=60,
    feed_length=8,
    logging_temperatures=(1.0,),
    target_noise=(0.0, 0.5, 1.0, 8.0),
    clips=(1, 4, 64, None),
)


@pytest.fixture(scope="module")
def result():
    return run_sensitivity(CONFIG, progress=False)


def test_settings_are_the_pairs_that_improve_online(result):
    world = SimulatedWorld(n_users=600, n_items=60, seed=0)
    d = LogDiscount(cutoff=8)
    eps0 = exposure(PopularityPolicy(1.0).weights(world), d, 8)
    logging_reward = (world.relevance() @ eps0).mean()  # Eq. 8 exposure × relevance, by hand
    rng = np.random.default_rng(0)
    logits = np.log(world.relevance()) - np.log1p(-world.relevance())
    truth = {}
    for sigma in CONFIG.target_noise:
        scores = logits + rng.normal(0.0, sigma, logits.shape)
        truth[sigma] = world.online_reward(scores, d).value - logging_reward
    kept = [s for _, s in result.settings]
    assert kept == [s for s in CONFIG.target_noise if truth[s] > 0]
    np.testing.assert_allclose(result.online, [truth[s] for s in kept], rtol=1e-10)


def test_p_values_are_one_sided_paired_t_tests_per_trajectory(result):
    world = SimulatedWorld(n_users=600, n_items=60, seed=0)
    d = LogDiscount(cutoff=8)
    rng = np.random.default_rng(0)
    logits = np.log(world.relevance()) - np.log1p(-world.relevance())
    scores = logits + rng.normal(0.0, 0.0, logits.shape)
    log = world.log(PopularityPolicy(1.0), feed_length=8, discount=d, seed=1000).feed_log()
    for j, m in enumerate(CONFIG.clips):
        ours = logged_dcg(log, DeterministicRanker(scores), discount=d, clip=m)
        # the logging policy's own estimate: weight ε0 · min(m, 1/ε0), written out
        w = log.propensity * np.minimum(np.inf if m is None else m, 1 / log.propensity)
        theirs = log.per_session(log.reward * w)
        p = stats.ttest_rel(ours.per_user, theirs, alternative="greater").pvalue
        assert result.p_values["DCG"][0, j] == pytest.approx(p, rel=1e-8)
    assert np.array_equal(result.tpr("DCG"), (result.p_values["DCG"] < 0.01).mean(axis=0))


def test_reproduces_figure_1s_message_and_writes_the_report(result, tmp_path):
    # IPS (m > 1) detects more true improvements than none, and DCG at least as many as nDCG.
    assert result.tpr("DCG")[2] > result.tpr("DCG")[0]
    assert np.all(result.tpr("DCG") >= result.tpr("nDCG"))
    folder = write_report(result, tmp_path, plots=True)
    data = json.loads((folder / "sensitivity.json").read_text())
    assert data["clips"] == ["1", "4", "64", "∞"]
    assert data["DCG"]["tpr"] == result.tpr("DCG").tolist()
    assert (folder / "sensitivity.png").stat().st_size > 10_000
    assert "| ∞ |" in (folder / "sensitivity.md").read_text()


def test_command_prints_the_table_and_writes_the_report(capsys, tmp_path):
    from recpack_ope.cli import main

    assert (
        main(
            [
                "reproduce",
                "sensitivity",
                "--users",
                "300",
                "--items",
                "40",
                "--quiet",
                "--no-plots",
                "--output",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| m | TPR DCG" in out and "IPS helps" in out
    assert json.loads((tmp_path / "sensitivity.json").read_text())["config"]["n_users"] == 300
