"""Which pairs of systems differ significantly, and the discriminative power of a measure.

Works on two kinds of samples over the same users:

* :class:`~recpack_ope.inference.systems.SystemScores` — a metric's per-user values (users × M); the
  pair (s, t) is tested on the per-user differences ``x_us − x_ut``;
* :class:`~recpack_ope.metrics.rpp.PreferenceMatrix` — per-user preferences RPP_u(s, t) (users × M ×
  M), already paired differences; the pair is tested on ``RPP_u(s, t)`` against 0.

Tests, as Diaz & Ferraro (SIGIR'22 §5.2, Tables 3–4) use them after Sakai (2014):

* :func:`paired_t_tests` — Student's t over users for every pair, with Bonferroni correction
  over the M(M − 1)/2 pairs (or Holm's step-down, or Benjamini–Hochberg's step-up, below);
* :func:`randomised_tukey_hsd` — Carterette's (TOIS 2012) randomised Tukey HSD: under the null
  hypothesis the systems are exchangeable within each user, so the system labels of every user
  are permuted at random; each permutation records the largest absolute mean pairwise
  difference over all pairs (for metrics, the range of the permuted system means). A pair's
  p-value is the share of permutations whose maximum reaches the pair's observed difference,
  ``(1 + #{b : max_b ≥ |d_st|}) / (1 + B)``, which controls the family-wise error rate.

:func:`discriminative_power` is the share of pairs a measure separates at ``p < α``.

Multiple-testing corrections (:func:`adjust_p_values`) of n p-values sorted increasingly,
``p_(1) ≤ … ≤ p_(n)``; every adjusted p-value is capped at 1 and a hypothesis is rejected at
level α when its adjusted p-value is below α:

* Bonferroni — ``n · p_i``; controls the family-wise error rate (FWER);
* Holm (1979) step-down — ``p̃_(k) = max_{j ≤ k} (n − j + 1) · p_(j)``; controls the FWER
  under any dependence and rejects everything Bonferroni rejects, and possibly more;
* Benjamini & Hochberg (1995) step-up — ``p̃_(k) = min_{j ≥ k} n / j · p_(j)``; controls the
  false discovery rate (the expected share of false rejections among the rejections) for
  independent or positively dependent tests, a weaker guarantee than FWER and more rejections.

Which systems are *tied with the best* (:func:`tied_with_best`) is decided by default by Hsu's
multiple comparisons with the best (MCB) in its unconstrained form (Hsu 1996, ch. 4): for
every system i, simultaneous intervals for ``μ_i − max_{j≠i} μ_j`` deduced from simultaneous
intervals for all M(M − 1)/2 paired differences,

    [min_{j≠i} (x̄_i − x̄_j − c · se_ij),  min_{j≠i} (x̄_i − x̄_j + c · se_ij)],

with ``se_ij`` the paired t-test's standard error and c the (1 − α) quantile of the largest
``|t_ij|`` over all pairs when all systems are equal. On the event that every pair's
``|t_ij − (μ_i − μ_j) / se_ij| ≤ c`` (probability 1 − α) every interval covers, so no system
whose true mean is the largest (``μ_i − max_{j≠i} μ_j ≥ 0``) gets an upper bound below 0 —
however many share that mean and although the data chose the best. A system is tied with the
best unless its upper bound is below 0. The one-sided critical value of *constrained* MCB
(Hsu 1984) keeps only a unique true best: when several share the largest mean it excludes one
of them more often than α (about 2α for two equal systems). The joint law of the t statistics
is the multivariate t of Hothorn, Bretz & Westfall (2008): ``z / w`` with ``z`` normal with the
users' covariance of the paired differences and ``w² ~ χ²_{n−1} / (n − 1)`` shared; c and the
p-values come from ``n_draws`` Monte Carlo draws of it (exactly from Student's t for two
systems, where MCB is the paired t-test).

References
----------
S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian Journal of
Statistics 6(2):65–70, 1979.
Y. Benjamini, Y. Hochberg, "Controlling the false discovery rate: a practical and powerful
approach to multiple testing", Journal of the Royal Statistical Society B 57(1):289–300, 1995.
B. Carterette, "Multiple testing in statistical analysis of systems-based information retrieval
experiments", ACM TOIS 30(1), 2012.
J. C. Hsu, "Constrained simultaneous confidence intervals for multiple comparisons with the
best", Annals of Statistics 12(3):1136–1144, 1984.
J. C. Hsu, Multiple Comparisons: Theory and Methods, Chapman & Hall, 1996, ch. 4.
T. Hothorn, F. Bretz, P. Westfall, "Simultaneous inference in general parametric models",
Biometrical Journal 50(3):346–363, 2008.
T. Sakai, "Statistical reform in information retrieval?", SIGIR Forum 48(1), 2014.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from .._chunks import CHUNK_ELEMENTS
from .._validation import check_fraction, check_positive_int, check_seed, real_array
from ._student import power_of_two_scale, t_quantile, t_test_p_value
from .systems import PreferenceMatrix, SystemScores

__all__ = [
    "PairwiseTests",
    "paired_t_tests",
    "randomised_tukey_hsd",
    "DiscriminativePower",
    "discriminative_power",
    "CORRECTIONS",
    "adjust_p_values",
    "TIED_TESTS",
    "TiedWithBest",
    "tied_with_best",
]

#: Tests :func:`discriminative_power` accepts; its default runs the first two.
TESTS = ("tukey", "bonferroni", "holm", "bh")
#: Values :func:`randomised_tukey_hsd` may permute in total (resamples × users × systems,
#: × systems again for preferences): about an hour of work at typical speeds.
TUKEY_BUDGET = 2**40
#: Multiple-testing corrections of :func:`adjust_p_values` and :func:`paired_t_tests`.
CORRECTIONS = ("bonferroni", "holm", "bh", "none")

# How tables name a correction.
_LABEL = {
    "bonferroni": "Bonferroni",
    "holm": "Holm",
    "bh": "Benjamini–Hochberg",
    "none": "uncorrected",
}


def adjust_p_values(p, method: str) -> np.ndarray:
    """p-values of one family adjusted for multiple testing (module docstring).

    Parameters
    ----------
    p : array_like, shape (n,)
        Unadjusted p-values, finite and in [0, 1].
    method : {"bonferroni", "holm", "bh", "none"}
        ``"bonferroni"`` and ``"holm"`` (Holm 1979, step-down) control the family-wise error
        rate, ``"bh"`` (Benjamini & Hochberg 1995, step-up) the false discovery rate;
        ``"none"`` returns a copy of ``p``.

    Returns
    -------
    numpy.ndarray, shape (n,)
        Adjusted p-values in the order of ``p``, capped at 1, in the usual monotone forms
        (Holm's a running maximum from the smallest p, BH's a running minimum from the
        largest): they never decrease as ``p`` grows, equal p-values get equal adjusted ones,
        and rejecting ``adjusted < α`` is the step-down (step-up) procedure at level α.

    References
    ----------
    S. Holm, Scandinavian Journal of Statistics 6(2):65–70, 1979; Y. Benjamini, Y. Hochberg,
    Journal of the Royal Statistical Society B 57(1):289–300, 1995.
    """
    if method not in CORRECTIONS:
        raise ValueError(f"method must be one of {CORRECTIONS}, got {method!r}")
    p = real_array(p, "p").astype(np.float64)
    if p.ndim != 1:
        raise ValueError(f"p must be a 1-D array of p-values, got shape {p.shape}")
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"p must be finite and in [0, 1], got p[{k}] = {p[k]!r}")
    n = p.size
    if method == "none" or n == 0:
        return p
    if method == "bonferroni":
        return np.minimum(p * n, 1.0)
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    k = np.arange(1, n + 1)
    if method == "holm":
        adjusted = np.maximum.accumulate((n - k + 1) * ranked)
    else:
        adjusted = np.minimum.accumulate((n / k * ranked)[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(adjusted, 1.0)
    return out


@dataclass(frozen=True, eq=False)
class PairwiseTests:
    """Mean differences and p-values for every pair of systems.

    Attributes
    ----------
    names : tuple of str
        Systems, in axis order.
    difference : numpy.ndarray, shape (M, M)
        ``difference[s, t]`` = mean(s) − mean(t) for metrics, mean RPP(s, t) for preferences.
    p_value : numpy.ndarray, shape (M, M)
        Adjusted two-sided p-values (symmetric, 1 on the diagonal): family-wise for
        ``"bonferroni"``, ``"holm"`` and ``"tukey"``, false-discovery-rate for ``"bh"``,
        unadjusted for ``"t"``.
    test : str
        The t-test with its correction, ``"bonferroni"``, ``"holm"``, ``"bh"`` or ``"t"``
        (uncorrected), or ``"tukey"`` (randomised HSD).
    measure : str
        Name of the tested measure.
    """

    names: tuple[str, ...]
    difference: np.ndarray
    p_value: np.ndarray
    test: str
    measure: str

    @property
    def n_pairs(self) -> int:
        """Number of unordered pairs, M(M − 1)/2."""
        m = len(self.names)
        return m * (m - 1) // 2

    def power(self, alpha: float = 0.05) -> float:
        """Share of the unordered pairs separated at ``p < alpha``."""
        alpha = check_fraction(alpha, "alpha")
        upper = np.triu_indices(len(self.names), 1)
        return float((self.p_value[upper] < alpha).mean())

    def pairs(self, alpha: float = 0.05) -> list[tuple[str, str, float, float]]:
        """Significant pairs ``(better, worse, difference, p)``, most significant first."""
        alpha = check_fraction(alpha, "alpha")
        s, t = np.nonzero((self.p_value < alpha) & (self.difference > 0))
        rows = [
            (self.names[i], self.names[j], float(self.difference[i, j]), float(self.p_value[i, j]))
            for i, j in zip(s, t, strict=False)
        ]
        return sorted(rows, key=lambda row: (row[3], -row[2]))


def _kind(sample) -> str:
    if isinstance(sample, PreferenceMatrix):
        return "preference"
    if isinstance(sample, SystemScores):
        return "metric"
    raise TypeError(
        "sample must be a SystemScores (per-user metric values) or a PreferenceMatrix, got "
        f"{type(sample).__name__}"
    )


def _finite(sample) -> None:
    """The tests need finite per-user values; the message names the user row and system."""
    bad = ~np.isfinite(sample.per_user)
    if bad.any():
        u, s = np.argwhere(bad)[0][:2]
        raise ValueError(
            f"sample.per_user has {float(sample.per_user[bad][0])} for user row {u}, system "
            f"{sample.names[s]!r}; scores must be finite"
        )


def _scaled(sample):
    """``sample`` with its values divided by a power of two that brings them into (−2, 2),
    and that scale: means, differences and variances of scores near the float limit (1e308)
    would overflow, while t statistics and p-values do not depend on the scale."""
    scale = power_of_two_scale(sample.per_user)
    if scale == 1.0:
        return sample, scale
    return replace(sample, per_user=sample.per_user / scale), scale


def _unscaled(difference: np.ndarray, scale: float, pair) -> np.ndarray:
    """Differences of means computed on a :func:`_scaled` sample, back in the scores' units;
    refused where they exceed the float range. ``pair(k)`` names the two systems of flat
    position k."""
    with np.errstate(over="ignore"):
        out = difference * scale
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        first, second = pair(int(bad[0]))
        raise ValueError(
            f"the mean difference of systems {first!r} and {second!r} is "
            f"{float(difference.flat[bad[0]])!r} × 2^{int(np.log2(scale))}, beyond float64: "
            "rescale the scores (their p-values do not depend on the scale)"
        )
    return out


def _pair_names(sample):
    """The two systems of flat position k of an M × M matrix of ``sample``."""
    m = len(sample.names)
    return lambda k: (sample.names[k // m], sample.names[k % m])


def _observed(sample) -> np.ndarray:
    if _kind(sample) == "preference":
        return sample.mean
    means = sample.means
    return means[:, None] - means[None, :]


def paired_t_tests(sample, correction: str = "bonferroni") -> PairwiseTests:
    """Two-sided paired t-test over users for every pair of systems.

    Parameters
    ----------
    sample : SystemScores or PreferenceMatrix
        Per-user metric values or per-user preferences.
    correction : {"bonferroni", "holm", "bh", "none"}
        Adjustment of the p-values over the family of the M(M − 1)/2 unordered pairs
        (:func:`adjust_p_values`): Bonferroni multiplies each p-value by the number of pairs
        (capped at 1), Holm's step-down also controls the family-wise error rate and rejects
        at least as much, Benjamini–Hochberg's step-up controls the false discovery rate.

    Returns
    -------
    PairwiseTests
        ``test`` is the correction (``"t"`` for ``"none"``); ``p_value`` is symmetric with 1 on
        the diagonal.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    _kind(sample)
    _finite(sample)
    sample, scale = _scaled(sample)
    diff = _observed(sample)
    n = sample.per_user.shape[0]
    if n < 2:
        raise ValueError(f"a t-test needs at least 2 users, got {n}")
    if _kind(sample) == "preference":
        var = sample.per_user.var(axis=0, ddof=1)
    else:
        # Var(x_s − x_t) for every pair from one covariance matrix.
        cov = np.cov(sample.per_user, rowvar=False)
        var = np.maximum(np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov, 0.0)
    raw = t_test_p_value(diff, np.sqrt(var / n), n)
    # One family: the unordered pairs (upper triangle), written back symmetrically.
    upper = np.triu_indices(len(sample.names), 1)
    p = np.ones_like(raw)
    p[upper] = adjust_p_values(raw[upper], correction)
    p.T[upper] = p[upper]
    return PairwiseTests(
        names=sample.names,
        difference=_unscaled(diff, scale, _pair_names(sample)),
        p_value=p,
        test="t" if correction == "none" else correction,
        measure=sample.name,
    )


