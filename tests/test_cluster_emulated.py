"""cluster=emulated (pipeline/cluster/emulated.py): H hosts on this machine, each a Dask worker process in its own
network namespace behind a veth pair shaped with tc tbf. The config checks need nothing; the rest makes real
namespaces (root, ip and tc: skipped with the reason otherwise) and is slow."""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from composing import check_command
from isparse.errors import ConfigError

BIN = Path(sys.executable).parent
CLI = str(BIN / "isparse-run")
ROOT = Path(__file__).resolve().parents[1]
RUN = ["progress=false", "checkpoint.every=0", "cluster=emulated"]


# -- the config checks (no namespace made) -------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, key, text", [
    (["cluster.link.up=10mb"], "cluster.link.up", "must be a tc rate: a positive number followed by kbit, mbit or "
                                                  "gbit (e.g. 10mbit, 2.5mbit, 1gbit); got '10mb'."),
    (["cluster.link.down=0mbit"], "cluster.link.down", "got '0mbit'"),
    (["cluster.link.up=0.5kbit"], "cluster.link.up", "must be a tc rate from 1kbit to 100gbit (a number followed by "
                                                     "kbit, mbit or gbit: 10mbit, 2.5mbit, 1gbit); got '0.5kbit'."),
    (["cluster.link.down=101gbit"], "cluster.link.down", "must be a tc rate from 1kbit to 100gbit"),
    (["cluster.link.up=[1mbit,5000gbit]"], "cluster.link.up", "got '5000gbit' at position 1"),
    (["cluster.link.up=[10mbit,fast]"], "cluster.link.up", "got 'fast' at position 1"),
    (["cluster.n_workers=0"], "cluster.n_workers", "must be in [1, inf); got 0."),
    (["cluster.n_workers=3", "cluster.link.down=[10mbit,20mbit]"], "cluster.link.down",
     "must be one rate or a list of cluster.n_workers = 3 rates (one per host); got 2."),
    (["cluster.subnet=8.8.0.0/16"], "cluster.subnet", "must be a private IPv4 network of prefix /23 or shorter"),
    (["cluster.subnet=10.77.0.0/24"], "cluster.subnet", "got '10.77.0.0/24'"),
    (["cluster.subnet=10.77.0.0/23", "cluster.n_workers=2"], "cluster.n_workers",
     "must be in [1, 1] for cluster.subnet=10.77.0.0/23 (one /24 per host); got 2."),
])
def test_bad_emulated_config_names_the_key(overrides, key, text):
    with pytest.raises(ConfigError) as err:
        check_command(["cluster=emulated", *overrides])
    assert err.value.key == key and f"The '{key}' parameter " in str(err.value) and text in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides, key, text", [
    (["engine=inprocess", "cluster=emulated", "cluster.link.up=10mbit"], "cluster.link.up",
     "is for engine=dask only (with engine=inprocess no link is emulated: it would be ignored); got '10mbit'."),
    (["engine=inprocess", "cluster=emulated", "cluster.link.down=100mbit"], "cluster.link.down",   # the default, given
     "got '100mbit'."),
    (["engine=inprocess", "cluster=emulated", "cluster.link={up:1mbit}"], "cluster.link.up", "got '1mbit'."),
    (["cluster=local", "+cluster.link.up=10mbit"], "cluster.link.up",
     "is for cluster=emulated only (the kind whose links are emulated): cluster=local has no emulated link and would "
     "ignore it; got '10mbit'."),
    (["cluster=address", "+cluster.link.down=1mbit"], "cluster.link.down", "cluster=address has no emulated link"),
])
def test_link_keys_refused_where_no_link_is_emulated(overrides, key, text):
    with pytest.raises(ConfigError) as err:
        check_command(overrides)
    assert err.value.key == key and f"The '{key}' parameter " in str(err.value) and text in str(err.value)
    assert "\n" not in str(err.value)


def test_emulated_with_inprocess_and_default_links_composes():
    """Nothing set on the link: nothing ignored (the rates are the defaults)."""
    (job,) = check_command(["engine=inprocess", "cluster=emulated"])
    assert (job.engine, job.cluster.kind) == ("inprocess", "emulated")


