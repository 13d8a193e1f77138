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

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.needs_data]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cli_cluster(tmp_path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    time.sleep(2)
    for _ in range(2):
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--no-dashboard",
                                       "--nthreads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
    from distributed import Client

    with Client(address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
    yield address
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait(timeout=30)


def _final_x(tmp_path, name, *overrides):
    out = tmp_path / name
    proc = subprocess.run([str(BIN / "isparse-run"), f"paths.outputs={out}", f"hydra.run.dir={out}/run", "progress=false",
                           "data=a1a", "workers.n=8", "problem.lam=0.05", "tol=1e-8", "max_iter=20000", *overrides],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    run = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])[0]
    assert run.info.status == "FINISHED" and run.data.metrics["converged"] == 1.0
    return np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out))), run


def test_existing_scheduler_from_the_command_line(tmp_path, cli_cluster):
    x_dask, run = _final_x(tmp_path, "dask", "cluster=address", f"cluster.address={cli_cluster}")
    x_local, _ = _final_x(tmp_path, "local", "engine=inprocess")
    np.testing.assert_allclose(x_dask, x_local, rtol=0, atol=1e-12)
    placement = MlflowClient(f"sqlite:///{tmp_path}/dask/mlflow.db").download_artifacts(
        run.info.run_id, "placement.json", str(tmp_path))
    hosts = json.load(open(placement))
    assert len(hosts) == 8 and len(set(hosts.values())) == 2   # 4 logical workers on each dask worker
