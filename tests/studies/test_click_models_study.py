"""The click-model study: its exact truths against sampling and hand calculation, its records
against their definitions, and its command.

Plackett–Luce ranking probabilities against the empirical frequencies of sampled rankings;
policy values against Monte Carlo over sampled rankings and, for a near-deterministic policy,
the simulator's online reward of the argmax ranking; the exact expectation of an estimator
against the logging policy's own value (the on-policy mean of the clicks).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
from scipy import stats

from recpack_ope.inference.result import EstimateResult
from recpack_ope.logged.estimator_choice import FAMILY, choose_estimator
from recpack_ope.logged.plackett_luce import sample_rankings
from recpack_ope.logged.policies import PlackettLuceRanker
from recpack_ope.metrics.ranking import TopK
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.simulation.world import PopularityPolicy, SimulatedWorld
from recpack_ope.studies.click_models import (
    ESTIMATORS,
    ClickModelsConfig,
    RankingEstimator,
    all_rankings,
    expected_estimate,
    plackett_luce_probabilities,
    policy_value,
    run_click_models,
    write_report,
)
from recpack_ope.studies.registry import STUDIES


def test_all_rankings_are_the_distinct_permutations():
    rankings = all_rankings(5, 3)
    assert rankings.shape == (math.perm(5, 3), 3)
    assert len({tuple(r) for r in rankings}) == rankings.shape[0]
    assert all(len(set(r)) == 3 for r in rankings)


def test_plackett_luce_probabilities_match_sampled_frequencies():
    # 60 rankings, 200,000 draws: Pearson's chi-square on 59 degrees of freedom; p < 1e-4
    # would be a false alarm once in ten thousand runs.
    log_weights = np.log([3.0, 1.0, 0.5, 2.0, 0.2])
    rankings = all_rankings(5, 3)
    p = plackett_luce_probabilities(log_weights, rankings)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    draws = sample_rankings(np.exp(log_weights), 3, 200_000, np.random.default_rng(0))
    index = {tuple(r): j for j, r in enumerate(rankings)}
    counts = np.bincount([index[tuple(r)] for r in draws], minlength=rankings.shape[0])
    assert stats.chisquare(counts, p * counts.sum()).pvalue > 1e-4
    # one policy per context: each row is that context's
    both = plackett_luce_probabilities(np.stack([log_weights, -log_weights]), rankings)
    np.testing.assert_allclose(both[0], p, rtol=1e-12)
    np.testing.assert_allclose(both[1].sum(), 1.0, atol=1e-12)


@pytest.mark.parametrize("model", ["pbm", "cascade", "choice"])
def test_policy_value_matches_sampled_rankings_and_online_reward(model):
    world = SimulatedWorld(
        n_users=6, n_items=6, n_factors=2, base_logit=0.0, seed=2, click_model=model
    )
    view = LogDiscount(cutoff=3)
    # Distinct integer scores: scaled by 1000 they make the argmax ranking certain.
    scores = np.argsort(np.random.default_rng(1).random((6, 6)), axis=1) / 2.0
    value = policy_value(world, scores, 3, view)
    # Monte Carlo: 20,000 rankings per user; 4 standard errors per user.
    rng = np.random.default_rng(2)
    for u in range(6):
        draws = sample_rankings(np.exp(scores[u]), 3, 20_000, rng)
        clicks = world.expected_clicks(np.full(20_000, u), draws, view).sum(axis=1)
        assert abs(clicks.mean() - value[u]) < 4 * clicks.std() / np.sqrt(20_000)
    # A near-deterministic policy shows the argmax ranking: the simulator's online reward.
    top = TopK.from_scores(scores, 3)
    np.testing.assert_allclose(
        policy_value(world, 1e3 * scores, 3, view),
        world.online_reward(top, view).per_user,
        rtol=1e-9,
    )


def _on_policy(log, target, logging, world, view):
    """The mean clicks per session, unweighted: the logging policy's value on its own log."""
    return EstimateResult(
        name="on-policy",
        terms=np.bincount(log.session, weights=log.reward, minlength=log.n_sessions),
        exponents=(1,),
        user_ids=np.arange(log.n_sessions),
        n_excluded_users=0,
    )


@pytest.mark.parametrize("model", ["cascade", "choice"])
def test_expected_estimate_of_the_on_policy_mean_is_the_logging_value(model):
    world = SimulatedWorld(n_users=5, n_items=6, n_factors=2, seed=3, click_model=model)
    view = LogDiscount(cutoff=3)
    logged = world.log(PopularityPolicy(1.5), feed_length=3, discount=view)
    logging = PlackettLuceRanker(np.log(world.popularity), temperature=1.5, method="exact")
    on_policy = RankingEstimator("on-policy", _on_policy, None)
    got = expected_estimate(world, logged, on_policy, logging, logging)
    truth = policy_value(world, np.log(world.popularity) / 1.5, 3, view).mean()
    assert got == pytest.approx(truth, rel=1e-12)


