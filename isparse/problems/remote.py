"""A linear-model problem whose rows stay on the machines that hold them: :class:`RemoteGLM` and its :class:`RowsHost`.

The objective is :class:`~isparse.problems.glm.GLMProblem`'s, F(x) = (1/N) sum_j phi(a_j^T x; b_j) + P(x), worker i
holding f_i = (n/N) sum_{j in shard i} phi + P (docs/algorithms.md §4). Here no one process has the rows: each host
(a machine, e.g. a Dask worker holding partitions of a Dask Array) keeps its logical workers' shards in a
:class:`RowsHost`, and the master asks the hosts for what the theory and the metrics need, as numbers and d-vectors:

- once: per worker l_i, lambda_max(A_i^T A_i) (hence L_i, L, Assumption 1), max_j ||a_j||^2 (L_example) and
  sum_j ||a_j||^2 (the overflow check);
- per evaluation: the sum of the losses (F), A^T phi'(A x) (grad F), each worker's local gradient (grad f_i(x*) of
  Theorems 1 and 3), and, for the Newton-CG solve of x*, the Hessian's diagonal and products H v
  (:mod:`isparse.problems.reference`).

A host computes each worker's numbers from that worker's rows in the order :class:`GLMProblem` does, so L_i (hence
the stepsize) and the largest local gradient entry at x^0 (a natural codec's window) are those of the in-process
problem on the same rows, bit for bit, and so are the iterates. Sums over all rows (F, grad F) are reduced host by
host and may differ from the in-process problem's in the last bits (they only measure).

The hosts are reached through a ``hosts`` object with ``map(name, *args) -> list`` (one result per host, in host
order): :class:`isparse.data.dask_collection.ActorHosts` calls Dask actors; a list of :class:`RowsHost` in the same
process (:class:`LocalHosts`) serves tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..regularizers import Zero
from .base import Problem
from .glm import (GLMShard, dissimilarity_bound, example_smoothness, noise_bound, row_norms_sq, sum_sq_rows,
                  shard_smoothness)
from .glm_stack import stack_rows
from .spectra import top_eigs

#: the largest d for which the squared loss's strong convexity (lambda_min(A^T A)/N) and L_f are taken from the summed
#: d x d Gram matrices of the hosts (as GLMProblem does up to this d); above it mu is the penalty's and L_f comes from
#: Lanczos over the hosts' products A^T A v
GRAM_MAX_D = 2000


class RowsHost:
    """The shards of one host's logical workers and what the master asks of them (the module docstring).

    Parameters
    ----------
    shards : list of GLMShard
        The host's workers' shards, in the order of their logical ids; they share ``scale``, ``loss`` and
        ``penalty``.
    """

    def __init__(self, shards):
        self.shards = list(shards)
        s0 = self.shards[0]
        self.scale, self.loss, self.penalty = s0.scale, s0.loss, s0.penalty
        self.A = stack_rows([s.A for s in self.shards])
        self.b = np.concatenate([s.b for s in self.shards])
        self.ptr = np.concatenate([[0], np.cumsum([s.A.shape[0] for s in self.shards])]).astype(np.int64)
        self.row_sq = row_norms_sq(self.A)
        self._w = None

    def summary(self) -> dict:
        """Per worker (arrays of shape (k,)): ``l``, ``nnz``, ``top_eig`` = lambda_max(A_i^T A_i), ``row_sq_max`` and
        ``row_sq_sum`` (of ||a_j||^2); ``d``."""
        starts = self.ptr[:-1]
        return {"l": np.diff(self.ptr), "nnz": np.array([s.A.nnz for s in self.shards], np.int64),
                "top_eig": top_eigs(self.A, self.ptr), "row_sq_max": np.maximum.reduceat(self.row_sq, starts),
                "row_sq_sum": np.add.reduceat(self.row_sq, starts), "d": self.A.shape[1]}

    def loss_sum(self, x) -> float:
        """sum_j phi(a_j^T x; b_j) over the host's rows."""
        return float(self.loss.value(self.A @ x, self.b).sum())

    def loss_grad(self, x) -> np.ndarray:
        """sum_j phi'(a_j^T x; b_j) a_j over the host's rows, shape (d,)."""
        return self.A.T @ self.loss.deriv(self.A @ x, self.b)

    def _local(self, x):
        r = self.loss.deriv(self.A @ x, self.b) * self.scale
        M = sp.csr_matrix((r, np.arange(r.size), self.ptr), shape=(len(self.shards), r.size))
        return M @ self.A

    def local_grads(self, x) -> np.ndarray:
        """(n/N) A_i^T phi'(A_i x) of every hosted worker, dense, shape (k, d) (without grad P)."""
        return self._local(x).toarray()

    def sum_sq_local_grads(self, x, p) -> float:
        """sum over hosted workers of ||(n/N) A_i^T phi'(A_i x) + p||^2, ``p`` = grad P(x) (one d-vector at a time)."""
        return sum_sq_rows(self._local(x), p)

    def local_grads_max_abs(self, x, p) -> float:
        """max over hosted workers of ||(n/N) A_i^T phi'(A_i x) + p||_inf, ``p`` = grad P(x) (as
        :meth:`GLMProblem.local_grads_max_abs`)."""
        S = self._local(x).tocsr()
        p = np.broadcast_to(p, (self.A.shape[1],))
        top = float(np.max(np.abs(S.data + p[S.indices]), initial=0.0))
        return max(top, float(np.max(np.abs(p), initial=0.0))) if S.nnz < S.shape[0] * S.shape[1] else top

    def sum_sq_example_grads(self, x, p) -> float:
        """sum over hosted examples of ||grad f_ij(x)||^2 - ||p||^2, ``p`` = grad P(x) (the master adds N ||p||^2)."""
        l = np.diff(self.ptr)
        r = self.loss.deriv(self.A @ x, self.b) * (self.scale * np.repeat(l, l))
        return float(np.sum(r ** 2 * self.row_sq + 2 * r * (self.A @ p)))

    def curvature_at(self, x) -> np.ndarray:
        """Keep w = phi''(A x; b) of the host's rows for :meth:`hess_product`; returns sum_j w_j a_j^2, shape (d,)
        (the host's part of the Hessian's diagonal times N)."""
        self._w = self.loss.second(self.A @ x, self.b)
        A2 = sp.csr_matrix((self.A.data ** 2, self.A.indices, self.A.indptr), shape=self.A.shape)
        return np.asarray(A2.T @ self._w).ravel()

    def hess_product(self, v) -> np.ndarray:
        """A^T (w * (A v)), w from the last :meth:`curvature_at`, shape (d,)."""
        return self.A.T @ (self._w * (self.A @ v))

    def gram(self) -> np.ndarray:
        """A^T A of the host's rows, dense, shape (d, d) (only asked for d <= :data:`GRAM_MAX_D`)."""
        return (self.A.T @ self.A).toarray()

    def gram_product(self, v) -> np.ndarray:
        """A^T (A v), shape (d,)."""
        return self.A.T @ (self.A @ v)


