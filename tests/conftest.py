"""Shared fixtures: the shared LIBSVM data directory, a real Dask LocalCluster, Hydra configs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # benchmarks/ (its synthetic data generator) is importable from the tests
DATA_DIR = Path(os.environ.get("ISPARSE_DATA_DIR", ROOT.parent / "shared" / "datasets")).resolve()
os.environ["ISPARSE_DATA_DIR"] = str(DATA_DIR)
CONF_DIR = ROOT / "conf"

import pipeline.schema  # noqa: E402,F401 - registers the config's schema with Hydra's ConfigStore (compose's)


def _checkout_entries() -> set[str] | None:
    """What ``git status --porcelain --ignored`` lists in the checkout (bytecode caches and pytest's cache left out),
    or None outside a git checkout."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--ignored"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {line for line in out.stdout.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line}


def pytest_sessionstart(session):
    session.config._checkout_before = _checkout_entries()


def pytest_sessionfinish(session, exitstatus):
    """The test session must leave the checkout as it found it (tests write under their tmp_path): an entry that
    ``git status --porcelain --ignored`` did not list before (an ``mlruns/`` of MLflow's default artifact location,
    an ``outputs/``) fails the session."""
    before = getattr(session.config, "_checkout_before", None)
    after = _checkout_entries()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        session.config.get_terminal_writer().line(
            f"the test session changed the checkout {ROOT}: {', '.join(new)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    if not (DATA_DIR / "mushrooms").is_file():
        skip = pytest.mark.skip(reason=f"the shared LIBSVM files are not at {DATA_DIR} (set ISPARSE_DATA_DIR)")
        for item in items:
            if "needs_data" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def dask_client():
    """A real LocalCluster of 2 worker processes on 127.0.0.1."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster, direct_to_workers=True) as client:
        yield client


@pytest.fixture
def compose():
    """Compose the real conf/ with overrides (Hydra's compose API), as isparse-run would."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    def make(overrides=()):
        from hydra.core.hydra_config import HydraConfig

        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = _compose("config", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)  # as Hydra does for a job: ${hydra:...} resolves
        return cfg

    return make
