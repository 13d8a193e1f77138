"""The comparison experiments (conf/experiment/{isgd_vs_sgd,iasgd_vs_asgd,isaga_vs_saga,isega_vs_gd}.yaml, their arms in
conf/arm/) and the report's method-vs-baseline table (pipeline.report.comparison): hand-made records, and short
versions of the four experiments run by the isparse-run console script (a real Hydra multirun, a real MLflow sqlite
store), whose tables are checked against ratios recomputed here from the child runs' logged metrics."""

import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.report import RunRecord, compare_markdown, comparison, grid_markdown

CLI = str(Path(sys.executable).parent / "isparse-run")


# --------------------------------------------------------------------------------- hand-made records
def rec(arm, role, n, seed, *, hit=None, level=None, up_per_step=10.0, steps=100, tol=1e-3, tune=None, value=None,
        data="d", tau_m=1, m=4, status="FINISHED"):
    """A run whose dist_sq / r0 (r0 = 2) is 1 until it drops to tol at step ``hit`` (None: never), or, with ``level``,
    1 for the first 80% of the steps and ``level`` over the last 20%; uplink grows by ``up_per_step`` a step."""
    s = list(range(0, steps + 1, 10))
    if level is not None:
        d = [2.0 if t < 0.8 * steps else 2.0 * level for t in s]
    else:
        d = [2.0 * (tol if hit is not None and t >= hit else 1.0) for t in s]
    config = {tune: value} if tune else {}
    r = RunRecord(run_id=f"{arm}{n}{seed}{value}", status=status, algorithm=arm.split("_")[0], data=data, n=n, m=m,
                  tau=tau_m / m, tau_m=tau_m, seed=seed, tol=tol, r0=2.0, label_extra="", predicted=None,
                  bound_quantity="dist_sq", history={"dist_sq": (s, d), "subopt": (s, [v / 2 for v in d]),
                                                     "uplink_bytes": (s, [up_per_step * t for t in s])},
                  config=config, role=role, arm=arm, tune=tune)
    r.group = ((tune, value),) if tune else ()
    return r


def test_iterations_ratio_per_seed_against_the_n1_baseline():
    """Method n = 10 against the n = 1 baseline: per-seed ratios of iterations and uplink to eps, median and range."""
    records = [rec("isgd_n10", "method", 10, 0, hit=40, up_per_step=8), rec("isgd_n10", "method", 10, 1, hit=60),
               rec("isgd_n10", "method", 10, 2, hit=50),
               rec("sgd_n1", "baseline", 1, 0, hit=20, up_per_step=4), rec("sgd_n1", "baseline", 1, 1, hit=30),
               rec("sgd_n1", "baseline", 1, 2, hit=50)]
    rows, grid, gaps = comparison(records, measures=("dist_sq",))
    assert not grid and not gaps and len(rows) == 1
    r = rows[0]
    assert (r["method"], r["n"], r["baseline"], r["baseline_n"], r["measure"]) == (
        "isgd_n10", 10, "sgd_n1", 1, "iterations to ε")
    assert (r["ratio"], r["ratio_low"], r["ratio_high"]) == (2.0, 1.0, 2.0)       # 40/20, 60/30, 50/50
    assert r["method_value"] == 50 and r["baseline_value"] == 30
    # uplink to eps: seed 0 320/80 = 4, seed 1 600/300 = 2, seed 2 500/500 = 1
    assert (r["uplink_ratio"], r["uplink_ratio_low"], r["uplink_ratio_high"]) == (2.0, 1.0, 4.0)
    md = compare_markdown(rows)
    assert "| d | isgd_n10 | 10 | 1/4 | sgd_n1 | 1 | ‖x − x*‖² / r₀ | iterations to ε = 0.001 | 50 | 30 | 2 [1–2] |" in md


def test_same_n_baseline_is_preferred_and_a_missing_one_is_a_gap():
    records = [rec("isega", "method", 10, 0, hit=30), rec("isega", "method", 100, 0, hit=40),
               rec("gd", "baseline", 10, 0, hit=30), rec("gd", "baseline", 100, 0, hit=20),
               rec("isega", "method", 10, 0, hit=30, data="other")]
    rows, _, gaps = comparison(records, measures=("dist_sq",))
    assert [(r["n"], r["baseline_n"], r["ratio"]) for r in rows] == [(10, 10, 1.0), (100, 100, 2.0)]
    assert len(gaps) == 1 and gaps[0].startswith("other isega n=10: no baseline run")


