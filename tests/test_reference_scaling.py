"""The reference solve scales in d: matrix-free Newton-CG (no d x d matrix) at d = 10**6, the same x* as
the dense path, scikit-learn and the optimality conditions on a1a, and the memory refusal before any work."""

import time
import tracemalloc

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from benchmarks.synthetic import make_sparse_logistic
from isparse.data import load_dataset, split_rows
from isparse.errors import ConfigError
from isparse.problems.glm import GLMProblem
from isparse.problems.reference import (_cg_step, _GLMCurvature, reference_memory_bytes, reference_solve)
from isparse.regularizers import Box, L1, make_regularizer

GiB = 2.0 ** 30


def logistic_grad(A, b, lam, x):
    """grad f for the logistic loss and (lam/2)||x||^2, from A and b only."""
    return A.T @ (-b * expit(-b * (A @ x))) / A.shape[0] + lam * x


@pytest.fixture(scope="module")
def big():
    """N = 20000 rows, d = 10**6 columns, 20 non-zeros a row, over n = 8 workers (the dense Hessian: 7.3 TiB)."""
    ds = make_sparse_logistic(N=20_000, d=1_000_000, nnz_per_row=20, seed=0)
    return ds, GLMProblem(ds, split_rows(ds.N, 8, "shuffle", 0), lam=1e-4)


def test_d_one_million_solves_to_1e_10_in_bounded_memory(big):
    ds, p = big
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        ref = reference_solve(p)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"d = 10**6: reference_solve {elapsed:.2f} s, peak traced memory {peak / 2**20:.0f} MiB, "
          f"residual {ref.residual:.2e}")
    g = logistic_grad(ds.A, ds.b, 1e-4, ref.x_star)
    assert np.linalg.norm(g) <= 1e-10
    assert ref.F_star == pytest.approx(p.F(ref.x_star))
    local = p.local_grads(ref.x_star)                # (made here, after the measurement: the solve keeps one number)
    np.testing.assert_allclose(local.mean(0), g, atol=1e-12)
    assert ref.sum_sq_local_grads == pytest.approx(float(np.sum(local ** 2)), rel=1e-12)
    # O(nnz + d): Newton-CG's vectors; within the estimate
    assert peak < 0.5 * GiB
    assert peak <= reference_memory_bytes(p)


def test_refuses_before_work_when_memory_is_short(big):
    ds, p = big
    # the dense Hessian of d = 10**6 cannot fit: refused at once, not a numpy MemoryError after work
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"needs about [0-9.e+]+ GiB .*d = 1000000.*only [0-9.e+-]+ GiB are available") as err:
        reference_solve(p, dense_max_d=10 ** 7)
    assert err.value.key == "data"
    assert time.perf_counter() - t0 < 1.0
    assert reference_memory_bytes(p, dense_max_d=10 ** 7) > 10 ** 12 * 8 * 5
    # the Newton-CG solve needs a fraction of a GiB; with less available it is refused too
    need = reference_memory_bytes(p)
    assert need < 1 * GiB
    with pytest.raises(ConfigError, match=r"N = 20000, d = 1000000, nnz = 400000, n = 8\); only .* GiB are available"):
        reference_solve(p, available_bytes=need - 1)


@pytest.mark.needs_data
def test_newton_cg_matches_scikit_learn_and_the_dense_path_on_a1a():
    lam = 1e-3
    ds = load_dataset("a1a")
    p = GLMProblem(ds, split_rows(ds.N, 7, "shuffle", 1), lam)
    ref = reference_solve(p, dense_max_d=0)          # force Newton-CG on d = 123
    clf = LogisticRegression(C=1.0 / (lam * ds.N), fit_intercept=False, solver="newton-cholesky",
                             tol=1e-14, max_iter=1000).fit(ds.A, ds.b)
    x_sk = clf.coef_.ravel()
    assert np.linalg.norm(ref.x_star - x_sk) <= 1e-6 * np.linalg.norm(x_sk)
    g = logistic_grad(ds.A, ds.b, lam, ref.x_star)
    assert np.linalg.norm(g) <= 1e-10
    np.testing.assert_allclose(p.local_grads(ref.x_star).mean(0), g, atol=1e-12)
    dense = reference_solve(p)                       # d = 123 <= DENSE_MAX_D: the exact dense Newton
    assert np.linalg.norm(ref.x_star - dense.x_star) <= 1e-10
    assert abs(ref.F_star - dense.F_star) <= 1e-14


@pytest.mark.needs_data
def test_newton_cg_l1_and_box_satisfy_optimality_conditions_on_a1a():
    ds = load_dataset("a1a")
    parts = split_rows(ds.N, 4)
    s = 5e-3
    p = GLMProblem(ds, parts, 1e-3, L1(s))
    x = reference_solve(p, dense_max_d=0).x_star
    g = logistic_grad(ds.A, ds.b, 1e-3, x)
    nz = x != 0
    assert 0 < nz.sum() < ds.d
    np.testing.assert_allclose(g[nz], -s * np.sign(x[nz]), atol=1e-10)
    assert np.all(np.abs(g[~nz]) <= s + 1e-10)
    assert np.linalg.norm(x - reference_solve(p).x_star) <= 1e-10

    p = GLMProblem(ds, parts, 1e-3, Box(-0.3, 0.3))
    x = reference_solve(p, dense_max_d=0).x_star
    g = logistic_grad(ds.A, ds.b, 1e-3, x)
    inside = (x > -0.3) & (x < 0.3)
    assert (~inside).sum() > 0 and inside.sum() > 0
    np.testing.assert_allclose(g[inside], 0, atol=1e-10)
    assert np.all(g[x >= 0.3] <= 1e-10) and np.all(g[x <= -0.3] >= -1e-10)
    assert np.linalg.norm(x - reference_solve(p).x_star) <= 1e-10

    # elastic net: the l2 part of R enters the free-set Hessian
    s, l2 = 3e-3, 0.05
    p = GLMProblem(ds, parts, 1e-2, make_regularizer("elastic_net", s, l2_strength=l2))
    ref = reference_solve(p, dense_max_d=0)
    x = ref.x_star
    g = logistic_grad(ds.A, ds.b, 1e-2, x) + l2 * x
    nz = x != 0
    np.testing.assert_allclose(g[nz], -s * np.sign(x[nz]), atol=1e-10)
    assert np.all(np.abs(g[~nz]) <= s + 1e-10) and ref.residual <= 1e-10


@pytest.mark.needs_data
def test_nonconvex_penalty_newton_cg_refines_lbfgs_and_stops_on_negative_curvature():
    ds = load_dataset("a1a")
    p = GLMProblem(ds, split_rows(ds.N, 4), 1e-2, penalty="nonconvex")
    ref = reference_solve(p, dense_max_d=0)
    assert ref.residual <= 1e-10
    assert np.linalg.norm(ref.x_star - reference_solve(p).x_star) <= 1e-10
    # where P'' < 0 dominates (|x_k| > 1/sqrt(3), large lambda) the Hessian is indefinite: CG gives no step
    q = GLMProblem(ds, split_rows(ds.N, 4), 10.0, penalty="nonconvex")
    x = np.full(ds.d, 2.0)
    free = np.ones(ds.d, bool)
    assert _cg_step(_GLMCurvature(q), x, q.grad(x), free, 0.0) is None
