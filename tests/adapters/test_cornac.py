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
from cornac.eval_methods import CrossValidation, RatioSplit
from cornac.eval_methods.base_method import ranking_eval
from cornac.hyperopt import Discrete, GridSearch
from cornac.metrics import MAE, NDCG, Precision, Recall
from cornac.models import BPR, MostPop
from recpack_ope.adapters import cornac as adapter
from scipy import stats

from recpack_ope import LogDiscount, PowerLawPropensity, ips_dcg, ips_ndcg, ips_recall, rpp
from recpack_ope.cli import main
from recpack_ope.inference.diagnostics import ESS_RATIO_THRESHOLD, ReliabilityWarning
from recpack_ope.metrics.ranking import TopK
from recpack_ope.propensity import FixedPropensity
from recpack_ope.propensity.weights import RECOMMENDED_CLIP
from recpack_ope.registry import ESTIMATORS


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
    ours = [adapter.PlainNDCG(k=10), adapter.PlainDCG(k=10)]
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
        match="IPS-DCG@50 has clip='auto'",
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
    scorer = adapter._scorer(bpr, pse.n_items_)
    assert scorer.batched
    one_by_one = np.vstack([adapter._scorer(bpr, pse.n_items_).one_user(u) for u in users])
    np.testing.assert_allclose(scorer(users), one_by_one, rtol=1e-5)
    np.testing.assert_array_equal(pse.rank(bpr, users, 30).items, _cornac_top(pse, bpr, users, 30))

    class Wrong(BPR):
        def get_item_vectors(self):
            return super().get_item_vectors() * 2.0

    wrong = Wrong(k=10, seed=123, verbose=False).fit(pse.train_set)
    scorer = adapter._scorer(wrong, pse.n_items_)
    scorer(users[:5])
    assert not scorer.batched  # the vectors do not reproduce model.score: one user at a time
    fallback = pse.rank(wrong, users, 30)
    np.testing.assert_array_equal(fallback.items, _cornac_top(pse, wrong, users, 30))

    # A model measuring its vectors otherwise than by dot product is scored one user at a time
    # by model.score (its vectors' product would not be its score).
    from cornac.models.recommender import MEASURE_COSINE

    class Cosine(BPR):
        def get_vector_measure(self):
            return MEASURE_COSINE

    cosine = Cosine(k=10, seed=123, verbose=False).fit(pse.train_set)
    scorer = adapter._scorer(cosine, pse.n_items_)
    assert not scorer.batched
    np.testing.assert_array_equal(scorer(users[:3])[1], cosine.score(int(users[1])))
    np.testing.assert_array_equal(
        pse.rank(cosine, users, 30).items, _cornac_top(pse, cosine, users, 30)
    )


def test_post_normalised_dcg_and_errors(pse, bpr):
    result, _ = pse.evaluate(
        bpr, [adapter.PostNormalisedDCG(k=20), adapter.PlainDCG(k=20)], user_based=True
    )
    assert set(result.estimates) == {"pnDCG@20", "DCG@20"}
    plain = result.estimates["DCG@20"].holdout
    held = np.diff(adapter._positives(pse, pse.test_set).indptr)[result.user_index[plain.user_ids]]
    idcg = [sum(1 / math.log2(j + 1) for j in range(1, min(n, 20) + 1)) for n in held]
    assert result.estimates["pnDCG@20"].holdout.value == pytest.approx(
        plain.per_user.sum() / sum(idcg), abs=1e-12
    )
    with pytest.raises(ValueError, match="rating metrics \\(MAE\\)"):
        pse.evaluate(bpr, [MAE()], user_based=True)
    with pytest.raises(ValueError, match="Precision@10 is not supported"):
        pse.evaluate(bpr, [Precision(k=10)], user_based=True)
    for metric in (adapter.PostNormalisedDCG(k=10), adapter.SNIPSDCG(k=10, propensity=[0.5] * 3)):
        with pytest.raises(ValueError, match="Cornac's per-user averaging cannot produce"):
            metric.compute(gt_pos=np.array([1]), pd_rank=np.array([1, 2]))
    with pytest.raises(ValueError, match="k must be a positive integer or -1"):
        adapter.PlainDCG(k=0)
    with pytest.raises(ValueError, match="PowerLawPropensity is not fitted"):
        adapter.IPSDCG(k=10, propensity=PowerLawPropensity())
    # one name, one estimator: weighted classes need propensities, plain ones refuse them
    with pytest.raises(ValueError, match="IPSNDCG needs propensity.*PlainNDCG"):
        adapter.IPSNDCG(k=10)
    with pytest.raises(ValueError, match="PlainDCG .*takes no propensity.*IPSDCG"):
        adapter.PlainDCG(k=10, propensity=[0.5, 1.0])


