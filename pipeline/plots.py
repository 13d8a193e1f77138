"""The convergence figure of a run: dist_sq and the theorem's bound against iterations and uplink bytes."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator  # noqa: E402

#: how the figures name the quantities a theorem may bound (the tag ``bound_quantity``)
QUANTITY_LABELS = {"dist_sq": r"$\|x^t - x^*\|^2$", "subopt": r"$F(x^t) - F^*$",
                   "subopt_avg": r"$F(\hat x^t) - F^*$", "lyapunov": "Lyapunov function",
                   "grad_norm_sq_avg": r"mean $\|\nabla f(x^s)\|^2$, $s \leq t$"}


def bytes_axis(axis) -> None:
    """Label a matplotlib axis (``ax.xaxis``) holding byte counts in SI units (``0 B``, ``200 kB``, ``1.2 MB``).

    On a linear axis at most 6 ticks are placed at round values, so the labels cannot run together.
    """
    axis.set_major_formatter(EngFormatter(unit="B", places=None, sep=" "))
    if axis.get_scale() == "linear":
        axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))


def convergence_figure(records, title: str, *, tol: float | None = None, r0: float | None = None,
                       bound_quantity: str = "dist_sq"):
    """Two panels with log y-axes: dist_sq and the theorem's bound against iterations and against cumulative
    uplink bytes.

    Parameters
    ----------
    records : list of dict
        The run's records (``RunResult.records``): ``step`` (iteration), ``uplink_bytes`` (cumulative, B),
        ``dist_sq`` (‖x^t − x*‖²), ``bound`` (the theorem's bound on ``bound_quantity``; nan where none) and,
        when ``bound_quantity`` is not dist_sq, that quantity.
    title : str
        The figure's title (one line).
    tol, r0 : float, optional
        The stopping rule ‖x − x*‖² ≤ tol · r0 (r0 = ‖x^0 − x*‖²): given both, drawn as a horizontal line.
    bound_quantity : str
        What the bound bounds (the run's tag ``bound_quantity``); another quantity than dist_sq is drawn
        with its bound, in its own colour.

    Returns
    -------
    matplotlib.figure.Figure
        Not registered with pyplot (no ``plt.close`` needed; safe to make in several threads at once: the Dask
        launcher runs one job per worker thread).
    """
    steps = [r["step"] for r in records]
    up = [r["uplink_bytes"] for r in records]
    dist = [r["dist_sq"] for r in records]
    bound = [r.get("bound", math.nan) for r in records]
    has_bound = any(math.isfinite(b) for b in bound)
    other = bound_quantity if bound_quantity != "dist_sq" and all(bound_quantity in r for r in records) else None
    fig = Figure(figsize=(11, 4.2))   # a fixed layout: matplotlib's constrained layout doubled the time to draw it
    FigureCanvasAgg(fig)   # its canvas: fig.canvas.draw() renders
    axes = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.075, right=0.985, bottom=0.13, top=0.9, wspace=0.2)
    for ax, xs, xlabel in ((axes[0], steps, "iteration t"), (axes[1], up, "uplink bytes (all workers, cumulative)")):
        ax.semilogy(xs, dist, color="C0", label=r"measured $\|x^t - x^*\|^2$")
        if tol is not None and r0 is not None:
            ax.axhline(tol * r0, color="gray", linestyle=":", label=rf"stop: $\|x - x^*\|^2 \leq$ tol·$r_0$ = {tol:g}·{r0:.3g}")
        if other is not None:
            ax.semilogy(xs, [r[other] for r in records], color="C1", label=f"measured {QUANTITY_LABELS.get(other, other)}")
        if has_bound:
            name = QUANTITY_LABELS.get(bound_quantity, bound_quantity)
            ax.semilogy(xs, bound, "--", color="C1" if other else "C0", label=f"theorem's bound on {name}")
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    bytes_axis(axes[1].xaxis)
    axes[0].set_ylabel(r"$\|x^t - x^*\|^2$" if other is None else "value (log scale)")
    fig.suptitle(title)
    return fig
