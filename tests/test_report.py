"""The paper's experiments (conf/experiment/) and isparse-report, on a real Hydra multirun and MLflow store."""

import csv
import io
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from isparse.blocks import resolve_tau
from isparse.setup import check_static
from pipeline.report import build_report

CLI = str(Path(sys.executable).parent / "isparse-run")
REPORT = str(Path(sys.executable).parent / "isparse-report")
EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "experiment").glob("*.yaml"))


@pytest.fixture(scope="module")
def quick_sweep(tmp_path_factory):
    """``isparse-run -m +experiment=quick``: ISEGA on breast cancer, n = 4, tau in {1/(2n), 1/n, 1}, seeds 0 and 1."""
    out = tmp_path_factory.mktemp("quick")
    proc = subprocess.run([CLI, "-m", "+experiment=quick", f"paths.outputs={out}", "progress=false"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # one data load and one reference solve for the 6 jobs: the later jobs reuse them
    assert (proc.stdout + proc.stderr).count("as loaded by an earlier job of this sweep") == 5
    assert len(list((out / "cache").glob("*"))) == 1
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("paper-quick")
    parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    return out, client, parent, children


def _artifact_text(client, run_id, path):
    local = client.download_artifacts(run_id, path)
    return Path(local).read_text()


def test_quick_sweep_writes_the_report_to_the_parent_run(quick_sweep):
    out, client, parent, children = quick_sweep
    assert len(children) == 6 and all(c.info.status == "FINISHED" for c in children)
    names = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/convergence_breast_cancer.png", "report/iterations_vs_tau.png", "report/table99.md",
            "report/table99.csv", "report/iterations_vs_tau.csv"} <= names
    local = Path(parent.data.tags.get("report_dir") or
                 client.get_run(parent.info.run_id).data.tags["report_dir"])
    assert local.is_relative_to(out) and (local / "iterations_vs_tau.png").stat().st_size > 10_000


def _to_eps(client, run):
    """Recomputed from the raw histories: first logged step with dist_sq <= tol * r0, and the uplink bytes there."""
    tol, r0 = float(run.data.params["tol"]), float(run.data.params["r0"])
    dist = sorted(client.get_metric_history(run.info.run_id, "dist_sq"), key=lambda m: m.step)
    step = next(m.step for m in dist if m.value <= tol * r0)
    up = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "uplink_bytes")}
    return step, up[step]


def test_table_equals_numbers_recomputed_from_logged_metrics(quick_sweep):
    _, client, parent, children = quick_sweep
    rows = list(csv.DictReader(io.StringIO(_artifact_text(client, parent.info.run_id, "report/table99.csv"))))
    assert len(rows) == 1
    row = rows[0]
    m = int(children[0].data.params["m"])
    by_tau = {}
    for run in children:
        by_tau.setdefault(int(run.data.params["tau_m"]), []).append(_to_eps(client, run))
    sparse, full = by_tau[math.ceil(m / 4)], by_tau[m]
    its_sparse = statistics.median(s for s, _ in sparse)
    its_full = statistics.median(s for s, _ in full)
    up_sparse = statistics.median(u for _, u in sparse)
    up_full = statistics.median(u for _, u in full)
    assert float(row["sparse_iterations"]) == its_sparse and float(row["full_iterations"]) == its_full
    assert float(row["iterations_ratio"]) == pytest.approx(its_sparse / its_full, rel=1e-12)
    assert float(row["uplink_ratio"]) == pytest.approx(up_sparse / up_full, rel=1e-12)
    assert float(row["uplink_saved"]) == pytest.approx(1 - up_sparse / up_full, rel=1e-12)
    # bytes per iteration: n workers x tau*m blocks x 8 B (values only) at tau < 1, n x d x 8 B dense
    d = int(children[0].data.params["d"])
    assert up_full == pytest.approx(its_full * 4 * d * 8)
    assert up_sparse == pytest.approx(its_sparse * 4 * math.ceil(m / 4) * 8)
    md = _artifact_text(client, parent.info.run_id, "report/table99.md")
    assert f"{float(row['iterations_ratio']):.2f}" in md


