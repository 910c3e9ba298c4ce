"""``recpack_ope.spark.propensity``: :func:`fit_propensity` equals the core fit on the same
item counts."""

import numpy as np
import pandas as pd

import recpack_ope as ro
from recpack_ope import spark as rs


def test_fit_propensity_equals_the_core_fit(spark):
    rng = np.random.default_rng(5)
    users = rng.integers(0, 400, 3000)
    items = np.minimum(rng.zipf(1.6, 3000), 60) - 1
    pairs = pd.DataFrame({"user": users, "item": items}).drop_duplicates()
    table = rs.fit_propensity(
        spark.createDataFrame(pairs),
        model := ro.PowerLawPropensity(),
        items=spark.createDataFrame(pd.DataFrame({"item": np.arange(60)})),
    )
    reference = ro.PowerLawPropensity().fit(np.bincount(pairs.item, minlength=60).astype(float))
    got = table.toPandas().sort_values("item")
    np.testing.assert_allclose(got.propensity, reference.propensity_, rtol=1e-12)
    np.testing.assert_allclose(model.propensity_, reference.propensity_, rtol=1e-12)
