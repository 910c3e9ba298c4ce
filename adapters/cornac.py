"""recpack-ope for Cornac (needs the ``cornac`` extra): DCG-family metrics and a working
propensity-stratified evaluation method.

Metrics for any Cornac experiment (``cornac.Experiment`` calls ``compute`` once per user with
Cornac ≥ 2's ``gt_pos`` index arrays)::

    from recpack_ope import PowerLawPropensity
    from recpack_ope.adapters.cornac import CornacAdapter

    split = cornac.eval_methods.RatioSplit(data, test_size=0.2, rating_threshold=4.0)
    adapter = CornacAdapter(propensity=PowerLawPropensity()).fit(split)  # clip=RECOMMENDED_CLIP
    cornac.Experiment(split, models, metrics=[cornac.metrics.NDCG(10), *adapter.metrics(k=10)]).run()

Their names say whether they are IPS-weighted: ``IPS-DCG@10``, ``IPS-nDCG@10`` and
``IPS-pnDCG@10`` with propensities, ``DCG@10``, ``nDCG@10`` and ``pnDCG@10`` without. Their
weights are clipped at :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP` unless told
otherwise (``clip=None``: the paper's unclipped estimator). Cornac's loop computes them user
by user, so ``clip="auto"``, which selects the clipping from all users at once, works only in
the stratified evaluation below.

And a drop-in replacement for Cornac's ``PropensityStratifiedEvaluation`` (which crashes on
construction in Cornac 2.2.2 and 3.0.1, and mixes up item indices and propensity weights when
patched)::

    from recpack_ope.adapters.cornac import PropensityStratifiedEvaluation

    pse = PropensityStratifiedEvaluation(data, n_strata=2, rating_threshold=4.0, seed=123)
    cornac.Experiment(pse, [BPR(k=10), WMF(k=10)], metrics=[NDCG(), Recall(k=10)]).run()

which prints, per model, the Closed (holdout) / IPS / Q1…QS / Stratified table of Jadidinejad
et al. (TOIS 2021), with the effective sample size of the IPS row's weights (``IPS ESS/n``),
and keeps every estimate for paired comparisons (:func:`simpsons_paradox`). Its IPS row clips
the weights with ``clip`` (default :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`;
``clip=None`` is the paper's and Cornac's unclipped IPS). And recall-paired preference
between an experiment's models::

    experiment = cornac.Experiment(split, [BPR(k=10), WMF(k=10), MostPop()], metrics=[Recall(10)])
    experiment.run()
    matrix = add_rpp(experiment, k=10)   # adds an "RPP@10 win" column to experiment.result
    print(experiment.result, matrix.win_rates().ordering("mc4"))
    print(tied_with_best(experiment, "Recall@10"))   # models the data cannot separate from the best

Translation only: every value comes from the core (:func:`recpack_ope.metrics.dcg`,
:func:`recpack_ope.metrics.recall`, :func:`recpack_ope.metrics.stratified`). This module adds Cornac's
conventions: its internal item indices (raw ids mapped through the eval method's
``global_iid_map``), its candidate items (every known item except the user's positive
training and validation items) and its ``rating_threshold`` for what counts as relevant.
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp
from cornac.eval_methods import CrossValidation, RatioSplit
from cornac.eval_methods import PropensityStratifiedEvaluation as _CornacPSE
from cornac.eval_methods.base_method import BaseMethod
from cornac.exception import ScoreException
from cornac.experiment.result import Result
from cornac.metrics import NDCG, RankingMetric, Recall
from tqdm.auto import tqdm

from .._validation import (
    check_bool,
    check_clip,
    check_finite_number,
    check_positive_int,
    shown,
)
from ..inference.diagnostics import ReliabilityWarning, WeightDiagnostics
from ..inference.result import EstimateResult
from ..inference.significance import TiedWithBest
from ..inference.systems import PreferenceMatrix, SystemScores
from ..metrics.dcg import dcg, ndcg
from ..metrics.doubly_robust import dr_dcg
from ..metrics.ranking import TopK
from ..metrics.recall import recall
from ..metrics.rpp import RecallLevels
from ..metrics.simpsons_paradox import SimpsonsParadoxReport
from ..metrics.simpsons_paradox import simpsons_paradox as _report
from ..metrics.stratified import BINNINGS, StratifiedResult, stratified
from ..propensity.discount import Discount, LogDiscount
from ..propensity.models import FixedPropensity, PowerLawPropensity
from ..propensity.weights import RECOMMENDED_CLIP, propensities_by_raw_id
from ..reward import CalibratedScores, ScoreCalibration

__all__ = [
    "UnbiasedDCG",
    "IPSNDCG",
    "PostNormalisedDCG",
    "CornacAdapter",
    "PropensityStratifiedEvaluation",
    "StratifiedModelResult",
    "simpsons_paradox",
    "item_counts",
    "rank_test_users",
    "add_rpp",
    "tied_with_best",
]


# Row of StratifiedModelResult.rows() with the ESS ratio of the IPS row's weights.
ESS_ROW = "IPS ESS/n"

# "Use the metric's own clip" in OPEMetric.estimate (None means no clipping).
_OWN = object()


def _cutoff(k) -> int | None:
    """Cornac's ``k`` (-1 = the whole ranking) as the core's cutoff (None = no cutoff)."""
    if isinstance(k, (list, tuple, np.ndarray)):
        # Cornac expands a list of cutoffs by calling the class with k alone, which would
        # silently drop the metric's propensities and clipping.
        raise ValueError(
            f"k must be one cutoff, got {shown(k)}: make one metric per cutoff (Cornac would "
            "rebuild a metric given several cutoffs without its propensities)"
        )
    if (
        isinstance(k, (bool, np.bool_))
        or not isinstance(k, (int, np.integer))
        or not (k == -1 or k > 0)
    ):
        raise ValueError(f"k must be a positive integer or -1 (whole ranking), got {shown(k)}")
    return None if k == -1 else int(k)


def _check_discount(discount) -> None:
    if discount is not None and not isinstance(discount, Discount):
        raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")


def _check_on(on, name: str) -> str:
    """Which interactions propensities are fitted on (:func:`item_counts`)."""
    if not isinstance(on, str) or on not in ("all", "train"):
        raise ValueError(f"{name} must be 'all' or 'train', got {shown(on)}")
    return on


def _check_cornac_seed(seed) -> None:
    """Cornac seeds a ``numpy.random.RandomState``: None, an integer in 0..2**32 − 1 or one."""
    if seed is None or isinstance(seed, np.random.RandomState):
        return
    integer = isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_))
    if not (integer and 0 <= seed < 2**32):
        raise ValueError(
            "seed must be None, an integer in 0..2**32 − 1 or a numpy RandomState (Cornac's), "
            f"got {shown(seed)}"
        )


def _check_split_size(size, name: str, *, zero: bool) -> float | int:
    """A held-out size as ``RatioSplit`` reads it: a fraction of the ratings in (0, 1), or a
    number of ratings (an integer >= 1); 0 too where ``zero`` (no validation set)."""
    low = 0 if zero else 1
    if isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_)):
        if size >= low:
            return size
    elif isinstance(size, (float, np.floating)) and (0 < size < 1 or (zero and size == 0)):
        return size
    interval = "[0, 1)" if zero else "(0, 1)"
    raise ValueError(
        f"{name} must be a fraction of the ratings in {interval} or a number of ratings (an "
        f"integer >= {low}), got {shown(size)}"
    )


def _check_eval_method(eval_method) -> None:
    if not isinstance(eval_method, BaseMethod) or eval_method.train_set is None:
        what = type(eval_method).__name__
        if isinstance(eval_method, BaseMethod):
            what = "one without a training set"
        raise TypeError(
            "eval_method must be a Cornac eval method after its split (e.g. "
            f"RatioSplit(data, ...)), got {what}"
        )


def _item_vector(fitted, n_items: int | None = None):
    """A fitted propensity model whose ``propensity_`` is one value per item: a 1-D vector,
    of ``n_items`` values when given (Cornac's internal item indices)."""
    p = fitted.propensity_
    if sp.issparse(p) or np.ndim(p) != 1:
        raise ValueError(
            f"propensity must be one value per item (a 1-D vector), got shape {np.shape(p)}; "
            "Cornac's metrics score one user at a time and take no user-dependent propensities"
        )
    if n_items is not None and np.shape(p)[0] != n_items:
        raise ValueError(
            f"propensity has {np.shape(p)[0]} values but the eval method has {n_items} items "
            "(Cornac's internal item indices 0..total_items−1): give one per item"
        )
    return fitted


class OPEMetric(RankingMetric):
    """Base of our Cornac ranking metrics: a core estimator with its propensities and discount.

    Its Cornac ``name`` says whether it is IPS-weighted: e.g. ``IPS-DCG@10`` with propensities,
    ``DCG@10`` without.

    Parameters
    ----------
    k : int
        Cutoff; -1 ranks the whole catalogue (Cornac's convention).
    propensity : None, fitted propensity model or 1-D array
        Exposure propensities in (0, 1] indexed by **Cornac's internal item index**; None means
        an unweighted metric. For raw item ids or a model still to be fitted, use
        :class:`CornacAdapter`.
    clip : float, "auto" or None
        Clipping of the IPS weights, passed to the core's :func:`~recpack_ope.metrics.dcg`:
        a number m clips at ``min(m, 1/p)`` (Jeunen et al. §6.2); default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`; None is the paper's
        unclipped estimator. Ignored without propensities.
    discount : Discount or None
        Curve shape, cut at k (default ``LogDiscount``, Cornac's and RecPack's log2 discount).

    Notes
    -----
    Cornac's ranking loop calls :meth:`compute` once per user, so the weights' reliability
    diagnostics of one user say nothing about the averaged estimate, and ``compute`` issues
    no per-user :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning`. Use
    :class:`PropensityStratifiedEvaluation` (or the core on the whole held-out set) to see
    the diagnostics of the estimate. For the same reason ``clip="auto"``, which selects the
    clipping from all users' estimates, works in :class:`PropensityStratifiedEvaluation` but
    not in Cornac's own loop (``compute`` raises a ``ValueError``): give a weighted metric a
    number there.
    """

    #: keyword arguments of the core's dcg() that make this estimator
    options: dict = {}
    #: the estimator in the metric's name, prefixed by ``IPS-`` when weighted
    label: str = "DCG"

    def __init__(
        self,
        k: int = -1,
        propensity=None,
        clip: float | str | None = RECOMMENDED_CLIP,
        discount: Discount | None = None,
    ):
        cutoff = _cutoff(k)
        _check_discount(discount)
        discount = LogDiscount() if discount is None else discount
        check_clip(clip, allow_auto=True)
        if propensity is not None and not hasattr(propensity, "propensity_"):
            if hasattr(propensity, "fit"):
                raise ValueError(
                    f"{type(propensity).__name__} is not fitted: fit it through "
                    "CornacAdapter(...).fit(eval_method) so it is indexed like Cornac's items"
                )
            propensity = FixedPropensity(propensity).fit()
        if propensity is not None:
            _item_vector(propensity)
        weighted = "" if propensity is None else "IPS-"
        super().__init__(name=f"{weighted}{self.label}@{k}", k=k)
        self.propensity, self.clip = propensity, clip
        self.discount = discount if cutoff is None else discount.with_cutoff(cutoff)

    @property
    def weighted(self) -> bool:
        """Whether the metric has propensities, i.e. is IPS-weighted."""
        return self.propensity is not None

    def estimate(self, y_true, ranking: TopK, propensity=None, clip=_OWN) -> EstimateResult:
        """The core estimate on held-out rewards; ``propensity`` and ``clip`` override the
        metric's own (the IPS row of :class:`PropensityStratifiedEvaluation`)."""
        p = self.propensity if propensity is None else propensity
        if p is None:
            return dcg(y_true, ranking, discount=self.discount, **self.options)
        return dcg(
            y_true,
            ranking,
            discount=self.discount,
            propensity=p,
            clip=self.clip if clip is _OWN else clip,
            **self.options,
        )

    def compute(self, gt_pos, pd_rank, **kwargs) -> float:
        """One user's value, as Cornac's ranking loop asks for it (Cornac ≥ 2 arguments)."""
        if self.propensity is not None and isinstance(self.clip, str):
            raise ValueError(
                f"{self.name} has clip={self.clip!r}, which selects the clipping from the "
                "estimate over all users at once (SLOPE); Cornac's ranking loop computes one user "
                "at a time. Give this metric a number (e.g. clip=100) or None (unclipped), or "
                "evaluate it with recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"
            )
        gt_pos = np.asarray(gt_pos, dtype=np.int64)
        ranked = np.asarray(pd_rank, dtype=np.int64)[: self.discount.cutoff]
        if gt_pos.size and gt_pos.min() < 0:
            raise ValueError(
                f"gt_pos has item index {int(gt_pos.min())}; Cornac's item indices are >= 0"
            )
        if self.propensity is not None:
            n_items = self.propensity.propensity_.shape[0]
            unknown = np.concatenate([gt_pos, ranked])
            if unknown.size and unknown.max() >= n_items:
                raise ValueError(
                    f"item index {int(unknown.max())} has no propensity: the propensities "
                    f"cover {n_items} items (fit them on this eval method's data)"
                )
        else:
            n_items = int(max(gt_pos.max(initial=-1), ranked.max(initial=-1))) + 1
        y = sp.csr_matrix(
            (np.ones(gt_pos.size), (np.zeros(gt_pos.size, int), gt_pos)), shape=(1, n_items)
        )
        with warnings.catch_warnings():
            # One user's weights do not diagnose the averaged estimate (class notes).
            warnings.simplefilter("ignore", ReliabilityWarning)
            return self.estimate(y, TopK(ranked[None, :])).value


class UnbiasedDCG(OPEMetric):
    """Unbiased (IPS) DCG@k, Jeunen et al. (KDD'24) Eq. 10–11, named ``IPS-DCG@k``; plain
    ``DCG@k`` when ``propensity=None``."""

    options = {}
    label = "DCG"


class IPSNDCG(OPEMetric):
    """Per-user nDCG@k with IPS gains (Jeunen et al. §5), named ``IPS-nDCG@k``; ``nDCG@k``,
    equal to Cornac's ``NDCG``, when ``propensity=None`` (binary relevance)."""

    options = {"normalise": "per_user"}
    label = "nDCG"


class PostNormalisedDCG(OPEMetric):
    """pnDCG@k = Σ_u DCG_u / Σ_u iDCG_u (Jeunen et al. §5, Lemma 5.1), named ``pnDCG@k``, or
    ``IPS-pnDCG@k`` with IPS gains when it has propensities.

    Not a mean of per-user values, so Cornac's own ranking loop cannot average it: use it with
    :class:`PropensityStratifiedEvaluation`, which evaluates the whole held-out set at once.
    """

    options = {"normalise": "post"}
    label = "pnDCG"

    def compute(self, gt_pos, pd_rank, **kwargs) -> float:
        raise ValueError(
            "PostNormalisedDCG is Σ DCG_u / Σ iDCG_u over all users, which Cornac's per-user "
            "averaging cannot produce; evaluate it with "
            "recpack_ope.adapters.cornac.PropensityStratifiedEvaluation"
        )


def item_counts(eval_method: BaseMethod, on: str = "all") -> np.ndarray:
    """Interactions per Cornac internal item index (every rating counts, as in Cornac).

    ``on="all"`` counts the train, validation and test sets (Cornac's propensity estimate);
    ``on="train"`` the training set only.
    """
    _check_on(on, "on")
    _check_eval_method(eval_method)
    sets = [eval_method.train_set]
    if on == "all":
        sets += [s for s in (eval_method.val_set, eval_method.test_set) if s is not None]
    items = np.concatenate([np.asarray(s.uir_tuple[1]) for s in sets])
    return np.bincount(items, minlength=eval_method.total_items).astype(np.float64)


def _fit_on_counts(model, eval_method: BaseMethod, on: str):
    """``model`` fitted on the eval method's item counts, one propensity per item."""
    fitted = model.fit(item_counts(eval_method, on))
    if not hasattr(fitted, "propensity_"):
        raise TypeError(
            f"{type(model).__name__}.fit(counts) returned {type(fitted).__name__}, not a fitted "
            "propensity model: fit must set propensity_ (one value per item) and return self"
        )
    return _item_vector(fitted, eval_method.total_items)


def _by_internal_index(propensity: Mapping | pd.Series, iid_map: Mapping) -> np.ndarray:
    """Propensities keyed by raw item id placed on Cornac's internal item indices.

    Cornac's ``global_iid_map`` numbers its raw ids 0..n−1. A raw id given twice, or without
    a number, or a propensity outside (0, 1] is refused with the raw id named; raw ids that
    are not among the eval method's items are ignored.
    """
    raws = np.empty(len(iid_map), dtype=object)
    raws[np.fromiter(iid_map.values(), dtype=np.int64, count=len(iid_map))] = list(iid_map)
    return propensities_by_raw_id(propensity, raws, "the eval method's")


def _given_values(propensity):
    """The per-item values of a :class:`CornacAdapter` propensity given by index (an array,
    a ``FixedPropensity`` or an object holding ``propensity_``); None for a model to fit,
    a raw-id mapping or None."""
    if isinstance(propensity, FixedPropensity):
        return propensity.propensity
    if propensity is None or hasattr(propensity, "fit"):
        return None
    if isinstance(propensity, (Mapping, pd.Series)):
        return None
    return getattr(propensity, "propensity_", propensity)


class CornacAdapter:
    """Builds our Cornac metrics with propensities placed on an eval method's item indices.

    Parameters
    ----------
    propensity : None, propensity model, 1-D array, or mapping raw item id → propensity
        None means ``p ≡ 1``. A model (e.g. ``PowerLawPropensity()``) is fitted by
        :meth:`fit` on the eval method's item counts; a mapping or ``pandas.Series`` keyed by
        raw item ids is placed on Cornac's internal indices through ``global_iid_map`` (a raw
        id given twice is refused); an array gives one value per internal index. Either way
        :meth:`fit` refuses anything but one propensity per item of the eval method.
    discount : Discount or None
        Curve shape (default ``LogDiscount``).
    clip : float, "auto" or None
        Clipping of the IPS weights (see :class:`OPEMetric`); default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`, None for the paper's
        unclipped estimator. Checked at construction. ``"auto"`` works only where the whole
        held-out set is evaluated at once (:class:`PropensityStratifiedEvaluation`); Cornac's
        per-user loop needs a number or None.
    on : {"all", "train"}
        Which interactions a propensity model is fitted on (see :func:`item_counts`).
    """

    def __init__(
        self,
        propensity=None,
        discount: Discount | None = None,
        clip: float | str | None = RECOMMENDED_CLIP,
        on: str = "all",
    ):
        _check_discount(discount)
        _check_on(on, "on")
        check_clip(clip, allow_auto=True)
        if _given_values(propensity) is not None:
            # Given values are checked now, before any split or training.
            _item_vector(FixedPropensity(_given_values(propensity)).fit())
        self.propensity, self.discount, self.on = propensity, discount, on
        self.clip = clip

    def fit(self, eval_method: BaseMethod) -> CornacAdapter:
        """Fit or place the propensities for ``eval_method`` (after its split).

        Raises
        ------
        ValueError
            When the propensities do not give exactly one value per item of the eval method
            (``eval_method.total_items``), or a raw item id is missing or given twice.
        """
        _check_eval_method(eval_method)
        if isinstance(self.propensity, (Mapping, pd.Series)):
            values = _by_internal_index(self.propensity, eval_method.global_iid_map)
            self.propensity_ = FixedPropensity(values).fit()
        elif _given_values(self.propensity) is not None:
            fixed = FixedPropensity(_given_values(self.propensity)).fit()
            self.propensity_ = _item_vector(fixed, eval_method.total_items)
        elif self.propensity is not None:
            self.propensity_ = _fit_on_counts(self.propensity, eval_method, self.on)
        else:
            self.propensity_ = None
        return self

    def metrics(self, k: int = 10) -> list[OPEMetric]:
        """:class:`UnbiasedDCG` and :class:`IPSNDCG` at ``k`` with the fitted propensities
        (named ``IPS-DCG@k`` and ``IPS-nDCG@k``; ``DCG@k`` and ``nDCG@k`` without
        propensities), for any Cornac eval method; add :class:`PostNormalisedDCG` with
        :class:`PropensityStratifiedEvaluation`."""
        if not hasattr(self, "propensity_"):
            raise ValueError("call adapter.fit(eval_method) before metrics()")
        return [
            cls(k=k, propensity=self.propensity_, clip=self.clip, discount=self.discount)
            for cls in (UnbiasedDCG, IPSNDCG)
        ]


def _core_metric(metric: RankingMetric):
    """(callable(y_true, ranking, propensity=None, clip=None) → EstimateResult, cutoff) for a
    Cornac metric; ``propensity`` and ``clip`` make the IPS row of the stratified evaluation."""
    if isinstance(metric, OPEMetric):

        def estimate(y, r, propensity=None, clip=_OWN):
            return metric.estimate(y, r, propensity=propensity, clip=clip)

        return estimate, metric.discount.cutoff
    cutoff = _cutoff(metric.k)
    if type(metric) is NDCG:
        discount = LogDiscount(cutoff)
        return (
            lambda y, r, propensity=None, clip=None: ndcg(
                y, r, discount=discount, propensity=propensity, clip=clip
            ),
            cutoff,
        )
    if type(metric) is Recall:
        return (
            lambda y, r, propensity=None, clip=None: recall(
                y, r, k=cutoff or y.shape[1], propensity=propensity, clip=clip
            ),
            cutoff,
        )
    raise ValueError(
        f"{metric.name} is not supported by PropensityStratifiedEvaluation; it evaluates "
        "Cornac's NDCG and Recall and recpack-ope's UnbiasedDCG, IPSNDCG and PostNormalisedDCG"
    )


def _dot_product_model(model) -> bool:
    """Whether Cornac documents the model's scores as user·item vector dot products."""
    from cornac.models.recommender import MEASURE_DOT

    try:
        return model.get_vector_measure() == MEASURE_DOT
    except (AttributeError, NotImplementedError):
        return False


def _one_user_scores(model, user: int, n_items: int) -> np.ndarray:
    """``model.score(user)`` over the first ``n_items`` items, as Cornac's ``rank`` gets it."""
    try:
        scores = np.asarray(model.score(user), dtype=np.float64)
    except ScoreException:
        return np.full(n_items, float(model.default_score()))
    if scores.size < n_items:
        scores = np.concatenate([scores, np.full(n_items - scores.size, scores.min())])
    return scores[:n_items]


class _Scorer:
    """Scores for a batch of users: one matrix product for dot-product models (checked against
    ``model.score`` on the first user of every batch), one ``model.score`` call per user
    otherwise.

    User vectors may be a scipy sparse matrix (Cornac's EASE returns its training matrix),
    and the item matrix may hold items in rows (``U @ V.T``, BPR, …) or in columns (``U @ B``,
    EASE's item-item weights): the first batch decides which product reproduces
    ``model.score``. Models whose scores add terms to the product (MF's and SVD's biases) are
    scored one user at a time, which is exact but slower.
    """

    def __init__(self, model, n_items: int):
        self.model = getattr(model, "best_model", None) or model  # hyperopt searches wrap it
        self.n_items = n_items
        self.batched = _dot_product_model(self.model)
        self.products = []
        if self.batched:
            users = self.model.get_user_vectors()
            self.users_ = sp.csr_matrix(users) if sp.issparse(users) else np.asarray(users)
            items = np.asarray(self.model.get_item_vectors())
            # Candidate score matrices (dimensions × items), tried in this order.
            self.products = [items[:n_items].T]
            if items.ndim == 2 and items.shape[0] == self.users_.shape[1]:
                self.products.append(items[:, :n_items])

    def __call__(self, users: np.ndarray) -> np.ndarray:
        if self.batched and users.max() < self.users_.shape[0]:
            reference = _one_user_scores(self.model, int(users[0]), self.n_items)
            vectors = self.users_[users]
            for k, product in enumerate(self.products):
                if product.shape[0] != vectors.shape[1] or product.shape[1] != self.n_items:
                    continue
                scores = np.asarray(vectors @ product, dtype=np.float64)
                if np.allclose(scores[0], reference, rtol=1e-4, atol=1e-6):
                    self.products = [product]  # the orientation that matched, for later batches
                    return scores
            self.batched = False
        return np.vstack([_one_user_scores(self.model, int(u), self.n_items) for u in users])


def _known_items(eval_method: BaseMethod) -> int:
    """Items Cornac ranks: the training items, or every item when unknowns are kept."""
    return (
        eval_method.train_set.num_items if eval_method.exclude_unknowns else eval_method.total_items
    )


def _positives(eval_method: BaseMethod, dataset, n_items: int) -> sp.csr_matrix:
    """users × known items matrix of a dataset's ratings ≥ the eval method's rating_threshold."""
    users, items, ratings = (np.asarray(a) for a in dataset.uir_tuple)
    keep = (ratings >= eval_method.rating_threshold) & (items < n_items)
    return sp.csr_matrix(
        (np.ones(keep.sum()), (users[keep], items[keep])), shape=(eval_method.total_users, n_items)
    )


def rank_test_users(
    eval_method: BaseMethod,
    model,
    users: np.ndarray,
    cutoff: int | None,
    batch_users: int = 1024,
    verbose: bool = False,
) -> TopK:
    """Top-``cutoff`` items of ``users`` among Cornac's candidates, scored in batches.

    Cornac's candidates: all known items but the user's positive training and validation
    items, which stay candidates when they are also held out. Rows follow ``users``.
    """
    _check_eval_method(eval_method)
    users = np.asarray(users)
    if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):
        raise ValueError(
            "users must be a 1-D array of Cornac user indices, got dtype "
            f"{users.dtype} and shape {users.shape}"
        )
    users = users.astype(np.int64, copy=False)
    outside = np.flatnonzero((users < 0) | (users >= eval_method.total_users))
    if outside.size:
        raise ValueError(
            f"users has user index {int(users[outside[0]])} at position {int(outside[0])}, outside "
            f"the eval method's users 0..{eval_method.total_users - 1}"
        )
    cutoff = check_positive_int(cutoff, "cutoff", allow_none=True)
    batch_users = check_positive_int(batch_users, "batch_users")
    n_items = _known_items(eval_method)
    held = _positives(eval_method, eval_method.test_set, n_items)[users]
    seen = _positives(eval_method, eval_method.train_set, n_items)
    if eval_method.val_set is not None:
        seen = seen + _positives(eval_method, eval_method.val_set, n_items)
    seen = seen[users]
    k = cutoff or n_items
    scorer = _Scorer(model, n_items)
    parts = []
    steps = range(0, users.size, batch_users)
    for start in tqdm(steps, desc=f"Ranking [{model.name}]", disable=not verbose):
        rows = slice(start, start + batch_users)
        scores = scorer(users[rows])
        scores[(seen[rows].toarray() > 0) & ~(held[rows].toarray() > 0)] = -np.inf
        parts.append(TopK.from_scores(scores, k))
    return TopK.stack(parts) if parts else TopK(np.empty((0, min(k, n_items)), dtype=np.int64))


