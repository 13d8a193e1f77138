"""isparse-report: read a sweep's runs back from MLflow and compare them with the theory.

Writes, as artifacts of the sweep's parent run (under ``report/``) and as files under
``<paths.outputs>/reports/<experiment>/<parent run id>/``:

1. ``convergence_<data>.png`` per data set: the measured quantity each theorem bounds (dist_sq,
   or the Lyapunov function, relative to its start) and the theorem's bound, against iterations and
   against cumulative uplink bytes, one line per configuration.
2. ``iterations_vs_tau.png`` (when the sweep has several tau): iterations to eps against tau,
   measured (median over seeds, bars from min to max) and the theorem's prediction
   (``predicted_iterations``), one panel per n.
3. ``table99.md`` / ``table99.csv`` (when the sweep has tau = 1/n and tau = 1 for the same data,
   method and n): iterations and uplink bytes to eps at tau = 1/n relative to tau = 1, and the share of
   uplink saved; where a configuration does not reach eps, the neighbourhood it stalls in.

eps is each run's ``tol``: a run reaches it at the first logged step with dist_sq <= tol * r0
(steps are logged every ``tracking.log_every`` iterations and at the last one). Everything is
recomputed from the logged metrics and params, so a report can be rebuilt at any time:

    isparse-report --experiment paper-table99            # the newest sweep of that experiment
    isparse-report --parent <run id> --uri sqlite:///outputs/mlflow.db
    isparse-report --parent <id>,<id of a sweep that re-ran its failed jobs>      # merged, written to the first

The report holds no algorithm logic: it only reads what the runs logged.
"""
from __future__ import annotations

import argparse
import csv
import logging
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from isparse.blocks import resolve_tau  # noqa: E402
from isparse.errors import ConfigError  # noqa: E402

from .tracking import check_reachable  # noqa: E402

log = logging.getLogger(__name__)

#: metrics read back for each run
METRICS = ("dist_sq", "bound", "uplink_bytes", "lyapunov")


@dataclass
class RunRecord:
    """One child run of a sweep, as logged: its identity, constants and metric histories."""

    run_id: str
    status: str
    algorithm: str
    data: str
    n: int
    m: int
    tau: float
    tau_m: int
    seed: int
    tol: float
    r0: float
    label_extra: str
    predicted: float | None
    bound_quantity: str
    history: dict = field(default_factory=dict)   # metric -> (steps, values)

    @property
    def key(self) -> tuple:
        """The configuration without the seed (runs that differ only in the seed are repetitions)."""
        return (self.data, self.algorithm, self.label_extra, self.n, self.tau_m, self.m)

    @property
    def full(self) -> bool:
        """tau = 1: the full-communication version."""
        return self.tau_m == self.m

    @property
    def one_over_n(self) -> bool:
        """tau = 1/n as ``tau=auto`` sets it (``isparse.blocks.resolve_tau``; tau = 1 when n = 1)."""
        return self.tau_m == resolve_tau("auto", self.m, self.n)[1]

    def label(self) -> str:
        tau = "1" if self.full else f"{self.tau_m}/{self.m}"
        return f"{self.algorithm}{self.label_extra} n={self.n} τ={tau}"

    def to_eps(self) -> tuple[int | None, float | None]:
        """(iterations, cumulative uplink bytes) at the first logged step with dist_sq <= tol * r0; (None, None) if never."""
        steps, values = self.history.get("dist_sq", ([], []))
        for s, v in zip(steps, values):
            if v <= self.tol * self.r0:
                return s, _value_at(self.history.get("uplink_bytes", ([], [])), s)
        return None, None

    def final_relative(self) -> float:
        """The last logged dist_sq / r0 (where a run that does not reach eps stalls)."""
        steps, values = self.history.get("dist_sq", ([], []))
        return values[-1] / self.r0 if values else math.nan


def _value_at(history, step):
    steps, values = history
    for s, v in zip(steps, values):
        if s == step:
            return v
    return None


