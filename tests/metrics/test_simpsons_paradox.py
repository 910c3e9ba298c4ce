"""The wording of the Simpson's-paradox verdict: a comparison is said to favour a model only
when its paired test is significant at the report's alpha."""

from __future__ import annotations

import math

import pytest

from recpack_ope.metrics.simpsons_paradox import ParadoxRow, SimpsonsParadoxReport


def _report(holdout_p: float, stratified_p: float, alpha: float = 0.05) -> SimpsonsParadoxReport:
    """BPR10 ahead on the holdout and on the stratified estimate, WMF10 in the stratum holding
    95.8 % of the feedback (the shape of Jadidinejad et al.'s Table 2)."""
    rows = (
        ParadoxRow("Holdout", 0.4017, 0.3705, holdout_p, 10_991, 1_090, 1.0),
        ParadoxRow("Stratified", 0.3534, 0.3528, stratified_p, 10_991, 1_090, 1.0),
        ParadoxRow("Q1", 0.3374, 0.3577, 1e-5, 10_526, 1_083, 0.958),
        ParadoxRow("Q2", 0.7149, 0.2425, 1e-9, 465, 7, 0.042),
    )
    return SimpsonsParadoxReport(("BPR10", "WMF10"), "nDCG", rows, alpha)


def test_a_significant_difference_favours_a_model():
    verdict = _report(0.003, 0.0004).verdict()
    assert verdict == (
        "Simpson's paradox: the holdout nDCG favours BPR10 (p = 0.003); WMF10 is better in "
        "strata holding 95.8% of the held-out feedback; the stratified estimate favours BPR10 "
        "(p = 0.0004)."
    )


def test_a_difference_that_is_not_significant_is_worded_so():
    verdict = _report(0.003, 0.859).verdict()
    assert verdict.endswith(
        "the stratified estimates of BPR10 and WMF10 do not differ significantly (p = 0.859)."
    )
    assert "favours BPR10 (p = 0.003)" in verdict  # the holdout row is still significant
    both = _report(0.2, 0.859).verdict()
    assert "the holdout nDCG values of BPR10 and WMF10 do not differ significantly (p = 0.2)" in (
        both
    )
    assert "favours" not in both


@pytest.mark.parametrize(("p", "alpha", "significant"), [(0.03, 0.05, True), (0.03, 0.01, False)])
def test_significance_is_judged_at_the_reports_alpha(p, alpha, significant):
    verdict = _report(p, p, alpha).verdict()
    assert ("the stratified estimate favours BPR10 (p = 0.03)." in verdict) == significant
    assert ("do not differ significantly (p = 0.03)." in verdict) == (not significant)


def test_an_untestable_row_favours_no_model():
    verdict = _report(math.nan, 0.01).verdict()
    assert "the holdout nDCG values of BPR10 and WMF10 do not differ significantly (p = nan)" in (
        verdict
    )
