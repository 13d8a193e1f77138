"""Orchestration: the Hydra entry point (``isparse-run``), the config's schema, the run's lifecycle, the Dask
cluster, MLflow tracking, the sweep, reports and plots.

No algorithm logic lives here: everything computed comes from ``isparse``.

Importing it registers the OmegaConf resolver ``${isparse.uid:}``: six random hex digits, drawn once per composed
config (cached like Hydra's ``${now:...}``, and copied with it into each job's config of a sweep, also to a joblib
or Dask worker), so ``hydra.run.dir`` and ``hydra.sweep.dir`` (conf/config.yaml) differ between two runs or
sweeps started in the same second.
"""

import uuid as _uuid

from omegaconf import OmegaConf as _OmegaConf

_OmegaConf.register_new_resolver("isparse.uid", lambda: _uuid.uuid4().hex[:6], use_cache=True, replace=True)

