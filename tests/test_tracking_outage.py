"""A real `mlflow server` on 127.0.0.1 stopped mid-run and restarted: every metric point still arrives."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow   # starts an mlflow server twice; run by `pytest -m slow`


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(tmp_path, port):
    proc = subprocess.Popen([str(BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{tmp_path}/server.db",
                             "--artifacts-destination", str(tmp_path / "artifacts"), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("mlflow server did not start")


def _stop(proc):
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_metrics_survive_a_tracking_server_restart(tmp_path):
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    server = _server(tmp_path, port)
    try:
        client = MlflowClient(uri)
        client.create_experiment("isparse")
        run = subprocess.Popen([str(BIN / "isparse-run"), f"paths.outputs={tmp_path}", f"hydra.run.dir={tmp_path}/run",
                                "progress=false", f"tracking.uri={uri}", "max_iter=12000", "tol=1e-300",
                                "tracking.log_every=20", "checkpoint.every=2000"],
                               stdout=open(tmp_path / "run.log", "w"), stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 120
        while time.time() < deadline:   # iterations are being logged
            runs = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
            if runs and len(client.get_metric_history(runs[0].info.run_id, "dist_sq")) > 10:
                break
            time.sleep(0.5)
        _stop(server)
        time.sleep(6)                  # the run goes on without its tracking server
        assert run.poll() is None, "the run ended while the server was away"
        server = _server(tmp_path, port)
        run.wait(timeout=300)
        output = (tmp_path / "run.log").read_text()   # Hydra logs to stdout
        assert run.returncode == 0, output[-3000:]
        assert "unreachable" in output and "is back" in output
        client = MlflowClient(uri)
        r = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])[0]
        assert r.info.status == "FINISHED"
        steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, "dist_sq"))
        assert steps == list(range(0, 12001, 20))     # every point, none lost, none twice
        assert "convergence.png" in {a.path for a in client.list_artifacts(r.info.run_id)}
    finally:
        if server.poll() is None:
            _stop(server)


def test_points_unsent_at_the_end_are_written_and_import_back(tmp_path):
    from pipeline.tracking import RunLogger
    from pipeline.unsent import import_metrics

    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    server = _server(tmp_path, port)
    try:
        logger = RunLogger(uri, "isparse", "outage-at-end", spill_dir=tmp_path, end_grace=2.0)
        for t in range(5):
            logger.log_metrics({"dist_sq": 1.0 / (t + 1)}, step=t)
        assert logger.flush(force=True)
        _stop(server)
        for t in range(5, 12):
            logger.log_metrics({"dist_sq": 1.0 / (t + 1)}, step=t)
        assert logger.end("FINISHED") is False        # the server is still away: the points go to disk
        spill = tmp_path / "unsent_metrics.jsonl"
        assert spill.is_file() and len(spill.read_text().splitlines()) == 7 + 1   # 7 points and the status
        server = _server(tmp_path, port)
        assert import_metrics(spill, uri) == 7
        history = MlflowClient(uri).get_metric_history(logger.run_id, "dist_sq")
        assert sorted(m.step for m in history) == list(range(12))
        assert MlflowClient(uri).get_run(logger.run_id).info.status == "FINISHED"
        # the run's last line (pipeline.lifecycle.end_line) says the server holds it RUNNING, not "FINISHED in"
        import logging

        from pipeline.lifecycle import end_line
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("isparse").addHandler(handler)
        try:
            with end_line(None, {"run_id": logger.run_id, "uri": uri, "status": "FINISHED", "stored": False}, [],
                          False):
                pass
        finally:
            logging.getLogger("isparse").removeHandler(handler)
        (line,) = [r.getMessage() for r in records]
        assert f"MLflow run {logger.run_id} FINISHED here, but {uri} still holds it RUNNING" in line
        assert "FINISHED in" not in line
    finally:
        if server.poll() is None:
            _stop(server)
