"""Checkpoints and resume on the Dask engine: a run stopped midway and resumed ends on the same iterate, to the bit."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from pipeline.tracking import experiment_id, summary_metrics

CLI = str(Path(sys.executable).parent / "isparse-run")
pytestmark = [pytest.mark.needs_data, pytest.mark.slow]


def _cli(tmp_path, name, *overrides, wait=True):
    cmd = [CLI, f"paths.outputs={tmp_path}", f"hydra.run.dir={tmp_path}/{name}", "progress=false", *overrides]
    if wait:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _runs(client):
    exp = client.get_experiment_by_name("isparse")
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


@pytest.mark.parametrize("algorithm", ["isega", "isaga"])
def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(tmp_path, algorithm):
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment_id(client, "isparse", f"sqlite:///{tmp_path}/mlflow.db")   # as isparse-run makes it (artifacts in tmp_path)
    common = [f"algorithm={algorithm}", "data=a1a", "workers.n=4", "problem.lam=0.05", "max_iter=1500",
              "tol=1e-300", "checkpoint.every=100", "tracking.log_every=50"]
    _cli(tmp_path, "full", *common)
    full_run = _runs(client)[0]
    x_full = np.load(client.download_artifacts(full_run.info.run_id, "x_final.npy", str(tmp_path)))

    proc = _cli(tmp_path, "stopped", *common, wait=False)
    deadline = time.time() + 180
    while time.time() < deadline:   # stop it once a checkpoint past iteration 200 is in the store
        runs = _runs(client)
        if len(runs) == 2 and runs[1].data.metrics.get("checkpoint/iteration", 0) >= 200:
            break
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=90)
    stopped = _runs(client)[1]
    assert stopped.info.status == "KILLED"
    k = int(client.get_run(stopped.info.run_id).data.metrics["checkpoint/iteration"])
    assert 200 <= k < 1500

    proc = _cli(tmp_path, "resumed", f"resume={stopped.info.run_id}")
    assert f"resuming MLflow run {stopped.info.run_id} (" in proc.stdout and f"from iteration {k}, its last" in proc.stdout
    assert "Downloading artifacts" not in proc.stderr       # no MLflow progress bars
    resumed = client.get_run(stopped.info.run_id)
    assert resumed.info.status == "FINISHED" and resumed.data.tags["resumed_from_iteration"] == str(k)
    assert len(_runs(client)) == 2          # the same MLflow run continued, no new one
    (tmp_path / "dl").mkdir()
    x_resumed = np.load(client.download_artifacts(resumed.info.run_id, "x_final.npy", str(tmp_path / "dl")))
    assert np.array_equal(x_resumed, x_full)
    assert resumed.data.metrics["uplink_bytes"] == full_run.data.metrics["uplink_bytes"]
    # each step logged once (the steps between the checkpoint and the kill, computed again, are not logged again),
    # the same steps as the uninterrupted run's, and wall_s never goes back
    for key in ("dist_sq", "wall_s", "uplink_bytes"):
        steps = [m.step for m in client.get_metric_history(resumed.info.run_id, key)]
        assert sorted(steps) == sorted({m.step for m in client.get_metric_history(full_run.info.run_id, key)}), key
    wall = sorted((m.step, m.value) for m in client.get_metric_history(resumed.info.run_id, "wall_s"))
    assert all(a[1] <= b[1] for a, b in zip(wall, wall[1:]))
    # time to eps: the same iteration and bytes as the uninterrupted run (the time is its own), and the tag says how
    # the resumed run timed it
    to_eps = ("rounds_to_eps", "uplink_bytes_to_eps", "downlink_bytes_to_eps")
    resumed_at, full_at = summary_metrics(resumed.data.metrics), summary_metrics(full_run.data.metrics)
    assert [resumed_at.get(k) for k in to_eps] == [full_at.get(k) for k in to_eps] and "iterations" in full_at
    assert ("time_to_eps_s" in resumed_at) == ("time_to_eps_s" in full_at)
    assert f"; resumed from iteration {k}: the rounds before it timed by the interrupted run" in \
        resumed.data.tags["time_to_eps"]
    ck_steps = [m.step for m in client.get_metric_history(resumed.info.run_id, "checkpoint/iteration")]
    assert len(ck_steps) == len(set(ck_steps))


# -- faults of the environment (issue 34): a damaged checkpoint, data changed since the checkpoint ---------------------
def _interrupted(tmp_path):
    """A run on a copy of a1a (``data=libsvm``), 200 iterations with checkpoints at 70 and 140, then marked KILLED in
    its store as a Ctrl-C leaves it (the test above stops one for real): (client, run id, data file, the checkpoint
    artifact in the store)."""
    import shutil

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    experiment_id(client, "isparse", uri)
    data = tmp_path / "a1a.svm"
    shutil.copyfile(Path(os.environ["ISPARSE_DATA_DIR"]) / "a1a", data)
    _cli(tmp_path, "first", "engine=inprocess", "data=libsvm", f"data.path={data}", "workers.n=2", "max_iter=200",
         "tol=0", "checkpoint.every=70", "tracking.log_every=10")
    (run,) = _runs(client)
    client.set_terminated(run.info.run_id, "KILLED")
    artifact = tmp_path / "mlartifacts" / "isparse" / run.info.run_id / "artifacts" / "checkpoint.pkl"
    assert artifact.is_file()
    return client, run.info.run_id, data, artifact


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("interrupted")
    return (tmp_path, *_interrupted(tmp_path))


def _refused(tmp_path, name, run_id, client, text):
    """``isparse-run resume=<run_id>`` exits 2 with one line holding ``text``; the run is left as it was (KILLED,
    its metrics and tags unchanged) and the downloaded checkpoint is removed."""
    before = client.get_run(run_id)
    cmd = [CLI, f"paths.outputs={tmp_path}", f"hydra.run.dir={tmp_path}/{name}", f"resume={run_id}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("isparse-run: error: ") and text in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    after = client.get_run(run_id)
    assert after.info.status == "KILLED" and after.info.end_time == before.info.end_time
    assert after.data.metrics == before.data.metrics and after.data.tags == before.data.tags
    assert len(_runs(client)) == 1                                       # no new run either
    assert not (tmp_path / name / "checkpoint.pkl").exists()
    return lines[0]


def test_a_checkpoint_records_the_data_file_it_was_taken_on(interrupted):
    import hashlib
    import pickle

    tmp_path, client, run_id, data, artifact = interrupted
    record = {"file": str(data.resolve()), "bytes": data.stat().st_size,
              "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}
    with open(artifact, "rb") as fh:
        ck = pickle.load(fh)
    assert ck.t == 140 and ck.data_files == [record]
    tags = client.get_run(run_id).data.tags
    assert (tags["data_file"], tags["data_file_bytes"], tags["data_file_sha256"]) == \
        (record["file"], str(record["bytes"]), record["sha256"])


def _flip_first_label(raw: bytes) -> bytes:
    """The same bytes with the first line's label negated (``-1`` <-> ``+1``): the same size, another data set."""
    assert raw[:2] in (b"-1", b"+1")
    return (b"+1" if raw[:2] == b"-1" else b"-1") + raw[2:]


