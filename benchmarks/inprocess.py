"""Item 1: the in-process engine's per-iteration time against one full-data gradient with scipy.sparse.

Every iteration must at least compute every worker's local gradient information, i.e. touch all N rows
once (A x and A^T r): one full-data gradient is the physical limit. The ratio is
(per-iteration wall time of :func:`isparse.engines.run` on an ``InProcessPool``) / (time of one full-data
gradient A^T phi'(A x) / N + lambda x with scipy.sparse), both measured back to back in each repetition; the
median of the per-repetition ratios is reported.

The same code measures the library of :data:`BEFORE_REF` in a subprocess (``--before``): it only calls
``InProcessPool(*setup.pool_args())`` and ``isparse.engines.run(setup.method, pool, ...)``, which exist in both
APIs (``pool_args()`` returned (method, shards, streams, x0) there, (method, shards, x0) now).
"""

from __future__ import annotations

import statistics
import time

from scipy.special import expit

from .common import load, median_time, table, verdict

#: goal on the ratio per n (issue 11)
GOALS = {100: 1.0, 1000: 1.5}
NS = (1, 10, 100, 1000)
METHODS = ("ibcd", "isega", "isaga")
LAM = {"a9a": 1e-3, "w8a": 1e-3}
CACHE = "outputs/bench_cache"
#: iterations timed per repetition (ISAGA's iterations are cheaper: more of them)
ITERS = {"ibcd": 100, "isega": 100, "isaga": 400}
#: iterations timed at n = 1000 on the "before" library (~30-40 us per logical worker and iteration there)
BEFORE_ITERS_N1000 = 20


def full_gradient(A, b, lam, keep_transpose: bool = True):
    """The baseline: one full-data logistic gradient with scipy.sparse.

    ``keep_transpose``: A^T is built once as CSR and kept (the baseline of the goal); otherwise ``A.T`` (a CSC view
    scipy re-makes and re-checks) per call, the baseline of the earlier runs of this item, reported alongside.
    """
    N = A.shape[0]
    AT = A.T.tocsr() if keep_transpose else None

    def grad(x):
        r = -b * expit(-b * (A @ x))
        return ((AT if AT is not None else A.T) @ r) / N + lam * x
    return grad


def make_pool(setup):
    """``InProcessPool(*setup.pool_args())``: the same call in the current API and in that of :data:`BEFORE_REF`."""
    import isparse

    return isparse.InProcessPool(*setup.pool_args())


def per_iteration(setup, iters: int, pool=None) -> float:
    """Wall seconds per iteration of ``iters`` iterations of the library's master loop on an ``InProcessPool``.

    Run through :func:`isparse.engines.run` without a bound, so no Lyapunov monitoring is timed; the loop's two
    objective evaluations (records at t = 0 and t = iters) are timed separately and subtracted. ``pool``: one made by
    :func:`make_pool` and already warmed up (its stacked data and lazily built indices are kept across calls; the
    workers' step counters and states simply continue); default a fresh one. Works with the current API and with
    that of :data:`BEFORE_REF`.
    """
    import isparse
    import isparse.engines

    pool = pool if pool is not None else make_pool(setup)
    t_F = median_time(lambda: setup.problem.F(setup.x0), reps=3)
    t0 = time.perf_counter()
    res = isparse.engines.run(setup.method, pool, setup.problem, setup.reference, None, x0=setup.x0,
                              max_iter=iters, tol=1e-300, log_every=iters)
    dt = time.perf_counter() - t0
    assert res.iterations == iters
    return max(dt - 2 * t_F, 0.0) / iters


def iterations(algorithm: str, n: int, quick: bool, before: bool) -> int:
    if before and n >= 1000:
        return 5 if quick else BEFORE_ITERS_N1000
    return 20 if quick else ITERS[algorithm]


