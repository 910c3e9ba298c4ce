"""Bad and edge-case input to the Cornac adapter (issue 19): metrics, CornacAdapter,
PropensityStratifiedEvaluation, add_rpp, tied_with_best, simpsons_paradox and the helpers.

Every case either gets a clear error from our code naming the argument and the offending value
(or raw item id), or, where the input is valid, the number an independent route gives (Cornac's
own ranking, scipy's t-test, the split sizes by RatioSplit's documented formula). Runs in both
environments: Cornac is installed in each.
"""

from __future__ import annotations

import math

import cornac
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from cornac.eval_methods import CrossValidation, RatioSplit
from cornac.metrics import Recall
from cornac.models import BPR, MostPop
from recpack_ope.adapters import cornac as adapter
from scipy import stats

from recpack_ope import TopK, rpp
from recpack_ope.propensity import FixedPropensity

THRESHOLD = 3.0


@pytest.fixture(scope="module")
def triplets():
    """40 users rating 8 of 25 items 1–5; raw item ids sort unlike Cornac's internal indices."""
    rng = np.random.default_rng(0)
    return [
        (f"u{u}", f"item-{99 - i}", float(rng.integers(1, 6)))
        for u in range(40)
        for i in rng.choice(25, 8, replace=False)
    ]


@pytest.fixture(scope="module")
def split(triplets):
    return RatioSplit(triplets, test_size=0.3, rating_threshold=THRESHOLD, seed=1, verbose=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Cornac's Experiment writes its log to the working directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cornac"))
        yield


def _run(method, models):
    experiment = cornac.Experiment(method, models, metrics=[Recall(k=5)], verbose=False)
    experiment.run()
    return experiment


@pytest.fixture(scope="module")
def experiment(split, workdir):
    return _run(split, [MostPop(), BPR(k=3, seed=1, verbose=False)])


def _cornac_top(method, model, users, k):
    """Each user's top k by Cornac's own ``rank`` over Cornac's candidates: every known item
    but the user's positive training items, which stay candidates when also held out."""
    test, train = method.test_set.csr_matrix, method.train_set.csr_matrix
    rows = []
    for u in users:
        held = set(test[u].indices[test[u].data >= THRESHOLD])
        seen = set(train[u].indices[train[u].data >= THRESHOLD])
        candidates = [i for i in range(method.train_set.num_items) if i not in seen or i in held]
        rows.append(model.rank(int(u), np.array(candidates), k=k)[0][:k])
    return TopK(np.vstack(rows))


# --- K1: structurally corrupt sparse input ----------------------------------------------------


def test_corrupt_sparse_propensities_are_refused_before_compiled_code():
    p = sp.csr_matrix(np.full((2, 3), 0.5))
    p.indices[1] = 7  # column 7 of a 3-column matrix
    with pytest.raises(
        ValueError, match="propensity is a corrupt sparse matrix: stored entry 1 .*column index 7"
    ):
        adapter.UnbiasedDCG(k=5, propensity=p)
    with pytest.raises(ValueError, match="propensity is a corrupt sparse matrix"):
        adapter.CornacAdapter(propensity=p)


# --- K2: propensities keyed by raw item id, and vectors of the item space's length ------------


def test_raw_id_propensities_land_on_cornacs_indices_in_any_order(split):
    raw_ids = list(split.global_iid_map)
    rng = np.random.default_rng(3)
    given = {
        raw: float(p) for raw, p in zip(raw_ids, rng.uniform(0.05, 1.0, len(raw_ids)), strict=True)
    }
    shuffled = pd.Series(given).sample(frac=1.0, random_state=2)
    shuffled["not-in-the-data"] = 0.7  # ids Cornac does not know are ignored
    for source in (given, shuffled):
        p = adapter.CornacAdapter(propensity=source).fit(split).propensity_.propensity_
        expected = np.empty(len(raw_ids))
        for raw, index in split.global_iid_map.items():
            expected[index] = given[raw]
        np.testing.assert_array_equal(p, expected)


def _raw_case(split, edit):
    raw_ids = list(split.global_iid_map)
    series = pd.Series({raw: 0.5 for raw in raw_ids}, dtype=object)
    return edit(series, raw_ids)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda s, r: pd.concat([s, pd.Series({r[2]: 0.7})]),
            "propensity has raw item id '{r2}' more than once",
        ),
        (
            lambda s, r: pd.concat([s, pd.Series({r[2]: 0.5})]),
            "propensity has raw item id '{r2}' more than once",
        ),
        (
            lambda s, r: s.drop(r[4]),
            r"no propensity for raw item id '{r4}' \(1 of the eval method's 25 items",
        ),
        (lambda s, r: s.set_axis([*r[:-1], "other"]), "no propensity for raw item id '{last}'"),
        (
            lambda s, r: s.where(s.index != r[1], None),
            "propensity has a missing value at label '{r1}'",
        ),
        (
            lambda s, r: s.where(s.index != r[3], "x"),
            r"non-numeric value 'x' at \(item index {i3}\)",
        ),
        (
            lambda s, r: s.where(s.index != r[3], 0.5 + 0.1j),
            r"non-numeric value \(0.5\+0.1j\) at \(item index {i3}\)",
        ),
        (
            lambda s, r: pd.Series({raw: 0.5 + 0.1j for raw in r}),
            "propensity has complex dtype complex128",
        ),
        (
            lambda s, r: s.where(s.index != r[5], 1.5),
            r"propensity 1.5 of raw item id '{r5}' \(item index {i5}\) lies outside \(0, 1\]",
        ),
        (
            lambda s, r: s.where(s.index != r[5], 0.0),
            r"propensity 0.0 of raw item id '{r5}' \(item index {i5}\)",
        ),
        (lambda s, r: {}, "no propensity for raw item id"),
    ],
)
def test_bad_raw_id_propensities_are_refused_with_the_id(split, edit, match):
    raw_ids = list(split.global_iid_map)
    names = {f"r{k}": raw for k, raw in enumerate(raw_ids)} | {"last": raw_ids[-1]}
    names |= {f"i{k}": split.global_iid_map[raw_ids[k]] for k in (3, 5)}
    with pytest.raises(ValueError, match=match.format_map(names)):
        adapter.CornacAdapter(propensity=_raw_case(split, edit)).fit(split)


