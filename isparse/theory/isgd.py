"""ISGD (Algorithm 6) of arXiv:1901.09437: the constant-step neighbourhood and Theorem 6.

Constant gamma <= 1/(2L(tau + 2(1 - tau)/n)) [derived from Lemma 2 as in ``theorem1``, with the
minibatch noise E||g_i - grad f_i||^2 <= sigma_i^2 added to each worker's variance]::

    E||x^t - x*||^2 <= (1 - gamma tau mu)^t r_0 + gamma D/(n mu),
    D = sigma^2 + (1 - tau)(2/n) sum_i ||grad f_i(x*)||^2,  sigma^2 = (1/n) sum_i sigma_i^2.

Decreasing gamma_t = 1/(a + c t), a = 2(tau + 2(1 - tau)/n) L, c = mu tau / 4 (Theorem 6) [reconstructed]::

    E[f(x_hat^t) - f*] <= a^2 (1 - tau mu/a) r_0 / (tau (t+1) a + (c tau/2) t (t+1))
                          + D / (n (a + c t/2)),

x_hat^t the average of x^0..x^t weighted by 1/gamma_s. The paper's printed statement cannot be read as it stands,
and the 1/gamma_s weighting of x_hat is this project's reading; for that weighting the proof gives the noise term
(D/n)/(a + c t/2) above, which is (t + 1)/t times the paper's D/(n(1 + 1/t) a + (n c/2)(t + 1)) (twice it at t = 1),
so the bound logged is the proved one, tagged ``bound_source=reconstructed``. The proof holds for the schedule's own
(a, c): ``step.multiplier`` != 1 scales both (gamma_t = m/(a + c t)), and no bound is logged then (a NoBound that
says so; above it, gamma_0 = m/a exceeds the theorem's 1/a).

Non-convex f (Theorem 7, derived): for gamma <= 1/(L(tau + (1 - tau)/n)),

    E||grad f(x_hat^t)||^2 <= 2(f(x^0) - f*)/(gamma tau (t + 1)) + (L gamma/n)((1 - tau) nu^2 + sigma^2),

x_hat^t uniform over x^0..x^t (so the left side is the average of ||grad f(x^s)||^2, logged as
``grad_norm_sq_avg``) and nu^2 >= (1/n) sum_i ||grad f - grad f_i||^2. f* is replaced by a lower
bound (0 for non-negative losses and penalties), which keeps the bound valid.

With a codec (``messages.codec``, derived; docs/algorithms.md §7). A worker sends Q((g_i)_U), Q unbiased and drawn
independently of U and of the minibatch, E||Q(w) - w||^2 <= omega ||w||^2. Its variance around tau grad f_i is
E||Q(g_U) - tau grad f_i||^2 <= (1 + omega) tau E||g_i||^2 - tau^2 ||grad f_i||^2
= tau(1 - tau + omega)||grad f_i||^2 + (1 + omega) tau sigma_i^2, so in both strongly convex bounds (1 - tau)
becomes (1 - tau + omega) and sigma^2 becomes (1 + omega) sigma^2: gamma <= 1/(2L(tau + 2(1 - tau + omega)/n)),
D = (1 + omega) sigma^2 + (1 - tau + omega)(2/n) sum_i ||grad f_i(x*)||^2, and a = 2(tau + 2(1 - tau + omega)/n) L
for Theorem 6. The non-convex bound is not derived with a codec (no bound is logged then).
"""

from __future__ import annotations

import math

from .bound import LinearBound, NoBound, SublinearBound
from .theorem1 import theorem1_stepsize


def isgd_schedule(L: float, mu: float, n: int, tau: float, omega: float = 0.0) -> tuple[float, float]:
    """(a, c) of Theorem 6's decreasing stepsize gamma_t = 1/(a + c t) (ISGD, Algorithm 6): a = 2(tau + 2(1 - tau +
    omega)/n) L and c = mu tau/4 (omega > 0 derived: the module docstring; omega 0: float64, the paper's setting)."""
    return 2.0 * (tau + 2.0 * (1.0 - tau + omega) / n) * L, mu * tau / 4.0


def theorem7_stepsize(L: float, mu: float, n: int, tau: float) -> float:
    """Theorem 7's stepsize (non-convex ISGD, restated): gamma = 1/(L(tau + (1 - tau)/n)), the largest step of the
    bound."""
    return 1.0 / (L * (tau + (1.0 - tau) / n))


