"""The master loop shared by every engine.

Per iteration t: broadcast x^t to the workers (``pool.step``), receive their messages, apply
``method.master_step``, count the bytes, and check ||x^{t+1} - x*||^2 <= tol * r_0. Every
``log_every`` iterations (and at t = 0 and the last one) a record of metrics is handed to the
observer (the pipeline logs it to MLflow).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..blocks import VALUE_BYTES


class DivergenceError(RuntimeError):
    """The iterate became NaN/infinite or exploded. Carries the last finite iterate."""

    def __init__(self, t: int, gamma: float, x_last: np.ndarray):
        self.t, self.gamma, self.x_last = t, gamma, x_last
        super().__init__(f"the method diverged at iteration {t} with stepsize gamma = {gamma:.6g} "
                         f"(||x - x*||^2 is not finite or grew by 1e12 x r_0); lower step.multiplier.")


@dataclass
class RunResult:
    """What a run produced.

    Attributes
    ----------
    x : ndarray of shape (d,)
        The last iterate.
    iterations : int
        Iterations done.
    converged : bool
        dist_sq <= tol * r_0 was reached.
    records : list of dict
        The logged metrics (keys: step, dist_sq, subopt, bound, uplink_bytes, downlink_bytes, wall_s;
        ``lyapunov`` where the theorem has one, ``subopt_avg`` for ISGD).
    uplink_per_worker : ndarray of shape (n,)
        Bytes each worker sent in total.
    iterates : list of ndarray, optional
        Every iterate x^0..x^T when asked for (tests).
    """

    x: np.ndarray
    iterations: int
    converged: bool
    records: list = field(default_factory=list)
    uplink_per_worker: np.ndarray | None = None
    iterates: list | None = None


@dataclass
class Checkpoint:
    """Everything needed to continue a run exactly: the iteration, the iterate, the master's and every
    worker's state (with their random streams) and the byte counters.

    Attributes
    ----------
    t : int
    x : ndarray of shape (d,)
    master : object
        The method's master state.
    workers : dict
        {i: (worker state, random stream state)} from ``pool.snapshot()``.
    uplink_per_worker : ndarray of shape (n,)
    """

    t: int
    x: np.ndarray
    master: object
    workers: dict
    uplink_per_worker: np.ndarray


def start_run(method, reference, x0, tol, keep_iterates):
    """(x^0, r_0, tol * r_0, per-worker uplink counters, empty RunResult): what every master loop starts from."""
    x = np.array(x0, dtype=float)
    r0 = float(np.sum((x - reference.x_star) ** 2))
    uplink = np.zeros(method.n, dtype=np.int64)
    result = RunResult(x=x, iterations=0, converged=r0 <= tol * r0, uplink_per_worker=uplink,
                       iterates=[x.copy()] if keep_iterates else None)
    return x, r0, tol * r0, uplink, result


def engine_counters(pool, master_s: float) -> dict:
    """The wall-time split and the engine's own counters, cumulative over the rounds run so far.

    ``time_compute_s`` (worker compute, measured where the workers run; per round the slowest host),
    ``time_comm_s`` (per round, the round trip minus that compute; 0 in-process), ``time_master_s``
    (the master step) in seconds; from the Dask engine also ``worker_restarts`` (lost Dask workers
    recovered from) and ``uplink_bytes_serialized`` (bytes of the workers' serialized replies).
    """
    out = {"time_master_s": master_s}
    timing = getattr(pool, "timing", None)
    if timing is not None:
        out.update(time_compute_s=timing["compute_s"], time_comm_s=timing["comm_s"])
    if hasattr(pool, "restarts"):
        out["worker_restarts"] = pool.restarts
    if hasattr(pool, "serialized_bytes"):
        out["uplink_bytes_serialized"] = pool.serialized_bytes
    return out


def check_divergence(t, dist_sq, r0, gamma, x_prev) -> None:
    """Raise DivergenceError if ||x^t - x*||^2 is not finite or exceeds 1e12 r_0."""
    if not math.isfinite(dist_sq) or dist_sq > 1e12 * max(r0, 1e-300):
        raise DivergenceError(t, gamma, x_prev)


def run(method, pool, problem, reference, bound=None, *, x0, max_iter: int, tol: float,
        log_every: int = 1, observer=None, progress: bool = False, keep_iterates: bool = False,
        should_stop=None, checkpoint_every: int = 0, on_checkpoint=None, resume: Checkpoint | None = None
        ) -> RunResult:
    """Run ``method`` on ``pool`` from x0 until dist_sq <= tol * r_0 or ``max_iter`` iterations.

    Parameters
    ----------
    method : Method
    pool : InProcessPool or DaskPool
        Runs the worker steps.
    problem : LogisticProblem
        For F(x) in the logged suboptimality.
    reference : Reference
        x* and F*.
    bound : LinearBound, SublinearBound or NoBound, optional
        Logged as ``bound`` (NaN when not applicable); it bounds the record's ``bound.quantity``.
    x0 : ndarray of shape (d,)
    max_iter : int
    tol : float
        Stop when ||x^t - x*||^2 <= tol * r_0.
    log_every : int
        Metrics are recorded every this many iterations.
    observer : callable(dict), optional
        Called with each record as it is made.
    progress : bool
        Show a tqdm progress bar.
    keep_iterates : bool
        Keep every iterate in the result (for tests).
    should_stop : callable() -> bool, optional
        Checked every iteration; True raises KeyboardInterrupt (a signal handler's flag).
    checkpoint_every, on_checkpoint : int, callable(Checkpoint)
        Every ``checkpoint_every`` iterations (0: never) a :class:`Checkpoint` is handed to ``on_checkpoint``.
    resume : Checkpoint, optional
        Continue from it: the iterates are then exactly those of the uninterrupted run.

    Raises
    ------
    DivergenceError
        If ||x^t - x*||^2 becomes non-finite or exceeds 1e12 r_0.
    """
    n, d = method.n, problem.d
    x_star = reference.x_star
    x, r0, target, uplink, result = start_run(method, reference, x0, tol, keep_iterates)
    master = method.master_init(x)
    downlink_per_round = n * d * VALUE_BYTES  # the model broadcast to every worker
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=max_iter, desc=f"{method.name} n={n}", unit="it", mininterval=0.5, leave=False,
                   disable=None)  # None: only on a terminal
    start = time.perf_counter()

    def current():
        """The measured iterate: x^t, or the method's own output sequence (IASGD's w_k)."""
        return method.iterate(master, x) if hasattr(method, "iterate") else x

    grad_sq = {"sum": 0.0, "count": 0}   # for a non-convex bound on the average of ||grad f(x^s)||^2

    def track_gradient():
        if getattr(bound, "quantity", None) == "grad_norm_sq_avg":
            grad_sq["sum"] += float(np.sum(problem.grad(current()) ** 2))
            grad_sq["count"] += 1

    def record(t, dist_sq):
        rec = {"step": t, "dist_sq": dist_sq, "subopt": problem.F(current()) - reference.F_star,
               "bound": bound(t) if bound is not None else math.nan,
               "uplink_bytes": int(uplink.sum()), "downlink_bytes": int(downlink_per_round * t),
               "wall_s": time.perf_counter() - start}
        if grad_sq["count"]:
            rec["grad_norm_sq_avg"] = grad_sq["sum"] / grad_sq["count"]
        rec.update(engine_counters(pool, master_s))
        weight = getattr(bound, "lyapunov_weight", None)
        if weight is not None and hasattr(method, "lyapunov_term"):   # the theorem's Lyapunov function
            rec["lyapunov"] = dist_sq + weight * pool.lyapunov(x_star)
        elif weight is not None and hasattr(method, "master_lyapunov"):
            rec["lyapunov"] = dist_sq + weight * method.master_lyapunov(master)
        if hasattr(method, "extra_iterates"):   # e.g. ISGD's weighted average x_hat (Theorem 6)
            for key, z in method.extra_iterates(master).items():
                rec[f"subopt_{key}"] = problem.F(z) - reference.F_star
        result.records.append(rec)
        if observer is not None:
            observer(rec)
        if bar is not None:
            bar.set_postfix(dist_sq=f"{dist_sq / r0 if r0 else 0:.2e} r0", refresh=False)

    dist_sq, t, master_s = r0, 0, 0.0
    if resume is not None:
        t, x, master = resume.t, np.array(resume.x, dtype=float), resume.master
        uplink[:] = resume.uplink_per_worker
        pool.restore(resume.workers)
        dist_sq = float(np.sum((current() - x_star) ** 2))
    else:
        track_gradient()
        record(0, dist_sq)
    try:
        while t < max_iter and dist_sq > target:
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt(f"stopped at iteration {t}")
            messages = pool.step(x)
            x_prev = x
            tick = time.perf_counter()
            x, master = method.master_step(master, x, messages)
            master_s += time.perf_counter() - tick
            t += 1
            for msg in messages:
                uplink[msg.worker] += msg.nbytes
            dist_sq = float(np.sum((current() - x_star) ** 2))
            check_divergence(t, dist_sq, r0, method.gamma, x_prev)
            if keep_iterates:
                result.iterates.append(current().copy())
            track_gradient()
            if t % log_every == 0 or dist_sq <= target or t == max_iter:
                record(t, dist_sq)
            if checkpoint_every and on_checkpoint is not None and t % checkpoint_every == 0:
                on_checkpoint(Checkpoint(t, x.copy(), master, pool.snapshot(), uplink.copy()))
            if bar is not None:
                bar.update(1)
        if not result.records:   # resumed at (or past) the end: record where it stands
            record(t, dist_sq)
    finally:
        if bar is not None:
            bar.close()
        result.x, result.iterations, result.converged = current(), t, dist_sq <= target
    return result
