"""IBCD: independent block coordinate descent (arXiv:1901.09437, Algorithm 1), and GD (its tau = 1 baseline).

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla f_i(x^t))_{U_i^t}, \\qquad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_i (\\nabla f_i(x^t))_{U_i^t}.

No 1/tau rescaling: the effective step along grad f is gamma * tau. Worker i sends the tau*m
blocks of grad f_i(x^t) on U_i^t; it keeps no state. With tau = 1 this is distributed gradient
descent with step gamma (``gd``). Theorem 1 bounds it (``isparse.theory.theorem1``).
"""

from __future__ import annotations

import dataclasses

from ..theory import theorem1_bound, theorem1_stepsize
from .base import Method, Theory, strongly_convex_or_none, with_constants


class Theorem1(Theory):
    """Theorem 1's stepsize and bound (with the codec's omega); ``theorem`` names the algorithm it is cited for."""

    def bound(self, ctx, method):
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem1_bound, ctx, gamma=method.gamma, theorem=self.theorem))


class IBCD(Method):
    """Algorithm 1 (IBCD). See the module docstring for the update."""

    name = "ibcd"
    theory = Theorem1(theorem1_stepsize, theorem="Theorem 1 (IBCD)", codec_theory=True)

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)                                  # line 3: U_i^t, tau*m-nice, every hosted i
        return self.send(s, self.local_grads(data, x, s)), state   # lines 4-5: send (grad f_i(x^t))_{U_i}

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state                 # line 7: x^{t+1} = (1/n) sum_i x_i^{t+1}


class GD(IBCD):
    """Distributed gradient descent: IBCD with tau = 1 (the full-communication baseline)."""

    name = "gd"
    traits = dataclasses.replace(IBCD.traits, full=True)
