"""The Dask engine on real worker processes: a killed worker is recovered with the same iterates (rounds over the
hosts' streams or as actor calls); the traffic it measures matches the analytic bytes plus the documented overhead
of either path; the wall time is split."""

import os
import signal

import numpy as np
import pytest

from isparse import InProcessPool, load_dataset
from specs import make
from isparse.engines.dask import (REPLY_OVERHEAD_BYTES, STREAM_REPLY_OVERHEAD_BYTES, WORKER_OVERHEAD_BYTES,
                                   DaskPool)


@pytest.fixture(scope="module")
def setup():
    return make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3)


@pytest.mark.parametrize("sig,timeout,removed,rounds,downlink", [
    (signal.SIGKILL, 20, False, "stream", "float64"),   # process gone: its stream closes, the round fails at once
    (signal.SIGKILL, 20, True, "stream", "float64"),    # ... and the scheduler removed it before the next round
    (signal.SIGKILL, 20, False, "actor", "float64"),                    # the actor call fails at once
    (signal.SIGKILL, 20, True, "actor", "float64"),  # ... removed before the next call: "Worker holding Actor was lost"
    pytest.param(signal.SIGSTOP, 3, False, "stream", "float64", marks=pytest.mark.slow),   # hung: worker_timeout
    pytest.param(signal.SIGSTOP, 3, False, "actor", "float64", marks=pytest.mark.slow),
    # a compressed downlink (EF21-P): the recovered hosts get w back (the snapshot's, then the replayed rounds')
    (signal.SIGKILL, 20, False, "stream", "randk:0.5+natural7"),
    # every round to all hosts at once, one thread per host (as rounds of large messages go)
    (signal.SIGKILL, 20, False, "stream-parallel", "float64"),
    pytest.param(signal.SIGSTOP, 3, False, "stream-parallel", "float64", marks=pytest.mark.slow),
    # large d: the client keeps at most REPLAY_BYTES of models to replay, so it snapshots every 7 rounds, not 40
    (signal.SIGKILL, 20, False, "stream-replay7", "float64"),
])
def test_lost_worker_is_recovered_with_the_uninterrupted_iterates(setup, sig, timeout, removed, rounds, downlink,
                                                                  monkeypatch):
    """A Dask worker killed (or stopped) at round 150: its logical workers restart elsewhere, same iterates."""
    import time

    from distributed import Client, LocalCluster

    from isparse.engines import dask as dask_engine

    interval = 40
    if rounds == "stream-replay7":
        monkeypatch.setattr(dask_engine, "REPLAY_BYTES", 8 * setup.problem.d * 7 + 5)
        rounds, interval = "stream", 7

    if rounds == "stream-parallel":
        monkeypatch.setattr(dask_engine, "_PARALLEL_BYTES", 0)
        rounds = "stream"

    if downlink != "float64":
        setup = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3,
                     downlink=downlink)
        assert setup.method.downlink is not None
    local = setup.run(InProcessPool(*setup.pool_args()), max_iter=300, tol=1e-300, keep_iterates=True, log_every=50)
    events = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster, direct_to_workers=True) as client:
        pool = DaskPool(client, *setup.pool_args(), snapshot_every=40, worker_timeout=timeout, on_recovery=events.append,
                        rounds=rounds)
        victim = sorted(set(pool.placement.values()))[-1]
        pid = client.run(os.getpid, workers=[victim])[victim]

        assert pool.snapshot_interval == interval
        longest = []

        def kill_at_150(rec):
            longest.append(pool._recovery.replay)
            if rec["step"] == 150:
                os.kill(pid, sig)
                deadline = time.time() + 30
                while removed and victim in client.scheduler_info()["workers"] and time.time() < deadline:
                    time.sleep(0.1)
                assert not removed or victim not in client.scheduler_info()["workers"]

        try:
            res = setup.run(pool, max_iter=300, tol=1e-300, keep_iterates=True, log_every=50, observer=kill_at_150)
        finally:
            if sig == signal.SIGSTOP:
                os.kill(pid, signal.SIGCONT)
    assert pool.restarts == 1 and res.records[-1]["worker_restarts"] == 1
    assert len(events) == 1 and events[0]["lost"] == [victim] and events[0]["workers"] == [2, 3]
    # snapshots at 0, 40, 80, 120 (or every 7 rounds: 147); never more models kept than the interval
    assert events[0]["round"] == 150 and events[0]["replayed_rounds"] == 150 % interval
    assert max(longest) <= interval
    assert victim not in pool.placement.values()
    if rounds == "stream":   # the round was made again over the new host's stream, opened after the recovery
        moved = set(events[0]["moved_to"])
        assert all(h.comm is not None for h in pool._hosts) and moved <= {h.address for h in pool._hosts}
    assert ("TimeoutError" in events[0]["reason"]) == (sig == signal.SIGSTOP)
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))   # to the bit


