"""Reading a sweep's runs back from MLflow.

:class:`RunRecord` is one child run as it was logged (identity, constants, metric histories);
:func:`config_params` and :func:`assign_series` find the keys that tell its series apart;
:func:`latest_sweep` and :func:`load_children` find a sweep and read its runs.
"""
from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING


from isparse.compression.tau import resolve_tau
from isparse.errors import ConfigError

from ..tracking import summary_metrics

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__package__)   # "pipeline.report": the logger's name before the package was split

#: metrics read back for each run
METRICS = ("dist_sq", "subopt", "dist_sq_null", "bound", "uplink_bytes", "uplink_bytes_float64", "lyapunov")
#: the run metrics to eps (``eps`` on ``eps_on``: isparse.engines.to_eps), logged once at a run's end; absent where
#: eps was not reached (the run's tag ``time_to_eps`` says "not reached") or the run predates them
TO_EPS = ("time_to_eps_s", "rounds_to_eps", "uplink_bytes_to_eps", "downlink_bytes_to_eps")
#: the error measures a comparison may use (report.measure): ||x - x*||^2 and F(x) - F*, each relative to its t = 0
MEASURES = ("subopt", "dist_sq")

#: the share of a run's last logged steps whose mean dist_sq / r0 is its final error (RunRecord.tail_relative)
TAIL = 0.2

#: params that are part of every label already (or vary along a series): never a series key
IDENTITY = ("seed", "tau", "tau_setting", "algorithm.name", "data.name", "workers.n", "step.rule", "step.multiplier",
            "step.L")
#: params (or prefixes ending in ".") that say where and how a run was logged, not what it computed
BOOKKEEPING = ("paths.", "tracking.uri", "tracking.experiment", "tracking.run_name", "report.", "hydra.", "progress",
               "resume", "cache", "data.dir", "data.source", "compare.")
#: short names of series keys in labels (the names of docs/tracking.md)
ALIASES = {"blocks.size": "b", "messages.codec": "codec"}
def _top_level_keys() -> tuple[str, ...]:
    """The scalar top-level keys of the job's schema (``engine``, ``max_iter``, ``tol``, ...: ``pipeline.schema``):
    the undotted params that are config values; every other undotted param (n, m, gamma, r0, ...) is derived by the
    run."""
    from ..schema import JobConfig

    return tuple(k for k, f in JobConfig.fields().items() if "section" not in f.metadata)


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
    codec: str = "float64"         # the param codec: messages.codec's label (dither with its s)
    eps: float | None = None       # the params eps and eps_on of the run metrics to eps (None: a run before them)
    eps_on: str | None = None
    at_eps: dict = field(default_factory=dict)   # the run metrics TO_EPS it logged (none where eps was not reached)
    totals: dict = field(default_factory=dict)   # its end's summary/ metrics and last downlink_bytes (the sweep table)

    @property
    def eps_label(self) -> str | None:
        """The criterion of the run metrics to eps (e.g. ``F - F* <= 1e-06 (F(x0) - F*)``), None for a run that
        predates them."""
        from isparse.engines.to_eps import criterion_text

        return criterion_text(self.eps, self.eps_on) if self.eps is not None and self.eps_on else None

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
        """tau = 1/n as ``tau=auto`` sets it (``isparse.compression.tau``; tau = 1 when n = 1)."""
        return self.tau_m == resolve_tau("auto", self.m, self.n)[1]

    def label(self) -> str:
        tau = "1" if self.full else f"{self.tau_m}/{self.m}"
        group = f" {self.group_label}" if self.group else ""
        return f"{self.algorithm}{self.label_extra} n={self.n}{group} τ={tau}"

    def start(self, measure: str = "dist_sq") -> float:
        """The measure at t = 0: r0 for dist_sq, F(x^0) - F* for subopt (its first logged value)."""
        if measure == "dist_sq":
            return self.r0
        steps, values = self.history.get(measure, ([], []))
        return values[0] if steps and steps[0] == 0 else math.nan

    def to_eps(self, measure: str = "dist_sq", uplink: str = "uplink_bytes") -> tuple[int | None, float | None]:
        """(iterations, cumulative uplink bytes) at the first logged step with ``measure`` <= tol x its value at
        t = 0 (dist_sq <= tol * r0: the runs' own stopping rule); (None, None) if never. ``uplink``:
        ``uplink_bytes_float64`` for what the same messages would have cost as float64 values (a run logged
        before the codecs existed has only ``uplink_bytes``, float64 values)."""
        steps, values = self.history.get(measure, ([], []))
        start = self.start(measure)
        ups = self.history.get(uplink) or self.history.get("uplink_bytes", ([], []))
        for s, v in zip(steps, values):
            if v <= self.tol * start:
                return s, _value_at(ups, s)
        return None, None

    def final_relative(self) -> float:
        """The last logged dist_sq / r0 (where a run that does not reach eps stalls)."""
        steps, values = self.history.get("dist_sq", ([], []))
        return values[-1] / self.r0 if values else math.nan

    def tail_relative(self, fraction: float = TAIL, measure: str = "dist_sq") -> float:
        """The mean of ``measure`` / its value at t = 0 over the logged steps t >= (1 - fraction) x the last step
        (the final error): the level of the neighbourhood a constant-step stochastic method settles in (less noisy
        than the last value alone)."""
        tail = self._tail(measure, fraction)
        return statistics.fmean(tail) / self.start(measure) if tail else math.nan

    def _tail(self, measure: str, fraction: float) -> list[float]:
        return tail(*self.history.get(measure, ([], [])), fraction)

    def null_share(self, fraction: float = TAIL) -> float:
        """The share of the final ||x - x*||^2 that lies in null(A): mean dist_sq_null / mean dist_sq over the same
        tail (nan where dist_sq_null was not logged)."""
        null, dist = self._tail("dist_sq_null", fraction), self._tail("dist_sq", fraction)
        if not null or len(null) != len(dist) or not statistics.fmean(dist):
            return math.nan
        return statistics.fmean(null) / statistics.fmean(dist)

    def final_uplink(self) -> float | None:
        """Cumulative uplink bytes at the last logged step (the whole budget's)."""
        ups = self.history.get("uplink_bytes", ([], []))[1]
        return ups[-1] if ups else None

    def bound_verdict(self) -> str:
        """Whether the theorem's bound held at every logged step (the logged ``bound`` against the logged value of
        ``bound_quantity``): ``held``, ``exceeded at t = <first step>``, ``no theorem`` where no bound was logged,
        or ``not checked`` where the bounded quantity is not among the metrics read back."""
        bsteps, bounds = self.history.get("bound", ([], []))
        if not bsteps:
            return "no theorem"
        msteps, measured = self.history.get(self.bound_quantity, ([], []))
        if not msteps:
            return "not checked"
        at = dict(zip(msteps, measured))
        for s, b in zip(bsteps, bounds):
            v = at.get(s)
            if v is not None and math.isfinite(b) and v > b * (1 + 1e-12):
                return f"exceeded at t = {s:,}"
        return "held"

    @property
    def tuned_value(self):
        """The value of the tuned key (``compare.tune``) in this run, as logged (a string), or None."""
        return self.config.get(self.tune) if self.tune else None

    @property
    def side(self) -> str:
        """The arm's name (``compare.arm``), or the method's label when the run names no arm."""
        return self.arm or f"{self.algorithm}{self.label_extra} n={self.n}"


