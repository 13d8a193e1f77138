"""The Dask cluster of a run: a LocalCluster the run starts and closes, or a scheduler that is already running."""

from __future__ import annotations

import contextlib
import logging

from isparse.errors import ConfigError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def dask_client(cluster_cfg):
    """Yield a connected ``distributed.Client``; close what was opened here on exit.

    ``cluster.address`` null starts a ``LocalCluster`` of ``cluster.n_workers`` processes bound to
    ``cluster.host``; an address (``tcp://HOST:PORT``) connects to a running scheduler.

    Raises
    ------
    ConfigError
        The scheduler at ``cluster.address`` cannot be reached within ``cluster.timeout`` seconds.
    """
    from distributed import Client, LocalCluster

    # distributed sets its own log levels on import; keep the run's output to warnings
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                 "distributed.worker", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger(name).level))
    timeout = float(cluster_cfg.get("timeout", 10))
    direct = bool(cluster_cfg.get("direct_to_workers", True))
    cluster = None
    if cluster_cfg.get("address"):
        address = str(cluster_cfg.address)
        try:
            client = Client(address, timeout=timeout, direct_to_workers=direct)
        except (OSError, TimeoutError) as exc:
            raise ConfigError("cluster.address", f"The 'cluster.address' parameter must name a reachable Dask "
                                                 f"scheduler (tcp://HOST:PORT); could not connect to {address!r} "
                                                 f"within {timeout:g} s: {exc}") from exc
    else:
        cluster = LocalCluster(n_workers=int(cluster_cfg.n_workers), threads_per_worker=int(cluster_cfg.threads_per_worker),
                               processes=True, host=cluster_cfg.get("host", "127.0.0.1"),
                               dashboard_address=cluster_cfg.get("dashboard_address", "127.0.0.1:0"),
                               silence_logs=logging.WARNING)
        client = Client(cluster, direct_to_workers=direct)
    try:
        nworkers = len(client.scheduler_info()["workers"])
        if nworkers == 0:
            client.wait_for_workers(1, timeout=timeout)
        log.info("Dask scheduler %s, %d workers, dashboard %s", client.scheduler.address,
                 len(client.scheduler_info()["workers"]), client.dashboard_link)
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
