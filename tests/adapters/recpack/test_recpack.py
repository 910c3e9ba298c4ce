"""The RecPack adapter in real RecPack pipelines, checked against RecPack's own metrics.

Needs RecPack (legacy environment); the modern nox session excludes this folder explicitly.
"""

from __future__ import annotations

import math
import warnings

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
from recpack_ope.adapters.recpack import (
    OPEMetricK,
    RecPackAdapter,
    compare,
    metric_results,
    recpack_ranking,
    summary,
)
from recpack_ope.adapters.recpack_datasets import load_interactions
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, TopK, dcg, ndcg, pn_dcg
from recpack_ope.inference.diagnostics import ESS_RATIO_THRESHOLD, ReliabilityWarning
from recpack_ope.propensity.weights import RECOMMENDED_CLIP

# Unweighted, registered by every adapter; the deprecated names mean DCG without propensities.
OURS = ("PlainDCGK", "PlainNDCGK", "PostNormalisedDCGK", "UnbiasedDCGK", "SNUnbiasedDCGK")
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
    """EASE, KUNN, ItemKNN and Popularity (ties in its scores) with RecPack's and our metrics.

    The FutureWarnings of the deprecated names are kept as ``p.future_warnings_``."""
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
    power_law = (
        "PowerLawIPSDCGK",
        "PowerLawUnbiasedDCGK",
        "PowerLawStratifiedNDCGK",
        "DefaultIPSDCGK",
        "AutoIPSDCGK",
    )
    for name in ("DCGK", "NDCGK", *OURS, *power_law):
        builder.add_metric(name, K=[10, 100])
    builder.set_data_from_scenario(scenario)
    p = builder.build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        p.run()
    p.future_warnings_ = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
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
        # Plain metrics are RecPack's; the deprecated names without propensities are plain DCG
        # (self-normalisation with equal weights changes nothing)
        for name in ("PlainDCGK", "UnbiasedDCGK", "SNUnbiasedDCGK"):
            assert ours[name].value == pytest.approx(recpack_dcg.value, abs=1e-12), (
                algorithm,
                name,
            )
            assert ours[name].result_.diagnostics is None  # unweighted
        assert ours["PlainNDCGK"].value == pytest.approx(recpack_ndcg.value, abs=1e-12), algorithm
        # per user too, including Popularity's tied scores
        for name, theirs in (
            ("PlainDCGK", recpack_dcg),
            ("UnbiasedDCGK", recpack_dcg),
            ("PlainNDCGK", recpack_ndcg),
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
    first = module._LAST.get(y_pred, 2)
    assert module._LAST.get(y_pred, 2) is first  # reused by the next metric
    assert module._LAST.get(y_pred, 1) is not first  # another K
    y_pred.data[0] = 0.0  # edited in place: ranked again, never served stale
    np.testing.assert_array_equal(module._LAST.get(y_pred, 2).items, [[2, 1], [1, 2]])
    copy = y_pred.copy()  # equal content, another object
    assert module._LAST.get(copy, 2) is not module._LAST.get(y_pred, 2)


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
    # the deprecated name keeps its meaning: IPS-weighted with the adapter's propensities
    old = _metric(pipeline, ease, "PowerLawUnbiasedDCGK_100")
    np.testing.assert_array_equal(old.results["score"], ours.results["score"])


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
        RecPackAdapter().evaluate(
            "StratifiedNDCGK", sp.csr_matrix([[1.0]]), sp.csr_matrix([[1.0]]), 1
        )


def test_propensities_keyed_by_raw_item_id_are_mapped_to_recpack_indices():
    import pandas as pd

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
        with pytest.raises(ValueError, match="'ForeignPlainDCGK' that is not recpack-ope's"):
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
    with pytest.raises(AssertionError, match="Shape mismatch"):
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
        values[l2] = dcg(
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


# --- names that say whether a metric is IPS-weighted (issue 16) -------------------------------

WEIGHTED = ("IPSDCGK", "SNIPSDCGK", "IPSNDCGK", "IPSPostNormalisedDCGK")
PLAIN_FOR = {
    "IPSDCGK": "PlainDCGK",
    "SNIPSDCGK": "PlainDCGK",
    "IPSNDCGK": "PlainNDCGK",
    "IPSPostNormalisedDCGK": "PostNormalisedDCGK",
    "StratifiedNDCGK": "PlainNDCGK",
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
            ValueError,
            match=f"NoP{name} .*the adapter registered under prefix "
            f"'NoP' has no propensities; use NoP{replacement} ",
        ):
            METRIC_REGISTRY.get(f"NoP{name}")(K=10)
        with pytest.raises(ValueError, match=f"the adapter has none \\(use {replacement}\\)"):
            RecPackAdapter().evaluate(name, sp.csr_matrix([[1.0]]), sp.csr_matrix([[1.0]]), 1)


def test_pipeline_asking_for_an_ips_metric_without_propensities_says_why(scenario):
    RecPackAdapter().register(prefix="Unweighted")
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 100})
    builder.add_metric("UnweightedIPSNDCGK", K=10)
    builder.set_data_from_scenario(scenario)
    pipeline = builder.build()
    with pytest.raises(
        ValueError,
        match="UnweightedIPSNDCGK is IPS-weighted, but the adapter "
        ".* has no propensities; use UnweightedPlainNDCGK",
    ):
        pipeline.run()


