"""The RecPack-only modules keep their public names (see test_public_api)."""

import pytest
from conftest import check_importable

PUBLIC = {
    "recpack_ope.studies.ndcg_disagreement": (
        "DisagreementConfig",
        "DisagreementResult",
        "PAPER",
        "PAPER_MODELS",
        "REFERENCE",
        "model_grid",
        "run_disagreement",
        "write_report",
    ),
    "recpack_ope.adapters.recpack": (
        "OPEMetricK",
        "RPPMetricK",
        "RecPackAdapter",
        "compare",
        "leaderboard",
        "metric_results",
        "preferences",
        "recpack_ranking",
        "summary",
    ),
    "recpack_ope.io.recpack_datasets": ("DATASETS", "load_interactions"),
    "recpack_ope.studies.recpack_models": ("recpack_pool",),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import(module):
    check_importable(module, PUBLIC[module])
