"""One exit path for every failure, for every console script (``isparse-run``, ``isparse-plan``, ``isparse-report``,
``python -m pipeline.tracking``).

Every exception leaving a run, a sweep or a console script, from any module (ours, Hydra's and its launchers',
Dask's, MLflow's, the OS's), is one line on stderr and exit status 2 (130/143 for SIGINT/SIGTERM):

    <program>: error: <message>

Bad input (:func:`user_message`: a config key or value, a data file, a cluster option, a report argument) is its
message, naming the key. Any other fault is ``<stage>: <what>`` (the stage from :func:`isparse.errors.stage`: data,
rounds, checkpoint, ...; :func:`describe`), with the path of its full traceback, written to the run's directory. The
traceback also goes to the console with ``HYDRA_FULL_ERROR=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import traceback

from omegaconf import OmegaConf

from isparse.errors import ConfigError, DataError, set_default_stage, stage, stage_of  # noqa: F401
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

    cause, seen = exc, set()
    while cause is not None and id(cause) not in seen:   # raised inside OmegaConf (a resolver) or Hydra: the
        seen.add(id(cause))                               # project's own error is the message
        if isinstance(cause, (ConfigError, DataError, DivergenceError)):
            return one_line(cause)
        # OmegaConf wraps a resolver's exception raising inside its except clause (no "from"): its context
        cause = cause.__cause__ or (cause.__context__ if type(cause).__name__ == "InterpolationResolutionError"
                                    else None)
    hydra_text = _hydra_message(exc)
    if hydra_text is not None:
        return hydra_text
    if type(exc).__name__ == "LauncherConfigError":
        return one_line(exc)
    return _os_message(exc)


def _os_message(exc: BaseException) -> str | None:
    """An ``OSError`` naming a file, in one line; None for anything else."""
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
        override = text[len("Error merging override "):] if text.startswith("Error merging override ") else None
        if override is not None and cause is not None:
            key = override.partition("=")[0].lstrip("~+")
            if "does not support deletion" in str(cause) or override.startswith("~"):
                return (f"The '{key}' parameter cannot be deleted ({override}): every key of the schema has a "
                        f"value; set it instead ({key}=<value>, or null where it may be null).")
            if "is not a subclass of" in str(cause):
                return (f"The '{key}' parameter is a section, not a value: set one of its keys ({key}.<key>=<value>; "
                        f"isparse-run --cfg job shows them); got {override!r}.")
        if text.startswith("Could not append to config. An item is already at"):
            key = text.split("'")[1]
            return f"The '{key}' parameter is already a key of the config: set it without + ({key}=...)."
        return one_line(text)
    if isinstance(exc, OverrideParseException):
        return f"the override {exc.override!r} cannot be parsed: {one_line(exc.message)}"
    if isinstance(exc, SearchPathException):
        return one_line(exc)
    if isinstance(exc, OmegaConfBaseException):
        if isinstance(exc.__cause__, ConfigError):   # raised by one of the project's resolvers (pipeline/__init__.py)
            return one_line(exc.__cause__)
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


def describe(exc: BaseException, trace_dir=None) -> tuple[str, bool]:
    """(``exc``'s one line, whether it is bad input). Bad input naming a key is its message; anything else is
    ``<stage>: <message>``, and a fault that is not bad input also names its full traceback, written (once) to
    ``trace_dir`` (default :func:`trace_dir`)."""
    message = user_message(exc)
    if message is not None and message != _os_message(exc):   # names its key: where it failed
        return message, True
    if message is None:
        what = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        cause = exc.__cause__ or exc.__context__
        if cause is not None and cause is not exc:   # what the wrapped error was (Hydra's, MLflow's wrappers)
            what += f" ({one_line(f'{type(cause).__name__}: {cause}')})"
        what = what if len(what) <= 600 else what[:600] + "..."
        path = getattr(exc, "isparse_trace", None) or write_trace(exc, trace_dir)
        with contextlib.suppress(Exception):
            exc.isparse_trace = path
        message = what + (f" (full traceback: {path})" if path else "")
    return f"{stage_of(exc)}: {message}", user_message(exc) is not None


def trace_dir() -> str | None:
    """The Hydra run's (or sweep's) directory, where a traceback is written; None outside one."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    for key in ("runtime.output_dir", "sweep.dir"):
        with contextlib.suppress(Exception):
            d = str(OmegaConf.select(HydraConfig.get(), key))
            if d and os.path.isdir(d):
                return d
    return None


def write_trace(exc: BaseException, where=None) -> str | None:
    """Write ``exc``'s traceback to ``<where>/traceback.txt`` (default :func:`trace_dir`), else (none, or it cannot
    be written) to ``outputs/`` or the temporary directory; its path, or None."""
    import tempfile
    import time

    text = "".join(traceback.format_exception(exc))
    name = f"traceback-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    where = where or trace_dir()
    for directory, file in (((where, "traceback.txt"),) if where else ()) + (("outputs", name),
                                                                            (tempfile.gettempdir(), name)):
        try:
            os.makedirs(directory, exist_ok=True)
            path = os.path.abspath(os.path.join(str(directory), file))
            with open(path, "w") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    return None


