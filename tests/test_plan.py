"""isparse-plan (issue 13 item 5): the real console script in a subprocess against the session's real LocalCluster,
isparse-run for the same overrides in a real Hydra multirun with a real sqlite MLflow store under tmp_path, and the
planner's model (isparse.planning) on numbers derived by hand."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from isparse import ConfigError, load_dataset
from specs import make
from pipeline.plan import render
from isparse.planning import (Probe, PlanRow, SkippedRow, fit_round_cost, plan_row, recommend, resolve_block_sizes,
                          resolve_tau_grid, uplink_bytes_per_round)

BIN = Path(sys.executable).parent
KEYS = {"tau", "blocks_size", "predicted_iterations", "predicted_round_s", "predicted_time_s", "predicted_uplink_bytes"}
#: a1a (d = 123) at lambda = 0.3, n = 4: Theorem 3 predicts a few hundred iterations to tol = 1e-4
OVERRIDES = ["data=a1a", "problem.lam=0.3", "workers.n=4", "tol=1e-4", "progress=false", "checkpoint.every=0"]


def command(tmp_path, name):
    """The installed console script, or (a checkout not reinstalled since pyproject.toml gained it) a launcher of
    the same entry point, as pip writes it."""
    installed = BIN / name
    if installed.is_file():
        return [str(installed)]
    module, func = {"isparse-plan": ("pipeline.plan", "main"), "isparse-run": ("pipeline.main", "main")}[name]
    launcher = tmp_path / name
    launcher.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    launcher.chmod(0o755)
    return [str(launcher)]


def cli(tmp_path, name, *args, timeout=300):
    flags = [a for a in args if a.startswith("-")]
    overrides = [a for a in args if not a.startswith("-")]
    return subprocess.run([*command(tmp_path, name), *flags, f"paths.outputs={tmp_path}", *overrides], capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path, env=dict(os.environ))


def compose_plan(overrides):
    """conf/plan.yaml composed with Hydra's compose API, HydraConfig set as for a job (as tests/conftest.py's
    ``compose`` does for conf/config.yaml)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("plan", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def logged_predictions(tmp_path) -> dict:
    """tau*m (of m = 123) -> the metric predicted_iterations of every finished run in the store under tmp_path."""
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("isparse").experiment_id],
                              "attributes.status = 'FINISHED'")
    return {round(float(r.data.params["tau"]) * 123): r.data.metrics["summary/predicted_iterations"] for r in runs
            if "tau" in r.data.params}


@pytest.mark.needs_data
def test_plan_job_matches_the_runs_logged(tmp_path, dask_client):
    """The planner's job on the session's real LocalCluster (in this process, fast); the predicted iterations at
    tau = 1/n and tau = 1 are those isparse-run's job (pipeline.main.run_job) logs to a real sqlite store for the
    same overrides; the recommendation is the argmin of predicted_time_s."""
    from pipeline.job import run_job
    from pipeline.plan import plan_job

    common = [f"paths.outputs={tmp_path}", *OVERRIDES, "cluster=address",
              f"cluster.address={dask_client.scheduler.address}"]
    plan = plan_job(compose_plan([*common, "plan.taus=[1/n,1]", "plan.rounds=10", "plan.repeats=1"]))
    assert all(KEYS <= set(r) for r in plan["rows"]) and KEYS <= set(plan["recommended"])
    assert [r["tau_m"] for r in plan["rows"]] == [31, 123]
    best = min(plan["rows"], key=lambda r: r["predicted_time_s"])
    assert plan["recommended"] == best
    for r in plan["rows"]:
        assert r["predicted_time_s"] == pytest.approx(r["predicted_iterations"] * r["predicted_round_s"], rel=1e-12)
    probes = plan["round_cost"]["probes"]
    assert [p["uplink_bytes"] for p in probes] == pytest.approx([4 * 8 * 31, 4 * 8 * 123])   # real rounds' bytes
    assert all(0 < p["compute_s"] < p["round_s"] < 1 for p in probes)
    cost = plan["round_cost"]   # one probe of tau < 1: a constant line; tau = 1 as its probe measured
    assert cost["latency_s"] == probes[0]["round_s"] and cost["seconds_per_byte"] == 0
    assert [r["predicted_round_s"] for r in plan["rows"]] == [probes[0]["round_s"], probes[1]["round_s"]]
    for tau in ("auto", "1"):
        from conftest import CONF_DIR
        from hydra import compose, initialize_config_dir
        from hydra.core.hydra_config import HydraConfig

        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[*common, f"tau={tau}", "max_iter=10"], return_hydra_config=True)
        cfg.hydra.runtime.output_dir = str(tmp_path / f"job-{tau}")
        Path(cfg.hydra.runtime.output_dir).mkdir()
        HydraConfig.instance().set_config(cfg)
        run_job(cfg)
    logged = logged_predictions(tmp_path)
    assert set(logged) == {31, 123}
    assert {r["tau_m"]: r["predicted_iterations"] for r in plan["rows"]} == logged


