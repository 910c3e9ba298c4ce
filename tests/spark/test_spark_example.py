"""The Spark example gives the in-memory core's numbers on MovieLens-100K."""

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_movielens.py"


def test_spark_example_equals_in_memory(spark, capsys):
    out = runpy.run_path(str(EXAMPLE))["main"](["--users", "200", "--depth", "50"])
    assert set(out) == {"dcg", "ndcg", "pn_dcg", "ips_dcg"}
    for metric, models in out.items():
        assert set(models) == {"popularity", "item-kNN"}
        for ours, theirs in models.values():
            assert ours == pytest.approx(theirs, rel=1e-12), metric
    assert "item-kNN − popularity (pnDCG@10)" in capsys.readouterr().out
