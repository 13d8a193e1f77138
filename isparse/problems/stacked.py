"""The stacked shards: what a problem gives the engines, and all a method's worker step reads of it.

A host holds the shards (``problem.shards``, worker i's f_i) of its k logical workers and stacks them once,
``type(shard).stack(shards, ids)``; every worker step then reads that one object, through the members of
:class:`Stacked`. The gradient members a stacked class has are those its ``capabilities`` declare (:data:`MEMBERS`),
which a method's ``traits.needs`` are checked against before any work; :func:`missing_members` says what an object
lacks. :class:`~isparse.problems.glm_stack.StackedGLM` and :class:`~isparse.problems.quadratic.StackedQuadratic`
are the built-in ones.

A worker's numbers must not depend on where it is placed: worker p's values must be the same bits whichever other
workers share its host (the in-process engine holds each worker alone, a Dask host several), or the two engines'
iterates differ. A sum over worker p's rows therefore runs over its rows only, in a fixed order (a NumPy reduction
along an axis, ``np.add.reduceat``, ``np.bincount``), never through a BLAS product over all the stacked rows, whose
blocking depends on how many rows there are.

The arguments are named as in the glossary (docs/glossary.md): ``x`` of shape (d,); ``which`` hosted worker
positions (0..k-1); ``pw``, ``pc`` the hosted worker and the coordinate of each of P pairs, worker-major (``pw``
non-decreasing); ``U`` each hosted worker's sorted block ids, shape (k, tau m), ``blocks`` the
:class:`~isparse.compression.blocks.BlockPartition`, ``pairs`` ``blocks.coords_batch(U)`` when the caller has it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

#: capability -> the members of :class:`Stacked` a class that declares it has (``grads_at``: the sparsified
#: methods' local gradients, read through ``grads`` above an eighth of the coordinates)
MEMBERS = {"grads": ("grads",), "grads_at": ("grads_at", "grads_on_blocks", "grads"),
           "example_grads_at": ("example_grads_at", "example_grads", "row_ptr"),
           "minibatch_grads_at": ("minibatch_grads_at",)}
#: the members every stacked object has
ALWAYS = ("ids", "k", "l", "capabilities")


class Stacked(Protocol):
    """The k hosted workers' f_p, p = 0..k-1, stacked (``type(shard).stack(shards, ids)``); the gradient members
    beyond ``grads`` are needed only where ``capabilities`` declares them (:data:`MEMBERS`).

    Attributes
    ----------
    ids : ndarray of int64, shape (k,)
        The logical worker ids of the hosted workers, in the order of ``shards``; position p is worker ``ids[p]``.
    l : ndarray of int64, shape (k,)
        Examples l_p of each hosted worker (f_p = (1/l_p) sum_j f_pj; 1 for a problem without examples).
    row_ptr : ndarray of int64, shape (k + 1,)
        Worker p's examples are rows ``row_ptr[p]:row_ptr[p + 1]`` of the host's example tables (ISAGA's).
    capabilities : tuple of str
        What it computes: ``grads``, ``grads_at``, ``example_grads_at``, ``minibatch_grads_at``.
    """

    ids: np.ndarray
    l: np.ndarray
    row_ptr: np.ndarray
    capabilities: tuple

    @property
    def k(self) -> int:
        """int: the number k of hosted workers."""

    def grads(self, x: np.ndarray, which: np.ndarray | None = None) -> np.ndarray:
        """grad f_p(x) of the hosted workers ``which`` (default all), dense, shape (w, d)."""

    def grads_at(self, x: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """grad f_{pw[q]}(x)[pc[q]] for every pair q, shape (P,)."""

    def grads_on_blocks(self, x: np.ndarray, U: np.ndarray, blocks, pairs=None) -> np.ndarray:
        """grad f_p(x) on the coordinates of each hosted worker's blocks ``U``, in ``blocks.coords_batch(U)`` order
        (worker after worker, ascending coordinates), shape (P,): :meth:`grads_at` on those pairs."""

    def example_grads_at(self, x: np.ndarray, rows: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """grad f_{p j_p}(x)[c] for the pairs (p, c), j_p = ``rows[p]`` the local example (0 <= j_p < l_p) of hosted
        worker p, shape (P,) (ISAGA, Algorithm 5)."""

    def minibatch_grads_at(self, x: np.ndarray, batch: np.ndarray, pw: np.ndarray, pc: np.ndarray) -> np.ndarray:
        """(1/B) sum_{j in batch[p]} grad f_pj(x)[c] for the pairs (p, c), ``batch`` of shape (k, B) each hosted
        worker's local example indices, shape (P,) (ISGD, Algorithm 6)."""

    def example_grads(self, x: np.ndarray) -> np.ndarray:
        """grad f_pj(x) of every hosted example, dense, shape (row_ptr[-1], d), row ``row_ptr[p] + j`` worker p's
        example j (the Lyapunov targets of ISAGA's tables)."""


def missing_members(stacked) -> list[str]:
    """The members of :class:`Stacked` that ``stacked`` (an instance) lacks among those it must have: :data:`ALWAYS`
    and the :data:`MEMBERS` of the capabilities it declares; an unknown capability is reported as
    ``capabilities: <name>``."""
    caps = tuple(getattr(stacked, "capabilities", ()))
    need = list(ALWAYS) + [m for c in caps for m in MEMBERS.get(c, ())]
    out = [f"capabilities: {c}" for c in caps if c not in MEMBERS]
    for name in dict.fromkeys(need):
        if not hasattr(stacked, name) or (name in Stacked.__dict__ and callable(Stacked.__dict__[name])
                                          and not callable(getattr(stacked, name))):
            out.append(name)
    return out


__all__ = ["ALWAYS", "MEMBERS", "Stacked", "missing_members"]
