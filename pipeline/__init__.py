"""Orchestration: the Hydra entry point (``isparse-run``), the config's schema, the run's lifecycle, the Dask
cluster, MLflow tracking, the sweep, reports and plots.

No algorithm logic lives here: everything computed comes from ``isparse``.

Importing it registers the OmegaConf resolver ``${isparse.uid:}``: six random hex digits, drawn once per composed
config (cached like Hydra's ``${now:...}``, and copied with it into each job's config of a sweep, also to a joblib
or Dask worker), so ``hydra.run.dir`` and ``hydra.sweep.dir`` (conf/config.yaml) differ between two runs or
sweeps started in the same second; and ``${isparse.outputs:${paths.outputs}}``: ``paths.outputs`` as it is, or the
one-line error (ConfigError) when it is empty (it would put ``runs/`` and the MLflow store at the file system's
root), under a regular file, or not writable (a read-only file system), before Hydra makes a run directory under it.
"""

import uuid as _uuid

from omegaconf import OmegaConf as _OmegaConf

_OmegaConf.register_new_resolver("isparse.uid", lambda: _uuid.uuid4().hex[:6], use_cache=True, replace=True)



def _outputs(path=None):
    from isparse.errors import ConfigError

    if path is None or not str(path).strip():
        raise ConfigError("paths.outputs", f"The 'paths.outputs' parameter must be a non-empty path (the directory "
                                           f"of the run directories, the MLflow store and the cache); got {path!r}.")
    from isparse.paths import writable_dir_problem

    problem = writable_dir_problem(path)
    if problem is not None:
        raise ConfigError("paths.outputs", f"The 'paths.outputs' parameter must be a directory this run can make and "
                                           f"write (its run directories, the MLflow store and the cache); got "
                                           f"{str(path)!r}: {problem}.")
    return path


_OmegaConf.register_new_resolver("isparse.outputs", _outputs, replace=True)
