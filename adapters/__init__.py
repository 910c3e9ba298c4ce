"""Framework integrations, installed as ``recpack_ope.adapters``.

Adapters translate RecPack's (``recpack``) and Cornac's (``cornac``) data structures into
calls to the core and back; no formula lives here. Import the submodule for the framework you
use (the framework itself is an optional dependency: ``pip install ".[recpack]"`` or
``".[cornac]"`` from a clone). Data loaders and reproductions that used to live here are in
``recpack_ope.io`` and ``recpack_ope.studies``; their old paths still import.
"""

from .._moved import old_module


def __getattr__(name: str):
    return old_module(__name__, name)
