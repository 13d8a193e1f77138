"""The benchopt benchmark (benchmarks/benchopt_logreg_l2, issue 23): the lambda conversion against scikit-learn, a real
``benchopt run`` whose columns are checked against numbers derived here, and ``benchopt test`` in this environment.

benchopt's community benchmark_logreg_l2 minimizes sum_j log(1 + exp(-y_j a_j^T beta)) + (lmbd/2)||beta||^2; isparse
minimizes the mean plus (lam/2)||x||^2: the same minimizer for lmbd = lam N, and the sum is N times the mean."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "benchopt_logreg_l2"
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _leaves_the_benchmark_as_found():
    """benchopt keeps a joblib cache (``__cache__``) and its outputs in the benchmark's folder: removed after each
    test that made them (the session must leave the checkout as it found it)."""
    made = [BENCH / name for name in ("__cache__", "outputs") if not (BENCH / name).exists()]
    yield
    import shutil

    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def _community_loss(X, y, lmbd, beta):
    """benchmark_logreg_l2's objective, written out: a sum of log-losses plus lmbd/2 ||beta||^2."""
    return float(np.sum(np.log1p(np.exp(-y * (X @ beta)))) + 0.5 * lmbd * float(beta @ beta))


@pytest.mark.needs_data
def test_lambda_conversion_against_scikit_learn():
    """On a1a at the paper's lam = 1e-3: scikit-learn's LogisticRegression(C = 1/lmbd) with lmbd = lam N (the
    community convention) finds isparse's x* (its reference solve), and the community's loss there is N x isparse's
    F*; the benchmark's own objective (objective.py) gives the mean."""
    from sklearn.linear_model import LogisticRegression

    from isparse import load_dataset
    from specs import make

    data = load_dataset("a1a", data_dir=str(DATA_DIR))
    lam, N = 1e-3, data.N
    setup = make(algorithm="isega", data=data, lam=lam, n=4)
    x_star, F_star = setup.reference.x_star, setup.reference.F_star
    clf = LogisticRegression(C=1.0 / (lam * N), fit_intercept=False, tol=1e-12, max_iter=10_000).fit(data.A, data.b)
    beta = clf.coef_.ravel()
    assert np.linalg.norm(beta - x_star) <= 1e-5 * np.linalg.norm(x_star)
    assert _community_loss(data.A, data.b, lam * N, beta) == pytest.approx(N * F_star, rel=1e-9)
    sys.path.insert(0, str(BENCH))
    try:
        from objective import logistic_F
    finally:
        sys.path.remove(str(BENCH))
    assert logistic_F(data.A, data.b, lam, x_star) == pytest.approx(F_star, rel=1e-12)
    assert logistic_F(data.A, data.b, lam, beta) * N == pytest.approx(_community_loss(data.A, data.b, lam * N, beta),
                                                                      rel=1e-12)


