"""Data sets: LIBSVM files, the bundled breast-cancer set, and the split across workers.

Everything returns a :class:`Dataset`: a CSR matrix ``A`` of shape (N, d) and labels
``b`` in {-1, +1} of shape (N,). Files are read by scikit-learn's
``load_svmlight_file``; labels of any binary convention (±1, {0, 1}, {1, 2}) are mapped
to ±1, the smaller label to -1.
"""

from __future__ import annotations

import io
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
    labels : str
        How the labels of the source were mapped to -1/+1 (``"1 -> -1, 2 -> +1"``; logged as ``data.labels``).
    """

    A: sp.csr_matrix
    b: np.ndarray
    name: str
    source: str
    labels: str = ""

    @property
    def N(self) -> int:
        return self.A.shape[0]

    @property
    def d(self) -> int:
        return self.A.shape[1]


def label_mapping(y) -> str:
    """How :func:`to_pm1` maps the two labels of ``y``: ``"0 -> -1, 1 -> +1"``."""
    lo, hi = np.unique(np.asarray(y, dtype=float))[:2]
    return f"{lo:g} -> -1, {hi:g} -> +1"


def to_pm1(y, source: str = "labels", line_of=None) -> np.ndarray:
    """Map labels of any binary convention to {-1, +1} (the smaller label becomes -1; :func:`label_mapping` says
    how).

    Parameters
    ----------
    y : array-like of shape (N,)
    source : str
        What to name in the message (the file).
    line_of : callable, optional
        Row index -> physical line of the file, to name the first bad row's line.

    Raises
    ------
    DataError
        If there are not exactly two distinct labels (naming the first row with a third one), or a label is
        NaN/infinite (naming the first such row).
    """
    y = np.asarray(y, dtype=float)

    def at(row):
        return f"row {row + 1}" + (f" (line {line_of(row)})" if line_of is not None else "")

    if not np.all(np.isfinite(y)):
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise DataError(f"{source}: labels contain NaN or infinite values, the first in {at(row)}: {float(y[row])}; "
                        f"a label must be a finite number.")
    classes = np.unique(y)
    if classes.size != 2:
        where = ""
        if classes.size > 2:
            _, first = np.unique(y, return_index=True)
            row = int(np.sort(first)[2])
            where = f"; the third distinct label, {float(y[row]):g}, is in {at(row)}"
        raise DataError(f"{source}: a binary loss needs exactly two distinct labels; "
                        f"found {classes.size}: {classes[:5].tolist()}{where}.")
    return np.where(y == classes[1], 1.0, -1.0)


def validate_arrays(A: sp.csr_matrix, source: str, line_of=None) -> None:
    """Refuse data whose values cannot be used: NaN/infinite values, and rows whose squared norms are not finite.

    The stepsizes and bounds are computed from L, a function of the squared norms ||a_j||^2 of the rows
    (``isparse.problems.glm``): a value above about 1.3e154 has an infinite square in float64, and L, the
    stepsize and the bound would be infinite or NaN. The sum of squares over all rows must be finite too.

    Parameters
    ----------
    A : csr_matrix of shape (N, d)
    source : str
        What to name in the message (the file).
    line_of : callable, optional
        Row index (0-based) -> the physical line of the file it was read from (1-based); without it the
        message names the row only.

    Raises
    ------
    DataError
        One line naming ``source``, the first bad row (and its line), the value and what is allowed; or an
        empty data set.
    """
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"{source}: the data set is empty (shape {A.shape}).")

    def where(k):   # the row of stored entry k, its line and the entry's feature index (1-based)
        row = int(np.searchsorted(A.indptr, k, side="right") - 1)
        line = f"line {line_of(row)}, " if line_of is not None else ""
        return f"row {row + 1} ({line}feature index {int(A.indices[k]) + 1})", row

    bad = ~np.isfinite(A.data)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        text, _ = where(k)
        raise DataError(f"{source}: NaN or infinite feature value in {text}: {float(A.data[k])!r}; every value must be a "
                        f"finite number.")
    with np.errstate(over="ignore"):
        sq = A.data * A.data
        total = np.cumsum(sq)
    if A.data.size and not np.isfinite(total[-1]):
        k = int(np.flatnonzero(~np.isfinite(total))[0])
        text, row = where(k)
        what = (f"the value {float(A.data[k]):.6g} has an infinite square in float64" if not np.isfinite(sq[k]) else
                f"the sum of the squared values of rows 1 to {row + 1} overflows float64")
        raise DataError(f"{source}: {text}: {what}, so L (from the squared norms of the rows) would be infinite; "
                        f"every |value| must be below 1.3e154 and the sum of squares below 1.8e308 "
                        f"(rescale the data).")


def open_binary(path):
    """``path`` opened for reading bytes, decompressed as scikit-learn's reader does for ``.gz`` and ``.bz2``."""
    path = str(path)
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")
    if path.endswith(".bz2"):
        import bz2

        return bz2.open(path, "rb")
    return open(path, "rb")


