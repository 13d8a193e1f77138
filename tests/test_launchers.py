"""Parallel sweeps (issue 14): hydra/launcher=joblib and our hydra/launcher=dask run a sweep's jobs in parallel
processes; every job gets its MLflow child run, FAILED with its error when it fails (a missing data file, a
diverging stepsize), the parent FAILED listing them, exit status non-zero; the good jobs' runs are complete.
Real Hydra multiruns of the isparse-run console script, a real sqlite store, real Dask clusters on 127.0.0.1."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

BIN = Path(sys.executable).parent
CLI = str(BIN / "isparse-run")
A1A = Path(os.environ["ISPARSE_DATA_DIR"]) / "a1a"

LAUNCHERS = {"basic": [], "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
             "dask": ["hydra/launcher=dask", "hydra.launcher.n_workers=2"]}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(tmp_path, *overrides, uri=None, timeout=600):
    """Run ``isparse-run -m`` in tmp_path; (exit status, output, runs of the store)."""
    uri = uri or f"sqlite:///{tmp_path}/out/mlflow.db"
    p = subprocess.run([CLI, "-m", "progress=false", f"paths.outputs={tmp_path}/out", f"tracking.uri={uri}",
                        *overrides], capture_output=True, text=True, cwd=tmp_path, timeout=timeout)
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    return p.returncode, p.stdout + p.stderr, runs, client


def _parent_and_children(runs):
    parents = [r for r in runs if r.data.tags.get("isparse.sweep") == "true"]
    assert len(parents) == 1
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return parent, {int(r.data.tags["sweep_job"]): r for r in children}


@pytest.mark.slow   # 6 jobs, each a process start or a Dask task: 30-60 s per launcher on 2 busy cores
@pytest.mark.needs_data
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_failing_and_diverging_jobs_among_good_ones(tmp_path, launcher):
    missing = tmp_path / "no_such_file"
    rc, out, runs, client = _sweep(tmp_path, *LAUNCHERS[launcher], "engine=inprocess", "data=libsvm",
                                   f"data.path={missing},{A1A}", "step.multiplier=0.5,1,1e6", "max_iter=50",
                                   "workers.n=4")
    assert rc != 0, out[-3000:]
    parent, jobs = _parent_and_children(runs)
    assert sorted(jobs) == list(range(6)), out[-3000:]          # every job has its run, the failing ones too
    expected_failed = {}
    for num, r in jobs.items():                                  # what each job should end as, from its overrides
        ovr = r.data.tags["overrides"]
        path = re.search(r"data.path=(\S+)", ovr).group(1)
        mult = float(re.search(r"step.multiplier=(\S+)", ovr).group(1))
        if path == str(missing):
            assert r.info.status == "FAILED" and "The 'data.path' parameter must be an existing file" in r.data.tags["error"]
            assert r.data.params["data.path"] == str(missing)   # its parameters are logged
            expected_failed[num] = "data.path"
        elif mult == 1e6:
            assert r.info.status == "FAILED" and r.data.tags["error"].startswith("DivergenceError"), r.data.tags
            expected_failed[num] = "DivergenceError"
        else:                                                    # a good job: complete
            assert r.info.status == "FINISHED", r.data.tags.get("error")
            assert r.data.metrics["summary/iterations"] == 50 and r.data.metrics["summary/final_dist_sq"] > 0
            assert len(client.get_metric_history(r.info.run_id, "dist_sq")) == 50 // 10 + 1
            files = {a.path for a in client.list_artifacts(r.info.run_id)}   # tracking.figure=auto: no figure
            assert "x_final.npy" in files and "convergence.png" not in files          # for a multirun's job
    assert len(expected_failed) == 4
    assert parent.info.status == "FAILED" and parent.data.tags["failed_jobs"] == "4"
    listed = Path(client.download_artifacts(parent.info.run_id, "failed_jobs.txt", str(tmp_path))).read_text()
    lines = listed.splitlines()
    assert [int(line.split("\t")[0][1:]) for line in lines] == sorted(expected_failed)
    for line in lines:
        num = int(line.split("\t")[0][1:])
        assert expected_failed[num] in line and jobs[num].info.run_id in line
    dirs = {r.data.tags.get("sweep_worker") for r in jobs.values()}
    if launcher == "dask":                                       # the Dask workers that ran them
        assert all(re.fullmatch(r"tcp://127\.0\.0\.1:\d+", d or "") for d in dirs) and 1 <= len(dirs) <= 2
    else:
        assert dirs == {None}


@pytest.mark.slow   # one isparse-run and a fresh store: 10 s on a quiet machine, 35 s on a busy one
def test_unreachable_launcher_address_is_one_line(tmp_path):
    """No scheduler at hydra.launcher.address: one line naming the key, no traceback, exit status 2 (as any bad
    input), and the sweep's parent run FAILED with that error."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    rc, out, runs, _ = _sweep(tmp_path, "hydra/launcher=dask", f"hydra.launcher.address={address}",
                              "hydra.launcher.timeout=1", "engine=inprocess", "workers.n=2,4", timeout=120)
    assert rc == 2, out
    lines = [line for line in out.splitlines() if "hydra.launcher.address" in line]
    assert len(lines) == 1 and address in lines[0] and lines[0].startswith("isparse-run: error: "), out
    assert "Traceback" not in out, out
    [parent] = runs
    assert parent.info.status == "FAILED" and "hydra.launcher.address" in parent.data.tags["error"]


