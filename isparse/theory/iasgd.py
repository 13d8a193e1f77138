"""The IASGD bound (Theorem 8 of arXiv:1901.09437 with Theorem 1 of Vaswani, Bach, Schmidt, arXiv:1810.07288).

Strong growth of q = (1/(n tau)) sum_i (g_i)_{U_i} [derived]: if (1/n) sum_i ||grad f_i(x)||^2
<= rho_tilde ||grad f(x)||^2 for all x (this needs Assumption 2) and E||g_i - grad f_i||^2 <=
rho_bar ||grad f_i||^2, then E||q||^2 <= rho_hat ||grad f||^2 with

    rho_hat = 1 + rho_tilde (1 - tau + rho_bar) / (n tau).

With a codec (``messages.codec``, derived; docs/algorithms.md §7): worker i sends Q((g_i)_{U_i}), Q unbiased and
drawn independently of U_i and the minibatch, E||Q(v) - v||^2 <= omega ||v||^2. Then E||Q((g_i)_U)||^2 <=
(1 + omega) tau E||g_i||^2 <= (1 + omega)(1 + rho_bar) tau ||grad f_i||^2, so worker i's share (1/(n tau)) Q((g_i)_U)
of q has mean grad f_i/n and variance at most ((1 + omega)(1 + rho_bar) - tau) ||grad f_i||^2/(n tau)^2; summed
over the independent workers, E||q||^2 <= ||grad f||^2 + ((1 + omega)(1 + rho_bar) - tau)/(n tau) (1/n) sum_i
||grad f_i||^2, and strong growth gives

    rho_hat = 1 + rho_tilde ((1 + omega)(1 + rho_bar) - tau) / (n tau),

which is the line above at omega = 0 (and 1 + rho_tilde (1 - tau + omega)/(n tau) for exact local gradients).

With rho = rho_hat, s = sqrt(mu/(rho^2 L)):
E f(w_{k+1}) - f* <= (1 - s)^k [f(w_0) - f* + (mu/2)||w_0 - x*||^2]  (logged on ``subopt``).
When rho is set by hand (the paper tuned it by grid search) no bound is claimed.
"""

from __future__ import annotations

from .bound import LinearBound, NoBound


def strong_growth_rho(rho_tilde: float, rho_bar: float, n: int, tau: float, omega: float = 0.0) -> float:
    """rho_hat >= 1, the strong-growth constant of IASGD's estimate q (Theorem 8; derived, the module docstring).

    rho_hat = 1 + rho_tilde ((1 + omega)(1 + rho_bar) - tau)/(n tau), i.e. 1 + rho_tilde (1 - tau + rho_bar)/(n tau)
    without a codec.

    Parameters
    ----------
    rho_tilde : float
        Strong growth of the local gradients: (1/n) sum_i ||grad f_i(x)||^2 <= rho_tilde ||grad f(x)||^2.
    rho_bar : float
        Relative noise of the minibatch gradients: E||g_i - grad f_i||^2 <= rho_bar ||grad f_i||^2 (0: exact).
    """
    return 1.0 + rho_tilde * ((1.0 + omega) * (1.0 + rho_bar) - tau) / (n * tau)


def iasgd_bound(*, L: float, mu: float, rho: float, rho_is_computed: bool, subopt0: float, r0: float,
                omega: float = 0.0):
    """Bound on E f(w_k) - f* (``subopt``) for IASGD (Algorithm 7) with rho = rho_hat, always "derived".

    Theorem 8 with Vaswani, Bach, Schmidt's Theorem 1 (arXiv:1810.07288):
    E f(w_{k+1}) - f* <= (1 - s)^k [f(w_0) - f* + (mu/2)||w_0 - x*||^2], s = sqrt(mu/(rho^2 L)) (the module docstring;
    docs/algorithms.md §3).

    Parameters
    ----------
    rho : float
        The strong-growth constant used (the step is eta = 1/(rho L)).
    rho_is_computed : bool
        rho is the computed rho_hat; False (a hand-set rho): no bound is claimed.
    subopt0 : float
        f(x^0) - f*.
    """
    if not rho_is_computed:
        return NoBound(theorem="IASGD with a hand-set rho: the strong-growth bound needs rho >= rho_hat",
                       gamma_theory=1.0 / (rho * L), gamma=1.0 / (rho * L), quantity="subopt")
    s = (mu / (rho * rho * L)) ** 0.5
    return LinearBound(theorem="Theorem 8 (IASGD) with Vaswani-Bach-Schmidt Theorem 1; rho_hat derived",
                       quantity="subopt", gamma_theory=1.0 / (rho * L), gamma=1.0 / (rho * L), applicable=True,
                       rate=1.0 - s, initial=(subopt0 + 0.5 * mu * r0) / (1.0 - s), source="derived",
                       derivation="isparse/theory/iasgd.py (rho_hat of the strong growth condition derived"
                                  + (f", with the codec's omega = {omega:.4g})" if omega > 0 else ")"))
