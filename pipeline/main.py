"""``isparse-run``: the Hydra entry point. Builds the run from the config, runs it, logs it to MLflow.

It always closes what it opened: the MLflow run ends FINISHED, or FAILED with the reason in the
tag ``error`` (then the exception is re-raised, so a multirun records the failure and goes on),
and the Dask cluster it started is closed.

What the terminal shows (:func:`main`, the console script): an override of a key the config does not
have, with or without ``+``, and every :class:`~isparse.errors.ConfigError` are one line on stderr and
exit status 2, before any work (the traceback only with ``HYDRA_FULL_ERROR=1``); a run ends with a line
naming its MLflow run id, status and store; Ctrl-C or SIGTERM end it KILLED with one line that gives the
``isparse-run resume=<run id>`` command (exit status 130 or 143).
"""

from __future__ import annotations

import os
import signal
import sys

if os.environ.get("ISPARSE_WORKER_IGNORE_SIGINT") == str(os.getppid()):
    # a worker process spawned by this script's LocalCluster (pipeline.cluster.local_cluster), re-importing it:
    # from here on, through the seconds of imports below too, it ignores the terminal's Ctrl-C
    signal.signal(signal.SIGINT, signal.SIG_IGN)

import contextlib
import json
import logging
import math
import pickle
import shlex
import threading
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf

from isparse import build, check_static, load_dataset
from isparse.engines import DivergenceError, InProcessPool
from isparse.problems import QuadraticProblem
from isparse.errors import ConfigError, check_choice, check_range

from .cluster import check_cluster, dask_client
from .plots import convergence_figure
from .tracking import (PARENT_ENV, SWEEP_WORKER_ENV, RunLogger, check_reachable, flatten, job_env,
                       launcher_config_error, mark_sweep_failed, resolved_config, ui_link)

log = logging.getLogger("isparse")
ENGINES = ("dask", "inprocess")
LOADS = ("client", "on_worker")


def run_job(cfg: DictConfig) -> dict:
    """Run one job described by ``cfg``; returns its summary (final metrics).

    In a sweep (a parent run in ``$ISPARSE_PARENT_RUN_ID``) a job that fails before its MLflow run is made (a bad
    value, a missing data file, the reference solve) still gets its child run: FAILED, with the config's params it
    could resolve, the tag ``error`` and its overrides (:func:`_failed_job_run`)."""
    made: dict = {}
    try:
        return _run_job(cfg, made)
    except Exception as exc:
        if not made and job_env(PARENT_ENV):
            _failed_job_run(cfg, exc)
        raise


def check_job(cfg: DictConfig) -> None:
    """The checks of a job's config that need no data and no store (isparse-run's and isparse-plan's): the keys
    and values of :func:`_check_inputs`, the engine, the cluster (kind, extra, recovery settings, TLS files) and
    data.load. Raises :class:`ConfigError` naming the key."""
    _check_inputs(cfg)
    check_choice("engine", cfg.engine, ENGINES)
    if cfg.engine == "dask" and OmegaConf.is_missing(cfg.cluster, "address"):
        raise ConfigError("cluster.address", "The 'cluster.address' parameter must be set for cluster=address "
                                             "(tcp://HOST:PORT of a running scheduler); got nothing.")
    if cfg.engine == "dask":
        check_cluster(cfg.cluster)
    if check_choice("data.load", cfg.data.get("load", "client"), LOADS) == "on_worker" and (
            cfg.engine != "dask" or cfg.data.name == "quadratic"):
        raise ConfigError("data.load", f"The 'data.load' parameter must be client for engine={cfg.engine} and "
                                       f"data={cfg.data.name} (on_worker needs engine=dask and a data file); got 'on_worker'.")


def _cache_dir(cfg: DictConfig) -> Path | None:
    """outputs/cache (x*, L_i and parsed data sets: ``isparse.cache``), or None with cache=false."""
    return Path(cfg.paths.outputs) / "cache" if cfg.get("cache", True) else None


def build_setup(cfg: DictConfig, data=None, *, tau=None, block_size=None, reference=None):
    """``isparse.build`` for the job ``cfg``: its problem (the quadratic of cfg.data, or ``data``, a loaded
    :class:`isparse.data.Dataset`, with cfg.problem's loss and penalty), method, stepsize rule and bound.
    ``tau`` and ``block_size`` replace cfg.tau and cfg.blocks.size (isparse-plan's grid); ``reference`` reuses a
    solved x* (it does not depend on either). Raises ConfigError for n > N, a block size > d, tau outside [1/m, 1]."""
    common = dict(algorithm=cfg.algorithm.name, n=cfg.workers.n,
                  block_size=cfg.blocks.size if block_size is None else block_size,
                  tau=cfg.tau if tau is None else tau,
                  step_multiplier=cfg.step.multiplier, step_rule=cfg.step.get("rule", "theory"), seed=cfg.seed,
                  reg=cfg.problem.reg,
                  reg_strength=cfg.problem.reg_strength, box=tuple(cfg.problem.box), reg_l2=cfg.problem.reg_l2,
                  options={k: v for k, v in cfg.algorithm.items() if k != "name"},
                  send_ids=_send_ids(cfg))
    if data is None:
        problem = QuadraticProblem(d=cfg.data.d, o=cfg.data.o, n=cfg.workers.n, seed=cfg.data.seed)
        return build(problem=problem, **common)
    return build(data=data, lam=cfg.problem.lam, split=cfg.workers.split, split_seed=cfg.workers.split_seed,
                 loss=cfg.problem.loss, penalty=cfg.problem.penalty, reference=reference,
                 cache_dir=_cache_dir(cfg), **common)


def _job_tags() -> dict:
    """The tags that place a run in its sweep: ``sweep_job`` (Hydra's job number) and ``sweep_worker`` (the Dask
    worker that ran it, with hydra/launcher=dask)."""
    from hydra.types import RunMode

    tags = {}
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        with contextlib.suppress(Exception):
            tags["sweep_job"] = str(int(HydraConfig.get().job.num))   # a tracking server takes strings only
    if job_env(SWEEP_WORKER_ENV):
        tags["sweep_worker"] = job_env(SWEEP_WORKER_ENV)
    return tags


