"""The RecPack adapter in real RecPack pipelines, checked against RecPack's own metrics, and
its bad and edge-case input.

Every bad input either gets a clear error naming the argument and the offending value (or raw
item id), or, where the input is valid, the number an independent route gives (IPS-DCG by
hand, propensities placed by hand). Needs RecPack (legacy environment); the modern nox session
excludes this folder explicitly.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hyperopt import hp
from recpack.algorithms import EASE
from recpack.matrix import InteractionMatrix
from recpack.metrics import DCGK
from recpack.pipelines import METRIC_REGISTRY, PipelineBuilder
from recpack.pipelines.hyperparameter_optimisation import GridSearchInfo, HyperoptInfo
from recpack.scenarios import WeakGeneralization
from recpack.util import get_top_K_ranks
from recpack_ope.adapters.recpack import (
    OPEMetricK,
    RecPackAdapter,
    compare,
    leaderboard,
    metric_results,
    preferences,
    recpack_ranking,
    summary,
)
from scipy import stats

from recpack_ope.inference.diagnostics import ESS_MIN, ESS_RATIO_THRESHOLD, ReliabilityWarning
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.metrics import cache
from recpack_ope.metrics.dcg import dcg, ips_dcg, ips_ndcg, ips_pn_dcg, ndcg, pn_dcg, snips_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import ips_recall, recall
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.propensity.models import PowerLawPropensity
from recpack_ope.propensity.weights import RECOMMENDED_CLIP
from recpack_ope.reward.models import RewardMatrix

# Unweighted, registered by every adapter.
OURS = ("PlainDCGK", "PlainNDCGK", "PostNormalisedDCGK", "PlainRecallK")
RPP = ("RPPK", "dcgRPPK", "invRPPK")

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
    RecPackAdapter(propensity=PowerLawPropensity(), clip=500).fit(
        scenario.full_training_data
    ).register(prefix="PowerLaw")
    # the default clipping, RECOMMENDED_CLIP, and the data-driven one
    RecPackAdapter(propensity=PowerLawPropensity()).fit(scenario.full_training_data).register(
        prefix="Default"
    )
    RecPackAdapter(propensity=PowerLawPropensity(), clip="auto").fit(
        scenario.full_training_data
    ).register(prefix="Auto")
    builder = PipelineBuilder()
    builder.add_algorithm("EASE", params={"l2": 200.0})
    builder.add_algorithm("KUNN", params={"Ku": 50, "Ki": 50})
    builder.add_algorithm("ItemKNN", params={"K": 50})
    builder.add_algorithm("Popularity", params={"K": scenario.full_training_data.shape[1]})
    power_law = ("PowerLawIPSDCGK", "PowerLawStratifiedNDCGK", "DefaultIPSDCGK", "AutoIPSDCGK")
    for name in ("DCGK", "NDCGK", "RecallK", *OURS, *power_law):
        builder.add_metric(name, K=[10, 100])
    builder.set_data_from_scenario(scenario)
    p = builder.build()
    p.run()
    return p


def _metric(pipeline, algorithm, name):
    return pipeline._metric_acc.acc[algorithm][name]


def test_recpack_keeps_the_metric_objects_where_the_adapter_reads_them(pipeline):
    """The adapter's one private read of RecPack, ``pipeline._metric_acc.acc`` (identifier →
    metric name → metric object): it fails here when RecPack changes it."""
    accumulated = pipeline._metric_acc.acc
    table = pipeline.get_metrics()
    assert list(accumulated) == list(table.index)
    for algorithm, metrics in accumulated.items():
        assert set(metrics) == set(table.columns)
        for name, metric in metrics.items():
            assert metric.name == name and metric.value == table.loc[algorithm, name]


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
        recpack_recall = _metric(pipeline, algorithm, f"RecallK_{K}")
        ours = {name: _metric(pipeline, algorithm, f"{name}_{K}") for name in OURS}
        # Plain metrics are RecPack's
        assert ours["PlainDCGK"].value == pytest.approx(recpack_dcg.value, abs=1e-12), algorithm
        assert ours["PlainNDCGK"].value == pytest.approx(recpack_ndcg.value, abs=1e-12), algorithm
        assert ours["PlainRecallK"].value == pytest.approx(recpack_recall.value, abs=1e-12)
        for metric in ours.values():
            assert metric.result_.diagnostics is None  # unweighted
        # per user too, including Popularity's tied scores
        for name, theirs in (
            ("PlainDCGK", recpack_dcg),
            ("PlainNDCGK", recpack_ndcg),
            ("PlainRecallK", recpack_recall),
        ):
            r_ours, r_theirs = ours[name].results, theirs.results
            assert r_ours["user_id"].tolist() == r_theirs["user_id"].tolist() == evaluated.tolist()
            np.testing.assert_allclose(r_ours["score"], r_theirs["score"], rtol=0, atol=1e-12)
        # pnDCG = mean of RecPack's per-user DCG over mean of independently computed iDCG
        expected = (
            recpack_dcg.results["score"].mean() / ideal_dcg_binary(y_true[evaluated], K).mean()
        )
        assert ours["PostNormalisedDCGK"].value == pytest.approx(expected, abs=1e-12), algorithm
        for metric in ours.values():
            assert metric.num_users == recpack_dcg.num_users == evaluated.size
            assert len(metric.results) == evaluated.size
            assert metric.results["score"].mean() == pytest.approx(metric.value, rel=1e-12)


def test_popularity_ties_are_ranked_as_recpack_ranks_them(pipeline, scenario):
    pop = next(a for a in pipeline.get_metrics().index if a.startswith("Popularity"))
    y_pred = scenario.full_training_data.binary_values.sum(axis=0)  # popularity has tied counts
    assert len(np.unique(np.asarray(y_pred))) < y_pred.shape[1]
    ours = _metric(pipeline, pop, "PlainDCGK_100").results["score"].to_numpy()
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
    first = module._CACHE.ranking(y_pred, 2)
    assert module._CACHE.ranking(y_pred, 2) is first  # reused by the next metric
    assert module._CACHE.ranking(y_pred, 1) is not first  # another K
    y_pred.data[0] = 0.0  # edited in place: ranked again, never served stale
    np.testing.assert_array_equal(module._CACHE.ranking(y_pred, 2).items, [[2, 1], [1, 2]])
    copy = y_pred.copy()  # equal content, another object
    assert module._CACHE.ranking(copy, 2) is not module._CACHE.ranking(y_pred, 2)


def test_power_law_weights_land_on_recpack_item_indices(pipeline, scenario):
    """IPS-DCG by loops over RecPack's own top-K ranks and the power-law vector by item index."""
    adapter = METRIC_REGISTRY.get("PowerLawIPSDCGK").adapter
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
    ours = _metric(pipeline, ease, "PowerLawIPSDCGK_100")
    np.testing.assert_allclose(ours.results["score"], expected, rtol=1e-12)
    assert ours.value == pytest.approx(np.mean(expected), rel=1e-12)


