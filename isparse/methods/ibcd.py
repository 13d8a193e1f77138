"""IBCD: independent block coordinate descent (arXiv:1901.09437, Algorithm 1), and GD (its tau = 1 baseline).

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla f_i(x^t))_{U_i^t}, \\qquad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_i (\\nabla f_i(x^t))_{U_i^t}.

No 1/tau rescaling: the effective step along grad f is gamma * tau. Worker i sends the tau*m
blocks of grad f_i(x^t) on U_i^t; it keeps no state. With tau = 1 this is distributed gradient
descent with step gamma (``gd``). Theorem 1 bounds it (``isparse.theory.theorem1``).
"""

from __future__ import annotations

from ..theory import theorem1_bound, theorem1_stepsize
from .base import Method, strongly_convex_or_none


class IBCD(Method):
    """Algorithm 1 (IBCD). See the module docstring for the update."""

    name = "ibcd"
    stepsize = staticmethod(theorem1_stepsize)
    theorem = "Theorem 1 (IBCD)"
    codec_theory = True

    def worker_step(self, data, state, x, t, donate=False):
        U = self.sample(data.ids, t)                             # line 3: U_i^t, tau*m-nice, every hosted i
        pc, pw = self.coords_batch(U)
        g = self.local_grads_at(data, x, U, pw, pc)                 # line 4: grad f_i(x^t), only on U_i
        return self.messages(data, t, U, pw, g), state           # line 5: send (grad f_i)_{U_i}

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state               # line 7: x^{t+1} = (1/n) sum_i x_i^{t+1}

    @classmethod
    def bound(cls, ctx, method):
        return strongly_convex_or_none(ctx, method, lambda: theorem1_bound(
            gamma=method.gamma, theorem=cls.theorem, **ctx.constants()))


class GD(IBCD):
    """Distributed gradient descent: IBCD with tau = 1 (the full-communication baseline)."""

    name = "gd"
    full = True