@pytest.mark.slow
def test_link_with_inprocess_on_the_command_line_is_one_line_and_status_2(tmp_path):
    proc = subprocess.run([CLI, f"paths.outputs={tmp_path}", "progress=false", "engine=inprocess", "cluster=emulated",
                           "cluster.link.up=10mbit"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == ("isparse-run: error: The 'cluster.link.up' parameter is for engine=dask only (with "
                        "engine=inprocess no link is emulated: it would be ignored); got '10mbit'.")


def test_emulated_config_composes_with_per_host_rates():
    (job,) = check_command(["cluster=emulated", "cluster.n_workers=3", "cluster.link.up=[1kbit,2.5MBIT,100gbit]",
                            "cluster.link.down=100mbit", "cluster.subnet=192.168.64.0/18"])
    c = job.cluster
    assert (c.kind, c.n_workers, c.link.up, c.link.down, c.subnet) == ("emulated", 3, ["1kbit", "2.5mbit", "100gbit"],
                                                                       "100mbit", "192.168.64.0/18")
    assert c.tags() == {"cluster": "emulated",
                        "cluster_emulated": "3 hosts, up [1kbit, 2.5mbit, 100gbit], down 100mbit, 192.168.64.0/18"}


def test_bad_rate_on_the_command_line_is_one_line_and_status_2(tmp_path):
    proc = subprocess.run([CLI, f"paths.outputs={tmp_path}", *RUN, "cluster.link.up=fast"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == ("isparse-run: error: The 'cluster.link.up' parameter must be a tc rate: a positive number "
                        "followed by kbit, mbit or gbit (e.g. 10mbit, 2.5mbit, 1gbit); got 'fast'.")


# -- real namespaces -----------------------------------------------------------------------------------------------
def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "cluster=emulated needs root (network namespaces, veth pairs, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"cluster=emulated needs {tool} on PATH"
    return None


needs_root = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def machine_state() -> dict:
    """What an emulated cluster changes on the machine: the network namespaces, the links, ip_forward."""
    def out(*args):
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout

    from pipeline.cluster.machine import STATE_DIR

    return {"netns": out("ip", "netns", "list"), "links": sorted(out("ip", "-br", "link").splitlines()),
            "ip_forward": Path("/proc/sys/net/ipv4/ip_forward").read_text(),
            "records": sorted(p.name for p in STATE_DIR.glob("*.json"))}


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _start(tmp_path, *overrides) -> subprocess.Popen:
    return subprocess.Popen([CLI, f"paths.outputs={tmp_path}", *RUN, *overrides], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=tmp_path, env=_env())


def _wait_iterating(tmp_path, proc, timeout=120.0):
    """Until the run has logged a few metrics (it is iterating on the emulated cluster). The store is read with
    sqlite3, read-only, until then: an MlflowClient opened while the run creates the store would run MLflow's
    migrations concurrently with the run's own (alembic's "expected to match one row ... 0 found")."""
    import sqlite3

    from mlflow import MlflowClient

    db = tmp_path / "mlflow.db"
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        found = []
        if db.exists():
            with contextlib.suppress(sqlite3.Error), contextlib.closing(
                    sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
                found = con.execute("SELECT run_uuid FROM metrics WHERE key = 'dist_sq' GROUP BY run_uuid "
                                    "HAVING count(*) >= 3").fetchall()
        if found:
            return MlflowClient(f"sqlite:///{db}"), found[0][0]
        time.sleep(0.5)
    raise AssertionError("the run did not start iterating")


_SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 5001)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); n = int(sys.argv[3])
if sys.argv[2] == "send":
    buf = b"x" * 65536
    while n > 0:
        n -= c.send(buf[:min(n, 65536)])
    c.shutdown(socket.SHUT_WR); c.recv(1)
else:
    while n > 0:
        b = c.recv(1 << 20)
        if not b: break
        n -= len(b)
    c.send(b"k")
"""


def _transfer_seconds(cluster, k: int, direction: str, nbytes: int) -> float:
    """Seconds to move ``nbytes`` between this process (root namespace) and a TCP peer in host ``k``'s namespace:
    ``up`` the peer sends (worker -> master), ``down`` it receives."""
    peer = subprocess.Popen(["ip", "netns", "exec", cluster.namespace(k), sys.executable, "-c", _SERVER,
                             cluster.worker_ip(k), "send" if direction == "up" else "recv", str(nbytes)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert peer.stdout.readline().strip() == "ready"
        with socket.create_connection((cluster.worker_ip(k), 5001), timeout=60) as s:
            t0 = time.perf_counter()
            if direction == "up":
                got = 0
                while chunk := s.recv(1 << 20):
                    got += len(chunk)
                assert got == nbytes
                s.send(b"k")
            else:
                s.sendall(b"y" * nbytes)
                assert s.recv(1) == b"k"
            seconds = time.perf_counter() - t0
        assert peer.wait(30) == 0
    finally:
        if peer.poll() is None:
            peer.kill()
    return seconds


@pytest.mark.slow
@needs_root
def test_an_emulated_link_carries_its_rate_in_each_direction():
    """10 Mbit/s up and 50 Mbit/s down: ~3 s of bytes each way between the root namespace and host 2's namespace;
    the payload's throughput within 15 % of the rate (tbf counts the headers too: ~3 % more than the payload)."""
    from pipeline.cluster.emulated import EmulatedCluster

    before = machine_state()
    with EmulatedCluster(2, up="10mbit", down=["100mbit", "50mbit"], timeout=60) as cluster:
        qdiscs = subprocess.run(["tc", "qdisc", "show", "dev", cluster.root_link(2)], capture_output=True,
                                text=True).stdout
        assert "tbf" in qdiscs and "rate 50Mbit" in qdiscs
        measured = {}
        for direction, rate in (("up", 10e6), ("down", 50e6)):
            nbytes = int(3 * rate / 8)
            measured[direction] = nbytes * 8 / _transfer_seconds(cluster, 2, direction, nbytes)
        print(f"measured: up {measured['up'] / 1e6:.2f} Mbit/s of 10, down {measured['down'] / 1e6:.2f} of 50")
        assert abs(measured["up"] / 10e6 - 1) <= 0.15, measured
        assert abs(measured["down"] / 50e6 - 1) <= 0.15, measured
    assert machine_state() == before


@pytest.mark.slow
@needs_root
def test_a_run_gives_the_inprocess_iterates_logs_the_links_and_removes_everything(tmp_path):
    """isparse-run on 2 emulated hosts (10 Mbit/s up, 100 Mbit/s down), each sending one sum of its workers'
    messages (messages.aggregate=host), reaches the same final distance as the in-process engine to 1e-12, counts
    x once per host on the downlink and the unions on the uplink, logs the links in MLflow, and leaves the machine's namespaces, links and ip_forward as they
    were."""
    import numpy as np
    from mlflow import MlflowClient

    before = machine_state()
    args = ["max_iter=200", f"paths.outputs={tmp_path}", "progress=false"]
    emulated = subprocess.run([CLI, *args, "cluster=emulated", "cluster.n_workers=2", "cluster.link.up=10mbit",
                               "cluster.link.down=100mbit", "engine=dask", "messages.aggregate=host"],
                              capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=_env())
    assert emulated.returncode == 0, emulated.stderr[-3000:]
    assert "cluster=emulated: 2 hosts, up 10mbit, down 100mbit, 10.77.0.0/16" in emulated.stdout + emulated.stderr
    assert machine_state() == before
    inproc = subprocess.run([CLI, *args, "engine=inprocess"], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path, env=_env())
    assert inproc.returncode == 0, inproc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = {r.data.tags["engine"]: r for r in
            client.search_runs([client.get_experiment_by_name("isparse").experiment_id])}
    dask, local = runs["dask"], runs["inprocess"]
    assert dask.data.metrics["summary/iterations"] == local.data.metrics["summary/iterations"] == 200
    assert dask.data.metrics["summary/final_dist_sq"] == pytest.approx(local.data.metrics["summary/final_dist_sq"], rel=1e-12, abs=0)
    x = {e: np.load(client.download_artifacts(r.info.run_id, "x_final.npy", str(tmp_path / e)))
         for e, r in runs.items()}
    np.testing.assert_allclose(x["dask"], x["inprocess"], rtol=1e-12, atol=0)
    p = dask.data.params
    assert (p["cluster.kind"], p["cluster.n_workers"], p["cluster.link.up"], p["cluster.link.down"]) == \
        ("emulated", "2", "10mbit", "100mbit")
    n = int(p["workers.n"])
    assert dask.data.metrics["downlink_bytes"] == local.data.metrics["downlink_bytes"] * 2 / n   # x once per host
    assert dask.data.metrics["uplink_bytes"] < local.data.metrics["uplink_bytes"]           # unions of the masks
    assert dask.data.tags["cluster"] == "emulated"
    assert dask.data.tags["cluster_emulated"] == "2 hosts, up 10mbit, down 100mbit, 10.77.0.0/16"


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_mid_run_removes_everything(tmp_path, sig):
    """SIGINT to the run's process group (a terminal's Ctrl-C), or SIGTERM to the run, while it iterates: the run
    ends KILLED and the namespaces, links and ip_forward are as before it; the processes it started are gone."""
    import psutil

    before = machine_state()
    proc = _start(tmp_path, "algorithm=ibcd", "max_iter=10000000", "tracking.log_every=20",
                  "cluster.link.up=10mbit", "cluster.link.down=100mbit")
    try:
        client, run_id = _wait_iterating(tmp_path, proc)
        assert machine_state() != before                  # it made its namespaces
        started = psutil.Process(proc.pid).children(recursive=True)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, out[-3000:]
    assert f"MLflow run {run_id} KILLED ({sig.name}" in out
    assert "Traceback" not in out, out[-3000:]
    assert client.get_run(run_id).info.status == "KILLED"
    assert machine_state() == before
    time.sleep(0.5)
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@needs_root
def test_a_killed_run_leaves_what_the_next_start_removes_and_reports(tmp_path):
    """SIGKILL of the run (no teardown can run): its namespaces and links stay, its MLflow run stays RUNNING; its
    started processes end with it (PR_SET_PDEATHSIG); the next cluster=emulated run removes the leftovers, says so
    in one line, marks the killed run KILLED with one more line, and the machine is then as before the first run."""
    import json

    import psutil

    from pipeline.cluster.machine import STATE_DIR

    before = machine_state()
    proc = _start(tmp_path, "algorithm=ibcd", "max_iter=10000000", "tracking.log_every=20")
    try:
        client, run_id = _wait_iterating(tmp_path, proc)
        records = [json.loads(p.read_text()) for p in STATE_DIR.glob("*.json")]
        mine = [r for r in records if r["owner"] == proc.pid]
        assert len(mine) == 1 and mine[0]["mlflow_run"] == run_id, records   # the claim names its run
        assert mine[0]["tracking_uri"] == f"sqlite:///{tmp_path}/mlflow.db"
        started = [p for p in psutil.Process(proc.pid).children(recursive=True) if "dask" in " ".join(p.cmdline())]
        assert len(started) == 3, started                 # the scheduler and 2 workers
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    psutil.wait_procs(started, timeout=30)
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert client.get_run(run_id).info.status == "RUNNING"   # nobody was left to end it
    left = machine_state()
    spaces = re.findall(r"^(isparse-emu-[0-9a-f]{4}-\d+)", left["netns"], re.M)
    assert len(spaces) == 2, left                       # the killed run's leftovers
    again = subprocess.run([CLI, f"paths.outputs={tmp_path}", *RUN, "max_iter=20"], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path, env=_env())
    assert again.returncode == 0, again.stderr[-3000:]
    said = [line for line in (again.stdout + again.stderr).splitlines()
            if "removed what an earlier emulated cluster" in line]
    assert len(said) == 1 and all(ns in said[0] for ns in spaces), again.stderr[-3000:]
    marked = [line for line in (again.stdout + again.stderr).splitlines() if "marked KILLED" in line]
    assert len(marked) == 1, again.stderr[-3000:]
    assert (f"cluster=emulated: MLflow run {run_id} (sqlite:///{tmp_path}/mlflow.db) was still RUNNING, its process "
            f"(pid {proc.pid}) killed without a teardown: marked KILLED") in marked[0]
    assert client.get_run(run_id).info.status == "KILLED"
    assert machine_state() == before


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="runs isparse-run as another user: needs root and setpriv")
@pytest.mark.parametrize("how", ["not root", "no ip"])
def test_where_it_cannot_run_one_line_naming_cluster_kind(how):
    """As user nobody (it keeps only CAP_DAC_READ_SEARCH, to reach the interpreter under /root: not CAP_NET_ADMIN),
    or as root without ip and tc on PATH: one line naming cluster.kind, exit status 2."""
    work = Path(tempfile.mkdtemp(prefix="isparse-emulated-test-"))
    try:
        work.chmod(0o777)
        env = {**_env(), "HOME": str(work), "TMPDIR": str(work)}
        cmd = [CLI, f"paths.outputs={work}", "cluster=emulated"]
        if how == "not root":
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                   "--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search", *cmd]
            reason = "not root (uid 65534)"
        else:
            env["PATH"] = str(BIN)
            reason = "no ip on PATH"
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=work, env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0] == (f"isparse-run: error: The 'cluster.kind' parameter emulated (cluster=emulated) needs root and "
                        f"the ip and tc commands (network namespaces, veth pairs, tc tbf); {reason}.")