def latest_sweep(client: MlflowClient, experiment: str):
    """The newest parent run (tag ``isparse.sweep=true``) of an MLflow experiment.

    Raises
    ------
    ConfigError
        No such experiment, or no sweep in it (naming ``--experiment``).
    """
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise ConfigError("experiment", f"The '--experiment' parameter must name an MLflow experiment; "
                                        f"got {experiment!r}, which does not exist.")
    runs = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'",
                              order_by=["attributes.start_time DESC"], max_results=50)
    for run in runs:       # the newest sweep with a finished job (a sweep stopped at once has none)
        done = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}' "
                                                       "and attributes.status = 'FINISHED'", max_results=1)
        if done:
            if run.info.status != "FINISHED":
                log.warning("report: the newest sweep %s is %s; its finished jobs are reported",
                            run.info.run_id, run.info.status)
            return run
    raise ConfigError("experiment", f"The MLflow experiment {experiment!r} has no sweep (isparse-run -m) with a "
                                    f"finished job.")


def load_children(client: MlflowClient, parent) -> list[RunRecord]:
    """Every child run of ``parent`` that logged its constants, with its metric histories."""
    runs = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                              max_results=5000)
    records = []
    for run in runs:
        p, t = run.data.params, run.data.tags
        if "r0" not in p or "tau_m" not in p:   # failed before its constants were logged
            continue
        if run.info.status != "FINISHED":       # killed, failed (diverged) or still running: not a result
            log.warning("report: leaving out %s (%s)", run.info.run_name, run.info.status)
            continue
        extra = ""
        if p.get("step.rule", "theory") != "theory":
            extra += f" ({p['step.rule']} γ)"
        if float(p.get("step.multiplier", 1)) != 1:
            extra += f" ×{float(p['step.multiplier']):g}γ"
        pred = t.get("predicted_iterations")
        rec = RunRecord(run_id=run.info.run_id, status=run.info.status, algorithm=p["algorithm.name"],
                        data=p.get("data.name", "?"), n=int(p["n"]), m=int(p["m"]), tau=float(p["tau"]),
                        tau_m=int(p["tau_m"]), seed=int(p.get("seed", 0)), tol=float(p["tol"]), r0=float(p["r0"]),
                        label_extra=extra, predicted=float(pred) if pred not in (None, "", "None", "nan") else None,
                        bound_quantity=t.get("bound_quantity", "dist_sq"))
        for key in METRICS:
            hist = sorted(client.get_metric_history(run.info.run_id, key), key=lambda mm: mm.step)
            if hist:
                rec.history[key] = ([mm.step for mm in hist], [mm.value for mm in hist])
        records.append(rec)
    return sorted(records, key=lambda r: (r.data, r.algorithm, r.label_extra, r.n, r.tau_m, r.seed))


# ----------------------------------------------------------------------------------------- figures
def convergence_figures(records: list[RunRecord]) -> dict[str, plt.Figure]:
    """Per data set: the bounded quantity (relative to its start) and its bound vs iterations and vs uplink bytes."""
    by_data = defaultdict(list)
    for r in records:
        if r.seed == min(x.seed for x in records if x.key == r.key):    # one line per configuration
            by_data[r.data].append(r)
    figures = {}
    for data, runs in by_data.items():
        fig, axes = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, r in enumerate(runs):
            quantity = r.bound_quantity if r.bound_quantity in r.history else "dist_sq"
            steps, values = r.history.get(quantity, ([], []))
            if not values:
                continue
            scale = r.r0 if quantity == "dist_sq" else (values[0] or 1.0)
            up_steps, up = r.history.get("uplink_bytes", ([], []))
            up_at = dict(zip(up_steps, up))
            color = colors[i % len(colors)]
            name = r.label() + ("" if quantity == "dist_sq" else f" [{quantity}]")
            for ax, xs in ((axes[0], steps), (axes[1], [up_at.get(s, 0) or math.nan for s in steps])):
                ax.semilogy(xs, [v / scale for v in values], color=color, label=name)
                b_steps, bound = r.history.get("bound", ([], []))
                if bound:
                    bx = b_steps if ax is axes[0] else [up_at.get(s, 0) or math.nan for s in b_steps]
                    ax.semilogy(bx, [b / scale for b in bound], "--", color=color, linewidth=0.9)
        axes[0].set_xlabel("iteration t")
        axes[1].set_xlabel("uplink bytes, all workers, cumulative")
        axes[1].set_xscale("log")
        axes[0].set_ylabel("measured / start (solid), theorem's bound / start (dashed)")
        for ax in axes:
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7, loc="best")
        fig.suptitle(f"{data}: convergence of each configuration (seed {min(r.seed for r in runs)})")
        figures[f"convergence_{data}.png"] = fig
    return figures


