"""isparse-run cluster=slurm and cluster=ssh on real daemons started by the tests (tests/daemons.py): munged,
slurmctld and slurmd of a one-node SLURM cluster, and an sshd, all on 127.0.0.1. Each run converges on a1a with the
in-process iterates; a SLURM job cancelled (scancel) or an SSH-started worker killed mid-run is recovered as on a
LocalCluster; a Hydra sweep is launched onto the SLURM cluster's Dask workers.

Needs root, Debian's slurm-wlm, munge and openssh-server, and the extras ssh and slurm (.ci/run installs them all);
without them the tests are skipped, or fail when ISPARSE_REQUIRE_DAEMONS=1 (as .ci/run sets).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

import daemons

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.needs_data]


def _need(binaries, *modules):
    import importlib.util

    why = daemons.missing(binaries)
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if why is None and absent:
        why = f"not installed: {', '.join(absent)} (pip install -e '.[test]')"
    if why:
        if os.environ.get("ISPARSE_REQUIRE_DAEMONS") == "1":
            pytest.fail(why)
        pytest.skip(why)


#: the run of every test: a1a, n = 4 logical workers, 1796 iterations to dist_sq <= 1e-8 r_0 (8 s in process)
RUN = ("progress=false", "data=a1a", "workers.n=4", "problem.lam=0.05", "tol=1e-8", "max_iter=20000")


def _cmd(out, *overrides):
    return [str(BIN / "isparse-run"), f"paths.outputs={out}", f"hydra.run.dir={out}/run", *RUN, *overrides]


def _env(extra=None):
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            **(extra or {})}


def _finished_run(out):
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    run = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])[0]
    assert run.info.status == "FINISHED" and run.data.metrics["summary/converged"] == 1.0
    return np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out))), run


def _run(out, *overrides, env=None, timeout=600):
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(_cmd(out, *overrides), capture_output=True, text=True, timeout=timeout, env=_env(env),
                          cwd=out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _finished_run(out)


@pytest.fixture(scope="module")
def x_inprocess(tmp_path_factory):
    """The in-process run's final iterate (the reference of every cluster run)."""
    return _run(tmp_path_factory.mktemp("inprocess"), "engine=inprocess")[0]


def _step(out) -> int:
    return daemons.logged_step(out / "mlflow.db")


@contextlib.contextmanager
def _running(out, *overrides, env=None):
    """Start isparse-run in its own process group; on exit (a failed test too) kill what is left of it."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(_cmd(out, *overrides), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_env(env), cwd=out, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _wait_past(proc, out, step, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and _step(out) < step:
        time.sleep(0.2)
    got = _step(out)
    ended = proc.poll() is not None
    assert not ended and got >= step, (f"the run ended or stalled before iteration {step} (at {got})"
                                       + (f":\n{proc.stdout.read()[-4000:]}" if ended and proc.stdout else ""))


def _check_recovered(out, proc, x_inprocess, killed_at):
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]
    x, finished = _finished_run(out)
    metrics, tags = finished.data.metrics, finished.data.tags
    assert metrics["worker_restarts"] >= 1 and "worker_restart_1" in tags, tags
    event = json.loads(tags["worker_restart_1"])
    assert event["round"] >= killed_at and len(event["workers"]) == 2   # one Dask worker's 2 logical workers moved
    assert metrics["dist_sq"] <= 1e-8 * float(finished.data.params["r0"])
    np.testing.assert_array_equal(x, x_inprocess)   # restored and replayed: the uninterrupted iterates
    return output


def _gone(pids, timeout=30):
    """Assert the processes ``pids`` have ended within ``timeout`` s."""
    deadline = time.time() + timeout
    while time.time() < deadline and any(daemons.alive(p) for p in pids):
        time.sleep(0.2)
    left = {p: cmd for p, cmd in pids.items() if daemons.alive(p)}
    assert not left, f"processes left behind: {left}"


# -- SLURM ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm():
    """munged, slurmctld and slurmd on 127.0.0.1 (stopped by their pids at the end of the module)."""
    _need(daemons.SLURM_BINARIES, "dask_jobqueue")
    with daemons.daemon_dir("isparse-slurm-") as root, daemons.slurm_daemons(root) as s:
        yield s


def slurm_overrides(log_dir):
    """cluster=slurm with what a user changes: the jobs, each job's cores, memory and walltime, the partition
    (queue) and account, the network interface of the scheduler and workers (lo: 127.0.0.1), the jobs' logs (None:
    the default, the run's directory)."""
    return ["cluster=slurm", "cluster.jobs=2", "cluster.options.cores=1", "cluster.options.memory=2GB",
            "cluster.options.walltime=00:10:00", "+cluster.options.queue=debug", "+cluster.options.account=isparse",
            "+cluster.options.interface=lo"] + ([f"+cluster.options.log_directory={log_dir}"] if log_dir else [])


