"""isparse-run end to end: the real Hydra CLI, a real LocalCluster, a real sqlite MLflow store."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from isparse import ConfigError
from pipeline.job import run_job
from pipeline.tracking import experiment_id

CLI = str(Path(sys.executable).parent / "isparse-run")


def cli(tmp_path, *args, check=True):
    flags = [a for a in args if a.startswith("-")]
    overrides = [a for a in args if not a.startswith("-")]
    proc = subprocess.run([CLI, *flags, f"paths.outputs={tmp_path}", "progress=false", *overrides],
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"isparse-run failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def store(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("isparse")
    runs = client.search_runs([exp.experiment_id]) if exp else []
    return client, runs
@pytest.mark.slow


def test_default_run_on_local_dask_cluster(tmp_path):
    cli(tmp_path)
    client, runs = store(tmp_path)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    m, p = run.data.metrics, run.data.params
    for key in ("dist_sq", "subopt", "bound", "uplink_bytes", "downlink_bytes", "wall_s", "summary/predicted_iterations",
                "bound/log10_bound_rel", "bound/log10_measured_rel", "bound/log10_slack", "summary/iterations"):
        assert key in m, key
    for key in ("n", "m", "d", "N", "tau", "tau_m", "L", "mu", "gamma", "r0", "f_star", "workers.n", "engine"):
        assert key in p, key
    assert p["engine"] == "dask" and p["data.name"] == "breast_cancer" and p["algorithm.name"] == "isega"
    assert p["data.labels"] == "0 -> -1, 1 -> +1 (0 malignant, 1 benign)"   # how the labels were mapped to +-1
    assert m["summary/converged"] == 1.0
    assert m["dist_sq"] <= m["bound"]
    assert m["dist_sq"] <= float(p["tol"]) * float(p["r0"])
    # uplink: every iteration each of the n workers sends tau*m values (8 B), no ids (the master derives them)
    n, tau_m, iters = int(p["n"]), int(p["tau_m"]), int(m["summary/iterations"])
    assert m["uplink_bytes"] == iters * n * tau_m * 8
    assert p["uplink_convention"].startswith("values x 8 B (block ids recomputed")
    history = client.get_metric_history(run.info.run_id, "dist_sq")
    assert [h.step for h in history][:3] == [0, 10, 20]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "convergence.png", "placement.json"} <= artifacts
    assert run.data.tags["bound_source"] == "paper" and "bound_derivation" not in run.data.tags   # Theorem 3
    assert float(p["gamma_max"]) == pytest.approx(float(p["gamma_theory"]))   # Theorem 3's rule is its limit


@pytest.mark.slow   # a 4-job sweep through the console script: 25-47 s (the default run keeps under 10 min)
def test_multirun_makes_children_of_one_parent(tmp_path):
    cli(tmp_path, "-m", "algorithm=isega,ibcd", "workers.n=2,4", "max_iter=300")  # engine=dask: a LocalCluster per job
    client, runs = store(tmp_path)
    parents = [r for r in runs if r.data.tags.get("isparse.sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert {(c.data.params["algorithm.name"], c.data.params["workers.n"]) for c in children} == {
        ("isega", "2"), ("isega", "4"), ("ibcd", "2"), ("ibcd", "4")}
    assert all(r.info.status == "FINISHED" for r in runs)
    # IBCD on breast-cancer data violates Assumption 2: the bound carries the neighbourhood
    ibcd = [c for c in children if c.data.params["algorithm.name"] == "ibcd"]
    assert all(float(c.data.params["bound_neighbourhood"]) > 0 for c in ibcd)
    assert {c.data.tags["bound_source"] for c in ibcd} == {"derived"}          # the neighbourhood is ours
    assert all(c.data.tags["bound_derivation"].startswith("isparse/theory/theorem1.py") for c in ibcd)


@pytest.mark.slow   # a sweep with a failing job: 17 s (the launcher tests cover it for every launcher, also slow)
def test_failed_job_is_marked_and_the_sweep_goes_on(tmp_path):
    """A diverging job (huge stepsize) is FAILED with its reason and keeps its logged metrics; the other finishes."""
    proc = cli(tmp_path, "-m", "step.multiplier=1,400", "engine=inprocess", "max_iter=3000", check=False)
    assert proc.returncode != 0
    client, runs = store(tmp_path)
    by_status = {}
    for r in runs:
        by_status.setdefault(r.info.status, []).append(r)
    parent = [r for r in runs if r.data.tags.get("isparse.sweep")]
    assert len(parent) == 1 and parent[0].info.status == "FAILED" and parent[0].data.tags["failed_jobs"] == "1"
    failed = [r for r in by_status["FAILED"] if not r.data.tags.get("isparse.sweep")]
    assert len(failed) == 1 and "DivergenceError" in failed[0].data.tags["error"]
    assert failed[0].data.params["step.multiplier"] == "400"
    assert failed[0].data.tags["bound_applicable"] == "false" and failed[0].data.tags["bound_source"] == "none"
    assert float(failed[0].data.tags["diverged_gamma"]) == pytest.approx(400 * float(by_status["FINISHED"][0].data.params["gamma"]))
    assert "x_last_finite.npy" in {a.path for a in client.list_artifacts(failed[0].info.run_id)}
    assert len(client.get_metric_history(failed[0].info.run_id, "dist_sq")) >= 2   # what was logged is kept
    assert len(by_status["FINISHED"]) == 1


@pytest.mark.parametrize("overrides, key, text", [
    (["tau=0"], "tau", r"'tau' parameter must be in \(0, 1\]; got 0"),
    (["tau=1.5"], "tau", r"'tau' parameter must be in \(0, 1\]; got 1.5"),
    (["tau=0.01"], "tau", r"'tau' parameter must be in \[1/m = 0.03333, 1\]; got 0.01"),
    (["workers.n=0"], "workers.n", r"'workers.n' parameter must be in \[1, inf\); got 0"),
    (["workers.n=570"], "workers.n", r"'workers.n' parameter must be in \[1, N \(rows of the data set\) = 569\]; got 570"),
    (["blocks.size=0"], "blocks.size", r"'blocks.size' parameter must be in \[1, inf\); got 0"),
    (["blocks.size=31"], "blocks.size", r"'blocks.size' parameter must be in \[1, d = 30\]; got 31"),
    (["step.rule=fast"], "step.rule", r"'step.rule' parameter must be one of"),
    (["algorithm=ef21", "step.rule=bound"], "step.rule", "bound takes the largest stepsize of the bound that covers"),
    (["tau=0/n"], "tau", r"'tau' parameter written as '<c>/n' needs a number c > 0"),
    (["step.multiplier=0"], "step.multiplier", r"'step.multiplier' parameter must be in \(0, inf\)"),
    (["seed=-1"], "seed", r"'seed' parameter must be in \[0, inf\); got -1"),
    (["engine=dask", "cluster.n_workers=0"], "cluster.n_workers", r"'cluster.n_workers' parameter must be in \[1, inf\); got 0"),
    (["problem.loss=hinge"], "problem.loss", "'problem.loss' parameter must be one of logistic, squared; got 'hinge'"),
    (["algorithm=iasgd", "problem.penalty=nonconvex", "algorithm.rho=2"], "problem.penalty", "must be l2 for algorithm=iasgd"),
    (["algorithm=iasgd"], "algorithm.rho", "'algorithm.rho' parameter must be set"),
    (["checkpoint.every=-1"], "checkpoint.every", r"'checkpoint.every' parameter must be in \[0, inf\); got -1"),
    (["data=a1a", "data.empty_rows=maybe"], "data.empty_rows", "'data.empty_rows' parameter must be one of keep, drop, error"),
    (["resume=0123456789abcdef"], "resume", "'resume' parameter must be the id of a run .*; got '0123456789abcdef': "
                                            "Run with id=0123456789abcdef not found"),   # MLflow's words, not its class
    (["engine=dask", "cluster=address"], "cluster.address", r"'cluster.address' parameter must be set \(tcp://HOST:PORT or "
                                                            r"tls://HOST:PORT of a running scheduler, for cluster=address\)"),
    (["engine=spark"], "engine", "'engine' parameter must be one of dask, inprocess; got 'spark'"),
    (["data=a1a", "data.dir=/nonexistent"], "data.dir", "'data.dir' parameter must be an existing directory"),
    (["data=a1a", "data.dir=/"], "data.dir", "The data set 'a1a' was not found: no file '/a1a'"),
    (["data=libsvm", "data.path=/nonexistent/file.svm"], "data.path", "'data.path' parameter must be an existing file"),
    (["algorithm=ibcd", "problem.reg=l1"], "problem.reg", "'problem.reg' parameter must be none for algorithm=ibcd"),
])
def test_bad_input_fails_before_any_work(compose, tmp_path, overrides, key, text):
    engine = [] if any(o.startswith("engine=") for o in overrides) else ["engine=inprocess"]
    cfg = compose([f"paths.outputs={tmp_path}", *engine, *overrides])
    with pytest.raises(ConfigError, match=text) as err:
        run_job(cfg)
    assert err.value.key == key
    assert store(tmp_path)[1] == []   # no MLflow run was started


def test_a_compressed_downlink_at_step_rule_bound_logs_the_derived_bound(tmp_path):
    """messages.downlink=natural7 with step.rule=bound: the run's gamma is the derived EF21-P bound's gamma_max
    (recomputed here from the logged constants and natural7's alpha = 1/(1 + 1/8)) and it logs that bound,
    applicable, with a predicted count, and the measured distance under it."""
    import numpy as np
    from omegaconf import open_dict

    from isparse.theory.ef21p import ef21p_gamma_max

    from hydra import compose as compose_config
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose_config("config", return_hydra_config=True, overrides=[
            f"paths.outputs={tmp_path}", "engine=inprocess", "progress=false", "algorithm=gd",
            "messages.downlink=natural7", "step.rule=bound", "max_iter=30", "checkpoint.every=0"])
    with open_dict(cfg):   # what Hydra sets for a job it runs
        cfg.hydra.runtime.cwd, cfg.hydra.runtime.output_dir = str(tmp_path), str(tmp_path / "run")
    HydraConfig.instance().set_config(cfg)
    (tmp_path / "run").mkdir()
    run_job(cfg)
    (run,) = store(tmp_path)[1]
    p, t, m = run.data.params, run.data.tags, run.data.metrics
    assert t["bound_source"] == "derived" and t["bound_applicable"] == "true" and "EF21-P" in t["bound_theorem"]
    assert float(p["alpha_downlink"]) == pytest.approx(8 / 9)   # natural7 as a contractive compressor
    # gamma_max at L_f <= L (recomputed in tests/test_downlink.py from the problem's L_f) is at least this one, at L
    assert float(p["gamma"]) == float(p["gamma_max"]) >= ef21p_gamma_max(float(p["L"]), float(p["L"]), 4, 0.0, 8 / 9)
    assert float(p["gamma"]) < float(p["gamma_theory"]) / 5   # GD's own step is 10x above it
    assert np.isfinite(m["summary/predicted_iterations"]) and m["dist_sq"] <= m["bound"]


@pytest.mark.slow
def test_cli_rejects_unknown_algorithm_and_data_set(tmp_path):
    """An unknown option of a group: one line naming the group and its options, exit status 2."""
    from isparse.methods import METHODS

    proc = cli(tmp_path, "algorithm=adam", check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"isparse-run: error: The 'algorithm' parameter must be one of "
                                        f"{', '.join(sorted(METHODS))}; got 'adam' (no option 'algorithm/adam')."]
    proc = cli(tmp_path, "data=iris", check=False)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "The 'data' parameter must be one of" in proc.stderr and "mushrooms" in proc.stderr


def test_unreachable_tracking_server_fails_before_work(compose, tmp_path):
    cfg = compose([f"paths.outputs={tmp_path}", "tracking.uri=http://127.0.0.1:9"])
    with pytest.raises(ConfigError, match=r"'tracking.uri'.*'http://127.0.0.1:9' did not answer"):
        run_job(cfg)


def test_unreachable_scheduler_names_cluster_address(compose, tmp_path):
    cfg = compose([f"paths.outputs={tmp_path}", "cluster.address=tcp://127.0.0.1:9", "cluster.timeout=2"])
    with pytest.raises(ConfigError, match=r"'cluster.address'.*tcp://127.0.0.1:9"):
        run_job(cfg)
    assert store(tmp_path)[1] == []   # the cluster is reached before any MLflow run is made


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_marks_run_killed_and_leaves_no_worker_processes(tmp_path, sig):
    """Ctrl-C (SIGINT) or SIGTERM to isparse-run alone: the run ends KILLED, the LocalCluster's processes are gone."""
    import psutil

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    experiment_id(MlflowClient(uri), "isparse", uri)  # schema made before polling it (artifacts in tmp_path, as isparse-run's)
    proc = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", "progress=false", "algorithm=ibcd", "max_iter=1000000",
                             "tracking.log_every=50"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    children = []
    while time.time() < deadline:   # wait until iterations are being logged
        runs = store(tmp_path)[1]
        if runs and runs[0].data.metrics.get("dist_sq") is not None:
            break
        time.sleep(0.5)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 2                      # the Dask worker processes (and their nannies)
    time.sleep(1.0)
    proc.send_signal(sig)
    proc.wait(timeout=90)
    runs = store(tmp_path)[1]
    assert [r.info.status for r in runs] == ["KILLED"], proc.stderr.read()[-2000:]
    assert "KeyboardInterrupt" in runs[0].data.tags["error"]
    time.sleep(2.0)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_every_algorithm_and_data_set_has_a_config(compose):
    """Configs tested like code: every registered algorithm id is selectable as algorithm=<id>, every data source as
    data=<name>, and each composes to its declared defaults."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from isparse.data import NAMED_FILES
    from isparse.methods import METHODS
    from isparse.data.sources import SOURCES

    store = ConfigStore.instance()
    assert {n.removesuffix(".yaml") for n in store.list("algorithm")} == set(METHODS)
    assert {n.removesuffix(".yaml") for n in store.list("data")} == set(NAMED_FILES) | {
        "breast_cancer", "libsvm", "libsvm_files", "parquet_files", "quadratic"} == set(SOURCES)
    for name, cls in METHODS.items():
        assert OmegaConf.to_container(compose([f"algorithm={name}"]).algorithm) == cls.options(name=name).to_dict()
    for name, source in SOURCES.items():
        assert OmegaConf.to_container(compose([f"data={name}"]).data) == source.to_dict()


@pytest.mark.slow   # 20 s: with the other resume tests (tests/test_resume.py) in the slow run
def test_resuming_a_finished_run_is_refused_and_leaves_it_finished(tmp_path):
    cli(tmp_path, "engine=inprocess", "max_iter=50")
    client, runs = store(tmp_path)
    proc = cli(tmp_path, f"resume={runs[0].info.run_id}", check=False)
    assert proc.returncode != 0 and "is FINISHED: nothing to resume" in proc.stderr
    assert client.get_run(runs[0].info.run_id).info.status == "FINISHED"


@pytest.mark.slow
def test_stopped_tag_says_the_prediction_or_why_there_is_none(tmp_path):
    """A run that reaches max_iter first is tagged ``stopped`` with the bound's predicted iteration count, or, with no
    bound (a biased codec), the reason there is none (not 'nan')."""
    cli(tmp_path, "engine=inprocess", "max_iter=5")
    cli(tmp_path, "engine=inprocess", "max_iter=5", "messages.codec=bfloat16")
    _, runs = store(tmp_path)
    tags = {r.data.params["messages.codec"]: r.data.tags["stopped"] for r in runs}
    predicted = float(next(r for r in runs if r.data.params["messages.codec"] == "float64").data.metrics[
        "summary/predicted_iterations"])
    assert tags["float64"] == f"max_iter=5 reached before tol=1e-08 (predicted iterations: {predicted:g})"
    assert tags["bfloat16"] == ("max_iter=5 reached before tol=1e-08 (no iteration count is predicted: "
                                "messages.codec=bfloat16 is biased (contractive, no omega): no bound is derived with it)")