@pytest.mark.parametrize("rounds", ["stream", "actor"])
@pytest.mark.parametrize("send_ids", [False, True])
def test_serialized_bytes_match_analytic_plus_overhead_and_time_is_split(dask_client, setup, send_ids, rounds):
    """Values-only batches (the default) and id-carrying ones, over the streams (the bytes read for each reply) and
    as actor calls (what Dask sends): serialized = analytic + the stated overhead of that path (10%)."""
    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3,
              send_ids=send_ids)
    pool = DaskPool(dask_client, *s.pool_args(), measure_every=1, rounds=rounds)
    res = s.run(pool, max_iter=100, tol=1e-300, log_every=50)
    tr = pool.traffic()
    assert tr["replies"] == 200 and tr["workers"] == 400 and tr["rounds"] == 100   # 2 Dask workers, 4 logical workers
    per_worker = 4 * 2 * 8 + (4 * 4 if send_ids else 0)        # tau*m = 4 blocks of 2 values (+ 4 ids of 4 B)
    assert tr["uplink_bytes_analytic"] == res.records[-1]["uplink_bytes"] == 400 * per_worker
    per_reply = STREAM_REPLY_OVERHEAD_BYTES if rounds == "stream" else REPLY_OVERHEAD_BYTES
    expected = tr["uplink_bytes_analytic"] + per_reply * 200 + WORKER_OVERHEAD_BYTES * 400
    assert tr["uplink_bytes_expected"] == expected
    assert abs(tr["uplink_bytes_serialized"] - expected) <= 0.1 * expected, tr
    assert res.records[-1]["uplink_bytes_serialized"] == tr["uplink_bytes_serialized"]
    last = res.records[-1]
    assert last["time_compute_s"] > 0 and last["time_comm_s"] > 0 and last["time_master_s"] > 0
    assert last["time_compute_s"] + last["time_comm_s"] + last["time_master_s"] <= last["wall_s"]


@pytest.mark.parametrize("rounds", ["stream", pytest.param("actor", marks=pytest.mark.slow)])
def test_x_star_reaches_each_host_once_not_with_the_logged_rounds(setup, rounds, monkeypatch):
    """ISEGA logged every round: x* goes to the hosts once (``reference``, before the first round) and never in a
    round, whose request is x and flags (on the stream path: the frames of x and the monitor flag; as actor calls: x,
    the monitor and measure flags); the
    lyapunov records equal an in-process run's to the bit, also after a host killed at round 100 (its replacement is
    given x* again: without it, its next monitored round would raise). A host asked to monitor before any reference
    raises, its workers not stepped."""
    from distributed import Client, LocalCluster

    from isparse.engines import stream

    local = setup.run(InProcessPool(*setup.pool_args()), max_iter=200, tol=1e-300, keep_iterates=True, log_every=1)
    assert all(r["lyapunov"] > 0 for r in local.records) and len(local.records) == 201
    sizes, round_args, references, events = [], [], [], []
    send = stream.Stream.send

    def sized(comm, parts, size, deadline):   # the client's end of a round stream: each request's bytes
        sizes.append(size)
        return send(comm, parts, size, deadline)

    monkeypatch.setattr(stream.Stream, "send", sized)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster, direct_to_workers=True) as client:
        pool = DaskPool(client, *setup.pool_args(), snapshot_every=40, worker_timeout=20, on_recovery=events.append,
                        rounds=rounds)
        call = pool._call

        def spy(name, args_of, hosts=None):
            if name == "round":
                round_args.extend(args_of(h) for h in (pool._hosts if hosts is None else hosts))
            elif name == "reference":
                references.append(name)
            return call(name, args_of, hosts)

        monkeypatch.setattr(pool, "_call", spy)
        victim = sorted(set(pool.placement.values()))[-1]
        pid = client.run(os.getpid, workers=[victim])[victim]

        def kill_at_100(rec):
            if rec["step"] == 100:
                os.kill(pid, signal.SIGKILL)

        res = setup.run(pool, max_iter=200, tol=1e-300, keep_iterates=True, log_every=1, observer=kill_at_100)
        pool.close()
    assert pool.restarts == 1 and len(events) == 1 and events[0]["round"] == 100
    if rounds == "stream":   # every request (the round made again over the new host's stream included): x and the flag
        x_monitored = stream.frames((setup.x0, True))[1]
        assert x_monitored - stream.frames((setup.x0,))[1] <= 8   # the flag: no x* (8 d = 240 B)
        assert len(sizes) >= 2 * 200 and set(sizes) == {x_monitored}, sorted(set(sizes))
    else:   # x, and the monitor and measure flags: no second array
        assert len(round_args) >= 2 * 200
        assert all(isinstance(a[0], np.ndarray) and all(not isinstance(b, np.ndarray) for b in a[1:])
                   for a in round_args)
        assert {a[1:] for a in round_args} >= {(True, True), (True, False)}
    assert references == ["reference"]   # once, on both hosts; the recovery gives x* to its new host itself
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))   # to the bit
    assert [r["lyapunov"] for r in res.records] == [r["lyapunov"] for r in local.records]   # to the bit

    lonely = InProcessPool(*setup.pool_args())
    with pytest.raises(RuntimeError, match=r"needs x\*.*Engine.reference"):
        lonely.exchange(setup.x0, True)
    assert lonely.host.t.tolist() == [0, 0, 0, 0]
