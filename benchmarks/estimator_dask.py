"""Item 14, the estimator on a Dask Array beside dask-ml: ``python -m benchmarks.estimator_dask [--out
docs/benchmarks.md] [--quick]``.

On one ``cluster=emulated`` cluster (:mod:`pipeline.cluster.emulated`: H = 4 Dask worker processes, 1 thread each,
each in its own network namespace behind a veth pair shaped by a tc tbf of 100 Mbit in each direction; the scheduler
and the client in the root namespace), a9a (N = 32,561, d = 123, λ = 1e-3, no intercept) is one Dask Array of one
chunk of rows per host, placed on that host and persisted before any fit (:func:`placed`: pydata ``sparse.COO``
chunks, y in {0, 1}, X's and y's chunk k on host k). The same two Dask Arrays are fitted, links shaped, by

- ``isparse.LogisticRegression(algorithm="isega", step_rule="paper", fit_intercept=False, client=client)``: one
  logical worker per partition (n = H), τ = 1/n, the paper's stepsize (as item 12's ISEGA); ``tol`` on
  ‖x − x*‖²/r₀ set to :data:`TOL` so that the fit stops soon after ε;
- the same with ``algorithm="gd"`` (the theorem's 1/L);
- ``dask_ml.linear_model.LogisticRegression(solver="lbfgs", C=1/(λN), fit_intercept=False)`` (item 12's
  :func:`benchmarks.crossover.run_lbfgs`: the same objective; dask-glm's L-BFGS, stopped at the first evaluation
  at ε).

Measured, per fit, in the same run:

- **time to ε** (F − F* ≤ ε (F(x⁰) − F*), ε = 1e-6): for isparse ``time_to_eps_s`` of ``history_``
  (:func:`isparse.engines.to_eps.to_eps`: the rounds' wall time up to the first logged iterate at ε, records every
  10 iterations, their objective evaluation excluded); for dask-ml the wall time from the start of ``fit`` to the end
  of its first evaluation at ε. The **fit's wall time** is also given: for isparse it includes the set-up (the
  partitions made shards on their hosts, the constants, and x* solved to machine precision on the hosts by
  Newton-CG, which the records and ``tol`` need) and the rounds after ε up to ``tol``; dask-ml's ends at ε;
- **link bytes**: what crossed the hosts' links during the fit (IP level, Dask's messages and heartbeats included),
  from the interface counters inside each host's namespace (psutil ``net_io_counters``), summed over the hosts, up
  (host → root) and down; for isparse the whole fit (set-up and rounds after ε included), and separately the values
  its records count up to ε;
- **peak memory per worker**: each Dask worker process's peak resident set (``VmHWM`` of ``/proc/self/status``)
  during the fit, its high-water mark reset to the current RSS (``echo 5 > /proc/self/clear_refs``) just before
  the fit: the largest over the hosts, and the largest increase over the worker's RSS at the fit's start (X's
  chunks, persisted before, are in both);
- **bytes of X moved between workers**: from the Dask workers' ``transfer_outgoing_log`` (emptied before the fit),
  the bytes of the keys of X's own chunks and of every key sent from one worker to another.

Before the clock: one dask-ml evaluation (pydata sparse compiles its numba kernels in each worker on first use) and
one isparse fit of 5 iterations (the workers import the library) on the unshaped links.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

from .common import load_average
from .crossover import dataset, link_bytes, row_cuts, run_lbfgs, setups
from .crossover_grid import EPS, LBFGS, LINKS

H = 4
LINK = "100mbit"
#: isparse's stopping rule, ||x - x*||^2 <= TOL r0: on a9a at lambda = 1e-3 the relative suboptimality reaches 1e-6
#: near ||x - x*||^2 / r0 = 4e-5, so the fits stop a few hundred rounds after eps
TOL = 1e-5
CAP = 180.0
SUBNET = "10.81.0.0/16"
TITLE = "14. The estimator on a Dask Array beside dask-ml"
METHODS = (("isparse ISEGA τ=1/n", "isega", {"step_rule": "paper"}), ("isparse GD", "gd", {}))


# -- on the workers ----------------------------------------------------------------------------------------------------
def _status(field: str) -> int:
    """A ``kB`` field of this process's /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS; returns that RSS."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


