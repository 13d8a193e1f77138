"""Item 12: the crossover map, time to ε measured end to end on emulated machines (issue 32, items 4 and 5).

Per cell (data set, H hosts, link), on one ``cluster=emulated`` cluster of H hosts (``pipeline.cluster.emulated``:
H Dask worker processes, 1 thread each, each in its own network namespace behind a veth pair with a tc tbf of the
link's rate in each direction; the scheduler and the master in the root namespace) with n = 2H logical workers
(two per host), each method runs once from x⁰ = 0 until F − F* ≤ ε (F(x⁰) − F*), ε = 1e-6, or its time cap:

- **GD**: ``algorithm=gd`` (every block, γ = 1/L with L = max_i L_i, the theorem's rule);
- **ISEGA τ = 1/n**: ``algorithm=isega tau=auto step.rule=paper`` (the paper's 4× stepsize), values as float64;
- **ISEGA τ = 1/n natural7**: the same with ``messages.codec=natural7`` (8 bits a value);
- **ISEGA natural7, natural7 down**: the same with a compressed downlink, ``messages.downlink=natural7`` (error
  feedback in the model space, EF21-P, docs/algorithms.md §9: every round the master sends x − w in 8 bits a value,
  1/8 of the dense downlink's bytes; its contraction α = 8/9 costs few iterations);
- **ISEGA natural7, randk·natural7 down** (the time check only): ``messages.downlink=randk:0.125+natural7``, 1/8 of
  the coordinates of x − w, the same ones to every host from a shared seed, in 8 bits: 1/64 of the dense
  downlink's bytes, but α = 1/9, which the iterations pay for when the uplink's compression costs little (small
  n);
- **ISEGA τ=1/H natural7, natural7 down** (the time check only): the issue's τ = 1/H, each of a host's two workers
  sending 2/n of the blocks (``tau=2/n``), natural7 both ways;
- **DIANA**: ``algorithm=diana`` (Rand-K, τ = 1/n, its own stepsize);
- **dask-ml L-BFGS**: ``dask_ml.linear_model.LogisticRegression(solver="lbfgs")`` (dask-glm's L-BFGS: scipy's
  L-BFGS-B on the client, every evaluation of the loss and gradient a Dask computation over the chunks) with the
  same objective (C = 1/(λN), no intercept, no normalization) and one chunk of rows per host, placed on that host
  (pydata ``sparse.COO`` chunks: dask-glm computes on them without densifying).

Our methods run on ``isparse.engines.dask.DaskPool`` (the shards are placed before the link is shaped; no recovery
snapshots, ``snapshot_every=0``, since the peer has none either); their time to ε is ``time_to_eps_s`` of the run's
records (``isparse.engines.to_eps``: the rounds' wall time from the first iteration to the first logged iterate at
ε, the objective's evaluation excluded; run without the theorem's bound, so that no record fetches the workers'
Lyapunov memory, which asks every host for its memory term), their up and down bytes those of the records (the values that cross the
links). They run with ``messages.aggregate=host`` (where the library has that key: the page says which ran):
a host sends one float64 sum of its two workers' messages, on the union of their coordinates (GD: one d-vector;
ISEGA and DIANA in float64: the union of two masks), except with natural7 (a sum of coded values is not a coded
value: each worker's coded message goes up), and x goes down once per host; the records' bytes then count what
crosses each host's link, as a deployed system (dask-glm, Spark, a parameter server) would send. dask-ml's time is
the wall time from the start of ``fit`` to the end of the first evaluation at ε (its loss, computed by dask-glm
as part of every evaluation, is what is checked: nothing is added to its rounds), its rounds the evaluations.
For every method the bytes that crossed each host's link during the run (IP level: headers, Dask's messages and
heartbeats included) are read from the hosts' interface counters inside each worker's namespace (psutil's
``net_io_counters``, the counter Dask's own system monitor reports as ``host_net_io``), summed over the hosts.
A run that does not reach ε within its cap is reported as ``> cap s`` with where it stood.
F* comes from the library's reference solve (Newton-CG to a gradient residual near machine precision; not timed).

The data: ``benchmarks.powerlaw.power_law_logistic(N=20000, d, nnz_per_row=40, alpha=1, seed=0)`` (feature k in a
row with probability ∝ (k + 1)^-1, about 35 distinct features a row, unit-norm rows, labels from a planted sparse
model with noise), λ = 1e-2 (chosen so that the runs fit their caps on 2 cores), blocks of d/1000 coordinates
(m = 1000); a9a with λ = 1e-3 and blocks of 1. What to keep in mind when reading the numbers:

- each tbf lets a burst of its bucket (5 ms of traffic, at least 8 kB, ``pipeline.cluster.shaping``) through at
  line speed after an idle gap: 8 kB at 10 Mbit, a small share of a round that moves x (80 kB at d = 10⁴), but
  62.5 kB at 100 Mbit, most of such a message (the planner's check counts it as ``plan.link.burst``); a 1 ms bucket
  lost throughput on the loaded machine (40.8 of 50 Mbit/s), and before 2026-12-03 the bucket was 64 kB at every
  rate;
- dask-glm's gradient is ``X.T.dot(p - y)``: for sparse chunks dask's ``tensordot`` concatenates the chunks along
  the contracted axis, so every evaluation moves the other hosts' (transposed) chunks of X to one host: most of
  dask-ml's link bytes are X, not β (seen in the workers' transfer logs);
- pydata ``sparse`` compiles its kernels with numba on first use in each worker process: one evaluation is run,
  unshaped, before dask-ml's clock starts;
- GD takes the theorem's γ = 1/L (L = max_i L_i), ISEGA the paper's 4× stepsize (``step.rule=paper``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .common import load_average
from .crossover_grid import LAMBDA, LAMBDA_GOAL_GD, LAMBDA_GOAL_LAM
from .crossover_grid import (ALPHA, DEFAULT, DOWN, DOWN_H, DOWN_RANDK, EPS, FIGURE, FULL, LAM_NAMED, LAM_SYN, LBFGS, LINKS,
                             METHODS, N_ROWS, NNZ, PREDICTION_BAND, QUICK, RECOMMENDATION_BAND, TIME,
                             WORKERS_PER_HOST, Grid, d_label, grid_from)
from .crossover_report import before_of, lambda_verdicts, plot, report, time_verdicts

LOG_EVERY = 5
SUBNET = "10.79.0.0/16"
CACHE = "outputs/bench_cache"


# -- the data --------------------------------------------------------------------------------------------------------
def dataset(name_or_d, rows: int = N_ROWS):
    """(Dataset, lambda): the power-law synthetic set of dimension d (an int) or a named LIBSVM set."""
    if isinstance(name_or_d, str):
        from .common import load

        return load(name_or_d), LAM_NAMED
    from .powerlaw import power_law_logistic

    return power_law_logistic(N=rows, d=int(name_or_d), nnz_per_row=NNZ, alpha=ALPHA, seed=0), LAM_SYN


def setups(data, lam: float, n: int, reference=None, methods=()) -> dict:
    """{label: RunSetup} of our methods on ``data`` (one reference solve shared), ``messages.aggregate=host``; only the
    labels in ``methods`` when given."""
    from isparse import RunSpec, build

    common = {"workers.n": n, "problem.lam": lam, "blocks.size": max(1, data.d // 1000), "seed": 0}
    common["messages.aggregate"] = "host"
    out = {}
    for label, algorithm, keys in METHODS:
        if algorithm is None or (methods and label not in methods):
            continue
        spec = RunSpec.from_dict({"algorithm": algorithm, **common, **keys})
        out[label] = build(spec, data=data, reference=reference, cache_dir=CACHE if reference is None else None)
        reference = out[label].reference
    return out


# -- counters ----------------------------------------------------------------------------------------------------------
def _nic_bytes():
    """(bytes sent, bytes received) of this process's network namespace's interfaces other than lo."""
    import psutil

    sent = recv = 0
    for nic, c in psutil.net_io_counters(pernic=True).items():
        if nic != "lo":
            sent, recv = sent + c.bytes_sent, recv + c.bytes_recv
    return sent, recv


def link_bytes(client) -> tuple[int, int]:
    """(up, down) bytes so far summed over the hosts: what their workers' namespaces sent and received."""
    got = client.run(_nic_bytes)
    return sum(v[0] for v in got.values()), sum(v[1] for v in got.values())


