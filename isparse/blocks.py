"""Blocks of coordinates, independent tau*m-nice samplings, and the sparse message format.

The coordinates 0..d-1 are cut into m = ceil(d / b) contiguous blocks of size b (the last one
may be shorter). In every iteration each worker i samples its own set U_i of exactly tau*m
blocks, uniformly among all such sets and independently of the other workers and of earlier
iterations (ALGORITHMS.md section 1; arXiv:1901.09437, section 2). Each worker has its own
random stream, spawned from one seed, so that the sampling sequence does not depend on where
the worker runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, check_range

#: Bytes per transmitted value (float64) and per block id (int32); ALGORITHMS.md section 6.
VALUE_BYTES = 8
BLOCK_ID_BYTES = 4
#: Block ids travel as int32, so the ids of a message weigh what the byte count says.
BLOCK_ID_DTYPE = np.int32


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

    def mask(self, blocks: np.ndarray) -> np.ndarray:
        """Boolean mask of shape (d,) that is True on the coordinates of ``blocks``."""
        out = np.zeros(self.d, dtype=bool)
        out[self.coords(blocks)] = True
        return out


def tau_per_n(tau) -> float | None:
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
        raise ConfigError("tau", f"The 'tau' parameter written as '<c>/n' needs a number c > 0; got {tau!r}.")
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


def worker_streams(seed: int, n: int) -> list[np.random.Generator]:
    """One independent random stream per worker, spawned from one seed (``SeedSequence.spawn``)."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def sample_blocks(rng: np.random.Generator, m: int, tau_m: int) -> np.ndarray:
    """A tau*m-nice sampling: ``tau_m`` distinct block ids out of ``m``, uniformly; sorted, shape (tau_m,).

    With ``tau_m == m`` no random numbers are drawn and all blocks are returned.
    """
    if tau_m == m:
        return np.arange(m)
    return np.sort(rng.choice(m, size=tau_m, replace=False))


@dataclass(frozen=True)
class Message:
    """What worker i sends to the master in one iteration: block ids and their values.

    Attributes
    ----------
    worker : int
        Logical worker index i, 0 <= i < n.
    blocks : ndarray of int32, shape (tau*m,) or (0,)
        Sorted block ids U_i.
    values : ndarray of float64, shape (number of coordinates in U_i,)
        The coordinates of the sent vector on U_i, in block order.
    dense : bool
        All m blocks are sent (tau = 1, or IBGD's full gradient): no block ids are needed.
    """

    worker: int
    blocks: np.ndarray
    values: np.ndarray
    dense: bool = False

    @property
    def nbytes(self) -> int:
        """Uplink payload in bytes: values x 8 + block ids x 4, no ids for a dense message (ALGORITHMS.md section 6)."""
        return self.values.size * VALUE_BYTES + (0 if self.dense else self.blocks.size * BLOCK_ID_BYTES)
