"""Item 12's grid: the methods, the links, the data's parameters and the grids of cells the map runs
(:mod:`benchmarks.crossover` measures them, :mod:`benchmarks.crossover_report` draws them)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

EPS = 1e-6
#: the links of the issue: (up, down) rates of every host
LINKS = {"1gbit": ("1gbit", "1gbit"), "100mbit": ("100mbit", "100mbit"), "10mbit": ("10mbit", "10mbit"),
         "10:1 asym": ("10mbit", "100mbit")}
#: the methods, in the table's order: (label, algorithm, extra config keys)
METHODS = (("GD", "gd", {}),
           ("ISEGA τ=1/n", "isega", {"tau": "auto", "step.rule": "paper"}),
           ("ISEGA τ=1/n natural7", "isega", {"tau": "auto", "step.rule": "paper", "messages.codec": "natural7"}),
           ("ISEGA natural7, natural7 down", "isega", {"tau": "auto", "step.rule": "paper", "messages.codec": "natural7",
                                                      "messages.downlink": "natural7"}),
           ("ISEGA natural7, randk·natural7 down", "isega", {"tau": "auto", "step.rule": "paper",
                                                            "messages.codec": "natural7",
                                                            "messages.downlink": "randk:0.125+natural7"}),
           # the τ = 1/H: each of a host's 2 workers sends 1/H of the blocks (τ = 2/n)
           ("ISEGA τ=1/H natural7, natural7 down", "isega", {"tau": "2/n", "step.rule": "paper",
                                                           "messages.codec": "natural7",
                                                           "messages.downlink": "natural7"}),
           ("DIANA", "diana", {"tau": "auto"}),
           ("dask-ml L-BFGS", None, {}))
LBFGS = "dask-ml L-BFGS"
#: ISEGA with a compressed downlink: natural7 (few more iterations), and randk:0.125+natural7 (fewest bytes)
DOWN, DOWN_RANDK = "ISEGA natural7, natural7 down", "ISEGA natural7, randk·natural7 down"
#: ISEGA at τ = 1/H (2/n) with natural7 both ways: the issue's τ for the time check (run with --methods)
DOWN_H = "ISEGA τ=1/H natural7, natural7 down"
#: the map's methods (the randk downlink and τ = 1/H only in the time check)
MAP_METHODS = tuple(m[0] for m in METHODS if m[0] not in (DOWN_RANDK, DOWN_H))
#: the synthetic data: rows, feature draws per row, power law's exponent, lambda; named sets use their own N
N_ROWS, NNZ, ALPHA, LAM_SYN, LAM_NAMED = 20_000, 40, 1.0, 1e-2, 1e-3
WORKERS_PER_HOST = 2
#: the figure, relative to the doc's directory
FIGURE = "_static/crossover.png"


@dataclass
class Grid:
    """Which cells run: hosts ``H``, synthetic dimensions ``d``, ``links`` (keys of :data:`LINKS`), the named sets
    ``named`` with their link, the per-run time ``cap`` (s), the rows of the synthetic data, the (d, link)
    pairs to ``skip``, the ``methods`` run (labels of :data:`METHODS`; empty: all), the (link, method) pairs not
    run (``skip_runs``) and the synthetic cells' regularization ``lams`` (empty: :data:`LAM_SYN`; each λ a cell:
    the condition number κ ≈ L/λ as an axis of the map)."""

    H: tuple = (4,)
    d: tuple = (10_000, 100_000)
    links: tuple = ("100mbit", "10mbit", "10:1 asym")
    named: tuple = (("a9a", "100mbit"),)
    cap: float = 60.0
    rows: int = N_ROWS
    skip: tuple = ()
    left_out: list = field(default_factory=list)
    methods: tuple = ()
    skip_runs: tuple = ()
    lams: tuple = ()

    def runs(self, label: str, link: str) -> bool:
        """Whether method ``label`` runs on ``link``."""
        return (not self.methods or label in self.methods) and (link, label) not in {tuple(x) for x in self.skip_runs}


#: the issue's whole grid
FULL = Grid(H=(4, 8, 16), d=(10_000, 100_000, 1_000_000), links=tuple(LINKS), methods=MAP_METHODS,
            named=(("a9a", "100mbit"), ("w8a", "100mbit")), cap=120.0)
#: what fits 2 cores and about 20 minutes (the default)
DEFAULT = Grid(skip=((100_000, "10mbit"),), methods=MAP_METHODS, left_out=[
    "d = 10⁵ at 10 Mbit symmetric: x alone is 0.8 MB a host and round down (0.64 s), so by rounds × bytes ÷ rate "
    "every method needs 70–170 s; measured with a 40 s cap on 2026-12-03, no method reached ε",
    "H = 8 and 16: 2H logical workers in H Dask processes plus the scheduler and the master share 2 cores, so "
    "more hosts measure the CPU queue rather than the links",
    "d = 10⁶: a run per method at 10 Mbit exceeds any cap that fits the time (x down alone is 8 MB = 6.4 s per "
    "round); the reference solve and generation fit (item 6)",
    "the 1 Gbit links: on 2 cores a round at d ≤ 10⁵ is bound by compute and Dask's fixed cost there, not bytes",
    "w8a at 100 Mbit (a9a stands for the small-d named sets)"])
#: the issue's time check (issue 33): H = 16 hosts, d = 10⁶; at 100 Mbit GD against ISEGA natural7 with and without
#: the compressed downlink, at 10:1 ISEGA natural7 with it against dask-ml's L-BFGS
TIME = Grid(H=(16,), d=(1_000_000,), links=("100mbit", "10:1 asym"), named=(), cap=300.0,
            methods=("GD", "ISEGA τ=1/n natural7", DOWN, DOWN_RANDK, DOWN_H, LBFGS),
            skip_runs=(("10:1 asym", "GD"), ("10:1 asym", "ISEGA τ=1/n natural7"), ("10:1 asym", DOWN_H),
                       ("100mbit", LBFGS)),
            left_out=["ISEGA τ = 1/n in float64 and DIANA (the map above has them at H = 4)",
                      "GD and ISEGA natural7 with the dense downlink at 10:1: x down is 8 MB a host and round (0.64 s "
                      "at 100 Mbit), GD's sum up 8 MB (6.4 s at 10 Mbit)",
                      "L-BFGS at 100 Mbit symmetric"])
#: the λ axis (issue 49): the synthetic d = 10⁴ at H = 4 over λ ∈ {10⁻², 10⁻³, 10⁻⁴} (κ = L/μ with L = max_i L_i:
#: about 5, 40 and 400), on a link where the bytes dominate GD's round (10 Mbit symmetric) and on 10:1
#: and 100 Mbit; GD, ISEGA with natural7 both ways at τ = 1/n and 2/n, DIANA and dask-ml's L-BFGS
LAMBDA = Grid(H=(4,), d=(10_000,), links=("10mbit", "10:1 asym", "100mbit"), named=(), cap=900.0,
              methods=("GD", DOWN, DOWN_H, "DIANA", LBFGS), lams=(1e-2, 1e-3, 1e-4),
              left_out=["d = 10⁵ at 100 Mbit: run apart (`--lambda --d 1e5 --links 100mbit --lam 1e-2,1e-3`), without λ = "
                        "10⁻⁴, where GD's 4,000-odd rounds of 170 ms are over 10 minutes of this machine's time",
                        "ISEGA τ = 1/n in float64 with the dense downlink (the map above has it at λ = 10⁻²)"])
#: the λ axis's goal (issue 49): where the bytes dominate GD's round (10 Mbit symmetric) and λ <= 1e-3, ISEGA with
#: natural7 both ways (τ = 1/n or 2/n) reaches ε in at most this share of GD's time
LAMBDA_GOAL_GD, LAMBDA_GOAL_LAM = 0.15, 1e-3
#: one tiny cell, for a test (under about 3 minutes)
QUICK = Grid(H=(2,), d=(3_000,), links=("100mbit",), named=(), cap=30.0, rows=4_000, methods=MAP_METHODS,
             left_out=["--quick: one tiny cell (H = 2, d = 3000, 4000 rows, 100 Mbit) instead of the map"])
#: the planner's check of the issue: predicted time within this factor of the measured, the recommendation's measured
#: time within this factor of the fastest measured
PREDICTION_BAND, RECOMMENDATION_BAND = 0.25, 0.10


def d_label(d: int) -> str:
    """``1e4`` for 10000, ``3000`` for 3000."""
    e = int(round(math.log10(d))) if d > 0 else 0
    return f"1e{e}" if 10 ** e == d and e >= 4 else str(d)


def grid_from(base: Grid, H=None, d=None, links=None, named=None, cap=None, methods=None, lams=None) -> Grid:
    """``base`` with the fields given as comma-separated text replaced (a changed grid lists nothing as left out)."""
    kw = asdict(base)
    if lams:
        kw["lams"] = tuple(float(x) for x in lams.split(",") if x)
        if any(not lam > 0 for lam in kw["lams"]):
            raise SystemExit(f"--lam: numbers > 0 separated by ','; got {lams!r}")
    if H:
        kw["H"] = tuple(int(x) for x in H.split(","))
    if d:
        kw["d"] = tuple(int(float(x)) for x in d.split(",") if x)
    if links:
        kw["links"] = tuple(x.strip() for x in links.split(","))
        bad = [x for x in kw["links"] if x not in LINKS]
        if bad:
            raise SystemExit(f"--links: one of {', '.join(LINKS)}; got {bad[0]!r}")
    if named is not None:
        kw["named"] = tuple(tuple(x.split("@")) for x in named.split(",") if x)
    if cap:
        kw["cap"] = float(cap)
    if methods:
        kw["methods"] = tuple(x.strip() for x in methods.split(";") if x.strip())
        labels = [m[0] for m in METHODS]
        bad = [x for x in kw["methods"] if x not in labels]
        if bad:
            raise SystemExit(f"--methods: labels separated by ';', of {'; '.join(labels)}; got {bad[0]!r}")
    if d or links:
        kw["skip"] = ()
    if any(v for v in (H, d, links, named, methods, lams)):
        kw["left_out"] = ["(a grid given on the command line)"]
    return Grid(**kw)
