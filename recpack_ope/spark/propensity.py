"""Item propensities fitted on interactions held in Spark.

Only the per-item interaction counts (one row per item) reach the driver, where the core's
propensity model is fitted (:mod:`recpack_ope.propensity.models`, e.g. the power law of
Jadidinejad et al. Eq. 7); the result returns to Spark as an ``(item, propensity)`` table.
"""

from __future__ import annotations

import numpy as np

from . import _frames, _partitions

__all__ = ["fit_propensity"]


def fit_propensity(interactions, model, *, items=None):
    """Fit ``model`` on the item counts of ``interactions``; return ``(item, propensity)``.

    Parameters
    ----------
    interactions : pyspark.sql.DataFrame
        Training interactions with columns ``user`` and ``item``; an item's count is the
        number of distinct users with a row for it (as the core's :func:`item_counts`).
    model : PowerLawPropensity, PopularityPropensity or another core propensity model
        Fitted in place on the counts (scikit-learn style), so its ``report()`` is available.
    items : pyspark.sql.DataFrame, optional
        The catalogue (column ``item``): items without interactions get count 0 and the
        model's propensity for it. Default: the items of ``interactions``.

    Returns
    -------
    pyspark.sql.DataFrame
        Columns ``item`` and ``propensity``, one row per item, ready for ``propensity=``.
    """
    from pyspark.sql import functions as F

    _frames.require(interactions, "interactions", ("user", "item"))
    if not hasattr(model, "fit"):
        raise TypeError(f"model must be a propensity model with fit(), got {type(model).__name__}")
    counts = interactions.groupBy("item").agg(F.countDistinct("user").alias("count"))
    if items is not None:
        _frames.require(items, "items", ("item",))
        _frames.same_type({"interactions": interactions, "items": items}, "item")
        counts = items.select("item").distinct().join(counts, "item", "left").fillna(0, ["count"])
    table = _partitions.collect(counts.orderBy("item"))
    if not table:
        raise ValueError("interactions has no rows: there is nothing to fit propensities on")
    ids = [row["item"] for row in table]
    model.fit(np.array([row["count"] for row in table], dtype=np.float64))
    spark = interactions.sparkSession
    return spark.createDataFrame(
        list(zip(ids, (float(p) for p in model.propensity_), strict=True)),
        schema=f"item {interactions.schema['item'].dataType.simpleString()}, propensity double",
    )
