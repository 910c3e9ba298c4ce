"""The reliability study: its all-user rescaling by hand, its per-run records recomputed from
the package's estimators outside the study, and its report files."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, dr_dcg, ips_dcg, snips_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.reward import ScoreCalibration
from recpack_ope.simulation import PopularityPolicy, SimulatedWorld
from recpack_ope.simulation.baselines import EASE
from recpack_ope.studies.reliability import (
    ReliabilityConfig,
    configurations,
    model_pool,
    over_all_users,
    run_reliability,
    write_report,
)


def test_over_all_users_pads_non_clickers_with_zero_by_hand():
    y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 0, 0], [0, 2, 0], [0, 0, 0]]))
    scores = np.array([[0.9, 0.1, 0.5], [0, 0, 0], [0.1, 0.9, 0.0], [0, 0, 0]])
    p = np.array([0.5, 0.25, 0.1])
    d = LogDiscount(2)
    ips = ips_dcg(y, scores, discount=d, propensity=p)
    padded = over_all_users(ips, 4)
    per_user = np.array([2 + 10 * d(2)[()], 0, 8, 0])  # c/p · δ: user 0 items 0, 2; user 2 item 1
    assert padded.value == pytest.approx(per_user.mean(), rel=1e-12)
    assert padded.standard_error == pytest.approx(per_user.std(ddof=1) / 2, rel=1e-12)
    sn = snips_dcg(y, scores, discount=d, propensity=p)
    assert over_all_users(sn, 4).value == pytest.approx(sn.value * 2 / 4, rel=1e-12)


def test_records_equal_an_independent_evaluation():
    config = ReliabilityConfig(
        sizes=((500, 120),), worlds=("pbm",), n_seeds=2, feed_length=20, train_feeds=3
    )
    result = run_reliability(config, progress=False)
    assert len(result.runs) == 2 * len(configurations(config.fixed_clip))
    assert len(result.rows) == len(configurations(config.fixed_clip))

    # Rebuild seed 1 of "IPS-DCG (true p, unclipped)" with the estimators directly.
    world = SimulatedWorld(n_users=500, n_items=120, seed=0)
    policy = PopularityPolicy(1.0)
    train = world.log(policy, feed_length=20, n_feeds=3, seed=1).clicks.sign()
    discount = LogDiscount(10)
    rankings = [TopK.from_scores(m.fit(train).predict(train), 10) for _, m in model_pool()]
    online = np.array([world.online_reward(r, discount).value for r in rankings])
    log = world.log(policy, feed_length=20, n_feeds=1, seed=101)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ests = [
            ips_dcg(log.clicks, r, discount=discount, propensity=log.propensity_model())
            for r in rankings
        ]
    values = np.array([e.value * e.n_users / 500 for e in ests])
    record = next(
        r
        for r in result.runs
        if r["seed"] == 1 and r["configuration"] == "IPS-DCG (true p, unclipped)"
    )
    assert record["kendall"] == pytest.approx(stats.kendalltau(online, values)[0], rel=1e-12)
    assert record["regret"] == pytest.approx(
        1 - online[np.argmax(values)] / online.max(), abs=1e-12
    )
    assert record["rel_bias"] == pytest.approx(np.mean((values - online) / online), rel=1e-9)
    assert record["min_ess_ratio"] == pytest.approx(
        min(e.diagnostics.ess_ratio for e in ests), rel=1e-12
    )
    row = next(r for r in result.rows if r["configuration"] == "IPS-DCG (true p, unclipped)")
    both = [r for r in result.runs if r["configuration"] == "IPS-DCG (true p, unclipped)"]
    assert row["kendall"] == pytest.approx(np.mean([r["kendall"] for r in both]), rel=1e-12)
    assert row["rel_rmse"] == pytest.approx(
        np.sqrt(np.mean([r["rel_mse"] for r in both])), rel=1e-12
    )
    # The unweighted metrics have no diagnostics and estimate no interval of the truth for nDCG.
    ndcg_row = next(r for r in result.rows if r["configuration"] == "nDCG")
    assert np.isnan(ndcg_row["coverage"]) and np.isnan(ndcg_row["min_ess_ratio"])

    # DR-DCG (power-law p, m=100) of seed 1, rebuilt: EASE(l2=200) calibrated on the training
    # clicks with the power-law propensities, the held-out impressions, every user served.
    propensity = PowerLawPropensity().fit(train)
    scores = EASE(l2=200.0).fit(train).predict(train)
    model = ScoreCalibration().fit(scores, train, propensity=propensity).reward_model(scores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dr = np.array(
            [
                dr_dcg(
                    log.clicks,
                    r,
                    discount=discount,
                    reward_model=model,
                    propensity=propensity,
                    impressions=log.impressions(),
                    clip=100.0,
                ).value
                for r in rankings
            ]
        )
    record = next(
        r
        for r in result.runs
        if r["seed"] == 1 and r["configuration"] == "DR-DCG (power-law p, m=100)"
    )
    assert record["kendall"] == pytest.approx(stats.kendalltau(online, dr)[0], rel=1e-12)
    assert record["rel_bias"] == pytest.approx(np.mean((dr - online) / online), rel=1e-9)
    # The paired comparison of the two best models with the true propensities, by hand.
    best, second = np.argsort(-online)[:2]
    kw = dict(
        discount=discount,
        propensity=log.propensity_matrix(log.clicks + log.impressions()),
        impressions=log.impressions(),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = (
            ips_dcg(log.clicks, rankings[best], **kw),
            ips_dcg(log.clicks, rankings[second], **kw),
        )
    cv = a.compare(b, control_variate=True)
    lo, hi = cv.confidence_interval
    comparison = next(c for c in result.comparisons if c["seed"] == 1 and c["source"] == "true")
    assert comparison["cv_width"] == pytest.approx(hi - lo, rel=1e-12)
    assert comparison["variance_removed"] == pytest.approx(cv.variance_reduction, rel=1e-12)
    assert comparison["cv_covered"] == (lo <= online[best] - online[second] <= hi)


def test_report_files(tmp_path):
    config = ReliabilityConfig(
        sizes=((300, 80),),
        worlds=("cascade", "personalised"),
        n_seeds=1,
        feed_length=10,
        train_feeds=2,
    )
    result = run_reliability(config, progress=False)
    folder = write_report(result, tmp_path)
    with open(folder / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * len(configurations(config.fixed_clip))
    assert {r["world"] for r in rows} == {"cascade", "personalised"}
    text = (folder / "summary.md").read_text()
    assert "## cascade world, 300 users × 80 items" in text and "Goal" in text
    assert "Doubly robust against IPS" in text and "Δ-OPE control variate" in text
    assert (folder / "comparisons.csv").exists()
    assert (folder / "kendall.png").exists() and (folder / "ess_vs_kendall.png").exists()


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(worlds=("mars",)), "worlds must be a non-empty subset"),
        (dict(n_seeds=0), "n_seeds must be a positive integer"),
        (dict(sizes=((0, 10),)), "users of a world size must be a positive integer"),
    ],
)
def test_bad_configuration_is_named(bad, message):
    with pytest.raises(ValueError, match=message):
        ReliabilityConfig(**bad)
