"""A bound for a compressed downlink (EF21-P) with a DIANA-type uplink: GD, ISEGA and DIANA (derived here).

The setting (docs/algorithms.md §9): f = (1/n) sum_i f_i, every f_i convex and L_max-smooth (L_max = max_i L_i), f
L-smooth (L = L_f) and mu-strongly convex, no proximal term. Round t: the hosts compute at w^t = w^{t-1} +
C(x^t - w^{t-1}) (C contractive, alpha: E||C(v) - v||^2 <= (1 - alpha)||v||^2; w^{-1} = x^0, so w^0 = x^0), the
master forms g^t, unbiased for grad f(w^t) given w^t, and x^{t+1} = x^t - gamma g^t. With h_i the workers' memories
(ISEGA's h_i, DIANA's shifts; none for GD), sigma = (1/n) sum_i ||h_i - grad f_i(x*)||^2, D = f(w) - f* and the
uplink C_i unbiased with omega, drawn independently across workers, four inequalities hold::

    (V) E||g - grad f(w)||^2 <= (omega/n^2) sum_i ||grad f_i(w) - h_i||^2 <= 2 A D + B sigma,
        A = 2 omega L_max / n, B = 2 omega / n  (||grad f_i(w) - grad f_i(x*)||^2 <= 2 L_max D_{f_i});
    (H) E sigma^+ <= (1 - rho) sigma + 2 rho L_max D, for a memory that moves by rho C_i(grad f_i(w) - h_i) with
        rho <= 1/(1 + omega)  (ISEGA: rho = tau/(1 + omega_Q) = 1/(1 + omega); DIANA: its algorithm.alpha);
    (X) E||x^+ - x*||^2 = ||x - x*||^2 - 2 gamma <grad f(w), x - x*> + gamma^2 E||g||^2, and with e = x - w,
        <grad f(w), w - x*> >= D + (mu/2)||w - x*||^2, 2|<grad f(w), e>| <= ||grad f(w)||^2/(2L) + 2L||e||^2,
        ||grad f(w)||^2 <= 2 L D, ||w - x*||^2 >= (4/5)||x - x*||^2 - 4||e||^2 (Young, c = 1/4), mu <= L:
        E||x^+ - x*||^2 <= (1 - 4 gamma mu/5)||x - x*||^2 + 6 gamma L ||e||^2 + gamma^2 B sigma
                           - (gamma - 2 gamma^2 (L + A)) D;
    (E) e^+ = (I - C)(e - gamma g): E||e^+||^2 <= (1 - alpha)(1 + alpha/2)||e||^2 + (1 - alpha)(1 + 2/alpha)
        gamma^2 E||g||^2 <= (1 - alpha/2)||e||^2 + (2 gamma^2/alpha)(2 (L + A) D + B sigma).

Phi = ||x - x*||^2 + M ||e||^2 + N sigma with M = 24 gamma L/alpha and N = (2 gamma^2 B/rho)(1 + 48 gamma L/alpha^2):
the ||e||^2 terms contract by 1 - alpha/4 (6 gamma L = M alpha/4), the sigma terms by 1 - rho/2, and the D terms
sum to gamma (-1 + 2 gamma (L + A) + 96 gamma^2 L (L + A)/alpha^2 + 8 gamma omega L_max/n
+ 384 gamma^2 omega L_max L/(n alpha^2)) <= 0 when each of the last four terms is <= 1/4:

    gamma <= gamma_max = min(1/(8 (L + A)), alpha/sqrt(384 L (L + A)), n/(32 omega L_max),
                             alpha sqrt(n/(1536 omega L_max L)))     (the last two only when omega > 0).

Then E Phi^{t+1} <= q Phi^t with q = max(1 - 4 gamma mu/5, 1 - alpha/4, 1 - rho/2) (1 - rho/2 only with a memory),
and since e^0 = 0, E||x^t - x*||^2 <= E Phi^t <= q^t (r_0 + N sigma^0), sigma^0 = (1/n) sum_i ||grad f_i(x*)||^2
(h_i^0 = 0). At omega = 0 (GD) A = B = N = 0. The iteration count is log(Phi^0/eps)/(1 - q), 1/(1 - q) <=
max(5/(4 gamma mu), 4/alpha, 2/rho); at gamma = gamma_max it is of order (L + A)/mu + sqrt(L (L + A))/(alpha mu)
+ sqrt(L A)/(alpha mu) + 1/alpha + 1/rho: alpha divides a term in L and, through the fourth limit, a cross term
sqrt(L omega L_max/n)/(alpha mu), so the count is not additive in the two compressors' constants as EF21-P + DIANA's
(Gruntkowska, Tyurin, Richtarik, arXiv:2209.15218, section 5: L/(alpha mu) + L_max omega/(n mu) + omega). The
structure is theirs, the constants ours. ``step.rule=bound`` runs at gamma_max (isparse.runsetup.build).
"""

from __future__ import annotations

import math

from .bound import LinearBound, NoBound

#: where the derivation is written down (the bound's ``derivation``)
DERIVATION = "isparse/theory/ef21p.py; docs/algorithms.md §9"
THEOREM = "the EF21-P downlink bound (derived; arXiv:2209.15218)"


