"""Recall, propensity strata, the stratified estimator (Eq. 4) and the Simpson's-paradox report."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import (
    D,
    S,
    Y,
    adversarial,
    as_sparse,
    brute_force_dcg,
    corrupt,
    delta,
    held_out,
    random_case,
)
from scipy import stats

from recpack_ope.metrics.dcg import (
    dcg,
    ips_dcg,
    ips_ndcg,
    ndcg,
    pn_dcg,
)
from recpack_ope.metrics.doubly_robust import dr_dcg
from recpack_ope.metrics.ranking import TopK
from recpack_ope.metrics.recall import recall
from recpack_ope.metrics.simpsons_paradox import simpsons_paradox
from recpack_ope.metrics.stratified import stratified, stratum_index
from recpack_ope.propensity.discount import (
    LogDiscount,
)
from recpack_ope.reward.models import RewardMatrix


def log_delta(cutoff):
    return lambda r: 1.0 / math.log2(r + 1) if cutoff is None or r <= cutoff else 0.0


# --- recall -----------------------------------------------------------------------------


# --- strata -----------------------------------------------------------------------------


@pytest.mark.parametrize("n_strata", [1, 2, 3, 7])
def test_equal_width_strata_match_pandas_cut(n_strata):
    values = np.random.default_rng(n_strata).random(500) ** 3
    index, edges = stratum_index(values, n_strata, "width")
    codes = pd.cut(values, bins=n_strata, labels=False)
    np.testing.assert_array_equal(index, codes)
    assert edges[0] == values.min() and edges[-1] == values.max()
    np.testing.assert_allclose(np.diff(edges), (values.max() - values.min()) / n_strata)


@pytest.mark.parametrize("n_strata", [2, 4, 5])
def test_equal_mass_strata_match_pandas_qcut(n_strata):
    values = np.random.default_rng(n_strata).random(1000)
    index, _ = stratum_index(values, n_strata, "mass")
    np.testing.assert_array_equal(index, pd.qcut(values, n_strata, labels=False))
    assert np.bincount(index).tolist() == [1000 // n_strata] * n_strata


def test_equal_mass_strata_keep_ties_together():
    values = np.array([0.1] * 6 + [0.2, 0.3, 0.4, 0.5])
    index, edges = stratum_index(values, 2, "mass")
    assert index.tolist() == [0] * 6 + [1] * 4
    assert edges[1] == 0.1


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones(3), 0, "width"), "n_strata must be a positive integer, got 0"),
        (
            (np.ones(3), 2, "quantile"),
            r"binning.*got 'quantile'",
        ),
        ((np.ones((2, 2)), 2, "width"), r"non-empty 1-D array of propensities, got shape \(2, 2\)"),
    ],
)
def test_stratum_index_rejects_bad_options(args, message):
    with pytest.raises(ValueError, match=message):
        stratum_index(*args)


# --- the stratified estimator ----------------------------------------------------------


def _case(seed=0, n_users=60, n_items=25):
    rng = np.random.default_rng(seed)
    y, scores = random_case(rng, n_users=n_users, n_items=n_items, density=0.25)
    propensity = rng.uniform(0.01, 1.0, n_items)
    return y, scores, propensity


METRICS = [
    (ndcg, {"discount": LogDiscount(5)}),
    (dcg, {"discount": LogDiscount(10)}),
    (pn_dcg, {"discount": LogDiscount()}),
    (recall, {"k": 5}),
]


@pytest.mark.parametrize("metric, kwargs", METRICS)
def test_one_stratum_is_the_holdout_value(metric, kwargs):
    y, scores, propensity = _case()
    plain = metric(y, scores, **kwargs)
    one = stratified(metric, y, scores, stratify_by=propensity, n_strata=1, **kwargs)
    assert one.value == pytest.approx(plain.value, abs=1e-12)
    assert one.holdout.value == plain.value
    np.testing.assert_allclose(one.per_user, plain.per_user, atol=1e-12)
    np.testing.assert_allclose(one.influence, plain.influence, atol=1e-12)
    assert one.standard_error == pytest.approx(plain.standard_error, rel=1e-12)
    assert one.strata[0].share == 1.0 and one.strata[0].n_interactions == y.nnz


def _brute_stratum_values(y, scores, propensity, n_strata, cutoff):
    """Per stratum: nDCG by plain loops on the interactions whose item falls in the stratum,
    with the bins computed by pandas.cut, and the stratum's share of interactions."""
    dense = y.toarray()
    users, items = np.nonzero(dense)
    strata = pd.cut(propensity[items], bins=n_strata, labels=False)
    out = []
    for s in range(n_strata):
        part = np.zeros_like(dense)
        keep = strata == s
        part[users[keep], items[keep]] = dense[users[keep], items[keep]]
        per_user = brute_force_dcg(part, scores, log_delta(cutoff))
        values = {u: d / i for u, (d, i, _) in per_user.items()}
        out.append((keep.mean(), values))
    return out


