"""Readers: LIBSVM files (scikit-learn's ``load_svmlight_file``, with a line-exact error for a malformed file) and
scikit-learn's bundled breast-cancer set.

Both return a :class:`~isparse.data.dataset.Dataset` (labels mapped to ±1 by ``to_pm1``).
"""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, check_choice, check_range
from .dataset import Dataset, label_mapping, to_pm1, validate_arrays


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
    """Read a LIBSVM/svmlight file (:func:`read_libsvm`, whose checks apply); labels mapped to {-1, +1}.

    Raises
    ------
    ConfigError, DataError
        :func:`read_libsvm`'s, and labels that are not exactly two (naming the file).
    """
    path = Path(path)
    A, y = read_libsvm(path, n_features, empty_rows)
    return Dataset(A=A, b=to_pm1(y, str(path)), name=name or path.name, source=str(path.resolve()),
                   labels=label_mapping(y))


def read_libsvm(path, n_features: int | None = None, empty_rows: str = "keep") -> tuple:
    """Read a LIBSVM/svmlight file (``.gz`` and ``.bz2`` too, with the same checks) with
    :func:`sklearn.datasets.load_svmlight_file`: (A, y), A CSR float64 of shape (rows, d), y the file's labels as
    float64, of at most two values (a file of a data set split into several may hold one class).

    Indices are 1-based (LIBSVM's format: an index 0 is an error, never a silent switch to 0-based), increasing
    within a line; a label is one number.

    Parameters
    ----------
    n_features : int, optional
        The dimension d (>= the largest index of the file; columns past it are zero); pass it so that files with
        unused trailing features line up. Default: the largest index.
    empty_rows : {"keep", "drop", "error"}
        Rows without any feature (w1a and w8a have some): kept with a warning, dropped, or an error
        naming the first such line.

    Raises
    ------
    ConfigError
        ``n_features`` not an integer >= 1, or ``empty_rows`` not one of keep, drop, error (before reading).
    DataError
        One line naming the file and the physical line (comment and blank lines counted) and the problem: the
        file is missing, a line is not LIBSVM (a label that is not one number, a multilabel list, query ids, an
        index that is not an integer >= 1, unsorted or repeated indices, a value that is not a number), an index
        past ``n_features``, a NaN/infinite value or one whose square overflows float64, a NaN/infinite label or
        a third distinct label, or rows without features with ``empty_rows="error"``.
    """
    from sklearn.datasets import load_svmlight_file

    check_choice("empty_rows", empty_rows, ["keep", "drop", "error"])
    if n_features is not None:
        check_range("n_features", n_features, 1, None, integer=True)
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
    if not np.all(np.isfinite(y)) or np.unique(y).size > 2:
        to_pm1(y, str(path), line_of)   # raises, naming the line of the NaN or of the third label
    empty = np.flatnonzero(np.diff(A.indptr) == 0)
    if empty.size:
        text = f"{path}: {empty.size} rows have no features (the first at line {line_of(empty[0])})"
        if empty_rows == "error":
            raise DataError(text + "; set data.empty_rows=keep or drop to accept them.")
        if empty_rows == "drop":
            keep = np.setdiff1d(np.arange(A.shape[0]), empty)
            A, y = A[keep], y[keep]
        else:
            warnings.warn(text + "; kept (data.empty_rows=drop or error to change that).", stacklevel=3)
    return A, np.asarray(y, dtype=np.float64)


def load_breast_cancer() -> Dataset:
    """scikit-learn's bundled Wisconsin breast-cancer set (569 x 30), standardized (zero mean, unit variance), labels
    malignant -1, benign +1. Needs no download: the file ships inside scikit-learn."""
    from sklearn.datasets import load_breast_cancer as _load
    from sklearn.preprocessing import StandardScaler

    X, y = _load(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return Dataset(A=sp.csr_matrix(X), b=to_pm1(y, "breast_cancer"), name="breast_cancer",
                   source="sklearn.datasets.load_breast_cancer (standardized)",
                   labels=f"{label_mapping(y)} (0 malignant, 1 benign)")
