"""An on-disk cache of the reference solution x*, F*, grad f_i(x*) and the constants L_i of a problem.

Sweeps run many jobs on the same data set, lambda, split and n; solving the reference problem
(and the eigenvalue problems behind L_i) once per key is enough. The key hashes everything the
result depends on: the data file's bytes (size and modification time as a cheap proxy, plus the
path), lambda, loss, penalty, regularizer, the row split and n.
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
    path = Path(cache_dir) / f"{key}.npz"
    if path.is_file():
        return _read(path, problem, key), True
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.is_file():   # another process solved it while this one waited for the lock
            return _read(path, problem, key), True
        log.info("cache: solving the reference problem of key %s (x*, L_i) in process %d", key, os.getpid())
        ref = solve(problem)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, x_star=ref.x_star, F_star=ref.F_star, local_grads=ref.local_grads, residual=ref.residual,
                 L_i=problem.L_i)
        os.replace(tmp, path)
    return ref, False


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
