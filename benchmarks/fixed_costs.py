"""Item 9: the fixed costs of a run, outside its iterations (issue 20), and its iterations through ``isparse-run``.

Four measurements, each of the real console script or the library, on this machine, in one run:

- **a 1-iteration run from a cold process**: ``isparse-run engine=inprocess max_iter=1 progress=false`` (ISEGA on the
  bundled breast-cancer set), the whole command's wall time: interpreter, imports, Hydra's composition, the data,
  the build, the MLflow run with its params, metrics and artifacts, the figure. A first run fills the cache (x*,
  L_i, the data set's arrays) and makes the store; the timed runs are the ones after it (a new process each).
  Beside it, in the same run: the interpreter alone (``python -c pass``) and ``import mlflow.tracking`` alone, the
  part of the floor that MLflow's own import sets;
- **a job after the first of a sweep, in a warm process** (Hydra's basic launcher: one process runs every job):
  ``isparse-run -m engine=inprocess max_iter=1 tol=0 seed=0,...,7``; per job, the time from its MLflow run's start
  to the next job's, less its iterations (``wall_s_total``): composition, checks, data (kept in memory), build,
  the MLflow run, its logging and figure. The median over the jobs after the first;
- **the set-up at n = 10⁴ logical workers**: ``isparse.build`` of ISEGA on a9a with ``workers.n=10000`` (the rows
  split, the problem, L_i, x*, the method, the bound) and the in-process pool over it, with an empty cache (the
  reference solved) and with the cache filled by that first build;
- **the time per iteration through isparse-run**: ``isparse-run engine=inprocess data=a9a workers.n=<n> max_iter=<T>
  tol=0 tracking.log_every=<T/4>`` (ISEGA, τ = 1/n), its iterations' wall time (``wall_s_total``) per iteration
  divided by one full-data gradient with scipy.sparse (item 1's baseline, measured in this run);
- **what a sweep and a command cost** (issue 48), each beside the same command of today's code before that issue
  (:data:`BASELINE`, checked out in a temporary git worktree and run with the same interpreter): the CPU of
  ``isparse-run --help``, the CPU of the cold 1-iteration run above (the command and every process it waits for:
  the MLflow helper), and the wall time of a sweep of :data:`SWEEP20` one-iteration jobs on the default Dask
  cluster (``isparse-run -m max_iter=1 tol=0 seed=0,...``) against one such run alone (the first job's time).
  Beside the cold run's CPU, the floor no change of ours can lower: the CPU of the interpreter importing what the
  MLflow helper imports (``mlflow.tracking`` and its sqlite store, :data:`MLFLOW_FLOOR`).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.tracking import summary_metrics

from .common import data_dir, load, median_time

#: the issue's goals: seconds (cold 1-iteration run, a later job of a sweep outside its iterations, the set-up at
#: n = 10^4) and ratios to one full-data gradient per iteration (n = 100, 1000)
GOALS = {"cold_run_s": 3.0, "sweep_job_s": 1.0, "setup_1e4_s": 5.0, "iteration_100": 1.0, "iteration_1000": 1.5}
#: issue 48's goals: CPU seconds of a cold 1-iteration run and of --help; a sweep's jobs after the first, seconds each
GOALS.update({"cold_run_cpu_s": 3.0, "help_cpu_s": 1.5, "sweep20_per_job_s": 1.0})
#: the commit whose commands are the "today" of issue 48's measures (main before the issue)
BASELINE = "e695c3e"
SWEEP20 = 20
#: what the MLflow helper of a cold run imports (pipeline._store.serve): MLflow's part of the run's CPU
MLFLOW_FLOOR = "import mlflow.tracking, mlflow.store.tracking.sqlalchemy_store"
REPEATS, QUICK_REPEATS = 5, 2
SWEEP_JOBS = 8
ITERS = {100: 2000, 1000: 400}


def _cli() -> str:
    return str(Path(sys.executable).with_name("isparse-run"))


def _env() -> dict:
    return dict(os.environ, ISPARSE_DATA_DIR=data_dir())


def _timed(cmd, cwd) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=_env(), timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{(p.stdout + p.stderr)[-4000:]}")
    return wall


def _cpu(cmd, cwd, env=None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``cmd`` and every process it waited for (getrusage of the children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env or _env(), timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{(p.stdout + p.stderr)[-4000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def _baseline(tmp: Path) -> dict:
    """The environment that runs :data:`BASELINE`'s code with this interpreter (its checkout first on PYTHONPATH:
    its pipeline, isparse and conf/), from a git worktree under ``tmp``."""
    root = Path(__file__).resolve().parent.parent
    tree = tmp / "baseline"
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), BASELINE], check=True,
                   capture_output=True)
    return dict(_env(), PYTHONPATH=str(tree))


def sweep_costs(out: Path, repeats: int, jobs: int = SWEEP20) -> dict:
    """Issue 48's measures, now and at :data:`BASELINE` (see the module docstring)."""
    root = Path(__file__).resolve().parent.parent
    res = {"baseline_commit": BASELINE, "jobs": jobs,
           "mlflow_floor_cpu": _stats([_cpu([sys.executable, "-c", MLFLOW_FLOOR], out)[0] for _ in range(repeats)])}
    try:
        envs = {"now": _env(), "baseline": _baseline(out)}
        for which, env in envs.items():
            d = out / which
            d.mkdir(exist_ok=True)
            help_cpu = [_cpu([_cli(), "--help"], d, env)[0] for _ in range(repeats)]
            cold = [_cli(), "engine=inprocess", "max_iter=1", "progress=false", f"paths.outputs={d}"]
            _cpu(cold, d, env)   # the cache and the store
            cold_cpu = [_cpu(cold, d, env) for _ in range(repeats)]
            single = [_cli(), "max_iter=1", "tol=0", "progress=false", f"paths.outputs={d}",
                      "tracking.experiment=bench-single"]
            single_wall = statistics.median(_cpu(single, d, env)[1] for _ in range(2))
            sweep = [_cli(), "-m", "max_iter=1", "tol=0", f"seed={','.join(map(str, range(jobs)))}", "progress=false",
                     f"paths.outputs={d}", "tracking.experiment=bench-sweep20"]
            sweep_cpu, sweep_wall = _cpu(sweep, d, env)
            res[which] = {"help_cpu": _stats(help_cpu), "cold_cpu": _stats([c for c, _ in cold_cpu]),
                          "cold_wall": _stats([w for _, w in cold_cpu]), "single_wall_s": single_wall,
                          "sweep_wall_s": sweep_wall, "sweep_cpu_s": sweep_cpu,
                          "per_job_after_first_s": (sweep_wall - single_wall) / max(1, jobs - 1)}
        res["commands"] = {"help": "isparse-run --help", "cold": " ".join(cold[1:4]),
                           "sweep": " ".join(sweep[1:6])}
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(out / "baseline")],
                       capture_output=True)
    return res


