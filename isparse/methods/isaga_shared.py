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
Theorem 2 (``isparse.theory.theorem2``) needs no Assumption 2.
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
    """alpha : ndarray (N, d), the SAGA table; alpha_bar : ndarray (d,), its mean."""

    alpha: np.ndarray
    alpha_bar: np.ndarray


class SharedRows:
    """The hosted workers of a shared-data method: every one reads the same stacked data set ``whole``."""

    def __init__(self, whole, ids):
        self.whole, self.ids = whole, np.asarray(ids, dtype=np.int64)
        self.l = np.ones(self.ids.size, dtype=np.int64)   # no per-worker examples: the state lives on the master

    @property
    def k(self) -> int:
        return int(self.ids.size)


def whole(ctx):
    """psi_j = phi_j + P: the data set as one worker's problem (built once per run, kept in ``ctx.cache``)."""
    from ..problems import GLMProblem

    if "whole" not in ctx.cache:
        p = ctx.problem
        ctx.cache["whole"] = GLMProblem(ctx.data, [np.arange(ctx.data.N)], p.lam, loss=p.loss.name,
                                        penalty=p.penalty.name)
    return ctx.cache["whole"]


class Theorem2(Theory):
    """Theorem 2's stepsize and bound, L the smoothness of the psi_j (of the whole data set)."""

    def smooth(self, ctx):
        return whole(ctx).L_example

    def bound(self, ctx, method):
        w = whole(ctx)
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem2_bound, ctx, gamma=method.gamma, L_example=w.L_example, N=ctx.data.N,
            sum_sq_example_grads=w.sum_sq_example_grads(ctx.reference.x_star)))


class ISAGAShared(Method):
    """Algorithm 4 (ISAGA with data shared by all workers).

    Parameters
    ----------
    N : int
        Number of examples (>= n).
    targets : ndarray of shape (N, d), optional
        grad psi_j(x*) for every example (Theorem 2's Psi, monitored by :meth:`master_memory`).
    """

    name = "isaga_shared"
    traits = Traits(needs=("example_grads_at",),
                    state_text="the master's SAGA table and its targets grad psi_j(x*), 2 x N x d")
    theory = Theorem2(theorem2_stepsize, paper_stepsize=saga_paper_stepsize, smoothness="L_example",
                      codec_why="the master's table stores the decoded gradients, so the codec's noise on "
                                "grad psi_j(x*) != 0 stays in it (isparse/theory/theorem2.py)")

    @classmethod
    def state_bytes(cls, ctx):
        return 8 * 2 * ctx.data.N * ctx.problem.d if ctx.data is not None else 0

    def __init__(self, n, blocks, tau_m, gamma, *, N, targets=None, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.N, self.targets = int(N), targets

    @classmethod
    def run_inputs(cls, ctx):
        """N, and the targets grad psi_j(x*) of every example."""
        w = whole(ctx)
        targets = np.stack([w.shards[0].example_grad(ctx.reference.x_star, j) for j in range(ctx.data.N)])
        return {"N": ctx.data.N, "targets": targets}

    # every worker's shard is the whole data set: a host is sent it once
    def host_shards(self, shards, ids):
        return [shards[0]]

    def host_data(self, shards, ids):
        return SharedRows(type(shards[0]).stack(shards[:1], [0]), ids)

    def indices(self, t) -> np.ndarray:
        """j_1..j_n of iteration t: n distinct examples, in draw order, shape (n,) (the last t is remembered)."""
        memo = self.__dict__.get("_indices")
        if memo is None or memo[0] != (self.seed, int(t)):
            memo = ((self.seed, int(t)), self.sampler.subsets(SHARED_EXAMPLES, [0], t, self.N, self.n, ordered=True)[0])
            self._indices = memo
        return memo[1]

    def worker_step(self, data, state, x, t, donate=False):
        j = self.indices(t)[data.ids]
        s = self.sampled(data, t)
        g = data.whole.rows_grads_at(x, j[:, None], np.ones(data.k), s.pw, s.pc)    # (grad psi_{j_i}(x^t))_{U_i}
        return self.send(s, g), state

    def master_init(self, x0):
        return SharedSagaMasterState(np.zeros((self.N, x0.size)), np.zeros_like(x0))

    def master_memory(self, state) -> float:
        """Psi^t = sum_j ||alpha_j - grad psi_j(x*)||^2 (Theorem 2); the table lives on the master."""
        return float(np.sum((state.alpha - self.targets) ** 2))

    def master_step(self, state, x, batch, donate=False):
        js = self.indices(batch.t)
        c = self.coords_of(batch)
        rows = js[np.repeat(batch.workers, batch.counts)]
        alpha = state.alpha if donate else state.alpha.copy()
        old = alpha[rows, c]                                               # the table of iteration t
        total = np.bincount(c, weights=batch.values - old + state.alpha_bar[c], minlength=self.blocks.d)
        alpha[rows, c] = batch.values                                      # then (alpha_j)_{U_i} <- grad psi_j
        alpha_bar = state.alpha_bar + np.bincount(c, weights=(batch.values - old) / self.N, minlength=self.blocks.d)
        return x - (self.gamma / self.n) * total, SharedSagaMasterState(alpha, alpha_bar)

    @classmethod
    def check(cls, ctx):
        if ctx.data is None:
            raise ConfigError("data", f"The 'data' parameter must be a data set for algorithm={cls.name} "
                                      f"(the workers share its examples); got {ctx.problem.name!r}.")
        super().check(ctx)

    @classmethod
    def shards(cls, ctx):
        """What every worker holds: the whole data set."""
        w = whole(ctx)
        return [w.shards[0]] * ctx.n, [w.parts[0]] * ctx.n
