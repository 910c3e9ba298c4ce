"""``recpack_ope.spark.stratified``: :func:`stratified` equals the in-memory
:func:`recpack_ope.metrics.stratified` (value to 1e-12 relative, interval bounds and p-values
to 1e-9, strata to 1e-12), keeps a plain base plain when propensities are given, and refuses a
weighted base without propensities naming the plain one."""

import warnings

import pytest

import recpack_ope as ro
from recpack_ope import metrics as core_metrics
from recpack_ope import spark as rs

#: The discount of the equality tests (that of the ``core`` oracle, conftest.py).
D = ro.LogDiscount(5)
#: The discount of the bad-input test on the ``frames`` fixture.
D3 = ro.LogDiscount(3)


@pytest.mark.parametrize(
    "binning, n_strata, metric",
    [("width", 2, "ndcg"), ("mass", 3, "pn_dcg"), ("width", 4, "ips_dcg")],
)
def test_stratified_equals_in_memory(world, binning, n_strata, metric, same, close):
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


def test_a_plain_base_stays_plain_when_propensities_are_given(world, same, core):
    """``ndcg`` with ``propensity=`` as a stratified base: its holdout estimate is the plain
    nDCG (no weights, no diagnostics); the held-out estimators: test_spark_held_out.py."""
    y_true, y_score = world["y_true"], world["scores"]["m0"]
    options = {"discount": D, "propensity": world["p_frame"], "n_partitions": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ro.ReliabilityWarning)
        strata = rs.stratified(
            world["held"],
            world["frames"]["m0"],
            stratify_by=world["p_frame"],
            metric="ndcg",
            **options,
        )
    plain = core("ndcg", y_true, y_score, None, None)
    same(strata.holdout, plain)


@pytest.mark.parametrize(
    "name, plain",
    [
        ("ips_dcg", "dcg"),
        ("snips_dcg", "dcg"),
        ("ips_ndcg", "ndcg"),
        ("ips_pn_dcg", "pn_dcg"),
        ("ips_recall", "recall"),
    ],
)
def test_weighted_base_without_propensity_is_refused_naming_the_plain_one(frames, name, plain):
    """As a stratified base (by evaluate and per_user: test_spark_held_out.py)."""
    held, recs = frames["make"](frames["held"]), frames["make"](frames["recs"])
    with pytest.raises(ValueError, match=rf"{name} needs propensity=.*'{plain}'"):
        rs.stratified(
            held, recs, stratify_by=frames["make"](frames["prop"]), metric=name, discount=D3
        )