def test_stratified_ndcg_recombines_recpack_ranks_per_propensity_stratum(pipeline, scenario):
    """Σ_s P(s)·nDCG_s by loops over RecPack's own top-K ranks, strata by pandas.cut."""
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
    with pytest.raises(ValueError, match="StratifiedNDCGK needs propensity.*use PlainNDCGK"):
        RecPackAdapter().evaluate(
            "StratifiedNDCGK", sp.csr_matrix([[1.0]]), sp.csr_matrix([[1.0]]), 1
        )


def test_propensities_keyed_by_raw_item_id_are_mapped_to_recpack_indices():
    mapping = pd.DataFrame({"movieId": [50, 7, 300], "iid": [2, 0, 1]})
    raw = {7: 0.1, 300: 0.2, 50: 0.5, 999: 0.9}  # 999 is not in the data: ignored
    adapter = RecPackAdapter(propensity=raw, item_id_mapping=mapping, clip=None)
    np.testing.assert_array_equal(adapter.propensity.propensity_, [0.1, 0.2, 0.5])
    # evaluated on RecPack indices: user 0 holds out item 2 (raw 50, p = 0.5) at rank 1
    y_true = sp.csr_matrix(np.array([[0, 0, 1.0], [1.0, 0, 0]]))
    y_pred = sp.csr_matrix(np.array([[0.1, 0.2, 0.9], [0.3, 0.5, 0.0]]))
    result = adapter.evaluate("IPSDCGK", y_true, y_pred, K=2)
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
    assert set(first) == set(second) == {f"Twice{n}" for n in (*OURS, *RPP)}
    assert METRIC_REGISTRY.get("TwicePlainDCGK") is second["TwicePlainDCGK"]
    assert METRIC_REGISTRY.get("TwicePlainDCGK").adapter.clip == 3.0
    metric = METRIC_REGISTRY.get("TwicePlainDCGK")(K=10)
    assert isinstance(metric, OPEMetricK) and metric.name == "TwicePlainDCGK_10"

    # a reloaded adapter module (a notebook's importlib.reload) still recognises its classes
    import importlib

    from recpack_ope.adapters import recpack as module

    importlib.reload(module).RecPackAdapter().register(prefix="Twice")

    METRIC_REGISTRY.register("ForeignPlainDCGK", DCGK)
    try:
        with pytest.raises(ValueError, match="'ForeignPlainDCGK' not recpack-ope's"):
            RecPackAdapter().register(prefix="Foreign")
    finally:
        del METRIC_REGISTRY.registered["ForeignPlainDCGK"]
    with pytest.raises(ValueError, match="not fitted.*adapter.fit"):
        RecPackAdapter(propensity=PowerLawPropensity()).register(prefix="Unfitted")
    with pytest.raises(ValueError, match="prefix"):
        RecPackAdapter().register(prefix="no spaces")


def test_metric_contract_errors():
    RecPackAdapter().register()
    metric = METRIC_REGISTRY.get("PlainDCGK")(K=5)
    with pytest.raises(ValueError, match=r"y_true has shape \(3, 4\) but y_pred has \(3, 5\)"):
        metric.calculate(sp.csr_matrix((3, 4)), sp.csr_matrix((3, 5)))
    with pytest.raises(ValueError, match="K must be a positive integer"):
        METRIC_REGISTRY.get("PlainDCGK")(K=0)
    y_pred = sp.csr_matrix(np.array([[np.nan, 1.0], [0.5, 0.2]]))
    with pytest.raises(ValueError, match="NaN at \\(user 0, item 0\\)"):
        metric.calculate(sp.csr_matrix(np.eye(2)), y_pred)


def test_compare_is_the_paired_t_test_over_recpack_users(pipeline):
    table = pipeline.get_metrics()
    ease, kunn = (next(a for a in table.index if a.startswith(f)) for f in ("EASE", "KUNN"))
    c = compare(pipeline, ease, kunn, "PlainDCGK_100")
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
    with pytest.raises(ValueError, match="not a recpack-ope metric.*PlainNDCGK equals NDCGK"):
        compare(pipeline, ease, kunn, "NDCGK_100")
    with pytest.raises(ValueError, match="did you mean"):
        compare(pipeline, "EASE(l2=200.0)", kunn, "PlainDCGK_100")
    with pytest.raises(ValueError, match="not in the pipeline"):
        compare(pipeline, ease, kunn, "PlainDCGK_20")


def test_summary_lists_every_algorithm_with_its_interval(pipeline):
    table = summary(pipeline, "PowerLawIPSDCGK_10")
    assert list(table["value"]) == sorted(table["value"], reverse=True)
    results = metric_results(pipeline, "PowerLawIPSDCGK_10")
    assert set(table.index) == set(results)
    for algorithm, row in table.iterrows():
        lo, hi = results[algorithm].confidence_interval()
        assert (row["ci_low"], row["value"], row["ci_high"]) == (lo, results[algorithm].value, hi)
        assert lo < row["value"] < hi


def test_leaderboard_holds_every_algorithm_on_each_of_our_columns(pipeline):
    board = leaderboard(pipeline, ["PowerLawIPSDCGK_10", "PostNormalisedDCGK_10"], alpha=0.05)
    assert board.metrics == ("PowerLawIPSDCGK_10", "PostNormalisedDCGK_10")
    for column in board.metrics:
        results = metric_results(pipeline, column)
        standing = board[column]
        assert set(standing.models) == set(results)
        values = {a: r.value for a, r in results.items()}
        assert standing.best == max(values, key=values.get)
        # tied with the best: as summary() decides it on the same column
        table = summary(pipeline, column)
        assert set(standing.tied) == set(table.index[table["tied_with_best"]])
        for algorithm, result in results.items():
            assert standing.interval[standing.models.index(algorithm)] == pytest.approx(
                result.confidence_interval()
            )
    # default: every column of ours, none of RecPack's own (DCGK keeps no per-user terms)
    everything = leaderboard(pipeline).metrics
    assert "PostNormalisedDCGK_10" in everything and "DCGK_10" not in everything
    with pytest.raises(TypeError, match="metrics must be a list"):
        leaderboard(pipeline, "PostNormalisedDCGK_10")
    with pytest.raises(ValueError, match="not a recpack-ope metric"):
        leaderboard(pipeline, ["DCGK_10"])


