"""ISGD: independent sparsified SGD (arXiv:1901.09437, Algorithm 6).

Worker i draws U_i (tau*m-nice), then a minibatch of ``batch`` of its examples without
replacement, and sends the tau*m blocks of the minibatch gradient g_i; the master takes

.. math::

    x^{t+1} = x^t - \\frac{\\gamma_t}{n} \\sum_i (g_i^t)_{U_i^t},

with a constant gamma_t = gamma or the decreasing gamma_t = 1/(a + c t) of Theorem 6. The master
also keeps the average x_hat^t of x^0..x^t weighted by 1/gamma_s, the point Theorem 6 bounds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .base import BlockMethod


class IsgdMasterState(NamedTuple):
    """t : int, iterations done; x_hat : ndarray (d,), the 1/gamma-weighted average; weight : float, sum of 1/gamma_s."""

    t: int
    x_hat: np.ndarray
    weight: float


class ISGD(BlockMethod):
    """Algorithm 6 (ISGD).

    Parameters
    ----------
    batch : int
        Minibatch size per worker (>= 1; capped at l_i).
    schedule : tuple or None
        None for the constant gamma; (a, c) for gamma_t = 1/(a + c t).
    """

    name = "isgd"

    def __init__(self, n, blocks, tau_m, gamma, batch=1, schedule=None):
        super().__init__(n, blocks, tau_m, gamma)
        self.batch, self.schedule = int(batch), schedule

    def stepsize(self, t: int) -> float:
        """gamma_t."""
        if self.schedule is None:
            return self.gamma
        a, c = self.schedule
        return 1.0 / (a + c * t)

    def worker_step(self, i, shard, state, x, rng):
        U, c = self.sample(rng)
        idx = rng.choice(shard.l, size=min(self.batch, shard.l), replace=False)
        return self.message(i, U, shard.minibatch_grad(x, idx)[c]), state

    def master_init(self, x0):
        w = 1.0 / self.stepsize(0)
        return IsgdMasterState(t=0, x_hat=np.array(x0, dtype=float), weight=w)

    def master_step(self, state, x, messages):
        x_new = self.averaged_step(x, messages, gamma=self.stepsize(state.t))
        t = state.t + 1
        w = 1.0 / self.stepsize(t)
        x_hat = state.x_hat + (w / (state.weight + w)) * (x_new - state.x_hat)
        return x_new, IsgdMasterState(t=t, x_hat=x_hat, weight=state.weight + w)

    def extra_iterates(self, state) -> dict:
        """Points beside x^t whose suboptimality is logged: ``avg`` = x_hat^t (Theorem 6)."""
        return {"avg": state.x_hat}
