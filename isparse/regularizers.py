"""Closed convex regularizers R with a cheap proximal operator (used by ISEGA, Alg. 2).

Each regularizer gives ``value(x)``, ``prox(v, step)`` = argmin_x R(x) + ||x - v||^2 / (2 step),
and ``free_set(x, grad)``, used by the reference solver to polish x* with Newton steps on the
coordinates where R is smooth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, check_range


@dataclass(frozen=True)
class Zero:
    """R = 0."""

    name = "none"

    def value(self, x):
        return 0.0

    def prox(self, v, step):
        return v

    def free_set(self, x):
        """(mask of free coordinates, gradient of R on them) at x; here all free, zero gradient."""
        return np.ones(x.shape, bool), np.zeros_like(x)


@dataclass(frozen=True)
class L1:
    """R(x) = strength * ||x||_1; prox is soft thresholding at step * strength."""

    strength: float
    name = "l1"

    def __post_init__(self):
        check_range("problem.reg_strength", self.strength, 0.0, None)

    def value(self, x):
        return self.strength * float(np.abs(x).sum())

    def prox(self, v, step):
        t = step * self.strength
        return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)

    def free_set(self, x):
        free = x != 0
        return free, self.strength * np.sign(x)


@dataclass(frozen=True)
class Box:
    """R = indicator of the box [lower, upper]^d; prox is the projection (clipping)."""

    lower: float
    upper: float
    name = "box"

    def __post_init__(self):
        if not self.lower < self.upper:
            raise ConfigError("problem.box", f"The 'problem.box' parameter must have lower < upper; "
                                             f"got [{self.lower}, {self.upper}].")

    def value(self, x):
        return 0.0 if np.all((x >= self.lower) & (x <= self.upper)) else np.inf

    def prox(self, v, step):
        return np.clip(v, self.lower, self.upper)

    def free_set(self, x):
        free = (x > self.lower) & (x < self.upper)
        return free, np.zeros_like(x)


def make_regularizer(name: str, strength: float = 0.0, lower: float = -1.0, upper: float = 1.0):
    """Build a regularizer from its config name: ``none``, ``l1`` or ``box``."""
    if name in (None, "none"):
        return Zero()
    if name == "l1":
        return L1(float(strength))
    if name == "box":
        return Box(float(lower), float(upper))
    raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be one of none, l1, box; got {name!r}.")
