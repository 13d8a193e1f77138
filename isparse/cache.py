"""A cache of named arrays: what a caller gives it (a dict of arrays), kept on disk under a key, and the last few in
this process.

Sweeps run many jobs on the same data set, lambda, split and n: the reference solution (x*, F*, grad f_i(x*), L_i)
and the parsed data set are computed once per key and read back by the other jobs. The cache knows no problem and no
data set: a caller gives it a function that makes a dict of arrays, and turns the dict it gets back into its own
objects (:func:`isparse.runsetup.build` for the reference, :meth:`isparse.data.sources.DataSource.dataset` for a
data set). A leaf module: it imports numpy and the standard library only.

Keys are hex digests of JSON-able parts (:func:`digest`): for something read from a file, the file's absolute path,
size and modification time stand for its bytes (:func:`file_key`); :func:`problem_key` lists what a GLM problem's
reference depends on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import zipfile
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import stage

log = logging.getLogger(__name__)

#: what a caller stores and gets back: names -> arrays (a number or a string is stored as a 0-d array)
Arrays = dict


def digest(parts, prefix: str = "") -> str:
    """``prefix`` and 24 hex digits of the SHA-256 of ``parts`` as JSON (keys sorted; other values as ``str``)."""
    return prefix + hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def file_key(file, options: dict, prefix: str = "data-") -> str | None:
    """The key of what is read from ``file`` (a path, or None: nothing read from a file) with ``options``: the file's
    absolute path, size and modification time, and the options; None when the file cannot be stat'ed (nothing is
    cached then: the reader reports the file)."""
    if file is None:
        return digest(options, prefix)
    try:
        stat = os.stat(file)
    except OSError:
        return None
    return digest({"file": os.path.abspath(file), "size": stat.st_size, "mtime": stat.st_mtime_ns,
                   "options": options}, prefix)


#: file_digest's results in this process, by (absolute path, size, modification time)
_DIGESTS: dict = {}


def file_digest(file) -> dict:
    """What a run reads from ``file``: its absolute path, size and the SHA-256 of its bytes.

    The bytes are hashed streaming (1 MiB at a time), once per process for a file of the same path, size and
    modification time.

    Parameters
    ----------
    file : str or Path
        The file.

    Returns
    -------
    dict
        ``{"file": absolute path (str), "bytes": size (int, bytes), "sha256": 64 hex digits (str)}``.

    Raises
    ------
    OSError
        The file cannot be stat'ed or read.
    """
    path = os.path.abspath(file)
    stat = os.stat(path)
    stamp = (path, stat.st_size, stat.st_mtime_ns)
    if stamp not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[stamp] = {"file": path, "bytes": stat.st_size, "sha256": h.hexdigest()}
    return dict(_DIGESTS[stamp])


#: the layout of a cached reference, part of every reference key: 2 keeps sum_i ||grad f_i(x*)||^2 (a number), not
#: the n gradients (1), so an entry of the old layout is a miss, not a damaged file
REFERENCE_LAYOUT = 2


def problem_key(problem, split: str, split_seed: int) -> str:
    """The key of a GLM problem's reference solution: its data (file stamp and shape), lambda, loss, regularizer,
    the row split and n (the attributes ``data.source``, ``data.A``, ``lam``, ``name``, ``reg``, ``n`` it has)."""
    src = problem.data.source
    stat = os.stat(src) if os.path.isfile(src) else None
    return digest({"source": src, "size": stat.st_size if stat else None, "mtime": stat.st_mtime_ns if stat else None,
                   "shape": list(problem.data.A.shape), "lam": problem.lam, "name": problem.name,
                   "reg": [problem.reg.name, problem.reg.l1, problem.reg.l2, problem.reg.lower, problem.reg.upper],
                   "split": split, "split_seed": split_seed, "n": problem.n, "layout": REFERENCE_LAYOUT})


def load_or_make(cache_dir, key: str, make: Callable[[], Arrays], what: str,
                 level: int = logging.INFO, names=()) -> tuple[Arrays, bool]:
    """(arrays, hit): the arrays stored under ``cache_dir/<key>.npz``, or ``make()``'s, stored there.

    Written atomically (a temporary file renamed), so no process reads half a file; made under an exclusive lock on
    ``cache_dir/<key>.lock``, so processes asking for a missing key at once make it once: the others wait and read
    it. ``what`` names the entry in the log lines (``cache: making <what> of key ...`` at ``level``, ``cache: <what>
    of key ... read from ...``).

    A stored file that cannot be read (truncated, overwritten, not an npz, or without one of ``names``) is damaged
    derived data: one warning names it and why (``cache: <file> is damaged (<error>); making <what> again``) and it is
    made again, under the same lock (processes that find it damaged at once make it once: the others wait and read
    the new file).

    Parameters
    ----------
    cache_dir : str or Path
        The cache's directory (made if missing).
    key : str
        The entry's key (:func:`digest`, :func:`file_key`, :func:`problem_key`).
    make : callable() -> dict of str to array
        Makes the arrays when they are not stored (or the stored file is damaged).
    what : str
        What the entry is, for the log lines.
    level : int
        The logging level of the lines ``making`` and ``read from`` (the damage warning is always WARNING).
    names : iterable of str
        The arrays a stored file must hold; a file without one of them is damaged.

    Returns
    -------
    arrays : dict of str to ndarray
        As stored (a number or a string given as a 0-d array), the same whether made now or read.
    hit : bool
        Whether they were read.

    Raises
    ------
    TypeError
        ``make()`` gave a value that is not a dict of arrays of numbers, booleans or strings.
    """
    path = Path(cache_dir) / f"{key}.npz"
    if path.is_file():
        arrays, _ = _read(path, what, key, level, names)
        if arrays is not None:
            return arrays, True
    with stage("cache"):
        path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.is_file():   # another process made it (or made it again) while this one waited for the lock
            arrays, damage = _read(path, what, key, level, names)
            if arrays is not None:
                return arrays, True
            log.warning("cache: %s is damaged (%s); making %s again", path, damage, what)
        log.log(level, "cache: making %s of key %s in process %d", what, key, os.getpid())
        arrays = _arrays(make(), what)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        with stage("cache"):
            np.savez(tmp, **arrays)
            os.replace(tmp, path)
    return arrays, False


#: the last entries kept in this process (Hydra's basic launcher runs every job of a sweep in one process)
_MEMORY: dict = {}
_MEMORY_SIZE = 2


def remembered(key: str | None, make: Callable[[], Arrays], what: str) -> Arrays:
    """The arrays of ``key`` kept in this process (the last two keys asked for), else ``make()``'s, kept. A None key
    (nothing that identifies the entry) is made each time and not kept."""
    if key is not None and key in _MEMORY:
        log.info("cache: %s of key %s as loaded by an earlier job of this sweep", what, key)
        return _MEMORY[key]
    arrays = _arrays(make(), what)
    if key is not None:
        while len(_MEMORY) >= _MEMORY_SIZE:
            _MEMORY.pop(next(iter(_MEMORY)))
        _MEMORY[key] = arrays
    return arrays


def _arrays(value, what: str) -> Arrays:
    """``value`` (a dict of arrays) with each value an ndarray; a value numpy would store as a pickled object is
    refused (it could not be read back without unpickling)."""
    if not isinstance(value, dict):
        raise TypeError(f"the cache stores a dict of arrays; {what} gave a {type(value).__name__}")
    out = {}
    for name, v in value.items():
        a = np.asarray(v)
        if a.dtype.kind not in "biufcUS":
            raise TypeError(f"the cache stores arrays of numbers, booleans or strings; {what}'s {name!r} is of "
                            f"dtype {a.dtype}")
        out[str(name)] = a
    return out


#: what reading a damaged npz raises (a truncated zip, a short member, a bad CRC, a missing array, an I/O error)
_DAMAGE = (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError, zlib.error)


def _read(path: Path, what: str, key: str, level: int, names=()) -> tuple[Arrays | None, str | None]:
    """(the arrays of ``path``, None), or (None, why it cannot be read) for a damaged file; every array is read
    here (``np.load`` reads them lazily)."""
    try:
        with open(path, "rb") as fh:   # np.load takes a file without the zip header for a pickle or an .npy
            head = fh.read(4)
        if head != b"PK\x03\x04":
            return None, f"not an npz file: {os.path.getsize(path)} bytes without the zip header"
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except _DAMAGE as exc:
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}"
    missing = [name for name in names if name not in arrays]
    if missing:
        return None, f"no array {', '.join(map(repr, missing))}"
    log.log(level, "cache: %s of key %s read from %s", what, key, path)
    return arrays, None


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive ``fcntl.flock`` on ``lock_path`` (made if missing) while inside."""
    import fcntl

    with stage("cache"):
        fh = open(lock_path, "a")
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
