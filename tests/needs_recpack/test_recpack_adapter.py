"""The RecPack adapter in real RecPack pipelines, checked against RecPack's own metrics.

Needs RecPack (legacy environment); the modern nox session excludes this folder explicitly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hyperopt import hp
from recpack.algorithms import EASE
from recpack.metrics import DCGK
from recpack.pipelines import METRIC_REGISTRY, PipelineBuilder
from recpack.pipelines.hyperparameter_optimisation import GridSearchInfo, HyperoptInfo
from recpack.scenarios import WeakGeneralization
from recpack.util import get_top_K_ranks
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, TopK, dcg
from recpack_ope.adapters.recpack import (
    OPEMetricK,
    RecPackAdapter,
    compare,
    metric_results,
    recpack_ranking,
    summary,
)
from recpack_ope.adapters.recpack_datasets import load_interactions

OURS = ("UnbiasedDCGK", "SNUnbiasedDCGK", "IPSNDCGK", "PostNormalisedDCGK")

pytestmark = pytest.mark.usefixtures("quiet_recpack")


@pytest.fixture(scope="module")
def ml100k():
    return load_interactions("ml-100k")


@pytest.fixture(scope="module")
def scenario(ml100k):
    s = WeakGeneralization(0.5, validation=False, seed=0)
    s.split(ml100k)
    return s


@pytest.fixture(scope="module")
def pipeline(scenario):
    """EASE, KUNN, ItemKNN and Popularity (ties in its scores) with RecPack's and our metrics."""
    RecPackAdapter().register()
    RecPackAdapter(propensity=PowerLawPropensity(), clip=500).fit(scenario.full_training_data).register(
        prefix="PowerLaw"
    )
    builder = PipelineBuilder()
    builder.add_algorithm("EASE", params={"l2": 200.0})
    builder.add_algorithm("KUNN", params={"Ku": 50, "Ki": 50})
    builder.add_algorithm("ItemKNN", params={"K": 50})
    builder.add_algorithm("Popularity", params={"K": scenario.full_training_data.shape[1]})
    for name in ("DCGK", "NDCGK", *OURS, "PowerLawUnbiasedDCGK", "PowerLawStratifiedNDCGK"):
        builder.add_metric(name, K=[10, 100])
    builder.set_data_from_scenario(scenario)
    p = builder.build()
    p.run()
    return p


def _metric(pipeline, algorithm, name):
    return pipeline._metric_acc.acc[algorithm][name]


def ideal_dcg_binary(y_true: sp.csr_matrix, K: int) -> np.ndarray:
    """iDCG@K of binary held-out rows by the closed form Σ_{j ≤ min(n_u, K)} 1/log2(j+1)."""
    n = np.diff(sp.csr_matrix(y_true).indptr)
    table = np.concatenate([[0.0], np.cumsum(1 / np.log2(np.arange(2, K + 2)))])
    return table[np.minimum(n, K)]


@pytest.mark.parametrize("K", [10, 100])
def test_uniform_metrics_equal_recpack_for_every_algorithm(pipeline, scenario, K):
    table = pipeline.get_metrics()
    assert len(table) == 4
    y_true = scenario.test_data_out.binary_values
    evaluated = np.flatnonzero(np.diff(y_true.indptr) > 0)
    for algorithm in table.index:
        recpack_dcg = _metric(pipeline, algorithm, f"DCGK_{K}")
        recpack_ndcg = _metric(pipeline, algorithm, f"NDCGK_{K}")
        ours = {name: _metric(pipeline, algorithm, f"{name}_{K}") for name in OURS}
        # p ≡ 1: unbiased DCG is DCG, self-normalisation with equal weights changes nothing
        for name in ("UnbiasedDCGK", "SNUnbiasedDCGK"):
            assert ours[name].value == pytest.approx(recpack_dcg.value, abs=1e-12), (algorithm, name)
        assert ours["IPSNDCGK"].value == pytest.approx(recpack_ndcg.value, abs=1e-12), algorithm
        # per user too, including Popularity's tied scores
        for name, theirs in (("UnbiasedDCGK", recpack_dcg), ("IPSNDCGK", recpack_ndcg)):
            r_ours, r_theirs = ours[name].results, theirs.results
            assert r_ours["user_id"].tolist() == r_theirs["user_id"].tolist() == evaluated.tolist()
            np.testing.assert_allclose(r_ours["score"], r_theirs["score"], rtol=0, atol=1e-12)
        # pnDCG = mean of RecPack's per-user DCG over mean of independently computed iDCG
        expected = recpack_dcg.results["score"].mean() / ideal_dcg_binary(y_true[evaluated], K).mean()
        assert ours["PostNormalisedDCGK"].value == pytest.approx(expected, abs=1e-12), algorithm
        for metric in ours.values():
            assert metric.num_users == recpack_dcg.num_users == evaluated.size
            assert len(metric.results) == evaluated.size
            assert metric.results["score"].mean() == pytest.approx(metric.value, rel=1e-12)


