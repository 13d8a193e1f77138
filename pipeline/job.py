"""One ``isparse-run`` job: the composed config checked into a :class:`~pipeline.schema.JobConfig`, the run built by
``isparse.build`` (data, problem, x*, method, stepsize, bound), run on the configured engine and logged to MLflow.

Order, so that bad input fails before any work and nothing logged is lost: the config's checks (no data, no
store), the tracking store reachable, the data read and the run built, the cluster started (an unreachable
scheduler fails before any MLflow run), then the MLflow run, the iterations and what they produced. The run always
ends FINISHED, FAILED (with the reason in the tag ``error``; the exception is re-raised) or KILLED, and the
cluster the job started is closed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from pathlib import Path

import numpy as np

from isparse.runsetup import build
from isparse.engines import DivergenceError, InProcessPool
from isparse.engines.to_eps import criterion_text, to_eps

from .errors import stage, user_message
from .lifecycle import (MetricsLog, check_resumed_data, checkpoint_saver, end_line, load_resume, logged_until,
                        lost_cluster, run_name, start_run, stop_on_signals, warn_if_predicted_beyond)
from .schema import JobConfig, load_job
from .jobenv import FAILURE_TAG, PARENT_ENV, draws_figure, job_env
from ._typed import job_overrides
from .tracking import BOUND, SUMMARY, check_reachable, client_for, flatten

log = logging.getLogger("isparse")


def output_dir() -> Path:
    """The job's directory (Hydra's ``runtime.output_dir``; the current directory outside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else Path.cwd()


def run_job(cfg, made: dict | None = None) -> dict:
    """Run the job of the composed config ``cfg``; returns its summary (final metrics).

    ``made`` (a dict) is filled with ``run_id`` once the MLflow run exists and ``job`` once the config is checked
    (the caller's failure record uses them).

    Raises
    ------
    ConfigError, DataError
        Bad input, before any MLflow run is made (or, for the few checks that need the run's data, with the run
        FAILED).
    DivergenceError
        The iterates diverged (the run FAILED, with its last finite iterate as the artifact x_last_finite.npy).
    """
    made = {} if made is None else made
    overrides = job_overrides()
    job = load_job(cfg)
    checkpoint = None
    if job.resume:   # the stored config and last checkpoint of an earlier run
        check_reachable(job.tracking.uri)
        job, checkpoint = load_resume(job, overrides, output_dir, JobConfig)
    made["job"] = job
    if job.engine == "dask":   # the cluster's checks that need no cluster (its extra installed, address, TLS files)
        job.cluster.check_run()
    with stage("tracking store"):
        check_reachable(job.tracking.uri)
    with stage("data"):   # the data read and the reference problem made (its cache: stage "cache")
        data_file = job.data.fingerprint()   # what the run reads (its size and hash; a checkpoint records it)
        if checkpoint is not None:   # the same data as the interrupted run's, or no resume (the run left as it is)
            check_resumed_data(checkpoint, data_file, job.resume, output_dir() / "checkpoint.pkl")
        hosted = job.engine == "dask" and job.data.hosted   # read by the Dask workers: built once they are up
        setup = None if hosted else build(job, cache_dir=job.cache_dir)
    if not hosted:
        with stage("tracking store"):   # the store is opened (made) only for a run that builds: bad input makes none
            client_for(job.tracking.uri).prepare()
    end = {}   # the MLflow run's id and status: its last line, printed once the cluster is closed
    with end_line(job, end, overrides, job.method_class().traits.asynchronous), stop_on_signals() as stop, \
            _pool(job, setup, stop) as (setup, pool):
        if hosted:
            with stage("tracking store"):
                client_for(job.tracking.uri).prepare()
        with stage("figure"):
            from . import plots  # noqa: F401 - matplotlib, imported while the helper may still be opening the store
        return tracked(job, setup, pool, run_name(job, setup), overrides, stop, end, made, output_dir(), checkpoint,
                       data_file)


