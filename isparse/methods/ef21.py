"""EF21 with Top-K blocks, ``algorithm=ef21``: a peer a user would otherwise pick (Richtarik, Sokolov, Fatkhullin,
arXiv:2106.05203; not from arXiv:1901.09437).

Worker i keeps g_i (g_i^0 = 0), sends c_i = TopK(grad f_i(x) - g_i), the tau*m blocks of largest norm (a biased
compressor; their ids depend on the data, so they are sent, 4 B each), and sets g_i <- g_i + c_i; the master steps
along (1/n) sum_i g_i. gamma = min{1/(L(1 + sqrt(2 beta/theta))), theta/(2 mu)} with theta = 1 - sqrt(1 - alpha),
beta = (1 - alpha)/theta (their Theorem 2, PL case), alpha the compressor's contraction (tau for Top-K alone). No
bound is logged.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..compression.compressors import top_k
from ..errors import ConfigError
from .base import Method, Theory, Traits
from .isega import IsegaMasterState


def ef21_stepsize(L, mu, n, tau):
    """EF21's stepsize (PL case, the module docstring), with the compressor's contraction alpha in the place of
    ``tau`` (:func:`ef21_contraction`); alpha = 1 gives 1/L, mu = 0 the first term only; n is unused."""
    if tau >= 1.0:
        return 1.0 / L
    theta = 1.0 - math.sqrt(1.0 - tau)
    beta = (1.0 - tau) / theta
    step = 1.0 / (L * (1.0 + math.sqrt(2.0 * beta / theta)))
    return min(step, theta / (2.0 * mu)) if mu > 0 else step


def ef21_contraction(tau: float, codec, q: int) -> float:
    """alpha of E||C(v) - v||^2 <= (1 - alpha)||v||^2 for C = the codec after Top-K (tau of the blocks; q values a
    message).

    - Top-K alone: alpha = tau (the kept blocks hold at least tau of ||v||^2);
    - an unbiased Q with omega, scaled by 1/(1 + omega): with y = TopK(v) (disjoint from v - y, and Q keeps y's
      support), E||Q(y)/(1 + omega) - v||^2 = E||Q(y)/(1 + omega) - y||^2 + ||v - y||^2
      <= (1 - 1/(1 + omega))||y||^2 + ||v||^2 - ||y||^2 <= (1 - tau/(1 + omega))||v||^2: alpha = tau/(1 + omega);
    - a deterministic rounding with ||Q(y) - y|| <= delta ||y|| (float32, bfloat16): alpha = tau (1 - delta^2).

    Raises
    ------
    ConfigError
        The codec is neither unbiased nor contractive (no constant).
    """
    if codec.exact:
        return tau
    if codec.kind == "unbiased":
        return tau / (1.0 + codec.omega(q))
    alpha = codec.alpha(q)                        # exact: 1; contractive (float32, bfloat16: 1 - delta^2)
    if alpha is None:
        raise ConfigError("messages.codec", f"algorithm=ef21 needs an unbiased or contractive messages.codec (its "
                                            f"stepsize takes the contraction); {codec.label} declares kind "
                                            f"{codec.kind!r} with no constant.")
    return tau * alpha


class EF21Theory(Theory):
    """EF21's stepsize at the contraction alpha of Top-K with the codec (:func:`ef21_contraction`); no bound."""

    def step(self, ctx) -> dict:
        alpha = ef21_contraction(ctx.tau, ctx.codec, EF21._message_values(ctx))
        return {"gamma": ctx.step_multiplier * self.stepsize(self.smooth(ctx), ctx.problem.mu, ctx.n, alpha)}


class Ef21WorkerState(NamedTuple):
    """EF21's state of the hosted workers."""

    g: np.ndarray   #: (k, d): row p is the estimate g_i of hosted worker i = ids[p]


class EF21(Method):
    """EF21 with a Top-K block compressor (biased)."""

    name = "ef21"
    traits = Traits(needs=("grads",), derivable_ids=False, state_text="the estimates g_i, n x d")
    theory = EF21Theory(ef21_stepsize, codec_theory=True)   # the contraction with a codec in its stepsize

    @property
    def codec_scale(self) -> float:
        """What a decoded value is multiplied by: 1/(1 + omega) for a random unbiased codec (so that the composition
        is contractive, see :func:`ef21_contraction`), else 1."""
        return self.memory_rate

    @classmethod
    def _state_bytes(cls, ctx):
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        """g_i^0 = 0."""
        return Ef21WorkerState(np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        r"""Each hosted worker i sends :math:`c_i = \mathrm{TopK}(\nabla f_i(x^t) - g_i)` (the tau*m blocks of largest
        norm, with their ids), then :math:`g_i \leftarrow g_i + c_i` (c_i times :attr:`codec_scale`)."""
        diff = data.grads(x) - state.g                                            # (k, d)
        b, m = self.blocks.size, self.blocks.m
        norms = np.pad(diff ** 2, ((0, 0), (0, m * b - diff.shape[1]))).reshape(data.k, m, b).sum(axis=2)
        s = self.sampled(data, t, top_k(norms, self.tau_m))                      # Top-K blocks by norm
        g = state.g if donate else state.g.copy()
        batch = self.send(s, diff[s.pw, s.pc])
        g[s.pw, s.pc] += batch.values if self.codec_scale == 1.0 else self.codec_scale * batch.values
        return batch, Ef21WorkerState(g)

    def master_init(self, x0):
        """g_bar = (1/n) sum_i g_i^0 = 0, kept in ``IsegaMasterState.h_bar``."""
        return IsegaMasterState(h_bar=np.zeros_like(x0))   # h_bar = (1/n) sum_i g_i

    def master_step(self, state, x, batch, donate=False):
        r""":math:`\bar g \leftarrow \bar g + \frac1n\sum_i c_i`, :math:`x^{t+1} = x^t - \gamma \bar g`."""
        g_bar = state.h_bar + (self.codec_scale / self.n) * self.aggregate(batch) if self.codec_scale != 1.0 \
            else state.h_bar + self.aggregate(batch) / self.n
        return x - self.gamma * g_bar, IsegaMasterState(h_bar=g_bar)
