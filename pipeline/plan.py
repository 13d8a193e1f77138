"""``isparse-plan``: which tau (block size, codec) reaches eps soonest on this cluster, from the theory and a few rounds.

    isparse-plan data=a1a workers.n=10 cluster=local
    isparse-plan data=a1a workers.n=10 'plan.taus=[1/m,1/n,2.5/n,1]' plan.block_sizes=[1,4] --json
    isparse-plan data=a1a workers.n=10 'plan.codecs=[float64,natural,dither:7]'

It takes isparse-run's overrides (conf/plan.yaml is isparse-run's schema plus ``plan.*``: ``pipeline.schema.PlanConfig``)
and checks them as isparse-run does (an unknown key or a bad value is one line on stderr, exit status 2, before any
work). Then:

1. builds the configured run (data, problem, x*, method) as isparse-run does, and for every tau of ``plan.taus`` and
   every block size of ``plan.block_sizes`` and every value codec of ``plan.codecs`` (``messages.codec`` names,
   ``<name>:<x>`` for a codec's one numeric option, e.g. ``dither:<s>`` for s levels (``isparse.compression.choices``);
   null: the run's own codec) the run's theorem's iteration count to ``tol x r_0``
   (``bound.iterations_to``: what isparse-run logs as ``predicted_iterations``, with the bound's omega);
2. measures the round cost on the configured engine (engine=dask: the LocalCluster it starts or the scheduler at
   cluster.address; engine=inprocess: this process): short real runs (``plan.rounds`` rounds after a warm-up of
   ``tracking.log_every``; ``plan.repeats`` of them, interleaved, the median kept) at up to three tau < 1 of the
   grid (its smallest, the one nearest 1/n, its largest, at ``blocks.size``) and at tau = 1, and fits seconds per
   round = latency + bytes / bandwidth for tau < 1, tau = 1 as measured (``isparse.planning.fit_round_cost``), with
   the run's codec; each other codec of the grid gets one probe at the tau nearest 1/n, and what it measured
   beyond the line at its bytes (its encoding and decoding, ``codec_offset_s``) is added to its rows;
3. prints each row's predicted iterations, seconds per round, time and uplink bytes to eps, the rows the theory
   gives no count for (with the reason), and the recommendation: the row with the least predicted time.

With ``plan.link.up`` and ``plan.link.down`` (tc rates, e.g. ``plan.link.up=10mbit plan.link.down=100mbit``) the rows'
rounds are not the fitted line of this cluster but the link model's (:func:`isparse.planning.predict_time`): latency
(the probes' floor, or ``plan.link.latency``) + the slowest host's uplink bytes / its up rate + x (d x 8 B) / the
down rate (each message less ``plan.link.burst``, a token bucket's depth) + the probes' worker compute scaled to
ceil(n / H) workers per host, and at least each direction's bytes at its rate; times the bound's iterations scaled
by one in-process run of the configured tau (``plan.link.calibrate``), plus the start a run pays once (the probes'
warm-up beyond steady rounds); H is ``cluster.n_workers`` or the cluster's worker count. Each row then carries the terms under ``link``, and the JSON a top-level ``link`` (:class:`_LinkModel`).

``plan.json=true`` (or ``--json``, the same) prints one JSON object instead: ``rows`` (a list of objects with keys
tau, blocks_size, predicted_iterations, predicted_round_s, predicted_time_s, predicted_uplink_bytes, ...),
``recommended`` (one of them), ``skipped``, ``round_cost`` (the fit and its probes) and ``notes``. It is also written
to ``plan.json`` in the job's directory (``hydra.run.dir``: outputs/plan/<date>/<time>).

The model and the theory are in :mod:`isparse.planning`; this module is the glue (config, cluster, output).
"""

from __future__ import annotations

from . import main as _main   # first: a LocalCluster's spawned worker re-imports this script; pipeline.main ignores SIGINT there

import contextlib
import dataclasses
import json
import logging
import math
import os
import sys
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from isparse import build
from isparse.engines import InProcessPool
from isparse.errors import ConfigError
from isparse.planning import (CodecChoice, Probe, SkippedRow, bound_iterations, codec_label, codec_offset,
                          down_message_bytes, fit_round_cost, plan_row, predict_time, recommend, round_trip_for,
                          start_excess_s, within_error, resolve_block_sizes, resolve_codecs, resolve_tau_grid, workers_per_host)