def _validation_values(scenario, l2s, K):
    """Each EASE(l2) trained and scored outside the pipeline, evaluated by the core."""
    val_in, val_out = scenario.validation_data
    adapter = METRIC_REGISTRY.get("SweepIPSDCGK").adapter
    values = {}
    for l2 in l2s:
        model = EASE(l2=l2)
        model.fit(scenario.validation_training_data)
        X = sp.csr_matrix(model.predict(val_in))
        X = X - X.multiply(val_in.binary_values)  # RecPack's remove_history
        values[l2] = ips_dcg(
            val_out.binary_values,
            X,
            discount=LogDiscount(K),
            propensity=adapter.propensity,
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
    builder.add_metric("SweepIPSDCGK", K=20)
    builder.set_optimisation_metric("SweepIPSDCGK", K=20)
    builder.set_data_from_scenario(validation_scenario)
    p = builder.build()
    p.run()
    expected = _validation_values(validation_scenario, grid, 20)
    trials = p.optimisation_results
    assert len(trials) == len(grid)
    for _, trial in trials.iterrows():
        assert trial["SweepIPSDCGK_20"] == pytest.approx(expected[trial["params"]["l2"]], rel=1e-12)
    best = max(expected, key=expected.get)
    assert len(set(np.round(list(expected.values()), 6))) == len(grid)  # a real choice
    assert p.get_metrics().index.tolist() == [f"EASE(alpha=0,density=None,l2={best})"]


def test_hyperopt_sweep_picks_the_best_trial(validation_scenario):
    builder = PipelineBuilder()
    space = {"l2": hp.loguniform("l2", np.log(1.0), np.log(5000.0))}
    builder.add_algorithm("EASE", optimisation_info=HyperoptInfo(space, max_evals=4))
    builder.add_metric("SweepIPSDCGK", K=20)
    builder.set_optimisation_metric("SweepIPSDCGK", K=20)
    builder.set_data_from_scenario(validation_scenario)
    p = builder.build()
    p.run()
    trials = p.optimisation_results
    assert len(trials) == 4
    l2s = [t["l2"] for t in trials["params"]]
    expected = _validation_values(validation_scenario, l2s, 20)
    np.testing.assert_allclose(trials["SweepIPSDCGK_20"], [expected[l2] for l2 in l2s], rtol=1e-12)
    best = max(expected, key=expected.get)
    assert p.get_metrics().index.tolist() == [f"EASE(alpha=0,density=None,l2={best})"]


# --- names that say whether a metric is IPS-weighted -------------------------------

WEIGHTED = ("IPSDCGK", "SNIPSDCGK", "IPSNDCGK", "IPSPostNormalisedDCGK", "IPSRecallK")
PLAIN_FOR = {
    "IPSDCGK": "PlainDCGK",
    "SNIPSDCGK": "PlainDCGK",
    "IPSNDCGK": "PlainNDCGK",
    "IPSPostNormalisedDCGK": "PostNormalisedDCGK",
    "IPSRecallK": "PlainRecallK",
    "StratifiedNDCGK": "PlainNDCGK",
    "DRDCGK": "PlainDCGK",
}


def test_registered_names_depend_on_the_propensities():
    plain = RecPackAdapter().register(prefix="NoP")
    assert set(plain) == {f"NoP{n}" for n in (*OURS, *RPP)}
    weighted = RecPackAdapter(propensity=[0.5, 0.2, 1.0]).register(prefix="WithP")
    assert set(weighted) == {f"WithP{n}" for n in (*OURS, *WEIGHTED, "StratifiedNDCGK", *RPP)}
    for name, replacement in PLAIN_FOR.items():
        # RecPack's builder finds the name, and constructing the metric says why it cannot be
        assert f"NoP{name}" in METRIC_REGISTRY
        with pytest.raises(
            ValueError, match=f"NoP{name} needs propensity.*prefix 'NoP'.*use NoP{replacement} "
        ):
            METRIC_REGISTRY.get(f"NoP{name}")(K=10)
        with pytest.raises(ValueError, match=f"^{name} needs propensity.*use {replacement} "):
            RecPackAdapter().evaluate(name, sp.csr_matrix([[1.0]]), sp.csr_matrix([[1.0]]), 1)


def test_pipeline_asking_for_an_ips_metric_without_propensities_says_why(scenario):
    RecPackAdapter().register(prefix="Unweighted")
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 100})
    builder.add_metric("UnweightedIPSNDCGK", K=10)
    builder.set_data_from_scenario(scenario)
    pipeline = builder.build()
    with pytest.raises(
        ValueError, match="UnweightedIPSNDCGK needs propensity.*use UnweightedPlainNDCGK "
    ):
        pipeline.run()


def test_a_pipeline_not_run_or_without_our_columns_is_named(scenario):
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 100})
    builder.add_metric("DCGK", K=10)
    builder.set_data_from_scenario(scenario)
    pipeline = builder.build()
    with pytest.raises(ValueError, match=r"no results yet: call pipeline.run\(\) first"):
        leaderboard(pipeline)
    pipeline.run()
    with pytest.raises(ValueError, match="has no column of a recpack-ope metric; add ours"):
        leaderboard(pipeline)
    with pytest.raises(TypeError, match="must be a RecPack Pipeline after run\\(\\), got str"):
        leaderboard("pipeline")


def test_an_adapter_without_propensities_keeps_earlier_ips_metrics():
    first = RecPackAdapter(propensity=[0.5, 1.0]).register(prefix="Keep")
    RecPackAdapter().register(prefix="Keep")
    for name in (*WEIGHTED, "StratifiedNDCGK"):
        assert METRIC_REGISTRY.get(f"Keep{name}") is first[f"Keep{name}"]
    # the names every adapter registers are rebound to the last one
    for name in OURS:
        assert METRIC_REGISTRY.get(f"Keep{name}").adapter.propensity is None


@pytest.fixture(scope="module")
def small():
    """Held-out rewards, tie-free RecPack-style predictions and propensities of 40 users."""
    rng = np.random.default_rng(16)
    dense = (rng.random((40, 12)) < 0.3).astype(float)
    dense[np.arange(40), np.arange(40) % 12] = 1.0  # every user has a held-out item
    y_true = sp.csr_matrix(dense)
    y_pred = sp.csr_matrix(rng.random((40, 12)) + 0.01)
    p = rng.uniform(0.05, 1.0, 12)
    p[0] = 0.002  # a rare item
    return y_true, y_pred, p


