"""recpack-ope's DCG family as RecPack metrics (needs the ``recpack`` extra).

Register once, then use the metrics by name like RecPack's own::

    from recpack.pipelines import PipelineBuilder
    from recpack_ope import PowerLawPropensity
    from recpack_ope.adapters.recpack import RecPackAdapter, compare, summary

    adapter = RecPackAdapter(propensity=PowerLawPropensity())   # clip=RECOMMENDED_CLIP
    adapter.fit(scenario.full_training_data).register()

    builder = PipelineBuilder()
    builder.add_metric("IPSDCGK", K=[10, 100])
    builder.add_metric("PostNormalisedDCGK", K=100)
    builder.set_optimisation_metric("IPSDCGK", K=100)   # sweeps work too
    ...
    pipeline.run()
    pipeline.get_metrics()
    summary(pipeline, "IPSDCGK_100")       # intervals and the IPS weights' diagnostics
    compare(pipeline, "EASE(l2=500.0)", "KUNN(Ki=70,Ku=70)", "IPSDCGK_100")

Registered names say whether a metric is IPS-weighted: ``IPS…`` names always are, the others
never are. ``register(prefix=...)`` prepends a prefix so several configurations can share one
pipeline.

Always registered, never weighted:

==================================  =======================================================
``PlainDCGK``                       DCG@K; equals RecPack's ``DCGK`` (per user, tied scores
                                    included) but keeps the per-user terms :func:`compare`
                                    needs
``PlainNDCGK``                      per-user nDCG@K; equals RecPack's ``NDCGK`` likewise
``PostNormalisedDCGK``              pnDCG@K = Σ DCG_u / Σ iDCG_u (Jeunen et al. §5, Lemma 5.1)
``RPPK``, ``dcgRPPK``, ``invRPPK``  recall-paired preference on the top-K lists (Diaz &
                                    Ferraro SIGIR'22): the algorithm's win rate against every
                                    other algorithm of the same pipeline (Eq. 7 / (M − 1)),
                                    computed when ``get_metrics()`` reads it;
                                    :func:`preferences` gives the pairwise matrix and the MC4
                                    ordering
==================================  =======================================================

Registered only when the adapter has propensities:

===========================  ==============================================================
``IPSDCGK``                  unbiased (IPS) DCG@K, Jeunen et al. Eq. 11
``SNIPSDCGK``                self-normalised IPS DCG@K (docs/definitions.md)
``IPSNDCGK``                 per-user nDCG@K with IPS gains (§5)
``IPSPostNormalisedDCGK``    pnDCG@K with IPS gains
``StratifiedNDCGK``          propensity-stratified nDCG@K, Σ_s P(s)·nDCG_s (Jadidinejad et
                             al. TOIS'21 Eq. 4): unweighted, strata from the propensities
``DRDCGK``                   doubly robust DCG@K (:func:`recpack_ope.metrics.doubly_robust.dr_dcg`),
                             only when the adapter also has a ``reward_model``
===========================  ==============================================================

Deprecated names, kept with their old meaning; constructing them issues a ``FutureWarning``
naming the replacement:

========================  =================================================================
``UnbiasedDCGK``          ``IPSDCGK`` when the adapter has propensities, else ``PlainDCGK``
``SNUnbiasedDCGK``        ``SNIPSDCGK`` when the adapter has propensities, else ``PlainDCGK``
========================  =================================================================

An adapter without propensities leaves the propensity names to an earlier adapter with
propensities registered under the same prefix; where there is none, it registers a placeholder
that fails, when the pipeline constructs the metric, with an error saying why and which plain
name to use instead (RecPack itself would only say that the name "could not be resolved").

Weighted metrics clip their weights with the adapter's ``clip``, by default
:data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`; ``clip=None`` is the papers'
unclipped estimator. Their results carry the weights' diagnostics (effective sample size and
the like, :class:`~recpack_ope.inference.diagnostics.WeightDiagnostics`), shown by
:func:`summary`.

Translation only: the formulas are the core's :func:`recpack_ope.metrics.dcg`. What this module
adds is RecPack's conventions: its metric contract (``calculate``, ``value``, ``results``,
``num_users``), its item indices, and its ranking of tied scores (see
:func:`recpack_ranking`), so that the plain metrics equal RecPack's own.
"""

from __future__ import annotations

import difflib
import logging
import math
import sys
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import scipy.sparse as sp
from recpack.matrix import InteractionMatrix
from recpack.metrics.base import ListwiseMetricK
from recpack.util import get_top_K_ranks

from .._chunks import rows_per_chunk
from .._validation import (
    as_csr,
    check_clip,
    check_positive_int,
    check_rewards,
    check_sparse,
    real_array,
    shown,
)
from ..inference.diagnostics import ESS_RATIO_THRESHOLD
from ..inference.result import Comparison, EstimateResult, PairedEstimate
from ..inference.systems import PreferenceMatrix, SystemScores
from ..metrics.dcg import HeldOut, _dcg, dcg, prepare_held_out
from ..metrics.doubly_robust import dr_dcg
from ..metrics.ranking import ScoreSource, TopK
from ..metrics.rpp import RecallLevels
from ..metrics.stratified import BINNINGS, stratified
from ..propensity.discount import Discount, LogDiscount
from ..propensity.models import FixedPropensity
from ..propensity.weights import RECOMMENDED_CLIP, propensities_by_raw_id, resolve_propensity
from ..reward.validation import check_reward_model

with warnings.catch_warnings():
    # hyperopt, which RecPack's pipelines import, imports the deprecated pkg_resources: a
    # warning about RecPack's dependencies (pinned by the recpack extra), not about this code.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    from recpack.pipelines import METRIC_REGISTRY, Pipeline

__all__ = [
    "RecPackAdapter",
    "OPEMetricK",
    "RPPMetricK",
    "recpack_ranking",
    "metric_results",
    "compare",
    "summary",
    "preferences",
]

logger = logging.getLogger("recpack_ope")


