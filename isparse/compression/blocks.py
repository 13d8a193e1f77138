"""Blocks of coordinates and the rules for tau.

The coordinates 0..d-1 are cut into m = ceil(d / b) contiguous blocks of size b (the last one
may be shorter). In every iteration each worker i samples its own set U_i of exactly tau*m
blocks (``isparse.compression.sampling``; docs/algorithms.md §1; arXiv:1901.09437, section 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, check_range

@dataclass(frozen=True)
class BlockPartition:
    """Contiguous blocks of a configured size.

    Parameters
    ----------
    d : int
        Dimension of x.
    size : int
        Block size b, 1 <= b <= d.

    Attributes
    ----------
    m : int
        Number of blocks, ceil(d / b).
    """

    d: int
    size: int

    def __post_init__(self):
        check_range("blocks.size", self.size, 1, self.d, high_text="d", integer=True)

    @property
    def m(self) -> int:
        return math.ceil(self.d / self.size)

    def coords(self, blocks: np.ndarray) -> np.ndarray:
        """Coordinates of the given sorted block ids, concatenated in block order; shape (sum of sizes,)."""
        b = self.size
        if b == 1:
            return np.asarray(blocks, dtype=np.intp)
        idx = (np.asarray(blocks, dtype=np.intp)[:, None] * b + np.arange(b)).ravel()
        return idx[idx < self.d]

    def coords_batch(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates of k workers' block sets, worker after worker.

        Parameters
        ----------
        blocks : ndarray of int, shape (k, tau*m)
            Sorted block ids of each worker.

        Returns
        -------
        coords : ndarray of intp, shape (total,)
            Worker 0's coordinates in block order, then worker 1's, ...
        owner : ndarray of intp, shape (total,)
            Row of ``blocks`` (0..k-1) each coordinate belongs to.
        """
        blocks = np.asarray(blocks, dtype=np.intp)
        k, tm = blocks.shape
        b = self.size
        idx = (blocks[:, :, None] * b + np.arange(b)).reshape(k, tm * b)
        owner = np.broadcast_to(np.arange(k)[:, None], idx.shape)
        if b > 1 and self.d % b:                      # only the last block is short
            keep = idx < self.d
            return idx[keep], owner[keep]
        return idx.ravel(), owner.ravel()

    def mask(self, blocks: np.ndarray) -> np.ndarray:
        """Boolean mask of shape (d,) that is True on the coordinates of ``blocks``."""
        out = np.zeros(self.d, dtype=bool)
        out[self.coords(blocks)] = True
        return out


class TauSetting:
    """The constraint of the ``tau`` key (``isparse.params``): ``auto``, ``"<c>/n"`` with c > 0, or a number in
    (0, 1]; whether tau*m is an integer in [1, m] is checked once m is known (:func:`resolve_tau`)."""

    text = "auto, '<c>/n' (c > 0) or a number in [1/m, 1] with tau*m an integer"

    def __call__(self, key, value):
        if value == "auto" or tau_per_n(value, key) is not None:   # tau_per_n raises for a malformed '<c>/n'
            return value
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.") from None
        check_range(key, number, 0.0, 1.0, low_open=True)
        return float(number)


def tau_per_n(tau, key: str = "tau") -> float | None:
    """c of a tau written ``"<c>/n"`` (e.g. ``"0.5/n"``); None for any other form.

    Raises
    ------
    ConfigError
        ``"<c>/n"`` with c not a number > 0.
    """
    if not (isinstance(tau, str) and tau.replace(" ", "").endswith("/n")):
        return None
    try:
        c = float(tau.replace(" ", "")[:-2])
    except ValueError:
        c = float("nan")
    if not c > 0:
        raise ConfigError(key, f"The '{key}' parameter written as '<c>/n' needs a number c > 0; got {tau!r}.")
    return c


def resolve_tau(tau, m: int, n: int) -> tuple[float, int]:
    """The fraction tau and the number of blocks tau*m each worker sends.

    Parameters
    ----------
    tau : "auto", "<c>/n" or float
        ``auto`` is the smallest tau >= 1/n with tau*m an integer, i.e. ceil(m/n)/m.
        ``"<c>/n"`` (e.g. ``"0.5/n"``, ``"2/n"``) follows n the same way: tau*m = ceil(c*m/n), clipped
        to [1, m]; ``"1/n"`` is ``auto``. This is what a tau sweep at several n uses.
        A fraction must lie in [1/m, 1] with tau*m an integer.
    m : int
        Number of blocks.
    n : int
        Number of workers.

    Returns
    -------
    (tau, tau_m) : (float, int)

    Raises
    ------
    ConfigError
        tau outside [1/m, 1], or tau*m not an integer (the message gives the two nearest valid values).
    """
    if tau == "auto" or tau is None:
        tau_m = math.ceil(m / n)
        return tau_m / m, tau_m
    c = tau_per_n(tau)
    if c is not None:
        tau_m = min(m, max(1, math.ceil(c * m / n - 1e-9)))
        return tau_m / m, tau_m
    if isinstance(tau, str):
        try:
            tau = float(tau)
        except ValueError:
            raise ConfigError("tau", f"The 'tau' parameter must be 'auto', '<c>/n' or a number in [1/m, 1] = "
                                     f"[{1 / m:.4g}, 1]; got {tau!r}.") from None
    check_range("tau", tau, 1.0 / m, 1.0, low_text="1/m")
    tau_m = tau * m
    if abs(tau_m - round(tau_m)) > 1e-9 * m:
        lo, hi = max(1, math.floor(tau_m)), min(m, math.ceil(tau_m))
        raise ConfigError("tau", f"The 'tau' parameter times m = {m} must be an integer; got tau = {tau!r} "
                                 f"(tau*m = {tau_m:.4g}). Nearest allowed: {lo}/{m} = {lo / m:.6g} "
                                 f"or {hi}/{m} = {hi / m:.6g}, or tau=auto.")
    tau_m = int(round(tau_m))
    return tau_m / m, tau_m