def test_final_error_when_eps_is_not_reached():
    """Constant-step runs: the ratio of the mean dist_sq / r0 over the last 20% of the steps, uplink of the budget."""
    records = [rec("isgd_n10", "method", 10, 0, level=0.3, up_per_step=2), rec("sgd_n1", "baseline", 1, 0, level=0.1)]
    (r,), _, _ = comparison(records, measures=("dist_sq",))
    assert r["measure"] == "final error" and r["budget"] == 100
    assert r["method_value"] == pytest.approx(0.3) and r["ratio"] == pytest.approx(3.0)
    assert r["uplink_ratio"] == pytest.approx(0.2)     # 200 B against 1,000 B over the 100 steps
    # the tail is the last 20% of the steps, not the last value only
    half = rec("x", "baseline", 1, 0, steps=100)
    half.history["dist_sq"] = (list(range(0, 101, 10)), [2.0] * 8 + [0.2, 0.4, 0.6])
    assert half.tail_relative() == pytest.approx(0.2)


def test_tuned_key_uses_each_sides_best_value_and_skips_a_diverged_one():
    key = "algorithm.rho"
    records = [rec("iasgd_n10", "method", 10, 0, level=e, tune=key, value=v) for v, e in (("2", 0.5), ("8", 0.2),
                                                                                         ("32", 0.4))]
    records += [rec("asgd_n1", "baseline", 1, 0, level=e, tune=key, value=v) for v, e in (("2", 0.1), ("8", 0.05),
                                                                                         ("32", 0.3))]
    records.append(rec("iasgd_n10", "method", 10, 0, level=0.01, tune=key, value="1"))    # best, but another seed ...
    failed = [rec("iasgd_n10", "method", 10, 1, tune=key, value="1", status="FAILED")]   # ... of it diverged
    rows, grid, _ = comparison(records, failed, measures=("dist_sq",))
    (r,) = rows
    assert (r["tuned"], r["method_best"], r["baseline_best"]) == (key, "8", "8")
    assert r["ratio"] == pytest.approx(0.2 / 0.05)
    method_grid = [g for g in grid if g["arm"] == "iasgd_n10"]
    assert [g["value"] for g in method_grid] == ["1", "2", "8", "32"]          # numeric order
    assert [g["best"] for g in method_grid] == [False, False, True, False]
    assert method_grid[0]["failed"] == 1 and method_grid[0]["runs"] == 1
    assert "| d | iasgd_n10 | method | 10 | algorithm.rho | 1 | 1 | 1 (diverged or failed) |" in grid_markdown(grid)


def test_both_measures_by_default_each_relative_to_its_start_and_the_null_share():
    """One row per measure (subopt first): the final F - F* may match while ||x - x*||^2 does not (issue 21)."""
    method = rec("isgd_n10", "method", 10, 0, level=0.5)
    base = rec("sgd_n1", "baseline", 1, 0, level=0.1)
    s = method.history["dist_sq"][0]
    method.history["subopt"] = (s, [3.0 if t < 80 else 0.3 for t in s])      # relative 0.1, the baseline's
    base.history["subopt"] = (s, [6.0 if t < 80 else 0.6 for t in s])        # relative 0.1
    method.history["dist_sq_null"] = (s, [0.0 if t < 80 else 0.6 for t in s])   # 0.6 of the final dist_sq 1.0
    base.history["dist_sq_null"] = (s, [0.0] * len(s))
    sub, dist = comparison([method, base])[0]
    assert (sub["error"], dist["error"]) == ("subopt", "dist_sq")
    assert sub["ratio"] == pytest.approx(1.0) and dist["ratio"] == pytest.approx(5.0)
    assert sub["method_null_share"] is None
    assert dist["method_null_share"] == pytest.approx(0.6) and dist["baseline_null_share"] == 0.0
    md = compare_markdown([sub, dist])
    assert "(F(x) − F*) / (F(x⁰) − F*)" in md and "| 60% / 0% |" in md
    assert [r["error"] for r in comparison([method, base], measures=("subopt",))[0]] == ["subopt"]


