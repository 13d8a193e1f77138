"""What a job of a sweep knows of its sweep: the parent run id, the keys the sweep varies, the overrides as typed and
the Dask worker running it (:func:`job_env`), and the tag a failed job's run carries (:data:`FAILURE_TAG`).

A leaf module (no import of the pipeline): the sweep's callback (:mod:`pipeline.sweep`) and the Dask launcher set
these values, a job (:mod:`pipeline.lifecycle`, :mod:`pipeline._typed`, :mod:`pipeline.main`) reads them.
"""

from __future__ import annotations

import contextlib
import os
import threading

#: the sweep's MLflow parent run id (not ``MLFLOW_RUN_ID``, which would make every job reuse one run)
PARENT_ENV = "ISPARSE_PARENT_RUN_ID"
#: set by hydra/launcher=dask, while a job runs, to the Dask worker's address: the job's run gets the tag sweep_worker
SWEEP_WORKER_ENV = "ISPARSE_SWEEP_WORKER"
#: the keys the sweep varies, comma-separated (a job's run name starts with them)
SWEPT_ENV = "ISPARSE_SWEPT_KEYS"
#: the sweep's command-line overrides as typed, as a JSON list (a job's string keys get the text as typed, not the
#: sweeper's rendering of the value: pipeline._typed.job_overrides)
TYPED_ENV = "ISPARSE_TYPED_OVERRIDES"
#: the tag of a FAILED run saying whether the failure was bad input (``input``) or an error (``error``)
FAILURE_TAG = "failure"
#: values of the variables above for the job running in this thread (hydra/launcher=dask runs several jobs, possibly
#: of several sweeps, in the threads of one Dask worker: os.environ is the process's, shared by all)
_JOB_ENV = threading.local()


def job_env(key: str) -> str | None:
    """``key`` (PARENT_ENV, SWEPT_ENV, TYPED_ENV or SWEEP_WORKER_ENV) for the job running in this thread: the value set by
    :func:`job_env_set` in this thread, else ``os.environ[key]`` (the basic and joblib launchers), else None."""
    values = getattr(_JOB_ENV, "values", None) or {}
    return values.get(key) or os.environ.get(key) or None


class job_env_set:
    """Within, :func:`job_env` of this thread returns ``values`` (a None value: os.environ's)."""

    def __init__(self, values: dict):
        self.values = {k: v for k, v in values.items() if v is not None}

    def __enter__(self):
        self.saved = getattr(_JOB_ENV, "values", None)
        _JOB_ENV.values = self.values
        return self

    def __exit__(self, *exc):
        _JOB_ENV.values = self.saved
        return False


#: held by :func:`environ`: the environment is the process's, and the Dask launcher runs jobs (each of which may start
#: a LocalCluster) in several threads of one process
_ENVIRON_LOCK = threading.RLock()


@contextlib.contextmanager
def environ(updates: dict):
    """This process's environment with ``updates`` set (a None value leaves its key as it is), put back on exit; one
    thread at a time (another thread's ``environ`` waits until this one has put the environment back)."""
    with _ENVIRON_LOCK:
        saved = {key: os.environ.get(key) for key in updates}
        os.environ.update({key: value for key, value in updates.items() if value is not None})
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def draws_figure(figure: str) -> bool:
    """Whether this job draws its convergence.png (``tracking.figure``): ``auto`` for a single run only. A
    multirun's jobs leave it to ``isparse-report``, which draws the sweep's figures from the store once: at about
    1 s of CPU a figure (matplotlib's import and the drawing), a 1,000-job sweep would spend 17 CPU minutes on
    pictures nobody opens one by one."""
    return figure == "always" or (figure == "auto" and not job_env(PARENT_ENV))
