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
import copy
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
        What its states hold, for the error when they do not fit in memory (``Method.state_bytes``).
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

    Every method's constructor takes these (a method adds its own keywords after them).

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
    """

    name: ClassVar[str] = ""
    options: ClassVar[type] = AlgorithmOptions
    traits: ClassVar[Traits] = Traits()

    def __init__(self, n: int, blocks: BlockPartition, tau_m: int, gamma: float, *, options=None, reg=None,
                 seed: int = 0, send_ids: bool = False, codec: Codec = FLOAT64):
        self.n, self.blocks, self.tau_m, self.gamma = int(n), blocks, int(tau_m), float(gamma)
        self.opts = options if options is not None else type(self).options(name=type(self).name or "isega")
        self.reg = reg if reg is not None else Zero()
        self.seed, self.send_ids, self.codec = int(seed), bool(send_ids), codec
        #: the uplink compressor C(v) = (1/tau) Q(v_U): independent tau*m-nice blocks, then the value codec
        self.uplink = chain(IndependentBlocks(self.tau_m, blocks.m, blocks.size), codec)
        self.sampler = Sampler(self.seed)
        #: the compressed downlink (EF21-P, ``isparse.compression.downlink.Downlink``; set by the run's setup from
        #: ``messages.downlink``): None, the dense x of every round
        self.downlink = None

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
        x : ndarray of shape (d,)
            x^t, the point the master sent.
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
        x : ndarray of shape (d,)
            x^t.
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
        U = self.sample(data.ids, t) if U is None else U
        pc, pw = self.coords_batch(U)
        return Sampled(data, int(t), U, pc, pw)

    def local_grads(self, data, x: np.ndarray, s: Sampled) -> np.ndarray:
        """(grad f_i(x))_{U_i} of every hosted worker, worker-major, shape (q,): only those coordinates, or gathered
        from whole local gradients (one sparse product) above an eighth of the coordinates (:meth:`dense_path`)."""
        if self.dense_path():
            return data.grads(x)[s.pw, s.pc]
        return data.grads_on_blocks(x, s.U, self.blocks, (s.pc, s.pw))

    def send(self, s: Sampled, values: np.ndarray) -> Messages:
        """The hosted workers' batch: ``values`` (shape (q,), worker-major, in block order) on their block sets
        ``s.U``, coded by the codec. Its ``values`` are the decoded ones (what the master sees, what a worker's memory
        moves by); block ids travel only when :attr:`sends_ids`."""
        counts = np.bincount(s.pw, minlength=s.data.k).astype(np.int32)
        blocks = s.U.astype(BLOCK_ID_DTYPE) if self.sends_ids else None
        return self.encode(s.data.ids, s.t, counts, values, blocks)

    def sample(self, ids, t: int) -> np.ndarray:
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

    def coords_batch(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``blocks.coords_batch(U)``: (pc, pw), worker-major. The last result is remembered (keyed by the array U
        itself), so a worker step, its gathered gradient and an in-process master's scatter-add compute the
        coordinates once per round."""
        memo = self.__dict__.get("_coords_memo")
        if memo is None or memo[0] is not U:
            memo = (U, self.blocks.coords_batch(U))
            self._coords_memo = memo
        return memo[1]

    def dense_path(self) -> bool:
        """Whether :meth:`local_grads` computes whole local gradients: above an eighth of the coordinates the sparse
        product is cheaper than gathering the sampled entries. A function of tau*m, b and d only, so every host takes
        the same path."""
        return 8 * self.tau_m * self.blocks.size > self.blocks.d

    def encode(self, ids, t: int, counts: np.ndarray, values: np.ndarray, blocks=None) -> Messages:
        """The batch of the workers ``ids``, coded by ``self.codec``, with the block ids ``blocks`` if given.

        A random codec draws one uniform per value from stream ``CODEC`` keyed by (seed, i, t),
        :attr:`values_per_message` per worker whatever it sends, so a worker's draws do not depend on its host.
        """
        values = np.ascontiguousarray(values, dtype=np.float64)
        ids = np.asarray(ids)
        u = self.codec.draw(self.sampler, ids, t, counts, self.values_per_message) if self.codec.random else None
        return Messages.encoded(ids.astype(np.int32), int(t), counts, values, blocks, codec=self.codec, uniforms=u)

    # -- the master's side ---------------------------------------------------------------------------------
    def coords_of(self, batch: Messages) -> np.ndarray:
        """Coordinates of every value of ``batch``, in order: from the sent ids, or recomputed from (seed, i, t)."""
        U = batch.blocks if batch.blocks is not None else self.sample(batch.workers, batch.t)
        return self.coords_batch(U)[0]

    def aggregate(self, batch: Messages) -> np.ndarray:
        """sum_i of the messages scattered into R^d (one vectorized scatter-add, in worker order)."""
        if isinstance(batch, HostSums):   # each host's sum on the union of its workers' coordinates, host by host
            coords = [self.union_of(g, batch.t) for g in batch.groups]
            return np.bincount(np.concatenate(coords), weights=np.concatenate(batch.sums), minlength=self.blocks.d)
        return np.bincount(self.coords_of(batch), weights=batch.values, minlength=self.blocks.d)

    # -- host aggregation (messages.aggregate=host) ----------------------------------------------------------
    def sums_on_host(self, batch) -> bool:
        """Whether a host may send one sum for its ``batch``: the master needs only the sum (``traits.master_sums``),
        the run is synchronous, no block ids travel and the values are float64 (a sum of coded values is not a coded
        value: a host with a lossy codec sends its workers' coded messages)."""
        return (self.traits.master_sums and not self.traits.asynchronous and isinstance(batch, Messages)
                and batch.blocks is None and batch.codec.exact)

    def union_of(self, workers: np.ndarray, t: int) -> np.ndarray:
        """The union of the ``workers``' coordinates in round t, ascending, recomputed from (seed, i, t) (all d when a
        worker sends every block)."""
        return self._union(self.coords_batch(self.sample(np.asarray(workers), int(t)))[0])

    def _union(self, coords: np.ndarray) -> np.ndarray:
        if coords.size >= self.blocks.d:
            mark = np.zeros(self.blocks.d, dtype=bool)
            mark[coords] = True
            return np.flatnonzero(mark)
        return np.unique(coords)

    def host_sums(self, batch: Messages, groups: list) -> HostSums:
        """The sums the hosts send for their workers' messages of one round (``messages.aggregate=host``): each on
        the union of its workers' coordinates, ascending.

        ``groups`` are consecutive runs of ``batch.workers``, one per host. Each sum adds the workers' values
        coordinate by coordinate in worker order (the order of :meth:`aggregate`'s scatter-add), so a host of one
        worker sends its message's values unchanged.
        """
        c = self.coords_of(batch)
        ends = np.cumsum(batch.counts.astype(np.int64))
        sums, start, w = [], 0, 0
        for g in groups:
            w += len(g)
            stop = int(ends[w - 1]) if w else 0
            cg, vg = c[start:stop], batch.values[start:stop]
            union = self._union(cg)
            full = np.bincount(cg, weights=vg, minlength=self.blocks.d)
            sums.append(full[union])
            start = stop
        return HostSums(list(groups), sums, batch.t)

    def averaged_step(self, x, batch, gamma=None):
        """x^{t+1} = x - (gamma/n) sum_i (message_i scattered into R^d): the master step of Algorithms 1, 3, 5 and 6
        (ISGD passes its gamma_t)."""
        return x - ((self.gamma if gamma is None else gamma) / self.n) * self.aggregate(batch)

    # -- derived quantities --------------------------------------------------------------------------------
    @property
    def tau(self) -> float:
        """tau = tau_m / m."""
        return self.tau_m / self.blocks.m

    @property
    def values_per_message(self) -> int:
        """The most values one worker sends in a round: tau*m blocks (at most d coordinates)."""
        return values_in_blocks(self.blocks.d, self.tau_m, self.blocks.size)

    @property
    def sends_ids(self) -> bool:
        """Block ids travel with the values (and count 4 B each)."""
        return (self.send_ids or not self.traits.derivable_ids) and self.tau_m < self.blocks.m

    @property
    def asynchronous(self) -> bool:
        """``traits.asynchronous``: the engines run it on their asynchronous view."""
        return self.traits.asynchronous

    @property
    def omega(self) -> float:
        """The value codec's omega for this method's messages (the uplink chain's last piece, at the q values it is
        handed); 0 for float64 and for a biased codec (which has none). The theorems take it beside tau."""
        w = self.uplink.codec.omega(self.values_per_message)
        return 0.0 if w is None else w

    @property
    def uplink_omega(self) -> float | None:
        """omega of the whole uplink C(v) = (1/tau) Q(v_U) of a d-vector, by the chain's composition rule:
        (1 + omega_Q)/tau - 1 for an unbiased codec; None for a biased one."""
        return self.uplink.omega(self.blocks.d)

    @property
    def memory_rate(self) -> float:
        """The share of a decoded value a memory moves by (the codec's ``memory_rate``): 1/(1 + omega) for a lossy
        unbiased codec (natural, dither), 1 for an exact or biased one."""
        return self.uplink.codec.memory_rate(self.values_per_message)

    def with_seed(self, seed: int) -> "Box":
        """A shallow copy with another seed and its own sampler (a new set of random draws)."""
        other = copy.copy(self)
        other.seed, other.sampler, other._memo = int(seed), Sampler(int(seed)), None
        return other

    # -- data on a host ------------------------------------------------------------------------------------
    def host_shards(self, shards: list, ids) -> list:
        """What a host of the logical workers ``ids`` is sent: their shards."""
        return [shards[int(i)] for i in ids]

    def host_data(self, shards: list, ids):
        """The stacked shards of the hosted workers ``ids`` (``type(shard).stack``)."""
        return type(shards[0]).stack(shards, ids)

    # -- what is measured and logged -----------------------------------------------------------------------
    def iterate(self, state, x):
        """The measured point, from the master's state: x^t (IASGD measures its own output sequence w_k)."""
        return x

    def extra_iterates(self, state) -> dict:
        """Points beside x^t, from the master's state, whose suboptimality is logged as ``subopt_<key>``: none by
        default (ISGD: ``avg``, the x_hat^t of Theorem 6)."""
        return {}

    def derived_params(self) -> dict:
        """Method-specific derived parameters to log (ISGD's batch_effective, IASGD's rho)."""
        return {}

    # monitors of the Lyapunov function's memory part (None: the method keeps no memory)
    worker_targets = None     # (data, x_star) -> targets for the hosted workers
    worker_memory = None      # (data, state, targets) -> float, sum over hosted workers
    master_memory = None      # (state) -> float


__all__ = ["Box", "Sampled", "Traits", "values_in_blocks"]
