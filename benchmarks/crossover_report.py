"""Item 12's tables, figure and verdicts, drawn from what :mod:`benchmarks.crossover` measured."""

from __future__ import annotations

from pathlib import Path

from .common import table
from .crossover_grid import (DOWN, DOWN_H, DOWN_RANDK, FIGURE, LAMBDA_GOAL_GD, LAMBDA_GOAL_LAM, LBFGS, METHODS,
                             PREDICTION_BAND, RECOMMENDATION_BAND, WORKERS_PER_HOST, d_label)

#: the time check's goals (issue 33): at 100 Mbit, IS↓'s time to ε at most this share of GD's; at 10:1, below L-BFGS's
TIME_GOAL_GD = 0.15
TIME_CHECK_TEXT = (
    "The issue's time check, on one `cluster=emulated` cluster of H = 16 hosts (n = 32 logical workers) with the "
    "synthetic d = 10⁶: at 100 Mbit symmetric, ISEGA with natural7 up and the fastest of the compressed "
    f"downlinks ({DOWN}; {DOWN_RANDK}; at the issue's τ = 1/H, {DOWN_H}) against full-communication GD (host sums, "
    f"float64), goal ≤ {TIME_GOAL_GD:g} × "
    "GD's time to ε; on 10:1 links (10 Mbit up, 100 Mbit down), against dask-ml's L-BFGS, goal: faster. The 16 "
    "hosts' Dask processes, the scheduler and the master share this machine's 2 cores, so a round's compute is the 32 "
    "workers' steps queued on 2 cores, not one host's step: the planner's split of the round (floor + up + down + "
    "compute) says which part a cluster of 16 real machines would shrink.")


def time_verdicts(res: dict) -> list[str]:
    """The time check's verdicts, one line per goal, with the measured times and the planner's split of the round of
    the faster compressed-downlink run."""
    out = []
    for c in res.get("cells", []):
        runs, cap = c["runs"], res["grid"]["cap"]
        ours = {k: runs[k] for k in (DOWN, DOWN_RANDK, DOWN_H) if k in runs}
        reached = {k: r for k, r in ours.items() if r.get("reached")}
        best = min(reached, key=lambda k: reached[k]["time"]) if reached else next(iter(ours), None)
        if best is None:
            continue
        plan = c.get("planner", {}).get("methods", {}).get(best, {})
        split = (f"; its round {1e3 * plan['round_s']:.1f} ms = floor {1e3 * plan['latency_s']:.1f} + up "
                 f"{1e3 * plan['up_s']:.1f} + down {1e3 * plan['down_s']:.1f} + compute {1e3 * plan['compute_s']:.1f}"
                 f", {plan['iterations']:.0f} rounds" if plan.get("covered") else "")
        def secs(r):   # "184 s", "> 300 s" (fmt_time has the unit when not reached)
            text = fmt_time(r, cap)
            return text if text.endswith(" s") or not text[:1].isdigit() else f"{text} s"

        mine = ", ".join(f"{k} {secs(r)}" + (f" ({r['rounds']} rounds)" if r.get("rounds") else "")
                         for k, r in ours.items())
        key = {DOWN: "down", DOWN_RANDK: "randk", DOWN_H: "downh"}[best]
        if c["link"] == "100mbit" and "GD" in runs:
            r = c[f"{key}_gd"]
            ok = r["kind"] in ("=", "<") and r["value"] <= TIME_GOAL_GD
            out.append(f"{c['link']}: {mine}; GD {secs(runs['GD'])}"
                       + (f" ({runs['GD']['rounds']} rounds)" if runs["GD"].get("rounds") else "")
                       + f": the faster is {fmt_ratio(r)} × GD (goal ≤ {TIME_GOAL_GD:g}: "
                       + ("**met**" if ok else "**not met**") + ")" + split)
        if c["link"] == "10:1 asym" and LBFGS in runs:
            r = c[f"{key}_lbfgs"]
            ok = r["kind"] in ("=", "<") and r["value"] < 1
            out.append(f"{c['link']}: {mine}; L-BFGS {secs(runs[LBFGS])}: the faster is {fmt_ratio(r)} × "
                       "L-BFGS (goal < 1: " + ("**met**" if ok else "**not met**") + ")" + split)
    if not out:
        out.append("not run: " + "; ".join(res.get("notes", [])) if res.get("notes") else "no cells")
    return out


def row_label(cell: dict, cells: list) -> str:
    """The cell's data label, with its λ and κ where the cells have several λ (the λ axis)."""
    if len({c.get("lam") for c in cells if c["d_label"] == cell["d_label"]}) < 2:
        return cell["d_label"]
    return f"{cell['d_label']}, λ={cell['lam']:g}" + (f" (κ≈{cell['kappa']:.0f})" if "kappa" in cell else "")