def tracked(job, setup, pool, name, overrides, stop, end, made, outdir, checkpoint=None, data_file=None) -> dict:
    """The MLflow run of a built ``setup`` on ``pool``: started, the iterations run and logged, ended FINISHED, FAILED
    (the error in the tag ``error``, re-raised) or KILLED; returns the summary. ``end`` gets the run's id and status,
    ``made`` its ``run_id`` and the :class:`~isparse.engines.RunResult` (``result``); ``outdir`` is where its files
    are written before they are uploaded."""
    with stage("tracking store"):
        logger = start_run(job, setup, name, overrides, outdir, checkpoint)
    made["run_id"] = logger.run_id
    if job.engine == "dask":   # cluster=emulated's record names the run: a start after a SIGKILL marks it KILLED
        from .cluster import record_run

        record_run(pool.client, logger.run_id, job.tracking.uri)
    status = "FAILED"
    end.update(run_id=logger.run_id, uri=job.tracking.uri, status=status, client=logger.client, outdir=outdir)
    try:
        summary = _run_and_log(job, setup, pool, logger, name, stop, outdir, made, checkpoint, data_file)
        status = "FINISHED"
        return summary
    except BaseException as caught:
        exc = lost_cluster(job, pool, caught, logger, overrides) or caught   # the cluster's end, said as such
        end["reason"] = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, KeyboardInterrupt):
            with contextlib.suppress(Exception):   # for the task's exit status and its message
                exc.run_id, exc.signal = logger.run_id, stop.signal
            if stop.signal:
                end["reason"] = f"{stop.signal}, {exc}" if str(exc).startswith("stopped at") else stop.signal
            status = "KILLED"
        with contextlib.suppress(Exception):   # failure: bad input or an error (a sweep's exit status reads it)
            logger.set_tags({"error": f"{type(exc).__name__}: {exc}",
                             FAILURE_TAG: "input" if user_message(exc) is not None else "error"})
        if isinstance(exc, DivergenceError):   # keep the last finite iterate and the stepsize that broke it
            with contextlib.suppress(Exception):
                path = outdir / "x_last_finite.npy"
                np.save(path, exc.x_last)
                logger.log_artifact(path)
                logger.set_tags({"diverged_at_iteration": exc.t, "diverged_gamma": exc.gamma})
        if exc is not caught:
            raise exc from caught
        raise
    finally:
        end["status"] = status
        with stage("finish"):
            end["stored"] = logger.end(status)   # False: the tracking server stayed away (the run is RUNNING there)


def log_fit(spec, setup, uri: str, experiment: str, pool=None, **options):
    """Run a built ``setup`` (in-process, or on ``pool``) as the MLflow run ``isparse-run`` logs (params, the bound beside the measured
    values, bytes, time, the figure): what a scikit-learn estimator's ``fit`` with ``tracking_uri`` does
    (:mod:`isparse.estimators`). The run's files go to a temporary directory, deleted once uploaded.

    Parameters
    ----------
    spec : RunSpec
        The run's keys (its ``data`` an :class:`~isparse.data.sources.InMemory` for rows given to ``build``).
    setup : RunSetup
        ``build(spec, data=...)``.
    uri, experiment : str
        The MLflow store (``tracking.uri``) and experiment (``tracking.experiment``).
    pool : DaskPool, optional
        Where the workers' steps run (default: an in-process pool of ``setup``).
    **options
        ``tracking``'s other keys (``log_every``: a record every this many iterations).

    Returns
    -------
    (RunResult, str)
        The run's result and its MLflow run id.

    Raises
    ------
    ConfigError
        (``tracking.uri``) a store that cannot be used.
    """
    import tempfile

    from .lifecycle import Stop
    from .schema import CheckpointSpec, PathsSpec, TrackingSpec

    check_reachable(uri)
    values = {name: getattr(spec, name) for name in type(spec).fields()}
    made = {}
    with tempfile.TemporaryDirectory(prefix="isparse-fit-") as tmp:
        job = JobConfig(**values, engine="inprocess" if pool is None else "dask", progress=False, cache=False,
                        checkpoint=CheckpointSpec(every=0), paths=PathsSpec(root=tmp, outputs=tmp),
                        tracking=TrackingSpec(uri=uri, experiment=experiment, **options)).check()
        client_for(uri).prepare()
        tracked(job, setup, InProcessPool(*setup.pool_args()) if pool is None else pool, run_name(job, setup), [],
                Stop(), {}, made, Path(tmp))
    return made["result"], made["run_id"]