def tau_rows(records: list[RunRecord]) -> list[dict]:
    """Iterations to eps per configuration over seeds: median, min, max, and the prediction."""
    groups = defaultdict(list)
    for r in records:
        groups[r.key].append(r)
    rows = []
    for (data, alg, extra, n, tau_m, m), runs in groups.items():
        its = [r.to_eps()[0] for r in runs]
        reached = [i for i in its if i is not None]
        rows.append(dict(data=data, algorithm=alg + extra, n=n, tau=tau_m / m, tau_m=tau_m, m=m, seeds=len(runs),
                         reached=len(reached), median=statistics.median(reached) if reached else None,
                         low=min(reached) if reached else None, high=max(reached) if reached else None,
                         predicted=runs[0].predicted, eps=runs[0].tol))
    return rows


def add_slopes(rows: list[dict]) -> list[dict]:
    """Per line (data, algorithm, n), sorted by tau: the log-log slope of the predicted and the measured
    iterations from the previous tau (``predicted_slope``, ``measured_slope``), and ``predicted_knee_tau``,
    the tau where the predicted slope crosses -1/2 (interpolated in log tau between segment midpoints).

    For Theorem 3 the prediction is proportional to 1 + 1/(n tau): slope -1 for tau << 1/n, 0 for
    tau >> 1/n and exactly -1/2 at tau = 1/n, so the knee lies at tau = 1/n.
    """
    lines = defaultdict(list)
    for r in rows:
        lines[(r["data"], r["algorithm"], r["n"])].append(r)
    for line in lines.values():
        line.sort(key=lambda r: r["tau"])
        mids = []
        for prev, cur in zip(line, line[1:]):
            dx = math.log(cur["tau"] / prev["tau"])
            for kind, key in (("predicted", "predicted"), ("measured", "median")):
                ok = (dx > 0 and all(v is not None and math.isfinite(v) and v > 0 for v in (prev[key], cur[key])))
                cur[f"{kind}_slope"] = math.log(cur[key] / prev[key]) / dx if ok else None
            mids.append((0.5 * (math.log(prev["tau"]) + math.log(cur["tau"])), cur["predicted_slope"]))
        line[0]["predicted_slope"] = line[0]["measured_slope"] = None
        knee = None
        for (x0, s0), (x1, s1) in zip(mids, mids[1:]):
            if s0 is not None and s1 is not None and s0 <= -0.5 <= s1 and s1 > s0:
                knee = math.exp(x0 + (x1 - x0) * (-0.5 - s0) / (s1 - s0))
                break
        for r in line:
            r["predicted_knee_tau"] = knee
    return rows


