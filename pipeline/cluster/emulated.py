"""``cluster=emulated``: H machines on one box. Each host is one ``dask worker`` process (1 thread) in its own Linux
network namespace, behind a veth pair whose two ends are shaped with ``tc ... tbf``; the scheduler and the client
(the master) stay in the root namespace.

Layout, for a private subnet (``cluster.subnet``, default 10.77.0.0/16) cut into /24s: host k = 1..H gets the k-th
/24 that is free on this machine (the 0th /24 is never used; the machine's first cluster gets ``<net>.k.0/24``);
its namespace ``isparse-emu-<tag>-k`` holds ``ie<tag>w<k>`` = ``.2`` of that /24, paired with ``ie<tag>h<k>`` =
``.1`` in the root namespace (``<tag>``: 4 hex digits drawn per cluster). The scheduler listens on host 1's ``.1``
(a root-namespace address: every namespace reaches it through its default route); the client talks to the workers
directly. The uplink of host k (worker -> master: its messages) is the egress of the worker-side end
``ie<tag>w<k>``, its downlink (x, the shards) the egress of the root-side end ``ie<tag>h<k>``; each gets a
token-bucket filter of its rate (a bucket of 5 ms of traffic, at least 8 kB, with the ends' GSO packets limited to
4 kB so that every packet fits it; latency 200 ms; rates from 1kbit to 100gbit, :data:`SHAPED_RANGE`). A larger
bucket lets a message of its size cross at line speed after every idle period, which flatters small messages (a
64 kB bucket made 80 kB cross a 10 Mbit/s link in about 15 ms instead of 64 ms). ``netem`` is not available on
these machines, so only bandwidth is shaped. Worker-to-worker transfers are routed through the root namespace, so
``net.ipv4.ip_forward`` is set to 1 for the cluster's life and put back when the last emulated cluster of the
machine closes.

The /24s are claimed under an exclusive lock of the machine (``flock`` of ``/run/isparse-emulated/lock``), held from
the removal of a killed cluster's leftovers until the new cluster's record is written: a /24 is free when no address
or route of the root namespace overlaps it and no record of a live cluster claims it. Two clusters started at the
same instant thus get disjoint /24s, or the second is refused (``cluster.subnet``) when too few are left.

What a cluster made is written first to ``/run/isparse-emulated/<tag>.json`` (its owner's pid and start time, its
/24s, namespaces and links, the pids it started, ip_forward before it, and once the run has one its MLflow run id
and tracking URI: :meth:`EmulatedCluster.record_run`): :meth:`EmulatedCluster.close` removes all of it on every
exit path, and the next start on the machine removes what a killed owner left (:func:`cleanup_stale`, one log line)
and marks the killed owner's MLflow run KILLED if it is still RUNNING (one more line). Only the processes it started
are stopped, by their handles (and, for a killed owner, by the pids of its record whose start times still match, and
the processes inside its namespaces). The started processes receive SIGKILL when the thread that started them dies
(``PR_SET_PDEATHSIG``): nobody is left to read their results, and a worker's graceful close on SIGTERM, mid-round
with its scheduler gone, outlived a 30 s wait once in CI. They run in their own sessions (a terminal's Ctrl-C
reaches the client only, which closes the cluster).

A link taken down loses its namespace's default route (the kernel deletes it and does not bring it back):
:meth:`EmulatedCluster.set_link` brings a link up with its route.

``benchmarks/netns.py`` is a thin user of this module (2 hosts, one symmetric rate).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from isparse.errors import ConfigError

log = logging.getLogger(__name__)

#: namespaces are ``isparse-emu-<tag>-<k>``; links ``ie<tag>h<k>`` (root side) and ``ie<tag>w<k>`` (worker side)
NS_PREFIX = "isparse-emu-"
_NS_FORM = re.compile(r"^isparse-emu-([0-9a-f]{4})-(\d+)$")
_LINK_FORM = re.compile(r"^ie([0-9a-f]{4})[hw](\d+)$")
#: where each cluster's record lives (a tmpfs, cleared at boot like the namespaces themselves)
STATE_DIR = Path(os.environ.get("ISPARSE_EMULATED_STATE_DIR", "/run/isparse-emulated"))
_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
#: a tc rate as this kind accepts it
RATE_FORM = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
RATE_TEXT = "a tc rate: a positive number followed by kbit, mbit or gbit (e.g. 10mbit, 2.5mbit, 1gbit)"
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
#: the rates (bits/s) a shaped link takes: tc applies each as given with this kind's bucket and latency. Below 1kbit
#: tc shrinks the 8 kB bucket (its send time overflows tc's 32-bit clock) and below 8 bit/s refuses the rate; above
#: about 167gbit it caps the queue (a 32-bit byte count) and so the latency, and above 5000gbit refuses the bucket
SHAPED_RANGE = (1e3, 100e9)
SHAPED_TEXT = "a tc rate from 1kbit to 100gbit (a number followed by kbit, mbit or gbit: 10mbit, 2.5mbit, 1gbit)"
#: the tbf of every shaped end: its latency, and its bucket as a fraction of a second of traffic (with a floor)
TBF_LATENCY = "200ms"
BUCKET_SECONDS = 1 / 200
BUCKET_MIN = 8 * 1024
#: the largest GSO packet either end of a link makes (bytes): smaller than the bucket, so that tbf never holds a packet
#: larger than its bucket, and a bucket this small lets no message cross at line speed
GSO_MAX = 4096


def rate_bits(key: str, value, shaped: bool = False) -> float:
    """The bits per second of a tc rate string ``value`` (``10mbit`` -> 1e7); ``shaped``: also within
    :data:`SHAPED_RANGE` (a rate a link of this kind is shaped to).

    Raises
    ------
    ConfigError
        ``value`` is not :data:`RATE_TEXT` (naming ``key``), is 0, or (``shaped``) is out of :data:`SHAPED_TEXT`.
    """
    form = RATE_FORM.match(value.strip().lower()) if isinstance(value, str) else None
    if form is None or float(form.group(1)) <= 0:
        raise ConfigError(key, f"The '{key}' parameter must be {RATE_TEXT}; got {value!r}.")
    bits = float(form.group(1)) * _UNITS[form.group(2)]
    if shaped and not SHAPED_RANGE[0] <= bits <= SHAPED_RANGE[1]:
        raise ConfigError(key, f"The '{key}' parameter must be {SHAPED_TEXT}; got {value!r}.")
    return bits


def bucket_bytes(bits: float) -> int:
    """The tbf bucket of a rate of ``bits`` per second: 5 ms of traffic, at least 8 kB (2 GSO packets of at most
    ``GSO_MAX``). A 1 ms bucket lost throughput on a loaded machine (40.8 of 50 Mbit/s in CI)."""
    return max(BUCKET_MIN, int(bits / 8 * BUCKET_SECONDS))


def tbf_command(dev: str, rate: str) -> list[str]:
    """``tc qdisc replace`` of a tbf of ``rate`` (within :data:`SHAPED_RANGE`) on ``dev``: its bucket
    (:func:`bucket_bytes`) and :data:`TBF_LATENCY`."""
    bits = rate_bits("rate", rate, shaped=True)
    return ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", str(rate).strip().lower(),
            "burst", str(bucket_bytes(bits)), "latency", TBF_LATENCY]


def per_host(rates, n: int) -> list:
    """``rates`` (one rate, None, or a list of ``n``) as a list of ``n`` (one per host)."""
    if isinstance(rates, (list, tuple)):
        if len(rates) != n:
            raise ValueError(f"{len(rates)} rates for {n} hosts")
        return list(rates)
    return [rates] * n


# -- the machine ---------------------------------------------------------------------------------------------------
def _run(args, check: bool = True) -> subprocess.CompletedProcess:
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


def _start_time(pid: int) -> int | None:
    """The start time (clock ticks after boot) of process ``pid``, or None if there is none: with the pid it names
    one process (a pid can be reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int, start: int | None) -> bool:
    return start is not None and _start_time(pid) == start


