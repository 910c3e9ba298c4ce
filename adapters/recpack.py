"""The registry's held-out estimators as RecPack metrics (needs the ``recpack`` extra).

Register once, then use the metrics by name like RecPack's own::

    RecPackAdapter(propensity=PowerLawPropensity()).fit(scenario.full_training_data).register()
    builder.add_metric("IPSDCGK", K=[10, 100])   # also set_optimisation_metric("IPSDCGK", K=100)
    pipeline.run()
    summary(pipeline, "IPSDCGK_100")   # intervals, weight diagnostics, ties with the best
    compare(pipeline, "EASE(l2=500.0)", "KUNN(Ki=70,Ku=70)", "IPSDCGK_100")

The names are :data:`NAMES` (``camel + "K"`` of the registry's held-out estimators:
``PlainDCGK``, ``PlainNDCGK``, ``PostNormalisedDCGK``, ``PlainRecallK``, ``IPSDCGK``,
``SNIPSDCGK``, ``IPSNDCGK``, ``IPSPostNormalisedDCGK``, ``IPSRecallK``, ``DRDCGK``,
``StratifiedNDCGK``) and the recall-paired preferences ``RPPK``, ``dcgRPPK``, ``invRPPK``.
Translation only: this module adds RecPack's metric contract and its ranking of tied scores,
so ``PlainDCGK``/``PlainNDCGK`` equal RecPack's ``DCGK``/``NDCGK`` per user.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import scipy.sparse as sp
from recpack.matrix import InteractionMatrix
from recpack.metrics.base import ListwiseMetricK
from recpack.util import get_top_K_ranks

from .._validation import check_positive_int
from ..evaluation.inputs import EstimatorInputs
from ..inference.leaderboard import Leaderboard, leaderboard_of
from ..inference.result import Comparison, EstimateResult, PairedEstimate
from ..inference.summary import compare_systems, summary_rows
from ..inference.systems import PreferenceMatrix
from ..io.id_maps import propensity_on_indices
from ..metrics.cache import RankingCache, WinRatePools, rank_ties_by
from ..metrics.ranking import TopK
from ..metrics.rpp import RecallLevels
from ..registry import ESTIMATORS

with warnings.catch_warnings():
    # hyperopt, imported by RecPack's pipelines, imports the deprecated pkg_resources.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    from recpack.pipelines import METRIC_REGISTRY, Pipeline

__all__ = ["RecPackAdapter", "OPEMetricK", "RPPMetricK", "recpack_ranking", "metric_results"]
__all__ += ["compare", "summary", "preferences", "leaderboard"]

logger = logging.getLogger("recpack_ope")

#: Registered name → held-out estimator of the registry.
NAMES = {e.camel + "K": e for e in ESTIMATORS.values() if e.camel and e.data == "held_out"}
_PREFERENCES = {"RPPK": "uniform", "dcgRPPK": "dcg", "invRPPK": "inverse"}


def _recpack_top_k(rows: sp.csr_matrix, K: int) -> np.ndarray:
    ranks = get_top_K_ranks(rows, K).tocoo()
    items = np.full((rows.shape[0], min(K, rows.shape[1])), -1, dtype=np.int64)
    items[ranks.row, ranks.data.astype(np.int64) - 1] = ranks.col
    return items


def recpack_ranking(y_pred: sp.csr_matrix, K: int) -> TopK:
    """Every user's top-K items of RecPack's ``X_pred``, tied scores ranked as RecPack's
    metrics rank them (``recpack.util.get_top_K_ranks``), so a metric registered here sees the
    lists RecPack's ``DCGK`` sees (:func:`~recpack_ope.metrics.cache.rank_ties_by`).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> recpack_ranking(sp.csr_matrix([[0.9, 0.1, 0.5]]), 2).items.tolist()
    [[0, 2]]
    """
    return rank_ties_by(y_pred, K, _recpack_top_k)


_CACHE, _POOLS = RankingCache(recpack_ranking), WinRatePools()


def _checked(metric, K, y_true=None, y_pred=None) -> int:
    """K, named with the metric (one per entry of ``add_metric(name, K=[...])``)."""
    shapes = [tuple(getattr(m, "shape", None) or np.shape(m)) for m in (y_true, y_pred)]
    if shapes[0] != shapes[1]:
        raise ValueError(f"y_true has shape {shapes[0]} but y_pred has {shapes[1]}")
    try:
        return check_positive_int(K, "K")
    except ValueError as error:
        raise ValueError(f"{type(metric).__name__}: {error}") from None


class OPEMetricK(ListwiseMetricK):
    """Base of the metric classes :meth:`RecPackAdapter.register` makes: RecPack's contract
    (``calculate``, ``value``, ``results``, ``num_users``) and ``result_``, the core's result."""

    adapter: RecPackAdapter
    estimator: str = ""
    prefix: str = ""

    def __init__(self, K: int):
        if hasattr(self, "adapter"):
            self.adapter.refuse_missing(self.estimator, self.prefix)
        super().__init__(_checked(self, K))

    def calculate(self, y_true: sp.csr_matrix, y_pred: sp.csr_matrix) -> None:
        """Evaluate ``y_pred`` (RecPack's ``X_pred``) on the held-out ``y_true``."""
        self.result_ = self.adapter.evaluate(self.estimator, y_true, y_pred, self.K)
        self.num_users_ = self.result_.n_users  # RecPack's num_users

    def _calculated(self) -> EstimateResult:
        if not self.num_users_:  # 0 until calculated: the core refuses data without users
            raise ValueError(f"{self.name} has no value yet: call calculate(y_true, y_pred) first")
        return self.result_

    @property
    def value(self) -> float:
        """The estimate over all evaluated users."""
        return self._calculated().value

    @property
    def results(self) -> pd.DataFrame:
        """Per-user rows: ``user_id``, ``score`` (contribution; mean = ``value``), terms."""
        result = self._calculated()
        columns = {"user_id": result.user_ids, "score": result.per_user}
        if len(terms := getattr(NAMES.get(self.estimator), "terms", ())) > 1:
            columns.update(zip(terms, result.terms.T, strict=True))
        return pd.DataFrame(columns)


