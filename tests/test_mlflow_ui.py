"""What the MLflow UI shows, checked on a real store made by a real sweep (the isparse-run CLI, engine=inprocess).

The experiment opens on the training-runs view (its ``mlflow.experimentKind`` tag), run names start with what
differs between jobs, the log10 metrics are logged beside the raw ones, and artifacts go next to the sqlite store,
not to ``./mlruns`` of the directory the command ran in.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.job import metrics as _metrics
from pipeline.tracking import (RunLogger, artifact_location, experiment_id, shared_view_state, summary_metrics,
                               ui_link)

CLI = str(Path(sys.executable).parent / "isparse-run")
KIND = "mlflow.experimentKind"


def _cli(out, cwd, *args):
    proc = subprocess.run([CLI, *args, "engine=inprocess", f"paths.outputs={out}", "progress=false"], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _named_run(out, overrides):
    """One job in this process (Hydra's compose API, as isparse-run composes it), into the store in ``out``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from conftest import CONF_DIR
    from pipeline.job import run_job

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"paths.outputs={out}", "engine=inprocess", "progress=false", *overrides],
                      return_hydra_config=True)
    with open_dict(cfg):   # what Hydra sets for a job it runs
        cfg.hydra.runtime.cwd, cfg.hydra.runtime.output_dir = str(out), str(out / "named")
    (out / "named").mkdir()
    HydraConfig.instance().set_config(cfg)
    run_job(cfg)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """``isparse-run -m engine=inprocess workers.n=2,4 step.multiplier=1,4 max_iter=200``, run from an empty
    directory that is not the outputs' parent, then one job ``tracking.run_name=my-run`` in this process into the
    same store; returns (outputs, that directory, client, parent, children, the named run)."""
    out, cwd = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("cwd")
    proc = _cli(out, cwd, "-m", "workers.n=2,4", "step.multiplier=1,4", "max_iter=200")
    _named_run(out, ["max_iter=20", "step.multiplier=4", "step.rule=paper", "tracking.run_name=my-run"])
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    exp = client.get_experiment_by_name("isparse")
    runs = client.search_runs([exp.experiment_id])
    parent = [r for r in runs if r.data.tags.get("isparse.sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    single = [r for r in runs if r.info.run_id not in {x.info.run_id for x in parent + children}]
    assert len(parent) == 1 and len(children) == 4 and len(single) == 1
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent[0].info.run_id}
    # its jobs drew no figure (tracking.figure=auto): the sweep's last line says what draws them
    last = proc.stdout.strip().splitlines()[-1]
    assert last.endswith(f"its figures and tables: isparse-report --uri sqlite:///{out}/mlflow.db "
                         f"--parent {parent[0].info.run_id}"), last
    return out, cwd, client, parent[0], children, single[0]


def test_experiment_opens_on_runs_and_keeps_artifacts_beside_the_store(sweep):
    out, cwd, client, parent, children, single = sweep
    exp = client.get_experiment_by_name("isparse")
    assert exp.tags[KIND] == "custom_model_development"
    assert exp.artifact_location == str(out / "mlartifacts" / "isparse")
    for run in [parent, *children, single]:
        assert run.info.artifact_uri == f"{out}/mlartifacts/isparse/{run.info.run_id}/artifacts"
    for run in [*children, single]:   # the files are there, on disk, and MLflow lists them
        files = {p.name for p in (out / "mlartifacts" / "isparse" / run.info.run_id / "artifacts").iterdir()}
        figure = {"convergence.png"} if run is single else set()   # tracking.figure=auto: a single run's only
        assert {"config.yaml", "x_final.npy"} | figure <= files and (run is single or "convergence.png" not in files)
        assert {"config.yaml"} | figure <= {a.path for a in client.list_artifacts(run.info.run_id)}
    assert list(cwd.iterdir()) == []   # nothing (no mlruns/) where the command ran


def test_run_names_start_with_what_differs(sweep):
    *_, children, single = sweep
    # the swept keys first (workers.n, step.multiplier: the sweep's order), then the rest; breast cancer: d = 30, b = 1,
    # so m = 30; tau = auto = ceil(30/n)/30: 15/30 for n = 2, 8/30 for n = 4
    assert {c.info.run_name for c in children} == {
        "n2-g1-b1-tau0.5-s0-isega-breast_cancer", "n2-g4-b1-tau0.5-s0-isega-breast_cancer",
        "n4-g1-b1-tau0.2667-s0-isega-breast_cancer", "n4-g4-b1-tau0.2667-s0-isega-breast_cancer"}
    assert single.info.run_name == "my-run"   # as given: no suffix for step.rule=paper or step.multiplier=4


def _history(client, run, key):
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}


