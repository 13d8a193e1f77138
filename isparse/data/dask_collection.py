"""Rows of a Dask Array or DataFrame, left on the Dask workers that hold them: :class:`DaskRows`.

Each Dask worker holding row partitions of X is a host. Its partitions (with y's aligned ones) become its logical
workers' shards in a task on that worker (one logical worker per partition, or the host's rows split into
``workers_per_host``), so no chunk of X crosses the network. A :class:`~isparse.problems.remote.RowsHost` actor per
host answers the set-up's and the metrics' questions (:class:`~isparse.problems.remote.RemoteGLM`), and
:class:`~isparse.engines.dask.DaskPool` builds its hosts on the same workers from the same shards (``source``).

The logical workers are numbered host after host (hosts by address, a host's partitions in order); ``parts`` gives
each one's rows of X, with which an in-process run on the same rows gives the same iterates, bit for bit.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..problems.glm import GLMShard
from ..problems.losses import LOSSES, PENALTIES
from ..problems.remote import RemoteGLM, RowsHost

__all__ = ["ActorHosts", "DaskRows", "current_client"]


def current_client(client, what: str = "X"):
    """``client``, or the current ``distributed`` client; a ValueError naming ``client`` when there is neither."""
    from distributed import Client, default_client

    if client is not None:
        if not isinstance(client, Client):
            raise ValueError(f"The 'client' parameter must be a distributed.Client (e.g. Client(address)) or None; "
                             f"got {type(client).__name__} {client!r}.")
        return client

    try:
        return default_client()
    except ValueError:
        raise ValueError(f"The 'client' parameter must be a distributed.Client when {what} is a Dask collection: "
                         "none was given and none is current (make one, e.g. Client(LocalCluster()), or pass "
                         "client=).") from None


def _as_array(Z, name: str, ndim: int):
    """A Dask DataFrame or Series as a Dask Array with known partition sizes (the lengths are counted where the
    partitions are); a Dask Array as it is. A ValueError naming ``name`` for anything else or the wrong ndim."""
    import dask.array as da

    if not isinstance(Z, da.Array):
        to_array = getattr(Z, "to_dask_array", None)
        if to_array is None:
            raise TypeError(f"The '{name}' argument must be a Dask Array or DataFrame like X; got "
                            f"{type(Z).__module__}.{type(Z).__name__}.")
        Z = to_array(lengths=True)
    if name == "y" and Z.ndim == 2 and Z.shape[1] == 1:
        Z = Z[:, 0]
    if Z.ndim != ndim:
        raise ValueError(f"The '{name}' argument must be {ndim}-D; got a Dask Array of shape {Z.shape}.")
    return Z


def _partition(X, y, index: int, lo: int, fit_intercept: bool, classes):
    """One row partition as CSR float64 (a column of ones appended with ``fit_intercept``) and its labels (+1 for
    ``classes[1]``, -1 for ``classes[0]``) or targets; a ValueError naming X or y when not finite (on the worker)."""
    if np.iscomplexobj(X.data if hasattr(X, "tocsr") else np.asarray(X)):
        raise ValueError(f"The 'X' argument must be real: partition {index} holds complex numbers.")
    try:
        A = X.tocsr() if hasattr(X, "tocsr") else sp.csr_matrix(np.asarray(X))
        A = sp.csr_matrix(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"The 'X' argument must hold numbers: partition {index} does not ({exc}).") from None
    bad = ~np.isfinite(A.data)
    if bad.any():
        row = int(np.searchsorted(A.indptr, int(np.flatnonzero(bad)[0]), side="right") - 1)
        raise ValueError(f"The 'X' argument must be finite: partition {index} holds NaN or inf (row {lo + row} of "
                         f"X).")
    if classes is not None:   # the labels, of any type (checked when the classes were gathered)
        b = np.where(np.asarray(y).ravel() == classes[1], 1.0, -1.0)
    else:
        try:
            b = np.asarray(y, dtype=np.float64).ravel()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"The 'y' argument must hold numbers: partition {index} does not ({exc}).") from None
        if not np.all(np.isfinite(b)):
            raise ValueError(f"The 'y' argument must be finite: partition {index} holds NaN or inf (row "
                             f"{lo + int(np.flatnonzero(~np.isfinite(b))[0])} of y).")
    if fit_intercept:
        A = sp.hstack([A, np.ones((A.shape[0], 1))], format="csr")
    return A, b


def _host_shards(xs, ys, meta) -> list:
    """The shards of one host's logical workers from its partitions ``xs``, ``ys`` (on that worker)."""
    blocks = [_partition(X, y, i, lo, meta["fit_intercept"], meta["classes"])
              for X, y, i, lo in zip(xs, ys, meta["index"], meta["lo"])]
    A = blocks[0][0] if len(blocks) == 1 else sp.vstack([a for a, _ in blocks], format="csr")
    b = np.concatenate([b for _, b in blocks])
    A.sort_indices()
    loss, penalty = LOSSES[meta["loss"]], PENALTIES[meta["penalty"]](meta["lam"])
    ptr = np.concatenate([[0], np.cumsum(meta["sizes"])])
    # one worker of all the rows: the partition's own arrays (no copy: the host holds its rows once)
    return [GLMShard(A=A if (lo, hi) == (0, A.shape[0]) else A[lo:hi], b=b[lo:hi], scale=meta["scale"], loss=loss,
                     penalty=penalty) for lo, hi in zip(ptr[:-1], ptr[1:])]


