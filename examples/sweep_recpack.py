"""A hyperparameter sweep in RecPack, picked by the target recpack-ope recommends.

    python examples/sweep_recpack.py [--users N] [--cutoff K] [--seed S]

Trains a small grid, EASE ``l2`` and ItemKNN ``K``, in one RecPack pipeline on MovieLens-100K
(RecPack's preprocessing, ``WeakGeneralization(0.8)``) and evaluates every model with the plain
metric, RecPack's nDCG@K, and with the target for choosing a model: IPS-DCG@K with power-law
propensities (Jadidinejad et al. Eq. 7) clipped at ``VERDICT_CLIP`` = 30 (Jeunen et al. Eq. 11
with the clipping of §6.2). It picks the model with the highest target value, lists the models
statistically tied with it (Hsu's multiple comparisons with the best) and says whether the
verdict "the pick beats its runner-up" can be trusted: significant and robust to propensities
off by a factor Γ* of at least 2 (docs/reliability.md, docs/sensitivity.md). Needs the
``recpack`` extra (in a clone of recpack-ope, which is not on PyPI: ``pip install ".[recpack]"``).
"""

from __future__ import annotations

import argparse

import pandas as pd
from recpack.scenarios import WeakGeneralization
from recpack_ope.adapters.recpack import RecPackAdapter, metric_results, summary

from recpack_ope import PowerLawPropensity
from recpack_ope.inference.sensitivity import SHOWN_GAMMA
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.propensity.weights import VERDICT_CLIP
from recpack_ope.studies import quiet_frameworks

GRID = [("EASE", {"l2": l2}) for l2 in (10.0, 50.0, 200.0, 500.0, 1000.0)] + [
    ("ItemKNN", {"K": k}) for k in (20, 50, 100, 200)
]
SWEPT = {"EASE": "l2", "ItemKNN": "K"}
PROPENSITY_NOTE = (
    "propensities: power law fitted on the training interactions only, the exposure the logging\n"
    "policy gave; fitting them on the test split would weight the evaluation by its own rewards"
)


def label(identifier: str) -> str:
    """RecPack's identifier of a model, e.g. ``EASE(alpha=0,density=None,l2=50.0)``, with only
    the swept parameter: ``EASE(l2=50.0)``."""
    family, _, inner = identifier.partition("(")
    params = dict(p.split("=", 1) for p in inner.rstrip(")").split(","))
    return f"{family}({SWEPT[family]}={params[SWEPT[family]]})"


def report(plain: pd.Series, target: pd.DataFrame, plain_name: str, target_name: str) -> dict:
    """Print the sweep's table and verdict; return the picks, the tied set and the verdict.

    ``plain`` holds each model's plain metric; ``target`` is ``summary(pipeline, metric)``:
    best first, with ``value``, ``tied_with_best``, ``p_vs_best`` and Γ* of best − model
    (``robust_gamma``).
    """
    pick, runner_up = target.index[0], target.index[1]
    tied = [m for m in target.index if target.loc[m, "tied_with_best"]]
    gamma = float(target.loc[runner_up, "robust_gamma"])
    significant = runner_up not in tied
    print(
        f"{'model':<16} {plain_name:>8} {target_name:>11} {'tied':>5} {'p vs pick':>10} {'Γ*':>5}"
    )
    for model, row in target.iterrows():
        mark = "=" if row["tied_with_best"] else ""
        p, g = (
            ("", "") if model == pick else (f"{row['p_vs_best']:.2g}", f"{row['robust_gamma']:.3g}")
        )
        print(f"{model:<16} {plain[model]:>8.4f} {row['value']:>11.4f} {mark:>5} {p:>10} {g:>5}")
    pick_plain = plain.idxmax()
    print(f"\npick by {target_name}: {pick}; by {plain_name}: {pick_plain}")
    if pick_plain != pick:
        against = target.loc[pick_plain]
        print(
            f"  they disagree: {plain_name} would ship {pick_plain}, which {target_name} finds "
            f"worse (p = {against['p_vs_best']:.2g}, Γ* = {against['robust_gamma']:.3g})"
        )
    print(f"tied with the pick (Hsu's MCB, α=0.05): {', '.join(tied)}")
    trusted = significant and gamma >= SHOWN_GAMMA
    print(
        f"'{pick} beats {runner_up}': {'significant' if significant else 'not significant'}, "
        f"Γ* = {gamma:.3g} -> {'trusted' if trusted else 'not trusted'} "
        f"(needs significance and Γ* >= {SHOWN_GAMMA:g})"
    )
    return {"pick": pick, "pick_plain": pick_plain, "tied": tied, "runner_up": runner_up}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="keep only the first N users")
    parser.add_argument("--cutoff", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    # Imported after the adapter, which keeps hyperopt's deprecation warning quiet.
    from recpack.pipelines import PipelineBuilder

    with quiet_frameworks():  # RecPack's logs and progress bars
        data = load_interactions("ml-100k")
        if args.users:
            data = data.users_in(list(range(args.users)))
        scenario = WeakGeneralization(0.8, validation=False, seed=args.seed)
        scenario.split(data)
        # The training interactions are what the logging policy exposed; the test split holds
        # the rewards being estimated, so the propensities never see it.
        propensity = PowerLawPropensity()
        RecPackAdapter(propensity=propensity, clip=VERDICT_CLIP).fit(
            scenario.full_training_data
        ).register()
        builder = PipelineBuilder()
        for name, params in GRID:
            builder.add_algorithm(name, params=params)
        builder.add_metric("NDCGK", K=args.cutoff)
        builder.add_metric("IPSDCGK", K=args.cutoff)
        builder.set_data_from_scenario(scenario)
        pipeline = builder.build()
        pipeline.run()

    metric, plain_metric = f"IPSDCGK_{args.cutoff}", f"NDCGK_{args.cutoff}"
    print(f"{len(GRID)} models; power-law γ = {propensity.gamma_:.3f}, weights clipped at m = 30")
    print(f"{PROPENSITY_NOTE}\n")
    plain = pipeline.get_metrics()[plain_metric].rename(index=label)
    target = summary(pipeline, metric).rename(index=label)
    names = (f"nDCG@{args.cutoff}", f"IPS-DCG@{args.cutoff}")
    out = report(plain, target, *names)
    results = {label(m): r for m, r in metric_results(pipeline, metric).items()}
    return out | {
        "target": target,
        "plain": plain,
        "results": results,
        "propensity": propensity,
        "train": scenario.full_training_data.binary_values,
        "test": scenario.test_data_out.binary_values,
    }


if __name__ == "__main__":
    main()
