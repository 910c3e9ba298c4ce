"""Several systems' results of one metric: a table of them and paired comparisons, as the
framework adapters show them."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import replace

from .._validation import shown
from .result import Comparison, PairedEstimate
from .significance import tied_with_best
from .systems import SystemScores

__all__ = ["DIAGNOSTICS", "summary_rows", "compare_systems"]

#: Columns of the weights' diagnostics
#: (:class:`~recpack_ope.inference.diagnostics.WeightDiagnostics`) of an IPS-weighted row.
DIAGNOSTICS = (
    "ess",
    "ess_ratio",
    "max_weight",
    "top_share",
    "n_clipped",
    "clipped_mass",
    "reliable",
)


def summary_rows(
    results: Mapping[str, PairedEstimate], level: float = 0.95, alpha: float = 0.05
) -> list[dict]:
    """One row per system, best first: value, confidence interval, standard error and users,
    and whether the system is statistically tied with the best.

    Parameters
    ----------
    results : mapping of str to PairedEstimate
        System name → its estimate of one metric (e.g. ``EstimateResult``), all on the same
        users when there are several.
    level : float
        Confidence level of the intervals.
    alpha : float
        Significance level of the tests against the best.

    Returns
    -------
    list of dict
        Sorted by ``value``, highest first (equal values keep the order of ``results``). Keys:
        ``system``, ``value``, ``ci_low``, ``ci_high``, ``standard_error``, ``n_users``;
        ``clip`` (the threshold ``clip="auto"`` selected; ``inf`` for none) when the estimate
        has a clip selection; the weights' diagnostics (:data:`DIAGNOSTICS`: Kish effective
        sample size ``ess``, ``ess_ratio`` = ESS / evaluated interactions, ``max_weight``,
        ``top_share`` of the estimate carried by the top 1 % of weights, ``n_clipped``,
        ``clipped_mass`` and ``reliable``) when it is IPS-weighted; and, with at least two
        systems, ``p_vs_best`` and ``tied_with_best`` from
        :func:`~recpack_ope.inference.significance.tied_with_best`: Holm-corrected paired
        t-tests of every system against the best over the M − 1 comparisons (the best gets
        p = 1). Choosing the best from the same data makes this family slightly liberal for
        large pools; ``tied_with_best(..., test="tukey")`` controls it exactly.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.inference.result import EstimateResult
    >>> from recpack_ope.inference.summary import summary_rows
    >>> def result(values):
    ...     return EstimateResult("DCG@2", np.array(values), (1,), np.arange(4), 0)
    >>> rows = summary_rows({"a": result([0.0, 1.0, 0.0, 1.0]), "b": result([1.0, 1.0, 1.0, 0.5])})
    >>> [(r["system"], r["value"], r["n_users"], r["tied_with_best"]) for r in rows]
    [('b', 0.875, 4, True), ('a', 0.5, 4, True)]
    """
    rows = []
    for name, result in results.items():
        lo, hi = result.confidence_interval(level)
        row = {
            "system": name,
            "value": result.value,
            "ci_low": lo,
            "ci_high": hi,
            "standard_error": result.standard_error,
            "n_users": result.n_users,
        }
        selection = getattr(result, "clip_selection", None)
        if selection is not None:
            row["clip"] = math.inf if selection.clip is None else selection.clip
        diagnostics = getattr(result, "diagnostics", None)
        if diagnostics is not None:
            row.update({column: getattr(diagnostics, column) for column in DIAGNOSTICS})
        rows.append(row)
    if len(rows) > 1:
        tied = tied_with_best(SystemScores.from_estimates(results), alpha=alpha)
        p_values = dict(zip(tied.names, tied.p_value, strict=True))
        for row in rows:
            row["p_vs_best"] = float(p_values[row["system"]])
            row["tied_with_best"] = row["system"] in tied.tied
    return sorted(rows, key=lambda row: -row["value"])


def _system(results: Mapping[str, PairedEstimate], name, argument: str) -> PairedEstimate:
    if not isinstance(name, str):
        raise ValueError(f"{argument} must be the name of a system, got {shown(name)}")
    if name not in results:
        close = difflib.get_close_matches(name, list(results), n=3, cutoff=0.3)
        hint = f"; did you mean {close}?" if close else f"; the systems are {sorted(results)}"
        raise ValueError(f"{argument}: no system {name!r}{hint}")
    return results[name]


def compare_systems(
    results: Mapping[str, PairedEstimate],
    a: str,
    b: str,
    level: float = 0.95,
    *,
    control_variate: bool = False,
    arguments: tuple[str, str] = ("a", "b"),
) -> Comparison:
    """Paired difference ``metric(a) − metric(b)`` of two systems over the same users.

    Parameters
    ----------
    results : mapping of str to PairedEstimate
        System name → its estimate of one metric.
    a, b : str
        The systems to compare; an unknown name is refused with the close ones.
    level : float
        Confidence level of the interval.
    control_variate : bool
        Subtract the Δ-OPE control variate (:meth:`PairedEstimate.compare`).
    arguments : tuple of str
        The caller's names of ``a`` and ``b``, for messages.

    Returns
    -------
    Comparison
        Named ``"a − b"``: difference, standard error (delta method for ratio metrics),
        interval, two-sided p-value of the paired test and the number of paired users.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.inference.result import EstimateResult
    >>> from recpack_ope.inference.summary import compare_systems
    >>> def result(values):
    ...     return EstimateResult("DCG@2", np.array(values), (1,), np.arange(3), 0)
    >>> c = compare_systems({"a": result([1.0, 2.0, 3.0]), "b": result([0.0, 1.0, 1.0])}, "a", "b")
    >>> c.name, round(c.difference, 4), c.n_users
    ('a − b', 1.3333, 3)
    """
    first, second = (_system(results, x, n) for x, n in zip((a, b), arguments, strict=True))
    paired = first.compare(second, level, control_variate=control_variate)
    return replace(paired, name=f"{a} − {b}")
