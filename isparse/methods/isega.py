"""ISEGA: independent SEGA (arXiv:1901.09437, Algorithm 2).

Worker i keeps a gradient memory h_i (shape (d,)), samples U_i and sends
Delta_i = (grad f_i(x) - h_i)_{U_i}, then sets h_i <- h_i + Delta_i. The master keeps
h_bar = (1/n) sum_i h_i and forms the unbiased estimate

.. math::

    g = \\bar h + \\frac{1}{n\\tau} \\sum_i \\Delta_i, \\qquad
    x^{t+1} = \\operatorname{prox}_{\\gamma R}(x^t - \\gamma g), \\qquad
    \\bar h \\leftarrow \\bar h + \\frac1n \\sum_i \\Delta_i,

which is (1/n) sum_i g_i with g_i = h_i + (1/tau)(grad f_i(x) - h_i)_{U_i}. With a lossy codec
(``messages.codec``) Delta_i is what the master decodes, Q(Delta_i), and both the worker's h_i and h_bar move by
it (by 1/(1 + omega) of it for a random unbiased codec: ``isparse.theory.theorem3``), so they stay in step. The memories learn
grad f_i(x*), so ISEGA converges to x* without Assumption 2 (Theorem 3,
``isparse.theory.theorem3``). h_i^0 = 0. With tau = 1, g = grad f(x) and this is proximal
gradient descent with step gamma.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..theory import theorem3_bound, theorem3_stepsize
from ..theory.paper import isega_paper_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class IsegaWorkerState(NamedTuple):
    """ISEGA's state of the hosted workers (Algorithm 2).

    Attributes
    ----------
    h : ndarray of shape (k, d)
        Row p: the gradient memory h_i^t of hosted worker i = ids[p].
    """

    h: np.ndarray


class IsegaMasterState(NamedTuple):
    """ISEGA's state of the master (Algorithm 2; also DIANA's, and EF21's with h_bar = (1/n) sum_i g_i).

    Attributes
    ----------
    h_bar : ndarray of shape (d,)
        (1/n) sum_i h_i^t, kept in step with the workers' memories.
    """

    h_bar: np.ndarray


class Theorem3(Theory):
    """Theorem 3's stepsize and bound (with the codec's omega: tau/(1 + omega) in the place of tau)."""

    def bound(self, ctx, method):
        """Theorem 3's bound for ``method.gamma`` (at tau/(1 + omega) with a codec): docs/algorithms.md §3, §7.

        Parameters
        ----------
        ctx : Context
            The run (constants L, mu, n, tau, r0, sum_i ||grad f_i(x*)||^2, the codec's omega).
        method : ISEGA
            The built method (its ``gamma``).

        Returns
        -------
        LinearBound or NoBound
            E||x^t - x*||^2 <= E Phi^t <= (1 - gamma mu)^t Phi^0 (:func:`isparse.theory.theorem3.theorem3_bound`);
            a NoBound when mu = 0.
        """
        return strongly_convex_or_none(ctx, method, lambda: with_constants(theorem3_bound, ctx, gamma=method.gamma))


class ISEGA(Method):
    """Algorithm 2 of arXiv:1901.09437 (ISEGA), ``algorithm=isega``, with a proximal step for R (``self.reg``).

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).

    Notes
    -----
    Worker i keeps a memory h_i (h_i^0 = 0) and sends Delta_i = (grad f_i(x^t) - h_i)_{U_i^t}; the master keeps
    h_bar = (1/n) sum_i h_i and steps to prox_{gamma R}(x^t - gamma (h_bar + (1/(n tau)) sum_i Delta_i)) (the module
    docstring). States: :class:`IsegaWorkerState`, :class:`IsegaMasterState`. Stepsize and bound: Theorem 3, no
    Assumption 2 needed (:mod:`isparse.theory.theorem3`; docs/algorithms.md §2, §3, §7 with a codec).
    """

    name = "isega"
    traits = Traits(prox=True, state_text="the memories h_i, n x d")
    theory = Theorem3(theorem3_stepsize, paper_stepsize=isega_paper_stepsize, codec_theory=True)

    @classmethod
    def state_bytes(cls, ctx):
        """Bytes of the memories h_i: 8 n d (float64), for the memory check before any work.

        Parameters
        ----------
        ctx : Context
            The run (n, d).

        Returns
        -------
        int
            Bytes.
        """
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        """The hosted workers' memories at x^0: h_i^0 = 0.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        IsegaWorkerState
            ``h`` of shape (k, d), zeros.
        """
        return IsegaWorkerState(h=np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        r"""Algorithm 2 (ISEGA), worker side: the sampled blocks of grad f_i - h_i, and the memory update.

        Each hosted worker i sends :math:`\Delta_i = (\nabla f_i(x^t) - h_i^t)_{U_i^t}`, then
        :math:`h_i^{t+1} = h_i^t + \Delta_i`.

        With an exact codec h_i takes grad f_i(x^t) on U_i^t; otherwise it moves by what the master decodes.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : IsegaWorkerState
            ``h``, shape (k, d): the memories h_i^t.
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks of Delta_i per worker.
        state : IsegaWorkerState
            h^{t+1}: moved by the decoded Delta_i (times ``memory_rate`` = 1/(1 + omega) for a lossy unbiased
            codec, so worker and master memories stay equal).
        """
        s = self.sampled(data, t)                                 # U_i^t, tau*m-nice
        g = self.local_grads(data, x, s)                          # grad f_i(x^t), only on U_i
        h = state.h if donate else state.h.copy()
        delta = g - h[s.pw, s.pc]                                 # Delta_i = (grad f_i(x^t) - h_i^t)_{U_i}
        batch = self.send(s, delta)
        if self.codec.exact:
            h[s.pw, s.pc] = g                                     # h_i^{t+1} = h_i^t + Delta_i
        else:                                                     # + what the master decodes, Q(Delta_i) x rate
            h[s.pw, s.pc] += self.memory_rate * batch.values
        return batch, IsegaWorkerState(h)

    def master_init(self, x0):
        """The master's memory at x^0: h_bar^0 = (1/n) sum_i h_i^0 = 0.

        Parameters
        ----------
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        IsegaMasterState
            ``h_bar`` of shape (d,), zeros.
        """
        return IsegaMasterState(h_bar=np.zeros_like(x0))

    def master_step(self, state, x, batch, donate=False):
        r"""Algorithm 2 (ISEGA), master side: the unbiased estimate g and the proximal step.

        :math:`g = \bar h + \frac{1}{n\tau}\sum_i \Delta_i`,
        :math:`x^{t+1} = \operatorname{prox}_{\gamma R}(x^t - \gamma g)`.

        g is the unbiased estimate (1/n) sum_i g_i, g_i = h_i + (1/tau)(grad f_i(x^t) - h_i)_{U_i} (Theorem 3).

        Parameters
        ----------
        state : IsegaMasterState
            ``h_bar``, shape (d,): (1/n) sum_i h_i^t.
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
        state : IsegaMasterState
            h_bar + (1/n) sum_i Delta_i (times ``memory_rate`` with a lossy unbiased codec).
        """
        S = self.aggregate(batch)                                 # sum_i Delta_i
        g = state.h_bar + S / (self.n * self.tau)                 # (1/n) sum_i g_i, unbiased
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (S / self.n if self.memory_rate == 1.0
                                                                   else (self.memory_rate / self.n) * S))

    # Theorem 3's Lyapunov function: the memory part sum_i ||h_i - grad f_i(x*)||^2
    @staticmethod
    def worker_targets(data, x_star):
        """grad f_i(x*) of the hosted workers: what h_i learns (Theorem 3's Lyapunov function).

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        x_star : ndarray, shape (d,)
            x*.

        Returns
        -------
        ndarray, shape (k, d)
        """
        return data.grads(x_star)

    @staticmethod
    def worker_memory(data, state, targets) -> float:
        """The memory part of Theorem 3's Lyapunov function on the hosted workers: sum_i ||h_i - grad f_i(x*)||^2.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        state : IsegaWorkerState
            Their memories, shape (k, d).
        targets : ndarray, shape (k, d)
            grad f_i(x*) (:meth:`worker_targets`).

        Returns
        -------
        float
        """
        return float(np.sum((state.h - targets) ** 2))
