"""Adding a method is one module and one config file (issue 20): written into a temporary directory, outside the
checkout, with an option of its own; the real ``isparse-run`` finds the config through ``hydra.searchpath`` and the
module through PYTHONPATH (``algorithm.module``), runs it on both engines with the same iterates, and refuses a bad
value of its option with the one-line error. No file of the checkout is touched (the session's end checks it)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

CLI = str(Path(sys.executable).parent / "isparse-run")

MODULE = '''"""IBCD with its step damped by a factor of its own: a method defined outside isparse."""
from dataclasses import dataclass

from isparse.methods.base import AlgorithmOptions, Method
from isparse.params import Interval, param
from isparse.theory import NoBound, theorem1_stepsize


@dataclass
class DampedOptions(AlgorithmOptions):
    damping: float = param(0.5, Interval(float, 0.0, 1.0, low_open=True), "the factor on Theorem 1's step")


class DampedIBCD(Method):
    name = "damped_ibcd"
    options = DampedOptions
    stepsize = staticmethod(theorem1_stepsize)

    @classmethod
    def configure(cls, ctx):
        method, _ = super().configure(ctx)
        method.gamma *= ctx.options.damping
        return method, NoBound(theorem="no theorem covers damped_ibcd", gamma_theory=method.gamma, gamma=method.gamma)

    def worker_step(self, data, state, x, t, donate=False):
        U = self.sample(data.ids, t)
        pc, pw = self.coords_batch(U)
        return self.messages(data, t, U, pw, self.local_grads_at(data, x, U, pw, pc)), state

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state
'''

CONFIG = """# IBCD with a damped step (tests/test_new_method.py): the module that defines it, and its option's default
name: damped_ibcd
module: damped_ibcd
damping: 0.5
"""


@pytest.fixture
def new_method(tmp_path):
    """The method's module (in <tmp>/pkg) and its config file (in <tmp>/conf/algorithm), nothing else."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "damped_ibcd.py").write_text(MODULE)
    (tmp_path / "conf" / "algorithm").mkdir(parents=True)
    (tmp_path / "conf" / "algorithm" / "damped_ibcd.yaml").write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkg"), os.environ.get("PYTHONPATH", "")])}
    return tmp_path, env


def _run(tmp_path, env, out, *overrides):
    return subprocess.run([CLI, f"paths.outputs={out}", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                           "algorithm=damped_ibcd", "progress=false", "checkpoint.every=0", "max_iter=60", "tol=0",
                           "tracking.log_every=20", *overrides], capture_output=True, text=True, env=env, timeout=300)


def _x_final(out):
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["algorithm.damping"] == "0.25"
    return np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out))), run


def test_a_method_from_one_module_and_one_config_file_runs_on_both_engines(new_method):
    tmp_path, env = new_method
    runs = {}
    for engine in ("inprocess", "dask"):
        out = tmp_path / f"out-{engine}"
        proc = _run(tmp_path, env, out, f"engine={engine}", "algorithm.damping=0.25", "cluster.n_workers=2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[engine] = _x_final(out)
    (x_in, run_in), (x_dask, run_dask) = runs["inprocess"], runs["dask"]
    np.testing.assert_array_equal(x_in, x_dask)                      # the same iterates on both engines
    assert run_in.data.metrics["iterations"] == 60 and np.abs(x_in).max() > 0
    # its option reached the method: gamma is 0.25 x Theorem 1's 1/(2L(tau + 2(1 - tau)/n)), from the logged L, tau, n
    p = run_in.data.params
    L, tau, n = float(p["L"]), float(p["tau"]), int(p["n"])
    assert float(p["gamma"]) == pytest.approx(0.25 / (2 * L * (tau + 2 * (1 - tau) / n)), rel=1e-12)
    assert run_in.data.tags["bound_theorem"] == "no theorem covers damped_ibcd"
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir() if p.name != "__pycache__") == ["damped_ibcd.py"]


@pytest.mark.parametrize("override, message", [
    ("algorithm.damping=2", "The 'algorithm.damping' parameter must be in (0, 1]; got 2."),
    ("algorithm.damping=none", "The 'algorithm.damping' parameter must be a number in (0, 1]; got 'none'."),
    ("+algorithm.dampng=0.1", "The 'algorithm.dampng' parameter is not a key of algorithm=damped_ibcd (it would be "
                              "ignored); known: name, module, damping."),
    ("algorithm.module=no_such_module", "The 'algorithm.module' parameter must name an importable Python module"),
])
def test_its_bad_option_is_one_line_and_status_2(new_method, override, message):
    tmp_path, env = new_method
    proc = _run(tmp_path, env, tmp_path / "out", "engine=inprocess", override)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"isparse-run: error: {message}"), proc.stderr
    assert not (tmp_path / "out" / "mlflow.db").exists()              # refused before any work
