"""The report's method-vs-baseline tables (the comparison experiments' arms, conf/arm/): :func:`comparison`,
:func:`compare_markdown`, :func:`grid_markdown` (``compare.md`` / ``compare.csv``, ``compare_grid.md`` /
``compare_grid.csv``)."""
from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ._records import ALIASES, MEASURES, RunRecord, at_eps_median, eps_label
from ._tables import _fmt


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


def comparison(records: list[RunRecord], failed: list[RunRecord] = (),
               measures: tuple[str, ...] = MEASURES) -> tuple[list[dict], list[dict], list[str]]:
    """The method-vs-baseline tables of a comparison sweep (runs with ``compare.role``).

    An *arm* is the runs of one ``compare.arm`` (or method label) on one data set and n, with one value of every
    series key but the tuned one (``compare.tune``, e.g. ``algorithm.rho``). Where a key is tuned, each arm keeps its
    best grid value (:func:`_score`: fewest median iterations to eps, else the lowest median final error).
    Each method arm is compared with each baseline arm of the same data set and series keys (e.g. GD with
    max_i L_i and one-machine GD with L_f), at the same n if the baseline has that n, else at the baseline's single
    n (e.g. the paper's n = 1 SGD). For each error measure of
    ``measures`` (``subopt``: F(x) - F*, ``dist_sq``: ||x - x*||^2, each relative to its value at t = 0), one row:
    per seed (the baseline run of the same seed, else the baseline's median) the ratio method / baseline of

    - iterations to eps and uplink bytes to eps, when every run of both arms reaches eps on that measure
      ("iterations to ε");
    - else the final error (the mean of the measure / its t = 0 value over the last ``TAIL`` of the logged steps)
      and the uplink bytes of the whole budget ("final error"): constant-step methods that settle in a
      neighbourhood;

    with the median and the range (min, max) over seeds. The dist_sq rows also give the share of the final
    ||x - x*||^2 that lies in null(A) (``dist_sq_null``; median over each arm's seeds), where it was logged.

    Returns
    -------
    (rows, grid, gaps)
        ``rows``: one dict per method arm and error measure (keys: data, n, method, baseline, baseline_n, error
        (subopt or dist_sq), measure, eps, budget, method_null_share, baseline_null_share,
        method_value, baseline_value, ratio, ratio_low, ratio_high, method_uplink, baseline_uplink, uplink_ratio,
        uplink_ratio_low, uplink_ratio_high, seeds, context, tuned, method_best, baseline_best; and the run metrics
        to eps, logged by each run at its own ``eps`` on ``eps_on`` (``isparse.engines.to_eps``), whatever the row's
        measure: time_eps (that criterion), method_ / baseline_time_to_eps_s, _rounds_to_eps, _uplink_bytes_to_eps,
        _downlink_bytes_to_eps (medians over seeds, None unless every run reached eps), time_ratio, time_ratio_low,
        time_ratio_high (per seed, as the other ratios) and time_reached (runs that reached eps, method / baseline)).
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
        if not cands or len({k[1] for k in cands}) != len(cands):
            gaps.append(f"{data} {side} n={n}{(' ' + _context_label(context)) if context else ''}: "
                        + ("no baseline run (compare.role=baseline) of the same data set and series keys" if not cands
                           else f"{len(cands)} baselines fit ({', '.join(f'{k[1]} n={k[2]}' for k in cands)})"))
            continue
        for bkey in sorted(cands, key=lambda k: k[1]):    # each baseline arm (e.g. GD with max_i L_i and with L_f)
            bpick, bruns = baselines[bkey]
            by_seed = {r.seed: r for r in bruns}
            for measure in measures:
                rows.append(_row(measure, data, n, side, context, pick, runs, bkey, bpick, bruns, by_seed))
    rows.sort(key=lambda r: (r["data"], r["context"], r["n"], r["method"], r["baseline"]))
    return rows, grid, gaps


def _row(measure, data, n, side, context, pick, runs, bkey, bpick, bruns, by_seed) -> dict:
    """One row of :func:`comparison`: a method arm against its baseline arm on one error measure."""
    reach = all(r.to_eps(measure)[0] is not None for r in runs + bruns)
    if reach:
        value = lambda r: r.to_eps(measure)[0]                # noqa: E731
        uplink = lambda r: r.to_eps(measure)[1]               # noqa: E731
    else:
        value = lambda r: r.tail_relative(measure=measure)    # noqa: E731
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
    time_ratios = []    # the run metric time_to_eps_s (eps on eps_on), per seed as above
    b_time = at_eps_median(bruns, "time_to_eps_s")
    for r in runs:
        b = by_seed.get(r.seed)
        bt = b.at_eps.get("time_to_eps_s") if b is not None else b_time
        mt = r.at_eps.get("time_to_eps_s")
        time_ratios.append(mt / bt if mt is not None and bt else None)
    time_ratio = _median_range(time_ratios) if all(t is not None for t in time_ratios) else (None, None, None)
    null = measure == "dist_sq"
    return dict(data=data, n=n, method=side, baseline=bkey[1], baseline_n=bkey[2], error=measure,
                measure="iterations to ε" if reach else "final error", eps=runs[0].tol,
                budget=max(r.history.get("dist_sq", ([0], []))[0][-1] for r in runs + bruns),
                method_value=statistics.median(value(r) for r in runs), baseline_value=b_value,
                ratio=ratio[0], ratio_low=ratio[1], ratio_high=ratio[2],
                method_uplink=_median_range([uplink(r) for r in runs])[0], baseline_uplink=b_up,
                uplink_ratio=up_ratio[0], uplink_ratio_low=up_ratio[1], uplink_ratio_high=up_ratio[2],
                method_null_share=_median_range([r.null_share() for r in runs])[0] if null else None,
                baseline_null_share=_median_range([r.null_share() for r in bruns])[0] if null else None,
                seeds=len(runs), context=_context_label(context), tuned=runs[0].tune or "",
                method_best=pick if runs[0].tune else "", baseline_best=bpick if runs[0].tune else "",
                method_tau=f"{runs[0].tau_m}/{runs[0].m}", baseline_tau=f"{bruns[0].tau_m}/{bruns[0].m}",
                time_eps=eps_label(runs + bruns),
                method_time_to_eps_s=at_eps_median(runs, "time_to_eps_s"),
                baseline_time_to_eps_s=at_eps_median(bruns, "time_to_eps_s"),
                time_ratio=time_ratio[0], time_ratio_low=time_ratio[1], time_ratio_high=time_ratio[2],
                **{f"{side}_{key}": at_eps_median(rs, key) for side, rs in (("method", runs), ("baseline", bruns))
                   for key in ("rounds_to_eps", "uplink_bytes_to_eps", "downlink_bytes_to_eps")},
                time_reached=f"{sum('time_to_eps_s' in r.at_eps for r in runs)}/{len(runs)} / "
                             f"{sum('time_to_eps_s' in r.at_eps for r in bruns)}/{len(bruns)}")


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


#: how the table names each error measure (relative to its value at t = 0)
ERROR_LABELS = {"subopt": "(F(x) − F*) / (F(x⁰) − F*)", "dist_sq": "‖x − x*‖² / r₀"}


def _share(v) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.0f}%"


def compare_markdown(rows: list[dict]) -> str:
    """The method-vs-baseline table as Markdown: ratios are method / baseline, median [min–max] over seeds; one row
    per error measure; the final ||x - x*||^2's share in null(A), where logged."""
    tuned = any(r["tuned"] for r in rows)
    context = any(r["context"] for r in rows)
    null = any(r.get("method_null_share") is not None for r in rows)
    timed = any(r.get("time_eps") for r in rows)
    head = ["data"] + (["keys"] if context else []) + [
        "method", "n", "τ", "baseline", "baseline n", "error", "measure", "method", "baseline",
        "ratio (median [min–max])", "uplink, method (B)", "uplink, baseline (B)", "uplink ratio (median [min–max])",
        "seeds"] + (["in null(A): method / baseline"] if null else [])
    if timed:
        head += ["ε of the times", "time to ε, method (s)", "time to ε, baseline (s)",
                 "time ratio (median [min–max])", "rounds to ε: method / baseline",
                 "downlink to ε: method / baseline (B)", "reached ε: method / baseline"]
    if tuned:
        head += ["tuned key", "method's best", "baseline's best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        iters = r["measure"] == "iterations to ε"
        fmt = (lambda v: _fmt(v)) if iters else (lambda v: "—" if v is None else f"{v:.3g}")
        measure = f"iterations to ε = {r['eps']:g}" if iters else f"final error after {r['budget']:,}"
        cells = [r["data"]] + ([r["context"]] if context else []) + [
            r["method"], str(r["n"]), r["method_tau"], r["baseline"], str(r["baseline_n"]), ERROR_LABELS[r["error"]],
            measure, fmt(r["method_value"]), fmt(r["baseline_value"]),
            _ratio_cell(r["ratio"], r["ratio_low"], r["ratio_high"]), _fmt(r["method_uplink"]),
            _fmt(r["baseline_uplink"]),
            _ratio_cell(r["uplink_ratio"], r["uplink_ratio_low"], r["uplink_ratio_high"], "{:.4f}"), str(r["seeds"])]
        if null:
            cells.append(_share(r.get("method_null_share")) + " / " + _share(r.get("baseline_null_share"))
                         if r.get("method_null_share") is not None else "")
        if timed:
            cells += [r.get("time_eps") or "—", _fmt(r.get("method_time_to_eps_s"), "{:.3g}"),
                      _fmt(r.get("baseline_time_to_eps_s"), "{:.3g}"),
                      _ratio_cell(r.get("time_ratio"), r.get("time_ratio_low"), r.get("time_ratio_high")),
                      f"{_fmt(r.get('method_rounds_to_eps'))} / {_fmt(r.get('baseline_rounds_to_eps'))}",
                      f"{_fmt(r.get('method_downlink_bytes_to_eps'))} / "
                      f"{_fmt(r.get('baseline_downlink_bytes_to_eps'))}",
                      r.get("time_reached", "")]
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


