"""Every quick Cornac model through our batched scorer, the stratified evaluation and add_rpp.

The batched ranking must equal a per-user ``model.score`` loop over Cornac's candidates (the
independent route), whatever the model's vectors look like: dense user·item factors (BPR, MF,
…), sparse user vectors with an item-item matrix (EASE), or no vectors at all (kNN, MostPop).
Runs in both nox environments (Cornac 2.2.2 and the newest).
"""

from __future__ import annotations

import warnings

import cornac
import numpy as np
import pytest
from cornac.eval_methods import RatioSplit
from cornac.metrics import Recall
from cornac.models import BPR, EASE, MF, NMF, PMF, SVD, ItemKNN, MostPop, UserKNN
from recpack_ope.adapters import cornac as adapter

from recpack_ope import ReliabilityWarning
from recpack_ope.metrics.ranking import TopK

MODELS = {
    "MostPop": lambda: MostPop(),
    "BPR": lambda: BPR(k=8, max_iter=20, seed=1, verbose=False),
    "PMF": lambda: PMF(k=8, max_iter=20, seed=1, verbose=False),
    "MF": lambda: MF(k=8, max_iter=10, seed=1, verbose=False),
    "NMF": lambda: NMF(k=8, max_iter=20, seed=1, verbose=False),
    "SVD": lambda: SVD(k=8, max_iter=10, seed=1, verbose=False),
    "EASE": lambda: EASE(verbose=False),
    "ItemKNN": lambda: ItemKNN(k=20, verbose=False),
    "UserKNN": lambda: UserKNN(k=20, verbose=False),
}


@pytest.fixture(scope="module")
def triplets(movielens):
    keep = movielens.users < 300  # a few seconds per model
    users = movielens.user_ids[movielens.users[keep]].astype(str)
    items = movielens.item_ids[movielens.items[keep]].astype(str)
    return list(zip(users.tolist(), items.tolist(), movielens.ratings[keep].tolist(), strict=True))


@pytest.fixture(scope="module")
def pse(triplets):
    return adapter.PropensityStratifiedEvaluation(
        triplets, test_size=0.2, rating_threshold=4.0, seed=3
    )


def _per_user_top(method, model, users, k):
    """Top-k by ``model.score`` one user at a time, Cornac's candidates, ties to the lower item."""
    n = method.n_items_
    seen = adapter._positives(method, method.train_set)
    held = adapter._positives(method, method.test_set)
    one_user = adapter._scorer(model, n).one_user
    scores = np.vstack([one_user(int(u)) for u in users])
    mask = (seen[users].toarray() > 0) & ~(held[users].toarray() > 0)
    scores[mask] = -np.inf
    return TopK.from_scores(scores, k).items


@pytest.mark.parametrize("name", sorted(MODELS))
def test_batched_ranking_equals_a_per_user_score_loop(pse, name):
    model = MODELS[name]()
    model.fit(pse.train_set)
    held = adapter._positives(pse, pse.test_set)
    users = np.flatnonzero(np.diff(held.indptr) > 0)
    ranking = adapter.rank_test_users(pse, model, users, 10, batch_users=64)
    np.testing.assert_array_equal(ranking.items, _per_user_top(pse, model, users, 10))


@pytest.mark.parametrize("name", ["EASE", "BPR", "ItemKNN"])
def test_stratified_evaluation_and_add_rpp_run_every_model(
    pse, triplets, name, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # Cornac writes experiment logs to the working directory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReliabilityWarning)
        result, _ = pse.evaluate(
            MODELS[name](), [Recall(k=10), adapter.PlainDCG(k=10)], user_based=True
        )
    assert 0 <= result.rows().loc["Closed", "Recall@10"] <= 1
    split = RatioSplit(triplets, test_size=0.2, rating_threshold=4.0, seed=3, verbose=False)
    experiment = cornac.Experiment(
        split, [MODELS[name](), MostPop()], metrics=[Recall(k=10)], verbose=False
    )
    experiment.run()
    matrix = adapter.add_rpp(experiment, k=10)
    assert matrix.names[0] == MODELS[name]().name
