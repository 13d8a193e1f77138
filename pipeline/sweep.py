"""A sweep (``isparse-run -m``): its MLflow parent run, what its jobs need to know of it, and its end.

:class:`SweepParentRun` is the Hydra callback (conf/config.yaml, ``hydra.callbacks``): one parent run per sweep,
every job's run its child. A job reads the sweep through :func:`pipeline.jobenv.job_env` (the parent run id, the
keys the sweep varies, the Dask worker running it), which the callback sets. A failed job prints its one line when
it fails and returns (the sweep goes on); at the end the callback prints one summary line and sets the exit status
(:func:`exit_status`): 2 when any job failed.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from .errors import exits_on_error, set_default_stage, stage
from .jobenv import FAILURE_TAG, PARENT_ENV, SWEPT_ENV, TYPED_ENV, job_env
from .lifecycle import sweep_tags
from .tracking import RunLogger, check_reachable, flatten, summary_metrics, ui_link

log = logging.getLogger(__name__)

#: why the sweep of this process failed outside its jobs (the launcher could not start): the parent's tag ``error``
_SWEEP_ERROR: list = []
#: the exit status the sweep of this process ends with (set when it ends)
_STATUS: list = []


def mark_sweep_failed(reason: str) -> None:
    """Record that this process's sweep failed outside its jobs (e.g. ``hydra.launcher.address`` unreachable): the
    parent run then ends FAILED with ``reason`` in its tag ``error``."""
    _SWEEP_ERROR.append(reason)


def exit_status() -> int:
    """The exit status of this process's sweep: 0, or 2 (a job failed, or the sweep outside its jobs); 0 when no
    sweep ran."""
    return _STATUS[-1] if _STATUS else 0


def swept_keys(overrides, sweeper_params) -> list[str]:
    """The keys a sweep varies, in the order given: the command line's sweeps (``workers.n=4,16``,
    ``algorithm=isega,ibcd``), then those of the experiment's ``hydra.sweeper.params`` with several values."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    keys = []
    try:
        parsed = parser.parse_overrides(list(overrides))
        params = [f"{k}={v}" for k, v in (sweeper_params or {}).items()]
        parsed += parser.parse_overrides(params)
    except Exception:  # noqa: BLE001 - a malformed override: Hydra reports it
        return []
    for o in parsed:
        key = o.key_or_group.lstrip("+")
        if o.is_sweep_override() and not o.is_hydra_override() and key not in keys:
            keys.append(key)
    return keys