class RPPMetricK(OPEMetricK):
    """Base of the recall-paired preference metrics (``RPPK``, ``dcgRPPK``, ``invRPPK``).

    ``value`` is the mean win rate against the algorithms evaluated with the same metric and
    held-out data, computed when ``get_metrics()`` reads it. RecPack tells a metric neither
    its pipeline nor its algorithm, so the pool is the algorithms evaluated between two reads
    (:class:`~recpack_ope.metrics.cache.WinRatePools`): read a pipeline's metrics before
    running another on the same data. It cannot be an optimisation metric.
    """

    weighting: str

    def calculate(self, y_true: sp.csr_matrix, y_pred: sp.csr_matrix) -> None:
        """Keep the search lengths of ``y_pred``'s top-K lists on the held-out ``y_true``."""
        _checked(self, self.K, y_true, y_pred)
        self.levels_ = RecallLevels.from_y_true(y_true, weighting=self.weighting)
        self.search_lengths_ = self.levels_.search_lengths(_CACHE.ranking(y_pred, self.K), self.K)
        csr = sp.csr_matrix(y_true)
        held_out = (csr.shape, hash(csr.indptr.tobytes()), hash(csr.indices.tobytes()))
        self._pool = _POOLS.join((self.name, held_out), self)
        self.num_users_ = self.levels_.user_ids.size

    @property
    def result_(self) -> EstimateResult:
        """Per-user win rates against the pool's other algorithms."""
        return self._pool.win_rate(self, self.name)


