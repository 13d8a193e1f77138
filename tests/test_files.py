"""A data set in many LIBSVM files (``data=libsvm_files``), each file read by the Dask worker it is given to and by no
other process (issue 47, point 3)."""

import sys
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from conftest import DATA_DIR

pytestmark = pytest.mark.needs_data

CLI = str(Path(sys.executable).parent / "isparse-run")
RUN = ["progress=false", "checkpoint.every=0", "algorithm=isega", "workers.split=contiguous", "max_iter=60",
       "tracking.log_every=10", "problem.lam=0.01"]


def split_file(source: Path, out: Path, parts: int) -> list[Path]:
    """``source``'s data lines cut into ``parts`` files as numpy.array_split cuts them (and ``all.svm``, all of
    them in one file)."""
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for k, rows in enumerate(np.array_split(np.arange(len(lines)), parts)):
        files.append(out / f"part-{k}.svm")
        files[-1].write_text("\n".join(lines[i] for i in rows) + "\n")
    (out / "all.svm").write_text("\n".join(lines) + "\n")
    return files


def cli(out: Path, *overrides, timeout=300):
    return subprocess.run([CLI, f"paths.outputs={out}", f"tracking.uri=sqlite:///{out}/mlflow.db", *RUN, *overrides],
                          capture_output=True, text=True, timeout=timeout, cwd=out.parent)


def finished(out: Path) -> tuple[np.ndarray, list]:
    """The one run's final x (its artifact) and its dist_sq history."""
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    assert run.info.status == "FINISHED"
    x = np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out)))
    return x, [m.value for m in client.get_metric_history(run.info.run_id, "dist_sq")]


@pytest.mark.filterwarnings("ignore:.*rows have no features")
def test_four_files_on_the_dask_workers_give_the_iterates_of_one_file(tmp_path):
    split_file(DATA_DIR / "a1a", tmp_path / "data", 4)
    glob = f"data.glob={tmp_path}/data/part-*.svm"
    one = cli(tmp_path / "one", "engine=inprocess", "data=libsvm", f"data.path={tmp_path}/data/all.svm")
    assert one.returncode == 0, one.stderr[-3000:]
    hosted = cli(tmp_path / "hosted", "engine=dask", "data=libsvm_files", glob)
    assert hosted.returncode == 0, hosted.stderr[-3000:]
    here = cli(tmp_path / "here", "engine=inprocess", "data=libsvm_files", glob)
    assert here.returncode == 0, here.stderr[-3000:]
    x_one, d_one = finished(tmp_path / "one")
    x_hosted, d_hosted = finished(tmp_path / "hosted")
    x_here, d_here = finished(tmp_path / "here")
    np.testing.assert_array_equal(x_hosted, x_one)    # the same stepsize and iterates, bit for bit
    np.testing.assert_array_equal(x_here, x_one)
    assert d_here == d_one
    # x* solved on the hosts from reduced sums: the distances agree to the solve's precision
    np.testing.assert_allclose(d_hosted, d_one, rtol=1e-8)
    assert d_one[-1] < 0.9 * d_one[0]   # the run moved


def test_each_worker_opens_only_its_files_and_the_client_none(dask_client, tmp_path):
    from isparse.data.files import expand, hosted_rows, read_libsvm_file

    files = [str(f) for f in split_file(DATA_DIR / "a1a", tmp_path, 4)]
    root = str(tmp_path)

    def watch(root=root):   # on each Dask worker: an audit hook that records the files under root it opens
        import sys

        opened = []

        def hook(event, args):
            if event == "open" and isinstance(args[0], str) and args[0].startswith(root):
                opened.append(args[0])

        sys.addaudithook(hook)
        sys.modules["__main__"].__dict__["isparse_opened_" + root] = opened

    def seen(root=root):
        import sys

        return list(sys.modules["__main__"].__dict__["isparse_opened_" + root])

    here = []
    sys.addaudithook(lambda event, args: here.append(args[0]) if event == "open" and isinstance(args[0], str)
                     and args[0].startswith(root) else None)
    dask_client.run(watch)
    rows = hosted_rows(dask_client, expand(f"{root}/part-*.svm"), read_libsvm_file, n=4, lam=0.01)
    try:
        opened = dask_client.run(seen)
        addresses = sorted(opened)
        assert here == []   # the client expanded the glob and stat'ed the files; it opened none
        for k, address in enumerate(addresses):   # files 0-1 on the first worker, 2-3 on the second, only there
            assert sorted(opened[address]) == files[2 * k:2 * k + 2]
        assert rows.problem.N == 1605 and rows.n == 4
    finally:
        rows.close()