@pytest.mark.parametrize("n_strata", [2, 3, 5])
def test_combined_value_is_the_share_weighted_mean_of_brute_force_strata(n_strata):
    y, scores, propensity = _case(seed=n_strata)
    result = stratified(
        ndcg, y, scores, stratify_by=propensity, n_strata=n_strata, discount=LogDiscount(5)
    )
    brute = _brute_stratum_values(y, scores, propensity, n_strata, 5)
    expected = sum(share * np.mean(list(v.values())) for share, v in brute if v)
    assert result.value == pytest.approx(expected, abs=1e-12)
    for stratum, (share, values) in zip(result.strata, brute, strict=True):
        assert stratum.share == pytest.approx(share, abs=1e-15)
        assert stratum.result.user_ids.tolist() == sorted(values)
        np.testing.assert_allclose(stratum.result.per_user, [values[u] for u in sorted(values)])
    assert result.per_user.mean() == pytest.approx(result.value, abs=1e-12)
    assert abs(result.influence.mean()) < 1e-12
    assert sum(s.n_interactions for s in result.strata) == y.nnz


def test_ranking_once_with_topk_gives_the_same_strata():
    y, scores, propensity = _case(seed=4)
    kwargs = {"stratify_by": propensity, "n_strata": 3, "discount": LogDiscount(10)}
    dense = stratified(ndcg, y, scores, **kwargs)
    ranked = stratified(ndcg, y, TopK.from_scores(scores, 10), **kwargs)
    assert ranked.value == dense.value
    assert [s.value for s in ranked.strata] == [s.value for s in dense.strata]


def test_standard_error_matches_a_bootstrap_over_users():
    """The delta-method SE (shares included) against 4,000 bootstrap resamples of users.

    Users differ in how much of their feedback falls on exposed items and the model favours
    exposed items, so stratum values differ widely and the stratum shares vary from sample to
    sample. Resampling error of a bootstrap SE is about 1/√(2B) ≈ 1.1 %; the delta method and
    the bootstrap differ by O(1/n) on 400 users, so 8 % leaves room for both, while dropping
    the share term of the influence halves the SE here.
    """
    rng = np.random.default_rng(0)
    n_users, n_items = 400, 30
    propensity = np.linspace(0.02, 1.0, n_items) ** 2
    taste = rng.random(n_users)
    head = np.arange(n_items)[None, :] >= 20
    prob = np.where(head, taste[:, None], (1 - taste[:, None]) * 0.4)
    y = (rng.random((n_users, n_items)) < prob).astype(float)
    y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1
    scores = propensity[None, :] + 0.3 * rng.random((n_users, n_items))
    result = stratified(
        ndcg,
        sp.csr_matrix(y),
        scores,
        stratify_by=propensity,
        n_strata=3,
        discount=LogDiscount(5),
    )
    n = result.n_users
    x = np.zeros((n, 3))
    member = np.zeros((n, 3))
    for s, stratum in enumerate(result.strata):
        where = np.searchsorted(result.user_ids, stratum.result.user_ids)
        x[where, s] = stratum.result.per_user
        member[where, s] = 1
    counts = result.counts
    weights = rng.multinomial(n, np.full(n, 1 / n), size=4000)
    means = (weights @ (x * member)) / (weights @ member)
    shares = (weights @ counts) / (weights @ counts.sum(axis=1))[:, None]
    boot = (shares * means).sum(axis=1)
    assert result.standard_error == pytest.approx(boot.std(ddof=1), rel=0.08)
    no_shares = result._scattered("influence").std(ddof=1) / np.sqrt(n)
    assert no_shares < 0.6 * boot.std(ddof=1)