#: the last line printed by :func:`exits_on_error` in this process (a sweep's parent run takes it as its reason)
LAST_ERROR: list = []


def console(program: str, func, *args, **kwargs):
    """Run a console script's body: every exception is its one line (:func:`describe`) and exit status 2 (the
    traceback first with ``HYDRA_FULL_ERROR=1``); Ctrl-C exits 130, SIGTERM 143, without a traceback.

    Hydra's own error printing (``hydra._internal.utils.run_and_report``) is bypassed while ``func`` runs
    (:func:`hydra_reports_errors_to`)."""
    import warnings

    original = warnings.formatwarning
    # a warning is one line too, "<program>: warning: <message>" (not Python's file:line and source line)
    warnings.formatwarning = lambda message, category, *a, **k: f"{program}: warning: {one_line(message)}\n"
    # a log handler that cannot write (its file on a full or read-only disk) drops the record instead of printing a
    # "--- Logging error ---" block with tracebacks to stderr: the fault itself is reported once, as its one line
    logging.raiseExceptions = False
    try:
        with exits_on_error(program), hydra_reports_errors_to():
            return func(*args, **kwargs)
    except KeyboardInterrupt as exc:
        sys.exit(exit_status_of_signal(getattr(exc, "signal", None)))
    finally:
        warnings.formatwarning = original


@contextlib.contextmanager
def exits_on_error(program: str):
    """Within (a console script's body, a Hydra task or callback), any exception is its one line and exit status 2
    at once. (Raised out of a task, Hydra's ``run_job`` would first print "Error executing job with overrides:
    [...]"; out of a callback, Hydra would warn and go on.)"""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - every failure ends here
        line, _ = describe(exc)
        if full_error():
            traceback.print_exception(exc)
        print_error(program, line)
        LAST_ERROR.append(line)
        sys.exit(2)


exits_on_user_error = exits_on_error   # the name before every fault took this path


@contextlib.contextmanager
def hydra_reports_errors_to():
    """Within, Hydra's ``run_and_report`` lets every error propagate to :func:`console` instead of printing it its
    way and exiting 1. Hydra's command-line parser (``hydra.main``'s) words its errors in one line
    (:class:`ArgumentParser`'s way), and a group's override (``algorithm=``, ``data=``, ``cluster=``) must name one
    option: a number, null or a list is refused (:func:`check_group_overrides`) before Hydra composes."""
    try:
        import hydra._internal.utils as hydra_utils

        hydra_main = importlib.import_module("hydra.main")   # the module (the package's attribute is the decorator)
    except ImportError:   # pragma: no cover
        yield
        return
    original, original_parser = hydra_utils.run_and_report, hydra_main.get_args_parser

    def get_args_parser():
        parser = original_parser()
        parse_args = parser.parse_args

        def error(message):
            print_error(os.path.basename(sys.argv[0]) or parser.prog,
                        one_line(message) + f" (see {os.path.basename(sys.argv[0]) or parser.prog} --help)")
            sys.exit(2)

        def checked_parse_args(*args, **kwargs):
            namespace = parse_args(*args, **kwargs)
            check_group_overrides(namespace.overrides or [])
            return namespace

        parser.error, parser.parse_args = error, checked_parse_args
        return parser

    def run_and_report(func):
        return func()

    hydra_utils.run_and_report, hydra_main.get_args_parser = run_and_report, get_args_parser
    try:
        yield
    finally:
        hydra_utils.run_and_report, hydra_main.get_args_parser = original, original_parser


def check_group_overrides(overrides: list[str]) -> None:
    """A group's override names one option (``algorithm=ibcd``, or a sweep over options ``algorithm=isega,ibcd``).

    Raises
    ------
    ConfigError
        An override without a key (``=3``); a group set to a number, null or a list (Hydra would read
        ``algorithm=[isega,ibcd]`` as two options merged into one node); a group deleted (``~algorithm``).
    """
    from hydra.core.config_store import ConfigStore
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Override

    parser = OverridesParser.create()
    for text in overrides:
        if text.lstrip("+~").startswith("="):
            raise ConfigError("overrides", f"The override {text!r} has no key: write key=value (e.g. workers.n=3).")
        try:
            override: Override = parser.parse_override(text)
        except Exception:  # noqa: BLE001 - a malformed override is Hydra's to report (OverrideParseException)
            continue
        group = override.key_or_group
        if group not in _GROUP_NAME or override.package is not None:
            continue
        options = sorted(name.removesuffix(".yaml") for name in ConfigStore.instance().list(group))
        choices = f"one of {', '.join(options)}" if options else "one of its options"
        if override.is_delete():
            raise ConfigError(group, f"The '{group}' parameter cannot be deleted ({text}): it must be {choices}.")
        if override.is_sweep_override():
            values = list(override.sweep_iterator()) if override.is_discrete_sweep() else []
        else:
            values = [override.value()]
        for value in values:
            if isinstance(value, list):
                raise ConfigError(group, f"The '{group}' parameter must be one option ({choices}), not a list; got "
                                         f"{text!r} (to run each: isparse-run -m {group}={','.join(map(str, value))}).")
            if not isinstance(value, str):
                raise ConfigError(group, f"The '{group}' parameter must be {choices}; got {text!r}.")

