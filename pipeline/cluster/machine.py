"""What the emulated clusters of this machine share: a lock, each cluster's record, the /24s they claim, and the
removal of what a killed one left.

The /24s are claimed under the machine's lock (:func:`machine_lock`), held from the removal of a killed cluster's
leftovers until the new cluster's record is written (:func:`free_nets` says which /24s are free). Two clusters
started at the same instant thus get disjoint /24s, or the second is refused (``cluster.subnet``) when too few are
left.

A cluster's record, ``/run/isparse-emulated/<tag>.json``, is written before anything else is made: its owner's pid
and start time, its /24s, namespaces and links, the pids it started, ``ip_forward`` before it, and once the run has
one its MLflow run id and tracking URI. So the next start can remove what a killed owner left.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from isparse.errors import ConfigError

log = logging.getLogger(__name__)

#: namespaces are ``isparse-emu-<tag>-<k>``; links ``ie<tag>h<k>`` (root side) and ``ie<tag>w<k>`` (worker side)
NS_PREFIX = "isparse-emu-"
_NS_FORM = re.compile(r"^isparse-emu-([0-9a-f]{4})-(\d+)$")
_LINK_FORM = re.compile(r"^ie([0-9a-f]{4})[hw](\d+)$")
#: where each cluster's record lives (a tmpfs, cleared at boot like the namespaces themselves)
STATE_DIR = Path(os.environ.get("ISPARSE_EMULATED_STATE_DIR", "/run/isparse-emulated"))
FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def run(args, check: bool = True) -> subprocess.CompletedProcess:
    """Run the command ``args``, its output captured; ``check``: a RuntimeError with its output if it fails."""
    proc = subprocess.run(args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def available() -> str | None:
    """None if network namespaces, veth pairs and tbf can be made here (root, ``ip`` and ``tc`` on PATH), else the
    reason (``not root (uid 65534)``, ``no tc on PATH``)."""
    if os.geteuid() != 0:
        return f"not root (uid {os.geteuid()})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    return None


def require_available() -> None:
    """A ConfigError naming ``cluster.kind`` (in one line, with the reason) if :func:`available` gives a reason."""
    reason = available()
    if reason:
        raise ConfigError("cluster.kind", f"The 'cluster.kind' parameter emulated (cluster=emulated) needs root and "
                                          f"the ip and tc commands (network namespaces, veth pairs, tc tbf); "
                                          f"{reason}.")


def start_time(pid: int) -> int | None:
    """The start time (clock ticks after boot) of process ``pid``, or None if there is none: with the pid it names
    one process (a pid can be reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int, start: int | None) -> bool:
    return start is not None and start_time(pid) == start


@contextlib.contextmanager
def machine_lock():
    """Held by one emulated cluster start (or cleanup) of this machine at a time: ``flock`` of ``STATE_DIR/lock``
    (one open file per holder, so threads of one process exclude each other too; released if the holder dies)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(STATE_DIR / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_records() -> dict[str, dict]:
    """{tag: record} of every emulated cluster's record on this machine."""
    out = {}
    if STATE_DIR.is_dir():
        for path in STATE_DIR.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out[path.stem] = json.loads(path.read_text())
    return out


def save_record(tag: str, record: dict) -> None:
    """Write the record of cluster ``tag`` (whole: a reader sees the old one or the new one)."""
    path = STATE_DIR / f"{tag}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def drop_record(tag: str) -> None:
    with contextlib.suppress(OSError):
        (STATE_DIR / f"{tag}.json").unlink()


def live_tags(records: dict[str, dict]) -> set[str]:
    """The tags of clusters whose owner process is still running."""
    return {tag for tag, r in records.items() if _alive(int(r.get("owner", 0)), r.get("owner_start"))}


def namespaces() -> list[str]:
    return [line.split()[0] for line in run(["ip", "netns", "list"], check=False).stdout.splitlines() if line.strip()]


def _links() -> list[str]:
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    return [m.group(1) for m in re.finditer(r"^\d+:\s+([^:@\s]+)", out, re.M)]


