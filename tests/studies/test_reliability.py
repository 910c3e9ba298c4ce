"""The reliability study: its verdict rates and robustness thresholds recomputed by hand, one
world's records rebuilt with the estimators outside the study, the selection rules of Γ₀ and of
the recommended procedure on records whose answer is known, its reports and its options."""

from __future__ import annotations

import argparse
import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, dcg, ips_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.simulation import AffinityPolicy, PersonalisedPolicy, PopularityPolicy
from recpack_ope.studies.registry import STUDIES
from recpack_ope.studies.reliability import (
    GAMMA_GRID,
    WORLDS,
    Configuration,
    ReliabilityConfig,
    ReliabilityResult,
    configurations,
    make_world,
    model_pool,
    pair_verdicts,
    run_reliability,
    spread,
    verdict_rates,
    write_report,
)

ALPHA = 0.05


def hand_rates(per_user, online, alpha=ALPHA, gate=None):
    """Wrong-sign share of all pairs and power over the different pairs, from per-user values
    (one row per model) by scipy's paired t-test; ``gate`` (a, b) → bool keeps a verdict."""
    n = len(online)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    wrong = right = 0
    for a, b in pairs:
        p = stats.ttest_rel(per_user[a], per_user[b]).pvalue
        if p >= alpha or (gate is not None and not gate(a, b)):
            continue
        estimated = np.sign(per_user[a].mean() - per_user[b].mean())
        if estimated == np.sign(online[a] - online[b]):
            right += 1
        else:
            wrong += 1
    return wrong / len(pairs), right / len(pairs)


def worst_difference(coef, raw, clip, gamma, side):
    """Extreme over v ∈ [raw/Γ, raw·Γ] of Σ_i coef_i · min(clip, v_i): each unit at the end
    its coefficient's sign asks for (side −1: the smallest, +1: the largest), and the weights
    that attain it."""
    up = np.sign(coef) == side
    v = np.where(up, raw * gamma, raw / gamma)
    w = np.minimum(clip, v)
    return float(coef @ w), w


def grid_gamma(holds):
    """The largest Γ of the grid at which ``holds`` (scanning every value)."""
    kept = [g for g in GAMMA_GRID if holds(g)]
    return kept[-1] if kept else GAMMA_GRID[0]


