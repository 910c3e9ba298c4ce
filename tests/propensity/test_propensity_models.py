"""Propensity models against powerlaw, Cornac, hand calculations and Monte Carlo recovery."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import powerlaw
import pytest
import scipy.sparse as sp
from conftest import (
    coo_with_duplicate,
    corrupt_indices,
    corrupt_indptr,
    propensity_with_duplicate,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import minimize_scalar
from scipy.special import zeta
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


@pytest.mark.parametrize("form", ["csr", "coo", "dense", "frame"])
@pytest.mark.parametrize("model", [PowerLawPropensity(xmin=1), PopularityPropensity()])
@pytest.mark.parametrize("value", [-1.0, -0.5, -np.inf, np.nan])
def test_negative_and_missing_interactions_are_refused_with_their_position(form, model, value):
    X = np.array([[1.0, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 1]])
    X[2, 1] = value
    given = {
        "csr": sp.csr_matrix,
        "coo": sp.coo_matrix,
        "dense": np.asarray,
        "frame": pd.DataFrame,
    }[form](X)
    # pandas reports a NaN itself, by index and column label
    message = rf"X has (value {value}|a missing value) at \((user|index) 2, (item|column) 1\)"
    with pytest.raises(ValueError, match=message):
        clone(model).fit(given)


def test_every_stored_non_zero_counts_once_and_stored_zeros_do_not_count():
    binary = np.array([[1.0, 0, 1, 0], [1, 0, 1, 1], [1, 1, 0, 0], [0, 0, 1, 0]])
    # by hand: items 0..3 have 3, 1, 3, 1 users with a non-zero entry
    expected = np.array([3.0, 1.0, 3.0, 1.0])
    for values in (binary, binary * 5.0, binary * 0.5, binary * [[0.5], [5.0], [2.0], [1e-9]]):
        X = sp.csr_matrix(values)
        assert np.array_equal(item_counts(X), expected)
        np.testing.assert_array_equal(
            PopularityPropensity().fit(X).propensity_, expected / expected.sum()
        )
    # explicit zeros stored in the sparse structure are not interactions
    stored = sp.csr_matrix(
        (
            np.array([1.0, 0.0, 1.0, 0.0, 0.0]),
            (np.array([0, 0, 1, 2, 3]), np.array([0, 1, 0, 1, 3])),
        ),
        shape=(4, 4),
    )
    assert stored.nnz == 5
    assert np.array_equal(item_counts(stored), [2.0, 0.0, 0.0, 0.0])
    assert stored.nnz == 5  # the caller's matrix is not changed
    # a (user, item) stored twice is summed first: +1 and -1 cancel to no interaction
    cancelled = sp.coo_matrix(([1.0, -1.0, 1.0], ([0, 0, 1], [2, 2, 0])), shape=(2, 3))
    assert np.array_equal(item_counts(cancelled), [1.0, 0.0, 0.0])
    fitted = PowerLawPropensity(xmin=1).fit(sp.csr_matrix(binary * 5.0))
    np.testing.assert_array_equal(fitted.counts_, expected)
    assert fitted.gamma_ == PowerLawPropensity(xmin=1).fit(expected).gamma_


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


def discrete_power_law_mle(counts, xmin):
    """γ maximising the discrete power-law likelihood ``Π n^-γ / ζ(γ, xmin)`` of the counts
    ``>= xmin``, by a bounded scalar search on the closed-form log-likelihood."""
    x = np.asarray(counts, dtype=float)
    x = x[x >= xmin]

    def nll(a):
        return a * np.log(x).sum() + x.size * np.log(zeta(a, xmin))

    return minimize_scalar(nll, bounds=(1.0001, 30), method="bounded", options={"xatol": 1e-10}).x


@pytest.mark.parametrize(
    "counts",
    [
        [1, 1, 1, 2],  # the known crash inside powerlaw
        [1, 2],
        [0, 1, 2, 3, 0],  # three distinct non-zero counts and unseen items
        np.array([[1, 0, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]),  # 2-D: counts [3, 1, 1, 1]
        [2, 2, 5],
    ],
    ids=["1112", "12", "three-distinct", "matrix", "225"],
)
def test_power_law_with_too_few_distinct_counts_fits_all_counts(counts):
    """powerlaw's xmin search needs four distinct counts; with two or three the tail starts at
    the smallest count, and γ is the maximum-likelihood exponent of all counts."""
    model = PowerLawPropensity().fit(counts)
    n = item_counts(counts)
    smallest = n[n > 0].min()
    assert model.xmin_ == smallest
    assert model.gamma_ == pytest.approx(discrete_power_law_mle(n[n > 0], smallest), rel=1e-4)
    # Eq. 7 by hand: p_i = (max(n_i, 1) / max n)^((γ+1)/2)
    expected = (np.maximum(n, 1) / n.max()) ** ((model.gamma_ + 1) / 2)
    np.testing.assert_allclose(model.propensity_, expected, rtol=1e-12)
    # the same fit as asking for the tail explicitly
    assert PowerLawPropensity(xmin=int(smallest)).fit(counts).gamma_ == model.gamma_
    report = model.report()
    assert report.xmin == smallest and report.share_interactions_below_xmin == 0.0


def test_power_law_with_four_distinct_counts_still_searches_xmin():
    """Valid input keeps powerlaw's own KS search, bit for bit."""
    counts = np.array([1, 1, 2, 2, 3, 5, 8, 0])
    model = PowerLawPropensity().fit(counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(counts[counts > 0].astype(float), discrete=True, verbose=False)
        assert (model.gamma_, model.xmin_) == (fit.power_law.alpha, fit.xmin)
    assert model.xmin_ == 2.0


@pytest.mark.parametrize(
    "counts, message",
    [
        ([5, 5, 5], r"two distinct non-zero item counts, got \[5\.0\]"),
        ([7], r"two distinct non-zero item counts, got \[7\.0\]"),
        ([0, 0, 0], r"two distinct non-zero item counts, got \[\]"),
        (np.ones((2, 3)), r"two distinct non-zero item counts, got \[2\.0\]"),
        ([1.5, 2.5, 3.0, 4.0], r"whole interaction counts; item 0 has 1\.5"),
        ([1, 2, 3, 4.25], r"whole interaction counts; item 3 has 4\.25"),
        ([1, 2, 1e300], r"2\*\*53; item 2 has 1e\+300"),
        ([1, np.nan, 3], r"item counts.*item 1 has nan"),
        ([1, -2, 3], r"item 1 has -2\.0"),
        ([], r"count vector, got shape \(0,\)"),
        (np.ones((2, 2, 2)), r"count vector, got shape \(2, 2, 2\)"),
    ],
)
def test_power_law_refuses_counts_without_a_finite_fit(counts, message):
    with pytest.raises(ValueError, match=message):
        PowerLawPropensity().fit(counts)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PowerLawPropensity().fit(corrupt_indices()), r"X is a corrupt.*index 7"),
        (lambda: PopularityPropensity().fit(corrupt_indptr()), r"X is a corrupt CSR.*indptr"),
        (lambda: FixedPropensity(corrupt_indices()).fit(), r"propensity is a corrupt"),
    ],
    ids=["powerlaw", "popularity", "fixed"],
)
def test_corrupt_sparse_input_is_refused_before_use(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_fixed_propensity_series_is_aligned_by_item_label():
    p = np.array([0.2, 0.5, 0.8])
    shuffled = pd.Series(p[[2, 0, 1]], index=[2, 0, 1])
    np.testing.assert_array_equal(FixedPropensity(shuffled).fit().propensity_, p)


def test_count_series_is_aligned_by_item_label():
    items = np.array([3, 1, 1, 0, 3, 3, 2, 1, 3])
    counts = pd.Series(items).value_counts()  # sorted by count, indexed by item
    assert list(counts.index) != [0, 1, 2, 3]
    np.testing.assert_array_equal(item_counts(counts), np.bincount(items))
    np.testing.assert_array_equal(
        PopularityPropensity().fit(counts).propensity_, np.bincount(items) / items.size
    )
    with pytest.raises(ValueError, match=r"X has no value for item 0"):
        item_counts(pd.Series([2, 5], index=[2, 1]))
    with pytest.raises(ValueError, match=r"X has no value for item 0"):
        PowerLawPropensity().fit(pd.Series([1, 2, 3, 4, 10], index=[5, 4, 3, 2, 1]))
    with pytest.raises(ValueError, match=r"X has item 1 more than once"):
        PowerLawPropensity().fit(pd.Series([1, 2, 3, 4], index=[0, 1, 1, 2]))


def test_interaction_dataframe_is_aligned_by_labels():
    X = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]])
    frame = pd.DataFrame(X[:, [2, 0, 1]], columns=[2, 0, 1])
    np.testing.assert_array_equal(item_counts(frame), [2, 1, 2])
    with pytest.raises(ValueError, match=r"X is a DataFrame whose column labels.*item indices"):
        item_counts(pd.DataFrame(X, columns=["a", "b", "c"]))


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PowerLawPropensity().fit(np.array([1, 2, 3 + 1j, 4])),
            r"X has complex dtype.*\(3\+1j\) at position 2",
        ),
        (lambda: PopularityPropensity().fit(np.array([1 + 0j, 2])), r"X has complex dtype"),
        (lambda: FixedPropensity(np.array([0.5 + 0j, 0.2])).fit(), r"propensity has complex dtype"),
        (
            lambda: FixedPropensity(sp.csr_matrix(np.array([[0.5 + 1j, 0.2]]))).fit(),
            r"propensity has complex dtype.*stored value 0",
        ),
        (lambda: FixedPropensity("abc").fit(), r"propensity.*real numbers.*<U3"),
        (lambda: PowerLawPropensity().fit(np.array(["1", "2", "3"])), r"X.*real numbers.*<U1"),
    ],
)
def test_complex_and_non_numeric_values_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PowerLawPropensity().fit(np.array([1, 2, 2**53 + 1, 3])),
            r"X has integer 9007199254740993 at item 2",
        ),
        (
            lambda: PopularityPropensity().fit(np.array([2**62, 2**62, 1])),
            r"X has integer 4611686018427387904 at item 0",
        ),
        (
            lambda: PopularityPropensity().fit(np.array([1e308, 1e308])),
            r"2\*\*53; item 0 has 1e\+308",
        ),
    ],
)
def test_integers_float64_cannot_hold_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PopularityPropensity().fit(pd.Series([1, None, 2], dtype="Int64")),
            r"X has a missing value at label 1",
        ),
        (
            lambda: PowerLawPropensity().fit(pd.array([1, None, 3, 4], dtype="Int64")),
            r"item counts.*item 1 has nan",
        ),
        (
            lambda: FixedPropensity(pd.array([0.5, None], dtype="Float64")).fit(),
            r"propensity nan of item 1",
        ),
    ],
)
def test_nullable_missing_values_are_refused_with_their_position(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_duplicate_propensity_entries_are_never_summed(form):
    m = propensity_with_duplicate(form)
    assert m.nnz == 5 and sp.csr_matrix(m)[0, 2] == pytest.approx(0.6)  # scipy would sum
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        FixedPropensity(m).fit()


def test_duplicate_coo_propensity_names_the_pair():
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        FixedPropensity(coo_with_duplicate()).fit()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PowerLawPropensity(xmin="a"), r"xmin.*'a'"),
        (lambda: PowerLawPropensity(xmin=0), r"xmin.*got 0"),
        (lambda: PowerLawPropensity(xmin=-1), r"xmin.*got -1"),
        (lambda: PowerLawPropensity(xmin=2.5), r"xmin.*got 2\.5"),
        (lambda: PowerLawPropensity(xmin=np.nan), r"xmin.*got nan"),
        (lambda: PowerLawPropensity(xmin=True), r"xmin.*got True"),
        (lambda: PowerLawPropensity(xmin=[1, 2]), r"xmin.*got \[1, 2\]"),
        (lambda: PowerLawPropensity(xmin=5), r"xmin = 5 leaves no item count above it.*\b5\b"),
        (lambda: PowerLawPropensity(xmin=100), r"xmin = 100 leaves no item count above it"),
        (lambda: PowerLawPropensity(min_count=np.nan), r"min_count.*got nan"),
        (lambda: PowerLawPropensity(min_count=np.inf), r"min_count.*got inf"),
        (lambda: PowerLawPropensity(min_count="1"), r"min_count.*got '1'"),
        (lambda: PowerLawPropensity(min_count=None), r"min_count.*got None"),
        (lambda: PowerLawPropensity(min_count=True), r"min_count.*got True"),
        (lambda: PowerLawPropensity(variant=["yang"]), r"variant.*\['yang'\]"),
        (lambda: PopularityPropensity(min_count=0), r"min_count.*got 0"),
        (lambda: PopularityPropensity(min_count=100), r"min_count = 100 exceeds.*N = 15"),
    ],
)
def test_propensity_model_parameters_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make().fit(np.array([1, 2, 3, 4, 5]))


