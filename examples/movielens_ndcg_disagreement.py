"""Do DCG and nDCG pick the same model? Jeunen et al. (KDD'24) Appendix A in RecPack.

    python examples/movielens_ndcg_disagreement.py [--dataset ml-100k] [--models 192]

Trains the paper's grid of KUNN and EASE models in one RecPack pipeline
(``WeakGeneralization(0.5)``, K = 100) with recpack-ope's metrics registered next to
RecPack's ``DCGK`` and ``NDCGK``, prints how often nDCG, pnDCG and power-law IPS-DCG invert
DCG's order of a pair of models, and then asks the question a model-selection study should
ask: is DCG's favourite model *significantly* better than nDCG's favourite, by a paired test
over the same test users? Writes the paper's Figure 2 to
``recpack-ope-reports/examples/ndcg-disagreement/``. Needs the ``recpack`` extra (in a clone of
recpack-ope, which is not on PyPI: ``pip install ".[recpack,plot]"``).
"""

from __future__ import annotations

import argparse

from recpack_ope.adapters.recpack import compare

from recpack_ope.studies.ndcg_disagreement import DisagreementConfig, run_disagreement, write_report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ml-100k", choices=("ml-100k", "ml-1m", "synthetic"))
    parser.add_argument("--models", type=int, default=192, help="192 = the paper's grid")
    parser.add_argument("--cutoff", type=int, default=100)
    parser.add_argument("--output", default="recpack-ope-reports/examples/ndcg-disagreement")
    args = parser.parse_args(argv)

    # RecPack's logs, progress bars and warnings stay quiet (run_disagreement(verbose=True) shows
    # them).
    result = run_disagreement(
        DisagreementConfig(dataset=args.dataset, n_models=args.models, K=args.cutoff)
    )
    write_report(result, args.output)
    print(result.table())

    # The models each metric would ship, and whether the data can tell them apart. pnDCG
    # orders models exactly as DCG does (Lemma 5.1) and keeps per-user terms for paired tests.
    v = result.values
    by_dcg, by_ndcg = v["DCG"].idxmax(), v["nDCG"].idxmax()
    metric = f"PostNormalisedDCGK_{args.cutoff}"
    print(f"\nDCG picks  {by_dcg}\nnDCG picks {by_ndcg}")
    paired = None
    if by_dcg != by_ndcg:
        paired = compare(result.pipeline, by_dcg, by_ndcg, metric)
        print(f"paired test of the two picks under DCG's ordering: {paired}")
    else:
        print("both metrics pick the same model on this split")
    p_values = {
        m: compare(result.pipeline, by_dcg, m, metric).p_value for m in v.index if m != by_dcg
    }
    tied = sorted(m for m, p in p_values.items() if p >= 0.05)
    print(
        f"{len(tied)} of {len(p_values)} other models are not significantly worse than DCG's pick "
        "(paired t-test over users, p >= 0.05, no multiplicity correction)"
    )
    print(f"Figure 2 and tables in {args.output}/")
    return {
        "result": result,
        "pick_dcg": by_dcg,
        "pick_ndcg": by_ndcg,
        "paired": paired,
        "p_values": p_values,
    }


if __name__ == "__main__":
    main()