@dataclass(frozen=True)
class _Estimator:
    """One registered name: keyword arguments of the core's dcg(), names of its per-user
    terms, and its weighting: ``"never"``, ``"always"`` (IPS; needs propensities),
    ``"strata"`` (unweighted, needs propensities for its strata), ``"doubly_robust"`` (needs
    propensities and a reward model) or ``"adapter"`` (the deprecated names: weighted exactly
    when the adapter has propensities)."""

    options: dict = field(default_factory=dict)
    terms: tuple[str, ...] = ("dcg",)
    weighting: str = "never"
    #: for deprecated names: the replacement with propensities and without
    renamed: tuple[str, str] | None = None
    #: for names that need propensities: the unweighted name to use without them
    plain: str | None = None

    @property
    def needs_propensity(self) -> bool:
        return self.weighting in ("always", "strata", "doubly_robust")


_SN_TERMS = ("dcg", "n_held_out", "weight_sum")
_POST_TERMS = ("dcg", "idcg")

# Registered name -> estimator (module docstring table).
_ESTIMATORS: dict[str, _Estimator] = {
    "PlainDCGK": _Estimator(),
    "PlainNDCGK": _Estimator({"normalise": "per_user"}, ("ndcg",)),
    "PostNormalisedDCGK": _Estimator({"normalise": "post"}, _POST_TERMS),
    "IPSDCGK": _Estimator(weighting="always", plain="PlainDCGK"),
    "SNIPSDCGK": _Estimator({"self_normalised": True}, _SN_TERMS, "always", plain="PlainDCGK"),
    "IPSNDCGK": _Estimator({"normalise": "per_user"}, ("ndcg",), "always", plain="PlainNDCGK"),
    "IPSPostNormalisedDCGK": _Estimator(
        {"normalise": "post"}, _POST_TERMS, "always", plain="PostNormalisedDCGK"
    ),
    "StratifiedNDCGK": _Estimator(
        {"normalise": "per_user"}, ("stratified_ndcg",), "strata", plain="PlainNDCGK"
    ),
    "DRDCGK": _Estimator(weighting="doubly_robust", plain="PlainDCGK"),
    "UnbiasedDCGK": _Estimator(weighting="adapter", renamed=("IPSDCGK", "PlainDCGK")),
    "SNUnbiasedDCGK": _Estimator(
        {"self_normalised": True}, _SN_TERMS, "adapter", renamed=("SNIPSDCGK", "PlainDCGK")
    ),
}

# Registered name -> p(i) of recall-paired preference.
_PREFERENCES = {"RPPK": "uniform", "dcgRPPK": "dcg", "invRPPK": "inverse"}

# Columns summary() adds for IPS-weighted metrics, from their WeightDiagnostics.
_DIAGNOSTICS = (
    "ess",
    "ess_ratio",
    "max_weight",
    "top_share",
    "n_clipped",
    "clipped_mass",
    "reliable",
)


def recpack_ranking(y_pred: sp.csr_matrix, K: int) -> TopK:
    """Every user's top-K items of RecPack's ``X_pred``, tied scores ranked as RecPack does.

    The core ranks ties by the lower item index; RecPack's metrics rank them by whatever
    order ``np.argpartition`` leaves (``recpack.util.get_top_K_ranks``). Rows whose top K+1
    scores hold a tie are therefore ranked by RecPack's own function, the rest by the
    vectorised core, so a metric registered here sees exactly the lists RecPack's ``DCGK``
    sees. Models with many ties (e.g. popularity) then cost as much as RecPack's loop.
    """
    K = check_positive_int(K, "K")
    # Checked before scipy's compiled conversion reads a corrupt structure.
    scores = sp.csr_matrix(check_sparse(y_pred, "y_pred") if sp.issparse(y_pred) else y_pred)
    n_users = scores.shape[0]
    source = ScoreSource(scores, scores.shape)
    items = np.full((n_users, min(K, scores.shape[1])), -1, dtype=np.int64)
    tied = []
    step = rows_per_chunk(source.width)
    for start in range(0, n_users, step):
        users = np.arange(start, min(start + step, n_users))
        # The ranked scores come with the ranking: no second look-up in the sparse matrix.
        ranked_items, ranked, counts = source.top_scored(users, K + 1)
        candidate = np.arange(ranked.shape[1]) < counts[:, None]
        ties = ((ranked[:, 1:] == ranked[:, :-1]) & candidate[:, 1:]).any(axis=1)
        tied.append(start + np.flatnonzero(ties))
        top = np.where(candidate, ranked_items, -1)[:, :K]
        items[start : start + users.size, : top.shape[1]] = top
    tied = np.concatenate(tied) if tied else np.zeros(0, dtype=np.int64)
    if tied.size:
        ranks = get_top_K_ranks(scores[tied], K).tocoo()
        items[tied] = -1
        items[tied[ranks.row], ranks.data.astype(np.int64) - 1] = ranks.col
    return TopK(items)


