"""What lets several Hydra jobs run at once in the threads of one process (``hydra/launcher=dask``, one job per Dask
worker thread): Hydra keeps a job's config in a process-wide singleton (``HydraConfig``) and sets its job log up by
reconfiguring the root logger, both made for one job per process. Here each thread has its own ``HydraConfig`` and
the job's log files receive the records of the job's own thread only; the console handlers are the process's, shared.
"""

from __future__ import annotations

import logging
import logging.config
import threading
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import setup_globals
from omegaconf import OmegaConf

_LOCK = threading.Lock()
_STATE: dict = {"ready": False, "logging": False}


class ThreadHydraConfig(HydraConfig):
    """``HydraConfig`` whose ``cfg`` (the job's ``hydra`` node) is per thread: ``HydraConfig.get()`` in a job's
    thread returns that job's."""

    _local = threading.local()

    @property
    def cfg(self):  # type: ignore[override]
        return getattr(self._local, "cfg", None)

    @cfg.setter
    def cfg(self, value) -> None:
        self._local.cfg = value


class _ByThread(logging.Handler):
    """A root handler passing each record to the handlers registered for the thread that made it."""

    def __init__(self) -> None:
        super().__init__()
        self.by_thread: dict[int, list[logging.Handler]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        for handler in self.by_thread.get(record.thread, ()):
            if record.levelno >= handler.level:
                handler.handle(record)


_ROUTER = _ByThread()


def prepare_process(singleton_state: dict) -> None:
    """Once per process: Hydra's globals and the launching process's singletons (``singleton_state``), with a
    per-thread ``HydraConfig``. Later calls (later jobs, other sweeps) leave the singletons alone: a job may be
    running in another thread."""
    with _LOCK:
        if _STATE["ready"]:
            return
        setup_globals()
        Singleton.set_state(singleton_state)
        Singleton._instances[HydraConfig] = ThreadHydraConfig()
        _STATE["ready"] = True


def _split(log_conf: dict) -> tuple[dict, dict]:
    """(the config without its file handlers, the file handlers' configs) of a ``hydra.job_logging`` dict."""
    handlers = log_conf.get("handlers") or {}
    files = {name: h for name, h in handlers.items() if "filename" in h}

    def without_files(node: dict) -> dict:
        return dict(node, handlers=[h for h in node["handlers"] if h not in files]) if "handlers" in node else node

    shared = dict(log_conf, handlers={k: v for k, v in handlers.items() if k not in files},
                  loggers={name: without_files(lg) for name, lg in (log_conf.get("loggers") or {}).items()})
    if shared.get("root"):
        shared["root"] = without_files(shared["root"])
    return shared, files


def _file_handler(conf: dict, formatters: dict) -> logging.Handler:
    """One file handler from its ``logging.config`` dict (``class``, ``filename``, ``formatter``, ``level``, and its
    class's own keywords)."""
    from hydra.utils import get_class

    kwargs = {k: v for k, v in conf.items() if k not in ("class", "formatter", "level", "filters", "()")}
    handler = get_class(conf.get("class", "logging.FileHandler"))(**kwargs)
    fmt = formatters.get(conf.get("formatter"), {}) if conf.get("formatter") else {}
    handler.setFormatter(logging.Formatter(fmt.get("format"), fmt.get("datefmt"), fmt.get("style", "%")))
    if conf.get("level") is not None:
        handler.setLevel(conf["level"])
    return handler


class job_log:
    """Within, the records of this thread also go to the job's log files (``hydra.job_logging``'s handlers with a
    ``filename``, resolved with this thread's ``HydraConfig``, as Hydra's ``configure_log`` would); the first job of
    the process configures the rest of ``hydra.job_logging`` (levels, the console) for the process."""

    def __enter__(self):
        log_conf: dict[str, Any] = OmegaConf.to_container(HydraConfig.instance().cfg.hydra.job_logging, resolve=True)
        shared, files = _split(log_conf)
        with _LOCK:
            if not _STATE["logging"]:
                logging.config.dictConfig(shared)
                logging.getLogger().addHandler(_ROUTER)
                _STATE["logging"] = True
        self.handlers = [_file_handler(h, log_conf.get("formatters") or {}) for h in files.values()]
        self.ident = threading.get_ident()
        _ROUTER.by_thread[self.ident] = self.handlers
        return self

    def __exit__(self, *exc):
        _ROUTER.by_thread.pop(self.ident, None)
        for handler in self.handlers:
            handler.close()
        return False
