"""Spectral constants of a data matrix: lambda_max of row blocks (the L_i of the shards) and a basis of null(A).

Both are computed once per problem (``isparse.problems.glm.GLMProblem`` caches them); the batched Gram-matrix path
makes n = 10^4 small shards cost one sparse product instead of 10^4 eigenproblems.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def rows_view(A: sp.csr_matrix, lo: int, hi: int) -> sp.csr_matrix:
    """Rows lo:hi of a CSR matrix with sorted indices, as a CSR matrix sharing its arrays (no copy, no check): writing
    into its ``data`` writes into A's."""
    start, stop = A.indptr[lo], A.indptr[hi]
    out = sp.csr_matrix((A.data[start:stop], A.indices[start:stop], A.indptr[lo:hi + 1] - start),
                        shape=(hi - lo, A.shape[1]), copy=False)
    out.has_sorted_indices = True
    return out


#: shards of at most this many rows get lambda_max from their rows' Gram matrices, batched (see :func:`top_eigs`)
GRAM_ROWS = 64


#: null(A) by a dense eigendecomposition of A^T A up to this d; above it only the empty columns (see null_space_basis)
NULL_DENSE_MAX_D = 1000
#: an eigenvalue of A^T A at most this fraction of the largest counts as zero
NULL_REL_TOL = 1e-10


def null_space_basis(A: sp.csr_matrix, dense_max_d: int = NULL_DENSE_MAX_D, rel_tol: float = NULL_REL_TOL):
    """An orthonormal basis of null(A) and how it was found (issue 21: the part of ||x - x*||^2 that only the
    penalty's curvature lambda pulls back; one-hot groups that sum to a constant, duplicated and empty columns).

    Returns
    -------
    Z : ndarray or sparse matrix of shape (d, k)
        Orthonormal columns: for d <= ``dense_max_d`` (dense) the eigenvectors of A^T A whose eigenvalue is at most
        ``rel_tol`` x the largest (exact null directions have eigenvalues at rounding level, about 1e-16 x the
        largest; a direction of curvature below 1e-10 x L is, next to lambda, null in practice); for larger d the
        unit vectors of the empty columns only (a subspace of null(A); sparse).
    how : str
        ``"eigh of A^T A (d x d)"`` or ``"empty columns only (d > <dense_max_d>)"``.
    """
    d = A.shape[1]
    if d <= dense_max_d:
        G = (A.T @ A).toarray()
        w, V = np.linalg.eigh(G)
        keep = w <= rel_tol * max(float(w[-1]), 0.0)
        return V[:, keep].copy(), "eigh of A^T A (d x d)"
    empty = np.flatnonzero(np.bincount(sp.csr_matrix(A).indices, minlength=d) == 0)   # no CSC copy of A
    # sparse: at d = 10^6 a dense d x k basis of the empty columns would not fit in memory
    Z = sp.csc_matrix((np.ones(empty.size), (empty, np.arange(empty.size))), shape=(d, empty.size))
    return Z, f"empty columns only (d > {dense_max_d})"


def top_eigs(A: sp.csr_matrix, ptr: np.ndarray) -> np.ndarray:
    """lambda_max(A_i^T A_i), shape (n,), of every block of rows A_i = A[ptr[i]:ptr[i+1]] (the L_i of the shards, up to
    scale; 0 for an empty block); A has sorted indices.

    A block of l <= :data:`GRAM_ROWS` rows (and fewer than d) uses lambda_max(A_i A_i^T), its l x l Gram matrix:
    the entries of all such Gram matrices come from one sparse product of row pairs and their eigenvalues from one
    batched ``eigvalsh`` per block size (at n = 10^4 shards of 3 rows, a9a: 0.1 s instead of 42 s for 10^4 d x d
    problems). Larger blocks keep :func:`top_eig` (d x d, or svds for large d)."""
    n = ptr.size - 1
    l = np.diff(ptr)
    out = np.zeros(n)
    small = np.flatnonzero((l > 0) & (l <= GRAM_ROWS) & (l < A.shape[1]))
    for size in np.unique(l[small]):
        blocks = small[l[small] == size]
        jj, kk = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
        J = (ptr[blocks][:, None, None] + jj[None]).ravel()
        K = (ptr[blocks][:, None, None] + kk[None]).ravel()
        dots = np.asarray(A[J].multiply(A[K]).sum(axis=1)).ravel()
        out[blocks] = np.linalg.eigvalsh(dots.reshape(blocks.size, size, size))[:, -1]
    for i in np.setdiff1d(np.flatnonzero(l > 0), small):
        out[i] = top_eig(rows_view(A, ptr[i], ptr[i + 1]))
    return out


def top_eig(A: sp.csr_matrix) -> float:
    """lambda_max(A^T A) (0 when A has no rows): dense eigvalsh for d <= 2000, else the top singular value from svds,
    squared, over products with A and its transposed view (svds of the matrix itself would make A^H, a copy of A)."""
    if A.shape[0] == 0:
        return 0.0
    if A.shape[1] <= 2000:
        G = (A.T @ A).toarray()
        return float(np.linalg.eigvalsh(G)[-1])
    from scipy.sparse.linalg import LinearOperator, svds

    AT = A.T                                            # a view of a CSR matrix's arrays (A is real)
    op = LinearOperator(A.shape, matvec=lambda v: A @ v, rmatvec=lambda v: AT @ v, matmat=lambda V: A @ V,
                        rmatmat=lambda V: AT @ V, dtype=A.dtype)
    # a fixed start: svds draws one from fresh entropy otherwise, and the last bits of lambda_max (so of L and the
    # stepsize) would differ from one call to the next
    v0 = np.random.default_rng(0).standard_normal(min(A.shape))
    return float(svds(op, k=1, v0=v0, return_singular_vectors=False)[0] ** 2)
