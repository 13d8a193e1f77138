"""Every code block of the README is run by a test (issue 31), so a README snippet that stops working fails CI:

- the set-up, test, slow-test and site-building commands are lines of ``.ci/run``, which runs them on a clean clone
  (checked here verbatim); the first command's run (``isparse-run``) is also run here;
- the sweep runs for real (in a temporary directory: the checkout stays as it is) and logs its parent and child runs;
- the MLflow UI command serves that sweep's store (on a free port instead of 5000) and is stopped by its pid
  (these two are slow: four jobs of a local Dask cluster each);
- the Python blocks run in tests/test_doc_snippets.py (the README is one of its pages);
- the benchmark command runs in its quick form on one item (``--quick --only 9``; slow);
- the layout names directories that exist; the citation is text.

A README block that none of these handles fails :func:`test_every_readme_block_is_run_by_a_test`.
"""

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from doc_snippets import ROOT, blocks

README = ROOT / "README.md"
BLOCKS = blocks(README)
BIN = Path(sys.executable).parent
CI = (ROOT / ".ci" / "run").read_text()


def _commands(block) -> list[str]:
    """The command lines of a bash block (continuations joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", block.text)
    return [line.split(" #", 1)[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _argv(command: str, tmp_path: Path) -> list[str]:
    """A README command as argv, ``.venv/bin/X`` as this interpreter's ``X`` and ``$PWD`` as ``tmp_path``."""
    words = shlex.split(command.replace("$PWD", str(tmp_path)))
    return [str(BIN / w.removeprefix(".venv/bin/")) if w.startswith(".venv/bin/") else w for w in words]


def _block(predicate):
    found = [b for b in BLOCKS if predicate(b)]
    assert len(found) == 1, f"expected one README block, found {[b.id for b in found]}"
    return found[0]


SETUP = _block(lambda b: b.lang == "bash" and "python3.11 -m venv" in b.text)
TESTS = _block(lambda b: b.lang == "bash" and "pytest" in b.text)
SWEEP = _block(lambda b: b.lang == "bash" and "isparse-run -m" in b.text)
UI = _block(lambda b: b.lang == "bash" and "mlflow ui" in b.text)
SITE = _block(lambda b: b.lang == "bash" and "sphinx-build" in b.text)
BENCH = _block(lambda b: b.lang == "bash" and "-m benchmarks" in b.text)
LAYOUT = _block(lambda b: b.lang == "text" and "pipeline/" in b.text)
CITATION = _block(lambda b: b.lang == "text" and "@inproceedings" in b.text)
HANDLED = {SETUP, TESTS, SWEEP, UI, SITE, BENCH, LAYOUT, CITATION} | {b for b in BLOCKS if b.lang == "python"}


def test_every_readme_block_is_run_by_a_test():
    assert set(BLOCKS) == HANDLED, f"README blocks no test runs: {[b.id for b in set(BLOCKS) - HANDLED]}"
    assert len(README.read_bytes()) <= 12 * 1024, f"README.md is {len(README.read_bytes())} bytes (at most 12 KB)"


@pytest.mark.parametrize("block", [SETUP, TESTS, SITE], ids=lambda b: b.id)
def test_the_setup_test_and_site_commands_are_what_ci_runs(block):
    """.ci/run runs these lines as written, on a clean clone (the README's first two commands, the site's build)."""
    ci_lines = {line.strip() for line in CI.splitlines()}
    for command in _commands(block):
        assert command in ci_lines, f"{block.id}: .ci/run does not run {command!r}"


def test_the_slow_test_command_the_readme_names_is_what_ci_runs():
    slow = re.search(r"`(\.venv/bin/python -m pytest -m slow)`", README.read_text())
    assert slow and any(line.strip().endswith(slow.group(1)) for line in CI.splitlines())


@pytest.mark.slow          # the default run of the default suite: tests/test_pipeline.py
def test_the_first_command_s_run(tmp_path):
    """The first command's last part, ``isparse-run`` on its embedded default, exits 0 and logs one finished run."""
    run = [c for c in SETUP.text.split("&&") if "isparse-run" in c]
    assert [c.strip() for c in run] == [".venv/bin/isparse-run"]
    r = subprocess.run(_argv(run[0], tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = MlflowClient(f"sqlite:///{tmp_path}/outputs/mlflow.db").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{tmp_path}/outputs/mlflow.db").search_experiments()])
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert runs[0].data.metrics["log10_dist_sq_rel"] < -5          # it converged (tol: ‖x − x*‖² ≤ 1e-8 r_0 by default)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The README's sweep, run as written in a temporary directory: its MLflow store."""
    cwd = tmp_path_factory.mktemp("readme_sweep")
    (command,) = _commands(SWEEP)
    r = subprocess.run(_argv(command, cwd), cwd=cwd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return cwd


@pytest.mark.slow
def test_the_sweep_logs_a_parent_and_its_jobs(swept):
    client = MlflowClient(f"sqlite:///{swept}/outputs/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 4                   # algorithm × workers.n: 2 × 2 jobs
    assert {(r.data.params["algorithm.name"], r.data.params["workers.n"]) for r in children} == {
        (a, n) for a in ("isega", "ibcd") for n in ("4", "16")}
    assert all(r.info.status == "FINISHED" for r in runs)


@pytest.mark.slow
def test_the_mlflow_ui_command_serves_the_runs(swept):
    """``mlflow ui`` as written (another free port), its page fetched, then stopped by its pid (never by name)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (command,) = _commands(UI)
    assert "--host 127.0.0.1" in command and "--port 5000" in command
    argv = _argv(command.replace("--port 5000", f"--port {port}"), swept)
    proc = subprocess.Popen(argv, cwd=swept, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ajax-api/2.0/mlflow/experiments/search?"
                                            "max_results=10", timeout=5) as page:
                    body = page.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, "mlflow ui did not serve"
                time.sleep(1)
        assert '"isparse"' in body                                      # the sweep's experiment
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_layout_names_what_exists():
    names = re.findall(r"^\s*([a-z_]+/)", LAYOUT.text, flags=re.M)
    assert len(names) >= 10
    for name in names:
        candidates = [ROOT / name, ROOT / "isparse" / name]
        assert any(c.is_dir() for c in candidates), f"the README's layout names {name}, which is not a directory"


def test_the_citation_is_a_bibtex_entry():
    assert re.search(r"@inproceedings\{\w+,.*arXiv:1901\.09437.*\}\s*$", CITATION.text, flags=re.S)


@pytest.mark.slow
def test_the_benchmark_command_runs_in_its_quick_form(tmp_path):
    """``python -m benchmarks`` as the README gives it, narrowed to one quick item (the full run is ~56 minutes)."""
    install, command = (c.strip() for c in _commands(BENCH)[0].split("&&"))
    assert install == ".venv/bin/pip install -e '.[test,bench]'"
    argv = _argv(command, tmp_path) + ["--quick", "--only", "9", "--out", str(tmp_path / "benchmarks.md")]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fixed costs" in (tmp_path / "benchmarks.md").read_text().lower()


def test_the_second_benchmark_command_names_the_map_and_keeps_the_other_items():
    """The README's second benchmark line runs item 12 (the crossover map) alone and merges the last full run."""
    from benchmarks.__main__ import ITEMS, RUNNERS

    command = _commands(BENCH)[1]
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/python", "-m", "benchmarks"]
    only = words[words.index("--only") + 1].split(",")
    assert only == ["12"] and set(only) <= set(ITEMS) and all(i in RUNNERS for i in only)
    assert words[words.index("--merge") + 1] == "outputs/benchmarks.json"
