"""summary_rows and compare_systems against hand-computed values and scipy.stats.ttest_rel."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from recpack_ope.inference.diagnostics import ReliabilityWarning
from recpack_ope.inference.result import EstimateResult
from recpack_ope.inference.summary import DIAGNOSTICS, compare_systems, summary_rows
from recpack_ope.metrics.dcg import ips_dcg
from recpack_ope.propensity.discount import LogDiscount

BASE = ["value", "ci_low", "ci_high", "standard_error", "n_users"]


def mean_result(values) -> EstimateResult:
    values = np.asarray(values, dtype=float)
    return EstimateResult("DCG@3", values, (1,), np.arange(values.size), 0)


@pytest.fixture
def three():
    rng = np.random.default_rng(5)
    base = rng.random(30)
    return {
        "low": mean_result(base + 0.1 * rng.standard_normal(30)),
        "best": mean_result(base + 0.3 + 0.1 * rng.standard_normal(30)),
        "close": mean_result(base + 0.28 + 0.1 * rng.standard_normal(30)),
    }


def test_one_system_has_its_t_interval_and_no_test():
    values = [0.0, 1.0, 0.5, 2.0, 1.5]
    (row,) = summary_rows({"only": mean_result(values)}, level=0.9)
    assert list(row) == ["system", *BASE]
    mean, se = np.mean(values), np.std(values, ddof=1) / math.sqrt(5)
    half = stats.t.ppf(0.95, df=4) * se
    assert row["system"] == "only" and row["n_users"] == 5
    assert row["value"] == pytest.approx(mean, rel=1e-12)
    assert row["standard_error"] == pytest.approx(se, rel=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((mean - half, mean + half), rel=1e-12)


def test_rows_are_best_first_with_holm_corrected_paired_t_tests_against_the_best(three):
    rows = summary_rows(three, alpha=0.05)
    assert [r["system"] for r in rows] == ["best", "close", "low"]
    assert all(list(r) == ["system", *BASE, "p_vs_best", "tied_with_best"] for r in rows)
    best = three["best"].per_user
    # Holm over the M − 1 = 2 tests against the best, by hand from scipy's paired t-test
    raw = {s: stats.ttest_rel(best, three[s].per_user).pvalue for s in ("close", "low")}
    first, second = sorted(raw, key=raw.get)
    adjusted = {first: min(1.0, 2 * raw[first])}
    adjusted[second] = min(1.0, max(adjusted[first], raw[second]))
    by_name = {r["system"]: r for r in rows}
    assert by_name["best"]["p_vs_best"] == 1.0 and by_name["best"]["tied_with_best"]
    for name, p in adjusted.items():
        assert by_name[name]["p_vs_best"] == pytest.approx(p, rel=1e-9)
        assert by_name[name]["tied_with_best"] == (p >= 0.05)
    assert by_name["close"]["tied_with_best"] and not by_name["low"]["tied_with_best"]


def test_weighted_rows_carry_the_diagnostics_and_the_selected_clip():
    rng = np.random.default_rng(2)
    y_true = (rng.random((40, 8)) < 0.4).astype(float)
    y_true[:, 0] = 1.0
    p = rng.uniform(0.02, 1.0, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        results = {
            name: ips_dcg(
                y_true, rng.random((40, 8)), discount=LogDiscount(3), propensity=p, clip=c
            )
            for name, c in (("a", "auto"), ("b", "auto"))
        }
    rows = summary_rows(results)
    assert list(rows[0]) == ["system", *BASE, "clip", *DIAGNOSTICS, "p_vs_best", "tied_with_best"]
    for row in rows:
        result = results[row["system"]]
        chosen = result.clip_selection.clip
        assert row["clip"] == (math.inf if chosen is None else chosen)
        for column in DIAGNOSTICS:
            assert row[column] == getattr(result.diagnostics, column)


def test_compare_systems_is_the_paired_t_test(three):
    c = compare_systems(three, "best", "low", level=0.9)
    t = stats.ttest_rel(three["best"].per_user, three["low"].per_user)
    diff = three["best"].per_user - three["low"].per_user
    assert c.name == "best − low" and c.n_users == 30
    assert c.difference == pytest.approx(diff.mean(), rel=1e-12)
    assert c.p_value == pytest.approx(t.pvalue, rel=1e-9)
    half = stats.t.ppf(0.95, df=29) * diff.std(ddof=1) / math.sqrt(30)
    assert c.confidence_interval == pytest.approx((diff.mean() - half, diff.mean() + half))


def test_compare_systems_names_the_argument_and_the_value(three):
    with pytest.raises(ValueError, match=r"first .*got 3"):
        compare_systems(three, 3, "low", arguments=("first", "second"))
    with pytest.raises(ValueError, match=r"second: no system 'bset'; did you mean \['best'"):
        compare_systems(three, "low", "bset", arguments=("first", "second"))
