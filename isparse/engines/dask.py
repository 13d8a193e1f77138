"""The Dask engine: logical workers live on Dask workers as actors; the master loop stays in the client.

Each Dask worker holds one :class:`MeasuredHost` actor (a :class:`~isparse.engines.host.WorkerHost`
that also times its steps and sizes its replies) with the logical workers placed there
(contiguous, even split of 0..n-1 over the workers sorted by address). Shards are sent once
when the actors are created, never per round; a round sends x to each host and receives its
messages. Only this module imports ``distributed``.

Lost Dask workers
-----------------
Actors keep state across calls without a scheduler task per round, but die with their worker
(STACK.md). The pool therefore keeps, on the client, a snapshot of every logical worker's state
and random stream, taken every ``snapshot_every`` rounds, and the models x broadcast since.
When an actor call raises a communication error or does not answer within ``worker_timeout``
seconds, the logical workers of that Dask worker are recreated on the remaining Dask workers
from their shards (still held by the client), restored from the snapshot and replayed through
the rounds since it (their messages discarded), and the interrupted call is made again. Because
the replay uses the same models and the restored random streams, the recovered workers send
exactly the messages they would have sent: the iterates equal those of an uninterrupted run.
"""

from __future__ import annotations

import time

import numpy as np

from .host import WorkerHost

#: Exceptions of an actor call that mean "the Dask worker is gone or does not answer".
LOST = (OSError, TimeoutError)

#: Measured overhead of a serialized host reply over its analytic bytes (distributed 2026.8, numpy 2, pickle 5):
#: about 310 B per reply (Dask's serialization header and the pickled list) plus 77 B per message (the pickled
#: Message dataclass and the headers of its two arrays), within 1% for 1 to 32 messages of 1 to 1000 blocks.
REPLY_OVERHEAD_BYTES = 310
MESSAGE_OVERHEAD_BYTES = 77


def place_workers(n, addresses: list[str]) -> dict[str, list[int]]:
    """Split logical workers evenly and contiguously over the sorted Dask worker addresses.

    Parameters
    ----------
    n : int or list of int
        The logical workers 0..n-1, or an explicit ascending list of them.
    addresses : list of str
        Dask worker addresses.

    Returns
    -------
    dict
        address -> ascending logical worker ids; only as many addresses as there are workers.
    """
    ids = np.arange(n) if np.isscalar(n) else np.asarray(n, dtype=int)
    addresses = sorted(addresses)[: max(1, min(len(ids), len(addresses)))]
    return {a: [int(i) for i in part] for a, part in zip(addresses, np.array_split(ids, len(addresses)))}


class MeasuredHost(WorkerHost):
    """A :class:`WorkerHost` that reports, per round, its compute time and the serialized size of its reply."""

    def step_measured(self, x: np.ndarray) -> tuple[list, float, int]:
        """(messages, compute seconds, serialized bytes) of one round on the broadcast x.

        The compute time is ``time.perf_counter`` around the hosted workers' steps. The bytes are
        ``len(distributed.protocol.serialize_bytes(messages))``: the header and frames Dask sends for
        the list of this host's messages (the actor-reply envelope and TCP framing not included).
        """
        from distributed.protocol import serialize_bytes

        start = time.perf_counter()
        msgs = self.step(x)
        compute = time.perf_counter() - start
        return msgs, compute, len(serialize_bytes(msgs))

    def replay(self, xs: list) -> int:
        """Re-run the hosted workers' steps on the models ``xs`` in order, discarding the messages; returns len(xs)."""
        for x in xs:
            self.step(x)
        return len(xs)


class _Host:
    """One actor on one Dask worker: its address, logical worker ids and the futures that keep it alive."""

    def __init__(self, address, ids, actor, futures):
        self.address, self.ids, self.actor, self.futures = address, list(ids), actor, futures