def _labels(y) -> np.ndarray:
    return np.unique(np.asarray(y).ravel())


def _select(positions, *hosts_shards) -> list:
    """The shards at ``positions`` ((host, index) pairs) of the hosts' shard lists (a recovery elsewhere)."""
    return [hosts_shards[h][i] for h, i in positions]


class ActorHosts:
    """``hosts`` of :class:`~isparse.problems.remote.RemoteGLM`: one :class:`RowsHost` Dask actor per host, called
    concurrently. A host whose Dask worker was lost gets a new actor, from the same shards (which Dask recomputes
    from their graph), on a worker the scheduler picks, and the call is made again: the same numbers."""

    def __init__(self, client, shards, actors):
        self.client, self.shards, self.actors = client, list(shards), list(actors)
        self.remade = 0   # actors made again after their worker was lost

    def _remake(self, k: int) -> None:
        self.remade += 1
        with self.client.as_current():
            self.actors[k] = self.client.submit(RowsHost, self.shards[k], actor=True, pure=False).result()

    def map(self, name, *args) -> list:
        """``RowsHost.<name>(*args)`` on every host, concurrently; the results in host order."""
        from ..engines.dask_host import ACTOR_LOST, LOST

        pending = []
        for actor in self.actors:
            try:
                pending.append(getattr(actor, name)(*args))
            except RuntimeError as exc:   # the scheduler removed the worker first: the actor's future is lost
                if not str(exc).startswith(ACTOR_LOST):
                    raise
                pending.append(None)
        out = []
        for k, call in enumerate(pending):
            if call is not None:
                try:
                    out.append(call.result())
                    continue
                except LOST:
                    pass
            self._remake(k)   # its worker was lost
            out.append(getattr(self.actors[k], name)(*args).result())
        return out


