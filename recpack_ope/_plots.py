"""Headless matplotlib for the report writers (an optional dependency: the ``plot`` extra)."""

from __future__ import annotations

import importlib.util

import numpy as np


def pyplot(plots: bool = True):
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or None when plots are off or
    matplotlib is not installed (reports then skip their figures)."""
    if not plots or importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def axes(ax, what: str, **subplots):
    """``ax``, or the axes of a new figure (``plt.subplots(**subplots)``) when it is None;
    without matplotlib the error names ``what`` and the extra to install."""
    if ax is not None:
        return ax
    plt = pyplot()
    if plt is None:
        raise ModuleNotFoundError(
            f'{what} needs matplotlib: in a clone of recpack-ope, pip install ".[plot]"'
        )
    return plt.subplots(**subplots)[1]


def save(fig, path, dpi: int = 120) -> None:
    """Lay out, write and close a figure (closing frees it: reports draw many)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def padded_limits(values, pad: float = 0.06) -> tuple[float, float]:
    """``(low, high)`` spanning ``values`` with ``pad`` × their range added on each side.

    Parameters
    ----------
    values : array_like
        The data the axis must show (at least one finite value).
    pad : float
        Margin on each side as a fraction of the range; a single value gets ± ``pad`` × its
        magnitude (± ``pad`` at zero).

    Returns
    -------
    tuple of float
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        raise ValueError(f"values must hold at least one finite number, got {np.asarray(values)!r}")
    low, high = float(v.min()), float(v.max())
    span = high - low or abs(high) or 1.0
    return low - pad * span, high + pad * span


def emptiest_corner(x, y, size: float) -> tuple[float, float]:
    """Lower-left corner, in axes fractions, of the ``size`` × ``size`` corner box (upper left,
    lower right, upper right, lower left, ties in that order) that holds fewest of the points
    ``(x, y)`` given in axes fractions: where an inset hides no data."""
    if not 0 < size < 0.96:
        raise ValueError(f"size must be in (0, 0.96), got {size!r}")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    far = 0.98 - size
    corners = ((0.02, far), (far, 0.02), (far, far), (0.02, 0.02))
    inside = [
        np.count_nonzero((x >= cx) & (x <= cx + size) & (y >= cy) & (y <= cy + size))
        for cx, cy in corners
    ]
    return corners[int(np.argmin(inside))]
