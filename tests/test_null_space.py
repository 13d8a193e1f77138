"""The null-space metric (issue 21, item 3): ``dist_sq_null`` is the part of ||x - x*||^2 in null(A), the
directions where only the penalty's curvature lambda acts (one-hot groups beside a constant column, empty columns).
Checked on a data set built with a known null space, against the projection onto that space computed here."""

import numpy as np
import pytest
import scipy.sparse as sp

from isparse.data import Dataset
from isparse.problems.spectra import null_space_basis
from specs import make


def constructed(N=400, seed=0):
    """Columns: a one-hot group of 3 (0-2), a constant column (3), an empty column (4), two Gaussian columns (5, 6).
    null(A) = span{(1, 1, 1, -1, 0, 0, 0)/2, e_4}: the one-hot group sums to the constant column."""
    rng = np.random.default_rng(seed)
    A = np.zeros((N, 7))
    A[np.arange(N), rng.integers(0, 3, N)] = 1.0
    A[:, 3] = 1.0
    A[:, 5:] = rng.normal(size=(N, 2))
    b = np.where(A[:, 5] + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)
    known = np.zeros((7, 2))
    known[:4, 0] = [0.5, 0.5, 0.5, -0.5]
    known[4, 1] = 1.0
    return Dataset(A=sp.csr_matrix(A), b=b, name="constructed", source="tests/test_null_space.py"), known


def test_the_basis_spans_exactly_the_known_null_space():
    data, known = constructed()
    Z, how = null_space_basis(data.A)
    assert how.startswith("eigh") and Z.shape == (7, 2)
    assert np.allclose(Z.T @ Z, np.eye(2), atol=1e-12)
    assert np.allclose(Z @ Z.T, known @ known.T, atol=1e-10)          # the same projection
    Z, how = null_space_basis(data.A, dense_max_d=3)                   # large-d path: the empty columns only
    assert how.startswith("empty columns") and np.array_equal(Z.toarray(), known[:, 1:])


@pytest.mark.parametrize("algorithm", ["isgd", "isega"])
def test_dist_sq_null_is_the_projection_of_the_error(algorithm):
    data, known = constructed()
    setup = make(algorithm, data=data, n=4, lam=1e-2, max_iter=200, tol=0)
    assert setup.derived["null_space_dim"] == 2
    result = setup.run(max_iter=200, tol=0, log_every=20, keep_iterates=True)
    x_star = setup.reference.x_star
    P = known @ known.T
    logged = {r["step"]: r for r in result.records}
    assert len(result.iterates) == 201 and len(logged) == 11
    assert logged[0]["dist_sq_null"] == pytest.approx(0.0, abs=1e-20)   # x^0 = 0 and x* lies in the row space of A
    for t, x in enumerate(result.iterates):
        if t in logged:
            e = x - x_star
            assert logged[t]["dist_sq_null"] == pytest.approx(float(e @ P @ e), rel=1e-9, abs=1e-15)
            assert logged[t]["dist_sq_null"] <= logged[t]["dist_sq"] * (1 + 1e-12)
    assert logged[200]["dist_sq_null"] > 0          # the sampled coordinates reach null(A): the metric is not trivially 0
