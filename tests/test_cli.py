"""What a user sees in the terminal (issue 12): the real ``isparse-run`` in a subprocess, the real conf/ composed
with Hydra's compose API, a real sqlite MLflow store under tmp_path and, for Ctrl-C, a real LocalCluster on
127.0.0.1."""

import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from composing import check_command
from isparse import ConfigError
from pipeline.job import bound_text
from pipeline.lifecycle import resume_command
from specs import spec

CLI = str(Path(sys.executable).parent / "isparse-run")
TINY = ["engine=inprocess", "progress=false", "checkpoint.every=0"]   # breast cancer (569 x 30), n = 4


def cli(tmp_path, *args, env=None, timeout=120):
    flags = [a for a in args if a.startswith("-")]
    overrides = [a for a in args if not a.startswith("-")]
    return subprocess.run([CLI, *flags, f"paths.outputs={tmp_path}", *overrides], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


def store(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("isparse")
    return client, (client.search_runs([exp.experiment_id]) if exp else [])


def assert_end_line(line, run, tmp_path):
    """The FINISHED line names the run, its store and its Hydra run folder, which holds what it lists."""
    m = re.search(r"MLflow run (\w+) FINISHED in (\S+); its folder (\S+) \(convergence\.png, x_final\.npy, "
                  r"the run's log\)$", line)
    assert m, line
    assert m[1] == run.info.run_id and m[2] == f"sqlite:///{tmp_path}/mlflow.db"
    folder = Path(m[3])
    assert folder.is_relative_to(tmp_path) and (folder / "convergence.png").is_file() and (folder / "x_final.npy").is_file()


# -- 1. a bad input: one line, exit status 2 -----------------------------------------------------------------------

@pytest.mark.parametrize("override, message, full_error", [
    ("tol=-1", "isparse-run: error: The 'tol' parameter must be in [0, inf); got -1.", True),     # before any data
    ("workers.n=570", "isparse-run: error: The 'workers.n' parameter must be in [1, N (rows of the data set) = 569]; "
                      "got 570.", False),                                                        # after loading it
    ("cluster.rounds=rpc", "isparse-run: error: The 'cluster.rounds' parameter must be one of stream, actor; got 'rpc'.",
     False),
])
def test_config_error_is_one_line_and_status_2(tmp_path, override, message, full_error):
    proc = cli(tmp_path, *TINY, override)
    assert proc.returncode == 2
    assert lines(proc.stderr) == [message] and lines(proc.stdout) == []
    assert not (tmp_path / "mlflow.db").exists() or store(tmp_path)[1] == []     # no MLflow run was made
    if not full_error:
        return
    full = cli(tmp_path, *TINY, override, env={"HYDRA_FULL_ERROR": "1"})
    assert full.returncode == 2
    assert "Traceback (most recent call last)" in full.stderr and "isparse.errors.ConfigError" in full.stderr
    assert lines(full.stderr)[-1] == message


@pytest.mark.slow   # a 2-job sweep: 14 s (the default run keeps under 10 min)
def test_config_error_in_a_sweep_fails_its_job_and_the_sweep_goes_on(tmp_path):
    proc = cli(tmp_path, "-m", *TINY, "tol=-1,1e-4", "max_iter=20")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    error = "The 'tol' parameter must be in [0, inf); got -1."
    job_line, summary = lines(proc.stderr)                 # the job's line, when it failed, and the sweep's summary
    assert job_line.startswith("isparse-run: error: job #0 (") and error in job_line
    assert summary.startswith("isparse-run: sweep: 1 of 2 jobs FAILED (#0): parent MLflow run ")
    client, runs = store(tmp_path)
    parent = [r for r in runs if r.data.tags.get("isparse.sweep")]
    children = [r for r in runs if not r.data.tags.get("isparse.sweep")]
    assert len(parent) == 1 and parent[0].info.status == "FAILED" and parent[0].data.tags["failed_jobs"] == "1"
    assert sorted((c.data.params["tol"], c.info.status) for c in children) == [("-1", "FAILED"), ("0.0001", "FINISHED")]
    [bad] = [c for c in children if c.info.status == "FAILED"]   # the failed job has its run too, with its error
    assert bad.data.tags["error"] == "ConfigError: The 'tol' parameter must be in [0, inf); got -1."
    assert f"parent MLflow run {parent[0].info.run_id} FAILED in sqlite:///{tmp_path}/mlflow.db" in summary


# -- 3. unknown keys, with or without + ----------------------------------------------------------------------------

@pytest.mark.parametrize("override", ["workers.N=16", "+workers.N=16"])
def test_unknown_key_is_refused_naming_the_known_ones(tmp_path, override):
    proc = cli(tmp_path, *TINY, override)
    assert proc.returncode == 2
    assert lines(proc.stderr) == ["isparse-run: error: The 'workers.N' parameter is not a key of workers (it would be "
                                  "ignored); known: n, split, split_seed."]
    assert lines(proc.stdout) == [] and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("overrides, multirun, key, parent, known", [
    (["+workers.N=16"], False, "workers.N", "workers", "n, split, split_seed"),
    (["++workers.N=16"], False, "workers.N", "workers", "n, split, split_seed"),
    (["workers.N=4,16"], True, "workers.N", "workers", "n, split, split_seed"),
    (["algorithm.schedule=decreasing"], False, "algorithm.schedule", "algorithm=isega", "name, module"),   # isega: none
    (["algorithm=isgd,isega", "algorithm.schedule=decreasing"], True, "algorithm.schedule", "algorithm=isega",
     "name, module"),
    (["data.dir=/x"], False, "data.dir", "data=breast_cancer", "name, module, lam, title, load"),   # breast cancer is bundled
    (["cluster=slurm", "cluster.options.queue=normal"], False, "cluster.options.queue", "cluster.options",
     "cores, processes, memory, walltime, scheduler_options, worker_extra_args"),
    (["tracking.URI=x"], False, "tracking.URI", "tracking", "uri, experiment, log_every, run_name, figure"),
])
def test_unknown_keys_in_the_overrides(overrides, multirun, key, parent, known):
    """Every job of the command line is composed and checked as isparse-run does: a key no section has is refused,
    with or without +, naming the section and its keys."""
    with pytest.raises(ConfigError) as err:
        check_command(overrides, multirun=multirun)
    assert str(err.value).startswith(f"The '{key}' parameter is not a key of {parent} (it would be ignored); "
                                     f"known: {known}.")


def test_a_key_that_exists_is_refused_with_plus():
    with pytest.raises(ConfigError, match=r"^The 'workers.n' parameter is already a key of the config: set it without "
                                          r"\+ \(workers.n=...\)\.$"):
        check_command(["+workers.n=16"])


@pytest.mark.parametrize("overrides, multirun", [
    (["+experiment=quick"], True),                                                       # docs/running.md: the experiments
    (["+experiment=table99", "workers.n=10", "seed=0,1,2"], True),
    pytest.param(["+experiment=isgd_vs_sgd", "algorithm.schedule=decreasing"], True,   # its sweep: isgd and sgd
                 marks=pytest.mark.slow),
    pytest.param(["+experiment=iasgd_vs_asgd", "algorithm.rho=2,16"], True,   # its +arm sweep: iasgd and asgd
                 marks=pytest.mark.slow),
    (["cluster=slurm", "cluster.jobs=2", "cluster.options.cores=1", "cluster.options.memory=2GB",   # docs/clusters.md: SLURM
      "cluster.options.walltime=00:10:00", "+cluster.options.queue=debug", "+cluster.options.account=isparse",
      "+cluster.options.interface=lo", "+cluster.options.log_directory=slurm-logs", "data=a1a", "workers.n=4",
      "problem.lam=0.05", "tol=1e-8", "max_iter=20000"], False),
    (["cluster=ssh", "cluster.hosts=[127.0.0.1,127.0.0.1,127.0.0.1]", "+cluster.connect_options.port=2222",  # SSH
      "+cluster.connect_options.client_keys=[/root/.ssh/id_ed25519]", "+cluster.connect_options.known_hosts=null",
      "+cluster.worker_options.interface=lo", "+cluster.scheduler_options.interface=lo",
      "cluster.remote_python=/x/.venv/bin/python", "data=a1a", "workers.n=4", "problem.lam=0.05", "tol=1e-8",
      "max_iter=20000"], False),
    (["cluster=ssh", "cluster.hosts=[head,node1,node2]", "+cluster.connect_options.username=me"], False),
    (["algorithm=isgd", "algorithm.schedule=decreasing", "data=libsvm", "data.path=/x", "cluster.address=tcp://h:1",
      "hydra.run.dir=/tmp/x"], False),
])
def test_documented_overrides_are_accepted(overrides, multirun):
    assert check_command(overrides, multirun=multirun)


def test_plus_keys_reach_the_config(tmp_path):
    """A documented + key composes through the CLI (--cfg job: Hydra composes and prints, nothing runs)."""
    proc = cli(tmp_path, "--cfg=job", "cluster=slurm", "+cluster.options.queue=normal")
    assert proc.returncode == 0, proc.stderr
    assert OmegaConf.create(proc.stdout).cluster.options.queue == "normal"


# -- 4, 5, 6. tol=0, the start-up warning, the end-of-run line ----------------------------------------------------

def test_tol_zero_runs_all_of_max_iter():
    """The library: tol = 0 is accepted and never stops early (the same run with tol = 1e-8 stops well before)."""
    from specs import make
    from isparse.problems import QuadraticProblem

    assert spec("ibgd", n=4, block_size=1, tau=1.0, max_iter=10, tol=0).tol == 0
    s = make(problem=QuadraticProblem(d=10, o=10, n=4, seed=0), algorithm="ibgd", n=4, block_size=1, tau=1.0)
    early = s.run(max_iter=5000, tol=1e-8)
    assert early.converged and early.iterations < 5000
    full = s.run(max_iter=5000, tol=0)
    assert full.iterations == 5000 and not full.converged


@pytest.mark.slow
def test_tol_zero_end_line_and_no_bound_reason(tmp_path):
    """tol=0 on the CLI runs all of max_iter; the last lines name the run, its store, and why there is no bound."""
    proc = cli(tmp_path, *TINY, "tol=0", "max_iter=300", "algorithm=diana")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, runs = store(tmp_path)
    (run,) = runs
    assert run.info.status == "FINISHED" and run.data.metrics["summary/iterations"] == 300
    assert run.data.tags["bound_applicable"] == "false"
    reason = run.data.tags["bound_theorem"]
    out = lines(proc.stdout)
    assert f"(no bound: {reason})" in out[-2] and "nan" not in out[-2]
    assert_end_line(out[-1], run, tmp_path)
    assert "WARNING" not in proc.stdout       # tol = 0 asks for max_iter: no 'predicted > max_iter', no 'not reached'


def test_bound_text():
    from isparse.theory.bound import LinearBound, NoBound

    assert bound_text(LinearBound("Theorem 3 (ISEGA)", "dist_sq", 0.5, 0.5, True, 0.9, 1.0), 0.125) == "bound 1.250e-01"
    above = LinearBound("Theorem 3 (ISEGA), arXiv:1901.09437", "dist_sq", gamma_theory=0.01, gamma=4.0,
                        applicable=False, rate=0.9, initial=1.0)
    assert bound_text(above, math.nan) == ("no bound: the stepsize gamma = 4 is above the gamma <= 0.01 of "
                                           "Theorem 3 (ISEGA), arXiv:1901.09437")
    assert bound_text(NoBound("no theorem covers ef21", 0.1, 0.1), math.nan) == "no bound: no theorem covers ef21"
    # the limit named is the theorem's own (Theorem 5: 1/(L(3/n + tau)), not its rule's 1/(L(tau + 4/n)))
    above5 = LinearBound("Theorem 5 (ISAGA)", "dist_sq", gamma_theory=0.01, gamma=4.0, applicable=False, rate=0.9,
                         initial=1.0, gamma_max=0.02)
    assert bound_text(above5, math.nan).startswith("no bound: the stepsize gamma = 4 is above the gamma <= 0.02 ")
    # a bound on another quantity than dist_sq (IASGD's subopt) is printed with its name beside dist_sq
    iasgd = LinearBound("Theorem 8 (IASGD)", "subopt", 0.5, 0.5, True, 0.9, 1.0, source="derived", derivation="x")
    assert bound_text(iasgd, 0.125) == "bound on subopt 1.250e-01"


@pytest.mark.slow
def test_warning_at_start_when_the_theorem_predicts_more_than_max_iter(tmp_path):
    proc = cli(tmp_path, *TINY, "max_iter=40", "tracking.log_every=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = store(tmp_path)[1]
    predicted = run.data.metrics["summary/predicted_iterations"]
    assert 40 < predicted < math.inf
    out = lines(proc.stdout)
    warn = [i for i, line in enumerate(out) if "more than max_iter=40" in line]
    summary = [i for i, line in enumerate(out) if ": 40 iterations, dist_sq" in line]
    assert len(warn) == 1 and len(summary) == 1 and warn[0] < summary[0]   # said at start, before the run's end
    assert f"predicted_iterations = {predicted:,.0f} (Theorem 3 (ISEGA)) to reach tol=1e-08" in out[warn[0]]
    assert_end_line(out[-1], run, tmp_path)


@pytest.mark.parametrize("tol, max_iter, neighbourhood, warned", [
    (1e-8, 100, 0.0, "predicted_iterations = 1,764 (Theorem 3 (ISEGA)) to reach tol=1e-08, more than max_iter=100"),
    (1e-8, 1764, 0.0, None),                 # exactly enough
    (1e-8, 100, 1e-6, "stays above tol * r_0 = 2.000e-08 (its neighbourhood: 1.000e-06): predicted_iterations = inf"),
    (0.0, 100, 0.0, None),                   # tol = 0: all of max_iter is what was asked
])
def test_start_up_warning(caplog, tol, max_iter, neighbourhood, warned):
    from types import SimpleNamespace

    from isparse.theory.bound import LinearBound
    from pipeline.lifecycle import warn_if_predicted_beyond

    # bound(t) = 0.99^t * 1 + neighbourhood <= tol * r_0 = 2e-8 first at t = ceil(ln(2e-8) / ln(0.99)) = 1764
    bound = LinearBound("Theorem 3 (ISEGA), arXiv:1901.09437", "dist_sq", 0.1, 0.1, True, rate=0.99, initial=1.0,
                        neighbourhood=neighbourhood)
    job = SimpleNamespace(tol=tol, max_iter=max_iter)
    predicted = bound.iterations_to(tol * 2.0)
    with caplog.at_level("WARNING", logger="isparse"):
        warn_if_predicted_beyond(job, bound, 2.0, predicted)
    text = [r.getMessage() for r in caplog.records if r.name == "isparse"]
    if warned is None:
        assert text == []
    else:
        assert len(text) == 1 and warned in text[0]


# -- 7. --help ------------------------------------------------------------------------------------------------------

def test_help_describes_the_app_and_hides_common(tmp_path):
    proc = cli(tmp_path, "--help")
    assert proc.returncode == 0
    text = proc.stdout
    assert text.startswith("isparse-run: run a distributed optimization method with independent sparsification")
    assert "powered by Hydra" not in text and "_common" not in text
    assert "cluster: address, emulated, kubernetes, local, slurm, ssh\n" in text
    for command in ("isparse-run -m algorithm=isega,ibcd", "isparse-run -m +experiment=tau_sweep", "mlflow ui"):
        assert command in text
    assert "sqlite:///<paths.outputs>/mlflow.db" in text and "$" + "PWD" in text


@pytest.mark.parametrize("kind", ["local", "address", "ssh", "slurm", "kubernetes", "emulated"])
def test_every_cluster_config_composes(compose, kind):
    """cluster=<kind> composes to that option's declared keys and defaults (pipeline.cluster.options), the shared
    ones (ClusterOptions) included."""
    from pipeline.cluster import KINDS, ClusterOptions

    got = compose([f"cluster={kind}"]).cluster
    assert OmegaConf.to_container(got) == KINDS[kind]().to_dict()
    assert set(ClusterOptions.fields()) <= set(got)
    assert got.snapshot_every == 50 and got.timeout == {"slurm": 600, "kubernetes": 600, "emulated": 60}.get(kind, 10)


# -- 2. Ctrl-C during a Dask run -----------------------------------------------------------------------------------

def _ctrl_c(proc) -> str:
    """SIGINT to the process group of ``proc`` (as a terminal's Ctrl-C); its output, after checking it exited on it."""
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, out[-3000:]
    return out


def _kill_if_running(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
@pytest.mark.slow


def test_ctrl_c_during_a_dask_run(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it (the Dask worker processes get it too):
    a few lines, the last one with the run id, KILLED and the resume command; no Nanny or tornado tracebacks; the
    MLflow run KILLED with what it logged; no worker process left."""
    import psutil

    from pipeline.tracking import experiment_id

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = experiment_id(client, "isparse")   # the schema, before polling it (artifacts beside it, as isparse-run's)
    proc = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", "progress=false", "engine=dask", "cluster=local",
                             "cluster.n_workers=2", "algorithm=ibcd", "max_iter=1000000", "tracking.log_every=50",
                             "checkpoint.every=100"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, run = time.time() + 60, None
        while time.time() < deadline:   # until it iterates and has a checkpoint
            runs = client.search_runs([experiment])
            if runs and runs[0].data.metrics.get("checkpoint/iteration", 0) >= 100:
                run = runs[0]
                break
            time.sleep(0.5)
        assert run is not None, "the run did not start iterating"
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2                       # the Dask worker processes
        out = _ctrl_c(proc)
    finally:
        _kill_if_running(proc)
    text = lines(out)
    assert len(text) <= 8, out
    for noise in ("Traceback", "Nanny", "tornado", "NameError", "Exception"):
        assert noise not in out, out
    run_id = run.info.run_id
    killed = text[-1]
    assert f"MLflow run {run_id} KILLED (SIGINT, stopped at iteration " in killed
    assert killed.endswith(f"with: isparse-run resume={run_id} paths.outputs={tmp_path} engine=dask cluster=local "
                           f"cluster.n_workers=2")
    ck = int(re.search(r"continue it from iteration (\d+)", killed).group(1))
    after = client.get_run(run_id)
    assert after.info.status == "KILLED" and "KeyboardInterrupt" in after.data.tags["error"]
    stopped = int(re.search(r"stopped at iteration (\d+)", killed).group(1))
    assert ck == after.data.metrics["checkpoint/iteration"] == stopped and ck >= 100   # a checkpoint at the interrupt
    assert len(client.get_metric_history(run_id, "dist_sq")) >= 3       # what was logged is kept
    assert "checkpoint.pkl" in {a.path for a in client.list_artifacts(run_id)}
    time.sleep(1.0)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_resume_command_keeps_where_the_store_is():
    assert resume_command("abc", ["tol=1e-9", "paths.outputs=/a b", "engine=inprocess", "resume=old",
                                  "cluster.n_workers=3", "tracking.uri=http://h:5000"]) == \
        "isparse-run resume=abc 'paths.outputs=/a b' engine=inprocess cluster.n_workers=3 tracking.uri=http://h:5000"


def _ignores_sigint(pid) -> bool:
    """Whether process ``pid`` ignores SIGINT (its SigIgn mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(int(line.split()[1], 16) for line in fh if line.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return False
    return bool(mask & (1 << (signal.SIGINT - 1)))


def _spawned(child) -> bool:
    """A multiprocessing spawn child (a short-lived helper may exit, or be a zombie, while it is looked at)."""
    import psutil

    try:
        return any("spawn_main" in a for a in child.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


@pytest.mark.slow
def test_ctrl_c_while_the_dask_cluster_starts(tmp_path):
    """SIGINT to the process group while the LocalCluster starts (its two worker processes spawned and already
    ignoring SIGINT, still importing): the client takes it once the cluster is up and closes it quietly (interrupted
    inside LocalCluster(), the half-made cluster was closed by Dask's exit hook with a traceback); no traceback."""
    import psutil

    proc = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", "progress=false", "engine=dask", "cluster=local",
                             "cluster.n_workers=2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            spawned = [c for c in psutil.Process(proc.pid).children(recursive=True) if _spawned(c)]
            if len(spawned) >= 2 and all(_ignores_sigint(c.pid) for c in spawned):
                break
            time.sleep(0.05)
        out = _ctrl_c(proc)
    finally:
        _kill_if_running(proc)
    assert "Traceback" not in out and "Exception" not in out and len(lines(out)) <= 8, out
    last = lines(out)[-1]
    assert last == "isparse-run: interrupted (SIGINT) before its MLflow run was made: nothing was logged" or \
        "KILLED (SIGINT, stopped at iteration 0)" in last, out


@pytest.mark.slow
def test_a_run_says_what_produced_it_and_on_what(tmp_path):
    """Issue 34: runs carried no code version and no data set (the UI's Source "-", Dataset "-"). Now MLflow's
    conventions: the mlflow.source.* tags (the command, the checkout's git commit), the packages' versions, and the
    data set as a dataset input with its digest (here the SHA-256 of the data file, computed by the test)."""
    import hashlib
    from importlib import metadata

    data_dir = Path(os.environ.get("ISPARSE_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    if not (data_dir / "a1a").is_file():
        pytest.skip("needs ../shared/datasets/a1a")
    proc = cli(tmp_path, *TINY, "data=a1a", f"data.dir={data_dir}", "max_iter=3", "workers.n=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, runs = store(tmp_path)
    (run,) = runs
    tags = run.data.tags
    assert tags["mlflow.source.name"] == "isparse-run" and tags["mlflow.source.type"] == "LOCAL"
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        assert tags["mlflow.source.git.commit"] == head.strip() and tags["isparse.git_dirty"] in ("true", "false")
    assert f"numpy {metadata.version('numpy')}" in tags["isparse.versions"]
    assert f"mlflow {metadata.version('mlflow')}" in tags["isparse.versions"]
    (inp,) = client.get_run(run.info.run_id).inputs.dataset_inputs
    sha = hashlib.sha256((data_dir / "a1a").read_bytes()).hexdigest()
    assert inp.dataset.name == "a1a" and inp.dataset.digest == sha[:36]
    assert str((data_dir / "a1a").resolve()) in inp.dataset.source or str(data_dir / "a1a") in inp.dataset.source
    assert [t.value for t in inp.tags if t.key == "mlflow.data.context"] == ["training"]
