"""A data set in many files (LIBSVM, or Parquet), each read by the Dask worker it is given to: :func:`hosted_rows`.

The client expands the glob (names and sizes only: it opens no file) and gives the files, in sorted order, to the
Dask workers sorted by address, in contiguous groups as even as ``numpy.array_split`` makes them (file k to worker k
when they are as many). A task pinned there reads each (:func:`read_file` with a reader: :func:`read_libsvm_file`,
every check of a one-file read, or :func:`read_parquet_file`, a label column and numeric feature columns; an error
names the file and the worker), and their rows become that worker's shards
(:meth:`isparse.data.dask_collection.DaskRows.hosted`). Only small summaries reach the client: each file's rows,
columns and labels. The restriction is loose, so a file whose worker is lost is read again by another (Dask
recomputes the lost shards from this graph).

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

__all__ = ["expand", "file_parts", "fingerprint", "hosted_rows", "read_file", "read_files", "read_libsvm_file",
           "read_parquet_file"]


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


def read_libsvm_file(path: str, n_features=None, empty_rows: str = "keep") -> tuple:
    """A LIBSVM file as a part: (A CSR of shape (rows, largest index or ``n_features``), y its raw labels, the rows
    without features, None: no column names), with every check of :func:`isparse.data.libsvm.read_libsvm`."""
    import warnings

    from .libsvm import read_libsvm

    with warnings.catch_warnings(record=True):   # empty rows: counted, said once by the client
        warnings.simplefilter("always")
        A, y = read_libsvm(path, n_features, empty_rows)
    return A, y, int(np.count_nonzero(np.diff(A.indptr) == 0)), None


def read_parquet_file(path: str, label: str = "y", features=None) -> tuple:
    """A Parquet file as a part: (A CSR of its feature columns, float64, zeros dropped; y its ``label`` column; 0;
    the feature columns' names). ``features``: the columns to take, in order (None: every column but ``label``, in
    the file's order).

    Raises
    ------
    DataError
        No ``label`` column, a feature column that is missing or not numeric, a NaN or infinite value (naming the
        row and the column).
    """
    import pyarrow
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except pyarrow.ArrowException as exc:
        raise DataError(f"{path} is not a Parquet file ({type(exc).__name__}: {exc}).") from None
    if label not in names:
        raise DataError(f"{path} has no label column {label!r} (data.label); its columns: {_few(names)}.")
    wanted = [c for c in names if c != label] if features is None else list(features)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"{path} has no feature column {missing[0]!r} (data.features); its columns: {_few(names)}.")
    table = pq.read_table(path, columns=[*wanted, label])
    try:
        X = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
                             for c in wanted]) if wanted else np.zeros((table.num_rows, 0))
        y = table.column(label).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: a feature or label column is not numeric ({exc}).") from None
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        raise DataError(f"{path}: row {row + 1}, column {wanted[col]!r} is {X[row, col]}; the features must be finite.")
    if not np.all(np.isfinite(y)) or np.unique(y).size > 2:
        from .dataset import to_pm1

        to_pm1(y, str(path))   # raises, naming the row of the NaN or of the third label
    return sp.csr_matrix(X), y, 0, wanted


def _few(names) -> str:
    names = list(names)
    return ", ".join(map(repr, names[:6])) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")


def read_file(path: str, reader) -> tuple:
    """``reader(path)`` where this task runs (:func:`read_libsvm_file`, :func:`read_parquet_file`, bound to their
    options); a DataError names the file and the Dask worker (or the client)."""
    try:
        part = reader(path)
    except DataError as exc:
        raise DataError(f"data.glob: {exc} (read on {_here()})") from None
    except OSError as exc:
        raise DataError(f"data.glob: {path} cannot be read on {_here()}: {type(exc).__name__}: {exc}") from None
    if part[0].shape[0] == 0:
        raise DataError(f"data.glob: {path} holds no rows (read on {_here()}).")
    return part


def _summary(part) -> tuple:
    """(rows, columns (the largest feature index for LIBSVM), the labels, empty rows, the column names) of a part."""
    A, y, empty, names = part
    top = A.shape[1] if names is not None else (int(A.indices.max()) + 1 if A.nnz else 0)
    return A.shape[0], top, np.unique(y), empty, names


def _same_columns(names, files, where) -> None:
    """A DataError naming the first file (and its worker) whose feature columns differ from the first file's."""
    for f, w, cols in zip(files, where, names):
        if cols is not None and cols != names[0]:
            raise DataError(f"data.glob: {f} has {len(cols)} feature columns ({_few(cols)}), {files[0]} has "
                            f"{len(names[0])} ({_few(names[0])}): every file must have the same features (read on "
                            f"{w}).")


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


def hosted_rows(client, files: list[str], reader, *, n: int, n_features=None, loss: str = "logistic",
                lam: float = 0.001, penalty: str = "l2", fingerprint: dict | None = None, empty_rows: str = "keep"):
    """The rows of ``files`` on the Dask workers of ``client``, each file read by one worker with ``reader`` (a
    picklable ``reader(path)``: :func:`read_libsvm_file` or :func:`read_parquet_file` with their options bound; the
    module docstring), as the shards of ``n`` logical workers: a :class:`~isparse.data.dask_collection.DaskRows`.
    ``n_features``: d (LIBSVM; None: the largest index of all files); ``empty_rows``: what the reader did with rows
    without features (``keep``: one warning here counts them).

    Raises
    ------
    DataError
        A file that cannot be read on its worker (missing there, not readable, not LIBSVM or Parquet, an index
        past ``n_features``, NaN or inf), naming the file and the worker; feature columns that differ from the first
        file's (naming the file and its worker); not two labels in all.
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
    parts = [client.submit(read_file, f, reader, workers=[a], allow_other_workers=True, pure=False)
             for f, a in zip(files, given)]
    wait(parts)
    for f in parts:   # the first file that failed, in order
        if f.status == "error":
            f.result()
    where = client.who_has(parts)
    holder = [sorted(where[f.key])[0] for f in parts]
    summaries = client.gather([client.submit(_summary, p, workers=[a], pure=False) for p, a in zip(parts, holder)])
    rows = [s[0] for s in summaries]
    _same_columns([s[4] for s in summaries], files, [f"the Dask worker {a}" for a in holder])
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
    return DaskRows.hosted(client, xs, ys, holder, rows, d, classes, f"{len(files)} files read where they are",
                           loss=loss, lam=lam, penalty=penalty, fit_intercept=False, workers_per_partition=k,
                           fingerprint=fingerprint)


def read_files(files: list[str], reader, n_features=None):
    """The files read here one after the other, as one data set (what :func:`hosted_rows` splits over the
    workers): (A CSR of shape (N, d), y the raw labels, the rows of each file), d ``n_features`` or the largest
    index of all (the feature columns of Parquet files).

    Raises
    ------
    DataError
        As :func:`read_file`, and files whose feature columns differ.
    """
    read = [read_file(f, reader) for f in files]
    summaries = [_summary(p) for p in read]
    _same_columns([s[4] for s in summaries], files, ["the client"] * len(files))
    d = _dimension([s[1] for s in summaries], files, n_features)
    A = sp.vstack([_rows_of(p, d) for p in read], format="csr")
    return A, np.concatenate([p[1] for p in read]), [p[0].shape[0] for p in read]