def lambda_verdicts(res: dict) -> list[str]:
    """The λ axis's verdicts (issue 49), one line per cell where the bytes dominate GD's round (10 Mbit symmetric)
    and λ <= :data:`LAMBDA_GOAL_LAM`: the faster of ISEGA with natural7 both ways at τ = 1/n and 2/n against GD,
    goal <= :data:`LAMBDA_GOAL_GD`, with the planner's split of that run's round (what keeps it from less)."""
    out = []
    cap = res["grid"]["cap"]
    for c in res.get("cells", []):
        if c["link"] != "10mbit" or c.get("lam", 1.0) > LAMBDA_GOAL_LAM * (1 + 1e-9) or "GD" not in c["runs"]:
            continue
        ours = {k: c["runs"][k] for k in (DOWN, DOWN_H) if k in c["runs"]}
        reached = {k: r for k, r in ours.items() if r.get("reached")}
        if not reached:
            out.append(f"λ = {c['lam']:g}, {c['link']}: neither ISEGA run reached ε within the cap")
            continue
        best = min(reached, key=lambda k: reached[k]["time"])
        r = c["down_gd" if best == DOWN else "downh_gd"]
        ok = r["kind"] in ("=", "<") and r["value"] <= LAMBDA_GOAL_GD
        plan = c.get("planner", {}).get("methods", {}).get(best, {})
        gd_plan = c.get("planner", {}).get("methods", {}).get("GD", {})
        split = ""
        if plan.get("covered"):
            parts = {"floor": plan["latency_s"], "bytes": plan["up_s"] + plan["down_s"], "compute": plan["compute_s"]}
            rate = _rate_binds(plan)
            split = (f"; its round {1e3 * plan['round_s']:.1f} ms = "
                     + (f"its bytes at the link's rate, more than floor {1e3 * plan['latency_s']:.1f} + up "
                        f"{1e3 * plan['up_s']:.1f} + down {1e3 * plan['down_s']:.1f} + compute "
                        f"{1e3 * plan['compute_s']:.1f} = {1e3 * sum(parts.values()):.1f} ms (the link is busy the "
                        "whole round and its bucket never refills, so the bytes keep it from less)" if rate else
                        f"floor {1e3 * plan['latency_s']:.1f} + up {1e3 * plan['up_s']:.1f} + down "
                        f"{1e3 * plan['down_s']:.1f} + compute {1e3 * plan['compute_s']:.1f} (the largest part, "
                        f"{max(parts, key=parts.get)}, keeps it from less)")
                     + (f", against GD's {1e3 * gd_plan['round_s']:.1f} ms" if gd_plan.get("covered") else ""))
        gd = c["runs"]["GD"]
        out.append(f"λ = {c['lam']:g} (κ ≈ {c.get('kappa', float('nan')):.0f}), {c['link']}, H = {c['H']}: "
                   + ", ".join(f"{k} {fmt_time(v, cap)} s" + (f" ({v['rounds']} rounds)" if v.get("rounds") else "")
                               for k, v in ours.items())
                   + f"; GD {fmt_time(gd, cap)} s" + (f" ({gd['rounds']} rounds)" if gd.get("rounds") else "")
                   + f": the faster is {fmt_ratio(r)} × GD (goal ≤ {LAMBDA_GOAL_GD:g}: "
                   + ("**met**" if ok else "**not met**") + ")" + split)
    ps = planner_summary(res.get("cells", []))
    if ps["compared"]:
        out.append(f"the planner's predicted time within ±{PREDICTION_BAND:.0%} of the measured in {ps['within']} of "
                   f"{ps['compared']} (method, cell) pairs ({100 * ps['within'] / ps['compared']:.0f} %; goal ≥ 90 %: "
                   + ("**met**" if ps["within"] >= 0.9 * ps["compared"] else "**not met**")
                   + f"), load (1 min) {res.get('load_before', '?')} before, {res.get('load_after', '?')} after")
    return out or ["no cell at 10 Mbit symmetric with λ ≤ 1e-3 was run"]


def before_of(res: dict, date: str = "?", commit: str = "?") -> dict:
    """The parts of an earlier map's result ``res`` that :func:`report` sets beside a new one: per cell and method
    the time and rounds to ε (an earlier map's own ``before`` is dropped). Maps measured before ``rounds_via`` was
    recorded ran over Dask actor calls."""
    cells = [{"H": c["H"], "d_label": c["d_label"], "link": c["link"], "lam": c.get("lam"),
              "runs": {k: {x: r[x] for x in ("reached", "time", "rounds", "wall_s", "error") if x in r}
                       for k, r in c["runs"].items()}} for c in res.get("cells", [])]
    return {"date": date, "commit": commit, "rounds_via": res.get("rounds_via", "actor"), "cells": cells}


