"""Starting and closing the Dask cluster of a run: a LocalCluster, a deployed cluster (SSH, SLURM, Kubernetes) or a
scheduler that is already running (its options: ``pipeline.cluster.options``)."""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from pathlib import Path

from isparse.errors import ConfigError

from ..jobenv import environ
from .options import security_from

log = logging.getLogger(__name__)


def _deploy(cluster, security, run_dir=None):
    """Start the ssh, slurm or kubernetes cluster of the options ``cluster`` (its extra is installed:
    ``ClusterOptions.check_run``). A SLURM job's output goes to ``options.log_directory``, by default
    ``<run_dir()>/slurm`` (``run_dir``: a function giving the run's directory; dask-jobqueue's default is the current
    directory)."""
    import importlib

    module, cls, _, _ = cluster.deployer
    Cluster = getattr(importlib.import_module(module), cls)
    sec = {} if security is None else {"security": security}
    if cluster.kind == "ssh":
        try:
            return Cluster(hosts=list(cluster.hosts), connect_options=dict(cluster.connect_options),
                           worker_options=dict(cluster.worker_options),
                           scheduler_options=dict(cluster.scheduler_options),
                           remote_python=cluster.remote_python, **sec)
        except Exception as exc:   # noqa: BLE001 - asyncssh's and SSHCluster's errors: refused, no key, start-up
            raise ConfigError("cluster.hosts", f"The 'cluster.hosts' parameter must name hosts that accept SSH with "
                                               f"cluster.connect_options (port, username, client_keys, known_hosts) "
                                               f"and run cluster.remote_python with this package installed; "
                                               f"SSHCluster({list(cluster.hosts)}) failed to start: "
                                               f"{type(exc).__name__}: {exc} (the remote output: rerun with "
                                               f"hydra.verbose=distributed.deploy.ssh)") from exc
    options = dict(cluster.options)
    if cluster.kind == "slurm":
        import shutil

        if shutil.which("sbatch") is None:
            raise ConfigError("cluster.kind", "The 'cluster.kind' parameter slurm (cluster=slurm) needs SLURM's sbatch "
                                              "on PATH (run on a SLURM submit host); got no sbatch.")
        if run_dir is not None and not options.get("log_directory"):
            options["log_directory"] = str(Path(run_dir()) / "slurm")
        slurm = Cluster(**options, **sec)
        try:
            check_slurm_job(slurm.job_script())
        except BaseException:
            slurm.close()
            raise
        slurm.scale(jobs=cluster.jobs)
        return slurm
    return Cluster(n_workers=cluster.n_workers, **options)


def wait_for_started_workers(client, cluster, timeout: float) -> int:
    """Wait up to ``timeout`` s for all ``cluster.expected_workers()`` of a started cluster, so that the logical
    workers are spread over all of them (they are placed on the workers there when the run starts); go on with fewer
    (a warning) when some have not started by then (SLURM jobs still queued), as long as there is one.

    Raises
    ------
    TimeoutError
        No worker at all within ``timeout`` seconds (naming ``cluster.timeout`` and, for SLURM, the queue).
    """
    expected, kind = cluster.expected_workers(), cluster.kind
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


class HeartbeatLossFilter(logging.Filter):
    """Drops distributed's ``Failed to communicate with scheduler during heartbeat`` record (and its traceback).

    A worker of the run's own cluster whose heartbeat is in flight while the cluster closes (after Ctrl-C, the
    scheduler's comm may close before the worker's) logs it with a 25-line traceback; a scheduler lost mid-run is
    said by the run itself, in one line (``pipeline.lifecycle.lost_cluster``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to communicate with scheduler during heartbeat")


class InputErrorFilter(logging.Filter):
    """Drops distributed's ``Compute Failed`` record of a task that raised ``DataError`` or ``ConfigError`` (a data
    file a worker cannot use, ``data=libsvm_files``): the client says it in one line, naming the file and the worker
    (``pipeline.errors``); every other failure is logged as Dask logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed") or not isinstance(record.args, tuple):
            return True
        return not any(isinstance(a, str) and a.startswith(("DataError(", "ConfigError(")) for a in record.args)