class StratifiedModelResult(Result):
    """One model's stratified evaluation: a Cornac ``Result`` whose ``metric_avg_results``
    hold the stratified values, printed as the Closed / IPS / Q1…QS / Stratified table.

    Attributes
    ----------
    estimates : dict
        Metric name → :class:`~recpack_ope.StratifiedResult` (holdout and strata inside).
    ips : dict
        Metric name → IPS :class:`~recpack_ope.EstimateResult`; its ``diagnostics`` describe
        the weights (the table's ``IPS ESS/n`` row).
    user_index : numpy.ndarray
        Cornac user index of every row of the held-out matrix (the estimates' ``user_ids``
        are positions in it).
    y_true, ranking, propensity : scipy.sparse.csr_matrix, TopK, numpy.ndarray or None
        The held-out positives, the model's ranking of the same rows and the propensities
        of the strata, for re-analysis without retraining (e.g. other strata); kept only
        with ``PropensityStratifiedEvaluation(keep_rankings=True)``.
    """

    def __init__(
        self,
        model_name: str,
        estimates: dict[str, StratifiedResult],
        ips: dict[str, EstimateResult],
        user_index: np.ndarray,
        train_time: float,
        test_time: float,
        y_true=None,
        ranking=None,
        propensity=None,
        dr: dict[str, EstimateResult] | None = None,
    ):
        averages = OrderedDict((name, r.value) for name, r in estimates.items())
        averages["Train (s)"], averages["Test (s)"] = train_time, test_time
        per_user = OrderedDict(
            (name, dict(zip(user_index[r.user_ids].tolist(), r.per_user.tolist(), strict=True)))
            for name, r in estimates.items()
        )
        super().__init__(model_name, averages, per_user)
        self.estimates, self.ips, self.user_index = estimates, ips, user_index
        self.y_true, self.ranking, self.propensity = y_true, ranking, propensity
        self.dr = dr or {}

    def rows(self) -> pd.DataFrame:
        """Closed, IPS, IPS ESS/n, (DR,) Q1…QS and Stratified values of every metric, with SIZE.

        The ``DR`` row, present when the evaluation has a reward model, holds the doubly
        robust DCG of the ``UnbiasedDCG`` metrics (NaN for the others).

        ``IPS ESS/n`` is the Kish effective sample size of the IPS row's weights over the
        held-out interactions (1 when all weights are equal); an IPS value whose ratio is below
        the diagnostics' threshold is unreliable (:meth:`unreliable_ips`).
        """
        first = next(iter(self.estimates.values()))
        dr = ["DR"] if self.dr else []
        labels = ["Closed", "IPS", ESS_ROW, *dr, *[s.label for s in first.strata], "Stratified"]
        table = pd.DataFrame(index=labels)
        for name, r in self.estimates.items():
            diagnostics = self.ips[name].diagnostics
            ratio = np.nan if diagnostics is None else diagnostics.ess_ratio
            extra = [self.dr[name].value if name in self.dr else np.nan] if dr else []
            table[name] = [
                r.holdout.value,
                self.ips[name].value,
                ratio,
                *extra,
                *[s.value for s in r.strata],
                r.value,
            ]
        n = first.n_interactions
        table["SIZE"] = [
            n,
            n,
            n,
            *([n] if dr else []),
            *[s.n_interactions for s in first.strata],
            n,
        ]
        return table

    def unreliable_ips(self) -> dict[str, WeightDiagnostics]:
        """Metric name → diagnostics of the IPS values whose ESS ratio is below threshold."""
        return {
            name: r.diagnostics
            for name, r in self.ips.items()
            if r.diagnostics is not None and not r.diagnostics.reliable
        }

    def __str__(self) -> str:
        text = f"[{self.model_name}]\n{self.rows().to_string(float_format=lambda v: f'{v:.4f}')}"
        unreliable = self.unreliable_ips()
        if unreliable:
            threshold = min(d.threshold for d in unreliable.values())
            text += (
                f"\nIPS rows marked unreliable: ESS/n < {threshold:g} for "
                + ", ".join(f"{name} ({d.ess_ratio:.3g})" for name, d in unreliable.items())
                + "; clip the weights (clip=...) or read the IPS row with caution"
            )
        selected = {
            name: r.clip_selection.clip
            for name, r in self.ips.items()
            if getattr(r, "clip_selection", None) is not None
        }
        if selected:
            text += "\nIPS clipping selected by SLOPE: " + ", ".join(
                f"{name} m={'∞' if m is None else f'{m:g}'}" for name, m in selected.items()
            )
        return text


