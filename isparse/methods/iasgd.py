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
    """IASGD's state of the master (Algorithm 7).

    Attributes
    ----------
    w : ndarray of shape (d,)
        The output sequence w_k (the measured point).
    v : ndarray of shape (d,)
        The momentum sequence v_k.
    """

    w: np.ndarray
    v: np.ndarray


def _no_gamma_rule(L, mu, n, tau, omega=0.0):
    raise NotImplementedError("IASGD's step is eta = 1/(rho L): IasgdTheory.step gives rho")


class IasgdTheory(Theory):
    """The step parameter is rho, the strong-growth constant of q (``algorithm.rho``, or rho_hat computed with the
    codec's omega; ``isparse.theory.iasgd``), scaled by 1/step.multiplier; the bound on f - f*."""

    def rho(self, ctx) -> tuple[float, bool]:
        """(rho, computed): the configured rho, or rho_hat where it can be computed (Theorem 8).

        rho_hat (docs/algorithms.md §3) needs exact local gradients (every worker's minibatch that runs is all its
        examples) and a problem with a strong-growth constant. rho is scaled by 1/step.multiplier (a larger multiplier
        means a larger step 1/(rho L)). Computed once per build (``ctx.cache``).

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        rho : float
            >= 1 before the multiplier.
        computed : bool
            rho is rho_hat (and the multiplier is at most 1): the bound applies.

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
        """The step parameter of the constructor: rho (``algorithm.rho``, or the computed rho_hat).

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        dict
            ``{"rho": rho}`` (scaled by 1/step.multiplier; the step is eta = 1/(rho L)).

        Raises
        ------
        ConfigError
            ``algorithm.rho`` is null and rho_hat cannot be computed (see :meth:`rho`).
        """
        return {"rho": self.rho(ctx)[0]}

    def bound(self, ctx, method):
        """Theorem 8 with Vaswani, Bach, Schmidt's Theorem 1 on f(w_k) - f*: docs/algorithms.md §3.

        Parameters
        ----------
        ctx : Context
            The run.
        method : IASGD
            The built method.

        Returns
        -------
        LinearBound or NoBound
            (1 - s)^k [f(w_0) - f* + (mu/2)||w_0 - x*||^2] for the computed rho_hat
            (:func:`isparse.theory.iasgd.iasgd_bound`); a NoBound for a hand-set rho.
        """
        rho, computed = self.rho(ctx)
        return with_constants(iasgd_bound, ctx, rho=rho, rho_is_computed=computed,
                              subopt0=ctx.problem.F(ctx.x0) - ctx.reference.F_star)


class IASGD(ISGD):
    """Algorithm 7 of arXiv:1901.09437 (IASGD), ``algorithm=iasgd``: accelerated ISGD.

    Parameters
    ----------
    n, blocks, tau_m, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box`; ``gamma`` is ignored: the step is eta = 1/(rho L).
    L, mu : float
        Smoothness and strong convexity of f.
    rho : float
        Strong-growth constant used (>= 1).
    batch : int, optional
        The minibatch that runs (as ISGD).

    Notes
    -----
    The workers send (g_i)_{U_i} at the extrapolated point zeta_k (ISGD's worker step); the master forms
    q = (1/(n tau)) sum_i (g_i)_{U_i} and takes the accelerated step of Vaswani, Bach, Schmidt (arXiv:1810.07288,
    Theorem 1) with the strong-growth constant rho of q (:class:`IasgdMasterState`, the module docstring). Bound:
    Theorem 8 with rho_hat derived (:mod:`isparse.theory.iasgd`; docs/algorithms.md §2, §3).
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
    def run_inputs(cls, ctx) -> dict:
        """The constructor's run facts: ISGD's minibatch, and L and mu of f.

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        dict
            ``batch``, ``L``, ``mu``.
        """
        return {**super().run_inputs(ctx), "L": ctx.problem.L, "mu": ctx.problem.mu}

    def master_init(self, x0):
        """The master's sequences at x^0: w_0 = v_0 = x^0.

        Parameters
        ----------
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        IasgdMasterState
            ``w`` and ``v``, shape (d,) each.
        """
        x0 = np.array(x0, dtype=float)
        return IasgdMasterState(w=x0.copy(), v=x0.copy())

    def master_step(self, state, zeta, batch, donate=False):
        r"""Algorithm 7 (IASGD), master side: one accelerated step along the sparsified estimate q.

        The accelerated step of Vaswani, Bach, Schmidt (Theorem 1) along
        :math:`q = \frac{1}{n\tau}\sum_i (g_i)_{U_i}`.

        .. math::

            w_{k+1} = \zeta_k - \eta q, \quad v_{k+1} = \beta v_k + (1 - \beta)\zeta_k - \gamma\eta\, q, \quad
            \zeta_{k+1} = \alpha v_{k+1} + (1 - \alpha) w_{k+1}.

        Parameters
        ----------
        state : IasgdMasterState
            w_k and v_k, shape (d,) each.
        zeta : ndarray, shape (d,)
            zeta_k, the extrapolated point the workers computed at.
        batch : Messages
            All n workers' messages of round t, ordered by worker (decoded values).
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray, shape (d,)
            zeta_{k+1}, the next point the workers compute at.
        state : IasgdMasterState
            w_{k+1} and v_{k+1}.
        """
        q = self.aggregate(batch) / (self.n * self.tau)
        w = zeta - self.eta * q
        v = self.beta * state.v + (1.0 - self.beta) * zeta - self.gamma_eta * q
        return self.alpha * v + (1.0 - self.alpha) * w, IasgdMasterState(w=w, v=v)

    def derived_params(self) -> dict:
        """ISGD's ``batch_effective`` and ``rho``, the strong-growth constant used.

        Returns
        -------
        dict
        """
        return {**super().derived_params(), "rho": self.rho}

    def iterate(self, state, x):
        """The measured point: w_k (x is the extrapolated query point zeta_k).

        Parameters
        ----------
        state : IasgdMasterState
            w_k and v_k.
        x : ndarray, shape (d,)
            zeta_k.

        Returns
        -------
        ndarray, shape (d,)
            w_k.
        """
        return state.w

    def extra_iterates(self, state) -> dict:
        """None: IASGD logs no average (its measured point is w_k, :meth:`iterate`).

        Parameters
        ----------
        state : IasgdMasterState

        Returns
        -------
        dict
            Empty.
        """
        return {}

    @classmethod
    def check(cls, ctx):
        """The checks of :meth:`Method.check`, after one of its own: the accelerated step needs mu > 0.

        Parameters
        ----------
        ctx : Context
            The run.

        Raises
        ------
        ConfigError
            mu = 0 (``problem.penalty`` is not l2), or a check of :meth:`Method.check` fails.
        """
        if ctx.problem.mu <= 0:
            raise ConfigError("problem.penalty", f"The 'problem.penalty' parameter must be l2 for algorithm={cls.name} "
                                                 f"(the accelerated step needs mu > 0); got {ctx.problem.penalty.name!r}.")
        super().check(ctx)


class ASGD(IASGD):
    """Accelerated SGD, ``algorithm=asgd``: IASGD with tau = 1 (the full-communication baseline).

    Parameters
    ----------
    n, blocks, tau_m, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` ; ``L``, ``mu``, ``rho``, ``batch`` as :class:`IASGD`.

    Notes
    -----
    With rho = 1 it is Nesterov's method with step 1/L (docs/algorithms.md §2).
    """

    name = "asgd"
    traits = dataclasses.replace(IASGD.traits, full=True)