def _failed_job_run(cfg, exc: BaseException) -> None:
    """A FAILED child run for a sweep's job that failed before its run was made, so that every job of a sweep has
    its run. Best effort: if the store cannot be written either, a warning says so (the sweep's end still counts the
    job through Hydra)."""
    error = f"{type(exc).__name__}: {exc}"
    try:
        overrides = " ".join(HydraConfig.get().overrides.task) if HydraConfig.initialized() else ""
        try:
            params = flatten(resolved_config(cfg))
        except Exception:  # noqa: BLE001 - an interpolation that cannot resolve: the overrides say what was asked
            params = {}
        name = cfg.tracking.get("run_name") or (
            f"n{cfg.workers.n}-b{cfg.blocks.size}-tau{cfg.tau}-g{float(cfg.step.multiplier):g}-s{cfg.seed}-"
            f"{cfg.algorithm.name}-{cfg.data.name}")
        uri = str(cfg.tracking.uri)
        logger = RunLogger(uri, str(cfg.tracking.experiment), str(name), parent_run_id=job_env(PARENT_ENV),
                           tags={"algorithm": str(cfg.algorithm.name), "data": str(cfg.data.name),
                                 "engine": str(cfg.engine), "overrides": overrides, **_job_tags(),
                                 "failed_before_run": "true"},
                           spill_dir=HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else None)
        with contextlib.suppress(Exception):
            logger.log_params(params)
        logger.set_tags({"error": error})
        logger.end("FAILED")
        log.error("MLflow run %s FAILED (%s) in %s", logger.run_id, error, uri)
    except Exception as exc2:  # noqa: BLE001 - the job's own error is what the sweep reports
        log.warning("the failed job could not be recorded in MLflow (%s: %s); its error: %s", type(exc2).__name__,
                    exc2, error)


def _run_job(cfg: DictConfig, made: dict) -> dict:
    checkpoint = None
    _anchor_paths(cfg)
    if cfg.get("resume"):   # the stored config and last checkpoint of an earlier run
        cfg, checkpoint = _load_resume(cfg)
    # 1. checks that need no data, and the tracking store, before any work
    check_job(cfg)
    check_range("checkpoint.every", cfg.checkpoint.every, 0, None, integer=True)
    _send_ids(cfg)
    _compare_role(cfg)
    uri = str(cfg.tracking.uri)
    check_reachable(uri)

    # 2. data, problem, x*, method, bound (validates n <= N, block size <= d, tau in [1/m, 1])
    data = None if cfg.data.name == "quadratic" else _load_data(**_dataset_args(cfg), cache_dir=_cache_dir(cfg))
    setup = build_setup(cfg, data)
    data_name = "quadratic" if data is None else data.name
    method, bound = setup.method, setup.bound
    run_name = cfg.tracking.run_name or default_run_name(cfg, method, data_name)
    overrides = " ".join(HydraConfig.get().overrides.task) if HydraConfig.initialized() else ""

    # 3. the cluster first (an unreachable scheduler fails before any MLflow run), then the MLflow run
    end = {}   # the MLflow run's id and status: its last line, printed once the cluster is closed
    with _end_of_run_line(cfg, end), _stop_on_signals() as stop, _pool(cfg, setup, stop) as pool:
        if checkpoint is not None:
            logger = RunLogger.attach(uri, str(cfg.resume), spill_dir=HydraConfig.get().runtime.output_dir)
            logger.set_tags({"resumed_from_iteration": checkpoint.t})
            made["run_id"] = logger.run_id
            with contextlib.suppress(Exception):   # the interruption's reason no longer describes the run
                logger.client.delete_tag(logger.run_id, "error")
        else:
            logger = RunLogger(uri, str(cfg.tracking.experiment), run_name, parent_run_id=job_env(PARENT_ENV),
                               tags={"algorithm": method.name, "data": data_name, "engine": cfg.engine,
                                     "bound_theorem": bound.theorem, "bound_applicable": str(bound.applicable).lower(),
                                     "bound_quantity": bound.quantity, "bound_source": bound.source,
                                     **({"bound_derivation": bound.derivation} if bound.derivation else {}),
                                     "overrides": overrides, **_job_tags()},
                               spill_dir=HydraConfig.get().runtime.output_dir)
        made["run_id"] = logger.run_id
        log.info("MLflow run %s (%s) in %s; in the MLflow UI: %s", logger.run_id, run_name, uri,
                 ui_link(uri, logger.experiment_id, logger.run_id))
        status = "FAILED"
        end.update(run_id=logger.run_id, uri=uri, status=status, client=logger.client)
        try:
            summary = _run_and_log(cfg, setup, pool, logger, run_name, stop, checkpoint)
            status = "FINISHED"
            return summary
        except BaseException as exc:
            end["reason"] = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, KeyboardInterrupt):
                with contextlib.suppress(Exception):   # for the task's exit status and its message
                    exc.run_id, exc.signal = logger.run_id, stop.signal
                if stop.signal:
                    end["reason"] = f"{stop.signal}, {exc}" if str(exc).startswith("stopped at") else stop.signal
            with contextlib.suppress(Exception):
                logger.set_tags({"error": f"{type(exc).__name__}: {exc}"})
            if isinstance(exc, DivergenceError):   # keep the last finite iterate and the stepsize that broke it
                with contextlib.suppress(Exception):
                    path = Path(HydraConfig.get().runtime.output_dir) / "x_last_finite.npy"
                    np.save(path, exc.x_last)
                    logger.log_artifact(path)
                    logger.set_tags({"diverged_at_iteration": exc.t, "diverged_gamma": exc.gamma})
            if isinstance(exc, KeyboardInterrupt):
                status = "KILLED"
            raise
        finally:
            end["status"] = status
            logger.end(status)


