"""IASGD: accelerated ISGD (arXiv:1901.09437, Algorithm 7), the accelerated step of Vaswani, Bach and
Schmidt (arXiv:1810.07288, Theorem 1, strongly convex case) driven by the sparsified estimate q.

The workers compute at the broadcast point zeta_k and send (g_i)_{U_i} (the ISGD worker step); the
master forms q = (1/(n tau)) sum_i (g_i)_{U_i}, an unbiased estimate of grad f(zeta_k), and takes

.. math::

    w_{k+1} = \\zeta_k - \\eta q, \\quad
    v_{k+1} = \\beta v_k + (1 - \\beta)\\zeta_k - \\gamma\\eta\\, q, \\quad
    \\zeta_{k+1} = \\alpha v_{k+1} + (1 - \\alpha) w_{k+1},

with eta = 1/(rho L), s = sqrt(mu/(rho^2 L)), alpha = s/(1+s), beta = 1 - s, gamma eta = 1/(rho sqrt(mu L))
and w_0 = v_0 = x^0. rho is the strong-growth constant of q (``isparse.theory.iasgd``). The measured
iterate is w_k; with rho = 1 and tau = 1 this is Nesterov's method with step 1/L.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .isgd import ISGD


class IasgdMasterState(NamedTuple):
    """w : ndarray (d,), the output sequence; v : ndarray (d,), the momentum sequence."""

    w: np.ndarray
    v: np.ndarray


class IASGD(ISGD):
    """Algorithm 7 (IASGD).

    Parameters
    ----------
    L, mu : float
        Smoothness and strong convexity of f.
    rho : float
        Strong-growth constant used (>= 1).
    batch : int
        Minibatch per worker (as ISGD).
    """

    name = "iasgd"

    def __init__(self, n, blocks, tau_m, gamma=None, *, L, mu, rho, batch=1):
        eta = 1.0 / (rho * L)
        super().__init__(n, blocks, tau_m, eta, batch=batch)
        self.rho, self.eta = float(rho), eta
        s = math.sqrt(mu / (rho * rho * L))
        self.s, self.alpha, self.beta = s, s / (1.0 + s), 1.0 - s
        self.gamma_eta = 1.0 / (rho * math.sqrt(mu * L))

    def master_init(self, x0):
        x0 = np.array(x0, dtype=float)
        return IasgdMasterState(w=x0.copy(), v=x0.copy())

    def master_step(self, state, zeta, messages):
        q = self.aggregate(messages) / (self.n * self.tau)
        w = zeta - self.eta * q
        v = self.beta * state.v + (1.0 - self.beta) * zeta - self.gamma_eta * q
        return self.alpha * v + (1.0 - self.alpha) * w, IasgdMasterState(w=w, v=v)

    def iterate(self, state, x):
        """The measured point: w_k (x is the extrapolated query point zeta_k)."""
        return state.w

    def extra_iterates(self, state) -> dict:
        return {}
