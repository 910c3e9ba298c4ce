"""Exposure-propensity models for inverse-propensity-scored (IPS) evaluation.

Scikit-learn conventions: hyperparameters in ``__init__``, ``fit`` on a users×items
interaction matrix or on a vector of item interaction counts, learned values in
trailing-underscore attributes (``propensity_`` always; the power-law model also
``gamma_``, ``gamma_se_``, ``xmin_``). A fitted ``PowerLawPropensity`` or
``PopularityPropensity`` describes its fit with ``report()`` (a
:class:`~recpack_ope.propensity.fit_report.PropensityFitReport`).

Any object with a ``propensity_`` attribute (a per-item vector or a users×items sparse
matrix) can be passed to the estimators, as can such a vector or matrix directly.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .._validation import as_csr, check_propensities, entry_position
from .fit_report import PropensityFitReport

__all__ = ["PowerLawPropensity", "PopularityPropensity", "FixedPropensity", "item_counts"]


def item_counts(X) -> np.ndarray:
    """Interaction count ``n_i`` of every item.

    Parameters
    ----------
    X : array_like or sparse matrix
        Either a users×items interaction matrix, where ``n_i`` is the number of users with a
        non-zero entry for item i (ratings and repeat counts count once, as in Cornac's and
        RecPack's popularity), or a 1-D vector of non-negative counts used as given.

    Returns
    -------
    numpy.ndarray
        float64 counts, one per item.
    """
    if sp.issparse(X) or np.ndim(X) == 2:
        m = as_csr(X, "X")
        m.eliminate_zeros()
        return np.bincount(m.indices, minlength=m.shape[1]).astype(np.float64)
    counts = np.asarray(X, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(
            f"X must be a users×items matrix or a non-empty 1-D count vector, got shape {counts.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(counts) | (counts < 0))
    if bad.size:
        raise ValueError(f"item counts must be finite and >= 0; item {bad[0]} has {float(counts[bad[0]])}")
    return counts


def _check_min_count(min_count: float) -> None:
    if not min_count > 0:
        raise ValueError(f"min_count must be > 0, got {min_count!r}")


def _check_fitted(model: BaseEstimator) -> None:
    # NotFittedError is a ValueError, as scikit-learn raises for unfitted estimators.
    if not hasattr(model, "propensity_"):
        raise NotFittedError(
            f"{type(model).__name__} is not fitted: call fit(X) on the training interactions "
            "before report()"
        )


class PowerLawPropensity(BaseEstimator):
    """User-independent propensities from a power-law fit of item popularity.

    Jadidinejad et al. (TOIS'21) Eq. 7, after Yang et al. (RecSys'18)::

        p_i ∝ n_i ** ((γ + 1) / 2)

    where ``n_i`` is item i's interaction count and γ the exponent of the power law
    ``P(n) ∝ n^(−γ)`` that the counts follow, estimated by discrete maximum likelihood with
    the ``powerlaw`` package (Alstott et al. 2014; Clauset et al. 2009): ``γ`` is
    ``powerlaw.Fit(counts, discrete=True, xmin=xmin).power_law.alpha``. Propensities are
    rescaled so the largest is 1, which makes every value a valid probability in (0, 1] and
    leaves self-normalised estimates unchanged.

    Parameters
    ----------
    variant : {"yang", "cornac"}
        ``"yang"`` is Eq. 7 above. ``"cornac"`` reproduces Cornac's
        ``PropensityStratifiedEvaluation``: ``p_i ∝ n_i ** γ`` for counts above the fitted
        ``xmin`` and ``p_i ∝ n_i`` below it. Provided for comparison with Cornac results.
    xmin : float or None
        Lower bound of the power-law tail. ``None`` lets ``powerlaw`` choose it by minimising
        the Kolmogorov–Smirnov distance (its default, and Cornac's); ``1`` fits all counts.
    min_count : float
        Items with zero interactions are treated as having ``min_count`` interactions
        (default 1). The power law is defined on observed counts only; an item never
        interacted with was at most as exposed as the rarest observed item, so it gets that
        item's propensity rather than a zero that would make its IPS weight infinite.

    Attributes
    ----------
    counts_ : numpy.ndarray
        Item interaction counts the model was fitted on.
    gamma_ : float
        Fitted power-law exponent γ.
    gamma_se_ : float
        Standard error of ``gamma_`` reported by ``powerlaw``.
    xmin_ : float
        Lower bound of the fitted tail.
    propensity_ : numpy.ndarray
        Propensity of every item, in (0, 1], largest = 1.
    """

    def __init__(self, variant: str = "yang", xmin: float | None = None, min_count: float = 1.0):
        self.variant = variant
        self.xmin = xmin
        self.min_count = min_count

    def fit(self, X, y=None) -> "PowerLawPropensity":
        """Fit γ on the item counts of ``X`` (see :func:`item_counts`) and set ``propensity_``."""
        import powerlaw

        if self.variant not in ("yang", "cornac"):
            raise ValueError(f"variant must be 'yang' or 'cornac', got {self.variant!r}")
        _check_min_count(self.min_count)
        counts = item_counts(X)
        observed = counts[counts > 0]
        if np.unique(observed).size < 2:
            raise ValueError(
                "a power law needs at least two distinct non-zero item counts, got "
                f"{np.unique(observed).tolist()}"
            )
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            # powerlaw fits lazily: read the fitted values while its warnings are silenced.
            fit = powerlaw.Fit(observed, discrete=True, xmin=self.xmin, verbose=False)
            tail = fit.power_law
            self.gamma_ = float(tail.alpha)
            self.gamma_se_ = float(tail.sigma)
            self.xmin_ = float(tail.xmin)
        # Kept for report(): its KS distance and likelihood-ratio tests need the fitted data.
        self._powerlaw_fit = fit
        self.counts_ = counts
        log_n = np.log(np.maximum(counts, self.min_count))
        if self.variant == "yang":
            log_p = 0.5 * (self.gamma_ + 1.0) * log_n
        else:
            log_p = np.where(counts > self.xmin_, self.gamma_ * log_n, log_n)
        # Rescale in log space: n**γ overflows float64 for large catalogues.
        self.propensity_ = np.exp(log_p - log_p.max())
        return self

    def report(self) -> PropensityFitReport:
        """Diagnostics of the fit: γ ± σ, xmin and the shares below it, the KS distance, the
        likelihood-ratio tests against lognormal and exponential tails, and the propensity
        range (see :mod:`recpack_ope.propensity.fit_report`).

        The alternative tails are fitted here, not in :meth:`fit`, so fitting stays cheap.

        Returns
        -------
        PropensityFitReport

        Raises
        ------
        sklearn.exceptions.NotFittedError
            (a ValueError) when the model is not fitted.
        """
        _check_fitted(self)
        fit = self._powerlaw_fit
        # Fitting the lognormal divides underflowed likelihoods (0/0) while the optimiser
        # explores: numpy's warnings about it are noise. powerlaw's own UserWarnings (no valid
        # lognormal fit, parameters at the edge of their range) say the test against that
        # alternative is unreliable, so they are let through.
        with np.errstate(divide="ignore", invalid="ignore"):
            ks_distance = fit.power_law.D
            lr = {
                alternative: fit.distribution_compare("power_law", alternative, normalized_ratio=True)
                for alternative in ("lognormal", "exponential")
            }
        return PropensityFitReport.from_counts(
            repr(self),
            self.counts_,
            self.propensity_,
            self.min_count,
            gamma=self.gamma_,
            gamma_se=self.gamma_se_,
            xmin=self.xmin_,
            ks_distance=ks_distance,
            lr_lognormal=lr["lognormal"],
            lr_exponential=lr["exponential"],
        )


class PopularityPropensity(BaseEstimator):
    """Propensity = item popularity share ``p_i = n_i / N``, RecPack's IPS convention.

    RecPack's ``IPSMetric.fit`` uses ``X.sum(axis=0) / X.sum()``; on a binary interaction
    matrix this is ``n_i / N`` with ``N = Σ_i n_i``.

    Parameters
    ----------
    min_count : float
        Count used for items with zero interactions (default 1), so their propensity is the
        smallest observable one instead of zero. (RecPack instead sets their inverse
        propensity to 0, i.e. ignores them.)

    Attributes
    ----------
    counts_ : numpy.ndarray
    propensity_ : numpy.ndarray
    """

    def __init__(self, min_count: float = 1.0):
        self.min_count = min_count

    def fit(self, X, y=None) -> "PopularityPropensity":
        """Compute ``propensity_`` from the item counts of ``X`` (see :func:`item_counts`)."""
        _check_min_count(self.min_count)
        counts = item_counts(X)
        if counts.sum() <= 0:
            raise ValueError("X has no interactions: item popularity is undefined")
        self.counts_ = counts
        self.propensity_ = np.maximum(counts, self.min_count) / counts.sum()
        return self

    def report(self) -> PropensityFitReport:
        """Diagnostics of the propensities: the smallest one and the largest IPS weight
        ``1/p_min``, the items with zero or fewer than ``min_count`` interactions, and the
        count distribution. There is no power-law fit, so its fields are None (see
        :mod:`recpack_ope.propensity.fit_report`).

        Returns
        -------
        PropensityFitReport

        Raises
        ------
        sklearn.exceptions.NotFittedError
            (a ValueError) when the model is not fitted.
        """
        _check_fitted(self)
        return PropensityFitReport.from_counts(
            repr(self), self.counts_, self.propensity_, self.min_count
        )


class FixedPropensity(BaseEstimator):
    """User-given propensities wrapped as a (trivially) fitted model.

    Parameters
    ----------
    propensity : array_like or sparse matrix
        Per-item propensities (1-D) or user-dependent ones as a users×items sparse matrix,
        all in (0, 1]. ``fit`` only validates them; it is there so the same code path can
        take fitted and given propensities.
    """

    def __init__(self, propensity):
        self.propensity = propensity

    def fit(self, X=None, y=None) -> "FixedPropensity":
        """Validate and store the given propensities as ``propensity_``."""
        p = self.propensity
        if sp.issparse(p):
            p = as_csr(p, "propensity")
            p.eliminate_zeros()
            check_propensities(p.data, lambda k: "(user {}, item {})".format(*entry_position(p, k)))
        else:
            p = np.asarray(p, dtype=np.float64)
            if p.ndim != 1:
                raise ValueError(
                    f"propensity must be a 1-D per-item vector or a sparse matrix, got shape {p.shape}"
                )
            check_propensities(p, lambda k: f"item {k}")
        self.propensity_ = p
        return self
