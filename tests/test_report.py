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

from isparse.compression.tau import resolve_tau
from pipeline.report import build_report
from composing import SLOW_TO_COMPOSE

import matplotlib.pyplot as plt  # noqa: E402  (after pipeline.report, which selects the Agg backend)

CLI = str(Path(sys.executable).parent / "isparse-run")
REPORT = str(Path(sys.executable).parent / "isparse-report")
EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "experiment").glob("*.yaml"))


@pytest.fixture(scope="module")
def quick_sweep(tmp_path_factory):
    """``isparse-run -m +experiment=quick``: ISEGA on breast cancer, n = 4, tau in {1/(2n), 1/n, 1}, seeds 0 and 1."""
    out = tmp_path_factory.mktemp("quick")
    proc = subprocess.run([CLI, "-m", "+experiment=quick", f"paths.outputs={out}", "progress=false"],
                          capture_output=True, text=True, timeout=600, cwd=out)   # MLflow's ./mlruns goes there
    assert proc.returncode == 0, proc.stderr[-3000:]
    # one data load and one reference solve for the 6 jobs: the later jobs reuse them
    assert (proc.stdout + proc.stderr).count("as loaded by an earlier job of this sweep") == 5
    # one reference (x*, L_i) and the bundled data set's arrays (a later run reads them without scikit-learn); beside
    # each the lock its compute held, <key>.lock
    cached = sorted(p.name for p in (out / "cache").glob("*.npz"))
    assert len(cached) == 2 and cached[1].startswith("data-")
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("paper-quick")
    parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    return out, client, parent, children


def _artifact_text(client, run_id, path):
    local = client.download_artifacts(run_id, path)
    return Path(local).read_text()


@pytest.mark.slow
def test_quick_sweep_writes_the_report_to_the_parent_run(quick_sweep):
    out, client, parent, children = quick_sweep
    assert len(children) == 6 and all(c.info.status == "FINISHED" for c in children)
    names = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/convergence_breast_cancer.png", "report/iterations_vs_tau.png", "report/table99.md",
            "report/table99.csv", "report/iterations_vs_tau.csv", "report/README.md"} <= names
    readme = _artifact_text(client, parent.info.run_id, "report/README.md")
    assert "no key besides seed and τ differs" in readme and "not built" not in readme
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


@pytest.mark.slow
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
    # n = 4: the goal (set for n = 100) has no column, and every run reached eps: no column for where it stalls
    assert "goal" not in md and "n = 100" not in md and "not reached" not in md
    # the run metrics to eps (eps = 1e-6 on subopt, the default), each recomputed from the run's histories
    assert md.splitlines()[0].count("|") == md.splitlines()[2].count("|") == 18
    assert row["time_eps"] == "F - F* <= 1e-06 (F(x0) - F*)" and "| F - F* <= 1e-06 (F(x0) - F*) |" in md
    timed = {}
    for run in children:
        timed.setdefault(int(run.data.params["tau_m"]), []).append(_time_to_eps(client, run))
    for name, tau_m in (("sparse", math.ceil(m / 4)), ("full", m)):
        for i, key in enumerate(("time_to_eps_s", "rounds_to_eps", "downlink_bytes_to_eps")):
            assert float(row[f"{name}_{key}"]) == pytest.approx(statistics.median(t[i] for t in timed[tau_m]),
                                                                 rel=1e-9), (name, key)
    assert float(row["time_ratio"]) == pytest.approx(float(row["sparse_time_to_eps_s"])
                                                     / float(row["full_time_to_eps_s"]), rel=1e-9)
    assert f"{float(row['time_ratio']):.2f}" in md.splitlines()[2]


def _time_to_eps(client, run):
    """(time_to_eps_s, rounds_to_eps, downlink_bytes_to_eps) recomputed from the histories: the first logged step with
    subopt <= 1e-6 x its value at t = 0; (wall_s - time_monitor_s) there minus at t = 0; the downlink there. Each
    equal to the run's own metric."""
    hist = {k: {m.step: m.value for m in client.get_metric_history(run.info.run_id, k)}
            for k in ("subopt", "wall_s", "time_monitor_s", "downlink_bytes")}
    sub = hist["subopt"]
    k = min(s for s in sub if sub[s] <= 1e-6 * sub[0])
    rounds = hist["wall_s"][k] - hist["time_monitor_s"][k] - (hist["wall_s"][0] - hist["time_monitor_s"][0])
    got = (rounds, k, hist["downlink_bytes"][k])
    assert (run.data.metrics["summary/time_to_eps_s"], run.data.metrics["summary/rounds_to_eps"],
            run.data.metrics["summary/downlink_bytes_to_eps"]) == pytest.approx(got, rel=1e-9)
    return got