def _content(raw: bytes) -> list[bytes]:
    """The tokens of a LIBSVM line before any '#', as scikit-learn's reader splits them."""
    h = raw.find(b"#")
    return (raw if h < 0 else raw[:h]).split()


def data_lines(path) -> np.ndarray:
    """The physical line (1-based) of each data row of a LIBSVM file, shape (N,).

    A line is a row when it has a token before any '#' (scikit-learn's rule): comment and blank lines are
    not rows, so row j is not line j in general.
    """
    with open_binary(path) as fh:
        return np.array([k for k, raw in enumerate(fh, start=1) if _content(raw)], dtype=np.int64)


def _number(tok: bytes) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


#: the largest feature index scikit-learn's svmlight reader converts (a C int)
_MAX_INDEX = 2**31 - 1

_LABEL_RULE = "a label must be one number (a binary class: -1/+1, 0/1 or 1/2)"


def _line_problem(tokens: list[bytes], n_features: int | None) -> str | None:
    """Why a LIBSVM line (its tokens) cannot be read, or None."""
    label = tokens[0].decode("utf-8", errors="replace")
    if "," in label and ":" not in label:
        return f"the label {label!r} is a list: multilabel files are not supported; {_LABEL_RULE}"
    if not _number(tokens[0]):
        return f"the line must start with a label; got {label!r}: {_LABEL_RULE}"
    prev = 0
    for pos, tok in enumerate(tokens[1:]):
        text = tok.decode("utf-8", errors="replace")
        if pos == 0 and text.startswith("qid:"):
            return (f"{text!r}: query ids (a ranking file) are not supported; a line must be "
                    f"'label index:value index:value ...'")
        idx, sep, value = text.partition(":")
        if not sep or not re.fullmatch(r"[-+]?\d+", idx):
            return f"{text!r} is not 'index:value' with an integer index"
        idx = int(idx)
        if idx < 1:
            return f"feature index {idx}: LIBSVM indices start at 1"
        if idx > _MAX_INDEX:
            return f"feature index {idx} is too large (scikit-learn's reader takes indices up to {_MAX_INDEX})"
        if idx == prev:
            return f"feature index {idx} repeats: the indices of a line must be increasing, each at most once"
        if idx < prev:
            return (f"feature index {idx} follows index {prev}: the indices of a line must be increasing "
                    f"(sorted, no duplicates)")
        if not _number(value.encode()):
            return f"the value {value!r} of feature index {idx} is not a number"
        if n_features and idx > n_features:
            return (f"feature index {idx} is past the declared dimension {n_features} (data.n_features must be at "
                    f"least the largest index of the file, or null)")
        prev = idx
    return None


def _first_malformed_line(path: Path, n_features: int | None = None):
    """(physical line number, text, why) of the first line that cannot be read as LIBSVM, or None."""
    with open_binary(path) as fh:
        for k, raw in enumerate(fh, start=1):
            tokens = _content(raw)
            if tokens:
                why = _line_problem(tokens, n_features)
                if why:
                    return k, raw.decode("utf-8", errors="replace").rstrip("\r\n")[:80], why
    return None


