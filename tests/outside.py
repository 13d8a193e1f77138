"""A module and its config file written outside the checkout, as a user adds a method or a codec of their own: the
module in ``<tmp>/pkg`` (put on PYTHONPATH, so the Dask workers import it too), the config file in
``<tmp>/conf/<group>/<name>.yaml``, and ``isparse-run`` started with that config directory on Hydra's search path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).parent / "isparse-run")


def write_outside(tmp_path: Path, module_name: str, module: str, group: str, config: str,
                  option: str | None = None) -> tuple[Path, dict]:
    """Write ``<tmp>/pkg/<module_name>.py`` and ``<tmp>/conf/<group>/<option>.yaml`` (``option`` default: the module's
    name); return (tmp_path, the environment whose PYTHONPATH starts with ``<tmp>/pkg``)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / f"{module_name}.py").write_text(module)
    (tmp_path / "conf" / group).mkdir(parents=True)
    (tmp_path / "conf" / group / f"{option or module_name}.yaml").write_text(config)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkg"), os.environ.get("PYTHONPATH", "")])}
    return tmp_path, env


def on_both_engines(run, tmp_path: Path, env: dict, *overrides: str) -> dict:
    """{engine: (x_final, its MLflow run)} of ``run(tmp_path, env, out, "engine=<engine>", *overrides,
    "cluster.n_workers=2")`` for engine=inprocess and dask, its store under ``out = <tmp>/out-<engine>``: each run
    finishes, and both engines' final iterates are the same to the bit."""
    import numpy as np
    from mlflow.tracking import MlflowClient

    runs = {}
    for engine in ("inprocess", "dask"):
        out = tmp_path / f"out-{engine}"
        proc = run(tmp_path, env, out, f"engine={engine}", *overrides, "cluster.n_workers=2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        client = MlflowClient(f"sqlite:///{out}/mlflow.db")
        (found,) = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
        assert found.info.status == "FINISHED"
        runs[engine] = np.load(client.download_artifacts(found.info.run_id, "x_final.npy", str(out))), found
    np.testing.assert_array_equal(runs["inprocess"][0], runs["dask"][0])   # the same iterates on both engines
    return runs


def refused_in_one_line(proc: subprocess.CompletedProcess, message: str, out: Path) -> str:
    """Check that ``isparse-run`` refused with status 2 and one line of stderr starting ``isparse-run: error:
    <message>``, before any work (no store under ``out``); return that line."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"isparse-run: error: {message}"), proc.stderr
    assert not (out / "mlflow.db").exists()              # refused before any work
    return lines[0]


def run_outside(tmp_path: Path, env: dict, out: Path, *overrides: str, max_iter: int = 60) -> subprocess.CompletedProcess:
    """``isparse-run`` with ``<tmp>/conf`` on the search path, a short run (no progress bar, no checkpoints, tol=0,
    ``max_iter`` iterations logged every 20), its store under ``out``."""
    return subprocess.run([CLI, f"paths.outputs={out}", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                           "progress=false", "checkpoint.every=0", f"max_iter={max_iter}", "tol=0", "tracking.log_every=20",
                           *overrides], capture_output=True, text=True, env=env, timeout=300)