class PropensityStratifiedEvaluation(_CornacPSE):
    """Propensity-stratified evaluation (Jadidinejad et al., TOIS 2021) for ``cornac.Experiment``.

    A random ratio split, like ``RatioSplit``; power-law propensities fitted on the data; the
    held-out positive feedback (rating ≥ ``rating_threshold``) split into ``n_strata``
    propensity strata; every metric evaluated on the whole held-out set (Closed), with IPS
    weights (IPS), per stratum (Q1…) and recombined by Eq. 4 (Stratified). Subclasses
    Cornac's class only so ``cornac.Experiment`` prints one such table per model.

    Parameters
    ----------
    data : list of (user, item, rating) triplets
    test_size, val_size : float or int
        As in ``RatioSplit``: a fraction of the ratings in (0, 1) or a number of ratings;
        ``val_size`` 0 means no validation set. Other values (0, 1.0, NaN, negative) are
        refused rather than read as Cornac would (``test_size=0`` tests on every rating).
    n_strata : int
        Number of strata (the paper uses 2).
    binning : {"width", "mass"}
        Equal-width propensity bins (the paper's and Cornac's) or equal-mass quantiles.
    propensity : propensity model or None
        Fitted on the item counts; default ``PowerLawPropensity(variant="cornac")``, the
        exponent Cornac's and the paper's code use (``n_i^γ`` above ``xmin``).
    fit_on : {"all", "train"}
        Fit the propensities on all interactions (Cornac's choice) or the training part only.
    rating_threshold, seed, exclude_unknowns, verbose
        As in ``RatioSplit``; ``seed`` is None, an integer in 0..2**32 − 1 or a
        ``numpy.random.RandomState``. A threshold no test rating reaches is refused.
    batch_users : int
        Users scored per batch.
    keep_rankings : bool
        Keep each model's ranking and the held-out matrix in its result (memory: users ×
        cutoff integers per model).
    clip : float, "auto" or None
        Clipping of the IPS row's weights, passed to the core's estimators; default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`. ``clip=None`` reproduces
        the paper's and Cornac's unclipped IPS row; ``"auto"`` selects m per metric by SLOPE
        (printed under the table). Checked at construction.
    reward_model : Cornac recommender, optional
        Adds a ``DR`` row: doubly robust DCG (:func:`recpack_ope.metrics.doubly_robust.dr_dcg`)
        for every ``UnbiasedDCG`` metric, with the IPS row's propensities and clipping. The
        recommender is fitted once on the training set; its scores of the test users are
        mapped to click probabilities by a :class:`~recpack_ope.reward.ScoreCalibration`
        fitted, with the propensities, on the validation positives (``val_size > 0``) or
        else on the training positives (in-sample, so over-confident). Held-out data carry
        no impressions, so DR differs from IPS only where clipping cut weights
        (docs/definitions.md, "Doubly robust DCG").

    Notes
    -----
    Stratum shares ``P(s)`` count the positive held-out feedback that the metrics evaluate;
    Cornac's and the paper's code count every test rating, including those below the
    threshold.

    The table shows the effective sample size of the IPS row's weights (``IPS ESS/n``) and,
    under it, which IPS values are unreliable; instead of one
    :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` per metric, a model's
    evaluation issues at most one, listing every unreliable weighted value.
    """

    def __init__(
        self,
        data,
        test_size=0.2,
        val_size=0.0,
        n_strata: int = 2,
        binning: str = "width",
        propensity=None,
        fit_on: str = "all",
        rating_threshold: float = 1.0,
        seed=None,
        exclude_unknowns: bool = True,
        verbose: bool = False,
        batch_users: int = 1024,
        keep_rankings: bool = False,
        clip: float | str | None = RECOMMENDED_CLIP,
        reward_model=None,
        **kwargs,
    ):
        # Every argument is checked before Cornac splits the data or anything is trained.
        if binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
        check_clip(clip, allow_auto=True)
        n_strata = check_positive_int(n_strata, "n_strata")
        batch_users = check_positive_int(batch_users, "batch_users")
        _check_on(fit_on, "fit_on")
        check_finite_number(rating_threshold, "rating_threshold")
        _check_cornac_seed(seed)
        for name, flag in (
            ("exclude_unknowns", exclude_unknowns),
            ("verbose", verbose),
            ("keep_rankings", keep_rankings),
        ):
            check_bool(flag, name)
        if propensity is not None and not callable(getattr(propensity, "fit", None)):
            raise TypeError(
                "propensity must be a propensity model fitted on the item counts (e.g. "
                "PowerLawPropensity(), or FixedPropensity(values) for given values) or None, "
                f"got {type(propensity).__name__}"
            )
        if reward_model is not None and not all(
            callable(getattr(reward_model, m, None)) for m in ("fit", "score")
        ):
            raise TypeError(
                "reward_model must be a Cornac recommender (with fit and score, e.g. MostPop()) "
                f"or None, got {type(reward_model).__name__}"
            )
        if isinstance(data, (str, bytes)) or not hasattr(data, "__len__") or len(data) == 0:
            raise ValueError("data must be a non-empty list of (user, item, rating) triplets")
        sizes = (
            _check_split_size(val_size, "val_size", zero=True),
            _check_split_size(test_size, "test_size", zero=False),
            len(data),
        )
        try:
            sizes = RatioSplit.validate_size(*sizes)
        except ValueError as error:
            raise ValueError(
                f"test_size={shown(test_size)} and val_size={shown(val_size)} leave no training "
                f"data among the {len(data)} ratings: {error}"
            ) from None
        self.clip = clip
        BaseMethod.__init__(
            self,
            data=data,
            rating_threshold=rating_threshold,
            seed=seed,
            exclude_unknowns=exclude_unknowns,
            verbose=verbose,
            **kwargs,
        )
        self.n_strata, self.binning, self.batch_users = n_strata, binning, batch_users
        self.keep_rankings = keep_rankings
        self.train_size, self.val_size, self.test_size = sizes
        RatioSplit._split(self)
        ratings = np.asarray(self.test_set.uir_tuple[2])
        if not (ratings >= rating_threshold).any():
            raise ValueError(
                f"no test rating reaches rating_threshold={shown(rating_threshold)} (the largest "
                f"is {shown(ratings.max()) if ratings.size else 'none'}): nothing is relevant, so "
                "nothing can be evaluated"
            )
        self.propensity = PowerLawPropensity(variant="cornac") if propensity is None else propensity
        self.propensity_ = _fit_on_counts(self.propensity, self, fit_on).propensity_
        self.n_items_ = _known_items(self)
        self.reward_model = reward_model
        self._rewards: tuple[np.ndarray, CalibratedScores] | None = None

    def reward_for(self, users: np.ndarray) -> CalibratedScores:
        """The calibrated reward model over ``users`` (rows) × known items, fitted once."""
        if self._rewards is None or not np.array_equal(self._rewards[0], users):
            model = (
                self.reward_model.clone()
                if hasattr(self.reward_model, "clone")
                else self.reward_model
            )
            model.fit(self.train_set, self.val_set)
            scores = np.vstack(
                [
                    _Scorer(model, self.n_items_)(users[i : i + self.batch_users])
                    for i in range(0, users.size, self.batch_users)
                ]
            )
            labelled = self.val_set if self.val_set is not None else self.train_set
            clicks = self._positives(labelled)[users]
            p = self.propensity_[: self.n_items_]
            calibration = ScoreCalibration().fit(scores, clicks, propensity=p)
            self._rewards = (users, calibration.reward_model(scores))
        return self._rewards[1]

    def _positives(self, dataset) -> sp.csr_matrix:
        return _positives(self, dataset, self.n_items_)

    def rank(self, model, users: np.ndarray, cutoff: int | None) -> TopK:
        """Top-``cutoff`` candidates of ``users`` (rows of the result), batched."""
        return rank_test_users(self, model, users, cutoff, self.batch_users, self.verbose)

    def evaluate(self, model, metrics, user_based, show_validation=True):
        """Fit ``model``, then evaluate ``metrics`` Closed / IPS / per stratum / Stratified.

        Returns
        -------
        (StratifiedModelResult, None)
            Cornac's ``Experiment`` contract; there is no separate validation result.
        """
        if not callable(getattr(model, "fit", None)):
            raise TypeError(f"model must be a Cornac recommender, got {type(model).__name__}")
        rating_metrics, ranking_metrics = self.organize_metrics(metrics)
        if not ranking_metrics and not rating_metrics:
            raise ValueError(
                "metrics is empty: give ranking metrics, e.g. [NDCG(k=10), Recall(k=10)]"
            )
        if rating_metrics:
            raise ValueError(
                f"rating metrics ({', '.join(m.name for m in rating_metrics)}) are not "
                "stratified by propensity; evaluate them with cornac's RatioSplit"
            )
        plans = {m.name: _core_metric(m) for m in ranking_metrics}
        self._reset()
        start = time.time()
        model.fit(self.train_set, self.val_set)
        train_time = time.time() - start

        start = time.time()
        positives = self._positives(self.test_set)
        users = np.flatnonzero(np.diff(positives.indptr) > 0)
        cutoffs = [c for _, c in plans.values()]
        ranking = self.rank(model, users, None if None in cutoffs else max(cutoffs))
        y_true = positives[users]
        p = self.propensity_[: self.n_items_]
        estimates, ips = {}, {}
        with warnings.catch_warnings():
            # Reported once for the model below, and in the table, not once per metric.
            warnings.simplefilter("ignore", ReliabilityWarning)
            for name, (estimate, _) in plans.items():
                estimates[name] = stratified(
                    estimate,
                    y_true,
                    ranking,
                    stratify_by=p,
                    n_strata=self.n_strata,
                    binning=self.binning,
                )
                ips[name] = estimate(y_true, ranking, propensity=p, clip=self.clip)
            dr = {}
            if self.reward_model is not None:
                rewards = self.reward_for(users)
                dr = {
                    m.name: dr_dcg(
                        y_true,
                        ranking,
                        discount=m.discount,
                        reward_model=rewards,
                        propensity=p,
                        clip=self.clip,
                    )
                    for m in ranking_metrics
                    if type(m) is UnbiasedDCG
                }
        _warn_unreliable(model.name, estimates, ips)
        kept = (y_true, ranking, p) if self.keep_rankings else (None, None, None)
        result = StratifiedModelResult(
            model.name, estimates, ips, users, train_time, time.time() - start, *kept, dr=dr
        )
        if self.verbose:
            print(result)
        return result, None


