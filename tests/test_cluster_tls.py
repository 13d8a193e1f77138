"""TLS: a scheduler and two workers started with the dask CLI and self-signed certificates made here; isparse-run
with the certificates runs, a client without them (or with another CA's) is refused with an error naming the keys."""

import shutil
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from test_cluster_address import _cmd, _finished_run, start_cli_cluster, stop_cli_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_data,
              pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make certificates")]


def _self_signed(directory, name):
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key: (cert path, key path)."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
                    "-out", str(cert), "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def _tls(cert, key):
    return [f"cluster.security.tls_ca_file={cert}", f"cluster.security.tls_client_cert={cert}",
            f"cluster.security.tls_client_key={key}"]


def _fails(out, *overrides):
    proc = subprocess.run(_cmd(out, "cluster=address", "cluster.timeout=5", *overrides), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    return proc.stdout + proc.stderr


def test_tls_cluster_accepts_the_certificates_and_refuses_other_clients(tmp_path):
    from distributed.security import Security

    cert, key = _self_signed(tmp_path, "cluster")
    other_cert, other_key = _self_signed(tmp_path, "intruder")
    tls_args = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    address, procs = start_cli_cluster(scheduler_args=[*tls_args, "--protocol", "tls"], worker_args=tls_args,
                                       scheme="tls", client_kwargs={"security": Security(
                                           tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key),
                                           require_encryption=True)})
    try:
        port = address.rsplit(":", 1)[1]
        # no certificates at all: refused before connecting, naming the keys to set
        err = _fails(tmp_path / "none", f"cluster.address={address}")
        assert "cluster.security.tls_ca_file" in err and "cluster.security.tls_client_cert" in err
        # plain tcp to the TLS port: the scheduler does not answer a client that does not speak TLS
        err = _fails(tmp_path / "plain", f"cluster.address=tcp://127.0.0.1:{port}")
        assert "The 'cluster.address' parameter must name a reachable Dask scheduler" in err
        assert "without TLS certificates" in err
        # certificates of another CA: the TLS handshake is refused
        err = _fails(tmp_path / "intruder", f"cluster.address={address}", *_tls(other_cert, other_key))
        assert "The 'cluster.address' parameter must name a reachable Dask scheduler" in err
        assert "cluster.security.tls_ca_file" in err
        # the right certificates: the run converges
        out = tmp_path / "ok"
        proc = subprocess.run(_cmd(out, "cluster=address", f"cluster.address={address}", *_tls(cert, key)),
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        _, run = _finished_run(out)
        assert run.data.metrics["iterations"] > 100 and run.data.tags["dask_scheduler"] == address
    finally:
        stop_cli_cluster(procs)
    for name in ("none", "plain", "intruder"):   # refused before any MLflow run was made
        db = tmp_path / name / "mlflow.db"
        if db.exists():
            client = MlflowClient(f"sqlite:///{db}")
            exp = client.get_experiment_by_name("isparse")
            assert exp is None or not client.search_runs([exp.experiment_id])


def test_a_local_cluster_runs_over_tls_with_the_configured_certificate(tmp_path):
    cert, key = _self_signed(tmp_path, "local")
    out = tmp_path / "local"
    proc = subprocess.run(_cmd(out, "cluster=local", *_tls(cert, key), "tol=1e-3"), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _, run = _finished_run(out)
    assert run.data.tags["dask_scheduler"].startswith("tls://127.0.0.1:")
