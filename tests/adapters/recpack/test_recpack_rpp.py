"""RPP metrics in real RecPack pipelines, checked against the core on RecPack's own top-K ranks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from recpack.algorithms import EASE, KUNN, ItemKNN, Popularity
from recpack.pipelines import PipelineBuilder
from recpack.pipelines.hyperparameter_optimisation import GridSearchInfo
from recpack.scenarios import WeakGeneralization
from recpack.util import get_top_K_ranks
from recpack_ope.adapters.recpack import RecPackAdapter, RPPMetricK, preferences, summary

from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.rpp import rpp

pytestmark = pytest.mark.usefixtures("quiet_recpack")

ALGORITHMS = {
    "EASE": ({"l2": 200.0}, EASE),
    "KUNN": ({"Ku": 50, "Ki": 50}, KUNN),
    "ItemKNN": ({"K": 50}, ItemKNN),
    "Popularity": ({"K": 2000}, Popularity),
}


@pytest.fixture(scope="module")
def scenario():
    s = WeakGeneralization(0.5, validation=False, seed=0)
    s.split(load_interactions("ml-100k"))
    RecPackAdapter().register()
    return s


def build(scenario, algorithms, metrics=(("RPPK", [10, 100]), ("invRPPK", 100))):
    builder = PipelineBuilder()
    for name in algorithms:
        builder.add_algorithm(name, params=ALGORITHMS[name][0])
    for name, K in metrics:
        builder.add_metric(name, K=K)
    builder.set_data_from_scenario(scenario)
    p = builder.build()
    p.run()
    return p


@pytest.fixture(scope="module")
def pipeline(scenario):
    return build(scenario, list(ALGORITHMS))


@pytest.fixture(scope="module")
def recpack_top_k(scenario):
    """Each algorithm's top-K lists as RecPack's own get_top_K_ranks ranks them."""
    test_in = scenario.test_data_in
    out = {}
    for params, cls in ALGORITHMS.values():
        algorithm = cls(**params)
        algorithm.fit(scenario.full_training_data)
        x_pred = algorithm.predict(test_in)
        x_pred = sp.csr_matrix(x_pred - x_pred.multiply(test_in.binary_values))
        lists = {}
        for K in (10, 100):
            ranks = get_top_K_ranks(x_pred, K).tocoo()
            items = np.full((x_pred.shape[0], K), -1)
            items[ranks.row, ranks.data.astype(int) - 1] = ranks.col
            lists[K] = TopK(items)
        out[algorithm.identifier] = lists
    return out


@pytest.mark.parametrize(
    ("column", "K", "weighting"),
    [("RPPK_10", 10, "uniform"), ("RPPK_100", 100, "uniform"), ("invRPPK_100", 100, "inverse")],
)
def test_win_rates_equal_core_rpp_on_recpack_rankings(
    pipeline, scenario, recpack_top_k, column, K, weighting
):
    y_true = scenario.test_data_out.binary_values
    values = pipeline.get_metrics()[column]
    names = list(recpack_top_k)
    assert sorted(values.index) == sorted(names)
    pair = {
        (a, b): rpp(y_true, recpack_top_k[a][K], recpack_top_k[b][K], weighting=weighting).value
        for a, b in itertools.permutations(names, 2)
    }
    for a in names:
        expected = np.mean([pair[a, b] for b in names if b != a])  # Eq. 7 / (M − 1)
        assert values[a] == pytest.approx(expected, abs=1e-12)
    matrix = preferences(pipeline, column)
    assert list(matrix.names) == list(pipeline._metric_acc.acc)
    for a, b in itertools.combinations(names, 2):
        assert matrix.mean[matrix.index(a), matrix.index(b)] == pytest.approx(pair[a, b], abs=1e-12)
    assert matrix.win_rates().ordering("mean")[0] == values.idxmax()
    table = summary(pipeline, column)
    assert table.index[0] == values.idxmax() and (table["ci_low"] < table["value"]).all()


def test_pools_are_per_pipeline_and_lazy(pipeline, scenario):
    before = pipeline.get_metrics()["RPPK_100"].copy()
    two = build(scenario, ["EASE", "Popularity"], metrics=(("RPPK", 100),))
    values = two.get_metrics()["RPPK_100"]
    # With two algorithms, each win rate is their RPP: antisymmetric.
    assert values.iloc[0] == pytest.approx(-values.iloc[1], abs=1e-12) and values.iloc[0] != 0
    # The first pipeline's values did not change when the second one ran.
    assert pipeline.get_metrics()["RPPK_100"].equals(before)
    ease = [name for name in before.index if name.startswith("EASE")][0]
    assert values[ease] != pytest.approx(before[ease])  # a different pool gives a different value


def test_errors_name_the_problem(scenario):
    single = build(scenario, ["EASE"], metrics=(("RPPK", 10),))
    with pytest.raises(ValueError, match="only one model was evaluated"):
        single.get_metrics()
    builder = PipelineBuilder()
    builder.add_algorithm("EASE", optimisation_info=GridSearchInfo({"l2": [10.0, 100.0]}))
    builder.add_metric("RPPK", K=10)
    builder.set_optimisation_metric("RPPK", K=10)
    v = WeakGeneralization(0.5, validation=True, seed=1)
    v.split(load_interactions("ml-100k"))
    builder.set_data_from_scenario(v)
    with pytest.raises(ValueError, match="cannot be an optimisation metric"):
        builder.build().run()
    with pytest.raises(ValueError, match="K must be a positive integer"):
        RPPMetricK(K=0)


def test_not_rpp_column_is_refused(pipeline, scenario):
    p = build(scenario, ["EASE", "Popularity"], metrics=(("NDCGK", 10), ("RPPK", 10)))
    with pytest.raises(ValueError, match="'NDCGK_10' is not an RPP metric"):
        preferences(p, "NDCGK_10")
    with pytest.raises(ValueError, match="metric 'RPPK_5' is not in the pipeline"):
        preferences(p, "RPPK_5")