def _warn_unreliable(
    model: str, estimates: dict[str, StratifiedResult], ips: dict[str, EstimateResult]
) -> None:
    """One ReliabilityWarning for a model's evaluation, listing every unreliable weighted
    value: the IPS row, and the other rows of metrics that carry their own propensities."""
    found = []
    for name, r in estimates.items():
        rows = [("IPS", ips[name]), ("Closed", r.holdout), *[(s.label, s.result) for s in r.strata]]
        for row, result in rows:
            diagnostics = getattr(result, "diagnostics", None)
            if diagnostics is not None and not diagnostics.reliable:
                found.append(
                    f"{row} {name} (ESS/n {diagnostics.ess_ratio:.3g} < {diagnostics.threshold:g})"
                )
    if found:
        warnings.warn(
            f"{model}: unreliable weighted estimates, their weights' effective sample size is "
            f"too small: {'; '.join(found)}. Clip the weights (clip=...) or check the "
            "propensities; the table's 'IPS ESS/n' row shows the IPS ratios.",
            ReliabilityWarning,
            stacklevel=3,
        )


def simpsons_paradox(
    a: StratifiedModelResult,
    b: StratifiedModelResult,
    metric: str | None = None,
    alpha: float = 0.05,
) -> SimpsonsParadoxReport:
    """Jadidinejad et al. Table 2 for two models of a :class:`PropensityStratifiedEvaluation`
    experiment (``experiment.result[i]``), on ``metric`` (default: the first)."""
    for name, result in (("a", a), ("b", b)):
        if not isinstance(result, StratifiedModelResult):
            raise TypeError(
                f"{name} must be a StratifiedModelResult (experiment.result[i] of a "
                f"PropensityStratifiedEvaluation experiment), got {type(result).__name__}"
            )
    names = list(a.estimates)
    metric = names[0] if metric is None else metric
    if metric not in a.estimates or metric not in b.estimates:
        raise ValueError(f"no metric {metric!r}; the results have {names}")
    return _report(
        a.estimates[metric],
        b.estimates[metric],
        names=(a.model_name, b.model_name),
        ips=(a.ips[metric], b.ips[metric]),
        alpha=alpha,
    )


