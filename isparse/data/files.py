"""A data set in many LIBSVM files, each read by the Dask worker it is given to: :func:`hosted_rows`.

The client expands the glob (names and sizes only: it opens no file) and gives the files, in sorted order, to the
Dask workers sorted by address, in contiguous groups as even as ``numpy.array_split`` makes them (file k to worker k
when they are as many). A task pinned there reads the file
(:func:`isparse.data.libsvm.read_libsvm`, every check of a one-file read, an error naming the file and the worker),
and its rows become that worker's shards (:meth:`isparse.data.dask_collection.DaskRows.hosted`). Only small
summaries reach the client: each file's rows, largest feature index and labels. The restriction is loose, so a file
whose worker is lost is read again by another (Dask recomputes the lost shards from this graph).

The logical workers are the files' rows in order, each file split into ``workers.n / files`` contiguous parts
(:func:`file_parts`): the rows of one file in the order of the sorted names, split as ``workers.split=contiguous``
splits them, so the run equals the in-process run of the files read one after the other (:func:`read_files`), bit
for bit.
"""

from __future__ import annotations

import glob as globbing
import hashlib
import os

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError, DataError

__all__ = ["expand", "file_parts", "fingerprint", "hosted_rows", "read_files"]


def expand(pattern: str, key: str = "data.glob") -> list[str]:
    """The absolute paths ``pattern`` matches here, sorted (``~`` expanded; ``**`` recursive); a ConfigError naming
    ``key`` when it matches no file."""
    files = sorted(os.path.abspath(p) for p in globbing.glob(os.path.expanduser(pattern), recursive=True)
                   if not os.path.isdir(p))
    if not files:
        raise ConfigError(key, f"The '{key}' parameter must match at least one file; got {pattern!r}, which matches "
                               f"none (from {os.getcwd()}).")
    return files


def fingerprint(files: list[str], pattern: str) -> dict:
    """What identifies the files without reading them: ``file`` (the pattern), ``files``, ``bytes`` (their sizes'
    sum) and ``sha256`` (of every name, size and modification time: a key, not a hash of the contents). A file that
    cannot be stat'ed here counts as size -1 (its host says why it cannot be read)."""
    h, total = hashlib.sha256(), 0
    for f in files:
        try:
            st = os.stat(f)
            size, mtime = st.st_size, st.st_mtime_ns
        except OSError:
            size, mtime = -1, -1
        total += max(size, 0)
        h.update(f"{f}\0{size}\0{mtime}\n".encode())
    return {"file": pattern, "files": len(files), "bytes": total, "sha256": h.hexdigest()}


def file_parts(rows: list[int], n: int, key: str = "workers.n") -> int:
    """k = n / files, the logical workers of each file; a ConfigError naming ``key`` when n is not a multiple of the
    files or a file has fewer than k rows."""
    F = len(rows)
    if n % F:
        raise ConfigError(key, f"The '{key}' parameter must be a multiple of the data files ({F}: each file's rows "
                               f"are split into workers.n / {F} workers); got {n}.")
    k = n // F
    short = [r for r in rows if r < k]
    if short:
        raise ConfigError(key, f"The '{key}' parameter must be at most {F} x the rows of the smallest file "
                               f"({min(rows)}); got {n}.")
    return k


def _here() -> str:
    try:
        from distributed import get_worker

        return f"the Dask worker {get_worker().address}"
    except (ImportError, ValueError):
        return "the client"


def read_file(path: str, n_features, empty_rows: str):
    """Read one file where this task runs: (A, y, empty rows), A CSR of shape (rows, largest index or
    ``n_features``), y the raw labels. A DataError names the file and the Dask worker."""
    import warnings

    from .libsvm import read_libsvm

    try:
        with warnings.catch_warnings(record=True):   # empty rows: counted, said once by the client
            warnings.simplefilter("always")
            A, y = read_libsvm(path, n_features, empty_rows)
    except DataError as exc:
        raise DataError(f"data.glob: {exc} (read on {_here()})") from None
    except OSError as exc:
        raise DataError(f"data.glob: {path} cannot be read on {_here()}: {type(exc).__name__}: {exc}") from None
    if A.shape[0] == 0:
        raise DataError(f"data.glob: {path} holds no rows (read on {_here()}).")
    return A, y, int(np.count_nonzero(np.diff(A.indptr) == 0))


def _summary(part) -> tuple:
    """(rows, largest feature index (columns), the labels, empty rows) of a read file."""
    A, y, empty = part
    top = int(A.indices.max()) + 1 if A.nnz else 0
    return A.shape[0], top, np.unique(y), empty


