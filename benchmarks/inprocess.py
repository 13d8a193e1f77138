"""Item 1: the in-process engine's per-iteration time against one full-data gradient with scipy.sparse.

Every iteration must at least compute every worker's local gradient information, i.e. touch all N rows
once (A x and A^T r): one full-data gradient is the physical limit. The ratio is
(per-iteration wall time of ``RunSetup.run`` on an ``InProcessPool``) / (time of one full-data gradient
A^T phi'(A x) / N + lambda x with scipy.sparse), both measured back to back in each repetition; the median
of the per-repetition ratios is reported.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from scipy.special import expit

from .common import load, median_time, table, verdict

GOAL = 1.5
METHODS = ("ibcd", "isega", "isaga")
LAM = {"a9a": 1e-3, "w8a": 1e-3}
CACHE = "outputs/bench_cache"


def full_gradient(A, b, lam):
    """The baseline: one full-data logistic gradient with scipy.sparse (CSR A, its transpose for A^T r)."""
    N = A.shape[0]

    def grad(x):
        r = -b * expit(-b * (A @ x))
        return (A.T @ r) / N + lam * x
    return grad


def per_iteration(setup, iters: int) -> float:
    """Wall seconds per iteration of ``iters`` iterations of the library's master loop on an ``InProcessPool``.

    Run through :func:`isparse.engines.run` without a bound, so no Lyapunov monitoring is timed; the loop's two
    objective evaluations (records at t = 0 and t = iters) are timed separately and subtracted.
    """
    from isparse import InProcessPool, run

    pool = InProcessPool(*setup.pool_args())
    t_F = median_time(lambda: setup.problem.F(setup.x0), reps=3)
    t0 = time.perf_counter()
    res = run(setup.method, pool, setup.problem, setup.reference, None, x0=setup.x0, max_iter=iters,
              tol=1e-300, log_every=iters)
    dt = time.perf_counter() - t0
    assert res.iterations == iters
    return max(dt - 2 * t_F, 0.0) / iters


def measure(quick: bool = False, datasets=("a9a", "w8a"), ns=(1, 10, 100), methods=METHODS, reps=None) -> dict:
    from isparse import build

    reps = reps or (1 if quick else 5)
    rows = []
    for name in datasets:
        data = load(name)
        grad = full_gradient(data.A.tocsr(), data.b, LAM[name])
        x = np.zeros(data.d)
        for n in ns:
            for algorithm in methods:
                s = build(algorithm=algorithm, data=data, lam=LAM[name], n=n, block_size=1, cache_dir=CACHE)
                x = s.reference.x_star * 0.5
                iters = 20 if quick else (400 if algorithm == "isaga" else 100)
                per_iteration(s, 2)  # warm-up
                ratios, t_it, t_g = [], [], []
                for _ in range(reps):
                    g = median_time(lambda: grad(x), reps=1, inner=20)
                    it = per_iteration(s, iters)
                    t_it.append(it), t_g.append(g), ratios.append(it / g)
                rows.append(dict(data=name, n=n, algorithm=algorithm, tau=s.method.tau, iters=iters,
                                 grad_ms=1e3 * statistics.median(t_g), iter_ms=1e3 * statistics.median(t_it),
                                 ratio=statistics.median(ratios)))
                print(f"[item1] {name} n={n} {algorithm}: {rows[-1]['iter_ms']:.2f} ms/it, "
                      f"gradient {rows[-1]['grad_ms']:.2f} ms, ratio {rows[-1]['ratio']:.2f}", flush=True)
    return {"rows": rows, "reps": reps}


def report(res: dict, before: dict | None = None) -> str:
    rows = res["rows"]
    prev = {(r["data"], r["n"], r["algorithm"]): r["ratio"] for r in (before or {}).get("rows", [])}
    header = ["data", "n", "method", "τ", "iterations timed", "full gradient (ms)", "per iteration (ms)",
              "ratio", "goal (n = 100)"]
    if prev:
        header.insert(-1, "ratio before (same run)")
    body = []
    for r in rows:
        line = [r["data"], r["n"], r["algorithm"], f"{r['tau']:.3g}", r["iters"], r["grad_ms"], r["iter_ms"], r["ratio"]]
        if prev:
            line.append(prev.get((r["data"], r["n"], r["algorithm"]), float("nan")))
        line.append(verdict(r["ratio"], GOAL) if r["n"] == 100 else "")
        body.append(line)
    return table(header, body)


#: the library before this suite's optimizations (the branch point of issue 6), measured in the same run
BEFORE_REF = "34047c6"


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
        for _ in range(reps):
            after.append(measure(quick=quick, reps=1))
            before.append(_run_elsewhere(tmp, quick))
    return {"after": _combine(after), "before": dict(_combine(before), ref=BEFORE_REF)}


def _run_elsewhere(tree, quick: bool) -> dict:
    """``measure(reps=1)`` in a subprocess whose ``isparse`` is the one in ``tree``."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = Path(tree) / "before.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "benchmarks.inprocess", "--json", str(out)] + (["--quick"] if quick else []),
                   cwd=tree, check=True, env=env)
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
        for key in ("grad_ms", "iter_ms", "ratio"):
            row[key] = statistics.median(r[key] for r in rs)
        rows.append(row)
    return {"rows": rows, "reps": len(runs) * runs[0]["reps"]}


if __name__ == "__main__":
    import argparse
    import json

    import isparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    print(f"[item1] library under test: {isparse.__file__}", flush=True)
    res = measure(quick=a.quick, reps=1)
    res["library"] = isparse.__file__
    with open(a.json, "w") as f:
        json.dump(res, f)
