"""The in-process engine: all n logical workers as one host in the calling process."""

from __future__ import annotations

import heapq
import time

import numpy as np

from ..compression.messages import Messages
from .host import WorkerHost
from .protocol import AsynchronousView


class InProcessPool:
    """Runs the n logical workers' batched step in this process (one host holding all of them).

    Parameters
    ----------
    method : Method
        With the run's seed.
    shards : list of n shards
    x0 : ndarray of shape (d,)
    """

    name = "inprocess"

    def __init__(self, method, shards, x0):
        self.method = method
        ids = list(range(len(shards)))
        self.host = WorkerHost(method, ids, method.host_shards(shards, ids), x0)
        self.placement = {i: "inprocess" for i in ids}
        self.timing = {"compute_s": 0.0, "comm_s": 0.0}   # cumulative seconds; nothing is communicated

    def exchange(self, x, monitor=None):
        """All workers' messages for the broadcast x, ordered by worker index."""
        start = time.perf_counter()
        batch, _, _, memory = self.host.round(x, monitor)
        self.timing["compute_s"] += time.perf_counter() - start
        return batch, memory

    def memory(self, x_star):
        return self.host.memory(x_star)

    def snapshot(self) -> list:
        return [self.host.snapshot()]

    def restore(self, snapshots) -> None:
        self.host.restore(snapshots)

    def counters(self) -> dict:
        return {"time_compute_s": self.timing["compute_s"], "time_comm_s": self.timing["comm_s"]}

    def stop(self):
        pass

    def asynchronous(self, seed: int = 0, spread: float = 1.0):
        """A simulated asynchronous view: see :class:`SimulatedAsync`."""
        return SimulatedAsync(self, seed=seed, spread=spread)

    def close(self):
        pass


class SimulatedAsync(AsynchronousView):
    """Asynchrony simulated in one process with a seeded delay model (an :class:`~isparse.engines.protocol.Engine`).

    Worker i's compute times are exponential with mean 1 + spread * i / n (heterogeneous workers,
    the slowest 1 + spread times the fastest), drawn from a stream seeded by ``seed``. Events are
    processed in order of finishing time; a worker computes on the model it last received.
    """

    name = "inprocess"

    def __init__(self, pool, seed=0, spread=1.0):
        self.pool, self.method, self.placement = pool, pool.method, pool.placement
        n = pool.host.ids.size
        self.rng = np.random.default_rng(seed)
        self.means = 1.0 + spread * np.arange(n) / max(n, 1)
        self.models, self.events, self.now, self.idle = {}, [], 0.0, list(range(n))

    def exchange(self, x, monitor=None):
        for i in self.idle:                      # the idle workers get x and start their next step
            self.models[i] = x.copy()
            heapq.heappush(self.events, (self.now + self.rng.exponential(self.means[i]), i))
        self.now, i = heapq.heappop(self.events)
        start = time.perf_counter()
        batch: Messages = self.pool.host.step_one(i, self.models[i])
        self.pool.timing["compute_s"] += time.perf_counter() - start
        self.idle = [i]
        return batch, None

    def stop(self):
        self.events.clear()
