"""Peers a user would otherwise pick, in the same batched worker/master form (not from arXiv:1901.09437).

- ``shared_bcd``: parallel block coordinate descent: every worker uses the same block set U^t
  (one stream shared by all, a function of (seed, t)), x^{t+1} = x^t - gamma (grad f(x^t))_{U^t}; gamma = 1/L.
- ``diana``: DIANA with the unbiased Rand-K compressor Q(v) = (1/tau) v_U (Mishchenko, Gorbunov,
  Takac, Richtarik, arXiv:1901.09269): shifts h_i <- h_i + alpha Q(grad f_i - h_i),
  g = h_bar + (1/n) sum_i Q(grad f_i - h_i); alpha = 1/(omega + 1) with omega = 1/tau - 1 and
  gamma = 1/(L (1 + 2 omega / n)). With alpha = tau the update is ISEGA's; only gamma differs.
- ``ef21``: EF21 with Top-K blocks (Richtarik, Sokolov, Fatkhullin, arXiv:2106.05203): worker keeps
  g_i, sends c_i = TopK(grad f_i(x) - g_i) (the tau*m blocks of largest norm, a biased compressor),
  g_i <- g_i + c_i; the master steps along (1/n) sum_i g_i. gamma = min{1/(L(1 + sqrt(2 beta/theta))),
  theta/(2 mu)} with theta = 1 - sqrt(1 - tau), beta = (1 - tau)/(1 - sqrt(1 - tau)) (their Theorem 2, PL case).
  Top-K ids depend on the data: they are sent (4 B each).
No bound is logged for the peers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..errors import check_range
from ..params import Interval, Nullable, param
from ..sampling import SHARED_BLOCKS
from .base import AlgorithmOptions, Method
from .isega import ISEGA, IsegaMasterState, IsegaWorkerState


@dataclass
class DianaOptions(AlgorithmOptions):
    """``algorithm.*`` of diana."""

    alpha: Optional[float] = param(None, Nullable(Interval(float, 0.0, 1.0, low_open=True)),
                                   "the shift rate, at most 1/(omega + 1) = tau (checked once tau is known); null: tau")


def shared_bcd_stepsize(L, mu, n, tau):
    """gamma = 1/L (every block is L-smooth)."""
    return 1.0 / L


def diana_stepsize(L, mu, n, tau):
    """gamma = 1/(L(1 + 2 omega/n)), omega = 1/tau - 1 (DIANA with alpha = 1/(omega + 1))."""
    return 1.0 / (L * (1.0 + 2.0 * (1.0 / tau - 1.0) / n))


def ef21_stepsize(L, mu, n, tau):
    """gamma = min{1/(L(1 + sqrt(2 beta/theta))), theta/(2 mu)} (EF21, PL case), alpha = tau."""
    if tau >= 1.0:
        return 1.0 / L
    theta = 1.0 - math.sqrt(1.0 - tau)
    beta = (1.0 - tau) / theta
    step = 1.0 / (L * (1.0 + math.sqrt(2.0 * beta / theta)))
    return min(step, theta / (2.0 * mu)) if mu > 0 else step


class SharedBCD(Method):
    """Parallel block coordinate descent: the same tau*m blocks for every worker."""

    name = "shared_bcd"
    stepsize = staticmethod(shared_bcd_stepsize)

    def sample(self, ids, t):
        U = self.sampler.subsets(SHARED_BLOCKS, [0], t, self.blocks.m, self.tau_m)
        return np.repeat(U, len(ids), axis=0)

    def worker_step(self, data, state, x, t, donate=False):
        U = self.sample(data.ids, t)
        pc, pw = self.coords_batch(U)
        return self.messages(data, t, U, pw, self.local_grads_at(data, x, U, pw, pc)), state

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state


class DIANA(ISEGA):
    """DIANA with Rand-K (tau*m blocks, scaled by 1/tau), shift rate alpha (default 1/(omega+1) = tau)."""

    name = "diana"
    options = DianaOptions
    stepsize = staticmethod(diana_stepsize)
    paper_stepsize = None

    def __init__(self, n, blocks, tau_m, gamma, *, reg=None, alpha=None, **common):
        super().__init__(n, blocks, tau_m, gamma, reg=reg, **common)
        self.alpha = self.tau if alpha is None else float(alpha)

    @classmethod
    def check(cls, ctx):
        """DIANA's theory needs alpha <= 1/(omega + 1) = tau: checked once tau is known (before any work)."""
        if ctx.options.alpha is not None:
            check_range("algorithm.alpha", ctx.options.alpha, 0.0, ctx.tau, high_text="1/(omega+1) = tau",
                        low_open=True)
        super().check(ctx)

    @classmethod
    def options_of(cls, ctx):
        return {"reg": ctx.regularizer, "alpha": ctx.options.alpha}

    def worker_step(self, data, state, x, t, donate=False):
        U = self.sample(data.ids, t)
        pc, pw = self.coords_batch(U)
        g = self.local_grads_at(data, x, U, pw, pc)
        h = state.h if donate else state.h.copy()
        delta = g - h[pw, pc]                             # sent: (grad f_i - h_i)_U; Q = (1/tau) of it
        h[pw, pc] += (self.alpha / self.tau) * delta      # h_i += alpha Q(grad f_i - h_i)
        return self.messages(data, t, U, pw, delta), IsegaWorkerState(h)

    def master_step(self, state, x, batch, donate=False):
        S = self.aggregate(batch)
        g = state.h_bar + S / (self.n * self.tau)
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (self.alpha / (self.n * self.tau)) * S)

    worker_targets = worker_memory = None

    @classmethod
    def bound(cls, ctx, method):
        return Method.bound.__func__(cls, ctx, method)


class Ef21WorkerState(NamedTuple):
    """g : ndarray (k, d), row p: the gradient estimate g_i of hosted worker i = ids[p]."""

    g: np.ndarray


class EF21(Method):
    """EF21 with a Top-K block compressor (biased), g_i^0 = 0."""

    name = "ef21"
    needs = ("grads",)
    stepsize = staticmethod(ef21_stepsize)
    derivable_ids = False
    state_text = "the estimates g_i, n x d"

    @classmethod
    def state_bytes(cls, ctx):
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        return Ef21WorkerState(np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        diff = data.grads(x) - state.g                                            # (k, d)
        b, m = self.blocks.size, self.blocks.m
        norms = np.pad(diff ** 2, ((0, 0), (0, m * b - diff.shape[1]))).reshape(data.k, m, b).sum(axis=2)
        U = np.sort(np.argsort(-norms, axis=1, kind="stable")[:, : self.tau_m], axis=1)   # Top-K blocks by norm
        pc, pw = self.coords_batch(U)
        g = state.g if donate else state.g.copy()
        sent = diff[pw, pc]
        g[pw, pc] += sent
        return self.messages(data, t, U, pw, sent), Ef21WorkerState(g)

    def master_init(self, x0):
        return IsegaMasterState(h_bar=np.zeros_like(x0))   # h_bar = (1/n) sum_i g_i

    def master_step(self, state, x, batch, donate=False):
        g_bar = state.h_bar + self.aggregate(batch) / self.n
        return x - self.gamma * g_bar, IsegaMasterState(h_bar=g_bar)