def _run_results(experiment) -> list:
    """The per-model results of a run ``cornac.Experiment``."""
    if not all(hasattr(experiment, a) for a in ("result", "models", "eval_method")):
        raise TypeError(f"experiment must be a cornac.Experiment, got {type(experiment).__name__}")
    if experiment.result is None:
        raise ValueError("the experiment has no results yet: call experiment.run() first")
    return list(experiment.result)


def _distinct_names(names: list[str]) -> list[str]:
    """Model names, numbered where several models share one (``BPR (1)``, ``BPR (2)``), so
    no model's values replace another's."""
    return [
        f"{n} ({names[:i].count(n) + 1})" if names.count(n) > 1 else n for i, n in enumerate(names)
    ]


def tied_with_best(
    experiment, metric: str, alpha: float = 0.05, correction: str | None = None, test: str = "t"
) -> TiedWithBest:
    """Which models of a run ``cornac.Experiment`` are statistically tied with the best on
    ``metric`` (:func:`recpack_ope.inference.significance.tied_with_best`).

    Paired over the users every model was evaluated on, from Cornac's per-user results
    (``Result.metric_user_results``; for :class:`PropensityStratifiedEvaluation` the
    stratified per-user contributions).

    Parameters
    ----------
    experiment : cornac.Experiment
        After ``run()``, with at least two models and a single train/test split. Models that
        share a name are told apart as ``"BPR (1)"``, ``"BPR (2)"``, as in :func:`add_rpp`.
    metric : str
        A metric name of the results, e.g. ``"NDCG@10"``.
    alpha, correction, test
        As in :func:`recpack_ope.inference.significance.tied_with_best` (Holm-corrected paired
        t-tests against the best by default).

    Returns
    -------
    TiedWithBest
    """
    results = _run_results(experiment)
    if len(results) < 2:
        raise ValueError(f"experiment must have run at least two models, got {len(results)}")
    if any(not hasattr(r, "metric_user_results") for r in results):
        raise ValueError(
            "tied_with_best needs per-user results of one train/test split; cross-validation "
            "keeps only each fold's averages"
        )
    per_model = {}
    for name, r in zip(_distinct_names([r.model_name for r in results]), results, strict=True):
        values = (r.metric_user_results or {}).get(metric)
        if values is None:
            known = sorted((r.metric_user_results or {}).keys())
            raise ValueError(
                f"no per-user results for metric {metric!r} of {r.model_name}; known: {known}"
            )
        per_model[name] = values
    users = sorted(set.intersection(*(set(v) for v in per_model.values())))
    if len(users) < 2:
        raise ValueError(f"the models share {len(users)} evaluated users on {metric!r}; need 2")
    scores = SystemScores(
        names=tuple(per_model),
        user_ids=np.asarray(users),
        name=metric,
        per_user=np.array([[values[u] for values in per_model.values()] for u in users]),
    )
    return scores.tied_with_best(alpha=alpha, correction=correction, test=test)


