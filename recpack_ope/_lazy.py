"""Public names of a package, imported from their submodules on first use.

``import recpack_ope`` (or any of its subpackages) then imports none of the package's modules,
and a name imports only its own module, whose heavy dependencies (scipy.stats, scikit-learn,
pandas) are imported by the functions that use them (docs/performance.md). A package's
``__init__`` lists its public names as relative imports under ``if TYPE_CHECKING:`` (read by
type checkers and the API docs, never run) and calls :func:`export_lazily`, which makes each of
them an attribute that imports its submodule when first read. ``from package import name``,
``package.name``, ``dir(package)`` and ``__all__`` work as with eager imports, and so does a
name that is also a submodule's (``recpack_ope.metrics.rpp`` is the function even after the
module ``recpack_ope.metrics.rpp`` is imported).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from pathlib import Path

_UNSET = object()


class _Export:
    """A package attribute read from its home module (``module``, ``name``) on first access."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name, self.value = module, name, _UNSET

    def __get__(self, package: types.ModuleType | None, owner: type | None = None):
        if package is None:
            return self
        if self.value is _UNSET:
            self.value = getattr(importlib.import_module(self.module), self.name)
        return self.value

    def __set__(self, package: types.ModuleType, value) -> None:
        # The import system binds each loaded submodule on its package: a public name that is
        # also a submodule's name keeps meaning the public object, as with eager imports.
        submodule = f"{package.__name__}.{self.name}"
        if not (isinstance(value, types.ModuleType) and value.__name__ == submodule):
            self.value = value

    def __delete__(self, package: types.ModuleType) -> None:
        self.value = _UNSET  # read from the home module again (undoes a monkeypatch)


def type_checking_imports(package: str) -> dict[str, tuple[str, str]]:
    """Public name → (home module, name there) of the relative imports under
    ``if TYPE_CHECKING:`` in the source of ``package``'s ``__init__``.

    Examples
    --------
    >>> type_checking_imports("recpack_ope")["dcg"]
    ('recpack_ope.metrics.dcg', 'dcg')
    """
    tree = ast.parse(Path(sys.modules[package].__file__).read_text(encoding="utf-8"))
    exports = {}
    for block in tree.body:
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING":
            for node in block.body:
                if isinstance(node, ast.ImportFrom) and node.level:
                    home = importlib.util.resolve_name(
                        "." * node.level + (node.module or ""), package
                    )
                    for alias in node.names:
                        exports[alias.asname or alias.name] = (home, alias.name)
    return exports


def export_lazily(package: str) -> None:
    """Make the names ``package``'s ``__init__`` imports under ``if TYPE_CHECKING:`` lazy
    attributes of the package: each imports its home module when first read.

    Examples
    --------
    >>> import importlib
    >>> import recpack_ope.metrics.rpp  # binds the submodule on its package, which ignores it
    >>> recpack_ope.metrics.rpp is importlib.import_module("recpack_ope.metrics.rpp").rpp
    True
    """
    exports = type_checking_imports(package)
    if not exports:
        raise ValueError(f"{package}'s __init__ imports no name under `if TYPE_CHECKING:`")
    module = sys.modules[package]
    attributes = {name: _Export(home, attr) for name, (home, attr) in exports.items()}

    def __dir__(self) -> list[str]:
        return sorted({*vars(self), *exports})

    module.__class__ = type("LazyPackage", (types.ModuleType,), {**attributes, "__dir__": __dir__})