def test_hyperparameter_search_with_our_metric(triplets, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    method = adapter.PropensityStratifiedEvaluation(
        triplets, test_size=0.2, val_size=0.1, rating_threshold=4.0, seed=7
    )
    target = adapter.PlainDCG(k=10)
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
    from recpack_ope.studies.simpsons_paradox import Table2Config, run_table2

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
        "needs 'cornac': in a clone of recpack-ope (it is not on PyPI), pip install \".[simpsons]\""
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
    # Tied with the best on Recall@10, test="t": Holm-adjusted scipy paired t-tests against the
    # best, over Cornac's own per-user values (the default, Hsu's MCB, is checked in the core's
    # tests).
    assert adapter.tied_with_best(experiment, "Recall@10").test == "mcb"
    ties = adapter.tied_with_best(experiment, "Recall@10", test="t")
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
    for plain, ips, label in (
        (adapter.PlainDCG, adapter.IPSDCG, "DCG"),
        (adapter.PlainNDCG, adapter.IPSNDCG, "nDCG"),
        (adapter.PostNormalisedDCG, adapter.IPSPostNormalisedDCG, "pnDCG"),
    ):
        assert plain(k=10).name == f"{label}@10"
        assert plain(k=-1).name == label  # the whole ranking: no cutoff in the name
        weighted = ips(k=10, propensity=[0.5, 1.0])
        assert weighted.name == f"IPS-{label}@10" and weighted.estimator.weighted
        assert weighted.clip == RECOMMENDED_CLIP
    assert adapter.SNIPSDCG(k=5, propensity=[0.5]).name == "SNIPS-DCG@5"
    assert adapter.IPSRecall(k=5, propensity=[0.5]).name == "IPS-Recall@5"
    fitted = adapter.CornacAdapter(propensity=PowerLawPropensity()).fit(pse)
    assert fitted.clip == RECOMMENDED_CLIP
    assert [m.name for m in fitted.metrics(k=5)] == ["IPS-DCG@5", "IPS-nDCG@5"]
    assert [m.name for m in adapter.CornacAdapter().fit(pse).metrics(k=5)] == ["DCG@5", "nDCG@5"]
    assert pse.clip == RECOMMENDED_CLIP


@pytest.mark.parametrize("bad", [0, -2.5, math.nan, math.inf, "sometimes", True])
def test_bad_clip_is_named_at_construction(triplets, bad):
    message = 'clip must be a finite number >= 1, None for no clipping or "auto", got'
    for make in (
        lambda: adapter.CornacAdapter(clip=bad),
        lambda: adapter.IPSDCG(k=10, propensity=[0.5, 1.0], clip=bad),
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
    metrics = [NDCG(), Recall(k=10), adapter.PlainDCG(k=20)]
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
            "NDCG@-1": ips_ndcg(y, ranking, discount=LogDiscount(), propensity=p, clip=clip),
            "Recall@10": ips_recall(y, ranking, k=10, propensity=p, clip=clip),
            "DCG@20": ips_dcg(y, ranking, discount=LogDiscount(20), propensity=p, clip=clip),
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
        # the users carrying half of IPS recall, by hand: among those with a hit
        hits = sorted((v for v in per_user if v > 0), reverse=True)
        carried = np.cumsum(hits) >= 0.5 * sum(hits) * (1 - 1e-12)
        share = (int(np.argmax(carried)) + 1) / len(hits)
        assert result.ips["Recall@10"].diagnostics.user_share == share
        # unweighted Closed rows are untouched by the clipping
        assert result.estimates["NDCG@-1"].holdout.diagnostics is None
        for name, r in ratios.items():
            fired = result.ips[name].diagnostics.reasons
            assert ("ess_ratio" in fired) == (r < ESS_RATIO_THRESHOLD), (clip, name)
        # the ratio or another criterion (e.g. a few users carrying IPS recall) flags a value
        unreliable = [name for name, e in expected.items() if not e.diagnostics.reliable]
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
        flagged = result.unreliable_ips()
        assert "NDCG@-1" in flagged and "ess_ratio" in flagged["NDCG@-1"].reasons
        # recall's weights are spread; a few users may still carry it (then named so)
        assert "ess_ratio" not in getattr(flagged.get("Recall@10"), "reasons", ())
        assert message.startswith(f"{model}: unreliable weighted estimates")
        assert "IPS NDCG@-1 (ESS/n" in message and "IPS Recall@10 (ESS/n" not in message
        line = f"IPS rows marked unreliable: NDCG@-1 (ESS/n {ratios['NDCG@-1']:.3g} < 0.1 "
        assert line in str(result)
    assert printed.count("IPS rows marked unreliable: NDCG@-1 (ESS/n") == 2


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
        result, _ = method.evaluate(model, [adapter.PlainDCG(k=20), Recall(k=10)], user_based=True)
    rows = result.rows()
    assert list(rows.index) == ["Closed", "IPS", "IPS ESS/n", "DR", "Q1", "Q2", "Stratified"]
    assert math.isnan(rows.loc["DR", "Recall@10"])
    # The reward model by hand: MostPop's scores (item counts in the training set) of the test
    # users, Platt-calibrated on the validation positives with the propensities.
    from recpack_ope import dr_dcg
    from recpack_ope.reward import ScoreCalibration

    users = result.user_index
    n_items = result.y_true.shape[1]
    counts = np.bincount(np.asarray(method.train_set.uir_tuple[1]), minlength=n_items)[:n_items]
    scores = np.tile(counts.astype(float), (users.size, 1))
    val = adapter._positives(method, method.val_set)[users]
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


# --- bad and edge-case input: a clear error naming the argument and value, or the
# number an independent route gives -------------------------------------------------------

THRESHOLD = 3.0


@pytest.fixture(scope="module")
def small_triplets():
    """40 users rating 8 of 25 items 1–5; raw item ids sort unlike Cornac's internal indices."""
    rng = np.random.default_rng(0)
    return [
        (f"u{u}", f"item-{99 - i}", float(rng.integers(1, 6)))
        for u in range(40)
        for i in rng.choice(25, 8, replace=False)
    ]


@pytest.fixture(scope="module")
def split(small_triplets):
    return RatioSplit(
        small_triplets, test_size=0.3, rating_threshold=THRESHOLD, seed=1, verbose=False
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Cornac's Experiment writes its log to the working directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cornac"))
        yield


def _run(method, models):
    experiment = cornac.Experiment(method, models, metrics=[Recall(k=5)], verbose=False)
    experiment.run()
    return experiment


@pytest.fixture(scope="module")
def experiment(split, workdir):
    return _run(split, [MostPop(), BPR(k=3, seed=1, verbose=False)])


def _cornac_top_k(method, model, users, k):
    """Each user's top k by Cornac's own ``rank`` over Cornac's candidates: every known item
    but the user's positive training items, which stay candidates when also held out."""
    test, train = method.test_set.csr_matrix, method.train_set.csr_matrix
    rows = []
    for u in users:
        held = set(test[u].indices[test[u].data >= THRESHOLD])
        seen = set(train[u].indices[train[u].data >= THRESHOLD])
        candidates = [i for i in range(method.train_set.num_items) if i not in seen or i in held]
        rows.append(model.rank(int(u), np.array(candidates), k=k)[0][:k])
    return TopK(np.vstack(rows))


# --- K1: structurally corrupt sparse input ----------------------------------------------------


def test_corrupt_sparse_propensities_are_refused_before_compiled_code():
    p = sp.csr_matrix(np.full((2, 3), 0.5))
    p.indices[1] = 7  # column 7 of a 3-column matrix
    with pytest.raises(
        ValueError, match="propensity is a corrupt sparse matrix: stored entry 1 .*column index 7"
    ):
        adapter.IPSDCG(k=5, propensity=p)
    with pytest.raises(ValueError, match="propensity is a corrupt sparse matrix"):
        adapter.CornacAdapter(propensity=p)


# --- K2: propensities keyed by raw item id, and vectors of the item space's length ------------


def test_raw_id_propensities_land_on_cornacs_indices_in_any_order(split):
    raw_ids = list(split.global_iid_map)
    rng = np.random.default_rng(3)
    given = {
        raw: float(p) for raw, p in zip(raw_ids, rng.uniform(0.05, 1.0, len(raw_ids)), strict=True)
    }
    shuffled = pd.Series(given).sample(frac=1.0, random_state=2)
    shuffled["not-in-the-data"] = 0.7  # ids Cornac does not know are ignored
    for source in (given, shuffled):
        p = adapter.CornacAdapter(propensity=source).fit(split).propensity_.propensity_
        expected = np.empty(len(raw_ids))
        for raw, index in split.global_iid_map.items():
            expected[index] = given[raw]
        np.testing.assert_array_equal(p, expected)


def _raw_case(split, edit):
    raw_ids = list(split.global_iid_map)
    series = pd.Series({raw: 0.5 for raw in raw_ids}, dtype=object)
    return edit(series, raw_ids)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda s, r: pd.concat([s, pd.Series({r[2]: 0.7})]),
            "propensity has raw item id '{r2}' more than once",
        ),
        (
            lambda s, r: pd.concat([s, pd.Series({r[2]: 0.5})]),
            "propensity has raw item id '{r2}' more than once",
        ),
        (
            lambda s, r: s.drop(r[4]),
            r"no propensity for raw item id '{r4}' \(1 of the eval method's 25 items",
        ),
        (lambda s, r: s.set_axis([*r[:-1], "other"]), "no propensity for raw item id '{last}'"),
        (
            lambda s, r: s.where(s.index != r[1], None),
            "propensity has a missing value at label '{r1}'",
        ),
        (
            lambda s, r: s.where(s.index != r[3], "x"),
            r"non-numeric value 'x' \(text\) at \(item index {i3}\)",
        ),
        (
            lambda s, r: s.where(s.index != r[3], 0.5 + 0.1j),
            r"non-numeric value \(0.5\+0.1j\) at \(item index {i3}\)",
        ),
        (
            lambda s, r: pd.Series({raw: 0.5 + 0.1j for raw in r}),
            "propensity has complex dtype complex128",
        ),
        (
            lambda s, r: s.where(s.index != r[5], 1.5),
            r"propensity 1.5 of raw item id '{r5}' \(item index {i5}\) lies outside \(0, 1\]",
        ),
        (
            lambda s, r: s.where(s.index != r[5], 0.0),
            r"propensity 0.0 of raw item id '{r5}' \(item index {i5}\)",
        ),
        (lambda s, r: {}, "no propensity for raw item id"),
    ],
)
def test_bad_raw_id_propensities_are_refused_with_the_id(split, edit, match):
    raw_ids = list(split.global_iid_map)
    names = {f"r{k}": raw for k, raw in enumerate(raw_ids)} | {"last": raw_ids[-1]}
    names |= {f"i{k}": split.global_iid_map[raw_ids[k]] for k in (3, 5)}
    with pytest.raises(ValueError, match=match.format_map(names)):
        adapter.CornacAdapter(propensity=_raw_case(split, edit)).fit(split)


