"""Item 2: the Dask engine's per-round overhead over the in-process engine, against a bare actor round trip, with
the rounds over the hosts' streams (``rounds="stream"``, the default) and as actor calls (``rounds="actor"``).

Both pools run on the same cluster in the same run, their repetitions interleaved with the in-process engine's.
A round of :class:`isparse.engines.dask.DaskPool` on a ``LocalCluster`` (2 worker processes, 1 thread each,
``direct_to_workers=True`` as the pipeline uses) is timed through :func:`isparse.engines.run` (no bound, so no
Lyapunov monitoring), with the pool's defaults ``snapshot_every=50`` and ``measure_every=50`` (every 50th round the
worker states are fetched for recovery and the hosts size their replies; both are in the timed rounds).
Overhead = Dask round - in-process iteration, both medians over repetitions measured in the same run.

The yardstick, measured in the same run on the same cluster: the **bare round trip**, one trivial actor call per
Dask worker (2 ``Echo`` actors, one per worker, called concurrently as the pool calls its hosts) that takes x and
returns a NumPy array of as many float64 values as that worker's host returns in a round. It is what any actor
round costs on this cluster: two RPCs through the client's and the workers' event loops, pickling x and a
reply of the same payload.

A second yardstick, the **busy bare round trip**: the same trivial calls, but each ``Echo`` actor first keeps its
thread busy for the pool's measured compute per round (a pure-Python spin, holding the GIL as the worker step's
small NumPy calls do) and the spin is subtracted: what a round trip costs beyond the compute when the worker was
computing, on this machine, without any of the library's code.

A third yardstick, the **bare stream round trip**: the stream path's round with nothing computed, an echo host per
Dask worker listening as the pool's hosts do (the same wire code) and answering x with a reply tuple holding an
array of as many float64 values as that worker's host returns.

The Dask round is split, per round, into parts that add up to it (timers around the pool's calls):

- master: the loop's work outside ``pool.exchange`` (master step, byte counters, stopping test);
- worker compute: the slower host's ``WorkerHost.round`` compute, as the actors report it;
- round trip beyond the compute: the wall time of the pool's round (the concurrent ``round`` actor calls, or the
  requests written to and the replies read from the hosts' streams) minus that compute (RPC or stream, scheduling,
  serialization of x and of the ``Messages`` replies); compared with the bare actor round trip; the stream path's
  goal: at most ``GOAL_STREAM_MS`` (issue 33, item 3);
- snapshot: the ``snapshot`` calls every ``snapshot_every`` rounds, per round;
- per-round bookkeeping: the rest of ``exchange`` (``Messages.concat``, analytic bytes, the copy of x kept to
  replay a recovery, the measured-size counters).

Serialization alone (``distributed.protocol.serialize`` + ``deserialize`` of x, once per host, and of each host's
reply, timed in the client; on Dask half of it runs on the workers) is shown for the hosts' replies (the ``Messages``
batch pickled into one ``bytes``, as the hosts send it) and for the bare round trip's plain arrays.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .common import load, median_time, table, verdict

#: goal: Dask round - in-process round <= GOAL_BARE x the bare actor round trip (issue 11)
GOAL_BARE = 1.5
#: goal of the stream path: its round trip beyond the compute <= this many ms at n = 8 (issue 33, item 3)
GOAL_STREAM_MS = 0.5
#: the pools measured: DaskPool(rounds=...)
PATHS = ("stream", "actor")
LAM = 1e-3
CACHE = "outputs/bench_cache"
SNAPSHOT_EVERY = 50
MEASURE_EVERY = 50


class Echo:
    """The bare round trip's actor: returns a stored float64 array of a host reply's value count, after keeping its
    thread busy (a pure-Python spin on the clock, holding the GIL) for ``spin`` seconds."""

    def __init__(self, count: int):
        self.reply = np.zeros(int(count))

    def call(self, x, spin: float = 0.0):
        if spin > 0:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < spin:
                pass
        return self.reply

    async def acall(self, x):
        """The same trivial call as an ``async def`` method (run on the worker's event loop, as the pool's round)."""
        return self.reply


class TimedPool:
    """Wraps a pool: accumulates the wall time of its ``exchange`` calls and, for a ``DaskPool``, of its actor calls
    by name (``round``, ``snapshot``) and of its rounds over the streams (as ``round``)."""

    def __init__(self, pool):
        self.pool, self.exchange_s, self.calls = pool, 0.0, 0
        self.call_s = {}
        if hasattr(pool, "_call"):
            pool._call = self._timed(pool._call, lambda name, *rest: name)
        if getattr(pool, "rounds_via", None) == "stream":
            pool._stream_round = self._timed(pool._stream_round, lambda *args: "round")

    def _timed(self, call, name_of):
        """``call`` adding its wall time to ``call_s[name_of(*args)]``."""
        def timed(*args):
            t0 = time.perf_counter()
            try:
                return call(*args)
            finally:
                name = name_of(*args)
                self.call_s[name] = self.call_s.get(name, 0.0) + time.perf_counter() - t0
        return timed

    def exchange(self, x, monitor=False, **kw):
        t0 = time.perf_counter()
        out = self.pool.exchange(x, monitor, **kw)
        self.exchange_s += time.perf_counter() - t0
        self.calls += 1
        return out

    def __getattr__(self, name):
        return getattr(self.pool, name)


def timed_rounds(setup, pool, rounds: int) -> dict:
    """Per-round seconds of ``rounds`` rounds of the library's loop on ``pool``: ``round``, ``exchange`` (inside
    pool.exchange), ``actor_round`` (the DaskPool's round: its ``round`` actor calls or its round over the streams)
    and ``snapshot`` (its actor calls), ``compute`` (the pool's own compute timer: the slowest host per round)."""
    from isparse import run

    tp = TimedPool(pool)
    compute0 = pool.timing["compute_s"]
    t_F = median_time(lambda: setup.problem.F(setup.x0), reps=3)
    t0 = time.perf_counter()
    res = run(setup.method, tp, setup.problem, setup.reference, None, x0=setup.x0, max_iter=rounds, tol=1e-300,
              log_every=rounds)
    dt = time.perf_counter() - t0 - 2 * t_F
    assert res.iterations == rounds
    for name in ("_call", "_stream_round"):
        if name in vars(pool):
            delattr(pool, name)        # drop the instance wrappers again
    return {"round": dt / rounds, "exchange": tp.exchange_s / rounds,
            "actor_round": tp.call_s.get("round", 0.0) / rounds, "snapshot": tp.call_s.get("snapshot", 0.0) / rounds,
            "compute": (pool.timing["compute_s"] - compute0) / rounds}


def serialization_seconds(payloads, replies=()) -> tuple[float, int]:
    """(serialize + deserialize seconds of the payloads, their frame bytes), with distributed's serializers;
    ``replies``: host batches, sent as :class:`isparse.engines.dask.DaskHost` sends them (pickled into one
    ``bytes``, unpickled by the client), the pickling timed too."""
    import pickle

    from distributed.protocol import deserialize, serialize

    def once():
        for p in payloads:
            header, frames = serialize(p)
            deserialize(header, frames)
        for b in replies:
            header, frames = serialize(pickle.dumps((b, 0.0, None, None), protocol=5))
            pickle.loads(deserialize(header, frames))
    sent = list(payloads) + [pickle.dumps((b, 0.0, None, None), protocol=5) for b in replies]
    nbytes = sum(sum(memoryview(f).nbytes for f in serialize(p)[1]) for p in sent)
    return median_time(once, reps=5, inner=20), nbytes


def bare_round_trip(client, plan_counts: dict, x, calls: int, reps: int, spin: float = 0.0, asynchronous=False) -> float:
    """Median seconds of one bare round: one ``Echo.call(x, spin)`` (or ``Echo.acall(x)``) per Dask worker,
    concurrently, both awaited."""
    actors = []
    for addr, count in plan_counts.items():
        fut = client.submit(Echo, count, workers=[addr], actor=True, allow_other_workers=False, pure=False)
        actors.append((fut, fut.result(timeout=60)))
    acts = [a for _, a in actors]

    def one():
        for f in [a.acall(x) if asynchronous else a.call(x, spin) for a in acts]:
            f.result(timeout=60)
    for _ in range(20):
        one()
    t = median_time(one, reps=reps, inner=calls)
    for fut, _ in actors:
        fut.cancel()
    return t


class EchoStreamHost:
    """The bare stream round trip's host: listens as :class:`isparse.engines.dask.DaskHost` does (the same
    ``open_stream`` and wire code) and answers each request with a stored float64 array of a host reply's value count,
    in the reply's tuple, without computing anything."""

    def __init__(self, count: int):
        self.reply = np.zeros(int(count))

    def _answer(self, body, lengths):
        from isparse.engines.stream import frames as _frames, read_frames as _read_frames

        _read_frames(body, lengths)
        return _frames((True, (self.reply, 0.0, None, None)))


def _echo_stream_host_class():
    """:class:`EchoStreamHost` with :class:`~isparse.engines.dask.DaskHost`'s stream methods (an actor class)."""
    from isparse.engines.dask import DaskHost

    names = ("_round_server", "open_stream", "close_stream")
    return type("EchoStream", (EchoStreamHost,), {k: DaskHost.__dict__[k] for k in names})


def bare_stream_round_trip(client, plan_counts: dict, x, calls: int, reps: int) -> float:
    """Median seconds of one bare round over streams: one request of x to an echo host per Dask worker (written to
    all first), then every reply read, as :class:`isparse.engines.dask.DaskPool` makes a round with
    ``rounds="stream"``."""
    from distributed.comm.addressing import get_address_host_port

    from isparse.engines.dask import request_limit, reply_limit
    from isparse.engines.stream import Stream, frames as _frames

    hosts = []
    for addr, count in plan_counts.items():
        fut = client.submit(_echo_stream_host_class(), count, workers=[addr], actor=True, allow_other_workers=False,
                            pure=False)
        actor = fut.result(timeout=60)
        address, secret = actor.open_stream(request_limit(x.size), 60.0).result(timeout=60)
        ssl_context = client.security.get_connection_args("client")["ssl_context"] if address.startswith("tls") else None
        hosts.append((fut, actor, Stream(*get_address_host_port(address), secret, reply_limit(count, 1), 60.0,
                                         ssl_context)))

    def one():
        deadline = time.monotonic() + 60
        parts, size = _frames((x,))
        for _, _, st in hosts:
            st.send(parts, size, deadline)
        for _, _, st in hosts:
            st.receive(deadline)
    for _ in range(20):
        one()
    t = median_time(one, reps=reps, inner=calls)
    for fut, actor, st in hosts:
        st.close()
        actor.close_stream().result(timeout=60)
        fut.cancel()
    return t


def host_round_seconds(method, ids, shards, x0, x) -> tuple[float, float]:
    """(wall, thread CPU) seconds of one ``WorkerHost.round`` of a fresh host, median of 5 x 50 rounds after a
    warm-up; run here, or on a Dask worker with ``client.submit`` (the same code in both processes)."""
    import statistics
    import time

    from isparse.engines.host import WorkerHost

    h = WorkerHost(method, ids, shards, x0)
    for _ in range(3):
        h.round(x)
    out = []
    for _ in range(5):
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(50):
            h.round(x)
        out.append(((time.perf_counter() - w0) / 50, (time.thread_time() - c0) / 50))
    return statistics.median(w for w, _ in out), statistics.median(c for _, c in out)


def measure(quick: bool = False, ns=(8, 100), algorithm: str = "isega", client=None) -> dict:
    from isparse import InProcessPool
    from isparse.engines.dask import DaskPool
    from isparse.engines.host import WorkerHost

    from .common import setup

    data = load("a9a")
    reps = 2 if quick else 5
    rounds = 50 if quick else 200
    rows = []
    med = statistics.median
    for n in ns:
        s = setup(algorithm, data=data, lam=LAM, n=n, block_size=1, cache_dir=CACHE)
        dpools = {path: DaskPool(client, *s.pool_args(), snapshot_every=SNAPSHOT_EVERY, measure_every=MEASURE_EVERY,
                                 rounds=path) for path in PATHS}
        for dpool in dpools.values():
            timed_rounds(s, dpool, 5)   # warm-up
        dpool = dpools["actor"]
        ipool = InProcessPool(*s.pool_args())
        timed_rounds(s, ipool, 5)
        x = s.reference.x_star * 0.5
        # one round's replies, from hosts like the pool's, for the payload sizes and the serialization timing
        hosts = [WorkerHost(s.method, ids, s.method._host_shards(s.shards, ids), s.x0) for ids in dpool.plan.values()]
        batches = [h.round(x)[0] for h in hosts]
        counts = {addr: int(b.values.size) for addr, b in zip(dpool.plan, batches)}
        dk, ip, bare, busy, abare, sbare = {path: [] for path in PATHS}, [], [], [], [], []
        for _ in range(reps):
            for path in PATHS:
                dk[path].append(timed_rounds(s, dpools[path], rounds))
            ip.append(timed_rounds(s, ipool, rounds))
            bare.append(bare_round_trip(client, counts, x, calls=rounds, reps=1))
            abare.append(bare_round_trip(client, counts, x, calls=rounds, reps=1, asynchronous=True))
            sbare.append(bare_stream_round_trip(client, counts, x, calls=rounds, reps=1))
            # the same trivial call, each actor first spinning for this repetition's (slower-host) compute per round
            busy.append(bare_round_trip(client, counts, x, calls=rounds, reps=1, spin=dk["actor"][-1]["compute"])
                        - dk["actor"][-1]["compute"])
        ids0 = next(iter(dpool.plan.values()))
        shards0 = s.method._host_shards(s.shards, ids0)
        here = host_round_seconds(s.method, ids0, shards0, s.x0, x)
        there = client.submit(host_round_seconds, s.method, ids0, shards0, s.x0, x, workers=[next(iter(dpool.plan))],
                              allow_other_workers=False, pure=False).result()
        t_ser, frame_bytes = serialization_seconds([x] * len(batches), replies=batches)
        t_ser_bare, frame_bytes_bare = serialization_seconds([x] * len(batches) + [np.zeros(c) for c in counts.values()])
        traffic = {path: p.traffic() for path, p in dpools.items()}
        for p in dpools.values():
            p.close()
        p = {k: med(r[k] for r in ip) for k in ip[0]}
        bare_s, busy_s, abare_s, sbare_s = med(bare), med(busy), med(abare), med(sbare)
        master_ip = p["round"] - p["exchange"]
        uplink = int(sum(b.bytes_per_worker(s.method.blocks.m).sum() for b in batches))
        for path in PATHS:
            d = {k: med(r[k] for r in dk[path]) for k in dk[path][0]}
            overhead = med(a["round"] - b["round"] for a, b in zip(dk[path], ip))
            master = d["round"] - d["exchange"]
            comm = d["actor_round"] - d["compute"]
            book = d["exchange"] - d["actor_round"] - d["snapshot"]
            rows.append(dict(
                n=n, rounds_via=path, tau=s.method.tau, rounds=rounds, reps=reps,
                values_per_host=list(counts.values()),
                round_ms=1e3 * d["round"], inproc_ms=1e3 * p["round"], overhead_ms=1e3 * overhead, bare_ms=1e3 * bare_s,
                overhead_over_bare=overhead / bare_s, bare_async_ms=1e3 * abare_s,
                overhead_over_bare_async=overhead / abare_s, bare_stream_ms=1e3 * sbare_s,
                master_ms=1e3 * master, master_inproc_ms=1e3 * master_ip, compute_ms=1e3 * d["compute"],
                compute_inproc_ms=1e3 * p["exchange"], comm_ms=1e3 * comm, comm_beyond_bare_ms=1e3 * (comm - bare_s),
                busy_ms=1e3 * busy_s, comm_beyond_busy_ms=1e3 * (comm - busy_s),
                snapshot_ms=1e3 * d["snapshot"], bookkeeping_ms=1e3 * book,
                ser_ms=1e3 * t_ser, ser_bare_ms=1e3 * t_ser_bare, frame_bytes=frame_bytes,
                frame_bytes_bare=frame_bytes_bare, uplink=uplink,
                serialized_per_round=traffic[path]["uplink_bytes_serialized"] / max(1, traffic[path]["rounds"]),
                overhead_per_reply=traffic[path]["uplink_overhead_per_reply"],
                host_client_ms=1e3 * here[0], host_client_cpu_ms=1e3 * here[1], host_worker_ms=1e3 * there[0],
                host_worker_cpu_ms=1e3 * there[1]))
            r = rows[-1]
            print(f"[item2] n={n}, rounds={path}: round {r['round_ms']:.2f} ms, in-process {r['inproc_ms']:.2f} ms, "
                  f"overhead {r['overhead_ms']:.2f} ms, bare round trip {r['bare_ms']:.2f} ms (ratio "
                  f"{r['overhead_over_bare']:.2f}); compute {r['compute_ms']:.2f}, round trip beyond compute "
                  f"{r['comm_ms']:.2f}, master {r['master_ms']:.2f}, snapshot {r['snapshot_ms']:.3f}, bookkeeping "
                  f"{r['bookkeeping_ms']:.3f} ms; bare stream round trip {r['bare_stream_ms']:.2f} ms", flush=True)
    return {"rows": rows, "algorithm": algorithm, "snapshot_every": SNAPSHOT_EVERY, "measure_every": MEASURE_EVERY,
            "paths": list(PATHS)}


def measure_all(quick: bool = False) -> dict:
    """:func:`measure` on a cluster started as the pipeline starts cluster=local (the goal), then on one whose workers run
    with Dask's own ``MALLOC_TRIM_THRESHOLD_=65536`` (a diagnostic: see ``benchmarks/cluster.py``)."""
    from .cluster import local_client, worker_environ

    with local_client() as client:
        res = measure(quick=quick, client=client)
        res["malloc_trim"] = sorted(set(client.run(worker_environ, "MALLOC_TRIM_THRESHOLD_").values()), key=str)
    with local_client(dask_malloc_trim=True) as client:
        variant = measure(quick=quick, client=client)
        variant["malloc_trim"] = sorted(set(client.run(worker_environ, "MALLOC_TRIM_THRESHOLD_").values()), key=str)
    res["variant"] = variant
    return res


def report(res: dict) -> tuple[str, str]:
    """(the goal table, the split table); a row per n and path (``rounds``: stream or actor; runs before the stream
    path have actor rows only)."""
    goal = []
    split = []
    for r in res["rows"]:
        via = r.get("rounds_via", "actor")
        goal.append([r["n"], via, f"{r['tau']:.3g}", r["round_ms"], r["inproc_ms"], r["overhead_ms"], r["bare_ms"],
                     r["overhead_over_bare"], verdict(r["overhead_over_bare"], GOAL_BARE), r["comm_ms"],
                     verdict(r["comm_ms"], GOAL_STREAM_MS) if via == "stream" else "–",
                     r.get("bare_stream_ms", float("nan"))])
        split.append([r["n"], via, r["round_ms"], r["master_ms"], r["compute_ms"], r["comm_ms"], r["bare_ms"],
                      r["comm_beyond_bare_ms"], r.get("busy_ms", float("nan")), r.get("comm_beyond_busy_ms", float("nan")),
                      r["snapshot_ms"], r["bookkeeping_ms"], r["master_inproc_ms"],
                      r["compute_inproc_ms"], r["ser_ms"], r["ser_bare_ms"],
                      " + ".join(str(c) for c in r["values_per_host"]), r["uplink"],
                      f"{r['frame_bytes']} / {r['frame_bytes_bare']}", r.get("overhead_per_reply", float("nan")),
                      f"{r['host_client_cpu_ms']:.3g} / {r['host_worker_cpu_ms']:.3g}"])
    t1 = table(["n", "rounds", "τ", "Dask round (ms)", "in-process iteration (ms)", "overhead (ms)",
                "bare actor round trip (ms)", "overhead ÷ bare round trip", f"goal ≤ {GOAL_BARE:g}",
                "round trip beyond compute (ms)", f"stream goal ≤ {GOAL_STREAM_MS:g} ms",
                "bare stream round trip (ms)"], goal)
    t2 = table(["n", "rounds", "Dask round (ms)", "master (ms)", "worker compute, slower host (ms)",
                "round trip beyond compute (ms)", "of which: bare actor round trip (ms)", "rest of the round trip (ms)",
                "busy bare round trip beyond its spin (ms)", "round trip beyond compute − busy one (ms)",
                "snapshot (ms per round)", "per-round bookkeeping (ms)", "in-process: master (ms)",
                "in-process: compute (ms)", "serialization, Messages (ms)", "serialization, bare arrays (ms)",
                "values per host reply", "uplink payload B/round", "frame bytes, Messages / bare",
                "measured reply bytes beyond the payload, per reply",
                "one host's round, CPU ms: in the client / in a Dask worker"], split)
    return t1, t2
