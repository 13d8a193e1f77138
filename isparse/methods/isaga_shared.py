"""Shared-data ISAGA (arXiv:1901.09437, Algorithm 4): SAGA on f = (1/N) sum_j psi_j with n workers
that each read the whole data set.

In iteration t the workers take n distinct examples j_1..j_n (without replacement, drawn from the
stream every worker and the master share: a function of (seed, t)), worker i draws its own U_i and

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla\\psi_{j_i}(x^t) - \\alpha_{j_i} + \\bar\\alpha)_{U_i}, \\quad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1}, \\quad (\\alpha_{j_i})_{U_i} \\leftarrow (\\nabla\\psi_{j_i}(x^t))_{U_i}.

The paper's workers share the SAGA table alpha (N x d) in memory; here the master keeps it and
worker i sends (grad psi_{j_i}(x^t))_{U_i} -- the same tau*m blocks the paper's worker sends, and
the same iterates. The master recomputes j_i, so no index is sent. The table starts at 0.
Theorem 2 (``isparse.theory.theorem2``) needs no Assumption 2 (docs/algorithms.md §2, §3).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..compression.sampling import SHARED_EXAMPLES
from ..theory import theorem2_bound, theorem2_stepsize
from ..theory.paper import saga_paper_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class SharedSagaMasterState(NamedTuple):
    """Shared-data ISAGA's state of the master (Algorithm 4: the table the paper's workers share)."""

    alpha: np.ndarray       #: (N, d): the SAGA table, row j is alpha_j
    alpha_bar: np.ndarray   #: (d,): its mean (1/N) sum_j alpha_j


class SharedRows:
    """The hosted workers of a shared-data method: every one reads the same stacked data set ``whole``."""

    def __init__(self, whole, ids):
        self.whole, self.ids = whole, np.asarray(ids, dtype=np.int64)
        self.l = np.ones(self.ids.size, dtype=np.int64)   # no per-worker examples: the state lives on the master

    @property
    def k(self) -> int:
        """The number k of hosted workers."""
        return int(self.ids.size)


def whole(ctx):
    """psi_j = phi_j + P: the data set as one worker's problem, a GLMProblem of one shard holding all N examples
    (built once per run, kept in ``ctx.cache``)."""
    from ..problems import GLMProblem

    if "whole" not in ctx.cache:
        p = ctx.problem
        ctx.cache["whole"] = GLMProblem(ctx.data, [np.arange(ctx.data.N)], p.lam, loss=p.loss.name,
                                        penalty=p.penalty.name)
    return ctx.cache["whole"]


class Theorem2(Theory):
    """Theorem 2's stepsize and bound, L the smoothness of the psi_j (of the whole data set)."""

    def smooth(self, ctx):
        """The L of Theorem 2's rule: L_example of the psi_j, the whole data set's examples (:func:`whole`)."""
        return whole(ctx).L_example

    def bound(self, ctx, method):
        """E[r_t + c gamma^2 Psi^t] <= (1 - rho)^t (r_0 + c gamma^2 Psi^0), L of the psi_j, N examples
        (:func:`isparse.theory.theorem2.theorem2_bound`; docs/algorithms.md §3); a NoBound when mu = 0 or the stepsize
        leaves no contraction."""
        w = whole(ctx)
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem2_bound, ctx, gamma=method.gamma, L_example=w.L_example, N=ctx.data.N,
            sum_sq_example_grads=w.sum_sq_example_grads(ctx.reference.x_star)))


