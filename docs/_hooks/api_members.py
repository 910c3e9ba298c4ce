"""MkDocs hook (docs only; the package does not use it): the public names on the API pages.

A subpackage's page holds the line ``<!-- public names of recpack_ope.metrics -->`` where its
public names go; this hook replaces it with one ``:::`` block per name of the subpackage's
``__all__``, functions first, then classes, then constants, each in ``__all__``'s order. The
page so always shows exactly the names ``__all__`` exports, under their defining module's
path (where cross-references point), and never opens on a helper. The line
``<!-- modules of recpack_ope.metrics -->`` becomes one block per public submodule, in the
order of the subpackage docstring's list (``* ``name`` – …``), then any it does not list.
"""

import importlib
import inspect
import pkgutil
import re

MARKER = re.compile(r"^<!-- (public names|modules) of ([\w.]+) -->$", re.M)
LISTED = re.compile(r"^\* ``(\w+)``", re.M)
OPTIONS = ("    options:", "      heading_level: 3", "      show_root_full_path: false")


def _public_names(package: str) -> str:
    module = importlib.import_module(package)
    groups: dict[str, list[str]] = {"Functions": [], "Classes": [], "Constants": []}
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            kind = "Classes" if inspect.isclass(obj) else "Functions"
            groups[kind].append(f"{obj.__module__}.{obj.__qualname__}")
        else:
            groups["Constants"].append(f"{package}.{name}")
    lines = []
    for title, paths in groups.items():
        if paths:
            lines += [f"## {title}", ""]
            for path in paths:
                lines += [f"::: {path}", *OPTIONS, "      show_root_heading: true", ""]
    return "\n".join(lines)


def _modules(package: str) -> str:
    module = importlib.import_module(package)
    found = [m.name for m in pkgutil.iter_modules(module.__path__) if not m.name.startswith("_")]
    listed = [name for name in LISTED.findall(module.__doc__ or "") if name in found]
    lines = []
    for name in [*listed, *sorted(set(found) - set(listed))]:
        lines += [f"::: {package}.{name}", "    options:", "      heading_level: 3"]
        lines += ["      show_root_heading: true", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    def blocks(match: re.Match) -> str:
        what, package = match.groups()
        return _public_names(package) if what == "public names" else _modules(package)

    return MARKER.sub(blocks, markdown)
