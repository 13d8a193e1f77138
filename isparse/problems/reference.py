"""High-precision reference solution x*, F*, and the local gradients grad f_i(x*).

(For the non-convex penalty, x* is a local minimizer: L-BFGS from 0, then Newton.)

Theorems 1 and 3 of arXiv:1901.09437 measure ||x^t - x*||^2 and need grad f_i(x*) (the
neighbourhood of IBCD without Assumption 2, and Phi^0 of ISEGA), so x* has to be accurate to
near machine precision. For R = 0: damped Newton with the exact Hessian (quadratic convergence)
until the gradient norm stops decreasing. For R = l1 or a box: scipy's L-BFGS-B first (the l1
case through the split x = u - v, u, v >= 0), then Newton steps on the free coordinates with the
active set held fixed, until the prox-gradient residual ||x - prox_R(x - grad f(x))|| stops
decreasing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize



@dataclass(frozen=True)
class Reference:
    """The reference solution of min F = f + R.

    Attributes
    ----------
    x_star : ndarray of shape (d,)
    F_star : float
        F(x*).
    local_grads : ndarray of shape (n, d)
        grad f_i(x*) for each worker; non-zero rows mean Assumption 2 fails.
    residual : float
        ||x* - prox_R(x* - grad f(x*))||, the gradient norm when R = 0.
    """

    x_star: np.ndarray
    F_star: float
    local_grads: np.ndarray
    residual: float

    @property
    def sum_sq_local_grads(self) -> float:
        """sum_i ||grad f_i(x*)||^2."""
        return float((self.local_grads ** 2).sum())


def _residual(problem, x):
    return float(np.linalg.norm(x - problem.reg.prox(x - problem.grad(x), 1.0)))


def _newton_free(problem, x, max_iter=100):
    """Newton on the coordinates where R is smooth at x, with the active set held fixed."""
    reg = problem.reg
    best = _residual(problem, x)
    for _ in range(max_iter):
        free, g_reg = reg.free_set(x)
        g = problem.grad(x) + g_reg
        if not free.any():
            break
        H = problem.hess(x)[np.ix_(free, free)] + reg.l2 * np.eye(int(free.sum()))
        step = np.zeros_like(x)
        step[free] = np.linalg.solve(H, -g[free])
        if float(g @ step) >= 0:   # not a descent direction (an indefinite Hessian, non-convex P)
            break
        # backtrack on F, keeping the signs (l1) and the box of the free set
        t, F0 = 1.0, problem.F(x)
        while t > 1e-12:
            cand = x + t * step
            if _keeps_face(reg, x, cand) and problem.F(cand) <= F0 + 1e-4 * t * float(g @ step) + 1e-15 * abs(F0):
                break
            t *= 0.5
        else:
            break
        cand = x + t * step
        r = _residual(problem, cand)
        if r > best * (1 + 1e-9) and best < 1e-10:
            break
        x, best = cand, min(best, r)
        if best < 1e-15:
            break
    return x


def _keeps_face(reg, x, cand):
    ok = True
    if reg.l1:
        ok &= bool(np.all(np.sign(cand[x != 0]) == np.sign(x[x != 0])))
    if reg.has_box:
        ok &= bool(np.all((cand >= reg.lower) & (cand <= reg.upper)))
    return ok


def reference_solve(problem) -> Reference:
    """Solve min F = f + R to near machine precision.

    Parameters
    ----------
    problem : LogisticProblem (or any problem with ``f, F, grad, hess, local_grads, reg, d``)

    Returns
    -------
    Reference
    """
    d, reg = problem.d, problem.reg
    opts = {"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-12}
    if reg.l1:   # split x = u - v, u, v >= 0: smooth with bounds
        def obj(z):
            x = z[:d] - z[d:]
            g = problem.grad(x) + reg.l2 * x
            val = problem.f(x) + 0.5 * reg.l2 * float(x @ x) + reg.l1 * float(z.sum())
            return val, np.concatenate([g + reg.l1, -g + reg.l1])
        res = minimize(obj, np.zeros(2 * d), jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * d), options=opts)
        x = res.x[:d] - res.x[d:]
        x[np.abs(x) < 1e-10] = 0.0
    elif reg.has_box:
        res = minimize(lambda x: problem.f(x) + 0.5 * reg.l2 * float(x @ x),
                       np.clip(np.zeros(d), reg.lower, reg.upper), jac=lambda x: problem.grad(x) + reg.l2 * x,
                       method="L-BFGS-B", bounds=[(reg.lower, reg.upper)] * d, options=opts)
        x = res.x
    elif getattr(problem, "mu", 1.0) <= 0:   # non-convex f: a local minimizer by L-BFGS, then Newton
        res = minimize(lambda x: problem.f(x) + 0.5 * reg.l2 * float(x @ x), np.zeros(d),
                       jac=lambda x: problem.grad(x) + reg.l2 * x, method="L-BFGS-B", options=opts)
        x = res.x
    else:        # R smooth (none or l2): Newton from 0
        x = np.zeros(d)
    x = _newton_free(problem, x)
    return Reference(x_star=x, F_star=problem.F(x), local_grads=problem.local_grads(x),
                     residual=_residual(problem, x))