def test_time_to_eps_columns_are_the_runs_logged_metrics_with_per_seed_ratios():
    """time_to_eps_s and the other run metrics to eps (logged at each run's eps on eps_on) beside the iteration
    ratios: per-seed time ratios, medians over seeds, and "—" where a run did not reach eps (it logged none)."""
    def timed(r, seconds, rounds, down):
        r.eps, r.eps_on = 1e-6, "subopt"
        r.at_eps = {} if seconds is None else {"time_to_eps_s": seconds, "rounds_to_eps": rounds,
                                               "uplink_bytes_to_eps": 8.0 * rounds, "downlink_bytes_to_eps": down}
        return r

    records = [timed(rec("isega", "method", 10, 0, hit=40), 2.0, 40, 400.0),
               timed(rec("isega", "method", 10, 1, hit=60), 9.0, 60, 600.0),
               timed(rec("gd", "baseline", 10, 0, hit=20), 4.0, 20, 200.0),
               timed(rec("gd", "baseline", 10, 1, hit=30), 3.0, 30, 300.0)]
    (r,), _, _ = comparison(records, measures=("dist_sq",))
    assert r["time_eps"] == "F - F* <= 1e-06 (F(x0) - F*)"
    assert (r["time_ratio"], r["time_ratio_low"], r["time_ratio_high"]) == (1.75, 0.5, 3.0)   # 2/4, 9/3
    assert (r["method_time_to_eps_s"], r["baseline_time_to_eps_s"]) == (5.5, 3.5)
    assert (r["method_rounds_to_eps"], r["baseline_rounds_to_eps"]) == (50, 25)
    assert (r["method_downlink_bytes_to_eps"], r["baseline_uplink_bytes_to_eps"]) == (500.0, 200.0)
    assert r["time_reached"] == "2/2 / 2/2"
    md = compare_markdown([r])
    assert "time to ε, method (s)" in md.splitlines()[0]
    assert md.splitlines()[2].endswith("| F - F* <= 1e-06 (F(x0) - F*) | 5.5 | 3.5 | 1.75 [0.5–3] | 50 / 25 | "
                                       "500 / 250 | 2/2 / 2/2 |")
    timed(records[1], None, None, None)      # seed 1 of the method did not reach eps: no time, no ratio
    (r,), _, _ = comparison(records, measures=("dist_sq",))
    assert r["method_time_to_eps_s"] is None and r["time_ratio"] is None and r["time_reached"] == "1/2 / 2/2"
    assert "| F - F* <= 1e-06 (F(x0) - F*) | — | 3.5 | — |" in compare_markdown([r])
    for x in records:                         # runs before the metrics existed: no columns
        x.eps, x.at_eps = None, {}
    assert "time to ε" not in compare_markdown(comparison(records, measures=("dist_sq",))[0])


def test_runs_without_a_role_give_no_comparison():
    assert comparison([rec("isega", None, 10, 0, hit=30), rec("gd", None, 10, 0, hit=30)]) == ([], [], [])


# ------------------------------------------------------------------------ the experiments, short versions
#: each comparison experiment, shortened: one bundled data set, a tiny budget (a few seconds of iterations)
SHORT = {
    "isgd_vs_sgd": ["+arm=isgd_n10,sgd_n1", "seed=0,1", "max_iter=200"],
    "iasgd_vs_asgd": ["algorithm.rho=2,16", "seed=0", "max_iter=200"],
    "isaga_vs_saga": ["+arm=isaga_shared_n10,saga_n1", "seed=0", "max_iter=200"],
    "isega_vs_gd": ["workers.n=4", "problem.lam=0.1", "tol=1e-4", "max_iter=2000"],
}


@pytest.fixture(scope="module")
def short_sweeps(tmp_path_factory):
    """The four short sweeps, started together, writing one store and one reference cache under tmp_path (one
    schema migration instead of four: isparse-run makes a fresh store under a lock), each sweep in its own
    experiment paper-<name> and working directory: {name: (client, parent, runs)}."""
    procs = {}
    shared = tmp_path_factory.mktemp("compare")
    for name, extra in SHORT.items():
        cwd = tmp_path_factory.mktemp(name)
        cmd = [CLI, "-m", f"+experiment={name}", "data=breast_cancer", *extra, f"paths.outputs={shared}",
               "progress=false"]
        procs[name] = (shared, subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                text=True))
    result = {}
    try:
        for name, (out, proc) in procs.items():
            text, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"{name}: {text[-3000:]}"
            client = MlflowClient(f"sqlite:///{out}/mlflow.db")
            exp = client.get_experiment_by_name(f"paper-{name}")
            parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
            runs = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
            result[name] = (client, parent, runs)
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return result


