"""The Spark path equals the in-memory path: value to 1e-12 relative, interval bounds and
p-values to 1e-9, with ties, users without positive rewards, clipping and 16 partitions."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import recpack_ope as ro
from recpack_ope import metrics as core_metrics
from recpack_ope import spark as rs
from recpack_ope.logged import DeterministicRanker, FeedLog
from recpack_ope.registry import estimator, names

N_USERS, N_ITEMS, D = 240, 40, ro.LogDiscount(5)


def close(a, b, rel):
    assert a == pytest.approx(b, rel=rel, abs=rel * 1e-3), (a, b)


def same(estimate, reference):
    """A summary estimate equals an in-memory estimate."""
    assert estimate.name == reference.name
    assert estimate.n_users == reference.n_users
    assert estimate.n_excluded_users == reference.n_excluded_users
    close(estimate.value, reference.value, 1e-12)
    for ours, theirs in zip(
        estimate.confidence_interval(0.9), reference.confidence_interval(0.9), strict=True
    ):
        close(ours, theirs, 1e-9)
    close(estimate.standard_error, reference.standard_error, 1e-9)
    assert (estimate.diagnostics is None) == (reference.diagnostics is None)
    if reference.diagnostics is not None:
        for field in ("n_weights", "ess", "max_weight", "top_share", "n_clipped", "clipped_mass"):
            close(
                getattr(estimate.diagnostics, field), getattr(reference.diagnostics, field), 1e-12
            )


@pytest.fixture(scope="module")
def world(spark):
    """Graded held-out rewards (some users with only zero rewards), two models with tied
    integer scores over some of the items, item propensities; frames and matrices."""
    rng = np.random.default_rng(7)
    rewards = sp.random(
        N_USERS,
        N_ITEMS,
        density=0.12,
        random_state=3,
        format="csr",
        data_rvs=lambda n: rng.integers(1, 4, n).astype(float),
    )
    rows, cols = rewards.nonzero()
    held = pd.DataFrame(
        {
            "user": rows.astype(np.int64),
            "item": cols.astype(np.int64),
            "reward": np.asarray(rewards[rows, cols]).ravel(),
        }
    )
    users = np.unique(rows)
    # Users 0..9 keep their rows but every reward is 0: counted as excluded, never dropped.
    held.loc[held.user < 10, "reward"] = 0.0
    zero_users = int(np.unique(held.user[held.user < 10]).size)
    y_true = sp.csr_matrix(
        (held.reward, (np.searchsorted(users, held.user), held.item)), shape=(users.size, N_ITEMS)
    )
    scores, frames = {}, {}
    for m in range(3):
        dense = rng.integers(0, 4, size=(users.size, N_ITEMS)).astype(float)  # many ties
        dense[rng.random(dense.shape) < 0.4] = 0
        matrix = sp.csr_matrix(dense)
        scores[f"m{m}"] = matrix
        r, c = matrix.nonzero()
        frame = pd.DataFrame(
            {"user": users[r].astype(np.int64), "item": c.astype(np.int64), "score": matrix.data}
        )
        if m == 2:  # one model given by ranks: rank by score, ties to the lower item id
            frame = frame.sort_values(["user", "score", "item"], ascending=[True, False, True])
            frame["rank"] = frame.groupby("user").cumcount() + 1
            frame = frame.drop(columns="score")
        frames[f"m{m}"] = spark.createDataFrame(frame)
    propensity = rng.uniform(0.02, 1.0, N_ITEMS)
    return {
        "held": spark.createDataFrame(held),
        "frames": frames,
        "y_true": y_true,
        "scores": scores,
        "p": propensity,
        "zero_users": zero_users,
        "p_frame": spark.createDataFrame(
            pd.DataFrame({"item": np.arange(N_ITEMS, dtype=np.int64), "propensity": propensity})
        ),
    }


def core(metric, y_true, y_score, p, clip):
    """The in-memory estimate of the Spark estimator ``metric`` (its core function)."""
    weights = {"propensity": p, "clip": clip}
    calls = {
        "dcg": lambda: core_metrics.dcg(y_true, y_score, discount=D),
        "ndcg": lambda: core_metrics.ndcg(y_true, y_score, discount=D),
        "pn_dcg": lambda: core_metrics.pn_dcg(y_true, y_score, discount=D),
        "recall": lambda: core_metrics.recall(y_true, y_score, k=5),
        "ips_dcg": lambda: core_metrics.ips_dcg(y_true, y_score, discount=D, **weights),
        "snips_dcg": lambda: core_metrics.snips_dcg(y_true, y_score, discount=D, **weights),
        "ips_ndcg": lambda: core_metrics.ips_ndcg(y_true, y_score, discount=D, **weights),
        "ips_pn_dcg": lambda: core_metrics.ips_pn_dcg(y_true, y_score, discount=D, **weights),
        "ips_recall": lambda: core_metrics.ips_recall(y_true, y_score, k=5, **weights),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        return calls[metric]()


#: Every held-out estimator of the registry that Spark computes: all but the doubly robust
#: (a reward model) and the stratified one (``rs.stratified``).
ON_SPARK = tuple(
    n for n in names("held_out") if estimator(n).weighting not in ("doubly_robust", "stratified")
)


def test_spark_computes_every_held_out_estimator_but_dr_and_stratified():
    assert ON_SPARK == (
        "dcg",
        "ndcg",
        "pn_dcg",
        "recall",
        "ips_dcg",
        "snips_dcg",
        "ips_ndcg",
        "ips_pn_dcg",
        "ips_recall",
    )


@pytest.mark.parametrize("clip", [None, 8.0])
def test_every_held_out_estimator_and_comparison_equals_in_memory(world, clip):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"],
            world["frames"],
            metrics=ON_SPARK,
            discount=D,
            propensity=world["p_frame"],
            clip=clip,
            n_partitions=16,
        )
    references = {}
    for model, y_score in world["scores"].items():
        for metric in ON_SPARK:
            # Plain estimators ignore the propensities given for the weighted ones.
            references[model, metric] = core(metric, world["y_true"], y_score, world["p"], clip)
            same(result[model][metric], references[model, metric])
            assert result[model][metric].n_excluded_users == world["zero_users"] > 0
    for metric in ON_SPARK:
        ours = result.compare("m0", "m2", metric, level=0.9)
        theirs = references["m0", metric].compare(references["m2", metric], 0.9, names=("m0", "m2"))
        assert ours.name == theirs.name
        close(ours.difference, theirs.difference, 1e-12)
        close(ours.p_value, theirs.p_value, 1e-9)
        for a, b in zip(ours.confidence_interval, theirs.confidence_interval, strict=True):
            close(a, b, 1e-9)


def test_single_frame_and_per_user_frame(world, spark):
    one = rs.evaluate(
        world["held"], world["frames"]["m1"], metrics="pn_dcg", discount=D, n_partitions=16
    )
    reference = core("pn_dcg", world["y_true"], world["scores"]["m1"], None, None)
    assert list(one.estimates) == ["model"]
    same(one["model"]["pn_dcg"], reference)
    frame = rs.per_user(
        world["held"],
        world["frames"]["m1"],
        metrics=("pn_dcg", "ndcg"),
        discount=D,
        n_partitions=16,
    )
    table = frame.toPandas().sort_values("user")
    ndcg = core("ndcg", world["y_true"], world["scores"]["m1"], None, None)
    np.testing.assert_allclose(table["ndcg"], ndcg.terms[:, 0], rtol=1e-12)
    np.testing.assert_allclose(table[["pn_dcg_dcg", "pn_dcg_idcg"]], reference.terms, rtol=1e-12)
    assert set(table["model"]) == {"model"}


def test_plain_names_stay_plain_when_propensities_are_given(world):
    """``ndcg`` with ``propensity=`` is the plain nDCG (no weights, no diagnostics), in the
    estimates, the per-user frame and as a stratified base; ``ips_ndcg`` is the weighted one."""
    y_true, y_score = world["y_true"], world["scores"]["m0"]
    options = {"discount": D, "propensity": world["p_frame"], "n_partitions": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        result = rs.evaluate(
            world["held"], world["frames"]["m0"], metrics=("ndcg", "ips_ndcg"), **options
        )["model"]
        table = rs.per_user(
            world["held"], world["frames"]["m0"], metrics=("recall", "pn_dcg"), **options
        ).toPandas()
        strata = rs.stratified(
            world["held"],
            world["frames"]["m0"],
            stratify_by=world["p_frame"],
            metric="ndcg",
            **options,
        )
    plain = core("ndcg", y_true, y_score, None, None)
    same(result["ndcg"], plain)
    assert result["ndcg"].diagnostics is None
    same(result["ips_ndcg"], core("ips_ndcg", y_true, y_score, world["p"], None))
    assert result["ips_ndcg"].value != pytest.approx(plain.value, rel=1e-6)
    table = table.sort_values("user")
    pn = core("pn_dcg", y_true, y_score, None, None)
    np.testing.assert_allclose(table[["pn_dcg_dcg", "pn_dcg_idcg"]], pn.terms, rtol=1e-12)
    recall = core("recall", y_true, y_score, None, None)
    np.testing.assert_allclose(table["recall"], recall.terms[:, 0], rtol=1e-12)
    same(strata.holdout, plain)


def test_win_rates_equal_in_memory(world):
    ours = rs.win_rates(world["held"], world["frames"], weighting="dcg", n_partitions=16)
    theirs = core_metrics.win_rates(world["y_true"], world["scores"], weighting="dcg")
    for m, name in enumerate(theirs.names):
        assert ours[name].n_users == theirs.per_user.shape[0]
        assert ours[name].n_excluded_users == theirs.n_excluded_users
        close(ours[name].value, theirs.means[m], 1e-12)
        se = theirs.per_user[:, m].std(ddof=1) / math.sqrt(theirs.per_user.shape[0])
        close(ours[name].standard_error, se, 1e-9)
    diff = theirs.per_user[:, 0] - theirs.per_user[:, 1]
    from scipy import stats

    close(
        ours["m0"].compare(ours["m1"]).p_value,
        stats.ttest_rel(theirs.per_user[:, 0], theirs.per_user[:, 1]).pvalue,
        1e-9,
    )
    close(ours["m0"].compare(ours["m1"]).difference, diff.mean(), 1e-12)


@pytest.mark.parametrize("normalise", [None, "per_user", "post"])
def test_logged_dcg_equals_in_memory(spark, normalise):
    rng = np.random.default_rng(11)
    n_contexts, n_items = 50, 25
    rows = []
    for session in range(300):
        context = int(rng.integers(n_contexts))
        for rank, item in enumerate(rng.choice(n_items, 6, replace=False)):
            rows.append(
                (
                    f"s{session}",
                    context,
                    int(item),
                    rank + 1,
                    float(rng.random() < 0.25) * float(rng.integers(1, 3)),
                    float(rng.uniform(0.05, 1)),
                )
            )
    log = pd.DataFrame(rows, columns=["session", "context", "item", "rank", "reward", "propensity"])
    scores = rng.integers(0, 3, size=(n_contexts, n_items)).astype(float)
    target = pd.DataFrame(
        [(c, i, scores[c, i]) for c in range(n_contexts) for i in range(n_items)],
        columns=["context", "item", "score"],
    )
    # rankings for contexts without sessions do not matter (some partitions hold only those)
    target = pd.concat(
        [target, pd.DataFrame({"context": np.arange(100, 140), "item": 0, "score": 1.0})]
    )
    feed = FeedLog.from_arrays(
        log.session,
        log.item,
        log["rank"],
        log.reward,
        context=log.context,
        propensity=log.propensity,
        n_items=n_items,
        n_contexts=n_contexts,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        reference = ro.logged_dcg(
            feed, DeterministicRanker(scores), discount=D, clip=6.0, normalise=normalise
        )
        ours = rs.logged_dcg(
            spark.createDataFrame(log),
            spark.createDataFrame(target),
            discount=D,
            clip=6.0,
            normalise=normalise,
            n_partitions=16,
        )
    same(ours, reference)


@pytest.mark.parametrize(
    "binning, n_strata, metric",
    [("width", 2, "ndcg"), ("mass", 3, "pn_dcg"), ("width", 4, "ips_dcg")],
)
def test_stratified_equals_in_memory(world, binning, n_strata, metric):
    weighted = metric == "ips_dcg"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        ours = rs.stratified(
            world["held"],
            world["frames"],
            stratify_by=world["p_frame"],
            metric=metric,
            n_strata=n_strata,
            binning=binning,
            discount=D,
            propensity=world["p_frame"] if weighted else None,
            clip=8.0 if weighted else None,
            n_partitions=16,
        )
        core_metric = {
            "ndcg": core_metrics.ndcg,
            "pn_dcg": core_metrics.pn_dcg,
            "ips_dcg": core_metrics.ips_dcg,
        }[metric]
        extra = {"propensity": world["p"], "clip": 8.0} if weighted else {}
        theirs = {
            m: core_metrics.stratified(
                core_metric,
                world["y_true"],
                s,
                stratify_by=world["p"],
                n_strata=n_strata,
                binning=binning,
                discount=D,
                **extra,
            )
            for m, s in world["scores"].items()
        }
    for model, reference in theirs.items():
        estimate = ours[model]
        assert estimate.name == reference.name
        close(estimate.value, reference.value, 1e-12)
        for a, b in zip(
            estimate.confidence_interval(0.9), reference.confidence_interval(0.9), strict=True
        ):
            close(a, b, 1e-9)
        same(estimate.holdout, reference.holdout)
        assert (
            estimate.n_items == reference.n_items
            and estimate.n_interactions == reference.n_interactions
        )
        for s_ours, s_theirs in zip(estimate.strata, reference.strata, strict=True):
            assert (s_ours.label, s_ours.n_interactions, s_ours.n_items) == (
                s_theirs.label,
                s_theirs.n_interactions,
                s_theirs.n_items,
            )
            close(s_ours.lower, s_theirs.lower, 1e-12)
            close(s_ours.upper, s_theirs.upper, 1e-12)
            close(s_ours.share, s_theirs.share, 1e-12)
            if s_theirs.result is not None:
                same(s_ours.result, s_theirs.result)
    ours_cmp = ours["m0"].compare(ours["m1"], 0.9)
    theirs_cmp = theirs["m0"].compare(theirs["m1"], 0.9)
    close(ours_cmp.difference, theirs_cmp.difference, 1e-12)
    close(ours_cmp.p_value, theirs_cmp.p_value, 1e-9)
