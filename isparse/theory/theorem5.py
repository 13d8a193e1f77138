"""Theorem 5 (distributed ISAGA, Algorithm 5) of arXiv:1901.09437; Lyapunov weight reconstructed.

Under Assumptions 1 and 2, with L the smoothness of every f_ij and l examples per worker
(the largest l_i, to be safe with unequal shards)::

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

With a codec (``messages.codec``, derived; docs/algorithms.md §7). Worker i sends Q((w_i)_U),
w_i = grad f_ij(x) - alpha_ij + alpha_bar_i, with Q unbiased, drawn independently of U and j, and
E||Q(v) - v||^2 <= omega ||v||^2; its table keeps the exact grad f_ij (the codec never reaches it). The proof,
written out under Assumption 2 with D = f(x) - f* and E_j over worker i's l_i examples::

    E r_{t+1} = r_t - 2 gamma tau <grad f(x), x - x*> + (gamma/n)^2 E||sum_i Q((w_i)_{U_i})||^2,
    E||sum_i Q((w_i)_{U_i})||^2 <= (1 + omega) tau sum_i E_j||w_i||^2 + tau^2 n^2 ||grad f(x)||^2
                                  (independence over i; E Q((w_i)_U) = tau grad f_i(x)),
    E_j||w_i||^2 <= 2 E_j||grad f_ij(x) - grad f_ij(x*)||^2 + 2 (1/l_i) sum_j ||alpha_ij - grad f_ij(x*)||^2
                 <= 4 L D_i + 2 Psi_i / l_i,   D_i = f_i(x) - f_i(x*), sum_i D_i = n D, ||grad f||^2 <= 2 L D,
    E Psi_i^{t+1} <= (1 - tau/l_i) Psi_i + 2 L tau D_i          (row j moves to grad f_ij(x) on U),
    <grad f(x), x - x*> >= D + (mu/2) r_t.

Summing r + c gamma^2 Psi: the D terms cancel when c = (1/n)(1/(gamma L) - 2(1 + omega)/n - tau), and the Psi
terms contract by 1 - tau (1/l - 2(1 + omega)/(n^2 l c)), l = max_i l_i. So with a codec the bound is the
tau < 1/n variant above with 2/n -> 2(1 + omega)/n in c and 2/(n^2 l c) -> 2(1 + omega)/(n^2 l c): the rule
gamma = 1/(L(tau + 5(1 + omega)/n)) gives c = 3(1 + omega)/n^2 and theta = tau min{gamma mu, 1/(3l)}, claimed up
to gamma = 1/(L(tau + 4(1 + omega)/n)). At omega = 0 it is that variant; a float64 run keeps the theorem as above.
A codec's noise around w_i(x*) = grad f_i(x*) does not vanish at tau = 1, so with a codec the bound needs
Assumption 2 at every tau.
"""

from __future__ import annotations

from .bound import LinearBound, NoBound

#: sum_i ||grad f_i(x*)||^2 below this (relative to r_0 L^2) counts as Assumption 2 holding
INTERPOLATION_TOL = 1e-20


def _coefficients(n: int, tau: float, omega: float) -> tuple[float, float]:
    """(a, b) of c = (1/n)(1/(gamma L) - a/n - tau) and theta = tau min{gamma mu, 1/l - b/(n^2 l c)}: the paper's
    (1, 2) for tau >= 1/n without a codec, the derived (2(1 + omega), 2(1 + omega)) otherwise."""
    if omega > 0 or tau * n < 1 - 1e-12:
        return 2.0 * (1.0 + omega), 2.0 * (1.0 + omega)
    return 1.0, 2.0