# -- what tc applies, clusters started at once, a link taken down ---------------------------------------------------
@needs_root
def test_the_rate_check_matches_what_tc_applies():
    """Every rate the check accepts, down to 1kbit and up to 100gbit, is applied by tc as given (with this kind's
    bucket and 200 ms latency); just outside, the check refuses, and tc would refuse it or apply something else (a
    shrunk bucket, a longer or shorter latency)."""
    import json

    from pipeline.cluster.shaping import bucket_bytes, rate_bits, tbf_command

    ns = f"isparse-tctest-{os.getpid()}"
    in_ns = ["ip", "netns", "exec", ns]

    def applied(rate):
        bits = rate_bits("rate", rate)
        cmd = tbf_command("t0", "1mbit")
        cmd[cmd.index("rate") + 1], cmd[cmd.index("burst") + 1] = rate, str(bucket_bytes(bits))
        if subprocess.run([*in_ns, *cmd], capture_output=True).returncode != 0:
            return False
        (qdisc,) = json.loads(subprocess.run([*in_ns, "tc", "-j", "qdisc", "show", "dev", "t0"], capture_output=True,
                                             text=True, check=True).stdout)
        o = qdisc["options"]
        return (o["rate"] == int(bits / 8) and abs(o["burst"] / bucket_bytes(bits) - 1) < 0.01
                and abs(o["lat"] - 200_000) <= 200)   # tc reads the latency back from its queue (to 1 us)

    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run([*in_ns, "ip", "link", "add", "t0", "type", "veth", "peer", "name", "t1"], check=True)
        for rate in ("1kbit", "1.6kbit", "2.5mbit", "10mbit", "1gbit", "100gbit"):
            assert rate_bits("cluster.link.up", rate, shaped=True) and applied(rate), rate
        for rate in ("0.9kbit", "0.1kbit", "0.001kbit", "200gbit", "10000gbit"):
            with pytest.raises(ConfigError, match="must be a tc rate from 1kbit to 100gbit"):
                rate_bits("cluster.link.up", rate, shaped=True)
            assert not applied(rate), rate
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


