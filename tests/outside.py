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


def run_outside(tmp_path: Path, env: dict, out: Path, *overrides: str, max_iter: int = 60) -> subprocess.CompletedProcess:
    """``isparse-run`` with ``<tmp>/conf`` on the search path, a short run (no progress bar, no checkpoints, tol=0,
    ``max_iter`` iterations logged every 20), its store under ``out``."""
    return subprocess.run([CLI, f"paths.outputs={out}", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                           "progress=false", "checkpoint.every=0", f"max_iter={max_iter}", "tol=0", "tracking.log_every=20",
                           *overrides], capture_output=True, text=True, env=env, timeout=300)
