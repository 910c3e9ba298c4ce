"""The public API of the flat layout stays importable, and the subpackages are layered.

``PUBLIC`` lists, per module path users had before the move into subpackages, the public
names it offered; every one must still import from that path. Modules that need RecPack are
checked in ``tests/adapters/recpack/test_public_api_recpack.py``.
"""

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest
from conftest import check_importable

PUBLIC = {
    "recpack_ope": (
        "Comparison",
        "CustomDiscount",
        "DeterministicRanker",
        "Disagreement",
        "Discount",
        "EstimateResult",
        "ExponentialDiscount",
        "Exposure",
        "FeedLog",
        "FixedPropensity",
        "LogDiscount",
        "LoggedEstimate",
        "LoggedRanking",
        "PairedEstimate",
        "PlackettLuceRanker",
        "PopularityPropensity",
        "PositionBiasEM",
        "PowerLawPropensity",
        "PreferenceMatrix",
        "ReciprocalDiscount",
        "ShuffledPositionBias",
        "SimpsonsParadoxReport",
        "StratifiedResult",
        "Stratum",
        "SystemScores",
        "TopK",
        "agreement",
        "counterfactual_disagreement",
        "dcg",
        "disagreement_probability",
        "discriminative_power",
        "ideal_dcg",
        "item_counts",
        "load_movielens_100k",
        "logged_dcg",
        "ndcg",
        "paired_t_tests",
        "pairwise_disagreement",
        "pn_dcg",
        "preference_matrix",
        "randomised_tukey_hsd",
        "recall",
        "rpp",
        "simpsons_paradox",
        "steiger_test",
        "steiger_z",
        "stratified",
        "unbiased_dcg",
        "win_rates",
        "dr_dcg",
        "logged_dr_dcg",
        "RewardMatrix",
        "CalibratedScores",
        "ScoreCalibration",
        "adjust_p_values",
        "tied_with_best",
        "TiedWithBest",
        "holdout_split",
    ),
    "recpack_ope.aggregation": ("METHODS", "borda", "majority", "mc4", "order"),
    "recpack_ope.banner_marginals": (
        "MAX_EXACT",
        "banner_rank_marginals",
        "exact_marginals",
        "sampled_banner_rank_marginals",
    ),
    "recpack_ope.baselines": ("EASE", "ItemKNN", "Popularity", "RandomScores"),
    "recpack_ope.cli": ("build_parser", "main"),
    "recpack_ope.datasets": (
        "GROUPLENS_ML100K_URL",
        "Interactions",
        "default_cache_dir",
        "load_movielens_100k",
    ),
    "recpack_ope.dcg": ("dcg", "ideal_dcg", "ndcg", "pn_dcg", "unbiased_dcg"),
    "recpack_ope.demo": (
        "DemoConfig",
        "DemoResult",
        "EASE_GRID",
        "KNN_GRID",
        "MetricSummary",
        "REFERENCE",
        "model_pool",
        "run_demo",
        "write_report",
    ),
    "recpack_ope.disagreement_study": (
        "BannerStudyConfig",
        "BannerStudyResult",
        "run_banner_study",
        "simulate_banners",
        "write_report",
    ),
    "recpack_ope.discount": (
        "CustomDiscount",
        "Discount",
        "ExponentialDiscount",
        "LogDiscount",
        "ReciprocalDiscount",
    ),
    "recpack_ope.feed_log": ("FeedLog", "find_keys"),
    "recpack_ope.logged_dcg": ("logged_dcg",),
    "recpack_ope.pairwise_disagreement": (
        "Disagreement",
        "counterfactual_disagreement",
        "pairwise_disagreement",
    ),
    "recpack_ope.plackett_luce": ("exposure", "rank_marginals", "sample_rankings"),
    "recpack_ope.policies": (
        "DeterministicRanker",
        "Exposure",
        "LoggedRanking",
        "PlackettLuceRanker",
    ),
    "recpack_ope.position_bias": ("PositionBiasEM", "ShuffledPositionBias"),
    "recpack_ope.propensity": (
        "FixedPropensity",
        "PopularityPropensity",
        "PowerLawPropensity",
        "entry_propensities",
        "ips_weights",
        "item_counts",
    ),
    "recpack_ope.ranking": ("ScoreSource", "TopK", "padded_rows", "top_k_positions"),
    "recpack_ope.recall": ("recall",),
    "recpack_ope.result": (
        "Comparison",
        "EstimateResult",
        "LoggedEstimate",
        "PairedEstimate",
        "t_test_p_value",
    ),
    "recpack_ope.rpp": (
        "PreferenceMatrix",
        "RecallLevels",
        "WEIGHTINGS",
        "preference_matrix",
        "rpp",
        "win_rates",
    ),
    "recpack_ope.rpp_power": (
        "PAPER_ML1M",
        "RPPPowerConfig",
        "RPPPowerResult",
        "model_pool",
        "run_rpp_power",
        "write_report",
    ),
    "recpack_ope.sensitivity": (
        "SensitivityConfig",
        "SensitivityResult",
        "run_sensitivity",
        "write_report",
    ),
    "recpack_ope.significance": (
        "DiscriminativePower",
        "PairwiseTests",
        "TESTS",
        "discriminative_power",
        "paired_t_tests",
        "randomised_tukey_hsd",
    ),
    "recpack_ope.simpsons_paradox": ("ParadoxRow", "SimpsonsParadoxReport", "simpsons_paradox"),
    "recpack_ope.simulation": (
        "LoggedFeedback",
        "PopularityPolicy",
        "SimulatedWorld",
        "UniformPolicy",
    ),
    "recpack_ope.stats": (
        "MetricAgreement",
        "SteigerResult",
        "agreement",
        "disagreement_probability",
        "steiger_test",
        "steiger_z",
    ),
    "recpack_ope.stratified": (
        "BINNINGS",
        "StratifiedResult",
        "Stratum",
        "stratified",
        "stratum_index",
    ),
    "recpack_ope.systems": ("SystemScores",),
    "recpack_ope.trec": ("TrecCollection", "read_trec", "run_name"),
    "recpack_ope.adapters.cornac": (
        "CornacAdapter",
        "IPSNDCG",
        "OPEMetric",
        "PostNormalisedDCG",
        "PropensityStratifiedEvaluation",
        "StratifiedModelResult",
        "UnbiasedDCG",
        "add_rpp",
        "item_counts",
        "rank_test_users",
        "simpsons_paradox",
    ),
    "recpack_ope.adapters.simpsons_table2": (
        "PAPER",
        "Table2Config",
        "Table2Result",
        "load_triplets",
        "run_table2",
        "write_report",
    ),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import(module):
    check_importable(module, PUBLIC[module])


def test_old_paths_keep_their_attributes_and_specs():
    import recpack_ope

    # Unshadowed old modules are attributes of the package, as before the move.
    assert recpack_ope.datasets is importlib.import_module("recpack_ope.io.movielens")
    assert recpack_ope.trec is importlib.import_module("recpack_ope.io.trec")
    # Same-named functions are not rebound by importing the old module path.
    importlib.import_module("recpack_ope.dcg")
    assert callable(recpack_ope.dcg) and recpack_ope.dcg.__module__ == "recpack_ope.metrics.dcg"
    # The module keeps its own spec, so reloading and introspection see the real file.
    trec = importlib.import_module("recpack_ope.trec")
    assert trec.__spec__.name == "recpack_ope.io.trec"
    assert importlib.reload(trec) is trec


def test_unknown_attribute_still_raises():
    import recpack_ope.adapters

    import recpack_ope

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        recpack_ope.nonexistent  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        recpack_ope.adapters.nonexistent  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("recpack_ope.nonexistent")


# Each subpackage may import only lower levels (and the package's private helpers).
LEVEL = {
    "inference": 0,
    "propensity": 0,
    # reward models take propensities (ScoreCalibration aligns them like the estimators do)
    "reward": 1,
    "metrics": 2,
    "logged": 3,
    "simulation": 4,
    "io": 5,
    "adapters": 5,
    # the Spark engine moves data to metrics/logged and merges their statistics
    "spark": 5,
    "studies": 6,
    "cli": 7,
}


def _package_imports(path: Path, module: str) -> set[str]:
    """Top-level parts of ``recpack_ope`` that a module imports, anywhere in its body."""
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
                targets = [target] if node.module else [base + [a.name] for a in node.names]
            else:
                targets = [(node.module or "").split(".")]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        else:
            continue
        for target in targets:
            if target[0] == "recpack_ope" and len(target) > 1:
                found.add(target[1])
    return found


def test_layers_point_down():
    root = Path(importlib.util.find_spec("recpack_ope").origin).parent
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] not in LEVEL:
            continue  # the package facade, __main__ and private helpers
        module = ".".join(("recpack_ope", *parts))
        for target in _package_imports(path, module):
            if target.startswith("_") or target == parts[0]:
                continue
            if target not in LEVEL or LEVEL[target] >= LEVEL[parts[0]]:
                wrong.append(f"{module} imports recpack_ope.{target}")
    assert not wrong, wrong
    adapters = {p.name for p in (root / "adapters").glob("*.py")}
    assert adapters == {"__init__.py", "recpack.py", "cornac.py"}
