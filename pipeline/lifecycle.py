"""The lifecycle of one MLflow run: its name, its start (or its resume from a checkpoint), its checkpoints, the
signals that stop it, and the line it ends with.

- start: :func:`start_run` makes the run (tags that place it in its sweep) or, with ``resume=<run id>``, attaches
  to the interrupted one (:func:`load_resume`: its stored config and last checkpoint) and says from which
  iteration it continues;
- checkpoints: :func:`checkpoint_saver` pickles each checkpoint beside the job and uploads it;
- metrics: :class:`MetricsLog` logs each record once per step (a resumed run replays the steps between its
  checkpoint and the interruption: they were logged already), its ``wall_s`` continuing where it stopped;
- signals: SIGINT and SIGTERM end the run KILLED (:func:`stop_on_signals`), at the end of an iteration;
- the end: :func:`end_line` prints the run id, its status and the store, for a KILLED run the resume command.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import pickle
import shlex
import signal
import sys
import threading
from pathlib import Path

from isparse.errors import ConfigError, stage
from isparse.theory.bound import source_tag

from .jobenv import PARENT_ENV, SWEEP_WORKER_ENV, SWEPT_ENV, draws_figure, job_env
from .tracking import CHECKPOINT, RunLogger, client_for, ui_link

log = logging.getLogger("isparse")


# -- names ---------------------------------------------------------------------------------------------------------
def run_name(job, setup, swept: list[str] | None = None) -> str:
    """``tracking.run_name``, or the swept keys' values first (MLflow's runs table cuts names at ~20 characters),
    then ``n<n>-b<b>-tau<tau>-g<multiplier>[<rule>]-s<seed>-<algorithm>[-<changed>]-<data>``, e.g.
    ``n16-b8-tau0.0625-g1-s0-isega-a9a``, where ``<changed>`` are the ``messages.*`` and method keys that differ from
    their defaults (``codecnatural7-downlinknatural7``, ``rho16``) and ``<data>`` is the data's
    ``display_name()`` (``data.title``, a file's stem). Of the swept keys, those with a short form (workers.n, blocks.size, tau,
    step.multiplier, step.rule, seed) come first, then the others (an arm by its bare name), each group in the
    sweep's order: ``algorithm=isega,ibcd workers.n=4,16 blocks.size=1,8`` gives ``n4-b1-isega-tau0.25-...``,
    ``+arm=isega,gd_whole data=a1a,w1a workers.n=10,100`` gives ``n100-gd_whole-w1a-...``.

    ``swept``: the keys the sweep varies (default: the sweep's, ``$ISPARSE_SWEPT_KEYS``)."""
    if job.tracking.run_name:
        return job.tracking.run_name
    method = setup.method
    rule = "" if job.step.rule == "theory" else job.step.rule
    parts = {"workers.n": f"n{method.n}", "blocks.size": f"b{job.blocks.size}", "tau": f"tau{method.tau:.4g}",
             "step.multiplier": f"g{job.step.multiplier:g}{rule}", "seed": f"s{job.seed}",
             "algorithm": method.name, **_changed(job), "data": job.data.display_name()}
    parts["step.rule"] = parts["step.multiplier"]
    swept = (job_env(SWEPT_ENV) or "").split(",") if swept is None else swept
    first = []
    for key in sorted((k for k in swept if k), key=lambda k: k not in parts or k in ("algorithm", "data")):
        # a swept file, glob or title: the data's name, not the path
        part = parts["data"] if key in ("data.path", "data.glob", "data.title") else parts.get(key) or _part(job, key)
        if part and part not in first:
            first.append(part)
    rest = [p for k, p in parts.items() if k != "step.rule" and p not in first]
    return "-".join(first + rest)


def _changed(job) -> dict:
    """{key: its part} of the ``messages.*`` keys (codec, downlink, aggregation, a codec's own keys) and the
    method's options (``algorithm.*``) that differ from their defaults: two runs that differ there differ in name."""
    out = {}
    for section in ("messages", "algorithm"):
        node = getattr(job, section, None)
        if not hasattr(node, "to_dict"):
            continue
        defaults = type(node)(name=node.name).to_dict() if section == "algorithm" else type(node)().to_dict()
        for key, value in node.to_dict().items():
            if key in ("name", "module") or value == defaults.get(key):
                continue
            out[f"{section}.{key}"] = _part(job, f"{section}.{key}")
    return out


def _part(job, key: str) -> str | None:
    """``<last part of key><value>`` of a swept key without a short form (``lam0.01``, ``rho16``), an arm by its
    name (``isgd_n10``)."""
    if key == "arm":
        return str(job.compare.arm) if job.compare.arm else None
    node = job
    for part in key.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    value = f"{node:g}" if isinstance(node, float) else str(node)
    return f"{key.rsplit('.', 1)[-1]}{value}"


#: the colours of a sweep's runs in the MLflow UI's charts, by job number (the run tag ``mlflow.runColor``, which the
#: UI reads as the run's colour; its own colours are a hash of the run's id, so two jobs of a sweep may share one):
#: Tableau's 10, then their light tints
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
               "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
               "#dbdb8d", "#9edae5")


