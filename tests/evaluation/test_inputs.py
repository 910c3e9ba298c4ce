"""EstimatorInputs' per-user value (for frameworks that average per-user values themselves) and
its propensity model contract, against hand calculations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recpack_ope.evaluation.inputs import EstimatorInputs
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.registry import estimator


def test_one_user_equals_the_hand_calculation():
    inputs = EstimatorInputs(propensity=[0.5, 1.0, 0.25], clip=3.0)
    # items 2 (weight min(3, 4) = 3) at rank 1 and 0 (weight 2) at rank 3; cutoff 2 drops item 0
    value = inputs.one_user(estimator("ips_dcg"), [2, 0], [2, 1, 0], 2, "F", "")
    assert value == pytest.approx(3.0)
    whole = inputs.one_user(estimator("ips_dcg"), [2, 0], [2, 1, 0], None, "F", "")
    assert whole == pytest.approx(3.0 + 2.0 / math.log2(4))
    plain = EstimatorInputs(discount=LogDiscount())
    ndcg = plain.one_user(estimator("ndcg"), [1], [0, 1], None, "F", "")
    assert ndcg == pytest.approx(1 / math.log2(3))


def test_one_user_refuses_what_a_per_user_loop_cannot_compute():
    inputs = EstimatorInputs(propensity=[0.5, 1.0], clip="auto")
    with pytest.raises(ValueError, match="has clip='auto', chosen from all users at once; F's"):
        inputs.one_user(estimator("ips_dcg"), [1], [0, 1], 2, "F", "use G")
    with pytest.raises(ValueError, match="per-user averaging cannot produce; use G"):
        EstimatorInputs().one_user(estimator("pn_dcg"), [1], [0, 1], 2, "F", "use G")
    with pytest.raises(
        ValueError, match="item index 4 has no propensity: the propensities cover 2"
    ):
        EstimatorInputs(propensity=[0.5, 1.0], clip=None).one_user(
            estimator("ips_dcg"), [4], [0, 1], 2, "F", ""
        )


def test_a_propensity_model_must_return_itself_from_fit():
    class Forgetful:
        def fit(self, X):
            self.propensity_ = np.full(np.shape(X)[-1], 0.5)  # but returns None

    with pytest.raises(TypeError, match=r"Forgetful.fit\(X\) returned NoneType, not a fitted"):
        EstimatorInputs(propensity=Forgetful()).fit(np.ones((2, 3)))


def test_require_vector_and_check_weighting_name_the_counterpart():
    import scipy.sparse as sp

    from recpack_ope.evaluation.inputs import EstimatorInputs
    from recpack_ope.registry import estimator

    EstimatorInputs([0.5, 1.0]).require_vector(2)
    with pytest.raises(ValueError, match="propensity has 2 values but the split has 3 items"):
        EstimatorInputs([0.5, 1.0]).require_vector(3, "the split")
    with pytest.raises(ValueError, match=r"per item \(a 1-D vector\), got shape \(2, 2\)"):
        EstimatorInputs(sp.csr_matrix(np.full((2, 2), 0.5))).require_vector()
    camel = lambda e: e.camel  # noqa: E731
    EstimatorInputs([0.5]).check_weighting(estimator("ips_recall"), camel)
    EstimatorInputs().check_weighting(estimator("recall"), camel)
    with pytest.raises(ValueError, match="IPSRecall needs propensity=; use PlainRecall"):
        EstimatorInputs().check_weighting(estimator("ips_recall"), camel)
    with pytest.raises(ValueError, match="PostNormalisedDCG is unweighted .* use IPSPostNormal"):
        EstimatorInputs([0.5]).check_weighting(estimator("pn_dcg"), camel)


def test_framework_cutoff_reads_the_whole_ranking_value_as_none():
    from recpack_ope.evaluation.inputs import framework_cutoff

    assert framework_cutoff(10) == 10 and framework_cutoff(np.int64(3)) == 3
    assert framework_cutoff(-1) is None and framework_cutoff(0, whole=0) is None
    for bad in (0, -2, 2.0, True, "10"):
        with pytest.raises(ValueError, match="k must be a positive integer or -1 \\(whole"):
            framework_cutoff(bad)
    with pytest.raises(ValueError, match="K must be one cutoff, got \\[5, 10\\]: make one metric"):
        framework_cutoff([5, 10], name="K")


def test_check_metric_refuses_recall_without_cutoff_the_weighting_and_an_unfitted_model():
    from recpack_ope.propensity.models import PowerLawPropensity

    camel = lambda e: e.camel  # noqa: E731
    EstimatorInputs().check_metric(estimator("recall"), 5, camel, "making it")
    EstimatorInputs([0.5]).check_metric(estimator("ips_ndcg"), None, camel, "making it")
    with pytest.raises(ValueError, match="IPSRecall needs a positive integer cutoff"):
        EstimatorInputs([0.5]).check_metric(estimator("ips_recall"), None, camel, "making it")
    with pytest.raises(ValueError, match="PlainDCG is unweighted and takes no propensity"):
        EstimatorInputs([0.5]).check_metric(estimator("dcg"), 5, camel, "making it")
    with pytest.raises(ValueError, match="PowerLawPropensity is not fitted: .* before making it"):
        EstimatorInputs(PowerLawPropensity()).check_metric(
            estimator("ips_dcg"), 5, camel, "making it"
        )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_population_all_gives_the_hand_values_with_and_without_the_ranking_cache():
    import scipy.sparse as sp

    from recpack_ope.metrics.cache import RankingCache
    from recpack_ope.metrics.ranking import TopK

    # Users 1 and 3 have no held-out reward; sparse scores, as RecPack's X_pred.
    y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 0, 0], [0, 2, 0], [0, 0, 0]]))
    scores = sp.csr_matrix(np.array([[0.9, 0.1, 0.5], [0.3, 0, 0], [0.1, 0.9, 0.2], [0, 0, 1.0]]))
    p = [0.5, 0.25, 0.1]
    third = 1 / math.log2(3)
    # c/p · δ at cutoff 2: user 0 items 0 (w 2, rank 1) and 2 (w 10, rank 2), user 2 item 1
    # (reward 2, w 4, rank 1); plain: the same without weights.
    ips_u, dcg_u = np.array([2 + 10 * third, 0, 8, 0]), np.array([1 + third, 0, 2, 0])
    expected = {
        "ips_dcg": ips_u.mean(),
        "dcg": dcg_u.mean(),
        "snips_dcg": ips_u.mean() * (3 / 4) / (16 / 4),  # Σ w = 2 + 10 + 4, N = 3
        # Ideal DCG of the gains: user 0's 10 then 2, user 2's 8.
        "ips_pn_dcg": ips_u.sum() / (10 + 2 * third + 8),
    }
    weighted = EstimatorInputs(propensity=p, clip=None, population="all")
    plain = EstimatorInputs(population="all")
    for cache in (None, RankingCache(TopK.from_scores)):
        for name, value in expected.items():
            inputs = plain if name == "dcg" else weighted
            result = inputs.evaluate(estimator(name), y, scores, 2, cache)
            assert result.value == pytest.approx(value, rel=1e-12), name
            assert (result.n_users, result.n_excluded_users) == (4, 0)
        with pytest.raises(ValueError, match="but ndcg divides each user's DCG"):
            plain.evaluate(estimator("ndcg"), y, scores, 2, cache)


def test_an_unknown_population_is_refused_when_the_inputs_are_made():
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'both'"):
        EstimatorInputs(population="both")


def test_one_user_refuses_all_users_a_per_user_loop_cannot_average_over():
    inputs = EstimatorInputs(propensity=[0.5, 1.0], clip=None, population="all")
    with pytest.raises(
        ValueError, match="has population='all'.*F's ranking loop averages over the users with"
    ):
        inputs.one_user(estimator("ips_dcg"), [1], [0, 1], 2, "F", "use G")


class _Adapter(EstimatorInputs):
    """An adapter as RecPack's and Cornac's are: its own options, the rest passed on."""

    def __init__(self, propensity=None, *, framework_option=None, **options):
        self.check_options(options)
        super().__init__(propensity, **options)


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("clipp", " \\(did you mean 'clip'\\?\\)"),
        ("framework_optoin", " \\(did you mean 'framework_option'\\?\\)"),
        ("colour", ""),
    ],
)
def test_check_options_names_the_class_called_the_option_and_the_valid_ones(option, hint):
    valid = (
        "binning, clip, discount, framework_option, impressions, n_strata, population, "
        "propensity, reward_model"
    )
    with pytest.raises(
        TypeError,
        match=rf"^_Adapter got an unknown option '{option}'{hint}; its options are "
        rf"{valid}$",
    ):
        _Adapter(**{option: 3})
    # Known options pass through to EstimatorInputs.
    assert _Adapter([0.5, 1.0], clip=None, framework_option=1).clip is None


def test_impressions_outside_0_1_are_refused_when_the_inputs_are_made():
    with pytest.raises(
        ValueError,
        match=r"^impressions has value 3.0 at \(user 1, item 0\); impressions are "
        r"examination probabilities: finite and in \[0, 1\]$",
    ):
        EstimatorInputs([0.5, 1.0], impressions=np.array([[1.0, 0.0], [3.0, 1.0]]))