def _peak() -> int:
    return _status("VmHWM")


def _transfers(dask_worker, clear: bool = False) -> list:
    """This worker's outgoing transfers as (peer, {key: bytes}); emptied with ``clear``."""
    out = [(e["who"], dict(e["keys"])) for e in dask_worker.transfer_outgoing_log]
    if clear:
        dask_worker.transfer_outgoing_log.clear()
        dask_worker.transfer_incoming_log.clear()
    return out


def _warm_sparse() -> None:
    """pydata sparse's COO -> CSR, compiled (numba) in this process before the clock."""
    import sparse

    sparse.COO.from_numpy(np.eye(3)).tocsr()


def placed(client, data):
    """X (pydata ``sparse.COO`` chunks) and y ({0, 1}) as Dask Arrays of one contiguous chunk of rows per worker,
    persisted, chunk k of both on worker k; returns (X, y, the scattered futures).

    Item 12's :func:`benchmarks.crossover.chunked` scatters X's and y's chunks separately, and persisting its
    ``from_delayed`` arrays left y's small chunks where the scheduler chose (seen: on another host than X's, so
    every fit moved them). Here each host's (X, y) chunk pair is scattered as one object and both arrays take their
    chunk from it: the tasks that do depend on X's bytes and run where they are (checked)."""
    from operator import getitem

    import dask.array as da
    import sparse
    from dask import delayed
    from distributed import futures_of, wait

    cuts = row_cuts(client, data)
    workers = [w for w, _, _ in cuts]
    xs, ys, futures = [], [], []
    meta = sparse.COO.from_numpy(np.zeros((0, 0)))
    for w, lo, hi in cuts:
        pair = (sparse.COO.from_scipy_sparse(data.A[lo:hi]), (data.b[lo:hi] > 0).astype(float))
        [f] = client.scatter([pair], workers=[w], direct=True, hash=False)
        futures.append(f)
        xs.append(da.from_delayed(delayed(getitem)(f, 0), shape=(hi - lo, data.d), dtype=float, meta=meta))
        ys.append(da.from_delayed(delayed(getitem)(f, 1), shape=(hi - lo,), dtype=float, meta=np.zeros(0)))
    X, y = client.persist([da.concatenate(xs), da.concatenate(ys)])
    wait([X, y])
    where = client.who_has(futures_of(X) + futures_of(y))
    hx = [tuple(where[k[0]]) for k in X.__dask_keys__()]
    hy = [tuple(where[k]) for k in y.__dask_keys__()]
    assert hx == hy and sorted(h for (h,) in hx) == workers, f"chunks not one pair per host: X on {hx}, y on {hy}"
    return X, y, futures


