"""Render docs/benchmarks.md from the results of one run (every number in it comes from that run)."""

from __future__ import annotations

import statistics

from .common import load_average, machine, now_utc, table, verdict, versions


def context(quick: bool) -> dict:
    return {"date": now_utc(), "machine": machine(), "versions": versions(), "quick": quick,
            "load_before": load_average()}


def _goal_line(name, text):
    return f"- **{name}**: {text}"


#: the items with their own command (10: ``python -m benchmarks.codecs``; 11: the benchopt run and
#: ``python -m benchmarks.benchopt_summary``; 13: ``python -m benchmarks.downlink``; 14: ``python -m
#: benchmarks.estimator_dask``; 15: ``python -m benchmarks.beyond_memory``): :func:`render` keeps their goal lines and
#: sections from the doc it rewrites
STANDALONE = ("10", "11", "13", "14", "15")


def standalone_parts(previous: str) -> tuple[list[str], list[str]]:
    """The goal lines and the sections of the :data:`STANDALONE` items in ``previous`` (the doc being rewritten)."""
    goals, sections, keep = [], [], False
    for line in previous.splitlines():
        if line.startswith("## "):
            keep = any(line.startswith(f"## {k}. ") for k in STANDALONE)
        if keep:
            sections.append(line)
        elif any(line.startswith(f"- **{k}. ") for k in STANDALONE):
            goals.append(line)
    while sections and not sections[-1].strip():   # the blank line before the next section is the renderer's
        sections.pop()
    return goals, sections


def render(ctx: dict, results: dict, errors: dict, previous: str = "") -> str:
    """The doc: the items of ``results`` and, from ``previous`` (the doc it replaces), the items written by their
    own commands (:data:`STANDALONE`)."""
    m, v = ctx["machine"], ctx["versions"]
    mode = "`--quick` (development mode: fewer repetitions and sizes)" if ctx["quick"] else "full"
    out = [
        "# Benchmarks",
        "",
        "Written by `python -m benchmarks` (how to run it: [benchmarking](benchmarking.md)); every number below comes from the",
        f"run that wrote this file, in {mode} mode. Figures are ratios against a baseline measured in the same run",
        "(medians of repetitions); absolute times are reported, not asserted, and are noisy on a shared machine:",
        "the load averages before and after the run are recorded below (2 cores: a load above 2 means other work).",
        "The library measured is named by the rows *isparse imported from* and *isparse vs HEAD* (a run may import a",
        "frozen copy of `isparse/`, so that edits of the working tree during the run reach neither the client nor the",
        "Dask workers; every cluster checks that its workers import the same copy as the client).",
        "",
        "## Machine and versions",
        "",
        table(["", ""], [["date", ctx["date"]], ["CPU", m["cpu"]], ["cores", m["cores"]], ["RAM", m["ram"]],
                          ["OS", m["os"]], ["Python", m["python"]],
                          ["load average (1, 5, 15 min) before", ctx["load_before"]],
                          ["load average after", ctx.get("load_after", "?")],
                          ["duration of this run", f"{ctx.get('duration_s', 0) / 60:.1f} min"]]
              + [[k, val] for k, val in v.items()]),
        "",
    ]
    if ctx.get("runs"):
        out += ["Items merged from several runs (`--merge`): each item's numbers come from the run named here, and",
                "its ratios from within that run.", "",
                table(["items", "date", "git commit", "load before", "load after", "duration"],
                      [[", ".join(r["items"]), r["date"], r["commit"], r["load_before"], r["load_after"],
                        f"{r['duration_s'] / 60:.1f} min"] for r in ctx["runs"]]), ""]
    out += [
        "## Goals",
        "",
    ]
    goals, sections = [], []
    for item, section in (("1", _item1), ("2", _item2), ("6", _item6), ("3", _item3), ("4", _item4),
                          ("5", _item5), ("7", _item7), ("8", _item8), ("9", _item9)):
        if item in results:
            g, s = section(results[item])
            goals.append(g), sections.append(s)
    for item, tb in errors.items():
        goals.append(_goal_line(f"Item {item}", "**failed in this run** (traceback at the end)"))
    kept_goals, kept_sections = standalone_parts(previous)
    late_goals, late_sections = [], []   # items numbered after the standalone ones: placed after them
    for item, section in (("12", _item12),):
        if item in results:
            g, s = section(results[item])
            late_goals.append(g), late_sections.append(s)
    out += goals + kept_goals + late_goals + [""] + sections + ([""] if kept_sections and sections else []) \
        + kept_sections + ([""] if late_sections and (kept_sections or sections) else []) + late_sections
    if errors:
        out += ["## Failures", ""]
        for item, tb in errors.items():
            out += [f"Item {item}:", "", "```", tb.rstrip(), "```", ""]
    return "\n".join(out) + "\n"


