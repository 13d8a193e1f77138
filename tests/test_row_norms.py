"""||a_j||^2 of every row, a block of rows at a time (isparse.problems.glm.row_norms_sq)."""

import numpy as np
import pytest
import scipy.sparse as sp

from isparse.problems import glm


@pytest.mark.parametrize("entries", [1, 3, 50, 1 << 22])
def test_row_norms_in_blocks_are_the_bits_of_one_pass(monkeypatch, entries):
    """Blocks of whole rows (at most ``entries`` entries, or one row) sum each row's squares in the order of one
    bincount over all rows: the same bits, with empty rows and an overflowing square (inf)."""
    monkeypatch.setattr(glm, "ROW_NORM_ENTRIES", entries)
    rng = np.random.default_rng(0)
    A = sp.random(300, 40, density=0.2, random_state=rng, format="csr")
    A.data *= 1e3 * rng.standard_normal(A.data.size)
    A = sp.vstack([A, sp.csr_matrix(np.array([[0.0] * 40, [1e200] + [1.0] * 39]))], format="csr")
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    with np.errstate(over="ignore"):
        want = np.bincount(rows, weights=A.data * A.data, minlength=A.shape[0])
    got = glm.row_norms_sq(A)
    np.testing.assert_array_equal(got, want)
    assert got[-2] == 0.0 and np.isinf(got[-1])