def tau_figure(records: list[RunRecord]) -> plt.Figure | None:
    """Iterations to eps against tau (log-log), measured and predicted, one panel per n; None if one tau only."""
    rows = add_slopes(tau_rows(records))
    taus = defaultdict(set)
    for r in rows:
        taus[(r["data"], r["algorithm"], r["n"])].add(r["tau_m"])
    if all(len(t) < 2 for t in taus.values()):
        return None
    ns = sorted({n for (_, _, n), t in taus.items() if len(t) >= 2})
    rows = [r for r in rows if len(taus[(r["data"], r["algorithm"], r["n"])]) >= 2]
    fig, axes = plt.subplots(1, len(ns), figsize=(6.5 * len(ns), 4.8), constrained_layout=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, n in zip(axes[0], ns):
        lines = sorted({(r["data"], r["algorithm"]) for r in rows if r["n"] == n})
        for i, (data, alg) in enumerate(lines):
            rs = sorted((r for r in rows if r["n"] == n and r["data"] == data and r["algorithm"] == alg),
                        key=lambda r: r["tau"])
            color = colors[i % len(colors)]
            got = [r for r in rs if r["median"] is not None]
            if got:
                ax.errorbar([r["tau"] for r in got], [r["median"] for r in got],
                            yerr=[[r["median"] - r["low"] for r in got], [r["high"] - r["median"] for r in got]],
                            fmt="o-", color=color, capsize=3, label=f"{alg} on {data}: measured (median, min–max)")
            pred = [r for r in rs if r["predicted"] is not None and math.isfinite(r["predicted"])]
            if pred:
                knee = rs[0].get("predicted_knee_tau")
                ax.plot([r["tau"] for r in pred], [r["predicted"] for r in pred], "s--", color=color, alpha=0.7,
                        label=f"{alg} on {data}: theorem's prediction"
                              + (f" (knee, slope −1/2, at τ = {knee:.3g})" if knee else ""))
        ax.axvline(1.0 / n, color="gray", linestyle=":", label="τ = 1/n")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("τ (fraction of blocks each worker sends)")
        ax.set_ylabel(f"iterations to ||x−x*||² ≤ {rows[0]['eps']:g}·r0")
        ax.set_title(f"n = {n}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return fig


# ------------------------------------------------------------------------------------- the table
def table99(records: list[RunRecord]) -> list[dict]:
    """Per (data, method, n): tau = 1/n against tau = 1, iterations and uplink bytes to eps (medians over seeds).

    A configuration that does not reach eps reports where it stalls (median final dist_sq / r0).
    """
    groups = defaultdict(list)
    for r in records:
        groups[(r.data, r.algorithm + r.label_extra, r.n)].append(r)
    rows = []
    for (data, alg, n), runs in sorted(groups.items()):
        sparse = [r for r in runs if r.one_over_n and not r.full]
        full = [r for r in runs if r.full]
        if not sparse or not full:
            continue
        row = dict(data=data, method=alg, n=n, tau=f"{sparse[0].tau_m}/{sparse[0].m}", eps=runs[0].tol)
        for name, rs in (("sparse", sparse), ("full", full)):
            hits = [r.to_eps() for r in rs]
            ok = [h for h in hits if h[0] is not None]
            row[f"{name}_iterations"] = statistics.median(h[0] for h in ok) if len(ok) == len(rs) else None
            row[f"{name}_uplink"] = statistics.median(h[1] for h in ok) if len(ok) == len(rs) else None
            row[f"{name}_final"] = statistics.median(r.final_relative() for r in rs)
        row["last_step"] = max(r.history.get("dist_sq", ([0], []))[0][-1] for r in runs)
        if row["sparse_iterations"] is not None and row["full_iterations"] is not None:
            row["iterations_ratio"] = row["sparse_iterations"] / row["full_iterations"]
            row["uplink_ratio"] = row["sparse_uplink"] / row["full_uplink"]
            row["uplink_saved"] = 1.0 - row["uplink_ratio"]
        else:
            row["iterations_ratio"] = row["uplink_ratio"] = row["uplink_saved"] = None
        rows.append(row)
    return rows


def _fmt(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


def table_markdown(rows: list[dict]) -> str:
    """The 99% table as Markdown; the project's goal, at n = 100: iterations ratio <= 2 and uplink saved >= 97%
    (at n = 10, tau = 1/n cannot save more than 90%)."""
    lines = ["| data | method | n | τ | iterations to ε, τ=1/n | iterations, τ=1 | iterations ratio | uplink to ε, τ=1/n (B) "
             "| uplink, τ=1 (B) | uplink ratio | uplink saved | goal at n = 100 (≤2×, ≥97%) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["iterations_ratio"] is None:
            who = {(True, True): "either", (True, False): "τ=1/n", (False, True): "τ=1"}[
                (r["sparse_iterations"] is None, r["full_iterations"] is None)]
            where = (f"ε = {r['eps']:g} not reached by {who} in {r['last_step']:,} iterations; there: "
                     f"{r['sparse_final']:.2e}·r0 (τ=1/n), {r['full_final']:.2e}·r0 (τ=1)")
            lines.append(f"| {r['data']} | {r['method']} | {r['n']} | {r['tau']} | {_fmt(r['sparse_iterations'])} | "
                         f"{_fmt(r['full_iterations'])} | — | — | — | — | — | {where} |")
            continue
        met = r["iterations_ratio"] <= 2.0 and r["uplink_saved"] >= 0.97
        verdict = ("met" if met else "not met") if r["n"] >= 100 else "— (goal set for n = 100)"
        lines.append(f"| {r['data']} | {r['method']} | {r['n']} | {r['tau']} | {_fmt(r['sparse_iterations'])} | "
                     f"{_fmt(r['full_iterations'])} | {r['iterations_ratio']:.2f} | {_fmt(r['sparse_uplink'])} | "
                     f"{_fmt(r['full_uplink'])} | {r['uplink_ratio']:.4f} | {100 * r['uplink_saved']:.1f}% | "
                     f"{verdict} |")
    return "\n".join(lines) + "\n"


def write_table(rows: list[dict], out: Path) -> list[Path]:
    md = out / "table99.md"
    md.write_text(table_markdown(rows))
    path = out / "table99.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return [md, path]


def write_tau_table(rows: list[dict], out: Path) -> Path:
    path = out / "iterations_vs_tau.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["data"], r["algorithm"], r["n"], r["tau"])))
    return path


# ------------------------------------------------------------------------------------------ entry
def build_report(uri: str, *, experiment: str | None = None, parent_id: str | None = None,
                 outputs: str | Path = "outputs") -> dict:
    """Build the report of one sweep; returns {"parent": id, "dir": Path, "files": [...], "table": rows}.

    Raises
    ------
    ConfigError
        The tracking URI is unreachable, the experiment or parent run does not exist, or the sweep has no
        finished child run.
    """
    check_reachable(uri)
    client = MlflowClient(tracking_uri=uri)
    parents = []
    for pid in (parent_id.split(",") if parent_id else []):
        try:
            parents.append(client.get_run(pid.strip()))
        except Exception as exc:  # noqa: BLE001 - MLflow raises its own error types per store
            raise ConfigError("parent", f"The '--parent' parameter must be the id of a sweep run in {uri}; "
                                        f"got {pid!r} ({type(exc).__name__}).") from None
    parent = parents[0] if parents else latest_sweep(client, experiment or "isparse")
    records = {}
    for p in parents or [parent]:       # later sweeps (re-runs of failed jobs) replace earlier runs of a configuration
        for rec in load_children(client, p):
            records[(rec.key, rec.seed)] = rec
    records = sorted(records.values(), key=lambda r: (r.data, r.algorithm, r.label_extra, r.n, r.tau_m, r.seed))
    if not records:
        raise ConfigError("parent", f"The sweep {parent.info.run_id} has no child run with logged constants.")
    exp_name = client.get_experiment(parent.info.experiment_id).name
    out = Path(outputs) / "reports" / exp_name / parent.info.run_id
    out.mkdir(parents=True, exist_ok=True)
    files = []
    figures = convergence_figures(records)
    fig = tau_figure(records)
    if fig is not None:
        figures["iterations_vs_tau.png"] = fig
    for name, f in figures.items():
        f.savefig(out / name, dpi=110)
        plt.close(f)
        files.append(out / name)
    files.append(write_tau_table(add_slopes(tau_rows(records)), out))
    rows = table99(records)
    if rows:
        files += write_table(rows, out)
    for path in files:
        client.log_artifact(parent.info.run_id, str(path), artifact_path="report")
    client.set_tag(parent.info.run_id, "report_dir", str(out.resolve()))
    return {"parent": parent.info.run_id, "dir": out, "files": files, "table": rows, "records": records}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="isparse-report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="MLflow tracking URI "
                        "(default: the store isparse-run writes from this directory)")
    parser.add_argument("--experiment", default="isparse", help="MLflow experiment; its newest sweep is reported")
    parser.add_argument("--parent", default=None, help="the sweep's parent run id (instead of the newest); several "
                        "comma-separated ids merge sweeps (a later one's runs replace an earlier one's)")
    parser.add_argument("--outputs", default="outputs", help="directory for reports/<experiment>/<run id>/")
    args = parser.parse_args(argv)
    try:
        result = build_report(args.uri, experiment=args.experiment, parent_id=args.parent, outputs=args.outputs)
    except ConfigError as exc:
        raise SystemExit(f"isparse-report: {exc}") from None
    print(f"report of sweep {result['parent']} ({len(result['records'])} runs) in {result['dir']}:")
    for path in result["files"]:
        print(f"  {path.name}")
    if result["table"]:
        print(table_markdown(result["table"]))


if __name__ == "__main__":
    main()