def test_user_item_propensities_and_an_empty_stratum():
    y, scores, _ = _case(seed=5, n_users=20, n_items=10)
    p = y.copy()
    p.data = np.where(np.arange(p.nnz) % 4 == 0, 1.0, 0.1)  # one in four exposed fully
    result = stratified(recall, y, scores, stratify_by=p, n_strata=3, binning="width", k=3)
    assert [s.n_interactions for s in result.strata] == [
        int((p.data == 0.1).sum()),
        0,
        int((p.data == 1.0).sum()),
    ]
    assert result.strata[1].result is None and np.isnan(result.strata[1].value)
    expected = sum(s.share * s.value for s in (result.strata[0], result.strata[2]))
    assert result.value == pytest.approx(expected, abs=1e-15)


def test_unbiased_dcg_can_be_the_base_metric():
    y, scores, propensity = _case(seed=6)
    result = stratified(
        ips_dcg,
        y,
        scores,
        stratify_by=propensity,
        n_strata=2,
        discount=LogDiscount(10),
        propensity=propensity,
        clip=20.0,
    )
    assert result.holdout.name == "IPS-DCG@10"
    assert result.strata[0].result.name == "IPS-DCG@10"


def test_bad_stratification_inputs_are_named():
    y, scores, propensity = _case()
    bad = propensity.copy()
    bad[3] = 1.5
    with pytest.raises(ValueError, match=r"propensity 1.5 of item 3"):
        stratified(ndcg, y, scores, stratify_by=bad, discount=LogDiscount(5))
    with pytest.raises(TypeError, match="metric must return an EstimateResult"):
        stratified(lambda t, s: 0.5, y, scores, stratify_by=propensity)
    for population in ("observed", "all"):
        with pytest.raises(
            ValueError, match=r"no non-zero held-out rewards: nothing to stratify \(Eq. 4 .* 0/0"
        ):
            stratified(
                dcg,
                sp.csr_matrix(y.shape),
                scores,
                stratify_by=propensity,
                discount=LogDiscount(5),
                population=population,
            )
    for value in (np.nan, -1.0, 0.0, np.inf):
        bad = propensity.copy()
        bad[0] = value
        with pytest.raises(
            ValueError, match=rf"^stratify_by: propensity {value} of item 0 lies outside \(0, 1\]"
        ):
            stratified(dcg, y, scores, stratify_by=bad, discount=LogDiscount(5))


# --- Simpson's paradox ------------------------------------------------------------------


def _table_1b_case(seed=0):
    """Jadidinejad et al. Table 1b in miniature, with recall@5.

    Item 0 is the one over-exposed item (propensity 1); 150 tail items have propensity in
    [0.01, 0.1]. Twenty "head" users hold out item 0 only, twenty "tail" users hold out 99
    tail items each, so the head stratum holds 20 of 2,000 interactions (1 %). Model A ranks
    item 0 first for everyone and finds 1 held-out tail item in its top 5; model B ranks
    item 0 last and finds 3–5 of the tail users' items.
    """
    rng = np.random.default_rng(seed)
    n_items, k = 151, 5
    y = np.zeros((40, n_items))
    y[:20, 0] = 1
    held = [rng.choice(np.arange(1, n_items), 99, replace=False) for _ in range(20)]
    for u, items in enumerate(held, start=20):
        y[u, items] = 1
    a = rng.random((40, n_items))
    b = rng.random((40, n_items))
    a[:, 0], b[:, 0] = 10.0, -10.0
    hits_b = rng.integers(3, 6, 20)
    for u, items in enumerate(held, start=20):
        others = np.setdiff1d(np.arange(1, n_items), items)
        a[u, items[0]] = 9.0
        a[u, others[:3]] = [8.0, 7.0, 6.0]
        h = hits_b[u - 20]
        b[u, items[:h]] = 9.0 - np.arange(h)
        b[u, others[: k - h]] = 3.0 - np.arange(k - h)
    propensity = np.concatenate([[1.0], rng.uniform(0.01, 0.1, n_items - 1)])
    return sp.csr_matrix(y), a, b, propensity, hits_b


