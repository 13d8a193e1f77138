"""Item 6: a sparse logistic problem with d = 10^6: the reference solve and ISEGA on both engines, time and peak memory.

The problem: ``benchmarks.synthetic.make_sparse_logistic(N=20_000, d=1_000_000, nnz_per_row=20, seed=0)`` (each row
20 distinct uniform columns with N(0, 1) values scaled to unit norm; labels b_j = sign(a_j^T w + 0.1 z_j) of a
planted w ~ N(0, I_d)), lambda = 1e-4, n = 8 logical workers (rows split by ``split_rows(..., "shuffle", 0)``),
x^0 = 0, the theorem's stepsize.

Measured, per block size B (m = d / B blocks, tau = auto = ceil(m/n)/m):

- **reference solve**: ``isparse.build`` of the spec (isega, problem.lam = 1e-4, workers.n = 8, blocks.size = B), which splits the
  rows, builds the problem and solves for x* (Newton-CG with Hessian-vector products, d > 2000) and the n local
  gradients grad f_i(x*) (n x d floats); timed once, for the first block size (x* does not depend on B; the other
  rows reuse it);
- **in-process**: ``InProcessPool`` built and ``isparse.engines.run`` for the row's iterations (no bound: no
  Lyapunov monitoring; the two objective evaluations of the first and last records are included);
- **Dask**: ``DaskPool`` (default ``snapshot_every=50``, ``measure_every=50``) on a ``LocalCluster`` of 2 worker
  processes, built (shards scattered, one ``WorkerHost`` actor per process) and run the same way. The iterates of
  both engines are compared at the end (same seed: the same iterates).

Peak memory: the high-water mark of the resident set (``VmHWM`` of ``/proc/self/status``), reset before each phase
by writing 5 to ``/proc/self/clear_refs`` (Linux, after ``gc.collect()`` and ``malloc_trim(0)``), read after it;
reported as the peak above the RSS at the start of the phase (``psutil``). For the Dask run, the same on each Dask
worker process (``client.run``) and in the client.
"""

from __future__ import annotations

import time

import numpy as np

from .common import table

N_ROWS, D, NNZ, LAM, N_WORKERS, SEED = 20_000, 1_000_000, 20, 1e-4, 8, 0
#: (block size, iterations) per row: B = 100 (m = 10^4) is the main row; B = 1 (m = 10^6) draws m sampling keys per
#: worker and iteration (the sampler's keys path, tau*m > m/16), so it gets fewer iterations
ROWS = ((100, 1000), (1, 100))
QUICK_ROWS = ((100, 50), (1, 5))
MB = 2.0 ** 20


# -- peak resident memory of a phase ---------------------------------------------------------------------
def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return -1


def peak_reset() -> int:
    """Reset this process's RSS high-water mark (``clear_refs`` 5) after a garbage collection and ``malloc_trim(0)``
    (freed heap memory returned to the kernel, so that the phase's growth is not hidden by reused free pages);
    returns the RSS now (bytes)."""
    import ctypes
    import gc

    import psutil

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return psutil.Process().memory_info().rss


def peak_read() -> tuple[int, int]:
    """(peak RSS since the last reset, RSS now), bytes."""
    import psutil

    return _status("VmHWM"), psutil.Process().memory_info().rss


class Phase:
    """``with Phase() as p: ...``: p.seconds, p.base, p.peak, p.after (bytes) of this process for the block."""

    def __enter__(self):
        self.base = peak_reset()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.peak, self.after = peak_read()
        return False

    def mb(self) -> dict:
        return {"seconds": self.seconds, "base_mb": self.base / MB, "peak_mb": self.peak / MB,
                "peak_growth_mb": (self.peak - self.base) / MB, "after_mb": self.after / MB}


def _worker_reset():
    import isparse  # noqa: F401  (the library imported before the baseline is read)

    return peak_reset()


def _worker_read():
    return peak_read()


# -- the measurement ------------------------------------------------------------------------------------
def _run(setup, pool, iters: int):
    import isparse.engines

    return isparse.engines.run(setup.method, pool, setup.problem, setup.reference, None, x0=setup.x0, max_iter=iters,
                               tol=1e-300, log_every=iters)


