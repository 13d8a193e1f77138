"""The declared interface of a problem: what a method, the reference solve and the master loop may ask of it.

A problem is f = (1/n) sum_i f_i (+ R), split over n workers (arXiv:1901.09437, section 2). It says what it
provides in :attr:`Problem.capabilities` (skglm's datafits declare their required attributes the same way):
a method's ``needs`` are checked against it before any work (``isparse.methods.base.check_needs``), and
nothing probes a problem with ``hasattr``. Optional parts have a default here (no closed-form x*, x^0 = 0,
no strong-growth constant), so a problem states only what it has.

Capabilities:

- what its stacked shards compute (``type(shard).capabilities``): ``grads`` (whole local gradients),
  ``grads_at`` (local gradients on sampled coordinates), ``example_grads_at`` (one example's gradient on them),
  ``minibatch_grads_at`` (a minibatch's); the stacked object's members are the protocol
  :class:`~isparse.problems.stacked.Stacked`;
- ``rows``: it is a linear model on the rows of a data set (``A`` of shape (N, d), labels ``b``, ``loss``,
  ``penalty``: the matrix-free Hessian of the reference solve, shared-data methods, rows read on a worker);
- ``exact_reference``: x* is known in closed form (:meth:`reference`);
- ``strong_growth``: its strong-growth constant can be computed (:meth:`strong_growth_constant`, IASGD's rho).
"""

from __future__ import annotations

import numpy as np


class Problem:
    """Base of the problems (``GLMProblem``, ``QuadraticProblem``): F = f + R, f = (1/n) sum_i f_i.

    The setting of arXiv:1901.09437, section 2 (docs/algorithms.md §1): worker i holds f_i, the master the
    regularizer R. A subclass sets the attributes below and implements ``f``, ``F``, ``grad``, ``hess`` and
    ``local_grads``; the methods here are the optional parts, with their defaults. The class attributes
    ``provides``, ``parts``, ``data``, ``nnz`` and ``convex`` have defaults that a subclass overrides where it
    has them. The names (d, N, n, L, mu, ...) are the glossary's (docs/glossary.md).

    Attributes
    ----------
    name : str
        Short name, logged with the run (e.g. ``"logistic"``, ``"quadratic"``).
    shards : list
        Worker i's part: its f_i (``grad``, ``value``, ``l``, and ``example_grad``, ``minibatch_grad`` where the
        capabilities say so); ``type(shards[0]).stack(shards, ids)`` stacks a host's into a
        :class:`~isparse.problems.stacked.Stacked`.
    reg : Regularizer
        R (zero unless a proximal method's).
    L, mu, L_example : float
        Smoothness of the f_i (max_i L_i, Assumption 1), strong convexity of f, smoothness of the examples'
        f_ij (Theorems 2 and 5).
    L_f : float
        Smoothness of f itself (one worker holding all the data: L_f <= mean_i L_i <= L).
    L_i : ndarray of shape (n,)
        Smoothness of each f_i.
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
        """frozenset of str: what this problem provides, its own :attr:`provides` and its shards' ``capabilities``
        (see the module docstring for the names)."""
        shard = type(self.shards[0]) if self.shards else None
        return frozenset(self.provides) | frozenset(shard.capabilities if shard is not None else ())

    # -- optional parts, with their defaults ------------------------------------------------------------
    def start(self) -> np.ndarray:
        """The starting point x^0: zeros unless the problem has its own (a fresh array each call)."""
        return np.zeros(self.d)

    def reference(self):
        """The closed-form :class:`~isparse.problems.reference.Reference` (x*, F* and grad f_i(x*)), where the
        problem knows it (capability ``exact_reference``); None (the default): x* then comes from
        :func:`~isparse.problems.reference.reference_solve`."""
        return None

    def check_constants(self) -> None:
        """Refuse, before any work, constants that would not be finite (a no-op unless the problem can overflow:
        :meth:`isparse.problems.glm.GLMProblem.check_constants` raises ConfigError or DataError)."""

    def null_space(self):
        """A basis of the directions where f has no curvature but the penalty's (null(A) of a linear model); the
        part of x - x* in them is logged as ``dist_sq_null`` (docs/algorithms.md §5).

        Returns
        -------
        Z : ndarray or sparse matrix of shape (d, k), or None
            Orthonormal columns; None (the default) where the problem has none to offer.
        how : str
            How Z was found; ``"not computed"`` by default.
        """
        return None, "not computed"

    def curvature(self):
        """f's Hessian, matrix-free, for the Newton-CG steps of the reference solve: an object whose ``at(x)`` gives
        (v -> H v, the diagonal of H) (``isparse.problems.reference``); None (the default): the solve uses the dense
        ``hess`` instead."""
        return None

    def sum_sq_local_grads(self, x: np.ndarray) -> float:
        """sum_i ||grad f_i(x)||^2 over the n workers (at x*: the D of Theorem 1, Phi^0 of Theorem 3); the default
        squares :meth:`local_grads`, a problem whose rows live elsewhere reduces it where they are."""
        return float((np.asarray(self.local_grads(x)) ** 2).sum())

    def reference_key(self, split: str, split_seed: int) -> str | None:
        """The key under which the reference solve of this problem is cached (``isparse.cache``), from what
        identifies its data, the model and the rows' split (``workers.split``, ``workers.split_seed``); None (the
        default): not cached."""
        return None

    def strong_growth_constant(self) -> float | None:
        """The strong-growth constant rho_tilde >= 1 of (1/n) sum_i ||grad f_i(x)||^2 <= rho_tilde ||grad f(x)||^2
        for all x, from which IASGD's rho (Theorem 8, docs/algorithms.md §3) is computed (capability ``strong_growth``);
        None (the default) where it cannot be computed."""
        return None

    def describe(self) -> str:
        """Where the problem comes from, for the run's params; by default the problem's :attr:`name`."""
        return self.name
