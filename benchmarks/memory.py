"""Item 4: peak resident memory of each Dask worker process against its shards plus method state.

Per configuration a fresh ``LocalCluster`` (2 worker processes) is started, so that each process's peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, read on the worker) belongs to that configuration alone. The
growth of the peak over the process's RSS just before the pool is made (``psutil``) is compared with the bytes of
the shards the process hosts (CSR data, indices, indptr, labels), the host's stacked copy of them (``StackedGLM``:
one CSR matrix of the hosted rows, labels, row-to-worker map) plus the batched method state of its logical workers
(ISEGA: h, k x d floats; ISAGA: the (sum of l_i) x d table and the k x d means), computed from the same objects in
this process (the stacked data's lazily built CSC copy and transpose are not counted).
Growth = RSS after the rounds - RSS before the pool, and the same for the virtual size (``vms``). The peak
(``ru_maxrss``) is shown too, but a worker's start-up peak is above anything the pool adds, so it does not move.
The tables are ``np.zeros``: their pages become resident only when a row is first written (one random row per
worker and round), so after a few rounds the table is allocated (virtual growth) but mostly not resident.
"""

from __future__ import annotations

import numpy as np

from .common import load, table

LAM = 1e-3
CACHE = "outputs/bench_cache"


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def _vms():
    import psutil

    return psutil.Process().memory_info().vms


def _peak():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # kB on Linux


def _warm():
    import isparse  # noqa: F401  (import the library before the baseline is read)
    import scipy.sparse  # noqa: F401

    return _rss(), _peak(), _vms()


def _after():
    return _rss(), _peak(), _vms()


def nbytes(obj) -> int:
    """Bytes of the NumPy arrays (and scipy.sparse arrays) in a shard or a state (NamedTuple / dataclass)."""
    if obj is None:
        return 0
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if hasattr(obj, "indptr"):
        return obj.data.nbytes + obj.indices.nbytes + obj.indptr.nbytes
    if isinstance(obj, tuple):
        return sum(nbytes(v) for v in obj)
    if hasattr(obj, "__dataclass_fields__"):
        return sum(nbytes(getattr(obj, k)) for k in obj.__dataclass_fields__)
    return 0


def stacked_nbytes(data) -> int:
    """Bytes of a ``StackedGLM``'s eager arrays (A, b, l, row_ptr, owner)."""
    return sum(nbytes(getattr(data, k, None)) for k in ("A", "b", "l", "row_ptr", "owner"))


def measure(quick: bool = False) -> dict:
    from .common import setup
    from isparse.engines.dask import DaskPool

    from .cluster import local_client

    data = load("a9a")
    configs = [("isega", 8), ("isaga", 8), ("isaga", 100)] if not quick else [("isega", 8), ("isaga", 8)]
    rounds = 100
    rows = []
    for algorithm, n in configs:
        s = setup(algorithm, data=data, lam=LAM, n=n, block_size=1, cache_dir=CACHE)
        with local_client() as client:
            base = client.run(_warm)
            pool = DaskPool(client, *s.pool_args())
            s.run(pool, max_iter=rounds, tol=1e-300, log_every=rounds)
            after = client.run(_after)
            plan = pool.plan
            pool.close()
            for addr, ids in plan.items():
                hosted = s.method._host_shards(s.shards, ids)
                shard_b = sum(nbytes(sh) for sh in hosted)
                host_data = s.method._host_data(hosted, ids)
                stacked_b = stacked_nbytes(host_data)
                state_b = nbytes(s.method.worker_init(host_data, s.x0))
                (rss0, peak0, vms0), (rss1, peak1, vms1) = base[addr], after[addr]
                grown = rss1 - rss0
                total = shard_b + stacked_b + state_b
                rows.append(dict(algorithm=algorithm, n=n, worker=addr.rsplit(":", 1)[-1], hosted=len(ids),
                                 base_mb=rss0 / 2**20, rss_mb=rss1 / 2**20, peak0_mb=peak0 / 2**20, peak_mb=peak1 / 2**20,
                                 grown_mb=grown / 2**20, vms_mb=(vms1 - vms0) / 2**20,
                                 shard_mb=shard_b / 2**20, stacked_mb=stacked_b / 2**20, state_mb=state_b / 2**20,
                                 ratio=grown / max(total, 1), vms_ratio=(vms1 - vms0) / max(total, 1),
                                 state_share=state_b / max(total, 1)))
                print(f"[item4] {algorithm} n={n} {addr}: RSS {rss0 / 2**20:.0f} -> {rss1 / 2**20:.0f} MB, peak "
                      f"{peak0 / 2**20:.0f} -> {peak1 / 2**20:.0f} MB, for {total / 2**20:.1f} MB of "
                      "shards + stacked data + state", flush=True)
    return {"rows": rows, "rounds": rounds}


def report(res: dict) -> str:
    body = [[r["algorithm"], r["n"], f"port {r['worker']}", r["hosted"], r["base_mb"], r["rss_mb"], r["grown_mb"],
             r["vms_mb"], r["peak0_mb"], r["peak_mb"], r["shard_mb"], r.get("stacked_mb", float("nan")), r["state_mb"],
             f"{100 * r['state_share']:.0f} %", r["ratio"], r["vms_ratio"]] for r in res["rows"]]
    return table(["method", "n", "Dask worker", "logical workers", "RSS before pool (MB)", "RSS after rounds (MB)",
                  "RSS growth (MB)", "virtual growth (MB)", "peak before pool (MB)", "peak after (MB)", "shards (MB)",
                  "stacked data (MB)", "method state (MB)", "state share", "RSS growth / (shards + stacked + state)",
                  "virtual growth / (shards + stacked + state)"], body)
