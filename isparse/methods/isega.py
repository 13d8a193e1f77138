"""ISEGA: independent SEGA (arXiv:1901.09437, Algorithm 2).

Worker i keeps a gradient memory h_i (shape (d,)), samples U_i and sends
Delta_i = (grad f_i(x) - h_i)_{U_i}, then sets h_i <- h_i + Delta_i. The master keeps
h_bar = (1/n) sum_i h_i and forms the unbiased estimate

.. math::

    g = \\bar h + \\frac{1}{n\\tau} \\sum_i \\Delta_i, \\qquad
    x^{t+1} = \\operatorname{prox}_{\\gamma R}(x^t - \\gamma g), \\qquad
    \\bar h \\leftarrow \\bar h + \\frac1n \\sum_i \\Delta_i,

which is (1/n) sum_i g_i with g_i = h_i + (1/tau)(grad f_i(x) - h_i)_{U_i}. The memories learn
grad f_i(x*), so ISEGA converges to x* without Assumption 2 (Theorem 3,
``isparse.theory.theorem3``). h_i^0 = 0. With tau = 1, g = grad f(x) and this is proximal
gradient descent with step gamma.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..regularizers import Zero
from .base import BlockMethod


class IsegaWorkerState(NamedTuple):
    """State of worker i.

    h : ndarray of shape (d,)
        The gradient memory h_i^t.
    """

    h: np.ndarray


class IsegaMasterState(NamedTuple):
    """State of the master.

    h_bar : ndarray of shape (d,)
        (1/n) sum_i h_i^t, kept in step with the workers' memories.
    """

    h_bar: np.ndarray


class ISEGA(BlockMethod):
    """Algorithm 2 (ISEGA) with a proximal step for R. See the module docstring for the update.

    Parameters
    ----------
    reg : regularizer, optional
        R with ``prox(v, step)``; default R = 0.
    """

    name = "isega"

    def __init__(self, n, blocks, tau_m, gamma, reg=None):
        super().__init__(n, blocks, tau_m, gamma)
        self.reg = reg if reg is not None else Zero()

    def worker_init(self, i, shard, x0):
        return IsegaWorkerState(h=np.zeros_like(x0))

    def worker_step(self, i, shard, state, x, rng):
        U, coords = self.sample(rng)                      # U_i^t, tau*m-nice
        g = self.local_grad(shard, x, coords)             # grad f_i(x^t), only on U_i
        h = state.h                                       # updated in place: the host owns it (and copies it
        delta = g - h[coords]                             # in snapshots); (grad f_i(x^t) - h_i^t)_{U_i}
        h[coords] = g                                     # h_i^{t+1} = h_i^t + Delta_i
        return self.message(i, U, delta), IsegaWorkerState(h)

    def lyapunov_target(self, shard, x_star):
        """grad f_i(x*), what h_i learns."""
        return shard.grad(x_star)

    def lyapunov_term(self, state, target) -> float:
        """||h_i - grad f_i(x*)||^2, worker i's part of Theorem 3's Lyapunov function."""
        return float(np.sum((state.h - target) ** 2))

    def master_init(self, x0):
        return IsegaMasterState(h_bar=np.zeros_like(x0))

    def master_step(self, state, x, messages):
        S = self.aggregate(messages)                      # sum_i Delta_i
        g = state.h_bar + S / (self.n * self.tau)         # (1/n) sum_i g_i, unbiased
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + S / self.n)
