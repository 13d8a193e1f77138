"""ISEGA: independent SEGA (arXiv:1901.09437, Algorithm 2), with a proximal step for R.

Worker i keeps a gradient memory h_i (h_i^0 = 0), samples U_i and sends Delta_i = (grad f_i(x) - h_i)_{U_i}, then
sets h_i <- h_i + Delta_i. The master keeps h_bar = (1/n) sum_i h_i and forms the unbiased estimate

.. math::

    g = \\bar h + \\frac{1}{n\\tau} \\sum_i \\Delta_i, \\qquad
    x^{t+1} = \\operatorname{prox}_{\\gamma R}(x^t - \\gamma g), \\qquad
    \\bar h \\leftarrow \\bar h + \\frac1n \\sum_i \\Delta_i,

which is (1/n) sum_i g_i with g_i = h_i + (1/tau)(grad f_i(x) - h_i)_{U_i}. With a lossy codec
(``messages.codec``) Delta_i is what the master decodes, Q(Delta_i), and both the worker's h_i and h_bar move by
it (by ``memory_rate`` = 1/(1 + omega) of it for a random unbiased codec: ``isparse.theory.theorem3``), so they stay
in step. The memories learn grad f_i(x*), so ISEGA converges to x* without Assumption 2 (Theorem 3,
``isparse.theory.theorem3``; docs/algorithms.md §2, §3, §7). With tau = 1, g = grad f(x) and this is proximal
gradient descent with step gamma.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..theory import theorem3_bound, theorem3_stepsize
from ..theory.paper import isega_paper_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class IsegaWorkerState(NamedTuple):
    """ISEGA's state of the hosted workers (Algorithm 2)."""

    h: np.ndarray   #: (k, d): row p is the memory h_i^t of hosted worker i = ids[p]


class IsegaMasterState(NamedTuple):
    """ISEGA's state of the master (Algorithm 2; also DIANA's, and EF21's with h_bar = (1/n) sum_i g_i)."""

    h_bar: np.ndarray   #: (d,): (1/n) sum_i h_i^t, kept in step with the workers' memories


class Theorem3(Theory):
    """Theorem 3's stepsize and bound (with the codec's omega: tau/(1 + omega) in the place of tau)."""

    def bound(self, ctx, method):
        """E||x^t - x*||^2 <= E Phi^t <= (1 - gamma mu)^t Phi^0 (:func:`isparse.theory.theorem3.theorem3_bound`;
        at tau/(1 + omega) with a codec: docs/algorithms.md §3, §7); a NoBound when mu = 0."""
        return strongly_convex_or_none(ctx, method, lambda: with_constants(theorem3_bound, ctx, gamma=method.gamma))


class ISEGA(Method):
    """ISEGA, ``algorithm=isega``: Algorithm 2 with a proximal step for R (the update: the module docstring)."""

    name = "isega"
    traits = Traits(prox=True, state_text="the memories h_i, n x d")
    theory = Theorem3(theorem3_stepsize, paper_stepsize=isega_paper_stepsize, codec_theory=True)

    @classmethod
    def _state_bytes(cls, ctx):
        """The memories h_i: 8 n d bytes."""
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        """h_i^0 = 0."""
        return IsegaWorkerState(h=np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        r"""Each hosted worker i sends :math:`\Delta_i = (\nabla f_i(x^t) - h_i^t)_{U_i^t}`, then
        :math:`h_i^{t+1} = h_i^t + \Delta_i` (the decoded Delta_i times ``memory_rate`` with a lossy codec)."""
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
        """h_bar^0 = (1/n) sum_i h_i^0 = 0."""
        return IsegaMasterState(h_bar=np.zeros_like(x0))

    def master_step(self, state, x, batch, donate=False):
        r""":math:`g = \bar h + \frac{1}{n\tau}\sum_i \Delta_i`,
        :math:`x^{t+1} = \operatorname{prox}_{\gamma R}(x^t - \gamma g)`,
        :math:`\bar h \leftarrow \bar h + \frac1n \sum_i \Delta_i` (times ``memory_rate`` with a lossy codec)."""
        S = self.aggregate(batch)                                 # sum_i Delta_i (a fresh array)
        g = S / (self.n * self.tau)
        g += state.h_bar                                          # (1/n) sum_i g_i, unbiased
        g *= self.gamma
        x_new = self.reg.prox(np.subtract(x, g, out=g), self.gamma)   # in place: two d-vectors, not five
        if self.memory_rate == 1.0:
            S /= self.n
        else:
            S *= self.memory_rate / self.n
        S += state.h_bar
        return x_new, IsegaMasterState(h_bar=S)

    # Theorem 3's Lyapunov function: the memory part sum_i ||h_i - grad f_i(x*)||^2
    @staticmethod
    def _worker_targets(data, x_star):
        """grad f_i(x*) of the hosted workers, shape (k, d): what h_i learns."""
        return data.grads(x_star)

    @staticmethod
    def _worker_memory(data, state, targets) -> float:
        """sum_i ||h_i - grad f_i(x*)||^2 over the hosted workers (``targets``: :meth:`_worker_targets`)."""
        return float(np.sum((state.h - targets) ** 2))
