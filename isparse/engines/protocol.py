"""What an engine provides to the master loop (``isparse.engines.loop``): a declared protocol, no probing.

Both engines (``InProcessPool``, ``isparse.engines.dask.DaskPool``) and their asynchronous views implement it; their
own docstrings say only what they add to the definitions here.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..compression.messages import Messages


class Engine(Protocol):
    """Runs the logical workers' steps.

    Attributes
    ----------
    name : str
        ``inprocess`` or ``dask``.
    method : Method
        The method the workers run (with the run's seed).
    placement : dict
        Logical worker index -> where it runs.
    """

    name: str
    method: object
    placement: dict

    def reference(self, x_star: np.ndarray) -> None:
        """Send x* to every host once; the hosts keep it for the memory term (``exchange(..., monitor=True)``).

        The master loop calls it before the first round when its records need the memory term, so that x* does not
        travel in the timed rounds.
        """

    def exchange(self, x: np.ndarray, monitor: bool = False, down=None) -> tuple[Messages, float | None]:
        """Hand x to the idle workers and return the next batch of messages, ordered by worker.

        A synchronous engine runs one round of every worker; an asynchronous view returns the next
        message to arrive.

        Parameters
        ----------
        x : ndarray of shape (d,)
            The model the workers compute at: x^t, or w^t with a compressed downlink.
        monitor : bool, default False
            Also return the workers' Lyapunov memory term after the step, against the x* given to :meth:`reference`.
        down : DownlinkMessage, optional
            A compressed downlink's message (synchronous engines only): what is sent instead of x; each host makes
            w^t from it (``isparse.compression.downlink``), equal to ``x`` bit for bit.

        Returns
        -------
        batch : Messages
            The workers' messages (their tau m blocks, Algorithms 1-8), ordered by worker index.
        memory : float or None
            The memory term, or None without ``monitor``.

        Raises
        ------
        RuntimeError
            ``monitor`` before any :meth:`reference` (a synchronous engine whose method has a worker memory).
        """

    def downlink_copies(self, workers: np.ndarray) -> int:
        """Copies of x that cross a link when x goes to ``workers`` (``downlink_bytes`` = copies x d x 8 B): one per
        machine holding any of them when machines sum their workers' messages (``messages.aggregate=host``), else one
        per worker."""

    def memory(self, x_star: np.ndarray) -> float:
        """The workers' Lyapunov memory term now, NaN where the method has none (a separate call; the loop uses it
        only off the logging schedule)."""

    def snapshot(self) -> list:
        """Every host's ``HostSnapshot`` (values; one state fetch per round however often it is asked)."""

    def restore(self, snapshots: list, model: np.ndarray | None = None) -> None:
        """Put back the workers' states and counters from snapshots of any placement.

        Parameters
        ----------
        snapshots : list of HostSnapshot
            Together holding every worker.
        model : ndarray of shape (d,), optional
            With a compressed downlink: w, the model the workers last computed at.
        """

    def counters(self) -> dict:
        """Cumulative engine counters for the records: ``time_compute_s``, ``time_comm_s`` (seconds), and the engine's
        own."""

    def stop(self) -> None:
        """End of a run (an asynchronous view waits for its pending calls)."""

    def asynchronous(self, seed: int = 0, spread: float = 1.0) -> "Engine":
        """The asynchronous view of this engine (for methods with ``asynchronous = True``, Algorithm 8).

        ``seed`` and ``spread`` are a simulated delay model's (in-process only).
        """

    def close(self) -> None:
        """Release what the engine holds."""


class AsynchronousView:
    """What the asynchronous views of both engines share: no Lyapunov memory, no checkpoints, the pool's counters.

    Subclasses set ``pool`` and implement ``exchange`` and ``stop``.
    """

    name = "asynchronous"

    def reference(self, x_star):
        """Nothing to keep: no Lyapunov memory term in an asynchronous run."""
        pass

    def memory(self, x_star):
        """NaN: no Lyapunov memory term in an asynchronous run."""
        return float("nan")

    def downlink_copies(self, workers):
        """One copy of x per worker that gets it (``Engine.downlink_copies``; each gets its own model)."""
        return int(np.asarray(workers).size)

    def snapshot(self):
        """Not supported: asynchronous runs take no checkpoints (NotImplementedError)."""
        raise NotImplementedError("asynchronous runs take no checkpoints")

    restore = snapshot

    def counters(self):
        """The pool's counters (``pool.counters()``)."""
        return self.pool.counters()

    def close(self):
        """Nothing to release: the pool owns the workers."""
        pass
