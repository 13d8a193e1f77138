"""Item 8: isparse-plan's recommended tau against the measured times to eps, on bandwidth-shaped links.

For each rate (tbf 1 Gbit / 100 Mbit / 10 Mbit on both ends of each worker's veth pair, benchmarks/netns.py: 2 Dask
workers in their own network namespaces), on the same shaped cluster:

1. the planner: the ``isparse-plan`` console script in a subprocess with ``cluster=address`` (the namespaced
   scheduler), ``--json``, the grid ``plan.taus`` below; it probes the cluster itself (short real runs at tau = 1/16, 1/8, 1/2 for its line, and tau = 1; 40 rounds each,
   3 repetitions interleaved, the median kept: the defaults but for the rounds) and
   recommends the tau of least predicted time;
2. the truth: real runs to eps of every tau of the grid (ISEGA through the library's loop on a fresh ``DaskPool`` of
   the same cluster; ``log_every`` = 10 as the planner's probes and isparse-run's default), their wall time to eps
   from the loop's first round, the median of ``REPS`` = 3 repetitions run interleaved (tau by tau, then again).

Reported: whether the recommended tau's measured time is within 10% of the best measured tau's.

The problem is chosen so that the choice is not trivial: a1a with its 123 columns padded by zero columns to
d = 4,000 (``data.n_features=4000``: the messages are those of a 4,000-dimensional model, the conditioning is
a1a's), lambda = 0.3 so that the runs take a few hundred iterations, n = 8 workers, eps: ||x - x*||^2 <= 1e-4 r_0.
With 4 workers per link, tau = 1 puts 128 kB on a link per round (100 ms at 10 Mbit), tau = 1/16 8 kB, and x
(32 kB) goes down each link every round; Theorem 3 needs 2.7x more iterations at tau = 1/16 than at tau = 1.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATES = ("1gbit", "100mbit", "10mbit")
D, LAM, N, TOL = 4000, 0.3, 8, 1e-4
TAUS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
TAU_TEXT = "[0.0625,0.125,0.25,0.5,1]"
LOG_EVERY = 10
WITHIN = 0.10
REPS = 3
MAX_ITER = 20_000
OVERRIDES = ["data=a1a", f"data.n_features={D}", f"problem.lam={LAM}", f"workers.n={N}", f"tol={TOL:g}",
             "algorithm=isega", "progress=false", f"plan.taus={TAU_TEXT}", "plan.rounds=40"]


def plan_command(tmp: Path) -> list[str]:
    """The installed ``isparse-plan``, or a launcher of its entry point (a checkout not reinstalled since it was added)."""
    installed = Path(sys.executable).parent / "isparse-plan"
    if installed.is_file():
        return [str(installed)]
    launcher = tmp / "isparse-plan"
    launcher.write_text(f"#!{sys.executable}\nimport sys\nfrom pipeline.plan import main\nsys.exit(main())\n")
    launcher.chmod(0o755)
    return [str(launcher)]


def run_planner(address: str, tmp: Path) -> dict:
    """isparse-plan on the cluster at ``address`` (a subprocess; its JSON)."""
    from .common import data_dir

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "ISPARSE_DATA_DIR": data_dir(),
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.perf_counter()
    proc = subprocess.run([*plan_command(tmp), "--json", f"paths.outputs={tmp}", "cluster=address",
                           f"cluster.address={address}", *OVERRIDES], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"isparse-plan failed ({proc.returncode}): {proc.stderr[-3000:]}")
    plan = json.loads(proc.stdout)
    plan["planner_wall_s"] = time.perf_counter() - t0
    return plan


def measure(quick: bool = False) -> dict:
    from isparse import load_dataset
    from isparse.engines.dask import DaskPool

    from . import netns as ns
    from .common import data_dir, load_average, setup

    reason = ns.available()
    if reason:
        return {"skipped": f"needs network namespaces: {reason}"}
    data = load_dataset("a1a", data_dir=data_dir(), n_features=D)
    setups, ref = {}, None
    for tau in TAUS:
        setups[tau] = setup("isega", data=data, lam=LAM, n=N, block_size=1, tau=tau, reference=ref)
        ref = setups[tau].reference
    res = {"d": D, "lam": LAM, "n": N, "tol": TOL, "taus": list(TAUS), "within": WITHIN, "settings": [],
           "reps": 1 if quick else REPS}
    rates = RATES[-1:] if quick else RATES
    reps = 1 if quick else REPS
    tmp = Path(tempfile.mkdtemp(prefix="isparse-bench-plan-"))
    with ns.namespaced_client() as client:
        address = client.scheduler.address
        try:
            for rate in rates:
                ns.shape(rate)
                load0 = load_average()
                plan = run_planner(address, tmp)
                print(f"[item8] {rate}: planner recommends tau = {plan['recommended']['tau']:.4g} "
                      f"({plan['planner_wall_s']:.0f} s)", flush=True)
                measured, walls = {}, {tau: [] for tau in setups}
                for rep in range(reps):   # interleaved: a drift of the machine's load hits every tau alike
                    for tau, setup in setups.items():
                        pool = DaskPool(client, *setup.pool_args())
                        try:
                            r = setup.run(pool, max_iter=MAX_ITER, tol=TOL, log_every=LOG_EVERY)
                        finally:
                            pool.close()
                        walls[tau].append(r.records[-1]["wall_s"])
                        measured[tau] = {"iterations": r.iterations, "converged": bool(r.converged),
                                         "uplink": int(r.records[-1]["uplink_bytes"])}
                        print(f"[item8] {rate} rep {rep} tau = {tau:.4g}: {r.iterations} iterations, "
                              f"{walls[tau][-1]:.2f} s", flush=True)
                for tau, w in walls.items():
                    measured[tau].update(time_s=statistics.median(w), times_s=w,
                                         round_s=statistics.median(w) / max(1, measured[tau]["iterations"]))
                rows = {round(row["tau"], 12): row for row in plan["rows"]}
                best = min(measured, key=lambda t: measured[t]["time_s"])
                rec = plan["recommended"]["tau"]
                rec_key = min(measured, key=lambda t: abs(t - rec))
                ratio = measured[rec_key]["time_s"] / measured[best]["time_s"]
                res["settings"].append({
                    "rate": rate, "load_before": load0, "load_after": load_average(),
                    "planner_wall_s": plan["planner_wall_s"], "round_cost": plan["round_cost"],
                    "recommended_tau": rec, "best_measured_tau": best, "ratio": ratio, "within": ratio <= 1 + WITHIN,
                    "rows": [{"tau": t, **measured[t],
                              **{k: rows.get(round(t, 12), {}).get(k, float("nan"))
                                 for k in ("predicted_iterations", "predicted_round_s", "predicted_time_s",
                                           "predicted_uplink_bytes")}} for t in TAUS]})
        finally:
            ns.shape(None)
    return res


def _tau(t: float) -> str:
    for k in (1, 2, 4, 8, 16, 32):
        if abs(t * k - 1) < 1e-9:
            return "1" if k == 1 else f"1/{k}"
    return f"{t:.4g}"


def report(res: dict) -> list[str]:
    """Markdown tables: one per rate (predicted vs measured per tau), and the summary."""
    from .common import table

    out = []
    summary = []
    for s in res["settings"]:
        c = s["round_cost"]
        bw = c["bandwidth_Bps"]
        fit = (f"planner's fit: {1e3 * c['latency_s']:.2f} ms + bytes / "
               + ("∞" if not isinstance(bw, (int, float)) or bw == float("inf") else f"{bw / 1e6:.3g} MB/s")
               + f" (residual {100 * c['residual_rel']:.1f} % rms over {len(c['probes'])} probes); "
               f"planner took {s['planner_wall_s']:.0f} s; load {s['load_before']} → {s['load_after']}")
        rows = []
        for r in s["rows"]:
            mark = (" ← recommended" if abs(r["tau"] - s["recommended_tau"]) < 1e-9 else "") + \
                   (" ★ fastest" if abs(r["tau"] - s["best_measured_tau"]) < 1e-9 else "")
            rows.append([_tau(r["tau"]) + mark, r["predicted_iterations"], r["iterations"],
                         r["predicted_iterations"] / r["iterations"] if r["iterations"] else float("nan"),
                         1e3 * r["predicted_round_s"], 1e3 * r["round_s"], r["predicted_time_s"], r["time_s"],
                         "–".join(f"{t:.2f}" for t in (min(r.get("times_s", [r["time_s"]])),
                                                       max(r.get("times_s", [r["time_s"]]))))])
        out += [f"**tbf {s['rate']}** — {fit}", "",
                table(["τ", "iterations (theory)", "iterations (measured)", "theory ÷ measured",
                       "round ms (predicted)", "round ms (measured)", "time to ε s (predicted)",
                       f"time to ε s (measured, median of {res.get('reps', 1)})", "range (s)"], rows), ""]
        summary.append([f"tbf {s['rate']}", _tau(s["recommended_tau"]), _tau(s["best_measured_tau"]), s["ratio"],
                        "**yes**" if s["within"] else "**no**"])
    out = [table(["link", "recommended τ", "fastest measured τ", "measured time recommended ÷ fastest",
                  f"within {100 * res['within']:.0f} %"], summary), ""] + out
    return out
