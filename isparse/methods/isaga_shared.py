"""Shared-data ISAGA (arXiv:1901.09437, Algorithm 4): SAGA on f = (1/N) sum_j psi_j with n workers
that each read the whole data set.

In iteration t the workers take n distinct examples j_1..j_n (without replacement, drawn from the
stream every worker and the master share: a function of (seed, t)), worker i draws its own U_i and

.. math::

    x_i^{t+1} = x^t - \\gamma (\\nabla\\psi_{j_i}(x^t) - \\alpha_{j_i} + \\bar\\alpha)_{U_i}, \\quad
    x^{t+1} = \\frac1n \\sum_i x_i^{t+1}, \\quad (\\alpha_{j_i})_{U_i} \\leftarrow (\\nabla\\psi_{j_i}(x^t))_{U_i}.

The paper's workers share the SAGA table alpha (N x d) in memory; here the master keeps it and
worker i sends (grad psi_{j_i}(x^t))_{U_i} -- the same tau*m blocks the paper's worker sends, and
the same iterates. The master recomputes j_i, so no index is sent. The table starts at 0.
Theorem 2 (``isparse.theory.theorem2``) needs no Assumption 2.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..compression.sampling import SHARED_EXAMPLES
from ..theory import theorem2_bound, theorem2_stepsize
from ..theory.paper import saga_paper_stepsize
from .base import Method, Theory, Traits, strongly_convex_or_none, with_constants


class SharedSagaMasterState(NamedTuple):
    """Shared-data ISAGA's state of the master (Algorithm 4: the table the paper's workers share).

    Attributes
    ----------
    alpha : ndarray of shape (N, d)
        The SAGA table: row j, alpha_j.
    alpha_bar : ndarray of shape (d,)
        Its mean (1/N) sum_j alpha_j.
    """

    alpha: np.ndarray
    alpha_bar: np.ndarray


class SharedRows:
    """The hosted workers of a shared-data method: every one reads the same stacked data set ``whole``."""

    def __init__(self, whole, ids):
        self.whole, self.ids = whole, np.asarray(ids, dtype=np.int64)
        self.l = np.ones(self.ids.size, dtype=np.int64)   # no per-worker examples: the state lives on the master

    @property
    def k(self) -> int:
        """The number k of hosted workers."""
        return int(self.ids.size)


def whole(ctx):
    """psi_j = phi_j + P: the data set as one worker's problem (built once per run, kept in ``ctx.cache``).

    Parameters
    ----------
    ctx : Context
        The run (its data set and problem).

    Returns
    -------
    GLMProblem
        One shard holding all N examples.
    """
    from ..problems import GLMProblem

    if "whole" not in ctx.cache:
        p = ctx.problem
        ctx.cache["whole"] = GLMProblem(ctx.data, [np.arange(ctx.data.N)], p.lam, loss=p.loss.name,
                                        penalty=p.penalty.name)
    return ctx.cache["whole"]


class Theorem2(Theory):
    """Theorem 2's stepsize and bound, L the smoothness of the psi_j (of the whole data set)."""

    def smooth(self, ctx):
        """The L of Theorem 2's rule: the smoothness of the psi_j, examples of the whole data set.

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        float
            L_example of the data set as one worker's problem (:func:`whole`).
        """
        return whole(ctx).L_example

    def bound(self, ctx, method):
        """Theorem 2's bound for ``method.gamma`` (L of the psi_j, N examples): docs/algorithms.md §3.

        Parameters
        ----------
        ctx : Context
            The run (constants, the data set's N and sum_j ||grad psi_j(x*)||^2).
        method : ISAGAShared
            The built method (its ``gamma``).

        Returns
        -------
        LinearBound or NoBound
            E[r_t + c gamma^2 Psi^t] <= (1 - rho)^t (r_0 + c gamma^2 Psi^0)
            (:func:`isparse.theory.theorem2.theorem2_bound`);
            a NoBound when mu = 0 or the stepsize leaves no contraction.
        """
        w = whole(ctx)
        return strongly_convex_or_none(ctx, method, lambda: with_constants(
            theorem2_bound, ctx, gamma=method.gamma, L_example=w.L_example, N=ctx.data.N,
            sum_sq_example_grads=w.sum_sq_example_grads(ctx.reference.x_star)))


