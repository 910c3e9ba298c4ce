"""Time our registered metrics add to a 20-model RecPack pipeline, against NDCGK and DCGK.

    python bench/bench_recpack_pipeline.py [--dataset ml-100k|synthetic] [--K 100] [--case ease]

Needs RecPack (legacy environment). One pipeline of 20 models (9 KUNN, 11 EASE: the scaled
grid of the nDCG-disagreement reproduction) computes RecPack's ``NDCGK`` and ``DCGK`` and our
``IPSDCGK``, ``SNIPSDCGK``, ``IPSNDCGK`` and ``IPSPostNormalisedDCGK`` (power-law
propensities) on the same predictions. Every metric class's ``calculate`` is wrapped with a
timer, so the printed times are each metric's total over the 20 models in this run and the
ratios are ours / RecPack's, measured in the same process.

``--case ease`` times one model instead: EASE's predictions for every test user (a score for
nearly every item, stored as CSR with each row's items unsorted, as RecPack's ``X @ B`` leaves
them). Each run gets a new copy of the predictions and of the held-out matrix, so nothing is
reused from an earlier run, and the three timings alternate: one ``NDCGK``, our first metric
(``PlainNDCGK``) alone, and three of ours (``PlainNDCGK``, ``IPSDCGK``,
``PostNormalisedDCGK``); the best of ``--repeats`` runs of each is printed with its ratio to
``NDCGK``, in wall time and in the thread's CPU time.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections import defaultdict

import numpy as np
from recpack.algorithms import EASE
from recpack.metrics import DCGK, NDCGK
from recpack.pipelines import METRIC_REGISTRY, PipelineBuilder
from recpack.scenarios import WeakGeneralization
from recpack_ope.adapters.recpack import RecPackAdapter

from recpack_ope import PowerLawPropensity
from recpack_ope.io.recpack_datasets import load_interactions
from recpack_ope.studies.ndcg_disagreement import model_grid

OURS = ("IPSDCGK", "SNIPSDCGK", "IPSNDCGK", "IPSPostNormalisedDCGK")
THREE = ("PlainNDCGK", "IPSDCGK", "PostNormalisedDCGK")


def timed(cls, totals):
    """A subclass of ``cls`` under the same name whose ``calculate`` adds its time to totals."""

    def calculate(self, y_true, y_pred):
        start = time.perf_counter()
        cls.calculate(self, y_true, y_pred)
        totals[cls.__name__] += time.perf_counter() - start

    return type(cls.__name__, (cls,), {"calculate": calculate})


def ease_case(scenario, registered: dict, args: argparse.Namespace) -> None:
    """Our first metric, and three of ours, on one EASE model's predictions against NDCGK."""
    algorithm = EASE(l2=500.0)
    algorithm.fit(scenario.full_training_data)
    X_pred = algorithm.predict(scenario.test_data_in)
    y_true = scenario.test_data_out.binary_values
    ours = [registered[f"Bench{n}"] for n in THREE]
    runs = {"NDCGK": [NDCGK], f"first ({THREE[0]})": ours[:1], "three of ours": ours}

    def run(classes: list) -> tuple[np.ndarray, list]:
        """Wall and CPU seconds of the metrics' ``calculate`` calls, and the metrics."""
        # New objects, as RecPack gives each model: the adapter's cache cannot serve them.
        predictions, truths = X_pred.copy(), [y_true.copy() for _ in classes]
        metrics = [cls(K=args.K) for cls in classes]
        start = np.array([time.perf_counter(), time.thread_time()])
        for metric, truth in zip(metrics, truths, strict=True):
            metric.calculate(truth, predictions)
        return np.array([time.perf_counter(), time.thread_time()]) - start, metrics

    times: dict[str, list[np.ndarray]] = {name: [] for name in runs}
    for _ in range(args.repeats + 1):  # the first round warms up and is not counted
        for name, classes in runs.items():
            times[name].append(run(classes)[0])
    best = {name: np.min(seconds[1:], axis=0) for name, seconds in times.items()}
    gap = abs(run(ours[:1])[1][0].value - run([NDCGK])[1][0].value)

    rows = np.diff(X_pred.indptr)
    print(
        f"\nEASE(l2=500) on {args.dataset}: {X_pred.shape[0]} users × {X_pred.shape[1]} items, "
        f"{X_pred.nnz:,} stored scores ({rows.min()}–{rows.max()} per row, items sorted: "
        f"{X_pred.has_sorted_indices}); K = {args.K}, numpy {np.__version__}, best of "
        f"{args.repeats}, interleaved"
    )
    # CPU time, the thread's own, varies less than wall time when other jobs share the cores.
    print(f"{'metrics':<26} {'wall ms':>8} {'vs NDCGK':>9} {'CPU ms':>8} {'vs NDCGK':>9}")
    for name, (wall, cpu) in best.items():
        ratios = (wall / best["NDCGK"][0], cpu / best["NDCGK"][1])
        print(
            f"{name:<26} {wall * 1e3:>8.1f} {ratios[0]:>8.2f}x {cpu * 1e3:>8.1f} {ratios[1]:>8.2f}x"
        )
    print(f"|{THREE[0]} − NDCGK| = {gap:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ml-100k", choices=("ml-100k", "ml-1m", "synthetic"))
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--case", default="pipeline", choices=("pipeline", "ease"))
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (--case ease)")
    args = parser.parse_args()
    logging.getLogger("recpack").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*missing similar items")

    data = load_interactions(args.dataset)
    scenario = WeakGeneralization(0.5, validation=False, seed=0)
    scenario.split(data)
    adapter = RecPackAdapter(propensity=PowerLawPropensity(), clip=100)
    registered = adapter.fit(scenario.full_training_data).register(prefix="Bench")
    if args.case == "ease":
        ease_case(scenario, registered, args)
        return

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