def at_eps_median(runs: list[RunRecord], key: str) -> float | None:
    """The median over ``runs`` of a run metric to eps (``key`` of :data:`TO_EPS`), None unless every run logged it
    (a run that did not reach eps logs none)."""
    values = [r.at_eps.get(key) for r in runs]
    return statistics.median(values) if values and all(v is not None for v in values) else None


def eps_label(runs: list[RunRecord]) -> str | None:
    """The criterion of the runs' metrics to eps when they share one (:attr:`RunRecord.eps_label`); ``mixed`` when
    they differ; None when none logged one."""
    labels = {r.eps_label for r in runs} - {None}
    return None if not labels else labels.pop() if len(labels) == 1 else "mixed"


def tail(steps, values, fraction: float = TAIL) -> list[float]:
    """The values logged at steps t >= (1 - fraction) x the last step (the final error is their mean)."""
    return [v for s, v in zip(steps, values) if s >= (1.0 - fraction) * steps[-1]] if len(values) else []


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
        if p.get("step.L", "shards") != "shards":
            extra += f" (L_{p['step.L']})"
        pred = t.get("predicted_iterations")
        role, arm, tune = (None if p.get(k) in (None, "", "None") else p[k]
                           for k in ("compare.role", "compare.arm", "compare.tune"))
        rec = RunRecord(run_id=run.info.run_id, status=run.info.status, algorithm=p["algorithm.name"],
                        data=t.get("data") or p.get("data.title") or p.get("data.name", "?"), n=int(p["n"]), m=int(p["m"]), tau=float(p["tau"]),
                        tau_m=int(p["tau_m"]), seed=int(p.get("seed", 0)), tol=float(p["tol"]), r0=float(p["r0"]),
                        label_extra=extra, predicted=float(pred) if pred not in (None, "", "None", "nan") else None,
                        bound_quantity=t.get("bound_quantity", "dist_sq"), config=config_params(p, top),
                        role=role, arm=arm, tune=tune, codec=p.get("codec", "float64"),
                        eps=float(p["eps"]) if "eps" in p else None, eps_on=p.get("eps_on"),
                        at_eps={k: v for k, v in summary_metrics(run.data.metrics).items() if k in TO_EPS},
                        totals={**summary_metrics(run.data.metrics),
                                **{k: run.data.metrics[k] for k in ("downlink_bytes",) if k in run.data.metrics}})
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