def _stats(values) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def cold_run(out: Path, repeats: int) -> dict:
    cmd = [_cli(), "engine=inprocess", "max_iter=1", "progress=false", f"paths.outputs={out}"]
    _timed(cmd, out)   # fills the cache and makes the store
    walls = [_timed(cmd, out) for _ in range(repeats)]
    python = [_timed([sys.executable, "-c", "pass"], out) for _ in range(repeats)]
    mlflow = [_timed([sys.executable, "-c", "import mlflow.tracking"], out) for _ in range(repeats)]
    return {"wall": _stats(walls), "python": _stats(python), "import_mlflow": _stats(mlflow), "command": " ".join(cmd[1:4])}


def sweep_jobs(out: Path, jobs: int) -> dict:
    from mlflow.tracking import MlflowClient

    seeds = ",".join(map(str, range(jobs)))
    cmd = [_cli(), "-m", "engine=inprocess", "max_iter=1", "tol=0", f"seed={seeds}", "progress=false",
           f"paths.outputs={out}", "tracking.experiment=bench-fixed-sweep"]
    wall = _timed(cmd, out)
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("bench-fixed-sweep")
    runs = sorted((r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("isparse.sweep") != "true"),
                  key=lambda r: r.info.start_time)
    outside = [(b.info.start_time - a.info.start_time) / 1e3 - summary_metrics(a.data.metrics).get("wall_s_total", 0.0)
               for a, b in zip(runs, runs[1:])]
    return {"jobs": len(runs), "sweep_wall_s": wall, "after_first": _stats(outside[1:] or outside),
            "first": outside[0] if outside else float("nan"), "command": " ".join(cmd[1:6])}


