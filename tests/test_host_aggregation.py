"""Machines are machines (``messages.aggregate=host``): a host sends one sum of its workers' messages, on the union of
their coordinates, and gets x once. The iterates equal those without aggregation to rounding; the bytes are the union
counts (computed here from the block ids with Python sets) x 8 B; Dask gives the in-process iterates bit for bit,
also after a killed host is recovered."""

import os

import numpy as np
import pytest

from isparse import InProcessPool, load_dataset
from isparse.compression.messages import HostSums
from isparse.engines.dask import DaskPool
from specs import make

pytestmark = pytest.mark.needs_data

ROUNDS = 60


@pytest.fixture(scope="module")
def a1a():
    return load_dataset("a1a")


def _setup(a1a, algorithm="isega", n=8, **kw):
    return make(algorithm=algorithm, data=a1a, lam=1e-2, n=n, seed=5, **kw)


def _run(setup, pool, rounds=ROUNDS):
    return setup.run(pool, max_iter=rounds, tol=1e-300, keep_iterates=True, log_every=1)


def _union_bytes(method, groups, rounds):
    """Sum over rounds and hosts of |union of the hosts' coordinates| x 8 B, from the drawn block ids."""
    total = 0
    for t in range(rounds):
        for g in groups:
            blocks = set()
            for i in g:
                blocks.update(int(b) for b in method._sample(np.array([i]), t)[0])
            coords = set()
            for b in blocks:
                coords.update(method.blocks.coords_batch(np.array([[b]]))[0].tolist())
            total += len(coords) * 8
    return total


@pytest.mark.parametrize("algorithm,extra", [("isega", {}), ("diana", {}), ("ibcd", {}), ("gd", {})])
def test_one_worker_per_host_is_todays_run_bit_for_bit(a1a, algorithm, extra):
    setup = _setup(a1a, algorithm, **extra)
    plain = _run(setup, InProcessPool(*setup.pool_args()))
    hosts = _run(setup, InProcessPool(*setup.pool_args(), hosts=setup.method.n))
    np.testing.assert_array_equal(np.array(hosts.iterates), np.array(plain.iterates))
    assert hosts.records[-1]["uplink_bytes"] == plain.records[-1]["uplink_bytes"]
    assert hosts.records[-1]["downlink_bytes"] == plain.records[-1]["downlink_bytes"]


@pytest.mark.parametrize("algorithm,H", [("isega", 2), ("isega", 3), ("diana", 2), ("isgd", 4)])
def test_host_sums_give_the_same_iterates_and_the_union_bytes(a1a, algorithm, H):
    setup = _setup(a1a, algorithm)
    plain = _run(setup, InProcessPool(*setup.pool_args()))
    pool = InProcessPool(*setup.pool_args(), hosts=H)
    summed = _run(setup, pool)
    scale = np.max(np.abs(np.array(plain.iterates)))
    assert np.max(np.abs(np.array(summed.iterates) - np.array(plain.iterates))) <= 1e-12 * scale
    assert not np.array_equal(summed.x, plain.x) or H == 1    # a real sum of several workers changes the rounding
    expected = _union_bytes(setup.method, pool.groups, ROUNDS)
    assert summed.records[-1]["uplink_bytes"] == expected
    assert expected < plain.records[-1]["uplink_bytes"]       # masks overlap: the union is smaller than the sum
    d = setup.problem.d
    assert summed.records[-1]["downlink_bytes"] == ROUNDS * H * d * 8
    assert plain.records[-1]["downlink_bytes"] == ROUNDS * setup.method.n * d * 8


def test_full_communication_sends_one_vector_per_host(a1a):
    setup = _setup(a1a, "gd")
    res = _run(setup, InProcessPool(*setup.pool_args(), hosts=2))
    assert res.records[-1]["uplink_bytes"] == ROUNDS * 2 * setup.problem.d * 8


@pytest.mark.parametrize("algorithm,codec", [("isega", "natural7"), ("isaga_shared", "float64"), ("ef21", "float64")])
def test_no_sum_where_the_master_needs_each_message_or_values_are_coded(a1a, algorithm, codec):
    """natural7: a sum of coded values is not coded; ISAGA-shared's master keeps per-worker values; Top-K's ids
    travel: every worker's message is sent as without aggregation."""
    kw = {"codec": codec} if codec != "float64" else {}
    setup = _setup(a1a, algorithm, **kw)
    plain = _run(setup, InProcessPool(*setup.pool_args()), rounds=20)
    summed = _run(setup, InProcessPool(*setup.pool_args(), hosts=2), rounds=20)
    np.testing.assert_array_equal(summed.x, plain.x)
    assert summed.records[-1]["uplink_bytes"] == plain.records[-1]["uplink_bytes"]


def test_dask_hosts_send_sums_with_the_in_process_iterates_and_survive_a_kill(a1a, dask_client):
    """2 Dask processes, aggregate: the in-process run with hosts=2 to the bit, the same bytes; then a fresh
    2-process cluster whose second host is killed at round 30 recovers to the same iterates, bit for bit."""
    import signal
    import time

    from distributed import Client, LocalCluster

    setup = _setup(a1a, "isega")
    local_pool = InProcessPool(*setup.pool_args(), hosts=2)
    local = _run(setup, local_pool)
    pool = DaskPool(dask_client, *setup.pool_args(), aggregate=True)
    try:
        on_dask = _run(setup, pool)
    finally:
        pool.close()
    np.testing.assert_array_equal(np.array(on_dask.iterates), np.array(local.iterates))
    assert on_dask.records[-1]["uplink_bytes"] == local.records[-1]["uplink_bytes"]
    assert on_dask.records[-1]["downlink_bytes"] == local.records[-1]["downlink_bytes"]

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster, direct_to_workers=True) as client:
        events = []
        pool = DaskPool(client, *setup.pool_args(), aggregate=True, snapshot_every=20, worker_timeout=20,
                        on_recovery=events.append)
        victim = sorted(set(pool.placement.values()))[-1]
        pid = client.run(os.getpid, workers=[victim])[victim]

        def kill_at_30(rec):
            if rec["step"] == 30:
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)

        res = setup.run(pool, max_iter=ROUNDS, tol=1e-300, keep_iterates=True, log_every=1, observer=kill_at_30)
        assert pool.restarts == 1
        survivor = sorted(set(pool.placement.values()))
        assert events[0]["moved_to"] == {survivor[0]: [4, 5, 6, 7]}   # the lost host's workers stay one host
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))


def test_host_sums_pickle_as_their_values():
    import pickle

    b = HostSums([np.array([2, 3]), np.array([0, 1])], [np.ones(3), np.arange(2.0)], t=7)
    assert b.workers.tolist() == [0, 1, 2, 3] and b.t == 7
    c = pickle.loads(pickle.dumps(b))
    assert [g.tolist() for g in c.groups] == [[0, 1], [2, 3]] and [s.tolist() for s in c.sums] == [[0, 1], [1, 1, 1]]
    assert b.bytes_per_worker(10).tolist() == [8.0, 8.0, 12.0, 12.0] and b.float64_bytes(10) == 40.0