class _LastRanking:
    """What the metrics RecPack computes one after the other on the same predictions share.

    The ranking of the last ``X_pred`` seen, for the same matrix object (held weakly), K and
    contents; and, for that ranking, the held-out data the core prepared
    (:func:`~recpack_ope.metrics.dcg.prepare_held_out`) for each ``y_true`` and propensities
    met, since RecPack builds a new ``y_true`` for every metric. Contents are compared with
    copies kept here, exactly: an edit in place is never served stale, and comparing costs
    less than a checksum of the scores (the copy is one more ``X_pred`` in memory).
    """

    def __init__(self) -> None:
        self._ref, self._K, self._scores, self._ranking = None, None, None, None
        self._held_out: list[tuple[Discount, _Snapshot, _Snapshot | None, HeldOut]] = []

    def get(self, y_pred, K: int) -> TopK:
        if not sp.issparse(y_pred):
            return recpack_ranking(y_pred, K)
        # Other formats are converted, once per metric.
        csr = y_pred if y_pred.format == "csr" else check_sparse(y_pred, "y_pred").tocsr()
        if (
            self._ref is None
            or self._ref() is not y_pred
            or self._K != K
            or not self._scores.matches(csr)
        ):
            self._ranking = recpack_ranking(y_pred, K)
            self._ref, self._K, self._scores = weakref.ref(y_pred), K, _Snapshot(csr)
            self._held_out = []
        return self._ranking

    def held_out(self, y_true, ranking: TopK, *, discount: Discount, propensity) -> HeldOut:
        """:func:`prepare_held_out` of ``y_true`` against ``ranking`` (without impressions),
        prepared once per ``y_true`` and propensities met on this ranking."""
        cached = ranking is self._ranking and sp.issparse(y_true) and y_true.format == "csr"
        if cached:
            p = None if propensity is None else resolve_propensity(propensity, y_true.shape)
            for curve, truth, given, prepared in self._held_out:
                if (
                    curve == discount
                    and truth.matches(y_true)
                    and (p is None if given is None else p is not None and given.matches(p))
                ):
                    return prepared
        prepared = prepare_held_out(
            y_true,
            ranking,
            discount=discount,
            propensity=propensity,
            impressions=None,
            chunk_users=None,
        )
        if cached:
            self._held_out.append(
                (discount, _Snapshot(y_true), None if p is None else _Snapshot(p), prepared)
            )
        return prepared


class _Snapshot:
    """A copy of an array's or sparse matrix's buffers, to tell whether another (or the same,
    edited) has the same contents."""

    def __init__(self, matrix) -> None:
        self._shape, self._arrays = matrix.shape, tuple(a.copy() for a in self._buffers(matrix))

    @staticmethod
    def _buffers(matrix) -> tuple[np.ndarray, ...]:
        if sp.issparse(matrix):
            csr = matrix.tocsr()
            return csr.data, csr.indices, csr.indptr
        return (np.asarray(matrix),)

    def matches(self, matrix) -> bool:
        if matrix.shape != self._shape or sp.issparse(matrix) != (len(self._arrays) == 3):
            return False
        return all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            for a, b in zip(self._buffers(matrix), self._arrays, strict=True)
        )


_LAST = _LastRanking()


def _is_ours(cls) -> bool:
    """Whether a metric class was made here. By module name, not ``issubclass``: reloading
    this module (``importlib.reload`` in a notebook) defines a new :class:`OPEMetricK`, and
    classes registered or metrics computed before the reload must still count as ours."""
    return getattr(cls, "__module__", None) == __name__


def _cutoff(cls: type, K) -> int:
    """A metric's K; the message names the registered metric, since RecPack builds one per
    entry of ``add_metric(name, K=[...])`` when the pipeline runs."""
    try:
        return check_positive_int(K, "K")
    except ValueError as error:
        raise ValueError(f"{cls.__name__}: {error}") from None


def _require_calculated(metric, attribute: str) -> None:
    if not hasattr(metric, attribute):
        raise ValueError(
            f"{metric.name} has no value yet: call calculate(y_true, y_pred) first (a RecPack "
            "pipeline does when it runs)"
        )


class OPEMetricK(ListwiseMetricK):
    """Base of the metric classes :meth:`RecPackAdapter.register` creates.

    Follows RecPack's ``Metric`` contract: ``calculate(y_true, y_pred)`` then ``value``,
    ``results`` (one row per evaluated user: ``user_id``, ``score`` whose mean is ``value``,
    and the estimator's per-user terms) and ``num_users``. The full
    :class:`~recpack_ope.EstimateResult` (intervals, paired tests and, for IPS-weighted
    metrics, the weights' ``diagnostics``) is kept as ``result_``.
    """

    adapter: RecPackAdapter
    estimator: str
    #: the name to use instead, for a deprecated registered name
    replacement: str | None = None

    def __init__(self, K: int):
        K = _cutoff(type(self), K)
        if self.replacement is not None:
            warnings.warn(self._renamed_message(), FutureWarning, stacklevel=2)
        super().__init__(K)

    @classmethod
    def _renamed_message(cls) -> str:
        if cls.adapter.propensity is None:
            meaning = "this adapter has no propensities, so it is plain (unweighted) DCG@K"
        else:
            meaning = "it is IPS-weighted with this adapter's propensities"
        return (
            f"{cls.__name__} is deprecated and will be removed: {meaning}; use "
            f"{cls.replacement}, whose name says so"
        )

    def calculate(self, y_true: sp.csr_matrix, y_pred: sp.csr_matrix) -> None:
        """Evaluate ``y_pred`` (RecPack's ``X_pred``) on the held-out ``y_true``."""
        self._verify_shape(y_true, y_pred)
        self.result_ = self.adapter.evaluate(self.estimator, y_true, y_pred, self.K)
        self.num_users_, self.num_items_ = self.result_.n_users, y_true.shape[1]
        self.user_id_map_ = self.result_.user_ids

    @property
    def value(self) -> float:
        """The estimate over all evaluated users."""
        _require_calculated(self, "result_")
        return self.result_.value

    @property
    def results(self) -> pd.DataFrame:
        """Per-user rows: ``user_id``, ``score`` (contribution; mean = ``value``), terms."""
        _require_calculated(self, "result_")
        columns = {"user_id": self.result_.user_ids, "score": self.result_.per_user}
        names = _ESTIMATORS[self.estimator].terms
        if len(names) > 1:
            columns.update(zip(names, self.result_.terms.T, strict=True))
        return pd.DataFrame(columns)


