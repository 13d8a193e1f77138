"""A bound of the form rate^t * initial + neighbourhood."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LinearBound:
    """E[quantity_t] <= rate^t * initial + neighbourhood, valid when ``applicable``.

    Attributes
    ----------
    theorem : str
        Where it comes from ("Theorem 3, arXiv:1901.09437").
    quantity : str
        What it bounds (``dist_sq`` = ||x^t - x*||^2).
    gamma_theory : float
        The largest stepsize the theorem allows.
    gamma : float
        The stepsize used; the bound is for this gamma.
    applicable : bool
        False when gamma > gamma_theory: then no bound is claimed.
    rate : float
        Contraction factor per iteration, in [0, 1).
    initial : float
        The bound at t = 0 (r_0, or the Lyapunov value Phi^0).
    neighbourhood : float
        The limit as t -> inf (0 under the theorem's assumptions).
    """

    theorem: str
    quantity: str
    gamma_theory: float
    gamma: float
    applicable: bool
    rate: float
    initial: float
    neighbourhood: float = 0.0

    def __call__(self, t: int) -> float:
        """The bound after t iterations; NaN when not applicable."""
        if not self.applicable:
            return math.nan
        return self.rate ** t * self.initial + self.neighbourhood

    def iterations_to(self, target: float) -> float:
        """Smallest t with bound(t) <= target; inf if the neighbourhood is above it, NaN if not applicable."""
        if not self.applicable:
            return math.nan
        gap = target - self.neighbourhood
        if gap <= 0:
            return math.inf
        if self.initial <= gap:
            return 0.0
        return float(math.ceil(math.log(gap / self.initial) / math.log(self.rate)))