@pytest.mark.slow
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


@pytest.mark.slow
def test_isparse_report_cli_rebuilds_the_same_table(quick_sweep, tmp_path):
    out, client, parent, _ = quick_sweep
    proc = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "paper-quick",
                           "--outputs", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = (tmp_path / "reports" / "paper-quick" / parent.info.run_id / "table99.csv").read_text()
    assert again == _artifact_text(client, parent.info.run_id, "report/table99.csv")
    bad = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "nope"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "isparse-report: error: The '--experiment' parameter must name an MLflow experiment; got 'nope', which does "
        "not exist."]


@pytest.mark.parametrize("name", [pytest.param(x, marks=pytest.mark.slow) if x in SLOW_TO_COMPOSE else x
                                  for x in EXPERIMENTS])
def test_every_experiment_composes_and_its_sweep_values_are_valid(compose, name):
    """Every job of each experiment's sweep composes and passes the config's checks (``composing``: the basic
    sweeper's expansion of its hydra.sweeper.params), and its tau values resolve for its n."""
    from composing import check_command

    cfg = compose([f"+experiment={name}"])
    assert cfg.report.auto is True and cfg.engine == "inprocess"
    assert cfg.tracking.experiment == f"paper-{name}"
    if name.endswith("_optuna"):   # Optuna samples its intervals itself (tests/test_optuna.py): one trial's job
        (job,) = check_command([f"+experiment={name}", "algorithm.rho=8"])
        assert job.compare.objective is not None and job.compare.role == "method"
        return
    jobs = check_command([f"+experiment={name}"], multirun=True)
    arms = {j.compare.arm for j in jobs if j.compare.role}
    assert not arms or {j.compare.role for j in jobs} == {"method", "baseline"}   # a comparison: both sides
    for job in jobs:
        resolve_tau(job.tau, 112, job.workers.n)                  # raises ConfigError for a malformed tau


def test_tau_written_per_n():
    assert resolve_tau("1/n", 112, 10) == resolve_tau("auto", 112, 10) == (12 / 112, 12)
    assert resolve_tau("0.25/n", 112, 10)[1] == 3 and resolve_tau("4/n", 112, 10)[1] == 45
    from isparse import ConfigError

    with pytest.raises(ConfigError, match=r"'tau'.*c <= n = 2"):   # tau = 2 > 1: refused, not clipped to tau = 1
        resolve_tau("4/n", 112, 2)

    with pytest.raises(ConfigError, match="'tau'.*c > 0"):
        resolve_tau("-1/n", 112, 10)


@pytest.mark.slow
def test_report_of_unknown_parent_names_the_field(quick_sweep):
    out, *_ = quick_sweep
    from isparse import ConfigError

    with pytest.raises(ConfigError, match="--parent"):
        build_report(f"sqlite:///{out}/mlflow.db", parent_id="0" * 32, outputs=out)