def kill_namespace_processes(ns: str) -> None:
    for pid in run(["ip", "netns", "pids", ns], check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def restore_forward(value: str | None, records: dict | None = None, skip: str | None = None) -> None:
    """Put ``ip_forward`` back to ``value`` unless another live emulated cluster still needs it."""
    if value is None:
        return
    records = read_records() if records is None else records
    if live_tags({t: r for t, r in records.items() if t != skip}):
        return
    with contextlib.suppress(OSError):
        FORWARD.write_text(value)


def free_nets(subnet: str, n_hosts: int, records: dict, live: set) -> list:
    """The first ``n_hosts`` /24s of ``subnet`` (its 0th left out) that no address or route of the root namespace
    overlaps and no live cluster's record claims (the machine's lock held).

    Raises
    ------
    ConfigError
        ``cluster.subnet``: fewer than ``n_hosts`` are free (naming what takes the first one taken).
    """
    net = ipaddress.ip_network(subnet)
    taken = []   # (network, what holds it)
    for tag in sorted(live):
        r = records[tag]
        for cidr in r.get("nets") or [r.get("subnet")]:   # a record without nets: its whole subnet
            with contextlib.suppress(ValueError, TypeError):
                taken.append((ipaddress.ip_network(cidr), f"the emulated cluster of pid {r.get('owner')}"))
    for line in run(["ip", "-o", "-4", "addr", "show"], check=False).stdout.splitlines():
        m = re.search(r"^\d+:\s+(\S+)\s+inet\s+(\S+)", line)
        if m:
            taken.append((ipaddress.ip_interface(m.group(2)).network, f"{m.group(2)} on {m.group(1)}"))
    for line in run(["ip", "-4", "route", "show"], check=False).stdout.splitlines():
        dest = line.split()[0] if line.strip() else ""
        with contextlib.suppress(ValueError):
            if dest != "default":
                taken.append((ipaddress.ip_network(dest, strict=False), f"route {line.strip()}"))
    taken = [(n, why) for n, why in taken if n.overlaps(net)]
    free, held = [], None
    for k, candidate in enumerate(net.subnets(new_prefix=24)):
        if k == 0:
            continue
        holder = next((why for n, why in taken if n.overlaps(candidate)), None)
        if holder is None:
            free.append(candidate)
            if len(free) == n_hosts:
                return free
        elif held is None:
            held = f"{candidate} is taken by {holder}"
    raise ConfigError("cluster.subnet", f"The 'cluster.subnet' parameter must be a private network with "
                                        f"cluster.n_workers = {n_hosts} /24s (one per host) that this machine "
                                        f"and its other emulated clusters do not use; {subnet} has "
                                        f"{len(free)} free ({held}).")


# -- what a killed cluster left --------------------------------------------------------------------------------------
def cleanup_stale() -> list[str]:
    """Remove what emulated clusters whose owner is no longer running left on this machine: their processes (the pids
    of their record whose start time still matches, and any process inside their namespaces), namespaces, root-side
    links and records; ``ip_forward`` put back as it was before them (when no live cluster needs it). Namespaces and
    links of this module's names without a live owner are removed too. A dead owner's MLflow run still RUNNING is
    marked KILLED (:func:`mark_killed`, one log line each). Returns what was removed (names, ``pid N``)."""
    with machine_lock():
        removed, runs = remove_stale()
    mark_killed(runs)
    return removed


def remove_stale() -> tuple[list[str], list[dict]]:
    """:func:`cleanup_stale`'s removal, with the machine's lock held; also returns the dead owners' MLflow runs
    (``{"run", "uri", "owner"}``)."""
    records = read_records()
    live = live_tags(records)
    removed: list[str] = []
    runs: list[dict] = []
    forward = None
    for tag, r in sorted(records.items()):
        if tag in live:
            continue
        if r.get("mlflow_run") and r.get("tracking_uri"):
            runs.append({"run": r["mlflow_run"], "uri": r["tracking_uri"], "owner": r.get("owner")})
        for pid, start in r.get("pids", []):
            if _alive(int(pid), start):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                    removed.append(f"pid {pid}")
        forward = r.get("ip_forward", forward) if forward is None else forward
    for ns in namespaces():
        m = _NS_FORM.match(ns)
        if m and m.group(1) not in live:
            kill_namespace_processes(ns)
            run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    for link in _links():
        m = _LINK_FORM.match(link)
        if m and m.group(1) not in live:
            if run(["ip", "link", "del", link], check=False).returncode == 0:
                removed.append(link)
    for tag in records:
        if tag not in live:
            drop_record(tag)
    if forward is not None:
        restore_forward(forward, {t: r for t, r in records.items() if t in live})
    return removed, runs


def mark_killed(runs: list[dict]) -> list[str]:
    """Mark each MLflow run of ``runs`` (``{"run", "uri", "owner"}``: what a killed cluster owner's record named)
    KILLED if it is still RUNNING, logging one line for each run marked (and one for each that could not be
    reached); a sqlite store whose file is gone is left alone (opening it would make a new one). Returns the ids
    marked."""
    marked = []
    for r in runs:
        uri = str(r["uri"])
        if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
            continue
        try:
            from mlflow import MlflowClient

            from ..jobenv import environ

            # a tracking server that is gone: one quick try, not MLflow's minutes of retries
            with environ({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}):
                client = MlflowClient(tracking_uri=uri)
                if client.get_run(r["run"]).info.status != "RUNNING":
                    continue
                client.set_terminated(r["run"], "KILLED")
        except Exception as exc:   # noqa: BLE001 - the store's own errors: said, the start goes on
            log.warning("cluster=emulated: could not mark the MLflow run %s of a killed run (pid %s) KILLED in %s: "
                        "%s", r["run"], r.get("owner"), uri, " ".join(f"{type(exc).__name__}: {exc}".split()))
            continue
        marked.append(r["run"])
        log.warning("cluster=emulated: MLflow run %s (%s) was still RUNNING, its process (pid %s) killed without a "
                    "teardown: marked KILLED", r["run"], uri, r.get("owner"))
    return marked
