"""The master loop shared by every engine and by synchronous and asynchronous methods.

Per iteration t: hand x^t to the idle workers and receive the next batch of messages
(``engine.exchange``: a synchronous engine returns all n workers' messages of one round, an
asynchronous view the next single message to arrive), apply ``method.master_step``, count the
bytes, and check ||x^{t+1} - x*||^2 <= tol * r_0. Every ``log_every`` iterations (and at t = 0 and
the last one) a record is made: the monitors (objective, Lyapunov value) run only then; the
workers' memory part of the Lyapunov value comes back with the round that ends on a logged step, computed by the
hosts against the x* they were given once before the first round (``engine.reference``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..compression.messages import VALUE_BYTES
from .protocol import Engine


class DivergenceError(RuntimeError):
    """The iterate became NaN/infinite or exploded: ||x^t - x*||^2 is not finite or exceeds 1e12 r_0.

    Raised by :func:`run` (through :func:`check_divergence`) when the stepsize is too large for the problem
    (typically a ``step.multiplier`` above the theorem's stepsize, docs/algorithms.md §3) or a codec's values
    overflow. Picklable (a parallel launcher sends it back to the parent process).

    Parameters
    ----------
    t : int
        The iteration at which the divergence was detected.
    x_last : ndarray of shape (d,)
        The iterate before the step that diverged (the last finite one).
    hint : str, optional
        Appended to the message (e.g. the codec's overflow window).
    """

    def __init__(self, t: int, gamma: float, x_last: np.ndarray, hint: str = ""):
        self.t, self.gamma, self.x_last, self.hint = t, gamma, x_last, hint
        super().__init__(f"the method diverged at iteration {t} with stepsize gamma = {gamma:.6g} "
                         f"(||x - x*||^2 is not finite or grew by 1e12 x r_0); lower step.multiplier{hint}.")

    def __reduce__(self):
        return (DivergenceError, (self.t, self.gamma, self.x_last, self.hint))


@dataclass
class RunResult:
    """What a run produced (returned by :func:`run`).

    Parameters
    ----------
    x : ndarray of shape (d,)
        The last measured iterate: x^T, or the method's own output sequence (IASGD's w_k).
    iterations : int
        T, the iterations done (including those before a resume).
    converged : bool
        dist_sq <= tol * r_0 was reached (never with tol = 0).
    records : list of dict
        The logged metrics, one dict per logged iteration. Keys: ``step``; ``dist_sq`` (||x^t - x*||^2);
        ``subopt`` (F(x^t) - F*); without x* (``x_star=none``: both NaN) ``objective`` (F(x^t)) and
        ``grad_norm_sq`` (||grad f(x^t)||^2); ``bound`` (the theorem's bound on its quantity, NaN when none applies);
        ``uplink_bytes`` and ``downlink_bytes`` (cumulative, bytes); ``wall_s`` (seconds since the loop started,
        i.e. after the cluster start, the data and the reference solve; read as the record begins, so it holds
        none of this record's monitors), ``time_monitor_s`` (seconds spent in the monitors of the earlier records:
        the objective and the other logged quantities, the observer that logs them, Theorem 7's gradient average;
        ``wall_s - time_monitor_s`` is the time of the rounds, :func:`isparse.engines.to_eps.to_eps`),
        ``time_master_s`` (seconds);
        ``uplink_bytes_float64`` (bytes the same messages would take as float64 values); the engine's counters
        (``time_compute_s``, ``time_comm_s``, seconds; the Dask engine's ``worker_restarts`` and
        ``uplink_bytes_serialized``); ``dist_sq_null`` where the problem has a null space; ``lyapunov`` where
        the theorem has one (Theorems 2, 3, 5); ``subopt_avg`` for ISGD (Theorem 6); ``grad_norm_sq_avg``
        (Theorem 7); ``delay_mean`` and ``delay_max`` for asynchronous methods (iterations).
    uplink_per_worker : ndarray of float64, shape (n,)
        Bytes each worker sent in total (float: coded values need not fill whole bytes).
    iterates : list of ndarray of shape (d,), optional
        Every measured iterate x^0..x^T when asked for (``keep_iterates``, tests); None otherwise.
    """

    x: np.ndarray
    iterations: int
    converged: bool
    records: list = field(default_factory=list)
    uplink_per_worker: np.ndarray | None = None
    iterates: list | None = None

    def frame(self):
        """The records as a pandas DataFrame: one row per logged iteration, indexed by ``step`` (int64), one float64
        column per other key of :attr:`records` (a key a record lacks is NaN there; NumPy scalars become plain floats).
        pandas comes with MLflow, a dependency of the pipeline."""
        import pandas as pd

        df = pd.DataFrame.from_records([{k: math.nan if v is None else float(v) for k, v in r.items()}
                                        for r in self.records])
        if df.empty:
            return df
        df["step"] = df["step"].astype(np.int64)
        return df.set_index("step")


@dataclass
class Checkpoint:
    """Everything needed to continue a run exactly (``RunOptions.resume``).

    No random stream states are kept: every draw depends on (seed, i, t) only (docs/algorithms.md §1), so the
    resumed iterates are those of the uninterrupted run.

    Parameters
    ----------
    master : object
        The method's master state at t.
    workers : list of HostSnapshot
        Every host's worker state and step counters.
    uplink_per_worker : ndarray of float64, shape (n,)
        Bytes each worker has sent so far.
    records : list of dict
        The records up to t (a resumed run's history starts at t = 0).
    w : ndarray of shape (d,), optional
        With a compressed downlink (``messages.downlink``): w^{t-1}, the model the workers last computed at, which
        the next round's message updates (EF21-P's state).
    data_files : list of dict, optional
        What the run read: per data file ``{"file", "bytes", "sha256"}``
        (:meth:`~isparse.data.sources.DataSource.fingerprint`; ``[]``: no file), set by whoever saves the checkpoint
        (``pipeline.lifecycle.checkpoint_saver``); a resume whose files differ is refused. None: not recorded (a
        checkpoint written before the record existed).
    """

    t: int
    x: np.ndarray
    master: object
    workers: list
    uplink_per_worker: np.ndarray
    counters: dict = field(default_factory=dict)   # wall_s, the time split and the engine's counters so far
    records: list = field(default_factory=list)    # the records up to t (dicts, never written to later)
    w: np.ndarray | None = None                    # a compressed downlink's w^{t-1} (EF21-P), None without one
    data_files: list | None = None                 # per data file read: {"file", "bytes", "sha256"}; None: unrecorded


@dataclass
class RunOptions:
    """How long to run, what to record and where to hand checkpoints.

    Attributes
    ----------
    tol : float
        Stop when ||x^t - x*||^2 <= tol * r_0 (0: run all of ``max_iter``).
    log_every : int
        A record every this many iterations (and at 0 and the last).
    observer : callable(dict), optional
        Called with each record as it is made.
    progress : bool
        A tqdm progress bar (on a terminal only).
    keep_iterates : bool
        Keep every iterate (tests).
    should_stop : callable() -> bool, optional
        Checked every iteration; True raises KeyboardInterrupt.
    checkpoint_every : int
        A :class:`Checkpoint` to ``on_checkpoint`` every this many iterations, and one where ``should_stop`` stops
        the run (0: never).
    resume : Checkpoint, optional
        Continue from it; the iterates are those of the uninterrupted run.
    expected_iter : float, optional
        The progress bar's estimate of the iterations the run takes (e.g. the theorem's prediction).
    on_iteration : callable(MasterLoop) -> bool or None, optional
        Called at t = 0 and after every iteration with the loop (its ``t``, :meth:`MasterLoop.current`,
        :attr:`MasterLoop.uplink_bytes`, :meth:`MasterLoop.bound_now`); returning False ends the run there, as
        reaching ``max_iter`` does (a benchopt callback: ``benchmarks/benchopt``). Nothing else is computed for it.
    """

    max_iter: int
    tol: float
    log_every: int = 1
    observer: object = None
    progress: bool = False
    keep_iterates: bool = False
    should_stop: object = None
    checkpoint_every: int = 0
    on_checkpoint: object = None
    resume: Checkpoint | None = None
    expected_iter: float | None = None
    on_iteration: object = None


def check_divergence(t, dist_sq, r0, gamma, x_prev, codec=None) -> None:
    """Raise DivergenceError (carrying ``x_prev``, the last finite iterate) if dist_sq = ||x^t - x*||^2 is not finite
    or exceeds 1e12 r_0. The ``codec``'s ``overflow_hint()`` is added to the message (e.g. the natural codecs'
    exponent window, above which a value decodes to inf)."""
    if not math.isfinite(dist_sq) or dist_sq > 1e12 * max(r0, 1e-300):
        said = codec.overflow_hint() if codec is not None else None
        raise DivergenceError(t, gamma, x_prev, f", or {said}" if said else "")


class MasterLoop:
    """One run of ``method`` on ``engine`` (see the module docstring); :meth:`run` returns a :class:`RunResult`.

    The arguments are :func:`run`'s, its options as a :class:`RunOptions`.
    """

    def __init__(self, method, engine: Engine, problem, reference, bound, x0, options: RunOptions):
        self.method, self.engine, self.problem, self.ref, self.bound, self.opt = method, engine, problem, reference, bound, options
        self.x = np.array(x0, dtype=float)
        self.r0 = float(np.sum((self.x - reference.x_star) ** 2))
        self.target = options.tol * self.r0 if options.tol > 0 else -math.inf   # tol = 0: never stops early
        self.n, self.d = method.n, problem.d
        self.uplink = np.zeros(self.n)   # bytes (float: coded values need not fill whole bytes)
        self.models_sent = 0
        # a compressed downlink (EF21-P): the master's copy of w, the model the workers compute at (w^{-1} = x^0)
        self.downlink = getattr(method, "downlink", None)
        self.w = self.x.copy() if self.downlink is not None else None
        self.down_bytes = self.downlink.bytes_per_copy if self.downlink is not None else self.d * VALUE_BYTES
        self.uplink64 = 0.0     # what the same messages would cost as float64 values (the tau-only uplink)
        self.version, self.received = 0, np.zeros(self.n, dtype=np.int64)   # asynchronous delays
        self.delays = []
        self.idle = np.arange(self.n)                     # the workers that get the next model
        self.master = method.master_init(self.x)
        self.master_s, self.t = 0.0, 0
        self.monitor_s = 0.0                              # seconds in the monitors (records, Theorem 7's average)
        self._master_shared = False                       # a checkpoint holds the master state: do not write into it
        self.offsets = {}                                 # counters of the run before a resume
        self.grad_sq = [0.0, 0]                           # Theorem 7: the average of ||grad f(x^s)||^2 over every s
        self.weight = bound.lyapunov_weight if bound is not None else None
        self.null_basis = problem.null_space()[0]        # dist_sq_null: the part of ||x - x*||^2 in null(A)
        self.result = RunResult(x=self.x, iterations=0, converged=self.r0 <= self.target, uplink_per_worker=self.uplink,
                                iterates=[self.x.copy()] if options.keep_iterates else None)

    # -- monitors -----------------------------------------------------------------------------
    def current(self) -> np.ndarray:
        """The measured iterate: x^t, or the method's own output sequence (IASGD's w_k, Theorem 8)."""
        return self.method._iterate(self.master, self.x)

    def wants_memory(self) -> bool:
        """Whether a logged record needs the workers' Lyapunov memory term (the bound has a Lyapunov weight and
        the method a worker memory)."""
        return self.weight is not None and (self.method._worker_memory is not None)

    def logged(self, t: int) -> bool:
        """Whether iteration ``t`` is on the logging schedule (every ``log_every``, and ``max_iter``)."""
        return t % self.opt.log_every == 0 or t == self.opt.max_iter

    def track_gradient(self):
        """Add ||grad f(x^t)||^2 to the running average ``grad_norm_sq_avg`` when the bound is on it (Theorem 7)."""
        if self.bound is not None and self.bound.quantity == "grad_norm_sq_avg":
            tick = time.perf_counter()
            self.grad_sq[0] += float(np.sum(self.problem.grad(self.current()) ** 2))
            self.grad_sq[1] += 1
            self.monitor_s += time.perf_counter() - tick

    @property
    def uplink_bytes(self) -> float:
        """Cumulative uplink bytes of every worker so far (the codec's packed size)."""
        return float(self.uplink.sum())

    def bound_now(self) -> float:
        """The theorem's bound on ``bound.quantity`` at this t (NaN without one)."""
        return float(self.bound(self.t)) if self.bound is not None else math.nan

    def counters(self) -> dict:
        """The cumulative counters of the run so far (continued from a resumed checkpoint's): ``wall_s``,
        ``time_monitor_s``, ``time_master_s``, ``uplink_bytes_float64`` and the engine's."""
        out = {"wall_s": time.perf_counter() - self.start, "time_monitor_s": self.monitor_s,
               "time_master_s": self.master_s,
               "uplink_bytes_float64": self.uplink64, **self.engine.counters()}
        return {k: v + self.offsets.get(k, 0) for k, v in out.items()}

    def record(self, dist_sq: float, memory: float | None) -> None:
        """Make the record of iteration t (the keys of :attr:`RunResult.records`) and hand it to the observer;
        ``memory`` is the workers' Lyapunov memory term from the round, or None to ask the engine (when needed)."""
        tick, counters = time.perf_counter(), self.counters()   # the time before this record's monitors
        try:
            self._record(dist_sq, memory, counters)
        finally:
            self.monitor_s += time.perf_counter() - tick

    def _record(self, dist_sq: float, memory: float | None, counters: dict) -> None:
        t, z = self.t, self.current()
        F = self.problem.F(z)
        rec = {"step": t, "dist_sq": dist_sq, "subopt": F - self.ref.F_star,
               "bound": self.bound(t) if self.bound is not None else math.nan,
               "uplink_bytes": _bytes(self.uplink.sum()), "downlink_bytes": _bytes(self.models_sent * self.down_bytes),
               **counters}
        if not self.ref.solved:   # no x* (x_star=none): what can be measured without it
            rec["objective"] = F
            rec["grad_norm_sq"] = float(np.sum(self.problem.grad(z) ** 2))
        if self.null_basis is not None and self.ref.solved:
            rec["dist_sq_null"] = float(np.sum((self.null_basis.T @ (z - self.ref.x_star)) ** 2))
        if self.grad_sq[1]:
            rec["grad_norm_sq_avg"] = self.grad_sq[0] / self.grad_sq[1]
        if self.weight is not None:
            if self.method._worker_memory is not None:
                if memory is None:
                    memory = self.engine.memory(self.ref.x_star)
                rec["lyapunov"] = dist_sq + self.weight * memory
            elif self.method._master_memory is not None:
                rec["lyapunov"] = dist_sq + self.weight * self.method._master_memory(self.master)
        for key, point in self.method._extra_iterates(self.master).items():   # e.g. ISGD's x_hat (Theorem 6)
            rec[f"subopt_{key}"] = self.problem.F(point) - self.ref.F_star
        if self.method.traits.asynchronous:
            rec["delay_mean"] = float(np.mean(self.delays)) if self.delays else 0.0
            rec["delay_max"] = float(np.max(self.delays)) if self.delays else 0.0
        self.result.records.append(rec)
        if self.opt.observer is not None:
            self.opt.observer(rec)

    # -- the loop -----------------------------------------------------------------------------
    def restore(self, ck: Checkpoint) -> float:
        """Continue from ``ck`` (possibly from another run on another engine): the iteration, iterate, master and
        worker states, byte counters and records; returns dist_sq there. A ConfigError (``resume``) for an
        asynchronous method."""
        if self.method.traits.asynchronous:
            raise ConfigError("resume", "The 'resume' parameter is not supported for asynchronous methods; got a checkpoint.")
        self.t, self.x, self.master, self._master_shared = ck.t, np.array(ck.x, dtype=float), ck.master, True
        self.offsets = dict(ck.counters or {})
        self.result.records = list(ck.records)
        self.uplink[:] = ck.uplink_per_worker
        self.models_sent = self.engine.downlink_copies(np.arange(self.n)) * ck.t
        if self.downlink is not None:
            self.w = np.array(ck.w if getattr(ck, "w", None) is not None else ck.x, dtype=float)
        self.engine.restore(ck.workers, self.w)
        return float(np.sum((self.current() - self.ref.x_star) ** 2))

    def iteration(self) -> float:
        """One exchange and master step (x^t -> x^{t+1}), with the byte counts and the divergence check; returns
        dist_sq of the new measured iterate."""
        log_next = self.logged(self.t + 1)
        self.received[self.idle] = self.version
        self.models_sent += self.engine.downlink_copies(self.idle)
        monitor = log_next and self.wants_memory()   # against the x* the hosts were given once (run)
        if self.downlink is None:
            batch, memory = self.engine.exchange(self.x, monitor)
        else:   # EF21-P: send C(x^t - w^{t-1}); master and hosts both make w^t, where the workers compute
            self.w, message = self.downlink.send(self.x, self.w, self.t, self.method.sampler)
            batch, memory = self.engine.exchange(self.w, monitor, down=message)
        x_prev = self.x
        tick = time.perf_counter()
        self.x, self.master = self.method.master_step(self.master, self.x, batch, donate=not self._master_shared)
        self._master_shared = False
        self.master_s += time.perf_counter() - tick
        self.t += 1
        if self.method.traits.asynchronous:
            self.delays.extend((self.version - self.received[batch.workers]).tolist())
        self.version += 1
        self.idle = batch.workers
        sent = batch.bytes_per_worker(self.method.blocks.m)
        self.uplink64 += sent.sum() if batch.codec.exact else batch.float64_bytes(self.method.blocks.m)
        if self.method.traits.asynchronous:
            np.add.at(self.uplink, batch.workers, sent)
        else:                                     # a synchronous batch holds each worker once
            self.uplink[batch.workers] += sent
        if self.ref.solved:
            dist_sq = float(np.sum((self.current() - self.ref.x_star) ** 2))
            check_divergence(self.t, dist_sq, self.r0, self.method.gamma, x_prev, self.method.codec)
        else:   # no x*: the iterate itself must stay finite
            dist_sq = math.nan
            if not np.all(np.isfinite(self.x)):
                said = self.method.codec.overflow_hint()
                raise DivergenceError(self.t, self.method.gamma, x_prev, f", or {said}" if said else "")
        if self.opt.keep_iterates:
            self.result.iterates.append(self.current().copy())
        self.track_gradient()
        if log_next or dist_sq <= self.target:
            self.record(dist_sq, memory if log_next else None)
        return dist_sq

    def checkpoint(self):
        """Hand a :class:`Checkpoint` of iteration t to ``options.on_checkpoint`` (the states are shared, not copied:
        the next steps do not write into them)."""
        ck = Checkpoint(self.t, self.x.copy(), self.master, self.engine.snapshot(), self.uplink.copy(), self.counters(),
                        list(self.result.records), None if self.w is None else self.w.copy())
        self._master_shared = True
        self.opt.on_checkpoint(ck)

    def run(self) -> RunResult:
        """Iterate until dist_sq <= tol r_0, ``max_iter`` or ``on_iteration`` returning False; the engine is stopped
        at the end whatever happens. Raises as :func:`run`; on ``should_stop`` with checkpoints on
        (``checkpoint_every`` > 0), a checkpoint of the iteration it stopped at is handed to ``on_checkpoint`` first,
        so every interrupted run can be resumed."""
        opt = self.opt
        if self.wants_memory():   # x* to the hosts once, outside the timed rounds (they keep it across a restore)
            self.engine.reference(self.ref.x_star)
        bar = None
        if opt.progress:
            from tqdm.auto import tqdm

            total = opt.max_iter if not opt.expected_iter or not math.isfinite(opt.expected_iter) else \
                int(min(opt.max_iter, opt.expected_iter))
            bar = tqdm(total=total, desc=f"{self.method.name} n={self.n}", unit="it", mininterval=0.5, leave=False,
                       disable=None)  # None: only on a terminal
        self.start = time.perf_counter()
        dist_sq = self.r0
        if opt.resume is not None:
            dist_sq = self.restore(opt.resume)
        else:
            self.track_gradient()
            self.record(dist_sq, None)
        hook = opt.on_iteration
        checkpoints = bool(opt.checkpoint_every) and opt.on_checkpoint is not None
        saved = opt.resume.t if opt.resume is not None else None   # the iteration of the last checkpoint
        try:
            if hook is not None and hook(self) is False:
                return self.result
            while self.t < opt.max_iter and not dist_sq <= self.target:   # (NaN without x*: to max_iter)
                if opt.should_stop is not None and opt.should_stop():
                    if checkpoints and saved != self.t:   # every interrupted run can be resumed, where it stopped
                        self.checkpoint()
                    raise KeyboardInterrupt(f"stopped at iteration {self.t}")
                dist_sq = self.iteration()
                if checkpoints and self.t % opt.checkpoint_every == 0:
                    self.checkpoint()
                    saved = self.t
                if bar is not None:
                    bar.update(1)
                if hook is not None and hook(self) is False:
                    break
            if self.result.records[-1]["step"] != self.t:   # resumed at (or past) the end: record where it stands
                self.record(dist_sq, None)
        finally:
            if bar is not None:
                bar.close()
            self.engine.stop()
            r = self.result
            r.x, r.iterations, r.converged = self.current(), self.t, dist_sq <= self.target
        return self.result


def run(method, engine: Engine, problem, reference, bound=None, *, x0, max_iter: int, tol: float, **options) -> RunResult:
    """Run ``method`` on ``engine`` from x0 until dist_sq <= tol * r_0 or ``max_iter`` iterations.

    The master loop of every algorithm of arXiv:1901.09437 (Algorithms 1-8): per iteration the engine hands
    x^t to the idle workers and returns their messages (tau m blocks each), the method's master step makes
    x^{t+1}, and the uplink and downlink bytes are counted (docs/algorithms.md §6). Records are made at
    t = 0, every ``log_every`` iterations and at the end.

    Parameters
    ----------
    method : Method
        The algorithm, with its stepsize gamma and the run's seed.
    engine : Engine
        ``InProcessPool`` or ``DaskPool`` (for an asynchronous method, its ``asynchronous()`` view).
    problem : Problem
        For F(x) in the logged suboptimality.
    reference : Reference
        x* and F* (:func:`~isparse.problems.reference.reference_solve` or ``problem.reference()``).
    bound : LinearBound, SublinearBound or NoBound, optional
        The theorem's bound on ``bound.quantity``, logged as ``bound`` (docs/algorithms.md §3); None logs NaN.
    **options
        The other fields of :class:`RunOptions`.

    Raises
    ------
    DivergenceError
        If ||x^t - x*||^2 becomes non-finite or exceeds 1e12 r_0.
    ConfigError
        ``resume`` for an asynchronous method.
    KeyboardInterrupt
        ``should_stop`` returned True.
    TypeError
        An unknown keyword in ``options``.
    """
    loop = MasterLoop(method, engine, problem, reference, bound, x0, RunOptions(max_iter=max_iter, tol=tol, **options))
    return loop.run()


def _bytes(total: float):
    """A byte count as logged: an int when whole (float64 and float32 messages), else the float (9-bit codes)."""
    total = float(total)
    return int(total) if total.is_integer() else total
