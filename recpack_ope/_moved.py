"""Old module paths of the flat layout, kept importable after the move into subpackages.

``import recpack_ope.dcg`` or ``from recpack_ope.adapters.recpack_datasets import
load_interactions`` keep working: each old path is the same module object as its new home,
so attributes, monkeypatching and ``isinstance`` behave exactly as before. Modules the
package imports anyway are registered when ``recpack_ope`` is imported (so that an old path
never rebinds a same-named function such as ``recpack_ope.dcg``); the others, which may need
optional frameworks, are imported on first use by a finder.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

MOVED = {
    "recpack_ope.result": "recpack_ope.inference.result",
    "recpack_ope.significance": "recpack_ope.inference.significance",
    "recpack_ope.aggregation": "recpack_ope.inference.aggregation",
    "recpack_ope.systems": "recpack_ope.inference.systems",
    "recpack_ope.stats": "recpack_ope.inference.agreement",
    "recpack_ope.discount": "recpack_ope.propensity.discount",
    "recpack_ope.ranking": "recpack_ope.metrics.ranking",
    "recpack_ope.dcg": "recpack_ope.metrics.dcg",
    "recpack_ope.recall": "recpack_ope.metrics.recall",
    "recpack_ope.stratified": "recpack_ope.metrics.stratified",
    "recpack_ope.rpp": "recpack_ope.metrics.rpp",
    "recpack_ope.simpsons_paradox": "recpack_ope.metrics.simpsons_paradox",
    "recpack_ope.feed_log": "recpack_ope.logged.feed_log",
    "recpack_ope.policies": "recpack_ope.logged.policies",
    "recpack_ope.plackett_luce": "recpack_ope.logged.plackett_luce",
    "recpack_ope.banner_marginals": "recpack_ope.logged.banner_marginals",
    "recpack_ope.logged_dcg": "recpack_ope.logged.logged_dcg",
    "recpack_ope.position_bias": "recpack_ope.logged.position_bias",
    "recpack_ope.pairwise_disagreement": "recpack_ope.logged.pairwise_disagreement",
    "recpack_ope.baselines": "recpack_ope.simulation.baselines",
    "recpack_ope.datasets": "recpack_ope.io.movielens",
    "recpack_ope.trec": "recpack_ope.io.trec",
    "recpack_ope.demo": "recpack_ope.studies.demo",
    "recpack_ope.rpp_power": "recpack_ope.studies.rpp_power",
    "recpack_ope.sensitivity": "recpack_ope.studies.sensitivity",
    "recpack_ope.disagreement_study": "recpack_ope.studies.disagreement",
    "recpack_ope.adapters.recpack_datasets": "recpack_ope.io.recpack_datasets",
    "recpack_ope.adapters.recpack_models": "recpack_ope.studies.recpack_models",
    "recpack_ope.adapters.ndcg_disagreement": "recpack_ope.studies.ndcg_disagreement",
    "recpack_ope.adapters.simpsons_table2": "recpack_ope.studies.simpsons_paradox",
}


class _OldPath(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import an old path as its new module (the module object itself, not a copy)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        # The import system stamps the alias spec on the module it gets; keep the real one.
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Register the old paths: those already imported at once, the rest through a finder."""
    if not any(isinstance(finder, _OldPath) for finder in sys.meta_path):
        sys.meta_path.append(_OldPath())
    for old, new in MOVED.items():
        if new in sys.modules:
            sys.modules.setdefault(old, sys.modules[new])


def old_module(package: str, name: str):
    """Module-level ``__getattr__`` helper: ``package.name`` as an attribute of an old path."""
    if f"{package}.{name}" not in MOVED:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")