def _item1(res):
    from . import inprocess

    after, before = res["after"], res.get("before")
    goals = []
    for n, g in inprocess.GOALS.items():
        cells = [r for r in after["rows"] if r["n"] == n]
        if not cells:
            continue
        worst = max(r["ratio"] for r in cells)
        per = "; ".join(f"{r['algorithm']} on {r['data']} {r['ratio']:.2f}" for r in cells)
        met = sum(r["ratio"] <= g for r in cells)
        goals.append(f"n = {n} (goal ≤ {g:g}): {verdict(worst, g)} for the worst case, {met} of {len(cells)} "
                     f"cells met; {per}")
    goal = _goal_line("1. In-process engine vs one full-data gradient", ". ".join(goals) + ".")
    text = [
        "## 1. In-process engine vs the physical limit",
        "",
        "Per-iteration wall time of the library's master loop (`isparse.engines.run` on an `InProcessPool`, no bound",
        "so no Lyapunov monitoring; the two objective evaluations of the first and last records subtracted) divided",
        "by the time of one full-data gradient `Aᵀ φ'(A x)/N + λx` with scipy.sparse (CSR A, its transpose built once",
        f"as CSR and kept), measured back to back in each of {after['reps']} repetitions (median of the",
        "per-repetition ratios). *ratio vs A.T per call* divides by the gradient that takes scipy's `A.T` on every",
        "call (the baseline of the earlier versions of this file; 20–30 % slower on these sizes). Block size 1,",
        "τ = auto = ⌈m/n⌉/m, λ = 1e-3, step of the theorem. ISAGA computes one example's gradient per worker and",
        "iteration, so the full-data gradient is not its floor; it is in the table for the per-worker overhead.",
        "",
        inprocess.report(after, before),
        "",
    ]
    if before:
        text += [
            f"*ratio before* is the same measurement, in the same run, on the library of commit `{before['ref']}` (the",
            "branch point of the batched redesign), imported from a `git archive` of it in a subprocess and driven by",
            "the same code (`InProcessPool(*setup.pool_args())` and `isparse.engines.run(setup.method, pool, ...)`",
            "exist in both APIs). The old library runs one Python worker step per logical worker, so at n = 1000 it is",
            f"timed over only {before.get('iters_n1000', '?')} iterations per repetition (column *iterations timed",
            "before*). What changed: the hosted workers' steps are one batched step (`StackedGLM`: one CSR matrix of",
            "the hosted rows, one margin product, the sampled coordinates of every worker gathered at once), the",
            "τm-nice samplings of all hosted workers are drawn at once from a counter-based generator keyed by",
            "(seed, i, t) (`isparse.compression.sampling.Sampler`, instead of one `Generator.choice` per worker), messages are",
            "one values-only batch per host (`Messages`), and the master scatters them with one `bincount`.",
            "",
        ]
    if before:
        prev = {(r["data"], r["n"], r["algorithm"]): r for r in before["rows"]}
        slower = [f"{r['algorithm']} on {r['data']} at n = {r['n']} ({prev[k]['iter_ms'] / r['iter_ms']:.2f})"
                  for r in after["rows"] if (k := (r["data"], r["n"], r["algorithm"])) in prev
                  and prev[k]["iter_ms"] < r["iter_ms"]]
        text += ["Slower than before (time before ÷ after < 1): " + ("; ".join(slower) if slower else "none") + ".", ""]
    for p in res.get("profiles", []):
        row = next((r for r in after["rows"] if (r["data"], r["n"], r["algorithm"]) == (p["data"], p["n"], p["algorithm"])),
                   None)
        text += [
            f"Where the time goes in the worst cell at n = {p['n']}, {p['algorithm'].upper()} on {p['data']} (cProfile of "
            f"{p['iters']} "
            f"iterations in this run, {p['total_us']:.0f} µs per iteration under the profiler"
            + (f", {1e3 * row['iter_ms']:.0f} µs without it, against {1e3 * row['grad_ms']:.0f} µs for the full gradient"
               if row else "") + "; the top functions by own time):",
            "",
            inprocess.report_profile(p),
            "",
        ]
        if p["algorithm"] not in ("ibcd", "isega"):
            text += [f"({p['algorithm'].upper()}'s step computes one example's gradient per worker, not φ'(A x) of all "
                     f"rows: without the profiler one iteration takes {p['iter_us']:.0f} µs.)", ""]
            continue
        text += [
            f"Without the profiler (medians, back to back): one iteration {p['iter_us']:.0f} µs, of which φ'(A x) of the "
            f"hosted rows (`StackedGLM.residuals`: the margin product and the logistic derivative, which the full "
            f"gradient computes too) {p['residuals_us']:.0f} µs; the rest of the step (sampling, the gathered "
            f"coordinates, messages, the master's scatter, the loop) {p['rest_us']:.0f} µs, against "
            f"{p['back_us']:.0f} µs for the part of the full gradient ({p['full_us']:.0f} µs) it replaces, "
            f"Aᵀr/N + λx; the baseline's own φ'(A x) (with temporaries, not in place) takes the other "
            f"{p['full_us'] - p['back_us']:.0f} µs. So the ratio is ≤ 1 when the rest of the step costs less than "
            "Aᵀr/N + λx plus what the in-place residuals save over the baseline's.",
            "",
        ]
    return goal, "\n".join(text)


