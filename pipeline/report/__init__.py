"""isparse-report: read a sweep's runs back from MLflow and compare them with the theory.

Writes, as artifacts of the sweep's parent run (under ``report/``) and as files under
``<paths.outputs>/reports/<experiment>/<parent run id>/``:

1. ``convergence_<data>.png`` per data set: the measured quantity each theorem bounds (dist_sq,
   or the Lyapunov function, relative to its start) and the theorem's bound, against iterations and
   against cumulative uplink bytes, one line per configuration, and eps as a horizontal line.
2. ``iterations_vs_tau.png`` (when a series has several tau): iterations to eps against tau,
   measured (median over seeds, bars from min to max) and the theorem's prediction
   (``predicted_iterations``), one panel per n; ``iterations_vs_tau.csv`` with the log-log slopes.
3. ``table99.md`` / ``table99.csv`` (when the sweep has tau = 1/n and tau = 1 for the same series):
   iterations and uplink bytes to eps at tau = 1/n relative to tau = 1, and the share of uplink
   saved; where a configuration does not reach eps, the neighbourhood it stalls in; and the run metrics to eps
   (``time_to_eps_s``, its ratio, ``downlink_bytes_to_eps``: logged by each run at its own ``eps`` on ``eps_on``).
4. ``compare.md`` / ``compare.csv`` (when runs carry ``compare.role``, i.e. a comparison experiment's arms,
   conf/arm/): per data set and n, each method arm against the baseline arm (``compare.role=baseline``): iterations
   and uplink bytes to eps as ratios method / baseline, or, where eps is not reached (constant-step methods), the
   final error and the whole budget's uplink; median and range over seeds; beside them the run metrics to eps (time,
   rounds, downlink and the time ratio, at each run's ``eps`` on ``eps_on``). Where a key is tuned
   (``compare.tune``, e.g. ``algorithm.rho``) each arm uses its best grid value, and ``compare_grid.md`` /
   ``compare_grid.csv`` show the grid.
5. ``sweep.md`` / ``sweep.csv`` (every sweep, arms or not): one row per configuration (its runs over seeds):
   iterations, iterations, uplink and downlink bytes and time to eps, the whole run's bytes and wall time, and
   whether the theorem's bound held at every logged step.
6. ``README.md``: what the report holds, how its series are formed, and what it could not build and why
   (also printed by the CLI).

A *series* is one data set, method and n, and one value of every other key that differs among the
sweep's runs (e.g. ``blocks.size``, shown as ``b``), found from the runs' params: only seed and tau
vary along a series. eps is each run's ``tol``: a run reaches it at the first logged step with
dist_sq <= tol * r0 (steps are logged every ``tracking.log_every`` iterations and at the last one).
Everything is recomputed from the logged metrics and params, so a report can be rebuilt at any time:

    isparse-report --experiment paper-table99            # the newest sweep of that experiment
    isparse-report --parent <run id> --uri sqlite:///outputs/mlflow.db
    isparse-report --parent <id>,<id of a sweep that re-ran its failed jobs>      # merged, written to the first

The report holds no algorithm logic: it only reads what the runs logged.
"""
from __future__ import annotations

from ._records import (ALIASES, BOOKKEEPING, IDENTITY, METRICS, TAIL, RunRecord, assign_series,
                      config_params, latest_sweep, load_children, tail)
from ._compare import compare_markdown, comparison, grid_markdown, write_comparison
from ._tables import (GOAL_N, GOAL_RATIO, GOAL_SAVED, add_slopes, single_tau_series, sweep_markdown, sweep_rows,
                     table99, table99_gaps, table_markdown, tau_rows, write_sweep_table, write_table, write_tau_table)
from ._cli import main

#: name -> the module defining it, for the modules that import matplotlib (_figures.py, and _writing.py through it):
#: imported on first use (:func:`__getattr__`), so that importing the records or the tables does not import matplotlib
_LAZY = {"convergence_figures": "_figures", "tau_figure": "_figures", "tau_ticks": "_figures",
         "write_readme": "_writing", "build_report": "_writing"}

__all__ = ["ALIASES", "BOOKKEEPING", "GOAL_N", "GOAL_RATIO", "GOAL_SAVED", "IDENTITY", "METRICS", "TAIL",
           "RunRecord", "add_slopes", "assign_series", "build_report", "compare_markdown",
           "comparison", "config_params", "convergence_figures", "grid_markdown", "latest_sweep", "load_children",
           "main", "single_tau_series", "sweep_markdown", "sweep_rows", "table99", "table99_gaps", "table_markdown", "tail", "tau_figure",
           "tau_rows", "tau_ticks", "write_comparison", "write_readme", "write_sweep_table", "write_table",
           "write_tau_table"]


def __getattr__(name: str):
    """The figures' and the entry's names (``build_report``, ``tau_figure``, ...), imported on first use.

    Importing them imports matplotlib and selects its Agg backend (:mod:`pipeline.report._figures`).

    Raises
    ------
    AttributeError
        ``name`` is none of them.
    """
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _LAZY[name] == "_figures":   # import statements, not importlib: the import graph (tests/test_imports.py) sees them
        from . import _figures as module
    else:
        from . import _writing as module
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