def test_tau_curve_has_measured_median_and_prediction(quick_sweep):
    _, client, parent, children = quick_sweep
    rows = list(csv.DictReader(io.StringIO(_artifact_text(client, parent.info.run_id, "report/iterations_vs_tau.csv"))))
    assert [int(r["tau_m"]) for r in rows] == [4, 8, 30]
    for r in rows:
        runs = [c for c in children if int(c.data.params["tau_m"]) == int(r["tau_m"])]
        assert float(r["median"]) == statistics.median(_to_eps(client, c)[0] for c in runs)
        assert float(r["predicted"]) == float(runs[0].data.tags["predicted_iterations"])
    # Theorem 3's prediction falls with tau, and measured iterations stay under it
    predicted = [float(r["predicted"]) for r in rows]
    assert predicted[0] > predicted[1] > predicted[2]
    assert all(float(r["high"]) <= float(r["predicted"]) for r in rows)


def test_isparse_report_cli_rebuilds_the_same_table(quick_sweep, tmp_path):
    out, client, parent, _ = quick_sweep
    proc = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "paper-quick",
                           "--outputs", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = (tmp_path / "reports" / "paper-quick" / parent.info.run_id / "table99.csv").read_text()
    assert again == _artifact_text(client, parent.info.run_id, "report/table99.csv")
    bad = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "nope"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "--experiment" in bad.stderr


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes_and_its_sweep_values_are_valid(compose, name):
    """Each experiment's swept values pass the static checks, and tau values resolve for its n."""
    cfg = compose([f"+experiment={name}"])
    params = cfg.hydra.sweeper.params
    assert cfg.report.auto is True and cfg.engine == "inprocess"
    assert cfg.tracking.experiment == f"paper-{name}"
    values = {k: str(v).split(",") for k, v in params.items()}
    for alg in values["algorithm"]:
        for n in values["workers.n"]:
            for tau in values.get("tau", ["auto"]):
                check_static(algorithm=alg, n=int(n), block_size=1, tau=tau, step_multiplier=1.0,
                             max_iter=cfg.max_iter, tol=cfg.tol)
                resolve_tau(tau, 112, int(n))                  # raises ConfigError for a malformed tau
    for data in values["data"]:
        compose([f"+experiment={name}", f"data={data}"])     # the data config exists


def test_tau_written_per_n():
    assert resolve_tau("1/n", 112, 10) == resolve_tau("auto", 112, 10) == (12 / 112, 12)
    assert resolve_tau("0.25/n", 112, 10)[1] == 3 and resolve_tau("4/n", 112, 10)[1] == 45
    assert resolve_tau("4/n", 112, 2)[1] == 112           # clipped to tau = 1
    from isparse import ConfigError

    with pytest.raises(ConfigError, match="'tau'.*c > 0"):
        resolve_tau("-1/n", 112, 10)


def test_report_of_unknown_parent_names_the_field(quick_sweep):
    out, *_ = quick_sweep
    from isparse import ConfigError

    with pytest.raises(ConfigError, match="--parent"):
        build_report(f"sqlite:///{out}/mlflow.db", parent_id="0" * 32, outputs=out)


def test_paper_step_rule_gives_the_papers_gammas():
    """step.rule=paper: ISEGA 4x Theorem 3's gamma, ISGD 1/(5L), shared ISAGA 1/(L_example(3/n + tau)); GD unchanged."""
    from isparse import ConfigError
    from isparse.data import load_dataset
    from isparse.setup import build

    kw = dict(data=load_dataset("breast_cancer"), lam=1e-3, n=4, block_size=1)
    isega = [build(algorithm="isega", step_rule=r, **kw) for r in ("theory", "paper")]
    assert isega[1].method.gamma == pytest.approx(4 * isega[0].method.gamma, rel=1e-14)
    assert not isega[1].bound.applicable and isega[0].bound.applicable
    L = isega[0].problem.L
    assert build(algorithm="isgd", step_rule="paper", **kw).method.gamma == pytest.approx(1 / (5 * L), rel=1e-14)
    gd = [build(algorithm="gd", step_rule=r, **kw).method.gamma for r in ("theory", "paper")]
    assert gd[0] == gd[1] == pytest.approx(1 / (2 * L), rel=1e-14)
    shared = build(algorithm="isaga_shared", step_rule="paper", **kw)
    tau = shared.method.tau_m / shared.method.blocks.m       # Theorem 2's gamma is 1/(L_example (tau + 4/n))
    assert shared.method.gamma / shared.bound.gamma_theory == pytest.approx((tau + 1) / (tau + 3 / 4), rel=1e-12)
    with pytest.raises(ConfigError, match="'step.rule'"):
        build(algorithm="isega", step_rule="fast", **kw)


