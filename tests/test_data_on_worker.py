"""data.load=on_worker: each Dask worker reads its rows from the shared file; same iterates as shards sent from the client."""

import numpy as np
import pytest

from isparse import load_dataset
from specs import make
from isparse.engines.dask import DaskPool
from isparse.errors import DataError
from isparse.data.on_worker import ShardSource

from conftest import DATA_DIR

pytestmark = pytest.mark.needs_data


@pytest.mark.filterwarnings("ignore:.*rows have no features")
@pytest.mark.parametrize("algorithm", ["isega", "isaga_shared"])
def test_shards_read_on_the_workers_give_the_same_iterates(dask_client, algorithm):
    s = make(algorithm=algorithm, data=load_dataset("a1a", data_dir=str(DATA_DIR)), lam=0.05, n=4, block_size=4, seed=1)
    source = ShardSource.of({"name": "a1a", "dir": str(DATA_DIR)}, s.rows, s.shards)

    def iterates(pool):
        return np.array(s.run(pool, max_iter=40, tol=1e-300, keep_iterates=True, log_every=20).iterates)

    sent = iterates(DaskPool(dask_client, *s.pool_args()))
    read = iterates(DaskPool(dask_client, *s.pool_args(), source=source))
    np.testing.assert_array_equal(read, sent)
    assert np.abs(sent[-1] - sent[0]).max() > 1e-3   # the run moved
    rebuilt = source.subset([2]).load()[0]
    assert (rebuilt.A != s.shards[2].A).nnz == 0 and np.array_equal(rebuilt.b, s.shards[2].b)


@pytest.mark.filterwarnings("ignore:.*rows have no features")
def test_a_different_file_on_the_worker_is_an_error(dask_client):
    s = make(algorithm="isega", data=load_dataset("a1a", data_dir=str(DATA_DIR)), lam=0.05, n=4, block_size=4)
    wrong = ShardSource.of({"name": "w1a", "dir": str(DATA_DIR)}, s.rows, s.shards)
    with pytest.raises(DataError, match=r"data.load=on_worker: worker 0's shard read here from .*w1a"):
        wrong.subset([0]).load()
    with pytest.raises(DataError, match="the file must be the same on the client and every Dask worker"):
        DaskPool(dask_client, *s.pool_args(), source=wrong)   # the Dask workers read the file themselves
