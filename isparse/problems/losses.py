"""The losses phi(z; b) and penalties P(x) of the linear-model problems (docs/algorithms.md §4).

phi is the logistic loss log(1 + exp(-b z)) or the squared loss (z - b)^2 / 2, each with its first and second
derivative in z and its curvature bound (the largest phi''); P is (lambda/2)||x||^2 or the non-convex
lambda sum_k x_k^2 / (1 + x_k^2) of Theorem 7, each with its gradient, Hessian diagonal and smoothness.

The losses act elementwise on arrays of margins z = A x and labels b of the same shape (one entry per row of
the data); the penalties act on a point x of shape (d,).

What a problem needs to know about its loss or penalty is asked of the object (its curvatures, its strong
convexity, its in-place derivative), never decided by its name: a loss or penalty of another class is used the same
way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class Logistic:
    """The logistic loss phi(z; b) = log(1 + exp(-b z)), b in {-1, +1}; ``phi'' <= 1/4`` and ``|phi'| <= 1``.

    Attributes
    ----------
    curvature : float
        0.25, the largest phi'' (the factor c of the smoothness constants, docs/algorithms.md §4).
    bounded_derivative : bool
        True: ``|phi'| <= 1``, so the gradient-noise and dissimilarity bounds of Theorems 6 and 7 exist.
    """

    name = "logistic"
    curvature = 0.25
    #: the smallest phi'' (0: the loss adds no strong convexity to f)
    min_curvature = 0.0
    bounded_derivative = True

    @staticmethod
    def value(z, b):
        """phi(z; b) = log(1 + exp(-b z)), computed without overflow."""
        return np.logaddexp(0.0, -b * z)

    @staticmethod
    def deriv(z, b):
        """phi'(z; b) = -b / (1 + exp(b z)), the derivative in z; its absolute value is at most 1."""
        return -b * expit(-b * z)

    @staticmethod
    def second(z, b):
        """phi''(z; b) = s (1 - s), s = 1 / (1 + exp(-z)) (the same for b = -1 and b = +1); at most 1/4."""
        s = expit(z)
        return s * (1.0 - s)

    @staticmethod
    def deriv_into(z, b, neg_b):
        """phi'(z; b), computed in ``z``'s own storage where the loss can (``z`` is overwritten; use the result):
        -b expit(-b z) in place, ``neg_b`` = -b given by the caller (what the stacked shards keep)."""
        z *= neg_b
        expit(z, out=z)
        z *= neg_b
        return z


@dataclass(frozen=True)
class Squared:
    """The squared loss phi(z; b) = (z - b)^2 / 2 (least squares, ridge; b the targets); phi'' = 1 (``curvature``).
    ``bounded_derivative`` is False: phi' is unbounded, so no gradient-noise bound exists (docs/algorithms.md §3,
    ISGD)."""

    name = "squared"
    curvature = 1.0
    #: the smallest phi'' (1: f is at least lambda_min(A^T A)/N strongly convex)
    min_curvature = 1.0
    bounded_derivative = False

    @staticmethod
    def value(z, b):
        """phi(z; b) = (z - b)^2 / 2."""
        return 0.5 * (z - b) ** 2

    @staticmethod
    def deriv(z, b):
        """phi'(z; b) = z - b, the residual."""
        return z - b

    @staticmethod
    def second(z, b):
        """phi''(z; b) = 1 for every entry (ones of z's dtype)."""
        return np.ones_like(z)

    def deriv_into(self, z, b, neg_b):
        """phi'(z; b) = z - b (a new array; ``neg_b`` unused)."""
        return self.deriv(z, b)


@dataclass(frozen=True)
class L2Penalty:
    """The l2 penalty P(x) = (lam/2)||x||^2 (``lam``: ``problem.lam``): smooth with constant lam, strongly convex with
    lam (mu = lambda, docs/algorithms.md §4)."""

    lam: float
    name = "l2"
    #: what the problem's name adds to the loss's (``logistic``)
    suffix = ""
    #: P is convex
    convex = True

    def value(self, x):
        """P(x) = (lam/2)||x||^2."""
        return 0.5 * self.lam * float(x @ x)

    def grad(self, x):
        """grad P(x) = lam x; ``x`` may be any subset of the coordinates (the penalty is separable)."""
        return self.lam * x

    def hess_diag(self, x):
        """The diagonal of the Hessian of P (which is lam I)."""
        return np.full_like(x, self.lam)

    @property
    def smoothness(self):
        """float: lam, the smoothness constant P adds to every L_i."""
        return self.lam

    @property
    def mu(self):
        """float: lam, the strong convexity P adds to f."""
        return self.lam


@dataclass(frozen=True)
class NonconvexPenalty:
    """The non-convex penalty P(x) = lam sum_k x_k^2 / (1 + x_k^2), for Theorem 7 (docs/algorithms.md §4).

    Its second derivative lies in [-lam/2, 2 lam], so it is smooth with constant 2 lam and not convex (mu = 0)."""

    lam: float
    name = "nonconvex"
    suffix = "+nonconvex"
    convex = False

    def value(self, x):
        """P(x) = lam sum_k x_k^2 / (1 + x_k^2)."""
        return self.lam * float(np.sum(x * x / (1.0 + x * x)))

    def grad(self, x):
        """grad P(x), entry k: 2 lam x_k / (1 + x_k^2)^2; ``x`` may be any subset of the coordinates (the penalty
        is separable)."""
        return self.lam * 2.0 * x / (1.0 + x * x) ** 2

    def hess_diag(self, x):
        """The diagonal Hessian of P, entry k: lam (2 - 6 x_k^2) / (1 + x_k^2)^3, in [-lam/2, 2 lam]."""
        u = x * x
        return self.lam * (2.0 - 6.0 * u) / (1.0 + u) ** 3

    @property
    def smoothness(self):
        """float: 2 lam, the largest second derivative of P, which it adds to every L_i."""
        return 2.0 * self.lam

    @property
    def mu(self):
        """float: 0, P is not convex (f is then not strongly convex: mu = 0, Theorem 7)."""
        return 0.0


#: problem.loss -> the loss
LOSSES = {"logistic": Logistic(), "squared": Squared()}
#: problem.penalty -> the penalty's class, made with lambda
PENALTIES = {"l2": L2Penalty, "nonconvex": NonconvexPenalty}