class _NeedsPropensities:
    """Registered under a propensity name by an adapter without propensities (or, for
    ``DRDCGK``, without a reward model): RecPack finds the name, and constructing the metric
    explains why it cannot be computed."""

    prefix: str
    estimator: str
    has_propensity: bool = False

    def __init__(self, K: int | None = None):
        spec = _ESTIMATORS[self.estimator]
        if spec.weighting == "doubly_robust" and self.has_propensity:
            raise ValueError(
                f"{type(self).__name__} is doubly robust and needs a reward model, but the "
                f"adapter registered under prefix {self.prefix!r} has none; give "
                "RecPackAdapter(propensity=..., reward_model=...) a reward model, e.g. "
                "ScoreCalibration().fit(scores, clicks, propensity).reward_model(scores), or use "
                f"{self.prefix}IPSDCGK"
            )
        what = (
            "builds its strata from propensities"
            if spec.weighting == "strata"
            else "is IPS-weighted"
        )
        raise ValueError(
            f"{type(self).__name__} {what}, but the adapter registered under prefix "
            f"{self.prefix!r} has no propensities; use {self.prefix}{spec.plain} for the "
            "unweighted metric, or register an adapter with propensities, e.g. "
            "RecPackAdapter(propensity=PowerLawPropensity()).fit(scenario.full_training_data)"
            f".register(prefix={self.prefix!r})"
        )


class _Pool:
    """The RPP metrics of one column (name and K) of one pipeline, in evaluation order.

    Held weakly, so a pipeline's metrics leave the pool when the pipeline is discarded. The
    members' win rates are computed once per membership.
    """

    def __init__(self) -> None:
        self._members: list[weakref.ref] = []
        self._cache: tuple[tuple[int, ...], object] | None = None

    def add(self, metric: RPPMetricK) -> None:
        self._members.append(weakref.ref(metric))

    def members(self) -> list[RPPMetricK]:
        alive = [m for m in (ref() for ref in self._members) if m is not None]
        self._members = [weakref.ref(m) for m in alive]
        return alive

    def win_rates(self, metric: RPPMetricK) -> EstimateResult:
        members = self.members()
        if len(members) < 2:
            raise ValueError(
                f"{metric.name} is a win rate against the other algorithms of the pipeline, but "
                "only one algorithm was evaluated: add at least one more algorithm"
            )
        key = tuple(id(m) for m in members)
        if self._cache is None or self._cache[0] != key:
            names = [f"#{i}" for i in range(len(members))]
            lengths = np.vstack([m.search_lengths_ for m in members])
            self._cache = (key, metric.levels_.win_rates(names, lengths))
        return self._cache[1].estimate(f"#{members.index(metric)}")


# Pools of metrics computed by a Pipeline, keyed by the pipeline (held weakly), and of metrics
# computed outside any pipeline, keyed by their held-out data.
_PIPELINE_POOLS: weakref.WeakKeyDictionary[Pipeline, dict] = weakref.WeakKeyDictionary()
_LOOSE_POOLS: dict = {}


def _fingerprint(y_true: sp.csr_matrix) -> tuple:
    csr = sp.csr_matrix(y_true)
    return (csr.shape, csr.nnz, hash(csr.indptr.tobytes()), hash(csr.indices.tobytes()))


class RPPMetricK(ListwiseMetricK):
    """Base of the recall-paired preference metrics (``RPPK``, ``dcgRPPK``, ``invRPPK``).

    ``calculate`` stores the algorithm's search lengths (the rank of each held-out item in its
    top-K list; omitted items rank below the list). ``value`` is its mean per-user win rate
    against every other algorithm that the same pipeline evaluated with the same metric and K,
    so it is only final once the pipeline has run, which is when ``get_metrics()`` reads it.
    ``results`` has the per-user win rates, ``result_`` the :class:`~recpack_ope.EstimateResult`
    (so :func:`summary` and :func:`compare` work on win rates).

    A win rate depends on the pool it is computed in, so these metrics cannot be a pipeline's
    optimisation metric.
    """

    weighting: str

    def __init__(self, K: int):
        super().__init__(_cutoff(type(self), K))

    def calculate(self, y_true: sp.csr_matrix, y_pred: sp.csr_matrix) -> None:
        """Store the search lengths of ``y_pred``'s top-K lists on the held-out ``y_true``."""
        self._verify_shape(y_true, y_pred)
        # RecPack hands the metric neither the pipeline nor the algorithm: the calling frame
        # (Pipeline.run) tells which pipeline's pool this algorithm joins.
        caller = sys._getframe(1)
        owner = caller.f_locals.get("self")
        if caller.f_code.co_name == "optimise" or (
            isinstance(owner, Pipeline) and caller.f_code.co_name != "run"
        ):
            raise ValueError(
                f"{self.name} cannot be an optimisation metric: a win rate depends on which other "
                "models are in the pool; optimise e.g. NDCGK and add the RPP metric with add_metric"
            )
        self.levels_ = RecallLevels.from_y_true(y_true, weighting=self.weighting)
        self.search_lengths_ = self.levels_.search_lengths(_LAST.get(y_pred, self.K), self.K)
        self.num_users_, self.num_items_ = self.levels_.user_ids.size, y_true.shape[1]
        self.user_id_map_ = self.levels_.user_ids
        key = (self.name, self.K, _fingerprint(y_true))
        pools = (
            _PIPELINE_POOLS.setdefault(owner, {}) if isinstance(owner, Pipeline) else _LOOSE_POOLS
        )
        self._pool = pools.setdefault(key, _Pool())
        self._pool.add(self)

    @property
    def result_(self) -> EstimateResult:
        """Per-user win rates against the pool's other algorithms."""
        _require_calculated(self, "_pool")
        return replace(self._pool.win_rates(self), name=self.name)

    @property
    def value(self) -> float:
        """Mean win rate against the other algorithms, in [−1, 1]."""
        return self.result_.value

    @property
    def results(self) -> pd.DataFrame:
        """Per-user rows: ``user_id`` and ``score`` (the user's win rate)."""
        result = self.result_
        return pd.DataFrame({"user_id": result.user_ids, "score": result.per_user})


