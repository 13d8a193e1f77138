"""ISGD: independent sparsified SGD (arXiv:1901.09437, Algorithm 6), and SGD (its tau = 1 baseline).

Worker i draws U_i (tau*m-nice) and a minibatch of ``batch`` of its examples without replacement,
and sends the tau*m blocks of the minibatch gradient g_i; the master takes

.. math::

    x^{t+1} = x^t - \\frac{\\gamma_t}{n} \\sum_i (g_i^t)_{U_i^t},

with a constant gamma_t = gamma or the decreasing gamma_t = 1/(a + c t) of Theorem 6. The master
also keeps the average x_hat^t of x^0..x^t weighted by 1/gamma_s, the point Theorem 6 bounds.
For a non-convex f (mu = 0) the stepsize and bound are Theorem 7's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..params import Interval, OneOf, param
from ..compression.sampling import EXAMPLES
from ..theory import isgd_bound, isgd_schedule, theorem1_stepsize
from ..theory.isgd import theorem7_stepsize
from ..theory.paper import sgd_effective_paper_stepsize, sgd_paper_stepsize
from .base import AlgorithmOptions, Method


@dataclass
class IsgdOptions(AlgorithmOptions):
    """``algorithm.*`` of isgd, sgd and async_isgd."""

    batch: int = param(1, Interval(int, 1, None), "minibatch size per worker (capped at the smallest shard)")
    schedule: str = param("constant", OneOf("constant", "decreasing"),
                          "constant gamma (the derived neighbourhood bound) or decreasing gamma_t = 1/(a + c t) "
                          "(Theorem 6, bound on f(x_hat) - f*)")


class IsgdMasterState(NamedTuple):
    """t : int, iterations done; x_hat : ndarray (d,), the 1/gamma-weighted average; weight : float, sum of 1/gamma_s."""

    t: int
    x_hat: np.ndarray
    weight: float


class ISGD(Method):
    """Algorithm 6 (ISGD).

    Parameters
    ----------
    batch : int
        Minibatch size per worker (>= 1; capped at the smallest shard, ``l_min``).
    schedule : tuple or None
        None for the constant gamma; (a, c) for gamma_t = 1/(a + c t).
    l_min : int
        The smallest number of examples on a worker.
    """

    name = "isgd"
    options = IsgdOptions
    needs = ("minibatch_grads_at",)
    stepsize = staticmethod(theorem1_stepsize)
    paper_stepsize = staticmethod(sgd_effective_paper_stepsize)   # takes L_f, the smoothness of f (see configure)
    paper_literal_stepsize = staticmethod(sgd_paper_stepsize)
    codec_theory = True

    def __init__(self, n, blocks, tau_m, gamma, *, batch=1, schedule=None, l_min=1, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.batch, self.schedule = min(int(batch), int(l_min)), schedule

    def stepsize_at(self, t: int) -> float:
        """gamma_t."""
        if self.schedule is None:
            return self.gamma
        a, c = self.schedule
        return 1.0 / (a + c * t)

    def minibatches(self, data, t) -> np.ndarray:
        """Each hosted worker's minibatch: ``batch`` distinct local example indices, shape (k, batch)."""
        return self.sampler.subsets(EXAMPLES, data.ids, t, data.l, self.batch)

    def worker_step(self, data, state, x, t, donate=False):
        U = self.sample(data.ids, t)
        pc, pw = self.coords_batch(U)
        g = data.minibatch_grads_at(x, self.minibatches(data, t), pw, pc)     # (g_i^t)_{U_i}
        return self.messages(data, t, U, pw, g), state

    def master_init(self, x0):
        return IsgdMasterState(t=0, x_hat=np.array(x0, dtype=float), weight=1.0 / self.stepsize_at(0))

    def master_step(self, state, x, batch, donate=False):
        x_new = self.averaged_step(x, batch, gamma=self.stepsize_at(state.t))
        t = state.t + 1
        w = 1.0 / self.stepsize_at(t)
        x_hat = state.x_hat + (w / (state.weight + w)) * (x_new - state.x_hat)
        return x_new, IsgdMasterState(t=t, x_hat=x_hat, weight=state.weight + w)

    def extra_iterates(self, state) -> dict:
        """``avg`` = x_hat^t (Theorem 6)."""
        return {"avg": state.x_hat}

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def batch_of(cls, ctx) -> int:
        return ctx.options.batch

    @classmethod
    def decreasing(cls, ctx) -> bool:
        return ctx.options.schedule == "decreasing"

    @classmethod
    def configure(cls, ctx):
        p, n, tau = ctx.problem, ctx.n, ctx.tau
        schedule = None
        if cls.decreasing(ctx):
            a, c = isgd_schedule(cls.smooth(ctx), p.mu, n, tau, **cls.omega_kw(ctx))
            schedule = (a / ctx.step_multiplier, c / ctx.step_multiplier)
            gamma = 1.0 / schedule[0]                     # gamma_0 of the decreasing schedule
        elif p.mu <= 0:                                    # non-convex: Theorem 7's stepsize
            gamma = ctx.step_multiplier * theorem7_stepsize(cls.smooth(ctx), p.mu, n, tau)
        else:
            rule = cls.stepsize_rule(ctx.step_rule)
            # step.rule=paper: gamma tau = one-worker SGD's 1/(5 L_f), L_f of f itself; else step.L's
            L = p.L_f if rule is cls.paper_stepsize else cls.smooth(ctx)
            omega = cls.omega_kw(ctx) if rule is cls.stepsize else {}     # the paper's steps are the plots' own
            gamma = ctx.step_multiplier * rule(L, p.mu, n, tau, **omega)
        method = cls(n, ctx.blocks, ctx.tau_m, gamma, **ctx.common(), batch=cls.batch_of(ctx),
                     schedule=schedule, l_min=min(s.l for s in p.shards))
        return method, cls.bound(ctx, method)

    @classmethod
    def noise(cls, ctx) -> float:
        """sigma^2 = (1/n) sum_i sigma_i^2 of the minibatch gradients."""
        return float(np.mean([s.gradient_noise_bound(cls.batch_of(ctx)) for s in ctx.problem.shards]))

    @classmethod
    def bound(cls, ctx, method):
        p = ctx.problem
        extra = dict(nu_sq=p.gradient_dissimilarity_bound(), f0_minus_low=p.F(ctx.x0)) if p.mu <= 0 else {}
        return isgd_bound(gamma=method.gamma, sigma_sq=cls.noise(ctx), decreasing=cls.decreasing(ctx),
                          **extra, **ctx.constants())


class SGD(ISGD):
    """Distributed minibatch SGD: ISGD with tau = 1 (the full-communication baseline)."""

    name = "sgd"
    full = True