class _Counts:
    """A propensity model whose vector has ``extra`` items more than the counts."""

    def __init__(self, extra):
        self.extra = extra

    def fit(self, counts):
        self.propensity_ = np.full(counts.size + self.extra, 0.5)
        return self


@pytest.mark.parametrize(
    "make",
    [
        lambda n: np.full(n - 1, 0.5),
        lambda n: np.full(n + 3, 0.5),
        lambda n: FixedPropensity(np.full(n - 2, 0.5)),
        lambda n: _Counts(-1),
        lambda n: _Counts(4),
    ],
)
def test_propensity_vectors_not_of_the_item_space_are_refused(split, make):
    n = split.total_items
    with pytest.raises(
        ValueError, match=f"propensity has \\d+ values but the eval method has {n} items"
    ):
        adapter.CornacAdapter(propensity=make(n)).fit(split)


def test_stratified_evaluation_refuses_a_propensity_model_of_another_item_space(triplets):
    with pytest.raises(
        ValueError, match="propensity has 27 values but the eval method has 25 items"
    ):
        adapter.PropensityStratifiedEvaluation(
            triplets, rating_threshold=THRESHOLD, seed=1, propensity=_Counts(2)
        )


def test_given_propensity_vectors_of_the_item_space_are_used_as_given(split):
    p = np.linspace(0.1, 1.0, split.total_items)
    for given in (p, FixedPropensity(p), FixedPropensity(p).fit()):
        np.testing.assert_array_equal(
            adapter.CornacAdapter(propensity=given).fit(split).propensity_.propensity_, p
        )


