"""Theorem 2 (shared-data ISAGA, Algorithm 4) of arXiv:1901.09437; statement reconstructed.

With L the smoothness of every psi_j and N examples::

    gamma <= 1/(L(3/n + tau)),  c = (1/n)(1/(gamma L) - 1/n - tau),
    rho = min{gamma tau mu, (n tau/N)(1 - 2/(n^2 c))},
    E[r_t + c gamma^2 sum_j ||alpha_j^t - grad psi_j(x*)||^2] <= (1 - rho)^t (r_0 + c gamma^2 Psi^0).

The default stepsize gamma = 1/(L(tau + 4/n)) gives c = 3/n^2 and rho = min{gamma tau mu, n tau/(3N)};
at tau = 1/n, gamma = n/(5L) and the rate is min{mu/(5L), 1/(3N)} (Corollary 2). No Assumption 2.

No bound with a codec (``messages.codec``): the master keeps the table, so it stores the decoded Q(grad psi_j(x)),
and the codec's noise on grad psi_j(x*) != 0 stays in the table and in the estimate: the iterates settle in a
neighbourhood that is not derived here (``Theory.codec_theory`` is False; the log says so).
"""

from __future__ import annotations

from .bound import LinearBound, NoBound


def theorem2_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """Theorem 2's default stepsize (shared-data ISAGA, Algorithm 4): gamma = 1/(L(tau + 4/n)), which gives c = 3/n^2,
    below the theorem's limit 1/(L(3/n + tau)) (docs/algorithms.md §3)."""
    return 1.0 / (L * (tau + 4.0 / n))


def theorem2_bound(*, L_example: float, mu: float, n: int, N: int, tau: float, gamma: float, r0: float,
                   sum_sq_example_grads: float):
    """Theorem 2's bound (shared-data ISAGA, Algorithm 4; statement reconstructed) with the table starting at 0.

    E[r_t + c gamma^2 Psi^t] <= (1 - rho)^t (r_0 + c gamma^2 Psi^0), which bounds E||x^t - x*||^2 (the module docstring;
    docs/algorithms.md §3): a bound on ``dist_sq`` with the Lyapunov weight c gamma^2, applicable up to
    1/(L(3/n + tau)); a NoBound when c <= 2/n^2 (no contraction is proved). ``L_example`` is the smoothness of every
    psi_j."""
    gamma_max = 1.0 / (L_example * (3.0 / n + tau))
    c = (1.0 / n) * (1.0 / (gamma * L_example) - 1.0 / n - tau)
    if c <= 2.0 / n ** 2:
        return NoBound(theorem="Theorem 2 (shared ISAGA): the stepsize leaves no contraction",
                       gamma_theory=theorem2_stepsize(L_example, mu, n, tau), gamma=gamma)
    rho = min(gamma * tau * mu, (n * tau / N) * (1.0 - 2.0 / (n ** 2 * c)))
    return LinearBound(theorem="Theorem 2 (shared-data ISAGA), arXiv:1901.09437; reconstructed", quantity="dist_sq",
                       gamma_theory=theorem2_stepsize(L_example, mu, n, tau), gamma=gamma,
                       applicable=gamma <= gamma_max * (1 + 1e-12), gamma_max=gamma_max, rate=1.0 - rho,
                       initial=r0 + c * gamma ** 2 * sum_sq_example_grads, lyapunov_weight=c * gamma ** 2)
