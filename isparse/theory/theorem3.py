"""Theorem 3 (ISEGA, Algorithm 2) of arXiv:1901.09437.

Stepsize [paper]: gamma = min{ 1 / (4 L (1 + 1/(n tau))), 1 / (mu/tau + 4 L/(n tau)) }.

Bound [paper]: with the Lyapunov function
Phi^t = ||x^t - x*||^2 + (gamma / (2 L tau n)) sum_i ||h_i^t - grad f_i(x*)||^2,
E Phi^t <= (1 - gamma mu)^t Phi^0, so E||x^t - x*||^2 <= (1 - gamma mu)^t Phi^0.
It needs neither Assumption 2 nor a separable R (the prox step is taken on the master).
With h_i^0 = 0, Phi^0 = r_0 + (gamma / (2 L tau n)) sum_i ||grad f_i(x*)||^2.
With tau = 1/n and L/mu >= n the iteration count is O((L/mu) log 1/eps) (Corollary 3).
The paper's plots used 4x this gamma, for which the theorem claims nothing.

With a codec (``messages.codec``, derived; docs/algorithms.md §7). Worker i sends Q(Delta_U) for an unbiased Q
drawn independently of U with E||Q(w) - w||^2 <= omega ||w||^2; the master's estimate stays
g_i = h_i + (1/tau) Q(Delta_U) (unbiased), and the memory moves by a 1/(1 + omega) share of what was sent,
h_i <- h_i + Q(Delta_U)/(1 + omega) (DIANA's shift rate). With a = h_i - grad f_i(x*), b = grad f_i(x) - grad f_i(x*)
the proof uses the sampling twice, and each use becomes the tau = 1 identity of tau' = tau/(1 + omega)::

    E||a + (1/tau) Q((b - a)_U)||^2 <= ||a||^2 + 2<a, b - a> + ((1 + omega)/tau) ||b - a||^2,
    E||a + Q((b - a)_U)/(1 + omega)||^2 <= ||a||^2 + 2 tau' <a, b - a> + tau' ||b - a||^2 = (1 - tau')||a||^2 + tau'||b||^2,

the first by E||Q(w_U)||^2 <= (1 + omega) tau ||w||^2, the second with (1 + omega) tau / (1 + omega)^2 = tau'. So
Theorem 3 holds with tau' in place of tau: the stepsize, the rate 1 - gamma mu and the Lyapunov weight
gamma/(2 L tau' n). omega = 0 gives the theorem as stated.
"""

from __future__ import annotations

from .bound import LinearBound


def theorem3_stepsize(L: float, mu: float, n: int, tau: float, omega: float = 0.0) -> float:
    """Theorem 3's stepsize (ISEGA, Algorithm 2): gamma = min{1/(4L(1 + 1/(n tau'))), 1/(mu/tau' + 4L/(n tau'))},
    tau' = tau/(1 + omega); omega > 0 is derived (docs/algorithms.md §7), omega = 0 the paper's rule (§3)."""
    tau = tau / (1.0 + omega)
    return min(1.0 / (4.0 * L * (1.0 + 1.0 / (n * tau))), 1.0 / (mu / tau + 4.0 * L / (n * tau)))


def theorem3_bound(*, L: float, mu: float, n: int, tau: float, gamma: float, r0: float,
                   sum_sq_local_grads: float, omega: float = 0.0) -> LinearBound:
    """Theorem 3's bound on E||x^t - x*||^2 for ISEGA (Algorithm 2) with h_i^0 = 0 and stepsize gamma.

    E||x^t - x*||^2 <= E Phi^t <= (1 - gamma mu)^t Phi^0, Phi^0 = r_0 + (gamma/(2 L tau n)) sum_i ||grad f_i(x*)||^2
    (the module docstring; docs/algorithms.md §3), with the Lyapunov weight gamma/(2 L tau n); with omega > 0 Theorem
    3's at tau/(1 + omega). ``source`` "paper" at omega = 0, else "derived"; applicable when gamma <=
    theorem3_stepsize(...)."""
    gamma_max = theorem3_stepsize(L, mu, n, tau, omega)
    tau = tau / (1.0 + omega)
    phi0 = r0 + gamma / (2.0 * L * tau * n) * sum_sq_local_grads
    return LinearBound(theorem="Theorem 3 (ISEGA), arXiv:1901.09437", quantity="dist_sq",
                       gamma_theory=gamma_max, gamma=gamma, applicable=gamma <= gamma_max * (1 + 1e-12),
                       rate=1.0 - gamma * mu, initial=phi0, lyapunov_weight=gamma / (2.0 * L * tau * n),
                       source="derived" if omega > 0 else "paper",
                       derivation="isparse/theory/theorem3.py (Theorem 3 at tau' = tau/(1 + omega); docs/algorithms.md "
                                  "§7)" if omega > 0 else "")
