"""The data of the k logical workers one host holds, stacked: one CSR matrix and a row-to-worker map.

One product A x gives the margins of every hosted row; one gathered product gives every hosted
worker's gradient on its own sampled coordinates (only those are computed). The sums over a
worker's rows run in ascending row order whatever else the host holds, so a worker's numbers do
not depend on its placement: the in-process engine (one host of n workers) and the Dask engine
(one host per Dask worker) compute the same values.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def stack_rows(blocks) -> sp.csr_matrix:
    """The CSR blocks one under the other, column indices sorted: the block itself when there is one (no copy, its
    indices sorted in place), else a new matrix."""
    A = blocks[0] if len(blocks) == 1 and sp.isspmatrix_csr(blocks[0]) else sp.vstack(blocks, format="csr")
    A.sort_indices()
    return A


class StackedGLM:
    """f_p for the hosted workers p = 0..k-1 of a linear-model problem (``GLMProblem``); the shards share ``scale``,
    ``loss`` and ``penalty``. It has every member of :class:`~isparse.problems.stacked.Stacked` (whose docstrings
    say what the arguments are), and the shared-data methods' :meth:`rows_grads_at`.

    Attributes
    ----------
    A : csr_matrix, shape (R, d)
        The hosted rows, worker after worker (R = sum of l_p).
    row_ptr : ndarray of int64, shape (k + 1,)
        Worker p owns rows row_ptr[p]:row_ptr[p + 1].
    l : ndarray of int64, shape (k,)
        Examples per worker.
    """

    capabilities = ("grads", "grads_at", "example_grads_at", "minibatch_grads_at")

    def __init__(self, shards, ids):
        self.ids = np.asarray(ids, dtype=np.int64)
        s0 = shards[0]
        self.scale, self.loss, self.penalty = s0.scale, s0.loss, s0.penalty
        self.A = stack_rows([s.A for s in shards])
        self.b = np.concatenate([s.b for s in shards])
        self._nb = -self.b
        self.l = np.array([s.A.shape[0] for s in shards], dtype=np.int64)
        self.row_ptr = np.concatenate([[0], np.cumsum(self.l)])
        self.owner = np.repeat(np.arange(self.l.size), self.l)
        self.R, self.d = self.A.shape
        self._csc = self._keys_csr = self._AT = None
        self.index = None       # how grads_at finds entries: None (by size), "table", "scan" or "keys"

    @property
    def k(self) -> int:
        """int: the number k of hosted workers."""
        return int(self.ids.size)

    # -- building blocks ------------------------------------------------------------------------
    def residuals(self, x: np.ndarray) -> np.ndarray:
        """phi'(a_j^T x; b_j) of every hosted row, shape (R,) (in the margins' storage where the loss can:
        ``loss.deriv_into``)."""
        return self.loss.deriv_into(self.A @ x, self.b, self._nb)

    #: memory budget (entries) of the per-host maps used by :meth:`grads_at` for large d
    MAP_ENTRIES = 64_000_000

    def _column_index(self):
        """How :meth:`grads_at` finds worker p's entries of column c (all found in ascending row order):

        - ``("table", C, seg)``: a CSC copy and seg of shape (d, k + 1), worker p's entries of column c being
          C.data[seg[c, p]:seg[c, p + 1]] (when the table is at most 4 x nnz entries; for one worker, the CSC's
          column pointers);
        - ``("scan", ...)``: for large d, every hosted entry is tested against the sampled pairs through a
          (k, d) map, O(nnz + pairs) per call (when k x d fits :data:`MAP_ENTRIES`);
        - ``("keys", C, keys)``: otherwise, a binary search of col * R + row per pair.
        """
        if self._csc is None:
            C = self.A.tocsc()
            C.sort_indices()
            if self.k == 1 and self.index in (None, "table"):   # worker 0's entries of column c: all of them
                self._csc = ("table", C, np.stack([C.indptr[:-1], C.indptr[1:]], axis=1).astype(np.int64))
                return self._csc
            cols = np.repeat(np.arange(self.d, dtype=np.int64), np.diff(C.indptr))
            keys = cols * self.R + C.indices
            kind = self.index or ("table" if self.d * (self.k + 1) <= 4 * max(C.nnz, self.d) else
                                  "scan" if self.k * self.d <= self.MAP_ENTRIES else "keys")
            if kind == "table":
                q = np.arange(self.d, dtype=np.int64)[:, None] * self.R + self.row_ptr[None, :]
                self._csc = ("table", C, np.searchsorted(keys, q))
            elif kind == "scan":
                rows = np.repeat(np.arange(self.R, dtype=np.int64), np.diff(self.A.indptr))
                flat = self.owner[rows] * self.d + self.A.indices            # (worker, column) of each CSR entry
                self._csc = ("scan", rows, flat, np.zeros(self.k * self.d, bool), np.empty(self.k * self.d, np.int64))
            else:
                self._csc = ("keys", C, keys)
        return self._csc

    def _whole_product(self, pc: np.ndarray) -> bool:
        """Whether :meth:`grads_at` takes A^T r whole over the CSR's own arrays and keeps ``pc``: for one hosted
        worker sampling at least d/4 coordinates (tau >= 1/4) with no column index built yet. The same sums in the
        same row order as the index paths (bit for bit), faster from tau = 1/4 on (0.09 s against 0.10 s a call at
        26 M entries, d = 2^20; the gather wins below), and no CSC copy: the host holds its rows once."""
        return self.k == 1 and self._csc is None and 4 * pc.size >= self.d

    def _margins(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """a_j^T x for the given rows, shape (len(rows),), from the CSR arrays (entries summed in index order)."""
        ptr = self.A.indptr
        lo = ptr[rows]
        lens = ptr[rows + 1] - lo
        seg = np.repeat(np.arange(rows.size), lens)
        pos = np.arange(seg.size) + np.repeat(lo - (np.cumsum(lens) - lens), lens)
        return np.bincount(seg, weights=self.A.data[pos] * x[self.A.indices[pos]], minlength=rows.size)

    def _lookup(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """A[rows, cols] elementwise (0 where A has no entry), by binary search in the CSR keys row * d + col."""
        if self._keys_csr is None:
            r = np.repeat(np.arange(self.R, dtype=np.int64), np.diff(self.A.indptr))
            self._keys_csr = r * self.d + self.A.indices
        keys = self._keys_csr
        q = np.asarray(rows, dtype=np.int64) * self.d + np.asarray(cols, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, q), max(keys.size - 1, 0))
        return np.where(keys[pos] == q, self.A.data[pos], 0.0) if keys.size else np.zeros(q.size)

    # -- what the methods use ------------------------------------------------------------------
    def grads(self, x: np.ndarray, which: np.ndarray | None = None) -> np.ndarray:
        """grad f_p(x) of the hosted workers ``which`` (default all), dense, shape (w, d).

        One sparse matrix-vector product: the CSC entries of A, cut at every (column, worker) segment, form a
        (d k) x R matrix whose product with phi'(A x) is every worker's A_p^T r_p (rows summed in ascending order)."""
        r = self.residuals(x)
        if self.k == 1:   # A^T r: the same sums, in the same row order, without the (d k) x R copy below
            G = (self.A.T @ r)[None, :]
            return self.scale * (G if which is None else G[np.asarray(which, dtype=np.intp)]) + \
                self.penalty.grad(x)[None, :]
        if self._AT is None:
            C = self.A.tocsc()
            C.sort_indices()
            cols = np.repeat(np.arange(self.d, dtype=np.int64), np.diff(C.indptr))
            keys = cols * self.R + C.indices
            seg = np.searchsorted(keys, np.arange(self.d, dtype=np.int64)[:, None] * self.R + self.row_ptr[None, :-1])
            indptr = np.append(seg.ravel(), C.nnz)
            self._AT = sp.csr_matrix((C.data, C.indices, indptr), shape=(self.d * self.k, self.R))
        G = (self._AT @ r).reshape(self.d, self.k).T
        if which is not None:
            G = G[np.asarray(which, dtype=np.intp)]
        return self.scale * G + self.penalty.grad(x)[None, :]

    def grads_at(self, x: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """grad f_{pw[q]}(x)[pc[q]] for every pair q (``pw`` non-decreasing): one margin product, then only those
        coordinates, the sampled blocks of Algorithms 1 and 2 (IBCD, ISEGA)."""
        r = self.residuals(x)
        if self._whole_product(pc):
            return self.scale * (self.A.T @ r)[pc] + self.penalty.grad(x[pc])
        index = self._column_index()
        if index[0] == "scan":
            _, rows, flat, hit, pos = index
            q = pw.astype(np.int64) * self.d + pc
            hit[q], pos[q] = True, np.arange(q.size)
            sel = hit[flat]
            hit[q] = False
            local = np.bincount(pos[flat[sel]], weights=self.A.data[sel] * r[rows[sel]], minlength=pc.size)
            return self.scale * local + self.penalty.grad(x[pc])
        C = index[1]
        if index[0] == "table":
            lo, hi = index[2][pc, pw], index[2][pc, pw + 1]
        else:
            base = pc.astype(np.int64) * self.R
            lo = np.searchsorted(index[2], base + self.row_ptr[pw])
            hi = np.searchsorted(index[2], base + self.row_ptr[pw + 1])
        lens = hi - lo
        starts = np.cumsum(lens) - lens
        seg = np.repeat(np.arange(pc.size), lens)                       # which pair each gathered entry is in
        pos = np.arange(seg.size) + np.repeat(lo - starts, lens)
        # bincount sums each pair's entries in row order, one after the other, as the other index paths do
        local = np.bincount(seg, weights=C.data[pos] * r[C.indices[pos]], minlength=pc.size)
        return self.scale * local + self.penalty.grad(x[pc])

    def grads_on_blocks(self, x: np.ndarray, U: np.ndarray, blocks, pairs=None) -> np.ndarray:
        """grad f_p(x) on the coordinates of every hosted worker's block set U_i^t, in ``blocks.coords_batch(U)``
        order (worker after worker, ascending coordinates).

        For large d (the ``scan`` index) every hosted entry is matched against the sampled blocks through a
        (k, m) map, O(nnz) per call; otherwise :meth:`grads_at` on the coordinate pairs."""
        pc, pw = blocks.coords_batch(U) if pairs is None else pairs
        if self._whole_product(pc):
            return self.grads_at(x, pw, pc)
        index = self._column_index()
        if index[0] != "scan":
            return self.grads_at(x, pw, pc)
        r = self.residuals(x)
        b, m, k = blocks.size, blocks.m, U.shape[0]
        cached = self.__dict__.get("_block_scan")
        if cached is None or cached[0] != b:
            rows = index[1]
            ent_block = self.A.indices // b
            cached = (b, self.owner[rows] * m + ent_block, self.A.indices - ent_block * b, np.full(k * m, -1, np.int64))
            self._block_scan = cached
        _, ent_key, ent_off, bmap = cached
        sizes = np.where(U == m - 1, self.d - (m - 1) * b, b).ravel()
        flat = (np.arange(k)[:, None] * m + U).ravel()
        bmap[flat] = np.concatenate([[0], np.cumsum(sizes)[:-1]])      # where each sampled block's values start
        start = bmap[ent_key]
        sel = start >= 0
        bmap[flat] = -1
        local = np.bincount(start[sel] + ent_off[sel], weights=self.A.data[sel] * r[index[1][sel]], minlength=pc.size)
        return self.scale * local + self.penalty.grad(x[pc])

    def example_grads_at(self, x: np.ndarray, rows: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """grad f_{p j_p}(x)[c] for pairs (p, c), j_p = ``rows[p]`` the local example of worker p (ISAGA,
        Algorithm 5); f_pj = (n l_p / N) phi_j + P, so that f_p = (1/l_p) sum_j f_pj."""
        return self.minibatch_grads_at(x, np.asarray(rows)[:, None], pw, pc)

    def minibatch_grads_at(self, x: np.ndarray, batch: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """(1/B) sum_{j in batch[p]} grad f_pj(x)[c] for pairs (p, c), ``batch`` of shape (k, B) the local example
        indices of each hosted worker's minibatch (ISGD, Algorithm 6)."""
        return self.rows_grads_at(x, self.row_ptr[:-1, None] + batch, self.scale * self.l, pw, pc)

    def rows_grads_at(self, x, rows: np.ndarray, weight: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """(weight_p / B) sum_{j in rows[p]} phi'_j a_jc + P'(x)_c for pairs (p, c).

        Parameters
        ----------
        rows : ndarray of int, shape (k, B)
            Hosted row indices (0..R-1, rows of :attr:`A`) of each hosted worker.
        weight : ndarray of float, shape (k,)
            The weight of each worker's loss terms (n l_p / N for f_pj).
        """
        B = rows.shape[1]
        flat = rows.ravel()
        r = self.loss.deriv(self._margins(flat, x), self.b[flat]).reshape(rows.shape)
        vals = self._lookup(rows[pw].ravel(), np.repeat(pc, B))
        local = (vals.reshape(pc.size, B) * r[pw]).sum(axis=1)
        return (np.asarray(weight)[pw] / B) * local + self.penalty.grad(x[pc])

    def example_grads(self, x: np.ndarray) -> np.ndarray:
        """grad f_pj(x) of every hosted example, dense, shape (R, d), row r the example in hosted row r (for the
        Lyapunov targets of SAGA tables, Theorem 5)."""
        r = self.residuals(x) * (self.scale * self.l[self.owner])
        return np.asarray(sp.diags(r) @ self.A.toarray()) + self.penalty.grad(x)[None, :]
