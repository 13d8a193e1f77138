"""ISEGA: independent SEGA (arXiv:1901.09437, Algorithm 2).

Worker i keeps a gradient memory h_i (shape (d,)), samples U_i and sends
Delta_i = (grad f_i(x) - h_i)_{U_i}, then sets h_i <- h_i + Delta_i. The master keeps
h_bar = (1/n) sum_i h_i and forms the unbiased estimate

.. math::

    g = \\bar h + \\frac{1}{n\\tau} \\sum_i \\Delta_i, \\qquad
    x^{t+1} = \\operatorname{prox}_{\\gamma R}(x^t - \\gamma g), \\qquad
    \\bar h \\leftarrow \\bar h + \\frac1n \\sum_i \\Delta_i,

which is (1/n) sum_i g_i with g_i = h_i + (1/tau)(grad f_i(x) - h_i)_{U_i}. With a lossy codec
(``messages.codec``) Delta_i is what the master decodes, Q(Delta_i), and both the worker's h_i and h_bar move by
it (by 1/(1 + omega) of it for a random unbiased codec: ``isparse.theory.theorem3``), so they stay in step. The memories learn
grad f_i(x*), so ISEGA converges to x* without Assumption 2 (Theorem 3,
``isparse.theory.theorem3``). h_i^0 = 0. With tau = 1, g = grad f(x) and this is proximal
gradient descent with step gamma.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..theory import theorem3_bound, theorem3_stepsize
from ..theory.paper import isega_paper_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class IsegaWorkerState(NamedTuple):
    """State of the hosted workers.

    h : ndarray of shape (k, d)
        Row p: the gradient memory h_i^t of hosted worker i = ids[p].
    """

    h: np.ndarray


class IsegaMasterState(NamedTuple):
    """State of the master.

    h_bar : ndarray of shape (d,)
        (1/n) sum_i h_i^t, kept in step with the workers' memories.
    """

    h_bar: np.ndarray


class Theorem3(Theory):
    """Theorem 3's stepsize and bound (with the codec's omega: tau/(1 + omega) in the place of tau)."""

    def bound(self, ctx, method):
        return strongly_convex_or_none(ctx, method, lambda: with_constants(theorem3_bound, ctx, gamma=method.gamma))


class ISEGA(Method):
    """Algorithm 2 (ISEGA) with a proximal step for R (``self.reg``). See the module docstring for the update."""

    name = "isega"
    traits = Traits(prox=True, state_text="the memories h_i, n x d")
    theory = Theorem3(theorem3_stepsize, paper_stepsize=isega_paper_stepsize, codec_theory=True)

    @classmethod
    def state_bytes(cls, ctx):
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        return IsegaWorkerState(h=np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)                                 # U_i^t, tau*m-nice
        g = self.local_grads(data, x, s)                          # grad f_i(x^t), only on U_i
        h = state.h if donate else state.h.copy()
        delta = g - h[s.pw, s.pc]                                 # Delta_i = (grad f_i(x^t) - h_i^t)_{U_i}
        batch = self.send(s, delta)
        if self.codec.exact:
            h[s.pw, s.pc] = g                                     # h_i^{t+1} = h_i^t + Delta_i
        else:                                                     # + what the master decodes, Q(Delta_i) x rate
            h[s.pw, s.pc] += self.memory_rate * batch.values
        return batch, IsegaWorkerState(h)

    def master_init(self, x0):
        return IsegaMasterState(h_bar=np.zeros_like(x0))

    def master_step(self, state, x, batch, donate=False):
        S = self.aggregate(batch)                                 # sum_i Delta_i
        g = state.h_bar + S / (self.n * self.tau)                 # (1/n) sum_i g_i, unbiased
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (S / self.n if self.memory_rate == 1.0
                                                                   else (self.memory_rate / self.n) * S))

    # Theorem 3's Lyapunov function: the memory part sum_i ||h_i - grad f_i(x*)||^2
    @staticmethod
    def worker_targets(data, x_star):
        """grad f_i(x*) of the hosted workers, shape (k, d): what h_i learns."""
        return data.grads(x_star)

    @staticmethod
    def worker_memory(data, state, targets) -> float:
        return float(np.sum((state.h - targets) ** 2))
