"""A LocalCluster of 2 single-threaded worker processes on 127.0.0.1, as the pipeline's default ``cluster=local``."""

from __future__ import annotations

import contextlib
import logging


@contextlib.contextmanager
def local_client(n_workers: int = 2):
    from distributed import Client, LocalCluster

    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster, direct_to_workers=True)
    try:
        client.wait_for_workers(n_workers, timeout=60)
        yield client
    finally:
        client.close()
        cluster.close()