class SweepParentRun(Callback):
    """Hydra callback: with ``-m``, one MLflow parent run per sweep; every job's run is its child.

    ``on_multirun_start`` runs once in the launching process before any job: it creates the parent run and exports
    its id in ``$ISPARSE_PARENT_RUN_ID`` for the jobs (not ``MLFLOW_RUN_ID``, which would make every job reuse one
    run) and the swept keys in ``$ISPARSE_SWEPT_KEYS``. ``on_multirun_end`` writes the report (``report.auto``) and
    ends it: FAILED if any child failed, else FINISHED; an ``atexit`` hook ends it if the sweep was interrupted.

    With a parallel launcher (``hydra/launcher=joblib``, ``hydra/launcher=dask``) ``on_job_*`` run in the worker
    processes on a copy of this callback, so the parent counts and lists the failed jobs from the store (its FAILED
    child runs), which holds for every launcher.
    """

    def __init__(self):
        self.logger = None
        self.completed = False
        self.reported = False   # report.auto wrote the sweep's report

    def __getstate__(self):   # the copy a parallel launcher sends its workers: the parent run is this process's
        return {"logger": None, "completed": self.completed, "reported": self.reported}

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        # bad input (an empty paths.outputs, an unreachable tracking server) ends the sweep here with its one line
        # and exit status 2 (Hydra would print a callback's exception as a warning and go on)
        with exits_on_error("isparse-run"), stage("tracking store"):
            self._start(config)
        set_default_stage("launcher")   # what fails from here on outside the jobs is the sweeper's or launcher's
        from .cluster.start import share_local_clusters

        share_local_clusters()   # jobs run in this process (the basic launcher) share one LocalCluster

    def _start(self, config: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig

        # Hydra sets HydraConfig for each job, not yet here: set it so ${hydra:runtime.cwd} resolves
        HydraConfig.instance().set_config(config)
        uri, experiment = str(config.tracking.uri), str(config.tracking.experiment)
        check_reachable(uri)
        sweep_dir = HydraConfig.get().sweep.dir
        self.logger = RunLogger(uri, experiment, run_name=f"sweep-{Path(sweep_dir).name}", spill_dir=sweep_dir,
                                tags={"isparse.sweep": "true", "sweep_dir": str(Path(sweep_dir).resolve())})
        overrides = list(OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False))
        self.logger.set_tags({"sweep_overrides": " ".join(overrides)})
        os.environ[PARENT_ENV] = self.logger.run_id
        os.environ[SWEPT_ENV] = ",".join(swept_keys(overrides, config.hydra.sweeper.get("params")))
        os.environ[TYPED_ENV] = json.dumps(overrides)
        log.info("MLflow sweep run %s; its runs: %s", self.logger.run_id, ui_link(uri, self.logger.experiment_id))
        atexit.register(self._end)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from .cluster.start import close_shared_clusters

        close_shared_clusters()
        self.completed = True
        if self.logger is not None and config.get("report", {}).get("auto", False):
            from .report import build_report   # matplotlib: imported when a report is made

            self.logger.flush()
            try:
                result = build_report(str(config.tracking.uri), parent_id=self.logger.run_id,
                                      outputs=config.paths.outputs, measure=config.report.get("measure", "both"))
                log.info("report of sweep %s: %s", self.logger.run_id, result["dir"])
                self.reported = True
            except Exception as exc:  # noqa: BLE001 - the sweep's runs are logged; the report can be rebuilt
                log.error("report failed (%s: %s); rebuild it with: isparse-report --uri %s --parent %s",
                          type(exc).__name__, exc, config.tracking.uri, self.logger.run_id)
                self.logger.set_tags({"report_error": f"{type(exc).__name__}: {exc}"})
        self._end()

    def _children(self, logger) -> list:
        """The sweep's child runs in the store (read from the store: with a parallel launcher the jobs' callbacks
        run elsewhere), or None when the store cannot be read."""
        try:
            return logger.client.search_runs([logger.experiment_id],
                                             filter_string=f"tags.mlflow.parentRunId = '{logger.run_id}'",
                                             max_results=50_000)
        except Exception as exc:  # noqa: BLE001 - the store is away
            log.warning("could not list the sweep's runs (%s)", exc)
            return None

    def _end(self) -> None:
        if self.logger is None:
            return
        logger, self.logger = self.logger, None
        runs = self._children(logger) or []
        failed = sorted((r for r in runs if r.info.status == "FAILED"), key=lambda r: _job_number(r))
        tags = {"failed_jobs": len(failed), "completed": str(self.completed).lower()}
        if failed:   # job number, overrides, error: a line each (the artifact failed_jobs.txt, and a tag)
            text = "".join(f"#{r.data.tags.get('sweep_job', '?')}\t{r.data.tags.get('overrides', '')}\t"
                           f"{(r.data.tags.get('error') or '').splitlines()[0] if r.data.tags.get('error') else ''}"
                           f"\trun {r.info.run_id}\n" for r in failed)
            logger.log_text(text, "failed_jobs.txt")
            tags["failed_jobs_list"] = text
        if _SWEEP_ERROR:
            tags["error"] = _SWEEP_ERROR[0]
        logger.set_tags(tags)
        status = "FAILED" if failed or _SWEEP_ERROR else ("FINISHED" if self.completed else "KILLED")
        logger.end(status)
        os.environ.pop(PARENT_ENV, None)
        os.environ.pop(SWEPT_ENV, None)
        os.environ.pop(TYPED_ENV, None)
        if not self.completed:      # interrupted, or the launcher failed
            log.warning("sweep %s did not complete; report its finished jobs with: isparse-report --parent %s",
                        logger.run_id, logger.run_id)
        if runs:
            log.info("%s", jobs_summary(runs))
        if failed:
            jobs = ", ".join(f"#{r.data.tags.get('sweep_job', '?')}" for r in failed)
            print(f"isparse-run: sweep: {len(failed)} of {len(runs)} jobs FAILED ({jobs}): parent MLflow run "
                  f"{logger.run_id} FAILED in {logger.uri} (its failed_jobs.txt lists them)", file=sys.stderr,
                  flush=True)
            _STATUS.append(2)
        else:
            _STATUS.append(2 if _SWEEP_ERROR else 0)
            report = "" if self.reported else \
                f"; its figures and tables: isparse-report --uri {logger.uri} --parent {logger.run_id}"
            log.info("sweep: parent MLflow run %s %s in %s%s", logger.run_id, status, logger.uri, report)


