"""One exit path for bad input, for every console script (``isparse-run``, ``isparse-plan``, ``isparse-report``,
``python -m pipeline.tracking``).

Any error caused by what the user gave, from any module (a config key or value, a data file, a path, a cluster
option, a report argument, an unknown group option, a malformed override), is one line on stderr,

    <program>: error: <message naming the key, the file and the line>

and exit status 2; the traceback comes first only with ``HYDRA_FULL_ERROR=1``. :func:`user_message` says which
exceptions are such errors and words them (Hydra's and OmegaConf's own exceptions are translated into the
project's format, naming the key and what it may be); anything else is a bug and keeps its traceback (exit
status 1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback

from isparse.errors import ConfigError, DataError
from isparse.params import unknown_key

#: the groups whose option is named by a key of its node (``algorithm=isega``, ``cluster=local``)
_GROUP_NAME = {"algorithm": "name", "data": "name", "cluster": "kind"}


def full_error() -> bool:
    """``HYDRA_FULL_ERROR=1``: tracebacks too."""
    return os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


def one_line(text: str) -> str:
    """``text`` on one line (its lines joined with '; ')."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def user_message(exc: BaseException) -> str | None:
    """The one-line message of an error caused by the user's input, or None for anything else (a bug).

    User errors: :class:`~isparse.errors.ConfigError`, :class:`~isparse.errors.DataError`, the method diverging
    (``DivergenceError``: its message names step.multiplier), Hydra's errors about the command line (an unknown
    group option, a key the config does not have, a malformed override, a missing config directory), OmegaConf's
    errors resolving the config, the Dask launcher's bad settings, and an ``OSError`` naming a file (a path the user
    gave that cannot be read or made).
    """
    from isparse.engines import DivergenceError

    if isinstance(exc, (ConfigError, DataError, DivergenceError)):
        return one_line(exc)
    hydra_text = _hydra_message(exc)
    if hydra_text is not None:
        return hydra_text
    if type(exc).__name__ == "LauncherConfigError":
        return one_line(exc)
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename!r}"
    return None


def _hydra_message(exc: BaseException) -> str | None:
    """Hydra's and OmegaConf's errors, in the project's words; None if ``exc`` is neither."""
    try:
        from hydra.errors import (ConfigCompositionException, MissingConfigException, OverrideParseException,
                                  SearchPathException)
        from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException
    except ImportError:   # pragma: no cover - hydra is a dependency
        return None
    if isinstance(exc, MissingConfigException):
        missing = getattr(exc, "missing_cfg_file", None) or ""
        group, _, option = missing.rpartition("/")
        options = getattr(exc, "options", None)
        if group and options is not None:
            return (f"The '{group}' parameter must be one of {', '.join(options)}; got {option!r} "
                    f"(no option {missing!r}).")
        return one_line(str(exc).split("\nConfig search path")[0])
    if isinstance(exc, ConfigCompositionException):
        cause = exc.__cause__
        if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
            return unknown_key_message(cause.full_key, cause.parent_node)
        text = str(exc)
        if text.startswith("Could not append to config. An item is already at"):
            key = text.split("'")[1]
            return f"The '{key}' parameter is already a key of the config: set it without + ({key}=...)."
        return one_line(text)
    if isinstance(exc, OverrideParseException):
        return f"the override {exc.override!r} cannot be parsed: {one_line(exc.message)}"
    if isinstance(exc, SearchPathException):
        return one_line(exc)
    if isinstance(exc, OmegaConfBaseException):
        return "the config cannot be resolved: " + one_line(str(exc).split("\n    full_key")[0])
    return None


def unknown_key_message(key: str, parent) -> str:
    """The error of a key the composed config does not have, with the keys its parent node has (the format of
    ``isparse.params.unknown_key``)."""
    parent_key = key.rpartition(".")[0]
    known = list(parent.keys()) if parent is not None and hasattr(parent, "keys") else []
    where = parent_key or "the config"
    if parent_key in _GROUP_NAME and parent is not None:
        where = f"{parent_key}={parent.get(_GROUP_NAME[parent_key])}"
    text = str(unknown_key(key, where, known))
    if parent_key.startswith("cluster.") and parent_key.endswith("options"):   # a mapping passed on as it is
        text += f" A key of {parent_key} goes as it is to the cluster class: add one with +{key}=..."
    return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``<prog>: error: <message>`` (no usage block), exit status 2."""

    def error(self, message):
        print_error(self.prog, one_line(message) + f" (see {self.prog} --help)")
        sys.exit(2)


def print_error(program: str, message: str) -> None:
    print(f"{program}: error: {message}", file=sys.stderr, flush=True)


def exit_status_of_signal(name: str | None) -> int:
    """128 + the signal's number (``SIGINT``: 130, ``SIGTERM``: 143)."""
    return 128 + int(getattr(signal.Signals, name or "SIGINT", signal.SIGINT))


def console(program: str, func, *args, **kwargs):
    """Run a console script's body: a user error is one line and exit status 2 (the traceback first with
    ``HYDRA_FULL_ERROR=1``); Ctrl-C exits 130 without a traceback; anything else propagates (a traceback, status 1).

    Hydra's own error printing (``hydra._internal.utils.run_and_report``, which writes its multi-line messages and
    exits 1) is bypassed for user errors while ``func`` runs (:func:`hydra_reports_user_errors_to`)."""
    try:
        with exits_on_user_error(program), hydra_reports_user_errors_to():
            return func(*args, **kwargs)
    except KeyboardInterrupt as exc:
        sys.exit(exit_status_of_signal(getattr(exc, "signal", None)))


@contextlib.contextmanager
def exits_on_user_error(program: str):
    """Within (a console script's body, or a Hydra task: one job), a user error is its one line and exit status 2
    at once. (Raised out of a task, Hydra's ``run_job`` would first print "Error executing job with overrides:
    [...]".)"""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - classified here, re-raised when it is not the user's
        message = user_message(exc)
        if message is None:
            raise
        if full_error():
            traceback.print_exc()
        print_error(program, message)
        sys.exit(2)


@contextlib.contextmanager
def hydra_reports_user_errors_to():
    """Within, Hydra's ``run_and_report`` lets user errors (:func:`user_message`) propagate to :func:`console`
    instead of printing them its way and exiting 1; other errors it reports as before."""
    try:
        import hydra._internal.utils as hydra_utils
    except ImportError:   # pragma: no cover
        yield
        return
    original = hydra_utils.run_and_report

    def run_and_report(func):
        try:
            return func()
        except Exception as exc:  # noqa: BLE001
            if user_message(exc) is not None:
                raise
            return original(lambda: _raise(exc))

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def _raise(exc):
    raise exc