@pytest.mark.parametrize("clip", [None, 2.0, 50.0, "auto"])
def test_weighted_metrics_are_the_cores_with_the_adapters_clip(small, clip):
    y_true, y_pred, p = small
    classes = RecPackAdapter(propensity=p, clip=clip).register(prefix="Core")
    core = {
        "IPSDCGK": ips_dcg,
        "SNIPSDCGK": snips_dcg,
        "IPSNDCGK": ips_ndcg,
        "IPSPostNormalisedDCGK": ips_pn_dcg,
        "IPSRecallK": ips_recall,
        "PlainDCGK": dcg,
        "PlainNDCGK": ndcg,
        "PostNormalisedDCGK": pn_dcg,
        "PlainRecallK": recall,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for name, function in core.items():
            metric = classes[f"Core{name}"](K=3)
            metric.calculate(y_true, y_pred)
            weighted = name in WEIGHTED
            cutoff = {"k": 3} if "Recall" in name else {"discount": LogDiscount(3)}
            given = {"propensity": p, "clip": clip} if weighted else {}
            expected = function(y_true, y_pred, **cutoff, **given)
            assert metric.value == pytest.approx(expected.value, rel=1e-12), name
            np.testing.assert_allclose(metric.results["score"], expected.per_user, rtol=1e-12)
            assert metric.result_.diagnostics == expected.diagnostics, name
            assert (metric.result_.diagnostics is not None) == weighted, name
            assert (metric.result_.clip_selection is not None) == (weighted and clip == "auto")
    if clip in (None, 2.0):
        # IPS-DCG@3 by hand: Σ_i min(m, 1/p_i) / log2(rank + 1) over held-out items in the top 3
        metric = classes["CoreIPSDCGK"](K=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            metric.calculate(y_true, y_pred)
        m = math.inf if clip is None else clip
        dense, scores = y_true.toarray(), y_pred.toarray()
        by_hand = [
            sum(
                min(m, 1 / p[i]) / math.log2(r + 2)
                for r, i in enumerate(np.argsort(-scores[u])[:3])
                if dense[u, i]
            )
            for u in range(40)
        ]
        np.testing.assert_allclose(metric.results["score"], by_hand, rtol=1e-12)


def test_default_clip_is_the_recommended_one_and_bad_clips_are_named():
    assert RecPackAdapter().clip == RECOMMENDED_CLIP
    for bad in (0, -1.0, math.nan, math.inf, "sometimes", True, [5]):
        with pytest.raises(ValueError, match="clip must be a finite number >= 1") as caught:
            RecPackAdapter(propensity=[0.5, 1.0], clip=bad)
        assert str(caught.value).endswith(f"got {bad!r}")


def _recpack_top_k(pipeline, algorithm, n_users, K):
    """RecPack's own top-K lists of one algorithm (from its DCGK metric) as a TopK."""
    reference = _metric(pipeline, algorithm, f"DCGK_{K}")
    items = np.full((n_users, K), -1)
    for row, u in enumerate(reference.user_id_map_):
        ranks = reference.y_pred_top_K_[row].tocoo()
        items[u, ranks.data.astype(int) - 1] = ranks.col
    return TopK(items)


def test_summary_shows_the_weight_diagnostics(pipeline, scenario):
    """Diagnostics by hand over the held-out interactions each algorithm exposes in its top 10
    (docs/definitions.md, "Weight diagnostics"), weights min(500, 1/p)."""
    adapter = METRIC_REGISTRY.get("PowerLawIPSDCGK").adapter
    y_true = sp.csr_matrix(scenario.test_data_out.binary_values)
    y_true.sort_indices()
    raw_all = 1 / adapter.propensity.propensity_[y_true.indices]
    users = np.repeat(np.arange(y_true.shape[0]), np.diff(y_true.indptr))
    table = summary(pipeline, "PowerLawIPSDCGK_10")
    diagnostics = [
        "ess",
        "ess_ratio",
        "max_weight",
        "top_share",
        "n_clipped",
        "clipped_mass",
        "reliable",
    ]
    assert list(table.columns) == [
        "value",
        "ci_low",
        "ci_high",
        "standard_error",
        "n_users",
        "sens_low",
        "sens_high",
        *diagnostics,
        "flags",
        "p_vs_best",
        "tied_with_best",
        "robust_gamma",
        "robust_gamma_95",
    ]
    for algorithm, row in table.iterrows():
        rank = _recpack_top_k(pipeline, algorithm, y_true.shape[0], 10).items
        delta = np.array(
            [
                1 / math.log2(np.flatnonzero(rank[u] == i)[0] + 2) if i in rank[u] else 0.0
                for u, i in zip(users, y_true.indices, strict=True)
            ]
        )
        shown = delta > 0
        raw, delta = raw_all[shown], delta[shown]
        w = np.minimum(raw, 500.0)
        n, ess = w.size, w.sum() ** 2 / (w**2).sum()
        assert row["ess"] == pytest.approx(ess, rel=1e-12), algorithm
        assert row["ess_ratio"] == pytest.approx(ess / n, rel=1e-12)
        assert row["max_weight"] == w.max()
        assert row["n_clipped"] == (raw > 500).sum()
        assert row["clipped_mass"] == pytest.approx((raw - w).sum() / raw.sum(), rel=1e-12, abs=0)
        assert row["reliable"] == (ess / n >= ESS_RATIO_THRESHOLD)
        # The criteria that fired, as the file CLI's rows name them.
        flags = row["flags"].split("; ") if row["flags"] else []
        assert ("ess_ratio" in flags) == (ess / n < ESS_RATIO_THRESHOLD)
        assert ("ess" in flags) == (ess < ESS_MIN)
        assert (flags == []) == row["reliable"]
        # share of the estimate carried by the top 1 % of weights; the tied group at the
        # boundary enters pro rata (each interaction with the share of the top it fills)
        contributions = w * delta
        top, share = math.ceil(n / 100), 0.0
        for weight in np.unique(w)[::-1]:
            group = contributions[w == weight]
            take = min(top, group.size)
            share, top = share + group.sum() * take / group.size, top - take
        assert row["top_share"] == pytest.approx(share / contributions.sum(), rel=1e-12)
    assert table["n_clipped"].max() > 0  # the clipping changes some algorithm's weights
    assert not table["reliable"].all() and table["reliable"].any()
    # unweighted metrics have no weights to diagnose
    for name in ("PlainDCGK_10", "PostNormalisedDCGK_10", "PowerLawStratifiedNDCGK_10"):
        assert "ess" not in summary(pipeline, name).columns


def test_summary_shows_the_sensitivity_to_wrong_propensities(pipeline, scenario):
    """The bounds at Γ = 2 and Γ* against the best equal the core's, on RecPack's own top-10
    lists; unweighted metrics have neither, and algorithms whose clipping ``clip="auto"``
    selected differently from the best's cannot be perturbed together (NaN)."""
    adapter = METRIC_REGISTRY.get("PowerLawIPSDCGK").adapter
    y_true = scenario.test_data_out.binary_values
    table = summary(pipeline, "PowerLawIPSDCGK_10")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        core = {
            algorithm: ips_dcg(
                y_true,
                _recpack_top_k(pipeline, algorithm, y_true.shape[0], 10),
                discount=LogDiscount(10),
                propensity=adapter.propensity,
                clip=500,
            )
            for algorithm in table.index
        }
    best = table.index[0]
    for algorithm, row in table.iterrows():
        bounds = core[algorithm].sensitivity(2.0)
        assert (row["sens_low"], row["sens_high"]) == pytest.approx(
            (bounds.low, bounds.high), rel=1e-9
        )
        assert row["sens_low"] < row["value"] < row["sens_high"]
        if algorithm == best:
            assert np.isnan(row["robust_gamma"]) and np.isnan(row["robust_gamma_95"])
            continue
        comparison = core[best].compare(core[algorithm])
        assert row["robust_gamma"] == pytest.approx(comparison.robustness(), rel=1e-6)
        assert row["robust_gamma_95"] == pytest.approx(comparison.robustness(0.95), rel=1e-6)
        assert row["robust_gamma_95"] <= row["robust_gamma"]
    assert (table["robust_gamma"].dropna() > 1).all()
    assert not {"sens_low", "robust_gamma"} & set(summary(pipeline, "PlainDCGK_10").columns)
    auto = summary(pipeline, "AutoIPSDCGK_100")
    for _, row in auto.iloc[1:].iterrows():
        assert np.isnan(row["robust_gamma"]) == (row["clip"] != auto["clip"].iloc[0])


def _core_ips_dcg_100(pipeline, algorithm, y_true, propensity, clip):
    """The core's IPS-DCG@100 of ``algorithm``'s ranking in ``pipeline``, unwarned."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        return ips_dcg(
            y_true,
            _recpack_top_k(pipeline, algorithm, y_true.shape[0], 100),
            discount=LogDiscount(100),
            propensity=propensity,
            clip=clip,
        )


def test_default_clipping_is_the_recommended_one(pipeline, scenario):
    adapter = METRIC_REGISTRY.get("DefaultIPSDCGK").adapter
    assert adapter.clip == RECOMMENDED_CLIP
    y_true = scenario.test_data_out.binary_values
    table = summary(pipeline, "DefaultIPSDCGK_100")
    assert "clip" not in table.columns  # a fixed clipping: nothing selected
    for algorithm, row in table.iterrows():
        expected = _core_ips_dcg_100(
            pipeline, algorithm, y_true, adapter.propensity, RECOMMENDED_CLIP
        )
        assert row["value"] == pytest.approx(expected.value, rel=1e-12)
        assert row["ess"] == pytest.approx(expected.diagnostics.ess, rel=1e-12)
        assert row["max_weight"] <= RECOMMENDED_CLIP


def test_auto_clipping_is_selected_per_algorithm(pipeline, scenario):
    """clip="auto" in a pipeline: the core's selection on RecPack's ranking, shown by summary."""
    adapter = METRIC_REGISTRY.get("AutoIPSDCGK").adapter
    y_true = scenario.test_data_out.binary_values
    table = summary(pipeline, "AutoIPSDCGK_100")
    results = metric_results(pipeline, "AutoIPSDCGK_100")
    assert "clip" in table.columns
    for algorithm, row in table.iterrows():
        expected = _core_ips_dcg_100(pipeline, algorithm, y_true, adapter.propensity, "auto")
        assert row["value"] == pytest.approx(expected.value, rel=1e-12)
        chosen = expected.clip_selection.clip
        assert row["clip"] == (math.inf if chosen is None else chosen)
        assert results[algorithm].clip_selection.clip == chosen
        assert row["ess"] == pytest.approx(expected.diagnostics.ess, rel=1e-12)


def test_cached_ranking_is_redone_when_scores_move_between_items_or_users():
    """In-place edits that keep every score and every item index (only their pairing or
    their rows change) still rank again; expected lists by hand from the edited scores."""
    from recpack_ope.adapters import recpack as module

    y_pred = sp.csr_matrix(np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]]))
    np.testing.assert_array_equal(module._CACHE.ranking(y_pred, 2).items, [[0, 2], [1, 2]])
    y_pred.indices[:3] = [2, 1, 0]  # row 0 now scores item 2 at 0.9, item 0 at 0.5
    np.testing.assert_array_equal(module._CACHE.ranking(y_pred, 2).items, [[2, 0], [1, 2]])
    data, indices = np.array([0.9, 0.5, 0.3, 0.8]), np.array([0, 1, 2, 3])
    moved = sp.csr_matrix((data, indices, np.array([0, 1, 4])), shape=(2, 4))
    np.testing.assert_array_equal(module._CACHE.ranking(moved, 2).items, [[0, -1], [3, 1]])
    moved.indptr[1] = 2  # row 0 now holds items 0, 1 (0.9, 0.5); row 1 items 2, 3 (0.3, 0.8)
    np.testing.assert_array_equal(module._CACHE.ranking(moved, 2).items, [[0, 1], [3, 2]])


def test_metrics_on_one_ranking_prepare_the_held_out_data_once(monkeypatch):
    """RecPack builds a new ``y_true`` for every metric; the held-out data prepared for the
    first metric on a ranking serves the others while the contents of ``y_true`` and the
    propensities stay the same, and is prepared again when either changes (also when an item
    moves so that the sums of the indices stay equal). Every value equals the core's."""

    prepared = []
    original = cache.prepare_held_out
    monkeypatch.setattr(
        cache, "prepare_held_out", lambda *a, **kw: prepared.append(1) or original(*a, **kw)
    )
    rng = np.random.default_rng(8)
    y_pred = sp.csr_matrix(rng.random((6, 8)))
    held_out = (rng.random((6, 8)) < 0.3).astype(float)
    held_out[0] = [0, 1, 0, 0, 1, 0, 0, 0]
    y_true = sp.csr_matrix(held_out)
    p = np.linspace(0.2, 0.9, 8)
    adapter = RecPackAdapter(propensity=p, clip=None)
    ranking, discount = TopK.from_scores(y_pred, 3), LogDiscount(3)
    core = {
        "IPSDCGK": ips_dcg,
        "SNIPSDCGK": snips_dcg,
        "IPSNDCGK": ips_ndcg,
        "IPSPostNormalisedDCGK": ips_pn_dcg,
        "PlainDCGK": dcg,
    }

    def check(name, truth, propensity):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            ours = adapter.evaluate(name, truth.copy(), y_pred, 3)  # a new object, as in RecPack
            given = {} if propensity is None else {"propensity": propensity}
            expected = core[name](truth, ranking, discount=discount, **given)
        assert ours.value == pytest.approx(expected.value, rel=1e-12)

    for name in list(core)[:4]:
        check(name, y_true, p)
    assert len(prepared) == 1
    check("PlainDCGK", y_true, None)  # no propensities: other held-out weights
    assert len(prepared) == 2
    moved = y_true.copy()
    moved.indices[:2] = [2, 3]  # user 0's items 1, 4 become 2, 3: the same index sum
    check("IPSDCGK", moved, p)
    check("SNIPSDCGK", moved, p)
    assert len(prepared) == 3
    adapter.propensity.propensity_[2] = 0.05  # propensities edited in place
    check("IPSDCGK", moved, adapter.propensity.propensity_.copy())
    assert len(prepared) == 4
    y_pred = y_pred.copy()  # new predictions: a new ranking, nothing reused
    check("IPSDCGK", moved, adapter.propensity.propensity_.copy())
    assert len(prepared) == 5


def test_predictions_edited_in_place_keeping_sums_are_ranked_again():
    """Scores permuted in place keep their sum, their dot product with the item indices and
    the rows' bounds (the fingerprint used before, found stale by review): compared with a
    copy, they are ranked again. By hand: user 0 scores items 0..3 as 1, 4, 5, 2 after the
    edit, so the top 2 are items 2 and 1."""
    from recpack_ope.adapters import recpack as module

    y_pred = sp.csr_matrix(np.array([[4.0, 1.0, 2.0, 5.0]]))
    assert module._CACHE.ranking(y_pred, 2).items.tolist() == [[3, 0]]
    y_pred.data[:] = [1.0, 4.0, 5.0, 2.0]
    assert module._CACHE.ranking(y_pred, 2).items.tolist() == [[2, 1]]


# --- bad and edge-case input ---------------------------------------------------

MAPPING = pd.DataFrame({"movieId": [50, 7, 300], "iid": [2, 0, 1]})
RAW = {7: 0.1, 300: 0.2, 50: 0.5}
Y_TRUE = sp.csr_matrix(np.array([[0, 0, 1.0], [1.0, 0, 0]]))
Y_PRED = sp.csr_matrix(np.array([[0.1, 0.2, 0.9], [0.3, 0.5, 0.0]]))


def _corrupt_indices():
    m = Y_PRED.copy()
    m.indices[0] = 9  # column 9 of a 3-column matrix
    return m


def _corrupt_coo_row():
    m = Y_PRED.tocoo()
    m.row[1] = 5  # row 5 of a 2-row matrix: scipy's compiled tocsr would write out of bounds
    return m


def _corrupt_indptr():
    m = Y_PRED.copy()
    m.indptr[1] = 9
    return m


@pytest.fixture(scope="module")
def small_pipeline():
    """Popularity, ItemKNN and EASE on 60 users × 30 items, with ours and RecPack's DCGK."""
    rng = np.random.default_rng(0)
    rows = [(u, i) for u in range(60) for i in rng.choice(30, 8, replace=False)]
    scenario = WeakGeneralization(0.5, validation=False, seed=0)
    scenario.split(InteractionMatrix(pd.DataFrame(rows, columns=["uid", "iid"]), "iid", "uid"))
    RecPackAdapter().register(prefix="Bad")
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 30})
    builder.add_algorithm("ItemKNN", params={"K": 10})
    builder.add_metric("BadPlainDCGK", K=5)
    builder.add_metric("BadRPPK", K=5)
    builder.add_metric("DCGK", K=5)
    builder.set_data_from_scenario(scenario)
    p = builder.build()
    p.run()
    p.scenario_ = scenario
    return p


