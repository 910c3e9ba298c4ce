"""The estimator registry: every entry computes what it says, and every path names only its
estimators, spelled as it spells them."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.registry import ESTIMATORS, estimand_table, estimator, markdown_table, names
from recpack_ope.reward.models import RewardMatrix

ROOT = Path(__file__).resolve().parents[1]

# Two users, four items; hand-checkable ranks below.
Y_TRUE = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 1, 0, 1]]))
SCORES = np.array([[0.9, 0.8, 0.1, 0.5], [0.4, 0.3, 0.2, 0.9]])
P = np.array([0.5, 0.25, 1.0, 0.5])
D = LogDiscount(3)


def _log2(r):
    return 1 / np.log2(r + 1)


def test_held_out_estimates_equal_hand_calculations():
    # User 0 ranks items 0, 1, 3, 2: item 0 at rank 1, item 2 (reward 2) at rank 4 > cutoff.
    # User 1 ranks items 3, 0, 1, 2: item 3 at rank 1, item 1 at rank 3.
    dcg_u = np.array([1.0, 1 + _log2(3)])
    idcg_u = np.array([2 + _log2(2), 1 + _log2(2)])
    w = 1 / P
    ips_u = np.array([w[0], w[3] + w[1] * _log2(3)])
    # Ideal of the IPS gains: user 0 has gains 2 (item 0) and 2 (item 2), user 1 gains 4 and 2.
    ips_idcg_u = np.array([2 + 2 * _log2(2), 4 + 2 * _log2(2)])
    expected = {
        "dcg": dcg_u.mean(),
        "ndcg": (dcg_u / idcg_u).mean(),
        "pn_dcg": dcg_u.sum() / idcg_u.sum(),
        "recall": np.mean([1 / 3, 1.0]),
        "ips_dcg": ips_u.mean(),
        # Σ c·w·δ / Σ w × N/|U| with N = 4 held-out interactions over 2 users
        "snips_dcg": ips_u.sum() / (w[0] + w[2] + w[1] + w[3]) * 4 / 2,
        "ips_ndcg": (ips_u / ips_idcg_u).mean(),
        "ips_pn_dcg": ips_u.sum() / ips_idcg_u.sum(),
        # recall@3 of the IPS gains: user 0 recovers 2 of 2 + 2, user 1 all of 4 + 2
        "ips_recall": np.mean([2 / 4, 1.0]),
    }
    for name, value in expected.items():
        result = estimator(name)(Y_TRUE, SCORES, discount=D, propensity=P)
        assert result.value == pytest.approx(value, rel=1e-12), name
        assert result.name == estimator(name).display(D), name
        assert tuple(result.exponents) == estimator(name).exponents, name
        terms = np.atleast_2d(np.asarray(result.terms).T).T
        assert terms.shape[1] == len(estimator(name).terms), name


def test_dr_and_stratified_run_from_the_registry():
    # Without impressions, DR clipped at m is clipped IPS plus the reward model's DCG of what
    # clipping removed, Σ_r δ(r) ρ̂ (1 − min(1, m·p)). At m = 2 the weights are [2, 2, 1, 2]
    # and only item 1 (p = 0.25) keeps 1 − 2·0.25 = 0.5: user 0 ranks it 2nd with ρ̂ = 0, user 1
    # 3rd with ρ̂ = 1. Clipped IPS: user 0 2, user 1 2 + 2·δ(3) = 3.
    rho = (Y_TRUE.toarray() > 0).astype(float)
    dr = estimator("dr_dcg")(
        Y_TRUE, SCORES, discount=D, propensity=P, clip=2.0, reward_model=RewardMatrix(rho)
    )
    assert dr.name == "DR-DCG@3"
    assert dr.value == pytest.approx(np.mean([2.0, 3.0 + _log2(3) * 1.0 * 0.5]), rel=1e-12)
    strat = estimator("stratified_ndcg")(Y_TRUE, SCORES, discount=D, propensity=P)
    assert strat.name == "Stratified nDCG@3"
    # Two equal-width strata over the held-out propensities [0.25, 1]: Q1 = p < 0.625 holds
    # (u0, item 0), (u1, item 1), (u1, item 3); Q2 holds (u0, item 2), ranked below the cutoff.
    # nDCG per stratum over its users: Q1 (1 + 1.5 / (1 + δ(2))) / 2, Q2 0; shares 3/4, 1/4.
    q1 = (1 + (1 + _log2(3)) / (1 + _log2(2))) / 2
    assert strat.value == pytest.approx(0.75 * q1 + 0.25 * 0.0, rel=1e-12)


@pytest.mark.parametrize(
    "name", [n for n, e in ESTIMATORS.items() if e.data == "held_out" and e.needs]
)
def test_weighted_names_refuse_to_run_without_what_they_need_and_name_the_plain_one(name):
    e = estimator(name)
    with pytest.raises(ValueError, match=rf"{name}.*{e.needs[0]}.*{e.plain}"):
        e(Y_TRUE, SCORES, discount=D)
    direct = e.function
    if e.weighting in ("ips", "self_normalised"):  # the core function refuses the same way
        with pytest.raises(ValueError, match=rf"{name}.*propensity.*{e.plain}"):
            direct(Y_TRUE, SCORES, discount=D) if "recall" not in name else direct(
                Y_TRUE, SCORES, k=3
            )


@pytest.mark.parametrize("name", ["dcg", "ndcg", "pn_dcg", "recall"])
def test_plain_names_stay_plain_when_propensities_are_given(name):
    given = estimator(name)(Y_TRUE, SCORES, discount=D, propensity=P, clip=2.0)
    plain = estimator(name)(Y_TRUE, SCORES, discount=D)
    assert given.value == plain.value
    assert given.name == plain.name and not given.name.startswith("IPS")
    assert given.diagnostics is None
    with pytest.raises(TypeError, match="propensity"):
        estimator(name).function(
            Y_TRUE, SCORES, propensity=P, **({"k": 3} if name == "recall" else {"discount": D})
        )


def test_unknown_names_are_refused_with_the_close_ones():
    with pytest.raises(ValueError, match=r"'ips_dgc'.*ips_dcg"):
        estimator("ips_dgc")
    with pytest.raises(ValueError, match=r"'dcg'.*feed-log"):
        estimator("dcg", "feed_log")
    assert set(names("held_out")) | set(names("feed_log")) == set(ESTIMATORS)


def test_labels_say_how_the_estimate_is_weighted():
    prefixes = {
        "none": "",
        "ips": "IPS-",
        "self_normalised": "SNIPS-",
        "doubly_robust": "DR-",
        "stratified": "Stratified ",
    }
    for e in ESTIMATORS.values():
        label = e.label.removeprefix("logged ")
        if e.data == "feed_log" and e.weighting == "ips":
            continue  # every feed-log estimate is importance weighted by construction
        assert label.startswith(prefixes[e.weighting]), e.name
        assert (e.plain is None) == (not e.needs), e.name


def _choices(parser: argparse.ArgumentParser, *path: str) -> set[str]:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    action = next(a for a in parser._actions if "--metrics" in a.option_strings)
    return set(action.choices)


def test_the_cli_offers_exactly_the_registry_names():
    from recpack_ope.cli import build_parser

    assert _choices(build_parser(), "evaluate") <= set(ESTIMATORS)
    assert set(names("held_out")) - {"dr_dcg", "stratified_ndcg"} <= _choices(
        build_parser(), "evaluate"
    )


def test_the_docs_table_is_the_registry():
    page = (ROOT / "docs" / "estimators.md").read_text()
    assert markdown_table() in page
    assert estimand_table() in page
    # Every estimator name in backticks anywhere in the docs' tables of names is a registry
    # name: names of the old tables (unbiased_dcg, UnbiasedDCG, …) are gone.
    # The table of earlier names on that page is the one place that names them.
    page = page[: page.index("## Names of earlier versions")]
    others = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "estimators.md"]
    docs = page + "\n".join(p.read_text() for p in others)
    docs += (ROOT / "README.md").read_text()
    for old in ("unbiased_dcg", "UnbiasedDCGK", "SNUnbiasedDCGK", "UnbiasedDCG("):
        assert old not in docs, old
    for camel in re.findall(
        r"`((?:IPS|SNIPS|DR|Plain|PostNormalised|Stratified)\w*(?:DCG|Recall))K?`", docs
    ):
        assert camel.removesuffix("K") in {e.camel for e in ESTIMATORS.values()}, camel


# A third user without held-out rewards.
Y_ALL = sp.vstack([Y_TRUE, sp.csr_matrix((1, 4))]).tocsr()
SCORES_ALL = np.vstack([SCORES, [0.1, 0.2, 0.3, 0.4]])
HAS_ALL = {"dcg", "pn_dcg", "ips_dcg", "snips_dcg", "ips_pn_dcg", "dr_dcg"}


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("name", names("held_out"))
def test_population_all_scales_each_mean_or_is_refused_naming_the_estimator(name):
    e = estimator(name)
    kw = dict(discount=D, propensity=P, reward_model=RewardMatrix(np.full((3, 4), 0.5)))
    observed = e(Y_ALL, SCORES_ALL, **kw)
    assert observed.n_excluded_users == 1
    if name not in HAS_ALL:
        assert e.populations == ("observed",)
        with pytest.raises(ValueError, match=rf"population 'all' .* but {name} divides each"):
            e(Y_ALL, SCORES_ALL, population="all", **kw)
        return
    assert e.populations == ("observed", "all")
    every = e(Y_ALL, SCORES_ALL, population="all", **kw)
    assert (every.n_users, every.n_excluded_users) == (3, 0)
    # The third user adds 0 to every per-user term (unclipped DR included), so each mean is
    # 2/3 of the observed users' one: the estimate Π mean_k ** x_k scales by (2/3) ** Σ x_k.
    factor = (2 / 3) ** sum(e.exponents)
    assert every.value == pytest.approx(observed.value * factor, rel=1e-12)


def test_the_refusal_lists_exactly_the_estimators_with_an_all_users_value():
    with pytest.raises(ValueError) as refused:
        estimator("ndcg")(Y_ALL, SCORES_ALL, discount=D, population="all")
    listed = re.search(r"averages DCG \(([^)]*)\)", str(refused.value)).group(1)
    assert set(listed.split(", ")) == HAS_ALL
    assert {n for n in names("held_out") if "all" in estimator(n).populations} == HAS_ALL
    assert all(estimator(n).populations == () for n in names("feed_log"))


@pytest.mark.parametrize("name", names("held_out"))
def test_an_unknown_population_is_refused_by_every_held_out_estimator(name):
    kw = dict(discount=D, propensity=P, reward_model=RewardMatrix(np.full((3, 4), 0.5)))
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'any'"):
        estimator(name)(Y_ALL, SCORES_ALL, population="any", **kw)