def one_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("isparse-run: error: "), proc.stderr
    return lines[0]


@pytest.mark.slow   # the default run keeps the iterates' equalities; CI's slow command runs this
def test_bad_files_are_refused_in_one_line_naming_the_file_and_the_worker(tmp_path):
    files = split_file(DATA_DIR / "a1a", tmp_path / "data", 4)
    dask = ["engine=dask", "data=libsvm_files"]
    line = one_line(cli(tmp_path / "none", *dask, f"data.glob={tmp_path}/data/nothing-*.svm"))
    assert "The 'data.glob' parameter must match at least one file" in line
    # a file past the declared feature count (data.n_features): the file, its line and the worker that read it
    line = one_line(cli(tmp_path / "features", *dask, f"data.glob={tmp_path}/data/part-*.svm", "data.n_features=100"))
    assert "part-0.svm is not a valid LIBSVM file" in line and "past the declared dimension 100" in line
    assert "read on the Dask worker tcp://127.0.0.1:" in line
    line = one_line(cli(tmp_path / "n", *dask, f"data.glob={tmp_path}/data/part-*.svm", "workers.n=6"))
    assert "The 'workers.n' parameter must be a multiple of the data files (4" in line
    # a file the glob matches here but its worker cannot open (a link to a file missing there)
    os.symlink(tmp_path / "elsewhere.svm", tmp_path / "data" / "part-9.svm")
    line = one_line(cli(tmp_path / "missing", *dask, f"data.glob={tmp_path}/data/part-*.svm", "workers.n=5"))
    assert f"data file not found: {tmp_path}/data/part-9.svm (read on the Dask worker tcp://127.0.0.1:" in line
    for out in ("none", "features", "n", "missing"):
        assert not (tmp_path / out / "mlflow.db").exists()   # no run was made
    assert files


@pytest.mark.slow   # the default run keeps the iterates' equalities; CI's slow command runs this
@pytest.mark.filterwarnings("ignore:.*rows have no features")
def test_a_killed_host_rereads_its_files_elsewhere_with_the_same_iterates(tmp_path):
    """kill -9 of a Dask worker holding files at round 60: another worker reads them again (the read tasks' loose
    restriction), the lost workers' state comes from the snapshot and their RowsHost from the same shards; the
    iterates and the records equal those of the run without the kill, to the bit."""
    from isparse.data.files import expand, hosted_rows, read_libsvm_file
    from isparse.spec import RunSpec
    from killing import same_iterates_with_a_host_killed

    split_file(DATA_DIR / "a1a", tmp_path, 4)
    spec = RunSpec.from_dict({"algorithm": "isega", "workers.n": 4, "workers.split": "contiguous",
                              "problem.lam": 0.01, "max_iter": 120, "tol": 0})
    same_iterates_with_a_host_killed(
        lambda client: hosted_rows(client, expand(f"{tmp_path}/part-*.svm"), read_libsvm_file, n=4, lam=0.01),
        lambda rows: spec, at=60, max_iter=120, log_every=20, snapshot_every=20)


