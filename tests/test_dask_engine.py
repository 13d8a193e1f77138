"""The Dask engine on a real LocalCluster (2 worker processes) gives the in-process engine's iterates."""

import numpy as np
import pytest

from isparse import InProcessPool, load_dataset
from specs import make
from isparse.engines.dask import DaskPool, place_workers


def test_placement_is_even_and_deterministic():
    plan = place_workers(5, ["tcp://b:2", "tcp://a:1"])
    assert plan == {"tcp://a:1": [0, 1, 2], "tcp://b:2": [3, 4]}
    assert place_workers(1, ["tcp://b:2", "tcp://a:1"]) == {"tcp://a:1": [0]}


@pytest.mark.parametrize("algorithm", ["isega", "ibcd", "ibgd", "isaga", "isaga_shared", "isgd", "ef21"])
def test_dask_and_inprocess_iterates_agree(dask_client, algorithm):
    s = make(algorithm=algorithm, data=load_dataset("breast_cancer"), lam=0.1, n=5, block_size=2, seed=3)

    def iterates(pool):
        res = s.run(pool, max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
        return np.array(res.iterates), [r.get("lyapunov") for r in res.records]

    local, lyap_local = iterates(InProcessPool(*s.pool_args()))
    pool = DaskPool(dask_client, *s.pool_args())
    assert len(set(pool.placement.values())) == 2   # the 4 logical workers are spread over both processes
    remote, lyap_remote = iterates(pool)
    np.testing.assert_allclose(remote, local, rtol=0, atol=1e-12)
    if lyap_local[0] is not None:   # ISEGA and ISAGA log their Lyapunov function; it needs the worker states
        assert lyap_remote == pytest.approx(lyap_local, rel=1e-12)
    assert np.abs(local[-1] - local[0]).max() > 0.01   # the run moved
