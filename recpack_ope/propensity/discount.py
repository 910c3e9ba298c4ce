"""Position-bias (discount) models ``δ(r) = P(V=1 | R=r)``.

Jeunen et al. (KDD'24, §4, Assumption 2 and the remark after Eq. 8) read the DCG discount
as the examination probability of a position-based model and encode the top-n cut-off in
the curve itself: ``δ(r) = 0`` for every rank past the cutoff. Every model here follows that
convention, so ``LogDiscount(cutoff=K)`` is the discount of DCG@K.

Ranks are 1-based. ``cutoff=None`` means the curve never reaches zero (every ranked item
may be examined), which makes the estimators rank all candidates instead of a top-K.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from .._validation import _is_pandas, check_fraction, check_positive_int, real_array

__all__ = [
    "Discount",
    "LogDiscount",
    "ExponentialDiscount",
    "ReciprocalDiscount",
    "CustomDiscount",
]


def _set_cutoff(discount: Discount) -> None:
    """Validate a frozen discount's cutoff and store it as a Python int (or None)."""
    cutoff = check_positive_int(discount.cutoff, "cutoff", allow_none=True)
    object.__setattr__(discount, "cutoff", cutoff)


class Discount:
    """Base class: an examination curve over 1-based ranks with an optional cutoff.

    Subclasses implement :meth:`_curve` for ranks within the cutoff; :meth:`__call__`
    validates ranks and zeroes everything past the cutoff.
    """

    cutoff: int | None

    def _curve(self, ranks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, ranks: np.ndarray | int) -> np.ndarray:
        """Examination probability ``δ(r)`` for each 1-based rank in ``ranks``.

        Parameters
        ----------
        ranks : array_like of int
            1-based ranks.

        Returns
        -------
        numpy.ndarray
            ``δ(r)`` as float64, 0 for ranks past the cutoff.
        """
        r = np.asarray(ranks)
        if not np.issubdtype(r.dtype, np.integer):
            raise ValueError(f"ranks must be integers >= 1, got dtype {r.dtype}")
        if r.size and r.min() < 1:
            raise ValueError(f"ranks must be integers >= 1, got minimum {r.min()}")
        out = self._curve(r.astype(np.float64))
        if self.cutoff is not None:
            out = np.where(r <= self.cutoff, out, 0.0)
        return out

    def weights(self, n: int) -> np.ndarray:
        """``δ(1), …, δ(n)``: the curve over the first ``n`` ranks (``n`` an integer >= 0)."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        return self(np.arange(1, n + 1))

    def with_cutoff(self, k: int) -> Discount:
        """The same curve examined down to rank ``k``: the discount of DCG@k.

        Frameworks that build metrics as ``Metric(K=k)`` (RecPack) use this to turn one
        configured curve shape into the discount of each cutoff.
        """
        return replace(self, cutoff=check_positive_int(k, "k"))

    @property
    def label(self) -> str:
        """Short name used in result names, e.g. ``"@10"``; empty without cutoff."""
        return "" if self.cutoff is None else f"@{self.cutoff}"


@dataclass(frozen=True)
class LogDiscount(Discount):
    """``δ(r) = 1 / log2(r + 1)``: the discount of (n)DCG (Järvelin & Kekäläinen 2002).

    With ``cutoff=K`` this is exactly the discount of RecPack's ``DCGK(K)`` and of
    scikit-learn's ``dcg_score(k=K)``.
    """

    cutoff: int | None = None

    def __post_init__(self) -> None:
        _set_cutoff(self)

    def _curve(self, ranks: np.ndarray) -> np.ndarray:
        return 1.0 / np.log2(ranks + 1.0)


@dataclass(frozen=True)
class ExponentialDiscount(Discount):
    """``δ(r) = γ^(r−1)``: the patience model of rank-biased precision (Moffat & Zobel 2008).

    Parameters
    ----------
    gamma : float
        Persistence, the probability of moving on to the next rank; in (0, 1].
    cutoff : int or None
        Last examined rank.
    """

    gamma: float = 0.8
    cutoff: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", check_fraction(self.gamma, "gamma", include_one=True))
        _set_cutoff(self)

    def _curve(self, ranks: np.ndarray) -> np.ndarray:
        return self.gamma ** (ranks - 1.0)


@dataclass(frozen=True)
class ReciprocalDiscount(Discount):
    """``δ(r) = 1 / r``: the discount behind reciprocal-rank style metrics."""

    cutoff: int | None = None

    def __post_init__(self) -> None:
        _set_cutoff(self)

    def _curve(self, ranks: np.ndarray) -> np.ndarray:
        return 1.0 / ranks


@dataclass(frozen=True, eq=False)
class CustomDiscount(Discount):
    """A discount given as an array ``values[r-1] = δ(r)``, e.g. a learnt examination curve.

    The cutoff is ``len(values)``: ranks past the array get 0.

    Parameters
    ----------
    values : array_like of float
        Non-negative, finite examination probabilities for ranks 1..n; ``values[0] > 0``
        because the top rank must be examined for any estimator to have support. A pandas
        Series must be in rank order, indexed 0..n−1 or by the ranks 1..n; other labels are
        refused rather than read by position.
    """

    values: np.ndarray
    cutoff: int = field(init=False)

    def __post_init__(self) -> None:
        given = self.values
        if sp.issparse(given):
            raise ValueError("values must be a non-empty 1-D array, got a sparse matrix")
        if _is_pandas(given, "index"):
            n = len(given.index)
            labels = np.asarray(given.index)
            if not any(np.array_equal(labels, np.arange(start, start + n)) for start in (0, 1)):
                shown = ", ".join(repr(x) for x in given.index[:5]) + (", …" if n > 5 else "")
                raise ValueError(
                    f"values is a pandas Series indexed by [{shown}], not by 0..{n - 1} or the "
                    f"ranks 1..{n} in order: sort it by rank (values[r-1] = δ(r)), or pass "
                    ".to_numpy()"
                )
        v = np.array(real_array(given, "values"), dtype=np.float64)
        if v.ndim != 1 or v.size == 0:
            raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
        bad = np.flatnonzero(~np.isfinite(v) | (v < 0))
        if bad.size:
            raise ValueError(
                f"discount values must be finite and >= 0; rank {bad[0] + 1} has {float(v[bad[0]])}"
            )
        if v[0] <= 0:
            raise ValueError("discount value of rank 1 must be > 0")
        v.setflags(write=False)
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "cutoff", int(v.size))

    def _curve(self, ranks: np.ndarray) -> np.ndarray:
        # Clamp before the int cast: a rank beyond int64 must not wrap around.
        idx = np.minimum(ranks, self.cutoff).astype(np.int64) - 1
        return self.values[idx]

    def with_cutoff(self, k: int) -> CustomDiscount:
        """The curve truncated at rank ``k``; ranks past ``len(values)`` stay 0."""
        return CustomDiscount(self.weights(check_positive_int(k, "k")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomDiscount) and np.array_equal(self.values, other.values)

    def __hash__(self) -> int:
        return hash(self.values.tobytes())
