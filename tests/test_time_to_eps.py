"""Time to eps as a run metric (isparse.engines.to_eps): time_to_eps_s, rounds_to_eps and the bytes to eps, from the
records of the in-process and the Dask engine, of a resumed run, and as isparse-run logs them to MLflow."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from isparse import ConfigError, RunSpec, build
from isparse.engines.to_eps import rounds_time, to_eps
from pipeline.tracking import summary_metrics

CLI = str(Path(sys.executable).parent / "isparse-run")
N = 4


@pytest.fixture(scope="module")
def setup():
    return build(RunSpec.from_dict({"algorithm": "isega", "data": "breast_cancer", "workers.n": N}))


def _first_at(records, eps, on):
    """The first record whose ``on`` is <= eps x its value at t = 0, found here without the library."""
    start = records[0][on]
    return next((r for r in records if r[on] <= eps * start), None)


@pytest.mark.parametrize("on", ["subopt", "dist_sq"])
def test_rounds_time_and_bytes_are_those_of_the_first_logged_record_at_eps(setup, on):
    res = setup.run(max_iter=3000, tol=1e-12, log_every=10)
    hit = _first_at(res.records, 1e-6, on)
    assert hit is not None and 0 < hit["step"] < res.iterations
    got = to_eps(res.records, 1e-6, on)
    assert got.rounds == hit["step"] and got.rounds % 10 == 0    # a logged step (log_every = 10)
    assert got.threshold == 1e-6 * res.records[0][on]
    # the bytes: cumulative at that record, and what ISEGA sends: each of the n workers tau*m values of 8 B a round,
    # the master x (d values of 8 B) to each worker
    m, d, tau_m = setup.method.blocks.m, setup.problem.d, setup.method.tau_m
    assert got.uplink_bytes == hit["uplink_bytes"] == got.rounds * N * tau_m * 8
    assert got.downlink_bytes == hit["downlink_bytes"] == got.rounds * N * d * 8
    assert m == d and tau_m == -(-m // N)
    # the time: wall_s - time_monitor_s at that record minus the same at t = 0 (wall_s starts with the loop)
    first = res.records[0]
    assert first["step"] == 0 and first["time_monitor_s"] == 0.0 and 0 <= first["wall_s"] < 0.05
    expected = (hit["wall_s"] - hit["time_monitor_s"]) - (first["wall_s"] - first["time_monitor_s"])
    assert got.time_s == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert 0 < got.time_s <= hit["wall_s"] - first["wall_s"] <= res.records[-1]["wall_s"]
    assert got.metrics() == {"time_to_eps_s": got.time_s, "rounds_to_eps": got.rounds,
                             "uplink_bytes_to_eps": got.uplink_bytes, "downlink_bytes_to_eps": got.downlink_bytes}


def test_eps_never_reached_gives_none_and_bad_eps_names_the_field(setup):
    res = setup.run(max_iter=50, tol=0, log_every=10)
    assert to_eps(res.records, 1e-6) is None          # 50 iterations of ISEGA are far from 1e-6
    assert min(r["subopt"] for r in res.records) > 1e-6 * res.records[0]["subopt"]
    with pytest.raises(ConfigError, match="'eps_on'"):
        to_eps(res.records, 1e-6, "dist")
    with pytest.raises(ConfigError, match="'eps'"):
        to_eps(res.records, 0.0)


def test_the_monitors_are_not_in_the_time(setup):
    """An observer that takes 20 ms a record: its time is in wall_s and time_monitor_s, not in time_to_eps_s."""
    res = setup.run(max_iter=3000, tol=1e-12, log_every=100, observer=lambda rec: time.sleep(0.02))
    got = to_eps(res.records, 1e-6)
    hit = next(r for r in res.records if r["step"] == got.rounds)
    before = sum(r["step"] < got.rounds for r in res.records)      # records whose monitors ran before the hit
    assert before >= 5
    assert hit["time_monitor_s"] >= 0.02 * before
    assert got.time_s <= hit["wall_s"] - res.records[0]["wall_s"] - 0.02 * before


def test_a_resumed_run_continues_the_time_of_its_checkpoint(setup):
    checkpoints = []
    full = setup.run(max_iter=2000, tol=0, log_every=10, checkpoint_every=300, on_checkpoint=checkpoints.append)
    ck = next(c for c in checkpoints if c.t == 600)
    at = to_eps(full.records, 1e-6)
    assert at.rounds > ck.t                           # eps after the checkpoint: the resumed run times the rest
    resumed = setup.run(max_iter=2000, tol=0, log_every=10, resume=ck)
    assert [r["step"] for r in resumed.records] == [r["step"] for r in full.records]
    assert resumed.records[:len(ck.records)] == ck.records          # the interrupted run's records up to it
    got = to_eps(resumed.records, 1e-6)
    assert (got.rounds, got.uplink_bytes, got.downlink_bytes) == (at.rounds, at.uplink_bytes, at.downlink_bytes)
    hit = next(r for r in resumed.records if r["step"] == got.rounds)
    ck_rounds = ck.counters["wall_s"] - ck.counters["time_monitor_s"]   # the rounds before the checkpoint
    assert got.time_s == pytest.approx(rounds_time(hit) - rounds_time(resumed.records[0]), rel=1e-12)
    assert got.time_s > ck_rounds - rounds_time(resumed.records[0])
    assert resumed.records[-1]["wall_s"] > ck.counters["wall_s"]


def test_dask_engine_gives_the_same_rounds_and_bytes_and_leaves_the_cluster_start_out(setup, dask_client):
    from isparse.engines.dask import DaskPool

    local = to_eps(setup.run(max_iter=3000, tol=0, log_every=10).records, 1e-3)
    tick = time.perf_counter()
    pool = DaskPool(dask_client, *setup.pool_args())      # the actors made and the shards sent: not in the time
    made = time.perf_counter() - tick
    res = setup.run(pool, max_iter=local.rounds + 20, tol=0, log_every=10)
    total = time.perf_counter() - tick
    got = to_eps(res.records, 1e-3)
    assert (got.rounds, got.uplink_bytes, got.downlink_bytes) == (local.rounds, local.uplink_bytes,
                                                                   local.downlink_bytes)
    hit = next(r for r in res.records if r["step"] == got.rounds)
    assert got.time_s == pytest.approx(rounds_time(hit) - rounds_time(res.records[0]), rel=1e-12)
    assert res.records[0]["wall_s"] < 0.05 and res.records[0]["time_monitor_s"] == 0.0   # the loop's clock starts at 0
    assert made + got.time_s <= total
    assert got.time_s > 0.0002 * got.rounds       # a Dask round is a loopback round trip: tenths of a millisecond


# ------------------------------------------------------------------------------------------------ isparse-run
def _run(tmp_path, *overrides):
    proc = subprocess.run([CLI, f"paths.outputs={tmp_path}", "progress=false", *overrides],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("isparse")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
    return client, runs[0]


def _history(client, run, key):
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}


@pytest.mark.slow   # isparse-run with a fresh MLflow store: 14 s in-process, 40 s on a LocalCluster (loaded machine)
@pytest.mark.parametrize("engine", ["dask", "inprocess"])
def test_isparse_run_logs_the_metrics_to_eps_recomputed_from_its_histories(tmp_path, engine):
    client, run = _run(tmp_path, f"engine={engine}", "cluster.n_workers=2", "tol=1e-10", "eps_on=dist_sq",
                       "eps=1e-5")
    m = summary_metrics(run.data.metrics)
    dist, wall, mon = (_history(client, run, k) for k in ("dist_sq", "wall_s", "time_monitor_s"))
    steps = sorted(dist)
    k = next(s for s in steps if dist[s] <= 1e-5 * dist[0])
    assert m["rounds_to_eps"] == k and k % 10 == 0 and 0 < k < m["iterations"]
    assert m["uplink_bytes_to_eps"] == _history(client, run, "uplink_bytes")[k]
    assert m["downlink_bytes_to_eps"] == _history(client, run, "downlink_bytes")[k]
    assert m["time_to_eps_s"] == pytest.approx((wall[k] - mon[k]) - (wall[0] - mon[0]), rel=1e-9)
    assert 0 < m["time_to_eps_s"] <= wall[k] <= m["wall_s_total"]
    tag = run.data.tags["time_to_eps"]
    assert tag.startswith(f"reached at iteration {k}: the first ||x - x*||^2 <= 1e-05 r0 at a logged iterate")
    assert run.data.params["eps"] == "1e-05" and run.data.params["eps_on"] == "dist_sq"


@pytest.mark.slow   # isparse-run with a fresh MLflow store: 10-22 s
def test_isparse_run_that_does_not_reach_eps_logs_no_number(tmp_path):
    client, run = _run(tmp_path, "engine=inprocess", "max_iter=30", "tol=0")
    assert run.info.status == "FINISHED"
    metrics = {"time_to_eps_s", "rounds_to_eps", "uplink_bytes_to_eps", "downlink_bytes_to_eps"}
    assert not metrics & set(summary_metrics(run.data.metrics)) and "summary/iterations" in run.data.metrics
    assert run.data.tags["time_to_eps"] == ("not reached: no F - F* <= 1e-06 (F(x0) - F*) at a logged iterate "
                                            "(every tracking.log_every=10 iterations) in 30 iterations")
    subopt = _history(client, run, "subopt")
    assert min(subopt.values()) > 1e-6 * subopt[0]