# --- K1: structurally corrupt sparse input ----------------------------------------------------


@pytest.mark.parametrize("corrupt", [_corrupt_indices, _corrupt_coo_row, _corrupt_indptr])
def test_corrupt_predictions_are_refused_before_compiled_code(corrupt):
    adapter = RecPackAdapter(propensity=[0.5, 0.5, 0.5], clip=None)
    match = "y_pred is a corrupt (sparse|CSR) matrix"
    with pytest.raises(ValueError, match=match):
        adapter.evaluate("IPSDCGK", Y_TRUE, corrupt(), 2)  # the COO case returned 0 before
    with pytest.raises(ValueError, match=match):
        recpack_ranking(corrupt(), 2)
    metric = adapter.register(prefix="Corrupt")["CorruptPlainDCGK"](K=2)
    with pytest.raises(ValueError, match=match):
        metric.calculate(Y_TRUE, corrupt())


def test_corrupt_impressions_are_refused_at_construction():
    shown = sp.csr_matrix(np.eye(2, 3))
    shown.indices[0] = 8
    with pytest.raises(
        ValueError, match="impressions is a corrupt sparse matrix: stored entry 0 .*column index 8"
    ):
        RecPackAdapter(propensity=[0.5, 0.5, 0.5], impressions=shown)


