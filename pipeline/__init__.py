"""Orchestration: the Hydra entry point (``isparse-run``), the Dask cluster's lifecycle, MLflow tracking and plots.

No algorithm logic lives here: everything computed comes from ``isparse``.
"""
