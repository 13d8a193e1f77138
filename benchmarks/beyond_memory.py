"""Item 15, beyond the client's memory: ``python -m benchmarks.beyond_memory [--quick] [--out docs/benchmarks.md]``.

Criteo-like click data (:func:`isparse.data.clicks.click_data`: d = 2^20 hashed features, 30 power-law draws a row,
α = 1.1, 3 % mean click rate) is made on the hosts of one ``cluster=emulated`` cluster (:mod:`pipeline.cluster.emulated`:
H = 4 Dask worker processes of 1 thread, each in its own network namespace behind a veth pair shaped by a tc tbf of
100 Mbit in each direction, for the whole run), one partition per host, each by a task on the host that holds it
(:func:`hosted`: persisted with ``workers=[host]``, checked with ``who_has``). X's persisted partitions (scipy CSR:
data + indices + indptr) are >= 4 GiB in the full run.

The client (the process that makes every ``fit`` call) is a child process of the benchmark that first joins a cgroup
v1 memory group of its own (``memory.limit_in_bytes`` = 1 GiB, a hard limit; the group is removed afterwards); the
hosts are not capped. In that process, in order:

1. ``isparse.LogisticRegression(lam, algorithm="isega", step_rule="paper", fit_intercept=False, tol, client=client)
   .fit(X, y)`` (item 14's ISEGA τ = 1/n, one logical worker per partition): time to ε = 1e-4 from ``history_``
   (:func:`isparse.engines.to_eps.to_eps`); F* is the fit's own reference (x* solved on the hosts by Newton-CG,
   :class:`isparse.problems.remote.RemoteGLM`), F* = log 2 − (F(0) − F*) of its first record. Measured: the client's
   peak RSS (``VmHWM`` of its own process, reset just before the fit, and over its life up to the fit's end) against
   300 MB + 16·d·8 B; each host's peak RSS during the fit (item 14's :class:`~benchmarks.estimator_dask.Window`)
   against 2 × the bytes of its partitions + 300 MB; the bytes of X's keys sent between hosts or to the client
   (the Dask workers' transfer logs).
2. X's CSR partitions are released; the same rows are made again on the same hosts as pydata ``sparse.COO`` chunks
   (dask-ml cannot take scipy.sparse chunks: dask's tensordot asserts 2-D), and dask-ml's
   ``LogisticRegression(solver="lbfgs" | "admm", C=1/(λN), fit_intercept=False)`` fits them (the same objective ×N,
   item 12's :func:`benchmarks.crossover.run_lbfgs`), each with a time cap (:data:`PEER_CAP`): L-BFGS's time to ε
   from its own loss values (each evaluation); ADMM's from F of its consensus iterate z, evaluated on the hosts after
   every ADMM iteration outside the clock. Each fit's compute calls go through ``client.compute`` with a deadline, so
   a cap interrupts an evaluation in flight.
3. The CSR partitions are made again and isparse fits them again while a timer kills one host's Dask worker with
   ``kill -9`` (``client.run(os.getpid)``) half-way through the first fit's rounds: the fit's DaskPool recreates the
   lost host's logical worker on a remaining host from the shard Dask recomputes from the graph; the coef_ is
   compared, bit for bit, with the first fit's.

A guard in the benchmark's own process watches the machine's memory: if more than :data:`MACHINE_LIMIT` is in use
it kills the host with the largest resident set (``kill -9``) and says so in the report (the peer's failure).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .common import load_average, machine
from .estimator_dask import Window, _peak, _reset_peak, _status
from .estimator_dask import publish

TITLE = "15. Beyond the client's memory"
H = 4
LINK = "100mbit"
D = 2 ** 20
NNZ, ALPHA, POSITIVES, SEED = 30, 1.1, 0.03, 15
EPS = 1e-4
#: full size: ~13.5 M rows of 30 draws make X >= 4 GiB as CSR (checked: the run stops if it is less)
ROWS, QUICK_ROWS = 13_700_000, 200_000
LAM = 1e-3
#: isparse's stopping rule, ||x - x*||^2 <= TOL r0: on 200,000 rows at lambda = 1e-3, ISEGA and GD reached eps = 1e-4 near
#: ||x - x*||^2 / r0 = 2e-3 (in process, ~120 iterations), so the fit stops a little after eps
TOL = 1e-3
#: the client's hard limit; 512 MiB in --quick mode was OOM-killed during the rounds: the client's memory is O(d),
#: whatever N (the report's notes)
CLIENT_CAP = QUICK_CLIENT_CAP = 1 << 30
PEER_CAP, QUICK_PEER_CAP = 600.0, 60.0
#: the guard's limit on the machine's memory in use (MemTotal - MemAvailable)
MACHINE_LIMIT = 20 << 30
SUBNET = "10.82.0.0/16"
#: what was found outside the run itself (probes of 2026-12-07 on this machine), printed with the report
NOTES: list[str] = [
    "**where the client's memory goes** (probes of 2026-12-07 outside the run, 4 Dask workers on loopback, "
    "200,000 rows, d = 2^20, the same fit; the client's memory is O(d), not O(N)): about 280 MiB are imports (145 MiB "
    "after numpy, scipy, distributed and dask.array, which imports pydata sparse and numba where they are installed, "
    "as for dask-ml; isparse's estimator then imports scikit-learn, which imports scipy.stats, pandas and pyarrow). "
    "The rest is the working set, at its peak in the reference solve's Newton-CG (CG's five vectors, x, the gradient, "
    "the right-hand side, the preconditioner and the hosts' four replies) and in the rounds at the master's redraw "
    "of the workers' sampled coordinates. Cut before this run (commits of 2026-12-07, 70ce71d the last): the n "
    "∇f_i(x*) (one number, reduced on the hosts), the recovery snapshot and the models to replay (a temporary file), "
    "the hosts' d-vectors summed and scaled in place, ISEGA's master step in place, Newton-CG's gradient of R, last "
    "step and diagonal dropped when done and λI held as a number, the Dask master's sets of the last round dropped "
    "before the next round's; the client runs with MALLOC_MMAP_THRESHOLD_ = 1 MiB (glibc's default threshold keeps "
    "freed d-vectors in its heaps: 486 against 451 MiB in the probe). The client's peak: 700 MiB in the first full "
    "run, 549, 468, then 412 in this one. The bound 300 MB + 16·d·8 B leaves 16 d-vectors beside the imports.",
    "**where the hosts' memory goes**: `row_norms_sq` takes a block of rows at a time since d729ea8 (it made two "
    "nnz-long temporaries: +1,379 MiB beside a 1,036 MiB partition, the previous run's 2,761 MiB host peak); the "
    "largest transients are now the reference solve's squared entries (`RowsHost.curvature_at`, 0.67 × the "
    "partition) and svds' vectors for λ_max. The rounds hold the CSR once: at τ ≥ 1/4 a host of one worker takes "
    "A^T r whole over its CSR (no CSC copy).",
    "In `--quick` mode a 512 MiB client cap was tried first: the client was OOM-killed during isparse's rounds "
    "(`memory.failcnt` 84, one OOM kill), since its memory is O(d) whatever N; the caps are 1 GiB in both modes.",
    "λ = 1e-3 was chosen from in-process fits of 200,000 rows (4 workers): ISEGA τ = 1/4 (paper step) reached ε = "
    "1e-4 in 123 iterations, GD in 104; λ = 1e-4 was not tried on the cluster for lack of time (κ ten times larger).",
    "The machine was not quiet during this run's isparse fit: a probe's 8 stray Dask workers (left by an earlier "
    "probe, reconnecting to a scheduler that was gone) and the session's own edits shared the 2 cores for its first "
    "15 minutes (load 7-12), so its time to ε (643 s) is slower than the previous run's 451 s at load 0.5-2.5 on "
    "the same rows and iterations; the memory figures do not depend on it.",
]
CGROUP = Path("/sys/fs/cgroup/memory")
#: glibc's M_MMAP_THRESHOLD for the client process (``MALLOC_MMAP_THRESHOLD_``, as docs/dask.md advises a client of a
#: large-d fit): arrays of 1 MiB and more are mapped and unmapped on their own, so freed d-vectors leave the RSS
#: (glibc's default threshold grows to 32 MiB once such arrays are freed, and then keeps them in its heaps:
#: 486 against 451 MiB of peak in a 200,000-row probe at d = 2^20)
CLIENT_MMAP_THRESHOLD = 1 << 20
ALGORITHM = ("isparse ISEGA τ=1/n", {"algorithm": "isega", "step_rule": "paper"})


def client_bound(d: int) -> int:
    """The client's peak RSS bound, 300 MB + 16 d float64."""
    return 300 * 10 ** 6 + 16 * d * 8