def ef21p_gamma_max(L: float, L_max: float, n: int, omega: float, alpha: float) -> float:
    """The largest stepsize of the derived EF21-P bound (module docstring): min(1/(8(L + A)), alpha/sqrt(384 L (L + A)),
    n/(32 omega L_max), alpha sqrt(n/(1536 omega L_max L))), A = 2 omega L_max/n (the last two only when omega > 0).

    ``L`` is the smoothness of f (L_f), ``L_max`` = max_i L_i, ``omega`` the uplink's (0: exact, GD), ``alpha`` the
    downlink's, in (0, 1]."""
    A = 2.0 * omega * L_max / n
    out = min(1.0 / (8.0 * (L + A)), alpha / math.sqrt(384.0 * L * (L + A)))
    if omega > 0:
        out = min(out, n / (32.0 * omega * L_max), alpha * math.sqrt(n / (1536.0 * omega * L_max * L)))
    return out


def ef21p_bound(*, L: float, L_max: float, mu: float, n: int, omega: float, rho: float | None, alpha: float,
                gamma: float, r0: float, sigma0: float, gamma_theory: float) -> LinearBound:
    """E||x^t - x*||^2 <= q^t (r_0 + N sigma^0) for a compressed downlink (module docstring); ``source="derived"``,
    applicable when gamma <= :func:`ef21p_gamma_max`.

    Parameters
    ----------
    L, L_max : float
        Smoothness of f, max_i L_i.
    omega : float
        The uplink's omega (chain of the blocks and the codec); 0 for GD with float64 values.
    rho : float or None
        The memories' rate (<= 1/(1 + omega)); None without a memory (GD).
    alpha : float
        The downlink's alpha.
    sigma0 : float
        (1/n) sum_i ||grad f_i(x*)||^2 (the memories start at 0).
    gamma_theory : float
        The method's own rule's stepsize (what ``step.multiplier`` scales).
    """
    gmax = ef21p_gamma_max(L, L_max, n, omega, alpha)
    applicable = gamma <= gmax * (1 + 1e-12)
    B = 2.0 * omega / n
    N = 0.0 if rho is None or omega == 0 else (2.0 * gamma ** 2 * B / rho) * (1.0 + 48.0 * gamma * L / alpha ** 2)
    rates = [1.0 - 0.8 * gamma * mu, 1.0 - alpha / 4.0]
    if rho is not None and omega > 0:
        rates.append(1.0 - rho / 2.0)
    return LinearBound(theorem=THEOREM, quantity="dist_sq", gamma_theory=gamma_theory, gamma=gamma,
                       applicable=applicable, rate=max(rates), initial=r0 + N * sigma0, gamma_max=gmax,
                       source="derived", derivation=DERIVATION)


def downlink_bound(method, problem, reference, x0, bound):
    """The derived EF21-P bound of a run with a compressed downlink (``method.downlink`` set), or a NoBound that says
    why there is none; ``bound`` is the method's own (its ``gamma_theory``), ``x0`` the start."""
    import numpy as np

    name, down = method.name, method.downlink
    why = None
    if name not in ("gd", "isega", "diana"):
        why = f"no bound is derived for {name} with messages.downlink={down.label} (the EF21-P bound covers gd, " \
              f"isega and diana: docs/algorithms.md §9)"
    elif not getattr(problem, "convex", True) or not problem.reg.is_zero:
        why = "the EF21-P bound needs convex f_i and no proximal term (problem.reg=none)"
    elif not method.uplink.unbiased or (name == "gd" and not method.uplink.exact):
        why = (f"the EF21-P bound needs an unbiased uplink (messages.codec={method.codec.label} is "
               f"{method.uplink.kind})" if not method.uplink.unbiased else
               f"the EF21-P bound covers gd with float64 values only (messages.codec={method.codec.label}: no memory "
               f"learns the codec's noise)")
    elif down.compressor.kind not in ("contractive", "exact"):
        why = f"messages.downlink={down.label} is not contractive"
    if why is not None:
        return NoBound(theorem=why, gamma_theory=bound.gamma_theory, gamma=method.gamma, quantity="dist_sq")
    omega = float(method.uplink.omega(method.blocks.d)) if name != "gd" else 0.0
    rho = None if name == "gd" else (1.0 / (1.0 + omega) if name == "isega" else float(method.alpha))
    if rho is not None and rho > 1.0 / (1.0 + omega) * (1 + 1e-12):
        return NoBound(theorem=f"the EF21-P bound needs the memory rate <= 1/(1 + omega) = {1 / (1 + omega):.4g}; "
                               f"got {rho:.4g}", gamma_theory=bound.gamma_theory, gamma=method.gamma)
    r0 = float(np.sum((np.asarray(x0) - reference.x_star) ** 2))
    return ef21p_bound(L=problem.L_f, L_max=problem.L, mu=problem.mu, n=method.n, omega=omega, rho=rho,
                       alpha=down.alpha, gamma=method.gamma, r0=r0,
                       sigma0=float(reference.sum_sq_local_grads) / method.n, gamma_theory=bound.gamma_theory)


__all__ = ["DERIVATION", "downlink_bound", "ef21p_bound", "ef21p_gamma_max"]
