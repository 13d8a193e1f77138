"""One reference solve and one parse of a data file per key across parallel processes (issue 14): processes that ask
isparse.cache for the same missing key at once compute it once (a file lock around the compute), the others read
what it wrote. Real processes, released together by a start file; the computes are counted by the cache's own log
lines."""

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
logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format="%(name)s %(message)s")
from isparse import RunSpec, build, load_dataset
ds = load_dataset("a1a")
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()                      # ready
while not go.exists():
    time.sleep(0.005)
s = build(RunSpec.from_dict({"problem.lam": 1e-2, "workers.n": 4}), data=ds, cache_dir=sys.argv[1])
np.save(sys.argv[4], np.concatenate([s.reference.x_star, s.problem.L_i]))
"""


DATA_WORKER = r"""
import logging, os, sys, time
from pathlib import Path
import numpy as np
logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format="%(name)s %(message)s")
from isparse import source
import isparse.cache
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()                      # ready
while not go.exists():
    time.sleep(0.005)
ds = source("a1a").dataset(cache_dir=sys.argv[1])
A = ds.A.tocsr()
np.savez(sys.argv[4], data=A.data, indices=A.indices, indptr=A.indptr, b=ds.b, shape=A.shape)
"""


def _released_together(tmp_path, script, k=3):
    """Run ``script`` in ``k`` real processes (argv: cache dir, start file, ready file, output file), released at
    once by the start file; returns (cache dir, their outputs)."""
    cache, go = tmp_path / "cache", tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("ISPARSE_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(cache), str(go), str(tmp_path / f"ready{i}"),
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
    return cache, outs


def _assert_made_once(cache, outs, k, made_line, read_line, pattern):
    """Of k processes' outputs: one made the entry (``made_line``), k - 1 read it (``read_line``); one file of
    ``pattern`` in the cache and no temporary left."""
    made = sum(o.count(made_line) for o in outs)
    reads = sum(o.count(read_line) for o in outs)
    assert (made, reads) == (1, k - 1), outs
    assert len(list(cache.glob(pattern))) == 1 and not list(cache.glob("*.tmp.npz"))


@pytest.mark.slow   # three processes importing isparse and loading a1a: 10-15 s
@pytest.mark.needs_data
def test_parallel_processes_solve_a_key_once(tmp_path):
    k = 3
    cache, outs = _released_together(tmp_path, WORKER, k)
    _assert_made_once(cache, outs, k, "cache: making the reference problem",
                      "cache: the reference problem (x*, L_i) of key", "*.npz")
    results = [np.load(tmp_path / f"out{i}.npy") for i in range(k)]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])     # the waiters read the same x* and L_i


@pytest.mark.slow   # three processes importing pipeline: 10-15 s
@pytest.mark.needs_data
def test_parallel_jobs_parse_a_data_file_once(tmp_path):
    """isparse-run's data load with a cache (``DataSource.dataset(cache_dir)``, as each job of a joblib or
    Dask-launched sweep calls it): one process parses a1a, the others read its arrays, equal to a parse of the file by scikit-learn."""
    from sklearn.datasets import load_svmlight_file

    k = 3
    cache, outs = _released_together(tmp_path, DATA_WORKER, k)
    _assert_made_once(cache, outs, k, "cache: making the data set a1a of key", "cache: the data set a1a of key",
                      "data-*.npz")
    from isparse import source

    X, y = load_svmlight_file(str(source("a1a").file()), n_features=123)
    for i in range(k):
        with np.load(tmp_path / f"out{i}.npy.npz") as z:
            assert tuple(z["shape"]) == X.shape
            np.testing.assert_array_equal(z["indptr"], X.indptr)
            np.testing.assert_array_equal(z["indices"], X.indices)
            np.testing.assert_array_equal(z["data"], X.data)
            np.testing.assert_array_equal(np.sign(z["b"]), np.sign(y))


# -- a damaged entry (issue 34): derived data, so it is made again, with one warning naming the file -------------------
def _damage_truncated(path):
    os.truncate(path, 1000)


def _damage_empty(path):
    os.truncate(path, 0)


def _damage_garbage(path):
    path.write_bytes(b"not an npz file\n" * 10)


def _damage_crc(path):   # the zip's directory intact, a member's bytes changed: "Bad CRC-32"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 16] = b"x" * 16
    path.write_bytes(bytes(raw))


def _damage_missing_array(path):   # a readable npz without one of the arrays its caller needs
    np.savez(path.with_suffix(".tmp.npz"), x=np.arange(3.0))
    os.replace(path.with_suffix(".tmp.npz"), path)


DAMAGE = {"truncated": (_damage_truncated, "BadZipFile: File is not a zip file"),
          "empty": (_damage_empty, "not an npz file: 0 bytes without the zip header"),
          "garbage": (_damage_garbage, "not an npz file: 160 bytes without the zip header"),
          "bad_crc": (_damage_crc, "Bad CRC-32"),
          "missing_array": (_damage_missing_array, "no array 'y'")}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_entry_is_made_again_with_one_warning(tmp_path, caplog, case):
    import logging

    from isparse.cache import load_or_make

    calls = []

    def make():
        calls.append(1)
        return {"x": np.arange(2000.0), "y": np.array("label")}

    first, hit = load_or_make(tmp_path, "k", make, "the entry", names=("x", "y"))
    assert not hit and len(calls) == 1
    damage, why = DAMAGE[case]
    damage(tmp_path / "k.npz")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="isparse.cache"):
        again, hit = load_or_make(tmp_path, "k", make, "the entry", names=("x", "y"))
    assert not hit and len(calls) == 2                     # made again: no exception, no stale read
    np.testing.assert_array_equal(again["x"], first["x"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"cache: {tmp_path / 'k.npz'} is damaged (") and why in warnings[0]
    assert warnings[0].endswith("); making the entry again") and "\n" not in warnings[0]
    # the file written again is whole: the next call reads it, without making or warning
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="isparse.cache"):
        read, hit = load_or_make(tmp_path, "k", make, "the entry", names=("x", "y"))
    assert hit and len(calls) == 2 and not [r for r in caplog.records if r.levelno == logging.WARNING]
    np.testing.assert_array_equal(read["x"], first["x"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.lock", "k.npz"]   # no temporary left


@pytest.mark.slow   # three processes importing pipeline: 10-15 s
@pytest.mark.needs_data
def test_parallel_jobs_make_a_damaged_data_set_once(tmp_path):
    """The parsed a1a of the cache truncated (``truncate -s 1000``) and three jobs released at once: one warns and
    parses the file again, the two others wait for it and read what it wrote; no error."""
    from isparse import source
    from isparse.cache import file_key

    a1a = source("a1a")
    entry = tmp_path / "cache" / f"{file_key(a1a.file(), a1a.cache_options())}.npz"
    entry.parent.mkdir()
    entry.write_bytes(b"PK\x03\x04" + b"\0" * 996)   # a zip header, then nothing: as `truncate -s 1000` leaves it
    k = 3
    cache, outs = _released_together(tmp_path, DATA_WORKER, k)
    assert sum(o.count(f"cache: {entry} is damaged (BadZipFile: File is not a zip file); making the data set a1a "
                       f"again") for o in outs) == 1, outs
    _assert_made_once(cache, outs, k, "cache: making the data set a1a of key", "cache: the data set a1a of key",
                      "data-*.npz")
    outputs = [np.load(tmp_path / f"out{i}.npy.npz") for i in range(k)]
    for z in outputs[1:]:
        np.testing.assert_array_equal(z["data"], outputs[0]["data"])
