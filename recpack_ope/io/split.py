"""A random hold-out split of a users × items interaction matrix."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import as_csr


def holdout_split(X, test_size: float = 0.2, seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Split interactions at random into a training and a held-out matrix.

    Every stored interaction goes to the held-out part with probability ``test_size``,
    independently (a random split by interaction, as in Diaz & Ferraro's and Jadidinejad et
    al.'s MovieLens set-ups); both parts keep the full users × items shape, so indices stay
    aligned with the input.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix
        Users × items interactions (ratings or clicks).
    test_size : float
        Probability that an interaction is held out, in (0, 1).
    seed : int
        Seed of the random split.

    Returns
    -------
    train, held_out : scipy.sparse.csr_matrix
        The two disjoint parts; ``train + held_out`` equals ``X``.
    """
    if not (isinstance(test_size, (float, int)) and 0 < test_size < 1):
        raise ValueError(f"test_size must be a share in (0, 1), got {test_size!r}")
    coo = as_csr(X, "X").tocoo()
    held = np.random.default_rng(seed).random(coo.nnz) < test_size

    def part(keep: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)

    return part(~held), part(held)