def test_run_and_sweep_dirs_differ_within_one_second():
    """${isparse.uid:} (conf/config.yaml's hydra.run.dir and hydra.sweep.dir): a new value per composed config, the
    same for every job of a sweep (Hydra copies the resolver cache into each job's config, as for ${now:})."""
    from hydra.core.utils import setup_globals

    import pipeline  # noqa: F401 - registers the resolver

    setup_globals()   # ${now:}

    template = {"d": "${now:%H-%M-%S}-${isparse.uid:}", "e": "${isparse.uid:}"}
    a, b = OmegaConf.create(template), OmegaConf.create(template)
    assert re.fullmatch(r"\d\d-\d\d-\d\d-[0-9a-f]{6}", a.d) and a.d.endswith(a.e)
    assert a.e != b.e
    job = OmegaConf.create(template)
    OmegaConf.copy_cache(from_config=a, to_config=job)
    assert job.e == a.e
    hydra = OmegaConf.to_container(OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "config.yaml").hydra)
    assert hydra["run"]["dir"].endswith("-${isparse.uid:}") and hydra["sweep"]["dir"].endswith("-${isparse.uid:}")


@pytest.mark.slow   # a dask scheduler, two dask workers and an mlflow server, started and stopped: about a minute
@pytest.mark.needs_data
def test_dask_launched_sweep_on_a_running_scheduler_and_mlflow_server(tmp_path, monkeypatch):
    """The README's commands: `mlflow server` and `dask scheduler` / `dask worker` (with
    DASK_DISTRIBUTED__WORKER__DAEMON=False) on 127.0.0.1; a sweep with hydra.launcher.address and tracking.uri
    pointing at them, one job with engine=dask (it starts its own LocalCluster inside the Dask worker)."""
    from test_cluster_address import start_cli_cluster, stop_cli_cluster
    from test_tracking_outage import _server, _stop

    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    server = _server(tmp_path, port)
    procs = []
    try:
        monkeypatch.setenv("DASK_DISTRIBUTED__WORKER__DAEMON", "False")
        address, procs = start_cli_cluster()
        rc, out, runs, client = _sweep(tmp_path, "hydra/launcher=dask", f"hydra.launcher.address={address}",
                                       "engine=inprocess,dask", "cluster.n_workers=1", "data=a1a", "max_iter=50",
                                       "workers.n=2", "tracking.figure=always", uri=uri)   # figures drawn in threads
        assert rc == 0, out[-4000:]
        parent, jobs = _parent_and_children(runs)
        assert parent.info.status == "FINISHED" and sorted(jobs) == [0, 1]
        assert {r.data.tags["engine"] for r in jobs.values()} == {"inprocess", "dask"}
        for r in jobs.values():
            assert r.info.status == "FINISHED" and r.data.metrics["summary/iterations"] == 50
            assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", r.data.tags["sweep_worker"])
            assert "convergence.png" in {a.path for a in client.list_artifacts(r.info.run_id)}
        assert jobs[0].data.metrics["summary/final_dist_sq"] == pytest.approx(jobs[1].data.metrics["summary/final_dist_sq"], rel=1e-9)
    finally:
        stop_cli_cluster(procs)
        if server.poll() is None:
            _stop(server)