@contextlib.contextmanager
def _pool(job, setup, stop):
    """(setup, the engine's pool); on Dask the cluster and the hosts' actors, made with signals deferred (``stop``).
    ``setup`` None: the data source is ``hosted``, its rows read by the Dask workers, and the run is built on them
    here."""
    if job.engine == "inprocess":
        yield setup, InProcessPool(*setup.pool_args())
        return
    from isparse.engines.dask import DaskPool

    from .cluster import dask_client

    with stage("finish"), contextlib.ExitStack() as stack:   # (closing the cluster: the run's finish)
        with stop.deferred(), stage("cluster start"):   # Ctrl-C while the cluster starts and the shards travel:
            # taken once they are done
            client = stack.enter_context(dask_client(job.cluster, run_dir=output_dir))
            if not job_env(PARENT_ENV):   # a sweep's job: its run's tag dask_dashboard has it (not a line per job)
                print(f"Dask dashboard: {client.dashboard_link}", flush=True)
        source = None
        if setup is None:   # each Dask worker reads its files; the problem's numbers are reduced from them
            with stage("data"):
                source = job.data.read_hosted(client, job)
                stack.callback(source.close)
                setup = build(job, problem=source.problem, cache_dir=job.cache_dir)
        elif job.data.load == "on_worker":   # each Dask worker reads its rows of the shared file
            from isparse.data.on_worker import ShardSource

            source = ShardSource.of(job.data.loader(), setup.rows, setup.shards)
        with stop.deferred(), stage("cluster start"):
            pool = DaskPool(client, *setup.pool_args(), snapshot_every=job.cluster.snapshot_every,
                            worker_timeout=job.cluster.worker_timeout, measure_every=job.cluster.measure_every,
                            source=source, aggregate=job.messages.aggregate == "host",
                            rounds=job.cluster.rounds)
            stack.callback(pool.close)
        yield setup, pool


def _dataset_input(job, setup, data_file) -> tuple[str, str, str, dict]:
    """(name, digest, source, profile) of the run's data for MLflow's dataset input: the file's SHA-256 (prefix) for a
    data file, else a SHA-256 of the arrays (a generated or bundled set); the profile is its shape."""
    import hashlib

    data = setup.problem.data
    profile = {"workers": int(setup.method.n), "d": int(setup.derived.get("d", 0))}
    if data is not None:
        profile.update(rows=int(data.A.shape[0]), features=int(data.A.shape[1]), nnz=int(data.A.nnz))
    if data_file is not None:
        return job.data.display_name(), data_file["sha256"], data_file["file"], profile
    h = hashlib.sha256()
    if data is not None:
        A = data.A.tocsr()
        for part in (A.data, A.indices, A.indptr, np.asarray(data.b)):
            h.update(np.ascontiguousarray(part).tobytes())
    else:   # a generated problem: its options say what it is
        h.update(json.dumps(job.data.to_dict(), sort_keys=True, default=str).encode())
    return job.data.display_name(), h.hexdigest(), f"isparse data={job.data.name}", profile


def _uplink_convention(method) -> str:
    c = method.codec
    per = "values x 8 B" if c.exact else (f"values x {c.value_bits} bits ({c.label}"
                                          + (f", + {c.header_bits // 8} B per message)" if c.header_bits else ")"))
    if method.sends_ids:
        return f"{per} + block ids x 4 B (none when dense)"
    if method.tau_m == method.blocks.m:
        return f"{per} (all blocks: no ids)"
    return f"{per} (block ids recomputed by the master)"


def _run_and_log(job, setup, pool, logger, name, stop, outdir, made, checkpoint=None, data_file=None) -> dict:
    with stage("tracking store"):
        return _log_run(job, setup, pool, logger, name, stop, outdir, made, checkpoint, data_file)


