"""isparse-report: read a sweep's runs back from MLflow and compare them with the theory.

Writes, as artifacts of the sweep's parent run (under ``report/``) and as files under
``<paths.outputs>/reports/<experiment>/<parent run id>/``:

1. ``convergence_<data>.png`` per data set: the measured quantity each theorem bounds (dist_sq,
   or the Lyapunov function, relative to its start) and the theorem's bound, against iterations and
   against cumulative uplink bytes, one line per configuration, and eps as a horizontal line.
2. ``iterations_vs_tau.png`` (when a series has several tau): iterations to eps against tau,
   measured (median over seeds, bars from min to max) and the theorem's prediction
   (``predicted_iterations``), one panel per n; ``iterations_vs_tau.csv`` with the log-log slopes.
3. ``table99.md`` / ``table99.csv`` (when the sweep has tau = 1/n and tau = 1 for the same series):
   iterations and uplink bytes to eps at tau = 1/n relative to tau = 1, and the share of uplink
   saved; where a configuration does not reach eps, the neighbourhood it stalls in.
4. ``compare.md`` / ``compare.csv`` (when runs carry ``compare.role``, i.e. a comparison experiment's arms,
   conf/arm/): per data set and n, each method arm against the baseline arm (``compare.role=baseline``): iterations
   and uplink bytes to eps as ratios method / baseline, or, where eps is not reached (constant-step methods), the
   final error and the whole budget's uplink; median and range over seeds. Where a key is tuned
   (``compare.tune``, e.g. ``algorithm.rho``) each arm uses its best grid value, and ``compare_grid.md`` /
   ``compare_grid.csv`` show the grid.
5. ``README.md``: what the report holds, how its series are formed, and what it could not build and why
   (also printed by the CLI).

A *series* is one data set, method and n, and one value of every other key that differs among the
sweep's runs (e.g. ``blocks.size``, shown as ``b``), found from the runs' params: only seed and tau
vary along a series. eps is each run's ``tol``: a run reaches it at the first logged step with
dist_sq <= tol * r0 (steps are logged every ``tracking.log_every`` iterations and at the last one).
Everything is recomputed from the logged metrics and params, so a report can be rebuilt at any time:

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
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from isparse.blocks import resolve_tau  # noqa: E402
from isparse.errors import ConfigError  # noqa: E402

from .plots import bytes_axis  # noqa: E402
from .tracking import check_reachable  # noqa: E402

log = logging.getLogger(__name__)

#: metrics read back for each run
METRICS = ("dist_sq", "bound", "uplink_bytes", "lyapunov")

#: the share of a run's last logged steps whose mean dist_sq / r0 is its final error (RunRecord.tail_relative)
TAIL = 0.2

#: params that are part of every label already (or vary along a series): never a series key
IDENTITY = ("seed", "tau", "tau_setting", "algorithm.name", "data.name", "workers.n", "step.rule", "step.multiplier")
#: params (or prefixes ending in ".") that say where and how a run was logged, not what it computed
BOOKKEEPING = ("paths.", "tracking.uri", "tracking.experiment", "tracking.run_name", "report.", "hydra.", "progress",
               "resume", "cache", "data.dir", "data.source", "compare.")
#: short names of series keys in labels (the README's names)
ALIASES = {"blocks.size": "b"}
#: the undotted keys of conf/config.yaml, if that file cannot be read (an installed, not editable, package)
TOP_LEVEL_FALLBACK = ("engine", "max_iter", "tol", "tau", "seed", "resume", "cache", "progress")


def _top_level_keys() -> tuple[str, ...]:
    """The scalar top-level keys of conf/config.yaml (``engine``, ``max_iter``, ``tol``, ...): the undotted params
    that are config values; every other undotted param (n, m, gamma, r0, ...) is derived by the run."""
    try:
        cfg = OmegaConf.load(Path(__file__).resolve().parent.parent / "conf" / "config.yaml")
    except OSError:
        return TOP_LEVEL_FALLBACK
    return tuple(k for k, v in cfg.items_ex(resolve=False) if not OmegaConf.is_config(v))


def config_params(params: dict, top_level=None) -> dict:
    """The params of a run that are config values and may tell its series apart (derived values, identity
    and bookkeeping keys removed)."""
    top = _top_level_keys() if top_level is None else top_level
    return {k: v for k, v in params.items()
            if ("." in k or k in top) and k not in IDENTITY and not k.startswith(BOOKKEEPING) and k not in BOOKKEEPING}


@dataclass
class RunRecord:
    """One child run of a sweep, as logged: its identity, constants and metric histories.

    ``config`` holds the run's config params that are not in the label already; ``group`` the
    (key, value) pairs of the keys that differ among the sweep's runs (set by :func:`assign_series`).
    """

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
    config: dict = field(default_factory=dict)
    group: tuple = ()
    role: str | None = None        # compare.role: "method", "baseline" or None (not a comparison run)
    arm: str | None = None         # compare.arm: the arm's name (conf/arm/<arm>.yaml)
    tune: str | None = None        # compare.tune: the key tuned on a grid (e.g. algorithm.rho), or None

    @property
    def group_label(self) -> str:
        """The series keys of this run, e.g. ``b=8`` ("" when the sweep varies nothing but seed and tau)."""
        return " ".join(f"{ALIASES.get(k, k)}={v}" for k, v in self.group)

    @property
    def series(self) -> tuple:
        """The series: data, method, its group and n (tau and the seed vary along it)."""
        return (self.data, self.algorithm + self.label_extra, self.group_label, self.n)

    @property
    def key(self) -> tuple:
        """The configuration without the seed (runs that differ only in the seed are repetitions)."""
        return (self.data, self.algorithm, self.label_extra, self.group, self.n, self.tau_m, self.m)

    @property
    def identity(self) -> tuple:
        """What a re-run of this run in a later sweep has in common with it: every config value and the seed."""
        return (self.data, self.algorithm, self.n, self.tau_m, self.m, self.seed, self.label_extra,
                tuple(sorted(self.config.items())))

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
        group = f" {self.group_label}" if self.group else ""
        return f"{self.algorithm}{self.label_extra} n={self.n}{group} τ={tau}"

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

    def tail_relative(self, fraction: float = TAIL) -> float:
        """The mean of dist_sq / r0 over the logged steps t >= (1 - fraction) x the last step: the level of the
        neighbourhood a constant-step stochastic method settles in (less noisy than the last value alone)."""
        steps, values = self.history.get("dist_sq", ([], []))
        if not values:
            return math.nan
        tail = [v for s, v in zip(steps, values) if s >= (1.0 - fraction) * steps[-1]]
        return statistics.fmean(tail) / self.r0

    def final_uplink(self) -> float | None:
        """Cumulative uplink bytes at the last logged step (the whole budget's)."""
        ups = self.history.get("uplink_bytes", ([], []))[1]
        return ups[-1] if ups else None

    @property
    def tuned_value(self):
        """The value of the tuned key (``compare.tune``) in this run, as logged (a string), or None."""
        return self.config.get(self.tune) if self.tune else None

    @property
    def side(self) -> str:
        """The arm's name (``compare.arm``), or the method's label when the run names no arm."""
        return self.arm or f"{self.algorithm}{self.label_extra} n={self.n}"


def assign_series(records: list[RunRecord]) -> list[str]:
    """Find the keys that tell series apart and set each record's ``group``; returns those keys.

    A key is a series key when it takes more than one value (or is missing in some runs) among runs of
    the same data set, method and n: keys that only follow the data set or the method (``problem.lam``
    from the data config, ``algorithm.schedule`` of ISGD) are not. Of keys that split the runs in exactly
    the same way (``data.lam`` and ``problem.lam`` = ``${data.lam}``), only the first is kept.
    """
    cells = defaultdict(list)
    for r in records:
        cells[(r.data, r.algorithm + r.label_extra, r.n)].append(r)
    keys = sorted({k for r in records for k in r.config})
    swept, seen = [], set()
    for k in keys:
        if not any(len({r.config.get(k) for r in cell}) > 1 for cell in cells.values()):
            continue
        ids = {}
        partition = tuple(ids.setdefault(r.config.get(k), len(ids)) for r in records)
        if partition not in seen:
            seen.add(partition)
            swept.append(k)
    for r in records:
        r.group = tuple((k, r.config.get(k, "—")) for k in swept)
    return swept


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


def load_children(client: MlflowClient, parent, notes: list | None = None,
                  failed: list | None = None) -> list[RunRecord]:
    """Every finished child run of ``parent`` that logged its constants, with its metric histories.

    Runs left out (not FINISHED) are named in ``notes`` when a list is given; those of them that logged their
    constants (e.g. a run that diverged) are appended to ``failed`` as RunRecords (status FAILED or KILLED, no
    histories) when a list is given, so that a tuning grid can show them. ``group`` is not set here: call
    :func:`assign_series` on all the records of a report.
    """
    runs = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                              max_results=5000)
    top = _top_level_keys()
    records = []
    for run in runs:
        p, t = run.data.params, run.data.tags
        if "r0" not in p or "tau_m" not in p:   # failed before its constants were logged
            if notes is not None:
                notes.append(f"left out {run.info.run_name} ({run.info.status}): it failed before logging its constants")
            continue
        extra = ""
        if p.get("step.rule", "theory") != "theory":
            extra += f" ({p['step.rule']} γ)"
        if float(p.get("step.multiplier", 1)) != 1:
            extra += f" ×{float(p['step.multiplier']):g}γ"
        pred = t.get("predicted_iterations")
        role, arm, tune = (None if p.get(k) in (None, "", "None") else p[k]
                           for k in ("compare.role", "compare.arm", "compare.tune"))
        rec = RunRecord(run_id=run.info.run_id, status=run.info.status, algorithm=p["algorithm.name"],
                        data=p.get("data.name", "?"), n=int(p["n"]), m=int(p["m"]), tau=float(p["tau"]),
                        tau_m=int(p["tau_m"]), seed=int(p.get("seed", 0)), tol=float(p["tol"]), r0=float(p["r0"]),
                        label_extra=extra, predicted=float(pred) if pred not in (None, "", "None", "nan") else None,
                        bound_quantity=t.get("bound_quantity", "dist_sq"), config=config_params(p, top),
                        role=role, arm=arm, tune=tune)
        if run.info.status != "FINISHED":       # killed, failed (diverged) or still running: not a result
            log.warning("report: leaving out %s (%s)", run.info.run_name, run.info.status)
            if notes is not None:
                notes.append(f"left out {run.info.run_name} ({run.info.status}"
                             + (f": {t['error'][:200]}" if t.get("error") else "") + ")")
            if failed is not None:
                failed.append(rec)
            continue
        for key in METRICS:
            hist = sorted(client.get_metric_history(run.info.run_id, key), key=lambda mm: mm.step)
            if hist:
                rec.history[key] = ([mm.step for mm in hist], [mm.value for mm in hist])
        records.append(rec)
    return sorted(records, key=lambda r: (r.data, r.algorithm, r.label_extra, r.n, r.tau_m, r.seed))


