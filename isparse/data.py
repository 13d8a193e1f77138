"""Data sets: LIBSVM files, the bundled breast-cancer set, and the split across workers.

Everything returns a :class:`Dataset`: a CSR matrix ``A`` of shape (N, d) and labels
``b`` in {-1, +1} of shape (N,). Files are read by scikit-learn's
``load_svmlight_file``; labels of any binary convention (±1, {0, 1}, {1, 2}) are mapped
to ±1, the smaller label to -1.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .errors import ConfigError, DataError

#: Named LIBSVM sets and their file names in the data directory (see ../shared/datasets/SOURCES.md).
NAMED_FILES = {
    "a1a": "a1a",
    "a9a": "a9a",
    "w1a": "w1a",
    "w8a": "w8a",
    "mushrooms": "mushrooms",
    "phishing": "phishing",
    "german": "german.numer_scale",
}
#: The number of features each named set is published with (a1a uses indices up to 119 of 123).
NAMED_FEATURES = {"a1a": 123, "a9a": 123, "w1a": 300, "w8a": 300, "mushrooms": 112,
                  "phishing": 68, "german": 24}
DATA_DIR_ENV = "ISPARSE_DATA_DIR"


@dataclass(frozen=True)
class Dataset:
    """A binary classification data set.

    Attributes
    ----------
    A : scipy.sparse.csr_matrix of shape (N, d)
        Feature rows a_j.
    b : ndarray of shape (N,)
        Labels in {-1.0, +1.0}.
    name : str
        Short name for logs.
    source : str
        Where it came from (a file path or a package).
    """

    A: sp.csr_matrix
    b: np.ndarray
    name: str
    source: str

    @property
    def N(self) -> int:
        return self.A.shape[0]

    @property
    def d(self) -> int:
        return self.A.shape[1]


def to_pm1(y, source: str = "labels") -> np.ndarray:
    """Map labels of any binary convention to {-1, +1} (the smaller label becomes -1).

    Raises
    ------
    DataError
        If there are not exactly two distinct labels, or a label is NaN/infinite.
    """
    y = np.asarray(y, dtype=float)
    if not np.all(np.isfinite(y)):
        raise DataError(f"{source}: labels contain NaN or infinite values.")
    classes = np.unique(y)
    if classes.size != 2:
        raise DataError(f"{source}: a binary loss needs exactly two distinct labels; "
                        f"found {classes.size}: {classes[:5].tolist()}.")
    return np.where(y == classes[1], 1.0, -1.0)


def validate_arrays(A: sp.csr_matrix, source: str) -> None:
    """Raise :class:`DataError` if ``A`` has NaN/infinite values (naming the first bad row) or is empty."""
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"{source}: the data set is empty (shape {A.shape}).")
    bad = ~np.isfinite(A.data)
    if bad.any():
        first = int(np.searchsorted(A.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        raise DataError(f"{source}: NaN or infinite feature value in row {first + 1} "
                        f"(line {first + 1} for a LIBSVM file).")


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_LIBSVM_LINE = re.compile(rf"^\s*(?:{_NUMBER})(?:,(?:{_NUMBER}))*(\s+qid:\d+)?(\s+\d+:(?:{_NUMBER}))*\s*(#.*)?$",
                          re.IGNORECASE)


def _first_malformed_line(path: Path, n_features: int | None = None):
    """(line number, text, why) of the first line that is not LIBSVM or has an index past n_features."""
    with open(path, "rb") as fh:
        for k, raw in enumerate(fh, start=1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line.strip() and not _LIBSVM_LINE.match(line):
                return k, line[:80], "not 'label index:value ...'"
            if n_features and line.strip():
                idx = [int(tok.split(":")[0]) for tok in line.split("#")[0].split()[1:] if not tok.startswith("qid")]
                if idx and max(idx) > n_features:
                    return k, line[:80], f"feature index {max(idx)} is past the declared dimension {n_features}"
    return None


def load_libsvm(path, n_features: int | None = None, name: str | None = None, empty_rows: str = "keep") -> Dataset:
    """Read a LIBSVM/svmlight file with :func:`sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    path : str or Path
        The file.
    n_features : int, optional
        The dimension d; pass it so that files with unused trailing features line up.
    name : str, optional
        Short name (defaults to the file name).
    empty_rows : {"keep", "drop", "error"}
        Rows without any feature (w1a and w8a have some): kept with a warning, dropped, or an error
        naming the first such line.

    Raises
    ------
    DataError
        If the file is missing, is not LIBSVM (with the first bad line), has an index
        past ``n_features``, NaN or infinite values, or labels that are not binary.
    """
    from sklearn.datasets import load_svmlight_file

    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    try:
        A, y = load_svmlight_file(str(path), n_features=n_features)
    except Exception as exc:  # sklearn raises ValueError / RuntimeError with terse texts
        where = _first_malformed_line(path, n_features)
        detail = f" (line {where[0]}: {where[1]!r}: {where[2]})" if where else ""
        raise DataError(f"{path} is not a valid LIBSVM file{detail}: {exc}") from exc
    A = sp.csr_matrix(A, dtype=np.float64)
    validate_arrays(A, str(path))
    b = to_pm1(y, str(path))
    from .errors import check_choice

    check_choice("data.empty_rows", empty_rows, ["keep", "drop", "error"])
    empty = np.flatnonzero(np.diff(A.indptr) == 0)
    if empty.size:
        text = f"{path}: {empty.size} rows have no features (the first at line {empty[0] + 1})"
        if empty_rows == "error":
            raise DataError(text + "; set data.empty_rows=keep or drop to accept them.")
        if empty_rows == "drop":
            keep = np.setdiff1d(np.arange(A.shape[0]), empty)
            A, b = A[keep], b[keep]
        else:
            warnings.warn(text + "; kept (data.empty_rows=drop or error to change that).", stacklevel=2)
    return Dataset(A=A, b=b, name=name or path.name, source=str(path.resolve()))


def load_breast_cancer() -> Dataset:
    """scikit-learn's bundled Wisconsin breast-cancer set (569 x 30), standardized (zero mean, unit variance).

    Needs no download: the file ships inside scikit-learn.
    """
    from sklearn.datasets import load_breast_cancer as _load
    from sklearn.preprocessing import StandardScaler

    X, y = _load(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return Dataset(A=sp.csr_matrix(X), b=to_pm1(y, "breast_cancer"), name="breast_cancer",
                   source="sklearn.datasets.load_breast_cancer (standardized)")


def resolve_data_dir(data_dir: str | None) -> Path:
    """The directory of named sets: ``data_dir`` if given, else ``$ISPARSE_DATA_DIR``.

    Raises
    ------
    ConfigError
        If neither is set, or the directory does not exist.
    """
    chosen = data_dir or os.environ.get(DATA_DIR_ENV)
    if not chosen:
        raise ConfigError("data.dir", f"The 'data.dir' parameter must name the directory holding the "
                          f"LIBSVM files (or set ${DATA_DIR_ENV}); got nothing.")
    p = Path(chosen).expanduser().resolve()
    if not p.is_dir():
        raise ConfigError("data.dir", f"The 'data.dir' parameter must be an existing directory; got {str(p)!r}.")
    return p


def load_dataset(name: str, data_dir: str | None = None, path: str | None = None, empty_rows: str = "keep",
                 n_features: int | None = None) -> Dataset:
    """Load a data set by name.

    Parameters
    ----------
    name : str
        ``breast_cancer`` (bundled), one of :data:`NAMED_FILES`, or ``libsvm`` (then ``path`` is required).
    data_dir : str, optional
        Directory of the named files; falls back to ``$ISPARSE_DATA_DIR``.
    path : str, optional
        The file, for ``name="libsvm"``.
    empty_rows : {"keep", "drop", "error"}
        What to do with rows without features (see :func:`load_libsvm`).
    n_features : int, optional
        The declared dimension d of a ``libsvm`` file (an index past it is an error).

    Raises
    ------
    ConfigError
        Unknown name, missing directory or missing ``data.path``.
    DataError
        Missing or malformed file.
    """
    if name == "breast_cancer":
        return load_breast_cancer()
    if name == "libsvm":
        if not path:
            raise ConfigError("data.path", "The 'data.path' parameter must name a LIBSVM file for data=libsvm; got nothing.")
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError("data.path", f"The 'data.path' parameter must be an existing file; got {str(p.resolve())!r}.")
        return load_libsvm(p, n_features=n_features, empty_rows=empty_rows)
    if name not in NAMED_FILES:
        allowed = ["breast_cancer", *NAMED_FILES, "libsvm"]
        raise ConfigError("data", f"The 'data' parameter must be one of {', '.join(allowed)}; got {name!r}.")
    file = resolve_data_dir(data_dir) / NAMED_FILES[name]
    if not file.is_file():
        raise ConfigError("data.dir", f"The data set {name!r} was not found: no file {str(file)!r} "
                          f"(set 'data.dir' or ${DATA_DIR_ENV} to the directory holding {NAMED_FILES[name]!r}).")
    return load_libsvm(file, n_features=NAMED_FEATURES[name], name=name, empty_rows=empty_rows)


def split_rows(N: int, n: int, how: str = "shuffle", seed: int = 0) -> list[np.ndarray]:
    """Split the row indices 0..N-1 into ``n`` contiguous parts of sizes differing by at most one.

    Parameters
    ----------
    N : int
        Number of rows.
    n : int
        Number of workers, 1 <= n <= N.
    how : {"shuffle", "contiguous"}
        ``shuffle`` permutes the rows with ``seed`` first (the default, so that every worker
        sees both classes); ``contiguous`` keeps the file order (heterogeneous shards).
    seed : int
        Seed of the permutation.

    Returns
    -------
    list of n sorted ndarrays of row indices.
    """
    from .errors import check_choice, check_range

    check_range("workers.n", n, 1, N, high_text="N (rows)", integer=True)
    check_choice("workers.split", how, ["shuffle", "contiguous"])
    order = np.random.default_rng(seed).permutation(N) if how == "shuffle" else np.arange(N)
    return [np.sort(part) for part in np.array_split(order, n)]