def host_bound(part_bytes: int) -> int:
    """A host's peak RSS bound: 2 x the bytes of its partitions + 300 MB."""
    return 2 * part_bytes + 300 * 10 ** 6


# -- on the hosts --------------------------------------------------------------------------------------------------------
def _csr_bytes(X) -> int:
    return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)


def _to_coo(X):
    import sparse

    return sparse.COO.from_scipy_sparse(X)


def _warm_coo() -> None:
    """pydata sparse's kernels used by dask-glm (numba), compiled in this process before the clock."""
    import sparse

    rng = np.random.default_rng(0)
    A = sparse.COO.from_numpy(rng.random((20, 8)) * (rng.random((20, 8)) < 0.3))
    _ = A.dot(np.ones(8)), A.T.dot(np.ones(20)), sparse.concatenate([A.T, A.T], axis=1).dot(np.ones(40))


def _import_isparse() -> None:
    import isparse.data.dask_collection  # noqa: F401
    import isparse.engines.dask_host  # noqa: F401


# -- data on the hosts -------------------------------------------------------------------------------------------------
def hosted(client, rows: int, workers: list[str], coo: bool = False):
    """:func:`~isparse.data.clicks.click_data` of ``rows`` rows, one partition per worker, partition k made and held
    by ``workers[k]`` (persisted with that worker as a loose restriction: Dask may make it again elsewhere if its
    host is lost); ``coo``: X's chunks converted to pydata ``sparse.COO`` on their host. Returns (X, y, the key
    names of X's chunks, the bytes of each host's partition as CSR or None)."""
    import dask.array as da
    from distributed import futures_of, wait

    from isparse.data.clicks import click_data

    Xd, yd = click_data(rows, partitions=len(workers), d=D, nnz=NNZ, alpha=ALPHA, positives=POSITIVES, seed=SEED)
    xs, ys = [], []
    for k, w in enumerate(workers):
        xk, yk = Xd.blocks[k], yd.blocks[k]
        if coo:
            import sparse

            xk = xk.map_blocks(_to_coo, dtype=np.float64, meta=sparse.COO.from_numpy(np.zeros((0, 0))))
        xk, yk = client.persist([xk, yk], workers=[w], allow_other_workers=not coo)
        if coo:   # one host at a time: making a partition and its COO peaks near 5 GB a host at full size
            wait([xk, yk])
        xs.append(xk)
        ys.append(yk)
    wait(xs + ys)
    X, y = client.persist([da.concatenate(xs), da.concatenate(ys)])
    wait([X, y])
    fx = futures_of(X)
    where = client.who_has(fx + futures_of(y))
    keys = [k[0] for k in X.__dask_keys__()]
    hx = [tuple(where[k]) for k in keys]
    hy = [tuple(where[k]) for k in y.__dask_keys__()]
    assert hx == hy == [(w,) for w in workers], f"partitions not one per host: X on {hx}, y on {hy}"
    sizes = None
    if not coo:
        by_key = {f.key: f for f in fx}
        sizes = client.gather([client.submit(_csr_bytes, by_key[k], workers=[w], pure=False)
                               for k, w in zip(keys, workers)])
    return X, y, {X.name, *(x.name for x in xs)}, sizes