# -- one run -----------------------------------------------------------------------------------------------------------
def make_pool(client, setup):
    """A DaskPool of ``client`` for ``setup``: no snapshots (the peer keeps none), host aggregation as configured."""
    from isparse.engines.dask import DaskPool

    host = getattr(setup.spec.messages, "aggregate", "worker") == "host"
    return DaskPool(client, *setup.pool_args(), snapshot_every=0, **({"aggregate": True} if host else {}))


def cluster_round_terms(client, setup) -> dict:
    """The round's floor and compute of ``setup`` measured on the emulated hosts with their links unshaped
    (:func:`isparse.planning.measure_round_terms` on a DaskPool: 10 warm-up rounds, 100 timed): what ``isparse-plan``'s
    probes measure on the cluster it runs on, and what ``plan.link.latency`` is for. Measured per cell, just before
    its runs, so that it sees the machine's load as they do."""
    from isparse.planning import measure_round_terms

    pool = make_pool(client, setup)
    try:
        t = measure_round_terms(setup, rounds=100, log_every=10, round_trip_s=0.0, pool=pool)
    finally:
        pool.close()
    return asdict(t)     # JSON-ready; planner_check makes the RoundTerms again


def run_ours(client, cluster, setup, link, cap: float) -> dict:
    """One run of ``setup`` on a DaskPool of ``client``, the links shaped as ``link`` (up, down) for the run."""
    from isparse import engines
    from isparse.engines.to_eps import to_eps

    pool = make_pool(client, setup)
    cluster.shape(up=link[0], down=link[1])
    try:
        up0, down0 = link_bytes(client)
        started = time.perf_counter()

        def hook(loop):
            recs = loop.result.records
            if loop.t > 0 and recs[-1]["step"] == loop.t and recs[-1]["subopt"] <= EPS * recs[0]["subopt"]:
                return False
            return time.perf_counter() - started < cap

        # no bound: with one, every record of ISEGA would fetch the workers' Lyapunov memory, sending x* to every
        # host (d values a host and record on the shaped links, which a deployed run does not send)
        res = engines.run(setup.method, pool, setup.problem, setup.reference, None, x0=setup.x0, max_iter=10**9,
                          tol=0.0, log_every=LOG_EVERY, on_iteration=hook)
        up1, down1 = link_bytes(client)
    finally:
        cluster.shape(up=None, down=None)
        pool.close()
    recs = res.records
    hit = to_eps(recs, EPS)
    last = recs[-1]
    out = {"reached": hit is not None, "wall_s": float(last["wall_s"]), "iterations": int(last["step"]),
           "final_rel": float(last["subopt"] / recs[0]["subopt"]), "link_up": up1 - up0, "link_down": down1 - down0,
           "up_total": float(last["uplink_bytes"]), "down_total": float(last["downlink_bytes"])}
    if hit is not None:
        out.update(time=hit.time_s, rounds=hit.rounds, up=float(hit.uplink_bytes), down=float(hit.downlink_bytes))
    else:
        out["stopped"] = "cap"
    return out