@contextlib.contextmanager
def _machine_lock():
    """Held by one emulated cluster start (or cleanup) of this machine at a time: ``flock`` of ``STATE_DIR/lock``
    (one open file per holder, so threads of one process exclude each other too; released if the holder dies)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(STATE_DIR / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _records() -> dict[str, dict]:
    """{tag: record} of every emulated cluster's record on this machine."""
    out = {}
    if STATE_DIR.is_dir():
        for path in STATE_DIR.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out[path.stem] = json.loads(path.read_text())
    return out


def _live_tags(records: dict[str, dict]) -> set[str]:
    """The tags of clusters whose owner process is still running."""
    return {tag for tag, r in records.items() if _alive(int(r.get("owner", 0)), r.get("owner_start"))}


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"], check=False).stdout.splitlines() if line.strip()]


def _links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"], check=False).stdout
    return [m.group(1) for m in re.finditer(r"^\d+:\s+([^:@\s]+)", out, re.M)]


def _kill_namespace_processes(ns: str) -> None:
    for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _restore_forward(value: str | None, records: dict | None = None, skip: str | None = None) -> None:
    """Put ``ip_forward`` back to ``value`` unless another live emulated cluster still needs it."""
    if value is None:
        return
    records = _records() if records is None else records
    if _live_tags({t: r for t, r in records.items() if t != skip}):
        return
    with contextlib.suppress(OSError):
        _FORWARD.write_text(value)


