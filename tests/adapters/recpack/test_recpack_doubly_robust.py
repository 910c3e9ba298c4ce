"""DRDCGK, the Δ-OPE comparison and tied-with-best in a real RecPack pipeline (legacy env).

Values are checked against the core called directly on RecPack's rankings, and the tied set
against the core's ``tied_with_best`` on the same per-user values.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from recpack.algorithms import EASE
from recpack.pipelines import METRIC_REGISTRY, PipelineBuilder
from recpack.scenarios import WeakGeneralization
from recpack_ope.adapters.recpack import (
    RecPackAdapter,
    compare,
    metric_results,
    recpack_ranking,
    summary,
)

from recpack_ope.inference.significance import tied_with_best
from recpack_ope.inference.systems import SystemScores
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.metrics.doubly_robust import dr_dcg
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.propensity.models import PowerLawPropensity
from recpack_ope.reward.calibration import ScoreCalibration

pytestmark = pytest.mark.usefixtures("quiet_recpack")


@pytest.fixture(scope="module")
def run():
    scenario = WeakGeneralization(0.5, validation=False, seed=0)
    scenario.split(load_interactions("ml-100k"))
    train = scenario.full_training_data
    propensity = PowerLawPropensity().fit(train.binary_values)
    reward_algorithm = EASE(l2=300.0)
    reward_algorithm.fit(train)
    scores = sp.csr_matrix(reward_algorithm.predict(train))
    calibration = ScoreCalibration().fit(scores, train.binary_values, propensity=propensity)
    reward_model = calibration.reward_model(scores)
    # Impressions stand-in for the test: every held-out item and the top-20 of popularity
    # were "shown" (the data has no impression log); only the plumbing is tested here.
    y_true = scenario.test_data_out.binary_values
    popular = np.argsort(-np.asarray(train.binary_values.sum(axis=0)).ravel())[:20]
    users = np.flatnonzero(np.diff(y_true.indptr) > 0)
    shown = sp.csr_matrix(
        (np.ones(users.size * 20), (np.repeat(users, 20), np.tile(popular, users.size))),
        shape=y_true.shape,
    )
    impressions = ((shown + y_true) > 0).astype(float)
    RecPackAdapter(propensity=propensity, reward_model=reward_model).register(prefix="DR")
    RecPackAdapter(
        propensity=propensity, reward_model=reward_model, impressions=impressions
    ).register(prefix="Shown")
    builder = PipelineBuilder()
    builder.add_algorithm("EASE", params={"l2": 200.0})
    builder.add_algorithm("ItemKNN", params={"K": 50})
    builder.add_algorithm("Popularity", params={"K": 1682})
    for name in ("DRDRDCGK", "DRIPSDCGK", "ShownIPSDCGK", "ShownDRDCGK"):
        builder.add_metric(name, K=10)
    builder.set_data_from_scenario(scenario)
    pipeline = builder.build()
    pipeline.run()
    return dict(
        pipeline=pipeline,
        scenario=scenario,
        propensity=propensity,
        reward_model=reward_model,
        impressions=impressions,
    )


def _ease_ranking(run):
    """EASE(l2=200) of the pipeline, trained and ranked outside it as RecPack does."""
    scenario = run["scenario"]
    algorithm = EASE(l2=200.0)
    algorithm.fit(scenario.full_training_data)
    X = sp.csr_matrix(algorithm.predict(scenario.test_data_in))
    return recpack_ranking(X - X.multiply(scenario.test_data_in.binary_values), 10)


@pytest.mark.parametrize("prefix, with_impressions", [("DR", False), ("Shown", True)])
def test_dr_metric_is_the_cores_dr_dcg_on_recpacks_rankings(run, prefix, with_impressions):
    pipeline = run["pipeline"]
    ease = next(a for a in pipeline.get_metrics().index if a.startswith("EASE"))
    result = metric_results(pipeline, f"{prefix}DRDCGK_10")[ease]
    core = dr_dcg(
        run["scenario"].test_data_out.binary_values,
        _ease_ranking(run),
        discount=LogDiscount(10),
        reward_model=run["reward_model"],
        propensity=run["propensity"],
        impressions=run["impressions"] if with_impressions else None,
        clip=100.0,
    )
    assert result.name == "DR-DCG@10"
    np.testing.assert_allclose(result.per_user, core.per_user, rtol=1e-9)
    np.testing.assert_array_equal(result.user_ids, core.user_ids)


def test_dr_metric_without_a_reward_model_says_why():
    RecPackAdapter(propensity=[0.5, 1.0]).register(prefix="NoModel")
    with pytest.raises(ValueError, match="NoModelDRDCGK needs reward_model.*use NoModelPlainDCGK"):
        METRIC_REGISTRY.get("NoModelDRDCGK")(K=10)
    with pytest.raises(TypeError, match="reward_model must have a predict"):
        RecPackAdapter(propensity=[0.5, 1.0], reward_model=object())


def test_control_variate_compare_in_the_pipeline(run):
    pipeline = run["pipeline"]
    names = list(pipeline.get_metrics().index)
    ease, pop = (next(a for a in names if a.startswith(f)) for f in ("EASE", "Popularity"))
    results = metric_results(pipeline, "ShownIPSDCGK_10")
    direct = results[ease].compare(results[pop], control_variate=True)
    cv = compare(pipeline, ease, pop, "ShownIPSDCGK_10", control_variate=True)
    assert (cv.difference, cv.standard_error) == (direct.difference, direct.standard_error)
    assert cv.control_coefficient is not None and 0 <= cv.variance_reduction < 1
    with pytest.raises(ValueError, match="control_variate=True needs a control"):
        compare(pipeline, ease, pop, "DRIPSDCGK_10", control_variate=True)


def test_summary_marks_the_algorithms_tied_with_the_best(run):
    pipeline = run["pipeline"]
    table = summary(pipeline, "DRIPSDCGK_10")
    results = metric_results(pipeline, "DRIPSDCGK_10")
    tied = tied_with_best(SystemScores.from_estimates(results), alpha=0.05)
    assert table.index[0] == tied.best and bool(table.loc[tied.best, "tied_with_best"])
    assert {a for a in table.index if table.loc[a, "tied_with_best"]} == set(tied.tied)
    for name, p in zip(tied.names, tied.p_value, strict=True):
        assert table.loc[name, "p_vs_best"] == p