def _log_run(job, setup, pool, logger, name, stop, outdir, made, checkpoint=None, data_file=None) -> dict:
    import yaml

    derived, bound, method = setup.derived, setup.bound, setup.method
    predicted = bound.iterations_to(job.tol * derived["r0"])
    warn_if_predicted_beyond(job, bound, derived["r0"], predicted)
    if checkpoint is None:   # a resumed run has these already
        config = job.to_dict()
        logger.log_params({**flatten(config), **derived, "data.source": job.data.describe(setup.problem),
                           "data.labels": (setup.problem.data.labels if setup.problem.data is not None else "") or "none",
                           "tau_setting": job.tau, "uplink_convention": _uplink_convention(method)})
        logger.log_text(yaml.safe_dump(config, sort_keys=False), "config.yaml")
        logger.set_tags({"predicted_iterations": predicted})
        if data_file is not None:   # what the run read (a resume on other data is refused)
            logger.set_tags({"data_file": data_file["file"], "data_file_bytes": data_file["bytes"],
                             "data_file_sha256": data_file["sha256"]})
        logger.log_dataset(*_dataset_input(job, setup, data_file))   # the MLflow UI's Dataset column
        if job.compare.role is not None:     # also a param (compare.role); a tag for the MLflow UI's filters
            logger.set_tags({"compare.role": job.compare.role, "compare.arm": str(job.compare.arm)})
        logger.log_metrics({SUMMARY + "predicted_iterations": predicted}, step=0)
    logger.log_dict({str(i): a for i, a in pool.placement.items()}, "placement.json")
    if _on_dask(pool):
        logger.set_tags({"dask_dashboard": pool.client.dashboard_link or "none",
                         "dask_scheduler": pool.client.scheduler.address, **job.cluster.tags()})
        pool.on_recovery = lambda event: _log_recovery(logger, pool, event)
    skip, wall = logged_until(logger) if checkpoint is not None else (-1, None)
    observer = MetricsLog(logger, lambda rec: metrics(rec, method.n, derived["r0"], bound.quantity), skip, wall)
    with stage("rounds"):   # (a checkpoint: stage "checkpoint")
        result = setup.run(pool, max_iter=job.max_iter, tol=job.tol, log_every=job.tracking.log_every,
                           observer=observer, progress=job.progress, expected_iter=predicted, should_stop=stop,
                           resume=checkpoint, checkpoint_every=job.checkpoint.every,
                           on_checkpoint=checkpoint_saver(logger, outdir, observer.logs,
                                                          [data_file] if data_file is not None else []))
    stop.done()
    made["result"] = result
    with stage("finish"):
        return _finish(job, setup, pool, logger, name, checkpoint, result, observer, predicted, outdir)


