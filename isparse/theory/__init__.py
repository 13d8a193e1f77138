"""Stepsizes and bounds of the paper's theorems, next to the methods they bound.

Each theorem gives ``stepsize(L, mu, n, tau[, omega])`` (the theorem's gamma) and ``bound(*, ...)``, which takes
exactly the keywords it uses and returns a bound object (``LinearBound``, ``SublinearBound`` or ``NoBound``) for the
stepsize used; :func:`with_constants` hands a bound the run's constants it declares. A method names them through a
:class:`Theory` (``isparse.theory.base``): its stepsize rule and bound, as one object. The paper is arXiv:1901.09437;
docs/algorithms.md §3 and §7 hold the statements and the derivations.
"""

from .base import NO_THEORY, Theory, with_constants
from .bound import LinearBound, NoBound, SublinearBound
from .iasgd import iasgd_bound, strong_growth_rho
from .isgd import isgd_bound, isgd_schedule
from .theorem1 import theorem1_bound, theorem1_stepsize
from .theorem2 import theorem2_bound, theorem2_stepsize
from .theorem3 import theorem3_bound, theorem3_stepsize
from .theorem5 import theorem5_bound, theorem5_stepsize

__all__ = ["NO_THEORY", "Theory", "with_constants", "iasgd_bound", "strong_growth_rho", "LinearBound", "NoBound",
           "SublinearBound", "isgd_bound", "isgd_schedule", "theorem1_bound", "theorem1_stepsize", "theorem2_bound",
           "theorem2_stepsize", "theorem3_bound", "theorem3_stepsize", "theorem5_bound", "theorem5_stepsize"]
