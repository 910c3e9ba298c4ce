"""The demo and the reproductions, one module per ``recpack-ope reproduce`` command.

They sit above the library and may import the adapters, so they are imported on use:

* ``demo``              – ``recpack-ope demo``: which offline metric picks the online winner
* ``ndcg_disagreement`` – Jeunen et al. Appendix A in a RecPack pipeline
* ``simpsons_paradox``  – Jadidinejad et al. Table 2 with Cornac
* ``rpp_power``         – Diaz & Ferraro Tables 3–4, discriminative power
* ``sensitivity``       – Jeunen et al. Figure 1 on the simulator
* ``disagreement``      – Gilotte Figure 3, Criteo-like banners
* ``recpack_models``    – RecPack's algorithms as the demo's model pool
"""
