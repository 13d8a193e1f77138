"""High-precision reference solution x*, F*, and the local gradients grad f_i(x*).

(For the non-convex penalty, x* is a local minimizer: L-BFGS from 0, then Newton.)

Theorems 1 and 3 of arXiv:1901.09437 measure ||x^t - x*||^2 and need grad f_i(x*) (the
neighbourhood of IBCD without Assumption 2, and Phi^0 of ISEGA), so x* has to be accurate to
near machine precision. For R = 0 (or l2): damped Newton from 0 until the gradient norm stops
decreasing. For R = l1 or a box: scipy's L-BFGS-B first (the l1 case through the split
x = u - v, u, v >= 0), then Newton steps on the free coordinates with the active set held fixed,
until the prox-gradient residual ||x - prox_R(x - grad f(x))|| stops decreasing.

The Newton steps scale with the dimension d. Up to :data:`DENSE_MAX_D` coordinates they solve
with the exact dense Hessian (``problem.hess``, LU). Above it, and for every GLM problem when asked,
they are Newton-CG steps: scipy's conjugate gradient (Jacobi-preconditioned) on the free coordinates,
with the Hessian applied matrix-free from the data,

.. math::

    H v = A^T \\big(w \\odot (A v)\\big) + P''(x) \\odot v + l_2 v, \\qquad w = \\phi''(A x; b) / N,

so the solve keeps O(nnz(A) + N + n d) memory (the n x d local gradients are returned) and never
forms a d x d matrix. CG stops, and Newton with it, on a direction of non-positive curvature (the
non-convex penalty then keeps the L-BFGS point). Before any work, :func:`reference_solve` estimates
the memory the solve needs (:func:`reference_memory_bytes`) and refuses with a
:class:`~isparse.errors.ConfigError` when the machine does not have it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from ..errors import ConfigError

#: Up to this dimension the Newton steps use the exact dense Hessian; above it, matrix-free Newton-CG.
DENSE_MAX_D = 2000
#: At most this many CG iterations per Newton step (the step is then inexact; Newton continues from it).
CG_MAX_ITER = 5000

_GIB = 2.0 ** 30


@dataclass(frozen=True)
class Reference:
    """The reference solution of min F = f + R: what the logged errors and the theorems' bounds are measured against.

    Theorems 1 and 3 of arXiv:1901.09437 need grad f_i(x*) (the neighbourhood of IBCD without Assumption 2,
    Phi^0 of ISEGA; docs/algorithms.md §3). Made by :func:`reference_solve`, or in closed form by
    ``problem.reference()``.

    Parameters
    ----------
    F_star : float
        F(x*).
    sum_sq_local_grads : float
        sum_i ||grad f_i(x*)||^2 (0 under Assumption 2; the D of Theorem 1's neighbourhood is built on it), reduced
        where the rows are (``problem.sum_sq_local_grads``): the n gradients themselves are never kept.
    residual : float
        ||x* - prox_R(x* - grad f(x*))||, the gradient norm when R = 0.
    """

    x_star: np.ndarray
    F_star: float
    sum_sq_local_grads: float
    residual: float

    @classmethod
    def unknown(cls, n: int, d: int) -> "Reference":
        """The reference of a run that solves no x* (``x_star=none``): every value NaN (:attr:`solved` False)."""
        return cls(x_star=np.full(d, np.nan), F_star=float("nan"), sum_sq_local_grads=float("nan"),
                   residual=float("nan"))

    @property
    def solved(self) -> bool:
        """bool: x* is known (False for :meth:`unknown`)."""
        return bool(np.isfinite(self.F_star))



# -- memory ------------------------------------------------------------------------------------
def _uses_dense(problem, dense_max_d) -> bool:
    """Exact dense Newton steps (``problem.hess``): small d, or a problem without a matrix-free Hessian
    (``problem.curvature()`` is None); never for a problem without a dense one (``hess`` None: rows on remote
    hosts)."""
    if problem.curvature() is None:
        return True
    if problem.hess is None:
        return False
    return problem.d <= (DENSE_MAX_D if dense_max_d is None else dense_max_d)


def reference_memory_bytes(problem, *, dense_max_d: int | None = None) -> int:
    """Estimate the peak working memory, in bytes, of :func:`reference_solve` on ``problem`` (its ``d``, ``N``,
    ``n``, ``nnz`` and ``reg``; ``dense_max_d`` as there).

    The data (A and the workers' shards) are already in memory and not counted. The solve runs in
    phases that free their temporaries, so the estimate is 1.25 times the largest of (8 bytes a number):

    * Newton: 12 N-vectors (A x, loss terms, A v), 16 d-vectors (iterate, gradients, step, CG vectors,
      Hessian diagonal, prox) and nnz(A) squared entries (the Jacobi preconditioner); with the dense
      Hessian (d <= ``dense_max_d``) also 5 d^2 numbers and 12 bytes per non-zero (the sparse product);
    * L-BFGS-B (l1, box, non-convex penalty), on m = 2 d variables for l1, else d: 35 numbers a
      variable (workspace, history, iterate) and, with bounds, 150 bytes a variable for scipy's
      per-variable bound tuples, plus 12 N- and 8 d-vectors for the objective;
    * sum_i ||grad f_i(x*)||^2: the sparse product of the workers' residuals and the rows (12 bytes a non-zero, at
      most min(nnz, n d) of them) and 4 d-vectors (one worker's gradient made dense at a time).

    The measured peak RSS growth of the Newton-CG solve of a sparse logistic problem with N = 20000, d = 10**6,
    nnz = 4e5, n = 8 is 0.64 to 0.74 times the estimate (l2, l1, box, non-convex penalty)."""
    d, reg = int(problem.d), problem.reg
    N, nnz, n = int(problem.N), int(problem.nnz), int(problem.n)
    if "rows" not in problem.capabilities and problem.curvature() is not None:   # the rows are on remote hosts: d-vectors here
        N = nnz = 0
    newton = 8 * (12 * N + 16 * d) + 8 * nnz
    if _uses_dense(problem, dense_max_d):
        newton += 5 * 8 * d * d + 12 * nnz
    lbfgs = 0
    if reg.l1 or reg.has_box or not problem.convex:
        m = 2 * d if reg.l1 else d
        lbfgs = m * (35 * 8 + (150 if (reg.l1 or reg.has_box) else 0)) + 8 * (12 * N + 8 * d)
    local = 12 * min(nnz, n * d) + 8 * 4 * d
    return int(1.25 * max(newton, lbfgs, local))


def available_memory_bytes() -> int:
    """Memory this process can still allocate, in bytes.

    ``psutil.virtual_memory().available`` when psutil is importable, else
    ``os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')``; lowered to the room left under a
    cgroup memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``; usage net of inactive page
    cache) when one is set."""
    try:
        import psutil

        avail = int(psutil.virtual_memory().available)
    except ImportError:
        avail = int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    for base, limit, usage, inactive in (("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
                                         ("/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                                          "memory.usage_in_bytes", "total_inactive_file")):
        try:
            with open(os.path.join(base, limit)) as fh:
                text = fh.read().strip()
            if text == "max":
                continue
            with open(os.path.join(base, usage)) as fh:
                used = int(fh.read().strip())
            with open(os.path.join(base, "memory.stat")) as fh:
                stat = dict(line.split() for line in fh if line.count(" ") == 1)
            used -= int(stat.get(inactive, 0))
            avail = min(avail, max(int(text) - used, 0))
        except (OSError, ValueError):
            continue
    return avail


def _check_memory(problem, dense_max_d, available_bytes):
    need = reference_memory_bytes(problem, dense_max_d=dense_max_d)
    avail = available_memory_bytes() if available_bytes is None else int(available_bytes)
    if need > avail:
        raise ConfigError("data", f"The reference solve of this problem needs about {need / _GIB:.3g} GiB "
                                  f"(N = {problem.N}, d = {problem.d}, nnz = {problem.nnz}, n = {problem.n}"
                                  f"{', dense Hessian' if _uses_dense(problem, dense_max_d) else ''}); "
                                  f"only {avail / _GIB:.3g} GiB are available.")


# -- Newton steps ------------------------------------------------------------------------------
class _NegativeCurvature(Exception):
    """CG met a direction p with p^T H p <= 0."""


class _GLMCurvature:
    """The Hessian of a GLM's f, matrix-free: ``at(x)`` gives (v -> H v, diag H) with
    H v = A^T (w * (A v)) + P''(x) * v, w = phi''(A x; b) / N."""

    def __init__(self, problem):
        A = problem.A
        self.problem, self.A, self.AT = problem, A, A.T     # A.T of a CSR matrix is a CSC view: no copy
        A = A.tocsr()                                       # squared entries, sharing A's index arrays
        A2 = type(A)((A.data ** 2, A.indices, A.indptr), shape=A.shape)
        self.A2T = A2.T

    def at(self, x):
        p = self.problem
        w = p.loss.second(self.A @ x, p.b) / p.N
        pd = p.penalty.hess_diag(x)
        A, AT = self.A, self.AT

        def hv(v):
            return AT @ (w * (A @ v)) + pd * v

        return hv, np.asarray(self.A2T @ w).ravel() + pd


def _cg_step(curv, x, g, free, l2):
    """Newton-CG step on the free coordinates: CG on H_FF s = -g_F (inexact, forcing term min(0.1, ||g_F||)).

    Returns the full step (zero off the free set), or None on non-positive curvature."""
    from scipy.sparse.linalg import LinearOperator, cg

    hv, diag = curv.at(x)
    d = x.size
    idx = None if free.all() else np.flatnonzero(free)
    rhs = -g if idx is None else -g[idx]
    k = rhs.size
    buf = None if idx is None else np.zeros(d)

    def matvec(v):
        v = np.ravel(v)
        if idx is None:
            out = hv(v)
        else:
            buf[idx] = v
            out = hv(buf)[idx]
        if l2:
            out += l2 * v
        c = float(v @ out)
        if not c > 0 and v.any():
            raise _NegativeCurvature
        return out

    dg = (diag if idx is None else diag[idx]) + l2 if l2 or idx is not None else diag
    del diag
    M = LinearOperator((k, k), matvec=lambda r: np.ravel(r) / dg, dtype=float) if np.all(dg > 0) else None
    eta = min(0.1, float(np.linalg.norm(rhs)))
    try:
        s, _ = cg(LinearOperator((k, k), matvec=matvec, dtype=float), rhs, rtol=eta, atol=0.0,
                  maxiter=min(2 * k + 20, CG_MAX_ITER), M=M)
    except _NegativeCurvature:
        return None
    if idx is None:
        return s
    step = np.zeros(d)
    step[idx] = s
    return step


def _dense_step(problem, x, g, free, l2):
    """Exact Newton step on the free coordinates with the dense Hessian (small d only)."""
    H = problem.hess(x)[np.ix_(free, free)] + l2 * np.eye(int(free.sum()))
    step = np.zeros_like(x)
    try:
        step[free] = np.linalg.solve(H, -g[free])
    except np.linalg.LinAlgError:   # exactly singular in float64: the data's scale swamps the penalty
        from ..errors import DataError

        diag = np.abs(np.diag(H))
        raise DataError(f"{getattr(getattr(problem, 'data', None), 'source', problem.name)}: the reference solve of x* "
                        f"failed: the Hessian is singular in float64 (its diagonal spans {diag.min():.3g} to "
                        f"{diag.max():.3g}, problem.lam = {getattr(problem, 'lam', float('nan')):.3g}); rescale the "
                        f"data (or raise problem.lam).") from None
    return step


def _residual(problem, x):
    return float(np.linalg.norm(x - problem.reg.prox(x - problem.grad(x), 1.0)))


def _newton_free(problem, x, max_iter=100, dense=True):
    """Newton on the coordinates where R is smooth at x, with the active set held fixed.

    ``dense``: exact steps with ``problem.hess``; else Newton-CG with the matrix-free GLM Hessian.
    Stops when the prox-gradient residual stops decreasing (below 1e-10), on a non-descent direction or
    non-positive curvature (an indefinite Hessian, non-convex P), or when no step along the face decreases F.
    """
    reg = problem.reg
    curv = None if dense else problem.curvature()
    best = _residual(problem, x)
    for _ in range(max_iter):
        free, g_reg = reg.free_set(x)
        g = problem.grad(x)
        g += g_reg
        del g_reg   # a d-vector less beside Newton-CG's (the client's memory at d = 2^20: docs/dask.md)
        if not free.any():
            break
        step = _dense_step(problem, x, g, free, reg.l2) if dense else _cg_step(curv, x, g, free, reg.l2)
        if step is None:
            break
        slope = float(g[free] @ step[free])
        if not slope < 0:   # not a descent direction (an indefinite Hessian, non-convex P)
            break
        # backtrack on F, keeping the signs (l1) and the box of the free set
        t, F0 = 1.0, problem.F(x)
        while t > 1e-12:
            cand = x + t * step
            if _keeps_face(reg, x, cand) and problem.F(cand) <= F0 + 1e-4 * t * slope + 1e-15 * abs(F0):
                break
            t *= 0.5
        else:
            break
        del step, g   # not held through the next Newton-CG step
        r = _residual(problem, cand)
        if r > best * (1 + 1e-9) and best < 1e-10:
            break
        stalled = best < 1e-10 and r > 0.9 * best
        x, best = cand, min(best, r)
        if best < 1e-15 or stalled:
            break
    return x


def _keeps_face(reg, x, cand):
    ok = True
    if reg.l1:
        ok &= bool(np.all(np.sign(cand[x != 0]) == np.sign(x[x != 0])))
    if reg.has_box:
        ok &= bool(np.all((cand >= reg.lower) & (cand <= reg.upper)))
    return ok


def reference_solve(problem, *, dense_max_d: int | None = None, available_bytes: int | None = None) -> Reference:
    """Solve min F = f + R to near machine precision (the method: the module docstring).

    Each Newton step backtracks on F (Armijo). Newton stops when the residual ||x - prox_R(x - grad f(x))|| (the
    gradient norm when R = 0) no longer decreases once below 1e-10; it typically ends near 1e-15 (a1a, mushrooms, and
    a sparse problem with d = 10**6). On non-positive curvature (non-convex penalty) Newton stops and the last point
    (at worst the L-BFGS-B one) is returned. The estimate of :func:`reference_memory_bytes` is compared with the
    available memory before any work.

    Parameters
    ----------
    problem : Problem
        With ``f, F, grad, local_grads, reg, d`` and ``hess`` (dense, shape (d, d)); a problem with the
        capability ``rows`` (``A`` of shape (N, d), ``b``, ``N``, ``loss.second``, ``penalty.hess_diag``) gets
        the matrix-free path.
    dense_max_d : int, optional
        Largest d solved with the dense Hessian; default :data:`DENSE_MAX_D` (2000). ``0`` forces
        Newton-CG for every GLM problem.
    available_bytes : int, optional
        The memory, in bytes, to compare the estimate with; default :func:`available_memory_bytes`
        (what the machine and its cgroup have free now).

    Raises
    ------
    ConfigError
        (key ``data``) The estimated working memory exceeds the available memory; the message names both
        in GiB and N, d, nnz(A), n.
    """
    from scipy.optimize import Bounds, minimize   # here: a run whose x* is cached or known never imports it

    _check_memory(problem, dense_max_d, available_bytes)
    dense = _uses_dense(problem, dense_max_d)
    d, reg = problem.d, problem.reg
    opts = {"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-12}
    if reg.l1:   # split x = u - v, u, v >= 0: smooth with bounds
        def obj(z):
            x = z[:d] - z[d:]
            g = problem.grad(x) + reg.l2 * x
            val = problem.f(x) + 0.5 * reg.l2 * float(x @ x) + reg.l1 * float(z.sum())
            return val, np.concatenate([g + reg.l1, -g + reg.l1])
        res = minimize(obj, np.zeros(2 * d), jac=True, method="L-BFGS-B", bounds=Bounds(0.0, np.inf), options=opts)
        x = res.x[:d] - res.x[d:]
        del res
        x[np.abs(x) < 1e-10] = 0.0
    elif reg.has_box:
        res = minimize(lambda x: problem.f(x) + 0.5 * reg.l2 * float(x @ x),
                       np.clip(np.zeros(d), reg.lower, reg.upper), jac=lambda x: problem.grad(x) + reg.l2 * x,
                       method="L-BFGS-B", bounds=Bounds(reg.lower, reg.upper), options=opts)
        x = res.x
    elif not problem.convex:   # non-convex f: a local minimizer by L-BFGS, then Newton
        res = minimize(lambda x: problem.f(x) + 0.5 * reg.l2 * float(x @ x), np.zeros(d),
                       jac=lambda x: problem.grad(x) + reg.l2 * x, method="L-BFGS-B", options=opts)
        x = res.x
    else:        # R smooth (none or l2): Newton from 0
        x = np.zeros(d)
    x = _newton_free(problem, x, dense=dense)
    return Reference(x_star=x, F_star=problem.F(x), sum_sq_local_grads=problem.sum_sq_local_grads(x),
                     residual=_residual(problem, x))