def test_log10_metrics_beside_the_raw_values(sweep):
    _, _, client, parent, children, _ = sweep
    for run in children:
        r0, quantity = float(run.data.params["r0"]), run.data.tags["bound_quantity"]
        dist, bound = _history(client, run, "dist_sq"), _history(client, run, "bound")
        measured = _history(client, run, quantity)
        assert sorted(dist) == list(range(0, 201, 10))     # log_every = 10, and the last iteration
        rel = _history(client, run, "log10_dist_sq_rel")
        assert sorted(rel) == sorted(dist)
        for t, v in dist.items():
            assert rel[t] == pytest.approx(math.log10(v / r0), abs=1e-12)
        assert rel[0] == pytest.approx(0.0, abs=1e-12)     # x^0 is where r0 is measured
        # the UI's "bound" section: the bound and what it bounds, both over r0, and their gap
        bound_rel, measured_rel, slack = (_history(client, run, f"bound/{k}")
                                          for k in ("log10_bound_rel", "log10_measured_rel", "log10_slack"))
        if run.data.tags["bound_applicable"] == "false":  # 4x Theorem 3's stepsize: no bound; what it measured, drawn
            assert float(run.data.params["step.multiplier"]) == 4 and not (bound or bound_rel or slack)
            assert sorted(measured_rel) == sorted(dist)   # every run is on the comparison view's charts
            for t in dist:
                assert measured_rel[t] == pytest.approx(math.log10(measured[t] / r0), abs=1e-12)
            assert run.data.tags["bound_source"] == "none" and "bound_derivation" not in run.data.tags
            continue
        assert sorted(bound_rel) == sorted(slack) == sorted(measured_rel) == sorted(bound) == sorted(dist)
        for t in dist:
            assert bound_rel[t] == pytest.approx(math.log10(bound[t] / r0), abs=1e-12)
            assert measured_rel[t] == pytest.approx(math.log10(measured[t] / r0), abs=1e-12)
            assert slack[t] == pytest.approx(math.log10(bound[t] / measured[t]), abs=1e-12)
            assert slack[t] == pytest.approx(bound_rel[t] - measured_rel[t], abs=1e-9)   # one scale
            assert slack[t] >= 0, (run.info.run_name, t)   # Theorem 3 holds along the run
        assert slack[200] > slack[0]   # the iterates contract faster than the bound (1 - gamma mu)^t
    assert not _history(client, parent, "log10_dist_sq_rel")


def test_single_numbers_go_to_the_summary_section(sweep):
    """What a run logs once is under ``summary/`` (one section of the UI's chart view, apart from the series) or
    ``checkpoint/``: no metric without a prefix has a single point, and the summary holds what the sweep's end line
    reads."""
    _, _, client, _, children, _ = sweep
    for run in children:
        keys = set(run.data.metrics)
        single = {k for k in keys if len(client.get_metric_history(run.info.run_id, k)) == 1}
        assert single and all(k.startswith(("summary/", "checkpoint/")) for k in single), single
        summary = summary_metrics(run.data.metrics)
        assert summary["iterations"] == 200 and {"converged", "uplink_bytes_total"} <= set(summary)
        assert ("predicted_iterations" in summary) == (run.data.tags["bound_applicable"] == "true")   # NaN: not kept
        applicable = run.data.tags["bound_applicable"] == "true"   # no bound (4x Theorem 3's step): its measured only
        assert {k.split("/")[0] for k in keys if "/" in k} == \
            {"summary", "bound"} | ({"checkpoint"} & {k[:10] for k in keys})
        assert {k for k in keys if k.startswith("bound/")} == \
            {"bound/log10_measured_rel"} | ({"bound/log10_bound_rel", "bound/log10_slack"} if applicable else set())


def test_log10_metrics_are_skipped_where_undefined():
    rec = {"step": 5, "dist_sq": 0.0, "subopt": 1e-3, "bound": math.nan, "uplink_bytes": 80}
    out = _metrics(rec, n=2, r0=4.0)
    assert out["uplink_bytes_per_worker"] == 40 and "bound" not in out
    # dist_sq = 0 (the default bound_quantity): no log10 of it, measured or not
    assert not {"log10_dist_sq_rel", "bound/log10_bound_rel", "bound/log10_measured_rel", "bound/log10_slack"} & set(out)
    out = _metrics(rec, n=2, r0=4.0, quantity="subopt")   # no bound: what it measured is still logged
    assert "bound/log10_bound_rel" not in out and out["bound/log10_measured_rel"] == pytest.approx(math.log10(1e-3 / 4))
    out = _metrics({**rec, "dist_sq": 0.04, "bound": 0.4}, n=2, r0=4.0, quantity="subopt")
    assert out["log10_dist_sq_rel"] == pytest.approx(-2) and out["bound/log10_bound_rel"] == pytest.approx(-1)
    assert out["bound/log10_measured_rel"] == pytest.approx(math.log10(1e-3 / 4))   # subopt, the bounded one
    assert out["bound/log10_slack"] == pytest.approx(math.log10(0.4 / 1e-3))


