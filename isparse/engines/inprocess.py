"""The in-process engine: all n logical workers in the calling process."""

from __future__ import annotations

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

    def step(self, x):
        """Messages of all workers for the broadcast x, ordered by worker index."""
        return self.host.step(x)

    def lyapunov(self, x_star):
        return self.host.lyapunov(x_star)

    def close(self):
        pass