_CHILD = r"""
import json, sys
from distributed import Client
from isparse.errors import ConfigError
from pipeline.cluster.emulated import EmulatedCluster

cluster = EmulatedCluster(int(sys.argv[1]), up="10mbit", down="100mbit", subnet=sys.argv[2], timeout=60)
print("ready", flush=True)
sys.stdin.readline()
try:
    cluster.start()
except ConfigError as exc:
    print(json.dumps({"error": str(exc)}), flush=True)
    sys.exit(0)
try:
    with Client(cluster.address, timeout=60) as client:
        cluster.wait_for_workers(client)
        print(json.dumps({"nets": [str(n) for n in cluster.nets], "scheduler": cluster.address,
                          "workers": sorted(client.scheduler_info()["workers"])}), flush=True)
        sys.stdin.readline()
finally:
    cluster.close()
"""


def _start_at_once(how: str, hosts: int, subnet: str) -> list[dict]:
    """Two emulated clusters released at the same instant (two threads of this process past a barrier, or two
    processes sent their go line together); each one's /24s, scheduler and connected workers, or its error."""
    import json
    import threading

    if how == "processes":
        children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(hosts), subnet], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=_env()) for _ in range(2)]
        try:
            assert [c.stdout.readline().strip() for c in children] == ["ready", "ready"]
            for c in children:
                c.stdin.write("go\n")
            for c in children:
                c.stdin.flush()
            out = [json.loads(c.stdout.readline()) for c in children]
            for c in children:
                if c.poll() is None:
                    c.stdin.write("close\n")
                    c.stdin.flush()
            assert [c.wait(120) for c in children] == [0, 0]
        finally:
            for c in children:
                if c.poll() is None:
                    c.kill()
        return out

    from distributed import Client

    from pipeline.cluster.emulated import EmulatedCluster

    go, seen = threading.Barrier(2), threading.Barrier(2, timeout=120)
    out: list = [None, None]

    def one(i):   # the whole life in the thread: its processes die with the thread that started them
        cluster = EmulatedCluster(hosts, up="10mbit", down="100mbit", subnet=subnet, timeout=60)
        go.wait()
        try:
            cluster.start()
        except ConfigError as exc:
            out[i] = {"error": str(exc)}
            seen.wait()
            return
        try:
            with Client(cluster.address, timeout=60) as client:
                cluster.wait_for_workers(client)
                out[i] = {"nets": [str(n) for n in cluster.nets], "scheduler": cluster.address,
                          "workers": sorted(client.scheduler_info()["workers"])}
                seen.wait()   # both running at once
        except BaseException as exc:
            out[i] = out[i] or {"failed": repr(exc)}
            seen.abort()
            raise
        finally:
            cluster.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("how", ["threads", "processes"])
