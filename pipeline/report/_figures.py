"""The report's figures: ``convergence_<data>.png`` and ``iterations_vs_tau.png``.

Importing this module selects matplotlib's Agg backend; the rest of the package (records, tables) does not import
matplotlib.
"""
from __future__ import annotations

import math
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402

from ..plots import bytes_axis  # noqa: E402
from ._records import RunRecord  # noqa: E402
from ._tables import _line, _series_name, add_slopes, tau_rows  # noqa: E402


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