def sweep_tags() -> dict:
    """The tags that place a run in its sweep: ``sweep_job`` (Hydra's job number), ``sweep_worker`` (the Dask
    worker that ran it, with hydra/launcher=dask) and ``mlflow.runColor`` (:data:`RUN_COLOURS` by job number: the
    jobs of a sweep of up to 20 have 20 colours in the UI's charts)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    tags = {}
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        with contextlib.suppress(Exception):
            num = int(HydraConfig.get().job.num)
            tags["sweep_job"] = str(num)   # a tracking server takes strings only
            tags["mlflow.runColor"] = RUN_COLOURS[num % len(RUN_COLOURS)]
    if job_env(SWEEP_WORKER_ENV):
        tags["sweep_worker"] = job_env(SWEEP_WORKER_ENV)
    return tags


# -- start and resume ----------------------------------------------------------------------------------------------
def start_run(job, setup, name: str, overrides: list[str], outdir: Path, checkpoint=None) -> RunLogger:
    """The job's MLflow run: a new one (a child of the sweep's parent run, if any), or the interrupted run
    ``job.resume`` marked RUNNING again. Logs the run's start line (its id, name, store and UI link)."""
    uri = job.tracking.uri
    if checkpoint is not None:
        logger = RunLogger.attach(uri, job.resume, spill_dir=outdir)
        logger.set_tags({"resumed_from_iteration": checkpoint.t})
        with contextlib.suppress(Exception):   # the interruption's reason no longer describes the run
            logger.client.delete_tag(logger.run_id, "error")
        log.info("resuming MLflow run %s (%s) from iteration %d, its last checkpoint; in the MLflow UI: %s",
                 logger.run_id, logger.run.info.run_name, checkpoint.t,
                 ui_link(uri, logger.experiment_id))
        return logger
    bound = setup.bound
    logger = RunLogger(uri, job.tracking.experiment, name, parent_run_id=job_env(PARENT_ENV),
                       tags={"algorithm": setup.method.name, "data": job.data.display_name(), "engine": job.engine,
                             "bound_theorem": bound.theorem, "bound_applicable": str(bound.applicable).lower(),
                             "bound_quantity": bound.quantity, "bound_source": source_tag(bound),
                             **({"bound_derivation": bound.derivation}
                                if bound.derivation and bound.applicable else {}),
                             "overrides": " ".join(overrides), **sweep_tags(), **source_tags()},
                       spill_dir=outdir)
    in_sweep = bool(job_env(PARENT_ENV))   # the sweep's own line says how to open the UI, once
    log.info("MLflow run %s (%s) in %s; in the MLflow UI: %s", logger.run_id, name, uri,
             ui_link(uri, logger.experiment_id, hint=not in_sweep))
    return logger


#: the packages whose versions a run records (tag ``isparse.versions``)
VERSIONED = ("isparse", "numpy", "scipy", "scikit-learn", "dask", "distributed", "mlflow", "hydra-core")