def planner_summary(cells: list) -> dict:
    """Over the cells: predictions within the band / predictions compared, recommendations within 10 % / cells."""
    ratios = [m for c in cells for m in c.get("planner", {}).get("methods", {}).values() if "ratio" in m]
    recs = [c["planner"]["recommendation_ok"] for c in cells if "recommendation_ok" in c.get("planner", {})]
    return {"within": sum(m["within"] for m in ratios), "compared": len(ratios),
            "recommendations_ok": sum(recs), "cells": len(recs)}


def fmt_ratio(r: dict | None) -> str:
    if r is None or r["kind"] == "?" or r["value"] != r["value"]:
        return "–"
    return ("" if r["kind"] == "=" else r["kind"] + " ") + f"{r['value']:.3g}"


def fmt_time(r: dict | None, cap: float) -> str:
    if r is None:
        return "not run"
    if "error" in r:
        return "failed: " + r["error"]
    if r.get("reached"):
        return f"{r['time']:.3g}"
    return f"> {cap:g} s" if r.get("stopped", "cap") == "cap" else f"not reached ({r.get('stopped')})"


def _bytes(v) -> str:
    return "–" if v is None or v != v else f"{v:.3g}"


# -- the figure --------------------------------------------------------------------------------------------------------
def _cell_text(cell: dict) -> str:
    """A cell's note in the figure: IS ÷ GD (ISEGA τ = 1/n in float64), or where that was not run the faster
    compressed-downlink ISEGA's ratio to GD (IS↓)."""
    if fmt_ratio(cell.get("is_gd")) != "–" or not any(fmt_ratio(cell.get(k)) != "–" for k in ("down_gd", "downh_gd")):
        return f"IS÷GD\n{fmt_ratio(cell.get('is_gd'))}"
    best = min((cell[k] for k in ("down_gd", "downh_gd") if fmt_ratio(cell.get(k)) != "–"), key=lambda r: r["value"])
    return f"IS↓÷GD\n{fmt_ratio(best)}"


def _rate_binds(m: dict) -> bool:
    """Whether a planned round (the planner check's per-method dict) is its bytes at the link's rate, longer than
    floor + up + down + compute."""
    return m.get("rate_s", 0.0) >= m["round_s"] > m["latency_s"] + m["up_s"] + m["down_s"] + m["compute_s"] + 1e-12


def _round_text(m: dict) -> str:
    """A planned round in ms: ``floor + up + down + compute``, and ``= rate`` where the bytes at the rate bind."""
    text = (f"{1e3 * m['latency_s']:.1f} + {1e3 * m['up_s']:.1f} + {1e3 * m['down_s']:.1f} + "
            f"{1e3 * m['compute_s']:.1f}")
    if _rate_binds(m):
        return f"{1e3 * m['round_s']:.1f} = rate (not {text})"
    return f"{1e3 * m['round_s']:.1f} = {text}"


