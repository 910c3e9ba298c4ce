"""Recall@k: the share of a user's held-out rewards that the top k recommendations recover.

``Recall_u@k = Σ_i c_ui · w_ui · [r_u(i) ≤ k] / Σ_i c_ui · w_ui``, averaged over the users
with held-out rewards, with IPS weights ``w_ui = min(m, 1/p_ui)`` (1 without propensities).
It is defined for those users only: a user without held-out rewards has nothing to recall
(``0 / 0``), so ``population="all"`` is refused (docs/definitions.md, "Evaluated users and
estimands").
For binary rewards and ``p ≡ 1`` this is ``hits / n_u``, the definition of Cornac's
``Recall`` and RecPack's ``RecallK``; graded rewards count in proportion to their value.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_positive_int
from ..inference.diagnostics import ESS_RATIO_THRESHOLD
from ..inference.result import EstimateResult
from ..propensity.discount import CustomDiscount
from ..propensity.weights import RECOMMENDED_CLIP
from .dcg import _estimate, _required

__all__ = ["recall", "ips_recall"]


def recall(
    y_true, y_score, *, k: int, chunk_users: int | None = None, population: str = "observed"
) -> EstimateResult:
    """Recall@k of a model's rankings on held-out rewards: the share of each user's reward
    ``Σ_i c_ui`` that the top k hold, averaged over users.

    What it estimates: the mean, over the users with a held-out reward, of the share of their
    held-out reward in the top k; without propensities that share is of the rewards the
    logging policy let them give, and it has no online-reward reading.

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
    population : {"observed", "all"}
        Accepted for every held-out estimator alike; only ``"observed"`` (the users with a
        held-out reward) has a recall, ``"all"`` raises a ValueError saying why.

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
    return _recall(y_true, y_score, k=k, chunk_users=chunk_users, population=population)


def ips_recall(
    y_true,
    y_score,
    *,
    k: int,
    propensity=None,
    clip: float | str | None = RECOMMENDED_CLIP,
    chunk_users: int | None = None,
    ess_threshold: float = ESS_RATIO_THRESHOLD,
    population: str = "observed",
) -> EstimateResult:
    """Recall@k with IPS gains ``c·w``, ``w = min(m, 1/p)``, in the numerator and the
    user's total alike.

    What it estimates: the mean, over the users with a held-out reward, of a per-user ratio
    of two IPS estimates (the reward in the top k over the user's total), which has no
    online-reward reading even with the true propensities; only ``population="observed"``.

    Parameters
    ----------
    y_true, y_score, k, chunk_users
        As for :func:`recall`.
    propensity : fitted propensity model, 1-D array or sparse matrix
        Exposure propensities in (0, 1]. Required: :func:`recall` is the unweighted one.
    clip : float, "auto" or None
        Clip IPS weights at ``m``; default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`, the recommended
        configuration; None means no clipping (the unclipped estimator), ``"auto"`` selects m
        by SLOPE, as for :func:`recpack_ope.metrics.dcg.ips_dcg`.
    ess_threshold : float
        Effective-sample-size ratio below which a
        :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning` is issued.
    population : {"observed", "all"}
        As for :func:`recall`: ``"all"`` is refused.

    Returns
    -------
    EstimateResult
        As for :func:`recall`, with the weight diagnostics.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.metrics import ips_recall
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> p = np.array([0.5, 1.0, 0.25])  # user 0: gains 2 (item 0, top 1) and 4 (item 2)
    >>> round(ips_recall(y_true, scores, k=1, propensity=p).value, 4)
    0.6667
    """
    return _recall(
        y_true,
        y_score,
        k=k,
        chunk_users=chunk_users,
        propensity=_required(propensity, "ips_recall", "recall"),
        clip=clip,
        ess_threshold=ess_threshold,
        population=population,
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
