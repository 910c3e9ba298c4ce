"""The one table of estimators that every path reads.

Each entry names one estimator, the same everywhere: the core function that computes it, the
name its results carry, what it needs, its per-user terms and how they combine. The file CLI
(``recpack-ope evaluate --metrics``), the Spark engine (``recpack_ope.spark.evaluate``), the
RecPack metric names (``camel + "K"``), the Cornac metric classes (``camel``) and the docs'
table of estimators are all generated from it; ``tests/test_registry.py`` fails when any of
them names an estimator this table lacks or spells one differently.

A name means one estimator: weighted estimators (``ips_…``, ``snips_…``, ``dr_…``,
``stratified_…``) refuse to run without what they need and name their unweighted
counterpart, and an unweighted name never becomes weighted because propensities were given.

Estimates are ``Π_k mean(term_k) ** exponent_k`` over the users (or sessions) they average
over; estimators with a single term of exponent 1 are means of per-user values (the only kind
a per-user loop such as Cornac's can average). Which users a held-out estimate averages over
(``population``, :data:`~recpack_ope.metrics.dcg.POPULATIONS`) decides what it estimates:
every entry states its estimand per population (:func:`estimand_table`).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .inference.result import EstimateResult
from .logged.adaptive_ips import adaptive_ips
from .logged.cascade_dr import cascade_dr
from .logged.doubly_robust import logged_dr_dcg
from .logged.logged_dcg import logged_dcg
from .logged.pseudo_inverse import pseudo_inverse
from .logged.ranking_ips import cascade_ips, independent_ips, standard_ips
from .metrics.dcg import (
    POPULATIONS,
    check_population,
    dcg,
    ips_dcg,
    ips_ndcg,
    ips_pn_dcg,
    ndcg,
    pn_dcg,
    snips_dcg,
)
from .metrics.doubly_robust import dr_dcg
from .metrics.recall import ips_recall, recall
from .metrics.stratified import stratified
from .propensity.discount import Discount

__all__ = [
    "DEFAULT",
    "ESTIMATORS",
    "OPTIONS",
    "Estimator",
    "default",
    "estimand_table",
    "estimator",
    "feed_log_table",
    "markdown_table",
    "names",
]

#: What an estimator may need besides the data: exposure propensities (IPS weights or the
#: strata they define), a reward model (the direct method of doubly robust estimates) and the
#: logging policy itself (the pseudo-inverse's moments of every ranking it could show).
NEEDS = ("propensity", "reward_model", "logging")
WEIGHTINGS = ("none", "ips", "self_normalised", "doubly_robust", "stratified", "pseudo_inverse")
DATA = ("held_out", "feed_log")
#: The options whose defaults :attr:`Estimator.defaults` reads from the core function's
#: signature, the one place each is written.
OPTIONS = ("clip", "population", "ess_threshold", "n_strata", "binning")
#: The value of an option that asks for each estimator's own default
#: (:attr:`Estimator.defaults`), for paths that compute several estimators.
DEFAULT = "default"


@dataclass(frozen=True)
class Estimator:
    """One estimator of the registry.

    Attributes
    ----------
    name : str
        Canonical name, as the core function and ``--metrics`` spell it (``"ips_pn_dcg"``).
    label : str
        The name its results carry before the cutoff (``"IPS-pnDCG"`` → ``IPS-pnDCG@10``):
        it says whether the estimate is IPS-weighted, self-normalised, doubly robust or
        stratified.
    camel : str or None
        The framework spelling: RecPack registers ``camel + "K"``, Cornac's class is
        ``camel``; None for estimators no framework adapter offers.
    data : {"held_out", "feed_log"}
        Held-out rewards against a model's scores, or logged feeds against a target policy.
    weighting : str
        ``"none"``, ``"ips"``, ``"self_normalised"``, ``"doubly_robust"``, ``"stratified"`` or
        ``"pseudo_inverse"``.
    needs : tuple of str
        Inputs it cannot run without: ``"propensity"``, ``"reward_model"``, ``"logging"`` (the
        logging policy).
    plain : str or None
        The unweighted estimator to use without what it needs.
    terms : tuple of str
        Names of its per-user (per-session) terms.
    exponents : tuple of int
        The estimate is ``Π_k mean(terms[k]) ** exponents[k]``.
    function : callable
        The core function that computes it.
    options : mapping
        Fixed keyword arguments of ``function`` that make this estimator.
    reference : str
        Paper and equation.
    estimands : mapping
        What a held-out estimate estimates, by the users it averages over: ``"all"`` and
        ``"observed"`` (:data:`~recpack_ope.metrics.dcg.POPULATIONS`; an estimator without an
        ``"all"`` entry refuses that population) and ``"served"`` (``"observed"`` with
        impressions, for the estimators that take them). Notation of docs/estimators.md.
    assumptions : str
        Under which assumptions the estimands hold; for a feed-log estimator, the click model
        under which it is unbiased.
    log_columns : tuple of tuples of str
        Feed-log estimators: the log's columns of logging probabilities it reads without a
        logging policy, one column of every group (the first of a group is read when several
        are there).
    """

    name: str
    label: str
    camel: str | None
    data: str
    weighting: str
    needs: tuple[str, ...]
    plain: str | None
    terms: tuple[str, ...]
    exponents: tuple[int, ...]
    function: Callable[..., EstimateResult]
    reference: str
    options: Mapping = field(default_factory=dict)
    estimands: Mapping = field(default_factory=dict)
    assumptions: str = ""
    log_columns: tuple[tuple[str, ...], ...] = ()

    @property
    def defaults(self) -> Mapping[str, object]:
        """Option of :data:`OPTIONS` → its default, read from the signature of
        :attr:`function` (the options it does not take are absent): the one place a default
        is written, which every other path (:meth:`__call__`, the adapters, the file CLI,
        Spark) reads. A function that passes the rest of its keywords to a base metric
        (``stratified``) has that metric's defaults of the options it does not take itself.

        Examples
        --------
        >>> from recpack_ope.registry import estimator
        >>> dict(estimator("ips_dcg").defaults)
        {'clip': 100.0, 'population': 'observed', 'ess_threshold': 0.1}
        >>> dict(estimator("logged_dcg").defaults)
        {'clip': None, 'ess_threshold': 0.1}
        """
        functions = (self.function, self.options.get("metric"))
        found: dict[str, object] = {}
        for function in filter(None, functions):
            for option, parameter in inspect.signature(function).parameters.items():
                if option in OPTIONS and parameter.default is not inspect.Parameter.empty:
                    found.setdefault(option, parameter.default)
        return MappingProxyType({option: found[option] for option in OPTIONS if option in found})

    def option(self, name: str, given=DEFAULT):
        """``given``, or this estimator's default of option ``name`` when ``given`` is
        :data:`DEFAULT` (None for an option its function does not take).

        Examples
        --------
        >>> from recpack_ope.registry import estimator
        >>> estimator("ips_dcg").option("clip"), estimator("ips_dcg").option("clip", None)
        (100.0, None)
        """
        if isinstance(given, str) and given == DEFAULT:
            return self.defaults.get(name)
        return given

    @property
    def per_user_mean(self) -> bool:
        """Whether the estimate is a mean of per-user values (one term, exponent 1)."""
        return self.exponents == (1,)

    @property
    def weighted(self) -> bool:
        """Whether the estimate re-weights by inverse propensities."""
        return self.weighting in ("ips", "self_normalised", "doubly_robust")

    @property
    def cornac_class(self) -> str | None:
        """The Cornac metric class of this estimator, if Cornac has one: doubly robust and
        stratified estimates are rows of the adapter's ``PropensityStratifiedEvaluation``
        instead, since they need a reward model or strata that a metric object cannot hold."""
        if self.camel is None or self.weighting in ("doubly_robust", "stratified"):
            return None
        return self.camel

    @property
    def populations(self) -> tuple[str, ...]:
        """The populations (:data:`~recpack_ope.metrics.dcg.POPULATIONS`) this estimator can
        average over; none for feed-log estimators, which average over sessions."""
        return tuple(p for p in POPULATIONS if p in self.estimands)

    def check_population(self, population: str) -> str:
        """``population`` if it is one of :data:`~recpack_ope.metrics.dcg.POPULATIONS` and
        this estimator has a value over it, else the core's ValueError
        (:func:`~recpack_ope.metrics.dcg.check_population`)."""
        return check_population(population, None if "all" in self.populations else self.name)

    def display(self, discount: Discount) -> str:
        """The name a result of this estimator carries, e.g. ``IPS-pnDCG@10``."""
        if self.function in (recall, ips_recall):
            return f"{self.label}@{discount.cutoff}"
        return f"{self.label}{discount.label}"

    def missing(self, **given) -> list[str]:
        """The inputs of :attr:`needs` that ``given`` lacks (None or absent)."""
        return [need for need in self.needs if given.get(need) is None]

    def check(self, **given) -> None:
        """Refuse to run without what the estimator needs, naming the plain estimator."""
        missing = self.missing(**given)
        if missing:
            instead = f"; use {self.plain!r} for the unweighted estimator" if self.plain else ""
            raise ValueError(f"{self.name} needs {' and '.join(missing)}={instead}")

    def check_log_columns(self, present, table: str) -> None:
        """Refuse a feed log whose columns ``present`` hold no column of a group of
        :attr:`log_columns`, naming the table (``table``), the columns this estimator reads
        and those it has.

        Examples
        --------
        >>> from recpack_ope.registry import estimator
        >>> estimator("cascade_ips").check_log_columns(["session", "propensity"], "feed_log")
        Traceback (most recent call last):
        ...
        ValueError: feed_log has no column 'prefix_propensity' or 'logging_weight', which \