def test_two_clusters_started_at_once_never_share_a_subnet(how):
    """Two starts of 2 hosts each on the default 10.77.0.0/16, released at once: disjoint /24s, each client's
    scheduler on its own /24s and its workers on its own /24s only; afterwards the machine is as before."""
    import ipaddress

    before = machine_state()
    a, b = _start_at_once(how, 2, "10.77.0.0/16")
    assert "nets" in a and "nets" in b, (a, b)
    nets = {i: [ipaddress.ip_network(n) for n in r["nets"]] for i, r in enumerate((a, b))}
    assert not [(x, y) for x in nets[0] for y in nets[1] if x.overlaps(y)], nets
    for i, r in enumerate((a, b)):
        hosts = [r["scheduler"], *r["workers"]]
        assert len(r["workers"]) == 2
        assert all(any(ipaddress.ip_address(h.split("//")[1].rsplit(":", 1)[0]) in n for n in nets[i])
                   for h in hosts), (r, nets[i])
    assert machine_state() == before


@pytest.mark.slow
@needs_root
def test_a_subnet_with_room_for_one_refuses_the_second_start_in_one_line():
    """Two starts of 1 host on 10.77.0.0/23 (one usable /24) released at once: one runs, the other is refused by
    one line naming cluster.subnet and what holds the /24."""
    before = machine_state()
    results = _start_at_once("threads", 1, "10.77.0.0/23")
    ran = [r for r in results if "nets" in r]
    refused = [r["error"] for r in results if "error" in r]
    assert len(ran) == 1 and ran[0]["nets"] == ["10.77.1.0/24"] and len(refused) == 1, results
    assert refused[0] == ("The 'cluster.subnet' parameter must be a private network with cluster.n_workers = 1 /24s "
                          "(one per host) that this machine and its other emulated clusters do not use; 10.77.0.0/23 "
                          f"has 0 free (10.77.1.0/24 is taken by the emulated cluster of pid {os.getpid()}).")
    assert machine_state() == before