def _permutations(rng: np.random.Generator, n_users: int, m: int, batch: int) -> np.ndarray:
    """``batch`` independent random permutations of M labels for every user (batch × users × M)."""
    return np.argsort(rng.random((batch, n_users, m)), axis=2)


def randomised_tukey_hsd(sample, n_resamples: int = 1000, seed: int | None = 0) -> PairwiseTests:
    """Carterette's randomised Tukey HSD over all pairs of systems (module docstring).

    Parameters
    ----------
    sample : SystemScores or PreferenceMatrix
        Per-user metric values or per-user preferences.
    n_resamples : int
        Number of random relabellings B; the smallest attainable p-value is 1/(B + 1). The
        work, B × users × systems values (× systems again for preferences), may not exceed
        :data:`TUKEY_BUDGET`; a larger request is refused with its size named.
    seed : int, numpy Generator or None
        Seed of the permutations.
    """
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    seed = check_seed(seed)
    kind = _kind(sample)
    _finite(sample)
    sample, scale = _scaled(sample)
    observed = np.abs(_observed(sample))
    values = sample.per_user
    n_users, m = values.shape[0], len(sample.names)
    per_resample = n_users * m * (m if kind == "preference" else 1)
    if n_resamples * per_resample > TUKEY_BUDGET:
        raise ValueError(
            f"n_resamples={n_resamples} would permute {n_resamples * per_resample:.3g} values "
            f"({n_users} users × {m} systems{f' × {m}' if kind == 'preference' else ''} per "
            f"resample), more than the {TUKEY_BUDGET:.3g} this test allows (hours of work); "
            "use fewer resamples"
        )
    rng = np.random.default_rng(seed)
    # Compare with a relative tolerance so float noise in the means cannot flip a tie.
    thresholds = observed.ravel() * (1 - 1e-12)
    reached = np.zeros(thresholds.size, dtype=np.int64)
    batch = max(1, CHUNK_ELEMENTS // per_resample)
    users = np.arange(n_users)[None, :, None]
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        perm = _permutations(rng, n_users, m, size)
        if kind == "metric":
            means = values[users, perm].mean(axis=1)
            maxima = means.max(axis=1) - means.min(axis=1)
        else:
            # RPP_u(σ_u(s), σ_u(t)) for every pair: gather rows, then columns, of each user's
            # matrix.
            rows = values[users, perm]
            permuted = np.take_along_axis(rows, perm[:, :, None, :], axis=3)
            maxima = np.abs(permuted.mean(axis=1)).max(axis=(1, 2))
        # Count the maxima reaching each pair's difference without keeping all B of them.
        reached += size - np.searchsorted(np.sort(maxima), thresholds, side="left")
    p = (1 + reached.reshape(observed.shape)) / (1 + n_resamples)
    np.fill_diagonal(p, 1.0)
    return PairwiseTests(
        names=sample.names,
        difference=_unscaled(_observed(sample), scale, _pair_names(sample)),
        p_value=p,
        test="tukey",
        measure=sample.name,
    )


@dataclass(frozen=True)
class DiscriminativePower:
    """Share of system pairs each measure separates, per test (Diaz & Ferraro Tables 3–4).

    Attributes
    ----------
    power : dict
        ``power[test][measure]`` = share of the pairs with ``p < alpha``.
    n_systems : int
        Systems in the pool.
    alpha : float
        Significance level.
    """

    power: dict[str, dict[str, float]]
    n_systems: int
    alpha: float

    @property
    def n_pairs(self) -> int:
        """Number of unordered pairs of systems."""
        return self.n_systems * (self.n_systems - 1) // 2

    def table(self) -> str:
        """Markdown table: one row per test, one column per measure, in percent of pairs."""
        measures = list(next(iter(self.power.values())))
        head = {
            "tukey": "Tukey HSD (randomised)",
            "bonferroni": "t-test, Bonferroni",
            "holm": "t-test, Holm",
            "bh": "t-test, Benjamini–Hochberg",
        }
        lines = [
            f"| test ({self.n_systems} systems, {self.n_pairs} pairs, p < {self.alpha}) | "
            + " | ".join(measures)
            + " |",
            "|---|" + "---|" * len(measures),
        ]
        for test, row in self.power.items():
            lines.append(
                f"| {head.get(test, test)} | "
                + " | ".join(f"{100 * row[m]:.2f}" for m in measures)
                + " |"
            )
        return "\n".join(lines)


def discriminative_power(
    samples: Mapping[str, SystemScores | PreferenceMatrix],
    tests: tuple[str, ...] = ("tukey", "bonferroni"),
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int | None = 0,
) -> DiscriminativePower:
    """Discriminative power of several measures over the same pool of systems.

    Parameters
    ----------
    samples : mapping of str to SystemScores or PreferenceMatrix
        Measure name → its per-user sample; all over the same systems, in the same order.
    tests : tuple of {"tukey", "bonferroni", "holm", "bh"}
        Tests to run: the randomised Tukey HSD, or paired t-tests with the Bonferroni, Holm or
        Benjamini–Hochberg correction over the pairs (:func:`paired_t_tests`). Power under
        ``"bh"`` is a share of false-discovery-rate rejections, not of family-wise ones.
    alpha : float
        Significance level.
    n_resamples, seed
        Of the randomised Tukey HSD.
    """
    if not isinstance(samples, Mapping) or not samples:
        raise ValueError(
            "samples must map measure names to SystemScores or PreferenceMatrix samples, got "
            f"{type(samples).__name__}{' (empty)' if isinstance(samples, Mapping) else ''}"
        )
    if isinstance(tests, str) or not hasattr(tests, "__iter__"):
        raise ValueError(f"tests must be a tuple of test names from {TESTS}, got {tests!r}")
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        raise ValueError(f"unknown test {unknown[0]!r}; choose from {TESTS}")
    alpha = check_fraction(alpha, "alpha")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    seed = check_seed(seed)
    for sample in samples.values():
        _kind(sample)
    names = {tuple(s.names) for s in samples.values()}
    if len(names) != 1:
        raise ValueError(f"samples cover different systems: {sorted(names)}")
    power: dict[str, dict[str, float]] = {test: {} for test in tests}
    for measure, sample in samples.items():
        for test in tests:
            result = (
                randomised_tukey_hsd(sample, n_resamples, seed)
                if test == "tukey"
                else paired_t_tests(sample, test)
            )
            power[test][measure] = result.power(alpha)
    return DiscriminativePower(power=power, n_systems=len(names.pop()), alpha=alpha)


#: Procedures :func:`tied_with_best` runs, by its ``test`` argument: Hsu's MCB (the default),
#: paired t-tests against the best with a correction, or the randomised Tukey HSD.
TIED_TESTS = ("mcb", "t", "tukey")


@dataclass(frozen=True, eq=False)
class TiedWithBest:
    """Systems not significantly worse than the one with the highest mean.

    Attributes
    ----------
    names : tuple of str
        All systems, by decreasing mean (best first; equal means keep column order).
    best : str
        The system with the highest mean, ``names[0]``.
    tied : tuple of str
        Systems whose p-value is at least ``alpha`` (not significantly worse than the best),
        the best included, in the order of ``names``.
    mean : numpy.ndarray, shape (M,)
        Mean score of each system, in the order of ``names``.
    difference : numpy.ndarray, shape (M,)
        mean(best) − mean(s) for each system in the order of ``names`` (≥ 0; 0 for the best).
    p_value : numpy.ndarray, shape (M,)
        In the order of ``names``, the smallest level at which s is declared worse than the
        best: for ``test="mcb"`` the null probability that the largest ``|t|`` over all pairs
        reaches ``max_{j≠s} t_js`` (the upper MCB bound of s is below 0 exactly when it is
        below ``alpha``); otherwise the adjusted two-sided p-value of "s differs from the
        best". The best gets 1, as on the diagonal of :class:`PairwiseTests`; so ``tied`` is
        exactly the systems with ``p_value >= alpha``.
    alpha : float
        Significance level.
    correction : str
        Correction over the M − 1 t-tests against the best (:data:`CORRECTIONS`); ``"none"``
        for MCB and the Tukey HSD, whose p-values already control the family-wise error rate.
    test : str
        ``"mcb"`` (Hsu's multiple comparisons with the best), ``"t"`` (paired t-tests against
        the best) or ``"tukey"`` (randomised Tukey HSD); see :data:`TIED_TESTS`.
    measure : str
        Name of the tested measure.
    procedure : str
        The procedure in words, with how its null distribution was computed.
    interval : numpy.ndarray, shape (M, 2), or None
        ``test="mcb"`` only: simultaneous ``1 − alpha`` intervals for ``μ_s − max_{t≠s} μ_t``
        (true means) in the order of ``names`` (module docstring); s is tied with the best
        exactly when its upper bound is at least 0.
    critical_value : float or None
        ``test="mcb"`` only: c, the ``1 − alpha`` quantile of the largest ``|t|`` over all pairs
        when all systems are equal.
    """

    names: tuple[str, ...]
    best: str
    tied: tuple[str, ...]
    mean: np.ndarray
    difference: np.ndarray
    p_value: np.ndarray
    alpha: float
    correction: str
    test: str
    measure: str
    procedure: str
    interval: np.ndarray | None
    critical_value: float | None

    @property
    def label(self) -> str:
        """The procedure and level in a few words, e.g. ``"Hsu's MCB, α=0.05"``."""
        name = {"mcb": "Hsu's MCB", "tukey": "randomised Tukey HSD"}.get(
            self.test, _LABEL[self.correction]
        )
        return f"{name}, α={self.alpha:g}"

    def table(self) -> str:
        """Markdown table: rank, system, mean, difference to the best, p, tie mark."""
        lines = [
            f"| rank | system | {self.measure} | difference to best | p ({self.label}) | "
            f"tied with best |",
            "|---|---|---|---|---|---|",
        ]
        for rank, (name, mean, diff, p) in enumerate(
            zip(self.names, self.mean, self.difference, self.p_value, strict=True), 1
        ):
            p_text = "–" if name == self.best else f"{p:.3g}"
            mark = "=" if name in self.tied else ""
            lines.append(f"| {rank} | {name} | {mean:.4g} | {diff:.4g} | {p_text} | {mark} |")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"{len(self.tied)} of {len(self.names)} systems tied with the best, {self.best} "
            f"({self.label}):\n{self.procedure}\n{self.table()}"
        )