@pytest.mark.parametrize("change", ["one_label_flipped", "truncated"])
def test_a_resume_on_changed_data_is_refused_and_the_run_left_killed(interrupted, change):
    """The data file changed since the checkpoint: a resume was a NumPy broadcast traceback that turned the run
    FAILED (the file shortened), or went on silently on a mixture of two data sets (a label flipped). Now one line
    names the file, the recorded and the current size and hash, exit status 2, the run left KILLED."""
    import hashlib

    tmp_path, client, run_id, data, _ = interrupted
    raw = data.read_bytes()
    new = _flip_first_label(raw) if change == "one_label_flipped" else raw[:50000]
    try:
        data.write_bytes(new)
        line = _refused(tmp_path, f"resume-{change}", run_id, client, "")
    finally:
        data.write_bytes(raw)
    was, now = hashlib.sha256(raw).hexdigest(), hashlib.sha256(new).hexdigest()
    assert line == (f"isparse-run: error: The 'resume' parameter names run {run_id!r}, whose data changed since its "
                    f"checkpoint: {data.resolve()} had {len(raw)} bytes, sha256 {was[:12]}... and has {len(new)} "
                    f"bytes, sha256 {now[:12]}... now; a resume would mix two data sets: restore the file, or start a "
                    f"new run without resume=.")


@pytest.mark.parametrize("size, why", [(1000, "UnpicklingError: pickle data was truncated"),
                                       (0, "EOFError: Ran out of input")])
