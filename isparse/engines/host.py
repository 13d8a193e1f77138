"""A host of logical workers: their shards, random streams and method states.

The in-process engine uses one host holding all n logical workers; the Dask engine puts one
host per Dask worker, as an actor, holding the logical workers placed there. Both call
:meth:`WorkerHost.step`, so the worker step is the same code everywhere.
"""

from __future__ import annotations

import copy

import numpy as np


class WorkerHost:
    """Logical workers i in ``ids``: their shards, streams and states.

    Parameters
    ----------
    method : Method
        Supplies ``worker_init`` and ``worker_step``.
    ids : list of int
        Logical worker indices hosted here, ascending.
    shards : list
        ``shards[k]`` is the data of worker ``ids[k]`` (sent once, kept here).
    rngs : list of numpy.random.Generator
        ``rngs[k]`` is the stream of worker ``ids[k]``.
    x0 : ndarray of shape (d,)
        Starting point, for the method's worker state.
    """

    def __init__(self, method, ids, shards, rngs, x0):
        self.method = method
        self.ids = [int(i) for i in ids]
        self.shards = list(shards)
        self.rngs = list(rngs)
        self.states = [method.worker_init(i, s, x0) for i, s in zip(self.ids, self.shards)]

    def step(self, x: np.ndarray) -> list:
        """Run one worker step of every hosted worker on the broadcast x; messages in worker order."""
        out = []
        for k, i in enumerate(self.ids):
            msg, self.states[k] = self.method.worker_step(i, self.shards[k], self.states[k], x, self.rngs[k])
            out.append(msg)
        return out

    def snapshot(self) -> dict:
        """{i: (method state, random stream state)} of every hosted worker, picklable (a checkpoint's worker part).

        The states are deep copies: worker steps may update their arrays in place (ISEGA's h_i, ISAGA's table).
        """
        return {i: (copy.deepcopy(st), rng.bit_generator.state) for i, st, rng in zip(self.ids, self.states, self.rngs)}

    def restore(self, snapshot: dict) -> None:
        """Put back the states and random streams of :meth:`snapshot` for the hosted workers."""
        for k, i in enumerate(self.ids):
            state, rng_state = snapshot[i]
            self.states[k] = copy.deepcopy(state)
            self.rngs[k].bit_generator.state = rng_state

    def step_one(self, i: int, x: np.ndarray):
        """One worker step of the hosted logical worker i only (asynchronous methods)."""
        k = self.ids.index(i)
        msg, self.states[k] = self.method.worker_step(i, self.shards[k], self.states[k], x, self.rngs[k])
        return msg

    def lyapunov(self, x_star: np.ndarray) -> float:
        """sum over hosted workers of ``method.lyapunov_term`` (the memory part of a Lyapunov function).

        The targets (grad f_i(x*), or per-example gradients) are computed here once, where the data live.
        """
        if getattr(self, "_targets", None) is None:
            self._targets = [self.method.lyapunov_target(s, x_star) for s in self.shards]
        return float(sum(self.method.lyapunov_term(st, tg) for st, tg in zip(self.states, self._targets)))

    def ping(self) -> list[int]:
        """The hosted worker ids (a cheap call to check the host is alive)."""
        return self.ids