class _Counts:
    """A propensity model whose vector has ``extra`` items more than the counts."""

    def __init__(self, extra):
        self.extra = extra

    def fit(self, counts):
        self.propensity_ = np.full(counts.size + self.extra, 0.5)
        return self


@pytest.mark.parametrize(
    "make",
    [
        lambda n: np.full(n - 1, 0.5),
        lambda n: np.full(n + 3, 0.5),
        lambda n: FixedPropensity(np.full(n - 2, 0.5)),
        lambda n: _Counts(-1),
        lambda n: _Counts(4),
    ],
)
def test_propensity_vectors_not_of_the_item_space_are_refused(split, make):
    n = split.total_items
    with pytest.raises(
        ValueError, match=f"propensity has \\d+ values but the eval method has {n} items"
    ):
        adapter.CornacAdapter(propensity=make(n)).fit(split)


def test_stratified_evaluation_refuses_a_propensity_model_of_another_item_space(small_triplets):
    with pytest.raises(
        ValueError, match="propensity has 27 values but the eval method has 25 items"
    ):
        adapter.PropensityStratifiedEvaluation(
            small_triplets, rating_threshold=THRESHOLD, seed=1, propensity=_Counts(2)
        )


def test_given_propensity_vectors_of_the_item_space_are_used_as_given(split):
    p = np.linspace(0.1, 1.0, split.total_items)
    for given in (p, FixedPropensity(p), FixedPropensity(p).fit()):
        np.testing.assert_array_equal(
            adapter.CornacAdapter(propensity=given).fit(split).propensity_.propensity_, p
        )


def test_user_dependent_propensities_are_refused_by_the_per_user_metrics():
    with pytest.raises(
        ValueError,
        match=r"propensity must be one value per item \(a 1-D vector\), got shape \(3, 4\)",
    ):
        adapter.IPSDCG(k=5, propensity=sp.csr_matrix(np.full((3, 4), 0.5)))


# --- K5: every argument ---------------------------------------------------------------------------


def _pse(small_triplets, **kwargs):
    return adapter.PropensityStratifiedEvaluation(
        small_triplets, **{"rating_threshold": THRESHOLD, "seed": 1, **kwargs}
    )


SIZE = (
    r"must be a fraction of the ratings in \(0, 1\) or a number of ratings \(an integer >= 1\), got"
)
VAL_SIZE = r"val_size must be a fraction of the ratings in \[0, 1\) or a number .*>= 0\), got"
SEED = r"seed must be None, an integer in 0..2\*\*32 − 1 or a numpy RandomState \(Cornac's\), got"