# -- the client process (in the capped group) ----------------------------------------------------------------------------
class _Stop(Exception):
    pass


class Deadline:
    """A peer's clock: ``elapsed`` excludes the time spent in :meth:`paused` (its objective's evaluations)."""

    def __init__(self, cap: float):
        self.cap, self.t0, self.excluded = cap, time.perf_counter(), 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded

    def left(self) -> float:
        return self.cap - self.elapsed()


def _capped_compute(client, clock: Deadline):
    """A stand-in for ``dask.compute`` that computes on ``client`` and gives up (cancels, raises _Stop) when the
    peer's time is up."""
    from distributed import wait

    def compute(*args, **kwargs):
        futures = client.compute(list(args))
        try:
            wait(futures, timeout=max(1.0, clock.left()))
        except TimeoutError:
            client.cancel(futures)
            raise _Stop("cap") from None
        return tuple(client.gather(futures))

    return compute


def run_peer(client, solver: str, X, y, N: int, lam: float, F_star: float, cap: float, window) -> dict:
    """dask-ml's LogisticRegression(solver=``solver``) on (X, y): time to ε and what the window measures."""
    import dask.array
    import dask_glm.algorithms as alg
    import dask_glm.regularizers as regs
    from dask_glm.families import Logistic
    from dask_glm.utils import scatter_array
    from dask_ml.linear_model import LogisticRegression

    F0 = float(np.log(2.0)) - F_star
    evals, state = [], {"stopped": "dask-ml stopped (its own tests)"}
    clock = Deadline(cap)
    compute = _capped_compute(client, clock)

    def loss_compute(*args, **kwargs):     # L-BFGS: compute(loss, gradient) at each evaluation
        out = compute(*args)
        if len(args) == 2:
            evals.append((clock.elapsed(), float(np.asarray(out[0])) / N - F_star))
            if evals[-1][1] <= EPS * F0:
                raise _Stop("at eps")
        if clock.left() <= 0:
            raise _Stop("cap")
        return out

    prox = regs.L2.proximal_operator

    def recording_prox(self, beta, t):      # ADMM: z = prox(...) once an iteration; F(z) on the hosts, off the clock
        z = prox(self, beta, t)
        t_iter = clock.elapsed()
        p0 = time.perf_counter()
        zs = scatter_array(z, client)
        loss = client.compute(Logistic.pointwise_loss(zs, X, y)).result()
        evals.append((t_iter, float(loss) / N + lam / 2 * float(z @ z) - F_star))
        clock.excluded += time.perf_counter() - p0
        if evals[-1][1] <= EPS * F0:
            raise _Stop("at eps")
        if clock.left() <= 0:
            raise _Stop("cap")
        return z

    model = LogisticRegression(solver=solver, C=1.0 / (lam * N), fit_intercept=False, max_iter=100_000,
                               **({"tol": 1e-14, "solver_kwargs": {"normalize": False}} if solver == "lbfgs"
                                  else {"solver_kwargs": {"abstol": 1e-14, "reltol": 1e-14}}))
    saved = alg.compute, dask.array.compute, regs.L2.proximal_operator
    window.start()
    _reset_peak()
    clock.t0 = time.perf_counter()
    try:
        if solver == "lbfgs":
            alg.compute = loss_compute
        else:
            dask.array.compute, regs.L2.proximal_operator = compute, recording_prox
        with client.as_current():
            model.fit(X, y)
    except _Stop as why:
        state["stopped"] = str(why)
    except Exception as exc:   # a lost host, memory: how it failed
        import traceback

        where = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)]
        state["stopped"] = f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        state["where"] = " < ".join(reversed(where[-4:]))
    finally:
        alg.compute, dask.array.compute, regs.L2.proximal_operator = saved
    wall = time.perf_counter() - clock.t0
    out = {"wall_s": wall, "elapsed_s": clock.elapsed(), "evaluations": len(evals), "stopped": state["stopped"],
           "where": state.get("where"),
           "client_peak": _peak(), "evals": evals}
    try:
        out.update(window.stop())
    except Exception as exc:
        out["window_error"] = f"{type(exc).__name__}: {exc}"
    sub = np.array([v for _, v in evals])
    ok = np.nonzero(sub <= EPS * F0)[0]
    out.update(reached=bool(ok.size), final_rel=float(sub[-1] / F0) if sub.size else float("nan"),
               best_rel=float(sub.min() / F0) if sub.size else float("nan"))
    if ok.size:
        out.update(time=evals[int(ok[0])][0], rounds=int(ok[0]) + 1)
    return out


