"""A LocalCluster of 2 single-threaded worker processes on 127.0.0.1 (dashboard on 127.0.0.1:0), started as the
pipeline's default ``cluster=local`` starts it (``pipeline.cluster.local_cluster``, with ``pipeline.cluster.LocalClusterOptions``'s
``malloc_trim_threshold``).

``dask_malloc_trim=True`` starts the workers with distributed's own ``MALLOC_TRIM_THRESHOLD_=65536`` instead (the
``distributed.nanny.pre-spawn-environ`` default; a diagnostic of item 2).
"""

from __future__ import annotations

import contextlib
import logging
import os

DASK_DEFAULT_TRIM = 65536


def pipeline_trim_threshold() -> int | None:
    """``cluster.malloc_trim_threshold``'s default for ``cluster=local`` (``pipeline.cluster.options``)."""
    from pipeline.cluster import LocalClusterOptions

    return LocalClusterOptions().malloc_trim_threshold


@contextlib.contextmanager
def local_client(n_workers: int = 2, dask_malloc_trim: bool = False):
    from distributed import Client

    from pipeline.cluster import local_cluster

    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trim = DASK_DEFAULT_TRIM if dask_malloc_trim else pipeline_trim_threshold()
    cluster = local_cluster(n_workers=n_workers, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                            silence_logs=logging.ERROR, malloc_trim_threshold=trim)
    client = Client(cluster, direct_to_workers=True)
    try:
        client.wait_for_workers(n_workers, timeout=60)
        check_same_library(client)
        yield client
    finally:
        client.close()
        cluster.close()


def worker_environ(key: str):
    """``os.environ.get(key)`` (run on a worker with ``client.run``)."""
    import os

    return os.environ.get(key)


def worker_library() -> str:
    """The ``isparse`` package a process imports (run on a worker with ``client.run``)."""
    import isparse

    return os.path.dirname(os.path.realpath(isparse.__file__))


def check_same_library(client) -> None:
    """Raise RuntimeError unless every Dask worker imports the same ``isparse`` as this process (a frozen copy given by
    PYTHONPATH reaches spawned workers through their inherited sys.path / environment)."""
    here = worker_library()
    # a lambda is pickled by value: workers that cannot import ``benchmarks`` (the netns ``dask worker``s) run it too
    there = client.run(lambda: __import__("os").path.dirname(__import__("os").path.realpath(
        __import__("isparse").__file__)))
    odd = {a: p for a, p in there.items() if p != here}
    if odd:
        raise RuntimeError(f"Dask workers import another isparse than the client ({here}): {odd}")