@pytest.mark.needs_data
def test_tau_sweep_on_mushrooms_has_the_knee_at_one_over_n(tmp_path):
    """+experiment=tau_sweep_quick (ISEGA, mushrooms, n = 10): measured and predicted iterations to eps against tau.

    Theorem 3's prediction is proportional to 1 + 1/(n tau): its log-log slope is -1/2 at tau = 1/n,
    steeper below, flatter above. Checked on the predictions the runs logged (not the report's).
    """
    proc = subprocess.run([CLI, "-m", "+experiment=tau_sweep_quick", f"paths.outputs={tmp_path}", "progress=false"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("paper-tau_sweep_quick")
    parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
    assert "report/iterations_vs_tau.png" in {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    runs = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    points = sorted((float(r.data.params["tau"]), float(r.data.tags["predicted_iterations"]), _to_eps(client, r)[0])
                    for r in runs)
    assert [round(t * 112) for t, _, _ in points] == [3, 6, 12, 23, 45, 112]
    slope = [math.log(b[1] / a[1]) / math.log(b[0] / a[0]) for a, b in zip(points, points[1:])]
    assert slope[1] < -0.5 < slope[2]                    # segments [1/(2n), 1/n] and [1/n, 2/n]
    assert slope[0] < -0.7 and slope[-1] > -0.2          # toward 1/tau below, flat above
    assert all(measured < predicted for _, predicted, measured in points)
    measured = [m for _, _, m in points]
    assert measured == sorted(measured, reverse=True)
    rows = list(csv.DictReader(io.StringIO(_artifact_text(client, parent.info.run_id, "report/iterations_vs_tau.csv"))))
    assert float(rows[0]["predicted_knee_tau"]) == pytest.approx(1 / 10, rel=0.1)
    assert [float(r["median"]) for r in rows] == measured


def test_predicted_iterations_of_a_bound_without_contraction_is_infinite():
    """A rate of exactly 1 (gamma at the theorem's limit, as shared ISAGA's paper gamma at tau = 1) predicts inf, not a crash."""
    from isparse.theory.bound import LinearBound

    kw = dict(theorem="t", quantity="dist_sq", gamma_theory=1.0, gamma=1.0, applicable=True, initial=2.0)
    assert LinearBound(rate=1.0, **kw).iterations_to(1.0) == math.inf
    assert LinearBound(rate=0.5, **kw).iterations_to(0.25) == 3.0      # 0.5^3 * 2 = 0.25
    assert LinearBound(rate=0.0, **kw).iterations_to(0.25) == 1.0


def test_slopes_skip_an_infinite_prediction():
    """IBCD on real data predicts inf below tau = 1 (its bound has a neighbourhood above eps): no slope, no crash."""
    from pipeline.report import add_slopes

    rows = [dict(data="a1a", algorithm="ibcd", n=4, tau=t, median=m, predicted=p)
            for t, m, p in ((0.25, 900, math.inf), (0.5, 600, math.inf), (1.0, 400, 1200.0))]
    out = add_slopes(rows)
    assert out[1]["predicted_slope"] is None and out[2]["predicted_slope"] is None
    assert out[2]["measured_slope"] == pytest.approx(math.log(400 / 600) / math.log(2))
    assert out[0]["predicted_knee_tau"] is None
