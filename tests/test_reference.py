"""x* from the reference solve against scikit-learn, and optimality conditions checked independently."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from isparse import LogisticProblem, load_dataset, reference_solve, split_rows
from isparse.regularizers import Box, L1


@pytest.mark.needs_data
@pytest.mark.parametrize("name", ["mushrooms", "a1a"])
def test_x_star_matches_scikit_learn(name):
    lam = 1e-3
    ds = load_dataset(name)
    problem = LogisticProblem(ds, split_rows(ds.N, 7, "shuffle", 1), lam)  # unequal shards on purpose
    ref = reference_solve(problem)
    # scikit-learn minimizes sum_j log(1 + exp(-b_j a_j^T x)) + ||x||^2 / (2C) = N f(x) when C = 1/(lam N)
    clf = LogisticRegression(C=1.0 / (lam * ds.N), fit_intercept=False, solver="newton-cholesky",
                             tol=1e-14, max_iter=1000).fit(ds.A, ds.b)
    x_sk = clf.coef_.ravel()
    assert np.linalg.norm(ref.x_star - x_sk) <= 1e-6 * np.linalg.norm(x_sk)
    # gradient of the global objective, computed here from the dense data, at x*
    A, b = ds.A.toarray(), ds.b
    z = b * (A @ ref.x_star)
    grad = -(A.T @ (b / (1 + np.exp(z)))) / ds.N + lam * ref.x_star
    assert np.linalg.norm(grad) <= 1e-10
    # the weighted local gradients average to the global one, and are not all zero (no Assumption 2)
    local = problem.local_grads(ref.x_star)
    np.testing.assert_allclose(local.mean(0), grad, atol=1e-12)
    assert ref.sum_sq_local_grads == pytest.approx(float(np.sum(local ** 2)), rel=1e-12)
    assert ref.sum_sq_local_grads > 1e-8


@pytest.mark.needs_data
def test_l1_and_box_solutions_satisfy_optimality_conditions():
    ds = load_dataset("a1a")
    parts = split_rows(ds.N, 4)
    # l1: |grad_j| <= s where x_j = 0, grad_j = -s sign(x_j) elsewhere
    s = 5e-3
    p = LogisticProblem(ds, parts, 1e-3, L1(s))
    x = reference_solve(p).x_star
    g = p.grad(x)
    nz = x != 0
    assert 0 < nz.sum() < ds.d
    np.testing.assert_allclose(g[nz], -s * np.sign(x[nz]), atol=1e-10)
    assert np.all(np.abs(g[~nz]) <= s + 1e-10)
    # box [-0.3, 0.3]: grad_j = 0 inside, grad_j <= 0 at the upper bound, >= 0 at the lower one
    p = LogisticProblem(ds, parts, 1e-3, Box(-0.3, 0.3))
    x = reference_solve(p).x_star
    g = p.grad(x)
    inside = (x > -0.3) & (x < 0.3)
    assert (~inside).sum() > 0
    np.testing.assert_allclose(g[inside], 0, atol=1e-10)
    assert np.all(g[x >= 0.3] <= 1e-10) and np.all(g[x <= -0.3] >= -1e-10)


@pytest.mark.needs_data
@pytest.mark.parametrize("reg, kwargs", [("l2", dict(reg_strength=0.05)),
                                         ("elastic_net", dict(reg_strength=3e-3, reg_l2=0.05))])
def test_isega_prox_l2_and_elastic_net_converge_to_reference(reg, kwargs):
    """ISEGA's prox iterates reach the reference x*, whose optimality is checked here by hand."""
    from specs import make

    ds = load_dataset("a1a")
    s = make(algorithm="isega", data=ds, lam=1e-2, n=4, block_size=2, reg=reg, **kwargs)
    x = s.reference.x_star
    l1, l2 = kwargs.get("reg_strength") if reg == "elastic_net" else 0.0, kwargs.get("reg_l2", kwargs["reg_strength"])
    g = s.problem.grad(x) + l2 * x
    nz = x != 0
    np.testing.assert_allclose(g[nz], -l1 * np.sign(x[nz]), atol=1e-10)
    assert np.all(np.abs(g[~nz]) <= l1 + 1e-10)
    res = s.run(max_iter=30000, tol=1e-10, log_every=1000)
    assert res.converged


@pytest.mark.needs_data
def test_reference_cache_solves_once_per_key(tmp_path):
    from specs import make
    from isparse.cache import load_or_make, problem_key

    ds = load_dataset("a1a")
    a = make(algorithm="isega", data=ds, lam=1e-2, n=4, block_size=1, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    calls = []
    b = make(algorithm="ibcd", data=ds, lam=1e-2, n=4, block_size=3, cache_dir=tmp_path)   # same problem
    kept, hit = load_or_make(tmp_path, problem_key(b.problem, "shuffle", 0), lambda: calls.append(1), "the reference")
    assert hit and not calls
    np.testing.assert_array_equal(kept["x_star"], a.reference.x_star)
    np.testing.assert_array_equal(b.reference.x_star, a.reference.x_star)
    np.testing.assert_array_equal(b.problem.L_i, a.problem.L_i)
    make(algorithm="isega", data=ds, lam=2e-2, n=4, block_size=1, cache_dir=tmp_path)        # another lambda
    make(algorithm="isega", data=ds, lam=1e-2, n=5, block_size=1, cache_dir=tmp_path)        # another n
    assert len(list(tmp_path.glob("*.npz"))) == 3
