"""Bad input: one clear error, before any work, naming the file and physical line or the key; nothing ignored.

Issue 12 ("What a user sees"): every case here was tried on the CLI. Data files are written into tmp_path;
configs are composed from the real conf/ (Hydra's compose API) and run with the real ``run_job`` against a
real sqlite MLflow store under tmp_path; the chdir case runs the real ``isparse-run`` in a subprocess.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from mlflow.tracking import MlflowClient

from isparse import ConfigError, DataError, load_dataset, load_libsvm
from specs import make
from isparse.data import Dataset
from pipeline.job import run_job

CLI = str(Path(sys.executable).parent / "isparse-run")


def runs_in(store_dir):
    """The runs of experiment 'isparse' in the sqlite store of ``store_dir`` ([] if there is no store)."""
    if not (Path(store_dir) / "mlflow.db").is_file():
        return []
    client = MlflowClient(f"sqlite:///{store_dir}/mlflow.db")
    exp = client.get_experiment_by_name("isparse")
    return client.search_runs([exp.experiment_id]) if exp else []


# -- data files: (content, loader keywords, physical line named, what the message must say) -------------------
BAD_FILES = {
    # 1. unsorted and repeated indices (scikit-learn names neither line nor index)
    "unsorted": ("1 1:1\n# comment\n\n-1 3:1.0 1:2.0\n", {}, 4, "feature index 1 follows index 3"),
    "duplicate": ("-1 1:1\n1 1:1 1:2\n", {}, 2, "feature index 1 repeats"),
    # 2. a multilabel line (sklearn: "could not convert string to float: b'1,2'")
    "multilabel": ("# header\n1,2 1:1\n", {}, 2, "multilabel files are not supported; a label must be one number"),
    # 3. physical lines: the comment and blank lines before the bad row count
    "nan_after_comments": ("# a\n\n1 1:0.5\n-1 2:nan\n", {}, 4, "NaN or infinite feature value in row 2"),
    "nan_label": ("1 1:1\n# x\nnan 1:2\n", {}, 3, "labels contain NaN or infinite values"),
    "empty_row": ("# c\n1 1:1\n\n-1\n", {"empty_rows": "error"}, 4, "1 rows have no features"),
    "third_label": ("# c\n1 1:1\n\n-1 1:2\n2 1:1\n", {}, 5, "the third distinct label, 2"),
    # 6. values whose squares (hence L) overflow float64; the second made gamma = nan before
    "huge_value": ("1 1:1\n# c\n-1 1:1e300\n", {}, 3, "has an infinite square in float64"),
    "square_overflow": ("1 2:1\n\n-1 1:1e160\n", {}, 3, "has an infinite square in float64"),
    "sum_overflow": ("1 1:1e154 2:1e154\n", {}, 1, "the sum of the squared values of rows 1 to 1 overflows"),
    # nothing reinterpreted or dropped: index 0 (sklearn's 'auto' would switch the whole file to 0-based), qid
    "index_zero": ("1 1:1\n-1 0:1 2:1\n", {}, 2, "feature index 0: LIBSVM indices start at 1"),
    "qid": ("1 qid:3 1:1\n", {}, 1, "query ids (a ranking file) are not supported"),
    "not_a_number": ("1 1:1\n\n-1 2:abc\n", {}, 3, "the value 'abc' of feature index 2 is not a number"),
    "past_dimension": ("1 1:1\n#\n-1 9:1\n", {"n_features": 5}, 3, "feature index 9 is past the declared dimension 5"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_data_file_names_file_physical_line_and_problem(tmp_path, case):
    text, kwargs, line, what = BAD_FILES[case]
    path = tmp_path / f"{case}.svm"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        load_libsvm(path, **kwargs)
    msg = str(err.value)
    assert "\n" not in msg                      # one line
    assert str(path) in msg                     # the file
    assert f"line {line}" in msg, msg           # the physical line (comment and blank lines counted)
    assert what in msg, msg                     # the problem (and what is allowed)
    # the physical line named is the one that holds the problem
    assert text.splitlines()[line - 1].strip()


def test_the_line_named_is_the_one_with_the_index_or_value(tmp_path):
    """The message quotes the offending line itself, not only its number."""
    path = tmp_path / "u.svm"
    path.write_text("# c\n1 2:1 5:1\n\n-1 4:1 2:7\n")
    with pytest.raises(DataError, match=r"line 4: '-1 4:1 2:7': feature index 2 follows index 4"):
        load_libsvm(path)


def test_kappa_overflow_through_lam_names_the_file_and_row(tmp_path):
    """Finite squares (1e150**2 = 1e300) but kappa = L/mu > 1e308 with lam = 1e-10: refused before the reference
    solve, naming the file, the row of the largest squared norm and its line (the comment counts)."""
    path = tmp_path / "big.svm"
    path.write_text("1 1:1 2:1\n# c\n-1 1:1e150\n1 2:1\n-1 1:1 2:2\n")
    data = load_libsvm(path)   # the values themselves are fine
    with pytest.raises(DataError) as err:
        make(algorithm="isega", data=data, lam=1e-10, n=2, block_size=1)
    msg = str(err.value)
    assert str(path) in msg and "row 2 (line 3)" in msg and "kappa = L/mu" in msg and "\n" not in msg
    # and with a lambda that keeps kappa finite (1e300/4 / 1e-3 < 1e308) the same data build
    assert make(algorithm="isega", data=data, lam=1e-3, n=2, block_size=1).problem.L > 1e299


def test_a_singular_hessian_in_the_reference_solve_is_a_data_error():
    """a1a's first 60 rows x 1e10 (squares finite, kappa ~ 1e22): the dense Newton step of the reference solve meets an
    exactly singular float64 Hessian; that is one DataError line naming the source, lam and what to change (it was a
    LinAlgError traceback)."""
    import dataclasses

    d = load_dataset("a1a")
    big = dataclasses.replace(d, A=d.A[:60] * 1e10, b=d.b[:60])
    with pytest.raises(DataError) as err:
        make(algorithm="isega", data=big, lam=1e-3, n=4)
    msg = str(err.value)
    assert "\n" not in msg and d.source in msg and "Hessian is singular in float64" in msg and "rescale" in msg


def test_in_memory_data_with_overflowing_squares_is_refused_before_the_solve():
    """An in-memory Dataset bypasses the loader: GLMProblem's check names its source and the row."""
    A = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1e200], [1.0, 1.0]]))
    data = Dataset(A=A, b=np.array([1.0, -1.0, 1.0]), name="mem", source="memory")
    with pytest.raises(DataError, match=r"memory: .*row 2 has the squared norm inf"):
        make(algorithm="isega", data=data, lam=1e-3, n=1, block_size=1)


