"""Dask workers in their own network namespaces behind shaped veth pairs, for the benchmarks: a thin user of
``cluster=emulated`` (``pipeline.cluster.emulated``, the one implementation), with 2 hosts and one symmetric rate.

:func:`namespaced_client` yields a ``distributed.Client`` to a scheduler on 10.77.1.1 and 2 workers (1 thread each)
in namespaces, unshaped; :func:`shape` puts a tbf of one rate on both ends of every host's link (uplink and downlink
alike) or removes it. Everything is removed on exit, and what a killed earlier run left is removed first.
"""

from __future__ import annotations

import contextlib

from pipeline.cluster.emulated import EmulatedCluster
from pipeline.cluster.machine import available, cleanup_stale

__all__ = ["N_WORKERS", "available", "cleanup_stale", "namespaced_client", "shape"]

N_WORKERS = 2
SUBNET = "10.77.0.0/16"
#: the cluster :func:`namespaced_client` runs (None outside it): :func:`shape` shapes its links
_current: EmulatedCluster | None = None


def shape(rate: str | None) -> None:
    """Put a tbf of ``rate`` (tc syntax, e.g. 100mbit) on both ends of every host's link; None removes the shaping.
    The bucket holds 5 ms of traffic, at least 8 kB (``pipeline.cluster.shaping.bucket_bytes``)."""
    if _current is None:
        raise RuntimeError("shape() needs a running namespaced_client()")
    _current.shape(up=rate, down=rate)


@contextlib.contextmanager
def namespaced_client(timeout: float = 60.0):
    """A ``distributed.Client`` to a scheduler on 10.77.1.1 and 2 workers in their own namespaces (root only),
    links unshaped until :func:`shape`."""
    global _current
    from distributed import Client

    reason = available()
    if reason:
        raise RuntimeError(f"network namespaces unavailable: {reason}")
    with EmulatedCluster(N_WORKERS, up=None, down=None, subnet=SUBNET, timeout=timeout) as cluster:
        if cluster.removed_stale:
            print(f"[netns] removed stale {cluster.removed_stale}", flush=True)
        client = Client(cluster.address, direct_to_workers=True, timeout=timeout)
        _current = cluster
        try:
            cluster.wait_for_workers(client)
            from .cluster import check_same_library

            check_same_library(client)
            yield client
        finally:
            _current = None
            client.close()