def test_user_dependent_propensities_are_refused_by_the_per_user_metrics():
    with pytest.raises(
        ValueError,
        match=r"propensity must be one value per item \(a 1-D vector\), got shape \(3, 4\)",
    ):
        adapter.UnbiasedDCG(k=5, propensity=sp.csr_matrix(np.full((3, 4), 0.5)))


# --- K5: every argument ---------------------------------------------------------------------------


def _pse(triplets, **kwargs):
    return adapter.PropensityStratifiedEvaluation(
        triplets, **{"rating_threshold": THRESHOLD, "seed": 1, **kwargs}
    )


SIZE = (
    r"must be a fraction of the ratings in \(0, 1\) or a number of ratings \(an integer >= 1\), got"
)
VAL_SIZE = r"val_size must be a fraction of the ratings in \[0, 1\) or a number of ratings \(an integer >= 0\), got"
SEED = r"seed must be None, an integer in 0..2\*\*32 − 1 or a numpy RandomState \(Cornac's\), got"

PSE_ARGUMENTS = [
    ({"test_size": 0}, f"test_size {SIZE} 0$"),
    ({"test_size": 1.5}, f"test_size {SIZE} 1.5$"),
    ({"test_size": 1.0}, f"test_size {SIZE} 1.0$"),
    ({"test_size": -0.1}, f"test_size {SIZE} -0.1$"),
    ({"test_size": math.nan}, f"test_size {SIZE} nan$"),
    ({"test_size": "0.2"}, f"test_size {SIZE} '0.2'$"),
    ({"test_size": None}, f"test_size {SIZE} None$"),
    ({"test_size": True}, f"test_size {SIZE} True$"),
    ({"val_size": -0.2}, f"{VAL_SIZE} -0.2$"),
    ({"val_size": 1.0}, f"{VAL_SIZE} 1.0$"),
    (
        {"val_size": 0.9},
        r"test_size=0.2 and val_size=0.9 leave no training data among the 320 ratings",
    ),
    (
        {"test_size": 320},
        r"test_size=320 and val_size=0.0 leave no training data among the 320 ratings",
    ),
    ({"n_strata": 0}, "n_strata must be a positive integer, got 0"),
    ({"n_strata": 2.5}, "n_strata must be a positive integer, got 2.5"),
    ({"batch_users": 0}, "batch_users must be a positive integer, got 0"),
    ({"batch_users": -5}, "batch_users must be a positive integer, got -5"),
    ({"fit_on": "test"}, "fit_on must be 'all' or 'train', got 'test'"),
    ({"binning": "quantile"}, r"binning must be one of \('width', 'mass'\), got 'quantile'"),
    ({"rating_threshold": math.nan}, "rating_threshold must be finite, got nan"),
    ({"rating_threshold": "4"}, "rating_threshold must be a finite real number, got '4'"),
    ({"seed": -1}, f"{SEED} -1$"),
    ({"seed": 1.5}, f"{SEED} 1.5$"),
    ({"seed": 2**32}, f"{SEED} 4294967296$"),
    ({"seed": np.random.default_rng(1)}, SEED),
    ({"keep_rankings": "no"}, "keep_rankings must be True or False, got 'no'"),
    ({"exclude_unknowns": "no"}, "exclude_unknowns must be True or False, got 'no'"),
    ({"verbose": 1}, "verbose must be True or False, got 1"),
    (
        {"propensity": np.full(25, 0.5)},
        r"propensity must be a propensity model .*FixedPropensity\(values\).* got ndarray",
    ),
    ({"propensity": "powerlaw"}, "propensity must be a propensity model .* got str"),
    (
        {"reward_model": object()},
        r"reward_model must be a Cornac recommender \(with fit and score, e.g. MostPop\(\)\) or None, got object",
    ),
    ({"reward_model": "MostPop"}, "reward_model must be a Cornac recommender .* got str"),
    ({"clip": 0}, "clip must be a finite number > 0"),
]


