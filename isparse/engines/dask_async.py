"""The truly asynchronous view of the Dask engine (Algorithm 8): each logical worker's step is one actor call on its
host, collected as it finishes."""

from __future__ import annotations

import time

from .dask_host import LOST
from .protocol import AsynchronousView


class DaskAsync(AsynchronousView):
    """Asynchronous view of a :class:`DaskPool`: worker i's step runs on its host as soon as it gets a model.

    Calls to the logical workers of one host queue behind each other (one actor thread per Dask
    worker), as the compute of one Dask worker would. Finished calls are found by polling
    ``ActorFuture.done()`` (actor futures support no ``wait``/``as_completed``). A lost Dask
    worker fails an asynchronous run.

    Parameters
    ----------
    pool : DaskPool
        The pool whose actors run the steps (its method must have no worker state).
    """

    name = "dask"

    def __init__(self, pool, poll_seconds=2e-4):
        self.pool, self.poll, self.method, self.placement = pool, poll_seconds, pool.method, pool.placement
        self.host_of = {i: h.actor for h in pool._hosts for i in h.ids}
        self.pending, self.idle = {}, sorted(self.host_of)

    def exchange(self, x, monitor=False):
        """``Engine.exchange``: start a step of every idle worker and return the first message to finish (its worker
        is the next idle one; no memory term, whatever ``monitor``); a RuntimeError if the finished call's Dask worker
        was lost."""
        for i in self.idle:
            self.pending[i] = self.host_of[i].step_one(i, x)
        while True:
            for i, fut in list(self.pending.items()):
                if fut.done():
                    del self.pending[i]
                    self.idle = [i]
                    try:
                        return fut.result(), None
                    except LOST as exc:
                        raise RuntimeError(f"a Dask worker was lost during an asynchronous run ({type(exc).__name__}: "
                                           f"{exc}); asynchronous runs do not recover from lost workers") from exc
            time.sleep(self.poll)

    def stop(self):
        """End of a run: wait for the pending calls, so that the actors stay consistent."""
        for fut in self.pending.values():   # let the last calls finish so the actors stay consistent
            fut.result()
        self.pending.clear()