def dask_setup(worker) -> None:
    """Dask preload of the LocalCluster's worker processes (:func:`local_cluster`): they ignore SIGINT, and their
    ``distributed.worker`` logger drops the heartbeat failure of a closing cluster (:class:`HeartbeatLossFilter`)
    and the tracebacks of bad input the client reports itself (:class:`InputErrorFilter`).

    Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the worker processes too; killed
    mid-round they made their nannies restart them while the client was closing the cluster, with pages of
    ``Nanny failed to start`` tracebacks. The client handles the signal and closes the cluster; the workers are
    ended by their nannies (and exit by themselves when the client process dies).
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    heartbeat = logging.getLogger("distributed.worker")
    for kind in (HeartbeatLossFilter, InputErrorFilter):
        if not any(isinstance(f, kind) for f in heartbeat.filters):
            heartbeat.addFilter(kind())


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


#: the LocalClusters the jobs of a sweep share (:func:`share_local_clusters`): their options -> the cluster
_SHARED: dict = {}
_SHARING: list = []


def share_local_clusters() -> None:
    """From now on the LocalCluster :func:`dask_client` starts stays up for the next job of this process with the
    same local options, which connects to it instead of starting its own: the jobs of a sweep whose launcher runs
    them in this process (Hydra's basic launcher) pay for one cluster start. ``SweepParentRun`` calls it at the
    sweep's start and :func:`close_shared_clusters` at its end (and at exit). A job finds the workers as a fresh
    cluster's: its client's keys and actors are released when it closes, and the workers are checked empty before
    the next job starts (a worker that still holds data is restarted)."""
    if not _SHARING:
        _SHARING.append(True)
        import atexit

        atexit.register(close_shared_clusters)


def close_shared_clusters() -> None:
    """Close the LocalClusters kept for a sweep's jobs, and keep none from now on."""
    _SHARING.clear()
    while _SHARED:
        _, cluster = _SHARED.popitem()
        with quiet_teardown(), contextlib.suppress(Exception):
            cluster.close()


def _local_key(cluster, security) -> tuple:
    return (cluster.n_workers, cluster.threads_per_worker, cluster.host, cluster.dashboard_address,
            cluster.malloc_trim_threshold, security is None)


def _shared_local(key):
    """The running LocalCluster kept for ``key``, or None (none, or it stopped)."""
    cluster = _SHARED.get(key)
    if cluster is not None and str(getattr(cluster, "status", "")).endswith("running"):
        return cluster
    _SHARED.pop(key, None)
    return None


#: client -> the emulated cluster :func:`dask_client` started for it (:func:`record_run`)
_EMULATED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def record_run(client, run_id: str, tracking_uri: str) -> None:
    """Name the MLflow run in the record of the emulated cluster behind ``client`` (if it is one): a start after
    this process is killed marks the run KILLED (``EmulatedCluster.record_run``)."""
    cluster = _EMULATED.get(client)
    if cluster is not None:
        with contextlib.suppress(OSError):   # the record cannot be written: the run goes on without it
            cluster.record_run(run_id, tracking_uri)


def scheduler_identity(address: str, timeout: float, security=None) -> dict:
    """Ask the Dask scheduler at ``address`` who it is (Dask's own connection, handshake and ``identity`` call), all
    within ``timeout`` seconds, from a thread of its own: a peer that accepts and never answers, or answers what is
    not Dask (a size that would allocate exabytes), fails here instead of holding the run (and its signals) in
    ``Client``'s connection.

    Raises
    ------
    TimeoutError
        No answer within ``timeout`` seconds.
    OSError
        The connection was refused or reset.
    ValueError
        The peer does not speak Dask's protocol, or is not a scheduler.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout

    from distributed.comm import connect

    args = security.get_connection_args("client") if security is not None else {}

    async def ask():
        comm = await connect(address, timeout=timeout, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run():
        return asyncio.run(asyncio.wait_for(ask(), timeout))

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="isparse-scheduler-identity")
    try:
        answer = pool.submit(run).result(timeout=timeout + 1.0)
    except (FutureTimeout, asyncio.TimeoutError):   # both TimeoutError on Python 3.11
        raise TimeoutError(f"no answer within {timeout:g} s") from None
    except OSError:
        raise
    except Exception as exc:   # Dask read garbage: a frame size of exabytes, a dimension past NumPy's, ...
        raise ValueError(f"it does not speak Dask's protocol ({type(exc).__name__}: {exc})") from exc
    finally:
        pool.shutdown(wait=False)
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        raise ValueError(f"it answered as {answer.get('type') if isinstance(answer, dict) else type(answer).__name__}, "
                         f"not as a Dask scheduler")
    return answer


def _fresh_workers(client) -> None:
    """A shared LocalCluster's workers as a fresh cluster's: any worker that still holds data or actors (an earlier
    job's client that did not release them) is restarted (its nanny starts a new process)."""
    held = client.run(lambda dask_worker: len(dask_worker.data) + len(dask_worker.state.actors))
    if any(held.values()):
        log.info("restarting the shared LocalCluster's workers: %d keys left by an earlier job", sum(held.values()))
        client.restart()


@contextlib.contextmanager
def dask_client(cluster, run_dir=None):
    """Yield a connected ``distributed.Client`` for the cluster options ``cluster`` (``pipeline.cluster.options``);
    close what was opened here on exit.

    ``cluster.address`` null starts a ``LocalCluster`` of ``cluster.n_workers`` processes bound to ``cluster.host``;
    an address (``tcp://HOST:PORT`` or ``tls://``) connects to a running scheduler; ``cluster=ssh``, ``slurm`` or
    ``kubernetes`` starts that cluster and closes it at the end (SLURM's job output under ``run_dir()``, a function
    giving the run's directory); ``cluster=emulated`` makes its namespaces, shaped links and processes
    (``pipeline.cluster.emulated``; their output under ``run_dir()/emulated``) and removes them at the end.

    Raises
    ------
    ConfigError
        The scheduler at ``cluster.address`` cannot be reached within ``cluster.timeout`` seconds, or the cluster's
        options do not fit (``ClusterOptions.check_run``).
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
    cluster.check_run()
    timeout, direct = float(cluster.timeout), bool(cluster.direct_to_workers)
    security = security_from(cluster)
    started, shared = None, None   # shared: the key of a LocalCluster kept for a sweep's next jobs
    if cluster.deployer is not None:
        started = _deploy(cluster, security, run_dir)
        client = Client(started, direct_to_workers=direct, security=security)
    elif cluster.kind == "emulated":   # H hosts in network namespaces behind shaped links, removed at the end
        from .emulated import EmulatedCluster

        started = EmulatedCluster.from_options(cluster, log_dir=Path(run_dir()) / "emulated" if run_dir else None)
        started.start()
        try:
            client = Client(started.address, timeout=timeout, direct_to_workers=direct)
        except BaseException:
            started.close()
            raise
        _EMULATED[client] = started
    elif cluster.address:
        address = str(cluster.address)
        try:
            scheduler_identity(address, timeout, security)
            client = Client(address, timeout=timeout, direct_to_workers=direct, security=security)
        except (OSError, TimeoutError, ValueError) as exc:
            tls = ("with the TLS certificates of cluster.security.tls_ca_file/tls_client_cert/tls_client_key"
                   if security is not None else "without TLS certificates (a tls:// scheduler needs cluster.security.tls_*)")
            raise ConfigError("cluster.address", f"The 'cluster.address' parameter must name a reachable Dask "
                                                 f"scheduler (tcp://HOST:PORT or tls://HOST:PORT) that accepts this "
                                                 f"client; could not connect to {address!r} {tls} within {timeout:g} s: "
                                                 f"{type(exc).__name__}: {exc}") from exc
    else:
        key = _local_key(cluster, security)
        started = _shared_local(key) if _SHARING else None
        if started is not None:   # a sweep's earlier job started it
            log.info("the LocalCluster an earlier job of this sweep started (%s)", started.scheduler_address)
        else:
            started = local_cluster(n_workers=cluster.n_workers, threads_per_worker=cluster.threads_per_worker,
                                    host=cluster.host, dashboard_address=cluster.dashboard_address,
                                    malloc_trim_threshold=cluster.malloc_trim_threshold,
                                    silence_logs=logging.WARNING, security=security,
                                    protocol="tls://" if security is not None else None)
            if _SHARING:
                _SHARED[key] = started
        client = Client(started, direct_to_workers=direct, security=security)
        if _SHARED.get(key) is started:
            shared = key
            _fresh_workers(client)
    interrupted = False
    try:
        if cluster.kind == "emulated":
            started.wait_for_workers(client)
            log.info("cluster=emulated: %s", started.describe())
        elif cluster.deployer is not None:   # started for the run: wait for all its workers (SLURM jobs start one by one)
            wait_for_started_workers(client, cluster, timeout)
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
            try:
                client.close()
            finally:
                if started is not None and (shared is None or interrupted):
                    _SHARED.pop(shared, None)
                    started.close()


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