def theorem5_stepsize(L: float, mu: float, n: int, tau: float, omega: float = 0.0) -> float:
    """Theorem 5's default stepsize (distributed ISAGA, Algorithm 5; L of every f_ij).

    gamma = 1/(L(tau + (a + 3b/2)/n)), so that c = (3b/2)/n^2; (a, b) = (1, 2) for tau >= 1/n without a codec, else
    (2(1 + omega), 2(1 + omega)): 1/(L(tau + 4/n)) for tau >= 1/n, 1/(L(tau + 5/n)) below, 1/(L(tau + 5(1 + omega)/n))
    with a codec's omega (the module docstring; docs/algorithms.md §3, §7)."""
    a, b = _coefficients(n, tau, omega)
    return 1.0 / (L * (tau + (a + 1.5 * b) / n))


def theorem5_bound(*, L_example: float, mu: float, n: int, tau: float, gamma: float, r0: float,
                   sum_sq_local_grads: float, sum_sq_example_grads: float, l_max: int, omega: float = 0.0):
    """Theorem 5's bound (distributed ISAGA, Algorithm 5; Lyapunov weight reconstructed) with alpha^0 = 0.

    E[||x^t - x*||^2 + c gamma^2 Psi^t] <= (1 - theta)^t (r_0 + c gamma^2 Psi^0), so a bound on dist_sq (the module
    docstring; docs/algorithms.md §3), applicable up to the theorem's limit (``gamma_max``). A NoBound when Assumption 2
    fails (``sum_sq_local_grads`` above a tolerance; at tau < 1, or at any tau with a codec) or the stepsize leaves no
    contraction. ``L_example`` is the smoothness of every f_ij, ``l_max`` the largest number of examples on a worker."""
    gamma_rule = theorem5_stepsize(L_example, mu, n, tau, omega)
    a, b = _coefficients(n, tau, omega)
    # the theorem's own limit: c > b/n^2, i.e. gamma < 1/(L(tau + (a + b)/n))
    gamma_max = 1.0 / (L_example * (tau + (a + b) / n))
    no_assumption2 = sum_sq_local_grads > INTERPOLATION_TOL * max(r0, 1.0) * L_example ** 2
    if (tau < 1.0 or omega > 0) and no_assumption2:
        return NoBound(theorem="Theorem 5 (ISAGA) needs Assumption 2 (grad f_i(x*) = 0), which the data break"
                       + (" (with a codec, at every tau)" if omega > 0 else ""),
                       gamma_theory=gamma_rule, gamma=gamma, gamma_max=gamma_max)
    c = (1.0 / n) * (1.0 / (gamma * L_example) - a / n - tau)
    if c <= b / n ** 2:  # then 1/l - b/(n^2 l c) <= 0: no contraction is proved
        return NoBound(theorem="Theorem 5 (ISAGA): the stepsize leaves no contraction", gamma_theory=gamma_rule,
                       gamma=gamma, gamma_max=gamma_max)
    theta = tau * min(gamma * mu, 1.0 / l_max - b / (n ** 2 * l_max * c))
    paper_case = tau * n >= 1 - 1e-12 and omega == 0
    derived = not paper_case or no_assumption2       # tau < 1/n, a codec, or tau = 1 without Assumption 2
    why = (f"the codec's omega = {omega:.4g}: 2(1 + omega)/n + tau" if omega > 0 else
           "tau < 1/n: the variant with 2/n + tau" if tau * n < 1 - 1e-12 else
           "tau = 1 without Assumption 2: the terms that need it carry a factor 1 - tau = 0")
    return LinearBound(theorem="Theorem 5 (ISAGA), arXiv:1901.09437; Lyapunov weight reconstructed",
                       quantity="dist_sq", gamma_theory=gamma_rule, gamma=gamma, gamma_max=gamma_max,
                       applicable=gamma <= gamma_max * (1 + 1e-12), rate=1.0 - theta,
                       initial=r0 + c * gamma ** 2 * sum_sq_example_grads, lyapunov_weight=c * gamma ** 2,
                       source="derived" if derived else "paper",
                       derivation=f"isparse/theory/theorem5.py ({why})" if derived else "")
