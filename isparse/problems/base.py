"""The declared interface of a problem: what a method, the reference solve and the master loop may ask of it.

A problem is f = (1/n) sum_i f_i (+ R), split over n workers (arXiv:1901.09437, section 2). It says what it
provides in :attr:`Problem.capabilities` (skglm's datafits declare their required attributes the same way):
a method's ``needs`` are checked against it before any work (``isparse.methods.base.check_needs``), and
nothing probes a problem with ``hasattr``. Optional parts have a default here (no closed-form x*, x^0 = 0,
no strong-growth constant), so a problem states only what it has.

Capabilities:

- what its stacked shards compute (``type(shard).capabilities``): ``grads`` (whole local gradients),
  ``grads_at`` (local gradients on sampled coordinates), ``example_grads_at`` (one example's gradient on them),
  ``minibatch_grads_at`` (a minibatch's);
- ``rows``: it is a linear model on the rows of a data set (``A`` of shape (N, d), labels ``b``, ``loss``,
  ``penalty``: the matrix-free Hessian of the reference solve, shared-data methods, rows read on a worker);
- ``exact_reference``: x* is known in closed form (:meth:`reference`);
- ``strong_growth``: its strong-growth constant can be computed (:meth:`strong_growth_constant`, IASGD's rho).
"""

from __future__ import annotations

import numpy as np


class Problem:
    """Base of the problems (``GLMProblem``, ``QuadraticProblem``).

    Attributes (set by a subclass)
    ------------------------------
    name : str
    d : int
        Dimension of x.
    N : int
        Examples in all (sum of the l_i).
    n : int
        Workers.
    shards : list
        Worker i's part: its f_i (``grad``, ``value``, ``l``, ...); ``type(shards[0]).stack`` stacks them.
    reg : Regularizer
        R (zero unless a proximal method's).
    L, mu, L_example : float
        Smoothness of the f_i (max_i L_i), strong convexity of f, smoothness of the examples' f_ij.
    L_f : float
        Smoothness of f itself (one worker holding all the data: L_f <= mean_i L_i <= L).
    L_i : ndarray of shape (n,)
    """

    name = "problem"
    #: capabilities of the problem itself (the shards' are added by :attr:`capabilities`)
    provides: frozenset = frozenset()
    #: row indices of each worker's shard (None: the problem is not split from a data set's rows)
    parts = None
    #: the data set the rows come from (None: none)
    data = None
    #: non-zeros of the data matrix (the reference solve's memory estimate)
    nnz = 0
    #: f is convex (False: the non-convex penalty of Theorem 7)
    convex = True

    @property
    def capabilities(self) -> frozenset:
        """What this problem provides: its own :attr:`provides` and its shards' ``capabilities``."""
        shard = type(self.shards[0]) if self.shards else None
        return frozenset(self.provides) | frozenset(shard.capabilities if shard is not None else ())

    # -- optional parts, with their defaults ------------------------------------------------------------
    def start(self) -> np.ndarray:
        """x^0, shape (d,): 0 unless the problem has its own start."""
        return np.zeros(self.d)

    def reference(self):
        """The closed-form :class:`~isparse.problems.reference.Reference` (capability ``exact_reference``), or None:
        then x* comes from ``reference_solve``."""
        return None

    def check_constants(self) -> None:
        """Refuse, before any work, constants that would not be finite (a no-op unless the problem can overflow)."""

    def null_space(self):
        """(Z, how): an orthonormal basis Z of shape (d, k) of the directions where f has no curvature but the
        penalty's (null(A) of a linear model; the part of x - x* there is logged as ``dist_sq_null``), and how it
        was found; or (None, "not computed") where the problem has none to offer (the default)."""
        return None, "not computed"

    def strong_growth_constant(self) -> float | None:
        """rho_tilde of (1/n) sum_i ||grad f_i(x)||^2 <= rho_tilde ||grad f(x)||^2 (capability ``strong_growth``),
        or None where it cannot be computed."""
        return None

    def describe(self) -> str:
        """Where the problem comes from, for the run's params."""
        return self.name