def test_existing_experiment_gets_the_kind_tag_unless_it_has_one(sweep, tmp_path):
    uri = f"sqlite:///{sweep[0]}/mlflow.db"   # the sweep's store (a new one takes seconds to create)
    client = MlflowClient(uri)
    plain = client.create_experiment("plain", artifact_location=str(tmp_path / "a"))
    chosen = client.create_experiment("chosen", artifact_location=str(tmp_path / "b"),
                                      tags={KIND: "genai_development"})
    assert experiment_id(client, "plain", uri) == plain and experiment_id(client, "chosen", uri) == chosen
    assert client.get_experiment(plain).tags[KIND] == "custom_model_development"
    assert client.get_experiment(chosen).tags[KIND] == "genai_development"   # a kind the user chose is kept
    assert client.get_experiment(plain).artifact_location == str(tmp_path / "a")   # MLflow cannot move it


def test_artifact_location_follows_the_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert artifact_location(f"sqlite:///{tmp_path}/o/mlflow.db", "paper-tau_sweep") == \
        str(tmp_path / "o" / "mlartifacts" / "paper-tau_sweep")
    assert artifact_location("sqlite:///rel/mlflow.db", "a b/c") == str(tmp_path / "rel" / "mlartifacts" / "a_b_c")
    assert artifact_location("http://127.0.0.1:5000", "isparse") is None   # the server's own artifact root
    assert artifact_location("sqlite:///:memory:", "isparse") is None


def test_a_param_over_6000_characters_is_marked_and_kept_whole(sweep, tmp_path):
    uri = f"sqlite:///{sweep[0]}/mlflow.db"
    logger = RunLogger(uri, "params", "long-params", spill_dir=tmp_path)
    long_a, long_b = "a" * 7000, "0123456789" * 650
    logger.log_params({"short": 1, "data.path": long_a, "exactly": "x" * 6000})
    logger.log_params({"sweep.list": long_b})
    logger.end()
    client = MlflowClient(uri)
    run = client.get_run(logger.run_id)
    assert run.data.params["data.path"] == long_a[:6000] and run.data.params["exactly"] == "x" * 6000
    assert run.data.params["short"] == "1"
    assert run.data.tags["truncated_params"] == "data.path,sweep.list"
    kept = json.loads(Path(client.download_artifacts(logger.run_id, "truncated_params.json", str(tmp_path))).read_text())
    assert kept == {"data.path": long_a, "sweep.list": long_b}


def test_ui_link_selects_the_runs_view():
    """MLflow 3.17's UI opens an experiment on its GenAI / Model training switch (GenAI until clicked, kept in the
    browser), so the link isparse-run logs carries workflowType=machine_learning."""
    assert ui_link("http://127.0.0.1:5001/", "3") == ("http://127.0.0.1:5001/#/experiments/3/runs?workflowType="
                                                      "machine_learning&viewStateShareKey=isparse-bound&compareRunsMode=CHART")
    assert ui_link("sqlite:////o/mlflow.db", "1") == (
        "http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning&viewStateShareKey=isparse-bound"
        "&compareRunsMode=CHART (after: mlflow ui --backend-store-uri sqlite:////o/mlflow.db --host 127.0.0.1 "
        "--port 5000)")


def test_the_experiment_link_opens_a_view_of_each_bound_beside_what_it_bounds(sweep):
    """The experiment carries the shared view its link names; its charts draw metrics the runs have: the bound and
    the measured quantity, against the iteration, the uplink bytes and the wall time."""
    _, _, client, _, children, _ = sweep
    exp = client.get_experiment_by_name("isparse")
    view = json.loads(exp.tags["mlflow.sharedViewState.isparse-bound"])
    assert view == json.loads(json.dumps(shared_view_state()))
    logged = set().union(*(r.data.metrics for r in children))
    measured, *charts = view["compareRunCharts"]
    # first every run's measured quantity (a run without a theorem too), then the bound beside it on three axes
    assert measured["selectedMetricKeys"] == ["bound/log10_measured_rel"] and measured["xAxisKey"] == "step"
    assert all("bound/log10_measured_rel" in r.data.metrics for r in children)
    assert [c["selectedXAxisMetricKey"] or c["xAxisKey"] for c in charts] == ["step", "uplink_bytes", "wall_s"]
    for chart in charts:
        assert chart["selectedMetricKeys"] == ["bound/log10_bound_rel", "bound/log10_measured_rel"]
        assert set(chart["selectedMetricKeys"]) | {chart["selectedXAxisMetricKey"] or "bound/log10_slack"} <= logged
        assert chart["metricSectionId"] == measured["metricSectionId"] == view["compareRunSections"][0]["uuid"]
    assert view["compareRunSections"][0]["columns"] == 1   # full width: the legends have room
    assert "viewStateShareKey=isparse-bound" in ui_link("sqlite:///x.db", exp.experiment_id)


