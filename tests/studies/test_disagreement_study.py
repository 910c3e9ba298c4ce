import json

import numpy as np
import pytest

from recpack_ope.logged.pairwise_disagreement import (
    counterfactual_disagreement,
    pairwise_disagreement,
)
from recpack_ope.studies.disagreement import (
    BannerStudyConfig,
    run_banner_study,
    simulate_banners,
    write_report,
)

CONFIG = BannerStudyConfig(n_products=300, n_banners=8000, n_shuffled=8000, max_size=8, n_models=12)


@pytest.fixture(scope="module")
def result():
    return run_banner_study(CONFIG, progress=False)


def _logs():
    rng = np.random.default_rng(CONFIG.seed)
    quality = rng.normal(0.0, 1.0, CONFIG.n_products)
    logging = quality + rng.normal(0.0, 1.0, CONFIG.n_products)
    return (
        quality,
        logging,
        simulate_banners(CONFIG, False, 1, quality, logging),
        simulate_banners(CONFIG, True, 2, quality, logging),
    )


def test_banners_follow_the_logging_policy_or_are_shuffled():
    _, logging, live, shuffled = _logs()

    def by_rank(log):  # mean logging score by rank, in banners of 8 (same composition)
        full = np.repeat(np.diff(log.indptr) == 8, np.diff(log.indptr))
        return np.array([logging[log.item[full & (log.rank == r)]].mean() for r in (1, 2, 3)])

    assert np.all(np.diff(by_rank(live)) < -0.1)  # PL puts high logging scores first
    top, third = by_rank(shuffled)[0], by_rank(shuffled)[2]
    assert abs(top - third) < 0.1  # shuffled: no order (SE of each mean ≈ 0.03)
    sizes = np.diff(live.indptr)
    assert sizes.min() == 2 and sizes.max() == 8
    # weights are normalised over 30 candidates: the displayed ones sum to less than 1
    assert np.all(live.per_session(live.logging_weight) < 1)


def test_values_equal_the_metric_functions_and_figure_3s_message(result, tmp_path):
    quality, logging, live, shuffled = _logs()
    rng = np.random.default_rng(CONFIG.seed)
    rng.normal(size=(2, CONFIG.n_products))  # the draws of quality and logging, as in the study
    copy, noise = rng.uniform(0, 1), rng.uniform(0.2, 1.0)
    score = (1 - copy) * (quality + noise * rng.normal(0, 1, CONFIG.n_products)) + copy * logging
    assert result.models[0] == pytest.approx({"copy": copy, "noise": noise})
    assert result.reference[0] == pytest.approx(
        pairwise_disagreement(shuffled, score[shuffled.item]).value, rel=1e-12
    )
    assert result.classic[0] == pytest.approx(
        pairwise_disagreement(live, score[live.item]).value, rel=1e-12
    )
    assert result.counterfactual[0] == pytest.approx(
        counterfactual_disagreement(live, score[live.item]).value, rel=1e-12
    )
    # Gilotte Fig. 3: the counterfactual metric tracks the shuffled reference, the classic not.
    r_classic, r_counterfactual = (
        result.correlation("classic")[0],
        result.correlation("counterfactual")[0],
    )
    assert r_counterfactual > 0.8 and r_counterfactual - r_classic > 0.3
    folder = write_report(result, tmp_path)
    data = json.loads((folder / "disagreement.json").read_text())
    assert data["pearson"]["counterfactual"][0] == pytest.approx(r_counterfactual)
    assert (folder / "disagreement.png").stat().st_size > 10_000


def test_command_prints_the_correlations_and_writes_the_report(capsys, tmp_path):
    from recpack_ope.cli import main

    assert (
        main(
            [
                "reproduce",
                "disagreement",
                "--banners",
                "2000",
                "--shuffled",
                "2000",
                "--models",
                "5",
                "--quiet",
                "--no-plots",
                "--output",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert "| counterfactual disagreement |" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "disagreement.json").read_text())["counterfactual"]) == 5