def test_an_adapter_without_propensities_keeps_earlier_ips_metrics():
    first = RecPackAdapter(propensity=[0.5, 1.0]).register(prefix="Keep")
    RecPackAdapter().register(prefix="Keep")
    for name in (*WEIGHTED, "StratifiedNDCGK"):
        assert METRIC_REGISTRY.get(f"Keep{name}") is first[f"Keep{name}"]
    # the names every adapter registers are rebound to the last one
    for name in OURS:
        assert METRIC_REGISTRY.get(f"Keep{name}").adapter.propensity is None


def test_deprecated_names_warn_and_name_their_replacement(pipeline):
    messages = pipeline.future_warnings_
    expected = {
        "UnbiasedDCGK": "PlainDCGK",
        "SNUnbiasedDCGK": "PlainDCGK",
        "PowerLawUnbiasedDCGK": "PowerLawIPSDCGK",
    }
    for old, new in expected.items():
        assert any(m.startswith(f"{old} is deprecated") and f"use {new}," in m for m in messages), (
            old
        )
    # constructed one at a time: a FutureWarning for the old names only
    RecPackAdapter().register(prefix="Old")
    RecPackAdapter(propensity=[0.5, 1.0]).register(prefix="OldP")
    for prefix, old, new in (
        ("Old", "UnbiasedDCGK", "PlainDCGK"),
        ("Old", "SNUnbiasedDCGK", "PlainDCGK"),
        ("OldP", "UnbiasedDCGK", "IPSDCGK"),
        ("OldP", "SNUnbiasedDCGK", "SNIPSDCGK"),
    ):
        with pytest.warns(FutureWarning, match=f"^{prefix}{old} is deprecated.*use {prefix}{new},"):
            METRIC_REGISTRY.get(f"{prefix}{old}")(K=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for name in (*OURS[:3], *WEIGHTED, "StratifiedNDCGK"):
            METRIC_REGISTRY.get(f"OldP{name}")(K=5)


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
        "IPSDCGK": (dcg, {}),
        "SNIPSDCGK": (dcg, {"self_normalised": True}),
        "IPSNDCGK": (ndcg, {}),
        "IPSPostNormalisedDCGK": (pn_dcg, {}),
        "PlainDCGK": (dcg, {}),
        "PlainNDCGK": (ndcg, {}),
        "PostNormalisedDCGK": (pn_dcg, {}),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        for name, (function, options) in core.items():
            metric = classes[f"Core{name}"](K=3)
            metric.calculate(y_true, y_pred)
            weighted = name in WEIGHTED
            expected = function(
                y_true,
                y_pred,
                discount=LogDiscount(3),
                propensity=p if weighted else None,
                clip=clip if weighted else None,
                **options,
            )
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
        with pytest.raises(ValueError, match="clip must be a finite number > 0") as caught:
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
        *diagnostics,
        "p_vs_best",
        "tied_with_best",
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


def test_default_clipping_is_the_recommended_one(pipeline, scenario):
    adapter = METRIC_REGISTRY.get("DefaultIPSDCGK").adapter
    assert adapter.clip == RECOMMENDED_CLIP
    y_true = scenario.test_data_out.binary_values
    table = summary(pipeline, "DefaultIPSDCGK_100")
    assert "clip" not in table.columns  # a fixed clipping: nothing selected
    for algorithm, row in table.iterrows():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            expected = dcg(
                y_true,
                _recpack_top_k(pipeline, algorithm, y_true.shape[0], 100),
                discount=LogDiscount(100),
                propensity=adapter.propensity,
                clip=RECOMMENDED_CLIP,
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            expected = dcg(
                y_true,
                _recpack_top_k(pipeline, algorithm, y_true.shape[0], 100),
                discount=LogDiscount(100),
                propensity=adapter.propensity,
                clip="auto",
            )
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
    np.testing.assert_array_equal(module._LAST.get(y_pred, 2).items, [[0, 2], [1, 2]])
    y_pred.indices[:3] = [2, 1, 0]  # row 0 now scores item 2 at 0.9, item 0 at 0.5
    np.testing.assert_array_equal(module._LAST.get(y_pred, 2).items, [[2, 0], [1, 2]])
    data, indices = np.array([0.9, 0.5, 0.3, 0.8]), np.array([0, 1, 2, 3])
    moved = sp.csr_matrix((data, indices, np.array([0, 1, 4])), shape=(2, 4))
    np.testing.assert_array_equal(module._LAST.get(moved, 2).items, [[0, -1], [3, 1]])
    moved.indptr[1] = 2  # row 0 now holds items 0, 1 (0.9, 0.5); row 1 items 2, 3 (0.3, 0.8)
    np.testing.assert_array_equal(module._LAST.get(moved, 2).items, [[0, 1], [3, 2]])


def test_metrics_on_one_ranking_prepare_the_held_out_data_once(monkeypatch):
    """RecPack builds a new ``y_true`` for every metric; the held-out data prepared for the
    first metric on a ranking serves the others while the contents of ``y_true`` and the
    propensities stay the same, and is prepared again when either changes (also when an item
    moves so that the sums of the indices stay equal). Every value equals the core's."""
    from recpack_ope.adapters import recpack as module

    prepared = []
    original = module.prepare_held_out
    monkeypatch.setattr(
        module, "prepare_held_out", lambda *a, **kw: prepared.append(1) or original(*a, **kw)
    )
    rng = np.random.default_rng(8)
    y_pred = sp.csr_matrix(rng.random((6, 8)))
    held_out = (rng.random((6, 8)) < 0.3).astype(float)
    held_out[0] = [0, 1, 0, 0, 1, 0, 0, 0]
    y_true = sp.csr_matrix(held_out)
    p = np.linspace(0.2, 0.9, 8)
    adapter = RecPackAdapter(propensity=p, clip=None)
    ranking, discount = TopK.from_scores(y_pred, 3), LogDiscount(3)
    options = {
        "IPSDCGK": {},
        "SNIPSDCGK": {"self_normalised": True},
        "IPSNDCGK": {"normalise": "per_user"},
        "IPSPostNormalisedDCGK": {"normalise": "post"},
    }

    def check(name, truth, propensity):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            ours = adapter.evaluate(name, truth.copy(), y_pred, 3)  # a new object, as in RecPack
            core = dcg(
                truth, ranking, discount=discount, propensity=propensity, **options.get(name, {})
            )
        assert ours.value == pytest.approx(core.value, rel=1e-12)

    for name in options:
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
    assert module._LAST.get(y_pred, 2).items.tolist() == [[3, 0]]
    y_pred.data[:] = [1.0, 4.0, 5.0, 2.0]
    assert module._LAST.get(y_pred, 2).items.tolist() == [[2, 1]]