def test_table_1b_pattern_is_reproduced_and_flagged():
    y, a, b, propensity, hits_b = _table_1b_case()
    run = {"stratify_by": propensity, "n_strata": 2, "k": 5}
    sa, sb = stratified(recall, y, a, **run), stratified(recall, y, b, **run)
    report = simpsons_paradox(sa, sb, names=("A", "B"))

    # By hand: head users score 1 (A) or 0 (B); tail users 1/99 (A) or h_u/99 (B).
    holdout_a, holdout_b = (20 + 20 / 99) / 40, hits_b.sum() / 99 / 40
    q1_a, q1_b = 1 / 99, hits_b.mean() / 99
    assert report.row("Holdout").value_a == pytest.approx(holdout_a, abs=1e-12)
    assert report.row("Holdout").value_b == pytest.approx(holdout_b, abs=1e-12)
    q1, q2 = report.strata
    assert (q1.n_interactions, q1.n_items, q1.share) == (
        1980,
        np.count_nonzero(y[20:].sum(0)),
        0.99,
    )
    assert (q2.n_interactions, q2.n_items, q2.share) == (20, 1, 0.01)
    assert (q1.value_a, q1.value_b) == (pytest.approx(q1_a), pytest.approx(q1_b))
    assert (q2.value_a, q2.value_b) == (1.0, 0.0)
    assert report.row("Stratified").value_a == pytest.approx(0.99 * q1_a + 0.01, abs=1e-12)
    assert report.row("Stratified").value_b == pytest.approx(0.99 * q1_b, abs=1e-12)

    # Paired t-tests as scipy computes them on the per-user values.
    tail_b = hits_b / 99
    expected_q1_p = stats.ttest_rel(np.full(20, 1 / 99), tail_b).pvalue
    assert q1.p_value == pytest.approx(expected_q1_p, rel=1e-9)
    holdout_p = stats.ttest_rel(
        np.r_[np.ones(20), np.full(20, 1 / 99)], np.r_[np.zeros(20), tail_b]
    )
    assert report.row("Holdout").p_value == pytest.approx(holdout_p.pvalue, rel=1e-9)

    assert report.aggregate_direction == 1 and report.majority_direction == -1
    assert report.majority_share == pytest.approx(0.99)
    assert report.paradox
    table = report.table()
    # Values to 4 significant digits.
    assert f"| Holdout | {holdout_a:.4g}* | {holdout_b:.4g} | " in table
    assert f"| Q1 | {q1_a:.4g} | {q1_b:.4g}* | " in table
    assert "| Q2 | 1* | 0 | 0 | 20 (1.0%) | 1 |" in table
    assert "1,980 (99.0%)" in table and "20 (1.0%)" in table
    assert report.verdict().startswith("Simpson's paradox: the holdout Recall@5 favours A")
    assert "B is better in strata holding 99.0% of the held-out feedback" in report.verdict()


def test_no_paradox_when_the_strata_agree_with_the_holdout():
    y, a, b, propensity, _ = _table_1b_case()
    run = {"stratify_by": propensity, "n_strata": 2, "k": 5}
    sa, sb = stratified(recall, y, a, **run), stratified(recall, y, a * 0.5, **run)
    report = simpsons_paradox(sa, sb)
    assert report.aggregate_direction == 0 and not report.paradox
    better = simpsons_paradox(stratified(recall, y, b, **run), sa, names=("B", "A"))
    assert better.aggregate_direction == -1 and better.majority_direction == 1
    assert better.paradox


def test_report_has_an_ips_row_and_rejects_mismatched_strata():
    y, a, b, propensity, _ = _table_1b_case()
    kw = {"discount": LogDiscount(10)}
    sa = stratified(ndcg, y, a, stratify_by=propensity, **kw)
    sb = stratified(ndcg, y, b, stratify_by=propensity, **kw)
    ips = (
        ips_ndcg(y, a, propensity=propensity, **kw),
        ips_ndcg(y, b, propensity=propensity, **kw),
    )
    report = simpsons_paradox(sa, sb, ips=ips)
    assert [r.label for r in report.rows] == ["Holdout", "IPS", "Stratified", "Q1", "Q2"]
    assert report.row("IPS").value_a == ips[0].value
    assert report.row("IPS").p_value == pytest.approx(ips[0].compare(ips[1]).p_value)
    three = stratified(ndcg, y, b, stratify_by=propensity, n_strata=3, **kw)
    with pytest.raises(ValueError, match="stratified differently"):
        simpsons_paradox(sa, three)
    with pytest.raises(ValueError, match="different metrics"):
        simpsons_paradox(sa, stratified(recall, y, b, stratify_by=propensity, k=5))
    with pytest.raises(KeyError, match="no row 'Q9'"):
        report.row("Q9")


