"""The stacked data of a host (one CSR matrix, a row-to-worker map) against dense NumPy, on every lookup path."""

import numpy as np
import pytest

from isparse import load_dataset, split_rows
from isparse.problems import GLMProblem
from isparse.problems.glm_stack import StackedGLM

pytestmark = pytest.mark.needs_data


@pytest.fixture(scope="module")
def problem():
    ds = load_dataset("a1a")
    return GLMProblem(ds, split_rows(ds.N, 6, "shuffle", 3), 1e-2)


def _dense_grad(problem, i, x):
    """grad f_i(x) from the dense rows: (n/N) A_i^T phi'(A_i x) + lam x."""
    s = problem.shards[i]
    A, b = s.A.toarray(), s.b
    return (problem.n / problem.N) * (A.T @ (-b / (1 + np.exp(b * (A @ x))))) + problem.lam * x


@pytest.mark.parametrize("path", ["table", "scan", "keys"])
def test_gradients_on_sampled_coordinates_match_dense_on_every_path(problem, path):
    ids = [1, 2, 4]
    data = StackedGLM([problem.shards[i] for i in ids], ids)
    data.index = path
    rng = np.random.default_rng(0)
    x = rng.normal(size=data.d) * 0.1
    pw = np.repeat(np.arange(3), 20)
    pc = np.concatenate([np.sort(rng.choice(data.d, 20, replace=False)) for _ in range(3)])
    want = np.array([_dense_grad(problem, ids[p], x)[c] for p, c in zip(pw, pc)])
    np.testing.assert_allclose(data.grads_at(x, pw, pc), want, rtol=1e-12, atol=1e-14)
    assert data._csc[0] == path
    if path == "table":
        G = data.grads(x)
        np.testing.assert_allclose(G, np.stack([_dense_grad(problem, i, x) for i in ids]), rtol=1e-12, atol=1e-14)


def test_minibatch_and_example_gradients_match_dense(problem):
    ids = [0, 5]
    data = StackedGLM([problem.shards[i] for i in ids], ids)
    rng = np.random.default_rng(1)
    x = rng.normal(size=data.d) * 0.1
    batch = np.stack([np.sort(rng.choice(int(l), 3, replace=False)) for l in data.l])
    pw, pc = np.array([0, 0, 1, 1]), np.array([3, 40, 7, 100])
    got = data.minibatch_grads_at(x, batch, pw, pc)
    for q, (p, c) in enumerate(zip(pw, pc)):
        s = problem.shards[ids[p]]
        A, b = s.A.toarray()[batch[p]], s.b[batch[p]]
        g = (problem.n * s.l / problem.N) * (A.T @ (-b / (1 + np.exp(b * (A @ x))))) / 3 + problem.lam * x
        assert got[q] == pytest.approx(g[c], rel=1e-12, abs=1e-14)
    one = data.example_grads_at(x, batch[:, 0], pw, pc)
    np.testing.assert_allclose(one, data.minibatch_grads_at(x, batch[:, :1], pw, pc), rtol=0, atol=0)


@pytest.mark.parametrize("size", [1, 5, 10])   # d = 123: with b = 5 and 10 the last block is short
def test_block_scan_equals_the_pairs_bit_for_bit(problem, size):
    """The large-d path (entries matched against sampled blocks) sums each pair's entries in the same row order
    as the small-d table: the same bits, whatever the host's index."""
    from isparse import BlockPartition, Sampler
    from isparse.compression.sampling import BLOCKS

    ids = [0, 3, 4]
    bp = BlockPartition(123, size)
    U = Sampler(2).subsets(BLOCKS, ids, 5, bp.m, max(1, bp.m // 3))
    U[0, -1] = bp.m - 1                                      # include the (short) last block
    U = np.sort(U, axis=1)
    x = np.random.default_rng(3).normal(size=123) * 0.1
    out = {}
    for path in ("table", "scan"):
        data = StackedGLM([problem.shards[i] for i in ids], ids)
        data.index = path
        out[path] = data.grads_on_blocks(x, U, bp)
    pc, pw = bp.coords_batch(U)
    assert out["scan"].size == pc.size
    np.testing.assert_array_equal(out["scan"], out["table"])


@pytest.mark.parametrize("fraction", [2, 4, 5])   # tau = 1/2 and 1/4: A^T r whole; 1/5: the CSC table
def test_one_worker_host_takes_the_whole_product_from_tau_one_quarter_with_the_same_bits(problem, fraction):
    """A host of one worker sampling tau >= 1/4 of the coordinates computes A^T r whole over its CSR arrays and
    builds no CSC copy (its rows held once); the values are the CSC table's, bit for bit, and the dense ones."""
    data = StackedGLM([problem.shards[2]], [2])
    rng = np.random.default_rng(4)
    x = rng.normal(size=data.d) * 0.1
    pc = np.sort(rng.choice(data.d, -(-data.d // fraction), replace=False))
    pw = np.zeros(pc.size, dtype=np.int64)
    got = data.grads_at(x, pw, pc)
    assert (data._csc is None) == (fraction <= 4)
    table = StackedGLM([problem.shards[2]], [2])
    table._column_index()                                    # the gather from the CSC copy
    np.testing.assert_array_equal(got, table.grads_at(x, pw, pc))
    np.testing.assert_allclose(got, _dense_grad(problem, 2, x)[pc], rtol=1e-12, atol=1e-14)
