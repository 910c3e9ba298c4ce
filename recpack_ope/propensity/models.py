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
from scipy import optimize, special
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .._validation import (
    EXACT_INTEGER_LIMIT,
    as_csr,
    check_finite_number,
    check_float_exact,
    check_propensities,
    entry_position,
    item_values,
)
from .fit_report import PropensityFitReport
from .weights import resolve_propensity

__all__ = ["PowerLawPropensity", "PopularityPropensity", "FixedPropensity", "item_counts"]


def item_counts(X) -> np.ndarray:
    """Interaction count ``n_i`` of every item.

    Parameters
    ----------
    X : array_like, sparse matrix or pandas object
        Either a users×items interaction matrix, where ``n_i`` is the number of users with a
        non-zero entry for item i: each non-zero entry counts as one interaction whatever its
        value (ratings, repeat counts, fractions and weights all count once, as in Cornac's
        and RecPack's popularity; give weighted counts as a count vector instead), and a
        zero stored explicitly in a sparse matrix does not count. Entries must be >= 0. Or a
        1-D vector of non-negative counts used as given. A DataFrame is aligned by its user
        and item labels, a Series (e.g. ``value_counts()`` of item indices) by its item
        labels; labels that are not the indices 0..n−1 are refused rather than used by
        position.

    Returns
    -------
    numpy.ndarray
        float64 counts, one per item.

    Raises
    ------
    ValueError
        For a matrix entry that is NaN, infinite or negative, a count that is negative, not
        finite or above 2**53 (where float64 stops counting exactly), complex or non-numeric
        values, and pandas labels that are not item indices; the message names the item or
        the (user, item).
    """
    if sp.issparse(X) or np.ndim(X) == 2:
        m = as_csr(X, "X")
        # A negative entry would count as one interaction like a positive one.
        bad = np.flatnonzero(~np.isfinite(m.data) | (m.data < 0))
        if bad.size:
            u, i = entry_position(m, int(bad[0]))
            raise ValueError(
                f"X has value {float(m.data[bad[0]])} at (user {u}, item {i}); interactions "
                "must be finite and >= 0"
            )
        m.eliminate_zeros()
        return np.bincount(m.indices, minlength=m.shape[1]).astype(np.float64)
    given = item_values(X, "X")
    if given.ndim != 1 or given.size == 0:
        raise ValueError(
            "X must be a users×items matrix or a non-empty 1-D count vector, got shape "
            f"{given.shape}"
        )
    check_float_exact(given, "X", lambda k: f"item {k}")
    counts = given.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(counts) | (counts < 0) | (counts > EXACT_INTEGER_LIMIT))
    if bad.size:
        raise ValueError(
            f"item counts must be finite, >= 0 and at most 2**53; item {bad[0]} has "
            f"{float(counts[bad[0]])}"
        )
    return counts


def _check_xmin(xmin) -> float | None:
    """None, or the lower bound of a discrete power-law tail: a whole number >= 1."""
    if xmin is None:
        return None
    number = isinstance(xmin, (int, float, np.integer, np.floating))
    value = float(xmin) if number and not isinstance(xmin, (bool, np.bool_)) else np.nan
    if not (np.isfinite(value) and value >= 1 and value == np.floor(value)):
        raise ValueError(
            "xmin must be None or a whole number >= 1 (the smallest count in the power-law "
            f"tail), got {xmin!r}"
        )
    return value


def _check_fitted(model: BaseEstimator) -> None:
    # NotFittedError is a ValueError, as scikit-learn raises for unfitted estimators.
    if not hasattr(model, "propensity_"):
        raise NotFittedError(
            f"{type(model).__name__} is not fitted: call fit(X) on the training interactions "
            "before report()"
        )


#: powerlaw 2.0's upper bound on α (its ``DEFAULT_PARAMETER_RANGES``); Fit takes no other.
_POWERLAW_ALPHA_CAP = 3.0