def _raw_ids_by_index(item_id_mapping) -> np.ndarray:
    """The raw item id of every RecPack item index 0..n−1 of an id map.

    The map is RecPack's ``item_id_mapping`` (a DataFrame with a raw item id column and the
    item index column ``iid``), or a Series or mapping raw item id → item index. It must be
    one-to-one onto the indices 0..n−1 of its n rows: a raw id given twice, two raw ids with
    one index, and an index that is not an integer in 0..n−1 are refused, naming them.
    """
    column = InteractionMatrix.ITEM_IX
    if isinstance(item_id_mapping, pd.DataFrame):
        others = [c for c in item_id_mapping.columns if c != column]
        if column not in item_id_mapping.columns or len(others) != 1:
            raise ValueError(
                f"item_id_mapping must have the item index column {column!r} and one raw item id "
                f"column, as RecPack's dataset.preprocessor.item_id_mapping; got columns "
                f"{list(item_id_mapping.columns)}"
            )
        raw_ids = item_id_mapping[others[0]].to_numpy(dtype=object)
        index = item_id_mapping[column].set_axis(pd.Index(raw_ids, dtype=object))
    elif isinstance(item_id_mapping, pd.Series):
        raw_ids, index = item_id_mapping.index.to_numpy(dtype=object), item_id_mapping
    elif isinstance(item_id_mapping, Mapping):
        raw_ids = np.array(list(item_id_mapping), dtype=object)
        index = pd.Series(list(item_id_mapping.values()), index=pd.Index(raw_ids, dtype=object))
    else:
        raise TypeError(
            "item_id_mapping must be RecPack's item_id_mapping DataFrame, or a Series or mapping "
            f"raw item id → item index, got {type(item_id_mapping).__name__}"
        )
    n = raw_ids.size
    if n == 0:
        raise ValueError("item_id_mapping is empty: it must map every item's raw id to its index")
    values = real_array(index, "item_id_mapping")
    if values.dtype.kind not in "iu":
        whole = np.zeros(n, dtype=bool)
        if values.dtype.kind == "f":
            whole = np.isfinite(values) & (values == np.trunc(values))
        bad = np.flatnonzero(~whole)
        if bad.size:
            raise ValueError(
                f"item_id_mapping maps raw item id {raw_ids[bad[0]]!r} to {shown(values[bad[0]])}, "
                "not an integer item index"
            )
    index = values.astype(np.int64)
    repeated = np.flatnonzero(pd.Index(raw_ids, dtype=object).duplicated())
    if repeated.size:
        k = int(repeated[0])
        # The ids before the first repeat are distinct, so the earlier one is found once.
        earlier = pd.Index(raw_ids[:k], dtype=object).get_loc(raw_ids[k])
        raise ValueError(
            f"item_id_mapping maps raw item id {raw_ids[k]!r} to item indices {index[earlier]} "
            f"and {index[k]}; each raw id has one index"
        )
    outside = np.flatnonzero((index < 0) | (index >= n))
    if outside.size:
        k = int(outside[0])
        raise ValueError(
            f"item_id_mapping maps raw item id {raw_ids[k]!r} to item index {index[k]}, outside "
            f"0..{n - 1}: RecPack numbers the {n} items of the map 0..{n - 1}"
        )
    order = np.argsort(index, kind="stable")
    shared = np.flatnonzero(index[order][1:] == index[order][:-1])
    if shared.size:
        first, second = order[shared[0]], order[shared[0] + 1]
        raise ValueError(
            f"item_id_mapping gives item index {index[first]} to raw item ids {raw_ids[first]!r} "
            f"and {raw_ids[second]!r}; each index belongs to one raw id"
        )
    return raw_ids[order]


def _propensity_by_index(propensity: Mapping | pd.Series, item_id_mapping) -> np.ndarray:
    """Per-item propensities keyed by raw item id, re-indexed to RecPack's item indices.

    A raw id given twice, an item of the map without a propensity, and values that are not
    probabilities are refused with the raw id named; raw ids that are not in the map are
    ignored.
    """
    if item_id_mapping is None:
        raise ValueError(
            "propensities keyed by raw item id need item_id_mapping (RecPack's "
            "dataset.preprocessor.item_id_mapping) to be placed on RecPack's item indices"
        )
    raws = _raw_ids_by_index(item_id_mapping)
    return propensities_by_raw_id(propensity, raws, "RecPack's")


