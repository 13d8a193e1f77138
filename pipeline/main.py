"""``isparse-run``: the Hydra entry point. Compose, check, build, run, log; close what was opened.

The job itself is :func:`pipeline.job.run_job`; this module is the glue between it and the command line:

- a single run: every failure (bad input, or a fault at any stage) is one line ``isparse-run: error: <message>``
  and exit status 2 (``pipeline.errors``); a FAILED run's line names its MLflow run; Ctrl-C or SIGTERM end the run
  KILLED with the ``isparse-run resume=<run id>`` command (exit status 130 or 143);
- a sweep (``-m``): a failed job prints its one line and the sweep goes on; the end prints one summary line, and the
  exit status is 2 when any job failed (``pipeline.sweep``).
"""

from __future__ import annotations

import os
import signal
import sys

if os.environ.get("ISPARSE_WORKER_IGNORE_SIGINT") == str(os.getppid()):
    # a worker process spawned by this script's LocalCluster (pipeline.cluster.local_cluster), re-importing it:
    # from here on, through the seconds of imports below too, it ignores the terminal's Ctrl-C
    signal.signal(signal.SIGINT, signal.SIG_IGN)

import contextlib
import logging
import traceback
from pathlib import Path

import hydra
from omegaconf import DictConfig

log = logging.getLogger("isparse")
PROG = "isparse-run"
#: Hydra's flags that print and exit without running a job: no MLflow helper is started for them
NO_RUN_FLAGS = frozenset({"--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc",
                          "--resolve"})
#: conf/ at the root of the checkout (the package is installed editable from it: pip install -e .)
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def task(cfg: DictConfig):
    """One job (Hydra's task function). Returns the job's summary; see the module docstring for failures."""
    import numpy as np
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .errors import describe, exit_status_of_signal, full_error, print_error, stage
    from .job import output_dir, run_job
    from .jobenv import PARENT_ENV, job_env
    from .sweep import failed_job_run
    from ._typed import job_overrides

    np.seterr(over="ignore")
    sweep = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    made: dict = {}
    try:
        with stage("start-up"):   # the outermost: what no inner stage marked
            if not sweep and HydraConfig.initialized():
                refuse_sweep_as_single_run(HydraConfig.get())
            return run_job(cfg, made)
    except KeyboardInterrupt as exc:
        name = getattr(exc, "signal", None) or (str(exc).split()[-1] if str(exc).startswith("signal ") else "SIGINT")
        if not getattr(exc, "run_id", None):
            print(f"{PROG}: interrupted ({name}) before its MLflow run was made: nothing was logged",
                  file=sys.stderr, flush=True)
        sys.exit(exit_status_of_signal(name))
    except Exception as exc:  # noqa: BLE001 - every failure is reported here, once
        message, bad_input = describe(exc, output_dir())
        overrides = job_overrides()
        run_id = made.get("run_id")
        if run_id is None and job_env(PARENT_ENV):   # every job of a sweep has its run, a failed one too
            run_id = failed_job_run(cfg, exc, overrides, output_dir(), bad_input)
        if full_error():
            traceback.print_exception(exc)
        where = f"MLflow run {run_id} FAILED" + (f" in {made['job'].tracking.uri}" if made.get("job") else "") \
            if run_id else ""
        line = (f"job #{HydraConfig.get().job.num} ({' '.join(overrides)}): " if sweep else "") + message \
            + (f" [{where}]" if where else "")
        print_error(PROG, line)
        to_log_file(f"{PROG}: error: {line}", None if bad_input else "".join(traceback.format_exception(exc)))
        if not sweep:
            sys.exit(2)
        if (cfg.get("compare") or {}).get("objective"):   # a minimizing sweeper (Optuna) gets a number
            return float("inf")
        return {"failed": True, "bad_input": bad_input}


def to_log_file(line: str, trace: str | None = None) -> None:
    """Write the job's error line (and its traceback) to the job's log file (Hydra's ``<job>.log``, e.g. a sweep job's
    ``main.log``), which otherwise stays empty: the line goes to stderr, not through logging, so the console shows it
    once."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            with contextlib.suppress(Exception):
                handler.handle(logging.makeLogRecord({"name": "isparse", "levelno": logging.ERROR,
                                                      "levelname": "ERROR", "msg": line + (f"\n{trace}" if trace else "")}))
                handler.flush()


def refuse_sweep_as_single_run(hydra_cfg) -> None:
    """A config whose sweeper has parameters (every ``+experiment``: ``hydra.sweeper.params``) is a sweep: run without
    ``-m`` Hydra would run one job of the base config instead, into the experiment's MLflow experiment.

    Raises
    ------
    ConfigError
        (key ``experiment``, or ``hydra.sweeper.params``) naming the swept keys and the command with ``-m``.
    """
    from isparse.errors import ConfigError

    params = dict((hydra_cfg.sweeper or {}).get("params") or {})
    if not params:
        return
    experiment = (hydra_cfg.runtime.choices or {}).get("experiment")
    what = f"+experiment={experiment}" if experiment else "this config"
    key = "experiment" if experiment else "hydra.sweeper.params"
    args = " ".join(hydra_cfg.overrides.task)
    raise ConfigError(key, f"{what} is a sweep (hydra.sweeper.params: {', '.join(map(str, params))}): without -m "
                           f"one job of the base config would run instead; run it with -m: isparse-run -m {args}")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _app(cfg: DictConfig):
    return task(cfg)


def main() -> None:
    """The console script ``isparse-run``: Hydra's command line (``--help`` for the app's help)."""
    from ._store import start_helper

    if not NO_RUN_FLAGS.intersection(sys.argv[1:]):   # --help, --cfg ...: no run, no MLflow
        start_helper()   # first: MLflow's import in a helper process, beside this one's imports (pipeline._store)
    from . import schema  # noqa: F401 - registers the config's schema with Hydra's ConfigStore
    from .errors import console
    from .sweep import exit_status, mark_sweep_failed

    from .errors import LAST_ERROR

    try:
        console(PROG, _app)
    except SystemExit as exc:   # a sweep that ended on an error outside its jobs: its parent run ends FAILED
        if exc.code not in (0, None):
            mark_sweep_failed(LAST_ERROR[-1] if LAST_ERROR else f"isparse-run exited with status {exc.code}")
        raise
    status = exit_status()   # a sweep whose jobs failed: 2
    if status:
        sys.exit(status)

if __name__ == "__main__":
    main()
