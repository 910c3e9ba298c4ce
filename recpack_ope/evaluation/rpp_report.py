"""Runs in trec_eval format compared by recall-paired preference (Diaz & Ferraro, SIGIR'22).

:func:`rpp_report` reads a qrels file and two or more run files
(:func:`recpack_ope.io.trec.read_trec`) and, for RPP, dcgRPP and invRPP, builds the pairwise
preference matrix (:func:`recpack_ope.metrics.rpp.preference_matrix`), each run's win rate
with its MC4, Borda and mean orderings over queries, and pairwise significance (t-tests with
Bonferroni correction or randomised Tukey HSD). Its :class:`RPPReport` prints as the tables
``recpack-ope rpp`` shows and writes the JSON report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..inference.significance import PairwiseTests, paired_t_tests, randomised_tukey_hsd
from ..inference.systems import PreferenceMatrix, SystemScores
from ..io.trec import read_trec
from ..metrics.rpp import WEIGHTINGS, RecallLevels, preference_matrix

__all__ = ["MEASURES", "TESTS", "RPPMeasure", "RPPReport", "rpp_report"]

#: The reference's measure names (rpp, dcgrpp, invrpp) → p(i) of :mod:`recpack_ope.metrics.rpp`.
MEASURES = {name.lower(): weighting for weighting, name in WEIGHTINGS.items()}

#: Pairwise tests by name, and how the report names them.
TESTS = {"bonferroni": "t-test, Bonferroni", "tukey": "randomised Tukey HSD"}


def _by_name(systems: list[str], rows) -> dict[str, dict[str, float]]:
    """A matrix of systems as {row name: {column name: value}}."""
    return {
        a: dict(zip(systems, map(float, row), strict=True))
        for a, row in zip(systems, rows, strict=True)
    }


@dataclass(frozen=True, eq=False)
class RPPMeasure:
    """One measure of an :class:`RPPReport`.

    Attributes
    ----------
    weighting : str
        p(i) over recall levels: ``"uniform"`` (RPP), ``"dcg"`` (dcgRPP), ``"inverse"``
        (invRPP).
    matrix : PreferenceMatrix
        Per-query preferences between every pair of runs.
    wins : SystemScores
        Per-query win rates of the runs.
    tests : PairwiseTests
        Pairwise significance of the preferences.
    """

    weighting: str
    matrix: PreferenceMatrix
    wins: SystemScores
    tests: PairwiseTests

    def to_dict(self, alpha: float) -> dict:
        """Preferences, p-values, win rates, orderings and the share of pairs separated at
        ``alpha``, JSON-able."""
        systems = list(self.matrix.names)
        return {
            "preferences": _by_name(systems, self.matrix.mean),
            "p_values": _by_name(systems, self.tests.p_value),
            "win_rate": dict(zip(systems, map(float, self.wins.means), strict=True)),
            "ordering": {m: self.wins.ordering(m) for m in ("mc4", "borda", "mean")},
            "separated_pairs": self.tests.power(alpha),
        }


@dataclass(frozen=True, eq=False)
class RPPReport:
    """Runs compared by RPP measures (:func:`rpp_report`).

    Attributes
    ----------
    qrels : str
        The qrels file.
    runs : tuple of str
        The run names (file names without ``input.``), in the order given.
    n_queries : int
        Queries of the qrels.
    graded : bool
        Graded RPP (Eq. 5) or binary (Eq. 4).
    depth : int or None
        Documents kept per query and run.
    test : {"bonferroni", "tukey"}
        The pairwise test.
    alpha : float
        Significance level of :attr:`RPPMeasure.tests` summaries.
    measures : dict
        Measure name (``"RPP"``, ``"dcgRPP"``, ``"invRPP"``) → :class:`RPPMeasure`.
    """

    qrels: str
    runs: tuple[str, ...]
    n_queries: int
    graded: bool
    depth: int | None
    test: str
    alpha: float
    measures: Mapping[str, RPPMeasure]

    def to_dict(self) -> dict:
        """The settings and every measure's results, as the JSON report holds them."""
        return {
            "qrels": self.qrels,
            "runs": list(self.runs),
            "queries": self.n_queries,
            "graded": self.graded,
            "depth": self.depth,
            "test": self.test,
            "measures": {name: m.to_dict(self.alpha) for name, m in self.measures.items()},
        }

    def text(self) -> str:
        """Per measure: the win rates in MC4 order, the preference matrix (up to 12 runs) and
        the share of pairs that differ at :attr:`alpha`."""
        relevance = "graded" if self.graded else "binary"
        parts = []
        for name, m in self.measures.items():
            parts.append(
                f"\n## {name} over {m.matrix.per_user.shape[0]} queries ({relevance} "
                f"relevance), MC4 order\n\n{m.wins.table('mc4')}"
            )
            if len(m.matrix.names) <= 12:
                parts.append(
                    f"\n{name} preference matrix ({m.weighting} weights over recall levels): "
                    f"mean {name}(row, column) over the queries, > 0 where the row is "
                    f"preferred\n\n{m.matrix.table()}"
                )
            parts.append(
                f"\n{m.tests.power(self.alpha):.1%} of {m.tests.n_pairs} pairs differ at "
                f"p < {self.alpha} ({TESTS[self.test]})"
            )
        return "\n".join(parts)

    def write(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_dict` as JSON to ``path`` (creating its folder); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as handle:
            json.dump(self.to_dict(), handle, indent=1)
        return path


def rpp_report(
    qrels: str | os.PathLike,
    runs: Sequence[str | os.PathLike],
    *,
    measures: Sequence[str] | None = None,
    graded: bool = True,
    relevance_threshold: float | None = None,
    depth: int | None = None,
    test: str = "bonferroni",
    n_resamples: int = 1000,
    seed: int | None = 0,
    alpha: float = 0.05,
) -> RPPReport:
    """Compare trec_eval-format runs by RPP, dcgRPP and invRPP.

    Parameters
    ----------
    qrels : path
        Relevance judgements, lines ``query subtopic doc grade``.
    runs : sequence of paths
        At least two run files, lines ``query iter doc rank score [run]``, ranked by score
        (ties by doc id, descending); ``.gz`` allowed.
    measures : sequence of str, optional
        Names of :data:`MEASURES` (``"rpp"``, ``"dcgrpp"``, ``"invrpp"``); default all three.
    graded : bool
        Graded RPP (Eq. 5) or binary (Eq. 4: any grade > 0 relevant).
    relevance_threshold : float, optional
        Grades ≥ it are relevant, below not (the reference's ``-b``); default the grades as
        judged.
    depth : int, optional
        Keep each run's top ``depth`` documents; default all.
    test : {"bonferroni", "tukey"}
        Pairwise test: t-tests with Bonferroni correction or randomised Tukey HSD.
    n_resamples : int
        Relabellings of the Tukey HSD.
    seed : int, optional
        Seed of the Tukey HSD.
    alpha : float
        Significance level of the share of separated pairs.

    Returns
    -------
    RPPReport
        Every measure's preference matrix, win rates, orderings and tests.

    Raises
    ------
    ValueError
        For fewer than two runs, an unknown measure or test, and files that are not in trec
        format (naming the file and line).
    FileNotFoundError
        For a file that does not exist.
    ImportError
        Without pandas, which reads the files.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from recpack_ope.evaluation import rpp_report
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "qrels").write_text("q1 0 a 1\\nq1 0 b 1\\nq2 0 c 1\\n")
    >>> _ = (folder / "input.x").write_text("q1 Q0 a 1 3 x\\nq1 Q0 b 2 2 x\\nq2 Q0 c 1 1 x\\n")
    >>> _ = (folder / "input.y").write_text("q1 Q0 d 1 3 y\\nq1 Q0 a 2 2 y\\nq2 Q0 e 1 1 y\\n")
    >>> report = rpp_report(folder / "qrels", [folder / "input.x", folder / "input.y"])
    >>> report.runs, report.measures["RPP"].wins.ordering("mc4")
    (('x', 'y'), ['x', 'y'])
    >>> report.to_dict()["measures"]["RPP"]["preferences"]["x"]["y"]
    1.0
    """
    if isinstance(runs, (str, os.PathLike)) or len(runs) < 2:
        got = 1 if isinstance(runs, (str, os.PathLike)) else len(runs)
        raise ValueError(f"at least two run files are needed to compare, got {got}")
    measures = list(MEASURES) if measures is None else list(measures)
    unknown = [m for m in measures if m not in MEASURES]
    if unknown or not measures:
        raise ValueError(f"measures must name some of {list(MEASURES)}, got {measures!r}")
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}, got {test!r}")
    collection = read_trec(
        str(qrels), [str(r) for r in runs], relevance_threshold=relevance_threshold, depth=depth
    )
    results = {}
    for measure in measures:
        weighting = MEASURES[measure]
        levels = RecallLevels.from_y_true(collection.qrels, weighting=weighting, graded=graded)
        matrix = preference_matrix(levels, collection.runs)
        if test == "bonferroni":
            tests = paired_t_tests(matrix)
        else:
            tests = randomised_tukey_hsd(matrix, n_resamples, seed)
        results[matrix.name] = RPPMeasure(weighting, matrix, matrix.win_rates(), tests)
    return RPPReport(
        qrels=str(qrels),
        runs=tuple(collection.runs),
        n_queries=int(collection.qrels.shape[0]),
        graded=graded,
        depth=depth,
        test=test,
        alpha=alpha,
        measures=results,
    )
