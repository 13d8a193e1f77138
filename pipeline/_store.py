"""The MLflow client of a process, and the helper process that holds it for ``isparse-run``.

MLflow's own import (``mlflow.tracking`` and its sqlite store: SQLAlchemy, Alembic) is most of a short run's fixed
cost: 1.5-3 s of a 1-iteration run here, against 0.2 s for the client's calls. ``isparse-run`` therefore starts,
as its first act, a helper process (``python -m pipeline._store``) that imports MLflow and then holds the run's
clients, while the job process composes and checks its config, reads its data and builds its run on the other
core; the job process never imports MLflow. ``--help`` and ``--cfg`` start no helper; after a config error the
helper, which got no call, is stopped at once (starting it only once the config is checked cost a 1-iteration
run 1.2 s of wall time: 6.1 s against 4.9 s, benchmark item 9). Calls go over a pipe in order: those that return
nothing (metrics, tags, artifacts) without waiting, the others (a run's creation, its end, queries) wait for the answer, which also carries the
error of any earlier call that failed. Results come back as plain objects with the attributes the pipeline reads
(``run.info.run_id``, ``run.data.tags``, ``metric.step``, ...), so unpickling them needs no MLflow either.

Only ``sqlite:///`` stores go through the helper (an ``http(s)://`` server's outages are handled by
``pipeline.tracking.RunLogger`` call by call, in the job process); a process that did not start one (the tests,
the report, a notebook, a parallel launcher's workers) uses MLflow in-process, through the same :class:`Store`.

The helper ignores SIGINT (a terminal's Ctrl-C reaches the whole process group: the job ends the run KILLED through
it) and exits when the job process closes the pipe or dies. If the helper dies (killed, out of memory), the job
process says so in one line and goes on with MLflow in-process: the calls the helper had not confirmed are made
again there (MLflow keeps one copy of a metric point logged twice), so the run loses nothing and ends as it would.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

#: MLflow accepts at most 1000 metrics and 100 params/tags per log_batch call.
MAX_METRICS, MAX_PARAMS = 1000, 100
#: methods of :class:`Store` whose result nothing waits for (sent without waiting for the helper's answer)
NO_ANSWER = frozenset({"log_batch_plain", "set_tag", "log_artifact", "log_text", "delete_tag", "update_run",
                       "set_experiment_tag", "prepare", "log_dataset"})
#: after this many calls sent without an answer, a ``ping`` waits for one: the calls kept for a replay stay few
SYNC_EVERY = 256

log = logging.getLogger("isparse")


class HelperGone(Exception):
    """The pipe to the helper broke: the helper process is gone."""


class Store:
    """An ``MlflowClient`` with the calls the pipeline makes, in plain data: ``log_batch_plain`` takes tuples (no
    MLflow entity is built by the caller) and every result is converted by :func:`plain`. Pickled, it is the
    unpickling process's own store of the same URI."""

    def __init__(self, client):
        self.client = client
        self.tracking_uri = client.tracking_uri

    def __reduce__(self):
        return (local_store, (self.tracking_uri,))

    def log_batch_plain(self, run_id, metrics=(), params=(), tags=()):
        """``log_batch`` of ``metrics`` (key, value, timestamp ms, step), ``params`` (key, value) and ``tags``."""
        from mlflow.entities import Metric, Param, RunTag

        self.client.log_batch(run_id, metrics=[Metric(*m) for m in metrics], params=[Param(*p) for p in params],
                              tags=[RunTag(*t) for t in tags], synchronous=True)

    def log_dataset(self, run_id, name: str, digest: str, source: str, profile: dict, context: str = "training"):
        """MLflow's dataset input of the run (``log_inputs``): the UI's Dataset column and the run's Inputs.

        ``name`` and ``digest`` (at most 36 characters: a content hash's prefix), ``source`` the file (or the
        generator) it was read from, ``profile`` its shape; the input's tag ``mlflow.data.context`` is ``context``.
        """
        import json

        from mlflow.entities import Dataset, DatasetInput, InputTag

        ds = Dataset(name=name, digest=digest[:36], source_type="local" if source.startswith("/") else "code",
                     source=json.dumps({"uri": source}), profile=json.dumps(profile))
        inputs = [DatasetInput(ds, tags=[InputTag("mlflow.data.context", context)])]
        try:
            self.client.log_inputs(run_id, datasets=inputs)
        except Exception as exc:  # noqa: BLE001 - MLflow's check-then-insert of the experiment's dataset row raced
            if "UNIQUE constraint failed: datasets" not in str(exc):   # another job's insert of the same data set:
                raise                                                  # the row is there now, and is linked
            self.client.log_inputs(run_id, datasets=inputs)

    def prepare(self):
        """Nothing: making the Store opened the store (the helper makes it ahead of the first real call)."""

    def ping(self):
        """Nothing, answered: the helper's answer confirms every call sent before it (:class:`Helper`)."""

    def __getattr__(self, name):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            return plain(method(*args, **kwargs))
        return call


