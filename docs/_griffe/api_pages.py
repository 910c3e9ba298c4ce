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
* Show each module's public names, functions first. mkdocs.yml keeps to ``__all__``
  (``filters: public``) in its order; here each ``__all__`` is reordered (functions, classes, the
  rest) and a name a package re-exports from its own submodule is shown once, at the top of the
  package's page, not again in the submodule's section.
"""

import re
from pathlib import Path

import griffe

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const):`([^`]+)`")
LITERAL_MARKER = re.compile(r"(\S)?( ?)::$", re.M)
TABLE_BORDER = re.compile(r"^=+ +=+ *$")  # two-column tables, the only kind used
KIND_RANK = {"function": 0, "class": 1}  # then attributes and modules


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


def _kind_rank(module: griffe.Module, name: str) -> int:
    try:
        return KIND_RANK.get(module.members[name].kind.value, len(KIND_RANK))
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return len(KIND_RANK)


def _exported(module: griffe.Module, name: str) -> griffe.Object | None:
    """The object ``module`` exports as ``name``: the target of an alias, or the submodule's
    same-named member when a re-exported name is also a submodule's (``metrics.dcg``)."""
    member = module.members.get(name)
    try:
        if member is not None and member.is_alias:
            return member.final_target
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    if member is not None and member.is_module and name in member.members:
        return _exported(member, name) if member.members[name].is_alias else member[name]
    return member


def _public_first(module: griffe.Module) -> None:
    for submodule in module.modules.values():
        if not submodule.is_alias:
            _public_first(submodule)
    if not module.exports:
        return
    names = sorted((str(name) for name in module.exports), key=lambda n: _kind_rank(module, n))
    module.exports = names
    for name in names:
        member, target = module.members.get(name), _exported(module, name)
        if member is not None and member.is_alias:
            member.public = True  # else it would follow its target, hidden below
        if target is not None and target.parent is not None and target.parent.parent is module:
            target.public = False


class ApiPages(griffe.Extension):
    """Attach ``adapters/`` to ``recpack_ope``, render the docstrings' reST bits and order the
    public names."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.name != "recpack_ope":
            return
        if "adapters" not in pkg.members:
            # Griffe has no public call that loads a folder under a given parent package.
            adapters = loader._load_module("adapters", ADAPTERS_DIR / "__init__.py", parent=pkg)
            pkg.set_member("adapters", adapters)
        _plain_rest(pkg)
        _public_first(pkg)