PSE_ARGUMENTS = [
    ({"test_size": 0}, f"test_size {SIZE} 0$"),
    ({"test_size": 1.5}, f"test_size {SIZE} 1.5$"),
    ({"test_size": 1.0}, f"test_size {SIZE} 1.0$"),
    ({"test_size": -0.1}, f"test_size {SIZE} -0.1$"),
    ({"test_size": math.nan}, f"test_size {SIZE} nan$"),
    ({"test_size": "0.2"}, f"test_size {SIZE} '0.2'$"),
    ({"test_size": None}, f"test_size {SIZE} None$"),
    ({"test_size": True}, f"test_size {SIZE} True$"),
    ({"val_size": -0.2}, f"{VAL_SIZE} -0.2$"),
    ({"val_size": 1.0}, f"{VAL_SIZE} 1.0$"),
    (
        {"val_size": 0.9},
        r"test_size=0.2 and val_size=0.9 leave no training data among the 320 ratings",
    ),
    (
        {"test_size": 320},
        r"test_size=320 and val_size=0.0 leave no training data among the 320 ratings",
    ),
    ({"n_strata": 0}, "n_strata must be a positive integer, got 0"),
    ({"n_strata": 2.5}, "n_strata must be a positive integer, got 2.5"),
    ({"batch_users": 0}, "batch_users must be a positive integer, got 0"),
    ({"batch_users": -5}, "batch_users must be a positive integer, got -5"),
    ({"fit_on": "test"}, "fit_on must be 'all' or 'train', got 'test'"),
    ({"binning": "quantile"}, r"binning must be one of \('width', 'mass'\), got 'quantile'"),
    ({"rating_threshold": math.nan}, "rating_threshold must be finite, got nan"),
    ({"rating_threshold": "4"}, "rating_threshold must be a finite real number, got '4'"),
    ({"seed": -1}, f"{SEED} -1$"),
    ({"seed": 1.5}, f"{SEED} 1.5$"),
    ({"seed": 2**32}, f"{SEED} 4294967296$"),
    ({"seed": np.random.default_rng(1)}, SEED),
    ({"keep_rankings": "no"}, "keep_rankings must be True or False, got 'no'"),
    ({"exclude_unknowns": "no"}, "exclude_unknowns must be True or False, got 'no'"),
    ({"verbose": 1}, "verbose must be True or False, got 1"),
    (
        {"propensity": np.full(25, 0.5)},
        r"propensity must be a propensity model .*FixedPropensity\(values\).* got ndarray",
    ),
    ({"propensity": "powerlaw"}, "propensity must be a propensity model .* got str"),
    (
        {"reward_model": object()},
        r"reward_model must be a Cornac recommender \(with fit and score.* or None, got object",
    ),
    ({"reward_model": "MostPop"}, "reward_model must be a Cornac recommender .* got str"),
    ({"clip": 0}, "clip must be a finite number >= 1"),
]


def _case_id(kwargs: dict) -> str:
    """A test id that is the same in every pytest-xdist worker: no object addresses, no arrays."""
    ((name, value),) = kwargs.items()
    plain = isinstance(value, (int, float, str)) or value is None
    return f"{name}={value!r}" if plain else f"{name}={type(value).__name__}"


