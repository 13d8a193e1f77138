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
iterate is w_k; with rho = 1 and tau = 1 this is Nesterov's method with step 1/L (``asgd``). Bound: Theorem 8 with
rho_hat derived (``isparse.theory.iasgd``; docs/algorithms.md §2, §3).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..errors import ConfigError
from ..params import Interval, Nullable, param
from ..theory import iasgd_bound, strong_growth_rho
from .base import MinibatchOptions, Theory, with_constants
from .isgd import ISGD


@dataclass
class IasgdOptions(MinibatchOptions):
    """``algorithm.*`` of iasgd and asgd: the minibatch (:class:`MinibatchOptions`) and rho."""

    rho: Optional[float] = param(None, Nullable(Interval(float, 1.0, None)),
                                 "the strong-growth constant; null: the computed rho_hat (needs Assumption 2 and "
                                 "exact local gradients, e.g. data=quadratic)")


class IasgdMasterState(NamedTuple):
    """IASGD's state of the master (Algorithm 7)."""

    w: np.ndarray   #: (d,): the output sequence w_k (the measured point)
    v: np.ndarray   #: (d,): the momentum sequence v_k


def _no_gamma_rule(L, mu, n, tau, omega=0.0):
    raise NotImplementedError("IASGD's step is eta = 1/(rho L): IasgdTheory.step gives rho")


class IasgdTheory(Theory):
    """The step parameter is rho, the strong-growth constant of q (``algorithm.rho``, or rho_hat computed with the
    codec's omega; ``isparse.theory.iasgd``), scaled by 1/step.multiplier; the bound on f - f*."""

    def rho(self, ctx) -> tuple[float, bool]:
        """(rho, computed): the configured rho, or rho_hat where it can be computed (Theorem 8); ``computed``: rho is
        rho_hat and the multiplier is at most 1, so the bound applies.

        rho_hat (docs/algorithms.md §3) needs exact local gradients (every worker's minibatch that runs is all its
        examples) and a problem with a strong-growth constant. rho (>= 1) is scaled by 1/step.multiplier (a larger
        multiplier means a larger step 1/(rho L)). Computed once per build (``ctx.cache``).

        Raises
        ------
        ConfigError
            ``algorithm.rho`` is null and rho_hat cannot be computed.
        """
        if "iasgd_rho" not in ctx.cache:                  # step and bound ask: computed once per build
            ctx.cache["iasgd_rho"] = self._rho(ctx)
        return ctx.cache["iasgd_rho"]

    def _rho(self, ctx) -> tuple[float, bool]:
        p, batch = ctx.problem, ctx.options.effective_batch(ctx.problem.shards)
        if ctx.options.rho is not None:
            rho, computed = ctx.options.rho, False
        else:
            rho_tilde = p.strong_growth_constant()
            if rho_tilde is None or not all(s.l <= batch for s in p.shards):   # rho_bar = 0 needs exact gradients
                raise ConfigError("algorithm.rho", f"The 'algorithm.rho' parameter must be set (a number >= 1) for "
                                                   f"{type(p).__name__}: its strong-growth constant cannot be computed "
                                                   f"(it needs Assumption 2 and exact local gradients); got null.")
            rho = strong_growth_rho(rho_tilde, 0.0, ctx.n, ctx.tau, **self.omega_kw(ctx))
            computed = True
        return rho / ctx.step_multiplier, computed and ctx.step_multiplier <= 1

    def step(self, ctx) -> dict:
        """``{"rho": rho}`` (:meth:`rho`, which raises the ConfigError); the step is eta = 1/(rho L)."""
        return {"rho": self.rho(ctx)[0]}

    def bound(self, ctx, method):
        """Theorem 8 with Vaswani, Bach, Schmidt's Theorem 1 on f(w_k) - f* (docs/algorithms.md §3):
        (1 - s)^k [f(w_0) - f* + (mu/2)||w_0 - x*||^2] for the computed rho_hat
        (:func:`isparse.theory.iasgd.iasgd_bound`); a NoBound for a hand-set rho."""
        rho, computed = self.rho(ctx)
        return with_constants(iasgd_bound, ctx, rho=rho, rho_is_computed=computed,
                              subopt0=ctx.problem.F(ctx.x0) - ctx.reference.F_star)