def fit_isparse(client, X, y, lam: float, tol: float, window, kill_at: float | None = None) -> dict:
    """One isparse fit of (X, y); ``kill_at``: seconds after the start at which one host's worker gets kill -9."""
    import isparse
    from isparse.engines.to_eps import to_eps

    label, keys = ALGORITHM
    est = isparse.LogisticRegression(lam=lam, fit_intercept=False, tol=tol, max_iter=10 ** 6, random_state=0,
                                     client=client, **keys)
    killed = {}

    def kill():
        workers = sorted(client.scheduler_info()["workers"])
        victim = workers[-1]
        pid = client.run(os.getpid, workers=[victim])[victim]
        killed.update(worker=victim, pid=pid, at_s=time.perf_counter() - t0)
        os.kill(pid, signal.SIGKILL)

    window.start()
    _reset_peak()
    t0 = time.perf_counter()
    timer = threading.Timer(kill_at, kill) if kill_at is not None else None
    if timer is not None:
        timer.start()
    try:
        est.fit(X, y)
    finally:
        if timer is not None:
            timer.cancel()
    wall = time.perf_counter() - t0
    client_fit_peak = _peak()
    out = window.stop()
    recs = est.history_.reset_index().to_dict("records")
    hit = to_eps(recs, EPS)
    last = recs[-1]
    out.update(label=label, wall_s=wall, client_peak=client_fit_peak, iterations=int(est.n_iter_),
               rounds_s=float(last["wall_s"]), final_rel=float(last["subopt"] / recs[0]["subopt"]),
               F_star=float(np.log(2.0) - recs[0]["subopt"]), reached=hit is not None, killed=killed,
               restarts=int(max(r.get("worker_restarts", 0) or 0 for r in recs)),
               up=float(last["uplink_bytes"]), down=float(last["downlink_bytes"]))
    if hit is not None:
        out.update(time=hit.time_s, rounds=hit.rounds, up_eps=float(hit.uplink_bytes),
                   down_eps=float(hit.downlink_bytes))
    return out, np.asarray(est.coef_).ravel()


