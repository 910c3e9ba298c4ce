"""Recall@k: the share of a user's held-out rewards that the top k recommendations recover.

``Recall_u@k = Σ_i c_ui · w_ui · [r_u(i) ≤ k] / Σ_i c_ui · w_ui``, averaged over the users
with held-out rewards, with IPS weights ``w_ui = min(m, 1/p_ui)`` (1 without propensities).
For binary rewards and ``p ≡ 1`` this is ``hits / n_u``, the definition of Cornac's
``Recall`` and RecPack's ``RecallK``; graded rewards count in proportion to their value.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_positive_int
from ..inference.diagnostics import ESS_RATIO_THRESHOLD
from ..inference.result import EstimateResult
from ..propensity.discount import CustomDiscount
from .dcg import _dcg

__all__ = ["recall"]


def recall(
    y_true,
    y_score,
    *,
    k: int,
    propensity=None,
    clip: float | str | None = None,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> EstimateResult:
    """Recall@k of a model's rankings on held-out rewards.

    Parameters
    ----------
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0``. Explicit zeros are not interactions.
    y_score : array_like, scipy.sparse matrix or TopK
        Scores or precomputed rankings, as for :func:`recpack_ope.metrics.dcg`.
    k : int
        Cutoff.
    propensity : None, fitted propensity model, 1-D array or sparse matrix
        Exposure propensities for IPS weights, as for :func:`recpack_ope.metrics.dcg`.
    clip : float, "auto" or None
        Clip IPS weights at ``m``; None means no clipping, ``"auto"`` selects m by SLOPE, as
        for :func:`recpack_ope.metrics.dcg`.
    chunk_users : int or None
        Users per chunk, as for :func:`recpack_ope.metrics.dcg`.
    ess_threshold : float
        Effective-sample-size ratio below which IPS-weighted recall issues a
        :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning`, as for
        :func:`recpack_ope.metrics.dcg`.

    Returns
    -------
    EstimateResult
        Mean per-user recall with its per-user values and uncertainty.
    """
    k = check_positive_int(k, "k")
    shape = getattr(y_true, "shape", np.shape(y_true))
    # No ranking reaches past the last item, so a deeper cutoff changes nothing (and the flat
    # discount below is never longer than the catalogue).
    depth = min(k, shape[1]) if len(shape) == 2 and shape[1] > 0 else k
    # A flat discount of length k turns DCG into the reward-weighted hit count in the top k;
    # dividing by the user's total gain Σ_i c·w gives recall.
    result = _dcg(
        y_true,
        y_score,
        discount=CustomDiscount(np.ones(depth)),
        propensity=propensity,
        clip=clip,
        normalise="total",
        self_normalised=False,
        chunk_users=chunk_users,
        ess_threshold=ess_threshold,
        name=f"Recall@{k}",
    )
    if result.diagnostics is not None:
        result.diagnostics.warn(result.name)
    return result
