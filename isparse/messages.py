"""The uplink message format: one batch of messages per host and round (docs/algorithms.md §6).

A batch carries, for k logical workers, the values each one sends, worker after worker. By default
it carries **values only**: the master recomputes every worker's block ids from (seed, i, t)
(``isparse.sampling``), so ``uplink_bytes`` counts values x 8 B. With ``send_ids`` (the old
convention, for comparison) and for compressors whose ids cannot be derived (EF21's Top-K), the
batch also carries the block ids, counted at 4 B each; a dense message (all m blocks) never needs ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bytes per transmitted value (float64) and per block id (int32).
VALUE_BYTES = 8
BLOCK_ID_BYTES = 4
BLOCK_ID_DTYPE = np.int32


@dataclass(frozen=True)
class Messages:
    """The messages of k logical workers in one round.

    Attributes
    ----------
    workers : ndarray of int32, shape (k,)
        Logical worker indices i, ascending.
    t : int
        The workers' iteration counter the values belong to (the same for all of them).
    counts : ndarray of int32, shape (k,)
        Number of values each worker sends (framing; derivable by the master, not counted as payload).
    values : ndarray of float64, shape (counts.sum(),)
        Worker ``workers[0]``'s values in block order, then the next worker's, ...
    blocks : ndarray of int32, shape (k, tau*m), or None
        Block ids sent with the values; None when the master derives them (values-only messages). The ids of a
        worker that sends all m blocks are neither needed nor counted.
    """

    workers: np.ndarray
    t: int
    counts: np.ndarray
    values: np.ndarray
    blocks: np.ndarray | None = None

    @property
    def k(self) -> int:
        return int(self.workers.size)

    def bytes_per_worker(self, m: int) -> np.ndarray:
        """Uplink payload of each worker in bytes, shape (k,): values x 8 + sent block ids x 4 (none for all m blocks)."""
        out = self.counts.astype(np.int64) * VALUE_BYTES
        if self.blocks is not None and self.blocks.shape[1] < m:
            out = out + np.where(self.counts > 0, self.blocks.shape[1] * BLOCK_ID_BYTES, 0)
        return out

    @staticmethod
    def concat(batches: list["Messages"]) -> "Messages":
        """One batch of the given ones (e.g. the replies of several hosts), ordered by worker index.

        Raises
        ------
        ValueError
            The batches belong to different iterations.
        """
        batches = [b for b in batches if b.k]
        if len(batches) == 1:
            return batches[0]
        ts = {b.t for b in batches}
        if len(ts) != 1:
            raise ValueError(f"messages of different iterations cannot be merged: {sorted(ts)}")
        workers = np.concatenate([b.workers for b in batches])
        counts = np.concatenate([b.counts for b in batches])
        values = np.concatenate([b.values for b in batches])
        blocks = None if batches[0].blocks is None else np.concatenate([b.blocks for b in batches])
        order = np.argsort(workers, kind="stable")
        if np.any(order != np.arange(order.size)):   # reorder the value segments by worker
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            values = np.concatenate([values[starts[j]:starts[j] + counts[j]] for j in order])
            workers, counts = workers[order], counts[order]
            blocks = None if blocks is None else blocks[order]
        return Messages(workers, ts.pop(), counts, values, blocks)