def add_rpp(
    experiment, k: int | None = 10, weighting: str = "uniform", column: str | None = None
) -> PreferenceMatrix:
    """Recall-paired preference between the models of a run ``cornac.Experiment``.

    Ranks every test user's candidates with each (already fitted) model, as Cornac's own
    evaluation does, computes RPP between every pair of models on the test positives (rating
    ≥ the eval method's ``rating_threshold``) and adds each model's win rate (Eq. 7 divided by
    M − 1) as a column of ``experiment.result``, so ``print(experiment.result)`` shows it.

    Parameters
    ----------
    experiment : cornac.Experiment
        After ``run()``, with at least two models and a single train/test split (e.g.
        ``RatioSplit`` or :class:`PropensityStratifiedEvaluation`, whose printed tables do not
        show the column; it is in each result's ``metric_avg_results``).
    k : int or None
        Depth of the compared lists (``RPP@k``); relevant items below it count as omitted.
        None compares the whole rankings.
    weighting : {"uniform", "dcg", "inverse"}
        RPP, dcgRPP or invRPP.
    column : str or None
        Name of the added column (default e.g. ``"RPP@10 win"``); not one of the experiment's
        metrics or timings, whose values it would overwrite.

    Returns
    -------
    PreferenceMatrix
        Per-user preferences, axes named by model; ``.win_rates().ordering("mc4")`` orders the
        models, :mod:`recpack_ope.inference.significance` tests every pair.
    """
    results = _run_results(experiment)
    method = experiment.eval_method
    if isinstance(method, CrossValidation) or getattr(method, "test_set", None) is None:
        raise ValueError(
            "add_rpp needs a single train/test split (e.g. RatioSplit), not cross-validation"
        )
    models = list(experiment.models)
    if len(models) < 2:
        raise ValueError(
            f"RPP compares models: the experiment has {len(models)}, add at least one more"
        )
    k = check_positive_int(k, "k", allow_none=True)
    if column is not None and (not isinstance(column, str) or not column):
        raise ValueError(f"column must be a non-empty name or None, got {shown(column)}")
    taken = {"Train (s)", "Test (s)", *(results[0].metric_user_results or {})}
    if column in taken:
        raise ValueError(
            f"column {column!r} would overwrite the experiment's own {column!r} values; choose "
            "another name or None for the default"
        )
    positives = _positives(method, method.test_set, _known_items(method))
    users = np.flatnonzero(np.diff(positives.indptr) > 0)
    levels = RecallLevels.from_y_true(positives[users], weighting=weighting, graded=False)
    lengths = np.vstack(
        [levels.search_lengths(rank_test_users(method, m, users, k), k) for m in models]
    )
    matrix = levels.preference_matrix(_distinct_names([m.name for m in models]), lengths)
    column = column or f"{matrix.name}{'' if k is None else f'@{k}'} win"
    for result, value in zip(results, matrix.win_rates().means, strict=True):
        result.metric_avg_results[column] = float(value)
    return matrix