@pytest.mark.slow
@needs_root
def test_a_link_taken_down_and_up_gets_its_default_route_back():
    """The kernel deletes a namespace's default route when its link goes down and does not bring it back with the
    link (shown by hand first); EmulatedCluster.set_link(k, True) does, the shaping stays, and host 2's worker opens
    new connections to the scheduler (on host 1's /24, through that route) again."""
    import json

    from distributed import Client

    from pipeline.cluster.emulated import EmulatedCluster

    before = machine_state()
    with EmulatedCluster(2, up="10mbit", down="50mbit", timeout=60) as cluster, \
            Client(cluster.address, timeout=60) as client:
        cluster.wait_for_workers(client)
        in_ns = ["ip", "netns", "exec", cluster.namespace(2)]

        def default_route():
            out = subprocess.run([*in_ns, "ip", "-j", "route", "show", "default"], capture_output=True, text=True,
                                 check=True).stdout
            return [r.get("gateway") for r in json.loads(out or "[]")]

        def reach(host, port):   # on the worker (local: sent by value, the workers cannot import this module)
            import socket

            socket.create_connection((host, port), timeout=10).close()
            return True

        worker = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "host2")
        assert default_route() == [cluster.root_ip(2)]
        for state in ("down", "up"):   # by hand: the route is gone for good
            subprocess.run([*in_ns, "ip", "link", "set", cluster.worker_link(2), state], check=True)
        assert default_route() == []
        cluster.set_link(2, True)
        assert default_route() == [cluster.root_ip(2)]
        cluster.set_link(2, False)
        assert default_route() == []
        cluster.set_link(2, True)
        assert default_route() == [cluster.root_ip(2)]
        for prefix, dev, rate in ((in_ns, cluster.worker_link(2), "10Mbit"), ([], cluster.root_link(2), "50Mbit")):
            shown = subprocess.run([*prefix, "tc", "qdisc", "show", "dev", dev], capture_output=True, text=True).stdout
            assert "tbf" in shown and f"rate {rate}" in shown, shown
        host, port = cluster.address.split("//")[1].rsplit(":", 1)
        assert client.submit(reach, host, int(port), workers=[worker], pure=False).result(timeout=60) is True
    assert machine_state() == before