def test_a_damaged_checkpoint_is_refused_naming_it(interrupted, size, why):
    """A truncated or empty checkpoint.pkl was "has none: UnpicklingError": now the line names the checkpoint, says
    it is damaged and what to do; exit status 2, the run left KILLED."""
    tmp_path, client, run_id, _, artifact = interrupted
    raw = artifact.read_bytes()
    try:
        artifact.write_bytes(raw[:size])
        line = _refused(tmp_path, f"resume-ck{size}", run_id, client, "")
    finally:
        artifact.write_bytes(raw)
    assert line == (f"isparse-run: error: The 'resume' parameter names run {run_id!r}, whose checkpoint "
                    f"{client.get_run(run_id).info.artifact_uri}/checkpoint.pkl is damaged ({size} bytes; {why}): it "
                    f"cannot be resumed; start the run again without resume= (what it logged stays in that run), or "
                    f"resume another run.")


def test_a_checkpoint_without_a_data_record_still_resumes(tmp_path):
    """A checkpoint written before the data record existed (no ``data_files``) resumes, with a one-line note, and
    finishes."""
    import pickle

    client, run_id, data, artifact = _interrupted(tmp_path)
    with open(artifact, "rb") as fh:
        ck = pickle.load(fh)
    del ck.data_files                                          # the pickle of a Checkpoint without the field
    assert "data_files" not in ck.__dict__
    artifact.write_bytes(pickle.dumps(ck, protocol=pickle.HIGHEST_PROTOCOL))
    proc = _cli(tmp_path, "resumed", f"resume={run_id}")
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if "records no data file" in line]
    assert len(notes) == 1 and notes[0].endswith(
        "the checkpoint of iteration 140 records no data file size and hash (written before they were recorded): the "
        "data is not compared with what the interrupted run read"), notes
    assert "from iteration 140, its last checkpoint" in proc.stdout
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["resumed_from_iteration"] == "140"
    assert max(m.step for m in client.get_metric_history(run_id, "dist_sq")) == 200


def test_an_interrupt_before_the_first_checkpoint_writes_one_and_the_run_resumes(tmp_path):
    """Issue 34: Ctrl-C before the first ``checkpoint.every`` left a run that "cannot be resumed: no checkpoint yet".
    Now the interrupt writes a checkpoint of the iteration it stopped at: the end line gives the resume command, and
    the resumed run ends on the uninterrupted run's iterate, to the bit."""
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment_id(client, "isparse", f"sqlite:///{tmp_path}/mlflow.db")
    common = ["engine=inprocess", "data=a9a", "workers.n=2", "max_iter=5000", "tol=1e-300", "checkpoint.every=100000",
              "tracking.log_every=20"]
    _cli(tmp_path, "full", *common)
    full_run = _runs(client)[0]
    x_full = np.load(client.download_artifacts(full_run.info.run_id, "x_final.npy", str(tmp_path)))
    out = open(tmp_path / "stopped.out", "w+")
    proc = subprocess.Popen([CLI, f"paths.outputs={tmp_path}", f"hydra.run.dir={tmp_path}/stopped", "progress=false",
                             *common], stdout=out, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 180
    while time.time() < deadline:   # stop it once it has logged past iteration 100
        runs = _runs(client)
        if len(runs) == 2 and max((m.step for m in client.get_metric_history(runs[1].info.run_id, "dist_sq")),
                                  default=0) >= 100:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=90) == 130
    out.seek(0)
    text = out.read()
    stopped = client.get_run(_runs(client)[1].info.run_id)
    assert stopped.info.status == "KILLED"
    k = int(stopped.data.metrics["checkpoint/iteration"])
    assert 100 <= k < 5000
    assert f"continue it from iteration {k} with: isparse-run resume={stopped.info.run_id}" in text, text[-3000:]
    assert "no checkpoint yet" not in text
    proc = _cli(tmp_path, "resumed", f"resume={stopped.info.run_id}")
    resumed = client.get_run(stopped.info.run_id)
    assert resumed.info.status == "FINISHED" and resumed.data.tags["resumed_from_iteration"] == str(k)
    (tmp_path / "dl").mkdir()
    x_resumed = np.load(client.download_artifacts(resumed.info.run_id, "x_final.npy", str(tmp_path / "dl")))
    assert np.array_equal(x_resumed, x_full)