class LocalHosts:
    """``hosts`` for :class:`RemoteGLM` in this process: a list of :class:`RowsHost` called in order."""

    def __init__(self, hosts):
        self.hosts = list(hosts)

    def map(self, name, *args) -> list:
        """``RowsHost.<name>(*args)`` on every host in turn; the results in host order."""
        return [getattr(h, name)(*args) for h in self.hosts]


@dataclass(frozen=True)
class RemoteShard:
    """What the master knows of worker i's shard, which stays on its host: l_i, its weight n/N, its loss and penalty,
    and max_j ||a_j||^2. Its stacked data are made on the host (``GLMShard.stack``); ``stack`` here refuses."""

    l: int
    scale: float
    loss: object
    penalty: object
    row_sq_max: float

    capabilities = GLMShard.capabilities

    def gradient_noise_bound(self, batch: int) -> float:
        """:meth:`GLMShard.gradient_noise_bound` of the shard on its host."""
        return noise_bound(self.l, self.scale, self.row_sq_max, self.loss, batch)

    @staticmethod
    def stack(shards, ids):
        """Refused (a RuntimeError): the stacked data are made on the host, from its GLMShards."""
        raise RuntimeError("the rows of this problem stay on the hosts that hold them: run it on their Dask cluster "
                           "(isparse.engines.dask.DaskPool with the rows' source), not in-process")


def _host_sum(parts: list) -> np.ndarray:
    """The hosts' d-vectors summed in host order, in place into the first (the bits of np.sum(axis=0), without its
    (hosts, d) stack: a d-vector less per host on the client)."""
    out = parts[0] if parts[0].flags.writeable else parts[0].copy()
    for part in parts[1:]:
        out += part
    return out


class _HostCurvature:
    """The Hessian of f over the hosts, matrix-free (the ``curvature`` of :func:`reference_solve`'s Newton-CG):
    ``at(x)`` gives (v -> H v, diag H)."""

    def __init__(self, problem):
        self.problem = problem

    def at(self, x):
        p = self.problem
        pd = p.penalty.hess_diag(x)
        if pd.size and np.all(pd == pd.flat[0]):   # lam I: a number, not a d-vector (the same bits)
            pd = pd.flat[0]
        diag = _host_sum(p.hosts.map("curvature_at", x))
        diag /= p.N
        diag += pd

        def hv(v):
            out = _host_sum(p.hosts.map("hess_product", v))
            out /= p.N
            out += pd * v
            return out

        return hv, diag


