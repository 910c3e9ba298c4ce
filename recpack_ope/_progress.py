"""Progress bars of long work, in the library and its studies alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tqdm.auto import tqdm


def progress_bar(
    iterable: Iterable | None = None,
    *,
    desc: str,
    total: int | None = None,
    show: bool = True,
    file: TextIO | None = None,
    unit: str = "it",
) -> tqdm:
    """A progress bar over work items (a study's worlds, batches of users, Spark tasks), drawn
    only where someone watches.

    The bar is silent when its stream is not a terminal (tqdm's ``disable=None``), so logs,
    pipes and captured output stay free of it; in a notebook it is the notebook's widget.

    Parameters
    ----------
    iterable : iterable, optional
        The work items; the bar's ``total`` is their number. None for a bar advanced with
        ``update`` up to ``total``.
    desc : str
        What the items are, e.g. ``"worlds"``.
    total : int, optional
        The number of work items, when ``iterable`` has no length or is None.
    show : bool
        False means no bar at all (the CLI's ``--quiet``).
    file : text stream, optional
        Where the bar goes: standard error by default; inside :func:`quiet_frameworks` the
        stream it yields, which is still the terminal.
    unit : str
        What one step is, e.g. ``"task"``.

    Examples
    --------
    >>> import io
    >>> bar = progress_bar(range(3), desc="worlds", file=io.StringIO())  # not a terminal
    >>> bar.total, bar.disable, sum(bar)
    (3, True, 3)
    """
    if not isinstance(show, bool):
        raise ValueError(f"show must be True or False, got {show!r}")
    # imported on use: start-up time (docs/performance.md)
    from tqdm.auto import tqdm

    return tqdm(
        iterable, desc=desc, total=total, file=file, unit=unit, disable=None if show else True
    )