def test_popularity_ties_are_ranked_as_recpack_ranks_them(pipeline, scenario):
    pop = next(a for a in pipeline.get_metrics().index if a.startswith("Popularity"))
    y_pred = scenario.full_training_data.binary_values.sum(axis=0)  # popularity has tied counts
    assert len(np.unique(np.asarray(y_pred))) < y_pred.shape[1]
    ours = _metric(pipeline, pop, "UnbiasedDCGK_100").results["score"].to_numpy()
    theirs = _metric(pipeline, pop, "DCGK_100").results["score"].to_numpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_recpack_ranking_matches_get_top_k_ranks_with_and_without_ties():
    rng = np.random.default_rng(3)
    dense = rng.integers(0, 6, size=(40, 30)).astype(float)  # many ties
    dense[::2] = rng.random((20, 30))  # tie-free rows
    dense[dense == 0] = 0  # unstored below
    y_pred = sp.csr_matrix(dense)
    for K in (1, 5, 30):
        ours = recpack_ranking(y_pred, K).items
        ranks = get_top_K_ranks(y_pred, K).tocoo()
        expected = np.full((40, min(K, 30)), -1)
        expected[ranks.row, ranks.data - 1] = ranks.col
        np.testing.assert_array_equal(ours, expected)
        # tie-free rows: the core's vectorised ranking, unchanged
        np.testing.assert_array_equal(ours[::2], TopK.from_scores(y_pred, K).items[::2])


def test_metrics_on_the_same_predictions_rank_them_once():
    from recpack_ope.adapters import recpack as module

    y_pred = sp.csr_matrix(np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]]))
    first = module._LAST.get(y_pred, 2)
    assert module._LAST.get(y_pred, 2) is first  # reused by the next metric
    assert module._LAST.get(y_pred, 1) is not first  # another K
    y_pred.data[0] = 0.0  # edited in place: ranked again, never served stale
    np.testing.assert_array_equal(module._LAST.get(y_pred, 2).items, [[2, 1], [1, 2]])
    copy = y_pred.copy()  # equal content, another object
    assert module._LAST.get(copy, 2) is not module._LAST.get(y_pred, 2)


def test_power_law_weights_land_on_recpack_item_indices(pipeline, scenario):
    """IPS-DCG by loops over RecPack's own top-K ranks and the power-law vector by item index."""
    adapter = METRIC_REGISTRY.get("PowerLawUnbiasedDCGK").adapter
    p = adapter.propensity.propensity_
    assert p.shape == (scenario.full_training_data.shape[1],)
    counts = np.asarray(scenario.full_training_data.binary_values.sum(axis=0)).ravel()
    seen = counts > 0
    # Eq. 7: more popular items get larger propensities
    assert stats.spearmanr(counts[seen], p[seen]).statistic > 0.99
    y_true = scenario.test_data_out.binary_values
    ease = next(a for a in pipeline.get_metrics().index if a.startswith("EASE"))
    top = _metric(pipeline, ease, "DCGK_100").y_pred_top_K_  # RecPack's ranks, users renumbered
    users = _metric(pipeline, ease, "DCGK_100").user_id_map_
    expected = []
    for row, u in enumerate(users):
        ranks = top[row].tocoo()
        expected.append(
            sum(
                min(500.0, 1 / p[i]) / math.log2(r + 1)
                for i, r in zip(ranks.col, ranks.data, strict=True)
                if y_true[u, i]
            )
        )
    ours = _metric(pipeline, ease, "PowerLawUnbiasedDCGK_100")
    np.testing.assert_allclose(ours.results["score"], expected, rtol=1e-12)
    assert ours.value == pytest.approx(np.mean(expected), rel=1e-12)