def test_verdicts_rates_and_robustness_by_hand():
    # Four target rankings of 200 users over 8 items, per-item propensities, clipped at m = 4:
    # the difference of two IPS-DCG values is Σ_i a_i · min(m, 1/p_i) with
    # a_i = (1/n) Σ_u c_ui (δ_A(r_u(i)) − δ_B(r_u(i))), so its extremes over propensities off by
    # Γ put every item at the end of its interval that its coefficient's sign asks for.
    rng = np.random.default_rng(3)
    n_users, n_items, k = 200, 8, 3
    relevance = rng.random((n_users, n_items))
    clicks = sp.csr_matrix((rng.random((n_users, n_items)) < 0.5 * relevance).astype(float))
    propensity = np.array([0.9, 0.6, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05])
    discount = LogDiscount(k)
    scores = [relevance + s * rng.random((n_users, n_items)) for s in (0.1, 0.5, 2.0, 50.0)]
    rankings = [TopK.from_scores(x, k) for x in scores]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimates = [
            ips_dcg(clicks, r, discount=discount, propensity=propensity, clip=4.0, population="all")
            for r in rankings
        ]
    # Model 2 is made better online than model 1, which the clicks favour: a wrong sign.
    online = np.array([0.9, 0.6, 0.7, 0.2])
    pairs = pair_verdicts(estimates, online)
    assert [(p["a"], p["b"]) for p in pairs] == [(a, b) for a in range(4) for b in range(a + 1, 4)]

    per_user = []
    for r in rankings:
        gain = np.zeros((n_users, n_items))
        for u in range(n_users):
            gain[u, r.items[u]] = discount.weights(k)
        per_user.append(gain)
    c = clicks.toarray()
    raw = 1 / propensity
    values = [(c * np.minimum(4.0, raw) * g).sum(axis=1) for g in per_user]
    t = stats.t.ppf(0.975, n_users - 1)
    hand = {}
    for p in pairs:
        a, b = p["a"], p["b"]
        assert p["difference"] == pytest.approx(values[a].mean() - values[b].mean(), rel=1e-12)
        assert p["p_value"] == pytest.approx(stats.ttest_rel(values[a], values[b]).pvalue)
        assert p["truth"] == online[a] - online[b]
        per_item = c * (per_user[a] - per_user[b])  # users × items, before the weights
        coef = per_item.sum(axis=0) / n_users
        side = -np.sign(p["difference"])  # the extreme that threatens the sign

        def sign_holds(g, coef=coef, side=side):
            return -side * worst_difference(coef, raw, 4.0, g, side)[0] > 0

        def significant(g, per_item=per_item, coef=coef, side=side):
            value, w = worst_difference(coef, raw, 4.0, g, side)
            d = per_item @ w
            return -side * value - t * d.std(ddof=1) / np.sqrt(n_users) > 0

        hand[(a, b)] = (grid_gamma(sign_holds), grid_gamma(significant))
        assert (p["gamma"], p["gamma95"]) == hand[(a, b)]
        # The API's Γ* (bisection to 1e-6), rounded down to the grid, is the same.
        comparison = estimates[a].compare(estimates[b])
        assert p["gamma"] == grid_gamma(lambda g, c=comparison: c.robustness() >= g)
        assert p["gamma95"] == grid_gamma(lambda g, c=comparison: c.robustness(level=0.95) >= g)
    # Verdicts of every kind: not significant, significant and right, significant and wrong;
    # and Γ* at several points of the grid.
    kinds = {(p["p_value"] < ALPHA, np.sign(p["difference"]) == np.sign(p["truth"])) for p in pairs}
    assert {(False, True), (True, True), (True, False)} <= kinds
    assert len({p["gamma95"] for p in pairs}) >= 3

    assert verdict_rates(pairs) == pytest.approx(hand_rates(values, online))
    for gamma0 in (1.1, 1.5, 3.0):
        for key, index in (("gamma", 0), ("gamma95", 1)):
            got = verdict_rates(pairs, gamma0=gamma0, robustness=key)
            expected = hand_rates(
                values, online, gate=lambda a, b, i=index, g=gamma0: hand[(a, b)][i] >= g
            )
            assert got == pytest.approx(expected)
    # A tie is not "truly different": power is over the other five pairs. (Models 0 and 1
    # made equal online: a verdict on them can only be of the "wrong" sign, never right.)
    tied = [{**p, "truth": 0.0} if (p["a"], p["b"]) == (0, 1) else p for p in pairs]
    right = sum(
        p["p_value"] < ALPHA and np.sign(p["difference"]) == np.sign(p["truth"]) for p in tied[1:]
    )
    assert verdict_rates(tied)[1] == pytest.approx(right / 5)


def test_unweighted_and_auto_comparisons_have_no_robustness():
    y = sp.csr_matrix(np.eye(4)[[0, 1, 2, 3, 0, 1]])
    scores = np.random.default_rng(0).random((6, 4))
    d = LogDiscount(2)
    plain = [dcg(y, s, discount=d) for s in (scores, scores[:, ::-1])]
    pairs = pair_verdicts(plain, np.array([1.0, 0.5]))
    assert math.isnan(pairs[0]["gamma"]) and math.isnan(pairs[0]["gamma95"])
    # a NaN Γ* never passes a threshold, but counts without one
    pairs = [
        {"difference": 1.0, "p_value": 0.0, "truth": -1.0, "gamma": math.nan, "gamma95": math.nan}
    ]
    assert verdict_rates(pairs) == (1.0, 0.0)
    assert verdict_rates(pairs, gamma0=1.1) == (0.0, 0.0)


def test_spread_is_min_median_max_of_the_finite_values():
    values = [0.4, math.nan, 0.1, 0.3, 0.2]
    assert spread(values) == (0.1, 0.25, 0.4)
    assert all(math.isnan(v) for v in spread([math.nan]))


