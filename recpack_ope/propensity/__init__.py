"""Exposure and examination: how likely an item was to be seen.

* ``models``     – exposure-propensity models fitted on interactions (``PowerLawPropensity``,
  Jadidinejad et al. Eq. 7; ``PopularityPropensity``; ``FixedPropensity``) and
  ``item_counts``
* ``fit_report`` – what a fitted model's ``report()`` returns: ``PropensityFitReport``, the
  power-law fit's diagnostics and the propensity range behind the IPS weights
* ``weights``    – per-entry propensities and clipped IPS weights ``min(m, 1/p_ui)``
* ``discount``   – examination curves δ(r) = P(V = 1 | R = r) with their cutoff
  (``LogDiscount``, ``ExponentialDiscount``, ``ReciprocalDiscount``, ``CustomDiscount``)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .discount import (
        CustomDiscount,
        Discount,
        ExponentialDiscount,
        LogDiscount,
        ReciprocalDiscount,
    )
    from .fit_report import PropensityFitReport
    from .models import FixedPropensity, PopularityPropensity, PowerLawPropensity, item_counts
    from .weights import entry_propensities, ips_weights

export_lazily(__name__)

__all__ = [
    "PowerLawPropensity",
    "PopularityPropensity",
    "FixedPropensity",
    "item_counts",
    "PropensityFitReport",
    "entry_propensities",
    "ips_weights",
    "Discount",
    "LogDiscount",
    "ExponentialDiscount",
    "ReciprocalDiscount",
    "CustomDiscount",
]
