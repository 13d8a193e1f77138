"""The Dask cluster of a run: a LocalCluster the run starts and closes, or a scheduler that is already running."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from isparse.errors import ConfigError

log = logging.getLogger(__name__)


TLS_FILES = ("tls_ca_file", "tls_client_cert", "tls_client_key")


def security_from(cluster_cfg):
    """The ``distributed.security.Security`` of ``cluster.security``, or None for plain tcp.

    ``cluster.security.tls_ca_file``, ``tls_client_cert`` and ``tls_client_key`` are paths to PEM files
    (the CA that signed the scheduler's and workers' certificates; this client's certificate and key);
    ``require_encryption`` refuses unencrypted connections.

    Raises
    ------
    ConfigError
        Only some of the three files are given, a file does not exist, a ``tls://`` address has no
        certificates, or certificates are given for a ``tcp://`` address.
    """
    sec = cluster_cfg.get("security") or {}
    files = {k: sec.get(k) for k in TLS_FILES}
    address = str(cluster_cfg.get("address") or "")
    given = [k for k, v in files.items() if v]
    if not given:
        if address.startswith("tls://"):
            raise ConfigError("cluster.security.tls_ca_file",
                              f"The 'cluster.security.tls_ca_file', 'cluster.security.tls_client_cert' and "
                              f"'cluster.security.tls_client_key' parameters must be set (PEM files) to connect to the "
                              f"TLS scheduler cluster.address={address!r}; got none.")
        if sec.get("require_encryption"):
            raise ConfigError("cluster.security.require_encryption",
                              "The 'cluster.security.require_encryption' parameter must be false without TLS "
                              "certificates (cluster.security.tls_*); got true.")
        return None
    for key, path in files.items():
        if not path:
            raise ConfigError(f"cluster.security.{key}", f"The 'cluster.security.{key}' parameter must be set with "
                                                         f"{', '.join('cluster.security.' + g for g in given)} "
                                                         f"(a PEM file); got null.")
        if not Path(str(path)).is_file():
            raise ConfigError(f"cluster.security.{key}", f"The 'cluster.security.{key}' parameter must be an existing "
                                                         f"PEM file; got {str(path)!r} (no such file).")
    if address and not address.startswith("tls://"):
        raise ConfigError("cluster.address", f"The 'cluster.address' parameter must be a tls://HOST:PORT address when "
                                             f"cluster.security.tls_* are set; got {address!r}.")
    from distributed.security import Security

    cert, key = str(files["tls_client_cert"]), str(files["tls_client_key"])
    roles = {} if address else {"tls_scheduler_cert": cert, "tls_scheduler_key": key,   # a LocalCluster: the same
                                "tls_worker_cert": cert, "tls_worker_key": key}         # certificate for every role
    return Security(tls_ca_file=str(files["tls_ca_file"]), tls_client_cert=cert, tls_client_key=key,
                    require_encryption=sec.get("require_encryption") is not False, **roles)


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
    security = security_from(cluster_cfg)
    if cluster_cfg.get("address"):
        address = str(cluster_cfg.address)
        try:
            client = Client(address, timeout=timeout, direct_to_workers=direct, security=security)
        except (OSError, TimeoutError) as exc:
            tls = ("with the TLS certificates of cluster.security.tls_ca_file/tls_client_cert/tls_client_key"
                   if security is not None else "without TLS certificates (a tls:// scheduler needs cluster.security.tls_*)")
            raise ConfigError("cluster.address", f"The 'cluster.address' parameter must name a reachable Dask "
                                                 f"scheduler (tcp://HOST:PORT or tls://HOST:PORT) that accepts this "
                                                 f"client; could not connect to {address!r} {tls} within {timeout:g} s: "
                                                 f"{type(exc).__name__}: {exc}") from exc
    else:
        cluster = LocalCluster(n_workers=int(cluster_cfg.n_workers), threads_per_worker=int(cluster_cfg.threads_per_worker),
                               processes=True, host=cluster_cfg.get("host", "127.0.0.1"),
                               dashboard_address=cluster_cfg.get("dashboard_address", "127.0.0.1:0"),
                               silence_logs=logging.WARNING, security=security,
                               protocol="tls://" if security is not None else None)
        client = Client(cluster, direct_to_workers=direct, security=security)
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