# --- K2: id maps and propensity vectors of the item space -------------------------------------


@pytest.mark.parametrize(
    "mapping",
    [
        MAPPING,
        MAPPING.sample(frac=1.0, random_state=1).reset_index(drop=True),  # rows in any order
        {50: 2, 7: 0, 300: 1},
        pd.Series({50: 2, 7: 0, 300: 1}),
        MAPPING.astype({"iid": float}),  # whole numbers stored as floats
    ],
)
def test_every_form_of_id_map_places_raw_propensities_on_the_same_indices(mapping):
    adapter = RecPackAdapter(propensity={**RAW, 999: 0.9}, item_id_mapping=mapping, clip=None)
    # by hand: index 0 is raw 7, index 1 raw 300, index 2 raw 50
    np.testing.assert_array_equal(adapter.propensity.propensity_, [0.1, 0.2, 0.5])
    # IPS-DCG@2 by hand: user 0 holds out item 2 (p 0.5) at rank 1; user 1 item 0 (p 0.1) at rank 2
    result = adapter.evaluate("IPSDCGK", Y_TRUE, Y_PRED, K=2)
    np.testing.assert_allclose(result.per_user, [1 / 0.5, (1 / 0.1) / math.log2(3)], rtol=1e-12)


BAD_MAPPINGS = [
    (
        pd.DataFrame({"movieId": [50, 7, 300, 7], "iid": [2, 0, 1, 3]}),
        "maps raw item id 7 to item indices 0 and 3",
    ),
    ({50: 2, 7: 0, 300: 0}, "gives item index 0 to raw item ids 7 and 300"),
    (
        pd.DataFrame({"movieId": [50, 7, 300], "iid": [1, 0, 1]}),
        "gives item index 1 to raw item ids 50 and 300",
    ),
    (pd.Series({50: 2, 7: 0, 300: -1}), r"maps raw item id 300 to item index -1, outside 0..2"),
    (
        pd.DataFrame({"movieId": [50, 7, 300], "iid": [3, 0, 1]}),
        r"maps raw item id 50 to item index 3, outside 0..2",
    ),
    (
        pd.DataFrame({"movieId": [50, 7, 300], "iid": [2.0, 0.0, 1.5]}),
        "maps raw item id 300 to 1.5, not an integer item index",
    ),
    (
        pd.DataFrame({"movieId": [50, 7, 300], "iid": [2.0, 0.0, np.nan]}),
        "item_id_mapping has a missing value at label 300",
    ),
    ({50: 2, 7: "zero", 300: 1}, r"item_id_mapping has non-numeric value 'zero'"),
    (
        pd.DataFrame({"movieId": [50, 7, 300], "idx": [2, 0, 1]}),
        r"must have the item index column 'iid' and one raw item id column.*\['movieId', 'idx'\]",
    ),
    (pd.DataFrame({"iid": [2, 0, 1]}), r"got columns \['iid'\]"),
    (MAPPING.assign(title=list("abc")), r"got columns \['movieId', 'iid', 'title'\]"),
    (pd.DataFrame({"movieId": [], "iid": []}), "item_id_mapping is empty"),
    (
        [(50, 2), (7, 0), (300, 1)],
        "item_id_mapping must be .*got list",
    ),
]