def _rows_of(part, d: int):
    """The file's rows with d columns (the same arrays)."""
    A = part[0]
    return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], d))


def _labels_of(part):
    return part[1]


def _dimension(tops, files, n_features) -> int:
    """d: ``n_features``, else the largest index of all files (``tops``: each file's)."""
    d = max(tops) if n_features is None else int(n_features)
    if d < 1:
        raise DataError(f"data.glob: no file has a feature ({files[0]}, ...).")
    return d


def _classes(labels, files, where) -> np.ndarray:
    """The two labels of all files; a DataError naming the files when there are not two."""
    classes = np.unique(np.concatenate(labels))
    if classes.size != 2:
        if classes.size > 2:
            seen, third = set(), None
            for f, w, lab in zip(files, where, labels):
                seen.update(lab.tolist())
                if len(seen) > 2:
                    third = (f, w)
                    break
            raise DataError(f"data.glob: the files hold {classes.size} distinct labels ({classes[:5].tolist()}); a "
                            f"binary data set has 2: the third appears in {third[0]} (read on the Dask worker "
                            f"{third[1]}).")
        raise DataError(f"data.glob: the {len(files)} files hold one label ({classes.tolist()}); a binary data set "
                        f"has 2.")
    return classes


def hosted_rows(client, files: list[str], *, n: int, n_features=None, empty_rows: str = "keep",
                loss: str = "logistic", lam: float = 0.001, penalty: str = "l2", fingerprint: dict | None = None):
    """The rows of ``files`` on the Dask workers of ``client``, each file read by one worker (the module docstring),
    as the shards of ``n`` logical workers: a :class:`~isparse.data.dask_collection.DaskRows`.

    Raises
    ------
    DataError
        A file that cannot be read on its worker (missing there, not readable, not LIBSVM, an index past
        ``n_features``, NaN or inf), naming the file and the worker; not two labels in all.
    ConfigError
        (``workers.n``) n not a multiple of the files or more than they can split.
    """
    import warnings

    from distributed import wait

    from .dask_collection import DaskRows

    addresses = sorted(client.scheduler_info()["workers"])
    if not addresses:
        raise RuntimeError("the Dask cluster has no workers")
    given = [addresses[g] for g, part in enumerate(np.array_split(np.arange(len(files)), len(addresses)))
             for _ in part]   # contiguous groups of files, in address order: the workers are numbered in file order
    parts = [client.submit(read_file, f, n_features, empty_rows, workers=[a], allow_other_workers=True, pure=False)
             for f, a in zip(files, given)]
    wait(parts)
    for f in parts:   # the first file that failed, in order
        if f.status == "error":
            f.result()
    where = client.who_has(parts)
    holder = [sorted(where[f.key])[0] for f in parts]
    summaries = client.gather([client.submit(_summary, p, workers=[a], pure=False) for p, a in zip(parts, holder)])
    rows = [s[0] for s in summaries]
    d = _dimension([s[1] for s in summaries], files, n_features)
    classes = _classes([s[2] for s in summaries], files, holder) if loss == "logistic" else None
    empty = sum(s[3] for s in summaries)
    if empty and empty_rows == "keep":
        warnings.warn(f"data.glob: {empty} rows of the {len(files)} files have no features; kept "
                      f"(data.empty_rows=drop or error to change that).", stacklevel=2)
    k = file_parts(rows, int(n))
    xs = [client.submit(_rows_of, p, d, workers=[a], allow_other_workers=True, pure=False)
          for p, a in zip(parts, holder)]
    ys = [client.submit(_labels_of, p, workers=[a], allow_other_workers=True, pure=False)
          for p, a in zip(parts, holder)]
    return DaskRows.hosted(client, xs, ys, holder, rows, d, classes, f"{len(files)} LIBSVM files read where they are",
                           loss=loss, lam=lam, penalty=penalty, fit_intercept=False, workers_per_partition=k,
                           fingerprint=fingerprint)


def read_files(files: list[str], n_features=None, empty_rows: str = "keep"):
    """The files read here one after the other, as one data set (what :func:`hosted_rows` splits over the
    workers): (A CSR of shape (N, d), y the raw labels, the rows of each file), d ``n_features`` or the largest
    index of all.

    Raises
    ------
    DataError
        As :func:`read_file`.
    """
    read = [read_file(f, n_features, empty_rows) for f in files]
    d = _dimension([_summary(p)[1] for p in read], files, n_features)
    A = sp.vstack([_rows_of(p, d) for p in read], format="csr")
    return A, np.concatenate([p[1] for p in read]), [p[0].shape[0] for p in read]