def isgd_bound(*, L: float, mu: float, n: int, tau: float, gamma: float, r0: float, sum_sq_local_grads: float,
               sigma_sq: float, decreasing: bool = False, nu_sq: float = math.nan, f0_minus_low: float = math.nan,
               omega: float = 0.0):
    """The bound of ISGD (Algorithm 6) for its stepsize (the module docstring; docs/algorithms.md §3).

    Parameters
    ----------
    mu : float
        Strong convexity of f; 0 selects the non-convex bound (Theorem 7).
    gamma : float
        The stepsize used (gamma_0 of a decreasing schedule).
    sigma_sq : float
        sigma^2 = (1/n) sum_i sigma_i^2, the minibatch noise bound (inf: none exists, and no bound is given).
    decreasing : bool
        Theorem 6's decreasing schedule rather than a constant step (``gamma`` = its gamma_0; a gamma other than
        the schedule's 1/a, a scaled schedule, gives a NoBound).
    nu_sq : float
        nu^2 >= (1/n) sum_i ||grad f - grad f_i||^2 (Theorem 7 only).
    f0_minus_low : float
        f(x^0) minus a lower bound of f* (Theorem 7 only).

    Returns
    -------
    LinearBound, SublinearBound or NoBound
        The derived constant-step bound on dist_sq, Theorem 6's on f(x_hat^t) - f* (``subopt_avg``), or Theorem 7's on
        the average squared gradient norm (``grad_norm_sq_avg``); a NoBound when the noise is unbounded, or for the
        non-convex case with a codec or a decreasing step.
    """
    if mu <= 0:
        gamma_max = theorem7_stepsize(L, mu, n, tau)
        if omega > 0:
            return NoBound(theorem="Theorem 7 (non-convex ISGD) is not derived with a codec", gamma_theory=gamma_max,
                           gamma=gamma, quantity="grad_norm_sq_avg")
        if decreasing or not math.isfinite(sigma_sq):
            return NoBound(theorem="Theorem 7 (non-convex ISGD) is for a constant step and bounded noise",
                           gamma_theory=gamma_max, gamma=gamma, quantity="grad_norm_sq_avg")
        floor = (L * gamma / n) * ((1.0 - tau) * nu_sq + sigma_sq)
        return SublinearBound(theorem="Theorem 7 (non-convex ISGD), derived; f* replaced by the lower bound 0",
                              quantity="grad_norm_sq_avg", gamma_theory=gamma_max, gamma=gamma, source="derived",
                              derivation="isparse/theory/isgd.py (Theorem 7 of arXiv:1901.09437 restated, f* -> 0)",
                              applicable=gamma <= gamma_max * (1 + 1e-12), neighbourhood=floor,
                              formula=lambda t: 2.0 * f0_minus_low / (gamma * tau * (t + 1)) + floor)
    D = (1.0 + omega) * sigma_sq + (1.0 - tau + omega) * (2.0 / n) * sum_sq_local_grads
    with_codec = f", with the codec's omega = {omega:.4g} (docs/algorithms.md §7)" if omega > 0 else ""
    if not math.isfinite(D):
        return NoBound(theorem="ISGD: the minibatch noise of this loss has no uniform bound", gamma_theory=gamma,
                       gamma=gamma)
    if decreasing:
        a, c = isgd_schedule(L, mu, n, tau, omega)
        if abs(gamma * a - 1.0) > 1e-12:   # step.multiplier scaled the schedule: the proof is for its own (a, c)
            return NoBound(theorem=f"Theorem 6 (ISGD, decreasing steps) holds for its schedule gamma_t = 1/(a + c t) "
                                   f"with gamma_0 = 1/a = {1.0 / a:.4g}; step.multiplier scales it (gamma_0 = "
                                   f"{gamma:.4g})", gamma_theory=1.0 / a, gamma=gamma, quantity="subopt_avg")

        def formula(t, a=a, c=c):
            first = a * a * (1.0 - tau * mu / a) * r0 / (tau * (t + 1) * a + 0.5 * c * tau * t * (t + 1))
            return first + D / (n * (a + 0.5 * c * t))

        return SublinearBound(theorem="Theorem 6 (ISGD, decreasing steps), arXiv:1901.09437, reconstructed",
                              quantity="subopt_avg", gamma_theory=1.0 / a, gamma=gamma, applicable=True,
                              formula=formula, source="derived" if omega > 0 else "reconstructed",
                              derivation="isparse/theory/isgd.py (Theorem 6 reconstructed: the 1/gamma_s weighting "
                                         "of x_hat and its noise term D/(n(a + c t/2))" + with_codec + ")")
    gamma_max = theorem1_stepsize(L, mu, n, tau, omega)
    return LinearBound(theorem="ISGD constant step, derived from Lemma 2 of arXiv:1901.09437", quantity="dist_sq",
                       gamma_theory=gamma_max, gamma=gamma, applicable=gamma <= gamma_max * (1 + 1e-12),
                       source="derived", derivation="isparse/theory/isgd.py (Lemma 2 as in theorem1.py, plus the "
                                                    "minibatch noise sigma^2" + with_codec + ")",
                       rate=1.0 - gamma * tau * mu, initial=r0, neighbourhood=gamma * D / (n * mu))
