"""``hydra/launcher=dask``: a Hydra launcher that runs each job of a sweep as one task on a Dask cluster.

Hydra finds it in the ``hydra_plugins`` namespace package; :mod:`.config` registers its config (group
``hydra/launcher``, name ``dask``) and :mod:`.dask_launcher` holds the launcher.
"""
