"""The Cornac adapter against Cornac's own metrics, evaluation loop and datasets.

Cornac (and TensorFlow, for the WMF of the reproduction) are installed by both nox sessions.
"""

from __future__ import annotations

import math
import warnings

import cornac
import numpy as np
import pandas as pd
import powerlaw
import pytest
import scipy.sparse as sp
from conftest import hide_package
from cornac.data import Dataset
from cornac.eval_methods import RatioSplit
from cornac.eval_methods.base_method import ranking_eval
from cornac.hyperopt import Discrete, GridSearch
from cornac.metrics import MAE, NDCG, Precision, Recall
from cornac.models import BPR, MostPop
from recpack_ope.adapters import cornac as adapter
from recpack_ope.rpp import rpp
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, TopK, dcg, ndcg, recall
from recpack_ope.cli import main
from recpack_ope.inference.diagnostics import ESS_RATIO_THRESHOLD, ReliabilityWarning
from recpack_ope.propensity.weights import RECOMMENDED_CLIP


@pytest.fixture(scope="module")
def triplets(movielens):
    users = movielens.user_ids[movielens.users].astype(str)
    # Raw item ids that sort differently from Cornac's internal indices.
    items = np.char.add("movie-", (10_000 - movielens.item_ids[movielens.items]).astype(str))
    return list(zip(users.tolist(), items.tolist(), movielens.ratings.tolist(), strict=True))


@pytest.fixture(scope="module")
def pse(triplets):
    return adapter.PropensityStratifiedEvaluation(
        triplets, test_size=0.2, rating_threshold=4.0, seed=123
    )


@pytest.fixture(scope="module")
def bpr(pse):
    return BPR(k=10, seed=123, verbose=False).fit(pse.train_set)


def test_metrics_equal_cornacs_ndcg_without_propensities(pse, bpr):
    ours = [adapter.IPSNDCG(k=10), adapter.UnbiasedDCG(k=10)]
    assert [m.name for m in ours] == ["nDCG@10", "DCG@10"]  # unweighted: no IPS- prefix
    _, per_user = ranking_eval(
        bpr, [NDCG(k=10), *ours], pse.train_set, pse.test_set, rating_threshold=4.0
    )
    reference, ips_ndcg, dcg = per_user
    assert len(reference) == 918
    for u, value in reference.items():
        assert ips_ndcg[u] == pytest.approx(value, abs=1e-12)
        row = pse.test_set.csr_matrix[u]
        gt = row.indices[row.data >= 4.0]
        assert dcg[u] == pytest.approx(value * NDCG.dcg_score(gt, gt, 10), abs=1e-12)