def test_popularity_min_count_up_to_n_keeps_probabilities():
    p = PopularityPropensity(min_count=6).fit(np.array([0, 2, 4])).propensity_
    np.testing.assert_array_equal(p, [1.0, 1.0, 1.0])  # max(n_i, 6) / 6


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: FixedPropensity([]).fit(), r"propensity has shape \(0,\) and holds no propensity"),
        (
            lambda: FixedPropensity(np.full((2, 2), 0.5)).fit(),
            r"propensity is a dense array of shape \(2, 2\): give one propensity per item \(a "
            r"1-D vector\) or one per \(user, item\) as a users×items scipy sparse matrix",
        ),
        (lambda: FixedPropensity(0.5).fit(), r"propensity is a dense array of shape \(\)"),
        (lambda: FixedPropensity([0.5, np.nan]).fit(), r"propensity nan of item 1 lies outside"),
        (lambda: FixedPropensity([0.5, 1.5]).fit(), r"propensity 1\.5 of item 1 lies outside"),
    ],
)
def test_fixed_propensity_values_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=2, max_size=25))
def test_power_law_propensities_are_monotone_probabilities(counts):
    """Any count vector either fits (propensities in (0, 1], largest 1, never decreasing in the
    count) or is refused with a ValueError: never an exception from inside powerlaw."""
    counts = np.array(counts)
    distinct = np.unique(counts[counts > 0])
    if distinct.size < 2:
        with pytest.raises(ValueError, match="at least two distinct non-zero item counts"):
            PowerLawPropensity().fit(counts)
        return
    p = PowerLawPropensity().fit(counts).propensity_
    assert np.all((p > 0) & (p <= 1)) and p.max() == 1.0
    order = np.argsort(counts, kind="stable")
    assert np.all(np.diff(p[order]) >= 0)
