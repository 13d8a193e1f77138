"""The Dask engine: logical workers live on Dask workers as actors; the master loop stays in the client.

Each Dask worker holds one :class:`~isparse.engines.host.WorkerHost` actor with the logical
workers placed there (contiguous, even split of 0..n-1 over the workers sorted by address).
Shards are scattered once when the actors are created, never per round; a round sends x to
each host and receives its messages. Actors keep state across calls without a scheduler task
per round; the cost is no resilience to a lost worker (ALGORITHMS.md, STACK.md).
Only this module imports ``distributed``.
"""

from __future__ import annotations

import numpy as np

from .host import WorkerHost


def place_workers(n: int, addresses: list[str]) -> dict[str, list[int]]:
    """Split logical workers 0..n-1 evenly and contiguously over the sorted Dask worker addresses."""
    addresses = sorted(addresses)[: max(1, min(n, len(addresses)))]
    return {a: [int(i) for i in part] for a, part in zip(addresses, np.array_split(np.arange(n), len(addresses)))}


class DaskPool:
    """Runs the logical workers' steps on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
        A connected client (``direct_to_workers=True`` lets actor calls skip the scheduler).
    method : Method
    shards : list of n shards
    rngs : list of n numpy Generators (``isparse.blocks.worker_streams``)
    x0 : ndarray of shape (d,)

    Attributes
    ----------
    placement : dict
        Logical worker index -> Dask worker address.
    """

    name = "dask"

    def __init__(self, client, method, shards, rngs, x0):
        addresses = list(client.scheduler_info()["workers"])
        if not addresses:
            raise RuntimeError("the Dask cluster has no workers")
        self.client = client
        self.plan = place_workers(len(shards), addresses)
        self.placement = {i: a for a, ids in self.plan.items() for i in ids}
        futures = []
        for addr, ids in self.plan.items():
            data = client.scatter([shards[i] for i in ids], workers=[addr], direct=True)
            futures.append(client.submit(WorkerHost, method, ids, data, [rngs[i] for i in ids], x0,
                                         workers=[addr], actor=True, allow_other_workers=False))
        self.hosts = [f.result() for f in futures]

    def step(self, x):
        """Messages of all workers for the broadcast x, ordered by worker index."""
        pending = [h.step(x) for h in self.hosts]  # all hosts compute concurrently
        return [msg for p in pending for msg in p.result()]

    def snapshot(self) -> dict:
        """Every logical worker's (state, random stream state), fetched from the actors."""
        out = {}
        for p in [h.snapshot() for h in self.hosts]:
            out.update(p.result())
        return out

    def restore(self, snapshot: dict) -> None:
        for p in [h.restore({i: snapshot[i] for i in ids}) for h, ids in zip(self.hosts, self.plan.values())]:
            p.result()

    def lyapunov(self, x_star):
        """Sum of the hosts' Lyapunov memory terms (a monitoring call, not counted as uplink)."""
        pending = [h.lyapunov(x_star) for h in self.hosts]
        return float(sum(p.result() for p in pending))

    def asynchronous(self, **_ignored):
        """A truly asynchronous view: one pending actor call per logical worker, collected as they finish."""
        return DaskAsync(self)

    def close(self):
        self.hosts = []


class DaskAsync:
    """Asynchronous view of a :class:`DaskPool`: worker i's step runs on its host as soon as it gets a model.

    Calls to the logical workers of one host queue behind each other (one actor thread per Dask
    worker), as the compute of one Dask worker would. Finished calls are found by polling
    ``ActorFuture.done()`` (actor futures support no ``wait``/``as_completed``).
    """

    def __init__(self, pool, poll_seconds=2e-4):
        self.pool, self.poll = pool, poll_seconds
        self.host_of = {i: h for h, ids in zip(pool.hosts, pool.plan.values()) for i in ids}
        self.pending = {}

    def start(self, x):
        for i in sorted(self.host_of):
            self.resume(i, x)

    def resume(self, i, x):
        self.pending[i] = self.host_of[i].step_one(i, x)

    def next(self):
        import time

        while True:
            for i, fut in list(self.pending.items()):
                if fut.done():
                    del self.pending[i]
                    return i, fut.result()
            time.sleep(self.poll)

    def stop(self):
        for fut in self.pending.values():   # let the last calls finish so the actors stay consistent
            fut.result()
        self.pending.clear()
