"""A host of logical workers: their stacked data, their batched state and their step counters.

The in-process engine uses one host holding all n logical workers; the Dask engine one host per
Dask worker, as an actor, holding the logical workers placed there. Both call :meth:`WorkerHost.round`,
so the worker step is the same code everywhere.

Snapshots are values: a :class:`HostSnapshot` holds the state object itself (no copy). After a
snapshot the next step is told not to donate its input state (``Method`` docstring), so the
snapshot stays intact; every other step may update the arrays in place.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .hooks import host_sums, sums_on_host


@dataclass(frozen=True)
class HostSnapshot:
    """The state of the logical workers ``ids`` after ``t`` of their own steps.

    Attributes
    ----------
    t : ndarray of int64, shape (k,)
        Steps each worker has done (equal in a synchronous run).
    l : ndarray of int64, shape (k,)
        Examples per worker (to split per-example arrays by worker).
    """

    ids: np.ndarray
    state: object
    t: np.ndarray
    l: np.ndarray


def _split(snap: HostSnapshot) -> dict:
    """{i: (fields of worker i, t_i, l_i)}: a state's arrays have a leading axis of workers (k) or examples (sum l)."""
    k, R = snap.ids.size, int(snap.l.sum())
    ptr = np.concatenate([[0], np.cumsum(snap.l)])
    out = {}
    for p, i in enumerate(snap.ids.tolist()):
        if snap.state is None:
            fields = None
        else:
            fields = tuple(a[p:p + 1] if a.shape[0] == k else a[ptr[p]:ptr[p + 1]] if a.shape[0] == R else a
                           for a in snap.state)
        out[i] = (fields, int(snap.t[p]), int(snap.l[p]))
    return out


def regroup(snapshots, ids) -> HostSnapshot:
    """The snapshot of the workers ``ids``, in that order, from snapshots of other groupings (a recovery, a resume
    elsewhere): one of ``snapshots`` itself when its ids are ``ids``, else the workers' rows cut out and concatenated
    (a KeyError when a worker is in none)."""
    ids = np.asarray(ids, dtype=np.int64)
    for s in snapshots:
        if np.array_equal(s.ids, ids):
            return s
    parts = {}
    for s in snapshots:
        parts.update(_split(s))
    rows = [parts[int(i)] for i in ids]
    first = rows[0][0]
    state = None
    if first is not None:
        template = next(s.state for s in snapshots if s.state is not None)
        state = type(template)(*(np.concatenate([r[0][f] for r in rows]) for f in range(len(first))))
    return HostSnapshot(ids, state, np.array([r[1] for r in rows], np.int64), np.array([r[2] for r in rows], np.int64))


def split_workers(ids, hosts: int) -> list:
    """The logical workers ``ids`` (ascending) split evenly and contiguously over ``hosts`` machines:
    ``numpy.array_split`` into min(hosts, n) parts (the Dask engine's placement over its sorted worker addresses,
    :func:`isparse.engines.dask.place_workers`)."""
    ids = np.asarray(ids, dtype=np.int64)
    return [part for part in np.array_split(ids, max(1, min(int(hosts), ids.size)))]


