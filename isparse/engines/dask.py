"""The Dask engine: logical workers live on Dask workers as actors; the master loop stays in the client.

Each Dask worker holds one :class:`DaskHost` actor (a :class:`~isparse.engines.host.WorkerHost`) with the logical
workers placed there (:func:`place_workers`), their shards stacked. Shards are sent once when the actors are created,
never per round; a round sends x to each host and receives one batch of messages per host. ``distributed`` is
imported only for this engine (here, by its hosts, and by a host's ``measure``).

How a round travels (``rounds``). Dask starts, places and recovers the hosts; by default (``rounds="stream"``) the
round itself then goes over one persistent TCP connection per host, opened once after the host is created (and after
each recovery): the host listens, and then serves the stream, from a thread of its own in its Dask worker's process
(blocking sockets; the round runs in that thread), on the worker's own host (port 0), with the worker's TLS context
when the cluster uses TLS; the client connects with its own TLS context (both from the cluster's
``distributed.security.Security``). The host reads nothing of a connection as a message before it has proved
the stream's secret, which the master got in the reply of Dask's own ``open_stream`` call (the wire and its handshake:
``isparse.engines.stream``). A message is the pickled (protocol 5) arguments or reply with the arrays'
buffers as frames of their own, behind a 16 B prelude and the frame lengths, at most what the other end's method
can send (:func:`request_limit`, :func:`reply_limit`). The master writes every host's request,
then reads every reply, with blocking sockets in the calling thread: no event loop and no thread hand-over on either
side; a round whose request (or last reply) is larger than 256 KB goes to every host at once instead, one thread per
host (``_PARALLEL_BYTES``). Dask's comm layer (``distributed.comm``) was measured first for this: 1.0-1.2 ms per
bare 2-host round trip (an echo server per process, ~1 KB messages) on this project's 2-core machine, against
0.1-0.3 ms for plain sockets, most of the difference in Python on both ends; of the plain-socket servers, one on the
Dask worker's event loop took 0.55 ms and one in a thread of its own 0.32 ms
(:class:`~isparse.engines.stream.RoundServer`).
``rounds="actor"`` makes one Dask actor call per host per round instead (the earlier path, kept for
comparison; docs/benchmarks.md item 2 measures both). The other calls (x* for the Lyapunov memory term, sent once:
``reference``; snapshot, restore, replay, memory, the asynchronous view) are actor calls either way.

Notes
-----
Lost Dask workers. Actors keep state across calls without a scheduler task per round, but die with their worker
(docs/algorithms.md §8). The pool therefore keeps, in a file of the client (:class:`Recovery`: not in its memory), a
snapshot of every host's worker state and step counters, taken every ``snapshot_every`` rounds (more often for large
d: :data:`REPLAY_BYTES`), and the models x broadcast since.
When an actor call or a round's stream raises a communication error (a closed stream: the Dask worker died) or
does not answer within ``worker_timeout`` seconds, the logical workers of that Dask worker are recreated on the
remaining Dask workers from their shards (still held by the client), given x* again if the lost ones had it, restored
from the snapshot and replayed through the rounds since it (their messages discarded), and the interrupted call is made
again (a round over the new hosts' streams, opened after the recovery). Because every random draw is a function of
(seed, i, t) and the replay uses the same models, the recovered workers send exactly the messages they would have sent:
the iterates equal those of an uninterrupted run.
"""

from __future__ import annotations

import time
import weakref

import numpy as np

from ..compression.messages import merge
from .dask_async import DaskAsync
from .dask_host import ACTOR_LOST, LOST, STREAM_LOG, DaskHost, unpack_reply
from .hooks import forget_round
from .host import split_workers
from .stream import Stream, frames as _frames
from .traffic import (CODED_MESSAGE_OVERHEAD_BYTES, CODED_REPLY_EXTRA_BYTES, DENSE_MESSAGE_OVERHEAD_BYTES,
                      REPLY_OVERHEAD_BYTES, STREAM_CODED_MESSAGE_OVERHEAD_BYTES, STREAM_CODED_REPLY_EXTRA_BYTES,
                      STREAM_DENSE_MESSAGE_OVERHEAD_BYTES, STREAM_REPLY_OVERHEAD_BYTES,
                      STREAM_SUPPORT_MESSAGE_EXTRA_BYTES, SUPPORT_MESSAGE_EXTRA_BYTES, WORKER_OVERHEAD_BYTES,
                      expected_traffic, reply_limit, request_limit)