class _Stop(Exception):
    pass


def row_cuts(client, data) -> list:
    """(worker, lo, hi): one contiguous range of the data's rows per Dask worker, workers by address."""
    workers = sorted(client.scheduler_info()["workers"])
    cuts = np.linspace(0, data.N, len(workers) + 1).astype(int)
    return [(w, int(cuts[k]), int(cuts[k + 1])) for k, w in enumerate(workers)]


def chunked(client, data):
    """X (sparse.COO chunks) and y ({0, 1}) as dask arrays of one contiguous chunk of rows per host, each chunk
    placed on its host's worker."""
    import dask.array as da
    import sparse

    xs, ys, futures = [], [], []
    meta = sparse.COO.from_numpy(np.zeros((0, 0)))
    for w, lo, hi in row_cuts(client, data):
        # hash=False: keys of this fit's own (content-hashed keys are shared with anything equal on the client)
        fx = client.scatter(sparse.COO.from_scipy_sparse(data.A[lo:hi]), workers=[w], direct=True, hash=False)
        fy = client.scatter((data.b[lo:hi] > 0).astype(float), workers=[w], direct=True, hash=False)
        futures += [fx, fy]
        xs.append(da.from_delayed(fx, shape=(hi - lo, data.d), dtype=float, meta=meta))
        ys.append(da.from_delayed(fy, shape=(hi - lo,), dtype=float, meta=np.zeros(0)))
    return da.concatenate(xs), da.concatenate(ys), futures