def _job_workers(s) -> dict[int, str]:
    """{pid: command line} of the Dask processes the SLURM jobs run (nannies and workers)."""
    return {p: c for p, c in daemons.job_processes(s["env"]["SLURM_CONF"]).items() if "python" in c}


def _same_iterates_on_two_hosts(proc, output, out, x_inprocess, tmp_path):
    """The run of ``out`` FINISHED with the in-process iterate (1e-12) and its 4 logical workers on 2 Dask workers."""
    assert proc.returncode == 0, output[-3000:]
    x, run = _finished_run(out)
    np.testing.assert_allclose(x, x_inprocess, rtol=0, atol=1e-12)
    hosts = json.load(open(MlflowClient(f"sqlite:///{out}/mlflow.db").download_artifacts(
        run.info.run_id, "placement.json", str(tmp_path))))
    assert len(hosts) == 4 and len(set(hosts.values())) == 2


def test_slurm_run_converges_to_the_inprocess_iterates(tmp_path, slurm, x_inprocess):
    out = tmp_path / "slurm"
    with _running(out, *slurm_overrides(None), env=slurm["env"]) as proc:
        _wait_past(proc, out, 1)   # iterating: the jobs' workers are up
        assert len(daemons.squeue(slurm["env"])) == 2
        workers = _job_workers(slurm)
        output, _ = proc.communicate(timeout=600)
    _same_iterates_on_two_hosts(proc, output, out, x_inprocess, tmp_path)   # both jobs' workers host 2 logical workers
    _gone(workers)                                                # the jobs' processes ended with the run
    assert daemons.squeue(slurm["env"]) == []                     # and the jobs left the queue
    # without cluster.options.log_directory the jobs' output goes under the run's directory, not the current one
    assert not list(out.glob("slurm-*.out")) and len(list((out / "run" / "slurm").glob("*.out"))) == 2


def test_slurm_job_cancelled_mid_run_is_recovered(tmp_path, slurm, x_inprocess):
    out = tmp_path / "scancel"
    with _running(out, *slurm_overrides(tmp_path / "slurm-logs"), "cluster.snapshot_every=100",
                  "cluster.worker_timeout=20", "tracking.log_every=10", env=slurm["env"]) as proc:
        _wait_past(proc, out, 400)
        jobs = daemons.squeue(slurm["env"])
        assert len(jobs) == 2 and all(state == "RUNNING" for _, state in jobs), jobs
        workers = _job_workers(slurm)
        killed_at = _step(out)
        subprocess.run(["scancel", jobs[0][0]], env=slurm["env"], check=True, timeout=30)
        _check_recovered(out, proc, x_inprocess, killed_at)
    _gone(workers)
    assert daemons.squeue(slurm["env"]) == []


def test_slurm_job_refused_by_the_controller_is_a_config_error(tmp_path, slurm):
    """A partition the cluster does not have: sbatch --test-only's refusal, before any job is queued."""
    out = tmp_path / "refused"
    out.mkdir()
    overrides = [o for o in slurm_overrides(tmp_path / "slurm-logs") if "queue" not in o]
    proc = subprocess.run(_cmd(out, *overrides, "+cluster.options.queue=gpu"), capture_output=True, text=True,
                          timeout=300, env=_env(slurm["env"]), cwd=out)
    assert proc.returncode != 0
    assert ("isparse-run: error: The 'cluster.options' parameters must give a job SLURM accepts" in proc.stderr
            and "invalid partition specified: gpu" in proc.stderr), proc.stderr[-3000:]
    assert daemons.squeue(slurm["env"]) == []


