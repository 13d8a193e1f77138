"""Asynchronous ISGD (arXiv:1901.09437, Algorithm 8; DAve-RPG style).

Each worker computes on the latest model it received and sends its tau*m blocks (the ISGD worker
step, with the worker's own step counter as t) as soon as it is done; the master applies every
message on arrival,

.. math::

    x \\leftarrow x - \\frac{\\gamma}{n} (g_i)_{U_i},

and returns the new model to that worker only. An "iteration" is one applied message, so n of
them do the work of one synchronous round. The delay of a message is the number of updates the
master applied between the worker receiving its model and the message arriving; it is logged
(``delay_mean``, ``delay_max``). The paper's Theorem 9 bound cannot be recovered from the text:
only measurements are logged (docs/algorithms.md §2, §3). The engines' asynchronous views run it; the master loop
is the same.
"""

from __future__ import annotations

import dataclasses

from ..theory import NoBound, theorem1_stepsize
from ..theory.paper import sgd_effective_paper_stepsize, sgd_paper_stepsize
from .isgd import ISGD, ISGDTheory


class Theorem9(ISGDTheory):
    """ISGD's stepsize; Theorem 9's bound cannot be recovered from the paper's text, so none is logged."""

    def bound(self, ctx, method):
        """A NoBound, with the stepsize rule's gamma (Theorem 1's) as ``gamma_theory``."""
        return NoBound(theorem="Theorem 9 (asynchronous ISGD): the bound cannot be recovered from the paper's text",
                       gamma_theory=self.stepsize(ctx.problem.L, ctx.problem.mu, ctx.n, ctx.tau), gamma=method.gamma)


class AsyncISGD(ISGD):
    """Algorithm 8 of arXiv:1901.09437 (asynchronous ISGD), ``algorithm=async_isgd``: ISGD's worker step, with the
    worker's own step count as t; ``batch`` and ``schedule`` as :class:`~isparse.methods.isgd.ISGD`."""

    name = "async_isgd"
    traits = dataclasses.replace(ISGD.traits, asynchronous=True)
    theory = Theorem9(theorem1_stepsize, paper_stepsize=sgd_effective_paper_stepsize,
                      paper_literal_stepsize=sgd_paper_stepsize,
                      codec_why="Theorem 9 gives no bound even without a codec (it cannot be recovered from the "
                                "paper's text)")

    def master_init(self, x0):
        """None: the asynchronous master keeps no state (the engines count the delays)."""
        return None

    def master_step(self, state, x, batch, donate=False):
        r"""Algorithm 8: on arrival of worker i's message, :math:`x \leftarrow x - \frac{\gamma}{n}(g_i)_{U_i}`; the
        new model goes back to worker i only."""
        return self.averaged_step(x, batch), state

    def _extra_iterates(self, state) -> dict:
        """None: no average is kept."""
        return {}
