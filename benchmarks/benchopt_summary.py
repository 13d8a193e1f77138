"""``python -m benchmarks.benchopt_summary RESULT.parquet [--eps 1e-6] [--plot PNG]``: a benchopt run of
benchmarks/benchopt_logreg_l2 as the table of docs/benchmarks.md, and relative suboptimality against uplink bytes.

Per data set, F* is the least objective value any solver reached in the run (benchopt's own reference for its
suboptimality curves) and F(x^0) the value at stop_val 0 (every solver starts at beta = 0); the relative
suboptimality is (F - F*) / (F(x^0) - F*). Per solver: the time (benchopt's: the solver's own time, the objective's
evaluations excluded), the iterations (``stop_val``: callback calls for the isparse solvers and scipy, ``max_iter``
for scikit-learn) and, for the isparse methods, the uplink bytes at the first point at or below ``--eps``.

benchopt's plots offer time and iterations on the x axis; the bytes axis is drawn here (``pipeline.plots.bytes_axis``
labels it)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def relative(df):
    """The parquet's rows with ``rel_subopt`` per data set (see the module docstring)."""
    out = []
    for _, group in df.groupby("dataset_name"):
        group = group.copy()
        f_star = group.objective_value.min()
        f0 = group[group.stop_val == 0].objective_value.max()
        group["rel_subopt"] = (group.objective_value - f_star) / (f0 - f_star)
        out.append(group)
    import pandas as pd

    return pd.concat(out)


def to_eps(df, eps: float) -> list[dict]:
    """Per (data set, solver): time, iterations and uplink bytes at the first point with rel_subopt <= eps (None
    if never), and the last point's rel_subopt."""
    rows = []
    for (data, solver), group in sorted(df.groupby(["dataset_name", "solver_name"])):
        group = group.sort_values(["stop_val", "time"])
        hit = group[group.rel_subopt <= eps]
        first = hit.iloc[0] if len(hit) else None
        up = None if first is None else first.get("objective_uplink_bytes")
        rows.append(dict(data=data, solver=solver, time_s=None if first is None else float(first.time),
                         iterations=None if first is None else int(first.stop_val),
                         uplink_bytes=None if up is None or not math.isfinite(up) else float(up),
                         final_rel_subopt=float(group.rel_subopt.iloc[-1]), final_time_s=float(group.time.iloc[-1]),
                         final_iterations=int(group.stop_val.iloc[-1])))
    return rows


def markdown(rows: list[dict], eps: float) -> str:
    """The table of :func:`to_eps` as Markdown."""
    head = ["data", "solver", f"time to {eps:g} (s)", f"iterations to {eps:g}", f"uplink to {eps:g} (B)",
            "last point: rel. subopt. (time, iterations)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cell = (lambda v, f: "—" if v is None else f.format(v))
        lines.append("| " + " | ".join([
            r["data"], r["solver"].replace("|", "/"), cell(r["time_s"], "{:.3g}"), cell(r["iterations"], "{:,}"),
            cell(r["uplink_bytes"], "{:,.0f}"),
            f"{r['final_rel_subopt']:.1e} ({r['final_time_s']:.3g} s, {r['final_iterations']:,})"]) + " |")
    return "\n".join(lines) + "\n"


def bytes_figure(df, out: Path, eps: float) -> Path:
    """Relative suboptimality against cumulative uplink bytes, one panel per data set, the isparse solvers (the
    others send no bytes to count)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pipeline.plots import bytes_axis

    sets = sorted(df.dataset_name.unique())
    fig = Figure(figsize=(6.0 * len(sets), 4.4))
    FigureCanvasAgg(fig)
    for k, data in enumerate(sets):
        ax = fig.add_subplot(1, len(sets), k + 1)
        part = df[(df.dataset_name == data) & df.objective_uplink_bytes.notna()]
        for solver, group in sorted(part.groupby("solver_name")):
            group = group.sort_values("stop_val")
            keep = (group.rel_subopt > 0) & (group.objective_uplink_bytes > 0)
            label = solver.split("[n=")[0].replace("isparse[", "")
            ax.plot(group.objective_uplink_bytes[keep], group.rel_subopt[keep], marker=".", label=label)
        ax.axhline(eps, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        bytes_axis(ax.xaxis)
        ax.set_xlabel("cumulative uplink bytes (all workers)")
        ax.set_ylabel(r"$(F - F^*) / (F(x^0) - F^*)$")
        ax.set_title(f"{data}: isparse methods, n = 10")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.benchopt_summary", description=__doc__)
    p.add_argument("parquet")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--plot", metavar="PNG", help="write the bytes-axis figure there")
    args = p.parse_args(argv)
    import pandas as pd

    df = relative(pd.read_parquet(args.parquet))
    print(markdown(to_eps(df, args.eps), args.eps), end="")
    if args.plot:
        print(f"figure: {bytes_figure(df, Path(args.plot), args.eps)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