def run_lbfgs(client, cluster, data, lam: float, F_star: float, link, cap: float, Xy=None, at_start=None) -> dict:
    """dask-ml's LogisticRegression(solver="lbfgs") fit on the hosts' chunks, the links shaped as ``link``: the time
    and evaluations to ε from its own loss values, the link bytes from the hosts' counters.

    ``Xy``: (X, y) Dask Arrays already placed (``sparse.COO`` chunks, y in {0, 1}) to fit instead of :func:`chunked`'s
    (they are left in place after the fit); ``at_start``: called with no argument just before the clock starts (after
    the warm-up evaluation, the links shaped), for a caller's own counters (item 14).

    dask-glm computes with Dask's current client (``distributed.get_client``), which is not necessarily ``client``:
    a ``with Client(...)`` still open elsewhere in the process (a test session's LocalCluster) is the current one, and
    its scheduler does not know this fit's chunks, so every evaluation was cancelled with "lost dependencies" (stop
    37's CI). The fit runs with ``client`` made current."""
    with client.as_current():
        return _lbfgs_once(client, cluster, data, lam, F_star, link, cap, Xy, at_start)


def _lbfgs_once(client, cluster, data, lam: float, F_star: float, link, cap: float, Xy=None, at_start=None) -> dict:
    import dask_glm.algorithms as alg
    from dask_ml.linear_model import LogisticRegression

    X, y, futures = chunked(client, data) if Xy is None else (*Xy, [])
    F0 = float(np.log(2.0)) - F_star            # F(0) = log 2 for the logistic loss
    evals = []
    original = alg.compute
    state = {}

    def counting_compute(*args, **kwargs):
        out = original(*args, **kwargs)
        if len(args) == 2:          # compute(loss_fn, gradient_fn) inside lbfgs' compute_loss_grad
            now = time.perf_counter()
            evals.append((now - state["t0"], float(np.asarray(out[0])) / data.N - F_star))
            if evals[-1][1] <= EPS * F0:
                raise _Stop("at eps")
            if now - state["t0"] > cap:
                raise _Stop("cap")
        return out

    # one evaluation before the clock, links unshaped: pydata sparse compiles its kernels (numba) in each worker
    # process on first use, seconds that a warm user process would not pay again
    from dask_glm.families import Logistic
    from dask_glm.utils import scatter_array

    beta = scatter_array(np.zeros(data.d), client)
    original(Logistic.pointwise_loss(beta, X, y), Logistic.pointwise_gradient(beta, X, y))
    model = LogisticRegression(solver="lbfgs", C=1.0 / (lam * data.N), fit_intercept=False, max_iter=100_000,
                               tol=1e-14, solver_kwargs={"normalize": False})
    cluster.shape(up=link[0], down=link[1])
    alg.compute = counting_compute
    stopped = "scipy's L-BFGS-B stopped (its factr / pgtol tests)"
    try:
        if at_start is not None:
            at_start()
        up0, down0 = link_bytes(client)
        state["t0"] = time.perf_counter()
        try:
            model.fit(X, y)
        except _Stop as why:
            stopped = str(why)
        total = time.perf_counter() - state["t0"]
        up1, down1 = link_bytes(client)
    finally:
        alg.compute = original
        cluster.shape(up=None, down=None)
        client.cancel(futures)
    sub = np.array([v for _, v in evals])
    ok = np.nonzero(sub <= EPS * F0)[0]
    out = {"reached": bool(ok.size), "wall_s": total, "iterations": len(evals), "stopped": stopped,
           "final_rel": float(sub[-1] / F0) if sub.size else float("nan"),
           "link_up": up1 - up0, "link_down": down1 - down0}
    if ok.size:
        k = int(ok[0])
        out.update(time=evals[k][0], rounds=k + 1)
    return out


