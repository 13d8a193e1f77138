"""Dask workers in their own network namespaces, each behind a veth pair shaped with ``tc qdisc ... tbf``.

Layout (addresses of this benchmark's own making, 10.77.0.0/16): for worker k = 1, 2 a namespace ``isparse-bench-k``
holding ``isbkw`` = 10.77.k.2/24, paired with ``isbkh`` = 10.77.k.1/24 in the root namespace. The scheduler listens
on 10.77.1.1 (reachable from namespace 2 through its default route 10.77.2.1); the client stays in the root
namespace and talks to the workers directly. Both ends of each pair get a tbf qdisc of the same rate, so a
worker's uplink (its messages) and downlink (x) are each limited to the rate. ``netem`` delays are not available
here, so only bandwidth is shaped. Worker-to-worker transfers (dask-glm's reductions) are routed through the root
namespace, so ``net.ipv4.ip_forward`` is set to 1 for the run and put back. Everything is torn down in
``finally``; namespaces and links left by a crashed earlier run are removed first.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "isparse-bench-"
SUBNET = "10.77"
N_WORKERS = 2


def sh(cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def cleanup_stale() -> list[str]:
    """Delete namespaces named isparse-bench-* and root links isb*h (from a crashed run). Returns what was removed."""
    removed = []
    for line in sh("ip netns list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX):
            sh(f"ip netns pids {name} | xargs -r kill -9", check=False)   # processes left inside that namespace
            sh(f"ip netns del {name}", check=False)
            removed.append(name)
    for k in range(1, N_WORKERS + 1):
        if sh(f"ip link show isb{k}h", check=False).returncode == 0:
            sh(f"ip link del isb{k}h", check=False)
            removed.append(f"isb{k}h")
    return removed


def available() -> str | None:
    """None if namespaces, veth and tbf can be used here, else the reason."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "tc"):
        if sh(f"command -v {tool}", check=False).returncode:
            return f"{tool} not found"
    return None


def _setup_links():
    for k in range(1, N_WORKERS + 1):
        ns = f"{PREFIX}{k}"
        sh(f"ip netns add {ns}")
        sh(f"ip link add isb{k}h type veth peer name isb{k}w")
        sh(f"ip link set isb{k}w netns {ns}")
        sh(f"ip addr add {SUBNET}.{k}.1/24 dev isb{k}h")
        sh(f"ip link set isb{k}h up")
        sh(f"ip netns exec {ns} ip addr add {SUBNET}.{k}.2/24 dev isb{k}w")
        sh(f"ip netns exec {ns} ip link set isb{k}w up")
        sh(f"ip netns exec {ns} ip link set lo up")
        sh(f"ip netns exec {ns} ip route add default via {SUBNET}.{k}.1")


def shape(rate: str | None) -> None:
    """Put a tbf of ``rate`` (tc syntax, e.g. 100mbit) on both ends of every pair; None removes the shaping.

    The bucket holds 1/50 s of traffic (at least 64 kB, so that a GSO super-packet of veth fits the bucket)."""
    for k in range(1, N_WORKERS + 1):
        ns = f"{PREFIX}{k}"
        for prefix, dev in (("", f"isb{k}h"), (f"ip netns exec {ns} ", f"isb{k}w")):
            sh(f"{prefix}tc qdisc del dev {dev} root", check=False)
            if rate is not None:
                bits = _bits(rate)
                burst = max(64 * 1024, int(bits / 8 / 50))
                sh(f"{prefix}tc qdisc add dev {dev} root tbf rate {rate} burst {burst} latency 200ms")


def _bits(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f
    return float(rate)


@contextlib.contextmanager
def namespaced_client(timeout: float = 60.0):
    """A ``distributed.Client`` to a scheduler on 10.77.1.1 and 2 workers in their own namespaces (root only)."""
    from distributed import Client

    reason = available()
    if reason:
        raise RuntimeError(f"network namespaces unavailable: {reason}")
    stale = cleanup_stale()
    if stale:
        print(f"[netns] removed stale {stale}", flush=True)
    procs = []
    tmp = tempfile.mkdtemp(prefix="isparse-bench-")
    dask_bin = str(Path(sys.executable).parent / "dask")
    client = None
    log = open(Path(tmp) / "dask.log", "w")
    forward = Path("/proc/sys/net/ipv4/ip_forward")
    forward_before = forward.read_text().strip()
    try:
        forward.write_text("1")
        _setup_links()
        sched_file = Path(tmp) / "scheduler.json"
        procs.append(subprocess.Popen([dask_bin, "scheduler", "--host", f"{SUBNET}.1.1", "--port", "0",
                                       "--no-dashboard", "--scheduler-file", str(sched_file)],
                                      stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + timeout
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        for k in range(1, N_WORKERS + 1):
            procs.append(subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{k}", dask_bin, "worker", address,
                                           "--host", f"{SUBNET}.{k}.2", "--nthreads", "1", "--no-dashboard",
                                           "--name", f"ns{k}"], stdout=log, stderr=subprocess.STDOUT))
        client = Client(address, direct_to_workers=True, timeout=timeout)
        client.wait_for_workers(N_WORKERS, timeout=timeout)
        from .cluster import check_same_library

        check_same_library(client)
        yield client
    finally:
        if client is not None:
            client.close()
        for p in reversed(procs):   # only the processes started here, by their own handles
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        cleanup_stale()
        forward.write_text(forward_before)
