"""l2-regularized logistic regression split across n workers (ALGORITHMS.md section 4).

With N rows split into shards of l_i rows, worker i owns

.. math::

    f_i(x) = \\frac{n}{N} \\sum_{j \\in \\text{shard } i} \\log(1 + e^{-b_j a_j^T x}) + \\frac{\\lambda}{2}\\|x\\|^2,

so that f = (1/n) sum_i f_i is exactly the data set's objective
(1/N) sum_j log(1 + exp(-b_j a_j^T x)) + (lambda/2)||x||^2, whatever the shard sizes.
scikit-learn's ``LogisticRegression(C=1/(lambda N), fit_intercept=False)`` minimizes N f.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ..data import Dataset
from ..errors import check_range
from ..regularizers import Zero


@dataclass(frozen=True)
class LogisticShard:
    """The data and local function f_i of one worker.

    Attributes
    ----------
    A : csr_matrix of shape (l_i, d)
    b : ndarray of shape (l_i,), labels in {-1, +1}
    scale : float
        n / N, the weight of each local loss term.
    lam : float
        The l2 weight lambda.
    """

    A: sp.csr_matrix
    b: np.ndarray
    scale: float
    lam: float

    def grad(self, x: np.ndarray) -> np.ndarray:
        """Gradient of f_i at x, shape (d,)."""
        z = self.A @ x
        r = -self.b * expit(-self.b * z)
        return self.scale * (self.A.T @ r) + self.lam * x

    def value(self, x: np.ndarray) -> float:
        """f_i(x)."""
        z = self.A @ x
        return self.scale * float(np.logaddexp(0.0, -self.b * z).sum()) + 0.5 * self.lam * float(x @ x)

    @property
    def l(self) -> int:
        """Number of examples l_i on this worker."""
        return self.A.shape[0]

    def minibatch_grad(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """(1/|idx|) sum_{j in idx} grad f_ij(x), shape (d,), with f_i = (1/l_i) sum_j f_ij.

        f_ij(x) = (n l_i / N) log(1 + exp(-b_j a_j^T x)) + (lambda/2)||x||^2, so a minibatch drawn
        uniformly from the shard is an unbiased estimate of grad f_i(x).
        """
        Aj, bj = self.A[idx], self.b[idx]
        r = -bj * expit(-bj * (Aj @ x))
        return (self.scale * self.l / len(idx)) * (Aj.T @ r) + self.lam * x

    def example_grad(self, x: np.ndarray, j: int) -> np.ndarray:
        """grad f_ij(x) of one example j of this shard, shape (d,) (reads row j of the CSR data directly)."""
        lo, hi = self.A.indptr[j], self.A.indptr[j + 1]
        cols, vals = self.A.indices[lo:hi], self.A.data[lo:hi]
        bj = self.b[j]
        r = -bj * expit(-bj * float(vals @ x[cols]))
        g = self.lam * x
        g[cols] += (self.scale * self.l * r) * vals
        return g

    def gradient_noise_bound(self, batch: int) -> float:
        """sigma_i^2 >= E||g_i - grad f_i(x)||^2 for all x, for a minibatch of ``batch`` examples without replacement.

        Each example's loss gradient has norm <= (n l_i/N)||a_j|| (|sigmoid| <= 1; the lambda x terms
        cancel), so the variance of one draw is <= (n l_i/N)^2 max_j ||a_j||^2, and a minibatch without
        replacement divides it by batch (l_i - batch)/(l_i - 1).
        """
        if self.l <= 1 or batch >= self.l:
            return 0.0
        row_sq = np.asarray(self.A.multiply(self.A).sum(axis=1)).ravel()
        one = (self.scale * self.l) ** 2 * float(row_sq.max())
        return one * (self.l - batch) / (batch * (self.l - 1))


class LogisticProblem:
    """F(x) = f(x) + R(x) with f the l2-regularized logistic loss of a data set, split over n workers.

    Parameters
    ----------
    data : Dataset
        A of shape (N, d), labels b in {-1, +1}.
    parts : list of ndarray
        Row indices of each worker's shard (n parts, non-empty, covering all rows).
    lam : float
        lambda > 0, the l2 weight; mu = lambda.
    reg : regularizer, optional
        R (``isparse.regularizers``); default R = 0.
    """

    name = "logistic"

    def __init__(self, data: Dataset, parts, lam: float, reg=None):
        check_range("problem.lam", lam, 0.0, None, low_open=True)
        self.data = data
        self.A, self.b = data.A, data.b
        self.N, self.d = data.A.shape
        self.n = len(parts)
        self.lam = float(lam)
        self.reg = reg if reg is not None else Zero()
        scale = self.n / self.N
        self.shards = [LogisticShard(A=data.A[p], b=data.b[p], scale=scale, lam=self.lam) for p in parts]
        self._L_i = None

    # -- global objective -------------------------------------------------------------
    def f(self, x: np.ndarray) -> float:
        """f(x) = (1/N) sum_j log(1 + exp(-b_j a_j^T x)) + (lambda/2)||x||^2."""
        z = self.A @ x
        return float(np.logaddexp(0.0, -self.b * z).mean()) + 0.5 * self.lam * float(x @ x)

    def F(self, x: np.ndarray) -> float:
        """F(x) = f(x) + R(x)."""
        return self.f(x) + self.reg.value(x)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """Gradient of f, shape (d,)."""
        z = self.A @ x
        r = -self.b * expit(-self.b * z)
        return (self.A.T @ r) / self.N + self.lam * x

    def hess(self, x: np.ndarray) -> np.ndarray:
        """Hessian of f, dense, shape (d, d)."""
        s = expit(self.A @ x)
        w = s * (1.0 - s) / self.N
        H = (self.A.T @ sp.diags(w) @ self.A).toarray()
        H[np.diag_indices_from(H)] += self.lam
        return H

    def local_grads(self, x: np.ndarray) -> np.ndarray:
        """All local gradients, shape (n, d); row i is grad f_i(x)."""
        return np.stack([s.grad(x) for s in self.shards])

    def sum_sq_example_grads(self, x: np.ndarray) -> float:
        """sum_i sum_j ||grad f_ij(x)||^2 over every example of every worker (Psi^0 of Theorem 5 at x = x*)."""
        total = 0.0
        for s in self.shards:
            r = -s.b * expit(-s.b * (s.A @ x)) * (s.scale * s.l)      # loss-gradient weight of each example
            row_sq = np.asarray(s.A.multiply(s.A).sum(axis=1)).ravel()
            total += float(np.sum(r ** 2 * row_sq + 2 * self.lam * r * (s.A @ x)) + s.l * self.lam ** 2 * (x @ x))
        return total

    # -- constants (ALGORITHMS.md section 4) ----------------------------------------------
    @property
    def L_i(self) -> np.ndarray:
        """Smoothness constant of each f_i: (n/N) lambda_max(A_i^T A_i) / 4 + lambda; shape (n,)."""
        if self._L_i is None:
            self._L_i = np.array([s.scale * _top_eig(s.A) / 4.0 + self.lam for s in self.shards])
        return self._L_i

    @property
    def L(self) -> float:
        """L = max_i L_i (Assumption 1: one constant for all workers)."""
        return float(self.L_i.max())

    @property
    def L_example(self) -> float:
        """Smoothness of every f_ij: max_i (n l_i/N) max_j ||a_j||^2 / 4 + lambda (for SAGA-type theorems)."""
        out = 0.0
        for s in self.shards:
            row_sq = np.asarray(s.A.multiply(s.A).sum(axis=1)).ravel()
            out = max(out, s.scale * s.l * float(row_sq.max()) / 4.0)
        return out + self.lam

    @property
    def mu(self) -> float:
        """Strong convexity of f: mu = lambda."""
        return self.lam


def _top_eig(A: sp.csr_matrix) -> float:
    """lambda_max(A^T A): dense eigvalsh for d <= 2000, else the top singular value from svds."""
    if A.shape[0] == 0:
        return 0.0
    if A.shape[1] <= 2000:
        G = (A.T @ A).toarray()
        return float(np.linalg.eigvalsh(G)[-1])
    from scipy.sparse.linalg import svds

    return float(svds(A, k=1, return_singular_vectors=False)[0] ** 2)
