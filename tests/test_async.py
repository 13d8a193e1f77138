"""Asynchronous ISGD (Alg. 8): simulated in-process (seeded, reproducible) and truly concurrent on Dask."""

import numpy as np
import pytest

from specs import make
from isparse.engines.dask import DaskPool
from isparse.problems import QuadraticProblem


@pytest.fixture(scope="module")
def quadratic():
    return QuadraticProblem(d=30, o=12, n=6, seed=2)
@pytest.mark.slow


def test_simulated_async_is_reproducible_and_converges_on_quadratic(quadratic):
    s = make(algorithm="async_isgd", problem=quadratic, n=6, block_size=1, step_multiplier=0.5)
    a = s.run(max_iter=30000, tol=1e-8, log_every=500, keep_iterates=True)
    b = s.run(max_iter=30000, tol=1e-8, log_every=500, keep_iterates=True)
    assert a.converged and a.iterations == b.iterations
    np.testing.assert_array_equal(np.array(a.iterates), np.array(b.iterates))
    last = a.records[-1]
    # heterogeneous simulated workers: stale models, about n - 1 updates between a worker's reads
    assert 2 < last["delay_mean"] < 3 * 6 and last["delay_max"] > last["delay_mean"]
    # one message per iteration: tau*m values of 8 bytes (values only: the master derives the ids)
    assert last["uplink_bytes"] == a.iterations * s.method.tau_m * 8


@pytest.mark.slow   # 25 s: in the slow run; the default run keeps the simulated asynchronous one
def test_dask_async_converges_and_logs_delays(dask_client, quadratic):
    s = make(algorithm="async_isgd", problem=quadratic, n=6, block_size=1, step_multiplier=0.5)
    res = s.run(DaskPool(dask_client, *s.pool_args()), max_iter=30000, tol=1e-8, log_every=500)
    assert res.converged
    assert res.records[-1]["delay_mean"] > 0