# -- 4. data.n_features on the named sets ---------------------------------------------------------------------
def test_n_features_of_a_named_set_smaller_than_its_largest_index_is_refused(compose, tmp_path):
    cfg = compose([f"paths.outputs={tmp_path}", "engine=inprocess", "data=a9a", "data.n_features=100"])
    with pytest.raises(DataError) as err:
        run_job(cfg)
    msg = str(err.value)
    a9a = Path(os.environ["ISPARSE_DATA_DIR"]) / "a9a"
    assert str(a9a) in msg and "past the declared dimension 100" in msg and "data.n_features" in msg
    line = int(msg.split("(line ")[1].split(":")[0])
    tokens = a9a.read_text().splitlines()[line - 1].split()[1:]
    assert max(int(t.split(":")[0]) for t in tokens) > 100   # that line does hold an index past 100
    assert runs_in(tmp_path) == []


def test_n_features_of_a_named_set_larger_pads_zero_columns(compose, tmp_path):
    """data=a1a data.n_features=130: the job's own data path (its checked config's source, read as the job reads it)
    gives d = 130, the file's 123 columns and 7 zero ones; the run's problem has that d (a whole CLI run costs
    ~20 s here)."""
    from pipeline.schema import load_job

    cfg = compose([f"paths.outputs={tmp_path}", "engine=inprocess", "data=a1a", "data.n_features=130"])
    job = load_job(cfg)
    assert job.data.n_features == 130
    padded = job.data.dataset(job.cache_dir)
    plain = load_dataset("a1a")
    assert padded.A.shape == (1605, 130) and padded.A[:, 123:].nnz == 0
    assert (padded.A[:, :123] != plain.A).nnz == 0
    s = make(algorithm="isega", data=padded, lam=job.lam, n=job.workers.n, block_size=job.blocks.size)
    assert s.derived["d"] == 130 and s.derived["m"] == 130 and np.all(s.reference.x_star[123:] == 0)
    assert runs_in(tmp_path) == []


