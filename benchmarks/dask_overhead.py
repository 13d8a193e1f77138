"""Item 2: the Dask engine's per-round overhead over the in-process engine, and where it goes.

A round of :class:`isparse.engines.dask.DaskPool` on a ``LocalCluster`` (2 worker processes, 1 thread each,
``direct_to_workers=True`` as the pipeline uses) is timed through :func:`isparse.engines.run` (no bound, so no
Lyapunov monitoring). Overhead = Dask round - in-process iteration, both medians over repetitions measured in the
same run. Its split:

- master work: the client's part of a round outside ``pool.step`` (master step, counters, stopping test),
  measured by a timer around the pool's ``step`` calls;
- worker compute: the longest of the hosts' ``WorkerHost.step`` (the two actors compute concurrently), measured
  by running the same hosts in this process;
- serialization: ``distributed.protocol.serialize`` + ``deserialize`` of x (once per host) and of each host's list
  of messages (both directions of a round, timed in this process; the worker side runs on the workers in reality);
- RPC/scheduling: the rest of the round (actor call round trips, event loops, the comm).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .common import load, median_time, table, verdict

GOAL_MS = 5.0
LAM = 1e-3
CACHE = "outputs/bench_cache"


class TimedPool:
    """Wraps a pool and accumulates the wall time of its ``step`` calls."""

    def __init__(self, pool):
        self.pool, self.step_s, self.calls = pool, 0.0, 0

    def step(self, x):
        t0 = time.perf_counter()
        out = self.pool.step(x)
        self.step_s += time.perf_counter() - t0
        self.calls += 1
        return out

    def __getattr__(self, name):
        return getattr(self.pool, name)


def timed_rounds(setup, pool, rounds: int) -> tuple[float, float]:
    """(seconds per round, of which seconds inside pool.step) for ``rounds`` rounds of the library's loop."""
    from isparse import run

    tp = TimedPool(pool)
    t_F = median_time(lambda: setup.problem.F(setup.x0), reps=3)
    t0 = time.perf_counter()
    res = run(setup.method, tp, setup.problem, setup.reference, None, x0=setup.x0, max_iter=rounds, tol=1e-300,
              log_every=rounds)
    dt = time.perf_counter() - t0 - 2 * t_F
    assert res.iterations == rounds
    return dt / rounds, tp.step_s / rounds


def serialization_seconds(x, messages_per_host) -> tuple[float, int]:
    """(serialize + deserialize seconds of one round's payloads, their frame bytes), with distributed's serializers."""
    from distributed.protocol import deserialize, serialize

    payloads = [x] * len(messages_per_host) + list(messages_per_host)

    def once():
        for p in payloads:
            header, frames = serialize(p)
            deserialize(header, frames)
    nbytes = sum(sum(memoryview(f).nbytes for f in serialize(p)[1]) for p in payloads)
    return median_time(once, reps=5, inner=20), nbytes


def measure(quick: bool = False, ns=(8, 100), algorithm: str = "isega", client=None) -> dict:
    from isparse import InProcessPool, build
    from isparse.engines.dask import DaskPool
    from isparse.engines.host import WorkerHost

    data = load("a9a")
    reps = 2 if quick else 5
    rounds = 50 if quick else 200
    rows = []
    for n in ns:
        s = build(algorithm=algorithm, data=data, lam=LAM, n=n, block_size=1, cache_dir=CACHE)
        dpool = DaskPool(client, *s.pool_args())
        timed_rounds(s, dpool, 5)   # warm-up
        t_round, t_step, t_inproc, t_master, t_hosts = [], [], [], [], []
        for _ in range(reps):
            r, st = timed_rounds(s, dpool, rounds)
            t_round.append(r), t_step.append(st)
            ip, ip_step = timed_rounds(s, InProcessPool(*s.pool_args()), rounds)
            t_inproc.append(ip), t_master.append(ip - ip_step)
            hosts = [WorkerHost(s.method, ids, [s.shards[i] for i in ids], [s.streams()[i] for i in ids], s.x0)
                     for ids in dpool.plan.values()]
            x = s.reference.x_star * 0.5
            t_hosts.append(max(median_time(lambda h=h: h.step(x), reps=3, inner=10) for h in hosts))
        x = s.reference.x_star * 0.5
        hosts = [WorkerHost(s.method, ids, [s.shards[i] for i in ids], [s.streams()[i] for i in ids], s.x0)
                 for ids in dpool.plan.values()]
        msgs = [h.step(x) for h in hosts]
        t_ser, frame_bytes = serialization_seconds(x, msgs)
        uplink = sum(m.nbytes for ms in msgs for m in ms)
        dpool.close()
        med = statistics.median
        round_s, inproc_s, master_s, hosts_s = med(t_round), med(t_inproc), med(t_master), med(t_hosts)
        overhead = round_s - inproc_s
        rpc = round_s - master_s - hosts_s - t_ser
        rows.append(dict(n=n, tau=s.method.tau, round_ms=1e3 * round_s, inproc_ms=1e3 * inproc_s,
                         overhead_ms=1e3 * overhead, master_ms=1e3 * master_s, compute_ms=1e3 * hosts_s,
                         ser_ms=1e3 * t_ser, rpc_ms=1e3 * rpc, uplink=uplink, frame_bytes=frame_bytes,
                         rounds=rounds, reps=reps))
        print(f"[item2] n={n}: round {rows[-1]['round_ms']:.2f} ms, in-process {rows[-1]['inproc_ms']:.2f} ms, "
              f"overhead {rows[-1]['overhead_ms']:.2f} ms", flush=True)
    return {"rows": rows, "algorithm": algorithm}


def report(res: dict) -> str:
    body = []
    for r in res["rows"]:
        body.append([r["n"], f"{r['tau']:.3g}", r["round_ms"], r["inproc_ms"], r["overhead_ms"], r["compute_ms"],
                     r["master_ms"], r["ser_ms"], r["rpc_ms"], r["uplink"], r["frame_bytes"],
                     verdict(r["overhead_ms"], GOAL_MS) if r["n"] == 8 else ""])
    return table(["n", "τ", "Dask round (ms)", "in-process iteration (ms)", "overhead (ms)",
                  "worker compute, slowest host (ms)", "master work (ms)", "serialization (ms)",
                  "RPC/scheduling = rest (ms)", "uplink payload B/round", "serialized frames B/round",
                  "goal < 5 ms at n = 8"], body)
