"""An on-disk cache of the reference solution x*, F*, grad f_i(x*) and the constants L_i of a problem, and of
parsed LIBSVM data sets.

Sweeps run many jobs on the same data set, lambda, split and n; solving the reference problem
(and the eigenvalue problems behind L_i) once per key is enough. The key hashes everything the
result depends on: the data file's bytes (size and modification time as a cheap proxy, plus the
path), lambda, loss, penalty, regularizer, the row split and n. A data set's key hashes its file's path, size and
modification time and the loader's options (:func:`data_key`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np

from .problems import Reference

log = logging.getLogger(__name__)


def problem_key(problem, split: str, split_seed: int) -> str:
    """A hex digest identifying the reference problem of a GLM problem."""
    src = problem.data.source
    stat = os.stat(src) if os.path.isfile(src) else None
    parts = {"source": src, "size": stat.st_size if stat else None, "mtime": stat.st_mtime_ns if stat else None,
             "shape": list(problem.data.A.shape), "lam": problem.lam, "name": problem.name,
             "reg": [problem.reg.name, problem.reg.l1, problem.reg.l2, problem.reg.lower, problem.reg.upper],
             "split": split, "split_seed": split_seed, "n": problem.n}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def load_or_solve(problem, solve, cache_dir, key: str) -> tuple[Reference, bool]:
    """(reference, hit): the cached reference of ``key`` (setting ``problem``'s L_i too), or ``solve(problem)``
    stored under ``cache_dir/<key>.npz``.

    Written atomically (a temporary file renamed), so no process reads half a file; computed under an exclusive
    lock on ``cache_dir/<key>.lock``, so processes asking for a missing key at once solve it once: the others wait
    and read the result.
    """
    def write(tmp, ref):
        np.savez(tmp, x_star=ref.x_star, F_star=ref.F_star, local_grads=ref.local_grads, residual=ref.residual,
                 L_i=problem.L_i)

    return _once(Path(cache_dir) / f"{key}.npz", lambda: solve(problem), write, lambda path: _read(path, problem, key),
                 f"solving the reference problem of key {key} (x*, L_i)", logging.INFO)


def data_key(file, options: dict) -> str:
    """A hex digest identifying a data set read from ``file`` (a path) with the loader's ``options``: the file's
    absolute path, size and modification time, and the options. Raises OSError if the file cannot be stat'ed."""
    stat = os.stat(file)
    parts = {"file": os.path.abspath(file), "size": stat.st_size, "mtime": stat.st_mtime_ns, "options": options}
    return "data-" + hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


#: the last data sets read in this process (Hydra's basic launcher runs every job of a sweep in one process)
_MEMORY: dict = {}
_MEMORY_SIZE = 2


def cached_dataset(source, cache_dir=None):
    """The data set of ``source`` (an ``isparse.data.sources.DataSource`` whose ``read()`` reads it), read once: kept in
    this process for the later jobs of a sweep (the last two), and with ``cache_dir`` also on disk
    (:func:`load_or_read`), so the parallel jobs of a sweep in other processes read each file once and a later
    run reads the parsed arrays (no parser, no scikit-learn import). The key is the source's options and, for a
    file, its path, size and modification time (:func:`data_key`).

    Raises
    ------
    ConfigError
        A missing directory or file (from ``source.file()``).
    DataError
        A file that cannot be used (from ``source.read()``).
    """
    file = source.file()
    options = source.cache_options()
    try:
        key = data_key(file, options) if file is not None else _options_key(options)
    except OSError:
        key = None
    if key is not None and key in _MEMORY:
        log.info("data: %s as loaded by an earlier job of this sweep", source.name)
        return _MEMORY[key]
    if cache_dir is not None and key is not None:
        data, _ = load_or_read(source.read, cache_dir, key)
    else:
        data = source.read()
    if key is not None:
        while len(_MEMORY) >= _MEMORY_SIZE:
            _MEMORY.pop(next(iter(_MEMORY)))
        _MEMORY[key] = data
    return data


def _options_key(options: dict) -> str:
    """The key of a data set that is not read from a file (the bundled set): its options."""
    return "data-" + hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()[:24]


def load_or_read(load, cache_dir, key: str):
    """(dataset, hit): the :class:`isparse.data.Dataset` cached under ``cache_dir/<key>.npz`` (its CSR arrays,
    labels, name and source, as ``load()`` returned them), or ``load()``'s, stored there. Processes asking for a
    missing key at once parse the file once (as :func:`load_or_solve`)."""
    from .data.dataset import Dataset

    def write(tmp, ds):
        A = ds.A.tocsr()
        np.savez(tmp, data=A.data, indices=A.indices, indptr=A.indptr, shape=np.asarray(A.shape), b=ds.b,
                 name=np.asarray(ds.name), source=np.asarray(ds.source), labels=np.asarray(ds.labels))

    def read(path):
        import scipy.sparse as sp

        log.debug("cache: data set of key %s read from %s", key, path)
        with np.load(path) as z:
            A = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(int(v) for v in z["shape"]))
            return Dataset(A=A, b=z["b"], name=str(z["name"]), source=str(z["source"]),
                           labels=str(z["labels"]) if "labels" in z.files else "")

    return _once(Path(cache_dir) / f"{key}.npz", load, write, read, f"reading the data set of key {key} from its file",
                 logging.DEBUG)


def _once(path: Path, compute, write, read, what: str, level: int):
    """(value, hit): ``read(path)`` if ``path`` exists, else ``compute()`` written by ``write(tmp, value)`` to a
    temporary file renamed to ``path``, under an exclusive lock on ``path``'s ``.lock`` (checked again once held);
    ``what`` is logged at ``level`` when computing."""
    if path.is_file():
        return read(path), True
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.is_file():   # another process made it while this one waited for the lock
            return read(path), True
        log.log(level, "cache: %s in process %d", what, os.getpid())
        value = compute()
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        write(tmp, value)
        os.replace(tmp, path)
    return value, False


def _read(path: Path, problem, key: str) -> Reference:
    log.info("cache: reference of key %s read from %s", key, path)
    with np.load(path) as z:
        problem._L_i = z["L_i"]
        return Reference(x_star=z["x_star"], F_star=float(z["F_star"]), local_grads=z["local_grads"],
                         residual=float(z["residual"]))


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive ``fcntl.flock`` on ``lock_path`` (made if missing) while inside."""
    import fcntl

    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
