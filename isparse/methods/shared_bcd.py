"""Parallel block coordinate descent, ``algorithm=shared_bcd``: a peer a user would otherwise pick (not from
arXiv:1901.09437). Every worker sends the same tau*m blocks U^t (one stream shared by all, a function of (seed, t)):
x^{t+1} = x^t - gamma (grad f(x^t))_{U^t}, gamma = 1/L. No bound is logged.
"""

from __future__ import annotations

import numpy as np

from ..compression.sampling import SHARED_BLOCKS
from .base import Method, Theory


def shared_bcd_stepsize(L, mu, n, tau):
    """gamma = 1/L (every block is L-smooth); mu, n and tau are unused (the stepsize rules' common signature)."""
    return 1.0 / L


class SharedBCD(Method):
    """Parallel block coordinate descent: the same tau*m blocks U^t for every worker."""

    name = "shared_bcd"
    theory = Theory(shared_bcd_stepsize)

    def _sample(self, ids, t):
        """U^t, the one block set of round t (a function of (seed, t)), repeated for each of the workers ``ids``."""
        U = self.sampler.subsets(SHARED_BLOCKS, [0], t, self.blocks.m, self.tau_m)
        return np.repeat(U, len(ids), axis=0)

    def worker_step(self, data, state, x, t, donate=False):
        r"""Each hosted worker i sends :math:`(\nabla f_i(x^t))_{U^t}`."""
        s = self.sampled(data, t)
        return self.send(s, self.local_grads(data, x, s)), state

    def master_step(self, state, x, batch, donate=False):
        r""":math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\nabla f_i(x^t))_{U^t} = x^t - \gamma(\nabla f(x^t))_{U^t}`."""
        return self.averaged_step(x, batch), state