def load_libsvm(path, n_features: int | None = None, name: str | None = None, empty_rows: str = "keep") -> Dataset:
    """Read a LIBSVM/svmlight file with :func:`sklearn.datasets.load_svmlight_file`.

    Indices are 1-based (LIBSVM's format: an index 0 is an error, never a silent switch to 0-based), increasing
    within a line; a label is one number.

    Parameters
    ----------
    path : str or Path
        The file (``.gz`` and ``.bz2`` are decompressed, with the same checks).
    n_features : int, optional
        The dimension d (>= the largest index of the file; columns past it are zero); pass it so that files with
        unused trailing features line up. Default: the largest index.
    name : str, optional
        Short name (defaults to the file name).
    empty_rows : {"keep", "drop", "error"}
        Rows without any feature (w1a and w8a have some): kept with a warning, dropped, or an error
        naming the first such line.

    Returns
    -------
    Dataset
        ``A`` of shape (N, d), ``b`` in {-1, +1}.

    Raises
    ------
    ConfigError
        ``n_features`` not an integer >= 1, or ``empty_rows`` not one of keep, drop, error (before reading).
    DataError
        One line naming the file and the physical line (comment and blank lines counted) and the problem: the
        file is missing, a line is not LIBSVM (a label that is not one number, a multilabel list, query ids, an
        index that is not an integer >= 1, unsorted or repeated indices, a value that is not a number), an index
        past ``n_features``, a NaN/infinite value or one whose square overflows float64, labels that are not
        binary, or rows without features with ``empty_rows="error"``.
    """
    from sklearn.datasets import load_svmlight_file

    from .errors import check_choice, check_range

    check_choice("data.empty_rows", empty_rows, ["keep", "drop", "error"])
    if n_features is not None:
        check_range("data.n_features", n_features, 1, None, integer=True)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    source = str(path)
    if path.suffix in (".gz", ".bz2"):   # decompressed whole first: a truncated or corrupt file is an error, not a
        try:                             # shorter data set
            with open_binary(path) as fh:
                source = io.BytesIO(fh.read())
        except (OSError, EOFError, ValueError) as exc:
            raise DataError(f"{path} cannot be decompressed as a {path.suffix} file ({type(exc).__name__}: {exc}): "
                            f"it is truncated or not {path.suffix}-compressed.") from exc
    try:
        A, y, qid = load_svmlight_file(source, n_features=n_features, zero_based=False, query_id=True)
    except Exception as exc:  # sklearn raises ValueError / RuntimeError with terse texts, naming no line
        where = _first_malformed_line(path, n_features)
        if where:
            raise DataError(f"{path} is not a valid LIBSVM file (line {where[0]}: {where[1]!r}: {where[2]}).") from exc
        raise DataError(f"{path} is not a valid LIBSVM file: {exc}") from exc
    if len(qid):   # query ids would be dropped without a word
        where = _first_malformed_line(path, n_features) or ("?", "", "query ids (qid:) are not supported")
        raise DataError(f"{path} is not a valid LIBSVM file (line {where[0]}: {where[1]!r}: {where[2]}).")
    lines = {}

    def line_of(row):
        if "all" not in lines:
            lines["all"] = data_lines(path)
        return int(lines["all"][row])

    A = sp.csr_matrix(A, dtype=np.float64)
    validate_arrays(A, str(path), line_of)
    b = to_pm1(y, str(path), line_of)
    labels = label_mapping(y)
    empty = np.flatnonzero(np.diff(A.indptr) == 0)
    if empty.size:
        text = f"{path}: {empty.size} rows have no features (the first at line {line_of(empty[0])})"
        if empty_rows == "error":
            raise DataError(text + "; set data.empty_rows=keep or drop to accept them.")
        if empty_rows == "drop":
            keep = np.setdiff1d(np.arange(A.shape[0]), empty)
            A, b = A[keep], b[keep]
        else:
            warnings.warn(text + "; kept (data.empty_rows=drop or error to change that).", stacklevel=2)
    return Dataset(A=A, b=b, name=name or path.name, source=str(path.resolve()), labels=labels)


def load_breast_cancer() -> Dataset:
    """scikit-learn's bundled Wisconsin breast-cancer set (569 x 30), standardized (zero mean, unit variance).

    Needs no download: the file ships inside scikit-learn.
    """
    from sklearn.datasets import load_breast_cancer as _load
    from sklearn.preprocessing import StandardScaler

    X, y = _load(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return Dataset(A=sp.csr_matrix(X), b=to_pm1(y, "breast_cancer"), name="breast_cancer",
                   source="sklearn.datasets.load_breast_cancer (standardized)",
                   labels=f"{label_mapping(y)} (0 malignant, 1 benign)")


def load_dataset(name: str, data_dir: str | None = None, path: str | None = None, empty_rows: str | None = None,
                 n_features: int | None = None) -> Dataset:
    """Read a data set by name: the data source ``name`` of :mod:`isparse.sources` with these options (as
    ``data=<name> data.dir=... data.path=... data.empty_rows=... data.n_features=...``), no cache.

    Parameters
    ----------
    name : str
        ``breast_cancer`` (bundled), a named LIBSVM set (:data:`NAMED_FILES`) or ``libsvm`` (then ``path``).
    data_dir : str, optional
        ``data.dir`` of a named set (default ``$ISPARSE_DATA_DIR``).
    path : str, optional
        ``data.path`` of ``libsvm``.
    empty_rows : {"keep", "drop", "error"}, optional
        ``data.empty_rows`` (see :func:`load_libsvm`).
    n_features : int, optional
        ``data.n_features``: the dimension d of a LIBSVM file (default: the published one of a named set,
        :data:`NAMED_FEATURES`; the largest index of a ``libsvm`` file).

    Raises
    ------
    ConfigError
        Unknown name, an option this source does not take, a missing directory or file (all before reading).
    DataError
        A file that cannot be used (see :func:`load_libsvm`).
    """
    from .sources import source

    given = {"dir": data_dir, "path": path, "empty_rows": empty_rows, "n_features": n_features}
    return source(name, **{k: v for k, v in given.items() if v is not None}).read()


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