@pytest.fixture
def slurm_scheduler(slurm, tmp_path):
    """A dask_jobqueue.SLURMCluster of 2 jobs (one 1-thread worker each) on the test's SLURM; yields
    (scheduler address, {worker address: name}); the jobs are cancelled at the end."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = slurm["env"]["SLURM_CONF"]   # dask-jobqueue's sbatch/scancel read it
    try:
        with SLURMCluster(cores=1, memory="2GB", processes=1, queue="debug", walltime="00:10:00", interface="lo",
                          log_directory=str(tmp_path / "slurm-logs"),
                          scheduler_options={"dashboard_address": "127.0.0.1:0"},
                          worker_extra_args=["--dashboard-address", "127.0.0.1:0"],
                          job_script_prologue=[f"export PYTHONPATH={_env()['PYTHONPATH']}"]) as cluster:
            cluster.scale(jobs=2)
            with Client(cluster) as client:
                client.wait_for_workers(2, timeout=120)
                workers = {a: str(w.get("name")) for a, w in client.scheduler_info()["workers"].items()}
                yield cluster.scheduler_address, workers
        daemons.wait_until(lambda: daemons.squeue(slurm["env"]) == [], 60, "the SLURMCluster's jobs cancelled")
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


def _importable(name: str) -> bool:
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _importable("hydra_plugins.isparse_dask_launcher"),
                    reason="hydra/launcher=dask (hydra_plugins.isparse_dask_launcher) cannot be imported")
def test_dask_launched_sweep_on_the_slurm_cluster(tmp_path, slurm_scheduler):
    """isparse-run -m hydra/launcher=dask onto the SLURM jobs' workers: both jobs FINISHED, each tagged with the
    Dask worker that ran it."""
    address, workers = slurm_scheduler
    out = tmp_path / "sweep"
    out.mkdir()
    proc = subprocess.run([str(BIN / "isparse-run"), "-m", "hydra/launcher=dask", f"hydra.launcher.address={address}",
                           "algorithm=isega,ibcd", "engine=inprocess", f"paths.outputs={out}",
                           f"hydra.sweep.dir={out}/sweep", *RUN[:-1], "max_iter=300"], capture_output=True, text=True, timeout=600,
                          env=_env(), cwd=out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.params.get("algorithm.name", r.data.params.get("algorithm")) for r in children) == \
        ["ibcd", "isega"], [r.data.params for r in children]
    assert all(r.info.status == "FINISHED" for r in children)
    for r in children:
        assert r.data.tags.get("sweep_worker") in {*workers, *workers.values()}, (r.data.tags, workers)


# -- SSH -----------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sshd():
    """An sshd on 127.0.0.1 (key-only root login, keys of the test's making; stopped by its pid at the end).
    The sessions get this checkout on PYTHONPATH (on a real host: the package installed there)."""
    _need(daemons.SSH_BINARIES, "asyncssh")
    with daemons.daemon_dir("isparse-sshd-") as root, \
            daemons.sshd_daemon(root, {"PYTHONPATH": _env()["PYTHONPATH"],
                                       "ISPARSE_DATA_DIR": os.environ["ISPARSE_DATA_DIR"]}) as s:
        yield s
        assert not daemons.descendants(s["pid"]), "SSH sessions left behind"


def ssh_overrides(s):
    """cluster=ssh with what a user changes: the hosts (the first runs the scheduler), asyncssh's connect options
    (port, client key, known_hosts), the network interface of the scheduler and workers, the remote python."""
    return ["cluster=ssh", "cluster.hosts=[127.0.0.1,127.0.0.1,127.0.0.1]", f"+cluster.connect_options.port={s['port']}",
            f"+cluster.connect_options.client_keys=[{s['client_key']}]", "+cluster.connect_options.known_hosts=null",
            "+cluster.worker_options.interface=lo", "+cluster.scheduler_options.interface=lo",
            f"cluster.remote_python={sys.executable}"]


def _ssh_processes(s) -> dict[int, str]:
    """{pid: command line} of the processes the SSH sessions run (scheduler, nannies, workers)."""
    return {p: c for p, c in daemons.descendants(s["pid"]).items() if "python" in c}


def _ssh_workers(s) -> dict[int, str]:
    """The Dask worker processes (spawned by a nanny) among :func:`_ssh_processes`."""
    return {p: c for p, c in _ssh_processes(s).items() if "multiprocessing.spawn" in c}


def test_ssh_run_converges_to_the_inprocess_iterates(tmp_path, sshd, x_inprocess):
    out = tmp_path / "ssh"
    with _running(out, *ssh_overrides(sshd)) as proc:
        _wait_past(proc, out, 1)
        assert len(_ssh_workers(sshd)) == 2
        started = _ssh_processes(sshd)
        output, _ = proc.communicate(timeout=600)
    _same_iterates_on_two_hosts(proc, output, out, x_inprocess, tmp_path)
    _gone(started)   # scheduler, nannies and workers ended with the run


def test_ssh_worker_killed_mid_run_is_recovered(tmp_path, sshd, x_inprocess):
    out = tmp_path / "sshkill"
    with _running(out, *ssh_overrides(sshd), "cluster.snapshot_every=100", "cluster.worker_timeout=20",
                  "tracking.log_every=10") as proc:
        _wait_past(proc, out, 400)
        started = _ssh_processes(sshd)
        victim = min(_ssh_workers(sshd))
        killed_at = _step(out)
        os.kill(victim, signal.SIGKILL)
        _check_recovered(out, proc, x_inprocess, killed_at)
    _gone({**started, **_ssh_processes(sshd)})