from .recovery import Recovery

#: the most bytes of models (x, d float64 each) kept to replay a recovered host's rounds, which a recovery reads back
#: at once: the recovery snapshot is taken often enough to stay below it (``DaskPool.snapshot_interval``)
REPLAY_BYTES = 32 << 20


#: the values of ``DaskPool(rounds=...)`` (``cluster.rounds``)
ROUNDS = ("stream", "actor")


def place_workers(n, addresses: list[str]) -> dict[str, list[int]]:
    """Split the logical workers (0..n-1, or an ascending list ``n``) evenly and contiguously over the sorted Dask
    worker ``addresses``: address -> ascending logical worker ids, only as many addresses as there are workers."""
    ids = np.arange(n) if np.isscalar(n) else np.asarray(n, dtype=int)
    parts = split_workers(ids, len(addresses))
    return {a: [int(i) for i in part] for a, part in zip(sorted(addresses), parts)}


#: a round whose request (or last reply) is larger than this goes to every host at once, one thread per host: a
#: blocking send of a message larger than the socket's buffer waits for the link, and host after host those waits
#: add up (measured: x of 8 MB to 16 hosts on 100 Mbit links took 16 x 0.64 s a round instead of 0.64 s)
_PARALLEL_BYTES = 1 << 18



class _Host:
    """One actor on one Dask worker: its address, logical worker ids, the futures that keep it alive and, on the stream
    path, its round connection (``stream``: the address it listened on, ``comm``: the client's end)."""

    def __init__(self, address, ids, actor, futures):
        self.address, self.ids, self.actor, self.futures = address, list(ids), actor, futures
        self.stream, self.comm = None, None


def _send_receive(comm, parts, size: int, deadline: float):
    """One host's half of a round from a thread of its own: send the request, read the reply (``_Stream.receive``)."""
    comm.send(parts, size, deadline)
    return comm.receive(deadline)


def _close_streams(streams: set) -> None:
    """Close the streams left in ``streams`` (a pool dropped without ``close()``)."""
    for s in list(streams):
        s.close()
    streams.clear()