@pytest.fixture(scope="module")
def tiny():
    config = ReliabilityConfig(
        sizes=((400, 100),),
        worlds=("affinity", "pbm"),
        n_seeds=2,
        feed_length=10,
        train_feeds=3,
        clips=(100.0,),
        jobs=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return config, run_reliability(config, progress=False)


def test_one_world_rebuilt_outside_the_study(tiny):
    config, result = tiny
    assert len(result.runs) == 2 * 2 * len(configurations(config))
    assert len(result.pairs) == len(result.runs) * 36  # 9 models: 36 pairs

    # World seed 1 of the affinity kind, IPS-DCG with power-law propensities at m = 100.
    world = make_world("affinity", 400, 100, seed=1)[0]
    policy = AffinityPolicy()
    train = world.log(policy, feed_length=10, n_feeds=3, seed=1).clicks.sign()
    discount = LogDiscount(10)
    rankings = [TopK.from_scores(m.fit(train).predict(train), 10) for _, m in model_pool()]
    online = np.array([world.online_reward(r, discount).value for r in rankings])
    log = world.log(policy, feed_length=10, seed=100)
    propensity = PowerLawPropensity().fit(train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimates = [
            ips_dcg(
                log.clicks,
                r,
                discount=discount,
                propensity=propensity,
                clip=100.0,
                population="all",
            )
            for r in rankings
        ]
    values = [e.per_user for e in estimates]
    means = np.array([v.mean() for v in values])
    name = "IPS-DCG (power-law p, m=100)"
    run = next(
        r
        for r in result.run_measures()
        if (r["world"], r["seed"], r["configuration"]) == ("affinity", 1, name)
    )
    assert run["kendall"] == pytest.approx(stats.kendalltau(online, means)[0], rel=1e-12)
    assert run["regret"] == pytest.approx(1 - online[np.argmax(means)] / online.max(), abs=1e-12)
    assert run["rel_bias"] == pytest.approx(np.mean((means - online) / online), rel=1e-9)
    assert run["warned"] == (not all(e.diagnostics.reliable for e in estimates))
    assert (run["wrong_sign"], run["power"]) == pytest.approx(hand_rates(values, online))
    # the gated rates from the study's Γ* of the same pairs
    mine = [
        p
        for p in result.pairs
        if (p["world"], p["seed"], p["configuration"]) == ("affinity", 1, name)
    ]
    gamma0 = result.gamma0()
    kept = {(p["a"], p["b"]): p["gamma95"] >= gamma0 for p in mine}
    assert (run["wrong_sign_gamma95"], run["power_gamma95"]) == pytest.approx(
        hand_rates(values, online, gate=lambda a, b: kept[(a, b)])
    )
    assert run["fragile"] == pytest.approx(np.mean([p["gamma"] < gamma0 for p in mine]))

    # Aggregates: min / median / max over the two seeds of each run measure.
    row = next(r for r in result.rows() if (r["world"], r["configuration"]) == ("affinity", name))
    both = [
        r for r in result.run_measures() if (r["world"], r["configuration"]) == ("affinity", name)
    ]
    for key in ("kendall", "wrong_sign", "power_gamma95"):
        v = [r[key] for r in both]
        assert (row[f"{key}_min"], row[f"{key}_median"], row[f"{key}_max"]) == pytest.approx(
            (min(v), np.median(v), max(v))
        )


def test_selection_and_evaluation_seeds(tiny):
    _, result = tiny
    assert result.selection_seeds == (0,) and result.evaluation_seeds == (1,)
    rec = result.recommendation()
    chosen = [
        c
        for c in result.procedures(result.selection_seeds)
        if (c["configuration"], c["gate"]) == (rec["configuration"], rec["gate"])
    ]
    assert len(chosen) == 1 and chosen[0]["worst_wrong_sign"] == rec["worst_wrong_sign"]
    assert rec["held_out"]["configuration"] == rec["configuration"]


def synthetic_result(wrong_by_config, power_by_config, tau_by_config, gamma95_wrong):
    """A study of one world kind and two seeds whose records are made up: per configuration
    with popularity propensities, the two seeds' runs and 10 pairs per run, of which
    ``wrong_by_config`` are significant with the wrong sign (their Γ*₉₅ is
    ``gamma95_wrong``) and ``power_by_config`` significant with the right one (Γ*₉₅ = 10)."""
    config = ReliabilityConfig(sizes=((10, 5),), worlds=("pbm",), n_seeds=2, jobs=1)
    runs, pairs, configs = [], [], []
    for name, clip in wrong_by_config:
        configs.append(Configuration(name, "IPS-DCG", "popularity", clip))
        for seed in (0, 1):
            where = {"users": 10, "items": 5, "world": "pbm", "seed": seed}
            runs.append(
                {
                    **where,
                    "configuration": name,
                    "estimator": "IPS-DCG",
                    "source": "popularity",
                    "clip": "none" if clip is None else clip,
                    "kendall": tau_by_config[name][seed],
                    "regret": 0.0,
                    "rel_bias": 0.0,
                    "rel_rmse": 0.0,
                    "coverage": 1.0,
                    "min_ess_ratio": 0.5,
                    "warned": False,
                    "median_auto_clip": math.nan,
                    "tie": 0.0,
                }
            )
            n_wrong = wrong_by_config[(name, clip)][seed]
            n_right = power_by_config[name][seed]
            for j in range(10):
                wrong, right = j < n_wrong, n_wrong <= j < n_wrong + n_right
                pairs.append(
                    {
                        **where,
                        "configuration": name,
                        "a": j,
                        "b": j + 1,
                        "difference": 1.0,
                        "p_value": 0.01 if wrong or right else 0.5,
                        "truth": -1.0 if wrong else 1.0,
                        "gamma": 10.0,
                        "gamma95": gamma95_wrong if wrong else 10.0,
                    }
                )
    return ReliabilityResult(config, ["m"] * 11, runs, pairs, configs)


def test_gamma0_and_recommendation_follow_their_rules():
    # Seed 0 selects, seed 1 checks. In the selection seed m=100 makes a wrong-sign verdict on
    # one pair of ten and m=10 on none: their mean, 5 %, meets "≤ 5 %" already at Γ₀ = 1, the
    # smallest Γ of the grid.
    result = synthetic_result(
        {
            ("IPS-DCG (popularity p, m=100)", 100.0): (1, 3),
            ("IPS-DCG (popularity p, m=10)", 10.0): (0, 0),
        },
        {"IPS-DCG (popularity p, m=100)": (6, 6), "IPS-DCG (popularity p, m=10)": (2, 2)},
        {"IPS-DCG (popularity p, m=100)": (0.9, 0.9), "IPS-DCG (popularity p, m=10)": (0.5, 0.6)},
        gamma95_wrong=1.4,
    )
    assert result.gamma0() == 1.0
    rec = result.recommendation()
    # m=100 ungated has 10 % wrong in the selection seed; gated by Γ*₉₅ ≥ 1 it is the same;
    # m=10 meets the goal with power 20 %: it is chosen, and checked on seed 1.
    assert (rec["configuration"], rec["gate"]) == ("IPS-DCG (popularity p, m=10)", "none")
    assert rec["worst_power"] == pytest.approx(0.2) and rec["held_out"]["meets_goal"]
    assert rec["default_clip"] == 100.0  # its median τ, 0.9 in the selection seed, is higher

    # Two wrong verdicts per selection run: 20 % and 10 % average 15 % at Γ₀ = 1, and every
    # grid Γ up to 1.25 keeps them (Γ*₉₅ = 1.4); Γ₀ = 1.5 is the smallest that drops them.
    result = synthetic_result(
        {
            ("IPS-DCG (popularity p, m=100)", 100.0): (2, 0),
            ("IPS-DCG (popularity p, m=10)", 10.0): (1, 0),
        },
        {"IPS-DCG (popularity p, m=100)": (6, 6), "IPS-DCG (popularity p, m=10)": (2, 2)},
        {"IPS-DCG (popularity p, m=100)": (0.9, 0.9), "IPS-DCG (popularity p, m=10)": (0.5, 0.6)},
        gamma95_wrong=1.4,
    )
    assert result.gamma0() == 1.5
    rec = result.recommendation()
    # Gated at 1.5 both configurations lose their wrong verdicts and keep their power; the
    # one with more power (60 %) wins.
    assert rec["configuration"] == "IPS-DCG (popularity p, m=100)"
    assert rec["gate"] in ("gamma95",) and rec["worst_power"] == pytest.approx(0.6)


@pytest.mark.parametrize("kind", WORLDS)
def test_every_world_seed_is_a_new_world(kind):
    a, policy = make_world(kind, 30, 12, seed=4)
    b, _ = make_world(kind, 30, 12, seed=5)
    assert a.click_model == ("cascade" if kind == "cascade" else "pbm")
    expected = {"personalised": PersonalisedPolicy, "affinity": AffinityPolicy}
    assert isinstance(policy, expected.get(kind, PopularityPolicy))
    assert not np.allclose(a.relevance(), b.relevance())
    ea = a.log(policy, feed_length=4, seed=100).exposure
    eb = b.log(policy, feed_length=4, seed=100).exposure
    assert not np.allclose(ea, eb)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_world("mars", 3, 3, seed=0)


def test_jobs_do_not_change_the_records():
    config = dict(
        sizes=((150, 40),), worlds=("pbm",), n_seeds=2, feed_length=8, train_feeds=2, clips=(50.0,)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = run_reliability(ReliabilityConfig(**config, jobs=1), progress=False)
        two = run_reliability(ReliabilityConfig(**config, jobs=2), progress=False)
    assert [r["kendall"] for r in one.runs] == pytest.approx(
        [r["kendall"] for r in two.runs], nan_ok=True
    )
    assert [p["p_value"] for p in one.pairs] == [p["p_value"] for p in two.pairs]


def test_report_files_and_printed_tables(tiny, tmp_path):
    config, result = tiny
    folder = write_report(result, tmp_path)
    with open(folder / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * len(configurations(config))
    assert {r["world"] for r in rows} == {"affinity", "pbm"}
    with open(folder / "pairs.csv") as fh:
        assert sum(1 for _ in fh) == len(result.pairs) + 1
    text = (folder / "summary.md").read_text()
    for part in ("Goal 1", "Goal 2", "## Choosing Γ₀", "Recommended procedure", "Δ-OPE"):
        assert part in text
    table = result.table()
    assert "| affinity | DCG |" in table and "| pbm | IPS-DCG (power-law p, auto m) |" in table
    assert (folder / "kendall.png").exists() and (folder / "gamma.png").exists()


def test_command_line_options_set_the_configuration():
    study = STUDIES["reliability"]
    parser = argparse.ArgumentParser()
    study.add_arguments(parser, reports=Path("reports"))
    module = study.load()
    args = parser.parse_args(["--quick", "--clips", "10,300", "--worlds", "pbm,affinity"])
    config = study.configure(module, args)
    assert config.sizes == ((300, 80),) and config.n_seeds == 3
    assert config.clips == (10.0, 300.0) and config.worlds == ("pbm", "affinity")
    config = study.configure(
        module, parser.parse_args(["--quick", "--seeds", "5", "--sizes", "100x30"])
    )
    assert config.sizes == ((100, 30),) and config.n_seeds == 5
    full = study.configure(module, parser.parse_args([]))
    assert full.sizes == ((2000, 500),) and full.n_seeds == 20 and full.jobs == 2


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(worlds=("mars",)), "worlds must be a non-empty subset"),
        (dict(n_seeds=0), "n_seeds must be a positive integer"),
        (dict(sizes=((0, 10),)), "users of a world size must be a positive integer"),
        (dict(clips=(0.5,)), "clips and fixed_clip must be finite numbers >= 1, got 0.5"),
        (dict(jobs=0), "jobs must be a positive integer"),
        (dict(alpha=1.5), "alpha"),
        (dict(seed=-1), "seed must be an integer >= 0, got -1"),
    ],
)
def test_bad_configuration_is_named(bad, message):
    with pytest.raises(ValueError, match=message):
        ReliabilityConfig(**bad)