from isparse.spec import BlocksSpec, MessagesSpec

from .errors import console, exits_on_error, print_error
from .schema import PlanConfig, load_job

log = logging.getLogger("isparse")
PROG = "isparse-plan"

NOTE_RATIO = ("predicted_iterations are the theorem's counts to tol x r_0 (what isparse-run logs as "
              "predicted_iterations): 2-3x conservative in absolute terms, but their dependence on tau is accurate "
              "(tau_sweep: measured and predicted log-log slopes agree to +-0.01). The recommendation, the argmin of "
              "predicted_time_s, depends only on their ratios between rows; the absolute times and bytes are upper "
              "estimates by the same factor.")


class _Builder:
    """Builds the run of ``job`` at any (tau, block size) as isparse-run's job does (``isparse.build`` of the job's
    spec with tau and blocks.size replaced), reading the data and solving for x* once (the reference does not depend
    on tau or the block size)."""

    def __init__(self, job):
        self.job, self.reference = job, None
        self.data = job.data.dataset(job.cache_dir)
        self.d = int(self.data.d) if self.data is not None else int(job.data.d)

    def __call__(self, tau, block_size, codec=None):
        messages = self.job.messages if codec is None else MessagesSpec.from_dict(
            {"send_ids": self.job.messages.send_ids, "aggregate": self.job.messages.aggregate,
             "module": self.job.messages.module, "downlink": self.job.messages.downlink, **codec.keys()}, "messages")
        spec = dataclasses.replace(self.job, tau=tau, blocks=BlocksSpec(size=int(block_size)), messages=messages)
        setup = build(spec, data=self.data, reference=self.reference, cache_dir=self.job.cache_dir)
        self.reference = setup.reference
        return setup


@contextlib.contextmanager
def _pools(job):
    """A factory of pools on the configured engine, ``make(setup)``; on Dask one client for all, every pool closed at
    the end (not between probes: see the note on ``hash=False`` in ``DaskPool._make_host``)."""
    if job.engine == "inprocess":
        yield (lambda setup: InProcessPool(*setup.pool_args())), "inprocess (this process)", 1
        return
    from isparse.engines.dask import DaskPool

    from .cluster import dask_client

    with dask_client(job.cluster) as client:
        workers = len(client.scheduler_info().get("workers", {}))
        where = (f"dask, scheduler {client.scheduler.address} ({workers} Dask workers)" if job.cluster.address
                 else f"dask, {job.cluster.kind} cluster started for the plan ({workers} Dask workers)")

        pools = []

        def make(setup):
            source = None
            if job.data.load == "on_worker":
                from isparse.data.on_worker import ShardSource

                source = ShardSource.of(job.data.loader(), setup.rows, setup.shards)
            pools.append(DaskPool(client, *setup.pool_args(), snapshot_every=job.cluster.snapshot_every,
                                  worker_timeout=job.cluster.worker_timeout, measure_every=job.cluster.measure_every,
                                  source=source, aggregate=job.messages.aggregate == "host",
                                  rounds=job.cluster.rounds))
            return pools[-1]
        try:
            yield make, where, max(workers, 1)
        finally:
            for pool in pools:
                pool.close()


def probe(setup, pool, rounds: int, log_every: int) -> Probe:
    """A short real run of ``setup`` on ``pool`` (all of ``log_every + rounds'`` iterations, tol = 0; rounds' =
    ``rounds`` rounded up to a multiple of log_every): the seconds, compute seconds and uplink bytes per round of the
    rounds after the first ``log_every`` (the warm-up), from the loop's records. Run again on the same pool (for a
    repetition) the workers start from the state the last run left: the same work per round."""
    le = int(log_every)
    timed = le * math.ceil(rounds / le)
    recs = {}
    setup.run(pool, max_iter=le + timed, tol=0.0, log_every=le, observer=lambda r: recs.__setitem__(r["step"], r))
    z, a, b = recs[0], recs[le], recs[le + timed]
    round_s = (b["wall_s"] - a["wall_s"]) / timed
    return Probe(tau=float(setup.method.tau), uplink_bytes=(b["uplink_bytes"] - a["uplink_bytes"]) / timed,
                 round_s=round_s,
                 compute_s=(b.get("time_compute_s", 0.0) - a.get("time_compute_s", 0.0)) / timed, rounds=timed,
                 dense=setup.method.tau_m == setup.method.blocks.m,
                 start_s=start_excess_s(z["wall_s"], a["wall_s"], le, round_s))