# -- the map -----------------------------------------------------------------------------------------------------------
def measure(quick: bool = False, grid: Grid | None = None, figure: str | None = "docs/_static/crossover.png",
            before: dict | None = None) -> dict:
    """Run the cells of ``grid`` (default :data:`DEFAULT`, :data:`QUICK` with ``quick``); the figure is written to
    ``figure`` (None: none); ``before`` (:func:`before_of` of an earlier map) is kept to be shown beside this one.
    Returns the cells, the grid and what was left out."""
    from distributed import Client

    from pipeline.cluster.emulated import EmulatedCluster
    from pipeline.cluster.machine import available

    grid = grid or (QUICK if quick else DEFAULT)
    reason = available()
    res = {"grid": {k: v for k, v in asdict(grid).items()}, "eps": EPS, "cells": [], "notes": [],
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
           "aggregate": "host", "rounds_via": "stream", "before": before,
           "workers_per_host": WORKERS_PER_HOST, "load_before": load_average()}
    if reason:
        res["notes"].append(f"not run: cluster=emulated needs root, ip and tc ({reason})")
        return res
    skip = {(int(d), link) for d, link in grid.skip}
    todo = [(d, link) for d in grid.d for link in grid.links if (int(d), link) not in skip] \
        + [(name, link) for name, link in grid.named]
    for H in grid.H:
        n = WORKERS_PER_HOST * H
        with EmulatedCluster(H, up=None, down=None, subnet=SUBNET, timeout=120.0) as cluster:
            if cluster.removed_stale:
                res["notes"].append(f"removed what a killed earlier run left: {', '.join(cluster.removed_stale)}")
            client = Client(cluster.address, direct_to_workers=True, timeout=120)
            try:
                cluster.wait_for_workers(client)
                for source, lam in ((s, lam) for s in dict.fromkeys(s for s, _ in todo)
                                    for lam in (grid.lams if grid.lams and not isinstance(s, str) else (None,))):
                    t0 = time.perf_counter()
                    data, lam0 = dataset(source, grid.rows)
                    lam = lam0 if lam is None else lam
                    built = setups(data, lam, n, methods=tuple(grid.methods))
                    F_star = next(iter(built.values())).reference.F_star
                    problem = next(iter(built.values())).problem
                    setup_s = time.perf_counter() - t0
                    print(f"[item12] {data.name} lambda={lam:g}: data and reference solve {setup_s:.1f} s", flush=True)
                    for s, link_name in todo:
                        if s != source:
                            continue
                        link = LINKS[link_name]
                        cell = {"H": H, "n": n, "data": data.name, "d": data.d, "N": data.N, "lam": lam,
                                "kappa": problem.L / problem.mu,   # L = max_i L_i over mu (= lambda)
                                "link": link_name, "up": link[0], "down": link[1], "load_before": load_average(),
                                "runs": {}, "setup_s": setup_s,
                                "d_label": source if isinstance(source, str) else d_label(int(source))}
                        cell["cluster_terms"] = {label: cluster_round_terms(client, setup)
                                                 for label, setup in built.items() if grid.runs(label, link_name)}
                        for label, _, _ in METHODS:
                            if not grid.runs(label, link_name):
                                continue
                            t0 = time.perf_counter()
                            try:
                                if label == LBFGS:
                                    r = run_lbfgs(client, cluster, data, lam, F_star, link, grid.cap)
                                else:
                                    r = run_ours(client, cluster, built[label], link, grid.cap)
                            except Exception as e:   # one method failing must not lose the cell: said in the table
                                r = {"reached": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
                            r["elapsed_s"] = time.perf_counter() - t0
                            cell["runs"][label] = r
                            print(f"[item12] H={H} {data.name} lambda={lam:g} {link_name} {label}: "
                                  + (f"{r['time']:.2f} s, {r['rounds']} rounds" if r["reached"] else
                                     f"not at eps ({r.get('error') or r.get('stopped', '')})")
                                  + f" ({r['elapsed_s']:.0f} s)", flush=True)
                        cell["load_after"] = load_average()
                        cell.update(summarize(cell, grid.cap))
                        cell["planner"] = planner_check(built, cell)
                        res["cells"].append(cell)
                    del built, data
            finally:
                client.close()
    res["load_after"] = load_average()
    if figure and res["cells"]:
        res["figure"] = plot(res, figure)
    return res


def _commit() -> str:
    """The checkout's short commit (what the measured code was)."""
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent).stdout.strip()