def test_stratified_ndcg_recombines_recpack_ranks_per_propensity_stratum(pipeline, scenario):
    """Σ_s P(s)·nDCG_s by loops over RecPack's own top-K ranks, strata by pandas.cut."""
    import pandas as pd

    p = METRIC_REGISTRY.get("PowerLawStratifiedNDCGK").adapter.propensity.propensity_
    y_true = sp.csr_matrix(scenario.test_data_out.binary_values)
    users, items = y_true.nonzero()
    stratum = pd.cut(p[items], bins=2, labels=False)
    K = 100
    algorithms = list(pipeline.get_metrics().index)
    for algorithm in algorithms:
        reference = _metric(pipeline, algorithm, "DCGK_100")
        rank_of = {}
        for row, u in enumerate(reference.user_id_map_):
            ranks = reference.y_pred_top_K_[row].tocoo()
            rank_of[u] = dict(zip(ranks.col, ranks.data, strict=True))
        expected = 0.0
        for s in range(2):
            per_user = {}
            for u, i in zip(users[stratum == s], items[stratum == s], strict=True):
                per_user.setdefault(u, []).append(i)
            values = []
            for u, held in per_user.items():
                dcg_u = sum(1 / math.log2(rank_of[u][i] + 1) for i in held if i in rank_of[u])
                idcg_u = sum(1 / math.log2(j + 1) for j in range(1, min(len(held), K) + 1))
                values.append(dcg_u / idcg_u)
            expected += (stratum == s).mean() * np.mean(values)
        ours = _metric(pipeline, algorithm, "PowerLawStratifiedNDCGK_100")
        assert ours.value == pytest.approx(expected, abs=1e-12)
        assert ours.results["score"].mean() == pytest.approx(expected, abs=1e-12)
    paired = compare(pipeline, algorithms[0], algorithms[1], "PowerLawStratifiedNDCGK_100")
    assert paired.n_users == _metric(pipeline, algorithms[0], "DCGK_100").num_users
    assert summary(pipeline, "PowerLawStratifiedNDCGK_100").shape[0] == len(algorithms)


def test_stratified_metric_needs_propensities():
    assert "StratifiedNDCGK" not in RecPackAdapter().register(prefix="Plain")
    with pytest.raises(ValueError, match="builds strata from propensities; the adapter has none"):
        RecPackAdapter().evaluate("StratifiedNDCGK", sp.csr_matrix([[1.0]]), sp.csr_matrix([[1.0]]), 1)


def test_propensities_keyed_by_raw_item_id_are_mapped_to_recpack_indices():
    import pandas as pd

    mapping = pd.DataFrame({"movieId": [50, 7, 300], "iid": [2, 0, 1]})
    raw = {7: 0.1, 300: 0.2, 50: 0.5, 999: 0.9}  # 999 is not in the data: ignored
    adapter = RecPackAdapter(propensity=raw, item_id_mapping=mapping)
    np.testing.assert_array_equal(adapter.propensity.propensity_, [0.1, 0.2, 0.5])
    # evaluated on RecPack indices: user 0 holds out item 2 (raw 50, p = 0.5) at rank 1
    y_true = sp.csr_matrix(np.array([[0, 0, 1.0], [1.0, 0, 0]]))
    y_pred = sp.csr_matrix(np.array([[0.1, 0.2, 0.9], [0.3, 0.5, 0.0]]))
    result = adapter.evaluate("UnbiasedDCGK", y_true, y_pred, K=2)
    np.testing.assert_allclose(result.per_user, [1 / 0.5, (1 / 0.1) / math.log2(3)])
    with pytest.raises(ValueError, match="raw item id 300"):
        RecPackAdapter(propensity={7: 0.1, 50: 0.5}, item_id_mapping=mapping)
    with pytest.raises(ValueError, match="item_id_mapping"):
        RecPackAdapter(propensity=raw)
    with pytest.raises(ValueError, match="item 1"):
        RecPackAdapter(propensity=[0.5, 1.5])  # outside (0, 1], named at construction


