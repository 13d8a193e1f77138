"""Shards read where they live (``data.load=on_worker``): what a Dask worker needs to rebuild its shards itself.

With a filesystem the client and the Dask workers share, each worker reads the data file and keeps
its own rows, instead of receiving the shards from the client. The client sends only the row
indices and the small loss/penalty objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..problems.glm import GLMShard


@dataclass(frozen=True)
class ShardSource:
    """How to rebuild the shards of some logical workers from the data file.

    Attributes
    ----------
    dataset : dict
        The data source's keys (``isparse.data.sources.DataSource.loader``: absolute paths, which must mean the same file
        on every Dask worker).
    ids : tuple of int
        The logical workers.
    rows : tuple of ndarray of int
        ``rows[k]``: the data rows of worker ``ids[k]``.
    shards : tuple of (scale, loss, penalty, l_i, nnz)
        What the client built for ``ids[k]``: its weight and functions, and the shape to check the rebuilt
        shard against.
    """

    dataset: dict
    ids: tuple
    rows: tuple
    shards: tuple

    @classmethod
    def of(cls, dataset: dict, rows: list, shards: list) -> "ShardSource":
        """The source of all n workers, from the client's ``rows`` (per worker) and ``shards``."""
        return cls(dict(dataset), tuple(range(len(shards))), tuple(np.asarray(r) for r in rows),
                   tuple((s.scale, s.loss, s.penalty, s.A.shape[0], s.A.nnz) for s in shards))

    def subset(self, ids) -> "ShardSource":
        """The source of the logical workers ``ids`` only (what one Dask worker is sent)."""
        pos = [self.ids.index(i) for i in ids]
        return ShardSource(self.dataset, tuple(int(i) for i in ids), tuple(self.rows[k] for k in pos),
                           tuple(self.shards[k] for k in pos))

    #: where each worker's shards are (None: anywhere; the pool places them)
    plan = None

    def submit(self, client, address: str, ids) -> list:
        """The task that reads the shards of ``ids`` on the Dask worker ``address`` (the ``source`` of
        :class:`~isparse.engines.dask.DaskPool`)."""
        return [client.submit(self.subset(ids).load, workers=[address], allow_other_workers=False, pure=False)]

    def load(self) -> list:
        """Read the data set here and cut the shards of ``ids``.

        Raises
        ------
        DataError
            A rebuilt shard's rows or non-zeros differ from the client's (the file is not the same here).
        """
        from .sources import DataSource

        data = DataSource.from_dict(self.dataset).read()
        out = []
        for i, rows, (scale, loss, penalty, l_i, nnz) in zip(self.ids, self.rows, self.shards):
            A = data.A[rows]
            if A.shape[0] != l_i or A.nnz != nnz:
                raise DataError(f"data.load=on_worker: worker {i}'s shard read here from {data.source} has "
                                f"{A.shape[0]} rows and {A.nnz} non-zeros; the client's has {l_i} and {nnz} "
                                f"(the file must be the same on the client and every Dask worker).")
            out.append(GLMShard(A=A, b=data.b[rows], scale=scale, loss=loss, penalty=penalty))
        return out
