"""IASGD: accelerated ISGD (arXiv:1901.09437, Algorithm 7), the accelerated step of Vaswani, Bach and
Schmidt (arXiv:1810.07288, Theorem 1, strongly convex case) driven by the sparsified estimate q; and ASGD.

The workers compute at the broadcast point zeta_k and send (g_i)_{U_i} (the ISGD worker step); the
master forms q = (1/(n tau)) sum_i (g_i)_{U_i}, an unbiased estimate of grad f(zeta_k), and takes

.. math::

    w_{k+1} = \\zeta_k - \\eta q, \\quad
    v_{k+1} = \\beta v_k + (1 - \\beta)\\zeta_k - \\gamma\\eta\\, q, \\quad
    \\zeta_{k+1} = \\alpha v_{k+1} + (1 - \\alpha) w_{k+1},

with eta = 1/(rho L), s = sqrt(mu/(rho^2 L)), alpha = s/(1+s), beta = 1 - s, gamma eta = 1/(rho sqrt(mu L))
and w_0 = v_0 = x^0. rho is the strong-growth constant of q (``isparse.theory.iasgd``). The measured
iterate is w_k; with rho = 1 and tau = 1 this is Nesterov's method with step 1/L (``asgd``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..errors import ConfigError
from ..params import Interval, Nullable, param
from ..theory import iasgd_bound, strong_growth_rho
from .base import AlgorithmOptions
from .isgd import ISGD


@dataclass
class IasgdOptions(AlgorithmOptions):
    """``algorithm.*`` of iasgd and asgd."""

    batch: int = param(1, Interval(int, 1, None), "minibatch size per worker")
    rho: Optional[float] = param(None, Nullable(Interval(float, 1.0, None)),
                                 "the strong-growth constant; null: the computed rho_hat (needs Assumption 2 and "
                                 "exact local gradients, e.g. data=quadratic)")


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
    step_L_choice = False
    codec_theory = True    # rho_hat takes the codec's omega (derived in ``isparse.theory.iasgd``)
    options = IasgdOptions

    def __init__(self, n, blocks, tau_m, gamma=None, *, L, mu, rho, batch=1, l_min=1, **common):
        eta = 1.0 / (rho * L)
        super().__init__(n, blocks, tau_m, eta, batch=batch, l_min=l_min, **common)
        self.rho, self.eta = float(rho), eta
        s = math.sqrt(mu / (rho * rho * L))
        self.s, self.alpha, self.beta = s, s / (1.0 + s), 1.0 - s
        self.gamma_eta = 1.0 / (rho * math.sqrt(mu * L))

    def master_init(self, x0):
        x0 = np.array(x0, dtype=float)
        return IasgdMasterState(w=x0.copy(), v=x0.copy())

    def master_step(self, state, zeta, batch, donate=False):
        q = self.aggregate(batch) / (self.n * self.tau)
        w = zeta - self.eta * q
        v = self.beta * state.v + (1.0 - self.beta) * zeta - self.gamma_eta * q
        return self.alpha * v + (1.0 - self.alpha) * w, IasgdMasterState(w=w, v=v)

    def derived_params(self) -> dict:
        return {"rho": self.rho}

    def iterate(self, state, x):
        """The measured point: w_k (x is the extrapolated query point zeta_k)."""
        return state.w

    def extra_iterates(self, state) -> dict:
        return {}

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def rho_of(cls, ctx) -> tuple[float, bool]:
        """(rho, computed): the configured rho, or rho_hat of ``isparse.theory.iasgd`` where it can be computed;
        scaled by 1/step.multiplier (a larger multiplier means a larger step 1/(rho L))."""
        p, batch = ctx.problem, cls.batch_of(ctx)
        if ctx.options.rho is not None:
            rho, computed = ctx.options.rho, False
        else:
            rho_tilde = p.strong_growth_constant()
            if rho_tilde is None or not all(s.l <= batch for s in p.shards):   # rho_bar = 0 needs exact gradients
                raise ConfigError("algorithm.rho", f"The 'algorithm.rho' parameter must be set (a number >= 1) for "
                                                   f"{type(p).__name__}: its strong-growth constant cannot be computed "
                                                   f"(it needs Assumption 2 and exact local gradients); got null.")
            rho = strong_growth_rho(rho_tilde, 0.0, ctx.n, ctx.tau, **cls.omega_kw(ctx))
            computed = True
        return rho / ctx.step_multiplier, computed and ctx.step_multiplier <= 1

    @classmethod
    def check(cls, ctx):
        if ctx.problem.mu <= 0:
            raise ConfigError("problem.penalty", f"The 'problem.penalty' parameter must be l2 for algorithm={cls.name} "
                                                 f"(the accelerated step needs mu > 0); got {ctx.problem.penalty.name!r}.")
        super().check(ctx)

    @classmethod
    def configure(cls, ctx):
        p = ctx.problem
        rho, computed = cls.rho_of(ctx)
        method = cls(ctx.n, ctx.blocks, ctx.tau_m, **ctx.common(), L=p.L, mu=p.mu, rho=rho,
                     batch=cls.batch_of(ctx), l_min=min(s.l for s in p.shards))
        bound = iasgd_bound(rho=rho, rho_is_computed=computed, subopt0=p.F(ctx.x0) - ctx.reference.F_star,
                            **ctx.constants())
        return method, bound


class ASGD(IASGD):
    """Accelerated SGD: IASGD with tau = 1 (the full-communication baseline)."""

    name = "asgd"
    full = True
