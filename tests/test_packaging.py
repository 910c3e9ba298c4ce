"""The adapters folder installs only as recpack_ope.adapters, and the core stays framework-free.

Run in a subprocess from an empty directory so the repository root is not on sys.path:
what is checked is the installed distribution (a wheel in the legacy/modern sessions, an
editable install in the editable session).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPOSITORY, repository_lines


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


def test_adapters_importable_only_under_recpack_ope(tmp_path):
    ok = run_python(
        "import recpack_ope.adapters as a, recpack_ope as r, json; "
        "print(json.dumps([a.__name__, a.__file__, r.__file__]))",
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    name, adapters_file, core_file = json.loads(ok.stdout)
    assert name == "recpack_ope.adapters"
    assert Path(adapters_file).name == "__init__.py"
    top_level = run_python("import adapters", tmp_path)
    assert top_level.returncode != 0 and "No module named 'adapters'" in top_level.stderr


def test_core_never_imports_a_framework(tmp_path):
    out = run_python(
        "import sys, recpack_ope, recpack_ope.adapters, recpack_ope.studies.demo, recpack_ope.cli; "
        "print(sorted(m for m in ('recpack', 'cornac', 'torch') if m in sys.modules))",
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["recpack_ope", "recpack_ope.adapters"])
def test_installed_metadata(module, tmp_path):
    from importlib.metadata import distribution

    dist = distribution("recpack-ope")
    extras = set(dist.metadata.get_all("Provides-Extra"))
    assert {"recpack", "cornac", "plot", "test"} <= extras
    assert dist.metadata["Requires-Python"] == ">=3.10"
    assert run_python(f"import {module}", tmp_path).returncode == 0


def test_console_script_is_installed(tmp_path):
    script = Path(sys.executable).with_name("recpack-ope")
    assert script.exists(), f"no console script next to {sys.executable}"
    done = subprocess.run(
        [str(script), "demo", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--users" in done.stdout and "--output" in done.stdout


#: What a page or comment may not point at: notes outside the repository, issue numbers of a
#: tracker readers cannot see, and the project URL, which is not published.
OUTSIDE = re.compile(
    r"PERFORMANCE-NOTES|DESIGN\.md|\bshared/|\bpapers/|\bissues? \d+|\(issue\b|(?<![&\w])#\d{2,}\b"
    r"|github\.com/recpack-ope"
)


def test_no_reference_outside_the_repository():
    offenders = [
        f"{path.relative_to(REPOSITORY)}:{n}: {line.strip()}"
        for path, n, line in repository_lines(__file__)
        if OUTSIDE.search(line)
    ]
    assert not offenders, "\n".join(offenders)
