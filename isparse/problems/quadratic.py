"""The paper's synthetic quadratic with interpolation (arXiv:1901.09437, problem (17)).

.. math::

    f_i(x) = \\tfrac12 x^T M_i x, \\quad
    M_i = v v^T + (I - v v^T) \\frac{A_i A_i^T}{\\lambda_{\\max}(A_i A_i^T)} (I - v v^T),

v = v'/||v'||, v' in R^d and A_i in R^{d x o} standard normal. Every f_i is minimized at x* = 0,
so grad f_i(x*) = 0 (Assumption 2) and f* = 0; L = max_i lambda_max(M_i) = 1 and
mu = lambda_min((1/n) sum_i M_i), positive when n o >= d - 1 (computed, not assumed).
Each worker holds one "example" (l_i = 1), so stochastic methods see exact local gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, check_range
from ..regularizers import Zero
from .base import Problem
from .reference import Reference


@dataclass(frozen=True)
class QuadraticShard:
    """f_i(x) = x^T M x / 2 of one worker (problem (17)); one "example" (l_i = 1).

    Parameters
    ----------
    M : ndarray of shape (d, d)
        M_i, symmetric positive semi-definite with lambda_max(M_i) = 1.
    """

    M: np.ndarray

    l = 1

    def grad(self, x):
        """grad f_i(x) = M x."""
        return self.M @ x

    def value(self, x):
        """f_i(x) = x^T M x / 2."""
        return 0.5 * float(x @ (self.M @ x))

    def minibatch_grad(self, x, idx):
        """M x, exact whatever ``idx`` (the worker's only example)."""
        return self.M @ x

    def example_grad(self, x, j):
        """M x, whatever ``j`` (the worker's only example)."""
        return self.M @ x

    def gradient_noise_bound(self, batch):
        """sigma_i^2 of a minibatch: 0, the local gradients are exact."""
        return 0.0

    #: what the stacked data of such shards provide (``Method.traits.needs`` is checked against it)
    capabilities = ("grads", "grads_at", "example_grads_at", "minibatch_grads_at")

    @staticmethod
    def stack(shards, ids) -> "StackedQuadratic":
        """The k shards of one host, in the order of their logical worker ids ``ids``, stacked (a
        :class:`~isparse.problems.stacked.Stacked`, what a method's worker step reads)."""
        return StackedQuadratic(shards, ids)


class StackedQuadratic:
    """f_p(x) = x^T M_p x / 2 for the k hosted workers; every worker has one "example" (l_p = 1). It has every member
    of :class:`~isparse.problems.stacked.Stacked`.

    Attributes
    ----------
    M : ndarray of shape (k, d, d)
        The stacked M_p.
    row_ptr : ndarray of shape (k + 1,)
        Worker p owns "row" p.
    """

    capabilities = ("grads", "grads_at", "example_grads_at", "minibatch_grads_at")

    def __init__(self, shards, ids):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.M = np.stack([s.M for s in shards])
        self.d = self.M.shape[1]
        self.l = np.ones(len(shards), dtype=np.int64)
        self.row_ptr = np.arange(len(shards) + 1)

    @property
    def k(self) -> int:
        """int: the number k of hosted workers."""
        return int(self.ids.size)

    # Every row's product is an elementwise product summed along the row (numpy reduces each row on its own),
    # not a BLAS matrix-vector product, whose blocking makes a row's bits depend on how many rows are stacked:
    # a worker's numbers must not depend on which other workers share its host.
    def grads(self, x, which=None):
        """M_p x, shape (w, d), for the hosted worker positions ``which`` (0..k-1; default all k)."""
        M = self.M if which is None else self.M[np.asarray(which, dtype=np.intp)]
        return (M * x).sum(axis=2)

    def grads_at(self, x, pw, pc):
        """(M_p x)[c] for the P pairs (p, c): hosted worker ``pw`` (0..k-1), coordinate ``pc``."""
        return (self.M[pw, pc, :] * x).sum(axis=1)

    def grads_on_blocks(self, x, U, blocks, pairs=None):
        """(M_p x) on the coordinates of each hosted worker's sorted block ids ``U``, in
        ``blocks.coords_batch(U)`` order (``pairs``: that result, when the caller already has it)."""
        pc, pw = blocks.coords_batch(U) if pairs is None else pairs
        return self.grads_at(x, pw, pc)

    def example_grads_at(self, x, rows, pw, pc):
        """:meth:`grads_at`, whatever ``rows`` (each worker's only example)."""
        return self.grads_at(x, pw, pc)

    def minibatch_grads_at(self, x, batch, pw, pc):
        """:meth:`grads_at`, whatever ``batch`` (the local gradients are exact)."""
        return self.grads_at(x, pw, pc)

    def example_grads(self, x):
        """:meth:`grads`, shape (k, d) (one example per worker)."""
        return self.grads(x)


class QuadraticProblem(Problem):
    """Problem (17) of arXiv:1901.09437 for n workers (docs/algorithms.md §4).

    Capabilities: ``exact_reference``, ``strong_growth`` and every shard computation. L = 1 and
    mu = lambda_min(M) are computed at construction.

    Parameters
    ----------
    o : int
        Columns of each A_i (>= 1); d >= 2.
    seed : int
        Seed of v', the A_i and the start x^0 (a standard normal vector: x^0 = 0 would be x*).

    Raises
    ------
    ConfigError
        (``d``, ``o``, ``n``: each names its argument) d < 2, o < 1, n < 1, or mu = 0 (n o < d - 1).
    """

    name = "quadratic"
    provides = frozenset({"exact_reference", "strong_growth"})

    def __init__(self, d: int, o: int, n: int, seed: int = 0):
        d = check_range("d", d, 2, None, integer=True)
        o = check_range("o", o, 1, None, integer=True)
        n = check_range("n", n, 1, None, integer=True)
        rng = np.random.default_rng(seed)
        v = rng.normal(size=d)
        v /= np.linalg.norm(v)
        P = np.eye(d) - np.outer(v, v)
        mats = []
        for _ in range(n):
            A = rng.normal(size=(d, o))
            G = A @ A.T
            mats.append(np.outer(v, v) + P @ (G / np.linalg.eigvalsh(G)[-1]) @ P)
        self.d, self.n, self.N = d, n, n
        self.reg = Zero()
        self.shards = [QuadraticShard(M) for M in mats]
        self.M = sum(mats) / n
        self._x0 = rng.normal(size=d)
        eig = np.linalg.eigvalsh(self.M)
        if eig[0] <= 1e-12:
            raise ConfigError("o", f"The 'o' parameter times 'n' must be at least d - 1 = {d - 1} so that mu > 0; "
                                   f"got o = {o}, n = {n}.")
        self.mu = float(eig[0])
        self.L_i = np.array([np.linalg.eigvalsh(M)[-1] for M in mats])
        self.L = float(self.L_i.max())
        self.L_example = self.L
        self.L_f = float(eig[-1])

    def start(self) -> np.ndarray:
        """x^0: a standard normal vector from the problem's seed (x* = 0 would make the run trivial), a
        copy of the same vector at every call."""
        return self._x0.copy()

    def f(self, x):
        """f(x) = x^T M x / 2, M = (1/n) sum_i M_i (also F: R = 0)."""
        return 0.5 * float(x @ (self.M @ x))

    F = f

    def grad(self, x):
        """grad f(x) = M x."""
        return self.M @ x

    def hess(self, x):
        """M, whatever x: the problem's own array (not a copy)."""
        return self.M

    def local_grads(self, x):
        """The n local gradients M_i x, shape (n, d)."""
        return np.stack([s.grad(x) for s in self.shards])

    def sum_sq_example_grads(self, x):
        """sum_i ||M_i x||^2, the sum over every example (one per worker; Psi^0 of Theorem 5 at x = x*)."""
        return float(sum(np.sum(s.grad(x) ** 2) for s in self.shards))

    def strong_growth_constant(self) -> float:
        """rho_tilde = max_x (1/n) sum_i ||M_i x||^2 / ||M x||^2, IASGD's strong-growth constant (Theorem 8):
        the top generalized eigenvalue of ((1/n) sum_i M_i^2, M^2) (docs/algorithms.md §3)."""
        from scipy.linalg import eigh

        S = sum(s.M @ s.M for s in self.shards) / self.n
        return float(eigh(S, self.M @ self.M, eigvals_only=True)[-1])

    def reference(self) -> Reference:
        """x* = 0, F* = 0, grad f_i(x*) = 0 (Assumption 2 holds), residual 0: known in closed form."""
        return Reference(x_star=np.zeros(self.d), F_star=0.0, sum_sq_local_grads=0.0, residual=0.0)
