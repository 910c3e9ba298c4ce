"""Data-driven clipping of importance weights: SLOPE (Su, Srinath & Krishnamurthy, ICML 2020).

Clipping the weights at ``m`` (``w = min(m, 1/p)``) trades bias for variance: a small ``m``
is stable but biased towards the unweighted metric, ``m = ∞`` is unbiased but noisy. SLOPE
(Su et al., "Adaptive Estimator Selection for Off-Policy Evaluation", ICML 2020, Algorithm 1)
picks ``m`` from the data by Lepski's principle. The candidate estimates ``V̂_1, V̂_2, …`` are
ordered by decreasing variance, i.e. decreasing ``m`` (``V̂_1`` unclipped, the least biased),
each with the interval ``I(j) = [V̂_j − 2·cnf(j), V̂_j + 2·cnf(j)]``; SLOPE returns

    î = max{ i : I(1) ∩ I(2) ∩ … ∩ I(i) ≠ ∅ },

the most clipped (least variable) estimate that is still consistent with every less-clipped
one. We take ``cnf(j)`` as the estimate's delta-method standard error, so ``I(j)`` is its
approximate 95 % interval. Su et al. prove that the selected estimate's error is within a
constant factor of the best bias-plus-deviation trade-off over the candidates (their
Theorem 3), assuming the bias grows and the deviation shrinks along the order, which holds
for clipping of non-negative rewards.

Candidates (docs/definitions.md, "Data-driven clipping"): ``m = 2^k`` for ``k = 0, 1, …``
below the largest inverse propensity, plus ``m = ∞``; ``m = 1`` is the unweighted metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "ClipSelection",
    "clip_candidates",
    "slope_index",
    "select_clip",
    "clipped_estimate",
    "inverse_propensities",
    "check_finite_inverse",
]

AUTO = "auto"


def clip_candidates(raw: np.ndarray) -> np.ndarray:
    """Candidate thresholds in SLOPE's order: ``∞`` first, then ``2^k`` descending to 1.

    Only thresholds below the largest inverse propensity are kept: larger ones change no
    weight and would repeat the unclipped estimate.

    Raises
    ------
    ValueError
        For an inverse propensity that is NaN or infinite (a propensity below about 5.6e-309,
        whose ``1/p`` overflows float64): SLOPE starts from the unclipped estimate, which such
        a weight makes infinite.

    Examples
    --------
    >>> clip_candidates(np.array([1.0, 2.5, 6.0])).tolist()
    [inf, 4.0, 2.0, 1.0]
    """
    raw = np.asarray(raw, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(raw))
    if bad.size:
        raise ValueError(
            f'clip="auto": inverse propensity {raw[bad[0]]} (of {bad.size} such weights) is not '
            "finite, as 1/p is for a propensity below about 5.6e-309: SLOPE starts from the "
            "unclipped estimate, which it makes infinite; check the propensities (floor them) or "
            "pass a finite clip="
        )
    largest = float(np.max(raw, initial=1.0))
    finite = 2.0 ** np.arange(0, max(math.ceil(math.log2(largest)), 0))
    return np.concatenate([[np.inf], finite[finite < largest][::-1]])


def slope_index(values: np.ndarray, half_widths: np.ndarray) -> int:
    """SLOPE's choice (Su et al. 2020, Algorithm 1) among estimates ordered by decreasing
    variance: the last ``i`` for which the intervals ``values[j] ± 2·half_widths[j]``,
    ``j ≤ i``, share a point.

    Parameters
    ----------
    values, half_widths : numpy.ndarray
        Estimates and their deviation bounds ``cnf(j)``, in SLOPE's order.

    Returns
    -------
    int
        Position of the selected estimate.
    """
    lower = np.maximum.accumulate(values - 2 * half_widths)
    upper = np.minimum.accumulate(values + 2 * half_widths)
    # The running intersection only shrinks, so the first empty one ends the search.
    empty = np.flatnonzero(lower > upper)
    return int(empty[0] - 1) if empty.size else int(values.size - 1)


@dataclass(frozen=True, eq=False)
class ClipSelection:
    """The estimate-versus-threshold curve behind ``clip="auto"`` and SLOPE's choice.

    Attributes
    ----------
    thresholds : numpy.ndarray
        Candidate ``m`` in SLOPE's order (``inf`` first, then descending).
    values, standard_errors : numpy.ndarray
        The estimate and its standard error at every threshold.
    chosen : int
        Position of the selected threshold.
    method : str
        ``"SLOPE"`` (Su et al., ICML 2020).
    """

    thresholds: np.ndarray
    values: np.ndarray
    standard_errors: np.ndarray
    chosen: int
    method: str = "SLOPE"

    def __post_init__(self) -> None:
        sizes = {np.shape(self.thresholds), np.shape(self.values), np.shape(self.standard_errors)}
        if len(sizes) != 1 or len(sizes.pop()) != 1:
            raise ValueError(
                "thresholds, values and standard_errors must be 1-D arrays of one length, got "
                f"shapes {np.shape(self.thresholds)}, {np.shape(self.values)} and "
                f"{np.shape(self.standard_errors)}"
            )
        n = np.shape(self.thresholds)[0]
        if (
            isinstance(self.chosen, bool)
            or not isinstance(self.chosen, (int, np.integer))
            or not 0 <= self.chosen < n
        ):
            raise ValueError(f"chosen must index one of the {n} thresholds, got {self.chosen!r}")

    @property
    def clip(self) -> float | None:
        """The selected ``m``; None when no clipping was selected."""
        m = float(self.thresholds[self.chosen])
        return None if math.isinf(m) else m

    def intervals(self) -> np.ndarray:
        """SLOPE's intervals ``value ± 2·SE``, shape (n_thresholds, 2)."""
        return np.column_stack(
            [self.values - 2 * self.standard_errors, self.values + 2 * self.standard_errors]
        )

    def summary(self) -> str:
        """One line: the chosen threshold and its neighbours' verdict."""
        m = "none (m = ∞)" if self.clip is None else f"m = {self.clip:g}"
        return (
            f"{self.method} chose {m} among {self.thresholds.size} thresholds "
            f"(value {self.values[self.chosen]:.6g} ± {2 * self.standard_errors[self.chosen]:.3g})"
        )

    def plot(self, ax=None, title: str | None = None):
        """Estimate against the clipping threshold with SLOPE's intervals; the choice marked.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure by default.
        title : str, optional
            Axes title.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from .._plots import axes

        ax = axes(ax, "ClipSelection.plot", figsize=(6, 3.5))
        finite = self.thresholds[np.isfinite(self.thresholds)]
        # m = ∞ is drawn one doubling beyond the largest finite candidate.
        x = np.where(np.isfinite(self.thresholds), self.thresholds, 2 * finite.max(initial=1.0))
        bounds = self.intervals()
        ax.errorbar(
            x,
            self.values,
            yerr=2 * self.standard_errors,
            fmt="o-",
            ms=3,
            capsize=2,
            label="estimate ± 2 SE",
        )
        ax.plot(
            x[self.chosen],
            self.values[self.chosen],
            "s",
            color="C3",
            ms=9,
            label=f"SLOPE: {'m = ∞' if self.clip is None else f'm = {self.clip:g}'}",
        )
        ax.axhspan(
            bounds[: self.chosen + 1, 0].max(),
            bounds[: self.chosen + 1, 1].min(),
            color="C3",
            alpha=0.1,
            label="common interval",
        )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("clipping threshold m (rightmost: none)")
        ax.set_ylabel("estimate")
        ax.legend(fontsize=8)
        if title:
            ax.set_title(title)
        return ax


def select_clip(estimate: Callable[[float | None], object], raw: np.ndarray):
    """The estimate at the threshold SLOPE selects, with the curve as ``clip_selection``.

    Parameters
    ----------
    estimate : callable
        ``estimate(m)`` → an estimate (an :class:`~recpack_ope.inference.result.EstimateResult`
        dataclass) with weights clipped at ``m``; ``None`` means no clipping.
    raw : numpy.ndarray
        The inverse propensities before clipping, which set the candidate thresholds.

    Returns
    -------
    EstimateResult
        The selected estimate, whose ``clip_selection`` holds the :class:`ClipSelection`.
    """
    thresholds = clip_candidates(raw)
    results = [estimate(None if math.isinf(m) else float(m)) for m in thresholds]
    values = np.array([r.value for r in results])
    errors = np.array([r.standard_error for r in results])
    chosen = slope_index(values, errors)
    selection = ClipSelection(thresholds, values, errors, chosen)
    # Named after the unclipped candidate, whose name carries no threshold.
    return replace(
        results[chosen],
        name=f"{results[0].name} (auto m={_label(selection.clip)})",
        clip_selection=selection,
    )


def inverse_propensities(propensity: np.ndarray) -> np.ndarray:
    """``1/p`` of propensities in (0, 1]: ``inf``, without numpy's overflow warning, for a
    propensity below about 5.6e-309, which a finite clip caps and :func:`check_finite_inverse`
    refuses where nothing does.

    Examples
    --------
    >>> inverse_propensities(np.array([0.5, 1e-320])).tolist()
    [2.0, inf]
    """
    with np.errstate(over="ignore", divide="ignore"):
        return 1.0 / np.asarray(propensity, dtype=np.float64)


def check_finite_inverse(
    raw: np.ndarray, clip: float | str | None, describe: Callable[[int], str] | None = None
) -> None:
    """Refuse an infinite inverse propensity ``raw[k]`` that an estimate would use unclipped
    (``clip`` None, or ``"auto"``, whose first candidate is unclipped): it would make the
    estimate infinite. A finite ``clip`` caps it and passes.

    ``describe(k)`` names the propensity behind ``raw[k]`` and its value (``"propensity
    1e-320 of item 2"``); by default the message speaks of the evaluated rows.

    Examples
    --------
    >>> check_finite_inverse(np.array([2.0, np.inf]), 10.0)
    >>> check_finite_inverse(np.array([2.0, np.inf]), None, lambda k: f"propensity of item {k}")
    Traceback (most recent call last):
    ...
    ValueError: the inverse of propensity of item 1 is inf, as 1/p is for a propensity below ...
    """
    auto = isinstance(clip, str) and clip == AUTO
    if not (auto or clip is None):
        return
    infinite = np.flatnonzero(~np.isfinite(raw))
    if infinite.size:
        k = int(infinite[0])
        what = (
            "an inverse propensity of the evaluated rows"
            if describe is None
            else f"the inverse of {describe(k)}"
        )
        raise ValueError(
            f"{what} is {raw[k]}, as 1/p is for a "
            "propensity below about 5.6e-309: the unclipped estimate"
            + (', clip="auto"\'s first candidate,' if auto else "")
            + " is infinite; floor the propensities or pass a finite clip="
        )


def clipped_estimate(
    estimate: Callable[[float | None], object],
    clip: float | str | None,
    raw: np.ndarray,
    *,
    needs: str,
    unit: str,
    stacklevel: int,
):
    """The estimate at ``clip`` (a threshold, None, or ``"auto"`` for :func:`select_clip` over
    the inverse propensities ``raw`` of the evaluated rows), after a reliability warning to
    the estimator's caller if its weight diagnostics call for one.

    Parameters
    ----------
    estimate : callable
        ``estimate(m)`` → an estimate with weights clipped at ``m`` (None: no clipping).
    clip : float, "auto" or None
        The validated clipping.
    raw : numpy.ndarray
        Inverse propensities of the evaluated rows, which set SLOPE's candidates.
    needs : str
        What ``"auto"`` needs and ``raw`` lacks when it is empty, for the error.
    unit : str
        What the estimate averages over, for the warning (``"sessions"``).
    stacklevel : int
        Frames from this helper's caller to the user's call (1: the caller is called by the
        user).

    Examples
    --------
    >>> from recpack_ope.inference.result import EstimateResult
    >>> def estimate(m):
    ...     return EstimateResult(f"mean (m={m})", np.array([1.0, 2.0]), (1,), np.arange(2), 0)
    >>> clipped_estimate(estimate, 4.0, np.array([8.0]), needs="", unit="", stacklevel=1).name
    'mean (m=4.0)'
    """
    auto = isinstance(clip, str) and clip == AUTO
    check_finite_inverse(raw, clip)
    if auto:
        if not raw.size:
            raise ValueError(f'clip="auto" needs {needs}')
        result = select_clip(estimate, raw)
    else:
        result = estimate(clip)
    if result.diagnostics is not None:
        result.diagnostics.warn(result.name, stacklevel=stacklevel + 3, unit=unit)
    return result


def _label(clip: float | None) -> str:
    return "∞" if clip is None else f"{clip:g}"