# -- around a fit ------------------------------------------------------------------------------------------------------
class Window:
    """The workers' peak RSS and transfer logs over a fit: :meth:`start` resets them, :meth:`stop` reads them."""

    def __init__(self, client, x_name):
        self.client, self.x_name = client, x_name
        #: the key names counted as X's bytes (one name, or several: item 15's X and the blocks it is made of)
        self.x_names = {x_name} if isinstance(x_name, str) else set(x_name)

    def start(self):
        self.client.run(_transfers, clear=True)
        self.rss0 = self.client.run(_reset_peak)

    def stop(self) -> dict:
        peaks = self.client.run(_peak)
        logs = self.client.run(_transfers)
        workers = set(logs)
        x_bytes = moved = x_client = 0
        kinds: dict = {}
        for outgoing in logs.values():
            for who, keys in outgoing:
                if who not in workers:      # to the client
                    x_client += sum(b for k, b in keys.items()
                                    if (k[0] if isinstance(k, tuple) else str(k)) in self.x_names)
                    continue
                for k, b in keys.items():
                    name = k[0] if isinstance(k, tuple) else str(k)
                    moved += b
                    x_bytes += b if name in self.x_names else 0
                    kind = re.sub(r"-[0-9a-f]{8,}.*$", "", name)
                    kinds[kind] = kinds.get(kind, 0) + b
        return {"peak_rss": max(peaks.values()), "peak_increase": max(peaks[w] - self.rss0[w] for w in peaks),
                "rss_start": max(self.rss0.values()), "x_moved": x_bytes, "moved": moved, "x_to_client": x_client,
                "peaks": peaks, "rss0": self.rss0,
                "moved_kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:4])}


def run_isparse(client, cluster, X, y, lam, algorithm, keys, tol, link, window) -> dict:
    """One ``isparse.LogisticRegression`` fit of the Dask Arrays (X, y), the links shaped as ``link``."""
    import isparse
    from isparse.engines.to_eps import to_eps

    est = isparse.LogisticRegression(lam=lam, algorithm=algorithm, fit_intercept=False, tol=tol, max_iter=10**6,
                                     random_state=0, client=client, **keys)
    cluster.shape(up=link[0], down=link[1])
    try:
        window.start()
        up0, down0 = link_bytes(client)
        t0 = time.perf_counter()
        est.fit(X, y)
        total = time.perf_counter() - t0
        up1, down1 = link_bytes(client)
        out = window.stop()
    finally:
        cluster.shape(up=None, down=None)
    recs = est.history_.reset_index().to_dict("records")
    hit = to_eps(recs, EPS)
    last = recs[-1]
    out.update(reached=hit is not None, wall_s=total, iterations=int(est.n_iter_), link_up=up1 - up0,
               link_down=down1 - down0, rounds_s=float(last["wall_s"]),
               final_rel=float(last["subopt"] / recs[0]["subopt"]), coef=est.coef_.ravel())
    if hit is not None:
        out.update(time=hit.time_s, rounds=hit.rounds, up=float(hit.uplink_bytes), down=float(hit.downlink_bytes))
    return out


def objective(data, lam, x) -> float:
    """F(x) of the in-memory data (labels ±1)."""
    z = data.b * (data.A @ x)
    return float(np.mean(np.logaddexp(0.0, -z)) + lam / 2 * x @ x)


def measure(quick: bool = False) -> dict:
    from distributed import Client

    from pipeline.cluster.emulated import EmulatedCluster
    from pipeline.cluster.machine import available

    hosts, name, cap = (2, "a1a", 60.0) if quick else (H, "a9a", CAP)
    link = LINKS[LINK]
    res = {"H": hosts, "data": name, "link": LINK, "eps": EPS, "tol": TOL, "cap": cap, "runs": {}, "notes": [],
           "load_before": load_average(), "date": time.strftime("%Y-%m-%d", time.gmtime())}
    reason = available()
    if reason:
        res["notes"].append(f"not run: cluster=emulated needs root, ip and tc ({reason})")
        return res
    data, lam = dataset(name)
    F_star = next(iter(setups(data, lam, hosts, methods=("GD",)).values())).reference.F_star
    res.update(N=data.N, d=data.d, lam=lam, F_star=F_star)
    started = time.perf_counter()
    with EmulatedCluster(hosts, up=None, down=None, subnet=SUBNET, timeout=120.0) as cluster:
        client = Client(cluster.address, direct_to_workers=True, timeout=120)
        try:
            cluster.wait_for_workers(client)
            X, y, scattered = placed(client, data)
            window = Window(client, X.name)
            client.run(_warm_sparse)
            import isparse

            isparse.LogisticRegression(lam=lam, algorithm="gd", fit_intercept=False, tol=0, max_iter=5,
                                       random_state=0, client=client).fit(X, y)
            r = run_lbfgs(client, cluster, data, lam, F_star, link, cap, Xy=(X, y), at_start=window.start)
            r.update(window.stop())
            res["runs"][LBFGS] = r
            print(f"[item14] {LBFGS}: {_short(r)}", flush=True)
            for label, algorithm, keys in METHODS:
                r = run_isparse(client, cluster, X, y, lam, algorithm, keys, TOL, link, window)
                x = r.pop("coef")
                r["final_rel_inprocess"] = (objective(data, lam, x) - F_star) / (np.log(2.0) - F_star)
                res["runs"][label] = r
                print(f"[item14] {label}: {_short(r)}", flush=True)
            client.cancel(scattered)
        finally:
            client.close()
    res["elapsed_s"] = time.perf_counter() - started
    res["load_after"] = load_average()
    return res


def _short(r) -> str:
    t = f"{r['time']:.2f} s to eps, {r['rounds']} rounds" if r.get("reached") else "not at eps"
    return (f"{t}; fit {r['wall_s']:.1f} s; link {r['link_up'] / 1e6:.2f} MB up, {r['link_down'] / 1e6:.2f} MB down; "
            f"peak RSS {r['peak_rss'] / 2**20:.0f} MiB (+{r['peak_increase'] / 2**20:.0f}); X moved {r['x_moved']} B, "
            f"all moved {r['moved']} B {r['moved_kinds']}")


# -- the report ----------------------------------------------------------------------------------------------------------
def _mb(b) -> str:
    return f"{b / 1e6:.3g}"


def _ratio(a, b) -> str:
    return f"{a / b:.2f}×" if b else "–"


def report(res: dict, commit: str = "") -> tuple[str, list[str]]:
    """(the goal line, the section's lines) of ``res``."""
    runs = res["runs"]
    head = f"## {TITLE}"
    if not runs:
        why = "; ".join(res["notes"]) or "nothing ran"
        return f"- **{TITLE}** (`python -m benchmarks.estimator_dask`): {why}.", [head, "", why + "."]
    base = runs[LBFGS]
    ours = [k for k in runs if k != LBFGS]

    def time_of(r):
        return f"{r['time']:.2f}" if r.get("reached") else f"> {r.get('wall_s', res['cap']):.0f}"

    rows = []
    for label, r in runs.items():
        is_base = label == LBFGS
        t_ratio = "1" if is_base else (_ratio(r["time"], base["time"]) if r.get("reached") and base.get("reached")
                                       else "–")
        link = r["link_up"] + r["link_down"]
        base_link = base["link_up"] + base["link_down"]
        rounds = f"{r['rounds']:,}" if r.get("reached") else "–"
        msg = "–" if is_base or not r.get("reached") else f"{_mb(r['up'])} / {_mb(r['down'])}"
        rows.append(f"| {label} | {time_of(r)} | {t_ratio} | {rounds} | {r['wall_s']:.1f} | {_mb(r['link_up'])} / "
                    f"{_mb(r['link_down'])} | {'1' if is_base else _ratio(link, base_link)} | {msg} | "
                    f"{r['peak_rss'] / 2**20:.0f} | {r['peak_increase'] / 2**20:.1f} | "
                    f"{'1' if is_base else _ratio(r['peak_increase'], base['peak_increase'])} | "
                    f"{_mb(r['x_moved'])} | {_mb(r['moved'])} |")
    table = ["| method | time to ε (s) | ÷ dask-ml's | rounds (evaluations) to ε | fit wall time (s) | link MB up / "
             "down (fit) | ÷ dask-ml's | message MB up / down to ε (records) | peak RSS a worker (MiB) | peak increase "
             "a worker (MiB) | ÷ dask-ml's | X MB moved between workers | all MB moved between workers |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows
    zero = all(runs[k]["x_moved"] == 0 for k in ours)
    kinds = ", ".join(f"`{k}` {_mb(v)} MB" for k, v in base["moved_kinds"].items()) or "none"
    ours_moved = "; ".join(f"{k}: {_mb(runs[k]['moved'])} MB ({', '.join(f'`{n}`' for n in runs[k]['moved_kinds']) or 'none'})"
                           for k in ours)
    t_text = ", ".join(f"{k} {time_of(runs[k])} s ({_ratio(runs[k]['time'], base['time']) if runs[k].get('reached') and base.get('reached') else '–'})"
                       for k in ours)
    b_text = ", ".join(f"{k} {_ratio(runs[k]['link_up'] + runs[k]['link_down'], base['link_up'] + base['link_down'])}"
                       for k in ours)
    m_text = ", ".join(f"{k} {runs[k]['peak_increase'] / 2**20:.1f} MiB" for k in ours)
    goal = (f"- **{TITLE}** (`python -m benchmarks.estimator_dask`): measured (no goal): {res['data']} on "
            f"{res['H']} emulated hosts at {res['link']}, time to ε = {res['eps']:g}: dask-ml L-BFGS "
            f"{time_of(base)} s, {t_text}; link bytes of the whole fit ÷ dask-ml's: {b_text}; peak RSS increase a "
            f"worker: dask-ml {base['peak_increase'] / 2**20:.1f} MiB, {m_text}; X bytes moved between workers "
            f"during isparse's fits: {'0' if zero else 'NOT 0'} (dask-ml's: {_mb(base['x_moved'])} MB of X's own "
            f"chunks, {_mb(base['moved'])} MB in all).")
    r0 = runs[ours[0]]
    rss_start = ", ".join(f"{r['rss_start'] / 2**20:.0f}" for r in runs.values())
    lines = [
        head, "",
        f"`python -m benchmarks.estimator_dask` (its own command, kept by `python -m benchmarks` when it rewrites this "
        f"file; one run on {res['date']}{' at ' + commit if commit else ''}, this 2-core machine, {res['elapsed_s'] / 60:.1f} min; "
        f"load average {res['load_before']} before, {res['load_after']} after).",
        "",
        f"One `cluster=emulated` cluster of H = {res['H']} hosts (Dask worker processes of 1 thread, each in its own "
        f"network namespace behind a veth pair shaped to {res['link']} in each direction by a tc tbf; scheduler and "
        f"client in the root namespace). {res['data']} (N = {res['N']:,}, d = {res['d']}, λ = {res['lam']:g}, no "
        f"intercept) is one pair of Dask Arrays, X of pydata `sparse.COO` chunks and y in {{0, 1}}, one chunk of rows "
        f"per host, X's and y's on the same host (checked), persisted before the fits; every method "
        "below fits these same two arrays on the same cluster, the links shaped for the fit:",
        "",
        "- **isparse ISEGA τ=1/n**: `isparse.LogisticRegression(lam, algorithm=\"isega\", step_rule=\"paper\", "
        f"fit_intercept=False, tol={res['tol']:g}, client=client).fit(X, y)`: each holding worker a host of one "
        "logical worker (n = H), τ = 1/n, the paper's stepsize (item 12's ISEGA); `tol` is on ‖x − x*‖²/r₀, set so "
        "that the fit stops a little after ε;",
        "- **isparse GD**: the same with `algorithm=\"gd\"` (the theorem's γ = 1/L);",
        f"- **{LBFGS}**: `dask_ml.linear_model.LogisticRegression(solver=\"lbfgs\", C=1/(λN), fit_intercept=False, "
        "solver_kwargs={\"normalize\": False})`, the same objective ×N (item 12's `run_lbfgs`), stopped at its first "
        "evaluation at ε.",
        "",
        *table,
        "",
        f"- **time to ε** (F − F* ≤ {res['eps']:g} (F(x⁰) − F*)): isparse's is `time_to_eps_s` of `history_` (the rounds' "
        "wall time up to the first logged iterate at ε, one record every 10 iterations, the records' objective "
        "evaluation on the hosts excluded); dask-ml's the wall time from the start of `fit` to the end of its first "
        "evaluation at ε. The **fit wall time** is the whole `fit` call: isparse's includes its set-up (the "
        "partitions made shards where they are, the constants, x* solved to machine precision on the hosts by "
        "Newton-CG for the records and `tol`), the records' evaluations and the rounds after ε up to `tol` "
        f"({r0['iterations']:,} iterations in all for {ours[0]}); dask-ml's ends at ε.",
        "- **link MB**: what crossed the hosts' links during the whole fit (IP level, Dask's own messages and "
        "heartbeats included), from the interface counters in each host's namespace (psutil `net_io_counters`), "
        "summed over the hosts; isparse's include the set-up and the rounds after ε. *Message MB to ε* are the "
        "values isparse's records count up to ε (what the method itself sends).",
        "- **peak RSS**: the largest over the hosts of the worker process's peak resident set during the fit "
        "(`VmHWM`, reset to the current RSS by `echo 5 > /proc/self/clear_refs` in each worker just before the "
        "fit); its *increase* is over that worker's RSS at the fit's start, X's persisted chunks being in both. "
        f"Workers' RSS at the start of the fits: {rss_start} MiB "
        "(largest over the hosts; the fits run one after another in the same processes: dask-ml first).",
        f"- **moved between workers**: from the Dask workers' `transfer_outgoing_log` (emptied before each fit), the "
        f"bytes of X's own chunks (the keys of X's name) and of every key one worker sent another. isparse: "
        f"X {'0 bytes in every fit' if zero else 'NOT 0'} (asserted); {ours_moved}. dask-ml: X's own chunks "
        f"{_mb(base['x_moved'])} MB; in all {_mb(base['moved'])} MB, mostly {kinds}: dask-glm's gradient `X.T.dot(p - y)` "
        "concatenates the hosts' transposed chunks of X on one host at every evaluation (item 12's note), so what "
        "moves is X, under the keys of its transpose.",
        f"- Final relative suboptimality, from the same in-memory F*: dask-ml {base['final_rel']:.2g} (its last "
        "evaluation); "
        + ", ".join(f"{k} {runs[k]['final_rel_inprocess']:.2g} (coef_ in memory)" for k in ours) + ".",
        "- Before the clock, on the unshaped links: one dask-ml evaluation (pydata sparse compiles its numba kernels in "
        "each worker on first use) and one isparse fit of 5 iterations (the workers import the library).",
        "- dask-ml cannot fit a Dask Array of scipy.sparse CSR chunks: dask's tensordot for scipy.sparse chunks "
        "asserts that both operands are 2-D, and dask-glm dots X with the 1-D β (`AssertionError` in "
        "`dask/array/backends.py`, `_tensordot_scipy_sparse`); isparse takes either and makes each partition CSR on "
        "its worker, so the common input is COO.",
    ]
    return goal, lines


def publish(res: dict, report, out: str | None, title: str = TITLE, after: str = "13") -> None:
    """Print the item's goal line and section (``report(res, commit)``, commit: the checkout's HEAD) and, with
    ``out``, put them into that doc (:func:`write_doc` with ``title`` and ``after``)."""
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    goal, section = report(res, commit)
    print("\n".join([goal, ""] + section))
    if out:
        write_doc(out, goal, section, title=title, after=after)
        print(f"[item{title.split('.')[0]}] wrote {out}", flush=True)


def write_doc(path: str, goal: str, section: list[str], title: str = TITLE, after: str = "13") -> None:
    """Put ``goal`` and ``section`` into the doc at ``path``: in place of an earlier item's of ``title``'s number,
    else after item ``after``'s goal line and section (where ``python -m benchmarks`` keeps the standalone items when
    it rewrites the doc)."""
    text = Path(path).read_text().splitlines()
    prefix_goal, prefix_head = f"- **{title.split()[0]} ", f"## {title.split()[0]} "
    text = [line for line in text if not line.startswith(prefix_goal)]
    if any(line.startswith(prefix_head) for line in text):   # drop the old section, up to the next one
        start = next(i for i, line in enumerate(text) if line.startswith(prefix_head))
        end = next((i for i in range(start + 1, len(text)) if text[i].startswith("## ")), len(text))
        text = text[:start] + text[end:]
    g = max(i for i, line in enumerate(text) if line.startswith(f"- **{after}. "))
    text.insert(g + 1, goal)
    h = next(i for i, line in enumerate(text) if line.startswith(f"## {after}. "))
    end = next((i for i in range(h + 1, len(text)) if text[i].startswith("## ")), len(text))
    text[end:end] = section + [""]
    Path(path).write_text("\n".join(text) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.estimator_dask", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a1a on 2 hosts (development)")
    p.add_argument("--out", help="write the section and goal line into this doc (docs/benchmarks.md)")
    a = p.parse_args(argv)
    res = measure(quick=a.quick)
    publish(res, report, a.out)
    for label, r in res["runs"].items():
        if label != LBFGS:
            assert r["x_moved"] == 0, f"{label}: {r['x_moved']} bytes of X moved between workers during fit"
    return 0


if __name__ == "__main__":
    sys.exit(main())