def _finish(job, setup, pool, logger, name, checkpoint, result, observer, predicted, outdir) -> dict:
    derived, bound, method = setup.derived, setup.bound, setup.method
    np.save(outdir / "x_final.npy", result.x)
    logger.log_artifact(outdir / "x_final.npy")
    last = result.records[-1]
    summary = {"iterations": result.iterations, "converged": float(result.converged),
               "final_dist_sq": last["dist_sq"], "final_bound": last["bound"],
               "uplink_bytes_total": last["uplink_bytes"],
               "uplink_bytes_per_worker_max": float(result.uplink_per_worker.max()),
               "uplink_ratio_to_dense": last["uplink_bytes"] / max(1, result.iterations * method.n * setup.problem.d * 8),
               # what tau alone would send (float64 values) against dense float64, and the codec's share of that
               "uplink_ratio_tau_only": last["uplink_bytes_float64"] / max(1, result.iterations * method.n
                                                                            * setup.problem.d * 8),
               "uplink_ratio_codec": last["uplink_bytes"] / max(1.0, last["uplink_bytes_float64"]),
               "wall_s_total": last["wall_s"] + observer.shift}
    if _on_dask(pool):   # the Dask engine measured what it received
        traffic = pool.traffic()
        summary.update({k: traffic[k] for k in ("uplink_serialized_ratio", "uplink_overhead_per_reply")})
        logger.log_params({"uplink_serialized_ratio": f"{traffic['uplink_serialized_ratio']:.6g}",
                           "uplink_serialized_measure": "len(distributed.protocol.serialize_bytes(reply)) per host reply, "
                                                        f"every {pool.measure_every} rounds"})
    summary.update(_time_to_eps(job, result, logger, checkpoint))
    logger.log_metrics({SUMMARY + k: v for k, v in summary.items()}, step=result.iterations)
    logger.log_dict({str(i): (int(b) if float(b).is_integer() else float(b)) for i, b in enumerate(result.uplink_per_worker)}, "uplink_bytes_per_worker.json")
    if draws_figure(job.tracking.figure):
        with stage("figure"):
            _log_figure(logger, outdir, result.records, f"{name}: {bound.theorem.split(', arXiv')[0]}", job, derived,
                        bound)
    if not result.converged:
        why = (f"predicted iterations: {predicted:g}" if predicted == predicted else
               f"no iteration count is predicted: {bound.theorem}")   # NaN: no bound applies
        note = f"max_iter={job.max_iter} reached before tol={job.tol} ({why})"
        logger.set_tags({"stopped": note})
        if job.tol > 0:   # tol = 0 asks for all of max_iter
            log.warning("%s: %s; dist_sq/r0 = %.3e", name, note, last["dist_sq"] / max(derived["r0"], 1e-300))
    measured = f"dist_sq {last['dist_sq']:.3e}" if setup.reference.solved else \
        f"F {last['objective']:.6e}, ||grad f||^2 {last['grad_norm_sq']:.3e}"
    log.info("%s: %d iterations, %s (%s), converged=%s, uplink %d B, %.2f s", name, result.iterations, measured,
             bound_text(bound, last["bound"]), result.converged, last["uplink_bytes"], summary["wall_s_total"])
    if job.compare.objective is not None:   # a sweeper that minimizes (Optuna) gets one number
        start = {"dist_sq": derived["r0"], "subopt": setup.problem.F(setup.x0) - derived["f_star"]}
        return objective(job.compare.objective, result, start)
    return summary


def _time_to_eps(job, result, logger, checkpoint=None) -> dict:
    """The run metrics to ``eps`` (:func:`isparse.engines.to_eps.to_eps` of the records) and the tag ``time_to_eps``:
    where it was reached, or ``not reached ...`` (and no metric)."""
    reached = to_eps(result.records, job.eps, job.eps_on)
    what = (f"{criterion_text(job.eps, job.eps_on)} at a logged iterate (every tracking.log_every="
            f"{job.tracking.log_every} iterations)")
    if reached is None:
        tag = f"not reached: no {what} in {result.iterations} iterations"
    else:
        tag = (f"reached at iteration {reached.rounds}: the first {what}; {reached.time_s:.6g} s of rounds from "
               f"the first iteration (monitors, cluster start and reference solve left out)")
    if checkpoint is not None:
        tag += (f"; resumed from iteration {checkpoint.t}: the rounds before it timed by the interrupted run, those "
                f"after by this one (the rounds replayed after the checkpoint count once)")
    logger.set_tags({"time_to_eps": tag})
    return reached.metrics() if reached is not None else {}


def objective(measure: str, result, start: dict) -> float:
    """``compare.objective`` of a finished run: its iterations, or its final error on ``measure`` (the mean of
    measure / its value at t = 0, ``start[measure]``, over the last 20% of the logged steps, as the report's
    comparison tables take it)."""
    from .report import tail

    if measure == "iterations":
        return float(result.iterations)
    values = tail([r["step"] for r in result.records], [r[measure] for r in result.records])
    return float(np.mean(values) / start[measure]) if values and start[measure] > 0 else math.inf


def _log_figure(logger, outdir: Path, records, title, job, derived, bound) -> None:
    """The run's convergence.png, drawn once (from t = 0, a resumed run too: the checkpoint carries the records),
    saved beside the job and uploaded."""
    from .plots import convergence_figure

    fig = convergence_figure(records, title, tol=job.tol, r0=derived["r0"], bound_quantity=bound.quantity)
    path = outdir / "convergence.png"
    fig.savefig(path, dpi=100)
    logger.log_artifact(path)


