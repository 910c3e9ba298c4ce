"""Propensity-stratified evaluation on Spark (Jadidinejad et al. §5, Eq. 4).

The strata are fixed once for all held-out interactions: their propensities reach the driver
as one ``(item, propensity, count)`` row per held-out item, from which the core's
:class:`~recpack_ope.metrics.stratified.StrataBins` places the bin edges. Each partition then
runs the core's :func:`~recpack_ope.metrics.stratified.stratified` with those bins, and ships
the moments of every user's terms: the holdout's and each stratum's terms (0 outside the
stratum), the stratum indicators, the user's interactions per stratum and in all.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import registry
from ..evaluation.chunks import ChunkPlan, Partial, core_refusal
from ..inference.diagnostics import (
    ReliabilityWarning,
    WeightDiagnostics,
    WeightGroups,
)
from ..inference.moments import Moments
from ..metrics.stratified import BINNINGS, StrataBins, StratifiedSummary
from ..metrics.stratified import stratified as _core_stratified
from ..propensity.discount import Discount
from ..registry import ESTIMATORS
from . import _partitions
from .held_out import _prepare

__all__ = ["stratified"]


@dataclass(frozen=True)
class _StratifiedPlan(ChunkPlan):
    bins: StrataBins | None = None

    def _core(self, metric: str):
        """The registry's estimator ``metric`` as the core's ``stratified`` calls a metric."""

        def call(y_true, y_score, **kwargs):
            return self.call(metric, y_true, y_score, kwargs.get("propensity"))

        call.__name__ = ESTIMATORS[metric].function.__name__
        return call

    def chunk(self, chunk: dict) -> Partial:
        coded = self.matrices(chunk)
        users, y_true, propensity = coded.users, coded.y_true, coded.propensity
        scores = coded.scores
        strata = np.ones(y_true.shape[1])
        held = chunk["source"] == -1
        strata[coded.column[held]] = chunk["stratify"][held]
        positive = np.diff(sp.csr_matrix(y_true > 0).indptr) > 0
        width = self.width
        if not positive.any():
            return Partial(Moments.empty(width), int(users.size), {})
        blocks, names, groups = [], {}, {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            for model, y_score in zip(self.models, scores, strict=True):
                result = _core_stratified(
                    self._core(self.metrics[0]),
                    y_true,
                    y_score,
                    stratify_by=strata,
                    n_strata=self.bins.n_strata,
                    binning=self.bins.binning,
                    bins=self.bins,
                    propensity=propensity,
                )
                shared, terms = StratifiedSummary.user_terms(result)
                blocks.append(terms)
                names["stratified"] = result.name
                parts = [("holdout", result.holdout)] + [
                    (s, x.result) for s, x in enumerate(result.strata)
                ]
                groups.update(
                    {
                        (model, part): [r.diagnostics.groups]
                        for part, r in parts
                        if r is not None and r.diagnostics is not None
                    }
                )
        return Partial(
            Moments.from_terms(np.hstack([shared, *blocks])), int((~positive).sum()), names, groups
        )

    @property
    def width(self) -> int:
        """Terms per user: the shared ones and each model's."""
        k, s = len(ESTIMATORS[self.metrics[0]].terms), self.bins.n_strata
        return 1 + 2 * s + len(self.models) * k * (1 + s)


def stratified(
    held_out,
    recommendations,
    *,
    stratify_by,
    metric: str = "ndcg",
    n_strata: int = registry.default("n_strata"),
    binning: str = registry.default("binning"),
    discount: Discount,
    k: int | None = None,
    propensity=None,
    clip: float | None = registry.default("clip"),
    n_partitions: int | None = None,
    ess_threshold: float = registry.default("ess_threshold"),
):
    """Propensity-stratified ``metric`` of one model (an estimate) or several (a dict).

    Parameters
    ----------
    held_out, recommendations
        As for :func:`recpack_ope.spark.evaluate`.
    stratify_by : pyspark.sql.DataFrame
        Columns ``item``, ``propensity``: the exposure propensities the held-out interactions
        are stratified by (e.g. :func:`recpack_ope.spark.fit_propensity`).
    metric : str
        The base estimator: a registry name that :func:`recpack_ope.spark.evaluate` takes,
        plain (``"ndcg"``, ``"dcg"``, ``"pn_dcg"``, ``"recall"``) or weighted
        (``"ips_dcg"``, … with ``propensity``).
    n_strata, binning
        As for :func:`recpack_ope.stratified`: S strata of equal width in propensity or of
        equal mass.
    discount, k, propensity, clip, n_partitions, ess_threshold
        As for :func:`recpack_ope.spark.evaluate`; ``propensity`` is read only by a weighted
        base estimator.

    Returns
    -------
    StratifiedSummary or dict of str → StratifiedSummary
        ``Σ_s P(s) · M_s`` with its holdout value, strata, interval and paired comparisons.

    Examples
    --------
    >>> from recpack_ope import LogDiscount
    >>> from recpack_ope.spark import stratified
    >>> result = stratified(
    ...     held, recs, stratify_by=p, metric="ndcg", discount=LogDiscount(10)
    ... )  # doctest: +SKIP
    >>> result.name  # doctest: +SKIP
    'Stratified nDCG@10'
    """
    from pyspark.sql import functions as F

    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    if stratify_by is None:
        raise ValueError("stratify_by must be a DataFrame of item propensities to stratify by")
    _partitions.check_partitions(n_partitions)
    plan, frame, inputs = _prepare(
        held_out,
        recommendations,
        (metric,),
        discount,
        k,
        propensity,
        clip,
        ess_threshold,
        stratify_by,
    )
    models = plan.models
    table = _partitions.collect(
        frame.filter((F.col("source") == -1) & (F.col("value") > 0))
        .groupBy("item", "stratify")
        .count()
    )
    missing = [row["item"] for row in table if row["stratify"] is None]
    if missing:
        raise ValueError(f"stratify_by has no row for held-out item {missing[0]!r}")
    if not table:
        empty = sp.csr_matrix((1, 1))
        raise core_refusal(
            inputs[0][0].label,
            lambda: _core_stratified(
                ESTIMATORS[metric].function, empty, empty, stratify_by=np.ones(1), n_strata=n_strata
            ),
        )
    values = np.array([row["stratify"] for row in table], dtype=np.float64)
    counts = np.array([row["count"] for row in table], dtype=np.int64)
    bins = StrataBins.fit(values, n_strata, binning, counts=counts)
    plan = _StratifiedPlan(**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, bins=bins)
    # A positive reward makes its user evaluated: some partition has moments.
    partial = _partitions.run(frame, plan, n_partitions)
    index = bins.index(values)
    n_items = np.bincount(index, minlength=n_strata)

    def diagnostics(model: str) -> dict:
        return {
            part: WeightDiagnostics.from_groups(WeightGroups.concatenate(g), ess_threshold)
            for (m, part), g in partial.groups.items()
            if m == model
        }

    results = {
        model: StratifiedSummary.from_moments(
            partial.names["stratified"],
            partial.moments,
            model=m,
            n_models=len(models),
            n_terms=len(ESTIMATORS[metric].terms),
            exponents=ESTIMATORS[metric].exponents,
            bins=bins,
            n_items_per_stratum=n_items,
            n_items=len(table),
            n_excluded_users=partial.n_excluded,
            diagnostics=diagnostics(model),
        )
        for m, model in enumerate(models)
    }
    return results if hasattr(recommendations, "items") else results["model"]
