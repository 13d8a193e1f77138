"""A bound of the form rate^t * initial + neighbourhood."""

from __future__ import annotations

import math
from dataclasses import dataclass


#: what ``source`` may be: a bound the paper states, one derived here, one the paper states garbled and this project
#: reconstructed (its proof redone; docs/algorithms.md §3, Theorem 6), or no bound
SOURCES = ("paper", "derived", "reconstructed", "none")


def _check_source(bound) -> None:
    """Fill ``gamma_max`` (default ``gamma_theory``) and check ``source``.

    A derived or reconstructed bound must say where it is written down.
    """
    if bound.gamma_max is None:
        object.__setattr__(bound, "gamma_max", bound.gamma_theory)
    if bound.source not in SOURCES[:3]:
        raise ValueError(f"bound source must be one of {SOURCES[:3]}; got {bound.source!r}")
    if bound.source in ("derived", "reconstructed") and not bound.derivation:
        raise ValueError(f"a {bound.source} bound must name its derivation ({bound.theorem})")


def source_tag(bound) -> str:
    """The run's tag ``bound_source``: the bound's ``source`` where it applies (``applicable``), else ``none``.

    A bound whose conditions fail (a stepsize above its theorem's) claims nothing, so no source is named for it; its
    ``theorem`` still says which theorem it would have been (tag ``bound_theorem``).
    """
    return bound.source if bound.applicable else "none"


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
        The stepsize of the theorem's rule (what ``step.rule=theory`` uses before ``step.multiplier``).
    gamma : float
        The stepsize used; the bound is for this gamma.
    applicable : bool
        False when gamma > gamma_max: then no bound is claimed.
    rate : float
        Contraction factor per iteration, in [0, 1).
    initial : float
        The bound at t = 0 (r_0, or the Lyapunov value Phi^0).
    neighbourhood : float
        The limit as t -> inf (0 under the theorem's assumptions).
    lyapunov_weight : float, optional
        Where the theorem bounds a Lyapunov function dist_sq + weight x (sum of the workers' memory
        errors, ``Method._worker_memory`` or ``_master_memory``), the weight; the bound then holds for it too.
    gamma_max : float, optional
        The largest stepsize the theorem allows (default: ``gamma_theory``, where the rule's stepsize is the limit).
    source : str
        ``paper``: a bound the paper states; ``derived``: one this project derived (``derivation`` says where);
        ``reconstructed``: one the paper states in a form that cannot be read as printed, proved again here
        (``derivation`` says where).
    derivation : str
        For a derived bound, where the derivation is written down (module docstring, docs/algorithms.md).
    """

    theorem: str
    quantity: str
    gamma_theory: float
    gamma: float
    applicable: bool
    rate: float
    initial: float
    neighbourhood: float = 0.0
    lyapunov_weight: float | None = None
    gamma_max: float | None = None
    source: str = "paper"
    derivation: str = ""

    def __post_init__(self):
        _check_source(self)

    def __call__(self, t: int) -> float:
        """The bound after t iterations; NaN when not applicable."""
        if not self.applicable:
            return math.nan
        return self.rate ** t * self.initial + self.neighbourhood

    def iterations_to(self, target: float) -> float:
        """Smallest t with bound(t) <= ``target`` (a whole number); inf if the neighbourhood is at or above
        ``target`` or the rate is 1; NaN if not applicable."""
        if not self.applicable:
            return math.nan
        gap = target - self.neighbourhood
        if gap <= 0:
            return math.inf
        if self.initial <= gap:
            return 0.0
        if self.rate >= 1.0:          # e.g. a stepsize at the theorem's limit: no contraction claimed
            return math.inf
        if self.rate <= 0.0:
            return 1.0
        return float(math.ceil(math.log(gap / self.initial) / math.log(self.rate)))


@dataclass(frozen=True)
class NoBound:
    """No theorem is logged for this run (a peer method, or a theorem whose assumptions fail); ``theorem`` says why.
    The attributes are :class:`LinearBound`'s."""

    theorem: str
    gamma_theory: float
    gamma: float
    quantity: str = "dist_sq"
    applicable: bool = False
    neighbourhood: float = math.nan
    rate: float = math.nan
    gamma_max: float | None = None
    source: str = "none"
    derivation: str = ""
    lyapunov_weight: float | None = None    # no Lyapunov function: none is monitored

    def __call__(self, t: int) -> float:
        return math.nan

    def iterations_to(self, target: float) -> float:
        """NaN: no bound, no iteration count."""
        return math.nan


@dataclass(frozen=True)
class SublinearBound:
    """E[quantity_t] <= formula(t), e.g. Theorem 6's O(1/t) bound on f(x_hat^t) - f*.

    ``formula`` is a plain function of t; the other attributes are as in :class:`LinearBound`.
    """

    theorem: str
    quantity: str
    gamma_theory: float
    gamma: float
    applicable: bool
    formula: object
    neighbourhood: float = 0.0
    rate: float = math.nan
    gamma_max: float | None = None
    source: str = "paper"
    derivation: str = ""
    lyapunov_weight: float | None = None    # a bound on the quantity itself: no Lyapunov function is monitored

    def __post_init__(self):
        _check_source(self)

    def __call__(self, t: int) -> float:
        return self.formula(t) if self.applicable else math.nan

    def iterations_to(self, target: float, t_max: int = 10**9) -> float:
        """Smallest t <= ``t_max`` with formula(t) <= ``target``, by bisection (the formula decreases in t); inf if
        formula(t_max) > target; NaN if not applicable."""
        if not self.applicable:
            return math.nan
        if self.formula(t_max) > target:
            return math.inf
        lo, hi = 0, t_max
        while lo < hi:
            mid = (lo + hi) // 2
            if self.formula(mid) <= target:
                hi = mid
            else:
                lo = mid + 1
        return float(lo)
