"""ISGD: independent sparsified SGD (arXiv:1901.09437, Algorithm 6), and SGD (its tau = 1 baseline).

Worker i draws U_i (tau*m-nice) and a minibatch of ``batch`` of its examples without replacement,
and sends the tau*m blocks of the minibatch gradient g_i; the master takes

.. math::

    x^{t+1} = x^t - \\frac{\\gamma_t}{n} \\sum_i (g_i^t)_{U_i^t},

with a constant gamma_t = gamma or the decreasing gamma_t = 1/(a + c t) of Theorem 6. The master
also keeps the average x_hat^t of x^0..x^t weighted by 1/gamma_s, the point Theorem 6 bounds.
For a non-convex f (mu = 0) the stepsize and bound are Theorem 7's (``isparse.theory.isgd``; docs/algorithms.md
§2, §3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..compression.sampling import EXAMPLES
from ..params import OneOf, param
from ..theory import isgd_bound, isgd_schedule, theorem1_stepsize
from ..theory.isgd import theorem7_stepsize
from ..theory.paper import sgd_effective_paper_stepsize, sgd_paper_stepsize
from .base import Method, MinibatchOptions, Theory, Traits, with_constants


@dataclass
class IsgdOptions(MinibatchOptions):
    """``algorithm.*`` of isgd, sgd and async_isgd: the minibatch (:class:`MinibatchOptions`) and the schedule."""

    schedule: str = param("constant", OneOf("constant", "decreasing"),
                          "constant gamma (the derived neighbourhood bound) or decreasing gamma_t = 1/(a + c t) "
                          "(Theorem 6, bound on f(x_hat) - f*)")


class IsgdMasterState(NamedTuple):
    """ISGD's state of the master (Algorithm 6, and the average Theorem 6 bounds)."""

    t: int              #: iterations done
    x_hat: np.ndarray   #: (d,): the average of x^0..x^t weighted by 1/gamma_s
    weight: float       #: sum_s 1/gamma_s


class ISGDTheory(Theory):
    """Theorems 6 and 7: a constant gamma (Theorem 1's rule; Theorem 7's for a non-convex f) or the decreasing
    schedule gamma_t = 1/(a + c t) (``algorithm.schedule=decreasing``); the bound on dist_sq or on f(x_hat) - f*."""

    def step(self, ctx) -> dict:
        """``{"gamma": gamma}``, plus ``"schedule": (a, c)`` for the decreasing schedule (gamma = gamma_0 then);
        Theorems 6 and 7, docs/algorithms.md §3, §5.

        Constant gamma: Theorem 1's rule (with the codec's omega), Theorem 7's gamma = 1/(L(tau + (1 - tau)/n)) when
        mu = 0, or the plots' (``step.rule=paper``: gamma tau = 1/(5 L_f); ``paper_literal``: 1/(5L)); decreasing
        (``algorithm.schedule=decreasing``): gamma_t = 1/(a + c t) of Theorem 6. Each is scaled by ``step.multiplier``.
        """
        p, n, tau, mult = ctx.problem, ctx.n, ctx.tau, ctx.step_multiplier
        if ctx.options.schedule == "decreasing":
            a, c = isgd_schedule(self.smooth(ctx), p.mu, n, tau, **self.omega_kw(ctx))
            return {"gamma": mult / a, "schedule": (a / mult, c / mult)}    # gamma_0 of the decreasing schedule
        if p.mu <= 0:                                                       # non-convex: Theorem 7's stepsize
            return {"gamma": mult * theorem7_stepsize(self.smooth(ctx), p.mu, n, tau)}
        rule = self.stepsize_rule(ctx.step_rule)
        # step.rule=paper: gamma tau = one-worker SGD's 1/(5 L_f), L_f of f itself; else step.L's
        L = p.L_f if rule is self.paper_stepsize else self.smooth(ctx)
        omega = self.omega_kw(ctx) if rule is self.stepsize else {}        # the paper's steps are the plots' own
        return {"gamma": mult * rule(L, p.mu, n, tau, **omega)}

    def bound(self, ctx, method):
        """The constant-step bound on dist_sq, Theorem 6's on f(x_hat^t) - f*, or Theorem 7's on the average squared
        gradient norm (:func:`isparse.theory.isgd.isgd_bound`; docs/algorithms.md §3), with sigma^2 of the minibatch
        that runs (and nu^2 and f(x^0) when mu = 0)."""
        p = ctx.problem
        sigma_sq = float(np.mean([s.gradient_noise_bound(method.batch) for s in p.shards]))   # of the batch that runs
        extra = dict(nu_sq=p.gradient_dissimilarity_bound(), f0_minus_low=p.F(ctx.x0)) if p.mu <= 0 else {}
        return with_constants(isgd_bound, ctx, gamma=method.gamma, sigma_sq=sigma_sq,
                              decreasing=ctx.options.schedule == "decreasing", **extra)


