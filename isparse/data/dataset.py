"""A data set in memory (:class:`Dataset`), the checks every loader applies, and the split across workers.

A :class:`Dataset` is a CSR matrix ``A`` of shape (N, d) and labels ``b`` in {-1, +1} of shape (N,); labels of
any binary convention (±1, {0, 1}, {1, 2}) are mapped to ±1, the smaller label to -1 (:func:`to_pm1`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, check_choice, check_range


@dataclass(frozen=True)
class Dataset:
    """A binary classification data set (docs/glossary.md: the data).

    Attributes
    ----------
    A : scipy.sparse.csr_matrix of shape (N, d)
        Feature rows a_j.
    b : ndarray of shape (N,)
        Labels in {-1.0, +1.0}.
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
        """Number of examples, the rows of ``A``."""
        return self.A.shape[0]

    @property
    def d(self) -> int:
        """Dimension, the columns of ``A``."""
        return self.A.shape[1]


def label_mapping(y) -> str:
    """How :func:`to_pm1` maps the two labels of ``y``: ``"0 -> -1, 1 -> +1"``."""
    lo, hi = np.unique(np.asarray(y, dtype=float))[:2]
    return f"{lo:g} -> -1, {hi:g} -> +1"


def to_pm1(y, source: str = "labels", line_of=None) -> np.ndarray:
    """Map labels ``y`` of any binary convention to {-1.0, +1.0} (the smaller label becomes -1; :func:`label_mapping`
    says how); ``source`` is named in the message, ``line_of`` maps a row to its physical line of the file.

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
    ``line_of`` maps a row (0-based) to the physical line of the file it was read from (1-based); without it the
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


def split_rows(N: int, n: int, how: str = "shuffle", seed: int = 0) -> list[np.ndarray]:
    """Split the row indices 0..N-1 into ``n`` sorted contiguous parts of sizes differing by at most one.

    ``how="shuffle"`` permutes the rows with ``seed`` first (the default, so that every worker sees both classes);
    ``"contiguous"`` keeps the file order (heterogeneous shards).

    Raises
    ------
    ConfigError
        (``n``) n not an integer in [1, N]; (``how``) another split.
    """
    check_range("n", n, 1, N, high_text="N (rows of the data set)", integer=True)
    check_choice("how", how, ["shuffle", "contiguous"])
    order = np.random.default_rng(seed).permutation(N) if how == "shuffle" else np.arange(N)
    return [np.sort(part) for part in np.array_split(order, n)]