def plain(obj):
    """``obj`` with MLflow's entities replaced by SimpleNamespaces of the attributes the pipeline reads."""
    kind = type(obj).__name__
    if kind == "Run":
        return SimpleNamespace(info=plain(obj.info), data=plain(obj.data))
    if kind == "RunInfo":
        return SimpleNamespace(**{k: getattr(obj, k) for k in ("run_id", "experiment_id", "status", "run_name",
                                                              "start_time", "end_time", "artifact_uri")})
    if kind == "RunData":
        return SimpleNamespace(tags=dict(obj.tags), params=dict(obj.params), metrics=dict(obj.metrics))
    if kind == "Experiment":
        return SimpleNamespace(experiment_id=obj.experiment_id, name=obj.name, tags=dict(obj.tags),
                               artifact_location=obj.artifact_location)
    if kind == "Metric":
        return SimpleNamespace(key=obj.key, value=obj.value, timestamp=obj.timestamp, step=obj.step)
    if kind == "FileInfo":
        return SimpleNamespace(path=obj.path, is_dir=obj.is_dir, file_size=obj.file_size)
    if isinstance(obj, list):
        return [plain(x) for x in obj]
    return obj


#: the stores of this process, one per tracking URI (making one opens the store)
_STORES: dict = {}
_STORES_LOCK = threading.Lock()


def local_store(uri: str) -> Store:
    """The :class:`Store` of ``uri`` in this process (made once, then reused by every job of a sweep run here).

    For a ``sqlite:///`` store, the store's schema is made (or migrated) while an exclusive lock on ``<db>.lock`` is
    held, so processes that open a fresh store at once (two sweeps started together, the jobs of a parallel
    launcher) wait for the first instead of racing on MLflow's migration (which failed the second with
    ``CommandError: Online migration expected to match one row`` and could leave the store unreadable). Stores on
    one host only: for several hosts use an ``mlflow server``. A store file deleted since its client was made (a
    test's temporary directory) gets a new client.
    """
    with _STORES_LOCK:
        db = uri[len("sqlite:///"):].split("?", 1)[0] if uri.startswith("sqlite:///") else ""
        store = _STORES.get(uri)
        if store is None or not (db in ("", ":memory:") or Path(db).exists()):
            _STORES[uri] = store = Store(_new_client(uri, db))
        return store


def client_for(uri: str):
    """The store client of ``uri`` for this process: the helper's (when ``isparse-run`` started one and ``uri`` is a
    sqlite store: :func:`helper_for`), else one in this process (:func:`local_store`, made once per store and
    process). Either is a :class:`Store`: MlflowClient's calls, results as plain objects."""
    return helper_for(uri) or local_store(uri)


def _new_client(uri: str, db: str):
    import logging
    import os

    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")   # a resume's downloads: no progress bars
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)   # "Creating initial MLflow database
    logging.getLogger("alembic").setLevel(logging.WARNING)                  # tables...": not the run's business
    if db in ("", ":memory:"):
        return MlflowClient(tracking_uri=uri)
    import fcntl

    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:   # MlflowClient opens the store when made: that creates or migrates its schema
            return MlflowClient(tracking_uri=uri)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- the helper process ------------------------------------------------------------------------------------------
