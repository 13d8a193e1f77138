"""Shared helpers: timing (median of repetitions), the machine and versions, data loading, markdown tables."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import time
from importlib import metadata

import numpy as np


def median_time(fn, reps: int, inner: int = 1) -> float:
    """Median over ``reps`` repetitions of the mean wall time (s) of ``inner`` calls of ``fn()``."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return statistics.median(out)


def load(name: str):
    """A LIBSVM data set of ../shared/datasets (or $ISPARSE_DATA_DIR) through the library's loader."""
    from isparse import load_dataset

    return load_dataset(name, data_dir=data_dir())


#: the benchmarks' short keywords -> the config keys of a run (``isparse.spec.RunSpec``)
KEYS = {"n": "workers.n", "block_size": "blocks.size", "lam": "problem.lam", "tau": "tau", "seed": "seed",
        "step_multiplier": "step.multiplier", "step_rule": "step.rule"}


def setup(algorithm: str, *, data=None, reference=None, cache_dir=None, **keys):
    """``isparse.build`` of the run of ``algorithm`` with the keys ``keys`` (short names, :data:`KEYS`) on ``data``
    (a Dataset in memory), checked as isparse-run's config is."""
    from isparse import RunSpec, build

    spec = RunSpec.from_dict({"algorithm": algorithm, **{KEYS[k]: v for k, v in keys.items()}})
    return build(spec, data=data, reference=reference, cache_dir=cache_dir)


def data_dir() -> str:
    """$ISPARSE_DATA_DIR, else ../shared/datasets next to the repository (as the tests do)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    return os.environ.get("ISPARSE_DATA_DIR") or str(root.parent / "shared" / "datasets")


def machine() -> dict:
    """CPU model, cores, RAM, OS, load average."""
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram": ram, "os": platform.platform(),
            "python": platform.python_version(), "load": load_average()}


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def versions(names=("isparse", "numpy", "scipy", "scikit-learn", "dask", "distributed", "dask-ml", "dask-glm",
                    "psutil")) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    try:
        out["git commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["git commit"] = "?"
    out.update(library_identity())
    return out


def library_identity() -> dict:
    """Which ``isparse`` this process imports (it may be a frozen copy, see docs/benchmarking.md) and whether
    its files are those of git HEAD: git blob hashes of every file of the imported package against ``git ls-tree``."""
    import hashlib
    from pathlib import Path

    import isparse

    pkg = Path(isparse.__file__).resolve().parent
    root = Path(__file__).resolve().parent.parent
    where = str(pkg.relative_to(root)) if pkg.is_relative_to(root) else str(pkg)
    try:
        tree = subprocess.run(["git", "ls-tree", "-r", "HEAD", "--", "isparse"], capture_output=True, text=True,
                              check=True, cwd=root).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"isparse imported from": where, "isparse vs HEAD": "?"}
    head = {}
    for line in tree.splitlines():
        meta, path = line.split("\t", 1)
        head[path[len("isparse/"):]] = meta.split()[2]
    local = {}
    for f in pkg.rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts:
            data = f.read_bytes()
            local[str(f.relative_to(pkg))] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    differ = sorted(k for k in set(head) | set(local) if head.get(k) != local.get(k))
    digest = hashlib.sha256("".join(f"{k}{v}" for k, v in sorted(local.items())).encode()).hexdigest()[:12]
    return {"isparse imported from": where,
            "isparse vs HEAD": ("identical to HEAD's isparse/" if not differ else
                                f"differs from HEAD in {len(differ)} files ({', '.join(differ[:6])}"
                                + (", ..." if len(differ) > 6 else "") + ")") + f"; files sha256 {digest}"}


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def table(header: list[str], rows: list[list]) -> str:
    """A markdown table; floats formatted with 3 significant digits."""
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            if v != v:
                return "–"
            return f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def verdict(ratio: float, goal: float) -> str:
    return f"**met** ({ratio:.2f} ≤ {goal:g})" if ratio <= goal else f"**not met** ({ratio:.2f} > {goal:g})"