def _item2_rest(rows) -> list:
    out = []
    for r in rows:
        rest = r["overhead_ms"] - r["bare_ms"]
        via = r.get("rounds_via", "actor")
        out.append(f"- n = {r['n']}, rounds = {via}: overhead − bare actor round trip = {rest:.2f} ms, made of: the "
                   f"{'stream' if via == 'stream' else 'actor'} round trip beyond "
                   f"the bare one {r['comm_beyond_bare_ms']:.2f} ms (a busy trivial actor already costs "
                   f"{r['busy_ms'] - r['bare_ms']:.2f} ms more than an idle one, leaving "
                   f"{r['comm_beyond_busy_ms']:.2f} ms to the library's call; serializing the `Messages` replies "
                   f"instead of plain arrays, client-side estimate: {r['ser_ms'] - r['ser_bare_ms']:.2f} ms), "
                   f"snapshot {r['snapshot_ms']:.2f} ms, bookkeeping {r['bookkeeping_ms']:.2f} ms, master "
                   f"{r['master_ms'] - r['master_inproc_ms']:+.2f} ms against in-process, worker compute "
                   f"{r['compute_ms'] - r['compute_inproc_ms']:+.2f} ms against in-process (the slower of two hosts, "
                   "n/2 workers each, against one host of all n workers).")
    return out


