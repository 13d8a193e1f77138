"""IBGD: independent Bernoulli gradient descent (arXiv:1901.09437, Algorithm 3).

Each worker, independently, sends its whole gradient with probability tau and nothing otherwise:

.. math::

    x^{t+1} = x^t - \\frac{\\gamma}{n} \\sum_{i: \\theta_i^t = 1} \\nabla f_i(x^t), \\qquad \\theta_i^t \\sim \\text{Bernoulli}(\\tau).

No 1/tau rescaling (effective step gamma tau), as IBCD. Theorem 4 gives the same stepsize and bound
as Theorem 1 (``isparse.theory.theorem1``). A sent gradient is dense (d values, no block ids).
"""

from __future__ import annotations

import numpy as np

from .base import BlockMethod


class IBGD(BlockMethod):
    """Algorithm 3 (IBGD). tau is the probability that a worker sends."""

    name = "ibgd"

    def worker_step(self, i, shard, state, x, rng):
        if self.tau_m < self.blocks.m and rng.random() >= self.tau:   # theta_i^t = 0: send nothing
            return self.message(i, np.arange(0), np.zeros(0)), state
        return self.message(i, np.arange(self.blocks.m), shard.grad(x)), state

    def master_step(self, state, x, messages):
        return self.averaged_step(x, messages), state
