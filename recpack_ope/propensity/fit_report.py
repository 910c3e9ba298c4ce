"""How far to trust a fitted propensity model: the diagnostics behind its IPS weights.

IPS estimates divide by the propensities, so their variance is driven by the smallest one and
their bias by how well the model describes exposure. :class:`PropensityFitReport` collects,
over the item interaction counts ``n_i`` (``i = 1…I``, ``N = Σ_i n_i``) a model was fitted on:

* the power-law fit behind Eq. 7 (``PowerLawPropensity`` only): the exponent ``γ ± σ`` and the
  tail's lower bound ``xmin``; the share of items ``#{i : n_i < xmin} / I`` and of interactions
  ``Σ_{n_i < xmin} n_i / N`` below ``xmin``, which the fit does not describe; the
  Kolmogorov–Smirnov distance ``D = max_{n ≥ xmin} |S(n) − P(n)|`` between the empirical and
  fitted CDFs of the tail; and the normalised log-likelihood-ratio tests of Clauset, Shalizi &
  Newman (SIAM Review 2009, §5.1) of the power law against a lognormal and an exponential
  tail, ``(R, p)`` from ``powerlaw.Fit.distribution_compare(..., normalized_ratio=True)``:
  ``R > 0`` favours the power law, ``R < 0`` the alternative, and ``p`` is the significance
  of the sign of ``R``;
* for every model: the count distribution, the items with zero or fewer than ``min_count``
  interactions (their propensity is that of ``min_count``), the propensity range and the
  largest inverse propensity ``1 / min_i p_i``, the largest IPS weight before clipping.

Fields that do not apply to a model (the power-law ones for ``PopularityPropensity``) are None.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .._plots import axes
from .._validation import check_finite_number, check_propensities, item_values

__all__ = ["SIGNIFICANCE", "PropensityFitReport"]

# Level below which a likelihood-ratio test's sign counts as significant. Clauset et al. use
# 0.1, and the verdict should flag a doubtful fit rather than wait for strong evidence.
SIGNIFICANCE = 0.1

# The alternative tails, each with its article for the verdict; field ``lr_<name>`` holds (R, p).
_ALTERNATIVES = (("lognormal", "a"), ("exponential", "an"))


# The power-law fields of a report: given all together or not at all.
_FIT_FIELDS = ("gamma", "gamma_se", "xmin", "ks_distance", "lr_lognormal", "lr_exponential")


def _float_or_none(value, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _test_or_none(test, name: str) -> tuple[float, float] | None:
    """A likelihood-ratio test ``(R, p)``; NaN is allowed (powerlaw gives it for tiny tails)."""
    if test is None:
        return None
    if isinstance(test, (str, bytes)) or np.shape(test) != (2,):
        raise ValueError(f"{name} must be a pair (R, p), got {test!r}")
    return _float_or_none(test[0], f"{name}[0]"), _float_or_none(test[1], f"{name}[1]")


@dataclass(frozen=True, eq=False, repr=False)
class PropensityFitReport:
    """Diagnostics of a fitted propensity model (module docstring).

    Get one from a fitted model's ``report()``; ``repr`` is :meth:`summary`.

    Attributes
    ----------
    model : str
        The model with its hyperparameters, e.g. ``"PowerLawPropensity(xmin=1)"``.
    n_items : int
        Items I, including those never interacted with.
    n_interactions : float
        Interactions N, the sum of the item counts.
    min_count : float
        Count that items with fewer interactions were raised to.
    n_zero_count_items : int
        Items with no interaction.
    n_below_min_count : int
        Items with fewer than ``min_count`` interactions (zero-count items included).
    count_min, count_median, count_mean, count_max : float
        The item counts' distribution, zero counts included.
    min_propensity, max_propensity : float
        Range of the propensities.
    max_inverse_propensity : float
        ``1 / min_propensity``: the largest IPS weight before clipping.
    gamma, gamma_se : float or None
        Power-law exponent γ and its standard error σ.
    xmin : float or None
        Lower bound of the power-law tail.
    share_items_below_xmin : float or None
        Share of all I items with ``n_i < xmin`` (zero-count items included).
    share_interactions_below_xmin : float or None
        Share of the N interactions that fall on those items.
    ks_distance : float or None
        Kolmogorov–Smirnov distance D of the power law from the tail's counts.
    lr_lognormal, lr_exponential : tuple of (float, float) or None
        Normalised log-likelihood ratio R of the power law against a lognormal (an
        exponential) tail and the p-value of its sign.
    counts : numpy.ndarray
        The item counts, read-only; :meth:`plot` draws them.
    """

    model: str
    n_items: int
    n_interactions: float
    min_count: float
    n_zero_count_items: int
    n_below_min_count: int
    count_min: float
    count_median: float
    count_mean: float
    count_max: float
    min_propensity: float
    max_propensity: float
    max_inverse_propensity: float
    gamma: float | None
    gamma_se: float | None
    xmin: float | None
    share_items_below_xmin: float | None
    share_interactions_below_xmin: float | None
    ks_distance: float | None
    lr_lognormal: tuple[float, float] | None
    lr_exponential: tuple[float, float] | None
    counts: np.ndarray

    @classmethod
    def from_counts(
        cls,
        model: str,
        counts,
        propensity,
        min_count: float = 1.0,
        *,
        gamma: float | None = None,
        gamma_se: float | None = None,
        xmin: float | None = None,
        ks_distance: float | None = None,
        lr_lognormal: tuple[float, float] | None = None,
        lr_exponential: tuple[float, float] | None = None,
    ) -> PropensityFitReport:
        """Report on per-item ``propensity`` derived from item ``counts``.

        Parameters
        ----------
        model : str
            Name of the model in the report.
        counts, propensity : array_like
            Item interaction counts and the propensities the model gave the items, aligned.
        min_count : float
            Count that items with fewer interactions were raised to.
        gamma, gamma_se, xmin, ks_distance, lr_lognormal, lr_exponential
            The power-law fit, when there is one; the shares below ``xmin`` follow from
            ``xmin`` and ``counts``. Stored as Python floats, so :meth:`to_dict` serialises.

        Returns
        -------
        PropensityFitReport
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be a str naming the model, got {type(model).__name__}")
        counts = np.array(item_values(counts, "counts"), dtype=np.float64)
        propensity = item_values(propensity, "propensity").astype(np.float64)
        if counts.ndim != 1 or counts.size == 0 or propensity.shape != counts.shape:
            raise ValueError(
                "counts and propensity must be non-empty 1-D arrays of the same length, got "
                f"shapes {counts.shape} and {propensity.shape}"
            )
        bad = np.flatnonzero(~np.isfinite(counts) | (counts < 0))
        if bad.size:
            raise ValueError(
                f"counts must be finite and >= 0; item {bad[0]} has {float(counts[bad[0]])}"
            )
        check_propensities(propensity, lambda k: f"item {k}")
        min_count = check_finite_number(min_count, "min_count", above=0)
        fit = {
            "gamma": _float_or_none(gamma, "gamma"),
            "gamma_se": _float_or_none(gamma_se, "gamma_se"),
            "xmin": _float_or_none(xmin, "xmin"),
            "ks_distance": _float_or_none(ks_distance, "ks_distance"),
            "lr_lognormal": _test_or_none(lr_lognormal, "lr_lognormal"),
            "lr_exponential": _test_or_none(lr_exponential, "lr_exponential"),
        }
        missing = [name for name in _FIT_FIELDS if fit[name] is None]
        if 0 < len(missing) < len(_FIT_FIELDS):
            raise ValueError(
                f"a power-law fit needs all of {', '.join(_FIT_FIELDS)}; {', '.join(missing)} "
                "not given (give none of them for a model without a fit)"
            )
        if xmin is not None and not (np.isfinite(fit["gamma"]) and np.isfinite(fit["xmin"])):
            raise ValueError(
                f"gamma and xmin of a power-law fit must be finite, got {gamma!r} and {xmin!r}"
            )
        counts.setflags(write=False)
        total = float(counts.sum())
        if total == 0:
            raise ValueError("counts hold no interaction: there is nothing to report on")
        if xmin is None:
            share_items = share_interactions = None
        else:
            below = counts < xmin
            share_items = float(np.mean(below))
            share_interactions = float(counts[below].sum() / total)
        min_propensity = float(propensity.min())
        return cls(
            model=model,
            n_items=int(counts.size),
            n_interactions=total,
            min_count=min_count,
            n_zero_count_items=int(np.count_nonzero(counts == 0)),
            n_below_min_count=int(np.count_nonzero(counts < min_count)),
            count_min=float(counts.min()),
            count_median=float(np.median(counts)),
            count_mean=float(counts.mean()),
            count_max=float(counts.max()),
            min_propensity=min_propensity,
            max_propensity=float(propensity.max()),
            max_inverse_propensity=1.0 / min_propensity,
            share_items_below_xmin=share_items,
            share_interactions_below_xmin=share_interactions,
            **fit,
            counts=counts,
        )

    @property
    def verdict(self) -> str:
        """One sentence: whether the power law describes the counts, or why nothing is tested."""
        if self.gamma is None:
            clauses = [
                "no power-law fit, so γ, xmin, the KS distance and the likelihood-ratio tests do "
                f"not apply; the largest IPS weight is 1/p_min = {self.max_inverse_propensity:.4g}"
            ]
            if self.n_below_min_count:
                clauses.append(
                    f"{self.n_below_min_count} items have fewer than min_count = "
                    f"{self.min_count:g} interactions and get its propensity"
                )
        else:
            clauses = [self._likelihood_ratio_clause()]
            if self.share_items_below_xmin > 0.5:
                clauses.append(
                    f"Eq. 7 only describes the tail, since xmin = {self.xmin:g} leaves "
                    f"{self.share_items_below_xmin:.0%} of items "
                    f"({self.share_interactions_below_xmin:.0%} of interactions) below it"
                )
        sentence = "; ".join(clauses)
        return sentence[0].upper() + sentence[1:] + "."

    def _likelihood_ratio_clause(self) -> str:
        results = []
        for name, article in _ALTERNATIVES:
            r, p = getattr(self, f"lr_{name}")
            results.append((r, p, f"{article} {name} (R={r:.3g}, p={p:.2g})"))
        worse = [text for r, p, text in results if r < 0 and p < SIGNIFICANCE]
        better = [text for r, p, text in results if r > 0 and p < SIGNIFICANCE]
        # NaN p-values (too few tail counts) land here: the test decided nothing.
        undecided = [text for r, p, text in results if not p < SIGNIFICANCE]
        if worse:
            verb = "fits" if len(worse) == 1 else "fit"
            return (
                "the power law is not the better fit for the tail: "
                f"{' and '.join(worse)} {verb} it better"
            )
        if not undecided:
            return "the power law fits the tail better than " + " and ".join(better)
        if not better:
            return "the likelihood-ratio tests cannot tell the power law from " + " or ".join(
                undecided
            )
        return (
            f"the power law fits the tail better than {better[0]}, but the likelihood-ratio "
            f"test cannot tell it from {undecided[0]}"
        )

    def summary(self) -> str:
        """Several lines: the fit, the counts, the propensity range, and the verdict."""
        if self.gamma is None:
            fit_lines = ["power law: not fitted (γ, xmin, KS distance, LR tests do not apply)"]
        else:
            fit_lines = [
                f"γ = {self.gamma:.4g} ± {self.gamma_se:.2g}, xmin = {self.xmin:g}",
                f"below xmin: {self.share_items_below_xmin:.1%} of items, "
                f"{self.share_interactions_below_xmin:.1%} of interactions",
                f"KS distance D = {self.ks_distance:.4g}",
                "likelihood ratio R (> 0 favours the power law), p of its sign:",
            ] + [
                f"  vs {name}: R = {getattr(self, f'lr_{name}')[0]:.4g}, "
                f"p = {getattr(self, f'lr_{name}')[1]:.3g}"
                for name, _ in _ALTERNATIVES
            ]
        lines = [
            f"{self.model} on {self.n_items} items, {self.n_interactions:g} interactions",
            *fit_lines,
            f"counts: min {self.count_min:g}, median {self.count_median:g}, mean "
            f"{self.count_mean:.4g}, max {self.count_max:g}; {self.n_zero_count_items} items "
            f"with zero count, {self.n_below_min_count} below min_count = {self.min_count:g}",
            f"propensity range [{self.min_propensity:.4g}, {self.max_propensity:.4g}], largest "
            f"inverse propensity 1/p_min = {self.max_inverse_propensity:.4g}",
            f"verdict: {self.verdict}",
        ]
        return "\n".join([lines[0], *("  " + line for line in lines[1:])])

    def __repr__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict:
        """Every field but ``counts``, as plain Python values (None where not applicable)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "counts"}

    def plot(self, ax=None):
        """Empirical CCDF ``P(n_i ≥ n)`` of the non-zero counts on log-log axes, with the fitted
        power law and ``xmin`` when there is a fit.

        The fitted line is the discrete power law's CCDF ``ζ(γ, n) / ζ(γ, xmin)`` (Hurwitz ζ)
        for ``n ≥ xmin``, times the share of non-zero counts that reach ``xmin``, so that it
        continues the empirical curve where the tail begins.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure by default.

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = axes(ax, "PropensityFitReport.plot", figsize=(5, 3.5), layout="constrained")
        # Zero counts have no place on a log axis; the label says how many are left out.
        observed = np.sort(self.counts[self.counts > 0])
        n = np.unique(observed)
        ccdf = 1.0 - np.searchsorted(observed, n, side="left") / observed.size
        hidden = ""
        if self.n_zero_count_items:
            hidden = f", {self.n_zero_count_items} with zero count not shown"
        ax.plot(n, ccdf, "o", ms=3, label=f"item counts ({observed.size} items{hidden})")
        if self.gamma is not None:
            # imported on use: start-up time (docs/performance.md)
            from scipy.special import zeta

            tail = n[n >= self.xmin]
            reach = np.mean(observed >= self.xmin)
            ax.plot(
                tail,
                reach * zeta(self.gamma, tail) / zeta(self.gamma, self.xmin),
                "-",
                color="C3",
                label=f"power law, γ = {self.gamma:.3g}",
            )
            ax.axvline(self.xmin, color="0.5", ls=":", label=f"xmin = {self.xmin:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("interaction count n")
        ax.set_ylabel("share of items with n_i ≥ n")
        ax.set_title(self.model, fontsize=9)
        ax.legend(fontsize=8)
        return ax