def _item2(res):
    from . import dask_overhead

    rows = res["rows"]
    parts = [f"n = {r['n']}{', rounds = ' + r['rounds_via'] if 'rounds_via' in r else ''}: overhead "
             f"{r['overhead_ms']:.2f} ms = {r['overhead_over_bare']:.2f} × the bare round trip "
             f"({r['bare_ms']:.2f} ms), {verdict(r['overhead_over_bare'], dask_overhead.GOAL_BARE)}"
             + (f" ({r['overhead_over_bare_async']:.2f} × an `async def` bare call, {r['bare_async_ms']:.2f} ms)"
                if "bare_async_ms" in r else "")
             + (f"; round trip beyond compute {r['comm_ms']:.2f} ms, stream goal "
                f"{verdict(r['comm_ms'], dask_overhead.GOAL_STREAM_MS)} (bare stream round trip "
                f"{r.get('bare_stream_ms', float('nan')):.2f} ms)" if r.get("rounds_via") == "stream" else "")
             for r in rows]
    var = res.get("variant")
    if var:
        parts.append("with Dask's own MALLOC_TRIM_THRESHOLD_=65536 on the workers (diagnostic): " + ", ".join(
            f"n = {r['n']}{' ' + r['rounds_via'] if 'rounds_via' in r else ''} {r['overhead_over_bare']:.2f} ×"
            for r in var["rows"]))
    goal = _goal_line(f"2. Dask per-round overhead ≤ {dask_overhead.GOAL_BARE:g} × a bare actor round trip; over the "
                      f"streams, round trip beyond compute ≤ {dask_overhead.GOAL_STREAM_MS:g} ms", "; ".join(parts)
                      + ".")
    t1, t2 = dask_overhead.report(res)
    text = [
        "## 2. Dask engine overhead per round",
        "",
        *([res["rerun_note"], ""] if res.get("rerun_note") else []),
        f"{res['algorithm'].upper()} on a9a (τ = auto = 1/n rounded up to whole blocks, block size 1, λ = 1e-3) on a",
        "`LocalCluster` of 2 worker processes (127.0.0.1, 1 thread each, `direct_to_workers=True`), one `WorkerHost`",
        f"actor per process; medians over {rows[0]['reps']} repetitions of {rows[0]['rounds']} rounds, the pool with its",
        f"defaults `snapshot_every={res['snapshot_every']}` and `measure_every={res['measure_every']}` (every 50th round",
        "the worker states are fetched for recovery and the hosts size their replies; both are inside the timed",
        "rounds and shown in the split). The cluster is started as the pipeline's `cluster=local` starts it, with",
        f"`MALLOC_TRIM_THRESHOLD_` = {', '.join(str(v) for v in res.get('malloc_trim', ['?']))} in the workers'",
        "environment (`cluster.malloc_trim_threshold`, pipeline/cluster/options.py); the host's round runs on the",
        "worker's event loop, as an `async def` actor method (`rounds = actor`), or in a thread of the host's own that",
        "serves its stream (`rounds = stream`, `cluster.rounds`'s default; docs/clusters.md).",
        "",
        dask_overhead.__doc__.split("\n", 2)[2].strip(),
        "",
        t1,
        "",
        "The split of the Dask round (per round; master + worker compute + round trip beyond compute + snapshot",
        "+ bookkeeping = Dask round; on the actor path the bare actor round trip is part of the round trip):",
        "",
        t2,
        "",
    ] + _item2_rest(rows) + [""]
    if var:
        v1, v2 = dask_overhead.report(var)
        text += [
            "**Diagnostic: the same measurement with Dask's own `MALLOC_TRIM_THRESHOLD_=65536`.** distributed starts",
            "every worker with it (`distributed.nanny.pre-spawn-environ`). Setting it turns off glibc's dynamic",
            "mmap/trim thresholds, so the worker step's temporaries of more than 64–128 kB (the margins and residuals of",
            "a host's rows) are returned to the kernel when freed and page-faulted in again on the next step; that is why",
            "the pipeline's local cluster sets `cluster.malloc_trim_threshold` (256 MiB). With the pipeline's setting the",
            "same host round (the first host's workers, the same code) took "
            + ", ".join(f"{r['host_worker_cpu_ms']:.2f} ms of CPU in a Dask worker against {r['host_client_cpu_ms']:.2f} ms "
                        f"in the client at n = {r['n']}" for r in rows)
            + " (last column of the split). A second cluster with Dask's setting (worker environment: "
            f"{', '.join(str(v) for v in var.get('malloc_trim', ['?']))}), in the same run:",
            "",
            v1,
            "",
            v2,
            "",
        ] + _item2_rest(var["rows"]) + [""]
    return goal, "\n".join(text)


