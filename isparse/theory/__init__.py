"""Stepsizes and bounds of the paper's theorems, next to the methods they bound.

Each theorem gives ``stepsize(...)`` (the theorem's gamma) and ``bound(...)`` returning a
:class:`LinearBound` on E||x^t - x*||^2 (or a Lyapunov function) for the stepsize actually used.
"""

from .bound import LinearBound
from .theorem1 import theorem1_bound, theorem1_stepsize
from .theorem3 import theorem3_bound, theorem3_stepsize


def method_theory(name: str):
    """(stepsize, bound) functions for ``algorithm=<name>``."""
    return {"ibcd": (theorem1_stepsize, theorem1_bound),
            "isega": (theorem3_stepsize, theorem3_bound)}[name]


__all__ = ["LinearBound", "method_theory", "theorem1_bound", "theorem1_stepsize",
           "theorem3_bound", "theorem3_stepsize"]