def planner_check(built: dict, cell: dict) -> dict:
    """What ``isparse-plan``'s link model (:func:`isparse.planning.predict_setup_time`) predicts for each of our methods
    of ``cell``, without the emulator, against the measured times.

    The model's inputs: the links' rates and token-bucket depths (the emulator's
    :func:`pipeline.cluster.shaping.bucket_bytes`, ``plan.link.burst``); the round's floor and each worker's
    compute measured on the same hosts with the links unshaped, just before the cell's runs
    (:func:`cluster_round_terms`: ``plan.link.latency``, what ``isparse-plan``'s probes measure on the cluster they
    run on); the iterations of the planner's calibration run (``plan.link.calibrate``: an in-process run of the
    configuration to ε), which are the rounds to ε of the cell's run (the Dask engine's iterates are the in-process
    engine's). So what is checked is the model of a shaped round's time: floor + compute + bytes beyond the burst ÷
    rate in each direction, at least each direction's bytes ÷ rate, and the run's start (the probe's warm-up rounds
    beyond as many steady ones). A method whose run did not reach ε is not covered. Returned: per method the
    predicted and measured seconds and their ratio; the recommended method (the argmin of the predicted time over
    the covered ones) and whether its measured time is within :data:`RECOMMENDATION_BAND` of the fastest measured
    covered one."""
    from isparse.planning import RoundTerms, predict_setup_time
    from pipeline.cluster.shaping import bucket_bytes, rate_bits

    runs, out = cell["runs"], {"methods": {}}
    up, down = rate_bits("cluster.link.up", cell["up"]), rate_bits("cluster.link.down", cell["down"])
    for label, setup in built.items():
        if label not in runs:   # not run in this cell (Grid.skip_runs)
            continue
        r = runs[label]
        if not r.get("reached"):
            out["methods"][label] = {"covered": False, "why": "not at ε"}
            continue
        terms = RoundTerms(**cell["cluster_terms"][label])
        t = predict_setup_time(setup, hosts=cell["H"], up_bps=up, down_bps=down, latency_s=terms.latency_s,
                               compute_s=terms.compute_s(cell["n"], cell["H"]), iterations=float(r["rounds"]),
                               aggregate="host", up_burst_bytes=bucket_bytes(up), down_burst_bytes=bucket_bytes(down),
                               start_s=terms.start_s)
        ratio = t.total_s / r["time"]
        out["methods"][label] = {"covered": True, "predicted_s": t.total_s, "iterations": t.iterations,
                                 "round_s": t.round_s, "up_s": t.up_s, "down_s": t.down_s, "latency_s": t.latency_s,
                                 "rate_s": t.rate_s, "start_s": t.start_s,
                                 "compute_s": t.compute_s, "measured_s": r["time"], "ratio": ratio,
                                 "within": abs(ratio - 1) <= PREDICTION_BAND}
    covered = {k: v for k, v in out["methods"].items() if v["covered"]}
    if not covered:
        out["why"] = "no method of ours reached ε"
        return out
    rec = min(covered, key=lambda k: covered[k]["predicted_s"])
    best = min(v["measured_s"] for v in covered.values())
    out.update(recommended=rec, recommended_vs_fastest=covered[rec]["measured_s"] / best,
               recommendation_ok=covered[rec]["measured_s"] <= (1 + RECOMMENDATION_BAND) * best)
    return out


