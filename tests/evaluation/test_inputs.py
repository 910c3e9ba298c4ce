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
