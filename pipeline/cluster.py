"""The Dask cluster of a run: a LocalCluster the run starts and closes, or a scheduler that is already running."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
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


#: cluster.kind -> (module, class, the package to install, the pip extra) of the clusters started through an extra
DEPLOYERS = {"ssh": ("distributed.deploy.ssh", "SSHCluster", "asyncssh", "ssh"),
             "slurm": ("dask_jobqueue", "SLURMCluster", "dask_jobqueue", "slurm"),
             "kubernetes": ("dask_kubernetes.operator", "KubeCluster", "dask_kubernetes", "kubernetes")}
KINDS = ("local", "address", *DEPLOYERS)


def check_cluster(cluster_cfg) -> str:
    """Checks of ``cluster.*`` that need no cluster; returns ``cluster.kind``.

    Raises
    ------
    ConfigError
        An unknown kind, the extra of ssh/slurm/kubernetes not installed (naming ``pip install 'isparse[extra]'``),
        bad recovery settings, or TLS settings that do not fit (:func:`security_from`).
    """
    import importlib.util

    from isparse.errors import check_choice, check_range

    kind = check_choice("cluster.kind", cluster_cfg.get("kind", "local"), KINDS)
    if kind in DEPLOYERS:
        _, cls, package, extra = DEPLOYERS[kind]
        if importlib.util.find_spec(package) is None:
            raise ConfigError("cluster.kind", f"The 'cluster.kind' parameter {kind} (cluster={kind}, {cls}) needs the "
                                              f"package {package.replace('_', '-')}, which is not installed: "
                                              f"pip install 'isparse[{extra}]'.")
        if cluster_cfg.get("address"):
            raise ConfigError("cluster.address", f"The 'cluster.address' parameter must be null for cluster={kind} "
                                                 f"(the run starts the cluster); got {cluster_cfg.address!r}.")
    if kind == "address" and not cluster_cfg.get("address"):
        raise ConfigError("cluster.address", "The 'cluster.address' parameter must be set for cluster=address "
                                             "(tcp://HOST:PORT or tls://HOST:PORT of a running scheduler); got nothing.")
    if kind == "local" and not cluster_cfg.get("address"):
        check_range("cluster.n_workers", cluster_cfg.n_workers, 1, None, integer=True)
        check_range("cluster.threads_per_worker", cluster_cfg.threads_per_worker, 1, None, integer=True)
        if cluster_cfg.get("malloc_trim_threshold") is not None:
            check_range("cluster.malloc_trim_threshold", cluster_cfg.malloc_trim_threshold, 0, None, integer=True)
    check_range("cluster.snapshot_every", cluster_cfg.snapshot_every, 0, None, integer=True)
    check_range("cluster.worker_timeout", cluster_cfg.worker_timeout, 0.0, None, low_open=True)
    check_range("cluster.measure_every", cluster_cfg.get("measure_every", 50), 1, None, integer=True)
    if security_from(cluster_cfg) is not None and kind == "kubernetes":
        raise ConfigError("cluster.security.tls_ca_file", "The 'cluster.security.tls_*' parameters must be null for "
                                                          "cluster=kubernetes (KubeCluster takes no Security; configure "
                                                          "TLS in the operator's cluster spec); got certificates.")
    return kind


def _deploy(kind, cluster_cfg, security):
    """Start the ssh, slurm or kubernetes cluster of ``cluster_cfg`` (its extra is installed: :func:`check_cluster`)."""
    import importlib

    from omegaconf import OmegaConf

    module, cls, _, _ = DEPLOYERS[kind]
    Cluster = getattr(importlib.import_module(module), cls)
    plain = OmegaConf.to_container(cluster_cfg, resolve=True)
    sec = {} if security is None else {"security": security}
    if kind == "ssh":
        try:
            return Cluster(hosts=list(plain["hosts"]), connect_options=plain.get("connect_options") or {},
                           worker_options=plain.get("worker_options") or {},
                           scheduler_options=plain.get("scheduler_options") or {},
                           remote_python=plain.get("remote_python"), **sec)
        except Exception as exc:   # noqa: BLE001 - asyncssh's and SSHCluster's errors: refused, no key, start-up
            raise ConfigError("cluster.hosts", f"The 'cluster.hosts' parameter must name hosts that accept SSH with "
                                               f"cluster.connect_options (port, username, client_keys, known_hosts) "
                                               f"and run cluster.remote_python with this package installed; "
                                               f"SSHCluster({plain['hosts']}) failed to start: "
                                               f"{type(exc).__name__}: {exc} (the remote output: rerun with "
                                               f"hydra.verbose=distributed.deploy.ssh)") from exc
    if kind == "slurm":
        import shutil

        if shutil.which("sbatch") is None:
            raise ConfigError("cluster.kind", "The 'cluster.kind' parameter slurm (cluster=slurm) needs SLURM's sbatch "
                                              "on PATH (run on a SLURM submit host); got no sbatch.")
        cluster = Cluster(**(plain.get("options") or {}), **sec)
        try:
            check_slurm_job(cluster.job_script())
        except BaseException:
            cluster.close()
            raise
        cluster.scale(jobs=int(plain["jobs"]))
        return cluster
    return Cluster(n_workers=int(plain["n_workers"]), **(plain.get("options") or {}))


def expected_workers(kind, cluster_cfg) -> int:
    """How many Dask workers a cluster the run starts will have: ``cluster.jobs`` x ``options.processes`` SLURM jobs'
    workers, one per host after the first (the scheduler's) for ssh, ``cluster.n_workers`` for kubernetes and local."""
    if kind == "slurm":
        return int(cluster_cfg.jobs) * int((cluster_cfg.get("options") or {}).get("processes", 1) or 1)
    if kind == "ssh":
        return max(len(cluster_cfg.hosts) - 1, 1)
    return int(cluster_cfg.get("n_workers", 1) or 1)


def wait_for_started_workers(client, kind, cluster_cfg, timeout: float) -> int:
    """Wait up to ``timeout`` s for all :func:`expected_workers` of a started cluster, so that the logical workers
    are spread over all of them (they are placed on the workers there when the run starts); go on with fewer
    (a warning) when some have not started by then (SLURM jobs still queued), as long as there is one.

    Raises
    ------
    TimeoutError
        No worker at all within ``timeout`` seconds (naming ``cluster.timeout`` and, for SLURM, the queue).
    """
    expected = expected_workers(kind, cluster_cfg)
    try:
        client.wait_for_workers(expected, timeout=timeout)
    except TimeoutError:
        have = len(client.scheduler_info()["workers"])
        if have == 0:
            hint = (" (the SLURM jobs may still be queued or failed: see squeue and the jobs' output in "
                    "cluster.options.log_directory)" if kind == "slurm" else "")
            raise TimeoutError(f"cluster={kind}: no Dask worker connected to {client.scheduler.address} within "
                               f"cluster.timeout={timeout:g} s{hint}") from None
        log.warning("cluster=%s: %d of %d Dask workers after cluster.timeout=%g s; the run goes on with %d",
                    kind, have, expected, timeout, have)
    return len(client.scheduler_info()["workers"])


def check_slurm_job(script: str, timeout: float = 120) -> None:
    """Ask SLURM whether it would run the job ``script`` (``sbatch --test-only``: slurmctld checks the partition,
    account, memory, cores and walltime, and schedules nothing), so that a job it refuses, or a controller it cannot
    reach, is an error now rather than a worker that never comes (dask-jobqueue submits in the background).

    Raises
    ------
    ConfigError
        ``cluster.options``: sbatch's own message (``invalid partition specified``, ``Requested node configuration
        is not available``, ``Unable to contact slurm controller``, ...).
    """
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="isparse-slurm-") as f:
        f.write(script)
        f.flush()
        try:
            proc = subprocess.run(["sbatch", "--test-only", f.name], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ConfigError("cluster.options", f"The 'cluster.options' parameters must give a job SLURM accepts; "
                                                 f"sbatch --test-only had no answer within {timeout:g} s (is "
                                                 f"slurmctld reachable? sinfo).") from None
    if proc.returncode != 0:
        said = " ".join(line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip())
        raise ConfigError("cluster.options", f"The 'cluster.options' parameters must give a job SLURM accepts "
                                             f"(queue = partition, account, cores, memory, walltime; and slurmctld "
                                             f"must be reachable: sinfo); sbatch --test-only refused it: {said}")


#: set (to the client's pid) in the environment the LocalCluster's worker processes are spawned with: they ignore
#: SIGINT from their first import of pipeline.main on
IGNORE_SIGINT_ENV = "ISPARSE_WORKER_IGNORE_SIGINT"


def dask_setup(worker) -> None:
    """Dask preload of the LocalCluster's worker processes (:func:`local_cluster`): they ignore SIGINT.

    Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the worker processes too; killed
    mid-round they made their nannies restart them while the client was closing the cluster, with pages of
    ``Nanny failed to start`` tracebacks. The client handles the signal and closes the cluster; the workers are
    ended by their nannies (and exit by themselves when the client process dies).
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def local_cluster(*, malloc_trim_threshold=None, malloc_mmap_threshold=None, **kwargs):
    """A ``distributed.LocalCluster`` of worker processes (``kwargs`` are its own) started with
    ``MALLOC_TRIM_THRESHOLD_ = malloc_trim_threshold`` (``distributed.nanny.pre-spawn-environ``; None: Dask's 65536)
    and, unless None, ``MALLOC_MMAP_THRESHOLD_ = malloc_mmap_threshold`` (bytes).

    Its worker processes ignore SIGINT (a terminal's Ctrl-C signals the whole foreground process group; the
    client handles it and closes the cluster): from their first import of ``pipeline.main`` when they are spawned
    here (:data:`IGNORE_SIGINT_ENV`), and through this module as their preload (:func:`dask_setup`, also for the
    workers a nanny restarts later).

    A round allocates and frees the same temporaries every time; with Dask's threshold glibc hands them back to
    the OS and the next round faults the pages in again. Setting any ``MALLOC_TRIM_THRESHOLD_`` also turns off
    glibc's moving mmap threshold (mallopt(3)): every block above 128 KiB is then mapped fresh and faulted in on each
    allocation, unless ``MALLOC_MMAP_THRESHOLD_`` raises that limit.
    """
    import dask
    from distributed import LocalCluster

    kwargs.setdefault("preload", [*(dask.config.get("distributed.worker.preload", None) or []), __name__])
    # the nanny prefers this process's environment to its config, and copies its pre-spawn variables into it
    # (so an earlier cluster of this process would decide): set them here while the workers spawn.
    # IGNORE_SIGINT_ENV: a spawned worker re-imports the isparse-run script, whose first lines then ignore SIGINT
    # (pipeline.main), before the seconds of imports that precede the preload
    env = {IGNORE_SIGINT_ENV: str(os.getpid())}   # the spawned process checks it is its parent's
    if malloc_trim_threshold is not None:
        env["MALLOC_TRIM_THRESHOLD_"] = str(int(malloc_trim_threshold))
    if malloc_mmap_threshold is not None:
        env["MALLOC_MMAP_THRESHOLD_"] = str(int(malloc_mmap_threshold))
    with environ(env):
        return LocalCluster(processes=True, **kwargs)


#: held by :func:`environ`: the environment is the process's, and the Dask launcher runs jobs (each of which may start
#: a LocalCluster) in several threads of one process
_ENVIRON_LOCK = threading.RLock()


@contextlib.contextmanager
def environ(updates: dict):
    """This process's environment with ``updates`` set (a None value leaves its key as it is), put back on exit; one
    thread at a time (another thread's ``environ`` waits until this one has put the environment back)."""
    with _ENVIRON_LOCK:
        saved = {key: os.environ.get(key) for key in updates}
        os.environ.update({key: value for key, value in updates.items() if value is not None})
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@contextlib.contextmanager
def dask_client(cluster_cfg):
    """Yield a connected ``distributed.Client``; close what was opened here on exit.

    ``cluster.address`` null starts a ``LocalCluster`` of ``cluster.n_workers`` processes bound to
    ``cluster.host``; an address (``tcp://HOST:PORT`` or ``tls://``) connects to a running scheduler;
    ``cluster.kind`` ssh, slurm or kubernetes starts that cluster (:data:`DEPLOYERS`) and closes it at the end.

    Raises
    ------
    ConfigError
        The scheduler at ``cluster.address`` cannot be reached within ``cluster.timeout`` seconds.
    """
    from distributed import Client

    # distributed sets its own log levels on import; keep the run's output to warnings
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                 "distributed.worker", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger(name).level))
    # cluster=ssh: asyncssh logs every channel opened and closed, SSHCluster every line the remote processes print
    # (at INFO, their errors too: hydra.verbose=distributed.deploy.ssh shows them when a start fails)
    for name in ("asyncssh", "distributed.deploy.ssh"):
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(logging.WARNING)
    timeout = float(cluster_cfg.get("timeout", 10))
    direct = bool(cluster_cfg.get("direct_to_workers", True))
    cluster = None
    kind = check_cluster(cluster_cfg)
    security = security_from(cluster_cfg)
    if kind in DEPLOYERS:
        cluster = _deploy(kind, cluster_cfg, security)
        client = Client(cluster, direct_to_workers=direct, security=security)
    elif cluster_cfg.get("address"):
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
        cluster = local_cluster(n_workers=int(cluster_cfg.n_workers), threads_per_worker=int(cluster_cfg.threads_per_worker),
                                host=cluster_cfg.get("host", "127.0.0.1"),
                                dashboard_address=cluster_cfg.get("dashboard_address", "127.0.0.1:0"),
                                malloc_trim_threshold=cluster_cfg.get("malloc_trim_threshold"),
                                silence_logs=logging.WARNING, security=security,
                                protocol="tls://" if security is not None else None)
        client = Client(cluster, direct_to_workers=direct, security=security)
    interrupted = False
    try:
        if kind in DEPLOYERS:   # started for the run: wait for all its workers (SLURM jobs start one by one)
            wait_for_started_workers(client, kind, cluster_cfg, timeout)
        elif len(client.scheduler_info()["workers"]) == 0:
            client.wait_for_workers(1, timeout=timeout)
        log.info("Dask scheduler %s, %d workers, dashboard %s", client.scheduler.address,
                 len(client.scheduler_info()["workers"]), client.dashboard_link)
        yield client
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        with quiet_teardown(restore=not interrupted):
            client.close()
            if cluster is not None:
                cluster.close()


#: the loggers a cluster's teardown writes to: distributed's (workers and nannies closing, connections dropped),
#: tornado's and asyncio's (callbacks of a client interrupted mid-call)
TEARDOWN_LOGGERS = ("distributed", "tornado", "asyncio")


@contextlib.contextmanager
def quiet_teardown(prefixes=TEARDOWN_LOGGERS, restore: bool = True):
    """Silence the loggers named by ``prefixes`` (and their children) while a client and its cluster close.

    Closing a cluster logs what was in flight (a stream closed, a worker that took long to stop, after Ctrl-C a
    callback of the interrupted call); none of it concerns the run, which has ended before. ``restore``: put the
    levels back on exit (False after an interruption: the process is about to end, and the closed cluster's
    threads would only repeat it).
    """
    manager = logging.Logger.manager
    names = [n for n in list(manager.loggerDict) if n.split(".")[0] in prefixes] + list(prefixes)
    saved = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        if restore:
            for n, level in saved.items():
                logging.getLogger(n).setLevel(level)