class ISAGAShared(Method):
    """Algorithm 4 of arXiv:1901.09437 (ISAGA with data shared by all workers), ``algorithm=isaga_shared``.

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).
    N : int
        Number of examples (>= n).
    targets : ndarray of shape (N, d), optional
        grad psi_j(x*) for every example (Theorem 2's Psi, monitored by :meth:`master_memory`).

    Notes
    -----
    In round t the workers take n distinct examples j_1..j_n (a function of (seed, t)); worker i sends
    (grad psi_{j_i}(x^t))_{U_i^t} and the master, which keeps the SAGA table (:class:`SharedSagaMasterState`), steps
    along (1/n) sum_i (grad psi_{j_i}(x^t) - alpha_{j_i} + alpha_bar)_{U_i^t}: the paper's iterates (the module
    docstring). Stepsize and bound: Theorem 2, no Assumption 2 (:mod:`isparse.theory.theorem2`; docs/algorithms.md §2,
    §3).
    """

    name = "isaga_shared"
    traits = Traits(needs=("example_grads_at",), master_sums=False,
                    state_text="the master's SAGA table and its targets grad psi_j(x*), 2 x N x d")
    theory = Theorem2(theorem2_stepsize, paper_stepsize=saga_paper_stepsize, smoothness="L_example",
                      codec_why="the master's table stores the decoded gradients, so the codec's noise on "
                                "grad psi_j(x*) != 0 stays in it (isparse/theory/theorem2.py)")

    @classmethod
    def state_bytes(cls, ctx):
        """Bytes of the master's table and its targets: 8 x 2 N d (float64), for the memory check before any work.

        Parameters
        ----------
        ctx : Context
            The run (N of the data set, d).

        Returns
        -------
        int
            Bytes (0 without a data set: :meth:`check` refuses the run).
        """
        return 8 * 2 * ctx.data.N * ctx.problem.d if ctx.data is not None else 0

    def __init__(self, n, blocks, tau_m, gamma, *, N, targets=None, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.N, self.targets = int(N), targets

    @classmethod
    def run_inputs(cls, ctx):
        """N, and the targets grad psi_j(x*) of every example (for Theorem 2's Psi).

        Parameters
        ----------
        ctx : Context
            The run (a data set and its reference solution x*).

        Returns
        -------
        dict
            ``{"N": int, "targets": ndarray of shape (N, d)}``.
        """
        w = whole(ctx)
        targets = np.stack([w.shards[0].example_grad(ctx.reference.x_star, j) for j in range(ctx.data.N)])
        return {"N": ctx.data.N, "targets": targets}

    # every worker's shard is the whole data set: a host is sent it once
    def host_shards(self, shards, ids):
        """What a host of the logical workers ``ids`` is sent: the whole data set, once.

        Parameters
        ----------
        shards : list
            The n workers' shards (all the same object, :meth:`shards`).
        ids : array_like of int, shape (k,)
            The hosted workers.

        Returns
        -------
        list
            ``[shards[0]]``.
        """
        return [shards[0]]

    def host_data(self, shards, ids):
        """The hosted workers' data: :class:`SharedRows` over the one stacked data set.

        Parameters
        ----------
        shards : list
            As :meth:`host_shards` returns.
        ids : array_like of int, shape (k,)
            The hosted workers.

        Returns
        -------
        SharedRows
        """
        return SharedRows(type(shards[0]).stack(shards[:1], [0]), ids)

    def indices(self, t) -> np.ndarray:
        """j_1..j_n of round t: n distinct examples, in draw order (Algorithm 4; the last t is remembered).

        Parameters
        ----------
        t : int
            The round.

        Returns
        -------
        ndarray of int, shape (n,)
            A function of (seed, t), so the master recomputes it.
        """
        memo = self.__dict__.get("_indices")
        if memo is None or memo[0] != (self.seed, int(t)):
            memo = ((self.seed, int(t)), self.sampler.subsets(SHARED_EXAMPLES, [0], t, self.N, self.n, ordered=True)[0])
            self._indices = memo
        return memo[1]

    def worker_step(self, data, state, x, t, donate=False):
        r"""Algorithm 4 (shared-data ISAGA), worker side: the sampled blocks of one example's gradient.

        Worker i sends :math:`(\nabla\psi_{j_i}(x^t))_{U_i^t}`, j_i its example of round t.

        The paper's worker sends (grad psi_{j_i} - alpha_{j_i} + alpha_bar)_{U_i} from the shared table; here the
        master keeps the table and forms that difference (:meth:`master_step`): the same blocks and iterates. j_i is
        recomputed by the master from (seed, t) (:meth:`indices`).

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : None
            The workers keep no state (the table lives on the master).
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks of grad psi_{j_i}(x^t) per worker.
        state : None
        """
        j = self.indices(t)[data.ids]
        s = self.sampled(data, t)
        g = data.whole.rows_grads_at(x, j[:, None], np.ones(data.k), s.pw, s.pc)    # (grad psi_{j_i}(x^t))_{U_i}
        return self.send(s, g), state

    def master_init(self, x0):
        """The master's SAGA table at x^0: alpha_j^0 = 0 for every example, and its mean 0.

        Parameters
        ----------
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        SharedSagaMasterState
            ``alpha`` of shape (N, d) and ``alpha_bar`` of shape (d,), zeros.
        """
        return SharedSagaMasterState(np.zeros((self.N, x0.size)), np.zeros_like(x0))

    def master_memory(self, state) -> float:
        """Psi^t = sum_j ||alpha_j - grad psi_j(x*)||^2, the memory part of Theorem 2's Lyapunov function.

        The table lives on the master.

        Parameters
        ----------
        state : SharedSagaMasterState
            The master's table.

        Returns
        -------
        float
        """
        return float(np.sum((state.alpha - self.targets) ** 2))

    def master_step(self, state, x, batch, donate=False):
        r"""Algorithm 4 (shared-data ISAGA), master side: the SAGA step from the shared table, and its update.

        :math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\nabla\psi_{j_i}(x^t) - \alpha_{j_i} + \bar\alpha)_{U_i^t}`,
        then :math:`(\alpha_{j_i})_{U_i} \leftarrow (\nabla\psi_{j_i}(x^t))_{U_i}`.

        Parameters
        ----------
        state : SharedSagaMasterState
            The table ``alpha`` (N, d) and its mean ``alpha_bar`` (d,) of round t.
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
        state : SharedSagaMasterState
            The table with the sent blocks written in (the decoded values) and its mean kept in step.
        """
        js = self.indices(batch.t)
        c = self.coords_of(batch)
        rows = js[np.repeat(batch.workers, batch.counts)]
        alpha = state.alpha if donate else state.alpha.copy()
        old = alpha[rows, c]                                               # the table of iteration t
        total = np.bincount(c, weights=batch.values - old + state.alpha_bar[c], minlength=self.blocks.d)
        alpha[rows, c] = batch.values                                      # then (alpha_j)_{U_i} <- grad psi_j
        alpha_bar = state.alpha_bar + np.bincount(c, weights=(batch.values - old) / self.N, minlength=self.blocks.d)
        return x - (self.gamma / self.n) * total, SharedSagaMasterState(alpha, alpha_bar)

    @classmethod
    def check(cls, ctx):
        """The checks of :meth:`Method.check`, after one of its own: the run must read a data set.

        Parameters
        ----------
        ctx : Context
            The run.

        Raises
        ------
        ConfigError
            ``data`` is not a data set (e.g. ``data=quadratic``), or a check of :meth:`Method.check` fails.
        """
        if ctx.data is None:
            raise ConfigError("data", f"The 'data' parameter must be a data set for algorithm={cls.name} "
                                      f"(the workers share its examples); got {ctx.problem.name!r}.")
        super().check(ctx)

    @classmethod
    def shards(cls, ctx):
        """What every worker holds: the whole data set (psi_j = phi_j + P, :func:`whole`).

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        shards : list
            The one shard of the whole data set, n times.
        parts : list
            All its rows, n times.
        """
        w = whole(ctx)
        return [w.shards[0]] * ctx.n, [w.parts[0]] * ctx.n