@pytest.mark.parametrize(("kwargs", "match"), PSE_ARGUMENTS, ids=[str(k) for k, _ in PSE_ARGUMENTS])
def test_stratified_evaluation_arguments_are_refused_by_name(triplets, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _pse(triplets, **kwargs)


@pytest.mark.parametrize("data", [[], "abc", b"xyz", 5])
def test_stratified_evaluation_needs_rating_triplets(data):
    with pytest.raises(
        ValueError, match=r"data must be a non-empty list of \(user, item, rating\) triplets"
    ):
        adapter.PropensityStratifiedEvaluation(data)


def test_valid_split_sizes_and_seeds_split_as_ratio_split_documents(triplets):
    n = len(triplets)
    # RatioSplit: a fraction f holds out ceil(f·n) ratings, an integer that many
    for kwargs, test, val in (
        ({"test_size": 0.3}, math.ceil(0.3 * n), 0),
        ({"test_size": 50, "val_size": 20}, 50, 20),
        ({"test_size": 0.1, "val_size": 0.25}, math.ceil(0.1 * n), math.ceil(0.25 * n)),
    ):
        method = _pse(triplets, **kwargs)
        assert (method.train_size, method.val_size, method.test_size) == (n - test - val, val, test)
    # a RandomState is a seed Cornac takes: the same split as its integer
    by_state = _pse(triplets, seed=np.random.RandomState(7))
    by_int = _pse(triplets, seed=7)
    for a, b in zip(by_state.test_set.uir_tuple, by_int.test_set.uir_tuple, strict=True):
        np.testing.assert_array_equal(a, b)


def test_adapter_arguments_are_refused_at_construction(split):
    with pytest.raises(ValueError, match="on must be 'all' or 'train', got 'test'"):
        adapter.CornacAdapter(on="test")
    with pytest.raises(TypeError, match="discount must be a Discount model, got str"):
        adapter.CornacAdapter(discount="log")
    with pytest.raises(ValueError, match="propensity must hold real numbers, got dtype <U8"):
        adapter.CornacAdapter(propensity="powerlaw")  # before any split or training
    with pytest.raises(ValueError, match=r"propensity 1.5 of item 1 lies outside \(0, 1\]"):
        adapter.CornacAdapter(propensity=[0.5, 1.5])
    for bad in ("split", None, RatioSplit):
        with pytest.raises(
            TypeError, match="eval_method must be a Cornac eval method after its split"
        ):
            adapter.CornacAdapter().fit(bad)
    with pytest.raises(
        TypeError, match="eval_method must be a Cornac eval method after its split .* got str"
    ):
        adapter.item_counts("split")


@pytest.mark.parametrize(
    ("k", "match"),
    [
        (0, "k must be a positive integer or -1 \\(whole ranking\\), got 0$"),
        (np.int64(0), "k must be a positive integer or -1 \\(whole ranking\\), got 0$"),
        (-2, "got -2$"),
        (2.5, "got 2.5$"),
        (True, "got True$"),
        ("10", "got '10'$"),
        ([5, 10], r"k must be one cutoff, got \[5, 10\]: make one metric per cutoff"),
    ],
)
def test_metric_cutoffs_are_refused_by_name(k, match):
    for cls in (adapter.UnbiasedDCG, adapter.IPSNDCG, adapter.PostNormalisedDCG):
        with pytest.raises(ValueError, match=match):
            cls(k=k, propensity=[0.5, 1.0])


def test_per_user_metric_refuses_negative_item_indices():
    metric = adapter.UnbiasedDCG(k=5, propensity=[0.5, 1.0, 0.25], clip=None)
    with pytest.raises(ValueError, match="gt_pos has item index -1"):
        metric.compute(gt_pos=np.array([-1]), pd_rank=np.array([0, 1, 2]))
    # valid: item 2 (weight 4) at rank 2 → 4 / log2(3)
    assert metric.compute(gt_pos=np.array([2]), pd_rank=np.array([0, 2, 1])) == pytest.approx(
        4 / math.log2(3)
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"users": np.array([10**6])},
            "users has user index 1000000 at position 0, outside the eval method's users 0..39",
        ),
        ({"users": np.array([3, -1])}, "users has user index -1 at position 1, outside"),
        (
            {"users": np.array([1.5])},
            "users must be a 1-D array of Cornac user indices, got dtype float64",
        ),
        ({"users": np.array([[1]])}, r"got dtype int64 and shape \(1, 1\)"),
        ({"cutoff": 0}, "cutoff must be a positive integer or None, got 0"),
        ({"cutoff": -1}, "cutoff must be a positive integer or None, got -1"),
        ({"batch_users": 0}, "batch_users must be a positive integer, got 0"),
    ],
)
def test_rank_test_users_arguments_are_refused_by_name(split, kwargs, match):
    model = MostPop().fit(split.train_set)
    call = {"users": np.array([0, 1]), "cutoff": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        adapter.rank_test_users(split, model, call.pop("users"), call.pop("cutoff"), **call)


def test_rank_test_users_valid_batches_equal_cornacs_rank(split):
    model = BPR(k=3, seed=1, verbose=False).fit(split.train_set)
    users = np.array([5, 0, 17, 3, 39])
    for batch in (1, 2, 10):
        ranked = adapter.rank_test_users(split, model, users, 4, batch_users=batch)
        np.testing.assert_array_equal(ranked.items, _cornac_top(split, model, users, 4).items)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": -1}, "k must be a positive integer or None, got -1"),
        ({"k": 2.5}, "k must be a positive integer or None, got 2.5"),
        ({"k": True}, "k must be a positive integer or None, got True"),
        ({"k": "10"}, "k must be a positive integer or None, got '10'"),
        ({"column": 5}, "column must be a non-empty name or None, got 5"),
        ({"column": ""}, "column must be a non-empty name or None, got ''"),
        (
            {"column": "Recall@5"},
            "column 'Recall@5' would overwrite the experiment's own 'Recall@5' values",
        ),
        ({"column": "Train (s)"}, "column 'Train \\(s\\)' would overwrite"),
        ({"weighting": "linear"}, "weighting must be one of"),
    ],
)
def test_add_rpp_arguments_are_refused_by_name(experiment, kwargs, match):
    before = [dict(r.metric_avg_results) for r in experiment.result]
    with pytest.raises(ValueError, match=match):
        adapter.add_rpp(experiment, **kwargs)
    assert [dict(r.metric_avg_results) for r in experiment.result] == before  # nothing overwritten


