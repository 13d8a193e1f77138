"""MLflow tracking: one run per job, a parent run per sweep, metrics logged in batches as they come.

Uses ``MlflowClient`` with explicit run ids (no fluent global state), so a failed job never
leaves a run active for the next job of a multirun.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from isparse.errors import ConfigError

PARENT_ENV = "ISPARSE_PARENT_RUN_ID"
#: MLflow accepts at most 1000 metrics and 100 params/tags per log_batch call.
MAX_METRICS, MAX_PARAMS = 1000, 100


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail fast, before any work, if the tracking store cannot be used.

    Raises
    ------
    ConfigError
        An http(s) server that does not answer ``/health``, or a sqlite file whose directory cannot be made.
    """
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}")
        except (OSError, urllib.error.URLError) as exc:
            raise ConfigError("tracking.uri", f"The 'tracking.uri' parameter must point at a reachable MLflow "
                                              f"tracking server; {uri!r} did not answer: {exc}") from exc
    elif uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError("tracking.uri", f"The 'tracking.uri' parameter names a sqlite file whose directory "
                                              f"cannot be created: {uri!r}: {exc}") from exc


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment_id(client, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp is not None else client.create_experiment(name)


def flatten(cfg, prefix: str = "") -> dict:
    """Flatten a nested dict/list config to {'a.b': value}."""
    out = {}
    items = cfg.items() if isinstance(cfg, dict) else enumerate(cfg) if isinstance(cfg, list) else None
    if items is None:
        return {prefix: cfg}
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, (dict, list)) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


class RunLogger:
    """One MLflow run: params, tags, batched metrics and artifacts.

    Metrics are buffered and sent in batches of at most 1000 points, at the latest every
    ``flush_seconds``, so what was logged before a failure is kept.
    """

    def __init__(self, uri: str, experiment: str, run_name: str, parent_run_id: str | None = None,
                 tags: dict | None = None, flush_seconds: float = 2.0):
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        self.client = client_for(uri)
        self.experiment_id = experiment_id(self.client, experiment)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent_run_id
        self.run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
        self.run_id = self.run.info.run_id
        self.flush_seconds = flush_seconds
        self._buffer, self._last_flush = [], time.monotonic()

    @classmethod
    def attach(cls, uri: str, run_id: str, flush_seconds: float = 2.0) -> "RunLogger":
        """Continue an existing run (``resume=<run_id>``): mark it RUNNING again and log into it."""
        self = cls.__new__(cls)
        self.client = client_for(uri)
        self.run = self.client.get_run(run_id)
        self.run_id, self.experiment_id = run_id, self.run.info.experiment_id
        self.flush_seconds, self._buffer, self._last_flush = flush_seconds, [], time.monotonic()
        self.client.update_run(run_id, status="RUNNING")
        return self

    def log_artifact(self, path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(str(k)[:250], str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=items[i:i + MAX_PARAMS], synchronous=True)

    def set_tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(str(k), str(v)[:5000]) for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(self.run_id, tags=items[i:i + MAX_PARAMS], synchronous=True)

    def log_metrics(self, metrics: dict, step: int) -> None:
        """Queue metrics at ``step``; NaN/inf values are skipped (MLflow cannot plot them)."""
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        self._buffer.extend(Metric(k, float(v), ts, int(step)) for k, v in metrics.items()
                            if v is not None and math.isfinite(float(v)))
        if len(self._buffer) >= MAX_METRICS or time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        while self._buffer:
            batch, self._buffer = self._buffer[:MAX_METRICS], self._buffer[MAX_METRICS:]
            self.client.log_batch(self.run_id, metrics=batch, synchronous=True)
        self._last_flush = time.monotonic()

    def log_text(self, text: str, name: str) -> None:
        self.client.log_text(self.run_id, text, name)

    def log_dict(self, obj, name: str) -> None:
        self.client.log_text(self.run_id, json.dumps(obj, indent=2, default=str), name)

    def log_figure(self, fig, name: str) -> None:
        self.client.log_figure(self.run_id, fig, name)

    def end(self, status: str = "FINISHED") -> None:
        """Flush what is buffered (best effort on failure), then mark the run."""
        try:
            self.flush()
        finally:
            self.client.set_terminated(self.run_id, status=status)


class SweepParentRun(Callback):
    """Hydra callback: with ``-m``, one MLflow parent run per sweep; every job's run is its child.

    ``on_multirun_start`` runs once in the launching process before any job: it creates the
    parent run and exports its id in ``$ISPARSE_PARENT_RUN_ID`` for the jobs (not
    ``MLFLOW_RUN_ID``, which would make every job reuse one run). ``on_multirun_end`` ends it:
    FAILED if any child failed, else FINISHED. Hydra's basic sweeper re-raises a failed job's
    exception after the batch and then skips ``on_multirun_end``; an ``atexit`` hook ends the
    parent run in that case.
    """

    def __init__(self):
        self.logger = None
        self.failed = 0

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from hydra.core.hydra_config import HydraConfig

        # Hydra sets HydraConfig for each job, not yet here: set it so ${hydra:runtime.cwd} resolves
        HydraConfig.instance().set_config(config)
        uri, experiment = str(config.tracking.uri), str(config.tracking.experiment)
        check_reachable(uri)
        sweep_dir = HydraConfig.get().sweep.dir
        self.logger = RunLogger(uri, experiment, run_name=f"sweep-{Path(sweep_dir).name}",
                                tags={"isparse.sweep": "true", "sweep_dir": str(Path(sweep_dir).resolve())})
        overrides = list(HydraConfig.get().overrides.task)
        self.logger.set_tags({"sweep_overrides": " ".join(overrides)})
        os.environ[PARENT_ENV] = self.logger.run_id
        atexit.register(self._end)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status == JobStatus.FAILED:
            self.failed += 1

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        self._end()

    def _end(self) -> None:
        if self.logger is not None:
            logger, self.logger = self.logger, None
            logger.set_tags({"failed_jobs": self.failed})
            logger.end("FAILED" if self.failed else "FINISHED")
            os.environ.pop(PARENT_ENV, None)


def resolved_config(cfg: DictConfig) -> dict:
    """The job's config, resolved, as plain containers (without the hydra node)."""
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in cfg.items_ex(resolve=True) if k != "hydra"}