@pytest.mark.parametrize(("mapping", "match"), BAD_MAPPINGS, ids=[m[:40] for _, m in BAD_MAPPINGS])
def test_bad_id_maps_are_refused_with_the_raw_id_or_index(mapping, match):
    with pytest.raises((ValueError, TypeError), match=match):
        RecPackAdapter(propensity=RAW, item_id_mapping=mapping)


BAD_PROPENSITIES = [
    (
        pd.Series([0.1, 0.2, 0.5, 0.3], index=[7, 300, 50, 7]),
        "propensity has raw item id 7 more than once",
    ),
    (
        pd.Series([0.1, 0.2, 0.5, 0.3, 0.3], index=[7, 300, 50, 9, 9]),
        "propensity has raw item id 9 more than once",
    ),
    ({7: 0.1, 50: 0.5}, r"no propensity for raw item id 300 \(1 of RecPack's 3 items have none\)"),
    (
        {"7": 0.1, "300": 0.2, "50": 0.5},
        r"no propensity for raw item id 7 \(3 of RecPack's 3 items",
    ),
    ({7: None, 300: 0.2, 50: 0.5}, "propensity has a missing value at label 7"),
    (
        {7: 0.1, 300: "x", 50: 0.5},
        r"propensity has non-numeric value 'x' \(text\) at \(item index 1\)",
    ),
    (
        {7: 0.1, 300: "0.2", 50: 0.5},  # numbers as text are refused, never parsed
        r"propensity has non-numeric value '0.2' \(text\) at \(item index 1\)",
    ),
    (
        {7: 0.1j, 300: 0.2, 50: 0.5},
        r"propensity has complex dtype complex128 \(value 0.1j at \(item index 0\)\)",
    ),
    (
        {7: 0.1, 300: 0.2, 50: 1.5},
        r"propensity 1.5 of raw item id 50 \(item index 2\) lies outside \(0, 1\]",
    ),
    ({7: 0.1, 300: -0.2, 50: 0.5}, r"propensity -0.2 of raw item id 300 \(item index 1\)"),
]


@pytest.mark.parametrize(
    ("propensity", "match"), BAD_PROPENSITIES, ids=[m[:40] for _, m in BAD_PROPENSITIES]
)
def test_bad_raw_id_propensities_are_refused_with_the_raw_id(propensity, match):
    with pytest.raises(ValueError, match=match):
        RecPackAdapter(propensity=propensity, item_id_mapping=MAPPING)


class _Model:
    """A propensity model whose vector has ``extra`` items more than the data ``X``."""

    def __init__(self, extra: int):
        self.extra = extra

    def fit(self, X):
        self.propensity_ = np.full(X.shape[1] + self.extra, 0.5)
        return self


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: RecPackAdapter(
                propensity=[0.5] * 3, reward_model=RewardMatrix(np.full((2, 4), 0.5))
            ),
            "reward_model covers 4 items but propensity covers 3",
        ),
        (
            lambda: RecPackAdapter(propensity=[0.5] * 3, impressions=sp.csr_matrix((2, 5))),
            "impressions covers 5 items but propensity covers 3",
        ),
        (
            lambda: RecPackAdapter(propensity=_Model(-1)).fit(sp.csr_matrix(np.ones((3, 4)))),
            "propensity covers 3 items but X covers 4",
        ),
        (
            lambda: RecPackAdapter(propensity=[0.5] * 5).fit(sp.csr_matrix(np.ones((3, 4)))),
            "propensity covers 5 items but X covers 4",
        ),
        (
            lambda: RecPackAdapter(propensity=_Model(0), impressions=np.ones((2, 3))).fit(
                sp.csr_matrix(np.ones((3, 4)))
            ),
            "impressions covers 3 items but X covers 4",
        ),
        (
            lambda: RecPackAdapter(propensity=[0.5] * 4, clip=None).evaluate(
                "IPSDCGK", Y_TRUE, Y_PRED, 2
            ),
            r"propensity has shape \(4,\) but y_true has 3 items",
        ),
        (
            lambda: RecPackAdapter(propensity=[0.5] * 2).evaluate(
                "StratifiedNDCGK", Y_TRUE, Y_PRED, 2
            ),
            r"stratify_by has shape \(2,\) but y_true has 3 items",
        ),
    ],
)
def test_propensities_of_another_item_space_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# --- K5: every argument ---------------------------------------------------------------------------


ARGUMENTS = [
    (
        lambda: RecPackAdapter(binning="quantile"),
        r"binning must be one of \('width', 'mass'\), got 'quantile'",
    ),
    (lambda: RecPackAdapter(binning=None), r"binning must be one of \('width', 'mass'\), got None"),
    (lambda: RecPackAdapter(n_strata=0), "n_strata must be a positive integer, got 0"),
    (lambda: RecPackAdapter(discount="log"), "discount must be a Discount model, got str"),
    (
        lambda: RecPackAdapter(reward_model=RewardMatrix(np.full((2, 3), 0.5))),
        "reward_model is used only by DRDCGK .*which need propensities",
    ),
    (
        lambda: RecPackAdapter(impressions=np.ones((2, 3))),
        "impressions is used only by IPSDCGK and DRDCGK .*which need propensities",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5] * 3, impressions=-np.ones((2, 3))),
        r"impressions has value -1.0 at \(user 0, item 0\); impressions are examination "
        r"probabilities: finite and in \[0, 1\]",
    ),
    (
        # A count of impressions is not an examination probability.
        lambda: RecPackAdapter(propensity=[0.5] * 3, impressions=[[0, 2, 1]]),
        r"impressions has value 2.0 at \(user 0, item 1\); impressions are examination "
        r"probabilities: finite and in \[0, 1\]",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5] * 3, impressions="shown"),
        "impressions must hold real numbers",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5] * 3, reward_model="EASE"),
        "reward_model must have a predict",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5, 0.5, 0.5], item_id_mapping=MAPPING),
        "item_id_mapping only places .*with propensity=list it would be ignored",
    ),
    (
        lambda: RecPackAdapter(item_id_mapping=MAPPING),
        "with propensity=NoneType it would be ignored",
    ),
    (
        lambda: RecPackAdapter(propensity=PowerLawPropensity(), item_id_mapping=MAPPING),
        "with propensity=PowerLawPropensity it would be ignored",
    ),
    (
        lambda: RecPackAdapter(propensity=RAW),
        "propensities keyed by raw item id need item_id_mapping",
    ),
    (
        lambda: RecPackAdapter().evaluate(["PlainDCGK"], Y_TRUE, Y_PRED, 2),
        r"unknown estimator \['PlainDCGK'\]",
    ),
    (
        lambda: RecPackAdapter().evaluate("PlainDCGK", Y_TRUE, sp.csr_matrix((2, 4)), 2),
        r"y_true has shape \(2, 3\) but y_pred has \(2, 4\)",
    ),  # returned 0 before
    (
        lambda: RecPackAdapter().evaluate("PlainDCGK", Y_TRUE, Y_PRED, 0),
        "K must be a positive integer, got 0",
    ),
    (
        lambda: RecPackAdapter().register(prefix="two words"),
        "prefix must be a valid Python identifier or '', got 'two words'",
    ),
    (
        lambda: RecPackAdapter().register(prefix=None),
        "prefix must be a valid Python identifier or '', got None",
    ),
    (
        lambda: RecPackAdapter().register(prefix="Args")["ArgsPlainDCGK"](K=[10, 0]),
        r"ArgsPlainDCGK: K must be a positive integer, got \[10, 0\]",
    ),
    (
        lambda: RecPackAdapter().register(prefix="Args")["ArgsRPPK"](K=2.5),
        "ArgsRPPK: K must be a positive integer, got 2.5",
    ),
    (lambda: recpack_ranking(Y_PRED, -1), "K must be a positive integer, got -1"),
    (
        # A misspelt option names the adapter called and the valid options.
        lambda: RecPackAdapter(propensity=[0.5] * 3, clipp=3),
        r"^RecPackAdapter got an unknown option 'clipp' \(did you mean 'clip'\?\); its options "
        r"are binning, clip, discount, impressions, item_id_mapping, n_strata, population, "
        r"propensity, reward_model$",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5] * 3, impressions=[["1", "0", "1"]]),
        r"impressions must hold real numbers, got dtype <U1",
    ),
]