def summarize(cell: dict, cap: float) -> dict:
    """The winner (the argmin of the measured times to ε) and the ratios IS ÷ GD and IS ÷ L-BFGS (IS: ISEGA τ = 1/n
    float64); a ratio against a run that did not reach ε is a bound (``<``), against the cap."""
    runs = cell["runs"]
    times = {k: r["time"] for k, r in runs.items() if r.get("reached")}
    winner = min(times, key=times.get) if times else None

    def ratio(a, b):
        if a not in runs or b not in runs:   # a method not run in this cell: no ratio, not one against the cap
            return {"value": float("nan"), "kind": "?"}
        ra, rb = runs[a], runs[b]
        if ra.get("reached") and rb.get("reached"):
            return {"value": ra["time"] / rb["time"], "kind": "="}
        if ra.get("reached") and "error" not in rb:
            return {"value": ra["time"] / max(cap, rb.get("wall_s", cap)), "kind": "<"}
        if rb.get("reached") and "error" not in ra:
            return {"value": max(cap, ra.get("wall_s", cap)) / rb["time"], "kind": ">"}
        return {"value": float("nan"), "kind": "?"}

    return {"winner": winner, "is_gd": ratio("ISEGA τ=1/n", "GD"), "is_lbfgs": ratio("ISEGA τ=1/n", LBFGS),
            "down_gd": ratio(DOWN, "GD"), "down_lbfgs": ratio(DOWN, LBFGS),
            "randk_gd": ratio(DOWN_RANDK, "GD"), "randk_lbfgs": ratio(DOWN_RANDK, LBFGS),
            "downh_gd": ratio(DOWN_H, "GD"), "downh_lbfgs": ratio(DOWN_H, LBFGS)}