def plot(res: dict, path: str) -> str:
    """Per H, a grid of (data set, link) cells coloured by the winner and annotated with IS ÷ GD; written to
    ``path`` (PNG). Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    labels = [m[0] for m in METHODS] + ["none within the cap"]
    # one colour per method (tab10 has ten), light grey for none
    colours = dict(zip(labels[:-1], plt.get_cmap("tab10").colors), **{labels[-1]: "#dddddd"})
    assert len(colours) == len(labels), "more methods than colours"
    Hs = sorted({c["H"] for c in res["cells"]})
    ran = {k for c in res["cells"] for k in c.get("runs", {})} | {c.get("winner") for c in res["cells"]}
    shown = [k for k in labels[:-1] if k in ran or not any(c.get("runs") for c in res["cells"])] + labels[-1:]
    legend_in = 0.07 * max(len(k) for k in shown) + 0.7   # the legend's width in inches, beside the axes
    n_rows = max(len({row_label(c, res["cells"]) for c in res["cells"] if c["H"] == H}) for H in Hs) if Hs else 1
    fig, axes = plt.subplots(1, len(Hs), figsize=(4.2 * len(Hs) + legend_in, max(3.6, 0.6 * n_rows + 1.4)),
                             squeeze=False)
    for ax, H in zip(axes[0], Hs):
        cells = [c for c in res["cells"] if c["H"] == H]
        rows = list(dict.fromkeys(row_label(c, cells) for c in cells))
        cols = list(dict.fromkeys(c["link"] for c in cells))
        ax.set_xlim(-0.5, len(cols) - 0.5), ax.set_ylim(len(rows) - 0.5, -0.5)
        for c in cells:
            i, j = rows.index(row_label(c, cells)), cols.index(c["link"])
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=colours[c["winner"] or labels[-1]], ec="white"))
            ax.text(j, i, _cell_text(c), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(cols)), cols), ax.set_yticks(range(len(rows)), rows)
        ax.tick_params(labelsize=8)
        ax.set_xlabel("link (up/down; 10:1 asym: 10 up, 100 down Mbit)")
        ax.set_ylabel("d, λ (κ = L/μ)" if any("λ=" in r for r in rows) else "d (data set)")
        ax.set_title(f"H = {H} hosts, n = {WORKERS_PER_HOST * H}")
    fig.legend(handles=[Patch(color=colours[k], label=k) for k in shown], loc="center right", fontsize=8,
               title="fastest to ε", title_fontsize=8)
    fig.tight_layout(rect=(0, 0, 1 - legend_in / fig.get_figwidth(), 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


# -- the report --------------------------------------------------------------------------------------------------------
def report(res: dict, figure_link: str = FIGURE) -> list[str]:
    """The section's lines after its heading: what was run, the per-cell summary, the per-run table, the figure."""
    g = res["grid"]
    cap = g["cap"]
    out = [f"Grid of this run: H ∈ {{{', '.join(map(str, g['H']))}}} hosts (n = {res['workers_per_host']}H logical "
           f"workers), synthetic d ∈ {{{', '.join(d_label(int(d)) for d in g['d'])}}} ({g['rows']} rows) on links "
           f"{', '.join(g['links'])}" + "".join(f"; {name} at {link}" for name, link in g["named"])
           + (f"; the synthetic cells at λ ∈ {{{', '.join(f'{lam:g}' for lam in g['lams'])}}}" if g.get("lams") else "")
           + f"; a cap of {cap:g} s per run; ε = {res['eps']:g}; our messages aggregated per {res['aggregate']}. "
           f"Load average (1, 5, 15 min) before the map {res['load_before']}, after {res.get('load_after', '?')}.", ""]
    if g.get("left_out"):
        out += ["Left out of this run, and why:", ""] + [f"- {x}" for x in g["left_out"]] + [""]
    out += [f"- {x}" for x in res.get("notes", [])] + ([""] if res.get("notes") else [])
    if not res["cells"]:
        return out
    summary = []
    labels = [m[0] for m in METHODS if any(m[0] in c["runs"] for c in res["cells"])]
    for c in res["cells"]:
        summary.append([c["H"], row_label(c, res["cells"]), c["N"], c["link"], *(fmt_time(c["runs"].get(m), cap) for m in labels),
                        c["winner"] or "none within the cap", fmt_ratio(c["is_gd"]), fmt_ratio(c["is_lbfgs"]),
                        fmt_ratio(c.get("down_gd")), fmt_ratio(c.get("down_lbfgs")),
                        f"{c['load_before']} → {c['load_after']}"])
    out += ["Time to ε (s), measured end to end, one run per method and cell (`> cap`: not at ε when the cap ended "
            "the run; a ratio with `<` or `>` is a bound from the cap; IS: ISEGA τ = 1/n in float64, IS↓: "
            f"{DOWN}):", "",
            table(["H", "d", "N", "link", *labels, "winner", "IS ÷ GD", "IS ÷ L-BFGS", "IS↓ ÷ GD", "IS↓ ÷ L-BFGS",
                   "load (1 min) before → after"], summary), ""]
    rows = []
    for c in res["cells"]:
        for label in labels:
            if label not in c["runs"]:
                continue
            r = c["runs"][label]
            rows.append([c["H"], row_label(c, res["cells"]), c["link"], label, fmt_time(r, cap), r.get("rounds", "–"),
                         _bytes(r.get("up")), _bytes(r.get("down")), _bytes(r.get("link_up")),
                         _bytes(r.get("link_down")), r.get("iterations", "–"),
                         f"{r['final_rel']:.1e}" if r.get("final_rel") is not None else "–",
                         f"{r['wall_s']:.3g}" if "wall_s" in r else "–"])
    out += ["Per run: rounds to ε (L-BFGS: evaluations of the loss and gradient), the values' up and down bytes to "
            "ε from the run's records (summed over the hosts; not counted for dask-ml), the bytes that crossed the "
            "hosts' links during the whole run (IP level, from the interface counters in the workers' namespaces), "
            "the rounds run, where the run stopped ((F − F*) / (F⁰ − F*)) and its wall time (s):", "",
            table(["H", "d", "link", "method", "time to ε (s)", "rounds to ε", "up B to ε", "down B to ε",
                   "link up B (run)", "link down B (run)", "rounds run", "final rel. subopt", "run wall (s)"], rows),
            ""]
    ps = planner_summary(res["cells"])
    prow = []
    for c in res["cells"]:
        pl = c.get("planner", {})
        for label, m in pl.get("methods", {}).items():
            prow.append([c["H"], row_label(c, res["cells"]), c["link"], label,
                         f"{m['predicted_s']:.3g}" if m.get("covered") else m.get("why", "–"),
                         f"{m['measured_s']:.3g}" if m.get("measured_s") else "not at ε",
                         f"{m['ratio']:.2f}" if "ratio" in m else "–",
                         _round_text(m) if m.get("covered") else "–",
                         f"{m.get('start_s', 0.0):.2f}" if m.get("covered") else "–",
                         f"{m['iterations']:.0f}" if m.get("covered") else "–",
                         (f"{pl.get('recommended')} ({pl['recommended_vs_fastest']:.2f}× the fastest)"
                          if "recommended_vs_fastest" in pl else pl.get("why", "–"))])
    if prow:
        out += [f"The planner's link model (`isparse-plan ... plan.link.up=... plan.link.down=...`, "
                f"`isparse.planning.predict_setup_time`) against these measurements: predicted time within ±"
                f"{PREDICTION_BAND:.0%} of the measured in **{ps['within']} of {ps['compared']}** (method, cell) "
                f"pairs; its recommended method within {RECOMMENDATION_BAND:.0%} of the fastest measured (of the "
                f"methods it covers) in **{ps['recommendations_ok']} of {ps['cells']}** cells. The round "
                "(ms) = floor + up + down + compute, or the busier direction's bytes ÷ its rate where that is more "
                "(`rate`: a shaped link carries no more a round, whatever its bucket); predicted = start + iterations "
                "× round. The floor, the compute and the start (the first 10 rounds beyond 10 steady ones) were "
                "measured on the same hosts with "
                "the links unshaped, just before the cell's runs (100 rounds of each method: `plan.link.latency`, "
                "what the planner's probes measure on a cluster); up and down are each message's bytes beyond the "
                "tbf bucket (`plan.link.burst`) ÷ the rate; the iterations are those of the planner's calibration "
                "run (an in-process run of the configuration to ε: the cell's rounds), so this checks the model of "
                "a shaped round:", "",
                table(["H", "d", "link", "method", "predicted (s)", "measured (s)", "pred ÷ meas",
                       "round (ms) = floor + up + down + compute", "start (s)", "iterations", "recommended"], prow),
                ""]
    if res.get("figure"):
        out += [f"![The winner per cell and IS ÷ GD]({figure_link})", ""]
    if res.get("before"):
        out += side_by_side(res, res["before"], cap)
    return out


