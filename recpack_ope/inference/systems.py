"""Per-user scores of several systems on the same users, ready to order and to test.

:class:`SystemScores` holds one score per (user, system): a metric's per-user values (built
from :class:`~recpack_ope.EstimateResult` objects with :meth:`SystemScores.from_estimates`)
or RPP win rates (:func:`recpack_ope.metrics.rpp.win_rates`). Orderings come from
:mod:`recpack_ope.inference.aggregation`, significance from
:mod:`recpack_ope.inference.significance`
(:func:`~recpack_ope.inference.significance.tied_with_best`: the systems not significantly
worse than the best).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._validation import real_array
from . import _student, aggregation
from .result import EstimateResult, PairedEstimate

if TYPE_CHECKING:
    from .significance import TiedWithBest

__all__ = ["SystemScores", "PreferenceMatrix", "distinct_names"]


def _system_names(names) -> tuple[str, ...]:
    """System names as a tuple of distinct strings; a bare string is refused rather than split
    into one system per character."""
    if isinstance(names, str) or not hasattr(names, "__iter__"):
        raise ValueError(f"names must be a sequence of system names, got {names!r}")
    names = tuple(names)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"system names must be strings, got {names!r}")
    if len(set(names)) != len(names):
        repeated = next(n for i, n in enumerate(names) if n in names[:i])
        raise ValueError(f"system names must be distinct; {repeated!r} appears more than once")
    return names


def distinct_names(names) -> tuple[str, ...]:
    """System names made distinct: a name given more than once is numbered in order of
    appearance (``"BPR (1)"``, ``"BPR (2)"``), the others are kept.

    Examples
    --------
    >>> from recpack_ope.inference.systems import distinct_names
    >>> distinct_names(["BPR", "MostPop", "BPR"])
    ('BPR (1)', 'MostPop', 'BPR (2)')
    """
    names = [str(n) for n in names]
    return tuple(
        f"{n} ({names[:i].count(n) + 1})" if names.count(n) > 1 else n for i, n in enumerate(names)
    )


@dataclass(frozen=True, eq=False)
class SystemScores:
    """Per-user scores of M systems.

    Attributes
    ----------
    names : tuple of str
        System names, in column order.
    per_user : numpy.ndarray, shape (n_users, M)
        Score of each system for each user; higher is better. A pandas DataFrame is aligned
        to ``names`` by its column labels.
    user_ids : numpy.ndarray
        Rows of ``y_true`` the users are.
    name : str
        What the scores are, e.g. ``"nDCG@100"`` or ``"RPP win rate"``.
    n_excluded_users : int
        Users of ``y_true`` left out (no relevant items).
    """

    names: tuple[str, ...]
    per_user: np.ndarray
    user_ids: np.ndarray
    name: str
    n_excluded_users: int = 0

    def __post_init__(self) -> None:
        names = _system_names(self.names)
        per_user = self.per_user
        columns = getattr(per_user, "columns", None)
        if columns is not None:
            # A DataFrame's columns say which system each column is: align them by name.
            labels = tuple(str(c) for c in columns)
            if sorted(labels) != sorted(names):
                raise ValueError(
                    f"per_user is a DataFrame with columns {list(labels)} but names are "
                    f"{list(names)}: they must name the same systems"
                )
            per_user = per_user.iloc[:, [labels.index(n) for n in names]].to_numpy()
        per_user = real_array(per_user, "per_user", axes=("user row", "system")).astype(
            np.float64, copy=False
        )
        if per_user.shape != (len(self.user_ids), len(names)):
            raise ValueError(
                f"per_user has shape {per_user.shape}, expected (users, systems) = "
                f"({len(self.user_ids)}, {len(names)})"
            )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "per_user", per_user)

    @classmethod
    def from_estimates(
        cls, results: Mapping[str, EstimateResult], name: str | None = None
    ) -> SystemScores:
        """Per-user values of one metric for several systems evaluated on the same users.

        ``per_user`` of each result is used (the metric value for plain means; the
        contribution ``DCG_u / mean(iDCG)`` for pnDCG, whose mean is the value).
        """
        if not isinstance(results, Mapping) or len(results) < 2:
            raise ValueError(
                "results must map at least two system names to their estimates, got "
                f"{type(results).__name__} of length "
                f"{len(results) if hasattr(results, '__len__') else '?'}"
            )
        wrong = [n for n, r in results.items() if not isinstance(r, PairedEstimate)]
        if wrong:
            raise TypeError(
                f"results[{wrong[0]!r}] is a {type(results[wrong[0]]).__name__}, not an estimate "
                "(EstimateResult) of the metric"
            )
        items = list(results.items())
        first_name, first = items[0]
        for other_name, other in items[1:]:
            if not np.array_equal(first.user_ids, other.user_ids):
                raise ValueError(
                    f"{other_name!r} was evaluated on {other.n_users} users, {first_name!r} on "
                    f"{first.n_users}: systems must be evaluated on the same users"
                )
        return cls(
            names=tuple(str(n) for n, _ in items),
            per_user=np.column_stack([r.per_user for _, r in items]),
            user_ids=first.user_ids,
            name=name or first.name,
            n_excluded_users=first.n_excluded_users,
        )

    @classmethod
    def from_user_values(
        cls, per_system: Mapping[str, Mapping[object, float]], name: str
    ) -> SystemScores:
        """Per-user values of one metric keyed by user, as frameworks keep them (Cornac's
        ``metric_user_results``), paired on the users every system has, in sorted order.

        Examples
        --------
        >>> from recpack_ope.inference.systems import SystemScores
        >>> per_user = {"a": {3: 1.0, 1: 0.0}, "b": {1: 0.5, 3: 0.25, 9: 1.0}}
        >>> s = SystemScores.from_user_values(per_user, "Recall@5")
        >>> s.user_ids.tolist(), s.per_user.tolist()
        ([1, 3], [[0.0, 0.5], [1.0, 0.25]])
        """
        if not isinstance(per_system, Mapping) or not per_system:
            raise ValueError("per_system must map system names to {user: value} mappings")
        users = sorted(set.intersection(*(set(v) for v in per_system.values())))
        values = np.array([[v[u] for v in per_system.values()] for u in users], dtype=np.float64)
        values = values.reshape(len(users), len(per_system))
        return cls(tuple(per_system), values, np.asarray(users), name)

    @property
    def means(self) -> np.ndarray:
        """Mean score of each system over users (scores near the float limit do not overflow
        the sum)."""
        return _student.mean(self.per_user, axis=0)

    def index(self, name: str) -> int:
        """Column of a system, with a message naming the known systems."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"no system {name!r}; known systems are {list(self.names)}") from None

    def estimate(self, name: str) -> EstimateResult:
        """One system's mean score with per-user values and a t interval."""
        return EstimateResult(
            name=f"{self.name}({name})",
            terms=self.per_user[:, self.index(name)],
            exponents=(1,),
            user_ids=self.user_ids,
            n_excluded_users=self.n_excluded_users,
        )

    def ordering(self, method: str = "mc4", damping: float = 0.15) -> list[str]:
        """System names, best first: MC4 or Borda over the per-user orders, or by mean."""
        return [self.names[i] for i in aggregation.order(self.per_user, method, damping)]

    def table(self, method: str = "mc4", tied: TiedWithBest | None = None) -> str:
        """Markdown table: systems in ``method`` order with mean, 95 % CI and Borda points.

        Parameters
        ----------
        method : str
            Ordering of the rows (:func:`recpack_ope.inference.aggregation.order`).
        tied : TiedWithBest, optional
            Result of :func:`~recpack_ope.inference.significance.tied_with_best` on these
            scores; adds a column "tied with best (Hsu's MCB, α=0.05)" (its procedure and
            level) marking tied systems with "=". Without it the table is unchanged.
        """
        if tied is not None and set(tied.names) != set(self.names):
            raise ValueError(
                f"tied covers systems {sorted(tied.names)}, the scores {sorted(self.names)}: "
                "pass the tied_with_best result of these scores"
            )
        points = aggregation.borda(self.per_user)
        head, rule = f"| rank | system | {self.name} | 95% CI | Borda |", "|---|---|---|---|---|"
        if tied is not None:
            head, rule = head + f" tied with best ({tied.label}) |", rule + "---|"
        lines = [head, rule]
        for rank, idx in enumerate(aggregation.order(self.per_user, method), 1):
            lo, hi = self.estimate(self.names[idx]).confidence_interval()
            line = (
                f"| {rank} | {self.names[idx]} | {self.means[idx]:.4g} | [{lo:.4g}, {hi:.4g}] "
                f"| {points[idx]:.2f} |"
            )
            if tied is not None:
                line += " = |" if self.names[idx] in tied.tied else "  |"
            lines.append(line)
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class PreferenceMatrix:
    """Per-user recall-paired preferences between every pair of M systems.

    Attributes
    ----------
    names : tuple of str
        System names, in the order of the matrix axes.
    per_user : numpy.ndarray, shape (n_users, M, M)
        ``per_user[u, s, t]`` = RPP(s, t) for user u; antisymmetric in (s, t).
    user_ids : numpy.ndarray
        Rows of ``y_true`` the users are.
    name : str
        ``"RPP"``, ``"dcgRPP"`` or ``"invRPP"``.
    n_excluded_users : int
        Users without relevant items.
    """

    names: tuple[str, ...]
    per_user: np.ndarray
    user_ids: np.ndarray
    name: str
    n_excluded_users: int

    def __post_init__(self) -> None:
        names = _system_names(self.names)
        per_user = real_array(self.per_user, "per_user").astype(np.float64, copy=False)
        m = len(names)
        if per_user.shape != (len(self.user_ids), m, m):
            raise ValueError(
                f"per_user has shape {per_user.shape}, expected (users, systems, systems) = "
                f"({len(self.user_ids)}, {m}, {m})"
            )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "per_user", per_user)

    @property
    def mean(self) -> np.ndarray:
        """Mean preference over users, ``mean[s, t]`` = RPP(s, t) (M × M)."""
        return self.per_user.mean(axis=0)

    def pair(self, a: str, b: str) -> EstimateResult:
        """RPP(a, b) with per-user values and a t interval."""
        s, t = self.index(a), self.index(b)
        return EstimateResult(
            name=f"{self.name}({a}, {b})",
            terms=self.per_user[:, s, t],
            exponents=(1,),
            user_ids=self.user_ids,
            n_excluded_users=self.n_excluded_users,
        )

    def index(self, name: str) -> int:
        """Axis index of a system, with a message naming the known systems."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"no system {name!r}; the matrix has {list(self.names)}") from None

    def win_rates(self) -> SystemScores:
        """Per-user win rates, Eq. 7 divided by M − 1 (mean preference over the others)."""
        m = len(self.names)
        return SystemScores(
            names=self.names,
            per_user=self.per_user.sum(axis=2) / (m - 1),
            user_ids=self.user_ids,
            name=f"{self.name} win rate",
            n_excluded_users=self.n_excluded_users,
        )

    def table(self) -> str:
        """Markdown table of the mean preference of row over column (the matrix's measure, e.g.
        ``dcgRPP(row, col)``) over users."""
        lines = [
            f"| {self.name}(row, col) | " + " | ".join(self.names) + " |",
            "|---|" + "---|" * len(self.names),
        ]
        for name, row in zip(self.names, self.mean, strict=False):
            lines.append(f"| {name} | " + " | ".join(f"{v:+.3f}" for v in row) + " |")
        return "\n".join(lines)