class RecPackAdapter:
    """Registers recpack-ope's DCG family in RecPack's ``METRIC_REGISTRY``.

    Parameters
    ----------
    propensity : None, propensity model, 1-D array, or mapping raw item id → propensity
        Logging exposure propensities in (0, 1]. None: only the unweighted metrics are
        registered (``PlainDCGK``, ``PlainNDCGK``, ``PostNormalisedDCGK``, RPP and the
        deprecated names). An unfitted model (e.g. ``PowerLawPropensity()``) is fitted by
        :meth:`fit`, on the training interactions, so its vector is indexed like RecPack's
        items. A mapping or ``pandas.Series`` keyed by raw item ids needs ``item_id_mapping``.
    discount : Discount
        Curve shape; each metric uses ``discount.with_cutoff(K)`` (default ``LogDiscount``).
    clip : float, "auto" or None
        Clipping of the IPS weights of the weighted (``IPS…``) metrics, passed to the core's
        :func:`~recpack_ope.metrics.dcg`: a number m clips at ``min(m, 1/p)`` (Jeunen et al.
        §6.2); the default is :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`.
        ``clip=None`` is the papers' unclipped (unbiased, but possibly high-variance)
        estimator; ``"auto"`` lets the core select m by SLOPE for every algorithm and metric
        (:func:`summary` shows the choice). Checked at construction. Unweighted metrics
        ignore it.
    item_id_mapping : pandas.DataFrame, pandas.Series, mapping or None
        RecPack's ``dataset.preprocessor.item_id_mapping`` (raw id, ``iid``), or a Series or
        mapping raw item id → item index; only for propensities keyed by raw item id (refused
        otherwise, as it would be ignored). It must number its n items 0..n−1 one-to-one: a raw
        id with two indices, two raw ids with one index and indices outside 0..n−1 are
        refused with the id named.
    n_strata : int
        Strata of ``StratifiedNDCGK`` (the paper uses 2).
    binning : {"width", "mass"}
        Equal-width propensity bins (the paper's) or equal-mass quantiles.
    reward_model : object with ``predict(users, items)``, optional
        Click probabilities of examined items, indexed by RecPack's user and item indices, for
        ``DRDCGK``, so it needs ``propensity``: e.g. ``ScoreCalibration().fit(scores, clicks,
        propensity=...).reward_model(scores)`` with a fitted algorithm's ``predict`` scores,
        or a :class:`~recpack_ope.reward.RewardMatrix`.
    impressions : scipy.sparse matrix, optional
        Where the logging policy showed items to the test users (users × items in RecPack's
        indices, ``δ0(logged rank)`` or 1 for "shown"); needs ``propensity`` over the same
        items. Given, ``IPSDCGK`` and ``DRDCGK`` average over the served users and carry the
        control variate of ``compare(..., control_variate=True)``. Without it DR equals IPS unless clipped
        (docs/definitions.md, "Doubly robust DCG").
    """

    def __init__(
        self,
        propensity=None,
        discount: Discount | None = None,
        clip: float | str | None = RECOMMENDED_CLIP,
        item_id_mapping: pd.DataFrame | None = None,
        n_strata: int = 2,
        binning: str = "width",
        reward_model=None,
        impressions=None,
    ):
        discount = LogDiscount() if discount is None else discount
        if not isinstance(discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        # Given values are validated now, so a bad propensity is named before any training.
        if isinstance(propensity, (Mapping, pd.Series)):
            propensity = FixedPropensity(_propensity_by_index(propensity, item_id_mapping)).fit()
        elif item_id_mapping is not None:
            raise ValueError(
                "item_id_mapping only places propensities keyed by raw item id (a mapping or "
                f"Series); with propensity={type(propensity).__name__} it would be ignored: drop it"
            )
        elif propensity is not None and not hasattr(propensity, "fit"):
            propensity = FixedPropensity(propensity).fit()
        self.propensity = propensity
        self.discount = discount
        check_clip(clip, allow_auto=True)  # names a bad clip before any training
        self.clip = clip
        self.n_strata = check_positive_int(n_strata, "n_strata")
        if not isinstance(binning, str) or binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {shown(binning)}")
        self.binning = binning
        for name, given, users in (
            ("reward_model", reward_model, "DRDCGK"),
            ("impressions", impressions, "IPSDCGK and DRDCGK"),
        ):
            if given is not None and propensity is None:
                raise ValueError(
                    f"{name} is used only by {users}, which need propensities, and this adapter "
                    "has none: give propensity= too, or drop it"
                )
        if reward_model is not None:
            check_reward_model(reward_model)  # the data's shape is checked at evaluation
        self.reward_model = reward_model
        if impressions is not None:
            check_rewards(
                as_csr(impressions, "impressions"),
                "impressions",
                "impressions are expected examinations",
            )
        self.impressions = impressions
        self._check_items()

    def _check_items(self, X=None) -> None:
        """The propensities, impressions, reward model and training data ``X`` (those known)
        must index the same items: RecPack's item indices 0..n−1."""
        sizes = []
        for name, value in (
            ("X", X),
            ("propensity", getattr(self.propensity, "propensity_", None)),
            ("impressions", self.impressions),
            ("reward_model", self.reward_model),
        ):
            if value is None or (name == "reward_model" and not hasattr(value, "shape")):
                continue  # a reward model need not know its shape
            shape = value.shape if hasattr(value, "shape") else np.shape(value)
            if len(shape) in (1, 2):
                sizes.append((name, int(shape[-1])))
        for name, n in sizes[1:]:
            if n != sizes[0][1]:
                raise ValueError(
                    f"{name} covers {n} items but {sizes[0][0]} covers {sizes[0][1]}; both must be "
                    "indexed by RecPack's item indices"
                )

    def provides(self, estimator: str) -> bool:
        """Whether this adapter has what ``estimator`` needs (propensities, a reward model)."""
        spec = _ESTIMATORS[estimator]
        if spec.weighting == "doubly_robust":
            return self.propensity is not None and self.reward_model is not None
        return not spec.needs_propensity or self.propensity is not None

    @property
    def fitted(self) -> bool:
        """Whether the propensities are ready (always, without a propensity model)."""
        return self.propensity is None or hasattr(self.propensity, "propensity_")

    def _require_fitted(self, before: str) -> None:
        if not self.fitted:
            raise ValueError(
                f"{type(self.propensity).__name__} is not fitted: call "
                f"adapter.fit(scenario.full_training_data) before {before}"
            )

    def fit(self, X: InteractionMatrix | sp.spmatrix) -> RecPackAdapter:
        """Fit the propensity model on training interactions, e.g.
        ``scenario.full_training_data``; a no-op without a propensity model."""
        if self.propensity is not None:
            values = X.binary_values if isinstance(X, InteractionMatrix) else X
            self.propensity.fit(values)
            if not hasattr(self.propensity, "propensity_"):
                raise TypeError(
                    f"{type(self.propensity).__name__}.fit(X) set no propensity_: a propensity "
                    "model's fit must store one propensity per item as propensity_"
                )
            if len(getattr(values, "shape", ())) == 2:
                self._check_items(values)
        return self

    def evaluate(self, estimator: str, y_true, y_pred, K: int) -> PairedEstimate:
        """One registered estimator on RecPack's ``(y_true, X_pred)``; see the module table.

        IPS-weighted estimators use the adapter's propensities and ``clip``; the others ignore
        both (``StratifiedNDCGK`` builds its strata from the propensities).
        """
        if not isinstance(estimator, str) or estimator not in _ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; choose from {sorted(_ESTIMATORS)}")
        shapes = [tuple(getattr(m, "shape", None) or np.shape(m)) for m in (y_true, y_pred)]
        if shapes[0] != shapes[1]:
            raise ValueError(
                f"y_true has shape {shapes[0]} but y_pred has {shapes[1]}: both are users × items "
                "in RecPack's indices"
            )
        spec = _ESTIMATORS[estimator]
        if spec.needs_propensity and self.propensity is None:
            what = (
                "builds strata from propensities"
                if spec.weighting == "strata"
                else "is IPS-weighted"
            )
            raise ValueError(f"{estimator} {what}; the adapter has none (use {spec.plain})")
        if spec.weighting == "doubly_robust" and self.reward_model is None:
            raise ValueError(
                f"{estimator} needs a reward model; the adapter has none (use IPSDCGK)"
            )
        self._require_fitted("running the pipeline")
        ranking, discount = _LAST.get(y_pred, K), self.discount.with_cutoff(K)
        if spec.weighting == "strata":
            # The base metric is unweighted, as in the paper: strata, not weights, correct bias.
            return stratified(
                dcg,
                y_true,
                ranking,
                stratify_by=self.propensity,
                n_strata=self.n_strata,
                binning=self.binning,
                discount=discount,
                **spec.options,
            )
        weighted = spec.weighting in ("always", "doubly_robust") or (
            spec.weighting == "adapter" and self.propensity is not None
        )
        propensity, clip = (self.propensity, self.clip) if weighted else (None, None)
        # Impressions define the served users of the unnormalised estimators.
        impressions = self.impressions if weighted and not spec.options else None
        if spec.weighting == "doubly_robust":
            return dr_dcg(
                y_true,
                ranking,
                discount=discount,
                reward_model=self.reward_model,
                propensity=self.propensity,
                impressions=impressions,
                clip=self.clip,
            )
        # The other metrics RecPack computes on this ranking reuse the prepared held-out data.
        held_out = (
            None
            if impressions is not None
            else _LAST.held_out(y_true, ranking, discount=discount, propensity=propensity)
        )
        result = _dcg(
            y_true,
            ranking,
            discount=discount,
            propensity=propensity,
            clip=clip,
            normalise=spec.options.get("normalise"),
            self_normalised=spec.options.get("self_normalised", False),
            impressions=impressions,
            chunk_users=None,
            ess_threshold=ESS_RATIO_THRESHOLD,
            held_out=held_out,
        )
        if result.diagnostics is not None:
            result.diagnostics.warn(result.name)
        return result

    def register(self, prefix: str = "") -> dict[str, type]:
        """Add the metric classes to RecPack's ``METRIC_REGISTRY`` as ``prefix + name``.

        Registering again (same or new configuration) rebinds the names to this adapter
        instead of failing, so notebooks can re-run the cell. A name RecPack or another
        package already uses is refused.

        Without propensities, the names that need them (``IPS…``, ``StratifiedNDCGK``) are
        not registered: they keep an earlier registration under the same prefix by an adapter
        with propensities, or else get a placeholder whose construction (when the pipeline
        runs) raises a ``ValueError`` saying that the adapter has no propensities and which
        plain name to use.

        Returns
        -------
        dict
            Registered name → metric class (constructible as ``cls(K=K)``), placeholders
            excluded.
        """
        if not isinstance(prefix, str) or (prefix and not prefix.isidentifier()):
            raise ValueError(f"prefix must be a valid Python identifier or '', got {prefix!r}")
        self._require_fitted("register()")
        has_propensity = self.propensity is not None
        made = []
        for name, spec in _ESTIMATORS.items():
            attributes = {"adapter": self, "estimator": name}
            if spec.renamed is not None:
                attributes["replacement"] = prefix + spec.renamed[0 if has_propensity else 1]
            missing = (
                spec.needs_propensity
                and not has_propensity
                or (spec.weighting == "doubly_robust" and self.reward_model is None)
            )
            if missing:
                made.append(
                    (
                        name,
                        _NeedsPropensities,
                        {"prefix": prefix, "estimator": name, "has_propensity": has_propensity},
                    )
                )
            else:
                made.append((name, OPEMetricK, attributes))
        made += [
            (name, RPPMetricK, {"weighting": weighting}) for name, weighting in _PREFERENCES.items()
        ]
        classes = {}
        for name, base, attributes in made:
            key = prefix + name
            if key in METRIC_REGISTRY:
                existing = METRIC_REGISTRY.get(key)
                if not _is_ours(existing):
                    raise ValueError(
                        f"METRIC_REGISTRY already has a metric {key!r} that is not recpack-ope's"
                    )
                earlier = getattr(existing, "adapter", None)
                if base is _NeedsPropensities and earlier is not None and earlier.provides(name):
                    continue  # a metric of an earlier adapter that can compute it stays usable
                logger.info("re-registering %s with a new configuration", key)
            cls = type(key, (base,), {**attributes, "__module__": __name__})
            METRIC_REGISTRY.registered[key] = cls
            if base is not _NeedsPropensities:
                classes[key] = cls
        return classes


def _metric_objects(pipeline: Pipeline, metric: str) -> dict:
    """Algorithm identifier → metric object of one ``get_metrics()`` column of a run pipeline."""
    # RecPack keeps the metric objects (not only their values) in this accumulator alone.
    if not hasattr(pipeline, "_metric_acc"):
        raise TypeError(
            f"pipeline must be a RecPack Pipeline after run(), got {type(pipeline).__name__}"
        )
    accumulated = pipeline._metric_acc.acc
    if not accumulated:
        raise ValueError("the pipeline has no results yet: call pipeline.run() first")
    out = {}
    for identifier, metrics in accumulated.items():
        if metric not in metrics:
            available = sorted({m for ms in accumulated.values() for m in ms})
            raise ValueError(f"metric {metric!r} is not in the pipeline; it has {available}")
        out[identifier] = metrics[metric]
    return out


def preferences(pipeline: Pipeline, metric: str = "RPPK_10") -> PreferenceMatrix:
    """Per-user recall-paired preferences between every pair of algorithms of a run pipeline.

    Parameters
    ----------
    pipeline : recpack.pipelines.Pipeline
        A pipeline after ``run()`` with one of the RPP metrics added (e.g.
        ``builder.add_metric("RPPK", 100)``).
    metric : str
        Its column in ``get_metrics()``, e.g. ``"RPPK_100"``.

    Returns
    -------
    PreferenceMatrix
        Axes named by algorithm identifier; ``.win_rates().ordering("mc4")`` is the MC4
        ordering, :func:`recpack_ope.inference.significance.paired_t_tests` and
        :func:`~recpack_ope.inference.significance.randomised_tukey_hsd` test every pair.
    """
    found = _metric_objects(pipeline, metric)
    if not all(_is_ours(type(m)) and hasattr(m, "search_lengths_") for m in found.values()):
        raise ValueError(
            f"{metric!r} is not an RPP metric; add RPPK, dcgRPPK or invRPPK to the pipeline"
        )
    metrics = list(found.values())
    lengths = np.vstack([m.search_lengths_ for m in metrics])
    return metrics[0].levels_.preference_matrix(list(found), lengths)


def metric_results(pipeline: Pipeline, metric: str) -> dict[str, PairedEstimate]:
    """Algorithm identifier → :class:`~recpack_ope.EstimateResult` (``StratifiedResult`` for
    ``StratifiedNDCGK``) of one of our metrics
    (by its column name in ``get_metrics()``, e.g. ``"IPSDCGK_100"``) in a run pipeline."""
    out = {}
    for identifier, found in _metric_objects(pipeline, metric).items():
        if not _is_ours(type(found)):
            raise ValueError(
                f"{metric!r} is not a recpack-ope metric, so it keeps no per-user terms for "
                "intervals and paired tests; add ours instead (PlainDCGK equals DCGK and "
                "PlainNDCGK equals NDCGK, with or without propensities)"
            )
        out[identifier] = found.result_
    return out


def _algorithm(results: dict[str, PairedEstimate], identifier: str, name: str) -> PairedEstimate:
    if not isinstance(identifier, str):
        raise ValueError(
            f"{name} must be an algorithm identifier as in pipeline.get_metrics().index, got "
            f"{shown(identifier)}"
        )
    if identifier not in results:
        close = difflib.get_close_matches(identifier, list(results), n=3, cutoff=0.3)
        hint = f"; did you mean {close}?" if close else f"; the pipeline ran {sorted(results)}"
        raise ValueError(f"no algorithm {identifier!r} in the pipeline{hint}")
    return results[identifier]


def compare(
    pipeline: Pipeline,
    algorithm_a: str,
    algorithm_b: str,
    metric: str,
    level: float = 0.95,
    *,
    control_variate: bool = False,
) -> Comparison:
    """Paired difference ``metric(a) − metric(b)`` over the same test users of a run pipeline.

    Parameters
    ----------
    pipeline : recpack.pipelines.Pipeline
        A pipeline after ``run()``.
    algorithm_a, algorithm_b : str
        Algorithm identifiers as in ``pipeline.get_metrics().index``, e.g. ``"EASE(l2=500.0)"``
        (RecPack writes all parameters: ``"EASE(alpha=0,density=None,l2=500.0)"``).
    metric : str
        Column of one of our metrics, e.g. ``"PostNormalisedDCGK_100"``.
    level : float
        Confidence level of the interval.
    control_variate : bool
        Subtract the Δ-OPE control variate (``PairedEstimate.compare``); needs an adapter
        with ``impressions`` and an ``IPSDCGK`` or ``DRDCGK`` metric.

    Returns
    -------
    Comparison
        Difference, standard error (delta method for ratio metrics), interval, two-sided
        p-value of the paired test and the number of paired users.
    """
    results = metric_results(pipeline, metric)
    paired = _algorithm(results, algorithm_a, "algorithm_a").compare(
        _algorithm(results, algorithm_b, "algorithm_b"), level, control_variate=control_variate
    )
    return replace(paired, name=f"{metric}: {algorithm_a} − {algorithm_b}")


def summary(
    pipeline: Pipeline, metric: str, level: float = 0.95, alpha: float = 0.05
) -> pd.DataFrame:
    """One row per algorithm: value, confidence interval, standard error and users, sorted
    by value (best first), and whether it is statistically tied with the best.

    ``tied_with_best`` is True for the algorithms whose paired t-test against the best (on
    the per-user values) is not significant at ``alpha`` after Holm's correction over the
    M − 1 comparisons (:func:`~recpack_ope.inference.significance.tied_with_best`; ``p_vs_best``
    is the adjusted p-value). Picking the best from the same data makes this family slightly
    liberal for large pools; ``tied_with_best(..., test="tukey")`` controls it exactly.

    For IPS-weighted metrics also the diagnostics of the weights behind each value
    (:class:`~recpack_ope.inference.diagnostics.WeightDiagnostics`): ``ess`` (Kish effective
    sample size), ``ess_ratio`` (ESS / held-out interactions), ``max_weight``, ``top_share``
    (share of the estimate carried by the top 1 % of weights), ``n_clipped``,
    ``clipped_mass`` and ``reliable`` (whether ``ess_ratio`` reaches the threshold); with
    ``clip="auto"`` also ``clip``, the threshold selected for each algorithm (``inf``: none).
    """
    rows = []
    results = metric_results(pipeline, metric)
    for identifier, result in results.items():
        lo, hi = result.confidence_interval(level)
        row = {
            "algorithm": identifier,
            "value": result.value,
            "ci_low": lo,
            "ci_high": hi,
            "standard_error": result.standard_error,
            "n_users": result.n_users,
        }
        selection = getattr(result, "clip_selection", None)
        if selection is not None:
            row["clip"] = math.inf if selection.clip is None else selection.clip
        diagnostics = getattr(result, "diagnostics", None)
        if diagnostics is not None:
            row.update({name: getattr(diagnostics, name) for name in _DIAGNOSTICS})
        rows.append(row)
    table = pd.DataFrame(rows).set_index("algorithm")
    if len(results) > 1:
        tied = SystemScores.from_estimates(results).tied_with_best(alpha=alpha)
        table["p_vs_best"] = pd.Series(dict(zip(tied.names, tied.p_value, strict=True)))
        table["tied_with_best"] = [name in tied.tied for name in table.index]
    return table.sort_values("value", ascending=False)
