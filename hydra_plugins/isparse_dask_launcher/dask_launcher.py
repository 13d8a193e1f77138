"""``hydra/launcher=dask``: each job of a sweep is one task on a Dask cluster, its results gathered as they finish.

Built on Hydra's launcher plugin API as Hydra's own joblib launcher is (``hydra_plugins.hydra_joblib_launcher``):
the task composes the job's config from the sweep's config and the job's overrides and runs it with Hydra's
``run_job``, in the Dask worker process. ``hydra.launcher.address`` names a running scheduler; null starts a
LocalCluster (``n_workers`` processes, ``threads_per_worker`` threads, bound to ``host``) closed at the end.

A job with ``engine=inprocess`` runs in a thread of the Dask worker, one job per worker thread (``--nthreads``,
``threads_per_worker``): several jobs, of one sweep or of several, run at once in one worker process. Hydra keeps a
job's config in a process-wide singleton and sets a job's log up by reconfiguring the root logger; here
(:mod:`.jobthreads`) each thread has its own ``HydraConfig`` and each job's log file (``main.log``) gets its own
thread's records. The jobs of one process share its GIL: for sweeps of CPU-bound jobs, one thread per worker process
and one process per core (``n_workers``, the default) is what keeps the cores busy. ``hydra.job.chdir=true`` changes
the process's working directory and is refused here. A job with ``engine=dask`` starts its own LocalCluster from
inside the Dask worker: the worker process must be allowed to start processes, which Dask's default
(``distributed.worker.daemon: true``, a daemonic process) forbids; the LocalCluster this launcher starts sets it
false, and ``dask worker`` processes started by hand need ``DASK_DISTRIBUTED__WORKER__DAEMON=False`` in their
environment (docs/running.md).

Each job's MLflow run gets the tag ``sweep_worker``: the address of the Dask worker that ran it.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from isparse.errors import ConfigError
from pipeline.jobenv import PARENT_ENV, SWEEP_WORKER_ENV, SWEPT_ENV, TYPED_ENV

log = logging.getLogger(__name__)

#: environment variables of the launching process that a job needs in the Dask worker (the sweep's parent run and
#: the keys it varies)
PASSED_ENV = (PARENT_ENV, SWEPT_ENV, TYPED_ENV)
#: set, while a job runs, to the address of the Dask worker running it (pipeline.main tags the run with it)
WORKER_ENV = SWEEP_WORKER_ENV


#: the launcher's LocalCluster (its Nannies hand this process's config to the workers they spawn): a task is a whole
#: job of minutes, so no 10 ms stack sampling of it (the worker's profiler takes the job thread's GIL 100 times a
#: second), no 20 ms event-loop ticks and fewer monitor polls; with these, the jobs' iterations of benchmark item 7
#: took 78 s instead of 88 s (serial: 68 s), the same sweep measured one after the other
QUIET_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                 "distributed.admin.system-monitor.interval": "5s", "distributed.worker.memory.monitor-interval": "1s",
                 "distributed.scheduler.work-stealing": False}


class LauncherConfigError(ConfigError, CompactHydraException):
    """A bad ``hydra.launcher.*`` value: one line and exit status 2, as any bad input (``pipeline.errors``)."""


def execute_job(idx: int, overrides: Sequence[str], hydra_context: HydraContext, config: DictConfig,
                task_function: TaskFunction, singleton_state: dict, env: dict) -> JobReturn:
    """The Dask task of job ``idx``: its config (the sweep's config with ``overrides``), run by Hydra's ``run_job``;
    returns the job's ``JobReturn`` (FAILED with the exception when the job raised)."""
    from distributed import get_worker

    address, out = get_worker().address, {}

    def body():   # in a thread of its own: outside the Dask task's context (see below)
        try:
            out["return"] = _execute(idx, overrides, hydra_context, config, task_function, singleton_state, env,
                                     address)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the task
            out["error"] = exc

    # A Dask client used inside a task (a job with engine=dask makes its own LocalCluster and client) takes the
    # task's worker for its own: its scatter stores the data on this worker and tells its own scheduler so
    # (KeyError: the worker's address). Run in a plain thread, the job's client is an ordinary client.
    thread = threading.Thread(target=body, name=f"hydra-job-{idx}")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["return"]


def _execute(idx, overrides, hydra_context, config, task_function, singleton_state, env, address) -> JobReturn:
    from pipeline.jobenv import job_env_set

    from .jobthreads import job_log, prepare_process

    prepare_process(singleton_state)
    import pipeline.schema  # noqa: F401 - registers ${isparse.uid:} and the config's schema in this process (jobs compose here)

    def task(cfg):   # called by run_job once the job's output directory is known
        with job_log():
            return task_function(cfg)

    with job_env_set({**env, WORKER_ENV: address}):   # this thread's: pipeline.jobenv.job_env
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        HydraConfig.instance().set_config(sweep_config)   # this thread's (jobthreads.ThreadHydraConfig)
        return run_job(hydra_context=hydra_context, config=sweep_config, task_function=task,
                       job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir", configure_logging=False)


class DaskLauncher(Launcher):
    """Hydra launcher: one Dask task per job (``hydra/launcher=dask``; config :class:`.config.DaskLauncherConf`)."""

    def __init__(self, address: Optional[str] = None, n_workers: Optional[int] = None, threads_per_worker: int = 1,
                 host: str = "127.0.0.1", timeout: float = 10.0,
                 malloc_trim_threshold: Optional[int] = 268435456,
                 malloc_mmap_threshold: Optional[int] = 33554432) -> None:
        self.address, self.n_workers, self.threads_per_worker = address, n_workers, threads_per_worker
        self.malloc_trim_threshold, self.malloc_mmap_threshold = malloc_trim_threshold, malloc_mmap_threshold
        self.host, self.timeout = host, float(timeout)
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context
        self._check()
        if config.hydra.job.get("chdir"):   # the process's working directory: shared by the jobs of its threads
            self._failed("hydra.job.chdir", "The 'hydra.job.chdir' parameter must be false with hydra/launcher=dask "
                         "(a Dask worker runs several jobs at once, one per thread, in one working directory); got "
                         "true.")
        if self.address:   # before any job: an unreachable scheduler is one line
            with self._client():
                pass

    def _check(self) -> None:
        from isparse.errors import check_range

        if self.address is not None and not (isinstance(self.address, str) and "://" in self.address):
            raise LauncherConfigError("hydra.launcher.address", "The 'hydra.launcher.address' parameter must be a "
                                      "scheduler address such as tcp://127.0.0.1:8786, or null (a LocalCluster); "
                                      f"got {self.address!r}.")
        if self.n_workers is not None:
            check_range("hydra.launcher.n_workers", self.n_workers, 1, None, integer=True)
        check_range("hydra.launcher.threads_per_worker", self.threads_per_worker, 1, None, integer=True)
        check_range("hydra.launcher.timeout", self.timeout, 0, None, low_open=True)
        for key in ("malloc_trim_threshold", "malloc_mmap_threshold"):
            if getattr(self, key) is not None:
                check_range(f"hydra.launcher.{key}", getattr(self, key), 0, None, integer=True)

    def _client(self):
        """A ``distributed.Client`` of the scheduler at ``address``, or of a new LocalCluster (closed with it)."""
        import contextlib

        import dask
        from distributed import Client

        from pipeline.cluster import local_cluster

        stack = contextlib.ExitStack()
        if self.address:
            try:
                client = Client(self.address, timeout=self.timeout)
            except (OSError, TimeoutError) as exc:
                self._failed("hydra.launcher.address", f"The 'hydra.launcher.address' parameter must be the "
                             f"address of a running Dask scheduler; {self.address!r} did not answer within "
                             f"{self.timeout:g} s ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}).")
            stack.callback(client.close)
        else:
            # the worker processes may start processes (a job with engine=dask starts its own LocalCluster);
            # set for this process, so a Nanny that restarts a worker later spawns it non-daemonic too
            dask.config.set({"distributed.worker.daemon": False, **QUIET_CLUSTER})
            n = self.n_workers or os.cpu_count() or 1
            # pipeline.cluster.local_cluster: the workers' MALLOC_TRIM_THRESHOLD_ as for cluster=local, and SIGINT
            # left to this process (which closes the cluster)
            cluster = stack.enter_context(local_cluster(malloc_trim_threshold=self.malloc_trim_threshold,
                                                        malloc_mmap_threshold=self.malloc_mmap_threshold,
                                                        n_workers=n, threads_per_worker=self.threads_per_worker,
                                                        host=self.host, dashboard_address=f"{self.host}:0",
                                                        silence_logs=logging.WARNING))
            client = stack.enter_context(Client(cluster, timeout=self.timeout))
            log.info("Dask launcher: LocalCluster of %d worker processes x %d threads on %s (dashboard %s)", n,
                     self.threads_per_worker, self.host, client.dashboard_link)
        stack.client = client
        return stack

    def _failed(self, field: str, message: str):
        """The sweep's parent run FAILED with ``message``; raises the one-line error naming ``field``."""
        from pipeline.sweep import mark_sweep_failed

        mark_sweep_failed(f"LauncherConfigError: {message}")
        raise LauncherConfigError(field, message) from None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from distributed import as_completed

        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        logging.getLogger("distributed").setLevel(logging.WARNING)   # the cluster's INFO lines would bury the jobs'
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        env = {k: os.environ.get(k) for k in PASSED_ENV}
        state = Singleton.get_state()
        with self._client() as stack:
            client = stack.client
            log.info("Dask launcher: %d jobs on %s, sweep output dir: %s", len(job_overrides),
                     client.scheduler.address, sweep_dir)
            futures = {}
            for k, overrides in enumerate(job_overrides):
                idx = initial_job_idx + k
                log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
                fut = client.submit(execute_job, idx, list(overrides), self.hydra_context, self.config,
                                    self.task_function, state, env, key=f"hydra-job-{idx}-{os.getpid()}-{id(self)}",
                                    pure=False)
                futures[fut] = (k, idx, list(overrides))
            results: list[Any] = [None] * len(job_overrides)
            for fut in as_completed(list(futures)):
                k, idx, overrides = futures[fut]
                try:
                    ret = fut.result()
                except Exception as exc:  # noqa: BLE001 - the task itself failed (a lost worker, a result that
                    # could not be sent back): the job is FAILED, the others go on
                    ret = JobReturn(overrides=overrides, status=JobStatus.FAILED, _return_value=exc)
                log.info("Dask launcher: job #%d %s", idx, ret.status.name)
                results[k] = ret
        return results
