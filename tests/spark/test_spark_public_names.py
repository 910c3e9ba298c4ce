"""The public names of ``recpack_ope.spark`` (the other subpackages are listed in
tests/test_public_api.py, which runs where pyspark is not installed)."""

import importlib

import recpack_ope.spark as engine

SPARK = {
    "local_session",
    "find_java_home",
    "evaluate",
    "per_user",
    "HeldOutEvaluation",
    "logged_dcg",
    "ranking_ips",
    "stratified",
    "win_rates",
    "fit_propensity",
}


def test_the_spark_engine_lists_its_public_names():
    assert len(engine.__all__) == len(set(engine.__all__))
    assert set(engine.__all__) == SPARK
    for name in engine.__all__:
        assert getattr(importlib.import_module("recpack_ope.spark"), name) is getattr(engine, name)
    # One way to ask for an estimator on Spark: by its registry name through evaluate.
    for gone in ("dcg", "unbiased_dcg", "snips_dcg", "ndcg", "pn_dcg", "recall", "METRICS"):
        assert not hasattr(engine, gone), gone
