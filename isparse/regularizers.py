"""Separable closed convex regularizers R with a cheap proximal operator (ISEGA's and DIANA's prox step).

One class covers the shipped ones: R(x) = l1 ||x||_1 + (l2/2)||x||^2 + indicator of [lower, upper]^d,
with ``none``, ``l1``, ``l2``, ``elastic_net`` and ``box`` as named cases (l1 together with a box is
not offered). Per coordinate the prox is the clipped, shrunk soft threshold

.. math::

    \\operatorname{prox}_{\\gamma R}(v) = \\operatorname{clip}\\Big(\\frac{\\operatorname{sign}(v)\\max(|v| - \\gamma l_1, 0)}{1 + \\gamma l_2}, \\text{lower}, \\text{upper}\\Big),

exact because a one-dimensional convex function restricted to an interval is minimized at the
projection of its unconstrained minimizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, check_range

NAMES = ("none", "l1", "l2", "elastic_net", "box")


@dataclass(frozen=True)
class Regularizer:
    """R(x) = l1 ||x||_1 + (l2/2)||x||^2 + indicator of [lower, upper]^d.

    Attributes
    ----------
    name : str
        One of :data:`NAMES`.
    l1, l2 : float
        Weights (>= 0).
    lower, upper : float
        Box bounds (-inf, inf when there is no box).
    """

    name: str = "none"
    l1: float = 0.0
    l2: float = 0.0
    lower: float = -math.inf
    upper: float = math.inf

    @property
    def is_zero(self) -> bool:
        """R = 0: no weight and no finite bound, whatever ``name`` says (every rule that asks whether a run needs a
        proximal step, or which theorem covers it, asks this)."""
        return not self.l1 and not self.l2 and not self.has_box

    @property
    def describe(self) -> str:
        """R in words, e.g. ``l1 (l1 = 0.1)``."""
        parts = [f"l1 = {self.l1:g}"] * bool(self.l1) + [f"l2 = {self.l2:g}"] * bool(self.l2) \
            + [f"box [{self.lower:g}, {self.upper:g}]"] * self.has_box
        return f"{self.name} ({', '.join(parts)})" if parts else self.name

    @property
    def has_box(self) -> bool:
        """Whether a bound of the box is finite."""
        return math.isfinite(self.lower) or math.isfinite(self.upper)

    def value(self, x) -> float:
        """R(x): inf outside the box, else l1 ||x||_1 + (l2/2) ||x||^2.

        Parameters
        ----------
        x : ndarray of float64, shape (d,)
        """
        if self.has_box and not np.all((x >= self.lower) & (x <= self.upper)):
            return math.inf
        return self.l1 * float(np.abs(x).sum()) + 0.5 * self.l2 * float(x @ x)

    def prox(self, v, step):
        """prox_{step R}(v), shape of v."""
        if self.is_zero:
            return v
        out = v
        if self.l1:
            out = np.sign(out) * np.maximum(np.abs(out) - step * self.l1, 0.0)
        if self.l2:
            out = out / (1.0 + step * self.l2)
        if self.has_box:
            out = np.clip(out, self.lower, self.upper)
        return out

    def free_set(self, x):
        """(mask of coordinates where R is smooth at x, gradient of R there): for Newton polishing of x*."""
        free = np.ones(x.shape, bool)
        if self.l1:
            free &= x != 0
        if self.has_box:
            free &= (x > self.lower) & (x < self.upper)
        return free, self.l1 * np.sign(x) + self.l2 * x


def make_regularizer(name: str = "none", strength: float = 0.0, lower: float = -1.0, upper: float = 1.0,
                     l2_strength: float = 0.0) -> Regularizer:
    """Build R from its config: ``problem.reg`` (name), ``problem.reg_strength`` (the l1 weight, or the
    l2 weight for ``l2``), ``problem.reg_l2`` (elastic net's l2 weight), ``problem.box`` (lower, upper).

    Raises
    ------
    ConfigError
        Naming the argument: an unknown ``name``, a negative ``strength`` or ``l2_strength``, or ``lower`` >= upper
        (the spec's glue maps them to ``problem.reg``, ``problem.reg_strength``, ...).
    """
    if name in (None, "none"):
        return Regularizer()
    if name not in NAMES:
        raise ConfigError("name", f"The 'name' parameter must be one of {', '.join(NAMES)}; got {name!r}.")
    strength = float(check_range("strength", strength, 0.0, None))
    if name == "l1":
        return Regularizer("l1", l1=strength)
    if name == "l2":
        return Regularizer("l2", l2=strength)
    if name == "elastic_net":
        return Regularizer("elastic_net", l1=strength, l2=float(check_range("l2_strength", l2_strength, 0.0, None)))
    if not float(lower) < float(upper):
        raise ConfigError("lower", f"The 'lower' parameter must be below upper = {upper}; got {lower}.")
    return Regularizer("box", lower=float(lower), upper=float(upper))


def Zero() -> Regularizer:
    """R = 0."""
    return Regularizer()


def L1(strength: float) -> Regularizer:
    """R = strength ||x||_1."""
    return make_regularizer("l1", strength)


def Box(lower: float, upper: float) -> Regularizer:
    """R = indicator of [lower, upper]^d."""
    return make_regularizer("box", lower=lower, upper=upper)
