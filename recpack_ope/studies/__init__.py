"""The demo and the reproductions, one module per ``recpack-ope reproduce`` command.

They sit above the library and may import the adapters, so they are imported on use:

* ``demo``              – ``recpack-ope demo``: which offline metric picks the online winner
* ``ndcg_disagreement`` – Jeunen et al. Appendix A in a RecPack pipeline
* ``simpsons_paradox``  – Jadidinejad et al. Table 2 with Cornac
* ``rpp_power``         – Diaz & Ferraro Tables 3–4, discriminative power
* ``sensitivity``       – Jeunen et al. Figure 1 on the simulator
* ``disagreement``      – Gilotte Figure 3, Criteo-like banners
* ``click_models``      – the bias of every ranking estimator where its click model holds
  and where it breaks, on the simulator
* ``open_bandit``       – the Open Bandit Dataset: the Thompson-sampling policy's click rate
  from the uniform-random log against its own on-policy log
* ``recpack_models``    – RecPack's algorithms as the demo's model pool
* ``registry``          – :data:`~recpack_ope.studies.registry.STUDIES`: each command's
  options, run and summary lines, which ``recpack_ope.cli`` turns into subcommands

The reproductions that run RecPack or Cornac do so inside :func:`quiet_frameworks`, so their
logs, progress bars and TensorFlow's banner stay off the terminal unless asked for. Every study
shows its own :func:`progress_bar` over the loop that dominates its run time, on a terminal
only.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from .._progress import progress_bar

__all__ = ["progress_bar", "quiet_frameworks"]

_PACKAGE = Path(__file__).absolute().parents[1]
# Loggers of RecPack, the hyperopt it runs, and TensorFlow (Cornac's WMF); Cornac itself prints.
_LOGGERS = ("recpack", "hyperopt", "tensorflow", "absl")


@contextlib.contextmanager
def quiet_frameworks(verbose: bool = False) -> Iterator[TextIO]:
    """Keep RecPack's, Cornac's, hyperopt's and TensorFlow's output off the terminal.

    Inside the block, unless ``verbose``: the frameworks' loggers pass only errors; warnings
    raised by third-party code are dropped, this package's own are shown after the block;
    TensorFlow's C++ log level defaults to errors (``TF_CPP_MIN_LOG_LEVEL``); and standard
    error is muted, Python's stream and file descriptor 2 alike, because progress bars and
    what TensorFlow's C++ core prints before its logging starts have no other switch.
    Standard output and exceptions are untouched (a traceback prints after the block).

    Parameters
    ----------
    verbose : bool
        True leaves everything as it is.

    Yields
    ------
    text stream
        Standard error as it was before the block, for a :func:`progress_bar` that must still
        reach the terminal.
    """
    if not isinstance(verbose, bool):
        raise ValueError(f"verbose must be True or False, got {verbose!r}")
    if verbose:
        yield sys.stderr
        return
    levels = {name: logging.getLogger(name).level for name in _LOGGERS}
    tf_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    try:
        for name in _LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with warnings.catch_warnings(record=True) as caught, _muted_stderr() as terminal:
            yield terminal
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if tf_level is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    for w in caught:
        if _ours(w):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _ours(w: warnings.WarningMessage) -> bool:
    """Whether a warning comes from this package: raised in its code or of its own class."""
    return w.category.__module__.split(".")[0] == __name__.split(".")[0] or Path(
        w.filename
    ).absolute().is_relative_to(_PACKAGE)


class _MutedStream(io.TextIOBase):
    """Stands in for ``sys.stderr``: drops what is written until unmuted, then passes it on to
    the stream it replaced (a log handler created meanwhile keeps working afterwards)."""

    def __init__(self, stream):
        self.stream = stream
        self.muted = True

    def write(self, text: str) -> int:
        return len(text) if self.muted else self.stream.write(text)

    def flush(self) -> None:
        if not self.muted:
            self.stream.flush()


def _descriptor(stream) -> int | None:
    """The file descriptor behind a stream, or None (e.g. pytest's captured streams)."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


@contextlib.contextmanager
def _muted_stderr() -> Iterator[TextIO]:
    """Mute ``sys.stderr`` and file descriptor 2 (where C code writes); yield a stream to
    where standard error went before."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (a windowed interpreter): Python's stream only
        saved = None
    stream = _MutedStream(sys.stderr)
    # Python's stream on descriptor 2 goes silent with it; a stream on the saved copy does not.
    on_fd2 = saved is not None and _descriptor(sys.stderr) == 2
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    terminal = (
        open(saved, "w", encoding=encoding, errors="replace", closefd=False)
        if on_fd2
        else sys.stderr
    )
    try:
        if saved is not None:
            with open(os.devnull, "w") as sink:
                os.dup2(sink.fileno(), 2)
        with contextlib.redirect_stderr(stream):
            yield terminal
    finally:
        if on_fd2:
            terminal.close()
        stream.muted = False
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
