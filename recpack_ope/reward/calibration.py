"""Platt scaling of a recommender's scores to click probabilities given examination.

:class:`ScoreCalibration` fits ``ρ̂(u, i) = σ(a · s_ui + b)`` (Platt 1999) by maximum
likelihood on clicks the scoring model was not trained on. Given exposure propensities
``p_ui`` the likelihood is that of the examination hypothesis (Oosterhuis, TOIS 2023)::

    P(click_ui = 1) = p_ui · σ(a · s_ui + b)

so ``σ(a·s + b)`` estimates relevance (the click probability of an examined item), the
``ρ̂`` that doubly robust estimates need; without propensities ``p ≡ 1`` and the fit is plain
Platt scaling / one-feature logistic regression. docs: "Reward models for doubly robust
estimates".
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from threadpoolctl import threadpool_limits

from .._chunks import CHUNK_ELEMENTS, rows_per_chunk
from .._sparse import SparseLookup
from .._validation import as_csr, check_positive_int, check_propensities
from ..propensity.weights import resolve_propensity
from .models import (
    CalibratedScores,
    check_matrix,
    check_real,
    first_bad,
    lookup,
)

__all__ = ["ScoreCalibration", "calibrated_reward_model"]


class ScoreCalibration(BaseEstimator):
    """Platt scaling (Platt 1999): scores → click probability given examination.

    Fits ``σ(a·s + b)`` by maximum likelihood, every (user, item) pair of the score matrix
    being one Bernoulli observation: clicked (an entry > 0 in ``clicks``) or not. With
    propensities ``p_ui`` in (0, 1] the observation's click probability is
    ``p_ui · σ(a·s_ui + b)`` (examination hypothesis), so the fitted ``σ(a·s + b)`` is the
    click probability *given examination* rather than the logged click rate; without them
    ``p ≡ 1``. The weighted negative log-likelihood

        ``−Σ w_ui [c_ui log(p_ui σ(z_ui)) + (1 − c_ui) log(1 − p_ui σ(z_ui))]``,
        ``z_ui = a·s_ui + b``

    is minimised with L-BFGS-B and its analytic gradient, on internally standardised scores
    (``slope_`` and ``intercept_`` are reported on the raw score scale). Unlike Platt's
    original recipe the 0/1 targets are not smoothed towards ``(N₊ + 1)/(N₊ + 2)``: on the
    many observations of a click log that prior is negligible.

    **Fit on held-out data.** The scores of the pairs a model was trained on are
    over-confident (it fitted those very clicks), so a calibration fitted there maps scores to
    probabilities that are too extreme. Fit on a validation split the model did not see, then
    apply the calibration to the model's scores for the evaluation split.

    **Subsampling.** When ``n_users · n_items > max_pairs`` every click is kept and each
    non-click is kept independently with probability ``q`` (Bernoulli sampling, seeded by
    ``seed``) and weighted ``1/q``, so the weighted log-likelihood is an unbiased estimate of
    the full one. ``q = m / n₀`` with ``n₀`` the number of non-clicks and
    ``m = max(max_pairs − n_clicks, max_pairs // 2, 1)`` the expected number kept (so about
    ``max_pairs`` pairs are used unless clicks alone take more than half the budget). The kept
    pairs are drawn as indices (geometric gaps between kept non-clicks), never as a dense
    users×items mask. Without subsampling every weight is 1.

    Parameters
    ----------
    max_pairs : int
        Budget of (user, item) observations (default 2 000 000), a positive integer.
    seed : int
        Seed of the non-click subsample (default 0), a non-negative integer; used only when
        subsampling.

    Attributes
    ----------
    slope_ : float
        a, on the raw score scale.
    intercept_ : float
        b, on the raw score scale.
    n_pairs_ : int
        Pairs the likelihood was computed on (clicks plus kept non-clicks).
    n_clicks_ : int
        Clicked pairs (all of them are used).
    sample_rate_ : float
        q, the probability that a non-click was kept (1.0 without subsampling).
    n_iter_ : int
        L-BFGS-B iterations.
    converged_ : bool
        Whether the optimiser converged; a ConvergenceWarning is raised when it did not.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.normal(size=(200, 100))
    >>> clicks = rng.random((200, 100)) < 1 / (1 + np.exp(-(2 * scores - 3)))
    >>> cal = ScoreCalibration().fit(scores, clicks)
    >>> round(cal.slope_, 1), round(cal.intercept_, 1)
    (2.0, -3.0)
    """

    def __init__(self, *, max_pairs: int = 2_000_000, seed: int = 0):
        self.max_pairs = max_pairs
        self.seed = seed

    # ------------------------------------------------------------------ fitting

    def fit(self, scores, clicks, propensity=None) -> ScoreCalibration:
        """Fit ``slope_`` and ``intercept_`` on held-out clicks.

        Parameters
        ----------
        scores : array_like or sparse matrix, shape (n_users, n_items)
            The model's scores, finite; a sparse matrix's missing entries are score 0.
            Integers beyond ±2**53, which float64 would round, are refused; a DataFrame is
            aligned by its user and item labels (as are ``clicks``).
        clicks : array_like or sparse matrix, shape (n_users, n_items)
            Held-out clicks, finite and ≥ 0: an entry > 0 is a click (its size is ignored),
            0 or missing is a non-click.
        propensity : None, fitted propensity model, 1-D array or users×items matrix
            Exposure probability ``p_ui`` in (0, 1] of each pair: a model contributes its
            ``propensity_``; a 1-D array holds one per item (a pandas Series is aligned by
            its item labels); a users×items array (or sparse matrix storing every pair used,
            each once: propensities are never summed) one per pair. None means ``p ≡ 1``.

        Returns
        -------
        ScoreCalibration
            self, fitted.

        Raises
        ------
        ValueError
            For invalid parameters or inputs (the message names the argument and, where there
            is one, the offending value and its (user, item)); when there is no pair (no
            user or no item), no click or no non-click; when the scores take a single value
            or separate clicks from non-clicks, so no finite maximum-likelihood fit exists.
        TypeError
            For text or other non-numeric scores, clicks or propensities (a
            :class:`~recpack_ope._validation.NonNumericError`, also a ValueError).
        """
        max_pairs = check_positive_int(self.max_pairs, "max_pairs")
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")

        scores = _check_scores(scores)
        shape = tuple(scores.shape)
        if 0 in shape:
            raise ValueError(
                f"scores has shape {shape}: no (user, item) pair to fit the calibration on; "
                "give the scores of at least one user and one item"
            )
        clicks = _check_clicks(clicks, shape)
        p = _check_propensity(propensity, shape)

        n_users, n_items = shape
        n_total = n_users * n_items
        # Clicked pairs as sorted linear indices u · n_items + i.
        click_keys = SparseLookup(clicks).keys
        n_clicks = int(click_keys.size)
        n_nonclicks = n_total - n_clicks
        if n_clicks == 0:
            raise ValueError(
                "clicks holds no click (no entry > 0): a calibration needs at least one click "
                "(positive) and cannot be fitted"
            )
        if n_nonclicks == 0:
            raise ValueError(
                "clicks holds no non-click (every entry is > 0): a calibration needs at least "
                "one non-click (negative) and cannot be fitted"
            )
        if n_total <= max_pairs:
            rate = 1.0
        else:
            rate = min(1.0, max(max_pairs - n_clicks, max_pairs // 2, 1) / n_nonclicks)
        ranks = _bernoulli_ranks(n_nonclicks, rate, seed)
        if ranks.size == 0:
            raise ValueError(
                f"the subsample kept no non-click (each kept with probability {rate:.3g}): "
                f"max_pairs = {max_pairs} is too small for these clicks; raise it"
            )
        nonclick_keys = _nonclick_keys(ranks, click_keys)

        keys = np.concatenate([click_keys, nonclick_keys])
        users, items = np.divmod(keys, n_items)
        y = np.zeros(keys.size, dtype=bool)
        y[:n_clicks] = True
        w = np.where(y, 1.0, 1.0 / rate)
        s = lookup(scores, users, items)
        pu = _propensities_at(p, users, items)

        a, b, result = _maximise(s, y, w, pu)
        self.slope_ = a
        self.intercept_ = b
        self.n_pairs_ = int(keys.size)
        self.n_clicks_ = n_clicks
        self.sample_rate_ = float(rate)
        self.n_iter_ = int(result.nit)
        self.converged_ = bool(result.converged)
        if not self.converged_:
            warnings.warn(
                f"ScoreCalibration did not converge ({result.message}; largest gradient "
                f"{result.grad_max:.3g} after {result.nit} iterations): slope_ and intercept_ "
                "are the last iterate and may be inaccurate",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    # ------------------------------------------------------------------ using the fit

    def _check_fitted(self) -> None:
        # NotFittedError is a ValueError, as scikit-learn raises for unfitted estimators.
        if not hasattr(self, "slope_"):
            raise NotFittedError(
                "ScoreCalibration is not fitted: call fit(scores, clicks) on held-out clicks first"
            )

    def predict_proba(self, values) -> np.ndarray:
        """``σ(slope_ · s + intercept_)`` for every score s of ``values`` (any shape).

        Raises
        ------
        ValueError
            When not fitted, or when a value is NaN or infinite (its index is named).
        """
        self._check_fitted()
        s = np.asarray(check_real(values, "values", axes=None), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(s.ravel()))
        if bad.size:
            index = np.unravel_index(int(bad[0]), s.shape) if s.ndim else ()
            raise ValueError(
                f"values has {float(s.ravel()[bad[0]])} at index {tuple(int(k) for k in index)}; "
                "scores must be finite"
            )
        return expit(self.slope_ * s + self.intercept_)

    def reward_model(self, scores) -> CalibratedScores:
        """A reward model reading ``scores`` (users×items, dense or sparse with missing = 0)
        through this calibration, evaluated lazily at the pairs asked for."""
        self._check_fitted()
        return CalibratedScores(scores, self)


def calibrated_reward_model(scores, clicks, propensity=None, **options) -> CalibratedScores:
    """A recommender's ``scores`` as the reward model of a doubly robust estimate: calibrated
    to click probabilities on held-out ``clicks`` (:class:`ScoreCalibration` with ``options``,
    weighted by ``propensity`` when given) and read through that calibration.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.reward.calibration import calibrated_reward_model
    >>> scores = np.array([[2.0, -1.0, 0.5, 1.0], [0.0, 1.5, -2.0, 1.0]])
    >>> clicks = np.array([[1, 0, 1, 0], [0, 1, 0, 1]])
    >>> calibrated_reward_model(scores, clicks).predict(np.array([0, 1]), np.array([0, 2])).shape
    (2,)
    """
    calibration = ScoreCalibration(**options).fit(scores, clicks, propensity=propensity)
    return calibration.reward_model(scores)


# --------------------------------------------------------------------------- validation


def _check_scores(scores):
    """Scores as a dense ndarray (not copied) or a SparseLookup, every value finite."""
    matrix = check_matrix(scores, "scores")
    bad = first_bad(matrix, lambda v: ~np.isfinite(v))
    if bad is not None:
        u, i = bad
        raise ValueError(
            f"scores has value {float(matrix[u, i])} at (user {u}, item {i}); scores must be finite"
        )
    return SparseLookup(matrix) if sp.issparse(matrix) else matrix


def _dense_to_csr(matrix: np.ndarray) -> sp.csr_matrix:
    """CSR copy of a dense matrix built in row chunks (no full-size mask)."""
    step = rows_per_chunk(matrix.shape[1])
    blocks = [
        sp.csr_matrix(np.asarray(matrix[start : start + step], dtype=np.float64))
        for start in range(0, matrix.shape[0], step)
    ]
    if not blocks:
        return sp.csr_matrix(matrix.shape, dtype=np.float64)
    out = sp.vstack(blocks, format="csr") if len(blocks) > 1 else blocks[0]
    return as_csr(out, "clicks")


def _check_clicks(clicks, shape: tuple[int, int]) -> sp.csr_matrix:
    """Clicks as canonical CSR without stored zeros, every value finite and ≥ 0."""
    clicks = check_real(clicks, "clicks")
    if not sp.issparse(clicks) and clicks.ndim != 2:
        raise ValueError(f"clicks must be a 2-D users×items matrix, got shape {clicks.shape}")
    if tuple(clicks.shape) != tuple(shape):
        raise ValueError(f"clicks has shape {clicks.shape} but scores has shape {tuple(shape)}")
    matrix = as_csr(clicks, "clicks") if sp.issparse(clicks) else _dense_to_csr(clicks)
    bad = first_bad(matrix, lambda v: ~np.isfinite(v) | (v < 0))
    if bad is not None:
        u, i = bad
        raise ValueError(
            f"clicks has value {float(matrix[u, i])} at (user {u}, item {i}); clicks must be "
            "finite and >= 0 (an entry > 0 is a click)"
        )
    matrix.eliminate_zeros()
    return matrix


def _check_propensity(propensity, shape: tuple[int, int]):
    """None, a validated per-item vector, a dense users×items ndarray or a SparseLookup."""
    if propensity is None:
        return None
    if hasattr(propensity, "fit") and not hasattr(propensity, "propensity_"):
        raise ValueError(
            f"propensity {type(propensity).__name__} is not fitted: call fit(...) on the "
            "training interactions first"
        )
    p = getattr(propensity, "propensity_", propensity)
    if sp.issparse(p) or np.ndim(p) != 2:
        check_real(p, "propensity")
        p = resolve_propensity(p, shape, data="scores")
        if sp.issparse(p):
            p.eliminate_zeros()  # a stored 0 is as invalid as a missing entry: both are named
            return SparseLookup(p)
        return p
    p = check_real(p, "propensity")
    if tuple(p.shape) != tuple(shape):
        raise ValueError(
            f"propensity has shape {p.shape} but scores has shape {tuple(shape)}; give one "
            "propensity per item or a users×items matrix"
        )
    bad = first_bad(p, lambda v: ~np.isfinite(v) | (v <= 0) | (v > 1))
    if bad is not None:
        u, i = bad
        check_propensities(np.array([float(p[u, i])]), lambda k: f"(user {u}, item {i})")
    return p


def _propensities_at(p, users: np.ndarray, items: np.ndarray) -> np.ndarray | None:
    """``p_ui`` of the used pairs (None for ``p ≡ 1``); a sparse matrix must store each."""
    if p is None:
        return None
    if isinstance(p, SparseLookup):
        values = p(users, items)
        check_propensities(values, lambda k: f"(user {users[k]}, item {items[k]})")
        return values
    if p.ndim == 1:
        return p[items]
    return lookup(p, users, items)


# --------------------------------------------------------------------------- sampling


def _bernoulli_ranks(n: int, rate: float, seed: int) -> np.ndarray:
    """Sorted positions in ``[0, n)`` each kept independently with probability ``rate``.

    Drawn as geometric gaps between kept positions, so the work and memory are those of the
    sample, not of ``n``. ``rate = 1`` keeps every position.
    """
    if rate >= 1.0:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    batch = max(1024, min(CHUNK_ELEMENTS, int(1.05 * n * rate) + 64))
    parts, last = [], -1
    while last < n - 1:
        # geometric(q) ≥ 1 is the number of positions up to and including the next kept one
        gaps = rng.geometric(rate, size=batch).astype(np.int64)
        positions = last + np.cumsum(gaps)
        # Positions increase until one passes n, or wraps below 0 when n is near 2**63:
        # either ends the sample (without the wrap check the loop could run forever).
        past = np.flatnonzero((positions >= n) | (positions < 0))
        if past.size:
            parts.append(positions[: past[0]])
            break
        last = int(positions[-1])
        parts.append(positions)
    return np.concatenate(parts)


def _nonclick_keys(ranks: np.ndarray, click_keys: np.ndarray) -> np.ndarray:
    """Linear indices of the non-clicks with the given ranks among all non-clicks.

    With the sorted click keys ``c_k``, ``c_k − k`` non-clicks precede click k, so the
    non-click of rank r sits at ``r + #{k : c_k − k ≤ r}``.
    """
    before = click_keys - np.arange(click_keys.size, dtype=np.int64)
    return ranks + np.searchsorted(before, ranks, side="right")


# --------------------------------------------------------------------------- likelihood


class _Fit:
    """What the optimiser reports back."""

    def __init__(self, result, grad_max: float, converged: bool):
        self.nit = result.nit
        self.message = result.message
        self.grad_max = grad_max
        self.converged = converged


def _maximise(s: np.ndarray, y: np.ndarray, w: np.ndarray, p: np.ndarray | None):
    """Maximum-likelihood (a, b) of ``P(y = 1) = p · σ(a·s + b)`` with weights ``w``."""
    total = float(w.sum())
    mean = float(np.dot(w, s) / total)
    scale = float(np.sqrt(np.dot(w, (s - mean) ** 2) / total))
    if not scale > 1e-12 * max(1.0, abs(mean)):
        raise ValueError(
            f"scores take the single value {mean:.6g} at every pair used: a slope cannot be "
            "fitted (the scores carry no information about the clicks)"
        )
    t = (s - mean) / scale
    t_click, t_none = t[y], t[~y]
    if t_click.min() >= t_none.max() or t_click.max() <= t_none.min():
        raise ValueError(
            "scores separate the clicks from the non-clicks (every click scores "
            f"{'>=' if t_click.min() >= t_none.max() else '<='} every non-click): the "
            "maximum-likelihood slope is infinite and cannot be fitted; use more held-out data"
        )
    w_click, w_none = w[y], w[~y]
    if p is None:
        log_p_click = np.zeros(t_click.size)
        log_miss = np.full(t_none.size, -np.inf)  # log(1 − p) with p = 1
    else:
        log_p_click = np.log(p[y])
        with np.errstate(divide="ignore"):
            log_miss = np.log1p(-p[~y])

    def nll(theta):
        a, b = theta
        z_click = a * t_click + b
        z_none = a * t_none + b
        # click:     −log(p σ(z))   = softplus(−z) − log p
        # non-click: −log(1 − p σ(z)) = softplus(z) − softplus(z + log(1 − p))
        value = np.dot(w_click, np.logaddexp(0.0, -z_click) - log_p_click) + np.dot(
            w_none, np.logaddexp(0.0, z_none) - np.logaddexp(0.0, z_none + log_miss)
        )
        g_click = -expit(-z_click) * w_click
        g_none = (expit(z_none) - expit(z_none + log_miss)) * w_none
        grad = np.array(
            [np.dot(g_click, t_click) + np.dot(g_none, t_none), g_click.sum() + g_none.sum()]
        )
        return value / total, grad / total

    rate = float(w_click.sum() / total)
    exposure = 1.0 if p is None else float((np.dot(w_click, p[y]) + np.dot(w_none, p[~y])) / total)
    start = np.clip(rate / exposure, 1e-6, 1 - 1e-6)
    theta0 = np.array([0.0, np.log(start / (1 - start))])
    # Two parameters: BLAS threads inside L-BFGS-B (scipy >= 1.15) only add overhead, up to
    # tenfold on a busy machine. threadpoolctl is a scikit-learn dependency.
    with threadpool_limits(limits=1, user_api="blas"):
        result = minimize(
            nll,
            theta0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 1000, "ftol": 1e-15, "gtol": 1e-10},
        )
    grad_max = float(np.max(np.abs(nll(result.x)[1])))
    # L-BFGS-B may stop at the limit of float precision with an "abnormal" line search once
    # the gradient is already negligible: that is convergence too.
    converged = bool(result.success) or (grad_max < 1e-7 and np.all(np.isfinite(result.x)))
    a_std, b_std = (float(v) for v in result.x)
    return a_std / scale, b_std - a_std * mean / scale, _Fit(result, grad_max, converged)