def side_by_side(res: dict, before: dict, cap: float) -> list[str]:
    """The lines of the table that sets this map's times to ε beside an earlier map's, cell by cell and method by
    method (the cells and methods of this map)."""
    old = {(c["H"], c["d_label"], c["link"], c.get("lam")): c["runs"] for c in before.get("cells", [])}
    rows = []
    for c in res["cells"]:
        prev = old.get((c["H"], c["d_label"], c["link"], c.get("lam")), {})
        for label, _, _ in METHODS:
            if label not in c["runs"]:
                continue
            a, b = prev.get(label), c["runs"][label]
            ratio = "–"
            if a and a.get("reached") and b.get("reached"):
                ratio = f"{b['time'] / a['time']:.2f}"
            rows.append([c["H"], row_label(c, res["cells"]), c["link"], label,
                         "not in that map" if a is None else fmt_time(a, cap) + (f" ({a['rounds']})" if a.get("rounds") else ""),
                         fmt_time(b, cap) + (f" ({b['rounds']})" if b.get("rounds") else ""), ratio])
    return [f"Both maps side by side: the map of {before.get('date', '?')} (commit {before.get('commit', '?')}, rounds "
            f"over {'Dask actor calls' if before.get('rounds_via') == 'actor' else 'streams'} and x sent dense, "
            f"float64, to every host) and this one (rounds over {res.get('rounds_via', 'stream')}s, "
            "`cluster.rounds`'s default, and in the row "
            f"{DOWN} the compressed downlink). Time to ε in s (rounds to ε), same cells, same caps:", "",
            table(["H", "d", "link", "method", "before", "now", "now ÷ before"], rows), ""]
