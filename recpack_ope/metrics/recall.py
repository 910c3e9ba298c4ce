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
from .dcg import _estimate, _required

__all__ = ["recall", "ips_recall"]


def recall(y_true, y_score, *, k: int, chunk_users: int | None = None) -> EstimateResult:
    """Recall@k of a model's rankings on held-out rewards: the share of each user's reward
    ``Σ_i c_ui`` that the top k hold, averaged over users.

    Parameters
    ----------
    y_true : scipy.sparse matrix or array_like, shape (n_users, n_items)
        Held-out rewards ``c_ui ≥ 0``. Explicit zeros are not interactions.
    y_score : array_like, scipy.sparse matrix or TopK
        Scores or precomputed rankings, as for :func:`recpack_ope.metrics.dcg.dcg`.
    k : int
        Cutoff.
    chunk_users : int or None
        Users per chunk, as for :func:`recpack_ope.metrics.dcg.dcg`.

    Returns
    -------
    EstimateResult
        Mean per-user recall with its per-user values and uncertainty.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import recall
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> recall(y_true, scores, k=1).value
    0.75
    """
    return _recall(y_true, y_score, k=k, chunk_users=chunk_users)


def ips_recall(
    y_true,
    y_score,
    *,
    k: int,
    propensity=None,
    clip: float | str | None = None,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
) -> EstimateResult:
    """Recall@k with IPS gains ``c·w``, ``w = min(m, 1/p)``, in the numerator and the
    user's total alike.

    Parameters
    ----------
    y_true, y_score, k, chunk_users
        As for :func:`recall`.
    propensity : fitted propensity model, 1-D array or sparse matrix
        Exposure propensities in (0, 1]. Required: :func:`recall` is the unweighted one.
    clip : float, "auto" or None
        Clip IPS weights at ``m``; None means no clipping, ``"auto"`` selects m by SLOPE, as
        for :func:`recpack_ope.metrics.dcg.ips_dcg`.
    ess_threshold : float
        Effective-sample-size ratio below which a
        :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued.

    Returns
    -------
    EstimateResult
        As for :func:`recall`, with the weight diagnostics.
    """
    return _recall(
        y_true,
        y_score,
        k=k,
        chunk_users=chunk_users,
        propensity=_required(propensity, "ips_recall", "recall"),
        clip=clip,
        ess_threshold=ess_threshold,
    )


def _recall(y_true, y_score, *, k, **options) -> EstimateResult:
    k = check_positive_int(k, "k")
    shape = getattr(y_true, "shape", np.shape(y_true))
    # No ranking reaches past the last item, so a deeper cutoff changes nothing (and the flat
    # discount below is never longer than the catalogue).
    depth = min(k, shape[1]) if len(shape) == 2 and shape[1] > 0 else k
    # A flat discount of length k turns DCG into the reward-weighted hit count in the top k;
    # dividing by the user's total gain Σ_i c·w gives recall.
    return _estimate(
        y_true,
        y_score,
        discount=CustomDiscount(np.ones(depth)),
        normalise="total",
        name=f"Recall@{k}",
        **options,
    )