def test_ips_weights_land_on_raw_item_ids(triplets):
    split = RatioSplit(triplets, test_size=0.2, rating_threshold=4.0, seed=1, exclude_unknowns=True)
    model = BPR(k=8, seed=1, verbose=False).fit(split.train_set)
    raw_ids = list(split.global_iid_map)
    rng = np.random.default_rng(0)
    skew = {
        raw: float(p) for raw, p in zip(raw_ids, rng.uniform(0.001, 1.0, len(raw_ids)), strict=True)
    }
    skew[raw_ids[5]] = 0.002  # one rare item with weight 500
    _, test_items, ratings = (np.asarray(a) for a in split.test_set.uir_tuple)
    liked = np.bincount(test_items[ratings >= 4.0]).argmax()
    raw_of = {index: raw for raw, index in split.global_iid_map.items()}
    skew[raw_of[liked]] = 0.005  # and the most liked held-out item weighs 200
    # clip=None: the paper's unclipped weights; the default clips them at RECOMMENDED_CLIP
    metric = adapter.CornacAdapter(propensity=skew, clip=None).fit(split).metrics(k=50)[0]
    default = adapter.CornacAdapter(propensity=skew).fit(split).metrics(k=50)[0]
    assert metric.name == default.name == "IPS-DCG@50"
    assert default.clip == RECOMMENDED_CLIP < 500
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, (values, clipped) = ranking_eval(
            model, [metric, default], split.train_set, split.test_set, rating_threshold=4.0
        )
    # one user's weights say nothing about the average: no per-user reliability warnings
    assert not [w for w in caught if issubclass(w.category, ReliabilityWarning)]
    test, train = split.test_set.csr_matrix, split.train_set.csr_matrix
    rare = 0
    for u in values:
        positives = {
            raw_of[i] for i, r in zip(test[u].indices, test[u].data, strict=True) if r >= 4.0
        }
        seen = {i for i, r in zip(train[u].indices, train[u].data, strict=True) if r >= 4.0}
        candidates = [
            i for i in range(split.train_set.num_items) if i not in seen or raw_of[i] in positives
        ]
        ranked, _ = model.rank(u, np.array(candidates), k=50)
        hits = [
            (1 / skew[raw_of[i]], j) for j, i in enumerate(ranked[:50]) if raw_of[i] in positives
        ]
        assert values[u] == pytest.approx(sum(w / math.log2(j + 2) for w, j in hits), rel=1e-12)
        assert clipped[u] == pytest.approx(
            sum(min(RECOMMENDED_CLIP, w) / math.log2(j + 2) for w, j in hits), rel=1e-12
        )
        rare += any(w > RECOMMENDED_CLIP for w, _ in hits)
    assert rare  # the rare item is ranked for some users, where the clipping matters
    # "auto" selects m from all users at once, which Cornac's loop cannot
    auto = adapter.CornacAdapter(propensity=skew, clip="auto").fit(split).metrics(k=50)[0]
    with pytest.raises(
        ValueError,
        match="IPS-DCG@50 has clip='auto'.*Cornac's ranking loop computes one user at a time",
    ):
        ranking_eval(model, [auto], split.train_set, split.test_set, rating_threshold=4.0)
    missing = dict(skew)
    del missing[raw_ids[3]]
    with pytest.raises(ValueError, match=f"no propensity for raw item id '{raw_ids[3]}'"):
        adapter.CornacAdapter(propensity=missing).fit(split)


def _cornac_propensities(triplets, pse):
    """Cornac's power-law propensity by its documented formula: n^α above xmin, n below."""
    counts = pd.Series([i for _, i, _ in triplets]).value_counts()
    fit = powerlaw.Fit(counts.to_numpy(dtype=float), discrete=True, verbose=False).power_law
    p = counts.astype(float).where(counts <= fit.xmin, counts.astype(float) ** fit.alpha)
    return np.array([p[raw] for raw in pse.global_iid_map])


def test_stratified_evaluation_matches_cornacs_loop_per_stratum(
    triplets, pse, bpr, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)  # Experiment.run writes its log to the working directory
    experiment = cornac.Experiment(pse, [MostPop(), bpr], metrics=[NDCG(), Recall(k=10)])
    bpr.fit = lambda *a, **k: bpr  # keep the fitted model: same scores in both loops
    experiment.run()
    printed = capsys.readouterr().out
    assert "[BPR]" in printed and "Stratified" in printed and "Q2" in printed
    result = experiment.result[1]

    # Closed row: Cornac's own loop, one metric at a time (see the note on NDCG@-1 below).
    for metric, name in ((NDCG(), "NDCG@-1"), (Recall(k=10), "Recall@10")):
        (value,), (per_user,) = ranking_eval(
            bpr, [metric], pse.train_set, pse.test_set, rating_threshold=4.0
        )
        closed = result.estimates[name].holdout
        assert closed.value == pytest.approx(value, abs=1e-12)
        ours = dict(zip(result.user_index[closed.user_ids].tolist(), closed.per_user, strict=True))
        assert set(ours) == set(per_user)

    # Strata: pandas.cut on Cornac's propensities of the positive test ratings, then Cornac's
    # loop on a Dataset of each stratum's ratings (what Cornac's broken class meant to do).
    p = _cornac_propensities(triplets, pse)
    uir = [(u, i, r) for u, i, r in zip(*pse.test_set.uir_tuple, strict=True) if r >= 4.0]
    stratum = pd.cut(p[[i for _, i, _ in uir]], bins=2, labels=False)
    raw_user = list(pse.global_uid_map)
    raw_item = list(pse.global_iid_map)
    expected, shares = 0.0, np.bincount(stratum) / len(uir)
    for s, ours in enumerate(result.estimates["NDCG@-1"].strata):
        part = [
            (raw_user[u], raw_item[i], r)
            for (u, i, r), q in zip(uir, stratum, strict=True)
            if q == s
        ]
        qset = Dataset.build(
            part,
            global_uid_map=pse.global_uid_map,
            global_iid_map=pse.global_iid_map,
            exclude_unknowns=True,
        )
        (value,), _ = ranking_eval(bpr, [NDCG()], pse.train_set, qset, rating_threshold=4.0)
        assert ours.n_interactions == len(part)
        assert ours.value == pytest.approx(value, abs=1e-12)
        expected += shares[s] * value
    assert result.metric_avg_results["NDCG@-1"] == pytest.approx(expected, abs=1e-12)
    assert result.rows().loc["Stratified", "NDCG@-1"] == pytest.approx(expected, abs=1e-12)
    report = adapter.simpsons_paradox(experiment.result[1], experiment.result[0])
    assert [r.label for r in report.rows] == ["Holdout", "IPS", "Stratified", "Q1", "Q2"]
    assert report.names == ("BPR", "MostPop")


