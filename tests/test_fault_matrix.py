"""Issue 44: every fault answered from one place. Each cell runs a real ``isparse-run`` into a real sqlite MLflow
store, makes one fault for real at one stage (a full or read-only tmpfs, an immutable file, a port nobody listens on,
kill -9 of a real pid, a launcher given settings it refuses) and checks what the user sees: one line
``isparse-run: error: ...`` on stderr naming the stage or the key, exit status 2 (143 for SIGTERM), no traceback,
the MLflow run marked FAILED (or KILLED) with its reason and the metrics it had logged kept. docs/long-runs.md has the
table. Stage x fault cells already tested elsewhere: a read-only paths.outputs or store (test_exit_path), a full disk
at a checkpoint, a killed MLflow helper and a killed scheduler (test_faults)."""

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from daemons import logged_step, wait_until

CLI = str(Path(sys.executable).parent / "isparse-run")
FAST = ["engine=inprocess", "progress=false"]


def _run(tmp_path, *args, timeout=300, **kwargs):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=tmp_path, **kwargs)


def one_line(proc, *texts, status=2):
    """stderr is one line ``isparse-run: error: ...`` holding each of ``texts``; exit ``status``; no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == status, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("isparse-run: error: "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    for text in texts:
        assert text in lines[0], lines[0]
    return lines[0]


def runs(db: Path, experiment="isparse") -> list:
    """(run id, status, error tag, number of dist_sq values) of each run in the sqlite store ``db``."""
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT r.run_uuid, r.status, (SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND "
                           "t.key = 'error'), (SELECT COUNT(*) FROM metrics m WHERE m.run_uuid = r.run_uuid AND "
                           "m.key = 'dist_sq') FROM runs r").fetchall()


def failed_run(db: Path, logged: int = 1):
    (run,) = runs(db)
    assert run[1] == "FAILED" and run[2], run
    assert run[3] >= logged, run     # what was logged is kept
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    """A tmpfs mounted at ``path`` with ``options`` (root; skipped where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    """Write to ``directory`` until its file system is full."""
    with open(directory / "filler", "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()


@contextlib.contextmanager
def immutable(path: Path):
    """``path`` made an empty file that not even root may write (``chattr +i``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


# -- start-up and output directories --------------------------------------------------------------------------------
def test_startup_a_tracking_server_that_is_gone(tmp_path):
    """start-up x network: tracking.uri names a server on 127.0.0.1 that is not there (stopped): one line naming
    the key, before any work."""
    proc = _run(tmp_path, *FAST, f"paths.outputs={tmp_path}", f"tracking.uri=http://127.0.0.1:{free_port()}")
    one_line(proc, "tracking.uri")


@pytest.mark.slow
@pytest.mark.parametrize("full_one, says", [("paths.outputs", "No space left on device"), ("tracking.uri", "tracking")],
                         ids=["output directories", "tracking store"])
def test_a_full_disk_under_the_outputs_or_the_store(tmp_path, full_one, says):
    """output directories x no space (paths.outputs on a full tmpfs: one line, exit 2), and tracking store x no space
    (the sqlite store on a full tmpfs: one line naming the store's stage)."""
    with tmpfs(tmp_path / "full", "size=1m") as full:
        fill(full)
        outputs, store = (full, tmp_path) if full_one == "paths.outputs" else (tmp_path, full)
        proc = _run(tmp_path, *FAST, f"paths.outputs={outputs}", f"tracking.uri=sqlite:///{store}/mlflow.db")
    one_line(proc, says)


@pytest.mark.slow
def test_output_directories_where_a_file_may_not_be_made(tmp_path):
    """output directories x permission: the run's directory holds an immutable main.log (Hydra's log file)."""
    run_dir = tmp_path / "run"
    with immutable(run_dir / "main.log"):
        proc = _run(tmp_path, *FAST, f"paths.outputs={tmp_path}", f"hydra.run.dir={run_dir}", "max_iter=20")
    one_line(proc, "start-up: ", "Operation not permitted", "main.log")


# -- tracking store ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tracking_store_read_only(tmp_path):
    """tracking store x read-only: the sqlite store on a read-only tmpfs: one line naming tracking.uri."""
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        proc = _run(tmp_path, *FAST, f"paths.outputs={tmp_path}", f"tracking.uri=sqlite:///{ro}/mlflow.db")
    one_line(proc, "tracking.uri", "read-only file system")


# -- cache -------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fault, options, says", [("no space", "size=64k", "No space left on device"),
                                                  ("read-only", "ro,size=1m", "Read-only file system")])
def test_cache_that_cannot_be_written(tmp_path, fault, options, says):
    """cache x no space / read-only: paths.outputs/cache on a full or read-only tmpfs: one line, stage cache."""
    with tmpfs(tmp_path / "cache", options) as cache:
        if "ro" not in options:
            fill(cache)
        proc = _run(tmp_path, *FAST, f"paths.outputs={tmp_path}", "max_iter=20")
    one_line(proc, "cache: ", says)
    assert runs(tmp_path / "mlflow.db") == []          # before any run


# -- cluster start ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cluster_start_a_scheduler_that_is_gone(tmp_path):
    """cluster start x network: cluster.address names a scheduler on 127.0.0.1 that is not there."""
    proc = _run(tmp_path, "engine=dask", "progress=false", "cluster=address",
                f"cluster.address=tcp://127.0.0.1:{free_port()}", "cluster.timeout=3", f"paths.outputs={tmp_path}")
    one_line(proc, "cluster.address")
    assert runs(tmp_path / "mlflow.db") == []


# -- rounds ---------------------------------------------------------------------------------------------------------
def _children(pid: int, text: str) -> list:
    return [p for p in psutil.Process(pid).children(recursive=True) if text in " ".join(p.cmdline())]


@pytest.mark.slow
def test_rounds_a_lost_dask_worker_without_recovery(tmp_path):
    """rounds x a killed Dask process: kill -9 of a worker of the run's LocalCluster with cluster.snapshot_every=0
    (no recovery): one line, the run FAILED with the reason, its metrics kept (two tracebacks before)."""
    db = tmp_path / "mlflow.db"
    proc = subprocess.Popen([CLI, "engine=dask", "progress=false", "cluster.snapshot_every=0", "data=a1a",
                             "workers.n=4", "tol=0", "max_iter=1000000", "tracking.log_every=50",
                             f"paths.outputs={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        wait_until(lambda: logged_step(db) >= 500, 180, "the run's first 500 iterations")
        workers = _children(proc.pid, "spawn")
        assert workers, [p.cmdline() for p in psutil.Process(proc.pid).children(recursive=True)]
        workers[-1].send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc.stdout, proc.stderr = out, err
    one_line(proc, "rounds: ")
    failed_run(db, logged=10)


@pytest.mark.slow
def test_rounds_sigterm_of_the_run(tmp_path):
    """rounds x our process killed (SIGTERM): exit 143, the run KILLED with the reason, what was logged kept."""
    db = tmp_path / "mlflow.db"
    proc = subprocess.Popen([CLI, *FAST, "data=a1a", "workers.n=4", "tol=0", "max_iter=1000000",
                             "tracking.log_every=50", f"paths.outputs={tmp_path}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_until(lambda: logged_step(db) >= 500, 180, "the run's first 500 iterations")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143 and "Traceback" not in out + err, err[-3000:]
    (run,) = runs(db)
    assert run[1] == "KILLED" and "stopped at iteration" in (run[2] or "") and run[3] >= 10, run


# -- checkpoint, figure, finish: files of the run's directory that cannot be written ----------------------------------
PERMISSION_CELLS = [  # (stage, the file made immutable, the run's arguments)
    ("checkpoint", "checkpoint.pkl.tmp", ["checkpoint.every=10", "max_iter=40"]),
    ("figure", "convergence.png", ["max_iter=40"]),
    ("finish", "x_final.npy", ["max_iter=40"]),
]


@pytest.mark.parametrize("where, file, args", PERMISSION_CELLS, ids=[c[0] for c in PERMISSION_CELLS])
def test_a_file_of_the_run_that_may_not_be_written(tmp_path, where, file, args):
    """checkpoint / figure / finish x permission: the file the stage writes is immutable (chattr +i): one line
    naming the stage and the file, the run FAILED, every metric logged before kept."""
    run_dir = tmp_path / "run"
    with immutable(run_dir / file):
        proc = _run(tmp_path, *FAST, "checkpoint.every=0", *args, "tracking.log_every=10", "tol=0",
                    f"paths.outputs={tmp_path}", f"hydra.run.dir={run_dir}")
    one_line(proc, f"{where}: ", "Operation not permitted", file, "FAILED")
    run = failed_run(tmp_path / "mlflow.db", logged=2 if where == "checkpoint" else 5)
    assert "Operation not permitted" in run[2]


@pytest.mark.slow
def test_checkpoint_on_a_file_system_that_turns_read_only(tmp_path):
    """checkpoint x read-only: the run's directory bind-mounted read-only over itself mid-run: one line naming the
    file system's error and paths.outputs, with the resume command; the run FAILED, its metrics kept."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root (CI runs as root)")
    db, run_dir = tmp_path / "mlflow.db", tmp_path / "run"
    proc = subprocess.Popen([CLI, *FAST, "data=a1a", "workers.n=4", "tol=0", "max_iter=1000000",
                             "tracking.log_every=50", "checkpoint.every=200", f"paths.outputs={tmp_path}",
                             f"hydra.run.dir={run_dir}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    mounted = False
    try:
        wait_until(lambda: logged_step(db, "checkpoint/iteration") >= 200, 180, "the run's first checkpoint")
        subprocess.run(["mount", "--bind", str(run_dir), str(run_dir)], check=True)
        mounted = True
        subprocess.run(["mount", "-o", "remount,bind,ro", str(run_dir)], check=True)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        if mounted:
            subprocess.run(["umount", "-l", str(run_dir)], check=False)
    proc.stdout, proc.stderr = out, err
    one_line(proc, "Read-only file system writing ", "paths.outputs", "continue the run from iteration ")
    failed_run(db, logged=5)


# -- a sweep's launcher ---------------------------------------------------------------------------------------------
def _parent(db: Path):
    parents = [r for r in runs(db) if r[3] == 0 and r[2] is not None]
    assert parents and parents[0][1] == "FAILED", runs(db)
    return parents[0]


LAUNCHER_CELLS = [  # (launcher, its settings, what the line says)
    ("joblib", ["hydra.launcher.n_jobs=0"], "n_jobs == 0"),
    ("dask", ["hydra.launcher.host=10.255.255.1"], "Cannot assign requested address"),
]


@pytest.mark.slow
@pytest.mark.parametrize("launcher, settings, says", LAUNCHER_CELLS, ids=[c[0] for c in LAUNCHER_CELLS])
def test_launcher_refusing_its_settings(tmp_path, launcher, settings, says):
    """a sweep's launcher x refused settings (Hydra's joblib launcher, ours for Dask): one line naming the launcher
    stage, exit 2, the sweep's parent run FAILED with the line as its reason, a traceback file written."""
    proc = _run(tmp_path, "-m", *FAST, "max_iter=20", f"hydra/launcher={launcher}", *settings, "tol=1e-3,1e-4",
                f"paths.outputs={tmp_path}")
    line = one_line(proc, "launcher: ", says)
    trace = Path(line.split("(full traceback: ")[1].split(")")[0])
    assert "Traceback (most recent call last)" in trace.read_text()
    parent = _parent(tmp_path / "mlflow.db")
    assert says in parent[2]


@pytest.mark.slow
def test_launcher_a_killed_dask_worker_runs_its_job_again(tmp_path):
    """a sweep's launcher x a killed Dask process: kill -9 of the Dask launcher's worker running a job: Dask runs the
    job again on a worker its Nanny restarts, and the sweep finishes, without a traceback."""
    db = tmp_path / "mlflow.db"
    proc = subprocess.Popen([CLI, "-m", *FAST, "data=a1a", "workers.n=4", "tol=0", "tracking.log_every=50",
                             "hydra/launcher=dask", "hydra.launcher.n_workers=2", "max_iter=20000,200",
                             f"paths.outputs={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        wait_until(lambda: logged_step(db) >= 2000, 240, "the long job's first 2000 iterations")
        with contextlib.closing(sqlite3.connect(db)) as con:
            worker = con.execute("SELECT t.value FROM tags t JOIN metrics m ON m.run_uuid = t.run_uuid WHERE "
                                 "t.key = 'sweep_worker' AND m.key = 'dist_sq' AND m.step >= 2000").fetchone()[0]
        port = int(worker.rsplit(":", 1)[1])
        (victim,) = [p for p in psutil.Process(proc.pid).children(recursive=True)
                     if any(c.laddr.port == port for c in p.net_connections() if c.status == "LISTEN")]
        victim.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in out + err, (out + err)[-3000:]
    finished = [r for r in runs(db) if r[1] == "FINISHED" and r[3] > 0]
    assert len(finished) == 2, runs(db)      # the killed job, run again, and the other one