def measure(quick: bool = False, datasets=("a9a", "w8a"), ns=NS, methods=METHODS, reps=None,
            before: bool = False) -> dict:
    from .common import setup

    reps = reps or (1 if quick else 5)
    rows = []
    for name in datasets:
        data = load(name)
        A = data.A.tocsr()
        grad = full_gradient(A, data.b, LAM[name])
        grad_view = full_gradient(A, data.b, LAM[name], keep_transpose=False)
        for n in ns:
            for algorithm in methods:
                s = setup(algorithm, data=data, lam=LAM[name], n=n, block_size=1, cache_dir=CACHE)
                x = s.reference.x_star * 0.5
                iters = iterations(algorithm, n, quick, before)
                pool = make_pool(s)
                per_iteration(s, 3, pool)  # warm-up (the CSC copy / transposes are built on first use)
                ratios, ratios_view, t_it, t_g, t_gv = [], [], [], [], []
                for _ in range(reps):
                    g = median_time(lambda: grad(x), reps=1, inner=20)
                    gv = median_time(lambda: grad_view(x), reps=1, inner=20)
                    it = per_iteration(s, iters, pool)
                    t_it.append(it), t_g.append(g), t_gv.append(gv), ratios.append(it / g), ratios_view.append(it / gv)
                rows.append(dict(data=name, n=n, algorithm=algorithm, tau=s.method.tau, iters=iters,
                                 grad_ms=1e3 * statistics.median(t_g), grad_view_ms=1e3 * statistics.median(t_gv),
                                 iter_ms=1e3 * statistics.median(t_it), ratio=statistics.median(ratios),
                                 ratio_view=statistics.median(ratios_view)))
                print(f"[item1{' before' if before else ''}] {name} n={n} {algorithm}: "
                      f"{rows[-1]['iter_ms']:.2f} ms/it, gradient {rows[-1]['grad_ms']:.2f} ms, "
                      f"ratio {rows[-1]['ratio']:.2f}", flush=True)
    return {"rows": rows, "reps": reps}


def report(res: dict, before: dict | None = None) -> str:
    rows = res["rows"]
    prev = {(r["data"], r["n"], r["algorithm"]): r for r in (before or {}).get("rows", [])}
    header = ["data", "n", "method", "τ", "iterations timed", "full gradient (ms)", "per iteration (ms)",
              "ratio", "ratio vs A.T per call", "goal"]
    if prev:
        header[-1:-1] = ["ratio before (same run)", "iterations timed before", "time before ÷ after"]
    body = []
    for r in rows:
        line = [r["data"], r["n"], r["algorithm"], f"{r['tau']:.3g}", r["iters"], r["grad_ms"], r["iter_ms"], r["ratio"],
                r.get("ratio_view", float("nan"))]
        if prev:
            p = prev.get((r["data"], r["n"], r["algorithm"]))
            line += [p["ratio"], p["iters"], p["iter_ms"] / r["iter_ms"]] if p else [float("nan"), "–", float("nan")]
        goal = GOALS.get(r["n"])
        line.append(f"n = {r['n']}: " + verdict(r["ratio"], goal) if goal is not None else "")
        body.append(line)
    return table(header, body)


#: the library before the batched redesign (the branch point of issue 11), measured in the same run
BEFORE_REF = "5d31c95"


def measure_before_after(quick: bool = False) -> dict:
    """Item 1 on this library ("after") and on the library of :data:`BEFORE_REF` ("before"), alternating.

    Each repetition runs every cell once on this library (in this process) and once on the old library (a
    subprocess importing a ``git archive`` of it), so that both see the same load; the medians over repetitions
    of the per-repetition ratios are reported.
    """
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    reps = 1 if quick else 5
    root = Path(__file__).resolve().parent.parent
    after, before = [], []
    with tempfile.TemporaryDirectory(prefix="isparse-before-") as tmp:
        subprocess.run(f"git archive {BEFORE_REF} isparse | tar -x -C {tmp}", shell=True, check=True, cwd=root)
        os.symlink(root / "benchmarks", Path(tmp) / "benchmarks")
        data_dir = os.environ.get("ISPARSE_DATA_DIR")
        if not data_dir:
            from .common import data_dir as dd

            data_dir = dd()
        for _ in range(reps):
            after.append(measure(quick=quick, reps=1))
            before.append(_run_elsewhere(tmp, quick, data_dir))
    after = _combine(after)
    profiles = []
    for n in GOALS:     # the worst cell of each goal's n, profiled
        cells = [r for r in after["rows"] if r["n"] == n]
        if cells:
            worst = max(cells, key=lambda r: r["ratio"])
            profiles.append(profile(worst["data"], worst["algorithm"], n, 50 if quick else 300))
    return {"after": after, "before": dict(_combine(before), ref=BEFORE_REF,
                                           iters_n1000=iterations("isega", 1000, quick, True)),
            "profiles": profiles}


