"""The contract every method follows: batched worker and master steps, and how a method is built.

An engine runs, per round (arXiv:1901.09437, section 2, the common template)::

    batch, states = method.worker_step(data, states, x, t)    # on each host, for its k logical workers
    x, master = method.master_step(master, x, batch)           # on the master, all n workers' batch

``data`` is the hosted workers' part of the problem, stacked (``StackedGLM``: one CSR matrix and a
row-to-worker map; ``StackedQuadratic``), ``states`` the method's worker state with a leading axis k.
The in-process engine passes all n workers as one host, a Dask host its own k; because every
random draw is a function of (seed, i, t) (``isparse.compression.sampling``) and every sum over a worker's
rows runs in the same order, one seed gives the same iterates on both.

States are NamedTuples of arrays: values. A step returns a new state; it may write into the arrays
of the state it was given only when the caller passes ``donate=True`` (the caller keeps no
reference, as JAX's buffer donation), so a checkpoint or snapshot is the state object itself,
never a deep copy.

Building: each method class owns its whole box. ``name`` is its ``algorithm=<id>``; ``options`` the
dataclass of its own config keys (``algorithm.<key>``: :class:`AlgorithmOptions` and its subclasses, each key
with its constraint, checked by ``isparse.params``); ``needs`` the capabilities it reads from the problem
(``isparse.problems.base.Problem.capabilities``, checked before any work); :meth:`Method.check_spec` its rules
on the rest of the run (no data needed); :meth:`Method.configure` computes its stepsize and bound (from
``isparse.theory``) from a :class:`Context`. The registry (``isparse.methods.METHODS``) collects every subclass
that sets a ``name``: adding a method is one module (here, or anywhere importable, named by
``algorithm.module``) and, for the command line, one ``conf/algorithm/<id>.yaml`` if it lives outside
``isparse.methods``.
"""

from __future__ import annotations

import copy
from typing import ClassVar

import numpy as np

from ..compression.blocks import BlockPartition
from ..errors import ConfigError
from ..compression.messages import BLOCK_ID_DTYPE, Messages
from ..compression.codecs import FLOAT64, Codec
from ..compression.sampling import BLOCKS, CODEC, Sampler
from ..theory import NoBound
from .context import AlgorithmOptions, Context   # noqa: F401  (re-exported: a method module imports them from here)


def values_in_blocks(d: int, tau_m: int, b: int) -> int:
    """The most coordinates tau*m blocks of size b hold: min(d, tau*m x b) (the last block may be shorter)."""
    return min(d, tau_m * b)


