"""Shared-data ISAGA (arXiv:1901.09437, Algorithm 4): SAGA on f = (1/N) sum_j psi_j with n workers
that each read the whole data set.

In iteration t the workers take n distinct examples j_1..j_n (without replacement, from one
stream that every worker and the master replay), worker i draws its own U_i and the update is

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla\\psi_{j_i}(x^t) - \\alpha_{j_i} + \\bar\\alpha)_{U_i}, \\quad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1}, \\quad (\\alpha_{j_i})_{U_i} \\leftarrow (\\nabla\\psi_{j_i}(x^t))_{U_i}.

The paper's workers share the SAGA table alpha (N x d) in memory; here the master keeps it and
worker i sends (grad psi_{j_i}(x^t))_{U_i} -- the same tau*m blocks the paper's worker sends, and
the same iterates. The master regenerates j_i from the shared stream, so no index is sent.
The table starts at 0. Theorem 2 (``isparse.theory.theorem2``) needs no Assumption 2.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .base import BlockMethod


class SharedSagaMasterState(NamedTuple):
    """alpha : ndarray (N, d), the SAGA table; alpha_bar : ndarray (d,), its mean; rng : the shared index stream."""

    alpha: np.ndarray
    alpha_bar: np.ndarray
    rng: np.random.Generator


class ISAGAShared(BlockMethod):
    """Algorithm 4 (ISAGA with data shared by all workers).

    Parameters
    ----------
    N : int
        Number of examples (>= n).
    shared_seed : int
        Seed of the stream of example indices replayed by every worker and the master.
    """

    name = "isaga_shared"
    shared_data = True   # every worker's shard is the whole data set

    def __init__(self, n, blocks, tau_m, gamma, *, N, shared_seed=0):
        super().__init__(n, blocks, tau_m, gamma)
        self.N, self.shared_seed = int(N), int(shared_seed)

    def _indices(self, rng):
        return rng.choice(self.N, size=self.n, replace=False)      # n distinct examples

    def worker_init(self, i, shard, x0):
        return np.random.default_rng(self.shared_seed)

    def worker_step(self, i, shard, state, x, rng):
        j = int(self._indices(state)[i])
        U, c = self.sample(rng)
        return self.message(i, U, shard.example_grad(x, j)[c]), state

    def master_init(self, x0):
        return SharedSagaMasterState(np.zeros((self.N, x0.size)), np.zeros_like(x0),
                                     np.random.default_rng(self.shared_seed))

    #: grad psi_j(x*) for every example, shape (N, d); set by ``isparse.setup.build`` for the Lyapunov function
    targets = None

    def master_lyapunov(self, state) -> float:
        """Psi^t = sum_j ||alpha_j - grad psi_j(x*)||^2 (Theorem 2); the table lives on the master."""
        return math.nan if self.targets is None else float(np.sum((state.alpha - self.targets) ** 2))

    def master_step(self, state, x, messages):
        js = self._indices(state.rng)
        alpha, alpha_bar = state.alpha, state.alpha_bar.copy()
        total = np.zeros_like(x)
        updates = []
        for msg in sorted(messages, key=lambda m: m.worker):
            j, c = int(js[msg.worker]), self.blocks.coords(msg.blocks)
            total[c] += msg.values - alpha[j, c] + state.alpha_bar[c]   # with the table of iteration t
            updates.append((j, c, msg.values))
        for j, c, g in updates:                                          # then (alpha_j)_{U_i} <- grad psi_j
            alpha_bar[c] += (g - alpha[j, c]) / self.N
            alpha[j, c] = g
        return x - (self.gamma / self.n) * total, SharedSagaMasterState(alpha, alpha_bar, state.rng)