def test_register_twice_rebinds_and_refuses_foreign_names(scenario):
    first = RecPackAdapter().register(prefix="Twice")
    second = RecPackAdapter(clip=3.0).register(prefix="Twice")
    assert set(first) == set(second) == {f"Twice{n}" for n in (*OURS, "RPPK", "dcgRPPK", "invRPPK")}
    assert METRIC_REGISTRY.get("TwiceUnbiasedDCGK") is second["TwiceUnbiasedDCGK"]
    assert METRIC_REGISTRY.get("TwiceUnbiasedDCGK").adapter.clip == 3.0
    metric = METRIC_REGISTRY.get("TwiceUnbiasedDCGK")(K=10)
    assert isinstance(metric, OPEMetricK) and metric.name == "TwiceUnbiasedDCGK_10"

    # a reloaded adapter module (a notebook's importlib.reload) still recognises its classes
    import importlib

    from recpack_ope.adapters import recpack as module

    importlib.reload(module).RecPackAdapter().register(prefix="Twice")

    METRIC_REGISTRY.register("ForeignUnbiasedDCGK", DCGK)
    try:
        with pytest.raises(ValueError, match="'ForeignUnbiasedDCGK' that is not recpack-ope's"):
            RecPackAdapter().register(prefix="Foreign")
    finally:
        del METRIC_REGISTRY.registered["ForeignUnbiasedDCGK"]
    with pytest.raises(ValueError, match="not fitted.*adapter.fit"):
        RecPackAdapter(propensity=PowerLawPropensity()).register(prefix="Unfitted")
    with pytest.raises(ValueError, match="prefix"):
        RecPackAdapter().register(prefix="no spaces")


def test_metric_contract_errors():
    RecPackAdapter().register()
    metric = METRIC_REGISTRY.get("UnbiasedDCGK")(K=5)
    with pytest.raises(AssertionError, match="Shape mismatch"):
        metric.calculate(sp.csr_matrix((3, 4)), sp.csr_matrix((3, 5)))
    with pytest.raises(ValueError, match="K must be a positive integer"):
        METRIC_REGISTRY.get("UnbiasedDCGK")(K=0)
    y_pred = sp.csr_matrix(np.array([[np.nan, 1.0], [0.5, 0.2]]))
    with pytest.raises(ValueError, match="NaN at \\(user 0, item 0\\)"):
        metric.calculate(sp.csr_matrix(np.eye(2)), y_pred)


def test_compare_is_the_paired_t_test_over_recpack_users(pipeline):
    table = pipeline.get_metrics()
    ease, kunn = (next(a for a in table.index if a.startswith(f)) for f in ("EASE", "KUNN"))
    c = compare(pipeline, ease, kunn, "UnbiasedDCGK_100")
    a = _metric(pipeline, ease, "DCGK_100").results["score"]
    b = _metric(pipeline, kunn, "DCGK_100").results["score"]
    t = stats.ttest_rel(a, b)
    assert c.difference == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert c.p_value == pytest.approx(t.pvalue, rel=1e-9)
    assert c.n_users == len(a)
    assert ease in c.name and kunn in c.name
    # ratio metric: same as the core's delta-method comparison of the stored results
    results = metric_results(pipeline, "PostNormalisedDCGK_100")
    direct = results[ease].compare(results[kunn])
    assert compare(pipeline, ease, kunn, "PostNormalisedDCGK_100").p_value == direct.p_value
    with pytest.raises(ValueError, match="not a recpack-ope metric"):
        compare(pipeline, ease, kunn, "NDCGK_100")
    with pytest.raises(ValueError, match="did you mean"):
        compare(pipeline, "EASE(l2=200.0)", kunn, "UnbiasedDCGK_100")
    with pytest.raises(ValueError, match="not in the pipeline"):
        compare(pipeline, ease, kunn, "UnbiasedDCGK_20")


