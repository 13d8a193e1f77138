"""Peers a user would otherwise pick, in the same batched worker/master form (not from arXiv:1901.09437).

- ``shared_bcd``: parallel block coordinate descent: every worker uses the same block set U^t
  (one stream shared by all, a function of (seed, t)), x^{t+1} = x^t - gamma (grad f(x^t))_{U^t}; gamma = 1/L.
- ``diana``: DIANA with the unbiased Rand-K compressor Q(v) = (1/tau) v_U (Mishchenko, Gorbunov,
  Takac, Richtarik, arXiv:1901.09269): shifts h_i <- h_i + alpha Q(grad f_i - h_i),
  g = h_bar + (1/n) sum_i Q(grad f_i - h_i); alpha = 1/(omega + 1) with omega = 1/tau - 1 and
  gamma = 1/(L (1 + 2 omega / n)). With alpha = tau the update is ISEGA's; only gamma differs.
- ``ef21``: EF21 with Top-K blocks (Richtarik, Sokolov, Fatkhullin, arXiv:2106.05203): worker keeps
  g_i, sends c_i = TopK(grad f_i(x) - g_i) (the tau*m blocks of largest norm, a biased compressor),
  g_i <- g_i + c_i; the master steps along (1/n) sum_i g_i. gamma = min{1/(L(1 + sqrt(2 beta/theta))),
  theta/(2 mu)} with theta = 1 - sqrt(1 - tau), beta = (1 - tau)/(1 - sqrt(1 - tau)) (their Theorem 2, PL case).
  Top-K ids depend on the data: they are sent (4 B each).

No bound is logged for the peers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..compression.sampling import SHARED_BLOCKS
from ..errors import ConfigError, check_range
from ..params import Interval, Nullable, param
from .base import AlgorithmOptions, Method, Theory, Traits
from .isega import ISEGA, IsegaMasterState, IsegaWorkerState


@dataclass
class DianaOptions(AlgorithmOptions):
    """``algorithm.*`` of diana."""

    alpha: Optional[float] = param(None, Nullable(Interval(float, 0.0, 1.0, low_open=True)),
                                   "the shift rate, at most 1/(omega + 1) = tau (checked once tau is known); null: tau")


def shared_bcd_stepsize(L, mu, n, tau):
    """gamma = 1/L (every block is L-smooth): parallel block coordinate descent's step.

    Parameters
    ----------
    L : float
        Smoothness constant.
    mu : float
        Strong convexity of f (unused).
    n : int
        Number of workers (unused).
    tau : float
        Fraction of the blocks (unused).

    Returns
    -------
    float
    """
    return 1.0 / L


def diana_omega(tau, omega=0.0):
    """omega_D of DIANA's compressor C(v) = (1/tau) Q(v_U): (1 + omega)/tau - 1 (= 1/tau - 1 without a codec).

    E||C(v)||^2 <= ((1 + omega)/tau) ||v||^2 and E C(v) = v. This is the composition rule of
    ``isparse.compression.Chain`` (1 + omega_D = (1 + omega_blocks)(1 + omega), omega_blocks = 1/tau - 1) written for
    the stepsize rule's (L, mu, n, tau, omega) signature; a built method takes it from its chain, ``Box.uplink_omega``
    (docs/algorithms.md §7).

    Parameters
    ----------
    tau : float
        Fraction of the blocks each worker sends.
    omega : float, optional
        The codec's omega (0: float64).

    Returns
    -------
    float
    """
    return (1.0 + omega) / tau - 1.0


def diana_stepsize(L, mu, n, tau, omega=0.0):
    """DIANA's stepsize gamma = 1/(L(1 + 2 omega_D/n)), omega_D = (1 + omega)/tau - 1, with alpha = 1/(omega_D + 1).

    Parameters
    ----------
    L : float
        Smoothness constant.
    mu : float
        Strong convexity of f (unused).
    n : int
        Number of workers.
    tau : float
        Fraction of the blocks each worker sends.
    omega : float, optional
        The codec's omega (0: float64).

    Returns
    -------
    float
    """
    return 1.0 / (L * (1.0 + 2.0 * diana_omega(tau, omega) / n))


def ef21_stepsize(L, mu, n, tau):
    """EF21's stepsize (PL case): gamma = min{1/(L(1 + sqrt(2 beta/theta))), theta/(2 mu)}.

    theta = 1 - sqrt(1 - alpha), beta = (1 - alpha)/theta (Richtarik, Sokolov, Fatkhullin, arXiv:2106.05203, Theorem 2),
    with the compressor's contraction alpha in the place of ``tau`` (alpha = tau for Top-K alone;
    :func:`ef21_contraction` with a codec).

    Parameters
    ----------
    L : float
        Smoothness constant.
    mu : float
        Strong convexity of f (mu = 0: the first term only).
    n : int
        Number of workers (unused).
    tau : float
        The contraction alpha, in (0, 1]; 1 gives 1/L.

    Returns
    -------
    float
    """
    if tau >= 1.0:
        return 1.0 / L
    theta = 1.0 - math.sqrt(1.0 - tau)
    beta = (1.0 - tau) / theta
    step = 1.0 / (L * (1.0 + math.sqrt(2.0 * beta / theta)))
    return min(step, theta / (2.0 * mu)) if mu > 0 else step


def ef21_contraction(tau: float, codec, q: int) -> float:
    """alpha of E||C(v) - v||^2 <= (1 - alpha)||v||^2 for C = the codec after Top-K (tau of the blocks).

    - Top-K alone: alpha = tau (the kept blocks hold at least tau of ||v||^2);
    - an unbiased Q with omega, scaled by 1/(1 + omega): with y = TopK(v) (disjoint from v - y, and Q keeps y's
      support), E||Q(y)/(1 + omega) - v||^2 = E||Q(y)/(1 + omega) - y||^2 + ||v - y||^2
      <= (1 - 1/(1 + omega))||y||^2 + ||v||^2 - ||y||^2 <= (1 - tau/(1 + omega))||v||^2: alpha = tau/(1 + omega);
    - a deterministic rounding with ||Q(y) - y|| <= delta ||y|| (float32, bfloat16): alpha = tau (1 - delta^2).

    Parameters
    ----------
    tau : float
        Fraction of the blocks Top-K keeps.
    codec : Codec
        The value codec (``messages.codec``).
    q : int
        Values per message (the codec's constants may depend on it).

    Returns
    -------
    float

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
        """EF21's stepsize at the contraction alpha of Top-K with the codec, scaled by ``step.multiplier``.

        Parameters
        ----------
        ctx : Context
            The run.

        Returns
        -------
        dict
            ``{"gamma": gamma}`` (:func:`ef21_stepsize` at alpha = :func:`ef21_contraction`).

        Raises
        ------
        ConfigError
            The codec declares no constant (a biased codec without a contraction).
        """
        alpha = ef21_contraction(ctx.tau, ctx.codec, EF21.message_values(ctx))
        return {"gamma": ctx.step_multiplier * self.stepsize(self.smooth(ctx), ctx.problem.mu, ctx.n, alpha)}


class SharedBCD(Method):
    """Parallel block coordinate descent, ``algorithm=shared_bcd``: the same tau*m blocks for every worker (a peer).

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).

    Notes
    -----
    x^{t+1} = x^t - gamma (grad f(x^t))_{U^t}, U^t a function of (seed, t); gamma = 1/L (:func:`shared_bcd_stepsize`).
    Not from arXiv:1901.09437: no bound is logged.
    """

    name = "shared_bcd"
    theory = Theory(shared_bcd_stepsize)

    def sample(self, ids, t):
        """U^t, the same tau*m blocks for every worker (a function of (seed, t)).

        Parameters
        ----------
        ids : array_like of int, shape (k,)
            The workers.
        t : int
            The round.

        Returns
        -------
        ndarray of int, shape (k, tau*m)
            The one block set, repeated for each worker.
        """
        U = self.sampler.subsets(SHARED_BLOCKS, [0], t, self.blocks.m, self.tau_m)
        return np.repeat(U, len(ids), axis=0)

    def worker_step(self, data, state, x, t, donate=False):
        r"""Parallel block coordinate descent, worker side: the shared blocks of the local gradient.

        Each hosted worker i sends :math:`(\nabla f_i(x^t))_{U^t}`, U^t shared by all workers.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : None
            No worker state.
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks of grad f_i(x^t) per worker.
        state : None
        """
        s = self.sampled(data, t)
        return self.send(s, self.local_grads(data, x, s)), state

    def master_step(self, state, x, batch, donate=False):
        r"""Parallel block coordinate descent, master side: a block step along grad f.

        :math:`x^{t+1} = x^t - \frac{\gamma}{n}\sum_i (\nabla f_i(x^t))_{U^t} = x^t - \gamma(\nabla f(x^t))_{U^t}`.

        Parameters
        ----------
        state : None
            No master state.
        x : ndarray, shape (d,)
            x^t.
        batch : Messages
            All n workers' messages of round t, ordered by worker (decoded values).
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray, shape (d,)
            x^{t+1}.
        state : None
        """
        return self.averaged_step(x, batch), state


def _omega_d(omega_uplink: float | None, tau: float) -> float:
    """omega_D of DIANA's shift rate 1/(omega_D + 1): the uplink chain's omega by the composition rule, or, with a
    biased codec (float32, bfloat16: no omega, and no bound), Rand-K's own 1/tau - 1, as without a codec."""
    return 1.0 / tau - 1.0 if omega_uplink is None else omega_uplink


class DIANA(ISEGA):
    """DIANA with Rand-K, ``algorithm=diana`` (a peer; Mishchenko, Gorbunov, Takac, Richtarik, arXiv:1901.09269).

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box`; ``options.alpha`` is the shift rate (``algorithm.alpha``).

    Notes
    -----
    Rand-K: tau*m blocks scaled by 1/tau, omega_D = (1 + omega)/tau - 1; the shift rate alpha defaults to
    1/(omega_D + 1) (= tau without a codec), where the update is ISEGA's and only gamma differs
    (:func:`diana_stepsize`). No bound is logged.
    """

    name = "diana"
    options = DianaOptions
    # omega_D = (1 + omega)/tau - 1 in its stepsize and alpha (no bound is logged for DIANA)
    theory = Theory(diana_stepsize, codec_theory=True)

    def __init__(self, n, blocks, tau_m, gamma, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        alpha = self.opts.alpha
        self.alpha = 1.0 / (_omega_d(self.uplink_omega, self.tau) + 1.0) if alpha is None else float(alpha)

    @classmethod
    def check(cls, ctx):
        """DIANA's check before any work, then :meth:`Method.check`'s: alpha <= 1/(omega_D + 1) = tau/(1 + omega).

        Parameters
        ----------
        ctx : Context
            The run.

        Raises
        ------
        ConfigError
            ``algorithm.alpha`` above 1/(omega_D + 1), or a check of :meth:`Method.check` fails.
        """
        if ctx.options.alpha is not None:
            top = 1.0 / (_omega_d(ctx.uplink.omega(ctx.problem.d), ctx.tau) + 1.0)   # 1/(omega_D + 1)
            check_range("algorithm.alpha", ctx.options.alpha, 0.0, top,
                        high_text="1/(omega+1) = tau" if not ctx.omega else "1/(omega_D+1) = tau/(1 + omega)",
                        low_open=True)
        super().check(ctx)

    def worker_step(self, data, state, x, t, donate=False):
        r"""DIANA with Rand-K, worker side: the sampled blocks of grad f_i - h_i, and the shift update.

        Each hosted worker i sends :math:`(\nabla f_i(x^t) - h_i)_{U_i}`, then
        :math:`h_i \leftarrow h_i + \alpha C(\nabla f_i(x^t) - h_i)`.

        C(v) = (1/tau) Q(v_U) is the unbiased compressor (Mishchenko, Gorbunov, Takac, Richtarik, arXiv:1901.09269).

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : IsegaWorkerState
            ``h``, shape (k, d): the shifts h_i.
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks of grad f_i(x^t) - h_i per worker.
        state : IsegaWorkerState
            The shifts moved by alpha/tau times the decoded values.
        """
        s = self.sampled(data, t)
        g = self.local_grads(data, x, s)
        h = state.h if donate else state.h.copy()
        delta = g - h[s.pw, s.pc]                         # sent: (grad f_i - h_i)_U; C = (1/tau) of it
        batch = self.send(s, delta)                       # decoded: Q((grad f_i - h_i)_U)
        h[s.pw, s.pc] += (self.alpha / self.tau) * batch.values   # h_i += alpha C(grad f_i - h_i)
        return batch, IsegaWorkerState(h)

    def master_step(self, state, x, batch, donate=False):
        r"""DIANA, master side: the shifted estimate and the proximal step.

        :math:`g = \bar h + \frac{1}{n\tau}\sum_i Q(\Delta_i)`,
        :math:`x^{t+1} = \operatorname{prox}_{\gamma R}(x^t - \gamma g)`.

        Parameters
        ----------
        state : IsegaMasterState
            ``h_bar``, shape (d,): (1/n) sum_i h_i.
        x : ndarray, shape (d,)
            x^t.
        batch : Messages
            All n workers' messages of round t, ordered by worker (decoded values).
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray, shape (d,)
            x^{t+1}.
        state : IsegaMasterState
            h_bar moved by (alpha/(n tau)) sum_i Q(Delta_i).
        """
        S = self.aggregate(batch)
        g = state.h_bar + S / (self.n * self.tau)
        x_new = self.reg.prox(x - self.gamma * g, self.gamma)
        return x_new, IsegaMasterState(h_bar=state.h_bar + (self.alpha / (self.n * self.tau)) * S)

    worker_targets = worker_memory = None


class Ef21WorkerState(NamedTuple):
    """EF21's state of the hosted workers.

    Attributes
    ----------
    g : ndarray of shape (k, d)
        Row p: the gradient estimate g_i of hosted worker i = ids[p].
    """

    g: np.ndarray


class EF21(Method):
    """EF21 with a Top-K block compressor (biased), ``algorithm=ef21`` (a peer; arXiv:2106.05203).

    Parameters
    ----------
    n, blocks, tau_m, gamma, options, reg, seed, send_ids, codec
        As :class:`~isparse.methods.contract.Box` (built by :meth:`~isparse.methods.base.Method.configure`).

    Notes
    -----
    Worker i keeps g_i (g_i^0 = 0), sends c_i = TopK(grad f_i(x) - g_i), the tau*m blocks of largest norm with their
    ids, and sets g_i <- g_i + c_i; the master steps along (1/n) sum_i g_i. gamma: :func:`ef21_stepsize` at the
    contraction :func:`ef21_contraction`. No bound is logged.
    """

    name = "ef21"
    traits = Traits(needs=("grads",), derivable_ids=False, state_text="the estimates g_i, n x d")
    theory = EF21Theory(ef21_stepsize, codec_theory=True)   # the contraction with a codec in its stepsize

    @property
    def codec_scale(self) -> float:
        """What a decoded value is multiplied by: 1/(1 + omega) for a random unbiased codec (so that the composition
        is contractive, see :func:`ef21_contraction`), else 1."""
        return self.memory_rate

    @classmethod
    def state_bytes(cls, ctx):
        """Bytes of the estimates g_i: 8 n d (float64), for the memory check before any work.

        Parameters
        ----------
        ctx : Context
            The run (n, d).

        Returns
        -------
        int
            Bytes.
        """
        return 8 * ctx.n * ctx.problem.d

    def worker_init(self, data, x0):
        """The hosted workers' estimates at x^0: g_i^0 = 0.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data.
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        Ef21WorkerState
            ``g`` of shape (k, d), zeros.
        """
        return Ef21WorkerState(np.zeros((data.k, x0.size)))

    def worker_step(self, data, state, x, t, donate=False):
        r"""EF21, worker side: the Top-K blocks of grad f_i - g_i, and the estimate update.

        Each hosted worker i sends :math:`c_i = \mathrm{TopK}(\nabla f_i(x^t) - g_i)` (the tau*m blocks of
        largest norm), then :math:`g_i \leftarrow g_i + c_i`.

        Richtarik, Sokolov, Fatkhullin, arXiv:2106.05203. The ids of the Top-K blocks depend on the data: they are sent.

        Parameters
        ----------
        data : stacked data
            The k hosted workers' data (``data.ids``, shape (k,): their indices i).
        state : Ef21WorkerState
            ``g``, shape (k, d): the estimates g_i.
        x : ndarray, shape (d,)
            The broadcast point x^t.
        t : int
            The round t (U_i^t is a function of (seed, i, t)).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference).

        Returns
        -------
        batch : Messages
            tau*m blocks per worker, with their block ids.
        state : Ef21WorkerState
            g_i moved by the decoded c_i (times 1/(1 + omega) for a lossy unbiased codec, :attr:`codec_scale`).
        """
        diff = data.grads(x) - state.g                                            # (k, d)
        b, m = self.blocks.size, self.blocks.m
        norms = np.pad(diff ** 2, ((0, 0), (0, m * b - diff.shape[1]))).reshape(data.k, m, b).sum(axis=2)
        U = np.sort(np.argsort(-norms, axis=1, kind="stable")[:, : self.tau_m], axis=1)   # Top-K blocks by norm
        s = self.sampled(data, t, U)
        g = state.g if donate else state.g.copy()
        batch = self.send(s, diff[s.pw, s.pc])
        g[s.pw, s.pc] += batch.values if self.codec_scale == 1.0 else self.codec_scale * batch.values
        return batch, Ef21WorkerState(g)

    def master_init(self, x0):
        """The master's average of the estimates at x^0: (1/n) sum_i g_i^0 = 0.

        Parameters
        ----------
        x0 : ndarray, shape (d,)
            x^0.

        Returns
        -------
        IsegaMasterState
            ``h_bar`` of shape (d,), zeros: here g_bar = (1/n) sum_i g_i.
        """
        return IsegaMasterState(h_bar=np.zeros_like(x0))   # h_bar = (1/n) sum_i g_i

    def master_step(self, state, x, batch, donate=False):
        r"""EF21, master side: a step along the average estimate.

        :math:`\bar g \leftarrow \bar g + \frac1n\sum_i c_i`, :math:`x^{t+1} = x^t - \gamma \bar g`.

        Parameters
        ----------
        state : IsegaMasterState
            ``h_bar``, shape (d,): g_bar = (1/n) sum_i g_i.
        x : ndarray, shape (d,)
            x^t.
        batch : Messages
            All n workers' messages of round t, ordered by worker (decoded values).
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray, shape (d,)
            x^{t+1}.
        state : IsegaMasterState
            The new g_bar.
        """
        g_bar = state.h_bar + (self.codec_scale / self.n) * self.aggregate(batch) if self.codec_scale != 1.0 \
            else state.h_bar + self.aggregate(batch) / self.n
        return x - self.gamma * g_bar, IsegaMasterState(h_bar=g_bar)
