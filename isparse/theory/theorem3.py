"""Theorem 3 (ISEGA, Algorithm 2) of arXiv:1901.09437.

Stepsize [paper]: gamma = min{ 1 / (4 L (1 + 1/(n tau))), 1 / (mu/tau + 4 L/(n tau)) }.

Bound [paper]: with the Lyapunov function
Phi^t = ||x^t - x*||^2 + (gamma / (2 L tau n)) sum_i ||h_i^t - grad f_i(x*)||^2,
E Phi^t <= (1 - gamma mu)^t Phi^0, so E||x^t - x*||^2 <= (1 - gamma mu)^t Phi^0.
It needs neither Assumption 2 nor a separable R (the prox step is taken on the master).
With h_i^0 = 0, Phi^0 = r_0 + (gamma / (2 L tau n)) sum_i ||grad f_i(x*)||^2.
With tau = 1/n and L/mu >= n the iteration count is O((L/mu) log 1/eps) (Corollary 3).
The paper's plots used 4x this gamma, for which the theorem claims nothing.
"""

from __future__ import annotations

from .bound import LinearBound


def theorem3_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = min{1/(4L(1 + 1/(n tau))), 1/(mu/tau + 4L/(n tau))} (Theorem 3)."""
    return min(1.0 / (4.0 * L * (1.0 + 1.0 / (n * tau))), 1.0 / (mu / tau + 4.0 * L / (n * tau)))


def theorem3_bound(*, L: float, mu: float, n: int, tau: float, gamma: float, r0: float,
                   sum_sq_local_grads: float, **_ignored) -> LinearBound:
    """Bound on E||x^t - x*||^2 for ISEGA with h_i^0 = 0 and stepsize gamma (see the module docstring).

    Parameters
    ----------
    L, mu, n, tau, gamma, r0 : float
        As in Theorem 3; applicable when gamma <= theorem3_stepsize(...).
    sum_sq_local_grads : float
        sum_i ||h_i^0 - grad f_i(x*)||^2 = sum_i ||grad f_i(x*)||^2 for h^0 = 0.
    """
    gamma_max = theorem3_stepsize(L, mu, n, tau)
    phi0 = r0 + gamma / (2.0 * L * tau * n) * sum_sq_local_grads
    return LinearBound(theorem="Theorem 3 (ISEGA), arXiv:1901.09437", quantity="dist_sq",
                       gamma_theory=gamma_max, gamma=gamma, applicable=gamma <= gamma_max * (1 + 1e-12),
                       rate=1.0 - gamma * mu, initial=phi0, lyapunov_weight=gamma / (2.0 * L * tau * n))