cascade_ips reads; its columns are ['session', 'propensity']
        """
        for group in self.log_columns:
            if not set(group) & set(present):
                raise ValueError(
                    f"{table} has no column {' or '.join(map(repr, group))}, which "
                    f"{self.name} reads; its columns are {list(present)}"
                )

    def __call__(
        self,
        y_true,
        y_score,
        *,
        discount: Discount,
        propensity=None,
        clip: float | str | None = DEFAULT,
        reward_model=None,
        impressions=None,
        n_strata: int | str = DEFAULT,
        binning: str = DEFAULT,
        ess_threshold: float | str = DEFAULT,
        chunk_users: int | None = None,
        population: str = DEFAULT,
    ) -> EstimateResult:
        """Compute a held-out estimator from everything a caller may have; it takes what it
        needs and ignores the rest (a plain estimator ignores ``propensity`` and ``clip``).
        An option left at :data:`DEFAULT` takes the estimator's default (:attr:`defaults`).

        The cutoff of recall is the discount's. ``impressions`` go to the estimators that
        define their served users by them (``ips_dcg``, ``dr_dcg``). ``population`` is the
        users averaged over (:data:`~recpack_ope.metrics.dcg.POPULATIONS`); an estimator
        without an estimand over it (:attr:`populations`) refuses it.

        Examples
        --------
        >>> import numpy as np
        >>> from recpack_ope.registry import estimator
        >>> from recpack_ope.propensity import LogDiscount
        >>> y_true = np.array([[1, 0, 1], [0, 1, 0]])
        >>> scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.3]])
        >>> p = np.array([0.5, 1.0, 0.25])
        >>> ips_dcg = estimator("ips_dcg")
        >>> result = ips_dcg(y_true, scores, discount=LogDiscount(2), propensity=p, clip=None)
        >>> result.name, result.value
        ('IPS-DCG@2', 1.5)
        """
        if self.data != "held_out":
            raise ValueError(f"{self.name} evaluates feed logs: call {self.function.__name__}")
        population = self.check_population(self.option("population", population))
        self.check(propensity=propensity, reward_model=reward_model)
        options = dict(self.options)
        if self.function in (recall, ips_recall):
            options["k"] = discount.cutoff
        else:
            options["discount"] = discount
        if self.weighted:
            options.update(
                propensity=propensity,
                clip=self.option("clip", clip),
                ess_threshold=self.option("ess_threshold", ess_threshold),
            )
        if self.weighting == "doubly_robust":
            options["reward_model"] = reward_model
        if impressions is not None and self.function in (ips_dcg, dr_dcg):
            options["impressions"] = impressions
        if self.weighting == "stratified":
            return stratified(
                self.options["metric"],
                y_true,
                y_score,
                stratify_by=propensity,
                n_strata=self.option("n_strata", n_strata),
                binning=self.option("binning", binning),
                discount=discount,
                chunk_users=chunk_users,
            )
        return self.function(
            y_true, y_score, chunk_users=chunk_users, population=population, **options
        )


_DCG = "Jeunen et al. KDD'24 Eq. 11"
_IPS = "Jeunen et al. KDD'24 Eq. 10–11"
_SECTION5 = "§5"
_ONE, _POST, _SN = (1,), (1, -1), (1, 1, -1)
_P = ("propensity",)
# Estimands (notation of docs/estimators.md: V online reward per user, π share of users with a
# held-out reward, D the exposure-scaled reward of plain DCG, κ SNIPS's constant).
_IPS_ASSUMED = "Asm. 1–5 of Jeunen et al., p the logging exposure, no clipping (clipped: less)"
_PER_USER = "no online-reward reading"
_REWARDED = "over the users with a held-out reward"
# Feed-log estimands (notation of ranking_ips: V(π) the expected α-weighted reward per session).
_SESSIONS = (
    r"$V(\pi) = \mathbb{E}_x \mathbb{E}_{a \sim \pi}[\sum_k \alpha_k r_k]$ per session, "
    "unbiased unclipped"
)
_EXPOSURE = (("propensity",),)
_POSITION = ("position_propensity",)
_PREFIX = ("prefix_propensity", "logging_weight")
_KIYOHARA = "Kiyohara et al. WSDM'22"
_SAME = "the same value as over all users"


def _entries() -> dict[str, Estimator]:
    e = Estimator
    rows = [
        e(
            "dcg",
            "DCG",
            "PlainDCG",
            "held_out",
            "none",
            (),
            None,
            ("dcg",),
            _ONE,
            dcg,
            _DCG,
            estimands={"all": "$D$", "observed": r"$D / \pi$"},
            assumptions="Asm. 4; $D$ is proportional to $V$ only when every item is exposed alike",
        ),
        e(
            "ndcg",
            "nDCG",
            "PlainNDCG",
            "held_out",
            "none",
            (),
            None,
            ("ndcg",),
            _ONE,
            ndcg,
            "Jeunen et al. KDD'24 §5 (per-user normalisation)",
            estimands={"observed": f"mean nDCG {_REWARDED}; {_PER_USER} (Lemma 5.2)"},
            assumptions="—",
        ),
        e(
            "pn_dcg",
            "pnDCG",
            "PostNormalisedDCG",
            "held_out",
            "none",
            (),
            None,
            ("dcg", "idcg"),
            _POST,
            pn_dcg,
            "Jeunen et al. KDD'24 §5, Lemma 5.1",
            estimands={"all": r"$D / \mathbb{E}[\mathrm{iDCG}_u]$", "observed": _SAME},
            assumptions="as `dcg`",
        ),
        e(
            "recall",
            "Recall",
            "PlainRecall",
            "held_out",
            "none",
            (),
            None,
            ("recall",),
            _ONE,
            recall,
            "recall@k",
            estimands={"observed": f"mean recall {_REWARDED}; {_PER_USER}"},
            assumptions="—",
        ),
        e(
            "ips_dcg",
            "IPS-DCG",
            "IPSDCG",
            "held_out",
            "ips",
            _P,
            "dcg",
            ("dcg",),
            _ONE,
            ips_dcg,
            _IPS,
            estimands={
                "all": "$V$, unbiased",
                "observed": r"$V / \pi$ (a ratio: consistent)",
                "served": "$V$ over the served users, unbiased",
            },
            assumptions=_IPS_ASSUMED,
        ),
        e(
            "snips_dcg",
            "SNIPS-DCG",
            "SNIPSDCG",
            "held_out",
            "self_normalised",
            _P,
            "dcg",
            ("dcg", "n_held_out", "weight_sum"),
            _SN,
            snips_dcg,
            f"{_IPS}, self-normalised",
            estimands={"all": r"$V \kappa$ (consistent)", "observed": r"$V \kappa / \pi$"},
            assumptions=_IPS_ASSUMED,
        ),
        e(
            "ips_ndcg",
            "IPS-nDCG",
            "IPSNDCG",
            "held_out",
            "ips",
            _P,
            "ndcg",
            ("ndcg",),
            _ONE,
            ips_ndcg,
            f"{_IPS}, {_SECTION5}",
            estimands={
                "observed": f"mean per-user ratio of IPS estimates {_REWARDED}; {_PER_USER} "
                "(Lemma 5.2)"
            },
            assumptions=_IPS_ASSUMED,
        ),
        e(
            "ips_pn_dcg",
            "IPS-pnDCG",
            "IPSPostNormalisedDCG",
            "held_out",
            "ips",
            _P,
            "pn_dcg",
            ("dcg", "idcg"),
            _POST,
            ips_pn_dcg,
            f"{_IPS}, {_SECTION5}",
            estimands={
                "all": r"$V / \mathbb{E}[\mathrm{iDCG}_u]$, IPS gains (consistent, ordered as $V$)",
                "observed": _SAME,
            },
            assumptions=_IPS_ASSUMED,
        ),
        e(
            "ips_recall",
            "IPS-Recall",
            "IPSRecall",
            "held_out",
            "ips",
            _P,
            "recall",
            ("recall",),
            _ONE,
            ips_recall,
            "recall@k with IPS gains",
            estimands={
                "observed": f"mean per-user ratio of IPS estimates {_REWARDED}; {_PER_USER}"
            },
            assumptions=_IPS_ASSUMED,
        ),
        e(
            "dr_dcg",
            "DR-DCG",
            "DRDCG",
            "held_out",
            "doubly_robust",
            (*_P, "reward_model"),
            "dcg",
            ("dcg",),
            _ONE,
            dr_dcg,
            "direct method + IPS-weighted residual (Dudík et al. 2011)",
            estimands={
                "all": "$V$, unbiased",
                "observed": r"$V / \pi$ unclipped (then equal to IPS)",
                "served": "$V$ over the served users, unbiased",
            },
            assumptions="Asm. 1–5, no clipping, and p the logging exposure **or** ρ̂ the true "
            "click probability of an examined item (without impressions: p)",
        ),
        e(
            "stratified_ndcg",
            "Stratified nDCG",
            "StratifiedNDCG",
            "held_out",
            "stratified",
            _P,
            "ndcg",
            ("stratified_ndcg",),
            _ONE,
            stratified,
            "Jadidinejad et al. TOIS'21 Eq. 4",
            MappingProxyType({"metric": ndcg}),
            estimands={
                "observed": r"$\sum_s P(s) \, \mathrm{nDCG}_s$, each stratum's nDCG "
                f"{_REWARDED} in it; "
                f"{_PER_USER}"
            },
            assumptions="—",
        ),
        e(
            "logged_dcg",
            "logged DCG",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("dcg",),
            _ONE,
            logged_dcg,
            "Jeunen et al. KDD'24 Eq. 10 on logged feeds",
            estimands={"sessions": r"$V(\pi)$ with $\alpha = \delta$, unbiased unclipped"},
            assumptions="position-based model with examination curve δ (Jeunen et al. Asm. "
            "1–5), ε0 the logging exposure",
            log_columns=_EXPOSURE,
        ),
        e(
            "logged_ndcg",
            "logged nDCG",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("ndcg",),
            _ONE,
            logged_dcg,
            f"Jeunen et al. KDD'24 Eq. 10, {_SECTION5}",
            MappingProxyType({"normalise": "per_user"}),
            estimands={
                "sessions": "mean per-session nDCG over rewarded sessions; no online-reward reading"
            },
            assumptions="as `logged_dcg`",
            log_columns=_EXPOSURE,
        ),
        e(
            "logged_pn_dcg",
            "logged pnDCG",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("dcg", "idcg"),
            _POST,
            logged_dcg,
            f"Jeunen et al. KDD'24 Eq. 10, {_SECTION5}",
            MappingProxyType({"normalise": "post"}),
            estimands={
                "sessions": r"$V(\pi) / \mathbb{E}[\mathrm{iDCG}]$ with $\alpha = \delta$ "
                "(consistent, ordered as $V$)"
            },
            assumptions="as `logged_dcg`",
            log_columns=_EXPOSURE,
        ),
        e(
            "logged_dr_dcg",
            "logged DR-DCG",
            None,
            "feed_log",
            "doubly_robust",
            ("reward_model",),
            "logged_dcg",
            ("dcg",),
            _ONE,
            logged_dr_dcg,
            "direct method + weighted residual on logged feeds",
            estimands={"sessions": r"$V(\pi)$ with $\alpha = \delta$, unbiased unclipped"},
            assumptions="as `logged_dcg`, with ε0 the logging exposure **or** the reward "
            "model right",
            log_columns=_EXPOSURE,
        ),
        e(
            "standard_ips",
            "standard IPS",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("reward",),
            _ONE,
            standard_ips,
            f"{_KIYOHARA} Eq. 3 (whole-ranking weights)",
            estimands={"sessions": _SESSIONS},
            assumptions="any click model, if π0 shows every ranking π shows",
            log_columns=(_PREFIX,),
        ),
        e(
            "cascade_ips",
            "cascade IPS",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("reward",),
            _ONE,
            cascade_ips,
            f"McInerney et al. KDD'20 Eq. 7; {_KIYOHARA} Eq. 5 (prefix weights)",
            estimands={"sessions": _SESSIONS},
            assumptions="cascade: the reward at rank k depends only on the items at ranks 1..k",
            log_columns=(_PREFIX,),
        ),
        e(
            "independent_ips",
            "independent IPS",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("reward",),
            _ONE,
            independent_ips,
            f"Li et al. WSDM'18 §4.2; {_KIYOHARA} Eq. 4 (item-at-rank weights)",
            estimands={"sessions": _SESSIONS},
            assumptions="position-based: the reward at rank k depends only on the item at k and "
            "on k",
            log_columns=(_POSITION,),
        ),
        e(
            "cascade_dr",
            "cascade DR",
            None,
            "feed_log",
            "doubly_robust",
            ("reward_model",),
            "cascade_ips",
            ("reward",),
            _ONE,
            cascade_dr,
            f"{_KIYOHARA} §3.1 (Cascade-DR: cascade IPS + reward model at every rank)",
            estimands={"sessions": _SESSIONS},
            assumptions="cascade (as `cascade_ips`) with π0 right, whatever the reward model",
            log_columns=(_PREFIX,),
        ),
        e(
            "pseudo_inverse",
            "pseudo-inverse",
            None,
            "feed_log",
            "pseudo_inverse",
            ("logging",),
            "independent_ips",
            ("reward",),
            _ONE,
            pseudo_inverse,
            "Swaminathan et al. NeurIPS'17 §3 (pseudo-inverse)",
            estimands={"sessions": r"$V(\pi)$ per session, unbiased"},
            assumptions="additive rewards: a ranking's expected reward sums over its (item, "
            "rank) pairs (position-based model); π shows only what π0 can",
        ),
        e(
            "adaptive_ips",
            "adaptive IPS",
            None,
            "feed_log",
            "ips",
            (),
            None,
            ("reward",),
            _ONE,
            adaptive_ips,
            "Kiyohara et al. KDD'23 §3–4 (AIPS, behaviour chosen by estimated MSE)",
            estimands={
                "sessions": r"$V(\pi)$ per session, unbiased unclipped for a fixed behaviour that "
                'holds; `behavior="auto"` may trade bias for variance'
            },
            assumptions="the reward at rank k depends only on the items at the ranks its "
            "session's behaviour names: k (independent), 1..k (cascade) or all (standard)",
            log_columns=(_POSITION, _PREFIX),
        ),
    ]
    return {row.name: row for row in rows}


#: Canonical name → :class:`Estimator`, in the order tables list them.
ESTIMATORS: Mapping[str, Estimator] = MappingProxyType(_entries())


def default(option: str, data: str = "held_out"):
    """The default of ``option`` (:data:`OPTIONS`) that every estimator of ``data`` taking it
    shares (:attr:`Estimator.defaults`): the default of a path that computes any of them with
    one setting (the adapters' inputs, Spark). A ValueError when they differ, or none takes it.

    Examples
    --------
    >>> from recpack_ope.registry import default
    >>> default("clip"), default("clip", "feed_log"), default("population")
    (100.0, None, 'observed')
    """
    if option not in OPTIONS:
        raise ValueError(f"option must be one of {OPTIONS}, got {option!r}")
    if data not in DATA:
        raise ValueError(f"data must be one of {DATA}, got {data!r}")
    values = [
        e.defaults[option] for e in ESTIMATORS.values() if e.data == data and option in e.defaults
    ]
    values = [v for i, v in enumerate(values) if v not in values[:i]]
    if len(values) != 1:
        raise ValueError(f"the {data} estimators have {len(values)} defaults of {option}: {values}")
    return values[0]


def names(data: str | None = None) -> tuple[str, ...]:
    """Canonical names of the estimators of one kind of data (``"held_out"`` or
    ``"feed_log"``), or of all.

    Examples
    --------
    >>> from recpack_ope.registry import names
    >>> names("feed_log")[:4]
    ('logged_dcg', 'logged_ndcg', 'logged_pn_dcg', 'logged_dr_dcg')
    """
    if data is not None and data not in DATA:
        raise ValueError(f"data must be one of {DATA} or None, got {data!r}")
    return tuple(n for n, e in ESTIMATORS.items() if data is None or e.data == data)


def estimator(name: str, data: str | None = None) -> Estimator:
    """The registry's entry for ``name``; an unknown name is refused with the close ones.

    Examples
    --------
    >>> from recpack_ope.registry import estimator
    >>> estimator("ips_pn_dcg").label
    'IPS-pnDCG'
    """
    known = names(data)
    if not isinstance(name, str) or name not in known:
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        kind = "" if data is None else f" on {data.replace('_', '-')} data"
        raise ValueError(f"unknown estimator {name!r}{kind}{hint}; known: {', '.join(known)}")
    return ESTIMATORS[name]


def estimand_table() -> str:
    r"""What each held-out estimator of the registry estimates, by the users it averages over
    (Markdown, one row per estimator; notation of docs/estimators.md). A dash under "all"
    means the estimator refuses ``population="all"``; "served users" is ``"observed"`` with
    impressions.

    Examples
    --------
    >>> from recpack_ope.registry import estimand_table
    >>> print(*estimand_table().splitlines()[6].split(" | ")[:3], sep="\n")
    | `ips_dcg`
    $V$, unbiased
    $V / \pi$ (a ratio: consistent)
    """
    lines = [
        '| name | all users (`population="all"`) | observed users (the default) '
        "| served users (with impressions) | assumptions |",
        "|---|---|---|---|---|",
    ]
    for e in ESTIMATORS.values():
        if e.data == "held_out":
            cells = [e.estimands.get(p, "—") for p in ("all", "observed", "served")]
            lines.append(f"| `{e.name}` | {' | '.join(cells)} | {e.assumptions} |")
    return "\n".join(lines)


def feed_log_table() -> str:
    r"""What each feed-log estimator of the registry estimates, under which click model, and
    which of the log's columns give its logging probabilities (Markdown, one row per
    estimator; ``α_k`` the discount's weights, 1 without one, δ the examination curve).

    Examples
    --------
    >>> from recpack_ope.registry import feed_log_table
    >>> row = feed_log_table().splitlines()[7].split(" | ")
    >>> print(row[0], row[1].replace("$ ", "$\n"), sep="\n")
    | `cascade_ips`
    $V(\pi) = \mathbb{E}_x \mathbb{E}_{a \sim \pi}[\sum_k \alpha_k r_k]$
    per session, unbiased unclipped
    """
    lines = [
        "| name | estimates | unbiased when | logging probabilities from the log's columns |",
        "|---|---|---|---|",
    ]
    for e in ESTIMATORS.values():
        if e.data == "feed_log":
            columns = " and ".join(" or ".join(f"`{c}`" for c in g) for g in e.log_columns)
            columns = columns or "none: the logging policy itself (`logging=`)"
            lines.append(
                f"| `{e.name}` | {e.estimands['sessions']} | {e.assumptions} | {columns} |"
            )
    return "\n".join(lines)


def _cornac_cell(e: Estimator) -> str:
    if e.cornac_class:
        return f"`{e.cornac_class}`"
    if e.camel:
        return f"{e.label.split()[0].split('-')[0]} row of `PropensityStratifiedEvaluation`"
    return "—"


def markdown_table() -> str:
    """The registry as the docs' table of estimators (Markdown), one row per estimator.

    Examples
    --------
    >>> from recpack_ope.registry import markdown_table
    >>> markdown_table().splitlines()[2].split(" | ")[:5]
    ['| `dcg`', 'DCG@K', 'none', '—', 'mean(dcg)']
    """
    lines = [
        "| name | result | weighting | needs | estimate from per-user terms | RecPack | Cornac "
        "| computed by | reference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in ESTIMATORS.values():
        up = [f"mean({t})" for t, x in zip(e.terms, e.exponents, strict=True) if x == 1]
        down = [f"mean({t})" for t, x in zip(e.terms, e.exponents, strict=True) if x == -1]
        formula = " · ".join(up) + (f" / {' · '.join(down)}" if down else "")
        lines.append(
            f"| `{e.name}` | {e.label}@K | {e.weighting.replace('_', ' ')} "
            f"| {', '.join(e.needs) or '—'} | {formula} "
            f"| {f'`{e.camel}K`' if e.camel else '—'} | {_cornac_cell(e)} "
            f"| `{e.function.__module__}.{e.function.__name__}` | {e.reference} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
    print()
    print(estimand_table())
    print()
    print(feed_log_table())