@pytest.mark.parametrize(
    ("kwargs", "match"), PSE_ARGUMENTS, ids=[_case_id(k) for k, _ in PSE_ARGUMENTS]
)
def test_stratified_evaluation_arguments_are_refused_by_name(small_triplets, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _pse(small_triplets, **kwargs)


@pytest.mark.parametrize("data", [[], "abc", b"xyz", 5])
def test_stratified_evaluation_needs_rating_triplets(data):
    with pytest.raises(
        ValueError, match=r"data must be a non-empty list of \(user, item, rating\) triplets"
    ):
        adapter.PropensityStratifiedEvaluation(data)


def test_valid_split_sizes_and_seeds_split_as_ratio_split_documents(small_triplets):
    n = len(small_triplets)
    # RatioSplit: a fraction f holds out ceil(f·n) ratings, an integer that many
    for kwargs, test, val in (
        ({"test_size": 0.3}, math.ceil(0.3 * n), 0),
        ({"test_size": 50, "val_size": 20}, 50, 20),
        ({"test_size": 0.1, "val_size": 0.25}, math.ceil(0.1 * n), math.ceil(0.25 * n)),
    ):
        method = _pse(small_triplets, **kwargs)
        assert (method.train_size, method.val_size, method.test_size) == (n - test - val, val, test)
    # a RandomState is a seed Cornac takes: the same split as its integer
    by_state = _pse(small_triplets, seed=np.random.RandomState(7))
    by_int = _pse(small_triplets, seed=7)
    for a, b in zip(by_state.test_set.uir_tuple, by_int.test_set.uir_tuple, strict=True):
        np.testing.assert_array_equal(a, b)


def test_adapter_arguments_are_refused_at_construction(split):
    with pytest.raises(ValueError, match="on must be 'all' or 'train', got 'test'"):
        adapter.CornacAdapter(on="test")
    # A misspelt option names the adapter called and the valid options, not EstimatorInputs.
    with pytest.raises(
        TypeError,
        match=r"^CornacAdapter got an unknown option 'clipp' \(did you mean 'clip'\?\); its "
        r"options are binning, clip, discount, impressions, n_strata, on, population, "
        r"propensity, reward_model$",
    ):
        adapter.CornacAdapter(clipp=3)
    with pytest.raises(TypeError, match="discount must be a Discount model, got str"):
        adapter.CornacAdapter(discount="log")
    with pytest.raises(ValueError, match="propensity must hold real numbers, got dtype <U8"):
        adapter.CornacAdapter(propensity="powerlaw")  # before any split or training
    with pytest.raises(ValueError, match=r"propensity 1.5 of item 1 lies outside \(0, 1\]"):
        adapter.CornacAdapter(propensity=[0.5, 1.5])
    for bad in ("split", None, RatioSplit):
        with pytest.raises(
            TypeError, match="eval_method must be a Cornac eval method after its split"
        ):
            adapter.CornacAdapter().fit(bad)
    with pytest.raises(
        TypeError, match="eval_method must be a Cornac eval method after its split .* got str"
    ):
        adapter.item_counts("split")


@pytest.mark.parametrize(
    ("k", "match"),
    [
        (0, "k must be a positive integer or -1 \\(whole ranking\\), got 0$"),
        (np.int64(0), "k must be a positive integer or -1 \\(whole ranking\\), got 0$"),
        (-2, "got -2$"),
        (2.5, "got 2.5$"),
        (True, "got True$"),
        ("10", "got '10'$"),
        ([5, 10], r"k must be one cutoff, got \[5, 10\]: make one metric per cutoff"),
    ],
)
def test_metric_cutoffs_are_refused_by_name(k, match):
    for cls in (adapter.IPSDCG, adapter.IPSNDCG, adapter.IPSPostNormalisedDCG):
        with pytest.raises(ValueError, match=match):
            cls(k=k, propensity=[0.5, 1.0])


def test_per_user_metric_refuses_negative_item_indices():
    metric = adapter.IPSDCG(k=5, propensity=[0.5, 1.0, 0.25], clip=None)
    with pytest.raises(ValueError, match="gt_pos has item index -1"):
        metric.compute(gt_pos=np.array([-1]), pd_rank=np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"^pd_rank has item index -3; Cornac's are >= 0$"):
        metric.compute(gt_pos=np.array([2]), pd_rank=np.array([0, -3, 1]))
    with pytest.raises(TypeError, match=r"^pd_rank must hold Cornac's item indices, got dtype <U1"):
        metric.compute(gt_pos=np.array([2]), pd_rank=np.array(["0", "2"]))
    # valid: item 2 (weight 4) at rank 2 → 4 / log2(3)
    assert metric.compute(gt_pos=np.array([2]), pd_rank=np.array([0, 2, 1])) == pytest.approx(
        4 / math.log2(3)
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"users": np.array([10**6])},
            "users has user index 1000000 at position 0, outside the eval method's users 0..39",
        ),
        ({"users": np.array([3, -1])}, "users has user index -1 at position 1, outside"),
        (
            {"users": np.array([1.5])},
            "users must be a 1-D array of Cornac user indices, got dtype float64",
        ),
        ({"users": np.array([[1]])}, r"got dtype int64 and shape \(1, 1\)"),
        ({"cutoff": 0}, "cutoff must be a positive integer or None, got 0"),
        ({"cutoff": -1}, "cutoff must be a positive integer or None, got -1"),
        ({"batch_users": 0}, "batch_users must be a positive integer, got 0"),
    ],
)
def test_rank_test_users_arguments_are_refused_by_name(split, kwargs, match):
    model = MostPop().fit(split.train_set)
    call = {"users": np.array([0, 1]), "cutoff": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        adapter.rank_test_users(split, model, call.pop("users"), call.pop("cutoff"), **call)


def test_rank_test_users_valid_batches_equal_cornacs_rank(split):
    model = BPR(k=3, seed=1, verbose=False).fit(split.train_set)
    users = np.array([5, 0, 17, 3, 39])
    for batch in (1, 2, 10):
        ranked = adapter.rank_test_users(split, model, users, 4, batch_users=batch)
        np.testing.assert_array_equal(ranked.items, _cornac_top_k(split, model, users, 4).items)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": -1}, "k must be a positive integer or None, got -1"),
        ({"k": 2.5}, "k must be a positive integer or None, got 2.5"),
        ({"k": True}, "k must be a positive integer or None, got True"),
        ({"k": "10"}, "k must be a positive integer or None, got '10'"),
        ({"column": 5}, "column must be a non-empty name or None, got 5"),
        ({"column": ""}, "column must be a non-empty name or None, got ''"),
        (
            {"column": "Recall@5"},
            "column 'Recall@5' would overwrite the experiment's own 'Recall@5' values",
        ),
        ({"column": "Train (s)"}, "column 'Train \\(s\\)' would overwrite"),
        ({"weighting": "linear"}, "weighting must be one of"),
    ],
)
def test_add_rpp_arguments_are_refused_by_name(experiment, kwargs, match):
    before = [dict(r.metric_avg_results) for r in experiment.result]
    with pytest.raises(ValueError, match=match):
        adapter.add_rpp(experiment, **kwargs)
    assert [dict(r.metric_avg_results) for r in experiment.result] == before  # nothing overwritten


def test_experiment_arguments_must_be_experiments(experiment):
    for call in (adapter.add_rpp, lambda e: adapter.tied_with_best(e, "Recall@5")):
        for bad in ("experiment", experiment.result, None):
            with pytest.raises(TypeError, match="experiment must be a cornac.Experiment, got"):
                call(bad)


def test_simpsons_paradox_needs_stratified_results(experiment):
    with pytest.raises(
        TypeError, match=r"a must be a StratifiedModelResult \(experiment.result\[i\] .* got Result"
    ):
        adapter.simpsons_paradox(experiment.result[0], experiment.result[1])
    with pytest.raises(TypeError, match="a must be a StratifiedModelResult .* got str"):
        adapter.simpsons_paradox("BPR", experiment.result[1])


def test_stratified_evaluation_refuses_a_non_model_and_no_metrics(small_triplets):
    method = _pse(small_triplets)
    with pytest.raises(TypeError, match="model must be a Cornac recommender, got str"):
        method.evaluate("MostPop", [Recall(k=5)], user_based=True)
    with pytest.raises(ValueError, match=r"metrics is empty: give ranking metrics"):
        method.evaluate(MostPop(), [], user_based=True)


# --- K8: messages that blame the right thing --------------------------------------------------


def test_experiment_that_has_not_run_is_named(split):
    pending = cornac.Experiment(split, [MostPop(), MostPop()], metrics=[Recall(k=5)], verbose=False)
    with pytest.raises(
        ValueError, match=r"the experiment has no results yet: call experiment.run\(\) first"
    ):
        adapter.tied_with_best(pending, "Recall@5")
    with pytest.raises(
        ValueError, match=r"the experiment has no results yet: call experiment.run\(\) first"
    ):
        adapter.add_rpp(pending)


