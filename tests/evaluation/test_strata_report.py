"""One model's Closed / IPS / DR / strata report (recpack_ope.evaluation.strata_report) and the
two-model Simpson's-paradox comparison, against hand calculations on a tiny held-out set."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.evaluation.strata_report import ESS_ROW, ReportMetric, strata_report
from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.simpsons_paradox import simpsons_paradox
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.reward.models import RewardMatrix

# Two users, four items. User 0 holds out items 0 and 2, user 1 items 1 and 3.
Y = sp.csr_matrix(np.array([[1.0, 0, 1, 0], [0, 1, 0, 1]]))
# User 0 ranks 0, 1, 3, 2; user 1 ranks 3, 0, 1, 2.
RANKING = TopK(np.array([[0, 1, 3, 2], [3, 0, 1, 2]]))
P = np.array([0.25, 0.5, 1.0, 1.0])  # two equal-width strata: (0.25, 0.625], (0.625, 1]


def _d(rank):
    return 1 / math.log2(rank + 1)


def test_rows_equal_hand_calculations():
    metrics = {
        "DCG@3": ReportMetric("dcg", LogDiscount(3)),
        "Recall@2": ReportMetric("recall", LogDiscount(2)),
    }
    report = strata_report(Y, RANKING, P, metrics, clip=None)
    rows = report.rows()
    assert list(rows) == ["Closed", "IPS", ESS_ROW, "Q1", "Q2", "Stratified"]
    # DCG@3: user 0 hits item 0 at rank 1 (item 2 is 4th); user 1 item 3 at 1, item 1 at 3.
    closed = [_d(1), _d(1) + _d(3)]
    assert rows["Closed"]["DCG@3"] == pytest.approx(np.mean(closed))
    # IPS gains 1/p: item 0 → 4, item 3 → 1, item 1 → 2
    assert rows["IPS"]["DCG@3"] == pytest.approx(np.mean([4 * _d(1), 1 * _d(1) + 2 * _d(3)]))
    # Evaluated weights (ranked above the cutoff): 4, 1, 2 → ESS / n = 7² / 21 / 3
    assert rows[ESS_ROW]["DCG@3"] == pytest.approx(49 / 21 / 3)
    # Q1 holds (u0, item 0) and (u1, item 1); Q2 (u0, item 2) and (u1, item 3); shares ½, ½.
    q1, q2 = np.mean([_d(1), _d(3)]), np.mean([0.0, _d(1)])
    assert rows["Q1"]["DCG@3"] == pytest.approx(q1)
    assert rows["Q2"]["DCG@3"] == pytest.approx(q2)
    assert rows["Stratified"]["DCG@3"] == pytest.approx(0.5 * q1 + 0.5 * q2)
    # Recall@2: user 0 recovers 1 of 2, user 1 1 of 2 (item 3); IPS: 4 of 5 and 1 of 3.
    assert rows["Closed"]["Recall@2"] == pytest.approx(0.5)
    assert rows["IPS"]["Recall@2"] == pytest.approx(np.mean([4 / 5, 1 / 3]))
    assert [rows[label]["SIZE"] for label in rows] == [4, 4, 4, 2, 2, 4]
    table = report.table()
    assert table.splitlines()[0].split() == ["DCG@3", "Recall@2", "SIZE"]
    assert f"{np.mean(closed):.4g}" in table  # 4 significant digits
    # Unclipped, every IPS weight of DCG@3 moves the value the same way: propensities off by
    # up to ×2 halve or double it.
    ips = np.mean([4 * _d(1), _d(1) + 2 * _d(3)])
    assert f"off by up to ×2: DCG@3 [{ips / 2:.4g}, {2 * ips:.4g}]" in table


def test_weighted_estimators_keep_their_own_weights_and_clipping():
    own = ReportMetric("ips_dcg", LogDiscount(3), propensity=P, clip=None)
    report = strata_report(Y, RANKING, P, {"IPS-DCG@3": own}, clip=2.0)
    # Closed: the estimator's own unclipped weights; IPS row: the report's clip at 2.
    assert report.estimates["IPS-DCG@3"].holdout.value == pytest.approx(
        np.mean([4 * _d(1), _d(1) + 2 * _d(3)])
    )
    assert report.ips["IPS-DCG@3"].value == pytest.approx(np.mean([2 * _d(1), _d(1) + 2 * _d(3)]))


def test_dr_row_for_dcg_columns_only():
    metrics = {
        "DCG@3": ReportMetric("dcg", LogDiscount(3)),
        "nDCG@3": ReportMetric("ndcg", LogDiscount(3)),
    }
    # Held-out data carry no impressions: unclipped, DR-DCG is the IPS-DCG whatever the
    # reward model (docs/definitions.md, "Doubly robust DCG").
    perfect = RewardMatrix(Y.toarray())
    report = strata_report(Y, RANKING, P, metrics, clip=None, reward_model=perfect)
    rows = report.rows()
    assert list(rows)[3] == "DR"
    assert rows["DR"]["DCG@3"] == pytest.approx(np.mean([4 * _d(1), _d(1) + 2 * _d(3)]))
    assert math.isnan(rows["DR"]["nDCG@3"])


def test_a_callable_base_metric_and_one_warning_naming_the_model():
    def metric(y_true, ranking, propensity=None, clip=None):
        from recpack_ope import dcg, ips_dcg

        if propensity is None:
            return dcg(y_true, ranking, discount=LogDiscount(3))
        return ips_dcg(y_true, ranking, discount=LogDiscount(3), propensity=propensity, clip=clip)

    # 12 users hold item 1 (weight 2); one also holds item 0 of weight 10⁶: ESS/n ≈ 1/13.
    y = sp.lil_matrix((12, 4))
    y[:, 1], y[0, 0] = 1.0, 1.0
    ranking = TopK(np.tile([0, 1, 2, 3], (12, 1)))
    skewed = np.array([1e-6, 0.5, 1.0, 1.0])
    with pytest.warns(ReliabilityWarning) as record:
        report = strata_report(
            y.tocsr(), ranking, skewed, {"DCG@3": ReportMetric(metric)}, clip=None, model="BPR"
        )
    assert len(record) == 1
    assert str(record[0].message).startswith("BPR: unreliable weighted estimates")
    assert "IPS DCG@3 (ESS/n" in str(record[0].message)
    assert list(report.unreliable_ips()) == ["DCG@3"]
    # What flagged it: the ratio (1/13), the size (ESS 1) and one of 12 users carrying it.
    assert (
        "IPS rows marked unreliable: DCG@3 (ESS/n 0.0769 < 0.1 (effective sample size 1 of 13 "
        "interactions); ESS 1 < 50; user share 0.0833 < 0.1 (1 of the 12 users with a reward "
        "the ranking exposes carry 50% of the estimate)); clip the weights"
    ) in report.table()


def test_two_reports_compare_in_the_papers_layout():
    other = TopK(np.array([[2, 0, 1, 3], [1, 3, 0, 2]]))
    metrics = {"DCG@3": ReportMetric("dcg", LogDiscount(3))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        a = strata_report(Y, RANKING, P, metrics, clip=None)
        b = strata_report(Y, other, P, metrics, clip=None)
    report = simpsons_paradox(
        a.estimates["DCG@3"], b.estimates["DCG@3"], names=("A", "B"),
        ips=(a.ips["DCG@3"], b.ips["DCG@3"]),
    )  # fmt: skip
    assert [r.label for r in report.rows] == ["Holdout", "IPS", "Stratified", "Q1", "Q2"]
    # B ranks both of every user's items in its top 2: DCG 1 + 1/log2(3) each.
    assert report.row("Holdout").value_b == pytest.approx(_d(1) + _d(2))
    assert report.row("Holdout").value_a == a.rows()["Closed"]["DCG@3"]


def test_report_simpsons_paradox_is_the_cores_comparison_of_the_two_reports():
    metrics = {"DCG@3": ReportMetric("dcg", LogDiscount(3))}
    a = strata_report(Y, RANKING, P, metrics, clip=None)
    b = strata_report(Y, TopK(np.array([[2, 0, 1, 3], [1, 3, 0, 2]])), P, metrics, clip=None)
    direct = simpsons_paradox(
        a.estimates["DCG@3"],
        b.estimates["DCG@3"],
        names=("A", "B"),
        ips=(a.ips["DCG@3"], b.ips["DCG@3"]),
    )
    ours = a.simpsons_paradox(b, names=("A", "B"))
    assert ours.names == ("A", "B")
    assert [(r.label, r.value_a, r.value_b) for r in ours.rows] == [
        (r.label, r.value_a, r.value_b) for r in direct.rows
    ]
    # B ranks item 2 first for user 0 and item 1 first for user 1: Closed DCG@3 by hand
    assert ours.row("Holdout").value_b == pytest.approx(np.mean([_d(1) + _d(2), _d(1) + _d(2)]))
    with pytest.raises(ValueError, match=r"no metric 'nDCG'; the results have \['DCG@3'\]"):
        a.simpsons_paradox(b, "nDCG")


def test_simpsons_paradox_of_framework_results_refuses_other_types():
    from types import SimpleNamespace

    from recpack_ope.evaluation.strata_report import simpsons_paradox_of

    metrics = {"DCG@3": ReportMetric("dcg", LogDiscount(3))}
    a = strata_report(Y, RANKING, P, metrics, clip=None)
    b = strata_report(Y, TopK(np.array([[2, 0, 1, 3], [1, 3, 0, 2]])), P, metrics, clip=None)
    ours = simpsons_paradox_of(
        SimpleNamespace(report=a, model_name="A"),
        SimpleNamespace(report=b, model_name="B"),
        SimpleNamespace,
        "results[i]",
    )
    direct = a.simpsons_paradox(b, names=("A", "B"))
    assert ours.names == ("A", "B")
    assert [(r.label, r.value_a, r.value_b) for r in ours.rows] == [
        (r.label, r.value_a, r.value_b) for r in direct.rows
    ]
    for bad, name in (((a, SimpleNamespace()), "a"), ((SimpleNamespace(), "B"), "b")):
        with pytest.raises(TypeError, match=rf"{name} must be a SimpleNamespace \(results\[i\]\)"):
            simpsons_paradox_of(*bad, SimpleNamespace, "results[i]")