@pytest.mark.slow   # the default run keeps the iterates' equalities; CI's slow command runs this
def test_without_x_star_the_hosts_solve_nothing_and_the_run_logs_the_objective(tmp_path):
    """x_star=none on hosted files: no reference solve (no cache entry is made), the run logs F and ||grad f||^2 and
    says that no bound is shown."""
    split_file(DATA_DIR / "a1a", tmp_path / "data", 4)
    out = tmp_path / "run"
    proc = cli(out, "engine=dask", "data=libsvm_files", f"data.glob={tmp_path}/data/part-*.svm", "x_star=none",
               "tol=0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "making the reference problem" not in proc.stderr and not list((out / "cache").glob("*.npz"))
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    objective = [m.value for m in client.get_metric_history(run.info.run_id, "objective")]
    assert len(objective) == 7 and objective[-1] < objective[0] < np.log(2) + 1e-12   # F(0) = log 2
    assert [m.value for m in client.get_metric_history(run.info.run_id, "grad_norm_sq")][-1] > 0
    assert "dist_sq" not in run.data.metrics and "no x* was solved (x_star=none)" in run.data.tags["bound_theorem"]


def parquet_split(source: Path, out: Path, parts: int, d: int = 123) -> list[Path]:
    """``source``'s rows as ``parts`` Parquet files (columns f1..f<d> dense, and y), cut as numpy.array_split cuts
    them (pandas writes them, as dask.dataframe.to_parquet writes one file per partition)."""
    import pandas as pd
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(source), n_features=d)
    frame = pd.DataFrame(X.toarray(), columns=[f"f{j + 1}" for j in range(d)]).assign(y=y)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for k, rows in enumerate(np.array_split(np.arange(len(frame)), parts)):
        files.append(out / f"part-{k}.parquet")
        frame.iloc[rows].to_parquet(files[-1], index=False)
    return files


@pytest.mark.filterwarnings("ignore:.*rows have no features")
def test_parquet_files_give_the_iterates_of_the_same_rows_in_libsvm_files(dask_client, tmp_path):
    from isparse.data.files import expand, hosted_rows
    from isparse.data.sources import source
    from isparse.engines.dask import DaskPool
    from isparse.runsetup import build
    from isparse.spec import RunSpec

    split_file(DATA_DIR / "a1a", tmp_path / "svm", 4)
    parquet_split(DATA_DIR / "a1a", tmp_path / "pq", 4)
    spec = RunSpec.from_dict({"algorithm": "isega", "workers.n": 4, "workers.split": "contiguous",
                              "problem.lam": 0.01, "max_iter": 40, "tol": 0})
    iterates = []
    for kind, glob, keys in (("libsvm_files", f"{tmp_path}/svm/part-*.svm", {"n_features": 123}),
                             ("parquet_files", f"{tmp_path}/pq/part-*.parquet", {})):
        src = source(kind, glob=glob, **keys)
        rows = hosted_rows(dask_client, expand(glob), src.reader(), n=4, lam=0.01, n_features=keys.get("n_features"))
        try:
            setup = build(spec, problem=rows.problem)
            pool = DaskPool(dask_client, *setup.pool_args(), source=rows)
            iterates.append(np.array(setup.run(pool, max_iter=40, tol=0, keep_iterates=True, log_every=20).iterates))
            pool.close()
        finally:
            rows.close()
        assert rows.problem.d == 123
    np.testing.assert_array_equal(iterates[1], iterates[0])
    assert np.abs(iterates[0][-1] - iterates[0][0]).max() > 1e-3


@pytest.mark.slow   # the default run keeps the iterates' equalities; CI's slow command runs this
def test_parquet_files_with_other_columns_are_refused_naming_the_file_and_the_worker(tmp_path):
    files = parquet_split(DATA_DIR / "a1a", tmp_path / "pq", 4)
    import pandas as pd

    frame = pd.read_parquet(files[2])
    frame.drop(columns=["f7"]).to_parquet(files[2], index=False)
    line = one_line(cli(tmp_path / "run", "engine=dask", "data=parquet_files", f"data.glob={tmp_path}/pq/*.parquet"))
    assert (f"data.glob: {files[2]} has 122 feature columns ('f1', 'f2', 'f3', 'f4', 'f5', 'f6', ... (122 in all)), "
            f"{files[0]} has 123") in line and "every file must have the same features (read on the Dask worker tcp://" \
        in line
    assert not (tmp_path / "run" / "mlflow.db").exists()
