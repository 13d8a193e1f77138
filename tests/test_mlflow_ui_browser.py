"""The MLflow UI as a user sees it: `mlflow ui` on 127.0.0.1 over the store of the README's sweep, opened in headless
Chromium (Debian's package, driven by Playwright) at the link isparse-run prints for the experiment.

The link's shared view must land on the comparison the project exists for: a first section "Bound vs measured"
whose first chart draws the measured quantity of every job (DIANA's too, which has no theorem), each in a colour of
its own, and whose next three draw each run's bound and the quantity it bounds, against the iteration, the uplink
bytes and the wall time. A single run's printed link opens the same view. With ``ISPARSE_SCREENSHOTS=<dir>`` the test also writes the
screenshots of docs/tracking.md there (``ISPARSE_SCREENSHOTS=docs/img .venv/bin/python -m pytest -m slow
tests/test_mlflow_ui_browser.py``).
"""

import importlib.util
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from daemons import free_port, stop, wait_until
from pipeline.tracking import ui_link

pytestmark = pytest.mark.slow   # the README's sweep, an mlflow ui and a browser: about a minute

BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
#: a sweep of ISEGA, DIANA (no theorem) and GD, in process
SWEEP = ("-m", "algorithm=isega,diana,gd", "workers.n=4,16", "max_iter=1000", "engine=inprocess", "progress=false")


def _need_browser():
    why = None
    if not Path(CHROMIUM).exists():
        why = f"no {CHROMIUM} (Debian's chromium; .ci/run installs it)"
    elif importlib.util.find_spec("playwright") is None:
        why = "not installed: playwright (pip install -e '.[test]')"
    if why:
        if os.environ.get("ISPARSE_REQUIRE_DAEMONS") == "1":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """(the UI's base address, the experiment id, the sweep's job runs), with `mlflow ui` serving the sweep's store."""
    _need_browser()
    out = tmp_path_factory.mktemp("out")
    proc = subprocess.run([str(BIN / "isparse-run"), *SWEEP, f"paths.outputs={out}"], cwd=out, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    uri = f"sqlite:///{out}/mlflow.db"
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("isparse")
    jobs = [r for r in client.search_runs([exp.experiment_id]) if "algorithm" in r.data.tags]
    assert len(jobs) == 6
    single = subprocess.run([str(BIN / "isparse-run"), "max_iter=200", "engine=inprocess", "progress=false",
                             f"paths.outputs={out}", "tracking.experiment=single"], cwd=out, capture_output=True,
                            text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    link = next(w for w in (single.stdout + single.stderr).split() if "/#/experiments/" in w)
    port = free_port()
    server = subprocess.Popen([str(BIN / "mlflow"), "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            try:
                return urllib.request.urlopen(f"{base}/health", timeout=2).status == 200
            except OSError:
                return False
        wait_until(up, 120, "mlflow ui on 127.0.0.1")
        yield base, exp.experiment_id, jobs, link.replace("http://127.0.0.1:5000", base)
    finally:
        stop([server])


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            yield chromium
        finally:
            chromium.close()


def _close_assistant(page):
    """MLflow 3.17 opens its assistant panel beside the runs: closed for a screenshot (its "Close" button)."""
    close = page.get_by_role("button", name="Close", exact=True)
    if close.count():
        close.first.click()
        page.wait_for_timeout(500)


#: tall enough for the section's four charts, one a row (MLflow draws a chart once it is in view)
TALL = {"width": 1500, "height": 2800}


def test_the_experiment_link_lands_on_each_bound_beside_what_it_bounds(ui, browser):
    base, experiment, jobs, _ = ui
    page = browser.new_page(viewport=TALL)
    page.goto(ui_link(base, experiment))
    page.get_by_text("Bound vs measured", exact=False).first.wait_for(timeout=60_000)
    pair = "bound/log10_bound_rel vs bound/log10_measured_rel"
    page.get_by_text(pair).first.wait_for(timeout=30_000)
    for axis in ("uplink_bytes", "wall_s"):   # the charts are drawn once their histories arrive
        page.get_by_text(axis, exact=True).first.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)
    text = page.inner_text("body")
    # the section's four charts above MLflow's own: every job's measured quantity, then the pairs
    assert "Bound vs measured\n(4)" in text and text.count(pair) == 3
    assert -1 < text.find("Bound vs measured") < text.find("Model metrics")
    section = text[text.find("Bound vs measured"):text.find("Model metrics")]
    assert [axis for axis in ("\nStep\n", "\nuplink_bytes\n", "\nwall_s\n") if axis in section] == \
        ["\nStep\n", "\nuplink_bytes\n", "\nwall_s\n"], section[:3000]
    for run in jobs:   # every job is shown (grouped by algorithm, not under a closed parent), its lines drawn
        name = run.info.run_name
        assert f"\n{name}\n" in text, name
        assert section.count(f"{name} (bound/log10_measured_rel)") == 4, name   # the first chart and the pairs
        assert section.count(f"{name} (bound/log10_bound_rel)") == 3, name      # (a legend lists every run)
        # DIANA has no theorem: no bound, but its measured line is logged, so the first chart draws it
        assert ("bound/log10_bound_rel" in run.data.metrics) == (run.data.tags["algorithm"] != "diana")
        assert "bound/log10_measured_rel" in run.data.metrics
    assert "Group: isega" in text and "Group: diana" in text and "Group: gd" in text
    # each job in a colour of its own (the run tag the UI reads), and the UI takes it: its row's colour picker,
    # whose value the page's text shows just before the run's name
    colours = [run.data.tags["mlflow.runColor"] for run in jobs]
    assert len(set(colours)) == len(jobs)
    first = page.get_by_test_id("experiment-view-compare-runs-card").nth(0).inner_html()   # every run's measured
    for run, colour in zip(jobs, colours):
        assert f"{colour}\n{run.info.run_name}\n" in text, (colour, run.info.run_name)
        rgb = "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (1, 3, 5)))
        assert f"stroke: {rgb}" in first, (run.info.run_name, rgb)   # its line drawn, in its colour
    shots = os.environ.get("ISPARSE_SCREENSHOTS")
    if shots:
        _close_assistant(page)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(Path(shots) / "mlflow_charts.png"))   # the section's four charts
        # the chart against the uplink bytes, full screen: the icon button before its card's menu
        card = page.get_by_test_id("experiment-view-compare-runs-card").nth(2)
        card.hover()
        card.locator("button").nth(0).click()
        page.set_viewport_size({"width": 1500, "height": 1100})
        page.wait_for_timeout(2500)
        page.screenshot(path=str(Path(shots) / "mlflow_bound_bytes.png"))
        page.goto(ui_link(base, experiment).replace("compareRunsMode=CHART", "compareRunsMode=TABLE"))
        page.get_by_text(jobs[0].info.run_name).first.wait_for(timeout=30_000)
        _close_assistant(page)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(Path(shots) / "mlflow_runs.png"))
    page.close()


def test_a_single_run_s_link_opens_its_chart(ui, browser):
    """Issue 48: the link a single run prints opens the chart view, its run's measured line and bound drawn."""
    *_, link = ui
    page = browser.new_page(viewport=TALL)
    page.goto(link)
    page.get_by_text("Bound vs measured", exact=False).first.wait_for(timeout=60_000)
    page.get_by_text("bound/log10_bound_rel vs bound/log10_measured_rel").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)
    text = page.inner_text("body")
    assert "1 matching run" in text and "Bound vs measured\n(4)" in text
    assert text.count("(bound/log10_bound_rel)") == 3, text[:3000]
    page.close()
