"""The contract every method follows: two worker functions, two master functions.

An engine runs, per iteration t (arXiv:1901.09437, section 2, the common template)::

    messages = [worker_step(i, shard_i, state_i, x, rng_i) for i in workers]   # on the workers
    x, master_state = master_step(master_state, x, messages)                   # on the master

Workers only see their own shard, state and random stream; the master only sees messages.
The in-process and Dask engines call the same functions in the same order, with messages
ordered by worker index, so one seed gives the same iterates in both.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..blocks import BLOCK_ID_DTYPE, BlockPartition, Message, sample_blocks


class Method(Protocol):
    """A distributed method written as worker and master steps (optax-style pure functions).

    Attributes
    ----------
    name : str
        The id used in configs (``algorithm=<name>``).
    n : int
        Number of workers.
    blocks : BlockPartition
    tau_m : int
        Blocks each worker sends per iteration.
    gamma : float
        Stepsize gamma.
    """

    name: str

    def worker_init(self, i: int, shard, x0: np.ndarray) -> Any: ...

    def worker_step(self, i: int, shard, state, x: np.ndarray, rng: np.random.Generator) -> tuple[Message, Any]: ...

    def master_init(self, x0: np.ndarray) -> Any: ...

    def master_step(self, state, x: np.ndarray, messages: list[Message]) -> tuple[np.ndarray, Any]: ...


class BlockMethod:
    """Shared pieces of the methods that send tau*m blocks of a d-vector.

    Parameters
    ----------
    n : int
        Number of workers.
    blocks : BlockPartition
        The m blocks.
    tau_m : int
        Blocks per worker per iteration, 1 <= tau_m <= m.
    gamma : float
        Stepsize gamma > 0.
    """

    def __init__(self, n: int, blocks: BlockPartition, tau_m: int, gamma: float):
        self.n, self.blocks, self.tau_m, self.gamma = int(n), blocks, int(tau_m), float(gamma)

    @property
    def tau(self) -> float:
        """tau = tau_m / m."""
        return self.tau_m / self.blocks.m

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw U_i (tau*m-nice) and return (block ids, their coordinates)."""
        U = sample_blocks(rng, self.blocks.m, self.tau_m)
        return U, self.blocks.coords(U)

    @staticmethod
    def local_grad(shard, x: np.ndarray, coords: np.ndarray) -> np.ndarray:
        """(grad f_i(x))[coords]: only those coordinates where the shard can (``grad_coords``), else sliced."""
        if hasattr(shard, "grad_coords"):
            return shard.grad_coords(x, coords)
        return shard.grad(x)[coords]

    def message(self, i: int, U: np.ndarray, values: np.ndarray) -> Message:
        """The message of worker i carrying ``values`` on the blocks U (dense when U is every block)."""
        return Message(i, U.astype(BLOCK_ID_DTYPE), values, dense=U.size == self.blocks.m)

    # defaults for methods without per-worker state
    def worker_init(self, i, shard, x0):
        return None

    def master_init(self, x0):
        return None

    def averaged_step(self, x, messages, gamma=None):
        """x - (gamma/n) sum_i (message_i scattered into R^d): the master step of Algorithms 1, 3, 5, 6."""
        return x - ((self.gamma if gamma is None else gamma) / self.n) * self.aggregate(messages)

    def aggregate(self, messages: list[Message]) -> np.ndarray:
        """sum_i of the messages scattered into R^d, in worker order; shape (d,)."""
        total = np.zeros(self.blocks.d)
        for msg in sorted(messages, key=lambda m: m.worker):
            total[self.blocks.coords(msg.blocks)] += msg.values
        return total
