"""Vectorised look-ups of stored entries of a CSR matrix, shared by every layer."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._validation import check_key_space

__all__ = ["SparseLookup", "find_sorted"]


def find_sorted(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position of each of ``wanted`` in the ascending ``keys`` and whether it is there (the
    position is then meaningless but in range). Ascending ``wanted`` is searched fastest."""
    if keys.size == 0:
        return np.zeros(wanted.size, dtype=np.int64), np.zeros(wanted.size, dtype=bool)
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    return at, keys[at] == wanted


class SparseLookup:
    """Vectorised ``matrix[users, items]`` of a canonical CSR matrix (missing entries = 0):
    the stored entries' keys ``row · n_items + column`` are sorted, so every pair is found by
    one ``searchsorted``, without a dense copy."""

    def __init__(self, matrix: sp.csr_matrix):
        check_key_space(matrix.shape, "matrix")
        n_users, n_items = matrix.shape
        self.shape = (int(n_users), int(n_items))
        rows = np.repeat(np.arange(n_users, dtype=np.int64), np.diff(matrix.indptr))
        self.n_items = int(n_items)
        self.keys = rows * self.n_items + matrix.indices.astype(np.int64)
        self.values = matrix.data

    def stored(self, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Position of each pair in the stored entries and whether it is stored at all."""
        return find_sorted(self.keys, users * self.n_items + items)

    def __call__(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        at, found = self.stored(users, items)
        return np.where(found, self.values[at], 0.0) if self.keys.size else np.zeros(users.size)
