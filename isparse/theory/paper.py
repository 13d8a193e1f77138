"""The stepsizes the paper's experiments used (arXiv:1901.09437, Section 6 and Appendix plots; docs/algorithms.md §5).

Selected with ``step.rule=paper``; every other method keeps its theorem's stepsize. Each function
has the signature of the theorems' stepsize rules, ``(L, mu, n, tau) -> gamma`` (gamma in 1/L units).

- ISEGA: 4x Theorem 3's gamma (the theorem claims nothing for it).
- ISGD and SGD: gamma = 1/(5L).
- shared-data ISAGA (Alg. 4) and SAGA: gamma = 1/(L(3/n + tau)) (L the examples' smoothness).
- GD: gamma = 1/(2L), which is Theorem 1's gamma at tau = 1 already.
"""
from __future__ import annotations

from .theorem3 import theorem3_stepsize


def isega_paper_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = 4 x Theorem 3's gamma (the paper's ISEGA plots)."""
    return 4.0 * theorem3_stepsize(L, mu, n, tau)


def sgd_paper_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = 1/(5L) (the paper's ISGD vs SGD plots)."""
    return 1.0 / (5.0 * L)


def saga_paper_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = 1/(L(3/n + tau)) (the paper's shared-data ISAGA vs SAGA plots; L of the examples)."""
    return 1.0 / (L * (3.0 / n + tau))