def measure(quick: bool = False, rows=None) -> dict:
    from isparse import InProcessPool
    from isparse.engines.dask import DaskPool

    from .cluster import local_client
    from .common import setup
    from .synthetic import make_sparse_logistic

    rows = rows or (QUICK_ROWS if quick else ROWS)
    with Phase() as gen:
        data = make_sparse_logistic(N=N_ROWS, d=D, nnz_per_row=NNZ, seed=SEED)
    out = {"rows": [], "data": data.name, "nnz": int(data.A.nnz), "generate": gen.mb(), "lam": LAM, "n": N_WORKERS}
    reference = None
    for B, iters in rows:
        row = {"block_size": B, "iterations": iters}
        with Phase() as ph:
            s = setup("isega", data=data, lam=LAM, n=N_WORKERS, block_size=B, reference=reference)
        row["build"] = dict(ph.mb(), solved=reference is None)
        if reference is None:
            reference = s.reference
            out["reference"] = {"residual": float(s.reference.residual), "F_star": float(s.reference.F_star),
                                **ph.mb()}
            print(f"[item6] reference solve (build) d={D}: {ph.seconds:.1f} s, peak +{(ph.peak - ph.base) / MB:.0f} MB, "
                  f"residual {s.reference.residual:.2e}", flush=True)
        row.update(m=s.method.blocks.m, tau=s.method.tau, tau_m=s.method.tau_m, gamma=s.method.gamma)
        F0 = s.problem.F(s.x0) - s.reference.F_star
        # in-process
        with Phase() as ph:
            pool = InProcessPool(*s.pool_args())
            t_build = time.perf_counter() - ph.t0
            res = _run(s, pool, iters)
        x_local = res.x.copy()
        row["inprocess"] = dict(ph.mb(), pool_s=t_build, run_s=ph.seconds - t_build,
                                per_iter_ms=1e3 * (ph.seconds - t_build) / iters,
                                rel_subopt=(s.problem.F(res.x) - s.reference.F_star) / F0)
        del pool, res
        print(f"[item6] B={B} in-process: {iters} iterations {row['inprocess']['run_s']:.1f} s, peak "
              f"+{row['inprocess']['peak_growth_mb']:.0f} MB", flush=True)
        # Dask
        with local_client() as client:
            wbase = client.run(_worker_reset)
            with Phase() as ph:
                pool = DaskPool(client, *s.pool_args())
                t_build = time.perf_counter() - ph.t0
                res = _run(s, pool, iters)
            wpeak = client.run(_worker_read)
            traffic = pool.traffic()
            plan = pool.plan
            pool.close()
        workers = [{"worker": a.rsplit(":", 1)[-1], "hosted": len(plan.get(a, [])), "base_mb": wbase[a] / MB,
                    "peak_mb": wpeak[a][0] / MB, "peak_growth_mb": (wpeak[a][0] - wbase[a]) / MB,
                    "after_mb": wpeak[a][1] / MB} for a in sorted(wbase)]
        row["dask"] = dict(ph.mb(), pool_s=t_build, run_s=ph.seconds - t_build,
                           per_iter_ms=1e3 * (ph.seconds - t_build) / iters,
                           rel_subopt=(s.problem.F(res.x) - s.reference.F_star) / F0,
                           max_abs_diff=float(np.max(np.abs(res.x - x_local))), workers=workers,
                           serialized_per_round=traffic["uplink_bytes_serialized"] / max(1, traffic["rounds"]),
                           analytic_per_round=traffic["uplink_bytes_analytic"] / max(1, traffic["rounds"]))
        print(f"[item6] B={B} Dask: {iters} rounds {row['dask']['run_s']:.1f} s, client peak "
              f"+{row['dask']['peak_growth_mb']:.0f} MB, workers peak "
              + ", ".join(f"+{w['peak_growth_mb']:.0f} MB" for w in workers)
              + f"; max |x_dask - x_inprocess| = {row['dask']['max_abs_diff']:.1e}", flush=True)
        out["rows"].append(row)
        del s, res
    return out


def report(res: dict) -> tuple[str, str]:
    """(the time table, the memory table)."""
    times, mem = [], []
    for r in res["rows"]:
        ip, dk = r["inprocess"], r["dask"]
        tag = f"B = {r['block_size']} (m = {r['m']}, τ = {r['tau']:.3g}, τm = {r['tau_m']})"
        solve = f"{r['build']['seconds']:.3g}" + ("" if r["build"]["solved"] else " (x* reused)")
        times.append([tag, r["iterations"], solve, ip["pool_s"], ip["run_s"], ip["per_iter_ms"], dk["pool_s"],
                      dk["run_s"], dk["per_iter_ms"], f"{ip['rel_subopt']:.2e}", f"{dk['max_abs_diff']:.1e}",
                      f"{dk['analytic_per_round']:.4g} / {dk['serialized_per_round']:.4g}"])
        w = dk["workers"]
        mem.append([tag, r["build"]["peak_growth_mb"], ip["peak_growth_mb"], dk["peak_growth_mb"],
                    " / ".join(f"{x['peak_growth_mb']:.0f}" for x in w),
                    " / ".join(f"{x['base_mb']:.0f} → {x['peak_mb']:.0f}" for x in w),
                    f"{ip['base_mb']:.0f} → {ip['peak_mb']:.0f}", f"{dk['base_mb']:.0f} → {dk['peak_mb']:.0f}"])
    t1 = table(["block size", "iterations", "build incl. reference solve (s)", "in-process: pool (s)",
                "in-process: run (s)", "in-process: per iteration (ms)", "Dask: pool (s)", "Dask: run (s)",
                "Dask: per round (ms)", "(F − F*) / (F⁰ − F*) after the run", "max abs. difference x_Dask − x_in-process",
                "uplink B per round, analytic / serialized"], times)
    t2 = table(["block size", "build: peak growth (MB)", "in-process: peak growth (MB)", "Dask: client peak growth (MB)",
                "Dask: each worker's peak growth (MB)", "Dask workers: RSS before → peak (MB)",
                "in-process: RSS before → peak (MB)", "Dask client: RSS before → peak (MB)"], mem)
    return t1, t2