def _probe_taus(tau_ms: list[int], m: int, n: int) -> list[int]:
    """The tau*m of the grid to probe: of its tau < 1 its smallest, the one nearest ceil(m/n) (tau = 1/n) and its
    largest (the line of the fit), and tau = 1 if the grid has it (its own code path: ``isparse.planning``)."""
    sparse = [k for k in tau_ms if k < m]
    picks = {k for k in tau_ms if k == m}
    if sparse:
        auto = math.ceil(m / n)
        picks |= {sparse[0], min(sparse, key=lambda k: (abs(math.log(k / auto)), k)), sparse[-1]}
    return sorted(picks)


class _LinkModel:
    """``plan.link.*``: the rows' rounds predicted for H hosts behind links of the given rates
    (:func:`isparse.planning.predict_time`) instead of the fitted line of this cluster's rounds.

    The terms it measures here: the round's floor (the line's probes, each round minus its worker compute, fitted
    against the uplink bytes; its intercept; with engine=inprocess plus :func:`isparse.planning.round_trip_for` of
    ``cluster.rounds``, a Dask round trip this process does not make), unless ``plan.link.latency`` gives it; the
    worker compute per logical worker at each probed tau (a probe's compute / the workers its slowest host carried),
    interpolated linearly in tau and times ceil(n / H); a run's start (the probes' warm-up beyond steady rounds);
    and, with ``plan.link.calibrate``, the factor between the bound's iterations and one in-process run of the
    configured tau to tol."""

    def __init__(self, job, n: int):
        opts = job.plan.link
        self.job, self.n, self.opts = job, int(n), opts
        self.aggregate = "host" if job.messages.aggregate == "host" else "worker"
        self.hosts = int(job.cluster.expected_workers())
        self.up_bps = self._rates("plan.link.up", opts.up)
        self.down_bps = self._rates("plan.link.down", opts.down)
        self.latency_s = self.latency_source = None
        self.start_s = 0.0
        self.scale, self.calibration = 1.0, None
        self.taus, self.per_worker = [], []
        self.compute = opts.compute
        if self.compute == "auto":
            self.compute = "shared" if job.engine == "dask" and job.cluster.kind in ("local", "emulated") else "parallel"
        self.cores = os.cpu_count() or 1

    def _rates(self, key, value):
        from .cluster.shaping import rate_bits

        if not isinstance(value, list):
            return rate_bits(key, value)
        if len(value) != self.hosts:
            raise ConfigError(key, f"The '{key}' parameter must be one rate or a list of H = {self.hosts} rates (one "
                                   f"per host, H the cluster's workers); got {len(value)}.")
        return [rate_bits(key, v) for v in value]

    def fit(self, probes, probe_hosts: int, configured, tol: float, measure) -> None:
        """The floor and the compute from the line's ``probes`` (run on ``probe_hosts`` hosts), and the calibration
        run of the ``configured`` setup (``measure(setup)`` -> (rounds, converged) of a run to tol)."""
        if self.job.engine == "dask" and probe_hosts != self.hosts:   # the cluster's own count (cluster=address)
            self.hosts = int(probe_hosts)
            self.up_bps = self._rates("plan.link.up", self.opts.up)
            self.down_bps = self._rates("plan.link.down", self.opts.down)
        k_probe = math.ceil(self.n / max(int(probe_hosts), 1))
        if self.opts.latency is not None:
            self.latency_s, self.latency_source = float(self.opts.latency), "plan.link.latency"
        else:
            floor = fit_round_cost([dataclasses.replace(p, round_s=max(p.round_s - p.compute_s, 1e-9)) for p in probes])
            self.latency_s = max(floor.latency_s, 0.0)
            self.latency_source = "measured: the probes' rounds minus their compute, at zero uplink bytes"
            if self.job.engine == "inprocess":
                rounds = self.job.cluster.rounds
                self.latency_s += round_trip_for(rounds)
                self.latency_source += (f", + {1e3 * round_trip_for(rounds):g} ms (a Dask round trip over "
                                        f"cluster.rounds={rounds}: engine=inprocess)")
        self.start_s = float(np.median([p.start_s for p in probes])) if probes else 0.0
        by_tau = {}
        for p in probes:
            by_tau.setdefault(p.tau, []).append(p.compute_s / k_probe)
        self.taus = sorted(by_tau)
        self.per_worker = [float(np.mean(by_tau[t])) for t in self.taus]
        if self.opts.calibrate:
            self._calibrate(configured, tol, measure)

    def _calibrate(self, setup, tol: float, measure) -> None:
        bound = bound_iterations(setup, tol)
        rounds, converged = measure(setup)
        info = {"tau": float(setup.method.tau), "codec": codec_label(setup.method.codec),
                "bound_iterations": bound if math.isfinite(bound) else None,   # None: the theory gives no count
                "measured_rounds": int(rounds), "converged": bool(converged)}
        if converged and math.isfinite(bound) and bound > 0 and rounds > 0:
            self.scale = rounds / bound
        info["scale"] = self.scale
        self.calibration = info

    def compute_s(self, tau: float, offset_s: float = 0.0) -> float:
        """A round's worker compute at ``tau`` on the H hosts (s): the probes' compute per logical worker,
        interpolated in tau, times the busiest host's ceil(n / H) workers (``parallel``) or, hosts sharing this
        machine's cores (``shared``), times max(ceil(n / H), n / min(H, cores)); plus the codec's ``offset_s``."""
        busiest = max(workers_per_host(self.n, self.hosts))
        if self.compute == "shared":
            busiest = max(busiest, self.n / min(self.hosts, self.cores))
        return float(np.interp(tau, self.taus, self.per_worker)) * busiest + offset_s

    def row(self, row, setup, offset_s: float):
        """``row`` with its round and time from the link model (and the terms in ``row.link``)."""
        compute = self.compute_s(row.tau, offset_s)
        method = setup.method
        t = predict_time(d=int(setup.problem.d), m=int(method.blocks.m), tau_m=int(method.tau_m), n=self.n,
                         hosts=self.hosts, up_bps=self.up_bps, down_bps=self.down_bps,
                         iterations=row.predicted_iterations * (self.scale if row.iterations_source == "bound" else 1.0),
                         latency_s=self.latency_s,
                         compute_s=max(compute, 0.0), aggregate=self.aggregate, send_ids=bool(method.sends_ids),
                         codec=method.codec, up_burst_bytes=float(self.opts.burst),
                         down_burst_bytes=float(self.opts.burst), down_message_bytes=down_message_bytes(method),
                         start_s=self.start_s)
        return dataclasses.replace(row, predicted_round_s=t.round_s, predicted_time_s=t.total_s, link=t.as_dict(),
                                   predicted_uplink_bytes=t.iterations * row.uplink_bytes_per_round)

    def as_dict(self) -> dict:
        return {"up": self.opts.up, "down": self.opts.down, "up_bps": self.up_bps, "down_bps": self.down_bps,
                "hosts": self.hosts, "workers_per_host": max(workers_per_host(self.n, self.hosts)),
                "aggregate": self.aggregate, "burst_bytes": float(self.opts.burst), "latency_s": self.latency_s,
                "start_s": self.start_s,
                "compute": self.compute, "cores": self.cores,
                "latency_source": self.latency_source,
                "compute_per_worker": [{"tau": t, "compute_s": c} for t, c in zip(self.taus, self.per_worker)],
                "calibration": self.calibration}

    def note(self) -> str:
        c = self.calibration
        if c and c["converged"] and c["bound_iterations"] is not None:
            cal = (f"the bound's iterations x {self.scale:.3g} (one in-process run of tau = {c['tau']:.4g} to tol: "
                   f"{c['measured_rounds']} rounds, its bound {c['bound_iterations']:.4g})")
        else:
            cal = "the bound's iterations as is (2-3x conservative)" + (
                "" if not c else ": the calibration run did not reach tol within max_iter" if not c["converged"] else
                ": the configured run's theory gives no count to calibrate with")
        downlink = getattr(self.job.messages, "downlink", None)
        down_text = ("x dense to every host" if downlink in (None, "none", "float64") else
                     f"with messages.downlink={downlink}: its message's bytes instead of d x 8 B")
        cal += ("; a row whose theory gives no count (iterations_source=measured) takes the rounds of one "
                "in-process run of it to tol, unscaled")
        return (f"link model (plan.link.up={self.opts.up}, plan.link.down={self.opts.down}, H = {self.hosts} hosts, "
                f"messages.aggregate={self.aggregate}): predicted_round_s = max(latency_s + up_s + down_s + compute_s, "
                f"rate_s) per row (row['link']): latency_s {self.latency_source}; up_s = the busiest host's uplink bytes "
                f"(less plan.link.burst = {float(self.opts.burst):g} B) x 8 / its rate; down_s = d x 8 B (less the "
                f"burst) x 8 / the down rate (" + down_text + "); compute_s = the probes' "
                f"worker compute per logical worker, interpolated in tau, x "
                + ("ceil(n / H) (plan.link.compute=parallel: each host on its own machine)" if self.compute == "parallel"
                   else f"max(ceil(n / H), n / min(H, {self.cores} cores)) (plan.link.compute=shared: the hosts' "
                        f"processes queue on this machine's cores)")
                + ", plus the codec's offset; "
                f"rate_s = the busiest host's bytes in either direction x 8 / its rate (a shaped link carries no more "
                f"a round, whatever its burst); iterations = {cal}; predicted_time_s = start_s + iterations x "
                f"predicted_round_s, start_s = {self.start_s:.3g} s (the probes' warm-up rounds beyond as many steady "
                f"ones, their median: what a run pays once to start).")


