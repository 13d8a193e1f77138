"""The stepsizes the paper's experiments used (arXiv:1901.09437, Section 6 and Appendix plots; docs/algorithms.md §5).

Selected with ``step.rule=paper``; every other method keeps its theorem's stepsize. Each function
has the signature of the theorems' stepsize rules, ``(L, mu, n, tau) -> gamma`` (gamma in 1/L units).

- ISEGA: 4x Theorem 3's gamma (the theorem claims nothing for it).
- ISGD and SGD: the effective step gamma tau = 1/(5 L_f), L_f of f itself (one-worker SGD's L): Algorithm 6
  averages the sampled blocks with no 1/tau, so E x+ = x - gamma tau grad f(x), and Fig. 5's "gamma = 1/(5L) for
  each algorithm" compares equal expected steps (Theorem 6's gamma_0 tau ~ 1/(6L) at tau = 1/n says the same;
  docs/algorithms.md section 5). ``step.rule=paper_literal``: gamma = 1/(5L) on each side, L = max_i L_i.
- shared-data ISAGA (Alg. 4) and SAGA: gamma = 1/(L(3/n + tau)) (L the examples' smoothness).
- GD: gamma = 1/(2L), which is Theorem 1's gamma at tau = 1 already.
"""
from __future__ import annotations

from .theorem3 import theorem3_stepsize


def isega_paper_stepsize(L: float, mu: float, n: int, tau: float, omega: float = 0.0) -> float:
    """The paper's ISEGA plots (Figs. 2, 12): 4 x Theorem 3's gamma, for which Theorem 3 claims nothing; with a codec,
    4 x its gamma at tau/(1 + omega) (docs/algorithms.md §5)."""
    return 4.0 * theorem3_stepsize(L, mu, n, tau, omega)


def sgd_paper_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """The paper's ISGD vs SGD plots read literally (Fig. 5, ``step.rule=paper_literal``): gamma = 1/(5L) (effective
    step gamma tau; docs/algorithms.md §5)."""
    return 1.0 / (5.0 * L)


def sgd_effective_paper_stepsize(L_f: float, mu: float, n: int, tau: float) -> float:
    """The paper's ISGD vs SGD plots (Fig. 5, ``step.rule=paper``): equal effective steps.

    gamma = 1/(5 L_f tau), so the effective step gamma tau is one-worker SGD's 1/(5 L_f), L_f of f itself (at tau = 1,
    SGD's own; docs/algorithms.md §5)."""
    return 1.0 / (5.0 * L_f * tau)


def saga_paper_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """The paper's shared-data ISAGA vs SAGA plots (Figs. 1, 10): gamma = 1/(L(3/n + tau)), L of the examples,
    Theorem 2's limit (docs/algorithms.md §5)."""
    return 1.0 / (L * (3.0 / n + tau))
