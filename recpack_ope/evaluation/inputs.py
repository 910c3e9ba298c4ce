"""What the registry's held-out estimators need besides the data, checked once.

A framework adapter evaluates many estimators (one per registered metric and cutoff) with
one configuration: propensities, discount, clipping, strata, reward model and impressions.
:class:`EstimatorInputs` checks them when they are given, so a bad propensity is named before
any training, fits the propensity model on the training interactions, and computes any
held-out estimator of :data:`recpack_ope.registry.ESTIMATORS` from them.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .._validation import check_clip, check_impressions, check_positive_int, shown
from ..inference.diagnostics import ReliabilityWarning
from ..inference.result import EstimateResult
from ..metrics.cache import RankingCache
from ..metrics.dcg import _estimate, check_population
from ..metrics.ranking import TopK
from ..metrics.stratified import BINNINGS
from ..propensity.discount import Discount, LogDiscount
from ..registry import ESTIMATORS, Estimator, default
from ..reward.validation import check_reward_model

__all__ = ["EstimatorInputs", "framework_cutoff"]

# The DCG family shares the held-out data a cache prepared: plain estimator → normalise.
_FAMILY = {"dcg": None, "ndcg": "per_user", "pn_dcg": "post"}


def framework_cutoff(k, whole: int = -1, name: str = "k") -> int | None:
    """A framework's cutoff ``k`` as the core's: a positive integer, or ``whole`` (the
    framework's value for the whole ranking) as None.

    Examples
    --------
    >>> framework_cutoff(10), framework_cutoff(-1)
    (10, None)
    >>> framework_cutoff([5, 10])
    Traceback (most recent call last):
    ...
    ValueError: k must be one cutoff, got [5, 10]: make one metric per cutoff
    """
    if isinstance(k, (list, tuple, np.ndarray)):  # frameworks may rebuild those, losing inputs
        raise ValueError(f"{name} must be one cutoff, got {shown(k)}: make one metric per cutoff")
    integer = isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))
    if not integer or (k < 1 and k != whole):
        raise ValueError(
            f"{name} must be a positive integer or {whole} (whole ranking), got {shown(k)}"
        )
    return None if k == whole else int(k)


class EstimatorInputs:
    """Propensities, discount, clipping, strata, reward model and impressions of held-out
    estimators, checked at construction.

    Parameters
    ----------
    propensity : None, propensity model or 1-D array
        Logging exposure propensities in (0, 1]. An unfitted model (e.g.
        ``PowerLawPropensity()``) is fitted by :meth:`fit`; a vector is checked now.
    discount : Discount
        Curve shape; a cutoff K uses ``discount.with_cutoff(K)`` (default ``LogDiscount``).
    clip : float, "auto" or None
        Clipping of IPS weights, ``min(m, 1/p)``; default the held-out estimators' own
        (:func:`recpack_ope.registry.default`, their core functions' default
        :data:`~recpack_ope.propensity.weights.RECOMMENDED_CLIP`); None for the papers'
        unclipped estimator, ``"auto"`` to select m by SLOPE for every estimate.
    n_strata : int
        Strata of ``stratified_ndcg`` (the paper uses 2).
    binning : {"width", "mass"}
        Equal-width propensity bins (the paper's) or equal-mass quantiles.
    reward_model : object with ``predict(users, items)``, optional
        Click probabilities of examined items, for ``dr_dcg``; needs ``propensity``.
    impressions : scipy.sparse matrix, optional
        Where the logging policy showed items (users × items), the examination probability
        there, in [0, 1] (checked now); needs ``propensity``. Given,
        ``ips_dcg`` and ``dr_dcg`` average over the served users and carry the control
        variate of ``compare(..., control_variate=True)``.
    population : {"observed", "all"}
        The users every estimate averages over
        (:data:`~recpack_ope.metrics.dcg.POPULATIONS`): ``"observed"``, those with a held-out
        reward (with impressions, the served users); ``"all"``, every row of ``y_true``, those
        without held-out rewards counting 0, so that ``ips_dcg`` estimates the online reward
        per user. Estimators normalised per user (nDCG, recall) refuse ``"all"``. The rows of
        ``y_true`` must then be the users the held-out period logged: a framework whose
        held-out matrix has a row for every user of the data set (RecPack's) counts users
        outside the test split as users without rewards.

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.evaluation.inputs import EstimatorInputs
    >>> from recpack_ope.registry import estimator
    >>> inputs = EstimatorInputs(propensity=[0.5, 1.0, 0.25], clip=None)
    >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
    >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
    >>> inputs.evaluate(estimator("ips_dcg"), y_true, scores, 2).value
    1.5
    >>> EstimatorInputs().missing(estimator("ips_dcg"))
    ['propensity']
    """

    #: How the adapter's ``fit`` is called, and the argument the model's ``fit`` gets: messages.
    fit_example, fit_argument = "adapter.fit(scenario.full_training_data)", "X"

    def __init__(
        self,
        propensity=None,
        discount: Discount | None = None,
        clip: float | str | None = default("clip"),
        n_strata: int = default("n_strata"),
        binning: str = default("binning"),
        reward_model=None,
        impressions=None,
        population: str = default("population"),
    ):
        self.population = check_population(population)
        self.discount = LogDiscount() if discount is None else discount
        if not isinstance(self.discount, Discount):
            raise TypeError(f"discount must be a Discount model, got {type(discount).__name__}")
        if propensity is not None and not hasattr(propensity, "fit"):
            # imported on use: start-up time (docs/performance.md)
            from ..propensity.models import FixedPropensity

            propensity = FixedPropensity(propensity).fit()
        self.propensity = propensity
        check_clip(clip, allow_auto=True)
        self.clip, self.n_strata = clip, check_positive_int(n_strata, "n_strata")
        if not isinstance(binning, str) or binning not in BINNINGS:
            raise ValueError(f"binning must be one of {BINNINGS}, got {shown(binning)}")
        self.binning = binning
        for name, given, users in (
            ("reward_model", reward_model, "DRDCGK (dr_dcg)"),
            ("impressions", impressions, "IPSDCGK and DRDCGK (ips_dcg, dr_dcg)"),
        ):
            if given is not None and propensity is None:
                raise ValueError(
                    f"{name} is used only by {users}, which need propensities, and there are "
                    "none: give propensity= too, or drop it"
                )
        if reward_model is not None:
            check_reward_model(reward_model)  # the data's shape is checked at evaluation
        if impressions is not None:
            check_impressions(impressions)
        self.reward_model, self.impressions = reward_model, impressions
        self._check_items()

    def check_options(self, options: dict) -> None:
        """Refuse keyword ``options`` that neither this class (an adapter) nor
        :class:`EstimatorInputs` takes: a TypeError naming the class the user called, the
        option, the closest valid one (a typo such as ``clipp``) and every valid one. An
        adapter that passes ``**options`` on to :class:`EstimatorInputs` calls it first.

        Examples
        --------
        >>> class Adapter(EstimatorInputs):
        ...     def __init__(self, propensity=None, **options):
        ...         self.check_options(options)
        ...         super().__init__(propensity, **options)
        >>> Adapter(clipp=3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: Adapter got an unknown option 'clipp' (did you mean 'clip'?); its options are ...
        """
        valid = {
            name
            for cls in (type(self), EstimatorInputs)
            for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if name != "self"
            and parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
        }
        for option in options:
            if option not in valid:
                import difflib  # on the error path only: start-up stays lean

                close = difflib.get_close_matches(option, sorted(valid), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise TypeError(
                    f"{type(self).__name__} got an unknown option {option!r}{hint}; its options "
                    f"are {', '.join(sorted(valid))}"
                )

    def _check_items(self, X=None) -> None:
        """The training data ``X``, propensities, impressions and reward model (those known)
        must index the same items."""
        given = {
            "X": X,
            "propensity": getattr(self.propensity, "propensity_", None),
            "impressions": self.impressions,
            # A reward model need not know its shape.
            "reward_model": getattr(self.reward_model, "shape", None),
        }
        sizes = [
            (name, int(shape[-1]))
            for name, value in given.items()
            if value is not None
            and len(shape := value if name == "reward_model" else np.shape(value)) in (1, 2)
        ]
        for name, n in sizes[1:]:
            if n != sizes[0][1]:
                raise ValueError(
                    f"{name} covers {n} items but {sizes[0][0]} covers {sizes[0][1]}; both must "
                    "be indexed by the same item indices"
                )

    def fit(self, X) -> EstimatorInputs:
        """Fit the propensity model on training interactions (users × items); a no-op without
        a propensity model."""
        if self.propensity is not None:
            fitted, model = self.propensity.fit(X), type(self.propensity).__name__
            if not hasattr(self.propensity, "propensity_"):
                raise TypeError(
                    f"{model}.fit({self.fit_argument}) set no propensity_: a propensity "
                    "model's fit must store one propensity per item as propensity_"
                )
            if fitted is not self.propensity:
                raise TypeError(
                    f"{model}.fit({self.fit_argument}) returned {type(fitted).__name__}, not a "
                    "fitted propensity model (set propensity_ and return self)"
                )
            if len(np.shape(X)) == 2:
                self._check_items(X)
        return self

    @property
    def fitted(self) -> bool:
        """Whether the propensities are ready (always, without a propensity model)."""
        return self.propensity is None or hasattr(self.propensity, "propensity_")

    def require_fitted(self, before: str) -> None:
        """Refuse to go on with a propensity model that :meth:`fit` has not fitted."""
        if not self.fitted:
            raise ValueError(
                f"{type(self.propensity).__name__} is not fitted: call fit on the training "
                f"interactions (e.g. {self.fit_example}) before {before}"
            )

    def require_vector(self, n_items: int | None = None, owner: str = "the data", why: str = ""):
        """Refuse propensities that are not one value per item (a 1-D vector; ``why`` says
        why, for messages) or, with ``n_items``, not one per item of ``owner``."""
        values = getattr(self.propensity, "propensity_", None)
        shape = np.shape(() if values is None else values)
        if sp.issparse(values) or len(shape) != 1:
            raise ValueError(
                f"propensity must be one value per item (a 1-D vector), got shape {shape}{why}"
            )
        if n_items is not None and shape[0] != n_items:
            raise ValueError(
                f"propensity has {shape[0]} values but {owner} has {n_items} items: give one "
                "per item index"
            )

    def check_weighting(self, estimator: Estimator, name: Callable[[Estimator], str]) -> None:
        """Refuse a weighted ``estimator`` without propensities and an unweighted one with
        them, naming (as ``name`` spells it) the plain or the IPS-weighted counterpart.

        Examples
        --------
        >>> from recpack_ope.registry import estimator
        >>> EstimatorInputs([0.5]).check_weighting(estimator("ndcg"), lambda e: e.camel)
        Traceback (most recent call last):
        ...
        ValueError: PlainNDCG is unweighted and takes no propensity; use IPSNDCG
        """
        if estimator.weighted and self.propensity is None:
            raise ValueError(
                f"{name(estimator)} needs propensity=; use {name(ESTIMATORS[estimator.plain])} "
                "for the unweighted estimator"
            )
        if not estimator.weighted and self.propensity is not None:
            weighted = next(
                e
                for e in ESTIMATORS.values()
                if e.plain == estimator.name and e.weighting == "ips" and e.data == "held_out"
            )
            raise ValueError(
                f"{name(estimator)} is unweighted and takes no propensity; use {name(weighted)}"
            )

    def check_metric(
        self, estimator: Estimator, K: int | None, name: Callable[[Estimator], str], before: str
    ) -> None:
        """Refuse to make a metric of ``estimator`` at cutoff ``K`` (None: the whole ranking)
        with these inputs: recall without a cutoff (always 1), the weighting
        (:meth:`check_weighting`, names spelled by ``name``) and an unfitted propensity model
        (:meth:`require_fitted`, ``before`` saying what waits for it).

        Examples
        --------
        >>> from recpack_ope.registry import estimator
        >>> EstimatorInputs().check_metric(estimator("recall"), None, lambda e: e.camel, "")
        Traceback (most recent call last):
        ...
        ValueError: PlainRecall needs a positive integer cutoff: recall of the whole ranking is 1
        """
        if K is None and "recall" in estimator.name:
            raise ValueError(
                f"{name(estimator)} needs a positive integer cutoff: recall of the whole ranking "
                "is 1"
            )
        self.check_weighting(estimator, name)
        self.require_fitted(before)

    def missing(self, estimator: Estimator) -> list[str]:
        """What ``estimator`` needs and these inputs lack (``"propensity"``,
        ``"reward_model"``)."""
        return estimator.missing(propensity=self.propensity, reward_model=self.reward_model)

    def at(self, K: int | None) -> Discount:
        """The discount at cutoff ``K``; None keeps the configured one (the whole ranking)."""
        return self.discount if K is None else self.discount.with_cutoff(K)

    def one_user(
        self, estimator: Estimator, relevant, ranked, K: int | None, framework: str, instead: str
    ) -> float:
        """One user's value of ``estimator`` at cutoff ``K`` (None: the whole ranking), for a
        ``framework`` whose loop averages per-user values itself: ``relevant`` are the user's
        held-out item indices, ``ranked`` the ranked ones (both >= 0); ``instead`` says
        how to evaluate on all users at once, for messages. Weights are not diagnosed: one
        user's weights say nothing of the average's reliability. Only over the observed
        users: the framework's loop visits the users with held-out items.

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.registry import estimator
        >>> inputs = EstimatorInputs(propensity=[0.5, 1.0, 0.25], clip=None)
        >>> ips_dcg = estimator("ips_dcg")  # item 2 (weight 4) ranked 2nd: 4 / log2(3)
        >>> round(inputs.one_user(ips_dcg, np.array([2]), np.array([0, 2, 1]), 2, "Cornac", ""), 6)
        2.523719
        """
        if not estimator.per_user_mean:
            raise ValueError(
                f"{estimator.display(self.at(K))} is not a mean of per-user "
                f"values, which {framework}'s per-user averaging cannot produce; {instead}"
            )
        if self.population != "observed":
            raise ValueError(
                f"{estimator.display(self.at(K))} has population={self.population!r}, which "
                f"averages over every user, and {framework}'s ranking loop averages over the "
                f"users with held-out items; give population 'observed', or {instead}"
            )
        if self.propensity is not None and isinstance(self.clip, str):
            raise ValueError(
                f"{estimator.display(self.at(K))} has clip={self.clip!r}, chosen "
                f"from all users at once; {framework}'s ranking loop computes one user at a time: "
                f"give a number or None, or {instead}"
            )
        relevant, ranked = np.asarray(relevant, np.int64), np.asarray(ranked, np.int64)[:K]
        seen = np.concatenate([relevant, ranked, [-1]]).max() + 1
        n_items = seen if self.propensity is None else np.shape(self.propensity.propensity_)[-1]
        if seen > n_items:
            raise ValueError(
                f"item index {seen - 1} has no propensity: the propensities cover {n_items} "
                "items (fit them on the data evaluated)"
            )
        one = np.zeros_like(relevant)
        y = sp.csr_matrix((np.ones(relevant.size), (one, relevant)), shape=(1, n_items))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReliabilityWarning)
            return self.evaluate(estimator, y, TopK(ranked[None, :]), K).value

    def evaluate(
        self, estimator: Estimator, y_true, y_score, K: int, cache: RankingCache | None = None
    ) -> EstimateResult:
        """A held-out estimator at cutoff ``K`` with these inputs.

        With a ``cache``, sparse scores are ranked by it, and the DCG family's estimators
        evaluated one after another on the same ranking share the held-out data it prepares
        (over the observed users; over all users each prepares its own).
        """
        estimator.check(propensity=self.propensity, reward_model=self.reward_model)
        self.require_fitted("evaluating")
        discount = self.at(K)
        ranking = y_score if cache is None else cache.ranking(y_score, K)
        family = estimator.plain or estimator.name
        weighted = estimator.weighting in ("ips", "self_normalised")
        # The cache prepares the held-out data over the observed users only.
        shared = (
            cache is not None
            and family in _FAMILY
            and (weighted or not estimator.needs)
            and self.population == "observed"
        )
        if not shared or (self.impressions is not None and estimator.name == "ips_dcg"):
            return estimator(
                y_true,
                ranking,
                discount=discount,
                propensity=self.propensity,
                clip=self.clip,
                reward_model=self.reward_model,
                impressions=self.impressions,
                n_strata=self.n_strata,
                binning=self.binning,
                population=self.population,
            )
        propensity, clip = (self.propensity, self.clip) if weighted else (None, None)
        return _estimate(
            y_true,
            ranking,
            discount=discount,
            propensity=propensity,
            clip=clip,
            normalise=_FAMILY[family],
            self_normalised=estimator.weighting == "self_normalised",
            held_out=cache.held_out(y_true, ranking, discount=discount, propensity=propensity),
        )
