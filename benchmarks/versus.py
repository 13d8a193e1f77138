"""Item 3: ISEGA (tau = 1/n and tau = 1) against dask-ml's L-BFGS, on loopback and on bandwidth-limited links.

What is measured, per setting:

- **rounds to eps** (F - F* <= 1e-6 (F(x0) - F*)) and the uplink bytes up to then. For ISEGA these come from the
  in-process engine (the Dask engine produces the same iterates for a seed, tests/test_dask_engine.py), with the
  objective checked every ``CHECK_EVERY`` iterations; the paper's step multiplier 4 for both tau.
- **seconds per round** on the Dask engine (2 worker processes), median of repetitions, in this run.
- **time to eps** = rounds x seconds per round (ISEGA), or the measured wall time of a dask-ml
  ``LogisticRegression(solver='lbfgs')`` fit (a9a), whose evaluations are counted by wrapping
  ``dask_glm.algorithms.compute`` (each evaluation is one round: beta out, a loss and gradient back).
- dask-ml/dask-glm uplink bytes per round: every chunk's partial gradient and loss, chunks x (d + 1) x 8 B,
  the same accounting as ours (values x 8 B).

For the synthetic d = 10^5 problem dask-glm needs a dense array (N x d, 16 GB), so its L-BFGS is **modelled**: the
rounds are those of scipy's L-BFGS-B on the client (what dask-glm's ``lbfgs`` runs, with the loss and gradient
computed in-process), and a round is charged the measured Dask round time of ISEGA with tau = 1 (the same bytes per
link: one d-vector per worker up, x down).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .common import load, table

LAM_A9A = 1e-3
LAM_SYN = 1e-6
EPS = 1e-6
MULTIPLIER = 4
CHECK_EVERY = 25
N = 8
CHUNKS = 8
RATES = ("1gbit", "100mbit", "10mbit")
CACHE = "outputs/bench_cache"


def rounds_to_eps(setup, max_iter: int = 200_000) -> dict:
    """Iterations and uplink bytes until F - F* <= EPS (F(x0) - F*), in-process (same iterates as on Dask)."""
    F0 = setup.problem.F(setup.x0) - setup.reference.F_star
    hit = {}

    def observe(rec):
        if "rec" not in hit and rec["subopt"] <= EPS * F0:
            hit["rec"] = rec

    try:
        setup.run(max_iter=max_iter, tol=1e-300, log_every=CHECK_EVERY, observer=observe,
                  should_stop=lambda: "rec" in hit)
    except KeyboardInterrupt:   # raised by the loop when should_stop() says so
        if "rec" not in hit:
            raise
    if "rec" not in hit:
        return {"rounds": float("nan"), "uplink": float("nan"), "reached": False}
    r = hit["rec"]
    return {"rounds": r["step"], "uplink": r["uplink_bytes"], "reached": True}


def scipy_lbfgs_rounds(problem, F_star) -> dict:
    """Evaluations of scipy's L-BFGS-B (dask-glm's lbfgs) until F - F* <= EPS (F(0) - F*), computed in-process."""
    from scipy.optimize import fmin_l_bfgs_b

    F0 = problem.F(np.zeros(problem.d)) - F_star
    vals = []

    def fg(x):
        vals.append(problem.F(x))
        return vals[-1], problem.grad(x)

    fmin_l_bfgs_b(fg, np.zeros(problem.d), pgtol=1e-12, factr=10, maxiter=5000)
    sub = np.array(vals) - F_star
    ok = np.nonzero(sub <= EPS * F0)[0]
    return {"rounds": int(ok[0]) + 1 if ok.size else float("nan"), "reached": bool(ok.size)}


def daskml_lbfgs(client, data, lam, F_star, tol=1e-10, max_iter=500, shape=None) -> dict:
    """Fit dask-ml's LogisticRegression(solver='lbfgs') with our objective; time and rounds to eps from its evaluations.

    N f(x) = sum_j log(1 + exp(-b_j a_j^T x)) + (lambda N / 2)||x||^2: dask-glm's logistic loss (a sum over rows,
    y in {0, 1}) plus lamduh ||x||^2 / 2 with lamduh = 1/C = lambda N; no intercept; ``normalize=False`` (dask-glm
    standardizes X by default).
    """
    import dask.array as da
    import dask_glm.algorithms as alg
    from dask_ml.linear_model import LogisticRegression

    Nrows = data.N
    X = da.from_array(data.A.toarray(), chunks=(-(-Nrows // CHUNKS), data.d))
    y = da.from_array((data.b > 0).astype(float), chunks=-(-Nrows // CHUNKS))
    X, y = client.persist([X, y])
    from distributed import wait

    wait([X, y])
    if shape is not None:
        shape()
    evals = []
    original = alg.compute

    def counting_compute(*args, **kwargs):
        out = original(*args, **kwargs)
        if len(args) == 2:          # compute(loss_fn, gradient_fn) inside lbfgs' compute_loss_grad
            evals.append((time.perf_counter(), float(np.asarray(out[0]))))
        return out

    model = LogisticRegression(solver="lbfgs", C=1.0 / (lam * Nrows), fit_intercept=False, max_iter=max_iter, tol=tol,
                               solver_kwargs={"normalize": False})
    alg.compute = counting_compute
    try:
        t0 = time.perf_counter()
        model.fit(X, y)
        total = time.perf_counter() - t0
    finally:
        alg.compute = original
    F0 = float(np.log(2.0)) - F_star            # F(0) = log 2 for the logistic loss
    sub = np.array([v / Nrows for _, v in evals]) - F_star
    ok = np.nonzero(sub <= EPS * F0)[0]
    final_rel = float(sub[-1] / F0) if sub.size else float("nan")
    if not ok.size:
        return {"time": float("nan"), "rounds": float("nan"), "reached": False, "fit_s": total,
                "evals": len(evals), "final_rel": final_rel}
    k = int(ok[0])
    return {"time": evals[k][0] - t0, "rounds": k + 1, "reached": True, "fit_s": total, "evals": len(evals),
            "final_rel": final_rel, "uplink": (k + 1) * CHUNKS * (data.d + 1) * 8}


def round_seconds(setup, pool, rounds: int, reps: int) -> float:
    """Median seconds per round of the Dask engine for ``setup`` on ``pool`` (a warm-up of 2 rounds excluded)."""
    from .dask_overhead import timed_rounds

    timed_rounds(setup, pool, 2)
    return statistics.median(timed_rounds(setup, pool, rounds)["round"] for _ in range(reps))


def _setups(quick):
    """{problem name: (data, lam, {variant: RunSetup})} for a9a and the synthetic problem."""
    from .common import setup

    from .synthetic import make_sparse_logistic

    out = {}
    a9a = load("a9a")
    out["a9a"] = (a9a, LAM_A9A, 1, {
        f"ISEGA τ=1/{N}": setup("isega", data=a9a, lam=LAM_A9A, n=N, block_size=1, step_multiplier=MULTIPLIER,
                               cache_dir=CACHE),
        "ISEGA τ=1": setup("isega", data=a9a, lam=LAM_A9A, n=N, block_size=1, tau=1.0,
                           step_multiplier=MULTIPLIER, cache_dir=CACHE)})
    syn = make_sparse_logistic(N=20_000, d=100_000, nnz_per_row=20, seed=0)
    # the library's reference solve (Newton-CG with Hessian-vector products above d = 2000), once for both variants
    sparse = setup("isega", data=syn, lam=LAM_SYN, n=N, block_size=100, step_multiplier=MULTIPLIER)
    out[syn.name] = (syn, LAM_SYN, 100, {
        f"ISEGA τ=1/{N}": sparse,
        "ISEGA τ=1": setup("isega", data=syn, lam=LAM_SYN, n=N, block_size=100, tau=1.0,
                           reference=sparse.reference, step_multiplier=MULTIPLIER)})
    return out


def measure(quick: bool = False, netns: bool = True) -> dict:
    from .common import setup

    from .cluster import local_client

    setups = _setups(quick)
    res = {"settings": [], "per_round": [], "notes": []}
    # rounds to eps: in-process, once per problem and variant
    counts = {}
    for pname, (data, lam, bsize, variants) in setups.items():
        for vname, s in variants.items():
            counts[pname, vname] = rounds_to_eps(s)
            print(f"[item3] {pname} {vname}: {counts[pname, vname]}", flush=True)
        s = next(iter(variants.values()))
        counts[pname, "L-BFGS (scipy, rounds)"] = scipy_lbfgs_rounds(s.problem, s.reference.F_star)
        print(f"[item3] {pname} scipy L-BFGS: {counts[pname, 'L-BFGS (scipy, rounds)']}", flush=True)
    res["counts"] = {f"{k[0]}|{k[1]}": v for k, v in counts.items()}

    def networks(client, labels, shape, reps, rounds_a9a, rounds_syn):
        """Rounds timed under each network label; pools and data are placed unshaped (shape(None)) first."""
        from isparse.engines.dask import DaskPool

        for pname, (data, lam, bsize, variants) in setups.items():
            rounds = rounds_a9a if pname == "a9a" else rounds_syn
            shape(None)
            pools = {v: DaskPool(client, *s.pool_args()) for v, s in variants.items()}
            for label in labels:
                shape(label)
                sec = {v: round_seconds(s, pools[v], rounds, reps) for v, s in variants.items()}
                for vname, s in variants.items():
                    c = counts[pname, vname]
                    res["settings"].append(dict(network=label or "loopback (LocalCluster)", problem=pname,
                                                method=vname, rounds=c["rounds"], sec_per_round=sec[vname],
                                                time=c["rounds"] * sec[vname], uplink=c["uplink"],
                                                kind="rounds in-process × measured Dask round"))
                if pname != "a9a":
                    lb, t1 = counts[pname, "L-BFGS (scipy, rounds)"], sec["ISEGA τ=1"]
                    res["settings"].append(dict(network=label or "loopback (LocalCluster)", problem=pname,
                                                method="dask-ml L-BFGS (model)", rounds=lb["rounds"], sec_per_round=t1,
                                                time=lb["rounds"] * t1, uplink=lb["rounds"] * N * (data.d + 1) * 8,
                                                kind="scipy L-BFGS-B rounds × ISEGA τ=1 Dask round"))
                print(f"[item3] {label or 'loopback'} {pname}: "
                      + ", ".join(f"{k} {v * 1e3:.2f} ms/round" for k, v in sec.items()), flush=True)
            for p in pools.values():
                p.close()
            del pools
        data, lam = setups["a9a"][0], setups["a9a"][1]
        F_star = setups["a9a"][3]["ISEGA τ=1"].reference.F_star
        for label in labels:
            shape(None)     # dask-ml's data are persisted on the workers unshaped, then its fit is shaped
            m = daskml_lbfgs(client, data, lam, F_star, shape=lambda lab=label: shape(lab))
            res["settings"].append(dict(network=label or "loopback (LocalCluster)", problem="a9a", method="dask-ml L-BFGS",
                                        rounds=m["rounds"], time=m["time"], uplink=m.get("uplink", float("nan")),
                                        sec_per_round=m["time"] / m["rounds"] if m["reached"] else float("nan"),
                                        kind=f"measured fit ({m['evals']} evaluations in {m['fit_s']:.1f} s, "
                                             f"final relative subopt {m['final_rel']:.1e})"))
            print(f"[item3] {label or 'loopback'} dask-ml: {m}", flush=True)

    reps = 2 if quick else 3
    with local_client() as client:
        networks(client, [None], lambda label: None, reps, 50 if quick else 200, 5 if quick else 20)
        # per-round bytes and time at n = 8 and 100 on a9a (tau = 1/n and 1)
        from isparse.engines.dask import DaskPool

        a9a = setups["a9a"][0]
        for n in (8, 100):
            for tau in ("auto", 1.0):
                s = setup("isega", data=a9a, lam=LAM_A9A, n=n, block_size=1, tau=tau,
                          step_multiplier=MULTIPLIER, cache_dir=CACHE)
                msgs = s.run(max_iter=1, tol=1e-300).uplink_per_worker.sum()
                pool = DaskPool(client, *s.pool_args())
                sec = round_seconds(s, pool, 50 if quick else 200, reps)
                pool.close()
                res["per_round"].append(dict(n=n, tau=s.method.tau, uplink=int(msgs), ms=1e3 * sec))
    if netns:
        from . import netns as ns

        reason = ns.available()
        if reason:
            res["notes"].append(f"bandwidth-limited runs skipped: {reason}")
        else:
            rates = [f"tbf {r}" for r in (RATES[-1:] if quick else RATES)]
            with ns.namespaced_client() as client:
                networks(client, rates, lambda label: ns.shape(label.split()[-1] if label else None), 1,
                         20 if quick else 50, 2 if quick else 3)
                ns.shape(None)
    return res


def report(res: dict) -> tuple[str, str, list]:
    per_round = table(["n", "τ", "uplink B per round", "Dask round (ms)"],
                      [[r["n"], f"{r['tau']:.3g}", r["uplink"], r["ms"]] for r in res["per_round"]])
    body = []
    for r in res["settings"]:
        body.append([r["network"], r["problem"], r["method"], r["rounds"], 1e3 * r["sec_per_round"], r["time"],
                     r["uplink"], r["kind"]])
    main = table(["network", "problem", "method", "rounds to ε", "s per round (ms)", "time to ε (s)",
                  "uplink B to ε", "how"], body)
    # crossover: per network and problem, who is fastest, and tau=1/n vs tau=1
    lines = []
    key = {}
    for r in res["settings"]:
        key.setdefault((r["network"], r["problem"]), {})[r["method"]] = r
    for (net, prob), ms in key.items():
        finite = {m: r["time"] for m, r in ms.items() if r["time"] == r["time"]}
        best = min(finite, key=finite.get) if finite else "–"
        sp = [m for m in ms if m.startswith("ISEGA τ=1/")]
        ratio = ms[sp[0]]["time"] / ms["ISEGA τ=1"]["time"] if sp and "ISEGA τ=1" in ms else float("nan")
        lines.append([net, prob, best, ratio])
    cross = table(["network", "problem", "fastest to ε", "time ISEGA τ=1/n ÷ τ=1 (< 1: sparsification pays)"], lines)
    return per_round, main, cross
