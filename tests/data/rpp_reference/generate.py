"""Regenerate the RPP reference fixtures: seeded trec files and the reference's values on them.

Usage: ``python generate.py /path/to/pref_eval`` with a checkout of
github.com/diazf/pref_eval (values recorded at commit 28d7bd34e5365ec884c7bbeb693da87e2276913c).

The inputs have graded labels (1–3), tied scores, relevant documents that runs omit, runs
that lack queries, a NaN score and more runs than pairs of interest. ``expected.json`` holds,
per measure, run pair and query, the reference's ``compute_preference``:

* ``"published"`` — the reference as published. Its ``RelevanceVector.vector(grade)`` returns
  the first vector it cached, so its graded RPP is binary RPP (any grade > 0 relevant);
* ``"per_grade"`` — the same code with that cache cleared before every call, i.e. the
  per-grade sum of Eq. 5 the reference intends.
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
MEASURES = ("rpp", "dcgrpp", "invrpp")


def write_inputs(rng: np.random.Generator) -> list[Path]:
    docs = [f"d{i:03d}" for i in range(60)]
    queries = [f"q{j}" for j in range(30)]
    with open(HERE / "qrels.txt", "w") as out:
        for q in queries:
            judged = rng.choice(docs, size=rng.integers(1, 15), replace=False)
            for d in judged:
                grade = rng.choice([0, 1, 1, 2, 3])
                out.write(f"{q} 0 {d} {grade}\n")
        out.write("q_unjudged 0 d000 0\n")
    paths = []
    for r in range(5):
        path = HERE / f"input.run{r}"
        with open(path, "w") as out:
            for q in queries:
                if rng.random() < 0.1:
                    continue  # the run lacks this query
                depth = rng.integers(1, 25)
                ranked = rng.choice(docs, size=depth, replace=False)
                # Scores on a coarse grid, so ties (broken by doc id) are common.
                scores = np.round(rng.random(depth) * 4) / 4
                for rank, (d, s) in enumerate(zip(ranked, scores, strict=False), 1):
                    out.write(f"{q} Q0 {d} {rank} {s} run{r}\n")
            out.write("q0 Q0 d999 1 nan run\n")
            out.write("q_not_judged Q0 d001 1 1.0 run\n")
        paths.append(path)
    return paths


def main(reference: str) -> None:
    sys.path.insert(0, reference)
    from measures.measures import compute_preference
    from util import trec_io
    from util.relevance_vector import RelevanceVector

    paths = write_inputs(np.random.default_rng(20261121))
    qrels = trec_io.read_qrels(str(HERE / "qrels.txt"), None, None)
    runs = dict(trec_io.read_run(str(p), qrels, None) for p in paths)
    names = list(runs)

    def preferences():
        out = {m: {} for m in MEASURES}
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                for m in MEASURES:
                    out[m][f"{a}:{b}"] = {
                        q: compute_preference(runs[a][q], runs[b][q], m) for q in qrels
                    }
        return out

    expected = {"published": preferences()}
    cached = RelevanceVector.vector

    def uncached(self, grade=None, subtopic=None):
        self._cached_vector = []
        return cached(self, grade, subtopic)

    RelevanceVector.vector = uncached
    expected["per_grade"] = preferences()
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