def test_paper_step_rule_gives_the_papers_gammas():
    """step.rule=paper: ISEGA 4x Theorem 3's gamma, ISGD gamma tau = 1/(5 L_f), shared ISAGA 1/(L_example(3/n + tau)); GD unchanged."""
    from isparse import ConfigError
    from isparse.data import load_dataset
    from specs import make

    kw = dict(data=load_dataset("breast_cancer"), lam=1e-3, n=4, block_size=1)
    isega = [make(algorithm="isega", step_rule=r, **kw) for r in ("theory", "paper")]
    assert isega[1].method.gamma == pytest.approx(4 * isega[0].method.gamma, rel=1e-14)
    assert not isega[1].bound.applicable and isega[0].bound.applicable
    L = isega[0].problem.L
    # ISGD: step.rule=paper is the effective step gamma tau = one-worker SGD's 1/(5 L_f), L_f of f itself (computed
    # here from the data matrix, apart from the library); paper_literal is the caption's 1/(5L), L = max_i L_i
    import numpy as np

    A = kw["data"].A.toarray()
    L_f = np.linalg.eigvalsh(A.T @ A)[-1] / (4 * A.shape[0]) + 1e-3
    assert L_f < L
    isgd = make(algorithm="isgd", step_rule="paper", **kw)
    tau = isgd.method.tau_m / isgd.method.blocks.m
    assert isgd.method.gamma * tau == pytest.approx(1 / (5 * L_f), rel=1e-10)
    assert make(algorithm="isgd", step_rule="paper_literal", **kw).method.gamma == pytest.approx(1 / (5 * L), rel=1e-14)
    sgd = make(algorithm="sgd", step_rule="paper", **dict(kw, n=1))
    assert sgd.method.gamma == pytest.approx(isgd.method.gamma * tau, rel=1e-10)     # the baseline's step
    asyn = make(algorithm="async_isgd", step_rule="paper", **kw)
    assert asyn.method.gamma == pytest.approx(isgd.method.gamma, rel=1e-14)
    gd = [make(algorithm="gd", step_rule=r, **kw).method.gamma for r in ("theory", "paper")]
    assert gd[0] == gd[1] == pytest.approx(1 / (2 * L), rel=1e-14)
    shared = make(algorithm="isaga_shared", step_rule="paper", **kw)
    tau = shared.method.tau_m / shared.method.blocks.m       # Theorem 2's gamma is 1/(L_example (tau + 4/n))
    assert shared.method.gamma / shared.bound.gamma_theory == pytest.approx((tau + 1) / (tau + 3 / 4), rel=1e-12)
    with pytest.raises(ConfigError, match="'step.rule'"):
        make(algorithm="isega", step_rule="fast", **kw)


