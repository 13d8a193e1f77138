"""``cluster=emulated``: H machines on one box. Each host is one ``dask worker`` process (1 thread) in its own Linux
network namespace, behind a veth pair whose two ends are shaped with ``tc ... tbf`` (:mod:`.shaping`); the scheduler
and the client (the master) stay in the root namespace.

Layout, for a private subnet (``cluster.subnet``, default 10.77.0.0/16) cut into /24s: host k = 1..H gets the k-th
/24 that is free on this machine (the 0th /24 is never used; the machine's first cluster gets ``<net>.k.0/24``;
the claim: :mod:`.machine`); its namespace ``isparse-emu-<tag>-k`` holds ``ie<tag>w<k>`` = ``.2`` of that /24,
paired with ``ie<tag>h<k>`` = ``.1`` in the root namespace (``<tag>``: 4 hex digits drawn per cluster). The
scheduler listens on host 1's ``.1`` (a root-namespace address: every namespace reaches it through its default
route); the client talks to the workers directly. The uplink of host k (worker -> master: its messages) is the
egress of the worker-side end ``ie<tag>w<k>``, its downlink (x, the shards) the egress of the root-side end
``ie<tag>h<k>``. Worker-to-worker transfers are routed through the root namespace, so ``net.ipv4.ip_forward`` is set
to 1 for the cluster's life and put back when the last emulated cluster of the machine closes.

The started processes receive SIGKILL when the thread that started them dies (``PR_SET_PDEATHSIG``): nobody is left
to read their results, and a worker's graceful close on SIGTERM, mid-round with its scheduler gone, outlived a 30 s
wait once in CI. They run in their own sessions (a terminal's Ctrl-C reaches the client only, which closes the
cluster).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .machine import (FORWARD, NS_PREFIX, drop_record, free_nets, kill_namespace_processes, live_tags,
                      machine_lock, mark_killed, namespaces, read_records, remove_stale, require_available,
                      restore_forward, run, save_record, start_time)
from .shaping import GSO_MAX, per_host, rate_bits, tbf_command

log = logging.getLogger(__name__)


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


class EmulatedCluster:
    """H hosts laid out as the module's docstring says: :meth:`start` makes them, :meth:`close` removes all of it
    (also a context manager).

    Parameters
    ----------
    n_hosts : int
        H, the hosts (Dask worker processes, 1 thread each).
    up, down : str, None or list
        The tc rate of each host's uplink (worker -> master) and downlink (master -> worker), within
        ``shaping.SHAPED_RANGE``: one for every host, or a list of H; None: that direction not shaped.
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
        require_available()
        runs: list[dict] = []
        try:
            try:
                with machine_lock():   # the check and the claim as one step: no other start between them
                    self.removed_stale, runs = remove_stale()
                    with _signals_deferred():   # a Ctrl-C while the record is written: nothing half made outside it
                        records = read_records()
                        live = live_tags(records)
                        self.nets, self.claimed = free_nets(self.subnet, self.n_hosts, records, live), True
                        before = (records[min(live)]["ip_forward"] if live else FORWARD.read_text().strip())
                        while True:
                            self.tag = secrets.token_hex(2)
                            if self.tag not in records:
                                break
                        me = os.getpid()
                        self._record = {"owner": me, "owner_start": start_time(me), "subnet": self.subnet,
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
            FORWARD.write_text("1")
            for k in range(1, self.n_hosts + 1):
                self._make_host(k)
            self.shape(self.up, self.down)
            self._start_processes()
        except BaseException:
            self.close()
            raise
        return self

    def _save(self) -> None:
        save_record(self.tag, self._record)

    def record_run(self, run_id: str, tracking_uri: str) -> None:
        """Name the MLflow run this cluster serves in its record: if the run's process is killed (no teardown), the
        next start on the machine marks that run KILLED while it is still RUNNING."""
        if self._record is None:
            return
        self._record.update(mlflow_run=str(run_id), tracking_uri=str(tracking_uri))
        self._save()

    def _make_host(self, k: int) -> None:
        ns, host, worker = self.namespace(k), self.root_link(k), self.worker_link(k)
        in_ns = ["ip", "netns", "exec", ns]
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", host, "type", "veth", "peer", "name", worker])
        for dev in (host, worker):
            run(["ip", "link", "set", dev, "gso_max_size", str(GSO_MAX)])
        run(["ip", "link", "set", worker, "netns", ns])
        run(["ip", "addr", "add", f"{self.root_ip(k)}/24", "dev", host])
        run(["ip", "link", "set", host, "up"])
        run([*in_ns, "ip", "addr", "add", f"{self.worker_ip(k)}/24", "dev", worker])
        run([*in_ns, "ip", "link", "set", worker, "up"])
        run([*in_ns, "ip", "link", "set", "lo", "up"])
        run([*in_ns, "ip", "route", "add", "default", "via", self.root_ip(k)])

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
                    run([*prefix, "tc", "qdisc", "del", "dev", dev, "root"], check=False)
                    continue
                run([*prefix, *tbf_command(dev, rate)])

    def set_link(self, k: int, up: bool) -> None:
        """Take host ``k``'s link (both ends of its veth pair) down, or bring it up. Up also restores the
        namespace's default route (via the root side's address), which the kernel deletes when the worker's end goes
        down (the /24's own routes come back with the addresses; the tbf shaping stays through down and up)."""
        ns = ["ip", "netns", "exec", self.namespace(k)]
        state = "up" if up else "down"
        run(["ip", "link", "set", self.root_link(k), state])
        run([*ns, "ip", "link", "set", self.worker_link(k), state])
        if up:
            run([*ns, "ip", "route", "replace", "default", "via", self.root_ip(k)])

    def _popen(self, args, env) -> subprocess.Popen:
        proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_pdeathsig())
        self.procs.append(proc)
        self._record["pids"].append([proc.pid, start_time(proc.pid)])
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
            existing = set(namespaces())
            for k in range(1, self.n_hosts + 1):
                ns = self.namespace(k)
                if ns in existing:
                    kill_namespace_processes(ns)
                    run(["ip", "netns", "del", ns], check=False)   # the pair goes with its worker end
                run(["ip", "link", "del", self.root_link(k)], check=False)
            restore_forward(self._record["ip_forward"], skip=self.tag)
            drop_record(self.tag)
            if self._log is not None:
                self._log.close()
            if self._own_log_dir is not None:
                shutil.rmtree(self._own_log_dir, ignore_errors=True)
            self._record, self.procs, self._log, self._own_log_dir = None, [], None, None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