class RemoteGLM(Problem):
    """:class:`GLMProblem`'s objective on rows that stay on their hosts (the module docstring).

    Parameters
    ----------
    hosts
        ``map(name, *args) -> list``: calls :class:`RowsHost` ``name`` on every host, results in host order.
    parts : list of range or ndarray of int
        The global row indices of each logical worker (for the record; the rows themselves stay on the hosts).
    N : int
        The rows in all.
    lam, loss, penalty
        As :class:`GLMProblem`'s.
    source : str
        Where the rows are (logged as the data set's source).
    fingerprint : dict, optional
        What identifies the rows (e.g. their files' names, sizes and times; :meth:`reference_key`); None: the
        reference solve is not cached.
    ids : list of lists of int, optional
        The logical workers of each host, in host order (each ascending); default: contiguous, host after host. A
        host's per-worker results are given in this order and put back in the order of the workers.

    Raises
    ------
    ConfigError
        (``lam``) lam is not a number > 0.
    """

    provides = frozenset()   # no "rows": the shared-data methods, which need every row on every worker, are refused
    #: no dense Hessian: the reference solve takes the matrix-free path (:meth:`curvature`)
    hess = None

    def __init__(self, hosts, parts, N: int, lam: float, loss: str = "logistic", penalty: str = "l2",
                 source: str = "remote rows", fingerprint: dict | None = None, ids=None):
        from ..errors import check_range
        from .losses import LOSSES, PENALTIES

        check_range("lam", lam, 0.0, None, low_open=True)
        self.hosts = hosts
        self.parts = list(parts)
        self.N, self.n, self.lam = int(N), len(self.parts), float(lam)
        self.reg = Zero()
        self.loss, self.penalty = LOSSES[loss], PENALTIES[penalty](self.lam)
        self.name = self.loss.name + self.penalty.suffix
        self.convex = self.penalty.convex
        self.source, self.fingerprint = source, fingerprint
        summaries = hosts.map("summary")
        self.d = int(summaries[0]["d"])
        #: the logical worker of each position of the hosts' concatenated per-worker results
        self._order = None if ids is None else np.concatenate([np.asarray(i, dtype=np.int64) for i in ids])
        cat = {k: self._by_worker(np.concatenate([s[k] for s in summaries]))
               for k in ("l", "nnz", "top_eig", "row_sq_max", "row_sq_sum")}
        self._l, self._top, self._row_sq_max, self._row_sq_sum = cat["l"], cat["top_eig"], cat["row_sq_max"], \
            cat["row_sq_sum"]
        self.nnz = int(cat["nnz"].sum())
        scale = self.n / self.N
        self.shards = [RemoteShard(int(l), scale, self.loss, self.penalty, float(r))
                       for l, r in zip(self._l, self._row_sq_max)]
        self.L_i = shard_smoothness(self.loss, self.penalty, scale, self._top)

    def describe(self) -> str:
        return f"{self.name} on {self.source}"

    def reference_key(self, split, split_seed):
        """From :attr:`fingerprint` (None without one), the model and each worker's rows."""
        if self.fingerprint is None:
            return None
        from ..cache import REFERENCE_LAYOUT, digest

        return digest({"fingerprint": self.fingerprint, "lam": self.lam, "name": self.name, "n": self.n,
                       "layout": REFERENCE_LAYOUT,
                       "rows": [[int(p[0]), int(p[-1]), len(p)] for p in self.parts]})

    def check_constants(self) -> None:
        """:meth:`GLMProblem.check_constants` from the hosts' per-worker sums: a DataError when the bound on L, L_example
        or kappa overflows float64 (naming the worker, since no row is at hand here)."""
        from ..errors import ConfigError, DataError

        if not np.isfinite(self.lam):
            raise ConfigError("lam", f"The 'lam' parameter must be a finite number > 0; got {self.lam!r}.")
        c, smooth, scale = self.loss.curvature, self.penalty.smoothness, self.n / self.N
        with np.errstate(over="ignore", invalid="ignore"):
            up = scale * c * self._row_sq_sum + smooth
            ex = c * scale * self._l * self._row_sq_max + smooth
            kappa = max(up.max(), ex.max()) / self.penalty.mu if self.penalty.mu > 0 else 0.0
        if np.all(np.isfinite(up)) and np.all(np.isfinite(ex)) and np.isfinite(kappa):
            return
        i = int(np.argmax(~np.isfinite(up) | ~np.isfinite(ex))) if not np.all(np.isfinite(up) & np.isfinite(ex)) \
            else int(np.argmax(up))
        raise DataError(f"{self.source}: the smoothness constants of this problem overflow float64 on worker {i} "
                        f"(rows from {int(self.parts[i][0])}; its largest squared row norm is "
                        f"{self._row_sq_max[i]:.3g}). L, mu and kappa must be finite and > 0: rescale the data (or "
                        f"raise the penalty).")

    # -- the objective, reduced over the hosts ------------------------------------------------------
    def f(self, x) -> float:
        """f(x) = (1/N) sum_j phi(a_j^T x; b_j) + P(x)."""
        return float(np.sum(self.hosts.map("loss_sum", x))) / self.N + self.penalty.value(x)

    def F(self, x) -> float:
        """F(x) = f(x) (R = 0)."""
        return self.f(x)

    def grad(self, x) -> np.ndarray:
        """grad f(x), shape (d,)."""
        return _host_sum(self.hosts.map("loss_grad", x)) / self.N + self.penalty.grad(x)

    def _by_worker(self, per_position: np.ndarray) -> np.ndarray:
        """The hosts' concatenated per-worker results (first axis) in the order of the logical workers."""
        if self._order is None:
            return per_position
        out = np.empty_like(per_position)
        out[self._order] = per_position
        return out

    def local_grads(self, x) -> np.ndarray:
        """grad f_i(x) of the n workers, shape (n, d): n d-vectors from the hosts."""
        return self._by_worker(np.concatenate(self.hosts.map("local_grads", x))) + self.penalty.grad(x)

    def sum_sq_local_grads(self, x) -> float:
        """One number per host (the hosts' workers' gradients never reach the client)."""
        return float(sum(self.hosts.map("sum_sq_local_grads", x, self.penalty.grad(x))))

    def local_grads_max_abs(self, x) -> float:
        """max_i ||grad f_i(x)||_inf (:meth:`GLMProblem.local_grads_max_abs`), one number per host."""
        return max(self.hosts.map("local_grads_max_abs", x, self.penalty.grad(x)))

    def sum_sq_example_grads(self, x) -> float:
        """:meth:`GLMProblem.sum_sq_example_grads`, reduced over the hosts."""
        p = self.penalty.grad(x)
        return float(np.sum(self.hosts.map("sum_sq_example_grads", x, p))) + self.N * float(p @ p)

    def curvature(self):
        return _HostCurvature(self)

    # -- constants ---------------------------------------------------------------------------------
    @property
    def L(self) -> float:
        """float: max_i L_i."""
        return float(self.L_i.max())

    @property
    def L_example(self) -> float:
        """float: :attr:`GLMProblem.L_example` from the hosts' per-worker max_j ||a_j||^2."""
        return example_smoothness(self.loss, self.penalty, self.n / self.N, self._l, self._row_sq_max)

    def _gram_eig(self, which: int) -> float:
        """An eigenvalue of A^T A (0: the smallest, -1: the largest) from the hosts' summed Gram matrices
        (d <= :data:`GRAM_MAX_D`), once each."""
        if "_gram_eigs" not in self.__dict__:
            self._gram_eigs = np.linalg.eigvalsh(np.sum(self.hosts.map("gram"), axis=0))
        return float(self._gram_eigs[which])

    @property
    def mu(self) -> float:
        """float: :attr:`GLMProblem.mu` (lambda_min(A^T A) from the summed Gram matrices for d <= GRAM_MAX_D)."""
        if not self.penalty.convex:
            return 0.0
        c = self.loss.min_curvature
        if c > 0 and self.d <= GRAM_MAX_D:
            return c * self._gram_eig(0) / self.N + self.penalty.mu
        return self.penalty.mu

    @property
    def L_f(self) -> float:
        """float: :attr:`GLMProblem.L_f`, lambda_max(A^T A) from the Gram matrices (d <= GRAM_MAX_D) or from Lanczos
        over the hosts' products A^T A v."""
        if "_L_f" not in self.__dict__:
            if self.d <= GRAM_MAX_D:
                top = self._gram_eig(-1)
            else:
                from scipy.sparse.linalg import LinearOperator, eigsh

                op = LinearOperator((self.d, self.d), dtype=float,
                                    matvec=lambda v: np.sum(self.hosts.map("gram_product", np.ravel(v)), axis=0))
                top = float(eigsh(op, k=1, which="LA", return_eigenvectors=False,
                                  v0=np.ones(self.d))[0])
            self._L_f = self.loss.curvature * top / self.N + self.penalty.smoothness
        return self._L_f

    def gradient_dissimilarity_bound(self) -> float:
        """:meth:`GLMProblem.gradient_dissimilarity_bound` from the hosts' lambda_max(A_i^T A_i) and l_i."""
        return dissimilarity_bound(self.n / self.N, self._top, self._l)
