"""TLS: a scheduler and two workers started with the dask CLI and self-signed certificates made here; isparse-run
with the certificates runs, a client without them (or with another CA's) is refused with an error naming the keys."""

import contextlib
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


@contextlib.contextmanager
def _tls_local_client(tmp_path):
    """A TLS LocalCluster of 2 worker processes with a certificate made here for every role, and its client:
    (client, the certificate's path)."""
    from distributed import Client, LocalCluster
    from distributed.security import Security

    cert, key = _self_signed(tmp_path, "streams")
    files = {f"tls_{role}_{part}": str(path) for role in ("client", "scheduler", "worker")
             for part, path in (("cert", cert), ("key", key))}
    security = Security(tls_ca_file=str(cert), require_encryption=True, **files)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", protocol="tls",
                      security=security, dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, security=security, direct_to_workers=True) as client:
        yield client, cert


def _isega_and_its_local_run():
    """ISEGA on breast_cancer over 4 workers, and its in-process run's iterates (60 rounds)."""
    from isparse import InProcessPool, load_dataset
    from specs import make

    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3)
    return s, s.run(InProcessPool(*s.pool_args()), max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)


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
        assert run.data.metrics["summary/iterations"] > 100 and run.data.tags["dask_scheduler"] == address
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


def test_the_rounds_travel_over_tls_streams_on_a_tls_cluster(tmp_path):
    """On a TLS LocalCluster each host's round stream is TLS (a tls:// address, an SSL socket with the cluster's
    certificates on both ends) and the iterates are the in-process engine's, to the bit."""
    import ssl

    import numpy as np
    from isparse.engines.dask import DaskPool

    s, local = _isega_and_its_local_run()
    with _tls_local_client(tmp_path) as (client, _):
        pool = DaskPool(client, *s.pool_args())
        hosts = list(pool._hosts)
        assert len(hosts) == 2 and all(h.address.startswith("tls://") for h in hosts)
        assert all(h.stream.startswith("tls://127.0.0.1:") for h in hosts)
        assert all(isinstance(h.comm.sock, ssl.SSLSocket) and h.comm.sock.version().startswith("TLS") for h in hosts)
        res = s.run(pool, max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
        pool.close()
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))


def test_strangers_without_the_certificate_are_refused_and_the_tls_run_is_unchanged(tmp_path):
    """On a TLS cluster a stranger's connection to a host's stream before the master's, without a client certificate
    (a TLS handshake with the cluster's CA but no certificate) or in plain TCP (the TLS handshake fails), is logged at
    the host and closed; the host keeps listening and the master's run has the unattacked iterates, to the bit."""
    import socket
    import ssl

    import numpy as np
    from distributed.comm.addressing import get_address_host_port

    from isparse.engines.dask import DaskPool

    attempts, cert = [], tmp_path / "streams.pem"

    class TLSAttackedPool(DaskPool):
        def _connect_streams(self, hosts, listened):
            for address, _ in listened:
                where = get_address_host_port(address)
                no_cert = ssl.create_default_context(cafile=str(cert))
                no_cert.check_hostname = False
                try:   # TLS 1.3: the server's refusal of the missing certificate arrives on the first read
                    with no_cert.wrap_socket(socket.create_connection(where, timeout=10)) as sock:
                        sock.sendall(b"x" * 64)
                        attempts.append(("no certificate", sock.recv(64)))
                except (ssl.SSLError, OSError) as exc:   # SSLError or its SSLEOFError, by when the host closed
                    attempts.append(("no certificate", "SSLError" if isinstance(exc, ssl.SSLError)
                                     else type(exc).__name__))
                with socket.create_connection(where, timeout=10) as sock:
                    sock.sendall(b"\x00" * 512)
                    try:
                        attempts.append(("plain tcp", sock.recv(64)))
                    except OSError as exc:
                        attempts.append(("plain tcp", type(exc).__name__))
            super()._connect_streams(hosts, listened)

    s, local = _isega_and_its_local_run()
    with _tls_local_client(tmp_path) as (client, _):
        pool = TLSAttackedPool(client, *s.pool_args())
        res = s.run(pool, max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
        hosts = [h.address for h in pool._hosts]
        pool.close()
        logs = client.get_worker_logs()
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))
    assert len(attempts) == 4 and all(got in (b"", "SSLError", "ConnectionResetError") for _, got in attempts), attempts
    for address in hosts:
        refused = [m for _, m in logs[address] if "refused a connection" in m]
        assert len(refused) >= 2, logs[address]
