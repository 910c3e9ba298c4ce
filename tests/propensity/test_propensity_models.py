"""Propensity models against powerlaw, Cornac, hand calculations and Monte Carlo recovery."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import powerlaw
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.base import clone

from recpack_ope.metrics.dcg import dcg, ips_dcg
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.propensity.models import (
    FixedPropensity,
    PopularityPropensity,
    PowerLawPropensity,
    item_counts,
)


def test_recovers_exponent_of_synthetic_power_law_counts():
    """scipy's zipf is the discrete power law P(n) = n^-α / ζ(α) with xmin = 1: an independent
    generator. Over 60 replications the MLE must be unbiased within 3 standard errors of the
    mean, its reported standard error must match the spread of the estimates (the sd of 60
    draws is itself uncertain by ~9 %, so ±25 % is ~2.7σ), and |γ̂ − α| ≤ σ̂ must hold in about
    68 % of fits (binomial tolerance 3·√(.68·.32/60) ≈ 0.18)."""
    alpha, reps = 2.3, 60
    rng = np.random.default_rng(11)
    fits = [
        PowerLawPropensity(xmin=1).fit(stats.zipf.rvs(alpha, size=3000, random_state=rng))
        for _ in range(reps)
    ]
    gamma = np.array([f.gamma_ for f in fits])
    se = np.array([f.gamma_se_ for f in fits])
    assert abs(gamma.mean() - alpha) < 3 * gamma.std(ddof=1) / np.sqrt(reps)
    assert 0.75 < se.mean() / gamma.std(ddof=1) < 1.25
    assert abs(np.mean(np.abs(gamma - alpha) <= se) - 0.683) < 0.18


def test_movielens_gamma_matches_powerlaw_fit_directly(movielens):
    counts = np.bincount(movielens.items)
    direct = powerlaw.Fit(counts[counts > 0], discrete=True, verbose=False).power_law
    model = PowerLawPropensity().fit(movielens.matrix())
    assert model.gamma_ == pytest.approx(direct.alpha, abs=1e-12)
    assert model.gamma_se_ == pytest.approx(direct.sigma, abs=1e-12)
    assert model.xmin_ == direct.xmin
    assert np.array_equal(model.counts_, counts)
    # Eq. 7 by hand, rescaled so the most popular item has propensity 1
    expected = (counts / counts.max()) ** ((direct.alpha + 1) / 2)
    assert model.propensity_ == pytest.approx(expected, rel=1e-12)
    assert model.propensity_.max() == 1.0 and model.propensity_.min() > 0


def test_cornac_variant_reproduces_cornacs_estimate(movielens):
    """Cornac's PropensityStratifiedEvaluation cannot be constructed (it passes RatioSplit the data
    list instead of its length in Cornac 2.2.2 and 3.0.1), so its
    _estimate_propensities is called unbound on the raw (user, item, rating) triples."""
    from cornac.eval_methods.propensity_stratified_evaluation import (
        PropensityStratifiedEvaluation,
    )

    triples = list(zip(movielens.users, movielens.items, movielens.ratings, strict=True))
    cornac_props = PropensityStratifiedEvaluation._estimate_propensities(
        SimpleNamespace(data=triples, verbose=False)
    )
    ours = PowerLawPropensity(variant="cornac").fit(movielens.matrix())
    theirs = np.array([cornac_props[i] for i in range(len(movielens.item_ids))], dtype=float)
    assert ours.propensity_ == pytest.approx(theirs / theirs.max(), rel=1e-9)


def test_zero_count_items_get_the_propensity_of_min_count():
    counts = np.array([0, 1, 1, 2, 3, 5, 8, 13, 40, 100])
    model = PowerLawPropensity(xmin=1).fit(counts)
    e = (model.gamma_ + 1) / 2
    assert model.propensity_[0] == pytest.approx((1 / 100) ** e, rel=1e-12)
    assert model.propensity_[0] == model.propensity_[1]
    half = PowerLawPropensity(xmin=1, min_count=0.5).fit(counts)
    assert half.propensity_[0] == pytest.approx((0.5 / 100) ** e, rel=1e-12)


def test_popularity_propensity_is_share_of_interactions():
    X = sp.csr_matrix(np.array([[1, 0, 4, 0], [1, 0, 0, 0], [1, 0, 2, 0], [0, 0, 0, 1]]))
    model = PopularityPropensity().fit(X)
    # ratings count once per user: counts 3, 0, 2, 1 of N = 6; the unseen item counts as 1
    assert np.array_equal(item_counts(X), [3, 0, 2, 1])
    assert model.propensity_ == pytest.approx([3 / 6, 1 / 6, 2 / 6, 1 / 6], abs=1e-15)


def test_fitted_models_plug_into_the_estimators():
    X = sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0]], dtype=float))
    s = np.array([[0.3, 0.2, 0.1], [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    model = PopularityPropensity().fit(X)
    r = ips_dcg(X, s, discount=LogDiscount(3), propensity=model)
    direct = ips_dcg(X, s, discount=LogDiscount(3), propensity=model.propensity_)
    assert np.array_equal(r.per_user, direct.per_user)
    fixed = FixedPropensity(sp.csr_matrix(np.full((3, 3), 0.5))).fit()
    assert ips_dcg(X, s, discount=LogDiscount(3), propensity=fixed).per_user == pytest.approx(
        2 * dcg(X, s, discount=LogDiscount(3)).per_user
    )
    assert clone(PowerLawPropensity(variant="cornac", xmin=3)).get_params() == {
        "variant": "cornac",
        "xmin": 3,
        "min_count": 1.0,
    }


def test_bad_input_errors():
    with pytest.raises(ValueError, match="PowerLawPropensity is not fitted"):
        ips_dcg(
            sp.csr_matrix(np.eye(2)),
            np.eye(2),
            discount=LogDiscount(1),
            propensity=PowerLawPropensity(),
        )
    with pytest.raises(ValueError, match="variant must be 'yang' or 'cornac'"):
        PowerLawPropensity(variant="other").fit(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="item 1 has -2.0"):
        PopularityPropensity().fit(np.array([1, -2, 3]))
    with pytest.raises(ValueError, match="at least two distinct non-zero item counts"):
        PowerLawPropensity().fit(np.array([0, 4, 4]))
    with pytest.raises(ValueError, match="min_count must be finite and > 0"):
        PopularityPropensity(min_count=0).fit(np.array([1, 2]))
    with pytest.raises(ValueError, match="X has no interactions"):
        PopularityPropensity().fit(np.zeros(3))
    with pytest.raises(ValueError, match=r"propensity 2.0 of \(user 1, item 0\) lies outside"):
        FixedPropensity(sp.csr_matrix(np.array([[0.5, 0], [2.0, 0.1]]))).fit()
    with pytest.raises(ValueError, match="propensity 0.0 of item 2 lies outside"):
        FixedPropensity(np.array([0.5, 1.0, 0.0])).fit()


def _likelihood_argmax(tail, xmin):
    """Brute force: the discrete power-law log-likelihood on a grid of step 1e-4."""
    from scipy import special

    grid = np.arange(1.01, 8.0, 1e-4)
    ll = -grid * np.log(tail).sum() - tail.size * np.log(special.zeta(grid, xmin))
    return grid[np.argmax(ll)]


@pytest.mark.parametrize("exponent", [3.6, 4.5])
def test_steep_tails_are_not_stopped_at_powerlaws_bound_of_three(exponent):
    counts = stats.zipf.rvs(exponent, size=20_000, random_state=1)
    fit = PowerLawPropensity(xmin=1).fit(counts)
    assert fit.gamma_ == pytest.approx(_likelihood_argmax(counts.astype(float), 1.0), abs=2e-4)
    # The MLE's standard error here is ≈ 0.02: the sample's exponent lies within 3 SE.
    assert abs(fit.gamma_ - exponent) < 3 * fit.gamma_se_
    tiny = PowerLawPropensity().fit(np.array([4, 4, 9]))
    assert tiny.gamma_ == pytest.approx(
        _likelihood_argmax(np.array([4.0, 4.0, 9.0]), 4.0), abs=2e-4
    )


def test_shallow_tails_keep_powerlaws_estimate():
    counts = stats.zipf.rvs(2.2, size=20_000, random_state=1)
    expected = powerlaw.Fit(counts, discrete=True, xmin=1, verbose=False).power_law.alpha
    assert PowerLawPropensity(xmin=1).fit(counts).gamma_ == expected


@pytest.mark.parametrize("value", [object(), {"a": 1}, {1, 2}])
def test_a_single_non_numeric_value_is_refused_by_name(value):
    from recpack_ope._validation import real_array
    from recpack_ope.propensity.models import FixedPropensity

    with pytest.raises(ValueError, match=r"x has non-numeric value .* at a 0-d position"):
        real_array(value, "x")
    with pytest.raises(ValueError, match=r"propensity has non-numeric value .* at a 0-d position"):
        FixedPropensity(value).fit()
