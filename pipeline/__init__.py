"""Orchestration: the Hydra entry point (``isparse-run``), the config's schema, the run's lifecycle, the Dask
cluster, MLflow tracking, the sweep, reports and plots.

No algorithm logic lives here: everything computed comes from ``isparse``.

Importing it registers the OmegaConf resolver ``${isparse.uid:}``: six random hex digits, drawn once per composed
config (cached like Hydra's ``${now:...}``, and copied with it into each job's config of a sweep, also to a joblib
or Dask worker), so ``hydra.run.dir`` and ``hydra.sweep.dir`` (conf/config.yaml) differ between two runs or
sweeps started in the same second; and ``${isparse.outputs:${paths.outputs}}``: ``paths.outputs`` as it is, or the
one-line error (ConfigError) when it is empty, before Hydra makes a run directory under it (an empty
``paths.outputs`` would put ``runs/`` and the MLflow store at the file system's root).
"""

import uuid as _uuid

from omegaconf import OmegaConf as _OmegaConf

_OmegaConf.register_new_resolver("isparse.uid", lambda: _uuid.uuid4().hex[:6], use_cache=True, replace=True)



def _outputs(path=None):
    if path is None or not str(path).strip():
        from isparse.errors import ConfigError

        raise ConfigError("paths.outputs", f"The 'paths.outputs' parameter must be a non-empty path (the directory "
                                           f"of the run directories, the MLflow store and the cache); got {path!r}.")
    return path


_OmegaConf.register_new_resolver("isparse.outputs", _outputs, replace=True)
