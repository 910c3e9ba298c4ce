"""Time our registered metrics add to a 20-model RecPack pipeline, against NDCGK and DCGK.

    python bench/bench_recpack_pipeline.py [--dataset ml-100k|synthetic] [--K 100]

Needs RecPack (legacy environment). One pipeline of 20 models (9 KUNN, 11 EASE: the scaled
grid of the nDCG-disagreement reproduction) computes RecPack's ``NDCGK`` and ``DCGK`` and our
``IPSDCGK``, ``SNIPSDCGK``, ``IPSNDCGK`` and ``IPSPostNormalisedDCGK`` (power-law
propensities) on the same predictions. Every metric class's ``calculate`` is wrapped with a
timer, so the printed times are each metric's total over the 20 models in this run and the
ratios are ours / RecPack's, measured in the same process.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections import defaultdict

from recpack.metrics import DCGK, NDCGK
from recpack.pipelines import METRIC_REGISTRY, PipelineBuilder
from recpack.scenarios import WeakGeneralization
from recpack_ope.adapters.recpack import RecPackAdapter

from recpack_ope import PowerLawPropensity
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.studies.ndcg_disagreement import model_grid

OURS = ("IPSDCGK", "SNIPSDCGK", "IPSNDCGK", "IPSPostNormalisedDCGK")


def timed(cls, totals):
    """A subclass of ``cls`` under the same name whose ``calculate`` adds its time to totals."""

    def calculate(self, y_true, y_pred):
        start = time.perf_counter()
        cls.calculate(self, y_true, y_pred)
        totals[cls.__name__] += time.perf_counter() - start

    return type(cls.__name__, (cls,), {"calculate": calculate})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ml-100k", choices=("ml-100k", "ml-1m", "synthetic"))
    parser.add_argument("--K", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("recpack").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*missing similar items")

    data = load_interactions(args.dataset)
    scenario = WeakGeneralization(0.5, validation=False, seed=0)
    scenario.split(data)
    adapter = RecPackAdapter(propensity=PowerLawPropensity(), clip=100)
    registered = adapter.fit(scenario.full_training_data).register(prefix="Bench")

    totals: dict[str, float] = defaultdict(float)
    names = {"NDCGK": NDCGK, "DCGK": DCGK} | {f"Bench{n}": registered[f"Bench{n}"] for n in OURS}
    for name, cls in names.items():
        METRIC_REGISTRY.registered[f"Timed{name}"] = timed(cls, totals)

    builder = PipelineBuilder()
    for algorithm, params in model_grid(20):
        builder.add_algorithm(algorithm, params=params)
    for name in names:
        builder.add_metric(f"Timed{name}", K=args.K)
    builder.set_data_from_scenario(scenario)
    pipeline = builder.build()
    start = time.perf_counter()
    pipeline.run()
    wall = time.perf_counter() - start

    print(
        f"\n{args.dataset}: {data.shape[0]} users × {data.shape[1]} items, 20 models, K = "
        f"{args.K}; "
        f"pipeline wall time {wall:.1f} s"
    )
    print(f"{'metric':<24} {'total s':>8} {'vs NDCGK':>9} {'vs DCGK':>8}")
    for name in names:
        t = totals[name]
        print(f"{name:<24} {t:>8.2f} {t / totals['NDCGK']:>8.2f}x {t / totals['DCGK']:>7.2f}x")
    ours = sum(totals[f"Bench{n}"] for n in OURS)
    print(
        f"all four of ours together: {ours:.2f} s = {ours / totals['NDCGK']:.2f}x NDCGK, "
        f"{ours / wall:.1%} of the pipeline"
    )


if __name__ == "__main__":
    main()
