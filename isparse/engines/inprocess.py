"""The in-process engine: all n logical workers in the calling process."""

from __future__ import annotations

import time

import numpy as np

from .host import WorkerHost


class InProcessPool:
    """Runs the n logical workers' steps one after another in this process.

    Parameters
    ----------
    method : Method
    shards : list of n shards
    rngs : list of n numpy Generators (``isparse.blocks.worker_streams``)
    x0 : ndarray of shape (d,)
    """

    name = "inprocess"

    def __init__(self, method, shards, rngs, x0):
        self.host = WorkerHost(method, range(len(shards)), shards, rngs, x0)
        self.placement = {i: "inprocess" for i in range(len(shards))}
        self.timing = {"compute_s": 0.0, "comm_s": 0.0}   # cumulative seconds; nothing is communicated

    def step(self, x):
        """Messages of all workers for the broadcast x, ordered by worker index."""
        start = time.perf_counter()
        msgs = self.host.step(x)
        self.timing["compute_s"] += time.perf_counter() - start
        return msgs

    def lyapunov(self, x_star):
        return self.host.lyapunov(x_star)

    def snapshot(self) -> dict:
        """Every logical worker's (state, random stream state)."""
        return self.host.snapshot()

    def restore(self, snapshot: dict) -> None:
        self.host.restore(snapshot)

    def asynchronous(self, seed: int = 0, spread: float = 1.0):
        """A simulated asynchronous view: see :class:`SimulatedAsync`."""
        return SimulatedAsync(self.host, seed=seed, spread=spread)

    def close(self):
        pass


class SimulatedAsync:
    """Asynchrony simulated in one process with a seeded delay model.

    Worker i's compute times are exponential with mean 1 + spread * i / n (heterogeneous workers,
    the slowest 1 + spread times the fastest), drawn from a stream seeded by ``seed``. Events are
    processed in order of finishing time; a worker computes on the model it last received.
    """

    def __init__(self, host, seed=0, spread=1.0):
        import heapq

        self.host, self._heapq = host, heapq
        n = len(host.ids)
        self.rng = np.random.default_rng(seed)
        self.means = 1.0 + spread * np.arange(n) / max(n, 1)
        self.models, self.events, self.now = {}, [], 0.0

    def _schedule(self, i, x):
        self.models[i] = x.copy()
        self._heapq.heappush(self.events, (self.now + self.rng.exponential(self.means[i]), i))

    def start(self, x):
        for i in self.host.ids:
            self._schedule(i, x)

    def next(self):
        self.now, i = self._heapq.heappop(self.events)
        return i, self.host.step_one(i, self.models[i])

    def resume(self, i, x):
        self._schedule(i, x)

    def stop(self):
        self.events.clear()