def test_a_tag_over_8000_characters_shows_its_cut(sweep, tmp_path):
    uri = f"sqlite:///{sweep[0]}/mlflow.db"
    logger = RunLogger(uri, "params", "long-tags", spill_dir=tmp_path)
    logger.set_tags({"error": "e" * 9000, "fits": "f" * 8000})
    logger.end()
    tags = MlflowClient(uri).get_run(logger.run_id).data.tags
    assert tags["fits"] == "f" * 8000                               # up to MLflow's limit, whole
    assert len(tags["error"]) == 8000 and tags["error"].endswith(" ... [cut: 9000 characters]")
    assert tags["error"].startswith("e" * 7000)


def test_names_of_a_comparison_sweep_differ_in_their_first_16_characters():
    """The runs table cuts a run's name at ~20 characters, its ellipsis included: the jobs of
    ``+experiment=isega_vs_gd`` (its sweeper's params, as swept_keys reads them) must differ within the first 16
    (with the arm and its ``arm`` prefix first, gd_whole's runs read ``armgd_whole-w1a-`` for n = 10 and 100 alike)."""
    import itertools
    from types import SimpleNamespace as NS

    import yaml

    from conftest import CONF_DIR
    from pipeline.lifecycle import run_name
    from pipeline.sweep import swept_keys

    params = yaml.safe_load((CONF_DIR / "experiment" / "isega_vs_gd.yaml").read_text())["hydra"]["sweeper"]["params"]
    swept = swept_keys([], params)
    assert swept == ["arm", "data", "workers.n"]
    values = [str(params[k]).split(",") for k in ("+arm", "data", "workers.n")]
    names = []
    for arm, data, n in itertools.product(*values):
        job = NS(tracking=NS(run_name=None), step=NS(rule="paper", multiplier=1.0), blocks=NS(size=1), seed=0,
                 data=NS(name=data, display_name=lambda data=data: data), compare=NS(arm=arm))
        method = NS(n=int(n), tau=1 / int(n), name="gd" if arm.startswith("gd") else arm)
        names.append(run_name(job, NS(method=method), swept=swept))
    assert len(names) == 24 and len({name[:16] for name in names}) == 24, sorted(names)
    assert "n100-gd_whole-w1a-b1-tau0.01-g1paper-s0-gd" in names


def test_names_tell_apart_what_differs_from_the_defaults():
    """Issue 48: five runs of a review, differing in codec, downlink, aggregation and a method's option, were all
    ``n4-b1-tau0.2667-g1-s0-isega-breast_cancer``; the keys that differ from their defaults are now in the name, and
    a data file of one's own is named by its stem (or data.title)."""
    from types import SimpleNamespace as NS

    from isparse.spec import RunSpec
    from pipeline.lifecycle import run_name

    def name(**keys):
        spec = RunSpec.from_dict(keys)
        job = NS(tracking=NS(run_name=None), step=spec.step, blocks=spec.blocks, seed=spec.seed, data=spec.data,
                 compare=NS(arm=None), messages=spec.messages, algorithm=spec.algorithm)
        return run_name(job, NS(method=NS(n=4, tau=0.25, name=spec.algorithm.name)), swept=[])

    plain = name()
    assert plain == "n4-b1-tau0.25-g1-s0-isega-breast_cancer"
    others = [name(**{"messages.codec": "natural7"}), name(**{"messages.downlink": "natural7"}),
              name(**{"messages.aggregate": "host"}), name(**{"messages.codec": "dither", "messages.levels": 4}),
              name(algorithm={"name": "diana"}), name(algorithm={"name": "diana", "alpha": 0.1})]
    assert len({plain, *others}) == 7, others
    assert others[-1] == others[-2].replace("-diana-", "-diana-alpha0.1-")
    assert others[0] == "n4-b1-tau0.25-g1-s0-isega-codecnatural7-breast_cancer"
    assert others[1].endswith("-isega-downlinknatural7-breast_cancer")
    assert name(data={"name": "libsvm", "path": "/x/my-set.svm.bz2"}).endswith("-isega-my-set")
    assert name(data={"name": "libsvm", "path": "/x/my-set.svm", "title": "mine"}).endswith("-isega-mine")
