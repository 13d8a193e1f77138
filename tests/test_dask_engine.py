"""The Dask engine on a real LocalCluster (2 worker processes) gives the in-process engine's iterates, with its rounds
over the hosts' streams and as actor calls; the streams are closed with the pool."""

import socket

import numpy as np
import pytest

from isparse import InProcessPool, load_dataset
from specs import make
from isparse.engines import dask as dask_engine
from isparse.engines.dask import DaskPool, place_workers


def test_placement_is_even_and_deterministic():
    plan = place_workers(5, ["tcp://b:2", "tcp://a:1"])
    assert plan == {"tcp://a:1": [0, 1, 2], "tcp://b:2": [3, 4]}
    assert place_workers(1, ["tcp://b:2", "tcp://a:1"]) == {"tcp://a:1": [0]}


@pytest.mark.parametrize("rounds", ["stream", "actor", "stream-parallel"])
@pytest.mark.parametrize("algorithm", ["isega", "ibcd", "ibgd", "isaga", "isaga_shared", "isgd", "ef21"])
def test_dask_and_inprocess_iterates_agree(dask_client, algorithm, rounds, monkeypatch):
    """Dask = in-process to the bit on both round paths; ``stream-parallel``: the streams with every round sent to
    all hosts at once (one thread per host, as a round of large messages goes)."""
    if rounds == "stream-parallel":
        monkeypatch.setattr(dask_engine, "_PARALLEL_BYTES", 0)
        rounds = "stream"
    s = make(algorithm=algorithm, data=load_dataset("breast_cancer"), lam=0.1, n=5, block_size=2, seed=3)

    def iterates(pool):
        res = s.run(pool, max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
        return np.array(res.iterates), [r.get("lyapunov") for r in res.records]

    local, lyap_local = iterates(InProcessPool(*s.pool_args()))
    pool = DaskPool(dask_client, *s.pool_args(), rounds=rounds)
    assert pool.rounds_via == rounds and all((h.comm is not None) == (rounds == "stream") for h in pool._hosts)
    assert len(set(pool.placement.values())) == 2   # the 4 logical workers are spread over both processes
    remote, lyap_remote = iterates(pool)
    assert (pool._io is not None) == (dask_engine._PARALLEL_BYTES == 0)   # the path the test asked for was taken
    pool.close()
    np.testing.assert_array_equal(remote, local)   # to the bit
    if lyap_local[0] is not None:   # ISEGA and ISAGA log their Lyapunov function; it needs the worker states
        assert lyap_remote == pytest.approx(lyap_local, rel=1e-12)
    assert np.abs(local[-1] - local[0]).max() > 0.01   # the run moved


@pytest.mark.parametrize("algorithm", ["gd", "isega", "ibgd"])
def test_hosts_of_one_worker_agree_with_one_host_of_all(dask_client, algorithm):
    """n = 2 on 2 Dask workers: each host holds one worker, whose rows it keeps as they are and whose gradients it
    sums as A^T r (StackedGLM's one-worker paths); the in-process host of both workers sums them its own way: the same
    iterates, to the bit."""
    s = make(algorithm=algorithm, data=load_dataset("breast_cancer"), lam=0.1, n=2, block_size=2, seed=3)
    run = dict(max_iter=40, tol=1e-300, keep_iterates=True, log_every=20)
    local = np.array(s.run(InProcessPool(*s.pool_args()), **run).iterates)
    pool = DaskPool(dask_client, *s.pool_args())
    assert sorted(len(ids) for ids in pool.plan.values()) == [1, 1]
    remote = np.array(s.run(pool, **run).iterates)
    pool.close()
    np.testing.assert_array_equal(remote, local)
    assert np.abs(local[-1] - local[0]).max() > 0.01


def test_the_streams_are_closed_with_the_pool(dask_client):
    """Each host listens until the client's stream is made, then not; after close() its stream is closed and nothing
    listens at its address (a connection is refused)."""
    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3)
    pool = DaskPool(dask_client, *s.pool_args())
    hosts = list(pool._hosts)
    s.run(pool, max_iter=5, tol=1e-300, log_every=5)
    assert all(h.stream.startswith("tcp://127.0.0.1:") for h in hosts)
    assert [h.actor.stream_state().result() for h in hosts] == [{"listening": False, "connected": True}] * 2
    pool.close()
    assert [h.actor.stream_state().result() for h in hosts] == [{"listening": False, "connected": False}] * 2
    assert all(h.comm is None for h in hosts) and not pool._streams
    for h in hosts:
        host, port = h.stream[len("tcp://"):].rsplit(":", 1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5).close()
    pool.close()   # idempotent


def test_a_host_error_reaches_the_master_and_unknown_rounds_are_refused(dask_client):
    """An error raised by a host's round over its stream is raised by the pool (no recovery); rounds is checked."""
    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3)
    with pytest.raises(ValueError, match="rounds must be one of stream, actor; got 'rpc'"):
        DaskPool(dask_client, *s.pool_args(), rounds="rpc")
    pool = DaskPool(dask_client, *s.pool_args(), snapshot_every=0)
    with pytest.raises(Exception, match="shape|broadcast|size|dimension"):
        pool.exchange(np.zeros(3))   # x of the wrong dimension: the worker step fails on the host
    assert pool.restarts == 0
    pool.close()
