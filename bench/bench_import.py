"""Start-up time: ``import recpack_ope``, ``recpack-ope --help`` and ``recpack-ope evaluate
--help`` against ``import numpy, scipy.sparse``.

    python bench/bench_import.py [--repeat 15]

Each command runs in a fresh interpreter (this one, ``sys.executable``; ``recpack-ope`` is the
console script installed next to it), and the commands take turns, so a change of load
on the machine hits all of them alike. The anchor, ``import numpy, scipy.sparse``, is what the
package needs anyway. Times are wall-clock times of whole processes, interpreter start
included, from ``--repeat`` rounds after one round that is not timed: that round writes the
bytecode of every module to a temporary ``PYTHONPYCACHEPREFIX``, as a first import after
installation does, so every timed run reads bytecode, as a user's does. Printed: best, median
and worst time of each command and the ratios of its best and median to the anchor's, then
which of numpy and the heavy packages each command imports: none of the heavy ones for the
package's commands, and numpy only for a subcommand's help (``recpack-ope --help`` builds no
subcommand's parser; ``evaluate``'s reads the estimators' registry).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy

#: Packages only the functions that use them import (docs/performance.md).
HEAVY = ("scipy.stats", "sklearn", "pandas", "pyarrow", "matplotlib", "tqdm")


def commands() -> dict[str, list[str]]:
    """Name → command line; the first is the anchor."""
    script = Path(sys.executable).with_name("recpack-ope")
    if not script.exists():
        raise SystemExit(f"no recpack-ope script next to {sys.executable}: install the package")
    return {
        "import numpy, scipy.sparse (anchor)": [sys.executable, "-c", "import numpy, scipy.sparse"],
        "import recpack_ope": [sys.executable, "-c", "import recpack_ope"],
        "recpack-ope --help": [str(script), "--help"],
        "recpack-ope evaluate --help": [str(script), "evaluate", "--help"],
    }


def seconds(command: list[str], env: dict[str, str]) -> float:
    """Wall-clock time of one run of ``command``, which must succeed."""
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def heavy_imports(code: str, env: dict[str, str]) -> list[str]:
    """Numpy and the packages of :data:`HEAVY` in ``sys.modules`` after running ``code``."""
    probe = f"{code}\nimport sys\nprint(*[m for m in ('numpy', *{HEAVY!r}) if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True)
    return out.stdout.decode().split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    runs = commands()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for command in runs.values():  # the untimed round: writes the bytecode
            seconds(command, env)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, command in runs.items():
                times[name].append(seconds(command, env))
        loaded = {"import recpack_ope": heavy_imports("import recpack_ope", env)}
        for name, command in runs.items():
            if name.startswith("recpack-ope "):
                # The console script's main, its help kept off the probe's output.
                loaded[name] = heavy_imports(
                    "import contextlib, io\nfrom recpack_ope.cli import main\n"
                    "with contextlib.redirect_stdout(io.StringIO()), "
                    f"contextlib.suppress(SystemExit):\n    main({command[1:]!r})",
                    env,
                )

    print(
        f"Python {sys.version.split()[0]}, numpy {np.__version__}, scipy {scipy.__version__}; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} after the runs; "
        f"{args.repeat} interleaved rounds"
    )
    anchor = times[next(iter(runs))]
    width = max(map(len, runs))
    print(f"{'':>{width}} {'best':>6} {'median':>6} {'worst':>6} {'best×':>6} {'median×':>7}")
    for name, ts in times.items():
        best, median = min(ts), statistics.median(ts)
        print(
            f"{name:>{width}} {best:6.3f} {median:6.3f} {max(ts):6.3f} "
            f"{best / min(anchor):6.2f} {median / statistics.median(anchor):7.2f}"
        )
    for name, modules in loaded.items():
        print(f"{name} imports {', '.join(modules) or 'none'} of numpy, {', '.join(HEAVY)}")


if __name__ == "__main__":
    main()
