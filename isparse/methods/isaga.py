"""Distributed ISAGA (arXiv:1901.09437, Algorithm 5): SAGA on each worker's own examples, sparsified.

Worker i keeps a SAGA table alpha_ij (l_i x d) and its mean alpha_bar_i. In each iteration it draws
U_i (tau*m-nice), then one example j uniformly from its l_i examples, and sends

.. math::

    (\\nabla f_{ij}(x^t) - \\alpha_{ij} + \\bar\\alpha_i)_{U_i}, \\qquad
    \\alpha_{ij} \\leftarrow \\alpha_{ij} + (\\nabla f_{ij}(x^t) - \\alpha_{ij})_{U_i};

the master takes x^{t+1} = x^t - (gamma/n) sum_i of the messages (no 1/tau rescaling). The table
starts at 0. Theorem 5 (``isparse.theory.theorem5``) needs Assumption 2; without it the method
stalls at a neighbourhood. With tau = 1 and n = 1 this is SAGA.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .base import BlockMethod


class IsagaWorkerState(NamedTuple):
    """alpha : ndarray (l_i, d), the SAGA table; alpha_bar : ndarray (d,), its mean over the l_i rows."""

    alpha: np.ndarray
    alpha_bar: np.ndarray


class ISAGA(BlockMethod):
    """Algorithm 5 (distributed ISAGA). See the module docstring for the update."""

    name = "isaga"

    def worker_init(self, i, shard, x0):
        return IsagaWorkerState(alpha=np.zeros((shard.l, x0.size)), alpha_bar=np.zeros_like(x0))

    def worker_step(self, i, shard, state, x, rng):
        U, c = self.sample(rng)                            # U_i^t
        j = int(rng.integers(shard.l))                     # j ~ uniform over the l_i local examples
        g = shard.example_grad(x, j)[c]                    # (grad f_ij(x^t))_{U_i}
        alpha, alpha_bar = state.alpha, state.alpha_bar    # in place (l_i x d): the host owns the table and
                                                           # copies it in snapshots
        sent = g - alpha[j, c] + alpha_bar[c]
        alpha_bar[c] += (g - alpha[j, c]) / shard.l        # keep the mean in step with the table
        alpha[j, c] = g
        return self.message(i, U, sent), IsagaWorkerState(alpha, alpha_bar)

    def lyapunov_target(self, shard, x_star):
        """grad f_ij(x*) for every local example j, shape (l_i, d): what the table learns."""
        return np.stack([shard.example_grad(x_star, j) for j in range(shard.l)])

    def lyapunov_term(self, state, target) -> float:
        """sum_j ||alpha_ij - grad f_ij(x*)||^2, worker i's part of Psi in Theorem 5."""
        return float(np.sum((state.alpha - target) ** 2))

    def master_step(self, state, x, messages):
        return self.averaged_step(x, messages), state