def test_rating_threshold_above_every_rating_is_named_at_construction(small_triplets):
    with pytest.raises(
        ValueError, match=r"no test rating reaches rating_threshold=6.0 \(the largest is 5.0\)"
    ):
        adapter.PropensityStratifiedEvaluation(small_triplets, rating_threshold=6.0, seed=1)


def test_propensity_model_whose_fit_returns_nothing_is_named(split, small_triplets):
    class Forgetful:
        def fit(self, counts):
            self.propensity_ = np.full(counts.size, 0.5)  # but returns None

    match = r"Forgetful.fit\(counts\) returned NoneType, not a fitted propensity model"
    with pytest.raises(TypeError, match=match):
        adapter.CornacAdapter(propensity=Forgetful()).fit(split)  # was: silently unweighted
    with pytest.raises(TypeError, match=match):
        _pse(small_triplets, propensity=Forgetful())


def test_tied_with_best_keeps_models_that_share_a_name_apart(split, workdir):
    """Two models named BPR: one used to replace the other, and the core then said the sample
    had one system. Each is now its own system, tested by scipy's paired t-test."""
    models = [BPR(k=3, seed=1, verbose=False), BPR(k=3, seed=2, max_iter=1, verbose=False)]
    experiment = _run(split, models)
    ties = adapter.tied_with_best(experiment, "Recall@5")
    assert ties.names == ("BPR (1)", "BPR (2)")
    per_user = [r.metric_user_results["Recall@5"] for r in experiment.result]
    users = sorted(per_user[0])
    a, b = (np.array([values[u] for u in users]) for values in per_user)
    assert ties.best == ("BPR (1)" if a.mean() >= b.mean() else "BPR (2)")
    other = 1 - ties.names.index(ties.best)
    assert ties.p_value[other] == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert adapter.add_rpp(experiment).names == ("BPR (1)", "BPR (2)")


def test_tied_with_best_refuses_cross_validation_by_name(small_triplets, workdir):
    method = CrossValidation(
        small_triplets, n_folds=2, rating_threshold=THRESHOLD, seed=1, verbose=False
    )
    experiment = _run(method, [MostPop(), BPR(k=3, seed=1, verbose=False)])
    with pytest.raises(
        ValueError, match="tied_with_best and leaderboard need per-user results of one train/"
    ):
        adapter.tied_with_best(experiment, "Recall@5")
    with pytest.raises(ValueError, match="add_rpp needs a single train/test split"):
        adapter.add_rpp(experiment)


def test_add_rpp_works_on_a_stratified_evaluation(small_triplets, workdir):
    """Refused before as "cross-validation" (Cornac stores this single split's results like
    cross-validation's); RPP of Cornac's own rankings through the core, computed directly."""
    method = _pse(small_triplets)
    models = [BPR(k=3, seed=1, verbose=False), BPR(k=4, seed=2, verbose=False, name="BPR4")]
    experiment = _run(method, models)
    matrix = adapter.add_rpp(experiment, k=5)
    assert matrix.names == ("BPR", "BPR4")
    test = method.test_set.csr_matrix
    positives = sp.csr_matrix((test >= THRESHOLD).astype(float))[:, : method.train_set.num_items]
    users = np.flatnonzero(np.diff(positives.indptr) > 0)
    a, b = (_cornac_top_k(method, m, users, 5) for m in models)
    expected = rpp(positives[users], a, b, k=5, graded=False)
    np.testing.assert_allclose(matrix.pair("BPR", "BPR4").per_user, expected.per_user, atol=1e-12)
    wins = matrix.win_rates().means
    assert [r.metric_avg_results["RPP@5 win"] for r in experiment.result] == list(wins)


def test_metrics_before_fit_and_raw_id_propensities_of_a_metric_are_refused():
    with pytest.raises(ValueError, match=r"call adapter.fit\(eval_method\) before metrics\(\)"):
        adapter.CornacAdapter().metrics(k=5)
    for raw in ({"item-3": 0.5}, pd.Series({"item-3": 0.5})):
        with pytest.raises(
            ValueError, match="IPSDCG needs propensity= on Cornac's item indices, not raw ids"
        ):
            adapter.IPSDCG(k=5, propensity=raw)


def test_the_metric_classes_are_the_registrys():
    # Spelled here by hand, independently of the registry's camel names.
    expected = {
        "dcg": ("PlainDCG", "DCG@10"),
        "ndcg": ("PlainNDCG", "nDCG@10"),
        "pn_dcg": ("PostNormalisedDCG", "pnDCG@10"),
        "recall": ("PlainRecall", "Recall@10"),
        "ips_dcg": ("IPSDCG", "IPS-DCG@10"),
        "snips_dcg": ("SNIPSDCG", "SNIPS-DCG@10"),
        "ips_ndcg": ("IPSNDCG", "IPS-nDCG@10"),
        "ips_pn_dcg": ("IPSPostNormalisedDCG", "IPS-pnDCG@10"),
        "ips_recall": ("IPSRecall", "IPS-Recall@10"),
    }
    classes = {n for n in adapter.__all__ if isinstance(getattr(adapter, n), type)}
    metric_classes = {n for n in classes if issubclass(getattr(adapter, n), adapter.OPEMetric)}
    assert metric_classes == {camel for camel, _ in expected.values()}
    for name, (camel, shown) in expected.items():
        assert ESTIMATORS[name].cornac_class == camel
        options = {"propensity": np.full(5, 0.5)} if ESTIMATORS[name].needs else {}
        assert getattr(adapter, camel)(k=10, **options).name == shown
    assert ESTIMATORS["dr_dcg"].cornac_class is None
    assert ESTIMATORS["stratified_ndcg"].cornac_class is None


def test_a_population_is_checked_and_all_users_are_refused_by_the_per_user_loop():
    # Cornac's ranking loop scores only users with test items, so its per-user metrics cannot
    # average over all users; the refusal comes when the adapter is made, not in the loop.
    with pytest.raises(ValueError, match="population must be 'observed' or 'all', got 'any'"):
        adapter.CornacAdapter(population="any")
    with pytest.raises(ValueError, match="Cornac's ranking loop scores only the users with test"):
        adapter.CornacAdapter(propensity=[0.5, 1.0], population="all")
    assert adapter.CornacAdapter(population="observed").population == "observed"


