"""The config of ``hydra/launcher=dask`` (``hydra.launcher.*``), registered with Hydra's ConfigStore."""

from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class DaskLauncherConf:
    """``hydra.launcher.*`` of ``hydra/launcher=dask``.

    address: a running Dask scheduler (``tcp://127.0.0.1:8786``); null starts a LocalCluster of ``n_workers``
        worker processes with ``threads_per_worker`` threads each, bound to ``host``, closed when the sweep ends.
    n_workers: the LocalCluster's worker processes (null: one per core); each runs one job at a time.
    threads_per_worker: the LocalCluster's threads per worker process.
    host: the interface the LocalCluster's scheduler, workers and dashboard bind to.
    timeout: seconds to wait for the scheduler at ``address`` (or the LocalCluster) to answer.
    malloc_trim_threshold: glibc's ``MALLOC_TRIM_THRESHOLD_`` (bytes) of the LocalCluster's worker processes, as
        ``cluster.malloc_trim_threshold`` of conf/cluster/local.yaml (null: Dask's 65536, with which a job's rounds
        ran about 2x slower than in a joblib worker: docs/benchmarks.md, item 7).
    """

    _target_: str = "hydra_plugins.isparse_dask_launcher.dask_launcher.DaskLauncher"
    address: Optional[str] = None
    n_workers: Optional[int] = None
    threads_per_worker: int = 1
    host: str = "127.0.0.1"
    timeout: float = 10.0
    malloc_trim_threshold: Optional[int] = 268435456


ConfigStore.instance().store(group="hydra/launcher", name="dask", node=DaskLauncherConf,
                             provider="isparse_dask_launcher")