@pytest.fixture(scope="module")
def result():
    config = ClickModelsConfig(worlds=("pbm", "choice"), n_seeds=1, n_replicates=5, n_users=20)
    return run_click_models(config, progress=False)


def test_records_follow_their_definitions(result):
    assert len(result.records) == 2 * len(ESTIMATORS)
    for r in result.records:
        assert r["bias_se"] == pytest.approx((r["mean"] - r["truth"]) / r["standard_error"])
        assert r["rel_bias"] == pytest.approx(r["mean"] / r["truth"] - 1)
        assert r["rel_rmse"] >= abs(r["rel_bias"]) - 1e-12  # RMSE² = bias² + variance
        assert r["coverage"] in {k / 5 for k in range(6)}
    by_key = {(r["world"], r["estimator"]): r for r in result.records}
    # Exact expectations: unbiased where the click model holds, independent IPS biased under
    # the choice model, and none for the data-driven adaptive IPS.
    for e in ESTIMATORS:
        for world in ("pbm", "choice"):
            exact = by_key[(world, e.name)]["exact_rel_bias"]
            if e.unbiased_under is None:
                assert math.isnan(exact)
            elif world in e.unbiased_under:
                assert abs(exact) < 1e-9
    assert by_key[("choice", "independent IPS")]["exact_rel_bias"] > 0.05
    lines = result.table().splitlines()
    assert len(lines) == 2 + 2 * len(ESTIMATORS)
    assert lines[2].startswith("| standard IPS | pbm | yes | ")
    assert "| adaptive IPS (auto) | pbm | — | " in result.table()


@pytest.mark.filterwarnings("ignore::recpack_ope.inference.diagnostics.ReliabilityWarning")
def test_slope_record_is_choose_estimators_pick_on_each_log(result):
    # The world and logs of the fixture rebuilt, and choose_estimator run on every log.
    world = SimulatedWorld(
        n_users=20, n_items=8, n_factors=2, base_logit=0.0, seed=0, click_model="pbm"
    )
    view = LogDiscount(cutoff=3)
    relevance = world.relevance()
    scores = np.log(relevance) - np.log1p(-relevance)
    target = PlackettLuceRanker(scores, method="exact")
    logging = PlackettLuceRanker(np.log(world.popularity), method="exact")
    truth = policy_value(world, scores, 3, view).mean()
    picks, errors = [], {name: [] for name in (*FAMILY, "chosen")}
    for f in range(5):
        log = world.log(PopularityPolicy(1.0), feed_length=3, discount=view, seed=1 + f)
        choice = choose_estimator(log.feed_log(), target, logging=logging)
        picks.append(choice.chosen_name)
        for name in FAMILY:
            errors[name].append(choice.row(name).value - truth)
        errors["chosen"].append(choice.chosen.value - truth)
    rmse = {k: np.sqrt(np.mean(np.square(v))) for k, v in errors.items()}
    record = next(
        r for r in result.records if r["estimator"] == "SLOPE choice" and r["world"] == "pbm"
    )
    assert record["picked"] == {name: picks.count(name) for name in FAMILY}
    assert record["rmse_ratio"] == pytest.approx(
        rmse["chosen"] / min(rmse[k] for k in FAMILY), rel=1e-9
    )
    lines = result.choice_table().splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| pbm", "| choice", "| all"]
    shares = [float(cell.rstrip(" |%")) for cell in lines[2].split(" | ")[2:]]
    assert shares == pytest.approx([100 * picks.count(name) / 5 for name in FAMILY], abs=0.5)


def test_report_and_command(result, tmp_path):
    write_report(result, tmp_path, plots=False)
    saved = json.loads((tmp_path / "click_models.json").read_text())
    assert len(saved["records"]) == len(result.records)
    assert result.table() in (tmp_path / "click_models.md").read_text()
    study = STUDIES["click-models"]
    parser = argparse.ArgumentParser()
    study.add_arguments(parser, tmp_path)
    config = study.configure(study.load(), parser.parse_args(["--quick", "--worlds", "choice"]))
    assert (config.n_seeds, config.n_replicates, config.worlds) == (3, 20, ("choice",))
    assert config.estimators is None
    chosen = parser.parse_args(["--estimators", "cascade IPS,SLOPE choice"])
    config = study.configure(study.load(), chosen)
    assert [e.name for e in config.selected] == ["cascade IPS", "SLOPE choice"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(worlds=("pbm", "dbn")), r"worlds must be a non-empty subset of \('pbm'"),
        (dict(estimators=("DM",)), r"estimators must be a non-empty subset of .* got \('DM',\)"),
        (dict(n_replicates=1), "n_replicates must be >= 2"),
        (dict(n_items=12, feed_length=5), "95040 rankings to enumerate"),
        (dict(n_items=3, feed_length=4), "feed_length=4 exceeds the number of items"),
        (dict(level=1.5), "level"),
    ],
)
def test_config_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClickModelsConfig(**kwargs)