def _benchopt(*args, timeout=600):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", ISPARSE_DATA_DIR=str(DATA_DIR))
    return subprocess.run([str(BIN / "benchopt"), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


@pytest.mark.slow
def test_benchopt_run_reports_bytes_rounds_and_the_bound(tmp_path):
    """``benchopt run`` on the simulated set (N = 200, d = 20) with isparse's ISEGA (n = 10, tau = 1/n, the theorem's
    step) and scipy's L-BFGS-B: one run per curve (callback sampling: every point is an iteration of one run); at each
    point rounds = the iteration, uplink bytes = rounds x n x tau m x 8 B (values only), the bound column Theorem 3's
    at that iteration (the run rebuilt with lam = lmbd / N) and ||beta - x*||^2 under it at the end; both solvers
    reach F* (scikit-learn's, at high precision, here)."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    out = tmp_path / "run"
    proc = _benchopt("run", str(BENCH), "-d", "Simulated", "-s", "isparse[algorithm=isega,tau='1/n']", "-s", "scipy-lbfgsb",
                     "-n", "40", "--timeout", "60", "--no-plot", "--no-html", "--no-cache", "--output", str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    df = pd.read_parquet(f"{out}.parquet")
    isega = df[df.solver_name.str.startswith("isparse[isega[n=10,tau=1/n,")].sort_values("stop_val")
    assert set(df.solver_name) == {"scipy-lbfgsb", "isparse[isega[n=10,tau=1/n,b=1,float64,inprocess]]"}
    lbfgs = df[df.solver_name == "scipy-lbfgsb"]
    assert len(isega) >= 20 and isega.idx_rep.nunique() == 1
    n, tau_m = 10, 2   # m = 20 blocks of 1, tau m = ceil(20 / 10)
    assert (isega.objective_rounds == isega.stop_val).all()
    assert np.array_equal(isega.objective_uplink_bytes, isega.stop_val * n * tau_m * 8.0)
    assert lbfgs.objective_uplink_bytes.isna().all() and lbfgs.objective_bound.isna().all()

    import importlib.util

    spec = importlib.util.spec_from_file_location("simulated", BENCH / "datasets" / "simulated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    X, y = module.simulated(200, 20)   # the benchmark's own simulated set
    lam = 1e-3
    clf = LogisticRegression(C=1.0 / (lam * len(y)), fit_intercept=False, tol=1e-14, max_iter=100_000).fit(X, y)
    beta = clf.coef_.ravel()
    F_star = float(np.mean(np.logaddexp(0, -y * (X @ beta))) + 0.5 * lam * beta @ beta)
    for frame in (isega, lbfgs):
        last = frame.sort_values("stop_val").iloc[-1]
        assert last.objective_value - F_star <= 1e-9 * abs(F_star)
    import scipy.sparse as sp

    from isparse import Dataset
    from specs import make

    setup = make(algorithm="isega", data=Dataset(sp.csr_matrix(X), y, "simulated", "test"), lam=lam, n=10, tau="1/n")
    assert np.allclose(isega.objective_bound, [setup.bound(int(t)) for t in isega.stop_val], rtol=1e-12, atol=0)
    last = isega.iloc[-1]
    assert math.isfinite(last.objective_bound) and last.objective_dist_sq <= last.objective_bound
    assert last.objective_dist_sq == pytest.approx(float(np.sum((beta - setup.reference.x_star) ** 2)), abs=1e-10)


@pytest.mark.slow
def test_benchopt_test_passes_in_this_environment():
    """``benchopt test`` of the benchmark, in this environment (no ``--env-name``: benchopt then runs its pytest
    suite with the ``python`` on PATH; ``--skip-install``: the install checks would create a conda environment)."""
    proc = _benchopt("test", str(BENCH), "--skip-install", "-q", timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_on_iteration_hook_stops_where_told_and_changes_nothing():
    """The master loop's per-iteration hook (what the benchopt solver's callback rides on): called at t = 0 and after
    each iteration, it sees the iterates of a run without it bit for bit and the uplink counted so far
    (t x n x tau m x 8 B); returning False at t = 30 ends the run there."""
    from specs import make

    setup = make(algorithm="isega", lam=0.1, n=4)   # breast cancer: d = 30, tau m = ceil(30 / 4) = 8
    plain = setup.run(max_iter=40, tol=0.0, keep_iterates=True)
    seen = []

    def hook(loop):
        seen.append((loop.t, loop.current().copy(), loop.uplink_bytes, loop.bound_now()))
        return loop.t < 30

    hooked = setup.run(max_iter=2 ** 62, tol=0.0, log_every=2 ** 62, on_iteration=hook)
    assert hooked.iterations == 30 and [t for t, *_ in seen] == list(range(31))
    for t, x, up, bound in seen:
        assert np.array_equal(x, plain.iterates[t]) and up == t * 4 * 8 * 8
        assert bound == setup.bound(t)
    assert np.array_equal(hooked.x, plain.iterates[30])


def test_rewriting_the_benchmark_doc_keeps_the_items_with_their_own_command():
    """``python -m benchmarks`` rewrites docs/benchmarks.md from its items 1-9; items 10 (codecs) and 11 (benchopt),
    written by their own commands, keep their goal lines and sections."""
    from benchmarks import report

    previous = (ROOT / "docs" / "benchmarks.md").read_text()
    ctx = {"machine": {k: "?" for k in ("cpu", "cores", "ram", "os", "python")}, "versions": {}, "date": "today",
           "quick": True, "load_before": "0"}
    text = report.render(ctx, {}, {}, previous)
    for k in report.STANDALONE:
        goal = next(line for line in previous.splitlines() if line.startswith(f"- **{k}. "))
        head = next(line for line in previous.splitlines() if line.startswith(f"## {k}. "))
        assert goal in text.splitlines() and head in text.splitlines()
        body = previous[previous.index(head):].split("\n## ")[0]
        assert body in text
    assert "## 1. " not in text   # the items of this run only (none here)