def _data_name(cfg) -> str:
    """The data's ``display_name()`` (``DataSource``'s, as a run names it), or ``data.name`` when the data section
    itself is what failed to check."""
    try:
        from isparse.data.sources import DataSource

        return DataSource.from_dict(OmegaConf.to_container(cfg.data, resolve=True)).display_name()
    except Exception:  # noqa: BLE001 - the job's own error says what is wrong with it
        return str(_select(cfg, "data.name"))


def jobs_summary(runs) -> str:
    """The sweep's jobs, a line each in job order: number, the swept overrides, status, iterations, whether tol
    was reached and the uplink bytes (the child runs' metrics ``summary/iterations``, ``summary/converged``,
    ``summary/uplink_bytes_total``).
    """
    lines = [f"sweep: {len(runs)} jobs (iterations, tol reached, uplink bytes):"]
    for r in sorted(runs, key=_job_number):
        m, t = summary_metrics(r.data.metrics), r.data.tags
        swept = t.get("overrides", "")
        it = f"{m['iterations']:,.0f} it" if "iterations" in m else "-"
        conv = {1.0: "converged", 0.0: "not converged"}.get(m.get("converged"), "-")
        up = f"{m['uplink_bytes_total'] / 1e6:,.3f} MB up" if "uplink_bytes_total" in m else "-"
        lines.append(f"  #{t.get('sweep_job', '?')} {swept}: {r.info.status}, {it}, {conv}, {up}")
    return "\n".join(lines)


def _job_number(run) -> tuple:
    job = str(run.data.tags.get("sweep_job", ""))
    return (not job.isdigit(), int(job) if job.isdigit() else 0)


def failed_job_run(job_or_cfg, exc: BaseException, overrides: list[str], outdir, bad_input: bool) -> str | None:
    """A FAILED child run for a sweep's job that failed before its run was made, so that every job of a sweep has
    its run; returns its id. Best effort: if the store cannot be written either, a warning says so (the sweep's
    end still counts the job)."""
    error = f"{type(exc).__name__}: {exc}"
    cfg = job_or_cfg
    try:
        try:
            params = flatten(OmegaConf.to_container(cfg, resolve=True)) if OmegaConf.is_config(cfg) else {}
        except Exception:  # noqa: BLE001 - an interpolation that cannot resolve: the overrides say what was asked
            params = {}
        params.pop("hydra", None)
        uri = str(_select(cfg, "tracking.uri"))
        data = _data_name(cfg)
        name = str(_select(cfg, "tracking.run_name") or "-".join(
            [str(_select(cfg, k)) for k in ("workers.n", "blocks.size", "tau", "seed", "algorithm.name")] + [data]))
        logger = RunLogger(uri, str(_select(cfg, "tracking.experiment")), name, parent_run_id=job_env(PARENT_ENV),
                           tags={"algorithm": str(_select(cfg, "algorithm.name")), "data": data,
                                 "engine": str(_select(cfg, "engine")), "overrides": " ".join(overrides),
                                 **sweep_tags(), "failed_before_run": "true"},
                           spill_dir=outdir)
        with contextlib.suppress(Exception):
            logger.log_params({k: v for k, v in params.items() if not k.startswith("hydra.")})
        logger.set_tags({"error": error, FAILURE_TAG: "input" if bad_input else "error"})
        logger.end("FAILED")
        return logger.run_id
    except Exception as exc2:  # noqa: BLE001 - the job's own error is what the sweep reports
        log.warning("the failed job could not be recorded in MLflow (%s: %s)", type(exc2).__name__, exc2)
        return None


def _select(cfg, key: str):
    node = cfg
    for part in key.split("."):
        try:
            node = node[part]
        except Exception:  # noqa: BLE001 - a missing or unresolvable key
            return None
    return node