def cleanup_stale() -> list[str]:
    """Remove what emulated clusters whose owner is no longer running left on this machine: their processes (the pids
    of their record whose start time still matches, and any process inside their namespaces), namespaces, root-side
    links and records; ``ip_forward`` put back as it was before them (when no live cluster needs it). Namespaces and
    links of this module's names without a live owner are removed too. A dead owner's MLflow run still RUNNING is
    marked KILLED (:func:`mark_killed`, one log line each). Returns what was removed (names, ``pid N``)."""
    with _machine_lock():
        removed, runs = _remove_stale()
    mark_killed(runs)
    return removed


def _remove_stale() -> tuple[list[str], list[dict]]:
    """:func:`cleanup_stale`'s removal, with the machine's lock held; also returns the dead owners' MLflow runs
    (``{"run", "uri", "owner"}``)."""
    records = _records()
    live = _live_tags(records)
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
    for ns in _namespaces():
        m = _NS_FORM.match(ns)
        if m and m.group(1) not in live:
            _kill_namespace_processes(ns)
            _run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    for link in _links():
        m = _LINK_FORM.match(link)
        if m and m.group(1) not in live:
            if _run(["ip", "link", "del", link], check=False).returncode == 0:
                removed.append(link)
    for tag in records:
        if tag not in live:
            with contextlib.suppress(OSError):
                (STATE_DIR / f"{tag}.json").unlink()
    if forward is not None:
        _restore_forward(forward, {t: r for t, r in records.items() if t in live})
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


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM held (recorded) while the block runs, then raised as KeyboardInterrupt: a second Ctrl-C
    cannot cut a teardown half-way. In the main thread only (elsewhere signals are the main thread's business)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    previous = {sig: signal.signal(sig, lambda s, f: got.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if got:
        handler = previous[got[0]]
        if callable(handler):
            handler(got[0], None)
        else:
            raise KeyboardInterrupt(f"signal {signal.Signals(got[0]).name}")


def _pdeathsig():
    """``preexec_fn`` of the started processes: in the child, before its exec, SIGKILL when the thread that started
    it dies (``prctl(PR_SET_PDEATHSIG)``); libc is looked up here, in the parent (no dlopen after the fork)."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def die_with_parent():
        prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG

    return die_with_parent


# -- the cluster ---------------------------------------------------------------------------------------------------
class EmulatedCluster:
    """H Dask worker processes in their own network namespaces behind shaped veth pairs, and a scheduler in the root
    namespace (the module's docstring has the layout). :meth:`start` makes it, :meth:`close` removes all of it
    (also a context manager); :meth:`shape` changes the links' rates while it runs, :meth:`set_link` takes a host's
    link down and up.

    Parameters
    ----------
    n_hosts : int
        H, the hosts (Dask worker processes, 1 thread each).
    up, down : str, None or list
        The tc rate of each host's uplink (worker -> master) and downlink (master -> worker), within
        :data:`SHAPED_RANGE`: one for every host, or a list of H; None: that direction not shaped.
    subnet : str
        A private IPv4 network of at least H + 1 /24s (``10.77.0.0/16``); host k uses its k-th free /24.
    timeout : float
        Seconds to wait for the scheduler and the workers.
    malloc_trim_threshold : int, optional
        glibc's ``MALLOC_TRIM_THRESHOLD_`` of the worker processes (None: the environment's).
    log_dir : str or Path, optional
        Where the scheduler's and workers' output goes (``dask.log``); default a fresh directory under /tmp.
    """

    def __init__(self, n_hosts: int, up="100mbit", down="100mbit", subnet: str = "10.77.0.0/16",
                 timeout: float = 60.0, malloc_trim_threshold: int | None = None, log_dir=None):
        self.n_hosts, self.subnet, self.timeout = int(n_hosts), subnet, float(timeout)
        self.up, self.down = per_host(up, self.n_hosts), per_host(down, self.n_hosts)
        for name, rates in (("up", self.up), ("down", self.down)):   # what tc would refuse, refused now
            for rate in rates:
                if rate is not None:
                    rate_bits(f"cluster.link.{name}", rate, shaped=True)
        self.malloc_trim_threshold, self.log_dir = malloc_trim_threshold, log_dir
        nets = list(ipaddress.ip_network(subnet).subnets(new_prefix=24))
        if len(nets) <= self.n_hosts:
            raise ValueError(f"{subnet} has {len(nets)} /24s, fewer than {self.n_hosts} hosts + 1")
        self.nets = nets[1:self.n_hosts + 1]   # the first H; start() claims H free ones
        self.claimed = False
        self.tag = None
        self.address = None
        self.procs: list[subprocess.Popen] = []
        self.removed_stale: list[str] = []
        self._record = None
        self._log = self._own_log_dir = None

    @classmethod
    def from_options(cls, options, log_dir=None) -> "EmulatedCluster":
        """The cluster of ``cluster=emulated``'s options (``pipeline.cluster.options.EmulatedClusterOptions``)."""
        return cls(options.n_workers, options.link.up, options.link.down, options.subnet, options.timeout,
                   options.malloc_trim_threshold, log_dir)

    # -- names -------------------------------------------------------------------------------------------------------
    def namespace(self, k: int) -> str:
        return f"{NS_PREFIX}{self.tag}-{k}"

    def root_link(self, k: int) -> str:
        return f"ie{self.tag}h{k}"

    def worker_link(self, k: int) -> str:
        return f"ie{self.tag}w{k}"

    def root_ip(self, k: int) -> str:
        return str(self.nets[k - 1].network_address + 1)

    def worker_ip(self, k: int) -> str:
        return str(self.nets[k - 1].network_address + 2)

    def describe(self) -> str:
        """``H hosts, up <rates>, down <rates>, <subnet>`` (a rate shared by all hosts written once), once started
        followed by ``(hosts on <first /24> .. <last /24>)``."""
        def rates(r):
            r = ["unshaped" if x is None else str(x) for x in r]
            return r[0] if len(set(r)) == 1 else "[" + ", ".join(r) + "]"

        out = f"{self.n_hosts} hosts, up {rates(self.up)}, down {rates(self.down)}, {self.subnet}"
        if self.claimed:
            nets = [str(n) for n in self.nets]
            out += f" (hosts on {nets[0]}" + (f" .. {nets[-1]})" if len(nets) > 1 else ")")
        return out

    # -- start ---------------------------------------------------------------------------------------------------------
    def start(self) -> "EmulatedCluster":
        """Claim H free /24s and write the record (under the machine's lock, after removing what a killed earlier
        cluster left: logged, its MLflow run marked KILLED), make the namespaces, links and processes, and wait for
        the scheduler. On any failure, what was made is removed before the error propagates.

        Raises
        ------
        ConfigError
            (``cluster.kind``) not root or no ``ip``/``tc``; (``cluster.subnet``) fewer than H /24s of the subnet
            are free (addresses or routes of this machine, or other emulated clusters, take the rest).
        RuntimeError
            A command or process failed (its output in the message).
        """
        reason = available()
        if reason:
            raise ConfigError("cluster.kind", f"The 'cluster.kind' parameter emulated (cluster=emulated) needs root and "
                                              f"the ip and tc commands (network namespaces, veth pairs, tc tbf); "
                                              f"{reason}.")
        runs: list[dict] = []
        try:
            try:
                with _machine_lock():   # the check and the claim as one step: no other start between them
                    self.removed_stale, runs = _remove_stale()
                    with _signals_deferred():   # a Ctrl-C while the record is written: nothing half made outside it
                        records = _records()
                        live = _live_tags(records)
                        self.nets, self.claimed = self._free_nets(records, live), True
                        before = (records[min(live)]["ip_forward"] if live else _FORWARD.read_text().strip())
                        while True:
                            self.tag = secrets.token_hex(2)
                            if self.tag not in records:
                                break
                        me = os.getpid()
                        self._record = {"owner": me, "owner_start": _start_time(me), "subnet": self.subnet,
                                        "nets": [str(n) for n in self.nets], "ip_forward": before,
                                        "namespaces": [self.namespace(k) for k in range(1, self.n_hosts + 1)],
                                        "links": [self.root_link(k) for k in range(1, self.n_hosts + 1)], "pids": [],
                                        "mlflow_run": None, "tracking_uri": None}
                        self._save()
            finally:   # said even when the claim is refused
                if self.removed_stale:
                    log.warning("cluster=emulated: removed what an earlier emulated cluster (its run killed) left: %s",
                                ", ".join(self.removed_stale))
                mark_killed(runs)
            _FORWARD.write_text("1")
            for k in range(1, self.n_hosts + 1):
                self._make_host(k)
            self.shape(self.up, self.down)
            self._start_processes()
        except BaseException:
            self.close()
            raise
        return self

    def _save(self) -> None:
        path = STATE_DIR / f"{self.tag}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._record))
        os.replace(tmp, path)

    def record_run(self, run_id: str, tracking_uri: str) -> None:
        """Name the MLflow run this cluster serves in its record: if the run's process is killed (no teardown), the
        next start on the machine marks that run KILLED while it is still RUNNING."""
        if self._record is None:
            return
        self._record.update(mlflow_run=str(run_id), tracking_uri=str(tracking_uri))
        self._save()

    def _free_nets(self, records: dict, live: set) -> list:
        """The first H /24s of the subnet (its 0th left out) that no address or route of the root namespace overlaps
        and no live cluster's record claims (the machine's lock held).

        Raises
        ------
        ConfigError
            ``cluster.subnet``: fewer than H are free (naming what takes the first one taken).
        """
        net = ipaddress.ip_network(self.subnet)
        taken = []   # (network, what holds it)
        for tag in sorted(live):
            r = records[tag]
            for cidr in r.get("nets") or [r.get("subnet")]:   # a record without nets: its whole subnet
                with contextlib.suppress(ValueError, TypeError):
                    taken.append((ipaddress.ip_network(cidr), f"the emulated cluster of pid {r.get('owner')}"))
        for line in _run(["ip", "-o", "-4", "addr", "show"], check=False).stdout.splitlines():
            m = re.search(r"^\d+:\s+(\S+)\s+inet\s+(\S+)", line)
            if m:
                taken.append((ipaddress.ip_interface(m.group(2)).network, f"{m.group(2)} on {m.group(1)}"))
        for line in _run(["ip", "-4", "route", "show"], check=False).stdout.splitlines():
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
                if len(free) == self.n_hosts:
                    return free
            elif held is None:
                held = f"{candidate} is taken by {holder}"
        raise ConfigError("cluster.subnet", f"The 'cluster.subnet' parameter must be a private network with "
                                            f"cluster.n_workers = {self.n_hosts} /24s (one per host) that this machine "
                                            f"and its other emulated clusters do not use; {self.subnet} has "
                                            f"{len(free)} free ({held}).")

    def _make_host(self, k: int) -> None:
        ns, host, worker = self.namespace(k), self.root_link(k), self.worker_link(k)
        in_ns = ["ip", "netns", "exec", ns]
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", host, "type", "veth", "peer", "name", worker])
        for dev in (host, worker):
            _run(["ip", "link", "set", dev, "gso_max_size", str(GSO_MAX)])
        _run(["ip", "link", "set", worker, "netns", ns])
        _run(["ip", "addr", "add", f"{self.root_ip(k)}/24", "dev", host])
        _run(["ip", "link", "set", host, "up"])
        _run([*in_ns, "ip", "addr", "add", f"{self.worker_ip(k)}/24", "dev", worker])
        _run([*in_ns, "ip", "link", "set", worker, "up"])
        _run([*in_ns, "ip", "link", "set", "lo", "up"])
        _run([*in_ns, "ip", "route", "add", "default", "via", self.root_ip(k)])

    def shape(self, up="keep", down="keep") -> None:
        """Set the rates (as in the constructor: one, None or a list of H; ``"keep"``: as they are) on every host's
        link: a tbf of the uplink rate on the worker-side end, of the downlink rate on the root-side end; None
        removes that end's shaping."""
        if up != "keep":
            self.up = per_host(up, self.n_hosts)
        if down != "keep":
            self.down = per_host(down, self.n_hosts)
        for k in range(1, self.n_hosts + 1):
            for prefix, dev, rate in ((["ip", "netns", "exec", self.namespace(k)], self.worker_link(k), self.up[k - 1]),
                                      ([], self.root_link(k), self.down[k - 1])):
                if rate is None:
                    _run([*prefix, "tc", "qdisc", "del", "dev", dev, "root"], check=False)
                    continue
                _run([*prefix, *tbf_command(dev, rate)])

    def set_link(self, k: int, up: bool) -> None:
        """Take host ``k``'s link (both ends of its veth pair) down, or bring it up. Up also restores the
        namespace's default route (via the root side's address), which the kernel deletes when the worker's end goes
        down (the /24's own routes come back with the addresses; the tbf shaping stays through down and up)."""
        ns = ["ip", "netns", "exec", self.namespace(k)]
        state = "up" if up else "down"
        _run(["ip", "link", "set", self.root_link(k), state])
        _run([*ns, "ip", "link", "set", self.worker_link(k), state])
        if up:
            _run([*ns, "ip", "route", "replace", "default", "via", self.root_ip(k)])

    def _popen(self, args, env) -> subprocess.Popen:
        proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_pdeathsig())
        self.procs.append(proc)
        self._record["pids"].append([proc.pid, _start_time(proc.pid)])
        self._save()
        return proc

    def _start_processes(self) -> None:
        import tempfile

        if self.log_dir:
            log_dir = Path(self.log_dir)
            log_dir.mkdir(parents=True, exist_ok=True)
        else:   # removed at close
            log_dir = self._own_log_dir = Path(tempfile.mkdtemp(prefix="isparse-emulated-"))
        self.log_path = log_dir / "dask.log"
        self._log = open(self.log_path, "w")
        dask_bin = Path(sys.executable).parent / "dask"
        dask_bin = str(dask_bin) if dask_bin.exists() else (shutil.which("dask") or "dask")
        env = dict(os.environ)
        # the workers import the same isparse and pipeline as this process (a checkout first on the path)
        roots = []
        for name in ("isparse", "pipeline"):
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__file__", None):
                roots.append(str(Path(module.__file__).resolve().parent.parent))
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*roots, *filter(None, [env.get("PYTHONPATH")])]))
        worker_env = dict(env)
        if self.malloc_trim_threshold is not None:
            worker_env["MALLOC_TRIM_THRESHOLD_"] = str(int(self.malloc_trim_threshold))
        sched_file = log_dir / "scheduler.json"
        sched_file.unlink(missing_ok=True)
        scheduler = self._popen([dask_bin, "scheduler", "--host", self.root_ip(1), "--port", "0",
                                 "--dashboard-address", f"{self.root_ip(1)}:0", "--scheduler-file", str(sched_file)], env)
        deadline = time.monotonic() + self.timeout
        while not sched_file.exists():
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"cluster=emulated: the scheduler did not start within {self.timeout:g} s "
                                   f"(exit status {scheduler.poll()}): {self.output_tail()}")
            time.sleep(0.1)
        for _ in range(50):   # the file may be seen before it is fully written
            with contextlib.suppress(ValueError):
                self.address = json.loads(sched_file.read_text())["address"]
                break
            time.sleep(0.1)
        for k in range(1, self.n_hosts + 1):
            self._popen(["ip", "netns", "exec", self.namespace(k), dask_bin, "worker", self.address,
                         "--host", self.worker_ip(k), "--nthreads", "1", "--no-nanny", "--no-dashboard",
                         "--name", f"host{k}", "--death-timeout", str(max(60, int(self.timeout)))], worker_env)

    def output_tail(self, lines: int = 15) -> str:
        """The last lines of the scheduler's and workers' output."""
        with contextlib.suppress(Exception):
            self._log.flush()
            return " | ".join(self.log_path.read_text().splitlines()[-lines:])
        return ""

    def wait_for_workers(self, client, timeout: float | None = None) -> None:
        """Wait until all H workers are connected to ``client``'s scheduler.

        Raises
        ------
        RuntimeError
            A worker process exited, or not all connected within ``timeout`` s (default: the cluster's).
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                client.wait_for_workers(self.n_hosts, timeout=1.0)
                return
            except TimeoutError:
                pass
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                have = len(client.scheduler_info()["workers"])
                why = (f"a process exited ({' '.join(map(str, dead[0].args[:6]))} ...: status {dead[0].returncode})"
                       if dead else f"{have} of {self.n_hosts} workers connected within {self.timeout:g} s")
                raise RuntimeError(f"cluster=emulated: {why}: {self.output_tail()}")

    # -- close -----------------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the processes it started (SIGTERM, then SIGKILL after 10 s), remove its namespaces and links, put
        ``ip_forward`` back (unless another live emulated cluster needs it) and delete its record. Idempotent; a
        Ctrl-C during it is taken once it is done."""
        if self._record is None:
            return
        with _signals_deferred():
            for p in reversed(self.procs):
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        p.terminate()
            deadline = time.monotonic() + 10
            for p in self.procs:
                try:
                    p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            existing = set(_namespaces())
            for k in range(1, self.n_hosts + 1):
                ns = self.namespace(k)
                if ns in existing:
                    _kill_namespace_processes(ns)
                    _run(["ip", "netns", "del", ns], check=False)   # the pair goes with its worker end
                _run(["ip", "link", "del", self.root_link(k)], check=False)
            _restore_forward(self._record["ip_forward"], skip=self.tag)
            with contextlib.suppress(OSError):
                (STATE_DIR / f"{self.tag}.json").unlink()
            if self._log is not None:
                self._log.close()
            if self._own_log_dir is not None:
                shutil.rmtree(self._own_log_dir, ignore_errors=True)
            self._record, self.procs, self._log, self._own_log_dir = None, [], None, None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