def test_experiment_arguments_must_be_experiments(experiment):
    for call in (adapter.add_rpp, lambda e: adapter.tied_with_best(e, "Recall@5")):
        for bad in ("experiment", experiment.result, None):
            with pytest.raises(TypeError, match="experiment must be a cornac.Experiment, got"):
                call(bad)


def test_simpsons_paradox_needs_stratified_results(experiment):
    with pytest.raises(
        TypeError, match=r"a must be a StratifiedModelResult \(experiment.result\[i\] .* got Result"
    ):
        adapter.simpsons_paradox(experiment.result[0], experiment.result[1])
    with pytest.raises(TypeError, match="a must be a StratifiedModelResult .* got str"):
        adapter.simpsons_paradox("BPR", experiment.result[1])


def test_stratified_evaluation_refuses_a_non_model_and_no_metrics(triplets):
    method = _pse(triplets)
    with pytest.raises(TypeError, match="model must be a Cornac recommender, got str"):
        method.evaluate("MostPop", [Recall(k=5)], user_based=True)
    with pytest.raises(ValueError, match=r"metrics is empty: give ranking metrics"):
        method.evaluate(MostPop(), [], user_based=True)


# --- K8: messages that blame the right thing --------------------------------------------------


def test_experiment_that_has_not_run_is_named(split):
    pending = cornac.Experiment(split, [MostPop(), MostPop()], metrics=[Recall(k=5)], verbose=False)
    with pytest.raises(
        ValueError, match=r"the experiment has no results yet: call experiment.run\(\) first"
    ):
        adapter.tied_with_best(pending, "Recall@5")
    with pytest.raises(
        ValueError, match=r"the experiment has no results yet: call experiment.run\(\) first"
    ):
        adapter.add_rpp(pending)


