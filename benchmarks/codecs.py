"""Item 10: value codecs on the uplink (``messages.codec``), ``python -m benchmarks.codecs [--quick]``.

(a) ISEGA at tau = 1/n, n = 100, with each codec, against GD at 1/(2L): iterations to ||x - x*||^2 <= 1e-6 r_0 and
the uplink to there as a share of GD's (dense float64), on a1a, mushrooms, phishing and w1a (lambda = 1e-3);
(b) the time per iteration of each codec against float64 on a9a at n = 100 (in-process engine, paired, same run);
(c) the Dask serialized bytes of a host's reply per codec against the analytic bytes;
(d) the measured final error against the derived bound per method and codec over seeds (the slack).
Prints markdown; every ratio is against a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from isparse import InProcessPool, RunSpec, build
from isparse.compression.codecs import CODECS

from .common import load

NAMES = tuple(CODECS)   # the built-in codecs, in the order they are defined


def _spec(algorithm, data, **keys):
    values = {"algorithm": algorithm, "data": data, **keys}
    return RunSpec.from_dict(values)


def to_eps(data: str, n: int = 100, eps: float = 1e-6, lam: float = 1e-3, max_iter: int = 200000):
    rows = []
    dataset = load(data)
    gd = build(_spec("gd", data, **{"workers.n": n, "problem.lam": lam}), data=dataset)
    ref = gd.reference
    r_gd = gd.run(max_iter=max_iter, tol=eps, log_every=max_iter)
    base_it, base_up = r_gd.iterations, r_gd.records[-1]["uplink_bytes"]
    gamma64 = None
    # each codec at its step.rule=paper step (tau -> tau/(1 + omega) for an unbiased one), then natural at float64's
    # step (step.multiplier = gamma_float64 / gamma_natural): what the smaller step costs, apart from the codec
    for codec, same_step in [(c, False) for c in NAMES] + [("natural", True)]:
        keys = {"workers.n": n, "problem.lam": lam, "step.rule": "paper", "messages.codec": codec}
        s = build(_spec("isega", data, **keys), data=dataset, reference=ref)
        gamma64 = s.method.gamma if codec == "float64" else gamma64
        if same_step:
            s = build(_spec("isega", data, **keys, **{"step.multiplier": gamma64 / s.method.gamma}), data=dataset,
                      reference=ref)
        r = s.run(max_iter=max_iter, tol=eps, log_every=max_iter)
        last = r.records[-1]
        label = s.method.codec.label + (", float64's γ" if same_step else "")
        rows.append(dict(data=data, codec=label, iterations=r.iterations, converged=r.converged,
                         gd_iterations=base_it, it_ratio=r.iterations / base_it,
                         share=last["uplink_bytes"] / base_up, share64=last["uplink_bytes_float64"] / base_up,
                         omega=s.derived["omega"], tau_m=s.method.tau_m, m=s.method.blocks.m))
    return rows


def time_per_iteration(n: int = 100, iters: int = 300, pairs: int = 5):
    dataset = load("a9a")
    base = build(_spec("isega", "a9a", **{"workers.n": n}), data=dataset)
    out = {}
    for codec in NAMES:
        s = build(_spec("isega", "a9a", **{"workers.n": n, "messages.codec": codec}), data=dataset,
                  reference=base.reference)
        ratios = []
        for k in range(pairs + 1):      # the first pair warms up; the order alternates (no second-run advantage)
            times = {}
            for setup in ((base, s) if k % 2 else (s, base)):
                pool = InProcessPool(*setup.pool_args())
                tick = time.perf_counter()
                setup.run(pool, max_iter=iters, tol=1e-300, log_every=iters)
                times[setup is base] = time.perf_counter() - tick
            if k:
                ratios.append(times[False] / times[True])
        out[s.method.codec.label] = statistics.median(ratios)
    return out


def serialized(n: int = 4):
    from distributed import Client, LocalCluster

    from isparse.engines.dask import DaskPool

    from isparse import load_dataset

    data = load_dataset("breast_cancer")
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cl, \
            Client(cl, direct_to_workers=True) as client:
        for codec in NAMES:
            s = build(_spec("isega", "breast_cancer", **{"workers.n": n, "blocks.size": 2, "problem.lam": 0.1,
                                                        "messages.codec": codec}), data=data)
            pool = DaskPool(client, *s.pool_args(), measure_every=1)
            s.run(pool, max_iter=100, tol=1e-300, log_every=100)
            tr = pool.traffic()
            rows.append(dict(codec=s.method.codec.label, analytic=tr["uplink_bytes_analytic"],
                             expected=tr["uplink_bytes_expected"], serialized=tr["uplink_bytes_serialized"],
                             ratio=tr["uplink_bytes_serialized"] / tr["uplink_bytes_expected"]))
            pool.close()
    return rows


def slack_quadratic(seeds: int = 20, T: int = 1000):
    """The methods whose bound needs Assumption 2 (ISAGA, IASGD), on the quadratic (17) with d = 40, n = 10, b = 1:
    the bound's quantity (dist_sq, or IASGD's subopt) at T, mean over seeds, against the bound."""
    from isparse.problems import QuadraticProblem

    q = QuadraticProblem(d=40, o=16, n=10, seed=1)
    rows = []
    for algorithm in ("isaga", "iasgd"):
        for codec in ("float64", "natural", "dither"):
            spec = RunSpec.from_dict({"algorithm": algorithm, "workers.n": 10, "blocks.size": 1,
                                      "messages.codec": codec})
            s = build(spec, problem=q)
            key = s.bound.quantity
            finals = [s.run(InProcessPool(*s.pool_args(k)), max_iter=T, tol=1e-300, log_every=T).records[-1][key]
                      for k in range(seeds)]
            mean = float(np.mean(finals))
            rows.append(dict(method=f"{algorithm} (quadratic, {key})", codec=s.method.codec.label, mean=mean,
                             se=float(np.std(finals, ddof=1) / np.sqrt(seeds)), bound=s.bound(T),
                             source=s.bound.source, slack=s.bound(T) / mean))
    return rows


def slack(seeds: int = 20, T: int = 600):
    """Final dist_sq (mean over seeds) against the bound at T, a1a split contiguously over 10 workers, lambda = 0.1."""
    data = load("a1a")
    rows = []
    for algorithm, extra in (("isega", {}), ("ibcd", {}), ("isgd", {"algorithm": {"name": "isgd", "batch": 2}}),
                             ("gd", {})):
        for codec in ("float64", "natural", "dither"):
            keys = {"workers.n": 10, "problem.lam": 0.1, "workers.split": "contiguous", "messages.codec": codec}
            spec = RunSpec.from_dict({"algorithm": extra.get("algorithm", algorithm), "data": "a1a", **keys})
            s = build(spec, data=data)
            finals = [s.run(InProcessPool(*s.pool_args(k)), max_iter=T, tol=1e-300, log_every=T).records[-1]["dist_sq"]
                      for k in range(seeds)]
            mean = float(np.mean(finals))
            rows.append(dict(method=algorithm, codec=s.method.codec.label, mean=mean, se=float(np.std(finals, ddof=1)
                                                                                             / np.sqrt(seeds)),
                             bound=s.bound(T), source=s.bound.source, slack=s.bound(T) / mean))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.codecs")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="a,b,c,d")
    a = p.parse_args(argv)
    parts = a.only.split(",")
    if "a" in parts:
        print("| data | codec | omega | ISEGA iterations | ÷ GD's | uplink share of GD's (dense float64) | "
              "values-only float64 share (τ alone) | saved |")
        print("|---|---|---|---|---|---|---|---|")
        for data in (("a1a",) if a.quick else ("a1a", "mushrooms", "phishing", "w1a")):
            for r in to_eps(data):
                print(f"| {r['data']} (τm = {r['tau_m']}/{r['m']}, GD {r['gd_iterations']:,}) | {r['codec']} | "
                      f"{r['omega']:.4g} | {r['iterations']:,}{'' if r['converged'] else ' (not reached)'} | "
                      f"{r['it_ratio']:.3f} | {100 * r['share']:.3f} % | {100 * r['share64']:.3f} % | "
                      f"{100 * (1 - r['share']):.2f} % |", flush=True)
    if "b" in parts:
        t = time_per_iteration(iters=100 if a.quick else 1500, pairs=3 if a.quick else 7)
        print("\n| codec | time per iteration ÷ float64 (a9a, n = 100, median of paired runs) |\n|---|---|")
        for k, v in t.items():
            print(f"| {k} | {v:.3f} |", flush=True)
    if "c" in parts:
        print("\n| codec | analytic uplink (B) | expected with Dask's framing (B) | serialized (B) | serialized ÷ "
              "expected |\n|---|---|---|---|---|")
        for r in serialized():
            print(f"| {r['codec']} | {r['analytic']:,.0f} | {r['expected']:,.0f} | {r['serialized']:,} | "
                  f"{r['ratio']:.3f} |", flush=True)
    if "d" in parts:
        print("\n| method | codec | mean final value (± se, 20 seeds; T = 600 on a1a, 1000 on the quadratic) | bound at T | source | "
              "bound ÷ measured |\n|---|---|---|---|---|---|")
        for r in slack(seeds=5 if a.quick else 20) + slack_quadratic(seeds=5 if a.quick else 20):
            print(f"| {r['method']} | {r['codec']} | {r['mean']:.4g} ± {r['se']:.2g} | {r['bound']:.4g} | "
                  f"{r['source']} | {r['slack']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
