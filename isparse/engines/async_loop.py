"""The master loop of asynchronous methods (Algorithm 8): apply each message on arrival.

Pools provide an asynchronous view with ``start(x)`` (every worker gets x^0), ``next()`` (block
until a worker's message is ready: returns (worker, message)) and ``resume(i, x)`` (send worker i
the current model; it starts its next step). The in-process pool simulates the timing with a
seeded delay model; the Dask pool runs the workers truly concurrently.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..blocks import VALUE_BYTES
from .loop import RunResult, check_divergence, start_run


def run_async(method, pool, problem, reference, bound=None, *, x0, max_iter: int, tol: float, log_every: int = 1,
              observer=None, progress: bool = False, keep_iterates: bool = False, should_stop=None,
              async_pool=None) -> RunResult:
    """Run an asynchronous method until dist_sq <= tol * r_0 or ``max_iter`` applied messages.

    Parameters are those of :func:`isparse.engines.loop.run`; ``async_pool`` is the pool's
    asynchronous view (default ``pool.asynchronous()``). Records add ``delay_mean`` and ``delay_max``.
    """
    view = async_pool if async_pool is not None else pool.asynchronous()
    n, d = method.n, problem.d
    x_star = reference.x_star
    x, r0, target, uplink, result = start_run(method, reference, x0, tol, keep_iterates)
    state = method.master_init(x)
    version, received = 0, np.zeros(n, dtype=np.int64)   # model version each worker computes on
    delays = []
    start = time.perf_counter()

    def record(t, dist_sq):
        rec = {"step": t, "dist_sq": dist_sq, "subopt": problem.F(x) - reference.F_star,
               "bound": bound(t) if bound is not None else math.nan, "uplink_bytes": int(uplink.sum()),
               "downlink_bytes": int((n + t) * d * VALUE_BYTES), "wall_s": time.perf_counter() - start,
               "delay_mean": float(np.mean(delays)) if delays else 0.0,
               "delay_max": float(np.max(delays)) if delays else 0.0}
        result.records.append(rec)
        if observer is not None:
            observer(rec)

    dist_sq, t = r0, 0
    record(0, dist_sq)
    view.start(x)
    try:
        while t < max_iter and dist_sq > target:
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt(f"stopped at iteration {t}")
            i, msg = view.next()
            x_prev = x
            x, state = method.master_apply(state, x, msg)
            delays.append(version - received[i])
            version += 1
            t += 1
            uplink[i] += msg.nbytes
            received[i] = version
            dist_sq = float(np.sum((x - x_star) ** 2))
            check_divergence(t, dist_sq, r0, method.gamma, x_prev)
            if keep_iterates:
                result.iterates.append(x.copy())
            if t % log_every == 0 or dist_sq <= target or t == max_iter:
                record(t, dist_sq)
            if t < max_iter and dist_sq > target:
                view.resume(i, x)
    finally:
        view.stop()
        result.x, result.iterations, result.converged = x, t, dist_sq <= target
    return result
