"""The convergence figure of a run: dist_sq and the theorem's bound against iterations and uplink bytes."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def convergence_figure(records, title: str):
    """Two panels with log y-axes: dist_sq and bound against iterations, and against cumulative uplink bytes."""
    steps = [r["step"] for r in records]
    up = [r["uplink_bytes"] for r in records]
    dist = [r["dist_sq"] for r in records]
    bound = [r["bound"] for r in records]
    has_bound = any(math.isfinite(b) for b in bound)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for ax, xs, xlabel in ((axes[0], steps, "iteration t"), (axes[1], up, "uplink bytes (all workers, cumulative)")):
        ax.semilogy(xs, dist, label=r"measured $\|x^t - x^*\|^2$")
        if has_bound:
            ax.semilogy(xs, bound, "--", label="theorem's bound")
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel(r"$\|x^t - x^*\|^2$")
    fig.suptitle(title)
    return fig
