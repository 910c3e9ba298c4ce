"""Comparing a framework's fitted models: ties with the best from the per-user values the
framework kept, and recall-paired preference from the models' rankings of the held-out users.

A framework adapter extracts the per-user results or ranks the users; the checks, the pairing
of users and the statistics are here, shared by every framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._validation import as_csr, shown
from ..inference.significance import TiedWithBest, tied_with_best
from ..inference.systems import PreferenceMatrix, SystemScores
from ..metrics.ranking import TopK
from ..metrics.rpp import RecallLevels, preference_matrix

__all__ = ["add_win_rates", "check_new_column", "rpp_of_models", "tied_with_best_of"]


def tied_with_best_of(
    user_results: Mapping[str, Mapping | None],
    metric: str,
    alpha: float = 0.05,
    correction: str | None = None,
    test: str = "mcb",
) -> TiedWithBest:
    """Models statistically tied with the best on ``metric``
    (:func:`~recpack_ope.inference.significance.tied_with_best`: by default Hsu's multiple
    comparisons with the best, whose family-wise error holds although the data chose the best;
    ``test="t"`` for Holm-corrected t-tests against the best, ``"tukey"`` for the randomised
    Tukey HSD), from each model's per-user results ``{metric: {user: value}}`` (e.g. Cornac's
    ``metric_user_results``), paired on the users every model has.

    Examples
    --------
    >>> a = {"Recall@5": {0: 1.0, 1: 0.0, 2: 1.0, 3: 1.0}}
    >>> b = {"Recall@5": {0: 0.0, 1: 0.0, 2: 1.0, 3: 0.5}}
    >>> ties = tied_with_best_of({"a": a, "b": b}, "Recall@5")
    >>> ties.best, ties.label
    ('a', "Hsu's MCB, α=0.05")
    >>> tied_with_best_of({"a": a, "b": {}}, "Recall@5")
    Traceback (most recent call last):
    ...
    ValueError: no per-user results for metric 'Recall@5' of b; known: []
    """
    for name, results in user_results.items():
        if metric not in (results or {}):
            raise ValueError(
                f"no per-user results for metric {metric!r} of {name}; "
                f"known: {sorted(results or {})}"
            )
    per_model = {name: results[metric] for name, results in user_results.items()}
    scores = SystemScores.from_user_values(per_model, metric)
    return tied_with_best(scores, alpha=alpha, correction=correction, test=test)


def check_new_column(column, taken, owner: str = "the experiment") -> str | None:
    """``column`` if it is None or a non-empty name none of ``taken`` (the names ``owner``
    already has); else a ValueError, so that nothing is overwritten."""
    if column is not None and (not isinstance(column, str) or not column):
        raise ValueError(f"column must be a non-empty name or None, got {shown(column)}")
    if column in set(taken):
        raise ValueError(f"column {column!r} would overwrite {owner}'s own {column!r} values")
    return column


def add_win_rates(
    matrix: PreferenceMatrix, averages: Sequence[dict], k: int | None, column: str | None = None
) -> str:
    """Write each model's win rate of ``matrix`` into its ``averages`` (a framework's averages,
    one dict per model in the matrix's order) as ``column``, by default ``"RPP@k win"``
    (``"RPP win"`` for whole rankings); returns the column.

    Examples
    --------
    >>> import numpy as np
    >>> hits, misses = np.array([[0, 1], [1, 0]]), np.array([[1, 0], [0, 1]])
    >>> rank = {"a": lambda u: TopK(hits[u]), "b": lambda u: TopK(misses[u])}
    >>> matrix, averages = rpp_of_models(np.eye(2), rank, 1), [{}, {}]
    >>> add_win_rates(matrix, averages, 1), averages
    ('RPP@1 win', [{'RPP@1 win': 1.0}, {'RPP@1 win': -1.0}])
    """
    column = column or f"{matrix.name}{'' if k is None else f'@{k}'} win"
    for values, rate in zip(averages, matrix.win_rates().means, strict=True):
        values[column] = float(rate)
    return column


def rpp_of_models(
    held,
    rank: Mapping[str, Callable[[np.ndarray], TopK]],
    k: int | None = None,
    weighting: str = "uniform",
    *,
    graded: bool = False,
    owner: str = "the experiment",
) -> PreferenceMatrix:
    """Recall-paired preference between models (:func:`~recpack_ope.metrics.rpp.
    preference_matrix`) on the rows of ``held`` (users × items) with a held-out positive:
    ``rank[name](users)`` is model ``name``'s ranking of those rows (at depth ``k``; None:
    whole rankings). The result's ``user_ids`` number those rows 0, 1, …; the levels are built,
    and ``weighting`` checked, before any ranking.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics.ranking import TopK
    >>> held = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]])
    >>> top = {"a": np.array([[0, 1], [2, 1], [1, 0]]), "b": np.array([[1, 2], [0, 1], [1, 2]])}
    >>> rank = {name: (lambda users, t=t: TopK(t[users])) for name, t in top.items()}
    >>> matrix = rpp_of_models(held, rank, k=2)
    >>> matrix.user_ids.tolist(), matrix.pair("a", "b").per_user.tolist()
    ([0, 1], [1.0, 0.0])
    """
    if len(rank) < 2:
        raise ValueError(f"RPP compares models: {owner} has {len(rank)}, add at least one more")
    held = as_csr(held, "held")
    users = np.flatnonzero(np.diff(held.indptr) > 0)
    levels = RecallLevels.from_y_true(held[users], weighting=weighting, graded=graded)
    return preference_matrix(levels, {name: r(users) for name, r in rank.items()}, k=k)
