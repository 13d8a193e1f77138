"""Least squares (ridge) and the non-convex penalty: references checked independently, and their bounds."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from isparse import InProcessPool, load_dataset
from specs import make

pytestmark = pytest.mark.needs_data


@pytest.fixture(scope="module")
def a1a():
    return load_dataset("a1a")


def test_ridge_reference_matches_scikit_learn_and_isega_reaches_it(a1a):
    lam = 0.05
    s = make(algorithm="isega", data=a1a, lam=lam, n=5, block_size=3, loss="squared", split="contiguous")
    # scikit-learn's Ridge minimizes ||b - A x||^2 + alpha ||x||^2 = 2 N f(x) when alpha = lam N
    x_sk = Ridge(alpha=lam * a1a.N, fit_intercept=False, solver="cholesky").fit(a1a.A.toarray(), a1a.b).coef_
    assert np.linalg.norm(s.reference.x_star - x_sk) <= 1e-8 * np.linalg.norm(x_sk)
    assert s.reference.sum_sq_local_grads > 1e-3      # heterogeneous shards
    res = s.run(max_iter=60000, tol=1e-8, log_every=1000)
    assert res.converged
    assert all(r["dist_sq"] <= r["bound"] for r in res.records)
@pytest.mark.slow


def test_nonconvex_penalty_theorem7_bound_holds_on_average(a1a):
    s = make(algorithm="isgd", data=a1a, lam=0.05, n=10, block_size=1, penalty="nonconvex", options={"batch": 4})
    assert s.problem.mu == 0 and s.bound.quantity == "grad_norm_sq_avg" and s.bound.applicable
    # the reference is a stationary point of the non-convex f
    assert np.linalg.norm(s.problem.grad(s.reference.x_star)) <= 1e-10
    T, every = 600, 100
    curves = np.array([[r["grad_norm_sq_avg"] for r in s.run(InProcessPool(*s.pool_args(seed)), max_iter=T,
                                                             tol=1e-300, log_every=every).records] for seed in range(20)])
    bound = np.array([s.bound(t) for t in range(0, T + 1, every)])
    mean, se = curves.mean(0), curves.std(0, ddof=1) / np.sqrt(20)
    assert np.all(mean - 3 * se <= bound)
    # the average squared gradient keeps falling (the first term of the bound, 2(f(x0) - f*)/(gamma tau (t+1)))
    assert mean[-1] < mean[1] < mean[0]


def test_theorems_needing_strong_convexity_are_not_applied_to_the_nonconvex_problem(a1a):
    s = make(algorithm="ibcd", data=a1a, lam=0.05, n=4, block_size=1, penalty="nonconvex")
    assert not s.bound.applicable and "strongly convex" in s.bound.theorem
