"""Bad and edge-case input to the propensity models, IPS weights, discounts and reward models:
every case is either refused with a ValueError/TypeError naming the argument and the offending
value or position, or gives the number an independent computation expects.

Kinds: K1 corrupt sparse structure, K2 label alignment and vector length, K3 dtypes, K4
duplicate sparse entries, K5 parameter domains, K7 bounded work; degenerate power-law fits;
property tests.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import powerlaw
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import zeta

from recpack_ope.metrics.dcg import ips_dcg
from recpack_ope.propensity.discount import (
    CustomDiscount,
    ExponentialDiscount,
    LogDiscount,
    ReciprocalDiscount,
)
from recpack_ope.propensity.fit_report import PropensityFitReport
from recpack_ope.propensity.models import (
    FixedPropensity,
    PopularityPropensity,
    PowerLawPropensity,
    item_counts,
)
from recpack_ope.propensity.weights import entry_propensities, ips_weights, item_propensities
from recpack_ope.reward.calibration import ScoreCalibration, _bernoulli_ranks
from recpack_ope.reward.models import CalibratedScores, RewardMatrix

Y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1, 0]]))  # held-out (0,0), (0,2), (1,1)


def corrupt_indices():
    m = sp.csr_matrix(np.eye(3) * 0.5)
    m.indices[0] = 7  # column 7 of a 3-column matrix
    return m


def corrupt_indptr():
    m = sp.csr_matrix(np.eye(3) * 0.5)
    m.indptr[1] = 5  # rows would overlap: 5 > indptr[2] = 2
    return m


def coo_with_duplicate():
    """(user 0, item 2) stored twice, 0.3 + 0.3: summed it would look like a valid 0.6."""
    return sp.coo_matrix(
        ([0.3, 0.3, 0.5, 0.5, 0.5], ([0, 0, 0, 1, 1], [2, 2, 0, 1, 0])), shape=(2, 3)
    )


def simulate_clicks(seed=3, shape=(40, 6)):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=shape)
    clicks = (rng.random(shape) < 1 / (1 + np.exp(-(1.5 * scores - 1)))).astype(float)
    return scores, clicks


def discrete_power_law_mle(counts, xmin):
    """γ maximising the discrete power-law likelihood ``Π n^-γ / ζ(γ, xmin)`` of the counts
    ``>= xmin``, by a bounded scalar search on the closed-form log-likelihood."""
    x = np.asarray(counts, dtype=float)
    x = x[x >= xmin]
    nll = lambda a: a * np.log(x).sum() + x.size * np.log(zeta(a, xmin))
    return minimize_scalar(nll, bounds=(1.0001, 30), method="bounded", options={"xatol": 1e-10}).x


# --------------------------------------------------------------------------- degenerate fits


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
        ([5, 5, 5], r"at least two distinct non-zero item counts, got \[5\.0\]"),
        ([7], r"at least two distinct non-zero item counts, got \[7\.0\]"),
        ([0, 0, 0], r"at least two distinct non-zero item counts, got \[\]"),
        (np.ones((2, 3)), r"at least two distinct non-zero item counts, got \[2\.0\]"),
        ([1.5, 2.5, 3.0, 4.0], r"discrete power law to whole interaction counts; item 0 has 1\.5"),
        ([1, 2, 3, 4.25], r"whole interaction counts; item 3 has 4\.25"),
        ([1, 2, 1e300], r"at most 2\*\*53; item 2 has 1e\+300"),
        ([1, np.nan, 3], r"item counts must be finite.*item 1 has nan"),
        ([1, -2, 3], r"item 1 has -2\.0"),
        ([], r"non-empty 1-D count vector, got shape \(0,\)"),
        (np.ones((2, 2, 2)), r"non-empty 1-D count vector, got shape \(2, 2, 2\)"),
    ],
)
def test_power_law_refuses_counts_without_a_finite_fit(counts, message):
    with pytest.raises(ValueError, match=message):
        PowerLawPropensity().fit(counts)


# --------------------------------------------------------------------------- K1 corrupt sparse


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PowerLawPropensity().fit(corrupt_indices()),
            r"X is a corrupt sparse matrix.*index 7",
        ),
        (
            lambda: PopularityPropensity().fit(corrupt_indptr()),
            r"X is a corrupt CSR matrix.*indptr",
        ),
        (
            lambda: FixedPropensity(corrupt_indices()).fit(),
            r"propensity is a corrupt sparse matrix",
        ),
        (
            lambda: entry_propensities(corrupt_indptr(), sp.csr_matrix(np.eye(3))),
            r"propensity is a corrupt",
        ),
        (lambda: RewardMatrix(corrupt_indptr()), r"probabilities is a corrupt CSR matrix"),
        (
            lambda: ScoreCalibration().fit(
                *simulate_clicks(shape=(3, 3)), propensity=corrupt_indices()
            ),
            r"propensity is a corrupt sparse matrix",
        ),
    ],
    ids=["powerlaw", "popularity", "fixed", "entry", "reward-matrix", "calibration"],
)
def test_corrupt_sparse_input_is_refused_before_use(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# --------------------------------------------------------------------------- K2 labels, lengths


def test_propensity_series_is_aligned_by_item_label():
    p = np.array([0.2, 0.5, 0.8])
    shuffled = pd.Series(p[[2, 0, 1]], index=[2, 0, 1])
    # held-out entries (0,0), (0,2), (1,1) by hand
    np.testing.assert_array_equal(entry_propensities(shuffled, Y), [0.2, 0.8, 0.5])
    np.testing.assert_array_equal(ips_weights(shuffled, Y), 1 / np.array([0.2, 0.8, 0.5]))
    np.testing.assert_array_equal(FixedPropensity(shuffled).fit().propensity_, p)
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.7, 0.3]])
    aligned = ips_dcg(Y, scores, discount=LogDiscount(), propensity=shuffled).per_user
    np.testing.assert_array_equal(
        aligned, ips_dcg(Y, scores, discount=LogDiscount(), propensity=p).per_user
    )
    np.testing.assert_array_equal(
        item_propensities(shuffled, np.array([1, 0]), np.array([0, 2])), [0.2, 0.8]
    )


@pytest.mark.parametrize(
    "series, message",
    [
        (pd.Series([0.5, 0.2, 0.9], index=[0, 0, 1]), r"propensity has item 0 more than once"),
        (pd.Series([0.5, 0.2, 0.9], index=[2, 1, 2]), r"propensity has item 2 more than once"),
        (
            pd.Series([0.5, 0.2, 0.9], index=["a", "b", "c"]),
            r"propensity is a pandas Series indexed by labels such as 'a', not by item indices",
        ),
        (pd.Series([0.5, 0.2], index=[2, 0]), r"propensity has no value for item 1"),
        (pd.Series([0.5, 0.2], index=[0, 1]), r"propensity has no value for item 2"),
        (
            pd.Series([0.5, 0.2, 0.9, 0.4], index=[0, 1, 5, 2]),
            r"propensity has item 5, outside the 3 items 0\.\.2",
        ),
        (pd.Series([0.5, 0.2, 0.9], index=[-1, 0, 1]), r"propensity has item -1, outside"),
        (
            pd.Series([0.5, None, 0.9], dtype="Float64", index=[2, 1, 0]),
            r"propensity has a missing value at label (np\.int64\()?1\b",
        ),
    ],
)
def test_propensity_series_with_bad_labels_is_refused(series, message):
    with pytest.raises(ValueError, match=message):
        entry_propensities(series, Y)


@pytest.mark.parametrize("length", [2, 4])
def test_propensity_vector_of_the_wrong_length_is_refused_everywhere(length):
    p = np.full(length, 0.5)
    expected = rf"propensity has shape \({length},\) but y_true has 3 items"
    with pytest.raises(ValueError, match=expected):
        entry_propensities(p, Y)
    with pytest.raises(ValueError, match=expected):
        ips_weights(FixedPropensity(p).fit(), Y, clip=10)
    with pytest.raises(ValueError, match=expected):
        ips_dcg(Y, np.ones((2, 3)), discount=LogDiscount(), propensity=p)
    with pytest.raises(
        ValueError, match=rf"propensity has shape \({length},\) but scores has 3 items"
    ):
        ScoreCalibration().fit(*simulate_clicks(shape=(30, 3)), propensity=p)
    with pytest.raises(
        ValueError, match=rf"propensity has shape \({length},\) but y_true has 3 items"
    ):
        item_propensities(p, np.array([0]), np.array([1]), shape=(2, 3))


def test_messages_name_the_argument_the_propensities_came_from():
    with pytest.raises(ValueError, match=r"stratify_by has shape \(2,\) but y_true has 3 items"):
        entry_propensities(np.full(2, 0.5), Y, name="stratify_by")
    with pytest.raises(ValueError, match=r"stratify_by has item 0 more than once"):
        entry_propensities(pd.Series([0.5, 0.5, 0.5], index=[0, 0, 1]), Y, name="stratify_by")
    with pytest.raises(ValueError, match=r"stratify_by stores \(user 0, item 2\) more than once"):
        entry_propensities(coo_with_duplicate(), Y, name="stratify_by")


def test_item_propensities_refuse_items_the_vector_does_not_cover():
    with pytest.raises(
        ValueError, match=r"\(user 0, item 3\) has no propensity: the propensities cover 3 items"
    ):
        item_propensities(np.full(3, 0.5), np.array([0, 0]), np.array([1, 3]))
    matrix = sp.csr_matrix(np.full((2, 3), 0.5))
    with pytest.raises(
        ValueError,
        match=r"\(user 2, item 0\) has no propensity: the propensities cover 2 users and 3 items",
    ):
        item_propensities(matrix, np.array([2]), np.array([0]))


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
    with pytest.raises(
        ValueError, match=r"X is a DataFrame whose column labels must be the item indices"
    ):
        item_counts(pd.DataFrame(X, columns=["a", "b", "c"]))


def test_reward_and_score_frames_are_aligned_by_labels():
    probabilities = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    frame = pd.DataFrame(probabilities[::-1, [1, 2, 0]], index=[1, 0], columns=[1, 2, 0])
    users, items = np.array([0, 1, 1]), np.array([2, 0, 1])
    np.testing.assert_array_equal(RewardMatrix(frame).predict(users, items), [0.3, 0.4, 0.5])
    cal = SimpleNamespace(slope_=2.0, intercept_=-1.0)
    np.testing.assert_allclose(
        CalibratedScores(frame, cal).predict(users, items),
        1 / (1 + np.exp(-(2.0 * probabilities[users, items] - 1.0))),
        rtol=1e-15,
    )
    with pytest.raises(
        ValueError,
        match=r"probabilities is a DataFrame whose column labels.*label (np\.int64\()?5\b",
    ):
        RewardMatrix(pd.DataFrame(probabilities, columns=[0, 5, 1]))


def test_calibration_aligns_pandas_inputs_like_the_arrays_they_label():
    scores, clicks = simulate_clicks(shape=(40, 6))
    p = np.linspace(0.3, 0.9, 6)
    order = [4, 1, 5, 0, 3, 2]
    reference = ScoreCalibration().fit(scores, clicks, propensity=p)
    labelled = ScoreCalibration().fit(
        pd.DataFrame(scores[:, order], columns=order),
        pd.DataFrame(clicks[::-1], index=np.arange(40)[::-1]),
        propensity=pd.Series(p[order], index=order),
    )
    assert (labelled.slope_, labelled.intercept_) == (reference.slope_, reference.intercept_)


@pytest.mark.parametrize(
    "values, expected",
    [
        (pd.Series([1.0, 0.6, 0.3]), [1.0, 0.6, 0.3]),
        (pd.Series([1.0, 0.6, 0.3], index=[1, 2, 3]), [1.0, 0.6, 0.3]),
    ],
    ids=["positions", "ranks"],
)
def test_custom_discount_series_in_rank_order(values, expected):
    np.testing.assert_array_equal(CustomDiscount(values).values, expected)


def test_custom_discount_series_out_of_rank_order_is_refused():
    with pytest.raises(
        ValueError,
        match=r"values is a pandas Series indexed by \[3, 1, 2\], not by 0\.\.2 or the ranks 1\.\.3"
        r" in order",
    ):
        CustomDiscount(pd.Series([0.3, 1.0, 0.6], index=[3, 1, 2]))


# --------------------------------------------------------------------------- K3 dtypes


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PowerLawPropensity().fit(np.array([1, 2, 3 + 1j, 4])),
            r"X has complex dtype complex128 \(value \(3\+1j\) at position 2\)",
        ),
        (
            lambda: PopularityPropensity().fit(np.array([1 + 0j, 2])),
            r"X has complex dtype complex128",
        ),
        (lambda: FixedPropensity(np.array([0.5 + 0j, 0.2])).fit(), r"propensity has complex dtype"),
        (
            lambda: FixedPropensity(sp.csr_matrix(np.array([[0.5 + 1j, 0.2]]))).fit(),
            r"propensity has complex dtype complex128; stored value 0",
        ),
        (
            lambda: entry_propensities(np.array([0.5, 0.5, 0.5 + 0j]), Y),
            r"propensity has complex dtype",
        ),
        (lambda: CustomDiscount(np.array([1 + 1j, 0.5])), r"values has complex dtype"),
        (
            lambda: PropensityFitReport.from_counts("m", np.array([1, 2 + 1j]), [1.0, 0.5]),
            r"counts has complex dtype",
        ),
        (lambda: FixedPropensity("abc").fit(), r"propensity must hold real numbers, got dtype <U3"),
        (
            lambda: PowerLawPropensity().fit(np.array(["1", "2", "3"])),
            r"X must hold real numbers, got dtype <U1",
        ),
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
            r"at most 2\*\*53; item 0 has 1e\+308",
        ),
        (
            lambda: ScoreCalibration().fit(
                np.array([[2**53 + 1, 2**53], [2**53 + 2, 1]]), np.eye(2)
            ),
            r"scores has integer 9007199254740993 at \(user 0, item 0\), beyond ±2\*\*53",
        ),
        (
            lambda: CalibratedScores(
                np.array([[1, -(2**60)]]), SimpleNamespace(slope_=1.0, intercept_=0.0)
            ),
            r"scores has integer -1152921504606846976 at \(user 0, item 1\)",
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
            r"item counts must be finite.*item 1 has nan",
        ),
        (
            lambda: FixedPropensity(pd.array([0.5, None], dtype="Float64")).fit(),
            r"propensity nan of item 1 lies outside",
        ),
        (
            lambda: RewardMatrix(
                pd.DataFrame({0: pd.array([0.5, None], dtype="Float64"), 1: [0.1, 0.2]})
            ),
            r"probabilities has a missing value at \(index 1, column 0\)",
        ),
        (
            lambda: ScoreCalibration().fit(
                pd.DataFrame({0: pd.array([0.5, None], dtype="Float64"), 1: [0.1, 0.2]}), np.eye(2)
            ),
            r"scores has a missing value at \(index 1, column 0\)",
        ),
        (lambda: CustomDiscount(pd.array([1.0, None], dtype="Float64")), r"rank 2 has nan"),
    ],
)
def test_nullable_missing_values_are_refused_with_their_position(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_small_integer_duplicate_clicks_are_summed_without_overflow():
    """int8 COO clicks 100 + 100 + 56 on one pair wrap to 0 in int8; summed in float64 the pair
    is a click, so the fit equals the one on the float clicks."""
    scores = np.array([[0.1, 0.9, 0.4], [0.2, 0.4, 0.8], [0.7, 0.3, 0.5]])
    rows, cols = np.array([0, 0, 0, 1, 2]), np.array([0, 0, 0, 2, 1])
    tiny = sp.coo_matrix(
        (np.array([100, 100, 56, 1, 1], dtype=np.int8), (rows, cols)), shape=(3, 3)
    )
    wide = sp.coo_matrix((np.array([256.0, 1.0, 1.0]), (rows[2:], cols[2:])), shape=(3, 3))
    a, b = ScoreCalibration().fit(scores, tiny), ScoreCalibration().fit(scores, wide)
    assert a.n_clicks_ == 3 and (a.slope_, a.intercept_) == (b.slope_, b.intercept_)


# --------------------------------------------------------------------------- K4 duplicates


def propensity_with_duplicate(form):
    """(user 0, item 2) stored twice, 0.3 + 0.3, as COO or as a non-canonical CSR / CSC."""
    if form == "coo":
        return coo_with_duplicate()
    if form == "csr":  # rows: [0.5 at 0, 0.3 at 2, 0.3 at 2], [0.5 at 0, 0.5 at 1]
        parts = [0.5, 0.3, 0.3, 0.5, 0.5], [0, 2, 2, 0, 1], [0, 3, 5]
        return sp.csr_matrix(tuple(np.array(a) for a in parts), shape=(2, 3))
    # columns: [0.5 at 0, 0.5 at 1], [0.5 at 1], [0.3 at 0, 0.3 at 0]
    parts = [0.5, 0.5, 0.5, 0.3, 0.3], [0, 1, 1, 0, 0], [0, 2, 3, 5]
    return sp.csc_matrix(tuple(np.array(a) for a in parts), shape=(2, 3))


@pytest.mark.parametrize(
    "use",
    [
        lambda m: FixedPropensity(m).fit(),
        lambda m: entry_propensities(m, Y),
        lambda m: ips_weights(m, Y, clip=10),
        lambda m: item_propensities(m, np.array([0]), np.array([0])),
        lambda m: ips_dcg(Y, np.ones((2, 3)), discount=LogDiscount(), propensity=m),
        lambda m: ScoreCalibration().fit(*simulate_clicks(shape=(2, 3)), propensity=m),
    ],
    ids=["fixed", "entry", "ips", "item", "dcg", "calibration"],
)
@pytest.mark.parametrize("form", ["coo", "csr", "csc"])
def test_duplicate_propensity_entries_are_never_summed(use, form):
    m = propensity_with_duplicate(form)
    assert m.nnz == 5 and sp.csr_matrix(m)[0, 2] == pytest.approx(0.6)  # scipy would sum
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        use(m)


def test_duplicate_coo_propensity_names_the_pair():
    with pytest.raises(ValueError, match=r"propensity stores \(user 0, item 2\) more than once"):
        FixedPropensity(coo_with_duplicate()).fit()


def test_reward_matrix_sums_duplicates_as_documented():
    m = sp.coo_matrix(([0.25, 0.5], ([0, 0], [1, 1])), shape=(1, 2))
    np.testing.assert_array_equal(
        RewardMatrix(m).predict(np.array([0, 0]), np.array([1, 0])), [0.75, 0.0]
    )


# --------------------------------------------------------------------------- K5 parameters


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: PowerLawPropensity(xmin="a"),
            r"xmin must be None or a whole number >= 1.*got 'a'",
        ),
        (lambda: PowerLawPropensity(xmin=0), r"xmin must be None or a whole number >= 1.*got 0"),
        (lambda: PowerLawPropensity(xmin=-1), r"xmin must be None or a whole number >= 1.*got -1"),
        (
            lambda: PowerLawPropensity(xmin=2.5),
            r"xmin must be None or a whole number >= 1.*got 2\.5",
        ),
        (
            lambda: PowerLawPropensity(xmin=np.nan),
            r"xmin must be None or a whole number >= 1.*got nan",
        ),
        (
            lambda: PowerLawPropensity(xmin=True),
            r"xmin must be None or a whole number >= 1.*got True",
        ),
        (
            lambda: PowerLawPropensity(xmin=[1, 2]),
            r"xmin must be None or a whole number >= 1.*got \[1, 2\]",
        ),
        (
            lambda: PowerLawPropensity(xmin=5),
            r"xmin = 5 leaves no item count above it \(the largest is 5\)",
        ),
        (lambda: PowerLawPropensity(xmin=100), r"xmin = 100 leaves no item count above it"),
        (
            lambda: PowerLawPropensity(min_count=np.nan),
            r"min_count must be finite and > 0, got nan",
        ),
        (
            lambda: PowerLawPropensity(min_count=np.inf),
            r"min_count must be finite and > 0, got inf",
        ),
        (
            lambda: PowerLawPropensity(min_count="1"),
            r"min_count must be a finite real number > 0, got '1'",
        ),
        (
            lambda: PowerLawPropensity(min_count=None),
            r"min_count must be a finite real number > 0, got None",
        ),
        (
            lambda: PowerLawPropensity(min_count=True),
            r"min_count must be a finite real number > 0, got True",
        ),
        (
            lambda: PowerLawPropensity(variant=["yang"]),
            r"variant must be 'yang' or 'cornac', got \['yang'\]",
        ),
        (lambda: PopularityPropensity(min_count=0), r"min_count must be finite and > 0, got 0"),
        (
            lambda: PopularityPropensity(min_count=100),
            r"min_count = 100 exceeds the N = 15 interactions of X",
        ),
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
        (
            lambda: FixedPropensity([]).fit(),
            r"non-empty 1-D per-item vector or a sparse matrix, got shape \(0,\)",
        ),
        (lambda: FixedPropensity(np.full((2, 2), 0.5)).fit(), r"got shape \(2, 2\)"),
        (lambda: FixedPropensity(0.5).fit(), r"got shape \(\)"),
        (
            lambda: FixedPropensity([0.5, np.nan]).fit(),
            r"propensity nan of item 1 lies outside \(0, 1\]",
        ),
        (
            lambda: FixedPropensity([0.5, 1.5]).fit(),
            r"propensity 1\.5 of item 1 lies outside \(0, 1\]",
        ),
    ],
)
def test_fixed_propensity_values_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: ExponentialDiscount(gamma="0.5"),
            r"gamma must be a number in \(0, 1\], got '0\.5'",
        ),
        (lambda: ExponentialDiscount(gamma=None), r"gamma must be a number in \(0, 1\], got None"),
        (lambda: ExponentialDiscount(gamma=0.5 + 0j), r"gamma must be a number in \(0, 1\]"),
        (lambda: ExponentialDiscount(gamma=True), r"gamma must be a number in \(0, 1\], got True"),
        (
            lambda: ExponentialDiscount(gamma=np.array([0.5, 0.6])),
            r"gamma must be a number in \(0, 1\]",
        ),
        (lambda: ExponentialDiscount(gamma=np.nan), r"gamma must lie in \(0, 1\], got nan"),
        (
            lambda: ReciprocalDiscount(cutoff=-1),
            r"cutoff must be a positive integer or None, got -1",
        ),
        (lambda: LogDiscount(cutoff="3"), r"cutoff must be a positive integer or None, got '3'"),
        (lambda: CustomDiscount(None), r"values must be a non-empty 1-D array, got shape \(\)"),
        (
            lambda: CustomDiscount([[1.0, 0.5]]),
            r"values must be a non-empty 1-D array, got shape \(1, 2\)",
        ),
        (
            lambda: CustomDiscount(sp.csr_matrix([[1.0, 0.5]])),
            r"values must be a non-empty 1-D array, got a sparse matrix",
        ),
        (lambda: CustomDiscount(["a"]), r"values must hold real numbers"),
        (lambda: CustomDiscount([1.0, -0.5]), r"rank 2 has -0\.5"),
        (lambda: LogDiscount().weights(-1), r"n must be an integer >= 0, got -1"),
        (lambda: LogDiscount().weights(2.5), r"n must be an integer >= 0, got 2\.5"),
        (lambda: LogDiscount().weights(True), r"n must be an integer >= 0, got True"),
        (lambda: LogDiscount()(np.array(["a"])), r"ranks must be integers >= 1, got dtype <U1"),
        (
            lambda: LogDiscount()(np.array([1, None], dtype=object)),
            r"ranks must be integers >= 1, got dtype object",
        ),
        (lambda: LogDiscount()(np.array([3, 0])), r"ranks must be integers >= 1, got minimum 0"),
    ],
)
def test_discount_parameters_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_discount_parameters_are_stored_as_plain_numbers():
    assert repr(LogDiscount(cutoff=np.int64(3))) == "LogDiscount(cutoff=3)"
    assert type(ExponentialDiscount(gamma=np.float32(0.5)).gamma) is float
    assert LogDiscount().weights(0).shape == (0,)
    # a rank beyond int64 is past any cutoff, not wrapped around to a valid index
    huge = np.array([2**64 - 1, 1], dtype=np.uint64)
    np.testing.assert_array_equal(CustomDiscount([1.0, 0.5])(huge), [0.0, 1.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(model=3), r"model must be a str naming the model, got int"),
        (dict(counts=[1, -2]), r"counts must be finite and >= 0; item 1 has -2\.0"),
        (dict(counts=[0, 0]), r"counts hold no interaction"),
        (dict(propensity=[0.0, 0.5]), r"propensity 0\.0 of item 0 lies outside \(0, 1\]"),
        (dict(propensity=[np.nan, 0.5]), r"propensity nan of item 0 lies outside"),
        (dict(propensity=[1.0]), r"same length, got shapes \(2,\) and \(1,\)"),
        (dict(min_count=-1), r"min_count must be finite and > 0, got -1"),
        (
            dict(gamma=2.0),
            r"a power-law fit needs all of gamma.*; "
            r"gamma_se, xmin, ks_distance, lr_lognormal, lr_exponential not given",
        ),
        (dict(gamma="x"), r"gamma must be a real number, got 'x'"),
        (dict(lr_lognormal=(1.0,)), r"lr_lognormal must be a pair \(R, p\), got \(1\.0,\)"),
        (dict(lr_exponential="ab"), r"lr_exponential must be a pair \(R, p\), got 'ab'"),
        (
            dict(
                gamma=2.0,
                gamma_se=0.1,
                xmin=np.nan,
                ks_distance=0.1,
                lr_lognormal=(1, 0.5),
                lr_exponential=(1, 0.5),
            ),
            r"gamma and xmin of a power-law fit must be finite, got 2\.0 and nan",
        ),
    ],
)
def test_fit_report_arguments_are_checked(kwargs, message):
    arguments = dict(model="m", counts=[1, 2], propensity=[1.0, 0.5]) | kwargs
    model, counts, propensity = (arguments.pop(k) for k in ("model", "counts", "propensity"))
    with pytest.raises((ValueError, TypeError), match=message):
        PropensityFitReport.from_counts(model, counts, propensity, **arguments)


def test_calibrated_scores_refuse_a_non_numeric_calibration():
    with pytest.raises(
        ValueError,
        match=r"calibration has slope_ 'a' and intercept_ 0\.0; both must be finite numbers",
    ):
        CalibratedScores(np.zeros((2, 2)), SimpleNamespace(slope_="a", intercept_=0.0))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_pairs=0), r"max_pairs must be a positive integer, got 0"),
        (dict(max_pairs=1e6), r"max_pairs must be a positive integer, got 1000000\.0"),
        (dict(seed=-1), r"seed must be a non-negative integer, got -1"),
        (dict(seed=True), r"seed must be a non-negative integer, got True"),
        (dict(seed="0"), r"seed must be a non-negative integer, got '0'"),
    ],
)
def test_calibration_parameters_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScoreCalibration(**kwargs).fit(*simulate_clicks())


# --------------------------------------------------------------------------- K7 bounded work


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_non_click_subsample_of_a_huge_matrix_ends(seed):
    """Near n = 2**63 the running position used to wrap below 0 and the sampling loop never
    ended. Each of the n positions is kept with probability q, so the sample size is
    Binomial(n, q) ≈ Poisson(nq = 92.2): within ±6σ, increasing, inside [0, n)."""
    n, rate = 2**63 - 1, 1e-17
    ranks = _bernoulli_ranks(n, rate, seed)
    mean = n * rate
    assert abs(ranks.size - mean) < 6 * np.sqrt(mean)
    assert ranks[0] >= 0 and ranks[-1] < n and np.all(np.diff(ranks) > 0)


# --------------------------------------------------------------------------- properties


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


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(6)), st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6))
def test_relabelling_items_of_a_propensity_series_changes_nothing(order, values):
    """A Series carries its item labels: reordering its entries leaves every weight unchanged."""
    y = sp.csr_matrix(np.array([[1.0, 0, 1, 0, 0, 1], [0, 1, 1, 1, 0, 0], [1, 0, 0, 0, 1, 1]]))
    p = np.array(values)
    series = pd.Series(p, index=range(6)).iloc[list(order)]
    np.testing.assert_array_equal(entry_propensities(series, y), p[y.indices])