def test_cornac_ndcg_of_the_whole_ranking_is_wrong_beside_a_cutoff_metric(pse, bpr):
    """Why the test above calls Cornac's loop one metric at a time: with Recall@10 in the same
    call, Cornac ranks only the top 10 (max k ignores -1) and NDCG@-1 sees the rest unsorted."""
    (alone,), _ = ranking_eval(bpr, [NDCG()], pse.train_set, pse.test_set, rating_threshold=4.0)
    (mixed, _), _ = ranking_eval(
        bpr, [NDCG(), Recall(k=10)], pse.train_set, pse.test_set, rating_threshold=4.0
    )
    assert abs(mixed - alone) > 1e-3


def _cornac_top(method, model, users, k):
    """Each user's top k by Cornac's own ``rank`` over Cornac's candidate items."""
    test, train = method.test_set.csr_matrix, method.train_set.csr_matrix
    n_items = method.train_set.num_items
    rows = []
    for u in users:
        held = set(test[u].indices[test[u].data >= 4.0])
        seen = set(train[u].indices[train[u].data >= 4.0])
        candidates = [i for i in range(n_items) if i not in seen or i in held]
        rows.append(model.rank(int(u), np.array(candidates), k=k)[0][:k])
    return np.vstack(rows)


def test_batched_ranking_equals_cornacs_rank(pse, bpr):
    users = np.arange(0, 900, 7)
    scorer = adapter._Scorer(bpr, pse.n_items_)
    assert scorer.batched
    one_by_one = np.vstack([adapter._one_user_scores(bpr, u, pse.n_items_) for u in users])
    np.testing.assert_allclose(scorer(users), one_by_one, rtol=1e-5)
    np.testing.assert_array_equal(pse.rank(bpr, users, 30).items, _cornac_top(pse, bpr, users, 30))

    class Wrong(BPR):
        def get_item_vectors(self):
            return super().get_item_vectors() * 2.0

    wrong = Wrong(k=10, seed=123, verbose=False).fit(pse.train_set)
    scorer = adapter._Scorer(wrong, pse.n_items_)
    scorer(users[:5])
    assert not scorer.batched  # the vectors do not reproduce model.score: one user at a time
    fallback = pse.rank(wrong, users, 30)
    np.testing.assert_array_equal(fallback.items, _cornac_top(pse, wrong, users, 30))


