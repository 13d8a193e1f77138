"""Path keys: a config key whose value is a filesystem path declares it with :class:`PathValue`, which carries its
own anchoring (a relative path means the directory the command ran in); :func:`anchor_paths` walks a schema (a
:class:`~isparse.params.Section` class) and anchors every key so declared, so a new path key anchors by its
declaration, not by its name (``pipeline.schema.load_job`` calls it with Hydra's ``runtime.cwd``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError
from .params import Constraint, Nullable


class PathValue(Constraint):
    """A filesystem path, declared with its own anchoring: a relative path means the directory the command ran in.

    The value is a non-empty string, kept as typed (a string field: ``is_text``); the filesystem is not touched when
    a value is checked (a spec may be built where its files are not), but by :meth:`existing` when the path is
    opened. The pipeline anchors every key declared with this constraint (:func:`anchor_paths`, walking the
    schema), so a new path key anchors by its declaration, not by its name.

    Parameters
    ----------
    kind : {"file", "dir"} or None
        What :meth:`existing` requires (None: either).
    anchor : {"cwd"} or None
        "cwd": :meth:`anchored` makes a relative path absolute against the directory the command ran in (Hydra's
        ``runtime.cwd``); None: kept as given.
    scheme : str, optional
        A prefix before the path (``sqlite:///``): a value without it is not a path (an ``http://`` URI) and is
        kept; with it, only the path after it is anchored (when relative).
    env : str, optional
        An environment variable whose value stands for a null (``data.dir``'s ``$ISPARSE_DATA_DIR``): anchored the
        same way.
    text : str, optional
        What is allowed, for the docs and messages.
    """

    is_text = True

    def __init__(self, *, kind: str | None = None, anchor: str | None = "cwd", scheme: str | None = None,
                 env: str | None = None, text: str | None = None):
        if kind not in (None, "file", "dir") or anchor not in (None, "cwd"):
            raise ValueError(f"PathValue: kind must be file, dir or None and anchor cwd or None; got {kind!r}, "
                             f"{anchor!r}")
        self.kind, self.anchor, self.scheme, self.env = kind, anchor, scheme, env
        what = {"file": "a file path", "dir": "a directory path", None: "a path"}[kind]
        self.text = text or (f"{what} (relative: to the command's directory)" if anchor else what)

    def __call__(self, key, value):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
        return value

    def anchored(self, value, base):
        """``value`` with a relative path made absolute against the directory ``base`` (``~`` expanded, normalized,
        links kept as named: an error shows the path given, the reader resolves them); a null takes ``env``'s
        value, anchored; anything else (a number, another scheme) is returned as it is, for the check to judge."""
        if self.anchor is None:
            return value
        if value is None:
            given = os.environ.get(self.env) if self.env else None
            return _absolute(given, base) if given else None
        if not isinstance(value, str) or not value:
            return value
        if self.scheme is not None:
            if not value.startswith(self.scheme):
                return value
            rest = value[len(self.scheme):]
            return value if rest.startswith("/") else self.scheme + _absolute(rest, base)
        return _absolute(value, base)

    def existing(self, key: str, value) -> Path:
        """The path of ``value`` (``~`` expanded, links resolved), which must exist and be of ``kind``.

        Raises
        ------
        ConfigError
            (``key``) no such path, a path of the other kind, or a link to nothing; the message shows the path as
            given.
        """
        given = Path(str(value)).expanduser()
        p = given.resolve()
        ok = p.is_file() if self.kind == "file" else p.is_dir() if self.kind == "dir" else p.exists()
        if not ok:
            kind = {"file": "file", "dir": "directory", None: "path"}[self.kind]
            what = ("a directory" if p.is_dir() else "a file" if p.exists() else
                    f"a link to {str(p)!r}, which does not exist" if given.is_symlink() else f"no such {kind}")
            raise ConfigError(key, f"The '{key}' parameter must be an existing {kind} (relative paths are read from "
                                   f"the directory the command ran in); got {str(given)!r}: {what}.")
        return p


def _absolute(path, base) -> str:
    path = Path(str(path)).expanduser()
    if not path.is_absolute():
        path = Path(base) / path
    return os.path.normpath(path)


def anchor_paths(cls, values: dict, base, key: str = "") -> dict:
    """Anchor, in place, every value of ``values`` (a nested mapping of the Section class ``cls``'s keys, as Hydra
    composes it) whose key is declared with a :class:`PathValue` (or a Nullable one): its relative path made
    absolute against the directory ``base`` (:meth:`PathValue.anchored`). The schema is walked, the option of a
    polymorphic section picked from the values as :meth:`Section.from_dict` picks it; what cannot be picked (an
    unknown option) is left for the checks to name. Returns ``values``."""
    if not isinstance(values, dict):
        return values
    try:
        cls = cls.choose(values, key)
    except (ConfigError, TypeError):   # from_dict names it
        return values
    for name, f in cls.fields().items():
        sub = f.metadata.get("section")
        if sub is not None:
            if isinstance(values.get(name), dict):
                anchor_paths(sub, values[name], base, f"{key}.{name}" if key else name)
            continue
        constraint = f.metadata["constraint"]
        inner = constraint.inner if isinstance(constraint, Nullable) else constraint
        if isinstance(inner, PathValue) and (name in values or inner.env):
            anchored = inner.anchored(values.get(name), base)
            if name in values or anchored is not None:
                values[name] = anchored
    return values


__all__ = ["PathValue", "anchor_paths"]


def writable_dir_problem(path) -> str | None:
    """Why ``path`` cannot be (made into) a directory this process writes, or None if it can.

    The nearest existing one of ``path`` and its parents must be a directory, and one this process may write
    (``os.access``, which also reports a read-only file system); ``path`` itself, if it exists, must be a directory.

    Parameters
    ----------
    path : str or Path
        A directory the run will make (or already has) and write into.

    Returns
    -------
    str or None
        e.g. ``"/tmp/x is a regular file, not a directory"``, ``"/ro is on a read-only file system"``.
    """
    import errno

    p = Path(os.path.abspath(path))
    here = p
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    if os.path.lexists(here) and not here.is_dir():
        return f"{here} is {'a regular file' if here.is_file() else 'not a directory'}, not a directory"
    if not os.access(here, os.W_OK | os.X_OK):
        try:   # which: a read-only file system, or no permission
            os.statvfs(here)
            read_only = bool(os.statvfs(here).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        return f"{here} is on a read-only file system" if read_only else \
            f"{here} cannot be written by this process ({os.strerror(errno.EACCES)})"
    return None
