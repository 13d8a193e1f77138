"""Linear-model problems split across n workers (docs/algorithms.md §4): logistic regression,
least squares (ridge), and logistic regression with a non-convex penalty (for Theorem 7).

With N rows split into shards of l_i rows, worker i owns

.. math::

    f_i(x) = \\frac{n}{N} \\sum_{j \\in \\text{shard } i} \\phi(a_j^T x; b_j) + P(x),

so that f = (1/n) sum_i f_i is exactly the data set's objective (1/N) sum_j phi(a_j^T x; b_j) + P(x)
whatever the shard sizes. phi is the logistic loss log(1 + exp(-b z)) or the squared loss
(z - b)^2 / 2; P is (lambda/2)||x||^2, or the non-convex lambda sum_k x_k^2 / (1 + x_k^2).
scikit-learn's ``LogisticRegression(C=1/(lambda N), fit_intercept=False)`` minimizes N f for the
logistic loss with the l2 penalty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..errors import check_range
from ..regularizers import Zero
from .base import Problem
from .losses import LOSSES, PENALTIES
from .spectra import null_space_basis, rows_view, top_eig, top_eigs


@dataclass(frozen=True)
class GLMShard:
    """The data and local function f_i(x) = (n/N) sum_j phi(a_j^T x; b_j) + P(x) of one worker (docs/algorithms.md §4).

    Parameters
    ----------
    A : csr_matrix of shape (l_i, d)
        The worker's rows.
    b : ndarray of shape (l_i,)
        Labels (or targets for the squared loss).
    scale : float
        n / N, the weight of each local loss term.
    loss : Logistic or Squared
        phi (``isparse.problems.losses``).
    penalty : L2Penalty or NonconvexPenalty
        P (``isparse.problems.losses``).
    """

    A: sp.csr_matrix
    b: np.ndarray
    scale: float
    loss: object
    penalty: object

    @property
    def lam(self) -> float:
        """float: lambda, the weight of the penalty P."""
        return self.penalty.lam

    @property
    def l(self) -> int:
        """int: number of examples l_i on this worker."""
        return self.A.shape[0]

    def grad(self, x: np.ndarray) -> np.ndarray:
        """grad f_i(x) = (n/N) A^T phi'(A x; b) + grad P(x)."""
        return self.scale * (self.AT @ self.loss.deriv(self.A @ x, self.b)) + self.penalty.grad(x)

    @property
    def AT(self) -> sp.csc_matrix:
        """csc_matrix of shape (d, l_i): A^T, a CSC view of A's arrays made once per shard (``A.T`` builds and
        re-checks a new matrix on every call, which cost more than the product itself on small shards). Not pickled."""
        AT = self.__dict__.get("_AT")
        if AT is None:
            AT = self.A.T
            object.__setattr__(self, "_AT", AT)
        return AT

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_AT"}

    #: what the stacked data of such shards provide (``Method.traits.needs`` is checked against it)
    capabilities = ("grads", "grads_at", "example_grads_at", "minibatch_grads_at")

    @staticmethod
    def stack(shards, ids):
        """The k shards of one host, in the order of their logical worker ids ``ids``, stacked into one CSR matrix: a
        :class:`isparse.problems.glm_stack.StackedGLM` (a :class:`~isparse.problems.stacked.Stacked`), what a
        method's worker step reads."""
        from .glm_stack import StackedGLM

        return StackedGLM(shards, ids)

    def value(self, x: np.ndarray) -> float:
        """f_i(x)."""
        return self.scale * float(self.loss.value(self.A @ x, self.b).sum()) + self.penalty.value(x)

    def minibatch_grad(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The minibatch gradient (1/B) sum_{j in idx} grad f_ij(x), B = ``len(idx)``, ``idx`` local example
        indices (0 <= j < l_i).

        With f_ij = (n l_i/N) phi_j + P, so that f_i = (1/l_i) sum_j f_ij and a uniform minibatch is an unbiased
        estimate of grad f_i(x) (Algorithm 6, ISGD)."""
        Aj = self.A[idx]
        return (self.scale * self.l / len(idx)) * (Aj.T @ self.loss.deriv(Aj @ x, self.b[idx])) + self.penalty.grad(x)

    def example_grad(self, x: np.ndarray, j: int) -> np.ndarray:
        """grad f_ij(x) of the local example j (reads row j of the CSR data directly)."""
        lo, hi = self.A.indptr[j], self.A.indptr[j + 1]
        cols, vals = self.A.indices[lo:hi], self.A.data[lo:hi]
        r = float(self.loss.deriv(float(vals @ x[cols]), self.b[j]))
        g = self.penalty.grad(x)
        g[cols] += (self.scale * self.l * r) * vals
        return g

    def row_sq(self) -> np.ndarray:
        """The squared norm ||a_j||^2 of every row of the shard, shape (l_i,)."""
        return np.asarray(self.A.multiply(self.A).sum(axis=1)).ravel()

    def gradient_noise_bound(self, batch: int) -> float:
        """sigma_i^2 >= E||g_i - grad f_i(x)||^2 for all x, for a minibatch of ``batch`` examples without
        replacement: 0 when l_i <= 1 or ``batch`` >= l_i (exact gradients), infinite for the squared loss.

        The sigma^2 of ISGD's constant-step bound (docs/algorithms.md §3). For a loss with ``|phi'| <= 1`` each
        example's loss gradient has norm <= (n l_i/N)||a_j|| (the penalty terms cancel), so one draw has variance
        <= (n l_i/N)^2 max_j ||a_j||^2 and a minibatch without replacement divides it by
        batch (l_i - 1)/(l_i - batch)."""
        return noise_bound(self.l, self.scale, float(self.row_sq().max()), self.loss, batch)


def noise_bound(l: int, scale: float, row_sq_max: float, loss, batch: int) -> float:
    """:meth:`GLMShard.gradient_noise_bound` of a shard of ``l`` rows of weight ``scale`` = n/N whose largest squared
    row norm is ``row_sq_max``."""
    if l <= 1 or batch >= l:
        return 0.0
    if not loss.bounded_derivative:
        return float("inf")
    one = (scale * l) ** 2 * row_sq_max
    return one * (l - batch) / (batch * (l - 1))


#: entries a call of :func:`row_norms_sq` squares at a time (its transients: 16 bytes each, 64 MiB)
ROW_NORM_ENTRIES = 1 << 22


def row_norms_sq(A: sp.csr_matrix) -> np.ndarray:
    """||a_j||^2 of every row of the CSR matrix ``A``, shape (rows,) (inf where a square overflows), a block of whole
    rows at a time (at most :data:`ROW_NORM_ENTRIES` entries, or one row): each row's squares are summed in order as
    one call over all rows would, without its two nnz-long temporaries (1.4 GB beside a host's 1 GB partition)."""
    rows, ptr = A.shape[0], A.indptr
    out = np.zeros(rows)
    r0 = 0
    with np.errstate(over="ignore", invalid="ignore"):
        while r0 < rows:
            r1 = max(r0 + 1, int(np.searchsorted(ptr, ptr[r0] + ROW_NORM_ENTRIES, side="right")) - 1)
            r1 = min(r1, rows)
            data = A.data[ptr[r0]:ptr[r1]]
            out[r0:r1] = np.bincount(np.repeat(np.arange(r1 - r0), np.diff(ptr[r0:r1 + 1])), weights=data * data,
                                     minlength=r1 - r0)
            r0 = r1
    return out


# The constants of docs/algorithms.md §4 from per-worker numbers (l_i, lambda_max(A_i^T A_i), max_j ||a_j||^2): one
# formula each for the problem that holds its rows (GLMProblem) and the one whose hosts do (remote.RemoteGLM).
def shard_smoothness(loss, penalty, scale: float, top_eigs: np.ndarray) -> np.ndarray:
    """L_i = (n/N) c lambda_max(A_i^T A_i) + smoothness of P, shape (n,)."""
    return scale * loss.curvature * top_eigs + penalty.smoothness


def example_smoothness(loss, penalty, scale: float, l: np.ndarray, row_sq_max: np.ndarray) -> float:
    """L_example = c max_i (n l_i/N) max_j ||a_j||^2 + smoothness of P."""
    return loss.curvature * float(np.max(scale * l * row_sq_max)) + penalty.smoothness


def dissimilarity_bound(scale: float, top_eigs: np.ndarray, l: np.ndarray) -> float:
    """nu^2 of :meth:`GLMProblem.gradient_dissimilarity_bound` from G_i = (n/N) sqrt(lambda_max(A_i^T A_i) l_i)."""
    G = scale * np.sqrt(top_eigs * l)
    return float(np.mean((G + G.mean()) ** 2))


def sum_sq_rows(S, p) -> float:
    """sum_i ||S_i + p||^2 over the rows of the sparse matrix ``S`` (shape (k, d)), ``p`` a d-vector or a scalar
    (grad P(x)): each row made dense in turn, so the memory is one d-vector whatever k."""
    S = sp.csr_matrix(S)
    g = np.empty(S.shape[1])
    total = 0.0
    for i in range(S.shape[0]):
        lo, hi = S.indptr[i], S.indptr[i + 1]
        g[:] = p
        g[S.indices[lo:hi]] += S.data[lo:hi]
        total += float(g @ g)
    return total


class GLMProblem(Problem):
    """F(x) = f(x) + R(x), f a linear-model loss of a data set plus a penalty, split over n workers.

    Worker i holds f_i(x) = (n/N) sum_{j in shard i} phi(a_j^T x; b_j) + P(x), so that f = (1/n) sum_i f_i is
    the data set's objective (docs/algorithms.md §4). Capabilities (``isparse.problems.base``): ``rows`` and
    every shard computation. The constants (``L_i``, ``L``, ``L_f``, ``L_example``, ``mu``) are computed when
    first asked.

    Parameters
    ----------
    parts : list of ndarray of int
        Row indices of each worker's shard (n parts, non-empty, covering all rows).
    lam : float
        lambda > 0, the penalty weight.
    reg : Regularizer, optional
        R (``isparse.regularizers``); default R = 0.
    loss : {"logistic", "squared"}
        phi: the logistic loss (labels in {-1, +1}) or the squared loss (targets).
    penalty : {"l2", "nonconvex"}
        P: (lambda/2)||x||^2, or the non-convex penalty of Theorem 7.

    Raises
    ------
    ConfigError
        (``lam``) lam is not a number > 0.
    KeyError
        ``loss`` or ``penalty`` is not a known one (``isparse.problems.losses.LOSSES``, ``PENALTIES``).
    """

    provides = frozenset({"rows"})

    def __init__(self, data: Dataset, parts, lam: float, reg=None, loss: str = "logistic", penalty: str = "l2"):
        check_range("lam", lam, 0.0, None, low_open=True)
        self.data = data
        self.A, self.b = data.A, data.b
        self.N, self.d = data.A.shape
        self.n = len(parts)
        self.lam = float(lam)
        self.reg = reg if reg is not None else Zero()
        self.loss = LOSSES[loss]
        self.penalty = PENALTIES[penalty](self.lam)
        self.name = self.loss.name + self.penalty.suffix
        self.nnz = int(data.A.nnz)
        self.convex = self.penalty.convex
        scale = self.n / self.N
        self.parts = [np.asarray(p) for p in parts]   # row indices of each worker (data.load=on_worker rebuilds from them)
        # the rows worker after worker: one permuted copy, from which each shard is a contiguous range (no per-shard
        # fancy indexing: at n = 10^4 workers that cost seconds) and every per-shard constant is one vectorized pass
        self._order = np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.int64)
        self._ptr = np.concatenate([[0], np.cumsum([p.size for p in self.parts])]).astype(np.int64)
        self._A = data.A[self._order].tocsr()
        self._A.sort_indices()
        self._b = data.b[self._order]
        self.shards = [GLMShard(A=rows_view(self._A, lo, hi), b=self._b[lo:hi], scale=scale, loss=self.loss,
                                penalty=self.penalty) for lo, hi in zip(self._ptr[:-1], self._ptr[1:])]
        self._L_i = None

    def check_constants(self) -> None:
        """Refuse, before any work, a problem whose L, mu or kappa = L/mu would be infinite, NaN or not positive.

        Cheap (one pass over the non-zeros, no eigenvalue problem): lambda_max(A_i^T A_i) <= ||A_i||_F^2, so
        L_i <= (n/N) c ||A_i||_F^2 + smoothness(P) and L_example <= c max_i (n l_i/N) max_j ||a_j||^2 + smoothness(P)
        (c = 1/4 logistic, 1 squared); mu >= lambda for the l2 penalty (the theorems' strong convexity), none is
        needed for the non-convex one (Theorem 7). If these bounds are finite and lambda is finite and > 0, so are
        L, mu and kappa.

        Raises
        ------
        ConfigError
            (``lam``) lambda not finite.
        DataError
            The bound on L (or L_example) or on kappa overflows float64: the message names the data source, the first
            row whose squared norm is infinite (else the row of the largest squared norm; with its line when the
            source is a LIBSVM file) and lambda.
        """
        from ..data.libsvm import data_lines
        from ..errors import ConfigError, DataError

        if not np.isfinite(self.lam):
            raise ConfigError("lam", f"The 'lam' parameter must be a finite number > 0; got {self.lam!r}.")
        A, c, smooth = self.A, self.loss.curvature, self.penalty.smoothness
        row_sq = row_norms_sq(A)
        with np.errstate(over="ignore", invalid="ignore"):
            L_up = max(s.scale * c * float(row_sq[p].sum()) for s, p in zip(self.shards, self.parts)) + smooth
            L_ex = c * max(s.scale * s.l * float(row_sq[p].max(initial=0.0)) for s, p in zip(self.shards, self.parts))
            L_ex += smooth
            kappa = max(L_up, L_ex) / self.penalty.mu if self.penalty.mu > 0 else 0.0
        if np.isfinite(L_up) and np.isfinite(L_ex) and np.isfinite(kappa):
            return
        bad = np.flatnonzero(~np.isfinite(row_sq))
        row = int(bad[0]) if bad.size else int(np.argmax(row_sq))
        src = self.data.source
        line = ""
        try:
            lines = data_lines(src)
            if lines.size == self.N:      # no rows were dropped: row j is the j-th data line
                line = f" (line {int(lines[row])})"
        except OSError:
            pass
        what = (f"L <= {L_up:.3g} (L_example <= {L_ex:.3g})" if not (np.isfinite(L_up) and np.isfinite(L_ex)) else
                f"kappa = L/mu <= {max(L_up, L_ex):.3g}/{self.lam:.3g}")
        raise DataError(f"{src}: the smoothness constants of this problem overflow float64: {what} is not finite; "
                        f"row {row + 1}{line} has the squared norm {row_sq[row]:.3g}. L, mu and kappa must be finite and "
                        f"> 0: rescale the data (or raise problem.lam).")

    # -- global objective -------------------------------------------------------------
    def f(self, x: np.ndarray) -> float:
        """f(x) = (1/N) sum_j phi(a_j^T x; b_j) + P(x) (without R)."""
        return float(self.loss.value(self.A @ x, self.b).mean()) + self.penalty.value(x)

    def F(self, x: np.ndarray) -> float:
        """F(x) = f(x) + R(x)."""
        return self.f(x) + self.reg.value(x)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """grad f(x) (without R)."""
        return (self.A.T @ self.loss.deriv(self.A @ x, self.b)) / self.N + self.penalty.grad(x)

    def hess(self, x: np.ndarray) -> np.ndarray:
        """The Hessian of f, dense (small d only: the reference solve uses it up to ``DENSE_MAX_D``)."""
        w = self.loss.second(self.A @ x, self.b) / self.N
        H = (self.A.T @ sp.diags(w) @ self.A).toarray()
        H[np.diag_indices_from(H)] += self.penalty.hess_diag(x)
        return H

    def curvature(self):
        from .reference import _GLMCurvature

        return _GLMCurvature(self)

    def _local_product(self, x: np.ndarray):
        """The workers' (n/N) A_i^T phi'(A_i x) as a sparse (n, d) matrix: one product of the shard-by-row matrix of
        the residuals (row i: worker i's) with the rows, not n products."""
        r = self.loss.deriv(self._A @ x, self._b) * (self.n / self.N)
        return sp.csr_matrix((r, np.arange(r.size), self._ptr), shape=(self.n, r.size)) @ self._A

    def local_grads(self, x: np.ndarray) -> np.ndarray:
        """The n local gradients grad f_i(x) = (n/N) A_i^T phi'(A_i x) + grad P(x), dense, shape (n, d)."""
        return self._local_product(x).toarray() + self.penalty.grad(x)

    def sum_sq_local_grads(self, x: np.ndarray) -> float:
        """From the sparse product, one dense row at a time (:func:`sum_sq_rows`): O(nnz + d) memory, not n x d."""
        return sum_sq_rows(self._local_product(x), self.penalty.grad(x))

    def local_grads_max_abs(self, x: np.ndarray) -> float:
        """max_i ||grad f_i(x)||_inf, from the sparse product (never the dense (n, d) matrix of :meth:`local_grads`)."""
        S = self._local_product(x).tocsr()
        p = np.broadcast_to(self.penalty.grad(x), (self.d,))
        top = float(np.max(np.abs(S.data + p[S.indices]), initial=0.0))
        return max(top, float(np.max(np.abs(p), initial=0.0))) if S.nnz < self.n * self.d else top

    def sum_sq_example_grads(self, x: np.ndarray) -> float:
        """sum_i sum_j ||grad f_ij(x)||^2 over every example of every worker (Psi^0 of Theorem 5 at x = x*)."""
        p = self.penalty.grad(x)
        l = np.diff(self._ptr)
        r = self.loss.deriv(self._A @ x, self._b) * ((self.n / self.N) * np.repeat(l, l))
        return float(np.sum(r ** 2 * self._row_sq() + 2 * r * (self._A @ p)) + self.N * (p @ p))

    # -- constants (docs/algorithms.md §4) -----------------------------------------
    def reference_key(self, split, split_seed):
        """:func:`isparse.cache.problem_key`: the data file's stamp and shape."""
        from ..cache import problem_key

        return problem_key(self, split, split_seed)

    @property
    def L_i(self) -> np.ndarray:
        """ndarray of shape (n,): smoothness of each f_i, (n/N) c lambda_max(A_i^T A_i) + smoothness of P
        (c = 1/4 logistic, 1 squared; docs/algorithms.md §4). Computed once."""
        if self._L_i is None:
            scale = self.n / self.N
            self._L_i = shard_smoothness(self.loss, self.penalty, scale, self._top_eigs())
        return self._L_i

    def _top_eigs(self) -> np.ndarray:
        """lambda_max(A_i^T A_i) of every shard, shape (n,) (:func:`top_eigs`; computed once)."""
        if "_eigs" not in self.__dict__:
            self._eigs = top_eigs(self._A, self._ptr)
        return self._eigs

    def _row_sq(self) -> np.ndarray:
        """||a_j||^2 of every row, worker after worker, shape (N,) (computed once)."""
        if "_rsq" not in self.__dict__:
            self._rsq = row_norms_sq(self._A)
        return self._rsq

    @property
    def L(self) -> float:
        """float: L = max_i L_i (Assumption 1: one constant for all workers)."""
        return float(self.L_i.max())

    def null_space(self):
        """null(A) of the whole data matrix (:func:`~isparse.problems.spectra.null_space_basis`; for large d
        only the empty columns), computed once."""
        if "_null" not in self.__dict__:
            self._null = null_space_basis(self._A)
        return self._null

    @property
    def L_f(self) -> float:
        """float: smoothness of f = (1/n) sum_i f_i itself, c lambda_max(A^T A)/N + smoothness of P (one worker's L on
        the whole data; L_f <= mean_i L_i <= L). Computed once, when asked (``step.rule=paper`` of ISGD,
        docs/algorithms.md §5)."""
        if "_L_f" not in self.__dict__:
            self._L_f = self.loss.curvature * top_eig(self._A) / self.N + self.penalty.smoothness
        return self._L_f

    @property
    def L_example(self) -> float:
        """float: smoothness of every f_ij, max_i (n l_i/N) c max_j ||a_j||^2 + smoothness of P (the SAGA-type
        Theorems 2 and 5)."""
        return example_smoothness(self.loss, self.penalty, self.n / self.N, np.diff(self._ptr),
                                  np.maximum.reduceat(self._row_sq(), self._ptr[:-1]))

    @property
    def mu(self) -> float:
        """float: strong convexity of f, the penalty's ``mu`` (lambda for l2) plus, for a loss whose phi'' is at least
        ``min_curvature`` > 0 (squared: 1), that times lambda_min(A^T A)/N when d <= 2000; 0 for a non-convex
        penalty."""
        if not self.penalty.convex:
            return 0.0
        c = self.loss.min_curvature
        if c > 0 and self.d <= 2000:
            return c * float(np.linalg.eigvalsh((self.A.T @ self.A).toarray())[0]) / self.N + self.penalty.mu
        return self.penalty.mu

    def gradient_dissimilarity_bound(self) -> float:
        """nu^2 >= (1/n) sum_i ||grad f - grad f_i||^2 for all x, for a loss with ``|phi'| <= 1`` (Theorem 7;
        valid only for such a loss, the logistic one).

        ||grad loss_i(x)|| = (n/N)||A_i^T r|| <= (n/N) sigma_max(A_i) sqrt(l_i) =: G_i (the penalties cancel),
        so ||grad f - grad f_i|| <= G_i + (1/n) sum_k G_k."""
        return dissimilarity_bound(self.n / self.N, self._top_eigs(), np.diff(self._ptr))


class LogisticProblem(GLMProblem):
    """l2-regularized logistic regression, the problem of the paper's experiments (docs/algorithms.md §5).

    f_i(x) = (n/N) sum_{j in shard i} log(1 + exp(-b_j a_j^T x)) + (lambda/2)||x||^2, so
    L_i = (n/N) lambda_max(A_i^T A_i)/4 + lambda and mu = lambda: a :class:`GLMProblem` with ``loss="logistic"``
    and ``penalty="l2"`` (labels in {-1, +1})."""

    def __init__(self, data: Dataset, parts, lam: float, reg=None):
        super().__init__(data, parts, lam, reg, loss="logistic", penalty="l2")


#: the shard of every GLM problem
LogisticShard = GLMShard