# --- the core's results of an ordinary experiment: pnDCG and intervals in the user's split ----


def _bprs():
    return [BPR(k=3, seed=1, verbose=False), BPR(k=4, seed=2, verbose=False, name="BPR4")]


@pytest.fixture(scope="module")
def ordinary(split, workdir):
    """BPRs (no tied scores: Cornac's ranking and ours agree) on the small RatioSplit, with
    per-user DCG@5 (ours), Cornac's NDCG@5 and Recall@5."""
    metrics = [NDCG(k=5), adapter.PlainDCG(k=5), Recall(k=5)]
    experiment = cornac.Experiment(split, _bprs(), metrics=metrics, verbose=False)
    experiment.run()
    return experiment


def _core_pn_dcg(method, model, users, cutoff):
    """recpack_ope.pn_dcg computed directly on the model's ranking of the test users."""
    from recpack_ope import pn_dcg

    ranking = adapter.rank_test_users(method, model, users, cutoff)
    y_true = (adapter._positives(method, method.test_set)[users] > 0).astype(float)
    return pn_dcg(y_true, ranking, discount=LogDiscount(cutoff))


def test_pn_dcg_of_an_ordinary_experiment_is_the_cores_on_the_same_rankings(
    ordinary, split, workdir
):
    results = adapter.metric_results(ordinary, "pnDCG@5")
    assert list(results) == ["BPR", "BPR4"]
    # Cornac's NDCG alone (whole rankings) is the other source: nDCG_u times the ideal DCG.
    whole = cornac.Experiment(split, _bprs(), metrics=[NDCG()], verbose=False)
    whole.run()
    for source, metric, cutoff in ((ordinary, "pnDCG@5", 5), (whole, "pnDCG", None)):
        ours = adapter.metric_results(source, metric)
        for model in source.models:
            users = ours[model.name].user_ids
            assert users.tolist() == sorted(
                source.result[0].metric_user_results["NDCG@5" if cutoff else "NDCG@-1"]
            )
            np.testing.assert_array_equal(
                adapter.rank_test_users(split, model, users, cutoff or 5).items,
                _cornac_top_k(split, model, users, cutoff or 5).items,
            )
            core = _core_pn_dcg(split, model, users, cutoff)
            assert ours[model.name].name == metric
            assert ours[model.name].value == pytest.approx(core.value, abs=1e-12)
            assert ours[model.name].n_users == core.n_users == users.size
    # The delta-method interval by hand: z_u = D_u/Ī − D̄·I_u/Ī², Student's t with n − 1 df.
    pn = results["BPR"]
    dcg_u = np.array([ordinary.result[0].metric_user_results["DCG@5"][u] for u in pn.user_ids])
    held = adapter._positives(split, split.test_set)[pn.user_ids]
    idcg_u = np.array(
        [sum(1 / math.log2(j + 2) for j in range(min(int(n), 5))) for n in held.getnnz(axis=1)]
    )
    assert pn.value == pytest.approx(dcg_u.sum() / idcg_u.sum(), abs=1e-12)
    z = dcg_u / idcg_u.mean() - dcg_u.mean() * idcg_u / idcg_u.mean() ** 2
    half = stats.t.ppf(0.975, z.size - 1) * z.std(ddof=1) / math.sqrt(z.size)
    low, high = pn.confidence_interval()
    assert (low, high) == (
        pytest.approx(pn.value - half, abs=1e-12),
        pytest.approx(pn.value + half, abs=1e-12),
    )


@pytest.mark.parametrize("metric", ["Recall@5", "NDCG@5", "DCG@5"])
def test_every_per_user_column_gets_scipys_t_interval(ordinary, metric):
    results = adapter.metric_results(ordinary, metric)
    for result, (name, ours) in zip(ordinary.result, results.items(), strict=True):
        per_user = result.metric_user_results[metric]
        values = np.array([per_user[u] for u in sorted(per_user)])
        assert name == result.model_name and ours.name == metric
        assert ours.value == pytest.approx(result.metric_avg_results[metric], abs=1e-12)
        expected = stats.t.interval(0.95, values.size - 1, values.mean(), stats.sem(values))
        np.testing.assert_allclose(ours.confidence_interval(), expected, atol=1e-12)
        assert ours.n_excluded_users == ordinary.eval_method.total_users - values.size


def test_metric_results_refusals_name_the_argument(ordinary, experiment, small_triplets, workdir):
    with pytest.raises(TypeError, match="metric must be a column name such as 'NDCG@10', got 5"):
        adapter.metric_results(ordinary, 5)
    with pytest.raises(TypeError, match="experiment must be a cornac.Experiment, got list"):
        adapter.metric_results([], "Recall@5")
    with pytest.raises(ValueError, match=r"no per-user results for metric 'MAP' of BPR; known: \["):
        adapter.metric_results(ordinary, "MAP")
    with pytest.raises(
        ValueError,
        match=r"pnDCG@5 is built from each user's DCG, which the experiment did not keep: give "
        r"PlainDCG\(k=5\) or Cornac's NDCG\(k=5\)",
    ):
        adapter.metric_results(experiment, "pnDCG@5")  # Recall@5 only
    with pytest.raises(
        ValueError,
        match=r"the cutoff of 'pnDCG@0' must be a positive integer or -1 \(whole ranking\), got 0",
    ):
        adapter.metric_results(ordinary, "pnDCG@0")
    method = CrossValidation(small_triplets, n_folds=2, rating_threshold=THRESHOLD, seed=1)
    folds = _run(method, [MostPop(), BPR(k=3, seed=1, verbose=False)])
    with pytest.raises(ValueError, match=r"not cross-validation's fold averages"):
        adapter.metric_results(folds, "Recall@5")


def test_post_normalised_dcg_in_cornacs_own_loop_says_to_use_metric_results(split, workdir):
    # Cornac calls no metric code between Experiment() and the first model's training (it only
    # checks the metrics' types), so the refusal comes at the first user, naming the way out.
    experiment = cornac.Experiment(
        split, [BPR(k=3, seed=1, verbose=False)], metrics=[adapter.PostNormalisedDCG(k=5)]
    )
    with pytest.raises(
        ValueError,
        match=r"pnDCG@5 is not a mean of per-user values.*give PlainDCG\(k=5\) or Cornac's "
        r"NDCG\(k=5\) instead and read recpack_ope.adapters.cornac.metric_results\(experiment, "
        r"'pnDCG@5'\) after experiment.run\(\)",
    ):
        experiment.run()


