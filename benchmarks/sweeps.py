"""Item 7: one 8-job sweep run serially, with hydra/launcher=joblib and with hydra/launcher=dask, at two budgets.

The sweep is ``+experiment=table99`` at n = 10 (ISEGA with the paper's γ on a1a, mushrooms, phishing and w1a, τ = 1/n
and τ = 1: 8 jobs, ``engine=inprocess``) with a reduced budget: ``max_iter`` iterations each (``tol=0``: every job
runs all of them, so the jobs' lengths do not depend on which τ converges first) and no automatic report; table99's
own budget is 200,000 iterations per job (its n = 10 jobs stop at ε after 600-21,000). It runs as the
``isparse-run -m`` console script, three times per budget: Hydra's basic launcher (the jobs one after another in one
process), ``hydra/launcher=joblib hydra.launcher.n_jobs=2`` (two loky worker processes) and ``hydra/launcher=dask`` on
a LocalCluster of 2 worker processes × 1 thread that the launcher starts and closes. Wall times are those of the whole
command (interpreter start, the store, the launcher's processes included); the ratio is serial ÷ parallel at the same
budget, measured in the same run. Two budgets, because a parallel launcher's fixed costs (its processes' start and
imports, the cluster's start and close) do not shrink with the jobs: the longer budget shows the ratio once jobs are
long enough to pay for them. A warm-up sweep (1 iteration per job) first fills the reference cache (x*, L_i of each
data set at n = 10) and makes the MLflow store, so none of the timed sweeps solves a reference problem or migrates a
schema.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.tracking import summary_metrics

from .common import data_dir

MODES = {"serial (basic launcher)": [],
         "joblib, n_jobs=2": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
         "dask, LocalCluster 2 × 1": ["hydra/launcher=dask", "hydra.launcher.n_workers=2",
                                      "hydra.launcher.threads_per_worker=1"]}
#: iterations per job: about 1.5 and 4.5 min of serial sweep on this machine when quiet (quick: seconds)
BUDGETS, QUICK_BUDGETS = (12000, 36000), (200,)


def _cli() -> str:
    return str(Path(sys.executable).with_name("isparse-run"))


def _sweep(out: Path, max_iter: int, extra, tag: str) -> float:
    cmd = [_cli(), "-m", "+experiment=table99", "workers.n=10", f"max_iter={max_iter}", "tol=0", "report.auto=false",
           "progress=false", f"paths.outputs={out}", f"hydra.sweep.dir={out}/sweeps/{tag}",
           f"tracking.experiment=bench-sweeps-{tag}", *extra]
    env = dict(os.environ, ISPARSE_DATA_DIR=data_dir())
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=out, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{(p.stdout + p.stderr)[-4000:]}")
    return wall


def _job_seconds(out: Path, tag: str) -> tuple[int, float]:
    """(jobs, sum of the jobs' iteration wall time ``summary/wall_s_total``) of the sweep ``tag``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name(f"bench-sweeps-{tag}")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("isparse.sweep") != "true"]
    return len(runs), sum(summary_metrics(r.data.metrics).get("wall_s_total", 0.0) for r in runs)


def measure(quick: bool = False) -> dict:
    budgets = QUICK_BUDGETS if quick else BUDGETS
    rows = []
    with tempfile.TemporaryDirectory(prefix="isparse-bench-sweeps-") as tmp:
        out = Path(tmp)
        _sweep(out, 1, [], "warmup")
        for b, max_iter in enumerate(budgets):
            first = len(rows)
            for k, (mode, extra) in enumerate(MODES.items()):
                tag = f"b{b}m{k}"
                wall = _sweep(out, max_iter, extra, tag)
                jobs, iter_s = _job_seconds(out, tag)
                rows.append({"mode": mode, "max_iter": max_iter, "overrides": " ".join(extra) or "(none)",
                             "wall_s": wall, "jobs": jobs, "iterations_s": iter_s})
                print(f"[benchmarks] item 7: max_iter={max_iter}, {mode}: {wall:.1f} s ({jobs} jobs, {iter_s:.1f} s "
                      "of iterations)", flush=True)
            for r in rows[first:]:
                r["speedup"] = rows[first]["wall_s"] / r["wall_s"]
    return {"rows": rows, "budgets": list(budgets), "cores": os.cpu_count(),
            "command": "isparse-run -m +experiment=table99 workers.n=10 max_iter=<budget> tol=0 report.auto=false "
                       "progress=false [launcher overrides]"}


def report(res: dict) -> str:
    from .common import table

    return table(["max_iter per job", "launcher", "overrides", "jobs", "wall time (s)", "jobs' iterations (s, summed)",
                  "speed-up (serial ÷ this)"],
                 [[r.get("max_iter", res.get("max_iter")), r["mode"], f"`{r['overrides']}`", r["jobs"], r["wall_s"],
                   r["iterations_s"], r["speedup"]] for r in res["rows"]])
