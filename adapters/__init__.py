"""Framework integrations, installed as ``recpack_ope.adapters``.

Adapters translate RecPack's and Cornac's data structures into calls to the core and back;
no formula lives here. Import the submodule for the framework you use (the framework itself
is an optional dependency: ``pip install recpack-ope[recpack]`` or ``[cornac]``).
"""
