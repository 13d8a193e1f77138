"""Real SLURM and SSH daemons on 127.0.0.1 for the slow cluster tests (tests/test_cluster_daemons.py).

Each context manager starts its daemons in a directory of its own (outside pytest's tmp_path, which is private to
root: the munge user must reach its files), yields what a client needs, and stops every daemon it started by the
pid it started, also on failure. They need root and Debian's packages (``.ci/run`` installs them):
slurm-wlm and munge for :func:`slurm_daemons`, openssh-server for :func:`sshd_daemon`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel")
SSH_BINARIES = ("sshd", "ssh-keygen")


def missing(binaries) -> str | None:
    """Why the daemons cannot run here (not root, a binary or the munge user missing), or None."""
    if os.geteuid() != 0:
        return "the daemons run as root (CI runs as root; .ci/run installs them)"
    absent = [b for b in binaries if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if absent:
        return f"not installed: {', '.join(absent)} (.ci/run installs slurm-wlm, munge and openssh-server)"
    if "munged" in binaries:
        try:
            pwd.getpwnam("munge")
        except KeyError:
            return "no munge user (Debian's munge package makes it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def stop(procs, timeout: float = 20) -> None:
    """SIGTERM each process of ``procs`` (Popen, last started first), SIGKILL what is still there after ``timeout``."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=timeout)


def stop_pids(pids, timeout: float = 10) -> None:
    """SIGTERM then (after ``timeout`` s) SIGKILL the processes ``pids`` that are still alive (leftovers of a daemon's
    sessions or jobs after a failed test)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.time() + timeout
        while time.time() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)


def alive(pid: int) -> bool:
    """The process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every living descendant of ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if alive(p):
            found[p] = cmd
        todo.extend(children.get(p, []))
    return found


def wait_until(check, timeout: float, what: str, interval: float = 0.5):
    """Call ``check()`` until it returns a true value (returned) or ``timeout`` seconds pass (RuntimeError)."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        try:
            got = check()
        except Exception as exc:   # noqa: BLE001 -- the daemon is not up yet
            got, last = None, exc
        if got:
            return got
        time.sleep(interval)
    raise RuntimeError(f"{what} not ready within {timeout:g} s" + (f" (last error: {last})" if last else ""))


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return f"({path} not written)"


@contextlib.contextmanager
def daemon_dir(prefix: str):
    """A fresh directory under the system's temporary directory, world-readable (the munge user reads below it)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def slurm_daemons(root: Path, start_timeout: float = 60):
    """munged (as the munge user), slurmctld and slurmd of a one-node SLURM cluster, all on 127.0.0.1.

    The node is this machine (``NodeName=<hostname> NodeAddr=127.0.0.1 CPUs=<nproc>``), partition ``debug``; the
    state, spool, log and pid files are under ``root``, the ports are free ones. Yields ``{"env", "munged",
    "slurmctld", "slurmd", "root"}``: the environment the SLURM commands (and dask-jobqueue) need (``os.environ``
    plus ``SLURM_CONF``) and the daemons' pids. On exit: the jobs left are cancelled, slurmd, slurmctld and munged
    stopped by their pids, and whatever a job left (:func:`job_processes`) ended by its pid.
    """
    host = socket.gethostname().split(".")[0]
    munge_user = pwd.getpwnam("munge")
    mdir = root / "munge"
    mdir.mkdir()
    mdir.chmod(0o711)   # munged: the socket's directory must be searchable by all
    key = mdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for p in (mdir, key):
        os.chown(p, munge_user.pw_uid, munge_user.pw_gid)
    sock = mdir / "munge.socket"
    procs: list[subprocess.Popen] = []
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    try:
        procs.append(subprocess.Popen(
            [_binary("munged"), "--foreground", f"--socket={sock}", f"--key-file={key}", f"--pid-file={mdir}/munged.pid",
             f"--log-file={mdir}/munged.log", f"--seed-file={mdir}/munged.seed"],
            user=munge_user.pw_uid, group=munge_user.pw_gid, extra_groups=[], stdout=open(root / "munged.out", "w"),
            stderr=subprocess.STDOUT, cwd="/"))
        wait_until(lambda: sock.exists() or procs[0].poll() is not None, 20, "munged")
        if procs[0].poll() is not None:
            raise RuntimeError(f"munged exited with {procs[0].returncode}: {_tail(root / 'munged.out')}")
        (root / "state").mkdir()
        (root / "spool").mkdir()
        mem_mb = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal:"))) // 1024
        conf = f"""\
ClusterName=isparse-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={int(mem_mb * 0.9)} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
        (root / "slurm.conf").write_text(conf)
        for daemon in ("slurmctld", "slurmd"):
            args = [_binary(daemon), "-D", "-f", str(root / "slurm.conf")] + (["-c"] if daemon == "slurmctld" else [])
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=root))
            if daemon == "slurmctld":
                wait_until(lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True,
                                                  timeout=10).stdout.count("UP") or procs[-1].poll() is not None,
                           start_timeout, "slurmctld")
        def idle():
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}:\n{_tail(root / 'slurmctld.log')}\n"
                                       f"{_tail(root / 'slurmd.log')}")
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10)
            return out.stdout.strip() == "idle"
        try:
            wait_until(idle, start_timeout, "the SLURM node (sinfo: idle)")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{_tail(root / 'slurmctld.log')}\n{_tail(root / 'slurmd.log')}") from None
        out = subprocess.run(["srun", "-N1", "-n1", "hostname"], env=env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or out.stdout.strip() != host:
            raise RuntimeError(f"srun hostname: {out.returncode} {out.stdout} {out.stderr}")
        yield {"env": env, "munged": procs[0].pid, "slurmctld": procs[1].pid, "slurmd": procs[2].pid, "root": root}
    finally:
        left = job_processes(env["SLURM_CONF"])
        if len(procs) == 3 and procs[1].poll() is None:
            subprocess.run(["scancel", "--full", "--quiet", "--user=root"], env=env, capture_output=True, timeout=30)
            with contextlib.suppress(RuntimeError):
                wait_until(lambda: not subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True,
                                                      timeout=10).stdout.strip(), 30, "the SLURM queue empty")
        left.update(job_processes(env["SLURM_CONF"]))
        stop(procs)
        stop_pids(list(left))


def job_processes(conf) -> dict[int, str]:
    """{pid: command line} of the SLURM jobs' processes of the cluster of ``SLURM_CONF=conf``: its slurmstepd's
    (they leave slurmd's tree: their parent is init; they have slurmd's environment) and their descendants."""
    mark = f"SLURM_CONF={conf}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            if not cmd.startswith("slurmstepd:"):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        if alive(int(entry)):
            found[int(entry)] = cmd
            found.update(descendants(int(entry)))
    return found


def squeue(env) -> list[tuple[str, str]]:
    """[(job id, state)] of the SLURM jobs in the queue."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env, capture_output=True, text=True, timeout=10, check=True)
    return [tuple(line.split()) for line in out.stdout.splitlines() if line.strip()]


