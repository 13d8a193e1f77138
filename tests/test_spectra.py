"""lambda_max(A^T A) of a wide sparse matrix (the svds path of isparse.problems.spectra.top_eig)."""

import numpy as np
import pytest
import scipy.sparse as sp

from isparse.problems.spectra import top_eig


def test_top_eig_of_a_wide_matrix_is_the_same_bits_every_call_and_the_dense_value():
    """d > 2000 takes svds, whose own random start would move the last bits of lambda_max (so L and the stepsize)
    from one call to the next: two fits of the same rows would not give the same iterates."""
    A = sp.random(400, 3000, density=0.01, random_state=np.random.default_rng(1), format="csr")
    values = {top_eig(A) for _ in range(6)}
    assert len(values) == 1
    dense = np.linalg.svd(A.toarray(), compute_uv=False)[0] ** 2
    assert values.pop() == pytest.approx(dense, rel=1e-12)
