"""MLflow tracking: one run per job, metrics logged in batches as they come, kept through server outages.

Uses ``MlflowClient`` with explicit run ids (no fluent global state), so a failed job never leaves a run active
for the next job of a multirun; one client per store and process (:func:`client_for`). MLflow is imported only
when a client is made (:func:`pipeline._store.client_for`). The sweep's parent run is ``pipeline.sweep``'s.

``python -m pipeline.tracking import FILE --uri URI`` sends the metric points a run could not send
(:func:`main`, :mod:`pipeline.unsent`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from isparse.errors import ConfigError

from ._store import MAX_METRICS, MAX_PARAMS, client_for
from .unsent import import_metrics

log = logging.getLogger(__name__)

#: the tag that makes a run another's child in MLflow (``mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID``)
PARENT_RUN_TAG = "mlflow.parentRunId"


def check_reachable(uri: str, timeout: float = 5.0, *, key: str = "tracking.uri", must_exist: bool = False) -> None:
    """Fail fast, before any work, if the tracking store cannot be used. ``key`` names the setting in the error
    (``tracking.uri``, or a console script's ``--uri``); ``must_exist``: a sqlite file must already be a store (a
    report or an import reads one; a run makes it).

    Raises
    ------
    ConfigError
        A URI that is neither ``sqlite:///<file>`` nor ``http(s)://<host>[:port]``; an http(s) server that does not
        answer ``/health``; a sqlite path that is a directory, or whose directory cannot be made.
    """
    prefix = f"The '{key}' parameter"
    if not isinstance(uri, str) or not uri.startswith(("http://", "https://", "sqlite:///")) \
            or uri.rstrip("/") in ("http:", "https:", "sqlite:"):
        raise ConfigError(key, f"{prefix} must be an MLflow store isparse can use: sqlite:///<file> (e.g. "
                               f"sqlite:///outputs/mlflow.db) or an http(s)://<host>:<port> tracking server; got "
                               f"{uri!r}.")
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}")
        except (OSError, urllib.error.URLError, ValueError) as exc:
            raise ConfigError(key, f"{prefix} must point at a reachable MLflow tracking server; {uri!r} did not "
                                   f"answer: {exc}") from exc
        return
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    if path.is_dir():
        raise ConfigError(key, f"{prefix} must name a sqlite file, not a directory; got {uri!r} ({str(path)!r} is a "
                               f"directory: e.g. sqlite:///{path / 'mlflow.db'}).")
    if must_exist and not path.is_file():
        raise ConfigError(key, f"{prefix} must name an existing MLflow store (isparse-run writes "
                               f"sqlite:///<paths.outputs>/mlflow.db); got {uri!r}: no such file.")
    if path.is_file() and path.stat().st_size > 0:   # an existing file must be a sqlite database (an empty one is new)
        try:
            with open(path, "rb") as fh:
                header = fh.read(16)
        except OSError as exc:
            raise ConfigError(key, f"{prefix} names a file that cannot be read: {uri!r}: {exc.strerror or exc}") from exc
        if header != b"SQLite format 3\x00":
            raise ConfigError(key, f"{prefix} must name a sqlite database (an MLflow store); got {uri!r}: the file is "
                                   f"not a sqlite database.")
    from isparse.paths import writable_dir_problem

    problem = None if must_exist else writable_dir_problem(path.parent)
    if problem is None and not must_exist and path.is_file() and not os.access(path, os.W_OK):
        problem = f"{path} cannot be written"
    if problem is not None:   # a run writes the store: a read-only one fails at its first write otherwise
        raise ConfigError(key, f"{prefix} names a sqlite file this run cannot write: {uri!r}: {problem}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(key, f"{prefix} names a sqlite file whose directory cannot be created: {uri!r}: "
                               f"{exc.strerror or exc}") from exc


#: The experiment tag MLflow 3's UI reads for an experiment's kind (``mlflow.experimentKind``; the values are
#: the UI's ``ExperimentKind`` enum, e.g. ``genai_development``); ``custom_model_development`` is "Machine learning":
#: the training-runs view (runs table, charts) instead of the generative-AI overview of traces.
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
#: Beside a sqlite store, the experiments' artifacts go to this directory (``<dir of the .db>/mlartifacts/<experiment>``).
ARTIFACTS_DIR = "mlartifacts"
#: MLflow's limits: a param value of at most 6000 characters, keys of at most 250.
MAX_PARAM_VALUE, MAX_KEY = 6000, 250
#: MLflow's limit on a tag value (``mlflow.utils.validation.MAX_TAG_VAL_LENGTH``)
MAX_TAG_VALUE = 8000
#: Metric name prefixes. The MLflow UI's chart view puts a metric in the section named by the part of its name
#: before the last "/" (MLflow 3's ``extractChartSectionName``), sections sorted by name, the metrics without a
#: prefix after them ("Model metrics"). ``bound/``: the theorem's bound and the quantity it bounds, on one scale
#: (:func:`pipeline.job.metrics`); ``summary/``: the numbers a run logs once (its end's summary, the predicted
#: iteration count at its start), which would otherwise be one-bar charts among the series.
BOUND, SUMMARY = "bound/", "summary/"
#: The iteration of each checkpoint a run uploads (at its step): a section of its own, out of the series' way
CHECKPOINT = "checkpoint/iteration"


#: The experiment tag prefix of MLflow's shared views (``mlflow.sharedViewState.<key>``): the UI opened with
#: ``viewStateShareKey=<key>`` in its address applies the view state the tag holds (JSON).
SHARED_VIEW_TAG, SHARED_VIEW_KEY = "mlflow.sharedViewState.", "isparse-bound"
_SHARED_SECTION = "isparse-bound-vs-measured"


def _line_chart(uuid: str, title: str, keys: list[str], x_metric: str | None = None) -> dict:
    """One line chart of the MLflow UI's chart view (the fields of MLflow 3's ``RunsChartsLineCardConfig``):
    ``keys`` against ``step``, or against the metric ``x_metric``."""
    return {"uuid": uuid, "type": "LINE", "runsCountToCompare": 100, "metricSectionId": _SHARED_SECTION,
            "deleted": False, "isGenerated": False, "displayName": title, "metricKey": keys[0],
            "selectedMetricKeys": keys, "lineSmoothness": 0, "xAxisScaleType": "linear", "scaleType": "linear",
            "range": {"xMin": None, "xMax": None, "yMin": None, "yMax": None},
            "xAxisKey": "metric" if x_metric else "step", "selectedXAxisMetricKey": x_metric or "",
            "yAxisKey": "metric", "yAxisExpressions": [], "ignoreOutliers": False, "useGlobalXaxisKey": False,
            "useGlobalLineSmoothing": False}


def shared_view_state() -> dict:
    """The chart view isparse's experiment links open on (the experiment tag ``mlflow.sharedViewState.isparse-bound``).

    A first section, "Bound vs measured", one chart a row: the measured quantity of every run
    (``bound/log10_measured_rel``, logged whether or not a theorem applies: one line and one legend entry a run, in
    the run's colour, ``mlflow.runColor``), then three charts of the theorem's bound (``bound/log10_bound_rel``,
    solid) beside the quantity it bounds (dashed), both log10 of their value over r_0: against the iteration, the
    cumulative uplink bytes and the wall time. Then the sections MLflow makes from
    the metric names' prefixes (``bound``, ``summary``; see :data:`BOUND`), then the series without a prefix.
    The runs table shows, beside each run's data set and source, its tau, bound_source and summary (iterations,
    converged, predicted iterations, uplink bytes, wall time). Every run of the experiment is shown, grouped by its
    ``algorithm`` tag (a sweep's parent run, which has no
    metrics, goes to the collapsed "Additional runs"); charts draw each run, not its group's aggregate.

    The keys are MLflow 3's view state (``compareRunCharts``, ``compareRunSections``, ``groupBy``, ...), read by
    the UI only: an MLflow whose UI reads another shape shows its default view instead.
    """
    pair = [BOUND + "log10_bound_rel", BOUND + "log10_measured_rel"]
    charts = [_line_chart("isparse-measured-step", "measured, log10 of / r0, by iteration: every run",
                          [BOUND + "log10_measured_rel"]),
              _line_chart("isparse-bound-step", "bound (solid) and measured (dashed), log10 of / r0, by iteration",
                          pair),
              _line_chart("isparse-bound-uplink", "... by cumulative uplink bytes", pair, "uplink_bytes"),
              _line_chart("isparse-bound-wall", "... by wall time (s)", pair, "wall_s")]
    return {"compareRunCharts": charts,
            # one chart a row, tall: the legend below each chart has room for a line per run (at the default three
            # a row and 360 px it shows two, and the rest only on scrolling)
            "compareRunSections": [{"uuid": _SHARED_SECTION, "name": "Bound vs measured", "display": True,
                                    "isReordered": True, "columns": 1, "cardHeight": 560}],
            "selectedColumns": [f"{kind}.`{key}`" for kind, key in (
                ("attributes", "Dataset"), ("attributes", "Source"), ("params", "tau"), ("tags", "bound_source"),
                ("metrics", SUMMARY + "iterations"), ("metrics", SUMMARY + "converged"),
                ("metrics", SUMMARY + "predicted_iterations"), ("metrics", SUMMARY + "uplink_bytes_total"),
                ("metrics", SUMMARY + "wall_s_total"))],
            "isAccordionReordered": True, "runsHiddenMode": "SHOW_ALL", "useGroupedValuesInCharts": False,
            "groupBy": {"aggregateFunction": "min", "groupByKeys": [{"mode": "tag", "groupByData": "algorithm"}]}}


def summary_metrics(metrics: dict) -> dict:
    """A run's summary numbers: the ``summary/`` metrics of ``metrics`` (``run.data.metrics``), without the prefix.

    Parameters
    ----------
    metrics : dict
        Metric name -> value, as MLflow returns a run's latest values.

    Returns
    -------
    dict
        ``{"iterations": ..., "converged": ..., "time_to_eps_s": ..., ...}`` (the keys :func:`pipeline.job.run_job`
        logs under ``summary/``).
    """
    return {k[len(SUMMARY):]: v for k, v in metrics.items() if k.startswith(SUMMARY)}


def _cut(value: str, limit: int) -> str:
    """``value`` if it fits in ``limit`` characters, else its start and ``... [cut: <length> characters]``."""
    if len(value) <= limit:
        return value
    mark = f" ... [cut: {len(value)} characters]"
    return value[:limit - len(mark)] + mark


def artifact_location(uri: str | None, experiment: str) -> str | None:
    """Where a new experiment of the store ``uri`` keeps its runs' artifacts.

    Next to a sqlite file (``sqlite:///<dir>/mlflow.db``): the absolute path ``<dir>/mlartifacts/<experiment>``
    (characters other than letters, digits, ``.``, ``_`` and ``-`` in the name become ``_``). ``None`` (the
    default: a tracking server's own artifact root) for any other store. Without it MLflow would use
    ``./mlruns/<experiment id>`` of whatever directory the creating process ran in.
    """
    if not uri or not uri.startswith("sqlite:///"):
        return None
    db = uri[len("sqlite:///"):].split("?", 1)[0]
    if not db or db == ":memory:":
        return None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip(".") or "experiment"
    return str(Path(db).expanduser().resolve().parent / ARTIFACTS_DIR / slug)


def experiment_id(client, name: str, uri: str | None = None) -> str:
    """The id of experiment ``name``, created if missing, tagged ``mlflow.experimentKind=custom_model_development``
    and with the shared view :func:`shared_view_state` (the view :func:`ui_link`'s address opens).

    A new experiment gets its artifact location from :func:`artifact_location` (``uri`` is the store's tracking
    URI; default the client's); an existing one keeps its location and gets the kind tag if it lacks it (a kind a
    user chose is kept).
    """
    uri = uri if uri is not None else client.tracking_uri
    view_tag, view = SHARED_VIEW_TAG + SHARED_VIEW_KEY, json.dumps(shared_view_state())
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, artifact_location=artifact_location(uri, name),
                                            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, view_tag: view})
        except Exception:  # noqa: BLE001 - MLflow's error when another process created it in between
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if EXPERIMENT_KIND_TAG not in exp.tags:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    if exp.tags.get(view_tag) != view:   # an experiment made before, or by another version
        client.set_experiment_tag(exp.experiment_id, view_tag, view)
    return exp.experiment_id


def ui_link(uri: str, experiment: str, hint: bool = True) -> str:
    """The address of an experiment's runs view in the MLflow UI, and how to start the UI.

    MLflow 3.17's UI opens an experiment on the view its GenAI / Model training switch selects (kept in the
    browser; GenAI, the traces overview, until it is clicked), not on its ``mlflow.experimentKind`` tag: the link
    carries ``workflowType=machine_learning``, which selects the runs view. For an http(s) tracking URI the UI is
    the server's; otherwise ``mlflow ui`` on 127.0.0.1:5000 for the store (``hint``: how to start it, after the
    link; a sweep's jobs leave it out, their sweep's line has it). It opens the chart view on the shared view
    :func:`shared_view_state` (``viewStateShareKey``). A single run prints it too, not its run's page (which has no
    chart of the bound beside what it bounds): there the run is among the runs drawn, in its colour (MLflow 3.17
    drops the shared view when the address also carries a ``searchFilter``, so the view cannot be narrowed to it).
    """
    remote = uri.startswith(("http://", "https://"))
    base = uri.rstrip("/") if remote else "http://127.0.0.1:5000"
    link = (f"{base}/#/experiments/{experiment}/runs?workflowType=machine_learning"
            f"&viewStateShareKey={SHARED_VIEW_KEY}&compareRunsMode=CHART")
    return link if remote or not hint else \
        f"{link} (after: mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000)"


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
    """One MLflow run: params, tags, batched metrics and artifacts, kept through tracking-server outages.

    Metrics are buffered and sent in batches of at most 1000 points, at the latest every
    ``flush_seconds``, so what was logged before a failure is kept. With an http(s) tracking URI a
    call that fails (server gone) does not fail the run: metric points stay in a local buffer
    (at most ``max_buffer``; older points spill to ``spill_dir/unsent_metrics.jsonl``), other calls
    (tags, artifacts) queue in order, and everything is retried with exponential backoff (1 s to
    30 s) and flushed when the server is back. If it is still away when the run ends (after
    ``end_grace`` seconds of retries), the buffer is written to ``spill_dir/unsent_metrics.jsonl``
    with the command that imports it.
    """

    def __init__(self, uri: str, experiment: str, run_name: str, parent_run_id: str | None = None,
                 tags: dict | None = None, flush_seconds: float = 2.0, spill_dir=None, max_buffer: int = 200_000,
                 end_grace: float = 60.0):
        self._setup(uri, flush_seconds, spill_dir, max_buffer, end_grace)
        self.experiment_id = experiment_id(self.client, experiment, uri)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[PARENT_RUN_TAG] = parent_run_id
        self.run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
        self.run_id = self.run.info.run_id

    def _setup(self, uri, flush_seconds, spill_dir, max_buffer, end_grace):
        self.uri = uri
        self.remote = uri.startswith(("http://", "https://"))
        if self.remote:   # fail fast per call; this class does the retrying (MLflow's own would block for minutes)
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        self.client = client_for(uri)
        self.flush_seconds, self.max_buffer, self.end_grace = flush_seconds, int(max_buffer), float(end_grace)
        self.spill_path = Path(spill_dir or ".") / "unsent_metrics.jsonl"
        self._buffer, self._ops, self._last_flush = [], [], time.monotonic()
        self._retry_at, self._backoff, self.outages = 0.0, 1.0, 0
        self._truncated = {}   # params stored cut: full key -> full value

    @classmethod
    def attach(cls, uri: str, run_id: str, flush_seconds: float = 2.0, spill_dir=None) -> "RunLogger":
        """Continue an existing run (``resume=<run_id>``): mark it RUNNING again and log into it."""
        self = cls.__new__(cls)
        self._setup(uri, flush_seconds, spill_dir, 200_000, 60.0)
        self.run = self.client.get_run(run_id)
        self.run_id, self.experiment_id = run_id, self.run.info.experiment_id
        self.client.update_run(run_id, status="RUNNING")
        return self

    # -- outage handling --------------------------------------------------------------
    def _outage(self, exc) -> None:
        if not self.remote:
            raise exc
        if self._retry_at == 0.0:
            self.outages += 1
            log.warning("tracking server %s unreachable (%s); keeping metrics locally and retrying", self.uri,
                        str(exc).splitlines()[0][:200])
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(30.0, self._backoff * 2)

    def _do(self, op) -> None:
        """Run a non-metric call now, or queue it behind earlier ones while the server is away."""
        if self._ops or self._retry_at:
            self._ops.append(op)
            self.flush()
            return
        try:
            op()
        except Exception as exc:  # noqa: BLE001 - any failure of a remote call is treated as an outage
            self._ops.append(op)
            self._outage(exc)

    def flush(self, force: bool = False) -> bool:
        """Send queued calls and buffered metrics; False if the server is (still) away."""
        if not force and self._retry_at and time.monotonic() < self._retry_at:
            return False
        try:
            while self._ops:
                self._ops[0]()
                self._ops.pop(0)
            while self._buffer:
                batch = self._buffer[:MAX_METRICS]
                self.client.log_batch_plain(self.run_id, metrics=batch)
                del self._buffer[:len(batch)]
        except Exception as exc:  # noqa: BLE001
            self._outage(exc)
            return False
        if self._retry_at:
            log.warning("tracking server %s is back; buffered metrics sent", self.uri)
        self._retry_at, self._backoff, self._last_flush = 0.0, 1.0, time.monotonic()
        return True

    def _spill(self, points) -> None:
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.spill_path, "a") as fh:
            for key, value, timestamp, step in points:
                fh.write(json.dumps({"run_id": self.run_id, "key": key, "value": value, "timestamp": timestamp,
                                     "step": step}) + "\n")

    # -- logging ----------------------------------------------------------------------
    def log_artifact(self, path) -> None:
        self._do(lambda: self.client.log_artifact(self.run_id, str(path)))

    def log_params(self, params: dict) -> None:
        """Log params (values as ``str``). MLflow keeps at most 6000 characters of a value (250 of a key): a longer
        one is stored cut, its full key is listed in the tag ``truncated_params`` (comma-separated, with those of
        earlier calls) and its full value kept in the artifact ``truncated_params.json`` ({key: value})."""
        params = {str(k): str(v) for k, v in params.items()}
        long = {k: v for k, v in params.items() if len(v) > MAX_PARAM_VALUE or len(k) > MAX_KEY}
        items = [(k[:MAX_KEY], v[:MAX_PARAM_VALUE]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS):   # queued like tags while a tracking server is away
            chunk = items[i:i + MAX_PARAMS]
            self._do(lambda chunk=chunk: self.client.log_batch_plain(self.run_id, params=chunk))
        if long:
            self._truncated.update(long)
            self.log_dict(self._truncated, "truncated_params.json")
            self.set_tags({"truncated_params": ",".join(self._truncated)})

    def set_tags(self, tags: dict) -> None:
        """Set tags (values as ``str``). MLflow keeps at most 8000 characters of a tag value: a longer one (a long
        error message) is cut and ends with ``... [cut: <length> characters]``, so the cut shows."""
        items = [(str(k), _cut(str(v), MAX_TAG_VALUE)) for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS):
            chunk = items[i:i + MAX_PARAMS]
            self._do(lambda chunk=chunk: self.client.log_batch_plain(self.run_id, tags=chunk))

    def log_metrics(self, metrics: dict, step: int) -> None:
        """Queue metrics at ``step``; NaN/inf values are skipped (MLflow cannot plot them)."""
        ts = int(time.time() * 1000)
        self._buffer.extend((k, float(v), ts, int(step)) for k, v in metrics.items()
                            if v is not None and math.isfinite(float(v)))
        if len(self._buffer) > self.max_buffer:   # bounded: the oldest points go to disk
            overflow = len(self._buffer) - self.max_buffer
            self._spill(self._buffer[:overflow])
            del self._buffer[:overflow]
        if len(self._buffer) >= MAX_METRICS or time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush()

    def log_text(self, text: str, name: str) -> None:
        self._do(lambda: self.client.log_text(self.run_id, text, name))

    def log_dataset(self, name: str, digest: str, source: str, profile: dict) -> None:
        """The run's data set as MLflow's dataset input (:meth:`pipeline._store.Store.log_dataset`)."""
        self._do(lambda: self.client.log_dataset(self.run_id, name, digest, source, profile))

    def log_dict(self, obj, name: str) -> None:
        self.log_text(json.dumps(obj, indent=2, default=str), name)

    def end(self, status: str = "FINISHED") -> bool:
        """Flush everything, then mark the run (retrying up to ``end_grace`` seconds through an outage).

        If the server stays away, the unsent metric points are written to ``spill_path`` and the
        command that imports them is logged.

        Returns
        -------
        bool
            True: the store holds the run as ``status``; False: the server stayed away (the store still holds it
            RUNNING until the spilled file is imported, which sets ``status``).
        """
        deadline = time.monotonic() + (self.end_grace if self.remote else 0.0)
        while True:
            if self.flush(force=True):
                try:
                    self.client.set_terminated(self.run_id, status=status)
                    return True
                except Exception as exc:  # noqa: BLE001
                    self._outage(exc)
            if time.monotonic() >= deadline:
                break
            time.sleep(min(self._backoff, max(0.0, deadline - time.monotonic())))
        self._spill(self._buffer)
        self._buffer = []
        with open(self.spill_path, "a") as fh:   # the import sets the status the run ended with
            fh.write(json.dumps({"run_id": self.run_id, "status": status}) + "\n")
        log.error("tracking server %s still unreachable: %d calls not sent; metric points written to %s. "
                  "Import them later with: python -m pipeline.tracking import %s --uri %s "
                  "(it also sets the run's status, %s; artifacts stay in the Hydra run dir)", self.uri, len(self._ops), self.spill_path,
                  self.spill_path, self.uri, status)
        return False


def main(argv=None) -> None:
    """``python -m pipeline.tracking import FILE --uri URI``: send the metric points a run could not send."""
    from .errors import ArgumentParser, console

    parser = ArgumentParser(prog="python -m pipeline.tracking",
                            description="Import metric points a run could not send (unsent_metrics.jsonl).")
    parser.add_argument("command", choices=["import"])
    parser.add_argument("file")
    parser.add_argument("--uri", required=True, help="the MLflow tracking URI")
    args = parser.parse_args(argv)

    def body():
        if not Path(args.file).is_file():
            raise ConfigError("file", f"The 'file' parameter must be an existing unsent_metrics.jsonl file; got "
                                      f"{args.file!r}.")
        check_reachable(args.uri, key="--uri", must_exist=True)
        print(f"imported {import_metrics(args.file, args.uri)} metric points")

    console("python -m pipeline.tracking", body)


if __name__ == "__main__":   # python -m pipeline.tracking import FILE --uri URI (the command a spilled run prints)
    main()
