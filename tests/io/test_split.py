"""The random hold-out split used by the README's programs."""

import numpy as np
import pytest
import scipy.sparse as sp

from recpack_ope.io.split import holdout_split


def test_parts_are_disjoint_and_sum_to_the_input():
    X = sp.random(200, 50, density=0.2, random_state=1, format="csr") * 5
    train, held = holdout_split(X, test_size=0.3, seed=4)
    assert train.shape == held.shape == X.shape
    assert abs(train + held - X).max() == 0
    assert train.multiply(held).nnz == 0
    # Each of the 2,000 interactions is held out with probability 0.3: the count is
    # Binomial(2000, 0.3), sd ≈ 20.5, so 4 sd bound a correct split (p ≈ 6e-5 to fail).
    assert abs(held.nnz - 0.3 * X.nnz) < 4 * np.sqrt(X.nnz * 0.3 * 0.7)


def test_the_seed_fixes_the_split_and_dense_input_gives_the_same_split():
    X = sp.random(30, 20, density=0.3, random_state=2, format="csr")
    a, b = holdout_split(X, seed=7), holdout_split(X.toarray(), seed=7)
    assert (a[1] != b[1]).nnz == 0
    assert (holdout_split(X, seed=8)[1] != a[1]).nnz > 0


@pytest.mark.parametrize("size", [0, 1, -0.1, 1.5, "0.2", None])
def test_a_share_outside_the_unit_interval_is_refused(size):
    with pytest.raises(ValueError, match="test_size must be a share in"):
        holdout_split(np.eye(3), test_size=size)
