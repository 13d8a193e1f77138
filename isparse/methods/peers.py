"""Peers a user would otherwise pick, in the same worker/master form (not from arXiv:1901.09437).

- ``shared_bcd``: parallel block coordinate descent: every worker uses the same block set U^t
  (one shared stream), x^{t+1} = x^t - gamma (grad f(x^t))_{U^t}; gamma = 1/L.
- ``diana``: DIANA with the unbiased Rand-K compressor Q(v) = (1/tau) v_U (Mishchenko, Gorbunov,
  Takac, Richtarik, arXiv:1901.09269): shifts h_i <- h_i + alpha Q(grad f_i - h_i),
  g = h_bar + (1/n) sum_i Q(grad f_i - h_i); alpha = 1/(omega + 1) with omega = 1/tau - 1 and
  gamma = 1/(L (1 + 2 omega / n)). With alpha = tau the update is ISEGA's; only gamma differs.
- ``ef21``: EF21 with Top-K blocks (Richtarik, Sokolov, Fatkhullin, arXiv:2106.05203): worker keeps
  g_i, sends c_i = TopK(grad f_i(x) - g_i) (the tau*m blocks of largest norm, a biased compressor),
  g_i <- g_i + c_i; the master steps along (1/n) sum_i g_i. gamma = min{1/(L(1 + sqrt(2 beta/theta))),
  theta/(2 mu)} with theta = 1 - sqrt(1 - tau), beta = (1 - tau)/(1 - sqrt(1 - tau)) (their Theorem 2, PL case).
No bound is logged for the peers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..blocks import sample_blocks
from .base import BlockMethod
from .isega import ISEGA, IsegaMasterState


class SharedBCD(BlockMethod):
    """Parallel block coordinate descent: the same tau*m blocks for every worker.

    Parameters
    ----------
    shared_seed : int
        Seed of the block stream every worker replays.
    """

    name = "shared_bcd"

    def __init__(self, n, blocks, tau_m, gamma, shared_seed=0):
        super().__init__(n, blocks, tau_m, gamma)
        self.shared_seed = int(shared_seed)

    def worker_init(self, i, shard, x0):
        return np.random.default_rng(self.shared_seed)   # the same stream on every worker

    def worker_step(self, i, shard, state, x, rng):
        U = sample_blocks(state, self.blocks.m, self.tau_m)
        return self.message(i, U, shard.grad(x)[self.blocks.coords(U)]), state

    def master_step(self, state, x, messages):
        return self.averaged_step(x, messages), state


class DIANA(ISEGA):
    """DIANA with Rand-K (tau*m blocks, scaled by 1/tau), shift rate alpha (default 1/(omega+1) = tau)."""

    name = "diana"

    def __init__(self, n, blocks, tau_m, gamma, reg=None, alpha=None):
        super().__init__(n, blocks, tau_m, gamma, reg=reg)
        from ..errors import check_range

        # DIANA's theory needs alpha <= 1/(omega + 1) = tau
        self.alpha = self.tau if alpha is None else float(check_range("algorithm.alpha", alpha, 0.0, self.tau,
                                                                      high_text="1/(omega+1) = tau", low_open=True))

    def worker_step(self, i, shard, state, x, rng):
        g = shard.grad(x)
        U, c = self.sample(rng)
        delta = g[c] - state.h[c]                         # sent: (grad f_i - h_i)_U; Q = (1/tau) of it
        h = state.h.copy()
        h[c] += (self.alpha / self.tau) * delta           # h_i += alpha Q(grad f_i - h_i)
        return self.message(i, U, delta), type(state)(h)

    def master_step(self, state, x, messages):
        S = self.aggregate(messages)
        g = state.h_bar + S / (self.n * self.tau)
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (self.alpha / (self.n * self.tau)) * S)


def diana_stepsize(L, mu, n, tau):
    """gamma = 1/(L(1 + 2 omega/n)), omega = 1/tau - 1 (DIANA with alpha = 1/(omega + 1))."""
    return 1.0 / (L * (1.0 + 2.0 * (1.0 / tau - 1.0) / n))


class Ef21WorkerState(NamedTuple):
    """g : ndarray (d,), the worker's gradient estimate g_i."""

    g: np.ndarray


class EF21(BlockMethod):
    """EF21 with a Top-K block compressor (biased), g_i^0 = 0."""

    name = "ef21"

    def worker_init(self, i, shard, x0):
        return Ef21WorkerState(np.zeros_like(x0))

    def worker_step(self, i, shard, state, x, rng):
        diff = shard.grad(x) - state.g
        norms = np.bincount(np.arange(diff.size) // self.blocks.size, weights=diff ** 2, minlength=self.blocks.m)
        U = np.sort(np.argsort(-norms, kind="stable")[: self.tau_m])    # Top-K blocks by norm
        c = self.blocks.coords(U)
        g = state.g.copy()
        g[c] += diff[c]
        return self.message(i, U, diff[c]), Ef21WorkerState(g)

    def master_init(self, x0):
        return IsegaMasterState(h_bar=np.zeros_like(x0))   # h_bar = (1/n) sum_i g_i

    def master_step(self, state, x, messages):
        g_bar = state.h_bar + self.aggregate(messages) / self.n
        return x - self.gamma * g_bar, IsegaMasterState(h_bar=g_bar)


def ef21_stepsize(L, mu, n, tau):
    """gamma = min{1/(L(1 + sqrt(2 beta/theta))), theta/(2 mu)} (EF21, PL case), alpha = tau."""
    if tau >= 1.0:
        return 1.0 / L
    theta = 1.0 - math.sqrt(1.0 - tau)
    beta = (1.0 - tau) / theta
    step = 1.0 / (L * (1.0 + math.sqrt(2.0 * beta / theta)))
    return min(step, theta / (2.0 * mu)) if mu > 0 else step


def shared_bcd_stepsize(L, mu, n, tau):
    """gamma = 1/L (every block is L-smooth)."""
    return 1.0 / L
