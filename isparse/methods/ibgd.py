"""IBGD: independent Bernoulli gradient descent (arXiv:1901.09437, Algorithm 3).

Each worker, independently, sends its whole gradient with probability tau and nothing otherwise:

.. math::

    x^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_{i: \\theta_i^t = 1} \\nabla f_i(x^t), \\qquad \\theta_i^t \\sim \\text{Bernoulli}(\\tau).

No 1/tau rescaling (effective step gamma tau), as IBCD. Theorem 4 gives the same stepsize and bound as Theorem 1
(``isparse.theory.theorem1``; docs/algorithms.md §2, §3). A sent gradient is dense (d values, no block ids); the
coins theta_i^t are drawn from (seed, i, t), so the master knows who sent.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..compression.sampling import COINS
from .base import Traits
from .ibcd import IBCD


class IBGD(IBCD):
    """Algorithm 3 of arXiv:1901.09437 (IBGD), ``algorithm=ibgd``: tau is the probability that a worker sends."""

    name = "ibgd"
    traits = Traits(needs=("grads",))
    theory = dataclasses.replace(IBCD.theory, theorem="Theorem 4 (IBGD; the rate of Theorem 1)")

    def senders(self, ids, t) -> np.ndarray:
        """The coins theta_i^t ~ Bernoulli(tau) of Algorithm 3 of the workers ``ids``, a function of (seed, i, t):
        True, the worker sends its whole gradient (all True at tau = 1)."""
        if self.tau_m == self.blocks.m:
            return np.ones(len(ids), bool)
        return self.sampler.coins(COINS, ids, t, self.tau)

    def worker_step(self, data, state, x, t, donate=False):
        r"""Algorithm 3: worker i sends its whole :math:`\nabla f_i(x^t)` (d values, no ids) if
        :math:`\theta_i^t = 1`, nothing otherwise."""
        send = np.flatnonzero(self.senders(data.ids, t))
        G = data.grads(x, send)                                  # grad f_i(x^t) of the workers with theta_i^t = 1
        counts = np.zeros(data.k, np.int32)
        counts[send] = self.blocks.d
        return self._encode(data.ids, t, counts, G.ravel()), state

    def __init__(self, n, blocks, tau_m, gamma, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.values_per_message = blocks.d      # a sender sends its whole gradient

    @classmethod
    def _message_values(cls, ctx) -> int:
        return ctx.problem.d

    def _coords_of(self, batch):
        """0..d-1 once per sender (the coins recomputed from (seed, i, t))."""
        send = self.senders(batch.workers, batch.t)
        return np.tile(np.arange(self.blocks.d), int(send.sum()))
