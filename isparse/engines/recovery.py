"""The recovery state of :class:`isparse.engines.dask.DaskPool` (its Notes): the snapshot of the hosts' worker states
and the models broadcast since, kept in a file, not in the client's memory."""

from __future__ import annotations

import pickle
import tempfile

import numpy as np

__all__ = ["Recovery"]


class Recovery:
    """The recovery snapshot of a :class:`DaskPool` and the models broadcast since, kept in a file, not in the
    client's memory (as Dask spills to disk): the client holds neither the hosts' states (ISEGA: n d-vectors) nor
    up to :data:`REPLAY_BYTES` of models between recoveries, only while a recovery reads them back.

    The file is a temporary one (``tempfile``'s directory, ``TMPDIR``), removed when the pool is. ``round`` is the
    round of the snapshot (-1: none yet); ``model`` the model it goes with (a d-vector, in memory)."""

    def __init__(self):
        self._file = tempfile.TemporaryFile(prefix="isparse-recovery-")
        self.round, self.model, self.replay, self._snapshot_bytes = -1, None, 0, 0

    def keep(self, snapshots, round_: int, model) -> None:
        """A new snapshot (a list, one per host), taken at ``round_`` with ``model``; the models kept are dropped."""
        f = self._file
        f.seek(0)
        f.truncate()
        pickle.dump(list(snapshots), f, protocol=pickle.HIGHEST_PROTOCOL)
        self._snapshot_bytes, self.round, self.model, self.replay = f.tell(), int(round_), model, 0

    def add(self, x) -> None:
        """One more model (float64, d) to replay after the snapshot."""
        self._file.seek(0, 2)
        self._file.write(memoryview(np.ascontiguousarray(x, dtype=np.float64)))   # no bytes copy of x
        self.replay += 1

    def snapshot(self) -> list:
        """The kept snapshot, read back."""
        self._file.seek(0)
        return pickle.load(self._file)

    def models(self, d: int) -> list:
        """The models since the snapshot, read back, oldest first."""
        self._file.seek(self._snapshot_bytes)
        raw = np.fromfile(self._file, dtype=np.float64, count=self.replay * d)
        return list(raw.reshape(self.replay, d))

    def close(self) -> None:
        """Remove the file (the pool's finalizer calls it)."""
        self._file.close()