def _pair_standard_deviations(values: np.ndarray) -> np.ndarray:
    """Standard deviation over users of ``x_ui − x_uj`` for every pair (M × M), from the
    differences themselves so that identical systems get exactly 0."""
    m = values.shape[1]
    return np.stack([(values[:, [i]] - values).std(axis=0, ddof=1) for i in range(m)])


def _max_abs_t_draws(
    values: np.ndarray, pair_sd: np.ndarray, n_draws: int, rng: np.random.Generator
) -> np.ndarray:
    """``n_draws`` draws, sorted, of the largest ``|t_ij|`` over the pairs with spread when all
    systems are equal: the multivariate t ``z / w`` of the module docstring, ``z`` normal with
    the users' covariance and ``w² ~ χ²_ν / ν`` (ν = users − 1) shared by all pairs."""
    n_users, m = values.shape
    eigenvalues, vectors = np.linalg.eigh(np.atleast_2d(np.cov(values, rowvar=False)))
    # A root from the eigendecomposition also serves the singular covariance of identical
    # systems, where a Cholesky factor does not exist.
    root = vectors * np.sqrt(np.clip(eigenvalues, 0.0, None))
    nu = n_users - 1
    maxima = np.zeros(n_draws)
    batch = max(1, CHUNK_ELEMENTS // (2 * m))
    for start in range(0, n_draws, batch):
        size = min(batch, n_draws - start)
        z = rng.standard_normal((size, m)) @ root.T
        w = np.sqrt(rng.chisquare(nu, size) / nu)
        top = maxima[start : start + size]
        # Row by row: pairs (i, j > i) without copying z once per pair.
        for i in range(m - 1):
            spread = pair_sd[i, i + 1 :] > 0
            if spread.any():
                t = np.abs(z[:, i + 1 :][:, spread] - z[:, [i]]) / pair_sd[i, i + 1 :][spread]
                np.maximum(top, t.max(axis=1), out=top)
        top /= w
    return np.sort(maxima)


def _mcb(
    values: np.ndarray, means: np.ndarray, alpha: float, n_draws: int, rng
) -> tuple[np.ndarray, np.ndarray, float, str]:
    """Hsu's unconstrained MCB (module docstring) in column order: p-values, intervals for
    ``μ_i − max_{j≠i} μ_j``, the critical value c and the procedure in words."""
    n_users, m = values.shape
    pair_sd = _pair_standard_deviations(values)
    se = pair_sd / np.sqrt(n_users)
    gap = means[:, None] - means[None, :]  # gap[i, j] = x̄_i − x̄_j
    with np.errstate(divide="ignore", invalid="ignore"):
        # Without spread a pair is decided by its difference, as in t_test_p_value.
        t = np.where(se > 0, -gap / se, np.where(gap == 0, 0.0, -np.sign(gap) * np.inf))
    np.fill_diagonal(t, -np.inf)  # t[i, j] = t_ji, system j against system i
    worst = t.max(axis=1)  # max_{j≠i} t_ji: how far the best other system is above i
    nu = n_users - 1
    words = "Hsu's multiple comparisons with the best (unconstrained): simultaneous intervals from "
    if m == 2:
        # One pair: the largest |t| is Student's |t_ν| and MCB is the two-sided paired t-test.
        p = np.where(worst > 0, t_test_p_value(np.maximum(worst, 0), 1.0, n_users), 1.0)
        c = float(t_quantile(1 - alpha / 2, nu))
        words += f"the paired t-test's |t|, Student's t with {nu} df (exact)"
    else:
        maxima = _max_abs_t_draws(values, pair_sd, n_draws, rng)
        # Compare with a relative tolerance so float noise cannot flip a tie.
        reached = n_draws - np.searchsorted(maxima, worst * (1 - 1e-12), side="left")
        p = np.where(np.isposinf(worst), 0.0, (1 + reached) / (1 + n_draws))
        # c: the largest draw at which p would still be at least alpha, so that an upper bound
        # below 0 and p < alpha are the same event.
        allowed = int(np.ceil(alpha * (1 + n_draws) - 1 - 1e-9)) - 1
        c = float(maxima[n_draws - allowed - 1]) if allowed >= 0 else np.inf
        words += (
            f"the largest |t| over all {m * (m - 1) // 2} paired differences, multivariate t with "
            f"{nu} df and the users' covariance ({n_draws} Monte Carlo draws)"
        )
    p = np.minimum(p, 1.0)
    off = ~np.eye(m, dtype=bool)
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, c * se, 0.0)
    lower = np.where(off, gap - half, np.inf).min(axis=1)
    upper = np.where(off, gap + half, np.inf).min(axis=1)
    return p, np.column_stack([lower, upper]), c, words