def _item3(res):
    from . import versus

    per_round, main, cross = versus.report(res)
    by = {}
    for r in res["settings"]:
        by.setdefault((r["network"], r["problem"]), {})[r["method"]] = r
    pays, lbfgs_best = [], []
    for (net, prob), ms in by.items():
        sparse = [r for m, r in ms.items() if m.startswith("ISEGA τ=1/")]
        if sparse and "ISEGA τ=1" in ms and sparse[0]["time"] < ms["ISEGA τ=1"]["time"]:
            pays.append((net, prob, sparse[0]["time"] / ms["ISEGA τ=1"]["time"]))
        finite = {m: r["time"] for m, r in ms.items() if r["time"] == r["time"]}
        if finite and "L-BFGS" in min(finite, key=finite.get):
            lbfgs_best.append((net, prob))
    nets = {r["network"] for r in res["settings"]}
    goal = _goal_line("3. Against dask-ml L-BFGS, and where independent sparsification pays",
                      "measured (no numeric goal); see the crossover table in section 3. "
                      f"Networks measured: {', '.join(sorted(nets))}.")
    text = [
        "## 3. Against what a Dask user runs today",
        "",
        versus.__doc__.split("\n", 2)[2].strip(),
        "",
        f"ε: F − F* ≤ {versus.EPS:g} (F(x⁰) − F*). n = {versus.N} logical workers on 2 Dask worker processes; ISEGA",
        f"with the paper's step multiplier {versus.MULTIPLIER}; a9a with λ = {versus.LAM_A9A:g}, block size 1; the",
        "synthetic problem (`benchmarks/synthetic.py`: N = 20 000, d = 100 000, 20 non-zeros per row, unit-norm",
        f"rows, labels from a planted model) with λ = {versus.LAM_SYN:g}, block size 100, reference x* by the",
        "library's reference solve (`isparse.build`: Newton-CG with Hessian-vector products above d = 2000). Messages",
        "are values only (the master recomputes the block ids from (seed, i, t)). On the shaped networks each Dask",
        "worker runs in its own network namespace",
        "behind a veth pair with a `tbf` qdisc of the rate on both ends (`benchmarks/netns.py`); the scheduler",
        "and the client are in the root namespace.",
        "",
        "Per-round uplink bytes and round time on loopback (a9a):",
        "",
        per_round,
        "",
        "Time and uplink bytes to ε:",
        "",
        main,
        "",
        "Crossover:",
        "",
        cross,
        "",
        "Reading it: ISEGA with τ = 1/n is faster to ε than with τ = 1 in: "
        + (", ".join(f"{p} on {n}" for n, p, r in pays) or "no setting") + "; L-BFGS is the fastest in: "
        + (", ".join(f"{p} on {n}" for n, p in lbfgs_best) or "no setting") + ". On a9a (d = 123) a round's",
        "bytes are a few kB, so the round time is latency and compute, and L-BFGS's few dozen rounds beat the",
        "thousands a first-order method needs, in time and in total uplink bytes, as the issue expected. On the",
        "synthetic d = 10⁵ problem a round's bytes dominate, τ = 1/n cuts the uplink per round n-fold (values only)",
        "while needing more rounds; the crossover is where the table's last column crosses 1.",
        "",
        "Reduced, to fit the run in the time budget: ISEGA's time to ε is its rounds (counted in-process, the same",
        "iterates as on Dask) times its measured Dask round, not a full Dask run; 3 rounds per rate (1 repetition)",
        "on the shaped synthetic runs; dask-ml on the synthetic problem is modelled (above); dask-glm's",
        "`proximal_grad` was not rerun (docs/algorithms.md §8: 4.8e-4 relative suboptimality after 90 s on a9a).",
        "Only bandwidth is shaped (no `netem` delay here), and the downlink (x to each Dask worker) is shaped too.",
        "",
    ] + [f"- {n}" for n in res.get("notes", [])] + [""]
    return goal, "\n".join(text)


