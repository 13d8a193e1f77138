"""A synthetic high-dimensional sparse logistic problem, for the regime where a round's bytes dominate its compute.

``make_sparse_logistic(N, d, nnz_per_row, seed)``: each row a_j has ``nnz_per_row`` distinct columns drawn uniformly
from d, values N(0, 1), scaled to ||a_j|| = 1 (so phi'' <= 1/4 gives L <= 1/4 + lambda per example); a planted
w ~ N(0, I_d); labels b_j = sign(a_j^T w + 0.1 z_j) with z_j ~ N(0, 1). Deterministic for a seed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def make_sparse_logistic(N: int = 20_000, d: int = 100_000, nnz_per_row: int = 20, seed: int = 0):
    from isparse import Dataset

    rng = np.random.default_rng(seed)
    cols = np.stack([np.sort(rng.choice(d, size=nnz_per_row, replace=False)) for _ in range(N)])
    vals = rng.standard_normal((N, nnz_per_row))
    vals /= np.linalg.norm(vals, axis=1, keepdims=True)
    A = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, N * nnz_per_row + 1, nnz_per_row)), shape=(N, d))
    w = rng.standard_normal(d)
    b = np.sign(A @ w + 0.1 * rng.standard_normal(N))
    b[b == 0] = 1.0
    return Dataset(A=A, b=b, name=f"synthetic-N{N}-d{d}-k{nnz_per_row}",
                   source=f"benchmarks.synthetic.make_sparse_logistic(N={N}, d={d}, nnz_per_row={nnz_per_row}, seed={seed})")

