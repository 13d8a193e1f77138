"""Errors raised by isparse, one format for every bad input.

Every message names the field, the value given and what is allowed, in the
form of scikit-learn's parameter validation::

    The 'tau' parameter must be in [1/m = 0.0333, 1]; got 1.5.

A library function names its own arguments (``split_rows(10, 20)``: "The 'n' parameter ..."); the glue that calls
it with a config key maps the argument to the key with :func:`keys`, so the command line's user reads
"The 'workers.n' parameter ...".
"""

from __future__ import annotations

import importlib
import traceback
from contextlib import contextmanager


class ConfigError(ValueError):
    """A parameter is outside its allowed range or set.

    Parameters
    ----------
    key : str
        The configuration key (``tau``, ``workers.n``, ...), as the user types it (also an attribute).
    message : str
        One line naming the key, the value given and what is allowed
        (``The 'tau' parameter must be in [1/m = 0.0333, 1]; got 1.5.``).
    """

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)

    def __reduce__(self):   # survives pickling (a process pool or a Dask task sends it back): key and message
        return (type(self), (self.key, str(self)))

    def renamed(self, names: dict) -> "ConfigError":
        """A new error of the same class naming config keys instead of a function's arguments: ``names`` maps
        ``{argument: key}``; the error's key is mapped, and every quoted argument name (``'n'``) of its text before the
        value
        given (the text from its last "; got " on is the value, kept as it is)."""
        text = str(self)
        head, sep, tail = text.rpartition("; got ")
        if not sep:
            head, tail = text, ""
        for arg, key in names.items():
            head = head.replace(f"'{arg}'", f"'{key}'")
        return type(self)(names.get(self.key, self.key), head + sep + tail)


class DataError(ValueError):
    """A data file or array cannot be used (malformed, NaN/inf, wrong labels)."""


def check_range(key: str, value, low=None, high=None, *, low_text=None, high_text=None,
                integer=False, low_open=False):
    """Return ``value`` (an int for ``integer=True``) if ``low <= value <= high``, else raise :class:`ConfigError`.

    Parameters
    ----------
    low, high : float or None
        Inclusive bounds; ``None`` means unbounded.
    low_text, high_text : str, optional
        How to print a bound that is derived (``"1/m"``).
    low_open : bool
        The lower bound is exclusive.

    Raises
    ------
    ConfigError
        (``key``) not a number (a bool is refused), not an integer when one is required, not finite, or out of the
        bounds; the message gives the allowed interval.
    """
    lo = "-inf" if low is None else (f"{low_text} = {low:.4g}" if low_text else f"{low:.4g}")
    hi = "inf" if high is None else (f"{high_text} = {high:.4g}" if high_text else f"{high:.4g}")
    allowed = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high is None else ']'}"   # inf is refused
    kind = "an integer" if integer else "a number"
    bad_type = isinstance(value, bool) or not isinstance(value, (int, float))
    if integer and not bad_type and not float(value).is_integer():
        bad_type = True
    if bad_type:
        raise ConfigError(key, f"The '{key}' parameter must be {kind} in {allowed}; got {value!r}.")
    v = float(value)
    too_low = low is not None and (v <= low if low_open else v < low)
    too_high = high is not None and v > high
    if v != v or too_low or too_high:
        raise ConfigError(key, f"The '{key}' parameter must be in {allowed}; got {value!r}.")
    return int(value) if integer else value


@contextmanager
def keys(**names: str):
    """Within the block, a :class:`ConfigError` about a function's argument is raised again naming the config key.

    ``names`` are ``argument=config key`` pairs; the key and the text are renamed (:meth:`ConfigError.renamed`); any
    other error passes as it is.

    Examples
    --------
    >>> with keys(n="workers.n", how="workers.split"):
    ...     split_rows(10, 20)
    Traceback (most recent call last):
    ConfigError: The 'workers.n' parameter must be in [1, N (rows of the data set) = 10]; got 20.
    """
    try:
        yield
    except ConfigError as exc:
        if exc.key not in names:
            raise
        raise exc.renamed(names) from None


def check_choice(key: str, value, allowed):
    """Return ``value`` if it is one of ``allowed`` (listed in the message), else raise :class:`ConfigError` naming
    ``key``."""
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(
            key, f"The '{key}' parameter must be one of {', '.join(map(str, allowed))}; got {value!r}.")
    return value


class DeclarationError(TypeError):
    """A class whose declaration is wrong (a method's options, traits, theory or steps; a codec's options, kind or
    constants; two classes of one name), raised by its class statement; the message is one line naming the class and
    the attribute."""


def _one_line(text) -> str:
    return " ".join(str(text).split())


def import_user_module(module: str, key: str, what: str, then=None) -> None:
    """Import a user's ``module`` (``<key>.module``), so that the classes it defines (``what``: ``method``, ``codec``,
    ``data source``) register themselves; ``then()``, if given, runs after the import under the same errors (a data
    source's declaration is checked once its ``@dataclass`` decorator has run).

    Raises
    ------
    ConfigError
        Naming ``<key>.module``, one line each: the module cannot be found or imported (an ImportError: "must name
        an importable Python module"); a class it defines is declared wrong (a :class:`DeclarationError`); or its
        code raised something else while it was being defined (the exception, with the file and line).
    """
    try:
        importlib.import_module(str(module))
        if then is not None:
            then()
    except DeclarationError as exc:
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter names a module whose {what} is declared "
                                           f"wrong; importing {module!r}: {_one_line(exc)}") from None
    except ImportError as exc:
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter must name an importable Python module "
                                           f"(on sys.path / PYTHONPATH); importing {module!r} failed: "
                                           f"{type(exc).__name__}: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while defining its class
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter names a module that fails while defining "
                                           f"its {what}: importing {module!r} raised {type(exc).__name__} at "
                                           f"{where}: {_one_line(exc)}") from None


#: the stage an exception raised outside every :func:`stage` is said to come from (a sweep sets ``launcher``)
_DEFAULT_STAGE = ["start-up"]


@contextmanager
def stage(name: str):
    """Within, an exception that leaves is marked as raised at stage ``name`` (``data``, ``rounds``, ...; the
    innermost stage wins), for the one line that reports it (``pipeline.errors``)."""
    try:
        yield
    except BaseException as exc:
        if getattr(exc, "isparse_stage", None) is None:
            try:
                exc.isparse_stage = name
            except Exception:  # noqa: BLE001 - an exception without attributes: its stage stays the default
                pass
        raise


def set_default_stage(name: str) -> None:
    """The stage of exceptions raised outside every :func:`stage` from now on in this process."""
    _DEFAULT_STAGE[0] = name


def stage_of(exc: BaseException) -> str:
    """The stage ``exc`` (or an exception it was raised from) left, else the default stage."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, "isparse_stage", None):
            return exc.isparse_stage
        exc = exc.__cause__ or exc.__context__
    return _DEFAULT_STAGE[0]