class Method:
    """Base of the methods that send tau*m blocks of a d-vector per worker and round.

    Parameters
    ----------
    n : int
        Number of logical workers.
    blocks : BlockPartition
        The m blocks.
    tau_m : int
        Blocks per worker per round, 1 <= tau_m <= m.
    gamma : float
        Stepsize gamma > 0.
    seed : int
        Seed of every random draw (``isparse.compression.sampling.Sampler``).
    send_ids : bool
        Send the block ids with the values (the old convention); default False: values only.
    codec : Codec
        How each value is coded on the wire (``isparse.compression.codecs``; default float64, exact).

    Class attributes (the algorithm box)
    ------------------------------------
    name : str
        ``algorithm=<name>``.
    needs : tuple of str
        Capabilities of the stacked data the worker step uses.
    full : bool
        A full-communication baseline (tau = 1 forced).
    prox : bool
        Takes a proximal step for a regularizer R.
    asynchronous : bool
        Messages are applied one at a time, on arrival (Algorithm 8).
    derivable_ids : bool
        The master can recompute the block ids (False for Top-K).
    """

    name: str = ""
    #: the dataclass of this method's config keys (``algorithm.<key>``); a subclass adds its own
    options: ClassVar[type] = AlgorithmOptions
    needs: tuple = ("grads_at",)
    full = False
    prox = False
    asynchronous = False
    derivable_ids = True
    smoothness = "L"        # which constant of the problem is "L" in the stepsize: L (of f_i) or L_example (of f_ij)
    step_L_choice = True    # step.L=f is allowed (the stepsize takes L through smooth(); not IASGD's rho)
    #: the stepsize rule and the bound take the codec's omega (derived in ``isparse.theory``); otherwise a lossy
    #: codec leaves the run without a bound (``isparse.runsetup.build`` says so in its NoBound)
    codec_theory = False
    #: why a lossy codec leaves the method without a bound (said in its NoBound) when ``codec_theory`` is False
    codec_why = ""

    def __init__(self, n: int, blocks: BlockPartition, tau_m: int, gamma: float, *, seed: int = 0,
                 send_ids: bool = False, codec: Codec = FLOAT64):
        self.n, self.blocks, self.tau_m, self.gamma = int(n), blocks, int(tau_m), float(gamma)
        self.seed, self.send_ids, self.codec = int(seed), bool(send_ids), codec
        self.sampler = Sampler(self.seed)

    @property
    def values_per_message(self) -> int:
        """The most values one worker sends in a round: tau*m blocks (at most d coordinates)."""
        return values_in_blocks(self.blocks.d, self.tau_m, self.blocks.size)

    @classmethod
    def message_values(cls, ctx) -> int:
        """:attr:`values_per_message` of the run ``ctx`` (what the codec's omega is computed for), before the method
        is built."""
        return values_in_blocks(ctx.problem.d, ctx.tau_m, ctx.blocks.size)

    @property
    def omega(self) -> float:
        """The codec's omega for this method's messages; 0 for float64 and for a biased codec (which has none)."""
        w = self.codec.omega(self.values_per_message)
        return 0.0 if w is None else w

    @property
    def lossy_unbiased(self) -> bool:
        """The codec is random and unbiased (natural, dither): a memory moves by 1/(1 + omega) of a decoded value."""
        return self.codec.unbiased and not self.codec.exact

    @property
    def tau(self) -> float:
        """tau = tau_m / m."""
        return self.tau_m / self.blocks.m

    @property
    def sends_ids(self) -> bool:
        """Block ids travel with the values (and count 4 B each)."""
        return (self.send_ids or not self.derivable_ids) and self.tau_m < self.blocks.m

    def with_seed(self, seed: int) -> "Method":
        """The same method with another seed (a new set of random draws)."""
        other = copy.copy(self)
        other.seed, other.sampler, other._memo = int(seed), Sampler(int(seed)), None
        return other

    # -- data on a host ------------------------------------------------------------------------
    def host_shards(self, shards: list, ids) -> list:
        """What a host of the logical workers ``ids`` is sent: their shards."""
        return [shards[int(i)] for i in ids]

    def host_data(self, shards: list, ids):
        """The stacked data of the hosted workers (``type(shard).stack``)."""
        return type(shards[0]).stack(shards, ids)

    # -- sampling and messages -----------------------------------------------------------------
    def sample(self, ids, t: int) -> np.ndarray:
        """U_i^t of the workers ``ids``: sorted block ids, shape (k, tau*m) (a function of (seed, i, t); the last
        call is remembered, so an in-process master does not redraw what its host drew)."""
        ids = np.asarray(ids, dtype=np.int64)
        key = (int(t), ids.tobytes())
        memo = self.__dict__.get("_memo")
        if memo is None or memo[0] != key:
            memo = (key, self.sampler.subsets(BLOCKS, ids, t, self.blocks.m, self.tau_m))
            self._memo = memo
        return memo[1]

    def coords_batch(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``blocks.coords_batch(U)``; the last result is remembered (keyed by the array U itself), so a worker step,
        its gathered gradient and an in-process master's scatter-add compute the coordinates once per iteration."""
        memo = self.__dict__.get("_coords_memo")
        if memo is None or memo[0] is not U:
            memo = (U, self.blocks.coords_batch(U))
            self._coords_memo = memo
        return memo[1]

    def dense_path(self) -> bool:
        """Whether the worker step computes whole local gradients (one sparse product over all hosted entries)
        rather than only the sampled coordinates: above an eighth of the coordinates the product is cheaper than
        gathering the sampled entries. A function of tau*m, b and d only, so every host takes the same path."""
        return 8 * self.tau_m * self.blocks.size > self.blocks.d

    def local_grads_at(self, data, x, U, pw, pc) -> np.ndarray:
        """grad f_p(x) on each hosted worker's blocks U (pairs (pw, pc) = ``blocks.coords_batch(U)``): only those
        coordinates, or gathered from whole gradients."""
        if self.dense_path():
            return data.grads(x)[pw, pc]
        return data.grads_on_blocks(x, U, self.blocks, (pc, pw))

    def messages(self, data, t: int, U: np.ndarray, owner: np.ndarray, values: np.ndarray) -> Messages:
        """The batch of the hosted workers: ``values`` (worker-major, block order) on their block sets U."""
        counts = np.bincount(owner, minlength=data.k).astype(np.int32)
        blocks = U.astype(BLOCK_ID_DTYPE) if self.sends_ids else None
        return self.encode(data.ids, t, counts, values, blocks)

    def encode(self, ids, t: int, counts: np.ndarray, values: np.ndarray, blocks=None) -> Messages:
        """The batch of the workers ``ids``, coded by ``self.codec``; a random codec draws one uniform per value from
        stream ``CODEC`` keyed by (seed, i, t), :attr:`values_per_message` per worker whatever it sends, so a worker's
        draws do not depend on its host. The result's ``values`` are the decoded ones (what the master sees, what a
        worker's memory must move by)."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        ids = np.asarray(ids)
        u = None
        if self.codec.random:
            q = self.values_per_message
            u = self.sampler.uniforms(CODEC, ids, t, q)[np.arange(q) < counts[:, None]]
        return Messages.encoded(ids.astype(np.int32), int(t), counts, values, blocks, codec=self.codec, uniforms=u)

    def coords_of(self, batch: Messages) -> np.ndarray:
        """Coordinates of every value of ``batch``, in order: from the sent ids, or recomputed from (seed, i, t)."""
        U = batch.blocks if batch.blocks is not None else self.sample(batch.workers, batch.t)
        return self.coords_batch(U)[0]

    def aggregate(self, batch: Messages) -> np.ndarray:
        """sum_i of the messages scattered into R^d (one vectorized scatter-add, in worker order); shape (d,)."""
        return np.bincount(self.coords_of(batch), weights=batch.values, minlength=self.blocks.d)

    # -- defaults for methods without state ---------------------------------------------------
    def worker_init(self, data, x0):
        return None

    def master_init(self, x0):
        return None

    def averaged_step(self, x, batch, gamma=None):
        """x - (gamma/n) sum_i (message_i scattered into R^d): the master step of Algorithms 1, 3, 5, 6."""
        return x - ((self.gamma if gamma is None else gamma) / self.n) * self.aggregate(batch)

    def derived_params(self) -> dict:
        """Method-specific derived parameters to log (IASGD's rho)."""
        return {}

    def iterate(self, state, x):
        """The measured point: x^t (IASGD measures its own output sequence)."""
        return x

    def extra_iterates(self, state) -> dict:
        """Points beside x^t whose suboptimality is logged (``subopt_<key>``)."""
        return {}

    # monitors of the Lyapunov function's memory part (None: the method keeps no memory)
    worker_targets = None     # (data, x_star) -> targets for the hosted workers
    worker_memory = None      # (data, state, targets) -> float, sum over hosted workers
    master_memory = None      # (state) -> float

    # -- building ---------------------------------------------------------------------------
    @staticmethod
    def stepsize(L, mu, n, tau):
        """The theorem's stepsize rule (L, mu, n, tau) -> gamma."""
        raise NotImplementedError

    paper_stepsize = None     # (L, mu, n, tau) -> gamma of the paper's plots (``step.rule=paper``), or None
    #: the caption's gamma read literally (``step.rule=paper_literal``), where it differs from ``paper_stepsize``
    paper_literal_stepsize = None

    @classmethod
    def check_spec(cls, spec) -> None:
        """The method's rules on the rest of the run (``spec``, a :class:`~isparse.spec.RunSpec`), before any data is
        read: a full-communication baseline takes tau = 1 (auto or 1), only a proximal method takes a regularizer.

        Raises
        ------
        ConfigError
            Naming the key that does not fit (``tau``, ``problem.reg``).
        """
        if cls.full and spec.tau not in ("auto", 1, 1.0):
            raise ConfigError("tau", f"The 'tau' parameter must be auto or 1 for algorithm={cls.name} "
                                     f"(a full-communication baseline); got {spec.tau!r}.")
        if spec.step.L == "f" and not (cls.step_L_choice and cls.smoothness == "L"):
            raise ConfigError("step.L", f"The 'step.L' parameter must be shards for algorithm={cls.name} (its "
                                        f"stepsize takes {'L_example' if cls.smoothness != 'L' else 'rho'}, not L); "
                                        f"got 'f'.")
        if spec.problem.reg != "none" and not cls.prox:
            from . import METHODS

            allowed = ", ".join(k for k, c in METHODS.items() if c.prox)
            raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for algorithm={cls.name} "
                                             f"(only {allowed} take a proximal step); got {spec.problem.reg!r}.")

    @classmethod
    def check(cls, ctx: Context) -> None:
        """Checks of the method against the problem before any work: what it needs from the problem (a ConfigError
        naming what is missing), and that its states fit in memory (a ConfigError naming GiB)."""
        check_needs(cls, ctx.problem)
        need = cls.state_bytes(ctx)
        if need:
            from ..problems.reference import available_memory_bytes

            avail = available_memory_bytes()
            if need > avail:
                raise ConfigError("algorithm", f"algorithm={cls.name} needs about {need / 2**30:.3g} GiB for its "
                                               f"state ({cls.state_text}, d = {ctx.problem.d}); only "
                                               f"{avail / 2**30:.3g} GiB are available.")

    #: what :meth:`state_bytes` counts, for the error message
    state_text = "no state"

    @classmethod
    def state_bytes(cls, ctx: Context) -> int:
        """Bytes of the method's worker and master states (float64), for the memory check before any work."""
        return 0

    @classmethod
    def smooth(cls, ctx: Context) -> float:
        """The smoothness constant the stepsize uses: L = max_i L_i, L_f of f itself (``step.L=f``) or L_example."""
        if cls.smoothness != "L":
            return ctx.problem.L_example
        return ctx.problem.L_f if ctx.step_L == "f" else ctx.problem.L

    @classmethod
    def configure(cls, ctx: Context):
        """(method, bound) for the run described by ``ctx``: gamma = multiplier x the rule's gamma."""
        rule = cls.stepsize_rule(ctx.step_rule)
        gamma = ctx.step_multiplier * rule(cls.smooth(ctx), ctx.problem.mu, ctx.n, ctx.tau, **cls.omega_kw(ctx))
        method = cls(ctx.n, ctx.blocks, ctx.tau_m, gamma, **ctx.common(), **cls.options_of(ctx))
        return method, cls.bound(ctx, method)

    @classmethod
    def omega_kw(cls, ctx: Context) -> dict:
        """``{"omega": omega}`` for a method whose rules take the codec's omega and a codec that has one (unbiased);
        else nothing (today's rules)."""
        return {"omega": ctx.omega} if cls.codec_theory and ctx.omega else {}

    @classmethod
    def stepsize_rule(cls, rule: str):
        """The stepsize function of ``step.rule``: the theorem's (``theory``, and for a method without a paper
        stepsize), the paper's plots' (``paper``) or the caption read literally (``paper_literal``; the same as
        ``paper`` unless the method says otherwise)."""
        if rule == "paper_literal" and cls.paper_literal_stepsize is not None:
            return cls.paper_literal_stepsize
        if rule in ("paper", "paper_literal") and cls.paper_stepsize is not None:
            return cls.paper_stepsize
        return cls.stepsize

    @classmethod
    def shards(cls, ctx: Context) -> tuple[list, list | None]:
        """(what each of the n workers holds, its data rows): the problem's shards by default."""
        return ctx.problem.shards, ctx.problem.parts

    @classmethod
    def options_of(cls, ctx: Context) -> dict:
        """Keyword arguments of the constructor beyond the common ones (from ``ctx.options`` and the problem)."""
        return {}

    @classmethod
    def bound(cls, ctx: Context, method: "Method"):
        """The theorem's bound for the stepsize used; NoBound where none is logged."""
        return NoBound(theorem=f"no theorem of arXiv:1901.09437 covers {cls.name}",
                       gamma_theory=cls.stepsize(cls.smooth(ctx), ctx.problem.mu, ctx.n, ctx.tau), gamma=method.gamma)


def check_needs(cls, problem) -> None:
    """Raise ConfigError if ``problem`` lacks a capability ``cls.needs`` names (before any work): the capabilities
    are declared by the problem (``isparse.problems.base.Problem.capabilities``: what its stacked shards compute,
    and what the problem itself offers, e.g. ``strong_growth``)."""
    missing = [c for c in cls.needs if c not in problem.capabilities]
    if missing:
        raise ConfigError("algorithm", f"{type(problem).__name__} is not compatible with algorithm={cls.name}: it "
                                       f"must provide {', '.join(missing)} (it provides "
                                       f"{', '.join(sorted(problem.capabilities)) or 'nothing'}).")


def strongly_convex_or_none(ctx: Context, method: Method, build_bound):
    """build_bound() when f is strongly convex (mu > 0), else a NoBound saying why."""
    if ctx.problem.mu <= 0:
        return NoBound(theorem=f"the theorem for {ctx.algorithm} needs a strongly convex f", gamma_theory=method.gamma,
                       gamma=method.gamma)
    return build_bound()

