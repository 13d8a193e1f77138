"""Click data made on the Dask workers (isparse.data.clicks): the same partitions for a seed wherever they are made,
the law's shape (unit-norm rows, a power law of feature frequencies, a few percent positives), and a fit on it that
moves no byte of X (the Dask workers' transfer logs)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from isparse import LogisticRegression
from isparse.data.clicks import click_data, click_partition


def test_a_partition_is_a_function_of_the_seed_and_its_index():
    A, b = click_partition(3, 500, 2 ** 12, 20, 1.1, 0.03, seed=7)
    A2, b2 = click_partition(3, 500, 2 ** 12, 20, 1.1, 0.03, seed=7)
    A3, _ = click_partition(4, 500, 2 ** 12, 20, 1.1, 0.03, seed=7)
    assert (A != A2).nnz == 0 and np.array_equal(b, b2) and (A != A3).nnz > 0
    np.testing.assert_allclose(np.sqrt(A.multiply(A).sum(axis=1)).A1, 1.0)
    assert set(np.unique(b)) <= {0.0, 1.0}


def test_the_law():
    """Feature frequencies fall as a power law of their rank (slope near -alpha over the frequent ranks); the
    positives are a few percent."""
    A, b = click_partition(0, 20000, 2 ** 14, 30, 1.1, 0.03, seed=0)
    counts = np.sort(np.bincount(A.indices, minlength=A.shape[1]))[::-1]
    ranks = np.arange(1, 201)
    slope = np.polyfit(np.log(ranks[9:]), np.log(counts[9:200]), 1)[0]
    assert -1.4 < slope < -0.7, slope
    assert 0.005 < b.mean() < 0.08, b.mean()


def test_made_on_the_workers_and_fitted_there(dask_client):
    X, y = click_data(4000, partitions=4, d=2 ** 12, nnz=20, seed=3)
    X, y = dask_client.persist([X, y])
    local = click_partition(1, 1000, 2 ** 12, 20, 1.1, 0.03, seed=3)[0]
    assert (dask_client.compute(X.blocks[1]).result() != local).nnz == 0
    dask_client.run(lambda dask_worker: (dask_worker.transfer_outgoing_log.clear(),
                                         dask_worker.transfer_incoming_log.clear()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LogisticRegression(lam=1e-3, algorithm="isega", max_iter=50, client=dask_client).fit(X, y)
    moved = dask_client.run(lambda dask_worker: sum(
        b for e in dask_worker.transfer_outgoing_log for k, b in e["keys"].items()
        if (k[0] if isinstance(k, tuple) else k) == X.name))
    assert sum(moved.values()) == 0 and est.n_iter_ == 50


@pytest.mark.parametrize("kw, name", [({"partitions": 0}, "partitions"), ({"positives": 1.0}, "positives"),
                                      ({"d": 5, "nnz": 10}, "d"), ({"alpha": 0}, "alpha")])
def test_bad_parameters_name_themselves(kw, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter must be"):
        click_data(100, **{"partitions": 2, **kw})