@functools.lru_cache(maxsize=1)
def source_tags() -> dict:
    """MLflow's tags of what produced a run (the UI's Source and Version columns), computed once per process.

    ``mlflow.source.type`` LOCAL, ``mlflow.source.name`` the command (``isparse-run``), ``mlflow.user``; where the
    package runs from a git checkout, ``mlflow.source.git.commit`` (its HEAD), ``mlflow.source.git.repoURL`` (its
    ``origin``, if any) and ``isparse.git_dirty`` (true: files differ from that commit); and ``isparse.versions``,
    the installed versions of :data:`VERSIONED` (``isparse 0.1.0, numpy 2.1.3, ...``).
    """
    import getpass
    import subprocess
    from importlib import metadata

    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": Path(sys.argv[0]).name or "python"}
    with contextlib.suppress(Exception):
        tags["mlflow.user"] = getpass.getuser()
    root = Path(__file__).resolve().parent.parent

    def git(*args):
        with contextlib.suppress(Exception):
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
            if proc.returncode == 0:
                return proc.stdout.strip()
        return None

    if (root / ".git").exists():
        commit = git("rev-parse", "HEAD")
        if commit:
            tags["mlflow.source.git.commit"] = commit
            tags["isparse.git_dirty"] = str(bool(git("status", "--porcelain", "--untracked-files=no"))).lower()
        origin = git("config", "--get", "remote.origin.url")
        if origin:
            tags["mlflow.source.git.repoURL"] = origin
    versions = []
    for name in VERSIONED:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{name} {metadata.version(name)}")
    tags["isparse.versions"] = ", ".join(versions)
    return tags


#: what a resumed run takes from this invocation (the rest comes from the run's stored config)
RESUME_KEYS = ("resume", "engine", "cluster", "tracking.uri", "progress", "paths", "hydra")


def load_resume(job, overrides: list[str], outdir, cls):
    """The stored config of run ``job.resume`` (with this invocation's engine, cluster, progress, paths and
    tracking URI) as a ``cls`` (the job's schema), and its last checkpoint (downloaded to ``outdir()``).

    Raises
    ------
    ConfigError
        (key ``resume``) an override other than :data:`RESUME_KEYS` (it would be ignored), a run that does not exist
        in ``tracking.uri``, has FINISHED, has no checkpoint or whose checkpoint is damaged (:func:`_read_checkpoint`).
    """
    import dataclasses

    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        if not any(key == k or key.startswith(k + ".") for k in RESUME_KEYS):
            raise ConfigError("resume", f"The 'resume' parameter continues a run with its stored config: only "
                                        f"engine, cluster.*, tracking.uri, progress and paths.* may be given with it; "
                                        f"got {override!r} (it would be ignored).")
    run_id, uri = job.resume, job.tracking.uri
    client = client_for(uri)
    try:
        status = client.get_run(run_id).info.status
    except Exception as exc:
        raise ConfigError("resume", f"The 'resume' parameter must be the id of a run in {uri} (the run id the "
                                    f"interrupted run printed, or the MLflow UI's Run ID); got {run_id!r}: "
                                    f"{_exc_text(exc)}.") from None
    if status == "FINISHED":
        raise ConfigError("resume", f"The 'resume' parameter must name a run that did not finish (KILLED, FAILED or "
                                    f"RUNNING); run {run_id!r} is FINISHED: nothing to resume.")
    import yaml

    try:   # (no download progress bars: pipeline._store sets MLflow's switch)
        stored = yaml.safe_load(Path(client.download_artifacts(run_id, "config.yaml", str(outdir()))).read_text())
        local = Path(client.download_artifacts(run_id, "checkpoint.pkl", str(outdir())))
    except Exception as exc:
        raise ConfigError("resume", f"The 'resume' parameter must name a run with a checkpoint (checkpoint.every "
                                    f"> 0 and at least that many iterations); {run_id!r} has none: "
                                    f"{_exc_text(exc)}") from None
    checkpoint = _read_checkpoint(local, run_id, client)
    here = {"engine": job.engine, "cluster": job.cluster, "progress": job.progress, "resume": job.resume,
            "paths": job.paths, "tracking": dataclasses.replace(cls.from_dict(stored).tracking, uri=uri)}
    return dataclasses.replace(cls.from_dict(stored), **here), checkpoint


def _exc_text(exc: BaseException) -> str:
    """An exception's message on one line (MLflow's ``message``, cut to 300 characters), or its class's name."""
    return " ".join(str(getattr(exc, "message", None) or exc).split())[:300] or type(exc).__name__


