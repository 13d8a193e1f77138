"""The in-process engine: all n logical workers as one host in the calling process."""

from __future__ import annotations

import heapq
import time

import numpy as np

from ..compression.messages import Messages
from .hooks import host_sums, sums_on_host
from .host import WorkerHost, split_workers
from .protocol import AsynchronousView


class InProcessPool:
    """Runs the n logical workers' batched step in this process (one host holding all of them; an ``Engine``).

    Every worker step of the paper's algorithms (Algorithms 1-7) runs as one batched step of a
    :class:`~isparse.engines.host.WorkerHost`; the numbers equal those of the Dask engine, whatever the placement.
    Nothing is communicated: ``time_comm_s`` stays 0.

    Parameters
    ----------
    method, shards, x0
        The method with the run's seed, the n shards and x^0 (``RunSetup.pool_args``).
    hosts : int, optional
        Emulate H machines that each send one sum of their workers' messages (``messages.aggregate=host``): the
        workers split into H contiguous groups as the Dask engine places them on H Dask workers
        (:func:`isparse.engines.host.split_workers`), so the iterates equal a Dask run's on H workers bit for bit.
        None (the default): every logical worker is its own machine and sends its own message.

    Attributes
    ----------
    host : WorkerHost
        The one host, holding workers 0..n-1.
    timing : dict
        Cumulative seconds: ``compute_s`` (the workers' steps), ``comm_s`` (always 0).

    See Also
    --------
    isparse.engines.dask.DaskPool : the same protocol on a Dask cluster.
    """

    name = "inprocess"

    def __init__(self, method, shards, x0, hosts: int | None = None):
        self.method = method
        ids = list(range(len(shards)))
        self.host = WorkerHost(method, ids, method._host_shards(shards, ids), x0)
        self.groups = None if hosts is None else split_workers(ids, int(hosts))
        self.placement = {i: "inprocess" for i in ids}
        self.timing = {"compute_s": 0.0, "comm_s": 0.0}   # cumulative seconds; nothing is communicated

    def reference(self, x_star):
        """``Engine.reference`` (``WorkerHost.reference``: nothing travels)."""
        self.host.reference(x_star)

    def exchange(self, x, monitor=False, down=None):
        """``Engine.exchange``: one round of every worker (the batch is the emulated hosts' sums with ``hosts``)."""
        start = time.perf_counter()
        batch, _, _, memory = self.host.round(x if down is None else down, monitor)
        if self.groups is not None and sums_on_host(self.method, batch):
            batch = host_sums(self.method, batch, self.groups)
        self.timing["compute_s"] += time.perf_counter() - start
        return batch, memory

    def downlink_copies(self, workers) -> int:
        """Copies of x that cross a link when x goes to ``workers`` (``Engine.downlink_copies``): one per emulated
        host holding any of them (``hosts``), else one per worker."""
        if self.groups is None:
            return int(np.asarray(workers).size)
        return sum(bool(np.isin(g, workers).any()) for g in self.groups)

    def memory(self, x_star):
        """``Engine.memory`` (``WorkerHost.memory``)."""
        return self.host.memory(x_star)

    def snapshot(self) -> list:
        """``Engine.snapshot``: one, of workers 0..n-1."""
        return [self.host.snapshot()]

    def restore(self, snapshots, model=None) -> None:
        """``Engine.restore`` (from snapshots of any placement, e.g. a Dask run's)."""
        self.host.restore(snapshots, model)

    def counters(self) -> dict:
        """``Engine.counters``: ``time_compute_s`` and ``time_comm_s`` (always 0)."""
        return {"time_compute_s": self.timing["compute_s"], "time_comm_s": self.timing["comm_s"]}

    def stop(self):
        """End of a run: nothing to wait for."""
        pass

    def asynchronous(self, seed: int = 0, spread: float = 1.0):
        """A simulated asynchronous view (Algorithm 8): :class:`SimulatedAsync`."""
        return SimulatedAsync(self, seed=seed, spread=spread)

    def close(self):
        """Nothing to release (the host lives in this process)."""
        pass


class SimulatedAsync(AsynchronousView):
    """Asynchrony simulated in one process with a seeded delay model (an :class:`~isparse.engines.protocol.Engine`).

    Worker i's compute times are exponential with mean 1 + spread * i / n (heterogeneous workers,
    the slowest about 1 + spread times the fastest), drawn from a stream seeded by ``seed``. Events are
    processed in order of finishing time; a worker computes on the model it last received (Algorithm 8,
    asynchronous ISGD).

    Parameters
    ----------
    pool : InProcessPool
        The pool whose host runs the steps (its method must have no worker state).
    spread : float
        Heterogeneity of the workers' mean compute times (simulated time units, not seconds).
    """

    name = "inprocess"

    def __init__(self, pool, seed=0, spread=1.0):
        self.pool, self.method, self.placement = pool, pool.method, pool.placement
        n = pool.host.ids.size
        self.rng = np.random.default_rng(seed)
        self.means = 1.0 + spread * np.arange(n) / max(n, 1)
        self.models, self.events, self.now, self.idle = {}, [], 0.0, list(range(n))

    def exchange(self, x, monitor=False):
        """``Engine.exchange``: the next message to finish, in simulated time (its worker is the next idle one; no
        memory term, whatever ``monitor``)."""
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
        """End of a run: drop the pending events."""
        self.events.clear()
