"""Griffe extension for the API pages (docs only; the package does not use it).

* Load ``adapters/`` as ``recpack_ope.adapters``. The adapters live in the repository's
  top-level ``adapters/`` folder and are installed as ``recpack_ope.adapters``
  (``[tool.setuptools.package-dir]`` in pyproject.toml). Griffe reads the source tree, where
  ``recpack_ope/`` has no ``adapters`` subpackage, so ``adapters/`` is visited with
  ``recpack_ope`` as its parent: identifiers and relative imports (``from ..metrics import …``)
  then read as in an installed copy.
* Render the reStructuredText bits some docstrings use, as Sphinx would display them:
  roles (``:func:`~recpack_ope.metrics.dcg.dcg``` → ``dcg`` in code font), the ``::`` that
  introduces a literal block, and simple tables (``=====  =====`` borders) as Markdown tables.
  MkDocs would otherwise print them verbatim.
"""

import re
from pathlib import Path

import griffe

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const):`([^`]+)`")
LITERAL_MARKER = re.compile(r"(\S)?( ?)::$", re.M)
TABLE_BORDER = re.compile(r"^=+ +=+ *$")  # two-column tables, the only kind used


def _displayed(match: re.Match) -> str:
    target = match.group(1)
    if target.startswith("~"):
        target = target.rsplit(".", 1)[-1]
    return f"`{target.lstrip('.')}`"


def _literal_marker(match: re.Match) -> str:
    # "text::" shows as "text:", "text ::" as "text", a lone "::" disappears (Sphinx's rules).
    return f"{match.group(1)}:" if match.group(1) and not match.group(2) else (match.group(1) or "")


def _markdown_tables(text: str) -> str:
    """Two-column simple reST tables (border, rows, border; a row continues while its first
    cell is blank) as Markdown tables with an empty header."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        end = next((j for j in range(i + 1, len(lines)) if TABLE_BORDER.match(lines[j])), None)
        if not TABLE_BORDER.match(lines[i]) or end is None:
            out.append(lines[i])
            i += 1
            continue
        split = lines[i].index(" ")  # where the first column's border ends
        rows = []
        for line in lines[i + 1 : end]:
            first, rest = line[:split].strip(), line[split:].strip()
            if first or not rows:
                rows.append([first, rest])
            else:
                rows[-1][1] = f"{rows[-1][1]} {rest}"
        out += ["| | |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)]
        i = end + 1
    return "\n".join(out)


def _plain_rest(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        text = SPHINX_ROLE.sub(_displayed, obj.docstring.value)
        obj.docstring.value = _markdown_tables(LITERAL_MARKER.sub(_literal_marker, text))
    for member in obj.members.values():
        if not member.is_alias:
            _plain_rest(member)


class ApiPages(griffe.Extension):
    """Attach ``adapters/`` to ``recpack_ope`` and render the docstrings' reST bits."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.name != "recpack_ope":
            return
        if "adapters" not in pkg.members:
            # Griffe has no public call that loads a folder under a given parent package.
            adapters = loader._load_module("adapters", ADAPTERS_DIR / "__init__.py", parent=pkg)
            pkg.set_member("adapters", adapters)
        _plain_rest(pkg)
