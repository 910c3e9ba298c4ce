"""The public names of the package, its layers, and the absence of import cycles.

``PUBLIC`` lists the exact ``__all__`` of the top level (a starting kit: the estimators, the
discounts, the propensity models, the result types) and of each core subpackage; every name
must import from there. Everything else is imported from the subpackage or module that holds
it: the old module paths of the flat layout (``recpack_ope.dcg``, ``recpack_ope.datasets``, …)
are gone, with no compatibility layer. The framework adapters' names are checked in their own
tests (``tests/adapters/``).

The layering and cycle checks read the source with ``ast``, so they see every import, also
those inside functions (deferred imports of optional frameworks), but not those under
``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest
from conftest import REPOSITORY, check_importable, repository_lines

import recpack_ope

ESTIMATORS = (
    "dcg",
    "ndcg",
    "pn_dcg",
    "recall",
    "ips_dcg",
    "snips_dcg",
    "ips_ndcg",
    "ips_pn_dcg",
    "ips_recall",
    "dr_dcg",
    "logged_dcg",
    "stratified",
    "rpp",
)
DISCOUNTS = ("LogDiscount", "ExponentialDiscount", "ReciprocalDiscount", "CustomDiscount")
PROPENSITIES = ("PowerLawPropensity", "PopularityPropensity", "FixedPropensity")
RESULTS = ("EstimateResult", "LoggedEstimate", "Comparison", "ReliabilityWarning")

PUBLIC = {
    "recpack_ope": (
        *ESTIMATORS,
        *DISCOUNTS,
        *PROPENSITIES,
        *RESULTS,
        "leaderboard",
        "Leaderboard",
        "load_movielens_100k",
        "holdout_split",
    ),
    "recpack_ope.inference": (
        "EstimateResult",
        "LoggedEstimate",
        "PairedEstimate",
        "Comparison",
        "Moments",
        "SummaryEstimate",
        "WeightDiagnostics",
        "PropensityCalibration",
        "ReliabilityWarning",
        "ClipSelection",
        "SystemScores",
        "PreferenceMatrix",
        "PairwiseTests",
        "paired_t_tests",
        "randomised_tukey_hsd",
        "DiscriminativePower",
        "discriminative_power",
        "adjust_p_values",
        "TiedWithBest",
        "tied_with_best",
        "order",
        "mc4",
        "borda",
        "majority",
        "MetricAgreement",
        "agreement",
        "disagreement_probability",
        "SteigerResult",
        "steiger_test",
        "steiger_z",
        "Leaderboard",
        "leaderboard",
    ),
    "recpack_ope.propensity": (
        "PowerLawPropensity",
        "PopularityPropensity",
        "FixedPropensity",
        "item_counts",
        "PropensityFitReport",
        "entry_propensities",
        "ips_weights",
        "Discount",
        "LogDiscount",
        "ExponentialDiscount",
        "ReciprocalDiscount",
        "CustomDiscount",
    ),
    "recpack_ope.reward": ("CalibratedScores", "RewardMatrix", "RewardModel", "ScoreCalibration"),
    "recpack_ope.metrics": (
        "dcg",
        "ndcg",
        "pn_dcg",
        "ips_dcg",
        "snips_dcg",
        "ips_ndcg",
        "ips_pn_dcg",
        "ideal_dcg",
        "dr_dcg",
        "recall",
        "ips_recall",
        "TopK",
        "stratified",
        "StratifiedResult",
        "Stratum",
        "simpsons_paradox",
        "SimpsonsParadoxReport",
        "rpp",
        "preference_matrix",
        "win_rates",
        "RecallLevels",
    ),
    "recpack_ope.logged": (
        "FeedLog",
        "logged_dcg",
        "logged_dr_dcg",
        "standard_ips",
        "cascade_ips",
        "independent_ips",
        "adaptive_ips",
        "select_behavior",
        "BehaviorSelection",
        "choose_estimator",
        "EstimatorChoice",
        "EstimatorRow",
        "cascade_dr",
        "pseudo_inverse",
        "LoggedRanking",
        "DeterministicRanker",
        "PlackettLuceRanker",
        "ThompsonSamplingRanker",
        "Exposure",
        "rank_marginals",
        "exposure",
        "sample_rankings",
        "ShuffledPositionBias",
        "PositionBiasEM",
        "banner_rank_marginals",
        "sampled_banner_rank_marginals",
        "Disagreement",
        "pairwise_disagreement",
        "counterfactual_disagreement",
    ),
    "recpack_ope.simulation": (
        "SimulatedWorld",
        "PopularityPolicy",
        "UniformPolicy",
        "PersonalisedPolicy",
        "AffinityPolicy",
        "LoggedFeedback",
        "WorldRelevance",
        "Popularity",
        "RandomScores",
        "ItemKNN",
        "EASE",
    ),
    "recpack_ope.io": (
        "load_movielens_100k",
        "Interactions",
        "holdout_split",
        "read_table",
        "held_out_tables",
        "feed_log_tables",
        "HeldOutTables",
        "FeedLogTables",
        "read_trec",
        "TrecCollection",
        "run_name",
        "load_open_bandit",
        "load_bts_prior",
        "OpenBanditLog",
    ),
    "recpack_ope.registry": (
        "DEFAULT",
        "ESTIMATORS",
        "OPTIONS",
        "Estimator",
        "default",
        "estimand_table",
        "estimator",
        "feed_log_table",
        "markdown_table",
        "names",
    ),
    "recpack_ope.evaluation": (
        "ESS_ROW",
        "EstimatorInputs",
        "FileEvaluation",
        "RPPReport",
        "ReportMetric",
        "StrataReport",
        "evaluate_files",
        "rpp_report",
        "strata_report",
    ),
}

#: Modules whose names are listed next to their code (the studies): every name of their
#: ``__all__`` imports. The Spark engine's names are listed in
#: tests/spark/test_spark_public_names.py, which runs where pyspark is installed.
OTHERS = ("recpack_ope.studies",)

#: Module paths of the earlier flat layout; none of them imports any more.
OLD_PATHS = (
    "recpack_ope._moved",
    "recpack_ope.result",
    "recpack_ope.significance",
    "recpack_ope.aggregation",
    "recpack_ope.systems",
    "recpack_ope.stats",
    "recpack_ope.discount",
    "recpack_ope.ranking",
    "recpack_ope.dcg",
    "recpack_ope.recall",
    "recpack_ope.stratified",
    "recpack_ope.rpp",
    "recpack_ope.simpsons_paradox",
    "recpack_ope.feed_log",
    "recpack_ope.policies",
    "recpack_ope.plackett_luce",
    "recpack_ope.banner_marginals",
    "recpack_ope.logged_dcg",
    "recpack_ope.position_bias",
    "recpack_ope.pairwise_disagreement",
    "recpack_ope.baselines",
    "recpack_ope.datasets",
    "recpack_ope.trec",
    "recpack_ope.demo",
    "recpack_ope.rpp_power",
    "recpack_ope.sensitivity",
    "recpack_ope.disagreement_study",
    "recpack_ope.adapters.recpack_datasets",
    "recpack_ope.adapters.recpack_models",
    "recpack_ope.adapters.ndcg_disagreement",
    "recpack_ope.adapters.simpsons_table2",
)


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_are_exactly_the_listed_ones(module):
    imported = importlib.import_module(module)
    listed = list(imported.__all__)
    assert len(listed) == len(set(listed)), f"{module}.__all__ repeats a name"
    assert sorted(listed) == sorted(PUBLIC[module])
    check_importable(module, PUBLIC[module])


@pytest.mark.parametrize("module", OTHERS)
def test_listed_names_import(module):
    imported = importlib.import_module(module)
    assert len(imported.__all__) == len(set(imported.__all__)), f"{module}.__all__ repeats a name"
    check_importable(module, imported.__all__)


def test_top_level_is_a_starting_kit():
    assert len(recpack_ope.__all__) <= 30
    assert isinstance(recpack_ope.__version__, str)
    # Each top-level name is the very object its subpackage exports.
    homes = [m for m in PUBLIC if m != "recpack_ope"]
    for name in recpack_ope.__all__:
        owners = [m for m in homes if name in PUBLIC[m]]
        assert owners, f"{name} is exported by no subpackage"
        for owner in owners:
            assert getattr(importlib.import_module(owner), name) is getattr(recpack_ope, name)


def test_no_compatibility_layer():
    assert importlib.util.find_spec("recpack_ope._moved") is None
    assert not hasattr(recpack_ope, "__getattr__")  # no module-level hook either


@pytest.mark.parametrize("module", OLD_PATHS)
def test_old_module_paths_are_gone(module):
    with pytest.raises(ModuleNotFoundError, match=module.replace(".", r"\.")):
        importlib.import_module(module)


def test_unknown_attribute_raises():
    with pytest.raises(AttributeError, match="nonexistent"):
        recpack_ope.nonexistent  # noqa: B018
    with pytest.raises(AttributeError):
        recpack_ope.SystemScores  # noqa: B018  (imported from recpack_ope.inference)


# --- the module import graph -------------------------------------------------------------------


def _sources() -> dict[str, Path]:
    """Every module of the package, by dotted name, from the source folders (the adapters live
    in the repository's top-level ``adapters/`` folder and install as ``recpack_ope.adapters``).
    """
    folders = {
        "recpack_ope": Path(importlib.util.find_spec("recpack_ope").origin).parent,
        "recpack_ope.adapters": Path(
            importlib.util.find_spec("recpack_ope.adapters").submodule_search_locations[0]
        ),
    }
    modules = {}
    for package, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "recpack_ope" and parts[0] == "adapters":
                continue  # an installed copy: the adapters are read from their own folder
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _runtime_nodes(tree: ast.AST):
    """Every node of the module except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that ``module`` imports, anywhere in its body.

    ``from package import name`` is an import of the submodule ``package.name`` when there is
    one, else of ``package`` itself (its ``__init__``). Importing a module also runs the
    ``__init__`` of each package above it; those edges are added, except for packages that
    hold ``module`` itself (they are already being imported when it runs).
    """
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    edges = set()
    for target in found:
        if target not in modules:
            continue  # another distribution, or an attribute of a module
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            is_ancestor = module == name or module.startswith(name + ".")
            if name in modules and name != module and (i == len(parts) or not is_ancestor):
                edges.add(name)
    return edges


GRAPH = {module: _imports(module, path, _sources()) for module, path in _sources().items()}


def test_the_graph_sees_the_package():
    assert {"recpack_ope", "recpack_ope.registry", "recpack_ope.adapters.cornac"} <= set(GRAPH)
    assert "recpack_ope.inference.result" in GRAPH["recpack_ope.metrics.dcg"]
    assert "recpack_ope.inference" in GRAPH["recpack_ope.metrics.dcg"]  # its __init__ runs too
    # A deferred import inside a function counts: the CLI imports the Spark engine on use.
    assert "recpack_ope.spark" in GRAPH["recpack_ope.cli"]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_modules():
    # Acyclic over every import that can run, deferred ones included: a deferred import is
    # still a dependency, and a cycle through one breaks as soon as it moves to the top.
    assert not _cycles(GRAPH), _cycles(GRAPH)


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# --- layers ------------------------------------------------------------------------------------

#: Each part of the package may import only lower levels, and the package's private helpers
#: (``_validation``, ``_chunks``, …), which import none of them. The adapters may import
#: everything but the studies and the CLI.
LEVEL = {
    "_": -1,
    "inference": 0,
    "propensity": 1,
    # reward models take propensities (ScoreCalibration aligns them like the estimators do)
    "reward": 2,
    "metrics": 3,
    "logged": 4,
    "simulation": 5,
    "io": 6,
    # the package facade: the starting kit, re-exported from io and below
    "": 6.5,
    "registry": 7,
    # many registry estimators at once: the inputs they share, the stratified report
    "evaluation": 7.5,
    # the Spark engine moves data to metrics/logged and merges their statistics
    "spark": 8,
    "adapters": 8.5,
    "studies": 9,
    "cli": 10,
    "__main__": 11,
}


def _part(module: str) -> str:
    """The layer of a module: its subpackage, ``registry``, ``cli`` or ``__main__``; ``""`` for
    the package facade (``recpack_ope/__init__.py``), ``"_"`` for a private helper."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] != "__main__" and parts[0].startswith("_"):
        return "_"
    return parts[0]


def test_layers_point_down():
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _part(target) != _part(module) and LEVEL[_part(target)] >= LEVEL[_part(module)]
    ]
    assert not wrong, wrong
    assert set(map(_part, GRAPH)) == set(LEVEL)


def test_adapters_are_one_module_per_framework():
    adapters = {m for m in GRAPH if m.startswith("recpack_ope.adapters")}
    assert adapters == {
        "recpack_ope.adapters",
        "recpack_ope.adapters.recpack",
        "recpack_ope.adapters.cornac",
    }


# --- what the documents and sources name ------------------------------------------------------

DOTTED = re.compile(r"(?<![\w.])recpack_ope\.([A-Za-z_]\w*)")


def test_every_dotted_name_exists():
    # ``recpack_ope.X`` in a page, a docstring or a test is a top-level name or a subpackage,
    # never an old module path or a name that now lives in a subpackage.
    known = {*recpack_ope.__all__, "adapters"}
    known |= {m.name for m in pkgutil.iter_modules(recpack_ope.__path__)}
    wrong = [
        f"{path.relative_to(REPOSITORY)}:{n}: recpack_ope.{match[1]}"
        for path, n, line in repository_lines(__file__)
        for match in DOTTED.finditer(line)
        if match[1] not in known and not match[1].startswith("__")
    ]
    assert not wrong, "\n".join(wrong)