def main(argv=None) -> int:
    """``python -m benchmarks.crossover [--quick] [--H 4,8] [--d 1e4,1e5] [--links 100mbit,10mbit] [--named a9a@100mbit]
    [--cap 40] [--json out.json] [--figure path]``: run a grid of the map and print its tables."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.crossover", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--full", action="store_true", help="the issue's whole grid (hours on 2 cores)")
    p.add_argument("--H"), p.add_argument("--d"), p.add_argument("--links"), p.add_argument("--named")
    p.add_argument("--cap", type=float)
    p.add_argument("--methods", help="labels of METHODS to run, separated by ';' (default: the grid's)")
    p.add_argument("--json", default="outputs/crossover.json")
    p.add_argument("--figure", default="outputs/crossover.png")
    p.add_argument("--time", action="store_true", help="the time check's grid (H = 16, d = 10^6; TIME)")
    p.add_argument("--lambda", dest="lambda_axis", action="store_true",
                   help="the λ axis's grid (H = 4, d = 10^4, λ in 1e-2, 1e-3, 1e-4; LAMBDA)")
    p.add_argument("--lam", help="the synthetic cells' λ, separated by ',' (default: the grid's; 1e-2)")
    p.add_argument("--render", metavar="JSON", help="print (and with --lambda --splice, splice) the report of an earlier "
                   "run's --json instead of measuring")
    p.add_argument("--left-out", action="append", default=[], help="with --render: a line for the report's 'left "
                   "out of this run, and why' (repeatable)")
    p.add_argument("--splice", metavar="DOC", help="with --lambda: put the λ axis's section into item 12 of this doc "
                   "(docs/benchmarks.md), replacing an earlier one; the rest of the doc is left as it is")
    p.add_argument("--before", metavar="JSON", help="an earlier map (this command's --json, or outputs/benchmarks.json "
                   "with item 12) to show beside this one")
    a = p.parse_args(argv)
    base = FULL if a.full else QUICK if a.quick else TIME if a.time else LAMBDA if a.lambda_axis else DEFAULT
    grid = grid_from(base, a.H, a.d, a.links, a.named, a.cap, a.methods, a.lam)
    before = None
    if a.before:
        saved = json.loads(Path(a.before).read_text())
        before = before_of(saved["results"]["12"]) if "results" in saved else before_of(saved)
    if a.render:
        res = json.loads(Path(a.render).read_text())
        for c in res["cells"]:   # the summary again, by today's rules
            c.update(summarize(c, res["grid"]["cap"]))
        if a.left_out:
            res["grid"]["left_out"] = list(a.left_out)
        if a.figure and res["cells"]:
            res["figure"] = plot(res, a.figure)
    else:
        res = measure(grid=grid, figure=a.figure, before=before)
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    print("\n".join(report(res, a.figure)))
    if a.time:
        print("\n".join(["", "The time check's verdicts:", ""] + [f"- {x}" for x in time_verdicts(res)]))
    if a.lambda_axis:
        print("\n".join(["", "The λ axis's verdicts:", ""] + [f"- {x}" for x in lambda_verdicts(res)]))
        if a.splice:
            splice_lambda(res, Path(a.splice), a.figure)
    return 0


LAMBDA_HEADING = "### The λ axis: the condition number"
LAMBDA_TEXT = (
    "Every synthetic cell above is at λ = 10⁻² (κ = L/μ ≈ 5 with L = max_i L_i), where GD needs 55–65 rounds and "
    "ISEGA, which refreshes a τ share of its memory a round, 1.7–3.7× as many. The paper's regime is κ ≫ 1/τ: there IS "
    "costs no extra rounds, and its time ÷ GD's is its round ÷ GD's. This run puts λ on an axis (κ grows 10× a "
    "step) at H = 4 hosts, d = 10⁴, on 10 Mbit symmetric (x is 80 kB: 64 ms a direction, so the bytes dominate "
    "GD's round), 10:1 and 100 Mbit, and d = 10⁵ at 100 Mbit, one run per method and cell, end to end as above; "
    "`python -m benchmarks.crossover --lambda --splice docs/benchmarks.md` (d = 10⁵: `--lambda --d 1e5 --links "
    "100mbit --lam 1e-2,1e-3`). The goal: where the bytes dominate GD's round and "
    f"λ ≤ {LAMBDA_GOAL_LAM:g}, ISEGA with natural7 both ways (τ = 1/n or 2/n) reaches ε in ≤ {LAMBDA_GOAL_GD:g} × "
    "GD's time; the planner's predicted time within ±25 % of the measured in ≥ 90 % of the (method, cell) pairs.")


def splice_lambda(res: dict, doc: Path, figure: str | None) -> None:
    """Put the λ axis's section (:data:`LAMBDA_HEADING`, its verdicts and tables) at the end of item 12 in ``doc``,
    replacing an earlier one, and its verdicts at the end of item 12's goal line; the rest is left as it is."""
    import datetime

    commit = res.get("commit") or _commit()
    date = res.get("date") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    verdicts = lambda_verdicts(res)
    link = None
    if figure and res.get("figure"):   # the figure beside the doc, as item 12's own
        target = doc.parent / "_static" / "crossover_lambda.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(res["figure"]).read_bytes())
        link = "_static/crossover_lambda.png"
    section = [LAMBDA_HEADING, "", LAMBDA_TEXT, "", f"Run {date} at commit {commit}.", "",
               *(f"- {v}" for v in verdicts), "", *report(res, link or FIGURE)]
    if not link:
        section = [x for x in section if not x.startswith("![")]
    lines, out = doc.read_text().splitlines(), []
    in12 = skipping = False
    for line in lines:
        if line.startswith("- **12. ") and "; λ axis: " not in line:
            line += "; λ axis: " + "; ".join(verdicts)
        elif line.startswith("- **12. "):
            line = line.split("; λ axis: ")[0] + "; λ axis: " + "; ".join(verdicts)
        if line.startswith("## "):
            if in12:   # item 12 ends here: the section goes before the next item
                out += section + [""]
                section = []
            in12, skipping = line.startswith("## 12. "), False
        elif line.startswith("### "):
            skipping = in12 and line.startswith(LAMBDA_HEADING)
        if not skipping:
            out.append(line)
    if section:   # item 12 was the last
        while out and not out[-1].strip():   # one blank line before the section, however many splices came before
            out.pop()
        out += [""] + section
    doc.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
