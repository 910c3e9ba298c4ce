"""Bad and edge-case input to the RecPack adapter (issue 19): RecPackAdapter, its id maps,
register, the metric classes, summary, compare, preferences and recpack_ranking (legacy env).

Every case either gets a clear error from our code naming the argument and the offending value
(or raw item id), or, where the input is valid, the number an independent route gives (IPS-DCG
by hand, propensities placed by hand).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from recpack.matrix import InteractionMatrix
from recpack.pipelines import PipelineBuilder
from recpack.scenarios import WeakGeneralization
from recpack_ope.adapters.recpack import (
    RecPackAdapter,
    compare,
    metric_results,
    preferences,
    recpack_ranking,
    summary,
)

from recpack_ope import PowerLawPropensity, RewardMatrix

pytestmark = pytest.mark.usefixtures("quiet_recpack")

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
def pipeline():
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
        "item_id_mapping must be RecPack's item_id_mapping DataFrame, or a Series or mapping raw item id → item index, got list",
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
    ({7: 0.1, 300: "x", 50: 0.5}, r"propensity has non-numeric value 'x' at \(item index 1\)"),
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
        "reward_model is used only by DRDCGK, which need propensities, and this adapter has none",
    ),
    (
        lambda: RecPackAdapter(impressions=np.ones((2, 3))),
        "impressions is used only by IPSDCGK and DRDCGK, which need propensities",
    ),
    (
        lambda: RecPackAdapter(propensity=[0.5] * 3, impressions=-np.ones((2, 3))),
        r"impressions has value -1.0 at \(user 0, item 0\); impressions are expected examinations",
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
        "item_id_mapping only places propensities keyed by raw item id .* with propensity=list it would be ignored",
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
]


@pytest.mark.parametrize(("call", "match"), ARGUMENTS, ids=[m[:40] for _, m in ARGUMENTS])
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_a_bad_cutoff_in_a_pipelines_k_list_names_the_metric(pipeline):
    builder = PipelineBuilder()
    builder.add_algorithm("Popularity", params={"K": 30})
    builder.add_metric("BadPlainDCGK", K=[5, 0])
    builder.set_data_from_scenario(pipeline.scenario_)
    with pytest.raises(ValueError, match="BadPlainDCGK: K must be a positive integer, got 0"):
        builder.build().run()


@pytest.mark.parametrize("call", [summary, metric_results, preferences])
@pytest.mark.parametrize("bad", ["pipeline", None, object()])
def test_pipeline_arguments_must_be_pipelines(call, bad):
    with pytest.raises(TypeError, match="pipeline must be a RecPack Pipeline after run"):
        call(bad, "BadPlainDCGK_5")


def test_compare_names_the_algorithm_argument(pipeline):
    names = list(pipeline.get_metrics().index)
    with pytest.raises(ValueError, match="algorithm_a must be an algorithm identifier .* got 0"):
        compare(pipeline, 0, names[1], "BadPlainDCGK_5")
    with pytest.raises(
        ValueError, match=r"algorithm_b must be an algorithm identifier .* got \['x'\]"
    ):
        compare(pipeline, names[0], ["x"], "BadPlainDCGK_5")
    # valid: the paired difference of the per-user DCG values RecPack's own DCGK keeps
    result = compare(pipeline, names[0], names[1], "BadPlainDCGK_5")
    per_user = [
        pipeline._metric_acc.acc[n]["DCGK_5"].results["score"].to_numpy() for n in names[:2]
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


def test_summary_of_recpacks_own_metric_or_one_not_in_the_pipeline_says_which(pipeline):
    with pytest.raises(
        ValueError, match="'DCGK_5' is not a recpack-ope metric, so it keeps no per-user terms"
    ):
        summary(pipeline, "DCGK_5")
    with pytest.raises(
        ValueError,
        match=r"metric 'BadPlainDCGK_10' is not in the pipeline; it has \['BadPlainDCGK_5', ",
    ):
        summary(pipeline, "BadPlainDCGK_10")
    with pytest.raises(ValueError, match="'BadPlainDCGK_5' is not an RPP metric"):
        preferences(pipeline, "BadPlainDCGK_5")
    # valid: the summary's values are RecPack's DCGK means
    table = summary(pipeline, "BadPlainDCGK_5")
    for name in table.index:
        assert table.loc[name, "value"] == pytest.approx(
            pipeline._metric_acc.acc[name]["DCGK_5"].value, abs=1e-12
        )
