"""Asynchronous ISGD (arXiv:1901.09437, Algorithm 8; DAve-RPG style).

Each worker computes on the latest model it received and sends its tau*m blocks (the ISGD worker
step) as soon as it is done; the master applies every message on arrival,

.. math::

    x \\leftarrow x - \\frac{\\gamma}{n} (g_i)_{U_i},

and returns the new model to that worker only. An "iteration" is one applied message, so n of
them do the work of one synchronous round. The delay of a message is the number of updates the
master applied between the worker receiving its model and the message arriving; it is logged
(``delay_mean``, ``delay_max``). The paper's Theorem 9 bound cannot be recovered from the text:
only measurements are logged. Run by :func:`isparse.engines.async_loop.run_async`.
"""

from __future__ import annotations

from .isgd import ISGD


class AsyncISGD(ISGD):
    """Algorithm 8 (asynchronous ISGD). The worker step is ISGD's; the master applies one message at a time."""

    name = "async_isgd"
    asynchronous = True

    def master_init(self, x0):
        return None

    def master_apply(self, state, x, message):
        """x - (gamma/n) (message scattered into R^d)."""
        return self.averaged_step(x, [message]), state

    def extra_iterates(self, state) -> dict:
        return {}