def test_summary_lists_every_algorithm_with_its_interval(pipeline):
    table = summary(pipeline, "PowerLawUnbiasedDCGK_10")
    assert list(table["value"]) == sorted(table["value"], reverse=True)
    results = metric_results(pipeline, "PowerLawUnbiasedDCGK_10")
    assert set(table.index) == set(results)
    for algorithm, row in table.iterrows():
        lo, hi = results[algorithm].confidence_interval()
        assert (row["ci_low"], row["value"], row["ci_high"]) == (lo, results[algorithm].value, hi)
        assert lo < row["value"] < hi


def _validation_values(scenario, l2s, K):
    """Each EASE(l2) trained and scored outside the pipeline, evaluated by the core."""
    val_in, val_out = scenario.validation_data
    adapter = METRIC_REGISTRY.get("SweepUnbiasedDCGK").adapter
    values = {}
    for l2 in l2s:
        model = EASE(l2=l2)
        model.fit(scenario.validation_training_data)
        X = sp.csr_matrix(model.predict(val_in))
        X = X - X.multiply(val_in.binary_values)  # RecPack's remove_history
        values[l2] = dcg(
            val_out.binary_values, X, discount=LogDiscount(K), propensity=adapter.propensity,
            clip=adapter.clip,
        ).value
    return values


@pytest.fixture(scope="module")
def validation_scenario(ml100k):
    s = WeakGeneralization(0.5, validation=True, seed=1)
    s.split(ml100k)
    RecPackAdapter(propensity=PowerLawPropensity(), clip=100).fit(s.full_training_data).register(
        prefix="Sweep"
    )
    return s


def test_grid_sweep_picks_the_best_validation_value(validation_scenario):
    grid = [1.0, 30.0, 300.0, 3000.0]
    builder = PipelineBuilder()
    builder.add_algorithm("EASE", optimisation_info=GridSearchInfo({"l2": grid}))
    builder.add_metric("SweepUnbiasedDCGK", K=20)
    builder.set_optimisation_metric("SweepUnbiasedDCGK", K=20)
    builder.set_data_from_scenario(validation_scenario)
    p = builder.build()
    p.run()
    expected = _validation_values(validation_scenario, grid, 20)
    trials = p.optimisation_results
    assert len(trials) == len(grid)
    for _, trial in trials.iterrows():
        assert trial["SweepUnbiasedDCGK_20"] == pytest.approx(expected[trial["params"]["l2"]], rel=1e-12)
    best = max(expected, key=expected.get)
    assert len(set(np.round(list(expected.values()), 6))) == len(grid)  # a real choice
    assert p.get_metrics().index.tolist() == [f"EASE(alpha=0,density=None,l2={best})"]


def test_hyperopt_sweep_picks_the_best_trial(validation_scenario):
    builder = PipelineBuilder()
    space = {"l2": hp.loguniform("l2", np.log(1.0), np.log(5000.0))}
    builder.add_algorithm("EASE", optimisation_info=HyperoptInfo(space, max_evals=4))
    builder.add_metric("SweepUnbiasedDCGK", K=20)
    builder.set_optimisation_metric("SweepUnbiasedDCGK", K=20)
    builder.set_data_from_scenario(validation_scenario)
    p = builder.build()
    p.run()
    trials = p.optimisation_results
    assert len(trials) == 4
    l2s = [t["l2"] for t in trials["params"]]
    expected = _validation_values(validation_scenario, l2s, 20)
    np.testing.assert_allclose(trials["SweepUnbiasedDCGK_20"], [expected[l2] for l2 in l2s], rtol=1e-12)
    best = max(expected, key=expected.get)
    assert p.get_metrics().index.tolist() == [f"EASE(alpha=0,density=None,l2={best})"]