def _item4(res):
    from . import memory

    rows = res["rows"]
    dom = [r for r in rows if r["state_share"] > 0.5]
    goal = _goal_line("4. Memory of each Dask worker vs shards + state",
                      "measured (no numeric goal); method state dominates in "
                      + (", ".join(sorted({f"{r['algorithm']} n={r['n']}" for r in dom})) or "no configuration"))
    text = [
        "## 4. Memory of the Dask workers",
        "",
        memory.__doc__.split("\n", 2)[2].strip(),
        "",
        memory.report(res),
        "",
    ]
    vms = {}
    for r in rows:
        vms.setdefault((r["algorithm"], r["n"]), []).append(r.get("vms_mb", float("nan")))
    if ("isaga", 8) in vms and ("isega", 8) in vms:
        diff = statistics.median(vms["isaga", 8]) - statistics.median(vms["isega", 8])
        state = statistics.median(r["state_mb"] for r in rows if (r["algorithm"], r["n"]) == ("isaga", 8))
        text += [f"At n = 8 an ISAGA worker process's virtual size grew {diff:.1f} MB more than an ISEGA one's, against "
                 f"{state:.1f} MB of ISAGA table per process: the allocation is the table, while its resident part",
                 "grows only with the rows written so far.", ""]
    text += [
        "ISAGA's table is l_i × d floats per logical worker, i.e. N × d × 8 B over the cluster (32 MB on a9a)",
        "against 12 B per non-zero for the CSR shards (5.4 MB): it dominates as soon as d × 8 exceeds 12 × the",
        "non-zeros per row, which holds for every sparse data set here. The peak also carries transient copies",
        "(the pickled shards and states while the actor is built) and the stacked data's lazily built CSC copy",
        "(and column index) that the sampled-coordinate gradients read, made on first use, not pickled.",
        "",
        "**Not done: the one-scalar-per-example SAGA memory for GLMs.** For a GLM, ∇f_ij(x) = c φ'(a_jᵀx) a_j +",
        "∇P(x), so plain SAGA can store the scalar φ'(a_jᵀx) per example instead of a d-vector. ISAGA does not fit",
        "that trick: with τ < 1 only the coordinates U_i of row j of the table are refreshed (Algorithm 5), so a",
        "row mixes coordinates of gradients taken at different iterates and is no longer a scalar times a_j. It",
        "would be exact only for τ = 1 (`saga`), or as a different method (refresh the scalar and send the",
        "sparsified difference), whose theory the paper does not give; so it is left out rather than bolted on.",
        "",
    ]
    return goal, "\n".join(text)


def _item5(res):
    from . import scaling

    rows = res["rows"]
    its = [r["iterations"] for r in rows]
    spread = max(its) / min(its)
    last = rows[-1]
    goal = _goal_line("5. Scaling with n (τ = 1/n)",
                      f"iterations to ε vary by a factor {spread:.2f} over n = {rows[0]['n']}..{last['n']}; bytes per "
                      f"worker at n = {last['n']} are {last['uplink_per_worker'] / rows[0]['uplink_per_worker']:.3f} "
                      "of n = 1's (paper: flat iterations, bytes per worker ∝ 1/n).")
    text = [
        "## 5. Scaling with n",
        "",
        f"ISEGA on a9a, τ = auto (= ⌈123/n⌉/123, i.e. 1/n rounded up to whole blocks), block size 1, λ = {res['lam']:g}",
        f"(not a9a's 1e-3, to keep the 8 runs within minutes), step multiplier {res['multiplier']}, in-process engine,",
        f"ε: ‖x − x*‖² ≤ {res['tol']:g} ‖x⁰ − x*‖². Uplink: values × 8 B (messages are values only: the master",
        "recomputes the block ids from (seed, i, t)).",
        "",
        scaling.report(res),
        "",
    ]
    return goal, "\n".join(text)


def _item6(res):
    from . import highdim

    t1, t2 = highdim.report(res)
    main = res["rows"][0]
    ref = res.get("reference", {})
    goal = _goal_line("6. d = 10⁶ sparse logistic problem (reference solve, ISEGA on both engines)",
                      f"measured (no numeric goal): reference solve {ref.get('seconds', float('nan')):.1f} s "
                      f"(peak +{ref.get('peak_growth_mb', float('nan')):.0f} MB); {main['iterations']} ISEGA iterations "
                      f"at B = {main['block_size']}: in-process {main['inprocess']['run_s']:.1f} s (peak "
                      f"+{main['inprocess']['peak_growth_mb']:.0f} MB), Dask {main['dask']['run_s']:.1f} s (client peak "
                      f"+{main['dask']['peak_growth_mb']:.0f} MB, each worker "
                      + " / ".join(f"+{w['peak_growth_mb']:.0f}" for w in main["dask"]["workers"]) + " MB).")
    gen = res["generate"]
    text = [
        "## 6. A d = 10⁶ problem: reference solve and ISEGA, time and peak memory",
        "",
        highdim.__doc__.split("\n", 2)[2].strip(),
        "",
        f"The data ({res['data']}, {res['nnz']} non-zeros) took {gen['seconds']:.1f} s to generate. Reference:",
        f"residual ‖∇F(x*)‖ = {ref.get('residual', float('nan')):.2e}, F* = {ref.get('F_star', float('nan')):.6g}.",
        "",
        t1,
        "",
        "Peak memory above the RSS at the start of each phase (MB):",
        "",
        t2,
        "",
        "Reading it: the method state is n × d floats (ISEGA's h: 8 × 10⁶ × 8 B = 61 MB over the hosts, half per Dask",
        "worker), the reference keeps the n local gradients ∇f_i(x*) (another 61 MB), and each round moves d-sized",
        "vectors (x to each host, 1/n-sparse replies of τ·d values per worker). On Dask the client also keeps, for",
        "recovery, the models broadcast since the last snapshot (up to `snapshot_every` = 50 copies of x, 8 MB each)",
        "and the snapshot of every host's h; B = 1 makes every worker draw m = 10⁶ sampling keys per iteration.",
        "",
    ]
    return goal, "\n".join(text)