def child(params: dict) -> int:
    """The client process: joins the memory group, runs the fits, writes the results (JSON, after each step).

    In order: the plain fit, dask-ml's fits on the same hosts, the kill run (last: the killed host stays dead). With
    ``params["earlier"]`` (the isparse fit of an earlier run on the same data: ``--merge``) the plain fit is not made
    again and the kill run is compared with it."""
    (Path(params["cgroup"]) / "cgroup.procs").write_text(str(os.getpid()))
    from distributed import Client

    out_path = Path(params["out"])
    res: dict = {"steps": []}

    def save():
        out_path.write_text(json.dumps(res, default=float))

    def step(name):
        res["steps"].append((name, time.time()))
        print(f"[item15] {name}", flush=True)
        save()

    rows, lam, cap, earlier = params["rows"], params["lam"], params["peer_cap"], params.get("earlier")
    client = Client(params["address"], direct_to_workers=True, timeout=120)
    try:
        client.wait_for_workers(params["hosts"], timeout=300)
        workers = sorted(client.scheduler_info()["workers"])
        client.run(_import_isparse)
        client.run(_warm_coo)
        X = y = None
        if earlier is None:
            step("making the CSR partitions")
            t = time.perf_counter()
            X, y, names, sizes = hosted(client, rows, workers)
            res.update(make_s=time.perf_counter() - t, part_bytes=dict(zip(workers, sizes)), N=rows, d=D,
                       client_setup_peak=_peak())
            step(f"X: {sum(sizes) / 2**30:.2f} GiB as CSR in {res['make_s']:.0f} s")
        if earlier is None:
            r, coef = fit_isparse(client, X, y, lam, params["tol"], Window(client, names))
            r["client_life_peak"] = max(res["client_setup_peak"], r["client_peak"])
            res["isparse"] = r
            step(f"isparse: {_short(r)}")
        first = earlier or res["isparse"]
        F_star = first["F_star"]
        if params["solvers"]:   # dask-ml first, on the same 4 hosts (the kill run leaves 3: no nanny)
            X = y = None
            client.run(lambda: __import__("gc").collect())
            workers = sorted(client.scheduler_info()["workers"])
            step(f"making the COO partitions for dask-ml on {len(workers)} hosts, one host at a time")
            Xc, yc, cnames, _ = hosted(client, rows, workers, coo=True)
            for solver in params["solvers"]:
                r = run_peer(client, solver, Xc, yc, rows, lam, F_star, cap, Window(client, cnames))
                res[f"dask-ml {solver}"] = r
                step(f"dask-ml {solver}: {_short(r)}")
            del Xc, yc
            client.run(lambda: __import__("gc").collect())
        if params["kill"]:
            if X is None:
                step("making the CSR partitions again for the kill run")
                X, y, names, _ = hosted(client, rows, workers)
            kill_at = (first["wall_s"] - first["rounds_s"]) + first["rounds_s"] / 2
            step(f"the kill run: a host killed {kill_at:.0f} s into the fit")
            r, coef2 = fit_isparse(client, X, y, lam, params["tol"], Window(client, names), kill_at=kill_at)
            if earlier is None:
                r["same_coef"] = bool(np.array_equal(coef, coef2))
                r["max_coef_diff"] = float(np.max(np.abs(coef - coef2)))
            else:   # the earlier run's coef_ is not kept: its iterations and final suboptimality, to the last digit
                r["same_coef"] = None
                r["same_as_earlier"] = {k: (first[k], r[k]) for k in ("iterations", "final_rel", "F_star")}
            res["kill"] = r
            np.save(out_path.with_suffix(".coef.npy"), coef2)
            step(f"kill run: {_short(r)}; killed {r['killed']}; restarts {r['restarts']}; same coef_ "
                 f"{r.get('same_coef')} {r.get('same_as_earlier')}")
    except BaseException as exc:
        res["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        res["client_final_hwm"] = _status("VmHWM")
        save()
        client.close()
    return 0


def _short(r) -> str:
    t = f"{r['time']:.1f} s to eps" if r.get("reached") else "not at eps"
    return (f"{t}; fit {r['wall_s']:.0f} s; client peak {r['client_peak'] / 2**20:.0f} MiB; host peak "
            f"{r.get('peak_rss', 0) / 2**20:.0f} MiB; X moved {r.get('x_moved')} B, to client {r.get('x_to_client')} B")


# -- the benchmark's process ---------------------------------------------------------------------------------------------
def _meminfo() -> dict:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        out[k] = int(v.split()[0]) * 1024
    return out


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Guard(threading.Thread):
    """Watches the machine's memory in use; above :data:`MACHINE_LIMIT` kills the host with the largest RSS."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids, self.events, self.stop, self.most = pids, [], threading.Event(), 0

    def run(self):
        while not self.stop.wait(0.5):
            m = _meminfo()
            used = m["MemTotal"] - m["MemAvailable"]
            self.most = max(self.most, used)
            if used > MACHINE_LIMIT:
                rss = {p: _rss(p) for p in self.pids}
                pid = max(rss, key=rss.get)
                if rss[pid] == 0:
                    continue
                os.kill(pid, signal.SIGKILL)
                self.events.append({"time": time.time(), "used": used, "pid": pid, "rss": rss[pid]})
                self.pids.remove(pid)


def measure(quick: bool = False, lam: float = LAM, tol: float = TOL, solvers=("lbfgs", "admm"),
            kill: bool = True, earlier: dict | None = None) -> dict:
    import tempfile

    from pipeline.cluster.emulated import EmulatedCluster
    from pipeline.cluster.machine import available

    rows = QUICK_ROWS if quick else ROWS
    cap = QUICK_CLIENT_CAP if quick else CLIENT_CAP
    peer_cap = QUICK_PEER_CAP if quick else PEER_CAP
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    res = {"H": H, "link": LINK, "eps": EPS, "lam": lam, "tol": tol, "rows": rows, "client_cap": cap, "commit": commit,
           "peer_cap": peer_cap, "machine": machine(), "load_before": load_average(), "quick": quick,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "notes": []}
    reason = available()
    if reason or not (CGROUP / "memory.limit_in_bytes").exists():
        res["notes"].append(f"not run: needs root, ip, tc and the cgroup v1 memory controller ({reason})")
        return res
    group = CGROUP / f"isparse-item15-{os.getpid()}"
    group.mkdir()
    started = time.perf_counter()
    try:
        (group / "memory.limit_in_bytes").write_text(str(cap))
        res["cgroup_limit"] = int((group / "memory.limit_in_bytes").read_text())
        with EmulatedCluster(H, up=LINK, down=LINK, subnet=SUBNET, timeout=300.0) as cluster, \
                tempfile.TemporaryDirectory() as tmp:
            guard = Guard([p.pid for p in cluster.procs[1:]])
            guard.start()
            out = Path(tmp) / "child.json"
            params = {"cgroup": str(group), "out": str(out), "address": cluster.address, "hosts": H, "rows": rows,
                      "lam": lam, "tol": tol, "peer_cap": peer_cap, "solvers": list(solvers), "kill": kill,
                      "earlier": None if earlier is None else earlier["isparse"]}
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent),
                                                                              os.environ.get("PYTHONPATH")])))
            env["MALLOC_MMAP_THRESHOLD_"] = str(CLIENT_MMAP_THRESHOLD)
            proc = subprocess.run([sys.executable, "-m", "benchmarks.beyond_memory", "--child", json.dumps(params)],
                                  env=env)
            guard.stop.set()
            res["child_status"] = proc.returncode
            if proc.returncode < 0:
                res["notes"].append(f"the client process was killed by signal {-proc.returncode}")
            res.update(json.loads(out.read_text()) if out.exists() else {})
            if earlier is not None:   # the plain fit and the data's numbers of the earlier run
                res["earlier"] = {k: earlier.get(k) for k in ("date", "elapsed_s", "load_before", "load_after",
                                                              "make_s", "client_setup_peak", "part_bytes", "commit")}
                res["isparse"] = earlier["isparse"]
                if not kill and earlier.get("kill"):   # --no-kill: the earlier run's kill run too
                    res["kill"], res["kill_from_earlier"] = earlier["kill"], True
                for k in ("make_s", "client_setup_peak", "part_bytes", "N", "d"):
                    res.setdefault(k, earlier[k])
                if not solvers:   # --solvers '': the earlier run's dask-ml fits and what its guard did then
                    for k in earlier:
                        if k.startswith("dask-ml "):
                            res.setdefault(k, earlier[k])
                    res["peers_from_earlier"] = True
            res["guard"] = (earlier.get("guard") or [] if earlier is not None and not solvers else []) + guard.events
            res["machine_peak_used"] = guard.most
            res["dask_log_tail"] = cluster.output_tail(30)
        for name in ("memory.max_usage_in_bytes", "memory.failcnt"):
            res["cgroup_" + name.split(".", 1)[1]] = int((group / name).read_text())
        oom = (group / "memory.oom_control").read_text()
        res["cgroup_oom_kills"] = next((int(line.split()[1]) for line in oom.splitlines()
                                        if line.startswith("oom_kill ")), None)
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.2)
    res["elapsed_s"] = time.perf_counter() - started
    res["load_after"] = load_average()
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.beyond_memory", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows (development)")
    p.add_argument("--out", help="write the section and goal line into this doc (docs/benchmarks.md)")
    p.add_argument("--lam", type=float, default=LAM)
    p.add_argument("--tol", type=float, default=TOL)
    p.add_argument("--solvers", default="lbfgs,admm", help="dask-ml's solvers to run beside isparse ('' for none)")
    p.add_argument("--no-kill", action="store_true", help="skip the run with a host killed")
    p.add_argument("--json", help="also write the measured numbers here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--merge", help="an earlier run's --json: keep its isparse fit (same data), make the kill run and "
                                   "the peers")
    p.add_argument("--from-json", help="report the numbers of an earlier run's --json instead of measuring")
    a = p.parse_args(argv)
    if a.child:
        return child(json.loads(a.child))
    if a.from_json:
        res = json.loads(Path(a.from_json).read_text())
    else:
        earlier = json.loads(Path(a.merge).read_text()) if a.merge else None
        res = measure(a.quick, a.lam, a.tol, tuple(s for s in a.solvers.split(",") if s), not a.no_kill, earlier)
    if a.json and not a.from_json:
        Path(a.json).write_text(json.dumps(res, default=float, indent=1))
    publish(res, report, a.out, title=TITLE, after="14")
    return 0



# -- the report ----------------------------------------------------------------------------------------------------------
def _mib(b) -> str:
    return f"{b / 2**20:,.0f}"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _met_time(goals: list) -> str:
    """The time goal over the peers: met, not met, or not shown (a peer stopped before ε, at its cap or failing,
    sooner than 5× isparse's time to ε)."""
    if all(g is True for g in goals):
        return "**met**"
    if any(g is False for g in goals):
        return "**not met**"
    return "**not shown** (dask-ml did not reach ε: it stopped, at its cap or failing, before 5× isparse's time)"


def _time(r) -> str:
    if r.get("reached"):
        return f"{r['time']:.1f}"
    return f"> {r.get('elapsed_s', r.get('wall_s', 0)):.0f} (not at ε)"


def report(res: dict, commit: str = "") -> tuple[str, list[str]]:
    """(the goal line, the section's lines) of ``res``."""
    head = f"## {TITLE}"
    cmd = "python -m benchmarks.beyond_memory" + (" --quick" if res.get("quick") else "")
    ours = res.get("isparse")
    if ours is None:
        why = "; ".join(res["notes"] + ([res["error"]] if res.get("error") else [])) or "nothing ran"
        return f"- **{TITLE}** (`{cmd}`): {why}.", [head, "", why + "."]
    d, N = res["d"], res["N"]
    parts = (res.get("earlier") or {}).get("part_bytes") or res["part_bytes"]   # those of isparse's fit
    x_bytes = sum(parts.values())
    cb = client_bound(d)
    client_peak = ours["client_life_peak"]
    hosts_ok = all(ours["peaks"][w] <= host_bound(b) for w, b in parts.items() if w in ours["peaks"])
    x_zero = ours["x_moved"] == 0 and ours["x_to_client"] == 0
    peers = [k for k in ("dask-ml lbfgs", "dask-ml admm") if k in res]
    host_peak = max(ours["peaks"].values())
    m = res["machine"]

    def peer_text(k):
        r = res[k]
        t = _time(r)
        speed = (f"{r['time'] / ours['time']:.2f}× isparse's time" if r.get("reached") and ours.get("reached")
                 else (f"more than {r['elapsed_s'] / ours['time']:.2f}× isparse's time to ε" if ours.get("reached")
                       else "–"))
        pk = r.get("peak_rss")
        mem = f"peak {_mib(pk)} MiB a host (isparse's {host_peak / pk:.2f}× it)" if pk else "peak –"
        return f"{k} {t} s ({speed}; {r['stopped']}), {mem}"

    goal_time = []   # True, False, or None: not shown (the peer never reached ε, and not 5× isparse's time)
    goal_mem = []
    for k in peers:
        r = res[k]
        if ours.get("reached"):
            if r.get("reached"):
                goal_time.append(r["time"] / ours["time"] >= 5)
            else:
                goal_time.append(True if r["elapsed_s"] / ours["time"] >= 5 else None)
        if r.get("peak_rss"):
            goal_mem.append(host_peak <= r["peak_rss"] / 3)
    kill = res.get("kill")
    kill_text = "not run"
    if kill is not None:
        kill_text = (f"host {kill['killed'].get('worker', '?')} killed (kill -9) {kill['killed'].get('at_s', 0):.0f} s "
                     f"into the fit; worker_restarts = {kill['restarts']}; the fit "
                     f"{'ended' if kill.get('iterations') else 'failed'} in {kill['wall_s']:.0f} s ("
                     f"{kill.get('time', float('nan')):.0f} s to ε), ")
        if kill.get("same_coef") is not None:
            kill_text += (f"at coef_ {'equal, bit for bit, to' if kill['same_coef'] else 'NOT equal to'} the fit's "
                          f"without the kill (max |Δ| {kill['max_coef_diff']:.3g})")
        else:   # compared with an earlier run's fit (--merge): its coef_ was not kept
            same = kill["same_as_earlier"]
            equal = all(a == b for a, b in same.values())
            kill_text += ("after the same iterations with the same final relative suboptimality and F*, to the last "
                          "digit, as the fit without the kill (" if equal else "NOT at the fit without the kill's "
                          "numbers (") + ", ".join(f"{k} {a!r} / {b!r}" for k, (a, b) in same.items()) + \
                ": the earlier run's coef_ was not kept, so coef_ itself was compared bit for bit in --quick mode only)"
    elif res.get("kill_elsewhere"):   # made in another run (said there)
        kill_text = res["kill_elsewhere"]
    elif res.get("error"):
        kill_text = f"not reached ({res['error']})"
    goal = (f"- **{TITLE}** (`{cmd}`): {N:,} click rows, d = 2^{int(np.log2(d))}, X {x_bytes / 2**30:.2f} GiB as CSR "
            f"on {res['H']} emulated hosts at {res['link']}, the client capped at {_mib(res['client_cap'])} MiB, λ = "
            f"{res['lam']:g}, ε = {res['eps']:g}: the fit finished, isparse {_time(ours)} s to ε; the client's peak "
            f"RSS {_mib(client_peak)} MiB (bound {_mib(cb)} MiB: {_met(client_peak <= cb)}); the hosts' peak RSS "
            f"{', '.join(_mib(ours['peaks'][w]) for w in sorted(ours['peaks']))} MiB (bound 2 × partition + 300 MB = "
            f"{', '.join(_mib(host_bound(parts[w])) for w in sorted(parts))} MiB: {_met(hosts_ok)}); X bytes between "
            f"hosts or to the client {ours['x_moved'] + ours['x_to_client']} ({_met(x_zero)}); "
            + "; ".join(peer_text(k) for k in peers)
            + (f" (≥ 5× faster: {_met_time(goal_time)}; ≤ 1/3 of the peak memory a host: {_met(all(goal_mem))})"
               if peers else "")
            + f"; {kill_text}.")
    table = ["| method | time to ε (s) | stopped | evaluations / rounds to ε | fit wall time (s) | client peak RSS (MiB) "
             "| peak RSS per host (MiB) | peak increase a host (MiB) | X MB between hosts | X MB to the client | all MB "
             "between hosts |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, r in [(ours["label"], ours)] + [(k, res[k]) for k in peers]:
        rounds = f"{r['rounds']:,}" if r.get("reached") else f"– ({r.get('evaluations', r.get('iterations'))})"
        peaks = ", ".join(_mib(r["peaks"][w]) for w in sorted(r["peaks"])) if r.get("peaks") else "–"
        table.append(f"| {label} | {_time(r)} | {r.get('stopped', 'tol reached')} | {rounds} | {r['wall_s']:.0f} | "
                     f"{_mib(r['client_peak'])} | {peaks} | {_mib(r.get('peak_increase', 0))} | "
                     f"{r.get('x_moved', 0) / 1e6:.3g} | {r.get('x_to_client', 0) / 1e6:.3g} | "
                     f"{r.get('moved', 0) / 1e6:.3g} |")
    guard = res.get("guard") or []
    lines = [
        head, "",
        f"`{cmd}` (its own command; one run on {res['date']} at {res.get('commit') or commit}, {m['cpu']}, "
        f"{m['cores']} cores, {m['ram']}, {res['elapsed_s'] / 60:.1f} min; load average {res['load_before']} before, "
        f"{res['load_after']} after; the machine was shared with other work during the run)"
        + (f", with `--merge` of an earlier run's isparse fit (the run of {res['earlier']['date']} at "
           f"{res['earlier'].get('commit', '?')}, {res['earlier']['elapsed_s'] / 60:.1f} min, load average "
           f"{res['earlier']['load_before']} before): isparse's fit "
           + ("and the fit with a host killed are that run's (the emulated hosts' Dask workers run without a nanny: "
              "the killed host stays dead, so dask-ml's fits were made in a run of their own on a fresh cluster of "
              f"{res['H']})" if res.get("kill_from_earlier") else "without the kill is that run's")
           + (" and dask-ml's fits are that run's too (its memory guard left one host of four after them, so this "
              "run made the fit with a host killed on a fresh cluster of the same rows: the same seed and partitions, "
              "made on the hosts again)." if res.get("peers_from_earlier") else
              ", dask-ml's fits this run's, on the same rows (the same seed and partitions, made on the hosts "
              "again).") if res.get("earlier") else "."),
        "",
        f"Click data of {N:,} rows (`isparse.data.clicks.click_data(rows, partitions={res['H']}, d=2**20, nnz={NNZ}, "
        f"alpha={ALPHA}, positives={POSITIVES}, seed={SEED})`) made on {res['H']} `cluster=emulated` hosts (Dask worker "
        f"processes of 1 thread, each in its own network namespace, links shaped to {res['link']} each way for the whole "
        f"run), one partition a host, each made by a task on its host and persisted there (checked with `who_has`): "
        f"X is {x_bytes / 2**30:.2f} GiB as CSR (data + indices + indptr; per host "
        f"{', '.join(_mib(parts[w]) for w in sorted(parts))} MiB), made in {res['make_s']:.0f} s. The client, the "
        f"process that makes every `fit` call, runs in a cgroup v1 memory group of its own with `memory.limit_in_bytes` "
        f"= {_mib(res['client_cap'])} MiB (a hard limit; the group is removed afterwards); the hosts are not capped. "
        f"λ = {res['lam']:g}, no intercept, ε = {res['eps']:g} on F − F* ≤ ε (F(0) − F*), F* = {ours['F_star']:.10g} "
        "from isparse's own reference solve (x* by Newton-CG on the hosts).",
        "",
        f"- **isparse**: `isparse.LogisticRegression(lam, algorithm=\"isega\", step_rule=\"paper\", fit_intercept=False, "
        f"tol={res['tol']:g}, client=client).fit(X, y)` (one logical worker per partition, τ = 1/n); time to ε from "
        "`history_` (`isparse.engines.to_eps.to_eps`: the rounds' wall time up to the first record at ε, records every "
        "10 iterations, their objective evaluations excluded); the fit's wall time includes the set-up (shards, "
        "constants, the Newton-CG reference solve on the hosts) and the rounds after ε up to `tol`.",
    ]
    for k in peers:
        solver = k.split()[-1]
        lines.append(
            f"- **{k}**: `dask_ml.linear_model.LogisticRegression(solver=\"{solver}\", C=1/(λN), fit_intercept=False"
            + (", tol=1e-14, solver_kwargs={\"normalize\": False})`" if solver == "lbfgs" else
               ", solver_kwargs={\"abstol\": 1e-14, \"reltol\": 1e-14})` (its own stopping tests off: it runs to ε or "
               "the cap)")
            + " on the same rows made again on the same hosts as pydata `sparse.COO` chunks (isparse's CSR released "
            "first; dask's tensordot asserts 2-D for scipy.sparse chunks), the same objective ×N; "
            + ("time to ε from its own loss at each evaluation" if solver == "lbfgs" else
               "time to ε from F of its consensus iterate z, evaluated on the hosts after each ADMM iteration with the "
               "clock paused")
            + f"; capped at {res['peer_cap'] / 60:.0f} min (its compute calls wait on `client.compute` with that "
            "deadline, so the cap interrupts an evaluation in flight).")
    lines += ["", *table, "",
              f"- **the client's memory**: peak RSS (`VmHWM` of the capped process) {_mib(client_peak)} MiB over its "
              f"life up to the end of isparse's fit ({_mib(res['client_setup_peak'])} MiB after connecting and making "
              f"the data, {_mib(ours['client_peak'])} MiB during the fit, its high-water mark reset just before); bound "
              f"300 MB + 16·d·8 B = {_mib(cb)} MiB: {_met(client_peak <= cb)}. Over the whole child process (the "
              f"dask-ml fits included) {_mib(res.get('client_final_hwm', 0))} MiB; the memory group's own peak "
              f"(`memory.max_usage_in_bytes`, page cache included) {_mib(res.get('cgroup_max_usage_in_bytes', 0))} "
              f"MiB, `memory.failcnt` {res.get('cgroup_failcnt')}, OOM kills {res.get('cgroup_oom_kills')}.",
              "- **the hosts' memory** during isparse's fit (`VmHWM` reset just before; item 14's `Window`): "
              + ", ".join(f"{_mib(ours['peaks'][w])} MiB (RSS at the start {_mib(ours['rss0'][w])}, bound "
                          f"{_mib(host_bound(parts[w]))})" for w in sorted(parts) if w in ours["peaks"])
              + f": {_met(hosts_ok)}.",
              f"- **X's bytes**: from the Dask workers' `transfer_outgoing_log` (emptied before each fit), the keys of X "
              f"and of the blocks it is made of: isparse {ours['x_moved']} B between hosts and {ours['x_to_client']} B "
              f"to the client ({_met(x_zero)}); all keys between hosts {ours['moved'] / 1e6:.3g} MB."
              + "".join(f" {k}: X {res[k].get('x_moved', 0) / 1e6:.4g} MB between hosts (mostly "
                        f"{', '.join(f'`{n}`' for n in res[k].get('moved_kinds', {})) or '–'}), "
                        f"{res[k].get('moved', 0) / 1e6:.4g} MB in all." for k in peers),
              f"- **isparse's fit**: {ours['iterations']:,} iterations, {ours['rounds_s']:.0f} s of rounds, "
              f"{ours['wall_s']:.0f} s in all; final relative suboptimality {ours['final_rel']:.2g}; message bytes "
              f"up / down {ours['up'] / 1e6:.4g} / {ours['down'] / 1e6:.4g} MB"
              + (f" ({ours['up_eps'] / 1e6:.4g} / {ours['down_eps'] / 1e6:.4g} MB to ε)." if ours.get("reached")
                 else ".")]
    for k in peers:
        r = res[k]
        lines.append(f"- **{k}**: {r['evaluations']} evaluations / iterations in {r['elapsed_s']:.0f} s on the clock "
                     f"({r['wall_s']:.0f} s of wall time); stopped: {r['stopped']}; relative suboptimality: last "
                     f"{r['final_rel']:.3g}, best {r['best_rel']:.3g}"
                     + (f"; raised in {r['where']}" if r.get("where") else "")
                     + (f"; the window could not be read: {r['window_error']}" if r.get("window_error") else "") + ".")
    if peers:
        lines.append(f"- **goals** beside dask-ml: ≥ 5× faster to ε: {_met_time(goal_time)}; ≤ 1/3 of dask-ml's peak "
                     f"memory per host: {_met(all(goal_mem))} (isparse's largest host {_mib(host_peak)} MiB; "
                     + ", ".join(f"{k} {_mib(res[k]['peak_rss'])} MiB" for k in peers if res[k].get("peak_rss")) + ").")
    if res.get("kill_run"):   # made in a run of its own (--merge of several runs)
        kr = res["kill_run"]
        kill_text += (f" (the run of {kr['date']} at {kr.get('commit', '?')}, {kr['elapsed_s'] / 60:.1f} min; its "
                      f"client's memory group: peak {_mib(kr['cgroup_max_usage_in_bytes'])} MiB, `memory.failcnt` "
                      f"{kr['cgroup_failcnt']}, OOM kills {kr['cgroup_oom_kills']}; the emulated hosts' Dask workers "
                      "run without a nanny, so the killed one stays dead: the cluster has 3 hosts after it, and "
                      "dask-ml's fits were made on a fresh cluster of 4 in a run of their own)")
    lines.append(f"- **a host killed mid-fit**: {kill_text}"
                 + (f"; the client's peak RSS in that fit {_mib(kill['client_peak'])} MiB; X bytes between hosts "
                    f"{kill['x_moved'] / 1e6:.4g} MB, to the client {kill['x_to_client'] / 1e6:.4g} MB ("
                    + ("Dask made the lost partition again from its graph on the host that took it over: no X byte "
                       "moved" if kill["x_moved"] == 0 else "the lost partition, made again by Dask, moved")
                    + f"); the hosts' peak RSS {', '.join(_mib(v) for _, v in sorted(kill['peaks'].items()))} MiB "
                    "(the host that took the lost partition holds two)." if kill else "."))
    lines.append(f"- **the machine**: at most {res.get('machine_peak_used', 0) / 2**30:.1f} GiB in use (a guard kills "
                 f"the largest host above {MACHINE_LIMIT / 2**30:.0f} GiB): "
                 + ("; ".join(f"killed pid {g['pid']} ({_mib(g['rss'])} MiB) at {g['used'] / 2**30:.1f} GiB in use"
                              for g in guard) if guard else "never triggered") + ".")
    for note in res["notes"] + ([f"the client process: {res['error']}"] if res.get("error") else []) + NOTES:
        lines.append(f"- {note}")
    return goal, lines


if __name__ == "__main__":
    sys.exit(main())