def setup_1e4() -> dict:
    from isparse import InProcessPool, RunSpec, build

    spec = RunSpec.from_dict({"algorithm": "isega", "data": "a9a", "workers.n": 10_000, "problem.lam": 1e-3})
    data = load("a9a")
    out = {}
    with tempfile.TemporaryDirectory(prefix="isparse-bench-setup-") as cache:
        for name in ("empty cache", "filled cache"):
            t0 = time.perf_counter()
            s = build(spec, data=data, cache_dir=cache)
            t1 = time.perf_counter()
            InProcessPool(*s.pool_args())
            t2 = time.perf_counter()
            out[name] = {"build_s": t1 - t0, "pool_s": t2 - t1, "total_s": t2 - t0}
    return out


def iteration(out: Path, n: int, iters: int) -> dict:
    from mlflow.tracking import MlflowClient

    from .inprocess import full_gradient

    data = load("a9a")
    grad = full_gradient(data.A, data.b, 1e-3)
    x = 1e-3 * (1 + (data.A[:1].toarray().ravel()))
    t_grad = median_time(lambda: grad(x), reps=5, inner=20)
    cmd = [_cli(), "engine=inprocess", "data=a9a", f"workers.n={n}", "problem.lam=1e-3", f"max_iter={iters}", "tol=0",
           f"tracking.log_every={iters // 4}", "checkpoint.every=0", "progress=false", f"paths.outputs={out}",
           f"tracking.experiment=bench-fixed-n{n}"]
    _timed(cmd, out)   # the reference solve and the data's arrays into the cache
    ratios = []
    for _ in range(2):
        _timed(cmd, out)
        client = MlflowClient(f"sqlite:///{out}/mlflow.db")
        exp = client.get_experiment_by_name(f"bench-fixed-n{n}")
        run = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])[0]
        summary = summary_metrics(run.data.metrics)
        ratios.append(summary["wall_s_total"] / summary["iterations"] / t_grad)
    return {"n": n, "iters": iters, "full_gradient_s": t_grad, "ratio": _stats(ratios),
            "command": " ".join(cmd[1:8])}