def _calibration_text(cal: dict) -> str:
    """The calibration run in words, and why its factor is 1 where it is not used."""
    run = f"calibration run: {cal['measured_rounds']} rounds at tau = {cal['tau']:.4g}"
    if not cal["converged"]:
        return run + ", not at tol within max_iter: not used"
    if cal["bound_iterations"] is None:
        return run + ", its theory gives no count to scale: not used"
    return run


def plan_job(cfg) -> dict:
    """The plan of the composed config ``cfg`` (see the module docstring); returns the JSON object that is printed."""
    job = load_job(cfg, PlanConfig)
    if job.engine == "dask":   # the cluster's checks that need no cluster, before the data are read
        job.cluster.check_run()
    opts = job.plan
    builder = _Builder(job)
    d, n, tol = builder.d, job.workers.n, job.tol
    sizes = resolve_block_sizes(opts.block_sizes, d, job.blocks.size)   # before the reference solve
    full = job.method_class().traits.full   # GD: its own tau (auto, the default grid) is 1
    grids = {b: (math.ceil(d / b), resolve_tau_grid(opts.taus, math.ceil(d / b), n, full=full)) for b in sizes}
    configured = builder(job.tau, job.blocks.size)   # the configured run: a bad tau or block size fails as isparse-run
    link = _LinkModel(job, n) if opts.link.up is not None else None   # bad rates fail before any probe
    probe_b = job.blocks.size if job.blocks.size in grids else sizes[0]
    m0, grid0 = grids[probe_b]

    own = CodecChoice.of(job.messages)
    codecs = resolve_codecs(opts.codecs, own)
    setups, skipped = {}, []
    for c in codecs:
        for b, (m, tau_ms) in grids.items():
            for k in tau_ms:
                try:
                    setups[c, b, k] = builder(k / m, b, c)
                except ConfigError as exc:   # e.g. a full-communication baseline at tau < 1, DIANA's alpha > tau
                    skipped.append(SkippedRow(tau=k / m, tau_m=k, m=m, blocks_size=b, reason=str(exc),
                                              codec=codec_label(c)))

    # the line is measured with the run's own codec (or the grid's first); every other codec of the grid gets one
    # probe at the tau of the line nearest 1/n, and its offset from the line (its encoding and decoding) is added
    line = own if own in codecs else codecs[0]
    probes, codec_probes = [], {}
    with _pools(job) as (make, where, probe_hosts):
        chosen = [(line, k) for k in _probe_taus(grid0, m0, n) if (line, probe_b, k) in setups]
        sparse = [k for _, k in chosen if k < m0]
        if sparse:
            auto = min(sparse, key=lambda k: (abs(math.log(k / math.ceil(m0 / n))), k))
            chosen += [(c, auto) for c in codecs if c != line and (c, probe_b, auto) in setups]
        pools = {ck: make(setups[ck[0], probe_b, ck[1]]) for ck in chosen}
        runs = {ck: [] for ck in chosen}
        for _ in range(opts.repeats):   # interleaved: a drift of the machine's load hits every probe alike
            for c, k in chosen:
                runs[c, k].append(probe(setups[c, probe_b, k], pools[c, k], opts.rounds, job.tracking.log_every))
        for c, k in chosen:   # the repetition of median seconds per round
            median = sorted(runs[c, k], key=lambda p: p.round_s)[(len(runs[c, k]) - 1) // 2]
            if c == line:
                probes.append(median)
            else:
                codec_probes[c] = median
    if not probes:
        raise ConfigError("plan.taus", f"The 'plan.taus' parameter must hold a tau algorithm={job.algorithm.name} "
                                       f"can run at blocks.size={probe_b}; none of {grid0} (tau x m) can: "
                                       + "; ".join(s.reason for s in skipped[:2]))
    cost = fit_round_cost(probes)
    offsets = {c: codec_offset(cost, p) for c, p in codec_probes.items()}
    measured = {}

    def measure(setup):
        """(rounds, converged) of one in-process run of ``setup`` to tol (max_iter at most), once per configuration."""
        m = setup.method
        key = (codec_label(m.codec), int(m.tau_m), int(m.blocks.m))
        if key not in measured:
            result = setup.run(max_iter=job.max_iter, tol=tol, log_every=job.tracking.log_every)
            measured[key] = (int(result.iterations), bool(result.converged))
        return measured[key]

    if link is not None:
        link.fit(probes, probe_hosts, configured, tol, measure)
    rows = []
    for (c, b, k), setup in setups.items():
        if c != line and c not in offsets:
            skipped.append(SkippedRow(tau=k / grids[b][0], tau_m=k, m=grids[b][0], blocks_size=b,
                                      codec=codec_label(c), reason="the codec's round was not probed (the "
                                      "grid has no tau < 1 at blocks.size to probe it at)"))
            continue
        row = plan_row(setup, tol, cost, b, offsets.get(c, 0.0), measure=measure)
        if link is not None and not isinstance(row, SkippedRow):
            row = link.row(row, setup, offsets.get(c, 0.0))
        (rows if not isinstance(row, SkippedRow) else skipped).append(row)
    order = {codec_label(c): i for i, c in enumerate(codecs)}
    rows.sort(key=lambda r: (order[r.codec], r.blocks_size, r.tau))
    skipped.sort(key=lambda r: (order[r.codec], r.blocks_size, r.tau))
    best = recommend(rows)
    close = within_error(rows, best, cost.residual_rel)
    notes = [NOTE_RATIO if link is None or link.scale == 1.0 else NOTE_RATIO.split(" The recommendation")[0],
             "predicted_round_s = latency_s + uplink bytes per round x seconds_per_byte for tau < 1, fitted to the "
             "probes of tau < 1, and the tau = 1 probe's round for tau = 1 (no block is drawn there) (real "
             "rounds of this engine and cluster: worker steps, messages, master step, the run's monitoring every "
             "tracking.log_every rounds; not MLflow's logging); uplink bytes are values x messages.codec's bits "
             "(8 B for float64; + dither's 4 B norm per message; + ids x 4 B with messages.send_ids), the "
             "expectation over the blocks drawn; with an unbiased codec the iterations are the bound's with its "
             "omega."]
    if link is not None:   # the line's note does not describe the rows' rounds: the link model's does
        notes[1] = ("round_cost is the fit of the probes' rounds on this engine (the floor and the compute of the "
                    "link model come from its probes); the rows' predicted_round_s are the link model's (last note).")
    if codec_probes:
        notes.append(f"the line was measured with messages.codec={codec_label(line)}; each other codec's rounds are "
                     "the line at its bytes plus codec_offset_s, what its one probe (at the tau of the grid nearest "
                     "1/n) measured beyond the line: encoding on the workers, decoding on the master.")
    if cost.note:
        notes.append(cost.note)
    if link is not None:
        notes.append(link.note())
    return {"link": link.as_dict() if link is not None else None,"algorithm": job.algorithm.name, "data": job.data.display_name(), "n": n, "d": d, "tol": tol,
            "downlink": job.messages.downlink,
            "engine": where, "codecs": [codec_label(c) for c in codecs],
            "codec_probes": {codec_label(c): dataclasses.asdict(p) for c, p in codec_probes.items()},
            "rows": [r.as_dict() for r in rows], "skipped": [s.as_dict() for s in skipped],
            "recommended": best.as_dict() if best is not None else None, "model_error_rel": cost.residual_rel,
            "within_error": [r.as_dict() for r in close], "round_cost": cost.as_dict(), "notes": notes}


def _finite(obj):
    """``obj`` with every NaN or infinite float replaced by None (strict JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _fmt_bytes(b: float) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.3g} B"


def render(plan: dict) -> str:
    """The plan as text: the fit, one line per row, the skipped rows with their reasons, the recommendation."""
    c = plan["round_cost"]
    bw = "inf" if c["bandwidth_Bps"] is None else f"{_fmt_bytes(c['bandwidth_Bps'])}/s"
    line = [p for p in c["probes"] if not p["dense"]] or c["probes"]
    lines = [f"{PROG}: {plan['algorithm']} on {plan['data']} (d = {plan['d']}), n = {plan['n']}, "
             f"messages.downlink={plan.get('downlink', 'float64')}, eps = tol x r_0 with tol = {plan['tol']:g}; "
             f"engine: {plan['engine']}",
             f"round cost: {1e3 * c['latency_s']:.3f} ms + uplink bytes / {bw} for tau < 1, fitted to "
             f"{len(line)} probes (residual {100 * c['residual_rel']:.1f} % rms)"
             + ("" if c["dense_round_s"] is None else
                f"; tau = 1 (no draw: its own code path) as measured, {1e3 * c['dense_round_s']:.3f} ms")]
    for p in c["probes"]:
        lines.append(f"  probe tau = {p['tau']:.4g}: {_fmt_bytes(p['uplink_bytes'])} per round, "
                     f"{1e3 * p['round_s']:.3f} ms per round (worker compute {1e3 * p['compute_s']:.3f} ms), "
                     f"{p['rounds']} rounds")
    for c, p in plan.get("codec_probes", {}).items():
        lines.append(f"  probe {c} at tau = {p['tau']:.4g}: {_fmt_bytes(p['uplink_bytes'])} per round, "
                     f"{1e3 * p['round_s']:.3f} ms per round, {p['rounds']} rounds")
    rec = plan["recommended"]
    link = plan.get("link")
    if link is None:
        head = f"{'codec':>10} {'tau':>10} {'tau*m':>7} {'b':>4} {'iterations':>12} {'round (ms)':>11} {'time to eps (s)':>16} {'uplink to eps':>14}"
    else:
        cal = link["calibration"]
        lines.append(f"link: up {link['up']}, down {link['down']} per host, H = {link['hosts']} hosts "
                     f"({link['workers_per_host']} logical workers on the busiest), messages.aggregate="
                     f"{link['aggregate']}; the hosts' compute assumed {link['compute']}"
                     + ("" if link["compute"] == "parallel" else f" on {link['cores']} cores")
                     + f"; latency {1e3 * link['latency_s']:.3f} ms per round ({link['latency_source']})"
                     + ("" if not cal else
                        f"; iterations = the bound's x {cal['scale']:.3g} ({_calibration_text(cal)})")
                     + f"; a run's start {link.get('start_s', 0.0):.3g} s, once")
        head = (f"{'codec':>10} {'tau':>10} {'tau*m':>7} {'b':>4} {'iterations':>11} {'latency':>8} {'up':>8} "
                f"{'down':>8} {'compute':>8} {'round':>8} {'time to eps (s)':>16} {'up B/host':>10}")
        lines.append("(latency, up, down, compute, round: ms per round; iterations: the bound's x the calibration factor (1 without), or a row's measured rounds)")
    lines += ["", head]
    for r in plan["rows"]:
        same = rec and all(r[k] == rec[k] for k in ("tau", "blocks_size", "codec"))
        mark = ("  (iterations measured: " + r["bound_theorem"] + ")" if r.get("iterations_source") == "measured"
                else "") + ("  <- recommended" if same else "")
        if link is None:
            lines.append(f"{r['codec']:>10} {r['tau']:>10.4g} {r['tau_m']:>4}/{r['m']:<3} {r['blocks_size']:>3} "
                         f"{r['predicted_iterations']:>12,.0f} {1e3 * r['predicted_round_s']:>11.3f} "
                         f"{r['predicted_time_s']:>16.3f} {_fmt_bytes(r['predicted_uplink_bytes']):>14}{mark}")
        else:
            t = r["link"]
            lines.append(f"{r['codec']:>10} {r['tau']:>10.4g} {r['tau_m']:>4}/{r['m']:<3} {r['blocks_size']:>3} "
                         f"{t['iterations']:>11,.0f} {1e3 * t['latency_s']:>8.3f} {1e3 * t['up_s']:>8.3f} "
                         f"{1e3 * t['down_s']:>8.3f} {1e3 * t['compute_s']:>8.3f} {1e3 * t['round_s']:>8.3f} "
                         f"{t['total_s']:>16.3f} {_fmt_bytes(t['up_bytes_per_host']):>10}{mark}")
    for s in plan["skipped"]:
        lines.append(f"{s['codec']:>10} {s['tau']:>10.4g} {s['tau_m']:>4}/{s['m']:<3} {s['blocks_size']:>3}   skipped: {s['reason']}")
    lines.append("")
    if rec and link is not None:
        t = rec["link"]
        lines.append(f"recommended for the link: tau = {rec['tau']:.4g} (isparse-run tau={rec['tau_m']}/m), "
                     f"blocks.size = {rec['blocks_size']}, messages.codec={rec['codec']}: {t['iterations']:,.0f} "
                     f"rounds x {1e3 * t['round_s']:.3f} ms = {t['total_s']:.3f} s to eps predicted "
                     f"({_fmt_bytes(t['up_bytes_per_host'])} up and {_fmt_bytes(t['down_bytes_per_host'])} down per "
                     f"host per round; theorem: {rec['bound_theorem']})")
    elif rec:
        lines.append(f"recommended: tau = {rec['tau']:.4g} (tau*m = {rec['tau_m']} of m = {rec['m']}: "
                     f"isparse-run tau={rec['tau_m']}/m), "
                     f"blocks.size = {rec['blocks_size']}, messages.codec={rec['codec']}: {rec['predicted_iterations']:,.0f} iterations "
                     f"({'theory' if rec.get('iterations_source', 'bound') == 'bound' else 'measured'}), "
                     f"{rec['predicted_time_s']:.3f} s and {_fmt_bytes(rec['predicted_uplink_bytes'])} uplink to eps "
                     f"predicted (theorem: {rec['bound_theorem']}, bound_source={rec['bound_source']})")
    else:
        lines.append("recommended: none (no row of the grid has an iteration count from the theory)")
    close = plan.get("within_error") or []
    if rec and close:
        err = 100 * plan["model_error_rel"]
        lines.append(f"cannot tell apart: the model's error is {err:.0f} % rms, and within it of the recommended "
                     f"{rec['predicted_time_s']:.3g} s are " + "; ".join(
                         f"tau = {r['tau']:.4g} (tau={r['tau_m']}/m), blocks.size = {r['blocks_size']}, "
                         f"messages.codec={r['codec']}: {r['predicted_time_s']:.3g} s" for r in close)
                     + ": measure them (isparse-run -m with these settings) to choose")
    lines += [f"note: {n}" for n in plan["notes"]]
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path=_main.CONF_DIR, config_name="plan")
def _app(cfg: DictConfig):
    np.seterr(over="ignore")
    with exits_on_error(PROG):
        plan = plan_job(cfg)
    out = json.dumps(_finite(plan), indent=1, allow_nan=False)
    with contextlib.suppress(Exception):
        (Path(HydraConfig.get().runtime.output_dir) / "plan.json").write_text(out)
    print(out if cfg.plan.json else render(plan), flush=True)
    return plan


def main() -> None:
    """The console script ``isparse-plan``: isparse-run's overrides plus ``plan.*``; ``--json`` = ``plan.json=true``."""
    from hydra._internal.utils import get_args_parser

    if "--json" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--json"] + ["plan.json=true"]
    args, _ = get_args_parser().parse_known_args()
    if args.multirun:
        print_error(PROG, "isparse-plan plans one configuration (its grids are plan.taus and plan.block_sizes): run "
                          "it without -m/--multirun.")
        sys.exit(2)
    console(PROG, _app)


if __name__ == "__main__":
    main()
