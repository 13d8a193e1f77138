"""One exit path for bad input (issue 20): every console script, for a config error, a data-file error, a missing file
and an unknown group option, prints one line ``<program>: error: <message>`` on stderr and exits with status 2; the
traceback comes first only with HYDRA_FULL_ERROR=1. In a sweep: one line per failed job, then one summary line."""

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
#: program name -> its command
PROGRAMS = {"isparse-run": [str(BIN / "isparse-run")], "isparse-plan": [str(BIN / "isparse-plan")],
            "isparse-report": [str(BIN / "isparse-report")],
            "python -m pipeline.tracking": [sys.executable, "-m", "pipeline.tracking"]}
TINY = ["engine=inprocess", "progress=false", "checkpoint.every=0"]


def run(program, *args, tmp_path, env=None):
    hydra = program in ("isparse-run", "isparse-plan")
    cmd = [*PROGRAMS[program], *args] + ([f"paths.outputs={tmp_path}"] if hydra else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


def one_line(proc, program, text):
    """The process printed exactly one line, ``<program>: error: ...`` holding ``text``, on stderr and exited 2."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{program}: error: ") and text in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A malformed LIBSVM file (unsorted indices on line 3), a store with a finished run, an unsent-metrics file."""
    d = tmp_path_factory.mktemp("files")
    (d / "bad.svm").write_text("1 1:1\n# comment\n-1 3:1.0 1:2.0\n")
    (d / "huge.svm").write_text("1 1:1\n-1 3000000000:1\n")
    (d / "trunc.svm.gz").write_bytes(gzip.compress(b"1 1:1\n-1 2:1\n" * 50)[:20])
    (d / "unsent.jsonl").write_text('{"run_id": "abc", "status": "RUNNING"}\n')
    (d / "notadb.db").write_text("not a database\n")
    return d


CASES = [
    # (program, arguments, the text the one line must hold)
    ("isparse-run", [*TINY, "tol=-1"], "The 'tol' parameter must be in [0, inf); got -1."),            # config
    ("isparse-run", [*TINY, "data=libsvm", "data.path={files}/bad.svm"],                             # data file
     "bad.svm is not a valid LIBSVM file (line 3: '-1 3:1.0 1:2.0': feature index 1 follows index 3"),
    ("isparse-run", [*TINY, "data=libsvm", "data.path={files}/missing.svm"], "'data.path' parameter must be an existing file"),
    ("isparse-run", [*TINY, "cluster=yarn"], "The 'cluster' parameter must be one of address, emulated, kubernetes, local, slurm, ssh; got 'yarn'"),
    ("isparse-run", [*TINY, "workers.n=(4"], "the override 'workers.n=(4' cannot be parsed"),
    ("isparse-run", [*TINY, "data=libsvm", "data.path={files}/huge.svm"],
     "huge.svm is not a valid LIBSVM file (line 2: '-1 3000000000:1': feature index 3000000000 is too large"),
    ("isparse-run", [*TINY, "data=libsvm", "data.path={files}/trunc.svm.gz"],
     "trunc.svm.gz cannot be decompressed as a .gz file"),
    ("isparse-run", [*TINY, "data=libsvm", "data.path={files}"], "got '{files}': a directory"),
    ("isparse-run", [*TINY, "workers.n=${{oops}}"], "the config cannot be resolved: Interpolation key 'oops' not found"),
    ("isparse-run", [*TINY, "algorithm=3"], "The 'algorithm' parameter must be one of asgd, "),
    ("isparse-run", [*TINY, "algorithm=[isgd,isega]"], "not a list; got 'algorithm=[isgd,isega]' (to run each: "
                                                       "isparse-run -m algorithm=isgd,isega)"),
    ("isparse-run", [*TINY, "~algorithm"], "The 'algorithm' parameter cannot be deleted (~algorithm)"),
    ("isparse-run", [*TINY, "~workers.n"], "The 'workers.n' parameter cannot be deleted (~workers.n)"),
    ("isparse-run", [*TINY, "workers=3"], "The 'workers' parameter is a section, not a value"),
    ("isparse-run", [*TINY, "tracking.uri=file:///tmp/x"], "The 'tracking.uri' parameter must be an MLflow store"),
    ("isparse-run", [*TINY, "tracking.uri=sqlite:///{files}"], "must name a sqlite file, not a directory"),
    ("isparse-run", [*TINY, "tracking.uri=sqlite:///{files}/notadb.db"], "the file is not a sqlite database"),
    ("isparse-report", ["--uri", "sqlite:///{files}/notadb.db"], "the file is not a sqlite database"),
    ("isparse-run", [*TINY, "cluster=address", "cluster.address=tcp://127.0.0.1:99999"],
     "The 'cluster.address' parameter must be null or a scheduler address"),
    ("isparse-run", [*TINY, "cluster=address", "cluster.address=nohost"], "got 'nohost'"),
    ("isparse-run", [*TINY, "--nosuchflag"], "unrecognized arguments: --nosuchflag"),
    ("isparse-plan", [*TINY, "plan.rounds=1"], "The 'plan.rounds' parameter must be in [2, inf); got 1."),
    ("isparse-plan", [*TINY, "data=libsvm", "data.path={files}/bad.svm"], "feature index 1 follows index 3"),
    ("isparse-plan", [*TINY, "data=libsvm", "data.path={files}/missing.svm"], "'data.path' parameter must be an existing file"),
    ("isparse-plan", [*TINY, "algorithm=adam"], "The 'algorithm' parameter must be one of"),
    ("isparse-report", ["--uri", "sqlite:///{files}/missing/mlflow.db"], "The '--uri' parameter must name an existing MLflow store"),
    ("isparse-report", ["--parent"], "argument --parent: expected one argument"),
    ("isparse-report", ["--experiment"], "argument --experiment: expected one argument"),
    ("python -m pipeline.tracking", ["import", "{files}/missing.jsonl", "--uri", "sqlite:///{files}/s.db"],
     "The 'file' parameter must be an existing unsent_metrics.jsonl file"),
    ("python -m pipeline.tracking", ["import", "{files}/unsent.jsonl", "--uri", "sqlite:///{files}/missing.db"],
     "The '--uri' parameter must name an existing MLflow store"),
    ("python -m pipeline.tracking", ["export", "x", "--uri", "u"], "argument command: invalid choice: 'export'"),
]


@pytest.mark.parametrize("program, args, text", CASES, ids=[f"{p} {' '.join(a)}"[:70] for p, a, _ in CASES])
def test_bad_input_is_one_line_and_status_2(files, tmp_path, program, args, text):
    proc = run(program, *[a.format(files=files) for a in args], tmp_path=tmp_path)
    one_line(proc, program, text.format(files=files))
    assert not (tmp_path / "mlflow.db").exists()                     # refused before any work


@pytest.mark.slow
def test_an_unknown_experiment_of_the_report_is_one_line(tmp_path):
    from pipeline.tracking import client_for

    client_for(f"sqlite:///{tmp_path}/mlflow.db").search_experiments()   # an existing (empty) store
    proc = run("isparse-report", "--uri", f"sqlite:///{tmp_path}/mlflow.db", "--experiment", "nosuch", tmp_path=tmp_path)
    one_line(proc, "isparse-report", "The '--experiment' parameter must name an MLflow experiment; got 'nosuch'")


def test_a_gzipped_libsvm_file_is_read_with_the_same_checks(tmp_path):
    """scikit-learn reads .gz: the same checks name the physical line in the decompressed text (a label-only row was
    an IndexError)."""
    from isparse import DataError, load_libsvm

    good = tmp_path / "rows.svm.gz"
    with gzip.open(good, "wt") as fh:
        fh.write("1 1:0.5 2:1\n# c\n-1\n1 2:2\n")                    # line 3: a label-only row (kept, with a warning)
    with pytest.warns(UserWarning, match=r"1 rows have no features \(the first at line 3\)"):
        data = load_libsvm(good)
    assert data.A.shape == (3, 2) and list(data.b) == [1.0, -1.0, 1.0] and data.labels == "-1 -> -1, 1 -> +1"
    bad = tmp_path / "bad.svm.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write("1 1:1\n\n-1 2:1 1:3\n")
    with pytest.raises(DataError, match=r"bad.svm.gz is not a valid LIBSVM file \(line 3: '-1 2:1 1:3': feature index 1 "
                                        r"follows index 2"):
        load_libsvm(bad)


def test_an_empty_outputs_path_is_refused_before_any_directory_is_made(tmp_path):
    proc = subprocess.run([*PROGRAMS["isparse-run"], *TINY, "paths.outputs="], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    one_line(proc, "isparse-run", "The 'paths.outputs' parameter must be a non-empty path")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_unsent_metrics_file_is_checked_line_by_line(tmp_path):
    from pipeline.tracking import client_for

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = client_for(uri).create_run(client_for(uri).create_experiment("e")).info.run_id
    bad = tmp_path / "unsent.jsonl"
    bad.write_text(f'{{"run_id": "{run_id}", "status": "FINISHED"}}\nnot json\n')
    proc = run("python -m pipeline.tracking", "import", str(bad), "--uri", uri, tmp_path=tmp_path)
    one_line(proc, "python -m pipeline.tracking", "line 2")
    bad.write_text('{"run_id": "0123456789abcdef", "status": "FINISHED"}\n')
    proc = run("python -m pipeline.tracking", "import", str(bad), "--uri", uri, tmp_path=tmp_path)
    one_line(proc, "python -m pipeline.tracking", "0123456789abcdef")


def test_the_traceback_only_with_hydra_full_error(tmp_path):
    proc = run("isparse-run", *TINY, "tol=-1", tmp_path=tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr and "isparse.errors.ConfigError" in proc.stderr
    assert proc.stderr.splitlines()[-1] == "isparse-run: error: The 'tol' parameter must be in [0, inf); got -1."


@pytest.mark.slow
def test_a_sweep_prints_each_failed_job_once_and_a_summary(tmp_path):
    """Two of three jobs fail on their config: one line each when it fails, one summary line at the end; exit 2."""
    proc = run("isparse-run", "-m", *TINY, "tol=-1,1e-4,-2", "max_iter=10", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 3, proc.stderr
    assert lines[0].startswith("isparse-run: error: job #0 (") and "The 'tol' parameter must be in [0, inf); got -1." in lines[0]
    assert lines[1].startswith("isparse-run: error: job #2 (") and "got -2." in lines[1]
    assert lines[2].startswith("isparse-run: sweep: 2 of 3 jobs FAILED (#0, #2): parent MLflow run ")
    assert "Traceback" not in proc.stdout + proc.stderr and "Error executing job" not in proc.stderr
    # issue 34: each failed job's main.log holds its error line (it was empty); the end lists every job
    (sweep_dir,) = (tmp_path / "multirun").glob("*/*")
    assert lines[0] in (sweep_dir / "0" / "main.log").read_text()
    assert lines[1] in (sweep_dir / "2" / "main.log").read_text()
    out = proc.stdout
    assert "sweep: 3 jobs (iterations, tol reached, uplink bytes):" in out, out[-3000:]
    assert re.search(r"#0 [^\n]*tol=-1 [^\n]*: FAILED, -, -, -", out) and re.search(r"#2 [^\n]*tol=-2 [^\n]*: FAILED, -, -, -", out)
    assert re.search(r"#1 [^\n]*tol=1e-4 [^\n]*: FINISHED, \d+ it, (not )?converged, [\d.]+ MB up", out), out[-3000:]
    assert out.count("mlflow ui --backend-store-uri") == 1      # the sweep's line, not one per job


@pytest.mark.needs_data
@pytest.mark.slow
def test_a_truncated_cache_file_is_made_again_and_the_run_goes_on(tmp_path):
    """Issue 34: the cache holds derived data; a cache file cut short (``truncate -s 1000``) was two tracebacks and
    exit status 1 with no run. Now one warning line names the file, the entry is made again, the run finishes."""
    from mlflow.tracking import MlflowClient

    args = [*TINY, "data=a1a", "max_iter=20", "workers.n=2"]
    first = run("isparse-run", *args, tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    entries = sorted((tmp_path / "cache").glob("*.npz"))
    assert len(entries) == 2                                   # the parsed a1a and the reference solution
    import numpy as np

    def arrays(path):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}

    before = {p: arrays(p) for p in entries}
    for p in entries:
        os.truncate(p, 1000)
    proc = run("isparse-run", *args, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    for p in entries:
        lines = [line for line in out.splitlines() if f"cache: {p} is damaged (" in line]
        assert len(lines) == 1, out[-3000:]
        assert "(BadZipFile: File is not a zip file); making the " in lines[0] and lines[0].endswith(" again")
        again = arrays(p)                                      # made again, the same arrays
        assert again.keys() == before[p].keys() and all(np.array_equal(again[k], before[p][k]) for k in again)
    assert not list((tmp_path / "cache").glob("*.tmp.npz"))
    exp = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_experiment_by_name("isparse")
    runs = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").search_runs([exp.experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory on a read-only tmpfs (root mounts it; unmounted after the test)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {proc.stderr.strip()}")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


@pytest.mark.slow
def test_outputs_or_store_that_cannot_be_written_is_one_line_naming_its_key(tmp_path, read_only_dir):
    """Issue 34: ``paths.outputs`` under a regular file ("Not a directory: ...") or on a read-only file system, and a
    sqlite store there ("Read-only file system"), are one line naming the key and why, exit 2, and nothing made."""
    (tmp_path / "afile").write_text("x")
    cases = [
        ([f"paths.outputs={tmp_path}/afile/out"], "The 'paths.outputs' parameter must be a directory this run can "
                                                  "make and write", f"{tmp_path}/afile is a regular file"),
        ([f"paths.outputs={read_only_dir}/out"], "The 'paths.outputs' parameter", f"{read_only_dir} is on a read-only "
                                                                                   "file system"),
        ([f"paths.outputs={tmp_path}/out", f"tracking.uri=sqlite:///{read_only_dir}/mlflow.db"],
         "The 'tracking.uri' parameter names a sqlite file this run cannot write",
         f"{read_only_dir} is on a read-only file system"),
    ]
    for args, key_text, why in cases:
        proc = subprocess.run([*PROGRAMS["isparse-run"], *TINY, *args], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
        one_line(proc, "isparse-run", key_text)
        assert why in proc.stderr, proc.stderr
    assert not (tmp_path / "out" / "mlflow.db").exists() and not list(read_only_dir.iterdir())


@pytest.mark.parametrize("experiment, swept", [("isega_vs_gd", "+arm, data, workers.n"),
                                               ("tau_sweep_quick", "algorithm, data, workers.n, tau, seed")])
def test_a_sweep_experiment_without_m_is_refused(tmp_path, experiment, swept):
    """Issue 34: ``isparse-run +experiment=isega_vs_gd`` without ``-m`` ran one ISEGA job on breast_cancer into the
    experiment's MLflow experiment and exited 0. Now: one line naming the swept keys and the command with -m, exit 2,
    no MLflow store made."""
    proc = run("isparse-run", f"+experiment={experiment}", tmp_path=tmp_path)
    one_line(proc, "isparse-run", f"+experiment={experiment} is a sweep (hydra.sweeper.params: {swept}): without -m "
                                  f"one job of the base config would run instead; run it with -m: isparse-run -m "
                                  f"+experiment={experiment}")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_missing_named_set_shows_the_data_dir_as_given(tmp_path):
    """Issue 34: the error named the resolved target of a link; now the path as given (the link)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    proc = run("isparse-run", *TINY, "data=a1a", f"data.dir={tmp_path}/link", tmp_path=tmp_path)
    one_line(proc, "isparse-run", f"The data set 'a1a' was not found: no file '{tmp_path}/link/a1a' (set 'data.dir'")
    assert f"{tmp_path}/real" not in proc.stderr
