"""summary_rows and compare_systems against hand-computed values and scipy.stats.ttest_rel."""

import math
import warnings

import numpy as np
import pytest
from conftest import max_abs_t_cdf_three
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


def test_rows_are_best_first_with_hsus_mcb_against_the_best(three):
    rows = summary_rows(three, alpha=0.05)
    assert [r["system"] for r in rows] == ["best", "close", "low"]
    assert all(list(r) == ["system", *BASE, "p_vs_best", "tied_with_best"] for r in rows)
    # MCB's p-value of s: the probability that the largest |t| over the 3 pairs of equal
    # systems reaches max_{j≠s} t_js, by quadrature; the rows' come from 100,000 Monte Carlo
    # draws (4 binomial standard errors, + the 1/(B + 1) offset).
    x = np.column_stack([three[s].per_user for s in ("best", "close", "low")])
    cov, means, n = np.cov(x, rowvar=False), x.mean(axis=0), x.shape[0]
    by_name = {r["system"]: r for r in rows}
    assert by_name["best"]["p_vs_best"] == 1.0 and by_name["best"]["tied_with_best"]
    for k, name in ((1, "close"), (2, "low")):
        se = [np.std(x[:, j] - x[:, k], ddof=1) / math.sqrt(n) for j in range(3)]
        t = max((means[j] - means[k]) / se[j] for j in range(3) if j != k)
        p = 1 - max_abs_t_cdf_three(cov, n - 1, t)
        tol = 4 * math.sqrt(p * (1 - p) / 100_000) + 1 / 100_001
        assert by_name[name]["p_vs_best"] == pytest.approx(p, abs=tol)
        assert by_name[name]["tied_with_best"] == (by_name[name]["p_vs_best"] >= 0.05)
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
    columns = ["system", *BASE, "clip", "sens_low", "sens_high", *DIAGNOSTICS, "flags"]
    assert list(rows[0]) == [*columns, "p_vs_best", "tied_with_best"]
    stars = ["robust_gamma", "robust_gamma_95"]
    assert list(rows[1]) == [*columns, "p_vs_best", "tied_with_best", *stars]
    for row in rows:
        result = results[row["system"]]
        chosen = result.clip_selection.clip
        assert row["clip"] == (math.inf if chosen is None else chosen)
        for column in DIAGNOSTICS:
            assert row[column] == getattr(result.diagnostics, column)
        assert row["flags"] == "; ".join(result.diagnostics.reasons)
        bounds = result.sensitivity(2.0)  # at the selected clipping
        assert (row["sens_low"], row["sens_high"]) == (bounds.low, bounds.high)


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


# --- sensitivity to wrong propensities ---------------------------------------------------------


@pytest.fixture
def top_one():
    """IPS-DCG@1 of three systems' top items for 30 users over 5 items, unclipped: each user's
    value is ``y[u, top(u)] / p[top(u)]``, so the bounds and Γ* follow by hand. "best" takes
    every user's largest ``y / p`` (the largest value any system can reach); "dominated" takes
    the same items but misses on some users, so no item favours it."""
    rng = np.random.default_rng(8)
    y = (rng.random((30, 5)) < 0.5).astype(float)
    p = np.array([0.6, 0.3, 0.15, 0.9, 0.45])
    top = {"other": rng.integers(0, 5, 30), "best": np.argmax(y / p, axis=1)}
    top["dominated"] = top["best"].copy()
    for u in np.flatnonzero(rng.random(30) < 0.4):
        misses = np.flatnonzero(y[u] == 0)
        if misses.size:
            top["dominated"][u] = misses[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        results = {
            name: ips_dcg(y, np.eye(5)[t], discount=LogDiscount(1), propensity=p)
            for name, t in top.items()
        }
    return y, p, top, results


def _net(y, p, top, a, b) -> np.ndarray:
    """Per-item coefficient of ``1/p`` in the summed difference a − b of IPS-DCG@1."""
    users = np.arange(y.shape[0])
    return np.bincount(top[a], y[users, top[a]], 5) - np.bincount(top[b], y[users, top[b]], 5)


def _lower_end(y, p, top, a, b, gamma, level=0.95) -> float:
    """The lower end of the t-interval of a − b at the weights that minimise it over the box
    of ``gamma``: 1/p divided by Γ where the item favours a, multiplied where it favours b."""
    w = np.where(_net(y, p, top, a, b) > 0, 1 / (p * gamma), gamma / p)
    users = np.arange(y.shape[0])
    d = y[users, top[a]] * w[top[a]] - y[users, top[b]] * w[top[b]]
    half = stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return d.mean() - half


def test_weighted_rows_carry_bounds_and_the_robustness_to_the_best_by_hand(top_one):
    y, p, top, results = top_one
    rows = summary_rows(results)
    assert [r["system"] for r in rows][0] == "best"
    by_name = {r["system"]: r for r in rows}
    for row in rows:
        # Unclipped with non-negative rewards, every weight at its lower (upper) end: ÷2 (×2).
        assert row["sens_low"] == pytest.approx(row["value"] / 2, rel=1e-12)
        assert row["sens_high"] == pytest.approx(row["value"] * 2, rel=1e-12)
    assert "robust_gamma" not in by_name["best"] and "robust_gamma_95" not in by_name["best"]
    # The worst case of best − other is A/Γ − BΓ (A, B: the items favouring each, times 1/p̂),
    # zero at Γ* = √(A/B).
    net = _net(y, p, top, "best", "other") / p
    star = math.sqrt(net[net > 0].sum() / -net[net < 0].sum())
    assert 1 < star < 10
    assert by_name["other"]["robust_gamma"] == pytest.approx(star, rel=1e-6)
    significant = by_name["other"]["robust_gamma_95"]
    assert 1 < significant < star
    assert _lower_end(y, p, top, "best", "other", significant * (1 - 1e-5)) > 0
    assert _lower_end(y, p, top, "best", "other", significant * (1 + 1e-5)) < 0
    comparison = results["best"].compare(results["other"])
    assert by_name["other"]["robust_gamma"] == comparison.robustness()
    assert significant == comparison.robustness(0.95)
    # No item favours "dominated": its deficit never flips (∞); its significance either holds
    # for every Γ (the difference and its standard error both scale as 1/Γ) or fails at 1.
    assert (_net(y, p, top, "best", "dominated") >= 0).all()
    assert by_name["dominated"]["robust_gamma"] == math.inf
    p_value = stats.ttest_rel(results["best"].per_user, results["dominated"].per_user).pvalue
    assert by_name["dominated"]["robust_gamma_95"] == (math.inf if p_value < 0.05 else 1.0)


def test_robustness_follows_the_level_and_unpairable_weights_give_nan(top_one):
    y, p, top, results = top_one
    row = summary_rows(results, level=0.9)[-1]
    assert "robust_gamma_95" not in row
    assert row["robust_gamma_90"] == pytest.approx(
        results["best"].compare(results[row["system"]]).robustness(0.9), rel=1e-12
    )
    # Weights clipped at different thresholds cannot be perturbed together.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        clipped = ips_dcg(y, np.eye(5)[top["other"]], discount=LogDiscount(1), propensity=p, clip=3)
    row = summary_rows({"best": results["best"], "other": clipped})[-1]
    assert math.isnan(row["robust_gamma"]) and math.isnan(row["robust_gamma_95"])
    assert row["sens_high"] == pytest.approx(
        np.mean(y[np.arange(30), top["other"]] * np.minimum(3, 2 / p[top["other"]])), rel=1e-12
    )
