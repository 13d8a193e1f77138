"""Faults of what a run stands on, one test per class: its storage fills up, a helper process of its own is killed,
its cluster is lost. Each through isparse-run as a user runs it, checking the exit status, the one line, the run's
status in the MLflow store and the metrics it had logged."""

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from daemons import logged_step, wait_until

pytestmark = pytest.mark.slow   # three isparse-runs to a fault, one on a cluster of dask processes: about a minute

BIN = Path(sys.executable).parent
CLI = str(BIN / "isparse-run")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _only_run(db: Path):
    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    assert len(runs) == 1, runs
    return client, runs[0]


def test_the_mlflow_helper_killed_mid_run_loses_nothing(tmp_path):
    """kill -9 of the process that holds isparse-run's MLflow client (pipeline._store's helper): one warning line
    naming it, the job process logs the rest itself, the run ends FINISHED with every record and its summary."""
    proc = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", "progress=false", "engine=inprocess", "data=a1a",
                             "workers.n=4", "tol=0", "max_iter=20000", "tracking.log_every=20"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: logged_step(tmp_path / "mlflow.db") >= 2000, 120, "the run's first 2000 iterations")
        helpers = [p for p in psutil.Process(proc.pid).children() if "_store.py" in " ".join(p.cmdline())]
        assert len(helpers) == 1, [p.cmdline() for p in psutil.Process(proc.pid).children()]
        helpers[0].send_signal(signal.SIGKILL)
        killed_at = logged_step(tmp_path / "mlflow.db")
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert killed_at < 20000            # it was killed mid-run
    warned = [line for line in _lines(out) if "MLflow helper process" in line]
    assert len(warned) == 1 and f"(pid {helpers[0].pid}) was killed by signal 9" in warned[0], out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    client, run = _only_run(tmp_path / "mlflow.db")
    assert run.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "dist_sq"))
    assert steps == list(range(0, 20001, 20))   # every record, once: before, across and after the kill
    assert run.data.metrics["summary/iterations"] == 20000


def test_a_full_disk_mid_run_is_one_line_and_keeps_what_was_logged(tmp_path):
    """The outputs on an 8 MB tmpfs, the MLflow store elsewhere; once the run iterates, another process fills the
    tmpfs: the next checkpoint cannot be written. One line naming the file system's error, the file and the key
    (paths.outputs) and the resume command, exit status 2, the run FAILED with the reason, its metrics kept, no
    partial checkpoint left; the command continues the run once paths.outputs has room."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        if os.environ.get("ISPARSE_REQUIRE_DAEMONS") == "1":
            pytest.fail(f"mount -t tmpfs: {mounted.stderr.strip()}")
        pytest.skip(f"mount -t tmpfs: {mounted.stderr.strip()}")
    db = tmp_path / "store" / "mlflow.db"
    args = [f"tracking.uri=sqlite:///{db}", "progress=false", "engine=inprocess", "data=a1a", "workers.n=4",
            "tol=0", "tracking.log_every=10", "checkpoint.every=100"]
    try:
        proc = subprocess.Popen([CLI, f"paths.outputs={small}", *args, "max_iter=20000"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: logged_step(db, "checkpoint/iteration") >= 300, 120, "the run's third checkpoint")
            # what another program writing there does; unbuffered, so closing the file has nothing left to flush
            # (a buffered file's close raised ENOSPC again, once, in CI)
            with open(small / "filler", "wb", buffering=0) as fh:
                with pytest.raises(OSError, match="No space left"):
                    while True:
                        fh.write(b"\0" * 65536)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        left = sorted(str(p.relative_to(small)) for p in small.rglob("*.tmp"))
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    lines = _lines(err)
    assert proc.returncode == 2, err[-3000:]
    assert len(lines) == 1 and "No space left on device writing " in lines[0], err[-3000:]
    assert "paths.outputs" in lines[0] and "Traceback" not in err
    assert left == []                      # no half-written checkpoint left behind
    client, run = _only_run(db)
    assert run.info.status == "FAILED" and "No space left on device" in run.data.tags["error"]
    history = client.get_metric_history(run.info.run_id, "dist_sq")
    last = max(m.step for m in history)
    assert 300 <= last < 20000 and len(history) == last // 10 + 1   # what was logged is kept, every record
    ck = int(lines[0].split("continue the run from iteration ")[1].split()[0])
    assert ck >= 300 and ck % 100 == 0
    # the printed command, with paths.outputs on a file system with room: the run goes on from there to the end
    command = lines[0].split(" with: ")[1].split(" (paths.outputs")[0].split()
    assert command[:2] == ["isparse-run", f"resume={run.info.run_id}"]
    bigger = tmp_path / "bigger"
    rest = [a for a in command[2:] if not a.startswith("paths.outputs=")]
    resumed = subprocess.run([CLI, command[1], f"paths.outputs={bigger}", *rest], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert client.get_run(run.info.run_id).info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "dist_sq"))
    assert steps == list(range(0, 20001, 10))


def test_the_scheduler_lost_mid_run_is_one_line_and_keeps_what_was_logged(tmp_path):
    """A cluster of `dask scheduler` and `dask worker` processes on 127.0.0.1 (cluster=address), its scheduler
    killed mid-run: one line naming the scheduler's address, the key and the resume command from the last uploaded
    checkpoint, exit status 2, the run FAILED with the reason and its metrics kept."""
    from test_cluster_address import start_cli_cluster, stop_cli_cluster

    address, procs = start_cli_cluster()
    run = None
    try:
        run = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", "progress=false", "engine=dask",
                                "cluster=address", f"cluster.address={address}", "data=a1a", "workers.n=4", "tol=0",
                                "max_iter=1000000", "tracking.log_every=50", "checkpoint.every=500"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: logged_step(tmp_path / "mlflow.db", "checkpoint/iteration") >= 500, 180,
                   "the run's first checkpoint")
        procs[0].send_signal(signal.SIGKILL)          # the scheduler
        out, err = run.communicate(timeout=300)
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        stop_cli_cluster(procs)
    lines = _lines(err)
    assert run.returncode == 2
    assert len(lines) == 1, err[-3000:]
    assert f"The Dask scheduler {address} (cluster.address) stopped answering mid-run" in lines[0], lines[0]
    assert "Traceback" not in err, err[-3000:]
    client, logged = _only_run(tmp_path / "mlflow.db")
    assert logged.info.status == "FAILED" and address in logged.data.tags["error"]
    ck = int(lines[0].split("continue the run from iteration ")[1].split()[0])
    assert ck >= 500 and ck % 500 == 0
    assert f"with: isparse-run resume={logged.info.run_id} paths.outputs={tmp_path} engine=dask cluster=address " \
           f"cluster.address={address}" in lines[0]
    history = client.get_metric_history(logged.info.run_id, "dist_sq")
    assert len(history) >= 10 and sqlite3.connect(tmp_path / "mlflow.db").execute(
        "SELECT COUNT(*) FROM metrics WHERE key = 'dist_sq'").fetchone()[0] == len(history)