def _stratified_pair():
    a = stratified(ndcg, Y, S, stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), discount=D)
    b = stratified(ndcg, Y, S[:, ::-1], stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), discount=D)
    return a, b


def test_corrupt_propensity_matrix_of_stratified_is_refused():
    p = corrupt("column out of range")
    p.data = np.full(p.data.size, 0.5)
    with pytest.raises(ValueError, match="stratify_by is a corrupt sparse matrix"):
        stratified(dcg, Y, S, stratify_by=p, discount=D)


def test_millions_of_strata_for_a_handful_of_interactions_are_refused_at_once():
    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"n_strata=5000000 exceeds the 6 held-out interactions",
    ):
        stratified(
            dcg, Y, S, stratify_by=np.array([0.2, 0.4, 0.6, 0.8]), n_strata=5_000_000, discount=D
        )
    with pytest.raises(ValueError, match=r"n_strata=1000000000 exceeds the 3 values to stratify"):
        stratum_index(np.array([0.1, 0.2, 0.3]), 10**9)
    assert time.perf_counter() - start < 5


def test_stratified_with_as_many_strata_as_interactions_matches_brute_force():
    # Six interactions with six distinct propensities: one per stratum, each stratum's nDCG
    # is the user's single-item nDCG (by hand from the ranking).
    p = np.array([[0.1, 0, 0.3, 0], [0, 0.45, 0, 0], [0.6, 0.8, 0, 1.0]])
    result = stratified(dcg, Y, S, stratify_by=sp.csr_matrix(p), n_strata=6, discount=D)
    sizes = [s.n_interactions for s in result.strata]
    # Width (1 − 0.1)/6 = 0.15: edges 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0.
    assert sizes == [1, 1, 1, 1, 1, 1]
    ranks = {(0, 0): 1, (0, 2): 2, (1, 1): 1, (2, 0): 2, (2, 1): 3, (2, 3): 4}
    for stratum, entry in zip(
        result.strata, [(0, 0), (0, 2), (1, 1), (2, 0), (2, 1), (2, 3)], strict=True
    ):
        assert stratum.result.value == pytest.approx(delta(ranks[entry]))