def test_a_stratified_experiment_is_read_by_named_rows(small_triplets, workdir):
    method = _pse(small_triplets, keep_rankings=True)
    metrics = [Recall(k=5), adapter.PlainDCG(k=5)]
    experiment = cornac.Experiment(method, _bprs(), metrics=metrics, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        experiment.run()
    # The table's "Recall@5" is the Stratified value: a plain name could mean either row.
    for call in (adapter.metric_results, adapter.tied_with_best):
        with pytest.raises(
            ValueError,
            match=r"metric 'Recall@5' names no row of a PropensityStratifiedEvaluation.*give one "
            r"of \['Closed DCG@5', 'Closed Recall@5', 'IPS DCG@5', 'IPS Recall@5', "
            r"'Stratified DCG@5', 'Stratified Recall@5'\]",
        ):
            call(experiment, "Recall@5")
    stratified = adapter.metric_results(experiment, "Stratified Recall@5")
    closed = adapter.metric_results(experiment, "Closed Recall@5")
    for result in experiment.result:
        name = result.model_name
        assert stratified[name].name == "Stratified Recall@5"
        assert stratified[name].value == result.metric_avg_results["Recall@5"]
        assert closed[name].value == result.estimates["Recall@5"].holdout.value
        assert stratified[name].value != closed[name].value
    # Closed: Cornac's own loop per user, then scipy's paired t-test (MCB of two = paired t).
    per_user = []
    for model in experiment.models:
        (value,), (users,) = ranking_eval(
            model, [Recall(k=5)], method.train_set, method.test_set, rating_threshold=THRESHOLD
        )
        assert closed[model.name].value == pytest.approx(value, abs=1e-12)
        per_user.append(np.array([users[u] for u in sorted(users)]))
    ties = adapter.tied_with_best(experiment, "Closed Recall@5")
    assert ties.measure == "Closed Recall@5"
    other = 1 - ties.names.index(ties.best)
    assert ties.p_value[other] == pytest.approx(stats.ttest_rel(*per_user).pvalue, rel=1e-9)
    assert adapter.tied_with_best(experiment, "Stratified DCG@5").measure == "Stratified DCG@5"
    with pytest.raises(ValueError, match="names no row"):
        adapter.metric_results(experiment, "DR DCG@5")  # no reward model: no DR row
    board = adapter.leaderboard(experiment)
    assert board.metrics == ("Stratified DCG@5", "Stratified Recall@5")
    np.testing.assert_allclose(
        board["Stratified Recall@5"].value, [r.value for r in stratified.values()]
    )


def test_a_column_that_is_not_a_mean_of_per_user_values_is_refused(split, workdir):
    # Without user_based, Cornac's MAE is over every test rating and keeps no per-user values.
    model = BPR(k=3, seed=1, verbose=False)
    experiment = cornac.Experiment(
        split, [model], metrics=[MAE(), Recall(k=5)], user_based=False, verbose=False
    )
    experiment.run()
    with pytest.raises(ValueError, match=r"no per-user results for metric 'MAE' of BPR; known"):
        adapter.metric_results(experiment, "MAE")
    (result,) = experiment.result
    (recall,) = adapter.metric_results(experiment, "Recall@5").values()
    assert recall.value == pytest.approx(result.metric_avg_results["Recall@5"], abs=1e-12)
    # A table value that is not the mean of its per-user values (a metric averaged otherwise)
    # would give an interval about another number: refused.
    result.metric_avg_results["Recall@5"] = recall.value + 0.01
    with pytest.raises(
        ValueError,
        match=rf"Recall@5 of BPR is {recall.value + 0.01:.6g} in the experiment's table but its "
        rf"per-user values average {recall.value:.6g}: not a mean of per-user values",
    ):
        adapter.metric_results(experiment, "Recall@5")


def test_an_ordinary_experiments_ties_name_the_column(ordinary):
    ties = adapter.tied_with_best(ordinary, "pnDCG@5")
    assert ties.measure == "pnDCG@5" and ties.names[0] == ties.best
    values = {n: r.value for n, r in adapter.metric_results(ordinary, "pnDCG@5").items()}
    assert ties.best == max(values, key=values.get)


def test_leaderboard_of_an_experiment_holds_its_columns_and_pn_dcg(ordinary, small_triplets):
    board = adapter.leaderboard(ordinary, ["Recall@5", "pnDCG@5"], level=0.9)
    assert board.models == ("BPR", "BPR4") and board.metrics == ("Recall@5", "pnDCG@5")
    for metric in board.metrics:
        expected = adapter.metric_results(ordinary, metric)
        standing = board[metric]
        np.testing.assert_allclose(standing.value, [r.value for r in expected.values()])
        np.testing.assert_allclose(
            standing.interval, [r.confidence_interval(0.9) for r in expected.values()]
        )
    assert adapter.leaderboard(ordinary).metrics == ("DCG@5", "NDCG@5", "Recall@5")
    with pytest.raises(TypeError, match="metrics must be a list of metric names or None, got"):
        adapter.leaderboard(ordinary, "Recall@5")


def test_pn_dcg_of_a_stratified_split_is_the_cores(small_triplets, workdir):
    from cornac.eval_methods import StratifiedSplit

    method = StratifiedSplit(
        small_triplets, fmt="UIR", test_size=0.3, rating_threshold=THRESHOLD, seed=1
    )
    model = BPR(k=3, seed=1, verbose=False)
    experiment = cornac.Experiment(method, [model], metrics=[NDCG(k=5)], verbose=False)
    experiment.run()
    (ours,) = adapter.metric_results(experiment, "pnDCG@5").values()
    core = _core_pn_dcg(method, model, ours.user_ids, 5)
    assert ours.value == pytest.approx(core.value, abs=1e-12) and ours.n_users == core.n_users
