"""The report's tables, computed from the runs' records (:class:`~pipeline.report.records.RunRecord`).

- :func:`tau_rows`, :func:`add_slopes`: iterations to eps against tau per configuration (``iterations_vs_tau.csv``);
- :func:`table99`, :func:`table_markdown`: tau = 1/n against tau = 1 (``table99.md`` / ``table99.csv``);
- :func:`comparison`, :func:`compare_markdown`, :func:`grid_markdown`: each method arm against the baseline arm
  (``compare.md`` / ``compare.csv``, ``compare_grid.md`` / ``compare_grid.csv``).
"""
from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

from .records import ALIASES, RunRecord


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