def tied_with_best(
    sample: SystemScores,
    alpha: float = 0.05,
    correction: str | None = None,
    test: str = "mcb",
    n_resamples: int = 1000,
    seed: int | None = 0,
    *,
    n_draws: int = 100_000,
) -> TiedWithBest:
    """Systems statistically tied with the one with the highest mean.

    The best is the system with the highest mean score (the first in column order among equal
    means). A system is *tied* with it unless the procedure declares it worse at level
    ``alpha`` (p-value below ``alpha``):

    * ``test="mcb"`` (default) — Hsu's multiple comparisons with the best, unconstrained
      (module docstring): s is worse when its simultaneous upper bound on
      ``μ_s − max_{t≠s} μ_t`` is below 0. The probability of declaring worse any system whose
      true mean is the largest is at most ``alpha`` (up to the Monte Carlo and the
      multivariate-t approximation), whichever system the data ranked first and however many
      share the largest mean. With two systems it is the paired t-test.
    * ``test="t"`` — the M − 1 paired t-tests over users of ``x_u,best − x_us`` (the t-test of
      :func:`paired_t_tests`, equal to ``scipy.stats.ttest_rel``), adjusted over the family of
      M − 1 with :func:`adjust_p_values` (Holm unless ``correction`` says otherwise). The family
      takes the best as given, but the same data chose it, so when all systems are equal some
      system is declared worse than the best more often than ``alpha`` once M > 2 (simulated,
      independent normal scores of 50 users, Holm at 0.05: 0.066 for M = 3, 0.089 for M = 5,
      0.147 for M = 10).
    * ``test="tukey"`` — the best's row of :func:`randomised_tukey_hsd`, whose p-values control
      the family-wise error rate over all M(M − 1)/2 pairs when the systems are exchangeable
      within users; it compares raw mean differences, not t statistics.

    Parameters
    ----------
    sample : SystemScores
        Per-user scores of at least 2 systems over at least 2 users; higher is better.
    alpha : float
        Significance level, in (0, 1).
    correction : {"holm", "bonferroni", "bh", "none"} or None
        Correction over the M − 1 t-tests of ``test="t"``; None means ``"holm"``. With
        ``test="mcb"`` or ``"tukey"`` it must be None or ``"none"``.
    test : {"mcb", "t", "tukey"}
        The procedure (:data:`TIED_TESTS`).
    n_resamples : int
        Random relabellings of the randomised Tukey HSD.
    seed : int, numpy Generator or None
        Seed of the Tukey HSD's relabellings and of MCB's draws.
    n_draws : int
        Monte Carlo draws of the multivariate t from which MCB takes its critical value and
        p-values (with more than two systems); the p-value's Monte Carlo standard error is
        ``sqrt(p (1 − p) / n_draws)``, 0.0007 at p = 0.05 with the default.

    Returns
    -------
    TiedWithBest
        Systems by decreasing mean with differences to the best, p-values, the tied set, the
        procedure in words and, for MCB, the simultaneous intervals.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.inference import SystemScores
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((200, 1)) + [0.0, 0.0, -0.3] + 0.1 * rng.standard_normal((200, 3))
    >>> scores = SystemScores(("a", "b", "c"), x, np.arange(200), "nDCG@10")
    >>> result = tied_with_best(scores)
    >>> result.label, sorted(result.tied)
    ("Hsu's MCB, α=0.05", ['a', 'b'])
    >>> bool(result.interval[2, 1] < 0)  # c is below the best of the others
    True

    References
    ----------
    J. C. Hsu, Multiple Comparisons: Theory and Methods, Chapman & Hall, 1996, ch. 4;
    T. Hothorn, F. Bretz, P. Westfall, Biometrical Journal 50(3):346–363, 2008; S. Holm,
    Scandinavian Journal of Statistics 6(2):65–70, 1979; Y. Benjamini, Y. Hochberg, Journal of
    the Royal Statistical Society B 57(1):289–300, 1995; B. Carterette, ACM TOIS 30(1), 2012.
    """
    if not isinstance(sample, SystemScores):
        raise TypeError(
            "sample must be a SystemScores (per-user scores of each system), got "
            f"{type(sample).__name__}; for a PreferenceMatrix use its win_rates()"
        )
    alpha = check_fraction(alpha, "alpha")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    n_draws = check_positive_int(n_draws, "n_draws")
    seed = check_seed(seed)
    if test not in TIED_TESTS:
        raise ValueError(f"test must be one of {TIED_TESTS}, got {test!r}")
    if test == "t":
        if correction is None:
            correction = "holm"
        elif correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS} or None, got {correction!r}")
    elif correction not in (None, "none"):
        raise ValueError(
            f"correction={correction!r} conflicts with test={test!r}, which already controls the "
            "family-wise error rate; leave correction None or 'none'"
        )
    else:
        correction = "none"
    n_users, m = sample.per_user.shape
    if m < 2:
        raise ValueError(f"sample must hold at least 2 systems, got {m}: {list(sample.names)}")
    if n_users < 2:
        raise ValueError(f"sample must hold at least 2 users, got {n_users}")
    _finite(sample)
    scaled, scale = _scaled(sample)
    values, means = scaled.per_user, scaled.means
    order = np.argsort(-means, kind="stable")
    best = int(order[0])
    difference = means[best] - means[order]
    interval = critical_value = None
    if test == "mcb":
        p, bounds, critical_value, procedure = _mcb(
            values, means, alpha, n_draws, np.random.default_rng(seed)
        )
        p_value, interval = p[order], bounds[order]
    elif test == "t":
        diffs = values[:, [best]] - values[:, order[1:]]
        se = diffs.std(axis=0, ddof=1) / np.sqrt(n_users)
        raw = t_test_p_value(diffs.mean(axis=0), se, n_users)
        p_value = np.concatenate(([1.0], adjust_p_values(raw, correction)))
        procedure = (
            f"paired t-tests against the best, {_LABEL[correction]} over the {m - 1} tests "
            "(the best taken as given)"
        )
    else:
        p_value = randomised_tukey_hsd(sample, n_resamples, seed).p_value[best, order]
        procedure = (
            f"best's row of the randomised Tukey HSD over all {m * (m - 1) // 2} pairs "
            f"({n_resamples} relabellings)"
        )
    names = tuple(sample.names[i] for i in order)
    tied = tuple(name for name, p in zip(names, p_value, strict=True) if p >= alpha)
    return TiedWithBest(
        names=names,
        best=names[0],
        tied=tied,
        mean=sample.means[order],
        difference=_unscaled(difference, scale, lambda k: (names[0], names[k])),
        p_value=p_value,
        alpha=alpha,
        correction=correction,
        test=test,
        measure=sample.name,
        procedure=procedure,
        interval=None if interval is None else interval * scale,
        critical_value=critical_value,
    )