def _read_checkpoint(local: Path, run_id: str, client):
    """The :class:`~isparse.engines.loop.Checkpoint` downloaded to ``local`` (run ``run_id``'s ``checkpoint.pkl``).

    Raises
    ------
    ConfigError
        (key ``resume``) the file cannot be unpickled (truncated, empty) or holds no checkpoint: one line naming the
        artifact and what to do; the download is removed.
    """
    from isparse.engines.loop import Checkpoint

    try:
        with open(local, "rb") as fh:
            checkpoint = pickle.load(fh)
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"it holds a {type(checkpoint).__name__}, not a Checkpoint")
    except Exception as exc:  # noqa: BLE001 - whatever unpickling a damaged file raises
        size = local.stat().st_size if local.is_file() else 0
        with contextlib.suppress(OSError):
            local.unlink()
        where = "checkpoint.pkl"
        with contextlib.suppress(Exception):
            where = f"{client.get_run(run_id).info.artifact_uri}/checkpoint.pkl"
        why = " ".join(str(exc).split())
        raise ConfigError("resume", f"The 'resume' parameter names run {run_id!r}, whose checkpoint {where} is "
                                    f"damaged ({size} bytes; {type(exc).__name__}" + (f": {why}" if why else "")
                          + "): it cannot be resumed; start the run again without resume= (what it logged stays in "
                            "that run), or resume another run.") from None
    return checkpoint


def check_resumed_data(checkpoint, current: dict | None, run_id: str, download: Path | None = None) -> None:
    """Refuse to resume on data other than the checkpoint's: the run would finish on a mixture of two data sets.

    ``current``: what this invocation would read (``DataSource.fingerprint()``, None: no file); ``run_id``: the run
    resumed. A checkpoint that records nothing (written before the record existed) is resumed with a one-line note.
    ``download``: the checkpoint's downloaded copy, removed when the resume is refused (the run is left as it is).

    Raises
    ------
    ConfigError
        (key ``resume``) a data file whose size or SHA-256 differs from the checkpoint's record, naming the file,
        the recorded and current size and hash prefix.
    """
    try:
        _compare_data(checkpoint, current, run_id)
    except ConfigError:
        if download is not None:
            with contextlib.suppress(OSError):
                download.unlink()
        raise


def _compare_data(checkpoint, current: dict | None, run_id: str) -> None:
    recorded = getattr(checkpoint, "data_files", None)
    if recorded is None:
        log.info("the checkpoint of iteration %d records no data file size and hash (written before they were "
                 "recorded): the data is not compared with what the interrupted run read", checkpoint.t)
        return
    now = [current] if current is not None else []
    for was, is_ in zip(recorded, now):
        if (was["bytes"], was["sha256"]) != (is_["bytes"], is_["sha256"]):
            raise ConfigError("resume", f"The 'resume' parameter names run {run_id!r}, whose data changed since its "
                                        f"checkpoint: {is_['file']} had {was['bytes']} bytes, sha256 "
                                        f"{was['sha256'][:12]}... and has {is_['bytes']} bytes, sha256 "
                                        f"{is_['sha256'][:12]}... now; a resume would mix two data sets: restore the "
                                        f"file, or start a new run without resume=.")
    if len(recorded) != len(now):
        raise ConfigError("resume", f"The 'resume' parameter names run {run_id!r}, which read "
                                    f"{', '.join(r['file'] for r in recorded) or 'no data file'}; this resume would "
                                    f"read {', '.join(r['file'] for r in now) or 'no data file'}: restore the data, "
                                    f"or start a new run without resume=.")


def logged_until(logger) -> tuple[int, float | None]:
    """(the last step logged of ``dist_sq``, the ``wall_s`` logged at it): what a resumed run has logged already
    ((-1, None) for a new run)."""
    with contextlib.suppress(Exception):
        dist = logger.client.get_metric_history(logger.run_id, "dist_sq")
        if dist:
            last = max(m.step for m in dist)
            wall = [m.value for m in logger.client.get_metric_history(logger.run_id, "wall_s") if m.step == last]
            return last, (wall[-1] if wall else None)
    return -1, None


