"""A hyperparameter sweep in Cornac, picked by the target recpack-ope recommends.

    python examples/sweep_cornac.py [--users N] [--cutoff K] [--seed S]

Trains a small grid of BPR models (factors ``k`` × regularisation ``lambda_reg``) in one
``cornac.Experiment`` on MovieLens-100K (a random 80/20 ``RatioSplit``, ratings ≥ 4
relevant) and evaluates every model with the plain metric, Cornac's nDCG@K, and with the target
for choosing a model: IPS-DCG@K with power-law propensities (Jadidinejad et al. Eq. 7) clipped
at ``VERDICT_CLIP`` = 30 (Jeunen et al. Eq. 11 with the clipping of §6.2). It picks the model
with the highest target value and lists the models statistically tied with it (Hsu's multiple
comparisons with the best over Cornac's per-user results). Needs the ``cornac`` extra (in a
clone of recpack-ope, which is not on PyPI: ``pip install ".[cornac]"``).
"""

from __future__ import annotations

import argparse
import contextlib
import io

import cornac
import numpy as np
from cornac.eval_methods import RatioSplit
from cornac.metrics import NDCG
from cornac.models import BPR
from recpack_ope.adapters.cornac import CornacAdapter, tied_with_best

from recpack_ope import PowerLawPropensity, load_movielens_100k
from recpack_ope.inference.significance import TiedWithBest
from recpack_ope.propensity.weights import VERDICT_CLIP

GRID = [(k, reg) for k in (10, 50) for reg in (0.001, 0.01, 0.1)]
PROPENSITY_NOTE = (
    "propensities: power law fitted on the training interactions only, the exposure the logging\n"
    "policy gave; fitting them on the test split would weight the evaluation by its own rewards"
)


def report(plain: dict[str, float], target: TiedWithBest, plain_name: str) -> dict:
    """Print the sweep's table and verdict; return the picks and the tied set.

    ``plain`` holds each model's plain metric; ``target`` is ``tied_with_best(experiment,
    metric)`` of the target metric (models best first, with their means and p-values).
    """
    target_name, pick = target.measure, target.best
    print(f"{'model':<22} {plain_name:>8} {target_name:>11} {'tied':>5} {'p vs pick':>10}")
    for model, value, p in zip(target.names, target.mean, target.p_value, strict=True):
        mark, shown = ("=" if model in target.tied else ""), ("" if model == pick else f"{p:.2g}")
        print(f"{model:<22} {plain[model]:>8.4f} {value:>11.4f} {mark:>5} {shown:>10}")
    pick_plain = max(plain, key=plain.get)
    print(f"\npick by {target_name}: {pick}; by {plain_name}: {pick_plain}")
    if pick_plain != pick:
        p = target.p_value[target.names.index(pick_plain)]
        print(
            f"  they disagree: {plain_name} would ship {pick_plain}, which {target_name} finds "
            f"{'worse' if pick_plain not in target.tied else 'tied with the pick'} (p = {p:.2g})"
        )
    print(f"tied with the pick ({target.label}): {', '.join(target.tied)}")
    print(
        "Γ* (how far the propensities may be off before a verdict flips; trust a verdict at "
        "Γ* >= 2)\nneeds each model's weighted result, which Cornac's per-user loop does not keep"
    )
    return {"pick": pick, "pick_plain": pick_plain, "tied": list(target.tied)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="keep only the first N users")
    parser.add_argument("--cutoff", type=int, default=10)
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args(argv)

    data = load_movielens_100k()
    keep = np.ones(data.users.size, bool)
    if args.users:
        keep = data.user_ids[data.users] <= args.users
    users = data.user_ids[data.users][keep].astype(str)
    items = data.item_ids[data.items][keep].astype(str)
    triplets = list(zip(users.tolist(), items.tolist(), data.ratings[keep].tolist(), strict=True))
    split = RatioSplit(triplets, test_size=0.2, rating_threshold=4.0, seed=args.seed)

    # on="train": the training interactions are what the logging policy exposed; the test split
    # holds the rewards being estimated, so the propensities never see it.
    propensity = PowerLawPropensity()
    adapter = CornacAdapter(propensity=propensity, clip=VERDICT_CLIP, on="train").fit(split)
    ips_dcg = adapter.metrics(k=args.cutoff)[0]
    models = [
        BPR(
            k=k,
            lambda_reg=reg,
            max_iter=200,
            learning_rate=0.01,
            seed=args.seed,
            name=f"BPR({k},{reg:g})",
        )
        for k, reg in GRID
    ]
    experiment = cornac.Experiment(
        split, models, metrics=[NDCG(k=args.cutoff), ips_dcg], verbose=False
    )
    with contextlib.redirect_stdout(io.StringIO()):  # Cornac prints its table; report() below
        experiment.run()

    print(f"{len(models)} models; power-law γ = {propensity.gamma_:.3f}, weights clipped at m = 30")
    print(f"{PROPENSITY_NOTE}\n")
    plain_name = f"NDCG@{args.cutoff}"
    plain = {r.model_name: r.metric_avg_results[plain_name] for r in experiment.result}
    target = tied_with_best(experiment, ips_dcg.name)
    out = report(plain, target, plain_name)
    found = {"target": target, "plain": plain, "experiment": experiment, "split": split}
    return out | found | {"propensity": propensity}


if __name__ == "__main__":
    main()
