"""isparse-run against a Dask cluster started from the command line (`dask scheduler`, two `dask worker`s on 127.0.0.1)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

import daemons

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.needs_data]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cli_cluster(scheduler_args=(), worker_args=(), scheme="tcp", client_kwargs=None, nanny=True):
    """Start `dask scheduler` and two `dask worker`s on 127.0.0.1; return (address, [scheduler, worker, worker] Popens)."""
    port = _free_port()
    address = f"{scheme}://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", "127.0.0.1:0", *scheduler_args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    time.sleep(2)
    for _ in range(2):
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--no-dashboard",
                                       "--nthreads", "1", *([] if nanny else ["--no-nanny"]), *worker_args],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    from distributed import Client

    with Client(address, timeout=30, **(client_kwargs or {})) as c:
        c.wait_for_workers(2, timeout=60)
    return address, procs


def stop_cli_cluster(procs):
    """SIGTERM the workers, then the scheduler; SIGKILL what has not ended 30 s later."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


@pytest.fixture
def cli_cluster():
    address, procs = start_cli_cluster()
    yield address
    stop_cli_cluster(procs)


def _cmd(out, *overrides):
    return [str(BIN / "isparse-run"), f"paths.outputs={out}", f"hydra.run.dir={out}/run", "progress=false",
            "data=a1a", "workers.n=8", "problem.lam=0.05", "tol=1e-8", "max_iter=20000", *overrides]


def _finished_run(out):
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    run = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])[0]
    assert run.info.status == "FINISHED" and run.data.metrics["summary/converged"] == 1.0
    return np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out))), run


def _final_x(tmp_path, name, *overrides):
    out = tmp_path / name
    proc = subprocess.run(_cmd(out, *overrides), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return _finished_run(out)


@pytest.mark.parametrize("load", ["client", "on_worker"])
def test_existing_scheduler_from_the_command_line(tmp_path, cli_cluster, load):
    """Shards sent from the client, or read by the CLI-started workers from the shared file: the in-process iterate."""
    x_dask, run = _final_x(tmp_path, "dask", "cluster=address", f"cluster.address={cli_cluster}", f"data.load={load}")
    x_local, _ = _final_x(tmp_path, "local", "engine=inprocess")
    np.testing.assert_allclose(x_dask, x_local, rtol=0, atol=1e-12)
    placement = MlflowClient(f"sqlite:///{tmp_path}/dask/mlflow.db").download_artifacts(
        run.info.run_id, "placement.json", str(tmp_path))
    hosts = json.load(open(placement))
    assert len(hosts) == 8 and len(set(hosts.values())) == 2   # 4 logical workers on each dask worker


def test_a_killed_dask_worker_does_not_end_the_run(tmp_path):
    """kill -9 one of two `dask worker` processes (no nanny to restart it) once the run is past iteration 300."""
    address, procs = start_cli_cluster(nanny=False)
    try:
        out = tmp_path / "killed"
        run = subprocess.Popen(_cmd(out, "cluster=address", f"cluster.address={address}", "cluster.snapshot_every=100",
                                    "cluster.worker_timeout=20", "tracking.log_every=10"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline, step = time.time() + 300, 0
        while time.time() < deadline and run.poll() is None and step < 300:
            time.sleep(0.2)
            step = daemons.logged_step(out / "mlflow.db")   # read-only: the run's own process makes the store
        assert run.poll() is None and step >= 300, f"the run ended or stalled before iteration 300 (at {step})"
        victim = procs[2]
        os.kill(victim.pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=600)
        assert victim.wait(timeout=10) == -signal.SIGKILL
        assert run.returncode == 0, output[-3000:]
        x_dask, finished = _finished_run(out)
    finally:
        stop_cli_cluster(procs)
    metrics, tags = finished.data.metrics, finished.data.tags
    assert metrics["worker_restarts"] >= 1 and "worker_restart_1" in tags
    event = json.loads(tags["worker_restart_1"])
    assert event["round"] >= 300 and len(event["workers"]) == 4   # one Dask worker's 4 logical workers moved
    assert metrics["dist_sq"] <= 1e-8 * float(finished.data.params["r0"])
    x_local, _ = _final_x(tmp_path, "local", "engine=inprocess")
    np.testing.assert_array_equal(x_dask, x_local)   # restored and replayed: the uninterrupted iterates


@pytest.mark.parametrize("answer", ["nothing", "garbage"])
def test_an_address_that_is_not_a_scheduler_is_one_line_within_the_timeout(tmp_path, answer):
    """A peer at cluster.address that accepts and never answers (it held the run, and its first SIGTERM, for good), or
    answers bytes that are not Dask's protocol (a MemoryError reading an exabyte frame): one line naming
    cluster.address, exit 2, within the timeout."""
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port, held = server.getsockname()[1], []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if answer == "garbage":
                conn.sendall(np.random.default_rng(0).bytes(4096))

    threading.Thread(target=serve, daemon=True).start()
    start = time.monotonic()
    try:
        proc = subprocess.run(_cmd(tmp_path / "out", "cluster=address", f"cluster.address=tcp://127.0.0.1:{port}",
                                   "cluster.timeout=3"), capture_output=True, text=True, timeout=120)
    finally:
        server.close()
        for c in held:
            c.close()
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("isparse-run: error: The 'cluster.address' parameter must name a reachable Dask")
    assert ("no answer within 3 s" if answer == "nothing" else "does not speak Dask's protocol") in lines[0]
    assert time.monotonic() - start < 60
