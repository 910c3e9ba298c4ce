"""The nDCG-disagreement reproduction's progress bar (the other studies' are in
tests/studies/test_progress.py).

Needs RecPack (legacy environment); the modern nox session excludes this folder explicitly.
"""

from __future__ import annotations

import pytest
from conftest import record_bars

from recpack_ope.studies import ndcg_disagreement

pytestmark = pytest.mark.usefixtures("quiet_recpack")


def test_ndcg_disagreement_bar_counts_models_and_leaves_the_pipeline_whole(monkeypatch, capsys):
    bars = record_bars(monkeypatch, ndcg_disagreement)
    config = ndcg_disagreement.DisagreementConfig(dataset="synthetic", n_models=6, K=20)
    result = ndcg_disagreement.run_disagreement(config)
    err = capsys.readouterr().err
    assert "it/s" not in err and "%|" not in err, err
    (bar,) = bars
    assert bar.total == 6 and len(result.values) == 6  # one step per trained model
    # RecPack's own list of algorithms is back in place after the run.
    assert isinstance(result.pipeline.algorithm_entries, list)
    assert len(result.pipeline.algorithm_entries) == 6
