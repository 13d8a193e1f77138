"""The Dask cluster of a run: its options (the ``cluster`` section, :mod:`.options`) and its lifecycle (started,
connected to and closed: :mod:`.start`)."""

from .options import (KINDS, AddressClusterOptions, ClusterOptions, KubernetesClusterOptions, LocalClusterOptions,
                      Security, SlurmClusterOptions, SshClusterOptions, security_from)
from .start import (IGNORE_SIGINT_ENV, check_slurm_job, dask_client, environ, local_cluster, quiet_teardown,
                    record_run, wait_for_started_workers)

__all__ = ["IGNORE_SIGINT_ENV", "KINDS", "AddressClusterOptions", "ClusterOptions", "KubernetesClusterOptions",
           "LocalClusterOptions", "Security", "SlurmClusterOptions", "SshClusterOptions", "check_slurm_job",
           "dask_client", "environ", "local_cluster", "quiet_teardown", "record_run", "security_from",
           "wait_for_started_workers"]