class WorkerHost:
    """Logical workers ``ids``: their stacked data, batched state and step counters.

    Parameters
    ----------
    ids : list of int
        Logical worker indices hosted here, ascending.
    shards : list
        What ``method._host_shards`` gives this host (sent once, kept here).
    aggregate : bool, default False
        Send one sum of the hosted workers' messages instead of each message, where the method allows it
        (``messages.aggregate=host``; :func:`~isparse.engines.hooks.sums_on_host`).
    """

    def __init__(self, method, ids, shards, x0, aggregate: bool = False):
        self.method, self.aggregate = method, bool(aggregate)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.shards = list(shards)
        self.data = method._host_data(self.shards, self.ids)
        self.state = method.worker_init(self.data, np.asarray(x0, dtype=float))
        self.t = np.zeros(self.ids.size, np.int64)
        self.downlink = getattr(method, "downlink", None)
        #: w, the model the workers compute at with a compressed downlink (EF21-P; w^{-1} = x^0); None without one
        self.w = np.array(x0, dtype=float) if self.downlink is not None else None
        self._shared = False        # the state is referenced by a snapshot: the next step must not write into it
        self._x_star = None         # x*, kept for the memory term (reference)
        self._targets = None
        self._single = {}

    def _step(self, x) -> object:
        if self.t.size and np.any(self.t != self.t[0]):
            raise RuntimeError("a synchronous round needs every hosted worker at the same iteration")
        t = int(self.t[0])
        batch, self.state = self.method.worker_step(self.data, self.state, x, t, donate=not self._shared)
        self._shared = False
        self.t += 1
        return batch

    def receive(self, message) -> np.ndarray:
        """The model of this round from the downlink's ``message``: the dense x^t itself, or from a compressed
        downlink's message of C(x^t - w^{t-1}), w^t = w^{t-1} + C(x^t - w^{t-1}), which the host keeps
        (``Downlink.receive``: the master's w^t bit for bit)."""
        if self.downlink is None or isinstance(message, np.ndarray):
            return message
        self.w = self.downlink.receive(self.w, message, self.method.sampler)
        return self.w

    def _reply(self, batch):
        """What crosses the host's link for ``batch``: one sum (``aggregate``, where allowed) or the messages."""
        if self.aggregate and sums_on_host(self.method, batch):
            return host_sums(self.method, batch, [batch.workers])
        return batch

    def reference(self, x_star: np.ndarray) -> None:
        """Keep x* for the memory term (:meth:`memory`, ``round(..., monitor=True)``) and compute its targets here,
        before the timed rounds (those of an earlier x* are dropped)."""
        self._x_star = np.array(x_star, dtype=float)
        self._targets = None
        if self.method._worker_memory is not None:   # grad f_i(x*) now, before the timed rounds (also of a resume)
            self._targets = self.method._worker_targets(self.data, self._x_star)

    def round(self, x, monitor: bool = False, measure: bool = False) -> tuple:
        """One worker step of every hosted worker on the broadcast model (x^t, or a downlink message:
        :meth:`receive`).

        Parameters
        ----------
        monitor : bool, default False
            Also return the memory part of the Lyapunov function after the step, against the kept x*
            (:meth:`reference`).
        measure : bool
            Also return ``len(distributed.protocol.serialize_bytes(batch))``, the bytes Dask sends for the batch.

        Returns
        -------
        batch : Messages or HostSums
            The hosted workers' messages, ordered by worker, or their sum (``aggregate``).
        compute : float
            Seconds the step took (and the sum).
        size : int or None
            The serialized bytes with ``measure``.
        memory : float or None
            The memory term with ``monitor``.

        Raises
        ------
        RuntimeError
            The hosted workers are not all at the same iteration, or ``monitor`` without a :meth:`reference` (before
            the step).
        """
        if monitor and self._x_star is None:   # before the step: the workers stay where they were
            raise self._no_reference()
        start = time.perf_counter()
        batch = self._reply(self._step(self.receive(x)))
        compute = time.perf_counter() - start
        size = None
        if measure:
            from distributed.protocol import serialize_bytes

            size = len(serialize_bytes(batch))
        return batch, compute, size, (self.memory() if monitor else None)

    def step_one(self, i: int, x: np.ndarray):
        """Worker i's message: one step of the hosted logical worker i only, at the model it last received
        (asynchronous methods, Algorithm 8; a RuntimeError for a method with worker state)."""
        if self.state is not None:
            raise RuntimeError(f"{self.method.name}: asynchronous steps need a method without worker state")
        p = int(np.searchsorted(self.ids, i))
        if p not in self._single:
            self._single[p] = self.method._host_data(self.method._host_shards(self.shards, [p]), [i])
        batch, _ = self.method.worker_step(self._single[p], None, x, int(self.t[p]))
        self.t[p] += 1
        return batch

    def snapshot(self) -> HostSnapshot:
        """The hosted workers' state and counters, as a value (no copy: the next step will not write into it)."""
        self._shared = True
        # examples per worker (the stacked data's l), for splitting per-example arrays by worker
        return HostSnapshot(self.ids.copy(), self.state, self.t.copy(), np.asarray(self.data.l, np.int64))

    def restore(self, snapshots, model: np.ndarray | None = None) -> None:
        """``Engine.restore`` for the hosted workers, from snapshots of any grouping (a KeyError when a hosted
        worker is in none)."""
        snap = regroup(list(snapshots), self.ids)
        self.state, self.t, self._shared = snap.state, snap.t.copy(), True
        if model is not None and self.downlink is not None:
            self.w = np.array(model, dtype=float)

    def replay(self, xs: list) -> int:
        """Re-run the hosted workers' steps on the models ``xs`` in order, discarding the messages (a recovery), and
        return ``len(xs)``. ``xs`` are the models they computed at since the snapshot the state was restored from
        (x^t, or w^t with a compressed downlink: the host's w becomes the last)."""
        for x in xs:
            self._step(x)
        if xs and self.downlink is not None:
            self.w = np.array(xs[-1], dtype=float)
        return len(xs)

    def memory(self, x_star: np.ndarray | None = None) -> float:
        """The memory part of the Lyapunov function summed over the hosted workers (``method._worker_memory``; NaN
        without one), against ``x_star`` (kept, as by :meth:`reference`, when it differs from the kept x*) or, when
        None, the kept x*. The targets (grad f_i(x*), or per-example gradients) are computed here once per x*, where
        the data live.

        Raises
        ------
        RuntimeError
            ``x_star`` is None and no :meth:`reference` was given.
        """
        if x_star is not None and (self._x_star is None or not np.array_equal(x_star, self._x_star)):
            self.reference(x_star)
        if self._x_star is None:
            raise self._no_reference()
        if self.method._worker_memory is None:
            return float("nan")
        if self._targets is None:
            self._targets = self.method._worker_targets(self.data, self._x_star)
        return float(self.method._worker_memory(self.data, self.state, self._targets))

    def _no_reference(self) -> RuntimeError:
        return RuntimeError(f"{self.method.name}: the Lyapunov memory term needs x*, which this host was not given "
                            f"(Engine.reference(x_star) once before the rounds with monitor=True)")

    def ping(self) -> list[int]:
        """The hosted worker ids (a cheap call to check the host is alive)."""
        return self.ids.tolist()