class Helper:
    """The helper process and the pipe to it (one per job process; calls from several threads take turns)."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        # the file run as a script: importing the pipeline package (Hydra, the schema, isparse) is not the helper's
        # work; its directory (pipeline/) leaves sys.path first, so that its modules shadow no top-level name
        self.proc = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        from multiprocessing.connection import Connection

        self.conn = Connection(ours.detach())
        self.lock = threading.Lock()
        self.closed = False
        self.gone = False          # the helper died: calls run in this process
        self.unconfirmed = []      # (uri, name, args, kwargs) sent since the last answer, for a replay
        self.used = False          # a call was made: close() lets the helper finish them

    def call(self, uri, name, args, kwargs):
        """Send the call; wait for its answer unless ``name`` is in :data:`NO_ANSWER`. Raises the error of this call
        or of an earlier unanswered one. Once the helper is gone, the call runs in this process
        (:func:`local_store`)."""
        answer = name not in NO_ANSWER
        with self.lock:
            self.used = True
            if not self.gone:
                try:
                    ok, value = self._send(uri, name, args, kwargs, answer)
                except HelperGone as exc:
                    self._take_over(exc)
                else:
                    if not ok:
                        raise value
                    return value
        return getattr(local_store(uri), name)(*args, **kwargs)

    def _send(self, uri, name, args, kwargs, answer):
        """(ok, value) of the call; (True, None) for a call sent without waiting. Raises HelperGone."""
        try:
            self.conn.send((uri, name, args, kwargs, answer))
            if not answer:
                self.unconfirmed.append((uri, name, args, kwargs))
                if len(self.unconfirmed) < SYNC_EVERY:
                    return True, None
                self.conn.send((uri, "ping", (), {}, True))
            ok, value = self.conn.recv()
        except (OSError, EOFError) as exc:
            raise HelperGone(exc) from exc
        self.unconfirmed.clear()   # an answer: the helper did every call before it
        return (ok, value) if answer or not ok else (True, None)

    def _take_over(self, exc) -> None:
        """The helper died: one line, then the calls it had not confirmed, made again in this process."""
        self.gone = True
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        replay, self.unconfirmed = self.unconfirmed, []
        log.warning("the MLflow helper process (pid %d) %s (%s); this process logs the run from now on, the %d "
                    "calls it had not confirmed sent again", self.proc.pid, how, type(exc.__cause__).__name__,
                    len(replay))
        for uri, name, args, kwargs in replay:
            try:
                getattr(local_store(uri), name)(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - what the helper would have reported at the next answer
                log.warning("MLflow %s, sent again after the helper died, failed: %s: %s", name,
                            type(err).__name__, err)
        with contextlib.suppress(OSError):
            self.conn.close()

    def close(self):
        """Wait for every call sent to be done, then let the helper exit."""
        if self.closed or self.gone:
            self.closed = True
            return
        self.closed = True
        if not self.used:   # no call was made (a config error, a sweep that stopped at once): not waited for
            self.conn.close()
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            return
        try:
            with self.lock:
                try:
                    self.conn.send(None)
                    self.conn.recv()
                except (OSError, EOFError) as exc:
                    if self.unconfirmed:   # died before it did them
                        gone = HelperGone(exc)
                        gone.__cause__ = exc
                        self._take_over(gone)
                    return
                self.unconfirmed.clear()
        finally:
            self.conn.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class HelperStore:
    """A :class:`Store` in the helper: ``store.<method>(...)`` is that call of the helper's Store for ``uri``. Sent
    to another process (a parallel launcher pickles the sweep's callback with its run), it becomes that process's
    own :func:`local_store`."""

    def __init__(self, helper: Helper, uri: str):
        self.helper, self.tracking_uri = helper, uri

    def __reduce__(self):
        return (local_store, (self.tracking_uri,))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.helper.call(self.tracking_uri, name, args, kwargs)


_HELPER: list = []


def start_helper() -> None:
    """Start this process's helper (``isparse-run`` does, first, unless the command runs no job: ``--help``,
    ``--cfg``): from now on :func:`helper_for` hands sqlite stores to it. Closed at exit, after its calls are done;
    one that got no call (a config error) is stopped at once, without waiting for its import of MLflow."""
    if not _HELPER:
        _HELPER.append(Helper())
        atexit.register(_HELPER[0].close)


def helper_for(uri: str):
    """A :class:`HelperStore` for ``uri`` when this process has a helper and ``uri`` is a sqlite store, else None."""
    if _HELPER and not _HELPER[0].closed and uri.startswith("sqlite:///"):
        return HelperStore(_HELPER[0], uri)
    return None


def serve(fd: int) -> None:
    """The helper's loop: import MLflow, then run the calls that arrive, in order, until the pipe closes."""
    import signal
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    import mlflow.tracking  # noqa: F401 - the import this process exists to take off the job's path
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    pending = None   # the first error of a call nobody waits for: raised with the next answer
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            conn.send((True, None))
            return
        uri, name, args, kwargs, answer = msg
        try:
            value = getattr(local_store(uri), name)(*args, **kwargs)
            ok = True
        except Exception as exc:  # noqa: BLE001 - sent back to the job process
            ok, value = False, exc
        if not answer:
            if not ok and pending is None:
                pending = value
            continue
        if pending is not None:
            ok, value, pending = False, pending, None
        try:
            conn.send((ok, value))
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be pickled
            conn.send((False, RuntimeError(f"{name}: {type(exc).__name__}: {exc}")))


if __name__ == "__main__":
    sys.path.pop(0)   # pipeline/ itself, put first by running this file as a script
    serve(int(sys.argv[1]))
