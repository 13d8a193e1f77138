"""Two sweeps started together on a fresh sqlite store (issue 14): MLflow's schema migration raced, one sweep
lost its parent run (Hydra only warned: "on_multirun_start raised CommandError: Online migration expected to
match one row"); pipeline.tracking.client_for now makes the schema under a file lock."""

import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow   # two real sweeps at once, about 25 s

CLI = str(Path(sys.executable).with_name("isparse-run"))


def test_two_sweeps_on_a_fresh_store_each_get_their_parent(tmp_path):
    procs = [subprocess.Popen([CLI, "-m", "engine=inprocess", "workers.n=2,4", "max_iter=100", "progress=false",
                               f"paths.outputs={tmp_path}/out"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
             for k in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
        assert "CommandError" not in out and "migration" not in out.lower(), out[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/out/mlflow.db")       # the store opens afterwards
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if r.data.tags.get("isparse.sweep") == "true"]
    assert len(parents) == 2 and all(r.info.status == "FINISHED" for r in runs)
    dirs = [Path(p.data.tags["sweep_dir"]) for p in parents]
    assert dirs[0] != dirs[1] and all(d.parent.parent == tmp_path / "out" / "multirun" for d in dirs)
    for parent, sweep_dir in zip(parents, dirs):
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        assert sorted(c.data.params["workers.n"] for c in children) == ["2", "4"]
        for job in ("0", "1"):                     # each job's files in its own sweep's directory
            assert (sweep_dir / job / "x_final.npy").is_file()
            assert (sweep_dir / job / "main.log").read_text().count("MLflow run ") >= 1


def _log_same_dataset(uri, run_id, barrier, digest):
    from pipeline._store import local_store

    store = local_store(uri)
    barrier.wait()
    store.log_dataset(run_id, "a1a", digest, "/data/a1a", {"rows": 1605})


def test_jobs_logging_the_same_data_set_at_once_each_get_it(tmp_path):
    """A sweep's parallel jobs (the Dask launcher's threads, here 4 processes released together) log the same data
    set as their runs' input: MLflow checks for the experiment's dataset row and then inserts it, so the losers of
    the race hit "UNIQUE constraint failed: datasets" (a FAILED job in CI); each run must get its input."""
    import multiprocessing

    from pipeline.tracking import experiment_id

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    exp = experiment_id(client, "isparse", uri)
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(3):
        runs = [client.create_run(exp).info.run_id for _ in range(4)]
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_log_same_dataset, args=(uri, r, barrier, f"digest{attempt}")) for r in runs]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0, 0, 0, 0]
        for r in runs:
            inputs = client.get_run(r).inputs.dataset_inputs
            assert [(i.dataset.name, i.dataset.digest) for i in inputs] == [("a1a", f"digest{attempt}")]