def _discrete_power_law_mle(tail: np.ndarray, xmin: float) -> tuple[float, float]:
    """γ maximising the discrete power-law likelihood of ``tail`` (all ≥ ``xmin``), Clauset
    et al. (2009) Eq. 3.5, ``ℓ(γ) = −γ Σ ln x − n ln ζ(γ, xmin)``, without an upper bound on γ,
    and its standard error ``(γ − 1)/√n`` as ``powerlaw`` reports it."""
    n, log_sum = tail.size, float(np.log(tail).sum())

    def negative_log_likelihood(gamma: float) -> float:
        return gamma * log_sum + n * float(np.log(special.zeta(gamma, xmin)))

    best = optimize.minimize_scalar(
        negative_log_likelihood,
        bounds=(1.0 + 1e-9, 100.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(best.x), (float(best.x) - 1.0) / np.sqrt(n)


class PowerLawPropensity(BaseEstimator):
    """User-independent propensities from a power-law fit of item popularity.

    Jadidinejad et al. (TOIS'21) Eq. 7, after Yang et al. (RecSys'18)::

        p_i ∝ n_i ** ((γ + 1) / 2)

    where ``n_i`` is item i's interaction count and γ the exponent of the power law
    ``P(n) ∝ n^(−γ)`` that the counts follow, estimated by discrete maximum likelihood with
    the ``powerlaw`` package (Alstott et al. 2014; Clauset et al. 2009): ``γ`` is
    ``powerlaw.Fit(counts, discrete=True, xmin=xmin).power_law.alpha``; where ``powerlaw``
    stops at its upper bound γ = 3, the same likelihood is maximised without the bound, at the
    same ``xmin``. Propensities are
    rescaled so the largest is 1, which makes every value a valid probability in (0, 1] and
    leaves self-normalised estimates unchanged.

    Parameters
    ----------
    variant : {"yang", "cornac"}
        ``"yang"`` is Eq. 7 above. ``"cornac"`` reproduces Cornac's
        ``PropensityStratifiedEvaluation``: ``p_i ∝ n_i ** γ`` for counts above the fitted
        ``xmin`` and ``p_i ∝ n_i`` below it. Provided for comparison with Cornac results.
    xmin : float or None
        Lower bound of the power-law tail, a whole number >= 1 below the largest count.
        ``None`` lets ``powerlaw`` choose it by minimising the Kolmogorov–Smirnov distance
        (its default, and Cornac's); ``1`` fits all counts. ``powerlaw`` only searches when
        there are at least four distinct non-zero counts (it never tries the two largest);
        with two or three the tail starts at the smallest count, i.e. all counts are fitted.
    min_count : float
        Items with zero interactions are treated as having ``min_count`` interactions
        (default 1), a finite number > 0. The power law is defined on observed counts only;
        an item never interacted with was at most as exposed as the rarest observed item, so
        it gets that item's propensity rather than a zero that would make its IPS weight
        infinite.

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

    def fit(self, X, y=None) -> PowerLawPropensity:
        """Fit γ on the item counts of ``X`` (see :func:`item_counts`) and set ``propensity_``.

        Each non-zero entry of a matrix ``X`` counts as one interaction whatever its value, so
        weights are not counts; explicitly stored zeros do not count.

        Raises
        ------
        ValueError
            For invalid parameters; for counts :func:`item_counts` refuses, or that are not
            whole numbers (the fit is discrete); when fewer than two distinct non-zero counts
            are observed, or none above a given ``xmin``, so the exponent has no finite
            maximum-likelihood estimate.
        """
        import powerlaw

        if not isinstance(self.variant, str) or self.variant not in ("yang", "cornac"):
            raise ValueError(f"variant must be 'yang' or 'cornac', got {self.variant!r}")
        xmin = _check_xmin(self.xmin)
        check_finite_number(self.min_count, "min_count", above=0)
        counts = item_counts(X)
        fractional = np.flatnonzero(counts != np.floor(counts))
        if fractional.size:
            k = int(fractional[0])
            raise ValueError(
                "PowerLawPropensity fits a discrete power law to whole interaction counts; "
                f"item {k} has {float(counts[k])}"
            )
        observed = counts[counts > 0]
        distinct = np.unique(observed)
        if distinct.size < 2:
            raise ValueError(
                "a power law needs at least two distinct non-zero item counts, got "
                f"{distinct.tolist()}"
            )
        # With every tail count equal to xmin the likelihood grows without bound in γ.
        if xmin is not None and distinct[-1] <= xmin:
            raise ValueError(
                f"xmin = {xmin:g} leaves no item count above it (the largest is "
                f"{distinct[-1]:g}): the exponent has no finite maximum-likelihood estimate; "
                "lower xmin"
            )
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            # powerlaw fits lazily: read the fitted values while its warnings are silenced.
            fit = powerlaw.Fit(observed, discrete=True, xmin=xmin, verbose=False)
            if not np.isfinite(fit.xmin):
                # Fewer than two candidate xmins to compare (class docstring): fit all counts.
                fit = powerlaw.Fit(observed, discrete=True, xmin=distinct[0], verbose=False)
            tail = fit.power_law
            gamma, gamma_se, fitted_xmin = float(tail.alpha), float(tail.sigma), float(tail.xmin)
        if np.isfinite(gamma) and gamma >= _POWERLAW_ALPHA_CAP - 1e-6:
            # powerlaw 2.0 bounds α to (0, 3] and returns the bound for steeper tails.
            gamma, gamma_se = _discrete_power_law_mle(
                observed[observed >= fitted_xmin], fitted_xmin
            )
        if not np.isfinite(gamma):
            raise ValueError(
                f"the power-law fit of the item counts failed (γ = {gamma}, xmin = "
                f"{fitted_xmin:g}); give xmin, or check the counts"
            )
        self.gamma_, self.gamma_se_, self.xmin_ = gamma, gamma_se, fitted_xmin
        # Kept for report(): its KS distance and likelihood-ratio tests need the fitted data.
        self._powerlaw_fit = fit
        self.counts_ = counts
        self.propensity_ = self.propensity_at(self.gamma_)
        return self

    def propensity_at(self, gamma: float) -> np.ndarray:
        """The propensities of the fitted counts with exponent ``gamma`` in place of the
        fitted ``gamma_`` (the class's formula, largest = 1); what a sensitivity analysis of
        the exponent recomputes.

        Examples
        --------
        >>> import numpy as np
        >>> model = PowerLawPropensity(xmin=1).fit(np.repeat(np.eye(3), [9, 3, 1], axis=0))
        >>> np.round(model.propensity_at(1.0), 4).tolist()
        [1.0, 0.3333, 0.1111]
        """
        if not hasattr(self, "counts_"):
            raise NotFittedError(
                "PowerLawPropensity is not fitted: call fit(X) on the training interactions "
                "before propensity_at()"
            )
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.number)):
            raise ValueError(f"gamma must be a finite number, got {gamma!r}")
        if not np.isfinite(gamma):
            raise ValueError(f"gamma must be a finite number, got {gamma!r}")
        log_n = np.log(np.maximum(self.counts_, self.min_count))
        if self.variant == "yang":
            log_p = 0.5 * (gamma + 1.0) * log_n
        else:
            log_p = np.where(self.counts_ > self.xmin_, gamma * log_n, log_n)
        # Rescale in log space: n**γ overflows float64 for large catalogues.
        return np.exp(log_p - log_p.max())

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
                alternative: fit.distribution_compare(
                    "power_law", alternative, normalized_ratio=True
                )
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

    def fit(self, X, y=None) -> PopularityPropensity:
        """Compute ``propensity_`` from the item counts of ``X`` (see :func:`item_counts`).

        Each non-zero entry of a matrix ``X`` counts as one interaction whatever its value, so
        weights are not counts (unlike RecPack's ``X.sum(axis=0)``); explicitly stored zeros do
        not count.

        Raises
        ------
        ValueError
            For counts :func:`item_counts` refuses, when ``X`` has no interactions, and when
            ``min_count`` is not a finite number > 0 or exceeds the N interactions (a
            propensity ``min_count / N`` above 1 would not be a probability).
        """
        min_count = check_finite_number(self.min_count, "min_count", above=0)
        counts = item_counts(X)
        total = counts.sum()
        if total <= 0:
            raise ValueError("X has no interactions: item popularity is undefined")
        if min_count > total:
            raise ValueError(
                f"min_count = {self.min_count!r} exceeds the N = {total:g} interactions of X: "
                "the propensity min_count / N of a rarely seen item would exceed 1"
            )
        self.counts_ = counts
        self.propensity_ = np.maximum(counts, min_count) / total
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
    propensity : array_like, pandas Series or sparse matrix
        Per-item propensities (1-D; a Series is aligned by its item labels, which must be the
        item indices 0..n−1) or user-dependent ones as a users×items sparse matrix storing
        each (user, item) once, all in (0, 1]. ``fit`` only validates them; it is there so
        the same code path can take fitted and given propensities.
    """

    def __init__(self, propensity):
        self.propensity = propensity

    def fit(self, X=None, y=None) -> FixedPropensity:
        """Validate and store the given propensities as ``propensity_``.

        Raises
        ------
        ValueError
            For a value outside (0, 1] (named with its item or (user, item)), an empty or
            multi-dimensional dense array, complex or non-numeric values, Series labels that
            are not item indices, and a sparse matrix that stores an entry twice (its values
            would be summed) or is structurally corrupt.
        """
        p = self.propensity
        if sp.issparse(p):
            p = as_csr(p, "propensity", duplicates="refuse")
            p.eliminate_zeros()
            check_propensities(p.data, lambda k: "(user {}, item {})".format(*entry_position(p, k)))
        else:
            p = resolve_propensity(p, None)
        self.propensity_ = p
        return self
