"""Recall-paired preference win rates on Spark (Diaz & Ferraro, SIGIR'22, Eq. 7).

Every user's win rates of the M systems come from the core's
:func:`~recpack_ope.metrics.rpp.win_rates` inside the partitions; their moments give each
system's mean win rate with an interval, and paired comparisons between systems.
"""

from __future__ import annotations

from dataclasses import dataclass

import scipy.sparse as sp

from ..evaluation.chunks import ChunkPlan, Partial, core_refusal
from ..inference.moments import Moments, SummaryEstimate
from ..metrics.rpp import WEIGHTINGS
from ..metrics.rpp import win_rates as _core_win_rates
from . import _partitions
from ._frames import held_out_frame, held_out_inputs

__all__ = ["win_rates"]


@dataclass(frozen=True)
class _RppPlan(ChunkPlan):
    weighting: str = "uniform"
    graded: bool = True

    def chunk(self, chunk: dict) -> Partial:
        coded = self.matrices(chunk)
        y_true, scores = coded.y_true, coded.scores
        m = len(self.models)
        if y_true.nnz == 0 or not (y_true.data > 0).any():
            return Partial(Moments.empty(m), int(y_true.shape[0]), {})
        result = _core_win_rates(
            y_true,
            dict(zip(self.models, scores, strict=True)),
            weighting=self.weighting,
            graded=self.graded,
            k=self.k,
        )
        return Partial(
            Moments.from_terms(result.per_user), result.n_excluded_users, {"rpp": result.name}
        )


def win_rates(
    held_out,
    recommendations,
    *,
    weighting: str = "uniform",
    graded: bool = True,
    k: int | None = None,
    n_partitions: int | None = None,
) -> dict:
    """Every system's RPP win rate against the others, ``Σ_{t≠s} RPP(s, t) / (M − 1)``.

    Parameters
    ----------
    held_out : pyspark.sql.DataFrame
        Columns ``user``, ``item``, ``reward`` (relevance grades ``>= 0``).
    recommendations : mapping of name → pyspark.sql.DataFrame
        At least two systems; columns ``user``, ``item`` and ``score`` or ``rank``.
    weighting : {"uniform", "dcg", "inverse"}
        p(i) of the recall levels (RPP, dcgRPP, invRPP).
    graded : bool
        Graded RPP (Eq. 5) or binary.
    k : int, optional
        Depth each ranking is cut at; relevant items it omits go to the bottom (§3).
    n_partitions : int, optional
        Partitions users are spread over.

    Returns
    -------
    dict of str → SummaryEstimate
        Mean win rate of every system over the users with relevant items, in [−1, 1];
        ``result[a].compare(result[b])`` tests two systems' win rates paired over users.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {list(WEIGHTINGS)}, got {weighting!r}")
    if not isinstance(graded, bool):
        raise ValueError(f"graded must be True or False, got {graded!r}")
    if not hasattr(recommendations, "items") or len(recommendations) < 2:
        raise ValueError("recommendations must map at least two system names to their frames")
    _partitions.check_partitions(n_partitions)
    models, tables, _ = held_out_inputs(held_out, recommendations, None)
    frame = held_out_frame(tables, None)
    plan = _RppPlan(
        models=models,
        metrics=(),
        discount=None,
        k=k,
        clip=None,
        weighted=False,
        ess_threshold=1.0,
        weighting=weighting,
        graded=graded,
    )
    partial = _partitions.run(frame, plan, n_partitions)
    if partial is None or partial.moments.n == 0:
        empty = sp.csr_matrix((1, 1))
        raise core_refusal(
            tables[0].label,
            lambda: _core_win_rates(empty, dict.fromkeys(models, empty), weighting=weighting),
        )
    return {
        model: SummaryEstimate.product(
            partial.names["rpp"], partial.moments, [m], (1,), n_excluded_users=partial.n_excluded
        )
        for m, model in enumerate(models)
    }
