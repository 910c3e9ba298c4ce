"""Which pairs of systems differ significantly, and the discriminative power of a measure.

Works on two kinds of samples over the same users:

* :class:`~recpack_ope.inference.systems.SystemScores` — a metric's per-user values (users × M); the
  pair (s, t) is tested on the per-user differences ``x_us − x_ut``;
* :class:`~recpack_ope.metrics.rpp.PreferenceMatrix` — per-user preferences RPP_u(s, t) (users × M ×
  M), already paired differences; the pair is tested on ``RPP_u(s, t)`` against 0.

Tests, as Diaz & Ferraro (SIGIR'22 §5.2, Tables 3–4) use them after Sakai (2014):

* :func:`paired_t_tests` — Student's t over users for every pair, with Bonferroni correction
  over the M(M − 1)/2 pairs;
* :func:`randomised_tukey_hsd` — Carterette's (TOIS 2012) randomised Tukey HSD: under the null
  hypothesis the systems are exchangeable within each user, so the system labels of every user
  are permuted at random; each permutation records the largest absolute mean pairwise
  difference over all pairs (for metrics, the range of the permuted system means). A pair's
  p-value is the share of permutations whose maximum reaches the pair's observed difference,
  ``(1 + #{b : max_b ≥ |d_st|}) / (1 + B)``, which controls the family-wise error rate.

:func:`discriminative_power` is the share of pairs a measure separates at ``p < α``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._chunks import CHUNK_ELEMENTS
from .._validation import check_positive_int
from .result import t_test_p_value
from .systems import PreferenceMatrix, SystemScores

__all__ = [
    "PairwiseTests",
    "paired_t_tests",
    "randomised_tukey_hsd",
    "DiscriminativePower",
    "discriminative_power",
]

TESTS = ("tukey", "bonferroni")


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
        Family-wise adjusted two-sided p-values (symmetric, 1 on the diagonal).
    test : str
        ``"bonferroni"`` (t-test) or ``"tukey"`` (randomised HSD).
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
        upper = np.triu_indices(len(self.names), 1)
        return float((self.p_value[upper] < alpha).mean())

    def pairs(self, alpha: float = 0.05) -> list[tuple[str, str, float, float]]:
        """Significant pairs ``(better, worse, difference, p)``, most significant first."""
        s, t = np.nonzero((self.p_value < alpha) & (self.difference > 0))
        rows = [(self.names[i], self.names[j], float(self.difference[i, j]), float(self.p_value[i, j]))
                for i, j in zip(s, t, strict=False)]
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
    correction : {"bonferroni", "none"}
        Bonferroni multiplies each p-value by the number of pairs (capped at 1).
    """
    if correction not in ("bonferroni", "none"):
        raise ValueError(f"correction must be 'bonferroni' or 'none', got {correction!r}")
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
    p = t_test_p_value(diff, np.sqrt(var / n), n)
    m = len(sample.names)
    if correction == "bonferroni":
        p = np.minimum(p * (m * (m - 1) / 2), 1.0)
    np.fill_diagonal(p, 1.0)
    return PairwiseTests(names=sample.names, difference=diff, p_value=p, test="bonferroni"
                         if correction == "bonferroni" else "t", measure=sample.name)


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
        Number of random relabellings B; the smallest attainable p-value is 1/(B + 1).
    seed : int or None
        Seed of the permutations.
    """
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    kind = _kind(sample)
    observed = np.abs(_observed(sample))
    values = sample.per_user
    n_users, m = values.shape[0], len(sample.names)
    rng = np.random.default_rng(seed)
    maxima = np.empty(n_resamples)
    per_resample = n_users * m * (m if kind == "preference" else 1)
    batch = max(1, CHUNK_ELEMENTS // per_resample)
    users = np.arange(n_users)[None, :, None]
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        perm = _permutations(rng, n_users, m, size)
        if kind == "metric":
            means = values[users, perm].mean(axis=1)
            maxima[start : start + size] = means.max(axis=1) - means.min(axis=1)
        else:
            # RPP_u(σ_u(s), σ_u(t)) for every pair: gather rows, then columns, of each user's matrix.
            rows = values[users, perm]
            permuted = np.take_along_axis(rows, perm[:, :, None, :], axis=3)
            maxima[start : start + size] = np.abs(permuted.mean(axis=1)).max(axis=(1, 2))
    # Compare with a relative tolerance so float noise in the means cannot flip a tie.
    reached = maxima[None, None, :] >= observed[:, :, None] * (1 - 1e-12)
    p = (1 + reached.sum(axis=2)) / (1 + n_resamples)
    np.fill_diagonal(p, 1.0)
    return PairwiseTests(names=sample.names, difference=_observed(sample), p_value=p,
                         test="tukey", measure=sample.name)


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
        head = {"tukey": "Tukey HSD (randomised)", "bonferroni": "t-test, Bonferroni"}
        lines = [
            f"| test ({self.n_systems} systems, {self.n_pairs} pairs, p < {self.alpha}) | "
            + " | ".join(measures) + " |",
            "|---|" + "---|" * len(measures),
        ]
        for test, row in self.power.items():
            lines.append(f"| {head.get(test, test)} | " + " | ".join(f"{100 * row[m]:.2f}" for m in measures) + " |")
        return "\n".join(lines)


def discriminative_power(
    samples: Mapping[str, SystemScores | PreferenceMatrix],
    tests: tuple[str, ...] = TESTS,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int | None = 0,
) -> DiscriminativePower:
    """Discriminative power of several measures over the same pool of systems.

    Parameters
    ----------
    samples : mapping of str to SystemScores or PreferenceMatrix
        Measure name → its per-user sample; all over the same systems, in the same order.
    tests : tuple of {"tukey", "bonferroni"}
        Tests to run.
    alpha : float
        Significance level.
    n_resamples, seed
        Of the randomised Tukey HSD.
    """
    if not samples:
        raise ValueError("samples is empty: give at least one measure")
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        raise ValueError(f"unknown test {unknown[0]!r}; choose from {TESTS}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    names = {tuple(s.names) for s in samples.values()}
    if len(names) != 1:
        raise ValueError(f"samples cover different systems: {sorted(names)}")
    power: dict[str, dict[str, float]] = {test: {} for test in tests}
    for measure, sample in samples.items():
        for test in tests:
            result = (randomised_tukey_hsd(sample, n_resamples, seed) if test == "tukey"
                      else paired_t_tests(sample, "bonferroni"))
            power[test][measure] = result.power(alpha)
    return DiscriminativePower(power=power, n_systems=len(names.pop()), alpha=alpha)