class ISAGAShared(Method):
    """Algorithm 4 of arXiv:1901.09437 (ISAGA with data shared by all workers), ``algorithm=isaga_shared``.

    Parameters
    ----------
    N : int
        Number of examples (>= n).
    targets : ndarray of shape (N, d), optional
        grad psi_j(x*) for every example (Theorem 2's Psi, monitored by :meth:`_master_memory`).
    """

    name = "isaga_shared"
    traits = Traits(needs=("example_grads_at",), master_sums=False,
                    state_text="the master's SAGA table and its targets grad psi_j(x*), 2 x N x d")
    theory = Theorem2(theorem2_stepsize, paper_stepsize=saga_paper_stepsize, smoothness="L_example",
                      codec_why="the master's table stores the decoded gradients, so the codec's noise on "
                                "grad psi_j(x*) != 0 stays in it (isparse/theory/theorem2.py)")

    @classmethod
    def _state_bytes(cls, ctx):
        """The master's table and its targets: 8 x 2 N d bytes (0 without a data set: :meth:`_check` refuses it)."""
        return 8 * 2 * ctx.data.N * ctx.problem.d if ctx.data is not None else 0

    def __init__(self, n, blocks, tau_m, gamma, *, N, targets=None, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.N, self.targets = int(N), targets

    @classmethod
    def _run_inputs(cls, ctx):
        """``N``, and the ``targets`` grad psi_j(x*) of every example, shape (N, d) (for Theorem 2's Psi)."""
        w = whole(ctx)
        targets = np.stack([w.shards[0].example_grad(ctx.reference.x_star, j) for j in range(ctx.data.N)])
        return {"N": ctx.data.N, "targets": targets}

    def _host_shards(self, shards, ids):
        """The whole data set, once: every worker's shard is the same object (:meth:`_shards`)."""
        return [shards[0]]

    def _host_data(self, shards, ids):
        """:class:`SharedRows` over the one stacked data set."""
        return SharedRows(type(shards[0]).stack(shards[:1], [0]), ids)

    def indices(self, t) -> np.ndarray:
        """j_1..j_n of round t: n distinct examples, in draw order (Algorithm 4), a function of (seed, t), so the
        master recomputes them (the last t is remembered)."""
        memo = self.__dict__.get("_indices")
        if memo is None or memo[0] != (self.seed, int(t)):
            memo = ((self.seed, int(t)), self.sampler.subsets(SHARED_EXAMPLES, [0], t, self.N, self.n, ordered=True)[0])
            self._indices = memo
        return memo[1]

    def worker_step(self, data, state, x, t, donate=False):
        r"""Worker i sends :math:`(\nabla\psi_{j_i}(x^t))_{U_i^t}`, j_i its example of round t (:meth:`indices`); the
        master, which keeps the table, forms the paper's difference (:meth:`master_step`)."""
        j = self.indices(t)[data.ids]
        s = self.sampled(data, t)
        g = data.whole.rows_grads_at(x, j[:, None], np.ones(data.k), s.pw, s.pc)    # (grad psi_{j_i}(x^t))_{U_i}
        return self.send(s, g), state

    def master_init(self, x0):
        """alpha_j^0 = 0 for every example, and its mean 0."""
        return SharedSagaMasterState(np.zeros((self.N, x0.size)), np.zeros_like(x0))

    def _master_memory(self, state) -> float:
        """Psi^t = sum_j ||alpha_j - grad psi_j(x*)||^2, the memory part of Theorem 2's Lyapunov function (the table
        lives on the master)."""
        return float(np.sum((state.alpha - self.targets) ** 2))

    def master_step(self, state, x, batch, donate=False):
        r""":math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\nabla\psi_{j_i}(x^t) - \alpha_{j_i} + \bar\alpha)_{U_i^t}`,
        then :math:`(\alpha_{j_i})_{U_i} \leftarrow (\nabla\psi_{j_i}(x^t))_{U_i}` (the decoded values)."""
        js = self.indices(batch.t)
        c = self._coords_of(batch)
        rows = js[np.repeat(batch.workers, batch.counts)]
        alpha = state.alpha if donate else state.alpha.copy()
        old = alpha[rows, c]                                               # the table of iteration t
        total = np.bincount(c, weights=batch.values - old + state.alpha_bar[c], minlength=self.blocks.d)
        alpha[rows, c] = batch.values                                      # then (alpha_j)_{U_i} <- grad psi_j
        alpha_bar = state.alpha_bar + np.bincount(c, weights=(batch.values - old) / self.N, minlength=self.blocks.d)
        return x - (self.gamma / self.n) * total, SharedSagaMasterState(alpha, alpha_bar)

    @classmethod
    def _check(cls, ctx):
        """Also: the run must read a data set (a ConfigError naming ``data``, e.g. for ``data=quadratic``)."""
        if ctx.data is None:
            raise ConfigError("data", f"The 'data' parameter must be a data set for algorithm={cls.name} "
                                      f"(the workers share its examples); got {ctx.problem.name!r}.")
        super()._check(ctx)

    @classmethod
    def _shards(cls, ctx):
        """The one shard of the whole data set (psi_j = phi_j + P, :func:`whole`) and all its rows, n times each."""
        w = whole(ctx)
        return [w.shards[0]] * ctx.n, [w.parts[0]] * ctx.n