def bound_text(bound, value: float) -> str:
    """``bound 1.234e-08``, or why the run has no bound (its tag ``bound_applicable=false``): the reason the
    method's ``bound`` gives (``NoBound.theorem``), or a stepsize above the theorem's."""
    from isparse.theory.bound import NoBound

    if math.isfinite(value) or bound.applicable:   # a bound on another quantity (IASGD: subopt) says which
        return f"bound {value:.3e}" if bound.quantity == "dist_sq" else f"bound on {bound.quantity} {value:.3e}"
    if isinstance(bound, NoBound):   # a peer, or a theorem whose assumptions fail: its theorem says why
        return f"no bound: {bound.theorem}"
    limit = bound.gamma_max if bound.gamma_max is not None else bound.gamma_theory
    return f"no bound: the stepsize gamma = {bound.gamma:.4g} is above the gamma <= {limit:.4g} of {bound.theorem}"


def _log_recovery(logger, pool, event):
    """A lost Dask worker was recovered from: a tag per event and the metric ``worker_restarts``."""
    log.warning("lost Dask worker(s) %s at round %d; logical workers %s moved to %s (%d rounds replayed, %.2f s)",
                event["lost"], event["round"], event["workers"], list(event["moved_to"]), event["replayed_rounds"],
                event["seconds"])
    logger.set_tags({f"worker_restart_{len(pool.events)}": json.dumps(event, default=str)[:5000],
                     "placement_after_recovery": json.dumps({str(i): a for i, a in pool.placement.items()})[:5000]})
    logger.log_metrics({"worker_restarts": pool.restarts}, step=event["round"])


def metrics(rec: dict, n: int, r0: float, quantity: str = "dist_sq") -> dict:
    """The metrics logged for one record of the master loop.

    Beside the record's values: ``uplink_bytes_per_worker``, ``log10_dist_sq_rel`` = log10(dist_sq / r0) (the
    convergence of every method on one scale), and the MLflow UI's ``bound`` section (:data:`pipeline.tracking.BOUND`),
    the theorem's bound beside what it bounds, on one scale: ``bound/log10_bound_rel`` = log10(bound / r0),
    ``bound/log10_measured_rel`` = log10(rec[quantity] / r0) and ``bound/log10_slack`` = log10(bound / rec[quantity]),
    >= 0 while the measured value is within the bound (``quantity`` = the bound's ``bound_quantity``: dist_sq,
    subopt, subopt_avg or grad_norm_sq_avg; all three divided by the same r0, so the bound and the bounded quantity
    share a chart for each). Each log10 only where its arguments are finite and > 0; ``bound`` itself is left out
    where it is NaN (no theorem applies), and ``bound/log10_bound_rel`` and ``bound/log10_slack`` with it, while
    ``bound/log10_measured_rel`` is logged for every run: the comparison view's charts draw every run's measured
    quantity, the bound beside it where one exists.
    """
    out = {k: v for k, v in rec.items() if k != "step"}
    out["uplink_bytes_per_worker"] = rec["uplink_bytes"] / n
    bound, measured = rec["bound"], rec.get(quantity)
    if not math.isfinite(bound):
        out.pop("bound")
    for key, num, den in (("log10_dist_sq_rel", rec["dist_sq"], r0), (BOUND + "log10_bound_rel", bound, r0),
                          (BOUND + "log10_measured_rel", measured, r0),
                          (BOUND + "log10_slack", bound, measured)):
        if num is not None and den is not None and 0 < num < math.inf and 0 < den < math.inf:
            out[key] = math.log10(num) - math.log10(den)
    return out


def _on_dask(pool) -> bool:
    """Whether ``pool`` is the Dask engine's (a type check that imports nothing: no DaskPool exists unless its module
    was imported)."""
    import sys

    dask_engine = sys.modules.get("isparse.engines.dask")
    return dask_engine is not None and isinstance(pool, dask_engine.DaskPool)
