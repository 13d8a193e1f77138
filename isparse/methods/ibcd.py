"""IBCD: independent block coordinate descent (arXiv:1901.09437, Algorithm 1).

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla f_i(x^t))_{U_i^t}, \\qquad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_i (\\nabla f_i(x^t))_{U_i^t}.

No 1/tau rescaling: the effective step along grad f is gamma * tau. Worker i sends the tau*m
blocks of grad f_i(x^t) on U_i^t; it keeps no state. With tau = 1 this is distributed gradient
descent with step gamma. Theorem 1 bounds it (``isparse.theory.theorem1``).
"""

from __future__ import annotations


from .base import BlockMethod


class IBCD(BlockMethod):
    """Algorithm 1 (IBCD). See the module docstring for the update."""

    name = "ibcd"

    def worker_step(self, i, shard, state, x, rng):
        U, coords = self.sample(rng)                      # line 3: U_i^t, tau*m-nice
        g = self.local_grad(shard, x, coords)             # line 4: grad f_i(x^t), only on U_i
        return self.message(i, U, g), state               # line 5: send (grad f_i)_{U_i}

    def master_step(self, state, x, messages):
        return self.averaged_step(x, messages), state     # line 7: x^{t+1} = (1/n) sum_i x_i^{t+1}
