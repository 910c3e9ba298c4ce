"""The code blocks of README.md and docs/, and how the snippet tests run them.

Every fenced block must name its language. ``python`` blocks are complete programs, run as
pasted in a fresh interpreter; a ``text`` block right after one is its printed output, matched
with doctest's rules (``...`` stands for any text, whitespace runs are equal). ``bash`` blocks
hold only commands the tests can check: ``pip install`` (of this clone's extras), ``nox``
sessions and ``recpack-ope`` commands.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
LANGUAGES = {"python", "bash", "text", "yaml", "toml"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\s`]*)[^\n]*$")
RECPACK = re.compile(r"^\s*(from|import)\s+(recpack\b|recpack_ope\.adapters\.recpack\b)", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and the output shown after it."""

    path: Path
    line: int
    lang: str
    text: str
    output: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def needs_recpack(self) -> bool:
        return bool(RECPACK.search(self.text))


def _fenced(path: Path) -> list[Block]:
    """The fenced blocks of one document; a text block that follows a python block with only
    blank lines between them is also that block's output."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i, closed = [], 0, -1
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
        block = Block(path, i + 1, match["lang"], "\n".join(body) + "\n")
        follows = (
            blocks
            and blocks[-1].lang == "python"
            and not any(line.strip() for line in lines[closed + 1 : i])
        )
        if block.lang == "text" and follows:
            last = blocks[-1]
            blocks[-1] = Block(last.path, last.line, last.lang, last.text, block.text)
        blocks.append(block)
        i, closed = end + 1, end
    return blocks


def code_blocks() -> list[Block]:
    """Every block of every document, each python block paired with the output after it."""
    return [block for path in DOCUMENTS for block in _fenced(path)]


def python_blocks(recpack: bool) -> list[Block]:
    return [b for b in code_blocks() if b.lang == "python" and b.needs_recpack == recpack]


def run_python(block: Block, cwd: Path) -> str:
    """Run the block as a program in a fresh interpreter; its stdout, or a failure naming it."""
    script = cwd / "snippet.py"
    script.write_text(block.text, encoding="utf-8")
    env = dict(os.environ, MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr[-3000:]}"
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