@pytest.mark.slow   # two sweeps of 2 short jobs and a fresh store each: 40-60 s
@pytest.mark.needs_data
def test_dask_launcher_runs_one_job_per_worker_thread(tmp_path):
    """One Dask worker process with 2 threads runs a sweep's 2 in-process jobs at once (their MLflow runs overlap in
    time, the same sweep_worker), each with its own config, job directory and main.log (the other job's records
    are not in it), and the same iterates, to the bit, as the basic launcher's run of the same jobs."""
    jobs = ["engine=inprocess", "data=a1a", "workers.n=2,4", "max_iter=1500", "tol=0", "report.auto=false"]
    out = {}
    for launcher, extra in (("dask", ["hydra/launcher=dask", "hydra.launcher.n_workers=1",
                                      "hydra.launcher.threads_per_worker=2"]), ("basic", [])):
        (tmp_path / launcher).mkdir()
        rc, text, runs, client = _sweep(tmp_path / launcher, *extra, *jobs, f"hydra.sweep.dir={tmp_path}/{launcher}/sw")
        assert rc == 0, text[-4000:]
        parent, children = _parent_and_children(runs)
        assert sorted(children) == [0, 1]
        out[launcher] = children
    threaded = out["dask"]
    (a, b) = (threaded[0].info, threaded[1].info)
    assert max(a.start_time, b.start_time) < min(a.end_time, b.end_time), (a, b)      # ran at once
    workers = {r.data.tags["sweep_worker"] for r in threaded.values()}
    assert len(workers) == 1 and re.fullmatch(r"tcp://127\.0\.0\.1:\d+", workers.pop())
    for num, r in threaded.items():
        job_dir = tmp_path / "dask" / "sw" / str(num)
        n = r.data.params["workers.n"]
        assert f"workers.n={n}" in (job_dir / ".hydra" / "overrides.yaml").read_text().replace("- ", "")
        own, other = r.info.run_id, threaded[1 - num].info.run_id
        text = (job_dir / "main.log").read_text()
        assert own in text and other not in text, text
        assert f"n{n}-" in text
        x_thread = np.load(job_dir / "x_final.npy")
        x_basic = np.load(tmp_path / "basic" / "sw" / str(num) / "x_final.npy")
        assert out["basic"][num].data.params["workers.n"] == n
        np.testing.assert_array_equal(x_thread, x_basic)


@pytest.mark.slow   # one isparse-run: 10-30 s
def test_dask_launcher_refuses_chdir(tmp_path):
    """hydra.job.chdir=true would move the working directory of every job in the worker process: one line, exit 2."""
    rc, out, _, _ = _sweep(tmp_path, "hydra/launcher=dask", "hydra.launcher.n_workers=1", "hydra.job.chdir=true",
                           "workers.n=2,4", timeout=120)
    assert rc == 2, out[-3000:]
    lines = [line for line in out.splitlines() if "hydra.job.chdir" in line]
    assert len(lines) == 1 and lines[0].startswith("isparse-run: error: ") and "Traceback" not in out, out


@pytest.mark.slow   # three jobs on a LocalCluster: about 40 s
def test_a_sweep_s_jobs_share_one_local_cluster(tmp_path):
    """Issue 48: the basic launcher runs a sweep's jobs in one process; the first job's LocalCluster serves them all
    (one scheduler address in the three runs' tags, one cluster start in the output) and is closed at the sweep's
    end; each job's iterates are those of the same job run alone on its own cluster."""
    status, out, runs, client = _sweep(tmp_path, "seed=0,1,2", "max_iter=3", "engine=dask", "cluster.n_workers=2")
    assert status == 0, out[-3000:]
    _, by_job = _parent_and_children(runs)
    children = list(by_job.values())
    assert len(children) == 3 and all(c.info.status == "FINISHED" for c in children)
    schedulers = {c.data.tags["dask_scheduler"] for c in children}
    assert len(schedulers) == 1, schedulers
    assert out.count("the LocalCluster an earlier job of this sweep started") == 2, out[-3000:]
    port = int(schedulers.pop().rsplit(":", 1)[1])
    with socket.socket() as s:   # closed at the sweep's end: nothing listens on its port
        assert s.connect_ex(("127.0.0.1", port)) != 0
    # job #1 (seed 1) alone, on its own cluster: the same final iterate
    single = subprocess.run([CLI, "progress=false", "seed=1", "max_iter=3", "engine=dask", "cluster.n_workers=2",
                             f"paths.outputs={tmp_path}/one", f"tracking.uri=sqlite:///{tmp_path}/one/mlflow.db"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    one = MlflowClient(f"sqlite:///{tmp_path}/one/mlflow.db")
    run1 = next(r for r in one.search_runs([e.experiment_id for e in one.search_experiments()]) if "algorithm" in r.data.tags)
    job1 = next(c for c in children if c.data.params["seed"] == "1")
    x_single = np.load(one.download_artifacts(run1.info.run_id, "x_final.npy", str(tmp_path / "a")))
    x_sweep = np.load(client.download_artifacts(job1.info.run_id, "x_final.npy", str(tmp_path / "b")))
    assert np.array_equal(x_single, x_sweep)