def _check_inputs(cfg) -> None:
    """The problem's, the workers' and the algorithm's keys, data.* and the flags, checked before any work
    (``isparse.check_static``; ``_dataset_args``): a value that cannot be used, or would be ignored, is refused."""
    from isparse.setup import check_bool

    check_static(algorithm=cfg.algorithm.name, n=cfg.workers.n, block_size=cfg.blocks.size, tau=cfg.tau,
                 step_multiplier=cfg.step.multiplier, max_iter=cfg.max_iter, tol=cfg.tol,
                 log_every=cfg.tracking.log_every, seed=cfg.seed, step_rule=cfg.step.get("rule", "theory"),
                 data=cfg.data.name, lam=cfg.problem.lam, loss=cfg.problem.loss, penalty=cfg.problem.penalty,
                 reg=cfg.problem.reg, reg_strength=cfg.problem.reg_strength, reg_l2=cfg.problem.reg_l2,
                 box=OmegaConf.to_object(cfg.problem.box) if OmegaConf.is_config(cfg.problem.box) else cfg.problem.box,
                 split=cfg.workers.split, split_seed=cfg.workers.split_seed,
                 options={k: v for k, v in cfg.algorithm.items() if k != "name"})
    for key, value in (("progress", cfg.get("progress", True)), ("cache", cfg.get("cache", True)),
                       ("report.auto", cfg.get("report", {}).get("auto", False))):
        check_bool(key, value)
    for key, value, nullable in (("tracking.experiment", cfg.tracking.experiment, False),
                                 ("tracking.run_name", cfg.tracking.get("run_name"), True)):
        if not (value is None and nullable) and not (isinstance(value, str) and value.strip()):
            raise ConfigError(key, f"The '{key}' parameter must be a non-empty string{' or null' if nullable else ''}; "
                                   f"got {value!r}.")
    _dataset_args(cfg)
    if not cfg.get("resume"):   # a stored config may hold keys of an older version
        _check_known_keys(cfg)


#: groups whose keys are checked elsewhere (data: _DATA_KEYS, algorithm: its options) or belong to others (cluster)
_OWN_KEYS = ("algorithm", "data", "cluster", "hydra")


def _check_known_keys(cfg) -> None:
    """A key added with ``+`` that isparse-run does not read (``+problem.lamda=0.1``) would be ignored: refused.
    The known keys are those of conf/config.yaml."""
    base = OmegaConf.load(Path(CONF_DIR) / "config.yaml")
    for key in cfg.keys():
        if key in _OWN_KEYS:
            continue
        if key not in base:
            raise ConfigError(key, f"The '{key}' parameter is not read by isparse-run (it would be ignored); the keys "
                                   f"are those of conf/config.yaml: {', '.join(k for k in base if k != 'defaults')}.")
        if OmegaConf.is_dict(base[key]) and OmegaConf.is_dict(cfg[key]):
            extra = sorted(set(cfg[key].keys()) - set(base[key].keys()))
            if extra:
                raise ConfigError(f"{key}.{extra[0]}", f"The '{key}.{extra[0]}' parameter is not read by isparse-run "
                                                       f"(it would be ignored); the keys of {key}: "
                                                       f"{', '.join(base[key].keys())}.")


def default_run_name(cfg, method, data_name: str) -> str:
    """``n<n>-b<b>-tau<tau>-g<multiplier>[<rule>]-s<seed>-<algorithm>-<data>``, e.g. ``n16-b8-tau0.0625-g1-s0-isega-a9a``.

    What differs between the jobs of a sweep comes first (MLflow's runs table cuts long names): n, the block
    size b, tau = tau_m / m (4 significant digits), the stepsize multiplier (followed by the rule when it is not
    ``theory``, e.g. ``g1paper``) and the seed; the algorithm and the data set last.
    """
    rule = cfg.step.get("rule", "theory")
    gamma = f"g{float(cfg.step.multiplier):g}" + ("" if rule == "theory" else str(rule))
    return f"n{method.n}-b{cfg.blocks.size}-tau{method.tau:.4g}-{gamma}-s{cfg.seed}-{method.name}-{data_name}"


#: the sides of a method-vs-baseline comparison (``compare.role``; conf/arm/*.yaml set it, the report reads it)
ROLES = ("method", "baseline")


def _compare_role(cfg):
    """``compare.role``: null, method or baseline (ConfigError otherwise)."""
    role = (cfg.get("compare") or {}).get("role")
    return role if role is None else check_choice("compare.role", role, ROLES)


def _send_ids(cfg) -> bool:
    """``messages.send_ids``, a boolean.

    Raises
    ------
    ConfigError
        Anything but true or false.
    """
    value = cfg.get("messages", {}).get("send_ids", False)
    if not isinstance(value, bool):
        raise ConfigError("messages.send_ids", f"The 'messages.send_ids' parameter must be true or false; got {value!r}.")
    return value


