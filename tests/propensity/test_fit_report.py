"""Propensity-model diagnostics against hand counts, powerlaw called directly, and samples
drawn from known distributions."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import powerlaw
import pytest
from sklearn.exceptions import NotFittedError

import recpack_ope.propensity
from recpack_ope.propensity.fit_report import PropensityFitReport
from recpack_ope.propensity.models import PopularityPropensity, PowerLawPropensity

# Hand-made counts: ten items, one never interacted with, N = 173.
COUNTS = np.array([0, 1, 1, 2, 3, 5, 8, 13, 40, 100])


@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def direct_fit(counts, xmin):
    """powerlaw on the non-zero counts, as its documentation shows, without our model."""
    return powerlaw.Fit(counts[counts > 0], discrete=True, xmin=xmin, verbose=False)


def test_shares_below_xmin_and_count_summary_by_hand():
    model = PowerLawPropensity(xmin=3).fit(COUNTS)
    report = model.report()
    # Below xmin = 3: the items with 0, 1, 1 and 2 interactions.
    assert report.share_items_below_xmin == pytest.approx(4 / 10, abs=1e-15)
    assert report.share_interactions_below_xmin == pytest.approx((0 + 1 + 1 + 2) / 173, abs=1e-15)
    assert (report.n_items, report.n_interactions) == (10, 173.0)
    assert (report.n_zero_count_items, report.n_below_min_count) == (1, 1)
    assert (report.count_min, report.count_median, report.count_max) == (0.0, 4.0, 100.0)
    assert report.count_mean == pytest.approx(17.3, abs=1e-12)
    assert (report.gamma, report.gamma_se, report.xmin) == (model.gamma_, model.gamma_se_, 3.0)
    # Eq. 7 rescaled to max 1: the rarest items (0 → min_count 1, and 1) get (1/100)^((γ+1)/2).
    exponent = (model.gamma_ + 1) / 2
    assert report.min_propensity == pytest.approx(0.01**exponent, rel=1e-12)
    assert report.max_propensity == 1.0
    assert report.max_inverse_propensity == pytest.approx(100**exponent, rel=1e-12)
    assert report.model == "PowerLawPropensity(xmin=3)"


@pytest.mark.parametrize("xmin", [1, 3])
def test_ks_and_likelihood_ratios_equal_powerlaw_called_directly(xmin):
    report = PowerLawPropensity(xmin=xmin).fit(COUNTS).report()
    fit = direct_fit(COUNTS, xmin)
    assert report.ks_distance == pytest.approx(fit.power_law.D, abs=1e-12)
    for alternative, result in (
        ("lognormal", report.lr_lognormal),
        ("exponential", report.lr_exponential),
    ):
        r, p = fit.distribution_compare("power_law", alternative, normalized_ratio=True)
        assert result == pytest.approx((r, p), abs=1e-9)


def test_chosen_xmin_and_its_tests_equal_powerlaw_called_directly(movielens):
    counts = np.bincount(movielens.items).astype(float)
    report = PowerLawPropensity().fit(movielens.matrix()).report()
    fit = direct_fit(counts, None)
    assert report.xmin == fit.power_law.xmin
    assert report.ks_distance == pytest.approx(fit.power_law.D, abs=1e-12)
    r, p = fit.distribution_compare("power_law", "lognormal", normalized_ratio=True)
    assert report.lr_lognormal == pytest.approx((r, p), rel=1e-9)
    below = counts < fit.power_law.xmin
    assert report.share_items_below_xmin == pytest.approx(below.mean(), abs=1e-15)
    assert report.share_interactions_below_xmin == pytest.approx(
        counts[below].sum() / counts.sum(), abs=1e-15
    )


def test_zipf_counts_favour_the_power_law_over_an_exponential():
    """numpy's zipf draws the discrete power law P(n) ∝ n^-α from n = 1, so with xmin = 1
    the tail is the whole sample and an exponential must lose clearly."""
    counts = np.random.default_rng(3).zipf(2.3, size=3000)
    report = PowerLawPropensity(xmin=1).fit(counts).report()
    r, p = report.lr_exponential
    assert r > 0 and p < 0.05
    assert report.verdict.startswith("The power law fits the tail better than an exponential")


def test_lognormal_counts_do_not_favour_the_power_law_over_a_lognormal():
    counts = np.round(np.random.default_rng(3).lognormal(mean=2.0, sigma=1.0, size=3000))
    chosen = PowerLawPropensity().fit(counts).report()
    assert chosen.lr_lognormal[0] < 0
    # Over all counts (xmin = 1) the lognormal wins decisively.
    whole = PowerLawPropensity(xmin=1).fit(counts).report()
    r, p = whole.lr_lognormal
    assert r < 0 and p < 0.01
    assert whole.verdict.startswith("The power law is not the better fit for the tail: a lognormal")


def test_verdict_says_when_eq7_only_describes_the_tail():
    # xmin = 5 leaves 0, 1, 1, 2, 3 (5 of 10 items) below it: not most items.
    half = PowerLawPropensity(xmin=5).fit(COUNTS).report()
    assert "only describes the tail" not in half.verdict
    # xmin = 8 leaves 6 of 10 items and 12 of 173 interactions below it.
    most = PowerLawPropensity(xmin=8).fit(COUNTS).report()
    assert "Eq. 7 only describes the tail, since xmin = 8 leaves 60% of items (7% of " in (
        most.verdict
    )


def test_popularity_report_by_hand():
    counts = np.array([0, 0, 1, 3, 6])  # N = 10
    report = PopularityPropensity(min_count=0.5).fit(counts).report()
    # p = max(n, 0.5) / 10 = [.05, .05, .1, .3, .6]
    assert report.min_propensity == pytest.approx(0.05, abs=1e-15)
    assert report.max_propensity == pytest.approx(0.6, abs=1e-15)
    assert report.max_inverse_propensity == pytest.approx(20, rel=1e-12)
    assert (report.n_zero_count_items, report.n_below_min_count) == (2, 2)
    assert (report.count_median, report.count_mean) == (1.0, 2.0)
    # min_count = 2 also floors the item with one interaction, p_min = 2/10.
    floored = PopularityPropensity(min_count=2).fit(counts).report()
    assert (floored.n_zero_count_items, floored.n_below_min_count) == (2, 3)
    assert floored.max_inverse_propensity == pytest.approx(5, rel=1e-12)
    power_law_fields = (
        "gamma",
        "gamma_se",
        "xmin",
        "share_items_below_xmin",
        "share_interactions_below_xmin",
        "ks_distance",
        "lr_lognormal",
        "lr_exponential",
    )
    assert all(getattr(report, name) is None for name in power_law_fields)
    assert "do not apply" in report.verdict and "1/p_min = 20" in report.verdict
    assert "2 items have fewer than min_count = 0.5" in report.verdict
    assert "power law: not fitted" in report.summary()


def test_summary_repr_dict_and_immutability():
    report = PowerLawPropensity(xmin=3).fit(COUNTS).report()
    assert repr(report) == report.summary()
    assert report.summary().splitlines()[-1] == f"  verdict: {report.verdict}"
    data = report.to_dict()
    assert "counts" not in data
    assert set(data) == {f.name for f in dataclasses.fields(report)} - {"counts"}
    assert json.loads(json.dumps(data))["lr_lognormal"] == list(report.lr_lognormal)
    assert all(type(v) is float for v in (data["ks_distance"], *data["lr_exponential"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.gamma = 2.0
    with pytest.raises(ValueError, match="read-only"):
        report.counts[0] = 1


def test_report_leaves_the_fitted_model_unchanged():
    model = PowerLawPropensity().fit(COUNTS)
    before = (model.gamma_, model.gamma_se_, model.xmin_, model.propensity_.copy())
    first = model.report()
    assert (model.gamma_, model.gamma_se_, model.xmin_) == before[:3]
    assert np.array_equal(model.propensity_, before[3])
    assert model.report().to_dict() == first.to_dict()


def test_ccdf_plot_draws_the_empirical_ccdf_the_fit_and_xmin(plt):
    model = PowerLawPropensity(xmin=3).fit(COUNTS)
    report = model.report()
    _, given = plt.subplots()
    ax = report.plot(ax=given)
    assert ax is given and len(ax.lines) == 3 and len(ax.collections) == 0
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    empirical, fitted, xmin = ax.lines
    # Share of the nine non-zero counts that are >= n, at every distinct n.
    observed = COUNTS[COUNTS > 0]
    n = np.unique(observed)
    assert np.array_equal(empirical.get_xdata(), n)
    hand = [np.mean(observed >= v) for v in n]
    assert np.allclose(empirical.get_ydata(), hand, rtol=0, atol=1e-15)
    # powerlaw's own CCDF of the tail, scaled by the share of counts that reach xmin (6 of 9).
    tail = n[n >= 3]
    assert np.array_equal(fitted.get_xdata(), tail)
    expected = 6 / 9 * direct_fit(COUNTS, 3).power_law.ccdf(tail)
    assert np.allclose(fitted.get_ydata(), expected, rtol=1e-9, atol=0)
    assert list(xmin.get_xdata()) == [3, 3]


def test_popularity_plot_has_only_the_empirical_ccdf(plt):
    ax = PopularityPropensity().fit(COUNTS).report().plot()
    assert len(ax.lines) == 1 and len(ax.collections) == 0
    assert "1 with zero count not shown" in ax.get_legend().get_texts()[0].get_text()


@pytest.mark.parametrize("model", [PowerLawPropensity(), PopularityPropensity()])
def test_unfitted_model_names_the_fix(model):
    with pytest.raises(ValueError, match=r"not fitted: call fit\(X\)") as error:
        model.report()
    assert isinstance(error.value, NotFittedError)


def test_from_counts_checks_alignment():
    with pytest.raises(ValueError, match="same length"):
        PropensityFitReport.from_counts("m", [1, 2, 3], [0.5, 1.0])


def test_exported_from_the_propensity_subpackage():
    assert recpack_ope.propensity.PropensityFitReport is PropensityFitReport
    assert "PropensityFitReport" in recpack_ope.propensity.__all__


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(model=3), r"model must be a str.*\bint\b"),
        (dict(counts=[1, -2]), r"counts.*item 1 has -2\.0"),
        (dict(counts=[0, 0]), r"counts hold no interaction"),
        (dict(counts=np.array([1, 2 + 1j])), r"counts has complex dtype"),
        (dict(propensity=[0.0, 0.5]), r"propensity 0\.0 of item 0 lies outside"),
        (dict(propensity=[np.nan, 0.5]), r"propensity nan of item 0 lies outside"),
        (dict(propensity=[1.0]), r"same length, got shapes \(2,\) and \(1,\)"),
        (dict(min_count=-1), r"min_count.*got -1"),
        (
            dict(gamma=2.0),
            r"power-law fit needs all of gamma.*"
            r"gamma_se, xmin, ks_distance, lr_lognormal, lr_exponential not given",
        ),
        (dict(gamma="x"), r"gamma.*got 'x'"),
        (dict(lr_lognormal=(1.0,)), r"lr_lognormal.*got \(1\.0,\)"),
        (dict(lr_exponential="ab"), r"lr_exponential.*got 'ab'"),
        (
            dict(
                gamma=2.0,
                gamma_se=0.1,
                xmin=np.nan,
                ks_distance=0.1,
                lr_lognormal=(1, 0.5),
                lr_exponential=(1, 0.5),
            ),
            r"gamma and xmin.*got 2\.0 and nan",
        ),
    ],
)
def test_fit_report_arguments_are_checked(kwargs, message):
    arguments = dict(model="m", counts=[1, 2], propensity=[1.0, 0.5]) | kwargs
    model, counts, propensity = (arguments.pop(k) for k in ("model", "counts", "propensity"))
    with pytest.raises((ValueError, TypeError), match=message):
        PropensityFitReport.from_counts(model, counts, propensity, **arguments)