def test_rating_threshold_above_every_rating_is_named_at_construction(triplets):
    with pytest.raises(
        ValueError, match=r"no test rating reaches rating_threshold=6.0 \(the largest is 5.0\)"
    ):
        adapter.PropensityStratifiedEvaluation(triplets, rating_threshold=6.0, seed=1)


def test_propensity_model_whose_fit_returns_nothing_is_named(split, triplets):
    class Forgetful:
        def fit(self, counts):
            self.propensity_ = np.full(counts.size, 0.5)  # but returns None

    match = r"Forgetful.fit\(counts\) returned NoneType, not a fitted propensity model"
    with pytest.raises(TypeError, match=match):
        adapter.CornacAdapter(propensity=Forgetful()).fit(split)  # was: silently unweighted
    with pytest.raises(TypeError, match=match):
        _pse(triplets, propensity=Forgetful())


def test_tied_with_best_keeps_models_that_share_a_name_apart(split, workdir):
    """Two models named BPR: one used to replace the other, and the core then said the sample
    had one system. Each is now its own system, tested by scipy's paired t-test."""
    models = [BPR(k=3, seed=1, verbose=False), BPR(k=3, seed=2, max_iter=1, verbose=False)]
    experiment = _run(split, models)
    ties = adapter.tied_with_best(experiment, "Recall@5")
    assert ties.names == ("BPR (1)", "BPR (2)")
    per_user = [r.metric_user_results["Recall@5"] for r in experiment.result]
    users = sorted(per_user[0])
    a, b = (np.array([values[u] for u in users]) for values in per_user)
    assert ties.best == ("BPR (1)" if a.mean() >= b.mean() else "BPR (2)")
    other = 1 - ties.names.index(ties.best)
    assert ties.p_value[other] == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert adapter.add_rpp(experiment).names == ("BPR (1)", "BPR (2)")


def test_tied_with_best_refuses_cross_validation_by_name(triplets, workdir):
    method = CrossValidation(triplets, n_folds=2, rating_threshold=THRESHOLD, seed=1, verbose=False)
    experiment = _run(method, [MostPop(), BPR(k=3, seed=1, verbose=False)])
    with pytest.raises(
        ValueError, match="tied_with_best needs per-user results of one train/test split"
    ):
        adapter.tied_with_best(experiment, "Recall@5")
    with pytest.raises(ValueError, match="add_rpp needs a single train/test split"):
        adapter.add_rpp(experiment)


def test_add_rpp_works_on_a_stratified_evaluation(triplets, workdir):
    """Refused before as "cross-validation" (Cornac stores this single split's results like
    cross-validation's); RPP of Cornac's own rankings through the core, computed directly."""
    method = _pse(triplets)
    models = [BPR(k=3, seed=1, verbose=False), BPR(k=4, seed=2, verbose=False, name="BPR4")]
    experiment = _run(method, models)
    matrix = adapter.add_rpp(experiment, k=5)
    assert matrix.names == ("BPR", "BPR4")
    test = method.test_set.csr_matrix
    positives = sp.csr_matrix((test >= THRESHOLD).astype(float))[:, : method.train_set.num_items]
    users = np.flatnonzero(np.diff(positives.indptr) > 0)
    a, b = (_cornac_top(method, m, users, 5) for m in models)
    expected = rpp(positives[users], a, b, k=5, graded=False)
    np.testing.assert_allclose(matrix.pair("BPR", "BPR4").per_user, expected.per_user, atol=1e-12)
    wins = matrix.win_rates().means
    assert [r.metric_avg_results["RPP@5 win"] for r in experiment.result] == list(wins)
