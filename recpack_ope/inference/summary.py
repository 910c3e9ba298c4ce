"""Several systems' results of one metric: a table of them and paired comparisons, as the
framework adapters show them."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import replace

from .._validation import check_fraction, shown
from .diagnostics import ESS_MIN
from .result import Comparison, PairedEstimate
from .sensitivity import SHOWN_GAMMA
from .significance import tied_with_best
from .systems import SystemScores

__all__ = [
    "DIAGNOSTICS",
    "FLAG_LABELS",
    "diagnostic_columns",
    "flag_cell",
    "summary_rows",
    "compare_systems",
    "sensitivity_columns",
    "robustness_columns",
]

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

#: How a table cell spells each criterion of
#: :data:`~recpack_ope.inference.diagnostics.CRITERIA` that fired.
FLAG_LABELS = {
    "ess_ratio": "ESS/n low",
    "ess": f"ESS<{ESS_MIN}",
    "user_share": "few users carry half",
    "calibration": "p miscalibrated",
}


def diagnostic_columns(estimate) -> dict:
    """The weights' diagnostics of ``estimate`` as columns of a row: those of
    :data:`DIAGNOSTICS` (Kish ``ess`` = (Σw)²/Σw², ``ess_ratio`` = ESS / evaluated
    interactions, …, ``reliable``) and ``flags``, the criteria that fired
    (:attr:`~recpack_ope.inference.diagnostics.WeightDiagnostics.reasons`) joined by "; ",
    empty when none did; no column for an estimate without weight diagnostics (unweighted).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import dcg, ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true, scores = np.array([[1, 0, 1], [0, 1, 0]]), np.eye(3)[[0, 1]]
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     estimate = ips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p)
    >>> columns = diagnostic_columns(estimate)  # weights 2 and 1: ESS 3² / 5
    >>> columns["ess"], columns["reliable"], columns["flags"]
    (1.8, False, 'ess')
    >>> diagnostic_columns(dcg(y_true, scores, discount=LogDiscount(2)))
    {}
    """
    diagnostics = getattr(estimate, "diagnostics", None)
    if diagnostics is None:
        return {}
    columns = {column: getattr(diagnostics, column) for column in DIAGNOSTICS}
    return {**columns, "flags": "; ".join(diagnostics.reasons)}


def flag_cell(row: Mapping) -> str:
    """A table's cell for the ``flags`` of a row (:func:`diagnostic_columns`): "ok", "⚠ "
    and the criteria that fired (:data:`FLAG_LABELS`), or "–" for a row without weights.

    Examples
    --------
    >>> flag_cell({"flags": "ess_ratio; ess"}), flag_cell({"flags": ""}), flag_cell({})
    ('⚠ ESS/n low; ESS<50', 'ok', '–')
    """
    if "flags" not in row:
        return "–"
    if not row["flags"]:
        return "ok"
    return "⚠ " + "; ".join(FLAG_LABELS[reason] for reason in row["flags"].split("; "))


def sensitivity_columns(estimate: PairedEstimate) -> dict[str, float]:
    """``sens_low`` and ``sens_high``: the smallest and largest value of ``estimate`` when every
    propensity may be off by a factor up to
    :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` either way
    (:meth:`~recpack_ope.inference.result.EstimateResult.sensitivity`);
    empty for an estimate without a weighting (unweighted, stratified, or a Spark estimate whose
    bounds need every user's terms).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import dcg, ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true, scores = np.array([[1, 0, 1], [0, 1, 0]]), np.eye(3)[[0, 1]]
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> sensitivity_columns(ips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p))
    {'sens_low': 0.75, 'sens_high': 3.0}
    >>> sensitivity_columns(dcg(y_true, scores, discount=LogDiscount(2)))
    {}
    """
    if getattr(estimate, "weighting", None) is None:
        return {}
    bounds = estimate.sensitivity(SHOWN_GAMMA)
    return {"sens_low": bounds.low, "sens_high": bounds.high}


def robustness_columns(
    a: PairedEstimate, b: PairedEstimate, level: float | None = 0.95
) -> dict[str, float]:
    """Γ* of the paired comparison ``a − b``
    (:meth:`~recpack_ope.inference.result.Comparison.robustness`): ``robust_gamma``, the largest
    factor by which every propensity may be off, either way, before the difference can change
    sign, and with ``level`` also ``robust_gamma_<100·level>`` (``robust_gamma_95``), before it
    can stop being significant at that level. Each is ``inf`` when the verdict holds for any
    error (up to a factor of a million) and 1.0 when it fails at the given propensities already.
    Empty when either estimate has no weighting; NaN when the two cannot be perturbed together
    (e.g. different clipping thresholds, as ``clip="auto"`` selects per estimate).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_dcg
    >>> from recpack_ope.propensity import LogDiscount
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]])
    >>> p = np.array([0.5, 1.0, 0.25])
    >>> a = ips_dcg(y_true, np.eye(3)[[0, 1, 0, 0]], discount=LogDiscount(1), propensity=p)
    >>> b = ips_dcg(y_true, np.eye(3)[[2, 2, 1, 1]], discount=LogDiscount(1), propensity=p)
    >>> {k: round(v, 4) for k, v in robustness_columns(a, b).items()}  # (6/Γ − 4Γ)/4 = 0
    {'robust_gamma': 1.2247, 'robust_gamma_95': 1.0}
    """
    if any(getattr(e, "weighting", None) is None for e in (a, b)):
        return {}
    levels = {"robust_gamma": None}
    if level is not None:
        levels[f"robust_gamma_{check_fraction(level, 'level') * 100:g}"] = level
    try:
        a.weighting.minus(b.weighting)
    except ValueError:
        return dict.fromkeys(levels, math.nan)
    comparison = a.compare(b)
    return {column: comparison.robustness(at) for column, at in levels.items()}


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
        ``clipped_mass``, ``reliable``, and ``flags``, the criteria that fired:
        :func:`diagnostic_columns`) when it is IPS-weighted; and, with at least two
        systems, ``p_vs_best`` and ``tied_with_best`` from
        :func:`~recpack_ope.inference.significance.tied_with_best`: Hsu's multiple
        comparisons with the best, whose family-wise error holds although the same data chose
        the best (the best gets p = 1).

        IPS-weighted estimates (those with a ``weighting``) also say how far wrong
        propensities could move them (docs/sensitivity.md): ``sens_low`` and ``sens_high``,
        the smallest and largest value when every propensity may be off by a factor up to
        :data:`~recpack_ope.inference.sensitivity.SHOWN_GAMMA` (2) either way
        (:func:`sensitivity_columns`; valid outer bounds for the per-user ratios and pnDCG);
        and, on every row but the best, ``robust_gamma`` and ``robust_gamma_95`` (the suffix
        is ``100 · level``), Γ* of the paired comparison best − row: the largest such factor
        before the difference can change sign, or stop being significant at ``level``
        (:func:`robustness_columns`; ``inf`` when it never does, 1.0 when it already fails
        at the given propensities, NaN when the two estimates were clipped differently).
        Unweighted estimates have none of these columns.

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
        row.update(sensitivity_columns(result))
        row.update(diagnostic_columns(result))
        rows.append(row)
    rows.sort(key=lambda row: -row["value"])
    if len(rows) > 1:
        tied = tied_with_best(SystemScores.from_estimates(results), alpha=alpha)
        p_values = dict(zip(tied.names, tied.p_value, strict=True))
        best = results[rows[0]["system"]]
        for row in rows:
            row["p_vs_best"] = float(p_values[row["system"]])
            row["tied_with_best"] = row["system"] in tied.tied
            if row is not rows[0]:
                row.update(robustness_columns(best, results[row["system"]], level))
    return rows


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