# ----------------------------------------------------------------------------------------- figures
def convergence_figures(records: list[RunRecord]) -> dict[str, plt.Figure]:
    """Per data set: the bounded quantity (relative to its start) and its bound vs iterations and vs uplink bytes,
    with eps (``tol``, on dist_sq / r0) as a horizontal line. The caller closes the figures (``plt.close``)."""
    by_data = defaultdict(list)
    for r in records:
        if r.seed == min(x.seed for x in records if x.key == r.key):    # one line per configuration
            by_data[r.data].append(r)
    figures = {}
    for data, runs in by_data.items():
        fig, axes = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        styles = ("-", "-.", ":")
        tols = set()
        for i, r in enumerate(runs):
            quantity = r.bound_quantity if r.bound_quantity in r.history else "dist_sq"
            steps, values = r.history.get(quantity, ([], []))
            if not values:
                continue
            if quantity == "dist_sq":
                tols.add(r.tol)
            scale = r.r0 if quantity == "dist_sq" else (values[0] or 1.0)
            up_steps, up = r.history.get("uplink_bytes", ([], []))
            up_at = dict(zip(up_steps, up))
            color, style = colors[i % len(colors)], styles[(i // len(colors)) % len(styles)]
            name = r.label() + ("" if quantity == "dist_sq" else f" [{quantity}]")
            for ax, xs in ((axes[0], steps), (axes[1], [up_at.get(s, 0) or math.nan for s in steps])):
                ax.semilogy(xs, [v / scale for v in values], color=color, linestyle=style, label=name)
                b_steps, bound = r.history.get("bound", ([], []))
                if bound:
                    bx = b_steps if ax is axes[0] else [up_at.get(s, 0) or math.nan for s in b_steps]
                    ax.semilogy(bx, [b / scale for b in bound], "--", color=color, linewidth=0.9)
        for tol in sorted(tols):
            for ax in axes:
                ax.axhline(tol, color="gray", linestyle=":", linewidth=1.2,
                           label=f"ε: ‖x−x*‖²/r0 = tol = {tol:g}" if ax is axes[0] else None)
        axes[0].set_xlabel("iteration t")
        axes[1].set_xlabel("uplink bytes, all workers, cumulative (log scale)")
        axes[1].set_xscale("log")
        bytes_axis(axes[1].xaxis)
        axes[1].xaxis.set_minor_formatter(NullFormatter())
        axes[0].set_ylabel("measured / start (solid), theorem's bound / start (dashed)")
        for ax in axes:
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7, loc="best")
        fig.suptitle(f"{data}: convergence of each configuration (seed {min(r.seed for r in runs)})")
        figures[f"convergence_{data}.png"] = fig
    return figures


def tau_rows(records: list[RunRecord]) -> list[dict]:
    """Iterations to eps per configuration over seeds: median, min, max, and the prediction.

    ``group`` names the series keys (e.g. ``b=8``; "" when the sweep varies only seed and tau).
    """
    groups = defaultdict(list)
    for r in records:
        groups[r.key].append(r)
    rows = []
    for runs in groups.values():
        one = runs[0]
        its = [r.to_eps()[0] for r in runs]
        reached = [i for i in its if i is not None]
        rows.append(dict(data=one.data, algorithm=one.algorithm + one.label_extra, group=one.group_label, n=one.n,
                         tau=one.tau_m / one.m, tau_m=one.tau_m, m=one.m, seeds=len(runs),
                         reached=len(reached), median=statistics.median(reached) if reached else None,
                         low=min(reached) if reached else None, high=max(reached) if reached else None,
                         predicted=one.predicted, eps=one.tol))
    return rows


def _line(row: dict) -> tuple:
    """The series of a row of :func:`tau_rows`: data, method, group, n."""
    return (row["data"], row["algorithm"], row.get("group", ""), row["n"])


def add_slopes(rows: list[dict]) -> list[dict]:
    """Per series (data, method, group, n), sorted by tau: the log-log slope of the predicted and the measured
    iterations from the previous tau (``predicted_slope``, ``measured_slope``), and ``predicted_knee_tau``,
    the tau where the predicted slope crosses -1/2 (interpolated in log tau between segment midpoints).

    For Theorem 3 the prediction is proportional to 1 + 1/(n tau): slope -1 for tau << 1/n, 0 for
    tau >> 1/n and exactly -1/2 at tau = 1/n, so the knee lies at tau = 1/n.
    """
    lines = defaultdict(list)
    for r in rows:
        lines[_line(r)].append(r)
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


def _series_name(data, alg, group, n=None) -> str:
    return f"{alg} on {data}" + (f", {group}" if group else "") + (f", n = {n}" if n is not None else "")


def single_tau_series(rows: list[dict]) -> list[str]:
    """The series of :func:`tau_rows` with one tau only (left out of ``iterations_vs_tau.png``)."""
    taus = defaultdict(set)
    for r in rows:
        taus[_line(r)].add(r["tau"])
    return [_series_name(*line) + f" (τ = {next(iter(t)):.3g})" for line, t in sorted(taus.items()) if len(t) < 2]


def tau_ticks(axis, taus) -> None:
    """Major ticks of a log tau axis at the measured tau values (``0.267``), thinned so that labels keep
    apart (8% of the axis' log range at least); no minor labels."""
    taus = sorted({t for t in taus if t > 0})
    span = math.log10(taus[-1] / taus[0]) or 1.0
    kept = []
    for t in taus:
        if not kept or math.log10(t / kept[-1]) >= 0.08 * span:
            kept.append(t)
    axis.set_major_locator(FixedLocator(kept))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    axis.set_minor_formatter(NullFormatter())


def tau_figure(records: list[RunRecord]) -> plt.Figure | None:
    """Iterations to eps against tau (log-log), measured and predicted, one line and one legend entry per series
    (data, method, group) in one panel per n; None when every series has a single tau. The caller closes it."""
    rows = add_slopes(tau_rows(records))
    taus = defaultdict(set)
    for r in rows:
        taus[_line(r)].add(r["tau_m"])
    rows = [r for r in rows if len(taus[_line(r)]) >= 2]
    if not rows:
        return None
    ns = sorted({r["n"] for r in rows})
    fig, axes = plt.subplots(1, len(ns), figsize=(6.5 * len(ns), 4.8), constrained_layout=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, n in zip(axes[0], ns):
        lines = sorted({_line(r)[:3] for r in rows if r["n"] == n})
        for i, (data, alg, group) in enumerate(lines):
            rs = sorted((r for r in rows if r["n"] == n and _line(r)[:3] == (data, alg, group)), key=lambda r: r["tau"])
            color = colors[i % len(colors)]
            name = _series_name(data, alg, group)
            got = [r for r in rs if r["median"] is not None]
            if got:
                ax.errorbar([r["tau"] for r in got], [r["median"] for r in got],
                            yerr=[[r["median"] - r["low"] for r in got], [r["high"] - r["median"] for r in got]],
                            fmt="o-", color=color, capsize=3, label=f"{name}: measured (median, min–max)")
            pred = [r for r in rs if r["predicted"] is not None and math.isfinite(r["predicted"])]
            if pred:
                knee = rs[0].get("predicted_knee_tau")
                ax.plot([r["tau"] for r in pred], [r["predicted"] for r in pred], "s--", color=color, alpha=0.7,
                        label=f"{name}: theorem's prediction"
                              + (f" (knee, slope −1/2, at τ = {knee:.3g})" if knee else ""))
        ax.axvline(1.0 / n, color="gray", linestyle=":", label="τ = 1/n")
        ax.set_xscale("log")
        ax.set_yscale("log")
        tau_ticks(ax.xaxis, [r["tau"] for r in rows if r["n"] == n])
        ax.set_xlabel("τ (fraction of blocks each worker sends)")
        eps = sorted({r["eps"] for r in rows if r["n"] == n})
        ax.set_ylabel(f"iterations to ||x−x*||² ≤ {'/'.join(f'{e:g}' for e in eps)}·r0")
        ax.set_title(f"n = {n}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return fig


# ------------------------------------------------------------------------------------- the table
def table99(records: list[RunRecord]) -> list[dict]:
    """Per series (data, method, group, n): tau = 1/n against tau = 1, iterations and uplink bytes to eps (medians
    over seeds). Series without both are left out (:func:`table99_gaps` says why).

    A configuration that does not reach eps reports where it stalls (median final dist_sq / r0).
    """
    groups = defaultdict(list)
    for r in records:
        groups[r.series].append(r)
    rows = []
    for (data, alg, group, n), runs in sorted(groups.items()):
        sparse = [r for r in runs if r.one_over_n and not r.full]
        full = [r for r in runs if r.full]
        if not sparse or not full:
            continue
        row = dict(data=data, method=alg, group=group, n=n, tau=f"{sparse[0].tau_m}/{sparse[0].m}", eps=runs[0].tol)
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


def _tau_list(records: list[RunRecord]) -> str:
    """The sweep's tau values, in order, as tau_m/m ("1" for tau = 1)."""
    return ", ".join(label for _, label in sorted({(r.tau_m / r.m, "1" if r.full else f"{r.tau_m}/{r.m}")
                                                   for r in records}))


def table99_gaps(records: list[RunRecord]) -> list[str]:
    """Why series are missing from :func:`table99`: one line per series without a tau = 1/n or a tau = 1 run
    (one line for the whole sweep when no run of it has that tau)."""
    groups = defaultdict(list)
    for r in records:
        groups[r.series].append(r)
    no_full = not any(r.full for r in records)
    no_sparse = not any(r.one_over_n and not r.full for r in records)
    if no_full or no_sparse:
        what = " and ".join(w for w, missing in (("τ = 1/n", no_sparse), ("τ = 1", no_full)) if missing)
        taus = _tau_list(records)
        hint = "; τ = 1/n is τm = ceil(m/n): tau=auto or tau=1/n" if no_sparse else "; add tau=1.0 to the sweep"
        return [f"no {what} run in the sweep (τ here: {taus}{hint})"]
    out = []
    for (data, alg, group, n), runs in sorted(groups.items()):
        missing = [w for w, ok in (("τ = 1/n", any(r.one_over_n and not r.full for r in runs)),
                                   ("τ = 1", any(r.full for r in runs))) if not ok]
        if missing:
            out.append(f"{_series_name(data, alg, group, n)}: no {' and no '.join(missing)} run")
    return out


def _fmt(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


#: the project's goal for the 99% table, set at n = 100 (at n = 10, tau = 1/n cannot save more than 90%)
GOAL_N, GOAL_RATIO, GOAL_SAVED = 100, 2.0, 0.97


def table_markdown(rows: list[dict]) -> str:
    """The 99% table as Markdown.

    The goal column (the project's goal: iterations ratio <= 2 and uplink saved >= 97%, set for n = 100)
    appears only when a row has n >= 100, filled in those rows only; the column saying where eps is not
    reached only when a row does not reach it.
    """
    goal = any(r["n"] >= GOAL_N for r in rows)
    stalled = any(r["iterations_ratio"] is None for r in rows)
    head = ["data", "method", "n", "τ", "iterations to ε, τ=1/n", "iterations, τ=1", "iterations ratio",
            "uplink to ε, τ=1/n (B)", "uplink, τ=1 (B)", "uplink ratio", "uplink saved"]
    if goal:
        head.append(f"goal at n = {GOAL_N} (≤{GOAL_RATIO:g}×, ≥{100 * GOAL_SAVED:g}%)")
    if stalled:
        head.append("where ε is not reached")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        method = r["method"] + (f", {r['group']}" if r.get("group") else "")
        cells = [r["data"], method, str(r["n"]), r["tau"], _fmt(r["sparse_iterations"]), _fmt(r["full_iterations"])]
        if r["iterations_ratio"] is None:
            who = {(True, True): "either", (True, False): "τ=1/n", (False, True): "τ=1"}[
                (r["sparse_iterations"] is None, r["full_iterations"] is None)]
            cells += ["—"] * 5
            verdict = "not met (ε not reached)"
            where = (f"ε = {r['eps']:g} not reached by {who} in {r['last_step']:,} iterations; there: "
                     f"{r['sparse_final']:.2e}·r0 (τ=1/n), {r['full_final']:.2e}·r0 (τ=1)")
        else:
            cells += [f"{r['iterations_ratio']:.2f}", _fmt(r["sparse_uplink"]), _fmt(r["full_uplink"]),
                      f"{r['uplink_ratio']:.4f}", f"{100 * r['uplink_saved']:.1f}%"]
            verdict = ("met" if r["iterations_ratio"] <= GOAL_RATIO and r["uplink_saved"] >= GOAL_SAVED
                       else "not met")
            where = ""
        if goal:
            cells.append(verdict if r["n"] >= GOAL_N else "")
        if stalled:
            cells.append(where)
        lines.append("| " + " | ".join(cells) + " |")
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


# ------------------------------------------------------------------------- method vs baseline (comparisons)
def _context(r: RunRecord) -> tuple:
    """The series keys of a run other than its tuned key: runs of two arms are compared when these agree."""
    return tuple((k, v) for k, v in r.group if k != r.tune)


def _median_range(values: list[float]) -> tuple[float | None, float | None, float | None]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def _score(runs: list[RunRecord]) -> tuple:
    """How good one arm's runs at one grid value are (smaller is better): the median iterations to eps when every
    run reaches it, else the median final error (:meth:`RunRecord.tail_relative`); reaching eps beats not."""
    hits = [r.to_eps()[0] for r in runs]
    if all(h is not None for h in hits):
        return (0, statistics.median(hits))
    err = statistics.median(r.tail_relative() for r in runs)
    return (1, err if math.isfinite(err) else math.inf)


def comparison(records: list[RunRecord], failed: list[RunRecord] = ()) -> tuple[list[dict], list[dict], list[str]]:
    """The method-vs-baseline tables of a comparison sweep (runs with ``compare.role``).

    An *arm* is the runs of one ``compare.arm`` (or method label) on one data set and n, with one value of every
    series key but the tuned one (``compare.tune``, e.g. ``algorithm.rho``). Where a key is tuned, each arm keeps its
    best grid value (:func:`_score`: fewest median iterations to eps, else the lowest median final error).
    Each method arm is compared with the baseline arm of the same data set and series keys, at the same n if the
    baseline has that n, else at the baseline's single n (e.g. the paper's n = 1 SGD). Per seed (the baseline run of
    the same seed, else the baseline's median) the ratio method / baseline of

    - iterations to eps and uplink bytes to eps, when every run of both arms reaches eps ("iterations to ε");
    - else the final error (mean dist_sq / r0 over the last ``TAIL`` of the logged steps) and the uplink bytes of
      the whole budget ("final error"): constant-step methods that settle in a neighbourhood;

    with the median and the range (min, max) over seeds.

    Returns
    -------
    (rows, grid, gaps)
        ``rows``: one dict per method arm (keys: data, n, method, baseline, baseline_n, measure, eps, budget,
        method_value, baseline_value, ratio, ratio_low, ratio_high, method_uplink, baseline_uplink, uplink_ratio,
        uplink_ratio_low, uplink_ratio_high, seeds, context, tuned, method_best, baseline_best).
        ``grid``: one dict per arm and grid value when a key is tuned (data, n, arm, role, context, key, value, runs,
        failed, reached, median_iterations, median_error, best). ``gaps``: why method arms have no row.
    """
    arms = defaultdict(lambda: defaultdict(list))     # (data, side, n, context, role) -> tuned value -> runs
    for r in records:
        if r.role in ("method", "baseline"):
            arms[(r.data, r.side, r.n, _context(r), r.role)][r.tuned_value].append(r)
    failed_at = defaultdict(list)
    for r in failed:
        if r.role in ("method", "baseline"):
            failed_at[(r.data, r.side, r.n, r.role, r.tuned_value)].append(r)
    best, grid = {}, []
    for key, by_value in sorted(arms.items(), key=lambda kv: tuple(map(str, kv[0]))):
        data, side, n, context, role = key
        scored = {v: (2, math.inf) if failed_at.get((data, side, n, role, v)) else _score(rs)    # a diverged seed:
                  for v, rs in by_value.items()}                                                  # never the pick
        pick = min(scored, key=lambda v: scored[v])
        best[key] = (pick, by_value[pick])
        tune = by_value[pick][0].tune
        if tune:
            values = set(by_value) | {r.tuned_value for (d, s_, nn, ro, _), rs in failed_at.items()
                                      for r in rs if (d, s_, nn, ro) == (data, side, n, role)}
            for v in sorted(values, key=_num):
                rs = by_value.get(v, [])
                hits = [r.to_eps()[0] for r in rs]
                grid.append(dict(data=data, n=n, arm=side, role=role, context=_context_label(context), key=tune,
                                 value=v, runs=len(rs), failed=len(failed_at.get((data, side, n, role, v), [])),
                                 reached=sum(h is not None for h in hits),
                                 median_iterations=(statistics.median(hits) if rs and all(h is not None for h in hits)
                                                    else None),
                                 median_error=statistics.median(r.tail_relative() for r in rs) if rs else None,
                                 best=(v == pick)))
    rows, gaps = [], []
    baselines = {k: v for k, v in best.items() if k[4] == "baseline"}
    for key, (pick, runs) in best.items():
        data, side, n, context, role = key
        if role != "method":
            continue
        cands = [k for k in baselines if k[0] == data and k[3] == context]
        same_n = [k for k in cands if k[2] == n]
        if same_n:
            cands = same_n
        if len(cands) != 1:
            gaps.append(f"{data} {side} n={n}{(' ' + _context_label(context)) if context else ''}: "
                        + ("no baseline run (compare.role=baseline) of the same data set and series keys" if not cands
                           else f"{len(cands)} baselines fit ({', '.join(f'{k[1]} n={k[2]}' for k in cands)})"))
            continue
        bkey = cands[0]
        bpick, bruns = baselines[bkey]
        by_seed = {r.seed: r for r in bruns}
        reach = all(r.to_eps()[0] is not None for r in runs + bruns)
        if reach:
            value = lambda r: r.to_eps()[0]                       # noqa: E731
            uplink = lambda r: r.to_eps()[1]                      # noqa: E731
        else:
            value = lambda r: r.tail_relative()                   # noqa: E731
            uplink = lambda r: r.final_uplink()                   # noqa: E731
        b_value = statistics.median(value(r) for r in bruns)
        b_up = _median_range([uplink(r) for r in bruns])[0]
        ratios, up_ratios = [], []
        for r in runs:
            b = by_seed.get(r.seed)
            bv, bu = (value(b), uplink(b)) if b is not None else (b_value, b_up)
            ratios.append(value(r) / bv if bv else None)
            up_ratios.append(uplink(r) / bu if bu and uplink(r) is not None else None)
        ratio = _median_range(ratios)
        up_ratio = _median_range(up_ratios)
        rows.append(dict(data=data, n=n, method=side, baseline=bkey[1], baseline_n=bkey[2],
                         measure="iterations to ε" if reach else "final error", eps=runs[0].tol,
                         budget=max(r.history.get("dist_sq", ([0], []))[0][-1] for r in runs + bruns),
                         method_value=statistics.median(value(r) for r in runs), baseline_value=b_value,
                         ratio=ratio[0], ratio_low=ratio[1], ratio_high=ratio[2],
                         method_uplink=_median_range([uplink(r) for r in runs])[0], baseline_uplink=b_up,
                         uplink_ratio=up_ratio[0], uplink_ratio_low=up_ratio[1], uplink_ratio_high=up_ratio[2],
                         seeds=len(runs), context=_context_label(context), tuned=runs[0].tune or "",
                         method_best=pick if runs[0].tune else "", baseline_best=bpick if runs[0].tune else "",
                         method_tau=f"{runs[0].tau_m}/{runs[0].m}", baseline_tau=f"{bruns[0].tau_m}/{bruns[0].m}"))
    rows.sort(key=lambda r: (r["data"], r["context"], r["n"], r["method"]))
    return rows, grid, gaps


def _num(v):
    """Sort key of logged values: numbers by value, then the rest as strings."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _context_label(context: tuple) -> str:
    return " ".join(f"{ALIASES.get(k, k)}={v}" for k, v in context)


def _ratio_cell(mid, low, high, spec="{:.3g}") -> str:
    if mid is None:
        return "—"
    text = spec.format(mid)
    return text if low == high else f"{text} [{spec.format(low)}–{spec.format(high)}]"


def compare_markdown(rows: list[dict]) -> str:
    """The method-vs-baseline table as Markdown: ratios are method / baseline, median [min–max] over seeds."""
    tuned = any(r["tuned"] for r in rows)
    context = any(r["context"] for r in rows)
    head = ["data"] + (["keys"] if context else []) + [
        "method", "n", "τ", "baseline", "baseline n", "measure", "method", "baseline", "ratio (median [min–max])",
        "uplink, method (B)", "uplink, baseline (B)", "uplink ratio (median [min–max])", "seeds"]
    if tuned:
        head += ["tuned key", "method's best", "baseline's best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        iters = r["measure"] == "iterations to ε"
        fmt = (lambda v: _fmt(v)) if iters else (lambda v: "—" if v is None else f"{v:.3g}")
        measure = f"iterations to ε = {r['eps']:g}" if iters else f"final error after {r['budget']:,}"
        cells = [r["data"]] + ([r["context"]] if context else []) + [
            r["method"], str(r["n"]), r["method_tau"], r["baseline"], str(r["baseline_n"]), measure,
            fmt(r["method_value"]), fmt(r["baseline_value"]), _ratio_cell(r["ratio"], r["ratio_low"], r["ratio_high"]),
            _fmt(r["method_uplink"]), _fmt(r["baseline_uplink"]),
            _ratio_cell(r["uplink_ratio"], r["uplink_ratio_low"], r["uplink_ratio_high"], "{:.4f}"), str(r["seeds"])]
        if tuned:
            cells += [r["tuned"], str(r["method_best"]), str(r["baseline_best"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def grid_markdown(grid: list[dict]) -> str:
    """The tuning grid as Markdown: per arm and value, the median iterations to eps or final error; the pick marked."""
    context = any(g["context"] for g in grid)
    head = ["data"] + (["keys"] if context else []) + ["arm", "role", "n", "key", "value", "runs", "failed",
                                                       "reached ε", "median iterations to ε", "median final error",
                                                       "picked"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in grid:
        cells = [g["data"]] + ([g["context"]] if context else []) + [
            g["arm"], g["role"], str(g["n"]), g["key"], str(g["value"]), str(g["runs"]),
            str(g["failed"]) + (" (diverged or failed)" if g["failed"] else ""), f"{g['reached']}/{g['runs']}",
            _fmt(g["median_iterations"]), "—" if g["median_error"] is None else f"{g['median_error']:.3g}",
            "best" if g["best"] else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_comparison(rows: list[dict], grid: list[dict], out: Path) -> list[Path]:
    """compare.md / compare.csv, and compare_grid.md / compare_grid.csv when a key was tuned."""
    files = []
    for name, items, md in (("compare", rows, compare_markdown), ("compare_grid", grid, grid_markdown)):
        if not items:
            continue
        (out / f"{name}.md").write_text(md(items))
        path = out / f"{name}.csv"
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(items[0]))
            writer.writeheader()
            writer.writerows(items)
        files += [out / f"{name}.md", path]
    return files


def write_tau_table(rows: list[dict], out: Path) -> Path:
    path = out / "iterations_vs_tau.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["data"], r["algorithm"], r["group"], r["n"], r["tau"])))
    return path


def write_readme(out: Path, *, parent: str, experiment: str, records: list[RunRecord], series_keys: list[str],
                 built: list[str], not_built: list[str], notes: list[str]) -> Path:
    """``README.md`` of a report: what it holds, its series, what it could not build and why."""
    keys = ", ".join(f"{k} (shown as {ALIASES[k]})" if k in ALIASES else k for k in series_keys)
    text = [f"# Report of sweep {parent}", "",
            f"{len(records)} finished runs of the MLflow experiment `{experiment}`. One series per data set, method, n"
            + (f" and {keys}" if series_keys else "") + ": "
            + ("the keys besides seed and τ that differ among the runs." if series_keys
               else "no key besides seed and τ differs among the runs."), "",
            "## Built", ""] + [f"- {b}" for b in built] + [""]
    if not_built:
        text += ["## Not built", ""] + [f"- {b}" for b in not_built] + [""]
    if notes:
        text += ["## Notes", ""] + [f"- {b}" for b in notes] + [""]
    path = out / "README.md"
    path.write_text("\n".join(text))
    return path


# ------------------------------------------------------------------------------------------ entry
def build_report(uri: str, *, experiment: str | None = None, parent_id: str | None = None,
                 outputs: str | Path = "outputs") -> dict:
    """Build the report of one sweep.

    Returns
    -------
    dict
        ``parent`` (run id), ``dir`` (Path), ``files`` (list of Path), ``table`` (rows of table99, maybe empty),
        ``compare`` / ``compare_grid`` (rows of the method-vs-baseline table and of its tuning grid, maybe empty;
        :func:`comparison`), ``failed`` (RunRecords of runs that logged their constants but did not finish),
        ``records`` (the RunRecords), ``series_keys`` (the keys besides seed and tau that differ among the runs)
        and ``not_built`` / ``notes`` (lines: what the report could not build and why, runs left out, ...; the
        same as in its ``README.md``).

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
    notes, not_built = [], []
    records, failed = {}, {}
    for p in parents or [parent]:       # later sweeps (re-runs of failed jobs) replace earlier runs of a configuration
        lost = []
        for rec in load_children(client, p, notes, lost):
            records[rec.identity] = rec
            failed.pop(rec.identity, None)
        for rec in lost:
            failed[rec.identity] = rec
    records = list(records.values())
    failed = [r for k, r in failed.items() if k not in {x.identity for x in records}]
    if not records:
        raise ConfigError("parent", f"The sweep {parent.info.run_id} has no child run with logged constants.")
    series_keys = assign_series(records)
    records.sort(key=lambda r: (r.data, r.algorithm, r.label_extra, r.n, r.group, r.tau_m, r.seed))
    exp_name = client.get_experiment(parent.info.experiment_id).name
    out = Path(outputs) / "reports" / exp_name / parent.info.run_id
    out.mkdir(parents=True, exist_ok=True)
    files = []
    figures = convergence_figures(records)
    rows = add_slopes(tau_rows(records))
    single = single_tau_series(rows)
    try:
        fig = tau_figure(records)
        if fig is not None:
            figures["iterations_vs_tau.png"] = fig
            if single:
                notes.append("iterations_vs_tau.png leaves out the series with a single τ: " + "; ".join(single))
        else:
            taus = _tau_list(records)
            not_built.append(f"iterations_vs_tau.png not built: each of the {len(single)} series has a single τ "
                             f"(τ here: {taus}); sweep tau (e.g. tau=0.5/n,1/n,1.0) to draw iterations against τ")
        for name, f in figures.items():
            f.savefig(out / name, dpi=110)
            files.append(out / name)
    finally:
        for f in figures.values():
            plt.close(f)
    files.append(write_tau_table(rows, out))
    table = table99(records)
    gaps = table99_gaps(records)
    if table:
        files += write_table(table, out)
        notes += [f"table99 leaves out {g}" for g in gaps]
    elif any(r.role for r in records):    # a comparison sweep: its arms are compared in compare.md instead
        not_built.append("table99 not built: no series of this comparison sweep has both τ = 1/n and τ = 1 "
                         "(its arms are compared in compare.md)")
    else:
        not_built.append(f"table99 not built: {'; '.join(gaps)}")
    compare, grid, compare_gaps = comparison(records, failed)
    if compare:
        files += write_comparison(compare, grid, out)
        notes += [f"compare leaves out {g}" for g in compare_gaps]
    elif any(r.role for r in records):
        not_built.append("compare not built: " + ("; ".join(compare_gaps) or "no run has compare.role=method"))
    missed = sorted({f"{r.label()} (seed {r.seed})" for r in records if r.to_eps()[0] is None})
    if missed:
        notes.append(f"ε (tol) not reached by: {', '.join(missed)}")
    built = [p.name for p in files]
    files.append(write_readme(out, parent=parent.info.run_id, experiment=exp_name, records=records,
                              series_keys=series_keys, built=built, not_built=not_built, notes=notes))
    for line in not_built + notes:
        log.info("report: %s", line)
    for path in files:
        client.log_artifact(parent.info.run_id, str(path), artifact_path="report")
    client.set_tag(parent.info.run_id, "report_dir", str(out.resolve()))
    return {"parent": parent.info.run_id, "dir": out, "files": files, "table": table, "records": records,
            "series_keys": series_keys, "not_built": not_built, "notes": notes, "compare": compare,
            "compare_grid": grid, "failed": failed}


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
    keys = ", ".join(result["series_keys"]) or "none"
    print(f"report of sweep {result['parent']} ({len(result['records'])} runs; series keys besides data, method, n: "
          f"{keys}) in {result['dir']}:")
    for path in result["files"]:
        print(f"  {path.name}")
    for line in result["not_built"]:
        print(line)
    for line in result["notes"]:
        print(f"note: {line}")
    if result["table"]:
        print(table_markdown(result["table"]))
    if result["compare"]:
        print(compare_markdown(result["compare"]))
    if result["compare_grid"]:
        print(grid_markdown(result["compare_grid"]))


if __name__ == "__main__":
    main()