# -- 7. every other input: refused before any work, naming the key; nothing ignored -----------------------------
BAD_KEYS = [
    (["+algorithm.batch=4"], "algorithm.batch", r"not a key of algorithm=isega \(it would be ignored\); known: name, module"),
    (["algorithm=isgd", "algorithm.batch=2.5"], "algorithm.batch", r"must be an integer in \[1, inf\); got 2.5"),
    (["algorithm=isgd", "algorithm.schedule=fast"], "algorithm.schedule", "must be one of constant, decreasing"),
    (["algorithm=isgd", "+algorithm.rho=2"], "algorithm.rho", r"known: name, module, batch, schedule\."),
    (["algorithm=diana", "algorithm.alpha=0"], "algorithm.alpha", r"must be null or in \(0, 1\]; got 0"),
    (["algorithm=iasgd", "algorithm.rho=0.5"], "algorithm.rho", r"must be null or in \[1, inf\); got 0.5"),
    (["problem.lam=-1"], "problem.lam", r"must be null or in \(0, inf\); got -1"),
    (["problem.lam=inf"], "problem.lam", "a finite number; got inf"),
    (["problem.lam='0.1'"], "problem.lam", r"must be null or a number in \(0, inf\); got '0.1'"),   # a string: refused
    (["data=quadratic", "problem.lam=0.1"], "problem.lam", "must be 0 or null for data=quadratic"),
    (["data=quadratic", "problem.loss=squared"], "problem.loss", "must be logistic for data=quadratic"),
    (["data=quadratic", "workers.split=contiguous"], "workers.split", "must be shuffle for data=quadratic"),
    (["data=quadratic", "data.seed=-1"], "data.seed", r"must be in \[0, inf\); got -1"),
    (["workers.split=random"], "workers.split", "must be one of shuffle, contiguous"),
    (["workers.split_seed=-1"], "workers.split_seed", r"must be in \[0, inf\); got -1"),
    (["workers.split_seed=1.5"], "workers.split_seed", "must be an integer"),
    (["problem.reg_strength=0.1"], "problem.reg_strength", "must be 0 with problem.reg=none"),
    (["algorithm=isega", "problem.reg=l1", "problem.reg_l2=0.1"], "problem.reg_l2", "must be 0 with problem.reg=l1"),
    (["problem.reg=l1", "problem.reg_strength=-1"], "problem.reg_strength", r"must be in \[0, inf\); got -1"),
    (["problem.reg=box", "problem.box=[1,0]"], "problem.box", "two numbers with lower < upper"),
    (["problem.reg=box", "problem.box=[0]"], "problem.box", "two numbers with lower < upper"),
    (["problem.reg=elastic"], "problem.reg", "must be one of none, l1, l2, elastic_net, box"),
    (["tol=inf"], "tol", "must be a finite number"),
    (["step.multiplier=inf"], "step.multiplier", "must be a finite number"),
    (["max_iter=1.5"], "max_iter", "must be an integer"),
    (["tracking.log_every=0"], "tracking.log_every", r"must be in \[1, inf\); got 0"),
    (["messages.send_ids=yes"], "messages.send_ids", "must be true or false; got 'yes'"),
    (["progress=yes"], "progress", "must be true or false; got 'yes'"),
    (["cache=0"], "cache", "must be true or false; got 0"),
    (["report.auto=maybe"], "report.auto", "must be true or false; got 'maybe'"),
    (["cluster.rounds=rpc"], "cluster.rounds", "must be one of stream, actor; got 'rpc'"),
    (["+data.n_features=40"], "data.n_features", "not a key of data=breast_cancer"),
    (["data=a1a", "+data.path=/x.svm"], "data.path", "not a key of data=a1a"),
    (["data=a1a", "data.n_features=0"], "data.n_features", r"must be null or in \[1, inf\); got 0"),
    (["data=a1a", "data.n_features=130.5"], "data.n_features", "must be null or an integer"),
    (["data=libsvm"], "data.path", r"must be set \(a LIBSVM file for data=libsvm\)"),
    (["data=a1a", "data.dir=rel/nowhere"], "data.dir", "must be an existing directory"),
    (["tracking.experiment=null"], "tracking.experiment", "must be a non-empty string; got None"),
    (["tracking.run_name=''"], "tracking.run_name", "must be null or a non-empty string; got ''"),
    (["+problem.lamda=0.1"], "problem.lamda", r"not a key of problem \(it would be ignored\); known: loss, penalty"),
    (["+max_iters=100"], "max_iters", r"not a key of the config \(it would be ignored\)"),
    (["resume=0123456789abcdef", "max_iter=5"], "resume", r"got 'max_iter=5' \(it would be ignored\)"),
]


@pytest.mark.parametrize("overrides, key, text", BAD_KEYS)
def test_bad_key_is_refused_before_any_work(compose, tmp_path, overrides, key, text):
    cfg = compose([f"paths.outputs={tmp_path}", "engine=inprocess", *overrides])
    with pytest.raises(ConfigError, match=text) as err:
        run_job(cfg)
    assert err.value.key == key
    assert f"'{key}'" in str(err.value) and "\n" not in str(err.value)
    assert runs_in(tmp_path) == [] and not (tmp_path / "mlflow.db").exists()   # no store, no run: no work