@contextlib.contextmanager
def sshd_daemon(root: Path, environment: dict[str, str] | None = None, start_timeout: float = 20):
    """An sshd on 127.0.0.1 at a free port with a host key and a client key made here: key-only login as root.

    ``AuthorizedKeysFile`` points into ``root`` (root's own ``~/.ssh`` is not read or touched); ``environment`` is set
    in every session (sshd's ``SetEnv``: what an installed package needs on a real host, e.g. PYTHONPATH). Yields
    ``{"port", "client_key", "pid"}``; the sshd is stopped by its pid on exit (its sessions end with it).
    """
    port = free_port()
    host_key, client_key = root / "host_ed25519", root / "client_ed25519"
    for k in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True, capture_output=True)
    (root / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    (root / "authorized_keys").chmod(0o600)
    setenv = " ".join(f'{k}="{v}"' for k, v in (environment or {}).items())
    conf = f"""\
ListenAddress 127.0.0.1
Port {port}
HostKey {host_key}
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 50
MaxSessions 50
{f"SetEnv {setenv}" if setenv else ""}
"""
    (root / "sshd_config").write_text(conf)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege-separation directory
    proc = subprocess.Popen([_binary("sshd"), "-D", "-e", "-f", str(root / "sshd_config")],
                            stdout=open(root / "sshd.log", "w"), stderr=subprocess.STDOUT, cwd=root)
    try:
        def up():
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {proc.returncode}: {_tail(root / 'sshd.log')}")
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                return s.recv(64).startswith(b"SSH-")
        wait_until(up, start_timeout, "sshd")
        yield {"port": port, "client_key": str(client_key), "pid": proc.pid, "log": root / "sshd.log"}
    finally:
        left = descendants(proc.pid)   # the sessions' processes (a failed test's Dask scheduler and workers)
        stop([proc])
        stop_pids(list(left))


def logged_step(db: Path, key: str = "dist_sq") -> int:
    """The last step at which a run in the sqlite MLflow store ``db`` logged ``key``, 0 before there is one. Read
    with sqlite3, read-only: an MlflowClient would make (migrate) the store itself while the polled run's own
    process is making it (MLflow's migration then fails in one of the two: "No such index ...")."""
    import sqlite3

    if not Path(db).exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            row = con.execute("SELECT MAX(step) FROM metrics WHERE key = ?", (key,)).fetchone()
        return int(row[0] or 0)
    except sqlite3.Error:   # the store's tables are not there yet
        return 0