class DaskPool:
    """Runs the logical workers' steps on a Dask cluster, surviving lost Dask workers.

    Parameters
    ----------
    client : distributed.Client
        A connected client (``direct_to_workers=True`` lets actor calls skip the scheduler).
    method : Method
    shards : list of n shards
        Kept by the pool (a reference, no copy) to recreate lost workers.
    rngs : list of n numpy Generators (``isparse.blocks.worker_streams``)
    x0 : ndarray of shape (d,)
    snapshot_every : int, default 50
        Rounds between the client-side snapshots of the workers' states used for recovery; 0 turns
        recovery off (a lost Dask worker then fails the run). Cost: one snapshot call per
        ``snapshot_every`` rounds, moving every worker state to the client (the size of a
        checkpoint's worker part: ISEGA n x d floats, ISAGA the SAGA tables), and keeping up to
        ``snapshot_every`` models (d floats each) to replay.
    worker_timeout : float, default 60
        Seconds an actor call may take before its Dask worker is declared lost.
    source : isparse.problems.source.ShardSource, optional
        ``data.load=on_worker``: each Dask worker reads its shards from the (shared) data file instead of
        receiving them; also used to recreate lost workers.
    on_recovery : callable(dict), optional
        Called after each recovery with the event (``round``, ``lost``, ``workers``, ``moved_to``,
        ``replayed_rounds``, ``seconds``).

    Attributes
    ----------
    placement : dict
        Logical worker index -> Dask worker address (updated after a recovery).
    restarts : int
        Lost Dask workers recovered from.
    timing : dict
        Cumulative seconds: ``compute_s`` (per round, the slowest host's compute measured inside the
        actor), ``comm_s`` (per round, the round trip minus that compute).
    serialized_bytes, analytic_bytes, replies : int
        Cumulative :meth:`MeasuredHost.step_measured` bytes, ``Message.nbytes`` of the same messages,
        and host replies, over the rounds run (see :meth:`traffic`).

    Raises
    ------
    RuntimeError
        The cluster has no workers, or every Dask worker was lost.
    """

    name = "dask"

    def __init__(self, client, method, shards, rngs, x0, *, snapshot_every: int = 50, worker_timeout: float = 60.0,
                 on_recovery=None, source=None):
        addresses = list(client.scheduler_info()["workers"])
        if not addresses:
            raise RuntimeError("the Dask cluster has no workers")
        self.client, self.method, self.shards, self.x0 = client, method, shards, np.asarray(x0)
        self.source = source
        self.snapshot_every, self.worker_timeout, self.on_recovery = int(snapshot_every), float(worker_timeout), on_recovery
        self._hosts = [self._make_host(addr, ids, [rngs[i] for i in ids])
                       for addr, ids in place_workers(len(shards), addresses).items()]
        for h in self._hosts:
            h.actor = h.futures[-1].result(timeout=self.worker_timeout)
        self.rounds, self.restarts, self.events, self._dead = 0, 0, [], set()
        self._snapshot, self._snapshot_round, self._since = None, -1, []
        self.timing = {"compute_s": 0.0, "comm_s": 0.0}
        self.serialized_bytes = self.analytic_bytes = self.replies = self.messages = 0

    # -- placement ---------------------------------------------------------------------------------
    def _make_host(self, addr, ids, rngs) -> _Host:
        """Give ``addr`` the shards of ``ids`` once (sent, or read there from ``source``) and start a host actor
        there (not waited for)."""
        if self.source is not None:   # one task on addr reads the file and returns the list of shards
            data = [self.client.submit(self.source.subset(ids).load, workers=[addr], allow_other_workers=False,
                                       pure=False)]
            shards = data[0]
        else:
            data = shards = self.client.scatter([self.shards[i] for i in ids], workers=[addr], direct=True)
        fut = self.client.submit(MeasuredHost, self.method, ids, shards, rngs, self.x0, workers=[addr], actor=True,
                                 allow_other_workers=False, pure=False)
        return _Host(addr, ids, None, [*data, fut])

    @property
    def plan(self) -> dict[str, list[int]]:
        """Dask worker address -> the logical workers it holds now."""
        return {h.address: list(h.ids) for h in self._hosts}

    @property
    def placement(self) -> dict:
        """Logical worker index -> the address of the Dask worker that holds it now."""
        return {i: h.address for h in self._hosts for i in h.ids}

    # -- calls with recovery -----------------------------------------------------------------------
    def _call(self, name, args_of, hosts=None) -> dict:
        """Call actor method ``name`` on every host (``args_of(host)`` gives its arguments), concurrently.

        Returns {host: result}. Hosts whose call fails with a communication error or times out are
        recovered (:meth:`_recover`) and the call is made again on their replacements.
        """
        hosts = list(self._hosts if hosts is None else hosts)
        pending, lost, out = {}, [], {}
        for h in hosts:
            try:
                pending[h] = getattr(h.actor, name)(*args_of(h))
            except LOST as exc:
                lost.append((h, exc))
        for h, fut in pending.items():
            try:
                out[h] = fut.result(timeout=self.worker_timeout)
            except LOST as exc:
                lost.append((h, exc))
        if lost:
            replacements = self._recover(lost)
            out.update(self._call(name, args_of, replacements))
        return out

    def _recover(self, lost) -> list:
        """Recreate the logical workers of the lost hosts on the remaining Dask workers; return the new hosts."""
        start = time.perf_counter()
        lost_hosts = [h for h, _ in lost]
        reason = "; ".join(f"{h.address}: {type(e).__name__}: {e}" for h, e in lost)
        if self.snapshot_every <= 0 or self._snapshot is None:
            raise RuntimeError(f"Dask worker(s) lost ({reason}) and recovery is off (cluster.snapshot_every=0)")
        self._dead.update(h.address for h in lost_hosts)
        for h in lost_hosts:
            self._hosts.remove(h)
            try:
                self.client.cancel(h.futures, force=True)
            except Exception:   # the futures of a dead worker may already be gone
                pass
        alive = [a for a in self.client.scheduler_info()["workers"] if a not in self._dead]
        if not alive:
            raise RuntimeError(f"every Dask worker was lost ({reason}); cannot recover")
        ids = sorted(i for h in lost_hosts for i in h.ids)
        fresh = [self._make_host(addr, part, [np.random.default_rng() for _ in part])
                 for addr, part in place_workers(ids, alive).items()]
        for h in fresh:
            h.actor = h.futures[-1].result(timeout=self.worker_timeout)
        since = list(self._since)
        pending = [(h, h.actor.restore({i: self._snapshot[i] for i in h.ids})) for h in fresh]
        for _, p in pending:
            p.result(timeout=self.worker_timeout)
        for _, p in [(h, h.actor.replay(since)) for h in fresh]:
            p.result(timeout=self.worker_timeout * max(1, len(since)))
        self._hosts = sorted(self._hosts + fresh, key=lambda h: h.ids[0])
        self.restarts += len(lost_hosts)
        event = {"round": self.rounds, "lost": sorted(h.address for h in lost_hosts), "workers": ids,
                 "moved_to": {h.address: h.ids for h in fresh}, "replayed_rounds": len(since),
                 "reason": reason, "seconds": time.perf_counter() - start}
        self.events.append(event)
        if self.on_recovery is not None:
            self.on_recovery(event)
        return fresh

    # -- the pool interface ------------------------------------------------------------------------
    def step(self, x):
        """Messages of all workers for the broadcast x, ordered by worker index.

        Every ``snapshot_every`` rounds (from round 0) the workers' states are first copied to the client.
        """
        if self.snapshot_every > 0 and self.rounds % self.snapshot_every == 0 and self._snapshot_round != self.rounds:
            self._snapshot, self._snapshot_round, self._since = self.snapshot(), self.rounds, []
        start = time.perf_counter()
        out = self._call("step_measured", lambda h: (x,))
        wall = time.perf_counter() - start
        compute = max(c for _, c, _ in out.values())
        self.timing["compute_s"] += compute
        self.timing["comm_s"] += max(0.0, wall - compute)
        messages = sorted((m for msgs, _, _ in out.values() for m in msgs), key=lambda m: m.worker)
        self.serialized_bytes += sum(b for _, _, b in out.values())
        self.analytic_bytes += sum(m.nbytes for m in messages)
        self.replies += len(out)
        self.messages += len(messages)
        if self.snapshot_every > 0:
            self._since.append(np.array(x, copy=True))
        self.rounds += 1
        return messages

    def traffic(self) -> dict:
        """The measured uplink against the analytic one, over the rounds this pool ran.

        Returns
        -------
        dict
            ``uplink_bytes_serialized`` and ``uplink_bytes_analytic`` (bytes), ``uplink_serialized_ratio``
            (their ratio), ``uplink_overhead_per_reply`` (bytes of (serialized - analytic) per host reply;
            a reply carries the messages of all logical workers on one Dask worker), ``replies``, ``messages``,
            and ``uplink_bytes_expected`` = analytic + ``REPLY_OVERHEAD_BYTES`` x replies +
            ``MESSAGE_OVERHEAD_BYTES`` x messages (the documented overhead model).
        """
        expected = self.analytic_bytes + REPLY_OVERHEAD_BYTES * self.replies + MESSAGE_OVERHEAD_BYTES * self.messages
        return {"uplink_bytes_serialized": self.serialized_bytes, "uplink_bytes_analytic": self.analytic_bytes,
                "uplink_bytes_expected": expected, "messages": self.messages,
                "uplink_serialized_ratio": self.serialized_bytes / max(1, self.analytic_bytes),
                "uplink_overhead_per_reply": (self.serialized_bytes - self.analytic_bytes) / max(1, self.replies),
                "replies": self.replies}

    def snapshot(self) -> dict:
        """Every logical worker's (state, random stream state), fetched from the actors."""
        out = {}
        for part in self._call("snapshot", lambda h: ()).values():
            out.update(part)
        return out

    def restore(self, snapshot: dict) -> None:
        """Put back every worker's state and stream (a checkpoint's); it also becomes the recovery snapshot."""
        self._snapshot, self._snapshot_round, self._since = dict(snapshot), self.rounds, []
        self._call("restore", lambda h: ({i: snapshot[i] for i in h.ids},))

    def lyapunov(self, x_star):
        """Sum of the hosts' Lyapunov memory terms (a monitoring call, not counted as uplink)."""
        return float(sum(self._call("lyapunov", lambda h: (x_star,)).values()))

    def asynchronous(self, **_ignored):
        """A truly asynchronous view: one pending actor call per logical worker, collected as they finish
        (no recovery from lost workers)."""
        return DaskAsync(self)

    def close(self):
        self._hosts = []


class DaskAsync:
    """Asynchronous view of a :class:`DaskPool`: worker i's step runs on its host as soon as it gets a model.

    Calls to the logical workers of one host queue behind each other (one actor thread per Dask
    worker), as the compute of one Dask worker would. Finished calls are found by polling
    ``ActorFuture.done()`` (actor futures support no ``wait``/``as_completed``). A lost Dask
    worker fails an asynchronous run.
    """

    def __init__(self, pool, poll_seconds=2e-4):
        self.pool, self.poll = pool, poll_seconds
        self.host_of = {i: h.actor for h in pool._hosts for i in h.ids}
        self.pending = {}

    def start(self, x):
        for i in sorted(self.host_of):
            self.resume(i, x)

    def resume(self, i, x):
        self.pending[i] = self.host_of[i].step_one(i, x)

    def next(self):
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
