"""Headless matplotlib for the report writers (an optional dependency: the ``plot`` extra)."""

from __future__ import annotations

import importlib.util


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
        raise ModuleNotFoundError(f'{what} needs matplotlib: pip install "recpack-ope[plot]"')
    return plt.subplots(**subplots)[1]


def save(fig, path, dpi: int = 120) -> None:
    """Lay out, write and close a figure (closing frees it: reports draw many)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