def _run_and_log(cfg, setup, pool, logger, run_name, stop, checkpoint=None) -> dict:
    derived, bound, method = setup.derived, setup.bound, setup.method
    outdir = Path(HydraConfig.get().runtime.output_dir)
    predicted = bound.iterations_to(cfg.tol * derived["r0"])
    _warn_if_predicted_beyond(cfg, bound, derived, predicted)
    if checkpoint is None:   # a resumed run has these already
        logger.log_params({**flatten(resolved_config(cfg)), **derived, "data.source": _source(cfg, setup),
                           "tau_setting": cfg.tau,
                           "uplink_convention": ("values x 8 B + block ids x 4 B (none when dense)" if method.sends_ids
                                                 else "values x 8 B (all blocks: no ids)" if method.tau_m == method.blocks.m
                                                 else "values x 8 B (block ids recomputed by the master)")})
        logger.log_text(OmegaConf.to_yaml(resolved_config(cfg)), "config.yaml")
        logger.set_tags({"predicted_iterations": predicted})
        if _compare_role(cfg) is not None:     # also a param (compare.role); a tag for the MLflow UI's filters
            logger.set_tags({"compare.role": cfg.compare.role, "compare.arm": str(cfg.compare.get("arm"))})
        logger.log_metrics({"predicted_iterations": predicted}, step=0)
    logger.log_dict({str(i): a for i, a in pool.placement.items()}, "placement.json")
    if pool.name == "dask":
        logger.set_tags({"dask_dashboard": pool.client.dashboard_link or "none",
                         "dask_scheduler": pool.client.scheduler.address})
        pool.on_recovery = lambda event: _log_recovery(logger, pool, event)

    def save_checkpoint(ck):
        """Pickle (the checkpoint holds the states as values: the next steps do not write into them), then upload;
        metrics first, so nothing logged lags it."""
        tmp, path = outdir / "checkpoint.pkl.tmp", outdir / "checkpoint.pkl"
        with open(tmp, "wb") as fh:
            pickle.dump(ck, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        logger.flush()
        logger.log_artifact(path)
        logger.log_metrics({"checkpoint_iteration": ck.t}, step=ck.t)

    result = setup.run(pool, max_iter=cfg.max_iter, tol=cfg.tol, log_every=cfg.tracking.log_every,
                       observer=lambda rec: logger.log_metrics(_metrics(rec, method.n, derived["r0"], bound.quantity),
                                                               rec["step"]),
                       progress=bool(cfg.progress), expected_iter=predicted, should_stop=stop, resume=checkpoint,
                       checkpoint_every=int(cfg.checkpoint.every), on_checkpoint=save_checkpoint)
    stop.done()
    np.save(outdir / "x_final.npy", result.x)
    logger.log_artifact(outdir / "x_final.npy")
    last = result.records[-1]
    summary = {"iterations": result.iterations, "converged": float(result.converged),
               "final_dist_sq": last["dist_sq"], "final_bound": last["bound"],
               "uplink_bytes_total": last["uplink_bytes"],
               "uplink_bytes_per_worker_max": float(result.uplink_per_worker.max()),
               "uplink_ratio_to_dense": last["uplink_bytes"] / max(1, result.iterations * method.n * setup.problem.d * 8),
               "wall_s_total": last["wall_s"]}
    if pool.name == "dask":   # the Dask engine measured what it received
        traffic = pool.traffic()
        summary.update({k: traffic[k] for k in ("uplink_serialized_ratio", "uplink_overhead_per_reply")})
        logger.log_params({"uplink_serialized_ratio": f"{traffic['uplink_serialized_ratio']:.6g}",
                           "uplink_serialized_measure": "len(distributed.protocol.serialize_bytes(reply)) per host reply, "
                                                        f"every {pool.measure_every} rounds"})
    logger.log_metrics(summary, step=result.iterations)
    logger.log_dict({str(i): int(b) for i, b in enumerate(result.uplink_per_worker)}, "uplink_bytes_per_worker.json")
    fig = convergence_figure(result.records, f"{run_name}: {bound.theorem.split(', arXiv')[0]}", tol=cfg.tol,
                             r0=derived["r0"], bound_quantity=bound.quantity)
    logger.log_figure(fig, "convergence.png")
    fig.savefig(Path(HydraConfig.get().runtime.output_dir) / "convergence.png", dpi=100)
    if not result.converged:
        note = f"max_iter={cfg.max_iter} reached before tol={cfg.tol} (predicted iterations: {predicted})"
        logger.set_tags({"stopped": note})
        if cfg.tol > 0:   # tol = 0 asks for all of max_iter
            log.warning("%s: %s; dist_sq/r0 = %.3e", run_name, note, last["dist_sq"] / max(derived["r0"], 1e-300))
    log.info("%s: %d iterations, dist_sq %.3e (%s), converged=%s, uplink %d B, %.2f s",
             run_name, result.iterations, last["dist_sq"], bound_text(bound, last["bound"]), result.converged,
             last["uplink_bytes"], last["wall_s"])
    return summary


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


def _warn_if_predicted_beyond(cfg, bound, derived, predicted) -> None:
    """A warning at start when the theorem's iteration count to ``tol`` (``predicted_iterations``) exceeds
    ``max_iter``: the run will stop at ``max_iter`` without reaching ``tol`` (not for ``tol=0``, which asks for
    all of ``max_iter``, nor when no bound applies: ``predicted`` NaN)."""
    if not cfg.tol > 0 or not predicted > cfg.max_iter:
        return
    target, theorem = cfg.tol * derived["r0"], bound.theorem.split(";")[0].split(",")[0]
    if math.isfinite(predicted):
        why = f"predicted_iterations = {predicted:,.0f} ({theorem}) to reach tol={cfg.tol:g}"
    elif bound.neighbourhood >= target:
        why = (f"the bound ({theorem}) stays above tol * r_0 = {target:.3e} (its neighbourhood: "
               f"{bound.neighbourhood:.3e}): predicted_iterations = inf to reach tol={cfg.tol:g}")
    else:
        why = f"the bound ({theorem}) does not contract: predicted_iterations = inf to reach tol={cfg.tol:g}"
    log.warning("%s, more than max_iter=%d: the run will stop at max_iter without reaching tol; raise max_iter "
                "(or tol)", why, cfg.max_iter)


def _log_recovery(logger, pool, event):
    """A lost Dask worker was recovered from: a tag per event and the metric ``worker_restarts``."""
    log.warning("lost Dask worker(s) %s at round %d; logical workers %s moved to %s (%d rounds replayed, %.2f s)",
                event["lost"], event["round"], event["workers"], list(event["moved_to"]), event["replayed_rounds"],
                event["seconds"])
    logger.set_tags({f"worker_restart_{len(pool.events)}": json.dumps(event, default=str)[:5000],
                     "placement_after_recovery": json.dumps({str(i): a for i, a in pool.placement.items()})[:5000]})
    logger.log_metrics({"worker_restarts": pool.restarts}, step=event["round"])


def _load_resume(cfg):
    """The stored config of run ``cfg.resume`` (with this invocation's engine, cluster and tracking URI) and its
    last checkpoint.

    Raises
    ------
    ConfigError
        The run does not exist in ``tracking.uri`` or has no checkpoint.
    """
    from .tracking import client_for

    _check_resume_overrides()
    run_id, uri = str(cfg.resume), str(cfg.tracking.uri)
    check_reachable(uri)
    client = client_for(uri)
    try:
        status = client.get_run(run_id).info.status
    except Exception as exc:
        raise ConfigError("resume", f"The 'resume' parameter must be the id of a run in {uri}; got {run_id!r}: {exc}") from exc
    if status == "FINISHED":
        raise ConfigError("resume", f"The 'resume' parameter must name a run that did not finish (KILLED, FAILED or "
                                    f"RUNNING); run {run_id!r} is FINISHED: nothing to resume.")
    dst = Path(HydraConfig.get().runtime.output_dir)
    try:
        stored = OmegaConf.load(client.download_artifacts(run_id, "config.yaml", str(dst)))
        with open(client.download_artifacts(run_id, "checkpoint.pkl", str(dst)), "rb") as fh:
            checkpoint = pickle.load(fh)
    except Exception as exc:
        raise ConfigError("resume", f"The 'resume' parameter must name a run with a checkpoint "
                                    f"(checkpoint.every > 0 and at least that many iterations); {run_id!r} has none: {exc}") from exc
    for key in ("engine", "cluster", "progress", "resume"):
        stored[key] = cfg[key]
    stored.tracking.uri = uri
    return stored, checkpoint


#: what a resumed run takes from this invocation (the rest comes from the run's stored config)
_RESUME_KEYS = ("resume", "engine", "cluster", "tracking.uri", "progress", "paths", "hydra")


def _check_resume_overrides() -> None:
    """With ``resume=<run id>`` the run's stored config is used: an override of any other key would be ignored.

    Raises
    ------
    ConfigError
        (key ``resume``) naming the first such override and the keys that may be given.
    """
    if not HydraConfig.initialized():
        return
    for override in HydraConfig.get().overrides.task:
        key = override.lstrip("+~").split("=", 1)[0]
        if not any(key == k or key.startswith(k + ".") for k in _RESUME_KEYS):
            raise ConfigError("resume", f"The 'resume' parameter continues a run with its stored config: only "
                                        f"engine, cluster.*, tracking.uri, progress and paths.* may be given with it; "
                                        f"got {override!r} (it would be ignored).")


class _Stop:
    """The run's stop flag, set by SIGINT or SIGTERM; the master loop calls it every iteration.

    Attributes
    ----------
    signal : str or None
        The first signal received (``SIGINT``, ``SIGTERM``), None before.
    polling : bool
        True once the master loop has asked: from then on, until :meth:`done`, a first signal only sets the flag and
        the loop ends the run at the end of its iteration, outside any Dask call (a second one interrupts at once).
    """

    def __init__(self):
        self.signal, self.polling = None, False

    def __call__(self) -> bool:
        self.polling = True
        return self.signal is not None

    def done(self) -> None:
        """The loop is over: a signal now interrupts at once."""
        self.polling = False

    @contextlib.contextmanager
    def deferred(self):
        """Inside, a signal only sets the flag (a Dask cluster starting: interrupted there, it was left half made,
        and Dask's exit hook printed its failure); on a normal exit a signal received raises KeyboardInterrupt."""
        before, self.polling = self.polling, True
        try:
            yield
        finally:
            self.polling = before
        if self.signal is not None:
            raise KeyboardInterrupt(f"signal {self.signal}")


@contextlib.contextmanager
def _stop_on_signals():
    """SIGINT and SIGTERM end the run as KILLED. While the master loop runs, the first one sets the flag the loop
    checks every iteration (an interrupt raised inside a blocking Dask call would leave Dask's futures half done and
    its tornado callbacks failing); otherwise, or at the second one, the handler raises KeyboardInterrupt."""
    stop = _Stop()

    def handler(signum, frame):
        first = stop.signal is None
        if first:
            stop.signal = signal.Signals(signum).name
        if first and stop.polling:
            return
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    def unraisable(info, previous=sys.unraisablehook):
        # the interrupt raised inside a callback that cannot raise (a gc callback of Dask's): the flag is set,
        # the loop stops at its first check; no "Exception ignored in ..." traceback
        if not (isinstance(info.exc_value, KeyboardInterrupt) and stop.signal):
            previous(info)

    installed = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            installed[sig] = signal.signal(sig, handler)
    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield stop
    finally:
        sys.unraisablehook = hook
        for sig, previous in installed.items():
            signal.signal(sig, previous)


#: the keys each kind of data config has (anything else under data.* would be ignored: refused)
_DATA_KEYS = {"named": {"name", "dir", "lam", "empty_rows", "n_features", "load"},
              "libsvm": {"name", "path", "n_features", "lam", "empty_rows", "load"},
              "breast_cancer": {"name", "lam", "load"},
              "quadratic": {"name", "d", "o", "seed", "lam", "load"}}


#: the overrides a resumed run needs from the interrupted invocation: where the store is, engine and cluster
_RESUME_COMMAND_KEYS = ("paths.", "tracking.uri", "engine", "cluster", "+cluster", "++cluster")


def resume_command(run_id: str, overrides) -> str:
    """``isparse-run resume=<run_id>`` with the overrides of ``overrides`` (the interrupted invocation's, as typed)
    that say where the MLflow store is and which engine and cluster ran it, shell-quoted."""
    keep = [o for o in overrides if o.startswith(_RESUME_COMMAND_KEYS) and not o.startswith("resume=")]
    return " ".join(["isparse-run", f"resume={run_id}", *map(shlex.quote, keep)])


def _checkpoint_iteration(client, run_id):
    """The iteration of the run's last uploaded checkpoint (its metric ``checkpoint_iteration``), or None."""
    with contextlib.suppress(Exception):
        history = client.get_metric_history(run_id, "checkpoint_iteration")
        if history:
            return int(max(history, key=lambda m: m.step).value)
    return None


@contextlib.contextmanager
def _end_of_run_line(cfg, end: dict):
    """On exit (the cluster closed), one line: the MLflow run id, its status and the store; for a KILLED run why,
    and the ``isparse-run resume=<run id>`` command (or why it cannot be resumed). ``end`` is filled by the run:
    ``run_id``, ``uri``, ``status``, ``client`` and, if it raised, ``reason``."""
    try:
        yield
    finally:
        if end.get("run_id"):
            run_id, uri, status = end["run_id"], end["uri"], end.get("status", "FAILED")
            if status == "FINISHED":
                log.info("MLflow run %s FINISHED in %s", run_id, uri)
            elif status == "KILLED":
                overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
                ck = _checkpoint_iteration(end["client"], run_id)
                if cfg.algorithm.name == "async_isgd":
                    how = "an asynchronous run cannot be resumed"
                elif ck is None:
                    how = (f"it cannot be resumed: no checkpoint yet (checkpoint.every={cfg.checkpoint.every}); "
                           f"what was logged is kept")
                else:
                    how = f"continue it from iteration {ck} with: {resume_command(run_id, overrides)}"
                log.warning("MLflow run %s KILLED (%s) in %s; %s", run_id, end.get("reason", "interrupted"), uri, how)
            else:
                log.error("MLflow run %s FAILED (%s) in %s", run_id, end.get("reason", "?"), uri)


def _absolute(path) -> str:
    """``path`` (``~`` expanded) made absolute against the directory the command ran in (Hydra's
    ``runtime.cwd``, whatever ``hydra.job.chdir`` says), not the job's working directory."""
    from hydra.utils import to_absolute_path

    return str(Path(to_absolute_path(str(Path(str(path)).expanduser()))).resolve())


def _anchor_paths(cfg) -> None:
    """A relative ``paths.outputs`` (and a relative ``sqlite:///`` ``tracking.uri``) means the directory the command
    ran in, as ``hydra.run.dir`` does: with ``hydra.job.chdir=true`` it would otherwise mean the job directory (a
    second MLflow store and cache there). The default, ``${hydra:runtime.cwd}/outputs``, is absolute already."""
    if not Path(str(cfg.paths.outputs)).is_absolute():
        cfg.paths.outputs = _absolute(cfg.paths.outputs)
    uri = str(cfg.tracking.uri)
    if uri.startswith("sqlite:///") and not uri[len("sqlite:///"):].startswith("/"):
        cfg.tracking.uri = "sqlite:///" + _absolute(uri[len("sqlite:///"):])


def _dataset_args(cfg) -> dict | None:
    """The arguments of ``load_dataset`` for ``cfg.data`` (None for data=quadratic), checked before any work, with
    absolute paths: relative ``data.path``, ``data.dir`` and ``$ISPARSE_DATA_DIR`` mean the directory the command ran
    in (also with ``hydra.job.chdir=true``), and a Dask worker reads the same file.

    Raises
    ------
    ConfigError
        A key under ``data`` that this data set does not use (it would be ignored), ``data.n_features`` not null or
        an integer >= 1, ``data.empty_rows`` not keep, drop or error, ``data.seed`` not an integer >= 0 (quadratic),
        a missing directory or file.
    """
    from isparse.data import DATA_DIR_ENV, NAMED_FILES, resolve_data_dir
    from isparse.data import _check_n_features

    name = cfg.data.name
    kind = "named" if name in NAMED_FILES else name
    if kind in _DATA_KEYS:
        extra = sorted(set(cfg.data.keys()) - _DATA_KEYS[kind])
        if extra:
            raise ConfigError(f"data.{extra[0]}", f"The 'data.{extra[0]}' parameter is not used by data={name} (its "
                                                  f"keys: {', '.join(sorted(_DATA_KEYS[kind]))}); got "
                                                  f"{cfg.data.get(extra[0])!r}.")
    if name == "quadratic":
        check_range("data.seed", cfg.data.get("seed", 0), 0, None, integer=True)
        return None
    empty_rows = cfg.data.get("empty_rows", "keep")
    check_choice("data.empty_rows", empty_rows, ["keep", "drop", "error"])
    n_features = cfg.data.get("n_features")
    _check_n_features(n_features)
    path = None
    if name == "libsvm":
        if OmegaConf.is_missing(cfg.data, "path") or not cfg.data.get("path"):
            raise ConfigError("data.path", "The 'data.path' parameter must name a LIBSVM file for data=libsvm; "
                                           "got nothing.")
        path = _absolute(cfg.data.path)
        if not Path(path).is_file():
            raise ConfigError("data.path", f"The 'data.path' parameter must be an existing file (relative paths are "
                                           f"read from the directory the command ran in); got {path!r}.")
    data_dir = None
    if name in NAMED_FILES:
        chosen = cfg.data.get("dir") or os.environ.get(DATA_DIR_ENV)
        data_dir = str(resolve_data_dir(_absolute(chosen) if chosen else None))
        file = Path(data_dir) / NAMED_FILES[name]
        if not file.is_file():
            raise ConfigError("data.dir", f"The data set {name!r} was not found: no file {str(file)!r} (set 'data.dir' "
                                          f"or ${DATA_DIR_ENV} to the directory holding {NAMED_FILES[name]!r}).")
    return {"name": name, "data_dir": data_dir, "path": path, "empty_rows": empty_rows, "n_features": n_features}


def _source(cfg, setup) -> str:
    if cfg.data.name == "quadratic":
        return f"problem (17) of arXiv:1901.09437, d={cfg.data.d}, o={cfg.data.o}, seed={cfg.data.seed}"
    return setup.problem.data.source


def _metrics(rec: dict, n: int, r0: float, quantity: str = "dist_sq") -> dict:
    """The metrics logged for one record of the master loop.

    Beside the record's values: ``uplink_bytes_per_worker``, and three that read on a linear axis (each only where
    its arguments are finite and > 0): ``log10_dist_sq_rel`` = log10(dist_sq / r0), ``log10_bound_rel`` =
    log10(bound / r0) and ``log10_bound_slack`` = log10(bound / rec[quantity]), the bound over the quantity it
    bounds (``quantity`` = the bound's ``bound_quantity``: dist_sq, subopt, subopt_avg or grad_norm_sq_avg),
    >= 0 where the measured value is within the bound. ``bound`` itself is left out where it is NaN.
    """
    out = {k: v for k, v in rec.items() if k != "step"}
    out["uplink_bytes_per_worker"] = rec["uplink_bytes"] / n
    bound, measured = rec["bound"], rec.get(quantity)
    if not math.isfinite(bound):
        out.pop("bound")
    for key, num, den in (("log10_dist_sq_rel", rec["dist_sq"], r0), ("log10_bound_rel", bound, r0),
                          ("log10_bound_slack", bound, measured)):
        if num is not None and den is not None and 0 < num < math.inf and 0 < den < math.inf:
            out[key] = math.log10(num) - math.log10(den)
    return out


_DATA_CACHE: dict = {}


def _load_data(name, data_dir, path, empty_rows, n_features, cache_dir=None):
    """load_dataset, kept for the later jobs of a sweep: Hydra's basic launcher runs every job of a
    multirun in this process, so each data set is read and checked once (keyed by the arguments and
    the file's size and modification time; two entries at most). With ``cache_dir`` (cfg.cache) a data set
    read from a file is also kept there (``isparse.cache.load_or_read``): the parallel jobs of a sweep (joblib,
    Dask launcher), in other processes, parse each file once."""
    from isparse.cache import data_key, load_or_read
    from isparse.data import NAMED_FILES

    try:
        file = Path(path) if path else Path(data_dir) / NAMED_FILES[name]
        stamp = (file.stat().st_size, file.stat().st_mtime_ns)
    except (OSError, KeyError, TypeError):
        stamp = None
    key = (name, data_dir, path, empty_rows, n_features, stamp)
    if key in _DATA_CACHE:
        log.info("data: %s as loaded by an earlier job of this sweep", name)
        return _DATA_CACHE[key]
    def load():
        return load_dataset(name, data_dir=data_dir, path=path, empty_rows=empty_rows, n_features=n_features)

    if cache_dir is not None and stamp is not None:
        data, _ = load_or_read(load, cache_dir, data_key(file, {"name": name, "empty_rows": empty_rows,
                                                                "n_features": n_features}))
    else:
        data = load()
    while len(_DATA_CACHE) >= 2:
        _DATA_CACHE.pop(next(iter(_DATA_CACHE)))
    _DATA_CACHE[key] = data
    return data


@contextlib.contextmanager
def _pool(cfg, setup, stop):
    """The engine's pool; on Dask the cluster and the hosts' actors, made with signals deferred (``stop``)."""
    args = setup.pool_args()
    if cfg.engine == "inprocess":
        yield InProcessPool(*args)
        return
    from isparse.engines.dask import DaskPool

    with contextlib.ExitStack() as stack:
        with stop.deferred():   # Ctrl-C while the cluster starts and the shards travel: taken once they are done
            client = stack.enter_context(dask_client(cfg.cluster))
            print(f"Dask dashboard: {client.dashboard_link}", flush=True)
            source = None
            if cfg.data.get("load", "client") == "on_worker":   # each Dask worker reads its rows of the shared file
                from isparse.problems.source import ShardSource

                source = ShardSource.of(_dataset_args(cfg), setup.rows, setup.shards)
            pool = DaskPool(client, *args, snapshot_every=int(cfg.cluster.snapshot_every),
                            worker_timeout=float(cfg.cluster.worker_timeout),
                            measure_every=int(cfg.cluster.get("measure_every", 50)), source=source)
            stack.callback(pool.close)
        yield pool


#: conf/ at the root of the checkout (the package is installed editable from it: pip install -e .)
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


#: mappings whose keys are free: they are passed as they are to a cluster class (SLURMCluster's, KubeCluster's
#: keyword arguments, asyncssh.connect's, the Nanny's, the Scheduler's), so ``+<mapping>.<key>=value`` adds a key
OPEN_MAPPINGS = ("cluster.options", "cluster.connect_options", "cluster.worker_options", "cluster.scheduler_options")
#: combinations of swept config-group options composed to check a sweep's keys (more: the first ones)
MAX_CHECKED_COMBINATIONS = 64


def _config_groups(config_dir: str) -> set:
    """The config groups of ``config_dir`` (its subdirectories holding .yaml files, as ``a`` or ``a/b``)."""
    root = Path(config_dir)
    return {str(p.parent.relative_to(root)) for p in root.rglob("*.yaml") if p.parent != root}


def _unknown_key(tree, key: str, added=()) -> str | None:
    """Why ``key`` (a dotted path) is not a key of ``tree`` (a composed config as plain containers), or None if it
    is (or lies under a key in ``added``)."""
    if any(key == a or key.startswith(a + ".") for a in added):
        return None
    node, where = tree, []
    for part in key.split("."):
        parent = ".".join(where) or "the config"
        if isinstance(node, dict):
            if part not in node:
                known = ", ".join(str(k) for k in node if not (not where and k == "hydra")) or "none"
                hint = (f" ({parent} goes as it is to the cluster class: add a key with +{key}=...)"
                        if ".".join(where) in OPEN_MAPPINGS else "")
                return f"{'.'.join([*where, part])} is not a key of {parent}; known: {known}{hint}"
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return f"{'.'.join([*where, part])} is not an item of {parent} (a list of {len(node)})"
            node = node[int(part)]
        else:
            return f"{key} is not a key: {parent} is a value ({node!r}), not a group of keys"
        where.append(part)
    return None


def check_overrides(overrides, multirun: bool = False, config_dir: str | None = None,
                    config_name: str = "config") -> None:
    """Refuse an override of a key the config does not have, with or without ``+``, before Hydra runs anything.

    ``key=value`` must name a key of the composed config, composed with the overrides' config-group choices (in a
    multirun every combination of the swept ones, and of the groups an experiment's ``hydra.sweeper.params``
    sweeps; at most :data:`MAX_CHECKED_COMBINATIONS`). ``+key=value`` and ``++key=value`` may add a key only under
    :data:`OPEN_MAPPINGS` (``+cluster.options.queue=normal``); ``+key`` of a key that exists is refused too (set it
    without ``+``). Config-group overrides (``+experiment=<name>``, ``cluster=slurm``), deletions (``~key``) and
    ``hydra.*`` are Hydra's. What this cannot judge (a malformed override, an unknown group option, a glob sweep) is
    left to Hydra's own error.

    Parameters
    ----------
    overrides : list of str
        The command line's overrides, as typed (``workers.n=16``, ``+experiment=quick``, ``tau=1/n,2/n``).
    multirun : bool
        ``-m``: expand the config-group sweeps.
    config_dir : str, optional
        The primary config's directory (default :data:`CONF_DIR`).
    config_name : str
        The primary config (``config``; isparse-plan's is ``plan``, conf/config.yaml plus ``plan.*``).

    Raises
    ------
    ConfigError
        Naming the key, its parent and the parent's known keys: ``workers.N is not a key of workers; known: n,
        split, split_seed``.
    """
    import itertools

    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    config_dir = str(config_dir or CONF_DIR)
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(list(overrides))
    except Exception:   # noqa: BLE001 - Hydra reports a malformed override itself
        return
    groups = _config_groups(config_dir)
    group_ovs = [o for o in parsed if o.key_or_group in groups and not o.is_hydra_override()]
    key_ovs = [o for o in parsed if o.key_or_group not in groups and not o.is_hydra_override() and not o.is_delete()]
    if not key_ovs:
        return

    def combinations(ovs):
        lists = []
        for o in ovs:
            if not o.is_sweep_override():
                lists.append([o.input_line])
            elif multirun and o.is_discrete_sweep() and o.value_type.name != "GLOB_CHOICE_SWEEP":
                lists.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
            else:
                return None
        return [list(c) for c in itertools.islice(itertools.product(*lists), MAX_CHECKED_COMBINATIONS)]

    combos = combinations(group_ovs)
    if combos is None:
        return
    given = combos[0]
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3", job_name="isparse-run"):
            first = compose(config_name, overrides=combos[0], return_hydra_config=multirun)
            if multirun:   # an experiment's own sweep may choose other options of the groups not set here
                params = first.hydra.sweeper.get("params")
                params = OmegaConf.to_container(params, resolve=False) if params else {}
                cli = {o.key_or_group for o in group_ovs}
                more = combinations(parser.parse_overrides(
                    [f"{k}={v}" for k, v in params.items() if k.lstrip("+") in groups and k.lstrip("+") not in cli]))
                if more is None:
                    return
                combos = [a + b for a in combos for b in more][:MAX_CHECKED_COMBINATIONS]
            trees = [OmegaConf.to_container(first if c == given else compose(config_name, overrides=c), resolve=False)
                     for c in combos]
    except Exception:   # noqa: BLE001 - an unknown group option etc.: Hydra's own message names it
        return

    def where(i):
        return f" (with {' '.join(combos[i])})" if len(combos) > 1 and combos[i] else ""

    added = [o.key_or_group for o in key_ovs if o.is_add() or o.is_force_add()]
    for o in key_ovs:
        key = o.key_or_group
        adding = o.is_add() or o.is_force_add()
        if adding and any(key.startswith(m + ".") for m in OPEN_MAPPINGS):
            continue
        whys = [_unknown_key(t, key, () if adding else added) for t in trees]
        bad = [i for i, w in enumerate(whys) if w is not None]
        if bad:
            raise ConfigError(key, whys[bad[0]] + where(bad[0]))
        if o.is_add():
            raise ConfigError(key, f"{key} is already a key of the config: set it without +: {o.input_line[1:]}")


def _full_error() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


def _error_line(exc: BaseException) -> None:
    """The one line of a bad input, on stderr."""
    print(f"isparse-run: error: {exc}", file=sys.stderr, flush=True)


#: what the jobs of this process ended with: the exit status of a sweep whose jobs all failed on their config is 2
_FAILURES = {"config": 0, "other": 0}


class _ReportedConfigError(ConfigError, CompactHydraException):
    """A job's ConfigError in a sweep, its line already printed: the job fails as any other (the sweep goes on and
    records it), and Hydra shows the one line again, without a traceback, when the sweep ends."""


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _app(cfg: DictConfig):
    """The Hydra task: one job. A ConfigError is one line (exit status 2 at once in a single run; in a sweep the
    job fails and the sweep goes on); Ctrl-C or SIGTERM exit with status 128 + the signal's number."""
    from hydra.types import RunMode

    np.seterr(over="ignore")
    try:
        return run_job(cfg)
    except ConfigError as exc:
        _FAILURES["config"] += 1
        if _full_error():
            raise
        _error_line(exc)
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise _ReportedConfigError(exc.key, f"isparse-run: error: {exc}") from None
        sys.exit(2)
    except KeyboardInterrupt as exc:
        name = getattr(exc, "signal", None) or (str(exc).split()[-1] if str(exc).startswith("signal ") else "SIGINT")
        if not getattr(exc, "run_id", None):
            print(f"isparse-run: interrupted ({name}) before its MLflow run was made: nothing was logged",
                  file=sys.stderr, flush=True)
        sys.exit(128 + int(getattr(signal.Signals, name, signal.SIGINT)))
    except Exception:
        _FAILURES["other"] += 1
        raise


#: the command-line flags after which Hydra composes no run of conf/config.yaml (nothing to check)
_NO_RUN_FLAGS = ("help", "hydra_help", "info", "shell_completion", "experimental_rerun", "config_path",
                 "config_name", "config_dir")


def main() -> None:
    """The console script ``isparse-run``: Hydra's command line (``--help`` for the app's help).

    Unknown keys in the overrides (:func:`check_overrides`) and every ConfigError of a job are one line on stderr
    and exit status 2, before any work; with ``HYDRA_FULL_ERROR=1`` the traceback comes first.
    """
    from hydra._internal.utils import get_args_parser   # Hydra's own parser: the same reading of the command line

    args, _ = get_args_parser().parse_known_args()
    if not any(getattr(args, flag, None) for flag in _NO_RUN_FLAGS):
        try:
            check_overrides(args.overrides, multirun=bool(args.multirun))
        except ConfigError as exc:
            if _full_error():
                import traceback

                traceback.print_exc()
            _error_line(exc)
            sys.exit(2)
    try:
        _app()
    except SystemExit as exc:   # Hydra exits 1 after a failed sweep: 2 when every failed job failed on its config
        if exc.code == 1 and launcher_config_error():   # a bad hydra.launcher.* value (hydra/launcher=dask)
            sys.exit(2)
        if exc.code in (1, 2):   # a job (or the launcher) failed: the sweep's parent run ends FAILED, not KILLED,
            mark_sweep_failed(f"isparse-run exited with status {exc.code}")   # even when no child run could be made
        if exc.code == 1 and _FAILURES["config"] and not _FAILURES["other"]:
            sys.exit(2)
        raise
    except ConfigError as exc:  # HYDRA_FULL_ERROR=1: Hydra re-raised it
        exit_on_config_error(exc)


def exit_on_config_error(exc: ConfigError, error_line=None) -> None:
    """A ConfigError that Hydra re-raised (HYDRA_FULL_ERROR=1): its traceback, then its one line, exit status 2."""
    import traceback

    traceback.print_exc()
    (error_line or _error_line)(exc)
    sys.exit(2)


if __name__ == "__main__":
    main()