class DaskPool:
    """Runs the logical workers' batched steps on a Dask cluster, surviving lost Dask workers (an ``Engine``).

    Parameters
    ----------
    client : distributed.Client
        A connected client (``direct_to_workers=True`` lets actor calls skip the scheduler).
    method, shards, x0
        As :class:`~isparse.engines.inprocess.InProcessPool`'s; the shards are kept (a reference, no copy) to
        recreate lost workers.
    snapshot_every : int, default 50
        Rounds between the snapshots of the workers' states used for recovery (:class:`Recovery`), at most
        :data:`REPLAY_BYTES` / (8 d) (so that the models kept to replay never exceed it: 4 rounds at d = 2^20); 0
        turns recovery off (a lost Dask worker then fails the run). Cost: one state fetch per interval (ISEGA n x d
        floats, ISAGA the SAGA tables; shared with a checkpoint of the same round), written to the client's file with
        up to an interval of models (d floats each) to replay; read back by a recovery.
    worker_timeout : float, default 60
        Seconds an actor call (or a round over the streams) may take before its Dask worker is declared lost.
    measure_every : int, default 50
        Every this many rounds (from round 0) the serialized size of each host's reply is measured (bytes: what Dask
        sends for it on the actor path, what the client reads from the stream on the stream path).
    source : optional
        Where the shards are made instead of being sent from the client: ``submit(client, address, ids)`` returns the
        futures (the last: the list of the shards of ``ids``, in order) of tasks that make them on that Dask
        worker, and ``plan`` (address -> ascending logical ids, or None: :func:`place_workers`) says where each
        worker's shards already are. :class:`isparse.data.on_worker.ShardSource` (``data.load=on_worker``: each Dask
        worker reads its rows of the shared data file), :class:`isparse.data.dask_collection.DaskRows` (a Dask
        collection's partitions, where they are). Also used to recreate lost workers.
    aggregate : bool, default False
        Each host sends one sum of its workers' messages where the method allows it (``messages.aggregate=host``:
        :func:`~isparse.engines.hooks.sums_on_host`), one float64 vector on the union of their coordinates;
        x is counted once per host on the downlink (:meth:`downlink_copies`). The iterates equal the in-process
        engine's with ``hosts`` = the number of Dask workers, bit for bit, also after a recovery (a lost host's
        workers are recreated together, as one host, on a remaining Dask worker).
    on_recovery : callable(dict), optional
        Called after each recovery with the event (``round``, ``lost``, ``workers``, ``moved_to``,
        ``replayed_rounds``, ``seconds``).
    rounds : {"stream", "actor"}, default "stream"
        How a round travels (``cluster.rounds``; module docstring). ``"stream"``: over one persistent connection per
        host (TLS when the cluster uses TLS), opened once after the hosts are created and after each recovery; the
        round runs in a thread of the host's own in its Dask worker's process. ``"actor"``: one Dask actor call per host per round.

    Attributes
    ----------
    restarts : int
        Lost Dask workers recovered from.
    timing : dict
        Cumulative seconds: ``compute_s`` (per round, the slowest host's compute measured inside the
        actor), ``comm_s`` (per round, the round trip minus that compute).

    Raises
    ------
    RuntimeError
        The cluster has no workers, or every Dask worker was lost.
    ValueError
        ``rounds`` is not one of :data:`ROUNDS`.
    OSError
        ``rounds="stream"``: a host's round stream could not be opened within ``worker_timeout`` seconds.
    """

    name = "dask"

    def __init__(self, client, method, shards, x0, *, snapshot_every: int = 50, worker_timeout: float = 60.0,
                 measure_every: int = 50, on_recovery=None, source=None, aggregate: bool = False,
                 rounds: str = "stream"):
        if rounds not in ROUNDS:
            raise ValueError(f"rounds must be one of {', '.join(ROUNDS)}; got {rounds!r}")
        self.rounds_via = rounds
        addresses = list(client.scheduler_info()["workers"])
        if not addresses:   # the client's view may lag (seen once under load): ask the scheduler to wait for one
            try:
                client.wait_for_workers(1, timeout=float(worker_timeout))
            except (TimeoutError, OSError):
                pass
            addresses = list(client.scheduler_info()["workers"])
        if not addresses:
            raise RuntimeError(f"the Dask cluster has no workers (waited {float(worker_timeout):g} s for one)")
        self.client, self.method, self.shards, self.x0 = client, method, shards, np.asarray(x0)
        self.source, self.aggregate = source, bool(aggregate)
        self.snapshot_every, self.worker_timeout, self.on_recovery = int(snapshot_every), float(worker_timeout), on_recovery
        #: rounds between recovery snapshots: snapshot_every, fewer when the models to replay would pass REPLAY_BYTES
        self.snapshot_interval = min(self.snapshot_every, max(1, REPLAY_BYTES // (8 * max(1, np.asarray(x0).size))))
        self.measure_every = max(1, int(measure_every))
        plan = source.plan if source is not None and source.plan is not None else place_workers(len(shards), addresses)
        self._hosts = [self._make_host(addr, ids) for addr, ids in plan.items()]
        self._bind(self._hosts)
        self.rounds, self.restarts, self.events, self._dead = 0, 0, [], set()
        self._recovery = None   # the recovery snapshot and the models since (snapshot_every > 0)
        if self.snapshot_every > 0:
            self._recovery = Recovery()
            weakref.finalize(self, Recovery.close, self._recovery)
        # the model the hosts last computed at (x^0 at the start); a compressed downlink's hosts keep it (w) and
        # update it from each round's message, and the recovery snapshot goes with the one of its round
        self._model = self.x0
        self._x_star = None   # x*, given to every host once (reference) and to the hosts a recovery makes
        self.timing = {"compute_s": 0.0, "comm_s": 0.0}
        self.measured = {"rounds": 0, "replies": 0, "workers": 0, "serialized": 0, "analytic": 0,
                         "down_messages": 0, "down_serialized": 0, "down_analytic": 0.0}
        self.analytic_bytes = 0
        self._streams = set()   # the open round streams (closed by close(), or when the pool is dropped)
        self._io, self._reply_bytes = None, 0   # the threads of large rounds (made on first use); last reply's size
        if rounds == "stream":
            weakref.finalize(self, _close_streams, self._streams)
            try:
                self._open_streams(self._hosts)
            except BaseException:
                self.close()
                raise

    # -- placement ---------------------------------------------------------------------------------
    def _make_host(self, addr, ids) -> _Host:
        """Give ``addr`` the shards of ``ids`` once (sent, or read there from ``source``) and start a host actor
        there (not waited for)."""
        if self.source is not None:   # the shards are made on addr (read there, or from the rows it holds)
            data = self.source.submit(self.client, addr, ids)
            shards = data[-1]
        else:
            # hash=False: keys of this pool's own. Content-hashed keys are shared by every pool of equal shards on
            # the client (isparse-plan's probes, a benchmark's variants), so one pool's release could race another's
            # scatter of the same key (suspected in two 60 s actor timeouts of isparse-plan under load; not reproduced)
            data = shards = self.client.scatter(self.method._host_shards(self.shards, ids), workers=[addr], direct=True,
                                                hash=False)
        fut = self.client.submit(DaskHost, self.method, ids, shards, self.x0, self.aggregate, workers=[addr], actor=True,
                                 allow_other_workers=False, pure=False)
        return _Host(addr, ids, None, [*data, fut])

    def _bind(self, hosts) -> None:
        """Wait for the actors of ``hosts``; each handle is bound to this pool's client (an Actor binds to the current
        client when it is unpickled: with several clients in one process, another's would proxy its calls through
        a scheduler that does not know the worker)."""
        with self.client.as_current():
            for h in hosts:
                h.actor = h.futures[-1].result(timeout=self.worker_timeout)

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
            except RuntimeError as exc:   # the scheduler saw the worker leave first: the actor's future is lost
                if not str(exc).startswith(ACTOR_LOST):
                    raise
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

    def _open_streams(self, hosts) -> None:
        """Have every host of ``hosts`` listen (:meth:`DaskHost.open_stream`, concurrently) and connect to each once,
        with the client's TLS context (``security.get_connection_args("client")``) where the host listens with TLS.
        An OSError when a host cannot be reached within ``worker_timeout`` seconds (or needs TLS the client does not
        have), a TimeoutError when it does not open its listener in that time."""
        hosts = list(hosts)
        self._connect_streams(hosts, self._listen(hosts))

    def _listen(self, hosts) -> list:
        """Have every host of ``hosts`` listen for its stream (:meth:`DaskHost.open_stream`, concurrently); their
        (address, secret) pairs, in order."""
        limit = request_limit(self.x0.size)
        pending = [h.actor.open_stream(limit, self.worker_timeout) for h in hosts]
        return [p.result(timeout=self.worker_timeout) for p in pending]

    def _connect_streams(self, hosts, listened) -> None:
        """Connect to each host's stream and prove its secret."""
        from distributed.comm.addressing import get_address_host_port

        ssl_context = self.client.security.get_connection_args("client")["ssl_context"]
        for h, (address, secret) in zip(hosts, listened):
            if address.startswith("tls://") and ssl_context is None:
                raise OSError(f"the round stream {address} needs TLS but the client has no TLS context")
            host, port = get_address_host_port(address)
            h.stream = address
            h.comm = Stream(host, port, secret, reply_limit(self.x0.size, len(h.ids)), self.worker_timeout,
                            ssl_context if address.startswith("tls://") else None)
            self._streams.add(h.comm)

    def _drop_streams(self, hosts) -> None:
        """Close the round streams of ``hosts`` (a host sees the end of its stream and forgets it)."""
        for h in hosts:
            if h.comm is not None:
                self._streams.discard(h.comm)
                h.comm.close()
                h.comm = None

    def _stream_round(self, args, measure: bool, hosts=None) -> dict:
        """One round over the hosts' streams (default: all), with :meth:`WorkerHost.round`'s ``args`` passed on as
        they are: the request to every host first, then every reply (the hosts compute meanwhile; the replies are read
        in host order, each as soon as it is there). {host: (batch, compute seconds, reply bytes read if ``measure``,
        memory)}; hosts whose stream fails (closed: their Dask worker died) or does not answer within
        ``worker_timeout`` seconds of the round's start are recovered (:meth:`_recover`) and the round is made again
        over their replacements' streams. What ``WorkerHost.round`` raised on a host is raised here."""
        hosts = list(self._hosts if hosts is None else hosts)
        deadline = time.monotonic() + self.worker_timeout
        parts, size = _frames(args)
        lost, got = [], {}
        if len(hosts) > 1 and max(size, self._reply_bytes) > _PARALLEL_BYTES:   # every host at once
            if self._io is None:
                from concurrent.futures import ThreadPoolExecutor

                self._io = ThreadPoolExecutor(max_workers=len(self._hosts), thread_name_prefix="isparse-round")
            pending = {h: self._io.submit(_send_receive, h.comm, parts, size, deadline) for h in hosts}
            for h, fut in pending.items():
                try:
                    got[h] = fut.result()
                except LOST as exc:
                    lost.append((h, exc))
        else:   # small messages: host after host from this thread (no hand-over to other threads)
            sent = []
            for h in hosts:
                try:
                    h.comm.send(parts, size, deadline)
                    sent.append(h)
                except LOST as exc:
                    lost.append((h, exc))
            for h in sent:
                try:
                    got[h] = h.comm.receive(deadline)
                except LOST as exc:
                    lost.append((h, exc))
        if got:   # the next round goes to every host at once if this one's replies were large
            self._reply_bytes = max(nbytes for _, nbytes in got.values())
        out, failure = {}, None
        for h, ((ok, reply), nbytes) in got.items():
            if not ok:
                failure = failure or reply
                continue
            batch, compute, _, memory = reply
            out[h] = (batch, compute, nbytes if measure else None, memory)
        if failure is not None:
            raise failure
        if lost:
            replacements = self._recover(lost)
            out.update(self._stream_round(args, measure, replacements))
        return out

    def _recover(self, lost) -> list:
        """Recreate the logical workers of the lost hosts on the remaining Dask workers; return the new hosts."""
        start = time.perf_counter()
        lost_hosts = [h for h, _ in lost]
        reason = "; ".join(f"{h.address}: {type(e).__name__}: {e}" for h, e in lost)
        if self._recovery is None or self._recovery.round < 0:
            raise RuntimeError(f"Dask worker(s) lost ({reason}) and recovery is off (cluster.snapshot_every=0)")
        self._dead.update(h.address for h in lost_hosts)
        self._drop_streams(lost_hosts)
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
        if self.aggregate:   # each lost host's workers stay one group (one sum): the same iterates, bit for bit
            alive = sorted(alive)
            fresh = [self._make_host(alive[j % len(alive)], h.ids) for j, h in enumerate(lost_hosts)]
        else:
            fresh = [self._make_host(addr, part) for addr, part in place_workers(ids, alive).items()]
        self._bind(fresh)
        since = self._recovery.models(self.x0.size)
        calls = [h.actor.restore(self._recovery.snapshot(), self._recovery.model) for h in fresh]
        if self._x_star is not None:   # the lost hosts kept x* for the memory term: so do their replacements
            calls += [h.actor.reference(self._x_star) for h in fresh]
        for p in calls:
            p.result(timeout=self.worker_timeout)
        for p in [h.actor.replay(since) for h in fresh]:
            p.result(timeout=self.worker_timeout * max(1, len(since)))
        if self.rounds_via == "stream":
            self._open_streams(fresh)
        self._hosts = sorted(self._hosts + fresh, key=lambda h: h.ids[0])
        self.restarts += len(lost_hosts)
        event = {"round": self.rounds, "lost": sorted(h.address for h in lost_hosts), "workers": ids,
                 "moved_to": {h.address: h.ids for h in fresh}, "replayed_rounds": len(since),
                 "reason": reason, "seconds": time.perf_counter() - start}
        self.events.append(event)
        if self.on_recovery is not None:
            self.on_recovery(event)
        return fresh

    # -- the engine protocol -----------------------------------------------------------------------
    def reference(self, x_star):
        """``Engine.reference``: one actor call per host, concurrently (a lost host is recovered from); the pool keeps
        x* for the hosts a recovery makes."""
        self._x_star = np.asarray(x_star, dtype=float)
        self._call("reference", lambda h: (self._x_star,))

    def exchange(self, x, monitor=False, down=None):
        """``Engine.exchange``: one request and one reply per host, over its stream or as an actor call (``rounds``).

        Every ``snapshot_interval`` rounds (from round 0) the workers' states are first fetched (:class:`Recovery`);
        every ``measure_every`` rounds the hosts also size their replies (and the downlink message is sized); x is kept to
        replay a recovered host's rounds. A lost Dask worker is recovered from (the module's Notes) and the round made
        again on its replacement; a RuntimeError when recovery is off (``snapshot_every=0``) or every Dask worker was
        lost.
        """
        forget_round(self.method)   # the last round's sets: redrawn by the master step, not held beside the next
        if self._recovery is not None and self.rounds % self.snapshot_interval == 0 and \
                self._recovery.round != self.rounds:
            self.snapshot()
        measure = self.rounds % self.measure_every == 0
        start = time.perf_counter()
        message = x if down is None else down
        if self.rounds_via == "stream":
            out = self._stream_round((message, True) if monitor else (message,), measure)
        else:
            # only x when nothing else is asked: Dask serializes every argument on its own (about 0.1 ms each)
            args = (message,) if not monitor and not measure else (message, bool(monitor), measure)
            out = {h: unpack_reply(r) for h, r in self._call("round", lambda h: args).items()}
        wall = time.perf_counter() - start
        compute = max(c for _, c, _, _ in out.values())
        self.timing["compute_s"] += compute
        self.timing["comm_s"] += max(0.0, wall - compute)
        batch = merge([b for b, _, _, _ in out.values()])
        analytic = int(batch.bytes_per_worker(self.method.blocks.m).sum())
        self.analytic_bytes += analytic
        if measure:
            m = self.measured
            m["rounds"] += 1
            m["replies"] += len(out)
            m["workers"] += batch.k
            m["serialized"] += sum(s for _, _, s, _ in out.values())
            m["analytic"] += analytic
            from distributed.protocol import serialize_bytes

            m["down_messages"] += 1
            m["down_serialized"] += _frames((message,))[1] if self.rounds_via == "stream" else \
                len(serialize_bytes(message))
            m["down_analytic"] += self.downlink_bytes_per_copy
        if self._recovery is not None:
            self._recovery.add(x)
            self._model = np.array(x, copy=True)   # a copy: the loop may reuse x's memory
        else:
            self._model = x
        self.rounds += 1
        memory = float(sum(v for _, _, _, v in out.values())) if monitor else None
        return batch, memory

    @property
    def downlink_bytes_per_copy(self) -> float:
        """The analytic bytes of one round's downlink message to one host: d x 8, or the compressed downlink's
        (``Downlink.bytes_per_copy``)."""
        down = getattr(self.method, "downlink", None)
        return float(self.x0.size * 8) if down is None else down.bytes_per_copy

    def downlink_copies(self, workers) -> int:
        """``Engine.downlink_copies``: one per host holding any of ``workers`` with ``aggregate``, else one per
        worker."""
        if not self.aggregate:
            return int(np.asarray(workers).size)
        wanted = set(np.asarray(workers).tolist())
        return sum(1 for h in self._hosts if wanted.intersection(h.ids))

    def memory(self, x_star):
        """``Engine.memory``: the sum of the hosts' terms (a monitoring call, not counted as uplink); an ``x_star``
        other than the one the hosts keep is first given to them (:meth:`reference`)."""
        if self._x_star is None or not np.array_equal(x_star, self._x_star):
            self.reference(x_star)
        return float(sum(self._call("memory", lambda h: ()).values()))

    def traffic(self) -> dict:
        """The measured uplink and downlink against the analytic bytes and the overhead model
        (:func:`~isparse.engines.traffic.expected_traffic`)."""
        return expected_traffic(self.measured, self.rounds_via, self.method.codec.exact,
                                getattr(self.method, "downlink", None))

    def counters(self) -> dict:
        """``Engine.counters``, and ``worker_restarts``, ``uplink_bytes_serialized`` and ``downlink_bytes_serialized``
        (bytes: the measured rounds' ratio of serialized to analytic bytes applied to all rounds' analytic bytes; the
        downlink's analytic bytes are copies x ``downlink_bytes_per_copy``)."""
        m = self.measured
        ratio = m["serialized"] / max(1, m["analytic"])
        down = m["down_serialized"] / max(1.0, m["down_analytic"])
        copies = self.downlink_copies(np.asarray(sorted(self.placement)))
        return {"time_compute_s": self.timing["compute_s"], "time_comm_s": self.timing["comm_s"],
                "worker_restarts": self.restarts, "uplink_bytes_serialized": int(round(ratio * self.analytic_bytes)),
                "downlink_bytes_serialized": int(round(down * self.rounds * copies * self.downlink_bytes_per_copy))}

    def snapshot(self) -> list:
        """``Engine.snapshot``, one per host, fetched from the actors; it also becomes the recovery snapshot (a
        checkpoint and the recovery snapshot of the same round share the fetch)."""
        if self._recovery is not None and self._recovery.round == self.rounds:
            return self._recovery.snapshot()
        snaps = list(self._call("snapshot", lambda h: ()).values())
        if self._recovery is not None:
            self._recovery.keep(snaps, self.rounds, self._model)
        return snaps

    def restore(self, snapshots, model=None) -> None:
        """``Engine.restore`` (e.g. an in-process run's snapshots, or one with another number of Dask workers); they
        also become the recovery snapshot."""
        snapshots = list(snapshots)
        if model is not None:
            self._model = np.asarray(model, dtype=float)
        if self._recovery is not None:
            self._recovery.keep(snapshots, self.rounds, self._model)
        self._call("restore", lambda h: (snapshots, model))

    def stop(self):
        """End of a run: nothing to wait for (every synchronous round has been collected)."""
        pass

    def asynchronous(self, seed: int = 0, spread: float = 1.0):
        """A truly asynchronous view (Algorithm 8), :class:`DaskAsync`: one pending actor call per logical worker,
        collected as they finish (no recovery from lost workers). ``seed`` and ``spread`` are accepted for the
        protocol's signature, not used (the delays are the cluster's own)."""
        return DaskAsync(self)

    def close(self):
        """Drop the pool's hosts and the futures that keep their actors and shards alive on the cluster; on the stream
        path also close the round streams and have every reachable host stop listening (:meth:`DaskHost.close_stream`,
        waited for at most ``min(worker_timeout, 10)`` seconds each). Idempotent."""
        hosts, self._hosts = self._hosts, []
        self._drop_streams(hosts)
        _close_streams(self._streams)
        io, self._io = self._io, None
        if io is not None:
            io.shutdown(wait=False)
        if self.rounds_via != "stream":
            return
        pending = []
        for h in hosts:
            if h.actor is not None and h.address not in self._dead:
                try:
                    pending.append(h.actor.close_stream())
                except Exception:   # its worker is gone: nothing listens there any more
                    pass
        for p in pending:
            try:
                p.result(timeout=min(self.worker_timeout, 10.0))
            except Exception:
                pass




#: the pool, its host and asynchronous view, and the traffic model's constants (``isparse.engines.traffic``), by the
#: names they have always been imported by
__all__ = ["ACTOR_LOST", "CODED_MESSAGE_OVERHEAD_BYTES", "CODED_REPLY_EXTRA_BYTES", "DENSE_MESSAGE_OVERHEAD_BYTES",
           "LOST", "REPLY_OVERHEAD_BYTES", "ROUNDS", "STREAM_CODED_MESSAGE_OVERHEAD_BYTES", "STREAM_CODED_REPLY_EXTRA_BYTES",
           "STREAM_DENSE_MESSAGE_OVERHEAD_BYTES", "STREAM_LOG", "STREAM_REPLY_OVERHEAD_BYTES",
           "STREAM_SUPPORT_MESSAGE_EXTRA_BYTES", "SUPPORT_MESSAGE_EXTRA_BYTES", "WORKER_OVERHEAD_BYTES", "REPLAY_BYTES", "DaskAsync",
           "DaskHost", "DaskPool", "place_workers", "reply_limit", "request_limit", "unpack_reply"]
