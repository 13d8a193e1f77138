"""The report's tables, computed from the runs' records (:class:`~pipeline.report._records.RunRecord`).

- :func:`tau_rows`, :func:`add_slopes`: iterations to eps against tau per configuration (``iterations_vs_tau.csv``);
- :func:`table99`, :func:`table_markdown`: tau = 1/n against tau = 1 (``table99.md`` / ``table99.csv``);
- :func:`sweep_rows`, :func:`sweep_markdown`: every configuration of any sweep side by side (``sweep.md`` /
  ``sweep.csv``).

The method-vs-baseline tables are :mod:`pipeline.report._compare`'s.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ._records import TO_EPS, RunRecord, at_eps_median, eps_label


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


# ------------------------------------------------------------------------------------- the table
def table99(records: list[RunRecord]) -> list[dict]:
    """Per series (data, method, group, n): tau = 1/n against tau = 1, iterations and uplink bytes to eps (medians
    over seeds). Series without both are left out (:func:`table99_gaps` says why).

    A configuration that does not reach eps reports where it stalls (median final dist_sq / r0).

    ``codec`` is the series' messages.codec; ``uplink_ratio_float64`` is the tau = 1/n uplink (its codec's bytes)
    over the tau = 1 run's uplink counted as float64 values (``uplink_bytes_float64`` at its eps): the share of
    the dense float64 uplink, beside ``uplink_ratio``, the tau-only share (both the same for float64).

    ``sparse_<m>`` / ``full_<m>`` for each run metric to eps ``<m>`` (time_to_eps_s, rounds_to_eps,
    uplink_bytes_to_eps, downlink_bytes_to_eps: logged by each run at its own ``eps`` on ``eps_on``, medians over
    seeds, None unless every run reached it), ``time_eps`` (that criterion) and ``time_ratio`` (τ = 1/n's time over
    τ = 1's).
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
        row = dict(data=data, method=alg, group=group, n=n, tau=f"{sparse[0].tau_m}/{sparse[0].m}", eps=runs[0].tol,
                   codec="/".join(sorted({r.codec for r in runs})))
        for name, rs in (("sparse", sparse), ("full", full)):
            hits = [r.to_eps() for r in rs]
            ok = [h for h in hits if h[0] is not None]
            row[f"{name}_iterations"] = statistics.median(h[0] for h in ok) if len(ok) == len(rs) else None
            row[f"{name}_uplink"] = statistics.median(h[1] for h in ok) if len(ok) == len(rs) else None
            row[f"{name}_final"] = statistics.median(r.final_relative() for r in rs)
            for key in TO_EPS:   # the run metrics to eps (its own eps on eps_on), None unless every run reached it
                row[f"{name}_{key}"] = at_eps_median(rs, key)
        dense = [r.to_eps(uplink="uplink_bytes_float64")[1] for r in full]
        row["full_uplink_float64"] = statistics.median(dense) if all(u is not None for u in dense) else None
        row["last_step"] = max(r.history.get("dist_sq", ([0], []))[0][-1] for r in runs)
        row["time_eps"] = eps_label(sparse + full)
        times = (row["sparse_time_to_eps_s"], row["full_time_to_eps_s"])
        row["time_ratio"] = times[0] / times[1] if None not in times and times[1] > 0 else None
        if row["sparse_iterations"] is not None and row["full_iterations"] is not None:
            row["iterations_ratio"] = row["sparse_iterations"] / row["full_iterations"]
            row["uplink_ratio"] = row["sparse_uplink"] / row["full_uplink"]
            row["uplink_saved"] = 1.0 - row["uplink_ratio"]
            row["uplink_ratio_float64"] = row["sparse_uplink"] / row["full_uplink_float64"]
            row["uplink_saved_float64"] = 1.0 - row["uplink_ratio_float64"]
        else:
            row["iterations_ratio"] = row["uplink_ratio"] = row["uplink_saved"] = None
            row["uplink_ratio_float64"] = row["uplink_saved_float64"] = None
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

    The columns of the run metrics to eps (time, its ratio, downlink) appear when a row's runs logged them. The goal
    column (the project's goal: iterations ratio <= 2 and uplink saved >= 97%, set for n = 100)
    appears only when a row has n >= 100, filled in those rows only; the column saying where eps is not
    reached only when a row does not reach it; the codec and the share of the dense float64 uplink only when a
    row's codec is not float64.
    """
    goal = any(r["n"] >= GOAL_N for r in rows)
    coded = any(r.get("codec", "float64") != "float64" for r in rows)
    stalled = any(r["iterations_ratio"] is None for r in rows)
    timed = any(r.get("time_eps") for r in rows)
    head = ["data", "method", "n", "τ", "iterations to ε, τ=1/n", "iterations, τ=1", "iterations ratio",
            "uplink to ε, τ=1/n (B)", "uplink, τ=1 (B)", "uplink ratio", "uplink saved"]
    if coded:
        head[2:2] = ["codec"]
        head += ["uplink ÷ dense float64", "saved vs dense float64"]
    if timed:
        head += ["ε of the times", "time to ε, τ=1/n (s)", "time to ε, τ=1 (s)", "time ratio",
                 "downlink to ε, τ=1/n (B)", "downlink to ε, τ=1 (B)"]
    if goal:
        head.append(f"goal at n = {GOAL_N} (≤{GOAL_RATIO:g}×, ≥{100 * GOAL_SAVED:g}%)")
    if stalled:
        head.append("where ε is not reached")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        method = r["method"] + (f", {r['group']}" if r.get("group") else "")
        cells = [r["data"], method, *([r.get("codec", "float64")] if coded else []), str(r["n"]), r["tau"],
                 _fmt(r["sparse_iterations"]), _fmt(r["full_iterations"])]
        if r["iterations_ratio"] is None:
            who = {(True, True): "either", (True, False): "τ=1/n", (False, True): "τ=1"}[
                (r["sparse_iterations"] is None, r["full_iterations"] is None)]
            cells += ["—"] * (7 if coded else 5)
            verdict = "not met (ε not reached)"
            where = (f"ε = {r['eps']:g} not reached by {who} in {r['last_step']:,} iterations; there: "
                     f"{r['sparse_final']:.2e}·r0 (τ=1/n), {r['full_final']:.2e}·r0 (τ=1)")
        else:
            cells += [f"{r['iterations_ratio']:.2f}", _fmt(r["sparse_uplink"]), _fmt(r["full_uplink"]),
                      f"{r['uplink_ratio']:.4f}", f"{100 * r['uplink_saved']:.1f}%"]
            if coded:
                cells += [f"{r['uplink_ratio_float64']:.5f}", f"{100 * r['uplink_saved_float64']:.2f}%"]
            verdict = ("met" if r["iterations_ratio"] <= GOAL_RATIO and r["uplink_saved"] >= GOAL_SAVED
                       else "not met")
            where = ""
        if timed:
            cells += [r.get("time_eps") or "—", _fmt(r.get("sparse_time_to_eps_s"), "{:.3g}"),
                      _fmt(r.get("full_time_to_eps_s"), "{:.3g}"), _fmt(r.get("time_ratio"), "{:.2f}"),
                      _fmt(r.get("sparse_downlink_bytes_to_eps")), _fmt(r.get("full_downlink_bytes_to_eps"))]
        if goal:
            cells.append(verdict if r["n"] >= GOAL_N else "")
        if stalled:
            cells.append(where)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _write_md_csv(stem: str, markdown: str, rows: list[dict], out: Path) -> list[Path]:
    """``<stem>.md`` (``markdown``) and ``<stem>.csv`` (``rows``, the first row's keys as the header) in ``out``."""
    md = out / f"{stem}.md"
    md.write_text(markdown)
    path = out / f"{stem}.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return [md, path]


def write_table(rows: list[dict], out: Path) -> list[Path]:
    return _write_md_csv("table99", table_markdown(rows), rows, out)


def write_tau_table(rows: list[dict], out: Path) -> Path:
    path = out / "iterations_vs_tau.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["data"], r["algorithm"], r["group"], r["n"], r["tau"])))
    return path


def sweep_rows(records: list[RunRecord]) -> list[dict]:
    """One row per configuration of the sweep (its runs over seeds), whatever it swept: the medians over seeds of the
    iterations run, the iterations, uplink and downlink bytes and time to eps (each run's own ``eps`` on ``eps_on``;
    the dist_sq <= tol r0 rule where a run predates them), the whole run's uplink, downlink and wall time, and the
    bound's verdict (:meth:`RunRecord.bound_verdict`, the runs' verdicts joined when they differ)."""
    groups = defaultdict(list)
    for r in records:
        groups[r.key].append(r)

    def med(values):
        values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        return statistics.median(values) if values else None

    rows = []
    for runs in groups.values():
        one = runs[0]
        to_eps = [r.to_eps() for r in runs]
        rounds = [r.at_eps.get("rounds_to_eps", i) if r.eps is not None else i for r, (i, _) in zip(runs, to_eps)]
        rows.append({"data": one.data, "configuration": one.label(), "codec": one.codec, "runs": len(runs),
                     "reached": sum(1 for i in rounds if i is not None),
                     "iterations": med([r.totals.get("iterations") for r in runs]),
                     "iterations_to_eps": med(rounds),
                     "uplink_to_eps": med([r.at_eps.get("uplink_bytes_to_eps", u) for r, (_, u) in zip(runs, to_eps)]),
                     "downlink_to_eps": med([r.at_eps.get("downlink_bytes_to_eps") for r in runs]),
                     "time_to_eps_s": med([r.at_eps.get("time_to_eps_s") for r in runs]),
                     "uplink_total": med([r.totals.get("uplink_bytes_total") for r in runs]),
                     "downlink_total": med([r.totals.get("downlink_bytes") for r in runs]),
                     "wall_s": med([r.totals.get("wall_s_total") for r in runs]),
                     "bound": "; ".join(sorted({r.bound_verdict() for r in runs})),
                     "eps": eps_label(runs) or f"dist_sq <= {one.tol:g} r0"})
    rows.sort(key=lambda r: (r["data"], r["configuration"]))
    return rows


def sweep_markdown(rows: list[dict]) -> str:
    """``sweep.md``: :func:`sweep_rows` as a table, the criterion of eps under it."""
    head = ["data", "configuration", "codec", "runs", "iterations", "iterations to ε", "uplink to ε (B)",
            "downlink to ε (B)", "time to ε (s)", "uplink (B)", "downlink (B)", "wall time (s)", "bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        reached = "" if r["reached"] in (0, r["runs"]) else f" ({r['reached']} of {r['runs']})"
        cells = [r["data"], r["configuration"], r["codec"], str(r["runs"]), _fmt(r["iterations"]),
                 (_fmt(r["iterations_to_eps"]) + reached) if r["reached"] else "not reached",
                 _fmt(r["uplink_to_eps"]), _fmt(r["downlink_to_eps"]), _fmt(r["time_to_eps_s"], "{:.3g}"),
                 _fmt(r["uplink_total"]), _fmt(r["downlink_total"]), _fmt(r["wall_s"], "{:.3g}"), r["bound"]]
        lines.append("| " + " | ".join(cells) + " |")
    criteria = sorted({r["eps"] for r in rows})
    return "\n".join(lines) + "\n\nε: " + "; ".join(criteria) + " (medians over seeds).\n"


def write_sweep_table(rows: list[dict], out: Path) -> list[Path]:
    """``sweep.md`` and ``sweep.csv`` of :func:`sweep_rows` in ``out``."""
    return _write_md_csv("sweep", sweep_markdown(rows), rows, out)