def measure(quick: bool = False) -> dict:
    repeats = QUICK_REPEATS if quick else REPEATS
    with tempfile.TemporaryDirectory(prefix="isparse-bench-fixed-") as tmp:
        out = Path(tmp)
        res = {"cold": cold_run(out, repeats), "sweep": sweep_jobs(out, 3 if quick else SWEEP_JOBS),
               "costs": sweep_costs(out, repeats, 4 if quick else SWEEP20), "setup": setup_1e4(),
               "iterations": [iteration(out, n, max(40, it // (10 if quick else 1))) for n, it in ITERS.items()]}
    res["goals"] = GOALS
    return res


def report(res: dict) -> list[str]:
    from .common import table

    c, s, u = res["cold"], res["sweep"], res["setup"]
    rows = [["1-iteration run, cold process (wall, s)", c["wall"]["median"], f"{c['wall']['min']:.2f}-{c['wall']['max']:.2f}",
             f"≤ {GOALS['cold_run_s']:g}"],
            ["  beside it: the interpreter alone", c["python"]["median"], "", ""],
            ["  beside it: import mlflow.tracking alone", c["import_mlflow"]["median"], "", ""],
            ["a sweep's job after the first, outside its iterations (s)", s["after_first"]["median"],
             f"{s['after_first']['min']:.2f}-{s['after_first']['max']:.2f}", f"≤ {GOALS['sweep_job_s']:g}"],
            ["  the first job (s)", s["first"], "", ""],
            ["set-up at n = 10^4, empty cache (build + pool, s)", u["empty cache"]["total_s"], "",
             f"≤ {GOALS['setup_1e4_s']:g}"],
            ["set-up at n = 10^4, filled cache (s)", u["filled cache"]["total_s"], "", f"≤ {GOALS['setup_1e4_s']:g}"]]
    k = res.get("costs")
    if k:
        now, base = k["now"], k["baseline"]
        rows += [[f"isparse-run --help, CPU (s; at {k['baseline_commit']}: {base['help_cpu']['median']:.2f})",
                  now["help_cpu"]["median"], f"{now['help_cpu']['min']:.2f}-{now['help_cpu']['max']:.2f}",
                  f"≤ {GOALS['help_cpu_s']:g}"],
                 [f"1-iteration run, cold process, CPU with its helper (s; at {k['baseline_commit']}: "
                  f"{base['cold_cpu']['median']:.2f})", now["cold_cpu"]["median"],
                  f"{now['cold_cpu']['min']:.2f}-{now['cold_cpu']['max']:.2f}", f"≤ {GOALS['cold_run_cpu_s']:g}"]]
        if "mlflow_floor_cpu" in k:
            floor = k["mlflow_floor_cpu"]
            rows += [["  beside it: the MLflow helper's imports alone, CPU (s)", floor["median"],
                      f"{floor['min']:.2f}-{floor['max']:.2f}", ""]]
        rows += [[f"a sweep of {k['jobs']} one-iteration jobs on the default Dask cluster, per job after the first "
                   f"(s; at {k['baseline_commit']}: {base['per_job_after_first_s']:.2f})", now["per_job_after_first_s"],
                   f"{now['sweep_wall_s']:.1f} s in all, one run alone {now['single_wall_s']:.1f} s",
                   f"≤ {GOALS['sweep20_per_job_s']:g}"]]
    for it in res["iterations"]:
        goal = GOALS.get(f"iteration_{it['n']}")
        rows.append([f"per iteration through isparse-run, n = {it['n']} (÷ one full-data gradient)",
                     it["ratio"]["median"], f"{it['ratio']['min']:.2f}-{it['ratio']['max']:.2f}",
                     f"≤ {goal:g}×" if goal else ""])
    return [table(["measure", "median", "range", "goal"], rows), "",
            f"Commands: `isparse-run {c['command']}` ({c['wall']['runs']} runs after a first one); "
            f"`isparse-run {s['command']}` ({s['jobs']} jobs, {s['sweep_wall_s']:.1f} s in all); "
            + "; ".join(f"`isparse-run {it['command']} ...` (one full-data gradient: "
                        f"{1e3 * it['full_gradient_s']:.2f} ms)" for it in res["iterations"]) + "."]


def splice(res: dict, doc: Path, date: str, commit: str, load_before: str, load_after: str, minutes: float) -> None:
    """Put this run's item 9 in ``doc`` (docs/benchmarks.md, written by ``python -m benchmarks`` from runs merged
    item by item): its goal line, its section and its row of the runs' table; the other items are left as they are."""
    from .report import _item9

    goal, section = _item9(res)
    lines, out, skip = doc.read_text().splitlines(), [], False
    for line in lines:
        if line.startswith("## "):
            skip = line.startswith("## 9. ")
            if skip:
                out += section.rstrip("\n").splitlines() + [""]
                continue
        if skip:
            continue
        if line.startswith("- **9. "):
            line = goal
        elif line.startswith("| 9 | "):
            line = f"| 9 | {date} | {commit} | {load_before} | {load_after} | {minutes:.1f} min |"
        out.append(line)
    doc.write_text("\n".join(out) + "\n")


if __name__ == "__main__":   # python -m benchmarks.fixed_costs [--quick] [--splice docs/benchmarks.md]
    import argparse
    import datetime

    p = argparse.ArgumentParser(prog="python -m benchmarks.fixed_costs", description="Item 9 alone.")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--splice", metavar="DOC", help="put the item's lines into this doc (docs/benchmarks.md)")
    p.add_argument("--json", help="also write the measured numbers here")
    a = p.parse_args()
    before, t0 = " ".join(f"{x:.2f}" for x in os.getloadavg()), time.time()
    res = measure(quick=a.quick)
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if a.json:
        import json

        Path(a.json).write_text(json.dumps(res, default=float, indent=1))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if a.splice:
        splice(res, Path(a.splice), date, commit, before, after, (time.time() - t0) / 60)
    print("\n".join(report(res)))