def test_post_normalised_dcg_and_errors(pse, bpr):
    result, _ = pse.evaluate(
        bpr, [adapter.PostNormalisedDCG(k=20), adapter.UnbiasedDCG(k=20)], user_based=True
    )
    assert set(result.estimates) == {"pnDCG@20", "DCG@20"}
    plain = result.estimates["DCG@20"].holdout
    held = np.diff(pse._positives(pse.test_set).indptr)[result.user_index[plain.user_ids]]
    idcg = [sum(1 / math.log2(j + 1) for j in range(1, min(n, 20) + 1)) for n in held]
    assert result.estimates["pnDCG@20"].holdout.value == pytest.approx(
        plain.per_user.sum() / sum(idcg), abs=1e-12
    )
    with pytest.raises(ValueError, match="rating metrics \\(MAE\\)"):
        pse.evaluate(bpr, [MAE()], user_based=True)
    with pytest.raises(ValueError, match="Precision@10 is not supported"):
        pse.evaluate(bpr, [Precision(k=10)], user_based=True)
    with pytest.raises(ValueError, match="Cornac's per-user averaging cannot produce"):
        adapter.PostNormalisedDCG(k=10).compute(gt_pos=np.array([1]), pd_rank=np.array([1, 2]))
    with pytest.raises(ValueError, match="k must be a positive integer or -1"):
        adapter.UnbiasedDCG(k=0)
    with pytest.raises(ValueError, match="PowerLawPropensity is not fitted"):
        adapter.UnbiasedDCG(k=10, propensity=PowerLawPropensity())


