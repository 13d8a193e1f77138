"""DIANA with the unbiased Rand-K compressor, ``algorithm=diana``: a peer a user would otherwise pick (Mishchenko,
Gorbunov, Takac, Richtarik, arXiv:1901.09269; not from arXiv:1901.09437).

Worker i sends Q((grad f_i - h_i)_U), U its tau*m sampled blocks, and moves its shift h_i <- h_i + alpha C(grad f_i -
h_i), C(v) = (1/tau) Q(v_U); the master steps along g = h_bar + (1/n) sum_i C(grad f_i - h_i). alpha = 1/(omega_D + 1)
with omega_D = (1 + omega)/tau - 1 (= 1/tau - 1 without a codec), gamma = 1/(L (1 + 2 omega_D / n)). With alpha = tau
the update is ISEGA's; only gamma differs. No bound is logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import check_range
from ..params import Interval, Nullable, param
from .base import AlgorithmOptions, Theory
from .isega import ISEGA, IsegaMasterState, IsegaWorkerState


@dataclass
class DianaOptions(AlgorithmOptions):
    """``algorithm.*`` of diana."""

    alpha: Optional[float] = param(None, Nullable(Interval(float, 0.0, 1.0, low_open=True)),
                                   "the shift rate, at most 1/(omega + 1) = tau (checked once tau is known); null: tau")


def diana_omega(tau, omega=0.0):
    """omega_D of DIANA's compressor C(v) = (1/tau) Q(v_U): (1 + omega)/tau - 1.

    E||C(v)||^2 <= ((1 + omega)/tau) ||v||^2 and E C(v) = v: the composition rule of ``isparse.compression.Chain``
    (1 + omega_D = (1 + omega_blocks)(1 + omega), omega_blocks = 1/tau - 1) in the stepsize rules' signature; a built
    method takes it from its chain, ``uplink.omega(d)`` (docs/algorithms.md §7).
    """
    return (1.0 + omega) / tau - 1.0


def diana_stepsize(L, mu, n, tau, omega=0.0):
    """gamma = 1/(L(1 + 2 omega_D/n)), omega_D = :func:`diana_omega` (mu unused)."""
    return 1.0 / (L * (1.0 + 2.0 * diana_omega(tau, omega) / n))


def _omega_d(omega_uplink: float | None, tau: float) -> float:
    """omega_D of DIANA's shift rate 1/(omega_D + 1): the uplink chain's omega by the composition rule, or, with a
    biased codec (float32, bfloat16: no omega, and no bound), Rand-K's own 1/tau - 1, as without a codec."""
    return 1.0 / tau - 1.0 if omega_uplink is None else omega_uplink


class DIANA(ISEGA):
    """DIANA with Rand-K; ``options.alpha`` (``algorithm.alpha``) is the shift rate, default 1/(omega_D + 1)."""

    name = "diana"
    options = DianaOptions
    # omega_D = (1 + omega)/tau - 1 in its stepsize and alpha (no bound is logged for DIANA)
    theory = Theory(diana_stepsize, codec_theory=True)

    def __init__(self, n, blocks, tau_m, gamma, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        alpha = self.opts.alpha
        self.alpha = 1.0 / (_omega_d(self.uplink.omega(blocks.d), self.tau) + 1.0) if alpha is None else float(alpha)

    @classmethod
    def _check(cls, ctx):
        """Also: ``algorithm.alpha`` at most 1/(omega_D + 1) = tau/(1 + omega) (a ConfigError naming it)."""
        if ctx.options.alpha is not None:
            top = 1.0 / (_omega_d(ctx.uplink.omega(ctx.problem.d), ctx.tau) + 1.0)   # 1/(omega_D + 1)
            check_range("algorithm.alpha", ctx.options.alpha, 0.0, top,
                        high_text="1/(omega+1) = tau" if not ctx.omega else "1/(omega_D+1) = tau/(1 + omega)",
                        low_open=True)
        super()._check(ctx)

    def worker_step(self, data, state, x, t, donate=False):
        r"""Each hosted worker i sends :math:`Q((\nabla f_i(x^t) - h_i)_{U_i})`, then
        :math:`h_i \leftarrow h_i + \alpha C(\nabla f_i(x^t) - h_i)`."""
        s = self.sampled(data, t)
        g = self.local_grads(data, x, s)
        h = state.h if donate else state.h.copy()
        delta = g - h[s.pw, s.pc]                         # sent: (grad f_i - h_i)_U; C = (1/tau) of it
        batch = self.send(s, delta)                       # decoded: Q((grad f_i - h_i)_U)
        h[s.pw, s.pc] += (self.alpha / self.tau) * batch.values   # h_i += alpha C(grad f_i - h_i)
        return batch, IsegaWorkerState(h)

    def master_step(self, state, x, batch, donate=False):
        r""":math:`g = \bar h + \frac{1}{n\tau}\sum_i Q(\Delta_i)`,
        :math:`x^{t+1} = \operatorname{prox}_{\gamma R}(x^t - \gamma g)`,
        :math:`\bar h \leftarrow \bar h + \frac{\alpha}{n\tau}\sum_i Q(\Delta_i)`."""
        S = self.aggregate(batch)
        g = state.h_bar + S / (self.n * self.tau)
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (self.alpha / (self.n * self.tau)) * S)

    _worker_targets = _worker_memory = None
