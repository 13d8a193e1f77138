"""Criteo-like click data made on the Dask workers: :func:`click_data`.

A seeded generator of hashed, power-law sparse click logs, partition by partition, each partition made by a task on
the Dask worker that will hold it: the rows never exist anywhere else (nothing is gathered, and the graph holds
only the parameters, so Dask can make a lost partition again).

The law (every draw a function of ``seed`` and the partition's index, so a partition is the same whatever the
machine or the number of partitions around it):

- **features**: each row draws ``nnz`` feature ranks k in 0..d-1 with P(k) ∝ (k + 1)^-alpha (the frequencies of
  hashed categorical values: few very frequent, a long tail), merged when drawn twice; rank k is the hashed feature
  index ``h[k]`` of a fixed random permutation h of 0..d-1 (a function of ``seed``); every value is 1, each row
  scaled to unit norm;
- **labels**: a planted model w* ~ N(0, 1) on every feature (a function of ``seed``), the click probability
  sigmoid(a^T w* + c) with c set so that the mean probability would be ``positives`` if a^T w* ~ N(0, 1) (true of a
  unit-norm row over draws of w*), y ~ Bernoulli: y in {0, 1}. For one w* the frequent features, shared by many
  rows, skew the margins: ``positives=0.03`` gave 1.7 % ones (20,000 rows, d = 2^16, seed 1), a few percent.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

__all__ = ["click_data", "click_partition"]


def _offset(positives: float) -> float:
    """c with E[sigmoid(c + Z)] = ``positives``, Z ~ N(0, 1) (Gauss-Hermite quadrature, bisection)."""
    z, w = np.polynomial.hermite_e.hermegauss(64)
    w = w / w.sum()
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(w @ expit(mid + z)) < positives:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def click_partition(index: int, rows: int, d: int, nnz: int, alpha: float, positives: float, seed: int):
    """Partition ``index`` of :func:`click_data`: (X, y), X CSR of shape (rows, d) float64 with unit-norm rows, y of
    shape (rows,) in {0, 1} (the module docstring has the law)."""
    model = np.random.default_rng([seed, 0])
    hashed = model.permutation(d)
    w_star = model.standard_normal(d)
    rng = np.random.default_rng([seed, 1, index])
    u = rng.random((rows, nnz))
    if alpha == 1.0:                                   # inverse CDF of the continuous law on [1, d + 1)
        ranks = np.exp(u * np.log(d + 1.0))
    else:
        top = (d + 1.0) ** (1.0 - alpha)
        ranks = (1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - alpha))
    cols = hashed[np.minimum(ranks.astype(np.int64) - 1, d - 1)]
    X = sp.csr_matrix((np.ones(rows * nnz), cols.ravel(), np.arange(0, rows * nnz + 1, nnz)), shape=(rows, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.diff(X.indptr))) @ X)
    p = expit(X @ w_star + _offset(positives))
    return X, (rng.random(rows) < p).astype(np.float64)


def click_data(rows: int, *, partitions: int, d: int = 2 ** 20, nnz: int = 30, alpha: float = 1.1,
               positives: float = 0.03, seed: int = 0):
    """Click data of ``rows`` rows in ``partitions`` row partitions, as Dask Arrays (X of scipy.sparse CSR chunks, y
    in {0, 1}), each partition made where it is computed (persist them on the cluster; the module docstring has
    the law).

    Parameters
    ----------
    rows : int
        N, split as evenly as ``numpy.array_split`` does.
    partitions : int
        In [1, rows].
    d : int
        Hashed features, >= nnz (2^20 by default).
    nnz : int
        Feature draws a row (distinct features: at most this).
    alpha : float
        The power law's exponent, > 0.
    positives : float
        The mean click probability, in (0, 1).
    seed : int
        Every draw is a function of it (and of the partition's index).

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        X of shape (rows, d), y of shape (rows,), with the same row chunks.

    Raises
    ------
    ValueError
        A parameter out of its range, naming it.
    """
    import dask
    import dask.array as da

    for name, value, ok, text in (("rows", rows, rows >= 1, "an int >= 1"),
                                  ("partitions", partitions, 1 <= partitions <= rows, f"an int in [1, rows={rows}]"),
                                  ("d", d, d >= max(nnz, 1), f"an int >= nnz={nnz}"),
                                  ("nnz", nnz, nnz >= 1, "an int >= 1"),
                                  ("alpha", alpha, alpha > 0, "a number > 0"),
                                  ("positives", positives, 0 < positives < 1, "a number in (0, 1)")):
        if not ok:
            raise ValueError(f"The '{name}' parameter must be {text}; got {value!r}.")
    sizes = [len(part) for part in np.array_split(np.arange(rows), partitions)]
    made = [dask.delayed(click_partition, pure=True, nout=2)(i, n, d, nnz, alpha, positives, seed)
            for i, n in enumerate(sizes)]
    meta = sp.csr_matrix((0, d))
    X = da.concatenate([da.from_delayed(X, shape=(n, d), dtype=np.float64, meta=meta)
                        for (X, _), n in zip(made, sizes)])
    y = da.concatenate([da.from_delayed(y, shape=(n,), dtype=np.float64) for (_, y), n in zip(made, sizes)])
    return X, y
