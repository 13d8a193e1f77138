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
stepsize and bound take the codec's omega (derived in ``isparse.theory.theorem5``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..compression.sampling import EXAMPLES
from ..theory import theorem5_bound, theorem5_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class IsagaWorkerState(NamedTuple):
    """Distributed ISAGA's state of the hosted workers (Algorithm 5).

    Attributes
    ----------
    alpha : ndarray of shape (R, d)
        The SAGA tables, row ``row_ptr[p] + j`` for example j of hosted worker p.
    alpha_bar : ndarray of shape (k, d)
        Row p: the mean of worker p's table.
    """

    alpha: np.ndarray
    alpha_bar: np.ndarray


class Theorem5(Theory):
    """Theorem 5's stepsize (L of the f_ij) and bound, with the codec's omega (the tables keep exact gradients)."""

    def bound(self, ctx, method):
        """Theorem 5's bound for ``method.gamma`` (L of the f_ij, l = max_i l_i): docs/algorithms.md §3, §7.

        Parameters
        ----------
        ctx : Context
            The run (constants, the problem's per-example smoothness and sum_ij ||grad f_ij(x*)||^2).
        method : ISAGA
            The built method (its ``gamma``).

        Returns
        -------
        LinearBound or NoBound
            E[r_t + c gamma^2 Psi^t] <= (1 - theta)^t (r_0 + c gamma^2 Psi^0)
            (:func:`isparse.theory.theorem5.theorem5_bound`); a NoBound when mu = 0 or Assumption 2 fails at tau < 1.
        """
        p = ctx.problem
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem5_bound, ctx, gamma=method.gamma, L_example=p.L_example, l_max=max(s.l for s in p.shards),
            sum_sq_example_grads=p.sum_sq_example_grads(ctx.reference.x_star)))


class ISAGA(Method):
    """Algorithm 5 of arXiv:1901.09437 (distributed ISAGA), ``algorithm=isaga``.

    SAGA on each worker's examples, sparsified.

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).

    Notes
    -----
    Worker i keeps a SAGA table alpha_ij (l_i x d, starting at 0) and its mean alpha_bar_i, draws one local example
    j and sends (grad f_ij(x^t) - alpha_ij + alpha_bar_i)_{U_i^t}; the master takes x^{t+1} = x^t - (gamma/n) sum_i
    of the messages (the module docstring). State: :class:`IsagaWorkerState`. Stepsize and bound: Theorem 5, under
    Assumption 2 (:mod:`isparse.theory.theorem5`; docs/algorithms.md §2, §3).
    """

    name = "isaga"
    traits = Traits(needs=("example_grads_at",), state_text="the SAGA tables, N x d, and their means, n x d")
    theory = Theorem5(theorem5_stepsize, smoothness="L_example", codec_theory=True)

    @classmethod
    def state_bytes(cls, ctx):
        """Bytes of the SAGA tables and their means: 8 (N + n) d (float64), for the memory check before any work.

        Parameters
        ----------
        ctx : Context
            The run (N, n, d).

        Returns
        -------
        int
            Bytes.
        """
        return 8 * (ctx.problem.N + ctx.n) * ctx.problem.d

    def worker_init(self, data, x0):
        """The hosted workers' SAGA tables at x^0: alpha_ij^0 = 0 and their means 0.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.l``: their numbers of examples l_i).
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        IsagaWorkerState
            ``alpha`` of shape (sum_i l_i, d) and ``alpha_bar`` of shape (k, d), zeros.
        """
        return IsagaWorkerState(alpha=np.zeros((int(data.l.sum()), x0.size)), alpha_bar=np.zeros((data.k, x0.size)))

    def examples(self, data, t) -> np.ndarray:
        """j_i^t of the hosted workers: one example uniform over each worker's l_i examples (Algorithm 5).

        Parameters
        ----------
        data : stacked data
            The hosted workers' data (``data.l``).
        t : int
            The round.

        Returns
        -------
        ndarray of int, shape (k,)
            Local example indices, a function of (seed, i, t).
        """
        return self.sampler.subsets(EXAMPLES, data.ids, t, data.l, 1)[:, 0]

    def worker_step(self, data, state, x, t, donate=False):
        r"""Algorithm 5 (distributed ISAGA), worker side: a SAGA-corrected gradient on the sampled blocks.

        Each hosted worker i sends :math:`(\nabla f_{ij}(x^t) - \alpha_{ij} + \bar\alpha_i)_{U_i^t}`, j
        uniform over the l_i local
        examples.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : IsagaWorkerState
            The tables ``alpha`` (sum_i l_i, d) and their means ``alpha_bar`` (k, d).
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks per worker.
        state : IsagaWorkerState
            With (alpha_ij)_{U_i} <- (grad f_ij(x^t))_{U_i} and alpha_bar_i moved to match (the exact gradients:
            a codec never reaches the table).
        """
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
        r"""Algorithm 5 (distributed ISAGA), master side: the average of the proposals.

        :math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\text{message}_i)` (no 1/tau rescaling).

        Parameters
        ----------
        state : None
            The master keeps no state (the tables live on the workers).
        x : ndarray, shape (d,)
            x^t.
        batch : Messages
            All n workers' messages of round t, ordered by worker (decoded values).
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray, shape (d,)
            x^{t+1}.
        state : None
        """
        return self.averaged_step(x, batch), state

    # Theorem 5's Lyapunov function: Psi = sum_ij ||alpha_ij - grad f_ij(x*)||^2
    @staticmethod
    def worker_targets(data, x_star):
        """grad f_ij(x*) for every hosted example: what the tables learn (Theorem 5's Psi).

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        x_star : ndarray, shape (d,)
            x*.

        Returns
        -------
        ndarray, shape (sum_i l_i, d)
        """
        return data.example_grads(x_star)

    @staticmethod
    def worker_memory(data, state, targets) -> float:
        """The memory part of Theorem 5's Lyapunov function on the hosted workers.

        Psi = sum_ij ||alpha_ij - grad f_ij(x*)||^2.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        state : IsagaWorkerState
            Their tables.
        targets : ndarray, shape (sum_i l_i, d)
            grad f_ij(x*) (:meth:`worker_targets`).

        Returns
        -------
        float
        """
        return float(np.sum((state.alpha - targets) ** 2))


class SAGA(ISAGA):
    """Distributed SAGA, ``algorithm=saga``: ISAGA with tau = 1 (the full-communication baseline).

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).

    Notes
    -----
    With n = 1 it is SAGA. Theorem 5 at tau = 1 needs no Assumption 2: the terms that need it carry 1 - tau = 0
    (docs/algorithms.md §3).
    """

    name = "saga"
    traits = dataclasses.replace(ISAGA.traits, full=True)
