"""The estimator registry: every entry computes what it says, and every path names only its
estimators, spelled as it spells them."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.logged import DeterministicRanker, FeedLog, PlackettLuceRanker
from recpack_ope.propensity.discount import LogDiscount
from recpack_ope.propensity.weights import RECOMMENDED_CLIP
from recpack_ope.registry import (
    ESTIMATORS,
    estimand_table,
    estimator,
    feed_log_table,
    markdown_table,
    names,
)
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
        if e.data == "feed_log":
            # Every feed-log estimate is weighted; the label names the weights when they are
            # not inverse propensities alone.
            named = {"ips": "", "doubly_robust": "DR", "pseudo_inverse": "pseudo-inverse"}
            assert named[e.weighting] in label, e.name
        else:
            assert label.startswith(prefixes[e.weighting]), e.name
        assert (e.plain is None) == (not e.needs), e.name


# Two sessions of two ranks: s0 (context 0) shows items 0, 1, the target's ranking; s1
# (context 1) shows 1, 0, the reverse of it.
RANKING_LOG = dict(
    session=["s0", "s0", "s1", "s1"],
    item=[0, 1, 1, 0],
    rank=[1, 2, 1, 2],
    reward=[1.0, 1.0, 0.0, 1.0],
    context=[0, 0, 1, 1],
    prefix_propensity=[0.5, 0.25, 0.4, 0.4],
    position_propensity=[0.5, 0.5, 0.4, 0.8],
)
RANKER = DeterministicRanker(np.array([[2.0, 1.0], [2.0, 1.0]]))


def _ranking_log(**columns) -> FeedLog:
    given = {**RANKING_LOG, **columns}
    return FeedLog.from_arrays(
        given.pop("session"), given.pop("item"), given.pop("rank"), given.pop("reward"), **given
    )


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_ranking_estimators_weight_by_what_their_click_model_needs():
    # The target shows s0 whole (π = 1 for its items, prefixes and ranking) and neither of s1's
    # items at its rank (π = 0): only s0 counts, each reward α_k r_k over π0 of
    # standard: the whole ranking (0.25), cascade: the prefix down to k (0.5, 0.25),
    # independent: the item at k (0.5, 0.5); α = (1, 1/log2 3) of LogDiscount(2).
    a = _log2(2)
    expected = {
        "standard_ips": (1 + a) / 0.25,
        "cascade_ips": 1 / 0.5 + a / 0.25,
        "independent_ips": 1 / 0.5 + a / 0.5,
    }
    for name, s0 in expected.items():
        e = estimator(name, "feed_log")
        result = e.function(_ranking_log(), RANKER, discount=LogDiscount(2), **e.options)
        assert result.value == pytest.approx(s0 / 2, rel=1e-12), name
        assert result.name == e.display(LogDiscount(2)), name
        assert e.populations == () and e.estimands["sessions"].startswith("$V(\\pi)")
    assert "any click model" in estimator("standard_ips").assumptions
    assert "ranks 1..k" in estimator("cascade_ips").assumptions
    assert "item at k" in estimator("independent_ips").assumptions
    assert "Eq. 3" in estimator("standard_ips").reference
    assert "Eq. 5" in estimator("cascade_ips").reference
    assert "Eq. 4" in estimator("independent_ips").reference


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
@pytest.mark.parametrize("name", [n for n in names("feed_log") if ESTIMATORS[n].log_columns])
def test_each_feed_log_estimator_reads_exactly_the_log_columns_it_lists(name):
    e = estimator(name)
    # Exposure propensities for the logged_… estimators (0.5 everywhere) and Plackett–Luce
    # weights (two candidates of weights 0.6, 0.4) so that every listed column has a value.
    values = {
        "propensity": [0.5] * 4,
        "logging_weight": [0.6, 0.4, 0.4, 0.6],
        "position_propensity": RANKING_LOG["position_propensity"],
        "prefix_propensity": RANKING_LOG["prefix_propensity"],
    }
    options = dict(e.options, discount=LogDiscount(2))
    if "reward_model" in e.needs:
        options["reward_model"] = (
            _ZeroQ() if name == "cascade_dr" else RewardMatrix(np.zeros((2, 2)))
        )
    for g, group in enumerate(e.log_columns):
        others = [other[0] for other in e.log_columns[:g] + e.log_columns[g + 1 :]]
        for column in group:
            # One column of this group, the first of the others.
            columns = {c: None for c in values} | {c: values[c] for c in (column, *others)}
            # s0's rewarded items are where the target ranks them: every estimate is positive.
            assert e.function(_ranking_log(**columns), RANKER, **options).value > 0, column
        # Without the group: the core refuses, naming a column of it.
        columns = {c: None for c in values} | {c: values[c] for c in others}
        with pytest.raises(ValueError, match="|".join(group)):
            e.function(_ranking_log(**columns), RANKER, **options)
        with pytest.raises(ValueError, match=rf"log has no column .*which {name} reads"):
            e.check_log_columns(["session", *sorted(set(values) - set(group))], "log")


class _ZeroQ:
    """A cascade-DR reward model that predicts 0 everywhere."""

    def predict(self, contexts, items, ranks):
        return np.zeros(len(items))


@pytest.mark.filterwarnings("ignore::recpack_ope.ReliabilityWarning")
def test_the_other_ranking_estimators_compute_what_their_references_say():
    log = _ranking_log()
    # Cascade-DR with a reward model of 0 is cascade IPS (Kiyohara et al. §3.1).
    dr = estimator("cascade_dr")
    assert dr.function(log, RANKER, reward_model=_ZeroQ()).value == pytest.approx(
        (1 / 0.5 + 1 / 0.25) / 2, rel=1e-12
    )
    assert (dr.plain, dr.needs) == ("cascade_ips", ("reward_model",))
    # Pseudo-inverse with a uniform logging policy over m = 2 candidates, K = m = 2: weight
    # 1 + (m − 1)(S − 1) with S = Σ_j π(s_j at j): s0 S = 2, weight 2; s1 S = 0, weight 0.
    pi = estimator("pseudo_inverse")
    value = pi.function(log, RANKER, logging=PlackettLuceRanker.uniform(2)).value
    assert value == pytest.approx((2 * 2.0 + 0 * 1.0) / 2, rel=1e-12)
    assert (pi.plain, pi.needs, pi.log_columns) == ("independent_ips", ("logging",), ())
    # Adaptive IPS picks a behaviour and weights as that behaviour's estimator does (one
    # fold: chosen on all sessions; cross-fitted, each fold may pick its own).
    aips = estimator("adaptive_ips").function(log, RANKER, n_folds=1)
    chosen = re.search(r"auto: .*?(independent|cascade|standard)", aips.name).group(1)
    assert aips.value == pytest.approx(estimator(f"{chosen}_ips").function(log, RANKER).value)


def _choices(parser: argparse.ArgumentParser, *path: str) -> set[str]:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a.choices, dict))
        parser = sub.choices[name]
    action = next(a for a in parser._actions if "--metrics" in a.option_strings)
    return set(action.names)


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
    assert feed_log_table() in page
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
    assert all("sessions" in estimator(n).estimands for n in names("feed_log"))


@pytest.mark.parametrize("name", names("held_out"))
def test_an_unknown_population_is_refused_by_every_held_out_estimator(name):
    kw = dict(discount=D, propensity=P, reward_model=RewardMatrix(np.full((3, 4), 0.5)))
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'any'"):
        estimator(name)(Y_ALL, SCORES_ALL, population="any", **kw)


# --- one default per estimator option -------------------------------------------------------


def _signature_default(function, option):
    return inspect.signature(function).parameters[option].default


def _path_defaults(entry, option, tmp_path) -> dict:
    """The value of ``option`` that every path computing ``entry`` uses when not given."""
    from recpack_ope.cli import build_parser
    from recpack_ope.evaluation.files import FILE_METRICS, evaluate_files, plan_files
    from recpack_ope.evaluation.held_out import StratifiedOptions
    from recpack_ope.evaluation.inputs import EstimatorInputs
    from recpack_ope.evaluation.strata_report import ReportMetric, strata_report
    from recpack_ope.spark import files as spark_files
    from recpack_ope.spark import held_out as spark_held_out
    from recpack_ope.spark import logged as spark_logged

    spark_stratified = importlib.import_module("recpack_ope.spark.stratified")

    # stratified_ndcg passes the options it does not take to its base metric.
    takes = option in inspect.signature(entry.function).parameters
    function = entry.function if takes else entry.options["metric"]
    seen = {"core signature": _signature_default(function, option)}
    seen["Estimator.option"] = entry.option(option)
    if option in ("clip", "population") and entry.name in FILE_METRICS:
        # The CLI's parse of no flag and the file functions' defaults, resolved by plan_files
        # (both engines plan with it) for this estimator's kind of data.
        files = [tmp_path / f"{n}.csv" for n in ("data", "model", "propensity")]
        for path in files:
            path.write_text("x\n")
        if entry.data == "held_out":
            data = {"held_out": files[0], "recommendations": {"M": files[1]}}
            data["propensity"] = files[2]
        else:
            data = {"feed_log": files[0], "targets": {"M": files[1]}}
        cli = getattr(build_parser().parse_args(["evaluate"]), option)
        for path, given in (
            ("CLI", cli),
            ("evaluate_files", _signature_default(evaluate_files, option)),
            ("Spark evaluate_files", _signature_default(spark_files.evaluate_files, option)),
        ):
            seen[path] = getattr(plan_files(**data, **{option: given}), option)
    if entry.data == "held_out":
        if option != "ess_threshold":
            seen["EstimatorInputs"] = getattr(EstimatorInputs(), option)
        if option in ("clip", "n_strata", "binning"):
            seen["StratifiedOptions"] = getattr(StratifiedOptions(), option)
            seen["strata_report"] = _signature_default(strata_report, option)
        if option == "clip":
            seen["ReportMetric"] = ReportMetric(entry.name).clip
        spark = spark_stratified.stratified if entry.weighting == "stratified" else None
        spark = spark or spark_held_out.evaluate
        if option in inspect.signature(spark).parameters:  # Spark strata: observed users
            seen["Spark"] = _signature_default(spark, option)
    elif entry.name in spark_logged.FEED_LOG:
        spark = spark_logged.ranking_ips if entry.name in spark_logged.RANKING else None
        seen["Spark"] = _signature_default(spark or spark_logged.logged_dcg, option)
    return seen


@pytest.mark.parametrize("name", names())
def test_every_path_defaults_each_option_to_the_registry_default(name, tmp_path):
    entry = estimator(name)
    assert entry.defaults, name  # every estimator has at least one option
    for option, value in entry.defaults.items():
        for path, seen in _path_defaults(entry, option, tmp_path).items():
            assert seen == value, (name, option, path)


def test_held_out_ips_estimators_clip_at_the_recommended_m_and_feed_log_ones_do_not():
    clip = {name: e.defaults.get("clip", "—") for name, e in ESTIMATORS.items()}
    weighted = {n for n, e in ESTIMATORS.items() if e.data == "held_out" and e.weighted}
    assert {n for n, m in clip.items() if m == RECOMMENDED_CLIP} == weighted
    assert {n for n, m in clip.items() if m is None} == set(names("feed_log")) - {"pseudo_inverse"}
    # Unclipped, the weight 1/p = 400 of item 0 passes whole; by default it is cut to 100.
    p = np.array([1 / 400, 1.0, 1.0, 1.0])
    for name in sorted(weighted - {"dr_dcg"}):
        default, unclipped = (
            estimator(name)(Y_TRUE, SCORES, discount=D, propensity=p, **clip)
            for clip in ({}, {"clip": None})
        )
        floor = np.maximum(p, 1 / RECOMMENDED_CLIP)  # min(m, 1/p) = 1 / max(p, 1/m)
        by_hand = estimator(name)(Y_TRUE, SCORES, discount=D, propensity=floor, clip=None)
        assert default.value == pytest.approx(by_hand.value, rel=1e-12), name
        assert default.value != pytest.approx(unclipped.value, rel=1e-3), name


def test_the_cli_help_states_each_kind_of_estimators_clip_default(capsys):
    from recpack_ope.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "held-out IPS estimators clip at 100, feed-log ones do not clip" in help_text
    for given, parsed in (("none", None), ("auto", "auto"), ("7.5", 7.5), ("default", "default")):
        args = build_parser().parse_args(["evaluate", "--clip", given])
        assert args.clip == parsed