class MetricsLog:
    """The master loop's observer: each record's metrics (``metrics(rec)``) to MLflow, once per step.

    A resumed run computes again the steps between its checkpoint and the interruption; those up to
    ``skip_until`` were logged already and are not logged again, and the later ``wall_s`` continue from the one
    logged at ``skip_until`` (``wall_at``), so the curve neither repeats nor goes back."""

    def __init__(self, logger, metrics, skip_until: int = -1, wall_at: float | None = None):
        self.logger, self.metrics, self.skip_until, self.wall_at = logger, metrics, skip_until, wall_at
        self.shift = 0.0

    def __call__(self, rec: dict) -> None:
        if rec["step"] <= self.skip_until:
            if rec["step"] == self.skip_until and self.wall_at is not None:
                self.shift = self.wall_at - rec["wall_s"]
            return
        out = self.metrics(rec)
        if self.shift:
            out["wall_s"] = out["wall_s"] + self.shift
        self.logger.log_metrics(out, rec["step"])

    def logs(self, step: int) -> bool:
        """Whether a value at ``step`` is new (not logged before the resume)."""
        return step > self.skip_until


def checkpoint_saver(logger, outdir: Path, fresh=lambda step: True, data_files: list | None = None):
    """The loop's ``on_checkpoint``: pickle the checkpoint (it holds the states as values: the next steps do not
    write into them) to ``outdir/checkpoint.pkl`` atomically, then upload it, metrics first so nothing logged lags
    it; its ``checkpoint/iteration`` metric (:data:`pipeline.tracking.CHECKPOINT`) only where ``fresh(step)`` (not
    again for a replayed step). The
    checkpoint records ``data_files`` (what the run read: :func:`check_resumed_data` compares it on resume).

    A write the file system refuses (no space, a quota, read-only, an I/O error) raises :func:`storage_error`'s
    one-line ConfigError, the partial file removed."""
    uploaded = []   # the iterations of the checkpoints uploaded

    def save(ck):
        with stage("checkpoint"):
            _save(ck)

    def _save(ck):
        ck.data_files = data_files
        tmp, path = outdir / "checkpoint.pkl.tmp", outdir / "checkpoint.pkl"
        try:
            with open(tmp, "wb") as fh:
                pickle.dump(ck, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            error = storage_error(exc, tmp, logger.run_id, uploaded[-1] if uploaded else None)
            if error is exc:   # (not "raise exc from exc": a cycle of causes)
                raise
            raise error from exc
        logger.flush()
        logger.log_artifact(path)
        uploaded.append(ck.t)
        if fresh(ck.t):
            logger.log_metrics({CHECKPOINT: ck.t}, step=ck.t)

    return save


def _scheduler_answers(address: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Dask scheduler at ``address`` (``tcp://host:port``, ``tls://...``) opens."""
    import socket

    from distributed.comm.addressing import get_address_host_port

    try:
        host, port = get_address_host_port(address)
    except ValueError:   # not a network address (inproc://): nothing to tell
        return True
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def lost_cluster(job, pool, exc: BaseException, logger, overrides) -> ConfigError | None:
    """The error of a Dask run whose scheduler stopped answering (killed, its machine gone: every Dask worker is lost
    with it), as one line naming the scheduler's address, the key and how to continue the run from its last uploaded
    checkpoint; None for any other failure (the scheduler answers, or the error is the user's or an interrupt)."""
    from isparse.engines import DivergenceError
    from isparse.errors import DataError

    if job.engine != "dask" or isinstance(exc, (KeyboardInterrupt, ConfigError, DataError, DivergenceError)):
        return None
    client = getattr(pool, "client", None)
    address = getattr(getattr(client, "scheduler", None), "address", None)
    if not address or _scheduler_answers(address):
        return None
    kind = getattr(job.cluster, "kind", "local")
    key = "cluster.address" if kind == "address" else "cluster"
    then = _continue_from(_checkpoint_iteration(logger.client, logger.run_id), logger.run_id, overrides,
                          "start it again (or set cluster.address to a running one), then " if kind == "address"
                          else "")
    why = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return ConfigError(key, f"The Dask scheduler {address} ({key}) stopped answering mid-run and every Dask worker "
                            f"was lost with it ({why[:300]}{'...' if len(why) > 300 else ''}); {then}")


def _continue_from(checkpoint: int | None, run_id: str, overrides, before: str = "", after: str = "") -> str:
    """The end of a failed run's line: how to continue it from ``checkpoint`` (its last uploaded checkpoint's
    iteration; ``before``/``after`` around the command), or that it cannot be resumed (None)."""
    if checkpoint is None:
        return "the run cannot be resumed: no checkpoint was uploaded before; what was logged is kept"
    return f"{before}continue the run from iteration {checkpoint} with: {resume_command(run_id, overrides)}{after}"


#: what a file system says when it refuses a write that a user can do something about
_STORAGE_ERRNOS = ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG")


def storage_error(exc: OSError, path: Path, run_id: str, checkpoint: int | None) -> BaseException:
    """The error of a write of the run's own files (under ``paths.outputs``) that the file system refused, as one
    line: the file system's reason, the file, the key, what to do and how to continue the run (from ``checkpoint``,
    the iteration of its last uploaded checkpoint); ``exc`` itself for other errors."""
    import errno

    if errno.errorcode.get(exc.errno) not in _STORAGE_ERRNOS:
        return exc
    from ._typed import job_overrides

    then = _continue_from(checkpoint, run_id, job_overrides(), "then ",
                          " (paths.outputs set to the new place, if moved)")
    return ConfigError("paths.outputs", f"{os.strerror(exc.errno)} writing {path}, in the run's directory under "
                                         f"paths.outputs: free space there or set paths.outputs to another file "
                                         f"system; {then}")


# -- signals -------------------------------------------------------------------------------------------------------
class Stop:
    """The run's stop flag, set by SIGINT or SIGTERM; the master loop calls it every iteration.

    Attributes
    ----------
    signal : str or None
        The first signal received (``SIGINT``, ``SIGTERM``), None before.
    polling : bool
        True once the master loop has asked: from then on, until :meth:`done`, a first signal only sets the flag and
        the loop ends the run at the end of its iteration, outside any Dask call (a second one interrupts at once).
    """

    def __init__(self):
        self.signal, self.polling = None, False

    def __call__(self) -> bool:
        self.polling = True
        return self.signal is not None

    def done(self) -> None:
        """The loop is over: a signal now interrupts at once."""
        self.polling = False

    @contextlib.contextmanager
    def deferred(self):
        """Inside, a signal only sets the flag (a Dask cluster starting: interrupted there, it was left half made,
        and Dask's exit hook printed its failure); on a normal exit a signal received raises KeyboardInterrupt."""
        before, self.polling = self.polling, True
        try:
            yield
        finally:
            self.polling = before
        if self.signal is not None:
            raise KeyboardInterrupt(f"signal {self.signal}")


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT and SIGTERM end the run as KILLED. While the master loop runs, the first one sets the flag the loop
    checks every iteration (an interrupt raised inside a blocking Dask call would leave Dask's futures half done and
    its tornado callbacks failing); otherwise, or at the second one, the handler raises KeyboardInterrupt."""
    stop = Stop()

    def handler(signum, frame):
        first = stop.signal is None
        if first:
            stop.signal = signal.Signals(signum).name
        if first and stop.polling:
            return
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    def unraisable(info, previous=sys.unraisablehook):
        # the interrupt raised inside a callback that cannot raise (a gc callback of Dask's): the flag is set,
        # the loop stops at its first check; no "Exception ignored in ..." traceback
        if not (isinstance(info.exc_value, KeyboardInterrupt) and stop.signal):
            previous(info)

    installed = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            installed[sig] = signal.signal(sig, handler)
    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield stop
    finally:
        sys.unraisablehook = hook
        for sig, previous in installed.items():
            signal.signal(sig, previous)


# -- the end -------------------------------------------------------------------------------------------------------
#: the overrides a resumed run needs from the interrupted invocation: where the store is, engine and cluster
_RESUME_COMMAND_KEYS = ("paths.", "tracking.uri", "engine", "cluster", "+cluster", "++cluster")


def resume_command(run_id: str, overrides) -> str:
    """``isparse-run resume=<run_id>`` with the overrides of ``overrides`` (the interrupted invocation's, as typed)
    that say where the MLflow store is and which engine and cluster ran it, shell-quoted."""
    keep = [o for o in overrides if o.startswith(_RESUME_COMMAND_KEYS) and not o.startswith("resume=")]
    return " ".join(["isparse-run", f"resume={run_id}", *map(shlex.quote, keep)])


def _checkpoint_iteration(client, run_id):
    """The iteration of the run's last uploaded checkpoint (its metric ``checkpoint/iteration``; a run logged
    before 2026-12-04: ``checkpoint_iteration``), or None."""
    for key in (CHECKPOINT, "checkpoint_iteration"):
        with contextlib.suppress(Exception):
            history = client.get_metric_history(run_id, key)
            if history:
                return int(max(history, key=lambda m: m.step).value)
    return None


@contextlib.contextmanager
def end_line(job, end: dict, overrides: list[str], asynchronous: bool):
    """On exit (the cluster closed), one line: a FINISHED or KILLED run's id, status and store; for a KILLED run why,
    and the ``isparse-run resume=<run id>`` command (or why it cannot be resumed). A FAILED run's line is its error's
    (``pipeline.main``: the error and the run in one line). ``end`` is filled by the run: ``run_id``, ``uri``,
    ``status``, ``client`` and, if it raised, ``reason``."""
    try:
        yield
    finally:
        if end.get("run_id"):
            run_id, uri, status = end["run_id"], end["uri"], end.get("status", "FAILED")
            if end.get("stored") is False:   # the server never came back: it holds the run RUNNING
                log.error("MLflow run %s %s here, but %s still holds it RUNNING: the tracking server did not come "
                          "back; import the unsent metrics (the command above) to end it there", run_id, status, uri)
            elif status == "FINISHED":
                folder = end.get("outdir")
                figure = "convergence.png, " if draws_figure(job.tracking.figure) else ""
                where = "" if folder is None or job_env(PARENT_ENV) else \
                    f"; its folder {folder} ({figure}x_final.npy, the run's log)"
                log.info("MLflow run %s FINISHED in %s%s", run_id, uri, where)
            elif status == "KILLED":
                ck = _checkpoint_iteration(end["client"], run_id)
                if asynchronous:
                    how = "an asynchronous run cannot be resumed"
                elif ck is None:   # checkpoints off, or stopped before the loop's first iteration (which writes one)
                    why = ("checkpoint.every=0" if not job.checkpoint.every else
                           "it stopped before its first iteration")
                    how = f"it cannot be resumed: no checkpoint ({why}); what was logged is kept"
                else:
                    how = f"continue it from iteration {ck} with: {resume_command(run_id, overrides)}"
                log.warning("MLflow run %s KILLED (%s) in %s; %s", run_id, end.get("reason", "interrupted"), uri, how)


def warn_if_predicted_beyond(job, bound, r0: float, predicted: float) -> None:
    """A warning at start when the theorem's iteration count to ``tol`` (``predicted_iterations``) exceeds
    ``max_iter`` (not for ``tol=0``, which asks for all of ``max_iter``, nor when no bound applies: ``predicted``
    NaN). The count is an upper estimate: the run may still converge sooner, and the warning says so."""
    if not job.tol > 0 or not predicted > job.max_iter:
        return
    target, theorem = job.tol * r0, bound.theorem.split(";")[0].split(",")[0]
    if math.isfinite(predicted):
        why = f"predicted_iterations = {predicted:,.0f} ({theorem}) to reach tol={job.tol:g}"
    elif bound.neighbourhood >= target:
        why = (f"the bound ({theorem}) stays above tol * r_0 = {target:.3e} (its neighbourhood: "
               f"{bound.neighbourhood:.3e}): predicted_iterations = inf to reach tol={job.tol:g}")
    else:
        why = f"the bound ({theorem}) does not contract: predicted_iterations = inf to reach tol={job.tol:g}"
    # in a sweep an INFO line: the sweep's summary at its end says which jobs stopped at max_iter
    log.log(logging.INFO if job_env(PARENT_ENV) else logging.WARNING,
            "%s, more than max_iter=%d: the run may stop at max_iter without reaching tol (the theorem's count "
            "is an upper estimate: many runs converge sooner); raise max_iter (or tol) to be sure", why, job.max_iter)
