"""Item 13, the compressed downlink (EF21-P, docs/algorithms.md §9): ``python -m benchmarks.downlink [--quick]``.

(a) ISEGA with tau = 1/n and natural7 on the uplink at n = 100 on a1a and w1a (lambda = 1e-3, step.rule=paper, the
    headline's setting), to eps = 1e-6 (||x - x*||^2 <= eps r_0), with each downlink: iterations and downlink bytes
    against the same run with the dense float64 downlink; the random-k ones down to k = d/64, to see where the error
    feedback stops catching up.
(b) GD on a1a, n = 10, at steps 1/(2L), 1/L and 1.9/L (step.multiplier 1, 2, 3.8 of Theorem 1's 1/(2L)) with
    random-k o natural downlinks: the same question for the plain method (runs stopped at 4x the dense downlink's
    iterations).

Bytes and iterations only (no timing): the numbers do not depend on the machine's load. The tables are printed as
markdown; docs/benchmarks.md's section 13 holds them.
"""

from __future__ import annotations

import argparse

from isparse import RunSpec, build

from .common import load

DOWNLINKS_A = ("float64", "natural7", "randk:0.125+natural7", "randk:0.0625+natural7", "randk:0.03125+natural7",
               "randk:0.015625+natural7", "topk:0.125+natural7")
DOWNLINKS_B = ("float64", "randk:0.125+natural", "randk:0.0625+natural", "randk:0.03125+natural")


def _run(data, dataset, keys, reference, max_iter, eps):
    s = build(RunSpec.from_dict({"data": data, **keys}), data=dataset, reference=reference)
    r = s.run(max_iter=max_iter, tol=eps, log_every=max_iter)
    return s, r


def headline(data: str, downlinks=DOWNLINKS_A, n: int = 100, eps: float = 1e-6, max_iter: int = 400000) -> list:
    """(a): one row per downlink: iterations, their ratio to the float64 downlink's, downlink bytes and share (a run
    is stopped at 4x the float64 downlink's iterations: "not reached")."""
    dataset, ref, base, rows = load(data), None, None, []
    for down in downlinks:
        keys = {"algorithm": "isega", "workers.n": n, "problem.lam": 1e-3, "step.rule": "paper",
                "messages.codec": "natural7", "messages.downlink": down}
        s, r = _run(data, dataset, keys, ref, 4 * base[0] if base else max_iter, eps)
        ref = s.reference
        last = r.records[-1]
        base = base or (r.iterations, last["downlink_bytes"])
        rows.append(dict(data=data, downlink=down, alpha=s.derived["alpha_downlink"], iterations=r.iterations,
                         converged=r.converged, it_ratio=r.iterations / base[0], downlink_bytes=last["downlink_bytes"],
                         share=last["downlink_bytes"] / base[1], d=s.problem.d))
    return rows


def gd_steps(data: str = "a1a", n: int = 10, eps: float = 1e-6, multipliers=(1.0, 2.0, 3.8), downlinks=DOWNLINKS_B,
             max_iter: int = 400000) -> list:
    """(b): GD at 1/(2L), 1/L and 1.9/L with each downlink: iterations and their ratio to the dense downlink's."""
    dataset, ref, rows = load(data), None, []
    for mult in multipliers:
        base = None
        for down in downlinks:
            keys = {"algorithm": "gd", "workers.n": n, "problem.lam": 1e-3, "step.multiplier": mult,
                    "messages.downlink": down}
            s, r = _run(data, dataset, keys, ref, 4 * base if base else max_iter, eps)
            ref = s.reference
            base = base or r.iterations
            rows.append(dict(data=data, step=f"{mult / 2:g}/L", downlink=down, iterations=r.iterations,
                             converged=r.converged, it_ratio=r.iterations / base,
                             share=s.derived["downlink_bytes_per_message"] / (8 * s.problem.d)))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.downlink", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a1a only, three downlinks")
    p.add_argument("--only", default="a,b")
    a = p.parse_args(argv)
    parts = a.only.split(",")
    if "a" in parts:
        print("| data | downlink | α | ISEGA iterations to ε | ÷ float64 downlink's | downlink bytes to ε | share of "
              "float64's |\n|---|---|---|---|---|---|---|")
        for data in ("a1a",) if a.quick else ("a1a", "w1a"):
            for r in headline(data, DOWNLINKS_A[:3] if a.quick else DOWNLINKS_A):
                print(f"| {r['data']} (d = {r['d']}) | {r['downlink']} | {r['alpha']:.4g} | {r['iterations']:,}"
                      f"{'' if r['converged'] else ' (not reached)'} | {r['it_ratio']:.3f} | "
                      f"{r['downlink_bytes']:.4g} | 1/{1 / r['share']:.1f} |", flush=True)
    if "b" in parts:
        print("\n| step | downlink | GD iterations to ε (a1a, n = 10) | ÷ float64 downlink's | bytes per message ÷ "
              "float64's |\n|---|---|---|---|---|")
        for r in gd_steps(downlinks=DOWNLINKS_B[:2] if a.quick else DOWNLINKS_B):
            print(f"| {r['step']} | {r['downlink']} | {r['iterations']:,}{'' if r['converged'] else ' (not reached)'} | "
                  f"{r['it_ratio']:.3f} | 1/{1 / r['share']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