class DaskRows:
    """A Dask collection's rows as the shards of logical workers on the Dask workers that hold them.

    Made by :meth:`of`. ``problem`` is the :class:`~isparse.problems.remote.RemoteGLM` over them; the object itself is
    :class:`~isparse.engines.dask.DaskPool`'s ``source`` (``plan``, ``submit``).

    Attributes
    ----------
    plan : dict
        Dask worker address -> its logical workers (ascending).
    parts : list of range or ndarray of int
        The rows of X of each logical worker (a ``range`` when they are contiguous: one or part of one partition).
    classes : ndarray or None
        The two labels (logistic loss): -1 is ``classes[0]``, +1 ``classes[1]``.
    """

    def __init__(self, client, plan, parts, futures, actors, problem, classes, N, d):
        self.client, self.plan, self.parts, self._futures = client, plan, parts, futures
        self.actors, self.problem, self.classes, self.N, self.d = actors, problem, classes, N, d

    @property
    def n(self) -> int:
        """int: the logical workers."""
        return len(self.parts)

    @classmethod
    def of(cls, X, y, *, client=None, loss: str = "logistic", lam: float = 0.01, penalty: str = "l2",
           fit_intercept: bool = True, workers_per_host: int | None = None) -> "DaskRows":
        """The rows of the Dask Array or DataFrame ``X`` (dense or sparse chunks; one chunk along the columns) and of
        ``y`` (a Dask Array or Series with X's row partitions) on the cluster of ``client`` (default: the current
        one), persisted there if they were not.

        Parameters
        ----------
        loss : {"logistic", "squared"}
            With "logistic", y must hold exactly two labels.
        workers_per_host : int, optional
            Split each host's rows (its partitions, in order) into this many logical workers; None: one per
            partition.

        Raises
        ------
        ValueError
            Naming the argument: no client given and none current (``client``); X not 2-D, chunked along the columns,
            with unknown or empty partitions; y not aligned with X's row partitions; NaN or inf in a partition of X or
            y (raised on its worker); y not binary for the logistic loss; ``workers_per_host`` not an int in [1,
            the rows of a host].
        TypeError
            y not a Dask collection.
        """
        from distributed import futures_of, wait

        import dask.array as da

        client = current_client(client)
        kind = "Array" if isinstance(X, da.Array) else type(X).__name__
        # a DataFrame or Series is persisted first, so that counting its partitions' lengths does not compute them twice
        from dask.base import is_dask_collection

        X = client.persist(X) if is_dask_collection(X) and not isinstance(X, da.Array) else X
        y = client.persist(y) if is_dask_collection(y) and not isinstance(y, da.Array) else y
        with client.as_current():   # a DataFrame's lengths are counted on this client's cluster
            X, y = _as_array(X, "X", 2), _as_array(y, "y", 1)
        rows = X.chunks[0]
        if X.dtype.kind == "c":
            raise ValueError(f"The 'X' argument must be real; got the complex dtype {X.dtype}.")
        if any(np.isnan(c) for c in rows):
            raise ValueError("The 'X' argument must have known partition sizes; got a Dask Array with unknown chunk "
                             "sizes along the rows (call X.compute_chunk_sizes(), or pass the DataFrame itself).")
        if len(X.chunks[1]) != 1:
            raise ValueError(f"The 'X' argument must have one chunk along the columns (each partition holds whole "
                             f"rows); got column chunks {X.chunks[1]}: rechunk it with X.rechunk({{1: -1}}).")
        if any(np.isnan(c) for c in y.chunks[0]) or tuple(y.chunks[0]) != tuple(rows):
            raise ValueError(f"The 'y' argument must be chunked like X along the rows (partition by partition); got "
                             f"y.chunks[0] = {_short(y.chunks[0])} and X.chunks[0] = {_short(rows)}: rechunk y with "
                             f"y.rechunk(X.chunks[0]).")
        empty = [i for i, c in enumerate(rows) if c == 0]
        if empty:
            raise ValueError(f"The 'X' argument must have rows in every partition: partition{'s' if len(empty) > 1 else ''} "
                             f"{', '.join(map(str, empty[:5]))} of {len(rows)} hold none (drop them: X and y "
                             f"rechunked, or the DataFrame repartitioned).")
        if workers_per_host is not None and (isinstance(workers_per_host, bool)
                                             or not isinstance(workers_per_host, (int, np.integer))
                                             or workers_per_host < 1):
            raise ValueError(f"The 'workers_per_host' parameter must be an int in [1, inf) or None; got "
                             f"{workers_per_host!r}.")
        X, y = client.persist([X, y])
        wait([X, y])
        fx, fy = {f.key: f for f in futures_of(X)}, {f.key: f for f in futures_of(y)}
        xkeys = [k[0] for k in X.__dask_keys__()]
        ykeys = list(y.__dask_keys__())
        where = client.who_has([fx[k] for k in xkeys])
        holder = [sorted(where[k])[0] for k in xkeys]
        classes = None
        if loss == "logistic":
            found = client.gather([client.submit(_labels, fy[k], workers=[a], pure=False)
                                   for k, a in zip(ykeys, holder)])
            classes = np.unique(np.concatenate(found))
            if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
                raise ValueError("The 'y' argument must be finite: it holds NaN or inf.")
            if classes.size != 2:
                raise ValueError(f"Only binary classification is supported: the 'y' argument must hold exactly 2 "
                                 f"classes; got {classes.size}: {classes[:5].tolist()}"
                                 f"{' ...' if classes.size > 5 else ''}.")
        where_text = f"a Dask {kind} of {int(sum(rows))} rows in {len(rows)} partitions"
        out = cls.hosted(client, [fx[k] for k in xkeys], [fy[k] for k in ykeys], holder, rows, int(X.shape[1]),
                         classes, where_text, loss=loss, lam=lam, penalty=penalty, fit_intercept=fit_intercept,
                         workers_per_host=workers_per_host)
        out._keep = (X, y)   # the persisted collections: their partitions stay as long as this object
        return out

    @classmethod
    def hosted(cls, client, xs, ys, holder, rows, columns: int, classes, where: str, *, loss: str = "logistic",
               lam: float = 0.01, penalty: str = "l2", fit_intercept: bool = True, workers_per_host: int | None = None,
               workers_per_partition: int = 1, fingerprint: dict | None = None) -> "DaskRows":
        """The rows of partitions already on the cluster: ``xs[p]``, ``ys[p]`` the futures of partition p's rows and
        labels (``rows[p]`` of them, ``columns`` features), held by the Dask worker ``holder[p]``; ``classes`` the two
        labels (logistic loss; None: y as it is). ``where`` says where the rows are (the problem's source);
        ``workers_per_partition`` splits each partition's rows into that many logical workers (with
        ``workers_per_host`` None); ``fingerprint`` identifies the data for the reference's cache
        (:attr:`RemoteGLM.fingerprint`). What :meth:`of` does once the collections are persisted.

        Raises
        ------
        ValueError
            ``workers_per_host`` or ``workers_per_partition`` more than the rows they split; NaN or inf in a
            partition (raised on its worker).
        """
        from distributed import wait

        N, d = int(sum(rows)), int(columns) + (1 if fit_intercept else 0)
        lo = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        plan, parts, host_parts = {}, [], {}
        for p, a in enumerate(holder):
            host_parts.setdefault(a, []).append(p)
        if workers_per_host is None:
            # the workers numbered in partition order, wherever Dask placed the partitions (the same iterates for
            # any placement): partition p's rows are logical workers p k .. p k + k - 1
            k = int(workers_per_partition)
            short = [p for p in range(len(holder)) if lo[p + 1] - lo[p] < k]
            if short:
                raise ValueError(f"The 'workers_per_partition' parameter must be at most the rows of every "
                                 f"partition: partition {short[0]} holds {int(lo[short[0] + 1] - lo[short[0]])}; "
                                 f"got {k}.")
            parts = [part for p in range(len(holder)) for part in _ranges(int(lo[p]), int(lo[p + 1]), k)]
            plan = {a: [p * k + j for p in host_parts[a] for j in range(k)] for a in sorted(host_parts)}
        else:   # n workers a host, numbered host after host
            for a in sorted(host_parts):
                host_rows = np.concatenate([np.arange(lo[p], lo[p + 1]) for p in host_parts[a]])
                if int(workers_per_host) > host_rows.size:
                    raise ValueError(f"The 'workers_per_host' parameter must be at most the rows of every host: {a} "
                                     f"holds {host_rows.size}; got {workers_per_host}.")
                split = np.array_split(host_rows, int(workers_per_host))
                plan[a] = list(range(len(parts), len(parts) + len(split)))
                parts.extend(split)
        scale = len(parts) / N
        futures, actors = {}, {}
        for a in sorted(host_parts):
            ps = host_parts[a]
            meta = {"index": ps, "lo": [int(lo[p]) for p in ps], "fit_intercept": bool(fit_intercept),
                    "classes": classes, "loss": loss, "penalty": penalty, "lam": float(lam), "scale": scale,
                    "sizes": [len(parts[i]) for i in plan[a]]}
            # a loose restriction: the task runs on a (it holds the partitions) unless a is gone (a recovery)
            futures[a] = client.submit(_host_shards, [xs[p] for p in ps], [ys[p] for p in ps], meta,
                                       workers=[a], allow_other_workers=True, pure=False)
        wait(list(futures.values()))
        for a in sorted(host_parts, key=lambda a: host_parts[a][0]):   # a bad partition's error, hosts in order
            if futures[a].status == "error":
                futures[a].result()
        for a, fut in futures.items():
            actors[a] = client.submit(RowsHost, fut, workers=[a], allow_other_workers=False, actor=True, pure=False)
        with client.as_current():   # an Actor binds to the current client when unpickled (DaskPool._bind)
            actors = {a: f.result() for a, f in actors.items()}
        hosts = ActorHosts(client, [futures[a] for a in sorted(plan)], [actors[a] for a in sorted(plan)])
        problem = RemoteGLM(hosts, parts, N, lam, loss=loss, penalty=penalty,
                            source=f"{where} on {len(plan)} Dask workers", fingerprint=fingerprint,
                            ids=[plan[a] for a in sorted(plan)])
        return cls(client, plan, parts, futures, actors, problem, classes, N, d)

    def submit(self, client, address: str, ids) -> list:
        """A task on ``address`` that gives the shards of ``ids`` (``DaskPool``'s ``source``): from its own host's
        shards where it holds them (no byte moves), else from their hosts' (a recovery: Dask recomputes a lost host's
        partitions and shards, and moves them). The task is the pool's own: cancelling it (a recovery) leaves the
        hosts' shards, which the other pools and the set-up's actors share."""
        ids = [int(i) for i in ids]
        owner = {i: (a, k) for a, own in self.plan.items() for k, i in enumerate(own)}
        hosts = sorted({owner[i][0] for i in ids})
        positions = [(hosts.index(owner[i][0]), owner[i][1]) for i in ids]
        return [client.submit(_select, positions, *[self._futures[a] for a in hosts], workers=[address],
                              allow_other_workers=False, pure=False)]

    def close(self) -> None:
        """Release the shards and the actors (the persisted partitions stay with the caller's collections)."""
        self.actors, self._futures, self._keep = {}, {}, None


def _ranges(lo: int, hi: int, k: int) -> list:
    """lo..hi-1 cut into k contiguous ``range`` s as ``numpy.array_split`` cuts it (a range holds no row index: the
    client keeps O(1) per worker)."""
    q, r = divmod(hi - lo, k)
    cuts = np.concatenate([[0], np.cumsum([q + 1] * r + [q] * (k - r))]) + lo
    return [range(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def _short(chunks) -> str:
    chunks = tuple(chunks)
    return str(chunks) if len(chunks) <= 6 else f"({', '.join(map(str, chunks[:3]))}, ..., {chunks[-1]}) " \
                                                f"({len(chunks)} partitions)"
