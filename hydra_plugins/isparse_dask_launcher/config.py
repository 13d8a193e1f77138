"""The config of ``hydra/launcher=dask`` (``hydra.launcher.*``), registered with Hydra's ConfigStore."""

from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class DaskLauncherConf:
    """``hydra.launcher.*`` of ``hydra/launcher=dask``.

    address: a running Dask scheduler (``tcp://127.0.0.1:8786``); null starts a LocalCluster of ``n_workers``
        worker processes with ``threads_per_worker`` threads each, bound to ``host``, closed when the sweep ends.
    n_workers: the LocalCluster's worker processes (null: one per core).
    threads_per_worker: the LocalCluster's threads per worker process; each thread runs one job at a time (the
        jobs of one process share its GIL: 1 with one process per core keeps CPU-bound jobs' cores busy).
    host: the interface the LocalCluster's scheduler, workers and dashboard bind to.
    timeout: seconds to wait for the scheduler at ``address`` (or the LocalCluster) to answer.
    malloc_trim_threshold: glibc's ``MALLOC_TRIM_THRESHOLD_`` (bytes) of the LocalCluster's worker processes, as
        ``cluster.malloc_trim_threshold`` of ``pipeline/cluster/options.py`` (null: Dask's 65536).
    malloc_mmap_threshold: glibc's ``MALLOC_MMAP_THRESHOLD_`` (bytes) of those processes (null: glibc's 128 KiB, fixed
        once a trim threshold is set). With a trim threshold and no mmap threshold, a job's iterations ran 1.5-2x
        slower than in a plain process, with 2.2-2.5 million page faults per 6,000 ISEGA iterations on phishing
        (docs/benchmarks.md, item 7).
    """

    _target_: str = "hydra_plugins.isparse_dask_launcher.dask_launcher.DaskLauncher"
    address: Optional[str] = None
    n_workers: Optional[int] = None
    threads_per_worker: int = 1
    host: str = "127.0.0.1"
    timeout: float = 10.0
    malloc_trim_threshold: Optional[int] = 268435456
    malloc_mmap_threshold: Optional[int] = 33554432


ConfigStore.instance().store(group="hydra/launcher", name="dask", node=DaskLauncherConf,
                             provider="isparse_dask_launcher")