ESTIMATE = dcg(Y, S, discount=D)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: stratum_index(np.array([0.2, 0.5 + 1j]), 2),
            r"propensities has complex dtype .* at position 1",
        ),
    ],
)
def test_complex_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: stratified(3, Y, S, stratify_by=np.ones(4)), "metric must be a metric function"),
        (
            lambda: stratum_index(np.array([0.1, np.nan]), 2),
            "propensities must be finite, got nan at position 1",
        ),
        (
            lambda: simpsons_paradox(*_stratified_pair(), names="AB"),
            "names must hold two model names, got 'AB'",
        ),
        (
            lambda: simpsons_paradox(*_stratified_pair(), alpha="0.1"),
            r"alpha.*got '0.1'",
        ),
        (
            lambda: simpsons_paradox(ESTIMATE, _stratified_pair()[1]),
            "a must be the StratifiedResult",
        ),
        (
            lambda: simpsons_paradox(*_stratified_pair(), ips=(1, 2)),
            r"ips must be a pair of estimates .* got \['int', 'int'\]",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def stratum_parts(y: sp.csr_matrix, propensity: np.ndarray, n_strata: int) -> list[sp.csr_matrix]:
    """Each stratum's held-out rewards, by masking ``y`` with its stratum index."""
    coo = y.tocoo()
    index, _ = stratum_index(propensity[coo.col], n_strata)
    return [
        sp.csr_matrix(
            (coo.data[index == s], (coo.row[index == s], coo.col[index == s])), shape=y.shape
        )
        for s in range(n_strata)
    ]


def two_cutoffs(y_true, y_score, *, discount):
    """A custom metric that ranks at a second cutoff: sharing must not serve it stale ranks."""
    deep = ndcg(y_true, y_score, discount=LogDiscount(discount.cutoff + 2))
    shallow = ndcg(y_true, y_score, discount=discount)
    return shallow if shallow.value > 2 * deep.value else deep


@pytest.mark.parametrize("form", ["dense", "csr", "topk"])
@pytest.mark.parametrize(
    "metric, kwargs",
    [
        (ndcg, {"discount": LogDiscount(4)}),
        (two_cutoffs, {"discount": LogDiscount(3)}),
        (recall, {"k": 5}),
        (ips_dcg, {"discount": LogDiscount(6), "propensity": "p", "impressions": "e"}),
        (
            dr_dcg,
            {"discount": LogDiscount(6), "propensity": "p", "clip": 4.0, "reward_model": "rho"},
        ),
    ],
)
def test_stratified_ranking_once_equals_each_stratum_ranked_alone(form, metric, kwargs):
    rng = np.random.default_rng(11)
    values = adversarial(rng, 30, 50)
    y = held_out(rng, values)
    p = rng.uniform(0.05, 1.0, 50)
    shown = sp.csr_matrix((rng.random(values.shape) < 0.2) * 0.5)
    given = {"p": p, "e": shown, "rho": RewardMatrix(rng.uniform(0, 1, values.shape))}
    kw = {key: given.get(v, v) if isinstance(v, str) else v for key, v in kwargs.items()}

    def fresh():
        return {
            "dense": values.copy,
            "csr": lambda: as_sparse(values, "csr"),
            "topk": lambda: TopK.from_scores(values, 8),
        }[form]()

    result = stratified(metric, y, fresh(), stratify_by=p, n_strata=3, **kw)
    # Each stratum evaluated on its own, outside any shared ranking (a fresh score object).
    for stratum, part in zip(result.strata, stratum_parts(y, p, 3), strict=True):
        alone = metric(part, fresh(), **kw)
        assert stratum.result.user_ids.tolist() == alone.user_ids.tolist()
        np.testing.assert_array_equal(stratum.result.per_user, alone.per_user)
        assert stratum.n_items == len(set(part.indices.tolist()))
    holdout = metric(y, fresh(), **kw)
    np.testing.assert_array_equal(result.holdout.per_user, holdout.per_user)


def test_a_stratum_outside_the_shared_ranks_is_ranked_afresh():
    # A custom metric that adds one more held-out item at each call: its entries are never
    # all among those ranked first, so none may be looked up among them.
    rng = np.random.default_rng(8)
    values = adversarial(rng, 16, 12)
    y = held_out(rng, values)
    p = rng.uniform(0.1, 1, 12)

    def widen(y_true, call):
        extra = np.zeros(y_true.shape)
        extra[:, call % y_true.shape[1]] = 1.0
        return sp.csr_matrix(y_true + extra)

    calls = []

    def widened(y_true, y_score, *, discount):
        calls.append(1)
        return ndcg(widen(y_true, len(calls)), y_score, discount=discount)

    result = stratified(widened, y, values, stratify_by=p, n_strata=2, discount=LogDiscount(4))
    for call, stratum in enumerate(result.strata, start=2):
        part = stratum_parts(y, p, 2)[call - 2]
        alone = ndcg(widen(part, call), values.copy(), discount=LogDiscount(4))
        np.testing.assert_array_equal(stratum.result.per_user, alone.per_user)


def test_strata_of_a_large_catalogue_count_their_distinct_items():
    # 5 held-out entries among 10,000 items (3 distinct): far fewer entries than items.
    y = sp.csr_matrix(
        ([1.0] * 5, ([0, 0, 1, 2, 2], [9_999, 17, 17, 4_000, 9_999])), shape=(3, 10_000)
    )
    scores = sp.csr_matrix(([1.0, 2.0, 3.0], ([0, 1, 2], [17, 17, 4_000])), shape=(3, 10_000))
    p = np.full(10_000, 0.5)
    p[9_999] = 0.1
    result = stratified(ndcg, y, scores, stratify_by=p, n_strata=2, discount=LogDiscount(3))
    assert [s.n_items for s in result.strata] == [1, 2]
    assert result.n_items == 3
