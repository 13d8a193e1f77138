"""Distributed ISAGA (arXiv:1901.09437, Algorithm 5): SAGA on each worker's own examples, sparsified; and SAGA.

Worker i keeps a SAGA table alpha_ij (l_i x d) and its mean alpha_bar_i. In each iteration it draws
U_i (tau*m-nice) and one example j uniformly from its l_i examples, and sends

.. math::

    (\\nabla f_{ij}(x^t) - \\alpha_{ij} + \\bar\\alpha_i)_{U_i}, \\qquad
    \\alpha_{ij} \\leftarrow \\alpha_{ij} + (\\nabla f_{ij}(x^t) - \\alpha_{ij})_{U_i};

the master takes x^{t+1} = x^t - (gamma/n) sum_i of the messages (no 1/tau rescaling). The table
starts at 0. Theorem 5 (``isparse.theory.theorem5``) needs Assumption 2; without it the method
stalls at a neighbourhood. With tau = 1 this is distributed SAGA (``saga``); with n = 1 too, SAGA.
With a lossy codec the master decodes Q(message); the worker's table keeps its exact gradients, and the
stepsize and bound take the codec's omega (derived in ``isparse.theory.theorem5``; docs/algorithms.md §2, §3).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..compression.sampling import EXAMPLES
from ..theory import theorem5_bound, theorem5_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class IsagaWorkerState(NamedTuple):
    """Distributed ISAGA's state of the hosted workers (Algorithm 5)."""

    alpha: np.ndarray       #: (sum_i l_i, d): the SAGA tables, row ``row_ptr[p] + j`` for example j of hosted worker p
    alpha_bar: np.ndarray   #: (k, d): row p is the mean of worker p's table


class Theorem5(Theory):
    """Theorem 5's stepsize (L of the f_ij) and bound, with the codec's omega (the tables keep exact gradients)."""

    def bound(self, ctx, method):
        """E[r_t + c gamma^2 Psi^t] <= (1 - theta)^t (r_0 + c gamma^2 Psi^0), L of the f_ij, l = max_i l_i
        (:func:`isparse.theory.theorem5.theorem5_bound`; docs/algorithms.md §3, §7); a NoBound when mu = 0 or
        Assumption 2 fails at tau < 1."""
        p = ctx.problem
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem5_bound, ctx, gamma=method.gamma, L_example=p.L_example, l_max=max(s.l for s in p.shards),
            sum_sq_example_grads=p.sum_sq_example_grads(ctx.reference.x_star)))


class ISAGA(Method):
    """Algorithm 5 of arXiv:1901.09437 (distributed ISAGA), ``algorithm=isaga``: SAGA on each worker's examples,
    sparsified."""

    name = "isaga"
    traits = Traits(needs=("example_grads_at",), state_text="the SAGA tables, N x d, and their means, n x d")
    theory = Theorem5(theorem5_stepsize, smoothness="L_example", codec_theory=True)

    @classmethod
    def _state_bytes(cls, ctx):
        """The SAGA tables and their means: 8 (N + n) d bytes."""
        return 8 * (ctx.problem.N + ctx.n) * ctx.problem.d

    def worker_init(self, data, x0):
        """alpha_ij^0 = 0 and their means 0."""
        return IsagaWorkerState(alpha=np.zeros((int(data.l.sum()), x0.size)), alpha_bar=np.zeros((data.k, x0.size)))

    def examples(self, data, t) -> np.ndarray:
        """j_i^t of the hosted workers, shape (k,): one local example uniform over each worker's l_i (Algorithm 5),
        a function of (seed, i, t)."""
        return self.sampler.subsets(EXAMPLES, data.ids, t, data.l, 1)[:, 0]

    def worker_step(self, data, state, x, t, donate=False):
        r"""Each hosted worker i sends :math:`(\nabla f_{ij}(x^t) - \alpha_{ij} + \bar\alpha_i)_{U_i^t}`, j uniform
        over its l_i examples, then :math:`(\alpha_{ij})_{U_i} \leftarrow (\nabla f_{ij}(x^t))_{U_i}` (exact: a codec
        never reaches the table) and moves alpha_bar_i to match."""
        s = self.sampled(data, t)                                  # U_i^t
        j = self.examples(data, t)                                 # j ~ uniform over the l_i local examples
        pw, pc = s.pw, s.pc
        g = data.example_grads_at(x, j, pw, pc)                    # (grad f_ij(x^t))_{U_i}
        rows = data.row_ptr[pw] + j[pw]
        alpha = state.alpha if donate else state.alpha.copy()
        alpha_bar = state.alpha_bar if donate else state.alpha_bar.copy()
        old = alpha[rows, pc]
        sent = g - old + alpha_bar[pw, pc]
        alpha_bar[pw, pc] += (g - old) / data.l[pw]                # keep the mean in step with the table
        alpha[rows, pc] = g
        return self.send(s, sent), IsagaWorkerState(alpha, alpha_bar)

    def master_step(self, state, x, batch, donate=False):
        r""":math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\text{message}_i)` (no 1/tau rescaling; the tables live on
        the workers)."""
        return self.averaged_step(x, batch), state

    # Theorem 5's Lyapunov function: Psi = sum_ij ||alpha_ij - grad f_ij(x*)||^2
    @staticmethod
    def _worker_targets(data, x_star):
        """grad f_ij(x*) for every hosted example, shape (sum_i l_i, d): what the tables learn."""
        return data.example_grads(x_star)

    @staticmethod
    def _worker_memory(data, state, targets) -> float:
        """Psi = sum_ij ||alpha_ij - grad f_ij(x*)||^2 over the hosted workers (``targets``: :meth:`_worker_targets`)."""
        return float(np.sum((state.alpha - targets) ** 2))


class SAGA(ISAGA):
    """Distributed SAGA, ``algorithm=saga``: ISAGA with tau = 1 (the full-communication baseline); with n = 1 it is
    SAGA. Theorem 5 at tau = 1 needs no Assumption 2: the terms that need it carry 1 - tau = 0 (docs/algorithms.md §3).
    """

    name = "saga"
    traits = dataclasses.replace(ISAGA.traits, full=True)
