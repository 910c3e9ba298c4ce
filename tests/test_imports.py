"""A light start-up: ``import recpack_ope`` and the command line leave the heavy packages unloaded.

The packages' public names are imported from their submodules on first use
(:mod:`recpack_ope._lazy`), and scipy.stats, scikit-learn, pandas, pyarrow, matplotlib and tqdm
only by the functions that use them; ``recpack-ope --help`` imports none of the modules that
the subcommands' options read. Imports run in a fresh interpreter started from an empty
directory, so nothing this test session imported counts. No time is measured here
(``bench/bench_import.py`` does).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import subprocess
import sys

import pytest

import recpack_ope
from recpack_ope._lazy import export_lazily, type_checking_imports

#: Packages only the functions that use them import.
HEAVY = ("scipy.stats", "sklearn", "pandas", "pyarrow", "matplotlib", "tqdm")
#: The packages that re-export their submodules' names: the top level and every subpackage
#: but ``studies``, which defines its own.
PACKAGES = ("recpack_ope",) + tuple(
    f"recpack_ope.{m.name}"
    for m in pkgutil.iter_modules(recpack_ope.__path__)
    if m.ispkg and m.name != "studies"
)


def fresh(code: str, cwd) -> object:
    """What ``code`` leaves in the variable ``out``, run in a new interpreter (JSON)."""
    script = f"{code}\nimport json\nprint(json.dumps(out))"
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "statement",
    [
        "import recpack_ope",
        "import recpack_ope.cli",
        "import recpack_ope.registry",
        # the starting kit's estimators and results, used
        "from recpack_ope import dcg, ips_dcg, logged_dcg, rpp, stratified, EstimateResult",
    ],
)
def test_start_up_leaves_heavy_packages_unloaded(statement, tmp_path):
    code = f"{statement}\nimport sys\nout = [m for m in {HEAVY!r} if m in sys.modules]"
    assert fresh(code, tmp_path) == []


def help_imports(argv: list[str], cwd) -> tuple[bool, list[str], list[str]]:
    """Run ``recpack-ope *argv`` (a ``--help``) in a new interpreter: whether it printed a
    usage, the package's modules it imported and which of numpy and :data:`HEAVY` it did."""
    code = (
        "import contextlib, io, sys\n"
        "from recpack_ope.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as text, contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
        "out = ['usage:' in text.getvalue(),\n"
        "       sorted(m for m in sys.modules if m.split('.')[0] == 'recpack_ope'),\n"
        f"       [m for m in ('numpy', *{HEAVY!r}) if m in sys.modules]]"
    )
    return tuple(fresh(code, cwd))


def test_the_command_line_help_imports_only_the_command_line(tmp_path):
    # The studies' registry names the demo's line; no study, estimator or file engine loads.
    printed, modules, loaded = help_imports(["--help"], tmp_path)
    assert printed and loaded == []
    assert modules == [
        "recpack_ope",
        "recpack_ope._lazy",
        "recpack_ope._progress",
        "recpack_ope.cli",
        "recpack_ope.studies",
        "recpack_ope.studies.registry",
    ]
    assert help_imports(["reproduce", "--help"], tmp_path) == (printed, modules, loaded)


@pytest.mark.parametrize(
    "argv, studies",
    [
        (["reproduce", "sensitivity", "--help"], ["registry", "sensitivity"]),
        (["reproduce", "ndcg-disagreement", "--help"], ["registry"]),  # no default of a config
        (["evaluate", "--help"], ["registry"]),
        (["rpp", "--help"], ["registry"]),
    ],
)
def test_a_subcommand_help_imports_only_what_its_options_read(argv, studies, tmp_path):
    printed, modules, loaded = help_imports(argv, tmp_path)
    assert printed and not set(loaded) & set(HEAVY)
    assert [m.split(".")[-1] for m in modules if m.startswith("recpack_ope.studies.")] == studies
    # evaluate's options read the estimators' registry; no other command's do.
    assert ("recpack_ope.registry" in modules) == (argv[0] == "evaluate")


def test_import_loads_no_submodule(tmp_path):
    code = "import sys, recpack_ope\nout = sorted(m for m in sys.modules if 'recpack_ope.' in m)"
    assert fresh(code, tmp_path) == ["recpack_ope._lazy"]


def test_a_heavy_package_loads_when_used(tmp_path):
    # PowerLawPropensity subclasses scikit-learn's BaseEstimator: naming it imports sklearn.
    code = (
        "import sys, recpack_ope\n"
        "before = 'sklearn' in sys.modules\n"
        "recpack_ope.PowerLawPropensity\n"
        "out = [before, 'sklearn' in sys.modules]"
    )
    assert fresh(code, tmp_path) == [False, True]


@pytest.mark.parametrize("package", PACKAGES)
def test_lazy_names_are_the_public_names(package):
    module = importlib.import_module(package)
    exports = type_checking_imports(package)
    assert sorted(exports) == sorted(getattr(module, "__all__", ()))
    assert set(exports) <= set(dir(module))
    for home, _ in exports.values():
        assert importlib.util.find_spec(home) is not None, home


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "recpack_ope.spark"])
def test_lazy_names_are_their_home_modules_objects(package):
    # recpack_ope.spark needs pyspark: tests/spark/test_spark_public_names.py checks it there.
    module = importlib.import_module(package)
    for name, (home, attribute) in type_checking_imports(package).items():
        assert getattr(module, name) is getattr(importlib.import_module(home), attribute), name


def test_a_name_shared_with_a_submodule_stays_the_public_object(tmp_path):
    # Importing a submodule binds it on its package; metrics.rpp must stay the function.
    shared = sorted(
        (package, name)
        for package in PACKAGES
        if package != "recpack_ope.spark"
        for name in type_checking_imports(package)
        if importlib.util.find_spec(f"{package}.{name}") is not None
    )
    assert ("recpack_ope.metrics", "rpp") in shared and (
        "recpack_ope.logged",
        "logged_dcg",
    ) in shared
    code = (
        "import importlib\n"
        f"shared = {shared!r}\n"
        "for package, name in shared:\n"
        "    importlib.import_module(f'{package}.{name}')\n"
        "out = [type(getattr(importlib.import_module(p), n)).__name__ for p, n in shared]"
    )
    assert "module" not in fresh(code, tmp_path)


def test_a_lazy_name_can_be_patched_and_restored(monkeypatch):
    from recpack_ope.metrics.dcg import dcg

    sentinel = object()
    monkeypatch.setattr(recpack_ope, "dcg", sentinel)
    assert recpack_ope.dcg is sentinel
    monkeypatch.undo()
    assert recpack_ope.dcg is dcg


def test_a_package_without_lazy_names_is_refused(tmp_path, monkeypatch):
    init = tmp_path / "bare" / "__init__.py"
    init.parent.mkdir()
    init.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import numpy\n")
    spec = importlib.util.spec_from_file_location("bare", init)
    monkeypatch.setitem(sys.modules, "bare", importlib.util.module_from_spec(spec))
    with pytest.raises(ValueError, match=r"bare's __init__ imports no name under"):
        export_lazily("bare")