class RecPackAdapter(EstimatorInputs):
    """Registers the registry's held-out estimators in RecPack's ``METRIC_REGISTRY``.

    Parameters
    ----------
    propensity : None, propensity model, 1-D array, or mapping raw item id → propensity
        In RecPack's item indices, or keyed by raw item id and placed through
        ``item_id_mapping`` (RecPack's ``dataset.preprocessor.item_id_mapping``,
        :func:`~recpack_ope.io.id_maps.propensity_on_indices`); a model is fitted by :meth:`fit`.
    **inputs
        ``discount``, ``clip``, ``n_strata``, ``binning``, ``reward_model``, ``impressions``:
        as for :class:`~recpack_ope.evaluation.inputs.EstimatorInputs`, in RecPack's indices;
        any other name is refused with a TypeError listing the valid ones.

    Examples
    --------
    >>> adapter = RecPackAdapter(propensity=[0.5, 1.0, 0.25], clip=None)
    >>> sorted(adapter.register(prefix="Doc"))[:3]
    ['DocIPSDCGK', 'DocIPSNDCGK', 'DocIPSPostNormalisedDCGK']
    """

    def __init__(self, propensity=None, *, item_id_mapping: pd.DataFrame | None = None, **inputs):
        self.check_options(inputs)
        # Checked now, so that a bad propensity is named before any training.
        mapped = propensity_on_indices(propensity, item_id_mapping, InteractionMatrix.ITEM_IX)
        super().__init__(mapped, **inputs)

    def fit(self, X: InteractionMatrix | sp.spmatrix) -> RecPackAdapter:
        """Fit the propensity model on training data, e.g. ``scenario.full_training_data``."""
        return super().fit(X.binary_values if isinstance(X, InteractionMatrix) else X)

    def refuse_missing(self, name: str, prefix: str = "") -> None:
        """Refuse the estimator registered as ``prefix + name`` when it needs what this
        adapter lacks, naming the plain metric to use instead."""
        if missing := self.missing(NAMES[name]):
            needs, plain = " and ".join(missing), ESTIMATORS[NAMES[name].plain].camel
            raise ValueError(
                f"{prefix}{name} needs {needs}, which this adapter (prefix {prefix!r}) lacks; use "
                f"{prefix}{plain}K for the unweighted metric, or register an adapter with "
                f"{'=..., '.join(missing)}=... under prefix {prefix!r}"
            )

    def evaluate(self, name: str, y_true, y_pred, K: int) -> EstimateResult:
        """The estimator registered as ``name`` (e.g. ``"IPSDCGK"``) on ``(y_true, X_pred)``."""
        if not isinstance(name, str) or name not in NAMES:
            raise ValueError(f"unknown estimator {name!r}; choose from {sorted(NAMES)}")
        K = _checked(self, K, y_true, y_pred)
        self.refuse_missing(name)
        return super().evaluate(NAMES[name], y_true, y_pred, K, _CACHE)

    def register(self, prefix: str = "") -> dict[str, type]:
        """Add the metric classes to RecPack's ``METRIC_REGISTRY`` as ``prefix + name`` and
        return those this adapter can compute. Registering again rebinds the names; a name
        this adapter lacks the inputs for keeps an earlier adapter's metric that has them, or
        gets a class whose construction names the plain metric to use instead."""
        if not isinstance(prefix, str) or (prefix and not prefix.isidentifier()):
            raise ValueError(f"prefix must be a valid Python identifier or '', got {prefix!r}")
        self.require_fitted("register()")
        made = {name: (RPPMetricK, {"weighting": w}) for name, w in _PREFERENCES.items()}
        made.update({n: (OPEMetricK, {"adapter": self, "estimator": n}) for n in NAMES})
        classes = {}
        for name, (base, attributes) in made.items():
            key, lacks = prefix + name, name in NAMES and self.missing(NAMES[name])
            if key in METRIC_REGISTRY:
                existing = METRIC_REGISTRY.get(key)
                if existing.__module__ != __name__:  # by name: survives importlib.reload
                    raise ValueError(f"METRIC_REGISTRY has a metric {key!r} not recpack-ope's")
                if lacks and not getattr(existing, "adapter", self).missing(NAMES[name]):
                    continue  # an earlier adapter's metric that can be computed stays usable
                logger.info("re-registering %s with a new configuration", key)
            attributes = {**attributes, "prefix": prefix, "__module__": __name__}
            # METRIC_REGISTRY.register refuses a known name; a re-run cell rebinds it.
            METRIC_REGISTRY.registered[key] = cls = type(key, (base,), attributes)
            if not lacks:
                classes[key] = cls
        return classes


def _accumulated(pipeline: Pipeline) -> dict:
    """Algorithm identifier → column of ``get_metrics()`` → metric object of a run pipeline.

    RecPack keeps the metric objects, not only their values, in the private
    ``pipeline._metric_acc.acc`` alone; ``test_recpack.py`` fails when that changes.
    """
    if not isinstance(pipeline, Pipeline):
        raise TypeError(
            f"pipeline must be a RecPack Pipeline after run(), got {type(pipeline).__name__}"
        )
    accumulated = pipeline._metric_acc.acc
    if not accumulated:
        raise ValueError("the pipeline has no results yet: call pipeline.run() first")
    return accumulated


def _metric_objects(pipeline: Pipeline, metric: str) -> dict:
    """Algorithm identifier → metric object of one ``get_metrics()`` column of a run pipeline."""
    accumulated = _accumulated(pipeline)
    available = sorted({m for metrics in accumulated.values() for m in metrics})
    if metric not in available:
        raise ValueError(f"metric {metric!r} is not in the pipeline; it has {available}")
    return {identifier: metrics[metric] for identifier, metrics in accumulated.items()}


