"""The box every method fills: four steps on typed states, as arXiv:1901.09437 writes each algorithm.

Per round t (section 2, the common template), an engine runs::

    states_p, batch = worker_step(data, states_p, x, t)     # on each host p, for the k logical workers it holds
    x, master = master_step(master, x, batch)              # on the master, with all n workers' messages

after ``worker_init(data, x0)`` on each host and ``master_init(x0)`` on the master. ``data`` is the hosted workers'
part of the problem, stacked (``StackedGLM``: one CSR matrix and a row-to-worker map; ``StackedQuadratic``); a
worker state is a NamedTuple of arrays with a leading axis of the k hosted workers (or of their examples); the
master state a NamedTuple of arrays. The in-process engine passes all n workers as one host, a Dask host its own
k; because every random draw is a function of (seed, i, t) (``isparse.compression.sampling``) and every sum over a
worker's rows runs in the same order, one seed gives the same iterates on both.

States are values: a step returns a new state; it may write into the arrays of the state it was given only when
the caller passes ``donate=True`` (the caller keeps no reference, as JAX's buffer donation), so a checkpoint or
snapshot is the state object itself, never a deep copy.

The worker's side of every sparsified method starts the same way, written once here: draw U_i^t (tau*m blocks,
:meth:`Box.sampled`), evaluate what it sends on those coordinates (:meth:`Box.local_grads` for grad f_i), and send the
values (:meth:`Box.send`: coded by ``messages.codec``); the master scatters the batch into R^d
(:meth:`Box.aggregate`). A worker step is then only its own math, e.g. Algorithm 1 (IBCD)::

    s = self.sampled(data, t)                          # U_i^t of every hosted worker i
    return self.send(s, self.local_grads(data, x, s)), state  # send (grad f_i(x^t))_{U_i^t}
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from ..compression.blocks import BlockPartition
from ..compression.codecs import FLOAT64, Codec
from ..compression.compressors import IndependentBlocks, chain
from ..compression.messages import BLOCK_ID_DTYPE, HostSums, Messages
from ..compression.sampling import Sampler
from ..regularizers import Zero
from .options import AlgorithmOptions


@dataclass(frozen=True)
class Traits:
    """What a method is, beside its steps (declared once per class: ``traits = Traits(prox=True, ...)``).

    Attributes
    ----------
    needs : tuple of str
        Capabilities of the stacked shards its worker step uses (``Problem.capabilities``, checked before any work).
    full : bool
        A full-communication baseline: tau = 1 is forced.
    prox : bool
        Takes a proximal step for R (``problem.reg``); the others refuse one.
    asynchronous : bool
        Messages are applied one at a time, on arrival (Algorithm 8).
    derivable_ids : bool
        The master can recompute the block ids from (seed, i, t) (False for Top-K): then only values are sent.
    master_sums : bool
        The master step uses a batch only through its sum (:meth:`Box.aggregate`), so a host may send one sum
        (``messages.aggregate=host``; False for shared-data ISAGA, whose master keeps per-worker values).
    state_text : str
        What its states hold, for the error when they do not fit in memory (``Method._state_bytes``).
    """

    needs: tuple = ("grads_at",)
    full: bool = False
    prox: bool = False
    asynchronous: bool = False
    derivable_ids: bool = True
    master_sums: bool = True
    state_text: str = "no state"


class Sampled(NamedTuple):
    """The hosted workers' draw of round t (what :meth:`Box.sampled` returns): the stacked shards ``data``, ``t``,
    ``U`` and its (``pc``, ``pw``) pairs, worker-major, the order of the values sent (the glossary's names)."""

    data: object
    t: int
    U: np.ndarray
    pc: np.ndarray
    pw: np.ndarray


def values_in_blocks(d: int, tau_m: int, b: int) -> int:
    """The most coordinates tau*m blocks of size b hold: min(d, tau*m x b) (the last block may be shorter)."""
    return min(d, tau_m * b)


class Box(abc.ABC):
    """A method that sends tau*m blocks of a d-vector per worker and round: its four steps and what they share.

    What a method author writes and calls is public (fourteen names with the declaration ``name``, ``options``,
    ``traits`` and ``theory``); the rest is the template's own machinery, which a method overrides only where it
    departs from the template (the hooks listed under Notes).

    Parameters
    ----------
    n, blocks, tau_m, gamma : int, BlockPartition, int, float
        The logical workers, the m blocks, tau*m (1 <= tau_m <= m) and the stepsize gamma > 0.
    options : AlgorithmOptions, optional
        The method's checked ``algorithm.*`` options, read as ``self.opts`` (default: the declared defaults).
    reg : regularizer, optional
        R with ``prox(v, step)``, read as ``self.reg`` (default R = 0), for a method with ``traits.prox``.
    seed : int
        Seed of every random draw (``isparse.compression.sampling.Sampler``).
    send_ids : bool
        Send the block ids with the values (the old convention); default False: values only.
    codec : Codec
        How each value is coded on the wire (``isparse.compression.codecs``; default float64, exact).
    downlink : Downlink, optional
        The compressed master-to-worker link (EF21-P, ``isparse.compression.downlink``; ``messages.downlink``);
        None: the dense x of every round.

    Attributes
    ----------
    tau : float
        tau_m / m.
    uplink : Compressor
        C(v) = (1/tau) Q(v_U): independent tau*m-nice blocks, then the value codec (``isparse.compression``).
    sampler : Sampler
        The draws, each a function of (seed, i, t).
    values_per_message : int
        The most values one worker sends in a round: min(d, tau*m x b) (IBGD: d).
    sends_ids : bool
        Block ids travel with the values (and count 4 B each): ``send_ids`` or ids the master cannot recompute
        (``traits.derivable_ids``), below tau = 1.

    Notes
    -----
    Hooks a method overrides where it departs from the template (the defaults fit every method of the paper but
    the ones named):

    - ``_sample(ids, t)``: U_i^t, the tau*m-nice sampling of (seed, i, t) (shared_bcd: one U^t for all);
    - ``_coords_of(batch)``: the coordinates of every value of a batch, in order (ibgd: whole gradients);
    - ``_iterate(state, x)``: the measured point, x^t (iasgd: its output sequence w_k);
    - ``_extra_iterates(state)``: points whose suboptimality is logged as ``subopt_<key>``, none (isgd: ``avg``,
      the x_hat^t of Theorem 6);
    - ``_derived_params()``: derived parameters to log, none (isgd's batch_effective, iasgd's rho);
    - ``_worker_targets(data, x_star)``, ``_worker_memory(data, state, targets)``, ``_master_memory(state)``: the
      memory part of the Lyapunov function, summed over the hosted workers or kept on the master (None: no memory;
      isega, isaga, isaga_shared);
    - ``_host_shards(shards, ids)``, ``_host_data(shards, ids)``: what a host of the workers ``ids`` is sent and
      its stacked data, ``type(shard).stack`` (isaga_shared: the whole data set, once);

    and, before the method is built (:class:`~isparse.methods.base.Method`'s class methods taking the run's
    :class:`~isparse.methods.context.Context`): ``_check``, ``_state_bytes``, ``_message_values``, ``_run_inputs``
    and ``_shards``. What the engines do with a method beyond its steps (a host's sum of its workers' messages, a
    copy with another seed) is in :mod:`isparse.engines.hooks`.
    """

    name: ClassVar[str] = ""
    options: ClassVar[type] = AlgorithmOptions
    traits: ClassVar[Traits] = Traits()

    def __init__(self, n: int, blocks: BlockPartition, tau_m: int, gamma: float, *, options=None, reg=None,
                 seed: int = 0, send_ids: bool = False, codec: Codec = FLOAT64, downlink=None):
        self.n, self.blocks, self.tau_m, self.gamma = int(n), blocks, int(tau_m), float(gamma)
        self.tau = self.tau_m / blocks.m
        self.opts = options if options is not None else type(self).options(name=type(self).name or "isega")
        self.reg = reg if reg is not None else Zero()
        self.seed, self.send_ids, self.codec, self.downlink = int(seed), bool(send_ids), codec, downlink
        self.uplink = chain(IndependentBlocks(self.tau_m, blocks.m, blocks.size), codec)
        self.sampler = Sampler(self.seed)
        self.values_per_message = values_in_blocks(blocks.d, self.tau_m, blocks.size)
        self.sends_ids = (self.send_ids or not self.traits.derivable_ids) and self.tau_m < blocks.m

    # -- the four steps ------------------------------------------------------------------------------------
    def worker_init(self, data, x0: np.ndarray):
        """The hosted workers' state at x^0 (section 2: the memories start at 0, e.g. h_i^0 = 0); None (the
        default): no worker state."""
        return None

    @abc.abstractmethod
    def worker_step(self, data, state, x: np.ndarray, t: int, donate: bool = False) -> tuple[Messages, object]:
        """One round of the hosted workers at x^t: their proposals' blocks (section 2, the common template).

        Parameters
        ----------
        data : stacked shards
            The hosted workers' (``data.ids``, ``data.k``, and the capabilities ``traits.needs`` names).
        state : NamedTuple or None
            Their state (:meth:`worker_init`, then each step's).
        t : int
            The round (an asynchronous worker's own step count); every draw is a function of (seed, i, t).
        donate : bool
            The step may write into ``state``'s arrays (the caller keeps no reference to them).

        Returns
        -------
        batch : Messages
            The k workers' messages, worker-major (tau*m blocks each for a sparsified method), coded by ``codec``.
        state : NamedTuple or None
            Their new state.
        """

    def master_init(self, x0: np.ndarray):
        """The master's state at x^0 (e.g. ISEGA's h_bar); None (the default): no master state."""
        return None

    @abc.abstractmethod
    def master_step(self, state, x: np.ndarray, batch: Messages, donate: bool = False) -> tuple[np.ndarray, object]:
        """The master's update from all n workers' messages of round t (section 2: it averages the proposals).

        Parameters
        ----------
        state : NamedTuple or None
            The master's state (:meth:`master_init`, then each step's).
        batch : Messages
            Every worker's message of round t, ordered by worker (one message, on arrival, for an asynchronous
            method); ``batch.values`` are the decoded values.
        donate : bool
            The step may write into ``state``'s arrays.

        Returns
        -------
        x : ndarray of shape (d,)
            x^{t+1}.
        state : NamedTuple or None
            The master's new state.
        """

    # -- the worker's preamble, written once ---------------------------------------------------------------
    def sampled(self, data, t: int, U: np.ndarray | None = None) -> Sampled:
        """U_i^t of the hosted workers (the tau*m-nice sampling of section 1, from (seed, i, t)) and its coordinates;
        a given ``U`` is used instead of the draw (EF21's Top-K)."""
        U = self._sample(data.ids, t) if U is None else U
        pc, pw = self._coords(U)
        return Sampled(data, int(t), U, pc, pw)

    def local_grads(self, data, x: np.ndarray, s: Sampled) -> np.ndarray:
        """(grad f_i(x))_{U_i} of every hosted worker, worker-major, shape (q,): only those coordinates, or gathered
        from whole local gradients (one sparse product) above an eighth of the coordinates, where that is cheaper
        (a function of tau*m, b and d only, so every host takes the same path)."""
        if 8 * self.tau_m * self.blocks.size > self.blocks.d:
            return data.grads(x)[s.pw, s.pc]
        return data.grads_on_blocks(x, s.U, self.blocks, (s.pc, s.pw))

    def send(self, s: Sampled, values: np.ndarray) -> Messages:
        """The hosted workers' batch: ``values`` (shape (q,), worker-major, in block order) on their block sets
        ``s.U``, coded by the codec. Its ``values`` are the decoded ones (what the master sees, what a worker's memory
        moves by); block ids travel only when ``sends_ids``."""
        counts = np.bincount(s.pw, minlength=s.data.k).astype(np.int32)
        blocks = s.U.astype(BLOCK_ID_DTYPE) if self.sends_ids else None
        return self._encode(s.data.ids, s.t, counts, values, blocks)

    # -- the master's side ---------------------------------------------------------------------------------
    def aggregate(self, batch: Messages) -> np.ndarray:
        """sum_i of the messages scattered into R^d (one vectorized scatter-add, in worker order)."""
        if isinstance(batch, HostSums):   # each host's sum on the union of its workers' coordinates, host by host
            coords = [self._union_of(g, batch.t) for g in batch.groups]
            return np.bincount(np.concatenate(coords), weights=np.concatenate(batch.sums), minlength=self.blocks.d)
        return np.bincount(self._coords_of(batch), weights=batch.values, minlength=self.blocks.d)

    def averaged_step(self, x, batch, gamma=None):
        """x^{t+1} = x - (gamma/n) sum_i (message_i scattered into R^d): the master step of Algorithms 1, 3, 5 and 6
        (ISGD passes its gamma_t)."""
        return x - ((self.gamma if gamma is None else gamma) / self.n) * self.aggregate(batch)

    @property
    def memory_rate(self) -> float:
        """The share of a decoded value a memory moves by (the codec's ``memory_rate``): 1/(1 + omega) for a lossy
        unbiased codec (natural, dither), 1 for an exact or biased one."""
        return self.uplink.codec.memory_rate(self.values_per_message)

    # -- the template's machinery (the hooks of the class docstring) -------------------------------------------
    def _sample(self, ids, t: int) -> np.ndarray:
        """U_i^t of the workers ``ids``, shape (k, tau*m): the tau*m-nice sampling, a function of (seed, i, t)
        (docs/algorithms.md §1). The last call is remembered, so an in-process master does not redraw what its host
        drew."""
        ids = np.asarray(ids, dtype=np.int64)
        key = (int(t), ids.tobytes())
        memo = self.__dict__.get("_memo")
        if memo is None or memo[0] != key:
            memo = (key, self.uplink.pieces[0].draw(self.sampler, ids, t, None, None))   # IndependentBlocks' U
            self._memo = memo
        return memo[1]

    def _coords(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``blocks.coords_batch(U)``: (pc, pw), worker-major. The last result is remembered (keyed by the array U
        itself), so a worker step, its gathered gradient and an in-process master's scatter-add compute the
        coordinates once per round."""
        memo = self.__dict__.get("_coords_memo")
        if memo is None or memo[0] is not U:
            memo = (U, self.blocks.coords_batch(U))
            self._coords_memo = memo
        return memo[1]

    def _encode(self, ids, t: int, counts: np.ndarray, values: np.ndarray, blocks=None) -> Messages:
        """The batch of the workers ``ids``, coded by ``self.codec``, with the block ids ``blocks`` if given.

        A random codec draws one uniform per value from stream ``CODEC`` keyed by (seed, i, t),
        ``values_per_message`` per worker whatever it sends, so a worker's draws do not depend on its host.
        """
        values = np.ascontiguousarray(values, dtype=np.float64)
        ids = np.asarray(ids)
        u = self.codec.draw(self.sampler, ids, t, counts, self.values_per_message) if self.codec.random else None
        return Messages.encoded(ids.astype(np.int32), int(t), counts, values, blocks, codec=self.codec, uniforms=u)

    def _coords_of(self, batch: Messages) -> np.ndarray:
        U = batch.blocks if batch.blocks is not None else self._sample(batch.workers, batch.t)
        return self._coords(U)[0]

    def _union_of(self, workers: np.ndarray, t: int) -> np.ndarray:
        """The union of the ``workers``' coordinates in round t, ascending, recomputed from (seed, i, t)."""
        return union(self._coords(self._sample(np.asarray(workers), int(t)))[0], self.blocks.d)

    def _iterate(self, state, x):
        return x

    def _extra_iterates(self, state) -> dict:
        return {}

    def _derived_params(self) -> dict:
        return {}

    _worker_targets = None     # (data, x_star) -> targets for the hosted workers
    _worker_memory = None      # (data, state, targets) -> float, sum over hosted workers
    _master_memory = None      # (state) -> float

    def _host_shards(self, shards: list, ids) -> list:
        return [shards[int(i)] for i in ids]

    def _host_data(self, shards: list, ids):
        return type(shards[0]).stack(shards, ids)


def union(coords: np.ndarray, d: int) -> np.ndarray:
    """The distinct entries of ``coords`` (coordinates in 0..d-1), ascending (all d when ``coords`` covers them)."""
    if coords.size >= d:
        mark = np.zeros(d, dtype=bool)
        mark[coords] = True
        return np.flatnonzero(mark)
    return np.unique(coords)


__all__ = ["Box", "Sampled", "Traits", "union", "values_in_blocks"]
