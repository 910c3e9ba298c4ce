"""Framework integrations, installed as ``recpack_ope.adapters``.

Adapters translate RecPack's (``recpack``) and Cornac's (``cornac``) data structures into
calls to the core and back; no formula lives here. Import the submodule for the framework you
use (the framework itself is an optional dependency: ``pip install ".[recpack]"`` or
``".[cornac]"`` from a clone).
"""
