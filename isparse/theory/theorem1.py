"""Theorem 1 (IBCD, Algorithm 1) of arXiv:1901.09437, with the neighbourhood without Assumption 2.

Stepsize [paper]: gamma = 1 / (2 L (tau + 2(1 - tau)/n)).

Bound. Derived from Lemma 2 of the paper (docs/algorithms.md §3). With
x^{t+1} = x - (gamma/n) sum_i (grad f_i(x))_{U_i}, E x^{t+1} = x - gamma tau grad f(x) and, by
Lemma 2 and E||v_U - tau v||^2 = tau(1 - tau)||v||^2,

    E r_{t+1} = ||x - x* - gamma tau grad f||^2 + (gamma^2 tau (1 - tau)/n^2) sum_i ||grad f_i(x)||^2.

Bound sum_i ||grad f_i(x)||^2 <= 4 L n D_f(x, x*) + 2 sum_i ||grad f_i(x*)||^2 (L-smoothness of each
f_i), ||grad f||^2 <= 2 L D_f and <grad f, x - x*> >= D_f + (mu/2) r (strong convexity). The D_f
terms cancel when gamma L (tau + 2(1 - tau)/n) <= 1, which the stepsize above satisfies with a
factor 2 to spare, leaving

    E r_{t+1} <= (1 - gamma tau mu) r_t + gamma^2 tau D / n,  D = (1 - tau)(2/n) sum_i ||grad f_i(x*)||^2,

hence E||x^t - x*||^2 <= (1 - gamma tau mu)^t r_0 + gamma D / (n mu). Under Assumption 2
(grad f_i(x*) = 0) D = 0 and this is the paper's Theorem 1. tau = 1 gives D = 0 (gradient descent).

With a codec (``messages.codec``, derived; docs/algorithms.md §7). A worker sends Q(v_U) for an unbiased Q drawn
independently of U with E||Q(w) - w||^2 <= omega ||w||^2. Then E Q(v_U) = tau v still, and
E||Q(v_U) - tau v||^2 = E||Q(v_U) - v_U||^2 + E||v_U - tau v||^2 <= tau omega ||v||^2 + tau(1 - tau)||v||^2, so
every (1 - tau) of the variance term above becomes (1 - tau + omega) and nothing else changes::

    gamma = 1 / (2 L (tau + 2(1 - tau + omega)/n)),   D = (1 - tau + omega)(2/n) sum_i ||grad f_i(x*)||^2,

and E||x^t - x*||^2 <= (1 - gamma tau mu)^t r_0 + gamma D/(n mu). omega = 0 is the bound above. At tau = 1 (GD
with a codec) D = omega (2/n) sum_i ||grad f_i(x*)||^2: without memory a codec leaves a neighbourhood unless
Assumption 2 holds. IBGD (Algorithm 3, a whole gradient with probability tau) has the same two identities (its
message is Q(theta v), E||Q(theta v)||^2 <= (1 + omega) tau ||v||^2), so the same bound.
"""

from __future__ import annotations

from .bound import LinearBound


def theorem1_stepsize(L: float, mu: float, n: int, tau: float, omega: float = 0.0) -> float:
    """Theorem 1's stepsize (IBCD, Algorithm 1; also Theorem 4, IBGD): gamma = 1/(2L(tau + 2(1 - tau + omega)/n));
    omega > 0 is derived (docs/algorithms.md §7), omega = 0 the paper's rule (§3)."""
    return 1.0 / (2.0 * L * (tau + 2.0 * (1.0 - tau + omega) / n))


def theorem1_bound(*, L: float, mu: float, n: int, tau: float, gamma: float, r0: float,
                   sum_sq_local_grads: float, theorem: str = "Theorem 1 (IBCD)", omega: float = 0.0) -> LinearBound:
    """Bound on E||x^t - x*||^2 for IBCD (and IBGD, ``theorem`` citing Theorem 4) with stepsize gamma: Theorem 1,
    neighbourhood derived.

    E||x^t - x*||^2 <= (1 - gamma tau mu)^t r_0 + gamma D/(n mu), D = (1 - tau + omega)(2/n) sum_i ||grad f_i(x*)||^2
    (the module docstring; docs/algorithms.md §3); ``source`` is "paper" when D = 0 and omega = 0 (Theorem 1 as
    stated), else "derived". Applicable when gamma <= theorem1_stepsize(...)."""
    gamma_max = theorem1_stepsize(L, mu, n, tau, omega)
    D = (1.0 - tau + omega) * (2.0 / n) * sum_sq_local_grads
    return LinearBound(theorem=f"{theorem}, arXiv:1901.09437; neighbourhood derived from Lemma 2",
                       quantity="dist_sq", gamma_theory=gamma_max, gamma=gamma,
                       applicable=gamma <= gamma_max * (1 + 1e-12),
                       rate=1.0 - gamma * tau * mu, initial=r0, neighbourhood=gamma * D / (n * mu),
                       # with D = 0 (Assumption 2, or tau = 1) this is the paper's Theorem 1; the neighbourhood is ours
                       source="derived" if D > 0 or omega > 0 else "paper",
                       derivation=("isparse/theory/theorem1.py (from Lemma 2; docs/algorithms.md §3"
                                   + (", with the codec's omega, §7)" if omega > 0 else ")"))
                       if D > 0 or omega > 0 else "")