def _item7(res):
    from . import sweeps

    rows = res["rows"]
    budgets = res.get("budgets") or [res.get("max_iter")]
    per_budget = {b: [r for r in rows if r.get("max_iter", res.get("max_iter")) == b] for b in budgets}

    def verdict(b):
        parallel = per_budget[b][1:]
        worst = min(r["speedup"] for r in parallel) if parallel else float("nan")
        return (f"{b} iterations per job: " + ", ".join(f"{r['mode']} {r['speedup']:.2f}×" for r in parallel) + " – "
                + (f"**met** ({worst:.2f} ≥ 1.7)" if worst >= 1.7 else f"**not met** ({worst:.2f} < 1.7)"))

    goal = _goal_line("7. Parallel sweeps: serial ÷ parallel wall time of one 8-job sweep on 2 cores (goal ≥ 1.7)",
                      "; ".join(verdict(b) for b in budgets))
    text = [
        "## 7. Parallel sweeps",
        "",
        sweeps.__doc__.split("\n", 2)[2].strip(),
        "",
        f"`{res['command']}`, on {res['cores']} cores:",
        "",
        sweeps.report(res),
        "",
    ]
    for b in budgets:
        serial = per_budget[b][0]
        text.append(f"- {b} iterations per job: the serial sweep spent {serial['iterations_s']:.1f} s of its "
                    f"{serial['wall_s']:.1f} s in the jobs' iterations.")
    text += [
        "",
        "The rest of a sweep's time: the interpreter and imports, the store, each job's data load from the shared "
        "files and cache reads, its params, checkpoints and figure; the parallel launchers also pay their worker "
        "processes' start (each imports isparse, Hydra and MLflow) and, for Dask, the LocalCluster's start and close. "
        "The Dask launcher's workers start with `MALLOC_MMAP_THRESHOLD_` = 32 MiB "
        "(`hydra.launcher.malloc_mmap_threshold`): any `MALLOC_TRIM_THRESHOLD_` (Dask sets 65536, the launcher 256 MiB) "
        "fixes glibc's mmap threshold at 128 KiB, and every larger temporary of an iteration was then mapped and "
        "faulted in afresh (2.2-2.5 million page faults and 6-9 s of system time per 6,000 ISEGA iterations on "
        "phishing, 1.5-2× the iterations' time in a plain process).",
        "",
    ]
    return goal, "\n".join(text)


def _item8(res):
    from . import plan_check

    name = "8. isparse-plan's recommended τ on shaped links (tbf 1 Gbit / 100 Mbit / 10 Mbit)"
    if res.get("skipped"):
        return _goal_line(name, f"skipped: {res['skipped']}"), ""
    settings = res["settings"]
    met = sum(s["within"] for s in settings)
    goal = _goal_line(name, f"the recommended τ's measured time to ε is within {100 * res['within']:.0f} % of the "
                            f"fastest measured τ's in {met} of {len(settings)} settings: "
                            + "; ".join(f"{s['rate']} {s['ratio']:.2f}×" for s in settings)
                            + (" (**met**)" if met == len(settings) else " (**not met**)"))
    text = [
        "## 8. isparse-plan against measured times to ε, on bandwidth-shaped links",
        "",
        plan_check.__doc__.split("\n", 2)[2].strip(),
        "",
        f"Grid: τ ∈ {{{', '.join(plan_check._tau(t) for t in res['taus'])}}}, n = {res['n']}, d = {res['d']}, "
        f"λ = {res['lam']:g}, ε: ‖x − x*‖² ≤ {res['tol']:g} r₀, ISEGA with Theorem 3's γ. The planner's iterations are "
        "Theorem 3's counts (what isparse-run logs as `predicted_iterations`); its times are those counts × its "
        "fitted round time, so they are upper estimates by the theorem's conservative factor (the column *theory ÷ "
        "measured*), which the recommendation (an argmin over the grid) does not depend on as long as that factor is "
        "the same for every τ. Wall times on a shared machine: the load before and after each rate is given.",
        "",
        *plan_check.report(res),
    ]
    return goal, "\n".join(text)