@pytest.mark.slow
@pytest.mark.needs_data
def test_plan_on_a_local_cluster_matches_the_runs(tmp_path, dask_client):
    """The console scripts: isparse-plan on the real LocalCluster; its JSON has the keys; its predicted iterations at
    tau = 1/n and tau = 1 are the ones an isparse-run multirun logs for the same overrides; the recommendation is
    the argmin of the printed times."""
    address = ["cluster=address", f"cluster.address={dask_client.scheduler.address}"]
    proc = cli(tmp_path, "isparse-plan", *OVERRIDES, *address, "plan.taus=[1/m,1/n,2/n,1]", "plan.block_sizes=[1,41]",
               "plan.rounds=10", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    assert json.loads(next((tmp_path / "plan").rglob("plan.json")).read_text()) == plan   # kept in the job's dir
    # block size 41: m = 3, tau*m in {1, ceil(3/4) = 1, ceil(2 x 3/4) = 2, 3}
    assert [(r["blocks_size"], r["tau_m"]) for r in plan["rows"]] == [(1, 1), (1, 31), (1, 62), (1, 123), (41, 1),
                                                                      (41, 2), (41, 3)]
    text = render(plan)   # what isparse-plan prints without --json: each row, the recommendation, the ratio note
    for r in plan["rows"]:
        assert f"{r['tau_m']:>4}/{r['m']:<3} {r['blocks_size']:>3} {r['predicted_iterations']:>12,.0f}" in text
    assert "recommended: tau = " in text and "2-3x conservative" in text
    rows = [r for r in plan["rows"] if r["blocks_size"] == 1]
    assert all(KEYS <= set(r) for r in plan["rows"])
    assert KEYS <= set(plan["recommended"])
    for r in plan["rows"]:   # the printed numbers are consistent with each other and with the fit
        assert r["predicted_time_s"] == pytest.approx(r["predicted_iterations"] * r["predicted_round_s"], rel=1e-12)
        assert r["predicted_uplink_bytes"] == pytest.approx(r["predicted_iterations"] * 4 * r["tau"] * 123 * 8)
        cost = plan["round_cost"]
        expected = (cost["dense_round_s"] if r["tau_m"] == r["m"] else   # tau = 1: its own probe's round
                    cost["latency_s"] + cost["seconds_per_byte"] * r["uplink_bytes_per_round"])
        assert r["predicted_round_s"] == pytest.approx(expected, rel=1e-12)
    best = min(plan["rows"], key=lambda r: r["predicted_time_s"])
    assert (plan["recommended"]["tau"], plan["recommended"]["blocks_size"]) == (best["tau"], best["blocks_size"])
    # the probes were real rounds on the cluster: smallest, 1/n and largest tau, with the bytes the messages had
    probes = plan["round_cost"]["probes"]
    assert [p["tau"] for p in probes] == pytest.approx([1 / 123, 31 / 123, 62 / 123, 1.0])
    assert [p["uplink_bytes"] for p in probes] == pytest.approx([4 * 8 * 1, 4 * 8 * 31, 4 * 8 * 62, 4 * 8 * 123])
    assert plan["round_cost"]["dense_round_s"] == probes[-1]["round_s"]
    assert all(0 < p["compute_s"] < p["round_s"] < 1 for p in probes)
    assert "engine" in plan and dask_client.scheduler.address in plan["engine"]

    # isparse-run, the same overrides, tau = 1/n (auto) and tau = 1: the logged predicted_iterations
    run = cli(tmp_path, "isparse-run", "-m", *OVERRIDES, *address, "tau=auto,1", "max_iter=10")
    assert run.returncode == 0, run.stderr[-3000:]
    logged = logged_predictions(tmp_path)
    planned = {r["tau_m"]: r["predicted_iterations"] for r in rows}
    assert set(logged) == {31, 123}
    assert planned[31] == logged[31] and planned[123] == logged[123]
    assert planned[1] > planned[31] > planned[123]   # Theorem 3: fewer iterations as tau grows


def test_plan_empty_tau_grid_named_before_any_work(tmp_path):
    """A bad input is one line on stderr, exit status 2, before any data are read (as isparse-run's)."""
    proc = cli(tmp_path, "isparse-plan", "engine=inprocess", "plan.taus=[]", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "isparse-plan: error: The 'plan.taus' parameter must be a non-empty list of tau values (auto, '<c>/n' (0 < c <= n), "
        "'<k>/m' (k an integer in [1, m]) or a number in [1/m, 1] with tau*m an integer), or null for the default grid; got []."]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("overrides, key, text", [
    (["plan.nosuch=1"], "plan.nosuch", "The 'plan.nosuch' parameter is not a key of plan (it would be ignored); known: "
                                       "taus, block_sizes, codecs, rounds, repeats, json, link."),
    (["plan.rounds=1"], "plan.rounds", "The 'plan.rounds' parameter must be in [2, inf); got 1."),
    (["plan.repeats=0"], "plan.repeats", "The 'plan.repeats' parameter must be in [1, inf); got 0."),
    (["plan.json=yes"], "plan.json", "The 'plan.json' parameter must be true or false; got 'yes'."),
    (["data=a1a", "plan.taus=[1/n,1.5]"], "plan.taus", "The 'plan.taus' parameter must be in (0, 1]; got 1.5."),
    (["data=a1a", "plan.taus=[1/n,0.001]"], "plan.taus", "The 'plan.taus' parameter must be in [1/m = 0.00813, 1]; got 0.001."),
    (["data=a1a", "plan.taus=[0.5]"], "plan.taus",   # a number is never rounded, in a plan as in a run
     "The 'plan.taus' parameter times m = 123 must be an integer; got tau = 0.5 (tau*m = 61.5). Nearest allowed: "
     "61/123 = 0.495935 or 62/123 = 0.504065 (written 61/m or 62/m), or '<c>/n', which is rounded up (auto = 1/n)."),
    (["data=a1a", "plan.taus=[5/n]"], "plan.taus",
     "The 'plan.taus' parameter written as '<c>/n' must have c <= n = 4 (tau = c/n at most 1; tau=1 sends every block); "
     "got '5/n'."),
    (["data=a1a", "plan.block_sizes=[200]"], "plan.block_sizes",
     "The 'plan.block_sizes' parameter's entries must be integers in [1, d] = [1, 123]; got 200."),
    (["plan.codecs=[]"], "plan.codecs", "The 'plan.codecs' parameter must be a non-empty list of codecs (float64, "
     "float32, bfloat16, natural, natural7, dither or dither:<s> with s in [1, 255]), or null for messages.codec alone; got []."),
    (["plan.codecs=[natural,zstd]"], "plan.codecs", "The 'plan.codecs' parameter's entries must be one of float64, "
     "float32, bfloat16, natural, natural7, dither or dither:<s> with s in [1, 255]; got 'zstd'."),
    (["plan.codecs=[dither:0]"], "plan.codecs", "The 'plan.codecs' parameter's entries must be one of float64, "
     "float32, bfloat16, natural, natural7, dither or dither:<s> with s in [1, 255]; got 'dither:0'."),
    (["plan.codecs=[natural:3]"], "plan.codecs", "The 'plan.codecs' parameter's entries must be one of float64, "
     "float32, bfloat16, natural, natural7, dither or dither:<s> with s in [1, 255]; got 'natural:3'."),
])
def test_plan_bad_inputs_named(tmp_path, overrides, key, text):
    """Each bad plan.* value names the key and the allowed range; an unknown key is refused as isparse-run refuses one."""
    from composing import check_command
    from pipeline.plan import plan_job

    overrides = [f"paths.outputs={tmp_path}", "engine=inprocess", *overrides]
    with pytest.raises(ConfigError) as err:
        check_command(overrides, config_name="plan")
        plan_job(compose_plan(overrides))
    assert err.value.key == key and str(err.value) == text


def test_tau_grid():
    assert resolve_tau_grid(None, 123, 4) == [1, 2, 4, 8, 16, 31, 32, 64, 123]   # 1/m ... 1, with 1/n = ceil(123/4)
    assert resolve_tau_grid(["1/m", "1/n", "2/n", "62/m", 1], 123, 4) == [1, 31, 62, 123]   # 2 x 123/4 = 61.5 -> 62
    assert resolve_tau_grid("auto", 10, 3) == [4]
    # GD's own tau is 1: auto and the default grid mean tau = 1; a tau < 1 given stays (its row says GD refuses it)
    assert resolve_tau_grid(None, 123, 4, full=True) == [123] and resolve_tau_grid("auto", 10, 3, full=True) == [10]
    assert resolve_tau_grid(["auto", "1/n"], 123, 4, full=True) == [31, 123]
    for bad in ([], [0.001], [1.01], ["x"], [float("nan")], [0.5], ["5/n"], ["124/m"]):
        with pytest.raises(ConfigError) as err:
            resolve_tau_grid(bad, 123, 4)
        assert err.value.key == "plan.taus"
    assert resolve_block_sizes(None, 30, 5) == [5] and resolve_block_sizes([8, 1, 8], 30, 1) == [1, 8]
    for bad in ([], [0], [31], [1.5]):
        with pytest.raises(ConfigError, match="plan.block_sizes"):
            resolve_block_sizes(bad, 30, 1)


def test_fit_round_cost_recovers_latency_and_bandwidth():
    """Rounds of 2 ms + bytes / (10 MB/s): the fit returns both, with zero residual; noise gives its rms."""
    probes = [Probe(tau=t, uplink_bytes=b, round_s=2e-3 + b / 1e7, compute_s=1e-3, rounds=10)
              for t, b in ((0.1, 1e3), (0.5, 5e4), (1.0, 2e5))]
    cost = fit_round_cost(probes)
    assert cost.latency_s == pytest.approx(2e-3, rel=1e-9) and cost.bandwidth_Bps == pytest.approx(1e7, rel=1e-9)
    assert cost.residual_rel < 1e-9 and cost.round_s(1e5) == pytest.approx(2e-3 + 1e-2)
    noisy = [Probe(p.tau, p.uplink_bytes, p.round_s * f, p.compute_s, 10) for p, f in zip(probes, (1.1, 0.9, 1.0))]
    fit = fit_round_cost(noisy)
    rel = (np.array([p.round_s for p in noisy]) - (fit.latency_s + fit.seconds_per_byte *
                                                   np.array([p.uplink_bytes for p in noisy]))) / [p.round_s for p in noisy]
    assert fit.residual_rel == pytest.approx(float(np.sqrt(np.mean(rel ** 2)))) and fit.residual_rel > 0.01
    flat = fit_round_cost([Probe(0.1, 1e3, 5e-3, 0, 10), Probe(0.5, 1e4, 4e-3, 0, 10)])   # slope < 0: constant
    assert flat.seconds_per_byte == 0 and flat.latency_s == pytest.approx(4.5e-3) and "below 0" in flat.note
    # tau = 1 (no draw) is not a point of the line: its own measured round
    dense = fit_round_cost([*probes[:2], Probe(1.0, 4e5, 1e-3, 0, 10, dense=True)])
    assert dense.latency_s == pytest.approx(2e-3) and dense.bandwidth_Bps == pytest.approx(1e7)
    assert dense.round_s(4e5, dense=True) == 1e-3 and dense.round_s(4e5) == pytest.approx(2e-3 + 4e-2)
    assert fit_round_cost(probes).dense_round_s is None
    assert uplink_bytes_per_round(4, 123, 123, 31, False) == 4 * 31 * 8
    assert uplink_bytes_per_round(4, 123, 123, 31, True) == 4 * 31 * 12
    assert uplink_bytes_per_round(4, 123, 123, 123, True) == 4 * 123 * 8     # all blocks: no ids


@pytest.mark.needs_data
def test_rows_use_the_bound_and_skip_without_one():
    """A row's iterations are the bound's iterations_to(tol r_0); ISAGA on data without Assumption 2 (tau < 1) has no
    bound: the row is skipped with the theorem's reason; the recommendation is the least predicted time."""
    from conftest import DATA_DIR

    data = load_dataset("a1a", data_dir=str(DATA_DIR))
    cost = fit_round_cost([Probe(0.1, 100.0, 1e-3, 0, 10), Probe(1.0, 4000.0, 3e-3, 0, 10)])
    isega = make(algorithm="isega", data=data, lam=0.3, n=4, block_size=1, tau=1.0)
    row = plan_row(isega, 1e-4, cost, 1)
    r0 = float(np.sum((isega.x0 - isega.reference.x_star) ** 2))
    assert isinstance(row, PlanRow) and row.predicted_iterations == isega.bound.iterations_to(1e-4 * r0)
    assert row.predicted_round_s == pytest.approx(cost.round_s(4 * 123 * 8))
    isaga = make(algorithm="isaga", data=data, lam=0.3, n=4, block_size=1, tau="auto", reference=isega.reference)
    skip = plan_row(isaga, 1e-4, cost, 1)
    assert isinstance(skip, SkippedRow) and "Assumption 2" in skip.reason
    rows = [PlanRow(t, 1, 2, 1, i, s, i * s, 0.0, 0.0, "", "paper") for t, i, s in ((0.5, 100, 2.0), (1.0, 60, 3.0))]
    assert recommend(rows).tau == 1.0 and recommend([]) is None and math.isfinite(rows[0].predicted_time_s)


@pytest.mark.needs_data
def test_plan_codecs_grid(tmp_path):
    """plan.codecs is a dimension of the grid: one row per (codec, tau); each row's iterations are those the run built
    with that messages.codec predicts (the bound with its omega), its bytes per round the codec's bits (9 for
    natural, 1 + 3 for dither with s = 7 plus a 4 B norm per message), its round the line at those bytes plus the
    offset its probe measured; a biased codec's rows are skipped with the reason; the recommendation is the argmin."""
    from pipeline.plan import plan_job

    plan = plan_job(compose_plan([f"paths.outputs={tmp_path}", *OVERRIDES, "engine=inprocess", "plan.taus=[1/n,1]",
                                  "plan.codecs=[float64,natural,dither:7,bfloat16]", "plan.rounds=4",
                                  "plan.repeats=1"]))
    assert plan["codecs"] == ["float64", "natural", "dither:7", "bfloat16"]
    assert [(r["codec"], r["tau_m"]) for r in plan["rows"] if r["iterations_source"] == "bound"] == [
        (c, k) for c in ("float64", "natural", "dither:7") for k in (31, 123)]
    # a biased codec has no bound: its rows are planned from one in-process run each to tol, or skipped if it
    # does not get there (bfloat16's rounding may stall above tol); the reason is the bound's either way
    biased = [r for r in plan["rows"] if r["iterations_source"] == "measured"] + plan["skipped"]
    assert sorted((r["codec"], r["tau_m"]) for r in biased) == [("bfloat16", 31), ("bfloat16", 123)]
    assert all("biased" in (r.get("reason") or r.get("bound_theorem")) for r in biased)
    for r in (r for r in plan["rows"] if r["iterations_source"] == "measured"):
        built = make(algorithm="isega", data=load_dataset("a1a", data_dir=os.environ.get("ISPARSE_DATA_DIR")),
                     lam=0.3, n=4, tau=r["tau"], codec="bfloat16")
        result = built.run(max_iter=20000, tol=1e-4, log_every=10)   # isparse-run's max_iter and log_every
        assert result.converged and r["predicted_iterations"] == result.iterations
    every_row, plan["rows"] = plan["rows"], [r for r in plan["rows"] if r["iterations_source"] == "bound"]
    bits = {"float64": 64, "natural": 9, "dither:7": 4}
    header = {"float64": 0, "natural": 0, "dither:7": 4}
    cost = plan["round_cost"]
    assert set(plan["codec_probes"]) == {"natural", "dither:7", "bfloat16"}
    for r in plan["rows"]:
        levels = {"levels": 7} if r["codec"] == "dither:7" else {}   # dither's own key
        built = make(algorithm="isega", data=load_dataset("a1a", data_dir=os.environ.get("ISPARSE_DATA_DIR")),
                     lam=0.3, n=4, tau=r["tau"], codec=r["codec"].split(":")[0], **levels)
        r0 = float(np.sum((built.x0 - built.reference.x_star) ** 2))
        assert r["predicted_iterations"] == built.bound.iterations_to(1e-4 * r0)
        assert r["bound_source"] == ("paper" if r["codec"] == "float64" else "derived")
        assert r["uplink_bytes_per_round"] == pytest.approx(4 * (r["tau_m"] * bits[r["codec"]] / 8 + header[r["codec"]]))
        line = cost["dense_round_s"] if r["tau_m"] == 123 else cost["latency_s"] + cost["seconds_per_byte"] * r[
            "uplink_bytes_per_round"]
        if r["codec"] != "float64":
            p = plan["codec_probes"][r["codec"]]
            own = cost["latency_s"] + cost["seconds_per_byte"] * p["uplink_bytes"]
            assert r["codec_offset_s"] == pytest.approx(p["round_s"] - own, rel=1e-9, abs=1e-15)
        assert r["predicted_round_s"] == pytest.approx(max(line + r["codec_offset_s"], 0.0), rel=1e-9, abs=1e-15)
    by = {(r["codec"], r["tau_m"]): r["predicted_iterations"] for r in plan["rows"]}
    assert by["float64", 31] < by["natural", 31] < by["dither:7", 31]   # omega = 0 < 1/8 < min(31/49, sqrt(31)/7)
    best = min(every_row, key=lambda r: (r["predicted_time_s"], r["predicted_uplink_bytes"]))
    assert plan["recommended"] == best
    assert "messages.codec=" in render(plan) and "natural" in render(plan)


def test_the_plan_names_the_rows_within_its_error_of_the_recommended():
    """Issue 48: a row whose predicted time is within the model's error of the recommended one is named beside it
    (their +-rms bands overlap: t <= t_best (1 + e) / (1 - e)); a row outside is not; no error, no such row."""
    from isparse.planning import PlanRow, recommend, within_error

    def row(tau, t):
        return PlanRow(tau=tau, tau_m=int(100 * tau), m=100, blocks_size=1, predicted_iterations=100.0,
                       predicted_round_s=t / 100, predicted_time_s=t, predicted_uplink_bytes=1.0,
                       uplink_bytes_per_round=1.0, bound_theorem="Theorem 1", bound_source="paper")

    rows = [row(0.25, 1.01), row(0.5, 1.0), row(1.0, 2.0), row(0.1, 2.2)]
    best = recommend(rows)
    assert best.tau == 0.5
    assert [r.tau for r in within_error(rows, best, 0.35)] == [0.25, 1.0]    # (1.35 / 0.65) = 2.08 x 1.0
    assert [r.tau for r in within_error(rows, best, 0.01)] == [0.25]         # 1.0202 x 1.0
    assert within_error(rows, best, 0.0) == [] and within_error([], None, 0.3) == []
    assert len(within_error(rows, best, 1.0)) == 3