class ISGD(Method):
    """Algorithm 6 of arXiv:1901.09437 (ISGD), ``algorithm=isgd``: independent sparsified SGD.

    Parameters
    ----------
    batch : int, optional
        The minibatch that runs (>= 1): ``algorithm.batch`` capped at the smallest shard (``_run_inputs``); default
        ``self.opts.batch``.
    schedule : tuple or None
        None for the constant gamma; (a, c) for gamma_t = 1/(a + c t).
    """

    name = "isgd"
    options = IsgdOptions
    traits = Traits(needs=("minibatch_grads_at",))
    # step.rule=paper takes L_f, the smoothness of f itself (ISGDTheory.step)
    theory = ISGDTheory(theorem1_stepsize, paper_stepsize=sgd_effective_paper_stepsize,
                        paper_literal_stepsize=sgd_paper_stepsize, codec_theory=True)

    def __init__(self, n, blocks, tau_m, gamma, *, batch=None, schedule=None, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.batch = int(self.opts.batch if batch is None else batch)
        self.schedule = schedule

    @classmethod
    def _run_inputs(cls, ctx) -> dict:
        """``{"batch": min(algorithm.batch, l_min)}``, the minibatch that runs (a cap is announced)."""
        return {"batch": ctx.options.effective_batch(ctx.problem.shards, announce=True)}

    def stepsize_at(self, t: int) -> float:
        """gamma_t: the constant gamma, or 1/(a + c t) of Theorem 6."""
        if self.schedule is None:
            return self.gamma
        a, c = self.schedule
        return 1.0 / (a + c * t)

    def minibatches(self, data, t) -> np.ndarray:
        """Each hosted worker's minibatch, shape (k, batch): distinct local example indices, from (seed, i, t)."""
        return self.sampler.subsets(EXAMPLES, data.ids, t, data.l, self.batch)

    def worker_step(self, data, state, x, t, donate=False):
        """Algorithm 6: worker i sends :math:`(g_i^t)_{U_i^t}`, g_i^t the gradient of f_i on its minibatch
        (:meth:`minibatches`)."""
        s = self.sampled(data, t)
        g = data.minibatch_grads_at(x, self.minibatches(data, t), s.pw, s.pc)     # (g_i^t)_{U_i}
        return self.send(s, g), state

    def master_init(self, x0):
        """t = 0, x_hat^0 = x^0, weight 1/gamma_0."""
        return IsgdMasterState(t=0, x_hat=np.array(x0, dtype=float), weight=1.0 / self.stepsize_at(0))

    def master_step(self, state, x, batch, donate=False):
        r""":math:`x^{t+1} = x^t - \frac{\gamma_t}{n}\sum_i (g_i^t)_{U_i^t}` (no 1/tau rescaling), and x_hat^{t+1},
        the average of x^0..x^{t+1} weighted by 1/gamma_s (Theorem 6)."""
        x_new = self.averaged_step(x, batch, gamma=self.stepsize_at(state.t))
        t = state.t + 1
        w = 1.0 / self.stepsize_at(t)
        x_hat = state.x_hat + (w / (state.weight + w)) * (x_new - state.x_hat)
        return x_new, IsgdMasterState(t=t, x_hat=x_hat, weight=state.weight + w)

    def _extra_iterates(self, state) -> dict:
        """``avg`` = x_hat^t, the weighted average Theorem 6 bounds (logged as ``subopt_avg``)."""
        return {"avg": state.x_hat}

    def _derived_params(self) -> dict:
        """``batch_effective``: the minibatch that runs (``algorithm.batch`` capped at the smallest shard)."""
        return {"batch_effective": self.batch}


class SGD(ISGD):
    """Distributed minibatch SGD, ``algorithm=sgd``: ISGD with tau = 1 (the full-communication baseline); with
    n = 1 it is SGD. The paper's ISGD plots compare against it (docs/algorithms.md §5)."""

    name = "sgd"
    traits = dataclasses.replace(ISGD.traits, full=True)