def _table(client, parent, name):
    return list(csv.DictReader(Path(client.download_artifacts(parent.info.run_id, f"report/{name}.csv")).open()))


def _measured(client, run, measure="dist_sq"):
    """(iterations to eps, uplink to eps, mean measure / its t = 0 value over the last 20% of the logged steps, final
    uplink), from the run's logged metrics: measure <= tol x its t = 0 value (r0 for dist_sq) at a logged step."""
    p = run.data.params
    dist = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, measure))
    r0, tol = (float(p["r0"]) if measure == "dist_sq" else dist[0][1]), float(p["tol"])
    assert dist[0][0] == 0
    up = dict((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "uplink_bytes"))
    hit = next((s for s, v in dist if v <= tol * r0), None)
    last = dist[-1][0]
    tail = [v / r0 for s, v in dist if s >= 0.8 * last]
    return hit, (up[hit] if hit is not None else None), sum(tail) / len(tail), up[last]


def _expected(client, runs, pick=None, measure="dist_sq"):
    """{(method arm, n): (median ratio, min, max, median uplink ratio)} recomputed from the store, pairing each method
    run with the baseline run of the same seed (same n if there is one, else n = 1); ``pick(arm, n) -> value`` of
    the tuned key keeps only that grid value."""
    info = []
    for run in runs:
        p = run.data.params
        if pick is not None and p["algorithm.rho"] != pick(p["compare.arm"], int(p["n"])):
            continue
        info.append((p["compare.arm"], p["compare.role"], int(p["n"]), int(p["seed"]), _measured(client, run, measure)))
    base = {(a, n, s): m for a, role, n, s, m in info if role == "baseline"}
    out, reaches = {}, {}
    for arm in sorted({a for a, role, *_ in info if role == "method"}):
        for n in sorted({n for a, role, n, *_ in info if a == arm}):
            for barm in sorted({a for a, role, *_ in info if role == "baseline"}):
                mine = [(s, m) for a, role, nn, s, m in info if a == arm and nn == n]
                pairs = [(m, base.get((barm, n, s)) or base[(barm, 1, s)]) for s, m in mine]
                reach = all(m[0] is not None and b[0] is not None for m, b in pairs)
                ratios = [m[0] / b[0] if reach else m[2] / b[2] for m, b in pairs]
                ups = [m[1] / b[1] if reach else m[3] / b[3] for m, b in pairs]
                out[(arm, n, barm)] = (statistics.median(ratios), min(ratios), max(ratios), statistics.median(ups))
                reaches[(arm, n, barm)] = reach
    return out, reaches


def _check_table(client, parent, runs, expected_rows, pick=None):
    rows = _table(client, parent, "compare")
    assert sorted(r["error"] for r in rows) == sorted(["dist_sq", "subopt"] * len(expected_rows))   # both, by default
    for r in rows:
        expected, reaches = _expected(client, runs, pick, r["error"])
        ratio, low, high, up = expected[(r["method"], int(r["n"]), r["baseline"])]
        reach = reaches[(r["method"], int(r["n"]), r["baseline"])]
        assert float(r["ratio"]) == pytest.approx(ratio, rel=1e-9)
        assert (float(r["ratio_low"]), float(r["ratio_high"])) == pytest.approx((low, high), rel=1e-9)
        assert float(r["uplink_ratio"]) == pytest.approx(up, rel=1e-9)
        assert r["measure"] == ("iterations to ε" if reach else "final error")
        if pick is None:   # the run metrics to eps: the median of the method arm's logged time_to_eps_s, if all have one
            mine = [run.data.metrics.get("summary/time_to_eps_s") for run in runs
                    if run.data.params["compare.arm"] == r["method"] and int(run.data.params["n"]) == int(r["n"])]
            assert r["time_eps"] == "F - F* <= 1e-06 (F(x0) - F*)"
            expected_time = statistics.median(mine) if None not in mine else None
            assert (float(r["method_time_to_eps_s"]) if r["method_time_to_eps_s"] else None) == (
                pytest.approx(expected_time, rel=1e-9) if expected_time is not None else None)
    readme = Path(client.download_artifacts(parent.info.run_id, "report/README.md")).read_text()
    assert "compare.md" in readme and "compare.csv" in readme
    rows = [r for r in rows if r["error"] == "dist_sq"]
    assert sorted((r["method"], int(r["n"]), r["baseline"], int(r["baseline_n"])) for r in rows) == expected_rows
    return rows