@pytest.mark.parametrize(("call", "match"), ARGUMENTS, ids=[m[:40] for _, m in ARGUMENTS])
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_a_bad_cutoff_in_a_pipelines_k_list_names_the_metric(small_pipeline):
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 30})
    builder.add_metric("BadPlainDCGK", K=[5, 0])
    builder.set_data_from_scenario(small_pipeline.scenario_)
    with pytest.raises(ValueError, match="BadPlainDCGK: K must be a positive integer, got 0"):
        builder.build().run()


@pytest.mark.parametrize("call", [summary, metric_results, preferences])
@pytest.mark.parametrize("bad", ["pipeline", None, object()])
def test_pipeline_arguments_must_be_pipelines(call, bad):
    with pytest.raises(TypeError, match="pipeline must be a RecPack Pipeline after run"):
        call(bad, "BadPlainDCGK_5")


def test_compare_names_the_algorithm_argument(small_pipeline):
    names = list(small_pipeline.get_metrics().index)
    with pytest.raises(ValueError, match="algorithm_a .*got 0"):
        compare(small_pipeline, 0, names[1], "BadPlainDCGK_5")
    with pytest.raises(ValueError, match=r"algorithm_b .*got \['x'\]"):
        compare(small_pipeline, names[0], ["x"], "BadPlainDCGK_5")
    # valid: the paired difference of the per-user DCG values RecPack's own DCGK keeps
    result = compare(small_pipeline, names[0], names[1], "BadPlainDCGK_5")
    per_user = [
        small_pipeline._metric_acc.acc[n]["DCGK_5"].results["score"].to_numpy() for n in names[:2]
    ]
    assert result.difference == pytest.approx((per_user[0] - per_user[1]).mean(), abs=1e-12)


# --- K8: messages that blame the right thing --------------------------------------------------


def test_metric_values_read_before_calculate_say_so():
    classes = RecPackAdapter(propensity=[0.5, 0.5, 0.5]).register(prefix="Early")
    for name in ("EarlyIPSDCGK", "EarlyPlainNDCGK", "EarlyRPPK"):
        metric = classes[name](K=2)
        for attribute in ("value", "results"):
            with pytest.raises(
                ValueError,
                match=rf"{name}_2 has no value yet: call calculate\(y_true, y_pred\) first",
            ):
                getattr(metric, attribute)


def test_a_propensity_model_that_stores_nothing_is_named_at_fit():
    class Forgetful:
        def fit(self, X):
            return self  # but stores no propensity_

    with pytest.raises(TypeError, match=r"Forgetful.fit\(X\) set no propensity_"):
        RecPackAdapter(propensity=Forgetful()).fit(sp.csr_matrix(np.ones((2, 3))))


def test_summary_of_recpacks_own_metric_or_one_not_in_the_pipeline_says_which(small_pipeline):
    with pytest.raises(
        ValueError, match="'DCGK_5' is not a recpack-ope metric, so it keeps no per-user terms"
    ):
        summary(small_pipeline, "DCGK_5")
    with pytest.raises(
        ValueError,
        match=r"metric 'BadPlainDCGK_10' is not in the pipeline; it has \['BadPlainDCGK_5', ",
    ):
        summary(small_pipeline, "BadPlainDCGK_10")
    with pytest.raises(ValueError, match="'BadPlainDCGK_5' is not an RPP metric"):
        preferences(small_pipeline, "BadPlainDCGK_5")
    # valid: the summary's values are RecPack's DCGK means
    table = summary(small_pipeline, "BadPlainDCGK_5")
    for name in table.index:
        assert table.loc[name, "value"] == pytest.approx(
            small_pipeline._metric_acc.acc[name]["DCGK_5"].value, abs=1e-12
        )


def test_the_registered_names_are_the_registrys():
    # OURS and WEIGHTED above spell the names by hand; the registry must give the same.
    from recpack_ope.adapters.recpack import NAMES

    from recpack_ope.registry import ESTIMATORS

    assert set(NAMES) == {*OURS, *WEIGHTED, "DRDCGK", "StratifiedNDCGK"}
    for name, estimator in NAMES.items():
        assert ESTIMATORS[estimator.name].camel + "K" == name


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_all_users_of_y_true_are_averaged_over_and_a_bad_population_is_named():
    # User 1 holds no test item: over all users their IPS-DCG counts 0 (user 0: item 2, p 0.5,
    # at rank 1; user 2: item 0, p 0.1, at rank 2 of K = 2).
    adapter = RecPackAdapter(propensity=[0.1, 0.2, 0.5], clip=None, population="all")
    y_true = sp.csr_matrix(np.array([[0, 0, 1.0], [0, 0, 0], [1.0, 0, 0]]))
    y_pred = sp.csr_matrix(np.array([[0.1, 0.2, 0.9], [0.3, 0.2, 0.1], [0.3, 0.5, 0.0]]))
    per_user = [1 / 0.5, 0.0, (1 / 0.1) / math.log2(3)]
    result = adapter.evaluate("IPSDCGK", y_true, y_pred, K=2)
    np.testing.assert_allclose(result.per_user, per_user)
    assert (result.n_users, result.n_excluded_users) == (3, 0)
    # SNIPS shares RecPack's cached ranking but prepares its own held-out data over all users.
    snips = adapter.evaluate("SNIPSDCGK", y_true, y_pred, K=2)
    assert snips.value == pytest.approx(np.mean(per_user) * (2 / 3) / ((2 + 10) / 3))
    with pytest.raises(ValueError, match="but ndcg divides each user's DCG"):
        RecPackAdapter(population="all").evaluate("PlainNDCGK", y_true, y_pred, K=2)
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'any'"):
        RecPackAdapter(population="any")