def test_hyperparameter_search_with_our_metric(triplets, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    method = adapter.PropensityStratifiedEvaluation(
        triplets, test_size=0.2, val_size=0.1, rating_threshold=4.0, seed=7
    )
    target = adapter.UnbiasedDCG(k=10)
    search = GridSearch(
        BPR(seed=7, verbose=False),
        space=[Discrete("k", [4, 16])],
        metric=target,
        eval_method=method,
    )
    experiment = cornac.Experiment(method, [search], metrics=[NDCG(k=10)])
    experiment.run()
    scores = {}
    for k in (4, 16):
        model = BPR(k=k, seed=7, verbose=False).fit(method.train_set, method.val_set)
        (scores[k],), _ = ranking_eval(
            model, [target], method.train_set, method.val_set, rating_threshold=4.0
        )
    assert search.best_params == {"k": max(scores, key=scores.get)}
    assert search.best_score == pytest.approx(max(scores.values()), abs=1e-12)
    (test_ndcg,), _ = ranking_eval(
        search.best_model,
        [NDCG(k=10)],
        method.train_set,
        method.test_set,
        method.val_set,
        rating_threshold=4.0,
    )
    assert experiment.result[0].estimates["NDCG@10"].holdout.value == pytest.approx(
        test_ndcg, abs=1e-12
    )


def test_reproduction_of_table_2_on_movielens_100k(tmp_path, capsys):
    assert main(["reproduce", "simpsons-paradox", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| Q2 |" in out and "paper BPR10" in out
    from recpack_ope.adapters.simpsons_table2 import Table2Config, run_table2

    result = run_table2(Table2Config())
    s = result.results[0].estimates["NDCG@-1"]
    assert result.report.row("Stratified").value_a == pytest.approx(
        sum(q.share * q.value for q in s.strata), abs=1e-12
    )
    assert result.report.row("Holdout").n_interactions == s.n_interactions
    assert result.report.paradox == result.report.verdict().startswith("Simpson's paradox")
    assert (tmp_path / "table2.md").read_text().count("| Q") == 2
    assert (tmp_path / "table2.png").stat().st_size > 10_000


def test_reproduce_without_cornac_says_what_to_install(monkeypatch, capsys):
    hide_package(monkeypatch, "cornac")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "simpsons-paradox"])
    assert stop.value.code == 2
    assert (
        "needs 'cornac': in a clone of recpack-ope (it is not on PyPI), pip install \".[cornac]\""
        in capsys.readouterr().err
    )


def test_add_rpp_equals_core_rpp_on_cornacs_own_rankings(triplets, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Cornac writes experiment logs to the working directory
    split = RatioSplit(triplets, test_size=0.2, rating_threshold=4.0, seed=123, verbose=False)
    models = [
        BPR(k=10, seed=123, verbose=False),
        BPR(k=5, seed=7, name="BPR5", verbose=False),
        MostPop(),
    ]
    experiment = cornac.Experiment(split, models, metrics=[Recall(k=10)], verbose=False)
    experiment.run()
    with pytest.raises(ValueError, match="weighting must be one of"):
        adapter.add_rpp(experiment, weighting="linear")
    matrix = adapter.add_rpp(experiment, k=10)
    assert matrix.names == ("BPR", "BPR5", "MostPop")
    # Independent route: Cornac's model.rank per user over Cornac's candidates, then the core.
    test = split.test_set.csr_matrix
    y_true = sp.csr_matrix((test >= 4.0).astype(float))
    users = np.flatnonzero(np.diff(y_true.indptr) > 0)
    tops = [TopK(_cornac_top(split, m, users, 10)) for m in models[:2]]
    expected = rpp(y_true[users][:, : split.train_set.num_items], *tops)
    np.testing.assert_allclose(matrix.pair("BPR", "BPR5").per_user, expected.per_user, atol=1e-12)
    wins = matrix.win_rates()
    assert wins.means.sum() == pytest.approx(0.0, abs=1e-12)  # antisymmetry
    for result, value in zip(experiment.result, wins.means, strict=True):
        assert result.metric_avg_results["RPP@10 win"] == value
    assert "RPP@10 win" in str(experiment.result)
    # Tied with the best on Recall@10: Holm-adjusted scipy paired t-tests against the best,
    # over Cornac's own per-user values.
    ties = adapter.tied_with_best(experiment, "Recall@10")
    per_user = {r.model_name: r.metric_user_results["Recall@10"] for r in experiment.result}
    users = sorted(per_user["BPR"])
    values = {m: np.array([v[u] for u in users]) for m, v in per_user.items()}
    best = max(values, key=lambda m: values[m].mean())
    assert ties.best == best
    others = [m for m in values if m != best]
    raw = np.array([stats.ttest_rel(values[best], values[m]).pvalue for m in others])
    holm = np.minimum(1, np.maximum.accumulate(np.sort(raw) * np.array([2, 1])))[
        np.argsort(np.argsort(raw))
    ]
    for m, p in zip(others, holm, strict=True):
        assert ties.p_value[ties.names.index(m)] == pytest.approx(p, rel=1e-9)
        assert (m in ties.tied) == (p >= 0.05)
    with pytest.raises(ValueError, match="no per-user results for metric 'NDCG@10'"):
        adapter.tied_with_best(experiment, "NDCG@10")
    single = cornac.Experiment(split, [MostPop()], metrics=[Recall(k=10)], verbose=False)
    with pytest.raises(ValueError, match="no results yet"):
        adapter.add_rpp(single)
    single.run()
    with pytest.raises(ValueError, match="the experiment has 1, add at least one more"):
        adapter.add_rpp(single)


# --- names that say whether a metric is weighted; the IPS row's clipping and diagnostics -----


def test_metric_names_say_whether_they_are_ips_weighted(pse):
    for cls, label in (
        (adapter.UnbiasedDCG, "DCG"),
        (adapter.IPSNDCG, "nDCG"),
        (adapter.PostNormalisedDCG, "pnDCG"),
    ):
        assert cls(k=10).name == f"{label}@10"
        assert cls(k=-1).name == f"{label}@-1"
        weighted = cls(k=10, propensity=[0.5, 1.0])
        assert weighted.name == f"IPS-{label}@10" and weighted.weighted
        assert weighted.clip == RECOMMENDED_CLIP
    fitted = adapter.CornacAdapter(propensity=PowerLawPropensity()).fit(pse)
    assert fitted.clip == RECOMMENDED_CLIP
    assert [m.name for m in fitted.metrics(k=5)] == ["IPS-DCG@5", "IPS-nDCG@5"]
    assert [m.name for m in adapter.CornacAdapter().fit(pse).metrics(k=5)] == ["DCG@5", "nDCG@5"]
    assert pse.clip == RECOMMENDED_CLIP


@pytest.mark.parametrize("bad", [0, -2.5, math.nan, math.inf, "sometimes", True])
def test_bad_clip_is_named_at_construction(triplets, bad):
    message = 'clip must be a finite number > 0, None for no clipping or "auto", got'
    for make in (
        lambda: adapter.CornacAdapter(clip=bad),
        lambda: adapter.UnbiasedDCG(k=10, propensity=[0.5, 1.0], clip=bad),
        lambda: adapter.PropensityStratifiedEvaluation(triplets, seed=1, clip=bad),
    ):
        with pytest.raises(ValueError, match=message) as caught:
            make()
        assert str(caught.value).endswith(repr(bad))


def _ess_ratio(y_true, ranking, p, clip, cutoff):
    """ESS / n by hand: weights min(clip, 1/p) of the held-out items ranked above the cutoff
    (the interactions an estimate at that cutoff evaluates)."""
    weights = []
    for row in range(y_true.shape[0]):
        ranked = list(ranking.items[row])
        for i in y_true[row].indices:
            if i in ranked and (cutoff is None or ranked.index(i) < cutoff):
                weights.append(min(clip or math.inf, 1 / p[i]))
    w = np.array(weights)
    return w.sum() ** 2 / (w**2).sum() / w.size


def test_ips_row_clips_with_the_evaluations_clip_and_shows_its_ess(triplets):
    methods = {
        clip: adapter.PropensityStratifiedEvaluation(
            triplets, test_size=0.2, rating_threshold=4.0, seed=123, clip=clip, keep_rankings=True
        )
        for clip in (None, 5)
    }
    model = BPR(k=10, seed=123, verbose=False).fit(methods[None].train_set)
    model.fit = lambda *a, **k: model  # the same scores for both evaluations
    metrics = [NDCG(), Recall(k=10), adapter.UnbiasedDCG(k=20)]
    # Cornac's power-law propensities by their documented formula, largest = 1
    p = _cornac_propensities(triplets, methods[None])
    p = p / p.max()
    for clip, method in methods.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result, _ = method.evaluate(model, metrics, user_based=True)
        np.testing.assert_allclose(result.propensity, p, rtol=1e-9)
        y, ranking = result.y_true, result.ranking
        # clip=None is the previous (paper's, Cornac's) unclipped IPS row
        expected = {
            "NDCG@-1": ndcg(y, ranking, discount=LogDiscount(), propensity=p, clip=clip),
            "Recall@10": recall(y, ranking, k=10, propensity=p, clip=clip),
            "DCG@20": dcg(y, ranking, discount=LogDiscount(20), propensity=p, clip=clip),
        }
        rows = result.rows()
        assert list(rows.index) == ["Closed", "IPS", "IPS ESS/n", "Q1", "Q2", "Stratified"]
        ratios = {}
        for (name, e), cutoff in zip(expected.items(), (None, 10, 20), strict=True):
            assert result.ips[name].value == pytest.approx(e.value, rel=1e-9), (clip, name)
            assert rows.loc["IPS", name] == result.ips[name].value
            ratios[name] = _ess_ratio(y, ranking, p, clip, cutoff)
            assert rows.loc["IPS ESS/n", name] == pytest.approx(ratios[name], rel=1e-9)
        # IPS recall@10 by hand with the clipped weights
        m = clip or math.inf
        per_user = []
        for row in range(y.shape[0]):
            held = y[row].indices
            top = set(ranking.items[row][:10])
            per_user.append(
                sum(min(m, 1 / p[i]) for i in held if i in top)
                / sum(min(m, 1 / p[i]) for i in held)
            )
        assert rows.loc["IPS", "Recall@10"] == pytest.approx(np.mean(per_user), rel=1e-9)
        # unweighted Closed rows are untouched by the clipping
        assert result.estimates["NDCG@-1"].holdout.diagnostics is None
        unreliable = [name for name, r in ratios.items() if r < ESS_RATIO_THRESHOLD]
        reliability = [w for w in caught if issubclass(w.category, ReliabilityWarning)]
        assert len(reliability) == (1 if unreliable else 0), clip
        assert sorted(result.unreliable_ips()) == sorted(unreliable)
        assert ("IPS rows marked unreliable" in str(result)) == bool(unreliable)
    # clipping at 5 changes the IPS row and makes the weights well spread
    assert methods[5].clip == 5
    assert all(r > 0.5 for r in ratios.values())


class _Skewed:
    """Propensities ∝ count³: rare items get weights near 10⁸, so IPS cannot be trusted."""

    def fit(self, counts):
        self.propensity_ = (np.maximum(counts, 1) / counts.max()) ** 3
        return self


def test_one_reliability_warning_per_model_listing_every_unreliable_ips_value(
    triplets, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    method = adapter.PropensityStratifiedEvaluation(
        triplets, test_size=0.2, rating_threshold=4.0, seed=123, clip=None, propensity=_Skewed()
    )
    models = [MostPop(), BPR(k=10, seed=123, verbose=False)]
    experiment = cornac.Experiment(method, models, metrics=[NDCG(), Recall(k=10)])
    with pytest.warns(ReliabilityWarning) as record:
        experiment.run()
    warned = [str(w.message) for w in record if issubclass(w.category, ReliabilityWarning)]
    assert len(warned) == 2  # one per model, not one per metric or stratum
    printed = capsys.readouterr().out
    for model, message, result in zip(("MostPop", "BPR"), warned, experiment.result, strict=True):
        # the whole ranking exposes the rare items (weights up to 10⁸); the top 10 do not
        ratios = result.rows().loc["IPS ESS/n", ["NDCG@-1", "Recall@10"]]
        assert ratios["NDCG@-1"] < 0.01 and ratios["Recall@10"] > ESS_RATIO_THRESHOLD
        assert list(result.unreliable_ips()) == ["NDCG@-1"]
        assert message.startswith(f"{model}: unreliable weighted estimates")
        assert "IPS NDCG@-1 (ESS/n" in message and "Recall@10" not in message
        line = f"IPS rows marked unreliable: ESS/n < 0.1 for NDCG@-1 ({ratios['NDCG@-1']:.3g})"
        assert line in str(result)
    assert printed.count("IPS rows marked unreliable: ESS/n < 0.1 for NDCG@-1") == 2


def test_dr_row_is_the_cores_dr_dcg_with_a_calibrated_cornac_reward_model(triplets):
    method = adapter.PropensityStratifiedEvaluation(
        triplets,
        test_size=0.2,
        val_size=0.1,
        rating_threshold=4.0,
        seed=123,
        clip=5,
        keep_rankings=True,
        reward_model=MostPop(),
    )
    model = BPR(k=10, seed=123, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        result, _ = method.evaluate(
            model, [adapter.UnbiasedDCG(k=20), Recall(k=10)], user_based=True
        )
    rows = result.rows()
    assert list(rows.index) == ["Closed", "IPS", "IPS ESS/n", "DR", "Q1", "Q2", "Stratified"]
    assert math.isnan(rows.loc["DR", "Recall@10"])
    # The reward model by hand: MostPop's scores (item counts in the training set) of the test
    # users, Platt-calibrated on the validation positives with the propensities.
    from recpack_ope import ScoreCalibration, dr_dcg

    users = result.user_index
    n_items = result.y_true.shape[1]
    counts = np.bincount(np.asarray(method.train_set.uir_tuple[1]), minlength=n_items)[:n_items]
    scores = np.tile(counts.astype(float), (users.size, 1))
    val = adapter._positives(method, method.val_set, n_items)[users]
    calibration = ScoreCalibration().fit(scores, val, propensity=result.propensity)
    expected = dr_dcg(
        result.y_true,
        result.ranking,
        discount=LogDiscount(20),
        reward_model=calibration.reward_model(scores),
        propensity=result.propensity,
        clip=5,
    )
    assert rows.loc["DR", "DCG@20"] == pytest.approx(expected.value, rel=1e-6)
    # Without impressions DR is clipped IPS plus ρ̂ on the clipped part: at least IPS.
    assert rows.loc["DR", "DCG@20"] >= rows.loc["IPS", "DCG@20"]
