"""The code blocks of README.md and docs/, and how the snippet tests run them.

Every fenced block must name its language. ``python`` blocks are complete programs, run as
pasted in a fresh interpreter, and every one is followed by the output it prints: a ``text``
block right after it (only blank lines, or one paragraph that starts with "prints", between
them), matched with doctest's rules (``...`` stands for any text, whitespace runs are equal;
keep it for text that changes from run to run, such as timings and paths). ``bash`` blocks
hold only commands the tests can check: ``pip install`` (of this clone's extras), ``nox``
sessions and ``recpack-ope`` commands.

Each python block runs in the environments it names, and in no other (excluded from the
others' parametrisation, never skipped). An HTML comment, which neither MkDocs nor GitHub
shows, names them::

    <!-- snippets: legacy -->

on the page's first line for every block of the page, or on its own line right before a
block (only blank lines between) for that block, which overrides the page's. The names:

* ``legacy``: numpy 1 with RecPack 0.3.6 and Cornac 2.2.2 (``tests/test_snippets.py`` in the
  legacy nox session);
* ``modern``: numpy 2 with the newest Cornac (``tests/test_snippets.py`` in the modern
  session);
* ``spark``: pyspark on a local Spark (``tests/spark/test_snippets_spark.py`` in the spark
  session).

A page whose output differs between numpy 1 and 2 or between Cornac versions names one of
them rather than hiding the difference behind ``...``. Unnamed blocks that import RecPack run
in ``legacy``, those that import pyspark or ``recpack_ope.spark`` in ``spark``, the others in
``legacy`` and ``modern``. The same comment may also say ``writes-files``: the rare program
that writes files or plots and shows no output block; it must still print a short line that
says what it wrote.
"""

from __future__ import annotations

import ast
import doctest
import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
LANGUAGES = {"python", "bash", "text", "yaml", "toml"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\s`]*)[^\n]*$")
RECPACK = re.compile(r"^\s*(from|import)\s+(recpack\b|recpack_ope\.adapters\.recpack\b)", re.M)
SPARK = re.compile(r"^\s*(from|import)\s+(pyspark\b|recpack_ope\.spark\b)", re.M)
MARKER = re.compile(r"^\s*<!--\s*snippets:(?P<words>[^>]*)-->\s*$")
ENVIRONMENTS = ("legacy", "modern", "spark")
WRITES_FILES = "writes-files"


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and the output shown after it."""

    path: Path
    line: int
    lang: str
    text: str
    output: str | None = None
    marker: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{where}:{self.line}"

    @property
    def environments(self) -> frozenset[str]:
        """The environments the block runs in: those its marker names, else by its imports."""
        named = frozenset(self.marker) & frozenset(ENVIRONMENTS)
        if named:
            return named
        if RECPACK.search(self.text):
            return frozenset({"legacy"})
        if SPARK.search(self.text):
            return frozenset({"spark"})
        return frozenset({"legacy", "modern"})

    @property
    def writes_files(self) -> bool:
        return WRITES_FILES in self.marker


def _marker(path: Path, line: int, text: str) -> tuple[str, ...]:
    """The words of a ``<!-- snippets: … -->`` comment, checked against the known ones."""
    match = MARKER.match(text)
    if not match:
        return ()
    words = tuple(match["words"].replace(",", " ").split())
    unknown = set(words) - {*ENVIRONMENTS, WRITES_FILES}
    if not words or unknown:
        raise AssertionError(
            f"{path.name}:{line}: a snippets comment names {sorted(unknown) or 'nothing'}; "
            f"known: {[*ENVIRONMENTS, WRITES_FILES]}"
        )
    return words


def _introduces_output(lines: list[str]) -> bool:
    """Whether the lines between a python block and a text block make the text its output:
    blank, or one paragraph that starts with "prints"."""
    text = "\n".join(lines).strip()
    return not text or (text.startswith("prints") and "\n\n" not in text)


def _fenced(path: Path) -> list[Block]:
    """The fenced blocks of one document, each python block with its marker (its own, else the
    page's) and its output (the text block that follows it, see the module's docstring)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = _marker(path, 1, lines[0]) if lines else ()
    blocks, i, closed, used = [], 0, -1, {0}
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, end = match["indent"], i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.name}:{i + 1}: code block is never closed")
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        before = [n for n in range(closed + 1, i) if lines[n].strip()]
        own = _marker(path, before[-1] + 1, lines[before[-1]]) if before and before[-1] else ()
        if own:
            used.add(before[-1])
        block = Block(path, i + 1, match["lang"], "\n".join(body) + "\n", marker=own or page)
        last = blocks[-1] if blocks else None
        if block.lang == "text" and last and last.lang == "python":
            if _introduces_output(lines[closed + 1 : i]):
                blocks[-1] = replace(last, output=block.text)
        blocks.append(block)
        i, closed = end + 1, end
    stray = [n + 1 for n, line in enumerate(lines) if MARKER.match(line) and n not in used]
    assert not stray, (
        f"{path.name}:{stray}: a snippets comment belongs on the first line or right before a block"
    )
    return blocks


def code_blocks() -> list[Block]:
    """Every block of every document, each python block paired with the output after it."""
    return [block for path in DOCUMENTS for block in _fenced(path)]


def environment() -> str:
    """The environment this interpreter is, for ``tests/test_snippets.py``: ``legacy`` with
    numpy 1, else ``modern``."""
    import numpy

    return "legacy" if int(numpy.__version__.split(".")[0]) < 2 else "modern"


def python_blocks(env: str) -> list[Block]:
    """The python blocks that run in the environment ``env``."""
    if env not in ENVIRONMENTS:
        raise ValueError(f"env must be one of {ENVIRONMENTS}, not {env!r}")
    return [b for b in code_blocks() if b.lang == "python" and env in b.environments]


def run_python(block: Block, cwd: Path) -> str:
    """Run the block as a program in a fresh interpreter; its stdout, or a failure naming it."""
    script = cwd / "snippet.py"
    script.write_text(block.text, encoding="utf-8")
    env = dict(os.environ, MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr[-3000:]}"
    if block.writes_files:
        assert done.stdout.strip(), f"{block.id} writes files: it must print what it wrote"
    if block.output is not None:
        checker = doctest.OutputChecker()
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        assert checker.check_output(block.output, done.stdout, flags), (
            f"{block.id} printed\n{done.stdout}\nbut the document shows\n{block.output}"
        )
    return done.stdout


def commands(block: Block) -> list[list[str]]:
    """The shell commands of a bash block: continuations joined, comments dropped, ``&&``
    chains split."""
    text = block.text.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1 :]
    return out


def extras() -> set[str]:
    """The extras this clone's package declares (read from the installed distribution)."""
    return set(importlib.metadata.metadata("recpack-ope").get_all("Provides-Extra"))


def nox_sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("session" in ast.unparse(d) for d in node.decorator_list)
    }
