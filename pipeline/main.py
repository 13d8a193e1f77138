"""``isparse-run``: the Hydra entry point. Builds the run from the config, runs it, logs it to MLflow.

It always closes what it opened: the MLflow run ends FINISHED, or FAILED with the reason in the
tag ``error`` (then the exception is re-raised, so a multirun records the failure and goes on),
and the Dask cluster it started is closed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import pickle
import signal
import threading
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from isparse import build, check_static, load_dataset
from isparse.engines import DivergenceError, InProcessPool
from isparse.problems import QuadraticProblem
from isparse.errors import ConfigError, check_choice, check_range

from .cluster import check_cluster, dask_client
from .plots import convergence_figure, plt
from .tracking import PARENT_ENV, RunLogger, check_reachable, flatten, resolved_config, ui_link

log = logging.getLogger("isparse")
ENGINES = ("dask", "inprocess")
LOADS = ("client", "on_worker")


def run_job(cfg: DictConfig) -> dict:
    """Run one job described by ``cfg``; returns its summary (final metrics)."""
    checkpoint = None
    _anchor_paths(cfg)
    if cfg.get("resume"):   # the stored config and last checkpoint of an earlier run
        cfg, checkpoint = _load_resume(cfg)
    # 1. checks that need no data, and the tracking store, before any work
    _check_inputs(cfg)
    check_choice("engine", cfg.engine, ENGINES)
    if cfg.engine == "dask" and OmegaConf.is_missing(cfg.cluster, "address"):
        raise ConfigError("cluster.address", "The 'cluster.address' parameter must be set for cluster=address "
                                             "(tcp://HOST:PORT of a running scheduler); got nothing.")
    if cfg.engine == "dask":
        check_cluster(cfg.cluster)   # kind and its extra, recovery settings, TLS files
    if check_choice("data.load", cfg.data.get("load", "client"), LOADS) == "on_worker" and (
            cfg.engine != "dask" or cfg.data.name == "quadratic"):
        raise ConfigError("data.load", f"The 'data.load' parameter must be client for engine={cfg.engine} and "
                                       f"data={cfg.data.name} (on_worker needs engine=dask and a data file); got 'on_worker'.")
    check_range("checkpoint.every", cfg.checkpoint.every, 0, None, integer=True)
    _send_ids(cfg)
    uri = str(cfg.tracking.uri)
    check_reachable(uri)

    # 2. data, problem, x*, method, bound (validates n <= N, block size <= d, tau in [1/m, 1])
    common = dict(algorithm=cfg.algorithm.name, n=cfg.workers.n, block_size=cfg.blocks.size, tau=cfg.tau,
                  step_multiplier=cfg.step.multiplier, step_rule=cfg.step.get("rule", "theory"), seed=cfg.seed,
                  reg=cfg.problem.reg,
                  reg_strength=cfg.problem.reg_strength, box=tuple(cfg.problem.box), reg_l2=cfg.problem.reg_l2,
                  options={k: v for k, v in cfg.algorithm.items() if k != "name"},
                  send_ids=_send_ids(cfg))
    if cfg.data.name == "quadratic":
        problem = QuadraticProblem(d=cfg.data.d, o=cfg.data.o, n=cfg.workers.n, seed=cfg.data.seed)
        setup = build(problem=problem, **common)
        data_name = "quadratic"
    else:
        data = _load_data(**_dataset_args(cfg))
        setup = build(data=data, lam=cfg.problem.lam, split=cfg.workers.split, split_seed=cfg.workers.split_seed,
                      loss=cfg.problem.loss, penalty=cfg.problem.penalty,
                      cache_dir=Path(cfg.paths.outputs) / "cache" if cfg.get("cache", True) else None, **common)
        data_name = data.name
    method, bound = setup.method, setup.bound
    run_name = cfg.tracking.run_name or default_run_name(cfg, method, data_name)
    overrides = " ".join(HydraConfig.get().overrides.task) if HydraConfig.initialized() else ""

    # 3. the cluster first (an unreachable scheduler fails before any MLflow run), then the MLflow run
    with _stop_on_signals() as stop, _pool(cfg, setup) as pool:
        if checkpoint is not None:
            logger = RunLogger.attach(uri, str(cfg.resume), spill_dir=HydraConfig.get().runtime.output_dir)
            logger.set_tags({"resumed_from_iteration": checkpoint.t})
            with contextlib.suppress(Exception):   # the interruption's reason no longer describes the run
                logger.client.delete_tag(logger.run_id, "error")
        else:
            logger = RunLogger(uri, str(cfg.tracking.experiment), run_name, parent_run_id=os.environ.get(PARENT_ENV),
                               tags={"algorithm": method.name, "data": data_name, "engine": cfg.engine,
                                     "bound_theorem": bound.theorem, "bound_applicable": str(bound.applicable).lower(),
                                     "bound_quantity": bound.quantity, "bound_source": bound.source,
                                     **({"bound_derivation": bound.derivation} if bound.derivation else {}),
                                     "overrides": overrides},
                               spill_dir=HydraConfig.get().runtime.output_dir)
        log.info("MLflow run %s (%s) in %s; in the MLflow UI: %s", logger.run_id, run_name, uri,
                 ui_link(uri, logger.experiment_id, logger.run_id))
        status = "FAILED"
        try:
            summary = _run_and_log(cfg, setup, pool, logger, run_name, stop, checkpoint)
            status = "FINISHED"
            return summary
        except BaseException as exc:
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
    if checkpoint is None:   # a resumed run has these already
        logger.log_params({**flatten(resolved_config(cfg)), **derived, "data.source": _source(cfg, setup),
                           "tau_setting": cfg.tau,
                           "uplink_convention": ("values x 8 B + block ids x 4 B (none when dense)" if method.sends_ids
                                                 else "values x 8 B (all blocks: no ids)" if method.tau_m == method.blocks.m
                                                 else "values x 8 B (block ids recomputed by the master)")})
        logger.log_text(OmegaConf.to_yaml(resolved_config(cfg)), "config.yaml")
        logger.set_tags({"predicted_iterations": predicted})
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
    try:
        logger.log_figure(fig, "convergence.png")
        fig.savefig(Path(HydraConfig.get().runtime.output_dir) / "convergence.png", dpi=100)
    finally:
        plt.close(fig)   # pyplot keeps every figure until closed: a sweep's jobs run in one process
    if not result.converged:
        note = f"max_iter={cfg.max_iter} reached before tol={cfg.tol} (predicted iterations: {predicted})"
        logger.set_tags({"stopped": note})
        log.warning("%s: %s; dist_sq/r0 = %.3e", run_name, note, last["dist_sq"] / max(derived["r0"], 1e-300))
    log.info("%s: %d iterations, dist_sq %.3e (bound %.3e), converged=%s, uplink %d B, %.2f s",
             run_name, result.iterations, last["dist_sq"], last["bound"], result.converged,
             last["uplink_bytes"], last["wall_s"])
    return summary


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


@contextlib.contextmanager
def _stop_on_signals():
    """SIGINT and SIGTERM end the run as KILLED: the handler raises KeyboardInterrupt and also sets a flag the
    master loop checks every iteration (so an interrupt swallowed inside a blocking Dask call still stops it)."""
    flag = {"stop": False}

    def handler(signum, frame):
        flag["stop"] = True
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    installed = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            installed[sig] = signal.signal(sig, handler)
    try:
        yield lambda: flag["stop"]
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)


#: the keys each kind of data config has (anything else under data.* would be ignored: refused)
_DATA_KEYS = {"named": {"name", "dir", "lam", "empty_rows", "n_features", "load"},
              "libsvm": {"name", "path", "n_features", "lam", "empty_rows", "load"},
              "breast_cancer": {"name", "lam", "load"},
              "quadratic": {"name", "d", "o", "seed", "lam", "load"}}


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


def _load_data(name, data_dir, path, empty_rows, n_features):
    """load_dataset, kept for the later jobs of a sweep: Hydra's basic launcher runs every job of a
    multirun in this process, so each data set is read and checked once (keyed by the arguments and
    the file's size and modification time; two entries at most)."""
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
    data = load_dataset(name, data_dir=data_dir, path=path, empty_rows=empty_rows, n_features=n_features)
    while len(_DATA_CACHE) >= 2:
        _DATA_CACHE.pop(next(iter(_DATA_CACHE)))
    _DATA_CACHE[key] = data
    return data


@contextlib.contextmanager
def _pool(cfg, setup):
    args = setup.pool_args()
    if cfg.engine == "inprocess":
        yield InProcessPool(*args)
        return
    from isparse.engines.dask import DaskPool

    with dask_client(cfg.cluster) as client:
        print(f"Dask dashboard: {client.dashboard_link}", flush=True)
        source = None
        if cfg.data.get("load", "client") == "on_worker":   # each Dask worker reads its rows of the shared file
            from isparse.problems.source import ShardSource

            source = ShardSource.of(_dataset_args(cfg), setup.rows, setup.shards)
        pool = DaskPool(client, *args, snapshot_every=int(cfg.cluster.snapshot_every),
                        worker_timeout=float(cfg.cluster.worker_timeout),
                        measure_every=int(cfg.cluster.get("measure_every", 50)), source=source)
        try:
            yield pool
        finally:
            pool.close()


#: conf/ at the root of the checkout (the package is installed editable from it: pip install -e .)
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig):
    np.seterr(over="ignore")
    return run_job(cfg)


if __name__ == "__main__":
    main()
