"""Blocks of coordinates.

The coordinates 0..d-1 are cut into m = ceil(d / b) contiguous blocks of size b (the last one
may be shorter). In every iteration each worker i samples its own set U_i of exactly tau*m
blocks (``isparse.compression.sampling``; docs/algorithms.md §1; arXiv:1901.09437, section 2); tau and its
rules are :mod:`isparse.compression.tau`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import check_range

@dataclass(frozen=True)
class BlockPartition:
    """Contiguous blocks of size b, 1 <= b <= d (``size``): the m blocks the workers sample from
    (arXiv:1901.09437, section 2; docs/algorithms.md §1).

    Raises
    ------
    ConfigError
        (``size``) b not an integer in [1, d].
    """

    d: int
    size: int

    def __post_init__(self):
        check_range("size", self.size, 1, self.d, high_text="d", integer=True)

    @property
    def m(self) -> int:
        """Number of blocks, m = ceil(d / b) (the last one holds d - (m - 1) b coordinates)."""
        return math.ceil(self.d / self.size)

    def coords(self, blocks: np.ndarray) -> np.ndarray:
        """The coordinates (intp) of the sorted block ids ``blocks``, concatenated in block order."""
        b = self.size
        if b == 1:
            return np.asarray(blocks, dtype=np.intp)
        idx = (np.asarray(blocks, dtype=np.intp)[:, None] * b + np.arange(b)).ravel()
        return idx[idx < self.d]

    def coords_batch(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates of k workers' sorted block sets ``blocks``, shape (k, tau*m).

        Returns
        -------
        coords : ndarray of intp, shape (total,)
            Worker 0's coordinates in block order, then worker 1's, ...
        owner : ndarray of intp, shape (total,)
            Row of ``blocks`` (0..k-1) each coordinate belongs to.
        """
        blocks = np.asarray(blocks, dtype=np.intp)
        k, tm = blocks.shape
        b = self.size
        idx = (blocks[:, :, None] * b + np.arange(b)).reshape(k, tm * b)
        owner = np.broadcast_to(np.arange(k)[:, None], idx.shape)
        if b > 1 and self.d % b:                      # only the last block is short
            keep = idx < self.d
            return idx[keep], owner[keep]
        return idx.ravel(), owner.ravel()

    def mask(self, blocks: np.ndarray) -> np.ndarray:
        """The coordinates of the sorted block ids ``blocks`` as a bool mask of shape (d,)."""
        out = np.zeros(self.d, dtype=bool)
        out[self.coords(blocks)] = True
        return out