def _ours(metric) -> bool:
    """Whether a RecPack metric object is one of recpack-ope's (keeps per-user terms)."""
    return type(metric).__module__ == __name__


def preferences(pipeline: Pipeline, metric: str = "RPPK_10") -> PreferenceMatrix:
    """Per-user recall-paired preferences between every pair of algorithms of a run pipeline,
    from its RPP metric ``metric`` (e.g. ``"RPPK_100"``); ``.win_rates().ordering("mc4")`` of
    the result is the MC4 ordering."""
    found = _metric_objects(pipeline, metric)
    if not all(isinstance(getattr(m, "levels_", None), RecallLevels) for m in found.values()):
        raise ValueError(
            f"{metric!r} is not an RPP metric; add RPPK, dcgRPPK or invRPPK to the pipeline"
        )
    lengths = np.vstack([m.search_lengths_ for m in found.values()])
    return next(iter(found.values())).levels_.preference_matrix(list(found), lengths)


def metric_results(pipeline: Pipeline, metric: str) -> dict[str, PairedEstimate]:
    """Algorithm identifier → the core's result of one of our metrics in a run pipeline, by
    its column in ``get_metrics()`` (e.g. ``"IPSDCGK_100"``)."""
    found = _metric_objects(pipeline, metric)
    if not all(_ours(m) for m in found.values()):
        raise ValueError(
            f"{metric!r} is not a recpack-ope metric, so it keeps no per-user terms for intervals "
            "and paired tests; add ours instead (PlainDCGK equals DCGK and PlainNDCGK equals NDCGK)"
        )
    return {identifier: m.result_ for identifier, m in found.items()}


def leaderboard(pipeline: Pipeline, metrics=None, **options) -> Leaderboard:
    """:func:`~recpack_ope.inference.leaderboard.leaderboard` of a run pipeline's algorithms on
    ``metrics``, columns of ``get_metrics()`` computed by recpack-ope metrics (e.g.
    ``["IPSDCGK_10", "PostNormalisedDCGK_10"]``; default every such column, in RecPack's
    order); ``options`` are its ``level``, ``alpha`` and ``correction``. Usage:
    ``print(leaderboard(pipeline).to("latex"))``."""
    if metrics is None:
        accumulated = _accumulated(pipeline)
        columns = dict.fromkeys(m for by_metric in accumulated.values() for m in by_metric)
        metrics = [m for m in columns if all(_ours(a[m]) for a in accumulated.values())]
        if not metrics:
            raise ValueError(
                "the pipeline has no column of a recpack-ope metric; add ours (e.g. PlainDCGK, "
                "IPSDCGK) with RecPackAdapter(...).register() before running it"
            )
    return leaderboard_of(metrics, lambda metric: metric_results(pipeline, metric), **options)


def compare(
    pipeline: Pipeline, algorithm_a: str, algorithm_b: str, metric: str, **options
) -> Comparison:
    """Paired difference ``metric(a) − metric(b)`` over the same test users of a run pipeline;
    algorithms are identifiers as in ``pipeline.get_metrics().index``, ``options`` (``level``,
    ``control_variate``) those of :func:`~recpack_ope.inference.summary.compare_systems`."""
    results, names = metric_results(pipeline, metric), ("algorithm_a", "algorithm_b")
    paired = compare_systems(results, algorithm_a, algorithm_b, **options, arguments=names)
    return replace(paired, name=f"{metric}: {paired.name}")


def summary(
    pipeline: Pipeline, metric: str, level: float = 0.95, alpha: float = 0.05
) -> pd.DataFrame:
    """One row per algorithm, best first: value, interval, standard error, users, the IPS
    weights' diagnostics (``ess``, ``ess_ratio``, …, ``reliable`` and ``flags``, the
    reliability criteria that fired, as the file CLI's rows:
    :func:`~recpack_ope.inference.summary.diagnostic_columns`), the clip ``clip="auto"``
    selected, and whether it is tied with the
    best; for IPS-weighted metrics also the bounds when every propensity may be off by a
    factor of 2 either way (``sens_low``, ``sens_high``) and, for every algorithm but the best,
    Γ* of best − algorithm (``robust_gamma``: its sign, ``robust_gamma_95``: its significance
    at ``level``) (:func:`~recpack_ope.inference.summary.summary_rows`)."""
    rows = summary_rows(metric_results(pipeline, metric), level, alpha)
    return pd.DataFrame(rows).rename(columns={"system": "algorithm"}).set_index("algorithm")
