"""The losses phi(z; b) and penalties P(x) of the linear-model problems (docs/algorithms.md §4).

phi is the logistic loss log(1 + exp(-b z)) or the squared loss (z - b)^2 / 2, each with its first and second
derivative in z and its curvature bound (the largest phi''); P is (lambda/2)||x||^2 or the non-convex
lambda sum_k x_k^2 / (1 + x_k^2) of Theorem 7, each with its gradient, Hessian diagonal and smoothness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class Logistic:
    """phi(z; b) = log(1 + exp(-b z)), b in {-1, +1}; phi'' <= 1/4, |phi'| <= 1."""

    name = "logistic"
    curvature = 0.25
    bounded_derivative = True

    @staticmethod
    def value(z, b):
        return np.logaddexp(0.0, -b * z)

    @staticmethod
    def deriv(z, b):
        return -b * expit(-b * z)

    @staticmethod
    def second(z, b):
        s = expit(z)
        return s * (1.0 - s)


@dataclass(frozen=True)
class Squared:
    """phi(z; b) = (z - b)^2 / 2; phi'' = 1."""

    name = "squared"
    curvature = 1.0
    bounded_derivative = False

    @staticmethod
    def value(z, b):
        return 0.5 * (z - b) ** 2

    @staticmethod
    def deriv(z, b):
        return z - b

    @staticmethod
    def second(z, b):
        return np.ones_like(z)


@dataclass(frozen=True)
class L2Penalty:
    """P(x) = (lam/2)||x||^2: smooth with constant lam, strongly convex with lam."""

    lam: float
    name = "l2"

    def value(self, x):
        return 0.5 * self.lam * float(x @ x)

    def grad(self, x):
        return self.lam * x

    def hess_diag(self, x):
        return np.full_like(x, self.lam)

    @property
    def smoothness(self):
        return self.lam


@dataclass(frozen=True)
class NonconvexPenalty:
    """P(x) = lam sum_k x_k^2 / (1 + x_k^2): non-convex, P'' in [-lam/2, 2 lam], so smooth with constant 2 lam."""

    lam: float
    name = "nonconvex"

    def value(self, x):
        return self.lam * float(np.sum(x * x / (1.0 + x * x)))

    def grad(self, x):
        return self.lam * 2.0 * x / (1.0 + x * x) ** 2

    def hess_diag(self, x):
        u = x * x
        return self.lam * (2.0 - 6.0 * u) / (1.0 + u) ** 3

    @property
    def smoothness(self):
        return 2.0 * self.lam


LOSSES = {"logistic": Logistic(), "squared": Squared()}