def test_huge_value_file_is_refused_before_any_run(compose, tmp_path):
    """6. on the CLI path: the file that 'converged' in 0 iterations at x = 0 now fails, naming file and line."""
    path = tmp_path / "huge.svm"
    path.write_text("1 1:1 2:1\n-1 1:2\n1 2:1e300\n-1 1:1 2:1\n")
    cfg = compose([f"paths.outputs={tmp_path}", "engine=inprocess", "data=libsvm", f"data.path={path}"])
    with pytest.raises(DataError, match=rf"{path}: row 3 \(line 3, feature index 2\): the value 1e\+300"):
        run_job(cfg)
    assert runs_in(tmp_path) == []


# -- 5. hydra.job.chdir=true: relative paths mean the directory the command ran in; one MLflow store -----------
@pytest.mark.slow
def test_chdir_resolves_relative_paths_against_the_command_directory_and_makes_one_store(tmp_path):
    (tmp_path / "sub").mkdir()
    rows = "".join(f"{1 if k % 2 else -1} 1:{(k % 5) / 5:.1f} 2:{(k % 3) / 3:.3f} 3:1\n" for k in range(40))
    (tmp_path / "sub" / "tiny.svm").write_text(rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([CLI, "engine=inprocess", "data=libsvm", "data.path=sub/tiny.svm", "hydra.job.chdir=true",
                           "max_iter=20", "progress=false", "checkpoint.every=0", "workers.n=2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stores = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("mlflow.db"))
    assert stores == [Path("outputs/mlflow.db")]                       # the default store, and only it
    # the artifacts beside it (MLflow's default ./mlruns would be the job directory's)
    assert not list(tmp_path.rglob("mlruns"))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("mlartifacts")) == [Path("outputs/mlartifacts")]
    (run,) = runs_in(tmp_path / "outputs")
    artifacts = tmp_path / "outputs" / "mlartifacts" / "isparse" / run.info.run_id / "artifacts"
    assert (artifacts / "x_final.npy").is_file() and (artifacts / "config.yaml").is_file()
    assert run.data.params["data.source"] == str((tmp_path / "sub" / "tiny.svm").resolve())
    assert run.data.params["N"] == "40" and run.data.params["d"] == "3"
    jobs = list((tmp_path / "outputs" / "runs").glob("*/*"))
    assert len(jobs) == 1 and (jobs[0] / "x_final.npy").is_file()     # the job dir is under the default outputs


def test_relative_outputs_and_sqlite_uri_mean_the_command_directory_under_chdir(compose, tmp_path, monkeypatch):
    """paths.outputs=out (relative) with hydra.job.chdir=true: the store and the cache stay in <cwd>/out, not in the
    job directory the process has moved to (what Hydra's run_job does before calling the task)."""
    from pipeline.schema import load_job

    job_dir = tmp_path / "out" / "runs" / "job"
    job_dir.mkdir(parents=True)
    for overrides, uri in ((["paths.outputs=out"], tmp_path.resolve() / "out" / "mlflow.db"),
                           (["tracking.uri=sqlite:///rel/mlflow.db"], tmp_path.resolve() / "rel" / "mlflow.db")):
        monkeypatch.chdir(tmp_path)                              # where the command runs
        cfg = compose([*overrides, "hydra.job.chdir=true"])
        monkeypatch.chdir(job_dir)                               # the job's working directory
        job = load_job(cfg)
        assert job.tracking.uri == f"sqlite:///{uri}"
        assert Path(job.paths.outputs).is_absolute()
    assert job.paths.outputs == str(tmp_path.resolve() / "outputs")   # the default: the command's directory


def test_resume_of_an_unknown_run_says_mlflows_reason(compose, tmp_path):
    """resume=<an id the store does not hold>: one line naming the key, the store and MLflow's reason (it was a bare
    exception class name, 'MlflowException')."""
    from mlflow.tracking import MlflowClient

    from pipeline.tracking import experiment_id

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    experiment_id(MlflowClient(uri), "isparse", uri)   # the store exists; the run does not
    cfg = compose([f"paths.outputs={tmp_path}", "engine=inprocess", "resume=deadbeef"])
    with pytest.raises(ConfigError) as err:
        run_job(cfg)
    assert err.value.key == "resume" and "\n" not in str(err.value)
    assert str(err.value).startswith(f"The 'resume' parameter must be the id of a run in {uri} ")
    assert str(err.value).endswith("got 'deadbeef': Run with id=deadbeef not found.")
