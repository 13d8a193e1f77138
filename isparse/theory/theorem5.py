"""Theorem 5 (distributed ISAGA, Algorithm 5) of arXiv:1901.09437; Lyapunov weight reconstructed.

Under Assumptions 1 and 2, with L the smoothness of every f_ij and l examples per worker
(the largest l_i, to be safe with unequal shards):

    gamma <= 1 / (L (3/n + tau)),  c = (1/n)(1/(gamma L) - 1/n - tau),
    theta = tau min{gamma mu, 1/l - 2/(n^2 l c)},
    E[r_t + c gamma^2 Psi^t] <= (1 - theta)^t (r_0 + c gamma^2 Psi^0),
    Psi^t = sum_i sum_j ||alpha_ij^t - grad f_ij(x*)||^2.

At gamma = 1/(L(3/n + tau)) the rate is 0, so the default stepsize is gamma = 1/(L(tau + 4/n)); the bound is
applicable (``gamma_max``) up to the theorem's own limit 1/(L(3/n + tau)), 1/(L(4/n + tau)) for the variant below,
which gives c = 3/n^2 and theta = tau min{gamma mu, 1/(3l)} (Corollary 4 at tau = 1/n:
gamma = n/(5L)). For tau < 1/n the paper's proof is not verified; the derived safe variant
gamma = 1/(L(tau + 5/n)) with c = (1/n)(1/(gamma L) - 2/n - tau) = 3/n^2 is used there.
Without Assumption 2 (some grad f_i(x*) != 0) and tau < 1, ISAGA stalls at a neighbourhood the
paper does not size: no bound is claimed. With tau = 1 (distributed SAGA) the terms that need
Assumption 2 carry a factor (1 - tau) = 0 and the bound is logged.
"""

from __future__ import annotations

from .bound import LinearBound, NoBound

#: sum_i ||grad f_i(x*)||^2 below this (relative to r_0 L^2) counts as Assumption 2 holding
INTERPOLATION_TOL = 1e-20


def theorem5_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = 1/(L(tau + 4/n)) for tau >= 1/n, 1/(L(tau + 5/n)) below (see the module docstring)."""
    return 1.0 / (L * (tau + (4.0 if tau * n >= 1 - 1e-12 else 5.0) / n))


def theorem5_bound(*, L_example: float, mu: float, n: int, tau: float, gamma: float, r0: float,
                   sum_sq_local_grads: float, sum_sq_example_grads: float, l_max: int, **_ignored):
    """Bound on E[||x^t - x*||^2 + c gamma^2 Psi^t] (so on dist_sq) for ISAGA with alpha^0 = 0.

    Parameters
    ----------
    L_example : float
        Smoothness of every f_ij.
    sum_sq_example_grads : float
        Psi^0 = sum_ij ||grad f_ij(x*)||^2 (the table starts at 0).
    l_max : int
        The largest number of examples on a worker.
    """
    gamma_rule = theorem5_stepsize(L_example, mu, n, tau)
    paper_case = tau * n >= 1 - 1e-12
    slack = 2.0 if paper_case else 3.0   # 1/n + tau (paper) or 2/n + tau (derived variant)
    # the theorem's own limit: c > 2/n^2, i.e. gamma < 1/(L(3/n + tau)) (paper), 1/(L(4/n + tau)) (variant)
    gamma_max = 1.0 / (L_example * (tau + (slack + 1.0) / n))
    no_assumption2 = sum_sq_local_grads > INTERPOLATION_TOL * max(r0, 1.0) * L_example ** 2
    if tau < 1.0 and no_assumption2:
        return NoBound(theorem="Theorem 5 (ISAGA) needs Assumption 2 (grad f_i(x*) = 0), which the data break",
                       gamma_theory=gamma_rule, gamma=gamma, gamma_max=gamma_max)
    c = (1.0 / n) * (1.0 / (gamma * L_example) - (slack - 1.0) / n - tau)
    if c <= 2.0 / n ** 2:  # then 1/l - 2/(n^2 l c) <= 0: no contraction is proved
        return NoBound(theorem="Theorem 5 (ISAGA): the stepsize leaves no contraction", gamma_theory=gamma_rule,
                       gamma=gamma, gamma_max=gamma_max)
    theta = tau * min(gamma * mu, 1.0 / l_max - 2.0 / (n ** 2 * l_max * c))
    derived = not paper_case or no_assumption2       # tau < 1/n, or tau = 1 without Assumption 2
    why = ("tau < 1/n: the variant with 2/n + tau" if not paper_case else
           "tau = 1 without Assumption 2: the terms that need it carry a factor 1 - tau = 0")
    return LinearBound(theorem="Theorem 5 (ISAGA), arXiv:1901.09437; Lyapunov weight reconstructed",
                       quantity="dist_sq", gamma_theory=gamma_rule, gamma=gamma, gamma_max=gamma_max,
                       applicable=gamma <= gamma_max * (1 + 1e-12), rate=1.0 - theta,
                       initial=r0 + c * gamma ** 2 * sum_sq_example_grads, lyapunov_weight=c * gamma ** 2,
                       source="derived" if derived else "paper",
                       derivation=f"isparse/theory/theorem5.py ({why})" if derived else "")
