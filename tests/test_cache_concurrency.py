"""One reference solve per key across parallel processes (issue 14): processes that ask isparse.cache for the same
missing key at once compute it once (a file lock around the compute), the others read what it wrote. Real
processes, released together by a start file; the computes are counted by the cache's own log lines."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import logging, os, sys, time
from pathlib import Path
import numpy as np
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(name)s %(message)s")
from isparse import build, load_dataset
ds = load_dataset("a1a")
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()                      # ready
while not go.exists():
    time.sleep(0.005)
s = build(algorithm="isega", data=ds, lam=1e-2, n=4, block_size=1, cache_dir=sys.argv[1])
np.save(sys.argv[4], np.concatenate([s.reference.x_star, s.problem.L_i]))
"""


@pytest.mark.slow   # three processes importing isparse and loading a1a: 10-15 s
@pytest.mark.needs_data
def test_parallel_processes_solve_a_key_once(tmp_path):
    k = 3
    cache, go = tmp_path / "cache", tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(cache), str(go), str(tmp_path / f"ready{i}"),
                               str(tmp_path / f"out{i}.npy")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env) for i in range(k)]
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready{i}").exists() for i in range(k)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a worker did not start"
            time.sleep(0.02)
        go.touch()                                       # all at once: each finds the key missing
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), outs
    solves = sum(o.count("cache: solving the reference problem") for o in outs)
    reads = sum(o.count("cache: reference of key") for o in outs)
    assert (solves, reads) == (1, k - 1), outs
    assert len(list(cache.glob("*.npz"))) == 1 and not list(cache.glob("*.tmp.npz"))
    results = [np.load(tmp_path / f"out{i}.npy") for i in range(k)]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])     # the waiters read the same x* and L_i