class IASGD(ISGD):
    """Algorithm 7 of arXiv:1901.09437 (IASGD), ``algorithm=iasgd``: accelerated ISGD.

    Parameters
    ----------
    gamma : None
        Ignored: the step is eta = 1/(rho L).
    L, mu : float
        Of f.
    rho : float
        The strong-growth constant used (>= 1).
    """

    name = "iasgd"
    options = IasgdOptions
    # rho_hat takes the codec's omega (derived in ``isparse.theory.iasgd``); step.L=f is refused (its step takes rho)
    theory = IasgdTheory(_no_gamma_rule, step_L_choice=False, codec_theory=True)

    def __init__(self, n, blocks, tau_m, gamma=None, *, L, mu, rho, batch=None, **common):
        eta = 1.0 / (rho * L)
        super().__init__(n, blocks, tau_m, eta, batch=batch, **common)
        self.rho, self.eta = float(rho), eta
        s = math.sqrt(mu / (rho * rho * L))
        self.s, self.alpha, self.beta = s, s / (1.0 + s), 1.0 - s
        self.gamma_eta = 1.0 / (rho * math.sqrt(mu * L))

    @classmethod
    def _run_inputs(cls, ctx) -> dict:
        """ISGD's ``batch``, and ``L`` and ``mu`` of f."""
        return {**super()._run_inputs(ctx), "L": ctx.problem.L, "mu": ctx.problem.mu}

    def master_init(self, x0):
        """w_0 = v_0 = x^0."""
        x0 = np.array(x0, dtype=float)
        return IasgdMasterState(w=x0.copy(), v=x0.copy())

    def master_step(self, state, zeta, batch, donate=False):
        r"""The accelerated step (the module docstring's) along :math:`q = \frac{1}{n\tau}\sum_i (g_i)_{U_i}`, from
        ``zeta`` = zeta_k, the point the workers computed at; returns zeta_{k+1}, where they compute next."""
        q = self.aggregate(batch) / (self.n * self.tau)
        w = zeta - self.eta * q
        v = self.beta * state.v + (1.0 - self.beta) * zeta - self.gamma_eta * q
        return self.alpha * v + (1.0 - self.alpha) * w, IasgdMasterState(w=w, v=v)

    def _derived_params(self) -> dict:
        """ISGD's ``batch_effective`` and ``rho``, the strong-growth constant used."""
        return {**super()._derived_params(), "rho": self.rho}

    def _iterate(self, state, x):
        """w_k (x is the extrapolated query point zeta_k)."""
        return state.w

    def _extra_iterates(self, state) -> dict:
        """None: IASGD logs no average (its measured point is w_k, :meth:`iterate`)."""
        return {}

    @classmethod
    def _check(cls, ctx):
        """Also: the accelerated step needs mu > 0 (a ConfigError naming ``problem.penalty`` when it is not l2)."""
        if ctx.problem.mu <= 0:
            raise ConfigError("problem.penalty", f"The 'problem.penalty' parameter must be l2 for algorithm={cls.name} "
                                                 f"(the accelerated step needs mu > 0); got {ctx.problem.penalty.name!r}.")
        super()._check(ctx)


class ASGD(IASGD):
    """Accelerated SGD, ``algorithm=asgd``: IASGD with tau = 1 (the full-communication baseline); with rho = 1 it is
    Nesterov's method with step 1/L (docs/algorithms.md §2)."""

    name = "asgd"
    traits = dataclasses.replace(IASGD.traits, full=True)