def _item9(res):
    from . import fixed_costs

    goals = res.get("goals", fixed_costs.GOALS)
    c, sw, u = res["cold"], res["sweep"], res["setup"]
    checks = [("a 1-iteration run from a cold process", c["wall"]["median"], goals["cold_run_s"], "s"),
              ("a sweep's later job outside its iterations", sw["after_first"]["median"], goals["sweep_job_s"], "s"),
              ("the set-up at n = 10^4 (empty cache)", u["empty cache"]["total_s"], goals["setup_1e4_s"], "s")]
    checks += [(f"an iteration through isparse-run at n = {it['n']}", it["ratio"]["median"],
                goals.get(f"iteration_{it['n']}", float("inf")), "×") for it in res["iterations"]]
    k = res.get("costs")
    if k:
        checks += [("isparse-run --help", k["now"]["help_cpu"]["median"], goals.get("help_cpu_s", 1.5), "s CPU"),
                   ("a cold 1-iteration run", k["now"]["cold_cpu"]["median"], goals.get("cold_run_cpu_s", 3.0),
                    "s CPU"),
                   (f"a Dask sweep's job after the first ({k['jobs']} jobs)", k["now"]["per_job_after_first_s"],
                    goals.get("sweep20_per_job_s", 1.0), "s")]
    text = "; ".join(f"{name} {value:.2f} {unit} (goal ≤ {goal:g}: " + ("**met**" if value <= goal else "**not met**")
                     + ")" for name, value, goal, unit in checks)
    goal = _goal_line("9. Fixed costs of a run", text)
    body = ["## 9. Fixed costs of a run", "", fixed_costs.__doc__.split("\n", 2)[2].strip(), "",
            *fixed_costs.report(res), ""]
    return goal, "\n".join(body)


def _item12(res):
    from . import crossover, crossover_report

    title = "12. The crossover map: time to ε measured end to end on emulated hosts"
    if res.get("skipped"):
        return _goal_line(title, f"skipped ({res['skipped']})"), f"## {title}\n\nSkipped in this run: {res['skipped']}.\n"
    cells = res.get("cells", [])
    if cells:
        wins = {}
        for c in cells:
            wins[c["winner"] or "none within the cap"] = wins.get(c["winner"] or "none within the cap", 0) + 1
        text = (f"measured (no goal on who wins): {len(cells)} cells; fastest to ε: "
                + ", ".join(f"{k} in {v}" for k, v in sorted(wins.items(), key=lambda kv: -kv[1]))
                + "; ISEGA τ = 1/n ÷ GD: " + ", ".join(f"{c['d_label']} {c['link']} H={c['H']} "
                                                        f"{crossover_report.fmt_ratio(c['is_gd'])}" for c in cells))
    else:
        text = "not run: " + "; ".join(res.get("notes", [])) if res.get("notes") else "no cells"
    body = [f"## {title}", "", crossover.__doc__.split("\n", 2)[2].strip(), "", *crossover_report.report(res), ""]
    check = res.get("time_check")
    if check:
        verdicts = crossover_report.time_verdicts(check)
        text += "; time check at H = 16, d = 10⁶: " + "; ".join(verdicts)
        body += ["### The time check: H = 16 hosts, d = 10⁶", "", crossover_report.TIME_CHECK_TEXT, "",
                 *("- " + v for v in verdicts), "", *crossover_report.report(check), ""]
    return _goal_line(title, text), "\n".join(body)
