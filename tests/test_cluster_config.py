"""cluster/ config checks that need no cluster: TLS keys and the recovery settings."""

import sys

import pytest

from isparse.errors import ConfigError
from pipeline.cluster import security_from


def _cluster(**kw):
    """The typed cluster options (pipeline.cluster.options) of ``kw``, checked as isparse-run's config is."""
    from pipeline.cluster import ClusterOptions

    return ClusterOptions.from_dict({"kind": "local", **kw}, "cluster")


def _job_cluster(compose, overrides):
    from pipeline.schema import load_job

    return load_job(compose(overrides)).cluster


def test_plain_tcp_needs_no_security():
    assert security_from(_cluster()) is None
    assert security_from(_cluster(address="tcp://127.0.0.1:8786")) is None


def test_tls_address_without_certificates_names_the_keys():
    with pytest.raises(ConfigError, match=r"'cluster.security.tls_ca_file', 'cluster.security.tls_client_cert' and "
                                          r"'cluster.security.tls_client_key' parameters must be set") as err:
        security_from(_cluster(address="tls://127.0.0.1:8786"))
    assert err.value.key == "cluster.security.tls_ca_file"


def test_partial_or_missing_certificate_files_are_refused(tmp_path):
    pem = tmp_path / "c.pem"
    pem.write_text("not read here")
    with pytest.raises(ConfigError, match="'cluster.security.tls_client_key' parameter must be set"):
        security_from(_cluster(address="tls://h:1", security={"tls_ca_file": str(pem), "tls_client_cert": str(pem)}))
    with pytest.raises(ConfigError, match="'cluster.security.tls_ca_file' parameter must be an existing PEM file"):
        security_from(_cluster(address="tls://h:1", security={"tls_ca_file": str(tmp_path / "nope.pem"),
                                                             "tls_client_cert": str(pem), "tls_client_key": str(pem)}))
    with pytest.raises(ConfigError, match=r"'cluster.address' parameter must be a tls://HOST:PORT address"):
        security_from(_cluster(address="tcp://h:1", security={"tls_ca_file": str(pem), "tls_client_cert": str(pem),
                                                             "tls_client_key": str(pem)}))
    with pytest.raises(ConfigError, match="'cluster.security.require_encryption' parameter must be false"):
        security_from(_cluster(security={"require_encryption": True}))


@pytest.mark.parametrize("key,value,allowed", [("cluster.snapshot_every", -1, r"\[0, inf\)"),
                                               ("cluster.worker_timeout", 0, r"\(0, inf\)")])
def test_recovery_settings_are_checked_before_work(compose, key, value, allowed):
    from pipeline.job import run_job

    cfg = compose([f"{key}={value}", "tracking.uri=sqlite:////nonexistent-dir/never.db"])
    with pytest.raises(ConfigError, match=rf"The '{key}' parameter must be in {allowed}; got {value}"):
        run_job(cfg)


@pytest.mark.parametrize("kind,package,extra", [("ssh", "asyncssh", "ssh"), ("slurm", "dask_jobqueue", "slurm"),
                                                ("kubernetes", "dask_kubernetes", "kubernetes")])
def test_a_cluster_kind_without_its_extra_names_the_extra(compose, monkeypatch, kind, package, extra):
    import importlib.util

    from pipeline.job import run_job

    monkeypatch.setitem(sys.modules, package, None)   # as if not installed (the test extra installs ssh and slurm's)
    assert importlib.util.find_spec(package) is None
    cfg = compose([f"cluster={kind}", "tracking.uri=sqlite:////nonexistent-dir/never.db"])
    with pytest.raises(ConfigError, match=rf"cluster={kind}.*not installed: pip install 'isparse\[{extra}\]'") as err:
        run_job(cfg)
    assert err.value.key == "cluster.kind"


def test_every_cluster_option_composes_with_the_shared_keys(compose):
    from pipeline.cluster import KINDS

    for kind in KINDS:
        cluster = compose([f"cluster={kind}"] + (["cluster.address=tcp://127.0.0.1:1"] if kind == "address" else [])).cluster
        assert cluster.kind == kind and cluster.snapshot_every == 50 and cluster.worker_timeout == 60
        assert set(cluster.security) == {"tls_ca_file", "tls_client_cert", "tls_client_key", "require_encryption"}
    with pytest.raises(ConfigError, match="'cluster.kind' parameter must be one of local, address, ssh, slurm, kubernetes"):
        _cluster(kind="yarn")


@pytest.mark.parametrize("overrides,text", [
    (["data.load=disk"], "The 'data.load' parameter must be one of client, on_worker; got 'disk'"),
    (["data.load=on_worker", "engine=inprocess"], "The 'data.load' parameter must be client for engine=inprocess"),
    (["data.load=on_worker", "data=quadratic"], "must be client for data=quadratic \\(no file to read on the workers\\)"),
])
def test_data_load_is_checked_before_work(compose, overrides, text):
    from pipeline.job import run_job

    cfg = compose([*overrides, "tracking.uri=sqlite:////nonexistent-dir/never.db"])
    with pytest.raises(ConfigError, match=text) as err:
        run_job(cfg)
    assert err.value.key == "data.load"


def test_slurm_off_a_submit_host_names_sbatch(compose, monkeypatch, tmp_path):
    """cluster=slurm where SLURM's commands are not on PATH: a ConfigError before any cluster is made."""
    pytest.importorskip("dask_jobqueue")
    from pipeline.cluster import dask_client

    monkeypatch.setenv("PATH", str(tmp_path))   # no sbatch there
    with pytest.raises(ConfigError, match=r"cluster=slurm\) needs SLURM's sbatch on PATH") as err:
        with dask_client(_job_cluster(compose, ["cluster=slurm"])):
            pass
    assert err.value.key == "cluster.kind"


def test_ssh_host_that_refuses_names_the_hosts(compose):
    """cluster=ssh to a port nothing listens on: a ConfigError naming cluster.hosts and SSHCluster's own error."""
    pytest.importorskip("asyncssh")
    import socket

    from pipeline.cluster import dask_client

    with socket.socket() as s:   # a port that was free a moment ago: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = _job_cluster(compose, ["cluster=ssh", f"+cluster.connect_options.port={port}",
                                 "+cluster.connect_options.known_hosts=null", "+cluster.scheduler_options.host=127.0.0.1"])
    with pytest.raises(ConfigError, match=r"'cluster.hosts' parameter must name hosts that accept SSH.*failed to "
                                          r"start: .*Connect call failed \('127.0.0.1', " + str(port)) as err:
        with dask_client(cfg):
            pass
    assert err.value.key == "cluster.hosts"


def test_the_run_s_workers_drop_the_heartbeat_failure_of_a_closing_cluster(dask_client):
    """The LocalCluster's preload (dask_setup) filters distributed's heartbeat-failure record, which a worker logged
    with a 25-line traceback when Ctrl-C closed the scheduler's comm before its own; any other record passes."""
    from pipeline.cluster.start import dask_setup

    def check():
        import logging

        dask_setup(None)   # not on the worker's main thread: its SIGINT handling is left as it is
        worker_log = logging.getLogger("distributed.worker")

        def passes(msg):
            return bool(worker_log.filter(worker_log.makeRecord(worker_log.name, logging.ERROR, __file__, 1, msg, (),
                                                                None)))
        return passes("Failed to communicate with scheduler during heartbeat."), passes("Compute Failed")

    assert set(dask_client.run(check).values()) == {(False, True)}
