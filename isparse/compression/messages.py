"""The uplink message format: one batch of messages per host and round (docs/algorithms.md §6).

A batch carries, for k logical workers, the values each one sends, worker after worker. By default
it carries **values only**: the master recomputes every worker's block ids from (seed, i, t)
(``isparse.compression.sampling``), so ``uplink_bytes`` counts the coded values (``isparse.compression.codecs``: 8 B each for the
default float64, 9 bits for ``natural``, ...). With ``send_ids`` (the old convention, for comparison) and for
compressors whose ids cannot be derived (EF21's Top-K), the batch also carries the block ids, counted at 4 B each;
a dense message (all m blocks) never needs ids.

On the wire (pickled, e.g. a Dask reply) a batch carries its codec's packed payload, not the decoded values: the
receiver decodes it on first use of ``values``.
"""

from __future__ import annotations

import numpy as np

from .codecs import FLOAT64, Codec

#: Bytes per transmitted value (float64) and per block id (int32).
VALUE_BYTES = 8
BLOCK_ID_BYTES = 4
BLOCK_ID_DTYPE = np.int32


class Messages:
    """The messages of k logical workers in one round (the format and its bytes: docs/algorithms.md §6).

    Attributes
    ----------
    workers : ndarray of int32, shape (k,)
        Logical worker indices i, ascending.
    t : int
        The workers' iteration counter the values belong to (the same for all of them).
    counts : ndarray of int32, shape (k,)
        Number of values each worker sends (framing; derivable by the master, not counted as payload).
    values : ndarray of float64, shape (counts.sum(),)
        Worker ``workers[0]``'s (decoded) values in block order, then the next worker's, ...
    blocks : ndarray of int32, shape (k, tau*m), or None
        Block ids sent with the values; None when the master derives them (values-only messages). The ids of a
        worker that sends all m blocks are neither needed nor counted.
    codec : Codec
        How the values are coded on the wire (``isparse.compression.codecs``; float64 by default).
    payload : ndarray or None
        The packed codes (what travels); None for a batch made on the master from decoded values (``concat``).

    Raises
    ------
    ValueError
        Neither ``values`` nor ``payload`` is given.
    """

    __slots__ = ("workers", "t", "counts", "_values", "blocks", "codec", "payload")

    def __init__(self, workers, t, counts, values=None, blocks=None, *, codec: Codec = FLOAT64, payload=None):
        self.workers, self.t, self.counts, self.blocks = workers, int(t), counts, blocks
        self.codec, self.payload = codec, payload
        if values is None and payload is None:
            raise ValueError("a batch needs its values or its payload")
        if values is None and codec.exact:
            values = payload
        if payload is None and codec.exact:
            self.payload = values
        self._values = values

    @classmethod
    def encoded(cls, workers, t, counts, values, blocks=None, *, codec: Codec = FLOAT64, uniforms=None):
        """The batch of ``values`` coded by ``codec`` (``uniforms``: a random codec's draws, one per value):
        its ``values`` are the decoded ones, what the master will see; its ``payload`` the packed codes."""
        if codec.exact:
            return cls(workers, t, counts, values, blocks)
        payload = codec.encode(values, counts, uniforms)
        return cls(workers, t, counts, codec.decode(payload, counts), blocks, codec=codec, payload=payload)

    @property
    def values(self) -> np.ndarray:
        """The decoded values, decoded from ``payload`` on first use."""
        if self._values is None:
            self._values = self.codec.decode(self.payload, self.counts)
        return self._values

    def __reduce__(self):   # the wire form: the payload, never the decoded values
        if self.payload is None or self.codec.exact:
            return (Messages, (self.workers, self.t, self.counts, self._values, self.blocks))
        return (_from_wire, (self.workers, self.t, self.counts, self.payload, self.blocks, self.codec))

    @property
    def k(self) -> int:
        """The number of logical workers in the batch."""
        return int(self.workers.size)

    def bytes_per_worker(self, m: int) -> np.ndarray:
        """Uplink payload of each worker in bytes, shape (k,): coded values (``codec.bits`` / 8) + sent block ids
        x 4 (a worker that sends all ``m`` blocks sends no ids). Not rounded: a message of 9-bit values need not fill
        whole
        bytes (the batch's packed buffer holds them back to back)."""
        return self._with_ids(self.codec.bits(self.counts) / 8.0, m)

    def float64_bytes(self, m: int) -> float:
        """What the whole batch would cost with float64 values (8 B each, ids as sent): the tau-only uplink."""
        return float(self._with_ids(self.counts.astype(np.int64) * VALUE_BYTES, m).sum())

    def _with_ids(self, out, m: int):
        if self.blocks is not None and self.blocks.shape[1] < m:
            out = out + np.where(self.counts > 0, self.blocks.shape[1] * BLOCK_ID_BYTES, 0)
        return out

    @staticmethod
    def concat(batches: list["Messages"]) -> "Messages":
        """One batch of the given ones of one iteration (e.g. the replies of several hosts; empty ones dropped),
        ordered by worker index, with decoded values and the first batch's codec.

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
        return Messages(workers, ts.pop(), counts, values, blocks, codec=batches[0].codec)


def _from_wire(workers, t, counts, payload, blocks, codec):
    return Messages(workers, t, counts, None, blocks, codec=codec, payload=payload)


class HostSums:
    """The uplink of hosts that each send one sum of their workers' messages (``messages.aggregate=host``).

    A host holding k logical workers adds their (decoded) messages coordinate by coordinate and sends the sum's
    values on the union of their coordinates, as float64 values only: the master recomputes each worker's block
    ids from (seed, i, t) and so the union, and the block ids never travel. This is what a deployed system sends
    where the master step needs only the sum (every method whose ``traits.master_sums`` is True): one d-vector per
    host for the full-communication baselines, the union of the masks for independent sparsification
    (docs/algorithms.md §6).

    Attributes
    ----------
    groups : list of ndarray of int32
        The logical workers of each host, ascending, hosts ordered by their first worker.
    sums : list of ndarray of float64
        Each host's sum on the union of its workers' coordinates (ascending coordinates), same order.
    workers : ndarray of int32, shape (k,)
        Every worker of the batch, ascending.
    """

    __slots__ = ("groups", "sums", "t", "workers")
    codec = FLOAT64
    blocks = None

    def __init__(self, groups, sums, t):
        order = np.argsort([int(g[0]) for g in groups], kind="stable")
        self.groups = [np.asarray(groups[j], dtype=np.int32) for j in order]
        self.sums = [np.asarray(sums[j], dtype=np.float64) for j in order]
        self.t = int(t)
        self.workers = np.concatenate(self.groups) if self.groups else np.zeros(0, np.int32)

    def __reduce__(self):
        return (HostSums, (self.groups, self.sums, self.t))

    @property
    def k(self) -> int:
        """The number of logical workers in the batch."""
        return int(self.workers.size)

    def bytes_per_worker(self, m: int) -> np.ndarray:
        """Each host's bytes (8 B per value of its sum) shared equally by its workers, in the order of
        ``workers`` (``m`` unused: no block ids travel); their sum is what crossed the hosts' links."""
        return np.concatenate([np.full(g.size, s.size * VALUE_BYTES / g.size) for g, s in zip(self.groups, self.sums)])

    def float64_bytes(self, m: int) -> float:
        """The batch's bytes (float64 values already)."""
        return float(sum(s.size for s in self.sums) * VALUE_BYTES)

    @staticmethod
    def concat(batches: list) -> "HostSums":
        """One batch of several hosts' sums of one iteration.

        Raises
        ------
        ValueError
            The batches belong to different iterations.
        """
        ts = {b.t for b in batches}
        if len(ts) != 1:
            raise ValueError(f"messages of different iterations cannot be merged: {sorted(ts)}")
        return HostSums([g for b in batches for g in b.groups], [s for b in batches for s in b.sums], ts.pop())


def merge(batches: list):
    """One batch of the hosts' replies of a round: :meth:`Messages.concat`, or :meth:`HostSums.concat` when the hosts
    sent sums.

    Raises
    ------
    ValueError
        Some hosts sent sums and others per-worker messages, or the batches belong to different iterations.
    """
    if not any(isinstance(b, HostSums) for b in batches):
        return Messages.concat(batches)
    if not all(isinstance(b, HostSums) for b in batches):
        raise ValueError("a round's replies mix host sums and per-worker messages")
    return HostSums.concat(batches)