@pytest.mark.slow   # a tau sweep on mushrooms: about 30 s (the default run keeps under 10 min)
@pytest.mark.needs_data
def test_tau_sweep_on_mushrooms_has_the_knee_at_one_over_n(tmp_path):
    """+experiment=tau_sweep_quick (ISEGA, mushrooms, n = 10): measured and predicted iterations to eps against tau.

    Theorem 3's prediction is proportional to 1 + 1/(n tau): its log-log slope is -1/2 at tau = 1/n,
    steeper below, flatter above. Checked on the predictions the runs logged (not the report's).
    """
    proc = subprocess.run([CLI, "-m", "+experiment=tau_sweep_quick", f"paths.outputs={tmp_path}", "progress=false"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
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


# ------------------------------------------------------------------ figures, series and what the report says
def _overlaps(labels) -> list[tuple[str, str]]:
    """Pairs of drawn tick labels whose boxes overlap (the figure must have been drawn)."""
    shown = [t for t in labels if t.get_visible() and t.get_text()]
    boxes = [t.get_window_extent() for t in shown]
    return [(shown[i].get_text(), shown[j].get_text()) for i in range(len(shown)) for j in range(i + 1, len(shown))
            if boxes[i].overlaps(boxes[j])]


#: runs ``isparse-run``'s entry point with the arguments given, then prints how many pyplot figures are still open
_RUN_AND_COUNT_FIGURES = ("import sys; sys.argv[0] = 'isparse-run'; import matplotlib.pyplot as plt; "
                          "from pipeline.main import main; main(); print('open figures:', len(plt.get_fignums()))")


@pytest.fixture(scope="module")
def blocks_sweep(tmp_path_factory):
    """``isparse-run -m blocks.size=1,8 tau=1/n,2/n report.auto=true``: ISEGA on breast cancer, n = 4, seed 0,
    four jobs in-process; no tau = 1 run, so no 99% table."""
    out = tmp_path_factory.mktemp("blocks")
    proc = subprocess.run([sys.executable, "-c", _RUN_AND_COUNT_FIGURES, "-m", "engine=inprocess", "blocks.size=1,8",
                           "tau=1/n,2/n", "tol=1e-6", "max_iter=5000", "report.auto=true", "tracking.experiment=blocks",
                           "tracking.figure=always",
                           f"paths.outputs={out}", "progress=false"], capture_output=True, text=True, timeout=600,
                          cwd=out)   # the experiments' artifacts (MLflow's default ./mlruns) go there
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("blocks")
    parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    return out, client, parent, children, proc


@pytest.mark.slow   # the block-size sweep fixture: 20-30 s (the default run keeps under 10 min)
def test_sweep_closes_every_figure(blocks_sweep):
    """Four jobs' convergence.png and the report's figures, drawn in one process: none left open."""
    *_, children, proc = blocks_sweep
    assert len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    assert "open figures: 0" in proc.stdout


@pytest.mark.slow   # the block-size sweep fixture: 20-30 s (the default run keeps under 10 min)
def test_block_sizes_are_two_series_with_a_slope_each(blocks_sweep):
    _, client, parent, children, _ = blocks_sweep
    rows = list(csv.DictReader(io.StringIO(_artifact_text(client, parent.info.run_id, "report/iterations_vs_tau.csv"))))
    assert sorted((r["group"], int(r["tau_m"]), int(r["m"])) for r in rows) == [
        ("b=1", 8, 30), ("b=1", 15, 30), ("b=8", 1, 4), ("b=8", 2, 4)]    # tau = 1/n, 2/n: ceil(m/4), ceil(2m/4)
    for b in (1, 8):        # recomputed from the raw histories: one slope per block size, from its two tau
        runs = sorted((c for c in children if c.data.params["blocks.size"] == str(b)),
                      key=lambda c: float(c.data.params["tau"]))
        (t1, t2) = (float(c.data.params["tau"]) for c in runs)
        (i1, _), (i2, _) = (_to_eps(client, c) for c in runs)
        (p1, p2) = (float(c.data.tags["predicted_iterations"]) for c in runs)
        mine = [r for r in rows if r["group"] == f"b={b}"]
        sloped = [r for r in mine if r["measured_slope"]]
        assert len(sloped) == 1 and float(sloped[0]["tau"]) == t2
        assert float(sloped[0]["measured_slope"]) == pytest.approx(math.log(i2 / i1) / math.log(t2 / t1), rel=1e-12)
        assert float(sloped[0]["predicted_slope"]) == pytest.approx(math.log(p2 / p1) / math.log(t2 / t1), rel=1e-12)
        assert sorted(float(r["median"]) for r in mine) == sorted([i1, i2])


@pytest.mark.slow   # the block-size sweep fixture: 20-30 s (the default run keeps under 10 min)
def test_block_sizes_have_their_own_legend_entries_and_readable_ticks(blocks_sweep):
    from pipeline.report import assign_series, load_children, tau_figure

    _, client, parent, _, _ = blocks_sweep
    records = load_children(client, parent)
    assert assign_series(records) == ["blocks.size"]
    fig = tau_figure(records)
    try:
        (ax,) = fig.axes
        _, labels = ax.get_legend_handles_labels()
        measured = sorted(lab for lab in labels if "measured" in lab)
        assert len(measured) == 2 and "b=1" in measured[0] and "b=8" in measured[1]
        assert len([lab for lab in labels if "prediction" in lab]) == 2
        assert sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_linestyle() == "-") == 4
        fig.canvas.draw()
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert ticks and "0.5" in ticks and not any("10^" in t or "×" in t for t in ticks)
        assert _overlaps(ax.get_xticklabels()) == []
    finally:
        plt.close(fig)


@pytest.mark.slow   # the block-size sweep fixture: 20-30 s (the default run keeps under 10 min)
def test_report_says_what_it_could_not_build(blocks_sweep, tmp_path):
    out, client, parent, _, _ = blocks_sweep
    names = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert "report/README.md" in names and "report/iterations_vs_tau.png" in names
    assert not {"report/table99.md", "report/table99.csv"} & names
    readme = _artifact_text(client, parent.info.run_id, "report/README.md")
    assert "table99 not built: no τ = 1 run in the sweep (τ here: 1/4, 8/30, 15/30, 2/4; add tau=1.0" in readme
    assert "blocks.size (shown as b)" in readme
    proc = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "blocks",
                           "--outputs", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "table99 not built: no τ = 1 run in the sweep" in proc.stdout and "blocks.size" in proc.stdout


def test_convergence_figure_has_a_bytes_axis_in_si_units_and_the_stopping_line():
    """The run's convergence.png: the uplink-bytes ticks are 'kB'/'MB' labels that keep apart, tol * r0 is drawn."""
    from isparse.data import load_dataset
    from specs import make
    from pipeline.plots import convergence_figure

    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=1)
    res = s.run(max_iter=3000, tol=1e-6)
    r0 = s.derived["r0"]
    open_before = set(plt.get_fignums())
    fig = convergence_figure(res.records, "isega: Theorem 3 (ISEGA)", tol=1e-6, r0=r0)
    try:
        fig.canvas.draw()
        steps_ax, bytes_ax = fig.axes
        ticks = [t.get_text() for t in bytes_ax.get_xticklabels() if t.get_text()]
        assert 3 <= len(ticks) <= 7 and all(t.endswith("B") and len(t) <= 8 for t in ticks), ticks
        assert _overlaps(bytes_ax.get_xticklabels()) == []
        for ax in (steps_ax, bytes_ax):
            flat = [line for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
            assert [line.get_ydata()[0] for line in flat] == [pytest.approx(1e-6 * r0, rel=1e-12)]
    finally:
        plt.close(fig)
    assert set(plt.get_fignums()) == open_before


def test_goal_column_only_where_the_goal_applies():
    from pipeline.report import table_markdown

    def row(n, its, full_its, up, full_up):
        return dict(data="a1a", method="isega", group="", n=n, tau=f"{-(-123 // n)}/123", eps=1e-6,
                    sparse_iterations=its, full_iterations=full_its, sparse_uplink=up, full_uplink=full_up,
                    sparse_final=1e-7, full_final=1e-7, last_step=its, iterations_ratio=its / full_its,
                    uplink_ratio=up / full_up, uplink_saved=1 - up / full_up)

    md = table_markdown([row(10, 300, 200, 10.0, 100.0), row(100, 300, 200, 2.0, 100.0), row(100, 500, 200, 2.0, 100.0)])
    head, _, r10, r100, r100b = md.splitlines()
    assert "goal at n = 100" in head
    assert r10.endswith("| 90.0% |  |") and r100.endswith("| 98.0% | met |") and r100b.endswith("| not met |")
    assert "goal" not in table_markdown([row(10, 300, 200, 10.0, 100.0)])


def test_series_keys_are_the_config_keys_that_vary_besides_seed_and_tau():
    """Derived params (m, gamma), bookkeeping (paths), seed and tau never split a series; keys that follow the data
    set (its recommended lambda) do not either; of two keys that split alike (data.lam, problem.lam) one is kept."""
    from pipeline.report import RunRecord, assign_series, config_params

    top = ("engine", "max_iter", "tol", "tau", "seed", "resume", "cache", "progress")

    def rec(data, b, lam, seed, tau_m, dlam=None):
        params = {"blocks.size": str(b), "problem.lam": str(lam), "data.lam": str(lam if dlam is None else dlam),
                  "data.name": data, "algorithm.name": "isega", "workers.n": "4", "seed": str(seed), "tau": "0.25",
                  "tau_setting": "1/n", "tol": "1e-06", "engine": "inprocess", "m": str(-(-30 // b)), "gamma": str(b),
                  "paths.outputs": f"/tmp/{seed}", "data.source": data, "n": "4"}
        return RunRecord(run_id="x", status="FINISHED", algorithm="isega", data=data, n=4, m=-(-30 // b), tau=0.25,
                         tau_m=tau_m, seed=seed, tol=1e-6, r0=1.0, label_extra="", predicted=None,
                         bound_quantity="dist_sq", config=config_params(params, top))

    assert set(rec("a1a", 8, 0.1, 0, 1).config) == {"blocks.size", "problem.lam", "data.lam", "tol", "engine"}
    runs = [rec(d, b, lam, seed, t) for d, lam in (("a1a", 0.1), ("w1a", 0.05)) for b in (1, 8) for seed in (0, 1)
            for t in (1, 2)]
    assert assign_series(runs) == ["blocks.size"]
    assert {r.group_label for r in runs} == {"b=1", "b=8"} and runs[0].label() == "isega n=4 b=1 τ=1/30"
    assert {r.series for r in runs} == {(d, "isega", f"b={b}", 4) for d in ("a1a", "w1a") for b in (1, 8)}
    lams = [rec("a1a", 1, lam, 0, 1) for lam in (0.1, 0.01)]
    assert assign_series(lams) == ["data.lam"] and lams[1].group_label == "data.lam=0.01"
    same = [rec("a1a", 1, 0.1, seed, t) for seed in (0, 1) for t in (1, 2)]
    assert assign_series(same) == [] and same[0].label() == "isega n=4 τ=1/30"


def test_step_L_f_is_the_smoothness_of_f_itself_and_refused_where_no_rule_takes_L():
    """step.L=f: GD's gamma = 1/(2 L_f), L_f = lambda_max(A^T A)/(4N) + lambda computed here; ISAGA's L_example and
    IASGD's rho take no L: refused, naming the key."""
    import numpy as np

    from isparse import ConfigError
    from isparse.data import load_dataset
    from specs import make, spec

    data = load_dataset("breast_cancer")
    A = data.A.toarray()
    L_f = np.linalg.eigvalsh(A.T @ A)[-1] / (4 * A.shape[0]) + 1e-3
    gd = make(algorithm="gd", data=data, lam=1e-3, n=8, **{"step_L": "f"})
    assert gd.method.gamma == pytest.approx(1 / (2 * L_f), rel=1e-10) and gd.problem.L > L_f
    for algorithm in ("isaga", "iasgd"):
        with pytest.raises(ConfigError, match=rf"'step.L' parameter must be shards for algorithm={algorithm}"):
            spec(algorithm, step_L="f").check()


@pytest.mark.slow
def test_table99_with_a_codec_reports_the_share_of_dense_float64(tmp_path):
    """A real multirun of the quick sweep with messages.codec=natural (seed 0): table99 names the codec, its
    uplink is the codec's 9 bits per value, and uplink_ratio_float64 is the tau = 1/n run's bytes over the tau = 1
    run's float64-equivalent bytes at its eps, both recomputed here from the store's raw histories."""
    proc = subprocess.run([CLI, "-m", "+experiment=quick", f"paths.outputs={tmp_path}", "progress=false",
                           "messages.codec=natural", "seed=0"], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("paper-quick")
    parent = client.search_runs([exp.experiment_id], "tags.`isparse.sweep` = 'true'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    rows = list(csv.DictReader(io.StringIO(_artifact_text(client, parent.info.run_id, "report/table99.csv"))))
    assert len(rows) == 1 and rows[0]["codec"] == "natural"
    m, d = int(children[0].data.params["m"]), int(children[0].data.params["d"])
    sparse = next(c for c in children if int(c.data.params["tau_m"]) == math.ceil(m / 4))
    full = next(c for c in children if int(c.data.params["tau_m"]) == m)
    its_sparse, up_sparse = _to_eps(client, sparse)
    its_full, up_full = _to_eps(client, full)
    dense = {x.step: x.value for x in client.get_metric_history(full.info.run_id, "uplink_bytes_float64")}
    assert up_sparse == pytest.approx(its_sparse * 4 * math.ceil(m / 4) * 9 / 8)   # 9 bits per value
    assert up_full == pytest.approx(its_full * 4 * d * 9 / 8) and dense[its_full] == pytest.approx(its_full * 4 * d * 8)
    row = rows[0]
    assert float(row["uplink_ratio"]) == pytest.approx(up_sparse / up_full, rel=1e-12)
    assert float(row["uplink_ratio_float64"]) == pytest.approx(up_sparse / dense[its_full], rel=1e-12)
    assert float(row["uplink_ratio_float64"]) == pytest.approx(float(row["uplink_ratio"]) * 9 / 64, rel=1e-12)
    md = _artifact_text(client, parent.info.run_id, "report/table99.md")
    head, _, line = md.splitlines()[:3]
    assert "| codec |" in head and "uplink ÷ dense float64" in head and "| natural |" in line
    assert f"{float(row['uplink_ratio_float64']):.5f}" in line


@pytest.fixture(scope="module")
def plain_sweep(tmp_path_factory):
    """``isparse-run -m algorithm=isega,diana,gd workers.n=4,10`` (no arms, one tau each) and ``isparse-report`` on
    it: (the report's directory, the MLflow client, the sweep's job runs)."""
    out = tmp_path_factory.mktemp("plain")
    proc = subprocess.run([CLI, "-m", "algorithm=isega,diana,gd", "workers.n=4,10", "max_iter=300", "tol=1e-4",
                           "engine=inprocess", "progress=false", f"paths.outputs={out}",
                           "tracking.experiment=plain"], capture_output=True, text=True, timeout=900, cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = subprocess.run([REPORT, "--uri", f"sqlite:///{out}/mlflow.db", "--experiment", "plain",
                          f"--outputs={out}"], capture_output=True, text=True, timeout=300, cwd=out)
    assert rep.returncode == 0, rep.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("plain")
    jobs = [r for r in client.search_runs([exp.experiment_id]) if "algorithm" in r.data.tags]
    return next((out / "reports" / "plain").iterdir()), client, jobs


@pytest.mark.slow   # six in-process jobs and a report: about a minute
def test_a_plain_sweep_gets_its_table_of_every_configuration(plain_sweep):
    """Issue 48: no arms, no tau = 1 beside 1/n, and still a table: a row per job, each number what its run logged."""
    out, client, jobs = plain_sweep
    assert len(jobs) == 6 and all(j.info.status == "FINISHED" for j in jobs)
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert len(rows) == 6
    assert sorted(r["configuration"].split(" τ")[0] for r in rows) == sorted(
        f"{a} n={n}" for a in ("diana", "gd", "isega") for n in (4, 10))
    md = (out / "sweep.md").read_text()
    assert md.count("\n| breast_cancer |") == 6
    by_conf = {r["configuration"].split(" τ")[0]: r for r in rows}
    for job in jobs:
        row = by_conf[f"{job.data.tags['algorithm']} n={job.data.params['n']}"]
        assert float(row["iterations"]) == job.data.metrics["summary/iterations"]
        assert float(row["uplink_total"]) == job.data.metrics["summary/uplink_bytes_total"]
        dist = sorted(client.get_metric_history(job.info.run_id, "dist_sq"), key=lambda m: m.step)
        bound = {m.step: m.value for m in client.get_metric_history(job.info.run_id, "bound")}
        if not bound:      # DIANA: no theorem
            assert row["bound"] == "no theorem"
        else:               # the verdict recomputed from the raw histories
            over = [m.step for m in dist if m.step in bound and m.value > bound[m.step] * (1 + 1e-12)]
            assert row["bound"] == (f"exceeded at t = {over[0]:,}" if over else "held")
    assert any(r["bound"] == "held" for r in rows) and any(r["bound"] == "no theorem" for r in rows)
    assert "| sweep.md" in (out / "README.md").read_text() or "sweep.md" in (out / "README.md").read_text()


@pytest.mark.slow        # two in-process jobs and a report: about 30 s
@pytest.mark.needs_data
def test_two_files_of_one_s_own_keep_their_names(tmp_path):
    """Issue 48: ``data=libsvm data.path=<a>,<b>``: each run, its MLflow dataset and the report name the file (its
    stem), not "libsvm"; a non-default codec is in the run names too."""
    import os

    lines = (Path(os.environ["ISPARSE_DATA_DIR"]) / "a1a").read_text().splitlines(keepends=True)
    (tmp_path / "first-half.svm").write_text("".join(lines[: len(lines) // 2]))
    (tmp_path / "second-half.svm.txt").write_text("".join(lines[len(lines) // 2:]))
    proc = subprocess.run([CLI, "-m", "data=libsvm", "data.path=first-half.svm,second-half.svm.txt", "max_iter=20",
                           "data.n_features=123", "messages.codec=natural7", "engine=inprocess", "progress=false",
                           "report.auto=true", f"paths.outputs={tmp_path}/out", "tracking.experiment=files"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/out/mlflow.db")
    exp = client.get_experiment_by_name("files")
    jobs = [r for r in client.search_runs([exp.experiment_id]) if "algorithm" in r.data.tags]
    assert len(jobs) == 2
    names = sorted(j.info.run_name for j in jobs)
    # the swept file first (as its stem, not its path), the codec that differs from the default in each
    assert names[0].startswith("first-half-n4-") and names[1].startswith("second-half-n4-"), names
    assert all(n.endswith("-isega-codecnatural7") for n in names), names
    assert sorted(j.data.tags["data"] for j in jobs) == ["first-half", "second-half"]
    assert sorted(j.inputs.dataset_inputs[0].dataset.name for j in jobs) == ["first-half", "second-half"]
    report = next((tmp_path / "out" / "reports" / "files").iterdir())
    sweep = (report / "sweep.md").read_text()
    assert "| first-half |" in sweep and "| second-half |" in sweep
    assert {"convergence_first-half.png", "convergence_second-half.png"} <= {p.name for p in report.iterdir()}
