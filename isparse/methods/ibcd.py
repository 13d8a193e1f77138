"""IBCD: independent block coordinate descent (arXiv:1901.09437, Algorithm 1), and GD (its tau = 1 baseline).

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla f_i(x^t))_{U_i^t}, \\qquad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_i (\\nabla f_i(x^t))_{U_i^t}.

No 1/tau rescaling: the effective step along grad f is gamma * tau. Worker i sends the tau*m
blocks of grad f_i(x^t) on U_i^t; it keeps no state. With tau = 1 this is distributed gradient
descent with step gamma (``gd``). Theorem 1 bounds it (``isparse.theory.theorem1``; docs/algorithms.md §2, §3).
"""

from __future__ import annotations

import dataclasses

from ..theory import theorem1_bound, theorem1_stepsize
from .base import Method, Theory, strongly_convex_or_none, with_constants


class Theorem1(Theory):
    """Theorem 1's stepsize and bound (with the codec's omega); ``theorem`` names the algorithm it is cited for."""

    def bound(self, ctx, method):
        """Theorem 1's bound (Theorem 4's for IBGD; docs/algorithms.md §3): E||x^t - x*||^2 <= (1 - gamma tau mu)^t
        r_0 + gamma D/(n mu) (:func:`isparse.theory.theorem1.theorem1_bound`); a NoBound when mu = 0."""
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem1_bound, ctx, gamma=method.gamma, theorem=self.theorem))


class IBCD(Method):
    """Algorithm 1 of arXiv:1901.09437 (IBCD), ``algorithm=ibcd``: independent block coordinate descent."""

    name = "ibcd"
    theory = Theorem1(theorem1_stepsize, theorem="Theorem 1 (IBCD)", codec_theory=True)

    def worker_step(self, data, state, x, t, donate=False):
        r"""Algorithm 1, lines 3-5: every hosted worker i sends :math:`(\nabla f_i(x^t))_{U_i^t}`."""
        s = self.sampled(data, t)                                  # line 3: U_i^t, tau*m-nice, every hosted i
        return self.send(s, self.local_grads(data, x, s)), state   # lines 4-5: send (grad f_i(x^t))_{U_i}

    def master_step(self, state, x, batch, donate=False):
        r"""Algorithm 1, line 7: :math:`x^{t+1} = \frac1n \sum_i x_i^{t+1} = x^t - \frac{\gamma}{n} \sum_i
        (\nabla f_i(x^t))_{U_i^t}`."""
        return self.averaged_step(x, batch), state                 # line 7: x^{t+1} = (1/n) sum_i x_i^{t+1}


class GD(IBCD):
    """Distributed gradient descent, ``algorithm=gd``: IBCD with tau = 1 (the full-communication baseline).

    x^{t+1} = x^t - (gamma/n) sum_i grad f_i(x^t) = x^t - gamma grad f(x^t); Theorem 1 at tau = 1 gives
    gamma = 1/(2L) and the rate 1 - gamma mu (docs/algorithms.md §2).
    """

    name = "gd"
    traits = dataclasses.replace(IBCD.traits, full=True)
    theory = dataclasses.replace(IBCD.theory, theorem="Theorem 1 at tau = 1 (GD)")
