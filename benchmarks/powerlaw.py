"""Synthetic sparse logistic regression with power-law feature frequencies (like url or news20), for item 10.

:func:`power_law_logistic` (N rows, d features, seeded): row j draws ``nnz_per_row`` feature indices independently
with P(feature k) = (k + 1)^-alpha / H_{d,alpha} (H the generalized harmonic number), duplicates merged, so feature
k appears in a row with probability 1 - (1 - p_k)^nnz_per_row, about nnz_per_row p_k ∝ (k + 1)^-alpha for all but
the few most frequent features; the values are 1 (a bag of words), each row scaled to unit norm (so phi'' <= 1/4
gives L_j <= 1/4 + lambda per example). Labels from a planted sparse model: w* has ``planted`` nonzero entries
N(0, 1) on features drawn uniformly, b_j = sign(a_j^T w* + noise * s z_j) with z_j ~ N(0, 1) and s the standard
deviation of a^T w* over the rows (a row touching none of w*'s features gets its label from the noise alone);
b_j = 0 is mapped to +1. Deterministic for a seed. The data set goes through the library as any in-memory data
(``isparse.build(spec, data=...)``, ``benchmarks.common.setup(..., data=...)``): the library's data sources do not
need it, so it stays here.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["power_law_logistic", "feature_frequencies", "power_law_slope"]


def power_law_logistic(N: int = 20_000, d: int = 100_000, nnz_per_row: int = 40, alpha: float = 1.0,
                       planted: int | None = None, noise: float = 0.1, seed: int = 0):
    """A seeded sparse logistic data set of power-law feature frequencies (the module docstring has the law).

    Parameters
    ----------
    N : int
        Rows (examples), >= 1.
    d : int
        Features, >= nnz_per_row.
    nnz_per_row : int
        Feature draws per row (distinct features per row: at most this, duplicates merged).
    alpha : float
        The power law's exponent, > 0.
    planted : int, optional
        Nonzeros of the planted model w* (default max(10, d // 100)).
    noise : float
        The label noise, relative to the spread of a^T w*.
    seed : int
        Everything is drawn from ``numpy.random.default_rng(seed)``.

    Returns
    -------
    isparse.Dataset
        ``A`` CSR (N, d) float64 with unit-norm rows, ``b`` in {-1, +1}.

    Raises
    ------
    ValueError
        A size or parameter out of its range.
    """
    from isparse import Dataset

    if N < 1 or d < 1 or not 1 <= nnz_per_row <= d or alpha <= 0 or noise < 0:
        raise ValueError(f"power_law_logistic: need N >= 1, 1 <= nnz_per_row <= d, alpha > 0, noise >= 0; got "
                         f"N={N}, d={d}, nnz_per_row={nnz_per_row}, alpha={alpha}, noise={noise}")
    planted = max(10, d // 100) if planted is None else int(planted)
    rng = np.random.default_rng(seed)
    p = (np.arange(1, d + 1, dtype=float)) ** -alpha
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    draws = np.minimum(np.searchsorted(cdf, rng.random(N * nnz_per_row), side="right"), d - 1)
    rows = np.repeat(np.arange(N), nnz_per_row)
    A = sp.csr_matrix((np.ones(N * nnz_per_row), (rows, draws)), shape=(N, d))
    A.sum_duplicates()
    A.data[:] = 1.0                                   # a word present once, however often it was drawn
    norms = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
    A = sp.csr_matrix(sp.diags(1.0 / norms) @ A)
    A.sort_indices()
    w = np.zeros(d)
    support = rng.choice(d, size=min(planted, d), replace=False)
    w[support] = rng.standard_normal(support.size)
    margin = A @ w
    spread = float(margin.std()) or 1.0
    b = np.sign(margin + noise * spread * rng.standard_normal(N))
    b[b == 0] = 1.0
    name = f"powerlaw-N{N}-d{d}-k{nnz_per_row}-a{alpha:g}-s{seed}"
    return Dataset(A=A, b=b, name=name,
                   source=f"benchmarks.powerlaw.power_law_logistic(N={N}, d={d}, nnz_per_row={nnz_per_row}, "
                          f"alpha={alpha}, planted={planted}, noise={noise}, seed={seed})",
                   labels="sign of a planted sparse model + noise")


def feature_frequencies(A) -> np.ndarray:
    """The fraction of rows in which each feature appears (nonzero), shape (d,).

    Parameters
    ----------
    A : scipy.sparse matrix, shape (N, d)

    Returns
    -------
    ndarray of shape (d,)
    """
    A = sp.csc_matrix(A)
    return np.diff(A.indptr) / A.shape[0]


def power_law_slope(freq: np.ndarray, lo: int = 10, hi: int | None = None) -> float:
    """The least-squares slope of log(frequency) against log(k + 1) over features k in [lo, hi) with a nonzero
    frequency: -alpha for a power law (the top features saturate at frequency 1 and the rarest are noise, hence
    the window).

    Parameters
    ----------
    freq : ndarray of shape (d,)
        :func:`feature_frequencies`.
    lo, hi : int
        The window of feature indices (default hi: d // 10).

    Returns
    -------
    float
    """
    hi = max(lo + 2, len(freq) // 10) if hi is None else hi
    k = np.arange(lo, min(hi, len(freq)))
    f = freq[k]
    keep = f > 0
    return float(np.polyfit(np.log(k[keep] + 1.0), np.log(f[keep]), 1)[0])