@pytest.mark.slow
def test_isgd_vs_sgd_compares_n10_isgd_with_the_single_worker_sgd(short_sweeps):
    client, parent, runs = short_sweeps["isgd_vs_sgd"]
    assert len(runs) == 4 and {r.data.tags.get("compare.role") for r in runs} == {"method", "baseline"}
    sgd = [r for r in runs if r.data.params["compare.role"] == "baseline"]
    assert {(r.data.params["algorithm.name"], r.data.params["n"], r.data.params["tau_m"] == r.data.params["m"],
             r.data.params["algorithm.batch"]) for r in sgd} == {("sgd", "1", True, "1")}
    (row,) = _check_table(client, parent, runs, [("isgd_n10", 10, "sgd_n1", 1)])
    assert row["measure"] == "final error" and int(row["seeds"]) == 2


@pytest.mark.slow
def test_iasgd_vs_asgd_picks_each_sides_best_rho_of_the_grid(short_sweeps):
    client, parent, runs = short_sweeps["iasgd_vs_asgd"]
    assert len(runs) == 4
    grid = _table(client, parent, "compare_grid")
    assert sorted((g["arm"], g["value"]) for g in grid) == [("asgd_n1", "16"), ("asgd_n1", "2"),
                                                            ("iasgd_n10", "16"), ("iasgd_n10", "2")]
    best = {}
    for arm in ("iasgd_n10", "asgd_n1"):      # the grid's best, recomputed: the lowest final error
        err = {r.data.params["algorithm.rho"]: _measured(client, r)[2] for r in runs
               if r.data.params["compare.arm"] == arm}
        best[arm] = min(err, key=err.get)
        assert {g["value"] for g in grid if g["arm"] == arm and g["best"] == "True"} == {best[arm]}
    (row,) = _check_table(client, parent, runs, [("iasgd_n10", 10, "asgd_n1", 1)], pick=lambda arm, n: best[arm])
    assert (row["method_best"], row["baseline_best"]) == (best["iasgd_n10"], best["asgd_n1"])


@pytest.mark.slow
def test_isaga_vs_saga_compares_with_the_single_worker_saga(short_sweeps):
    client, parent, runs = short_sweeps["isaga_vs_saga"]
    assert len(runs) == 2
    _check_table(client, parent, runs, [("isaga_shared_n10", 10, "saga_n1", 1)])


@pytest.mark.slow
def test_isega_vs_gd_compares_iterations_to_eps_at_the_same_n(short_sweeps):
    client, parent, runs = short_sweeps["isega_vs_gd"]
    paper, whole = _check_table(client, parent, runs, [("isega", 4, "gd", 4), ("isega", 4, "gd_whole", 4)])
    assert paper["measure"] == whole["measure"] == "iterations to ε"
    L = {r.data.params["compare.arm"]: (float(r.data.params["L"]), float(r.data.params["gamma"])) for r in runs}
    assert L["gd_whole"][1] > L["gd"][1] == pytest.approx(1 / (2 * L["gd"][0]))   # 1/(2 L_f) > 1/(2 max_i L_i)
    assert float(whole["baseline_value"]) < float(paper["baseline_value"])          # the larger step: fewer iterations
    import numpy as np
    from isparse.data import load_dataset

    A = load_dataset("breast_cancer").A.toarray()                                   # L_f from the data, here
    lam = float(next(iter(runs)).data.params["problem.lam"])
    assert L["gd_whole"][1] == pytest.approx(1 / (2 * (np.linalg.eigvalsh(A.T @ A)[-1] / (4 * len(A)) + lam)), rel=1e-9)
    md = Path(client.download_artifacts(parent.info.run_id, "report/compare.md")).read_text()
    assert "| isega | 4 |" in md and "iterations to ε = 0.0001" in md


def test_a_bad_compare_role_names_the_field():
    from isparse import ConfigError
    from pipeline.schema import JobConfig

    assert JobConfig.from_dict({"compare": {"role": None}}).compare.role is None
    assert JobConfig.from_dict({"compare": {"role": "baseline"}}).compare.role == "baseline"
    with pytest.raises(ConfigError, match="'compare.role' parameter must be null or one of method, baseline; got 'base'"):
        JobConfig.from_dict({"compare.role": "base"})