def profile(name: str, algorithm: str, n: int, iters: int, top: int = 10) -> dict:
    """Where one cell's iteration goes: a cProfile of ``iters`` iterations (the ``top`` functions by own time, in us per
    iteration), and, without the profiler, the time of the parts the full gradient shares with the step.

    cProfile adds a fixed cost per Python call, so its shares overstate the many small calls. The profiler-free split:
    ``residuals_us`` = the hosted rows' phi'(A x) (``StackedGLM.residuals``: the margin product and the logistic
    derivative, which the full gradient also computes), ``rest_us`` = one iteration minus that (sampling, the gathered
    coordinates, messages, the master, the loop), against ``back_us`` = the full gradient's own second half,
    A^T r / N + lambda x, the part the step replaces.
    """
    import cProfile
    import pstats

    from .common import setup

    data = load(name)
    s = setup(algorithm, data=data, lam=LAM[name], n=n, block_size=1, cache_dir=CACHE)
    pool = make_pool(s)
    per_iteration(s, 3, pool)
    prof = cProfile.Profile()
    prof.enable()
    per_iteration(s, iters, pool)
    prof.disable()
    st = pstats.Stats(prof)
    total = st.total_tt
    rows = []
    for (file, line, func), (cc, nc, tt, ct, callers) in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        if file == "~":
            label = func
        else:
            where = file.split("/site-packages/")[-1]
            if "/isparse/" in where:
                where = "isparse/" + where.rsplit("/isparse/", 1)[1]
            label = f"{func} ({where}:{line})"
        rows.append({"function": label, "calls_per_iter": nc / iters, "own_us": 1e6 * tt / iters,
                     "cum_us": 1e6 * ct / iters, "share": tt / total})
    # without the profiler, back to back
    x = s.reference.x_star * 0.5
    A = data.A.tocsr()
    AT = A.T.tocsr()
    r = -data.b * expit(-data.b * (A @ x))
    host_data = getattr(getattr(pool, "host", None), "data", None)
    reps = 7
    t_iter = statistics.median(per_iteration(s, 50, pool) for _ in range(reps))
    t_res = median_time(lambda: host_data.residuals(x), reps=reps, inner=50) if host_data is not None else float("nan")
    t_back = median_time(lambda: (AT @ r) / A.shape[0] + LAM[name] * x, reps=reps, inner=50)
    grad = full_gradient(A, data.b, LAM[name])
    t_full = median_time(lambda: grad(x), reps=reps, inner=20)
    return {"data": name, "algorithm": algorithm, "n": n, "iters": iters, "total_us": 1e6 * total / iters, "rows": rows,
            "iter_us": 1e6 * t_iter, "residuals_us": 1e6 * t_res, "rest_us": 1e6 * (t_iter - t_res),
            "back_us": 1e6 * t_back, "full_us": 1e6 * t_full}


def report_profile(p: dict) -> str:
    return table(["function", "calls per iteration", "own µs per iteration", "cumulative µs per iteration",
                  "share of own time"],
                 [[r["function"].replace("|", "\\|"), f"{r['calls_per_iter']:.3g}", r["own_us"], r["cum_us"],
                   f"{100 * r['share']:.0f} %"] for r in p["rows"]])


def _run_elsewhere(tree, quick: bool, data_dir: str) -> dict:
    """``measure(reps=1, before=True)`` in a subprocess whose ``isparse`` is the one in ``tree``."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = Path(tree) / "before.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ISPARSE_DATA_DIR"] = data_dir     # the symlinked benchmarks resolve ../shared from the real tree anyway
    subprocess.run([sys.executable, "-m", "benchmarks.inprocess", "--before", "--json", str(out)]
                   + (["--quick"] if quick else []), cwd=tree, check=True, env=env)
    res = json.loads(out.read_text())
    if not res["library"].startswith(str(Path(tree).resolve())):
        raise RuntimeError(f"the 'before' run imported {res['library']}, not the tree in {tree}")
    return res


def _combine(runs: list[dict]) -> dict:
    """Medians over runs of each cell's times and ratio."""
    cells = {}
    for run in runs:
        for r in run["rows"]:
            cells.setdefault((r["data"], r["n"], r["algorithm"]), []).append(r)
    rows = []
    for rs in cells.values():
        row = dict(rs[0])
        for key in ("grad_ms", "grad_view_ms", "iter_ms", "ratio", "ratio_view"):
            row[key] = statistics.median(r[key] for r in rs)
        rows.append(row)
    return {"rows": rows, "reps": len(runs) * runs[0]["reps"]}


if __name__ == "__main__":
    import argparse
    import json

    import isparse
    import isparse.engines  # noqa: F401  (per_iteration calls isparse.engines.run)

    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", action="store_true", help="fewer iterations at n = 1000 (the old library is slow)")
    a = ap.parse_args()
    print(f"[item1] library under test: {isparse.__file__}", flush=True)
    res = measure(quick=a.quick, reps=1, before=a.before)
    res["library"] = isparse.__file__
    with open(a.json, "w") as f:
        json.dump(res, f)
